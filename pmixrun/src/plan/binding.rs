//! Where on its node each process runs (`--bind-to`), and how that is told to it: the CPU set
//! (`PMIX_CPUSET`), the locality string (`PMIX_LOCALITY_STRING`) and the rank among the
//! node's processes on the same package (`PMIX_PACKAGE_RANK`).
//!
//! # The rules
//!
//! - The CPUs a node's processes may use are those pmixrun (or its daemon) may use there
//!   ([`crate::plan::topology::allowed_cpus`]).
//! - **`--bind-to none`** (the default): each process may run on all of them, and is not
//!   pinned. **`core`**, **`package`** (`socket`), **`numa`**: the objects of that kind that
//!   have allowed CPUs, in logical order, are dealt out to the node's processes of the job
//!   in local-rank order, one each, starting again from the first when there are more
//!   processes than objects (then several share one, as `--oversubscribe` would); a process
//!   is pinned (`sched_setaffinity`, before its program starts) to the allowed CPUs of its
//!   object. A job started while others run on the node is dealt out after them: its
//!   processes take the first turns of the deal that no running process holds ([`Claims`]),
//!   so a spawned job's processes go to the objects after its parent's, not on top of them;
//!   the turns of a job come free when it ends.
//! - **`--map-by core|package|numa`** spreads them first: local rank `i` goes to the
//!   `i mod m`-th of the `m` objects of that kind (with allowed CPUs), and is bound to the
//!   next of the `--bind-to` objects that have CPUs there (the whole object when it is the
//!   larger: `--map-by core --bind-to package` binds to the core's package). `--bind-to`
//!   defaults to the `--map-by` object then. So `--map-by package --bind-to core` puts rank 0
//!   on the first core of package 0, rank 1 on the first core of package 1, rank 2 on the
//!   second core of package 0...
//! - Every process's `PMIX_CPUSET` is its CPU set in hwloc's list form (`0-3`), bound or not
//!   (unbound: every allowed CPU), and its `PMIX_LOCALITY_STRING` names the objects of each
//!   kind its CPUs touch (`SK0:L30:L20:L10:CR0:HT0:NM0`, see `pmix_types::locality`). Both go
//!   into the job's registration as data of each of the node's processes, so that a process
//!   reads its peers' too. (PRRTE gives an unbound process neither. pmix-rs gives both always,
//!   so that every process can tell which package and NUMA node it may run on.) The strings
//!   are those libpmix's server writes for the same CPUs (`tests/placement.rs` compares them
//!   on a two-package tree that hwloc reads too).
//! - `PMIX_PACKAGE_RANK`: among the node's processes of the job whose first CPU is on the
//!   same package, this one's place in local-rank order.

use std::sync::{Arc, Mutex, PoisonError};

use pmix_types::locality::format_cpu_list;

use crate::cli::BindTo;
use crate::plan::topology::{Pu, Topology};

/// What one process of a node is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bound {
    /// The CPUs it may run on (OS indexes, ascending).
    pub(crate) cpus: Vec<u32>,
    /// Whether it is pinned to them.
    pub(crate) pinned: bool,
    /// The object it is bound to, for `--report-bindings` (`core 3`), if bound.
    pub(crate) object: Option<String>,
    /// Its `PMIX_LOCALITY_STRING`.
    pub(crate) locality: String,
    /// Its `PMIX_PACKAGE_RANK`.
    pub(crate) package_rank: u16,
}

impl Bound {
    /// Its `PMIX_CPUSET`.
    pub(crate) fn cpuset(&self) -> String {
        format_cpu_list(&self.cpus)
    }

    /// What `--report-bindings` says of it.
    pub(crate) fn describe(&self) -> String {
        match &self.object {
            Some(o) => format!("bound to {o}: CPUs {} ({})", self.cpuset(), self.locality),
            None => format!("not bound: CPUs {} ({})", self.cpuset(), self.locality),
        }
    }
}

/// The object kind of `bind_to` a thread belongs to, and its name in reports.
fn object_of(pu: &Pu, bind_to: BindTo) -> Option<(u32, &'static str)> {
    match bind_to {
        BindTo::None => None,
        BindTo::Core => Some((pu.core, "core")),
        BindTo::Package => Some((pu.package, "package")),
        BindTo::Numa => Some((pu.numa, "NUMA node")),
    }
}

