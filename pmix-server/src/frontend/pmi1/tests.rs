#![allow(clippy::unwrap_used)]

use super::*;
use pmix_wire::{ProcKvs, ProcRealm, Published, Realm};

pub(crate) fn ns(s: &str) -> Nspace {
    Nspace::new(s).unwrap()
}

/// A job of `size` ranks on one node, with a universe of 16 and app numbers alternating.
pub(crate) fn job(name: &str, size: u32) -> Arc<JobData> {
    Arc::new(JobData {
        nspace: ns(name),
        session: vec![Info::attr(attr::UNIV_SIZE, 16u32)],
        job: vec![Info::attr(attr::JOB_SIZE, size)],
        apps: vec![],
        nodes: vec![Realm {
            id: 0,
            info: vec![Info::attr(attr::LOCAL_SIZE, size)],
        }],
        procs: (0..size)
            .map(|r| ProcRealm {
                rank: Rank(r),
                info: vec![
                    Info::attr(attr::APPNUM, r % 2),
                    Info::attr(attr::NODEID, 0u32),
                    Info::attr(attr::LOCAL_RANK, r),
                ],
            })
            .collect(),
    })
}

/// Feeds `input`, runs the connection, returns the step and what it wrote.
fn run(c: &mut Pmi1Conn, input: &str) -> (Step, String) {
    c.feed(input.as_bytes());
    let mut out = Vec::new();
    let step = c.step(&mut Common::default(), &mut out);
    (step, String::from_utf8(out).unwrap())
}

fn vouched(proc: Proc) -> Step {
    Step::Hello {
        proc,
        auth: Auth::Vouched { creds: None },
        answers: GetAnswers::KeyOnly,
    }
}

fn ready(rank: u32) -> Pmi1Conn {
    let me = Proc::new(ns("kvs"), rank);
    let mut c = Pmi1Conn::with_fd(me.clone());
    let (step, out) = run(&mut c, "cmd=init pmi_version=1 pmi_subversion=1\n");
    assert_eq!(step, vouched(me));
    assert_eq!(out, "");
    let mut out = Vec::new();
    c.accepted(job("kvs", 4), &mut out);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n"
    );
    c
}

fn answer(c: &mut Pmi1Conn, step: Step, r: Reply) -> String {
    let Step::Request(id, _) = step else {
        panic!("not a request: {step:?}")
    };
    let mut out = Vec::new();
    c.replied(id, &r, &mut out);
    String::from_utf8(out).unwrap()
}

#[test]
fn local_answers_come_from_the_job_data() {
    let mut c = ready(3);
    let (s, out) = run(
        &mut c,
        "cmd=get_maxes\ncmd=get_appnum\ncmd=get_my_kvsname\ncmd=get_universe_size\n",
    );
    assert_eq!(s, Step::Idle);
    assert_eq!(
        out,
        "cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=1024\n\
         cmd=appnum rc=0 appnum=1\n\
         cmd=my_kvsname rc=0 kvsname=kvs\n\
         cmd=universe_size rc=0 size=16\n"
    );
    let (s, out) = run(&mut c, "cmd=get kvsname=kvs key=PMI_process_mapping\n");
    assert_eq!(s, Step::Idle);
    assert_eq!(out, "cmd=get_result rc=0 value=(vector,(0,1,4))\n");
}

