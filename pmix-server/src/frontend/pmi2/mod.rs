//! The PMI-2 front-end: the length-prefixed `key=value;` protocol of MPICH's, MVAPICH's and
//! Intel MPI's PMI-2 clients and of Slurm's `libpmi2`, translated onto the engine's requests.
//!
//! A PMI-2 process starts on the PMI-1 line protocol with `cmd=init pmi_version=2`; the PMI-1
//! front-end hands such a connection over ([`Pmi2Conn::upgraded`]), which answers the init
//! line and from then on reads and writes frames ([`wire`]). Sans-IO like the others; one
//! request at a time, the next frame held back while the engine works on the previous one.
//! A request's `thrid` (threaded clients) is echoed in its reply.
//!
//! | PMI-2 | engine |
//! |---|---|
//! | `fullinit` | the handshake, as a native client's hello (the rank the socket was made for, or the `PMI_ID` of `srcid` over TCP) |
//! | `job-getid`, `info-getjobattr` (`PMI_process_mapping`, `universeSize`) | answered from the job data of the handshake |
//! | `job-connect`, `job-disconnect` | answered here: no KVS copy is needed, every job's KVS is readable |
//! | `kvs-put` | `Commit` of one string value, scope `GLOBAL` |
//! | `kvs-fence` | `Fence` over the process's namespace |
//! | `kvs-get` | `Get` of `(jobid, UNDEF)` with `IMMEDIATE`: job level (spawn preputs), then whichever process put the key |
//! | `info-putnodeattr`, `info-getnodeattr` | the node's table of this server ([`node_attrs`]), no engine request |
//! | `name-publish`, `name-unpublish`, `name-lookup` | `Publish`, `Unpublish`, `Lookup` with range `GLOBAL` |
//! | `spawn` | one `Spawn` with one app per command; the preput pairs become job info |
//! | `finalize` | `Finalize` |
//! | `abort` | `Abort` of the namespace (`isworld=TRUE`) or of the process, status 1 |

pub(crate) mod node_attrs;
mod spawn;
#[cfg(test)]
mod tests;
pub(crate) mod wire;

use std::sync::Arc;

use pmix_types::{Info, Key, Nspace, Proc, Rank, Scope, Status, Value, attr};
use pmix_wire::{JobData, Kv, Reply, ReplyBody, Request};

use self::node_attrs::Wait;
use self::wire::{Command, MAX_VALUE};
use super::Step;
use super::pmi1::{self, job};
use crate::engine::ConnId;

/// What the PMI-1 front-end answers `cmd=init pmi_version=2` with before it hands over.
const INIT_OK: &str = "cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n";

/// The attribute MPICH reads the node map from (`info-getjobattr`).
const PROCESS_MAPPING: &str = "PMI_process_mapping";

/// Why the connection waits for the engine, and how its answer is put into words.
#[derive(Debug)]
enum Pending {
    FullInit,
    Put,
    Fence,
    /// A key of a job's KVS, and the process named as its source (`srcid`), asked next if
    /// nothing here has the key.
    Get(Key, Option<Proc>),
    Publish,
    Unpublish,
    Lookup(Key),
    Spawn(u32),
    Finalize,
    /// No reply: the client exits right after it wrote the request.
    Abort,
}

#[derive(Debug, PartialEq, Eq)]
enum State {
    /// The init line was answered; `fullinit` comes next.
    Framed,
    Attaching,
    Ready,
    /// Finalized or aborted.
    Done,
}

/// One PMI-2 connection.
pub(crate) struct Pmi2Conn {
    /// Known from the start over an inherited socket; from `srcid` over TCP.
    proc: Option<Proc>,
    job: Option<Arc<JobData>>,
    /// The id of this connection the shell gave [`Pmi2Conn::accepted`], which node-attribute
    /// waits are woken by.
    conn: Option<ConnId>,
    state: State,
    input: Vec<u8>,
    consumed: usize,
    /// The request with the engine, and the `thrid` its reply carries.
    pending: Option<(u32, Pending, Option<String>)>,
    /// An `info-getnodeattr wait=TRUE` not yet answered: its key and `thrid`.
    waiting: Option<(String, Option<String>)>,
    next_id: u32,
    /// A request to make before the next frame is read, to word a reply.
    follow_up: Option<(Pending, Request, Option<String>)>,
    closing: bool,
    /// Counted as ended in the node-attribute table (finalize, abort or close).
    ended: bool,
}

