//! Processes and files a scenario may leave behind, and running one command of a scenario
//! with a deadline.
//!
//! A process counts as the scenario's if it did not exist before the scenario and either
//! carries the scenario's marker in its environment (what the harness started on the host, and
//! anything that inherited its environment), runs inside a node's network namespace (whatever
//! ssh started there: a launcher's daemon, a rank), or runs a program of this build (the
//! target directory). ssh does not pass the environment on, so the marker alone would miss
//! what runs on the nodes. slurmd is the cluster's, never the scenario's: one scenario kills a
//! node's and starts it again.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

use super::cluster::{self, CURRENT_GROUP, STOPPING};
use super::proc_table::{ProcInfo, in_node_namespaces, info, pids};

/// The environment variable the harness sets to a value unique to the scenario.
pub(crate) const MARKER: &str = "PMIXRS_MULTINODE_MARKER";

/// slurmd, whatever its executable's name.
fn is_slurmd(p: &ProcInfo) -> bool {
    let command = p.cmdline.split(' ').next().unwrap_or("");
    Path::new(command)
        .file_name()
        .is_some_and(|f| f == "slurmd")
}

/// The processes on node `k` whose executable's file name is `name`.
pub(crate) fn on_node(k: u32, name: &str) -> Vec<ProcInfo> {
    in_node_namespaces(&cluster::node_namespaces())
        .into_iter()
        .filter(|p| p.node == Some(k) && p.exe.file_name().is_some_and(|f| f == name))
        .collect()
}

fn has_marker(pid: i32, marker: &str) -> bool {
    let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let want = format!("{MARKER}={marker}");
    env.split(|b| *b == 0).any(|v| v == want.as_bytes())
}

/// What existed before a scenario: the processes, and the entries of every node's `/tmp`.
pub(crate) struct Before {
    pids: HashSet<i32>,
    tmp: BTreeMap<u32, BTreeSet<String>>,
}

