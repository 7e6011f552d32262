//! pmixrun's [`Host`]: the server's callbacks become [`Event`]s for the supervising thread.
//!
//! Callbacks run on the server's event-loop thread and must not block it, so they only forward
//! what happened; the decisions (killing the run, the exit status, starting a spawned job) are
//! taken in one place, the supervisor, which also receives the processes' exits over the same
//! channel. One channel keeps the order in which things happened: a process's finalize is
//! forwarded before the server replies to it, hence before the process can exit.

use std::process::ExitStatus;

use crossbeam_channel::Sender;
use nix::sys::signal::Signal;
use std::sync::Arc;

use pmix_server::types::{DataRange, Info, Key, Nspace, Proc, Status};
use pmix_server::{App, Published, Query};
use pmix_server::{Completion, Host, NameServerClient};

/// Something the supervisor must know about. Processes are named by their [`Proc`]: every
/// namespace of the run (the first job's and each spawned one's) is pmixrun's.
#[derive(Debug)]
pub(crate) enum Event {
    /// A process connected to the server (it uses PMIx).
    Connected(Proc),
    /// A process called finalize.
    Finalized(Proc),
    /// A process asked for `procs` (none: itself) to be aborted (`supervise/abort.rs`);
    /// `done` answers it.
    Abort {
        proc: Proc,
        status: Status,
        message: String,
        procs: Vec<Proc>,
        done: Completion<()>,
    },
    /// A process asked for a new job; `done` answers with its namespace once every process
    /// of it started.
    Spawn {
        parent: Proc,
        job_info: Vec<Info>,
        apps: Vec<App>,
        done: Completion<Nspace>,
    },
    /// A process asked for `data` to be logged (`PMIx_Log`) as `directives` say; `done`
    /// answers it.
    Log {
        source: Proc,
        data: Vec<Info>,
        directives: Vec<Info>,
        done: Completion<()>,
        /// Its share of the bytes log requests may hold while they wait.
        ticket: crate::node::log_budget::LogTicket,
    },
    /// A process asked to act on processes of the run (`PMIx_Job_control`).
    JobControl {
        requester: Proc,
        targets: Vec<Proc>,
        directives: Vec<Info>,
        done: Completion<Vec<Info>>,
    },
    /// A process asked what only the supervisor knows (`PMIx_Query_info`: process tables).
    Query {
        asker: Proc,
        queries: Vec<Query>,
        done: Completion<Vec<Info>>,
    },
    /// A process ended (`Err` when waiting for it failed).
    Exited {
        proc: Proc,
        status: std::io::Result<ExitStatus>,
    },
    /// The server read and acted on everything a process that ended had sent (asked by
    /// `Jobs::hear_out`).
    ClientSettled(Proc),
    /// pmixrun received a signal to pass on.
    Signal(Signal),
    /// Multi-node: a node (and those it started) is lost with its processes.
    NodeLost {
        /// The node, for the user.
        what: String,
        reason: String,
        /// Every process it hosted.
        procs: Vec<Proc>,
    },
    /// A daemon's stdin closed: its launch agent or parent is gone.
    StdinClosed,
}

/// The callbacks of a one-node launcher: fences and direct modex never leave the node, so
/// only connection, finalize, abort and spawn need the host, and publish/lookup/unpublish
/// and connect/disconnect with the processes of other runs when a name server shared with
/// them is used (otherwise the server's own name service answers names, and a connect naming
/// a namespace of no run of ours fails).
pub(crate) struct RunHost {
    events: Sender<Event>,
    names: Option<Arc<NameServerClient>>,
    /// Where tools' input goes (`PMIx_IOF_push`).
    stdin: Option<Arc<crate::node::stdin::Router>>,
    /// Where events of a range beyond this server go, if anywhere.
    beyond: Option<Beyond>,
    /// What this node's log requests may hold while they wait for the supervisor.
    logs: crate::node::log_budget::LogBudget,
}

/// Passes on an event (code, source, range, info) the server raised for a range beyond
/// itself: at the root of a multi-node run, one a tool notified, to every daemon.
pub(crate) type Beyond = Box<dyn FnMut(Status, &Proc, DataRange, &[Info]) + Send>;

impl RunHost {
    pub(crate) fn new(events: Sender<Event>, names: Option<Arc<NameServerClient>>) -> RunHost {
        RunHost {
            events,
            names,
            stdin: None,
            beyond: None,
            logs: Default::default(),
        }
    }

