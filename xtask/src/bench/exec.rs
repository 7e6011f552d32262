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
    /// Each client metric's sum over the ranks that reported it.
    totals: BTreeMap<String, f64>,
}

/// The derived metric: every rank's time in the calls its server answers, summed.
pub(crate) const SERVED_MS: &str = "served_ms";
/// The derived metric: every rank's time in the get loops the client library answers itself.
pub(crate) const LOCAL_MS: &str = "local_ms";

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
            s.values.insert(metric.clone(), sum / f64::from(count));
            s.totals.insert(metric, sum);
        }
        s
    }

    /// Splits a job's client time in two, summed over its `n` ranks, from the timed steps and
    /// the iteration counts the clients ran (`counts`: `--get` and the rest, as passed):
    /// [`SERVED_MS`], the calls the server answers (init, put + commit, the fences, the first
    /// pass of peer gets, barriers, publish/lookup/unpublish, finalize), and [`LOCAL_MS`],
    /// the job-level gets and the repeated passes of peer gets, which the client library
    /// answers from what it holds. Each is added only if every one of its steps was reported.
    pub(crate) fn split_time(&mut self, n: u32, counts: &[(&str, u32)]) {
        let count = |k: &str| f64::from(counts.iter().find(|(c, _)| *c == k).map_or(0, |c| c.1));
        let n_f = f64::from(n.max(1));
        let (get, peer) = (count("--get"), count("--peer"));
        let all_gets = (get / n_f).floor().max(1000.0);
        let passes = (peer / n_f).floor().max(1.0);
        // (metric, how many times a reporting rank did it, per unit of the metric in ms)
        let served: [(&str, f64, f64); 11] = [
            ("init_ms", 1.0, 1.0),
            ("put_commit_us", 1.0, 1e-3),
            ("fence_first_us", 1.0, 1e-3),
            ("get_peer_first_us", n_f, 1e-3),
            ("fence_collect_us", count("--fence"), 1e-3),
            ("barrier_us", count("--barrier"), 1e-3),
            ("pub_solo_publish_us", count("--pub"), 1e-3),
            ("pub_solo_lookup_us", count("--pub"), 1e-3),
            ("pub_solo_unpublish_us", count("--pub"), 1e-3),
            ("pub_all_op_us", 3.0 * count("--pub-all"), 1e-3),
            ("finalize_ms", 1.0, 1.0),
        ];
        let local: [(&str, f64, f64); 3] = [
            ("get_job_solo_us", get, 1e-3),
            ("get_job_all_us", all_gets, 1e-3),
            ("get_peer_warm_us", passes * n_f, 1e-3),
        ];
        let sum = |terms: &[(&str, f64, f64)]| -> Option<f64> {
            terms
                .iter()
                .map(|(m, times, unit)| self.totals.get(*m).map(|t| t * times * unit))
                .sum()
        };
        if let Some(v) = sum(&served) {
            self.values.insert(SERVED_MS.to_owned(), v);
        }
        if let Some(v) = sum(&local) {
            self.values.insert(LOCAL_MS.to_owned(), v);
        }
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

    #[test]
    fn a_jobs_client_time_splits_into_served_and_local() {
        // Two ranks; rank 0 alone did the solo steps.
        let mut text = String::new();
        for r in 0..2 {
            for (m, v) in [
                ("init_ms", 2.0),
                ("put_commit_us", 100.0),
                ("fence_first_us", 50.0),
                ("get_peer_first_us", 10.0),
                ("fence_collect_us", 20.0),
                ("barrier_us", 5.0),
                ("pub_all_op_us", 30.0),
                ("finalize_ms", 1.0),
                ("get_job_all_us", 4.0),
                ("get_peer_warm_us", 3.0),
            ] {
                text.push_str(&format!("CLIENT {r} {m} {v}\n"));
            }
        }
        for (m, v) in [
            ("pub_solo_publish_us", 40.0),
            ("pub_solo_lookup_us", 41.0),
            ("pub_solo_unpublish_us", 42.0),
            ("get_job_solo_us", 2.0),
        ] {
            text.push_str(&format!("CLIENT 0 {m} {v}\n"));
        }
        let counts = [
            ("--get", 4000),
            ("--peer", 100),
            ("--fence", 10),
            ("--barrier", 100),
            ("--pub", 20),
            ("--pub-all", 5),
        ];
        let mut s = Sample::parse(&text);
        s.split_time(2, &counts);
        // Per rank: 2 + 0.1 + 0.05 + 2 × 0.01 + 10 × 0.02 + 100 × 0.005 + 15 × 0.03 + 1 ms;
        // rank 0 also 20 × (40 + 41 + 42) µs.
        let per_rank = 2.0 + 0.1 + 0.05 + 0.02 + 0.2 + 0.5 + 0.45 + 1.0;
        let served = s.values[SERVED_MS];
        assert!((served - (2.0 * per_rank + 2.46)).abs() < 1e-9, "{served}");
        // 4000 × 2 µs by rank 0; each rank max(1000, 2000) × 4 µs and 50 passes × 2 × 3 µs.
        let local = s.values[LOCAL_MS];
        assert!((local - (8.0 + 2.0 * (8.0 + 0.3))).abs() < 1e-9, "{local}");

        // A step nobody reported: no split at all, rather than a part of one.
        let mut partial = Sample::parse("CLIENT 0 init_ms 2\nCLIENT 0 get_job_solo_us 1\n");
        partial.split_time(1, &counts);
        assert!(!partial.values.contains_key(SERVED_MS));
        assert!(!partial.values.contains_key(LOCAL_MS));
    }
}
