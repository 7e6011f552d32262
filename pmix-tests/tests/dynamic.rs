//! Dynamic processes in real processes: the `pmix-dyn-client` scenarios (connect and data
//! exchange across namespaces, disconnect, two jobs started apart meeting by publish/lookup,
//! a participant dying in the middle of a connect, event ranges, resolve_peers /
//! resolve_nodes) under a [`TestHost`] serving two jobs, the spawn worlds of the same
//! scenarios under `pmixrun`, and the `spawn_connect` example as its doc says to run it.
//! Every launch is bounded by a deadline.

use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crossbeam_channel::{Receiver, unbounded};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pmix_server::NoHost;
use pmix_tests::{
    Finished, Started, TestHost, assert_all_ok, cargo_build, collect_text, wait_all, workspace_bin,
};
use pmix_types::{Nspace, Proc};

const DEADLINE: Duration = Duration::from_secs(60);

fn dyn_client() -> PathBuf {
    workspace_bin("pmix-dyn-client")
}

/// Starts every rank of `ns`, a namespace of `size` registered on `h`, with `args`.
fn start(h: &TestHost, ns: &Nspace, size: u32, args: &[&str]) -> Vec<Started> {
    let prog = dyn_client();
    (0..size)
        .map(|r| h.spawn_program(&prog, &Proc::new(ns.clone(), r), args, &[]))
        .collect()
}

/// Registers jobs `a` and `b` (name, size) on a fresh host, runs `scenario` as each of their
/// processes in the world `a:SIZE b:SIZE`, and returns what each did (not yet checked).
fn run_world(scenario: &str, a: (&str, u32), b: (&str, u32)) -> Vec<Finished> {
    let h = TestHost::start(NoHost);
    let na = h.job(a.0, a.1);
    let nb = h.job(b.0, b.1);
    let wa = format!("{}:{}", a.0, a.1);
    let wb = format!("{}:{}", b.0, b.1);
    let args = [scenario, wa.as_str(), wb.as_str()];
    let mut started = start(&h, &na, a.1, &args);
    started.extend(start(&h, &nb, b.1, &args));
    wait_all(started, DEADLINE)
}

/// The output of `proc` (namespace, rank).
fn out_of<'a>(finished: &'a [Finished], ns: &str, rank: u32) -> &'a Finished {
    finished
        .iter()
        .find(|f| f.proc.nspace.as_str() == ns && f.proc.rank.0 == rank)
        .unwrap_or_else(|| panic!("no process {ns}:{rank} in {finished:#?}"))
}

/// Checks that `proc` printed exactly `lines`.
fn said(finished: &[Finished], ns: &str, rank: u32, lines: &[&str]) {
    let f = out_of(finished, ns, rank);
    assert_eq!(f.stdout.lines().collect::<Vec<_>>(), lines, "{f:#?}");
}

#[test]
fn connect_exchanges_committed_and_job_data_across_namespaces() {
    let f = run_world("exchange", ("dxa", 3), ("dxb", 2));
    assert_all_ok(&f);
    for r in 0..3 {
        let line = format!("a {r} of 3: connected to b of 2, read 4 values");
        said(&f, "dxa", r, &[&line, "ok"]);
    }
    for r in 0..2 {
        let line = format!("b {r} of 2: connected to a of 3, read 4 values");
        said(&f, "dxb", r, &[&line, "ok"]);
    }
}

#[test]
fn after_disconnect_the_data_stays_and_the_jobs_no_longer_hear_of_each_other() {
    let f = run_world("disconnect", ("dda", 2), ("ddb", 3));
    // b 2 leaves without finalize after the disconnects; everybody else exits 0.
    let leaver = out_of(&f, "ddb", 2);
    assert_eq!(leaver.code, Some(1), "{leaver:#?}");
    assert_eq!(
        leaver.stdout, "b 2: leaving without finalize\n",
        "{leaver:#?}"
    );
    let rest: Vec<Finished> = f
        .into_iter()
        .filter(|x| !(x.proc.nspace.as_str() == "ddb" && x.proc.rank.0 == 2))
        .collect();
    assert_all_ok(&rest);
    for r in 0..2 {
        let line = format!("a {r}: heard nothing of b after the disconnect");
        said(&rest, "dda", r, &[&line, "ok"]);
        let line = format!("b {r}: heard that 2 left");
        said(&rest, "ddb", r, &[&line, "ok"]);
    }
}

