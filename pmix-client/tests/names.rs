//! Publish, lookup and unpublish against a scripted in-process server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use pmix_client::types::Persistence;
use pmix_client::{Client, DataRange, Error, Pdata, Status, Value, attr};
use pmix_wire::{Published, Reply, ReplyBody, Request};

fn start(script: Script) -> (Mock, Client) {
    let mock = Mock::start(job("job-A"), 0, script);
    let client = Client::init_with_env(mock.env()).expect("init against the mock");
    (mock, client)
}

fn s(v: &str) -> Value {
    Value::String(v.to_owned())
}

fn published(k: &str, v: &str, rank: u32) -> Published {
    Published {
        proc: peer("job-B", rank),
        key: key(k),
        value: s(v),
    }
}

/// Answers every lookup with `found` as is, whatever was asked.
fn lookup_answers(found: Vec<Published>) -> Script {
    Box::new(move |req| match req {
        Request::Lookup { .. } => Action::Reply(Reply {
            status: Status::SUCCESS,
            body: ReplyBody::Lookup {
                found: found.clone(),
            },
        }),
        other => default_action(other),
    })
}

/// Answers every request of the kind `pick` selects with `status`.
fn status_for(pick: fn(&Request) -> bool, status: Status) -> Script {
    Box::new(move |req| {
        if pick(req) {
            Action::Reply(Reply::status(status))
        } else {
            default_action(req)
        }
    })
}

/// Proves that nothing was sent before: the next request the mock sees is this commit.
fn assert_nothing_sent(mock: &Mock, c: &Client) {
    c.commit().unwrap();
    assert_eq!(mock.next_request(), Request::Commit { kvs: vec![] });
}

// ---- publish -------------------------------------------------------------------------------

#[test]
fn publish_sends_the_data_and_every_directive() {
    with_deadline(|| {
        let (mock, c) = start(Box::new(default_action));
        let data = [info("svc.port", "tcp://10.0.0.1:4000"), info("svc.n", 3u32)];
        let directives = [
            info(attr::RANGE, DataRange::GLOBAL),
            info(attr::PERSISTENCE, Persistence::FIRST_READ),
            info(attr::TIMEOUT, 5i32),
        ];
        c.publish(&data, &directives).unwrap();
        assert_eq!(
            mock.next_request(),
            Request::Publish {
                data: data.to_vec(),
                info: directives.to_vec(),
            }
        );
    });
}

#[test]
fn publish_of_a_taken_key_is_a_duplicate_key_error() {
    with_deadline(|| {
        let (_mock, c) = start(status_for(
            |r| matches!(r, Request::Publish { .. }),
            Status::ERR_DUPLICATE_KEY,
        ));
        let e = c.publish(&[info("svc", "a")], &[]).unwrap_err();
        assert!(
            matches!(&e, Error::DuplicateKey(m) if m.contains("\"svc\"")),
            "{e:?}"
        );
        assert_eq!(e.status(), Status::ERR_DUPLICATE_KEY);
        let e = c
            .publish(&[info("svc", "a"), info("other", "b")], &[])
            .unwrap_err();
        assert!(
            matches!(&e, Error::DuplicateKey(m) if m.contains("one of \"svc\", \"other\"")),
            "{e:?}"
        );
    });
}

#[test]
fn publish_surfaces_other_failures_as_the_server_status() {
    with_deadline(|| {
        let (_mock, c) = start(status_for(
            |r| matches!(r, Request::Publish { .. }),
            Status::ERR_NOT_SUPPORTED,
        ));
        let e = c.publish(&[info("svc", "a")], &[]).unwrap_err();
        assert!(
            matches!(e, Error::Server { status } if status == Status::ERR_NOT_SUPPORTED),
            "{e:?}"
        );
    });
}

// ---- lookup --------------------------------------------------------------------------------

#[test]
fn lookup_sends_keys_and_directives_and_maps_results_in_the_order_asked() {
    with_deadline(|| {
        // Out of order, with an entry for a key nobody asked about.
        let (mock, c) = start(lookup_answers(vec![
            published("c", "vc", 2),
            published("stray", "x", 9),
            published("a", "va", 1),
        ]));
        let directives = [
            info(attr::RANGE, DataRange::NAMESPACE),
            info(attr::WAIT, 2i32),
            info(attr::TIMEOUT, 10i32),
        ];
        let got = c.lookup(&["a", "b", "c"], &directives).unwrap();
        assert_eq!(
            mock.next_request(),
            Request::Lookup {
                keys: vec![key("a"), key("b"), key("c")],
                info: directives.to_vec(),
            }
        );
        assert_eq!(
            got,
            vec![
                Pdata {
                    key: key("a"),
                    value: s("va"),
                    proc: Some(peer("job-B", 1)),
                },
                Pdata {
                    key: key("b"),
                    value: Value::Undef,
                    proc: None,
                },
                Pdata {
                    key: key("c"),
                    value: s("vc"),
                    proc: Some(peer("job-B", 2)),
                },
            ]
        );
        let found: Vec<bool> = got.iter().map(Pdata::is_found).collect();
        assert_eq!(found, [true, false, true]);
    });
}

