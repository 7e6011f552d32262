//! The rows of the table, the numbers measured for them, and the report: the table, the
//! platform floor next to the publish/lookup/unpublish rows, the libpmix clients under our
//! server and under OpenPMIx's, the launch rows (their table is `launch`'s), the goals judged
//! on them, and what went wrong.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::process::Command;
use std::time::Duration;

use super::Options;
use super::exec::{LOCAL_MS, SERVED_MS, Sample};
use super::launch::{self, Mpich};
use super::machine::{first_line, machine};

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
const JOB_ROWS: &[(&str, &str)] = &[
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
const HOST_METRICS: &[&str] = &[
    "server_init_ms",
    "register_nspace_ms",
    "rss_init_kb",
    "rss_reg_kb",
    "rss_dereg_kb",
];

/// The host's time from starting the first client to the last client's exit: the whole
/// workload of every rank, the first row of the libpmix table.
const JOB_MS: &str = "job_ms";
const JOB_MS_LABEL: &str = "whole job, first start to last exit (ms)";

/// The libpmix table's second and third rows: the clients' time split into what their server
/// answers and what libpmix answers itself (`exec::Sample::split_time`).
const SPLIT_ROWS: [(&str, &str); 2] = [
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
const LIBPMIX: &str = "libpmix clients";

/// The row the platform floor stands next to: one call of publish, lookup or unpublish, every
/// rank at once. The floor runs in exactly the settings where this row is selected.
const PUB_ALL: &str = "pub_all_op_us";

/// What `floor` prints per client: its mean µs per round trip.
pub(crate) const FLOOR: &str = "floor_op_us";

/// Map sizes: node names (generate_regex; generate_ppn with 4 ranks per node) and processes
/// (register_nspace, on 1,000 nodes).
fn map_sizes(quick: bool) -> &'static [u32] {
    if quick { &[10_000] } else { &[10_000, 100_000] }
}

fn k(n: u32) -> String {
    format!("{}k", n / 1000)
}

/// One row of the table.
#[derive(Clone, Debug)]
pub(crate) struct Row {
    pub(super) config: Config,
    pub(super) metric: String,
    pub(super) label: String,
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
fn libpmix_rows(opts: &Options) -> Vec<Row> {
    let prefix = format!("{LIBPMIX}, ");
    let mut rows = rows_of(opts, &prefix, &[(JOB_MS, JOB_MS_LABEL)]);
    rows.extend(rows_of(opts, &prefix, &SPLIT_ROWS));
    rows.extend(job_rows(opts, &prefix));
    filtered(opts, rows)
}

/// Every row of the main table the options ask for, in table order.
fn rows(opts: &Options) -> Vec<Row> {
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

/// The launch rows the options ask for, in table order.
fn launch_rows(opts: &Options) -> Vec<Row> {
    filtered(opts, launch::rows(opts))
}

/// The rows `--filter` selects.
fn filtered(opts: &Options, rows: Vec<Row>) -> Vec<Row> {
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
fn floor_configs(rows: &[Row]) -> Vec<Config> {
    rows.iter()
        .filter(|r| r.metric == PUB_ALL)
        .map(|r| r.config)
        .collect()
}

/// One setting to run, and which stacks run there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub(crate) config: Config,
    /// Rows of the main (or launch) table need it: ours and OpenPMIx (or the launchers).
    pub(crate) main: bool,
    /// Rows of the libpmix table need it: the libpmix client under our server and under
    /// OpenPMIx's, with its default storage and with `hash`.
    pub(crate) libpmix: bool,
    /// The platform floor runs there too.
    pub(crate) floor: bool,
}

/// The runs the selected rows need, in the order they are run.
pub(crate) fn configs_needed(opts: &Options) -> Vec<Plan> {
    let rows = rows(opts);
    let floor = floor_configs(&rows);
    let main: Vec<Config> = rows
        .into_iter()
        .chain(launch_rows(opts))
        .map(|r| r.config)
        .collect();
    let libpmix: Vec<Config> = libpmix_rows(opts).into_iter().map(|r| r.config).collect();
    let mut configs: Vec<Config> = main.iter().chain(&libpmix).copied().collect();
    configs.sort_by_key(|c| match *c {
        Config::Job { n, pinned } => (0, None, n, !pinned),
        Config::Launch { mpich, n } => (1, Some(mpich), n, false),
        Config::Maps => (2, None, 0, false),
    });
    configs.dedup();
    configs
        .into_iter()
        .map(|config| Plan {
            config,
            main: main.contains(&config),
            libpmix: libpmix.contains(&config),
            floor: floor.contains(&config),
        })
        .collect()
}

/// Every number measured, by side, run setting and metric (several with `--runs`).
#[derive(Default)]
pub(crate) struct Measured {
    values: BTreeMap<(Stack, Config, String), Vec<f64>>,
    /// Every side and setting that was run, even if a run gave no number.
    ran: BTreeSet<(Stack, Config)>,
}

impl Measured {
    /// One run's numbers; an empty sample records a run that gave none.
    pub(crate) fn add(&mut self, stack: Stack, config: Config, sample: &Sample) {
        self.ran.insert((stack, config));
        let mut put = |metric: &str, v: f64| {
            self.values
                .entry((stack, config, metric.to_owned()))
                .or_default()
                .push(v);
        };
        for (metric, v) in &sample.values {
            put(metric, *v);
        }
        if config == Config::Maps {
            for n in [10_000, 100_000] {
                let before = sample.values.get(&format!("rss_before_reg_{n}_kb"));
                let after = sample.values.get(&format!("rss_after_dereg_{n}_kb"));
                if let (Some(b), Some(a)) = (before, after) {
                    put(&format!("kept_after_dereg_{n}_kb"), a - b);
                }
            }
        }
    }

    /// The median of the runs.
    pub(super) fn get(&self, stack: Stack, config: Config, metric: &str) -> Option<f64> {
        let mut v = self
            .values
            .get(&(stack, config, metric.to_owned()))?
            .clone();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let mid = v.len() / 2;
        Some(if v.len() % 2 == 1 {
            v[mid]
        } else {
            (v[mid - 1] + v[mid]) / 2.0
        })
    }

    /// The least of the runs.
    pub(super) fn min(&self, stack: Stack, config: Config, metric: &str) -> Option<f64> {
        self.values
            .get(&(stack, config, metric.to_owned()))?
            .iter()
            .copied()
            .min_by(f64::total_cmp)
    }

    fn ratio(&self, config: Config, metric: &str) -> Option<f64> {
        self.ratio_of(Stack::Ours, Stack::Openpmix, config, metric)
    }

    /// `a`'s median over `b`'s.
    fn ratio_of(&self, a: Stack, b: Stack, config: Config, metric: &str) -> Option<f64> {
        let a = self.get(a, config, metric)?;
        let b = self.get(b, config, metric)?;
        (b != 0.0).then(|| a / b)
    }

    /// A side's publish/lookup/unpublish call (all ranks) in units of the platform floor.
    fn over_floor(&self, stack: Stack, config: Config) -> Option<f64> {
        let v = self.get(stack, config, PUB_ALL)?;
        let floor = self.get(Stack::Floor, config, FLOOR)?;
        (floor != 0.0).then(|| v / floor)
    }

    fn ran(&self, stack: Stack) -> bool {
        self.ran_where(stack, |_| true)
    }

    /// Whether `stack` was run in a setting `which` selects.
    pub(super) fn ran_where(&self, stack: Stack, which: impl Fn(Config) -> bool) -> bool {
        self.ran.iter().any(|(s, c)| *s == stack && which(*c))
    }
}

/// Three significant digits (whole numbers from 1000 on), no exponent.
pub(super) fn sig3(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    if v.abs() >= 1000.0 {
        return format!("{v:.0}");
    }
    // Round first, so that 0.000999 becomes 0.00100 and not 0.001000.
    let scale = 10f64.powi(2 - v.abs().log10().floor() as i32);
    let rounded = (v * scale).round() / scale;
    let magnitude = rounded.abs().log10().floor() as i32;
    let decimals = (2 - magnitude).clamp(0, 6) as usize;
    format!("{rounded:.decimals$}")
}

/// A goal of issue 6: the worst of some ratios must stay at or under `target`.
struct Goal {
    name: &'static str,
    target: f64,
    metrics: &'static [&'static str],
    /// Only these N (empty: all).
    ns: &'static [u32],
    /// Followed by a line on the platform floor: floor/OpenPMIx, the best ratio one socket
    /// round trip per call allows.
    floor: bool,
}

const GOALS: &[Goal] = &[
    Goal {
        name: "job-level get",
        target: 0.01,
        metrics: &["get_job_solo_us", "get_job_all_us"],
        ns: &[],
        floor: false,
    },
    Goal {
        name: "cached peer get",
        target: 0.01,
        metrics: &["get_peer_warm_us"],
        ns: &[],
        floor: false,
    },
    Goal {
        name: "barrier at N=2 and N=64",
        target: 0.5,
        metrics: &["barrier_us"],
        ns: &[2, 64],
        floor: false,
    },
    Goal {
        name: "collecting fence (first, repeated) at N=2 and N=64",
        target: 0.5,
        metrics: &["fence_first_us", "fence_collect_us"],
        ns: &[2, 64],
        floor: false,
    },
    Goal {
        name: "publish/lookup/unpublish",
        target: 0.25,
        metrics: &[
            "pub_solo_publish_us",
            "pub_solo_lookup_us",
            "pub_solo_unpublish_us",
            "pub_all_op_us",
        ],
        ns: &[],
        floor: true,
    },
    Goal {
        name: "init",
        target: 0.2,
        metrics: &["init_ms"],
        ns: &[],
        floor: false,
    },
    Goal {
        name: "register_nspace of 100k processes, time",
        target: 0.2,
        metrics: &["register_nspace_100000_ms"],
        ns: &[],
        floor: false,
    },
    Goal {
        name: "register_nspace of 100k processes, memory",
        target: 0.2,
        metrics: &["register_nspace_100000_rss_kb"],
        ns: &[],
        floor: false,
    },
];

/// The line after `g`: the platform floor divided by OpenPMIx's call, at the setting where
/// that is largest, against `g`'s target. No server doing one socket round trip per call can
/// have a ratio below it there.
fn floor_line(m: &Measured, rows: &[Row], g: &Goal) -> [String; 4] {
    let mut worst: Option<(f64, Config)> = None;
    for config in floor_configs(rows) {
        let floor = m.get(Stack::Floor, config, FLOOR);
        let theirs = m.get(Stack::Openpmix, config, PUB_ALL);
        if let (Some(f), Some(t)) = (floor, theirs) {
            let x = f / t;
            if t != 0.0 && worst.is_none_or(|(w, _)| x > w) {
                worst = Some((x, config));
            }
        }
    }
    let name = format!("{}: platform floor / OpenPMIx, all ranks", g.name);
    let target = format!("≤ {}", g.target);
    match worst {
        None => [name, target, "not measured".into(), "not judged".into()],
        Some((x, config)) => [
            name,
            target,
            format!("{} ({})", sig3(x), config.label()),
            if x <= g.target {
                "within reach of one round trip per call"
            } else {
                "out of reach of one round trip per call"
            }
            .into(),
        ],
    }
}

/// (goal, target, worst, where, verdict) lines.
fn judge(m: &Measured, rows: &[Row]) -> Vec<[String; 4]> {
    let mut out = Vec::new();
    for g in GOALS {
        let mut worst: Option<(f64, &Row)> = None;
        let mut missing = 0;
        for r in rows
            .iter()
            .filter(|r| g.metrics.contains(&r.metric.as_str()))
        {
            if let Config::Job { n, .. } = r.config {
                if !g.ns.is_empty() && !g.ns.contains(&n) {
                    continue;
                }
            }
            match m.ratio(r.config, &r.metric) {
                Some(x) if worst.is_none_or(|(w, _)| x > w) => worst = Some((x, r)),
                Some(_) => {}
                None => missing += 1,
            }
        }
        let target = format!("≤ {}", g.target);
        out.push(match worst {
            None => [
                g.name.into(),
                target,
                "not measured".into(),
                "not judged".into(),
            ],
            Some((x, r)) => {
                let mut verdict = if x <= g.target { "met" } else { "NOT met" }.to_owned();
                if missing > 0 {
                    verdict.push_str(&format!(" ({missing} rows without a ratio)"));
                }
                [
                    g.name.into(),
                    target,
                    format!("{} ({})", sig3(x), r.label),
                    verdict,
                ]
            }
        });
        if g.floor {
            out.push(floor_line(m, rows, g));
        }
    }
    // Memory given back: our own before/after, no ratio; OpenPMIx's for reference.
    let mut worst: Option<(f64, String)> = None;
    let mut theirs: Option<f64> = None;
    let growth = |stack: Stack, config: Config, before: &str, after: &str| {
        let b = m.get(stack, config, before)?;
        let a = m.get(stack, config, after)?;
        (b > 0.0).then(|| (a - b) / b)
    };
    let configs: Vec<Config> = {
        let mut c: Vec<Config> = rows.iter().map(|r| r.config).collect();
        c.dedup();
        c
    };
    for config in configs {
        let pairs: Vec<(String, String, String)> = match config {
            Config::Job { .. } => {
                vec![("rss_init_kb".into(), "rss_dereg_kb".into(), config.label())]
            }
            Config::Maps => [10_000, 100_000]
                .iter()
                .map(|n| {
                    (
                        format!("rss_before_reg_{n}_kb"),
                        format!("rss_after_dereg_{n}_kb"),
                        format!("register_nspace of {} processes", k(*n)),
                    )
                })
                .collect(),
            Config::Launch { .. } => Vec::new(),
        };
        for (before, after, place) in pairs {
            if let Some(g) = growth(Stack::Ours, config, &before, &after) {
                if worst.as_ref().is_none_or(|(w, _)| g > *w) {
                    worst = Some((g, place));
                    theirs = growth(Stack::Openpmix, config, &before, &after);
                }
            }
        }
    }
    out.push(match worst {
        None => [
            "server RSS after deregister, vs before register (ours)".into(),
            "≤ +10%".into(),
            "not measured".into(),
            "not judged".into(),
        ],
        Some((g, place)) => [
            "server RSS after deregister, vs before register (ours)".into(),
            "≤ +10%".into(),
            format!(
                "{:+.0}% ({place}; OpenPMIx there: {})",
                g * 100.0,
                theirs.map_or("–".into(), |t| format!("{:+.0}%", t * 100.0))
            ),
            if g <= 0.10 { "met" } else { "NOT met" }.into(),
        ],
    });
    out
}

/// The report as printed, and as written by `--out`.
pub(crate) struct Text {
    pub(crate) terminal: String,
    pub(crate) markdown: String,
}

/// Everything the report is made of.
pub(crate) struct Context<'a> {
    pub(crate) opts: &'a Options,
    pub(crate) measured: &'a Measured,
    pub(crate) notes: &'a [String],
    pub(crate) failures: &'a [String],
    pub(crate) elapsed: Duration,
    /// The load average at the start and at the end.
    pub(crate) load: [String; 2],
    pub(crate) args: &'a [String],
}

/// The platform floor next to each side's publish/lookup/unpublish call (all ranks), in the
/// settings where that row is selected; empty if it is in none.
fn floor_table(opts: &Options, m: &Measured, rows: &[Row]) -> String {
    let configs = floor_configs(rows);
    if configs.is_empty() {
        return String::new();
    }
    let floor_ran = m.ran(Stack::Floor);
    let theirs_ran = m.ran(Stack::Openpmix);
    let mut t = format!(
        "\nPlatform floor (`xtask/c/floor.c`, no PMIx): N clients and one epoll server, each \
         client doing {} blocking 64-byte request/echo round trips over a Unix socketpair, all \
         at once; next to it, one publish/lookup/unpublish call of all ranks, divided by it.\n\n",
        opts.floor_round_trips()
    );
    let _ = writeln!(
        t,
        "| setting | floor (µs per round trip) | ours ÷ floor | OpenPMIx ÷ floor |"
    );
    let _ = writeln!(t, "| --- | ---: | ---: | ---: |");
    for config in configs {
        let floor = m.get(Stack::Floor, config, FLOOR);
        let ours = m.over_floor(Stack::Ours, config);
        let theirs = m.over_floor(Stack::Openpmix, config);
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} |",
            config.label(),
            match floor {
                Some(v) => sig3(v),
                None if floor_ran => "n/a".into(),
                None => "not run".into(),
            },
            ours.map_or("–".into(), sig3),
            match theirs {
                Some(v) => sig3(v),
                None if theirs_ran => "–".into(),
                None => "not run".into(),
            },
        );
    }
    t
}

