//! Event handlers and notifications against a scripted in-process server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::*;
use crossbeam_channel::{Receiver, Sender, unbounded};
use pmix_client::{Client, DataRange, Error, Info, Status, attr};
use pmix_wire::{Event, Reply, Request, ServerMsg};

fn start(script: Script) -> (Mock, Client) {
    let mock = Mock::start(job("job-A"), 0, script);
    let client = Client::init_with_env(mock.env()).expect("init against the mock");
    (mock, client)
}

const A: Status = Status(-1001);
const B: Status = Status(-1002);
const C: Status = Status(-1003);

fn event(code: Status) -> Event {
    Event {
        code,
        source: peer("job-A", 1),
        range: DataRange::NAMESPACE,
        info: vec![info("user.n", code.0)],
    }
}

/// A handler that reports (its name, the event's code) on `tx`.
fn reporter(
    name: &'static str,
    tx: &Sender<(&'static str, Status)>,
) -> impl Fn(&Event) + Send + Sync + 'static {
    let tx = tx.clone();
    move |ev: &Event| {
        let _ = tx.send((name, ev.code));
    }
}

fn next(rx: &Receiver<(&'static str, Status)>) -> (&'static str, Status) {
    rx.recv_timeout(DEADLINE)
        .expect("no handler ran before the deadline")
}

#[test]
fn registration_and_deregistration_tell_the_server_the_codes() {
    with_deadline(|| {
        let (mock, c) = start(Box::new(default_action));
        let directives = [info(attr::EVENT_HDLR_NAME, "mine")];
        let h = c
            .register_event_handler(&[A, B], &directives, |_| {})
            .unwrap();
        assert_eq!(
            mock.next_request(),
            Request::RegisterEvents {
                codes: vec![A, B],
                info: directives.to_vec(),
            }
        );
        let all = c.register_event_handler(&[], &[], |_| {}).unwrap();
        assert_eq!(
            mock.next_request(),
            Request::RegisterEvents {
                codes: vec![],
                info: vec![],
            }
        );
        assert_ne!(h, all);
        c.deregister_event_handler(h).unwrap();
        assert_eq!(
            mock.next_request(),
            Request::DeregisterEvents { codes: vec![A, B] }
        );
        c.deregister_event_handler(all).unwrap();
        assert_eq!(
            mock.next_request(),
            Request::DeregisterEvents { codes: vec![] }
        );
        // Gone is gone.
        let e = c.deregister_event_handler(h).unwrap_err();
        assert!(matches!(e, Error::BadParam(_)), "{e:?}");
    });
}

#[test]
fn handlers_run_where_their_registration_placed_them() {
    with_deadline(|| {
        let (mock, c) = start(Box::new(default_action));
        let (tx, rx) = unbounded();
        let name = |n: &'static str| Info::attr(attr::EVENT_HDLR_NAME, n);
        let yes = |k: &'static str| Info::attr(k, true);
        c.register_event_handler(&[A], &[name("plain")], reporter("plain", &tx))
            .unwrap();
        c.register_event_handler(&[], &[yes(attr::EVENT_HDLR_FIRST)], reporter("first", &tx))
            .unwrap();
        c.register_event_handler(&[A], &[yes(attr::EVENT_HDLR_PREPEND)], reporter("pre", &tx))
            .unwrap();
        let after = Info::attr(attr::EVENT_HDLR_AFTER, "plain");
        c.register_event_handler(&[A], &[after], reporter("after", &tx))
            .unwrap();
        c.register_event_handler(&[A], &[yes(attr::EVENT_HDLR_LAST)], reporter("last", &tx))
            .unwrap();
        // A second FIRST is refused here, without a word to the server.
        let e = c
            .register_event_handler(&[A], &[yes(attr::EVENT_HDLR_FIRST)], reporter("x", &tx))
            .unwrap_err();
        assert_eq!(e.status(), Status::ERR_EVENT_REGISTRATION);
        mock.push(&ServerMsg::Event(event(A)));
        for want in ["first", "pre", "plain", "after", "last"] {
            assert_eq!(next(&rx), (want, A));
        }
        assert!(rx.try_recv().is_err());
    });
}

#[test]
fn a_refused_registration_leaves_no_handler_behind() {
    with_deadline(|| {
        let (mock, c) = start(Box::new(|req| match req {
            Request::RegisterEvents { .. } => {
                Action::Reply(Reply::status(Status::ERR_NOT_SUPPORTED))
            }
            other => default_action(other),
        }));
        let (tx, rx) = unbounded();
        let e = c
            .register_event_handler(&[A], &[], reporter("refused", &tx))
            .unwrap_err();
        assert_eq!(e.status(), Status::ERR_NOT_SUPPORTED);
        mock.push(&ServerMsg::Event(event(A)));
        // No handler: the event waits in the backlog. A commit's reply comes after it.
        c.commit().unwrap();
        assert_eq!(c.take_events(), [event(A)]);
        assert!(rx.try_recv().is_err());
    });
}

#[test]
fn events_reach_every_matching_handler_in_order_with_no_request_outstanding() {
    with_deadline(|| {
        let (mock, c) = start(Box::new(default_action));
        let (tx, rx) = unbounded();
        c.register_event_handler(&[A], &[], reporter("a", &tx))
            .unwrap();
        c.register_event_handler(&[], &[], reporter("all", &tx))
            .unwrap();
        c.register_event_handler(&[B, A], &[], reporter("ba", &tx))
            .unwrap();
        c.register_event_handler(&[C], &[], reporter("c", &tx))
            .unwrap();
        // Nothing is outstanding: the reader thread delivers them as they come.
        // The standard's order: one code, several codes, every code.
        mock.push(&ServerMsg::Event(event(A)));
        assert_eq!(next(&rx), ("a", A));
        assert_eq!(next(&rx), ("ba", A));
        assert_eq!(next(&rx), ("all", A));
        mock.push(&ServerMsg::Event(event(B)));
        assert_eq!(next(&rx), ("ba", B));
        assert_eq!(next(&rx), ("all", B));
        // A handler sees the whole event.
        let (etx, erx) = unbounded();
        c.register_event_handler(&[C], &[], move |ev| etx.send(ev.clone()).unwrap())
            .unwrap();
        mock.push(&ServerMsg::Event(event(C)));
        assert_eq!(next(&rx), ("c", C));
        assert_eq!(next(&rx), ("all", C));
        assert_eq!(erx.recv_timeout(DEADLINE).unwrap(), event(C));
        assert!(rx.try_recv().is_err());
        // Every event had a taker.
        assert!(c.take_events().is_empty());
    });
}

#[test]
fn deregistered_handlers_are_not_called_again() {
    with_deadline(|| {
        let (mock, c) = start(Box::new(default_action));
        let (tx, rx) = unbounded();
        let a = c
            .register_event_handler(&[A], &[], reporter("a", &tx))
            .unwrap();
        c.register_event_handler(&[B], &[], reporter("b", &tx))
            .unwrap();
        mock.push(&ServerMsg::Event(event(A)));
        assert_eq!(next(&rx), ("a", A));
        c.deregister_event_handler(a).unwrap();
        // The server still sends an A (a registration of another process's, a race): it
        // finds no handler here. B, after it on the stream, proves A was dispatched.
        mock.push(&ServerMsg::Event(event(A)));
        mock.push(&ServerMsg::Event(event(B)));
        assert_eq!(next(&rx), ("b", B));
        assert!(rx.try_recv().is_err());
        assert_eq!(c.take_events(), [event(A)]);
    });
}

#[test]
fn a_panicking_handler_does_not_stop_the_others_or_the_client() {
    with_deadline(|| {
        let (mock, c) = start(Box::new(default_action));
        let (tx, rx) = unbounded();
        c.register_event_handler(&[A], &[], |_| panic!("handler bug"))
            .unwrap();
        c.register_event_handler(&[A], &[], reporter("after", &tx))
            .unwrap();
        mock.push(&ServerMsg::Event(event(A)));
        assert_eq!(next(&rx), ("after", A));
        mock.push(&ServerMsg::Event(event(A)));
        assert_eq!(next(&rx), ("after", A));
        c.commit().unwrap();
    });
}

#[test]
fn handlers_may_deregister_themselves_but_not_block() {
    with_deadline(|| {
        let (mock, c) = start(Box::new(default_action));
        let (tx, rx) = unbounded();
        let slot: Arc<Mutex<Option<pmix_client::HandlerId>>> = Arc::default();
        let (me, handle) = (Arc::clone(&slot), c.clone());
        let id = c
            .register_event_handler(&[A], &[], move |_| {
                // A one-shot handler; blocking calls are refused here.
                let blocked = handle.commit().unwrap_err();
                let id = me.lock().unwrap().take();
                let gone = id.map(|id| handle.deregister_event_handler(id));
                tx.send((blocked.status(), gone.map(|r| r.is_ok())))
                    .unwrap();
            })
            .unwrap();
        *slot.lock().unwrap() = Some(id);
        assert!(matches!(
            mock.next_request(),
            Request::RegisterEvents { .. }
        ));
        mock.push(&ServerMsg::Event(event(A)));
        let (blocked, gone) = rx.recv_timeout(DEADLINE).unwrap();
        assert_eq!(blocked, Status::ERR_WOULD_BLOCK);
        assert_eq!(gone, Some(true));
        assert_eq!(
            mock.next_request(),
            Request::DeregisterEvents { codes: vec![A] }
        );
        mock.push(&ServerMsg::Event(event(A)));
        c.commit().unwrap();
        assert_eq!(c.take_events(), [event(A)]);
        assert!(rx.try_recv().is_err());
    });
}

#[test]
fn register_nb_completes_with_the_id() {
    with_deadline(|| {
        let (mock, c) = start(Box::new(default_action));
        let (tx, rx) = unbounded();
        let (dtx, drx) = unbounded();
        c.register_event_handler_nb(&[B], &[], reporter("nb", &tx), move |r| {
            dtx.send(r).unwrap();
        });
        let id = drx.recv_timeout(DEADLINE).unwrap().unwrap();
        mock.push(&ServerMsg::Event(event(B)));
        assert_eq!(next(&rx), ("nb", B));
        c.deregister_event_handler(id).unwrap();
    });
}

#[test]
fn notify_sends_the_event_and_maps_the_status() {
    with_deadline(|| {
        let seen = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&seen);
        let (mock, c) = start(Box::new(move |req| match req {
            Request::Notify { event } if event.range == DataRange::RM => {
                Action::Reply(Reply::status(Status::ERR_NOT_SUPPORTED))
            }
            Request::Notify { .. } => {
                count.fetch_add(1, Ordering::SeqCst);
                default_action(req)
            }
            other => default_action(other),
        }));
        let custom = [info(
            attr::EVENT_CUSTOM_RANGE,
            pmix_client::Value::Proc(peer("job-B", 2)),
        )];
        c.notify_event(A, DataRange::CUSTOM, &custom).unwrap();
        assert_eq!(
            mock.next_request(),
            Request::Notify {
                event: Event {
                    code: A,
                    source: c.proc().clone(),
                    range: DataRange::CUSTOM,
                    info: custom.to_vec(),
                },
            }
        );
        let e = c.notify_event(B, DataRange::RM, &[]).unwrap_err();
        assert_eq!(e.status(), Status::ERR_NOT_SUPPORTED);
        assert!(matches!(mock.next_request(), Request::Notify { .. }));
        let (tx, rx) = unbounded();
        c.notify_event_nb(C, DataRange::NAMESPACE, &[], move |r| tx.send(r).unwrap());
        rx.recv_timeout(DEADLINE).unwrap().unwrap();
        assert_eq!(seen.load(Ordering::SeqCst), 2);
    });
}

