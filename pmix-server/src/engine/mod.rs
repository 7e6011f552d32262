//! The sans-IO server engine: every decision of the server, none of its I/O.
//!
//! The engine is fed events (a client said hello, sent a request, went away; the host completed
//! a callback; time passed) and produces [`Output`]s (send this reply, close that connection,
//! call the host). It owns the store, the registry of namespaces and clients, the collectives in
//! progress and the requests waiting for data. It never touches a socket, a thread or a clock:
//! time comes in as an argument, so tests drive it deterministically with many simulated
//! clients. Protocol front-ends translate their clients' messages into the [`Request`]s it
//! takes.

mod auth;
mod fence;
pub(crate) mod names;
pub(crate) mod nspace;
mod store;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pmix_types::{DataRange, Info, Key, Nspace, Proc, Rank, Scope, Status, Value, attr};
use pmix_wire::{App, Event, JobData, Kv, ProcKvs, Published, Query, Reply, ReplyBody, Request};

use self::fence::{FenceOp, FenceTable, Kind};
use self::names::{Caller, LookupOutcome, NameStore};
use self::store::{NsId, Store};
use crate::Error;

pub(crate) use self::auth::{Auth, PeerCreds, Proofs, SECRET_LEN};
use self::auth::{Claim, constant_time_eq};
pub use self::names::NameService;
pub(crate) use self::nspace::Locale;

/// A connection, as the I/O shell numbers them.
pub(crate) type ConnId = usize;

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
}

/// What the engine asks the shell to do.
#[derive(Debug)]
pub(crate) enum Output {
    /// The handshake succeeded: send the client its job data.
    Accept { conn: ConnId, job: Arc<JobData> },
    /// The handshake failed: tell the client why, then close.
    Refuse {
        conn: ConnId,
        status: Status,
        reason: String,
    },
    /// Answer request `id`.
    Reply { conn: ConnId, id: u32, reply: Reply },
    /// Send the same reply to several requests (a collecting fence's data).
    SharedReply {
        to: Vec<(ConnId, u32)>,
        reply: Arc<Reply>,
    },
    /// Close the connection once what is queued for it is written.
    Close { conn: ConnId },
    /// Call the host.
    Host { op: OpId, call: HostCall },
    /// Answer a host's `dmodex_request`.
    Dmodex {
        token: u64,
        result: Result<Vec<u8>, Status>,
    },
    /// Deliver an event to a client.
    Event { conn: ConnId, event: Arc<Event> },
}

struct Namespace {
    name: Nspace,
    size: u32,
    local: Vec<Rank>,
    /// Its job data, derived from the registration when first needed.
    job: nspace::LazyJob,
}

impl Namespace {
    fn is_local(&self, rank: Rank) -> bool {
        self.local.binary_search(&rank).is_ok()
    }
}

struct ClientReg {
    uid: u32,
    gid: u32,
    proofs: Proofs,
    conn: Option<ConnId>,
    /// How the name was last claimed: a name once claimed with a secret or a way made for
    /// it is not taken by uid alone afterwards (a reconnection), even where that was allowed.
    claimed: Option<Claim>,
    finalized: bool,
}

enum ConnState {
    /// Authenticated; waiting for the host's client_connected.
    Connecting,
    Active,
    /// Finalize was asked; waiting for the host.
    Finalizing,
}

struct Conn {
    proc: Proc,
    ns: NsId,
    state: ConnState,
    /// Namespaces whose job data this client already holds (RFC0009 shipping).
    has_jobs: HashSet<NsId>,
    /// The event codes it registered for.
    events: EventReg,
    /// By participant list (numbered in `Engine::participant_ids`): the commit sequence number up to
    /// which this client received every participant's data from a collecting fence. The next
    /// collecting fence over the list sends it only what was committed since: it holds the
    /// rest in its store.
    collected: HashMap<u32, u64>,
}

/// A client's event registrations, counted: each registration adds, each deregistration
/// removes one.
#[derive(Default)]
struct EventReg {
    /// Registrations for every code.
    all: u32,
    codes: HashMap<Status, u32>,
}

impl EventReg {
    fn wants(&self, code: Status) -> bool {
        self.all > 0 || self.codes.get(&code).is_some_and(|n| *n > 0)
    }

    fn add(&mut self, codes: &[Status]) {
        if codes.is_empty() {
            self.all += 1;
        }
        for c in codes {
            *self.codes.entry(*c).or_default() += 1;
        }
    }

    fn remove(&mut self, codes: &[Status]) {
        if codes.is_empty() {
            self.all = self.all.saturating_sub(1);
        }
        for c in codes {
            if let Some(n) = self.codes.get_mut(c) {
                *n -= 1;
                if *n == 0 {
                    self.codes.remove(c);
                }
            }
        }
    }
}

/// Who is waiting for a process's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Requester {
    Client { conn: ConnId, id: u32 },
    Host { token: u64 },
}

struct PendingGet {
    who: Requester,
    key: Option<Key>,
    deadline: Option<Instant>,
    timer: u64,
}

enum PendingHost {
    Connect {
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
        target: (NsId, Rank),
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
    },
    /// A disconnect spanning nodes, completed by the host.
    Collective {
        seq: u64,
    },
    /// Nobody waits for the answer.
    Nothing,
}

/// Whether an event of this range may concern processes of other nodes.
fn reaches_other_nodes(range: DataRange) -> bool {
    !matches!(
        range,
        DataRange::PROC_LOCAL | DataRange::LOCAL | DataRange::RM
    )
}

/// The session id of this server in its built-in name service.
const SESSION: names::SessionId = 0;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    Get { target: (NsId, Rank), timer: u64 },
    Fence { seq: u64 },
}

/// The server engine.
pub(crate) struct Engine {
    locale_host: String,
    job_extras: Vec<Info>,
    ns_ids: HashMap<Nspace, NsId>,
    nspaces: HashMap<NsId, Namespace>,
    next_ns: NsId,
    clients: HashMap<(NsId, Rank), ClientReg>,
    conns: HashMap<ConnId, Conn>,
    store: Store,
    /// Processes whose data is here (committed locally, or brought from other nodes), with
    /// the sequence number of their latest commit.
    committed: HashMap<(NsId, Rank), u64>,
    /// Of the local processes, the commit last sent to other nodes in a fence's contribution:
    /// a barrier sends only what they have committed since.
    shipped: HashMap<(NsId, Rank), u64>,
    /// Counts commits: the sequence number of the latest.
    commit_seq: u64,
    /// Participant lists of collecting fences, numbered (see `Conn::collected`).
    participant_ids: HashMap<Vec<Proc>, u32>,
    /// Local processes whose connection ended, with the status to give whoever waits for them.
    gone: HashMap<(NsId, Rank), Status>,
    gets: HashMap<(NsId, Rank), Vec<PendingGet>>,
    /// Direct-modex requests at the host, by target; requesters wait in `gets`.
    dmodex_inflight: HashSet<(NsId, Rank)>,
    fences: FenceTable,
    host_ops: HashMap<OpId, PendingHost>,
    next_op: OpId,
    next_timer: u64,
    timers: BTreeMap<(Instant, u64), Timer>,
    /// Namespaces connected with each other (both orders), for failure events.
    connected: HashSet<(NsId, NsId)>,
    /// This server's own identity, the source of the events it raises.
    me: Proc,
    /// Who answers publish, lookup and unpublish.
    name_service: NameService,
    /// The built-in name service; lookups waiting in it are identified by (conn, id).
    names: NameStore<(ConnId, u32)>,
    out: VecDeque<Output>,
}

fn info_flag(info: &[Info], key: &str) -> bool {
    info.iter()
        .any(|i| i.key.as_str() == key && i.flag().unwrap_or(false))
}