/// The locality string of a process that may run on `cpus` (OS indexes, ascending): for each
/// kind of object the topology has, the logical indexes of those the CPUs touch.
pub(crate) fn locality_string(topo: &Topology, cpus: &[u32]) -> String {
    /// The object of each kind a thread belongs to, in the string's order.
    fn object(kind: &str, p: &Pu) -> Option<u32> {
        match kind {
            "SK" => Some(p.package),
            "L3" => p.caches[2],
            "L2" => p.caches[1],
            "L1" => p.caches[0],
            "CR" => Some(p.core),
            "HT" => Some(p.ht),
            _ => Some(p.numa),
        }
    }
    let pus: Vec<&Pu> = topo.pus_of(cpus).collect();
    let mut parts = Vec::new();
    for kind in ["SK", "L3", "L2", "L1", "CR", "HT", "NM"] {
        let mut objs: Vec<u32> = pus.iter().filter_map(|p| object(kind, p)).collect();
        objs.sort_unstable();
        objs.dedup();
        if !objs.is_empty() {
            parts.push(format!("{kind}{}", format_cpu_list(&objs)));
        }
    }
    parts.join(":")
}

/// One object of the topology (a core, package or NUMA node) and its allowed CPUs.
struct Object {
    /// Its logical index (a NUMA node: its number) and its kind's name in reports.
    id: (u32, &'static str),
    /// Its CPUs among those asked for, ascending.
    cpus: Vec<u32>,
}

/// The objects of kind `kind` that have CPUs among `cpus`, each with those CPUs, in logical
/// order (NUMA nodes by number). None for [`BindTo::None`].
fn objects_of(topo: &Topology, cpus: &[u32], kind: BindTo) -> Vec<Object> {
    let mut objects: Vec<Object> = Vec::new();
    for pu in topo.pus_of(cpus) {
        let Some(id) = object_of(pu, kind) else {
            continue;
        };
        match objects.iter_mut().find(|o| o.id == id) {
            Some(o) => o.cpus.push(pu.os),
            None => objects.push(Object {
                id,
                cpus: vec![pu.os],
            }),
        }
    }
    if kind == BindTo::Numa {
        objects.sort_by_key(|o| o.id.0);
    }
    for o in &mut objects {
        o.cpus.sort_unstable();
    }
    objects
}

/// What each process of a job on this node gets (index: local rank), the node's topology
/// `topo`, its allowed CPUs `allowed` (ascending, not empty), placed on the objects of kind
/// `map_to` in turn (`--map-by core|package|numa`; [`BindTo::None`]: all allowed CPUs as one)
/// and bound as `bind_to` says (see the module docs); `turns[i]` is local rank `i`'s turn in
/// the deal ([`Claims::claim`]).
pub(crate) fn bind(
    topo: &Topology,
    allowed: &[u32],
    map_to: BindTo,
    bind_to: BindTo,
    turns: &[usize],
) -> Vec<Bound> {
    let mut places: Vec<Vec<u32>> = objects_of(topo, allowed, map_to)
        .into_iter()
        .map(|o| o.cpus)
        .collect();
    if places.is_empty() {
        places.push(allowed.to_vec());
    }
    let targets = objects_of(topo, allowed, bind_to);
    // For each place, the objects to bind to that have CPUs in it (each with all its allowed
    // CPUs: an object larger than the place is bound to whole).
    let within: Vec<Vec<&Object>> = places
        .iter()
        .map(|place| {
            targets
                .iter()
                .filter(|o| o.cpus.iter().any(|c| place.binary_search(c).is_ok()))
                .collect()
        })
        .collect();
    let mut bound: Vec<Bound> = turns
        .iter()
        .map(|&i| {
            let (place, turn) = (i % places.len(), i / places.len());
            let (cpus, object) = match within[place].as_slice() {
                [] => (allowed.to_vec(), None),
                objs => {
                    let o = objs[turn % objs.len()];
                    let (index, kind) = o.id;
                    (o.cpus.clone(), Some(format!("{kind} {index}")))
                }
            };
            Bound {
                locality: locality_string(topo, &cpus),
                pinned: object.is_some(),
                cpus,
                object,
                package_rank: 0,
            }
        })
        .collect();
    // The package of a process: that of its first CPU.
    let package_of = |b: &Bound| topo.pus_of(&b.cpus).next().map(|p| p.package);
    let packages: Vec<Option<u32>> = bound.iter().map(package_of).collect();
    for (i, b) in bound.iter_mut().enumerate() {
        let before = packages[..i].iter().filter(|p| **p == packages[i]).count();
        b.package_rank = u16::try_from(before).unwrap_or(u16::MAX);
    }
    bound
}

/// The turns of the deal ([`bind`]) that the jobs running on a node hold, so that a job
/// started while others run is dealt out after them.
#[derive(Debug, Default)]
pub(crate) struct Claims {
    /// Each running job's (by namespace) turns, one per local process.
    held: Vec<(String, Vec<usize>)>,
}

impl Claims {
    /// The turns of the `n` processes of `job` on this node: those it holds already, else the
    /// first `n` that no other job holds, from then on its own.
    pub(crate) fn claim(&mut self, job: &str, n: usize) -> Vec<usize> {
        if let Some((_, turns)) = self.held.iter().find(|(j, _)| j == job) {
            return turns.clone();
        }
        let mut taken: Vec<usize> = self
            .held
            .iter()
            .flat_map(|(_, t)| t.iter().copied())
            .collect();
        taken.sort_unstable();
        let mut turns = Vec::with_capacity(n);
        let mut next = 0;
        while turns.len() < n {
            if taken.binary_search(&next).is_err() {
                turns.push(next);
            }
            next += 1;
        }
        self.held.push((job.to_owned(), turns.clone()));
        turns
    }

