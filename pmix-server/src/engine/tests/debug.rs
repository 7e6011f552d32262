//! Debuggers: processes held in init until a tool releases them, the job announced to the
//! tools waiting for it, no release lost to a race, the held processes aborted when their
//! debugger goes; and what else a tool may ask (events, job control).

use pmix_types::{DataArray, DataRange, DataType, Info, Proc, Rank, Status, Value, attr};
use pmix_wire::Request;

use super::{Sim, UID, ns, tool};
use crate::engine::{ConnId, HostCall, HostOutcome};

fn notify(s: &mut Sim, conn: ConnId, code: Status, range: DataRange, info: Vec<Info>) -> Status {
    let event = pmix_wire::Event {
        code,
        source: Proc::new(ns("whoever"), 0),
        range,
        info,
    };
    let id = s.send(conn, Request::Notify { event });
    s.reply(conn, id).status
}

fn custom(procs: &[Proc]) -> Vec<Info> {
    let items = procs.iter().cloned().map(Value::Proc).collect();
    vec![Info::attr(
        attr::EVENT_CUSTOM_RANGE,
        DataArray::new(DataType::PROC, items).unwrap(),
    )]
}

/// A job `a` of `n` ranks (conns 0..n), each registered for the release, and a tool at 10.
fn held_job(n: u32) -> Sim {
    let mut s = Sim::new();
    s.eng.set_tool_support(true, UID);
    s.job("a", n);
    for r in 0..n {
        s.connect(r as ConnId, "a", r);
        s.register_events(r as ConnId, &[Status::DEBUGGER_RELEASE]);
    }
    tool(&mut s, 10);
    s
}

fn ready(s: &mut Sim, conn: ConnId) {
    let st = notify(s, conn, Status::READY_FOR_DEBUG, DataRange::RM, vec![]);
    assert_eq!(st, Status::SUCCESS);
}

fn events_of(s: &Sim, conn: ConnId, code: Status) -> Vec<pmix_wire::Event> {
    s.events
        .iter()
        .filter(|(c, e)| *c == conn && e.code == code)
        .map(|(_, e)| e.clone())
        .collect()
}

#[test]
fn a_job_waiting_in_init_is_announced_to_its_debugger_once_every_process_waits() {
    let mut s = held_job(2);
    s.register_events(10, &[Status::READY_FOR_DEBUG]);
    ready(&mut s, 0);
    assert!(events_of(&s, 10, Status::READY_FOR_DEBUG).is_empty());
    ready(&mut s, 1);
    let got = events_of(&s, 10, Status::READY_FOR_DEBUG);
    assert_eq!(got.len(), 1, "{:?}", s.events);
    assert!(got[0].info.contains(&Info::attr(
        attr::EVENT_AFFECTED_PROC,
        Proc::new(ns("a"), Rank::WILDCARD)
    )));
    // The processes' own notifications reached the host, not each other.
    assert!(events_of(&s, 0, Status::READY_FOR_DEBUG).is_empty());
    // A second tool registering now hears of it at once.
    tool(&mut s, 11);
    s.register_events(11, &[Status::READY_FOR_DEBUG]);
    assert_eq!(events_of(&s, 11, Status::READY_FOR_DEBUG).len(), 1);
    // The release reaches both ranks, not the tool that sent it.
    let all = [Proc::new(ns("a"), Rank::WILDCARD)];
    let st = notify(
        &mut s,
        10,
        Status::DEBUGGER_RELEASE,
        DataRange::CUSTOM,
        custom(&all),
    );
    assert_eq!(st, Status::SUCCESS);
    for c in [0, 1] {
        let rel = events_of(&s, c, Status::DEBUGGER_RELEASE);
        assert_eq!(rel.len(), 1, "rank {c}: {:?}", s.events);
        assert_eq!(rel[0].source.nspace.as_str(), "rs-server-tool-1");
    }
    // Released, the debuggers' end aborts nothing.
    s.auto_host = false;
    s.eng.handle_closed(10);
    s.eng.handle_closed(11);
    s.pump();
    assert!(s.host_calls.is_empty(), "{:?}", s.host_calls);
}

#[test]
fn a_release_that_overtakes_a_process_releases_it_when_it_says_it_waits() {
    let mut s = held_job(2);
    ready(&mut s, 0);
    let one = [Proc::new(ns("a"), 1)];
    notify(
        &mut s,
        10,
        Status::DEBUGGER_RELEASE,
        DataRange::CUSTOM,
        custom(&one),
    );
    assert!(events_of(&s, 0, Status::DEBUGGER_RELEASE).is_empty());
    assert_eq!(events_of(&s, 1, Status::DEBUGGER_RELEASE).len(), 1);
    ready(&mut s, 1);
    // Rank 1 said it waits after its release: released again, at once; rank 0 still waits.
    assert_eq!(events_of(&s, 1, Status::DEBUGGER_RELEASE).len(), 2);
    assert!(events_of(&s, 0, Status::DEBUGGER_RELEASE).is_empty());
}

