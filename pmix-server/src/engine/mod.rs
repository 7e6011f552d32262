//! The sans-IO server engine: every decision of the server, none of its I/O.
//!
//! The engine is fed events (a client said hello, sent a request, went away; the host completed
//! a callback; time passed) and produces [`Output`]s (send this reply, close that connection,
//! call the host). It owns the store, the registry of namespaces and clients, the collectives in
//! progress and the requests waiting for data. It never touches a socket, a thread or a clock:
//! time comes in as an argument, so tests drive it deterministically with many simulated
//! clients. Protocol front-ends translate their clients' messages into the [`Request`]s it
//! takes.

pub(crate) mod anl_map;
mod attributes;
mod auth;
mod collective;
mod commits;
mod connected;
pub(crate) mod cross_run;
mod debug;
mod event_cache;
mod events;
mod fence;
mod get;
mod group_info;
mod group_membership;
mod groups;
mod host_ops;
mod iof;
pub(crate) mod job_control;
mod log;
pub(crate) mod names;
mod naming;
pub(crate) mod nspace;
mod nspaces;
mod psets;
mod query;
mod sessions;
mod spawn;
mod store;
mod timers;
mod tools;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use pmix_types::{Info, Nspace, Proc, Rank, Status, Value};
use pmix_wire::{Event, JobData, Kv, Reply, ReplyBody, Request};

use self::collective::Collectives;
use self::commits::Commits;
use self::fence::Kind;
use self::get::Gets;
pub(crate) use self::host_ops::{HostCall, HostOutcome, OpId};
use self::host_ops::{HostOps, PendingHost, status_of};
use self::naming::{Naming, SESSION};
use self::nspaces::Nspaces;
use self::sessions::{Admit, ConnState, Refusal, Sessions};
use self::store::{NsId, Store};
use self::timers::{Timer, Timers};
use crate::Error;

pub(crate) use self::auth::{Auth, PeerCreds, Proofs, SECRET_LEN};
use self::groups::Groups;
pub use self::host_ops::GroupOp;
pub use self::names::NameService;
pub(crate) use self::sessions::GetAnswers;
pub(crate) use self::tools::ToolHello;

/// A connection, as the I/O shell numbers them.
pub(crate) type ConnId = usize;

/// What the engine asks the shell to do.
#[derive(Debug)]
pub(crate) enum Output {
    /// The handshake succeeded: send the client its job data.
    Accept {
        conn: ConnId,
        job: Arc<nspace::LazyJob>,
    },
    /// A tool's handshake succeeded: tell it its name and the server's.
    ToolAccept {
        conn: ConnId,
        tool: Proc,
        server: Proc,
    },
    /// Say whether process `pid` or one of its descendants holds the socket `inode` (the
    /// peer's end of `conn`, which claimed a name by uid alone): [`Engine::lineage_checked`].
    CheckLineage { conn: ConnId, pid: u32, inode: u64 },
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
    /// Forward output to a tool that pulled it (dropped if the tool is far behind).
    Iof {
        conn: ConnId,
        chunk: Arc<pmix_wire::IofChunk>,
    },
    /// A namespace ended: remove what its clients registered for cleanup.
    Cleanup { list: Vec<job_control::Cleanup> },
}

/// The server engine.
pub(crate) struct Engine {
    /// The namespaces known here, interned.
    nspaces: Nspaces,
    /// Registered clients, their connections, the processes gone.
    sessions: Sessions,
    store: Store,
    /// Which processes' data is here, how new, and when it last went to other nodes.
    commits: Commits,
    /// Gets waiting for their target's data.
    gets: Gets,
    /// Collectives in progress, and the namespaces connected.
    collectives: Collectives,
    /// Host callbacks in flight, with who waits for each answer.
    host_ops: HostOps,
    timers: Timers,
    /// Who answers publish, lookup and unpublish, and the built-in name service.
    naming: Naming,
    /// Process groups and their context ids.
    groups: Groups,
    /// Process sets the host defined.
    psets: psets::Psets,
    /// Events announcing a state, for late registrations.
    event_cache: event_cache::EventCache,
    /// The tools connected.
    tools: tools::Tools,
    /// Processes held in init for a debugger.
    debug: debug::Debug,
    pulls: iof::Pulls,
    out: VecDeque<Output>,
}

fn info_flag(info: &[Info], key: &str) -> bool {
    info.iter()
        .any(|i| i.key.as_str() == key && i.flag().unwrap_or(false))
}

