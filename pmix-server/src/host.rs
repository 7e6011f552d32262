//! The [`Host`] trait: the callbacks through which the server asks its host (launcher, resource
//! manager) to do what one node cannot do alone, and the [`Completion`] handle that carries the
//! host's answer back.

use std::marker::PhantomData;
use std::sync::Arc;

use crossbeam_channel::Sender;
use pmix_types::{DataRange, Info, Key, Nspace, Proc, Status};
use pmix_wire::{App, Published, Query};

use crate::engine::{HostOutcome, OpId};
use crate::shell::LoopMsg;

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
pub struct Completion<T: Outcome> {
    op: OpId,
    tx: Option<(Sender<LoopMsg>, Arc<mio::Waker>)>,
    _t: PhantomData<fn(T)>,
}

impl<T: Outcome> Completion<T> {
    pub(crate) fn new(op: OpId, tx: Sender<LoopMsg>, waker: Arc<mio::Waker>) -> Self {
        Completion {
            op,
            tx: Some((tx, waker)),
            _t: PhantomData,
        }
    }

    /// Answers the callback.
    pub fn complete(mut self, result: Result<T, Status>) {
        self.send(T::wrap(result));
    }

    fn send(&mut self, outcome: HostOutcome) {
        if let Some((tx, waker)) = self.tx.take() {
            // The server may already be gone; then nobody is waiting and there is nothing to do.
            if tx.send(LoopMsg::HostDone(self.op, outcome)).is_ok() {
                let _ = waker.wake();
            }
        }
    }
}

impl<T: Outcome> Drop for Completion<T> {
    fn drop(&mut self) {
        if self.tx.is_some() {
            tracing::warn!(
                op = self.op,
                "host dropped a callback without completing it"
            );
            self.send(T::wrap(Err(Status::ERROR)));
        }
    }
}

impl<T: Outcome> std::fmt::Debug for Completion<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Completion").field("op", &self.op).finish()
    }
}

/// The host's side of the server: the standard's server module.
///
/// Every method runs on the server's event-loop thread and must not block it; it answers
/// through its [`Completion`], now or later, from any thread. Every method has a default:
/// `client_connected` and `client_finalized` accept, everything else answers
/// `ERR_NOT_SUPPORTED`, which the requesting client receives as its call's status.
#[allow(unused_variables)]
pub trait Host: Send + 'static {
    /// A registered client connected and was authenticated. Answering with an error refuses it.
    fn client_connected(&mut self, proc: &Proc, done: Completion<()>) {
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

    /// Connect `procs` across namespaces.
    fn connect(&mut self, procs: &[Proc], info: &[Info], done: Completion<()>) {
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

    /// Answer queries the server cannot answer itself.
    fn query(&mut self, proc: &Proc, queries: &[Query], done: Completion<Vec<Info>>) {
        done.complete(Err(Status::ERR_NOT_SUPPORTED));
    }
}

/// Who answers clients' publish, lookup and unpublish requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameService {
    /// The server's own name service: every range is served among this server's clients,
    /// with the rules of the standard (ranges, persistence, `WAIT`, duplicates, uid
    /// isolation; see `docs/ARCHITECTURE.md`). `SESSION` and `GLOBAL` then both mean "every
    /// client of this server".
    #[default]
    BuiltIn,
    /// The host's [`Host::publish`], [`Host::lookup`] and [`Host::unpublish`] callbacks, for
    /// hosts that span nodes or share a name server. The server adds the caller's
    /// `PMIX_USERID` and `PMIX_GRPID` to the directives; `WAIT` and `TIMEOUT` are the host's
    /// to honour.
    Host,
}

/// A host that implements nothing: every callback takes its default. Enough for a single-node
/// launcher whose fences and direct modex never leave the node.
#[derive(Debug, Default)]
pub struct NoHost;

impl Host for NoHost {}
