//! The name-service rules, one by one, in virtual time.

use std::time::{Duration, Instant};

use pmix_types::{
    DataArray, DataRange, DataType, Info, Key, Nspace, Persistence, Proc, Rank, Status, Value, attr,
};

use super::{Caller, LookupOutcome, NameStore};

const UID: u32 = 1000;

fn caller(session: u64, ns: &str, rank: u32) -> Caller {
    Caller {
        proc: Proc::new(Nspace::new(ns).unwrap(), rank),
        uid: UID,
        gid: 100,
        session,
    }
}

fn key(s: &str) -> Key {
    Key::new(s).unwrap()
}

fn data(pairs: &[(&str, &str)]) -> Vec<Info> {
    pairs.iter().map(|(k, v)| Info::new(key(k), *v)).collect()
}

fn range(r: DataRange) -> Info {
    Info::attr(attr::RANGE, r)
}

fn persist(p: Persistence) -> Info {
    Info::attr(attr::PERSISTENCE, p)
}

/// Two sessions on two nodes: 1 (node "a": namespaces "a1", "a2") and 2 (node "b": "b1").
fn store() -> NameStore<u32> {
    let mut s = NameStore::default();
    s.open_session(1, "a");
    s.open_session(2, "b");
    for (sess, ns) in [(1, "a1"), (1, "a2"), (2, "b1")] {
        s.add_nspace(sess, &Nspace::new(ns).unwrap()).unwrap();
    }
    s
}

/// A namespace is its first claimer's: another session's claim is refused and changes
/// nothing; once the owner says it ended, it can be claimed again.
#[test]
fn a_namespace_cannot_be_claimed_by_another_session() {
    let mut s = store();
    s.open_session(3, "c");
    let a1 = Nspace::new("a1").unwrap();
    assert_eq!(s.add_nspace(3, &a1), Err(Status::ERR_EXISTS));
    assert_eq!(s.session_of(&a1), Some(1));
    assert_eq!(s.add_nspace(1, &a1), Ok(()));
    s.end_nspace(1, &a1);
    assert_eq!(s.add_nspace(3, &a1), Ok(()));
    assert_eq!(s.session_of(&a1), Some(3));
}

fn now() -> Instant {
    Instant::now()
}

/// Looks `keys` up without waiting; the values found, by key.
fn look(
    s: &mut NameStore<u32>,
    c: &Caller,
    keys: &[&str],
    info: &[Info],
) -> Result<Vec<(String, String)>, Status> {
    let keys = keys.iter().map(|k| key(k)).collect();
    match s.lookup(c, keys, info, 0, now()) {
        LookupOutcome::Done(r) => r.map(|found| {
            found
                .into_iter()
                .map(|p| {
                    (
                        p.key.as_str().to_owned(),
                        p.value.as_str().unwrap_or("?").to_owned(),
                    )
                })
                .collect()
        }),
        LookupOutcome::Waiting => panic!("a lookup without WAIT was held"),
    }
}

fn found(pairs: &[(&str, &str)]) -> Result<Vec<(String, String)>, Status> {
    Ok(pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect())
}

#[test]
fn publish_then_lookup_reports_value_and_publisher() {
    let mut s = store();
    let p = caller(1, "a1", 0);
    s.publish(&p, data(&[("svc", "port-1"), ("n", "2")]), &[])
        .unwrap();
    let keys = vec![key("svc"), key("missing")];
    let LookupOutcome::Done(Ok(got)) = s.lookup(&caller(1, "a1", 1), keys, &[], 0, now()) else {
        panic!("lookup failed");
    };
    assert_eq!(got.len(), 1, "only the key that exists comes back");
    assert_eq!(got[0].key.as_str(), "svc");
    assert_eq!(got[0].proc, p.proc);
    assert_eq!(got[0].value, Value::from("port-1"));
    assert_eq!(
        look(&mut s, &p, &["missing"], &[]),
        Err(Status::ERR_NOT_FOUND)
    );
}

