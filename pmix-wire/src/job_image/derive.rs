//! The node and process levels of an image: what the host gave, and what the maps imply for
//! the keys it left out. One place derives them for everyone — the server's welcome and
//! expanded job data, the client's gets — so they cannot disagree.
//!
//! A rank's reserved values: `RANK`; where the map places it `NODEID`, `HOSTNAME`, `LOCAL_RANK`
//! and `NODE_RANK` (its position on the node, in map order); `GLOBAL_RANK` (offset plus rank),
//! `APPNUM` and `APP_RANK` (from the apps' leaders), `REINCARNATION` 0 and `SPAWNED`. A node's:
//! `NODEID`, `HOSTNAME`, `LOCAL_SIZE` and `NODE_SIZE`, `LOCAL_PEERS` (in map order) and
//! `LOCALLDR` (its lowest rank). Values the host gave win over derived ones.

use pmix_types::{Info, Rank, Value, attr};

use super::layout::Section;
use super::{JobImage, find};
use crate::{JobData, ProcRealm, Realm};

/// The most ranks one node may list: past it a node's peers are not derived (an image no
/// registration could make, read without allocating what it claims).
const MAX_NODE_RANKS: usize = 1 << 24;

/// The keys derived for a process, in the order [`JobImage::proc_info`] lists them.
pub const PROC_KEYS: [&str; 10] = [
    attr::RANK,
    attr::NODEID,
    attr::HOSTNAME,
    attr::LOCAL_RANK,
    attr::NODE_RANK,
    attr::GLOBAL_RANK,
    attr::APPNUM,
    attr::APP_RANK,
    attr::REINCARNATION,
    attr::SPAWNED,
];

/// The keys derived for a node of the map, in the order [`JobImage::node_info`] lists them.
pub const NODE_KEYS: [&str; 6] = [
    attr::NODEID,
    attr::HOSTNAME,
    attr::LOCAL_SIZE,
    attr::NODE_SIZE,
    attr::LOCAL_PEERS,
    attr::LOCALLDR,
];

impl JobImage {
    /// The node a rank runs on and its position there, from the map.
    pub fn placement(&self, rank: Rank) -> Option<(u32, u32)> {
        let t = self.table::<4>(Section::RankIndex);
        let i = t
            .partition_point(0, |first| first <= rank.0)
            .checked_sub(1)?;
        let [first, count, node, local] = t.record(i)?;
        (rank.0 - first < count).then(|| (node, local.saturating_add(rank.0 - first)))
    }

    /// The app number and leader of the app `rank` belongs to: the last app, in app-number
    /// order, whose leader is at or below the rank.
    fn app_for(&self, rank: Rank) -> (u32, Rank) {
        let apps = &self.0.app_of_rank;
        if apps.is_sorted_by_key(|&(_, ldr)| ldr) {
            let n = apps.partition_point(|&(_, ldr)| ldr <= rank);
            return n.checked_sub(1).map_or((0, Rank(0)), |i| apps[i]);
        }
        apps.iter()
            .rev()
            .find(|&&(_, ldr)| ldr <= rank)
            .copied()
            .unwrap_or((0, Rank(0)))
    }

    /// A derived value of a process of the job (not what the host gave).
    fn derived_proc(&self, rank: Rank, key: &str) -> Option<Value> {
        if !self.derives() || rank.0 >= self.0.size {
            return None;
        }
        let placed = || self.placement(rank);
        Some(match key {
            attr::RANK => rank.into(),
            attr::NODEID => placed()?.0.into(),
            attr::HOSTNAME => self.map_name(placed()?.0)?.into(),
            attr::LOCAL_RANK | attr::NODE_RANK => {
                u16::try_from(placed()?.1).unwrap_or(u16::MAX).into()
            }
            attr::GLOBAL_RANK => Rank(self.0.offset.saturating_add(rank.0)).into(),
            attr::APPNUM => self.app_for(rank).0.into(),
            attr::APP_RANK => {
                let ldr = self.app_for(rank).1;
                Rank(rank.0 - ldr.0.min(rank.0)).into()
            }
            attr::REINCARNATION => 0u32.into(),
            attr::SPAWNED => self.spawned().into(),
            _ => return None,
        })
    }

    /// A process-level value of `rank`: the host's, else derived.
    pub fn proc_value(&self, rank: Rank, key: &str) -> Option<Value> {
        if let Some(given) = self.given(Section::GivenProcs, rank.0) {
            if let Some(i) = given.iter().rev().find(|i| i.key.as_str() == key) {
                return Some(i.value.clone());
            }
        }
        self.derived_proc(rank, key)
    }

    /// The app number and node id of a rank, as its process level says.
    pub fn realms_of(&self, rank: Rank) -> (Option<u32>, Option<u32>) {
        let given = self.given(Section::GivenProcs, rank.0).unwrap_or_default();
        let value = |key: &str| {
            find(given, key)
                .and_then(Value::as_u32)
                .or_else(|| self.derived_proc(rank, key)?.as_u32())
        };
        (value(attr::APPNUM), value(attr::NODEID))
    }

