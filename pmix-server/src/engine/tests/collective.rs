//! Fences: barriers, collecting fences, participants that die, fences across nodes.

use pmix_types::{Proc, Rank, Scope, Status, Value};
use pmix_wire::{Kv, ProcKvs, ReplyBody, Request};

use super::{Sim, commit, fence, fence_data, get, key, ns, two_node_job};
use crate::engine::{ConnId, HostCall, HostOutcome};

#[test]
fn barrier_completes_only_when_everyone_arrived() {
    let mut s = Sim::new();
    s.job("a", 4);
    for r in 0..4 {
        s.connect(r as ConnId, "a", r);
    }
    let mut ids = vec![];
    for r in 0..3 {
        ids.push(s.send(r, fence(vec![], false)));
        assert!(s.replies.is_empty(), "fence completed with {} of 4", r + 1);
    }
    ids.push(s.send(3, fence(vec![Proc::new(ns("a"), Rank::WILDCARD)], false)));
    for (r, id) in ids.into_iter().enumerate() {
        let rep = s.reply(r, id);
        assert_eq!(rep.status, Status::SUCCESS);
        assert_eq!(rep.body, ReplyBody::None);
    }
}

#[test]
fn collecting_fence_over_two_namespaces_subset() {
    // The reference's make-check 00: fence over a:0-2 and b:0 with data.
    let mut s = Sim::new();
    s.job("a", 3);
    s.job("b", 1);
    let parts: Vec<Proc> = (0..3)
        .map(|r| Proc::new(ns("a"), r))
        .chain([Proc::new(ns("b"), 0)])
        .collect();
    let members = [(0, "a", 0), (1, "a", 1), (2, "a", 2), (3, "b", 0)];
    for (c, n, r) in members {
        s.connect(c, n, r);
        let id = s.send(
            c,
            commit(&[(
                &format!("key-{n}-{r}"),
                Scope::GLOBAL,
                Value::String(format!("{n}{r}")),
            )]),
        );
        assert_eq!(s.reply(c, id).status, Status::SUCCESS);
    }
    let mut ids = vec![];
    for (c, _, _) in members {
        let mut p = parts.clone();
        p.reverse(); // order of the list does not matter
        ids.push((
            c,
            s.send(c, fence(if c % 2 == 0 { p } else { parts.clone() }, true)),
        ));
    }
    for (c, id) in ids {
        let rep = s.reply(c, id);
        assert_eq!(rep.status, Status::SUCCESS);
        let data = fence_data(&rep);
        assert_eq!(data.len(), 4);
        for (n, r) in [("a", 0), ("a", 1), ("a", 2), ("b", 0)] {
            let pk = data
                .iter()
                .find(|pk| pk.proc == Proc::new(ns(n), r))
                .expect("participant data");
            assert_eq!(pk.kvs[0].value, Value::String(format!("{n}{r}")));
        }
    }
}

#[test]
fn consecutive_fences_over_the_same_set_stay_ordered() {
    let mut s = Sim::new();
    s.job("a", 2);
    s.connect(0, "a", 0);
    s.connect(1, "a", 1);
    let f1 = s.send(0, fence(vec![], false));
    let f2 = s.send(0, fence(vec![], false));
    assert!(s.replies.is_empty());
    let g1 = s.send(1, fence(vec![], false));
    assert!(s.take_reply(0, f1).is_some() && s.take_reply(1, g1).is_some());
    assert!(
        s.take_reply(0, f2).is_none(),
        "second fence completed with one participant"
    );
    let g2 = s.send(1, fence(vec![], false));
    assert!(s.take_reply(0, f2).is_some() && s.take_reply(1, g2).is_some());
}

#[test]
fn fence_rejects_a_caller_outside_the_participants() {
    let mut s = Sim::new();
    s.job("a", 2);
    s.connect(0, "a", 0);
    let id = s.send(0, fence(vec![Proc::new(ns("a"), 1)], false));
    assert_eq!(s.reply(0, id).status, Status::ERR_BAD_PARAM);
    let id = s.send(0, fence(vec![Proc::new(ns("zz"), Rank::WILDCARD)], false));
    assert_eq!(s.reply(0, id).status, Status::ERR_BAD_PARAM);
}

