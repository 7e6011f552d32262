//! A singleton in this process: a rendezvous that names no server. No server, no processes;
//! the end-to-end cases (a plain process, spawning through a private server) are in
//! `pmix-tests/tests/singleton.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::mpsc;
use std::time::Duration;

use pmix_client::{Client, DataRange, Error, Info, Key, Proc, Rank, Scope, Status, Value, attr};

fn singleton() -> Client {
    Client::init_with_env(|_| None).expect("a singleton")
}

fn info(k: &str, v: impl Into<Value>) -> Info {
    Info::new(Key::new(k).unwrap(), v)
}

#[test]
fn no_server_makes_a_singleton_named_as_openpmix_names_it() {
    let c = singleton();
    let me = c.proc().clone();
    let host = nix::unistd::gethostname().unwrap().into_string().unwrap();
    assert_eq!(
        me.nspace.as_str(),
        format!("singleton.{host}.{}", std::process::id())
    );
    assert_eq!(me.rank, Rank(0));
    let wild = Proc::new(me.nspace.clone(), Rank::WILDCARD);
    for key in [
        attr::JOB_SIZE,
        attr::UNIV_SIZE,
        attr::LOCAL_SIZE,
        attr::MAX_PROCS,
    ] {
        assert_eq!(c.get(&wild, key, &[]).unwrap().as_u32(), Some(1), "{key}");
    }
    // Node-level and process-level keys, by qualifier too.
    let node = [Info::attr(attr::NODE_INFO, true)];
    assert_eq!(
        c.get(&me, attr::NODE_SIZE, &node).unwrap().as_u32(),
        Some(1)
    );
    assert_eq!(
        c.get(&me, attr::HOSTNAME, &[]).unwrap().as_str(),
        Some(host.as_str())
    );
    assert_eq!(c.get(&me, attr::LOCAL_RANK, &[]).unwrap().as_u32(), Some(0));
    c.finalize().unwrap();
}

#[test]
fn non_blocking_calls_complete_on_the_callers_thread() {
    let c = singleton();
    let me = c.proc().clone();
    c.put(Scope::GLOBAL, "k", 5u32).unwrap();
    let (tx, rx) = mpsc::channel();
    let t = tx.clone();
    c.fence_nb(&[], &[], move |r| t.send(r.map(|()| Value::Undef)).unwrap());
    let t = tx.clone();
    c.get_nb(&me, Some("k"), &[], move |r| t.send(r).unwrap());
    // Both ran before the calls returned.
    assert!(matches!(rx.try_recv(), Ok(Ok(Value::Undef))));
    assert_eq!(rx.try_recv().unwrap().unwrap(), Value::Uint32(5));
    c.finalize().unwrap();
}

#[test]
fn a_waiting_lookup_is_released_by_a_publish_or_failed_by_finalize() {
    let c = singleton();
    let (tx, rx) = mpsc::channel();
    let t = tx.clone();
    c.lookup_nb(&["a"], &[Info::attr(attr::WAIT, true)], move |r| {
        t.send(r.map(|f| f[0].value.clone())).unwrap()
    });
    assert!(
        rx.try_recv().is_err(),
        "answered before anything was published"
    );
    c.publish(&[info("a", 1u8)], &[]).unwrap();
    assert_eq!(rx.try_recv().unwrap().unwrap(), Value::Uint8(1));
    // One still waiting when the client finalizes fails rather than waiting forever.
    c.lookup_nb(&["b"], &[Info::attr(attr::WAIT, true)], move |r| {
        tx.send(r.map(|f| f[0].value.clone())).unwrap()
    });
    c.finalize().unwrap();
    let r = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(matches!(r, Err(Error::NotInitialized)), "{r:?}");
}

#[test]
fn what_needs_other_processes_is_unreachable() {
    let c = singleton();
    let me = c.proc().clone();
    let other = Proc::new(pmix_client::Nspace::new("other").unwrap(), 0);
    let unreachable = |r: Result<(), Error>| {
        assert_eq!(r.unwrap_err().status(), Status::ERR_UNREACH);
    };
    unreachable(c.fence(&[me.clone(), other.clone()], &[]));
    unreachable(c.connect(&[me.clone(), other.clone()], &[]));
    unreachable(c.disconnect(&[me.clone(), other.clone()], &[]));
    unreachable(c.get(&other, "k", &[]).map(drop));
    let kill = [Info::attr(attr::JOB_CTRL_KILL, true)];
    unreachable(c.job_control(std::slice::from_ref(&other), &kill).map(drop));
    // A rank of its own job that does not exist is a bad argument, not a missing server.
    let rank1 = Proc::new(me.nspace.clone(), 1);
    assert_eq!(
        c.fence(&[rank1], &[]).unwrap_err().status(),
        Status::ERR_BAD_PARAM
    );
    // What the process can do alone works.
    c.connect(std::slice::from_ref(&me), &[]).unwrap();
    c.notify_event(Status(-150), DataRange::NAMESPACE, &[])
        .unwrap();
    c.finalize().unwrap();
}

#[test]
fn init_again_after_finalize_gives_the_same_singleton_afresh() {
    let first = singleton();
    first.put(Scope::GLOBAL, "k", 1u8).unwrap();
    first.commit().unwrap();
    first.finalize().unwrap();
    assert_eq!(
        first.put(Scope::GLOBAL, "k", 2u8).unwrap_err().status(),
        Status::ERR_INIT
    );
    let again = singleton();
    assert_eq!(again.proc(), first.proc());
    assert_eq!(
        again.get(again.proc(), "k", &[]).unwrap_err().status(),
        Status::ERR_NOT_FOUND
    );
    again.finalize().unwrap();
}
