//! Gets: waiting for a commit, rank UNDEF, reserved keys, job data shipped once, direct modex.

use std::time::Duration;

use pmix_types::{Info, Proc, Rank, Scope, Status, Value, attr};
use pmix_wire::{Kv, ProcKvs, ReplyBody};

use super::{GID, Sim, UID, commit, fence, get, key, ns, proofs, two_node_job};
use crate::engine::{ConnId, HostCall, HostOutcome};

#[test]
fn get_waits_for_commit_and_honours_immediate_and_timeout() {
    let mut s = Sim::new();
    s.job("a", 3);
    for r in 0..3 {
        s.connect(r as ConnId, "a", r);
    }
    let p1 = Proc::new(ns("a"), 1);
    let imm = s.send(
        0,
        get(p1.clone(), "x", vec![Info::attr(attr::IMMEDIATE, true)]),
    );
    assert_eq!(s.reply(0, imm).status, Status::ERR_NOT_FOUND);

    let waiting = s.send(0, get(p1.clone(), "x", vec![]));
    let timed = s.send(
        2,
        get(
            Proc::new(ns("a"), 2),
            "y",
            vec![Info::attr(attr::TIMEOUT, 2i32)],
        ),
    );
    assert!(s.replies.is_empty());
    s.advance(Duration::from_millis(1999));
    assert!(s.take_reply(2, timed).is_none(), "timed out early");
    s.advance(Duration::from_millis(2));
    assert_eq!(s.reply(2, timed).status, Status::ERR_TIMEOUT);
    assert!(
        s.take_reply(0, waiting).is_none(),
        "a get without timeout gave up"
    );

    let c = s.send(
        1,
        commit(&[
            ("x", Scope::GLOBAL, Value::Int64(-5)),
            ("hidden", Scope::REMOTE, Value::Bool(true)),
        ]),
    );
    assert_eq!(s.reply(1, c).status, Status::SUCCESS);
    let rep = s.reply(0, waiting);
    assert_eq!(rep.status, Status::SUCCESS);
    let ReplyBody::Get { data, jobs } = rep.body else {
        panic!("not a get reply")
    };
    assert!(jobs.is_empty(), "own namespace's job data shipped again");
    assert_eq!(
        data[0].kvs.len(),
        1,
        "REMOTE data shown to a process on the same node"
    );
    assert_eq!(data[0].kvs[0].value, Value::Int64(-5));
    // A key the committed process does not have: NOT_FOUND at once, no waiting.
    let miss = s.send(0, get(p1, "nope", vec![]));
    assert_eq!(s.reply(0, miss).status, Status::ERR_NOT_FOUND);
}

#[test]
fn get_with_rank_undef_finds_whoever_stored_the_key() {
    let mut s = Sim::new();
    s.job("a", 3);
    s.job("b", 1);
    for r in 0..3 {
        s.connect(r as ConnId, "a", r);
    }
    let any = Proc::new(ns("a"), Rank::UNDEF);
    let miss = s.send(0, get(any.clone(), "x", vec![]));
    assert_eq!(
        s.reply(0, miss).status,
        Status::ERR_NOT_FOUND,
        "nobody stored it yet: answered at once"
    );
    let c = s.send(2, commit(&[("x", Scope::GLOBAL, Value::Int64(7))]));
    assert_eq!(s.reply(2, c).status, Status::SUCCESS);
    let c = s.send(1, commit(&[("x", Scope::GLOBAL, Value::Int64(8))]));
    assert_eq!(s.reply(1, c).status, Status::SUCCESS);
    let hit = s.send(0, get(any.clone(), "x", vec![]));
    let rep = s.reply(0, hit);
    assert_eq!(rep.status, Status::SUCCESS);
    let ReplyBody::Get { data, .. } = rep.body else {
        panic!("not a get reply")
    };
    assert_eq!(data[0].proc.rank, Rank(2), "the first to store it answers");
    assert_eq!(data[0].kvs[0].value, Value::Int64(7));
    // Job-level keys come first.
    let size = s.send(0, get(any, attr::JOB_SIZE, vec![]));
    assert_eq!(s.reply(0, size).status, Status::SUCCESS);
    // Another namespace's keys are not found in this one.
    let other = s.send(0, get(Proc::new(ns("b"), Rank::UNDEF), "x", vec![]));
    assert_eq!(s.reply(0, other).status, Status::ERR_NOT_FOUND);
}