#[test]
fn the_last_debuggers_end_aborts_the_processes_it_left_waiting() {
    let mut s = held_job(3);
    s.register_events(10, &[Status::READY_FOR_DEBUG]);
    // A second debugger, a tool that only looks (pmixps), a monitor of every event.
    tool(&mut s, 11);
    s.register_events(11, &[Status::READY_FOR_DEBUG]);
    tool(&mut s, 12);
    tool(&mut s, 13);
    s.register_events(13, &[]);
    ready(&mut s, 0);
    ready(&mut s, 2);
    s.auto_host = false;
    s.host_calls.clear();
    s.eng.handle_closed(12);
    s.eng.handle_closed(10);
    s.pump();
    assert!(s.host_calls.is_empty(), "{:?}", s.host_calls);
    // The last debugger finalizes without releasing (the monitor stays, and is no debugger).
    let fin = s.send(11, Request::Finalize { info: vec![] });
    assert_eq!(s.reply(11, fin).status, Status::SUCCESS);
    assert_eq!(s.host_calls.len(), 1, "{:?}", s.host_calls);
    let (
        _,
        HostCall::Abort {
            proc,
            procs,
            message,
            ..
        },
    ) = &s.host_calls[0]
    else {
        panic!("{:?}", s.host_calls)
    };
    assert_eq!(proc.nspace.as_str(), "rs-server-tool-2");
    assert_eq!(procs, &[Proc::new(ns("a"), 0), Proc::new(ns("a"), 2)]);
    assert!(
        message.contains("without releasing 2 process(es)"),
        "{message}"
    );
}

#[test]
fn a_process_that_ends_while_held_waits_no_more() {
    let mut s = held_job(2);
    s.register_events(10, &[Status::READY_FOR_DEBUG]);
    ready(&mut s, 0);
    s.eng.handle_closed(0);
    s.auto_host = false;
    s.pump();
    s.host_calls.clear();
    s.eng.handle_closed(10);
    s.pump();
    assert!(s.host_calls.is_empty(), "{:?}", s.host_calls);
}

#[test]
fn tools_control_jobs_through_the_host_naming_their_targets() {
    let mut s = held_job(1);
    s.auto_host = false;
    let kill = vec![Info::attr(attr::JOB_CTRL_KILL, true)];
    let job = vec![Proc::new(ns("a"), Rank::WILDCARD)];
    let ask = |s: &mut Sim, targets: Vec<Proc>, directives: Vec<Info>| {
        s.send(
            10,
            Request::JobControl {
                targets,
                directives,
            },
        )
    };
    // No job of its own to default to, an unknown job, a cleanup: refused here.
    let none = ask(&mut s, vec![], kill.clone());
    assert_eq!(s.reply(10, none).status, Status::ERR_BAD_PARAM);
    let other = ask(&mut s, vec![Proc::new(ns("b"), 0)], kill.clone());
    assert_eq!(s.reply(10, other).status, Status::ERR_NOT_FOUND);
    let cleanup = vec![Info::attr(attr::REGISTER_CLEANUP, "/tmp/x")];
    let c = ask(&mut s, job.clone(), cleanup);
    assert_eq!(s.reply(10, c).status, Status::ERR_NOT_SUPPORTED);
    assert!(s.host_calls.is_empty());
    let id = ask(&mut s, job.clone(), kill.clone());
    let (op, call) = s.host_calls.remove(0);
    let HostCall::JobControl {
        proc,
        targets,
        directives,
    } = call
    else {
        panic!("{call:?}")
    };
    assert_eq!(proc.nspace.as_str(), "rs-server-tool-1");
    assert_eq!((targets, directives), (job, kill));
    s.answer(op, HostOutcome::Unit(Err(Status::ERR_NOT_SUPPORTED)));
    assert_eq!(s.reply(10, id).status, Status::ERR_NOT_SUPPORTED);
}

