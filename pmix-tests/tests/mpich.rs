//! Unmodified MPICH programs under `pmixrun --pmi pmi1` (an inherited socket, `PMI_FD`) and
//! `--pmi pmi1-port` (TCP, `PMI_PORT` + `PMI_ID`): the MPI test programs of `pmix-tests/mpi/`,
//! compiled once per test process with Debian's MPICH 4.0.2 (`mpicc.mpich`) and with MPICH
//! 5.0.2 (`$PMIXRS_MPICH5`, default `/opt/mpich5`, the PyPI wheel in a venv; the only build
//! here with dynamic processes). `bash scripts/install-test-deps.sh` installs both; without
//! them these tests fail, saying so. Every run is bounded by a deadline; the programs check
//! their own results and the tests check exit statuses and the lines they print.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pmix_tests::pmixrun_bin;
use pmix_tests::{NameServerProcess, Running};

/// For one run (or for the runs of one exchange); they take well under a second.
const DEADLINE: Duration = Duration::from_secs(60);

const INSTALL: &str = "install the test dependencies with `bash scripts/install-test-deps.sh` \
                       (as root; it installs Debian's mpich and MPICH 5.0.2 into /opt/mpich5)";

// ---- the MPICH builds and the programs --------------------------------------------------

/// One MPICH installation and the test programs compiled with it.
struct Mpich {
    /// For messages: "MPICH 4.0.2 (Debian)".
    name: &'static str,
    /// Where the programs are.
    dir: PathBuf,
    /// What its programs need in their environment (pmixrun passes its own on).
    env: &'static [(&'static str, &'static str)],
}

/// The programs: (executable, source, extra compiler arguments).
const PROGRAMS: [(&str, &str, &[&str]); 8] = [
    ("hello", "hello.c", &[]),
    ("mpmd_a", "mpmd.c", &["-DMPMD_APP=0"]),
    ("mpmd_b", "mpmd.c", &["-DMPMD_APP=1"]),
    ("abort", "abort.c", &[]),
    ("exit_early", "exit_early.c", &[]),
    ("names", "names.c", &[]),
    ("spawn", "spawn.c", &[]),
    ("connect", "connect.c", &[]),
];

/// 5.0.2's dynamic processes (spawn, ports) need ofi; tcp on the loopback interface keeps it
/// on this host.
const OFI_ENV: &[(&str, &str)] = &[
    ("MPIR_CVAR_CH4_NETMOD", "ofi"),
    ("FI_PROVIDER", "tcp"),
    ("FI_TCP_IFACE", "lo"),
];

impl Mpich {
    /// Compiles every program with `mpicc` into `<target tmpdir>/mpich/<tag>`, all at once.
    fn build(name: &'static str, tag: &str, mpicc: &Path, env: &'static [(&str, &str)]) -> Mpich {
        assert!(
            mpicc.is_file(),
            "{name}: {} is missing; {INSTALL}",
            mpicc.display()
        );
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("mpi");
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("mpich")
            .join(tag);
        std::fs::create_dir_all(&dir).expect("creating the directory for the MPI programs");
        let compiling: Vec<_> = PROGRAMS
            .iter()
            .map(|(exe, source, extra)| {
                let child = Command::new(mpicc)
                    .args(["-O1", "-Wall", "-Wextra", "-Werror"])
                    .args(*extra)
                    .arg("-o")
                    .arg(Self::fresh(&dir, exe))
                    .arg(src.join(source))
                    .stdin(Stdio::null())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap_or_else(|e| {
                        panic!("{name}: running {}: {e}; {INSTALL}", mpicc.display())
                    });
                (exe, child)
            })
            .collect();
        for (exe, child) in compiling {
            let out = child.wait_with_output().expect("waiting for mpicc");
            assert!(
                out.status.success(),
                "{name}: compiling {exe} failed ({}):\n{}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            std::fs::rename(Self::fresh(&dir, exe), dir.join(exe))
                .unwrap_or_else(|e| panic!("{name}: renaming the new {exe}: {e}"));
        }
        Mpich { name, dir, env }
    }

    /// Where this process compiles `exe` before renaming it into place: another test process
    /// of the same target directory may be running the previous one.
    fn fresh(dir: &Path, exe: &str) -> PathBuf {
        dir.join(format!("{exe}.new.{}", std::process::id()))
    }

    fn program(&self, exe: &str) -> String {
        self.dir.join(exe).display().to_string()
    }
}

/// Debian's MPICH 4.0.2 (ch4:ucx; no dynamic processes).
fn debian() -> &'static Mpich {
    static BUILD: OnceLock<Mpich> = OnceLock::new();
    BUILD.get_or_init(|| {
        Mpich::build(
            "MPICH 4.0.2 (Debian)",
            "debian",
            Path::new("/usr/bin/mpicc.mpich"),
            &[],
        )
    })
}