#[test]
fn each_range_reaches_exactly_its_audience() {
    // (range, who may see it) for a publisher a1:0 in session 1 on node "a".
    type Who = &'static [(u64, &'static str, u32)];
    let cases: [(DataRange, Who, Who); 5] = [
        (
            DataRange::PROC_LOCAL,
            &[(1, "a1", 0)],
            &[(1, "a1", 1), (1, "a2", 0)],
        ),
        (
            DataRange::NAMESPACE,
            &[(1, "a1", 0), (1, "a1", 1)],
            &[(1, "a2", 0), (2, "b1", 0)],
        ),
        (
            DataRange::SESSION,
            &[(1, "a1", 1), (1, "a2", 0)],
            &[(2, "b1", 0)],
        ),
        (DataRange::LOCAL, &[(1, "a2", 0)], &[(2, "b1", 0)]),
        (DataRange::GLOBAL, &[(1, "a2", 0), (2, "b1", 0)], &[]),
    ];
    for (r, yes, no) in cases {
        let mut s = store();
        s.publish(&caller(1, "a1", 0), data(&[("k", "v")]), &[range(r)])
            .unwrap();
        for &(sess, ns, rank) in yes {
            assert_eq!(
                look(
                    &mut s,
                    &caller(sess, ns, rank),
                    &["k"],
                    &[range(DataRange::GLOBAL)]
                ),
                found(&[("k", "v")]),
                "{r:?}: {ns}:{rank} of session {sess} must see it"
            );
        }
        for &(sess, ns, rank) in no {
            assert_eq!(
                look(
                    &mut s,
                    &caller(sess, ns, rank),
                    &["k"],
                    &[range(DataRange::GLOBAL)]
                ),
                Err(Status::ERR_NOT_FOUND),
                "{r:?}: {ns}:{rank} of session {sess} must not see it"
            );
        }
    }
}

#[test]
fn one_session_makes_the_session_range_reach_every_session() {
    for (one, other_session_sees) in [(false, false), (true, true)] {
        let mut s = store();
        s.set_one_session(one);
        s.publish(&caller(1, "a1", 0), data(&[("k", "v")]), &[])
            .unwrap();
        let want = if other_session_sees {
            found(&[("k", "v")])
        } else {
            Err(Status::ERR_NOT_FOUND)
        };
        for info in [vec![], vec![range(DataRange::SESSION)]] {
            assert_eq!(look(&mut s, &caller(2, "b1", 0), &["k"], &info), want);
            assert_eq!(
                look(&mut s, &caller(1, "a2", 0), &["k"], &info),
                found(&[("k", "v")])
            );
        }
        // Another session publishing the same key clashes only when they are one.
        let again = s.publish(&caller(2, "b1", 0), data(&[("k", "w")]), &[]);
        assert_eq!(again.is_err(), one, "one session: {one}");
        // Session persistence (Open MPI's default) still ends with the publisher's session.
        let mut s = store();
        s.set_one_session(one);
        s.publish(
            &caller(1, "a1", 0),
            data(&[("p", "v")]),
            &[persist(Persistence::SESSION)],
        )
        .unwrap();
        s.end_session(1);
        assert_eq!(
            look(&mut s, &caller(2, "b1", 0), &["p"], &[]),
            Err(Status::ERR_NOT_FOUND)
        );
    }
}

#[test]
fn custom_range_lists_processes_and_whole_namespaces() {
    let mut s = store();
    let list = DataArray::new(
        DataType::PROC,
        vec![
            Value::Proc(Proc::new(Nspace::new("a2").unwrap(), 1)),
            Value::Proc(Proc::new(Nspace::new("b1").unwrap(), Rank::WILDCARD)),
        ],
    )
    .unwrap();
    let info = [
        range(DataRange::CUSTOM),
        Info::attr(attr::EVENT_CUSTOM_RANGE, list),
    ];
    s.publish(&caller(1, "a1", 0), data(&[("k", "v")]), &info)
        .unwrap();
    let everywhere = [range(DataRange::GLOBAL)];
    assert!(look(&mut s, &caller(1, "a2", 1), &["k"], &everywhere).is_ok());
    assert!(look(&mut s, &caller(2, "b1", 7), &["k"], &everywhere).is_ok());
    assert_eq!(
        look(&mut s, &caller(1, "a2", 0), &["k"], &everywhere),
        Err(Status::ERR_NOT_FOUND)
    );
    // CUSTOM without a list, and RM, are refused.
    assert_eq!(
        s.publish(
            &caller(1, "a1", 0),
            data(&[("x", "v")]),
            &[range(DataRange::CUSTOM)]
        ),
        Err(Status::ERR_BAD_PARAM)
    );
    assert_eq!(
        s.publish(
            &caller(1, "a1", 0),
            data(&[("x", "v")]),
            &[range(DataRange::RM)]
        ),
        Err(Status::ERR_NOT_SUPPORTED)
    );
}

