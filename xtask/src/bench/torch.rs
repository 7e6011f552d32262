//! `cargo xtask bench --torch`: a PyTorch job from launch to exit under pmixrun and under
//! torchrun, alternating, in one run.
//!
//! The job is `pmix-tests/py/torch_train.py` (gloo, `init_method="env://"`, a small DDP model,
//! an all-reduce, a barrier), the one `pmix-tests/tests/torch.rs` checks; every launch's
//! output is checked here too (one line per rank, the same weights on every rank). Next to
//! the launchers, the floor: the same number of interpreters importing torch at once, started
//! by this program with no launcher and no rendezvous, the least any launcher's run of that
//! job can take on this machine. Both launchers' processes run with `OMP_NUM_THREADS=1`, which
//! torchrun sets for its workers and pmixrun, like mpirun, does not.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use super::build::{self, Dirs};
use super::exec;
use super::runs_options;
use super::stats::median;

const USAGE: &str = "\
usage: cargo xtask bench --torch [--n LIST] [--runs K] [--out FILE]

Times pmix-tests/py/torch_train.py from launch to exit under `pmixrun -n N python` and
under `torchrun --nproc-per-node N` (the venv at $PMIXRS_TORCH, default /opt/torch), the two
alternating, K runs each (default 5), N in LIST (default 4), with the floor: N interpreters
importing torch at once with no launcher. Prints median and minimum of each.";

/// One launch's deadline.
const DEADLINE: Duration = Duration::from_secs(300);

/// The sides of a row.
#[derive(Clone, Copy, PartialEq)]
enum Side {
    Pmixrun,
    Torchrun,
    Floor,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Pmixrun => "pmixrun",
            Side::Torchrun => "torchrun",
            Side::Floor => "floor",
        }
    }
}

/// The venv's interpreter and torchrun.
fn venv() -> Result<(PathBuf, PathBuf), String> {
    let prefix =
        std::env::var_os("PMIXRS_TORCH").map_or_else(|| "/opt/torch".into(), PathBuf::from);
    let python = prefix.join("bin").join("python");
    let torchrun = prefix.join("bin").join("torchrun");
    if !python.is_file() || !torchrun.is_file() {
        return Err(format!(
            "no PyTorch venv at {} (bash scripts/install-test-deps.sh as root)",
            prefix.display()
        ));
    }
    Ok((python, torchrun))
}

/// Checks a launch's output: one `torch rank R of N ...` line per rank, every rank's weights
/// the same.
fn check(stdout: &str, n: u32) -> Result<(), String> {
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("torch rank "))
        .collect();
    let weights: Vec<&str> = lines.iter().filter_map(|l| l.rsplit(' ').next()).collect();
    if lines.len() != n as usize {
        return Err(format!("{} of {n} ranks finished", lines.len()));
    }
    if weights.windows(2).any(|w| w[0] != w[1]) {
        return Err(format!("the ranks disagree on the weights: {weights:?}"));
    }
    Ok(())
}

