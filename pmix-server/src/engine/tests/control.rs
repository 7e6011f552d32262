//! Queries answered by the engine, logging, job control and cleanup registrations.

use pmix_types::{Info, Key, Proc, Rank, Status, Value, attr};
use pmix_wire::{Reply, ReplyBody, Request};

use super::{GID, Sim, UID, key, ns, proofs};
use crate::engine::{HostCall, HostOutcome};

fn query(keys: &[&str], qualifiers: Vec<Info>) -> pmix_wire::Query {
    pmix_wire::Query {
        keys: keys.iter().map(|k| key(k)).collect(),
        qualifiers,
    }
}

fn results(r: Reply) -> Vec<Info> {
    match r.body {
        ReplyBody::Query { results } => results,
        other => panic!("expected query results, got {other:?} ({:?})", r.status),
    }
}

fn value_of<'a>(infos: &'a [Info], k: &str) -> &'a Value {
    &infos
        .iter()
        .find(|i| i.key.as_str() == k)
        .unwrap_or_else(|| panic!("no {k} in {infos:?}"))
        .value
}

#[test]
fn the_engine_answers_what_it_knows_without_the_host() {
    let mut s = Sim::new();
    s.job("b", 2);
    s.job("a", 1);
    s.connect(1, "a", 0);
    s.auto_host = false;
    let asked = s.send(
        1,
        Request::Query {
            queries: vec![
                query(
                    &[
                        attr::QUERY_NAMESPACES,
                        attr::QUERY_NUM_PSETS,
                        attr::QUERY_PSET_NAMES,
                    ],
                    vec![],
                ),
                query(&[attr::JOB_SIZE], vec![Info::attr(attr::NSPACE, "b")]),
                query(&[attr::SERVER_FUNCTIONS], vec![]),
            ],
        },
    );
    assert!(s.host_calls.is_empty(), "{:?}", s.host_calls);
    let r = s.reply(1, asked);
    assert_eq!(r.status, Status::SUCCESS);
    let got = results(r);
    assert_eq!(value_of(&got, attr::QUERY_NAMESPACES), &Value::from("a,b"));
    assert_eq!(value_of(&got, attr::QUERY_NUM_PSETS), &Value::Size(0));
    assert_eq!(value_of(&got, attr::QUERY_PSET_NAMES), &Value::from(""));
    assert_eq!(value_of(&got, attr::JOB_SIZE).as_u64(), Some(2));
    let fns: Vec<&str> = value_of(&got, attr::SERVER_FUNCTIONS)
        .as_str()
        .unwrap()
        .split(',')
        .collect();
    for f in [
        "PMIx_Job_control",
        "PMIx_Group_construct_nb",
        "PMIx_Group_invite",
        "PMIx_Group_leave",
        "PMIx_IOF_pull",
        "PMIx_IOF_push",
        "PMIx_Resolve_peers",
    ] {
        assert!(fns.contains(&f), "{f} not in {fns:?}");
    }
    // What the server does not serve is not claimed.
    for f in ["PMIx_Allocation_request", "PMIx_Process_monitor"] {
        assert!(!fns.contains(&f), "{f} in {fns:?}");
    }
}

/// The variant names of an enum deriving `Deserialize` (externally tagged), as its derive
/// hands them to the deserializer: the one list that grows when a variant is added.
fn variant_names<'de, T: serde::Deserialize<'de>>() -> &'static [&'static str] {
    use serde::de::{Error as _, Visitor};
    struct Names<'a>(&'a mut &'static [&'static str]);
    impl<'de> serde::Deserializer<'de> for Names<'_> {
        type Error = serde::de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Self::Error> {
            Err(Self::Error::custom("not an enum"))
        }
        fn deserialize_enum<V: Visitor<'de>>(
            self,
            _name: &'static str,
            variants: &'static [&'static str],
            _: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = variants;
            Err(Self::Error::custom("names taken"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map struct
            identifier ignored_any
        }
    }
    let mut names: &'static [&'static str] = &[];
    let _ = T::deserialize(Names(&mut names));
    names
}

