//! Which rows the tables have: the implementations (`Stack`), the run settings (`Config`),
//! the metrics and labels of the main table's rows and of the libpmix table's, the ones
//! `--filter` selects, and the settings the platform floor stands next to.

use crate::bench::Options;
use crate::bench::exec::{LOCAL_MS, SERVED_MS};
use crate::bench::mpich::Mpich;

/// Which implementation a number is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Stack {
    Ours,
    Openpmix,
    /// The libpmix client (`xtask/c/bench_client.c`) under our server (`pmix-bench job
    /// --client`), through its OpenPMIx front-end.
    LibpmixOurs,
    /// `Openpmix` with the server's storage module set to `hash` (`PMIX_MCA_gds=hash`), the
    /// one our server tells libpmix clients to use.
    OpenpmixHash,
    /// The libpmix client program on pmix-rs's `libpmix.so.2` (`pmix-capi`) under our
    /// server: `LibpmixOurs` with the other client library.
    CapiOurs,
    /// The libpmix client program on pmix-rs's `libpmix.so.2` under OpenPMIx's server
    /// (default MCA settings): `Openpmix` with the other client library.
    CapiOpenpmix,
    /// `xtask/c/floor.c`: request/echo round trips over a socket, no PMIx.
    Floor,
    /// MPICH's launcher, the reference of the launch rows (where `Ours` is `pmixrun`).
    Hydra,
}

impl Stack {
    pub(crate) fn slug(self) -> &'static str {
        match self {
            Stack::Ours => "ours",
            Stack::Openpmix => "openpmix",
            Stack::LibpmixOurs => "libpmix-ours",
            Stack::OpenpmixHash => "openpmix-hash",
            Stack::CapiOurs => "capi-ours",
            Stack::CapiOpenpmix => "capi-openpmix",
            Stack::Floor => "floor",
            Stack::Hydra => "hydra",
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Stack::Ours => "ours",
            Stack::Openpmix => "OpenPMIx",
            Stack::LibpmixOurs => "libpmix on ours",
            Stack::OpenpmixHash => "OpenPMIx (gds hash)",
            Stack::CapiOurs => "pmix-rs libpmix.so.2 on ours",
            Stack::CapiOpenpmix => "pmix-rs libpmix.so.2 on OpenPMIx",
            Stack::Floor => "floor",
            Stack::Hydra => "Hydra",
        }
    }
}

/// One run's setting: a job of `n` processes (all on CPU 0 if `pinned`), the map
/// generation and big-registration run, or the launch of an MPI job of `n` processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Config {
    Job { n: u32, pinned: bool },
    Maps,
    Launch { mpich: Mpich, n: u32 },
}

impl Config {
    pub(crate) fn slug(self) -> String {
        match self {
            Config::Job { n, pinned: true } => format!("n{n}-pinned"),
            Config::Job { n, pinned: false } => format!("n{n}-unpinned"),
            Config::Maps => "maps".into(),
            Config::Launch { mpich, n } => format!("{}-n{n}", mpich.slug()),
        }
    }

    pub(crate) fn label(self) -> String {
        match self {
            Config::Job { n, pinned: true } => format!("N={n}, pinned"),
            Config::Job { n, pinned: false } => format!("N={n}, unpinned"),
            Config::Maps => "maps".into(),
            Config::Launch { mpich, n } => format!("{}, N={n}", mpich.name()),
        }
    }
}

/// The per-job metrics, in table order: (metric, label).
pub(super) const JOB_ROWS: &[(&str, &str)] = &[
    ("init_ms", "init (ms)"),
    ("get_job_solo_us", "job-level get, rank 0 alone (µs)"),
    ("get_job_all_us", "job-level get, all ranks at once (µs)"),
    ("put_commit_us", "put ×3 + commit (µs)"),
    ("fence_first_us", "collecting fence, first (µs)"),
    ("get_peer_first_us", "peer get, first pass (µs)"),
    ("get_peer_warm_us", "peer get, repeated (µs)"),
    ("fence_collect_us", "collecting fence, repeated (µs)"),
    ("barrier_us", "barrier: fence without data (µs)"),
    ("pub_solo_publish_us", "publish, rank 0 alone (µs)"),
    ("pub_solo_lookup_us", "lookup, rank 0 alone (µs)"),
    ("pub_solo_unpublish_us", "unpublish, rank 0 alone (µs)"),
    (
        "pub_all_op_us",
        "publish/lookup/unpublish, all ranks (µs per call)",
    ),
    ("finalize_ms", "finalize (ms)"),
    ("server_init_ms", "server init (ms)"),
    ("register_nspace_ms", "register_nspace of the job (ms)"),
    ("rss_init_kb", "server RSS before register_nspace (KiB)"),
    ("rss_reg_kb", "server RSS after register_nspace (KiB)"),
    ("rss_dereg_kb", "server RSS after deregister_nspace (KiB)"),
];

/// The job rows the host measures, not the clients: the libpmix goal leaves them out.
pub(super) const HOST_METRICS: &[&str] = &[
    "server_init_ms",
    "register_nspace_ms",
    "rss_init_kb",
    "rss_reg_kb",
    "rss_dereg_kb",
];

/// The host's time from starting the first client to the last client's exit: the whole
/// workload of every rank, the first row of the libpmix table.
pub(super) const JOB_MS: &str = "job_ms";
const JOB_MS_LABEL: &str = "whole job, first start to last exit (ms)";