/// The floor: `n` interpreters importing torch at once, no launcher; elapsed until the last
/// exits.
fn floor(python: &Path, n: u32) -> Result<Duration, String> {
    let start = Instant::now();
    let children: Vec<_> = (0..n)
        .map(|_| {
            Command::new(python)
                .args(["-c", "import torch, torch.distributed"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .spawn()
                .map_err(|e| format!("cannot start {}: {e}", python.display()))
        })
        .collect::<Result<_, _>>()?;
    for mut c in children {
        let status = c.wait().map_err(|e| format!("waiting: {e}"))?;
        if !status.success() {
            return Err(format!("importing torch: {status}"));
        }
    }
    Ok(start.elapsed())
}

/// One launch of `side` with `n` ranks: its elapsed time, or why there is none.
fn launch(
    side: Side,
    n: u32,
    tools: &(PathBuf, PathBuf, PathBuf),
    script: &Path,
    logs: &Path,
    name: &str,
) -> Result<Duration, String> {
    let (pmixrun, python, torchrun) = tools;
    let cmd = match side {
        Side::Floor => return floor(python, n),
        Side::Pmixrun => {
            let mut c = Command::new(pmixrun);
            // torchrun gives its workers OMP_NUM_THREADS=1 (when more than one runs and the
            // variable is unset); pmixrun sets no thread count, as mpirun sets none. The same
            // here, so that the rows compare launchers, not thread counts.
            c.args(["--timeout", &DEADLINE.as_secs().to_string()])
                .args(["-x", "OMP_NUM_THREADS=1"])
                .args(["-n", &n.to_string()])
                .arg(python)
                .arg(script);
            c
        }
        Side::Torchrun => {
            let mut c = Command::new(torchrun);
            c.args(["--nproc-per-node", &n.to_string()]).arg(script);
            c
        }
    };
    let outcome = exec::run(cmd, DEADLINE + Duration::from_secs(30), logs, name);
    if let Some(f) = outcome.failure {
        return Err(f);
    }
    check(&outcome.stdout, n)?;
    Ok(outcome.elapsed)
}

/// Entry point of `cargo xtask bench --torch`.
pub(crate) fn run(args: &[String]) -> ExitCode {
    let o = match super::mode_options(runs_options::parse(args, &[4], 5), "--torch", USAGE) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let dirs = Dirs::new();
    let tools = match (build::pmixrun(&dirs), venv()) {
        (Ok(p), Ok((python, torchrun))) => (p, python, torchrun),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("xtask bench --torch: {e}");
            return ExitCode::FAILURE;
        }
    };
    let script = crate::workspace_root().join("pmix-tests/py/torch_train.py");
    let mut md = format!(
        "# A PyTorch job from launch to exit\n\n`pmix-tests/py/torch_train.py` (gloo, a small \
         DDP model, an all-reduce, a barrier) under `pmixrun -n N python` and `torchrun \
         --nproc-per-node N`, alternating, {} runs each, both with `OMP_NUM_THREADS=1` (torchrun's \
         default for its workers); the floor is N interpreters importing torch at once with no \
         launcher. Milliseconds.\n\n\
         | N | pmixrun | min | torchrun | min | floor | min | pmixrun/torchrun | \
         (pmixrun − floor)/(torchrun − floor) |\n\
         | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        o.runs
    );
    let mut failed = false;
    for &n in &o.ns {
        let mut times: [Vec<f64>; 3] = Default::default();
        for run in 1..=o.runs {
            let order = if run % 2 == 1 {
                [Side::Pmixrun, Side::Torchrun, Side::Floor]
            } else {
                [Side::Floor, Side::Torchrun, Side::Pmixrun]
            };
            for side in order {
                let name = format!("torch-{}-n{n}-run{run}", side.name());
                eprintln!("xtask bench --torch: {name}");
                match launch(side, n, &tools, &script, &dirs.logs, &name) {
                    Ok(d) => times[side as usize].push(d.as_secs_f64() * 1e3),
                    Err(e) => {
                        eprintln!("xtask bench --torch: {name}: {e}");
                        failed = true;
                    }
                }
            }
        }
        let mins: Vec<Option<f64>> = times
            .iter()
            .map(|t| t.iter().copied().min_by(f64::total_cmp))
            .collect();
        let meds: Vec<Option<f64>> = times.iter().map(|t| median(t)).collect();
        let cell = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.0}"));
        let ratio = match (meds[0], meds[1]) {
            (Some(p), Some(t)) if t > 0.0 => format!("{:.2}", p / t),
            _ => "–".into(),
        };
        let over_floor = match (meds[0], meds[1], meds[2]) {
            (Some(p), Some(t), Some(f)) if t > f => format!("{:.2}", (p - f) / (t - f)),
            _ => "–".into(),
        };
        let _ = writeln!(
            md,
            "| {n} | {} | {} | {} | {} | {} | {} | {ratio} | {over_floor} |",
            cell(meds[0]),
            cell(mins[0]),
            cell(meds[1]),
            cell(mins[1]),
            cell(meds[2]),
            cell(mins[2]),
        );
    }
    super::mode_report("--torch", &md, o.out.as_deref(), failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_counts_only_if_every_rank_agrees() {
        let line = |r: u32, w: &str| format!("torch rank {r} of 2 sum 3 weights {w}\n");
        assert!(check(&(line(0, "1.5") + &line(1, "1.5")), 2).is_ok());
        assert!(check(&line(0, "1.5"), 2).is_err());
        assert!(check(&(line(0, "1.5") + &line(1, "1.6")), 2).is_err());
    }
}