    /// Every process-level value of `rank`, the host's first; `None` for a rank the image
    /// knows nothing of.
    pub fn proc_info(&self, rank: Rank) -> Option<Vec<Info>> {
        let given = self
            .given(Section::GivenProcs, rank.0)
            .map(<[Info]>::to_vec);
        let derives = self.derives() && rank.0 < self.0.size;
        if !derives {
            return given;
        }
        let mut p = given.unwrap_or_default();
        let had_rank = p.iter().any(|i| i.key.as_str() == attr::RANK);
        for key in PROC_KEYS {
            if p.iter().any(|i| i.key.as_str() == key) {
                continue;
            }
            if let Some(v) = self.derived_proc(rank, key) {
                let info = Info::attr(key, v);
                // The rank comes first.
                if key == attr::RANK && !had_rank {
                    p.insert(0, info);
                } else {
                    p.push(info);
                }
            }
        }
        Some(p)
    }

    /// The ranks on node `id` of the map, in map order.
    pub fn ranks_of_node(&self, id: u32) -> Option<Vec<Rank>> {
        if id >= self.0.nnodes {
            return None;
        }
        let idx = self.table::<1>(Section::NodeRangeIndex);
        let ranges = self.table::<2>(Section::NodeRanges);
        let (a, b) = (idx.field(id as usize, 0)?, idx.field(id as usize + 1, 0)?);
        let mut out = Vec::new();
        for i in a..b.min(u32::try_from(ranges.len()).unwrap_or(u32::MAX)) {
            let [first, count] = ranges.record(i as usize)?;
            // A count is bounded by the job's ranks, whatever the image claims.
            let end = first.saturating_add(count).min(self.0.size.max(first));
            if out.len() + (end - first) as usize > MAX_NODE_RANKS {
                return None;
            }
            out.extend((first..end).map(Rank));
        }
        Some(out)
    }

    fn derived_node(&self, id: u32, key: &str) -> Option<Value> {
        if !self.derives() || id >= self.0.nnodes {
            return None;
        }
        Some(match key {
            attr::NODEID => id.into(),
            attr::HOSTNAME => self.map_name(id)?.into(),
            attr::LOCAL_SIZE | attr::NODE_SIZE => {
                let n = self.ranks_of_node(id)?.len();
                u32::try_from(n).unwrap_or(u32::MAX).into()
            }
            attr::LOCAL_PEERS => join_ranks(&self.ranks_of_node(id)?).into(),
            attr::LOCALLDR => (*self.ranks_of_node(id)?.iter().min()?).into(),
            _ => return None,
        })
    }

    /// A node-level value of node `id`: the host's, else derived from the map.
    pub fn node_value(&self, id: u32, key: &str) -> Option<Value> {
        if let Some(given) = self.given(Section::GivenNodes, id) {
            if let Some(i) = given.iter().rev().find(|i| i.key.as_str() == key) {
                return Some(i.value.clone());
            }
        }
        self.derived_node(id, key)
    }

    /// Every node-level value of node `id`, the host's first.
    pub fn node_info(&self, id: u32) -> Option<Vec<Info>> {
        let given = self.given(Section::GivenNodes, id).map(<[Info]>::to_vec);
        if !self.derives() || id >= self.0.nnodes {
            return given;
        }
        let mut infos = given.unwrap_or_default();
        for key in NODE_KEYS {
            if !infos.iter().any(|i| i.key.as_str() == key) {
                if let Some(v) = self.derived_node(id, key) {
                    infos.push(Info::attr(key, v));
                }
            }
        }
        Some(infos)
    }

    /// The whole job data: every node's and every rank's realm.
    pub fn expand(&self) -> JobData {
        let mut job = self.levels();
        job.procs = self
            .proc_ranks()
            .into_iter()
            .filter_map(|rank| {
                Some(ProcRealm {
                    rank,
                    info: self.proc_info(rank)?,
                })
            })
            .collect();
        job
    }

    /// The job data without the process realms: the session, job and application levels and
    /// every node's realm (one per node, not per rank). With [`proc_ranks`](Self::proc_ranks)
    /// and [`proc_info`](Self::proc_info) it is [`expand`](Self::expand) taken one rank at a
    /// time, for a writer that never needs every rank's realm at once.
    pub fn levels(&self) -> JobData {
        let nodes = self
            .node_ids()
            .into_iter()
            .filter_map(|id| {
                Some(Realm {
                    id,
                    info: self.node_info(id)?,
                })
            })
            .collect();
        JobData {
            nspace: self.0.nspace.clone(),
            session: self.0.session.clone(),
            job: self.0.job.clone(),
            apps: self.0.apps.clone(),
            nodes,
            procs: Vec::new(),
        }
    }

    /// The ranks that have a process realm, ascending: every rank of a derived job, plus any
    /// the host gave values for.
    pub fn proc_ranks(&self) -> Vec<Rank> {
        let mut ranks = self.given_proc_ranks();
        if self.derives() {
            ranks.extend((0..self.0.size).map(Rank));
            ranks.sort_unstable();
            ranks.dedup();
        }
        ranks
    }
}

/// A rank list as `LOCAL_PEERS` holds it: comma-separated.
pub fn join_ranks(ranks: &[Rank]) -> String {
    let mut s = String::with_capacity(ranks.len() * 4);
    for (i, r) in ranks.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&r.0.to_string());
    }
    s
}
