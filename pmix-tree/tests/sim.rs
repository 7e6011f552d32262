//! The vertex core over a simulated network, in virtual time.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use pmix_tree::core::{Delivery, Timing};
use pmix_tree::sim::Sim;
use pmix_tree::{Dest, FenceKey, Topology, Vertex};
use pmix_types::Status;
use proptest::prelude::*;

const D: Duration = Duration::from_millis(1);

/// Heartbeats that never come into play.
fn quiet() -> Timing {
    Timing {
        heartbeat: Duration::from_secs(3600),
        dead_after: Duration::from_secs(4 * 3600),
    }
}

/// Heartbeats every 10 link delays, silence lost after 30.
fn lively() -> Timing {
    Timing {
        heartbeat: 10 * D,
        dead_after: 30 * D,
    }
}

fn key(set: &str, seq: u64) -> FenceKey {
    FenceKey {
        set: set.as_bytes().to_vec(),
        seq,
    }
}

/// What vertex `v` contributes to fence `seq` of set `set`: distinct per vertex and fence, so
/// that a mix-up shows.
fn part(set: u8, seq: u64, v: Vertex) -> Vec<u8> {
    let mut p = vec![set, seq as u8];
    p.extend_from_slice(&v.to_be_bytes());
    p
}

fn expected(set: u8, seq: u64, vertices: &[Vertex]) -> Vec<u8> {
    vertices.iter().flat_map(|&v| part(set, seq, v)).collect()
}

/// Asserts that no live core keeps a fence or a request.
fn nothing_pending(sim: &Sim) {
    for v in 0..sim.topology().size() {
        if !sim.is_dead(v) {
            assert_eq!(
                sim.core(v).pending(),
                0,
                "vertex {v} still has pending work"
            );
        }
    }
}

#[test]
fn a_job_wide_fence_takes_two_depth_link_delays() {
    for (size, radix) in [
        (1, 2),
        (2, 2),
        (7, 2),
        (100, 3),
        (300, 1),
        (4096, 2),
        (4096, 16),
        (4096, 64),
    ] {
        let topo = Topology::new(size, radix);
        let mut sim = Sim::new(topo, quiet(), D);
        let all: Vec<Vertex> = (0..size).collect();
        let mut tokens = BTreeMap::new();
        for v in 0..size {
            let t = sim.fence(v, key("all", 0), all.clone(), part(0, 0, v));
            tokens.insert(t, v);
        }
        assert!(sim.run_until_idle(Duration::from_secs(60)));
        let want = expected(0, 0, &all);
        let depth = topo.depth();
        let mut last = Duration::ZERO;
        assert_eq!(sim.completions().len(), size as usize);
        for c in sim.completions() {
            let v = tokens[&c.what.0];
            assert_eq!(v, c.vertex);
            assert_eq!(c.what.1.as_deref(), Ok(&want[..]), "vertex {v}");
            // Released at the root after `depth` delays, then `depth_of(v)` more down.
            assert_eq!(
                c.at,
                (depth + topo.depth_of(v)) * D,
                "vertex {v} of {size}/{radix}"
            );
            last = last.max(c.at);
        }
        assert_eq!(last, 2 * depth * D, "{size}/{radix}");
        nothing_pending(&sim);
    }
}

#[test]
fn subset_fences_gather_their_participants_only() {
    let topo = Topology::new(40, 3);
    let mut sim = Sim::new(topo, quiet(), D);
    let sets: Vec<Vec<Vertex>> = vec![
        vec![0],
        vec![39],
        vec![13, 14],
        vec![1, 2, 3],
        (0..40).step_by(7).collect(),
        (20..40).collect(),
    ];
    let mut tokens = BTreeMap::new();
    for (i, set) in sets.iter().enumerate() {
        for &v in set {
            let t = sim.fence(
                v,
                key(&format!("s{i}"), 0),
                set.clone(),
                part(i as u8, 0, v),
            );
            tokens.insert(t, i);
        }
    }
    assert!(sim.run_until_idle(Duration::from_secs(60)));
    assert_eq!(sim.completions().len(), tokens.len());
    for c in sim.completions() {
        let i = tokens[&c.what.0];
        assert_eq!(c.what.1, Ok(expected(i as u8, 0, &sets[i])));
    }
    nothing_pending(&sim);
}