#[test]
fn reserved_keys_are_refused_and_nothing_is_stored() {
    let mut s = Sim::new();
    s.job("a", 2);
    s.connect(0, "a", 0);
    s.connect(1, "a", 1);
    let c = s.send(
        0,
        commit(&[
            ("ok", Scope::GLOBAL, Value::Uint8(1)),
            ("pmix.mine", Scope::GLOBAL, Value::Uint8(2)),
        ]),
    );
    assert_eq!(s.reply(0, c).status, Status::ERR_BAD_PARAM);
    let g = s.send(
        1,
        get(
            Proc::new(ns("a"), 0),
            "ok",
            vec![Info::attr(attr::IMMEDIATE, true)],
        ),
    );
    assert_eq!(
        s.reply(1, g).status,
        Status::ERR_NOT_FOUND,
        "half of a refused commit was stored"
    );
}

#[test]
fn get_from_another_namespace_ships_its_job_data_once() {
    let mut s = Sim::new();
    s.job("a", 1);
    s.job("b", 1);
    s.connect(0, "a", 0);
    s.connect(1, "b", 0);
    let c = s.send(1, commit(&[("k", Scope::GLOBAL, Value::Uint8(9))]));
    s.reply(1, c);
    let pb = Proc::new(ns("b"), 0);
    let g1 = s.send(0, get(pb.clone(), "k", vec![]));
    let ReplyBody::Get { jobs, .. } = s.reply(0, g1).body else {
        panic!()
    };
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].nspace(), &ns("b"));
    assert!(
        jobs[0]
            .job()
            .iter()
            .any(|i| i.key.as_str() == attr::JOB_SIZE && i.value.as_u32() == Some(1))
    );
    let g2 = s.send(0, get(pb, "k", vec![]));
    let ReplyBody::Get { jobs, .. } = s.reply(0, g2).body else {
        panic!()
    };
    assert!(jobs.is_empty(), "job data shipped twice to the same client");
}

/// The data a remote process `proc` gives in a direct-modex answer: `keys`, each `true`.
fn blob_of(proc: &Proc, keys: &[&str]) -> Vec<u8> {
    let pk = vec![ProcKvs {
        proc: proc.clone(),
        kvs: keys
            .iter()
            .map(|k| Kv {
                scope: Scope::GLOBAL,
                key: key(k),
                value: Value::Bool(true),
            })
            .collect(),
    }];
    let mut blob = Vec::new();
    pmix_wire::encode_frame(&pk, &mut blob).unwrap();
    blob
}

/// The key a direct modex asks the other node to wait for.
fn required_of(call: &HostCall) -> Option<String> {
    let HostCall::DirectModex { info, .. } = call else {
        panic!("not a direct modex: {call:?}")
    };
    info.iter()
        .find(|i| i.key.as_str() == attr::REQUIRED_KEY)
        .and_then(|i| i.value.as_str())
        .map(str::to_owned)
}

#[test]
fn direct_modex_for_a_remote_process_asks_the_host_once_per_key() {
    let mut s = Sim::new();
    two_node_job(&mut s, &[0], &[1]);
    let remote = Proc::new(ns("m"), 1);
    let g1 = s.send(0, get(remote.clone(), "v", vec![]));
    let g2 = s.send(0, get(remote.clone(), "w", vec![]));
    let g3 = s.send(0, get(remote.clone(), "v", vec![]));
    // One request per key: the second get of "v" joins the first.
    let asked: Vec<Option<String>> = s.host_calls.iter().map(|(_, c)| required_of(c)).collect();
    assert_eq!(
        asked,
        [Some("v".to_owned()), Some("w".to_owned())],
        "direct modex requests were not coalesced"
    );
    let (op, call) = s.host_calls.remove(0);
    // The other node is asked to answer once the data holds the key asked for.
    assert_eq!(required_of(&call).as_deref(), Some("v"));
    s.eng
        .handle_host_done(op, HostOutcome::Bytes(Ok(blob_of(&remote, &["v"]))));
    s.pump();
    assert_eq!(s.reply(0, g1).status, Status::SUCCESS);
    assert_eq!(s.reply(0, g3).status, Status::SUCCESS);
    // The get of "w" waits on, for its own request.
    assert!(
        s.take_reply(0, g2).is_none(),
        "answered before its key came"
    );
    assert_eq!(s.host_calls.len(), 1);
    let (op, call) = s.host_calls.remove(0);
    assert_eq!(required_of(&call).as_deref(), Some("w"));
    // Answered without it (the other node's wait ended): not found, no third request.
    s.eng
        .handle_host_done(op, HostOutcome::Bytes(Ok(blob_of(&remote, &["v"]))));
    s.pump();
    assert_eq!(s.reply(0, g2).status, Status::ERR_NOT_FOUND);
    assert!(s.host_calls.is_empty());
    // With the data here, a missing key is not found at once, as for a local process...
    let g4 = s.send(0, get(remote.clone(), "x", vec![]));
    assert_eq!(s.reply(0, g4).status, Status::ERR_NOT_FOUND);
    assert!(s.host_calls.is_empty());
    // ...unless the get asks to refresh the cache or requires the key.
    let g5 = s.send(
        0,
        get(
            remote.clone(),
            "x",
            vec![Info::attr(attr::GET_REFRESH_CACHE, true)],
        ),
    );
    let (op, call) = s.host_calls.remove(0);
    assert_eq!(required_of(&call).as_deref(), Some("x"));
    s.eng
        .handle_host_done(op, HostOutcome::Bytes(Ok(blob_of(&remote, &["v", "x"]))));
    s.pump();
    assert_eq!(s.reply(0, g5).status, Status::SUCCESS);
}