/// A `TIMEOUT` directive in seconds; 0 or absent means none.
fn info_timeout(info: &[Info]) -> Option<Duration> {
    let secs = info
        .iter()
        .find(|i| i.key.as_str() == attr::TIMEOUT)?
        .value
        .as_i64()?;
    (secs > 0).then(|| Duration::from_secs(secs.unsigned_abs()))
}

/// Whether data put with `scope` by `owner` is visible to `reader`, given whether they share
/// a node.
fn visible(scope: Scope, same_node: bool) -> bool {
    match scope {
        Scope::LOCAL => same_node,
        Scope::REMOTE => !same_node,
        Scope::INTERNAL => false,
        _ => true,
    }
}

impl Engine {
    /// An engine for a server on node `hostname`; `job_extras` are job-level values every
    /// namespace receives (tmpdirs, the server's identity).
    pub(crate) fn new(hostname: String, job_extras: Vec<Info>, name_service: NameService) -> Self {
        let mut names = NameStore::default();
        names.open_session(SESSION, &hostname);
        let me = server_proc(&job_extras);
        Engine {
            locale_host: hostname,
            job_extras,
            ns_ids: HashMap::new(),
            nspaces: HashMap::new(),
            next_ns: 1,
            clients: HashMap::new(),
            conns: HashMap::new(),
            store: Store::default(),
            committed: HashMap::new(),
            shipped: HashMap::new(),
            commit_seq: 0,
            participant_ids: HashMap::new(),
            gone: HashMap::new(),
            gets: HashMap::new(),
            dmodex_inflight: HashSet::new(),
            fences: FenceTable::default(),
            host_ops: HashMap::new(),
            next_op: 1,
            next_timer: 1,
            timers: BTreeMap::new(),
            connected: HashSet::new(),
            me,
            name_service,
            names,
            out: VecDeque::new(),
        }
    }

    /// The next thing to do, if any.
    pub(crate) fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// When [`Engine::handle_timeout`] must next be called.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let mine = self.timers.keys().next().map(|(t, _)| *t);
        match (mine, self.names.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn ns_id(&self, nspace: &str) -> Option<NsId> {
        self.ns_ids.get(nspace).copied()
    }

    fn host_call(&mut self, pending: PendingHost, call: HostCall) {
        let op = self.next_op;
        self.next_op += 1;
        self.host_ops.insert(op, pending);
        self.out.push_back(Output::Host { op, call });
    }

    fn reply(&mut self, conn: ConnId, id: u32, reply: Reply) {
        self.out.push_back(Output::Reply { conn, id, reply });
    }

    fn reply_status(&mut self, conn: ConnId, id: u32, status: Status) {
        self.reply(conn, id, Reply::status(status));
    }

    // ---- host API -------------------------------------------------------------------------

    /// `register_nspace`.
    pub(crate) fn register_nspace(
        &mut self,
        nspace: Nspace,
        nlocalprocs: u32,
        info: &[Info],
    ) -> Result<(), Error> {
        let locale = Locale {
            hostname: &self.locale_host,
            job_extras: &self.job_extras,
        };
        let reg = nspace::register(&nspace, nlocalprocs, info, &locale)?;
        let id = match self.ns_ids.get(&nspace) {
            // Re-registration replaces the job data (a host may add information).
            Some(&id) => id,
            None => {
                let id = self.next_ns;
                self.next_ns += 1;
                self.ns_ids.insert(nspace.clone(), id);
                self.names.add_nspace(SESSION, &nspace);
                id
            }
        };
        self.nspaces.insert(
            id,
            Namespace {
                name: nspace,
                size: reg.size,
                local: reg.local_ranks,
                job: reg.job,
            },
        );
        Ok(())
    }

    /// `deregister_nspace`: forgets everything of the namespace and closes its connections.
    pub(crate) fn deregister_nspace(&mut self, nspace: &str, now: Instant) {
        let Some(id) = self.ns_ids.remove(nspace) else {
            return;
        };
        if let Some(ns) = self.nspaces.remove(&id) {
            // Its APP- and PROC-persistence publications end with it.
            self.names.end_nspace(SESSION, &ns.name);
        }
        let conns: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| c.ns == id)
            .map(|(k, _)| *k)
            .collect();
        for conn in conns {
            self.handle_closed(conn, now);
            self.out.push_back(Output::Close { conn });
        }
        self.clients.retain(|(n, _), _| *n != id);
        self.connected.retain(|(a, b)| *a != id && *b != id);
        self.committed.retain(|(n, _), _| *n != id);
        self.shipped.retain(|(n, _), _| *n != id);
        self.gone.retain(|(n, _), _| *n != id);
        self.store.purge_nspace(id);
        let waiting: Vec<_> = self
            .gets
            .keys()
            .filter(|(n, _)| *n == id)
            .copied()
            .collect();
        for target in waiting {
            self.fail_gets(target, Status::ERR_NOT_FOUND);
        }
        self.fail_fences_with(|p| p.nspace.as_str() == nspace, Status::ERR_NOT_FOUND);
        self.committed.shrink_to_fit();
        self.clients.shrink_to_fit();
    }

    /// `register_client`.
    pub(crate) fn register_client(
        &mut self,
        proc: &Proc,
        uid: u32,
        gid: u32,
        proofs: Proofs,
    ) -> Result<(), Error> {
        let ns = self
            .ns_id(proc.nspace.as_str())
            .ok_or_else(|| Error::UnknownNspace(proc.nspace.clone()))?;
        let size = self.nspaces.get(&ns).map_or(0, |n| n.size);
        if !proc.rank.is_valid() || proc.rank.0 >= size {
            return Err(Error::BadParam(format!(
                "rank {} is not in {} (size {size})",
                proc.rank, proc.nspace
            )));
        }
        self.gone.remove(&(ns, proc.rank));
        self.clients.insert(
            (ns, proc.rank),
            ClientReg {
                uid,
                gid,
                proofs,
                conn: None,
                claimed: None,
                finalized: false,
            },
        );
        Ok(())
    }

    /// `deregister_client`.
    pub(crate) fn deregister_client(&mut self, proc: &Proc, now: Instant) {
        let Some(ns) = self.ns_id(proc.nspace.as_str()) else {
            return;
        };
        if let Some(reg) = self.clients.remove(&(ns, proc.rank)) {
            if let Some(conn) = reg.conn {
                self.handle_closed(conn, now);
                self.out.push_back(Output::Close { conn });
            }
        }
    }

    /// The job data of a namespace, as its clients receive it (derived on first need).
    pub(crate) fn job_data(&self, nspace: &str) -> Option<Arc<JobData>> {
        let ns = self.ns_id(nspace)?;
        self.nspaces.get(&ns).map(|n| n.job.get().clone())
    }

    /// A job-level value of a namespace (what a get with rank `WILDCARD` would find at job
    /// level), read without deriving the namespace's node and process data.
    pub(crate) fn job_value(&self, nspace: &str, key: &str) -> Option<&Value> {
        let ns = self.ns_id(nspace)?;
        self.nspaces.get(&ns)?.job.job_value(key)
    }

    /// True when `proc` is a registered client of this server.
    pub(crate) fn is_registered(&self, proc: &Proc) -> bool {
        self.ns_id(proc.nspace.as_str())
            .is_some_and(|ns| self.clients.contains_key(&(ns, proc.rank)))
    }

    /// What may claim a registered client (for `setup_fork`: its secret, and whether to name
    /// the OpenPMIx port).
    pub(crate) fn client_proofs(&self, proc: &Proc) -> Option<Proofs> {
        let ns = self.ns_id(proc.nspace.as_str())?;
        self.clients.get(&(ns, proc.rank)).map(|c| c.proofs)
    }

