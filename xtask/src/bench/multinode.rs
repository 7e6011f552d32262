//! `cargo xtask bench --multinode`: the launchers side by side on the pretend cluster (as
//! root; `scripts/multinode/cluster.sh`, 2, 4 and 8 nodes × 2 ranks by default): MPICH's
//! Hydra over ssh, Open MPI 4.1's `mpirun` and PRRTE 3.0.14's `prterun` (Open MPI 5.0.11's,
//! from the venv at /opt/ompi5) with pssh as their agent, Slurm's `srun --mpi=pmix`, and
//! `pmixrun` with pssh as its agent and inside a Slurm allocation. For each: launch to exit
//! of an MPI hello (`xtask/c/mpi_hello.c`) and of a PMI hello (init, a fence without data,
//! finalize), then barrier latency, collecting-fence latency with 100 B, 1 KB and 10 KB per
//! rank, direct-modex get latency and spawn latency, measured by `xtask/c/mn_bench.c`
//! (libpmix) under the PMIx launchers and by `xtask/c/pmi1_bench.c` (the barrier and fence
//! loops over PMI-1) under Hydra and pmixrun's PMI-1 columns. Median of `--runs`
//! repetitions, the launchers taking turns to go first; a Markdown table per node count with
//! the machine and its load. A launcher that fails shows "failed" and why; only the
//! reference launchers' failures fail the bench.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use super::build::{self, Dirs, compile_source};
use super::exec;
use super::launch::check_output;
use super::mpich::Mpich;
use super::stats::median;
use super::{machine, report};
use crate::multinode::cluster::{self, Cluster};
use crate::multinode::launchers::{self, ompi5, ranks};
use crate::multinode::procs;

const USAGE: &str = "\
usage: cargo xtask bench --multinode [options]        (as root)

On the pretend cluster (scripts/multinode/cluster.sh, 2 ranks per node), side by side:
launch to exit of an MPI hello and of a PMI hello, barrier latency, collecting-fence latency
with 100 B, 1 KB and 10 KB per rank, direct-modex get latency and spawn latency, under
MPICH's Hydra (-launcher ssh), Open MPI 4.1's mpirun and PRRTE's prterun (agent pssh),
srun --mpi=pmix, and pmixrun (agent pssh, and inside salloc). Median of --runs
repetitions; prints a Markdown table per node count. pmixrun's failures are reported in
its cells and do not fail the bench; a reference's do.

options:
    --nodes N[,N...]  node counts (default 2,4,8)
    --runs K          repetitions (default 3)
    --fences F        collecting fences of each size per run (default 50)
    --barriers B      barriers per run (default 200)
    --dmodex D        direct-modex gets per run (default 50)
    --spawns S        spawns per run, by rank 0 (default 5)
    --timeout S       deadline of one run (default 120)
    --launchers L,... only these columns (hydra, openmpi, prterun, srun-pmix, pmixrun,
                      pmixrun-pmi1, pmixrun-salloc, floor; default all)
    --out FILE        also write the report to FILE
    -h, --help        this text";

struct Opts {
    nodes: Vec<u32>,
    runs: u32,
    fences: u32,
    barriers: u32,
    dmodex: u32,
    spawns: u32,
    timeout: Duration,
    out: Option<PathBuf>,
    launchers: Vec<Launcher>,
}

