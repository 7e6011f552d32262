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
//!
//! The libpmix rows run OpenPMIx's client program, `bench_client`, under our server too:
//! `pmix-bench job --client` starts it with `setup_fork`'s environment, which names the
//! server's OpenPMIx front-end, and collects its lines as `bench_host` does. Next to it the
//! same client under `bench_host` with OpenPMIx's default storage module (the OpenPMIx column)
//! and with `hash` (`PMIX_MCA_gds=hash`), the one our server tells libpmix clients to use.
//! The same client program also runs on pmix-rs's `libpmix.so.2` (`pmix-capi`, put on the
//! clients' `LD_LIBRARY_PATH` by either host through `BENCH_CLIENT_LIBRARY_PATH`), under our
//! server and under OpenPMIx's, for the client library table; `--capi` (module `capi`) times
//! Open MPI 5's `MPI_Init` on both libraries.
//!
//! The launch rows (`launch`) time a whole MPI job instead, from starting the launcher to its
//! exit: an MPICH program under `pmixrun --pmi pmi1` and under MPICH's Hydra, one after the
//! other in the same run, with the median and the minimum of `--runs` launches each.

pub(crate) mod build;
mod capi;
mod exec;
mod launch;
mod local_tree;
mod machine;
mod mpi4py_spawn;
mod mpich;
mod multinode;
mod recovery;
mod report;
mod runs_options;
mod scale;
mod stats;
mod torch;
mod tree_sim;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use build::{Bins, Floor, MpiHello};
use exec::Sample;
use mpich::Mpich;
use report::{Config, Measured, Stack};

const USAGE: &str = "\
usage: cargo xtask bench [options]

