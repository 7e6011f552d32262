//! `cargo xtask bench --recovery`: how long after a rank of a recoverable job exits its
//! survivors are told (`EVENT_PROC_TERMINATED`), on one node and on logical nodes of this
//! machine, under `pmixrun --enable-recovery`.
//!
//! The job is `pmix-test-client recovery <last rank> 3 timed` (its scenario in
//! `pmix-tests/src/bin/pmix-test-client.rs`): once every rank is up, the last rank says the
//! time and exits with status 3; every other rank says when its event handler ran. A run
//! counts only if pmixrun exits 3 and every survivor was told; its figure is the slowest
//! survivor's time minus the exit's (nanoseconds since the epoch, one machine's clock).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use super::build::{self, Dirs};
use super::exec;
use super::stats::median;

const USAGE: &str = "\
usage: cargo xtask bench --recovery [--n LIST] [--runs K] [--out FILE]

Times, under `pmixrun --enable-recovery`, from a rank's exit (status 3) to the slowest
survivor's event handler (EVENT_PROC_TERMINATED), N ranks for N in LIST (default 4,16), on
one node and on two logical nodes of this machine (`--launcher local`), K runs each (default
5). Prints the median and the minimum in microseconds.";

/// One run's deadline.
const DEADLINE: Duration = Duration::from_secs(60);

struct Opts {
    ns: Vec<u32>,
    runs: u32,
    out: Option<PathBuf>,
}

fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts {
        ns: vec![4, 16],
        runs: 5,
        out: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "-h" | "--help" => return Ok(None),
            "--n" => {
                o.ns = value()?
                    .split(',')
                    .map(|n| n.trim().parse().map_err(|_| format!("--n: {n:?}")))
                    .collect::<Result<_, _>>()?
            }
            "--runs" => o.runs = value()?.parse().map_err(|_| "--runs: not a number")?,
            "--out" => o.out = Some(value()?.into()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if o.runs < 1 || o.ns.is_empty() || o.ns.iter().any(|n| *n < 2 || n % 2 == 1) {
        return Err("--runs must be at least 1, and every N even and at least 2".into());
    }
    Ok(Some(o))
}

/// Where the ranks run: one node, or two logical nodes of this machine.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    OneNode,
    TwoLogicalNodes,
}

impl Layout {
    fn name(self) -> &'static str {
        match self {
            Layout::OneNode => "one node",
            Layout::TwoLogicalNodes => "two logical nodes",
        }
    }
}

/// The slowest survivor's `told at` minus the failed rank's `exiting at`, in microseconds,
/// from a run of `n` ranks.
fn latency_us(stdout: &str, n: u32) -> Result<f64, String> {
    let times = |what: &str| -> Vec<u128> {
        stdout
            .lines()
            .filter_map(|l| l.split_once(&format!(": {what} ")))
            .filter_map(|(_, t)| t.trim().parse().ok())
            .collect()
    };
    let (exits, told) = (times("exiting at"), times("told at"));
    let [exit] = exits[..] else {
        return Err(format!("{} exit times", exits.len()));
    };
    if told.len() != n as usize - 1 {
        return Err(format!("{} of {} survivors told", told.len(), n - 1));
    }
    let slowest = told.iter().max().copied().unwrap_or(exit);
    let ns = slowest
        .checked_sub(exit)
        .ok_or("a survivor was told before the exit")?;
    Ok(ns as f64 / 1e3)
}

fn one(
    pmixrun: &Path,
    client: &Path,
    layout: Layout,
    n: u32,
    dirs: &Dirs,
    name: &str,
) -> Result<f64, String> {
    let mut cmd = build::scrubbed(Command::new(pmixrun));
    let tmp = dirs.target().join("xtask-bench").join("recovery-tmp");
    std::fs::create_dir_all(&tmp).map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
    cmd.env("TMPDIR", &tmp);
    if layout == Layout::TwoLogicalNodes {
        let per = n / 2;
        cmd.args([
            "--launcher",
            "local",
            "--host",
            &format!("n1:{per},n2:{per}"),
        ]);
    }
    cmd.args([
        "--enable-recovery",
        "--timeout",
        &DEADLINE.as_secs().to_string(),
    ])
    .args(["-n", &n.to_string()])
    .arg(client)
    .args(["recovery", &(n - 1).to_string(), "3", "timed"]);
    let outcome = exec::run(cmd, DEADLINE + Duration::from_secs(30), &dirs.logs, name);
    match outcome.failure {
        // The run fails as it must: with the failed rank's status.
        Some(f) if f.starts_with("host exited with exit status: 3;") => {}
        Some(f) => return Err(f),
        None => return Err("pmixrun exited 0; it must exit with the failed rank's 3".into()),
    }
    latency_us(&outcome.stdout, n)
}

/// Entry point of `cargo xtask bench --recovery`.
pub(crate) fn run(args: &[String]) -> ExitCode {
    let o = match super::mode_options(parse(args), "--recovery", USAGE) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let dirs = Dirs::new();
    let built = build::pmixrun(&dirs).and_then(|p| {
        Ok((
            p,
            build::cargo_release(&dirs, "pmix-tests", "pmix-test-client")?,
        ))
    });
    let (pmixrun, client) = match built {
        Ok(b) => b,
        Err(e) => {
            eprintln!("xtask bench --recovery: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut md = format!(
        "# Recovery: a rank's exit to its survivors' event\n\n`pmixrun --enable-recovery -n N \
         pmix-test-client recovery <N-1> 3 timed`: from the last rank's exit to the slowest \
         survivor's EVENT_PROC_TERMINATED handler, {} runs each, microseconds.\n\n\
         | layout | N | median | min |\n| --- | ---: | ---: | ---: |\n",
        o.runs
    );
    let mut failed = false;
    for layout in [Layout::OneNode, Layout::TwoLogicalNodes] {
        for &n in &o.ns {
            let mut times = Vec::new();
            for run in 1..=o.runs {
                let slug = if layout == Layout::OneNode {
                    "one"
                } else {
                    "two"
                };
                let name = format!("recovery-{slug}-n{n}-run{run}");
                eprintln!("xtask bench --recovery: {name}");
                match one(&pmixrun, &client, layout, n, &dirs, &name) {
                    Ok(us) => times.push(us),
                    Err(e) => {
                        eprintln!("xtask bench --recovery: {name}: {e}");
                        failed = true;
                    }
                }
            }
            let min = times.iter().copied().min_by(f64::total_cmp);
            let cell = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.0}"));
            let _ = writeln!(
                md,
                "| {} | {n} | {} | {} |",
                layout.name(),
                cell(median(&times)),
                cell(min)
            );
        }
    }
    super::mode_report("--recovery", &md, o.out.as_deref(), failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slowest_survivor_counts_from_the_exit() {
        let out = "rank 3: exiting at 1000000\nrank 0: told at 1250000\nrank 1: told at \
                   1900000\nrank 2: told at 1500000\nrank 0: survivors' fence done\n";
        assert_eq!(latency_us(out, 4), Ok(900.0));
        assert!(latency_us(out, 5).is_err(), "a survivor missing");
        assert!(latency_us("rank 0: told at 5\n", 2).is_err(), "no exit");
        assert!(
            latency_us("rank 1: exiting at 9\nrank 0: told at 5\n", 2).is_err(),
            "told before the exit"
        );
    }
}