/// In job "a" of 3 whose ranks 0 and 1 are connected, rank 0 fences with every rank and rank 1
/// gets a key of rank 2; `end` ends rank 2. Both fail with `ERR_PROC_TERM_WO_SYNC`, and so does
/// a fence entered after: they would otherwise wait forever.
fn rank_2s_end_releases_fences_and_gets(s: &mut Sim, end: impl FnOnce(&mut Sim)) {
    let f0 = s.send(0, fence(vec![], true));
    let g1 = s.send(1, get(Proc::new(ns("a"), 2), "never", vec![]));
    end(s);
    s.pump();
    let term = Status::from_name("ERR_PROC_TERM_WO_SYNC").unwrap();
    assert_eq!(s.reply(0, f0).status, term);
    assert_eq!(s.reply(1, g1).status, term);
    let f1 = s.send(1, fence(vec![], false));
    assert_eq!(s.reply(1, f1).status, term);
}

#[test]
fn a_dead_participant_releases_fences_and_gets() {
    let mut s = Sim::new();
    s.job("a", 3);
    for r in 0..3 {
        s.connect(r as ConnId, "a", r);
    }
    rank_2s_end_releases_fences_and_gets(&mut s, |s| s.eng.handle_closed(2));
}

#[test]
fn a_participant_that_ended_before_connecting_releases_fences_and_gets() {
    let mut s = Sim::new();
    s.job("a", 3);
    for r in 0..2 {
        s.connect(r as ConnId, "a", r);
    }
    rank_2s_end_releases_fences_and_gets(&mut s, |s| {
        // Rank 1's end leaves nothing to do while its connection is open: its close will.
        s.eng.client_ended(&Proc::new(ns("a"), 1));
        s.pump();
        assert!(s.replies.is_empty(), "{:?}", s.replies);
        s.eng.client_ended(&Proc::new(ns("a"), 2));
    });
    // A fence among the others completes.
    let both = vec![Proc::new(ns("a"), 0), Proc::new(ns("a"), 1)];
    let f2 = s.send(0, fence(both.clone(), false));
    let f3 = s.send(1, fence(both, false));
    assert_eq!(s.reply(0, f2).status, Status::SUCCESS);
    assert_eq!(s.reply(1, f3).status, Status::SUCCESS);
}

/// Rank 1 finalized and left, then rank 2 ended without finalize: a fence of the whole job
/// entered after both fails with rank 2's `ERR_PROC_TERM_WO_SYNC`, the failure, and not with
/// rank 1's `ERR_NOT_FOUND`, though rank 1 comes first (seen failing so before statuses were
/// ranked).
#[test]
fn a_fence_after_a_finalize_and_a_failure_fails_with_the_failure() {
    let mut s = Sim::new();
    s.job("a", 4);
    for r in 0..4 {
        s.connect(r as ConnId, "a", r);
    }
    let f = s.send(1, Request::Finalize { info: vec![] });
    assert_eq!(s.reply(1, f).status, Status::SUCCESS);
    s.eng.handle_closed(1);
    s.eng.handle_closed(2);
    s.pump();
    let term = Status::from_name("ERR_PROC_TERM_WO_SYNC").unwrap();
    let f0 = s.send(0, fence(vec![], false));
    assert_eq!(s.reply(0, f0).status, term);
    // Rank 1 alone left in order: a fence naming it fails with ERR_NOT_FOUND.
    let f3 = s.send(
        3,
        fence(vec![Proc::new(ns("a"), 1), Proc::new(ns("a"), 3)], false),
    );
    assert_eq!(s.reply(3, f3).status, Status::ERR_NOT_FOUND);
}

