//! `cargo xtask bench --capi`: Open MPI 5's `MPI_Init` on its own `libpmix.so.2` (OpenPMIx
//! 5.0.11, in the wheel) and on pmix-rs's (`pmix-capi`), under the same launcher, alternating,
//! in one run.
//!
//! The program is `xtask/c/mpi_init_time.c`, built with Open MPI 5's `mpicc`: each rank times
//! its `MPI_Init`, rank 0 prints the slowest and the mean. The library is chosen by the ranks'
//! `LD_LIBRARY_PATH`, never the launcher's: under `pmixrun` (which links no libpmix) by
//! pmixrun's environment, which its ranks inherit; under PRRTE's `prterun` (an OpenPMIx server
//! itself) by `-x LD_LIBRARY_PATH=...`, with processes unbound (`--bind-to none`). Each run's
//! output is checked (one line, the right size); the launch to exit is timed too.
//!
//! The client-side rows (get, fence, init of the libpmix client program on both libraries,
//! under both servers) are the main run's "Client libraries" table (`--filter libpmix`).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use super::build::{self, Dirs, compile_source};
use super::exec;
use super::stats::median;
use crate::multinode::launchers::ompi5;

const USAGE: &str = "\
usage: cargo xtask bench --capi [--n LIST] [--runs K] [--launchers L,...] [--out FILE]

Times Open MPI 5's MPI_Init (xtask/c/mpi_init_time.c, built with $PMIXRS_OMPI5/bin/mpicc,
default /opt/ompi5) on Open MPI's own libpmix.so.2 and on pmix-rs's, under each launcher of L
(pmixrun, prterun; default both), N ranks for N in LIST (default 2,8,32,64), the two
libraries alternating, K runs each (default 5). Prints the medians: the slowest rank's
MPI_Init, the mean rank's, and the launch to exit.";

/// One launch's deadline.
const DEADLINE: Duration = Duration::from_secs(120);

/// The launchers, both one node.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Launcher {
    Pmixrun,
    Prterun,
}

impl Launcher {
    fn name(self) -> &'static str {
        match self {
            Launcher::Pmixrun => "pmixrun",
            Launcher::Prterun => "prterun",
        }
    }
}

/// The client library a run's ranks load.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Lib {
    /// The `libpmix.so.2` of the Open MPI wheel (OpenPMIx 5.0.11), found by its `RUNPATH`.
    Openpmix,
    /// pmix-rs's, first on the ranks' `LD_LIBRARY_PATH`.
    Ours,
}

struct Opts {
    ns: Vec<u32>,
    runs: u32,
    launchers: Vec<Launcher>,
    out: Option<PathBuf>,
}

fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts {
        ns: vec![2, 8, 32, 64],
        runs: 5,
        launchers: vec![Launcher::Pmixrun, Launcher::Prterun],
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
            "--launchers" => {
                o.launchers = value()?
                    .split(',')
                    .map(|l| match l.trim() {
                        "pmixrun" => Ok(Launcher::Pmixrun),
                        "prterun" => Ok(Launcher::Prterun),
                        other => Err(format!("--launchers: unknown {other:?}")),
                    })
                    .collect::<Result<_, _>>()?
            }
            "--out" => o.out = Some(value()?.into()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if o.runs < 1 || o.ns.is_empty() || o.ns.contains(&0) || o.launchers.is_empty() {
        return Err("--runs and every N must be at least 1, and one launcher is needed".into());
    }
    Ok(Some(o))
}

/// One run's numbers: the slowest and the mean rank's `MPI_Init` (µs), and launch to exit
/// (ms).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Sample {
    max_us: f64,
    mean_us: f64,
    exit_ms: f64,
}

