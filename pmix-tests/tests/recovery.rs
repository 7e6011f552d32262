//! `pmixrun --enable-recovery`: a rank fails and the others run on. They hear of it by an
//! event, a fence among themselves completes, a fence over the whole job and a get of the
//! failed rank's data fail at once (no hang), and the run ends with the failed rank's status.
//! `--max-restarts`: a failed rank is started again and the others fence with its new life
//! and read what it put, on one node and across two logical nodes (`--launcher local`); the
//! restarted process reads its count of restarts (`PMIX_REINCARNATION`), with pmix-rs's
//! client and with Debian's libpmix (`openpmix/pmix_reinc.c`).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pmix_tests::{Output, Running, openpmix_program, pmixrun_bin, workspace_bin};

const DEADLINE: Duration = Duration::from_secs(60);

fn client() -> String {
    workspace_bin("pmix-test-client").display().to_string()
}

fn pmixrun(args: &[&str]) -> Output {
    let mut cmd = Command::new(pmixrun_bin());
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    Running::start(cmd, "pmixrun").finish(Instant::now() + DEADLINE, "pmixrun")
}

/// The lines of each survivor in `recovery <failing> <status>`, in the order it says them.
fn survivor_lines(rank: u32, failing: u32, status: i32) -> Vec<String> {
    [
        format!("told rank {failing} ended with {status}"),
        "survivors' fence done".into(),
        "job fence failed with ERR_PROC_TERM_WO_SYNC".into(),
        "get failed with ERR_PROC_TERM_WO_SYNC".into(),
    ]
    .into_iter()
    .map(|l| format!("[{rank}] rank {rank}: {l}"))
    .chain([format!("[{rank}] ok")])
    .collect()
}

/// pmixrun said `reason` and nothing else: with "the others go on" when some were still
/// running as it decided (they may all have finished while it heard the failed rank out).
fn assert_told(out: &Output, reason: &str) {
    let line = format!("pmixrun: {reason}");
    assert!(
        out.stderr == format!("{line}\n")
            || out.stderr == format!("{line}; the others go on (recovery enabled)\n"),
        "{out:?}"
    );
}

fn lines_of(out: &Output, rank: u32) -> Vec<&str> {
    let tag = format!("[{rank}] ");
    out.stdout.lines().filter(|l| l.starts_with(&tag)).collect()
}

#[test]
fn survivors_hear_of_a_failed_rank_fence_without_it_and_the_run_fails_with_its_status() {
    let args = [
        "--enable-recovery",
        "--tag-output",
        "-n",
        "4",
        &client(),
        "recovery",
        "2",
        "5",
    ];
    let out = pmixrun(&args);
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    for rank in [0, 1, 3] {
        assert_eq!(lines_of(&out, rank), survivor_lines(rank, 2, 5), "{out:?}");
    }
    assert!(lines_of(&out, 2).is_empty(), "{out:?}");
    assert_told(&out, "rank 2 exited with status 5 without calling finalize");
    // Without recovery the same failure ends the others.
    let out = pmixrun(&args[1..]);
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    assert!(
        out.stderr.starts_with(
            "pmixrun: rank 2 exited with status 5 without calling finalize; killing the job\n"
        ),
        "{out:?}"
    );
}

/// A program written for PRRTE's recoverable jobs waits for `ERR_EXIT_NONZERO_TERM` (what
/// `prterun --runtime-options recoverable,notifyerrors` sends) rather than
/// `EVENT_PROC_TERMINATED`: under pmixrun it hears it too, and runs as under PRRTE (seen
/// failing before pmixrun sent it: the survivors waited for the event in vain).
#[test]
fn survivors_waiting_for_prrtes_event_hear_it_too() {
    let args = [
        "--enable-recovery",
        "--tag-output",
        "-n",
        "3",
        &client(),
        "recovery",
        "2",
        "5",
        "untimed",
        "exit-nonzero",
    ];
    let out = pmixrun(&args);
    assert_eq!(out.status.code(), Some(5), "{out:?}");
    for rank in [0, 1] {
        assert_eq!(lines_of(&out, rank), survivor_lines(rank, 2, 5), "{out:?}");
    }
    assert_told(&out, "rank 2 exited with status 5 without calling finalize");
}