    /// A host asks for the data of a local process on behalf of another node.
    pub(crate) fn dmodex_request(&mut self, proc: &Proc, token: u64, now: Instant) {
        let Some(ns) = self.ns_id(proc.nspace.as_str()) else {
            self.out.push_back(Output::Dmodex {
                token,
                result: Err(Status::ERR_NOT_FOUND),
            });
            return;
        };
        let target = (ns, proc.rank);
        if self.committed.contains_key(&target) {
            let result = self.remote_blob(target);
            self.out.push_back(Output::Dmodex { token, result });
        } else {
            self.park_get(target, Requester::Host { token }, None, None, now);
        }
    }

    /// The data of a local process that other nodes may see, encoded for the host.
    fn remote_blob(&self, (ns, rank): (NsId, Rank)) -> Result<Vec<u8>, Status> {
        let Some(name) = self.nspaces.get(&ns).map(|n| n.name.clone()) else {
            return Err(Status::ERR_NOT_FOUND);
        };
        let kvs = self.store.proc_kvs(ns, rank, |s| visible(s, false));
        let mut out = Vec::new();
        pmix_wire::encode_frame(
            &vec![ProcKvs {
                proc: Proc::new(name, rank),
                kvs,
            }],
            &mut out,
        )
        .map_err(|e| e.status())?;
        Ok(out)
    }

    // ---- connections ----------------------------------------------------------------------

    /// A client completed its front-end's handshake, names itself `proc` and proved it as
    /// `auth` says.
    pub(crate) fn handle_hello(&mut self, conn: ConnId, proc: &Proc, auth: Auth) {
        let (nspace, rank) = (&proc.nspace, proc.rank);
        let claim = auth.claim();
        let (secret, creds) = match auth {
            Auth::Secret { secret, creds } => (Some(secret), creds),
            Auth::Vouched { creds } => (None, creds),
            Auth::Uid { creds } => (None, Some(creds)),
        };
        let refuse = |eng: &mut Engine, status: Status, reason: String| {
            if status == Status::ERR_NOT_FOUND {
                // Routine when a process's hello is read after its job was let go (it was
                // killed with the rest of the job): the client is told why, the log is not.
                tracing::info!(conn, %nspace, %rank, ?status, "refusing client: {reason}");
            } else {
                tracing::warn!(conn, %nspace, %rank, ?status, "refusing client: {reason}");
            }
            eng.out.push_back(Output::Refuse {
                conn,
                status,
                reason,
            });
        };
        let Some(ns) = self.ns_id(nspace.as_str()) else {
            return refuse(
                self,
                Status::ERR_NOT_FOUND,
                format!("namespace {nspace} is not registered"),
            );
        };
        let Some(reg) = self.clients.get(&(ns, rank)) else {
            return refuse(
                self,
                Status::ERR_NOT_FOUND,
                format!("process {nspace}:{rank} is not registered"),
            );
        };
        if let Some(c) = creds {
            if c.uid != reg.uid || c.gid != reg.gid {
                let reason = format!(
                    "peer credentials uid {} gid {} differ from the registered uid {} gid {}",
                    c.uid, c.gid, reg.uid, reg.gid
                );
                return refuse(self, Status::ERR_NO_PERMISSIONS, reason);
            }
        }
        if secret.is_some_and(|s| !constant_time_eq(&s, &reg.proofs.secret)) {
            return refuse(
                self,
                Status::ERR_INVALID_CRED,
                format!("wrong secret for {nspace}:{rank}"),
            );
        }
        if claim == Claim::Uid && !reg.proofs.by_uid {
            let reason = format!(
                "{nspace}:{rank} was set up as a pmix-rs or PMI-1 client: its name is not \
                 claimed by uid alone (the OpenPMIx port), only with what its launcher gave it"
            );
            return refuse(self, Status::ERR_NO_PERMISSIONS, reason);
        }
        if claim == Claim::Uid && reg.claimed.is_some_and(|c| c != Claim::Uid) {
            let reason = format!(
                "{nspace}:{rank} was claimed {} before: it is not claimed by uid alone now",
                reg.claimed.map_or(String::new(), |c| c.to_string())
            );
            return refuse(self, Status::ERR_NO_PERMISSIONS, reason);
        }
        if reg.conn.is_some() {
            let how = reg.claimed.map_or(String::new(), |c| format!(" ({c})"));
            return refuse(
                self,
                Status::ERR_EXISTS,
                format!("{nspace}:{rank} is already connected{how}"),
            );
        }
        if reg.finalized {
            return refuse(
                self,
                Status::ERR_EXISTS,
                format!("{nspace}:{rank} has already finalized"),
            );
        }
        if let Some(reg) = self.clients.get_mut(&(ns, rank)) {
            reg.conn = Some(conn);
            reg.claimed = Some(claim);
        }
        let proc = proc.clone();
        self.conns.insert(
            conn,
            Conn {
                proc: proc.clone(),
                ns,
                state: ConnState::Connecting,
                has_jobs: HashSet::from([ns]),
                events: EventReg::default(),
                collected: HashMap::new(),
            },
        );
        self.host_call(
            PendingHost::Connect { conn },
            HostCall::ClientConnected { proc },
        );
    }

    /// A connection went away (closed, reset, or closed by us).
    pub(crate) fn handle_closed(&mut self, conn: ConnId, _now: Instant) {
        let Some(c) = self.conns.remove(&conn) else {
            return;
        };
        let key = (c.ns, c.proc.rank);
        let finalized = matches!(c.state, ConnState::Finalizing);
        if let Some(reg) = self.clients.get_mut(&key) {
            reg.conn = None;
            reg.finalized |= finalized;
        }
        // Requests of this client that wait for others are dropped; nobody will read the answer.
        self.names.end_proc(SESSION, &c.proc);
        self.names.forget_waiters(|(c2, _)| *c2 == conn);
        for list in self.gets.values_mut() {
            list.retain(|g| !matches!(g.who, Requester::Client { conn: c2, .. } if c2 == conn));
        }
        self.fences.forget_conn(conn);
        let term_wo_sync = Status::ERR_PROC_TERM_WO_SYNC;
        self.gone.insert(
            key,
            if finalized {
                Status::ERR_NOT_FOUND
            } else {
                term_wo_sync
            },
        );
        if finalized {
            // A finalized process will enter no more fences.
            let gone = c.proc.clone();
            self.fail_fences_pending_on(&gone, Status::ERR_NOT_FOUND);
            if !self.committed.contains_key(&key) {
                self.fail_gets(key, Status::ERR_NOT_FOUND);
            }
        } else {
            tracing::info!(proc = %c.proc, "client connection lost before finalize");
            // Nobody may hang on a process that is gone: fail what waits for it.
            if !self.committed.contains_key(&key) {
                self.fail_gets(key, term_wo_sync);
            }
            let gone = c.proc.clone();
            self.fail_fences_pending_on(&gone, term_wo_sync);
            self.announce_gone(c.ns, &gone, term_wo_sync);
        }
    }

    /// Tells the job of `gone`, and the jobs connected to it, that it ended with `status`.
    fn announce_gone(&mut self, ns: NsId, gone: &Proc, status: Status) {
        let text = if status == Status::ERR_LOST_CONNECTION {
            format!("{gone} was lost with its node")
        } else {
            format!("{gone} ended without calling finalize")
        };
        let event = Event {
            code: status,
            source: self.me.clone(),
            range: DataRange::NAMESPACE,
            info: vec![
                Info::attr(attr::EVENT_AFFECTED_PROC, gone.clone()),
                Info::attr(attr::EVENT_TEXT_MESSAGE, text),
            ],
        };
        self.deliver(&event, |eng, other| {
            other.ns == ns || eng.connected.contains(&(ns, other.ns))
        });
    }

