use std::time::Duration;

use pmix_server::types::{Nspace, attr};
use pmix_wire::{JobData, ProcKvs};

use super::*;

fn ns(s: &str) -> Nspace {
    Nspace::new(s).unwrap_or_else(|e| panic!("{e}"))
}

fn key(seq: u64) -> FenceKey {
    FenceKey {
        set: b"ours+theirs".to_vec(),
        seq,
    }
}

/// Our whole namespace `a` and the other run's `b`.
fn procs() -> Vec<Proc> {
    vec![
        Proc::new(ns("a"), Rank::WILDCARD),
        Proc::new(ns("b"), Rank::WILDCARD),
    ]
}

fn part(origin: Vertex, id: u64, seq: u64, info: Vec<Info>, data: &[u8]) -> Part {
    Part {
        origin,
        id,
        op: CrossOp::Fence,
        key: key(seq),
        procs: procs(),
        info,
        data: data.to_vec(),
    }
}

fn ok_or_panic<T>(r: Result<T, Vec<Reply>>) -> T {
    r.unwrap_or_else(|e| panic!("refused: {e:?}"))
}

#[test]
fn the_last_daemon_completes_the_runs_part_in_vertex_order() {
    let mut g = Gathers::default();
    let now = Instant::now();
    let first = g.join(part(2, 7, 1, vec![], b"two"), vec![2, 1], now);
    assert_eq!(ok_or_panic(first), None);
    let c = ok_or_panic(g.join(part(1, 9, 1, vec![], b"one"), vec![1, 2], now));
    let c = c.unwrap_or_else(|| panic!("not complete"));
    assert_eq!(c.data, b"onetwo");
    assert_eq!((c.key, c.op, c.procs), (key(1), CrossOp::Fence, procs()));
    // Contributed: no timeout of the root's any more, and the answer reaches both daemons.
    assert_eq!(g.poll_timeout(), None);
    let mut replies = g.answered(&key(1), &Ok(b"all".to_vec()));
    replies.sort_by_key(|r| r.0);
    assert_eq!(
        replies,
        [(1, 9, Ok(b"all".to_vec())), (2, 7, Ok(b"all".to_vec()))]
    );
    // Once answered, a late answer finds nothing.
    assert!(g.answered(&key(1), &Err(Status::ERR_TIMEOUT)).is_empty());
}

#[test]
fn a_part_from_a_daemon_not_taking_part_or_twice_is_refused_and_the_others_wait() {
    let mut g = Gathers::default();
    let now = Instant::now();
    assert_eq!(
        g.join(part(3, 1, 1, vec![], b""), vec![1, 2], now),
        Err(vec![(3, 1, Err(Status::ERR_BAD_PARAM))])
    );
    assert_eq!(
        ok_or_panic(g.join(part(1, 2, 1, vec![], b"x"), vec![1, 2], now)),
        None
    );
    assert_eq!(
        g.join(part(1, 3, 1, vec![], b"y"), vec![1, 2], now),
        Err(vec![(1, 3, Err(Status::ERR_BAD_PARAM))])
    );
    let c = ok_or_panic(g.join(part(2, 4, 1, vec![], b"z"), vec![1, 2], now));
    assert_eq!(c.map(|c| c.data), Some(b"xz".to_vec()));
    // A collective naming none of this run's processes has no daemon to wait for.
    assert_eq!(
        g.join(part(1, 5, 2, vec![], b""), vec![], now),
        Err(vec![(1, 5, Err(Status::ERR_BAD_PARAM))])
    );
}

#[test]
fn a_daemon_that_never_sends_its_part_fails_the_others_at_the_timeout() {
    let mut g = Gathers::default();
    let now = Instant::now();
    let info = vec![Info::attr(attr::TIMEOUT, 2i32)];
    assert_eq!(
        ok_or_panic(g.join(part(1, 5, 1, info, b"x"), vec![1, 2], now)),
        None
    );
    let at = now + Duration::from_secs(2);
    assert_eq!(g.poll_timeout(), Some(at));
    assert!(g.handle_timeout(at - Duration::from_millis(1)).is_empty());
    assert_eq!(g.handle_timeout(at), [(1, 5, Err(Status::ERR_TIMEOUT))]);
    assert_eq!(g.poll_timeout(), None);
}

