//! Query, log and job control, with the lifecycle events they bring, under `pmixrun`, from
//! every client library: pmix-rs's (`pmix-control-client`), libpmix 4.2 and 5.0.11
//! (`openpmix/pmix_control.c`, compiled here against 4.2), the same program on pmix-capi
//! (pmix-rs's `libpmix.so.2`) and python3-pmix (`openpmix/pmix_control.py`),
//! on one node and across two logical nodes of this machine (`--launcher local`). The three
//! print the same lines; every run is bounded by a deadline.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pmix_tests::pmixrun_bin;
use pmix_tests::{
    Output, Running, assert_lines, assert_ok, cargo_build, openpmix_program,
    openpmix_python_client, openpmix_sources, profile_dir, under_pmix_host,
};

/// For one run; each takes well under a second.
const DEADLINE: Duration = Duration::from_secs(30);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Lib {
    Rust,
    /// `pmix_control.c` with Debian's libpmix 4.2.
    C,
    /// `pmix_control.c` with Open MPI 5's OpenPMIx 5.0.11.
    CWheel,
    /// `pmix_control.c` with pmix-capi, pmix-rs's `libpmix.so.2`.
    CCapi,
    Python,
}

/// The command line of the client program of `lib`.
fn program(lib: Lib) -> Vec<OsString> {
    match lib {
        Lib::Rust => {
            static BIN: OnceLock<PathBuf> = OnceLock::new();
            let bin = BIN.get_or_init(|| {
                cargo_build(&["-p", "pmix-tests", "--bin", "pmix-control-client"]);
                profile_dir().join("pmix-control-client")
            });
            vec![bin.into()]
        }
        Lib::C | Lib::CWheel | Lib::CCapi => vec![openpmix_program("pmix_control").into()],
        Lib::Python => {
            let (python, _) = openpmix_python_client();
            vec![
                python.into(),
                openpmix_sources().join("pmix_control.py").into(),
            ]
        }
    }
}

/// `pmixrun -n 2 <client> <args>`, on two logical nodes `a` and `b` when `nodes`.
fn run(lib: Lib, nodes: bool, args: &[&str]) -> Output {
    run_n(lib, nodes, 2, args)
}

/// [`run`] with `n` ranks; across nodes, room for two more on `b`.
fn run_n(lib: Lib, nodes: bool, n: u32, args: &[&str]) -> Output {
    run_with(lib, nodes, n, &[], args)
}

/// [`run_n`] with pmixrun options `opts`.
fn run_with(lib: Lib, nodes: bool, n: u32, opts: &[&str], args: &[&str]) -> Output {
    run_in(lib, nodes, n, opts, &[], args)
}

/// [`run_with`] with environment variables `env` for pmixrun.
fn run_in(
    lib: Lib,
    nodes: bool,
    n: u32,
    opts: &[&str],
    env: &[(&str, &Path)],
    args: &[&str],
) -> Output {
    let mut cmd = Command::new(pmixrun_bin());
    cmd.envs(env.iter().copied());
    if nodes {
        cmd.args(["--launcher", "local", "--host", "a:1,b:3"]);
    }
    cmd.args(opts);
    cmd.args(["-n", &n.to_string()])
        .args(program(lib))
        .args(args)
        .env_remove("PMIXRS_NAMESERVER")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match lib {
        Lib::CWheel => pmix_tests::use_ompi5_libpmix(&mut cmd),
        Lib::CCapi => pmix_tests::use_capi_libpmix(&mut cmd),
        _ => {}
    }
    let what = format!("{lib:?} client, nodes {nodes}: {}", args.join(" "));
    let out = Running::start(cmd, &what).finish(Instant::now() + DEADLINE, &what);
    assert_ok(&out, &what);
    out
}

/// `line` is a line of pmixrun's stderr.
fn assert_stderr_line(lib: Lib, out: &Output, line: &str) {
    assert!(
        out.stderr.lines().any(|l| l == line),
        "{lib:?}: no {line:?} in {out:#?}"
    );
}

/// Each rank's line, as both ranks print it.
fn both(f: impl Fn(u32) -> String) -> Vec<String> {
    (0..2).map(f).collect()
}

fn query(lib: Lib, nodes: bool) {
    let out = run(lib, nodes, &["query"]);
    let want = if lib == Lib::Python {
        both(|r| format!("query rank={r} has_own_nspace=1"))
    } else {
        // The process table has both ranks, this one with its own pid, program (as resolved
        // on its node), host name and state.
        both(|r| {
            format!(
                "query rank={r} has_own_nspace=1 ptable=2 own_pid=1 own_exe=1 own_host=1 \
                 own_state=1 nsinfo=1"
            )
        })
    };
    assert_lines(&out, &format!("{lib:?} query"), "query", want);
}