#[test]
fn proc_local_events_run_the_own_handlers_and_send_nothing() {
    with_deadline(|| {
        let (mock, c) = start(Box::new(default_action));
        let (tx, rx) = unbounded();
        c.register_event_handler(&[A], &[], reporter("own", &tx))
            .unwrap();
        assert!(matches!(
            mock.next_request(),
            Request::RegisterEvents { .. }
        ));
        c.notify_event(A, DataRange::PROC_LOCAL, &[]).unwrap();
        // Ran on this thread, before notify returned.
        assert_eq!(rx.try_recv().unwrap(), ("own", A));
        let (dtx, drx) = unbounded();
        c.notify_event_nb(A, DataRange::PROC_LOCAL, &[], move |r| dtx.send(r).unwrap());
        assert_eq!(rx.try_recv().unwrap(), ("own", A));
        drx.try_recv().unwrap().unwrap();
        // Nothing went to the server.
        c.commit().unwrap();
        assert_eq!(mock.next_request(), Request::Commit { kvs: vec![] });
    });
}

#[test]
fn a_lost_connection_is_an_event_and_fails_what_is_pending() {
    with_deadline(|| {
        let (mock, c) = start(Box::new(|req| match req {
            Request::Notify { .. } => Action::Ignore,
            other => default_action(other),
        }));
        let (tx, rx) = unbounded();
        c.register_event_handler(&[Status::ERR_LOST_CONNECTION], &[], reporter("lost", &tx))
            .unwrap();
        let (ntx, nrx) = unbounded();
        c.notify_event_nb(A, DataRange::GLOBAL, &[], move |r| ntx.send(r).unwrap());
        assert!(matches!(
            mock.next_request(),
            Request::RegisterEvents { .. }
        ));
        assert!(matches!(mock.next_request(), Request::Notify { .. }));
        mock.hang_up();
        assert_eq!(next(&rx), ("lost", Status::ERR_LOST_CONNECTION));
        let e = nrx.recv_timeout(DEADLINE).unwrap().unwrap_err();
        assert!(matches!(e, Error::LostConnection), "{e:?}");
        // Later registrations fail at once; deregistration has nothing left to undo.
        let e = c.register_event_handler(&[A], &[], |_| {}).unwrap_err();
        assert_eq!(e.status(), Status::ERR_LOST_CONNECTION);
        // Finalizing is not a lost connection: the handler hears of nothing more.
        let _ = c.finalize();
        assert!(rx.try_recv().is_err());
    });
}

#[test]
fn finalize_drops_the_handlers() {
    with_deadline(|| {
        let (_mock, c) = start(Box::new(default_action));
        let (tx, rx) = unbounded();
        // A handler owning a handle of its own client: finalize must break that cycle.
        let held = c.clone();
        let guard = Arc::new(());
        let watch = Arc::downgrade(&guard);
        c.register_event_handler(&[], &[], move |ev| {
            let _ = (&held, &guard);
            let _ = tx.send(("any", ev.code));
        })
        .unwrap();
        c.finalize().unwrap();
        assert!(watch.upgrade().is_none(), "the handler outlived finalize");
        assert!(rx.try_recv().is_err());
    });
}
