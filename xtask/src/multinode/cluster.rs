//! The pretend cluster's lifetime: `scripts/multinode/cluster.sh up ssh slurm` behind a guard that
//! tears it down on every way out (drop, panic, SIGINT/SIGTERM/SIGHUP), and the facts about
//! it the scenarios use (node names, network namespaces, each node's `/tmp`).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use super::proc_table::in_node_namespaces;
use super::wait_for;

/// Where cluster.sh keeps its state (its `R`): keys, pid files, each node's `/tmp`.
pub(crate) const STATE: &str = "/var/tmp/pmxcluster";

/// ssh with the cluster's key and config: `pssh nodeK CMD...`.
pub(crate) fn pssh() -> PathBuf {
    Path::new(STATE).join("ssh").join("pssh")
}

/// The cluster's `slurm.conf`, for `SLURM_CONF` (cluster.sh's `slurm` part).
pub(crate) fn slurm_conf() -> PathBuf {
    Path::new(STATE).join("slurm").join("slurm.conf")
}

/// The pids in cluster.sh's pid files (sshd, slurmd, slurmctld, munged when it started one):
/// read before `down`, checked after it.
fn daemon_pids() -> Vec<(String, i32)> {
    let Ok(dir) = std::fs::read_dir(STATE) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let what = name.strip_suffix(".pid")?.to_owned();
            let pid = std::fs::read_to_string(e.path())
                .ok()?
                .trim()
                .parse()
                .ok()?;
            Some((what, pid))
        })
        .collect()
}

/// `nodeK`'s `/tmp`, as the host sees it.
pub(crate) fn node_tmp(k: u32) -> PathBuf {
    Path::new(STATE).join("tmp").join(format!("node{k}"))
}