#[test]
fn fence_with_remote_participants_goes_through_the_host() {
    let mut s = Sim::new();
    two_node_job(&mut s, &[0, 1], &[2, 3]);
    for r in 0..2u32 {
        let c = s.send(
            r as ConnId,
            commit(&[
                ("v", Scope::GLOBAL, Value::Uint32(r)),
                ("l", Scope::LOCAL, Value::Uint32(r)),
            ]),
        );
        s.reply(r as ConnId, c);
    }
    let a = s.send(0, fence(vec![], true));
    let b = s.send(1, fence(vec![], true));
    assert!(s.replies.is_empty(), "completed without the other node");
    let (op, call) = s.host_calls.remove(0);
    let HostCall::FenceNb { data, .. } = call else {
        panic!("expected fence_nb, got {call:?}")
    };
    // Our contribution excludes LOCAL data; the other node adds its own.
    let ours = super::decode_blobs(&data).unwrap();
    assert_eq!(ours.len(), 2);
    assert!(
        ours.iter()
            .all(|pk| pk.kvs.iter().all(|kv| kv.key.as_str() == "v"))
    );
    let theirs: Vec<ProcKvs> = (2..4)
        .map(|r| ProcKvs {
            proc: Proc::new(ns("m"), r),
            kvs: vec![Kv {
                scope: Scope::GLOBAL,
                key: key("v"),
                value: Value::Uint32(r),
            }],
        })
        .collect();
    let mut all = data.clone();
    pmix_wire::encode_frame(&theirs, &mut all).unwrap();
    s.eng.handle_host_done(op, HostOutcome::Bytes(Ok(all)));
    s.pump();
    for (c, id) in [(0, a), (1, b)] {
        let rep = s.reply(c, id);
        assert_eq!(rep.status, Status::SUCCESS);
        assert_eq!(fence_data(&rep).len(), 4);
    }
    // Remote data is now served locally, without another trip to the host.
    let g = s.send(0, get(Proc::new(ns("m"), 3), "v", vec![]));
    assert_eq!(s.reply(0, g).status, Status::SUCCESS);
    assert!(s.host_calls.is_empty());
}

#[test]
fn many_clients_fence_and_get_each_other() {
    let mut s = Sim::new();
    let n = 64u32;
    s.job("big", n);
    for r in 0..n {
        s.connect(r as ConnId, "big", r);
        let c = s.send(
            r as ConnId,
            commit(&[("ep", Scope::GLOBAL, Value::Uint64(u64::from(r) * 7))]),
        );
        s.reply(r as ConnId, c);
    }
    let ids: Vec<u32> = (0..n)
        .map(|r| s.send(r as ConnId, fence(vec![], false)))
        .collect();
    for (r, id) in ids.into_iter().enumerate() {
        assert_eq!(s.reply(r, id).status, Status::SUCCESS);
    }
    for r in 0..n {
        let peer = (r + 1) % n;
        let g = s.send(r as ConnId, get(Proc::new(ns("big"), peer), "ep", vec![]));
        let ReplyBody::Get { data, .. } = s.reply(r as ConnId, g).body else {
            panic!()
        };
        assert_eq!(data[0].kvs[0].value, Value::Uint64(u64::from(peer) * 7));
    }
}

