//! Spawn, connect / disconnect and resolve_peers / resolve_nodes against a scripted
//! in-process server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use pmix_client::{App, AppExt, Client, Error, Info, Proc, Rank, Scope, Status, Value, app, attr};
use pmix_wire::{JobData, Kv, ProcKvs, Reply, ReplyBody, Request};

fn start(script: Script) -> (Mock, Client) {
    let mock = Mock::start(job("job-A"), 0, script);
    let client = Client::init_with_env(mock.env()).expect("init against the mock");
    (mock, client)
}

fn s(v: &str) -> Value {
    Value::String(v.to_owned())
}

fn wild(nspace: &str) -> Proc {
    Proc::new(ns(nspace), Rank::WILDCARD)
}

/// Proves that nothing was sent before: the next request the mock sees is this commit.
fn assert_nothing_sent(mock: &Mock, c: &Client) {
    c.commit().unwrap();
    assert_eq!(mock.next_request(), Request::Commit { kvs: vec![] });
}

fn spawned(nspace: &str) -> Reply {
    Reply {
        status: Status::SUCCESS,
        body: ReplyBody::Spawn { nspace: ns(nspace) },
    }
}

fn kv(k: &str, v: &str) -> Kv {
    Kv {
        scope: Scope::GLOBAL,
        key: key(k),
        value: s(v),
    }
}

// ---- spawn ---------------------------------------------------------------------------------

#[test]
fn spawn_sends_every_app_and_directive_and_returns_the_namespace() {
    with_deadline(|| {
        let (mock, c) = start(Box::new(|req| match req {
            Request::Spawn { .. } => Action::Reply(spawned("job-child")),
            other => default_action(other),
        }));
        let apps = [
            app("./worker", 2)
                .with_args(["--port", "p"])
                .with_env("MODE", "child")
                .with_cwd("/tmp")
                .with_info(info("user.app", 1u32)),
            App {
                cmd: "/bin/helper".into(),
                argv: vec!["helper".into()],
                env: vec![],
                cwd: String::new(),
                maxprocs: 1,
                info: vec![],
            },
        ];
        let job_info = [info("user.job", "x")];
        assert_eq!(c.spawn(&job_info, &apps).unwrap(), ns("job-child"));
        assert_eq!(
            mock.next_request(),
            Request::Spawn {
                job_info: job_info.to_vec(),
                apps: apps.to_vec(),
            }
        );
        assert_eq!(apps[0].argv, ["./worker", "--port", "p"]);
        assert_eq!(apps[0].env, ["MODE=child"]);
    });
}

#[test]
fn spawn_failure_status_reaches_the_caller() {
    with_deadline(|| {
        let (_mock, c) = start(Box::new(|req| match req {
            Request::Spawn { .. } => Action::Reply(Reply::status(Status::ERR_JOB_EXE_NOT_FOUND)),
            other => default_action(other),
        }));
        let e = c.spawn(&[], &[app("/no/such/program", 1)]).unwrap_err();
        assert!(matches!(e, Error::Server { .. }), "{e:?}");
        assert_eq!(e.status(), Status::ERR_JOB_EXE_NOT_FOUND);
        // The parent carries on.
        c.commit().unwrap();
        // A success that names no namespace is the server's mistake, not a namespace.
        let (_mock, c) = start(Box::new(default_action));
        let e = c.spawn(&[], &[app("x", 1)]).unwrap_err();
        assert!(matches!(e, Error::Protocol(_)), "{e:?}");
    });
}

#[test]
fn invalid_spawns_are_refused_before_sending() {
    with_deadline(|| {
        let (mock, c) = start(Box::new(default_action));
        // (An application without a process count is sent: the host counts it, as pmixrun
        // counts debugger daemons mapped ppr:N:node, or refuses it.)
        let bad: [&[App]; 3] = [&[], &[app("", 1)], &[app("a", 1), app("", 2)]];
        for apps in bad {
            let e = c.spawn(&[], apps).unwrap_err();
            assert!(matches!(e, Error::BadParam(_)), "{e:?}");
            assert_eq!(e.status(), Status::ERR_BAD_PARAM);
            let (tx, rx) = crossbeam_channel::bounded(1);
            c.spawn_nb(&[], apps, move |r| tx.send(r).unwrap());
            // Completed on this thread, before spawn_nb returned.
            let e = rx.try_recv().unwrap().unwrap_err();
            assert_eq!(e.status(), Status::ERR_BAD_PARAM);
        }
        assert_nothing_sent(&mock, &c);
    });
}