/// Under `pmixrun --pset red -n 2 ... : --pset blue -n 1 ...`, each rank finds both sets and
/// the members of its own, and a handler for `PROCESS_SET_DEFINE` it registers then (after
/// pmixrun defined the sets) hears of both.
fn psets(lib: Lib, nodes: bool) {
    let prog: Vec<String> = program(lib)
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut args = vec!["psets", ":", "--pset", "blue", "-n", "1"];
    args.extend(prog.iter().map(String::as_str));
    args.push("psets");
    let out = run_with(lib, nodes, 2, &["--pset", "red"], &args);
    let line = |r: u32, mine: &str, members: &str| {
        format!("psets rank={r} num=2 names=red,blue mine={mine} members={members} heard=red,blue")
    };
    let want = vec![
        line(0, "red", "0,1"),
        line(1, "red", "0,1"),
        line(2, "blue", "2"),
    ];
    assert_lines(&out, &format!("{lib:?} psets"), "psets", want);
}

/// `PMIX_QUERY_ATTRIBUTE_SUPPORT` answers with described `PMIX_REGATTR`s per function, and the
/// functions, as libpmix decodes them.
fn attrs(lib: Lib, nodes: bool) {
    let out = run(lib, nodes, &["attrs"]);
    let want = both(|r| format!("attrs rank={r} fence_collect=1 get_timeout=1 functions=1"));
    assert_lines(&out, &format!("{lib:?} attrs"), "attrs", want);
}

fn log(lib: Lib, nodes: bool) {
    let out = run(lib, nodes, &["log"]);
    assert_lines(&out, "log", "log", both(|r| format!("log rank={r} ok")));
    // On pmixrun's stderr, tagged with the source, and its node across nodes.
    for r in 0..2 {
        let at = if nodes { ["@a", "@b"][r] } else { "" };
        assert_stderr_line(lib, &out, &format!("[{r}{at}] log from rank {r}"));
    }
}

/// `PMIX_ERR_NOT_AVAILABLE`: no channel asked for could log.
const NOT_AVAILABLE: i32 = -64;

