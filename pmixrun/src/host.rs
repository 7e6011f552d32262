//! pmixrun's [`Host`]: the server's callbacks become [`Event`]s for the supervising thread.
//!
//! Callbacks run on the server's event-loop thread and must not block it, so they only forward
//! what happened; the decisions (killing the job, the exit status) are taken in one place, the
//! supervisor, which also receives the processes' exits over the same channel. One channel
//! keeps the order in which things happened: a process's finalize is forwarded before the
//! server replies to it, hence before the process can exit.

use std::process::ExitStatus;

use crossbeam_channel::Sender;
use nix::sys::signal::Signal;
use std::sync::Arc;

use pmix_server::Published;
use pmix_server::types::{Info, Key, Nspace, Proc, Status};
use pmix_server::{Completion, Host, NameServerClient};

/// Something the supervisor must know about.
#[derive(Debug)]
pub(crate) enum Event {
    /// A process connected to the server (it uses PMIx).
    Connected(u32),
    /// A process called finalize.
    Finalized(u32),
    /// A process asked for the job to be aborted; `done` answers it.
    Abort {
        rank: u32,
        status: Status,
        message: String,
        done: Completion<()>,
    },
    /// A process ended (`Err` when waiting for it failed).
    Exited {
        rank: u32,
        status: std::io::Result<ExitStatus>,
    },
    /// pmixrun received a signal to pass on.
    Signal(Signal),
}

/// The callbacks of a one-node launcher: fences and direct modex never leave the node, so
/// only connection, finalize and abort need the host, and publish/lookup/unpublish when a
/// name server shared with other runs is used (otherwise the server's own name service
/// answers them).
pub(crate) struct RunHost {
    nspace: Nspace,
    events: Sender<Event>,
    names: Option<Arc<NameServerClient>>,
}

impl RunHost {
    pub(crate) fn new(
        nspace: Nspace,
        events: Sender<Event>,
        names: Option<Arc<NameServerClient>>,
    ) -> RunHost {
        RunHost {
            nspace,
            events,
            names,
        }
    }

    fn rank_of(&self, proc: &Proc) -> Option<u32> {
        (proc.nspace == self.nspace).then_some(proc.rank.0)
    }
}

impl Host for RunHost {
    fn publish(&mut self, proc: &Proc, data: &[Info], info: &[Info], done: Completion<()>) {
        match &self.names {
            Some(ns) => ns.publish(proc, data, info, move |r| done.complete(r)),
            None => done.complete(Err(Status::ERR_NOT_SUPPORTED)),
        }
    }

    fn lookup(
        &mut self,
        proc: &Proc,
        keys: &[Key],
        info: &[Info],
        done: Completion<Vec<Published>>,
    ) {
        match &self.names {
            Some(ns) => ns.lookup(proc, keys, info, move |r| done.complete(r)),
            None => done.complete(Err(Status::ERR_NOT_SUPPORTED)),
        }
    }

    fn unpublish(&mut self, proc: &Proc, keys: &[Key], info: &[Info], done: Completion<()>) {
        match &self.names {
            Some(ns) => ns.unpublish(proc, keys, info, move |r| done.complete(r)),
            None => done.complete(Err(Status::ERR_NOT_SUPPORTED)),
        }
    }

    fn client_connected(&mut self, proc: &Proc, done: Completion<()>) {
        if let Some(r) = self.rank_of(proc) {
            let _ = self.events.send(Event::Connected(r));
        }
        done.complete(Ok(()));
    }

    fn client_finalized(&mut self, proc: &Proc, done: Completion<()>) {
        if let Some(r) = self.rank_of(proc) {
            let _ = self.events.send(Event::Finalized(r));
        }
        done.complete(Ok(()));
    }

    fn abort(
        &mut self,
        proc: &Proc,
        status: Status,
        message: &str,
        _procs: &[Proc],
        done: Completion<()>,
    ) {
        // Whatever `procs` lists, the whole job goes, as mpiexec does for MPI_Abort: the
        // processes of a job depend on each other, and there is nobody to restart the rest.
        let Some(rank) = self.rank_of(proc) else {
            done.complete(Err(Status::ERR_BAD_PARAM));
            return;
        };
        let ev = Event::Abort {
            rank,
            status,
            message: message.to_owned(),
            done,
        };
        if let Err(crossbeam_channel::SendError(Event::Abort { done, .. })) = self.events.send(ev) {
            // The supervisor is gone: the job is ending anyway.
            done.complete(Ok(()));
        }
    }
}
