//! Forwarding input to the processes' stdin: pmixrun's own stdin (`--stdin`, rank 0 by
//! default) and what tools push (`PMIx_IOF_push`).
//!
//! The processes `--stdin` names start with a pipe for stdin; every other process has
//! /dev/null. Each pipe has one writer thread fed through a bounded queue ([`QUEUE`] chunks,
//! and for a tool's pushes, of any size, at most [`QUEUE_BYTES`] bytes unless the queue is
//! empty), so a process that does not read its stdin holds up nobody but the
//! writers into its queue: pmixrun's own stdin reader waits (it reads no faster than the
//! processes take, as a shell pipe would), a tool's push is refused with
//! `ERR_OUT_OF_RESOURCE`, and the server's loop never waits. End of input (pmixrun's stdin at
//! end of file, a tool's `IOF_COMPLETE` or empty push) closes the pipe, which the process
//! reads as end of file; so does the process's end (its pipe breaks) remove it.
//!
//! In a multi-node run the root reads its stdin ([`read_stdin`]) and sends each chunk down the
//! tree to the daemons of the processes that take it, the next once each said its processes
//! took it (`multinode/root/`, `multinode/daemon/`); each daemon has a [`Router`] of its own.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::process::ChildStdin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crossbeam_channel::{Sender, TrySendError, bounded};
use pmix_server::types::{Proc, Rank, Status};

use crate::node::output::SMALL_STACK;

/// Chunks queued for one process before a push is refused.
pub(crate) const QUEUE: usize = 16;

/// The largest chunk read from pmixrun's stdin at once.
pub(crate) const CHUNK: usize = 64 * 1024;

/// Bytes queued for one process past which a tool's push is refused (one push of any size is
/// taken when nothing is queued): a process that does not read costs pmixrun this much, not
/// [`QUEUE`] pushes of whatever size tools send.
pub(crate) const QUEUE_BYTES: usize = QUEUE * CHUNK;

/// Which processes of the first job get pmixrun's stdin (`--stdin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum Target {
    /// None: every process's stdin is /dev/null, and pmixrun does not read its own.
    None,
    /// One rank (rank 0 by default).
    Rank(u32),
    /// Every rank.
    All,
}

impl std::str::FromStr for Target {
    type Err = String;
    fn from_str(s: &str) -> Result<Target, String> {
        match s {
            "none" => Ok(Target::None),
            "all" => Ok(Target::All),
            r => r
                .parse::<u32>()
                .map(Target::Rank)
                .map_err(|_| format!("--stdin {r}: expected all, none or a rank")),
        }
    }
}

impl Target {
    /// Whether rank `rank` of the first job takes input.
    pub(crate) fn takes(self, rank: u32) -> bool {
        match self {
            Target::None => false,
            Target::Rank(r) => r == rank,
            Target::All => true,
        }
    }
}

enum Input {
    Data(Vec<u8>),
    /// End of input: close the pipe.
    End,
}

/// A process's queue: its writer thread's channel and the bytes queued in it.
#[derive(Clone)]
struct Sink {
    tx: Sender<Input>,
    queued: Arc<AtomicUsize>,
}

impl Sink {
    /// Queues `data` without waiting, if the queue has room for it; false when full.
    fn try_push(&self, data: &[u8]) -> Result<bool, ()> {
        let before = self.queued.fetch_add(data.len(), Ordering::AcqRel);
        if before > 0 && before + data.len() > QUEUE_BYTES {
            self.queued.fetch_sub(data.len(), Ordering::AcqRel);
            return Ok(false);
        }
        match self.tx.try_send(Input::Data(data.to_vec())) {
            Ok(()) => Ok(true),
            Err(e) => {
                self.queued.fetch_sub(data.len(), Ordering::AcqRel);
                match e {
                    TrySendError::Full(_) => Ok(false),
                    TrySendError::Disconnected(_) => Err(()),
                }
            }
        }
    }

    /// Queues `data`, waiting for room (pmixrun's own stdin).
    fn push(&self, data: &[u8]) {
        self.queued.fetch_add(data.len(), Ordering::AcqRel);
        if self.tx.send(Input::Data(data.to_vec())).is_err() {
            self.queued.fetch_sub(data.len(), Ordering::AcqRel);
        }
    }
}

