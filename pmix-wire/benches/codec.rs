//! Encode and decode speed of the messages that dominate traffic: a fence's worth of keys, and
//! the job data a client receives at init (about 1 MiB for a few thousand processes).
//!
//! `cargo bench -p pmix-wire -- --warm-up-time 1 --measurement-time 3`

#![allow(missing_docs, clippy::unwrap_used)]

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use pmix_types::{Info, Key, Nspace, Proc, Rank, Scope, Status, Value};
use pmix_wire::{
    ClientMsg, Decoded, FrameDecoder, JobData, JobImage, Kv, ProcKvs, ProcRealm, Realm, Reply,
    ReplyBody, Request, ServerMsg, Welcome, WelcomeJob, decode_body, decode_kvs, encode_frame,
    peek_fence_reply,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// 64 keys of mixed small values, as one process commits them before a fence.
fn kvs64() -> Vec<Kv> {
    (0..64u32)
        .map(|i| Kv {
            scope: Scope::GLOBAL,
            key: Key::new(format!("app.key.{i}")).unwrap(),
            value: match i % 4 {
                0 => Value::String(format!("endpoint-{i}:tcp://10.0.0.{}:5000", i % 250)),
                1 => Value::Uint64(u64::from(i) << 20),
                2 => Value::ByteObject(vec![i as u8; 24]),
                _ => Value::Double(f64::from(i) / 3.0),
            },
        })
        .collect()
}

fn commit() -> ClientMsg {
    ClientMsg {
        id: 1,
        req: Request::Commit { kvs: kvs64() },
    }
}

fn fence_reply() -> ServerMsg {
    ServerMsg::Reply {
        id: 2,
        reply: Reply {
            status: Status::SUCCESS,
            body: ReplyBody::Fence {
                data: vec![ProcKvs {
                    proc: Proc::new(Nspace::new("job-1").unwrap(), 3),
                    kvs: kvs64(),
                }],
            },
        },
    }
}

/// Job data with per-process attributes for enough processes to make about 1 MiB.
fn welcome_1mib() -> Welcome {
    let info = |k: &str, v: Value| Info::new(Key::new(k).unwrap(), v);
    let procs = (0..7_000u32)
        .map(|r| ProcRealm {
            rank: Rank(r),
            info: vec![
                info("pmix.lrank", Value::Uint16((r % 64) as u16)),
                info("pmix.nrank", Value::Uint16((r % 64) as u16)),
                info("pmix.nodeid", Value::Uint32(r / 64)),
                info("pmix.appnum", Value::Uint32(0)),
                info("pmix.hname", Value::String(format!("node{:05}", r / 64))),
                info(
                    "pmix.cpuset",
                    Value::String(format!("package:0[core:{}]", r % 64)),
                ),
                info(
                    "pmix.locstr",
                    Value::String(format!("NM0:SK0:L3{}:CR{}", r % 2, r % 64)),
                ),
            ],
        })
        .collect();
    Welcome::Accepted {
        version: 1,
        job: WelcomeJob::Inline(
            JobImage::from_job_data(&JobData {
                nspace: Nspace::new("job-1").unwrap(),
                session: vec![info("pmix.univ.size", Value::Uint32(7_000))],
                job: vec![info("pmix.job.size", Value::Uint32(7_000))],
                apps: vec![Realm {
                    id: 0,
                    info: vec![info("pmix.app.size", Value::Uint32(7_000))],
                }],
                nodes: (0..110)
                    .map(|n| Realm {
                        id: n,
                        info: vec![info("pmix.hname", Value::String(format!("node{n:05}")))],
                    })
                    .collect(),
                procs,
            })
            .unwrap(),
        ),
    }
}

fn bench_msg<T>(c: &mut Criterion, name: &str, msg: &T)
where
    T: Serialize + DeserializeOwned,
{
    let mut frame = Vec::new();
    encode_frame(msg, &mut frame).unwrap();
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Bytes(frame.len() as u64));
    let mut out = Vec::with_capacity(frame.len());
    group.bench_function("encode", |b| {
        b.iter(|| {
            out.clear();
            encode_frame(black_box(msg), &mut out).unwrap();
            black_box(&out);
        })
    });
    let decoder = FrameDecoder::default();
    group.bench_function("decode", |b| {
        b.iter(|| match decoder.decode(black_box(&frame)).unwrap() {
            Decoded::Frame { body, .. } => decode_body::<T>(body).unwrap(),
            Decoded::NeedMore(_) => unreachable!(),
        })
    });
    group.finish();
}

/// A fence over 64 processes that each put three keys (a 64-byte card and two numbers), as the
/// multi-process benchmark's first collecting fence: decoded whole, or seen without decoding.
fn fence_reply_64_procs() -> ServerMsg {
    let ns = Nspace::new("bench").unwrap();
    let data = (0..64u32)
        .map(|r| ProcKvs {
            proc: Proc::new(ns.clone(), r),
            kvs: vec![
                Kv {
                    scope: Scope::GLOBAL,
                    key: Key::new("bench.card").unwrap(),
                    value: Value::String(format!("card-{r:08}-{:050}", 0)),
                },
                Kv {
                    scope: Scope::GLOBAL,
                    key: Key::new("bench.port").unwrap(),
                    value: Value::Uint32(10_000 + r),
                },
                Kv {
                    scope: Scope::GLOBAL,
                    key: Key::new("bench.addr").unwrap(),
                    value: Value::Uint64(0x0a00_0000 + u64::from(r)),
                },
            ],
        })
        .collect();
    ServerMsg::Reply {
        id: 9,
        reply: Reply {
            status: Status::SUCCESS,
            body: ReplyBody::Fence { data },
        },
    }
}

fn bench_peek(c: &mut Criterion) {
    let msg = fence_reply_64_procs();
    bench_msg(c, "fence_reply_64_procs_3_keys", &msg);
    let mut frame = Vec::new();
    encode_frame(&msg, &mut frame).unwrap();
    let body = &frame[4..];
    let mut group = c.benchmark_group("fence_reply_64_procs_3_keys");
    group.throughput(Throughput::Bytes(frame.len() as u64));
    group.bench_function("peek", |b| {
        b.iter(|| peek_fence_reply(black_box(body)).unwrap().procs.len())
    });
    let f = peek_fence_reply(body).unwrap();
    let one = f.procs[7].kvs.clone();
    group.bench_function("decode_one_process", |b| {
        b.iter(|| decode_kvs(black_box(&f.data[one.clone()])).unwrap())
    });
    group.finish();
}

fn codec(c: &mut Criterion) {
    bench_msg(c, "commit_64_keys", &commit());
    bench_msg(c, "fence_reply_64_keys", &fence_reply());
    bench_peek(c);
    bench_msg(c, "welcome_job_data_1mib", &welcome_1mib());
}

criterion_group!(benches, codec);
criterion_main!(benches);
