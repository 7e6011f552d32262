//! `cargo xtask bench --multinode`: the launchers side by side on the pretend cluster (as
//! root; `scripts/multinode/cluster.sh`, 8 nodes × 2 ranks by default): MPICH's Hydra over
//! ssh, Open MPI 4.1's `mpirun` with pssh as its agent, and `pmixrun` with pssh as its
//! agent. For each: launch to exit of an MPI hello (`xtask/c/mpi_hello.c`, as the launch rows
//! of the single-node bench), and barrier and collecting-fence latency, measured by the
//! single-node bench's libpmix client (`xtask/c/bench_client.c`) under the PMIx launchers
//! (`mpirun`, `pmixrun`) and by `xtask/c/pmi1_bench.c` (the same two loops over PMI-1) under
//! Hydra, which has no PMIx. Median of `--runs` repetitions, the launchers alternating; a
//! Markdown table with the machine and its load. A launcher that fails shows "failed" and
//! why; only the reference launchers' failures fail the bench, so the pmixrun column says
//! "failed" until multi-node pmixrun works.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use super::build::{self, Dirs, compile_source};
use super::exec;
use super::launch::{Mpich, check_output};
use super::{machine, report};
use crate::multinode::cluster::{self, Cluster, host_list, node_names};
use crate::multinode::procs;

const USAGE: &str = "\
usage: cargo xtask bench --multinode [options]        (as root)

On the pretend cluster (scripts/multinode/cluster.sh, 2 ranks per node), side by side:
launch to exit of an MPI hello, barrier latency and collecting-fence latency, under MPICH's
Hydra (-launcher ssh), Open MPI 4.1's mpirun (agent pssh) and pmixrun (agent pssh). Median
of --runs repetitions; prints a Markdown table. pmixrun's cells say \"failed\" (and why)
until multi-node pmixrun works; that does not fail the bench.

options:
    --nodes N      nodes (default 8)
    --runs K       repetitions (default 5)
    --fences F     collecting fences per run (default 50)
    --barriers B   barriers per run (default 200)
    --timeout S    deadline of one run (default 120)
    --out FILE     also write the report to FILE
    -h, --help     this text";

struct Opts {
    nodes: u32,
    runs: u32,
    fences: u32,
    barriers: u32,
    timeout: Duration,
    out: Option<PathBuf>,
}

impl Opts {
    fn parse(args: &[String]) -> Result<Opts, String> {
        let mut o = Opts {
            nodes: 8,
            runs: 5,
            fences: 50,
            barriers: 200,
            timeout: Duration::from_secs(120),
            out: None,
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut number = |lo: u32, hi: u32| -> Result<u32, String> {
                it.next()
                    .and_then(|v| v.parse().ok())
                    .filter(|v| (lo..=hi).contains(v))
                    .ok_or_else(|| format!("{a} takes {lo} to {hi}"))
            };
            match a.as_str() {
                "--nodes" => o.nodes = number(2, 64)?,
                "--runs" => o.runs = number(1, 50)?,
                "--fences" => o.fences = number(1, 100_000)?,
                "--barriers" => o.barriers = number(1, 100_000)?,
                "--timeout" => o.timeout = Duration::from_secs(number(1, 3600)?.into()),
                "--out" => {
                    o.out = Some(PathBuf::from(it.next().ok_or("--out needs a value")?));
                }
                _ => return Err(format!("unknown option {a:?}")),
            }
        }
        Ok(o)
    }

