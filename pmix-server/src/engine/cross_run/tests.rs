use std::time::{Duration, Instant};

use pmix_types::{Info, Nspace, Proc, Rank, Status, attr};

use super::{CrossKind, CrossRuns, MAX_GATHERED};

fn ns(s: &str) -> Nspace {
    Nspace::new(s).unwrap()
}

fn all(s: &str) -> Proc {
    Proc::new(ns(s), Rank::WILDCARD)
}

/// Namespace "a" belongs to session 1, "b" to session 2, "c" to session 3.
fn owner(n: &Nspace) -> Option<u64> {
    match n.as_str() {
        "a" => Some(1),
        "b" => Some(2),
        "c" => Some(3),
        _ => None,
    }
}

fn timeout(secs: u32) -> Vec<Info> {
    vec![Info::attr(attr::TIMEOUT, secs)]
}

#[test]
fn a_connect_completes_when_every_owning_session_sent_its_part() {
    let mut x = CrossRuns::default();
    let now = Instant::now();
    let procs = vec![all("b"), all("a")];
    let first = x
        .join(
            CrossKind::Connect,
            2,
            Some(7),
            procs.clone(),
            &[],
            b"BB".to_vec(),
            "b",
            now,
            owner,
        )
        .unwrap();
    assert!(
        first.is_empty(),
        "answered before session 1 came: {first:?}"
    );
    // Session 1 lists the processes in another order: the same operation.
    let done = x
        .join(
            CrossKind::Connect,
            1,
            Some(7),
            vec![all("a"), all("b")],
            &[],
            b"A".to_vec(),
            "a",
            now,
            owner,
        )
        .unwrap();
    let mut done = done;
    done.sort_by_key(|(t, _)| *t);
    // Every part gets every session's data, in session order.
    assert_eq!(
        done,
        vec![("a", Ok(b"ABB".to_vec())), ("b", Ok(b"ABB".to_vec()))]
    );
    assert_eq!(x.poll_timeout(), None);
    assert!(x.ops.is_empty());
}

#[test]
fn a_disconnect_is_not_the_connect_over_the_same_processes() {
    let mut x = CrossRuns::default();
    let now = Instant::now();
    let procs = vec![all("a"), all("b")];
    let r = x.join(
        CrossKind::Connect,
        1,
        None,
        procs.clone(),
        &[],
        vec![],
        1,
        now,
        owner,
    );
    assert_eq!(r, Ok(vec![]));
    let r = x.join(
        CrossKind::Disconnect,
        2,
        None,
        procs.clone(),
        &[],
        vec![],
        2,
        now,
        owner,
    );
    assert_eq!(r, Ok(vec![]), "a disconnect completed a connect");
    let r = x.join(
        CrossKind::Disconnect,
        1,
        None,
        procs,
        &[],
        vec![],
        3,
        now,
        owner,
    );
    let mut r = r.unwrap();
    r.sort_by_key(|(t, _)| *t);
    assert_eq!(r, vec![(2, Ok(vec![])), (3, Ok(vec![]))]);
}

#[test]
fn a_namespace_no_session_owns_fails_at_once() {
    let mut x: CrossRuns<u32> = CrossRuns::default();
    let r = x.join(
        CrossKind::Connect,
        1,
        None,
        vec![all("a"), all("nobody")],
        &[],
        vec![],
        9,
        Instant::now(),
        owner,
    );
    assert_eq!(r, Err((9, Status::ERR_NOT_FOUND)));
    assert!(x.ops.is_empty());
}

#[test]
fn a_session_speaks_only_where_it_owns_a_namespace_and_for_its_own_user() {
    let mut x = CrossRuns::default();
    let now = Instant::now();
    let procs = vec![all("a"), all("b")];
    // Session 3 owns neither a nor b.
    let r = x.join(
        CrossKind::Connect,
        3,
        Some(7),
        procs.clone(),
        &[],
        vec![],
        1,
        now,
        owner,
    );
    assert_eq!(r, Err((1, Status::ERR_NO_PERMISSIONS)));
    let r = x.join(
        CrossKind::Connect,
        1,
        Some(7),
        procs.clone(),
        &[],
        vec![],
        2,
        now,
        owner,
    );
    assert_eq!(r, Ok(vec![]));
    // Another user's launcher cannot join user 7's connect...
    let r = x.join(
        CrossKind::Connect,
        2,
        Some(8),
        procs.clone(),
        &[],
        vec![],
        3,
        now,
        owner,
    );
    assert_eq!(r, Err((3, Status::ERR_NO_PERMISSIONS)));
    // ... a second part of the same session is refused without dropping the first ...
    let r = x.join(
        CrossKind::Connect,
        1,
        Some(7),
        procs.clone(),
        &[],
        vec![],
        4,
        now,
        owner,
    );
    assert_eq!(r, Err((4, Status::ERR_BAD_PARAM)));
    // ... and a launcher running as root may.
    let r = x.join(
        CrossKind::Connect,
        2,
        Some(0),
        procs,
        &[],
        vec![],
        5,
        now,
        owner,
    );
    assert_eq!(r.unwrap().len(), 2);
}

#[test]
fn a_run_disconnecting_mid_connect_fails_the_others() {
    let mut x = CrossRuns::default();
    let now = Instant::now();
    let procs = vec![all("a"), all("b"), all("c")];
    assert_eq!(
        x.join(
            CrossKind::Connect,
            1,
            None,
            procs.clone(),
            &[],
            vec![1],
            "a",
            now,
            owner
        ),
        Ok(vec![])
    );
    assert_eq!(
        x.join(
            CrossKind::Connect,
            3,
            None,
            procs,
            &[],
            vec![3],
            "c",
            now,
            owner
        ),
        Ok(vec![])
    );
    // Session 2, which owns b, goes away before sending its part.
    let mut failed = x.session_ended(2);
    failed.sort_by_key(|(t, _)| *t);
    assert_eq!(
        failed,
        vec![
            ("a", Err(Status::ERR_UNREACH)),
            ("c", Err(Status::ERR_UNREACH))
        ]
    );
    assert!(x.ops.is_empty());
}