/// A request for a key the peer never puts (no timeout: it waits there for as long as the
/// peer lives) must not hold up a get of a key the peer did put.
#[test]
fn a_key_never_put_does_not_hold_up_the_gets_of_other_keys() {
    let mut s = Sim::new();
    two_node_job(&mut s, &[0], &[1]);
    let remote = Proc::new(ns("m"), 1);
    let never = s.send(0, get(remote.clone(), "never", vec![]));
    let v = s.send(0, get(remote.clone(), "v", vec![]));
    let asked: Vec<Option<String>> = s.host_calls.iter().map(|(_, c)| required_of(c)).collect();
    assert_eq!(asked, [Some("never".to_owned()), Some("v".to_owned())]);
    let (op, _) = s.host_calls.remove(1);
    s.eng
        .handle_host_done(op, HostOutcome::Bytes(Ok(blob_of(&remote, &["v"]))));
    s.pump();
    assert_eq!(s.reply(0, v).status, Status::SUCCESS);
    assert!(
        s.take_reply(0, never).is_none(),
        "the other key's wait ended"
    );
    // That request failing (the peer's node lost) fails the get waiting on it.
    let (op, _) = s.host_calls.remove(0);
    s.eng
        .handle_host_done(op, HostOutcome::Bytes(Err(Status::ERR_LOST_CONNECTION)));
    s.pump();
    assert_eq!(s.reply(0, never).status, Status::ERR_LOST_CONNECTION);
}

#[test]
fn a_get_with_a_required_key_waits_for_that_key() {
    let mut s = Sim::new();
    s.job("a", 2);
    s.connect(0, "a", 0);
    s.connect(1, "a", 1);
    let p1 = Proc::new(ns("a"), 1);
    let c = s.send(1, commit(&[("early", Scope::GLOBAL, Value::Uint8(1))]));
    s.reply(1, c);
    let required = |k: &str| Info::attr(attr::REQUIRED_KEY, k);
    let waiting = s.send(0, get(p1.clone(), "late", vec![required("late")]));
    let timed = s.send(
        0,
        get(
            p1.clone(),
            "never",
            vec![required("never"), Info::attr(attr::TIMEOUT, 1i32)],
        ),
    );
    // Without the directive, a committed process's missing key is not waited for.
    let plain = s.send(0, get(p1.clone(), "late", vec![]));
    assert_eq!(s.reply(0, plain).status, Status::ERR_NOT_FOUND);
    assert!(s.take_reply(0, waiting).is_none());
    // A commit without it releases nothing.
    let c = s.send(1, commit(&[("other", Scope::GLOBAL, Value::Uint8(2))]));
    s.reply(1, c);
    assert!(
        s.take_reply(0, waiting).is_none(),
        "released without its key"
    );
    let c = s.send(1, commit(&[("late", Scope::GLOBAL, Value::Uint8(3))]));
    s.reply(1, c);
    let rep = s.reply(0, waiting);
    assert_eq!(rep.status, Status::SUCCESS);
    let ReplyBody::Get { data, .. } = rep.body else {
        panic!("not a get reply")
    };
    assert!(data[0].kvs.iter().any(|kv| kv.key.as_str() == "late"));
    assert!(s.take_reply(0, timed).is_none());
    s.advance(Duration::from_millis(1001));
    assert_eq!(s.reply(0, timed).status, Status::ERR_TIMEOUT);
}

