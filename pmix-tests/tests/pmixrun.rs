//! `pmixrun` end to end: real launches of the scenario client (and of plain programs), each
//! bounded by a deadline, checking exit statuses, forwarded output and the launcher's messages.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, unbounded};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pmix_tests::pmixrun_bin;
use pmix_tests::{cargo_build, collect_text, profile_dir, workspace_bin};

const DEADLINE: Duration = Duration::from_secs(60);

/// pmix-client's demo example, the README's job.
fn demo_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        cargo_build(&["-p", "pmix-client", "--example", "demo"]);
        profile_dir().join("examples").join("demo")
    })
}

fn client() -> String {
    workspace_bin("pmix-test-client").display().to_string()
}

/// What one pmixrun run did.
#[derive(Debug)]
struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Run {
    fn code(&self) -> Option<i32> {
        self.status.code()
    }

    fn stdout_lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }
}

fn pmixrun(args: &[&str]) -> Command {
    let mut cmd = Command::new(pmixrun_bin());
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Waits for a started pmixrun, at most `deadline`; past it, kills it and fails the test.
fn finish(mut child: Child, stdout: Receiver<String>, deadline: Duration) -> Run {
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    let stderr = collect_text(child.stderr.take());
    let (tx, rx) = unbounded();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = match rx.recv_timeout(deadline) {
        Ok(s) => s.expect("waiting for pmixrun"),
        Err(_) => {
            // SIGTERM first: pmixrun passes it on, so the job's processes go too.
            let _ = kill(pid, Signal::SIGTERM);
            let _ = rx.recv_timeout(Duration::from_secs(5));
            let _ = kill(pid, Signal::SIGKILL);
            panic!("pmixrun did not finish within {deadline:?}");
        }
    };
    // pmixrun waits at most 2 s for its output after the processes end; then so can we.
    let text = |rx: Receiver<String>| rx.recv_timeout(Duration::from_secs(10)).unwrap_or_default();
    Run {
        status,
        stdout: text(stdout),
        stderr: text(stderr),
    }
}

fn run(args: &[&str]) -> Run {
    let mut child = pmixrun(args).spawn().expect("starting pmixrun");
    let stdout = collect_text(child.stdout.take());
    finish(child, stdout, DEADLINE)
}

#[test]
fn demo_jobs_of_1_4_and_8_processes() {
    let c = client();
    for n in [1u32, 4, 8] {
        let r = run(&["-n", &n.to_string(), &c, "allgather"]);
        assert_eq!(r.code(), Some(0), "-n {n}: {r:?}");
        let lines = r.stdout_lines();
        for rank in 0..n {
            let want = format!("rank {rank} of {n}: saw all {n} values");
            assert!(
                lines.contains(&want.as_str()),
                "-n {n}: no {want:?} in {r:?}"
            );
        }
        assert_eq!(
            lines.iter().filter(|l| **l == "ok").count(),
            n as usize,
            "{r:?}"
        );
        assert_eq!(r.stderr, "", "-n {n}");
    }
}

#[test]
fn the_readme_demo_at_1_4_and_8_processes() {
    let demo = demo_bin().display().to_string();
    for n in [1u32, 4, 8] {
        let r = run(&["-n", &n.to_string(), &demo]);
        assert_eq!(r.code(), Some(0), "-n {n}: {r:?}");
        let mut lines = r.stdout_lines();
        lines.sort_unstable();
        let mut want: Vec<String> = (0..n)
            .map(|rank| format!("rank {rank} of {n}: checked {} peers", n - 1))
            .collect();
        want.sort_unstable();
        assert_eq!(lines, want, "-n {n}: {r:?}");
        assert_eq!(r.stderr, "", "-n {n}");
    }
    // Two app contexts of the demo form one job.
    let r = run(&["-n", "2", &demo, ":", "-n", "2", &demo]);
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert_eq!(
        r.stdout.matches("of 4: checked 3 peers").count(),
        4,
        "{r:?}"
    );
}

#[test]
fn groups_of_all_ranks_and_of_pairs_get_their_own_context_ids() {
    let c = client();
    let r = run(&["-n", "5", &c, "groups"]);
    assert_eq!(r.code(), Some(0), "{r:?}");
    let oks = r.stdout_lines().iter().filter(|l| **l == "ok").count();
    assert_eq!(oks, 5, "{r:?}");
    assert_eq!(r.stderr, "", "{r:?}");
}

#[test]
fn a_fence_over_a_group_id_is_over_its_members_with_their_data() {
    let c = client();
    let r = run(&["-n", "4", &c, "group-fence"]);
    assert_eq!(r.code(), Some(0), "{r:?}");
    let oks = r.stdout_lines().iter().filter(|l| **l == "ok").count();
    assert_eq!(oks, 4, "{r:?}");
    assert_eq!(r.stderr, "", "{r:?}");
}

#[test]
fn two_app_contexts_see_their_app_numbers() {
    let c = client();
    let r = run(&[
        "-n", "2", &c, "appinfo", "0", "2", ":", "-n", "3", &c, "appinfo", "1", "2",
    ]);
    assert_eq!(r.code(), Some(0), "{r:?}");
    let lines = r.stdout_lines();
    for (rank, app, size, leader) in [
        (0, 0, 2, 0),
        (1, 0, 2, 0),
        (2, 1, 3, 2),
        (3, 1, 3, 2),
        (4, 1, 3, 2),
    ] {
        let want = format!("rank {rank} appnum {app} of 2 apps, app size {size}, leader {leader}");
        assert!(lines.contains(&want.as_str()), "no {want:?} in {r:?}");
    }
}

#[test]
fn finalize_with_an_embedded_barrier_waits_for_the_others() {
    // The others' fence completes only if rank 0's finalize joined it.
    let r = run(&["-n", "3", &client(), "finalize-barrier"]);
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert_eq!(
        r.stdout_lines().iter().filter(|l| **l == "ok").count(),
        3,
        "{r:?}"
    );
}

#[test]
fn a_rank_exiting_without_finalize_ends_the_job_with_its_status() {
    // Ranks other than 2 wait forever: only pmixrun can end them.
    let r = run(&["-n", "4", &client(), "exit-rank", "2", "3"]);
    assert_eq!(r.code(), Some(3), "{r:?}");
    assert_eq!(
        r.stderr,
        "pmixrun: rank 2 exited with status 3 without calling finalize; killing the job\n"
    );
}

#[test]
fn a_rank_exiting_zero_without_finalize_fails_the_job() {
    let r = run(&["-n", "2", &client(), "exit-rank", "1", "0"]);
    assert_eq!(r.code(), Some(1), "{r:?}");
    assert_eq!(
        r.stderr,
        "pmixrun: rank 1 exited with status 0 without calling finalize; killing the job\n"
    );
}

#[test]
fn abort_ends_the_job_with_the_abort_status() {
    let r = run(&["-n", "3", &client(), "abort", "5"]);
    assert_eq!(r.code(), Some(5), "{r:?}");
    assert_eq!(
        r.stderr,
        "pmixrun: rank 0 called abort with status 5: test abort; killing the job\n"
    );
    // A status that is no exit status still fails the job.
    let r = run(&["-n", "2", &client(), "abort", "-25"]);
    assert_eq!(r.code(), Some(1), "{r:?}");
}

#[test]
fn a_missing_program_is_reported_not_waited_for() {
    let r = run(&["-n", "2", "./nope"]);
    assert_eq!(r.code(), Some(127), "{r:?}");
    assert_eq!(
        r.stderr,
        "pmixrun: cannot start ./nope: No such file or directory\n"
    );
    // After processes of an earlier app context started (and wait forever): they are killed.
    let r = run(&[
        "-n",
        "2",
        &client(),
        "exit-rank",
        "99",
        "0",
        ":",
        "-n",
        "1",
        "no-such-program-in-path",
    ]);
    assert_eq!(r.code(), Some(127), "{r:?}");
    assert!(
        r.stderr.starts_with(
            "pmixrun: cannot start no-such-program-in-path: No such file or directory; killing the job\n"
        ),
        "{r:?}"
    );
    let r = run(&["/etc/passwd"]);
    assert_eq!(r.code(), Some(126), "{r:?}");
    assert_eq!(
        r.stderr,
        "pmixrun: cannot start /etc/passwd: Permission denied\n"
    );
}

#[test]
fn timeout_kills_a_hanging_job() {
    let started = Instant::now();
    let r = run(&["--timeout", "1", "-n", "3", &client(), "hang"]);
    assert_eq!(r.code(), Some(124), "{r:?}");
    assert_eq!(
        r.stderr,
        "pmixrun: the job did not finish within --timeout 1 s; killing the job\n"
    );
    // Every rank got as far as its hang. Killed together, a rank may see its peer die first
    // and say its get or fence failed for it before its own end: nothing else may appear.
    let lines = r.stdout_lines();
    assert_eq!(lines.iter().filter(|l| **l == "ready").count(), 3, "{r:?}");
    assert!(
        lines
            .iter()
            .all(|l| *l == "ready"
                || (l.starts_with("FAILED: ") && l.contains("ERR_PROC_TERM_WO_SYNC"))),
        "{r:?}"
    );
    assert!(started.elapsed() >= Duration::from_secs(1));
}

#[test]
fn tag_output_prefixes_every_line_with_its_rank() {
    let r = run(&["--tag-output", "-n", "3", &client(), "allgather"]);
    assert_eq!(r.code(), Some(0), "{r:?}");
    let lines = r.stdout_lines();
    assert_eq!(lines.len(), 6, "{r:?}");
    for rank in 0..3 {
        let want = format!("[{rank}] rank {rank} of 3: saw all 3 values");
        assert!(lines.contains(&want.as_str()), "no {want:?} in {r:?}");
        assert!(lines.contains(&format!("[{rank}] ok").as_str()), "{r:?}");
    }
    // stderr is tagged too, and a last line without newline still gets one.
    let r = run(&[
        "--tag-output",
        "-n",
        "2",
        "sh",
        "-c",
        "printf 'to stderr\\nno newline' >&2",
    ]);
    assert_eq!(r.code(), Some(0), "{r:?}");
    let mut lines: Vec<&str> = r.stderr.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            "[0] no newline",
            "[0] to stderr",
            "[1] no newline",
            "[1] to stderr"
        ]
    );
    assert!(r.stderr.ends_with('\n'));
}