/// A rank that calls abort is ended, and only it: the others hear `ERR_PROC_ABORTED` with its
/// status, go on as after any failure, and the run ends with the abort's status.
#[test]
fn an_abort_ends_only_its_caller() {
    let args = ["--enable-recovery", "--tag-output", "-n", "3", &client()];
    let out = pmixrun(&[&args[..], &["recovery", "1", "abort:6"]].concat());
    assert_eq!(out.status.code(), Some(6), "{out:?}");
    for rank in [0, 2] {
        assert_eq!(lines_of(&out, rank), survivor_lines(rank, 1, 6), "{out:?}");
    }
    assert!(lines_of(&out, 1).is_empty(), "{out:?}");
    assert_told(&out, "rank 1 called abort with status 6: recovery test");
}

/// An abort that names another rank ends that rank, not its caller: the caller goes on with
/// the other survivors, and the run ends with the abort's status; on one node and across
/// logical nodes. Seen failing before aborts read their process list: pmixrun ended the
/// caller, and the rank it named waited for the deadline.
#[test]
fn an_abort_of_another_rank_ends_it_and_its_caller_goes_on() {
    let args = ["--enable-recovery", "--tag-output", "-n", "3", &client()];
    let out = pmixrun(&[&args[..], &["recovery", "1", "abort-by-0:6"]].concat());
    assert_eq!(out.status.code(), Some(6), "{out:?}");
    for rank in [0, 2] {
        assert_eq!(lines_of(&out, rank), survivor_lines(rank, 1, 6), "{out:?}");
    }
    assert!(lines_of(&out, 1).is_empty(), "{out:?}");
    assert_told(
        &out,
        "rank 0 called abort of rank 1 with status 6: recovery test",
    );
}

/// The scenario's control: nobody fails, the whole job's fence completes, the run succeeds.
#[test]
fn a_recoverable_run_without_failures_succeeds() {
    let out = pmixrun(&[
        "--enable-recovery",
        "-n",
        "3",
        &client(),
        "recovery",
        "1",
        "none",
    ]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(out.stdout, "ok\nok\nok\n");
    assert_eq!(out.stderr, "");
}

/// Rank 1 dies while the others wait in a fence of the whole job (or are about to enter it:
/// it waits for their commits only): their fence fails, they finish, and the run's status is
/// rank 1's. Each names rank 1's end, also one that entered after the other finalized (whose
/// `ERR_NOT_FOUND` it named before the server ranked a failure above a finalize).
#[test]
fn a_fence_waiting_when_its_participant_fails_fails_and_the_others_finish() {
    let out = pmixrun(&[
        "--enable-recovery",
        "-n",
        "3",
        &client(),
        "stuck-fence",
        "1",
        "7",
    ]);
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    let count = |l: &str| lines.iter().filter(|x| **x == l).count();
    assert_eq!(
        (count("ready"), count("ok"), lines.len()),
        (3, 2, 7),
        "{out:?}"
    );
    let failed: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.split_once(": fence failed with ").map(|(_, s)| s))
        .collect();
    assert_eq!(failed, ["ERR_PROC_TERM_WO_SYNC"; 2], "{out:?}");
    for rank in [0, 2] {
        let tag = format!("rank {rank}: fence failed");
        assert!(lines.iter().any(|l| l.starts_with(&tag)), "{out:?}");
    }
    assert_told(&out, "rank 1 exited with status 7 without calling finalize");
}

/// A rank that fails before it ever connects (here a shell that exits before it would start
/// the client) is waited for by nobody: the others' fence of the whole job fails.
#[test]
fn a_rank_that_fails_before_init_fails_the_others_fences() {
    let script = r#"test "$PMIX_RANK" = 1 && exit 4; exec "$0" recovery 1 gone-before-init"#;
    let out = pmixrun(&[
        "--enable-recovery",
        "-n",
        "3",
        "sh",
        "-c",
        script,
        &client(),
    ]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let mut lines: Vec<&str> = out.stdout.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            "ok",
            "ok",
            "rank 0: job fence failed with ERR_PROC_TERM_WO_SYNC",
            "rank 2: job fence failed with ERR_PROC_TERM_WO_SYNC",
        ],
        "{out:?}"
    );
    assert_told(&out, "rank 1 exited with status 4");
}

/// Two logical nodes of this machine (`--launcher local`): ranks 0-1 on n1, 2-3 on n2.
const TWO_NODES: [&str; 4] = ["--launcher", "local", "--host", "n1:2,n2:2"];

