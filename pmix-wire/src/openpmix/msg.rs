//! The payloads of requests, replies and notifications, both ways.
//!
//! A request's payload opens with its [`Cmd`]; a reply carries no command, so its layout is
//! known from the request it answers (same tag). Every request but `DEREGEVENTS` gets exactly
//! one reply, and a request a server cannot handle must still get one: a status alone
//! (`ERR_NOT_SUPPORTED`), which every client accepts whatever the command.

use pmix_types::{
    DataArray, DataRange, Info, InfoFlags, IofChannel, Key, Nspace, Proc, Rank, Scope, Status,
    Value,
};

use super::cmd::Cmd;
use super::dialect::Dialect;
use super::item::{Buffer, ByteObject, Kval, Size, Time, counted, put_counted, size};
use super::pack::{Packer, atomically};
use super::unpack::Unpacker;
use crate::Error;
use crate::msg::{App, ProcKvs, Published, Query};

/// The key of a rank's byte object in job data (`PMIX_PROC_BLOB`): see [`rank_blob`].
pub const PROC_BLOB: &str = "pmix.pblob";
/// The key of the per-node process map byte object in job data (`PMIX_MAP_BLOB`).
pub const MAP_BLOB: &str = "pmix.mblob";

/// The data committed with one scope: one `(SCOPE, BUFFER)` pair of a `COMMIT`.
#[derive(Clone, Debug, PartialEq)]
pub struct CommitPart {
    /// The scope the keys were put with (the reference client sends `LOCAL`, then `REMOTE`;
    /// `GLOBAL` keys appear in both).
    pub scope: Scope,
    /// The key/value pairs.
    pub kvals: Vec<Kval>,
}

