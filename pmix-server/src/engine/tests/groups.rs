//! Groups: construction and destruction as collectives over the members, context ids, the
//! members' failures and timeouts, and groups spanning nodes through the host.

use std::time::Duration;

use pmix_types::{Info, Key, Proc, Rank, Scope, Status, Value, attr};
use pmix_wire::{Reply, ReplyBody, Request};

use super::{Sim, commit, fence, fence_data, ns, two_node_job};
use crate::engine::{ConnId, GroupOp, HostCall, HostOutcome};

fn construct(grp: &str, procs: Vec<Proc>, ctxid: bool) -> Request {
    let mut info = vec![];
    if ctxid {
        info.push(Info::attr(attr::GROUP_ASSIGN_CONTEXT_ID, true));
    }
    Request::GroupConstruct {
        grp: grp.into(),
        procs,
        info,
    }
}

fn destruct(grp: &str, procs: Vec<Proc>) -> Request {
    Request::GroupDestruct {
        grp: grp.into(),
        procs,
        info: vec![],
    }
}

fn procs(name: &str, ranks: &[u32]) -> Vec<Proc> {
    ranks.iter().map(|r| Proc::new(ns(name), *r)).collect()
}

fn group_of(r: &Reply) -> (Vec<Proc>, Option<u64>) {
    match &r.body {
        ReplyBody::Group {
            members,
            context_id,
        } => (members.clone(), *context_id),
        other => panic!("not a group reply: {other:?} ({:?})", r.status),
    }
}

#[test]
fn construct_completes_when_every_member_arrived_with_one_context_id_each_group() {
    let mut s = Sim::new();
    s.job("a", 3);
    for r in 0..3 {
        s.connect(r as ConnId, "a", r);
    }
    let members = procs("a", &[2, 0]);
    let c0 = s.send(0, construct("g1", members.clone(), true));
    assert!(
        s.take_reply(0, c0).is_none(),
        "completed before rank 2 arrived"
    );
    let c2 = s.send(2, construct("g1", members.clone(), true));
    let (m0, id0) = group_of(&s.reply(0, c0));
    let (m2, id2) = group_of(&s.reply(2, c2));
    assert_eq!(m0, procs("a", &[0, 2]), "members sorted");
    assert_eq!((m2, id2), (m0, id0));
    assert!(id0.is_some());
    // Another group, another id; without the directive, none.
    let all = procs("a", &[0, 1, 2]);
    let ids: Vec<_> = (0..3)
        .map(|r| s.send(r as ConnId, construct("g2", all.clone(), true)))
        .collect();
    let (_, id) = group_of(&s.reply(1, ids[1]));
    assert!(id.is_some() && id != id0, "{id:?} after {id0:?}");
    let plain: Vec<_> = (0..3)
        .map(|r| s.send(r as ConnId, construct("g3", all.clone(), false)))
        .collect();
    assert_eq!(group_of(&s.reply(0, plain[0])).1, None);
    // Destruct: the members it was constructed with when none are given; an unknown group
    // is not found.
    let d0 = s.send(0, destruct("g1", vec![]));
    let d2 = s.send(2, destruct("g1", members));
    assert_eq!(s.reply(0, d0).status, Status::SUCCESS);
    assert_eq!(s.reply(2, d2).status, Status::SUCCESS);
    let d = s.send(0, destruct("g1", vec![]));
    assert_eq!(s.reply(0, d).status, Status::ERR_NOT_FOUND);
    // A caller outside the members, or no members, is refused.
    let bad = s.send(1, construct("g4", procs("a", &[0, 2]), false));
    assert_eq!(s.reply(1, bad).status, Status::ERR_BAD_PARAM);
    let none = s.send(1, construct("g4", vec![], false));
    assert_eq!(s.reply(1, none).status, Status::ERR_BAD_PARAM);
}