impl Opts {
    fn parse(args: &[String]) -> Result<Opts, String> {
        let mut o = Opts {
            nodes: vec![2, 4, 8],
            runs: 3,
            fences: 50,
            barriers: 200,
            dmodex: 50,
            spawns: 5,
            timeout: Duration::from_secs(120),
            out: None,
            launchers: Launcher::ALL.to_vec(),
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
                "--nodes" => {
                    let list = it.next().ok_or("--nodes needs a value")?;
                    o.nodes = list
                        .split(',')
                        .map(|n| n.parse().ok().filter(|n| (2..=64).contains(n)))
                        .collect::<Option<Vec<u32>>>()
                        .ok_or("--nodes takes node counts from 2 to 64, such as 2,4,8")?;
                    o.nodes.sort_unstable();
                    o.nodes.dedup();
                }
                "--runs" => o.runs = number(1, 50)?,
                "--fences" => o.fences = number(1, 100_000)?,
                "--barriers" => o.barriers = number(1, 100_000)?,
                "--dmodex" => o.dmodex = number(1, 100_000)?,
                "--spawns" => o.spawns = number(0, 1000)?,
                "--timeout" => o.timeout = Duration::from_secs(number(1, 3600)?.into()),
                "--launchers" => {
                    let list = it.next().ok_or("--launchers needs a value")?;
                    o.launchers = list
                        .split(',')
                        .map(|name| {
                            Launcher::ALL
                                .into_iter()
                                .find(|l| l.slug() == name)
                                .ok_or_else(|| format!("--launchers: no launcher {name:?}"))
                        })
                        .collect::<Result<Vec<_>, _>>()?;
                    o.launchers.sort_unstable();
                    o.launchers.dedup();
                }
                "--out" => {
                    o.out = Some(PathBuf::from(it.next().ok_or("--out needs a value")?));
                }
                _ => return Err(format!("unknown option {a:?}")),
            }
        }
        Ok(o)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Launcher {
    Hydra,
    OpenMpi,
    /// PRRTE 3.0.14's `prterun`, from Open MPI 5.0.11 (OpenPMIx 5.0.11 server).
    Prterun,
    /// Slurm's own `srun --mpi=pmix` (libpmix 4.2 in slurmstepd), libpmix clients.
    SrunPmix,
    /// With libpmix clients (mn_bench), as under mpirun.
    Pmixrun,
    /// With PMI-1 clients (pmi1_bench), as under Hydra.
    PmixrunPmi1,
    /// pmixrun inside a Slurm allocation (daemons started by one srun), PMI-1 clients.
    PmixrunSlurm,
    /// Not a launcher: `xtask/c/barrier_floor.c`, the least a barrier can cost here.
    Floor,
}

impl Launcher {
    const ALL: [Launcher; 8] = [
        Launcher::Hydra,
        Launcher::OpenMpi,
        Launcher::Prterun,
        Launcher::SrunPmix,
        Launcher::Pmixrun,
        Launcher::PmixrunPmi1,
        Launcher::PmixrunSlurm,
        Launcher::Floor,
    ];

    /// Ours, whose failures do not fail the bench.
    fn is_ours(self) -> bool {
        matches!(
            self,
            Launcher::Pmixrun | Launcher::PmixrunPmi1 | Launcher::PmixrunSlurm
        )
    }

    /// A launcher of another project, which pmixrun is measured against.
    fn is_reference(self) -> bool {
        !self.is_ours() && self != Launcher::Floor
    }

    /// What it measures: the floor, a barrier only.
    fn measures(self, m: Metric) -> bool {
        match self {
            // Its relays' CPU is not the subject: it has no daemon doing PMIx work.
            Launcher::Floor => m == Metric::Barrier,
            l => !(m.pmix_only() && l.is_pmi1()),
        }
    }

    /// Its clients speak PMI-1 (pmi1_bench, the MPICH hello), not PMIx.
    fn is_pmi1(self) -> bool {
        matches!(
            self,
            Launcher::Hydra | Launcher::PmixrunPmi1 | Launcher::PmixrunSlurm
        )
    }

    fn header(self) -> &'static str {
        match self {
            Launcher::Hydra => "Hydra (`mpiexec.hydra -launcher ssh`), PMI-1",
            Launcher::OpenMpi => "Open MPI 4.1 `mpirun` (agent pssh)",
            Launcher::Prterun => "PRRTE 3.0.14 `prterun` (agent pssh)",
            Launcher::SrunPmix => "`srun --mpi=pmix` (ring fence)",
            Launcher::Pmixrun => "pmixrun (agent pssh)",
            Launcher::PmixrunPmi1 => "pmixrun (agent pssh), PMI-1",
            Launcher::PmixrunSlurm => "`salloc` pmixrun (one srun), PMI-1",
            Launcher::Floor => "floor: C relays, no PMIx",
        }
    }

