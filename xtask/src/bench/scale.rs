//! `cargo xtask bench --scale`: one daemon's share of a job of up to a million processes
//! (issue 29, "Measured"), on our server and client and on OpenPMIx 4.2's, side by side.
//!
//! Ours is `pmix-scale` (`pmix-tests/src/bin/pmix-scale.rs`), built in release mode; OpenPMIx's
//! is `pmix-tests/openpmix/pmix_bighost.c` with its client `pmix_bigclient.c`, compiled here
//! against Debian's `libpmix-dev`. Both host the same job (N nodes of P ranks, node and
//! process maps only, each stack's own map form) on the daemon of the middle node and run
//! the same three phases, each in a fresh process so that every memory number starts from
//! the same place: `reg0` (registration on a daemon with no local rank), `first` (the
//! registration with P local ranks, one client alone, its gets of a far rank's values) and
//! `many` (K clients at once, the node's memory with all alive, then with K = P a job-wide
//! fence whose other nodes' data the host fabricates). Every run has a deadline, past which
//! its process group is killed; a run that fails is a "failed" cell and a line under
//! FAILURES, and the command exits non-zero. The numbers are reported, never judged here.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use super::build::{self, Dirs};
use super::report::sig3;
use super::{exec, machine};

const USAGE: &str = "\
usage: cargo xtask bench --scale [--nodes LIST] [--ppn P] [--clients K] [--quick]
                                 [--reps R] [--timeout SECS] [--no-openpmix] [--out FILE]