#[test]
fn a_member_that_ends_fails_the_construct_and_a_timeout_ends_the_wait() {
    let mut s = Sim::new();
    s.job("a", 3);
    for r in 0..3 {
        s.connect(r as ConnId, "a", r);
    }
    let all = procs("a", &[0, 1, 2]);
    let c0 = s.send(0, construct("g", all.clone(), true));
    s.eng.handle_closed(2);
    s.pump();
    let term = Status::from_name("ERR_PROC_TERM_WO_SYNC").unwrap();
    assert_eq!(s.reply(0, c0).status, term);
    // Later constructs over the departed member fail at once.
    let c1 = s.send(1, construct("g", all, true));
    assert_eq!(s.reply(1, c1).status, term);
    // A timeout (seconds) ends a construct some member never enters.
    let mut req = construct("h", procs("a", &[0, 1]), false);
    if let Request::GroupConstruct { info, .. } = &mut req {
        info.push(Info::attr(attr::TIMEOUT, 2i32));
    }
    let t = s.send(0, req);
    s.advance(Duration::from_secs(1));
    assert!(s.take_reply(0, t).is_none());
    s.advance(Duration::from_secs(2));
    assert_eq!(s.reply(0, t).status, Status::ERR_TIMEOUT);
}

#[test]
fn a_group_spanning_nodes_goes_to_the_host_and_takes_the_smallest_proposal() {
    let mut s = Sim::new();
    s.eng.set_context_ids(7, 2);
    two_node_job(&mut s, &[0, 1], &[2]);
    let all = procs("m", &[0, 1, 2]);
    let a = s.send(0, construct("g", all.clone(), true));
    assert!(
        s.host_calls.is_empty(),
        "went to the host before every local member"
    );
    let b = s.send(1, construct("g", all.clone(), true));
    let (op, call) = s.host_calls.remove(0);
    let HostCall::Group {
        op: gop,
        grp,
        procs: members,
        data,
        ..
    } = call
    else {
        panic!("expected a group call, got {call:?}")
    };
    assert_eq!(
        (gop, grp.as_str(), &members),
        (GroupOp::Construct, "g", &all)
    );
    // The other node proposes 4; every node takes the smallest.
    #[derive(serde::Serialize)]
    struct Contribution {
        context_id: Option<u64>,
    }
    let mut all_data = data;
    pmix_wire::encode_frame(
        &vec![Contribution {
            context_id: Some(4),
        }],
        &mut all_data,
    )
    .unwrap();
    s.eng.handle_host_done(op, HostOutcome::Bytes(Ok(all_data)));
    s.pump();
    assert_eq!(group_of(&s.reply(0, a)), (all.clone(), Some(4)));
    assert_eq!(group_of(&s.reply(1, b)), (all.clone(), Some(4)));
    // The host's failure reaches every local member.
    let a = s.send(0, destruct("g", vec![]));
    let b = s.send(1, destruct("g", vec![]));
    let (op, call) = s.host_calls.remove(0);
    assert!(matches!(
        call,
        HostCall::Group {
            op: GroupOp::Destruct,
            ..
        }
    ));
    s.eng
        .handle_host_done(op, HostOutcome::Bytes(Err(Status::ERR_TIMEOUT)));
    s.pump();
    assert_eq!(s.reply(0, a).status, Status::ERR_TIMEOUT);
    assert_eq!(s.reply(1, b).status, Status::ERR_TIMEOUT);
}

#[test]
fn the_other_members_hear_of_a_member_that_ended() {
    let mut s = Sim::new();
    s.job("a", 4);
    for r in 0..4 {
        s.connect(r as ConnId, "a", r);
    }
    let reg = Request::RegisterEvents {
        codes: vec![Status::GROUP_MEMBER_FAILED],
        info: vec![],
    };
    for r in [1, 3] {
        let id = s.send(r, reg.clone());
        assert_eq!(s.reply(r, id).status, Status::SUCCESS);
    }
    let members = procs("a", &[0, 1, 2]);
    let ids: Vec<_> = (0..3)
        .map(|r| s.send(r as ConnId, construct("g", members.clone(), false)))
        .collect();
    for (r, id) in ids.into_iter().enumerate() {
        assert_eq!(s.reply(r as ConnId, id).status, Status::SUCCESS);
    }
    s.eng.handle_closed(2);
    s.pump();
    // Rank 1 is a member and registered; rank 3 registered but is no member.
    let got: Vec<_> = s
        .events
        .iter()
        .filter(|(_, e)| e.code == Status::GROUP_MEMBER_FAILED)
        .collect();
    assert_eq!(got.len(), 1, "{got:?}");
    let (conn, ev) = got[0];
    assert_eq!(*conn, 1);
    let val = |k: &str| {
        ev.info
            .iter()
            .find(|i| i.key.as_str() == k)
            .map(|i| &i.value)
    };
    assert_eq!(val(attr::GROUP_ID).and_then(Value::as_str), Some("g"));
    assert_eq!(
        val(attr::EVENT_AFFECTED_PROC),
        Some(&Value::Proc(Proc::new(ns("a"), 2)))
    );
}