/// A request a client sends: the decoded payload of one message.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Request {
    /// `REQ`: the job data, at init. Nothing follows the command.
    Req,
    /// `ABORT`: `STATUS`, `STRING` message (may be NULL), `SIZE` n, `PROC`s if n > 0.
    Abort {
        /// The exit status asked for.
        status: Status,
        /// A message for the operator.
        message: Option<String>,
        /// The processes to abort; empty means the caller's namespace.
        procs: Vec<Proc>,
    },
    /// `COMMIT`: zero or more `(SCOPE, BUFFER of KVALs)` pairs. Sent even with nothing to
    /// commit.
    Commit {
        /// The pairs, in order.
        parts: Vec<CommitPart>,
    },
    /// `FENCENB`: `SIZE` n, `PROC`s, `SIZE` ninfo, `INFO`s if ninfo > 0.
    Fence {
        /// The participants (the client sends at least its own namespace, rank `WILDCARD`).
        procs: Vec<Proc>,
        /// Directives (`pmix.collect`, `pmix.timeout`, ...).
        info: Vec<Info>,
    },
    /// `GETNB`: `STRING` nspace, `PROC_RANK`, `SIZE` ninfo, `INFO`s, `STRING` key (absent
    /// for a NULL key).
    Get {
        /// Whose data.
        proc: Proc,
        /// Directives (`pmix.immediate`, `pmix.timeout`, ...).
        info: Vec<Info>,
        /// The key; `None` for all of the process's data.
        key: Option<Key>,
    },
    /// `FINALIZE`. Nothing follows the command.
    Finalize,
    /// `PUBLISHNB`: `UINT32` uid, `SIZE` n, `INFO`s (data and directives mixed).
    Publish {
        /// The uid the client claims.
        uid: u32,
        /// The data to publish and the `pmix.range` / `pmix.persist` directives.
        info: Vec<Info>,
    },
    /// `LOOKUPNB`: `UINT32` uid, `SIZE` nkeys, one `STRING` pack per key, `SIZE` ninfo,
    /// `INFO`s.
    Lookup {
        /// The uid the client claims.
        uid: u32,
        /// The keys.
        keys: Vec<Key>,
        /// Directives.
        info: Vec<Info>,
    },
    /// `UNPUBLISHNB`: laid out like `LOOKUPNB`.
    Unpublish {
        /// The uid the client claims.
        uid: u32,
        /// The keys; empty for all of the caller's.
        keys: Vec<Key>,
        /// Directives.
        info: Vec<Info>,
    },
    /// `SPAWNNB`: `SIZE` ninfo, job `INFO`s, `SIZE` napps, `APP`s.
    Spawn {
        /// Job-level directives.
        job_info: Vec<Info>,
        /// The application contexts.
        apps: Vec<App>,
    },
    /// `CONNECTNB`: `SIZE` n, `PROC`s, `SIZE` ninfo, `INFO`s.
    Connect {
        /// The participants.
        procs: Vec<Proc>,
        /// Directives.
        info: Vec<Info>,
    },
    /// `DISCONNECTNB`: laid out like `CONNECTNB`.
    Disconnect {
        /// The participants.
        procs: Vec<Proc>,
        /// Directives.
        info: Vec<Info>,
    },
    /// `REGEVENTS`: `SIZE` ncodes, `STATUS`es, `SIZE` ninfo, `INFO`s.
    RegisterEvents {
        /// The event codes; empty for all.
        codes: Vec<Status>,
        /// Directives.
        info: Vec<Info>,
    },
    /// `DEREGEVENTS`: zero or more `STATUS` packs. Never answered.
    DeregisterEvents {
        /// The codes.
        codes: Vec<Status>,
    },
    /// `NOTIFY` from a client (`PMIx_Notify_event`): `STATUS`, `DATA_RANGE`, `SIZE` ninfo,
    /// `INFO`s.
    Notify {
        /// The event code.
        status: Status,
        /// Who should hear of it.
        range: DataRange,
        /// Attributes of the event.
        info: Vec<Info>,
    },
    /// `QUERY`: `SIZE` n, `QUERY`s.
    Query {
        /// The queries.
        queries: Vec<Query>,
    },
    /// `JOB_CONTROL`: `SIZE` ntargets, `PROC`s, `SIZE` ndirs, `INFO`s.
    JobControl {
        /// The targets; empty for the caller's namespace.
        targets: Vec<Proc>,
        /// The directives (`pmix.reg.cleanup`, `pmix.jctrl.kill`, ...).
        directives: Vec<Info>,
    },
    /// `LOG`: `TIME` timestamp (0: none taken), `SIZE` ndata, `INFO`s if ndata > 0, `SIZE`
    /// ndirs, `INFO`s if ndirs > 0. Answered with a status alone.
    Log {
        /// Seconds since the epoch when the client took a timestamp
        /// (`LOG_GENERATE_TIMESTAMP`), else 0.
        timestamp: u64,
        /// What to log, by channel.
        data: Vec<Info>,
        /// Directives.
        directives: Vec<Info>,
    },
    /// `GROUP_CONSTRUCT`: `STRING` group id, `SIZE` n, `PROC`s, `SIZE` ninfo, `INFO`s.
    GroupConstruct {
        /// The group's id.
        grp: String,
        /// The members.
        procs: Vec<Proc>,
        /// Directives.
        info: Vec<Info>,
    },
    /// `GROUP_DESTRUCT`: laid out like `GROUP_CONSTRUCT`, with the members the client knows;
    /// clients before 4.2.4 send no members (`STRING` id, `SIZE` ninfo, `INFO`s), which
    /// reads as an empty list.
    GroupDestruct {
        /// The group's id.
        grp: String,
        /// The members.
        procs: Vec<Proc>,
        /// Directives.
        info: Vec<Info>,
    },
    /// `GROUP_LEAVE`: `STRING` group id, `SIZE` ninfo, `INFO`s, in every version. Answered
    /// with a status alone. (libpmix never sends `GROUP_JOIN` nor `GROUP_INVITE`: it invites
    /// and joins with events.)
    GroupLeave {
        /// The group's id.
        grp: String,
        /// Directives.
        info: Vec<Info>,
    },
    /// `IOF_PULL` (laid out as `pmix-wire/src/openpmix/iof.rs` says): forward these
    /// processes' output.
    IofPull {
        /// Whose output (rank `WILDCARD` for a whole namespace).
        procs: Vec<Proc>,
        /// Directives (`pmix.iof.tag`, `pmix.iof.ts`, `pmix.iof.xml`, ...).
        directives: Vec<Info>,
        /// Which outputs, a bit set.
        channels: IofChannel,
        /// The tool's own id for the pull, which every chunk forwarded for it carries.
        local_id: u64,
    },
    /// `IOF_PUSH`: data for these processes' stdin.
    IofPush {
        /// The processes; empty means rank 0 of the caller's job (a tool has none).
        targets: Vec<Proc>,
        /// Directives (`pmix.iof.cmp`: the input is complete, close their stdin).
        directives: Vec<Info>,
        /// The bytes; `None` when the push carries only directives.
        data: Option<Vec<u8>>,
    },
    /// `IOF_DEREG`: stop forwarding for a pull.
    IofDeregister {
        /// Directives.
        directives: Vec<Info>,
        /// The server's id of the pull (from the pull's reply).
        refid: u64,
    },
    /// Any other command, its payload after the command kept as it came, so that a server
    /// can answer it (with [`Reply::Status`] `ERR_NOT_SUPPORTED`) and a relay can forward it.
    Other {
        /// The command.
        cmd: Cmd,
        /// The bytes after the command's pack.
        payload: Vec<u8>,
    },
}

fn key_of(u: &Unpacker<'_>, s: String) -> Result<Key, Error> {
    Key::new(&s).map_err(|e| u.malformed(e))
}

/// Reads `n` keys, each its own `STRING` pack.
fn keys(u: &mut Unpacker<'_>) -> Result<Vec<Key>, Error> {
    let n = size(u)?;
    let mut keys = Vec::with_capacity(n);
    for _ in 0..n {
        let s = u.unpack_one::<String>()?;
        keys.push(key_of(u, s)?);
    }
    Ok(keys)
}

fn put_keys(p: &mut Packer<'_>, keys: &[Key]) -> Result<(), Error> {
    p.pack_one(&Size(keys.len() as u64))?;
    keys.iter()
        .try_for_each(|k| p.pack_one(&k.as_str().to_owned()))
}