#[test]
fn put_get_and_barrier_go_to_the_engine_one_at_a_time() {
    let mut c = ready(0);
    // Two requests in one read: the second waits for the first's answer.
    let (s, out) = run(
        &mut c,
        "cmd=put kvsname=kvs key=-bcast-1-0 value=segments=3\ncmd=barrier_in\n",
    );
    assert_eq!(out, "");
    let Step::Request(_, Request::Commit { kvs }) = &s else {
        panic!("{s:?}")
    };
    assert_eq!(kvs[0].key.as_str(), "-bcast-1-0");
    assert_eq!(kvs[0].value, Value::String("segments=3".into()));
    assert_eq!(
        answer(&mut c, s, Reply::status(Status::SUCCESS)),
        "cmd=put_result rc=0 msg=success\n"
    );
    let mut out = Vec::new();
    let s = c.step(&mut Common::default(), &mut out);
    assert!(
        matches!(s, Step::Request(_, Request::Fence { .. })),
        "{s:?}"
    );
    assert_eq!(
        answer(&mut c, s, Reply::status(Status::SUCCESS)),
        "cmd=barrier_out rc=0\n"
    );

    let (s, _) = run(&mut c, "cmd=get kvsname=kvs key=-bcast-1-0\n");
    let Step::Request(_, Request::Get { proc, key, info }) = &s else {
        panic!("{s:?}")
    };
    assert_eq!(proc.rank, Rank::UNDEF);
    assert_eq!(key.as_ref().unwrap().as_str(), "-bcast-1-0");
    assert!(info.iter().any(|i| i.key.as_str() == attr::IMMEDIATE));
    let found = Reply {
        status: Status::SUCCESS,
        body: ReplyBody::Get {
            data: vec![ProcKvs {
                proc: Proc::new(ns("kvs"), 2),
                kvs: vec![Kv {
                    scope: Scope::GLOBAL,
                    key: Key::new("-bcast-1-0").unwrap(),
                    value: Value::String("segments=3".into()),
                }],
            }],
            jobs: vec![],
        },
    };
    assert_eq!(
        answer(&mut c, s, found),
        "cmd=get_result rc=0 value=segments=3\n"
    );
    let (s, _) = run(&mut c, "cmd=get kvsname=kvs key=PMI_hwloc_xmlfile\n");
    assert_eq!(
        answer(&mut c, s, Reply::status(Status::ERR_NOT_FOUND)),
        "cmd=get_result rc=-1 msg=key_PMI_hwloc_xmlfile_not_found\n"
    );
}

#[test]
fn another_rank_cannot_write_into_another_kvs_and_long_values_are_refused() {
    let mut c = ready(0);
    let (s, out) = run(&mut c, "cmd=put kvsname=other key=k value=v\n");
    assert_eq!(s, Step::Idle);
    assert_eq!(out, "cmd=put_result rc=-1 msg=not_your_kvs\n");
    let long = "x".repeat(1000);
    let (s, out) = run(&mut c, &format!("cmd=put kvsname=kvs key=k value={long}\n"));
    assert_eq!(s, Step::Idle);
    assert_eq!(out, "cmd=put_result rc=-1 msg=value_too_long\n");
}

#[test]
fn name_service_outcomes() {
    let mut c = ready(0);
    let (s, _) = run(&mut c, "cmd=publish_name service=svc port=tag#0$x$\n");
    let Step::Request(_, Request::Publish { data, info }) = &s else {
        panic!("{s:?}")
    };
    assert_eq!(data[0].value, Value::String("tag#0$x$".into()));
    assert_eq!(info[0].key.as_str(), attr::RANGE);
    assert_eq!(
        answer(&mut c, s, Reply::status(Status::ERR_DUPLICATE_KEY)),
        "cmd=publish_result rc=1 msg=key_already_present\n"
    );
    let (s, _) = run(&mut c, "cmd=lookup_name service=svc\n");
    let hit = Reply {
        status: Status::SUCCESS,
        body: ReplyBody::Lookup {
            found: vec![Published {
                proc: Proc::new(ns("kvs"), 0),
                key: Key::new("svc").unwrap(),
                value: Value::String("p0".into()),
            }],
        },
    };
    assert_eq!(
        answer(&mut c, s, hit),
        "cmd=lookup_result rc=0 msg=success port=p0\n"
    );
    let (s, _) = run(&mut c, "cmd=lookup_name service=none\n");
    assert_eq!(
        answer(&mut c, s, Reply::status(Status::ERR_NOT_FOUND)),
        "cmd=lookup_result rc=1 msg=service_not_found\n"
    );
    let (s, _) = run(&mut c, "cmd=unpublish_name service=none\n");
    assert_eq!(
        answer(&mut c, s, Reply::status(Status::ERR_NOT_FOUND)),
        "cmd=unpublish_result rc=1 msg=service_not_found\n"
    );
}