#[test]
fn lookup_range_limits_whose_publications_are_searched() {
    let mut s = store();
    s.publish(
        &caller(1, "a2", 0),
        data(&[("k", "v")]),
        &[range(DataRange::GLOBAL)],
    )
    .unwrap();
    let reader = caller(1, "a1", 0);
    assert_eq!(
        look(&mut s, &reader, &["k"], &[range(DataRange::NAMESPACE)]),
        Err(Status::ERR_NOT_FOUND),
        "the publisher is not in the reader's namespace"
    );
    assert!(
        look(&mut s, &reader, &["k"], &[]).is_ok(),
        "default range: session"
    );
    assert_eq!(
        look(&mut caller_store_global(), &caller(2, "b1", 0), &["k"], &[]),
        Err(Status::ERR_NOT_FOUND),
        "a session-range search does not reach other sessions"
    );
}

fn caller_store_global() -> NameStore<u32> {
    let mut s = store();
    s.publish(
        &caller(1, "a2", 0),
        data(&[("k", "v")]),
        &[range(DataRange::GLOBAL)],
    )
    .unwrap();
    s
}

#[test]
fn other_users_never_see_each_others_data_nor_clash() {
    let mut s = store();
    s.publish(
        &caller(1, "a1", 0),
        data(&[("k", "mine")]),
        &[range(DataRange::GLOBAL)],
    )
    .unwrap();
    let mut other = caller(1, "a2", 0);
    other.uid = UID + 1;
    let everywhere = [range(DataRange::GLOBAL)];
    assert_eq!(
        look(&mut s, &other, &["k"], &everywhere),
        Err(Status::ERR_NOT_FOUND)
    );
    // The same key is free for the other user, and each sees their own.
    s.publish(&other, data(&[("k", "theirs")]), &everywhere)
        .unwrap();
    assert_eq!(
        look(&mut s, &other, &["k"], &everywhere),
        found(&[("k", "theirs")])
    );
    assert_eq!(
        look(&mut s, &caller(1, "a1", 3), &["k"], &everywhere),
        found(&[("k", "mine")])
    );
    // Nor may one user unpublish the other's key: for them it does not exist.
    assert_eq!(
        s.unpublish(&other, &[key("k")], &[]).map(|_| ()),
        Ok(()),
        "the other user removes their own entry"
    );
    assert_eq!(s.len(), 1);
}

#[test]
fn duplicates_in_overlapping_ranges_are_refused_whole() {
    let mut s = store();
    s.publish(&caller(1, "a1", 0), data(&[("k", "first")]), &[])
        .unwrap();
    // Same session: the new publish clashes; its other key must not be stored either.
    assert_eq!(
        s.publish(
            &caller(1, "a2", 0),
            data(&[("j", "x"), ("k", "second")]),
            &[]
        ),
        Err(Status::ERR_DUPLICATE_KEY)
    );
    assert_eq!(s.len(), 1, "nothing of the refused publish is kept");
    assert_eq!(
        look(&mut s, &caller(1, "a2", 0), &["k"], &[]),
        found(&[("k", "first")])
    );
    // The same key twice in one call.
    assert_eq!(
        s.publish(&caller(1, "a1", 1), data(&[("z", "1"), ("z", "2")]), &[]),
        Err(Status::ERR_DUPLICATE_KEY)
    );
    // Republishing one's own key is a duplicate too.
    assert_eq!(
        s.publish(&caller(1, "a1", 0), data(&[("k", "again")]), &[]),
        Err(Status::ERR_DUPLICATE_KEY)
    );
    // GLOBAL overlaps every session's range.
    assert_eq!(
        s.publish(
            &caller(2, "b1", 0),
            data(&[("k", "g")]),
            &[range(DataRange::GLOBAL)]
        ),
        Err(Status::ERR_DUPLICATE_KEY)
    );
    // Disjoint audiences may hold the same key.
    let mut s = store();
    let ns = [range(DataRange::NAMESPACE)];
    s.publish(&caller(1, "a1", 0), data(&[("k", "1")]), &ns)
        .unwrap();
    s.publish(&caller(1, "a2", 0), data(&[("k", "2")]), &ns)
        .unwrap();
    s.publish(&caller(2, "b1", 0), data(&[("k", "3")]), &[])
        .unwrap();
    assert_eq!(
        look(&mut s, &caller(1, "a1", 1), &["k"], &[]),
        found(&[("k", "1")])
    );
    assert_eq!(
        look(&mut s, &caller(1, "a2", 1), &["k"], &[]),
        found(&[("k", "2")])
    );
    // A session range over both namespaces overlaps them.
    assert_eq!(
        s.publish(&caller(1, "a1", 5), data(&[("k", "4")]), &[]),
        Err(Status::ERR_DUPLICATE_KEY)
    );
}