#[test]
fn two_jobs_started_apart_meet_by_publish_lookup_and_connect() {
    let h = TestHost::start(NoHost);
    // The first job starts and waits in its lookup; only then is the second registered.
    let first = h.job("dmeet-first", 2);
    let mut started = start(&h, &first, 2, &["publish-connect", "first", "3"]);
    let second = h.job("dmeet-second", 3);
    started.extend(start(&h, &second, 3, &["publish-connect", "second", "2"]));
    let f = wait_all(started, DEADLINE);
    assert_all_ok(&f);
    for r in 0..2 {
        let line = format!("first {r}: met 3 processes by lookup, connected and fenced");
        said(&f, "dmeet-first", r, &[&line, "ok"]);
    }
    for r in 0..3 {
        let line = format!("second {r}: met 2 processes by lookup, connected and fenced");
        said(&f, "dmeet-second", r, &[&line, "ok"]);
    }
}

#[test]
fn a_participant_dying_mid_connect_releases_the_others_with_an_error() {
    // Each survivor fails the connect if it took longer than 2 s to be released.
    let f = run_world("killed", ("dka", 2), ("dkb", 2));
    let victim = out_of(&f, "dkb", 1);
    assert_eq!(victim.code, Some(1), "{victim:#?}");
    assert_eq!(
        victim.stdout, "victim: exits in the middle of the connect\n",
        "{victim:#?}"
    );
    let survivors: Vec<Finished> = f
        .into_iter()
        .filter(|x| !(x.proc.nspace.as_str() == "dkb" && x.proc.rank.0 == 1))
        .collect();
    assert_all_ok(&survivors);
    for (ns, side, r) in [("dka", "a", 0), ("dka", "a", 1), ("dkb", "b", 0)] {
        let line = format!("{side} {r}: released with ERR_PROC_TERM_WO_SYNC, told of b 1");
        said(&survivors, ns, r, &[&line, "ok"]);
    }
}

#[test]
fn events_reach_exactly_their_range_and_never_another_job_by_namespace() {
    let f = run_world("events", ("dea", 3), ("deb", 2));
    assert_all_ok(&f);
    // (namespace, label, how many test events it must have received)
    for (ns, side, r, n) in [
        ("dea", "a", 0, 1),
        ("dea", "a", 1, 1),
        ("dea", "a", 2, 2),
        ("deb", "b", 0, 2),
        ("deb", "b", 1, 1),
    ] {
        let line = format!("{side} {r}: received {n} events as the ranges say");
        said(&f, ns, r, &[&line, "ok"]);
    }
}

#[test]
fn resolve_peers_and_nodes_of_both_namespaces() {
    let f = run_world("resolve", ("dra", 2), ("drb", 3));
    assert_all_ok(&f);
    for (ns, side, size) in [("dra", "a", 2), ("drb", "b", 3)] {
        for r in 0..size {
            let line = format!("{side} {r}: a has 2 and b 3 processes on this node");
            said(&f, ns, r, &[&line, "ok"]);
        }
    }
}

// ---- pmixrun ---------------------------------------------------------------------------

/// pmixrun and the spawn_connect example, built once per test process: `cargo test -p
/// pmix-tests` does not build other packages' binaries, and an old one must not be tested.
fn built() -> &'static (PathBuf, PathBuf) {
    static BINS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    BINS.get_or_init(|| {
        let profile = cargo_build(&[
            "-p",
            "pmixrun",
            "--bin",
            "pmixrun",
            "-p",
            "pmix-client",
            "--example",
            "spawn_connect",
        ]);
        (
            profile.join("pmixrun"),
            profile.join("examples").join("spawn_connect"),
        )
    })
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
    fn assert_ok(&self) {
        assert_eq!(self.status.code(), Some(0), "{self:#?}");
        assert_eq!(self.stderr, "", "{self:#?}");
    }

    /// The output lines, sorted (processes write in any order).
    fn sorted_lines(&self) -> Vec<&str> {
        let mut lines: Vec<&str> = self.stdout.lines().collect();
        lines.sort_unstable();
        lines
    }
}