#[test]
fn lookup_finding_nothing_is_not_published() {
    with_deadline(|| {
        let (_mock, c) = start(status_for(
            |r| matches!(r, Request::Lookup { .. }),
            Status::ERR_NOT_FOUND,
        ));
        let e = c.lookup(&["a", "b"], &[]).unwrap_err();
        assert!(
            matches!(&e, Error::NotPublished(m) if m.contains("\"a\", \"b\"")),
            "{e:?}"
        );
        assert_eq!(e.status(), Status::ERR_NOT_FOUND);

        // A success that names only keys not asked for has found nothing either.
        let (_mock, c) = start(lookup_answers(vec![published("stray", "x", 0)]));
        let e = c.lookup(&["a"], &[]).unwrap_err();
        assert!(matches!(e, Error::NotPublished(_)), "{e:?}");
    });
}

#[test]
fn lookup_timeout_status_reaches_the_caller() {
    with_deadline(|| {
        let (_mock, c) = start(status_for(
            |r| matches!(r, Request::Lookup { .. }),
            Status::ERR_TIMEOUT,
        ));
        let e = c
            .lookup(&["a"], &[info(attr::WAIT, true), info(attr::TIMEOUT, 1i32)])
            .unwrap_err();
        assert!(
            matches!(e, Error::Server { status } if status == Status::ERR_TIMEOUT),
            "{e:?}"
        );
    });
}

#[test]
fn lookup_gives_up_on_its_own_after_timeout_when_the_server_is_silent() {
    with_deadline(|| {
        let (_mock, c) = start(Box::new(|req| match req {
            Request::Lookup { .. } => Action::Ignore,
            other => default_action(other),
        }));
        let e = c
            .lookup(&["a"], &[info(attr::WAIT, true), info(attr::TIMEOUT, 1i32)])
            .unwrap_err();
        assert!(matches!(e, Error::Timeout), "{e:?}");
        // The connection is still good.
        c.commit().unwrap();
    });
}

// ---- unpublish -----------------------------------------------------------------------------

#[test]
fn unpublish_sends_the_keys_or_none_for_all() {
    with_deadline(|| {
        let (mock, c) = start(Box::new(default_action));
        let directives = [info(attr::RANGE, DataRange::SESSION)];
        c.unpublish(&["a", "b"], &directives).unwrap();
        assert_eq!(
            mock.next_request(),
            Request::Unpublish {
                keys: vec![key("a"), key("b")],
                info: directives.to_vec(),
            }
        );
        c.unpublish(&[], &[]).unwrap();
        assert_eq!(
            mock.next_request(),
            Request::Unpublish {
                keys: vec![],
                info: vec![],
            }
        );
    });
}

#[test]
fn unpublish_failures_reach_the_caller() {
    with_deadline(|| {
        let (_mock, c) = start(status_for(
            |r| matches!(r, Request::Unpublish { .. }),
            Status::ERR_NOT_FOUND,
        ));
        let e = c.unpublish(&["a"], &[]).unwrap_err();
        assert!(
            matches!(&e, Error::NotPublished(m) if m.contains("\"a\"")),
            "{e:?}"
        );
        assert_eq!(e.status(), Status::ERR_NOT_FOUND);
        let e = c.unpublish(&[], &[]).unwrap_err();
        assert!(matches!(e, Error::NotPublished(_)), "{e:?}");

        let (_mock, c) = start(status_for(
            |r| matches!(r, Request::Unpublish { .. }),
            Status::ERR_NO_PERMISSIONS,
        ));
        let e = c.unpublish(&["theirs"], &[]).unwrap_err();
        assert_eq!(e.status(), Status::ERR_NO_PERMISSIONS);
    });
}

// ---- non-blocking --------------------------------------------------------------------------