#[test]
fn environment_working_directory_and_signal_mask_of_the_processes() {
    let dir = std::env::temp_dir().canonicalize().expect("temp dir");
    let dir = dir.to_str().expect("utf-8 temp dir");
    let mut cmd = pmixrun(&[
        "-n",
        "2",
        "--wdir",
        dir,
        "-x",
        "PMIXRUN_T_SET=a=b",
        "-x",
        "PMIXRUN_T_FWD",
        "sh",
        "-c",
        "echo \"$PMIX_RANK $PMIXRUN_T_SET $PMIXRUN_T_FWD $(pwd -P)\"; grep SigBlk /proc/self/status",
    ]);
    cmd.env("PMIXRUN_T_FWD", "forwarded");
    let mut child = cmd.spawn().expect("starting pmixrun");
    let stdout = collect_text(child.stdout.take());
    let r = finish(child, stdout, DEADLINE);
    assert_eq!(r.code(), Some(0), "{r:?}");
    let lines = r.stdout_lines();
    for rank in 0..2 {
        let want = format!("{rank} a=b forwarded {dir}");
        assert!(lines.contains(&want.as_str()), "no {want:?} in {r:?}");
    }
    // pmixrun catches the signals it forwards; its processes start with none blocked.
    let masks: Vec<&&str> = lines.iter().filter(|l| l.starts_with("SigBlk:")).collect();
    assert_eq!(masks.len(), 2, "{r:?}");
    assert!(
        masks.iter().all(|l| l.ends_with("0000000000000000")),
        "{masks:?}"
    );
}

