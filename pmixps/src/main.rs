//! `pmixps`: `ps` for PMIx jobs. A tool on `pmix_client::tool::Tool` that finds the user's
//! running `pmixrun`s by their rendezvous files, attaches to each, and prints every job's
//! process table (`docs/TOOLS.md`, "pmixps").
//!
//! It is a crate of its own rather than a binary of `pmixrun` because it is a client-side
//! program: it links `pmix-client` alone, the launcher links `pmix-server`, and neither needs
//! the other's dependencies.

mod list;
mod tail;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// List the running pmixrun jobs of this user and their processes.
#[derive(Parser, Debug)]
#[command(
    name = "pmixps",
    version,
    about = "List the running pmixrun jobs of this user and their processes",
    long_about = "List the running pmixrun jobs of this user and their processes.\n\n\
        pmixps finds every pmixrun of this node serving tools (every pmixrun typed does, \
        also the root of a run across nodes, which lists the processes of every node) by its \
        rendezvous file under the temporary directory, attaches to it as a PMIx tool, and \
        prints one line per process of each of its jobs: pmixrun's pid, the job's namespace, \
        the rank, the process's pid, its state, its host and its program. A pmixrun that \
        cannot be reached (killed, leaving its file behind) is reported on stderr and \
        skipped. Exit status: 0, or 1 when a pmixrun named with --pid is not found or not \
        reachable."
)]
struct Args {
    /// Only the pmixrun of this pid (may be repeated).
    #[arg(long, value_name = "PID")]
    pid: Vec<u32>,
    /// Where to look for pmixrun's rendezvous files; default $PMIX_SYSTEM_TMPDIR, else
    /// $TMPDIR, else /tmp (as pmixrun and libpmix tools).
    #[arg(long, value_name = "DIR")]
    tmpdir: Option<PathBuf>,
    /// Print no header line.
    #[arg(long)]
    no_header: bool,
    /// Instead of listing, follow the output of the job NSPACE (`rs-pmixrun-<pid>`): each line
    /// its processes write from now on, `[rank] ` in front, on stdout or stderr as they wrote
    /// it, until the job ends.
    #[arg(long, value_name = "NSPACE")]
    tail: Option<String>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let done = match &args.tail {
        Some(job) => tail::run(job, args.tmpdir),
        None => list::run(&list::Listing {
            pids: args.pid,
            tmpdir: args.tmpdir,
            header: !args.no_header,
        }),
    };
    match done {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("pmixps: {e}");
            ExitCode::from(2)
        }
    }
}