#[test]
fn every_request_of_the_wire_names_the_functions_it_serves() {
    use crate::engine::attributes::{CONNECTION, FUNCTIONS_BY_REQUEST, SERVER_ATTRIBUTES};
    let requests = variant_names::<Request>();
    assert!(requests.contains(&"GroupLeave"), "{requests:?}");
    let rows: Vec<&str> = FUNCTIONS_BY_REQUEST.iter().map(|(r, _)| *r).collect();
    for r in requests {
        assert!(
            rows.contains(r),
            "Request::{r} has no row in FUNCTIONS_BY_REQUEST: which PMIx functions does it serve?"
        );
    }
    for r in &rows {
        assert!(
            *r == CONNECTION || requests.contains(r),
            "FUNCTIONS_BY_REQUEST names {r}, which is no Request"
        );
    }
    let fns: Vec<&str> = FUNCTIONS_BY_REQUEST
        .iter()
        .flat_map(|(_, f)| f.iter().copied())
        .collect();
    let mut unique = fns.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), fns.len(), "a function listed twice: {fns:?}");
    // A function whose attributes the server describes is one it serves.
    for (f, _) in SERVER_ATTRIBUTES {
        assert!(fns.contains(f), "{f} has attributes but is not served");
    }
}

#[test]
fn process_sets_named_in_job_data_are_counted() {
    let mut s = Sim::new();
    let info = vec![
        Info::attr(attr::JOB_SIZE, 1u32),
        Info::attr(attr::PSET_NAMES, "ocean,land"),
    ];
    s.eng.register_nspace(ns("p"), 1, &info).unwrap();
    s.eng
        .register_client(&Proc::new(ns("p"), 0), UID, GID, proofs("p", 0))
        .unwrap();
    s.connect(1, "p", 0);
    let asked = s.send(
        1,
        Request::Query {
            queries: vec![query(
                &[attr::QUERY_NUM_PSETS, attr::QUERY_PSET_NAMES],
                vec![],
            )],
        },
    );
    let got = results(s.reply(1, asked));
    assert_eq!(value_of(&got, attr::QUERY_NUM_PSETS), &Value::Size(2));
    assert_eq!(
        value_of(&got, attr::QUERY_PSET_NAMES),
        &Value::from("ocean,land")
    );
}

#[test]
fn local_and_host_answers_are_merged_and_a_failing_host_leaves_a_partial_success() {
    let mut s = Sim::new();
    s.job("a", 1);
    s.connect(1, "a", 0);
    s.auto_host = false;
    let mixed = || Request::Query {
        queries: vec![query(
            &[attr::QUERY_NAMESPACES, attr::QUERY_PROC_TABLE],
            vec![],
        )],
    };
    let asked = s.send(1, mixed());
    let (op, call) = s.host_calls.remove(0);
    let HostCall::Query { queries, .. } = call else {
        panic!("expected a query, got {call:?}");
    };
    // Only what the engine could not answer reaches the host.
    assert_eq!(queries, vec![query(&[attr::QUERY_PROC_TABLE], vec![])]);
    let table = Info::attr(attr::QUERY_PROC_TABLE, "from the host");
    s.answer(op, HostOutcome::Infos(Ok(vec![table.clone()])));
    let got = results(s.reply(1, asked));
    assert_eq!(got.len(), 2);
    assert_eq!(value_of(&got, attr::QUERY_PROC_TABLE), &table.value);

    let asked = s.send(1, mixed());
    let (op, _) = s.host_calls.remove(0);
    s.answer(op, HostOutcome::Infos(Err(Status::ERR_NOT_SUPPORTED)));
    let r = s.reply(1, asked);
    assert_eq!(r.status, Status::QUERY_PARTIAL_SUCCESS);
    assert_eq!(results(r).len(), 1);
}

#[test]
fn log_goes_to_the_host_with_the_true_source() {
    let mut s = Sim::new();
    s.job("a", 2);
    s.connect(1, "a", 1);
    s.auto_host = false;
    let liar = Proc::new(ns("a"), Rank(0));
    let id = s.send(
        1,
        Request::Log {
            data: vec![Info::attr(attr::LOG_STDERR, "hello")],
            directives: vec![Info::attr(attr::LOG_SOURCE, liar)],
        },
    );
    let (op, call) = s.host_calls.remove(0);
    let HostCall::Log {
        proc,
        data,
        directives,
    } = call
    else {
        panic!("expected a log, got {call:?}");
    };
    let me = Proc::new(ns("a"), Rank(1));
    assert_eq!(proc, me);
    assert_eq!(data, vec![Info::attr(attr::LOG_STDERR, "hello")]);
    assert_eq!(directives, vec![Info::attr(attr::LOG_SOURCE, me)]);
    s.answer(op, HostOutcome::Unit(Ok(())));
    assert_eq!(s.reply(1, id).status, Status::SUCCESS);
    // Nothing to log is the caller's mistake.
    let empty = s.send(
        1,
        Request::Log {
            data: vec![],
            directives: vec![],
        },
    );
    assert_eq!(s.reply(1, empty).status, Status::ERR_BAD_PARAM);
    assert!(s.host_calls.is_empty());
}