    /// Takes tools' input to the processes `router` holds the stdin of.
    pub(crate) fn with_stdin(mut self, router: Arc<crate::node::stdin::Router>) -> RunHost {
        self.stdin = Some(router);
        self
    }

    /// Sends events of a range beyond the server to `beyond` (without it they are refused:
    /// on one node every process is the server's own).
    pub(crate) fn with_beyond(mut self, beyond: Beyond) -> RunHost {
        self.beyond = Some(beyond);
        self
    }
}

impl Host for RunHost {
    /// Queued without waiting (`crate::node::stdin`); the end of input closes the targets' stdin.
    fn push_stdin(
        &mut self,
        source: &Proc,
        targets: &[Proc],
        directives: &[Info],
        data: Option<&[u8]>,
        done: Completion<()>,
    ) {
        let Some(router) = &self.stdin else {
            return done.complete(Err(Status::ERR_NOT_SUPPORTED));
        };
        let complete = directives.iter().any(|i| {
            i.key.as_str() == pmix_server::types::attr::IOF_COMPLETE
                && i.value.as_bool().unwrap_or(true)
        });
        let end = complete || data.is_some_and(<[u8]>::is_empty);
        tracing::debug!(%source, ?targets, bytes = data.map_or(0, <[u8]>::len), end, "input from a tool");
        let status = router.push(targets, data, end);
        done.complete(if status.is_success() {
            Ok(())
        } else {
            Err(status)
        });
    }

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

    /// Only a connect naming a namespace of another run reaches here (every namespace of this
    /// run is on this node): the name server shared with that run is the rendezvous.
    fn connect(&mut self, procs: &[Proc], info: &[Info], data: Vec<u8>, done: Completion<Vec<u8>>) {
        match &self.names {
            Some(ns) => ns.connect_procs(procs, info, data, move |r| done.complete(r)),
            // No other run is reachable: the namespace named is unknown.
            None => done.complete(Err(Status::ERR_BAD_PARAM)),
        }
    }

    /// Likewise a fence, over processes of another run once connected to it (Open MPI's
    /// `MPI_Comm_disconnect` is a fence over both sides).
    fn fence_nb(
        &mut self,
        procs: &[Proc],
        info: &[Info],
        data: Vec<u8>,
        done: Completion<Vec<u8>>,
    ) {
        match &self.names {
            Some(ns) => ns.fence_procs(procs, info, data, move |r| done.complete(r)),
            None => done.complete(Err(Status::ERR_BAD_PARAM)),
        }
    }

    fn disconnect(&mut self, procs: &[Proc], info: &[Info], done: Completion<()>) {
        match &self.names {
            Some(ns) => ns.disconnect_procs(procs, info, move |r| done.complete(r)),
            None => done.complete(Err(Status::ERR_BAD_PARAM)),
        }
    }

    fn client_connected(&mut self, proc: &Proc, done: Completion<()>) {
        let _ = self.events.send(Event::Connected(proc.clone()));
        done.complete(Ok(()));
    }

    fn client_finalized(&mut self, proc: &Proc, done: Completion<()>) {
        let _ = self.events.send(Event::Finalized(proc.clone()));
        done.complete(Ok(()));
    }

    fn abort(
        &mut self,
        proc: &Proc,
        status: Status,
        message: &str,
        procs: &[Proc],
        done: Completion<()>,
    ) {
        let ev = Event::Abort {
            proc: proc.clone(),
            status,
            message: message.to_owned(),
            procs: procs.to_vec(),
            done,
        };
        if let Err(crossbeam_channel::SendError(Event::Abort { done, .. })) = self.events.send(ev) {
            // The supervisor is gone: the run is ending anyway.
            done.complete(Ok(()));
        }
    }

    fn spawn(&mut self, proc: &Proc, job_info: &[Info], apps: &[App], done: Completion<Nspace>) {
        // Starting processes takes system calls and calls back into the server: the
        // supervising thread does it, not this one.
        let ev = Event::Spawn {
            parent: proc.clone(),
            job_info: job_info.to_vec(),
            apps: apps.to_vec(),
            done,
        };
        if let Err(crossbeam_channel::SendError(Event::Spawn { done, .. })) = self.events.send(ev) {
            done.complete(Err(Status::ERR_JOB_CANCELED));
        }
    }