    /// A process of another node ended (the host learned it from that node): fail what
    /// waits for it here, now and later, as if it were a local client gone. `status` is what
    /// they fail with (`ERR_PROC_TERM_WO_SYNC` for an end without finalize, or
    /// `ERR_LOST_CONNECTION` when its node is lost). Unlike a local end, fences waiting on
    /// other nodes for it fail too: its node will never contribute.
    pub(crate) fn proc_ended_elsewhere(&mut self, proc: &Proc, status: Status) {
        let Some(ns) = self.ns_id(proc.nspace.as_str()) else {
            return;
        };
        let key = (ns, proc.rank);
        if self.gone.contains_key(&key) {
            return;
        }
        self.gone.insert(key, status);
        if !self.committed.contains_key(&key) {
            self.fail_gets(key, status);
        }
        let involved = self.fences.matching(|op: &FenceOp| {
            op.participants.iter().any(|p| {
                p.nspace == proc.nspace && (p.rank == proc.rank || p.rank == Rank::WILDCARD)
            })
        });
        for seq in involved {
            self.fail_fence(seq, status);
        }
        self.announce_gone(ns, proc, status);
    }

    /// A request from an authenticated client.
    pub(crate) fn handle_request(&mut self, conn: ConnId, id: u32, req: Request, now: Instant) {
        let Some(c) = self.conns.get(&conn) else {
            return;
        };
        if !matches!(c.state, ConnState::Active) {
            return self.reply_status(conn, id, Status::ERR_INIT);
        }
        let me = c.proc.clone();
        let my_ns = c.ns;
        match req {
            Request::Commit { kvs } => self.commit(conn, id, my_ns, me.rank, kvs),
            Request::Get { proc, key, info } => self.get(conn, id, &proc, key, &info, now),
            Request::Fence { procs, info } => {
                self.collective(Kind::Fence, conn, id, &me, procs, &info, now);
            }
            Request::Connect { procs, info } => {
                if procs.is_empty() {
                    return self.reply_status(conn, id, Status::ERR_BAD_PARAM);
                }
                self.collective(Kind::Connect, conn, id, &me, procs, &info, now);
            }
            Request::Disconnect { procs, info } => {
                if procs.is_empty() {
                    return self.reply_status(conn, id, Status::ERR_BAD_PARAM);
                }
                self.collective(Kind::Disconnect, conn, id, &me, procs, &info, now);
            }
            Request::Spawn { job_info, apps } => {
                if apps.is_empty() || apps.iter().any(|a| a.maxprocs == 0 || a.cmd.is_empty()) {
                    return self.reply_status(conn, id, Status::ERR_BAD_PARAM);
                }
                self.host_call(
                    PendingHost::Spawn { conn, id },
                    HostCall::Spawn {
                        proc: me,
                        job_info,
                        apps,
                    },
                );
            }
            Request::RegisterEvents { codes, .. } => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.events.add(&codes);
                }
                self.reply_status(conn, id, Status::SUCCESS);
            }
            Request::DeregisterEvents { codes } => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.events.remove(&codes);
                }
                self.reply_status(conn, id, Status::SUCCESS);
            }
            Request::Notify { mut event } => {
                // The source is who sends it, whatever the message claims.
                event.source = me;
                if event.range == DataRange::RM {
                    return self.host_call(
                        PendingHost::Status { conn, id },
                        HostCall::NotifyEvent { event },
                    );
                }
                self.notify(&event, Some(conn));
                if reaches_other_nodes(event.range) {
                    // Other nodes' processes are the host's to reach; the notifier does not
                    // wait for them (nor learn whether the host could).
                    self.host_call(PendingHost::Nothing, HostCall::NotifyEvent { event });
                }
                self.reply_status(conn, id, Status::SUCCESS);
            }
            Request::Abort {
                status,
                message,
                procs,
            } => {
                self.host_call(
                    PendingHost::Abort { conn, id },
                    HostCall::Abort {
                        proc: me,
                        status,
                        message,
                        procs,
                    },
                );
            }
            Request::Finalize { .. } => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.state = ConnState::Finalizing;
                }
                self.host_call(
                    PendingHost::Finalize { conn, id },
                    HostCall::ClientFinalized { proc: me },
                );
            }
            Request::Publish { data, info } => self.publish(conn, id, me, data, info),
            Request::Lookup { keys, info } => self.lookup(conn, id, me, keys, info, now),
            Request::Unpublish { keys, info } => self.unpublish(conn, id, me, keys, info),
            Request::Query { queries } => {
                if queries.is_empty() || queries.iter().any(|q| q.keys.is_empty()) {
                    return self.reply_status(conn, id, Status::ERR_BAD_PARAM);
                }
                // Nothing is answered here yet: every query goes to the host.
                self.host_call(
                    PendingHost::Query { conn, id },
                    HostCall::Query { proc: me, queries },
                );
            }
            _ => self.reply_status(conn, id, Status::ERR_NOT_SUPPORTED),
        }
    }

    // ---- publish / lookup / unpublish -----------------------------------------------------

    /// The name-service identity of a client: the uid and gid it was registered with.
    fn caller(&self, conn: ConnId, proc: Proc) -> Option<Caller> {
        let c = self.conns.get(&conn)?;
        let reg = self.clients.get(&(c.ns, proc.rank))?;
        Some(Caller {
            proc,
            uid: reg.uid,
            gid: reg.gid,
            session: SESSION,
        })
    }

    /// The directives passed to a host, with the caller's credentials added as the standard
    /// requires (replacing any the client claimed).
    fn with_creds(caller: &Caller, mut info: Vec<Info>) -> Vec<Info> {
        info.retain(|i| !matches!(i.key.as_str(), attr::USERID | attr::GRPID));
        info.push(Info::attr(attr::USERID, caller.uid));
        info.push(Info::attr(attr::GRPID, caller.gid));
        info
    }

    fn publish(&mut self, conn: ConnId, id: u32, me: Proc, data: Vec<Info>, info: Vec<Info>) {
        let Some(caller) = self.caller(conn, me) else {
            return;
        };
        match self.name_service {
            NameService::Host => {
                let info = Self::with_creds(&caller, info);
                self.host_call(
                    PendingHost::Status { conn, id },
                    HostCall::Publish {
                        proc: caller.proc,
                        data,
                        info,
                    },
                );
            }
            NameService::BuiltIn => match self.names.publish(&caller, data, &info) {
                Ok(answers) => {
                    self.reply_status(conn, id, Status::SUCCESS);
                    self.answer_lookups(answers);
                }
                Err(status) => self.reply_status(conn, id, status),
            },
        }
    }

    fn lookup(
        &mut self,
        conn: ConnId,
        id: u32,
        me: Proc,
        keys: Vec<Key>,
        info: Vec<Info>,
        now: Instant,
    ) {
        let Some(caller) = self.caller(conn, me) else {
            return;
        };
        match self.name_service {
            NameService::Host => {
                if keys.is_empty() {
                    return self.reply_status(conn, id, Status::ERR_BAD_PARAM);
                }
                let info = Self::with_creds(&caller, info);
                self.host_call(
                    PendingHost::Lookup { conn, id },
                    HostCall::Lookup {
                        proc: caller.proc,
                        keys,
                        info,
                    },
                );
            }
            NameService::BuiltIn => {
                match self.names.lookup(&caller, keys, &info, (conn, id), now) {
                    LookupOutcome::Done(result) => self.reply_lookup(conn, id, result),
                    LookupOutcome::Waiting => {}
                }
            }
        }
    }

    fn unpublish(&mut self, conn: ConnId, id: u32, me: Proc, keys: Vec<Key>, info: Vec<Info>) {
        let Some(caller) = self.caller(conn, me) else {
            return;
        };
        match self.name_service {
            NameService::Host => {
                let info = Self::with_creds(&caller, info);
                self.host_call(
                    PendingHost::Status { conn, id },
                    HostCall::Unpublish {
                        proc: caller.proc,
                        keys,
                        info,
                    },
                );
            }
            NameService::BuiltIn => {
                let status = match self.names.unpublish(&caller, &keys, &info) {
                    Ok(()) => Status::SUCCESS,
                    Err(s) => s,
                };
                self.reply_status(conn, id, status);
            }
        }
    }

    fn reply_lookup(&mut self, conn: ConnId, id: u32, result: Result<Vec<Published>, Status>) {
        let reply = match result {
            // Found nothing is not found, however the answer was reached.
            Ok(found) if found.is_empty() => Reply::status(Status::ERR_NOT_FOUND),
            Ok(found) => Reply {
                status: Status::SUCCESS,
                body: ReplyBody::Lookup { found },
            },
            Err(status) => Reply::status(status),
        };
        self.reply(conn, id, reply);
    }

    fn answer_lookups(&mut self, answers: names::Answers<(ConnId, u32)>) {
        for ((conn, id), result) in answers {
            self.reply_lookup(conn, id, result);
        }
    }

    fn commit(&mut self, conn: ConnId, id: u32, ns: NsId, rank: Rank, kvs: Vec<Kv>) {
        if let Some(bad) = kvs.iter().find(|kv| kv.key.is_reserved()) {
            tracing::warn!(conn, key = %bad.key, "refusing a commit with a reserved key");
            return self.reply_status(conn, id, Status::ERR_BAD_PARAM);
        }
        for kv in kvs {
            if kv.scope != Scope::INTERNAL {
                self.store.put(ns, rank, kv.key, kv.scope, kv.value);
            }
        }
        self.commit_seq += 1;
        self.committed.insert((ns, rank), self.commit_seq);
        self.reply_status(conn, id, Status::SUCCESS);
        self.release_gets((ns, rank));
    }

    // ---- get ------------------------------------------------------------------------------

    fn get(
        &mut self,
        conn: ConnId,
        id: u32,
        target: &Proc,
        key: Option<Key>,
        info: &[Info],
        now: Instant,
    ) {
        let Some(ns) = self.ns_id(target.nspace.as_str()) else {
            return self.reply_status(conn, id, Status::ERR_NOT_FOUND);
        };
        let Some(nsinfo) = self.nspaces.get(&ns) else {
            return self.reply_status(conn, id, Status::ERR_NOT_FOUND);
        };
        if target.rank == Rank::UNDEF {
            if let Some(k) = &key {
                let job_level = nsinfo.job.job.iter().chain(&nsinfo.job.session);
                if !job_level.clone().any(|i| i.key == *k) {
                    // A key posted by any process of the namespace: the first that stored it
                    // answers. Nothing is waited for: there is no process to wait for.
                    return match self.store.owner(ns, k.as_str()) {
                        Some(rank) => {
                            self.answer_get(Requester::Client { conn, id }, (ns, rank), Some(k))
                        }
                        None => self.reply_status(conn, id, Status::ERR_NOT_FOUND),
                    };
                }
            }
        }
        if !target.rank.is_valid() {
            // Job-level data: the client asks only for namespaces it lacks (RFC0009).
            let job = (*nsinfo.job).clone();
            let found = key
                .as_ref()
                .is_none_or(|k| job.job.iter().chain(&job.session).any(|i| i.key == *k));
            if let Some(c) = self.conns.get_mut(&conn) {
                c.has_jobs.insert(ns);
            }
            let status = found_status(found);
            return self.reply(
                conn,
                id,
                Reply {
                    status,
                    body: ReplyBody::Get {
                        data: vec![],
                        jobs: vec![job],
                    },
                },
            );
        }
        if target.rank.0 >= nsinfo.size {
            return self.reply_status(conn, id, Status::ERR_NOT_FOUND);
        }
        // A reserved key of a process (its node, its local rank...) is job data, which this
        // server holds for every process of the job: never waited for, never asked of the
        // process's node (libpmix clients ask for those of processes on other nodes).
        if let Some(k) = key.as_ref().filter(|k| k.is_reserved()) {
            let own = nsinfo
                .job
                .procs
                .iter()
                .find(|p| p.rank == target.rank)
                .and_then(|p| p.info.iter().find(|i| i.key == *k));
            if let Some(found) = own {
                let kv = Kv {
                    scope: Scope::GLOBAL,
                    key: k.clone(),
                    value: found.value.clone(),
                };
                let data = vec![ProcKvs {
                    proc: target.clone(),
                    kvs: vec![kv],
                }];
                let body = ReplyBody::Get {
                    data,
                    jobs: Vec::new(),
                };
                return self.reply(
                    conn,
                    id,
                    Reply {
                        status: Status::SUCCESS,
                        body,
                    },
                );
            }
        }
        let t = (ns, target.rank);
        let local = nsinfo.is_local(target.rank);
        if self.committed.contains_key(&t) {
            return self.answer_get(Requester::Client { conn, id }, t, key.as_ref());
        }
        if let Some(&status) = self.gone.get(&t) {
            return self.reply_status(conn, id, status);
        }
        let immediate = info_flag(info, attr::IMMEDIATE);
        if immediate {
            return self.reply_status(conn, id, Status::ERR_NOT_FOUND);
        }
        let deadline = info_timeout(info).map(|d| now + d);
        self.park_get(t, Requester::Client { conn, id }, key, deadline, now);
        if !local && self.dmodex_inflight.insert(t) {
            let proc = target.clone();
            self.host_call(
                PendingHost::Dmodex { target: t },
                HostCall::DirectModex {
                    proc,
                    info: info.to_vec(),
                },
            );
        }
    }

    fn park_get(
        &mut self,
        target: (NsId, Rank),
        who: Requester,
        key: Option<Key>,
        deadline: Option<Instant>,
        _now: Instant,
    ) {
        let timer = self.next_timer;
        self.next_timer += 1;
        if let Some(d) = deadline {
            self.timers.insert((d, timer), Timer::Get { target, timer });
        }
        self.gets.entry(target).or_default().push(PendingGet {
            who,
            key,
            deadline,
            timer,
        });
    }

    /// Answers one Get for a process whose data is here.
    fn answer_get(&mut self, who: Requester, (ns, rank): (NsId, Rank), key: Option<&Key>) {
        match who {
            Requester::Host { token } => {
                let result = self.remote_blob((ns, rank));
                self.out.push_back(Output::Dmodex { token, result });
            }
            Requester::Client { conn, id } => {
                let Some(c) = self.conns.get(&conn) else {
                    return;
                };
                let requester_rank = c.proc.rank;
                let requester_ns = c.ns;
                let ship_job = !c.has_jobs.contains(&ns);
                let Some(nsinfo) = self.nspaces.get(&ns) else {
                    return self.reply_status(conn, id, Status::ERR_NOT_FOUND);
                };
                let owner_local = nsinfo.is_local(rank);
                let is_self = requester_ns == ns && requester_rank == rank;
                let kvs = self
                    .store
                    .proc_kvs(ns, rank, |s| is_self || visible(s, owner_local));
                let found = key.is_none_or(|k| kvs.iter().any(|kv| kv.key == *k));
                let jobs = if ship_job {
                    vec![(*nsinfo.job).clone()]
                } else {
                    Vec::new()
                };
                let proc = Proc::new(nsinfo.name.clone(), rank);
                if ship_job {
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.has_jobs.insert(ns);
                    }
                }
                let status = found_status(found);
                let body = ReplyBody::Get {
                    data: vec![ProcKvs { proc, kvs }],
                    jobs,
                };
                self.reply(conn, id, Reply { status, body });
            }
        }
    }

    /// The target committed: answer everyone waiting for it.
    fn release_gets(&mut self, target: (NsId, Rank)) {
        let Some(list) = self.gets.remove(&target) else {
            return;
        };
        for g in list {
            if let Some(d) = g.deadline {
                self.timers.remove(&(d, g.timer));
            }
            self.answer_get(g.who, target, g.key.as_ref());
        }
    }

    fn fail_gets(&mut self, target: (NsId, Rank), status: Status) {
        let Some(list) = self.gets.remove(&target) else {
            return;
        };
        for g in list {
            if let Some(d) = g.deadline {
                self.timers.remove(&(d, g.timer));
            }
            self.fail_requester(g.who, status);
        }
    }

    fn fail_requester(&mut self, who: Requester, status: Status) {
        match who {
            Requester::Client { conn, id } => self.reply_status(conn, id, status),
            Requester::Host { token } => self.out.push_back(Output::Dmodex {
                token,
                result: Err(status),
            }),
        }
    }

    // ---- fence ----------------------------------------------------------------------------

    #[allow(clippy::too_many_arguments)]
    fn collective(
        &mut self,
        kind: Kind,
        conn: ConnId,
        id: u32,
        me: &Proc,
        procs: Vec<Proc>,
        info: &[Info],
        now: Instant,
    ) {
        let mut participants = if procs.is_empty() {
            vec![Proc::new(me.nspace.clone(), Rank::WILDCARD)]
        } else {
            procs
        };
        participants.sort();
        participants.dedup();
        // Expand into the local participants, and notice participants elsewhere.
        let mut local = Vec::new();
        let mut remote = false;
        let mut includes_me = false;
        for p in &participants {
            let Some(ns) = self.ns_id(p.nspace.as_str()) else {
                return self.reply_status(conn, id, Status::ERR_BAD_PARAM);
            };
            let Some(nsinfo) = self.nspaces.get(&ns) else {
                return self.reply_status(conn, id, Status::ERR_BAD_PARAM);
            };
            if p.rank == Rank::WILDCARD {
                local.extend(nsinfo.local.iter().map(|r| (ns, *r)));
                remote |= nsinfo.local.len() < nsinfo.size as usize;
                includes_me |= p.nspace == me.nspace;
            } else if p.rank.is_valid() && p.rank.0 < nsinfo.size {
                if nsinfo.is_local(p.rank) {
                    local.push((ns, p.rank));
                } else {
                    remote = true;
                }
                includes_me |= *p == *me;
            } else {
                return self.reply_status(conn, id, Status::ERR_BAD_PARAM);
            }
        }
        if !includes_me {
            return self.reply_status(conn, id, Status::ERR_BAD_PARAM);
        }
        local.sort_unstable();
        local.dedup();
        let Some(my_ns) = self.conns.get(&conn).map(|c| c.ns) else {
            return;
        };
        let collect = kind == Kind::Connect || info_flag(info, attr::COLLECT_DATA);
        let deadline = info_timeout(info).map(|d| now + d);
        let seq = self.fences.join(
            kind,
            participants,
            local,
            remote,
            info,
            (my_ns, me.rank),
            conn,
            id,
            collect,
        );
        if let Some(d) = deadline {
            let timer = self.next_timer;
            self.next_timer += 1;
            self.timers.insert((d, timer), Timer::Fence { seq });
        }
        // A participant that already left will never arrive. The first such in participant
        // order decides the status; looked for from the smaller side, since this runs at every
        // arrival (usually nobody has left, and then it costs nothing).
        let departed = self.fences.get(seq).and_then(|op| {
            if self.gone.len() < op.local.len() {
                self.gone
                    .iter()
                    .filter(|(p, _)| op.waits_for(**p))
                    .min_by_key(|(p, _)| op.local.binary_search(p).ok())
                    .map(|(_, status)| *status)
            } else {
                op.local
                    .iter()
                    .filter(|p| op.waits_for(**p))
                    .find_map(|p| self.gone.get(p))
                    .copied()
            }
        });
        if let Some(status) = departed.or_else(|| self.remote_departed(seq)) {
            return self.fail_fence(seq, status);
        }
        self.try_finish_fence(seq);
    }

    /// The status of a participant of another node that is known to have ended
    /// ([`Engine::proc_ended_elsewhere`]), if any.
    fn remote_departed(&self, seq: u64) -> Option<Status> {
        let op = self.fences.get(seq)?;
        if !op.remote || self.gone.is_empty() {
            return None;
        }
        op.participants.iter().find_map(|p| {
            let ns = self.ns_id(p.nspace.as_str())?;
            let local = self.nspaces.get(&ns)?;
            if p.rank == Rank::WILDCARD {
                self.gone
                    .iter()
                    .find(|((n, r), _)| *n == ns && !local.is_local(*r))
                    .map(|(_, s)| *s)
            } else if local.is_local(p.rank) {
                None
            } else {
                self.gone.get(&(ns, p.rank)).copied()
            }
        })
    }

    fn try_finish_fence(&mut self, seq: u64) {
        let Some(op) = self.fences.get(seq) else {
            return;
        };
        if !op.all_local_arrived() || op.at_host {
            return;
        }
        if op.remote && op.kind == Kind::Disconnect {
            // Participants elsewhere: the host disconnects the nodes.
            let procs = op.participants.clone();
            let info = op.info.clone();
            if let Some(op) = self.fences.get_mut(seq) {
                op.at_host = true;
            }
            self.host_call(
                PendingHost::Collective { seq },
                HostCall::Disconnect { procs, info },
            );
        } else if op.remote {
            // This node's contribution: the data other nodes may see of the local
            // participants that committed, for a collecting fence as for a connect (whose
            // participants see each other's data after). A fence that collects nothing
            // carries what was committed since it was last sent: PMI-1's barrier is one, and
            // its gets look for a key in whatever this node holds. One that never committed
            // is left out: it must not look as if it had, or a get elsewhere would not wait
            // for its commit.
            let collect = op.kind == Kind::Connect || op.waiters.iter().any(|w| w.collect);
            let senders: Vec<((NsId, Rank), u64)> = op
                .local
                .iter()
                .filter_map(|p| Some((*p, *self.committed.get(p)?)))
                .filter(|(p, seq)| collect || self.shipped.get(p) != Some(seq))
                .collect();
            let mut contrib = Vec::new();
            for ((ns, rank), seq) in senders {
                self.shipped.insert((ns, rank), seq);
                if let Some(nsinfo) = self.nspaces.get(&ns) {
                    let kvs = self.store.proc_kvs(ns, rank, |s| visible(s, false));
                    contrib.push(ProcKvs {
                        proc: Proc::new(nsinfo.name.clone(), rank),
                        kvs,
                    });
                }
            }
            let mut data = Vec::new();
            if let Err(e) = pmix_wire::encode_frame(&contrib, &mut data) {
                return self.finish_fence(seq, Err(e.status()));
            }
            let procs = op.participants.clone();
            let info = op.info.clone();
            let call = if op.kind == Kind::Connect {
                HostCall::Connect { procs, info, data }
            } else {
                HostCall::FenceNb { procs, info, data }
            };
            if let Some(op) = self.fences.get_mut(seq) {
                op.at_host = true;
            }
            self.host_call(PendingHost::Fence { seq }, call);
        } else {
            self.finish_fence(seq, Ok(Vec::new()));
        }
    }

    /// Completes a fence: `remote` holds the other nodes' data, already decoded.
    fn finish_fence(&mut self, seq: u64, remote: Result<Vec<ProcKvs>, Status>) {
        let Some(op) = self.fences.remove(seq) else {
            return;
        };
        self.timers.retain(|_, t| *t != Timer::Fence { seq });
        let remote = match remote {
            // The host hands back every node's contribution, ours included; ours is better
            // taken from the store, where LOCAL-scope data is too.
            Ok(mut r) => {
                r.retain(|pk| {
                    let ours = self
                        .ns_id(pk.proc.nspace.as_str())
                        .is_some_and(|ns| op.local.binary_search(&(ns, pk.proc.rank)).is_ok());
                    !ours
                });
                r
            }
            Err(status) => {
                for w in op.waiters {
                    self.reply_status(w.conn, w.id, status);
                }
                return;
            }
        };
        // Other nodes' data is stored so that later gets are served here.
        let arrived = self.store_remote(&remote);
        match op.kind {
            Kind::Fence => {}
            Kind::Connect => {
                self.finish_connect(&op, remote);
                for t in arrived {
                    self.release_gets(t);
                }
                return;
            }
            Kind::Disconnect => {
                let nss: Vec<NsId> = Self::participant_nspaces(&op)
                    .iter()
                    .filter_map(|n| self.ns_id(n.as_str()))
                    .collect();
                for a in &nss {
                    for b in &nss {
                        self.connected.remove(&(*a, *b));
                    }
                }
                for w in &op.waiters {
                    self.reply_status(w.conn, w.id, Status::SUCCESS);
                }
                return;
            }
        }
        // Each collector gets what was committed since its last collecting fence over the same
        // list (everything, the first time). Collectors in step with each other, the usual case,
        // share one reply: built, and encoded, once.
        let (collectors, others): (Vec<_>, Vec<_>) = op.waiters.iter().partition(|w| w.collect);
        if !collectors.is_empty() {
            let next = u32::try_from(self.participant_ids.len()).unwrap_or(u32::MAX);
            let participants_id = *self
                .participant_ids
                .entry(op.participants.clone())
                .or_insert(next);
            let now = self.commit_seq;
            let mut by_mark: BTreeMap<u64, Vec<(ConnId, u32)>> = BTreeMap::new();
            for w in &collectors {
                let Some(c) = self.conns.get_mut(&w.conn) else {
                    continue;
                };
                let mark = c.collected.insert(participants_id, now).unwrap_or(0);
                by_mark.entry(mark).or_default().push((w.conn, w.id));
            }
            for (mark, to) in by_mark {
                let mut data = Vec::with_capacity(op.local.len() + remote.len());
                for &(ns, rank) in &op.local {
                    if self
                        .committed
                        .get(&(ns, rank))
                        .is_some_and(|seq| *seq <= mark)
                    {
                        continue;
                    }
                    if let Some(nsinfo) = self.nspaces.get(&ns) {
                        // Local participants share the node with the reader.
                        let kvs = self.store.proc_kvs(ns, rank, |s| visible(s, true));
                        data.push(ProcKvs {
                            proc: Proc::new(nsinfo.name.clone(), rank),
                            kvs,
                        });
                    }
                }
                data.extend(remote.iter().cloned());
                let reply = Arc::new(Reply {
                    status: Status::SUCCESS,
                    body: ReplyBody::Fence { data },
                });
                self.out.push_back(Output::SharedReply { to, reply });
            }
        }
        for w in others {
            self.reply_status(w.conn, w.id, Status::SUCCESS);
        }
        for t in arrived {
            self.release_gets(t);
        }
    }

    /// The namespaces a collective's participant list names.
    fn participant_nspaces(op: &FenceOp) -> Vec<Nspace> {
        let mut v: Vec<Nspace> = op.participants.iter().map(|p| p.nspace.clone()).collect();
        v.sort();
        v.dedup();
        v
    }

    /// Completes a connect: every participant gets the job data of the other namespaces and
    /// the data of every participant, and the namespaces are connected from now on.
    fn finish_connect(&mut self, op: &FenceOp, remote: Vec<ProcKvs>) {
        let nss: Vec<NsId> = Self::participant_nspaces(op)
            .iter()
            .filter_map(|n| self.ns_id(n.as_str()))
            .collect();
        for a in &nss {
            for b in &nss {
                if a != b {
                    self.connected.insert((*a, *b));
                }
            }
        }
        let mut data = Vec::with_capacity(op.local.len() + remote.len());
        for &(ns, rank) in &op.local {
            if let Some(nsinfo) = self.nspaces.get(&ns) {
                let kvs = self.store.proc_kvs(ns, rank, |s| visible(s, true));
                data.push(ProcKvs {
                    proc: Proc::new(nsinfo.name.clone(), rank),
                    kvs,
                });
            }
        }
        data.extend(remote);
        // One reply per namespace of the waiters: each gets the job data of the others.
        let mut by_ns: BTreeMap<NsId, Vec<(ConnId, u32)>> = BTreeMap::new();
        for w in &op.waiters {
            if let Some(c) = self.conns.get(&w.conn) {
                by_ns.entry(c.ns).or_default().push((w.conn, w.id));
            }
        }
        for (own, to) in by_ns {
            let jobs: Vec<JobData> = nss
                .iter()
                .filter(|n| **n != own)
                .filter_map(|n| self.nspaces.get(n))
                .map(|n| (*n.job).clone())
                .collect();
            for (conn, _) in &to {
                if let Some(c) = self.conns.get_mut(conn) {
                    c.has_jobs.extend(nss.iter().copied());
                }
            }
            let reply = Arc::new(Reply {
                status: Status::SUCCESS,
                body: ReplyBody::Connect {
                    jobs,
                    data: data.clone(),
                },
            });
            self.out.push_back(Output::SharedReply { to, reply });
        }
    }

    // ---- events ---------------------------------------------------------------------------

    /// Delivers `event` to every client that registered for its code and that `to` selects.
    fn deliver(&mut self, event: &Event, to: impl Fn(&Engine, &Conn) -> bool) {
        let targets: Vec<ConnId> = self
            .conns
            .iter()
            .filter(|(_, c)| matches!(c.state, ConnState::Active) && c.events.wants(event.code))
            .filter(|(_, c)| to(self, c))
            .map(|(k, _)| *k)
            .collect();
        if targets.is_empty() {
            return;
        }
        let event = Arc::new(event.clone());
        for conn in targets {
            self.out.push_back(Output::Event {
                conn,
                event: event.clone(),
            });
        }
    }

    /// Delivers an event within its range, relative to its source, to everyone but
    /// `except` (the notifier's own connection).
    fn notify(&mut self, event: &Event, except: Option<ConnId>) {
        let source = event.source.clone();
        let custom: Vec<Proc> = event
            .info
            .iter()
            .find(|i| i.key.as_str() == attr::EVENT_CUSTOM_RANGE)
            .map(|i| match &i.value {
                pmix_types::Value::Proc(p) => vec![p.clone()],
                pmix_types::Value::DataArray(a) => a
                    .items()
                    .iter()
                    .filter_map(|v| v.as_proc().cloned())
                    .collect(),
                _ => Vec::new(),
            })
            .unwrap_or_default();
        let range = event.range;
        let skip = except
            .and_then(|c| self.conns.get(&c))
            .map(|c| c.proc.clone());
        self.deliver(event, move |_, c| {
            if skip.as_ref() == Some(&c.proc) {
                return false;
            }
            match range {
                DataRange::PROC_LOCAL => c.proc == source,
                DataRange::NAMESPACE => c.proc.nspace == source.nspace,
                DataRange::CUSTOM => custom.iter().any(|p| {
                    p.nspace == c.proc.nspace && (p.rank == Rank::WILDCARD || p.rank == c.proc.rank)
                }),
                _ => true,
            }
        });
    }

    /// The host raises an event for this server's clients, within its range.
    pub(crate) fn host_notify(&mut self, event: &Event) {
        self.notify(event, None);
    }

    /// Stores data that came from other nodes (through the host) so that later gets are
    /// served here; returns the processes it belonged to.
    fn store_remote(&mut self, data: &[ProcKvs]) -> Vec<(NsId, Rank)> {
        let mut arrived = Vec::with_capacity(data.len());
        for pk in data {
            if let Some(ns) = self.ns_id(pk.proc.nspace.as_str()) {
                for kv in &pk.kvs {
                    self.store
                        .put(ns, pk.proc.rank, kv.key.clone(), kv.scope, kv.value.clone());
                }
                self.commit_seq += 1;
                self.committed.insert((ns, pk.proc.rank), self.commit_seq);
                arrived.push((ns, pk.proc.rank));
            }
        }
        arrived
    }

    fn fail_fences_with(&mut self, pred: impl Fn(&Proc) -> bool, status: Status) {
        for seq in self.fences.matching(|op| op.participants.iter().any(&pred)) {
            self.fail_fence(seq, status);
        }
    }

    fn fail_fences_pending_on(&mut self, gone: &Proc, status: Status) {
        let Some(ns) = self.ns_id(gone.nspace.as_str()) else {
            return;
        };
        let key = (ns, gone.rank);
        for seq in self.fences.matching(|op: &FenceOp| op.waits_for(key)) {
            self.fail_fence(seq, status);
        }
    }

    fn fail_fence(&mut self, seq: u64, status: Status) {
        if let Some(op) = self.fences.remove(seq) {
            self.timers.retain(|_, t| *t != Timer::Fence { seq });
            for w in op.waiters {
                self.reply_status(w.conn, w.id, status);
            }
        }
    }

    // ---- host completions and time --------------------------------------------------------

    /// The host answered callback `op`.
    pub(crate) fn handle_host_done(&mut self, op: OpId, outcome: HostOutcome, _now: Instant) {
        let Some(pending) = self.host_ops.remove(&op) else {
            tracing::warn!(
                op,
                "host completed an unknown or already completed callback"
            );
            return;
        };
        match pending {
            PendingHost::Connect { conn } => {
                let status = status_of(&outcome);
                let Some(c) = self.conns.get_mut(&conn) else {
                    return;
                };
                if status.is_success() {
                    c.state = ConnState::Active;
                    let job = self.nspaces.get(&c.ns).map(|n| n.job.get().clone());
                    match job {
                        Some(job) => self.out.push_back(Output::Accept { conn, job }),
                        None => self.out.push_back(Output::Refuse {
                            conn,
                            status: Status::ERR_NOT_FOUND,
                            reason: "namespace deregistered".into(),
                        }),
                    }
                } else {
                    let proc = c.proc.clone();
                    tracing::warn!(%proc, ?status, "host refused the client");
                    if let Some(reg) = self.clients.get_mut(&(c.ns, proc.rank)) {
                        reg.conn = None;
                    }
                    self.conns.remove(&conn);
                    self.out.push_back(Output::Refuse {
                        conn,
                        status,
                        reason: "refused by the host".into(),
                    });
                }
            }
            PendingHost::Finalize { conn, id } => {
                // Finalize succeeds for the client whatever the host says: it is leaving.
                self.reply_status(conn, id, Status::SUCCESS);
                self.out.push_back(Output::Close { conn });
            }
            PendingHost::Abort { conn, id } | PendingHost::Status { conn, id } => {
                self.reply_status(conn, id, status_of(&outcome));
            }
            PendingHost::Nothing => {}
            PendingHost::Spawn { conn, id } => {
                let reply = match outcome {
                    HostOutcome::Nspace(Ok(nspace)) => success(ReplyBody::Spawn { nspace }),
                    other => Reply::status(failure_of(&other)),
                };
                self.reply(conn, id, reply);
            }
            PendingHost::Query { conn, id } => {
                let reply = match outcome {
                    HostOutcome::Infos(Ok(results)) => success(ReplyBody::Query { results }),
                    other => Reply::status(failure_of(&other)),
                };
                self.reply(conn, id, reply);
            }
            PendingHost::Collective { seq } => {
                let status = status_of(&outcome);
                if status.is_success() {
                    self.finish_fence(seq, Ok(Vec::new()));
                } else {
                    self.fail_fence(seq, status);
                }
            }
            PendingHost::Lookup { conn, id } => {
                let result = match outcome {
                    HostOutcome::Lookup(r) => r,
                    other => Err(failure_of(&other)),
                };
                self.reply_lookup(conn, id, result);
            }
            PendingHost::Fence { seq, .. } => {
                let result = match outcome {
                    HostOutcome::Bytes(Ok(bytes)) => decode_blobs(&bytes),
                    other => Err(match status_of(&other) {
                        s if s.is_success() => Status::ERR_UNPACK_FAILURE,
                        s => s,
                    }),
                };
                self.finish_fence(seq, result);
            }
            PendingHost::Dmodex { target } => {
                self.dmodex_inflight.remove(&target);
                let result = match outcome {
                    HostOutcome::Bytes(Ok(bytes)) => decode_blobs(&bytes),
                    other => Err(status_of(&other)),
                };
                match result {
                    Ok(blobs) => {
                        self.store_remote(&blobs);
                        if self.committed.contains_key(&target) {
                            self.release_gets(target);
                        } else {
                            self.fail_gets(target, Status::ERR_NOT_FOUND);
                        }
                    }
                    Err(status) => self.fail_gets(target, status),
                }
            }
        }
    }

    /// Time passed: fail what has waited too long.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        let expired = self.names.handle_timeout(now);
        self.answer_lookups(expired);
        while let Some((&(t, n), _)) = self.timers.iter().next() {
            if t > now {
                break;
            }
            let Some(timer) = self.timers.remove(&(t, n)) else {
                break;
            };
            match timer {
                Timer::Get { target, timer } => {
                    let Some(list) = self.gets.get_mut(&target) else {
                        continue;
                    };
                    let Some(pos) = list.iter().position(|g| g.timer == timer) else {
                        continue;
                    };
                    let g = list.swap_remove(pos);
                    if list.is_empty() {
                        self.gets.remove(&target);
                    }
                    self.fail_requester(g.who, Status::ERR_TIMEOUT);
                }
                Timer::Fence { seq } => self.fail_fence(seq, Status::ERR_TIMEOUT),
            }
        }
    }
}