#[test]
fn job_control_actions_go_to_the_host_and_its_refusal_reaches_the_client() {
    let mut s = Sim::new();
    s.job("a", 2);
    s.connect(1, "a", 0);
    s.auto_host = false;
    let id = s.send(
        1,
        Request::JobControl {
            targets: vec![],
            directives: vec![Info::attr(attr::JOB_CTRL_KILL, true)],
        },
    );
    let (op, call) = s.host_calls.remove(0);
    let HostCall::JobControl {
        targets,
        directives,
        ..
    } = call
    else {
        panic!("expected job control, got {call:?}");
    };
    // No targets: the caller's namespace.
    assert_eq!(targets, vec![Proc::new(ns("a"), Rank::WILDCARD)]);
    assert_eq!(directives, vec![Info::attr(attr::JOB_CTRL_KILL, true)]);
    s.answer(op, HostOutcome::Infos(Err(Status::ERR_NOT_SUPPORTED)));
    assert_eq!(s.reply(1, id).status, Status::ERR_NOT_SUPPORTED);
    // Nothing asked for at all.
    let id = s.send(
        1,
        Request::JobControl {
            targets: vec![],
            directives: vec![Info::attr(attr::JOB_CTRL_ID, "x")],
        },
    );
    assert_eq!(s.reply(1, id).status, Status::ERR_BAD_PARAM);
    assert!(s.host_calls.is_empty());
}

#[test]
fn cleanups_are_kept_by_the_server_and_run_when_the_namespace_ends() {
    let mut s = Sim::new();
    s.job("a", 1);
    s.job("b", 1);
    s.connect(1, "a", 0);
    s.auto_host = false;
    let id = s.send(
        1,
        Request::JobControl {
            targets: vec![],
            directives: vec![
                Info::attr(attr::REGISTER_CLEANUP_DIR, "/tmp/x,/tmp/y"),
                Info::attr(attr::CLEANUP_RECURSIVE, true),
                Info::attr(attr::REGISTER_CLEANUP, "/tmp/f"),
            ],
        },
    );
    // Answered by the server alone.
    assert!(s.host_calls.is_empty(), "{:?}", s.host_calls);
    assert_eq!(s.reply(1, id).status, Status::SUCCESS);
    // A path value that is not a string, and a directory both cleaned and ignored.
    let bad = s.send(
        1,
        Request::JobControl {
            targets: vec![],
            directives: vec![Info::attr(attr::REGISTER_CLEANUP, 3u32)],
        },
    );
    assert_eq!(s.reply(1, bad).status, Status::ERR_BAD_PARAM);
    let conflict = s.send(
        1,
        Request::JobControl {
            targets: vec![],
            directives: vec![
                Info::attr(attr::REGISTER_CLEANUP_DIR, "/tmp/z"),
                Info::attr(attr::CLEANUP_IGNORE, "/tmp/z"),
            ],
        },
    );
    assert_eq!(
        s.reply(1, conflict).status,
        Status::ERR_CONFLICTING_CLEANUP_DIRECTIVES
    );
    s.eng.deregister_nspace("b");
    s.pump();
    assert!(s.cleanups.is_empty(), "another job's end ran them");
    s.eng.deregister_nspace("a");
    s.pump();
    assert_eq!(s.cleanups.len(), 1);
    let c = &s.cleanups[0];
    assert_eq!((c.uid, c.gid), (UID, GID));
    assert_eq!(c.dirs, ["/tmp/x", "/tmp/y"]);
    assert_eq!(c.files, ["/tmp/f"]);
    assert!(c.recursive && !c.leave_topdir);
}

