//! The PMI-1 front-end: MPICH's "simple PMI" text protocol spoken to unmodified MPICH
//! processes, translated onto the engine's requests.
//!
//! Sans-IO like the engine: bytes in ([`Pmi1Conn::feed`]), reply lines out (appended to the
//! connection's write buffer), and [`Step`]s telling the shell what to hand the engine. One
//! connection serves one process, which writes one request and waits for its reply; the
//! connection processes its lines one at a time and holds the next line back while the engine
//! works on the previous one, so replies keep the order of the requests.
//!
//! The mapping onto the engine (no PMI-specific case in it):
//!
//! | PMI-1 | engine |
//! |---|---|
//! | `init` (`initack` with `PMI_PORT`) | the handshake, as a native client's hello |
//! | `get_maxes`, `get_appnum`, `get_my_kvsname`, `get_universe_size` | answered from the job data the handshake gave |
//! | `put kvsname key value` | `Commit` of one string value, scope `GLOBAL` |
//! | `barrier_in` | `Fence` over the process's namespace, no data collected |
//! | `get kvsname key` | `Get` of `(kvsname, UNDEF)` with `IMMEDIATE`: the job level, then whichever process put the key |
//! | `get ... key=PMI_process_mapping` | worked out from the namespace's job data |
//! | `publish_name`, `unpublish_name`, `lookup_name` | `Publish`, `Unpublish`, `Lookup` with range `GLOBAL` |
//! | `mcmd=spawn` blocks | one `Spawn` of one app per block; the preput pairs become job info |
//! | `finalize` | `Finalize` |
//! | `abort exitcode` | `Abort` of the namespace with the exit code as status |

pub(crate) mod job;
#[cfg(test)]
pub(crate) mod tests;

use std::collections::HashMap;
use std::sync::Arc;

use pmix_types::{DataRange, Info, Key, Nspace, Proc, Rank, Scope, Status, Value, attr};
use pmix_wire::{App, JobData, JobImage, Kv, Reply, ReplyBody, Request};

use super::Step;
use crate::engine::{Auth, GetAnswers};

/// Longest request line accepted. MPICH's own limit is 1024 bytes, newline included; a longer
/// line is a broken or hostile peer.
pub(crate) const MAX_LINE: usize = 8192;

/// Longest reply line MPICH reads whole (`PMIU_MAXLINE`), newline included.
pub(crate) const MAX_REPLY: usize = 1024;

/// What `get_maxes` answers: Hydra's numbers. MPICH derives its value limit from them and
/// asserts it is above 256, so larger numbers would break MPI_Init.
const KVSNAME_MAX: usize = 256;
const KEYLEN_MAX: usize = 64;
const VALLEN_MAX: usize = 1024;

/// The key MPICH reads the node map from.
const PROCESS_MAPPING: &str = "PMI_process_mapping";

/// How the process reached the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transport {
    /// An inherited socket (`PMI_FD`): the server made it for one known process.
    Fd,
    /// TCP to `PMI_PORT`: the process names itself with `initack pmiid=<PMI_ID>`.
    Port,
}

/// What the PMI-1 connections of a server share: the `PMI_ID`s handed out to processes that
/// will connect to the PMI-1 port, each good for one connection.
#[derive(Default)]
pub(crate) struct Common {
    ids: HashMap<u32, Proc>,
}

impl Common {
    /// Hands `id` out to `proc` (a process started again under the same name loses its old
    /// one); false if another process holds `id`.
    pub(crate) fn hand_out(&mut self, id: u32, proc: Proc) -> bool {
        if self.ids.contains_key(&id) {
            return false;
        }
        self.ids.retain(|_, p| *p != proc);
        self.ids.insert(id, proc);
        true
    }

    /// The process `id` was handed out to; the id is spent.
    pub(crate) fn claim(&mut self, id: u32) -> Option<Proc> {
        self.ids.remove(&id)
    }
}

/// Why the connection waits for the engine, and how its answer is put into words.
#[derive(Debug)]
enum Pending {
    Init,
    Initack,
    Put,
    Barrier,
    /// A key of a KVS.
    Get {
        key: Key,
        kvs: Nspace,
    },
    /// A key of another KVS was not found: does that KVS exist at all?
    KvsExists {
        key: Key,
        kvs: Nspace,
    },
    Mapping(Nspace),
    Publish,
    Unpublish,
    Lookup(Key),
    Spawn,
    Finalize,
    /// No reply: MPICH waits to be killed.
    Abort,
}

