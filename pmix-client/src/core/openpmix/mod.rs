//! The OpenPMIx personality of the client's core: what lets a pmix-rs client run under a real
//! OpenPMIx 4.2 server (Open MPI's `mpirun`, PRRTE, any host on libpmix's server library).
//! Sans-IO: the handshake that opens the session is `crate::openpmix::connect`.
//!
//! The wire format is `pmix_wire::openpmix`; here is what the client makes of it. Once the
//! handshake is done, [`Session`] translates each native [`Request`] the client sends into
//! its OpenPMIx request (one tag per request, from 101 on, mapped back to the request's id
//! when the answer comes) and each answer into the native [`Reply`] the waiting call
//! expects, so that the rest of the client (store, calls, events) does not know which
//! protocol runs underneath. What differs for the caller:
//!
//! - a fence brings no data, even a collecting one: the gets that follow ask the server
//!   (`GETNB`), whose answer holds all of the process's data visible to this one, which is
//!   cached whole (so the next get of any of its keys is local);
//! - a `GETNB` for a process of another namespace, or of rank `WILDCARD`, also brings that
//!   namespace's job data (under rank `WILDCARD`), which the store takes in as job data;
//! - `DEREGEVENTS` is never answered: it completes once sent;
//! - what has no OpenPMIx request fails with [`Error::NotSupported`] before anything is sent.

use std::collections::HashMap;

use pmix_types::{DataRange, Info, Proc, Rank, Scope, Status, attr, is_reserved_key};
use pmix_wire::openpmix::job::{Here, from_job_info, from_kvals};
use pmix_wire::openpmix::{
    Cmd, CommitPart, Dialect, Kval, Notification, ProcKvals, Reply as OpenpmixReply,
    Request as OpenpmixRequest, TAG_DYNAMIC, TAG_IOF, TAG_NOTIFY, encode_message_with,
};
use pmix_wire::{Event, IofChunk, JobData, Kv, ProcKvs, Reply, ReplyBody, Request};

use super::Output;
use crate::Error;

/// How an answer is read and what native reply it becomes.
///
/// The server's OpenPMIx front-end has an `Answer` of its own, the other direction (a native
/// reply written as an OpenPMIx one, with the server's duties); the payload both read and
/// write is `pmix_wire::openpmix::Reply`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// A status alone.
    Status,
    /// A fence's status; the native reply carries an (empty) collection.
    Fence,
    /// A status and the data of processes (and job data of namespaces).
    Get,
    /// A status and the names found.
    Lookup,
    /// A status and the new namespace.
    Spawn,
    /// A status and the job data of the other namespaces.
    Connect,
    /// A status and the query's results.
    Query,
    /// A status and a list of results the native reply does not carry (`JOB_CONTROL`).
    Info,
    /// A status, the group's members and its context id.
    Group,
    /// A status and, on success, the server's id of an output pull.
    IofPull,
}

/// A native request as the OpenPMIx server is to receive it.
#[derive(Debug, PartialEq)]
pub(crate) enum Outbound {
    /// Send it; its answer reads as the [`Answer`] says.
    Send(OpenpmixRequest, Answer),
    /// Send it; it gets no answer (`DEREGEVENTS`), so it is complete once sent.
    Unanswered(OpenpmixRequest),
    /// There is no such request in the OpenPMIx protocol.
    Unsupported(String),
}

