//! Groups formed by invitation (events the server reads on their way) and left (a request).

use pmix_types::{DataRange, Info, Proc, Rank, Status, Value, attr};
use pmix_wire::{Event, Request};

use super::{Sim, ns};
use crate::engine::ConnId;

fn procs(name: &str, ranks: &[u32]) -> Vec<Proc> {
    ranks.iter().map(|r| Proc::new(ns(name), *r)).collect()
}

fn range(p: &[Proc]) -> Value {
    let items = p.iter().cloned().map(Value::Proc).collect();
    Value::DataArray(Box::new(
        pmix_types::DataArray::new(pmix_types::DataType::PROC, items).unwrap(),
    ))
}

/// A client's notification of a group event, as libpmix sends it.
fn group_event(code: Status, grp: Option<&str>, to: Value) -> Request {
    let mut info = vec![
        Info::attr(attr::EVENT_CUSTOM_RANGE, to),
        Info::attr(attr::EVENT_NON_DEFAULT, true),
    ];
    if let Some(g) = grp {
        info.push(Info::attr(attr::GROUP_ID, g));
    }
    Request::Notify {
        event: Event {
            code,
            source: Proc::new(ns("x"), 0),
            range: DataRange::CUSTOM,
            info,
        },
    }
}

fn send_ok(s: &mut Sim, conn: ConnId, req: Request) {
    let id = s.send(conn, req);
    assert_eq!(s.reply(conn, id).status, Status::SUCCESS);
}

fn leave(s: &mut Sim, conn: ConnId, grp: &str) -> Status {
    let id = s.send(
        conn,
        Request::GroupLeave {
            grp: grp.into(),
            info: vec![],
        },
    );
    s.reply(conn, id).status
}

fn events_of(s: &Sim, code: Status) -> Vec<(ConnId, Event)> {
    s.events
        .iter()
        .filter(|(_, e)| e.code == code)
        .cloned()
        .collect()
}

fn info_of<'e>(e: &'e Event, key: &str) -> Option<&'e Value> {
    e.info
        .iter()
        .find(|i| i.key.as_str() == key)
        .map(|i| &i.value)
}

#[test]
fn an_invitee_that_ends_before_answering_is_told_to_the_leader_alone() {
    let mut s = Sim::new();
    s.job("a", 4);
    for r in 0..4 {
        s.connect(r as ConnId, "a", r);
        s.register_events(r as ConnId, &[Status::PROC_TERMINATED]);
    }
    let invitees = procs("a", &[1, 2, 3]);
    send_ok(
        &mut s,
        0,
        group_event(Status::GROUP_INVITED, Some("g"), range(&invitees)),
    );
    // Rank 1 answers; ranks 2 and 3 end without answering, 3 after finalizing.
    let leader = Value::Proc(Proc::new(ns("a"), 0));
    send_ok(
        &mut s,
        1,
        group_event(Status::GROUP_INVITE_ACCEPTED, None, leader.clone()),
    );
    s.eng.handle_closed(2);
    s.pump();
    let f = s.send(3, Request::Finalize { info: vec![] });
    let _ = s.take_reply(3, f);
    s.eng.handle_closed(3);
    s.pump();
    let got = events_of(&s, Status::PROC_TERMINATED);
    let told: Vec<_> = got
        .iter()
        .map(|(c, e)| (*c, info_of(e, attr::EVENT_AFFECTED_PROC).cloned()))
        .collect();
    assert_eq!(
        told,
        vec![
            (0, Some(Value::Proc(Proc::new(ns("a"), 2)))),
            (0, Some(Value::Proc(Proc::new(ns("a"), 3)))),
        ],
        "only the leader, only for the invitees that never answered"
    );
    assert_eq!(
        info_of(&got[0].1, attr::GROUP_ID).and_then(Value::as_str),
        Some("g")
    );
}

#[test]
fn a_process_that_accepted_hears_of_the_leaders_end_until_the_group_is_complete() {
    let mut s = Sim::new();
    s.job("a", 3);
    for r in 0..3 {
        s.connect(r as ConnId, "a", r);
        s.register_events(r as ConnId, &[Status::PROC_TERMINATED]);
    }
    let leader = Value::Proc(Proc::new(ns("a"), 0));
    send_ok(
        &mut s,
        1,
        group_event(Status::GROUP_INVITE_ACCEPTED, Some("g"), leader.clone()),
    );
    send_ok(
        &mut s,
        2,
        group_event(Status::GROUP_INVITE_ACCEPTED, Some("h"), leader.clone()),
    );
    // Group g completes (for rank 1); then the leader ends: rank 2 still waited.
    send_ok(
        &mut s,
        0,
        group_event(
            Status::GROUP_CONSTRUCT_COMPLETE,
            Some("g"),
            range(&procs("a", &[0, 1])),
        ),
    );
    s.eng.handle_closed(0);
    s.pump();
    let got = events_of(&s, Status::PROC_TERMINATED);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].0, 2);
    assert_eq!(
        info_of(&got[0].1, attr::GROUP_ID).and_then(Value::as_str),
        Some("h")
    );
}

