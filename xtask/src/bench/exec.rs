//! Running one host with a deadline, and reading what it printed.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// How a run ended.
pub(crate) struct Outcome {
    /// Everything the host printed on stdout.
    pub(crate) stdout: String,
    /// Why the run failed, if it did.
    pub(crate) failure: Option<String>,
    /// From just before the host was started to the moment its exit was seen.
    pub(crate) elapsed: Duration,
}

/// The last lines of a log, for a failure message.
fn tail(path: &Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n    ")
}

/// How long a host has to end on SIGTERM at its deadline before its group gets SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(5);

/// Runs `cmd` in a process group of its own, with stdout and stderr in `<logs>/<name>.out`
/// and `.err`. At `deadline` the host gets SIGTERM (a launcher passes it on to processes it
/// put in groups of their own), then the whole group (the host and every process it started
/// there) SIGKILL, and the run is reported as failed.
///
/// The exit is waited for on a thread of its own, so [`Outcome::elapsed`] is as precise as
/// the clock: the launch rows time launchers that finish in tens of milliseconds.
pub(crate) fn run(mut cmd: Command, deadline: Duration, logs: &Path, name: &str) -> Outcome {
    let fail = |why: String| Outcome {
        stdout: String::new(),
        failure: Some(why),
        elapsed: Duration::ZERO,
    };
    if let Err(e) = std::fs::create_dir_all(logs) {
        return fail(format!("cannot create {}: {e}", logs.display()));
    }
    let out_path = logs.join(format!("{name}.out"));
    let err_path = logs.join(format!("{name}.err"));
    let (out, err) = match (File::create(&out_path), File::create(&err_path)) {
        (Ok(o), Ok(e)) => (o, e),
        (Err(e), _) | (_, Err(e)) => return fail(format!("cannot create the logs: {e}")),
    };
    cmd.stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0);
    let start = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return fail(format!("cannot start {:?}: {e}", cmd.get_program())),
    };
    // The group id is the host's pid (process_group(0)); only what it started is in it.
    let pid = i32::try_from(child.id()).ok().map(Pid::from_raw);
    let (tx, rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        let status = child.wait();
        let _ = tx.send((status, Instant::now()));
    });
    let mut failure = None;
    let (status, end) = match rx.recv_timeout(deadline) {
        Ok((status, end)) => (status.map_err(|e| e.to_string()), end),
        Err(_) => {
            if let Some(pid) = pid {
                let _ = kill(pid, Signal::SIGTERM);
                if rx.recv_timeout(TERM_GRACE).is_err() {
                    let _ = killpg(pid, Signal::SIGKILL);
                }
                // Whatever the leader left behind in its group.
                let _ = killpg(pid, Signal::SIGKILL);
            }
            failure = Some(format!(
                "killed after its deadline of {}s; stderr ({}):\n    {}",
                deadline.as_secs(),
                err_path.display(),
                tail(&err_path, 8)
            ));
            (Err(String::new()), Instant::now())
        }
    };
    let _ = waiter.join();
    match status {
        Ok(status) if !status.success() => {
            failure = Some(format!(
                "host exited with {status}; stderr ({}):\n    {}",
                err_path.display(),
                tail(&err_path, 8)
            ));
        }
        Ok(_) => {}
        Err(e) if failure.is_none() => failure = Some(format!("cannot wait for the host: {e}")),
        Err(_) => {}
    }
    Outcome {
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        failure,
        elapsed: end - start,
    }
}

/// One run's numbers: the host's own, and each client metric's mean over the ranks that
/// reported it.
#[derive(Debug, Default)]
pub(crate) struct Sample {
    pub(crate) values: BTreeMap<String, f64>,
    pub(crate) notes: Vec<String>,
}

impl Sample {
    /// Reads `RESULT <metric> <value>`, `CLIENT <rank> <metric> <value>` and `NOTE <text>`
    /// lines; anything else is ignored.
    pub(crate) fn parse(stdout: &str) -> Sample {
        let mut s = Sample::default();
        let mut per_rank: BTreeMap<String, (f64, u32)> = BTreeMap::new();
        for line in stdout.lines() {
            let words: Vec<&str> = line.split_whitespace().collect();
            match words.as_slice() {
                ["RESULT", metric, value] => {
                    if let Ok(v) = value.parse::<f64>() {
                        s.values.insert((*metric).to_owned(), v);
                    }
                }
                ["CLIENT", _rank, metric, value] => {
                    if let Ok(v) = value.parse::<f64>() {
                        let e = per_rank.entry((*metric).to_owned()).or_insert((0.0, 0));
                        e.0 += v;
                        e.1 += 1;
                    }
                }
                ["NOTE", ..] => {
                    s.notes.push(line["NOTE ".len()..].to_owned());
                }
                _ => {}
            }
        }
        for (metric, (sum, count)) in per_rank {
            s.values.insert(metric, sum / f64::from(count));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_past_its_deadline_is_killed_with_what_it_started() {
        let logs = std::env::temp_dir().join(format!("xtask-bench-test-{}", std::process::id()));
        let mut cmd = Command::new("sh");
        // The background sleep stands for a client the host started: it must die too.
        cmd.args(["-c", "sleep 30 & echo $! ; echo RESULT x 1; wait"]);
        let t = Instant::now();
        let outcome = run(cmd, Duration::from_millis(300), &logs, "hang");
        assert!(t.elapsed() < Duration::from_secs(10));
        let failure = outcome.failure.unwrap_or_default();
        assert!(failure.contains("killed after its deadline"), "{failure}");
        let grandchild: i32 = outcome
            .stdout
            .lines()
            .next()
            .and_then(|l| l.parse().ok())
            .unwrap_or(0);
        assert!(grandchild > 0, "{:?}", outcome.stdout);
        // Reaped by init soon after the kill; until then it may linger as a zombie.
        let gone = (0..100).any(|_| {
            let stat = std::fs::read_to_string(format!("/proc/{grandchild}/stat"));
            let dead = stat.map_or(true, |s| s.contains(") Z "));
            if !dead {
                std::thread::sleep(Duration::from_millis(20));
            }
            dead
        });
        assert!(gone, "the background sleep survived");
        let _ = std::fs::remove_dir_all(&logs);
    }

    #[test]
    fn client_metrics_are_averaged_over_ranks() {
        let s = Sample::parse(
            "RESULT server_init_ms 1.5\nCLIENT 0 barrier_us 10\nCLIENT 1 barrier_us 20\n\
             CLIENT 0 get_job_solo_us 0.5\nNOTE rank 0: hello\ngarbage\n",
        );
        assert_eq!(s.values.get("server_init_ms"), Some(&1.5));
        assert_eq!(s.values.get("barrier_us"), Some(&15.0));
        assert_eq!(s.values.get("get_job_solo_us"), Some(&0.5));
        assert_eq!(s.notes, ["rank 0: hello"]);
    }
}
