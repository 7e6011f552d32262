//! Connect and disconnect: across namespaces, across runs, participants that die.

use pmix_types::{Proc, Rank, Scope, Status, Value, attr};
use pmix_wire::{ReplyBody, Request};

use super::{Sim, commit, connect_parts, fence, get, ns, take_connect_call};
use crate::engine::{ConnId, HostCall, HostOutcome};

#[test]
fn connect_across_namespaces_exchanges_job_and_process_data() {
    let mut sim = Sim::new();
    sim.job("a", 2);
    sim.job("b", 1);
    sim.connect(1, "a", 0);
    sim.connect(2, "a", 1);
    sim.connect(3, "b", 0);
    sim.send(1, commit(&[("ka", Scope::GLOBAL, Value::from("from-a0"))]));
    sim.send(3, commit(&[("kb", Scope::GLOBAL, Value::from("from-b0"))]));
    let procs = vec![Proc::new(ns("a"), Rank::WILDCARD), Proc::new(ns("b"), 0)];
    let connect = |procs: &Vec<Proc>| Request::Connect {
        procs: procs.clone(),
        info: vec![],
    };
    let i1 = sim.send(1, connect(&procs));
    let i3 = sim.send(3, connect(&procs));
    assert!(
        sim.take_reply(1, i1).is_none(),
        "a connect waits for every participant"
    );
    // A fence over the same list is a different collective.
    let f = sim.send(2, fence(procs.clone(), false));
    assert!(sim.take_reply(2, f).is_none());
    let i2 = sim.send(2, connect(&procs));
    for (conn, id, other) in [(1, i1, "b"), (2, i2, "b"), (3, i3, "a")] {
        let r = sim.reply(conn, id);
        assert_eq!(r.status, Status::SUCCESS);
        let ReplyBody::Connect { jobs, data } = &r.body else {
            panic!("not a connect reply: {r:?}");
        };
        let names: Vec<_> = jobs.iter().map(|j| j.nspace.as_str()).collect();
        assert_eq!(names, [other], "each side gets the other's job data");
        let mut keys: Vec<_> = data
            .iter()
            .flat_map(|pk| pk.kvs.iter().map(|kv| kv.key.as_str().to_owned()))
            .collect();
        keys.sort();
        assert_eq!(keys, ["ka", "kb"]);
    }
    // The fence is still waiting for the others.
    assert!(sim.take_reply(2, f).is_none());
    // Disconnect is a collective too.
    let d1 = sim.send(
        1,
        Request::Disconnect {
            procs: procs.clone(),
            info: vec![],
        },
    );
    let d2 = sim.send(
        2,
        Request::Disconnect {
            procs: procs.clone(),
            info: vec![],
        },
    );
    assert!(sim.take_reply(1, d1).is_none());
    let d3 = sim.send(
        3,
        Request::Disconnect {
            procs,
            info: vec![],
        },
    );
    for (conn, id) in [(1, d1), (2, d2), (3, d3)] {
        assert_eq!(sim.reply(conn, id).status, Status::SUCCESS);
    }
    // An empty list is refused.
    let e = sim.send(
        1,
        Request::Connect {
            procs: vec![],
            info: vec![],
        },
    );
    assert_eq!(sim.reply(1, e).status, Status::ERR_BAD_PARAM);
}

