//! Process groups (`PMIx_Group_construct`, `PMIx_Group_destruct`): collectives over the
//! members, kept in the collective table like fences (so a member that ends fails them, and a
//! `TIMEOUT` is honoured, the same way), and the groups that exist, with their context ids.
//!
//! A group's collective completes here when all its members are local; otherwise this node's
//! contribution (its proposed context id) goes to the host ([`Host::group`](crate::Host::group)),
//! which hands back every node's, and every node picks the smallest proposal: the same on
//! all of them. Context ids come from this server's sequence `first, first + step, ...`
//! ([`ServerOptions::context_ids`](crate::ServerOptions::context_ids)); a host running one
//! server per node gives each node its own residue, so that ids are unique across the run.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use pmix_types::{DataRange, Info, Proc, Rank, Status, Value, attr};
use pmix_wire::{Event, Reply, ReplyBody};
use serde::{Deserialize, Serialize};

use super::fence::Kind;
use super::host_ops::{GroupOp, HostCall, HostOutcome, PendingHost, decode_frames, failure_of};
use super::{ConnId, Engine, Output, info_flag};

/// What one node contributes to a group's collective across nodes.
#[derive(Debug, Serialize, Deserialize)]
struct Contribution {
    /// This node's proposal for the group's context id, when one was asked for.
    context_id: Option<u64>,
    /// The `GROUP_INFO` of this node's members.
    #[serde(default)]
    info: Vec<(Proc, Vec<Info>)>,
}

/// A group that was constructed and not yet destructed.
#[derive(Debug)]
struct Group {
    members: Vec<Proc>,
}

/// The groups of this server: ids interned (a collective's kind carries the number) while a
/// collective or a constructed group needs them, the constructed ones, and the context ids
/// handed out.
#[derive(Debug)]
pub(crate) struct Groups {
    ids: HashMap<String, u32>,
    names: HashMap<u32, String>,
    next_gid: u32,
    live: HashMap<u32, Group>,
    next_context_id: u64,
    context_step: u64,
    /// Local processes waiting for another's answer in a group's formation by invitation.
    pub(super) waits: Vec<super::group_membership::Wait>,
    /// What members share when they construct a group.
    pub(super) info: super::group_info::GroupInfo,
}

impl Default for Groups {
    fn default() -> Self {
        Groups {
            ids: HashMap::new(),
            names: HashMap::new(),
            next_gid: 0,
            live: HashMap::new(),
            next_context_id: 1,
            context_step: 1,
            waits: Vec::new(),
            info: Default::default(),
        }
    }
}

impl Groups {
    /// The number of group `grp`, when it is interned.
    pub(super) fn id_of(&self, grp: &str) -> Option<u32> {
        self.ids.get(grp).copied()
    }

    /// The members of constructed group `gid`.
    pub(super) fn members(&self, gid: u32) -> Option<&[Proc]> {
        self.live.get(&gid).map(|g| g.members.as_slice())
    }

    /// Records group `gid` as constructed with `members`, unless it already is (a
    /// construction by invitation is announced to every member).
    pub(super) fn set_members(&mut self, gid: u32, members: Vec<Proc>) {
        self.live.entry(gid).or_insert(Group { members });
    }

    /// Removes `who` from group `gid`: how many members remain, or `None` when it was not one.
    pub(super) fn remove_member(&mut self, gid: u32, who: &Proc) -> Option<usize> {
        let g = self.live.get_mut(&gid)?;
        let at = g.members.iter().position(|p| p == who)?;
        g.members.remove(at);
        Some(g.members.len())
    }

    /// Forgets constructed group `gid`.
    pub(super) fn dissolve(&mut self, gid: u32) {
        self.live.remove(&gid);
    }

    pub(super) fn intern(&mut self, grp: &str) -> u32 {
        if let Some(id) = self.ids.get(grp) {
            return *id;
        }
        let id = self.next_gid;
        self.next_gid = self.next_gid.wrapping_add(1);
        self.names.insert(id, grp.to_owned());
        self.ids.insert(grp.to_owned(), id);
        id
    }

    /// How many group ids are interned.
    #[cfg(test)]
    pub(crate) fn interned(&self) -> usize {
        self.ids.len()
    }

    fn name(&self, gid: u32) -> &str {
        self.names.get(&gid).map_or("", String::as_str)
    }

    /// Drops the id of a group that is neither constructed nor in a collective: Open MPI
    /// names a new group for every communicator it makes.
    fn forget(&mut self, gid: u32) {
        if let Some(name) = self.names.remove(&gid) {
            self.ids.remove(&name);
        }
        self.info.forget(gid);
    }

    fn take_context_id(&mut self) -> u64 {
        let id = self.next_context_id;
        self.next_context_id = self.next_context_id.saturating_add(self.context_step);
        id
    }
}

impl Engine {
    /// Sets the sequence this server's context ids are taken from.
    pub(crate) fn set_context_ids(&mut self, first: u64, step: u64) {
        self.groups.next_context_id = first;
        self.groups.context_step = step.max(1);
    }