/// The libpmix table's second and third rows: the clients' time split into what their server
/// answers and what libpmix answers itself (`exec::Sample::split_time`).
pub(super) const SPLIT_ROWS: [(&str, &str); 2] = [
    (
        SERVED_MS,
        "all ranks' time in calls the server answers (ms)",
    ),
    (
        LOCAL_MS,
        "all ranks' time in gets libpmix answers itself (ms)",
    ),
];

/// What the label of every row of the libpmix table starts with (`--filter libpmix` selects
/// them all).
pub(super) const LIBPMIX: &str = "libpmix clients";

/// The row the platform floor stands next to: one call of publish, lookup or unpublish, every
/// rank at once. The floor runs in exactly the settings where this row is selected.
pub(super) const PUB_ALL: &str = "pub_all_op_us";

/// What `floor` prints per client: its mean µs per round trip.
pub(crate) const FLOOR: &str = "floor_op_us";

/// Map sizes: node names (generate_regex; generate_ppn with 4 ranks per node) and processes
/// (register_nspace, on 1,000 nodes).
fn map_sizes(quick: bool) -> &'static [u32] {
    if quick { &[10_000] } else { &[10_000, 100_000] }
}

pub(super) fn k(n: u32) -> String {
    format!("{}k", n / 1000)
}

/// One row of the table.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    pub(in crate::bench) config: Config,
    pub(in crate::bench) metric: String,
    pub(in crate::bench) label: String,
}

/// The job rows, each label starting with `prefix`.
fn job_rows(opts: &Options, prefix: &str) -> Vec<Row> {
    rows_of(opts, prefix, JOB_ROWS)
}

/// One row per job setting (each N, pinned and not) for each of `metrics` (metric, label).
fn rows_of(opts: &Options, prefix: &str, metrics: &[(&str, &str)]) -> Vec<Row> {
    let mut rows = Vec::new();
    for (metric, label) in metrics {
        for &n in &opts.ns {
            for pinned in [true, false] {
                let config = Config::Job { n, pinned };
                rows.push(Row {
                    config,
                    metric: (*metric).to_owned(),
                    label: format!("{prefix}{label}, {}", config.label()),
                });
            }
        }
    }
    rows
}

/// The rows of the libpmix table the options ask for: the whole job, the split of the
/// clients' time, then the job rows, for the libpmix client under our server and under
/// OpenPMIx's.
pub(super) fn libpmix_rows(opts: &Options) -> Vec<Row> {
    let prefix = format!("{LIBPMIX}, ");
    let mut rows = rows_of(opts, &prefix, &[(JOB_MS, JOB_MS_LABEL)]);
    rows.extend(rows_of(opts, &prefix, &SPLIT_ROWS));
    rows.extend(job_rows(opts, &prefix));
    filtered(opts, rows)
}

/// Every row of the main table the options ask for, in table order.
pub(super) fn rows(opts: &Options) -> Vec<Row> {
    let mut rows = job_rows(opts, "");
    let sizes = map_sizes(opts.quick);
    let mut maps = |metric: String, label: String| {
        rows.push(Row {
            config: Config::Maps,
            metric,
            label,
        })
    };
    for &n in sizes {
        maps(
            format!("generate_regex_{n}_ms"),
            format!("generate_regex, {} node names (ms)", k(n)),
        );
        maps(
            format!("generate_regex_{n}_bytes"),
            format!("generate_regex, {} node names: map size (bytes)", k(n)),
        );
    }
    for &n in sizes {
        maps(
            format!("generate_ppn_{n}_ms"),
            format!("generate_ppn, {} nodes × 4 ranks (ms)", k(n)),
        );
        maps(
            format!("generate_ppn_{n}_bytes"),
            format!("generate_ppn, {} nodes × 4 ranks: map size (bytes)", k(n)),
        );
    }
    for &n in sizes {
        let p = k(n);
        maps(
            format!("register_nspace_{n}_ms"),
            format!("register_nspace, {p} processes on 1,000 nodes (ms)"),
        );
        maps(
            format!("register_nspace_{n}_rss_kb"),
            format!("register_nspace, {p} processes: RSS added (KiB)"),
        );
        maps(
            format!("deregister_nspace_{n}_ms"),
            format!("deregister_nspace, {p} processes (ms)"),
        );
        maps(
            format!("kept_after_dereg_{n}_kb"),
            format!("deregister_nspace, {p} processes: RSS still added after it (KiB)"),
        );
    }
    filtered(opts, rows)
}

/// The rows `--filter` selects.
pub(super) fn filtered(opts: &Options, rows: Vec<Row>) -> Vec<Row> {
    if opts.filter.is_empty() {
        return rows;
    }
    rows.into_iter()
        .filter(|r| {
            let label = r.label.to_lowercase();
            opts.filter
                .iter()
                .any(|f| label.contains(f.as_str()) || r.metric.contains(f.as_str()))
        })
        .collect()
}

/// The settings in which the platform floor stands next to a selected row, in table order.
pub(super) fn floor_configs(rows: &[Row]) -> Vec<Config> {
    rows.iter()
        .filter(|r| r.metric == PUB_ALL)
        .map(|r| r.config)
        .collect()
}

/// Options for a test: N of 2 and 8, launches of 1 and 8, the rows `filter` selects.
#[cfg(test)]
pub(super) fn opts(filter: &[&str], quick: bool) -> Options {
    Options {
        quick,
        ns: vec![2, 8],
        launch_ns: vec![1, 8],
        filter: filter.iter().map(|s| s.to_string()).collect(),
        openpmix: true,
        runs: 1,
        timeout: std::time::Duration::from_secs(1),
        out: None,
    }
}