#[test]
fn a_participant_dying_mid_connect_fails_the_others_and_raises_an_event() {
    let mut sim = Sim::new();
    sim.job("a", 1);
    sim.job("b", 2);
    sim.job("c", 1);
    sim.connect(1, "a", 0);
    sim.connect(2, "b", 0);
    sim.connect(3, "b", 1);
    sim.connect(4, "c", 0);
    for conn in [1, 3, 4] {
        let id = sim.send(
            conn,
            Request::RegisterEvents {
                codes: vec![],
                info: vec![],
            },
        );
        assert_eq!(sim.reply(conn, id).status, Status::SUCCESS);
    }
    let procs = vec![
        Proc::new(ns("a"), Rank::WILDCARD),
        Proc::new(ns("b"), Rank::WILDCARD),
    ];
    let i1 = sim.send(
        1,
        Request::Connect {
            procs: procs.clone(),
            info: vec![],
        },
    );
    let i3 = sim.send(
        3,
        Request::Connect {
            procs,
            info: vec![],
        },
    );
    // b:0 dies before connecting.
    sim.eng.handle_closed(2);
    sim.pump();
    assert_eq!(sim.reply(1, i1).status, Status::ERR_PROC_TERM_WO_SYNC);
    assert_eq!(sim.reply(3, i3).status, Status::ERR_PROC_TERM_WO_SYNC);
    // Its own job hears of it; an unrelated job does not, nor does a (not yet connected) job.
    let told: Vec<ConnId> = sim.events.iter().map(|(c, _)| *c).collect();
    assert_eq!(told, [3]);
    let (_, ev) = &sim.events[0];
    assert_eq!(ev.code, Status::ERR_PROC_TERM_WO_SYNC);
    assert!(
        ev.info
            .iter()
            .any(|i| i.key.as_str() == attr::EVENT_AFFECTED_PROC
                && i.value.as_proc() == Some(&Proc::new(ns("b"), 0)))
    );
}

#[test]
fn connect_across_runs_brings_each_run_the_others_namespace() {
    // Two servers, each of one launcher run: a (2 ranks) is known only to the first, b (1
    // rank) only to the second. What the host gathers (here by hand; a name server between
    // runs in pmixrun) is the concatenation of both contributions.
    let mut one = Sim::new();
    let mut two = Sim::new();
    one.auto_host = false;
    two.auto_host = false;
    one.job("a", 2);
    two.job("b", 1);
    one.connect_answering_host(1, "a", 0);
    one.connect_answering_host(2, "a", 1);
    two.connect_answering_host(1, "b", 0);
    let c = one.send(1, commit(&[("ka", Scope::GLOBAL, Value::from("from-a0"))]));
    assert_eq!(one.reply(1, c).status, Status::SUCCESS);
    let c = two.send(1, commit(&[("kb", Scope::GLOBAL, Value::from("from-b0"))]));
    assert_eq!(two.reply(1, c).status, Status::SUCCESS);
    let procs = vec![
        Proc::new(ns("a"), Rank::WILDCARD),
        Proc::new(ns("b"), Rank::WILDCARD),
    ];
    let connect = || Request::Connect {
        procs: procs.clone(),
        info: vec![],
    };
    let i1 = one.send(1, connect());
    assert!(
        one.host_calls.is_empty(),
        "went to the host before a:1 came"
    );
    let i2 = one.send(2, connect());
    let j1 = two.send(1, connect());
    let (op_one, data_one) = take_connect_call(&mut one);
    let (op_two, data_two) = take_connect_call(&mut two);
    // Each contribution carries its run's namespace and its committed data.
    let parts = connect_parts(&data_one);
    let jobs: Vec<_> = parts
        .iter()
        .flat_map(|p| &p.jobs)
        .map(|j| j.nspace.as_str())
        .collect();
    assert_eq!(jobs, ["a"]);
    let senders: Vec<_> = parts
        .iter()
        .flat_map(|p| &p.data)
        .map(|pk| pk.proc.clone())
        .collect();
    assert_eq!(senders, [Proc::new(ns("a"), 0)], "a:1 committed nothing");
    let jobs: Vec<_> = connect_parts(&data_two)
        .iter()
        .flat_map(|p| p.jobs.clone())
        .map(|j| j.nspace)
        .collect();
    assert_eq!(jobs, [ns("b")]);
    let mut all = data_one;
    all.extend_from_slice(&data_two);
    one.answer(op_one, HostOutcome::Bytes(Ok(all.clone())));
    two.answer(op_two, HostOutcome::Bytes(Ok(all)));
    let replies = [
        (one.reply(1, i1), "b", "kb"),
        (one.reply(2, i2), "b", "kb"),
        (two.reply(1, j1), "a", "ka"),
    ];
    for (r, other, key) in replies {
        assert_eq!(r.status, Status::SUCCESS, "{r:?}");
        let ReplyBody::Connect { jobs, data } = &r.body else {
            panic!("not a connect reply: {r:?}");
        };
        let names: Vec<_> = jobs.iter().map(|j| j.nspace.as_str()).collect();
        assert_eq!(names, [other], "each side gets the other run's job data");
        assert!(
            data.iter()
                .flat_map(|pk| &pk.kvs)
                .any(|kv| kv.key.as_str() == key),
            "{key} missing from {data:?}"
        );
    }
    // The other run's namespace is known from now on: its job data and its processes' data
    // are served here.
    let size = one.send(
        2,
        get(Proc::new(ns("b"), Rank::WILDCARD), attr::JOB_SIZE, vec![]),
    );
    let r = one.reply(2, size);
    assert_eq!(r.status, Status::SUCCESS, "{r:?}");
    let kb = one.send(2, get(Proc::new(ns("b"), 0), "kb", vec![]));
    let ReplyBody::Get { data, .. } = one.reply(2, kb).body else {
        panic!("not a get reply")
    };
    assert_eq!(data[0].kvs[0].value, Value::from("from-b0"));
    // A second connect with b, now known here, still carries a's job data (and not b's):
    // another server of a's run may be taking part without knowing b, nor b's servers a.
    let again = Request::Connect {
        procs: vec![Proc::new(ns("a"), 0), Proc::new(ns("b"), 0)],
        info: vec![],
    };
    let c = one.send(1, again);
    let (op, data) = take_connect_call(&mut one);
    let jobs: Vec<_> = connect_parts(&data)
        .into_iter()
        .flat_map(|p| p.jobs)
        .map(|j| j.nspace)
        .collect();
    assert_eq!(jobs, [ns("a")]);
    one.answer(op, HostOutcome::Bytes(Ok(data)));
    assert_eq!(one.reply(1, c).status, Status::SUCCESS);
    // A fence over both runs (Open MPI's disconnect) goes to the host, none of b being here.
    let f = one.send(1, fence(procs.clone(), false));
    let f2 = one.send(2, fence(procs.clone(), false));
    assert_eq!(one.host_calls.len(), 1, "{:?}", one.host_calls);
    let (op, call) = one.host_calls.remove(0);
    assert!(matches!(call, HostCall::FenceNb { .. }), "{call:?}");
    one.answer(op, HostOutcome::Bytes(Ok(Vec::new())));
    assert_eq!(one.reply(1, f).status, Status::SUCCESS);
    assert_eq!(one.reply(2, f2).status, Status::SUCCESS);
    // A disconnect too; the host's failure is each participant's.
    let d1 = one.send(
        1,
        Request::Disconnect {
            procs: procs.clone(),
            info: vec![],
        },
    );
    let d2 = one.send(
        2,
        Request::Disconnect {
            procs,
            info: vec![],
        },
    );
    let (op, call) = one.host_calls.remove(0);
    assert!(matches!(call, HostCall::Disconnect { .. }), "{call:?}");
    one.answer(op, HostOutcome::Unit(Err(Status::ERR_UNREACH)));
    assert_eq!(one.reply(1, d1).status, Status::ERR_UNREACH);
    assert_eq!(one.reply(2, d2).status, Status::ERR_UNREACH);
}