#[test]
fn plain_programs_and_signals_in_exit_statuses() {
    // Programs that never use PMIx may simply exit 0.
    let r = run(&["-n", "3", "true"]);
    assert_eq!(r.code(), Some(0), "{r:?}");
    let r = run(&["-n", "1", "sh", "-c", "kill -9 $$"]);
    assert_eq!(r.code(), Some(137), "{r:?}");
    assert_eq!(r.stderr, "pmixrun: rank 0 was killed by SIGKILL\n");
}

#[test]
fn sigterm_and_ctrl_c_are_passed_on_to_the_job() {
    for (signal, code) in [(Signal::SIGTERM, 15), (Signal::SIGINT, 2)] {
        signal_passed_on(signal, code);
    }
}

/// pmixrun gets `signal` (number `code`) while its two ranks wait: it passes it on, every rank
/// ends, and pmixrun exits 128 + `code`, saying so.
fn signal_passed_on(signal: Signal, code: i32) {
    let mut child = pmixrun(&["-n", "2", &client(), "hang"])
        .spawn()
        .expect("starting pmixrun");
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    // Both ranks say "ready" before they block; then the signal certainly finds them.
    let (tx, lines) = unbounded();
    let out = child.stdout.take().expect("stdout");
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let end = Instant::now() + DEADLINE;
    let mut ready = 0;
    while ready < 2 {
        match lines.recv_deadline(end) {
            Ok(l) if l == "ready" => ready += 1,
            Ok(_) => {}
            Err(e) => {
                let _ = kill(pid, Signal::SIGKILL);
                panic!("the job never got ready: {e}");
            }
        }
    }
    kill(pid, signal).expect("signalling pmixrun");
    let (_, rest) = unbounded::<String>();
    let r = finish(child, rest, DEADLINE);
    assert_eq!(r.code(), Some(128 + code), "{signal}: {r:?}");
    assert_eq!(
        r.stderr,
        format!("pmixrun: received {signal}; passing it on to the job\n")
    );
}

#[test]
fn command_line_errors_help_and_version() {
    let r = run(&[]);
    assert_eq!(r.code(), Some(2), "{r:?}");
    assert!(r.stderr.contains("Usage:"), "{r:?}");
    let r = run(&["-n", "2", "true", ":"]);
    assert_eq!(r.code(), Some(2), "{r:?}");
    let r = run(&["--version"]);
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert!(r.stdout.starts_with("pmixrun "), "{r:?}");
    let r = run(&["--help"]);
    assert_eq!(r.code(), Some(0), "{r:?}");
    assert!(r.stdout.contains("Examples:"), "{r:?}");
    let r = run(&["--wdir", "/no/such/dir", "true"]);
    assert_eq!(r.code(), Some(1), "{r:?}");
    assert_eq!(r.stderr, "pmixrun: --wdir /no/such/dir: not a directory\n");
}