#[test]
fn repeated_collecting_fences_send_only_what_changed() {
    let mut sim = Sim::new();
    sim.job("a", 3);
    for r in 0..3 {
        sim.connect(r as ConnId + 1, "a", r);
    }
    let shipped = |sim: &mut Sim, conns: &[ConnId]| -> Vec<Vec<u32>> {
        let ids: Vec<(ConnId, u32)> = conns
            .iter()
            .map(|c| (*c, sim.send(*c, fence(vec![], true))))
            .collect();
        ids.into_iter()
            .map(|(c, id)| {
                let r = sim.reply(c, id);
                assert_eq!(r.status, Status::SUCCESS);
                let mut ranks: Vec<u32> = fence_data(&r).iter().map(|pk| pk.proc.rank.0).collect();
                ranks.sort();
                ranks
            })
            .collect()
    };
    for r in 0..3u32 {
        sim.send(
            r as ConnId + 1,
            commit(&[("k", Scope::GLOBAL, Value::from(r))]),
        );
    }
    assert_eq!(
        shipped(&mut sim, &[1, 2, 3]),
        vec![vec![0, 1, 2]; 3],
        "everything, the first time"
    );
    assert_eq!(
        shipped(&mut sim, &[1, 2, 3]),
        vec![Vec::<u32>::new(); 3],
        "nothing changed"
    );
    sim.send(2, commit(&[("k", Scope::GLOBAL, Value::from(10u32))]));
    let r = shipped(&mut sim, &[1, 2, 3]);
    assert_eq!(r, vec![vec![1]; 3], "only the re-committed rank");
    // A barrier (no collection) in between does not change what collectors hold.
    let ids: Vec<_> = [1, 2, 3]
        .iter()
        .map(|c| (*c, sim.send(*c, fence(vec![], false))))
        .collect();
    for (c, id) in ids {
        sim.reply(c, id);
    }
    sim.send(3, commit(&[("k", Scope::GLOBAL, Value::from(20u32))]));
    assert_eq!(shipped(&mut sim, &[1, 2, 3]), vec![vec![2]; 3]);
    // Another participant list is tracked on its own: everything, the first time.
    let ids: Vec<_> = [1, 2, 3]
        .iter()
        .map(|c| {
            (
                *c,
                sim.send(
                    *c,
                    fence(
                        vec![
                            Proc::new(ns("a"), 0),
                            Proc::new(ns("a"), 1),
                            Proc::new(ns("a"), 2),
                        ],
                        true,
                    ),
                ),
            )
        })
        .collect();
    for (c, id) in ids {
        let r = sim.reply(c, id);
        assert_eq!(
            fence_data(&r).len(),
            3,
            "another participant list is tracked on its own"
        );
    }
}

#[test]
fn barriers_across_nodes_send_only_the_values_stored_since_over_whole_namespaces() {
    let mut s = Sim::new();
    two_node_job(&mut s, &[0, 1], &[2, 3]);
    // One barrier of ranks 0 and 1 (with `procs` as given), completed by the host with
    // nothing from the other node; the keys this node sent of each rank, sorted.
    let barrier = |s: &mut Sim, procs: Vec<Proc>| -> Vec<Vec<String>> {
        let ids: Vec<(ConnId, u32)> = (0..2)
            .map(|c| (c, s.send(c, fence(procs.clone(), false))))
            .collect();
        let (op, call) = s.host_calls.remove(0);
        let HostCall::FenceNb { data, .. } = call else {
            panic!("expected fence_nb, got {call:?}")
        };
        let mut sent: Vec<(u32, Vec<String>)> = super::decode_blobs(&data)
            .unwrap()
            .into_iter()
            .map(|pk| {
                let mut keys: Vec<String> = pk.kvs.iter().map(|kv| kv.key.to_string()).collect();
                keys.sort();
                (pk.proc.rank.0, keys)
            })
            .collect();
        sent.sort();
        s.eng.handle_host_done(op, HostOutcome::Bytes(Ok(data)));
        s.pump();
        for (c, id) in ids {
            assert_eq!(s.reply(c, id).status, Status::SUCCESS);
        }
        sent.into_iter().map(|(_, keys)| keys).collect()
    };
    let put = |s: &mut Sim, rank: u32, k: &str| {
        let c = s.send(
            rank as ConnId,
            commit(&[(k, Scope::GLOBAL, Value::Uint32(rank))]),
        );
        s.reply(rank as ConnId, c);
    };
    put(&mut s, 0, "a");
    put(&mut s, 1, "a");
    assert_eq!(
        barrier(&mut s, vec![]),
        [vec!["a"], vec!["a"]],
        "the first time, all"
    );
    put(&mut s, 0, "b");
    assert_eq!(
        barrier(&mut s, vec![]),
        [vec!["b"]],
        "then only the new value"
    );
    assert!(
        barrier(&mut s, vec![]).is_empty(),
        "nothing new, nothing sent"
    );
    put(&mut s, 1, "a");
    assert_eq!(
        barrier(&mut s, vec![]),
        [vec!["a"]],
        "a value stored again is new"
    );
    // Over some ranks, the nodes taking part may not have had the rest: all of a process
    // that stored anything since.
    put(&mut s, 0, "c");
    let some = vec![
        Proc::new(ns("m"), 0),
        Proc::new(ns("m"), 1),
        Proc::new(ns("m"), 2),
    ];
    assert_eq!(barrier(&mut s, some), [vec!["a", "b", "c"]]);
}