#[test]
fn nb_forms_complete_through_their_callbacks() {
    with_deadline(|| {
        let (mock, c) = start(lookup_answers(vec![published("svc", "port", 3)]));
        let (tx, rx) = crossbeam_channel::unbounded();

        let t = tx.clone();
        c.publish_nb(&[info("svc", "port")], &[], move |r| {
            t.send(r.map(|()| Vec::new())).unwrap();
        });
        assert_eq!(rx.recv_timeout(DEADLINE).unwrap().unwrap(), vec![]);
        assert!(matches!(mock.next_request(), Request::Publish { .. }));

        let t = tx.clone();
        c.lookup_nb(&["svc", "nope"], &[], move |r| t.send(r).unwrap());
        let got = rx.recv_timeout(DEADLINE).unwrap().unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].value, s("port"));
        assert_eq!(got[0].proc, Some(peer("job-B", 3)));
        assert!(!got[1].is_found());
        assert!(matches!(mock.next_request(), Request::Lookup { .. }));

        c.unpublish_nb(&["svc"], &[], move |r| {
            tx.send(r.map(|()| Vec::new())).unwrap();
        });
        rx.recv_timeout(DEADLINE).unwrap().unwrap();
        assert!(matches!(mock.next_request(), Request::Unpublish { .. }));
    });
}

#[test]
fn nb_failures_complete_through_their_callbacks() {
    with_deadline(|| {
        let (_mock, c) = start(Box::new(|req| match req {
            Request::Publish { .. } => Action::Reply(Reply::status(Status::ERR_DUPLICATE_KEY)),
            Request::Lookup { .. } | Request::Unpublish { .. } => {
                Action::Reply(Reply::status(Status::ERR_NOT_FOUND))
            }
            other => default_action(other),
        }));
        let (tx, rx) = crossbeam_channel::unbounded();
        let t = tx.clone();
        c.publish_nb(&[info("svc", "port")], &[], move |r| {
            t.send(r.unwrap_err().status()).unwrap();
        });
        let t = tx.clone();
        c.lookup_nb(&["svc"], &[], move |r| {
            t.send(r.unwrap_err().status()).unwrap();
        });
        c.unpublish_nb(&["svc"], &[], move |r| {
            tx.send(r.unwrap_err().status()).unwrap();
        });
        let mut got: Vec<Status> = (0..3).map(|_| rx.recv_timeout(DEADLINE).unwrap()).collect();
        got.sort_by_key(|s| s.0);
        let mut want = vec![
            Status::ERR_DUPLICATE_KEY,
            Status::ERR_NOT_FOUND,
            Status::ERR_NOT_FOUND,
        ];
        want.sort_by_key(|s| s.0);
        assert_eq!(got, want);
    });
}

#[test]
fn blocking_forms_inside_a_completion_are_refused() {
    with_deadline(|| {
        let (_mock, c) = start(Box::new(default_action));
        let (tx, rx) = crossbeam_channel::bounded(1);
        let inner = c.clone();
        c.publish_nb(&[info("svc", "port")], &[], move |r| {
            assert!(r.is_ok());
            tx.send((
                inner.publish(&[info("x", 1u32)], &[]),
                inner.lookup(&["svc"], &[]),
                inner.unpublish(&[], &[]),
            ))
            .unwrap();
        });
        let (p, l, u) = rx.recv_timeout(DEADLINE).unwrap();
        assert!(matches!(p, Err(Error::WouldDeadlock)), "{p:?}");
        assert!(matches!(l, Err(Error::WouldDeadlock)), "{l:?}");
        assert!(matches!(u, Err(Error::WouldDeadlock)), "{u:?}");
    });
}

// ---- connection loss -----------------------------------------------------------------------