#[derive(PartialEq, Eq)]
enum State {
    /// Nothing received yet.
    Fresh,
    /// The handshake is with the engine.
    Attaching,
    Ready,
    /// The process said finalize (or abort); anything after is refused.
    Done,
    /// The process asked for PMI-2 (`init pmi_version=2`): the PMI-2 front-end takes over.
    Upgraded,
}

/// One PMI-1 connection.
pub(crate) struct Pmi1Conn {
    transport: Transport,
    proc: Option<Proc>,
    job: Option<Arc<JobData>>,
    state: State,
    input: Vec<u8>,
    /// Bytes of `input` already consumed.
    consumed: usize,
    pending: Option<(u32, Pending)>,
    /// A request to make, before the next line is read, to word a reply.
    follow_up: Option<(Pending, Request)>,
    next_id: u32,
    spawn: Option<SpawnBuilder>,
    /// The current `mcmd=spawn` block, line by line.
    block: Option<Vec<(String, String)>>,
    closing: bool,
}

impl Pmi1Conn {
    /// A connection over an inherited socket made for `proc`.
    pub(crate) fn with_fd(proc: Proc) -> Self {
        Self::new(Transport::Fd, Some(proc))
    }

    /// The namespace of the accepted process this connection served, and whether it
    /// finalized (or aborted) before the connection ended.
    pub(crate) fn ended_process(&self) -> Option<(&Nspace, bool)> {
        let proc = self.proc.as_ref()?;
        match self.state {
            State::Ready => Some((&proc.nspace, false)),
            State::Done => Some((&proc.nspace, true)),
            State::Fresh | State::Attaching | State::Upgraded => None,
        }
    }

    /// A connection accepted on the TCP port; the process names itself with `initack`.
    pub(crate) fn with_port() -> Self {
        Self::new(Transport::Port, None)
    }

    fn new(transport: Transport, proc: Option<Proc>) -> Self {
        Pmi1Conn {
            transport,
            proc,
            job: None,
            state: State::Fresh,
            input: Vec::new(),
            consumed: 0,
            pending: None,
            follow_up: None,
            next_id: 0,
            spawn: None,
            block: None,
            closing: false,
        }
    }

    /// True once the connection is to be closed when its replies are written.
    pub(crate) fn is_closing(&self) -> bool {
        self.closing
    }