/// Reads rank 0's line, `mpi_init <size> max_us <max> mean_us <mean>`, of a job of `n`.
fn read_line(stdout: &str, n: u32) -> Result<(f64, f64), String> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("mpi_init "))
        .ok_or("no mpi_init line")?;
    let f: Vec<&str> = line.split_whitespace().collect();
    match f.as_slice() {
        ["mpi_init", size, "max_us", max, "mean_us", mean] => {
            if size.parse::<u32>() != Ok(n) {
                return Err(format!("size {size}, expected {n}"));
            }
            let num = |s: &str| s.parse::<f64>().map_err(|_| format!("not a number: {s:?}"));
            Ok((num(max)?, num(mean)?))
        }
        _ => Err(format!("unexpected line {line:?}")),
    }
}

/// What the runs need, built.
struct Tools {
    pmixrun: PathBuf,
    prterun: PathBuf,
    program: PathBuf,
    capi: PathBuf,
}

fn build_tools(dirs: &Dirs) -> Result<Tools, String> {
    let bin = ompi5().join("bin");
    let (mpicc, prterun) = (bin.join("mpicc"), bin.join("prterun"));
    if !mpicc.is_file() || !prterun.is_file() {
        return Err(format!(
            "no Open MPI 5 at {} (bash scripts/install-test-deps.sh as root)",
            ompi5().display()
        ));
    }
    let src = crate::workspace_root().join("xtask/c/mpi_init_time.c");
    let program = compile_source(
        &mpicc,
        &src,
        &dirs.target().join("xtask-bench/mpi_init_time-openmpi5"),
        &[],
    )?;
    Ok(Tools {
        pmixrun: build::pmixrun(dirs)?,
        prterun,
        program,
        capi: build::capi(dirs)?,
    })
}

/// PRRTE's `prterun` on this machine alone, up to its job's options: as root if we are,
/// oversubscribed, its processes unbound.
pub(super) fn prterun_here(prterun: &Path) -> Command {
    let mut c = build::scrubbed(Command::new(prterun));
    if nix::unistd::geteuid().is_root() {
        c.arg("--allow-run-as-root");
    }
    c.args(["--map-by", ":OVERSUBSCRIBE", "--bind-to", "none"]);
    c
}

/// The command of one run.
fn command(t: &Tools, launcher: Launcher, lib: Lib, n: u32) -> Command {
    let ours = lib == Lib::Ours;
    let mut cmd = match launcher {
        Launcher::Pmixrun => {
            let mut c = build::scrubbed(Command::new(&t.pmixrun));
            c.args(["--timeout", &DEADLINE.as_secs().to_string()]);
            if ours {
                c.env("LD_LIBRARY_PATH", &t.capi);
            }
            c
        }
        Launcher::Prterun => {
            let mut c = prterun_here(&t.prterun);
            if ours {
                c.arg("-x")
                    .arg(format!("LD_LIBRARY_PATH={}", t.capi.display()));
            }
            c
        }
    };
    cmd.args(["-n", &n.to_string()]).arg(&t.program);
    cmd
}

fn one(
    t: &Tools,
    launcher: Launcher,
    lib: Lib,
    n: u32,
    logs: &Path,
    name: &str,
) -> Result<Sample, String> {
    let outcome = exec::run(
        command(t, launcher, lib, n),
        DEADLINE + Duration::from_secs(30),
        logs,
        name,
    );
    if let Some(f) = outcome.failure {
        return Err(f);
    }
    let (max_us, mean_us) = read_line(&outcome.stdout, n)?;
    Ok(Sample {
        max_us,
        mean_us,
        exit_ms: outcome.elapsed.as_secs_f64() * 1e3,
    })
}

/// The table's row of one launcher and N: medians on each library, and ours over theirs.
fn row(launcher: Launcher, n: u32, openpmix: &[Sample], ours: &[Sample]) -> String {
    let med = |s: &[Sample], f: fn(&Sample) -> f64| median(&s.iter().map(f).collect::<Vec<_>>());
    let cell = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.0}"));
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
        _ => "–".into(),
    };
    let fields: [fn(&Sample) -> f64; 3] = [|s| s.max_us, |s| s.mean_us, |s| s.exit_ms];
    let mut line = format!("| {} | {n} |", launcher.name());
    for f in fields {
        let (theirs, mine) = (med(openpmix, f), med(ours, f));
        let _ = write!(
            line,
            " {} | {} | {} |",
            cell(theirs),
            cell(mine),
            ratio(mine, theirs)
        );
    }
    line
}