/// Reads KVAL packs to the end.
fn kvals_to_end(u: &mut Unpacker<'_>) -> Result<Vec<Kval>, Error> {
    let mut out = Vec::new();
    while !u.is_empty() {
        out.extend(u.unpack::<Kval>()?);
    }
    Ok(out)
}

/// Writes one KVAL pack per pair, as the reference does.
fn put_kvals(p: &mut Packer<'_>, kvals: &[Kval]) -> Result<(), Error> {
    kvals.iter().try_for_each(|k| p.pack_one(k))
}

fn nspace_of(u: &Unpacker<'_>, s: String) -> Result<Nspace, Error> {
    Nspace::new(&s).map_err(|e| u.malformed(e))
}

/// Packs into a fresh buffer.
fn packed(
    dialect: Dialect,
    f: impl FnOnce(&mut Packer<'_>) -> Result<(), Error>,
) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    f(&mut Packer::new(&mut out, dialect))?;
    Ok(out)
}

/// The command of a request payload, read without decoding the rest (to answer a request
/// whose body does not decode).
pub fn peek_cmd(payload: &[u8], dialect: Dialect) -> Result<Cmd, Error> {
    Unpacker::new(payload, dialect).unpack_one::<Cmd>()
}

impl Request {
    /// The command this request is sent with.
    pub fn cmd(&self) -> Cmd {
        match self {
            Request::Req => Cmd::REQ,
            Request::Abort { .. } => Cmd::ABORT,
            Request::Commit { .. } => Cmd::COMMIT,
            Request::Fence { .. } => Cmd::FENCENB,
            Request::Get { .. } => Cmd::GETNB,
            Request::Finalize => Cmd::FINALIZE,
            Request::Publish { .. } => Cmd::PUBLISHNB,
            Request::Lookup { .. } => Cmd::LOOKUPNB,
            Request::Unpublish { .. } => Cmd::UNPUBLISHNB,
            Request::Spawn { .. } => Cmd::SPAWNNB,
            Request::Connect { .. } => Cmd::CONNECTNB,
            Request::Disconnect { .. } => Cmd::DISCONNECTNB,
            Request::RegisterEvents { .. } => Cmd::REGEVENTS,
            Request::DeregisterEvents { .. } => Cmd::DEREGEVENTS,
            Request::Notify { .. } => Cmd::NOTIFY,
            Request::Query { .. } => Cmd::QUERY,
            Request::JobControl { .. } => Cmd::JOB_CONTROL,
            Request::Log { .. } => Cmd::LOG,
            Request::GroupConstruct { .. } => Cmd::GROUP_CONSTRUCT,
            Request::GroupDestruct { .. } => Cmd::GROUP_DESTRUCT,
            Request::GroupLeave { .. } => Cmd::GROUP_LEAVE,
            Request::IofPull { .. } => Cmd::IOF_PULL,
            Request::IofPush { .. } => Cmd::IOF_PUSH,
            Request::IofDeregister { .. } => Cmd::IOF_DEREG,
            Request::Other { cmd, .. } => *cmd,
        }
    }

