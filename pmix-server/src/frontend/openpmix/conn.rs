//! One libpmix client's connection, sans-IO: bytes in, engine requests out, engine answers in,
//! bytes out.
//!
//! The first message is the handshake; the client then sends requests tagged with numbers of
//! its choosing and may have several outstanding (a fence and the gets behind it). Each
//! request that needs the engine gets an engine id of this connection's own, remembered with
//! the client's tag and with how the answer is to be laid out; the rest is answered here: the
//! job data (`REQ`) and anything not supported, which gets a `NOT_SUPPORTED` status so that
//! no client ever waits for nothing.

use std::collections::HashMap;
use std::sync::Arc;

use pmix_types::{Info, Key, Proc, Scope, Status, Value};
use pmix_wire::openpmix::job::{to_job_info, to_proc_kvals};
use pmix_wire::openpmix::{
    ClientHandshake, Codec, CommitPart, Dialect, Identity, Incoming, MsgReader, Notification,
    ProcKvals, Reply as OpenpmixReply, Request as OpenpmixRequest, ServerReply,
    encode_message_followed_by, encode_message_with,
};
use pmix_wire::{JobImage, Kv, ProcKvs, Reply, ReplyBody, Request};

use super::collected::{CollectedParts, SharedCollected};
use super::{Common, Gds};
use crate::engine::{Auth, GetAnswers, PeerCreds};
use crate::frontend::Step;
use crate::outbuf::OutQueue;
use crate::tcp_peer::TcpPeer;

/// Largest message accepted from a client after the handshake. Open MPI's largest (its
/// shared-memory endpoint blob) is a few KiB; a job's worth of spawn data stays far below.
const MAX_MESSAGE: usize = 64 << 20;

/// How an engine answer is laid out for the client.
///
/// The client crate has an `Answer` of the same name and much the same variants, kept apart on
/// purpose: that one reads an OpenPMIx reply into a native one, this one writes a native reply
/// as an OpenPMIx one and carries this side's duties (a fence's data kept for the next
/// `GETNB`, no reply at all, closing after `FINALIZE`). What both sides share, the payload of
/// each command's reply, is `pmix_wire::openpmix::Reply`.
#[derive(Clone, Copy, Debug)]
enum Answer {
    /// A status alone.
    Status,
    /// A fence's status; its collected data is kept for the next `GETNB` answer.
    Fence,
    /// A status, then the data of the processes asked about, one byte object each.
    Get,
    /// A status, then the found names.
    Lookup,
    /// A status and the new namespace.
    Spawn,
    /// A status, then the job data of the other namespaces.
    Connect,
    /// A status, then the answers found.
    Query,
    /// A status, then a (here always empty) list of results (`JOB_CONTROL`).
    Info,
    /// A status, then the group's membership (from libpmix 4.2.4 on) and context id.
    Group { before_424: bool },
    /// A status, then on success the server's id of the pull (`IOF_PULL`).
    IofPull,
    /// Nothing at all (`DEREGEVENTS` gets no reply).
    Silent,
    /// A status; the client closes after it.
    Finalize,
}

enum State {
    /// Waiting for the handshake.
    Handshake,
    /// The handshake is with the engine.
    Checking {
        proc: Proc,
        dialect: Dialect,
        gds: Gds,
    },
    /// Serving requests.
    Ready {
        proc: Proc,
        dialect: Dialect,
        gds: Gds,
        /// The client's job (a tool has none: its job data is made up at its `REQ`).
        job: Option<JobImage>,
    },
    /// A tool's handshake is with the engine.
    ToolChecking(super::tool::Pending),
    /// A tool was refused: its next message gets an empty answer, then the connection
    /// closes (see `tool::refused`).
    ToolRefused,
    /// Refused or failed: nothing more is read.
    Done,
}

