//! Fences, connects and disconnects: joined by the local participants, handed to the host
//! (with this node's contribution) when some participants live on other nodes, completed or
//! failed for every waiter; and the data other nodes send, stored for later gets.
//!
//! [`Collectives`] owns the state (the fence table, the namespaces connected) and decides;
//! its methods borrow what else they read (namespaces, store, connections) and queue what they
//! answer. The `impl Engine` at the end only wires the steps together.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use pmix_types::{Info, Proc, Rank, Status, attr};
use pmix_wire::{ConnectPart, JobData, ProcKvs, Reply, ReplyBody};

use super::commits::Commits;
use super::connected::Connected;
use super::fence::{FenceOp, FenceTable, Kind, Waiter};
use super::host_ops::{
    GroupOp, HostCall, HostOutcome, PendingHost, decode_blobs, decode_frames, status_of,
};
use super::nspaces::Nspaces;
use super::sessions::Sessions;
use super::store::{NsId, Store, visible};
use super::timers::Timers;
use super::{ConnId, Engine, Output, info_flag};

/// The collectives in progress, and the namespaces connected by those that completed.
#[derive(Default)]
pub(super) struct Collectives {
    /// Fences, connects, disconnects and group collectives, by participant list.
    pub(super) table: FenceTable,
    /// Namespaces connected with each other, for failure events.
    pub(super) connected: Connected,
}

/// What entering a collective comes to.
pub(super) enum Joined {
    /// The request is refused with this status.
    Refused(Status),
    /// The connection is gone: nobody to answer.
    Gone,
    /// Entered into collective `seq`, which fails at once with the status given when a
    /// participant already ended.
    Entered(u64, Option<Status>),
}

/// What a collective does next.
pub(super) enum Next {
    /// Nothing yet: local participants are missing, or the host has it.
    Wait,
    /// Its local participants are all there: the group's step.
    Group(GroupOp, u32),
    /// Handed to the host.
    Host(PendingHost, HostCall),
    /// Completes with the other nodes' data (none).
    Finish(Result<Vec<ProcKvs>, Status>),
}

/// The reply that tells waiter `w` its collective ended with `status`.
fn status_to(w: &Waiter, status: Status) -> Output {
    Output::Reply {
        conn: w.conn,
        id: w.id,
        reply: Reply::status(status),
    }
}

