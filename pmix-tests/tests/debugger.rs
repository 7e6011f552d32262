//! Debuggers (`docs/TOOLS.md`, "Debuggers"): `pmixrun --stop-in-init -n 4 APP` holds every
//! process in its PMIx init (pmix-rs clients, libpmix 4.2 and 5.0.11 clients, an Open MPI 5
//! program) until a debugger tool (Rust, libpmix 4.2 and 5.0.11, python3-pmix, the libpmix
//! one on pmix-rs's `libpmix.so.2`) releases it.
//!
//! Each debugger (`pmix-debugger`, `openpmix/pmix_debugger.c`, `openpmix/pmix_debugger.py`)
//! waits for the job's `READY_FOR_DEBUG` (every process waits in init), prints the process
//! table and waits for a command on stdin. The held state is seen, not guessed: every process
//! checks, when its init returns, that a mark file exists which the test creates only after the
//! debugger saw the whole job waiting and just before it has the release sent; an init that
//! returned early fails its process, and so the run. Killing the debugger instead fails the
//! run (the held processes are aborted) within the deadline; a debugger's job control kills
//! the held job; `pmixps` lists the held job with its processes' pids. Every step has a
//! deadline, none waits on a sleep.
//!
//! The main scenarios run on two logical nodes too ([`TWO_NODES`]: a root and two daemons on
//! this machine, two ranks each): every node's processes are held, the debugger attaches to
//! the root and releases, or by dying fails, all of them, and its daemons go to each node.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, unbounded};
use pmix_tests::{
    Output, Running, assert_capi_libpmix_loaded, cargo_build, collect_text, compile_c,
    compiled_programs_dir, keyed_lines, openpmix_program, openpmix_python_client, openpmix_sources,
    pmixrun_bin, profile_dir, use_capi_libpmix, use_ompi5_libpmix,
};

/// For one whole scenario.
const DEADLINE: Duration = Duration::from_secs(120);

/// The processes of each job.
const N: usize = 4;

/// pmixrun's arguments for a run on two logical nodes of two slots each.
const TWO_NODES: [&str; 4] = ["--launcher", "local", "--host", "n1:2,n2:2"];

/// The node each rank of a held job runs on: `TWO_NODES` fills n1 first.
const NODE_OF_RANK: [&str; N] = ["n1", "n1", "n2", "n2"];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Debugger {
    /// `pmix-debugger`, on the Rust `Tool`.
    Rust,
    /// `pmix_debugger.c` on Debian's libpmix 4.2.
    C,
    /// `pmix_debugger.c` on Open MPI 5's OpenPMIx 5.0.11.
    CWheel,
    /// `pmix_debugger.c` (built against Debian's libpmix 4.2) on pmix-rs's `libpmix.so.2`
    /// (`pmix-capi`), which it must have loaded.
    COnCapi,
    /// `pmix_debugger.py` on python3-pmix (OpenPMIx 4.2).
    Python,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum App {
    /// `pmix-debuggee`, on `pmix_client::Client`.
    Rust,
    /// `pmix_debuggee.c` on libpmix 4.2.
    C,
    /// `pmix_debuggee.c` on OpenPMIx 5.0.11.
    CWheel,
    /// `mpi/debuggee.c` built with Open MPI 5.
    Ompi5,
}

fn bin(name: &str) -> PathBuf {
    cargo_build(&["-p", "pmix-tests", "--bin", name]);
    profile_dir().join(name)
}

fn rust_bin(name: &'static str) -> &'static Path {
    static DEBUGGER: OnceLock<PathBuf> = OnceLock::new();
    static DEBUGGEE: OnceLock<PathBuf> = OnceLock::new();
    static PMIXPS: OnceLock<PathBuf> = OnceLock::new();
    match name {
        "pmix-debugger" => DEBUGGER.get_or_init(|| bin(name)),
        "pmix-debuggee" => DEBUGGEE.get_or_init(|| bin(name)),
        _ => PMIXPS.get_or_init(|| {
            cargo_build(&["-p", "pmixps", "--bin", "pmixps"]);
            profile_dir().join("pmixps")
        }),
    }
}

/// `mpi/debuggee.c` compiled with Open MPI 5's `mpicc` (`PMIXRS_OMPI5`, default `/opt/ompi5`).
fn ompi5_debuggee() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let prefix: PathBuf = std::env::var_os("PMIXRS_OMPI5")
            .unwrap_or_else(|| "/opt/ompi5".into())
            .into();
        let mpicc = prefix.join("bin").join("mpicc");
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("mpi")
            .join("debuggee.c");
        let cflags: Vec<String> = ["-O1", "-Wall", "-Wextra", "-Werror"]
            .map(String::from)
            .to_vec();
        compile_c(
            &mpicc,
            &cflags,
            &src,
            &[],
            &compiled_programs_dir("ompi5"),
            "debuggee",
        )
        .unwrap_or_else(|e| panic!("Open MPI 5: {e}"))
    })
}

