//! The launch rows: the wall time of a whole MPI job, from starting the launcher to its exit,
//! under `pmixrun --pmi pmi1` and under MPICH's own launcher, Hydra.
//!
//! The program is `xtask/c/mpi_hello.c` (MPI_Init, one MPI_Allreduce checked on every rank,
//! one line, MPI_Finalize), compiled with each MPICH's `mpicc`; both launchers run the same
//! executable, so the MPI library's own start-up cost is on both sides. Debian's MPICH (its
//! `mpiexec.hydra`) gives the rows the goal is judged on; MPICH 5 from PyPI, in a venv at
//! `$PMIXRS_MPICH5` (default `/opt/mpich5`), which picks ch4:ucx by default, has rows of its
//! own. An MPICH that is not installed is skipped with a note; the rest of the bench runs.

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::Options;
use super::build::MpiHello;
use super::exec::{Outcome, Sample};
use super::mpich::Mpich;
use super::report::{Config, Measured, Row, Stack, sig3, worst_below_one};

/// The metric of a launch row: launch to exit, in milliseconds.
pub(crate) const LAUNCH: &str = "launch_ms";

/// The launch rows the options ask for: one per MPICH and process count, before the filter.
pub(crate) fn rows(opts: &Options) -> Vec<Row> {
    let mut rows = Vec::new();
    for mpich in Mpich::ALL {
        for &n in &opts.launch_ns {
            let config = Config::Launch { mpich, n };
            rows.push(Row {
                config,
                metric: LAUNCH.to_owned(),
                label: format!("MPI hello, launch to exit (ms), {}", config.label()),
            });
        }
    }
    rows
}

/// Environment variables no launcher may inherit: those of a surrounding job (were the bench
/// run under a launcher), which would make MPICH's PMI client look there, and Hydra's own
/// settings, which would steer it away from its defaults.
fn scrubbed(mut cmd: Command) -> Command {
    for (k, _) in std::env::vars_os() {
        let k_str = k.to_string_lossy();
        if ["PMI", "HYDRA_", "MPIEXEC_"]
            .iter()
            .any(|p| k_str.starts_with(p))
        {
            cmd.env_remove(&k);
        }
    }
    cmd
}

/// `pmixrun --pmi pmi1 -n N mpi_hello`, giving up after `timeout` (it then kills the job).
pub(crate) fn pmixrun_command(
    pmixrun: &Path,
    hello: &MpiHello,
    n: u32,
    timeout: Duration,
) -> Command {
    let mut cmd = scrubbed(Command::new(pmixrun));
    cmd.args(["--pmi", "pmi1", "--timeout"])
        .arg(timeout.as_secs().to_string())
        .args(["-n", &n.to_string()])
        .arg(&hello.exe);
    cmd
}

/// `mpiexec -n N mpi_hello` of the same MPICH, giving up after `timeout` (Hydra's own
/// `MPIEXEC_TIMEOUT`).
pub(crate) fn hydra_command(hello: &MpiHello, n: u32, timeout: Duration) -> Command {
    let mut cmd = scrubbed(Command::new(&hello.mpiexec));
    cmd.env("MPIEXEC_TIMEOUT", timeout.as_secs().to_string())
        .args(["-n", &n.to_string()])
        .arg(&hello.exe);
    cmd
}

/// Checks what `mpi_hello` printed: `hello <rank> <n> <n(n-1)/2>` once for every rank, in
/// any order, and nothing else.
pub(crate) fn check_output(stdout: &str, n: u32) -> Result<(), String> {
    let sum = u64::from(n) * u64::from(n.saturating_sub(1)) / 2;
    let mut seen = vec![false; n as usize];
    for line in stdout.lines() {
        let rank = line
            .strip_prefix("hello ")
            .and_then(|rest| {
                let words: Vec<&str> = rest.split_whitespace().collect();
                match words.as_slice() {
                    [rank, size, s] if *size == n.to_string() && *s == sum.to_string() => {
                        rank.parse::<usize>().ok()
                    }
                    _ => None,
                }
            })
            .ok_or_else(|| format!("unexpected output line {line:?}"))?;
        match seen.get_mut(rank) {
            Some(s) if !*s => *s = true,
            _ => return Err(format!("rank {rank} printed twice or is out of range")),
        }
    }
    let missing = seen.iter().filter(|s| !**s).count();
    if missing > 0 {
        return Err(format!("{missing} of {n} ranks printed no hello line"));
    }
    Ok(())
}

