//! The name-server protocol: how a launcher (a session) forwards its clients' publish, lookup
//! and unpublish requests to a standalone name server that several launcher runs share.
//!
//! Framed like the native protocol (length prefix, MessagePack body). The launcher opens with
//! an [`NsHello`] naming its node; the server answers with an [`NsWelcome`]; then each
//! [`NsMsg`] gets exactly one [`NsReply`] with the same id, in any order (a lookup that waits
//! is answered when its keys are published). The connection is the session: when it closes,
//! everything the session published that does not persist indefinitely is removed.

use pmix_types::{Info, Key, Nspace, Proc, Status};
use serde::{Deserialize, Serialize};

use crate::Published;

/// Magic string opening the name-server handshake.
pub const NS_MAGIC: &str = "PMIXRS-NAMES";

/// The version of the name-server protocol this crate speaks.
pub const NS_PROTOCOL_VERSION: u16 = 1;

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
}
