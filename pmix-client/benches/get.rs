//! Get latency on the caller's thread: job-level data (from init) and a peer's value cached by
//! a collecting fence, against the in-process mock server; plus one server round trip
//! (an empty commit) for scale.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

#[path = "../tests/common/mod.rs"]
mod common;

use std::hint::black_box;

use common::*;
use criterion::{Criterion, criterion_group, criterion_main};
use pmix_client::{Client, Proc, Rank, Scope, Status, Value};
use pmix_wire::{Kv, ProcKvs, Reply, ReplyBody, Request};

const PEERS: u32 = 1024;

fn bench_get(c: &mut Criterion) {
    let mock = Mock::start(
        job("job-A"),
        0,
        Box::new(|req| match req {
            Request::Fence { .. } => Action::Reply(Reply {
                status: Status::SUCCESS,
                body: ReplyBody::Fence {
                    data: (1..PEERS)
                        .map(|r| ProcKvs {
                            proc: peer("job-A", r),
                            kvs: vec![
                                Kv {
                                    scope: Scope::GLOBAL,
                                    key: key("demo.rank"),
                                    value: Value::Uint64(u64::from(r)),
                                },
                                Kv {
                                    scope: Scope::GLOBAL,
                                    key: key("demo.addr"),
                                    value: Value::String(format!(
                                        "10.0.{}.{}:4000",
                                        r / 256,
                                        r % 256
                                    )),
                                },
                            ],
                        })
                        .collect(),
                },
            }),
            other => default_action(other),
        }),
    );
    let client = Client::init_with_env(mock.env()).unwrap();
    client.put(Scope::GLOBAL, "demo.rank", 0u64).unwrap();
    client.commit().unwrap();
    client.fence(&[], &[info("pmix.collect", true)]).unwrap();

    let wild = Proc::new(ns("job-A"), Rank::WILDCARD);
    let p1 = peer("job-A", 517);
    // The mock job data has four ranks.
    let p3 = peer("job-A", 3);
    let me = client.proc().clone();
    let before = mock.count();

    let mut g = c.benchmark_group("get");
    g.bench_function("job_level_wildcard", |b| {
        b.iter(|| {
            client
                .get(black_box(&wild), black_box("pmix.job.size"), &[])
                .unwrap()
        })
    });
    g.bench_function("proc_level_reserved", |b| {
        b.iter(|| {
            client
                .get(black_box(&p3), black_box("pmix.local.rank"), &[])
                .unwrap()
        })
    });
    g.bench_function("job_level_via_rank_fallthrough", |b| {
        b.iter(|| {
            client
                .get(black_box(&p3), black_box("pmix.job.size"), &[])
                .unwrap()
        })
    });
    g.bench_function("cached_peer_u64", |b| {
        b.iter(|| {
            client
                .get(black_box(&p1), black_box("demo.rank"), &[])
                .unwrap()
        })
    });
    g.bench_function("cached_peer_string", |b| {
        b.iter(|| {
            client
                .get(black_box(&p1), black_box("demo.addr"), &[])
                .unwrap()
        })
    });
    g.bench_function("own_put", |b| {
        b.iter(|| {
            client
                .get(black_box(&me), black_box("demo.rank"), &[])
                .unwrap()
        })
    });
    g.finish();
    assert_eq!(mock.count(), before, "every get above must be local");

    c.bench_function("server_round_trip_empty_commit", |b| {
        b.iter(|| client.commit().unwrap())
    });
    client.finalize().unwrap();
}

criterion_group!(benches, bench_get);
criterion_main!(benches);
