#![allow(clippy::unwrap_used)]

use super::*;
use crate::engine::{Auth, GetAnswers};
use crate::frontend::pmi1::tests::{job, ns};
use pmix_wire::ProcKvs;

fn frame(body: &str) -> Vec<u8> {
    let mut f = format!("{:<6}", body.len()).into_bytes();
    f.extend_from_slice(body.as_bytes());
    f
}

/// Every frame in `out`, decoded.
fn frames(mut out: &[u8]) -> Vec<Command> {
    let mut all = Vec::new();
    while let Some((c, used)) = wire::decode(out).unwrap() {
        all.push(c);
        out = &out[used..];
    }
    assert!(out.is_empty(), "trailing bytes {out:?}");
    all
}

struct T {
    c: Pmi2Conn,
    ids: pmi1::Common,
    nodes: node_attrs::Common,
}

impl T {
    fn send(&mut self, body: &str) -> (Step, Vec<Command>) {
        self.c.feed(&frame(body));
        let mut out = Vec::new();
        let s = self.c.step(&mut self.ids, &mut self.nodes, &mut out);
        (s, frames(&out))
    }
}

/// A rank of a 2-process job `kvs`, past fullinit.
fn ready(rank: u32, conn: ConnId) -> T {
    let me = Proc::new(ns("kvs"), rank);
    let mut out = Vec::new();
    let c = Pmi2Conn::upgraded(Some(me.clone()), vec![], &mut out);
    assert_eq!(out, INIT_OK.as_bytes());
    let mut t = T {
        c,
        ids: pmi1::Common::default(),
        nodes: node_attrs::Common::default(),
    };
    let (s, f) = t.send(&format!("cmd=fullinit;pmirank={rank};threaded=FALSE;"));
    assert!(f.is_empty());
    assert_eq!(
        s,
        Step::Hello {
            proc: me,
            auth: Auth::Vouched { creds: None },
            answers: GetAnswers::KeyOnly,
        }
    );
    let mut out = Vec::new();
    t.c.accepted(conn, job("kvs", 2), &mut t.nodes, &mut out);
    let f = frames(&out);
    assert_eq!(f[0].cmd, "fullinit-response");
    assert_eq!(f[0].get("rank"), Some(rank.to_string().as_str()));
    assert_eq!(f[0].get("size"), Some("2"));
    assert_eq!(f[0].get("rc"), Some("0"));
    assert_eq!(f[0].get("spawner-jobid"), None);
    t
}

#[test]
fn job_attributes_come_from_the_job_data_and_thrid_is_echoed() {
    let mut t = ready(0, 7);
    let (_, f) = t.send("cmd=info-getjobattr;thrid=0x5a;key=PMI_process_mapping;");
    assert_eq!(f[0].get("thrid"), Some("0x5a"));
    assert_eq!(f[0].get("value"), Some("(vector,(0,1,2))"));
    assert_eq!(f[0].get("found"), Some("TRUE"));
    let (_, f) = t.send("cmd=info-getjobattr;key=universeSize;");
    assert_eq!(f[0].get("value"), Some("16"));
    assert_eq!(f[0].get("thrid"), None);
    let (_, f) = t.send("cmd=info-getjobattr;key=PMI_hwloc_xmlfile;");
    assert_eq!(
        (f[0].get("found"), f[0].get("rc")),
        (Some("FALSE"), Some("0"))
    );
    let (_, f) = t.send("cmd=job-getid;");
    assert_eq!(f[0].get("jobid"), Some("kvs"));
    let (_, f) = t.send("cmd=frobnicate;");
    assert_eq!(f[0].cmd, "frobnicate-response");
    assert_eq!(f[0].get("rc"), Some("-1"));
}

#[test]
fn a_put_and_a_get_go_to_the_engine_and_semicolons_survive() {
    let mut t = ready(1, 7);
    let (s, f) = t.send("cmd=kvs-put;thrid=t1;key=k;value=a;;b=c;;;");
    assert!(f.is_empty());
    let Step::Request(id, Request::Commit { kvs }) = s else {
        panic!("{s:?}")
    };
    assert_eq!(kvs[0].value, Value::String("a;b=c;".into()));
    let mut out = Vec::new();
    t.c.replied(id, &Reply::status(Status::SUCCESS), &mut out);
    let f = frames(&out);
    assert_eq!(f[0].cmd, "kvs-put-response");
    assert_eq!(f[0].get("thrid"), Some("t1"));
    let (s, _) = t.send("cmd=kvs-get;jobid=kvs;srcid=-1;key=k;");
    let Step::Request(id, Request::Get { proc, .. }) = s else {
        panic!("{s:?}")
    };
    assert_eq!(proc.rank, Rank::UNDEF);
    let reply = Reply {
        status: Status::SUCCESS,
        body: ReplyBody::Get {
            data: vec![ProcKvs {
                proc: Proc::new(ns("kvs"), 0),
                kvs: vec![Kv {
                    scope: Scope::GLOBAL,
                    key: Key::new("k").unwrap(),
                    value: Value::String("a;b=c;".into()),
                }],
            }],
            jobs: vec![],
        },
    };
    let mut out = Vec::new();
    t.c.replied(id, &reply, &mut out);
    let f = frames(&out);
    assert_eq!(f[0].get("value"), Some("a;b=c;"));
    // Nothing here has it: the source named is asked (its node, when it lives on another).
    let (s, _) = t.send("cmd=kvs-get;jobid=kvs;srcid=0;key=missing;");
    let Step::Request(id, _) = s else { panic!() };
    let mut out = Vec::new();
    t.c.replied(id, &Reply::status(Status::ERR_NOT_FOUND), &mut out);
    assert!(out.is_empty());
    let s = t.c.step(&mut t.ids, &mut t.nodes, &mut out);
    let Step::Request(id, Request::Get { proc, .. }) = s else {
        panic!("{s:?}")
    };
    assert_eq!(proc, Proc::new(ns("kvs"), 0));
    t.c.replied(id, &Reply::status(Status::ERR_NOT_FOUND), &mut out);
    let f = frames(&out);
    assert_eq!(
        (f[0].get("found"), f[0].get("rc")),
        (Some("FALSE"), Some("0"))
    );
}