/// The status a host answered with.
fn status_of(o: &HostOutcome) -> Status {
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
fn failure_of(o: &HostOutcome) -> Status {
    match status_of(o) {
        s if s.is_success() => Status::ERR_BAD_PARAM,
        s => s,
    }
}

fn success(body: ReplyBody) -> Reply {
    Reply {
        status: Status::SUCCESS,
        body,
    }
}

/// The server's own process, from the job-level values every namespace receives.
fn server_proc(extras: &[Info]) -> Proc {
    let find = |k: &str| {
        extras
            .iter()
            .find(|i| i.key.as_str() == k)
            .map(|i| &i.value)
    };
    let nspace = find(attr::SERVER_NSPACE)
        .and_then(|v| v.as_str())
        .and_then(|s| Nspace::new(s).ok())
        .unwrap_or_else(|| Nspace::new("pmixrs-server").expect("a valid namespace name"));
    let rank = find(attr::SERVER_RANK)
        .and_then(|v| v.as_rank())
        .unwrap_or(Rank(0));
    Proc::new(nspace, rank)
}

/// The status of a Get whose key was or was not among the data.
fn found_status(found: bool) -> Status {
    if found {
        Status::SUCCESS
    } else {
        Status::ERR_NOT_FOUND
    }
}

/// Decodes the concatenated per-node contributions a host returns.
fn decode_blobs(mut bytes: &[u8]) -> Result<Vec<ProcKvs>, Status> {
    let decoder = pmix_wire::FrameDecoder::default();
    let mut all = Vec::new();
    while !bytes.is_empty() {
        match decoder.decode(bytes) {
            Ok(pmix_wire::Decoded::Frame { body, consumed }) => {
                let mut part: Vec<ProcKvs> = pmix_wire::decode_body(body).map_err(|e| {
                    tracing::warn!("undecodable data from the host: {e}");
                    Status::ERR_UNPACK_FAILURE
                })?;
                all.append(&mut part);
                bytes = &bytes[consumed..];
            }
            _ => {
                tracing::warn!("truncated data from the host");
                return Err(Status::ERR_UNPACK_FAILURE);
            }
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests;
