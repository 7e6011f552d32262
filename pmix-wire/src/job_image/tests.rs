#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use pmix_types::{Info, Nspace, Rank, Value, attr};
use proptest::prelude::*;

use super::*;
use crate::fuzzing::check_image;

fn spec(names: &[&str], ppn: &[&[u32]]) -> JobSpec {
    let size = ppn.iter().map(|p| p.len() as u32).sum();
    JobSpec {
        nspace: Nspace::new("img").unwrap(),
        session: vec![Info::attr(attr::UNIV_SIZE, size)],
        job: vec![Info::attr(attr::JOB_SIZE, size)],
        apps: vec![Realm {
            id: 0,
            info: vec![Info::attr(attr::APPNUM, 0u32)],
        }],
        app_of_rank: vec![(0, Rank(0))],
        size,
        offset: 0,
        spawned: false,
        maps: Some(NodeMap {
            names: names.iter().map(|n| (*n).to_owned()).collect(),
            ppn: ppn
                .iter()
                .map(|p| p.iter().copied().map(Rank).collect())
                .collect(),
        }),
        given_nodes: vec![],
        given_procs: BTreeMap::new(),
    }
}

fn u32_of(v: Option<Value>) -> Option<u32> {
    v.and_then(|v| v.as_u32())
}

#[test]
fn ranks_placed_by_ranges_and_out_of_order_find_their_node_and_position() {
    // Node 1 lists its ranks out of order; node 2 has none.
    let image = JobImage::build(&spec(&["a", "b", "c"], &[&[0, 1, 2], &[5, 3, 4], &[]])).unwrap();
    assert_eq!(image.placement(Rank(4)), Some((1, 2)));
    assert_eq!(image.placement(Rank(5)), Some((1, 0)));
    assert_eq!(image.placement(Rank(6)), None);
    assert_eq!(
        image.proc_value(Rank(3), attr::HOSTNAME),
        Some(Value::String("b".into()))
    );
    assert_eq!(u32_of(image.proc_value(Rank(3), attr::LOCAL_RANK)), Some(1));
    assert_eq!(
        image.node_value(1, attr::LOCAL_PEERS),
        Some(Value::String("5,3,4".into()))
    );
    assert_eq!(u32_of(image.node_value(2, attr::LOCAL_SIZE)), Some(0));
    assert_eq!(image.node_value(2, attr::LOCALLDR), None);
    assert_eq!(image.node_by_host("c"), Some(2));
    assert_eq!(image.node_by_host("d"), None);
    assert_eq!(image.node_ids(), vec![0, 1, 2]);
}

#[test]
fn a_rank_the_map_places_twice_counts_on_the_first_node() {
    let image = JobImage::build(&spec(&["a", "b"], &[&[0, 1], &[1, 2]])).unwrap();
    assert_eq!(image.placement(Rank(1)), Some((0, 1)));
    assert_eq!(image.placement(Rank(2)), Some((1, 1)));
    // Each node still lists every rank its map entry names.
    assert_eq!(
        image.node_value(1, attr::LOCAL_PEERS),
        Some(Value::String("1,2".into()))
    );
}

#[test]
fn host_values_win_over_derived_ones() {
    let mut s = spec(&["a", "b"], &[&[0], &[1]]);
    s.given_procs
        .insert(Rank(1), vec![Info::attr(attr::LOCAL_RANK, 7u16)]);
    s.given_nodes.push(vec![
        Info::attr(attr::HOSTNAME, "b"),
        Info::attr(attr::HOSTNAME, "b.example"),
    ]);
    let image = JobImage::build(&s).unwrap();
    assert_eq!(u32_of(image.proc_value(Rank(1), attr::LOCAL_RANK)), Some(7));
    assert_eq!(u32_of(image.proc_value(Rank(1), attr::NODEID)), Some(1));
    // The node array named node "b"; its last hostname is what a get finds.
    assert_eq!(
        image.node_value(1, attr::HOSTNAME),
        Some(Value::String("b.example".into()))
    );
    assert_eq!(image.node_by_host("b"), Some(1));
}

#[test]
fn a_million_ranks_on_ten_thousand_nodes_is_a_small_image() {
    let ppn: Vec<Vec<Rank>> = (0..10_000u32)
        .map(|n| (n * 100..n * 100 + 100).map(Rank).collect())
        .collect();
    let names: Vec<String> = (0..10_000).map(|n| format!("node{n:05}")).collect();
    let mut s = spec(&[], &[]);
    s.size = 1_000_000;
    s.maps = Some(NodeMap { names, ppn });
    let image = JobImage::build(&s).unwrap();
    assert!(
        image.bytes().len() < 600_000,
        "{} bytes",
        image.bytes().len()
    );
    assert_eq!(
        image.proc_value(Rank(999_999), attr::HOSTNAME),
        Some(Value::String("node09999".into()))
    );
    assert_eq!(
        u32_of(image.proc_value(Rank(123_456), attr::LOCAL_RANK)),
        Some(56)
    );
    assert_eq!(image.node_by_host("node04242"), Some(4242));
}

