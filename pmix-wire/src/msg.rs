//! The messages of the native protocol, which are also the server engine's vocabulary.
//!
//! Every front-end of the server (this native protocol, the PMI-1 text protocol, the OpenPMIx
//! wire protocol) translates what its clients send into a [`Request`] and what the engine
//! answers from a [`Reply`]; the native protocol simply serializes them. That is why these types
//! speak in PMIx operations (fence, get, publish) rather than in bytes.

use pmix_types::{Info, IofChannel, Key, Nspace, Proc, Rank, Scope, Status, Value};
use serde::{Deserialize, Serialize};

use crate::JobImage;
pub use crate::job_data::{JobData, ProcRealm, Realm};
pub use pmix_types::{App, Event, Published, Query};

/// Magic string opening every handshake, so that a peer speaking something else entirely is
/// recognised at once.
pub const MAGIC: &str = "PMIXRS";

/// The version of the native protocol this crate speaks.
pub const PROTOCOL_VERSION: u16 = 2;

/// The first frame a client sends: who it claims to be, and the proof.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// Always [`MAGIC`].
    pub magic: String,
    /// The client's protocol version ([`PROTOCOL_VERSION`]).
    pub version: u16,
    /// The namespace the client belongs to.
    pub nspace: Nspace,
    /// Its rank.
    pub rank: Rank,
    /// The per-client secret that `setup_fork` put in its environment.
    #[serde(with = "serde_bytes")]
    pub secret: Vec<u8>,
    /// Its process id (informational; identity comes from the socket's credentials).
    pub pid: u32,
}

/// The server's answer to a [`Hello`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Welcome {
    /// The client is accepted; here is everything it needs to serve job-level data locally.
    Accepted {
        /// The server's protocol version.
        version: u16,
        /// The job data of the client's namespace: where its image is.
        job: WelcomeJob,
    },
    /// The client is refused; the connection will be closed.
    Refused {
        /// Why, as a status (`ERR_NOT_SUPPORTED` for a version mismatch, `ERR_INVALID_CRED`,
        /// `ERR_NO_PERMISSIONS`, `ERR_NOT_FOUND` for an unknown process, `ERR_EXISTS` for a
        /// second connection of the same process).
        status: Status,
        /// The server's protocol version, so the client can say what it should have spoken.
        version: u16,
        /// A human-readable reason.
        reason: String,
    },
}

/// Where a welcome's job image is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum WelcomeJob {
    /// In the frame.
    Inline(JobImage),
    /// In the memory file whose descriptor came with the welcome's first byte (`SCM_RIGHTS`):
    /// `len` bytes, sealed against writes, shrinking and growing, which every local client of
    /// the namespace maps. A client that cannot map it asks for the image inline with a Get
    /// of its namespace's rank `WILDCARD`.
    Shared {
        /// The image's length.
        len: u64,
    },
}

/// One key/value pair with the scope it was put with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Kv {
    /// The scope given to Put.
    pub scope: Scope,
    /// The key.
    pub key: Key,
    /// The value.
    pub value: Value,
}

/// The committed data of one process.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProcKvs {
    /// The process.
    pub proc: Proc,
    /// Its key/value pairs.
    pub kvs: Vec<Kv>,
}

/// One server's part of a connect that some participants take part in elsewhere (the frame
/// type of the data a host gathers for `PMIx_Connect`; the host concatenates one frame per
/// part).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ConnectPart {
    /// The job data of the participants' namespaces this server's host registered, when some
    /// participant's namespace is another launcher run's (unknown to it, or known from an
    /// earlier connect): the servers that do not know a namespace learn it from here. Empty
    /// when every namespace is of its own run.
    pub jobs: Vec<JobData>,
    /// The committed data of its participants.
    pub data: Vec<ProcKvs>,
}