#[test]
fn a_lost_daemon_fails_what_needs_it_gathering_or_contributed() {
    let mut g = Gathers::default();
    let now = Instant::now();
    // Gathering: waits for 2.
    assert_eq!(
        ok_or_panic(g.join(part(1, 1, 1, vec![], b""), vec![1, 2], now)),
        None
    );
    // Contributed, and 3 took part.
    assert_eq!(
        ok_or_panic(g.join(part(1, 2, 2, vec![], b""), vec![1, 3], now)),
        None
    );
    assert!(ok_or_panic(g.join(part(3, 3, 2, vec![], b""), vec![1, 3], now)).is_some());
    // Needs neither 2 nor 3.
    assert_eq!(
        ok_or_panic(g.join(part(1, 4, 3, vec![], b""), vec![1, 4], now)),
        None
    );
    let mut replies = g.lost(|v| v == 2 || v == 3);
    replies.sort_by_key(|r| r.1);
    assert_eq!(
        replies,
        [
            (1, 1, Err(Status::ERR_LOST_CONNECTION)),
            (1, 2, Err(Status::ERR_LOST_CONNECTION))
        ]
    );
    // The name server's late answer for the one failed here goes nowhere.
    assert!(g.answered(&key(2), &Ok(Vec::new())).is_empty());
    assert!(ok_or_panic(g.join(part(4, 5, 3, vec![], b""), vec![1, 4], now)).is_some());
}

#[test]
fn a_participant_that_ends_fails_the_gathering_not_what_the_name_server_holds() {
    let mut g = Gathers::default();
    let now = Instant::now();
    assert_eq!(
        ok_or_panic(g.join(part(1, 1, 1, vec![], b""), vec![1, 2], now)),
        None
    );
    assert!(ok_or_panic(g.join(part(1, 2, 2, vec![], b""), vec![1], now)).is_some());
    // Another run's process, or a namespace not named: nothing fails.
    assert!(g.proc_ended(&Proc::new(ns("c"), 0)).is_empty());
    assert_eq!(
        g.proc_ended(&Proc::new(ns("a"), 3)),
        [(1, 1, Err(Status::ERR_PROC_TERM_WO_SYNC))]
    );
    assert_eq!(
        g.answered(&key(2), &Err(Status::ERR_PROC_TERM_WO_SYNC)),
        [(1, 2, Err(Status::ERR_PROC_TERM_WO_SYNC))]
    );
}

fn job(nspace: &str) -> JobData {
    JobData {
        nspace: ns(nspace),
        session: Vec::new(),
        job: vec![Info::attr(attr::JOB_SIZE, 2u32)],
        apps: Vec::new(),
        nodes: Vec::new(),
        procs: Vec::new(),
    }
}

/// A daemon's part of a connect as its server encodes it: one frame of one `ConnectPart`.
fn connect_part(jobs: Vec<JobData>, rank: u32) -> Vec<u8> {
    let part = ConnectPart {
        jobs,
        data: vec![ProcKvs {
            proc: Proc::new(ns("a"), rank),
            kvs: Vec::new(),
        }],
    };
    let mut out = Vec::new();
    pmix_wire::encode_frame(&[part], &mut out).unwrap_or_else(|e| panic!("{e}"));
    out
}

/// Daemon `origin`'s part of a connect (its request id the same number).
fn connect(origin: Vertex, data: &[u8]) -> Part {
    Part {
        op: CrossOp::Connect,
        ..part(origin, u64::from(origin), 1, vec![], data)
    }
}

#[test]
fn a_connects_parts_become_one_with_each_namespaces_job_data_once() {
    let mut g = Gathers::default();
    let now = Instant::now();
    let one = connect_part(vec![job("a"), job("spawned")], 0);
    let two = connect_part(vec![job("a"), job("spawned")], 1);
    assert_eq!(ok_or_panic(g.join(connect(1, &one), vec![1, 2], now)), None);
    let c = ok_or_panic(g.join(connect(2, &two), vec![1, 2], now));
    let c = c.unwrap_or_else(|| panic!("not complete"));
    let parts: Vec<ConnectPart> =
        pmix_wire::decode_frame_lists(&c.data).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        parts,
        [ConnectPart {
            jobs: vec![job("a"), job("spawned")],
            data: vec![
                ProcKvs {
                    proc: Proc::new(ns("a"), 0),
                    kvs: Vec::new()
                },
                ProcKvs {
                    proc: Proc::new(ns("a"), 1),
                    kvs: Vec::new()
                }
            ],
        }]
    );
}

#[test]
fn a_connect_part_that_is_no_connect_part_fails_the_connect_for_every_daemon() {
    let mut g = Gathers::default();
    let now = Instant::now();
    let good = connect_part(vec![job("a")], 0);
    assert_eq!(
        ok_or_panic(g.join(connect(1, &good), vec![1, 2], now)),
        None
    );
    let mut replies = g
        .join(connect(2, b"\0\0\0\x01\xc1"), vec![1, 2], now)
        .map(|_| ())
        .err()
        .unwrap_or_else(|| panic!("accepted"));
    replies.sort_by_key(|r| r.0);
    assert_eq!(
        replies,
        [
            (1, 1, Err(Status::ERR_UNPACK_FAILURE)),
            (2, 2, Err(Status::ERR_UNPACK_FAILURE))
        ]
    );
    assert_eq!(g.poll_timeout(), None);
    assert!(g.answered(&key(1), &Ok(Vec::new())).is_empty());
}