    fn slug(self) -> &'static str {
        match self {
            Launcher::Hydra => "hydra",
            Launcher::OpenMpi => "openmpi",
            Launcher::Prterun => "prterun",
            Launcher::SrunPmix => "srun-pmix",
            Launcher::Pmixrun => "pmixrun",
            Launcher::PmixrunPmi1 => "pmixrun-pmi1",
            Launcher::PmixrunSlurm => "pmixrun-salloc",
            Launcher::Floor => "floor",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Metric {
    MpiHello,
    PmiHello,
    Barrier,
    Fence100,
    Fence1k,
    Fence10k,
    DmodexGet,
    DmodexFirst,
    Spawn,
    CpuBarrier,
    CpuFence100,
    CpuFence1k,
    CpuFence10k,
    ClientCpuBarrier,
    ClientCpuFence100,
    ClientCpuFence1k,
    ClientCpuFence10k,
}

impl Metric {
    const ALL: [Metric; 17] = [
        Metric::MpiHello,
        Metric::PmiHello,
        Metric::Barrier,
        Metric::Fence100,
        Metric::Fence1k,
        Metric::Fence10k,
        Metric::DmodexGet,
        Metric::DmodexFirst,
        Metric::Spawn,
        Metric::CpuBarrier,
        Metric::CpuFence100,
        Metric::CpuFence1k,
        Metric::CpuFence10k,
        Metric::ClientCpuBarrier,
        Metric::ClientCpuFence100,
        Metric::ClientCpuFence1k,
        Metric::ClientCpuFence10k,
    ];

    /// What the benchmark clients measure, in one run: the metric and its line's name.
    const MEASURED: [(Metric, &'static str); 15] = [
        (Metric::Barrier, "barrier_us"),
        (Metric::Fence100, "fence_100_us"),
        (Metric::Fence1k, "fence_1000_us"),
        (Metric::Fence10k, "fence_10000_us"),
        (Metric::DmodexGet, "dmodex_get_us"),
        (Metric::DmodexFirst, "dmodex_first_us"),
        (Metric::Spawn, "spawn_ms"),
        (Metric::CpuBarrier, "daemon_cpu_barrier_us"),
        (Metric::CpuFence100, "daemon_cpu_fence_100_us"),
        (Metric::CpuFence1k, "daemon_cpu_fence_1000_us"),
        (Metric::CpuFence10k, "daemon_cpu_fence_10000_us"),
        (Metric::ClientCpuBarrier, "client_cpu_barrier_us"),
        (Metric::ClientCpuFence100, "client_cpu_fence_100_us"),
        (Metric::ClientCpuFence1k, "client_cpu_fence_1000_us"),
        (Metric::ClientCpuFence10k, "client_cpu_fence_10000_us"),
    ];

    fn label(self) -> &'static str {
        match self {
            Metric::MpiHello => "MPI hello, launch to exit (ms)",
            Metric::PmiHello => "PMI hello (init, fence, finalize), launch to exit (ms)",
            Metric::Barrier => "barrier: fence without data (µs)",
            Metric::Fence100 => "collecting fence, 100 B per rank (µs)",
            Metric::Fence1k => "collecting fence, 1 KB per rank (µs)",
            Metric::Fence10k => "collecting fence, 10 KB per rank (µs)",
            Metric::DmodexGet => "get of a far rank's key after a barrier (µs)",
            Metric::DmodexFirst => "get of a far rank's first commit, no fence (µs)",
            Metric::Spawn => "spawn of 1 process by rank 0 (ms)",
            Metric::CpuBarrier => "daemon CPU per barrier (µs)",
            Metric::CpuFence100 => "daemon CPU per collecting fence, 100 B per rank (µs)",
            Metric::CpuFence1k => "daemon CPU per collecting fence, 1 KB per rank (µs)",
            Metric::CpuFence10k => "daemon CPU per collecting fence, 10 KB per rank (µs)",
            Metric::ClientCpuBarrier => "client CPU per barrier (µs)",
            Metric::ClientCpuFence100 => "client CPU per collecting fence, 100 B per rank (µs)",
            Metric::ClientCpuFence1k => "client CPU per collecting fence, 1 KB per rank (µs)",
            Metric::ClientCpuFence10k => "client CPU per collecting fence, 10 KB per rank (µs)",
        }
    }

    /// Measured only by PMIx clients: PMI-1 has no direct modex or spawn of its own here.
    fn pmix_only(self) -> bool {
        matches!(
            self,
            Metric::DmodexGet | Metric::DmodexFirst | Metric::Spawn
        )
    }
}

/// The programs of one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// The MPI hello: launch to exit.
    MpiHello,
    /// mn_bench --hello or pmi1_bench with no rounds: launch to exit.
    PmiHello,
    /// mn_bench or pmi1_bench: the latencies.
    Bench,
}

impl Step {
    const ALL: [Step; 3] = [Step::MpiHello, Step::PmiHello, Step::Bench];

    fn slug(self) -> &'static str {
        match self {
            Step::MpiHello => "mpi-hello",
            Step::PmiHello => "pmi-hello",
            Step::Bench => "bench",
        }
    }
}

/// The programs, each the reason it is missing if it is.
struct Programs {
    pmixrun: Result<PathBuf, String>,
    mpich_hello: Result<PathBuf, String>,
    ompi_hello: Result<PathBuf, String>,
    ompi5_hello: Result<PathBuf, String>,
    mn_bench: Result<PathBuf, String>,
    pmi1_bench: Result<PathBuf, String>,
    barrier_floor: Result<PathBuf, String>,
}