#[test]
fn dmodex_request_with_a_required_key_waits_for_that_key() {
    let mut s = Sim::new();
    s.job("a", 1);
    s.connect(0, "a", 0);
    let p0 = Proc::new(ns("a"), 0);
    let c = s.send(0, commit(&[("early", Scope::GLOBAL, Value::Uint8(1))]));
    s.reply(0, c);
    let now = s.now;
    s.eng
        .dmodex_request(&p0, &[Info::attr(attr::REQUIRED_KEY, "late")], 5, now);
    s.eng.dmodex_request(
        &p0,
        &[
            Info::attr(attr::REQUIRED_KEY, "never"),
            Info::attr(attr::TIMEOUT, 1i32),
        ],
        6,
        now,
    );
    s.pump();
    assert!(s.dmodex.is_empty(), "answered before the key came");
    let c = s.send(0, commit(&[("late", Scope::GLOBAL, Value::Uint8(2))]));
    s.reply(0, c);
    let (token, result) = s.dmodex.remove(0);
    assert_eq!(token, 5);
    let data = super::decode_blobs(&result.unwrap()).unwrap();
    assert!(data[0].kvs.iter().any(|kv| kv.key.as_str() == "late"));
    assert!(s.dmodex.is_empty());
    s.advance(Duration::from_millis(1001));
    let (token, result) = s.dmodex.remove(0);
    assert_eq!((token, result), (6, Err(Status::ERR_TIMEOUT)));
}

#[test]
fn dmodex_request_from_the_host_waits_for_commit_and_hides_local_data() {
    let mut s = Sim::new();
    s.job("a", 1);
    s.connect(0, "a", 0);
    let now = s.now;
    s.eng.dmodex_request(&Proc::new(ns("a"), 0), &[], 77, now);
    s.pump();
    assert!(s.dmodex.is_empty());
    let c = s.send(
        0,
        commit(&[
            ("g", Scope::GLOBAL, Value::Uint8(1)),
            ("l", Scope::LOCAL, Value::Uint8(2)),
        ]),
    );
    s.reply(0, c);
    let (token, result) = s.dmodex.remove(0);
    assert_eq!(token, 77);
    let data = super::decode_blobs(&result.unwrap()).unwrap();
    assert_eq!(
        data[0]
            .kvs
            .iter()
            .map(|kv| kv.key.as_str())
            .collect::<Vec<_>>(),
        ["g"]
    );
}

#[test]
fn a_process_ended_on_another_node_fails_what_waits_for_it_here() {
    let mut s = Sim::new();
    two_node_job(&mut s, &[0, 1], &[2, 3]);
    // A job-wide fence already handed to the host, and a get of rank 3's data.
    let a = s.send(0, fence(vec![], true));
    let b = s.send(1, fence(vec![], true));
    let g = s.send(0, get(Proc::new(ns("m"), 3), "v", vec![]));
    let calls: Vec<HostCall> = s.host_calls.drain(..).map(|(_, c)| c).collect();
    assert!(
        calls.iter().any(|c| matches!(c, HostCall::FenceNb { .. })),
        "{calls:?}"
    );
    assert!(s.replies.is_empty());
    s.eng
        .proc_ended_elsewhere(&Proc::new(ns("m"), 3), Status::ERR_PROC_TERM_WO_SYNC);
    s.pump();
    for (c, id) in [(0, a), (1, b), (0, g)] {
        assert_eq!(s.reply(c, id).status, Status::ERR_PROC_TERM_WO_SYNC);
    }
    // Later ones fail at once, and a rank that is not gone is still asked for.
    let g = s.send(1, get(Proc::new(ns("m"), 3), "v", vec![]));
    assert_eq!(s.reply(1, g).status, Status::ERR_PROC_TERM_WO_SYNC);
    let f = s.send(
        0,
        fence(vec![Proc::new(ns("m"), 0), Proc::new(ns("m"), 3)], false),
    );
    assert_eq!(s.reply(0, f).status, Status::ERR_PROC_TERM_WO_SYNC);
    let g2 = s.send(1, get(Proc::new(ns("m"), 2), "v", vec![]));
    assert!(s.replies.is_empty(), "rank 2 is not gone: {:?}", s.replies);
    let _ = g2;
}

