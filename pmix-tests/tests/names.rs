//! Publish, lookup and unpublish in real processes: the name-service scenarios of
//! `pmix-names-client` under a [`TestHost`] (the server's built-in name service) and under
//! `pmixrun`, with and without a name server shared by separate runs, the MPI-style
//! rendezvous example, and pmix-rs processes of two runs connecting through a name server
//! (`pmix-dyn-client publish-connect`). Every launch is bounded by a deadline.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crossbeam_channel::unbounded;
use pmix_server::NoHost;
use pmix_tests::{
    Finished, NameServerProcess, Running, Started, TestHost, assert_all_ok, cargo_build,
    profile_dir, wait_all, workspace_bin,
};
use pmix_types::{Nspace, Proc};

const DEADLINE: Duration = Duration::from_secs(60);

fn names_client() -> PathBuf {
    workspace_bin("pmix-names-client")
}

/// Starts every rank of `ns`, a namespace of `size` registered on `h`, running the scenario.
fn start(h: &TestHost, ns: &Nspace, size: u32, args: &[&str]) -> Vec<Started> {
    let prog = names_client();
    (0..size)
        .map(|r| h.spawn_program(&prog, &Proc::new(ns.clone(), r), args, &[]))
        .collect()
}

/// Registers the jobs, runs the scenario as each of their ranks and checks all exit 0.
fn run_scenario(h: &TestHost, jobs: &[(&str, u32)], args: &[&str]) -> Vec<Finished> {
    let namespaces: Vec<_> = jobs
        .iter()
        .map(|(name, size)| (h.job(name, *size), *size))
        .collect();
    let started = namespaces
        .iter()
        .flat_map(|(ns, size)| start(h, ns, *size, args))
        .collect();
    let finished = wait_all(started, DEADLINE);
    assert_all_ok(&finished);
    finished
}

#[test]
fn blocking_and_non_blocking_publish_lookup_unpublish() {
    let h = TestHost::start(NoHost);
    run_scenario(&h, &[("nbasic", 3)], &["basic"]);
}

#[test]
fn each_range_across_two_namespaces() {
    let h = TestHost::start(NoHost);
    run_scenario(
        &h,
        &[("nrange-a", 3), ("nrange-b", 2)],
        &["ranges", "nrange-a", "nrange-b"],
    );
}

#[test]
fn persistence_proc_app_first_read_session_indef() {
    let h = TestHost::start(NoHost);
    // Rank 0 publishes under every persistence; rank 1 reads, consuming the first-read key.
    run_scenario(&h, &[("npersist", 2)], &["persist-publish"]);
    // The publisher has ended (its process exited before this job was started): PROC is gone.
    run_scenario(
        &h,
        &[("nafter-proc", 1)],
        &["persist-after", "npersist", "proc"],
    );
    // Its namespace ends: APP (the default) is gone too; SESSION and INDEF stay.
    h.server
        .deregister_nspace(&Nspace::new("npersist").unwrap());
    run_scenario(
        &h,
        &[("nafter-app", 1)],
        &["persist-after", "npersist", "app"],
    );
}

#[test]
fn wait_for_publications_that_come_later() {
    let h = TestHost::start(NoHost);
    run_scenario(&h, &[("nwait", 3)], &["wait"]);
}

#[test]
fn wait_with_timeout_fails_with_err_timeout() {
    let h = TestHost::start(NoHost);
    run_scenario(&h, &[("ntimeout", 2)], &["wait-timeout"]);
}

#[test]
fn duplicate_keys_keep_the_first_value_and_store_nothing_of_the_refused_call() {
    let h = TestHost::start(NoHost);
    run_scenario(&h, &[("ndup", 2)], &["duplicates"]);
}

#[test]
fn unpublish_only_ones_own_keys_all_or_nothing() {
    let h = TestHost::start(NoHost);
    run_scenario(&h, &[("nunpub", 2)], &["unpublish"]);
}

#[test]
fn a_lookup_whose_process_ended_consumes_nothing() {
    let h = TestHost::start(NoHost);
    run_scenario(&h, &[("nabandon", 1)], &["abandon-wait", "ab.key"]);
    run_scenario(&h, &[("nreader", 1)], &["first-read-after", "ab.key"]);
}

// ---- pmixrun ---------------------------------------------------------------------------