One daemon's share of a job of N nodes x P processes (default --nodes 1000,10000 --ppn 100:
100k and 1M processes), hosted by pmix-scale on pmix-server with pmix-client processes and by
pmix_bighost on OpenPMIx's server with libpmix clients (pmix-tests/openpmix/), with the same
node and process maps; prints a Markdown table per job size:

  - register_nspace on a daemon with P local ranks and with none (ms, server RSS added);
  - the first local client alone: init (ms), RSS it added, its VmRSS and Pss;
  - K local clients (default P) initialising at once: wall time to the last init, and the
    node's memory (server + every client, VmRSS and Pss) with all of them alive;
  - gets of a far rank's HOSTNAME, LOCAL_RANK, NODEID and its node's LOCAL_PEERS, the first
    call and the mean of R repeated ones (default 10000);
  - with K = P, a job-wide collecting fence of 100 bytes per rank (the host fabricates every
    other node's data) and the first get of a far rank's value after it.

options:
    --nodes LIST    node counts, e.g. --nodes 10,100 (each at least 2)
    --ppn P         processes per node (default 100)
    --clients K     local clients started at once, at most P (default P)
    --quick         --nodes 100,1000, --reps 1000
    --reps R        repeated gets per key (default 10000)
    --timeout SECS  deadline of one phase's run (default 900, quick 300)
    --no-openpmix   our stack only
    --out FILE      also write the report to FILE";

struct Opts {
    nodes: Vec<u32>,
    ppn: u32,
    clients: Option<u32>,
    reps: u32,
    timeout: Duration,
    openpmix: bool,
    out: Option<PathBuf>,
}

fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts {
        nodes: vec![1000, 10_000],
        ppn: 100,
        clients: None,
        reps: 10_000,
        timeout: Duration::from_secs(900),
        openpmix: true,
        out: None,
    };
    let (mut quick, mut nodes, mut reps, mut timeout) = (false, None, None, None);
    let number = |a: &str, v: &str| -> Result<u32, String> {
        v.parse()
            .ok()
            .filter(|n| *n > 0)
            .ok_or(format!("{a}: {v:?} is not a positive number"))
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "-h" | "--help" => return Ok(None),
            "--quick" => quick = true,
            "--no-openpmix" => o.openpmix = false,
            "--nodes" => {
                nodes = Some(
                    value()?
                        .split(',')
                        .map(|s| number("--nodes", s.trim()))
                        .collect::<Result<Vec<_>, _>>()?,
                )
            }
            "--ppn" => o.ppn = number(a, value()?)?,
            "--clients" => o.clients = Some(number(a, value()?)?),
            "--reps" => reps = Some(number(a, value()?)?),
            "--timeout" => timeout = Some(Duration::from_secs(number(a, value()?)?.into())),
            "--out" => o.out = Some(value()?.into()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    o.nodes = nodes.unwrap_or(if quick {
        vec![100, 1000]
    } else {
        o.nodes.clone()
    });
    o.reps = reps.unwrap_or(if quick { 1000 } else { o.reps });
    o.timeout = timeout.unwrap_or(Duration::from_secs(if quick { 300 } else { 900 }));
    if o.nodes.iter().any(|n| *n < 2) {
        return Err("--nodes: every job needs at least 2 nodes (a far rank on another)".into());
    }
    if o.nodes.iter().any(|n| n.checked_mul(o.ppn).is_none()) {
        return Err("--nodes × --ppn must fit in 32 bits".into());
    }
    if o.clients.is_some_and(|k| k > o.ppn) {
        return Err("--clients: at most --ppn (the node's local ranks)".into());
    }
    Ok(Some(o))
}

/// The two sides.
#[derive(Clone, Copy, PartialEq)]
enum Side {
    Ours,
    Theirs,
}

const PHASES: [&str; 3] = ["reg0", "first", "many"];

/// What one side printed over its phases at one job size.
#[derive(Default)]
struct Got {
    values: BTreeMap<String, f64>,
    na: BTreeMap<String, String>,
    /// The phases that failed.
    failed: Vec<&'static str>,
}

impl Got {
    /// Takes `phase`'s lines: its RESULTs (reg0's under `reg0_` names) and NAs.
    fn take(&mut self, phase: &'static str, stdout: &str) {
        let prefix = if phase == "reg0" { "reg0_" } else { "" };
        for line in stdout.lines() {
            let words: Vec<&str> = line.splitn(3, ' ').collect();
            match words.as_slice() {
                ["RESULT", m, v] => {
                    if let Ok(v) = v.trim().parse() {
                        // `first` and `many` both register; the table shows `first`'s.
                        if !(phase == "many" && m.starts_with("register_nspace")) {
                            self.values.insert(format!("{prefix}{m}"), v);
                        }
                    }
                }
                ["NA", m, why] => {
                    self.na.insert(format!("{prefix}{m}"), why.to_string());
                }
                _ => {}
            }
        }
    }
}

/// The table's rows: label, metric, divisor to the unit of the label, phase.
fn rows(ppn: u32, clients: u32) -> Vec<(String, String, f64, &'static str)> {
    let mb = 1024.0;
    let mut r: Vec<(String, String, f64, &'static str)> = vec![
        (
            format!("register_nspace, daemon with {ppn} local ranks (ms)"),
            "register_nspace_ms".into(),
            1.0,
            "first",
        ),
        (
            format!("register_nspace, daemon with {ppn} local ranks: server RSS added (MB)"),
            "register_nspace_rss_kb".into(),
            mb,
            "first",
        ),
        (
            "register_nspace, daemon with no local rank (ms)".into(),
            "reg0_register_nspace_ms".into(),
            1.0,
            "reg0",
        ),
        (
            "register_nspace, daemon with no local rank: server RSS added (MB)".into(),
            "reg0_register_nspace_rss_kb".into(),
            mb,
            "reg0",
        ),
        (
            "first local client: init (ms)".into(),
            "first_init_ms".into(),
            1.0,
            "first",
        ),
        (
            "first local client: RSS added by init (MB)".into(),
            "first_rss_added_kb".into(),
            mb,
            "first",
        ),
        (
            "first local client: VmRSS (MB)".into(),
            "first_client_rss_kb".into(),
            mb,
            "first",
        ),
        (
            "first local client: Pss (MB)".into(),
            "first_client_pss_kb".into(),
            mb,
            "first",
        ),
        (
            "server RSS added by the registration and the first client (MB)".into(),
            "first_server_rss_added_kb".into(),
            mb,
            "first",
        ),
    ];
    for (what, key) in [
        ("HOSTNAME", "hostname"),
        ("LOCAL_RANK", "local_rank"),
        ("NODEID", "nodeid"),
    ] {
        for (when, suffix) in [("first", "_first_us"), ("repeated", "_us")] {
            r.push((
                format!("get of a far rank's {what}, {when} (µs)"),
                format!("first_get_{key}{suffix}"),
                1.0,
                "first",
            ));
        }
    }
    for (when, m) in [
        ("first", "first_get_node_peers_first_us"),
        ("repeated", "first_get_node_peers_us"),
    ] {
        r.push((
            format!("get of a far node's LOCAL_PEERS (NODE_INFO + HOSTNAME), {when} (µs)"),
            m.into(),
            1.0,
            "first",
        ));
    }
    let k = clients;
    for (label, m, div) in [
        ("wall time to the last init (ms)", "many_wall_ms", 1.0),
        ("init, mean (ms)", "many_init_mean_ms", 1.0),
        ("init, slowest (ms)", "many_init_max_ms", 1.0),
        (
            "RSS added by init, mean (MB)",
            "many_client_rss_added_kb",
            mb,
        ),
        ("node VmRSS, server + clients (MB)", "many_node_rss_kb", mb),
        ("node Pss, server + clients (MB)", "many_node_pss_kb", mb),
        ("server VmRSS (MB)", "many_server_rss_kb", mb),
        ("clients' VmRSS, sum (MB)", "many_clients_rss_kb", mb),
        ("clients' Pss, sum (MB)", "many_clients_pss_kb", mb),
    ] {
        r.push((
            format!("{k} local clients at once: {label}"),
            m.into(),
            div,
            "many",
        ));
    }
    for (label, m, div) in [
        ("job-wide fence, 100 B per rank, mean (µs)", "fence_us", 1.0),
        (
            "job-wide fence, 100 B per rank, slowest (µs)",
            "fence_max_us",
            1.0,
        ),
        (
            "first get of a far rank's fenced value (µs)",
            "get_after_fence_first_us",
            1.0,
        ),
        (
            "repeated get of a far rank's fenced value (µs)",
            "get_after_fence_us",
            1.0,
        ),
        ("node VmRSS after the fence (MB)", "fenced_node_rss_kb", mb),
        ("node Pss after the fence (MB)", "fenced_node_pss_kb", mb),
        (
            "server VmRSS after the fence (MB)",
            "fenced_server_rss_kb",
            mb,
        ),
        (
            "clients' Pss after the fence, sum (MB)",
            "fenced_clients_pss_kb",
            mb,
        ),
    ] {
        r.push((format!("{k} local clients: {label}"), m.into(), div, "many"));
    }
    r
}

/// One side's cell, and the reason of an `n/a`.
fn cell(got: &Got, metric: &str, div: f64, phase: &str) -> (String, Option<String>) {
    if let Some(v) = got.values.get(metric) {
        return (sig3(v / div), None);
    }
    if got.failed.contains(&phase) {
        return ("failed".into(), None);
    }
    match got.na.get(metric) {
        Some(why) => ("n/a".into(), Some(why.clone())),
        None => ("n/a".into(), Some("not reported".into())),
    }
}

/// Entry point of `cargo xtask bench --scale`.
pub(crate) fn run(args: &[String]) -> ExitCode {
    let o = match super::mode_options(parse(args), "--scale", USAGE) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let started = Instant::now();
    let load_before = machine::load_average();
    let dirs = Dirs::new();
    let ours = match build::cargo_release(&dirs, "pmix-tests", "pmix-scale") {
        Ok(p) => p,
        Err(e) => {
            eprintln!("xtask bench --scale: cannot build pmix-scale: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut notes = Vec::new();
    let theirs = if o.openpmix {
        match build::openpmix_scale(&dirs) {
            Ok(t) => Some(t),
            Err(e) => {
                notes.push(format!("OpenPMIx column not run: {e}"));
                None
            }
        }
    } else {
        notes.push("OpenPMIx column not run (--no-openpmix)".into());
        None
    };
    let clients = o.clients.unwrap_or(o.ppn);
    let deadline = o.timeout + Duration::from_secs(30);
    let mut failures = Vec::new();
    let mut md = String::from("# One daemon of a large job: pmix-rs next to OpenPMIx\n\n");
    for line in machine::machine(false) {
        let _ = writeln!(md, "- {}", line.replace("pmix-bench", "pmix-scale"));
    }
    let _ = writeln!(
        md,
        "- command: `cargo xtask bench --scale {}`",
        args.join(" ")
    );
    let _ = writeln!(md, "- load average (1, 5, 15 min) before: {load_before}");

    for &nodes in &o.nodes {
        let nprocs = u64::from(nodes) * u64::from(o.ppn);
        let mut got = [Got::default(), Got::default()];
        for phase in PHASES {
            for side in [Side::Ours, Side::Theirs] {
                let mut cmd = match (side, &theirs) {
                    (Side::Ours, _) => {
                        let mut c = build::scrubbed(Command::new(&ours));
                        c.arg("host");
                        c
                    }
                    (Side::Theirs, Some((host, client))) => {
                        let mut c = build::scrubbed(Command::new(host));
                        c.arg("--client").arg(client);
                        c
                    }
                    (Side::Theirs, None) => continue,
                };
                cmd.args(["--phase", phase])
                    .args(["--nodes", &nodes.to_string()])
                    .args(["--ppn", &o.ppn.to_string()])
                    .args(["--clients", &clients.to_string()])
                    .args(["--reps", &o.reps.to_string()])
                    .args(["--timeout", &o.timeout.as_secs().to_string()]);
                let who = if side == Side::Ours {
                    "ours"
                } else {
                    "openpmix"
                };
                let name = format!("scale-{who}-{nodes}x{}-{phase}", o.ppn);
                let secs = started.elapsed().as_secs();
                eprintln!(
                    "xtask bench --scale: [{}:{:02}] {name}",
                    secs / 60,
                    secs % 60
                );
                let outcome = exec::run(cmd, deadline, &dirs.logs, &name);
                let g = &mut got[side as usize];
                g.take(phase, &outcome.stdout);
                for line in outcome.stdout.lines() {
                    if let Some(n) = line.strip_prefix("NOTE ") {
                        notes.push(format!("{name}: {n}"));
                    }
                }
                if let Some(f) = outcome.failure {
                    g.failed.push(phase);
                    failures.push(format!("{name}: {f}"));
                }
            }
        }
        let _ = writeln!(
            md,
            "\n## {nodes} nodes × {} ({nprocs} processes)\n\n\
             | row | pmix-rs | OpenPMIx | pmix-rs/OpenPMIx |\n| --- | ---: | ---: | ---: |",
            o.ppn
        );
        // (side, why, the rows it explains)
        let mut reasons: Vec<(&str, String, Vec<String>)> = Vec::new();
        for (label, metric, div, phase) in rows(o.ppn, clients) {
            let (a, why_a) = cell(&got[0], &metric, div, phase);
            let (b, why_b) = if theirs.is_some() {
                cell(&got[1], &metric, div, phase)
            } else {
                ("not run".into(), None)
            };
            let ratio = match (got[0].values.get(&metric), got[1].values.get(&metric)) {
                (Some(x), Some(y)) if *y != 0.0 => sig3(x / y),
                _ => String::new(),
            };
            let _ = writeln!(md, "| {label} | {a} | {b} | {ratio} |");
            for (side, why) in [("pmix-rs", why_a), ("OpenPMIx", why_b)] {
                let Some(why) = why else { continue };
                match reasons.iter_mut().find(|(s, w, _)| *s == side && *w == why) {
                    Some((_, _, labels)) => labels.push(label.clone()),
                    None => reasons.push((side, why, vec![label.clone()])),
                }
            }
        }
        if !reasons.is_empty() {
            md.push_str(
                "
n/a:
",
            );
            for (side, why, labels) in reasons {
                let _ = writeln!(md, "- {side}, {}: {why}", labels.join("; "));
            }
        }
    }
    let _ = writeln!(
        md,
        "\nload average after: {}; {:.0} s in all. Logs: `{}`.",
        machine::load_average(),
        started.elapsed().as_secs_f64(),
        dirs.logs.display()
    );
    if !notes.is_empty() {
        md.push_str("\nNOTES:\n");
        for n in &notes {
            let _ = writeln!(md, "- {n}");
        }
    }
    if !failures.is_empty() {
        md.push_str("\nFAILURES:\n");
        for f in &failures {
            let _ = writeln!(md, "- {f}");
        }
    }
    print!("{md}");
    if let Some(path) = &o.out {
        if let Err(e) = std::fs::write(path, &md) {
            eprintln!("xtask bench --scale: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_and_their_defaults() {
        let args = |s: &str| s.split_whitespace().map(String::from).collect::<Vec<_>>();
        let o = parse(&args("")).ok().flatten().expect("defaults");
        assert_eq!(
            (o.nodes, o.ppn, o.clients, o.reps),
            (vec![1000, 10_000], 100, None, 10_000)
        );
        let o = parse(&args("--quick")).ok().flatten().expect("quick");
        assert_eq!((o.nodes, o.reps), (vec![100, 1000], 1000));
        let o = parse(&args("--nodes 10,100 --ppn 10 --clients 4"))
            .ok()
            .flatten()
            .expect("sizes");
        assert_eq!((o.nodes, o.ppn, o.clients), (vec![10, 100], 10, Some(4)));
        assert!(parse(&args("--nodes 1")).is_err());
        assert!(parse(&args("--ppn 10 --clients 11")).is_err());
        assert!(parse(&args("--nodes 100000 --ppn 100000")).is_err());
    }

    #[test]
    fn a_phases_lines_become_cells() {
        let mut g = Got::default();
        g.take("reg0", "RESULT register_nspace_ms 1.5\nNOTE x\n");
        g.take(
            "first",
            "RESULT register_nspace_ms 2\nNA first_get_nodeid_us NOT-FOUND\n",
        );
        g.take(
            "many",
            "RESULT register_nspace_ms 9\nRESULT many_wall_ms 3\n",
        );
        g.failed.push("many");
        assert_eq!(g.values["reg0_register_nspace_ms"], 1.5);
        assert_eq!(g.values["register_nspace_ms"], 2.0);
        assert_eq!(cell(&g, "many_wall_ms", 1.0, "many").0, "3.00");
        let (c, why) = cell(&g, "first_get_nodeid_us", 1.0, "first");
        assert_eq!((c.as_str(), why.as_deref()), ("n/a", Some("NOT-FOUND")));
        assert_eq!(cell(&g, "fence_us", 1.0, "many").0, "failed");
    }
}
