//! End-to-end fence costs over real Unix sockets: one server, N clients on threads of this
//! process (so the numbers include the socket round trip and both event loops, but not process
//! start-up). `cargo bench -p pmix-server --bench fence`.
#![allow(missing_docs)] // criterion_group! generates an undocumented function

use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use pmix_client::Client;
use pmix_server::{NoHost, Server, ServerOptions};
use pmix_types::{Info, Nspace, Proc, Scope, Value, attr};

struct Job {
    _server: Server,
    clients: Vec<Client>,
}

fn job(n: u32) -> Job {
    let server = Server::init(NoHost, ServerOptions::default()).expect("server");
    let ns = Nspace::new(format!("bench{n}")).expect("ns");
    let nodes = pmix_regex::generate_regex(&[server.hostname()]).expect("regex");
    let ppn = pmix_regex::generate_ppn(&[(0..n).collect::<Vec<u32>>()]).expect("ppn");
    let info = vec![
        Info::attr(attr::JOB_SIZE, n),
        Info::attr(attr::NODE_MAP, Value::Regex(nodes)),
        Info::attr(attr::PROC_MAP, Value::Regex(ppn)),
    ];
    server.register_nspace(&ns, n, &info).expect("register");
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    let clients = (0..n)
        .map(|r| {
            let p = Proc::new(ns.clone(), r);
            server.register_client(&p, uid, gid).expect("client");
            let env: std::collections::HashMap<String, String> = server
                .setup_fork(&p)
                .expect("fork env")
                .into_iter()
                .collect();
            Client::init_with_env(|k| env.get(k).cloned()).expect("init")
        })
        .collect();
    Job {
        _server: server,
        clients,
    }
}

/// Runs `iters` rounds of `op` on every client at once; returns the time rank 0 took.
fn lockstep(clients: &[Client], iters: u64, op: fn(&Client)) -> Duration {
    let start = Arc::new(Barrier::new(clients.len()));
    let mut handles = Vec::new();
    for c in &clients[1..] {
        let c = c.clone();
        let start = start.clone();
        handles.push(std::thread::spawn(move || {
            start.wait();
            for _ in 0..iters {
                op(&c);
            }
        }));
    }
    start.wait();
    let t = Instant::now();
    for _ in 0..iters {
        op(&clients[0]);
    }
    let elapsed = t.elapsed();
    for h in handles {
        h.join().expect("client thread");
    }
    elapsed
}

fn barrier(c: &Client) {
    c.fence(&[], &[]).expect("fence");
}

fn collecting(c: &Client) {
    c.fence(&[], &[Info::attr(attr::COLLECT_DATA, true)])
        .expect("fence");
}

fn benches(cr: &mut Criterion) {
    let mut g = cr.benchmark_group("fence");
    g.measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1))
        .sample_size(20);
    for n in [2u32, 8, 32, 64] {
        let j = job(n);
        for (i, c) in j.clients.iter().enumerate() {
            for k in 0..3 {
                c.put(Scope::GLOBAL, &format!("key{k}"), Value::Uint64(i as u64))
                    .expect("put");
            }
            c.commit().expect("commit");
        }
        g.bench_function(BenchmarkId::new("barrier", n), |b| {
            b.iter_custom(|iters| lockstep(&j.clients, iters, barrier))
        });
        g.bench_function(BenchmarkId::new("collecting", n), |b| {
            b.iter_custom(|iters| lockstep(&j.clients, iters, collecting))
        });
        for c in &j.clients {
            c.finalize().expect("finalize");
        }
    }
    g.finish();
}

criterion_group!(fence, benches);
criterion_main!(fence);