/// `QUERY_ATTRIBUTE_SUPPORT`: one answer per level asked, the attributes as `REGATTR`s by
/// function; the client level is left to the host (libpmix answers it itself).
#[test]
fn attribute_support_is_answered_per_level_with_registered_attributes() {
    let mut s = Sim::new();
    s.job("a", 1);
    s.connect(1, "a", 0);
    s.auto_host = false;
    let asked = s.send(
        1,
        Request::Query {
            queries: vec![query(
                &[attr::QUERY_ATTRIBUTE_SUPPORT],
                vec![
                    Info::attr(attr::SERVER_ATTRIBUTES, "PMIx_Fence"),
                    Info::attr(attr::SERVER_FUNCTIONS, true),
                ],
            )],
        },
    );
    assert!(s.host_calls.is_empty(), "{:?}", s.host_calls);
    let got = results(s.reply(1, asked));
    let levels: Vec<Vec<Info>> = got
        .iter()
        .map(|i| match &i.value {
            Value::DataArray(a) if i.key.as_str() == attr::QUERY_ATTRIBUTE_SUPPORT => {
                a.infos().cloned().collect()
            }
            other => panic!("{}: {other:?}", i.key.as_str()),
        })
        .collect();
    assert_eq!(levels.len(), 2, "{got:?}");
    // Only the function asked for, its attributes registered.
    assert_eq!(levels[0].len(), 1);
    assert_eq!(levels[0][0].key.as_str(), "PMIx_Fence");
    let Value::DataArray(regs) = &levels[0][0].value else {
        panic!("{:?}", levels[0][0]);
    };
    let collect = regs.items().iter().find_map(|v| match v {
        Value::RegAttr(r) if r.key == attr::COLLECT_DATA => Some(r),
        _ => None,
    });
    let collect = collect.unwrap_or_else(|| panic!("{regs:?}"));
    assert_eq!(collect.name, "PMIX_COLLECT_DATA");
    assert_eq!(collect.ty, pmix_types::DataType::BOOL);
    assert!(!collect.description.is_empty());
    assert_eq!(levels[1][0].key.as_str(), attr::SERVER_FUNCTIONS);
    // `true`, as libpmix 5 sends it: every function.
    let all = s.send(
        1,
        Request::Query {
            queries: vec![query(
                &[attr::QUERY_ATTRIBUTE_SUPPORT],
                vec![Info::attr(attr::SERVER_ATTRIBUTES, true)],
            )],
        },
    );
    let got = results(s.reply(1, all));
    let Value::DataArray(fns) = value_of(&got, attr::QUERY_ATTRIBUTE_SUPPORT) else {
        panic!("{got:?}");
    };
    assert!(fns.infos().count() > 1, "{fns:?}");
    // The client level is not the server's to answer.
    s.send(
        1,
        Request::Query {
            queries: vec![query(
                &[attr::QUERY_ATTRIBUTE_SUPPORT],
                vec![Info::attr(attr::CLIENT_ATTRIBUTES, "PMIx_Get")],
            )],
        },
    );
    assert_eq!(s.host_calls.len(), 1, "{:?}", s.host_calls);
}

#[test]
fn queries_go_to_the_host_and_its_answer_back() {
    let mut s = Sim::new();
    s.job("a", 1);
    s.connect(1, "a", 0);
    s.auto_host = false;
    let query = |keys: &[&str]| pmix_wire::Query {
        keys: keys.iter().map(|k| Key::new(*k).unwrap()).collect(),
        qualifiers: vec![],
    };
    let asked = s.send(
        1,
        Request::Query {
            queries: vec![query(&[attr::QUERY_PROC_TABLE])],
        },
    );
    let (op, call) = s.host_calls.remove(0);
    let HostCall::Query { proc, queries } = call else {
        panic!("expected a query, got {call:?}");
    };
    assert_eq!(proc, Proc::new(ns("a"), Rank(0)));
    assert_eq!(queries, vec![query(&[attr::QUERY_PROC_TABLE])]);
    let results = vec![Info::attr(attr::QUERY_PROC_TABLE, "a")];
    s.eng
        .handle_host_done(op, HostOutcome::Infos(Ok(results.clone())));
    s.pump();
    assert_eq!(
        s.reply(1, asked),
        Reply {
            status: Status::SUCCESS,
            body: ReplyBody::Query { results },
        }
    );
    // A host that cannot answer: its status reaches the client.
    let refused = s.send(
        1,
        Request::Query {
            queries: vec![query(&[attr::QUERY_PROC_TABLE])],
        },
    );
    let (op, _) = s.host_calls.remove(0);
    s.eng
        .handle_host_done(op, HostOutcome::Infos(Err(Status::ERR_NOT_SUPPORTED)));
    s.pump();
    assert_eq!(s.reply(1, refused).status, Status::ERR_NOT_SUPPORTED);
    // An empty query is the client's mistake; the host never sees it.
    let empty = s.send(1, Request::Query { queries: vec![] });
    assert_eq!(s.reply(1, empty).status, Status::ERR_BAD_PARAM);
    assert!(s.host_calls.is_empty());
}