#[test]
fn a_run_leaving_after_its_part_fails_the_others_and_is_not_answered() {
    let mut x = CrossRuns::default();
    let now = Instant::now();
    let procs = vec![all("a"), all("b"), all("c")];
    for (s, t) in [(1, "a"), (2, "b")] {
        let r = x.join(
            CrossKind::Connect,
            s,
            None,
            procs.clone(),
            &[],
            vec![],
            t,
            now,
            owner,
        );
        assert_eq!(r, Ok(vec![]));
    }
    assert_eq!(x.session_ended(2), vec![("a", Err(Status::ERR_UNREACH))]);
}

#[test]
fn a_connect_whose_other_side_never_comes_times_out_at_the_earliest_timeout() {
    let mut x = CrossRuns::default();
    let t0 = Instant::now();
    let procs = vec![all("a"), all("b"), all("c")];
    let r = x.join(
        CrossKind::Connect,
        1,
        None,
        procs.clone(),
        &timeout(10),
        vec![],
        1,
        t0,
        owner,
    );
    assert_eq!(r, Ok(vec![]));
    let r = x.join(
        CrossKind::Connect,
        2,
        None,
        procs,
        &timeout(3),
        vec![],
        2,
        t0,
        owner,
    );
    assert_eq!(r, Ok(vec![]));
    let deadline = t0 + Duration::from_secs(3);
    assert_eq!(x.poll_timeout(), Some(deadline));
    assert!(
        x.handle_timeout(deadline - Duration::from_millis(1))
            .is_empty()
    );
    let mut r = x.handle_timeout(deadline);
    r.sort_by_key(|(t, _)| *t);
    assert_eq!(
        r,
        vec![(1, Err(Status::ERR_TIMEOUT)), (2, Err(Status::ERR_TIMEOUT))]
    );
    assert_eq!(x.poll_timeout(), None);
}

#[test]
fn a_participant_or_its_namespace_ending_fails_the_connect() {
    let mut x = CrossRuns::default();
    let now = Instant::now();
    let procs = vec![Proc::new(ns("a"), 0u32), all("b")];
    let r = x.join(
        CrossKind::Connect,
        1,
        None,
        procs.clone(),
        &[],
        vec![],
        1,
        now,
        owner,
    );
    assert_eq!(r, Ok(vec![]));
    // Another process of a is no participant.
    assert!(x.proc_ended(&Proc::new(ns("a"), 1u32)).is_empty());
    // Any process of b is (its whole namespace takes part).
    assert_eq!(
        x.proc_ended(&Proc::new(ns("b"), 5u32)),
        vec![(1, Err(Status::ERR_PROC_TERM_WO_SYNC))]
    );
    let r = x.join(
        CrossKind::Connect,
        1,
        None,
        procs,
        &[],
        vec![],
        2,
        now,
        owner,
    );
    assert_eq!(r, Ok(vec![]));
    assert_eq!(x.nspace_ended(&ns("c")), vec![]);
    assert_eq!(
        x.nspace_ended(&ns("a")),
        vec![(2, Err(Status::ERR_PROC_TERM_WO_SYNC))]
    );
}

#[test]
fn what_one_connect_gathers_is_bounded() {
    let mut x = CrossRuns::default();
    let now = Instant::now();
    let procs = vec![all("a"), all("b")];
    let big = vec![0u8; MAX_GATHERED - 10];
    let r = x.join(
        CrossKind::Connect,
        1,
        None,
        procs.clone(),
        &[],
        big,
        1,
        now,
        owner,
    );
    assert_eq!(r, Ok(vec![]));
    let r = x.join(
        CrossKind::Connect,
        2,
        None,
        procs.clone(),
        &[],
        vec![0; 11],
        2,
        now,
        owner,
    );
    assert_eq!(r, Err((2, Status::ERR_OUT_OF_RESOURCE)));
    // The first still waits, and a part that fits completes it.
    let r = x.join(
        CrossKind::Connect,
        2,
        None,
        procs,
        &[],
        vec![0; 10],
        3,
        now,
        owner,
    );
    assert_eq!(r.unwrap().len(), 2);
}

/// Parts that wait (operations others never complete) are bounded per session and in all:
/// the fifth part of 15 MiB from one session is refused (before, 48 such parts held
/// 742 MiB), and the refused operation is not kept.
#[test]
fn what_waiting_parts_hold_is_bounded_per_session() {
    let mut x: CrossRuns<u32> = CrossRuns::default();
    let now = Instant::now();
    let part = vec![0u8; 15 << 20];
    // Session 1 joins connects with b that session 2 never joins, each over other processes.
    let join = |x: &mut CrossRuns<u32>, rank: u32| {
        x.join(
            CrossKind::Connect,
            1,
            None,
            vec![all("a"), Proc::new(ns("b"), rank)],
            &[],
            part.clone(),
            rank,
            now,
            owner,
        )
    };
    for rank in 0..4 {
        assert!(join(&mut x, rank).unwrap().is_empty(), "part {rank} waits");
    }
    let refused = join(&mut x, 4).unwrap_err();
    assert_eq!(refused, (4, Status::ERR_OUT_OF_RESOURCE));
    // Another session still has room.
    let other = x.join(
        CrossKind::Connect,
        3,
        None,
        vec![all("c"), all("b")],
        &[],
        part.clone(),
        9,
        now,
        owner,
    );
    assert!(other.unwrap().is_empty());
}
