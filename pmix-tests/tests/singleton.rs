//! Singletons, end to end: `pmix-singleton-client` started as a plain process, with no PMIx
//! server in its environment (put/commit/fence/get, names, job data, what needs a server),
//! init after finalize, a singleton spawning children through its private server (pmixrun
//! adopting it), losing that server, and an environment naming a server that is not there;
//! and libpmix clients finalizing and initializing again under pmixrun (`openpmix/pmix_cycle.c`).
//! Every run is bounded by a deadline.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use pmix_tests::pmixrun_bin;
use pmix_tests::{Output, Running, clean_command, collect_text, openpmix_program, workspace_bin};

const DEADLINE: Duration = Duration::from_secs(60);

/// pmixrun, built once per test process next to the test programs (where a singleton looks
/// for it first after `PMIXRS_PMIXRUN`).
fn client() -> PathBuf {
    workspace_bin("pmix-singleton-client")
}

/// Runs the client with `args` and `env` added to a clean environment, within [`DEADLINE`].
/// Returns its pid and what it did.
fn run(args: &[&str], env: &[(&str, &str)]) -> (u32, Output) {
    let mut cmd: Command = clean_command(&client());
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("starting pmix-singleton-client");
    let pid = child.id();
    let stdout = collect_text(child.stdout.take());
    let out = Running::with_stdout(child, stdout).finish(
        Instant::now() + DEADLINE,
        &format!("pmix-singleton-client {args:?}"),
    );
    (pid, out)
}