fn build_programs(dirs: &Dirs) -> Programs {
    let out = dirs.target().join("xtask-bench");
    let c = crate::workspace_root().join("xtask").join("c");
    let ompi5_cc = ompi5().join("bin").join("mpicc");
    Programs {
        pmixrun: build::pmixrun(dirs),
        mpich_hello: build::mpi_hello(dirs, Mpich::Debian).map(|h| h.exe),
        ompi_hello: compile_source(
            Path::new("/usr/bin/mpicc.openmpi"),
            &c.join("mpi_hello.c"),
            &out.join("mpi_hello-openmpi"),
            &[],
        ),
        ompi5_hello: if ompi5_cc.exists() {
            compile_source(
                &ompi5_cc,
                &c.join("mpi_hello.c"),
                &out.join("mpi_hello-openmpi5"),
                &[],
            )
        } else {
            Err(format!(
                "no {}: run scripts/install-test-deps.sh as root",
                ompi5_cc.display()
            ))
        },
        mn_bench: build::mn_bench(dirs),
        pmi1_bench: build::pmi1_bench(dirs),
        barrier_floor: build::barrier_floor(dirs),
    }
}

fn hydra(nodes: u32, o: &Opts, program: &Path) -> Command {
    let mut cmd = launchers::hydra(nodes);
    cmd.env("MPIEXEC_TIMEOUT", o.timeout.as_secs().to_string())
        .arg(program);
    cmd
}

fn mpirun(nodes: u32, program: &Path) -> Command {
    let mut cmd = launchers::mpirun(nodes);
    cmd.arg(program);
    cmd
}

fn prterun(nodes: u32, program: &Path) -> Command {
    let mut cmd = launchers::prterun(nodes);
    cmd.arg(program);
    cmd
}

/// Slurm's own launcher and PMIx server, with the ring fence ([`launchers::srun_pmix`]).
fn srun_pmix(nodes: u32, program: &Path) -> Command {
    let mut cmd = launchers::srun_pmix(nodes);
    cmd.arg(program);
    cmd
}

/// pmixrun in an allocation of `nodes` nodes: no host list, its daemons started by one srun.
fn salloc_pmixrun(nodes: u32, pmixrun: &Path, program: &Path) -> Command {
    let mut cmd = launchers::salloc(nodes);
    cmd.arg(pmixrun)
        .args(["--pmi", "pmi1", "-n", &ranks(nodes).to_string()])
        .arg(program);
    cmd
}

/// pmixrun over pssh, with PMI-1 clients if `pmi1`.
fn pmixrun(nodes: u32, pmixrun: &Path, pmi1: bool, program: &Path) -> Command {
    let mut cmd = launchers::pmixrun(nodes, pmixrun);
    if pmi1 {
        cmd.args(["--pmi", "pmi1"]);
    }
    cmd.arg(program);
    cmd
}

/// The floor's run: its root on the host, which says its port; a relay on each node over
/// pssh (two ranks each), started once the root listens; fails if any part does.
const FLOOR_SCRIPT: &str = r#"set -o pipefail
prog=$0 nodes=$1 iters=$2 pssh=$3
"$prog" root "$nodes" "$iters" | {
  read -r word port || exit 1
  pids=
  k=1
  while [ "$k" -le "$nodes" ]; do
    "$pssh" "node$k" "$prog" relay 10.77.255.254 "$port" 2 "$iters" &
    pids="$pids $!"
    k=$((k + 1))
  done
  status=0
  for p in $pids; do wait "$p" || status=1; done
  exit "$status"
}"#;

fn floor(nodes: u32, o: &Opts, program: &Path) -> Command {
    let mut cmd = Command::new("bash");
    cmd.args(["-c", FLOOR_SCRIPT])
        .arg(program)
        .args([nodes.to_string(), o.barriers.to_string()])
        .arg(cluster::pssh());
    cmd
}

/// The command of one step under one launcher on `nodes` nodes; `None` if it has no such
/// step (the floor has only a barrier).
fn command(
    nodes: u32,
    o: &Opts,
    p: &Programs,
    l: Launcher,
    step: Step,
) -> Option<Result<Command, String>> {
    let need = |r: &Result<PathBuf, String>| r.clone().map_err(|e| format!("not built: {e}"));
    if l == Launcher::Floor {
        return (step == Step::Bench).then(|| Ok(floor(nodes, o, &need(&p.barrier_floor)?)));
    }
    Some(step_command(nodes, o, p, l, step))
}