#[test]
fn a_group_completed_by_invitation_can_be_left_and_the_others_hear_of_it() {
    let mut s = Sim::new();
    s.job("a", 4);
    for r in 0..4 {
        s.connect(r as ConnId, "a", r);
        s.register_events(r as ConnId, &[Status::GROUP_LEFT]);
    }
    // Unknown before the leader announces it.
    assert_eq!(leave(&mut s, 1, "g"), Status::ERR_NOT_FOUND);
    send_ok(
        &mut s,
        0,
        group_event(
            Status::GROUP_CONSTRUCT_COMPLETE,
            Some("g"),
            range(&procs("a", &[0, 1, 2])),
        ),
    );
    // Rank 3 is no member.
    assert_eq!(leave(&mut s, 3, "g"), Status::ERR_NOT_FOUND);
    assert_eq!(leave(&mut s, 1, "g"), Status::SUCCESS);
    let got = events_of(&s, Status::GROUP_LEFT);
    let mut to: Vec<ConnId> = got.iter().map(|(c, _)| *c).collect();
    to.sort();
    assert_eq!(to, vec![0, 2], "the remaining members, not the leaver");
    assert_eq!(
        info_of(&got[0].1, attr::EVENT_AFFECTED_PROC),
        Some(&Value::Proc(Proc::new(ns("a"), 1)))
    );
    // Left once: not a member any more.
    assert_eq!(leave(&mut s, 1, "g"), Status::ERR_NOT_FOUND);
    // The rest destruct it among themselves, though they name the members they knew.
    let d: Vec<_> = [0, 2]
        .iter()
        .map(|r| {
            s.send(
                *r,
                Request::GroupDestruct {
                    grp: "g".into(),
                    procs: procs("a", &[0, 1, 2]),
                    info: vec![],
                },
            )
        })
        .collect();
    assert_eq!(s.reply(0, d[0]).status, Status::SUCCESS);
    assert_eq!(s.reply(2, d[1]).status, Status::SUCCESS);
}

#[test]
fn a_member_left_on_another_node_is_dropped_here_too() {
    let mut s = Sim::new();
    s.job("a", 3);
    for r in 0..2 {
        s.connect(r as ConnId, "a", r);
    }
    let members = procs("a", &[0, 1, 2]);
    send_ok(
        &mut s,
        0,
        group_event(Status::GROUP_CONSTRUCT_COMPLETE, Some("g"), range(&members)),
    );
    // Rank 2 lives elsewhere and left: its server's event arrives through the host.
    s.eng.host_notify(&Event {
        code: Status::GROUP_LEFT,
        source: Proc::new(ns("a"), 2),
        range: DataRange::CUSTOM,
        info: vec![
            Info::attr(attr::GROUP_ID, "g"),
            Info::attr(attr::EVENT_AFFECTED_PROC, Proc::new(ns("a"), 2)),
            Info::attr(attr::EVENT_CUSTOM_RANGE, range(&procs("a", &[0, 1]))),
        ],
    });
    s.pump();
    // Destruct over the members known here completes with the two local ones.
    let d: Vec<_> = [0, 1]
        .iter()
        .map(|r| {
            s.send(
                *r,
                Request::GroupDestruct {
                    grp: "g".into(),
                    procs: vec![],
                    info: vec![],
                },
            )
        })
        .collect();
    assert_eq!(s.reply(0, d[0]).status, Status::SUCCESS);
    assert_eq!(s.reply(1, d[1]).status, Status::SUCCESS);
}

#[test]
fn a_fence_over_a_group_formed_by_invitation_waits_for_its_members() {
    let mut s = Sim::new();
    s.job("a", 3);
    for r in 0..3 {
        s.connect(r as ConnId, "a", r);
    }
    send_ok(
        &mut s,
        0,
        group_event(
            Status::GROUP_CONSTRUCT_COMPLETE,
            Some("ourgroup"),
            range(&procs("a", &[1, 0])),
        ),
    );
    let over_group = || super::fence(vec![Proc::new(ns("ourgroup"), Rank::WILDCARD)], false);
    let f1 = s.send(1, over_group());
    assert!(s.take_reply(1, f1).is_none(), "completed before rank 0");
    let f0 = s.send(0, over_group());
    assert_eq!(s.reply(0, f0).status, Status::SUCCESS);
    assert_eq!(s.reply(1, f1).status, Status::SUCCESS);
    // After a member leaves, the fence is over those that remain.
    assert_eq!(leave(&mut s, 1, "ourgroup"), Status::SUCCESS);
    let alone = s.send(0, over_group());
    assert_eq!(s.reply(0, alone).status, Status::SUCCESS);
}