#[test]
fn spawn_blocks_arrive_in_pieces_and_merge() {
    let mut c = ready(0);
    let block1 = "mcmd=spawn\nnprocs=1\nexecname=/bin/child\ntotspawns=2\nspawnssofar=1\n\
                  argcnt=2\narg1=childA\narg2=a b=c  d;e\npreput_num=1\n\
                  preput_key_0=PARENT_ROOT_PORT_NAME\npreput_val_0=tag#0$1$\ninfo_num=0\nendcmd\n";
    let block2 = "mcmd=spawn\nnprocs=2\nexecname=/bin/child\ntotspawns=2\nspawnssofar=2\n\
                  argcnt=1\narg1=childB\npreput_num=1\npreput_key_0=PARENT_ROOT_PORT_NAME\n\
                  preput_val_0=tag#0$1$\ninfo_num=1\ninfo_key_0=wdir\ninfo_val_0=/tmp\nendcmd\n";
    let all = format!("{block1}{block2}");
    // Byte by byte, as a client writing in pieces would.
    let mut step = Step::Idle;
    for b in all.as_bytes() {
        c.feed(&[*b]);
        let mut out = Vec::new();
        step = c.step(&mut Common::default(), &mut out);
        assert!(out.is_empty());
        if step != Step::Idle {
            break;
        }
    }
    let Step::Request(_, Request::Spawn { job_info, apps }) = &step else {
        panic!("{step:?}")
    };
    assert_eq!(job_info.len(), 1, "preputs merged");
    assert_eq!(job_info[0].key.as_str(), "PARENT_ROOT_PORT_NAME");
    assert_eq!(apps.len(), 2);
    assert_eq!(apps[0].argv, ["/bin/child", "childA", "a b=c  d;e"]);
    assert_eq!(apps[0].maxprocs, 1);
    assert_eq!(apps[1].maxprocs, 2);
    assert_eq!(apps[1].cwd, "/tmp");
    assert_eq!(
        answer(&mut c, step, Reply::status(Status::SUCCESS)),
        "cmd=spawn_result rc=0\n"
    );
}

#[test]
fn port_mode_starts_with_initack() {
    let mut c = Pmi1Conn::with_port();
    let me = Proc::new(ns("kvs"), 2);
    let mut common = Common::default();
    assert!(common.hand_out(77, me.clone()));
    assert!(
        !common.hand_out(77, Proc::new(ns("kvs"), 3)),
        "an id in use"
    );
    c.feed(b"cmd=initack pmiid=77\n");
    assert_eq!(c.step(&mut common, &mut Vec::new()), vouched(me));
    let mut out = Vec::new();
    c.accepted(job("kvs", 4), &mut out);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "cmd=initack rc=0\ncmd=set size=4\ncmd=set rank=2\ncmd=set debug=0\n"
    );
    let (_, out) = run(&mut c, "cmd=init pmi_version=1 pmi_subversion=1\n");
    assert_eq!(
        out,
        "cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n"
    );
}

#[test]
fn bad_input_gets_an_answer_and_never_a_panic() {
    let mut c = ready(0);
    let (s, out) = run(&mut c, "cmd=frobnicate x=1\n");
    assert_eq!(s, Step::Idle);
    assert_eq!(out, "cmd=frobnicate_result rc=-1 msg=unknown_command\n");
    let (s, out) = run(&mut c, "cmd=put key=k\n");
    assert_eq!(s, Step::Idle);
    assert!(out.starts_with("cmd=put_result rc=-1"), "{out}");
    let (s, out) = run(&mut c, &"y".repeat(MAX_LINE + 10));
    assert_eq!(s, Step::Close);
    assert!(out.starts_with("cmd=error rc=-1"), "{out}");
    // A version this server does not speak is refused cleanly.
    let mut c = Pmi1Conn::with_fd(Proc::new(ns("kvs"), 0));
    let (s, out) = run(&mut c, "cmd=init pmi_version=3 pmi_subversion=0\n");
    assert_eq!(s, Step::Close);
    assert!(out.starts_with("cmd=response_to_init rc=-1"), "{out}");
}

#[test]
fn pmi_version_2_hands_the_connection_over_with_what_followed() {
    let me = Proc::new(ns("kvs"), 1);
    let mut c = Pmi1Conn::with_fd(me.clone());
    let (s, out) = run(
        &mut c,
        "cmd=init pmi_version=2 pmi_subversion=0\n38    cmd=fullinit",
    );
    assert_eq!(s, Step::Idle);
    assert_eq!(out, "");
    let (proc, rest) = c.take_upgrade().unwrap();
    assert_eq!(proc, Some(me));
    assert_eq!(rest, b"38    cmd=fullinit");
    assert!(c.take_upgrade().is_none());
    // Over TCP the process is not known until its fullinit names its PMI_ID.
    let mut c = Pmi1Conn::with_port();
    run(&mut c, "cmd=init pmi_version=2 pmi_subversion=0\n");
    assert_eq!(c.take_upgrade(), Some((None, vec![])));
}

#[test]
fn a_pmi_id_serves_one_connection() {
    let mut common = Common::default();
    let me = Proc::new(ns("kvs"), 0);
    assert!(common.hand_out(5, me.clone()));
    let mut first = Pmi1Conn::with_port();
    first.feed(b"cmd=initack pmiid=5\n");
    assert_eq!(first.step(&mut common, &mut Vec::new()), vouched(me));
    let mut second = Pmi1Conn::with_port();
    second.feed(b"cmd=initack pmiid=5\n");
    let mut out = Vec::new();
    assert_eq!(second.step(&mut common, &mut out), Step::Close);
    let out = String::from_utf8(out).unwrap();
    assert!(out.starts_with("cmd=initack rc=-"), "{out}");
    assert!(out.contains("unknown_pmiid"), "{out}");
    assert!(second.is_closing());
}