#[test]
fn spawn_nb_completes_on_the_reader_thread() {
    with_deadline(|| {
        let (mock, c) = start(Box::new(|req| match req {
            Request::Spawn { .. } => Action::Reply(spawned("job-nb")),
            other => default_action(other),
        }));
        let (tx, rx) = crossbeam_channel::bounded(1);
        c.spawn_nb(&[], &[app("w", 3)], move |r| tx.send(r).unwrap());
        assert_eq!(rx.recv_timeout(DEADLINE).unwrap().unwrap(), ns("job-nb"));
        assert!(matches!(mock.next_request(), Request::Spawn { .. }));
    });
}

#[test]
fn spawn_timeout_is_the_clients_backstop_when_the_host_never_answers() {
    with_deadline(|| {
        let (_mock, c) = start(Box::new(|req| match req {
            Request::Spawn { .. } => Action::Ignore,
            other => default_action(other),
        }));
        let t0 = Instant::now();
        let e = c
            .spawn(&[Info::attr(attr::SPAWN_TIMEOUT, 1i32)], &[app("w", 1)])
            .unwrap_err();
        assert!(matches!(e, Error::Timeout), "{e:?}");
        // The timeout plus the margin for the server's own answer.
        assert!(t0.elapsed() >= Duration::from_secs(2), "{:?}", t0.elapsed());
        // The client is still usable.
        c.commit().unwrap();
    });
}

// ---- connect / disconnect ------------------------------------------------------------------

/// Answers a connect with job-B's job data and the data of two participants: job-B rank 1,
/// and this process (a stale copy of its committed data, which must not replace its own).
fn connect_script() -> Script {
    Box::new(|req| match req {
        Request::Connect { .. } => Action::Reply(Reply {
            status: Status::SUCCESS,
            body: ReplyBody::Connect {
                jobs: vec![job("job-B")],
                data: vec![
                    ProcKvs {
                        proc: peer("job-B", 1),
                        kvs: vec![kv("port", "tcp://b1"), kv("other", "o")],
                    },
                    ProcKvs {
                        proc: peer("job-A", 0),
                        kvs: vec![kv("mine", "committed")],
                    },
                ],
            },
        }),
        other => default_action(other),
    })
}

#[test]
fn connect_sends_the_participants_and_makes_the_other_side_local() {
    with_deadline(|| {
        let (mock, c) = start(connect_script());
        let me = c.proc().clone();
        c.put(Scope::GLOBAL, "mine", "committed").unwrap();
        c.commit().unwrap();
        assert!(matches!(mock.next_request(), Request::Commit { .. }));
        c.put(Scope::GLOBAL, "mine", "newer").unwrap();

        let procs = [wild("job-A"), wild("job-B")];
        let directives = [info(attr::TIMEOUT, 30i32)];
        c.connect(&procs, &directives).unwrap();
        assert_eq!(
            mock.next_request(),
            Request::Connect {
                procs: procs.to_vec(),
                info: directives.to_vec(),
            }
        );
        let sent = mock.count();
        // The other job's job data and its processes' committed data are here now.
        assert_eq!(
            c.get(&wild("job-B"), attr::JOB_SIZE, &[]).unwrap(),
            Value::Uint32(4)
        );
        assert_eq!(
            c.get(&peer("job-B", 2), "pmix.test.level", &[]).unwrap(),
            s("app1")
        );
        assert_eq!(
            c.get(&peer("job-B", 1), "port", &[]).unwrap(),
            s("tcp://b1")
        );
        let all = c.get_all(&peer("job-B", 1), &[]).unwrap();
        assert_eq!(all.as_array().unwrap().items().len(), 2);
        // This process's own data is what it put last, not the copy the reply carried.
        assert_eq!(c.get(&me, "mine", &[]).unwrap(), s("newer"));
        // All of that without a message.
        assert_eq!(mock.count(), sent);
        // And the other job's processes resolve locally too.
        let peers = c.resolve_peers(Some("n1"), &ns("job-B")).unwrap();
        assert_eq!(peers, [peer("job-B", 1), peer("job-B", 3)]);
        assert_eq!(mock.count(), sent);
    });
}

#[test]
fn connect_failure_status_reaches_the_caller() {
    with_deadline(|| {
        let (_mock, c) = start(Box::new(|req| match req {
            Request::Connect { .. } => Action::Reply(Reply::status(Status::ERR_PROC_TERM_WO_SYNC)),
            other => default_action(other),
        }));
        let e = c.connect(&[wild("job-A"), wild("job-B")], &[]).unwrap_err();
        assert_eq!(e.status(), Status::ERR_PROC_TERM_WO_SYNC);
        let (tx, rx) = crossbeam_channel::bounded(1);
        c.connect_nb(&[wild("job-B")], &[], move |r| tx.send(r).unwrap());
        let e = rx.recv_timeout(DEADLINE).unwrap().unwrap_err();
        assert_eq!(e.status(), Status::ERR_PROC_TERM_WO_SYNC);
    });
}