/// Rank 3 of another node put data that a fence brought here, ended, and was started again:
/// its end and its first life's data are forgotten, so a get of it asks its node (for the new
/// life's data) and a fence naming it waits for it rather than failing.
#[test]
fn a_process_restarted_on_another_node_is_waited_for_again_and_its_old_data_forgotten() {
    let mut s = Sim::new();
    two_node_job(&mut s, &[0, 1], &[2, 3]);
    let a = s.send(0, fence(vec![], true));
    let b = s.send(1, fence(vec![], true));
    let (op, call) = s.host_calls.remove(0);
    let HostCall::FenceNb { data, .. } = call else {
        panic!("expected fence_nb, got {call:?}")
    };
    let old_life = vec![ProcKvs {
        proc: Proc::new(ns("m"), 3),
        kvs: vec![Kv {
            scope: Scope::GLOBAL,
            key: key("v"),
            value: Value::Uint32(1),
        }],
    }];
    let mut all = data.clone();
    pmix_wire::encode_frame(&old_life, &mut all).unwrap();
    s.eng.handle_host_done(op, HostOutcome::Bytes(Ok(all)));
    s.pump();
    for (c, id) in [(0, a), (1, b)] {
        assert_eq!(s.reply(c, id).status, Status::SUCCESS);
    }
    let rank3 = Proc::new(ns("m"), 3);
    s.eng
        .proc_ended_elsewhere(&rank3, Status::ERR_PROC_TERM_WO_SYNC);
    s.pump();
    s.eng.proc_restarted(&rank3, 1);
    s.pump();
    s.host_calls.clear();
    let g = s.send(0, get(rank3.clone(), "v", vec![]));
    assert!(s.replies.is_empty(), "answered: {:?}", s.replies);
    assert!(
        matches!(
            s.host_calls.first(),
            Some((_, HostCall::DirectModex { .. }))
        ),
        "{:?}",
        s.host_calls
    );
    s.host_calls.clear();
    let f = s.send(1, fence(vec![Proc::new(ns("m"), 1), rank3], false));
    assert!(s.replies.is_empty(), "answered: {:?}", s.replies);
    assert!(
        matches!(s.host_calls.first(), Some((_, HostCall::FenceNb { .. }))),
        "{:?}",
        s.host_calls
    );
    let _ = (g, f);
}

/// The `REINCARNATION` of each process of `job` as the job data a client was sent says it,
/// native (the image) and expanded (what PMI front-ends send, and the OpenPMIx front-end
/// derives from the same image rank by rank).
fn reincarnations(job: &super::super::nspace::LazyJob) -> (Vec<Option<u32>>, Vec<Option<u32>>) {
    let image = job.image();
    let native = (0..image.size())
        .map(|r| {
            image
                .proc_value(Rank(r), attr::REINCARNATION)
                .and_then(|v| v.as_u32())
        })
        .collect();
    let expanded = job
        .get()
        .procs
        .iter()
        .map(|p| {
            let mut of_key = p
                .info
                .iter()
                .filter(|i| i.key.as_str() == attr::REINCARNATION);
            let value = of_key.next().and_then(|i| i.value.as_u32());
            assert!(of_key.next().is_none(), "{:?}", p.info);
            value
        })
        .collect();
    (native, expanded)
}

fn get_u32(s: &mut Sim, conn: ConnId, p: Proc, k: &str) -> Option<u32> {
    let g = s.send(conn, get(p, k, vec![]));
    let rep = s.reply(conn, g);
    let ReplyBody::Get { data, .. } = rep.body else {
        panic!("not get data: {:?}", rep.body)
    };
    data.first()?.kvs.first()?.value.as_u32()
}