    fn ranks(&self) -> u32 {
        2 * self.nodes
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Launcher {
    Hydra,
    OpenMpi,
    /// With libpmix clients (bench_client), as under mpirun.
    Pmixrun,
    /// With PMI-1 clients (pmi1_bench), as under Hydra.
    PmixrunPmi1,
    /// Slurm's own `srun --mpi=pmix` (libpmix 4.2 in slurmstepd), libpmix clients.
    SrunPmix,
    /// pmixrun inside a Slurm allocation (daemons started by one srun), PMI-1 clients.
    PmixrunSlurm,
}

impl Launcher {
    const ALL: [Launcher; 6] = [
        Launcher::Hydra,
        Launcher::OpenMpi,
        Launcher::SrunPmix,
        Launcher::Pmixrun,
        Launcher::PmixrunPmi1,
        Launcher::PmixrunSlurm,
    ];

    /// Ours, whose failures do not fail the bench.
    fn is_ours(self) -> bool {
        matches!(
            self,
            Launcher::Pmixrun | Launcher::PmixrunPmi1 | Launcher::PmixrunSlurm
        )
    }

    fn header(self) -> &'static str {
        match self {
            Launcher::Hydra => "Hydra (`mpiexec.hydra -launcher ssh`)",
            Launcher::OpenMpi => "Open MPI 4.1 `mpirun` (agent pssh)",
            Launcher::Pmixrun => "pmixrun (agent pssh), libpmix clients",
            Launcher::PmixrunPmi1 => "pmixrun (agent pssh), PMI-1 clients",
            Launcher::SrunPmix => "`srun --mpi=pmix` (ring fence), libpmix clients",
            Launcher::PmixrunSlurm => "`salloc` pmixrun (one srun), PMI-1 clients",
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Launcher::Hydra => "hydra",
            Launcher::OpenMpi => "openmpi",
            Launcher::Pmixrun => "pmixrun",
            Launcher::PmixrunPmi1 => "pmixrun-pmi1",
            Launcher::SrunPmix => "srun-pmix",
            Launcher::PmixrunSlurm => "pmixrun-salloc",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Metric {
    Launch,
    Barrier,
    Fence,
}

impl Metric {
    const ALL: [Metric; 3] = [Metric::Launch, Metric::Barrier, Metric::Fence];

    fn label(self) -> &'static str {
        match self {
            Metric::Launch => "MPI hello, launch to exit (ms)",
            Metric::Barrier => "barrier: fence without data (µs)",
            Metric::Fence => "collecting fence (µs)",
        }
    }
}

/// The programs, each the reason it is missing if it is.
struct Programs {
    pmixrun: Result<PathBuf, String>,
    mpich_hello: Result<PathBuf, String>,
    ompi_hello: Result<PathBuf, String>,
    bench_client: Result<PathBuf, String>,
    pmi1_bench: Result<PathBuf, String>,
}

fn build_programs(dirs: &Dirs) -> Programs {
    let out = dirs.target().join("xtask-bench");
    let c = crate::workspace_root().join("xtask").join("c");
    Programs {
        pmixrun: build::pmixrun(dirs),
        mpich_hello: build::mpi_hello(dirs, Mpich::Debian).map(|h| h.exe),
        ompi_hello: compile_source(
            Path::new("/usr/bin/mpicc.openmpi"),
            &c.join("mpi_hello.c"),
            &out.join("mpi_hello-openmpi"),
            &[],
        ),
        bench_client: build::openpmix(dirs)
            .and_then(|b| b.libpmix_client().map(Path::to_path_buf).ok_or_default()),
        pmi1_bench: build::pmi1_bench(dirs),
    }
}

trait OkOrDefault<T> {
    fn ok_or_default(self) -> Result<T, String>;
}

impl<T> OkOrDefault<T> for Option<T> {
    fn ok_or_default(self) -> Result<T, String> {
        self.ok_or_else(|| "OpenPMIx's bench_client was not built".to_owned())
    }
}

fn hydra(o: &Opts, program: &Path) -> Command {
    let mut cmd = Command::new(Mpich::Debian.mpiexec());
    cmd.env("MPIEXEC_TIMEOUT", o.timeout.as_secs().to_string())
        .args(["-launcher", "ssh", "-launcher-exec"])
        .arg(cluster::pssh())
        .args(["-hosts", &node_names(o.nodes), "-n", &o.ranks().to_string()])
        .arg(program);
    cmd
}

fn mpirun(o: &Opts, program: &Path) -> Command {
    let mut cmd = Command::new("/usr/bin/mpirun.openmpi");
    cmd.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "--mca",
        "plm_rsh_agent",
    ])
    .arg(cluster::pssh())
    .args(["--host", &host_list(o.nodes, 2)])
    .args(["--mca", "oob_tcp_if_include", "10.77.0.0/16"])
    .args(["--mca", "btl_tcp_if_include", "10.77.0.0/16"])
    .args(["-n", &o.ranks().to_string()])
    .arg(program);
    cmd
}

/// Slurm's own launcher and PMIx server: `srun -N<nodes> -n<ranks> --mpi=pmix`, with the ring
/// fence (its default fence lets ranks out early here: docs/MULTINODE-TESTING.md).
fn srun_pmix(o: &Opts, program: &Path) -> Command {
    let mut cmd = Command::new("srun");
    cmd.env("SLURM_CONF", cluster::slurm_conf())
        .env("SLURM_PMIX_FENCE", "ring")
        .args(["-N", &o.nodes.to_string(), "-n", &o.ranks().to_string()])
        .arg("--mpi=pmix")
        .arg(program);
    cmd
}

/// pmixrun in an allocation of every node: no host list, its daemons started by one srun.
fn salloc_pmixrun(o: &Opts, pmixrun: &Path, program: &Path) -> Command {
    let mut cmd = Command::new("salloc");
    cmd.env("SLURM_CONF", cluster::slurm_conf())
        .args(["-N", &o.nodes.to_string(), "-n", &o.ranks().to_string()])
        .arg(pmixrun)
        .args(["--pmi", "pmi1", "-n", &o.ranks().to_string()])
        .arg(program);
    cmd
}

fn pmixrun(o: &Opts, pmixrun: &Path, pmi1: bool, program: &Path) -> Command {
    let mut cmd = Command::new(pmixrun);
    cmd.arg("--launch-agent")
        .arg(cluster::pssh())
        .args(["--host", &host_list(o.nodes, 2)]);
    if pmi1 {
        cmd.args(["--pmi", "pmi1"]);
    }
    cmd.args(["-n", &o.ranks().to_string()]).arg(program);
    cmd
}

/// The command of one measurement: the launch of the hello, or the fence/barrier client.
fn command(o: &Opts, p: &Programs, l: Launcher, launch: bool) -> Result<Command, String> {
    let need = |r: &Result<PathBuf, String>| r.clone().map_err(|e| format!("not built: {e}"));
    let fences = o.fences.to_string();
    let barriers = o.barriers.to_string();
    let client_args = [
        "--get",
        "1000",
        "--peer",
        "1",
        "--fence",
        &fences,
        "--barrier",
        &barriers,
        "--pub",
        "0",
        "--pub-all",
        "0",
    ];
    Ok(match (l, launch) {
        (Launcher::Hydra, true) => hydra(o, &need(&p.mpich_hello)?),
        (Launcher::Hydra, false) => {
            let mut c = hydra(o, &need(&p.pmi1_bench)?);
            c.args([&fences, &barriers]);
            c
        }
        (Launcher::OpenMpi, true) => mpirun(o, &need(&p.ompi_hello)?),
        (Launcher::OpenMpi, false) => {
            let mut c = mpirun(o, &need(&p.bench_client)?);
            c.args(client_args);
            c
        }
        (Launcher::Pmixrun | Launcher::PmixrunPmi1, true) => {
            pmixrun(o, &need(&p.pmixrun)?, true, &need(&p.mpich_hello)?)
        }
        (Launcher::PmixrunPmi1, false) => {
            let mut c = pmixrun(o, &need(&p.pmixrun)?, true, &need(&p.pmi1_bench)?);
            c.args([&fences, &barriers]);
            c
        }
        (Launcher::Pmixrun, false) => {
            let mut c = pmixrun(o, &need(&p.pmixrun)?, false, &need(&p.bench_client)?);
            c.args(client_args);
            c
        }
        (Launcher::SrunPmix, true) => srun_pmix(o, &need(&p.ompi_hello)?),
        (Launcher::SrunPmix, false) => {
            let mut c = srun_pmix(o, &need(&p.bench_client)?);
            c.args(client_args);
            c
        }
        (Launcher::PmixrunSlurm, true) => {
            salloc_pmixrun(o, &need(&p.pmixrun)?, &need(&p.mpich_hello)?)
        }
        (Launcher::PmixrunSlurm, false) => {
            let mut c = salloc_pmixrun(o, &need(&p.pmixrun)?, &need(&p.pmi1_bench)?);
            c.args([&fences, &barriers]);
            c
        }
    })
}

/// The mean over the ranks of `metric`'s lines (`<metric> <value>`), if every rank printed one.
fn mean_of(stdout: &str, metric: &str, ranks: u32) -> Result<f64, String> {
    let values: Vec<f64> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix(metric)?.trim().parse().ok())
        .collect();
    if values.len() != ranks as usize {
        return Err(format!(
            "{} of {ranks} ranks reported {metric}",
            values.len()
        ));
    }
    Ok(values.iter().sum::<f64>() / f64::from(ranks))
}