impl Collectives {
    /// `me` (on `conn`, request `id`) enters the collective of `kind` over `procs` (its own
    /// namespace when empty).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn join(
        &mut self,
        kind: Kind,
        (conn, id): (ConnId, u32),
        me: &Proc,
        procs: Vec<Proc>,
        info: &[Info],
        now: Instant,
        (nspaces, sessions): (&Nspaces, &Sessions),
        timers: &mut Timers,
    ) -> Joined {
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
        // A connect or disconnect may name namespaces this server does not know: those of
        // another launcher run, whose participants are the host's to reach (see
        // `ConnectPart`). Any other collective names only namespaces registered here.
        let foreign_allowed = matches!(kind, Kind::Connect | Kind::Disconnect);
        for p in &participants {
            let Some(ns) = nspaces.id(p.nspace.as_str()) else {
                if foreign_allowed && p.nspace != me.nspace {
                    remote = true;
                    continue;
                }
                return Joined::Refused(Status::ERR_BAD_PARAM);
            };
            let Some(nsinfo) = nspaces.get(&ns) else {
                return Joined::Refused(Status::ERR_BAD_PARAM);
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
                return Joined::Refused(Status::ERR_BAD_PARAM);
            }
        }
        if !includes_me {
            return Joined::Refused(Status::ERR_BAD_PARAM);
        }
        local.sort_unstable();
        local.dedup();
        let Some(my_ns) = sessions.conn(conn).map(|c| c.ns) else {
            return Joined::Gone;
        };
        let collect = kind == Kind::Connect || info_flag(info, attr::COLLECT_DATA);
        let deadline = pmix_types::timeout_of(info).map(|d| now + d);
        let seq = self.table.join(
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
            timers.set_fence(d, seq);
        }
        // A participant that already left will never arrive. Its status is the fence's
        // (`gravest`); looked for from the smaller side, since this runs at every arrival
        // (usually nobody has left, and then it costs nothing).
        let departed = self.table.get(seq).and_then(|op| {
            if sessions.gone().len() < op.local.len() {
                let mut left: Vec<(Option<usize>, Status)> = sessions
                    .gone()
                    .iter()
                    .filter(|(p, _)| op.waits_for(**p))
                    .map(|(p, status)| (op.local.binary_search(p).ok(), *status))
                    .collect();
                left.sort_unstable_by_key(|(at, _)| *at);
                gravest(left.into_iter().map(|(_, status)| status))
            } else {
                gravest(
                    op.local
                        .iter()
                        .filter(|p| op.waits_for(**p))
                        .filter_map(|p| sessions.gone().get(p).copied()),
                )
            }
        });
        let departed = match departed {
            Some(status) if status != Status::ERR_NOT_FOUND => Some(status),
            local => gravest(
                local
                    .into_iter()
                    .chain(self.remote_departed(seq, nspaces, sessions)),
            ),
        };
        Joined::Entered(seq, departed)
    }

    /// The status of a participant of another node that is known to have ended
    /// ([`Engine::proc_ended_elsewhere`]), if any.
    fn remote_departed(&self, seq: u64, nspaces: &Nspaces, sessions: &Sessions) -> Option<Status> {
        let op = self.table.get(seq)?;
        if !op.remote || sessions.gone().is_empty() {
            return None;
        }
        gravest(op.participants.iter().filter_map(|p| {
            let ns = nspaces.id(p.nspace.as_str())?;
            let local = nspaces.get(&ns)?;
            if p.rank == Rank::WILDCARD {
                gravest(
                    sessions
                        .gone()
                        .iter()
                        .filter(|((n, r), _)| *n == ns && !local.is_local(*r))
                        .map(|(_, s)| *s),
                )
            } else if local.is_local(p.rank) {
                None
            } else {
                sessions.gone().get(&(ns, p.rank)).copied()
            }
        }))
    }

    /// What collective `seq` does next, once its local participants are all there.
    pub(super) fn next(
        &mut self,
        seq: u64,
        nspaces: &Nspaces,
        store: &Store,
        commits: &mut Commits,
    ) -> Next {
        let Some(op) = self.table.get(seq) else {
            return Next::Wait;
        };
        if !op.all_local_arrived() || op.at_host {
            return Next::Wait;
        }
        match op.kind {
            Kind::GroupConstruct(gid) => return Next::Group(GroupOp::Construct, gid),
            Kind::GroupDestruct(gid) => return Next::Group(GroupOp::Destruct, gid),
            _ => {}
        }
        if op.remote && op.kind == Kind::Disconnect {
            // Participants elsewhere: the host disconnects the nodes.
            let procs = op.participants.clone();
            let info = op.info.clone();
            if let Some(op) = self.table.get_mut(seq) {
                op.at_host = true;
            }
            Next::Host(
                PendingHost::Collective { seq },
                HostCall::Disconnect { procs, info },
            )
        } else if op.remote {
            // This node's contribution: the data other nodes may see of the local
            // participants that committed, for a collecting fence as for a connect (whose
            // participants see each other's data after). A fence that collects nothing
            // carries what was committed since it was last sent: PMI-1's barrier is one, and
            // its gets look for a key in whatever this node holds. Over whole namespaces,
            // only the values stored since (every node of the namespace got the rest, and
            // keeps it: PMI-1 programs that put between barriers would otherwise send
            // everything again each time); over some ranks, all of a process that stored
            // anything since. One that never committed is left out: it must not look as if
            // it had, or a get elsewhere would not wait for its commit.
            let collect = op.kind == Kind::Connect || op.waiters.iter().any(|w| w.collect);
            let whole_nspaces = op.participants.iter().all(|p| p.rank == Rank::WILDCARD);
            let now = store.seq();
            let senders: Vec<(NsId, Rank)> = op
                .local
                .iter()
                .filter(|p| commits.has(p))
                .copied()
                .collect();
            let mut contrib = Vec::new();
            for (ns, rank) in senders {
                let Some(nsinfo) = nspaces.get(&ns) else {
                    continue;
                };
                let last = commits.ship((ns, rank), now);
                let kvs = match last {
                    Some(since) if !collect => {
                        let new = store.proc_kvs_since(ns, rank, since, |s| visible(s, false));
                        if new.is_empty() {
                            continue;
                        }
                        if whole_nspaces {
                            new
                        } else {
                            store.proc_kvs(ns, rank, |s| visible(s, false))
                        }
                    }
                    _ => store.proc_kvs(ns, rank, |s| visible(s, false)),
                };
                contrib.push(ProcKvs {
                    proc: Proc::new(nsinfo.name.clone(), rank),
                    kvs,
                });
            }
            let mut data = Vec::new();
            let encoded = if op.kind == Kind::Connect {
                let part = ConnectPart {
                    jobs: nspaces.jobs_for_foreign(&op.participants),
                    data: contrib,
                };
                // Like a fence's, a frame holds a list (of one part here): the host
                // concatenates frames.
                pmix_wire::encode_frame(&[part], &mut data)
            } else {
                pmix_wire::encode_frame(&contrib, &mut data)
            };
            if let Err(e) = encoded {
                return Next::Finish(Err(e.status()));
            }
            let Some(op) = self.table.get(seq) else {
                return Next::Wait;
            };
            let procs = op.participants.clone();
            let info = op.info.clone();
            let call = if op.kind == Kind::Connect {
                HostCall::Connect { procs, info, data }
            } else {
                HostCall::FenceNb { procs, info, data }
            };
            if let Some(op) = self.table.get_mut(seq) {
                op.at_host = true;
            }
            Next::Host(PendingHost::Fence { seq }, call)
        } else {
            Next::Finish(Ok(Vec::new()))
        }
    }

    /// Completes collective `seq`: `remote` holds the other nodes' data, already decoded,
    /// stored here; the processes whose data arrived, for their Gets.
    pub(super) fn finish(
        &mut self,
        seq: u64,
        remote: Result<Vec<ProcKvs>, Status>,
        (nspaces, store, commits): (&Nspaces, &mut Store, &mut Commits),
        sessions: &mut Sessions,
        timers: &mut Timers,
        out: &mut VecDeque<Output>,
    ) -> Vec<(NsId, Rank)> {
        let Some(op) = self.take(seq, timers) else {
            return Vec::new();
        };
        let remote = match remote {
            // The host hands back every node's contribution, ours included; ours is better
            // taken from the store, where LOCAL-scope data is too.
            Ok(mut r) => {
                r.retain(|pk| {
                    let ours = nspaces
                        .id(pk.proc.nspace.as_str())
                        .is_some_and(|ns| op.local.binary_search(&(ns, pk.proc.rank)).is_ok());
                    !ours
                });
                r
            }
            Err(status) => {
                for w in &op.waiters {
                    out.push_back(status_to(w, status));
                }
                return Vec::new();
            }
        };
        // Other nodes' data is stored so that later gets are served here.
        let arrived = commits.store_remote(&remote, nspaces, store);
        match op.kind {
            Kind::Fence | Kind::GroupConstruct(_) | Kind::GroupDestruct(_) => {}
            Kind::Connect => {
                self.connect_done(&op, remote, nspaces, store, sessions, out);
                return arrived;
            }
            Kind::Disconnect => {
                let nss: Vec<NsId> = op
                    .nspaces()
                    .iter()
                    .filter_map(|n| nspaces.id(n.as_str()))
                    .collect();
                self.connected.disconnect(&nss);
                for w in &op.waiters {
                    out.push_back(status_to(w, Status::SUCCESS));
                }
                return Vec::new();
            }
        }
        // Each collector gets what was committed since its last collecting fence over the same
        // list (everything, the first time). Collectors in step with each other, the usual case,
        // share one reply: built, and encoded, once.
        let (collectors, others): (Vec<_>, Vec<_>) = op.waiters.iter().partition(|w| w.collect);
        if !collectors.is_empty() {
            let participants_id = self.table.list_id(&op.participants);
            let now = commits.latest();
            let mut by_mark: BTreeMap<u64, Vec<(ConnId, u32)>> = BTreeMap::new();
            for w in &collectors {
                let Some(c) = sessions.conn_mut(w.conn) else {
                    continue;
                };
                let mark = c.collected.insert(participants_id, now).unwrap_or(0);
                by_mark.entry(mark).or_default().push((w.conn, w.id));
            }
            let groups = by_mark.len();
            let mut remote = remote;
            for (i, (mark, to)) in by_mark.into_iter().enumerate() {
                let mut data = Vec::with_capacity(op.local.len() + remote.len());
                for &(ns, rank) in &op.local {
                    if commits.of(&(ns, rank)).is_some_and(|seq| seq <= mark) {
                        continue;
                    }
                    if let Some(nsinfo) = nspaces.get(&ns) {
                        // Local participants share the node with the reader.
                        let kvs = store.proc_kvs(ns, rank, |s| visible(s, true));
                        data.push(ProcKvs {
                            proc: Proc::new(nsinfo.name.clone(), rank),
                            kvs,
                        });
                    }
                }
                // The last reply takes the other nodes' data; the store has its own copy.
                if i + 1 == groups {
                    data.append(&mut remote);
                } else {
                    data.extend(remote.iter().cloned());
                }
                let reply = Arc::new(Reply {
                    status: Status::SUCCESS,
                    body: ReplyBody::Fence { data },
                });
                out.push_back(Output::SharedReply { to, reply });
            }
        }
        for w in others {
            out.push_back(status_to(w, Status::SUCCESS));
        }
        arrived
    }

    /// Completes a connect: every participant gets the job data of the other namespaces and
    /// the data of every participant, and the namespaces are connected from now on.
    fn connect_done(
        &mut self,
        op: &FenceOp,
        remote: Vec<ProcKvs>,
        nspaces: &Nspaces,
        store: &Store,
        sessions: &mut Sessions,
        out: &mut VecDeque<Output>,
    ) {
        let nss: Vec<NsId> = op
            .nspaces()
            .iter()
            .filter_map(|n| nspaces.id(n.as_str()))
            .collect();
        self.connected.connect(&nss);
        let mut data = Vec::with_capacity(op.local.len() + remote.len());
        for &(ns, rank) in &op.local {
            if let Some(nsinfo) = nspaces.get(&ns) {
                let kvs = store.proc_kvs(ns, rank, |s| visible(s, true));
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
            if let Some(c) = sessions.conn(w.conn) {
                by_ns.entry(c.ns).or_default().push((w.conn, w.id));
            }
        }
        for (own, to) in by_ns {
            let jobs: Vec<JobData> = nss
                .iter()
                .filter(|n| **n != own)
                .filter_map(|n| nspaces.get(n))
                .map(|n| JobData::clone(n.job.get()))
                .collect();
            for (conn, _) in &to {
                if let Some(c) = sessions.conn_mut(*conn) {
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
            out.push_back(Output::SharedReply { to, reply });
        }
    }

    /// Removes collective `seq`, its deadline with it.
    pub(super) fn take(&mut self, seq: u64, timers: &mut Timers) -> Option<FenceOp> {
        let op = self.table.remove(seq)?;
        timers.cancel_fence(seq);
        Some(op)
    }

    /// Fails collective `seq` for every waiter.
    pub(super) fn fail(
        &mut self,
        seq: u64,
        status: Status,
        timers: &mut Timers,
        out: &mut VecDeque<Output>,
    ) {
        if let Some(op) = self.take(seq, timers) {
            for w in &op.waiters {
                out.push_back(status_to(w, status));
            }
        }
    }

    /// Fails the collectives `pred` picks, oldest first.
    pub(super) fn fail_those(
        &mut self,
        pred: impl Fn(&FenceOp) -> bool,
        status: Status,
        timers: &mut Timers,
        out: &mut VecDeque<Output>,
    ) {
        for seq in self.table.matching(pred) {
            self.fail(seq, status, timers, out);
        }
    }
}

impl Engine {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn collective(
        &mut self,
        kind: Kind,
        conn: ConnId,
        id: u32,
        me: &Proc,
        procs: Vec<Proc>,
        info: &[Info],
        now: Instant,
    ) {
        let read = (&self.nspaces, &self.sessions);
        let joined = self.collectives.join(
            kind,
            (conn, id),
            me,
            procs,
            info,
            now,
            read,
            &mut self.timers,
        );
        match joined {
            Joined::Refused(status) => self.reply_status(conn, id, status),
            Joined::Gone => {}
            Joined::Entered(seq, Some(status)) => self.fail_fence(seq, status),
            Joined::Entered(seq, None) => self.try_finish_fence(seq),
        }
    }

    pub(super) fn try_finish_fence(&mut self, seq: u64) {
        let next = self
            .collectives
            .next(seq, &self.nspaces, &self.store, &mut self.commits);
        match next {
            Next::Wait => {}
            Next::Group(op, gid) => self.group_ready(seq, op, gid),
            Next::Host(pending, call) => self.host_call(pending, call),
            Next::Finish(remote) => self.finish_fence(seq, remote),
        }
    }

    /// Completes a fence: `remote` holds the other nodes' data, already decoded.
    pub(super) fn finish_fence(&mut self, seq: u64, remote: Result<Vec<ProcKvs>, Status>) {
        let data = (&self.nspaces, &mut self.store, &mut self.commits);
        let arrived = self.collectives.finish(
            seq,
            remote,
            data,
            &mut self.sessions,
            &mut self.timers,
            &mut self.out,
        );
        for t in arrived {
            self.release_gets(t);
        }
    }

    /// Stores data that came from other nodes (see [`Commits::store_remote`]).
    pub(super) fn store_remote(&mut self, data: &[ProcKvs]) -> Vec<(NsId, Rank)> {
        self.commits
            .store_remote(data, &self.nspaces, &mut self.store)
    }

    pub(super) fn fail_fences_with(&mut self, pred: impl Fn(&Proc) -> bool, status: Status) {
        let (timers, out) = (&mut self.timers, &mut self.out);
        let with = |op: &FenceOp| op.participants.iter().any(&pred);
        self.collectives.fail_those(with, status, timers, out);
    }

    pub(super) fn fail_fences_pending_on(&mut self, gone: &Proc, status: Status) {
        let Some(ns) = self.ns_id(gone.nspace.as_str()) else {
            return;
        };
        let key = (ns, gone.rank);
        let (timers, out) = (&mut self.timers, &mut self.out);
        let pending = |op: &FenceOp| op.waits_for(key);
        self.collectives.fail_those(pending, status, timers, out);
    }

    pub(super) fn fail_fence(&mut self, seq: u64, status: Status) {
        self.collectives
            .fail(seq, status, &mut self.timers, &mut self.out);
    }

    /// The host answered a connect or disconnect carried by the host alone (nothing to
    /// exchange): the collective completes or fails.
    pub(super) fn collective_done(&mut self, seq: u64, outcome: &HostOutcome) {
        let status = status_of(outcome);
        if status.is_success() {
            self.finish_fence(seq, Ok(Vec::new()));
        } else {
            self.fail_fence(seq, status);
        }
    }

    /// The host answered a fence's or connect's exchange with the other nodes' data (for a
    /// connect, their parts: the jobs they bring, registered here, and their data).
    pub(super) fn fence_done(&mut self, seq: u64, outcome: HostOutcome) {
        let connect = self
            .collectives
            .table
            .get(seq)
            .is_some_and(|op| op.kind == Kind::Connect);
        let result = match outcome {
            HostOutcome::Bytes(Ok(bytes)) if connect => {
                decode_frames::<ConnectPart>(&bytes).map(|parts| {
                    let mut data = Vec::new();
                    for part in parts {
                        self.nspaces.register_foreign(part.jobs);
                        data.extend(part.data);
                    }
                    data
                })
            }
            HostOutcome::Bytes(Ok(bytes)) => decode_blobs(&bytes),
            other => Err(match status_of(&other) {
                s if s.is_success() => Status::ERR_UNPACK_FAILURE,
                s => s,
            }),
        };
        self.finish_fence(seq, result);
    }
}

/// The status a collective fails with, of those of its participants that left (in participant
/// order): the first that is not `ERR_NOT_FOUND`, a process that finalized and left in order,
/// since a failure (`ERR_PROC_TERM_WO_SYNC`, a lost node) says more of why the collective can
/// never complete; else the first.
fn gravest(statuses: impl IntoIterator<Item = Status>) -> Option<Status> {
    let mut first = None;
    for status in statuses {
        if status != Status::ERR_NOT_FOUND {
            return Some(status);
        }
        first.get_or_insert(status);
    }
    first
}