/// Runs pmixrun with `args`, at most [`DEADLINE`]; past it, kills it and fails the test.
fn pmixrun(args: &[&str]) -> Run {
    let mut child = Command::new(&built().0)
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
    let text = |rx: Receiver<String>| rx.recv_timeout(Duration::from_secs(10)).unwrap_or_default();
    let status = match rx.recv_timeout(DEADLINE) {
        Ok(s) => s.expect("waiting for pmixrun"),
        Err(_) => {
            // SIGTERM first: pmixrun passes it on, so every job's processes go too.
            let raw = Pid::from_raw(i32::try_from(pid).expect("pid"));
            let _ = kill(raw, Signal::SIGTERM);
            let _ = rx.recv_timeout(Duration::from_secs(5));
            let _ = kill(raw, Signal::SIGKILL);
            panic!(
                "pmixrun {args:?} did not finish within {DEADLINE:?}\nstdout: {}\nstderr: {}",
                text(stdout),
                text(stderr)
            );
        }
    };
    Run {
        pid,
        status,
        stdout: text(stdout),
        stderr: text(stderr),
    }
}

/// Sorted copies of `lines`, for comparing with [`Run::sorted_lines`].
fn sorted(lines: &[String]) -> Vec<&str> {
    let mut v: Vec<&str> = lines.iter().map(String::as_str).collect();
    v.sort_unstable();
    v
}

#[test]
fn spawned_jobs_connect_exchange_resolve_and_disconnect_under_pmixrun() {
    let client = dyn_client().display().to_string();
    let r = pmixrun(&[
        "-n",
        "3",
        &client,
        "spawned+exchange+resolve+disconnect",
        "spawn",
        "2",
    ]);
    r.assert_ok();
    let mut want = Vec::new();
    for (side, size, other, other_size) in [("a", 3, "b", 2), ("b", 2, "a", 3)] {
        for rank in 0..size {
            want.push(if side == "a" {
                format!("a {rank} of 3: b has 2 processes")
            } else {
                format!("b {rank} of 2: spawned by a 0 of 3")
            });
            want.push(format!(
                "{side} {rank} of {size}: connected to {other} of {other_size}, read 4 values"
            ));
            want.push(format!(
                "{side} {rank}: a has 3 and b 2 processes on this node"
            ));
            want.push(format!("{side} {rank}: connected and disconnected twice"));
            want.push("ok".to_owned());
        }
    }
    assert_eq!(r.sorted_lines(), sorted(&want), "{r:#?}");
}

#[test]
fn event_ranges_with_a_spawned_job_under_pmixrun() {
    let client = dyn_client().display().to_string();
    let r = pmixrun(&["-n", "3", &client, "events", "spawn", "2"]);
    r.assert_ok();
    let mut want = Vec::new();
    for (side, rank, n) in [
        ("a", 0, 1),
        ("a", 1, 1),
        ("a", 2, 2),
        ("b", 0, 2),
        ("b", 1, 1),
    ] {
        want.push(format!(
            "{side} {rank}: received {n} events as the ranges say"
        ));
        want.push("ok".to_owned());
    }
    assert_eq!(r.sorted_lines(), sorted(&want), "{r:#?}");
}

#[test]
fn the_spawn_connect_example_as_documented() {
    // The command of its doc comment: `pmixrun -n 1 ./target/debug/examples/spawn_connect`.
    let example = built().1.display().to_string();
    let r = pmixrun(&["-n", "1", &example]);
    r.assert_ok();
    let parent = format!("rs-pmixrun-{}:0", r.pid);
    let children = format!("rs-pmixrun-{}.1", r.pid);
    let lines = r.sorted_lines();
    assert_eq!(lines.len(), 3, "{r:#?}");
    // Sorted, the children's lines come first; the parent's names the port.
    let port = lines[2]
        .split_once(" connected back to ")
        .and_then(|(_, rest)| rest.split_once(';'))
        .map(|(port, _)| port)
        .unwrap_or_else(|| panic!("no port in {r:#?}"));
    assert!(port.starts_with("tcp://127.0.0.1:"), "{r:#?}");
    for (rank, line) in lines.iter().take(2).enumerate() {
        assert_eq!(
            *line,
            format!(
                "child {children}:{rank}: {parent} answered at {port}; \
                 its data: parent {parent} was here"
            ),
            "{r:#?}"
        );
    }
    assert_eq!(
        lines[2],
        format!(
            "parent {parent}: {children}:0 and {children}:1 connected back to {port}; \
             their data: child {children}:0 was here, child {children}:1 was here"
        ),
        "{r:#?}"
    );
}