/// pmixrun and the rendezvous example, built once per test process (one cargo at a time).
fn built() -> &'static (PathBuf, PathBuf) {
    static BINS: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    BINS.get_or_init(|| {
        cargo_build(&[
            "-p",
            "pmixrun",
            "--bin",
            "pmixrun",
            "-p",
            "pmix-client",
            "--example",
            "rendezvous",
        ]);
        let dir = profile_dir();
        (dir.join("pmixrun"), dir.join("examples").join("rendezvous"))
    })
}

fn pmixrun_bin() -> &'static Path {
    &built().0
}

fn rendezvous_bin() -> String {
    built().1.display().to_string()
}

/// What one pmixrun run did.
#[derive(Debug)]
struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Run {
    fn assert_ok(&self, what: &str) {
        assert_eq!(self.status.code(), Some(0), "{what}: {self:#?}");
    }
}

fn pmixrun(args: &[&str]) -> Command {
    let mut cmd = Command::new(pmixrun_bin());
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Only where a test says so.
        .env_remove("PMIXRS_NAMESERVER");
    cmd
}

fn spawn(cmd: Command) -> Running {
    Running::start(cmd, "pmixrun")
}

fn finish(r: Running, end: Instant, what: &str) -> Run {
    let o = r.finish(end, what);
    Run {
        status: o.status,
        stdout: o.stdout,
        stderr: o.stderr,
    }
}

fn run(cmd: Command, what: &str) -> Run {
    finish(spawn(cmd), Instant::now() + DEADLINE, what)
}

/// The scenarios that need one namespace, and how many ranks each.
const ONE_JOB_SCENARIOS: [(&str, &str); 5] = [
    ("basic", "3"),
    ("wait", "3"),
    ("wait-timeout", "2"),
    ("duplicates", "2"),
    ("unpublish", "2"),
];

#[test]
fn scenarios_under_pmixrun() {
    let client = names_client().display().to_string();
    for (scenario, n) in ONE_JOB_SCENARIOS {
        let r = run(pmixrun(&["-n", n, &client, scenario]), scenario);
        r.assert_ok(scenario);
        assert_eq!(r.stderr, "", "{scenario}");
        assert_eq!(
            r.stdout.lines().filter(|l| *l == "ok").count().to_string(),
            n
        );
    }
}

#[test]
fn scenarios_through_a_name_server() {
    let ns = NameServerProcess::start(pmixrun_bin(), DEADLINE);
    let client = names_client().display().to_string();
    for (scenario, n) in ONE_JOB_SCENARIOS {
        let r = run(
            pmixrun(&["--nameserver-uri", &ns.uri, "-n", n, &client, scenario]),
            scenario,
        );
        r.assert_ok(scenario);
    }
    ns.stop();
}

