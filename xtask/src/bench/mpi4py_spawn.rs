//! `cargo xtask bench --mpi4py-spawn`: how long `MPI_Comm_spawn` of one child takes through
//! mpi4py on Open MPI 5 (the wheel's venv), under pmixrun and under PRRTE's `prterun`,
//! alternating, in one run.
//!
//! The program is `pmix-tests/py/mpi4py_spawn_time.py`: N parents spawn one child K times,
//! and rank 0 times each spawn from its start to its return (the child's start, its
//! `MPI_Init`, the connection of both sides). With N at least the CPUs, the node is full and
//! every child lands on an oversubscribed node, as in mpi4py's own `test_spawn` run with
//! more processes than CPUs, where this was first seen: pmixrun took 66 s to prterun's 54 s
//! until it told Open MPI the node was oversubscribed (`docs/PLACEMENT.md`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use super::build::{self, Dirs};
use super::capi::prterun_here;
use super::exec;
use super::runs_options;
use super::stats::median;
use crate::multinode::launchers::ompi5;

const USAGE: &str = "\
usage: cargo xtask bench --mpi4py-spawn [--n LIST] [--runs K] [--out FILE]

Times MPI_Comm_spawn of one child (pmix-tests/py/mpi4py_spawn_time.py, 10 spawns per run)
through mpi4py over the Open MPI 5 wheel ($PMIXRS_OMPI5, default /opt/ompi5) under
`pmixrun -n N` and under `prterun -n N` (oversubscribed, unbound), the two alternating, K
runs each (default 3), N in LIST (default 4). Prints the median and minimum spawn of each.";

/// One launch's deadline.
const DEADLINE: Duration = Duration::from_secs(300);

/// Spawns per run.
const SPAWNS: u32 = 10;

#[derive(Clone, Copy, PartialEq)]
enum Side {
    Pmixrun,
    Prterun,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Pmixrun => "pmixrun",
            Side::Prterun => "prterun",
        }
    }
}

/// The spawn times rank 0 printed, in seconds: exactly `spawns` lines `spawn <seconds>`.
fn spawn_times(stdout: &str, spawns: u32) -> Result<Vec<f64>, String> {
    let times: Vec<f64> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("spawn "))
        .map(|t| t.trim().parse().map_err(|_| format!("not a time: {t:?}")))
        .collect::<Result<_, _>>()?;
    if times.len() != spawns as usize {
        return Err(format!("{} of {spawns} spawns reported", times.len()));
    }
    Ok(times)
}

/// One run of `side` with `n` parents: each spawn's time in seconds, or why there is none.
fn launch(
    side: Side,
    n: u32,
    (pmixrun, prterun, python): (&Path, &Path, &Path),
    script: &Path,
    logs: &Path,
    name: &str,
) -> Result<Vec<f64>, String> {
    let mut cmd = match side {
        Side::Pmixrun => {
            let mut c = build::scrubbed(Command::new(pmixrun));
            c.args(["--timeout", &DEADLINE.as_secs().to_string()]);
            c
        }
        Side::Prterun => prterun_here(prterun),
    };
    cmd.args(["-n", &n.to_string()])
        .arg(python)
        .arg(script)
        .arg(SPAWNS.to_string());
    let outcome = exec::run(cmd, DEADLINE + Duration::from_secs(30), logs, name);
    if let Some(f) = outcome.failure {
        return Err(f);
    }
    spawn_times(&outcome.stdout, SPAWNS)
}

/// Entry point of `cargo xtask bench --mpi4py-spawn`.
pub(crate) fn run(args: &[String]) -> ExitCode {
    let parsed = runs_options::parse(args, &[4], 3);
    let o = match super::mode_options(parsed, "--mpi4py-spawn", USAGE) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let dirs = Dirs::new();
    let bin = ompi5().join("bin");
    let (python, prterun): (PathBuf, PathBuf) = (bin.join("python"), bin.join("prterun"));
    let pmixrun = match build::pmixrun(&dirs) {
        Ok(p) if python.is_file() && prterun.is_file() => p,
        Ok(_) => {
            eprintln!(
                "xtask bench --mpi4py-spawn: no Open MPI 5 venv with mpi4py at {} \
                 (bash scripts/install-test-deps.sh as root)",
                ompi5().display()
            );
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("xtask bench --mpi4py-spawn: {e}");
            return ExitCode::FAILURE;
        }
    };
    let script = crate::workspace_root().join("pmix-tests/py/mpi4py_spawn_time.py");
    let tools = (pmixrun.as_path(), prterun.as_path(), python.as_path());
    let mut md = format!(
        "# MPI_Comm_spawn of one child through mpi4py on Open MPI 5\n\n\
         `pmix-tests/py/mpi4py_spawn_time.py`: N parents spawn one child {SPAWNS} times per \
         run, rank 0 timing each spawn; under `pmixrun -n N` and `prterun -n N` (oversubscribed, \
         unbound), alternating, {} runs each. Milliseconds, over every spawn of every run.\n\n\
         | N | pmixrun median | min | prterun median | min | pmixrun/prterun |\n\
         | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        o.runs
    );
    let mut failed = false;
    for &n in &o.ns {
        let mut times: [Vec<f64>; 2] = Default::default();
        for run in 1..=o.runs {
            let order = if run % 2 == 1 {
                [Side::Pmixrun, Side::Prterun]
            } else {
                [Side::Prterun, Side::Pmixrun]
            };
            for side in order {
                let name = format!("mpi4py-spawn-{}-n{n}-run{run}", side.name());
                eprintln!("xtask bench --mpi4py-spawn: {name}");
                match launch(side, n, tools, &script, &dirs.logs, &name) {
                    Ok(t) => times[side as usize].extend(t.iter().map(|s| s * 1e3)),
                    Err(e) => {
                        eprintln!("xtask bench --mpi4py-spawn: {name}: {e}");
                        failed = true;
                    }
                }
            }
        }
        let cell = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.0}"));
        let min = |t: &[f64]| t.iter().copied().min_by(f64::total_cmp);
        let (ours, theirs) = (median(&times[0]), median(&times[1]));
        let ratio = match (ours, theirs) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
            _ => "–".into(),
        };
        let _ = writeln!(
            md,
            "| {n} | {} | {} | {} | {} | {ratio} |",
            cell(ours),
            cell(min(&times[0])),
            cell(theirs),
            cell(min(&times[1])),
        );
    }
    super::mode_report("--mpi4py-spawn", &md, o.out.as_deref(), failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_counts_only_with_every_spawn_reported() {
        assert_eq!(
            spawn_times("spawn 1.5\nother\nspawn 0.25\n", 2),
            Ok(vec![1.5, 0.25])
        );
        assert!(spawn_times("spawn 1.5\n", 2).is_err());
        assert!(spawn_times("spawn x\nspawn 1\n", 2).is_err());
    }
}