/// A restarted process's `REINCARNATION` is its count of restarts: in the job data it is sent
/// when its new life connects, in the job data of a peer connecting after, and in the
/// server's answer to a peer's get (here and for a process of another node). A client
/// connected before keeps the job data it was sent.
#[test]
fn a_restarted_process_and_its_later_peers_see_its_reincarnation() {
    let mut s = Sim::new();
    // Ranks 0 to 2 here, 3 on node1; 2 connects only after the restart.
    let nodes = pmix_regex::generate_regex(&["node0", "node1"]).unwrap();
    let ppn = pmix_regex::generate_ppn(&[vec![0, 1, 2], vec![3]]).unwrap();
    let info = vec![
        Info::attr(attr::NODE_MAP, Value::Regex(nodes)),
        Info::attr(attr::PROC_MAP, Value::Regex(ppn)),
    ];
    s.eng.register_nspace(ns("m"), 3, &info).unwrap();
    for r in 0..3 {
        let p = Proc::new(ns("m"), r);
        s.eng.register_client(&p, UID, GID, proofs("m", r)).unwrap();
    }
    s.connect(0, "m", 0);
    s.connect(1, "m", 1);
    let first = s.welcomed[0].1.clone();
    assert_eq!(reincarnations(&first).0, vec![Some(0); 4]);
    // Rank 1 fails and is restarted for the second time; rank 3, on the other node, once.
    s.eng.handle_closed(1);
    s.eng.client_ended(&Proc::new(ns("m"), 1));
    s.pump();
    let rank1 = Proc::new(ns("m"), 1);
    s.eng.proc_restarted(&rank1, 2);
    s.eng.proc_restarted(&Proc::new(ns("m"), 3), 1);
    s.eng
        .register_client(&rank1, UID, GID, proofs("m", 1))
        .unwrap();
    s.pump();
    s.connect(2, "m", 1);
    s.connect(3, "m", 2);
    let want = vec![Some(0), Some(2), Some(0), Some(1)];
    for (conn, job) in &s.welcomed[2..] {
        assert_eq!(
            reincarnations(job),
            (want.clone(), want.clone()),
            "conn {conn}"
        );
    }
    // The peers' gets read the server's job data.
    assert_eq!(
        get_u32(&mut s, 0, rank1.clone(), attr::REINCARNATION),
        Some(2)
    );
    let rank3 = Proc::new(ns("m"), 3);
    assert_eq!(get_u32(&mut s, 3, rank3, attr::REINCARNATION), Some(1));
    // What was sent before stays as it was.
    assert_eq!(reincarnations(&first).0, vec![Some(0); 4]);
    assert_eq!(
        s.welcomed[0]
            .1
            .image()
            .proc_value(Rank(1), attr::LOCAL_RANK),
        s.welcomed[2]
            .1
            .image()
            .proc_value(Rank(1), attr::LOCAL_RANK)
    );
}

#[test]
fn reserved_keys_of_a_remote_process_come_from_job_data_at_once() {
    let mut s = Sim::new();
    // Rank 0 here on node0; rank 1 on node1, which never committed.
    two_node_job(&mut s, &[0], &[1]);
    let g = s.send(0, get(Proc::new(ns("m"), 1), attr::NODEID, vec![]));
    let rep = s.reply(0, g);
    assert_eq!(rep.status, Status::SUCCESS);
    let ReplyBody::Get { data, .. } = rep.body else {
        panic!("not get data: {:?}", rep.body)
    };
    assert_eq!(data[0].kvs[0].value, Value::Uint32(1));
    assert!(
        s.host_calls.is_empty(),
        "asked the host: {:?}",
        s.host_calls
    );
    // A key of the process's own is still waited for (and fetched from its node).
    let g = s.send(0, get(Proc::new(ns("m"), 1), "mine", vec![]));
    assert!(s.take_reply(0, g).is_none());
    assert!(matches!(
        s.host_calls.first(),
        Some((_, HostCall::DirectModex { .. }))
    ));
}