/// The request of a commit: what was put `LOCAL` or `GLOBAL` in the `LOCAL` part, what was put
/// `REMOTE` or `GLOBAL` in the `REMOTE` part, as libpmix sends them (a part only when it has
/// pairs; nothing at all for an empty commit, which still tells the server we committed).
fn commit(kvs: Vec<Kv>) -> OpenpmixRequest {
    let mut local = Vec::new();
    let mut remote = Vec::new();
    for Kv { scope, key, value } in kvs {
        let (to_local, to_remote) = match scope {
            Scope::LOCAL => (true, false),
            Scope::REMOTE => (false, true),
            Scope::INTERNAL => (false, false),
            // GLOBAL, UNDEF
            _ => (true, true),
        };
        if to_local && to_remote {
            local.push(Kval::new(key.clone(), value.clone()));
            remote.push(Kval::new(key, value));
        } else if to_local {
            local.push(Kval::new(key, value));
        } else if to_remote {
            remote.push(Kval::new(key, value));
        }
    }
    let parts = [(Scope::LOCAL, local), (Scope::REMOTE, remote)]
        .into_iter()
        .filter(|(_, kvals)| !kvals.is_empty())
        .map(|(scope, kvals)| CommitPart { scope, kvals })
        .collect();
    OpenpmixRequest::Commit { parts }
}

/// Translates a native request. `me` is this process, `uid` the uid publish and lookup claim.
pub(crate) fn outbound(req: Request, me: &Proc, uid: u32) -> Outbound {
    use Outbound::{Send, Unanswered, Unsupported};
    match req {
        Request::Commit { kvs } => Send(commit(kvs), Answer::Status),
        Request::Fence { procs, info } => {
            // An empty list is the caller's namespace, which libpmix spells out.
            let procs = if procs.is_empty() {
                vec![Proc::new(me.nspace.clone(), Rank::WILDCARD)]
            } else {
                procs
            };
            Send(OpenpmixRequest::Fence { procs, info }, Answer::Fence)
        }
        Request::Get {
            proc,
            key,
            mut info,
        } => {
            // Rank WILDCARD is asked for a namespace's job data: without a key the server sends
            // all of it (with one, only that key, which the store could not tell from all).
            let key = if proc.rank == Rank::WILDCARD {
                None
            } else {
                key
            };
            // The client asks because it refreshes; an OpenPMIx server (4.2 and 5.0) answers a
            // `GETNB` that says so for a process of its node with a bare "operation
            // succeeded", no data: libpmix refreshes from its own store first. Without the
            // directive the answer carries the server's current copy.
            info.retain(|i| i.key.as_str() != attr::GET_REFRESH_CACHE);
            Send(OpenpmixRequest::Get { proc, info, key }, Answer::Get)
        }
        Request::Publish { data, info } => {
            // One list carries both; the server tells directives by their reserved keys.
            let mut all = data;
            all.extend(info);
            Send(OpenpmixRequest::Publish { uid, info: all }, Answer::Status)
        }
        Request::Lookup { keys, info } => {
            Send(OpenpmixRequest::Lookup { uid, keys, info }, Answer::Lookup)
        }
        Request::Unpublish { keys, info } => Send(
            OpenpmixRequest::Unpublish { uid, keys, info },
            Answer::Status,
        ),
        Request::Spawn { job_info, apps } => {
            Send(OpenpmixRequest::Spawn { job_info, apps }, Answer::Spawn)
        }
        Request::Connect { procs, info } => {
            Send(OpenpmixRequest::Connect { procs, info }, Answer::Connect)
        }
        Request::Disconnect { procs, info } => {
            Send(OpenpmixRequest::Disconnect { procs, info }, Answer::Status)
        }
        Request::Abort {
            status,
            message,
            procs,
        } => Send(
            OpenpmixRequest::Abort {
                status,
                message: (!message.is_empty()).then_some(message),
                procs,
            },
            Answer::Status,
        ),
        Request::RegisterEvents { codes, info } => Send(
            OpenpmixRequest::RegisterEvents { codes, info },
            Answer::Status,
        ),
        Request::DeregisterEvents { codes } => {
            Unanswered(OpenpmixRequest::DeregisterEvents { codes })
        }
        Request::Notify { event } => Send(
            OpenpmixRequest::Notify {
                status: event.code,
                range: event.range,
                info: event.info,
            },
            Answer::Status,
        ),
        Request::Query { queries } => Send(OpenpmixRequest::Query { queries }, Answer::Query),
        Request::Log { data, directives } => Send(
            OpenpmixRequest::Log {
                // The server reads no clock of ours unless asked (`LOG_GENERATE_TIMESTAMP`
                // is not honoured here: 0 says none was taken).
                timestamp: 0,
                data,
                directives,
            },
            Answer::Status,
        ),
        Request::JobControl {
            targets,
            directives,
        } => Send(
            OpenpmixRequest::JobControl {
                targets,
                directives,
            },
            Answer::Info,
        ),
        Request::GroupConstruct { grp, procs, info } => Send(
            OpenpmixRequest::GroupConstruct { grp, procs, info },
            Answer::Group,
        ),
        Request::GroupDestruct { grp, procs, info } => Send(
            OpenpmixRequest::GroupDestruct { grp, procs, info },
            Answer::Status,
        ),
        Request::GroupLeave { grp, info } => {
            Send(OpenpmixRequest::GroupLeave { grp, info }, Answer::Status)
        }
        Request::Finalize { .. } => Send(OpenpmixRequest::Finalize, Answer::Status),
        Request::IofPull {
            procs,
            channels,
            directives,
            tag,
        } => Send(
            OpenpmixRequest::IofPull {
                procs,
                directives,
                channels,
                local_id: tag,
            },
            Answer::IofPull,
        ),
        Request::IofDeregister { id, directives } => Send(
            OpenpmixRequest::IofDeregister {
                directives,
                refid: id,
            },
            Answer::Status,
        ),
        Request::IofPush {
            targets,
            directives,
            data,
        } => Send(
            OpenpmixRequest::IofPush {
                targets,
                directives,
                data,
            },
            Answer::Status,
        ),
        other => Unsupported(format!("{other:?}")),
    }
}