/// A request from a client to its server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Request {
    /// Make the data put so far visible to others (`PMIx_Commit`).
    Commit {
        /// Everything put since the last commit.
        kvs: Vec<Kv>,
    },
    /// Synchronise with a set of processes, optionally collecting their data (`PMIx_Fence`).
    Fence {
        /// The participants (rank WILDCARD for a whole namespace); empty means the caller's
        /// whole namespace.
        procs: Vec<Proc>,
        /// Directives (`COLLECT_DATA`, `TIMEOUT`, ...).
        info: Vec<Info>,
    },
    /// Fetch data the client does not hold (`PMIx_Get` when the local store misses).
    Get {
        /// Whose data.
        proc: Proc,
        /// Which key; `None` for all of that process's data.
        key: Option<Key>,
        /// Directives (`IMMEDIATE`, `TIMEOUT`, `DATA_SCOPE`, ...).
        info: Vec<Info>,
    },
    /// Publish key/value pairs under the caller's identity (`PMIx_Publish`).
    Publish {
        /// What to publish.
        data: Vec<Info>,
        /// Directives (`RANGE`, `PERSISTENCE`, ...).
        info: Vec<Info>,
    },
    /// Look published keys up (`PMIx_Lookup`).
    Lookup {
        /// The keys.
        keys: Vec<Key>,
        /// Directives (`RANGE`, `WAIT`, `TIMEOUT`, ...).
        info: Vec<Info>,
    },
    /// Withdraw published keys (`PMIx_Unpublish`); no keys means all of the caller's.
    Unpublish {
        /// The keys.
        keys: Vec<Key>,
        /// Directives (`RANGE`, ...).
        info: Vec<Info>,
    },
    /// Start a new job (`PMIx_Spawn`).
    Spawn {
        /// Job-level directives.
        job_info: Vec<Info>,
        /// The application contexts.
        apps: Vec<App>,
    },
    /// Connect with processes of other namespaces (`PMIx_Connect`).
    Connect {
        /// The participants.
        procs: Vec<Proc>,
        /// Directives.
        info: Vec<Info>,
    },
    /// Undo a connect (`PMIx_Disconnect`).
    Disconnect {
        /// The participants.
        procs: Vec<Proc>,
        /// Directives.
        info: Vec<Info>,
    },
    /// Ask for processes to be aborted (`PMIx_Abort`).
    Abort {
        /// The status to exit with.
        status: Status,
        /// A message for the operator.
        message: String,
        /// Which processes; empty means the caller's whole namespace.
        procs: Vec<Proc>,
    },
    /// Register for events (`PMIx_Register_event_handler`).
    RegisterEvents {
        /// The codes of interest; empty means all.
        codes: Vec<Status>,
        /// Directives.
        info: Vec<Info>,
    },
    /// Withdraw an event registration.
    DeregisterEvents {
        /// The codes registered before.
        codes: Vec<Status>,
    },
    /// Raise an event (`PMIx_Notify_event`).
    Notify {
        /// The event.
        event: Event,
    },
    /// Ask for information (`PMIx_Query_info`).
    Query {
        /// The queries.
        queries: Vec<Query>,
    },
    /// Log data through the host (`PMIx_Log`).
    Log {
        /// What to log, by channel (`LOG_STDERR`, `LOG_STDOUT`, `LOG_SYSLOG`, ...).
        data: Vec<Info>,
        /// Directives (`LOG_ONCE`, `LOG_TIMESTAMP`, ...).
        directives: Vec<Info>,
    },
    /// Act on processes or register cleanups (`PMIx_Job_control`).
    JobControl {
        /// The processes acted on (rank `WILDCARD` for a whole namespace); empty means the
        /// caller's namespace.
        targets: Vec<Proc>,
        /// The directives (`JOB_CTRL_KILL`, `JOB_CTRL_SIGNAL`, `REGISTER_CLEANUP`, ...).
        directives: Vec<Info>,
    },
    /// Form a group of processes (`PMIx_Group_construct`): a collective over the members,
    /// each calling it with the same id and member list.
    GroupConstruct {
        /// The group's id, chosen by the members.
        grp: String,
        /// The members (rank WILDCARD for a whole namespace); must include the caller.
        procs: Vec<Proc>,
        /// Directives (`GROUP_ASSIGN_CONTEXT_ID`, `GROUP_INFO`, `TIMEOUT`, ...).
        info: Vec<Info>,
    },
    /// Dissolve a group (`PMIx_Group_destruct`): a collective over its members.
    GroupDestruct {
        /// The group's id.
        grp: String,
        /// The members; empty means those the group was constructed with.
        procs: Vec<Proc>,
        /// Directives (`TIMEOUT`, ...).
        info: Vec<Info>,
    },
    /// The client is finishing (`PMIx_Finalize`).
    Finalize {
        /// Directives.
        info: Vec<Info>,
    },
    /// Leave a group (`PMIx_Group_leave`): not a collective; the other members hear of it
    /// (`GROUP_LEFT`). Last, so that the variants before keep their numbers on the wire.
    GroupLeave {
        /// The group's id.
        grp: String,
        /// Directives.
        info: Vec<Info>,
    },
    /// Forward these processes' output to the caller (`PMIx_IOF_pull`; tools only). Answered
    /// with [`ReplyBody::IofPull`]; the output then comes as [`ServerMsg::Iof`].
    IofPull {
        /// Whose output (rank `WILDCARD` for a whole namespace).
        procs: Vec<Proc>,
        /// Which outputs, a bit set (`STDOUT`, `STDERR`, `STDDIAG`).
        channels: IofChannel,
        /// Directives (`IOF_TAG_OUTPUT`, `IOF_TIMESTAMP_OUTPUT`, `IOF_XML_OUTPUT`, ...).
        directives: Vec<Info>,
        /// The caller's own number for this pull, which every chunk for it carries.
        tag: u64,
    },
    /// Stop forwarding for a pull (`PMIx_IOF_deregister`).
    IofDeregister {
        /// The server's id of the pull ([`ReplyBody::IofPull`]).
        id: u64,
        /// Directives.
        directives: Vec<Info>,
    },
    /// Input for processes' stdin (`PMIx_IOF_push`; tools only).
    IofPush {
        /// The processes; empty means rank 0 of the server's first job.
        targets: Vec<Proc>,
        /// Directives (`IOF_COMPLETE`: the input is complete, close their stdin).
        directives: Vec<Info>,
        /// The bytes; `None` for a push carrying only directives.
        #[serde(with = "serde_bytes")]
        data: Option<Vec<u8>>,
    },
}