    /// Takes bytes read from the socket.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        if self.consumed > 0 && self.consumed == self.input.len() {
            self.input.clear();
            self.consumed = 0;
        }
        self.input.extend_from_slice(bytes);
    }

    /// False while a whole line (or more than a line may hold) waits to be taken: reading
    /// more would only buffer it, so input stays bounded while a request is with the engine.
    pub(crate) fn wants_input(&self) -> bool {
        let rest = &self.input[self.consumed..];
        rest.len() <= MAX_LINE && !rest.contains(&b'\n')
    }

    /// Bytes received and not yet taken as lines.
    #[cfg(test)]
    pub(crate) fn buffered(&self) -> usize {
        self.input.len() - self.consumed
    }

    /// The next complete line, without its newline. `Err` when a line is longer than
    /// [`MAX_LINE`].
    fn next_line(&mut self) -> Result<Option<String>, String> {
        let rest = &self.input[self.consumed..];
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            if rest.len() > MAX_LINE {
                return Err(format!("a line longer than {MAX_LINE} bytes"));
            }
            if self.consumed > 4096 {
                self.input.drain(..self.consumed);
                self.consumed = 0;
            }
            return Ok(None);
        };
        if end > MAX_LINE {
            return Err(format!("a line longer than {MAX_LINE} bytes"));
        }
        let line = String::from_utf8_lossy(&rest[..end])
            .trim_end_matches('\r')
            .to_owned();
        self.consumed += end + 1;
        Ok(Some(line))
    }

    /// Processes what was fed, up to the first line that needs the engine.
    pub(crate) fn step(&mut self, common: &mut Common, out: &mut Vec<u8>) -> Step {
        if self.closing {
            return Step::Idle;
        }
        if self.pending.is_none() {
            if let Some((pending, req)) = self.follow_up.take() {
                return self.request(pending, req);
            }
        }
        while self.pending.is_none() && matches!(self.state, State::Fresh | State::Ready) {
            let line = match self.next_line() {
                Ok(Some(l)) => l,
                Ok(None) => return Step::Idle,
                Err(why) => return self.fail(out, &why),
            };
            let step = if self.block.is_some() || line.trim() == "mcmd=spawn" {
                self.spawn_line(&line, out)
            } else {
                self.command(&line, common, out)
            };
            if !matches!(step, Step::Idle) {
                return step;
            }
        }
        // After finalize, a line may still come (a confused peer): say so once, then close.
        if matches!(self.state, State::Done) && self.pending.is_none() {
            if let Ok(Some(line)) = self.next_line() {
                let cmd = parse_line(&line).cmd;
                reply(out, &format!("cmd={cmd}_result rc=-1 msg=finalized"));
                self.closing = true;
                return Step::Close;
            }
        }
        Step::Idle
    }

    /// A malformed exchange: tell the peer and close.
    fn fail(&mut self, out: &mut Vec<u8>, why: &str) -> Step {
        tracing::warn!(proc = ?self.proc, "closing a PMI-1 connection: {why}");
        reply(out, &format!("cmd=error rc=-1 msg={}", word(why)));
        self.closing = true;
        Step::Close
    }

    fn request(&mut self, pending: Pending, req: Request) -> Step {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        self.pending = Some((id, pending));
        Step::Request(id, req)
    }

    fn command(&mut self, line: &str, common: &mut Common, out: &mut Vec<u8>) -> Step {
        let l = parse_line(line);
        if l.cmd.is_empty() {
            if line.trim().is_empty() {
                return Step::Idle;
            }
            return self.fail(out, "a line without cmd=");
        }
        if let State::Fresh = self.state {
            return self.first_command(&l, common, out);
        }
        let Some(job) = self.job.clone() else {
            return self.fail(out, "no job data");
        };
        let Some(me) = self.proc.clone() else {
            return self.fail(out, "no process");
        };
        match l.cmd {
            "init" => {
                // Already attached (after initack): answer at once.
                reply(out, INIT_OK);
                Step::Idle
            }
            "get_maxes" => {
                reply(
                    out,
                    &format!(
                        "cmd=maxes rc=0 kvsname_max={KVSNAME_MAX} keylen_max={KEYLEN_MAX} vallen_max={VALLEN_MAX}"
                    ),
                );
                Step::Idle
            }
            "get_appnum" => {
                let n = job::appnum(&job, me.rank.0);
                reply(out, &format!("cmd=appnum rc=0 appnum={n}"));
                Step::Idle
            }
            "get_my_kvsname" => {
                reply(out, &format!("cmd=my_kvsname rc=0 kvsname={}", me.nspace));
                Step::Idle
            }
            "get_universe_size" => {
                let n = job::universe_size(&job);
                reply(out, &format!("cmd=universe_size rc=0 size={n}"));
                Step::Idle
            }
            "barrier_in" => self.request(
                Pending::Barrier,
                Request::Fence {
                    procs: vec![],
                    info: vec![],
                },
            ),
            "put" => self.put(&l, &me, out),
            "get" => self.get(&l, &me, &job, out),
            "publish_name" => {
                let (Some(service), Some(port)) = (l.arg("service"), l.arg("port")) else {
                    reply(out, "cmd=publish_result rc=-1 msg=missing_service_or_port");
                    return Step::Idle;
                };
                let Ok(key) = Key::new(service) else {
                    reply(out, "cmd=publish_result rc=-1 msg=bad_service_name");
                    return Step::Idle;
                };
                self.request(
                    Pending::Publish,
                    Request::Publish {
                        data: vec![Info::new(key, Value::String(port.to_owned()))],
                        info: vec![range_global()],
                    },
                )
            }
            "unpublish_name" => {
                let Some(key) = l.arg("service").and_then(|s| Key::new(s).ok()) else {
                    reply(out, "cmd=unpublish_result rc=-1 msg=bad_service_name");
                    return Step::Idle;
                };
                self.request(
                    Pending::Unpublish,
                    Request::Unpublish {
                        keys: vec![key],
                        info: vec![range_global()],
                    },
                )
            }
            "lookup_name" => {
                let Some(key) = l.arg("service").and_then(|s| Key::new(s).ok()) else {
                    reply(out, "cmd=lookup_result rc=-1 msg=bad_service_name");
                    return Step::Idle;
                };
                self.request(
                    Pending::Lookup(key.clone()),
                    Request::Lookup {
                        keys: vec![key],
                        info: vec![range_global()],
                    },
                )
            }
            "finalize" => {
                self.state = State::Done;
                self.request(Pending::Finalize, Request::Finalize { info: vec![] })
            }
            "abort" => {
                let code = l
                    .arg("exitcode")
                    .and_then(|c| c.parse::<i32>().ok())
                    .unwrap_or(1);
                self.state = State::Done;
                self.request(
                    Pending::Abort,
                    Request::Abort {
                        status: Status(code),
                        message: String::new(),
                        procs: vec![],
                    },
                )
            }
            "initack" => {
                reply(out, "cmd=initack rc=-1 msg=already_initialised");
                Step::Idle
            }
            other => {
                reply(
                    out,
                    &format!("cmd={other}_result rc=-1 msg=unknown_command"),
                );
                Step::Idle
            }
        }
    }

    /// The first line: `init` over an inherited socket, `initack` over TCP.
    fn first_command(&mut self, l: &Line<'_>, common: &mut Common, out: &mut Vec<u8>) -> Step {
        if l.cmd == "init" && l.arg("pmi_version") == Some("2") {
            // The rest of the connection is PMI-2's (over TCP its fullinit names the PMI_ID).
            self.state = State::Upgraded;
            return Step::Idle;
        }
        match (self.transport, l.cmd) {
            (Transport::Fd, "init") => {
                if let Some(v) = l.arg("pmi_version").filter(|v| *v != "1") {
                    reply(
                        out,
                        &format!(
                            "cmd=response_to_init rc=-1 pmi_version=1 pmi_subversion=1 msg=pmi_version_{}_not_supported",
                            word(v)
                        ),
                    );
                    self.closing = true;
                    return Step::Close;
                }
                let Some(proc) = self.proc.clone() else {
                    return self.fail(out, "no process");
                };
                self.state = State::Attaching;
                self.pending = Some((u32::MAX, Pending::Init));
                hello(proc)
            }
            (Transport::Port, "initack") => {
                let Some(id) = l.arg("pmiid").and_then(|v| v.parse::<u32>().ok()) else {
                    reply(out, "cmd=initack rc=-1 msg=bad_pmiid");
                    self.closing = true;
                    return Step::Close;
                };
                self.state = State::Attaching;
                self.pending = Some((u32::MAX, Pending::Initack));
                let Some(proc) = common.ids.remove(&id) else {
                    self.refused(Status::ERR_INVALID_CRED, "unknown pmiid", out);
                    return Step::Close;
                };
                self.proc = Some(proc.clone());
                hello(proc)
            }
            (Transport::Fd, cmd) => {
                reply(out, &format!("cmd={cmd}_result rc=-1 msg=init_first"));
                self.closing = true;
                Step::Close
            }
            (Transport::Port, _) => {
                reply(out, "cmd=initack rc=-1 msg=initack_first");
                self.closing = true;
                Step::Close
            }
        }
    }

    /// After `init pmi_version=2`: the process (when the socket was made for one) and what
    /// it sent after that line, for the PMI-2 front-end to go on with.
    pub(crate) fn take_upgrade(&mut self) -> Option<(Option<Proc>, Vec<u8>)> {
        if self.state != State::Upgraded || self.closing {
            return None;
        }
        self.state = State::Done;
        self.closing = true;
        let rest = self.input.split_off(self.consumed);
        let proc = match self.transport {
            Transport::Fd => self.proc.clone(),
            Transport::Port => None,
        };
        Some((proc, rest))
    }

    /// The engine accepted the process.
    pub(crate) fn accepted(&mut self, job: Arc<JobData>, out: &mut Vec<u8>) {
        let Some((_, pending)) = self.pending.take() else {
            return;
        };
        let rank = self.proc.as_ref().map_or(0, |p| p.rank.0);
        match pending {
            Pending::Initack => {
                reply(out, "cmd=initack rc=0");
                reply(out, &format!("cmd=set size={}", job::size(&job)));
                reply(out, &format!("cmd=set rank={rank}"));
                reply(out, "cmd=set debug=0");
            }
            _ => reply(out, INIT_OK),
        }
        self.job = Some(job);
        self.state = State::Ready;
    }

    /// The engine (or this front-end, for an unknown `PMI_ID`) refused the process.
    pub(crate) fn refused(&mut self, status: Status, reason: &str, out: &mut Vec<u8>) {
        tracing::warn!(proc = ?self.proc, ?status, "PMI-1 process refused: {reason}");
        match self.pending.take() {
            Some((_, Pending::Initack)) => reply(
                out,
                &format!("cmd=initack rc={} msg={}", status.0, word(reason)),
            ),
            _ => reply(
                out,
                &format!(
                    "cmd=response_to_init rc={} pmi_version=1 pmi_subversion=1 msg={}",
                    status.0,
                    word(reason)
                ),
            ),
        }
        self.state = State::Done;
        self.closing = true;
    }

    /// The engine answered request `id`.
    pub(crate) fn replied(&mut self, id: u32, r: &Reply, out: &mut Vec<u8>) {
        let Some((want, pending)) = self.pending.take() else {
            tracing::warn!(id, "a reply no PMI-1 request waits for");
            return;
        };
        if want != id {
            tracing::warn!(id, want, "a reply to another PMI-1 request");
            self.pending = Some((want, pending));
            return;
        }
        let ok = r.status == Status::SUCCESS;
        let rc = r.status.0;
        match pending {
            Pending::Init | Pending::Initack => {}
            Pending::Put => reply(out, &format!("cmd=put_result rc={rc}{}", msg(r.status))),
            Pending::Barrier => {
                if ok {
                    reply(out, "cmd=barrier_out rc=0");
                } else {
                    reply(out, &format!("cmd=barrier_out rc={rc}{}", msg(r.status)));
                }
            }
            Pending::Get { key, kvs } => match found_value(r, &key) {
                Some(Ok(v)) => value_reply(out, &v),
                Some(Err(why)) => reply(out, &format!("cmd=get_result rc=-1 msg={why}")),
                // Not found: in another KVS, the KVS itself may be what is unknown, which the
                // engine's answer does not tell apart; ask it.
                None if r.status == Status::ERR_NOT_FOUND
                    && self.proc.as_ref().is_some_and(|me| me.nspace != kvs) =>
                {
                    let req = Request::Get {
                        proc: Proc::new(kvs.clone(), Rank::WILDCARD),
                        key: None,
                        info: vec![],
                    };
                    self.follow_up = Some((Pending::KvsExists { key, kvs }, req));
                }
                None => key_not_found(out, &key),
            },
            Pending::KvsExists { key, kvs } => {
                if ok {
                    key_not_found(out, &key);
                } else {
                    kvs_not_found(out, kvs.as_str());
                }
            }
            Pending::Mapping(kvs) => {
                let job = match &r.body {
                    ReplyBody::Get { jobs, .. } if ok => jobs.first().map(JobImage::expand),
                    _ => None,
                };
                match job {
                    Some(job) => value_reply(out, &job::process_mapping(&job, mapping_room())),
                    None => kvs_not_found(out, kvs.as_str()),
                }
            }
            Pending::Publish => {
                if ok {
                    reply(out, "cmd=publish_result rc=0 msg=success");
                } else if r.status == Status::ERR_DUPLICATE_KEY {
                    reply(out, "cmd=publish_result rc=1 msg=key_already_present");
                } else {
                    reply(out, &format!("cmd=publish_result rc={rc}{}", msg(r.status)));
                }
            }
            Pending::Unpublish => {
                if ok {
                    reply(out, "cmd=unpublish_result rc=0 msg=success");
                } else {
                    reply(out, "cmd=unpublish_result rc=1 msg=service_not_found");
                }
            }
            Pending::Lookup(key) => {
                let port = match &r.body {
                    ReplyBody::Lookup { found } if ok => found
                        .iter()
                        .find(|p| p.key == key)
                        .and_then(|p| value_text(&p.value)),
                    _ => None,
                };
                match port {
                    Some(p) if p.is_empty() || !is_word(&p) => {
                        reply(out, "cmd=lookup_result rc=1 msg=port_not_representable")
                    }
                    Some(p) => reply(out, &format!("cmd=lookup_result rc=0 msg=success port={p}")),
                    None => reply(out, "cmd=lookup_result rc=1 msg=service_not_found"),
                }
            }
            Pending::Spawn => {
                if ok {
                    reply(out, "cmd=spawn_result rc=0");
                } else {
                    reply(out, &format!("cmd=spawn_result rc={rc}{}", msg(r.status)));
                }
            }
            Pending::Finalize => reply(out, "cmd=finalize_ack rc=0"),
            Pending::Abort => {}
        }
    }

    fn put(&mut self, l: &Line<'_>, me: &Proc, out: &mut Vec<u8>) -> Step {
        let (Some(kvs), Some(key), Some(value)) = (l.arg("kvsname"), l.arg("key"), l.arg("value"))
        else {
            reply(out, "cmd=put_result rc=-1 msg=missing_kvsname_key_or_value");
            return Step::Idle;
        };
        if kvs != me.nspace.as_str() {
            reply(out, "cmd=put_result rc=-1 msg=not_your_kvs");
            return Step::Idle;
        }
        let Ok(key) = Key::new(key) else {
            reply(out, "cmd=put_result rc=-1 msg=bad_key");
            return Step::Idle;
        };
        if value.len() > max_value() {
            reply(out, "cmd=put_result rc=-1 msg=value_too_long");
            return Step::Idle;
        }
        self.request(
            Pending::Put,
            Request::Commit {
                kvs: vec![Kv {
                    scope: Scope::GLOBAL,
                    key,
                    value: Value::String(value.to_owned()),
                }],
            },
        )
    }

    fn get(&mut self, l: &Line<'_>, me: &Proc, job: &JobData, out: &mut Vec<u8>) -> Step {
        let (Some(kvs), Some(key)) = (l.arg("kvsname"), l.arg("key")) else {
            reply(out, "cmd=get_result rc=-1 msg=missing_kvsname_or_key");
            return Step::Idle;
        };
        let Ok(nspace) = Nspace::new(kvs) else {
            kvs_not_found(out, kvs);
            return Step::Idle;
        };
        if key == PROCESS_MAPPING {
            if nspace == me.nspace {
                value_reply(out, &job::process_mapping(job, mapping_room()));
                return Step::Idle;
            }
            return self.request(
                Pending::Mapping(nspace.clone()),
                Request::Get {
                    proc: Proc::new(nspace, Rank::WILDCARD),
                    key: None,
                    info: vec![],
                },
            );
        }
        let Ok(key) = Key::new(key) else {
            reply(out, "cmd=get_result rc=-1 msg=bad_key");
            return Step::Idle;
        };
        self.request(
            Pending::Get {
                key: key.clone(),
                kvs: nspace.clone(),
            },
            Request::Get {
                proc: Proc::new(nspace, Rank::UNDEF),
                key: Some(key),
                info: vec![Info::attr(attr::IMMEDIATE, true)],
            },
        )
    }

    /// One line of an `mcmd=spawn` block.
    fn spawn_line(&mut self, line: &str, out: &mut Vec<u8>) -> Step {
        let line = line.trim_end();
        if self.block.is_none() {
            if !matches!(self.state, State::Ready) {
                return self.fail(out, "spawn before init");
            }
            self.block = Some(Vec::new());
            return Step::Idle;
        }
        if line != "endcmd" {
            let Some((k, v)) = line.split_once('=') else {
                self.block = None;
                self.spawn = None;
                return self.fail(out, "a spawn line without =");
            };
            if let Some(b) = self.block.as_mut() {
                if b.len() >= MAX_BLOCK_LINES {
                    self.block = None;
                    self.spawn = None;
                    return self.fail(out, "a spawn block of too many lines");
                }
                b.push((k.to_owned(), v.to_owned()));
            }
            return Step::Idle;
        }
        let block = self.block.take().unwrap_or_default();
        let builder = self.spawn.get_or_insert_with(SpawnBuilder::default);
        match builder.add(&block) {
            Ok(false) => Step::Idle,
            Ok(true) => {
                let b = self.spawn.take().unwrap_or_default();
                let (job_info, apps) = b.finish();
                self.request(Pending::Spawn, Request::Spawn { job_info, apps })
            }
            Err(why) => {
                self.spawn = None;
                reply(out, &format!("cmd=spawn_result rc=-1 msg={}", word(&why)));
                Step::Idle
            }
        }
    }
}

