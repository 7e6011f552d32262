//! Publish, lookup and unpublish: the built-in name store and the host's.

use std::time::Duration;

use pmix_types::{Info, Persistence, Proc, Status, attr};
use pmix_wire::{Reply, ReplyBody, Request};

use super::{GID, Sim, UID, key, ns, proofs, secret};
use crate::engine::{ConnId, Engine, HostCall, HostOutcome, PeerCreds};

fn publish(pairs: &[(&str, &str)], info: Vec<Info>) -> Request {
    Request::Publish {
        data: pairs.iter().map(|(k, v)| Info::new(key(k), *v)).collect(),
        info,
    }
}

fn lookup(keys: &[&str], info: Vec<Info>) -> Request {
    Request::Lookup {
        keys: keys.iter().map(|k| key(k)).collect(),
        info,
    }
}

fn found_keys(r: &Reply) -> Vec<(String, Proc)> {
    match &r.body {
        ReplyBody::Lookup { found } => found
            .iter()
            .map(|p| (p.key.as_str().to_owned(), p.proc.clone()))
            .collect(),
        other => panic!("not a lookup reply: {other:?}"),
    }
}

#[test]
fn builtin_name_service_serves_publish_lookup_unpublish() {
    let mut sim = Sim::new();
    sim.job("a", 2);
    sim.connect(1, "a", 0);
    sim.connect(2, "a", 1);
    let id = sim.send(1, publish(&[("svc", "port")], vec![]));
    assert_eq!(sim.reply(1, id).status, Status::SUCCESS);
    let id = sim.send(2, lookup(&["svc", "other"], vec![]));
    let r = sim.reply(2, id);
    assert_eq!(r.status, Status::SUCCESS);
    assert_eq!(found_keys(&r), [("svc".to_owned(), Proc::new(ns("a"), 0))]);
    let id = sim.send(2, publish(&[("svc", "mine")], vec![]));
    assert_eq!(sim.reply(2, id).status, Status::ERR_DUPLICATE_KEY);
    let id = sim.send(
        2,
        Request::Unpublish {
            keys: vec![key("svc")],
            info: vec![],
        },
    );
    assert_eq!(sim.reply(2, id).status, Status::ERR_NO_PERMISSIONS);
    let id = sim.send(
        1,
        Request::Unpublish {
            keys: vec![key("svc")],
            info: vec![],
        },
    );
    assert_eq!(sim.reply(1, id).status, Status::SUCCESS);
    let id = sim.send(2, lookup(&["svc"], vec![]));
    assert_eq!(sim.reply(2, id).status, Status::ERR_NOT_FOUND);
}

#[test]
fn waiting_lookup_is_answered_by_a_later_publish_or_times_out() {
    let mut sim = Sim::new();
    sim.job("a", 3);
    for r in 0..3 {
        sim.connect(r as ConnId + 1, "a", r);
    }
    let wait = vec![Info::attr(attr::WAIT, 0i32)];
    let waiting = sim.send(2, lookup(&["late"], wait.clone()));
    let timed = sim.send(
        3,
        lookup(
            &["never"],
            vec![
                Info::attr(attr::WAIT, 0i32),
                Info::attr(attr::TIMEOUT, 5i32),
            ],
        ),
    );
    assert!(
        sim.take_reply(2, waiting).is_none(),
        "WAIT must hold the lookup"
    );
    let id = sim.send(1, publish(&[("late", "v")], vec![]));
    assert_eq!(sim.reply(1, id).status, Status::SUCCESS);
    let r = sim.reply(2, waiting);
    assert_eq!(r.status, Status::SUCCESS);
    assert_eq!(found_keys(&r)[0].0, "late");
    assert!(sim.take_reply(3, timed).is_none());
    sim.advance(Duration::from_secs(5));
    assert_eq!(sim.reply(3, timed).status, Status::ERR_TIMEOUT);
    // A waiter whose client goes away is dropped: a later publish answers nobody.
    let gone = sim.send(2, lookup(&["later"], wait));
    sim.eng.handle_closed(2);
    sim.pump();
    sim.send(1, publish(&[("later", "v")], vec![]));
    assert!(sim.take_reply(2, gone).is_none());
}