/// A cell of `stack`: its median, or why there is none ("not run": the stack ran nowhere in
/// this run, and a note says why; "n/a": it ran, but gave no number here).
fn cell(m: &Measured, stack: Stack, row: &Row) -> String {
    match m.get(stack, row.config, &row.metric) {
        Some(v) => sig3(v),
        None if m.ran(stack) => "n/a".into(),
        None => "not run".into(),
    }
}

/// The libpmix table: the same client program under our server and under OpenPMIx's, with
/// OpenPMIx's default storage module and with `hash`; empty if no row of it is selected.
fn libpmix_table(m: &Measured, rows: &[Row]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut t = String::from(
        "\nlibpmix clients: the OpenPMIx client program (`xtask/c/bench_client.c`, the same \
         workloads) under our server (`pmix-bench job --client`: its OpenPMIx 4.2 front-end, \
         loopback TCP, clients offered PMIX_GDS_MODULE=ds21,hash: they pick ds21, shared memory \
         our server writes) and under OpenPMIx's own \
         (`bench_host.c`), with its default MCA settings (gds ds21; the runs of the main \
         table's OpenPMIx column) and with PMIX_MCA_gds=hash. The whole job is the host's time \
         from starting the first client to the last one's exit. The next rows split the \
         clients' timed steps, summed over all ranks: the calls the server answers (init, put \
         + commit, the fences, the first pass of peer gets, barriers, \
         publish/lookup/unpublish, finalize) and the gets libpmix answers from what it holds \
         (the job-level gets and the repeated passes of peer gets).\n\n",
    );
    let _ = writeln!(
        t,
        "| metric | libpmix on ours | on OpenPMIx | ours/OpenPMIx | on OpenPMIx, gds hash | \
         ours/hash |"
    );
    let _ = writeln!(t, "| --- | ---: | ---: | ---: | ---: | ---: |");
    for r in rows {
        let ratio = |b| {
            m.ratio_of(Stack::LibpmixOurs, b, r.config, &r.metric)
                .map_or("–".into(), sig3)
        };
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} |",
            r.label,
            cell(m, Stack::LibpmixOurs, r),
            cell(m, Stack::Openpmix, r),
            ratio(Stack::Openpmix),
            cell(m, Stack::OpenpmixHash, r),
            ratio(Stack::OpenpmixHash),
        );
    }
    t
}

