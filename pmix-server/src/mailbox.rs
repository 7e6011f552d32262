//! The messages into the event loop: calls from the host's side of the API ([`Call`], sent by
//! `server.rs` and answered on a channel of their own) and host completions ([`LoopMsg::HostDone`],
//! sent by `host.rs`'s `Completion`). Kept apart from the loop itself so that the API and the
//! host-facing types depend on the loop's inbox, not on the loop.

use std::cell::RefCell;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use crossbeam_channel::Sender;
use pmix_types::{Info, Nspace, Proc, Status};
use pmix_wire::JobData;

use crate::Error;
use crate::engine::{HostOutcome, OpId, Proofs};

/// A call from the host's side of the API.
pub(crate) enum Call {
    RegisterNspace {
        nspace: Nspace,
        nlocalprocs: u32,
        info: Vec<Info>,
        reply: Sender<Result<(), Error>>,
    },
    DeregisterNspace {
        nspace: Nspace,
        reply: Sender<()>,
    },
    RegisterClient {
        proc: Proc,
        uid: u32,
        gid: u32,
        /// What may claim the client's name: its secret, and whether a bare uid may.
        proofs: Proofs,
        reply: Sender<Result<(), Error>>,
    },
    DeregisterClient {
        proc: Proc,
        reply: Sender<()>,
    },
    /// The host started process `pid` for the registered client `proc`.
    ClientStarted {
        proc: Proc,
        pid: u32,
    },
    /// What a registered client's name may be claimed with (for `setup_fork`).
    ClientProofs {
        proc: Proc,
        reply: Sender<Option<Proofs>>,
    },
    Dmodex {
        proc: Proc,
        /// The requesting server's directives (`PMIX_REQUIRED_KEY`, `PMIX_TIMEOUT`).
        info: Vec<Info>,
        done: DmodexDone,
    },
    Notify {
        event: pmix_wire::Event,
    },
    /// Read and act on what the process has sent so far, then run `done`.
    SettleClient {
        proc: Proc,
        done: Box<dyn FnOnce() + Send>,
    },
    /// The host defines a process set.
    DefinePset {
        name: String,
        members: Vec<Proc>,
    },
    /// The host deletes a process set.
    DeletePset {
        name: String,
        reply: Sender<bool>,
    },
    /// A process of another node ended.
    ProcEndedElsewhere {
        proc: Proc,
        status: Status,
    },
    /// A process that ended (here or on another node) was started again.
    ProcRestarted {
        proc: Proc,
        reincarnation: u32,
    },
    /// A local client's process ended.
    ClientEnded {
        proc: Proc,
    },
    /// Make the way a PMI-1 process will reach the server.
    Pmi1Connect {
        proc: Proc,
        how: Pmi1Way,
        reply: Sender<Result<Pmi1Endpoint, Error>>,
    },
    /// Output of a process, for the tools that pulled it.
    IofDeliver {
        source: Proc,
        channel: pmix_types::IofChannel,
        data: Vec<u8>,
        unix_secs: u64,
    },
    /// The job data of a namespace, as its clients receive it.
    JobData {
        nspace: Nspace,
        reply: Sender<Option<Arc<JobData>>>,
    },
}

/// How a PMI-1 process is to reach the server.
#[derive(Clone, Copy)]
pub(crate) enum Pmi1Way {
    /// An inherited socket.
    Fd,
    /// TCP to the server's PMI-1 port, naming itself with this id.
    Port(u32),
}

/// Where a PMI-1 process reaches the server.
pub(crate) enum Pmi1Endpoint {
    /// The process's end of a connected socket pair.
    Fd(OwnedFd),
    /// The loopback TCP port to connect to.
    Port(u16),
}

pub(crate) type DmodexDone = Box<dyn FnOnce(Result<Vec<u8>, Status>) + Send>;

/// Messages into the event loop.
pub(crate) enum LoopMsg {
    HostDone(OpId, HostOutcome),
    Call(Call),
    Shutdown,
}

thread_local! {
    /// The inbox of the event loop running on this thread, if one does.
    static LOOP_INBOX: RefCell<Option<Sender<LoopMsg>>> = const { RefCell::new(None) };
}

/// Marks this thread as the one running the loop whose inbox is `tx`. The loop then promises
/// to look at its inbox before it sleeps after anything it runs (host callbacks, its hook),
/// so that what they put there needs no wake-up.
pub(crate) fn set_loop_thread(tx: &Sender<LoopMsg>) {
    LOOP_INBOX.with(|l| *l.borrow_mut() = Some(tx.clone()));
}

/// Whether this thread runs the loop whose inbox is `tx`.
pub(crate) fn on_loop_thread(tx: &Sender<LoopMsg>) -> bool {
    LOOP_INBOX.with(|l| l.borrow().as_ref().is_some_and(|own| own.same_channel(tx)))
}