/// A PMI-1 or PMI-2 front-end passes on one value per Get: its answer holds that key only,
/// not a copy of everything the process put (each of its Gets cost a copy of all of them,
/// thousands of values late in an MPICH run); a caching client's holds all it may see.
#[test]
fn a_key_only_client_is_answered_with_the_key_it_asked() {
    let mut s = Sim::new();
    s.job("a", 3);
    s.connect(0, "a", 0);
    s.connect_key_only(1, "a", 1);
    s.connect_key_only(2, "a", 2);
    let many: Vec<(String, Value)> = (0..50)
        .map(|i| (format!("k{i}"), Value::String(format!("value {i}"))))
        .collect();
    let kvs: Vec<(&str, Scope, Value)> = many
        .iter()
        .map(|(k, v)| (k.as_str(), Scope::GLOBAL, v.clone()))
        .collect();
    let c = s.send(0, commit(&kvs));
    assert_eq!(s.reply(0, c).status, Status::SUCCESS);
    let p0 = Proc::new(ns("a"), 0);
    let got = |s: &mut Sim, conn: ConnId, target: Proc| -> Vec<Kv> {
        let id = s.send(conn, get(target, "k7", vec![]));
        let r = s.reply(conn, id);
        assert_eq!(r.status, Status::SUCCESS);
        let ReplyBody::Get { data, .. } = r.body else {
            panic!("not a get reply")
        };
        data.into_iter().flat_map(|d| d.kvs).collect()
    };
    let one = got(&mut s, 1, p0.clone());
    assert_eq!(
        one.len(),
        1,
        "a key-only client was sent {} values",
        one.len()
    );
    assert_eq!(one[0].key, key("k7"));
    assert_eq!(one[0].value, Value::String("value 7".into()));
    // By rank UNDEF (PMI-1's get: whichever process put the key), the same.
    let any = got(&mut s, 2, Proc::new(ns("a"), Rank::UNDEF));
    assert_eq!(any.len(), 1);
    assert_eq!(any[0].value, Value::String("value 7".into()));
    // A key the process does not hold: not found, nothing sent.
    let id = s.send(1, get(p0.clone(), "nope", vec![]));
    assert_eq!(s.reply(1, id).status, Status::ERR_NOT_FOUND);
    // A caching client gets everything it may see.
    let all = got(&mut s, 0, p0);
    assert_eq!(all.len(), 50);
}

/// A get with a short `PMIX_TIMEOUT` asks the other node to wait that long; a later get
/// without one must not ride on that request, whose timing out is not its own (seen on
/// three nodes under load: the later get failed with `ERR_TIMEOUT`).
#[test]
fn a_timed_out_request_to_another_node_does_not_fail_a_later_get_that_did_not_ask_for_it() {
    let mut s = Sim::new();
    two_node_job(&mut s, &[0], &[1]);
    let remote = Proc::new(ns("m"), 1);
    let timeout = vec![Info::attr(attr::TIMEOUT, 1i32)];
    let short = s.send(0, get(remote.clone(), "never", timeout));
    let (first, _) = s.host_calls.remove(0);
    s.advance(Duration::from_millis(1100));
    assert_eq!(s.reply(0, short).status, Status::ERR_TIMEOUT);
    // The first request is still out (its answer is on the way) when the next get comes.
    let patient = s.send(0, get(remote.clone(), "never", vec![]));
    assert_eq!(
        s.host_calls.len(),
        1,
        "the patient get joined a request that stops waiting after 1 s"
    );
    let (second, call) = s.host_calls.remove(0);
    let HostCall::DirectModex { info, .. } = &call else {
        panic!("not a direct modex: {call:?}")
    };
    assert!(
        !info.iter().any(|i| i.key.as_str() == attr::TIMEOUT),
        "the patient get's request carries a timeout: {info:?}"
    );
    s.answer(first, HostOutcome::Bytes(Err(Status::ERR_TIMEOUT)));
    assert!(
        s.take_reply(0, patient).is_none(),
        "the first request's timeout failed the patient get"
    );
    s.answer(second, HostOutcome::Bytes(Ok(blob_of(&remote, &["never"]))));
    assert_eq!(s.reply(0, patient).status, Status::SUCCESS);
}

/// A get whose deadline the outstanding request covers joins it.
#[test]
fn a_get_joins_a_request_to_another_node_that_waits_at_least_as_long() {
    let mut s = Sim::new();
    two_node_job(&mut s, &[0], &[1]);
    let remote = Proc::new(ns("m"), 1);
    let patient = s.send(0, get(remote.clone(), "v", vec![]));
    let short = s.send(
        0,
        get(remote.clone(), "v", vec![Info::attr(attr::TIMEOUT, 5i32)]),
    );
    assert_eq!(s.host_calls.len(), 1, "a covered get asked again");
    let (op, _) = s.host_calls.remove(0);
    s.answer(op, HostOutcome::Bytes(Ok(blob_of(&remote, &["v"]))));
    assert_eq!(s.reply(0, patient).status, Status::SUCCESS);
    assert_eq!(s.reply(0, short).status, Status::SUCCESS);
}