    /// `job` ended: its turns are free again.
    pub(crate) fn release(&mut self, job: &str) {
        self.held.retain(|(j, _)| j != job);
    }
}

/// The variable that makes pmixrun read another topology than this node's: the root of a
/// sysfs-like tree (`topology.rs`), for tests that compare pmixrun's locality strings with
/// libpmix's for machines they are not on (hwloc reads the same tree through `HWLOC_FSROOT`).
/// Processes are then told of that topology but pinned to nothing.
pub(crate) const TOPOLOGY_ROOT_VAR: &str = "PMIXRS_TOPOLOGY_ROOT";

/// This node's topology and the CPUs pmixrun may use there, as read from the sysfs-like tree
/// at a root.
struct NodeCpus {
    root: std::path::PathBuf,
    topo: Topology,
    allowed: Vec<u32>,
}

/// [`NodeCpus`] of `root`, read once per process: a machine's CPUs and pmixrun's share of them
/// do not change during a run, and reading them takes a few hundred microseconds of file
/// reads, which every job's start (each spawn, on every node) would otherwise pay. Read again
/// only when asked for another root (tests) or when the last read failed.
fn node_cpus(root: &std::path::Path) -> Result<Arc<NodeCpus>, String> {
    static READ: Mutex<Option<Arc<NodeCpus>>> = Mutex::new(None);
    // A poisoned lock guards a complete value or none: it is replaced whole.
    let mut read = READ.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(known) = read.as_ref().filter(|k| k.root == root) {
        return Ok(Arc::clone(known));
    }
    let topo = Topology::read(root)?;
    let allowed = crate::plan::topology::allowed_cpus(root, &topo);
    let known = Arc::new(NodeCpus {
        root: root.to_path_buf(),
        topo,
        allowed,
    });
    *read = Some(Arc::clone(&known));
    Ok(known)
}

/// What each process of a job on this node gets, `turns` their turns in the deal ([`bind`]
/// on this node's topology and allowed CPUs). `None` when the topology cannot be read and nothing is to be bound (the
/// processes then get no CPU set, locality string or package rank); an error when it cannot
/// be read and `bind_to` asks for binding.
pub(crate) fn on_this_node(
    map_to: BindTo,
    bind_to: BindTo,
    turns: &[usize],
) -> Result<Option<Vec<Bound>>, String> {
    let root = topology_root();
    let this_machine = root == std::path::Path::new("/");
    match node_cpus(&root) {
        Ok(node) => {
            let mut bound = bind(&node.topo, &node.allowed, map_to, bind_to, turns);
            if !this_machine {
                bound.iter_mut().for_each(|b| b.pinned = false);
            }
            Ok(Some(bound))
        }
        Err(e) if bind_to == BindTo::None && map_to == BindTo::None => {
            tracing::debug!("no locality for the processes: {e}");
            Ok(None)
        }
        Err(e) => Err(format!("cannot bind the processes: {e}")),
    }
}

/// Whether this node is oversubscribed once processes holding `turns` in the deal run on it
/// (after the jobs running here, [`Claims`]): whether they are more than the CPUs (hardware
/// threads) pmixrun may use here, so that some must wait for a CPU while others run (a Slurm
/// allocation's CPUs are its tasks' slots, hardware threads included). Told to the job's
/// processes here (`PMIX_NODE_OVERSUBSCRIBED`, as PRRTE tells of a node past its slots):
/// Open MPI's then yield the CPU while they wait instead of spinning, which a process that
/// needs the CPU (a spawned child starting) would wait for. False when the topology cannot be
/// read.
pub(crate) fn oversubscribed(turns: &[usize]) -> bool {
    let Ok(node) = node_cpus(&topology_root()) else {
        return false;
    };
    turns.iter().any(|&t| t >= node.allowed.len().max(1))
}

/// Where this node's topology is read: `/`, or the tree [`TOPOLOGY_ROOT_VAR`] names.
fn topology_root() -> std::path::PathBuf {
    std::env::var_os(TOPOLOGY_ROOT_VAR)
        .map_or_else(|| std::path::PathBuf::from("/"), std::path::PathBuf::from)
}

#[cfg(test)]
mod tests;