/// A libpmix client's connection.
pub(crate) struct OpenpmixConn {
    reader: MsgReader,
    state: State,
    /// The uid the kernel reports for the peer's socket, when it can tell.
    kernel_uid: Option<u32>,
    /// The peer's socket's inode, when the kernel can tell: the engine asks whether the
    /// process started for the claimed name holds it.
    socket: Option<u64>,
    /// Engine id -> the client's tag and the layout of the answer.
    waiting: HashMap<u32, (u32, Answer)>,
    next_id: u32,
    closing: bool,
    /// The data a collecting fence brought that the client has not been sent yet, for its
    /// next `GETNB` answer: encoded parts every client of the fence shares
    /// (`collected.rs`).
    collected: Option<Arc<CollectedParts>>,
    /// The server offers the `ds21` store.
    ds21: bool,
    /// The client reads a group construction's answer without the membership (libpmix
    /// before 4.2.4).
    group_reply_before_424: bool,
    /// The peer is a tool (`docs/TOOLS.md`), not a process of a job.
    tool: bool,
}

impl OpenpmixConn {
    pub(crate) fn new(kernel: Option<TcpPeer>, ds21: bool) -> Self {
        OpenpmixConn {
            reader: MsgReader::new(MAX_MESSAGE),
            state: State::Handshake,
            kernel_uid: kernel.map(|k| k.uid),
            socket: kernel.map(|k| k.inode),
            waiting: HashMap::new(),
            collected: None,
            next_id: 1,
            closing: false,
            ds21,
            group_reply_before_424: false,
            tool: false,
        }
    }

    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        self.reader.feed(bytes);
    }

    /// False while a whole message waits to be taken: reading more would only buffer it.
    pub(crate) fn wants_input(&self) -> bool {
        !self.reader.has_message()
    }

    /// True once the connection should be closed after its queued bytes are written.
    pub(crate) fn is_closing(&self) -> bool {
        self.closing
    }

    /// The process this client is, once its handshake is done.
    fn proc(&self) -> Option<&Proc> {
        match &self.state {
            State::Ready { proc, .. } => Some(proc),
            _ => None,
        }
    }

    fn who(&self) -> String {
        match &self.state {
            State::Ready { proc, .. } => proc.to_string(),
            _ => "a libpmix client".into(),
        }
    }

    /// Processes the next message, if one has arrived; replies it can give itself go to `out`.
    pub(crate) fn step(&mut self, common: &mut Common, out: &mut Vec<u8>) -> Step {
        loop {
            if self.closing {
                return Step::Idle;
            }
            if matches!(
                self.state,
                State::Checking { .. } | State::ToolChecking(_) | State::Done
            ) {
                return Step::Idle;
            }
            let dialect = self.dialect();
            let (tag, decoded) = match self.reader.next_message() {
                Ok(None) => return Step::Idle,
                Ok(Some(Incoming::Handshake { body, .. })) => {
                    if !matches!(self.state, State::Handshake) {
                        tracing::warn!(who = %self.who(), "closing a libpmix connection: a second handshake");
                        self.state = State::Done;
                        return Step::Close;
                    }
                    return match ClientHandshake::decode(body) {
                        Ok(hs) => self.handshake(hs, out),
                        Err(e) => {
                            tracing::warn!("closing a libpmix connection: bad handshake: {e}");
                            self.state = State::Done;
                            Step::Close
                        }
                    };
                }
                Ok(Some(Incoming::Message { header, .. }))
                    if matches!(self.state, State::ToolRefused) =>
                {
                    super::tool::answer_refused(header.tag, out);
                    self.state = State::Done;
                    self.closing = true;
                    return Step::Idle;
                }
                // Decoded where it lies in the reader's buffer: no copy of the payload.
                Ok(Some(Incoming::Message { header, payload })) => {
                    (header.tag, OpenpmixRequest::decode(payload, dialect))
                }
                Err(e) => {
                    tracing::warn!(who = %self.who(), "closing a libpmix connection: {e}");
                    self.state = State::Done;
                    return Step::Close;
                }
            };
            if let Some(step) = self.message(tag, decoded, common, out) {
                return step;
            }
        }
    }

    fn handshake(&mut self, hs: ClientHandshake, out: &mut Vec<u8>) -> Step {
        let refuse = |this: &mut Self, why: String| {
            // The reference closes the socket without a word; the log says why.
            tracing::warn!("refusing a libpmix client: {why}");
            this.state = State::Done;
            Step::Close
        };
        let proc = match &hs.identity {
            Identity::Client(p) => p.clone(),
            other if super::tool::is_tool(other.flag()) => {
                return match super::tool::read(hs, self.kernel_uid) {
                    Ok((hello, pending)) => {
                        self.state = State::ToolChecking(pending);
                        Step::ToolHello(hello)
                    }
                    Err((status, why)) => {
                        // Answered as a refusal by the engine is (see `tool::refused`).
                        tracing::warn!(?status, "refusing a tool: {why}");
                        super::tool::refused(status, out);
                        self.state = State::ToolRefused;
                        Step::Idle
                    }
                };
            }
            other => {
                return refuse(
                    self,
                    format!(
                        "served are processes this server launched and tools, not a peer of kind {:?}",
                        other.flag()
                    ),
                );
            }
        };
        let dialect = match hs.dialect() {
            Ok(d) => d,
            Err(e) => return refuse(self, format!("{proc}: {e}")),
        };
        self.group_reply_before_424 = pmix_wire::openpmix::Version::parse(&hs.version)
            .is_some_and(|v| v < pmix_wire::openpmix::Version::new(4, 2, 4));
        // ds21's segments hold values packed in the v4.1 codec, the only one a ds21 client of
        // libpmix 4.x unpacks them with.
        let gds = match hs.gds.as_str() {
            "hash" => Gds::Hash,
            super::ds21::MODULE
                if self.ds21 && dialect.codec == Codec::V41 && !dialect.fully_described() =>
            {
                Gds::Ds21
            }
            other => {
                return refuse(
                    self,
                    format!(
                        "{proc} chose the {other:?} storage module; served are \"hash\"{}",
                        if self.ds21 {
                            " and \"ds21\" (v4 codecs, non-described buffers)"
                        } else {
                            ""
                        }
                    ),
                );
            }
        };
        let creds = (hs.psec == "native")
            .then(|| pmix_wire::openpmix::native_credential_ids(&hs.credential))
            .flatten();
        let Some((uid, gid)) = creds else {
            return refuse(
                self,
                format!(
                    "{proc} sent no native credential (security module {:?})",
                    hs.psec
                ),
            );
        };
        if let Some(k) = self.kernel_uid {
            if k != uid {
                return refuse(
                    self,
                    format!("{proc} claims uid {uid} but its socket belongs to uid {k}"),
                );
            }
        }
        tracing::debug!(%proc, ?gds, "a libpmix client chose its storage module");
        self.state = State::Checking {
            proc: proc.clone(),
            dialect,
            gds,
        };
        // The kernel confirmed the uid (when it could tell); the engine holds both ids
        // against the registration, and whether a bare uid may claim it at all.
        Step::Hello {
            proc,
            auth: Auth::Uid {
                creds: PeerCreds { uid, gid },
                socket: self.socket,
            },
            answers: GetAnswers::WholeProcess,
        }
    }

    /// The engine accepted the client: answer the handshake with its peer index.
    pub(crate) fn accepted(&mut self, job: JobImage, peer_index: u32, out: &mut Vec<u8>) {
        let State::Checking { proc, dialect, gds } = &self.state else {
            return;
        };
        let (proc, dialect, gds) = (proc.clone(), *dialect, *gds);
        ServerReply::accepted(peer_index).encode(out);
        self.state = State::Ready {
            proc,
            dialect,
            gds,
            job: Some(job),
        };
    }

    /// The engine accepted a tool as `tool`: answer its handshake with its name and the
    /// server's; it is then served as a client of a job of its own.
    pub(crate) fn tool_accepted(&mut self, tool: &Proc, server: &Proc, out: &mut Vec<u8>) {
        let State::ToolChecking(pending) = self.state else {
            return;
        };
        super::tool::accepted(pending, tool, server, out);
        self.tool = true;
        self.state = State::Ready {
            proc: tool.clone(),
            dialect: pending.dialect,
            gds: Gds::Hash,
            job: None,
        };
    }

    /// The engine refused the client (a launched client hears nothing, as from the reference;
    /// a tool hears the status).
    pub(crate) fn refused(&mut self, status: Status, out: &mut Vec<u8>) {
        if matches!(self.state, State::ToolChecking(_)) {
            super::tool::refused(status, out);
            self.state = State::ToolRefused;
            return;
        }
        self.state = State::Done;
        self.closing = true;
    }

    /// The storage module of a client past its handshake.
    pub(crate) fn gds(&self) -> Option<Gds> {
        match &self.state {
            State::Checking { gds, .. } | State::Ready { gds, .. } => Some(*gds),
            _ => None,
        }
    }

    fn dialect(&self) -> Dialect {
        match &self.state {
            State::Checking { dialect, .. } | State::Ready { dialect, .. } => *dialect,
            State::ToolChecking(p) => p.dialect,
            _ => Dialect::V41,
        }
    }

    fn engine_request(&mut self, tag: u32, answer: Answer, req: Request) -> Option<Step> {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        self.waiting.insert(id, (tag, answer));
        Some(Step::Request(id, req))
    }

    /// Handles one request; None when it was answered here.
    fn message(
        &mut self,
        tag: u32,
        decoded: Result<OpenpmixRequest, pmix_wire::Error>,
        common: &mut Common,
        out: &mut Vec<u8>,
    ) -> Option<Step> {
        let State::Ready {
            proc,
            dialect,
            gds,
            job,
        } = &self.state
        else {
            return None;
        };
        let (dialect, gds) = (*dialect, *gds);
        let req = match decoded {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(who = %proc, tag, "answering an unreadable request with an error: {e}");
                send(tag, &OpenpmixReply::Status(e.status()), dialect, out);
                return None;
            }
        };
        match req {
            OpenpmixRequest::Req if self.tool => {
                let bytes = super::tool::job_data(proc, dialect).ok();
                send_job_data(tag, bytes.as_deref(), dialect, out);
                None
            }
            OpenpmixRequest::Req => {
                let bytes = job.as_ref().and_then(|j| common.job_bytes(j, dialect, gds));
                send_job_data(tag, bytes.as_deref(), dialect, out);
                None
            }
            OpenpmixRequest::Commit { parts } => {
                let kvs = merge_scopes(parts);
                self.engine_request(tag, Answer::Status, Request::Commit { kvs })
            }
            OpenpmixRequest::Fence { procs, info } => {
                self.engine_request(tag, Answer::Fence, Request::Fence { procs, info })
            }
            OpenpmixRequest::Get {
                proc: asked,
                key,
                info,
            } => {
                // Tests count these: a ds21 client's peer gets after a collecting fence must
                // not need one.
                tracing::debug!(who = %proc, ?gds, %asked, ?key, "GETNB request");
                let proc = asked;
                self.engine_request(tag, Answer::Get, Request::Get { proc, key, info })
            }
            OpenpmixRequest::Finalize => self.engine_request(
                tag,
                Answer::Finalize,
                Request::Finalize { info: Vec::new() },
            ),
            OpenpmixRequest::Abort {
                status,
                message,
                procs,
            } => self.engine_request(
                tag,
                Answer::Status,
                Request::Abort {
                    status,
                    message: message.unwrap_or_default(),
                    procs,
                },
            ),
            OpenpmixRequest::Publish { info, .. } => {
                // One list carries both the data and the directives.
                let (info, data) = pmix_types::split_publish_info(info);
                self.engine_request(tag, Answer::Status, Request::Publish { data, info })
            }
            OpenpmixRequest::Lookup { keys, info, .. } => {
                self.engine_request(tag, Answer::Lookup, Request::Lookup { keys, info })
            }
            OpenpmixRequest::Unpublish { keys, info, .. } => {
                self.engine_request(tag, Answer::Status, Request::Unpublish { keys, info })
            }
            OpenpmixRequest::RegisterEvents { codes, info } => {
                self.engine_request(tag, Answer::Status, Request::RegisterEvents { codes, info })
            }
            OpenpmixRequest::DeregisterEvents { codes } => {
                self.engine_request(tag, Answer::Silent, Request::DeregisterEvents { codes })
            }
            OpenpmixRequest::JobControl {
                targets,
                directives,
            } => self.engine_request(
                tag,
                Answer::Info,
                Request::JobControl {
                    targets,
                    directives,
                },
            ),
            OpenpmixRequest::Log {
                timestamp,
                data,
                mut directives,
            } => {
                // The client's clock reading, when it took one, as the reference passes it.
                if timestamp != 0 {
                    let t = i64::try_from(timestamp).unwrap_or(i64::MAX);
                    directives.push(Info::attr(pmix_types::attr::LOG_TIMESTAMP, Value::Time(t)));
                }
                self.engine_request(tag, Answer::Status, Request::Log { data, directives })
            }
            OpenpmixRequest::Spawn { job_info, apps } => {
                self.engine_request(tag, Answer::Spawn, Request::Spawn { job_info, apps })
            }
            OpenpmixRequest::Connect { procs, info } => {
                self.engine_request(tag, Answer::Connect, Request::Connect { procs, info })
            }
            OpenpmixRequest::Disconnect { procs, info } => {
                self.engine_request(tag, Answer::Status, Request::Disconnect { procs, info })
            }
            OpenpmixRequest::Query { queries } => {
                self.engine_request(tag, Answer::Query, Request::Query { queries })
            }
            OpenpmixRequest::GroupConstruct { grp, procs, info } => self.engine_request(
                tag,
                Answer::Group {
                    before_424: self.group_reply_before_424,
                },
                Request::GroupConstruct { grp, procs, info },
            ),
            OpenpmixRequest::GroupDestruct { grp, procs, info } => self.engine_request(
                tag,
                Answer::Status,
                Request::GroupDestruct { grp, procs, info },
            ),
            OpenpmixRequest::GroupLeave { grp, info } => {
                self.engine_request(tag, Answer::Status, Request::GroupLeave { grp, info })
            }
            OpenpmixRequest::Notify {
                status,
                range,
                info,
            } => {
                // The engine puts the sender in as the source.
                let event = pmix_wire::Event {
                    code: status,
                    source: proc.clone(),
                    range,
                    info,
                };
                self.engine_request(tag, Answer::Status, Request::Notify { event })
            }
            OpenpmixRequest::IofPull {
                procs,
                directives,
                channels,
                local_id,
            } => self.engine_request(
                tag,
                Answer::IofPull,
                Request::IofPull {
                    procs,
                    channels,
                    directives,
                    tag: local_id,
                },
            ),
            OpenpmixRequest::IofDeregister { directives, refid } => self.engine_request(
                tag,
                Answer::Status,
                Request::IofDeregister {
                    id: refid,
                    directives,
                },
            ),
            OpenpmixRequest::IofPush {
                targets,
                directives,
                data,
            } => self.engine_request(
                tag,
                Answer::Status,
                Request::IofPush {
                    targets,
                    directives,
                    data,
                },
            ),
            other => {
                // Commands this server does not serve (`Other`, and those decoded but not
                // translated yet).
                tracing::debug!(who = %proc, cmd = ?other.cmd(), "not supported; answering NOT_SUPPORTED");
                send(
                    tag,
                    &OpenpmixReply::Status(Status::ERR_NOT_SUPPORTED),
                    dialect,
                    out,
                );
                None
            }
        }
    }

    /// An engine answer to the request with engine id `id`.
    ///
    /// A fence's collected data goes into the ds21 segments for a ds21 client; otherwise its
    /// parts are kept for the next `GETNB` answer (`collected.rs`). `shared` is what the
    /// clients of an answer several requests get share (each encoded once).
    pub(crate) fn replied(
        &mut self,
        common: &mut Common,
        id: u32,
        reply: &Reply,
        shared: Option<&SharedCollected>,
        out: &mut OutQueue,
    ) {
        let Some((tag, answer)) = self.waiting.remove(&id) else {
            return;
        };
        let dialect = self.dialect();
        if let (Answer::Fence, ReplyBody::Fence { data }) = (answer, &reply.body) {
            if reply.status == Status::SUCCESS && !data.is_empty() {
                self.fence_collected(common, reply, data, shared);
            }
        }
        let extra = match (answer, &reply.body) {
            (Answer::Get, ReplyBody::Get { data, .. }) if reply.status == Status::SUCCESS => {
                let parts = self.collected.take();
                let me = self.proc();
                parts.map(|parts| {
                    parts.except(|p| Some(p) == me || data.iter().any(|d| d.proc == *p))
                })
            }
            _ => None,
        };
        let (slices, trailing) = extra.unwrap_or_default();
        match encode_answer(tag, answer, reply, trailing, dialect, out.bytes()) {
            Ok(()) => {
                for s in slices {
                    out.splice(s);
                }
            }
            Err(e) => {
                tracing::error!(who = %self.who(), "cannot encode an answer: {e}");
                send(
                    tag,
                    &OpenpmixReply::Status(e.status()),
                    dialect,
                    out.bytes(),
                );
            }
        }
        if matches!(answer, Answer::Finalize) {
            // The client closes after the answer; nothing more is read.
            self.state = State::Done;
        }
    }

    /// A collecting fence's `data` for this client: into the ds21 segments (once for all the
    /// fence's ds21 clients), or kept as encoded parts for its next `GETNB` answer.
    fn fence_collected(
        &mut self,
        common: &mut Common,
        reply: &Reply,
        data: &[ProcKvs],
        shared: Option<&SharedCollected>,
    ) {
        let in_shm = self.gds() == Some(Gds::Ds21)
            && match shared {
                Some(s) => *s.in_ds21.get_or_init(|| common.store_fence(reply)),
                None => common.store_fence(reply),
            };
        if in_shm {
            return;
        }
        let dialect = self.dialect();
        let parts = match shared {
            Some(s) => s.parts(data, dialect),
            None => CollectedParts::encode(data, dialect).map(Arc::new),
        };
        match parts {
            Ok(p) => self.collected = Some(p),
            Err(e) => {
                // Its gets then go to the server one process at a time.
                tracing::warn!(who = %self.who(), "cannot encode a fence's data for the next get: {e}");
            }
        }
    }

    /// An event the client registered for, sent on the reserved notification tag.
    pub(crate) fn event(&mut self, event: &pmix_wire::Event, out: &mut Vec<u8>) {
        if !matches!(self.state, State::Ready { .. }) {
            return;
        }
        let n = Notification {
            status: event.code,
            source: event.source.clone(),
            info: event.info.clone(),
            range: None,
        };
        let dialect = self.dialect();
        let r = encode_message_with(out, 0, pmix_wire::openpmix::TAG_NOTIFY, |o| {
            n.encode(dialect, o)
        });
        if let Err(e) = r {
            tracing::error!(who = %self.who(), "cannot encode an event: {e}");
        }
    }
}