fn assert_passed(out: &Output, what: &str) {
    assert!(
        out.status.success() && out.stdout.lines().last() == Some("ok"),
        "{what}: {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
}

fn has_line(out: &Output, line: &str) -> bool {
    out.stdout.lines().any(|l| l == line)
}

fn assert_line(out: &Output, line: &str) {
    assert!(
        has_line(out, line),
        "no line {line:?} in\n{}\nstderr:\n{}",
        out.stdout,
        out.stderr
    );
}

fn hostname() -> String {
    nix::unistd::gethostname()
        .expect("host name")
        .into_string()
        .expect("a UTF-8 host name")
}

#[test]
fn a_plain_process_is_a_singleton_with_a_job_of_its_own() {
    let (pid, out) = run(&["basics"], &[]);
    assert_passed(&out, "basics");
    let host = hostname();
    let ns = format!("singleton.{host}.{pid}");
    assert_line(&out, &format!("singleton nspace={ns} rank=0 host={host}"));
    for (key, value) in [
        ("pmix.job.size", "1"),
        ("pmix.univ.size", "1"),
        ("pmix.local.size", "1"),
        ("pmix.max.size", "1"),
        ("pmix.num.nodes", "1"),
        ("pmix.lrank", "0"),
        ("pmix.nrank", "0"),
        ("pmix.appnum", "0"),
        ("pmix.rank", "0"),
        ("pmix.nodeid", "0"),
        ("pmix.lpeers", "0"),
    ] {
        assert_line(&out, &format!("{key}={value}"));
    }
    assert_line(&out, &format!("pmix.nspace={ns}"));
    assert_line(&out, &format!("pmix.singleton={ns}"));
    assert_line(&out, "data ok");
    assert_line(&out, "names ok");
    // What needs other processes fails, saying the server is unreachable.
    for call in ["fence-other", "connect-other", "get-other", "query"] {
        assert_line(&out, &format!("{call}=ERR_UNREACH"));
    }
}

#[test]
fn a_singleton_inits_again_after_finalize() {
    let (_, out) = run(&["reinit", "3"], &[]);
    assert_passed(&out, "reinit");
    assert_line(&out, "cycles=3");
}

#[test]
fn a_singleton_spawns_children_through_a_private_server() {
    let pmixrun = pmixrun_bin();
    // Found through the variable, and next to the program (where the tests' binaries are).
    for env in [
        vec![("PMIXRS_PMIXRUN", pmixrun.to_str().expect("a UTF-8 path"))],
        vec![],
    ] {
        let (pid, out) = run(&["spawn", "2"], &env);
        assert_passed(&out, "spawn");
        let ns = format!("singleton.{}.{pid}", hostname());
        let children = format!("{ns}.1");
        assert_line(&out, &format!("parent nspace={ns} spawned={children}"));
        for r in 0..2 {
            assert_line(
                &out,
                &format!("child rank={r} parent={ns}:0 data=\"from {ns}:0\" port=port-7"),
            );
            assert_line(
                &out,
                &format!("parent read child.{r}=Uint32({r}) from {children}:{r}"),
            );
        }
        let heard: Vec<String> = (0..2).map(|r| format!("{children}:{r}")).collect();
        assert_line(&out, &format!("parent heard {}", heard.join(" ")));
        // The children said ok too, through the private server's output.
        let oks = out.stdout.lines().filter(|l| *l == "ok").count();
        assert_eq!(oks, 3, "{}", out.stdout);
    }
}

#[test]
fn losing_the_private_server_fails_what_waits_and_what_follows() {
    pmixrun_bin();
    let (_, out) = run(&["lose-server"], &[]);
    assert_passed(&out, "lose-server");
    assert_line(&out, "waiting lookup=ERR_LOST_CONNECTION");
    assert_line(&out, "fence after=ERR_LOST_CONNECTION");
    assert_line(&out, "job size after=1");
}

#[test]
fn a_server_named_but_absent_is_an_error_not_a_singleton() {
    let dir = std::env::temp_dir().join(format!("pmix-singleton-absent-{}", std::process::id()));
    let socket = format!("unix:{}", dir.join("gone.sock").display());
    let id = [("PMIX_NAMESPACE", "job"), ("PMIX_RANK", "0")];
    let native = [
        ("PMIXRS_SERVER_URI", socket.as_str()),
        ("PMIXRS_SECRET", "000102030405060708090a0b0c0d0eff"),
        id[0],
        id[1],
    ];
    let (_, out) = run(&["init-status"], &native);
    assert_passed(&out, "native server absent");
    assert_line(&out, "init=ERR_UNREACH");
    // An OpenPMIx server's URI whose port nobody listens on (bound, then let go).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let uri = format!("srv.0;tcp4://127.0.0.1:{port}");
    let (_, out) = run(
        &["init-status"],
        &[("PMIX_SERVER_URI41", &uri), id[0], id[1]],
    );
    assert_passed(&out, "OpenPMIx server absent");
    assert_line(&out, "init=ERR_UNREACH");
    // A name without a server is a broken rendezvous.
    let (_, out) = run(&["init-status"], &id);
    assert_passed(&out, "namespace without a server");
    assert_line(&out, "init=ERR_INIT");
}

#[test]
fn libpmix_clients_init_again_after_finalize_under_pmixrun() {
    let program = openpmix_program("pmix_cycle");
    let mut cmd = clean_command(pmixrun_bin());
    cmd.args(["--timeout", "30", "-n", "3"])
        .arg(&program)
        .arg("3");
    let out = Running::start(cmd, "pmixrun -n 3 pmix_cycle 3")
        .finish(Instant::now() + DEADLINE, "pmixrun -n 3 pmix_cycle 3");
    assert!(
        out.status.success(),
        "{:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
    for r in 0..3 {
        assert_line(&out, &format!("cycled rank={r} size=3 cycles=3"));
    }
}

#[test]
fn a_singleton_killed_takes_its_spawned_children_and_private_server_with_it() {
    use std::io::{BufRead, BufReader};
    pmixrun_bin();
    let mut cmd = clean_command(&client());
    cmd.arg("orphan");
    let mut child = cmd.spawn().expect("starting pmix-singleton-client orphan");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    let stdout = child.stdout.take().expect("piped stdout");
    // Lines as they come, and the end of the stream (every writer gone: the singleton, its
    // private server, which forwards the child's output).
    let (tx, rx) = crossbeam_channel::unbounded();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = tx.send(Some(line));
        }
        let _ = tx.send(None);
    });
    let end = Instant::now() + DEADLINE;
    let (mut child_pid, mut ready) = (None, false);
    while child_pid.is_none() || !ready {
        match rx.recv_deadline(end) {
            Ok(Some(line)) if line == "parent ready" => ready = true,
            Ok(Some(line)) => {
                if let Some(p) = line.strip_prefix("child pid=") {
                    child_pid = Some(p.parse::<i32>().expect("a pid"));
                }
            }
            other => {
                let _ = child.kill();
                panic!("the singleton and its child did not get ready: {other:?}");
            }
        }
    }
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).expect("killing the singleton");
    let _ = child.wait();
    // The private server sees the singleton's end, stops the child and ends.
    loop {
        match rx.recv_deadline(Instant::now() + Duration::from_secs(30)) {
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(_) => panic!("the private server or the child outlived the singleton by 30 s"),
        }
    }
    let child_pid = child_pid.expect("the child's pid");
    let state = std::fs::read_to_string(format!("/proc/{child_pid}/stat")).unwrap_or_default();
    // Gone, or a zombie waiting for whoever inherited it.
    let state = state.rsplit_once(") ").map(|(_, rest)| &rest[..1]);
    assert!(
        matches!(state, None | Some("Z")),
        "the spawned child {child_pid} still runs: state {state:?}"
    );
}

#[test]
fn a_spawn_whose_private_server_cannot_start_fails_and_the_singleton_goes_on() {
    let (_, out) = run(
        &["no-server-to-start"],
        &[("PMIXRS_PMIXRUN", "/nonexistent/pmixrun")],
    );
    assert_passed(&out, "no-server-to-start");
    assert_line(&out, "spawn=ERR_UNREACH");
}