#[test]
fn a_malformed_or_foreign_fence_fails_at_once() {
    let topo = Topology::new(10, 2);
    let mut sim = Sim::new(topo, quiet(), D);
    for vertices in [vec![], vec![2, 1], vec![1, 1], vec![0, 10], vec![0, 2]] {
        let t = sim.fence(1, key("bad", 0), vertices, vec![]);
        let c = sim.completions().last().expect("completed at once");
        assert_eq!(c.what, (t, Err(Status::ERR_BAD_PARAM)));
    }
    // The same key twice on one vertex.
    sim.fence(1, key("twice", 0), vec![1, 2], vec![]);
    let t = sim.fence(1, key("twice", 0), vec![1, 2], vec![]);
    assert_eq!(
        sim.completions().last().map(|c| c.what.clone()),
        Some((t, Err(Status::ERR_BAD_PARAM)))
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Back-to-back fences of the same set and of overlapping sets, joined by each vertex at
    /// its own pace, never mix: each completes with its own participants' data.
    #[test]
    fn back_to_back_fences_never_mix(
        size in 1u32..14,
        radix in 1u32..5,
        sets in proptest::collection::vec(proptest::collection::btree_set(0u32..14, 1..6), 1..4),
        rounds in 1u64..4,
        jitter in proptest::collection::vec(0u64..5, 64),
    ) {
        let topo = Topology::new(size, radix);
        let mut sim = Sim::new(topo, quiet(), D);
        let sets: Vec<Vec<Vertex>> = sets
            .into_iter()
            .map(|s| s.into_iter().filter(|&v| v < size).collect::<Vec<_>>())
            .filter(|s: &Vec<Vertex>| !s.is_empty())
            .collect();
        // Vertex v joins round r of set i at a time that grows with r, jittered per vertex.
        let mut plan = Vec::new();
        let mut j = jitter.iter().cycle();
        for (i, set) in sets.iter().enumerate() {
            for r in 0..rounds {
                for &v in set {
                    let at = D * (r as u32 * 3 + *j.next().unwrap_or(&0) as u32);
                    plan.push((at, i, r, v));
                }
            }
        }
        // Each vertex joins its rounds in order (the host counts seq per set).
        plan.sort();
        let tokens = std::rc::Rc::new(std::cell::RefCell::new(BTreeMap::new()));
        for (at, i, r, v) in plan {
            let set = sets[i].clone();
            let tokens = tokens.clone();
            sim.at(at, move |sim| {
                let t = sim.fence(v, key(&format!("set{i}"), r), set, part(i as u8, r, v));
                tokens.borrow_mut().insert(t, (i, r));
            });
        }
        prop_assert!(sim.run_until_idle(Duration::from_secs(60)));
        let tokens = tokens.borrow();
        prop_assert_eq!(sim.completions().len(), tokens.len());
        for c in sim.completions() {
            let (i, r) = tokens[&c.what.0];
            prop_assert_eq!(&c.what.1, &Ok(expected(i as u8, r, &sets[i])));
        }
        nothing_pending(&sim);
    }
}

#[test]
fn requests_to_every_vertex_are_answered() {
    for (size, radix) in [(1, 2), (13, 3), (64, 4)] {
        let topo = Topology::new(size, radix);
        let mut sim = Sim::new(topo, quiet(), D);
        sim.set_responder(|v, origin, payload| {
            let mut a = payload.to_vec();
            a.extend_from_slice(&v.to_be_bytes());
            a.extend_from_slice(&origin.to_be_bytes());
            Ok(a)
        });
        let mut tokens = BTreeMap::new();
        for origin in [0, size / 2, size - 1] {
            for target in 0..size {
                let t = sim.request(origin, target, vec![7]);
                tokens.insert(t, (origin, target));
            }
        }
        let t = sim.request(0, size, vec![]);
        assert!(sim.run_until_idle(Duration::from_secs(60)));
        for c in sim.completions() {
            if c.what.0 == t {
                assert_eq!(c.what.1, Err(Status::ERR_BAD_PARAM));
                continue;
            }
            let (origin, target) = tokens[&c.what.0];
            let mut want = vec![7];
            want.extend_from_slice(&target.to_be_bytes());
            want.extend_from_slice(&origin.to_be_bytes());
            assert_eq!(c.what.1, Ok(want));
            assert_eq!(c.vertex, origin);
        }
        assert_eq!(sim.completions().len(), tokens.len() + 1);
        nothing_pending(&sim);
    }
}

#[test]
fn messages_to_all_arrive_once_everywhere_in_order() {
    let topo = Topology::new(50, 3);
    let mut sim = Sim::new(topo, quiet(), D);
    for round in 0..3u8 {
        for v in 0..50 {
            sim.send(v, Dest::All, vec![v as u8, round]);
        }
        sim.send(49, Dest::Vertex(17), vec![49, 100 + round]);
        sim.send(3, Dest::Vertex(3), vec![3, 200 + round]);
    }
    assert!(sim.run_until_idle(Duration::from_secs(60)));
    // (receiver, sender) → payload rounds, in arrival order.
    let mut got: BTreeMap<(Vertex, Vertex), Vec<u8>> = BTreeMap::new();
    for r in sim.deliveries() {
        match &r.what {
            Delivery::Message { from, payload } => {
                assert_eq!(*from, payload[0] as Vertex);
                got.entry((r.vertex, *from)).or_default().push(payload[1]);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    for to in 0..50 {
        for from in 0..50 {
            let mut want: Vec<u8> = if to == from { vec![] } else { vec![0, 1, 2] };
            if (from, to) == (49, 17) {
                // The point-to-point ones take another path: only their own order holds.
                let mut all = got.get(&(to, from)).cloned().unwrap_or_default();
                let direct: Vec<u8> = all.iter().copied().filter(|&p| p >= 100).collect();
                assert_eq!(direct, [100, 101, 102]);
                all.retain(|&p| p < 100);
                assert_eq!(all, want);
                continue;
            }
            if (from, to) == (3, 3) {
                want = vec![200, 201, 202];
            }
            assert_eq!(
                got.get(&(to, from)).cloned().unwrap_or_default(),
                want,
                "{from}->{to}"
            );
        }
    }
}

/// Every vertex but the victim joins a job-wide fence and asks every vertex something at
/// time zero; the victim dies at `kill_at`, silently or not. Everything every survivor
/// started completes exactly once, and nothing stays pending anywhere.
fn kill_during_a_fence(topo: Topology, victim: Vertex, kill_at: Duration, silent: bool) {
    let size = topo.size();
    let mut sim = Sim::new(topo, lively(), D);
    sim.set_responder(|_, _, p| Ok(p.to_vec()));
    let all: Vec<Vertex> = (0..size).collect();
    let mut started: BTreeMap<u64, Vertex> = BTreeMap::new();
    for v in 0..size {
        let t = sim.fence(v, key("all", 0), all.clone(), part(0, 0, v));
        started.insert(t, v);
        let target = (v + 1) % size;
        let t = sim.request(v, target, vec![v as u8]);
        started.insert(t, v);
    }
    sim.kill_at(kill_at, victim, silent);
    let end = kill_at + lively().dead_after + lively().heartbeat + 8 * topo.depth() * D;
    sim.run_until(end + Duration::from_millis(100));
    let ctx = format!("victim {victim} at {kill_at:?} silent {silent}");
    let mut done: BTreeSet<u64> = BTreeSet::new();
    for c in sim.completions() {
        assert!(done.insert(c.what.0), "{ctx}: completed twice");
        assert_eq!(started[&c.what.0], c.vertex, "{ctx}");
        if let Err(e) = c.what.1 {
            assert_eq!(e, Status::ERR_LOST_CONNECTION, "{ctx}");
        }
    }
    for (t, v) in &started {
        if *v != victim {
            assert!(
                done.contains(t),
                "{ctx}: vertex {v} never completed token {t}"
            );
        }
    }
    nothing_pending(&sim);
    // The victim's children lost their parent; every other survivor heard of the loss, or
    // lost its own parent on the way (a descendant of the victim), once.
    let mut lost: BTreeMap<Vertex, usize> = BTreeMap::new();
    let mut orphans: BTreeSet<Vertex> = BTreeSet::new();
    for r in sim.deliveries() {
        match &r.what {
            Delivery::Lost { vertex, .. } => {
                assert_eq!(*vertex, victim, "{ctx}");
                *lost.entry(r.vertex).or_default() += 1;
            }
            Delivery::ParentLost { .. } => {
                assert!(
                    topo.in_subtree(victim, r.vertex),
                    "{ctx}: {} orphaned",
                    r.vertex
                );
                assert!(orphans.insert(r.vertex), "{ctx}");
            }
            Delivery::Request { .. } => {}
            other => panic!("{ctx}: unexpected {other:?}"),
        }
    }
    for v in 0..size {
        if v == victim {
            continue;
        }
        if topo.in_subtree(victim, v) {
            assert!(orphans.contains(&v), "{ctx}: {v} not orphaned");
        } else {
            assert_eq!(lost.get(&v), Some(&1), "{ctx}: {v} not told once");
        }
    }
}

#[test]
fn killing_any_vertex_at_any_step_of_a_fence_fails_everything_pending() {
    for (size, radix) in [(7, 2), (10, 3), (4, 1)] {
        let topo = Topology::new(size, radix);
        let steps = 2 * topo.depth() + 2;
        for victim in 0..size {
            // Every half delay: on a delivery and between two.
            for half in 0..=2 * steps {
                let at = D * half / 2;
                kill_during_a_fence(topo, victim, at, false);
                kill_during_a_fence(topo, victim, at, true);
            }
        }
    }
}

#[test]
fn a_silent_vertex_is_lost_within_dead_after_plus_heartbeat() {
    let topo = Topology::new(31, 2);
    let timing = lively();
    for victim in [1, 6, 30] {
        let mut sim = Sim::new(topo, timing, D);
        let kill = Duration::from_millis(137);
        sim.kill_at(kill, victim, true);
        sim.run_until(kill + 3 * timing.dead_after);
        let parent = topo.parent(victim).expect("a daemon");
        let seen = sim
            .deliveries()
            .iter()
            .find(|r| r.vertex == 0)
            .expect("the root hears of it");
        assert!(matches!(seen.what, Delivery::Lost { vertex, .. } if vertex == victim));
        // The parent notices within dead_after + heartbeat; the news takes its depth to the
        // root.
        let noticed = seen.at - topo.depth_of(parent) * D;
        assert!(
            noticed <= kill + timing.dead_after + timing.heartbeat,
            "{noticed:?}"
        );
        assert!(
            noticed >= kill + timing.dead_after - timing.heartbeat,
            "{noticed:?}"
        );
        // Its children notice their parent's silence in the same time.
        for c in topo.children(victim) {
            let r = sim
                .deliveries()
                .iter()
                .find(|r| r.vertex == c)
                .expect("the child notices");
            assert!(matches!(r.what, Delivery::ParentLost { .. }));
            assert!(r.at <= kill + timing.dead_after + timing.heartbeat);
        }
    }
}

#[test]
fn a_closed_parent_link_is_the_lifeline() {
    let topo = Topology::new(15, 2);
    let mut sim = Sim::new(topo, quiet(), D);
    let t = sim.request(9, 3, vec![]);
    sim.kill(4, false);
    sim.run_until(Duration::from_secs(1));
    // 4's children lose their parent one delay later and fail what they had pending.
    for c in [9, 10] {
        let r = sim
            .deliveries()
            .iter()
            .find(|r| r.vertex == c)
            .expect("orphan told");
        assert!(matches!(r.what, Delivery::ParentLost { .. }));
        assert_eq!(r.at, D);
        assert!(sim.core(c).is_stopped());
    }
    assert!(
        sim.completions()
            .iter()
            .any(|c| c.what == (t, Err(Status::ERR_LOST_CONNECTION)))
    );
    // Later calls on an orphan fail at once.
    let t = sim.fence(9, key("x", 0), vec![9], vec![]);
    assert_eq!(
        sim.completions().last().map(|c| c.what.clone()),
        Some((t, Err(Status::ERR_LOST_CONNECTION)))
    );
    nothing_pending(&sim);
}

#[test]
fn a_request_to_a_lost_vertex_fails_at_once() {
    let topo = Topology::new(7, 2);
    let mut sim = Sim::new(topo, quiet(), D);
    sim.kill(2, false);
    sim.run_until(Duration::from_secs(1));
    for target in [2, 5, 6] {
        let t = sim.request(3, target, vec![]);
        let c = sim.completions().last().expect("at once");
        assert_eq!(c.what, (t, Err(Status::ERR_LOST_CONNECTION)));
    }
}