    /// Decodes a request payload sent in `dialect`. Trailing bytes are an error.
    pub fn decode(payload: &[u8], dialect: Dialect) -> Result<Request, Error> {
        let mut u = Unpacker::new(payload, dialect);
        let cmd = u.unpack_one::<Cmd>()?;
        let req = match cmd {
            Cmd::REQ => Request::Req,
            Cmd::FINALIZE => Request::Finalize,
            Cmd::ABORT => {
                let status = u.unpack_one::<Status>()?;
                let message = u.unpack_one::<Option<String>>()?;
                let procs = counted(&mut u)?;
                Request::Abort {
                    status,
                    message,
                    procs,
                }
            }
            Cmd::COMMIT => {
                let mut parts = Vec::new();
                while !u.is_empty() {
                    let scope = u.unpack_one::<Scope>()?;
                    let buf = u.unpack_one::<Buffer>()?;
                    let inner = Dialect::new(dialect.codec, buf.buffer_type);
                    let kvals = kvals_to_end(&mut Unpacker::new(&buf.bytes, inner))?;
                    parts.push(CommitPart { scope, kvals });
                }
                Request::Commit { parts }
            }
            Cmd::FENCENB | Cmd::CONNECTNB | Cmd::DISCONNECTNB => {
                let procs = counted(&mut u)?;
                let info = counted(&mut u)?;
                match cmd {
                    Cmd::FENCENB => Request::Fence { procs, info },
                    Cmd::CONNECTNB => Request::Connect { procs, info },
                    _ => Request::Disconnect { procs, info },
                }
            }
            Cmd::GETNB => {
                let s = u.unpack_one::<String>()?;
                let nspace = nspace_of(&u, s)?;
                let rank = u.unpack_one::<Rank>()?;
                let info = counted(&mut u)?;
                let key = if u.is_empty() {
                    None
                } else {
                    match u.unpack_one::<Option<String>>()? {
                        Some(s) => Some(key_of(&u, s)?),
                        None => None,
                    }
                };
                Request::Get {
                    proc: Proc::new(nspace, rank),
                    info,
                    key,
                }
            }
            Cmd::PUBLISHNB => {
                let uid = u.unpack_one::<u32>()?;
                let info = counted(&mut u)?;
                Request::Publish { uid, info }
            }
            Cmd::LOOKUPNB | Cmd::UNPUBLISHNB => {
                let uid = u.unpack_one::<u32>()?;
                let keys = keys(&mut u)?;
                let info = counted(&mut u)?;
                if cmd == Cmd::LOOKUPNB {
                    Request::Lookup { uid, keys, info }
                } else {
                    Request::Unpublish { uid, keys, info }
                }
            }
            Cmd::SPAWNNB => {
                let job_info = counted(&mut u)?;
                let apps = counted(&mut u)?;
                Request::Spawn { job_info, apps }
            }
            Cmd::REGEVENTS => {
                let codes = counted(&mut u)?;
                let info = counted(&mut u)?;
                Request::RegisterEvents { codes, info }
            }
            Cmd::DEREGEVENTS => {
                let mut codes = Vec::new();
                while !u.is_empty() {
                    codes.extend(u.unpack::<Status>()?);
                }
                Request::DeregisterEvents { codes }
            }
            Cmd::NOTIFY => {
                let status = u.unpack_one::<Status>()?;
                let range = u.unpack_one::<DataRange>()?;
                let info = counted(&mut u)?;
                Request::Notify {
                    status,
                    range,
                    info,
                }
            }
            Cmd::QUERY => Request::Query {
                queries: counted(&mut u)?,
            },
            Cmd::JOB_CONTROL => {
                let targets = counted(&mut u)?;
                let directives = counted(&mut u)?;
                Request::JobControl {
                    targets,
                    directives,
                }
            }
            Cmd::LOG => {
                let timestamp = u.unpack_one::<Time>()?.0;
                let data = counted(&mut u)?;
                let directives = counted(&mut u)?;
                Request::Log {
                    timestamp,
                    data,
                    directives,
                }
            }
            Cmd::GROUP_CONSTRUCT => {
                let grp = u.unpack_one::<String>()?;
                let procs = counted(&mut u)?;
                let info = counted(&mut u)?;
                Request::GroupConstruct { grp, procs, info }
            }
            Cmd::GROUP_DESTRUCT => {
                let grp = u.unpack_one::<String>()?;
                // From 4.2.4 on the members come first; before, only the directives follow
                // (the server knew the members). What does not read as the one is the other.
                let after_id = u.clone();
                let members_first = (|| -> Result<_, Error> {
                    let procs = counted(&mut u)?;
                    let info = counted(&mut u)?;
                    u.finish()?;
                    Ok((procs, info))
                })();
                let (procs, info) = match members_first {
                    Ok(both) => both,
                    Err(_) => {
                        u = after_id;
                        (Vec::new(), counted(&mut u)?)
                    }
                };
                Request::GroupDestruct { grp, procs, info }
            }
            Cmd::GROUP_LEAVE => {
                let grp = u.unpack_one::<String>()?;
                let info = counted(&mut u)?;
                Request::GroupLeave { grp, info }
            }
            Cmd::IOF_PULL => {
                let procs = counted(&mut u)?;
                let directives = counted(&mut u)?;
                let channels = u.unpack_one::<IofChannel>()?;
                let local_id = u.unpack_one::<Size>()?.0;
                Request::IofPull {
                    procs,
                    directives,
                    channels,
                    local_id,
                }
            }
            Cmd::IOF_PUSH => {
                let targets = counted(&mut u)?;
                let directives = counted(&mut u)?;
                let data = if u.is_empty() {
                    None
                } else {
                    Some(u.unpack_one::<ByteObject>()?.0)
                };
                Request::IofPush {
                    targets,
                    directives,
                    data,
                }
            }
            Cmd::IOF_DEREG => {
                let directives = counted(&mut u)?;
                let refid = u.unpack_one::<Size>()?.0;
                Request::IofDeregister { directives, refid }
            }
            other => {
                let payload = u.rest().to_vec();
                return Ok(Request::Other {
                    cmd: other,
                    payload,
                });
            }
        };
        u.finish()?;
        Ok(req)
    }

    /// Appends the payload of this request, in `dialect`, to `out` (the way the reference
    /// client lays it out, so golden bytes come back identical). On error `out` is left as it
    /// was.
    pub fn encode(&self, dialect: Dialect, out: &mut Vec<u8>) -> Result<(), Error> {
        atomically(out, dialect, |p| {
            p.pack_one(&self.cmd())?;
            self.encode_body(p)
        })
    }