/// Syslog (to a socket of the test's, named by `PMIXRS_SYSLOG_SOCKET`), the job record (on
/// pmixrun's stderr) and email (not served); then syslog without a daemon listening.
fn channels(lib: Lib, nodes: bool) {
    use std::os::unix::net::UnixDatagram;
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("control")
        .join(format!("syslog-{lib:?}-{nodes}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let path = dir.join("log");
    let daemon = UnixDatagram::bind(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let env = [("PMIXRS_SYSLOG_SOCKET", path.as_path())];
    let out = run_in(lib, nodes, 2, &[], &env, &["channels"]);
    let want = both(|r| format!("channels rank={r} syslog=0 record=0 email={NOT_AVAILABLE}"));
    assert_lines(&out, "channels", "channels", want);
    let at = |r: usize| if nodes { ["@a", "@b"][r] } else { "" };
    for r in 0..2 {
        let line = format!("pmixrun: job record: [{r}{}] record from rank {r}", at(r));
        assert_stderr_line(lib, &out, &line);
    }
    // Sent before the run ended: waiting in the socket now.
    daemon
        .set_nonblocking(true)
        .unwrap_or_else(|e| panic!("{e}"));
    let mut got = Vec::new();
    let mut buf = [0u8; 512];
    while let Ok(n) = daemon.recv(&mut buf) {
        got.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    got.sort();
    // LOG_USER (1) * 8 + LOG_WARNING (4); the tag pmixrun[pid].
    let shapes: Vec<(bool, String)> = got
        .iter()
        .map(|d| {
            let tail = d.split_once("]: ").map_or("", |(_, t)| t);
            (d.starts_with("<12>pmixrun["), tail.to_owned())
        })
        .collect();
    let want: Vec<(bool, String)> = (0..2)
        .map(|r| (true, format!("[{r}{}] syslog from rank {r}", at(r))))
        .collect();
    assert_eq!(shapes, want, "{lib:?}: datagrams {got:?}");
    drop(daemon);
    // Nobody listening any more: syslog alone could not log.
    let out = run_in(lib, nodes, 2, &[], &env, &["channels"]);
    let want = both(|r| {
        format!("channels rank={r} syslog={NOT_AVAILABLE} record=0 email={NOT_AVAILABLE}")
    });
    assert_lines(&out, "channels", "channels", want);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The name `PMIx_Error_string` gives a status (`name` as libpmix 4.2 and pmix-rs spell it):
/// libpmix 5 and pmix-capi spell it as the C constant.
fn status_name(lib: Lib, name: &str, constant: &str) -> String {
    if matches!(lib, Lib::CWheel | Lib::CCapi) {
        constant
    } else {
        name
    }
    .to_owned()
}

fn unsupported(lib: Lib, nodes: bool) {
    let out = run(lib, nodes, &["unsupported"]);
    let status = status_name(lib, "NOT-SUPPORTED", "PMIX_ERR_NOT_SUPPORTED");
    let want = both(|r| format!("unsupported rank={r} status={status}"));
    assert_lines(&out, "unsupported", "unsupported", want);
}

/// Rank 0 has rank 1 killed, or sent SIGTERM, and hears of its end; the run succeeds.
fn kill(lib: Lib, nodes: bool) {
    for (scenario, code) in [("kill", 137), ("signal", 143)] {
        let out = run(lib, nodes, &[scenario]);
        let want = vec![format!("{scenario} rank=0 affected=1 exit={code}")];
        assert_lines(&out, scenario, scenario, want);
    }
}

/// Rank 0 has rank 1, which ignores SIGTERM, terminated: the SIGKILL that follows SIGTERM
/// after `--grace` ends it.
fn terminate(lib: Lib, nodes: bool) {
    let out = run_with(lib, nodes, 2, &["--grace", "0.5"], &["terminate"]);
    let want = vec!["terminate rank=0 affected=1 exit=137".to_owned()];
    assert_lines(&out, "terminate", "terminate", want);
    let said = "pmixrun: rank 0 asked for the termination (SIGCONT, SIGTERM, SIGKILL after 500 ms) \
                of 1 process(es)";
    assert_stderr_line(lib, &out, said);
}

/// What each rank registered for cleanup is gone once the run is over.
fn cleanup(lib: Lib, nodes: bool) {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("control")
        .join(format!("{lib:?}-{nodes}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let keep = dir.join("keep");
    std::fs::write(&keep, "not registered").unwrap_or_else(|e| panic!("{e}"));
    let d = dir
        .to_str()
        .unwrap_or_else(|| panic!("a path that is not UTF-8"));
    let out = run(lib, nodes, &["cleanup", d]);
    assert_lines(
        &out,
        "cleanup",
        "cleanup",
        both(|r| format!("cleanup rank={r} registered")),
    );
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{e}"))
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(left, [OsString::from("keep")], "{lib:?}: {out:#?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A spawning process hears of its children's ends and of their job's, as it asked.
fn watch(lib: Lib, nodes: bool) {
    let out = run_n(lib, nodes, 1, &["watch"]);
    let status = status_name(lib, "SUCCESS", "PMIX_SUCCESS");
    let want = vec![format!("watch rank=0 ends=2 job_end={status}")];
    assert_lines(&out, "watch", "watch", want);
}

/// A spawned job's end, kept by the server, reaches a handler registered after it ended.
fn late_watch(lib: Lib, nodes: bool) {
    let out = run_n(lib, nodes, 1, &["late-watch"]);
    let status = status_name(lib, "SUCCESS", "PMIX_SUCCESS");
    let want = vec![format!("late-watch rank=0 job_end={status}")];
    assert_lines(&out, "late-watch", "late-watch", want);
}

#[test]
fn pmix_rs_client_queries_logs_and_controls_the_job() {
    for nodes in [false, true] {
        query(Lib::Rust, nodes);
        log(Lib::Rust, nodes);
        unsupported(Lib::Rust, nodes);
        kill(Lib::Rust, nodes);
        cleanup(Lib::Rust, nodes);
    }
    for nodes in [false, true] {
        watch(Lib::Rust, nodes);
        late_watch(Lib::Rust, nodes);
    }
    // Handlers run where the registration placed them.
    let out = run(Lib::Rust, false, &["order"]);
    let want = both(|r| format!("order rank={r} first,pre,plain,after,last"));
    assert_lines(&out, "order", "order", want);
}

#[test]
fn libpmix_client_queries_logs_and_controls_the_job() {
    libpmix_client(Lib::C);
}

/// The same program with the libpmix Open MPI 5 brings (`LD_LIBRARY_PATH`).
#[test]
fn libpmix_5_client_queries_logs_and_controls_the_job() {
    libpmix_client(Lib::CWheel);
}

/// The same program on pmix-capi, pmix-rs's `libpmix.so.2` (`PMIx_Query_info`, `PMIx_Log`,
/// `PMIx_Job_control` and the events they bring), printing what it prints on libpmix.
#[test]
fn libpmix_program_on_pmix_capi_queries_logs_and_controls_the_job() {
    libpmix_client(Lib::CCapi);
}

fn libpmix_client(lib: Lib) {
    for nodes in [false, true] {
        query(lib, nodes);
        psets(lib, nodes);
        attrs(lib, nodes);
        log(lib, nodes);
        channels(lib, nodes);
        unsupported(lib, nodes);
        kill(lib, nodes);
        terminate(lib, nodes);
        cleanup(lib, nodes);
        watch(lib, nodes);
        late_watch(lib, nodes);
    }
}

#[test]
fn python3_pmix_client_queries_logs_and_controls_the_job() {
    query(Lib::Python, false);
    log(Lib::Python, false);
    unsupported(Lib::Python, false);
    cleanup(Lib::Python, false);
}

/// pmix-rs's client speaks `LOG` and `JOB_CONTROL` as a real OpenPMIx 4.2 server understands
/// them (`pmix_host`, on libpmix's server library, which logs itself and has no job control).
#[test]
fn pmix_rs_client_logs_and_asks_for_job_control_under_a_real_openpmix_server() {
    let client = program(Lib::Rust).remove(0);
    for (scenario, want) in [
        ("log", both(|r| format!("log rank={r} ok"))),
        (
            "unsupported",
            both(|r| format!("unsupported rank={r} status=NOT-SUPPORTED")),
        ),
    ] {
        let mut cmd = under_pmix_host(2, 20, Path::new(&client), &[scenario]);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let what = format!("pmix_host -n 2 pmix-control-client {scenario}");
        let out = Running::start(cmd, &what).finish(Instant::now() + DEADLINE, &what);
        assert_ok(&out, &what);
        assert_lines(&out, &what, scenario, want);
    }
}

/// A rank floods `PMIx_Log` (non-blocking, 256 KiB each) while nobody reads pmixrun's stderr:
/// what waits for the supervisor is bounded (16 MiB per way in), the rest is refused at once
/// with `ERR_OUT_OF_RESOURCE` rather than held (before, every request was queued: 1,500 of
/// them held 377 MiB); once stderr is read, every request is answered and each accepted
/// one written. On one node and through a daemon (logical nodes).
#[test]
fn a_log_flood_while_stderr_is_not_read_is_bounded() {
    use std::io::{BufRead, BufReader, Read};
    const N: usize = 400;
    const SIZE: usize = 256 * 1024;
    for nodes in [false, true] {
        // The rank says it sent everything through a FIFO: pmixrun's own output may be held
        // up behind the unread log lines.
        let fifo =
            std::env::temp_dir().join(format!("pmixrs-log-flood-{}-{nodes}", std::process::id()));
        let _ = std::fs::remove_file(&fifo);
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .expect("mkfifo");
        let mut cmd = Command::new(pmixrun_bin());
        if nodes {
            // Rank 0 on `b`: its requests come through its daemon.
            cmd.args(["--launcher", "local", "--host", "b:1"]);
        }
        cmd.args(["-n", "1"])
            .args(program(Lib::Rust))
            .args(["log-flood", &N.to_string(), &SIZE.to_string()])
            .arg(&fifo)
            .env_remove("PMIXRS_NAMESERVER")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("pmixrun");
        let deadline = Instant::now() + Duration::from_secs(120);
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        // Stderr is left unread until every request went out.
        let (sent_tx, sent_rx) = std::sync::mpsc::channel();
        let at = fifo.clone();
        std::thread::spawn(move || {
            let _ = sent_tx.send(std::fs::read_to_string(&at));
        });
        let left = deadline.saturating_duration_since(Instant::now());
        let sent = sent_rx.recv_timeout(left);
        let _ = std::fs::remove_file(&fifo);
        if !matches!(&sent, Ok(Ok(s)) if s == "sent\n") {
            let _ = child.kill();
            panic!("the rank never said it sent its logs (nodes {nodes}): {sent:?}");
        }
        let mut lines = Vec::new();
        let mut stderr = child.stderr.take().expect("stderr");
        let reader = std::thread::spawn(move || {
            let mut all = String::new();
            let _ = stderr.read_to_string(&mut all);
            all
        });
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        let (status_tx, status_rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = status_tx.send(child.wait());
        });
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(Ok(status)) = status_rx.recv_timeout(left) else {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
            panic!("pmixrun did not end (nodes {nodes}): {lines:?}");
        };
        let err = reader.join().expect("stderr reader");
        lines.extend(rx.try_iter());
        assert!(status.success(), "nodes {nodes}: {status}: {lines:?}");
        let result = lines
            .iter()
            .find_map(|l| l.strip_prefix("log-flood ok="))
            .unwrap_or_else(|| panic!("no result (nodes {nodes}): {lines:?}"));
        let nums: Vec<usize> = result
            .split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().expect("a count"))
            .collect();
        let (ok, refused, other) = (nums[0], nums[1], nums[2]);
        assert_eq!((ok + refused, other), (N, 0), "nodes {nodes}: {result}");
        assert!(
            refused > 0,
            "nodes {nodes}: nothing refused, all held: {result}"
        );
        assert!(ok > 0, "nodes {nodes}: nothing logged: {result}");
        let written = err.lines().filter(|l| l.ends_with(&"y".repeat(64))).count();
        assert_eq!(
            written, ok,
            "nodes {nodes}: the accepted requests are all written"
        );
    }
}