#[test]
fn unpublish_is_own_keys_only_and_all_or_nothing() {
    let mut s = store();
    let me = caller(1, "a1", 0);
    let peer = caller(1, "a1", 1);
    s.publish(&me, data(&[("a", "1"), ("b", "2")]), &[])
        .unwrap();
    s.publish(&peer, data(&[("c", "3")]), &[]).unwrap();
    assert_eq!(
        s.unpublish(&me, &[key("a"), key("c")], &[]),
        Err(Status::ERR_NO_PERMISSIONS)
    );
    assert_eq!(
        s.unpublish(&me, &[key("a"), key("nope")], &[]),
        Err(Status::ERR_NOT_FOUND)
    );
    assert_eq!(s.len(), 3, "a failed unpublish removes nothing");
    // A range that does not match the entry's finds nothing to remove.
    assert_eq!(
        s.unpublish(&me, &[key("a")], &[range(DataRange::GLOBAL)]),
        Err(Status::ERR_NOT_FOUND)
    );
    s.unpublish(&me, &[key("a")], &[]).unwrap();
    assert_eq!(look(&mut s, &peer, &["a"], &[]), Err(Status::ERR_NOT_FOUND));
    // The key is free again.
    s.publish(&peer, data(&[("a", "new")]), &[]).unwrap();
    // No keys: everything of the caller's, nobody else's.
    s.unpublish(&me, &[], &[]).unwrap();
    assert_eq!(look(&mut s, &peer, &["b"], &[]), Err(Status::ERR_NOT_FOUND));
    assert_eq!(
        look(&mut s, &me, &["a", "c"], &[]),
        found(&[("a", "new"), ("c", "3")])
    );
}

#[test]
fn persistence_ends_with_its_owner() {
    let mut s = store();
    let p = caller(1, "a1", 0);
    let pairs = [
        ("proc", Persistence::PROC),
        ("app", Persistence::APP),
        ("session", Persistence::SESSION),
        ("indef", Persistence::INDEF),
    ];
    for (k, per) in pairs {
        s.publish(
            &p,
            data(&[(k, k)]),
            &[persist(per), range(DataRange::GLOBAL)],
        )
        .unwrap();
    }
    s.publish(&p, data(&[("default", "d")]), &[]).unwrap();
    let reader = caller(2, "b1", 0);
    let all = ["proc", "app", "session", "indef"];
    let g = [range(DataRange::GLOBAL)];
    assert_eq!(look(&mut s, &reader, &all, &g).unwrap().len(), 4);
    s.end_proc(1, &p.proc);
    assert_eq!(
        look(&mut s, &reader, &all, &g).unwrap().len(),
        3,
        "PROC gone"
    );
    s.end_nspace(1, &p.proc.nspace);
    assert_eq!(
        look(&mut s, &reader, &all, &g).unwrap().len(),
        2,
        "APP gone"
    );
    assert_eq!(
        look(&mut s, &caller(1, "a2", 0), &["default"], &[]),
        Err(Status::ERR_NOT_FOUND),
        "APP is the default persistence"
    );
    s.end_session(1);
    assert_eq!(
        look(&mut s, &reader, &all, &g),
        found(&[("indef", "indef")])
    );
}

#[test]
fn first_read_is_consumed_by_the_first_successful_lookup() {
    let mut s = store();
    s.publish(
        &caller(1, "a1", 0),
        data(&[("once", "x")]),
        &[persist(Persistence::FIRST_READ)],
    )
    .unwrap();
    // A reader that cannot see it does not consume it.
    assert!(look(&mut s, &caller(2, "b1", 0), &["once"], &[]).is_err());
    assert_eq!(
        look(&mut s, &caller(1, "a2", 0), &["once"], &[]),
        found(&[("once", "x")])
    );
    assert_eq!(
        look(&mut s, &caller(1, "a2", 0), &["once"], &[]),
        Err(Status::ERR_NOT_FOUND)
    );
    assert_eq!(s.len(), 0);
}

