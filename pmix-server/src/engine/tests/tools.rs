//! Tools: who is served, the names they get, what they may ask, and that a job never waits
//! for one.

use pmix_types::{Info, Proc, Rank, Status, attr};
use pmix_wire::{Query, ReplyBody, Request};

use super::{GID, Sim, UID, fence, key, ns};
use crate::engine::{HostCall, HostOutcome, PeerCreds, ToolHello};

fn tool_hello(uid: u32, proc: Option<Proc>) -> ToolHello {
    ToolHello {
        proc,
        creds: PeerCreds { uid, gid: GID },
        info: vec![Info::attr(attr::PROC_PID, 4242u32)],
    }
}

fn namespaces() -> Request {
    Request::Query {
        queries: vec![Query {
            keys: vec![key(attr::QUERY_NAMESPACES)],
            qualifiers: vec![],
        }],
    }
}

/// A Sim whose server, of user `UID`, serves tools.
fn serving() -> Sim {
    let mut s = Sim::new();
    s.eng.set_tool_support(true, UID);
    s
}

#[test]
fn tools_are_refused_unless_the_host_enabled_them() {
    let mut s = Sim::new();
    s.eng.handle_tool_hello(7, tool_hello(UID, None));
    s.pump();
    assert_eq!(s.refused, vec![(7, Status::ERR_NOT_SUPPORTED)]);
    assert!(s.tools.is_empty() && s.host_calls.is_empty());
}

#[test]
fn tools_of_the_servers_user_and_root_are_named_and_may_query_but_join_nothing() {
    let mut s = serving();
    s.job("a", 2);
    s.connect(0, "a", 0);
    s.connect(1, "a", 1);
    s.eng.handle_tool_hello(10, tool_hello(UID, None));
    s.eng.handle_tool_hello(11, tool_hello(0, None));
    s.pump();
    let name = |n: u32| Proc::new(ns(&format!("rs-server-tool-{n}")), 0);
    assert_eq!(s.tools, vec![(10, name(1)), (11, name(2))]);
    // Queries are answered, the tools' namespaces not among the jobs'.
    let q = s.send(10, namespaces());
    let r = s.reply(10, q);
    assert_eq!(r.status, Status::SUCCESS);
    let ReplyBody::Query { results } = &r.body else {
        panic!("{r:?}")
    };
    assert_eq!(results[0].value.as_str(), Some("a"));
    // A fence over the job goes on without them, and they may not join one.
    let f = s.send(11, fence(vec![Proc::new(ns("a"), Rank::WILDCARD)], false));
    assert_eq!(s.reply(11, f).status, Status::ERR_NOT_SUPPORTED);
    let all = vec![Proc::new(ns("a"), Rank::WILDCARD)];
    let f0 = s.send(0, fence(all.clone(), false));
    let f1 = s.send(1, fence(all, false));
    assert_eq!(s.reply(0, f0).status, Status::SUCCESS);
    assert_eq!(s.reply(1, f1).status, Status::SUCCESS);
    // Finalize, then the connection goes: nothing else happens.
    let fin = s.send(10, Request::Finalize { info: vec![] });
    assert_eq!(s.reply(10, fin).status, Status::SUCCESS);
    s.eng.handle_closed(10);
    s.eng.handle_closed(11);
    s.pump();
    assert!(s.events.is_empty(), "a tool's end raised {:?}", s.events);
    let late = s.send(10, namespaces());
    assert!(
        s.take_reply(10, late).is_none(),
        "a closed tool was answered"
    );
}

#[test]
fn tools_of_other_users_are_refused() {
    let mut s = serving();
    s.eng.handle_tool_hello(7, tool_hello(UID + 1, None));
    s.pump();
    assert_eq!(s.refused, vec![(7, Status::ERR_NO_PERMISSIONS)]);
    assert!(s.reasons[0].contains("uid 1001"), "{:?}", s.reasons);
    assert!(s.tools.is_empty() && s.host_calls.is_empty());
    // Nor does a refused tool get anything answered.
    let q = s.send(7, namespaces());
    assert!(s.take_reply(7, q).is_none());
}

#[test]
fn a_tool_keeps_the_name_it_brings_unless_it_is_taken() {
    let mut s = serving();
    s.job("a", 1);
    let mine = Proc::new(ns("debugger"), 3);
    s.eng
        .handle_tool_hello(1, tool_hello(UID, Some(mine.clone())));
    s.eng
        .handle_tool_hello(2, tool_hello(UID, Some(mine.clone())));
    s.eng
        .handle_tool_hello(3, tool_hello(UID, Some(Proc::new(ns("a"), 0))));
    s.pump();
    assert_eq!(s.tools, vec![(1, mine)]);
    assert_eq!(
        s.refused,
        vec![(2, Status::ERR_EXISTS), (3, Status::ERR_EXISTS)]
    );
}

#[test]
fn the_host_is_told_of_a_tool_and_may_refuse_it() {
    let mut s = serving();
    s.auto_host = false;
    s.eng.handle_tool_hello(5, tool_hello(UID, None));
    s.pump();
    let (op, call) = s.host_calls.remove(0);
    let HostCall::ToolConnected { tool, info } = call else {
        panic!("expected tool_connected, got {call:?}")
    };
    assert_eq!(tool.nspace.as_str(), "rs-server-tool-1");
    let has = |k: &str, v: u32| {
        info.iter()
            .any(|i| i.key.as_str() == k && i.value.as_u32() == Some(v))
    };
    assert!(
        has(attr::USERID, UID) && has(attr::GRPID, GID) && has(attr::PROC_PID, 4242),
        "{info:?}"
    );
    s.answer(op, HostOutcome::Unit(Err(Status::ERR_NO_PERMISSIONS)));
    assert_eq!(s.refused, vec![(5, Status::ERR_NO_PERMISSIONS)]);
    assert!(s.tools.is_empty());
    // The next one is served as the host says.
    s.eng.handle_tool_hello(6, tool_hello(UID, None));
    s.pump();
    let (op, _) = s.host_calls.remove(0);
    s.answer(op, HostOutcome::Unit(Ok(())));
    assert_eq!(s.tools.len(), 1);
    assert_eq!(s.tools[0].0, 6);
}

/// A tool registering for process-set events after the sets were defined hears of them, as a
/// client does (issue 35: tools were told nothing kept).
#[test]
fn a_tool_registering_late_hears_the_process_sets_defined_before() {
    let mut s = serving();
    s.job("a", 2);
    s.eng
        .define_pset("app://one".into(), vec![Proc::new(ns("a"), 0)]);
    s.pump();
    s.eng.handle_tool_hello(10, tool_hello(UID, None));
    s.pump();
    let reg = s.send(
        10,
        Request::RegisterEvents {
            codes: vec![Status::PROCESS_SET_DEFINE],
            info: vec![],
        },
    );
    assert_eq!(s.reply(10, reg).status, Status::SUCCESS);
    let heard: Vec<_> = s.events.drain(..).map(|(c, e)| (c, e.code)).collect();
    assert_eq!(heard, vec![(10, Status::PROCESS_SET_DEFINE)]);
}