#[test]
fn connect_nb_ingests_before_completing_and_disconnect_is_a_status() {
    with_deadline(|| {
        let (mock, c) = start(connect_script());
        let procs = [peer("job-A", 0), peer("job-B", 1)];
        let (tx, rx) = crossbeam_channel::bounded(1);
        let probe = c.clone();
        c.connect_nb(&procs, &[], move |r| {
            // The data is in the store by the time the completion runs.
            let v = probe.get(&peer("job-B", 1), "port", &[]);
            tx.send((r, v)).unwrap();
        });
        let (r, v) = rx.recv_timeout(DEADLINE).unwrap();
        r.unwrap();
        assert_eq!(v.unwrap(), s("tcp://b1"));
        assert!(matches!(mock.next_request(), Request::Connect { .. }));

        c.disconnect(&procs, &[]).unwrap();
        assert_eq!(
            mock.next_request(),
            Request::Disconnect {
                procs: procs.to_vec(),
                info: vec![],
            }
        );
        let (tx, rx) = crossbeam_channel::bounded(1);
        c.disconnect_nb(&procs, &[], move |r| tx.send(r).unwrap());
        rx.recv_timeout(DEADLINE).unwrap().unwrap();
        // What the connect brought stays readable.
        assert_eq!(
            c.get(&peer("job-B", 1), "port", &[]).unwrap(),
            s("tcp://b1")
        );
    });
}

#[test]
fn disconnect_failure_status_reaches_the_caller() {
    with_deadline(|| {
        let (_mock, c) = start(Box::new(|req| match req {
            Request::Disconnect { .. } => Action::Reply(Reply::status(Status::ERR_BAD_PARAM)),
            other => default_action(other),
        }));
        let e = c.disconnect(&[wild("job-Z")], &[]).unwrap_err();
        assert!(matches!(e, Error::Server { .. }), "{e:?}");
        assert_eq!(e.status(), Status::ERR_BAD_PARAM);
    });
}

#[test]
fn connect_and_disconnect_without_processes_send_nothing() {
    with_deadline(|| {
        let (mock, c) = start(Box::new(default_action));
        for e in [
            c.connect(&[], &[]).unwrap_err(),
            c.disconnect(&[], &[]).unwrap_err(),
        ] {
            assert!(matches!(e, Error::BadParam(_)), "{e:?}");
        }
        let (tx, rx) = crossbeam_channel::unbounded();
        let t = tx.clone();
        c.connect_nb(&[], &[], move |r| t.send(r).unwrap());
        c.disconnect_nb(&[], &[], move |r| tx.send(r).unwrap());
        for _ in 0..2 {
            let e = rx.try_recv().unwrap().unwrap_err();
            assert_eq!(e.status(), Status::ERR_BAD_PARAM);
        }
        assert_nothing_sent(&mock, &c);
    });
}

#[test]
fn lost_connection_fails_pending_spawn_and_connect_promptly() {
    with_deadline(|| {
        let (mock, c) = start(Box::new(|req| match req {
            Request::Spawn { .. } => Action::Ignore,
            Request::Connect { .. } => Action::Close,
            other => default_action(other),
        }));
        let (tx, rx) = crossbeam_channel::bounded(1);
        c.spawn_nb(&[], &[app("w", 1)], move |r| tx.send(r).unwrap());
        assert!(matches!(mock.next_request(), Request::Spawn { .. }));
        let e = c.connect(&[wild("job-A"), wild("job-B")], &[]).unwrap_err();
        assert!(matches!(e, Error::LostConnection), "{e:?}");
        let e = rx.recv_timeout(DEADLINE).unwrap().unwrap_err();
        assert!(matches!(e, Error::LostConnection), "{e:?}");
        // Later calls fail at once.
        let e = c.spawn(&[], &[app("w", 1)]).unwrap_err();
        assert_eq!(e.status(), Status::ERR_LOST_CONNECTION);
    });
}

// ---- resolve_peers / resolve_nodes ---------------------------------------------------------

