//! `cargo xtask bench`: the same multi-process workloads on our stack and on OpenPMIx, side by
//! side, in one run.
//!
//! Our side is `pmix-bench` (`pmix-tests/src/bin/pmix-bench.rs`: a host on `pmix-server`
//! starting clients on `pmix-client`), built in release mode. The OpenPMIx side is a host and a
//! client in C (`xtask/c/`), compiled here with `cc` and `pkg-config pmix` against Debian's
//! `libpmix-dev` when it is installed. Both print the same lines for the same workloads
//! (`RESULT`, `CLIENT`, `NOTE`; see `pmix-bench`'s docs); this module runs them, every run in a
//! process group of its own killed at its deadline, and prints one table: metric, ours,
//! OpenPMIx, ours/OpenPMIx, followed by the goals of issue 6 judged on that table.
//!
//! Next to the publish/lookup/unpublish rows it runs the platform floor, `xtask/c/floor.c`:
//! the same number of round trips per process over a Unix socket, with no PMIx at all, which
//! is the least any socket-based server can spend on one of those calls on this machine.

mod build;
mod exec;
mod report;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use exec::Sample;
use report::{Config, Measured, Stack};

const USAGE: &str = "\
usage: cargo xtask bench [options]

Runs the benchmark workloads (job-level get, put+commit, collecting fences, peer gets,
barrier, publish/lookup/unpublish, init/finalize, server memory; map generation and
register_nspace of 10k/100k processes) on our stack and on OpenPMIx (Debian's libpmix-dev),
N processes pinned to one CPU and unpinned, and prints one table. With the
publish/lookup/unpublish all-ranks rows it also runs the platform floor (xtask/c/floor.c:
the same round trips over a socket without PMIx) and prints both sides divided by it.

options:
    --quick            short run: N=2,8, fewer iterations, maps of 10k only
    --n LIST           process counts, e.g. --n 2,8 (default 2,8,32,64)
    --filter TEXT      only the rows whose name contains TEXT (case-insensitive; several
                       alternatives separated by '|'); runs only what those rows need
    --no-openpmix      our stack only
    --runs K           repeat every run K times and report the median (default 3,
                       quick 1)
    --timeout SECS     deadline of one job run (default 150, quick 60)
    --out FILE         also write the report (machine, command, table, goals) as Markdown
    -h, --help         this text";

/// What the command line asked for.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) quick: bool,
    pub(crate) ns: Vec<u32>,
    pub(crate) filter: Vec<String>,
    pub(crate) openpmix: bool,
    pub(crate) runs: u32,
    pub(crate) timeout: Duration,
    pub(crate) out: Option<PathBuf>,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let mut o = Options {
            quick: false,
            ns: vec![2, 8, 32, 64],
            filter: Vec::new(),
            openpmix: true,
            runs: 1,
            timeout: Duration::ZERO,
            out: None,
        };
        let mut ns_given = false;
        let mut runs = None;
        let mut timeout = None;
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
            match a.as_str() {
                "--quick" => o.quick = true,
                "--no-openpmix" => o.openpmix = false,
                "--n" => {
                    o.ns = value()?
                        .split(',')
                        .map(|s| match s.trim().parse::<u32>() {
                            Ok(n) if (1..=1024).contains(&n) => Ok(n),
                            _ => Err(format!("--n: {s:?} is not a count of 1 to 1024")),
                        })
                        .collect::<Result<_, _>>()?;
                    ns_given = true;
                }
                "--filter" => {
                    o.filter.extend(
                        value()?
                            .split('|')
                            .filter(|s| !s.is_empty())
                            .map(str::to_lowercase),
                    );
                }
                "--runs" => {
                    runs = Some(
                        value()?
                            .parse()
                            .ok()
                            .filter(|k| (1..=20).contains(k))
                            .ok_or("--runs takes 1 to 20")?,
                    );
                }
                "--timeout" => {
                    let secs: u64 = value()?
                        .parse()
                        .ok()
                        .filter(|s| *s > 0)
                        .ok_or("--timeout takes seconds")?;
                    timeout = Some(Duration::from_secs(secs));
                }
                "--out" => o.out = Some(PathBuf::from(value()?)),
                _ => return Err(format!("unknown option {a:?}")),
            }
        }
        if o.quick && !ns_given {
            o.ns = vec![2, 8];
        }
        o.runs = runs.unwrap_or(if o.quick { 1 } else { 3 });
        o.timeout = timeout.unwrap_or(Duration::from_secs(if o.quick { 60 } else { 150 }));
        Ok(o)
    }

    /// The client's iteration counts (the OpenPMIx harness's defaults for a full run).
    fn counts(&self) -> [(&'static str, u32); 6] {
        if self.quick {
            [
                ("--get", 20_000),
                ("--peer", 2_000),
                ("--fence", 20),
                ("--barrier", 200),
                ("--pub", 400),
                ("--pub-all", 50),
            ]
        } else {
            [
                ("--get", 100_000),
                ("--peer", 10_000),
                ("--fence", 100),
                ("--barrier", 1000),
                ("--pub", 2000),
                ("--pub-all", 200),
            ]
        }
    }

    fn client_args(&self) -> Vec<String> {
        self.counts()
            .iter()
            .flat_map(|(k, v)| [k.to_string(), v.to_string()])
            .collect()
    }

    /// Round trips per floor client: as many as calls per rank in the all-ranks
    /// publish/lookup/unpublish workload (`--pub-all` iterations of three calls).
    pub(crate) fn floor_round_trips(&self) -> u32 {
        let pub_all = self
            .counts()
            .iter()
            .find(|(k, _)| *k == "--pub-all")
            .map_or(0, |(_, v)| *v);
        3 * pub_all
    }
}