impl OpenpmixConn {
    /// Output the tool pulled, on the reserved IOF tag with the tool's own id of the pull.
    pub(crate) fn iof(&mut self, chunk: &pmix_wire::IofChunk, out: &mut Vec<u8>) {
        if !matches!(self.state, State::Ready { .. }) {
            return;
        }
        let c = pmix_wire::openpmix::IofChunk {
            source: chunk.source.clone(),
            channel: chunk.channel,
            local_id: chunk.tag,
            info: chunk.info.clone(),
            data: chunk.data.clone(),
        };
        let dialect = self.dialect();
        let r = encode_message_with(out, 0, pmix_wire::openpmix::TAG_IOF, |o| {
            c.encode(dialect, o)
        });
        if let Err(e) = r {
            tracing::error!(who = %self.who(), "cannot encode forwarded output: {e}");
        }
    }
}

/// Writes the job data (already encoded for this dialect) as the answer to `tag`.
fn send_job_data(tag: u32, bytes: Option<&[u8]>, dialect: Dialect, out: &mut Vec<u8>) {
    match bytes {
        Some(b) => {
            let _ = pmix_wire::openpmix::encode_message(out, 0, tag, b);
        }
        None => send(
            tag,
            &OpenpmixReply::Status(Status::ERR_PACK_FAILURE),
            dialect,
            out,
        ),
    }
}