    /// A member enters a group's construction (or destruction).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn group(
        &mut self,
        op: GroupOp,
        conn: ConnId,
        id: u32,
        me: &Proc,
        grp: String,
        mut procs: Vec<Proc>,
        info: &[Info],
        now: Instant,
    ) {
        if grp.is_empty() {
            return self.reply_status(conn, id, Status::ERR_BAD_PARAM);
        }
        let gid = self.groups.intern(&grp);
        if op == GroupOp::Destruct {
            // The members as this server knows them, which may have left since the client
            // learned them.
            match self.groups.live.get(&gid) {
                Some(g) => procs = g.members.clone(),
                None if procs.is_empty() => {
                    return self.reply_status(conn, id, Status::ERR_NOT_FOUND);
                }
                None => {}
            }
        }
        if procs.is_empty() {
            return self.reply_status(conn, id, Status::ERR_BAD_PARAM);
        }
        if op == GroupOp::Construct {
            self.groups.info.arrived(gid, me, info);
        }
        let kind = match op {
            GroupOp::Construct => Kind::GroupConstruct(gid),
            GroupOp::Destruct => Kind::GroupDestruct(gid),
        };
        self.collective(kind, conn, id, me, procs, info, now);
    }

    /// Every local member arrived: complete here, or hand this node's part to the host.
    pub(super) fn group_ready(&mut self, seq: u64, op: GroupOp, gid: u32) {
        let Some(f) = self.collectives.table.get(seq) else {
            return;
        };
        let proposal = (op == GroupOp::Construct
            && info_flag(&f.info, attr::GROUP_ASSIGN_CONTEXT_ID))
        .then(|| self.groups.take_context_id());
        let mine = Contribution {
            context_id: proposal,
            info: if op == GroupOp::Construct {
                self.groups.info.take(gid)
            } else {
                Vec::new()
            },
        };
        if !f.remote {
            return self.finish_group(seq, op, gid, Ok(vec![mine]));
        }
        let mut data = Vec::new();
        if let Err(e) = pmix_wire::encode_frame(&vec![mine], &mut data) {
            return self.fail_fence(seq, e.status());
        }
        let procs = f.participants.clone();
        let info = f.info.clone();
        if let Some(f) = self.collectives.table.get_mut(seq) {
            f.at_host = true;
        }
        let grp = self.groups.name(gid).to_owned();
        self.host_call(
            PendingHost::Group { seq, op, gid },
            HostCall::Group {
                op,
                grp,
                procs,
                info,
                data,
            },
        );
    }

    /// The host's answer to a group collective across nodes: every node's contribution.
    pub(super) fn group_answered(&mut self, seq: u64, op: GroupOp, gid: u32, outcome: HostOutcome) {
        let result = match outcome {
            HostOutcome::Bytes(Ok(bytes)) => decode_frames::<Contribution>(&bytes),
            other => Err(failure_of(&other)),
        };
        self.finish_group(seq, op, gid, result);
    }

    /// A member of constructed groups ended without finalize: the other members of each hear
    /// of it (`GROUP_MEMBER_FAILED`, with `GROUP_ID` and `EVENT_AFFECTED_PROC`).
    pub(super) fn group_member_gone(&mut self, gone: &Proc) {
        let hit =
            |p: &Proc| p.nspace == gone.nspace && (p.rank == gone.rank || p.rank == Rank::WILDCARD);
        let mut events = Vec::new();
        for (gid, g) in &self.groups.live {
            if !g.members.iter().any(hit) {
                continue;
            }
            let others: Vec<Value> = g
                .members
                .iter()
                .filter(|p| *p != gone)
                .cloned()
                .map(Value::Proc)
                .collect();
            let Ok(range) = pmix_types::DataArray::new(pmix_types::DataType::PROC, others) else {
                continue;
            };
            events.push(Event {
                code: Status::GROUP_MEMBER_FAILED,
                source: self.nspaces.me().clone(),
                range: DataRange::CUSTOM,
                info: vec![
                    Info::attr(attr::GROUP_ID, self.groups.name(*gid)),
                    Info::attr(attr::EVENT_AFFECTED_PROC, gone.clone()),
                    Info::attr(attr::EVENT_CUSTOM_RANGE, range),
                ],
            });
        }
        for e in events {
            self.notify(&e, None);
        }
    }

    /// Forgets the id of group `gid` once nothing refers to it.
    pub(super) fn forget_group_if_unused(&mut self, gid: u32) {
        if self.groups.live.contains_key(&gid) {
            return;
        }
        let pending = self.collectives.table.matching(
            |op| matches!(op.kind, Kind::GroupConstruct(g) | Kind::GroupDestruct(g) if g == gid),
        );
        if pending.is_empty() {
            self.groups.forget(gid);
        }
    }

    fn finish_group(
        &mut self,
        seq: u64,
        op: GroupOp,
        gid: u32,
        parts: Result<Vec<Contribution>, Status>,
    ) {
        let parts = match parts {
            Ok(p) => p,
            Err(status) => return self.fail_fence(seq, status),
        };
        let Some(f) = self.collectives.table.remove(seq) else {
            return;
        };
        self.timers.cancel_fence(seq);
        match op {
            GroupOp::Construct => {
                let context_id = parts.iter().filter_map(|p| p.context_id).min();
                if let Some(ctx) = context_id {
                    let shared = parts.into_iter().flat_map(|p| p.info).collect();
                    self.groups.info.store(ctx, shared);
                }
                let members = f.participants.clone();
                self.groups.live.insert(
                    gid,
                    Group {
                        members: members.clone(),
                    },
                );
                let reply = Arc::new(Reply {
                    status: Status::SUCCESS,
                    body: ReplyBody::Group {
                        members,
                        context_id,
                    },
                });
                let to = f.waiters.iter().map(|w| (w.conn, w.id)).collect();
                self.out.push_back(Output::SharedReply { to, reply });
            }
            GroupOp::Destruct => {
                self.groups.live.remove(&gid);
                self.forget_group_if_unused(gid);
                for w in &f.waiters {
                    self.reply_status(w.conn, w.id, Status::SUCCESS);
                }
            }
        }
    }
}