#[test]
fn node_attribute_waits_are_woken_by_a_put_on_another_connection() {
    let mut a = ready(0, 1);
    let mut b = ready(1, 2);
    // Both connections share the node's table.
    b.nodes = std::mem::take(&mut a.nodes);
    b.nodes.joined(&ns("kvs"), 2);
    let (s, f) = b.send("cmd=info-getnodeattr;key=shm;wait=TRUE;");
    assert_eq!((s, f.len()), (Step::Idle, 0));
    // Held: nothing more is read while it waits.
    let (_, f) = b.send("cmd=job-getid;");
    assert!(f.is_empty());
    a.nodes = std::mem::take(&mut b.nodes);
    let (_, f) = a.send("cmd=info-putnodeattr;key=shm;value=/dev/shm/x;;y;");
    assert_eq!(f[0].get("rc"), Some("0"));
    b.nodes = std::mem::take(&mut a.nodes);
    assert_eq!(b.nodes.take_woken(), vec![2]);
    let mut out = Vec::new();
    b.c.woken(&mut b.nodes, &mut out);
    let f = frames(&out);
    assert_eq!(f[0].get("value"), Some("/dev/shm/x;y"));
    // The held request is taken now.
    let mut out = Vec::new();
    b.c.step(&mut b.ids, &mut b.nodes, &mut out);
    assert_eq!(frames(&out)[0].cmd, "job-getid-response");
}

#[test]
fn a_wrong_rank_or_garbage_closes_only_this_connection_with_an_error() {
    let mut out = Vec::new();
    let mut t = T {
        c: Pmi2Conn::upgraded(Some(Proc::new(ns("kvs"), 0)), vec![], &mut out),
        ids: pmi1::Common::default(),
        nodes: node_attrs::Common::default(),
    };
    let (s, f) = t.send("cmd=fullinit;pmirank=3;");
    assert_eq!(s, Step::Close);
    assert_eq!(f[0].cmd, "error");
    let mut t = ready(0, 1);
    t.c.feed(b"zzzzzzcmd=x;");
    let mut out = Vec::new();
    assert_eq!(t.c.step(&mut t.ids, &mut t.nodes, &mut out), Step::Close);
    assert!(
        frames(&out)[0]
            .get("errmsg")
            .unwrap()
            .contains("not a number")
    );
    let mut t = ready(0, 1);
    t.c.feed(b"70000 cmd=x;");
    let mut out = Vec::new();
    assert_eq!(t.c.step(&mut t.ids, &mut t.nodes, &mut out), Step::Close);
    assert!(frames(&out)[0].get("errmsg").unwrap().contains("70000"));
}

#[test]
fn over_tcp_fullinit_names_the_pmi_id() {
    let me = Proc::new(ns("kvs"), 1);
    let mut ids = pmi1::Common::default();
    assert!(ids.hand_out(42, me.clone()));
    let mut out = Vec::new();
    let mut t = T {
        c: Pmi2Conn::upgraded(None, vec![], &mut out),
        ids,
        nodes: node_attrs::Common::default(),
    };
    let (s, _) = t.send("cmd=fullinit;srcid=42;threaded=FALSE;");
    assert!(matches!(s, Step::Hello { proc, .. } if proc == me));
    let mut out = Vec::new();
    let mut t2 = T {
        c: Pmi2Conn::upgraded(None, vec![], &mut out),
        ids: std::mem::take(&mut t.ids),
        nodes: node_attrs::Common::default(),
    };
    // An id serves one connection.
    let (s, _) = t2.send("cmd=fullinit;srcid=42;threaded=FALSE;");
    assert_eq!(s, Step::Close);
}

proptest::proptest! {
    #[test]
    fn input_stays_bounded_and_garbage_never_panics(
        reads in proptest::collection::vec(
            proptest::collection::vec(proptest::num::u8::ANY, 1..5000),
            1..8,
        ),
    ) {
        let mut t = ready(0, 1);
        for read in reads {
            if !t.c.wants_input() {
                break;
            }
            t.c.feed(&read);
            let mut out = Vec::new();
            let step = t.c.step(&mut t.ids, &mut t.nodes, &mut out);
            proptest::prop_assert!(t.c.buffered() <= wire::LEN_FIELD + wire::MAX_BODY + read.len());
            if step == Step::Close {
                proptest::prop_assert!(t.c.is_closing());
                break;
            }
        }
    }
}

/// Counts whose sum does not fit in 32 bits reach the engine (which refuses them) without a
/// panic here.
#[test]
fn a_spawn_whose_counts_overflow_is_passed_on_without_a_panic() {
    let mut t = ready(0, 7);
    let (s, _) = t.send(
        "cmd=spawn;ncmds=2;preputcount=0;\
         subcmd=/a;maxprocs=4294967295;argc=0;infokeycount=0;\
         subcmd=/b;maxprocs=2;argc=0;infokeycount=0;",
    );
    let Step::Request(_, Request::Spawn { apps, .. }) = s else {
        panic!("{s:?}")
    };
    assert_eq!(
        apps.iter().map(|a| a.maxprocs).collect::<Vec<_>>(),
        [u32::MAX, 2]
    );
}