/// Writes `reply` as the answer to `tag`.
fn send(tag: u32, reply: &OpenpmixReply, dialect: Dialect, out: &mut Vec<u8>) {
    if let Err(e) = encode_message_with(out, 0, tag, |o| reply.encode(dialect, o)) {
        tracing::error!(tag, "cannot encode a reply: {e}");
    }
}

/// A commit's key/value pairs: the client sends what was put with a LOCAL or GLOBAL scope in
/// the LOCAL part and what was put REMOTE or GLOBAL in the REMOTE part, so a key in both was
/// GLOBAL.
fn merge_scopes(parts: Vec<CommitPart>) -> Vec<Kv> {
    let mut order: Vec<Key> = Vec::new();
    let mut seen: HashMap<Key, (Scope, Value)> = HashMap::new();
    for part in parts {
        for kv in part.kvals {
            match seen.get_mut(&kv.key) {
                Some((s, v)) => {
                    if *s != part.scope {
                        *s = Scope::GLOBAL;
                    }
                    *v = kv.value;
                }
                None => {
                    order.push(kv.key.clone());
                    seen.insert(kv.key, (part.scope, kv.value));
                }
            }
        }
    }
    order
        .into_iter()
        .filter_map(|key| {
            let (scope, value) = seen.remove(&key)?;
            Some(Kv { scope, key, value })
        })
        .collect()
}