    fn encode_body(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        match self {
            Request::Req | Request::Finalize => {}
            Request::Abort {
                status,
                message,
                procs,
            } => {
                p.pack_one(status)?;
                p.pack_one(message)?;
                put_counted(p, procs, false)?;
            }
            Request::Commit { parts } => {
                for part in parts {
                    p.pack_one(&part.scope)?;
                    let bytes = packed(p.dialect(), |q| put_kvals(q, &part.kvals))?;
                    p.pack_one(&Buffer {
                        buffer_type: p.dialect().buffer,
                        bytes,
                    })?;
                }
            }
            Request::Fence { procs, info }
            | Request::Connect { procs, info }
            | Request::Disconnect { procs, info } => {
                put_counted(p, procs, true)?;
                put_counted(p, info, false)?;
            }
            Request::Get { proc, info, key } => {
                p.pack_one(&proc.nspace.as_str().to_owned())?;
                p.pack_one(&proc.rank)?;
                put_counted(p, info, false)?;
                if let Some(k) = key {
                    p.pack_one(&k.as_str().to_owned())?;
                }
            }
            Request::Publish { uid, info } => {
                p.pack_one(uid)?;
                put_counted(p, info, false)?;
            }
            Request::Lookup { uid, keys, info } | Request::Unpublish { uid, keys, info } => {
                p.pack_one(uid)?;
                put_keys(p, keys)?;
                put_counted(p, info, false)?;
            }
            Request::Spawn { job_info, apps } => {
                put_counted(p, job_info, false)?;
                put_counted(p, apps, false)?;
            }
            Request::RegisterEvents { codes, info } => {
                put_counted(p, codes, false)?;
                put_counted(p, info, false)?;
            }
            Request::DeregisterEvents { codes } => {
                codes.iter().try_for_each(|c| p.pack_one(c))?;
            }
            Request::Notify {
                status,
                range,
                info,
            } => {
                p.pack_one(status)?;
                p.pack_one(range)?;
                put_counted(p, info, false)?;
            }
            Request::Query { queries } => put_counted(p, queries, true)?,
            Request::JobControl {
                targets,
                directives,
            } => {
                put_counted(p, targets, false)?;
                put_counted(p, directives, false)?;
            }
            Request::Log {
                timestamp,
                data,
                directives,
            } => {
                p.pack_one(&Time(*timestamp))?;
                put_counted(p, data, false)?;
                put_counted(p, directives, false)?;
            }
            Request::GroupConstruct { grp, procs, info }
            | Request::GroupDestruct { grp, procs, info } => {
                p.pack_one(grp)?;
                put_counted(p, procs, true)?;
                put_counted(p, info, false)?;
            }
            Request::GroupLeave { grp, info } => {
                p.pack_one(grp)?;
                put_counted(p, info, false)?;
            }
            Request::IofPull {
                procs,
                directives,
                channels,
                local_id,
            } => {
                put_counted(p, procs, true)?;
                put_counted(p, directives, false)?;
                p.pack_one(channels)?;
                p.pack_one(&Size(*local_id))?;
            }
            Request::IofPush {
                targets,
                directives,
                data,
            } => {
                put_counted(p, targets, false)?;
                put_counted(p, directives, false)?;
                if let Some(d) = data {
                    p.pack_one(&ByteObject(d.clone()))?;
                }
            }
            Request::IofDeregister { directives, refid } => {
                put_counted(p, directives, false)?;
                p.pack_one(&Size(*refid))?;
            }
            Request::Other { payload, .. } => p.put_raw(payload),
        }
        Ok(())
    }
}

/// The data of one process as a `GETNB` reply carries it: a byte object holding a `PROC`
/// pack, then `KVAL` packs.
#[derive(Clone, Debug, PartialEq)]
pub struct ProcKvals {
    /// The process.
    pub proc: Proc,
    /// Its key/value pairs.
    pub kvals: Vec<Kval>,
}

impl From<&ProcKvs> for ProcKvals {
    /// A process's committed data as a `GETNB` reply carries it (the scopes stay behind: the
    /// reply has none).
    fn from(pk: &ProcKvs) -> Self {
        ProcKvals {
            proc: pk.proc.clone(),
            kvals: pk
                .kvs
                .iter()
                .map(|kv| Kval {
                    key: kv.key.clone(),
                    value: kv.value.clone(),
                })
                .collect(),
        }
    }
}

impl ProcKvals {
    /// The contents of the byte object.
    pub fn encode_blob(&self, dialect: Dialect) -> Result<Vec<u8>, Error> {
        packed(dialect, |p| {
            p.pack_one(&self.proc)?;
            put_kvals(p, &self.kvals)
        })
    }

    /// Appends this process's part of a `GETNB` reply (its blob as one `BYTE_OBJECT` pack),
    /// as [`Reply::Get`] writes each. The parts of a reply are independent packs, so a server
    /// that sends the same processes to many clients can encode each part once and send
    /// those bytes after a reply that announced them ([`encode_message_followed_by`]).
    ///
    /// [`encode_message_followed_by`]: super::encode_message_followed_by
    pub fn encode_get_part(&self, dialect: Dialect, out: &mut Vec<u8>) -> Result<(), Error> {
        atomically(out, dialect, |p| self.put_get_part(p))
    }

    fn put_get_part(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.pack_one(&ByteObject(self.encode_blob(p.dialect())?))
    }