#[test]
fn only_a_connect_or_disconnect_may_name_an_unknown_namespace() {
    let mut sim = Sim::new();
    sim.auto_host = false;
    sim.job("a", 1);
    sim.connect_answering_host(1, "a", 0);
    let procs = vec![
        Proc::new(ns("a"), Rank::WILDCARD),
        Proc::new(ns("elsewhere"), Rank::WILDCARD),
    ];
    // A fence over a namespace nobody here knows is refused at once, as before.
    let f = sim.send(1, fence(procs.clone(), false));
    assert_eq!(sim.reply(1, f).status, Status::ERR_BAD_PARAM);
    assert!(sim.host_calls.is_empty());
    // A connect goes to the host, whose refusal is the client's answer; nothing is learnt.
    let c = sim.send(
        1,
        Request::Connect {
            procs,
            info: vec![],
        },
    );
    let (op, data) = take_connect_call(&mut sim);
    let jobs: Vec<_> = connect_parts(&data)
        .into_iter()
        .flat_map(|p| p.jobs)
        .collect();
    assert_eq!(jobs.len(), 1, "the job data of a goes with it");
    sim.answer(op, HostOutcome::Bytes(Err(Status::ERR_NOT_FOUND)));
    assert_eq!(sim.reply(1, c).status, Status::ERR_NOT_FOUND);
    assert!(sim.eng.ns_id("elsewhere").is_none());
}
