//! Generation and parsing of large node and process maps (the reference is quadratic in
//! `generate_ppn`: 5.6 s for 100,000 nodes).
#![allow(clippy::unwrap_used)]

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_main};
use pmix_regex::{Form, generate_ppn_with, generate_regex_with, parse_ppn, parse_regex};

fn names(n: usize) -> Vec<String> {
    (1..=n).map(|i| format!("nid{i:06}")).collect()
}

/// `nodes` nodes with `per_node` consecutive ranks each (a by-slot mapping).
fn ranks(nodes: u32, per_node: u32) -> Vec<Vec<u32>> {
    (0..nodes)
        .map(|n| (n * per_node..(n + 1) * per_node).collect())
        .collect()
}

fn node_maps(c: &mut Criterion) {
    let mut g = c.benchmark_group("node_map");
    g.sample_size(10);
    for n in [100_000, 1_000_000] {
        let nodes = names(n);
        g.throughput(Throughput::Elements(n as u64));
        for form in [Form::Raw, Form::Native, Form::Compressed] {
            if form == Form::Compressed && n > 100_000 {
                continue;
            }
            let map = generate_regex_with(&nodes, form).unwrap();
            g.bench_with_input(
                BenchmarkId::new(format!("generate_{form:?}"), n),
                &nodes,
                |b, nodes| b.iter(|| generate_regex_with(black_box(nodes), form).unwrap()),
            );
            g.bench_with_input(
                BenchmarkId::new(format!("parse_{form:?}"), n),
                &map,
                |b, map| b.iter(|| parse_regex(black_box(map)).unwrap()),
            );
        }
    }
    g.finish();
}

fn proc_maps(c: &mut Criterion) {
    let mut g = c.benchmark_group("proc_map");
    g.sample_size(10);
    // 100,000 nodes x 4 ranks, and 1M ranks (250,000 nodes x 4).
    for nodes in [100_000, 250_000] {
        let map_in = ranks(nodes, 4);
        g.throughput(Throughput::Elements(u64::from(nodes) * 4));
        for form in [Form::Raw, Form::Native] {
            let map = generate_ppn_with(&map_in, form).unwrap();
            g.bench_with_input(
                BenchmarkId::new(format!("generate_{form:?}"), nodes),
                &map_in,
                |b, m| b.iter(|| generate_ppn_with(black_box(m), form).unwrap()),
            );
            g.bench_with_input(
                BenchmarkId::new(format!("parse_{form:?}"), nodes),
                &map,
                |b, map| b.iter(|| parse_ppn(black_box(map)).unwrap()),
            );
        }
    }
    g.finish();
}

// The macro generates an undocumented function.
#[allow(missing_docs)]
mod group {
    criterion::criterion_group!(benches, super::node_maps, super::proc_maps);
}
criterion_main!(group::benches);