#[test]
fn tools_hear_of_job_ends_and_of_events_whose_range_covers_them() {
    let mut s = held_job(1);
    s.register_events(10, &[]);
    tool(&mut s, 11);
    s.register_events(11, &[Status::EVENT_JOB_END]);
    // A tool's NAMESPACE event reaches nobody (a tool has no job); a client's CUSTOM one
    // naming the tool reaches it.
    s.register_events(0, &[]);
    notify(&mut s, 11, Status(-1000), DataRange::NAMESPACE, vec![]);
    assert!(events_of(&s, 0, Status(-1000)).is_empty());
    let me = s.tools[0].1.clone();
    notify(&mut s, 0, Status(-1001), DataRange::CUSTOM, custom(&[me]));
    assert_eq!(events_of(&s, 10, Status(-1001)).len(), 1);
    assert!(
        events_of(&s, 11, Status(-1001)).is_empty(),
        "not registered for it"
    );
    s.eng.deregister_nspace("a");
    s.pump();
    for t in [10, 11] {
        let end = events_of(&s, t, Status::EVENT_JOB_END);
        assert_eq!(end.len(), 1, "tool {t}: {:?}", s.events);
        assert!(end[0].info.contains(&Info::attr(attr::NSPACE, "a")));
    }
}

/// What another node's process says, as the host passes it on (`Server::notify_event`).
fn from_elsewhere(s: &mut Sim, code: Status, source: Proc, info: Vec<Info>) {
    let range = if code == Status::READY_FOR_DEBUG {
        DataRange::RM
    } else {
        DataRange::CUSTOM
    };
    s.eng.host_notify(&pmix_wire::Event {
        code,
        source,
        range,
        info,
    });
    s.pump();
}

/// Across nodes: the job is ready once its processes of every node wait, and the last
/// debugger's end aborts all of them.
#[test]
fn a_job_held_on_several_nodes_is_ready_once_every_node_reports_its_processes() {
    let mut s = Sim::new();
    s.eng.set_tool_support(true, UID);
    super::two_node_job(&mut s, &[0], &[1, 2]);
    s.register_events(0, &[Status::DEBUGGER_RELEASE]);
    tool(&mut s, 10);
    s.register_events(10, &[Status::READY_FOR_DEBUG]);
    let m = |r: u32| Proc::new(ns("m"), r);
    from_elsewhere(&mut s, Status::READY_FOR_DEBUG, m(1), vec![]);
    ready(&mut s, 0);
    assert!(
        events_of(&s, 10, Status::READY_FOR_DEBUG).is_empty(),
        "rank 2 waits not yet"
    );
    // The other node's notification holds its process; it is no event for anyone.
    from_elsewhere(&mut s, Status::READY_FOR_DEBUG, m(2), vec![]);
    let got = events_of(&s, 10, Status::READY_FOR_DEBUG);
    assert_eq!(got.len(), 1, "{:?}", s.events);
    assert!(got[0].info.contains(&Info::attr(attr::NSPACE, "m")));
    assert!(events_of(&s, 0, Status::READY_FOR_DEBUG).is_empty());
    // The debugger goes without releasing: every node's processes are aborted.
    s.auto_host = false;
    s.host_calls.clear();
    s.eng.handle_closed(10);
    s.pump();
    let [(_, HostCall::Abort { procs, .. })] = &s.host_calls[..] else {
        panic!("{:?}", s.host_calls)
    };
    assert_eq!(procs, &[m(0), m(1), m(2)]);
}

/// A release raised on another node (the tools' node) is remembered: a local process saying
/// it waits after it is released at once.
#[test]
fn a_release_from_another_node_is_remembered_for_a_process_it_overtook() {
    let mut s = Sim::new();
    super::two_node_job(&mut s, &[0], &[1]);
    s.register_events(0, &[Status::DEBUGGER_RELEASE]);
    let all = [Proc::new(ns("m"), Rank::WILDCARD)];
    let tool_proc = Proc::new(ns("rs-root-tool"), 0);
    from_elsewhere(&mut s, Status::DEBUGGER_RELEASE, tool_proc, custom(&all));
    assert_eq!(events_of(&s, 0, Status::DEBUGGER_RELEASE).len(), 1);
    ready(&mut s, 0);
    assert_eq!(events_of(&s, 0, Status::DEBUGGER_RELEASE).len(), 2);
}

/// A process's readiness passed on for a namespace this server does not know (its job ended
/// and was deregistered while the event travelled, as at a multi-node run's root) reaches no
/// debugger: it was delivered to them as an ordinary event before.
#[test]
fn a_late_readiness_of_a_job_gone_reaches_no_debugger() {
    let mut s = Sim::new();
    s.eng.set_tool_support(true, UID);
    super::two_node_job(&mut s, &[0], &[1]);
    tool(&mut s, 10);
    s.register_events(10, &[Status::READY_FOR_DEBUG]);
    from_elsewhere(
        &mut s,
        Status::READY_FOR_DEBUG,
        Proc::new(ns("gone"), 1),
        vec![],
    );
    assert!(
        events_of(&s, 10, Status::READY_FOR_DEBUG).is_empty(),
        "{:?}",
        s.events
    );
}