fn median(v: &[f64]) -> Option<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => None,
        n if n % 2 == 1 => Some(s[n / 2]),
        n => Some((s[n / 2 - 1] + s[n / 2]) / 2.0),
    }
}

#[derive(Default)]
struct Results {
    values: BTreeMap<(Launcher, Metric), Vec<f64>>,
    errors: BTreeMap<(Launcher, Metric), Vec<String>>,
}

impl Results {
    fn fail(&mut self, l: Launcher, metrics: &[Metric], why: &str) {
        for m in metrics {
            self.errors.entry((l, *m)).or_default().push(why.to_owned());
        }
    }

    fn cell(&self, l: Launcher, m: Metric, runs: u32) -> String {
        let values = self.values.get(&(l, m)).map_or(&[][..], Vec::as_slice);
        match median(values) {
            Some(v) => {
                let min = values.iter().copied().fold(f64::INFINITY, f64::min);
                let mut c = format!("{} (min {})", report::sig3(v), report::sig3(min));
                if values.len() < runs as usize {
                    let _ = write!(c, " ({} of {runs} runs)", values.len());
                }
                c
            }
            None => {
                let why = self
                    .errors
                    .get(&(l, m))
                    .and_then(|e| e.first())
                    .map_or("not run", String::as_str);
                // "host exited with ...; stderr (<log>):" then the log's lines: the first of
                // them says why.
                let mut lines = why.lines().map(str::trim).filter(|l| !l.is_empty());
                let head = lines.next().unwrap_or("");
                let head = head.split_once("; stderr").map_or(head, |(h, _)| h);
                let first: String = match lines.next() {
                    Some(said) => format!("{head}: {said}"),
                    None => head.to_owned(),
                }
                .chars()
                .take(120)
                .collect();
                format!("failed: {}", first.replace('|', "/"))
            }
        }
    }
}