proptest::proptest! {
    /// Fed only while it wants input, as the shell feeds it, a connection whose request waits
    /// holds at most a line and one read's worth, whatever the peer sends.
    #[test]
    fn input_stays_bounded_while_a_request_waits(
        reads in proptest::collection::vec(
            proptest::collection::vec(proptest::num::u8::ANY, 1..20_000),
            1..40,
        ),
    ) {
        let mut c = ready(0);
        let mut out = Vec::new();
        c.feed(b"cmd=barrier_in\n");
        let waiting = c.step(&mut Common::default(), &mut out);
        proptest::prop_assert!(matches!(waiting, Step::Request(..)), "{waiting:?}");
        for read in &reads {
            if !c.wants_input() {
                break;
            }
            c.feed(read);
            let step = c.step(&mut Common::default(), &mut out);
            proptest::prop_assert!(matches!(step, Step::Idle), "{step:?}");
            proptest::prop_assert!(c.buffered() <= MAX_LINE + 1 + read.len());
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(input in proptest::collection::vec(proptest::num::u8::ANY, 0..3000)) {
        let mut c = ready(1);
        c.feed(&input);
        let mut out = Vec::new();
        for _ in 0..64 {
            match c.step(&mut Common::default(), &mut out) {
                Step::Request(id, _) => c.replied(id, &Reply::status(Status::SUCCESS), &mut out),
                Step::Idle | Step::Close => break,
                _ => {}
            }
        }
        for line in out.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            proptest::prop_assert!(line.len() < MAX_REPLY);
        }
    }
}

#[test]
fn a_get_in_an_unknown_kvs_names_the_kvs_not_the_key() {
    let mut c = ready(0);
    let (s, _) = run(&mut c, "cmd=get kvsname=nope key=k\n");
    let Step::Request(_, Request::Get { proc, .. }) = &s else {
        panic!("{s:?}")
    };
    assert_eq!(proc.nspace, ns("nope"));
    // The engine's "not found" does not say what was not found: the front-end asks whether
    // the KVS exists before it answers.
    assert_eq!(answer(&mut c, s, Reply::status(Status::ERR_NOT_FOUND)), "");
    let (s, _) = run(&mut c, "");
    let Step::Request(_, Request::Get { proc, key, .. }) = &s else {
        panic!("{s:?}")
    };
    assert_eq!((proc, key), (&Proc::new(ns("nope"), Rank::WILDCARD), &None));
    assert_eq!(
        answer(&mut c, s, Reply::status(Status::ERR_NOT_FOUND)),
        "cmd=get_result rc=-1 msg=kvs_nope_not_found\n"
    );

    // A KVS that exists but lacks the key: the key is what is unknown.
    let (s, _) = run(&mut c, "cmd=get kvsname=other key=k\n");
    assert_eq!(answer(&mut c, s, Reply::status(Status::ERR_NOT_FOUND)), "");
    let (s, _) = run(&mut c, "");
    assert_eq!(
        answer(&mut c, s, Reply::status(Status::SUCCESS)),
        "cmd=get_result rc=-1 msg=key_k_not_found\n"
    );

    // Its own KVS exists: no second question.
    let (s, _) = run(&mut c, "cmd=get kvsname=kvs key=k\n");
    assert_eq!(
        answer(&mut c, s, Reply::status(Status::ERR_NOT_FOUND)),
        "cmd=get_result rc=-1 msg=key_k_not_found\n"
    );
    // A name no KVS can have, and the process mapping of an unknown KVS.
    let long = "x".repeat(300);
    let (s, out) = run(&mut c, &format!("cmd=get kvsname={long} key=k\n"));
    assert_eq!(s, Step::Idle);
    assert_eq!(
        out,
        format!("cmd=get_result rc=-1 msg=kvs_{}_not_found\n", &long[..200])
    );
    let (s, _) = run(&mut c, "cmd=get kvsname=nope key=PMI_process_mapping\n");
    assert_eq!(
        answer(&mut c, s, Reply::status(Status::ERR_NOT_FOUND)),
        "cmd=get_result rc=-1 msg=kvs_nope_not_found\n"
    );
}