Runs the benchmark workloads (job-level get, put+commit, collecting fences, peer gets,
barrier, publish/lookup/unpublish, init/finalize, server memory; map generation and
register_nspace of 10k/100k processes) on our stack and on OpenPMIx (Debian's libpmix-dev),
N processes pinned to one CPU and unpinned, and prints one table. The libpmix rows ('libpmix
clients, ...') run OpenPMIx's client program (xtask/c/bench_client.c) under our server
(pmix-bench job --client) and under OpenPMIx's own, with its default storage (gds ds21)
and with gds hash. With the
publish/lookup/unpublish all-ranks rows it also runs the platform floor (xtask/c/floor.c:
the same round trips over a socket without PMIx) and prints both sides divided by it.
The launch rows ('MPI hello, launch to exit') time an MPICH program (xtask/c/mpi_hello.c)
from launch to exit under pmixrun --pmi pmi1 and under Hydra, for Debian's MPICH and for
MPICH 5 in $PMIXRS_MPICH5 (default /opt/mpich5); an MPICH not installed is skipped.

options:
    --quick            short run: N=2,8 (launch rows 1,8), fewer iterations, maps of 10k
                       only
    --n LIST           process counts, e.g. --n 2,8 (default 2,8,32,64; launch rows 1,8,32)
    --filter TEXT      only the rows whose name contains TEXT (case-insensitive; several
                       alternatives separated by '|'); runs only what those rows need
    --no-openpmix      our stack only (the launch rows still run Hydra; the libpmix rows
                       still run the libpmix client under our server)
    --runs K           repeat every run K times and report the median (default 3,
                       quick 1); the launch rows also report the minimum
    --timeout SECS     deadline of one job run (default 150, quick 60)
    --out FILE         also write the report (machine, command, table, goals) as Markdown
    --multinode        instead: launchers side by side on the pretend cluster, as root
                       (`cargo xtask bench --multinode --help`)
    --tree-sim         instead: the daemon tree's fence in simulation, up to 16,384 nodes
                       (`cargo xtask bench --tree-sim --help`)
    --scale            instead: one daemon's share of a job of 100k and 1M processes on
                       our stack and on OpenPMIx (`cargo xtask bench --scale --help`)
    --recovery         instead: a failed rank's exit to its survivors' event under
                       pmixrun --enable-recovery and PRRTE's prterun, on the pretend
                       cluster too (`cargo xtask bench --recovery --help`)
    --capi             instead: Open MPI 5's MPI_Init on OpenPMIx's libpmix and on
                       pmix-rs's, under pmixrun and prterun (`cargo xtask bench --capi --help`)
    --torch            instead: a PyTorch job from launch to exit under pmixrun and
                       under torchrun, with the floor (`cargo xtask bench --torch --help`)
    --mpi4py-spawn     instead: MPI_Comm_spawn of one child through mpi4py on Open MPI 5,
                       under pmixrun and under prterun (`... --mpi4py-spawn --help`)
    --local-tree       instead: pmixrun's tree on logical nodes of this machine with a
                       test-only link delay, fitted to a·depth + b·N
                       (`cargo xtask bench --local-tree --help`)
    -h, --help         this text";

/// The options of one of the bench's other modes (`--torch`, `--scale`, `--local-tree`)
/// as its `parse` read them; its usage printed for `--help` (`Err(SUCCESS)`) and with the
/// error for a bad command line (`Err(2)`).
pub(crate) fn mode_options<O>(
    parsed: Result<Option<O>, String>,
    mode: &str,
    usage: &str,
) -> Result<O, ExitCode> {
    match parsed {
        Ok(Some(o)) => Ok(o),
        Ok(None) => {
            println!("{usage}");
            Err(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("xtask bench {mode}: {e}\n\n{usage}");
            Err(ExitCode::from(2))
        }
    }
}

/// The end of one of the bench's other modes: prints its report `md`, writes it to `out` if
/// given, and fails if any run `failed` or the file cannot be written.
pub(crate) fn mode_report(
    mode: &str,
    md: &str,
    out: Option<&std::path::Path>,
    failed: bool,
) -> ExitCode {
    print!("{md}");
    if let Some(path) = out {
        if let Err(e) = std::fs::write(path, md) {
            eprintln!("xtask bench {mode}: cannot write {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// What the command line asked for.
#[derive(Debug, Clone)]
pub(crate) struct Options {
    pub(crate) quick: bool,
    pub(crate) ns: Vec<u32>,
    /// The process counts of the launch rows: `--n`'s if given.
    pub(crate) launch_ns: Vec<u32>,
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
            launch_ns: vec![1, 8, 32],
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
        if ns_given {
            o.launch_ns = o.ns.clone();
        } else if o.quick {
            o.ns = vec![2, 8];
            o.launch_ns = vec![1, 8];
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

/// A bench mode's entry point: it gets the arguments but the flag that chose it.
type Mode = fn(&[String]) -> ExitCode;

/// The bench's other modes: the flag that picks one, and its entry point. The first flag of
/// this list given wins.
const MODES: &[(&str, Mode)] = &[
    ("--local-tree", local_tree::run),
    ("--scale", scale::run),
    ("--tree-sim", tree_sim::run),
    ("--recovery", recovery::run),
    ("--capi", capi::run),
    ("--mpi4py-spawn", mpi4py_spawn::run),
    ("--torch", torch::run),
    ("--multinode", multinode::run),
];

/// Entry point of `cargo xtask bench`.
pub(crate) fn run(args: &[String]) -> ExitCode {
    for (flag, mode) in MODES {
        if args.iter().any(|a| a == flag) {
            let rest: Vec<String> = args.iter().filter(|a| a != flag).cloned().collect();
            return mode(&rest);
        }
    }
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
    let load_before = machine::load_average();
    let mut notes = Vec::new();
    let mut failures = Vec::new();

    let plans = report::configs_needed(&opts);
    if plans.is_empty() {
        eprintln!("xtask bench: no row matches the filter {:?}", opts.filter);
        return ExitCode::from(2);
    }
    let dirs = build::Dirs::new();
    let programs = match Programs::build(&opts, &plans, &dirs, &mut notes, &mut failures) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("xtask bench: {e}");
            return ExitCode::FAILURE;
        }
    };

    let mut measured = Measured::default();
    for run in 1..=opts.runs {
        for plan in &plans {
            let config = &plan.config;
            for stack in programs.stacks(plan, run) {
                let Some((cmd, deadline)) = programs.command(&opts, stack, *config) else {
                    continue;
                };
                let name = format!("{}-{}-run{run}", stack.slug(), config.slug());
                let secs = started.elapsed().as_secs();
                eprintln!("xtask bench: [{}:{:02}] {name}", secs / 60, secs % 60);
                let outcome = exec::run(cmd, deadline, &dirs.logs, &name);
                if let Config::Launch { n, .. } = config {
                    match launch::sample(&outcome, *n) {
                        Ok(sample) => measured.add(stack, *config, &sample),
                        Err(f) => {
                            failures.push(format!("{} {}: {f}", stack.name(), config.label()));
                            measured.add(stack, *config, &Sample::default());
                        }
                    }
                    continue;
                }
                let mut sample = Sample::parse(&outcome.stdout);
                if let Config::Job { n, .. } = config {
                    sample.split_time(*n, &opts.counts());
                }
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
        load: [load_before, machine::load_average()],
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

/// Everything the selected rows need, built; what could not be built is missing, with a note
/// or a failure saying why.
struct Programs {
    ours: Option<Bins>,
    theirs: Option<Bins>,
    /// OpenPMIx's client program, which the libpmix rows run under our server.
    libpmix_client: Option<PathBuf>,
    /// A directory holding pmix-rs's `libpmix.so.2`, which the client library table's
    /// clients load instead of OpenPMIx's.
    capi: Option<PathBuf>,
    floor: Option<Floor>,
    pmixrun: Option<PathBuf>,
    hellos: BTreeMap<Mpich, MpiHello>,
}

impl Programs {
    /// Builds what `plans` need. Fails only if our benchmark itself cannot be built; OpenPMIx,
    /// the floor and an MPICH that are missing are notes, and a `pmixrun` that does not build
    /// fails the launch rows but not the run.
    fn build(
        opts: &Options,
        plans: &[report::Plan],
        dirs: &build::Dirs,
        notes: &mut Vec<String>,
        failures: &mut Vec<String>,
    ) -> Result<Programs, String> {
        let launch = |p: &&report::Plan| matches!(p.config, Config::Launch { .. });
        let jobs = plans.iter().any(|p| !launch(&p));
        let mut programs = Programs {
            ours: None,
            theirs: None,
            libpmix_client: None,
            capi: None,
            floor: None,
            pmixrun: None,
            hellos: BTreeMap::new(),
        };
        if jobs {
            programs.ours =
                Some(build::ours(dirs).map_err(|e| format!("cannot build our benchmark: {e}"))?);
            // The libpmix rows need OpenPMIx's client even without its host.
            let libpmix = plans.iter().any(|p| p.libpmix);
            if !opts.openpmix {
                notes.push("OpenPMIx column not run (--no-openpmix)".into());
            }
            if opts.openpmix || libpmix {
                match build::openpmix(dirs) {
                    Ok(b) => {
                        programs.libpmix_client = b.libpmix_client().map(PathBuf::from);
                        if opts.openpmix {
                            programs.theirs = Some(b);
                        }
                    }
                    Err(e) if libpmix => {
                        notes.push(format!("OpenPMIx column and libpmix rows not run: {e}"))
                    }
                    Err(e) => notes.push(format!("OpenPMIx column not run: {e}")),
                }
            }
            if libpmix && programs.libpmix_client.is_some() {
                match build::capi(dirs) {
                    Ok(dir) => programs.capi = Some(dir),
                    Err(e) => notes.push(format!("client library table not run: {e}")),
                }
            }
        }
        // The floor needs no PMIx: it runs with --no-openpmix too.
        if plans.iter().any(|p| p.floor) {
            match build::floor(dirs) {
                Ok(f) => programs.floor = Some(f),
                Err(e) => notes.push(format!("platform floor not run: {e}")),
            }
        }
        let mut mpichs: Vec<Mpich> = plans
            .iter()
            .filter_map(|p| match p.config {
                Config::Launch { mpich, .. } => Some(mpich),
                _ => None,
            })
            .collect();
        mpichs.dedup();
        if !mpichs.is_empty() {
            match build::pmixrun(dirs) {
                Ok(p) => programs.pmixrun = Some(p),
                Err(e) => failures.push(format!("launch rows not run: cannot build pmixrun: {e}")),
            }
        }
        for mpich in mpichs {
            match build::mpi_hello(dirs, mpich) {
                Ok(h) => {
                    programs.hellos.insert(mpich, h);
                }
                Err(e) => notes.push(format!("{} launch rows not run: {e}", mpich.name())),
            }
        }
        Ok(programs)
    }

    /// The sides to run `plan` on, in the order of the `run`-th repetition.
    fn stacks(&self, plan: &report::Plan, run: u32) -> Vec<Stack> {
        match plan.config {
            Config::Launch { mpich, .. } => {
                if self.pmixrun.is_none() || !self.hellos.contains_key(&mpich) {
                    return Vec::new();
                }
                // Each launcher goes first every other run, so neither always starts on the
                // caches the other left, and a drift of the machine's load hits both alike.
                if run % 2 == 1 {
                    vec![Stack::Ours, Stack::Hydra]
                } else {
                    vec![Stack::Hydra, Stack::Ours]
                }
            }
            Config::Job { .. } | Config::Maps => {
                let ours = self.ours.is_some();
                let theirs = self.theirs.is_some();
                let libpmix = plan.libpmix && ours && self.libpmix_client.is_some();
                let capi = plan.libpmix && self.capi.is_some();
                [
                    (Stack::Ours, plan.main && ours),
                    (Stack::LibpmixOurs, libpmix),
                    (Stack::CapiOurs, libpmix && capi),
                    (Stack::Openpmix, (plan.main || plan.libpmix) && theirs),
                    (Stack::OpenpmixHash, plan.libpmix && theirs),
                    (Stack::CapiOpenpmix, plan.libpmix && theirs && capi),
                    (Stack::Floor, plan.floor && self.floor.is_some()),
                ]
                .into_iter()
                .filter_map(|(stack, wanted)| wanted.then_some(stack))
                .collect()
            }
        }
    }

    /// The command of one run of `stack` in `config`, and its deadline.
    fn command(&self, opts: &Options, stack: Stack, config: Config) -> Option<(Command, Duration)> {
        let job_deadline = opts.timeout + Duration::from_secs(30);
        match (stack, config) {
            (Stack::Floor, Config::Job { n, pinned }) => Some((
                self.floor
                    .as_ref()?
                    .command(n, pinned, opts.floor_round_trips()),
                job_deadline,
            )),
            (Stack::Ours, Config::Launch { mpich, n }) => Some((
                launch::pmixrun_command(
                    self.pmixrun.as_ref()?,
                    self.hellos.get(&mpich)?,
                    n,
                    opts.timeout,
                ),
                job_deadline,
            )),
            (Stack::Hydra, Config::Launch { mpich, n }) => Some((
                launch::hydra_command(self.hellos.get(&mpich)?, n, opts.timeout),
                job_deadline,
            )),
            (
                Stack::Ours
                | Stack::Openpmix
                | Stack::LibpmixOurs
                | Stack::OpenpmixHash
                | Stack::CapiOurs
                | Stack::CapiOpenpmix,
                Config::Job { n, pinned },
            ) => {
                let client = match stack {
                    Stack::LibpmixOurs | Stack::CapiOurs => Some(self.libpmix_client.as_deref()?),
                    _ => None,
                };
                let mut cmd = self.bins(stack)?.job_command(
                    n,
                    pinned.then_some(0),
                    opts.timeout,
                    &opts.client_args(),
                    client,
                );
                if stack == Stack::OpenpmixHash {
                    // The server's storage module; it tells its clients (PMIX_GDS_MODULE).
                    cmd.env("PMIX_MCA_gds", "hash");
                }
                if matches!(stack, Stack::CapiOurs | Stack::CapiOpenpmix) {
                    // The clients' library path only: OpenPMIx's host keeps its own library.
                    cmd.env("BENCH_CLIENT_LIBRARY_PATH", self.capi.as_ref()?);
                }
                Some((cmd, job_deadline))
            }
            (Stack::Ours | Stack::Openpmix, Config::Maps) => Some((
                self.bins(stack)?.regex_command(opts.quick),
                Duration::from_secs(240),
            )),
            (Stack::Floor | Stack::Hydra, _)
            | (
                Stack::LibpmixOurs | Stack::OpenpmixHash | Stack::CapiOurs | Stack::CapiOpenpmix,
                Config::Maps,
            )
            | (
                Stack::Openpmix
                | Stack::LibpmixOurs
                | Stack::OpenpmixHash
                | Stack::CapiOurs
                | Stack::CapiOpenpmix,
                Config::Launch { .. },
            ) => None,
        }
    }

    /// The host programs a stack runs: ours for the libpmix client under our server,
    /// OpenPMIx's for both of its storage modules.
    fn bins(&self, stack: Stack) -> Option<&Bins> {
        match stack {
            Stack::Ours | Stack::LibpmixOurs | Stack::CapiOurs => self.ours.as_ref(),
            Stack::Openpmix | Stack::OpenpmixHash | Stack::CapiOpenpmix => self.theirs.as_ref(),
            Stack::Floor | Stack::Hydra => None,
        }
    }
}
