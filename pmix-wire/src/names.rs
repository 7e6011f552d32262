//! The name-server protocol: how a launcher (a session) forwards its clients' publish, lookup
//! and unpublish requests to a standalone name server that several launcher runs share.
//!
//! Framed like the native protocol (length prefix, MessagePack body). The launcher opens with
//! an [`NsHello`] naming its node; the server answers with an [`NsWelcome`]; then each
//! [`NsMsg`] gets exactly one [`NsReply`] with the same id, in any order (a lookup that waits
//! is answered when its keys are published). The connection is the session: when it closes,
//! everything the session published that does not persist indefinitely is removed.
//!
//! Since version 2 the server is also the rendezvous of a connect, fence or disconnect whose
//! processes span the namespaces of several runs ([`NsRequest::Connect`],
//! [`NsRequest::Fence`], [`NsRequest::Disconnect`]): each run that owns some of the namespaces sends its part, and
//! once every namespace named has been contributed by the run that owns it each of them is
//! answered with every run's part ([`NsReply::data`]).

use pmix_types::{Info, Key, Nspace, Proc, Status};
use serde::{Deserialize, Serialize};

use crate::Published;

/// Magic string opening the name-server handshake.
pub const NS_MAGIC: &str = "PMIXRS-NAMES";

/// The version of the name-server protocol this crate speaks.
pub const NS_PROTOCOL_VERSION: u16 = 2;

/// The first frame a launcher sends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NsHello {
    /// Always [`NS_MAGIC`].
    pub magic: String,
    /// [`NS_PROTOCOL_VERSION`].
    pub version: u16,
    /// The node the launcher's processes run on (for the `LOCAL` range).
    pub host: String,
}

/// The server's answer to an [`NsHello`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NsWelcome {
    /// `SUCCESS`, or why the launcher is refused (the connection is then closed).
    pub status: Status,
    /// The server's protocol version.
    pub version: u16,
    /// A human-readable reason when refused.
    pub reason: String,
}

/// The process a request is made for, with the credentials its server vouches for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NsCaller {
    /// The process.
    pub proc: Proc,
    /// Its user id.
    pub uid: u32,
    /// Its group id.
    pub gid: u32,
}

/// A request from a launcher.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum NsRequest {
    /// `PMIx_Publish` on behalf of `caller`.
    Publish {
        /// The publisher.
        caller: NsCaller,
        /// What to publish.
        data: Vec<Info>,
        /// Directives (range, persistence).
        info: Vec<Info>,
    },
    /// `PMIx_Lookup` on behalf of `caller`.
    Lookup {
        /// Who looks up.
        caller: NsCaller,
        /// The keys.
        keys: Vec<Key>,
        /// Directives (range, wait, timeout).
        info: Vec<Info>,
    },
    /// `PMIx_Unpublish` on behalf of `caller`.
    Unpublish {
        /// Whose entries.
        caller: NsCaller,
        /// The keys; empty for all of the caller's.
        keys: Vec<Key>,
        /// Directives (range).
        info: Vec<Info>,
    },
    /// A namespace of this session started (so custom ranges naming it resolve).
    NspaceStarted {
        /// The namespace.
        nspace: Nspace,
    },
    /// A namespace of this session ended: its `APP` and `PROC` entries go.
    NspaceEnded {
        /// The namespace.
        nspace: Nspace,
    },
    /// A process of this session ended: its `PROC` entries go.
    ProcEnded {
        /// The process.
        proc: Proc,
    },
    /// This session's part of `PMIx_Connect` over `procs`, whose namespaces belong to several
    /// sessions. Answered, once every session owning a namespace of `procs` sent the same
    /// request, with the concatenation of every session's `data` in [`NsReply::data`].
    Connect {
        /// The participants, sorted and without duplicates (rank `WILDCARD`: the whole
        /// namespace). Every session sends the same list.
        procs: Vec<Proc>,
        /// Directives (`PMIX_TIMEOUT`, seconds).
        info: Vec<Info>,
        /// This session's contribution, opaque to the server: a sequence of frames.
        data: Vec<u8>,
    },
    /// This session's part of a fence over `procs` whose namespaces belong to several
    /// sessions, once connected (Open MPI's `MPI_Comm_disconnect` is such a fence): gathered
    /// and answered as [`NsRequest::Connect`] is.
    Fence {
        /// The participants, as for [`NsRequest::Connect`].
        procs: Vec<Proc>,
        /// Directives (`PMIX_TIMEOUT`, seconds).
        info: Vec<Info>,
        /// This session's contribution, opaque to the server.
        data: Vec<u8>,
    },
    /// This session's part of `PMIx_Disconnect` over `procs`: answered once every session
    /// owning a namespace of `procs` sent it.
    Disconnect {
        /// The participants, as for [`NsRequest::Connect`].
        procs: Vec<Proc>,
        /// Directives (`PMIX_TIMEOUT`, seconds).
        info: Vec<Info>,
    },
}

/// A request tagged with the launcher's id for it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NsMsg {
    /// Unique among the launcher's outstanding requests.
    pub id: u32,
    /// The request.
    pub req: NsRequest,
}

/// The answer to one [`NsMsg`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NsReply {
    /// The request's id.
    pub id: u32,
    /// The outcome.
    pub status: Status,
    /// What a lookup found (empty otherwise).
    pub found: Vec<Published>,
    /// What a connect gathered: every session's contribution, concatenated (empty otherwise).
    #[serde(with = "serde_bytes")]
    pub data: Vec<u8>,
}