#[test]
fn a_destructed_groups_id_is_forgotten_and_may_be_used_again() {
    let mut s = Sim::new();
    s.job("a", 2);
    s.connect(0, "a", 0);
    s.connect(1, "a", 1);
    let all = procs("a", &[0, 1]);
    for round in 0..3 {
        let c: Vec<_> = (0..2)
            .map(|r| s.send(r as ConnId, construct("again", all.clone(), true)))
            .collect();
        let (_, id) = group_of(&s.reply(0, c[0]));
        assert_eq!(group_of(&s.reply(1, c[1])).1, id, "round {round}");
        let d: Vec<_> = (0..2)
            .map(|r| s.send(r as ConnId, destruct("again", vec![])))
            .collect();
        for (r, id) in d.into_iter().enumerate() {
            assert_eq!(
                s.reply(r as ConnId, id).status,
                Status::SUCCESS,
                "round {round}"
            );
        }
    }
    assert_eq!(s.eng.groups.interned(), 0, "{:?}", s.eng.groups);
}

#[test]
fn members_group_info_is_read_back_under_the_context_id_only() {
    let mut s = Sim::new();
    s.job("a", 2);
    s.connect(0, "a", 0);
    s.connect(1, "a", 1);
    let all = procs("a", &[0, 1]);
    let shared = |cid: u64| {
        let one = pmix_types::DataArray::from_infos(vec![Info::attr(
            attr::GROUP_LOCAL_CID,
            Value::Size(cid),
        )]);
        Info::attr(attr::GROUP_INFO, Value::DataArray(Box::new(one)))
    };
    let build = |grp: &str, ctx: bool, cid: u64| {
        let mut info = vec![shared(cid)];
        if ctx {
            info.push(Info::attr(attr::GROUP_ASSIGN_CONTEXT_ID, true));
        }
        Request::GroupConstruct {
            grp: grp.into(),
            procs: all.clone(),
            info,
        }
    };
    let c0 = s.send(0, build("g", true, 7));
    let c1 = s.send(1, build("g", true, 8));
    let (_, ctx) = group_of(&s.reply(0, c0));
    let _ = s.reply(1, c1);
    let ctx = ctx.expect("a context id");
    // Without a context id the construction succeeds all the same (nothing is kept).
    let n0 = s.send(0, build("h", false, 9));
    let n1 = s.send(1, build("h", false, 9));
    assert_eq!(s.reply(0, n0).status, Status::SUCCESS);
    assert_eq!(s.reply(1, n1).status, Status::SUCCESS);
    let get = |s: &mut Sim, rank: u32, ctx: u64| {
        let id = s.send(
            0,
            Request::Get {
                proc: Proc::new(ns("a"), rank),
                key: Some(Key::new(attr::GROUP_LOCAL_CID).unwrap()),
                info: vec![Info::attr(attr::GROUP_CONTEXT_ID, Value::Size(ctx)).qualifier()],
            },
        );
        s.reply(0, id)
    };
    let r = get(&mut s, 1, ctx);
    assert_eq!(r.status, Status::SUCCESS);
    let ReplyBody::Get { data, .. } = &r.body else {
        panic!("{r:?}");
    };
    let kv = &data[0].kvs[0];
    assert_eq!(data[0].proc, Proc::new(ns("a"), 1));
    assert_eq!(kv.key.as_str(), attr::QUALIFIED_VALUE);
    let Value::DataArray(a) = &kv.value else {
        panic!("{kv:?}");
    };
    let infos: Vec<&Info> = a.infos().collect();
    assert_eq!(infos[0], &Info::attr(attr::GROUP_LOCAL_CID, Value::Size(8)));
    assert_eq!(infos[1].key.as_str(), attr::GROUP_CONTEXT_ID);
    assert_eq!(infos[1].value, Value::Size(ctx));
    assert!(infos[1].flags.contains(pmix_types::InfoFlags::QUALIFIER));
    assert_eq!(get(&mut s, 1, ctx + 1).status, Status::ERR_NOT_FOUND);
}