    /// Reads the contents of such a byte object.
    pub fn decode_blob(bytes: &[u8], dialect: Dialect) -> Result<Self, Error> {
        let mut u = Unpacker::new(bytes, dialect);
        let proc = u.unpack_one::<Proc>()?;
        let kvals = kvals_to_end(&mut u)?;
        Ok(ProcKvals { proc, kvals })
    }
}

/// A namespace's job-level data: what a `REQ` reply carries (a `STRING` pack of the
/// namespace, then `KVAL` packs), and what a `CONNECTNB` reply carries for each other
/// namespace (the same, inside a byte object).
///
/// What goes in is the server's policy; the reference's `hash` module sends the job-level
/// keys, the info arrays `pmix.ssn.arr` (session), `pmix.node.arr` (one per node) and
/// `pmix.app.arr` (one per app) made with [`info_array`], and one [`PROC_BLOB`] per rank
/// made with [`rank_blob`].
#[derive(Clone, Debug, PartialEq)]
pub struct JobInfo {
    /// The namespace.
    pub nspace: Nspace,
    /// Its key/value pairs, in order.
    pub kvals: Vec<Kval>,
}

impl JobInfo {
    fn put(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.pack_one(&self.nspace.as_str().to_owned())?;
        put_kvals(p, &self.kvals)
    }

    fn get(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        let s = u.unpack_one::<String>()?;
        let nspace = nspace_of(u, s)?;
        let kvals = kvals_to_end(u)?;
        Ok(JobInfo { nspace, kvals })
    }

    /// The contents of a `CONNECTNB` reply's byte object.
    pub fn encode_blob(&self, dialect: Dialect) -> Result<Vec<u8>, Error> {
        packed(dialect, |p| self.put(p))
    }

    /// Appends this process's part of a `GETNB` reply (its blob as one `BYTE_OBJECT` pack),
    /// as [`Reply::Get`] writes each. The parts of a reply are independent packs, so a server
    /// that sends the same processes to many clients can encode each part once and send
    /// those bytes after a reply that announced them ([`encode_message_followed_by`]).
    ///
    /// [`encode_message_followed_by`]: super::encode_message_followed_by
    pub fn encode_get_part(&self, dialect: Dialect, out: &mut Vec<u8>) -> Result<(), Error> {
        atomically(out, dialect, |p| self.put_get_part(p))
    }

    fn put_get_part(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.pack_one(&ByteObject(self.encode_blob(p.dialect())?))
    }

    /// Reads the contents of such a byte object.
    pub fn decode_blob(bytes: &[u8], dialect: Dialect) -> Result<Self, Error> {
        Self::get(&mut Unpacker::new(bytes, dialect))
    }
}

/// The contents of a rank's [`PROC_BLOB`] byte object in job data: a `PROC_RANK` pack, then
/// one `KVAL` pack per pair.
pub fn rank_blob(rank: Rank, kvals: &[Kval], dialect: Dialect) -> Result<Vec<u8>, Error> {
    packed(dialect, |p| {
        p.pack_one(&rank)?;
        put_kvals(p, kvals)
    })
}

/// Reads a [`rank_blob`].
pub fn decode_rank_blob(bytes: &[u8], dialect: Dialect) -> Result<(Rank, Vec<Kval>), Error> {
    let mut u = Unpacker::new(bytes, dialect);
    let rank = u.unpack_one::<Rank>()?;
    Ok((rank, kvals_to_end(&mut u)?))
}

/// The [`PROC_BLOB`] key/value pair of one rank.
pub fn proc_blob_kval(rank: Rank, kvals: &[Kval], dialect: Dialect) -> Result<Kval, Error> {
    let key = Key::new(PROC_BLOB).map_err(|e| Error::Encode(e.to_string()))?;
    Ok(Kval::new(
        key,
        Value::ByteObject(rank_blob(rank, kvals, dialect)?),
    ))
}

/// An info-array key/value pair (`pmix.ssn.arr`, `pmix.node.arr`, `pmix.app.arr`): a
/// `DATA_ARRAY` of `INFO`, the last element flagged `ARRAY_END` as the reference flags the
/// arrays it builds.
pub fn info_array(key: Key, infos: Vec<Info>) -> Kval {
    let n = infos.len();
    let items = infos.into_iter().enumerate().map(|(i, mut info)| {
        if i + 1 == n {
            info.flags = info.flags | InfoFlags::ARRAY_END;
        }
        info
    });
    Kval::new(key, DataArray::from_infos(items))
}