fn tmp_entries(k: u32) -> BTreeSet<String> {
    std::fs::read_dir(cluster::node_tmp(k))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

impl Before {
    pub(crate) fn take(nodes: u32) -> Before {
        Before {
            pids: pids().into_iter().collect(),
            tmp: (1..=nodes).map(|k| (k, tmp_entries(k))).collect(),
        }
    }

    /// The scenario's processes still running: see the module's docs.
    fn processes(&self, marker: &str, build_dirs: &[PathBuf]) -> Vec<(ProcInfo, &'static str)> {
        let namespaces = cluster::node_namespaces();
        let me = i32::try_from(std::process::id()).unwrap_or(0);
        pids()
            .into_iter()
            .filter(|p| *p != me && !self.pids.contains(p))
            .filter_map(|p| info(p, &namespaces))
            // The cluster's own daemon, which a scenario may start again (and which forks
            // for a moment to serve a request). Its executable may be unreadable, or
            // Debian's slurmd-wlm: known by its command.
            .filter(|p| !is_slurmd(p))
            .filter_map(|p| {
                let why = if p.node.is_some() {
                    "on a node"
                } else if has_marker(p.pid, marker) {
                    "has the scenario's marker"
                } else if build_dirs.iter().any(|d| p.exe.starts_with(d)) {
                    "runs a program of this build"
                } else {
                    return None;
                };
                Some((p, why))
            })
            .collect()
    }

    /// New entries in the nodes' `/tmp`: (node, name).
    fn new_tmp(&self) -> Vec<(u32, String)> {
        self.tmp
            .iter()
            .flat_map(|(k, old)| {
                tmp_entries(*k)
                    .into_iter()
                    .filter(|e| !old.contains(e))
                    .map(|e| (*k, e))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    /// The "nothing left behind" check: waits up to `settle` for the scenario's processes to
    /// end and its files in the nodes' `/tmp` to go (ssh sessions and daemons take a moment to
    /// end after the launcher), then reports what is left, and removes it (kills the
    /// processes, deletes the files) so that the next scenario starts clean.
    pub(crate) fn check_nothing_left(
        &self,
        marker: &str,
        build_dirs: &[PathBuf],
        settle: Duration,
    ) -> Result<(), String> {
        let until = Instant::now() + settle;
        loop {
            let procs = self.processes(marker, build_dirs);
            let files = self.new_tmp();
            if procs.is_empty() && files.is_empty() {
                return Ok(());
            }
            if Instant::now() < until {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            let mut what = Vec::new();
            for (p, why) in &procs {
                let node = p.node.map_or("the host".to_owned(), |k| format!("node{k}"));
                what.push(format!(
                    "process {} on {node} ({why}): {}",
                    p.pid, p.cmdline
                ));
                let _ = kill(Pid::from_raw(p.pid), Signal::SIGKILL);
            }
            for (k, name) in &files {
                let path = cluster::node_tmp(*k).join(name);
                what.push(format!("node{k}:/tmp/{name}"));
                let _ = std::fs::remove_dir_all(&path).or_else(|_| std::fs::remove_file(&path));
            }
            return Err(format!(
                "left behind after {:.1} s:\n      {}",
                settle.as_secs_f64(),
                what.join("\n      ")
            ));
        }
    }
}

/// A command of a scenario, running.
pub(crate) struct Running {
    child: Child,
    group: Pid,
    start: Instant,
    out_path: PathBuf,
    err_path: PathBuf,
    what: String,
}

/// How a command ended.
#[derive(Debug)]
pub(crate) struct Finished {
    /// `None` if it was killed at the deadline.
    pub(crate) status: Option<ExitStatus>,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    pub(crate) elapsed: Duration,
    pub(crate) what: String,
}

impl Finished {
    /// The exit code, if it exited rather than being killed by a signal or the deadline.
    pub(crate) fn code(&self) -> Option<i32> {
        self.status.and_then(|s| s.code())
    }

    /// A failure message: `why`, the command, and the ends of its stdout and stderr.
    pub(crate) fn fail(&self, why: &str) -> String {
        let tail = |text: &str| {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(12)..].join("\n        ")
        };
        let status = match self.status {
            Some(s) => s.to_string(),
            None => "killed at the deadline".to_owned(),
        };
        format!(
            "{why}\n      command: {}\n      status: {status} after {:.2} s\n      stdout:\n        {}\n      stderr:\n        {}",
            self.what,
            self.elapsed.as_secs_f64(),
            tail(&self.stdout),
            tail(&self.stderr)
        )
    }
}

fn describe(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Starts `cmd` in a process group of its own, with the scenario's marker in its
/// environment, stdin from /dev/null, stdout and stderr into `<logs>/<name>.out` and `.err`.
pub(crate) fn start(
    mut cmd: Command,
    marker: &str,
    logs: &Path,
    name: &str,
) -> Result<Running, String> {
    if STOPPING.load(Ordering::SeqCst) {
        return Err("stopping on a signal".into());
    }
    std::fs::create_dir_all(logs).map_err(|e| format!("cannot create {}: {e}", logs.display()))?;
    let out_path = logs.join(format!("{name}.out"));
    let err_path = logs.join(format!("{name}.err"));
    let out = File::create(&out_path).map_err(|e| format!("{}: {e}", out_path.display()))?;
    let err = File::create(&err_path).map_err(|e| format!("{}: {e}", err_path.display()))?;
    let what = describe(&cmd);
    cmd.env(MARKER, marker)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0);
    let start = Instant::now();
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {what}: {e}"))?;
    let group = Pid::from_raw(i32::try_from(child.id()).unwrap_or(0));
    CURRENT_GROUP.store(group.as_raw(), Ordering::SeqCst);
    Ok(Running {
        child,
        group,
        start,
        out_path,
        err_path,
        what,
    })
}

/// How long a command has to end on SIGTERM at its deadline before its group gets SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(3);

impl Running {
    /// When it started.
    pub(crate) fn started(&self) -> Instant {
        self.start
    }

    /// Whether it is still running (false once it exited; it is reaped by [`Running::wait`]).
    pub(crate) fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Waits for its exit until `deadline`; then SIGTERM, and SIGKILL to its whole process
    /// group [`TERM_GRACE`] later. The group is killed in any case once the leader is gone,
    /// so nothing it started in its group outlives it.
    pub(crate) fn wait(mut self, deadline: Instant) -> Finished {
        let mut status = None;
        let mut end = Instant::now();
        let mut termed: Option<Instant> = None;
        loop {
            match self.child.try_wait() {
                Ok(Some(s)) => {
                    end = Instant::now();
                    if termed.is_none() {
                        status = Some(s);
                    }
                    break;
                }
                Ok(None) => {}
                Err(_) => break,
            }
            let now = Instant::now();
            match termed {
                None if now >= deadline => {
                    let _ = kill(self.group, Signal::SIGTERM);
                    termed = Some(now);
                }
                Some(t) if now >= t + TERM_GRACE => {
                    let _ = killpg(self.group, Signal::SIGKILL);
                }
                _ => {}
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = killpg(self.group, Signal::SIGKILL);
        CURRENT_GROUP.store(0, Ordering::SeqCst);
        Finished {
            status,
            stdout: std::fs::read_to_string(&self.out_path).unwrap_or_default(),
            stderr: std::fs::read_to_string(&self.err_path).unwrap_or_default(),
            elapsed: end - self.start,
            what: self.what,
        }
    }
}
