//! The supervisor: the one place that decides the job's fate from what happens to it.
//!
//! It receives [`Event`]s (process exits from the waiter threads, connect/finalize/abort from
//! the server's callbacks, signals from the signal thread) on one channel, with a deadline for
//! `--timeout` and for the grace period of a stopping job; it never sleeps.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use nix::sys::signal::Signal;
use nix::unistd::Pid;

use crate::host::Event;
use crate::launch;

/// How long processes get between SIGTERM (or a forwarded signal) and SIGKILL.
pub(crate) const GRACE: Duration = Duration::from_secs(2);

/// How long to wait for processes to be reaped after SIGKILL before giving up on them (a
/// process stuck in the kernel cannot be killed at all).
const AFTER_KILL: Duration = Duration::from_secs(5);

/// The exit status of a job that exceeded `--timeout`, as `timeout(1)` uses.
pub(crate) const TIMEOUT_STATUS: u8 = 124;

#[derive(Debug, Default)]
struct ProcState {
    /// Its process group; `None` until started (or if it never was).
    pid: Option<Pid>,
    /// Ended, or never to be started.
    gone: bool,
    connected: bool,
    finalized: bool,
}

#[derive(Debug, Clone, Copy)]
struct Stopping {
    /// When the remaining processes get SIGKILL, unless that happened already.
    kill_at: Option<Instant>,
    /// When to stop waiting for them.
    give_up_at: Option<Instant>,
}

/// The state of the job.
#[derive(Debug)]
pub(crate) struct Supervisor {
    procs: Vec<ProcState>,
    /// The exit status, set by the first failure.
    status: Option<u8>,
    stopping: Option<Stopping>,
    /// `--timeout` and its deadline.
    timeout: Option<(Duration, Instant)>,
    /// Told of every process that ends.
    on_exit: Option<ExitHook>,
}

/// A callback told of every process that ends.
struct ExitHook(Box<dyn FnMut(u32)>);

impl std::fmt::Debug for ExitHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExitHook")
    }
}

fn exit_code_of_abort(status: i32) -> u8 {
    u8::try_from(status).ok().filter(|s| *s != 0).unwrap_or(1)
}

fn signal_name(sig: i32) -> String {
    Signal::try_from(sig)
        .map(|s| s.as_str().to_owned())
        .unwrap_or_else(|_| format!("signal {sig}"))
}

impl Supervisor {
    /// A job of `size` processes, none started yet, with `timeout` counted from now.
    pub(crate) fn new(size: u32, timeout: Option<Duration>) -> Supervisor {
        Supervisor {
            procs: (0..size).map(|_| ProcState::default()).collect(),
            status: None,
            stopping: None,
            timeout: timeout.map(|t| (t, Instant::now() + t)),
            on_exit: None,
        }
    }

    /// Calls `hook` with the rank of every process that ends.
    pub(crate) fn on_exit(&mut self, hook: impl FnMut(u32) + 'static) {
        self.on_exit = Some(ExitHook(Box::new(hook)));
    }

    /// Records that `rank` was started as `pid`.
    pub(crate) fn started(&mut self, rank: u32, pid: Pid) {
        if let Some(p) = self.proc(rank) {
            p.pid = Some(pid);
        }
    }

    /// A process could not be started: the job fails, and the processes not yet started never
    /// will be.
    pub(crate) fn launch_failed(&mut self, from_rank: u32, status: u8, message: &str) {
        for p in self.procs.iter_mut().skip(from_rank as usize) {
            p.gone = true;
        }
        self.fail(status, message.to_owned());
    }

    fn proc(&mut self, rank: u32) -> Option<&mut ProcState> {
        self.procs.get_mut(rank as usize)
    }