/// A `pmixrun --stop-in-init` job of [`N`] processes of `app` (on one node, or with `nodes`
/// the node arguments), and its mark file.
struct Held {
    run: Option<Running>,
    pid: u32,
    dir: PathBuf,
    mark: PathBuf,
}

impl Held {
    fn start(app: App, nodes: &[&str]) -> Held {
        let dir = std::env::temp_dir().join(format!(
            "pmixrs-debugger.{}.{}",
            std::process::id(),
            unique()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let mark = dir.join("released");
        let program: PathBuf = match app {
            App::Rust => rust_bin("pmix-debuggee").to_path_buf(),
            App::C | App::CWheel => openpmix_program("pmix_debuggee"),
            App::Ompi5 => ompi5_debuggee().to_path_buf(),
        };
        let mut cmd = Command::new(pmixrun_bin());
        cmd.args(["--stop-in-init", "--timeout", "110", "-n", &N.to_string()])
            .args(nodes)
            .arg(&program)
            .arg(&mark)
            .env_remove("PMIXRS_NAMESERVER")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if app == App::CWheel {
            use_ompi5_libpmix(&mut cmd);
        }
        let run = Running::start(cmd, &format!("pmixrun --stop-in-init ({app:?})"));
        let pid = run.pid();
        let held = Held {
            run: Some(run),
            pid,
            dir,
            mark,
        };
        held.wait_for_server(Instant::now() + DEADLINE);
        held
    }

    /// Waits until pmixrun's server wrote the file by which tools find it (it does so before
    /// it starts a process; the processes print nothing while held, so the file itself is
    /// watched, every 10 ms, until `end`).
    fn wait_for_server(&self, end: Instant) {
        let host = nix::unistd::gethostname()
            .expect("gethostname")
            .to_string_lossy()
            .into_owned();
        let name = format!("pmix.{host}.tool.{}", self.pid);
        let prefix = format!("pmixrs.{}.", self.pid);
        loop {
            let there = std::fs::read_dir(std::env::temp_dir())
                .into_iter()
                .flatten()
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .any(|e| e.path().join(&name).is_file());
            if there {
                return;
            }
            assert!(
                Instant::now() < end,
                "pmixrun {} wrote no {name} in time",
                self.pid
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn finish(&mut self, end: Instant) -> Output {
        let run = self.run.take().expect("finished once");
        run.finish(end, "pmixrun --stop-in-init")
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(run) = self.run.take() {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run.finish(Instant::now(), "pmixrun (test failed)")
            }));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// A debugger running, its stdout read line by line.
struct Dbg {
    kind: Debugger,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    stderr: Receiver<String>,
    /// What it printed so far.
    seen: Vec<String>,
}

impl Dbg {
    fn start(kind: Debugger, pmixrun: u32) -> Dbg {
        Dbg::start_with(kind, pmixrun, &[])
    }

    fn start_with(kind: Debugger, pmixrun: u32, extra: &[&str]) -> Dbg {
        let pid = pmixrun.to_string();
        let mut cmd = match kind {
            Debugger::Rust => Command::new(rust_bin("pmix-debugger")),
            Debugger::C | Debugger::CWheel | Debugger::COnCapi => {
                Command::new(openpmix_program("pmix_debugger"))
            }
            Debugger::Python => {
                let (python, _) = openpmix_python_client();
                let mut c = Command::new(python);
                c.args(["-W", "ignore"])
                    .arg(openpmix_sources().join("pmix_debugger.py"));
                c
            }
        };
        cmd.arg(&pid)
            .args(extra)
            .env_remove("PMIXRS_SERVER_URI")
            .env_remove("PMIX_SERVER_URI41")
            .env_remove("PMIX_SERVER_URI4")
            .env_remove("PMIX_NAMESPACE")
            .env_remove("PMIX_RANK")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if kind == Debugger::CWheel {
            use_ompi5_libpmix(&mut cmd);
        }
        if kind == Debugger::COnCapi {
            use_capi_libpmix(&mut cmd);
            cmd.env("LD_DEBUG", "libs");
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("{kind:?} debugger: cannot start: {e}"));
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = collect_text(child.stderr.take());
        let (tx, lines) = unbounded();
        std::thread::spawn(move || {
            if let Some(out) = stdout {
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            }
        });
        Dbg {
            kind,
            child: Some(child),
            stdin,
            lines,
            stderr,
            seen: Vec::new(),
        }
    }

    /// The next line starting with `prefix` (others are kept in `seen`), by `end`.
    fn line(&mut self, prefix: &str, end: Instant) -> String {
        loop {
            match self.lines.recv_deadline(end) {
                Ok(l) => {
                    self.seen.push(l.clone());
                    if l.starts_with(prefix) {
                        return l;
                    }
                }
                Err(_) => {
                    let err = self.stop();
                    panic!(
                        "{:?} debugger: no line {prefix:?} in time; it printed {:#?}, stderr: {err}",
                        self.kind, self.seen
                    );
                }
            }
        }
    }

    fn send(&mut self, command: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{command}").expect("writing to the debugger");
        stdin.flush().expect("writing to the debugger");
    }

    /// Kills it (SIGKILL): a debugger that dies. Returns its stderr.
    fn kill(&mut self) -> String {
        self.stop()
    }

    fn stop(&mut self) -> String {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        self.stderr
            .recv_timeout(Duration::from_secs(5))
            .unwrap_or_default()
    }

    /// Waits for its exit by `end`, which must be a success; a debugger on pmix-capi must
    /// have loaded it.
    fn ended_well(&mut self, end: Instant, what: &str) {
        assert!(self.wait(end).success(), "{what}: {:#?}", self.seen);
        if self.kind == Debugger::COnCapi {
            let stderr = self.stderr.recv_deadline(end).unwrap_or_default();
            assert_capi_libpmix_loaded(&stderr, 1, what);
        }
    }

    /// Waits for its exit by `end`: its status.
    fn wait(&mut self, end: Instant) -> std::process::ExitStatus {
        let mut c = self.child.take().expect("waited once");
        let (tx, rx) = unbounded();
        std::thread::spawn(move || {
            let _ = tx.send(c.wait());
            c
        });
        match rx.recv_deadline(end) {
            Ok(s) => s.expect("waiting for the debugger"),
            Err(_) => panic!(
                "{:?} debugger did not end in time: {:#?}",
                self.kind, self.seen
            ),
        }
    }
}

impl Drop for Dbg {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The job `dbg` found held, as it printed it: the namespace and each rank's pid, once it
/// waits for a command.
fn held_table(dbg: &mut Dbg, held: &Held, end: Instant) -> Vec<u32> {
    let ready = dbg.line("debugger ready", end);
    assert_eq!(
        ready,
        format!("debugger ready job=rs-pmixrun-{}", held.pid),
        "{:?}",
        dbg.kind
    );
    dbg.line("debugger waiting", end);
    let rows = keyed_lines(&(dbg.seen.join("\n") + "\n"), "debugger");
    let mut pids = vec![0u32; N];
    for r in rows.iter().filter(|r| r.contains_key("rank")) {
        let rank: usize = r["rank"].parse().expect("a rank");
        pids[rank] = r["pid"].parse().expect("a pid");
    }
    for (rank, pid) in pids.iter().enumerate() {
        assert!(
            *pid > 0,
            "{:?}: rank {rank} has no pid: {:#?}",
            dbg.kind,
            dbg.seen
        );
        // Alive, waiting in init (it would have failed without the mark otherwise).
        let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid as i32), None);
        assert!(
            alive.is_ok(),
            "{:?}: rank {rank} (pid {pid}) is gone",
            dbg.kind
        );
    }
    assert!(!held.mark.exists());
    pids
}

/// Each rank printed its release with the pid the debugger's table gave it.
fn check_released(out: &Output, pids: &[u32], what: &str) {
    let lines = keyed_lines(&out.stdout, "debuggee");
    assert_eq!(lines.len(), N, "{what}: {out:#?}");
    for (rank, pid) in pids.iter().enumerate() {
        let r = lines
            .iter()
            .find(|l| l.get("rank").map(String::as_str) == Some(&rank.to_string()))
            .unwrap_or_else(|| panic!("{what}: rank {rank} did not say it was released: {out:#?}"));
        assert_eq!(r["pid"], pid.to_string(), "{what}: rank {rank}: {out:#?}");
    }
}

/// A Rust tool attached to pmixrun `pid` asks `QUERY_DEBUG_SUPPORT`: every directive of
/// `docs/TOOLS.md`, "Debuggers" (their keys as libpmix's `pmix_common.h` spells them). It
/// registers for no event: no debugger, its end aborts nothing.
fn debug_support_listed(pid: u32) {
    use pmix_client::attr;
    use pmix_client::tool::{Attach, Tool};
    let mut tool = Tool::init(Attach::Pid(pid)).expect("attaching to pmixrun");
    let answer = tool
        .query_keys(&[attr::QUERY_DEBUG_SUPPORT], Vec::new())
        .expect("QUERY_DEBUG_SUPPORT");
    let listed = answer.first().and_then(|i| i.value.as_str()).unwrap_or("");
    assert_eq!(
        listed, "pmix.dbg.init,pmix.dbg.tgt,pmix.dbg.dpnd,pmix.debugger,pmix.dbg.job",
        "{answer:?}"
    );
    tool.finalize().expect("finalize");
}

/// `debugger` releases a job of `app` held in init.
fn released_by(debugger: Debugger, app: App) {
    released_on(debugger, app, &[]);
}

/// `debugger` releases a job of `app` held in init on `nodes` (pmixrun's arguments).
fn released_on(debugger: Debugger, app: App, nodes: &[&str]) {
    let end = Instant::now() + DEADLINE;
    let what = format!("{debugger:?} debugger releasing {app:?} processes {nodes:?}");
    let mut held = Held::start(app, nodes);
    let mut dbg = Dbg::start(debugger, held.pid);
    let pids = held_table(&mut dbg, &held, end);
    std::fs::write(&held.mark, "").expect("writing the mark");
    dbg.send("release");
    dbg.line("debugger released", end);
    let job_end = dbg.line("debugger job-end", end);
    assert_eq!(
        job_end,
        format!("debugger job-end job=rs-pmixrun-{}", held.pid)
    );
    dbg.line("debugger finalized", end);
    dbg.ended_well(end, &what);
    let out = held.finish(end);
    assert!(out.status.success(), "{what}: {out:#?}");
    check_released(&out, &pids, &what);
}

#[test]
fn a_rust_debugger_releases_pmix_rs_processes_held_in_init_and_pmixps_lists_them() {
    rust_release_listed(&[]);
}

/// Across two logical nodes: the root's tool server says the job waits once the ranks of
/// both nodes do, pmixps lists them with their nodes, and the release reaches both.
#[test]
fn a_rust_debugger_releases_pmix_rs_processes_held_on_two_nodes_and_pmixps_lists_them() {
    rust_release_listed(&TWO_NODES);
}

/// A Rust debugger releases pmix-rs processes held in init on `nodes` (pmixrun's arguments),
/// having seen pmixps list them.
fn rust_release_listed(nodes: &[&str]) {
    let end = Instant::now() + DEADLINE;
    let mut held = Held::start(App::Rust, nodes);
    let mut dbg = Dbg::start(Debugger::Rust, held.pid);
    let pids = held_table(&mut dbg, &held, end);
    // pmixps lists the held job with the same pids.
    let mut ps = Command::new(rust_bin("pmixps"));
    ps.args(["--pid", &held.pid.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = Running::start(ps, "pmixps").finish(end, "pmixps");
    assert!(out.status.success(), "pmixps: {out:#?}");
    let mut lines = out.stdout.lines();
    let head: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        head,
        ["PMIXRUN", "JOB", "RANK", "PID", "STATE", "HOST", "PROGRAM"]
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows.len(), N, "pmixps: {out:#?}");
    let job = format!("rs-pmixrun-{}", held.pid);
    let program = rust_bin("pmix-debuggee").display().to_string();
    for (rank, pid) in pids.iter().enumerate() {
        let want = [
            held.pid.to_string(),
            job.clone(),
            rank.to_string(),
            pid.to_string(),
            "RUNNING".into(),
        ];
        let row = rows
            .iter()
            .find(|r| r.get(2) == Some(&rank.to_string().as_str()))
            .unwrap_or_else(|| panic!("pmixps: no rank {rank}: {out:#?}"));
        assert_eq!(row[..5], want, "pmixps: {out:#?}");
        assert_eq!(row[6], program, "pmixps: {out:#?}");
        if !nodes.is_empty() {
            assert_eq!(row[5], NODE_OF_RANK[rank], "pmixps: {out:#?}");
        }
    }
    // A tool asking at pmixrun (the root, across nodes) hears every debugger directive
    // supported.
    debug_support_listed(held.pid);
    // pmixps, a tool that only looked, held nothing back and aborted nothing: release.
    std::fs::write(&held.mark, "").expect("writing the mark");
    dbg.send("release");
    dbg.line("debugger finalized", end);
    assert!(dbg.wait(end).success(), "{:#?}", dbg.seen);
    let out = held.finish(end);
    assert!(out.status.success(), "{out:#?}");
    check_released(&out, &pids, "Rust debugger, pmix-rs processes");
}

#[test]
fn a_libpmix_debugger_releases_libpmix_processes_held_in_init() {
    released_by(Debugger::C, App::C);
}

#[test]
fn a_libpmix_debugger_releases_libpmix_processes_held_on_two_nodes() {
    released_on(Debugger::C, App::C, &TWO_NODES);
}

/// The unmodified libpmix debugger on pmix-rs's `libpmix.so.2` (events, a query, a
/// notification to the held job) releases libpmix processes as on Debian's libpmix.
#[test]
fn a_libpmix_debugger_on_our_libpmix_releases_libpmix_processes_held_in_init() {
    released_by(Debugger::COnCapi, App::C);
}

#[test]
fn a_libpmix_5_debugger_releases_libpmix_5_processes_held_in_init() {
    released_by(Debugger::CWheel, App::CWheel);
}

/// libpmix 5.0 says it waits with a range naming its daemon's server, not `RM`: the root
/// hears it all the same.
#[test]
fn a_libpmix_5_debugger_releases_libpmix_5_processes_held_on_two_nodes() {
    released_on(Debugger::CWheel, App::CWheel, &TWO_NODES);
}

#[test]
fn a_python3_pmix_debugger_releases_pmix_rs_processes_held_in_init() {
    released_by(Debugger::Python, App::Rust);
}

#[test]
fn a_rust_debugger_releases_libpmix_processes_held_in_init() {
    released_by(Debugger::Rust, App::C);
}

#[test]
fn a_libpmix_debugger_releases_an_open_mpi_5_job_held_in_mpi_init() {
    released_by(Debugger::C, App::Ompi5);
}

/// The debugger is killed while the job waits: the run fails, saying why, in time.
fn debugger_killed(debugger: Debugger, app: App) {
    debugger_killed_on(debugger, app, &[]);
}

/// [`debugger_killed`], the job held on `nodes` (pmixrun's arguments).
fn debugger_killed_on(debugger: Debugger, app: App, nodes: &[&str]) {
    let end = Instant::now() + DEADLINE;
    let what = format!("{debugger:?} debugger of {app:?} processes killed {nodes:?}");
    let mut held = Held::start(app, nodes);
    let mut dbg = Dbg::start(debugger, held.pid);
    let pids = held_table(&mut dbg, &held, end);
    dbg.kill();
    let out = held.finish(end);
    assert!(!out.status.success(), "{what}: {out:#?}");
    assert!(
        out.stderr.contains(&format!(
            "went away without releasing {N} process(es) held in init"
        )),
        "{what}: {out:#?}"
    );
    none_released(&out, &pids, &what);
}

/// No process got past its init, and every one is gone.
fn none_released(out: &Output, pids: &[u32], what: &str) {
    assert!(
        keyed_lines(&out.stdout, "debuggee").is_empty(),
        "{what}: a process went on: {out:#?}"
    );
    for pid in pids {
        let gone = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid as i32), None);
        assert!(gone.is_err(), "{what}: pid {pid} is still there");
    }
}

#[test]
fn killing_a_rust_debugger_fails_the_held_run() {
    debugger_killed(Debugger::Rust, App::Rust);
}

/// The root's tool server aborts the processes held on both nodes.
#[test]
fn killing_a_rust_debugger_fails_the_run_held_on_two_nodes() {
    debugger_killed_on(Debugger::Rust, App::Rust, &TWO_NODES);
}

#[test]
fn killing_a_libpmix_debugger_fails_the_held_run_of_libpmix_processes() {
    debugger_killed(Debugger::C, App::C);
}

/// The debugger kills the held job (`PMIx_Job_control`): it ends, nobody released.
fn debugger_kills(debugger: Debugger) {
    debugger_kills_on(debugger, &[]);
}

/// [`debugger_kills`], the job held on `nodes` (pmixrun's arguments).
fn debugger_kills_on(debugger: Debugger, nodes: &[&str]) {
    let end = Instant::now() + DEADLINE;
    let what = format!("{debugger:?} debugger killing the job {nodes:?}");
    let mut held = Held::start(App::Rust, nodes);
    let mut dbg = Dbg::start(debugger, held.pid);
    let pids = held_table(&mut dbg, &held, end);
    dbg.send("kill");
    dbg.line("debugger killed", end);
    dbg.line("debugger job-end", end);
    dbg.line("debugger finalized", end);
    dbg.ended_well(end, &what);
    let out = held.finish(end);
    // Processes killed on request are no failure of the run.
    assert!(out.status.success(), "{what}: {out:#?}");
    assert!(
        out.stderr
            .contains(&format!("SIGKILL to be sent to {N} process(es)")),
        "{what}: {out:#?}"
    );
    none_released(&out, &pids, &what);
}

#[test]
fn a_rust_debugger_kills_the_held_job() {
    debugger_kills(Debugger::Rust);
}

/// Killed through the root: the run ends well, and the debugger's end after the job's aborts
/// nothing.
#[test]
fn a_rust_debugger_kills_the_job_held_on_two_nodes() {
    debugger_kills_on(Debugger::Rust, &TWO_NODES);
}

#[test]
fn a_libpmix_debugger_kills_the_held_job() {
    debugger_kills(Debugger::C);
}

/// ... and kills the held job (`PMIx_Job_control`) as on Debian's.
#[test]
fn a_libpmix_debugger_on_our_libpmix_kills_the_held_job() {
    debugger_kills(Debugger::COnCapi);
}

#[test]
fn a_python3_pmix_debugger_kills_the_held_job() {
    debugger_kills(Debugger::Python);
}

#[test]
fn a_rust_debugger_spawns_a_job_held_in_init_and_releases_it() {
    spawned_held_released(&[]);
}

/// Across two logical nodes: the spawned job's two ranks go to the free slot of each node.
#[test]
fn a_rust_debugger_spawns_a_job_held_in_init_on_two_nodes_and_releases_it() {
    spawned_held_released(&TWO_NODES);
}

/// A Rust debugger spawns a job of two processes held in init beside a run on `nodes`
/// (pmixrun's arguments), waits for it and releases it.
fn spawned_held_released(nodes: &[&str]) {
    let end = Instant::now() + DEADLINE;
    // pmixrun's own job, held running by FIFOs while the tool spawns beside it.
    let first = pmix_tests::HeldJob::start(pmixrun_bin(), nodes, 1, end);
    let dir = std::env::temp_dir().join(format!(
        "pmixrs-debugger.{}.{}",
        std::process::id(),
        unique()
    ));
    std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mark = dir.join("released");
    let debuggee = rust_bin("pmix-debuggee").display().to_string();
    let mark_arg = mark.display().to_string();
    let mut dbg = Dbg::start_with(
        Debugger::Rust,
        first.pid,
        &["spawn", "2", &debuggee, &mark_arg],
    );
    let spawned = dbg.line("debugger spawned", end);
    let job = format!("rs-pmixrun-{}.1", first.pid);
    assert_eq!(spawned, format!("debugger spawned job={job}"));
    let ready = dbg.line("debugger ready", end);
    assert_eq!(ready, format!("debugger ready job={job}"));
    dbg.line("debugger waiting", end);
    let procs = dbg
        .seen
        .iter()
        .filter(|l| l.starts_with("debugger proc"))
        .count();
    assert_eq!(procs, 2, "{:#?}", dbg.seen);
    std::fs::write(&mark, "").expect("writing the mark");
    dbg.send("release");
    assert_eq!(
        dbg.line("debugger job-end", end),
        format!("debugger job-end job={job}")
    );
    dbg.line("debugger finalized", end);
    assert!(dbg.wait(end).success(), "{:#?}", dbg.seen);
    let out = first.release(end);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "{out:#?}");
    let released = keyed_lines(&out.stdout, "debuggee");
    assert_eq!(released.len(), 2, "the spawned processes: {out:#?}");
}

/// A Rust debugger attached to a job held on `nodes` (pmixrun's arguments) sends `command`
/// (spawning daemons of `pmix-debuggee` with `daemon_arg`), then releases the job: the job's
/// pid, and for each daemon line its `rank`, `field` and `node`, sorted.
fn daemons_beside_a_held_job(
    nodes: &[&str],
    command: &str,
    daemon_arg: &str,
    field: &str,
) -> (u32, Vec<String>) {
    let end = Instant::now() + DEADLINE;
    let mut held = Held::start(App::Rust, nodes);
    let mut dbg = Dbg::start(Debugger::Rust, held.pid);
    let pids = held_table(&mut dbg, &held, end);
    let daemon = rust_bin("pmix-debuggee").display().to_string();
    dbg.send(&format!("{command} {daemon} {daemon_arg}"));
    assert_eq!(
        dbg.line("debugger daemons", end),
        format!("debugger daemons job=rs-pmixrun-{}.1", held.pid)
    );
    std::fs::write(&held.mark, "").expect("writing the mark");
    dbg.send("release");
    dbg.line("debugger finalized", end);
    assert!(dbg.wait(end).success(), "{:#?}", dbg.seen);
    let out = held.finish(end);
    assert!(out.status.success(), "{out:#?}");
    check_released(
        &out,
        &pids,
        &format!("Rust debugger with daemons ({command})"),
    );
    let mut daemons: Vec<String> = keyed_lines(&out.stdout, "daemon")
        .iter()
        .map(|d| format!("{} {} {}", d["rank"], d[field], d["node"]))
        .collect();
    daemons.sort();
    (held.pid, daemons)
}

/// Daemons co-spawned as OpenPMIx's `debugger` example asks (`MAPBY ppr:1:node`,
/// `DEBUGGER_DAEMONS`, `DEBUG_JOB`, an application without a count): one per node, here one,
/// which finds the job it debugs under `DEBUG_JOB` in its job data.
#[test]
fn a_rust_debugger_co_spawns_one_daemon_per_node_that_finds_its_job() {
    let (pid, daemons) = daemons_beside_a_held_job(&[], "co-daemons", "--daemon-of-job", "job");
    let target = format!("rs-pmixrun-{pid}");
    assert_eq!(daemons, [format!("0 {target} {}", this_host())]);
}

/// Across two logical nodes: one daemon on each node of the job, though its slots are full.
#[test]
fn a_rust_debugger_co_spawns_one_daemon_on_each_node_of_a_job_held_on_two() {
    let (pid, daemons) =
        daemons_beside_a_held_job(&TWO_NODES, "co-daemons", "--daemon-of-job", "job");
    let target = format!("rs-pmixrun-{pid}");
    assert_eq!(
        daemons,
        [format!("0 {target} n1"), format!("1 {target} n2")]
    );
}

#[test]
fn a_rust_debugger_spawns_its_daemons_beside_a_held_job_then_releases_it() {
    let (pid, daemons) = daemons_beside_a_held_job(&[], "daemons 2", "--daemon", "target");
    // Two daemons (DEBUG_DAEMONS_PER_NODE 2, whatever the app asked), each told the target.
    let target = format!("rs-pmixrun-{pid}.{}", u32::MAX - 1);
    let host = this_host();
    assert_eq!(
        daemons,
        [format!("0 {target} {host}"), format!("1 {target} {host}")]
    );
}

/// `DEBUG_DAEMONS_PER_NODE` 2 across two logical nodes: two on each node of the job.
#[test]
fn a_rust_debugger_spawns_two_daemons_on_each_node_of_a_job_held_on_two() {
    let (pid, daemons) = daemons_beside_a_held_job(&TWO_NODES, "daemons 2", "--daemon", "target");
    let target = format!("rs-pmixrun-{pid}.{}", u32::MAX - 1);
    let want: Vec<String> = NODE_OF_RANK
        .iter()
        .enumerate()
        .map(|(rank, node)| format!("{rank} {target} {node}"))
        .collect();
    assert_eq!(daemons, want);
}

/// This machine's name, as a one-node run's job data gives it.
fn this_host() -> String {
    nix::unistd::gethostname()
        .expect("gethostname")
        .to_string_lossy()
        .into_owned()
}