/// The goal lines of the libpmix table: the libpmix clients faster under our server than
/// under OpenPMIx's, with its default storage and with `hash`; as a whole job at every N, and
/// in every client row (not the host's rows); judged on the largest ratio of the medians.
fn libpmix_goals(m: &Measured, rows: &[Row]) -> Vec<[String; 4]> {
    let theirs = [
        (Stack::Openpmix, "default MCA, gds ds21"),
        (Stack::OpenpmixHash, "gds hash"),
    ];
    fn whole(r: &&Row) -> bool {
        r.metric == JOB_MS
    }
    fn served(r: &&Row) -> bool {
        r.metric == SERVED_MS
    }
    fn each(r: &&Row) -> bool {
        r.metric != JOB_MS
            && !SPLIT_ROWS.iter().any(|(m, _)| *m == r.metric)
            && !HOST_METRICS.contains(&r.metric.as_str())
    }
    let mut out = Vec::new();
    for (what, select) in [
        ("whole job at every N", whole as fn(&&Row) -> bool),
        ("time in calls the server answers at every N", served),
        ("every client row", each),
    ] {
        for (stack, how) in theirs {
            let name =
                format!("libpmix clients faster under ours than under OpenPMIx ({how}), {what}");
            out.push(libpmix_goal(m, rows.iter().filter(select), stack, name));
        }
    }
    out
}