/// The processes that take input, by name.
#[derive(Default)]
pub(crate) struct Router {
    sinks: Mutex<HashMap<Proc, Sink>>,
    /// The first job's namespace, whose rank 0 an untargeted push goes to.
    first: Mutex<Option<pmix_server::types::Nspace>>,
}

/// A poisoned lock guards nothing broken: every update is a single insert or remove.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Router {
    pub(crate) fn new() -> Arc<Router> {
        Arc::new(Router::default())
    }

    fn sinks(&self) -> MutexGuard<'_, HashMap<Proc, Sink>> {
        lock(&self.sinks)
    }

    /// Names the first job, the target of a push naming nobody.
    pub(crate) fn set_first(&self, nspace: pmix_server::types::Nspace) {
        *lock(&self.first) = Some(nspace);
    }

    /// Takes over `proc`'s stdin pipe: a thread writes what is queued for it until the end of
    /// input or of the process.
    pub(crate) fn attach(&self, proc: &Proc, mut pipe: ChildStdin) -> std::io::Result<()> {
        let (tx, rx) = bounded::<Input>(QUEUE);
        let queued = Arc::new(AtomicUsize::new(0));
        let written = queued.clone();
        std::thread::Builder::new()
            .name(format!("stdin-{}", proc.rank.0))
            .stack_size(SMALL_STACK)
            .spawn(move || {
                while let Ok(Input::Data(d)) = rx.recv() {
                    let ok = pipe.write_all(&d).is_ok();
                    written.fetch_sub(d.len(), Ordering::AcqRel);
                    if !ok {
                        break;
                    }
                }
                // Dropping the pipe closes it: the process reads end of file.
            })?;
        self.sinks().insert(proc.clone(), Sink { tx, queued });
        Ok(())
    }

    fn sinks_for(&self, targets: &[Proc]) -> Result<Vec<(Proc, Sink)>, Status> {
        let sinks = self.sinks();
        let named: Vec<Proc> = if targets.is_empty() {
            let first = lock(&self.first).clone().ok_or(Status::ERR_NOT_FOUND)?;
            vec![Proc::new(first, Rank(0))]
        } else {
            targets.to_vec()
        };
        let mut out = Vec::new();
        for t in &named {
            if t.rank == Rank::WILDCARD {
                out.extend(
                    sinks
                        .iter()
                        .filter(|(p, _)| p.nspace == t.nspace)
                        .map(|(p, s)| (p.clone(), s.clone())),
                );
            } else if let Some(s) = sinks.get(t) {
                out.push((t.clone(), s.clone()));
            }
        }
        if out.is_empty() {
            // None of them takes input (`--stdin` did not name them, or their input ended).
            return Err(Status::ERR_NOT_FOUND);
        }
        Ok(out)
    }

    /// A tool's push: queued for every target without waiting; `ERR_OUT_OF_RESOURCE` when a
    /// target's queue is full ([`QUEUE`] chunks, or [`QUEUE_BYTES`] bytes with this one: that
    /// target does not get this chunk; the others do).
    pub(crate) fn push(&self, targets: &[Proc], data: Option<&[u8]>, end: bool) -> Status {
        let sinks = match self.sinks_for(targets) {
            Ok(s) => s,
            Err(st) => return st,
        };
        let mut status = Status::SUCCESS;
        for (proc, sink) in sinks {
            if let Some(d) = data.filter(|d| !d.is_empty()) {
                match sink.try_push(d) {
                    Ok(true) => {}
                    Ok(false) => {
                        tracing::warn!(%proc, "stdin queue full: refusing a tool's input");
                        status = Status::ERR_OUT_OF_RESOURCE;
                        continue;
                    }
                    Err(()) => {
                        self.sinks().remove(&proc);
                        continue;
                    }
                }
            }
            if end {
                self.end(&proc, &sink);
            }
        }
        status
    }

    /// Closes `proc`'s stdin once what is queued is written.
    fn end(&self, proc: &Proc, sink: &Sink) {
        self.sinks().remove(proc);
        // Queued behind its data; if the queue is full, the writer ends when the last sender
        // (this one, dropped now) goes, after the data.
        let _ = sink.tx.try_send(Input::End);
    }

    /// Queues `data` for every process that takes input, waiting for each to take it (for
    /// pmixrun's own stdin, read no faster than the processes take it). False when no process
    /// takes input any more.
    pub(crate) fn feed_all(&self, data: &[u8]) -> bool {
        let sinks: Vec<_> = self.sinks().values().cloned().collect();
        for s in &sinks {
            s.push(data);
        }
        !sinks.is_empty()
    }

    /// Ends the input of every process that takes it.
    pub(crate) fn end_all(&self) {
        let all: Vec<_> = self.sinks().drain().collect();
        for (_, s) in all {
            let _ = s.tx.send(Input::End);
        }
    }

    /// pmixrun's own stdin, read on a thread of its own until end of file, to the processes
    /// that took pipes for it (waiting for each to take its chunk), then closed for them.
    pub(crate) fn forward_own_stdin(self: &Arc<Self>) -> std::io::Result<()> {
        let me = self.clone();
        let end = self.clone();
        read_stdin(move |chunk| me.feed_all(chunk), move || end.end_all())
    }
}

