//! `pmixrun --adopt-singleton NSPACE PROGRAM`: the private server of a singleton that spawns
//! (pmix-client's `singleton/private_server.rs` starts it; see `docs/ARCHITECTURE.md`).
//!
//! It registers `NSPACE` as a job of one process whose rank 0 is the singleton, already
//! running (pmixrun did not start it, so it has no pid here and is never signalled), writes
//! the environment `setup_fork` gives that rank on its stdin, a socket whose other end the
//! singleton holds (`NAME=value` lines, then an empty line), and then runs like any pmixrun:
//! the jobs the singleton spawns are registered and started as the first job's would be
//! (`<NSPACE>.<n>`, `PARENT_ID` the singleton), and the run ends when every job has. The end
//! of the stdin stream is the end of the singleton: it counts as rank 0 exiting, cleanly if
//! it had finalized, as a failure otherwise (which stops the spawned jobs).

use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use crossbeam_channel::{Sender, unbounded};
use pmix_server::types::{Nspace, Proc};
use signal_hook::iterator::Signals;

use crate::cli;
use crate::node::host::Event;
use crate::node::jobs::RunJobs;
use crate::node::output;
use crate::supervise::Supervisor;

/// The hidden first argument that selects this mode.
pub(crate) const ADOPT_FLAG: &str = "--adopt-singleton";

/// Runs the private server of singleton `argv[0]` (`argv[1]`: its program, for its job
/// data). Returns pmixrun's exit status.
pub(crate) fn run(argv: &[std::ffi::OsString], signals: Signals) -> Result<u8, String> {
    let [nspace, program] = argv else {
        return Err(format!("{ADOPT_FLAG} takes NSPACE PROGRAM"));
    };
    let nspace = Nspace::new(nspace.to_string_lossy())
        .map_err(|e| format!("{ADOPT_FLAG}: bad namespace: {e}"))?;
    let lifeline = stdin_socket()?;
    let (events_tx, events) = unbounded();
    crate::setup::start_signal_thread(signals, events_tx.clone())?;
    let names = crate::setup::connect_nameserver(None)?;
    let server = crate::setup::start_server(&events_tx, names.as_ref(), None, false)?;
    let apps = [cli::App {
        np: 1,
        program: program.clone(),
        args: Vec::new(),
        wdir: None,
        env: Vec::new(),
        pset: None,
    }];
    let layout = crate::plan::layout::Layout::new(&apps)?;
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot find the current directory: {e}"))?;
    let (lines_tx, lines) = unbounded();
    let jobs = RunJobs {
        server: &server,
        names,
        cwd,
        first: nspace.clone(),
        spawned: 0,
        events: events_tx.clone(),
        lines: lines_tx,
        pmi: cli::Protocol::Pmix,
        // The jobs the singleton spawns: not bound, told their place.
        place: cli::Place::default(),
        group_rank: 0,
        groups: 1,
        master_addr: server.hostname().to_owned(),
        free_master_port: true,
        stdin: None,
        psets: Default::default(),
        claims: Default::default(),
        job_places: std::collections::HashMap::new(),
        launched: Default::default(),
    };
    jobs.register(&nspace, &apps, &layout, Vec::new())?;
    let me = Proc::new(nspace.clone(), 0);
    // The singleton started this pmixrun: it is the process registered as rank 0.
    let singleton = nix::unistd::getppid().as_raw().unsigned_abs();
    server
        .client_started(&me, singleton)
        .map_err(|e| format!("cannot tell the server the singleton's pid: {e}"))?;
    let env = server
        .setup_fork(&me)
        .map_err(|e| format!("cannot set up {me}: {e}"))?;
    tell(&lifeline, &env)?;
    watch(lifeline, me, events_tx)?;
    let output_done = output::start_writer(false, lines, None, None)
        .map_err(|e| format!("cannot start the output thread: {e}"))?;
    let mut sup = Supervisor::new(jobs, None);
    sup.add_job(nspace, 1);
    let status = sup.run(&events);
    if output_done
        .recv_timeout(crate::node::output::OUTPUT_DRAIN)
        .is_err()
    {
        tracing::warn!("output still open after every process ended; not waiting for it");
    }
    if let Err(e) = server.finalize() {
        tracing::warn!("finalizing the server: {e}");
    }
    Ok(status)
}

/// pmixrun's stdin, which must be the singleton's socket.
fn stdin_socket() -> Result<UnixStream, String> {
    let fd: OwnedFd = std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| format!("{ADOPT_FLAG}: no stdin: {e}"))?;
    let sock = UnixStream::from(fd);
    // A socket it must be: anything else (a terminal, a file) is not a singleton's.
    sock.peer_addr()
        .map_err(|e| format!("{ADOPT_FLAG}: stdin is not the singleton's socket: {e}"))?;
    Ok(sock)
}

/// Writes the rendezvous: `NAME=value` lines and an empty line.
fn tell(mut sock: &UnixStream, env: &[(String, String)]) -> Result<(), String> {
    let mut text = String::new();
    for (k, v) in env {
        if k.contains('=') || k.contains('\n') || v.contains('\n') {
            return Err(format!("cannot pass {k:?} on one line"));
        }
        text.push_str(&format!("{k}={v}\n"));
    }
    text.push('\n');
    sock.write_all(text.as_bytes())
        .map_err(|e| format!("cannot tell the singleton where the server is: {e}"))
}

/// Reports the singleton's end (the end of the stream) as rank 0 exiting with status 0: the
/// supervisor then calls it a failure unless the singleton had finalized.
fn watch(mut sock: UnixStream, me: Proc, events: Sender<Event>) -> Result<(), String> {
    std::thread::Builder::new()
        .name("singleton".into())
        .stack_size(output::SMALL_STACK)
        .spawn(move || {
            let mut buf = [0u8; 64];
            loop {
                match sock.read(&mut buf) {
                    Ok(0) => break,
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = events.send(Event::Exited {
                proc: me,
                status: Ok(ExitStatus::from_raw(0)),
            });
        })
        .map(drop)
        .map_err(|e| format!("cannot start the singleton's watcher: {e}"))
}