/// What the client knows when it reads an answer: who it is and where it runs.
#[derive(Clone, Debug)]
pub(crate) struct Context {
    pub(crate) me: Proc,
    pub(crate) dialect: Dialect,
    /// This node's name, to find it among another namespace's nodes.
    pub(crate) hostname: Option<String>,
}

impl Context {
    fn here(&self, nspace: &str) -> Here<'_> {
        Here {
            rank: (nspace == self.me.nspace.as_str()).then_some(self.me.rank),
            hostname: self.hostname.as_deref(),
        }
    }
}

/// A `GETNB` answer's process data as the native reply: rank `WILDCARD` entries are job data
/// of their namespace; a rank's reserved keys (which the server adds for a process of another
/// namespace) join that rank's job data when the answer carries its namespace's, and are
/// dropped otherwise (put data has no reserved keys); the rest is put data, of unknown scope:
/// it counts as `GLOBAL` (the server sent only what this process may see).
fn get_body(data: Vec<ProcKvals>, cx: &Context) -> Result<ReplyBody, pmix_wire::Error> {
    let (wild, ranks): (Vec<ProcKvals>, Vec<ProcKvals>) = data
        .into_iter()
        .partition(|pk| pk.proc.rank == Rank::WILDCARD);
    let mut jobs: Vec<JobData> = Vec::with_capacity(wild.len());
    for pk in wild {
        let here = cx.here(pk.proc.nspace.as_str());
        let job = from_kvals(pk.proc.nspace, pk.kvals, cx.dialect, here)?;
        match jobs.iter_mut().find(|j| j.nspace == job.nspace) {
            // Twice in one answer: the later one is as good.
            Some(j) => *j = job,
            None => jobs.push(job),
        }
    }
    let mut out = Vec::with_capacity(ranks.len());
    for ProcKvals { proc, kvals } in ranks {
        let (reserved, put): (Vec<Kval>, Vec<Kval>) = kvals
            .into_iter()
            .partition(|kv| is_reserved_key(kv.key.as_str()));
        if !reserved.is_empty() {
            if let Some(job) = jobs.iter_mut().find(|j| j.nspace == proc.nspace) {
                let info = reserved.into_iter().map(|kv| Info::new(kv.key, kv.value));
                match job.procs.iter_mut().find(|p| p.rank == proc.rank) {
                    Some(p) => {
                        for i in info {
                            if !p.info.iter().any(|have| have.key == i.key) {
                                p.info.push(i);
                            }
                        }
                    }
                    None => job.procs.push(pmix_wire::ProcRealm {
                        rank: proc.rank,
                        info: info.collect(),
                    }),
                }
            }
        }
        out.push(ProcKvs {
            proc,
            kvs: put
                .into_iter()
                .map(|kv| Kv {
                    scope: Scope::GLOBAL,
                    key: kv.key,
                    value: kv.value,
                })
                .collect(),
        });
    }
    let jobs = jobs
        .iter()
        .map(pmix_wire::JobImage::from_job_data)
        .collect::<Result<_, _>>()?;
    Ok(ReplyBody::Get { data: out, jobs })
}

