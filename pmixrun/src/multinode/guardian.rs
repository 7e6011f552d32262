//! What the launch agent starts on a node: a small process that outlives the daemon. It
//! starts the daemon, waits for it, and then removes the rendezvous directory of the daemon's
//! PMIx server (its socket and its clients' directories, in the node's `$TMPDIR`) if the
//! daemon could not, having been killed: a failed run leaves nothing in the node's `/tmp`.
//! The daemon dies with it (parent-death signal), and the daemon's processes with the daemon.
//! (The directory is the server's own, not one made here for it: nesting them would lengthen
//! the socket's path, which must fit in 108 bytes.)
//!
//! The guardian passes the daemon its [`Boot`](crate::multinode::bootstrap::Boot) and keeps the daemon's
//! stdin open: closing its own (the agent gone) or a signal stops the daemon, which then
//! stops its processes: SIGTERM, with SIGCONT for a daemon someone stopped (SIGSTOP), and
//! SIGKILL if it is still there after [`STOP_GRACE`].

use std::io::Read;
use std::process::{Command, Stdio};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use signal_hook::iterator::Signals;

/// The hidden flag that makes pmixrun the daemon under a guardian.
pub(crate) const WORKER_FLAG: &str = "--pmixrun-internal-daemon-worker";

/// Runs the guardian; returns the daemon's exit status.
pub(crate) fn run(signals: Signals) -> u8 {
    match guard(signals) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("pmixrun daemon: {e}");
            1
        }
    }
}

fn guard(signals: Signals) -> Result<u8, String> {
    // Passed on as it came, undecoded: the daemon reads it.
    let boot = crate::multinode::msg::read_frame(
        &mut std::io::stdin().lock(),
        crate::multinode::bootstrap::MAX_BOOT,
    )
    .map_err(|e| format!("no boot message on stdin: {e}"))?;
    let result = run_worker(&boot, signals);
    // The daemon is gone, so is its server: if the directory is still there, nobody else will
    // remove it (the daemon's pid in its name is no longer running).
    let removed = pmix_server::Server::remove_stale_dirs(&std::env::temp_dir());
    if removed > 0 {
        tracing::debug!(removed, "removed what the daemon left");
    }
    result
}

/// How long a daemon asked to stop (SIGTERM) has before it is killed: its own grace for its
/// processes ([`crate::supervise::GRACE`]) and room to report.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Once a stop is asked (`stop`), asks the daemon `pid` to stop, continuing it should it be
/// stopped, and kills it if it has not exited (`exited` closed) within [`STOP_GRACE`].
fn stop_when_asked(pid: Pid, stop: &Receiver<()>, exited: &Receiver<()>) {
    crossbeam_channel::select! {
        recv(stop) -> asked => {
            if asked.is_err() {
                return;
            }
        }
        recv(exited) -> _ => return,
    }
    let _ = kill(pid, Signal::SIGTERM);
    let _ = kill(pid, Signal::SIGCONT);
    if let Err(RecvTimeoutError::Timeout) = exited.recv_timeout(STOP_GRACE) {
        tracing::warn!(%pid, "the daemon did not stop within {STOP_GRACE:?}; killing it");
        let _ = kill(pid, Signal::SIGKILL);
    }
}

fn run_worker(boot: &[u8], mut signals: Signals) -> Result<u8, String> {
    let me = std::env::current_exe().map_err(|e| format!("cannot find pmixrun itself: {e}"))?;
    // Through the exec trampoline: the daemon asks to die with its guardian.
    let mut worker = Command::new("/proc/self/exe")
        .arg(crate::node::launch::EXEC_MARKER)
        .arg(std::process::id().to_string())
        .arg(crate::node::launch::NO_PIN)
        .arg(&me)
        .arg("pmixrun")
        .arg(WORKER_FLAG)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| {
            format!(
                "cannot start the daemon: {}",
                crate::node::launch::describe(&e)
            )
        })?;
    let pid = Pid::from_raw(i32::try_from(worker.id()).unwrap_or(i32::MAX));
    // Held until the guardian ends: the daemon's stdin lifeline.
    let mut to_worker = worker.stdin.take();
    if let Some(w) = &mut to_worker {
        if let Err(e) = crate::multinode::msg::write_frame(w, boot) {
            tracing::debug!("passing the boot message on: {e}");
        }
    }
    // The agent gone (stdin closed) or a signal: the daemon is asked to stop, and made to if
    // it does not within STOP_GRACE (a daemon stopped by SIGSTOP cannot act on SIGTERM until it
    // is continued; one that hangs, not at all).
    let (stop_tx, stop_rx) = crossbeam_channel::unbounded::<()>();
    let (exited_tx, exited_rx) = crossbeam_channel::bounded::<()>(0);
    let on_eof = stop_tx.clone();
    std::thread::Builder::new()
        .name("guardian-stdin".into())
        .stack_size(crate::node::output::SMALL_STACK)
        .spawn(move || {
            let mut buf = [0u8; 256];
            let mut stdin = std::io::stdin().lock();
            while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
            let _ = on_eof.send(());
        })
        .map_err(|e| format!("cannot watch stdin: {e}"))?;
    let handle = signals.handle();
    let forwarder = std::thread::Builder::new()
        .name("guardian-signals".into())
        .stack_size(crate::node::output::SMALL_STACK)
        .spawn(move || {
            for _ in signals.forever() {
                let _ = stop_tx.send(());
            }
        })
        .map_err(|e| format!("cannot forward signals: {e}"))?;
    let stopper = std::thread::Builder::new()
        .name("guardian-stop".into())
        .stack_size(crate::node::output::SMALL_STACK)
        .spawn(move || stop_when_asked(pid, &stop_rx, &exited_rx))
        .map_err(|e| format!("cannot watch for a stop: {e}"))?;
    // Waited for without reaping it first: until the stopper is done, the pid it may signal
    // is still the daemon's (a zombie), never another process's.
    let exited = nix::sys::wait::waitid(
        nix::sys::wait::Id::Pid(pid),
        nix::sys::wait::WaitPidFlag::WEXITED | nix::sys::wait::WaitPidFlag::WNOWAIT,
    );
    drop(exited_tx);
    let _ = stopper.join();
    if let Err(e) = exited {
        tracing::debug!("waiting for the daemon without reaping it: {e}");
    }
    let status = worker
        .wait()
        .map_err(|e| format!("cannot wait for the daemon: {e}"))?;
    handle.close();
    let _ = forwarder.join();
    drop(to_worker);
    use std::os::unix::process::ExitStatusExt;
    Ok(match (status.code(), status.signal()) {
        (Some(c), _) => u8::try_from(c).unwrap_or(1),
        (None, Some(s)) => u8::try_from(128 + s).unwrap_or(255),
        (None, None) => 1,
    })
}