/// `SERVER_URI` is this server's, unless a `HOSTNAME` qualifier names another host: then the
/// host is asked (issue 35: libpmix tools ask it qualified by the hostname).
#[test]
fn the_server_uri_is_answered_for_this_host_only() {
    let mut s = Sim::new();
    let uri = "rs-server-1.0;tcp4://127.0.0.1:4000";
    s.eng = crate::engine::Engine::new(
        "node0".into(),
        vec![
            Info::attr(attr::SERVER_NSPACE, "rs-server-1"),
            Info::attr(attr::SERVER_URI, uri),
        ],
        crate::NameService::BuiltIn,
    );
    s.job("a", 1);
    s.connect(1, "a", 0);
    s.auto_host = false;
    for qualifiers in [vec![], vec![Info::attr(attr::HOSTNAME, "node0")]] {
        let asked = s.send(
            1,
            Request::Query {
                queries: vec![query(&[attr::SERVER_URI], qualifiers)],
            },
        );
        assert!(s.host_calls.is_empty(), "{:?}", s.host_calls);
        let got = results(s.reply(1, asked));
        assert_eq!(value_of(&got, attr::SERVER_URI), &Value::from(uri));
    }
    s.send(
        1,
        Request::Query {
            queries: vec![query(
                &[attr::SERVER_URI],
                vec![Info::attr(attr::HOSTNAME, "node7")],
            )],
        },
    );
    assert_eq!(
        s.host_calls.len(),
        1,
        "another host's URI is the host's to give"
    );
}

/// `QUERY_NAMESPACE_INFO`: a `JOB_INFO_ARRAY` per namespace with its name, its command line
/// (the applications' argv, ` : ` between them) and its size, laid out as PRRTE answers and
/// libpmix reads it (issue 35: zero results before).
#[test]
fn namespace_info_names_each_job_with_its_command_line() {
    let mut s = Sim::new();
    let app = |n: u32, argv: &str| {
        Info::attr(
            attr::APP_INFO_ARRAY,
            pmix_types::DataArray::from_infos([
                Info::attr(attr::APPNUM, n),
                Info::attr(attr::APP_ARGV, argv),
            ]),
        )
    };
    let info = vec![
        Info::attr(attr::JOB_SIZE, 3u32),
        app(1, "b --two"),
        app(0, "a -x"),
    ];
    s.eng.register_nspace(ns("p"), 3, &info).unwrap();
    s.job("q", 1);
    s.connect(1, "q", 0);
    let asked = s.send(
        1,
        Request::Query {
            queries: vec![query(&[attr::QUERY_NAMESPACE_INFO], vec![])],
        },
    );
    let got = results(s.reply(1, asked));
    let jobs: Vec<Vec<Info>> = value_of(&got, attr::QUERY_NAMESPACE_INFO)
        .as_array()
        .expect("an array")
        .infos()
        .map(|i| {
            assert_eq!(i.key.as_str(), attr::JOB_INFO_ARRAY);
            i.value
                .as_array()
                .expect("an array")
                .infos()
                .cloned()
                .collect()
        })
        .collect();
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    assert_eq!(value_of(&jobs[0], attr::NSPACE), &Value::from("p"));
    assert_eq!(
        value_of(&jobs[0], attr::CMD_LINE),
        &Value::from("a -x : b --two")
    );
    assert_eq!(value_of(&jobs[0], attr::JOB_SIZE).as_u64(), Some(3));
    assert_eq!(value_of(&jobs[1], attr::NSPACE), &Value::from("q"));
}
