//! I/O forwarding: pulls match their sources and channels, are dressed as asked, end with
//! their deregistration or their tool; pushes go to the host; clients may do none of it.

use pmix_types::{Info, IofChannel, Proc, Rank, Status, attr};
use pmix_wire::{ReplyBody, Request};

use super::{Sim, UID, ns, tool};
use crate::engine::{ConnId, HostCall, HostOutcome};

fn pull(s: &mut Sim, conn: ConnId, procs: Vec<Proc>, channels: IofChannel, tag: u64) -> u64 {
    let directives = vec![Info::attr(attr::IOF_TAG_OUTPUT, true)];
    let id = s.send(
        conn,
        Request::IofPull {
            procs,
            channels,
            directives,
            tag,
        },
    );
    let r = s.reply(conn, id);
    match r.body {
        ReplyBody::IofPull { id } if r.status == Status::SUCCESS => id,
        _ => panic!("pull refused: {r:?}"),
    }
}

fn deliver(s: &mut Sim, rank: u32, channel: IofChannel, data: &[u8]) {
    s.eng
        .iof_deliver(&Proc::new(ns("a"), Rank(rank)), channel, data, 0);
    s.pump();
}

fn taken(s: &mut Sim) -> Vec<(ConnId, u64, u32, Vec<u8>)> {
    std::mem::take(&mut s.iof)
        .into_iter()
        .map(|(c, k)| (c, k.tag, k.source.rank.0, k.data))
        .collect()
}

#[test]
fn pulled_output_reaches_the_tools_that_asked_for_it_until_they_stop() {
    let mut s = Sim::new();
    s.eng.set_tool_support(true, UID);
    s.job("a", 2);
    tool(&mut s, 10);
    tool(&mut s, 11);
    let all = vec![Proc::new(ns("a"), Rank::WILDCARD)];
    let p10 = pull(&mut s, 10, all, IofChannel::STDOUT, 5);
    let _p11 = pull(&mut s, 11, vec![Proc::new(ns("a"), 1)], IofChannel::ALL, 6);
    deliver(&mut s, 0, IofChannel::STDOUT, b"zero\n");
    deliver(&mut s, 1, IofChannel::STDERR, b"one\n");
    assert_eq!(
        taken(&mut s),
        vec![
            (10, 5, 0, b"[a,0]<stdout>: zero\n".to_vec()),
            (11, 6, 1, b"[a,1]<stderr>: one\n".to_vec()),
        ]
    );
    // Another tool may not end tool 10's pull; tool 10 may.
    let d = s.send(
        11,
        Request::IofDeregister {
            id: p10,
            directives: vec![],
        },
    );
    assert_eq!(s.reply(11, d).status, Status::ERR_NOT_FOUND);
    let d = s.send(
        10,
        Request::IofDeregister {
            id: p10,
            directives: vec![],
        },
    );
    assert_eq!(s.reply(10, d).status, Status::SUCCESS);
    deliver(&mut s, 1, IofChannel::STDOUT, b"more\n");
    assert_eq!(
        taken(&mut s),
        vec![(11, 6, 1, b"[a,1]<stdout>: more\n".to_vec())]
    );
    // Tool 11 gone: nothing is forwarded any more.
    s.eng.handle_closed(11);
    s.pump();
    assert_eq!(s.eng.pull_count(), 0);
    deliver(&mut s, 1, IofChannel::STDOUT, b"late\n");
    assert!(taken(&mut s).is_empty());
}

#[test]
fn stdin_cannot_be_pulled_and_clients_may_not_pull() {
    let mut s = Sim::new();
    s.eng.set_tool_support(true, UID);
    s.job("a", 1);
    s.connect(0, "a", 0);
    tool(&mut s, 10);
    let req = |channels| Request::IofPull {
        procs: vec![Proc::new(ns("a"), 0)],
        channels,
        directives: vec![],
        tag: 0,
    };
    let id = s.send(10, req(IofChannel::STDIN));
    assert_eq!(s.reply(10, id).status, Status::ERR_NOT_SUPPORTED);
    let id = s.send(0, req(IofChannel::STDOUT));
    assert_eq!(s.reply(0, id).status, Status::ERR_NOT_SUPPORTED);
    assert_eq!(s.eng.pull_count(), 0);
}

/// Each pull copies every chunk it covers once more: a tool holds a bounded number of them
/// (before, 100 pulls of a rank writing 24 MiB cost pmixrun 2.45 GB). Another tool is not
/// held to the first one's.
#[test]
fn a_tool_holds_a_bounded_number_of_pulls() {
    let mut s = Sim::new();
    s.eng.set_tool_support(true, UID);
    s.job("a", 1);
    tool(&mut s, 10);
    tool(&mut s, 11);
    let all = || vec![Proc::new(ns("a"), Rank::WILDCARD)];
    for t in 0..crate::engine::iof::MAX_PULLS_PER_CONN as u64 {
        pull(&mut s, 10, all(), IofChannel::STDOUT, t);
    }
    let id = s.send(
        10,
        Request::IofPull {
            procs: all(),
            channels: IofChannel::STDOUT,
            directives: vec![],
            tag: 99,
        },
    );
    assert_eq!(s.reply(10, id).status, Status::ERR_OUT_OF_RESOURCE);
    pull(&mut s, 11, all(), IofChannel::STDOUT, 1);
    assert_eq!(
        s.eng.pull_count(),
        crate::engine::iof::MAX_PULLS_PER_CONN + 1
    );
}

#[test]
fn a_push_is_the_hosts_to_deliver() {
    let mut s = Sim::new();
    s.eng.set_tool_support(true, UID);
    s.job("a", 2);
    tool(&mut s, 10);
    s.auto_host = false;
    let id = s.send(
        10,
        Request::IofPush {
            targets: vec![Proc::new(ns("a"), 1)],
            directives: vec![],
            data: Some(b"input\n".to_vec()),
        },
    );
    let (op, call) = s.host_calls.pop().expect("no host call");
    let HostCall::PushStdin {
        source,
        targets,
        data,
        ..
    } = call
    else {
        panic!("{call:?}")
    };
    assert_eq!(source, s.tools[0].1);
    assert_eq!(targets, vec![Proc::new(ns("a"), 1)]);
    assert_eq!(data.as_deref(), Some(&b"input\n"[..]));
    s.answer(op, HostOutcome::Unit(Err(Status::ERR_OUT_OF_RESOURCE)));
    assert_eq!(s.reply(10, id).status, Status::ERR_OUT_OF_RESOURCE);
}