    fn log(&mut self, proc: &Proc, data: &[Info], directives: &[Info], done: Completion<()>) {
        let Some(ticket) = self.logs.take(data) else {
            return done.complete(Err(Status::ERR_OUT_OF_RESOURCE));
        };
        forward(
            &self.events,
            Event::Log {
                source: proc.clone(),
                data: data.to_vec(),
                directives: directives.to_vec(),
                done,
                ticket,
            },
        );
    }

    fn job_control(
        &mut self,
        proc: &Proc,
        targets: &[Proc],
        directives: &[Info],
        done: Completion<Vec<Info>>,
    ) {
        forward(
            &self.events,
            Event::JobControl {
                requester: proc.clone(),
                targets: targets.to_vec(),
                directives: directives.to_vec(),
                done,
            },
        );
    }

    fn notify_event(
        &mut self,
        code: Status,
        source: &Proc,
        range: DataRange,
        info: &[Info],
        done: Completion<()>,
    ) {
        match &mut self.beyond {
            // One for the resource manager itself: nothing pmixrun acts on.
            _ if range == DataRange::RM => done.complete(Err(Status::ERR_NOT_SUPPORTED)),
            Some(pass_on) => {
                pass_on(code, source, range, info);
                done.complete(Ok(()));
            }
            None => done.complete(Err(Status::ERR_NOT_SUPPORTED)),
        }
    }

    fn query(&mut self, proc: &Proc, queries: &[Query], done: Completion<Vec<Info>>) {
        forward(
            &self.events,
            Event::Query {
                asker: proc.clone(),
                queries: queries.to_vec(),
                done,
            },
        );
    }
}

/// Hands a request to the supervisor; when it is gone (the run is ending) the request is
/// answered `ERR_JOB_CANCELED`, never left unanswered.
pub(crate) fn forward(events: &Sender<Event>, ev: Event) {
    if let Err(crossbeam_channel::SendError(ev)) = events.send(ev) {
        cancel(ev);
    }
}

/// Answers a request the supervisor will not handle.
pub(crate) fn cancel(ev: Event) {
    let no = Err(Status::ERR_JOB_CANCELED);
    match ev {
        Event::Log { done, .. } => done.complete(Err(Status::ERR_JOB_CANCELED)),
        Event::JobControl { done, .. } | Event::Query { done, .. } => done.complete(no),
        Event::Spawn { done, .. } => done.complete(Err(Status::ERR_JOB_CANCELED)),
        Event::Abort { done, .. } => done.complete(Ok(())),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmix_server::types::Rank;

    fn notify(host: &mut RunHost, range: DataRange) -> Result<(), Status> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let source = Proc::new(Nspace::new("tool").unwrap_or_else(|e| panic!("{e}")), 0);
        host.notify_event(
            Status::EVENT_JOB_END,
            &source,
            range,
            &[Info::attr("k", 7i64)],
            Completion::from_fn(move |r| {
                let _ = tx.send(r);
            }),
        );
        rx.try_recv()
            .unwrap_or_else(|e| panic!("not answered: {e}"))
    }

    #[test]
    fn events_beyond_the_server_are_refused_on_one_node_and_passed_on_with_beyond_but_rm_ones() {
        let (events, _rx) = crossbeam_channel::unbounded();
        let mut alone = RunHost::new(events.clone(), None);
        assert_eq!(
            notify(&mut alone, DataRange::GLOBAL),
            Err(Status::ERR_NOT_SUPPORTED)
        );
        let (seen_tx, seen) = crossbeam_channel::unbounded();
        let mut root = RunHost::new(events, None).with_beyond(Box::new(
            move |code, source: &Proc, range, info: &[Info]| {
                let _ = seen_tx.send((code, source.rank, range, info.len()));
            },
        ));
        assert_eq!(notify(&mut root, DataRange::GLOBAL), Ok(()));
        assert_eq!(
            seen.try_recv()
                .unwrap_or_else(|e| panic!("not passed on: {e}")),
            (Status::EVENT_JOB_END, Rank(0), DataRange::GLOBAL, 1)
        );
        // One for the resource manager is for pmixrun itself, which has no use for it.
        assert_eq!(
            notify(&mut root, DataRange::RM),
            Err(Status::ERR_NOT_SUPPORTED)
        );
        assert!(seen.try_recv().is_err(), "an RM event was passed on");
    }
}