/// One launch's number: its elapsed time if it succeeded and printed what it should; why
/// not otherwise.
pub(crate) fn sample(outcome: &Outcome, n: u32) -> Result<Sample, String> {
    if let Some(f) = &outcome.failure {
        // Hydra says why it gave up on stdout.
        let said: Vec<&str> = outcome
            .stdout
            .lines()
            .filter(|l| !l.starts_with("hello "))
            .collect();
        return Err(match said.as_slice() {
            [] => f.clone(),
            lines => format!(
                "{f}\n    stdout: {}",
                lines[lines.len().saturating_sub(4)..].join("\n    ")
            ),
        });
    }
    check_output(&outcome.stdout, n)?;
    let mut s = Sample::default();
    s.values
        .insert(LAUNCH.to_owned(), outcome.elapsed.as_secs_f64() * 1e3);
    Ok(s)
}

fn mpich_of(config: Config) -> Option<Mpich> {
    match config {
        Config::Launch { mpich, .. } => Some(mpich),
        _ => None,
    }
}

/// A cell: the value, or why there is none ("not run": that launcher ran nothing with that
/// MPICH in this run, so the note says why; "n/a": it ran but failed here).
fn cell(m: &Measured, stack: Stack, row: &Row, value: Option<f64>) -> String {
    match value {
        Some(v) => sig3(v),
        None if m.ran_where(stack, |c| mpich_of(c) == mpich_of(row.config)) => "n/a".into(),
        None => "not run".into(),
    }
}

fn ratio(ours: Option<f64>, theirs: Option<f64>) -> Option<f64> {
    let (o, t) = (ours?, theirs?);
    (t != 0.0).then(|| o / t)
}

/// The launch table: median and minimum of each launcher, and pmixrun/Hydra of both; empty
/// if no launch row is selected.
pub(crate) fn table(opts: &Options, m: &Measured, rows: &[Row]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let mut t = format!(
        "\nLaunch to exit of an MPI program (`xtask/c/mpi_hello.c`: MPI_Init, one \
         MPI_Allreduce, one line per rank, MPI_Finalize), the same executable under \
         `pmixrun --pmi pmi1` and under that MPICH's Hydra (`mpiexec`), unpinned, the two \
         launchers alternating; median and minimum of {} launch{} each.\n\n",
        opts.runs,
        if opts.runs == 1 { "" } else { "es" }
    );
    let _ = writeln!(
        t,
        "| metric | pmixrun | pmixrun min | Hydra | Hydra min | pmixrun/Hydra | min/min |"
    );
    let _ = writeln!(t, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for r in rows {
        let ours = m.get(Stack::Ours, r.config, &r.metric);
        let ours_min = m.min(Stack::Ours, r.config, &r.metric);
        let theirs = m.get(Stack::Hydra, r.config, &r.metric);
        let theirs_min = m.min(Stack::Hydra, r.config, &r.metric);
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {} |",
            r.label,
            cell(m, Stack::Ours, r, ours),
            cell(m, Stack::Ours, r, ours_min),
            cell(m, Stack::Hydra, r, theirs),
            cell(m, Stack::Hydra, r, theirs_min),
            ratio(ours, theirs).map_or("–".into(), sig3),
            ratio(ours_min, theirs_min).map_or("–".into(), sig3),
        );
    }
    t
}

