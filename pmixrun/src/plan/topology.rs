//! This node's processor topology, read from `/sys` (no hwloc): its hardware threads, the
//! cores, packages, caches and NUMA nodes they belong to, and which of them pmixrun may use.
//!
//! # What is read
//!
//! Under the root given (`/` on a real node, a directory of fixture files in tests):
//! `sys/devices/system/cpu/online` (the hardware threads), for each of them
//! `cpuN/topology/physical_package_id` and `core_id` (a missing or negative package is 0, a
//! missing core is the thread itself), `cpuN/cache/indexK/{level,type,shared_cpu_list}` (data
//! and unified caches of levels 1 to 3; instruction caches are left out, as hwloc does by
//! default), and `sys/devices/system/node/nodeN/cpulist` (NUMA nodes; none is one node 0).
//!
//! # Logical indexes
//!
//! Objects are numbered as hwloc numbers them (its "logical" indexes): packages in the order
//! of their first hardware thread, the cores and caches of each package in the same order, one
//! package after the other, the hardware threads core by core; NUMA nodes by their number. The
//! CPU sets (`PMIX_CPUSET`, affinity masks) use the kernel's numbers (hwloc's OS indexes).
//!
//! # The CPUs pmixrun may use
//!
//! [`allowed_cpus`]: pmixrun's own affinity mask (`sched_getaffinity`), within the CPU set of
//! its cgroup (`cpuset.cpus.effective` under cgroup v2, `cpuset.effective_cpus` or
//! `cpuset.cpus` under v1) when that can be read, within the online threads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use pmix_types::locality::parse_cpu_list;

/// One hardware thread and what it belongs to (logical indexes, see the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pu {
    /// The kernel's number (OS index).
    pub(crate) os: u32,
    /// Its logical index among the hardware threads.
    pub(crate) ht: u32,
    pub(crate) core: u32,
    pub(crate) package: u32,
    /// The NUMA node (its number).
    pub(crate) numa: u32,
    /// Its L1 (data or unified), L2 and L3 caches, where the kernel tells of them.
    pub(crate) caches: [Option<u32>; 3],
}

/// A node's hardware threads, in logical order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Topology {
    pub(crate) pus: Vec<Pu>,
}

/// Reads a file of `dir`, trimmed; `None` if it cannot be read.
fn read(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

/// One cache as the kernel describes it from one of its threads.
struct CacheSeen {
    level: usize,
    /// The first thread sharing it: what tells one cache from another of its level.
    first: u32,
}

/// The data and unified caches of levels 1 to 3 of the thread whose directory is `cpu`.
fn caches_of(cpu: &Path) -> Vec<CacheSeen> {
    let mut seen = Vec::new();
    let Ok(dir) = std::fs::read_dir(cpu.join("cache")) else {
        return seen;
    };
    for entry in dir.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with("index") {
            continue;
        }
        let p = entry.path();
        let level = read(&p.join("level")).and_then(|l| l.parse::<usize>().ok());
        let kind = read(&p.join("type")).unwrap_or_default();
        let shared = read(&p.join("shared_cpu_list")).and_then(|l| parse_cpu_list(&l));
        let (Some(level), Some(shared)) = (level, shared) else {
            continue;
        };
        if !(1..=3).contains(&level) || kind == "Instruction" {
            continue;
        }
        if let Some(&first) = shared.first() {
            seen.push(CacheSeen { level, first });
        }
    }
    seen
}