#[test]
fn peers_and_nodes_of_the_own_job_are_local() {
    with_deadline(|| {
        let (mock, c) = start(Box::new(default_action));
        let a = ns("job-A");
        // Rank 0 runs on n0 (node 0), with rank 2; ranks 1 and 3 on n1.
        assert_eq!(
            c.resolve_peers(None, &a).unwrap(),
            [peer("job-A", 0), peer("job-A", 2)]
        );
        assert_eq!(
            c.resolve_peers(Some("n1"), &a).unwrap(),
            [peer("job-A", 1), peer("job-A", 3)]
        );
        assert_eq!(c.resolve_peers(Some("elsewhere"), &a).unwrap(), []);
        assert_eq!(c.resolve_nodes(&a).unwrap(), ["n0", "n1"]);
        assert_eq!(mock.count(), 0);
    });
}

/// A job on three nodes described the way pmix-server registers one: node realms with
/// hostnames and LOCAL_PEERS, ranks with hostnames; a node listed without ranks.
fn mapped_job(nspace: &str) -> JobData {
    let node = |id: u32, host: &str, peers: &str| pmix_wire::Realm {
        id,
        info: vec![
            info(attr::NODEID, id),
            info(attr::HOSTNAME, host),
            info(attr::LOCAL_PEERS, peers),
        ],
    };
    JobData {
        nspace: ns(nspace),
        session: vec![],
        job: vec![info(attr::JOB_SIZE, 5u32), info(attr::LOCAL_PEERS, "0-1")],
        apps: vec![],
        nodes: vec![
            node(0, "h0", "0-1"),
            node(1, "h1", ""),
            node(2, "h2", "2,3, 4"),
        ],
        procs: (0..5u32)
            .map(|r| pmix_wire::ProcRealm {
                rank: Rank(r),
                info: vec![info(attr::HOSTNAME, if r < 2 { "h0" } else { "h2" })],
            })
            .collect(),
    }
}

#[test]
fn an_unknown_namespace_is_asked_for_once_then_answered_locally() {
    with_deadline(|| {
        let (mock, c) = start(Box::new(|req| match req {
            Request::Get { proc, .. } if proc.nspace.as_str() == "job-C" => Action::Reply(Reply {
                status: Status::SUCCESS,
                body: ReplyBody::Get {
                    data: vec![],
                    jobs: vec![image(&mapped_job("job-C"))],
                },
            }),
            other => default_action(other),
        }));
        let cns = ns("job-C");
        assert_eq!(
            c.resolve_peers(Some("h2"), &cns).unwrap(),
            [peer("job-C", 2), peer("job-C", 3), peer("job-C", 4)]
        );
        assert_eq!(
            mock.next_request(),
            Request::Get {
                proc: wild("job-C"),
                key: None,
                info: vec![],
            }
        );
        // The node with no ranks is not among the job's nodes.
        assert_eq!(c.resolve_nodes(&cns).unwrap(), ["h0", "h2"]);
        assert_eq!(c.resolve_peers(Some("h1"), &cns).unwrap(), []);
        // This process runs on n0, where job-C has nobody.
        assert_eq!(c.resolve_peers(None, &cns).unwrap(), []);
        assert_eq!(mock.count(), 1);
        // A namespace the server does not know either.
        let e = c.resolve_nodes(&ns("job-nope")).unwrap_err();
        assert_eq!(e.status(), Status::ERR_NOT_FOUND);
        let e = c.resolve_peers(None, &ns("job-nope")).unwrap_err();
        assert_eq!(e.status(), Status::ERR_NOT_FOUND);
    });
}

#[test]
fn a_job_without_node_information_runs_on_this_node() {
    with_deadline(|| {
        let (_mock, c) = start(Box::new(|req| match req {
            Request::Get { proc, .. } if proc.nspace.as_str() == "job-D" => Action::Reply(Reply {
                status: Status::SUCCESS,
                body: ReplyBody::Get {
                    data: vec![],
                    jobs: vec![image(&JobData {
                        nspace: ns("job-D"),
                        session: vec![],
                        job: vec![info(attr::JOB_SIZE, 6u32), info(attr::LOCAL_PEERS, "0-2,5")],
                        apps: vec![],
                        nodes: vec![],
                        procs: vec![],
                    })],
                },
            }),
            other => default_action(other),
        }));
        let d = ns("job-D");
        let ranks = |v: Vec<Proc>| v.into_iter().map(|p| p.rank.0).collect::<Vec<_>>();
        assert_eq!(ranks(c.resolve_peers(None, &d).unwrap()), [0, 1, 2, 5]);
        assert_eq!(
            ranks(c.resolve_peers(Some("n0"), &d).unwrap()),
            [0, 1, 2, 5]
        );
        assert_eq!(
            ranks(c.resolve_peers(Some("n1"), &d).unwrap()),
            Vec::<u32>::new()
        );
        assert_eq!(c.resolve_nodes(&d).unwrap(), ["n0"]);
    });
}