/// One goal line of the libpmix table: the worst of `rows`' ratios, ours over `theirs`.
fn libpmix_goal<'a>(
    m: &Measured,
    rows: impl Iterator<Item = &'a Row>,
    theirs: Stack,
    name: String,
) -> [String; 4] {
    let target = "< 1".to_owned();
    let mut worst: Option<(f64, &Row)> = None;
    let mut missing = 0;
    for r in rows {
        match m.ratio_of(Stack::LibpmixOurs, theirs, r.config, &r.metric) {
            Some(x) if worst.is_none_or(|(w, _)| x > w) => worst = Some((x, r)),
            Some(_) => {}
            None => missing += 1,
        }
    }
    match worst {
        None => [name, target, "not measured".into(), "not judged".into()],
        Some((x, r)) => {
            let mut verdict = if x < 1.0 { "met" } else { "NOT met" }.to_owned();
            if missing > 0 {
                verdict.push_str(&format!(" ({missing} rows without a ratio)"));
            }
            let label = r.label.strip_prefix(LIBPMIX).unwrap_or(&r.label);
            let label = label.trim_start_matches(", ");
            [name, target, format!("{} ({label})", sig3(x)), verdict]
        }
    }
}

pub(crate) fn render(cx: &Context<'_>) -> Text {
    let (opts, m, notes, failures, args) = (cx.opts, cx.measured, cx.notes, cx.failures, cx.args);
    let elapsed = cx.elapsed;
    let rows = rows(opts);
    let theirs_ran = m.ran(Stack::Openpmix);
    let mut table = String::new();
    // A filter may select launch rows only.
    if !rows.is_empty() {
        let _ = writeln!(table, "| metric | ours | OpenPMIx | ours/OpenPMIx |");
        let _ = writeln!(table, "| --- | ---: | ---: | ---: |");
    }
    for r in &rows {
        let ours = m.get(Stack::Ours, r.config, &r.metric);
        let theirs = m.get(Stack::Openpmix, r.config, &r.metric);
        let ratio = m.ratio(r.config, &r.metric);
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} |",
            r.label,
            ours.map_or("n/a".into(), sig3),
            match theirs {
                Some(v) => sig3(v),
                None if theirs_ran => "n/a".into(),
                None => "not run".into(),
            },
            ratio.map_or("–".into(), sig3)
        );
    }
    let floor = floor_table(opts, m, &rows);
    let libpmix = libpmix_rows(opts);
    let libpmix_text = libpmix_table(m, &libpmix);
    let launches = launch_rows(opts);
    let launch = launch::table(opts, m, &launches);
    let mut goals = String::new();
    let _ = writeln!(goals, "| goal | target | worst ratio (where) | verdict |");
    let _ = writeln!(goals, "| --- | --- | --- | --- |");
    let mut verdicts = judge(m, &rows);
    verdicts.extend(libpmix_goals(m, &libpmix));
    verdicts.extend(launch::goals(m, &launches));
    for [name, target, worst, verdict] in verdicts {
        let _ = writeln!(goals, "| {name} | {target} | {worst} | {verdict} |");
    }
    let mut tail = String::new();
    if !notes.is_empty() {
        let _ = writeln!(tail, "\nNotes:");
        for n in notes {
            let _ = writeln!(tail, "- {n}");
        }
    }
    if !failures.is_empty() {
        let _ = writeln!(tail, "\nFAILURES:");
        for f in failures {
            let _ = writeln!(tail, "- {f}");
        }
    }
    let secs = elapsed.as_secs();
    let took = format!("{} min {:02} s", secs / 60, secs % 60);
    let command = std::iter::once("cargo xtask bench".to_owned())
        .chain(args.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    let load = format!(
        "load average (1/5/15 min) at the start {}, at the end {}",
        cx.load[0], cx.load[1]
    );
    let terminal = format!(
        "\n{table}{floor}{libpmix_text}{launch}\nGoals, judged on this run:\n\n{goals}{tail}\nrun time: {took}; {load}\n"
    );
    let date = first_line(Command::new("date").args(["-u", "+%Y-%m-%d"])).unwrap_or_default();
    let mut head = format!("- date: {date}\n- command: `{command}` (run time {took})\n");
    for line in machine(!launches.is_empty()) {
        let _ = writeln!(head, "- {line}");
    }
    let _ = writeln!(head, "- {load}");
    let markdown = format!(
        "{head}\n{table}{floor}{libpmix_text}{launch}\nGoals, judged on this run:\n\n{goals}{tail}"
    );
    Text { terminal, markdown }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_significant_digits() {
        assert_eq!(sig3(0.0690), "0.0690");
        assert_eq!(sig3(12.345), "12.3");
        assert_eq!(sig3(1234.5), "1234");
        assert_eq!(sig3(0.5), "0.500");
        assert_eq!(sig3(0.000_999_9), "0.00100");
        assert_eq!(sig3(999.7), "1000");
    }

    fn opts(filter: &[&str], quick: bool) -> Options {
        Options {
            quick,
            ns: vec![2, 8],
            launch_ns: vec![1, 8],
            filter: filter.iter().map(|s| s.to_string()).collect(),
            openpmix: true,
            runs: 1,
            timeout: Duration::from_secs(1),
            out: None,
        }
    }

    /// A setting the main (or launch) rows need; job settings are needed by the libpmix rows
    /// too in these tests' filters, which match theirs as well.
    fn plan(config: Config, floor: bool) -> Plan {
        Plan {
            config,
            main: true,
            libpmix: matches!(config, Config::Job { .. }),
            floor,
        }
    }

    #[test]
    fn a_filter_runs_only_what_its_rows_need() {
        let barrier = configs_needed(&opts(&["barrier"], false));
        assert_eq!(barrier.len(), 4, "every job setting, no maps");
        assert!(barrier.iter().all(|p| !p.floor), "no floor without its row");
        assert_eq!(
            configs_needed(&opts(&["n=8, pinned"], false)),
            [plan(Config::Job { n: 8, pinned: true }, true)]
        );
        assert_eq!(
            configs_needed(&opts(&["register_nspace, 100k"], false)),
            [plan(Config::Maps, false)]
        );
        assert!(configs_needed(&opts(&["100k"], true)).is_empty());
        // The floor runs with the all-ranks row, in every setting it is selected in...
        let all = configs_needed(&opts(&["publish/lookup/unpublish, all ranks"], false));
        assert_eq!(all.len(), 4);
        assert!(all.iter().all(|p| p.floor && p.config != Config::Maps));
        // ...and only there: not with rank 0 alone, nor in a setting filtered out.
        let solo = configs_needed(&opts(&["publish, rank 0 alone"], false));
        assert_eq!(solo.len(), 4);
        assert!(solo.iter().all(|p| !p.floor));
        assert_eq!(
            configs_needed(&opts(
                &["all ranks (µs per call), n=2, unpinned", "barrier"],
                false
            )),
            [
                plan(Config::Job { n: 2, pinned: true }, false),
                plan(
                    Config::Job {
                        n: 2,
                        pinned: false
                    },
                    true
                ),
                plan(Config::Job { n: 8, pinned: true }, false),
                plan(
                    Config::Job {
                        n: 8,
                        pinned: false
                    },
                    false
                ),
            ]
        );
        // The full run: the floor in every job setting, not with the maps.
        let full = configs_needed(&opts(&[], false));
        assert_eq!(full.iter().filter(|p| p.floor).count(), 4);
        assert_eq!(full.last(), Some(&plan(Config::Maps, false)));
        // The launch rows: after the jobs, each MPICH's counts together; none without them.
        let launch = |mpich, n| plan(Config::Launch { mpich, n }, false);
        assert_eq!(
            full.iter()
                .filter(|p| matches!(p.config, Config::Launch { .. }))
                .count(),
            4
        );
        assert_eq!(
            configs_needed(&opts(&["mpi hello"], false)),
            [
                launch(Mpich::Debian, 1),
                launch(Mpich::Debian, 8),
                launch(Mpich::Venv, 1),
                launch(Mpich::Venv, 8),
            ]
        );
        assert_eq!(
            configs_needed(&opts(&["debian mpich, n=8"], false)),
            [launch(Mpich::Debian, 8)]
        );
        assert!(
            barrier
                .iter()
                .all(|p| !matches!(p.config, Config::Launch { .. }))
        );
    }

    #[test]
    fn the_launch_rows_take_their_counts_from_n() {
        let parse = |args: &[&str]| {
            let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            Options::parse(&args).map(|o| (o.ns, o.launch_ns))
        };
        assert_eq!(parse(&[]), Ok((vec![2, 8, 32, 64], vec![1, 8, 32])));
        assert_eq!(parse(&["--quick"]), Ok((vec![2, 8], vec![1, 8])));
        assert_eq!(
            parse(&["--quick", "--n", "4,16"]),
            Ok((vec![4, 16], vec![4, 16]))
        );
    }

    #[test]
    fn the_floor_table_and_its_goal_line() {
        let mut m = Measured::default();
        let pinned = Config::Job { n: 2, pinned: true };
        let unpinned = Config::Job {
            n: 2,
            pinned: false,
        };
        // (setting, ours, OpenPMIx, floor runs): the floor's median is its middle run.
        for (config, ours, theirs, floors) in [
            (pinned, 30.0, 100.0, [10.0, 20.0, 500.0]),
            (unpinned, 80.0, 120.0, [35.0, 40.0, 45.0]),
        ] {
            for (stack, metric, v) in [
                (Stack::Ours, PUB_ALL, ours),
                (Stack::Openpmix, PUB_ALL, theirs),
            ] {
                let mut s = Sample::default();
                s.values.insert(metric.into(), v);
                m.add(stack, config, &s);
            }
            for f in floors {
                m.add(
                    Stack::Floor,
                    config,
                    &Sample::parse(&format!(
                        "CLIENT 0 floor_op_us {}\nCLIENT 1 floor_op_us {}\n",
                        f - 1.0,
                        f + 1.0
                    )),
                );
            }
        }
        let o = opts(&["publish/lookup/unpublish, all ranks"], false);
        let selected = rows(&o);
        let table = floor_table(&o, &m, &selected);
        assert!(table.contains("600 blocking"), "{table}");
        assert!(
            table.contains("| N=2, pinned | 20.0 | 1.50 | 5.00 |"),
            "{table}"
        );
        assert!(
            table.contains("| N=2, unpinned | 40.0 | 2.00 | 3.00 |"),
            "{table}"
        );
        // N=8 is selected but has no numbers: the floor ran, just not there.
        assert!(table.contains("| N=8, pinned | n/a | – | – |"), "{table}");
        let verdicts = judge(&m, &selected);
        let publish = verdicts
            .iter()
            .position(|v| v[0] == "publish/lookup/unpublish")
            .unwrap_or(usize::MAX);
        // The goal itself is judged as before: its worst ratio, 80/120.
        assert_eq!(
            verdicts[publish][2],
            "0.667 (publish/lookup/unpublish, all ranks (µs per call), N=2, unpinned)"
        );
        assert_eq!(verdicts[publish][3], "NOT met (2 rows without a ratio)");
        // The floor line: floor/OpenPMIx at its largest, 40/120 unpinned (pinned: 20/100).
        let floor = &verdicts[publish + 1];
        assert!(floor[0].contains("platform floor"), "{floor:?}");
        assert_eq!(floor[1], "≤ 0.25");
        assert_eq!(floor[2], "0.333 (N=2, unpinned)");
        assert_eq!(floor[3], "out of reach of one round trip per call");
        // No floor rows selected: no table, and the line says so.
        let barrier = rows(&opts(&["barrier"], false));
        assert_eq!(floor_table(&o, &m, &barrier), "");
        let goal = GOALS.iter().find(|g| g.floor);
        let line = goal.map(|g| floor_line(&m, &barrier, g));
        assert_eq!(line.map(|l| l[2].clone()).as_deref(), Some("not measured"));
    }

    #[test]
    fn the_floor_table_without_floor_or_openpmix() {
        let mut m = Measured::default();
        let config = Config::Job { n: 2, pinned: true };
        let mut s = Sample::default();
        s.values.insert(PUB_ALL.into(), 30.0);
        m.add(Stack::Ours, config, &s);
        let o = opts(&["all ranks (µs per call), n=2, pinned"], true);
        let table = floor_table(&o, &m, &rows(&o));
        assert!(table.contains("150 blocking"), "{table}");
        assert!(
            table.contains("| N=2, pinned | not run | – | not run |"),
            "{table}"
        );
    }

    #[test]
    fn medians_ratios_and_goals() {
        let mut m = Measured::default();
        let job = Config::Job { n: 2, pinned: true };
        for (stack, v) in [(Stack::Ours, 0.05), (Stack::Openpmix, 10.0)] {
            let mut s = Sample::default();
            s.values.insert("get_job_solo_us".into(), v);
            s.values.insert("rss_init_kb".into(), 1000.0);
            s.values.insert("rss_dereg_kb".into(), 1200.0);
            m.add(stack, job, &s);
        }
        assert_eq!(m.ratio(job, "get_job_solo_us"), Some(0.005));
        let rows = rows(&opts(&[], false));
        let verdicts = judge(&m, &rows);
        assert_eq!(verdicts[0][3], "met (7 rows without a ratio)");
        assert_eq!(verdicts[2][2], "not measured");
        let memory = verdicts.last().map(|v| v[3].clone());
        assert_eq!(memory.as_deref(), Some("NOT met"));
    }

    #[test]
    fn the_libpmix_filter_runs_only_the_libpmix_stacks() {
        let only = configs_needed(&opts(&["libpmix"], false));
        assert_eq!(only.len(), 4, "every job setting, no maps, no launch");
        assert!(only.iter().all(|p| p.libpmix && !p.main && !p.floor));
        assert!(rows(&opts(&["libpmix"], false)).is_empty());
        assert!(launch_rows(&opts(&["libpmix"], false)).is_empty());
        let barrier = libpmix_rows(&opts(&["libpmix clients, barrier"], false));
        assert_eq!(barrier.len(), 4);
        assert!(barrier.iter().all(|r| r.metric == "barrier_us"));
        assert_eq!(
            configs_needed(&opts(
                &["libpmix clients, barrier: fence without data (µs), n=8, pinned"],
                false
            )),
            [Plan {
                config: Config::Job { n: 8, pinned: true },
                main: false,
                libpmix: true,
                floor: false,
            }]
        );
        // Without any libpmix row (the maps, the launch rows), none of its stacks runs.
        let maps = configs_needed(&opts(&["register_nspace, 10k"], false));
        assert!(maps.iter().all(|p| !p.libpmix));
    }

    #[test]
    fn the_libpmix_table_and_its_goal_lines() {
        let mut m = Measured::default();
        let two = Config::Job { n: 2, pinned: true };
        let add = |m: &mut Measured, stack, config, metric: &str, v: f64| {
            let mut s = Sample::default();
            s.values.insert(metric.into(), v);
            m.add(stack, config, &s);
        };
        for (stack, barrier, init, server) in [
            (Stack::LibpmixOurs, 50.0, 4.0, 1.0),
            (Stack::Openpmix, 100.0, 20.0, 0.5),
            (Stack::OpenpmixHash, 80.0, 5.0, 0.5),
        ] {
            add(&mut m, stack, two, "barrier_us", barrier);
            add(&mut m, stack, two, "init_ms", init);
            add(&mut m, stack, two, "server_init_ms", server);
        }
        let o = opts(
            &[
                "libpmix clients, barrier",
                "libpmix clients, init",
                "libpmix clients, server init",
            ],
            false,
        );
        let rows = libpmix_rows(&o);
        assert_eq!(rows.len(), 12);
        let t = libpmix_table(&m, &rows);
        assert!(
            t.contains("| libpmix clients, barrier: fence without data (µs), N=2, pinned | 50.0 | 100 | 0.500 | 80.0 | 0.625 |"),
            "{t}"
        );
        assert!(
            t.contains("| libpmix clients, init (ms), N=8, unpinned | n/a | n/a | – | n/a | – |"),
            "{t}"
        );
        let g = libpmix_goals(&m, &rows);
        assert_eq!(g.len(), 6);
        // No whole-job row selected: those lines are not judged.
        assert!(
            g[0][0].contains("whole job") && g[0][0].contains("ds21"),
            "{:?}",
            g[0]
        );
        assert_eq!(g[0][3], "not judged");
        assert!(
            g[1][0].contains("whole job") && g[1][0].contains("gds hash"),
            "{:?}",
            g[1]
        );
        assert!(g[2][0].contains("calls the server answers"), "{:?}", g[2]);
        assert_eq!(g[2][3], "not judged");
        // The host's rows (server init, 2.0 here) are not judged; the clients' worst is init.
        assert!(g[4][0].contains("every client row"), "{:?}", g[4]);
        assert_eq!(
            g[4][2],
            "0.500 (barrier: fence without data (µs), N=2, pinned)"
        );
        assert_eq!(g[4][3], "met (6 rows without a ratio)");
        assert_eq!(g[5][2], "0.800 (init (ms), N=2, pinned)");
        assert!(g[5][0].contains("gds hash"), "{:?}", g[5]);
        // The whole job: its own rows, first in the table, judged on their own.
        for (stack, v) in [
            (Stack::LibpmixOurs, 900.0),
            (Stack::Openpmix, 1000.0),
            (Stack::OpenpmixHash, 800.0),
        ] {
            add(&mut m, stack, two, JOB_MS, v);
        }
        let o = opts(
            &["libpmix clients, whole job, first start to last exit (ms), n=2, pinned"],
            false,
        );
        let whole = libpmix_rows(&o);
        assert_eq!(whole.len(), 1);
        let t = libpmix_table(&m, &whole);
        assert!(t.contains("| 900 | 1000 | 0.900 | 800 | 1.13 |"), "{t}");
        let g = libpmix_goals(&m, &whole);
        assert_eq!(
            g[0][2],
            "0.900 (whole job, first start to last exit (ms), N=2, pinned)"
        );
        assert_eq!(g[0][3], "met");
        assert_eq!(g[1][3], "NOT met");
        assert_eq!(g[2][3], "not judged");
        assert_eq!(g[4][3], "not judged");
        // The time in calls the server answers: its own rows and goal lines, and not part of
        // "every client row".
        for (stack, v) in [
            (Stack::LibpmixOurs, 300.0),
            (Stack::Openpmix, 250.0),
            (Stack::OpenpmixHash, 400.0),
        ] {
            add(&mut m, stack, two, SERVED_MS, v);
        }
        let served = libpmix_rows(&opts(
            &["calls the server answers (ms), n=2, pinned"],
            false,
        ));
        assert_eq!(served.len(), 1, "{served:?}");
        let g = libpmix_goals(&m, &served);
        assert_eq!(g[2][3], "NOT met");
        assert!(
            g[2][2].starts_with("1.20 (all ranks' time in calls"),
            "{:?}",
            g[2]
        );
        assert_eq!(g[3][3], "met");
        assert_eq!(g[4][3], "not judged");
        let all = libpmix_rows(&opts(&["libpmix"], false));
        assert_eq!(all.len(), 4 * (JOB_ROWS.len() + 3));
        assert_eq!(all[0].metric, JOB_MS);
        assert_eq!(all[4].metric, SERVED_MS);
        assert_eq!(all[8].metric, LOCAL_MS);
        // Nothing of OpenPMIx ran: "not run", and the goals are not judged.
        let mut ours_only = Measured::default();
        add(&mut ours_only, Stack::LibpmixOurs, two, "barrier_us", 50.0);
        let t = libpmix_table(&ours_only, &rows);
        assert!(
            t.contains("| libpmix clients, barrier: fence without data (µs), N=2, pinned | 50.0 | not run | – | not run | – |"),
            "{t}"
        );
        assert_eq!(libpmix_goals(&ours_only, &rows)[2][3], "not judged");
        assert_eq!(libpmix_table(&m, &[]), "");
    }
}
