//! A pmix-rs client to be held in init by a debugger (`tests/debugger.rs`):
//!
//! `pmix-debuggee MARK` calls `Client::init`, which a job run with `pmixrun --stop-in-init`
//! holds until a tool releases it; then checks that the file `MARK` exists (the test creates
//! it just before it has the release sent, so an init that returned early finds none), prints
//! `debuggee rank=<r> pid=<pid> released`, and finalizes. A failure prints
//! `FAIL rank=<r>: <what>` on stderr and exits 2.
//!
//! `pmix-debuggee --daemon` is a debugger daemon instead (spawned by a tool with
//! `DEBUG_DAEMONS_PER_NODE`): it reads `DEBUG_TARGET` from its job data, prints
//! `daemon rank=<r> target=<nspace>.<rank> node=<its PMIX_HOSTNAME>`, and finalizes;
//! `--daemon-of-job` is one spawned with `DEBUGGER_DAEMONS`: it reads `DEBUG_JOB` and prints
//! `daemon rank=<r> job=<nspace> node=<its PMIX_HOSTNAME>`.
//!
//! `pmix-debuggee --await-release` (a job not held in init) registers for
//! `DEBUGGER_RELEASE`, prints `awaiting rank=<r>`, waits at most 60 s for one (from a tool,
//! relayed to its node in a multi-node run), prints `heard rank=<r> from=<source>`, and
//! finalizes.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use pmix_client::{Client, Proc, Rank, Status, Value, attr};

fn main() -> ExitCode {
    let Some(mark) = std::env::args().nth(1) else {
        eprintln!("FAIL rank=-1: usage: pmix-debuggee MARK");
        return ExitCode::from(2);
    };
    let client = match Client::init() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("FAIL rank=-1: init: {e}");
            return ExitCode::from(2);
        }
    };
    let rank = client.proc().rank.0;
    // Where a daemon runs, as its job data names its node (a logical node's name too).
    let node = || match client.get(client.proc(), attr::HOSTNAME, &[]) {
        Ok(Value::String(h)) => h,
        other => format!("{other:?}").replace(' ', "_"),
    };
    if mark == "--daemon" {
        let job = Proc::new(client.proc().nspace.clone(), Rank::WILDCARD);
        return match client.get(&job, attr::DEBUG_TARGET, &[]) {
            Ok(Value::Proc(t)) => {
                let node = node();
                println!(
                    "daemon rank={rank} target={}.{} node={node}",
                    t.nspace, t.rank.0
                );
                let _ = client.finalize();
                ExitCode::SUCCESS
            }
            other => {
                eprintln!("FAIL rank={rank}: DEBUG_TARGET: {other:?}");
                ExitCode::from(2)
            }
        };
    }
    if mark == "--daemon-of-job" {
        let job = Proc::new(client.proc().nspace.clone(), Rank::WILDCARD);
        return match client.get(&job, attr::DEBUG_JOB, &[]) {
            Ok(Value::String(target)) => {
                println!("daemon rank={rank} job={target} node={}", node());
                let _ = client.finalize();
                ExitCode::SUCCESS
            }
            other => {
                eprintln!("FAIL rank={rank}: DEBUG_JOB: {other:?}");
                ExitCode::from(2)
            }
        };
    }
    if mark == "--await-release" {
        return await_release(&client, rank);
    }
    if !Path::new(&mark).exists() {
        eprintln!("FAIL rank={rank}: init returned before the debugger's release");
        return ExitCode::from(2);
    }
    println!("debuggee rank={rank} pid={} released", std::process::id());
    if let Err(e) = client.finalize() {
        eprintln!("FAIL rank={rank}: finalize: {e}");
        return ExitCode::from(2);
    }
    ExitCode::SUCCESS
}

/// `--await-release`: waits for a `DEBUGGER_RELEASE` event.
fn await_release(client: &Client, rank: u32) -> ExitCode {
    let (tx, rx) = std::sync::mpsc::channel();
    let registered = client.register_event_handler(&[Status::DEBUGGER_RELEASE], &[], move |ev| {
        let _ = tx.send(ev.source.clone());
    });
    if let Err(e) = registered {
        eprintln!("FAIL rank={rank}: register_event_handler: {e}");
        return ExitCode::from(2);
    }
    println!("awaiting rank={rank}");
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(source) => println!("heard rank={rank} from={}", source.nspace),
        Err(e) => {
            eprintln!("FAIL rank={rank}: no DEBUGGER_RELEASE: {e}");
            return ExitCode::from(2);
        }
    }
    if let Err(e) = client.finalize() {
        eprintln!("FAIL rank={rank}: finalize: {e}");
        return ExitCode::from(2);
    }
    ExitCode::SUCCESS
}