/// A server's reply, by the kind of request it answers.
///
/// Any request may be answered by a status alone (that is how the reference refuses one
/// outright), so every decoder accepts a payload that ends after the status, and every
/// encoder writes the status alone for an error with nothing else to say.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Reply {
    /// `STATUS`: the answer to `ABORT`, `COMMIT`, `FENCENB`, `FINALIZE`, `PUBLISHNB`,
    /// `UNPUBLISHNB`, `DISCONNECTNB`, `REGEVENTS`, `NOTIFY` and anything unsupported.
    Status(Status),
    /// The answer to `REQ`: the job data of the client's namespace (no status).
    JobInfo(JobInfo),
    /// The answer to `GETNB`: `STATUS`, then one `BYTE_OBJECT` pack per process (see
    /// [`ProcKvals`]). A key missing at a wildcard rank may come back as success with no
    /// data.
    Get {
        /// The outcome.
        status: Status,
        /// The data, all the server has for each process.
        data: Vec<ProcKvals>,
    },
    /// The answer to `LOOKUPNB`: `STATUS`, then on success `SIZE` n and a pack of n
    /// `PDATA`.
    Lookup {
        /// The outcome.
        status: Status,
        /// What was found.
        found: Vec<Published>,
    },
    /// The answer to `SPAWNNB`: `STATUS`, `STRING` namespace (may be NULL), then on success
    /// the new namespace's job data as `KVAL` packs.
    Spawn {
        /// The outcome.
        status: Status,
        /// The new namespace.
        nspace: Option<Nspace>,
        /// Its job-level data.
        job: Vec<Kval>,
    },
    /// The answer to `CONNECTNB`: `STATUS`, then on success one `BYTE_OBJECT` per other
    /// participating namespace, each a [`JobInfo`].
    Connect {
        /// The outcome.
        status: Status,
        /// The job data of the namespaces the client did not know.
        jobs: Vec<JobInfo>,
    },
    /// The answer to `GROUP_CONSTRUCT`: `STATUS`, then on success `SIZE` n, the n members'
    /// `PROC`s (when n > 0), and the context id as a `SIZE` (libpmix reads it if present).
    Group {
        /// The outcome.
        status: Status,
        /// The final membership.
        members: Vec<Proc>,
        /// `PMIX_GROUP_CONTEXT_ID`, when one was assigned.
        context_id: Option<u64>,
    },
    /// The answer to `GROUP_CONSTRUCT` as clients before 4.2.4 read it: `STATUS`, then the
    /// context id as a `SIZE` (no membership). Encoded only: [`Reply::decode`] reads the
    /// later layout, [`Reply::Group`].
    GroupBefore424 {
        /// The outcome.
        status: Status,
        /// `PMIX_GROUP_CONTEXT_ID`, when one was assigned.
        context_id: Option<u64>,
    },
    /// The answer to `IOF_PULL`: `STATUS`, then on success the server's id of the pull as a
    /// `SIZE`.
    IofPull {
        /// The outcome.
        status: Status,
        /// The id `IOF_DEREG` names.
        refid: Option<u64>,
    },
    /// The answer to `JOB_CONTROL` and `QUERY`: `STATUS`, `SIZE` n, `INFO`s if n > 0.
    Info {
        /// The outcome.
        status: Status,
        /// The results.
        info: Vec<Info>,
    },
}

impl Reply {
    /// The outcome this reply reports (`SUCCESS` for job data).
    pub fn status(&self) -> Status {
        match self {
            Reply::JobInfo(_) => Status::SUCCESS,
            Reply::Status(status)
            | Reply::Get { status, .. }
            | Reply::Lookup { status, .. }
            | Reply::Spawn { status, .. }
            | Reply::Connect { status, .. }
            | Reply::Group { status, .. }
            | Reply::GroupBefore424 { status, .. }
            | Reply::IofPull { status, .. }
            | Reply::Info { status, .. } => *status,
        }
    }

    /// Decodes the reply to a request sent with `cmd`. `DEREGEVENTS` has no reply and is an
    /// error; unknown commands are answered with a status.
    pub fn decode(cmd: Cmd, payload: &[u8], dialect: Dialect) -> Result<Reply, Error> {
        let mut u = Unpacker::new(payload, dialect);
        if cmd == Cmd::REQ {
            return Ok(Reply::JobInfo(JobInfo::get(&mut u)?));
        }
        if cmd == Cmd::DEREGEVENTS {
            return Err(Error::Malformed("DEREGEVENTS is never answered".into()));
        }
        let status = u.unpack_one::<Status>()?;
        let reply = match cmd {
            Cmd::GETNB => {
                let mut data = Vec::new();
                while !u.is_empty() {
                    for bo in u.unpack::<ByteObject>()? {
                        data.push(ProcKvals::decode_blob(&bo.0, dialect)?);
                    }
                }
                Reply::Get { status, data }
            }
            Cmd::LOOKUPNB => {
                let found = if u.is_empty() {
                    Vec::new()
                } else {
                    counted(&mut u)?
                };
                Reply::Lookup { status, found }
            }
            Cmd::SPAWNNB => {
                let nspace = if u.is_empty() {
                    None
                } else {
                    match u.unpack_one::<Option<String>>()? {
                        Some(s) => Some(nspace_of(&u, s)?),
                        None => None,
                    }
                };
                let job = kvals_to_end(&mut u)?;
                Reply::Spawn {
                    status,
                    nspace,
                    job,
                }
            }
            Cmd::CONNECTNB => {
                let mut jobs = Vec::new();
                while !u.is_empty() {
                    for bo in u.unpack::<ByteObject>()? {
                        jobs.push(JobInfo::decode_blob(&bo.0, dialect)?);
                    }
                }
                Reply::Connect { status, jobs }
            }
            Cmd::GROUP_CONSTRUCT => {
                let members = if u.is_empty() {
                    Vec::new()
                } else {
                    let n = size(&mut u)?;
                    if n > 0 {
                        u.unpack_announced(n)?
                    } else {
                        Vec::new()
                    }
                };
                let context_id = if u.is_empty() {
                    None
                } else {
                    Some(u.unpack_one::<Size>()?.0)
                };
                Reply::Group {
                    status,
                    members,
                    context_id,
                }
            }
            Cmd::IOF_PULL => {
                let refid = if u.is_empty() {
                    None
                } else {
                    Some(u.unpack_one::<Size>()?.0)
                };
                Reply::IofPull { status, refid }
            }
            Cmd::JOB_CONTROL | Cmd::QUERY => {
                let info = if u.is_empty() {
                    Vec::new()
                } else {
                    counted(&mut u)?
                };
                Reply::Info { status, info }
            }
            _ => Reply::Status(status),
        };
        u.finish()?;
        Ok(reply)
    }