impl Pmi2Conn {
    /// A connection the PMI-1 front-end hands over after `cmd=init pmi_version=2`, with what
    /// the peer sent after that line; the init line is answered into `out`.
    pub(crate) fn upgraded(proc: Option<Proc>, rest: Vec<u8>, out: &mut Vec<u8>) -> Self {
        out.extend_from_slice(INIT_OK.as_bytes());
        Pmi2Conn {
            proc,
            job: None,
            conn: None,
            state: State::Framed,
            input: rest,
            consumed: 0,
            pending: None,
            waiting: None,
            next_id: 0,
            follow_up: None,
            closing: false,
            ended: false,
        }
    }

    /// Bytes read from the process.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        self.input.extend_from_slice(bytes);
    }

    pub(crate) fn is_closing(&self) -> bool {
        self.closing
    }

    /// False while a whole frame (or more than one may hold) waits to be taken.
    pub(crate) fn wants_input(&self) -> bool {
        let rest = &self.input[self.consumed..];
        // A bad length field is answered when the frame is taken: nothing more is needed.
        matches!(wire::frame_len(rest), Ok(None)) && rest.len() <= wire::LEN_FIELD + wire::MAX_BODY
    }

    /// Bytes received and not yet taken as frames.
    #[cfg(test)]
    pub(crate) fn buffered(&self) -> usize {
        self.input.len() - self.consumed
    }

    /// Processes what was fed, up to the first frame that needs the engine.
    pub(crate) fn step(
        &mut self,
        ids: &mut pmi1::Common,
        nodes: &mut node_attrs::Common,
        out: &mut Vec<u8>,
    ) -> Step {
        if self.pending.is_none() {
            if let Some((pending, req, thrid)) = self.follow_up.take() {
                let id = self.next_id;
                self.next_id = self.next_id.wrapping_add(1);
                self.pending = Some((id, pending, thrid));
                return Step::Request(id, req);
            }
        }
        while !self.closing && self.pending.is_none() && self.waiting.is_none() {
            if !matches!(self.state, State::Framed | State::Ready | State::Done) {
                break;
            }
            let c = match wire::decode(&self.input[self.consumed..]) {
                Ok(Some((c, used))) => {
                    self.consumed += used;
                    c
                }
                Ok(None) => {
                    if self.consumed > 4096 {
                        self.input.drain(..self.consumed);
                        self.consumed = 0;
                    }
                    break;
                }
                Err(e) => return self.fail(out, &e.to_string()),
            };
            let step = match self.state {
                State::Framed => self.fullinit(&c, ids, out),
                State::Done => {
                    // A confused peer: say so once, then close.
                    respond(
                        out,
                        &format!("{}-response", c.cmd),
                        &c,
                        &[("rc", "-1"), ("errmsg", "finalized")],
                    );
                    self.closing = true;
                    Step::Close
                }
                _ => self.command(&c, nodes, out),
            };
            if !matches!(step, Step::Idle) {
                return step;
            }
        }
        Step::Idle
    }

    /// A malformed exchange: tell the peer and close this connection only.
    fn fail(&mut self, out: &mut Vec<u8>, why: &str) -> Step {
        tracing::warn!(proc = ?self.proc, "closing a PMI-2 connection: {why}");
        wire::encode("error", &[("rc", "-1"), ("errmsg", why)], out);
        self.closing = true;
        Step::Close
    }

    fn request(&mut self, c: &Command, pending: Pending, req: Request) -> Step {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        self.pending = Some((id, pending, c.get("thrid").map(str::to_owned)));
        Step::Request(id, req)
    }

    /// `fullinit`: the process names its rank (or its `PMI_ID` over TCP).
    fn fullinit(&mut self, c: &Command, ids: &mut pmi1::Common, out: &mut Vec<u8>) -> Step {
        if c.cmd != "fullinit" {
            return self.fail(out, &format!("{} before fullinit", c.cmd));
        }
        let proc = match self.proc.clone() {
            Some(p) => p,
            None => {
                let id = c.get("srcid").and_then(|v| v.parse::<u32>().ok());
                match id.and_then(|id| ids.claim(id)) {
                    Some(p) => p,
                    None => return self.fail(out, "fullinit without a known srcid (PMI_ID)"),
                }
            }
        };
        if let Some(r) = c.get("pmirank") {
            if r.parse::<u32>().ok() != Some(proc.rank.0) {
                return self.fail(
                    out,
                    &format!(
                        "fullinit names rank {r}, this connection is rank {}",
                        proc.rank.0
                    ),
                );
            }
        }
        if let Some(j) = c.get("pmijobid") {
            if j != proc.nspace.as_str() {
                return self.fail(out, &format!("fullinit names job {j}, not {}", proc.nspace));
            }
        }
        self.proc = Some(proc.clone());
        self.state = State::Attaching;
        self.pending = Some((
            u32::MAX,
            Pending::FullInit,
            c.get("thrid").map(str::to_owned),
        ));
        pmi1::hello(proc)
    }

    fn command(&mut self, c: &Command, nodes: &mut node_attrs::Common, out: &mut Vec<u8>) -> Step {
        let (Some(job), Some(me)) = (self.job.clone(), self.proc.clone()) else {
            return self.fail(out, "no job data");
        };
        let resp = format!("{}-response", c.cmd);
        match c.cmd.as_str() {
            "job-getid" => respond(out, &resp, c, &[("jobid", me.nspace.as_str()), ("rc", "0")]),
            "job-connect" => respond(out, &resp, c, &[("kvscopy", "FALSE"), ("rc", "0")]),
            "job-disconnect" => respond(out, &resp, c, &[("rc", "0")]),
            "info-getjobattr" => {
                let value = match c.get("key") {
                    Some(PROCESS_MAPPING) => {
                        Some(job::process_mapping(&job, MAX_VALUE)).filter(|m| !m.is_empty())
                    }
                    Some("universeSize") => Some(job::universe_size(&job).to_string()),
                    _ => None,
                };
                found_reply(out, &resp, c, value.as_deref());
            }
            "info-putnodeattr" => {
                let (Some(k), Some(v)) = (c.get("key"), c.get("value")) else {
                    return error_reply(out, &resp, c, "missing key or value");
                };
                nodes.put(&me.nspace, k, v);
                respond(out, &resp, c, &[("rc", "0")]);
            }
            "info-getnodeattr" => {
                let Some(k) = c.get("key") else {
                    return error_reply(out, &resp, c, "missing key");
                };
                if c.get("wait") != Some("TRUE") {
                    found_reply(out, &resp, c, nodes.get(&me.nspace, k));
                    return Step::Idle;
                }
                self.waiting = Some((k.to_owned(), c.get("thrid").map(str::to_owned)));
                self.try_wait(nodes, out);
            }
            "kvs-put" => {
                let (Some(k), Some(v)) = (c.get("key"), c.get("value")) else {
                    return error_reply(out, &resp, c, "missing key or value");
                };
                let Ok(key) = Key::new(k) else {
                    return error_reply(out, &resp, c, "bad key");
                };
                if v.len() > MAX_VALUE {
                    return error_reply(out, &resp, c, "value longer than 1024 bytes");
                }
                return self.request(
                    c,
                    Pending::Put,
                    Request::Commit {
                        kvs: vec![Kv {
                            scope: Scope::GLOBAL,
                            key,
                            value: Value::String(v.to_owned()),
                        }],
                    },
                );
            }
            "kvs-fence" => {
                return self.request(
                    c,
                    Pending::Fence,
                    Request::Fence {
                        procs: vec![],
                        info: vec![],
                    },
                );
            }
            "kvs-get" => {
                let Some(key) = c.get("key").and_then(|k| Key::new(k).ok()) else {
                    return error_reply(out, &resp, c, "missing or bad key");
                };
                // The KVS is the job's: whichever process put the key answers. The source the
                // request names is asked next if nothing here has it (its node, by direct
                // modex, when it lives on another).
                let nspace = match c.get("jobid").filter(|j| !j.is_empty()) {
                    None => me.nspace.clone(),
                    Some(j) => match Nspace::new(j) {
                        Ok(n) => n,
                        Err(_) => {
                            found_reply(out, &resp, c, None);
                            return Step::Idle;
                        }
                    },
                };
                let source = c
                    .get("srcid")
                    .and_then(|s| s.parse::<u32>().ok())
                    .map(|r| Proc::new(nspace.clone(), Rank(r)));
                return self.request(
                    c,
                    Pending::Get(key.clone(), source),
                    Request::Get {
                        proc: Proc::new(nspace, Rank::UNDEF),
                        key: Some(key),
                        info: vec![Info::attr(attr::IMMEDIATE, true)],
                    },
                );
            }
            "name-publish" => {
                let (Some(name), Some(port)) = (c.get("name"), c.get("port")) else {
                    return error_reply(out, &resp, c, "missing name or port");
                };
                let Ok(key) = Key::new(name) else {
                    return error_reply(out, &resp, c, "bad service name");
                };
                return self.request(
                    c,
                    Pending::Publish,
                    Request::Publish {
                        data: vec![Info::new(key, Value::String(port.to_owned()))],
                        info: vec![pmi1::range_global()],
                    },
                );
            }
            "name-unpublish" | "name-lookup" => {
                let Some(key) = c.get("name").and_then(|n| Key::new(n).ok()) else {
                    return error_reply(out, &resp, c, "missing or bad service name");
                };
                let info = vec![pmi1::range_global()];
                return if c.cmd == "name-lookup" {
                    self.request(
                        c,
                        Pending::Lookup(key.clone()),
                        Request::Lookup {
                            keys: vec![key],
                            info,
                        },
                    )
                } else {
                    self.request(
                        c,
                        Pending::Unpublish,
                        Request::Unpublish {
                            keys: vec![key],
                            info,
                        },
                    )
                };
            }
            "spawn" => {
                return match spawn::parse(c) {
                    Ok((job_info, apps)) => {
                        // Counts are the host's to check; summing them must not panic.
                        let n = apps.iter().fold(0u32, |n, a| n.saturating_add(a.maxprocs));
                        self.request(c, Pending::Spawn(n), Request::Spawn { job_info, apps })
                    }
                    Err(why) => error_reply(out, &resp, c, &why),
                };
            }
            "finalize" => {
                self.state = State::Done;
                self.end(nodes, true);
                return self.request(c, Pending::Finalize, Request::Finalize { info: vec![] });
            }
            "abort" => {
                self.state = State::Done;
                self.end(nodes, true);
                let procs = if c.get("isworld") == Some("FALSE") {
                    vec![me]
                } else {
                    vec![]
                };
                let message = c.get("msg").unwrap_or_default().to_owned();
                return self.request(
                    c,
                    Pending::Abort,
                    Request::Abort {
                        status: Status(1),
                        message,
                        procs,
                    },
                );
            }
            "fullinit" => return error_reply(out, &resp, c, "already initialised"),
            _ => return error_reply(out, &resp, c, "unknown command"),
        }
        Step::Idle
    }

    /// Answers the node-attribute wait if it is decided; otherwise it stays registered.
    fn try_wait(&mut self, nodes: &mut node_attrs::Common, out: &mut Vec<u8>) {
        let (Some((key, thrid)), Some(me), Some(conn)) =
            (self.waiting.take(), self.proc.as_ref(), self.conn)
        else {
            return;
        };
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        if let Some(t) = &thrid {
            pairs.push(("thrid", t));
        }
        match nodes.wait(&me.nspace, &key, conn) {
            Wait::Found(v) => {
                pairs.extend([("found", "TRUE"), ("value", v.as_str()), ("rc", "0")]);
                wire::encode("info-getnodeattr-response", &pairs, out);
            }
            Wait::Failed(why) => {
                pairs.extend([("found", "FALSE"), ("rc", "-1"), ("errmsg", why.as_str())]);
                wire::encode("info-getnodeattr-response", &pairs, out);
            }
            Wait::Waiting => self.waiting = Some((key, thrid)),
        }
    }

    /// Something changed in the node-attribute table: a wait may be decided.
    pub(crate) fn woken(&mut self, nodes: &mut node_attrs::Common, out: &mut Vec<u8>) {
        if self.waiting.is_some() {
            self.try_wait(nodes, out);
        }
    }

    /// Counted once as ended in the node-attribute table.
    fn end(&mut self, nodes: &mut node_attrs::Common, clean: bool) {
        if self.ended {
            return;
        }
        if let (Some(me), Some(conn)) = (&self.proc, self.conn) {
            self.ended = true;
            nodes.ended(&me.nspace, conn, clean);
        }
    }

    /// The connection closed: without finalize, the job's node-attribute waits here fail.
    pub(crate) fn closed(&mut self, nodes: &mut node_attrs::Common) {
        self.end(nodes, false);
    }

    /// The engine accepted the process (connection `conn`).
    pub(crate) fn accepted(
        &mut self,
        conn: ConnId,
        job: Arc<JobData>,
        nodes: &mut node_attrs::Common,
        out: &mut Vec<u8>,
    ) {
        let Some((_, Pending::FullInit, thrid)) = self.pending.take() else {
            return;
        };
        let rank = self.proc.as_ref().map_or(0, |p| p.rank.0);
        if let Some(me) = &self.proc {
            nodes.joined(&me.nspace, job::local_rank_and_size(&job, rank).1);
        }
        let size = job::size(&job).to_string();
        let appnum = job::appnum(&job, rank).to_string();
        let rank_s = rank.to_string();
        let parent = parent_of(&job, rank);
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        if let Some(t) = &thrid {
            pairs.push(("thrid", t));
        }
        pairs.extend([
            ("pmi-version", "2"),
            ("pmi-subversion", "0"),
            ("rank", rank_s.as_str()),
            ("size", size.as_str()),
            ("appnum", appnum.as_str()),
            ("debugged", "FALSE"),
            ("pmiverbose", "FALSE"),
        ]);
        if let Some(p) = &parent {
            pairs.push(("spawner-jobid", p));
        }
        pairs.push(("rc", "0"));
        wire::encode("fullinit-response", &pairs, out);
        self.conn = Some(conn);
        self.job = Some(job);
        self.state = State::Ready;
    }

    /// The engine refused the process.
    pub(crate) fn refused(&mut self, status: Status, reason: &str, out: &mut Vec<u8>) {
        tracing::warn!(proc = ?self.proc, ?status, "PMI-2 process refused: {reason}");
        let rc = status.0.to_string();
        wire::encode("fullinit-response", &[("rc", &rc), ("errmsg", reason)], out);
        self.state = State::Done;
        self.closing = true;
    }

    /// The engine answered request `id`.
    pub(crate) fn replied(&mut self, id: u32, r: &Reply, out: &mut Vec<u8>) {
        let Some((want, pending, thrid)) = self.pending.take() else {
            tracing::warn!(id, "a reply no PMI-2 request waits for");
            return;
        };
        if want != id {
            tracing::warn!(id, want, "a reply to another PMI-2 request");
            self.pending = Some((want, pending, thrid));
            return;
        }
        let ok = r.status == Status::SUCCESS;
        let rc = if ok {
            "0".to_owned()
        } else {
            r.status.0.to_string()
        };
        let status = format!("{:?}", r.status);
        let mut pairs: Vec<(&str, &str)> = Vec::new();
        if let Some(t) = &thrid {
            pairs.push(("thrid", t));
        }
        let outcome = |pairs: &mut Vec<(&str, &str)>, rc: &'static str| {
            pairs.push(("rc", rc));
        };
        let cmd = match &pending {
            Pending::FullInit => return,
            Pending::Abort => return,
            Pending::Put => "kvs-put-response",
            Pending::Fence => "kvs-fence-response",
            Pending::Get(..) => "kvs-get-response",
            Pending::Publish => "name-publish-response",
            Pending::Unpublish => "name-unpublish-response",
            Pending::Lookup(_) => "name-lookup-response",
            Pending::Spawn(_) => "spawn-response",
            Pending::Finalize => "finalize-response",
        };
        let value;
        let jobid;
        let errcodes;
        match pending {
            Pending::Get(key, Some(source)) if pmi1::found_value(r, &key).is_none() => {
                let req = Request::Get {
                    proc: source,
                    key: Some(key.clone()),
                    info: vec![],
                };
                self.follow_up = Some((Pending::Get(key, None), req, thrid));
                return;
            }
            Pending::Get(key, _) => match pmi1::found_value(r, &key) {
                Some(Ok(v)) if v.len() <= MAX_VALUE => {
                    value = v;
                    pairs.extend([("found", "TRUE"), ("value", value.as_str())]);
                    outcome(&mut pairs, "0");
                }
                Some(_) => {
                    pairs.extend([("found", "FALSE"), ("rc", "-1")]);
                    pairs.push(("errmsg", "value not text or longer than 1024 bytes"));
                }
                None => {
                    pairs.push(("found", "FALSE"));
                    outcome(&mut pairs, "0");
                }
            },
            Pending::Lookup(key) => {
                let port = match &r.body {
                    ReplyBody::Lookup { found } if ok => found
                        .iter()
                        .find(|p| p.key == key)
                        .and_then(|p| pmi1::value_text(&p.value)),
                    _ => None,
                };
                match port {
                    Some(p) => {
                        value = p;
                        // Hydra's clients read `port`, Slurm's `value`.
                        pairs.extend([
                            ("port", value.as_str()),
                            ("value", value.as_str()),
                            ("found", "TRUE"),
                        ]);
                        outcome(&mut pairs, "0");
                    }
                    None => {
                        pairs.extend([("found", "FALSE"), ("rc", "1")]);
                        pairs.push(("errmsg", "service not found"));
                    }
                }
            }
            Pending::Spawn(n) if ok => {
                jobid = match &r.body {
                    ReplyBody::Spawn { nspace } => nspace.as_str().to_owned(),
                    _ => String::new(),
                };
                errcodes = vec!["0"; n as usize].join(",");
                pairs.extend([("jobid", jobid.as_str()), ("errcodes", errcodes.as_str())]);
                outcome(&mut pairs, "0");
            }
            Pending::Publish if r.status == Status::ERR_DUPLICATE_KEY => {
                pairs.extend([("rc", "1"), ("errmsg", "key already present")]);
            }
            Pending::Unpublish if !ok => {
                pairs.extend([("rc", "1"), ("errmsg", "service not found")]);
            }
            _ => {
                pairs.push(("rc", rc.as_str()));
                if !ok {
                    pairs.push(("errmsg", status.as_str()));
                }
            }
        }
        wire::encode(cmd, &pairs, out);
    }
}

