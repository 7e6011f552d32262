//! Host callbacks: what the engine asks of the host (`HostCall`), what the host answers
//! (`HostOutcome`), and who waits for each answer (`PendingHost`, kept in `HostOps` under the
//! callback's id until [`Engine::handle_host_done`](super::Engine::handle_host_done)).

use std::collections::HashMap;

use pmix_types::{Info, Key, Nspace, Proc, Rank, Status};
use pmix_wire::{App, Event, ProcKvs, Query};

use super::ConnId;
use super::store::NsId;

/// A group operation, as the host sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GroupOp {
    /// `PMIx_Group_construct`.
    Construct,
    /// `PMIx_Group_destruct`.
    Destruct,
}

/// A host callback in flight.
pub(crate) type OpId = u64;

/// What the host answered, by callback kind.
#[derive(Debug)]
#[doc(hidden)]
pub enum HostOutcome {
    /// A callback answered with nothing but a status.
    Unit(Result<(), Status>),
    /// Bytes (fence data, direct modex data).
    Bytes(Result<Vec<u8>, Status>),
    /// Lookup results.
    Lookup(Result<Vec<pmix_wire::Published>, Status>),
    /// A namespace (spawn).
    Nspace(Result<Nspace, Status>),
    /// Info entries (query).
    Infos(Result<Vec<Info>, Status>),
}

/// A call the engine wants the shell to make on the host.
#[derive(Debug)]
pub(crate) enum HostCall {
    ClientConnected {
        proc: Proc,
    },
    ClientFinalized {
        proc: Proc,
    },
    Abort {
        proc: Proc,
        status: Status,
        message: String,
        procs: Vec<Proc>,
    },
    FenceNb {
        procs: Vec<Proc>,
        info: Vec<Info>,
        data: Vec<u8>,
    },
    DirectModex {
        proc: Proc,
        info: Vec<Info>,
    },
    Publish {
        proc: Proc,
        data: Vec<Info>,
        info: Vec<Info>,
    },
    Lookup {
        proc: Proc,
        keys: Vec<Key>,
        info: Vec<Info>,
    },
    Unpublish {
        proc: Proc,
        keys: Vec<Key>,
        info: Vec<Info>,
    },
    Spawn {
        proc: Proc,
        job_info: Vec<Info>,
        apps: Vec<App>,
    },
    Connect {
        procs: Vec<Proc>,
        info: Vec<Info>,
        data: Vec<u8>,
    },
    Disconnect {
        procs: Vec<Proc>,
        info: Vec<Info>,
    },
    NotifyEvent {
        event: Event,
    },
    Query {
        proc: Proc,
        queries: Vec<Query>,
    },
    Log {
        proc: Proc,
        data: Vec<Info>,
        directives: Vec<Info>,
    },
    JobControl {
        proc: Proc,
        targets: Vec<Proc>,
        directives: Vec<Info>,
    },
    Group {
        op: GroupOp,
        grp: String,
        procs: Vec<Proc>,
        info: Vec<Info>,
        data: Vec<u8>,
    },
    ToolConnected {
        tool: Proc,
        info: Vec<Info>,
    },
    PushStdin {
        source: Proc,
        targets: Vec<Proc>,
        directives: Vec<Info>,
        data: Option<Vec<u8>>,
    },
}

/// What a direct modex asks another node for (`get.rs`): the process, and the key to wait
/// for there.
pub(super) type Asked = ((NsId, Rank), Option<Key>);

/// Who waits for a host callback's answer.
pub(super) enum PendingHost {
    Connect {
        conn: ConnId,
    },
    /// A tool's connection, with the host (`tool_connected`).
    ToolConnect {
        conn: ConnId,
    },
    Finalize {
        conn: ConnId,
        id: u32,
    },
    Abort {
        conn: ConnId,
        id: u32,
    },
    Fence {
        seq: u64,
    },
    Dmodex {
        /// The process asked for, and the key the other node was asked to wait for.
        asked: Asked,
        /// Which of the requests out for that (see `get::Gets`).
        request: u64,
    },
    /// A request answered with the host's status alone.
    Status {
        conn: ConnId,
        id: u32,
    },
    Lookup {
        conn: ConnId,
        id: u32,
    },
    Spawn {
        conn: ConnId,
        id: u32,
    },
    Query {
        conn: ConnId,
        id: u32,
        /// What was answered without the host.
        local: Vec<Info>,
    },
    /// A disconnect spanning nodes, completed by the host.
    Collective {
        seq: u64,
    },
    /// A group collective spanning nodes, completed by the host.
    Group {
        seq: u64,
        op: GroupOp,
        gid: u32,
    },
    /// Nobody waits for the answer.
    Nothing,
}

/// The host callbacks in flight.
pub(super) struct HostOps {
    pending: HashMap<OpId, PendingHost>,
    next: OpId,
}

impl Default for HostOps {
    fn default() -> Self {
        HostOps {
            pending: HashMap::new(),
            next: 1,
        }
    }
}

impl HostOps {
    /// A new callback, answered to `pending`: its id.
    pub(super) fn start(&mut self, pending: PendingHost) -> OpId {
        let op = self.next;
        self.next += 1;
        self.pending.insert(op, pending);
        op
    }

    /// The host answered `op`: who waited, unless it was unknown or answered already.
    pub(super) fn finish(&mut self, op: OpId) -> Option<PendingHost> {
        self.pending.remove(&op)
    }
}

/// The status a host answered with.
pub(super) fn status_of(o: &HostOutcome) -> Status {
    match o {
        HostOutcome::Unit(r) => r.err().unwrap_or(Status::SUCCESS),
        HostOutcome::Bytes(r) => r.as_ref().err().copied().unwrap_or(Status::SUCCESS),
        HostOutcome::Lookup(r) => r.as_ref().err().copied().unwrap_or(Status::SUCCESS),
        HostOutcome::Nspace(r) => r.as_ref().err().copied().unwrap_or(Status::SUCCESS),
        HostOutcome::Infos(r) => r.as_ref().err().copied().unwrap_or(Status::SUCCESS),
    }
}

/// The status for a client when the host did not answer with the value its request needs: its
/// error, or `ERR_BAD_PARAM` for a success of the wrong kind.
pub(super) fn failure_of(o: &HostOutcome) -> Status {
    match status_of(o) {
        s if s.is_success() => Status::ERR_BAD_PARAM,
        s => s,
    }
}

/// Decodes the concatenated per-node contributions a host returns.
pub(super) fn decode_blobs(bytes: &[u8]) -> Result<Vec<ProcKvs>, Status> {
    decode_frames(bytes)
}

/// Decodes concatenated frames, each a list of `T`, into one list.
pub(super) fn decode_frames<T: serde::de::DeserializeOwned>(
    bytes: &[u8],
) -> Result<Vec<T>, Status> {
    pmix_wire::decode_frame_lists(bytes).map_err(|e| {
        tracing::warn!("undecodable data from the host: {e}");
        Status::ERR_UNPACK_FAILURE
    })
}
