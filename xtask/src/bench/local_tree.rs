//! `cargo xtask bench --local-tree`: pmixrun's tree on logical nodes of this machine, with a
//! test-only delay on every link, to see the barrier grow with the tree's depth.
//!
//! The kernel here has no netem, so the delay is pmix-tree's own (`pmixrun
//! --tree-link-delay-us`, hidden): every message waits that long before it is written. For
//! each fan-out and each number N of logical nodes (one PMI-1 rank each, `--launcher local`)
//! it measures the barrier, then fits `barrier = a·depth + b·N` by least squares over all the
//! runs: `a` should come out near two link delays (up and down per level), `b` is what each
//! node adds on this machine (CPU, not network). Labelled as what it is: processes on one
//! host with a simulated link latency.

use std::fmt::Write as _;
use std::path::Path;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use pmix_tree::Topology;

use super::build::{self, Dirs};

const USAGE: &str = "\
usage: cargo xtask bench --local-tree [--max N] [--delay-us D] [--barriers B] [--out FILE]

Runs `pmixrun --launcher local --host n1,...,nN --radix K --tree-link-delay-us D` with one
PMI-1 rank per logical node (xtask/c/pmi1_bench.c) for N = 1, 2, 4, ... up to --max (default
64) and K = 2, 16, 64; prints the barrier per run and the least-squares fit
barrier = a·depth + b·N (µs). D defaults to 1000 µs, B to 20 barriers per run.";

/// The fan-outs measured.
const RADIXES: [u32; 3] = [2, 16, 64];

/// One run's deadline.
const DEADLINE: Duration = Duration::from_secs(300);

struct Opts {
    max: u32,
    delay_us: u64,
    barriers: u32,
    out: Option<std::path::PathBuf>,
}

fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts {
        max: 64,
        delay_us: 1000,
        barriers: 20,
        out: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "-h" | "--help" => return Ok(None),
            "--max" => o.max = value()?.parse().map_err(|_| "--max: not a number")?,
            "--delay-us" => {
                o.delay_us = value()?.parse().map_err(|_| "--delay-us: not a number")?
            }
            "--barriers" => {
                o.barriers = value()?.parse().map_err(|_| "--barriers: not a number")?
            }
            "--out" => o.out = Some(value()?.into()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if o.max < 1 || o.barriers < 1 {
        return Err("--max and --barriers must be at least 1".into());
    }
    Ok(Some(o))
}

/// The mean barrier of one run, in µs, over its ranks.
fn measure(pmixrun: &Path, bench: &Path, n: u32, radix: u32, o: &Opts) -> Result<f64, String> {
    let hosts: Vec<String> = (1..=n).map(|i| format!("n{i}")).collect();
    let mut cmd = Command::new(pmixrun);
    cmd.args(["--launcher", "local", "--pmi", "pmi1", "--timeout"])
        .arg(DEADLINE.as_secs().to_string())
        .args(["--radix", &radix.to_string()])
        .args(["--tree-link-delay-us", &o.delay_us.to_string()])
        .args(["--host", &hosts.join(",")])
        .args(["-n", &n.to_string()])
        .arg(bench)
        .args(["1", &o.barriers.to_string()])
        .stdin(Stdio::null());
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {}: {e}", pmixrun.display()))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let values: Vec<f64> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("barrier_us "))
        .filter_map(|v| v.trim().parse().ok())
        .collect();
    if !out.status.success() || values.len() != n as usize {
        return Err(format!(
            "{n} nodes, radix {radix}: {} ({} of {n} ranks reported): {}",
            out.status,
            values.len(),
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ));
    }
    Ok(values.iter().sum::<f64>() / f64::from(n))
}

/// Least squares of `y = a·x1 + b·x2` (no constant): (a, b).
fn fit(points: &[(f64, f64, f64)]) -> Option<(f64, f64)> {
    let (mut s11, mut s12, mut s22, mut s1y, mut s2y) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(x1, x2, y) in points {
        s11 += x1 * x1;
        s12 += x1 * x2;
        s22 += x2 * x2;
        s1y += x1 * y;
        s2y += x2 * y;
    }
    let det = s11 * s22 - s12 * s12;
    if det.abs() < f64::EPSILON {
        return None;
    }
    Some(((s1y * s22 - s2y * s12) / det, (s2y * s11 - s1y * s12) / det))
}

/// Entry point of `cargo xtask bench --local-tree`.
pub(crate) fn run(args: &[String]) -> ExitCode {
    let o = match super::mode_options(parse(args), "--local-tree", USAGE) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let dirs = Dirs::new();
    let (pmixrun, bench) = match (build::pmixrun(&dirs), build::pmi1_bench(&dirs)) {
        (Ok(p), Ok(b)) => (p, b),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("xtask bench --local-tree: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut md = format!(
        "# The tree on logical nodes with a link delay\n\n`pmixrun --launcher local` on this \
         machine, one PMI-1 rank per logical node, every tree message delayed {} µs \
         (`--tree-link-delay-us`; no netem here), {} barriers per run: processes on one host \
         with a simulated link latency, not a cluster.\n\n\
         | nodes | radix | depth | barrier (µs) |\n| ---: | ---: | ---: | ---: |\n",
        o.delay_us, o.barriers
    );
    let mut points = Vec::new();
    for radix in RADIXES {
        let mut n = 1;
        while n <= o.max {
            let depth = Topology::new(n + 1, radix).depth();
            eprintln!("xtask bench --local-tree: {n} nodes, radix {radix}");
            match measure(&pmixrun, &bench, n, radix, &o) {
                Ok(us) => {
                    let _ = writeln!(md, "| {n} | {radix} | {depth} | {us:.0} |");
                    points.push((f64::from(depth), f64::from(n), us));
                }
                Err(e) => {
                    eprintln!("xtask bench --local-tree: {e}");
                    return ExitCode::FAILURE;
                }
            }
            n *= 2;
        }
    }
    match fit(&points) {
        Some((a, b)) => {
            let _ = writeln!(
                md,
                "\nLeast squares over the {} runs: barrier ≈ {a:.0} µs · depth + {b:.1} µs · N \
                 (two link delays per level would be {} µs).",
                points.len(),
                2 * o.delay_us
            );
        }
        None => md.push_str("\nNo fit: the runs do not tell depth from N.\n"),
    }
    print!("{md}");
    if let Some(path) = &o.out {
        if let Err(e) = std::fs::write(path, &md) {
            eprintln!(
                "xtask bench --local-tree: cannot write {}: {e}",
                path.display()
            );
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fit_finds_the_coefficients_of_exact_data() {
        let points: Vec<(f64, f64, f64)> = [(1.0, 2.0), (2.0, 4.0), (3.0, 16.0), (2.0, 64.0)]
            .iter()
            .map(|&(d, n)| (d, n, 2000.0 * d + 5.0 * n))
            .collect();
        let (a, b) = fit(&points).unwrap_or_else(|| panic!("no fit"));
        assert!(
            (a - 2000.0).abs() < 1e-6 && (b - 5.0).abs() < 1e-6,
            "{a} {b}"
        );
        assert!(fit(&[(1.0, 1.0, 3.0), (2.0, 2.0, 6.0)]).is_none());
    }
}