/// `node1:slots,node2:slots,...` for `nodes` nodes.
pub(crate) fn host_list(nodes: u32, slots: u32) -> String {
    (1..=nodes)
        .map(|k| format!("node{k}:{slots}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `node1,node2,...` for `nodes` nodes.
pub(crate) fn node_names(nodes: u32) -> String {
    (1..=nodes)
        .map(|k| format!("node{k}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The process group of the command a scenario is running now (0: none), for the signal
/// handler, which kills it before tearing the cluster down.
pub(crate) static CURRENT_GROUP: AtomicI32 = AtomicI32::new(0);

/// Set by the signal handler: no new command or scenario starts.
pub(crate) static STOPPING: AtomicBool = AtomicBool::new(false);

/// The network namespaces of the nodes, by inode: (node number, inode) for every `pmxn*`
/// namespace that exists now, whatever run made it.
pub(crate) fn node_namespaces() -> Vec<(u32, u64)> {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return Vec::new();
    };
    let mut found: Vec<(u32, u64)> = dir
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let k = name.strip_prefix("pmxn")?.parse().ok()?;
            // The bind mount of the namespace file: its inode is the namespace's.
            let ino = std::fs::metadata(e.path()).ok()?.ino();
            Some((k, ino))
        })
        .collect();
    found.sort_unstable();
    found
}

/// Runs `cluster.sh down`, first killing every process still inside a node's network
/// namespace (cluster.sh kills only the daemons it started, by pid file; a launcher's
/// daemon or a rank left on a node would keep running).
fn down(script: &Path, nodes: u32) -> Result<Duration, String> {
    let start = Instant::now();
    let daemons = daemon_pids();
    let inside = in_node_namespaces(&node_namespaces());
    for p in &inside {
        let _ = kill(Pid::from_raw(p.pid), Signal::SIGKILL);
    }
    let out = Command::new("bash")
        .arg(script)
        .arg("down")
        .env("N", nodes.to_string())
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {} down: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} down failed ({}): {}",
            script.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    if !node_namespaces().is_empty() || Path::new(STATE).exists() {
        return Err(format!(
            "{} down left namespaces or {STATE} behind",
            script.display()
        ));
    }
    // The daemons it started (slurmctld and munged on the host, sshd and slurmd on the
    // nodes) must be gone, not only their pid files. slurmctld saves its state before it
    // exits, which can take longer than the script's pause: it gets a few seconds more.
    let still = || -> Vec<String> {
        daemons
            .iter()
            .filter(|(_, pid)| kill(Pid::from_raw(*pid), None).is_ok())
            .map(|(what, pid)| format!("{what} ({pid})"))
            .collect()
    };
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let alive = wait_for(until, || {
        let alive = still();
        alive.is_empty().then_some(())
    })
    .map_or_else(still, |()| Vec::new());
    if !alive.is_empty() {
        for (_, pid) in &daemons {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
        }
        return Err(format!(
            "{} down left daemons running: {}",
            script.display(),
            alive.join(", ")
        ));
    }
    Ok(start.elapsed())
}

/// The teardown both the guard and the signal handler may run: whichever comes first does
/// it, the other finds it done.
struct Teardown {
    script: PathBuf,
    nodes: u32,
    done: Mutex<bool>,
}

impl Teardown {
    fn run(&self, why: &str) {
        let mut done = self.done.lock().unwrap_or_else(PoisonError::into_inner);
        if *done {
            return;
        }
        *done = true;
        match down(&self.script, self.nodes) {
            Ok(t) => eprintln!(
                "xtask multinode: cluster down ({why}) in {:.2} s",
                t.as_secs_f64()
            ),
            Err(e) => eprintln!("xtask multinode: cluster teardown ({why}) FAILED: {e}"),
        }
    }
}

/// The cluster, up. Dropping it (also while unwinding from a panic) tears it down.
pub(crate) struct Cluster {
    teardown: Arc<Teardown>,
    /// How long `up` took.
    pub(crate) up_time: Duration,
}

impl Cluster {
    /// Tears down whatever an earlier run left (an interrupted run, a killed one), installs
    /// the signal handler, and brings up `nodes` nodes with sshd.
    pub(crate) fn up(script: &Path, nodes: u32) -> Result<Cluster, String> {
        if !node_namespaces().is_empty() || Path::new(STATE).exists() {
            // cluster.sh down is idempotent: it kills by pid file and deletes what exists.
            let t = down(script, 1000)
                .map_err(|e| format!("cannot tear down the cluster an earlier run left: {e}"))?;
            eprintln!(
                "xtask multinode: tore down a cluster an earlier run left, in {:.2} s",
                t.as_secs_f64()
            );
        }
        let teardown = Arc::new(Teardown {
            script: script.to_path_buf(),
            nodes,
            done: Mutex::new(false),
        });
        install_signal_handler(Arc::clone(&teardown))?;
        // From here on, the guard exists before anything is brought up: a failed `up` is
        // torn down too.
        let mut cluster = Cluster {
            teardown,
            up_time: Duration::ZERO,
        };
        let start = Instant::now();
        let out = Command::new("bash")
            .arg(script)
            .args(["up", "ssh", "slurm"])
            .env("N", nodes.to_string())
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {} up: {e}", script.display()))?;
        if !out.status.success() {
            return Err(format!(
                "{} up ssh slurm failed ({}): {}",
                script.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        wait_for_slurm(nodes)?;
        cluster.up_time = start.elapsed();
        Ok(cluster)
    }

    /// Tears the cluster down now (the drop then does nothing).
    pub(crate) fn down(self, why: &str) {
        self.teardown.run(why);
    }
}

/// Waits (up to 30 s) until slurmctld sees every node idle: before that an `srun` would
/// wait for the nodes, eating into a scenario's deadline.
fn wait_for_slurm(nodes: u32) -> Result<(), String> {
    let limit = Instant::now() + Duration::from_secs(30);
    let mut last = String::new();
    let ready = wait_for(limit, || {
        let out = Command::new("sinfo")
            .args(["-h", "-N", "-o", "%N %T"])
            .env("SLURM_CONF", slurm_conf())
            .stdin(Stdio::null())
            .output()
            .ok()?;
        last = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let idle = last.lines().filter(|l| l.ends_with(" idle")).count();
        (out.status.success() && idle == nodes as usize).then_some(())
    });
    ready.ok_or_else(|| format!("slurm's nodes not all idle within 30 s: {last:?}"))
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let why = if std::thread::panicking() {
            "after a panic"
        } else {
            "on the way out"
        };
        self.teardown.run(why);
    }
}

/// On SIGINT, SIGTERM or SIGHUP: kill the running scenario's process group, tear the cluster
/// down, exit 130.
fn install_signal_handler(teardown: Arc<Teardown>) -> Result<(), String> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])
        .map_err(|e| format!("cannot install the signal handler: {e}"))?;
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                eprintln!("\nxtask multinode: signal {sig}: stopping the scenario, tearing down");
                STOPPING.store(true, Ordering::SeqCst);
                let group = CURRENT_GROUP.load(Ordering::SeqCst);
                if group > 0 {
                    let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
                }
                teardown.run("on a signal");
                std::process::exit(130);
            }
        })
        .map_err(|e| format!("cannot start the signal thread: {e}"))?;
    Ok(())
}