/// Entry point of `cargo xtask bench --capi`.
pub(crate) fn run(args: &[String]) -> ExitCode {
    let o = match super::mode_options(parse(args), "--capi", USAGE) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let dirs = Dirs::new();
    let tools = match build_tools(&dirs) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("xtask bench --capi: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut md = format!(
        "# Open MPI 5's MPI_Init on OpenPMIx's libpmix and on pmix-rs's\n\n\
         `xtask/c/mpi_init_time.c` built with Open MPI 5.0.11's `mpicc`, on the wheel's \
         `libpmix.so.2` (OpenPMIx 5.0.11) and on pmix-rs's (`pmix-capi`, first on the ranks' \
         `LD_LIBRARY_PATH`), alternating, {} runs each, medians; below 1, pmix-rs's library \
         is faster under the same launcher.\n\n\
         | launcher | N | slowest MPI_Init, OpenPMIx (µs) | pmix-rs (µs) | ratio | mean \
         MPI_Init, OpenPMIx (µs) | pmix-rs (µs) | ratio | launch to exit, OpenPMIx (ms) | \
         pmix-rs (ms) | ratio |\n\
         | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        o.runs
    );
    let mut failed = false;
    for &launcher in &o.launchers {
        for &n in &o.ns {
            let mut samples: [Vec<Sample>; 2] = Default::default();
            for run in 1..=o.runs {
                // Each library goes first every other run.
                let order = if run % 2 == 1 {
                    [Lib::Openpmix, Lib::Ours]
                } else {
                    [Lib::Ours, Lib::Openpmix]
                };
                for lib in order {
                    let name = format!("capi-{}-{lib:?}-n{n}-run{run}", launcher.name());
                    eprintln!("xtask bench --capi: {name}");
                    match one(&tools, launcher, lib, n, &dirs.logs, &name) {
                        Ok(s) => samples[lib as usize].push(s),
                        Err(e) => {
                            eprintln!("xtask bench --capi: {name}: {e}");
                            failed = true;
                        }
                    }
                }
            }
            let _ = writeln!(md, "{}", row(launcher, n, &samples[0], &samples[1]));
        }
    }
    super::mode_report("--capi", &md, o.out.as_deref(), failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_zeros_line_is_read_and_checked() {
        let out = "noise\nmpi_init 4 max_us 1500 mean_us 900\n";
        assert_eq!(read_line(out, 4), Ok((1500.0, 900.0)));
        assert!(read_line(out, 8).is_err(), "a job of another size");
        assert!(read_line("mpi_init 4 max_us x mean_us 1\n", 4).is_err());
        assert!(read_line("hello\n", 4).is_err());
    }

    #[test]
    fn a_row_has_medians_and_ratios() {
        let s = |max_us, mean_us, exit_ms| Sample {
            max_us,
            mean_us,
            exit_ms,
        };
        let theirs = [s(2000.0, 1000.0, 300.0), s(4000.0, 1000.0, 500.0)];
        let ours = [s(1000.0, 500.0, 200.0)];
        assert_eq!(
            row(Launcher::Pmixrun, 2, &theirs, &ours),
            "| pmixrun | 2 | 3000 | 1000 | 0.33 | 1000 | 500 | 0.50 | 400 | 200 | 0.50 |"
        );
        assert_eq!(
            row(Launcher::Prterun, 2, &theirs, &[]),
            "| prterun | 2 | 3000 | n/a | – | 1000 | n/a | – | 400 | n/a | – |"
        );
    }
}