/// `pmixrun <nodes> --max-restarts 2 -n <n> pmix-test-client restart <failing> 3 <dir> 2`:
/// rank `failing` exits with 3 in its first two lives and is started again each time; its
/// third life reads its own `PMIX_REINCARNATION`, 2 (its marker file, the independent witness,
/// says it is in life 3); every rank then fences with it and reads what it put. The ranks that
/// connected before its restarts hold the job data of then, in which it is 0.
fn restarted_rank_completes_the_job(nodes: &[&str], n: u32, failing: u32) {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "recovery-restart-{}-{}",
        std::process::id(),
        nodes.len()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("creating the marker directory");
    let (dir_arg, n_arg, failing_arg) = (
        dir.display().to_string(),
        n.to_string(),
        failing.to_string(),
    );
    let args = [
        "--max-restarts",
        "2",
        "-n",
        &n_arg,
        &client(),
        "restart",
        &failing_arg,
        "3",
        &dir_arg,
        "2",
    ];
    let out = pmixrun(&[nodes, &args[..]].concat());
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let mut lines: Vec<&str> = out.stdout.lines().collect();
    lines.sort_unstable();
    let want: Vec<String> = (0..n)
        .map(|r| {
            let here = if r == failing { 2 } else { 0 };
            format!("rank {r}: rank {failing} is in life 3, reincarnation 2, {here} here")
        })
        .chain((0..n).map(|_| "ok".to_owned()))
        .collect();
    let mut want: Vec<&str> = want.iter().map(String::as_str).collect();
    want.sort_unstable();
    assert_eq!(lines, want, "{out:?}");
    assert_eq!(
        out.stderr,
        (1..=2)
            .map(|i| format!(
                "pmixrun: rank {failing} exited with status 3 without calling finalize; \
                 restarting it ({i} of 2)\n"
            ))
            .collect::<String>(),
        "{out:?}"
    );
}

/// `--max-restarts 2`: rank 1 exits with 3 in its first two lives and is started again; its
/// third life knows it was restarted twice (`PMIX_REINCARNATION`); every rank then fences with
/// it and reads what it put; the run succeeds.
#[test]
fn a_failed_rank_is_restarted_and_the_job_completes_with_it() {
    restarted_rank_completes_the_job(&[], 3, 1);
}

/// The same across two logical nodes, the failing rank (3) on the second: its node starts it
/// again and tells its count of restarts, and the readers of both nodes fence with its third
/// life and read what it put (the first node forgets that it had ended).
#[test]
fn a_failed_rank_is_restarted_on_its_node_and_the_others_read_its_new_life() {
    restarted_rank_completes_the_job(&TWO_NODES, 4, 3);
}

/// `--max-restarts 1` and a rank that fails in both lives: restarted once, its second failure
/// stands (the run's status is its), on one node and across two logical nodes alike.
#[test]
fn a_rank_failing_again_after_its_last_restart_fails_the_run() {
    let job = ["-n", "3", "true", ":", "-n", "1", "sh", "-c", "exit 5"];
    for nodes in [&[][..], &TWO_NODES[..]] {
        let out = pmixrun(&[nodes, &["--max-restarts", "1"], &job[..]].concat());
        assert_eq!(out.status.code(), Some(5), "{out:?}");
        let (first, second) = out.stderr.split_once('\n').unwrap_or_default();
        assert_eq!(
            first, "pmixrun: rank 3 exited with status 5; restarting it (1 of 1)",
            "{out:?}"
        );
        let out = Output {
            stderr: second.to_owned(),
            ..out
        };
        assert_told(&out, "rank 3 exited with status 5");
    }
}

/// Debian's libpmix under `pmixrun --max-restarts 1` (`openpmix/pmix_reinc.c`): rank 1 exits
/// with 3 in its first life, where its `PMIX_REINCARNATION` is 0; its second life reads 1 from
/// the job data pmixrun's OpenPMIx front-end sends it (were it 0 again, it would fail again
/// and the run with it).
#[test]
fn a_restarted_libpmix_process_reads_its_reincarnation() {
    let program = openpmix_program("pmix_reinc").display().to_string();
    let out = pmixrun(&["--max-restarts", "1", "-n", "3", &program]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let mut lines: Vec<&str> = out.stdout.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            "rank 0 reincarnation 0",
            "rank 1 reincarnation 1",
            "rank 2 reincarnation 0"
        ],
        "{out:?}"
    );
    assert_eq!(
        out.stderr,
        "pmixrun: rank 1 exited with status 3 without calling finalize; restarting it (1 of 1)\n",
        "{out:?}"
    );
}