/// The client's form of an engine answer.
fn translate(
    answer: Answer,
    reply: &Reply,
    dialect: Dialect,
) -> Result<Option<OpenpmixReply>, pmix_wire::Error> {
    let status = reply.status;
    let ok = status == Status::SUCCESS;
    Ok(Some(match (answer, &reply.body) {
        (Answer::Silent, _) => return Ok(None),
        (Answer::Get, ReplyBody::Get { data, jobs }) if ok => {
            let mut all = Vec::new();
            for job in jobs {
                all.extend(to_proc_kvals(&job.expand()));
            }
            all.extend(data.iter().map(ProcKvals::from));
            OpenpmixReply::Get { status, data: all }
        }
        (Answer::Lookup, ReplyBody::Lookup { found }) if ok => OpenpmixReply::Lookup {
            status,
            found: found.clone(),
        },
        (Answer::Spawn, ReplyBody::Spawn { nspace }) => OpenpmixReply::Spawn {
            status,
            nspace: Some(nspace.clone()),
            job: Vec::new(),
        },
        (Answer::Connect, ReplyBody::Connect { jobs, .. }) if ok => OpenpmixReply::Connect {
            status,
            jobs: jobs
                .iter()
                .map(|j| to_job_info(j, dialect))
                .collect::<Result<_, _>>()?,
        },
        // A partial success carries what was answered.
        (Answer::Query, ReplyBody::Query { results })
            if ok || status == Status::QUERY_PARTIAL_SUCCESS =>
        {
            OpenpmixReply::Info {
                status,
                info: results.clone(),
            }
        }
        (Answer::IofPull, ReplyBody::IofPull { id }) if ok => OpenpmixReply::IofPull {
            status,
            refid: Some(*id),
        },
        (Answer::Info, _) => OpenpmixReply::Info {
            status,
            info: Vec::new(),
        },
        (Answer::Group { before_424: true }, ReplyBody::Group { context_id, .. }) if ok => {
            OpenpmixReply::GroupBefore424 {
                status,
                context_id: *context_id,
            }
        }
        (
            Answer::Group { .. },
            ReplyBody::Group {
                members,
                context_id,
            },
        ) if ok => OpenpmixReply::Group {
            status,
            members: members.clone(),
            context_id: *context_id,
        },
        _ => OpenpmixReply::Status(status),
    }))
}

fn encode_answer(
    tag: u32,
    answer: Answer,
    reply: &Reply,
    trailing: usize,
    dialect: Dialect,
    out: &mut Vec<u8>,
) -> Result<(), pmix_wire::Error> {
    match translate(answer, reply, dialect)? {
        Some(r) => encode_message_followed_by(out, 0, tag, trailing, |o| r.encode(dialect, o)),
        None => Ok(()),
    }
}