#[test]
fn two_runs_share_global_names_through_a_name_server_and_keep_session_ones() {
    let ns = NameServerProcess::start(pmixrun_bin(), DEADLINE);
    let client = names_client().display().to_string();
    let end = Instant::now() + DEADLINE;
    // The first publishes and waits for a reply; the second finds it and replies. The second
    // names the server by the environment variable.
    let first = spawn(pmixrun(&[
        "--nameserver-uri",
        &ns.file_spec(),
        &client,
        "xrun-first",
    ]));
    let mut second = pmixrun(&[&client, "xrun-second"]);
    second.env("PMIXRS_NAMESERVER", &ns.uri);
    let second = spawn(second);
    let first = finish(first, end, "first run");
    let second = finish(second, end, "second run");
    assert!(
        first.status.success() && second.status.success(),
        "first run: {first:#?}\nsecond run: {second:#?}"
    );
    let line = |r: &Run, prefix: &str| -> String {
        r.stdout
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line in {r:#?}"))
            .to_owned()
    };
    // Each saw a process of the other run (the scenarios check it is not of their own).
    let first_saw = line(&first, "first: ");
    let second_saw = line(&second, "second: found the service of ");
    assert!(first_saw.ends_with(" replied"), "{first_saw}");
    // Both runs over: only the INDEF publication outlives them.
    let after = run(
        pmixrun(&["--nameserver-uri", &ns.uri, &client, "xrun-after"]),
        "third run",
    );
    after.assert_ok("third run");
    let after_saw = line(&after, "after: ");
    let publisher = second_saw
        .strip_prefix("second: found the service of ")
        .and_then(|p| p.rsplit_once(':'))
        .map(|(nspace, _)| nspace.to_owned())
        .expect("publisher");
    assert_eq!(
        after_saw,
        format!("after: only the INDEF data of {publisher} is left")
    );
    ns.stop();
}

#[test]
fn a_lookup_whose_run_ended_consumes_nothing_on_the_name_server() {
    let ns = NameServerProcess::start(pmixrun_bin(), DEADLINE);
    let client = names_client().display().to_string();
    for scenario in ["abandon-wait", "first-read-after"] {
        let r = run(
            pmixrun(&["--nameserver-uri", &ns.uri, &client, scenario, "ab.key"]),
            scenario,
        );
        r.assert_ok(scenario);
        assert_eq!(r.stdout, "ok\n", "{scenario}");
    }
    ns.stop();
}

#[test]
fn a_lookup_waiting_on_a_name_server_that_stops_fails_instead_of_hanging() {
    let ns = NameServerProcess::start(pmixrun_bin(), DEADLINE);
    let client = names_client().display().to_string();
    let end = Instant::now() + DEADLINE;
    let mut child = pmixrun(&["--nameserver-uri", &ns.uri, &client, "wait-lost"])
        .spawn()
        .expect("starting pmixrun");
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
    loop {
        match lines.recv_deadline(end) {
            Ok(l) if l == "waiting" => break,
            Ok(_) => {}
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the lookup never started waiting: {e}");
            }
        }
    }
    ns.stop();
    let (tx, rest) = unbounded();
    std::thread::spawn(move || {
        let _ = tx.send(lines.iter().collect::<Vec<_>>().join("\n"));
    });
    let r = finish(Running::with_stdout(child, rest), end, "the waiting run");
    r.assert_ok("the waiting run");
}

#[test]
fn without_a_name_server_runs_do_not_share_names() {
    let ns = NameServerProcess::start(pmixrun_bin(), DEADLINE);
    let client = names_client().display().to_string();
    let rendezvous = rendezvous_bin();
    let service = "pmix-rs.example.rendezvous";
    let server = spawn(pmixrun(&[
        "--nameserver-uri",
        &ns.uri,
        &rendezvous,
        "server",
    ]));
    // Once a run through the name server finds the service published...
    let seen = run(
        pmixrun(&[
            "--nameserver-uri",
            &ns.uri,
            &client,
            "expect-present",
            service,
        ]),
        "lookup through the name server",
    );
    seen.assert_ok("lookup through the name server");
    // ...a run without it does not, even searching GLOBAL.
    let lone = run(pmixrun(&[&client, "expect-absent", service]), "lone lookup");
    lone.assert_ok("lookup without the name server");
    // The service is still there for a client that uses the name server.
    let c = run(
        pmixrun(&["--nameserver-uri", &ns.uri, &rendezvous, "client"]),
        "client",
    );
    c.assert_ok("client");
    finish(server, Instant::now() + DEADLINE, "server").assert_ok("server");
    ns.stop();
}

#[test]
fn the_rendezvous_example_across_two_runs() {
    let ns = NameServerProcess::start(pmixrun_bin(), DEADLINE);
    let bin = rendezvous_bin();
    let end = Instant::now() + DEADLINE;
    // As its doc says: the server in the background, then the client.
    let server = spawn(pmixrun(&[
        "--nameserver-uri",
        &ns.file_spec(),
        &bin,
        "server",
    ]));
    let client = spawn(pmixrun(&[
        "--nameserver-uri",
        &ns.file_spec(),
        &bin,
        "client",
    ]));
    let client = finish(client, end, "client");
    let server = finish(server, end, "server");
    client.assert_ok("client");
    server.assert_ok("server");
    // server <proc>: <client proc> connected to tcp://127.0.0.1:<port>
    // client <proc>: <server proc> answered at tcp://127.0.0.1:<port>
    let s = server.stdout.trim_end();
    let c = client.stdout.trim_end();
    let (s_proc, rest) = s
        .strip_prefix("server ")
        .and_then(|r| r.split_once(": "))
        .unwrap_or_else(|| panic!("server said {s:?}"));
    let (s_peer, s_port) = rest
        .split_once(" connected to ")
        .unwrap_or_else(|| panic!("server said {s:?}"));
    let (c_proc, rest) = c
        .strip_prefix("client ")
        .and_then(|r| r.split_once(": "))
        .unwrap_or_else(|| panic!("client said {c:?}"));
    let (c_peer, c_port) = rest
        .split_once(" answered at ")
        .unwrap_or_else(|| panic!("client said {c:?}"));
    assert_eq!(s_peer, c_proc, "the server met another client");
    assert_eq!(c_peer, s_proc, "the client met another server");
    assert_eq!(s_port, c_port);
    assert!(s_port.starts_with("tcp://127.0.0.1:"), "{s_port}");
    assert_ne!(
        s_proc.rsplit_once(':').map(|p| p.0),
        c_proc.rsplit_once(':').map(|p| p.0),
        "both ends in one namespace"
    );
    ns.stop();
}