impl Engine {
    /// An engine for a server on node `hostname`; `job_extras` are job-level values every
    /// namespace receives (tmpdirs, the server's identity).
    pub(crate) fn new(hostname: String, job_extras: Vec<Info>, name_service: NameService) -> Self {
        Engine {
            naming: Naming::new(name_service, &hostname),
            nspaces: Nspaces::new(hostname, job_extras),
            sessions: Sessions::default(),
            store: Store::default(),
            commits: Commits::default(),
            gets: Gets::default(),
            collectives: Collectives::default(),
            host_ops: HostOps::default(),
            timers: Timers::default(),
            groups: Groups::default(),
            psets: psets::Psets::default(),
            event_cache: event_cache::EventCache::default(),
            tools: tools::Tools::default(),
            debug: debug::Debug::default(),
            pulls: iof::Pulls::default(),
            out: VecDeque::new(),
        }
    }

    /// The next thing to do, if any.
    pub(crate) fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// When [`Engine::handle_timeout`] must next be called.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let mine = self.timers.poll_timeout();
        match (mine, self.naming.store.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn ns_id(&self, nspace: &str) -> Option<NsId> {
        self.nspaces.id(nspace)
    }

    fn host_call(&mut self, pending: PendingHost, call: HostCall) {
        let op = self.host_ops.start(pending);
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
        if self
            .nspaces
            .register(nspace.clone(), nlocalprocs, info)?
            .is_some()
        {
            // This server's own session, the only one in its store: never refused. (A
            // namespace of another run, `register_foreign`'s, is of no session here.)
            let _ = self.naming.store.add_nspace(SESSION, &nspace);
        }
        Ok(())
    }

    /// `deregister_nspace`: forgets everything of the namespace and closes its connections.
    pub(crate) fn deregister_nspace(&mut self, nspace: &str) {
        let Some((id, ns)) = self.nspaces.remove(nspace) else {
            return;
        };
        if let Some(ns) = ns {
            // Its APP- and PROC-persistence publications end with it.
            self.naming.store.end_nspace(SESSION, &ns.name);
            self.tools_job_ended(&ns.name);
        }
        for conn in self.sessions.conns_of(id) {
            self.handle_closed(conn);
            self.out.push_back(Output::Close { conn });
        }
        self.sessions.purge_nspace(id);
        self.collectives.connected.forget(id);
        self.commits.purge_nspace(id);
        self.store.purge_nspace(id);
        self.groups.info.purge_nspace(nspace);
        self.run_cleanups(id);
        self.debug.forget(id);
        for target in self.gets.targets_in(id) {
            self.fail_gets(target, Status::ERR_NOT_FOUND);
        }
        self.fail_fences_with(|p| p.nspace.as_str() == nspace, Status::ERR_NOT_FOUND);
        self.sessions.shrink();
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
        self.sessions.register((ns, proc.rank), uid, gid, proofs);
        Ok(())
    }

    /// `deregister_client`.
    pub(crate) fn deregister_client(&mut self, proc: &Proc) {
        let Some(ns) = self.ns_id(proc.nspace.as_str()) else {
            return;
        };
        if let Some(conn) = self.sessions.deregister((ns, proc.rank)) {
            self.handle_closed(conn);
            self.out.push_back(Output::Close { conn });
        }
    }

    /// The job data of a namespace, as its clients receive it (derived on first need).
    pub(crate) fn job_data(&self, nspace: &str) -> Option<Arc<JobData>> {
        self.nspaces.job_data(nspace)
    }

    /// A job-level value of a namespace (what a get with rank `WILDCARD` would find at job
    /// level), read without deriving the namespace's node and process data.
    pub(crate) fn job_value(&self, nspace: &str, key: &str) -> Option<&Value> {
        self.nspaces.job_value(nspace, key)
    }

    /// True when `proc` is a registered client of this server.
    pub(crate) fn is_registered(&self, proc: &Proc) -> bool {
        self.ns_id(proc.nspace.as_str())
            .is_some_and(|ns| self.sessions.is_registered((ns, proc.rank)))
    }

    /// The connections the process `proc` has to this server.
    pub(crate) fn conns_of_proc(&self, proc: &Proc) -> Vec<ConnId> {
        self.sessions.conns_of_proc(proc)
    }

    /// What may claim a registered client (for `setup_fork`: its secret, and whether to name
    /// the OpenPMIx port).
    pub(crate) fn client_proofs(&self, proc: &Proc) -> Option<Proofs> {
        let ns = self.ns_id(proc.nspace.as_str())?;
        self.sessions.proofs((ns, proc.rank))
    }

    // ---- connections ----------------------------------------------------------------------

    /// A client completed its front-end's handshake, names itself `proc` and proved it as
    /// `auth` says.
    pub(crate) fn handle_hello(
        &mut self,
        conn: ConnId,
        proc: &Proc,
        auth: Auth,
        answers: GetAnswers,
    ) {
        let (nspace, rank) = (&proc.nspace, proc.rank);
        let accepted = match self.ns_id(nspace.as_str()) {
            Some(ns) => self.sessions.hello(conn, proc, ns, auth, answers),
            None => Err((
                Status::ERR_NOT_FOUND,
                format!("namespace {nspace} is not registered"),
            )),
        };
        match accepted {
            Ok(Admit::Host) => {
                let proc = proc.clone();
                self.host_call(
                    PendingHost::Connect { conn },
                    HostCall::ClientConnected { proc },
                );
            }
            Ok(Admit::Lineage { pid, inode }) => {
                self.out
                    .push_back(Output::CheckLineage { conn, pid, inode });
            }
            Ok(Admit::Pid) => {
                tracing::debug!(conn, %nspace, %rank, "a claim by uid waits for its process");
            }
            Err(refusal) => self.refuse_hello(conn, proc, refusal),
        }
    }

    /// The host started process `pid` for the registered client `proc` (see
    /// [`Proofs::lineage`]): claims of its name by uid alone are held against it.
    pub(crate) fn client_started(&mut self, proc: &Proc, pid: u32) {
        let Some(ns) = self.ns_id(proc.nspace.as_str()) else {
            return;
        };
        for (conn, inode) in self.sessions.started((ns, proc.rank), pid) {
            self.out
                .push_back(Output::CheckLineage { conn, pid, inode });
        }
    }

    /// The answer to [`Output::CheckLineage`]: whether the process or one of its descendants
    /// holds the socket of `conn` (`None`: the system cannot tell, and the uid stands alone).
    pub(crate) fn lineage_checked(&mut self, conn: ConnId, holds: Option<bool>) {
        let Some((proc, taken)) = self.sessions.proven(conn, holds) else {
            return;
        };
        match taken {
            Ok(()) => self.host_call(
                PendingHost::Connect { conn },
                HostCall::ClientConnected { proc },
            ),
            Err(refusal) => self.refuse_hello(conn, &proc, refusal),
        }
    }

    /// Refuses a client's hello on `conn` (it named itself `proc`).
    fn refuse_hello(&mut self, conn: ConnId, proc: &Proc, (status, reason): Refusal) {
        let (nspace, rank) = (&proc.nspace, proc.rank);
        if status == Status::ERR_NOT_FOUND {
            // Routine when a process's hello is read after its job was let go (it was killed
            // with the rest of the job): the client is told why, the log is not.
            tracing::info!(conn, %nspace, %rank, ?status, "refusing client: {reason}");
        } else {
            tracing::warn!(conn, %nspace, %rank, ?status, "refusing client: {reason}");
        }
        self.out.push_back(Output::Refuse {
            conn,
            status,
            reason,
        });
    }

    /// The host answered a client's `client_connected`: the client is accepted with its job
    /// data, or refused.
    fn client_connected_done(&mut self, conn: ConnId, outcome: &HostOutcome) {
        let status = status_of(outcome);
        let Some(c) = self.sessions.conn_mut(conn) else {
            return;
        };
        if status.is_success() {
            c.state = ConnState::Active;
            let job = self.nspaces.get(&c.ns).map(|n| n.job.clone());
            match job {
                Some(job) => self.out.push_back(Output::Accept { conn, job }),
                None => self.out.push_back(Output::Refuse {
                    conn,
                    status: Status::ERR_NOT_FOUND,
                    reason: "namespace deregistered".into(),
                }),
            }
        } else {
            if let Some(proc) = self.sessions.refused(conn) {
                tracing::warn!(%proc, ?status, "host refused the client");
            }
            self.out.push_back(Output::Refuse {
                conn,
                status,
                reason: "refused by the host".into(),
            });
        }
    }

    /// A connection went away (closed, reset, or closed by us).
    pub(crate) fn handle_closed(&mut self, conn: ConnId) {
        if self.tool_closed(conn) {
            return;
        }
        let Some(c) = self.sessions.closed(conn) else {
            return;
        };
        let key = (c.ns, c.proc.rank);
        self.debug.proc_gone(c.ns, c.proc.rank);
        let finalized = c.finalized;
        // Requests of this client that wait for others are dropped; nobody will read the answer.
        self.naming.store.end_proc(SESSION, &c.proc);
        self.naming.store.forget_waiters(|(c2, _)| *c2 == conn);
        self.gets.forget_conn(conn);
        self.collectives.table.forget_conn(conn);
        let term_wo_sync = Status::ERR_PROC_TERM_WO_SYNC;
        if finalized {
            // A finalized process will enter no more fences.
            let gone = c.proc.clone();
            self.fail_fences_pending_on(&gone, Status::ERR_NOT_FOUND);
            if !self.commits.has(&key) {
                self.fail_gets(key, Status::ERR_NOT_FOUND);
            }
        } else {
            tracing::info!(proc = %c.proc, "client connection lost before finalize");
            // Nobody may hang on a process that is gone: fail what waits for it.
            if !self.commits.has(&key) {
                self.fail_gets(key, term_wo_sync);
            }
            let gone = c.proc.clone();
            self.fail_fences_pending_on(&gone, term_wo_sync);
            self.announce_gone(c.ns, &gone, term_wo_sync);
            self.group_member_gone(&gone);
        }
        self.group_waits_end(&c.proc);
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
        if !self.sessions.ended_elsewhere(key, status) {
            return;
        }
        if !self.commits.has(&key) {
            self.fail_gets(key, status);
        }
        self.fail_fences_with(
            |p| p.nspace == proc.nspace && (p.rank == proc.rank || p.rank == Rank::WILDCARD),
            status,
        );
        self.announce_gone(ns, proc, status);
        self.group_member_gone(proc);
        self.group_waits_end(proc);
    }

    /// `proc`, which ended, was started again (`Server::proc_restarted`), its
    /// `reincarnation`-th restart: it is no longer gone, its earlier life's data is forgotten,
    /// and its `REINCARNATION` is that count for whoever receives the job data from now on.
    pub(crate) fn proc_restarted(&mut self, proc: &Proc, reincarnation: u32) {
        let Some(ns) = self.ns_id(proc.nspace.as_str()) else {
            return;
        };
        self.nspaces.set_reincarnation(ns, proc.rank, reincarnation);
        let key = (ns, proc.rank);
        self.sessions.restarted(key);
        self.commits.forget(&key);
        self.store.purge_proc(ns, proc.rank);
    }

    /// A local client's process ended, as its host saw (it reaps the processes it started).
    /// A process whose connection is still open is left to its close, which says whether it
    /// finalized; one that never connected (it ended before init, or was never a PMIx
    /// program) would otherwise be waited for by every fence and get naming it: they fail
    /// with `ERR_PROC_TERM_WO_SYNC`, now and later, as for a process of another node.
    pub(crate) fn client_ended(&mut self, proc: &Proc) {
        if !self.sessions.conns_of_proc(proc).is_empty() {
            return;
        }
        self.proc_ended_elsewhere(proc, Status::ERR_PROC_TERM_WO_SYNC);
    }

    /// A request from an authenticated client.
    pub(crate) fn handle_request(&mut self, conn: ConnId, id: u32, req: Request, now: Instant) {
        if self.is_tool(conn) {
            return self.tool_request(conn, id, req, now);
        }
        let Some(c) = self.sessions.conn(conn) else {
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
                let nspaces = &self.nspaces;
                let procs = self
                    .groups
                    .expand_ids(procs, |name| nspaces.id(name).is_some());
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
            Request::Spawn { job_info, apps } => self.spawn(conn, id, me, job_info, apps),
            Request::RegisterEvents { codes, .. } => self.register_events(conn, id, &codes),
            Request::DeregisterEvents { codes } => {
                if let Some(c) = self.sessions.conn_mut(conn) {
                    c.events.remove(&codes);
                }
                self.reply_status(conn, id, Status::SUCCESS);
            }
            Request::Notify { mut event } => {
                // The source is who sends it, whatever the message claims.
                event.source = me;
                if event.code == Status::READY_FOR_DEBUG {
                    // Held in init: kept here (`debug.rs`), and the host hears of it.
                    self.ready_for_debug(conn, my_ns, event.source.rank);
                    self.host_call(PendingHost::Nothing, HostCall::NotifyEvent { event });
                    return self.reply_status(conn, id, Status::SUCCESS);
                }
                self.observe_group_event(&event);
                self.relay_notification(conn, id, event);
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
                if let Some(c) = self.sessions.conn_mut(conn) {
                    c.state = ConnState::Finalizing;
                }
                self.host_call(
                    PendingHost::Finalize { conn, id },
                    HostCall::ClientFinalized { proc: me },
                );
            }
            Request::GroupConstruct { grp, procs, info } => {
                self.group(GroupOp::Construct, conn, id, &me, grp, procs, &info, now);
            }
            Request::GroupDestruct { grp, procs, info } => {
                self.group(GroupOp::Destruct, conn, id, &me, grp, procs, &info, now);
            }
            Request::GroupLeave { grp, .. } => self.group_leave(conn, id, &me, &grp),
            Request::Publish { data, info } => self.publish(conn, id, me, data, info),
            Request::Lookup { keys, info } => self.lookup(conn, id, me, keys, info, now),
            Request::Unpublish { keys, info } => self.unpublish(conn, id, me, keys, info),
            Request::Query { queries } => self.query(conn, id, me, queries),
            Request::Log { data, directives } => self.log(conn, id, me, data, directives),
            Request::JobControl {
                targets,
                directives,
            } => self.job_control(conn, id, me, targets, directives),
            _ => self.reply_status(conn, id, Status::ERR_NOT_SUPPORTED),
        }
    }

    fn commit(&mut self, conn: ConnId, id: u32, ns: NsId, rank: Rank, kvs: Vec<Kv>) {
        if let Err(bad) = self.commits.commit((ns, rank), kvs, &mut self.store) {
            tracing::warn!(conn, key = %bad, "refusing a commit with a reserved key");
            return self.reply_status(conn, id, Status::ERR_BAD_PARAM);
        }
        self.reply_status(conn, id, Status::SUCCESS);
        self.release_gets((ns, rank));
    }

    // ---- host completions and time --------------------------------------------------------

    /// The host answered callback `op`.
    pub(crate) fn handle_host_done(&mut self, op: OpId, outcome: HostOutcome) {
        let Some(pending) = self.host_ops.finish(op) else {
            tracing::warn!(
                op,
                "host completed an unknown or already completed callback"
            );
            return;
        };
        match pending {
            PendingHost::Connect { conn } => self.client_connected_done(conn, &outcome),
            PendingHost::Finalize { conn, id } => {
                // Finalize succeeds for the client whatever the host says: it is leaving.
                self.reply_status(conn, id, Status::SUCCESS);
                self.out.push_back(Output::Close { conn });
            }
            PendingHost::Abort { conn, id } | PendingHost::Status { conn, id } => {
                self.reply_status(conn, id, status_of(&outcome));
            }
            PendingHost::Nothing => {}
            PendingHost::Spawn { conn, id } => self.spawn_done(conn, id, outcome),
            PendingHost::Query { conn, id, local } => self.query_done(conn, id, local, outcome),
            PendingHost::ToolConnect { conn } => self.tool_connect_done(conn, &outcome),
            PendingHost::Collective { seq } => self.collective_done(seq, &outcome),
            PendingHost::Group { seq, op, gid } => self.group_answered(seq, op, gid, outcome),
            PendingHost::Lookup { conn, id } => self.lookup_done(conn, id, outcome),
            PendingHost::Fence { seq, .. } => self.fence_done(seq, outcome),
            PendingHost::Dmodex { asked, request } => self.dmodex_done(asked, request, outcome),
        }
    }

    /// Time passed: fail what has waited too long.
    pub(crate) fn handle_timeout(&mut self, now: Instant) {
        let expired = self.naming.store.handle_timeout(now);
        self.answer_lookups(expired);
        while let Some(timer) = self.timers.pop_expired(now) {
            match timer {
                Timer::Get { target, timer } => {
                    if let Some(who) = self.gets.expire(target, timer) {
                        self.out.push_back(who.failure(Status::ERR_TIMEOUT));
                    }
                }
                Timer::Fence { seq } => self.fail_fence(seq, Status::ERR_TIMEOUT),
            }
        }
    }
}

fn success(body: ReplyBody) -> Reply {
    Reply {
        status: Status::SUCCESS,
        body,
    }
}

#[cfg(test)]
mod tests;