fn step_command(
    nodes: u32,
    o: &Opts,
    p: &Programs,
    l: Launcher,
    step: Step,
) -> Result<Command, String> {
    let need = |r: &Result<PathBuf, String>| r.clone().map_err(|e| format!("not built: {e}"));
    let program = match (step, l) {
        (Step::MpiHello, Launcher::OpenMpi | Launcher::SrunPmix) => need(&p.ompi_hello)?,
        (Step::MpiHello, Launcher::Prterun) => need(&p.ompi5_hello)?,
        (Step::MpiHello, _) => need(&p.mpich_hello)?,
        (_, l) if l.is_pmi1() => need(&p.pmi1_bench)?,
        _ => need(&p.mn_bench)?,
    };
    let args: Vec<String> = match step {
        Step::MpiHello => Vec::new(),
        Step::PmiHello if l.is_pmi1() => vec!["0".into(), "0".into()],
        Step::PmiHello => vec!["--hello".into()],
        Step::Bench if l.is_pmi1() => vec![o.fences.to_string(), o.barriers.to_string()],
        Step::Bench => [
            ("--barrier", o.barriers),
            ("--fence", o.fences),
            ("--dmodex", o.dmodex),
            ("--spawn", o.spawns),
        ]
        .iter()
        .flat_map(|(k, v)| [(*k).to_owned(), v.to_string()])
        .collect(),
    };
    let mut cmd = match l {
        Launcher::Hydra => hydra(nodes, o, &program),
        Launcher::OpenMpi => mpirun(nodes, &program),
        Launcher::Prterun => prterun(nodes, &program),
        Launcher::SrunPmix => srun_pmix(nodes, &program),
        Launcher::Pmixrun => pmixrun(nodes, &need(&p.pmixrun)?, false, &program),
        Launcher::PmixrunPmi1 => pmixrun(nodes, &need(&p.pmixrun)?, true, &program),
        Launcher::PmixrunSlurm => salloc_pmixrun(nodes, &need(&p.pmixrun)?, &program),
        Launcher::Floor => floor(nodes, o, &program),
    };
    cmd.args(args);
    Ok(cmd)
}

/// The values of `metric`'s lines (`<metric> <value>`), if `expect` of them were printed.
fn values_of(stdout: &str, metric: &str, expect: usize) -> Result<Vec<f64>, String> {
    let values: Vec<f64> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix(metric)?.trim().parse().ok())
        .collect();
    if values.len() != expect {
        let note = stdout
            .lines()
            .find_map(|l| l.strip_prefix("NOTE "))
            .map_or(String::new(), |n| format!(" ({n})"));
        return Err(format!(
            "{} of {expect} ranks reported {metric}{note}",
            values.len()
        ));
    }
    Ok(values)
}

/// The mean over the ranks of `metric`'s lines, if every rank printed one.
fn mean_of(stdout: &str, metric: &str, ranks: u32) -> Result<f64, String> {
    let values = values_of(stdout, metric, ranks as usize)?;
    if values.iter().any(|v| *v < 0.0) {
        return Err(format!(
            "a rank printed a negative {metric} (its parent's CPU time could not be read)"
        ));
    }
    Ok(values.iter().sum::<f64>() / f64::from(ranks))
}

/// Where a bench run's ranks ran (mn_bench's and pmi1_bench's `node <hostname>` lines): two
/// on each of the `nodes` nodes, or the row measures something else than it says.
fn check_placement(stdout: &str, nodes: u32) -> Result<(), String> {
    let mut per_node: BTreeMap<&str, u32> = BTreeMap::new();
    for host in stdout.lines().filter_map(|l| l.strip_prefix("node ")) {
        *per_node.entry(host.trim()).or_default() += 1;
    }
    if per_node.len() == nodes as usize && per_node.values().all(|&k| k == 2) {
        return Ok(());
    }
    let seen: Vec<String> = per_node.iter().map(|(h, k)| format!("{h}:{k}")).collect();
    Err(format!(
        "placed its ranks as {}, not 2 on each of {nodes} nodes",
        if seen.is_empty() {
            "unknown".to_owned()
        } else {
            seen.join(",")
        }
    ))
}

/// mn_bench --hello's output: `hello <rank> <size>` once from every rank.
fn check_hellos(stdout: &str, n: u32) -> Result<(), String> {
    let mut seen = vec![false; n as usize];
    for line in stdout.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let rank = match words.as_slice() {
            ["hello", rank, size] if *size == n.to_string() => rank.parse::<usize>().ok(),
            _ => None,
        }
        .ok_or_else(|| format!("unexpected output line {line:?}"))?;
        match seen.get_mut(rank) {
            Some(s) if !*s => *s = true,
            _ => return Err(format!("rank {rank} printed twice or is out of range")),
        }
    }
    match seen.iter().filter(|s| !**s).count() {
        0 => Ok(()),
        missing => Err(format!("{missing} of {n} ranks printed no hello line")),
    }
}

/// One cell's address: node count, launcher, metric.
type Cell = (u32, Launcher, Metric);

#[derive(Default)]
struct Results {
    values: BTreeMap<Cell, Vec<f64>>,
    errors: BTreeMap<Cell, Vec<String>>,
    /// Refused by the launcher as not supported (Slurm's PMIx plugin has no spawn).
    unsupported: BTreeSet<Cell>,
    /// Whose CPU the daemon rows measured: the ranks' parents' names, per launcher.
    daemons: BTreeMap<Launcher, BTreeSet<String>>,
}

