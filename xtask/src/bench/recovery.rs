//! `cargo xtask bench --recovery`: how long after a rank of a recoverable job exits its
//! survivors are told, under `pmixrun --enable-recovery` and PRRTE 3.0.14's `prterun
//! --runtime-options recoverable,notifyerrors` side by side, on one node, on two logical nodes
//! of this machine (pmixrun only: PRRTE has none), and with `--cluster` across the nodes of the
//! pretend cluster (`scripts/multinode/cluster.sh`, as root; both launchers over pssh).
//!
//! The job is `pmix-test-client recovery <last rank> 3 timed` (its scenario in
//! `pmix-tests/src/bin/pmix-test-client/recovery.rs`): once every rank is up, the last rank
//! says the time and exits with status 3; every other rank says when its event handler ran:
//! `EVENT_PROC_TERMINATED`'s under pmixrun, `ERR_EXIT_NONZERO_TERM`'s under prterun (argument
//! `exit-nonzero`; PRRTE sends no other event for the exit, and that one to no default
//! handler), each naming the rank and its exit code. A run counts only if the launcher exits 3
//! and every survivor was told; its figure is the slowest survivor's time minus the exit's
//! (nanoseconds since the epoch: the logical nodes and the cluster's nodes are processes of
//! this machine, on its one clock). A cluster run counts only if its ranks said (`rank R: on
//! <hostname>`) they ran two on each node, the failed last rank on another node than rank 0.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::Duration;

use super::build::{self, Dirs};
use super::capi::prterun_here;
use super::exec;
use super::machine;
use super::stats::median;
use crate::multinode::cluster::Cluster;
use crate::multinode::launchers::{self, ompi5, ranks};
use crate::multinode::procs;

const USAGE: &str = "\
usage: cargo xtask bench --recovery [--n LIST] [--cluster NODES] [--runs K] [--out FILE]

Times from a rank's exit (status 3) to the slowest survivor's event handler, under pmixrun
--enable-recovery (EVENT_PROC_TERMINATED) and under PRRTE's prterun --runtime-options
recoverable,notifyerrors (ERR_EXIT_NONZERO_TERM; $PMIXRS_OMPI5/bin/prterun, default
/opt/ompi5), the two taking turns to go first: N ranks for N in LIST (default 4,16) on one
node, and under pmixrun on two logical nodes of this machine (--launcher local); with
--cluster, also on the pretend cluster (as root; scripts/multinode/cluster.sh), 2 ranks on
each node for each node count of NODES (e.g. 2,4), both launchers over pssh. K runs each
(default 5). Prints the median and the minimum in microseconds.";

/// One run's deadline.
const DEADLINE: Duration = Duration::from_secs(60);

struct Opts {
    ns: Vec<u32>,
    cluster: Vec<u32>,
    runs: u32,
    out: Option<PathBuf>,
}

/// A comma-separated list of numbers, for `option`.
fn numbers(list: &str, option: &str) -> Result<Vec<u32>, String> {
    list.split(',')
        .map(|n| n.trim().parse().map_err(|_| format!("{option}: {n:?}")))
        .collect()
}

fn parse(args: &[String]) -> Result<Option<Opts>, String> {
    let mut o = Opts {
        ns: vec![4, 16],
        cluster: Vec::new(),
        runs: 5,
        out: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "-h" | "--help" => return Ok(None),
            "--n" => o.ns = numbers(value()?, "--n")?,
            "--cluster" => o.cluster = numbers(value()?, "--cluster")?,
            "--runs" => o.runs = value()?.parse().map_err(|_| "--runs: not a number")?,
            "--out" => o.out = Some(value()?.into()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if o.runs < 1 || o.ns.is_empty() || o.ns.iter().any(|n| *n < 2 || n % 2 == 1) {
        return Err("--runs must be at least 1, and every N even and at least 2".into());
    }
    if o.cluster.iter().any(|n| !(2..=64).contains(n)) {
        return Err("--cluster takes node counts from 2 to 64".into());
    }
    Ok(Some(o))
}

/// The launcher of a run.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Launcher {
    Pmixrun,
    Prterun,
}

/// Where the ranks run: one node, two logical nodes of this machine, or nodes of the pretend
/// cluster.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Layout {
    OneNode,
    TwoLogicalNodes,
    Cluster(u32),
}