impl Topology {
    /// Reads the topology under `root` (see the module docs).
    pub(crate) fn read(root: &Path) -> Result<Topology, String> {
        let cpu_dir = root.join("sys/devices/system/cpu");
        let online_file = cpu_dir.join("online");
        let online = read(&online_file)
            .and_then(|l| parse_cpu_list(&l))
            .filter(|l| !l.is_empty())
            .ok_or_else(|| format!("cannot read the CPUs of {}", online_file.display()))?;
        let numa_of = numa_nodes(root);
        struct Raw {
            os: u32,
            package: i64,
            core: i64,
            numa: u32,
            caches: [Option<u32>; 3],
        }
        let mut raw: Vec<Raw> = online
            .iter()
            .map(|&os| {
                let dir = cpu_dir.join(format!("cpu{os}"));
                let num = |f: &str| {
                    read(&dir.join("topology").join(f)).and_then(|v| v.parse::<i64>().ok())
                };
                let mut caches = [None; 3];
                for c in caches_of(&dir) {
                    caches[c.level - 1] = Some(c.first);
                }
                Raw {
                    os,
                    package: num("physical_package_id").filter(|p| *p >= 0).unwrap_or(0),
                    core: num("core_id").filter(|c| *c >= 0).unwrap_or(i64::from(os)),
                    numa: numa_of.get(&os).copied().unwrap_or(0),
                    caches,
                }
            })
            .collect();
        // Packages in the order of their first thread; cores and caches of each package in
        // the order of theirs; threads core by core.
        let mut first_of_pkg: BTreeMap<i64, u32> = BTreeMap::new();
        let mut first_of_core: BTreeMap<(i64, i64), u32> = BTreeMap::new();
        for r in &raw {
            first_of_pkg.entry(r.package).or_insert(r.os);
            first_of_core.entry((r.package, r.core)).or_insert(r.os);
        }
        raw.sort_by_key(|r| {
            (
                first_of_pkg[&r.package],
                first_of_core[&(r.package, r.core)],
                r.os,
            )
        });
        let mut pkg_index: BTreeMap<i64, u32> = BTreeMap::new();
        let mut core_index: BTreeMap<(i64, i64), u32> = BTreeMap::new();
        let mut cache_index: [BTreeMap<u32, u32>; 3] = Default::default();
        let mut pus = Vec::with_capacity(raw.len());
        for (ht, r) in (0u32..).zip(&raw) {
            let n = pkg_index.len() as u32;
            let package = *pkg_index.entry(r.package).or_insert(n);
            let n = core_index.len() as u32;
            let core = *core_index.entry((r.package, r.core)).or_insert(n);
            let mut caches = [None; 3];
            for (level, first) in r.caches.iter().enumerate() {
                if let Some(first) = first {
                    let n = cache_index[level].len() as u32;
                    caches[level] = Some(*cache_index[level].entry(*first).or_insert(n));
                }
            }
            pus.push(Pu {
                os: r.os,
                ht,
                core,
                package,
                numa: r.numa,
                caches,
            });
        }
        Ok(Topology { pus })
    }

    /// The threads whose OS index is in `cpus` (ascending), in logical order.
    pub(crate) fn pus_of<'a>(&'a self, cpus: &'a [u32]) -> impl Iterator<Item = &'a Pu> + 'a {
        self.pus
            .iter()
            .filter(move |p| cpus.binary_search(&p.os).is_ok())
    }
}

/// The NUMA node of every thread the kernel lists under `sys/devices/system/node`.
fn numa_nodes(root: &Path) -> BTreeMap<u32, u32> {
    let mut of = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(root.join("sys/devices/system/node")) else {
        return of;
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(node) = name
            .strip_prefix("node")
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let cpus = read(&entry.path().join("cpulist")).and_then(|l| parse_cpu_list(&l));
        for cpu in cpus.unwrap_or_default() {
            of.insert(cpu, node);
        }
    }
    of
}

/// The CPU set of this process's cgroup, if it can be read (see the module docs).
fn cgroup_cpus(root: &Path) -> Option<Vec<u32>> {
    let text = read(&root.join("proc/self/cgroup"))?;
    let mut candidates: Vec<PathBuf> = Vec::new();
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let rel = path.trim_start_matches('/');
        if controllers.is_empty() {
            candidates.push(
                root.join("sys/fs/cgroup")
                    .join(rel)
                    .join("cpuset.cpus.effective"),
            );
        } else if controllers.split(',').any(|c| c == "cpuset") {
            let dir = root.join("sys/fs/cgroup/cpuset").join(rel);
            candidates.push(dir.join("cpuset.effective_cpus"));
            candidates.push(dir.join("cpuset.cpus"));
        }
    }
    candidates
        .iter()
        .filter_map(|f| read(f).and_then(|l| parse_cpu_list(&l)))
        .find(|l| !l.is_empty())
}

/// This process's affinity mask, ascending OS indexes.
fn affinity() -> Option<Vec<u32>> {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).ok()?;
    let cpus: Vec<u32> = (0..nix::sched::CpuSet::count())
        .filter(|&i| set.is_set(i).unwrap_or(false))
        .filter_map(|i| u32::try_from(i).ok())
        .collect();
    Some(cpus)
}

/// The CPUs pmixrun may use on this node (ascending OS indexes; see the module docs), among
/// the threads of `topo` read under `root`; the affinity mask counts only when `root` is `/`
/// (another root describes another machine). Never empty: should the masks leave nothing,
/// every thread.
pub(crate) fn allowed_cpus(root: &Path, topo: &Topology) -> Vec<u32> {
    let mut cpus: Vec<u32> = topo.pus.iter().map(|p| p.os).collect();
    cpus.sort_unstable();
    let all = cpus.clone();
    let own = if root == Path::new("/") {
        affinity()
    } else {
        None
    };
    for mask in [own, cgroup_cpus(root)].into_iter().flatten() {
        cpus.retain(|c| mask.binary_search(c).is_ok());
    }
    if cpus.is_empty() { all } else { cpus }
}

#[cfg(test)]
pub(crate) mod tests;