#[test]
fn every_cut_and_every_changed_byte_of_an_image_is_read_safely() {
    let mut s = spec(&["n0", "node1"], &[&[0, 2], &[1, 3]]);
    s.given_procs
        .insert(Rank(2), vec![Info::attr(attr::CPUSET, "core:2")]);
    s.given_nodes.push(vec![
        Info::attr(attr::NODEID, 1u32),
        Info::attr("site.rack", 4u32),
    ]);
    let good = s.image_bytes().unwrap();
    check_image(&good);
    for cut in 0..good.len() {
        check_image(&good[..cut]);
    }
    for at in 0..good.len() {
        for v in [0u8, 1, 0x7f, 0xff] {
            let mut bad = good.clone();
            bad[at] = v;
            check_image(&bad);
        }
    }
}

#[test]
fn a_header_that_lies_is_refused() {
    let good = spec(&["a"], &[&[0]]).image_bytes().unwrap();
    let mut longer = good.clone();
    longer.push(0);
    assert!(JobImage::parse(Bytes::from(longer)).is_err());
    let mut version = good.clone();
    version[layout::OFF_VERSION] = 9;
    assert!(JobImage::parse(Bytes::from(version)).is_err());
    let mut section = good.clone();
    section[layout::OFF_SECTIONS + 4] = 0xff; // the namespace's length
    assert!(JobImage::parse(Bytes::from(section)).is_err());
    assert!(JobImage::parse(Bytes::from(good)).is_ok());
}

/// The fuzz corpus seeds are the images of these jobs as this code writes them: written with
/// `PMIX_BLESS` set (with the golden vectors), compared otherwise, so that a layout change
/// cannot leave the corpus replaying stale images.
#[test]
fn corpus_seeds() {
    let bless = std::env::var_os("PMIX_BLESS").is_some();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/job_image");
    if bless {
        std::fs::create_dir_all(&dir).unwrap();
    }
    let mut given = spec(&["n0", "node1"], &[&[0, 2], &[1, 3]]);
    given
        .given_procs
        .insert(Rank(9), vec![Info::attr(attr::CPUSET, "core:2")]);
    given
        .given_nodes
        .push(vec![Info::attr(attr::HOSTNAME, "n0")]);
    given.offset = 5;
    given.spawned = true;
    let seeds = [
        (
            "maps",
            spec(&["a", "b", "c"], &[&[0, 1, 2], &[5, 3, 4], &[]]).image_bytes(),
        ),
        ("given", given.image_bytes()),
        (
            "twice",
            spec(&["a", "b"], &[&[0, 1], &[1, 2]]).image_bytes(),
        ),
        (
            "job-data",
            job_data_image(&JobImage::build(&given).unwrap().expand()),
        ),
    ];
    for (name, bytes) in seeds {
        let path = dir.join(format!("seed-{name}"));
        let bytes = bytes.unwrap();
        if bless {
            std::fs::write(&path, bytes).unwrap();
        } else {
            let recorded = std::fs::read(&path)
                .unwrap_or_else(|e| panic!("{}: {e}; record with PMIX_BLESS=1", path.display()));
            assert!(
                recorded == bytes,
                "{} is stale: record it again with PMIX_BLESS=1",
                path.display()
            );
        }
    }
}

/// A random job: uneven nodes (some without ranks), apps, an offset, host values for some
/// ranks (inside the job and beyond it) and nodes.
fn any_spec() -> impl Strategy<Value = JobSpec> {
    (
        prop::collection::vec(0usize..6, 1..6),
        1u32..4,
        0u32..3,
        any::<bool>(),
        prop::collection::vec((0u32..40, 0u16..4), 0..6),
        prop::collection::vec((0u32..8, any::<bool>()), 0..4),
        any::<u64>(),
    )
        .prop_map(|(per_node, napps, offset, spawned, given, nodes, seed)| {
            let size: u32 = per_node.iter().map(|&n| n as u32).sum();
            // Ranks dealt to nodes in a shuffled order.
            let mut ranks: Vec<u32> = (0..size).collect();
            let mut x = seed | 1;
            for i in (1..ranks.len()).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ranks.swap(i, (x % (i as u64 + 1)) as usize);
            }
            let mut it = ranks.into_iter();
            let ppn: Vec<Vec<Rank>> = per_node
                .iter()
                .map(|&n| it.by_ref().take(n).map(Rank).collect())
                .collect();
            let names: Vec<String> = (0..per_node.len()).map(|i| format!("h{i}")).collect();
            let app_of_rank = (0..napps).map(|a| (a, Rank(a * size / napps))).collect();
            let mut given_procs: BTreeMap<Rank, Vec<Info>> = BTreeMap::new();
            for (r, lrank) in given {
                given_procs
                    .entry(Rank(r))
                    .or_default()
                    .push(Info::attr(attr::LOCAL_RANK, lrank));
            }
            let given_nodes = nodes
                .into_iter()
                .map(|(id, by_name)| {
                    let named = if by_name {
                        Info::attr(attr::HOSTNAME, format!("h{id}"))
                    } else {
                        Info::attr(attr::NODEID, id)
                    };
                    vec![named, Info::attr("site.rack", id)]
                })
                .collect();
            JobSpec {
                nspace: Nspace::new("rnd").unwrap(),
                session: vec![],
                job: vec![Info::attr(attr::JOB_SIZE, size)],
                apps: (0..napps)
                    .map(|id| Realm {
                        id,
                        info: vec![Info::attr(attr::APPNUM, id)],
                    })
                    .collect(),
                app_of_rank,
                size,
                offset,
                spawned,
                maps: Some(NodeMap { names, ppn }),
                given_nodes,
                given_procs,
            }
        })
}