#[test]
fn wait_holds_until_enough_keys_are_published() {
    let mut s = store();
    let t0 = now();
    let reader = caller(1, "a2", 0);
    let wait_all = [Info::attr(attr::WAIT, 0i32)];
    let out = s.lookup(&reader, vec![key("x"), key("y")], &wait_all, 7, t0);
    assert_eq!(out, LookupOutcome::Waiting);
    let wait_one = [Info::attr(attr::WAIT, 1i32)];
    assert_eq!(
        s.lookup(&reader, vec![key("x"), key("y")], &wait_one, 8, t0),
        LookupOutcome::Waiting
    );
    let answered = s
        .publish(&caller(1, "a1", 0), data(&[("x", "1")]), &[])
        .unwrap();
    assert_eq!(
        answered.len(),
        1,
        "only the lookup waiting for one key is satisfied"
    );
    assert_eq!(answered[0].0, 8);
    assert_eq!(answered[0].1.as_ref().unwrap().len(), 1);
    // A publish the waiter cannot see does not wake it.
    let answered = s
        .publish(&caller(2, "b1", 0), data(&[("y", "other")]), &[])
        .unwrap();
    assert!(answered.is_empty());
    let answered = s
        .publish(
            &caller(1, "a1", 1),
            data(&[("y", "2")]),
            &[range(DataRange::SESSION)],
        )
        .unwrap();
    assert_eq!(answered.len(), 1);
    let (token, result) = &answered[0];
    assert_eq!(*token, 7);
    let mut keys: Vec<_> = result
        .as_ref()
        .unwrap()
        .iter()
        .map(|p| p.key.as_str().to_owned())
        .collect();
    keys.sort();
    assert_eq!(keys, ["x", "y"]);
    assert_eq!(s.waiting(), 0);
}

#[test]
fn wait_with_timeout_fails_in_virtual_time_and_can_be_forgotten() {
    let mut s = store();
    let t0 = now();
    let reader = caller(1, "a2", 0);
    let info = [
        Info::attr(attr::WAIT, true),
        Info::attr(attr::TIMEOUT, 2i32),
    ];
    assert_eq!(
        s.lookup(&reader, vec![key("late")], &info, 1, t0),
        LookupOutcome::Waiting
    );
    assert_eq!(s.poll_timeout(), Some(t0 + Duration::from_secs(2)));
    assert!(s.handle_timeout(t0 + Duration::from_secs(1)).is_empty());
    let expired = s.handle_timeout(t0 + Duration::from_secs(2));
    assert_eq!(expired, vec![(1, Err(Status::ERR_TIMEOUT))]);
    assert_eq!(s.poll_timeout(), None);
    // A waiter whose requester leaves is dropped without an answer.
    assert_eq!(
        s.lookup(&reader, vec![key("late")], &info, 2, t0),
        LookupOutcome::Waiting
    );
    s.forget_waiters(|t| *t == 2);
    assert_eq!(s.waiting(), 0);
    assert_eq!(s.poll_timeout(), None);
    let answered = s
        .publish(&caller(1, "a1", 0), data(&[("late", "v")]), &[])
        .unwrap();
    assert!(answered.is_empty());
}

#[test]
fn bad_directives_are_refused() {
    let mut s = store();
    let p = caller(1, "a1", 0);
    for bad in [
        Info::attr(attr::RANGE, "session"),
        Info::attr(attr::PERSISTENCE, Persistence(9)),
        Info::attr(attr::RANGE, DataRange(42)),
    ] {
        assert_eq!(
            s.publish(&p, data(&[("k", "v")]), std::slice::from_ref(&bad)),
            Err(Status::ERR_BAD_PARAM),
            "{bad:?}"
        );
    }
    assert_eq!(s.publish(&p, vec![], &[]), Err(Status::ERR_BAD_PARAM));
    assert_eq!(
        s.lookup(&p, vec![], &[], 0, now()),
        LookupOutcome::Done(Err(Status::ERR_BAD_PARAM))
    );
    assert_eq!(s.len(), 0);
}
