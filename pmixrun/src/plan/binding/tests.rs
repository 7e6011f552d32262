//! Binding and locality strings on fixture topologies (`topology_tests.rs`).

use super::*;
use crate::plan::topology::tests::two_packages;

fn topo() -> Topology {
    let f = two_packages();
    Topology::read(f.root()).unwrap_or_else(|e| panic!("{e}"))
}

const ALL: [u32; 8] = [0, 1, 2, 3, 4, 5, 6, 7];

#[test]
fn locality_strings_name_every_object_touched() {
    let t = topo();
    assert_eq!(
        locality_string(&t, &[1, 5]),
        "SK0:L30:L21:L11:CR1:HT2-3:NM0"
    );
    assert_eq!(locality_string(&t, &[6]), "SK1:L31:L22:L12:CR2:HT5:NM1");
    assert_eq!(
        locality_string(&t, &ALL),
        "SK0-1:L30-1:L20-3:L10-3:CR0-3:HT0-7:NM0-1"
    );
}

#[test]
fn bind_to_core_deals_the_cores_out_in_turn() {
    let t = topo();
    let b = bind(&t, &ALL, BindTo::None, BindTo::Core, &first(5));
    let cpus: Vec<&[u32]> = b.iter().map(|b| b.cpus.as_slice()).collect();
    assert_eq!(cpus, [&[0, 4][..], &[1, 5], &[2, 6], &[3, 7], &[0, 4]]);
    assert!(b.iter().all(|b| b.pinned));
    assert_eq!(b[1].object.as_deref(), Some("core 1"));
    assert_eq!(b[1].cpuset(), "1,5");
    assert_eq!(b[2].locality, "SK1:L31:L22:L12:CR2:HT4-5:NM1");
    let ranks: Vec<u16> = b.iter().map(|b| b.package_rank).collect();
    assert_eq!(ranks, [0, 1, 0, 1, 2]);
    // Two processes on cores of one package share it, its L3 and NUMA node, nothing below.
    let rel = pmix_types::locality::relative_locality(&b[0].locality, &b[1].locality);
    assert_eq!(rel.map(|l| l.0), Some(0x4000 | 0x20 | 0x10 | 0x40));
}

#[test]
fn only_the_allowed_cpus_are_used() {
    let t = topo();
    // A cgroup of CPUs 1, 2, 5 and 6: half of each package.
    let allowed = [1, 2, 5, 6];
    let b = bind(&t, &allowed, BindTo::None, BindTo::Package, &first(3));
    let cpus: Vec<&[u32]> = b.iter().map(|b| b.cpus.as_slice()).collect();
    assert_eq!(cpus, [&[1, 5][..], &[2, 6], &[1, 5]]);
    assert_eq!(b[1].object.as_deref(), Some("package 1"));
    let numa = bind(&t, &[6, 7], BindTo::None, BindTo::Numa, &first(2));
    assert_eq!(numa[0].cpus, [6, 7]);
    assert_eq!(numa[0].object.as_deref(), Some("NUMA node 1"));
    assert_eq!(numa[1].package_rank, 1);
    let cores = bind(&t, &allowed, BindTo::None, BindTo::Core, &first(4));
    let cpus: Vec<&[u32]> = cores.iter().map(|b| b.cpus.as_slice()).collect();
    assert_eq!(cpus, [&[1, 5][..], &[2, 6], &[1, 5], &[2, 6]]);
}

#[test]
fn unbound_processes_may_use_every_allowed_cpu() {
    let t = topo();
    let b = bind(&t, &[0, 1, 4], BindTo::None, BindTo::None, &first(3));
    assert!(
        b.iter()
            .all(|b| !b.pinned && b.object.is_none() && b.cpus == [0, 1, 4])
    );
    assert_eq!(b[0].locality, "SK0:L30:L20-1:L10-1:CR0-1:HT0-2:NM0");
    assert_eq!(
        b.iter().map(|b| b.package_rank).collect::<Vec<_>>(),
        [0, 1, 2]
    );
    assert!(b[0].describe().starts_with("not bound: CPUs 0-1,4 "));
}

#[test]
fn map_by_an_object_spreads_the_processes_before_binding_them() {
    let t = topo();
    let cpus = |b: &[Bound]| b.iter().map(|b| b.cpus.clone()).collect::<Vec<_>>();
    // By package, bound to cores: the packages in turn, the cores of each in turn.
    let b = bind(&t, &ALL, BindTo::Package, BindTo::Core, &first(5));
    assert_eq!(
        cpus(&b),
        [vec![0, 4], vec![2, 6], vec![1, 5], vec![3, 7], vec![0, 4]]
    );
    assert_eq!(
        b.iter().map(|b| b.package_rank).collect::<Vec<_>>(),
        [0, 0, 1, 1, 2]
    );
    // By package, bound to packages (the default then): whole packages in turn.
    let b = bind(&t, &ALL, BindTo::Package, BindTo::Package, &first(3));
    assert_eq!(
        cpus(&b),
        [vec![0, 1, 4, 5], vec![2, 3, 6, 7], vec![0, 1, 4, 5]]
    );
    // By core, bound to the core's package: the larger object whole.
    let b = bind(&t, &ALL, BindTo::Core, BindTo::Package, &first(3));
    assert_eq!(
        cpus(&b),
        [vec![0, 1, 4, 5], vec![0, 1, 4, 5], vec![2, 3, 6, 7]]
    );
    // By NUMA node, not bound: every allowed CPU, nothing pinned.
    let b = bind(&t, &ALL, BindTo::Numa, BindTo::None, &first(2));
    assert!(b.iter().all(|b| !b.pinned && b.cpus == ALL));
}

/// The first `n` turns of the deal: a job alone on its node.
fn first(n: usize) -> Vec<usize> {
    (0..n).collect()
}

#[test]
fn a_job_started_beside_another_is_dealt_out_after_it() {
    let t = topo();
    let mut claims = Claims::default();
    let parent = claims.claim("p", 1);
    let child = claims.claim("p.1", 2);
    assert_eq!(
        (parent.as_slice(), child.as_slice()),
        (&[0][..], &[1, 2][..])
    );
    assert_eq!(claims.claim("p.1", 2), child, "a job's turns are its own");
    let objects = |turns: &[usize]| -> Vec<Option<String>> {
        bind(&t, &ALL, BindTo::None, BindTo::Core, turns)
            .into_iter()
            .map(|b| b.object)
            .collect()
    };
    assert_eq!(objects(&parent), [Some("core 0".to_owned())]);
    assert_eq!(
        objects(&child),
        [Some("core 1".to_owned()), Some("core 2".to_owned())]
    );
    // The parent's end frees its turn for the next job; the child's stay taken.
    claims.release("p");
    assert_eq!(claims.claim("p.2", 2), [0, 3]);
}
