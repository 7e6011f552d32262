//! Fences, connects and disconnects: joined by the local participants, handed to the host
//! (with this node's contribution) when some participants live on other nodes, completed or
//! failed for every waiter; and the data other nodes send, stored for later gets.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

use pmix_types::{Info, Nspace, Proc, Rank, Status, attr};
use pmix_wire::{ConnectPart, JobData, ProcKvs, Reply, ReplyBody};

use super::fence::{FenceOp, Kind};
use super::host_ops::{
    GroupOp, HostCall, HostOutcome, PendingHost, decode_blobs, decode_frames, status_of,
};
use super::nspaces::Namespace;
use super::store::{NsId, visible};
use super::{ConnId, Engine, Output, info_flag, nspace};

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
            let Some(ns) = self.ns_id(p.nspace.as_str()) else {
                if foreign_allowed && p.nspace != me.nspace {
                    remote = true;
                    continue;
                }
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
        let Some(my_ns) = self.sessions.conn(conn).map(|c| c.ns) else {
            return;
        };
        let collect = kind == Kind::Connect || info_flag(info, attr::COLLECT_DATA);
        let deadline = pmix_types::timeout_of(info).map(|d| now + d);
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
            self.timers.set_fence(d, seq);
        }
        // A participant that already left will never arrive. The first such in participant
        // order decides the status; looked for from the smaller side, since this runs at every
        // arrival (usually nobody has left, and then it costs nothing).
        let departed = self.fences.get(seq).and_then(|op| {
            if self.sessions.gone().len() < op.local.len() {
                self.sessions
                    .gone()
                    .iter()
                    .filter(|(p, _)| op.waits_for(**p))
                    .min_by_key(|(p, _)| op.local.binary_search(p).ok())
                    .map(|(_, status)| *status)
            } else {
                op.local
                    .iter()
                    .filter(|p| op.waits_for(**p))
                    .find_map(|p| self.sessions.gone().get(p))
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
    pub(super) fn remote_departed(&self, seq: u64) -> Option<Status> {
        let op = self.fences.get(seq)?;
        if !op.remote || self.sessions.gone().is_empty() {
            return None;
        }
        op.participants.iter().find_map(|p| {
            let ns = self.ns_id(p.nspace.as_str())?;
            let local = self.nspaces.get(&ns)?;
            if p.rank == Rank::WILDCARD {
                self.sessions
                    .gone()
                    .iter()
                    .find(|((n, r), _)| *n == ns && !local.is_local(*r))
                    .map(|(_, s)| *s)
            } else if local.is_local(p.rank) {
                None
            } else {
                self.sessions.gone().get(&(ns, p.rank)).copied()
            }
        })
    }

    pub(super) fn try_finish_fence(&mut self, seq: u64) {
        let Some(op) = self.fences.get(seq) else {
            return;
        };
        if !op.all_local_arrived() || op.at_host {
            return;
        }
        match op.kind {
            Kind::GroupConstruct(gid) => return self.group_ready(seq, GroupOp::Construct, gid),
            Kind::GroupDestruct(gid) => return self.group_ready(seq, GroupOp::Destruct, gid),
            _ => {}
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
            // its gets look for a key in whatever this node holds. Over whole namespaces,
            // only the values stored since (every node of the namespace got the rest, and
            // keeps it: PMI-1 programs that put between barriers would otherwise send
            // everything again each time); over some ranks, all of a process that stored
            // anything since. One that never committed is left out: it must not look as if
            // it had, or a get elsewhere would not wait for its commit.
            let collect = op.kind == Kind::Connect || op.waiters.iter().any(|w| w.collect);
            let whole_nspaces = op.participants.iter().all(|p| p.rank == Rank::WILDCARD);
            let now = self.store.seq();
            let senders: Vec<(NsId, Rank)> = op
                .local
                .iter()
                .filter(|p| self.commits.has(p))
                .copied()
                .collect();
            let mut contrib = Vec::new();
            for (ns, rank) in senders {
                let Some(nsinfo) = self.nspaces.get(&ns) else {
                    continue;
                };
                let last = self.commits.ship((ns, rank), now);
                let kvs = match last {
                    Some(since) if !collect => {
                        let new = self
                            .store
                            .proc_kvs_since(ns, rank, since, |s| visible(s, false));
                        if new.is_empty() {
                            continue;
                        }
                        if whole_nspaces {
                            new
                        } else {
                            self.store.proc_kvs(ns, rank, |s| visible(s, false))
                        }
                    }
                    _ => self.store.proc_kvs(ns, rank, |s| visible(s, false)),
                };
                contrib.push(ProcKvs {
                    proc: Proc::new(nsinfo.name.clone(), rank),
                    kvs,
                });
            }
            let mut data = Vec::new();
            let encoded = if op.kind == Kind::Connect {
                let part = ConnectPart {
                    jobs: self.jobs_for_foreign(&op.participants),
                    data: contrib,
                };
                // Like a fence's, a frame holds a list (of one part here): the host
                // concatenates frames.
                pmix_wire::encode_frame(&[part], &mut data)
            } else {
                pmix_wire::encode_frame(&contrib, &mut data)
            };
            if let Err(e) = encoded {
                return self.finish_fence(seq, Err(e.status()));
            }
            let Some(op) = self.fences.get(seq) else {
                return;
            };
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
    pub(super) fn finish_fence(&mut self, seq: u64, remote: Result<Vec<ProcKvs>, Status>) {
        let Some(op) = self.fences.remove(seq) else {
            return;
        };
        self.timers.cancel_fence(seq);
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
            Kind::Fence | Kind::GroupConstruct(_) | Kind::GroupDestruct(_) => {}
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
                self.connected.disconnect(&nss);
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
            let participants_id = self.fences.list_id(&op.participants);
            let now = self.commits.latest();
            let mut by_mark: BTreeMap<u64, Vec<(ConnId, u32)>> = BTreeMap::new();
            for w in &collectors {
                let Some(c) = self.sessions.conn_mut(w.conn) else {
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
                    if self.commits.of(&(ns, rank)).is_some_and(|seq| seq <= mark) {
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
    pub(super) fn participant_nspaces(op: &FenceOp) -> Vec<Nspace> {
        let mut v: Vec<Nspace> = op.participants.iter().map(|p| p.nspace.clone()).collect();
        v.sort();
        v.dedup();
        v
    }

    /// Completes a connect: every participant gets the job data of the other namespaces and
    /// the data of every participant, and the namespaces are connected from now on.
    pub(super) fn finish_connect(&mut self, op: &FenceOp, remote: Vec<ProcKvs>) {
        let nss: Vec<NsId> = Self::participant_nspaces(op)
            .iter()
            .filter_map(|n| self.ns_id(n.as_str()))
            .collect();
        self.connected.connect(&nss);
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
            if let Some(c) = self.sessions.conn(w.conn) {
                by_ns.entry(c.ns).or_default().push((w.conn, w.id));
            }
        }
        for (own, to) in by_ns {
            let jobs: Vec<JobData> = nss
                .iter()
                .filter(|n| **n != own)
                .filter_map(|n| self.nspaces.get(n))
                .map(|n| JobData::clone(n.job.get()))
                .collect();
            for (conn, _) in &to {
                if let Some(c) = self.sessions.conn_mut(*conn) {
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

    /// Stores data that came from other nodes (through the host) so that later gets are
    /// served here; returns the processes it belonged to.
    pub(super) fn store_remote(&mut self, data: &[ProcKvs]) -> Vec<(NsId, Rank)> {
        let mut arrived = Vec::with_capacity(data.len());
        for pk in data {
            if let Some(ns) = self.ns_id(pk.proc.nspace.as_str()) {
                for kv in &pk.kvs {
                    self.store
                        .put(ns, pk.proc.rank, kv.key.clone(), kv.scope, kv.value.clone());
                }
                self.commits.record((ns, pk.proc.rank));
                arrived.push((ns, pk.proc.rank));
            }
        }
        arrived
    }

    /// The job data of `participants`' namespaces registered here by the host, when some of
    /// them are not (they belong to another launcher run, whose servers learn ours from it);
    /// none otherwise. Also when that run's namespace is known here from an earlier connect:
    /// another server of this run taking part (on another node) may not know it, nor its
    /// servers ours.
    fn jobs_for_foreign(&self, participants: &[Proc]) -> Vec<JobData> {
        let mut nss: Vec<&Nspace> = participants.iter().map(|p| &p.nspace).collect();
        nss.dedup();
        let known: Vec<Option<&Namespace>> = nss
            .iter()
            .map(|n| self.ns_id(n.as_str()).and_then(|id| self.nspaces.get(&id)))
            .collect();
        if known.iter().all(|n| n.is_some_and(|n| !n.job.is_foreign())) {
            return Vec::new();
        }
        known
            .into_iter()
            .flatten()
            .filter(|n| !n.job.is_foreign())
            .map(|n| JobData::clone(n.job.get()))
            .collect()
    }

    /// Registers the namespaces of another launcher run that a connect brought, from their
    /// job data: none of their processes is local here. A namespace known here already is
    /// left as it is (its own registration is better than another server's view of it).
    pub(super) fn register_foreign(&mut self, jobs: Vec<JobData>) {
        for job in jobs {
            if self.ns_id(job.nspace.as_str()).is_some() {
                continue;
            }
            let nspace = job.nspace.clone();
            match nspace::Registration::foreign(job) {
                Ok(reg) => {
                    self.nspaces.insert(nspace, reg);
                }
                Err(e) => tracing::warn!(%nspace, "cannot take in another run's job data: {e}"),
            }
        }
    }

    pub(super) fn fail_fences_with(&mut self, pred: impl Fn(&Proc) -> bool, status: Status) {
        for seq in self.fences.matching(|op| op.participants.iter().any(&pred)) {
            self.fail_fence(seq, status);
        }
    }

    pub(super) fn fail_fences_pending_on(&mut self, gone: &Proc, status: Status) {
        let Some(ns) = self.ns_id(gone.nspace.as_str()) else {
            return;
        };
        let key = (ns, gone.rank);
        for seq in self.fences.matching(|op: &FenceOp| op.waits_for(key)) {
            self.fail_fence(seq, status);
        }
    }

    pub(super) fn fail_fence(&mut self, seq: u64, status: Status) {
        if let Some(op) = self.fences.remove(seq) {
            self.timers.cancel_fence(seq);
            for w in op.waiters {
                self.reply_status(w.conn, w.id, status);
            }
        }
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
            .fences
            .get(seq)
            .is_some_and(|op| op.kind == Kind::Connect);
        let result = match outcome {
            HostOutcome::Bytes(Ok(bytes)) if connect => {
                decode_frames::<ConnectPart>(&bytes).map(|parts| {
                    let mut data = Vec::new();
                    for part in parts {
                        self.register_foreign(part.jobs);
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