#[test]
fn a_waiting_lookup_fails_promptly_when_the_connection_is_lost() {
    with_deadline(|| {
        let (mock, c) = start(Box::new(|req| match req {
            // WAIT with no TIMEOUT: the server holds it until the key appears.
            Request::Lookup { .. } => Action::Ignore,
            Request::Commit { .. } => Action::Close,
            other => default_action(other),
        }));
        let (tx, rx) = crossbeam_channel::bounded(1);
        let waiter = c.clone();
        std::thread::spawn(move || {
            let _ = tx.send(waiter.lookup(&["late"], &[info(attr::WAIT, true)]));
        });
        let (nb_tx, nb_rx) = crossbeam_channel::bounded(1);
        c.lookup_nb(&["late2"], &[info(attr::WAIT, true)], move |r| {
            let _ = nb_tx.send(r);
        });
        // Both are outstanding at the server before it goes away.
        for _ in 0..2 {
            assert!(matches!(mock.next_request(), Request::Lookup { .. }));
        }
        assert!(c.commit().is_err());
        for r in [
            rx.recv_timeout(DEADLINE).unwrap(),
            nb_rx.recv_timeout(DEADLINE).unwrap(),
        ] {
            let e = r.unwrap_err();
            assert!(matches!(e, Error::LostConnection), "{e:?}");
        }
        // Later calls fail at once, blocking or not.
        let e = c.publish(&[info("svc", "p")], &[]).unwrap_err();
        assert!(matches!(e, Error::LostConnection), "{e:?}");
        let e = c.unpublish(&[], &[]).unwrap_err();
        assert!(matches!(e, Error::LostConnection), "{e:?}");
        let (tx, rx) = crossbeam_channel::bounded(1);
        c.lookup_nb(&["x"], &[], move |r| tx.send(r).unwrap());
        assert!(matches!(rx.try_recv(), Ok(Err(Error::LostConnection))));
    });
}

// ---- validation on the caller's side -------------------------------------------------------

#[test]
fn bad_arguments_are_refused_without_a_message() {
    with_deadline(|| {
        let (mock, c) = start(Box::new(default_action));
        let long = "k".repeat(512);
        let bad_keys: [&str; 3] = ["", &long, "nul\0inside"];

        for k in bad_keys {
            let e = c.lookup(&["fine", k], &[]).unwrap_err();
            assert!(
                matches!(&e, Error::BadParam(m) if m.contains("key 1")),
                "{e:?}"
            );
            assert_eq!(e.status(), Status::ERR_BAD_PARAM);
            let e = c.unpublish(&[k], &[]).unwrap_err();
            assert!(matches!(e, Error::BadParam(_)), "{e:?}");
        }
        let e = c.lookup(&[], &[]).unwrap_err();
        assert!(matches!(e, Error::BadParam(_)), "{e:?}");
        let e = c.publish(&[], &[]).unwrap_err();
        assert!(matches!(e, Error::BadParam(_)), "{e:?}");
        let e = c
            .publish(&[info("a", 1u32), info("b", 2u32), info("a", 3u32)], &[])
            .unwrap_err();
        assert!(
            matches!(&e, Error::DuplicateKey(m) if m.contains("\"a\" appears twice")),
            "{e:?}"
        );
        assert_eq!(e.status(), Status::ERR_DUPLICATE_KEY);

        // The non-blocking forms complete at once, on this thread.
        let (tx, rx) = crossbeam_channel::unbounded::<Status>();
        let t = tx.clone();
        c.publish_nb(&[], &[], move |r| t.send(r.unwrap_err().status()).unwrap());
        let t = tx.clone();
        c.lookup_nb(&[], &[], move |r| t.send(r.unwrap_err().status()).unwrap());
        c.unpublish_nb(&[""], &[], move |r| {
            tx.send(r.unwrap_err().status()).unwrap();
        });
        let got: Vec<Status> = rx.try_iter().collect();
        assert_eq!(got, [Status::ERR_BAD_PARAM; 3]);

        assert_nothing_sent(&mock, &c);
    });
}

#[test]
fn calls_after_finalize_are_not_initialized() {
    with_deadline(|| {
        let (mock, c) = start(Box::new(default_action));
        c.finalize().unwrap();
        assert_eq!(mock.next_request(), Request::Finalize { info: vec![] });
        let e = c.publish(&[info("a", 1u32)], &[]).unwrap_err();
        assert!(matches!(e, Error::NotInitialized), "{e:?}");
        let e = c.lookup(&["a"], &[]).unwrap_err();
        assert!(matches!(e, Error::NotInitialized), "{e:?}");
        let (tx, rx) = crossbeam_channel::bounded(1);
        c.unpublish_nb(&[], &[], move |r| tx.send(r).unwrap());
        assert!(matches!(rx.try_recv(), Ok(Err(Error::NotInitialized))));
        assert_eq!(mock.count(), 1);
    });
}

#[test]
fn published_info_round_trips_through_lookup_unchanged() {
    // Values of any type come back as the server sent them, with their publisher.
    with_deadline(|| {
        let value = Value::Uint64(u64::MAX);
        let (_mock, c) = start(lookup_answers(vec![Published {
            proc: peer("job-A", 0),
            key: key("big"),
            value: value.clone(),
        }]));
        let got = c.lookup(&["big"], &[]).unwrap();
        assert_eq!(got[0].value, value);
        assert_eq!(got[0].proc.as_ref(), Some(c.proc()));
    });
}
