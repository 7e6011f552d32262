//! Collectives in progress: which fences exist, who has arrived, who waits.
//!
//! Collectives (fence, connect, disconnect, group construct and destruct) are identified by their kind and participant list
//! (sorted, as given: ranks or WILDCARD); several over the same list complete in the order
//! they were entered, so a process's n-th fence over a list joins the n-th operation over that
//! list.

use std::collections::HashMap;

use pmix_types::{Info, Nspace, Proc, Rank};

use super::ConnId;
use super::store::NsId;

/// What a collective is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Kind {
    Fence,
    Connect,
    Disconnect,
    /// A group's construction or destruction, by the group's interned id.
    GroupConstruct(u32),
    GroupDestruct(u32),
}

pub(crate) struct Waiter {
    pub(crate) conn: ConnId,
    pub(crate) id: u32,
    pub(crate) collect: bool,
}

pub(crate) struct FenceOp {
    pub(crate) kind: Kind,
    pub(crate) participants: Vec<Proc>,
    pub(crate) info: Vec<Info>,
    /// Local participants, sorted.
    pub(crate) local: Vec<(NsId, Rank)>,
    /// Some participants live on other nodes: the host completes the fence.
    pub(crate) remote: bool,
    arrived: Vec<bool>,
    narrived: usize,
    pub(crate) waiters: Vec<Waiter>,
    pub(crate) at_host: bool,
}

impl FenceOp {
    pub(crate) fn all_local_arrived(&self) -> bool {
        self.narrived == self.local.len()
    }

    /// True if the fence still waits for this local participant.
    pub(crate) fn waits_for(&self, p: (NsId, Rank)) -> bool {
        self.local.binary_search(&p).is_ok_and(|i| !self.arrived[i])
    }

    fn has_arrived(&self, p: (NsId, Rank)) -> bool {
        self.local.binary_search(&p).is_ok_and(|i| self.arrived[i])
    }

    /// The namespaces its participant list names.
    pub(crate) fn nspaces(&self) -> Vec<Nspace> {
        let mut v: Vec<Nspace> = self.participants.iter().map(|p| p.nspace.clone()).collect();
        v.sort();
        v.dedup();
        v
    }
}

#[derive(Default)]
pub(crate) struct FenceTable {
    ops: HashMap<u64, FenceOp>,
    /// Operations by participant list, oldest first.
    by_participants: HashMap<(Kind, Vec<Proc>), Vec<u64>>,
    next: u64,
    /// Participant lists of collecting fences, numbered (see `Conn::collected`).
    list_ids: HashMap<Vec<Proc>, u32>,
}

impl FenceTable {
    /// The number of a participant list, the same for as long as the server runs: what a
    /// connection's collecting fences over that list are counted by.
    pub(crate) fn list_id(&mut self, participants: &[Proc]) -> u32 {
        if let Some(&id) = self.list_ids.get(participants) {
            return id;
        }
        let id = u32::try_from(self.list_ids.len()).unwrap_or(u32::MAX);
        self.list_ids.insert(participants.to_vec(), id);
        id
    }

    /// Enters `who` into the oldest fence over `participants` it has not entered yet; returns its id.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn join(
        &mut self,
        kind: Kind,
        participants: Vec<Proc>,
        local: Vec<(NsId, Rank)>,
        remote: bool,
        info: &[Info],
        who: (NsId, Rank),
        conn: ConnId,
        id: u32,
        collect: bool,
    ) -> u64 {
        let queue = self
            .by_participants
            .entry((kind, participants.clone()))
            .or_default();
        let existing = queue
            .iter()
            .copied()
            .find(|seq| self.ops.get(seq).is_some_and(|op| !op.has_arrived(who)));
        let seq = match existing {
            Some(seq) => seq,
            None => {
                self.next += 1;
                let seq = self.next;
                let arrived = vec![false; local.len()];
                self.ops.insert(
                    seq,
                    FenceOp {
                        kind,
                        participants,
                        info: info.to_vec(),
                        local,
                        remote,
                        arrived,
                        narrived: 0,
                        waiters: Vec::new(),
                        at_host: false,
                    },
                );
                queue.push(seq);
                seq
            }
        };
        if let Some(op) = self.ops.get_mut(&seq) {
            if let Ok(i) = op.local.binary_search(&who) {
                if !op.arrived[i] {
                    op.arrived[i] = true;
                    op.narrived += 1;
                }
            }
            op.waiters.push(Waiter { conn, id, collect });
        }
        seq
    }

    pub(crate) fn get(&self, seq: u64) -> Option<&FenceOp> {
        self.ops.get(&seq)
    }

    pub(crate) fn get_mut(&mut self, seq: u64) -> Option<&mut FenceOp> {
        self.ops.get_mut(&seq)
    }

    pub(crate) fn remove(&mut self, seq: u64) -> Option<FenceOp> {
        let op = self.ops.remove(&seq)?;
        let key = (op.kind, op.participants.clone());
        if let Some(q) = self.by_participants.get_mut(&key) {
            q.retain(|s| *s != seq);
            if q.is_empty() {
                self.by_participants.remove(&key);
            }
        }
        Some(op)
    }

    /// Ids of the operations matching `pred`.
    pub(crate) fn matching(&self, pred: impl Fn(&FenceOp) -> bool) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .ops
            .iter()
            .filter(|(_, op)| pred(op))
            .map(|(s, _)| *s)
            .collect();
        v.sort_unstable();
        v
    }

    /// A connection went away: its waiters will never read a reply.
    pub(crate) fn forget_conn(&mut self, conn: ConnId) {
        for op in self.ops.values_mut() {
            op.waiters.retain(|w| w.conn != conn);
        }
    }
}