    fn alive(&self) -> impl Iterator<Item = Pid> + '_ {
        self.procs.iter().filter(|p| !p.gone).filter_map(|p| p.pid)
    }

    fn signal_all(&self, sig: Signal) {
        for pid in self.alive() {
            launch::signal(pid, sig);
        }
    }

    /// Starts stopping the job with `sig`, SIGKILL following after the grace period.
    fn stop(&mut self, sig: Signal) {
        if self.stopping.is_some() {
            return;
        }
        tracing::debug!(?sig, "stopping the job");
        self.signal_all(sig);
        self.stopping = Some(Stopping {
            kill_at: Some(Instant::now() + GRACE),
            give_up_at: None,
        });
    }

    fn kill_now(&mut self) {
        tracing::debug!("killing the job");
        self.signal_all(Signal::SIGKILL);
        self.stopping = Some(Stopping {
            kill_at: None,
            give_up_at: Some(Instant::now() + AFTER_KILL),
        });
    }

    /// Records the job's first failure: prints why, sets the exit status, stops the job.
    fn fail(&mut self, status: u8, reason: String) {
        if self.status.is_some() {
            return;
        }
        let others = self.alive().next().is_some();
        let tail = if others { "; killing the job" } else { "" };
        eprintln!("pmixrun: {reason}{tail}");
        self.status = Some(status);
        self.stop(Signal::SIGTERM);
    }

    fn exited(&mut self, rank: u32, status: std::io::Result<ExitStatus>) {
        if let Some(ExitHook(hook)) = &mut self.on_exit {
            hook(rank);
        }
        let stopping = self.stopping.is_some();
        let Some(p) = self.proc(rank) else { return };
        p.gone = true;
        let unfinalized = p.connected && !p.finalized;
        if stopping {
            // Expected: it was told to stop.
            return;
        }
        let status = match status {
            Ok(s) => s,
            Err(e) => {
                let reason = format!("cannot wait for rank {rank}: {}", launch::describe(&e));
                return self.fail(1, reason);
            }
        };
        let without = if unfinalized {
            " without calling finalize"
        } else {
            ""
        };
        match (status.code(), status.signal()) {
            (Some(0), _) if unfinalized => self.fail(
                1,
                format!("rank {rank} exited with status 0 without calling finalize"),
            ),
            (Some(0), _) => {}
            (Some(code), _) => {
                let reason = format!("rank {rank} exited with status {code}{without}");
                self.fail(u8::try_from(code).unwrap_or(1), reason);
            }
            (None, Some(sig)) => {
                let reason = format!("rank {rank} was killed by {}{without}", signal_name(sig));
                self.fail(u8::try_from(128 + sig).unwrap_or(255), reason);
            }
            (None, None) => self.fail(1, format!("rank {rank} ended with {status}")),
        }
    }

    fn handle(&mut self, ev: Event) {
        tracing::debug!(?ev, "event");
        match ev {
            Event::Connected(r) => {
                if let Some(p) = self.proc(r) {
                    p.connected = true;
                }
            }
            Event::Finalized(r) => {
                if let Some(p) = self.proc(r) {
                    p.finalized = true;
                }
            }
            Event::Exited { rank, status } => self.exited(rank, status),
            Event::Abort {
                rank,
                status,
                message,
                done,
            } => {
                let reason = if message.is_empty() {
                    format!("rank {rank} called abort with status {}", status.0)
                } else {
                    format!(
                        "rank {rank} called abort with status {}: {message}",
                        status.0
                    )
                };
                self.fail(exit_code_of_abort(status.0), reason);
                // Answered once the job is being stopped: what the caller does after its abort
                // returns can no longer change the outcome.
                done.complete(Ok(()));
            }
            Event::Signal(sig) => {
                if self.stopping.is_some() {
                    // A second Ctrl-C, or one while the job is already going: no more grace.
                    eprintln!("pmixrun: received {}; killing the job now", sig.as_str());
                    self.kill_now();
                } else {
                    eprintln!(
                        "pmixrun: received {}; passing it on to the job",
                        sig.as_str()
                    );
                    self.status = Some(u8::try_from(128 + sig as i32).unwrap_or(255));
                    self.stop(sig);
                }
            }
        }
    }

    /// The next instant at which something must happen without an event.
    fn deadline(&self) -> Option<Instant> {
        match self.stopping {
            Some(s) => s.kill_at.or(s.give_up_at),
            None => self.timeout.map(|(_, at)| at),
        }
    }

    fn on_deadline(&mut self) -> bool {
        match self.stopping {
            Some(Stopping {
                kill_at: Some(_), ..
            }) => {
                self.kill_now();
                true
            }
            Some(Stopping { kill_at: None, .. }) => {
                let stuck: Vec<Pid> = self.alive().collect();
                eprintln!(
                    "pmixrun: processes {stuck:?} did not end after SIGKILL; leaving them behind"
                );
                false
            }
            None => {
                let secs = self.timeout.map_or(0, |(t, _)| t.as_secs());
                self.fail(
                    TIMEOUT_STATUS,
                    format!("the job did not finish within --timeout {secs} s"),
                );
                true
            }
        }
    }

    /// Runs the job to its end and returns pmixrun's exit status.
    pub(crate) fn run(mut self, events: &Receiver<Event>) -> u8 {
        while self.procs.iter().any(|p| !p.gone) {
            let ev = match self.deadline() {
                Some(at) => events.recv_deadline(at),
                None => events.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            match ev {
                Ok(ev) => self.handle(ev),
                Err(RecvTimeoutError::Timeout) => {
                    if !self.on_deadline() {
                        break;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        // Events still queued (an abort racing the job's end) are answered, not dropped.
        while let Ok(ev) = events.try_recv() {
            if let Event::Abort { done, .. } = ev {
                done.complete(Ok(()));
            }
        }
        self.status.unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abort_statuses_that_are_no_exit_status_become_one() {
        assert_eq!(exit_code_of_abort(5), 5);
        assert_eq!(exit_code_of_abort(255), 255);
        assert_eq!(exit_code_of_abort(0), 1);
        assert_eq!(exit_code_of_abort(256), 1);
        assert_eq!(exit_code_of_abort(-25), 1);
    }

    fn exit(code: i32) -> std::io::Result<ExitStatus> {
        Ok(ExitStatus::from_raw(code << 8))
    }

    fn run(size: u32, events: Vec<Event>) -> u8 {
        let (tx, rx) = crossbeam_channel::unbounded();
        for e in events {
            let _ = tx.send(e);
        }
        // No process has a pid here, so stopping signals nobody.
        Supervisor::new(size, None).run(&rx)
    }

    #[test]
    fn the_first_failure_decides_the_status() {
        use Event::*;
        let ok = |rank| Exited {
            rank,
            status: exit(0),
        };
        assert_eq!(run(2, vec![ok(0), ok(1)]), 0);
        assert_eq!(
            run(2, vec![Connected(1), Finalized(1), ok(1), ok(0)]),
            0,
            "a process that never used PMIx may end with 0"
        );
        assert_eq!(run(2, vec![Connected(1), ok(1), ok(0)]), 1);
        let failed = |rank, c| Exited {
            rank,
            status: exit(c),
        };
        assert_eq!(run(3, vec![failed(2, 3), failed(0, 4), ok(1)]), 3);
        let killed = Exited {
            rank: 0,
            status: Ok(ExitStatus::from_raw(9)),
        };
        assert_eq!(run(1, vec![killed]), 137);
        assert_eq!(run(1, vec![Signal(nix::sys::signal::SIGINT), ok(0)]), 130);
    }
}
