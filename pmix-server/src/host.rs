//! The [`Host`] trait: the callbacks through which the server asks its host (launcher, resource
//! manager) to do what one node cannot do alone, and the [`Completion`] handle that carries the
//! host's answer back.

use std::marker::PhantomData;
use std::sync::Arc;

use crossbeam_channel::Sender;
use pmix_types::{DataRange, Info, Key, Nspace, Proc, Status};
use pmix_wire::{App, Published, Query};

use crate::engine::{GroupOp, HostCall, HostOutcome, OpId};
use crate::hook::LoopHook;
use crate::mailbox::{self, LoopMsg};

/// A type the host can answer a callback with.
pub trait Outcome: Send + 'static + sealed::Sealed {
    #[doc(hidden)]
    fn wrap(r: Result<Self, Status>) -> HostOutcome
    where
        Self: Sized;
}

mod sealed {
    pub trait Sealed {}
}

macro_rules! outcome {
    ($($t:ty => $v:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Outcome for $t {
            fn wrap(r: Result<Self, Status>) -> HostOutcome {
                HostOutcome::$v(r)
            }
        }
    )*};
}

outcome! {
    () => Unit,
    Vec<u8> => Bytes,
    Vec<Published> => Lookup,
    Nspace => Nspace,
    Vec<Info> => Infos,
}

/// The handle through which a host completes one callback, from any thread, at any later time.
///
/// Completing consumes the handle, so a callback is answered at most once. A handle dropped
/// without being completed answers [`Status::ERROR`],
/// so that no client waits forever on a host that forgot the request.
///
/// The server makes these for its callbacks; [`Completion::from_fn`] makes one that hands the
/// answer to a function instead, for a host's own tests of its callbacks.
pub struct Completion<T: Outcome> {
    sink: Option<Sink<T>>,
    _t: PhantomData<fn(T)>,
}

/// Where a [`Completion`]'s answer goes.
enum Sink<T> {
    /// The server's event loop, which wakes to take it.
    Loop {
        op: OpId,
        tx: Sender<LoopMsg>,
        waker: Arc<mio::Waker>,
    },
    /// A function of the host's choosing.
    Fn(Box<dyn FnOnce(Result<T, Status>) + Send>),
}

impl<T: Outcome> Completion<T> {
    pub(crate) fn new(op: OpId, tx: Sender<LoopMsg>, waker: Arc<mio::Waker>) -> Self {
        Completion {
            sink: Some(Sink::Loop { op, tx, waker }),
            _t: PhantomData,
        }
    }

    /// A completion that calls `f` with the answer (with `Err(Status::ERROR)` if it is dropped
    /// unanswered), as the server would receive it: lets a host test its callbacks, or
    /// forward an answer through its own machinery, without a running server.
    ///
    /// ```
    /// use pmix_server::types::{Nspace, Proc, Status};
    /// use pmix_server::{Completion, Host};
    ///
    /// /// A host that refuses every abort.
    /// struct Stubborn;
    /// impl Host for Stubborn {
    ///     fn abort(&mut self, _: &Proc, _: Status, _: &str, _: &[Proc], done: Completion<()>) {
    ///         done.complete(Err(Status::ERR_NOT_SUPPORTED));
    ///     }
    /// }
    ///
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// let me = Proc::new(Nspace::new("job").unwrap(), 0);
    /// Stubborn.abort(&me, Status::ERROR, "bye", &[], Completion::from_fn(move |r| tx.send(r).unwrap()));
    /// assert_eq!(rx.recv().unwrap(), Err(Status::ERR_NOT_SUPPORTED));
    ///
    /// // A completion dropped unanswered answers ERROR, as it would to a client.
    /// let (tx, rx) = std::sync::mpsc::channel();
    /// drop(Completion::<()>::from_fn(move |r| tx.send(r).unwrap()));
    /// assert_eq!(rx.recv().unwrap(), Err(Status::ERROR));
    /// ```
    pub fn from_fn(f: impl FnOnce(Result<T, Status>) + Send + 'static) -> Self {
        Completion {
            sink: Some(Sink::Fn(Box::new(f))),
            _t: PhantomData,
        }
    }

    /// Answers the callback.
    pub fn complete(mut self, result: Result<T, Status>) {
        self.send(result);
    }

