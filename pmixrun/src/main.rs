//! `pmixrun`: the reference launcher, a host built only on the public API of `pmix-server`.
//!
//! It starts a PMIx server, registers one job (its application contexts, this node's maps),
//! starts every process with the environment `setup_fork` gives, forwards their output and
//! pmixrun's signals, and exits with the job's status. See `pmixrun --help`.

mod cli;
mod host;
mod job;
mod launch;
mod output;
mod supervise;

use std::process::ExitCode;
use std::time::Duration;

use crossbeam_channel::{Sender, unbounded};
use nix::sys::signal::{SigSet, Signal};
use pmix_server::types::{Nspace, Proc};
use pmix_server::{Server, ServerOptions};

use crate::host::{Event, RunHost};
use crate::supervise::Supervisor;

/// How long output still in the pipes may take to arrive once every process has ended (a
/// process's own children may hold the pipes open forever).
const OUTPUT_DRAIN: Duration = Duration::from_secs(2);

/// The signals pmixrun passes on to the job.
fn forwarded_signals() -> SigSet {
    let mut set = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(s);
    }
    set
}

/// Receives the forwarded signals on a dedicated thread. They must be blocked in every other
/// thread, hence before any thread is started: threads inherit the mask of their creator.
fn start_signal_thread(set: SigSet, events: Sender<Event>) -> Result<(), String> {
    std::thread::Builder::new()
        .name("signals".into())
        .stack_size(output::SMALL_STACK)
        .spawn(move || {
            while let Ok(sig) = set.wait() {
                if events.send(Event::Signal(sig)).is_err() {
                    break;
                }
            }
        })
        .map(drop)
        .map_err(|e| format!("cannot start the signal thread: {}", launch::describe(&e)))
}

fn init_logging(verbose: bool) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(if verbose { "debug" } else { "warn" }));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// Everything before the first process starts; an error here is a one-line message.
fn run(opts: cli::Options, signals: SigSet) -> Result<u8, String> {
    let layout = job::Layout::new(&opts.apps)?;
    let cwd = std::env::current_dir().map_err(|e| {
        format!(
            "cannot find the current directory: {}",
            launch::describe(&e)
        )
    })?;
    let wdirs: Vec<_> = opts.apps.iter().map(|a| job::wdir_of(a, &cwd)).collect();
    for (app, dir) in opts.apps.iter().zip(&wdirs) {
        if app.wdir.is_some() && !dir.is_dir() {
            return Err(format!("--wdir {}: not a directory", dir.display()));
        }
    }
    let user_env: Vec<_> = opts.apps.iter().map(launch::app_env).collect();
    let helper = std::env::current_exe()
        .map_err(|e| format!("cannot find pmixrun's executable: {}", launch::describe(&e)))?;

    let (events_tx, events) = unbounded();
    start_signal_thread(signals, events_tx.clone())?;
    let nspace = Nspace::new(format!("pmixrun-{}", std::process::id()))
        .map_err(|e| format!("cannot name the job: {e}"))?;
    let server = Server::init(
        RunHost::new(nspace.clone(), events_tx.clone()),
        ServerOptions::default(),
    )
    .map_err(|e| format!("cannot start the PMIx server: {e}"))?;
    let info = job::job_info(server.hostname(), &opts.apps, &layout, &cwd)?;
    server
        .register_nspace(&nspace, layout.size, &info)
        .map_err(|e| format!("cannot register the job: {e}"))?;
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    let procs: Vec<Proc> = (0..layout.size)
        .map(|r| Proc::new(nspace.clone(), r))
        .collect();
    for p in &procs {
        server
            .register_client(p, uid, gid)
            .map_err(|e| format!("cannot register {p}: {e}"))?;
    }

    let (lines_tx, lines) = unbounded();
    let output_done = output::start_writer(opts.tag_output, lines)
        .map_err(|e| format!("cannot start the output thread: {}", launch::describe(&e)))?;
    let mut sup = Supervisor::new(layout.size, opts.timeout);
    for (rank, p) in (0u32..).zip(&procs) {
        let a = layout.app_of(rank);
        let launched = server
            .setup_fork(p)
            .map_err(|e| launch::LaunchError {
                message: format!("cannot set up rank {rank}: {e}"),
                code: 1,
            })
            .and_then(|pmix_env| {
                let spawn = launch::Spawn {
                    helper: &helper,
                    rank,
                    app: &opts.apps[a],
                    user_env: &user_env[a],
                    pmix_env,
                    wdir: &wdirs[a],
                };
                launch::spawn(spawn, &events_tx, &lines_tx)
            });
        match launched {
            Ok(pid) => {
                tracing::debug!(rank, %pid, "started");
                sup.started(rank, pid);
            }
            Err(e) => {
                sup.launch_failed(rank, e.code, &e.message);
                break;
            }
        }
    }
    // Only the readers hold senders now: the writer ends when the last pipe closes.
    drop(lines_tx);
    drop(events_tx);
    let status = sup.run(&events);
    if output_done.recv_timeout(OUTPUT_DRAIN).is_err() {
        tracing::warn!("output still open after every process ended; not waiting for it");
    }
    server.deregister_nspace(&nspace);
    if let Err(e) = server.finalize() {
        tracing::warn!("finalizing the server: {e}");
    }
    Ok(status)
}

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if argv.first().is_some_and(|a| a == launch::EXEC_HELPER) {
        return ExitCode::from(launch::exec_helper(&forwarded_signals(), &argv[1..]));
    }
    let opts = match cli::parse(argv) {
        Ok(o) => o,
        Err(e) => e.exit(),
    };
    let signals = forwarded_signals();
    if let Err(e) = signals.thread_block() {
        eprintln!("pmixrun: cannot block signals: {e}");
        return ExitCode::FAILURE;
    }
    init_logging(opts.verbose);
    match run(opts, signals) {
        Ok(status) => ExitCode::from(status),
        Err(msg) => {
            eprintln!("pmixrun: {msg}");
            ExitCode::FAILURE
        }
    }
}
