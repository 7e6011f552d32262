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

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use pmix_types::{DataRange, Info, Proc, Rank, Status, attr};
use pmix_wire::{Event, Reply, ReplyBody};
use serde::{Deserialize, Serialize};

use super::collective::Collectives;
use super::fence::{FenceTable, Kind};
use super::host_ops::{GroupOp, HostCall, HostOutcome, PendingHost, decode_frames, failure_of};
use super::timers::Timers;
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

/// A local process waiting for another's answer in a group's formation
/// (`group_membership.rs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Wait {
    pub(super) waiter: Proc,
    pub(super) awaited: Proc,
    pub(super) grp: String,
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
    pub(super) waits: Vec<Wait>,
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

    /// A fence's participants with each constructed group named in them by its id
    /// (`{grp, WILDCARD}`) replaced by the group's members as this server knows them, those on
    /// other nodes included, as OpenPMIx's servers do. A name `is_nspace` knows stays a
    /// namespace; any other name, or a group named with a rank, is left for the fence to
    /// refuse.
    pub(super) fn expand_ids(
        &self,
        procs: Vec<Proc>,
        is_nspace: impl Fn(&str) -> bool,
    ) -> Vec<Proc> {
        let members_of = |p: &Proc| {
            if p.rank != Rank::WILDCARD || is_nspace(p.nspace.as_str()) {
                return None;
            }
            self.id_of(p.nspace.as_str())
                .and_then(|gid| self.members(gid))
        };
        if !procs.iter().any(|p| members_of(p).is_some()) {
            return procs;
        }
        let mut out = Vec::with_capacity(procs.len());
        for p in procs {
            match members_of(&p) {
                Some(members) => out.extend_from_slice(members),
                None => out.push(p),
            }
        }
        out
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

    /// Sets the sequence this server's context ids are taken from.
    fn set_context_ids(&mut self, first: u64, step: u64) {
        self.next_context_id = first;
        self.context_step = step.max(1);
    }

    /// A member's construct or destruct of `grp` over `procs`: the collective it enters (its
    /// kind and participants), or the status refusing it.
    fn enter(
        &mut self,
        op: GroupOp,
        grp: &str,
        mut procs: Vec<Proc>,
        me: &Proc,
        info: &[Info],
    ) -> Result<(Kind, Vec<Proc>), Status> {
        if grp.is_empty() {
            return Err(Status::ERR_BAD_PARAM);
        }
        let gid = self.intern(grp);
        if op == GroupOp::Destruct {
            // The members as this server knows them, which may have left since the client
            // learned them.
            match self.live.get(&gid) {
                Some(g) => procs = g.members.clone(),
                None if procs.is_empty() => {
                    return Err(Status::ERR_NOT_FOUND);
                }
                None => {}
            }
        }
        if procs.is_empty() {
            return Err(Status::ERR_BAD_PARAM);
        }
        if op == GroupOp::Construct {
            self.info.arrived(gid, me, info);
        }
        let kind = match op {
            GroupOp::Construct => Kind::GroupConstruct(gid),
            GroupOp::Destruct => Kind::GroupDestruct(gid),
        };
        Ok((kind, procs))
    }

    /// Every local member of collective `seq` arrived: what comes next.
    fn ready(&mut self, seq: u64, op: GroupOp, gid: u32, table: &mut FenceTable) -> GroupStep {
        let Some(f) = table.get(seq) else {
            return GroupStep::Wait;
        };
        let proposal = (op == GroupOp::Construct
            && info_flag(&f.info, attr::GROUP_ASSIGN_CONTEXT_ID))
        .then(|| self.take_context_id());
        let mine = Contribution {
            context_id: proposal,
            info: if op == GroupOp::Construct {
                self.info.take(gid)
            } else {
                Vec::new()
            },
        };
        if !f.remote {
            return GroupStep::Finish(vec![mine]);
        }
        let mut data = Vec::new();
        if let Err(e) = pmix_wire::encode_frame(&vec![mine], &mut data) {
            return GroupStep::Fail(e.status());
        }
        let procs = f.participants.clone();
        let info = f.info.clone();
        if let Some(f) = table.get_mut(seq) {
            f.at_host = true;
        }
        let grp = self.name(gid).to_owned();
        GroupStep::Host(
            PendingHost::Group { seq, op, gid },
            HostCall::Group {
                op,
                grp,
                procs,
                info,
                data,
            },
        )
    }

    /// Completes collective `seq` of group `gid` with every node's contribution.
    fn finish(
        &mut self,
        (seq, op, gid): (u64, GroupOp, u32),
        parts: Vec<Contribution>,
        collectives: &mut Collectives,
        timers: &mut Timers,
        out: &mut VecDeque<Output>,
    ) {
        let Some(f) = collectives.take(seq, timers) else {
            return;
        };
        match op {
            GroupOp::Construct => {
                let context_id = parts.iter().filter_map(|p| p.context_id).min();
                if let Some(ctx) = context_id {
                    let shared = parts.into_iter().flat_map(|p| p.info).collect();
                    self.info.store(ctx, shared);
                }
                let members = f.participants.clone();
                self.live.insert(
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
                out.push_back(Output::SharedReply { to, reply });
            }
            GroupOp::Destruct => {
                self.live.remove(&gid);
                self.forget_if_unused(gid, &collectives.table);
                for w in &f.waiters {
                    let reply = Reply::status(Status::SUCCESS);
                    out.push_back(Output::Reply {
                        conn: w.conn,
                        id: w.id,
                        reply,
                    });
                }
            }
        }
    }

    /// The events telling the other members of constructed groups that `gone` ended without
    /// finalize (`GROUP_MEMBER_FAILED`, with `GROUP_ID` and `EVENT_AFFECTED_PROC`), raised by
    /// `me`.
    fn member_gone(&self, gone: &Proc, me: &Proc) -> Vec<Event> {
        let hit =
            |p: &Proc| p.nspace == gone.nspace && (p.rank == gone.rank || p.rank == Rank::WILDCARD);
        let mut events = Vec::new();
        for (gid, g) in &self.live {
            if !g.members.iter().any(hit) {
                continue;
            }
            let range =
                pmix_types::DataArray::from_procs(g.members.iter().filter(|p| *p != gone).cloned());
            events.push(Event {
                code: Status::GROUP_MEMBER_FAILED,
                source: me.clone(),
                range: DataRange::CUSTOM,
                info: vec![
                    Info::attr(attr::GROUP_ID, self.name(*gid)),
                    Info::attr(attr::EVENT_AFFECTED_PROC, gone.clone()),
                    Info::attr(attr::EVENT_CUSTOM_RANGE, range),
                ],
            });
        }
        events
    }

    /// Forgets the id of group `gid` once nothing refers to it (no collective of `table`).
    pub(super) fn forget_if_unused(&mut self, gid: u32, table: &FenceTable) {
        if self.live.contains_key(&gid) {
            return;
        }
        let pending = table.matching(
            |op| matches!(op.kind, Kind::GroupConstruct(g) | Kind::GroupDestruct(g) if g == gid),
        );
        if pending.is_empty() {
            self.forget(gid);
        }
    }
}

/// What a group's collective does once its local members are all there.
enum GroupStep {
    /// It is gone.
    Wait,
    /// Complete here with this node's contribution alone.
    Finish(Vec<Contribution>),
    Fail(Status),
    /// Hand this node's part to the host.
    Host(PendingHost, HostCall),
}

impl Engine {
    /// Sets the sequence this server's context ids are taken from.
    pub(crate) fn set_context_ids(&mut self, first: u64, step: u64) {
        self.groups.set_context_ids(first, step);
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
        procs: Vec<Proc>,
        info: &[Info],
        now: Instant,
    ) {
        match self.groups.enter(op, &grp, procs, me, info) {
            Ok((kind, procs)) => self.collective(kind, conn, id, me, procs, info, now),
            Err(status) => self.reply_status(conn, id, status),
        }
    }

    /// Every local member arrived: complete here, or hand this node's part to the host.
    pub(super) fn group_ready(&mut self, seq: u64, op: GroupOp, gid: u32) {
        match self.groups.ready(seq, op, gid, &mut self.collectives.table) {
            GroupStep::Wait => {}
            GroupStep::Finish(parts) => self.finish_group(seq, op, gid, Ok(parts)),
            GroupStep::Fail(status) => self.fail_fence(seq, status),
            GroupStep::Host(pending, call) => self.host_call(pending, call),
        }
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
    /// of it.
    pub(super) fn group_member_gone(&mut self, gone: &Proc) {
        for e in self.groups.member_gone(gone, self.nspaces.me()) {
            self.notify(&e, None);
        }
    }

    fn finish_group(
        &mut self,
        seq: u64,
        op: GroupOp,
        gid: u32,
        parts: Result<Vec<Contribution>, Status>,
    ) {
        match parts {
            Ok(parts) => self.groups.finish(
                (seq, op, gid),
                parts,
                &mut self.collectives,
                &mut self.timers,
                &mut self.out,
            ),
            Err(status) => self.fail_fence(seq, status),
        }
    }
}