/// The longest block of a spawn request: a guard against a peer that never ends one.
const MAX_BLOCK_LINES: usize = 4096;

const INIT_OK: &str = "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1";

/// The longest value a get can answer in one line.
fn max_value() -> usize {
    MAX_REPLY - "cmd=get_result rc=0 value=\n".len()
}

/// Room for the node map: what MPICH keeps of a value (its `vallen_max` after clamping).
fn mapping_room() -> usize {
    VALLEN_MAX - KVSNAME_MAX - KEYLEN_MAX - 30
}

/// The handshake of a process this front-end vouches for: its socket was made for it, or it
/// showed the one-time `PMI_ID` handed out for it.
pub(crate) fn hello(proc: Proc) -> Step {
    Step::Hello {
        proc,
        auth: Auth::Vouched { creds: None },
        answers: GetAnswers::KeyOnly,
    }
}

pub(crate) fn range_global() -> Info {
    Info::attr(attr::RANGE, DataRange::GLOBAL)
}

/// Appends one reply line.
fn reply(out: &mut Vec<u8>, line: &str) {
    out.extend_from_slice(line.as_bytes());
    out.push(b'\n');
}

fn value_reply(out: &mut Vec<u8>, v: &str) {
    if !is_word(v) && !v.is_empty() {
        return reply(out, "cmd=get_result rc=-1 msg=value_not_representable");
    }
    let line = format!("cmd=get_result rc=0 value={v}");
    if line.len() + 1 > MAX_REPLY {
        return reply(out, "cmd=get_result rc=-1 msg=value_too_long");
    }
    reply(out, &line);
}