#[test]
fn a_fence_over_a_constructed_groups_id_is_a_fence_over_its_members() {
    let mut s = Sim::new();
    s.job("a", 3);
    for r in 0..3 {
        s.connect(r as ConnId, "a", r);
        let c = s.send(
            r as ConnId,
            commit(&[("v", Scope::GLOBAL, Value::Uint32(r))]),
        );
        assert_eq!(s.reply(r as ConnId, c).status, Status::SUCCESS);
    }
    let members = procs("a", &[0, 2]);
    let c: Vec<_> = [0, 2]
        .iter()
        .map(|r| s.send(*r, construct("ourgroup", members.clone(), false)))
        .collect();
    assert_eq!(s.reply(0, c[0]).status, Status::SUCCESS);
    assert_eq!(s.reply(2, c[1]).status, Status::SUCCESS);
    let over_group = || vec![Proc::new(ns("ourgroup"), Rank::WILDCARD)];
    // One member names the group, the other its members: the same fence, with the members'
    // data and no one else's.
    let f0 = s.send(0, fence(over_group(), true));
    assert!(s.take_reply(0, f0).is_none(), "completed before rank 2");
    let f2 = s.send(2, fence(members.clone(), true));
    for (c, id) in [(0, f0), (2, f2)] {
        let rep = s.reply(c, id);
        assert_eq!(rep.status, Status::SUCCESS);
        let mut ranks: Vec<u32> = fence_data(&rep).iter().map(|pk| pk.proc.rank.0).collect();
        ranks.sort();
        assert_eq!(ranks, vec![0, 2]);
    }
    // A process outside the group, an unknown id, or a group named with a rank is refused.
    let f1 = s.send(1, fence(over_group(), false));
    assert_eq!(s.reply(1, f1).status, Status::ERR_BAD_PARAM);
    let unknown = s.send(
        0,
        fence(vec![Proc::new(ns("nogroup"), Rank::WILDCARD)], false),
    );
    assert_eq!(s.reply(0, unknown).status, Status::ERR_BAD_PARAM);
    let ranked = s.send(0, fence(vec![Proc::new(ns("ourgroup"), 0)], false));
    assert_eq!(s.reply(0, ranked).status, Status::ERR_BAD_PARAM);
    // Once destructed, the id names nothing.
    let d: Vec<_> = [0, 2]
        .iter()
        .map(|r| s.send(*r, destruct("ourgroup", vec![])))
        .collect();
    assert_eq!(s.reply(0, d[0]).status, Status::SUCCESS);
    assert_eq!(s.reply(2, d[1]).status, Status::SUCCESS);
    let after = s.send(0, fence(over_group(), false));
    assert_eq!(s.reply(0, after).status, Status::ERR_BAD_PARAM);
}

#[test]
fn a_fence_over_a_group_spanning_nodes_goes_to_the_host_with_its_members() {
    let mut s = Sim::new();
    two_node_job(&mut s, &[0, 1], &[2]);
    let members = procs("m", &[0, 2]);
    let c = s.send(0, construct("g", members.clone(), false));
    let (op, _) = s.host_calls.remove(0);
    s.eng
        .handle_host_done(op, HostOutcome::Bytes(Ok(Vec::new())));
    s.pump();
    assert_eq!(s.reply(0, c).status, Status::SUCCESS);
    let f = s.send(0, fence(vec![Proc::new(ns("g"), Rank::WILDCARD)], false));
    let (_, call) = s.host_calls.remove(0);
    let HostCall::FenceNb { procs, .. } = call else {
        panic!("expected fence_nb, got {call:?}")
    };
    assert_eq!(procs, members);
    assert!(s.take_reply(0, f).is_none());
}