/// Output of one process forwarded to a tool that pulled it ([`ServerMsg::Iof`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IofChunk {
    /// The puller's own number for the pull (its `tag` in [`Request::IofPull`]).
    pub tag: u64,
    /// The process that wrote it.
    pub source: Proc,
    /// Which of its outputs.
    pub channel: IofChannel,
    /// Attributes of the chunk (none yet).
    pub info: Vec<Info>,
    /// The bytes (tagged, timestamped or in XML as the pull asked).
    #[serde(with = "serde_bytes")]
    pub data: Vec<u8>,
}

/// The payload of a reply, by request kind.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ReplyBody {
    /// Only the status matters.
    None,
    /// Data collected by a fence.
    Fence {
        /// The committed data of the participants.
        data: Vec<ProcKvs>,
    },
    /// The answer to a Get: the process's data (all of it that the caller may see, so that
    /// the next Get is local) and, for a process of a namespace the caller did not have, that
    /// namespace's job data.
    Get {
        /// Data of the requested process.
        data: Vec<ProcKvs>,
        /// Job data of other namespaces, as their images.
        jobs: Vec<JobImage>,
    },
    /// Lookup results.
    Lookup {
        /// One entry per key found.
        found: Vec<Published>,
    },
    /// The namespace a spawn created.
    Spawn {
        /// The new namespace.
        nspace: Nspace,
    },
    /// After a connect: the job data of the other namespaces and the committed data of the
    /// other participants.
    Connect {
        /// Job data of the other namespaces.
        jobs: Vec<JobData>,
        /// Committed data of the participants.
        data: Vec<ProcKvs>,
    },
    /// Query results.
    Query {
        /// One entry per answered key.
        results: Vec<Info>,
    },
    /// A group constructed: its final membership and, when one was asked for, its context id
    /// (unique among the groups of the server's run).
    Group {
        /// The members, sorted.
        members: Vec<Proc>,
        /// `PMIX_GROUP_CONTEXT_ID`, with `GROUP_ASSIGN_CONTEXT_ID`.
        context_id: Option<u64>,
    },
    /// A pull registered: the server's id for it, which [`Request::IofDeregister`] names.
    IofPull {
        /// The id.
        id: u64,
    },
}

/// A reply to one request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Reply {
    /// The outcome.
    pub status: Status,
    /// The payload.
    pub body: ReplyBody,
}

impl Reply {
    /// A reply carrying only a status.
    pub fn status(status: Status) -> Self {
        Reply {
            status,
            body: ReplyBody::None,
        }
    }
}

/// What a client sends after the handshake: a request tagged with an id of its choosing that
/// the reply will carry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClientMsg {
    /// The request id (the client's to choose; unique among its outstanding requests).
    pub id: u32,
    /// The request.
    pub req: Request,
}

/// What a server sends after the handshake.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ServerMsg {
    /// The reply to the request with this id.
    Reply {
        /// The request id.
        id: u32,
        /// The reply.
        reply: Reply,
    },
    /// An event the client registered for.
    Event(Event),
    /// Output the tool pulled.
    Iof(IofChunk),
}