impl Layout {
    fn name(self) -> String {
        match self {
            Layout::OneNode => "one node".into(),
            Layout::TwoLogicalNodes => "two logical nodes".into(),
            Layout::Cluster(nodes) => format!("cluster, {nodes} nodes"),
        }
    }

    fn slug(self) -> String {
        match self {
            Layout::OneNode => "one".into(),
            Layout::TwoLogicalNodes => "two".into(),
            Layout::Cluster(nodes) => format!("cluster{nodes}"),
        }
    }

    /// The launchers that can run it: PRRTE has no logical nodes.
    fn launchers(self) -> &'static [Launcher] {
        match self {
            Layout::TwoLogicalNodes => &[Launcher::Pmixrun],
            Layout::OneNode | Layout::Cluster(_) => &[Launcher::Pmixrun, Launcher::Prterun],
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

/// What the runs need, built or found.
struct Tools {
    pmixrun: PathBuf,
    prterun: PathBuf,
    client: PathBuf,
}

/// The command of one run of `n` ranks (on the cluster, its 2 per node).
fn command(t: &Tools, launcher: Launcher, layout: Layout, n: u32, dirs: &Dirs) -> Command {
    let mut cmd = match (launcher, layout) {
        (Launcher::Pmixrun, Layout::Cluster(nodes)) => launchers::pmixrun(nodes, &t.pmixrun),
        (Launcher::Prterun, Layout::Cluster(nodes)) => launchers::prterun(nodes),
        (Launcher::Prterun, _) => {
            let mut c = prterun_here(&t.prterun);
            c.args(["-n", &n.to_string()]);
            c
        }
        (Launcher::Pmixrun, _) => {
            let mut c = build::scrubbed(Command::new(&t.pmixrun));
            // Each node's /tmp is its own on the cluster; here, the build's.
            c.env("TMPDIR", recovery_tmp(dirs));
            if layout == Layout::TwoLogicalNodes {
                let per = n / 2;
                c.args([
                    "--launcher",
                    "local",
                    "--host",
                    &format!("n1:{per},n2:{per}"),
                ]);
            }
            c.args(["-n", &n.to_string()]);
            c
        }
    };
    match launcher {
        Launcher::Pmixrun => cmd.args([
            "--enable-recovery",
            "--timeout",
            &DEADLINE.as_secs().to_string(),
        ]),
        Launcher::Prterun => cmd.args(["--runtime-options", "recoverable,notifyerrors"]),
    };
    cmd.arg(&t.client)
        .args(["recovery", &(n - 1).to_string(), "3", "timed"]);
    if launcher == Launcher::Prterun {
        cmd.arg("exit-nonzero");
    }
    cmd
}

fn recovery_tmp(dirs: &Dirs) -> PathBuf {
    dirs.target().join("xtask-bench").join("recovery-tmp")
}

/// Where a cluster run's ranks ran (their `rank R: on <host>` lines): two on each of `nodes`
/// nodes, so that the failed last rank's node is not the first ranks' one, or the row
/// measures something else than it says.
fn check_spread(stdout: &str, n: u32, nodes: u32) -> Result<(), String> {
    let hosts: BTreeMap<u32, &str> = stdout
        .lines()
        .filter_map(|l| {
            let (rank, host) = l.strip_prefix("rank ")?.split_once(": on ")?;
            Some((rank.parse().ok()?, host.trim()))
        })
        .collect();
    let mut per_node: BTreeMap<&str, u32> = BTreeMap::new();
    for host in hosts.values() {
        *per_node.entry(host).or_default() += 1;
    }
    let spread = hosts.len() == n as usize
        && per_node.len() == nodes as usize
        && per_node.values().all(|&k| k == 2);
    if spread && hosts.get(&0) != hosts.get(&(n - 1)) {
        return Ok(());
    }
    let seen: Vec<String> = per_node.iter().map(|(h, k)| format!("{h}:{k}")).collect();
    Err(format!(
        "{} of {n} ranks placed as {}, not 2 on each of {nodes} nodes",
        hosts.len(),
        seen.join(",")
    ))
}

fn one(
    t: &Tools,
    launcher: Launcher,
    layout: Layout,
    n: u32,
    dirs: &Dirs,
    name: &str,
) -> Result<f64, String> {
    let cmd = command(t, launcher, layout, n, dirs);
    let outcome = exec::run(cmd, DEADLINE + Duration::from_secs(30), &dirs.logs, name);
    match outcome.failure {
        // The run fails as it must: with the failed rank's status.
        Some(f) if f.starts_with("host exited with exit status: 3;") => {}
        Some(f) => return Err(f),
        None => return Err("the launcher exited 0; it must exit with the failed rank's 3".into()),
    }
    if let Layout::Cluster(nodes) = layout {
        check_spread(&outcome.stdout, n, nodes)?;
    }
    latency_us(&outcome.stdout, n)
}

/// One row: each launcher's median and minimum, and pmixrun's median over prterun's.
fn row(layout: Layout, n: u32, times: &[(Launcher, Vec<f64>)]) -> String {
    let cell = |v: Option<f64>| v.map_or("n/a".into(), |v| format!("{v:.0}"));
    let of = |l: Launcher| {
        let t = times
            .iter()
            .find(|(x, _)| *x == l)
            .map(|(_, t)| t.as_slice());
        t.map(|t| (median(t), t.iter().copied().min_by(f64::total_cmp)))
    };
    let mut line = format!("| {} | {n} |", layout.name());
    for l in [Launcher::Pmixrun, Launcher::Prterun] {
        match of(l) {
            Some((med, min)) => {
                let _ = write!(line, " {} | {} |", cell(med), cell(min));
            }
            None => line.push_str(" – | – |"),
        }
    }
    let ratio = match (of(Launcher::Pmixrun), of(Launcher::Prterun)) {
        (Some((Some(a), _)), Some((Some(b), _))) if b > 0.0 => format!("{:.3}", a / b),
        _ => "–".into(),
    };
    let _ = write!(line, " {ratio} |");
    line
}

/// Runs every launcher of `layout` `o.runs` times with `n` ranks, the launchers taking turns
/// to go first; on the cluster (`nodes` of it up) checks that nothing was left behind.
fn measure(
    t: &Tools,
    o: &Opts,
    layout: Layout,
    n: u32,
    dirs: &Dirs,
    failed: &mut bool,
) -> Vec<(Launcher, Vec<f64>)> {
    let mut times: Vec<(Launcher, Vec<f64>)> = layout
        .launchers()
        .iter()
        .map(|l| (*l, Vec::new()))
        .collect();
    for run in 1..=o.runs {
        let mut order = layout.launchers().to_vec();
        let turn = (run as usize - 1) % order.len();
        order.rotate_left(turn);
        for l in order {
            let name = format!("recovery-{:?}-{}-n{n}-run{run}", l, layout.slug()).to_lowercase();
            eprintln!("xtask bench --recovery: {name}");
            let before = match layout {
                Layout::Cluster(nodes) => Some(procs::Before::take(nodes)),
                _ => None,
            };
            let got = one(t, l, layout, n, dirs, &name);
            if let Some(before) = before {
                // exec::run sets no marker: what ran on the nodes and this build's programs
                // are what can be found.
                let left = before.check_nothing_left(
                    "",
                    &[dirs.target().to_path_buf()],
                    Duration::from_secs(3),
                );
                if let Err(left) = left {
                    eprintln!("xtask bench --recovery: {name}: left behind: {left}");
                    *failed = true;
                }
            }
            match got {
                Ok(us) => {
                    if let Some((_, v)) = times.iter_mut().find(|(x, _)| *x == l) {
                        v.push(us);
                    }
                }
                Err(e) => {
                    eprintln!("xtask bench --recovery: {name}: {e}");
                    *failed = true;
                }
            }
        }
    }
    times
}

fn build_tools(dirs: &Dirs) -> Result<Tools, String> {
    let prterun = ompi5().join("bin").join("prterun");
    if !prterun.is_file() {
        return Err(format!(
            "no PRRTE at {} (bash scripts/install-test-deps.sh as root)",
            prterun.display()
        ));
    }
    let tmp = recovery_tmp(dirs);
    std::fs::create_dir_all(&tmp).map_err(|e| format!("cannot create {}: {e}", tmp.display()))?;
    Ok(Tools {
        pmixrun: build::pmixrun(dirs)?,
        prterun,
        client: build::cargo_release(dirs, "pmix-tests", "pmix-test-client")?,
    })
}

/// Entry point of `cargo xtask bench --recovery`.
pub(crate) fn run(args: &[String]) -> ExitCode {
    let o = match super::mode_options(parse(args), "--recovery", USAGE) {
        Ok(o) => o,
        Err(code) => return code,
    };
    let dirs = Dirs::new();
    if !o.cluster.is_empty() {
        if let Err(e) = crate::multinode::preflight(dirs.target()) {
            eprintln!("xtask bench --recovery: --cluster refused: {e}");
            return ExitCode::from(2);
        }
    }
    let tools = match build_tools(&dirs) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("xtask bench --recovery: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut md = format!(
        "# Recovery: a rank's exit to its survivors' event\n\n`pmixrun --enable-recovery` \
         (`EVENT_PROC_TERMINATED`) and PRRTE 3.0.14's `prterun --runtime-options \
         recoverable,notifyerrors` (`ERR_EXIT_NONZERO_TERM`) running `pmix-test-client \
         recovery <N-1> 3 timed`: from the last rank's exit to the slowest survivor's event \
         handler, {} runs each, the launchers taking turns to go first, microseconds; PRRTE \
         has no logical nodes. The cluster's nodes are network namespaces of this machine \
         (`scripts/multinode/cluster.sh`), 2 ranks each, both launchers over pssh.\n\n\
         | layout | N | pmixrun median | pmixrun min | prterun median | prterun min | \
         pmixrun ÷ prterun |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        o.runs
    );
    let load_before = machine::load_average();
    let mut failed = false;
    for layout in [Layout::OneNode, Layout::TwoLogicalNodes] {
        for &n in &o.ns {
            let times = measure(&tools, &o, layout, n, &dirs, &mut failed);
            let _ = writeln!(md, "{}", row(layout, n, &times));
        }
    }
    if let Some(&most) = o.cluster.iter().max() {
        match Cluster::up(&crate::multinode::cluster_script(), most) {
            Ok(cluster) => {
                for &nodes in &o.cluster {
                    let layout = Layout::Cluster(nodes);
                    let n = ranks(nodes);
                    let times = measure(&tools, &o, layout, n, &dirs, &mut failed);
                    let _ = writeln!(md, "{}", row(layout, n, &times));
                }
                cluster.down("after the recovery bench");
            }
            Err(e) => {
                eprintln!("xtask bench --recovery: the cluster: {e}");
                failed = true;
            }
        }
    }
    let _ = writeln!(
        md,
        "\n- {}\n- command: `cargo xtask bench --recovery {}`\n- load average (1, 5, 15 \
         min): {load_before} before the runs, {} after",
        machine::machine(false).first().map_or("", String::as_str),
        args.join(" "),
        machine::load_average()
    );
    super::mode_report("--recovery", &md, o.out.as_deref(), failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(cmd: &Command) -> Vec<String> {
        cmd.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn each_launcher_runs_the_same_job_told_by_its_own_event() {
        let t = Tools {
            pmixrun: "/b/pmixrun".into(),
            prterun: "/o/prterun".into(),
            client: "/b/client".into(),
        };
        let dirs = Dirs::new();
        let job = ["/b/client", "recovery", "7", "3", "timed"];
        let ours = args(&command(&t, Launcher::Pmixrun, Layout::OneNode, 8, &dirs));
        assert!(ours.ends_with(&job.map(String::from)), "{ours:?}");
        assert!(ours.contains(&"--enable-recovery".into()), "{ours:?}");
        let theirs = command(&t, Launcher::Prterun, Layout::OneNode, 8, &dirs);
        assert_eq!(theirs.get_program(), "/o/prterun");
        let theirs = args(&theirs);
        let mut want: Vec<String> = job.map(String::from).to_vec();
        want.push("exit-nonzero".into());
        assert!(theirs.ends_with(&want), "{theirs:?}");
        let at = theirs.iter().position(|a| a == "--runtime-options");
        assert_eq!(
            at.map(|i| theirs[i + 1].as_str()),
            Some("recoverable,notifyerrors")
        );
        let two = args(&command(
            &t,
            Launcher::Pmixrun,
            Layout::TwoLogicalNodes,
            8,
            &dirs,
        ));
        assert!(
            two.windows(2).any(|w| w == ["--host", "n1:4,n2:4"]),
            "{two:?}"
        );
        // On the cluster: 2 ranks per node, the last one failing, over pssh.
        for l in [Launcher::Pmixrun, Launcher::Prterun] {
            let c = args(&command(&t, l, Layout::Cluster(3), 6, &dirs));
            assert!(c.windows(2).any(|w| w == ["-n", "6"]), "{c:?}");
            assert!(c.windows(2).any(|w| w == ["recovery", "5"]), "{c:?}");
            assert!(c.iter().any(|a| a.ends_with("pssh")), "{c:?}");
        }
    }

    #[test]
    fn a_row_has_both_launchers_and_their_ratio() {
        let times = vec![
            (Launcher::Pmixrun, vec![600.0, 500.0, 700.0]),
            (Launcher::Prterun, vec![40000.0, 60000.0]),
        ];
        assert_eq!(
            row(Layout::OneNode, 4, &times),
            "| one node | 4 | 600 | 500 | 50000 | 40000 | 0.012 |"
        );
        // PRRTE not run (no logical nodes), and a launcher whose every run failed.
        let ours = vec![(Launcher::Pmixrun, vec![1000.0])];
        assert_eq!(
            row(Layout::TwoLogicalNodes, 4, &ours),
            "| two logical nodes | 4 | 1000 | 1000 | – | – | – |"
        );
        let failed = vec![(Launcher::Pmixrun, vec![]), (Launcher::Prterun, vec![9.0])];
        assert_eq!(
            row(Layout::Cluster(2), 4, &failed),
            "| cluster, 2 nodes | 4 | n/a | n/a | 9 | 9 | – |"
        );
    }

    #[test]
    fn options_are_read_and_checked() {
        let parsed = |a: &[&str]| parse(&a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
        let o = parsed(&["--n", "2, 8", "--cluster", "2,4", "--runs", "3"])
            .ok()
            .flatten()
            .expect("options");
        assert_eq!((o.ns, o.cluster, o.runs), (vec![2, 8], vec![2, 4], 3));
        assert!(parsed(&["--cluster", "1"]).is_err());
        assert!(parsed(&["--n", "3"]).is_err(), "an odd N");
        assert!(parsed(&["--n", "x"]).is_err());
        assert!(parsed(&["--cluster"]).is_err());
        assert!(matches!(parsed(&["--help"]), Ok(None)));
    }

    #[test]
    fn a_cluster_run_has_two_ranks_on_each_node() {
        let spread = "rank 0: on node1\nrank 3: on node2\nrank 1: on node1\nrank 2: on node2\n";
        assert_eq!(check_spread(spread, 4, 2), Ok(()));
        let packed = "rank 0: on node1\nrank 1: on node1\nrank 2: on node1\nrank 3: on node1\n";
        let e = check_spread(packed, 4, 2).unwrap_err();
        assert!(e.contains("node1:4"), "{e}");
        assert!(check_spread("rank 0: on node1\nrank 1: on node2\n", 4, 2).is_err());
        // Two on each node, but the failed last rank beside rank 0.
        let beside = "rank 0: on a\nrank 3: on a\nrank 1: on b\nrank 2: on b\n";
        assert!(check_spread(beside, 4, 2).is_err());
    }

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