/// Entry point of `cargo xtask bench --multinode` (`args` without `--multinode`).
pub(crate) fn run(args: &[String]) -> ExitCode {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let o = match Opts::parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("xtask bench --multinode: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let dirs = Dirs::new();
    if let Err(e) = crate::multinode::preflight(dirs.target()) {
        eprintln!("xtask bench --multinode: refusing: {e}");
        return ExitCode::from(2);
    }
    let started = Instant::now();
    let load_before = machine::load_average();
    let programs = build_programs(&dirs);
    let cluster = match Cluster::up(&crate::multinode::cluster_script(), o.nodes) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("xtask bench --multinode: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "xtask bench --multinode: {} nodes up in {:.2} s",
        o.nodes,
        cluster.up_time.as_secs_f64()
    );
    let logs = dirs.target().join("xtask-bench").join("logs-multinode");
    let mut results = Results::default();
    let mut notes = Vec::new();
    for run in 1..=o.runs {
        let mut order = Launcher::ALL.to_vec();
        order.rotate_left((run as usize - 1) % Launcher::ALL.len());
        for l in order {
            for launch in [true, false] {
                let metrics: &[Metric] = if launch {
                    &[Metric::Launch]
                } else {
                    &[Metric::Barrier, Metric::Fence]
                };
                if cluster::STOPPING.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                let cmd = match command(&o, &programs, l, launch) {
                    Ok(c) => c,
                    Err(e) => {
                        results.fail(l, metrics, &e);
                        continue;
                    }
                };
                let name = format!(
                    "{}-{}-run{run}",
                    l.slug(),
                    if launch { "launch" } else { "fence" }
                );
                let secs = started.elapsed().as_secs();
                eprintln!(
                    "xtask bench --multinode: [{}:{:02}] {name}",
                    secs / 60,
                    secs % 60
                );
                let before = procs::Before::take(o.nodes);
                let outcome = exec::run(cmd, o.timeout + Duration::from_secs(10), &logs, &name);
                if let Err(left) = before.check_nothing_left(
                    // exec::run sets no marker: what ran on the nodes and this build's
                    // programs are what can be found.
                    "",
                    &[dirs.target().to_path_buf()],
                    Duration::from_secs(3),
                ) {
                    notes.push(format!("{name}: {left}"));
                }
                if let Some(f) = outcome.failure {
                    results.fail(l, metrics, &f);
                    continue;
                }
                if launch {
                    match check_output(&outcome.stdout, o.ranks()) {
                        Ok(()) => results
                            .values
                            .entry((l, Metric::Launch))
                            .or_default()
                            .push(outcome.elapsed.as_secs_f64() * 1e3),
                        Err(e) => results.fail(l, metrics, &e),
                    }
                    continue;
                }
                for (m, key) in [
                    (Metric::Barrier, "barrier_us"),
                    (Metric::Fence, "fence_collect_us"),
                ] {
                    match mean_of(&outcome.stdout, key, o.ranks()) {
                        Ok(v) => results.values.entry((l, m)).or_default().push(v),
                        Err(e) => results.fail(l, &[m], &e),
                    }
                }
            }
        }
    }
    cluster.down("after the bench");

    let mut md = format!(
        "# Launchers on the pretend cluster\n\n{} nodes × 2 ranks ({} ranks), network-namespace \
         nodes on one host (`scripts/multinode/cluster.sh`), ssh between them; median \
         (and minimum) of {} runs, the launchers taking turns to go first. Barrier and fence: \
         mean per call over {} barriers and {} collecting fences, averaged over the ranks; \
         the client is OpenPMIx's `bench_client` (libpmix) under mpirun, `srun --mpi=pmix` \
         and in pmixrun's libpmix column, `xtask/c/pmi1_bench.c` (PMI-1) under Hydra and in \
         pmixrun's PMI-1 columns; the launch row runs the MPICH hello (PMI-1) under Hydra \
         and pmixrun, the Open MPI hello under mpirun and srun.\n\n",
        o.nodes,
        o.ranks(),
        o.runs,
        o.barriers,
        o.fences
    );
    for line in machine::machine(true)
        .into_iter()
        .filter(|l| !l.contains(Mpich::Venv.name()))
    {
        let _ = writeln!(md, "- {line}");
    }
    let _ = writeln!(
        md,
        "- load average (1, 5, 15 min): {load_before} before, {} after; {:.0} s in all\n",
        machine::load_average(),
        started.elapsed().as_secs_f64()
    );
    let _ = write!(md, "| metric |");
    for l in Launcher::ALL {
        let _ = write!(md, " {} |", l.header());
    }
    let _ = writeln!(md, "\n| --- |{}", " ---: |".repeat(Launcher::ALL.len()));
    for m in Metric::ALL {
        let _ = write!(md, "| {} |", m.label());
        for l in Launcher::ALL {
            let _ = write!(md, " {} |", results.cell(l, m, o.runs));
        }
        md.push('\n');
    }
    if !notes.is_empty() {
        md.push_str("\nLeft behind by a run (killed):\n");
        for n in &notes {
            let _ = writeln!(md, "- {n}");
        }
    }
    let mut failed_refs = Vec::new();
    for ((l, m), errs) in &results.errors {
        for e in errs.iter().take(1) {
            eprintln!("xtask bench --multinode: {} {}: {e}", l.slug(), m.label());
        }
        if !l.is_ours() && !results.values.contains_key(&(*l, *m)) {
            failed_refs.push(format!("{} {}", l.slug(), m.label()));
        }
    }
    print!("{md}");
    if let Some(path) = &o.out {
        if let Err(e) = std::fs::write(path, &md) {
            eprintln!(
                "xtask bench --multinode: cannot write {}: {e}",
                path.display()
            );
            return ExitCode::FAILURE;
        }
    }
    if failed_refs.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!(
            "xtask bench --multinode: reference rows without a number: {}",
            failed_refs.join(", ")
        );
        ExitCode::FAILURE
    }
}