/// ` msg=<status name>` for a failure.
/// The answer to `cmd=get` of a key its KVS does not hold.
fn key_not_found(out: &mut Vec<u8>, key: &Key) {
    let key = word(key.as_str());
    reply(
        out,
        &format!("cmd=get_result rc=-1 msg=key_{key}_not_found"),
    );
}

/// The answer to `cmd=get` in a KVS the server does not know.
fn kvs_not_found(out: &mut Vec<u8>, kvs: &str) {
    let kvs = word(kvs);
    reply(
        out,
        &format!("cmd=get_result rc=-1 msg=kvs_{kvs}_not_found"),
    );
}

fn msg(status: Status) -> String {
    if status == Status::SUCCESS {
        " msg=success".into()
    } else {
        format!(" msg={}", word(&format!("{status:?}")))
    }
}

/// A value that can stand in a line: no spaces, no line ends.
fn is_word(s: &str) -> bool {
    !s.bytes().any(|b| b == b' ' || b == b'\n' || b == b'\r')
}

/// Text made into one word of a reply (spaces become underscores).
fn word(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_whitespace() { '_' } else { c })
        .take(200)
        .collect()
}

/// The text of a value, as a PMI-1 value.
pub(crate) fn value_text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        _ => v
            .as_i64()
            .map(|n| n.to_string())
            .or_else(|| v.as_u64().map(|n| n.to_string())),
    }
}

