//! The client against a scripted in-process server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use common::*;
use pmix_client::{
    Client, DataRange, Error, Info, Proc, Rank, Scope, Status, Value, attr, types::DataType,
};
use pmix_wire::{Event, Kv, ProcKvs, Reply, ReplyBody, Request};

fn start(rank: u32, script: Script) -> (Mock, Client) {
    let mock = Mock::start(job("job-A"), rank, script);
    let client = Client::init_with_env(mock.env()).expect("init against the mock");
    (mock, client)
}

fn defaults() -> Script {
    Box::new(default_action)
}

fn wild(nspace: &str) -> Proc {
    Proc::new(ns(nspace), Rank::WILDCARD)
}

fn flag(k: &str) -> Info {
    info(k, true)
}

fn s(v: &str) -> Value {
    Value::String(v.to_owned())
}

// ---- init ----------------------------------------------------------------------------------

#[test]
fn init_with_a_bad_secret_names_the_variable() {
    with_deadline(|| {
        let mock = Mock::start(job("job-A"), 0, defaults());
        let env = mock.env();
        let e = Client::init_with_env(|k| match k {
            "PMIXRS_SECRET" => Some("not hex at all, 32 chars long!!!".into()),
            _ => env(k),
        })
        .unwrap_err();
        assert!(
            matches!(
                e,
                Error::BadEnvironment {
                    var: "PMIXRS_SECRET",
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(e.status(), Status::ERR_INIT);
        // Uppercase hex is not what setup_fork writes either.
        let e = Client::init_with_env(|k| match k {
            "PMIXRS_SECRET" => Some(SECRET_HEX.to_uppercase()),
            _ => env(k),
        })
        .unwrap_err();
        assert!(matches!(e, Error::BadEnvironment { .. }), "{e:?}");
        // Nothing was sent: the environment is checked before connecting.
        assert_eq!(mock.count(), 0);
        assert!(mock.hellos.try_recv().is_err());
    });
}

#[test]
fn init_rejects_a_relative_socket_path_and_a_missing_rank() {
    let e = Client::init_with_env(|k| match k {
        "PMIXRS_SERVER_URI" => Some("unix:relative/s".into()),
        _ => None,
    })
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::BadEnvironment {
                var: "PMIXRS_SERVER_URI",
                ..
            }
        ),
        "{e:?}"
    );
    let e = Client::init_with_env(|k| match k {
        "PMIXRS_SERVER_URI" => Some("unix:/nonexistent/s".into()),
        "PMIX_NAMESPACE" => Some("job".into()),
        _ => None,
    })
    .unwrap_err();
    assert!(
        matches!(
            e,
            Error::BadEnvironment {
                var: "PMIX_RANK",
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn init_sends_who_we_are() {
    with_deadline(|| {
        let (mock, client) = start(2, defaults());
        let hello = mock.hellos.recv_timeout(DEADLINE).unwrap();
        assert_eq!(hello.magic, "PMIXRS");
        assert_eq!(hello.nspace, ns("job-A"));
        assert_eq!(hello.rank, Rank(2));
        assert_eq!(hello.secret, SECRET.to_vec());
        assert_eq!(hello.pid, std::process::id());
        assert_eq!(client.proc(), &peer("job-A", 2));
        assert!(client.is_initialized());
    });
}

#[test]
fn refused_welcome_carries_status_and_reason() {
    with_deadline(|| {
        let mock = Mock::start_with(
            Greeting::Refuse(Status::ERR_INVALID_CRED, 1, "bad secret for job-A:0".into()),
            "job-A",
            0,
            defaults(),
        );
        let e = Client::init_with_env(mock.env()).unwrap_err();
        assert_eq!(e.status(), Status::ERR_INVALID_CRED);
        match &e {
            Error::Refused { reason, .. } => assert_eq!(reason, "bad secret for job-A:0"),
            other => panic!("expected Refused, got {other:?}"),
        }
    });
}

#[test]
fn server_version_mismatch_is_not_supported() {
    with_deadline(|| {
        // Announced in the environment: refused before connecting.
        let mock = Mock::start(job("job-A"), 0, defaults());
        let env = mock.env();
        let e = Client::init_with_env(|k| match k {
            "PMIXRS_PROTOCOL" => Some("3".into()),
            _ => env(k),
        })
        .unwrap_err();
        assert!(
            matches!(
                e,
                Error::VersionMismatch {
                    server: 3,
                    client: 2
                }
            ),
            "{e:?}"
        );
        assert_eq!(e.status(), Status::ERR_NOT_SUPPORTED);

        // Refused by the server, which names its version.
        let mock = Mock::start_with(
            Greeting::Refuse(Status::ERR_NOT_SUPPORTED, 7, "speaks 7".into()),
            "job-A",
            0,
            defaults(),
        );
        let e = Client::init_with_env(mock.env()).unwrap_err();
        assert!(
            matches!(
                e,
                Error::VersionMismatch {
                    server: 7,
                    client: 2
                }
            ),
            "{e:?}"
        );

        // Accepted, but by a server of another version.
        let mock = Mock::start_with(
            Greeting::AcceptVersion(3, job("job-A")),
            "job-A",
            0,
            defaults(),
        );
        let e = Client::init_with_env(mock.env()).unwrap_err();
        assert!(
            matches!(e, Error::VersionMismatch { server: 3, .. }),
            "{e:?}"
        );
    });
}

#[test]
fn welcome_with_another_namespace_is_a_protocol_error() {
    with_deadline(|| {
        let mock = Mock::start_with(Greeting::Accept(job("job-B")), "job-A", 0, defaults());
        let e = Client::init_with_env(mock.env()).unwrap_err();
        assert!(matches!(e, Error::Protocol(_)), "{e:?}");
    });
}

// ---- job-level data ------------------------------------------------------------------------

#[test]
fn job_level_get_resolves_level_by_level() {
    with_deadline(|| {
        // Rank 3: app 1, node 1.
        let (mock, c) = start(3, defaults());
        let lvl = "pmix.test.level";
        let w = wild("job-A");
        let get = |p: &Proc, k: &str, i: &[Info]| c.get(p, k, i);

        // WILDCARD: job level, then session level.
        assert_eq!(get(&w, "pmix.job.size", &[]).unwrap(), Value::Uint32(4));
        assert_eq!(get(&w, lvl, &[]).unwrap(), s("job"));
        assert_eq!(get(&w, "pmix.univ.size", &[]).unwrap(), Value::Uint32(8));
        assert_eq!(get(&w, "pmix.test.ssnonly", &[]).unwrap(), s("ssn"));

        // A real rank: proc, then its app, its node, the job.
        assert_eq!(get(&peer("job-A", 0), lvl, &[]).unwrap(), s("proc"));
        assert_eq!(get(&peer("job-A", 1), lvl, &[]).unwrap(), s("app0"));
        assert_eq!(get(&peer("job-A", 2), lvl, &[]).unwrap(), s("app1"));
        assert_eq!(
            get(&peer("job-A", 1), "pmix.test.nodejob", &[]).unwrap(),
            s("node1")
        );
        assert_eq!(
            get(&peer("job-A", 2), "pmix.test.nodejob", &[]).unwrap(),
            s("node0")
        );
        assert_eq!(
            get(&peer("job-A", 2), "pmix.job.size", &[]).unwrap(),
            Value::Uint32(4)
        );
        assert_eq!(
            get(&peer("job-A", 2), "pmix.local.rank", &[]).unwrap(),
            Value::Uint32(1)
        );
        // The session level is not searched for a real rank.
        let e = get(&peer("job-A", 2), "pmix.test.ssnonly", &[]).unwrap_err();
        assert_eq!(e.status(), Status::ERR_NOT_FOUND);

        // Qualifiers select one level.
        let q = |k: &str| flag(k).qualifier();
        assert_eq!(get(&w, lvl, &[q("pmix.ssn.info")]).unwrap(), s("session"));
        assert_eq!(
            get(&peer("job-A", 0), lvl, &[q("pmix.job.info")]).unwrap(),
            s("job")
        );
        assert_eq!(
            get(&w, lvl, &[q("pmix.app.info"), info("pmix.appnum", 0u32)]).unwrap(),
            s("app0")
        );
        // APP_INFO with no number: the target's app, or for WILDCARD ours (rank 3: app 1).
        assert_eq!(
            get(&peer("job-A", 0), lvl, &[q("pmix.app.info")]).unwrap(),
            s("app0")
        );
        assert_eq!(get(&w, lvl, &[q("pmix.app.info")]).unwrap(), s("app1"));
        assert_eq!(
            get(&w, lvl, &[q("pmix.node.info"), info("pmix.nodeid", 0u32)]).unwrap(),
            s("node0")
        );
        assert_eq!(
            get(&w, lvl, &[q("pmix.node.info"), info("pmix.hname", "n1")]).unwrap(),
            s("node1")
        );
        assert_eq!(get(&w, lvl, &[q("pmix.node.info")]).unwrap(), s("node1"));
        assert_eq!(
            get(
                &w,
                "pmix.local.size",
                &[q("pmix.node.info"), info("pmix.hname", "n0")]
            )
            .unwrap(),
            Value::Uint32(2)
        );
        // A level that lacks the key does not fall through to another.
        let e = get(&w, "pmix.job.size", &[q("pmix.ssn.info")]).unwrap_err();
        assert_eq!(e.status(), Status::ERR_NOT_FOUND);

        // A reserved key not in job data: not found at once.
        let e = get(&w, "pmix.no.such.key", &[]).unwrap_err();
        assert_eq!(e.status(), Status::ERR_NOT_FOUND);
        let e = get(&peer("job-A", 1), "pmix.no.such.key", &[]).unwrap_err();
        assert_eq!(e.status(), Status::ERR_NOT_FOUND);

        // A non-reserved key of WILDCARD: the job level only, then not found.
        assert_eq!(
            get(&w, "user.jobkey", &[]).unwrap(),
            s("registered by host")
        );
        let e = get(&w, "user.nothere", &[]).unwrap_err();
        assert_eq!(e.status(), Status::ERR_NOT_FOUND);

        // None of it left the process.
        assert_eq!(mock.count(), 0);
    });
}

#[test]
fn reserved_key_of_an_unknown_namespace_asks_the_server_once() {
    with_deadline(|| {
        let (mock, c) = start(
            0,
            Box::new(|req| match req {
                Request::Get { proc, .. } if proc.nspace.as_str() == "job-B" => {
                    Action::Reply(Reply {
                        status: Status::SUCCESS,
                        body: ReplyBody::Get {
                            data: vec![],
                            jobs: vec![image(&job("job-B"))],
                        },
                    })
                }
                // As the server does for a key not at the job level: not found, but the job
                // data comes along.
                Request::Get { proc, .. } if proc.nspace.as_str() == "job-C" => {
                    Action::Reply(Reply {
                        status: Status::ERR_NOT_FOUND,
                        body: ReplyBody::Get {
                            data: vec![],
                            jobs: vec![image(&job("job-C"))],
                        },
                    })
                }
                other => default_action(other),
            }),
        );
        // OPTIONAL: not here, and the server is not asked.
        let e = c
            .get(&wild("job-B"), "pmix.job.size", &[flag("pmix.optional")])
            .unwrap_err();
        assert_eq!(e.status(), Status::ERR_NOT_FOUND);
        assert_eq!(mock.count(), 0);

        assert_eq!(
            c.get(&wild("job-B"), "pmix.job.size", &[]).unwrap(),
            Value::Uint32(4)
        );
        assert_eq!(mock.count(), 1);
        // The reply's job data is cached: everything about job-B is now local.
        assert_eq!(
            c.get(&peer("job-B", 1), "pmix.test.level", &[]).unwrap(),
            s("app0")
        );
        let e = c.get(&wild("job-B"), "pmix.no.such.key", &[]).unwrap_err();
        assert_eq!(e.status(), Status::ERR_NOT_FOUND);
        assert_eq!(mock.count(), 1);
        assert!(matches!(mock.next_request(), Request::Get { .. }));

        // A proc-level key of a real rank: the job level is asked for (the process itself
        // might not have committed), and the answer comes from the job data it brings.
        assert_eq!(
            c.get(&peer("job-C", 0), "pmix.test.level", &[]).unwrap(),
            s("proc")
        );
        match mock.next_request() {
            Request::Get { proc, key, .. } => {
                assert_eq!(proc, wild("job-C"));
                assert_eq!(key.unwrap().as_str(), "pmix.test.level");
            }
            other => panic!("expected a get, got {other:?}"),
        }
        assert_eq!(
            c.get(&peer("job-C", 3), "pmix.local.rank", &[]).unwrap(),
            Value::Uint32(1)
        );
        assert_eq!(mock.count(), 2);

        // No job data at all: the server's status comes through.
        let e = c.get(&wild("job-D"), "pmix.job.size", &[]).unwrap_err();
        assert!(
            matches!(e, Error::Server { status } if status == Status::ERR_NOT_FOUND),
            "{e:?}"
        );
    });
}

// ---- put / commit / store_internal --------------------------------------------------------

#[test]
fn commit_sends_what_was_put_once() {
    with_deadline(|| {
        let (mock, c) = start(0, defaults());
        c.put(Scope::GLOBAL, "a", 1u32).unwrap();
        c.put(Scope::LOCAL, "b", "x").unwrap();
        c.put(Scope::REMOTE, "r", 2.5f64).unwrap();
        c.put(Scope::GLOBAL, "a", 2u32).unwrap(); // replaces, in place
        c.store_internal("secret", 9u8).unwrap();
        c.put(Scope::GLOBAL, "gone", 1u8).unwrap();
        c.store_internal("gone", 2u8).unwrap(); // a later internal value hides the put
        assert_eq!(mock.count(), 0, "put is local");
        c.commit().unwrap();
        match mock.next_request() {
            Request::Commit { kvs } => assert_eq!(
                kvs,
                vec![
                    Kv {
                        scope: Scope::GLOBAL,
                        key: key("a"),
                        value: Value::Uint32(2)
                    },
                    Kv {
                        scope: Scope::LOCAL,
                        key: key("b"),
                        value: s("x")
                    },
                    Kv {
                        scope: Scope::REMOTE,
                        key: key("r"),
                        value: Value::Double(2.5)
                    },
                ]
            ),
            other => panic!("expected a commit, got {other:?}"),
        }
        // Nothing new: the commit is still sent (it marks the process committed), empty.
        c.commit().unwrap();
        assert_eq!(mock.next_request(), Request::Commit { kvs: vec![] });
    });
}

#[test]
fn reserved_keys_are_refused_by_put_and_store_internal() {
    with_deadline(|| {
        let (mock, c) = start(0, defaults());
        for e in [
            c.put(Scope::GLOBAL, "pmix.job.size", 3u32).unwrap_err(),
            c.put(Scope::LOCAL, "pmixfoo", 3u32).unwrap_err(),
            c.store_internal("pmix.x", 1u8).unwrap_err(),
        ] {
            assert!(matches!(e, Error::ReservedKey(_)), "{e:?}");
            assert_eq!(e.status(), Status::ERR_BAD_PARAM);
        }
        // Bad keys and scopes too.
        assert_eq!(
            c.put(Scope::GLOBAL, "", 1u8).unwrap_err().status(),
            Status::ERR_BAD_PARAM
        );
        assert_eq!(
            c.put(Scope(9), "k", 1u8).unwrap_err().status(),
            Status::ERR_BAD_PARAM
        );
        c.commit().unwrap();
        assert_eq!(mock.next_request(), Request::Commit { kvs: vec![] });
        // Job data is untouched.
        assert_eq!(
            c.get(&wild("job-A"), "pmix.job.size", &[]).unwrap(),
            Value::Uint32(4)
        );
    });
}

#[test]
fn own_data_is_visible_to_self_before_commit_and_internal_data_never_leaves() {
    with_deadline(|| {
        let (mock, c) = start(1, defaults());
        let me = c.proc().clone();
        c.put(Scope::LOCAL, "l", "local").unwrap();
        c.put(Scope::REMOTE, "r", "remote").unwrap();
        c.store_internal("i", "internal").unwrap();
        assert_eq!(c.get(&me, "l", &[]).unwrap(), s("local"));
        assert_eq!(c.get(&me, "r", &[]).unwrap(), s("remote"));
        assert_eq!(c.get(&me, "i", &[]).unwrap(), s("internal"));
        // A miss of our own key is final: everything we put is here.
        let e = c.get(&me, "never.put", &[]).unwrap_err();
        assert_eq!(e.status(), Status::ERR_NOT_FOUND);
        // DATA_SCOPE selects by the scope the value was put with.
        let scope = |sc: Scope| [info("pmix.scope", sc)];
        assert_eq!(c.get(&me, "l", &scope(Scope::LOCAL)).unwrap(), s("local"));
        assert_eq!(
            c.get(&me, "l", &scope(Scope::REMOTE)).unwrap_err().status(),
            Status::ERR_NOT_FOUND
        );
        assert_eq!(c.get(&me, "r", &scope(Scope::GLOBAL)).unwrap(), s("remote"));
        assert_eq!(mock.count(), 0);

        c.commit().unwrap();
        match mock.next_request() {
            Request::Commit { kvs } => {
                let keys: Vec<&str> = kvs.iter().map(|kv| kv.key.as_str()).collect();
                assert_eq!(keys, ["l", "r"]);
            }
            other => panic!("expected a commit, got {other:?}"),
        }
        // Still visible after the commit, internal included.
        assert_eq!(c.get(&me, "i", &[]).unwrap(), s("internal"));
        assert_eq!(mock.count(), 1);
    });
}

// ---- gets that need the server ---------------------------------------------------------------

fn peer_data_script(hits: Arc<Mutex<Vec<Request>>>) -> Script {
    Box::new(move |req| {
        hits.lock().unwrap().push(req.clone());
        match req {
            Request::Get { proc, .. } if proc.rank == Rank(1) => Action::Reply(Reply {
                status: Status::SUCCESS,
                body: ReplyBody::Get {
                    data: vec![ProcKvs {
                        proc: proc.clone(),
                        kvs: vec![
                            Kv {
                                scope: Scope::GLOBAL,
                                key: key("peer.k"),
                                value: s("v1"),
                            },
                            Kv {
                                scope: Scope::LOCAL,
                                key: key("peer.other"),
                                value: Value::Int64(-5),
                            },
                        ],
                    }],
                    jobs: vec![],
                },
            }),
            other => default_action(other),
        }
    })
}

#[test]
fn get_miss_asks_the_server_and_caches_the_reply() {
    with_deadline(|| {
        let hits = Arc::new(Mutex::new(Vec::new()));
        let (mock, c) = start(0, peer_data_script(Arc::clone(&hits)));
        let p1 = peer("job-A", 1);
        let directives = [flag("pmix.immediate"), info("pmix.timeout", 5i32)];
        assert_eq!(c.get(&p1, "peer.k", &directives).unwrap(), s("v1"));
        assert_eq!(
            mock.next_request(),
            Request::Get {
                proc: p1.clone(),
                key: Some(key("peer.k")),
                info: directives.to_vec(),
            }
        );
        // The whole of rank 1's data came with the reply: both keys are now local.
        assert_eq!(c.get(&p1, "peer.k", &[]).unwrap(), s("v1"));
        assert_eq!(c.get(&p1, "peer.other", &[]).unwrap(), Value::Int64(-5));
        assert_eq!(mock.count(), 1);
        // So is all of it, in the order it came.
        let all = c.get_all(&p1, &[]).unwrap();
        let arr = all.as_array().unwrap();
        let keys: Vec<&str> = arr.infos().map(|i| i.key.as_str()).collect();
        assert_eq!(keys, ["peer.k", "peer.other"]);
        assert_eq!(mock.count(), 1);

        // A key the reply did not carry: the server is asked again and says not found.
        let e = c.get(&p1, "peer.missing", &[]).unwrap_err();
        assert_eq!(e.status(), Status::ERR_NOT_FOUND);
        assert_eq!(mock.count(), 2);
        // Rank 2 has nothing: the server's status comes through.
        let e = c.get(&peer("job-A", 2), "peer.k", &[]).unwrap_err();
        assert!(
            matches!(e, Error::Server { status } if status == Status::ERR_NOT_FOUND),
            "{e:?}"
        );
        assert_eq!(hits.lock().unwrap().len(), 3);
    });
}

#[test]
fn refresh_cache_asks_the_server_again_for_a_peers_put_data_only() {
    with_deadline(|| {
        // The server's value of rank 1's key changes with every get: v1, v2, ...
        let served = Arc::new(Mutex::new(0u32));
        let counter = Arc::clone(&served);
        let (mock, c) = start(
            0,
            Box::new(move |req| match req {
                Request::Get { proc, .. } if proc.rank == Rank(1) => {
                    let mut n = counter.lock().unwrap();
                    *n += 1;
                    Action::Reply(Reply {
                        status: Status::SUCCESS,
                        body: ReplyBody::Get {
                            data: vec![ProcKvs {
                                proc: proc.clone(),
                                kvs: vec![Kv {
                                    scope: Scope::GLOBAL,
                                    key: key("peer.k"),
                                    value: s(&format!("v{n}")),
                                }],
                            }],
                            jobs: vec![],
                        },
                    })
                }
                other => default_action(other),
            }),
        );
        let p1 = peer("job-A", 1);
        let refresh = [flag(attr::GET_REFRESH_CACHE)];
        assert_eq!(c.get(&p1, "peer.k", &[]).unwrap(), s("v1"));
        assert_eq!(c.get(&p1, "peer.k", &[]).unwrap(), s("v1"), "cached");
        assert_eq!(mock.count(), 1);
        let _first = mock.next_request();
        // Refreshed: asked again, with the directive, and the cache holds the new value.
        assert_eq!(c.get(&p1, "peer.k", &refresh).unwrap(), s("v2"));
        assert_eq!(
            mock.next_request(),
            Request::Get {
                proc: p1.clone(),
                key: Some(key("peer.k")),
                info: refresh.to_vec(),
            }
        );
        assert_eq!(c.get(&p1, "peer.k", &[]).unwrap(), s("v2"));
        let (tx, rx) = std::sync::mpsc::channel();
        c.get_nb(&p1, Some("peer.k"), &refresh, move |r| {
            let _ = tx.send(r);
        });
        assert_eq!(rx.recv().unwrap().unwrap(), s("v3"));
        let all = c.get_all(&p1, &refresh).unwrap();
        let values: Vec<&Value> = all.as_array().unwrap().infos().map(|i| &i.value).collect();
        assert_eq!(values, [&s("v4")]);
        assert_eq!(*served.lock().unwrap(), 4);
        // Given as false it is no refresh.
        let no = [info(attr::GET_REFRESH_CACHE, false)];
        assert_eq!(c.get(&p1, "peer.k", &no).unwrap(), s("v4"));
        // This process's own data and job data are local whatever the directive says.
        c.put(Scope::GLOBAL, "mine", 1u32).unwrap();
        assert_eq!(c.get(c.proc(), "mine", &refresh).unwrap(), Value::Uint32(1));
        let job = c.get(&wild("job-A"), attr::JOB_SIZE, &refresh).unwrap();
        assert!(job.as_u32().is_some(), "{job:?}");
        assert_eq!(*served.lock().unwrap(), 4);
        assert_eq!(mock.count(), 4);
    });
}

#[test]
fn optional_miss_never_contacts_the_server() {
    with_deadline(|| {
        let (mock, c) = start(0, defaults());
        let p1 = peer("job-A", 1);
        let e = c.get(&p1, "peer.k", &[flag("pmix.optional")]).unwrap_err();
        assert_eq!(e.status(), Status::ERR_NOT_FOUND);
        let e = c.get_all(&p1, &[flag("pmix.optional")]).unwrap_err();
        assert_eq!(e.status(), Status::ERR_NOT_FOUND);
        // OPTIONAL given as false is not optional.
        let e = c
            .get(&p1, "peer.k", &[info("pmix.optional", false)])
            .unwrap_err();
        assert!(matches!(e, Error::Server { .. }), "{e:?}");
        assert_eq!(mock.count(), 1);
    });
}

#[test]
fn get_all_of_self_is_an_info_array_in_put_order() {
    with_deadline(|| {
        let (mock, c) = start(0, defaults());
        let me = c.proc().clone();
        let empty = c.get_all(&me, &[]).unwrap();
        assert_eq!(empty.as_array().unwrap().items().len(), 0);
        c.put(Scope::GLOBAL, "x", 1u32).unwrap();
        c.put(Scope::LOCAL, "y", "two").unwrap();
        c.store_internal("z", true).unwrap();
        c.put(Scope::GLOBAL, "x", 3u32).unwrap();
        let all = c.get_all(&me, &[]).unwrap();
        let arr = all.as_array().unwrap();
        assert_eq!(arr.elem_type(), DataType::INFO);
        let got: Vec<(String, Value)> = arr
            .infos()
            .map(|i| (i.key.as_str().to_owned(), i.value.clone()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("x".into(), Value::Uint32(3)),
                ("y".into(), s("two")),
                ("z".into(), Value::Bool(true)),
            ]
        );
        assert_eq!(mock.count(), 0);
    });
}

#[test]
fn get_all_of_a_peer_asks_with_no_key() {
    with_deadline(|| {
        let hits = Arc::new(Mutex::new(Vec::new()));
        let (mock, c) = start(0, peer_data_script(hits));
        let p1 = peer("job-A", 1);
        let all = c.get_all(&p1, &[]).unwrap();
        assert_eq!(all.as_array().unwrap().infos().count(), 2);
        match mock.next_request() {
            Request::Get { proc, key, .. } => {
                assert_eq!(proc, p1);
                assert_eq!(key, None);
            }
            other => panic!("expected a get, got {other:?}"),
        }
        assert_eq!(c.get(&p1, "peer.other", &[]).unwrap(), Value::Int64(-5));
        assert_eq!(mock.count(), 1);
    });
}

#[test]
fn get_nb_completes_locally_and_from_the_server() {
    with_deadline(|| {
        let hits = Arc::new(Mutex::new(Vec::new()));
        let (_mock, c) = start(0, peer_data_script(hits));
        let (tx, rx) = crossbeam_channel::unbounded();
        let t = tx.clone();
        c.get_nb(&wild("job-A"), Some("pmix.job.size"), &[], move |r| {
            t.send(r).unwrap();
        });
        assert_eq!(
            rx.recv_timeout(DEADLINE).unwrap().unwrap(),
            Value::Uint32(4)
        );
        c.get_nb(&peer("job-A", 1), Some("peer.k"), &[], move |r| {
            tx.send(r).unwrap();
        });
        assert_eq!(rx.recv_timeout(DEADLINE).unwrap().unwrap(), s("v1"));
    });
}

#[test]
fn blocking_call_inside_a_completion_is_refused() {
    with_deadline(|| {
        let hits = Arc::new(Mutex::new(Vec::new()));
        let (_mock, c) = start(0, peer_data_script(hits));
        let (tx, rx) = crossbeam_channel::bounded(1);
        let inner = c.clone();
        c.get_nb(&peer("job-A", 1), Some("peer.k"), &[], move |r| {
            assert!(r.is_ok());
            // Local answers are fine here; waiting for the server is not.
            let local = inner.get(&peer("job-A", 1), "peer.other", &[]);
            let remote = inner.get(&peer("job-A", 2), "x", &[]);
            tx.send((local, remote)).unwrap();
        });
        let (local, remote) = rx.recv_timeout(DEADLINE).unwrap();
        assert_eq!(local.unwrap(), Value::Int64(-5));
        let e = remote.unwrap_err();
        assert!(matches!(e, Error::WouldDeadlock), "{e:?}");
        assert_eq!(e.status(), Status::ERR_WOULD_BLOCK);
    });
}

#[test]
fn timeout_backstop_when_the_server_never_answers() {
    with_deadline(|| {
        let (_mock, c) = start(
            0,
            Box::new(|req| match req {
                Request::Get { .. } => Action::Ignore,
                other => default_action(other),
            }),
        );
        let e = c
            .get(&peer("job-A", 1), "k", &[info("pmix.timeout", 1u32)])
            .unwrap_err();
        assert!(matches!(e, Error::Timeout), "{e:?}");
        assert_eq!(e.status(), Status::ERR_TIMEOUT);
        // The connection is still good.
        c.commit().unwrap();
    });
}

// ---- fence ---------------------------------------------------------------------------------

#[test]
fn fence_nb_completes_and_collected_data_is_local() {
    with_deadline(|| {
        let (mock, c) = start(
            0,
            Box::new(|req| match req {
                Request::Fence { .. } => Action::Reply(Reply {
                    status: Status::SUCCESS,
                    body: ReplyBody::Fence {
                        data: (1..4u32)
                            .map(|r| ProcKvs {
                                proc: peer("job-A", r),
                                kvs: vec![Kv {
                                    scope: Scope::GLOBAL,
                                    key: key("demo.rank"),
                                    value: Value::Uint32(r * 10),
                                }],
                            })
                            .collect(),
                    },
                }),
                other => default_action(other),
            }),
        );
        let (tx, rx) = crossbeam_channel::bounded(1);
        let procs = [wild("job-A")];
        let directives = [flag("pmix.collect")];
        c.fence_nb(&procs, &directives, move |r| tx.send(r).unwrap());
        rx.recv_timeout(DEADLINE).unwrap().unwrap();
        assert_eq!(
            mock.next_request(),
            Request::Fence {
                procs: procs.to_vec(),
                info: directives.to_vec(),
            }
        );
        for r in 1..4u32 {
            assert_eq!(
                c.get(&peer("job-A", r), "demo.rank", &[]).unwrap(),
                Value::Uint32(r * 10)
            );
            assert_eq!(
                c.get_all(&peer("job-A", r), &[flag("pmix.optional")])
                    .unwrap()
                    .as_array()
                    .unwrap()
                    .items()
                    .len(),
                1
            );
        }
        assert_eq!(mock.count(), 1);
        // Blocking fence over the caller's namespace, no collection.
        c.fence(&[], &[]).unwrap();
        assert_eq!(
            mock.next_request(),
            Request::Fence {
                procs: vec![],
                info: vec![]
            }
        );
    });
}

/// Three peers' data, as a collecting fence over job-A brings it.
fn collected(value_of: fn(u32) -> Value) -> ReplyBody {
    ReplyBody::Fence {
        data: (1..4u32)
            .map(|r| ProcKvs {
                proc: peer("job-A", r),
                kvs: vec![Kv {
                    scope: Scope::GLOBAL,
                    key: key("demo.rank"),
                    value: value_of(r),
                }],
            })
            .collect(),
    }
}

#[test]
fn a_fence_through_request_gets_its_data_whole_and_still_caches_it() {
    with_deadline(|| {
        let (mock, c) = start(
            0,
            Box::new(|req| match req {
                Request::Fence { .. } => Action::Reply(Reply {
                    status: Status::SUCCESS,
                    body: collected(Value::Uint32),
                }),
                other => default_action(other),
            }),
        );
        let reply = c
            .request(Request::Fence {
                procs: vec![],
                info: vec![flag("pmix.collect")],
            })
            .unwrap();
        assert_eq!(reply.body, collected(Value::Uint32));
        assert_eq!(
            c.get(&peer("job-A", 2), "demo.rank", &[]).unwrap(),
            Value::Uint32(2)
        );
        assert_eq!(mock.count(), 1);
    });
}

#[test]
fn fence_data_that_does_not_decode_fails_the_get_of_that_process_only() {
    with_deadline(|| {
        let (mock, c) = start(
            0,
            Box::new(|req| match req {
                // Rank 2's value becomes a string that is not UTF-8 (same length, so the
                // frame stays whole): found out when a get asks for rank 2.
                Request::Fence { .. } => Action::Edited(
                    Reply {
                        status: Status::SUCCESS,
                        body: collected(|r| Value::String(format!("rank-{r}"))),
                    },
                    |body| {
                        let at = body.windows(6).position(|w| w == b"rank-2").unwrap();
                        body[at] = 0xff;
                    },
                ),
                other => default_action(other),
            }),
        );
        c.fence(&[], &[flag("pmix.collect")]).unwrap();
        assert_eq!(
            c.get(&peer("job-A", 1), "demo.rank", &[]).unwrap(),
            s("rank-1")
        );
        let e = c.get(&peer("job-A", 2), "demo.rank", &[]).unwrap_err();
        assert_eq!(e.status(), Status::ERR_UNPACK_FAILURE, "{e:?}");
        assert_eq!(
            c.get(&peer("job-A", 3), "demo.rank", &[]).unwrap(),
            s("rank-3")
        );
        assert!(c.is_connected());
        assert_eq!(mock.count(), 1);
    });
}

#[test]
fn fence_failure_status_reaches_the_caller() {
    with_deadline(|| {
        let (_mock, c) = start(
            0,
            Box::new(|req| match req {
                Request::Fence { .. } => {
                    Action::Reply(Reply::status(Status::ERR_PROC_TERM_WO_SYNC))
                }
                other => default_action(other),
            }),
        );
        let e = c.fence(&[], &[]).unwrap_err();
        assert_eq!(e.status(), Status::ERR_PROC_TERM_WO_SYNC);
    });
}

// ---- connection loss, finalize, abort, events ----------------------------------------------

#[test]
fn lost_connection_completes_every_pending_request() {
    with_deadline(|| {
        let (mock, c) = start(
            0,
            Box::new(|req| match req {
                Request::Get { .. } => Action::Ignore,
                Request::Fence { .. } => Action::Close,
                other => default_action(other),
            }),
        );
        let (tx, rx) = crossbeam_channel::unbounded();
        let t = tx.clone();
        c.get_nb(&peer("job-A", 1), Some("k"), &[], move |r| {
            t.send(r.map(|_| ())).unwrap();
        });
        // Make sure the get is outstanding at the server before the fence kills it.
        assert!(matches!(mock.next_request(), Request::Get { .. }));
        c.fence_nb(&[], &[], move |r| tx.send(r).unwrap());
        for _ in 0..2 {
            let e = rx.recv_timeout(DEADLINE).unwrap().unwrap_err();
            assert!(matches!(e, Error::LostConnection), "{e:?}");
            assert_eq!(e.status(), Status::ERR_LOST_CONNECTION);
        }
        assert!(!c.is_connected());
        // Later calls fail at once; local answers still work.
        let e = c.commit().unwrap_err();
        assert_eq!(e.status(), Status::ERR_LOST_CONNECTION);
        let e = c.get(&peer("job-A", 2), "k", &[]).unwrap_err();
        assert_eq!(e.status(), Status::ERR_LOST_CONNECTION);
        assert_eq!(
            c.get(&wild("job-A"), "pmix.job.size", &[]).unwrap(),
            Value::Uint32(4)
        );
        // Finalize reports the loss but still shuts down; twice is fine.
        assert!(c.finalize().is_err());
        c.finalize().unwrap();
        assert!(!c.is_initialized());
    });
}

#[test]
fn garbage_from_the_server_is_a_lost_connection_not_a_panic() {
    with_deadline(|| {
        let (_mock, c) = start(
            0,
            Box::new(|req| match req {
                Request::Commit { .. } => Action::Garbage,
                other => default_action(other),
            }),
        );
        let e = c.commit().unwrap_err();
        assert!(matches!(e, Error::LostConnection), "{e:?}");
        assert!(!c.is_connected());
    });
}

#[test]
fn finalize_is_idempotent_and_ends_the_client() {
    with_deadline(|| {
        let (mock, c) = start(0, defaults());
        c.finalize().unwrap();
        assert_eq!(mock.next_request(), Request::Finalize { info: vec![] });
        assert!(!c.is_initialized());
        c.finalize().unwrap();
        let e = c.get(&wild("job-A"), "pmix.job.size", &[]).unwrap_err();
        assert!(matches!(e, Error::NotInitialized), "{e:?}");
        assert_eq!(e.status(), Status::ERR_INIT);
        let e = c.put(Scope::GLOBAL, "k", 1u8).unwrap_err();
        assert_eq!(e.status(), Status::ERR_INIT);
        let (tx, rx) = crossbeam_channel::bounded(1);
        c.fence_nb(&[], &[], move |r| tx.send(r).unwrap());
        assert!(matches!(
            rx.recv_timeout(DEADLINE).unwrap(),
            Err(Error::NotInitialized)
        ));
        assert_eq!(mock.count(), 1);
    });
}

#[test]
fn dropping_the_last_handle_finalizes() {
    with_deadline(|| {
        let (mock, c) = start(0, defaults());
        let c2 = c.clone();
        drop(c);
        // Another handle lives: nothing happens.
        c2.commit().unwrap();
        assert!(matches!(mock.next_request(), Request::Commit { .. }));
        drop(c2);
        assert_eq!(mock.next_request(), Request::Finalize { info: vec![] });
    });
}

#[test]
fn abort_sends_status_message_and_procs() {
    with_deadline(|| {
        let (mock, c) = start(0, defaults());
        c.abort(Status::ERR_BAD_PARAM, "giving up", &[peer("job-A", 2)])
            .unwrap();
        assert_eq!(
            mock.next_request(),
            Request::Abort {
                status: Status::ERR_BAD_PARAM,
                message: "giving up".into(),
                procs: vec![peer("job-A", 2)],
            }
        );
    });
}

#[test]
fn events_are_kept_until_taken() {
    with_deadline(|| {
        let ev = Event {
            code: Status(-9999),
            source: peer("job-A", 3),
            range: DataRange::NAMESPACE,
            info: vec![],
        };
        let sent = ev.clone();
        let once = AtomicBool::new(false);
        let (_mock, c) = start(
            0,
            Box::new(move |req| match req {
                Request::Commit { .. } if !once.swap(true, Ordering::SeqCst) => {
                    Action::EventThen(sent.clone(), Reply::status(Status::SUCCESS))
                }
                other => default_action(other),
            }),
        );
        // The event precedes the commit's reply on the stream, so it is here once commit
        // returns.
        c.commit().unwrap();
        assert_eq!(c.take_events(), vec![ev]);
        assert!(c.take_events().is_empty());
    });
}

#[test]
fn request_is_an_escape_hatch_that_still_caches() {
    with_deadline(|| {
        let hits = Arc::new(Mutex::new(Vec::new()));
        let (mock, c) = start(0, peer_data_script(hits));
        let reply = c
            .request(Request::Get {
                proc: peer("job-A", 1),
                key: None,
                info: vec![],
            })
            .unwrap();
        assert_eq!(reply.status, Status::SUCCESS);
        assert!(matches!(reply.body, ReplyBody::Get { .. }));
        assert_eq!(c.get(&peer("job-A", 1), "peer.k", &[]).unwrap(), s("v1"));
        assert_eq!(mock.count(), 1);
        // A failure status is a reply, not an error.
        let reply = c
            .request(Request::Get {
                proc: peer("job-A", 2),
                key: None,
                info: vec![],
            })
            .unwrap();
        assert_eq!(reply.status, Status::ERR_NOT_FOUND);
    });
}

#[test]
fn a_panicking_callback_does_not_stop_the_client() {
    with_deadline(|| {
        let hits = Arc::new(Mutex::new(Vec::new()));
        let (_mock, c) = start(0, peer_data_script(hits));
        c.fence_nb(&[], &[], |_| panic!("deliberate panic in a completion"));
        // The reader thread survived: later requests still complete.
        assert_eq!(c.get(&peer("job-A", 1), "peer.k", &[]).unwrap(), s("v1"));
        c.commit().unwrap();
    });
}

#[test]
fn many_threads_mixing_blocking_and_nonblocking_calls_all_complete() {
    with_deadline(|| {
        let (_mock, c) = start(0, defaults());
        let (tx, rx) = crossbeam_channel::unbounded();
        let rounds = 200;
        let mut threads = Vec::new();
        for t in 0..4 {
            let c = c.clone();
            let tx = tx.clone();
            threads.push(std::thread::spawn(move || {
                for i in 0..rounds {
                    if t % 2 == 0 {
                        // Blocking calls: each reads its own reply when nobody else reads.
                        c.put(Scope::GLOBAL, "k", i).unwrap();
                        c.commit().unwrap();
                        c.fence(&[], &[]).unwrap();
                    } else {
                        let tx = tx.clone();
                        c.fence_nb(&[], &[], move |r| tx.send(r).unwrap());
                    }
                }
            }));
        }
        for t in threads {
            t.join().unwrap();
        }
        for _ in 0..2 * rounds {
            rx.recv_timeout(DEADLINE)
                .expect("every non-blocking fence completes")
                .unwrap();
        }
    });
}

#[test]
fn a_completion_run_by_a_blocked_caller_cannot_block() {
    with_deadline(|| {
        let (_mock, c) = start(0, defaults());
        for _ in 0..50 {
            let (tx, rx) = crossbeam_channel::bounded(1);
            let inner = c.clone();
            c.fence_nb(&[], &[], move |r| {
                r.unwrap();
                // Whichever thread reads this reply, a blocking call here must not wait.
                tx.send(inner.commit()).unwrap();
            });
            // A blocking call racing the reader thread for the reading role.
            c.fence(&[], &[]).unwrap();
            let nested = rx.recv_timeout(DEADLINE).expect("the completion ran");
            assert!(matches!(nested, Err(Error::WouldDeadlock)), "{nested:?}");
        }
    });
}

/// A memory file holding `bytes`, sealed with `seals` (none: anyone holding it may change it).
fn memory_file(bytes: &[u8], seals: nix::fcntl::SealFlag) -> std::os::fd::OwnedFd {
    use nix::fcntl::{FcntlArg, fcntl};
    use nix::sys::memfd::{MFdFlags, memfd_create};
    use std::os::unix::fs::FileExt;
    let fd = memfd_create(
        c"image",
        MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
    )
    .unwrap();
    let file = std::fs::File::from(fd);
    file.write_all_at(bytes, 0).unwrap();
    if !seals.is_empty() {
        fcntl(&file, FcntlArg::F_ADD_SEALS(seals)).unwrap();
    }
    file.into()
}

/// Starts a client welcomed with its job image said to be a memory file passed with the
/// welcome (`fd`); the server answers a get of its namespace's job data. Returns the client and
/// whether it asked.
fn welcomed_with_a_file(fd: Option<std::os::fd::OwnedFd>) -> (Mock, Client, bool) {
    let mock = Mock::start_with(
        Greeting::AcceptShared(job("job-A"), fd),
        "job-A",
        0,
        Box::new(|req| match req {
            Request::Get {
                proc, key: None, ..
            } if proc.nspace.as_str() == "job-A" && proc.rank == Rank::WILDCARD => {
                Action::Reply(Reply {
                    status: Status::SUCCESS,
                    body: ReplyBody::Get {
                        data: vec![],
                        jobs: vec![image(&job("job-A"))],
                    },
                })
            }
            other => default_action(other),
        }),
    );
    let c = Client::init_with_env(mock.env()).unwrap();
    let asked = mock.count() == 1;
    (mock, c, asked)
}

#[test]
fn a_sealed_image_file_is_mapped_and_nothing_is_asked() {
    use nix::fcntl::SealFlag;
    with_deadline(|| {
        let image = pmix_wire::JobImage::from_job_data(&job("job-A")).unwrap();
        let seals = SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_WRITE;
        let (mock, c, asked) = welcomed_with_a_file(Some(memory_file(image.bytes(), seals)));
        assert!(!asked, "the client asked for job data it had");
        assert_eq!(
            c.get(&wild("job-A"), "pmix.job.size", &[]).unwrap(),
            Value::Uint32(4)
        );
        assert_eq!(
            c.get(&peer("job-A", 1), "pmix.test.level", &[]).unwrap(),
            s("app0")
        );
        assert_eq!(mock.count(), 0);
    });
}

#[test]
fn an_image_file_that_is_missing_or_unsealed_is_not_mapped_but_asked_for() {
    use nix::fcntl::SealFlag;
    with_deadline(|| {
        let image = pmix_wire::JobImage::from_job_data(&job("job-A")).unwrap();
        // No file at all; a file anyone holding it could still write or truncate; a file
        // sealed but shorter than the welcome says.
        let short = &image.bytes()[..image.bytes().len() - 1];
        let all = SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_WRITE;
        for fd in [
            None,
            Some(memory_file(image.bytes(), SealFlag::empty())),
            Some(memory_file(
                image.bytes(),
                SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW,
            )),
            Some(memory_file(short, all)),
        ] {
            let (_mock, c, asked) = welcomed_with_a_file(fd);
            assert!(asked, "the client did not ask for its job data");
            assert_eq!(
                c.get(&wild("job-A"), "pmix.job.size", &[]).unwrap(),
                Value::Uint32(4)
            );
        }
    });
}