/// Reads the answer to a request sent with `cmd` as the native reply `answer` says.
pub(crate) fn inbound(
    cmd: Cmd,
    answer: Answer,
    payload: &[u8],
    cx: &Context,
) -> Result<Reply, pmix_wire::Error> {
    let reply = OpenpmixReply::decode(cmd, payload, cx.dialect)?;
    let status = reply.status();
    let body = match (answer, reply) {
        (Answer::Fence, _) => ReplyBody::Fence { data: Vec::new() },
        (Answer::Get, OpenpmixReply::Get { data, .. }) => get_body(data, cx)?,
        (Answer::Lookup, OpenpmixReply::Lookup { found, .. }) => ReplyBody::Lookup { found },
        (
            Answer::Spawn,
            OpenpmixReply::Spawn {
                nspace: Some(nspace),
                ..
            },
        ) => ReplyBody::Spawn { nspace },
        (Answer::Connect, OpenpmixReply::Connect { jobs, .. }) => ReplyBody::Connect {
            jobs: jobs
                .into_iter()
                .map(|j| {
                    let here = cx.here(j.nspace.as_str());
                    from_job_info(j, cx.dialect, here)
                })
                .collect::<Result<_, _>>()?,
            data: Vec::new(),
        },
        (Answer::Query, OpenpmixReply::Info { info, .. }) => ReplyBody::Query { results: info },
        (
            Answer::Group,
            OpenpmixReply::Group {
                members,
                context_id,
                ..
            },
        ) => ReplyBody::Group {
            members,
            context_id,
        },
        (
            Answer::IofPull,
            OpenpmixReply::IofPull {
                refid: Some(id), ..
            },
        ) => ReplyBody::IofPull { id },
        _ => ReplyBody::None,
    };
    Ok(Reply { status, body })
}

/// An event notification (tag 0) as the native event.
pub(crate) fn event(payload: &[u8], dialect: Dialect) -> Result<Event, pmix_wire::Error> {
    let n = Notification::decode(payload, dialect)?;
    Ok(Event {
        code: n.status,
        source: n.source,
        range: n.range.unwrap_or(DataRange::UNDEF),
        info: n.info,
    })
}

/// A request waiting for its answer.
#[derive(Clone, Copy, Debug)]
struct Waiting {
    /// The native request id.
    id: u32,
    cmd: Cmd,
    answer: Answer,
}

/// Request tags: dynamic ones, from 101 on, wrapping, skipping those still waiting.
#[derive(Debug)]
struct Tags {
    next: u32,
    waiting: HashMap<u32, Waiting>,
}

impl Tags {
    fn new() -> Self {
        Tags {
            next: TAG_DYNAMIC + 1,
            waiting: HashMap::new(),
        }
    }

    fn fresh(&mut self) -> u32 {
        loop {
            let tag = self.next;
            self.next = tag.checked_add(1).unwrap_or(TAG_DYNAMIC + 1);
            if !self.waiting.contains_key(&tag) {
                return tag;
            }
        }
    }
}