/// The namespace of the job that spawned `rank`'s (`spawner-jobid`), if it was spawned.
fn parent_of(job: &JobData, rank: u32) -> Option<String> {
    if !job::spawned(job) {
        return None;
    }
    let parent = job::parent(job, rank).map(|p| p.nspace.as_str().to_owned());
    // The client only asks whether the key is there: a spawned job whose parent is not
    // known still says so.
    Some(parent.unwrap_or_else(|| "unknown".to_owned()))
}

/// Appends the reply `cmd` to request `c`, echoing its `thrid`.
fn respond(out: &mut Vec<u8>, cmd: &str, c: &Command, pairs: &[(&str, &str)]) {
    match c.get("thrid") {
        Some(t) => {
            let mut all = vec![("thrid", t)];
            all.extend_from_slice(pairs);
            wire::encode(cmd, &all, out);
        }
        None => wire::encode(cmd, pairs, out),
    }
}

/// `found=TRUE;value=...` or `found=FALSE`, `rc=0` either way.
fn found_reply(out: &mut Vec<u8>, cmd: &str, c: &Command, value: Option<&str>) {
    match value {
        Some(v) if v.len() <= MAX_VALUE => {
            respond(out, cmd, c, &[("found", "TRUE"), ("value", v), ("rc", "0")])
        }
        _ => respond(out, cmd, c, &[("found", "FALSE"), ("rc", "0")]),
    }
}

/// A refused request: `rc=-1` and why; the connection goes on.
fn error_reply(out: &mut Vec<u8>, cmd: &str, c: &Command, why: &str) -> Step {
    respond(out, cmd, c, &[("rc", "-1"), ("errmsg", why)]);
    Step::Idle
}