    fn send(&mut self, result: Result<T, Status>) {
        match self.sink.take() {
            Some(Sink::Loop { op, tx, waker }) => {
                // The server may already be gone; then nobody is waiting and there is nothing
                // to do.
                let delivered = tx.send(LoopMsg::HostDone(op, T::wrap(result))).is_ok();
                // On the loop's own thread the loop takes it before it sleeps again.
                if delivered && !mailbox::on_loop_thread(&tx) {
                    let _ = waker.wake();
                }
            }
            Some(Sink::Fn(f)) => f(result),
            None => {}
        }
    }
}

impl<T: Outcome> Drop for Completion<T> {
    fn drop(&mut self) {
        if self.sink.is_some() {
            tracing::warn!(?self, "host dropped a callback without completing it");
            self.send(Err(Status::ERROR));
        }
    }
}

impl<T: Outcome> std::fmt::Debug for Completion<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Completion");
        if let Some(Sink::Loop { op, .. }) = &self.sink {
            d.field("op", op);
        }
        d.finish_non_exhaustive()
    }
}

/// Makes the host call the engine asked for, with a completion that brings the answer back
/// through the loop's channel. A host may answer at once: the answer is then in the channel
/// when this returns, for the loop to take on its next turn.
pub(crate) fn call_host<H: Host>(
    host: &mut H,
    op: OpId,
    call: HostCall,
    tx: &Sender<LoopMsg>,
    waker: &Arc<mio::Waker>,
) {
    fn done<T: Outcome>(op: OpId, tx: &Sender<LoopMsg>, waker: &Arc<mio::Waker>) -> Completion<T> {
        Completion::new(op, tx.clone(), waker.clone())
    }
    match call {
        HostCall::ClientConnected { proc } => host.client_connected(&proc, done(op, tx, waker)),
        HostCall::ClientFinalized { proc } => host.client_finalized(&proc, done(op, tx, waker)),
        HostCall::Abort {
            proc,
            status,
            message,
            procs,
        } => host.abort(&proc, status, &message, &procs, done(op, tx, waker)),
        HostCall::FenceNb { procs, info, data } => {
            host.fence_nb(&procs, &info, data, done(op, tx, waker))
        }
        HostCall::DirectModex { proc, info } => {
            host.direct_modex(&proc, &info, done(op, tx, waker))
        }
        HostCall::Publish { proc, data, info } => {
            host.publish(&proc, &data, &info, done(op, tx, waker))
        }
        HostCall::Lookup { proc, keys, info } => {
            host.lookup(&proc, &keys, &info, done(op, tx, waker))
        }
        HostCall::Unpublish { proc, keys, info } => {
            host.unpublish(&proc, &keys, &info, done(op, tx, waker))
        }
        HostCall::Spawn {
            proc,
            job_info,
            apps,
        } => host.spawn(&proc, &job_info, &apps, done(op, tx, waker)),
        HostCall::Connect { procs, info, data } => {
            host.connect(&procs, &info, data, done(op, tx, waker))
        }
        HostCall::Disconnect { procs, info } => host.disconnect(&procs, &info, done(op, tx, waker)),
        HostCall::NotifyEvent { event } => host.notify_event(
            event.code,
            &event.source,
            event.range,
            &event.info,
            done(op, tx, waker),
        ),
        HostCall::Query { proc, queries } => host.query(&proc, &queries, done(op, tx, waker)),
        HostCall::Log {
            proc,
            data,
            directives,
        } => host.log(&proc, &data, &directives, done(op, tx, waker)),
        HostCall::JobControl {
            proc,
            targets,
            directives,
        } => host.job_control(&proc, &targets, &directives, done(op, tx, waker)),
        HostCall::Group {
            op: gop,
            grp,
            procs,
            info,
            data,
        } => host.group(gop, &grp, &procs, &info, data, done(op, tx, waker)),
        HostCall::ToolConnected { tool, info } => {
            host.tool_connected(&tool, &info, done(op, tx, waker))
        }
        HostCall::PushStdin {
            source,
            targets,
            directives,
            data,
        } => host.push_stdin(
            &source,
            &targets,
            &directives,
            data.as_deref(),
            done(op, tx, waker),
        ),
    }
}

