//! Spawn under `pmixrun`, end to end: a job of `pmix-spawn-client` starting further jobs of
//! itself (one and several application contexts), spawns that cannot start, and spawned
//! processes that fail the run. Every run is bounded by a deadline.

use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, unbounded};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pmix_tests::pmixrun_bin;
use pmix_tests::{collect_text, workspace_bin};

const DEADLINE: Duration = Duration::from_secs(60);

/// pmixrun, built once per test process: `cargo test -p pmix-tests` does not build other
/// packages' binaries, and an old one must not be tested.
fn client() -> String {
    workspace_bin("pmix-spawn-client").display().to_string()
}

/// What one pmixrun run did.
#[derive(Debug)]
struct Run {
    /// pmixrun's pid: its first job is `rs-pmixrun-<pid>`.
    pid: u32,
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Run {
    fn code(&self) -> Option<i32> {
        self.status.code()
    }

    fn lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }

    /// The namespace of the `n`-th spawned job.
    fn spawned(&self, n: u32) -> String {
        format!("rs-pmixrun-{}.{n}", self.pid)
    }
}

/// Runs pmixrun with `args`, at most [`DEADLINE`]; past it, kills it and fails the test.
fn run(args: &[&str]) -> Run {
    let mut child = Command::new(pmixrun_bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting pmixrun");
    let pid = child.id();
    let stdout = collect_text(child.stdout.take());
    let stderr = collect_text(child.stderr.take());
    let (tx, rx) = unbounded();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = match rx.recv_timeout(DEADLINE) {
        Ok(s) => s.expect("waiting for pmixrun"),
        Err(_) => {
            // SIGTERM first: pmixrun passes it on, so every job's processes go too.
            let raw = Pid::from_raw(i32::try_from(pid).expect("pid"));
            let _ = kill(raw, Signal::SIGTERM);
            let _ = rx.recv_timeout(Duration::from_secs(5));
            let _ = kill(raw, Signal::SIGKILL);
            panic!("pmixrun {args:?} did not finish within {DEADLINE:?}");
        }
    };
    // pmixrun waits at most 2 s for its output after the processes end; then so can we.
    let text = |rx: Receiver<String>| rx.recv_timeout(Duration::from_secs(10)).unwrap_or_default();
    Run {
        pid,
        status,
        stdout: text(stdout),
        stderr: text(stderr),
    }
}

#[test]
fn children_see_their_parent_its_data_and_what_it_preloaded() {
    let c = client();
    let r = run(&["-n", "1", &c, "parent", "3"]);
    assert_eq!(r.code(), Some(0), "{r:?}");
    let lines = r.lines();
    let ns = r.spawned(1);
    let parent = format!("rs-pmixrun-{}:0", r.pid);
    assert!(
        lines.contains(&format!("parent spawned 3 into {ns}").as_str()),
        "{r:?}"
    );
    for rank in 0..3 {
        let want = format!("child {rank} of 3: parent {parent}, port port-42");
        assert!(lines.contains(&want.as_str()), "no {want:?} in {r:?}");
    }
    assert!(lines.contains(&"parent: children done"), "{r:?}");
    assert_eq!(lines.iter().filter(|l| **l == "ok").count(), 4, "{r:?}");
    assert_eq!(r.stderr, "", "{r:?}");
}

#[test]
fn the_run_waits_for_children_whose_parent_left() {
    let c = client();
    // The children return from a get only once their parent has gone.
    let r = run(&["--tag-output", "-n", "1", &c, "parent-leaves", "2"]);
    assert_eq!(r.code(), Some(0), "{r:?}");
    let mut lines = r.lines();
    lines.sort_unstable();
    let ns = r.spawned(1);
    let parent_line = format!("[0] parent spawned 2 into {ns} and leaves");
    assert_eq!(
        lines,
        [
            "[0] ok",
            parent_line.as_str(),
            "[1:0] child 0: parent gone",
            "[1:0] ok",
            "[1:1] child 1: parent gone",
            "[1:1] ok",
        ],
        "{r:?}"
    );
    assert_eq!(r.stderr, "", "{r:?}");
}

#[test]
fn a_spawn_of_two_app_contexts() {
    let dir = std::env::temp_dir().canonicalize().expect("temp dir");
    let dir = dir.to_str().expect("utf-8 temp dir");
    let r = run(&["-n", "1", &client(), "two-apps", dir]);
    assert_eq!(r.code(), Some(0), "{r:?}");
    let lines = r.lines();
    for (rank, app) in [(0, 0), (1, 0), (2, 1)] {
        let want = format!("child-app rank {rank} appnum {app}");
        assert!(lines.contains(&want.as_str()), "no {want:?} in {r:?}");
    }
    assert_eq!(lines.iter().filter(|l| **l == "ok").count(), 4, "{r:?}");
    assert_eq!(r.stderr, "", "{r:?}");
}

#[test]
fn a_spawn_that_cannot_start_fails_and_the_run_goes_on() {
    let r = run(&["-n", "1", &client(), "spawn-missing"]);
    assert_eq!(r.code(), Some(0), "{r:?}");
    let ns = r.spawned(1);
    let lines = r.lines();
    assert!(
        lines.contains(&format!("spawn failures reported; then spawned {ns}").as_str()),
        "{r:?}"
    );
    assert!(lines.contains(&"child 0: parent gone"), "{r:?}");
    // pmixrun says why each spawn failed; the spawning process got the status.
    let missing = "pmixrun: spawn by rank 0 failed: cannot start no-such-program-for-spawn: \
        No such file or directory";
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(
        lines[..lines.len().min(4)],
        [
            missing,
            missing,
            "pmixrun: spawn by rank 0 failed: working directory /no/such/dir/for/spawn: \
                not a directory",
            "pmixrun: spawn by rank 0 failed: cannot start /etc/passwd: Permission denied",
        ],
        "{r:?}"
    );
    // The machine's bound is its own (pid_max, threads-max, RLIMIT_NPROC); the overflowing
    // counts are refused by the server before pmixrun sees them.
    assert_eq!(lines.len(), 5, "{r:?}");
    assert!(
        lines[4].starts_with(
            "pmixrun: spawn by rank 0 failed: 4000000000 processes asked for, \
             more than can run here at once ("
        ),
        "{r:?}"
    );
}

#[test]
fn a_spawned_process_exiting_without_finalize_ends_the_run() {
    let r = run(&["-n", "1", &client(), "spawn-failing-child", "exit3"]);
    assert_eq!(r.code(), Some(3), "{r:?}");
    assert_eq!(
        r.stderr,
        format!(
            "pmixrun: rank 0 of {} exited with status 3 without calling finalize; \
             killing the job\n",
            r.spawned(1)
        ),
        "{r:?}"
    );
}

#[test]
fn abort_in_a_spawned_job_ends_the_run_with_its_status() {
    let r = run(&["-n", "1", &client(), "spawn-failing-child", "abort7"]);
    assert_eq!(r.code(), Some(7), "{r:?}");
    assert_eq!(
        r.stderr,
        format!(
            "pmixrun: rank 0 of {} called abort with status 7: child gives up; \
             killing the job\n",
            r.spawned(1)
        ),
        "{r:?}"
    );
}

#[test]
fn timeout_covers_spawned_jobs() {
    let started = Instant::now();
    let r = run(&[
        "--timeout",
        "1",
        "-n",
        "1",
        &client(),
        "spawn-failing-child",
        "hang",
    ]);
    assert_eq!(r.code(), Some(124), "{r:?}");
    assert_eq!(
        r.stderr, "pmixrun: the job did not finish within --timeout 1 s; killing the job\n",
        "{r:?}"
    );
    assert!(r.lines().contains(&"child ready"), "{r:?}");
    assert!(started.elapsed() >= Duration::from_secs(1));
}

/// Where each `child-where` of a run said it ran: its host, by rank.
fn children_hosts(r: &Run) -> Vec<String> {
    let mut hosts: Vec<(u32, String)> = r
        .lines()
        .iter()
        .filter_map(|l| {
            let rest = l.strip_prefix("child ")?;
            let (rank, rest) = rest.split_once(" on ")?;
            let host = rest.split(' ').next()?;
            Some((rank.parse().ok()?, host.to_owned()))
        })
        .collect();
    hosts.sort();
    hosts.into_iter().map(|(_, h)| h).collect()
}

/// `PMIX_HOST` and `PMIX_MAPBY ppr:1:node` put the children where they say, across logical
/// nodes: the parent on `a` leaves two free slots there, where they would go by default.
#[test]
fn spawn_directives_place_children_on_the_nodes_they_name() {
    let c = client();
    let two_nodes = ["--launcher", "local", "--host", "a:3,b:3", "-n", "1"];
    for (directives, want) in [
        (&["host=b"][..], &["b", "b"][..]),
        (&["!mapby=ppr:1:node"], &["a", "b"]),
        (&["mapby=node"], &["a", "b"]),
        // The app's own over the job's.
        (&["host=b", "app:host=a"], &["a", "a"]),
        (&[], &["a", "a"]),
    ] {
        let mut args: Vec<&str> = two_nodes.to_vec();
        args.extend([c.as_str(), "spawn-placed", "2"]);
        args.extend(directives);
        let r = run(&args);
        assert_eq!(r.code(), Some(0), "{directives:?}: {r:?}");
        let spawned = format!("spawned 2 into {}", r.spawned(1));
        assert!(r.lines().contains(&spawned.as_str()), "{r:?}");
        assert_eq!(children_hosts(&r), want, "{directives:?}: {r:?}");
    }
}

/// A required directive pmixrun cannot honour fails the spawn with NOT_SUPPORTED and a
/// message naming it; an optional one is left out (said in the -v log); a host the run does
/// not have is NOT_FOUND; on one node, the node's own name is honoured.
#[test]
fn spawn_directives_that_cannot_be_honoured_are_refused_by_name() {
    let c = client();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("hostname");
    let host = host.trim().to_owned();
    let host_is = format!("host={host}");
    for (directives, answer, says) in [
        (
            &["!mapby=ppr:2:package"][..],
            "spawn refused: PMIX_ERR_NOT_SUPPORTED",
            "pmixrun: spawn by rank 0 failed: PMIX_MAPBY \"ppr:2:package\": only ppr:N:node \
             is supported",
        ),
        (
            &["!app:bindto=hwthread"],
            "spawn refused: PMIX_ERR_NOT_SUPPORTED",
            "pmixrun: spawn by rank 0 failed: PMIX_BINDTO \"hwthread\" is not supported",
        ),
        (
            &["!add-host=elsewhere"],
            "spawn refused: PMIX_ERR_NOT_SUPPORTED",
            "pmixrun: spawn by rank 0 failed: PMIX_ADD_HOST elsewhere: pmixrun does not add \
             hosts to a running run",
        ),
        (
            &["host=elsewhere"],
            "spawn refused: PMIX_ERR_NOT_FOUND",
            "pmixrun: spawn by rank 0 failed: PMIX_HOST: host elsewhere is not one of the run's",
        ),
        (
            &["!mapby=ppr:1:node"],
            "spawn refused: PMIX_ERR_OUT_OF_RESOURCE",
            "pmixrun: spawn by rank 0 failed: no room for 2 more processes: PMIX_MAPBY \
             ppr:1:node places at most 1 per host",
        ),
    ] {
        let mut args = vec!["-n", "1", &c, "spawn-placed", "2"];
        args.extend(directives);
        let r = run(&args);
        assert_eq!(r.code(), Some(0), "{directives:?}: {r:?}");
        let lines = r.lines();
        assert!(
            lines.iter().any(|l| l.starts_with(answer)),
            "{directives:?}: {r:?}"
        );
        assert!(r.stderr.starts_with(says), "{directives:?}: {r:?}");
    }
    // Optional: left out, and said so with -v; this machine's own name is its node's.
    let r = run(&[
        "-v",
        "-n",
        "1",
        &c,
        "spawn-placed",
        "1",
        "mapby=ppr:2:package",
        &host_is,
    ]);
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert!(
        r.lines()
            .contains(&format!("spawned 1 into {}", r.spawned(1)).as_str()),
        "{r:?}"
    );
    assert_eq!(children_hosts(&r), std::slice::from_ref(&host), "{r:?}");
    assert!(
        r.stderr.contains(
            "spawn: optional PMIX_MAPBY \"ppr:2:package\": only ppr:N:node is supported: left out"
        ),
        "{r:?}"
    );
}