#[test]
fn publications_end_with_their_process_or_namespace() {
    let mut sim = Sim::new();
    sim.job("a", 2);
    sim.job("b", 1);
    sim.connect(1, "a", 0);
    sim.connect(2, "a", 1);
    sim.connect(3, "b", 0);
    let per = |p: Persistence| vec![Info::attr(attr::PERSISTENCE, p)];
    sim.send(1, publish(&[("proc", "x")], per(Persistence::PROC)));
    sim.send(1, publish(&[("app", "x")], vec![]));
    sim.send(1, publish(&[("indef", "x")], per(Persistence::INDEF)));
    sim.eng.handle_closed(1);
    sim.pump();
    let id = sim.send(3, lookup(&["proc", "app", "indef"], vec![]));
    let names: Vec<_> = found_keys(&sim.reply(3, id))
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(names, ["app", "indef"], "PROC data goes with its publisher");
    sim.eng.deregister_nspace("a");
    sim.pump();
    let id = sim.send(3, lookup(&["proc", "app", "indef"], vec![]));
    let names: Vec<_> = found_keys(&sim.reply(3, id))
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(names, ["indef"], "APP data goes with its namespace");
}

#[test]
fn host_name_service_gets_the_callers_credentials() {
    let mut sim = Sim::new();
    sim.eng = Engine::new("node0".into(), vec![], crate::NameService::Host);
    sim.auto_host = false;
    sim.job("a", 1);
    sim.connect_answering_host(1, "a", 0);
    // A client cannot pass itself off as another user.
    let forged = vec![Info::attr(attr::USERID, 0u32)];
    let id = sim.send(1, publish(&[("k", "v")], forged));
    let (op, call) = sim.host_calls.remove(0);
    let HostCall::Publish { proc, info, .. } = call else {
        panic!("expected a publish call, got {call:?}");
    };
    assert_eq!(proc, Proc::new(ns("a"), 0));
    let uids: Vec<_> = info
        .iter()
        .filter(|i| i.key.as_str() == attr::USERID)
        .map(|i| i.value.as_u32())
        .collect();
    assert_eq!(uids, [Some(UID)]);
    assert!(
        info.iter()
            .any(|i| i.key.as_str() == attr::GRPID && i.value.as_u32() == Some(GID))
    );
    sim.eng
        .handle_host_done(op, HostOutcome::Unit(Err(Status::ERR_DUPLICATE_KEY)));
    sim.pump();
    assert_eq!(
        sim.reply(1, id).status,
        Status::ERR_DUPLICATE_KEY,
        "the host's status reaches the client"
    );
    let id = sim.send(1, lookup(&["k"], vec![]));
    let (op, _) = sim.host_calls.remove(0);
    sim.eng
        .handle_host_done(op, HostOutcome::Lookup(Ok(vec![])));
    sim.pump();
    assert_eq!(sim.reply(1, id).status, Status::ERR_NOT_FOUND);
}

#[test]
fn another_users_process_never_sees_published_data() {
    let mut sim = Sim::new();
    sim.job("a", 2);
    // Rank 1 runs as another user.
    sim.eng
        .register_client(&Proc::new(ns("a"), 1), UID + 1, GID, proofs("a", 1))
        .unwrap();
    sim.connect(1, "a", 0);
    sim.hello(
        2,
        "a",
        1,
        &secret("a", 1),
        PeerCreds {
            uid: UID + 1,
            gid: GID,
        },
    );
    assert!(sim.accepted.contains(&2));
    let global = vec![Info::attr(attr::RANGE, pmix_types::DataRange::GLOBAL)];
    sim.send(1, publish(&[("svc", "port")], global.clone()));
    let id = sim.send(2, lookup(&["svc"], global.clone()));
    assert_eq!(sim.reply(2, id).status, Status::ERR_NOT_FOUND);
    let id = sim.send(
        2,
        Request::Unpublish {
            keys: vec![key("svc")],
            info: vec![],
        },
    );
    assert_eq!(
        sim.reply(2, id).status,
        Status::ERR_NOT_FOUND,
        "for them it does not exist"
    );
    // The same name is free for them.
    let id = sim.send(2, publish(&[("svc", "theirs")], global));
    assert_eq!(sim.reply(2, id).status, Status::SUCCESS);
}