// ---- connect across runs ---------------------------------------------------------------

/// Where a run's processes are: pmixrun's own node, or logical nodes of this machine (a
/// root and a daemon per node, `--launcher local --host HOSTS`).
#[derive(Clone, Copy)]
enum Nodes {
    One,
    Logical(&'static str),
}

/// Two pmixrun runs of `pmix-dyn-client publish-connect` sharing a one-session name server:
/// the first (2 ranks) and the second (1 rank) find each other's namespace by publish/lookup
/// and connect; `extra` is appended to both command lines.
fn connect_two_runs(extra: &[&str]) -> (Run, Run) {
    connect_runs((2, Nodes::One), (1, Nodes::One), extra)
}

/// [`connect_two_runs`] with `first` and `second` ranks and nodes.
fn connect_runs(first: (u32, Nodes), second: (u32, Nodes), extra: &[&str]) -> (Run, Run) {
    let ns = NameServerProcess::start_with(pmixrun_bin(), &["--one-session"], DEADLINE);
    let client = workspace_bin("pmix-dyn-client").display().to_string();
    let end = Instant::now() + DEADLINE;
    let args = |side: &str, (n, nodes): (u32, Nodes), other: u32| {
        let mut a = vec!["--nameserver-uri".to_owned(), ns.uri.clone()];
        if let Nodes::Logical(hosts) = nodes {
            a.extend(["--launcher", "local", "--host", hosts].map(str::to_owned));
        }
        a.extend(["-n".to_owned(), n.to_string(), client.clone()]);
        a.extend([
            "publish-connect".to_owned(),
            side.to_owned(),
            other.to_string(),
        ]);
        a.extend(extra.iter().map(|s| (*s).to_owned()));
        a
    };
    let (first, second) = (
        args("first", first, second.0),
        args("second", second, first.0),
    );
    let (what_first, what_second) = (strs(&first).join(" "), strs(&second).join(" "));
    let first = spawn(pmixrun(&strs(&first)));
    let second = spawn(pmixrun(&strs(&second)));
    let first = finish(first, end, &what_first);
    let second = finish(second, end, &what_second);
    ns.stop();
    (first, second)
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The lines of a run's output, sorted (its ranks print in any order).
fn sorted_lines(r: &Run) -> Vec<&str> {
    let mut v: Vec<&str> = r.stdout.lines().collect();
    v.sort_unstable();
    v
}

/// Checks that every process of both runs connected, fenced and disconnected (each checks
/// that after the connect it holds the other run's job size and the value every process of
/// the other run committed, and after the fence the second value).
fn assert_met(first: &Run, second: &Run, sizes: (u32, u32)) {
    assert!(
        first.status.success() && second.status.success(),
        "first run: {first:#?}\nsecond run: {second:#?}"
    );
    let expected = |side: &str, n: u32, other: u32| {
        let mut v: Vec<String> = (0..n)
            .map(|r| format!("{side} {r}: met {other} processes by lookup, connected and fenced"))
            .collect();
        v.extend((0..n).map(|_| "ok".to_owned()));
        v.sort_unstable();
        v
    };
    assert_eq!(
        sorted_lines(first),
        expected("first", sizes.0, sizes.1),
        "{first:#?}"
    );
    assert_eq!(
        sorted_lines(second),
        expected("second", sizes.1, sizes.0),
        "{second:#?}"
    );
}

/// Checks that the first run's connect failed with its timeout in every process, and that
/// the second run's process never connected.
fn assert_stood_up(first: &Run, second: &Run) {
    assert_let_down(
        first,
        second,
        "stood up, the connect failed with ERR_TIMEOUT",
    );
}

/// Checks that the first run's 2 processes said `first <rank>: <failure>`, and that the second
/// run's process never connected.
fn assert_let_down(first: &Run, second: &Run, failure: &str) {
    assert!(
        first.status.success() && second.status.success(),
        "first run: {first:#?}\nsecond run: {second:#?}"
    );
    assert_eq!(
        sorted_lines(first),
        [
            &format!("first 0: {failure}"),
            &format!("first 1: {failure}"),
            "ok",
            "ok"
        ],
        "{first:#?}"
    );
    assert_eq!(
        sorted_lines(second),
        ["ok", "second 0: never connected"],
        "{second:#?}"
    );
}

#[test]
fn pmix_rs_processes_of_two_runs_connect_and_disconnect_through_a_name_server() {
    let (first, second) = connect_two_runs(&[]);
    assert_met(&first, &second, (2, 1));
}

#[test]
fn a_connect_to_a_run_that_never_comes_fails_with_its_timeout() {
    // The second run's process finds the first but never connects; it leaves once the first
    // says its connect failed.
    let (first, second) = connect_two_runs(&["stood-up"]);
    assert_stood_up(&first, &second);
}

#[test]
fn a_run_across_two_logical_nodes_connects_fences_and_disconnects_with_a_one_node_run() {
    // The first run's ranks are on two nodes: each daemon sends its part to the root, which
    // meets the other run at the name server and brings the answer back down to both.
    let first = (2, Nodes::Logical("xa:1,xb:1"));
    let (first, second) = connect_runs(first, (1, Nodes::One), &[]);
    assert_met(&first, &second, (2, 1));
}

#[test]
fn two_runs_each_across_two_logical_nodes_connect_fence_and_disconnect() {
    let first = (2, Nodes::Logical("xa:1,xb:1"));
    let second = (3, Nodes::Logical("xc:1,xd:2"));
    let (first, second) = connect_runs(first, second, &[]);
    assert_met(&first, &second, (2, 3));
}

#[test]
fn a_run_across_two_logical_nodes_whose_connect_nobody_answers_fails_with_its_timeout() {
    let first = (2, Nodes::Logical("xa:1,xb:1"));
    let (first, second) = connect_runs(first, (1, Nodes::One), &["stood-up"]);
    assert_stood_up(&first, &second);
}

#[test]
fn a_connect_whose_other_run_leaves_fails_instead_of_waiting() {
    // No PMIX_TIMEOUT: the second run leaves once the first found it, and the first's connect
    // fails with the status the name server's rendezvous gives (the root passing it on to
    // both daemons in the two-node run).
    for nodes in [Nodes::One, Nodes::Logical("xa:1,xb:1")] {
        let (first, second) = connect_runs((2, nodes), (1, Nodes::One), &["left"]);
        assert_let_down(&first, &second, "the other run left, the connect failed");
    }
}

#[test]
fn a_connect_with_a_namespace_no_run_has_fails_on_one_node_and_across_nodes_alike() {
    // Without a name server no other run is reachable (ERR_BAD_PARAM, from pmixrun's host or
    // its root); with one, the name server knows no run owning it (ERR_NOT_FOUND).
    let ns = NameServerProcess::start(pmixrun_bin(), DEADLINE);
    let client = workspace_bin("pmix-dyn-client").display().to_string();
    for (names, status) in [(false, "ERR_BAD_PARAM"), (true, "ERR_NOT_FOUND")] {
        for hosts in [None, Some("xa:1,xb:1")] {
            let mut args = Vec::new();
            if names {
                args.extend(["--nameserver-uri", &ns.uri]);
            }
            if let Some(h) = hosts {
                args.extend(["--launcher", "local", "--host", h]);
            }
            args.extend(["-n", "2", &client, "connect-nowhere"]);
            let what = args.join(" ");
            let r = run(pmixrun(&args), &what);
            r.assert_ok(&what);
            let mut want = vec![
                format!("0: connect-nowhere failed with {status}"),
                format!("1: connect-nowhere failed with {status}"),
                "ok".to_owned(),
                "ok".to_owned(),
            ];
            want.sort_unstable();
            assert_eq!(sorted_lines(&r), want, "{what}: {r:#?}");
        }
    }
    ns.stop();
}