/// The value of `key` in a Get reply: the job and session levels, then the data of the
/// process that answered. `Some(Err)` when the value cannot be written on a line.
pub(crate) fn found_value(r: &Reply, key: &Key) -> Option<Result<String, &'static str>> {
    if r.status != Status::SUCCESS {
        return None;
    }
    let ReplyBody::Get { data, jobs } = &r.body else {
        return None;
    };
    let v = jobs
        .iter()
        .flat_map(|j| j.job().iter().chain(j.session()))
        .find(|i| i.key == *key)
        .map(|i| &i.value)
        .or_else(|| {
            data.iter()
                .flat_map(|p| &p.kvs)
                .find(|kv| kv.key == *key)
                .map(|kv| &kv.value)
        })?;
    Some(value_text(v).ok_or("value_not_text"))
}

/// The tokens of one single-line request: `cmd=<name>` then `key=value` words, each split at
/// its first `=` (values may hold `=`).
struct Line<'a> {
    cmd: &'a str,
    args: Vec<(&'a str, &'a str)>,
}

impl<'a> Line<'a> {
    fn arg(&self, key: &str) -> Option<&'a str> {
        self.args.iter().find(|(k, _)| *k == key).map(|(_, v)| *v)
    }
}

fn parse_line(line: &str) -> Line<'_> {
    let mut cmd = "";
    let mut args = Vec::new();
    for (i, tok) in line.split_ascii_whitespace().enumerate() {
        let (k, v) = tok.split_once('=').unwrap_or((tok, ""));
        if i == 0 && k == "cmd" {
            cmd = v;
        } else {
            args.push((k, v));
        }
    }
    Line { cmd, args }
}