/// Reads pmixrun's stdin on a thread of its own, handing each chunk to `chunk` (which says
/// whether to go on) and calling `end` at end of file (or when told to stop).
pub(crate) fn read_stdin(
    mut chunk: impl FnMut(&[u8]) -> bool + Send + 'static,
    end: impl FnOnce() + Send + 'static,
) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("stdin".into())
        .stack_size(SMALL_STACK)
        .spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = vec![0u8; CHUNK];
            loop {
                let n = match stdin.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        tracing::debug!("reading stdin: {e}");
                        break;
                    }
                };
                if !chunk(&buf[..n]) {
                    // Every target's input ended (or its process did).
                    break;
                }
            }
            end();
        })
        .map(drop)
}

/// Whether reading pmixrun's stdin now would stop it: a terminal of which pmixrun is not in
/// the foreground (the kernel stops a background reader with SIGTTIN).
pub(crate) fn is_background_terminal() -> bool {
    use std::os::fd::AsFd;
    let stdin = std::io::stdin();
    if !std::io::IsTerminal::is_terminal(&stdin) {
        return false;
    }
    match nix::unistd::tcgetpgrp(stdin.as_fd()) {
        Ok(fg) => fg != nix::unistd::getpgrp(),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process that does not read: a tool's pushes are taken up to the byte bound (one
    /// push of any size when nothing waits), then refused, and taken again once the writer
    /// emptied the queue. Before, 16 pushes of any size were held (24 pushes of 24 MiB cost
    /// pmixrun 456 MiB).
    #[test]
    fn pushes_to_a_process_that_does_not_read_are_bounded_in_bytes() {
        use std::process::{Command, Stdio};
        // A process that reads nothing until told: `sleep` never reads its stdin.
        let mut child = Command::new("sleep")
            .arg("30")
            .stdin(Stdio::piped())
            .spawn()
            .expect("sleep");
        let pipe = child.stdin.take().expect("stdin");
        let router = Router::new();
        let p = Proc::new(pmix_server::types::Nspace::new("job").unwrap(), 0);
        router.attach(&p, pipe).expect("attach");
        let big = vec![b'x'; 4 * QUEUE_BYTES];
        // Taken alone (the writer may be blocked on it already, the pipe holding 64 KiB).
        assert_eq!(
            router.push(std::slice::from_ref(&p), Some(&big), false),
            Status::SUCCESS
        );
        // The next is refused while that one waits.
        assert_eq!(
            router.push(std::slice::from_ref(&p), Some(&big), false),
            Status::ERR_OUT_OF_RESOURCE
        );
        assert_eq!(
            router.push(std::slice::from_ref(&p), Some(b"small"), false),
            Status::ERR_OUT_OF_RESOURCE
        );
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn targets_parse() {
        assert_eq!("none".parse(), Ok(Target::None));
        assert_eq!("all".parse(), Ok(Target::All));
        assert_eq!("3".parse(), Ok(Target::Rank(3)));
        assert!("x".parse::<Target>().is_err());
        assert!(Target::Rank(0).takes(0) && !Target::Rank(0).takes(1));
        assert!(Target::All.takes(7) && !Target::None.takes(0));
    }
}