/// Where MPICH 5.0.2 is: `$PMIXRS_MPICH5`, default /opt/mpich5 (a venv with the wheel).
fn mpich5_prefix() -> PathBuf {
    std::env::var_os("PMIXRS_MPICH5").map_or_else(|| "/opt/mpich5".into(), PathBuf::from)
}

/// MPICH 5.0.2 at [`mpich5_prefix`] on its default netmod (ucx).
fn mpich5() -> &'static Mpich {
    static BUILD: OnceLock<Mpich> = OnceLock::new();
    BUILD.get_or_init(|| {
        Mpich::build(
            "MPICH 5.0.2",
            "mpich5",
            &mpich5_prefix().join("bin").join("mpicc"),
            &[],
        )
    })
}

/// The same programs as [`mpich5`], run on ofi over loopback TCP.
fn mpich5_ofi() -> Mpich {
    let m = mpich5();
    Mpich {
        name: "MPICH 5.0.2 (ofi)",
        dir: m.dir.clone(),
        env: OFI_ENV,
    }
}

// ---- running pmixrun ------------------------------------------------------------------

/// What one pmixrun run did.
#[derive(Debug)]
struct Run {
    what: String,
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Run {
    fn code(&self) -> Option<i32> {
        self.status.code()
    }

    fn assert_ok(&self) {
        assert_eq!(self.code(), Some(0), "{}: {self:#?}", self.what);
    }

    /// Its stdout lines, sorted (ranks print in any order).
    fn sorted_lines(&self) -> Vec<&str> {
        let mut lines: Vec<&str> = self.stdout.lines().collect();
        lines.sort_unstable();
        lines
    }

    fn assert_lines(&self, want: &[String]) {
        let mut want: Vec<&str> = want.iter().map(String::as_str).collect();
        want.sort_unstable();
        assert_eq!(self.sorted_lines(), want, "{}: {self:#?}", self.what);
    }

    fn assert_has_line(&self, line: &str) {
        assert!(
            self.stdout.lines().any(|l| l == line),
            "{}: no line {line:?} in {self:#?}",
            self.what
        );
    }
}

/// `pmixrun --pmi <pmi> <args>` with `m`'s environment, stdout and stderr piped.
fn pmixrun(m: &Mpich, pmi: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(pmixrun_bin());
    cmd.args(["--pmi", pmi])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Only where a test says so.
        .env_remove("PMIXRS_NAMESERVER")
        .envs(m.env.iter().copied());
    cmd
}

/// A started pmixrun, with what names it in a failure.
struct Started {
    what: String,
    running: Running,
}

fn start(cmd: Command, what: String) -> Started {
    let running = Running::start(cmd, &what);
    Started { what, running }
}

/// Waits for a started pmixrun until `end`; past it, kills it (SIGTERM, which pmixrun passes
/// on to its job, then SIGKILL) and fails the test, naming the run.
fn finish(s: Started, end: Instant) -> Run {
    let o = s.running.finish(end, &s.what);
    Run {
        what: s.what,
        status: o.status,
        stdout: o.stdout,
        stderr: o.stderr,
    }
}

/// Runs `pmixrun --pmi <pmi> <args>` to its end, at most [`DEADLINE`].
fn run(m: &Mpich, pmi: &str, args: &[&str]) -> Run {
    let what = format!("{}: pmixrun --pmi {pmi} {}", m.name, args.join(" "));
    finish(
        start(pmixrun(m, pmi, args), what),
        Instant::now() + DEADLINE,
    )
}

// ---- the tests ------------------------------------------------------------------------

/// hello at `n` ranks: every rank checked its Allreduce and passed the barrier.
fn hello(m: &Mpich, pmi: &str, n: u32) {
    let ns = n.to_string();
    let r = run(m, pmi, &["-n", &ns, &m.program("hello"), &ns]);
    r.assert_ok();
    let sum = n * (n - 1) / 2;
    let want: Vec<String> = (0..n)
        .map(|rank| format!("hello rank {rank} of {n} appnum 0 sum {sum}"))
        .collect();
    r.assert_lines(&want);
}

#[test]
fn hello_and_allreduce_with_debian_mpich_4() {
    let m = debian();
    for n in [1, 4, 8] {
        hello(m, "pmi1", n);
    }
    hello(m, "pmi1-port", 4);
    // pmixrun recognises an MPICH program by the library it links.
    hello(m, "auto", 2);
}

#[test]
fn hello_and_allreduce_with_mpich_5() {
    // The default netmod (ucx) exchanges addresses through put, barrier and get; ofi on one
    // node does not: both ways.
    let m = mpich5();
    for n in [1, 4, 8] {
        hello(m, "pmi1", n);
    }
    hello(m, "pmi1-port", 3);
    hello(m, "auto", 2);
    hello(&mpich5_ofi(), "pmi1", 4);
}

/// Two programs in one job: `-n 2 mpmd_a : -n 3 mpmd_b`.
fn mpmd(m: &Mpich, pmi: &str) {
    let (a, b) = (m.program("mpmd_a"), m.program("mpmd_b"));
    let r = run(
        m,
        pmi,
        &["-n", "2", &a, "2", "3", ":", "-n", "3", &b, "2", "3"],
    );
    r.assert_ok();
    let want: Vec<String> = (0..5)
        .map(|rank| {
            let (app, prog) = if rank < 2 {
                (0, "mpmd_a")
            } else {
                (1, "mpmd_b")
            };
            format!("mpmd rank {rank} of 5 appnum {app} program {prog}")
        })
        .collect();
    r.assert_lines(&want);
}

#[test]
fn two_programs_in_one_job_see_their_appnum_and_one_world() {
    mpmd(debian(), "pmi1");
    mpmd(mpich5(), "pmi1-port");
}

/// Rank 1 calls MPI_Abort(MPI_COMM_WORLD, 7) while the others are blocked in MPI.
fn abort(m: &Mpich, pmi: &str, n: &str) {
    let r = run(m, pmi, &["-n", n, &m.program("abort"), "7"]);
    assert_eq!(r.code(), Some(7), "{}: {r:#?}", r.what);
    r.assert_has_line("rank 1 aborting with 7");
    assert!(
        r.stderr.contains("rank 1 called abort with status 7"),
        "{}: pmixrun did not say why the job failed: {r:#?}",
        r.what
    );
    // MPICH's own message, on the aborting rank's stderr, forwarded.
    assert!(
        r.stderr
            .contains("application called MPI_Abort(MPI_COMM_WORLD, 7)"),
        "{}: {r:#?}",
        r.what
    );
}

#[test]
fn mpi_abort_ends_the_job_with_its_status() {
    abort(debian(), "pmi1", "4");
    abort(mpich5(), "pmi1-port", "3");
}

#[test]
fn a_rank_exiting_without_mpi_finalize_fails_the_job() {
    let m = debian();
    let prog = m.program("exit_early");
    // The others are blocked in MPI_Recv for a message nobody sends: only pmixrun ends them.
    let r = run(m, "pmi1", &["-n", "3", &prog, "1", "3"]);
    assert_eq!(r.code(), Some(3), "{}: {r:#?}", r.what);
    r.assert_has_line("rank 1 exiting with 3 without MPI_Finalize");
    assert!(
        r.stderr
            .contains("rank 1 exited with status 3 without calling finalize"),
        "{}: pmixrun did not say why the job failed: {r:#?}",
        r.what
    );
    // Status 0 without MPI_Finalize is a failure too.
    let r = run(m, "pmi1-port", &["-n", "3", &prog, "2", "0"]);
    assert!(
        r.code().is_some_and(|c| c != 0),
        "{}: exit 0 without MPI_Finalize did not fail the job: {r:#?}",
        r.what
    );
    r.assert_has_line("rank 2 exiting with 0 without MPI_Finalize");
    assert!(
        r.stderr
            .contains("rank 2 exited with status 0 without calling finalize"),
        "{}: pmixrun did not say why the job failed: {r:#?}",
        r.what
    );
    let m = mpich5();
    let r = run(m, "pmi1", &["-n", "2", &m.program("exit_early"), "0", "5"]);
    assert_eq!(r.code(), Some(5), "{}: {r:#?}", r.what);
}

/// The lines `names errors` prints: the classes MPICH gives a failed name-service call.
const NAME_ERRORS: [&str; 4] = [
    "errors: lookup of an unpublished name failed: MPI_ERR_NAME (33)",
    "errors: duplicate publish failed: MPI_ERR_NAME (33)",
    "errors: lookup after unpublish failed: MPI_ERR_NAME (33)",
    "errors: second unpublish failed: MPI_ERR_SERVICE (41)",
];

fn name_errors(m: &Mpich, pmi: &str, nameserver: Option<&str>) {
    let mut args = Vec::new();
    if let Some(uri) = nameserver {
        args.extend(["--nameserver-uri", uri]);
    }
    let prog = m.program("names");
    args.extend([
        "-n",
        "2",
        &prog,
        "errors",
        "pmixrs.mpich.svc",
        "tag#0$connentry#0200A7C0[2]01[8]$",
        "second=port",
    ]);
    let r = run(m, pmi, &args);
    r.assert_ok();
    let mut want: Vec<String> = NAME_ERRORS.iter().map(|l| (*l).to_owned()).collect();
    want.extend((0..2).map(|rank| format!("names errors rank {rank} ok")));
    r.assert_lines(&want);
}

#[test]
fn unpublished_lookups_and_duplicate_publishes_fail_as_mpi_errors() {
    name_errors(debian(), "pmi1", None);
    name_errors(mpich5(), "pmi1-port", None);
    let ns = NameServerProcess::start(pmixrun_bin(), DEADLINE);
    name_errors(debian(), "pmi1-port", Some(&ns.file_spec()));
    name_errors(mpich5(), "pmi1", Some(&ns.file_spec()));
    ns.stop();
}

#[test]
fn names_published_by_one_run_are_found_by_another_through_a_name_server() {
    let m = debian();
    let ns = NameServerProcess::start(pmixrun_bin(), DEADLINE);
    let uri = ns.file_spec();
    let prog = m.program("names");
    let (svc, port) = ("pmixrs.mpich.xrun", "tag#0$connentry#7F000001[2]01[8]$");
    let (ack, ackport) = ("pmixrs.mpich.xrun.ack", "ack=from-b");
    let end = Instant::now() + DEADLINE;
    // Started together: B polls for A's name, A polls for B's acknowledgement.
    let a_args = [
        "--nameserver-uri",
        &uri,
        "-n",
        "2",
        &prog,
        "publisher",
        svc,
        port,
        ack,
        ackport,
    ];
    let b_args = [
        "--nameserver-uri",
        &uri,
        "-n",
        "1",
        &prog,
        "looker",
        svc,
        port,
        ack,
        ackport,
    ];
    let a = start(
        pmixrun(m, "pmi1", &a_args),
        format!("run A (publisher) of {}", m.name),
    );
    let b = start(
        pmixrun(m, "pmi1-port", &b_args),
        format!("run B (looker) of {}", m.name),
    );
    let b = finish(b, end);
    let a = finish(a, end);
    a.assert_ok();
    b.assert_ok();
    a.assert_lines(&[
        format!("publisher: published {svc}"),
        format!("publisher: got {ack} = {ackport}, unpublished {svc}"),
        "names publisher rank 0 ok".to_owned(),
        "names publisher rank 1 ok".to_owned(),
    ]);
    b.assert_lines(&[
        format!("looker: publishing {svc} again failed: MPI_ERR_NAME (33)"),
        format!("looker: found {svc} = {port}, acknowledged, saw it unpublished"),
        "names looker rank 0 ok".to_owned(),
    ]);
    // Both unpublished what they published: a third run finds neither.
    for name in [svc, ack] {
        let r = run(
            m,
            "pmi1",
            &["--nameserver-uri", &uri, &prog, "errors", name, "p1", "p2"],
        );
        r.assert_ok();
    }
    ns.stop();
}

#[test]
fn comm_spawn_and_spawn_multiple_with_mpich_5() {
    let m = mpich5_ofi();
    let prog = m.program("spawn");
    // Two parents spawn two children.
    let r = run(&m, "pmi1", &["-n", "2", &prog, "parent"]);
    r.assert_ok();
    r.assert_lines(&[
        "parent rank 0 of 2: talked with 2 children".to_owned(),
        "parent rank 1 of 2: talked with 2 children".to_owned(),
        "child rank 0 of 2 appnum 0: talked with 2 parents".to_owned(),
        "child rank 1 of 2 appnum 0: talked with 2 parents".to_owned(),
    ]);
    // One parent, two commands: 1 childA and 2 childB with their own arguments.
    for pmi in ["pmi1", "pmi1-port"] {
        let r = run(&m, pmi, &["-n", "1", &prog, "multiple"]);
        r.assert_ok();
        r.assert_lines(&[
            "parent rank 0 of 1: talked with 3 children".to_owned(),
            "childA rank 0 of 3 appnum 0: talked with 1 parents".to_owned(),
            "childB rank 1 of 3 appnum 1: talked with 1 parents".to_owned(),
            "childB rank 2 of 3 appnum 1: talked with 1 parents".to_owned(),
        ]);
    }
    // Each command in the directory of its `wdir` info key.
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("mpich")
        .join(format!("wdir.{}", std::process::id()));
    let (dir_a, dir_b) = (base.join("a"), base.join("b"));
    for d in [&dir_a, &dir_b] {
        std::fs::create_dir_all(d).expect("creating a working directory");
    }
    let (da, db) = (dir_a.display().to_string(), dir_b.display().to_string());
    let r = run(&m, "pmi1", &["-n", "1", &prog, "wdir", &da, &db]);
    let _ = std::fs::remove_dir_all(&base);
    r.assert_ok();
    r.assert_lines(&[
        "parent rank 0 of 1: talked with 2 children".to_owned(),
        "wdirA rank 0 of 2 appnum 0: talked with 1 parents".to_owned(),
        "wdirB rank 1 of 2 appnum 1: talked with 1 parents".to_owned(),
    ]);
}

#[test]
fn connect_and_accept_between_two_runs_with_mpich_5() {
    let m = mpich5_ofi();
    let ns = NameServerProcess::start(pmixrun_bin(), DEADLINE);
    let uri = ns.file_spec();
    let prog = m.program("connect");
    let svc = "pmixrs.mpich.connect";
    let end = Instant::now() + DEADLINE;
    // Started together: the client polls until the server has published its port.
    let server = start(
        pmixrun(
            &m,
            "pmi1",
            &["--nameserver-uri", &uri, "-n", "2", &prog, "server", svc],
        ),
        format!("server run of {}", m.name),
    );
    let client = start(
        pmixrun(
            &m,
            "pmi1-port",
            &["--nameserver-uri", &uri, "-n", "3", &prog, "client", svc],
        ),
        format!("client run of {}", m.name),
    );
    let client = finish(client, end);
    let server = finish(server, end);
    server.assert_ok();
    client.assert_ok();
    server.assert_lines(&[
        format!("server: published {svc}"),
        "server rank 0 of 2: exchanged with 3 remote ranks".to_owned(),
        "server rank 1 of 2: exchanged with 3 remote ranks".to_owned(),
    ]);
    client.assert_lines(&[
        "client rank 0 of 3: exchanged with 2 remote ranks".to_owned(),
        "client rank 1 of 3: exchanged with 2 remote ranks".to_owned(),
        "client rank 2 of 3: exchanged with 2 remote ranks".to_owned(),
    ]);
    ns.stop();
}