/// The blocks of one multi-line spawn request, gathered until the last.
#[derive(Default, Debug)]
struct SpawnBuilder {
    apps: Vec<App>,
    preput: Vec<(String, String)>,
    total: Option<u32>,
}

impl SpawnBuilder {
    /// Adds one block; true once the last block (`spawnssofar == totspawns`) is in.
    fn add(&mut self, block: &[(String, String)]) -> Result<bool, String> {
        let get = |k: &str| {
            block
                .iter()
                .find(|(bk, _)| bk == k)
                .map(|(_, v)| v.as_str())
        };
        let num = |k: &str| -> Result<u32, String> {
            get(k)
                .ok_or_else(|| format!("spawn block without {k}"))?
                .trim()
                .parse::<u32>()
                .map_err(|_| format!("spawn block with a bad {k}"))
        };
        let opt_num = |k: &str| -> Result<u32, String> {
            match get(k) {
                None => Ok(0),
                Some(v) => v
                    .trim()
                    .parse::<u32>()
                    .map_err(|_| format!("spawn block with a bad {k}")),
            }
        };
        let nprocs = num("nprocs")?;
        let total = num("totspawns")?;
        let sofar = num("spawnssofar")?;
        let execname = get("execname").ok_or("spawn block without execname")?;
        if nprocs == 0 || execname.is_empty() {
            return Err("spawn block with no processes or no program".into());
        }
        if total == 0 || total > 1024 || *self.total.get_or_insert(total) != total {
            return Err("spawn blocks disagree on totspawns".into());
        }
        if sofar as usize != self.apps.len() + 1 {
            return Err("spawn blocks out of order".into());
        }
        let argc = opt_num("argcnt")?;
        let mut argv = vec![execname.to_owned()];
        for i in 1..=argc.min(4096) {
            let a = get(&format!("arg{i}")).ok_or_else(|| format!("spawn block without arg{i}"))?;
            argv.push(a.to_owned());
        }
        for i in 0..opt_num("preput_num")?.min(4096) {
            let k = get(&format!("preput_key_{i}"))
                .ok_or_else(|| format!("spawn block without preput_key_{i}"))?;
            let v = get(&format!("preput_val_{i}"))
                .ok_or_else(|| format!("spawn block without preput_val_{i}"))?;
            // MPICH 4 repeats the preput pairs in every block; MPICH 5 sends them once.
            if !self.preput.iter().any(|(pk, _)| pk == k) {
                self.preput.push((k.to_owned(), v.to_owned()));
            }
        }
        let mut cwd = String::new();
        for i in 0..opt_num("info_num")?.min(4096) {
            let k = get(&format!("info_key_{i}"))
                .ok_or_else(|| format!("spawn block without info_key_{i}"))?;
            let v = get(&format!("info_val_{i}"))
                .ok_or_else(|| format!("spawn block without info_val_{i}"))?;
            match k {
                "wdir" => cwd = v.to_owned(),
                // One node: where to place the processes does not matter.
                "path" | "host" | "hosts" | "hostfile" => {}
                other => tracing::debug!(key = other, "spawn info key ignored"),
            }
        }
        self.apps.push(App {
            cmd: execname.to_owned(),
            argv,
            env: vec![],
            cwd,
            maxprocs: nprocs,
            info: vec![],
        });
        Ok(sofar == total)
    }

    /// The job info (the preput pairs, which the host makes job-level data of the new job)
    /// and the apps.
    fn finish(self) -> (Vec<Info>, Vec<App>) {
        let info = self
            .preput
            .into_iter()
            .filter_map(|(k, v)| Key::new(&k).ok().map(|k| Info::new(k, Value::String(v))))
            .collect();
        (info, self.apps)
    }
}