/// The host's side of the server: the standard's server module.
///
/// Every method runs on the server's event-loop thread and must not block it; it answers
/// through its [`Completion`], now or later, from any thread. Every method has a default:
/// `client_connected`, `client_finalized` and `tool_connected` accept, everything else answers
/// `ERR_NOT_SUPPORTED`, which the requesting client receives as its call's status.
#[allow(unused_variables)]
pub trait Host: Send + 'static {
    /// A registered client connected and was authenticated. Answering with an error refuses it.
    fn client_connected(&mut self, proc: &Proc, done: Completion<()>) {
        done.complete(Ok(()));
    }

    /// A tool connected (`PMIx_tool_init`, `PMIx_tool_attach_to_server`; see `docs/TOOLS.md`)
    /// and was authenticated: its uid is root's or the server's. `tool` is its name (the one
    /// it brought, or the one the server gave it); `info` holds its `USERID` and `GRPID`, then
    /// what it passed along (`PROC_PID`, `CMD_LINE`, ...). Answering with an error refuses it.
    /// Only called when the server was started with `ServerOptions::tool_support`. Added
    /// after the first release; the default accepts.
    fn tool_connected(&mut self, tool: &Proc, info: &[Info], done: Completion<()>) {
        done.complete(Ok(()));
    }

    /// A client called finalize; its reply waits for this answer.
    fn client_finalized(&mut self, proc: &Proc, done: Completion<()>) {
        done.complete(Ok(()));
    }

    /// A client asked for `procs` (empty: its whole namespace) to be aborted with `status`.
    fn abort(
        &mut self,
        proc: &Proc,
        status: Status,
        message: &str,
        procs: &[Proc],
        done: Completion<()>,
    ) {
        done.complete(Err(Status::ERR_NOT_SUPPORTED));
    }

    /// A fence spans processes on other nodes. `data` is this node's contribution (opaque bytes
    /// that other pmix-rs servers understand); answer with the concatenation of every node's
    /// contribution, in any order.
    fn fence_nb(
        &mut self,
        procs: &[Proc],
        info: &[Info],
        data: Vec<u8>,
        done: Completion<Vec<u8>>,
    ) {
        done.complete(Err(Status::ERR_NOT_SUPPORTED));
    }

    /// A client wants the data of `proc`, which runs on another node. Answer with what that
    /// node's server returns from [`Server::dmodex_request`](crate::Server::dmodex_request).
    fn direct_modex(&mut self, proc: &Proc, info: &[Info], done: Completion<Vec<u8>>) {
        done.complete(Err(Status::ERR_NOT_SUPPORTED));
    }

    /// Publish `data` on behalf of `proc`.
    fn publish(&mut self, proc: &Proc, data: &[Info], info: &[Info], done: Completion<()>) {
        done.complete(Err(Status::ERR_NOT_SUPPORTED));
    }

    /// Look up published keys on behalf of `proc`.
    fn lookup(
        &mut self,
        proc: &Proc,
        keys: &[Key],
        info: &[Info],
        done: Completion<Vec<Published>>,
    ) {
        done.complete(Err(Status::ERR_NOT_SUPPORTED));
    }

    /// Withdraw published keys of `proc`.
    fn unpublish(&mut self, proc: &Proc, keys: &[Key], info: &[Info], done: Completion<()>) {
        done.complete(Err(Status::ERR_NOT_SUPPORTED));
    }

    /// Start a new job on behalf of `proc`; answer with its namespace once it is launched.
    fn spawn(&mut self, proc: &Proc, job_info: &[Info], apps: &[App], done: Completion<Nspace>) {
        done.complete(Err(Status::ERR_NOT_SUPPORTED));
    }

    /// Connect `procs` across namespaces, when some live on other nodes. As for
    /// [`Host::fence_nb`], `data` is this node's contribution (its participants' committed data,
    /// which the others see once connected); answer with the concatenation of every node's.
    fn connect(&mut self, procs: &[Proc], info: &[Info], data: Vec<u8>, done: Completion<Vec<u8>>) {
        done.complete(Err(Status::ERR_NOT_SUPPORTED));
    }

    /// Disconnect `procs`.
    fn disconnect(&mut self, procs: &[Proc], info: &[Info], done: Completion<()>) {
        done.complete(Err(Status::ERR_NOT_SUPPORTED));
    }

    /// Deliver an event beyond this node.
    fn notify_event(
        &mut self,
        code: Status,
        source: &Proc,
        range: DataRange,
        info: &[Info],
        done: Completion<()>,
    ) {
        done.complete(Err(Status::ERR_NOT_SUPPORTED));
    }

    /// Answer a client's queries (`PMIx_Query_info`): one [`Info`] per key answered, keyed
    /// by the query key. Only the keys the server does not answer itself reach the host
    /// (the namespaces, process-set names from job data, the server's functions and
    /// attributes, and job-level keys of a namespace's data it answers; process tables, job
    /// status and the host's functions it does not). The client receives the server's answers
    /// and the host's together; when the host fails and the server answered some keys, those,
    /// with `QUERY_PARTIAL_SUCCESS`.
    fn query(&mut self, proc: &Proc, queries: &[Query], done: Completion<Vec<Info>>) {
        done.complete(Err(Status::ERR_NOT_SUPPORTED));
    }

    /// A client asks for `data` to be logged (`PMIx_Log`): each entry a channel
    /// (`LOG_STDERR`, `LOG_STDOUT`, `LOG_SYSLOG`, ...) and what to log there. `directives`
    /// always hold `LOG_SOURCE`, the client (set by the server), and may hold `LOG_TIMESTAMP`
    /// and the like. Answer `ERR_NOT_SUPPORTED` when no channel asked for could be served.
    /// Added after the first release; the default refuses.
    fn log(&mut self, proc: &Proc, data: &[Info], directives: &[Info], done: Completion<()>) {
        done.complete(Err(Status::ERR_NOT_SUPPORTED));
    }

    /// A client asks to act on `targets` (`PMIx_Job_control`): a process, or a whole
    /// namespace with rank `WILDCARD` (the client's own when it named none).
    /// `directives` are what to do: `JOB_CTRL_KILL`, `JOB_CTRL_TERMINATE`,
    /// `JOB_CTRL_SIGNAL` (an int), `JOB_CTRL_PAUSE`, ... Answer `ERR_NOT_SUPPORTED` for any
    /// directive the host does not carry out, never a success for what was not done.
    /// Cleanup registrations (`REGISTER_CLEANUP`, `REGISTER_CLEANUP_DIR` and their modifiers)
    /// never reach the host: the server keeps them and removes those paths when the
    /// namespace is deregistered. Added after the first release; the default refuses.
    fn job_control(
        &mut self,
        proc: &Proc,
        targets: &[Proc],
        directives: &[Info],
        done: Completion<Vec<Info>>,
    ) {
        done.complete(Err(Status::ERR_NOT_SUPPORTED));
    }

    /// The host's own I/O, to be polled by the server's event loop on its thread (see
    /// [`LoopHook`]): a host that talks to other nodes over sockets of its own answers its
    /// callbacks without a hop between threads. Asked when the server starts (`None` then:
    /// no hook, ever) and on every turn of the loop. Default: `None`.
    fn loop_hook(&mut self) -> Option<&mut dyn LoopHook> {
        None
    }

    /// A group's construction or destruction (`op`) over members `procs` of which some live on
    /// other nodes; a group whose members are all local is completed by the server alone.
    /// Called once every local member has entered it, with this node's contribution `data`
    /// (opaque); like [`Host::fence_nb`], complete with every node's contributions
    /// concatenated (this node's included) once every node has entered it, or with an error
    /// (a member gone, a timeout) that every local member receives.
    fn group(
        &mut self,
        op: GroupOp,
        grp: &str,
        procs: &[Proc],
        info: &[Info],
        data: Vec<u8>,
        done: Completion<Vec<u8>>,
    ) {
        done.complete(Err(Status::ERR_NOT_SUPPORTED));
    }

    /// A tool pushed input for `targets`' stdin (`PMIx_IOF_push`; empty `targets`: the host's
    /// choice, rank 0 of its first job for pmixrun). `data` is `None` for a push carrying only
    /// directives; `IOF_COMPLETE` among the `directives` (or an empty `data`) means the input
    /// is complete: close their stdin. The answer is the tool's status; the host must not
    /// block on a target that does not read (bound what it holds and say
    /// `ERR_OUT_OF_RESOURCE`). Added after the first release; the default refuses.
    fn push_stdin(
        &mut self,
        source: &Proc,
        targets: &[Proc],
        directives: &[Info],
        data: Option<&[u8]>,
        done: Completion<()>,
    ) {
        done.complete(Err(Status::ERR_NOT_SUPPORTED));
    }
}

/// A host that implements nothing: every callback takes its default. Enough for a single-node
/// launcher whose fences and direct modex never leave the node.
#[derive(Debug, Default)]
pub struct NoHost;

impl Host for NoHost {}