impl Results {
    fn fail(&mut self, nodes: u32, l: Launcher, metrics: &[Metric], why: &str) {
        for m in metrics {
            self.errors
                .entry((nodes, l, *m))
                .or_default()
                .push(why.to_owned());
        }
    }

    fn median(&self, c: Cell) -> Option<f64> {
        median(self.values.get(&c).map_or(&[][..], Vec::as_slice))
    }

    fn cell(&self, c: Cell, runs: u32) -> String {
        let (_, l, m) = c;
        if l == Launcher::Floor && !l.measures(m) {
            return "-".to_owned();
        }
        if !l.measures(m) {
            return "n/a (PMI-1)".to_owned();
        }
        let values = self.values.get(&c).map_or(&[][..], Vec::as_slice);
        if values.is_empty() && self.unsupported.contains(&c) {
            return "not supported".to_owned();
        }
        match median(values) {
            Some(v) => {
                let min = values.iter().copied().fold(f64::INFINITY, f64::min);
                let mut s = format!("{} (min {})", report::sig3(v), report::sig3(min));
                if values.len() < runs as usize {
                    let _ = write!(s, " ({} of {runs} runs)", values.len());
                }
                s
            }
            None => {
                let why = self
                    .errors
                    .get(&c)
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

    /// Records what one step printed, or why it failed.
    fn record(&mut self, nodes: u32, l: Launcher, step: Step, outcome: &exec::Outcome) {
        let n = ranks(nodes);
        let metrics: Vec<Metric> = match step {
            Step::MpiHello => vec![Metric::MpiHello],
            Step::PmiHello => vec![Metric::PmiHello],
            Step::Bench => Metric::MEASURED
                .iter()
                .map(|(m, _)| *m)
                .filter(|m| l.measures(*m))
                .collect(),
        };
        if let Some(f) = &outcome.failure {
            return self.fail(nodes, l, &metrics, f);
        }
        let ms = outcome.elapsed.as_secs_f64() * 1e3;
        let checked = match step {
            Step::MpiHello => check_output(&outcome.stdout, n),
            Step::PmiHello if l.is_pmi1() => {
                values_of(&outcome.stdout, "barrier_us", n as usize).map(drop)
            }
            Step::PmiHello => check_hellos(&outcome.stdout, n),
            Step::Bench => {
                if l != Launcher::Floor {
                    if let Err(e) = check_placement(&outcome.stdout, nodes) {
                        return self.fail(nodes, l, &metrics, &e);
                    }
                    let names = outcome
                        .stdout
                        .lines()
                        .filter_map(|l| l.strip_prefix("daemon "));
                    self.daemons
                        .entry(l)
                        .or_default()
                        .extend(names.map(|n| n.trim().to_owned()));
                }
                for m in metrics {
                    let Some((_, key)) = Metric::MEASURED.iter().find(|(x, _)| *x == m) else {
                        continue;
                    };
                    // Spawn: rank 0 alone, which says so if the launcher refuses it.
                    if m == Metric::Spawn && outcome.stdout.contains("NOTE spawn: NOT-SUPPORTED") {
                        self.unsupported.insert((nodes, l, m));
                        continue;
                    }
                    let got = if m == Metric::Spawn {
                        values_of(&outcome.stdout, key, 1).map(|v| v[0])
                    } else {
                        mean_of(&outcome.stdout, key, n)
                    };
                    match got {
                        Ok(v) => self.values.entry((nodes, l, m)).or_default().push(v),
                        Err(e) => self.fail(nodes, l, &[m], &e),
                    }
                }
                return;
            }
        };
        match checked {
            Ok(()) => self
                .values
                .entry((nodes, l, metrics[0]))
                .or_default()
                .push(ms),
            Err(e) => self.fail(nodes, l, &metrics, &e),
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
    let most = o.nodes.iter().copied().max().unwrap_or(2);
    let cluster = match Cluster::up(&crate::multinode::cluster_script(), most) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("xtask bench --multinode: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "xtask bench --multinode: {most} nodes up in {:.2} s",
        cluster.up_time.as_secs_f64()
    );
    let logs = dirs.target().join("xtask-bench").join("logs-multinode");
    let mut results = Results::default();
    let mut notes = Vec::new();
    'all: for &nodes in &o.nodes {
        for run in 1..=o.runs {
            let mut order = o.launchers.clone();
            let turn = (run as usize - 1) % order.len();
            order.rotate_left(turn);
            for l in order {
                for step in Step::ALL {
                    if cluster::STOPPING.load(std::sync::atomic::Ordering::SeqCst) {
                        break 'all;
                    }
                    let name = format!("n{nodes}-{}-{}-run{run}", l.slug(), step.slug());
                    let cmd = match command(nodes, &o, &programs, l, step) {
                        None => continue,
                        Some(Ok(c)) => c,
                        Some(Err(e)) => {
                            let failed = exec::Outcome {
                                stdout: String::new(),
                                failure: Some(e),
                                elapsed: Duration::ZERO,
                            };
                            results.record(nodes, l, step, &failed);
                            continue;
                        }
                    };
                    let secs = started.elapsed().as_secs();
                    eprintln!(
                        "xtask bench --multinode: [{}:{:02}] {name}",
                        secs / 60,
                        secs % 60
                    );
                    let before = procs::Before::take(most);
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
                    results.record(nodes, l, step, &outcome);
                }
            }
        }
    }
    cluster.down("after the bench");
    let md = report_markdown(&o, &results, &notes, &load_before, started);
    let mut failed_refs = Vec::new();
    for ((nodes, l, m), errs) in &results.errors {
        for e in errs.iter().take(1) {
            eprintln!(
                "xtask bench --multinode: {nodes} nodes, {} {}: {e}",
                l.slug(),
                m.label()
            );
        }
        let cell = (*nodes, *l, *m);
        if !l.is_ours()
            && !results.values.contains_key(&cell)
            && !results.unsupported.contains(&cell)
        {
            failed_refs.push(format!("{nodes} nodes {} {}", l.slug(), m.label()));
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
            "xtask bench --multinode: reference cells without a number: {}",
            failed_refs.join(", ")
        );
        ExitCode::FAILURE
    }
}

/// The report: the machine, a table per node count, how pmixrun compares with the best
/// reference, and how the collecting fence grows with the nodes.
fn report_markdown(
    o: &Opts,
    results: &Results,
    notes: &[String],
    load_before: &str,
    started: Instant,
) -> String {
    let mut md = format!(
        "# Launchers on the pretend cluster\n\n{} nodes × 2 ranks, network-namespace nodes \
         on one host (`scripts/multinode/cluster.sh`), ssh between them; median (and \
         minimum) of {} runs, the launchers taking turns to go first. Latencies: the mean \
         per call over {} barriers, {} collecting fences of each size, {} gets and {} spawns \
         (rank 0), averaged over the ranks. Clients: `xtask/c/mn_bench.c` (Debian's libpmix \
         4.2) under the PMIx launchers, `xtask/c/pmi1_bench.c` (PMI-1) under Hydra and \
         pmixrun's PMI-1 columns; the MPI hello is MPICH 4.0.2's under Hydra and pmixrun, \
         Open MPI 4.1's under mpirun and srun, Open MPI 5.0.11's under prterun. The floor is \
         `xtask/c/barrier_floor.c`: the same layout (a root on the host, a relay per node \
         over pssh, two ranks each) passing one byte per message, no PMIx: the least a \
         barrier costs on these nodes. The daemon CPU rows: the CPU time (all threads, \
         from the scheduler's accounting in /proc) that each rank's parent, the launcher's \
         daemon on its node, spent during the loop, per barrier or fence, averaged over the \
         ranks (both ranks of a node read the same daemon); the root on the host is not in \
         them. The parents were: {}. The client CPU rows: the same for each rank's own CPU time \
         (`getrusage`, its library's threads included): what the clients alone ask of the \
         machine's CPUs per collective.\n\n",
        o.nodes
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", "),
        o.runs,
        o.barriers,
        o.fences,
        o.dmodex,
        o.spawns,
        daemon_names(results)
    );
    for line in machine::machine(true)
        .into_iter()
        .filter(|l| !l.contains(Mpich::Venv.name()))
    {
        let _ = writeln!(md, "- {line}");
    }
    let _ = writeln!(
        md,
        "- load average (1, 5, 15 min): {load_before} before, {} after; {:.0} s in all",
        machine::load_average(),
        started.elapsed().as_secs_f64()
    );
    for &nodes in &o.nodes {
        let _ = write!(
            md,
            "\n## {nodes} nodes, {} ranks\n\n| metric |",
            ranks(nodes)
        );
        for l in &o.launchers {
            let _ = write!(md, " {} |", l.header());
        }
        let _ = writeln!(
            md,
            " pmixrun ÷ best reference |\n| --- |{}",
            " ---: |".repeat(o.launchers.len() + 1)
        );
        for m in Metric::ALL {
            let _ = write!(md, "| {} |", m.label());
            for &l in &o.launchers {
                let _ = write!(md, " {} |", results.cell((nodes, l, m), o.runs));
            }
            let _ = writeln!(md, " {} |", ratio_to_best(results, nodes, m));
        }
    }
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    md.push_str(
        "\n## Collecting fence (1 KB per rank) against node count (µs)\n\nEach launcher's \
         fence, then what its clients alone ask of the machine: the ranks × the client CPU \
         per fence ÷ the CPUs (a floor under the fence on a machine whose CPUs the ranks \
         share); growth: the most nodes' over the fewest.\n\n",
    );
    growth_table(&mut md, o, |l, nodes| {
        results.median((nodes, l, Metric::Fence1k))
    });
    md.push('\n');
    growth_table(&mut md, o, |l, nodes| {
        let per_rank = results.median((nodes, l, Metric::ClientCpuFence1k))?;
        Some(per_rank * f64::from(ranks(nodes)) / cpus as f64)
    });
    if !notes.is_empty() {
        md.push_str("\nLeft behind by a run (killed):\n");
        for n in notes {
            let _ = writeln!(md, "- {n}");
        }
    }
    md
}

/// A table of one value per launcher and node count, with its growth from the fewest nodes
/// to the most.
fn growth_table(md: &mut String, o: &Opts, value: impl Fn(Launcher, u32) -> Option<f64>) {
    let _ = writeln!(
        md,
        "| launcher |{} growth |\n| --- |{}",
        o.nodes
            .iter()
            .map(|n| format!(" {n} nodes |"))
            .collect::<String>(),
        " ---: |".repeat(o.nodes.len() + 1)
    );
    for &l in &o.launchers {
        let _ = write!(md, "| {} |", l.header());
        let values: Vec<Option<f64>> = o.nodes.iter().map(|&n| value(l, n)).collect();
        for v in &values {
            let _ = write!(md, " {} |", v.map_or("-".to_owned(), report::sig3));
        }
        let growth = match (values.first(), values.last()) {
            (Some(Some(a)), Some(Some(b))) if values.len() > 1 && *a > 0.0 => {
                format!("{:.1}×", b / a)
            }
            _ => "-".to_owned(),
        };
        let _ = writeln!(md, " {growth} |");
    }
}

/// "`prted` under prterun, ..." from what the bench runs' ranks said their parents were.
fn daemon_names(results: &Results) -> String {
    let said: Vec<String> = results
        .daemons
        .iter()
        .map(|(l, names)| {
            let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            format!("{} under {}", names.join(" or "), l.slug())
        })
        .collect();
    if said.is_empty() {
        "not reported".to_owned()
    } else {
        said.join(", ")
    }
}

/// pmixrun's best column over the best reference's, for one metric at one node count.
fn ratio_to_best(results: &Results, nodes: u32, m: Metric) -> String {
    let best = |ours: bool| {
        Launcher::ALL
            .iter()
            .filter(|l| if ours { l.is_ours() } else { l.is_reference() })
            .filter_map(|l| Some((results.median((nodes, *l, m))?, *l)))
            .min_by(|a, b| a.0.total_cmp(&b.0))
    };
    match (best(true), best(false)) {
        (Some((ours, l)), Some((theirs, r))) => {
            format!("{:.2} ({} ÷ {})", ours / theirs, l.slug(), r.slug())
        }
        _ => "-".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::{Launcher, Opts, check_placement, growth_table};

    #[test]
    fn growth_is_the_most_nodes_over_the_fewest() {
        let mut o = Opts::parse(&["--nodes".into(), "8,2,4".into()]).expect("options");
        o.launchers = vec![Launcher::Hydra, Launcher::Floor];
        let mut md = String::new();
        growth_table(&mut md, &o, |l, nodes| {
            (l == Launcher::Hydra).then_some(f64::from(nodes) * 100.0 + 10.0)
        });
        let rows: Vec<&str> = md.lines().collect();
        assert_eq!(
            rows[0],
            "| launcher | 2 nodes | 4 nodes | 8 nodes | growth |"
        );
        assert!(
            rows[2].ends_with("| 210 | 410 | 810 | 3.9× |"),
            "{}",
            rows[2]
        );
        assert!(rows[3].ends_with("| - | - | - | - |"), "{}", rows[3]);
    }

    #[test]
    fn placement_is_two_ranks_on_each_node() {
        let spread = "node node1\nbarrier_us 1\nnode node2\nnode node1\nnode node2\n";
        assert!(check_placement(spread, 2).is_ok());
        // What prterun did with `--map-by :OVERSUBSCRIBE`: every rank on the first node.
        let packed = "node node1\n".repeat(4);
        let e = check_placement(&packed, 2).unwrap_err();
        assert!(e.contains("node1:4"), "{e}");
        assert!(check_placement("barrier_us 1\n", 2).is_err());
        assert!(check_placement("node a\nnode a\nnode b\n", 2).is_err());
    }
}