/// Entry point of `cargo xtask bench`.
pub(crate) fn run(args: &[String]) -> ExitCode {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let opts = match Options::parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("xtask bench: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let started = Instant::now();
    let load_before = report::load_average();
    let mut notes = Vec::new();
    let mut failures = Vec::new();

    let plans = report::configs_needed(&opts);
    if plans.is_empty() {
        eprintln!("xtask bench: no row matches the filter {:?}", opts.filter);
        return ExitCode::from(2);
    }
    let dirs = build::Dirs::new();
    let ours = match build::ours(&dirs) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("xtask bench: cannot build our benchmark: {e}");
            return ExitCode::FAILURE;
        }
    };
    let theirs = if opts.openpmix {
        match build::openpmix(&dirs) {
            Ok(b) => Some(b),
            Err(e) => {
                notes.push(format!("OpenPMIx column not run: {e}"));
                None
            }
        }
    } else {
        notes.push("OpenPMIx column not run (--no-openpmix)".into());
        None
    };

    // The floor needs no PMIx: it runs with --no-openpmix too.
    let floor = if plans.iter().any(|p| p.floor) {
        match build::floor(&dirs) {
            Ok(f) => Some(f),
            Err(e) => {
                notes.push(format!("platform floor not run: {e}"));
                None
            }
        }
    } else {
        None
    };

    let mut measured = Measured::default();
    let client_args = opts.client_args();
    for run in 1..=opts.runs {
        for plan in &plans {
            let config = &plan.config;
            let stacks = [
                Some(Stack::Ours),
                theirs.as_ref().map(|_| Stack::OpenPmix),
                floor.as_ref().filter(|_| plan.floor).map(|_| Stack::Floor),
            ];
            for stack in stacks.into_iter().flatten() {
                let job_deadline = opts.timeout + Duration::from_secs(30);
                let (cmd, deadline) = match (stack, config) {
                    (Stack::Floor, Config::Job { n, pinned }) => match &floor {
                        Some(f) => (
                            f.command(*n, *pinned, opts.floor_round_trips()),
                            job_deadline,
                        ),
                        None => continue,
                    },
                    (Stack::Floor, Config::Maps) => continue,
                    (Stack::Ours | Stack::OpenPmix, _) => {
                        let bins = match (stack, &theirs) {
                            (Stack::OpenPmix, Some(b)) => b,
                            (Stack::OpenPmix, None) => continue,
                            _ => &ours,
                        };
                        match config {
                            Config::Job { n, pinned } => (
                                bins.job_command(
                                    *n,
                                    pinned.then_some(0),
                                    opts.timeout,
                                    &client_args,
                                ),
                                job_deadline,
                            ),
                            Config::Maps => {
                                (bins.regex_command(opts.quick), Duration::from_secs(240))
                            }
                        }
                    }
                };
                let name = format!("{}-{}-run{run}", stack.slug(), config.slug());
                let secs = started.elapsed().as_secs();
                eprintln!("xtask bench: [{}:{:02}] {name}", secs / 60, secs % 60);
                let outcome = exec::run(cmd, deadline, &dirs.logs, &name);
                let sample = Sample::parse(&outcome.stdout);
                for note in &sample.notes {
                    let line = format!("{} {}: {note}", stack.name(), config.label());
                    if note.starts_with("FAILED") || note.contains(" FAILED ") {
                        failures.push(line);
                    } else if !notes.contains(&line) {
                        notes.push(line);
                    }
                }
                if let Some(f) = outcome.failure {
                    failures.push(format!("{} {}: {f}", stack.name(), config.label()));
                }
                measured.add(stack, *config, &sample);
            }
        }
    }

    let elapsed = started.elapsed();
    let text = report::render(&report::Context {
        opts: &opts,
        measured: &measured,
        notes: &notes,
        failures: &failures,
        elapsed,
        load: [load_before, report::load_average()],
        args,
    });
    print!("{}", text.terminal);
    if let Some(path) = &opts.out {
        match std::fs::write(path, &text.markdown) {
            Ok(()) => eprintln!("xtask bench: wrote {}", path.display()),
            Err(e) => {
                eprintln!("xtask bench: cannot write {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        }
    }
    if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