proptest! {
    /// What a client reads key by key (`proc_value`, `node_value`) is what the server's
    /// whole job data (`expand`, which libpmix clients and connects get) lists, and both agree
    /// with the maps.
    #[test]
    fn key_by_key_reads_agree_with_the_whole_job_data(s in any_spec()) {
        let image = JobImage::build(&s).unwrap();
        let job = image.expand();
        check_image(image.bytes());
        let maps = s.maps.as_ref().unwrap();
        for p in &job.procs {
            for info in &p.info {
                let last = p.info.iter().rev().find(|i| i.key == info.key).unwrap();
                prop_assert_eq!(image.proc_value(p.rank, info.key.as_str()), Some(last.value.clone()));
            }
        }
        for n in &job.nodes {
            for info in &n.info {
                let last = n.info.iter().rev().find(|i| i.key == info.key).unwrap();
                prop_assert_eq!(image.node_value(n.id, info.key.as_str()), Some(last.value.clone()));
            }
        }
        for (id, ranks) in maps.ppn.iter().enumerate() {
            let id = id as u32;
            prop_assert_eq!(image.ranks_of_node(id).unwrap(), ranks.clone());
            for (pos, r) in ranks.iter().enumerate() {
                if !s.given_procs.contains_key(r) {
                    prop_assert_eq!(u32_of(image.proc_value(*r, attr::NODEID)), Some(id));
                    prop_assert_eq!(u32_of(image.proc_value(*r, attr::LOCAL_RANK)), Some(pos as u32));
                }
            }
            prop_assert_eq!(image.node_by_host(&maps.names[id as usize]), Some(id));
        }
        // Every rank of the job and every rank the host described has a realm.
        let ranks: Vec<u32> = job.procs.iter().map(|p| p.rank.0).collect();
        for r in 0..s.size {
            prop_assert!(ranks.contains(&r));
        }
        for r in s.given_procs.keys() {
            prop_assert!(ranks.contains(&r.0));
        }
    }
}

proptest! {
    /// An image with a rank's values changed reads as the first one did, but for those values:
    /// every other rank, every node and the levels are the same, and the new value wins over
    /// the derived one (a restarted process's `REINCARNATION`).
    #[test]
    fn changing_a_rank_values_changes_only_those(s in any_spec(), pick in any::<u32>(), k in 1u32..9) {
        prop_assume!(s.size > 0);
        let image = JobImage::build(&s).unwrap();
        let rank = Rank(pick % s.size);
        let changed = image
            .with_proc_values(rank, &[Info::attr(attr::REINCARNATION, k)])
            .unwrap();
        check_image(changed.bytes());
        prop_assert_eq!(u32_of(image.proc_value(rank, attr::REINCARNATION)), Some(0));
        prop_assert_eq!(u32_of(changed.proc_value(rank, attr::REINCARNATION)), Some(k));
        // Changed again: the last value given is the one read, and the other values stay.
        let again = changed
            .with_proc_values(rank, &[Info::attr(attr::REINCARNATION, k + 1)])
            .unwrap();
        prop_assert_eq!(u32_of(again.proc_value(rank, attr::REINCARNATION)), Some(k + 1));
        let (before, after) = (image.expand(), again.expand());
        prop_assert_eq!(&before.nodes, &after.nodes);
        prop_assert_eq!((&before.session, &before.job, &before.apps), (&after.session, &after.job, &after.apps));
        prop_assert_eq!(before.procs.len(), after.procs.len());
        for (b, a) in before.procs.iter().zip(&after.procs) {
            prop_assert_eq!(b.rank, a.rank);
            if b.rank != rank {
                prop_assert_eq!(&b.info, &a.info);
                continue;
            }
            for i in &b.info {
                if i.key.as_str() != attr::REINCARNATION {
                    prop_assert_eq!(again.proc_value(rank, i.key.as_str()), image.proc_value(rank, i.key.as_str()));
                }
            }
            prop_assert_eq!(a.info.iter().filter(|i| i.key.as_str() == attr::REINCARNATION).count(), 1);
        }
        for id in image.node_ids() {
            prop_assert_eq!(image.ranks_of_node(id), again.ranks_of_node(id));
        }
    }
}