/// What became of a request given to [`Session::encode`].
#[derive(Debug)]
pub(crate) enum Sent {
    /// Its answer will come.
    AwaitReply,
    /// It is complete once written (nothing will answer it).
    Done(Reply),
}

/// One connection's OpenPMIx state: the dialect and peer index the handshake fixed, and the
/// requests waiting for answers by tag.
#[derive(Debug)]
pub(crate) struct Session {
    cx: Context,
    uid: u32,
    pindex: i32,
    tags: Tags,
}

impl Session {
    /// The session the handshake opened: who we are, the uid publish and lookup claim, and
    /// the peer index the server gave.
    pub(crate) fn new(cx: Context, uid: u32, pindex: i32) -> Session {
        Session {
            cx,
            uid,
            pindex,
            tags: Tags::new(),
        }
    }

    /// A tag of its own for a request the session does not send (the handshake's job data
    /// request).
    pub(crate) fn fresh_tag(&mut self) -> u32 {
        self.tags.fresh()
    }

    /// This node's name, once the job data has named it.
    pub(crate) fn set_hostname(&mut self, hostname: String) {
        self.cx.hostname = Some(hostname);
    }

    /// Appends the message of native request `id` to `out`.
    pub(crate) fn encode(
        &mut self,
        id: u32,
        req: Request,
        out: &mut Vec<u8>,
    ) -> Result<Sent, Error> {
        let dialect = self.cx.dialect;
        match outbound(req, &self.cx.me, self.uid) {
            Outbound::Unsupported(what) => Err(Error::NotSupported(what)),
            Outbound::Unanswered(r) => {
                let tag = self.tags.fresh();
                encode_message_with(out, self.pindex, tag, |o| r.encode(dialect, o))?;
                Ok(Sent::Done(Reply::status(Status::SUCCESS)))
            }
            Outbound::Send(r, answer) => {
                let waiting = Waiting {
                    id,
                    cmd: r.cmd(),
                    answer,
                };
                // Registered before the bytes leave, so the answer always finds it.
                let tag = self.tags.fresh();
                self.tags.waiting.insert(tag, waiting);
                if let Err(e) = encode_message_with(out, self.pindex, tag, |o| r.encode(dialect, o))
                {
                    self.tags.waiting.remove(&tag);
                    return Err(e.into());
                }
                Ok(Sent::AwaitReply)
            }
        }
    }

    /// One message from the server: `Some((id, reply))` for the answer to native request
    /// `id`, `None` for what the server sends unasked (an event, pulled output: handed to
    /// `deliver` as the core's output) or anything nobody waits for.
    pub(crate) fn take(
        &mut self,
        tag: u32,
        payload: &[u8],
        deliver: impl FnOnce(Output),
    ) -> Option<(u32, Result<Reply, Error>)> {
        if tag == TAG_NOTIFY {
            match event(payload, self.cx.dialect) {
                Ok(ev) => deliver(Output::Event(ev)),
                Err(e) => tracing::warn!("pmix-client: an event that does not decode: {e}"),
            }
            return None;
        }
        if tag == TAG_IOF {
            match pmix_wire::openpmix::IofChunk::decode(payload, self.cx.dialect) {
                Ok(c) => deliver(Output::Iof(IofChunk {
                    tag: c.local_id,
                    source: c.source,
                    channel: c.channel,
                    info: c.info,
                    data: c.data,
                })),
                Err(e) => tracing::warn!("pmix-client: output that does not decode: {e}"),
            }
            return None;
        }
        let Some(w) = self.tags.waiting.remove(&tag) else {
            tracing::debug!("pmix-client: a message on tag {tag}, which nobody waits for");
            return None;
        };
        let reply = inbound(w.cmd, w.answer, payload, &self.cx).map_err(|e| {
            Error::Protocol(format!("the answer to {:?} does not decode: {e}", w.cmd))
        });
        Some((w.id, reply))
    }
}

#[cfg(test)]
mod tests;
