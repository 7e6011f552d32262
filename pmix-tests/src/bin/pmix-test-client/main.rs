//! The scenario client the integration tests start as real processes.
//!
//! `pmix-test-client <scenario> [args...]`: exits 0 when every check of the scenario passed,
//! otherwise prints what failed and exits 1.
//!
//! The scenarios, by the module that holds them (each function's doc says what it checks
//! and what it prints):
//! - `fences`: `fence <spec> <flags>`, `allgather`, `late-key`, `fence-timeout`,
//!   `stuck-fence <rank> <status|park>` (SIGTERM blocked before init);
//! - `put_get`: `replace <N> <replaced indices>`, `internal <N>`, `get-semantics`,
//!   `refresh`, `scope`;
//! - `job_data`: `jobinfo`, `anl-map [MAP]`, `appinfo <appnum> <number of apps>`,
//!   `nodeinfo`; `oversubscribed`;
//! - `groups`: `groups`, `group-fence`, `psets <n> <names> <members>`;
//! - `lifecycle`: `expect-refused <status>` (whose init is the check), `double-init`,
//!   `init-cycle <N>`, `exit-early` (exits 3 right after init), `exit-rank <rank> <status>`,
//!   `abort <status> [park]`, `hang`;
//! - `recovery`: `recovery <rank> <status> [timed|untimed] [exit-nonzero]`,
//!   `restart <rank> <status> <dir>`;
//! - `tool`: `tool`.
//!
//! Every other scenario starts after the init `run` makes, which finalizes once it returns
//! (those that exit or wait to be killed never do). The helpers the scenarios share live
//! with their concern: `job_data::job_size`, `lifecycle::park_forever`, `fences::fence_key`
//! and `fence_value`.

mod fences;
mod groups;
mod job_data;
mod lifecycle;
mod put_get;
mod recovery;
mod tool;

use std::process::ExitCode;

use pmix_client::Client;
use pmix_tests::scenario::{Res, e};

use fences::{allgather, fence, fence_timeout, late_key, stuck_fence};
use groups::{group_fence, groups, psets};
use job_data::{anl_map, appinfo, jobinfo, nodeinfo, oversubscribed};
use lifecycle::{
    abort, double_init, exit_rank, expect_refused, finalize_barrier, hang, init_cycle,
};
use put_get::{get_semantics, internal, refresh, replace, scope};
use recovery::{recovery, restart};
use tool::tool;

fn run(args: &[String]) -> Res {
    let scenario = args.first().map(String::as_str).unwrap_or("");
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    if scenario == "expect-refused" {
        return expect_refused(arg(1));
    }
    if scenario == "stuck-fence" {
        // Before init, so that the client's threads block it too.
        let term = nix::sys::signal::SigSet::from(nix::sys::signal::Signal::SIGTERM);
        nix::sys::signal::pthread_sigmask(
            nix::sys::signal::SigmaskHow::SIG_BLOCK,
            Some(&term),
            None,
        )
        .map_err(e("blocking SIGTERM"))?;
    }
    let c = Client::init().map_err(e("init"))?;
    let result = match scenario {
        "fence" => fence(&c, arg(1), arg(2)),
        "replace" => replace(&c, arg(1).parse().map_err(e("N"))?, arg(2)),
        "internal" => internal(&c, arg(1).parse().map_err(e("N"))?),
        "get-semantics" => get_semantics(&c),
        "jobinfo" => jobinfo(&c),
        "anl-map" => anl_map(&c, arg(1)),
        "refresh" => refresh(&c),
        "groups" => groups(&c),
        "group-fence" => group_fence(&c),
        "tool" => tool(&c),
        "psets" => psets(&c, arg(1), arg(2), arg(3)),
        "scope" => scope(&c),
        "double-init" => double_init(&c),
        "finalize-barrier" => finalize_barrier(&c),
        "init-cycle" => init_cycle(&c, arg(1)),
        "exit-early" => std::process::exit(3),
        "allgather" => allgather(&c),
        "late-key" => late_key(&c),
        "appinfo" => appinfo(&c, arg(1), arg(2)),
        "exit-rank" => exit_rank(&c, arg(1), arg(2)),
        "abort" => abort(&c, arg(1), arg(2)),
        "hang" => hang(&c),
        "fence-timeout" => fence_timeout(&c),
        "nodeinfo" => nodeinfo(&c),
        "oversubscribed" => oversubscribed(&c),
        "stuck-fence" => stuck_fence(&c, arg(1), arg(2)),
        "recovery" => recovery(&c, arg(1), arg(2), arg(3) == "timed", arg(4)),
        "restart" => restart(&c, arg(1), arg(2), arg(3), arg(4)),
        other => Err(format!("unknown scenario {other:?}")),
    };
    result?;
    c.finalize().map_err(e("finalize"))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => {
            println!("ok");
            ExitCode::SUCCESS
        }
        Err(msg) => {
            println!("FAILED: {msg}");
            ExitCode::FAILURE
        }
    }
}