/// The goal lines, one per MPICH: pmixrun faster than Hydra at every process count, judged
/// on the ratio of the medians at the count where it is largest.
pub(crate) fn goals(m: &Measured, rows: &[Row]) -> Vec<[String; 4]> {
    Mpich::ALL
        .iter()
        .map(|&mpich| {
            let name = format!(
                "MPI hello launch to exit, pmixrun/Hydra, every N ({})",
                mpich.name()
            );
            let ratios = rows
                .iter()
                .filter(|r| mpich_of(r.config) == Some(mpich))
                .map(|r| {
                    let ours = m.get(Stack::Ours, r.config, &r.metric);
                    let theirs = m.get(Stack::Hydra, r.config, &r.metric);
                    (ratio(ours, theirs), r)
                });
            worst_below_one(name, ratios, |r| r.config.label())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_output_check_wants_every_rank_once() {
        assert_eq!(check_output("hello 0 1 0\n", 1), Ok(()));
        assert_eq!(
            check_output("hello 1 3 3\nhello 0 3 3\nhello 2 3 3\n", 3),
            Ok(())
        );
        let err = |out: &str, n| check_output(out, n).err().unwrap_or_default();
        assert!(err("hello 0 2 1\n", 2).contains("1 of 2 ranks"));
        assert!(err("hello 0 2 1\nhello 0 2 1\n", 2).contains("twice"));
        assert!(err("hello 0 2 1\nhello 1 2 2\n", 2).contains("unexpected"));
        assert!(err("hello 0 2 1\nhello 2 2 1\n", 2).contains("out of range"));
        assert!(err("hello 0 1 0\nwarning: x\n", 1).contains("unexpected"));
    }

    fn add(m: &mut Measured, stack: Stack, config: Config, v: f64) {
        let mut s = Sample::default();
        s.values.insert(LAUNCH.into(), v);
        m.add(stack, config, &s);
    }

    #[test]
    fn the_table_and_the_goal_lines() {
        let mut o = Options::parse(&["--quick".to_owned()]).unwrap_or_else(|e| panic!("{e}"));
        o.runs = 3;
        let rows = rows(&o);
        let one = Config::Launch {
            mpich: Mpich::Debian,
            n: 1,
        };
        let eight = Config::Launch {
            mpich: Mpich::Debian,
            n: 8,
        };
        let mut m = Measured::default();
        for (config, ours, theirs) in [
            (one, [40.0, 30.0, 50.0], [45.0, 44.0, 60.0]),
            (eight, [300.0, 310.0, 900.0], [320.0, 290.0, 330.0]),
        ] {
            for (o, t) in ours.into_iter().zip(theirs) {
                add(&mut m, Stack::Ours, config, o);
                add(&mut m, Stack::Hydra, config, t);
            }
        }
        let t = table(&o, &m, &rows);
        assert!(t.contains("3 launches each"), "{t}");
        assert!(
            t.contains("| MPI hello, launch to exit (ms), Debian MPICH, N=1 | 40.0 | 30.0 | 45.0 | 44.0 | 0.889 | 0.682 |"),
            "{t}"
        );
        assert!(
            t.contains("| MPI hello, launch to exit (ms), Debian MPICH, N=8 | 310 | 300 | 320 | 290 | 0.969 | 1.03 |"),
            "{t}"
        );
        // Nothing of the venv's MPICH ran: "not run", and its goal is not judged.
        assert!(
            t.contains("| MPI hello, launch to exit (ms), MPICH 5 venv, N=8 | not run | not run | not run | not run | – | – |"),
            "{t}"
        );
        let g = goals(&m, &rows);
        assert_eq!(g.len(), 2);
        assert_eq!(g[0][2], "0.969 (Debian MPICH, N=8)");
        assert_eq!(g[0][3], "met");
        assert_eq!(g[1][3], "not judged");
        // Hydra faster at one N: not met.
        add(&mut m, Stack::Hydra, eight, 100.0);
        add(&mut m, Stack::Hydra, eight, 100.0);
        let g = goals(&m, &rows);
        assert_eq!(g[0][3], "NOT met");
    }
}
