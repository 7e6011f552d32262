//! The topology reader against sysfs-like trees written into a temporary directory.

use std::path::{Path, PathBuf};

use super::*;

/// A directory of its own under the temporary directory, removed when dropped.
pub(crate) struct Fixture(pub(crate) PathBuf);

impl Fixture {
    pub(crate) fn new(name: &str) -> Fixture {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("pmixrun-topo-{}-{name}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Fixture(dir)
    }

    /// Writes `text` into the file `rel` of the tree.
    pub(crate) fn file(&self, rel: &str, text: &str) {
        let path = self.0.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
        }
        std::fs::write(&path, format!("{text}\n")).unwrap_or_else(|e| panic!("{e}"));
    }

    pub(crate) fn root(&self) -> &Path {
        &self.0
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Two packages of two cores of two threads each, numbered as Linux numbers such machines
/// (the second thread of every core after the first threads of all): package 0 has CPUs
/// 0,1,4,5 (cores {0,4} and {1,5}), package 1 CPUs 2,3,6,7. L1 and L2 per core, L3 per
/// package, one NUMA node per package.
pub(crate) fn two_packages() -> Fixture {
    let f = Fixture::new("2x2x2");
    f.file("sys/devices/system/cpu/online", "0-7");
    for cpu in 0..8u32 {
        let first = cpu % 4;
        let package = first / 2;
        let core = first % 2;
        let core_cpus = format!("{first},{}", first + 4);
        let pkg_cpus = if package == 0 { "0-1,4-5" } else { "2-3,6-7" };
        let dir = format!("sys/devices/system/cpu/cpu{cpu}");
        f.file(
            &format!("{dir}/topology/physical_package_id"),
            &package.to_string(),
        );
        f.file(&format!("{dir}/topology/core_id"), &core.to_string());
        for (index, level, kind, shared) in [
            (0, 1, "Data", core_cpus.as_str()),
            (1, 1, "Instruction", core_cpus.as_str()),
            (2, 2, "Unified", core_cpus.as_str()),
            (3, 3, "Unified", pkg_cpus),
        ] {
            let c = format!("{dir}/cache/index{index}");
            f.file(&format!("{c}/level"), &level.to_string());
            f.file(&format!("{c}/type"), kind);
            f.file(&format!("{c}/shared_cpu_list"), shared);
        }
    }
    f.file("sys/devices/system/node/node0/cpulist", "0-1,4-5");
    f.file("sys/devices/system/node/node1/cpulist", "2-3,6-7");
    f
}

#[test]
fn threads_are_numbered_as_hwloc_numbers_them() {
    let f = two_packages();
    let topo = Topology::read(f.root()).unwrap_or_else(|e| panic!("{e}"));
    let col = |g: fn(&Pu) -> u32| topo.pus.iter().map(g).collect::<Vec<u32>>();
    assert_eq!(col(|p| p.os), [0, 4, 1, 5, 2, 6, 3, 7]);
    assert_eq!(col(|p| p.ht), [0, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(col(|p| p.core), [0, 0, 1, 1, 2, 2, 3, 3]);
    assert_eq!(col(|p| p.package), [0, 0, 0, 0, 1, 1, 1, 1]);
    assert_eq!(col(|p| p.numa), [0, 0, 0, 0, 1, 1, 1, 1]);
    let cache = |level: usize| topo.pus.iter().map(|p| p.caches[level]).collect::<Vec<_>>();
    assert_eq!(cache(0), [0, 0, 1, 1, 2, 2, 3, 3].map(Some));
    assert_eq!(cache(1), [0, 0, 1, 1, 2, 2, 3, 3].map(Some));
    assert_eq!(cache(2), [0, 0, 0, 0, 1, 1, 1, 1].map(Some));
}

#[test]
fn what_the_kernel_does_not_tell_has_defaults() {
    // No caches, no NUMA directory, an unknown package (-1), no core ids: one package, one
    // NUMA node, each thread a core of its own.
    let f = Fixture::new("bare");
    f.file("sys/devices/system/cpu/online", "0-2");
    for cpu in 0..3 {
        f.file(
            &format!("sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id"),
            "-1",
        );
    }
    let topo = Topology::read(f.root()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(topo.pus.len(), 3);
    assert!(topo.pus.iter().all(|p| p.package == 0 && p.numa == 0));
    assert_eq!(
        topo.pus.iter().map(|p| p.core).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    assert!(topo.pus.iter().all(|p| p.caches == [None; 3]));

    let none = Fixture::new("none");
    let err = Topology::read(none.root()).err().unwrap_or_default();
    assert!(err.contains("online"), "{err}");
}

#[test]
fn the_cgroup_cpu_set_is_found_under_v2_and_v1() {
    let v2 = Fixture::new("cg2");
    v2.file("proc/self/cgroup", "0::/job/step");
    v2.file("sys/fs/cgroup/job/step/cpuset.cpus.effective", "2-3,6");
    assert_eq!(cgroup_cpus(v2.root()), Some(vec![2, 3, 6]));

    let v1 = Fixture::new("cg1");
    v1.file(
        "proc/self/cgroup",
        "5:memory:/x\n3:cpuset,cpu:/slurm/job1\n0::/",
    );
    v1.file("sys/fs/cgroup/cpuset/slurm/job1/cpuset.cpus", "1,5");
    assert_eq!(cgroup_cpus(v1.root()), Some(vec![1, 5]));
    v1.file("sys/fs/cgroup/cpuset/slurm/job1/cpuset.effective_cpus", "5");
    assert_eq!(cgroup_cpus(v1.root()), Some(vec![5]));

    let unreadable = Fixture::new("cg0");
    unreadable.file("proc/self/cgroup", "0::/gone");
    assert_eq!(cgroup_cpus(unreadable.root()), None);
}

#[test]
fn the_allowed_cpus_are_within_the_cgroup_and_the_affinity_mask() {
    // A tree of another machine: its cgroup counts, this process's mask does not.
    let f = Fixture::new("allowed");
    f.file("sys/devices/system/cpu/online", "0-7");
    f.file("proc/self/cgroup", "0::/job");
    f.file("sys/fs/cgroup/job/cpuset.cpus.effective", "2-3,6");
    let topo = Topology::read(f.root()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(allowed_cpus(f.root(), &topo), [2, 3, 6]);
    // A cgroup leaving none of the threads: every thread.
    f.file("sys/fs/cgroup/job/cpuset.cpus.effective", "9");
    assert_eq!(allowed_cpus(f.root(), &topo), [0, 1, 2, 3, 4, 5, 6, 7]);
    // This machine: within this process's own mask.
    let here = Topology::read(Path::new("/")).unwrap_or_else(|e| panic!("{e}"));
    let mask = affinity().unwrap_or_default();
    let got = allowed_cpus(Path::new("/"), &here);
    assert!(
        !got.is_empty() && got.iter().all(|c| mask.contains(c)),
        "{got:?} {mask:?}"
    );
}