    /// Appends the payload of this reply, in `dialect`, to `out`. On error `out` is left as
    /// it was.
    pub fn encode(&self, dialect: Dialect, out: &mut Vec<u8>) -> Result<(), Error> {
        atomically(out, dialect, |p| self.encode_body(p))
    }

    fn encode_body(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        let status = self.status();
        if let Reply::JobInfo(job) = self {
            return job.put(p);
        }
        p.pack_one(&status)?;
        let ok = status == Status::SUCCESS;
        match self {
            Reply::Status(_) | Reply::JobInfo(_) => {}
            Reply::Get { data, .. } => {
                for d in data {
                    d.put_get_part(p)?;
                }
            }
            Reply::Lookup { found, .. } => {
                if ok || !found.is_empty() {
                    put_counted(p, found, true)?;
                }
            }
            Reply::Spawn { nspace, job, .. } => {
                if ok || nspace.is_some() || !job.is_empty() {
                    p.pack_one(&nspace.as_ref().map(|n| n.as_str().to_owned()))?;
                }
                put_kvals(p, job)?;
            }
            Reply::Connect { jobs, .. } => {
                for j in jobs {
                    p.pack_one(&ByteObject(j.encode_blob(p.dialect())?))?;
                }
            }
            Reply::Group {
                members,
                context_id,
                ..
            } => {
                if ok || !members.is_empty() || context_id.is_some() {
                    put_counted(p, members, false)?;
                }
                if let Some(c) = context_id {
                    p.pack_one(&Size(*c))?;
                }
            }
            Reply::GroupBefore424 { context_id, .. } => {
                if let Some(c) = context_id {
                    p.pack_one(&Size(*c))?;
                }
            }
            Reply::IofPull { refid, .. } => {
                if let Some(id) = refid {
                    p.pack_one(&Size(*id))?;
                }
            }
            Reply::Info { info, .. } => {
                if ok || !info.is_empty() {
                    put_counted(p, info, false)?;
                }
            }
        }
        Ok(())
    }
}

/// An event notification a server pushes to a client on tag [`TAG_NOTIFY`](super::TAG_NOTIFY):
/// `COMMAND` (`NOTIFY`), `STATUS` code, `PROC` source, `SIZE` ninfo, `INFO`s, and, when the
/// server library relays an event it raised itself, the `DATA_RANGE`.
#[derive(Clone, Debug, PartialEq)]
pub struct Notification {
    /// The event code.
    pub status: Status,
    /// The process that raised it.
    pub source: Proc,
    /// Its attributes (affected processes, a message, ...).
    pub info: Vec<Info>,
    /// The range, when sent.
    pub range: Option<DataRange>,
}

impl Notification {
    /// Appends the payload to `out`. On error `out` is left as it was.
    pub fn encode(&self, dialect: Dialect, out: &mut Vec<u8>) -> Result<(), Error> {
        atomically(out, dialect, |p| {
            p.pack_one(&Cmd::NOTIFY)?;
            p.pack_one(&self.status)?;
            p.pack_one(&self.source)?;
            put_counted(p, &self.info, false)?;
            if let Some(r) = &self.range {
                p.pack_one(r)?;
            }
            Ok(())
        })
    }

    /// Decodes a notification payload.
    pub fn decode(payload: &[u8], dialect: Dialect) -> Result<Self, Error> {
        let mut u = Unpacker::new(payload, dialect);
        let cmd = u.unpack_one::<Cmd>()?;
        if cmd != Cmd::NOTIFY {
            return Err(u.malformed(format!("a notification with command {cmd:?}")));
        }
        let status = u.unpack_one::<Status>()?;
        let source = u.unpack_one::<Proc>()?;
        let info = counted(&mut u)?;
        let range = if u.is_empty() {
            None
        } else {
            Some(u.unpack_one::<DataRange>()?)
        };
        u.finish()?;
        Ok(Notification {
            status,
            source,
            info,
            range,
        })
    }
}
