//! Multi-process integration and conformance tests for pmix-rs, and the test client programs
//! they start. Not a library for users.
//!
//! [`TestHost`] is a minimal host: it starts a [`Server`], registers jobs whose processes all
//! run on this node, starts real client processes with the environment `setup_fork` gives, and
//! waits for them with a deadline, killing them and failing with a message if they hang.

mod held_job;
pub mod ompi5;
pub mod scenario;
mod streamed;
mod tool_programs;

pub use held_job::HeldJob;
pub use streamed::Streamed;
pub use tool_programs::{ToolLib, assert_pulled_from_prterun, iof_lines, tool_command};

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, unbounded};
use pmix_server::{Host, Server, ServerOptions};
use pmix_types::{Info, Nspace, Proc, Value, attr};

/// Path of a binary of this workspace built next to the running test executable
/// (`target/<profile>/deps/<test>` runs; binaries live in `target/<profile>/`).
pub fn workspace_bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target directory");
    let bin = dir.join(name);
    assert!(
        bin.exists(),
        "{} is not built (cargo test builds it with the tests)",
        bin.display()
    );
    bin
}

/// The `pmixrun` binary, built once per test process by [`cargo_build`] (`cargo test -p
/// pmix-tests` does not build other packages' binaries).
pub fn pmixrun_bin() -> &'static Path {
    static BIN: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        cargo_build(&["-p", "pmixrun", "--bin", "pmixrun"]);
        profile_dir().join("pmixrun")
    })
}

/// `target/<profile>`, where the running test lives (`target/<profile>/deps/<test>`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("target/<profile>")
        .to_path_buf()
}

/// Builds binaries of other packages of the workspace (`what`: cargo's package and target
/// arguments) into the running test's target directory and profile: `cargo test -p
/// pmix-tests` does not build them, and an old one must not be tested. A no-op when they are
/// up to date; returns the profile directory they are in.
pub fn cargo_build(what: &[&str]) -> PathBuf {
    let profile = profile_dir();
    let target = profile.parent().expect("target dir");
    let mut cmd = Command::new(env!("CARGO"));
    cmd.arg("build")
        .args(what)
        .arg("--target-dir")
        .arg(target)
        .current_dir(env!("CARGO_MANIFEST_DIR"));
    if profile.file_name().is_some_and(|n| n == "release") {
        cmd.arg("--release");
    }
    let out = cmd.output().expect("running cargo build");
    assert!(
        out.status.success(),
        "cargo build {what:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    profile
}

/// The outcome of one client process.
#[derive(Debug)]
pub struct Finished {
    /// Which process it was.
    pub proc: Proc,
    /// Its exit code (`None` if killed by a signal).
    pub code: Option<i32>,
    /// What it wrote to stdout.
    pub stdout: String,
    /// What it wrote to stderr.
    pub stderr: String,
}

/// A server with a host, for tests.
pub struct TestHost {
    /// The server under test.
    pub server: Server,
}

/// A started client process.
pub struct Started {
    proc: Proc,
    pid: u32,
    rx: Receiver<Finished>,
}

fn uid_gid() -> (u32, u32) {
    (
        nix::unistd::getuid().as_raw(),
        nix::unistd::getgid().as_raw(),
    )
}

impl TestHost {
    /// Starts a server with `host`'s callbacks.
    pub fn start(host: impl Host) -> TestHost {
        Self::start_with(host, ServerOptions::default())
    }

    /// Starts a server with `host`'s callbacks and `options`.
    pub fn start_with(host: impl Host, options: ServerOptions) -> TestHost {
        let server = Server::init(host, options).expect("server init");
        TestHost { server }
    }

    /// Registers namespace `name` with `size` processes, all on this node, and registers each
    /// as a client of the current user.
    pub fn job(&self, name: &str, size: u32) -> Nspace {
        let ns = Nspace::new(name).expect("namespace");
        let nodes = pmix_regex::generate_regex(&[self.server.hostname()]).expect("node map");
        let ranks: Vec<u32> = (0..size).collect();
        let ppn = pmix_regex::generate_ppn(&[ranks]).expect("proc map");
        let info = vec![
            Info::attr(attr::JOB_SIZE, size),
            Info::attr(attr::NODE_MAP, Value::Regex(nodes)),
            Info::attr(attr::PROC_MAP, Value::Regex(ppn)),
        ];
        self.server
            .register_nspace(&ns, size, &info)
            .expect("register_nspace");
        let (uid, gid) = uid_gid();
        for r in 0..size {
            self.server
                .register_client(&Proc::new(ns.clone(), r), uid, gid)
                .expect("register_client");
        }
        ns
    }

    /// Starts the scenario client as `proc` with `args`, after `setup_fork`; `env_override`
    /// replaces or adds environment variables (to play a misbehaving process).
    pub fn spawn(&self, proc: &Proc, args: &[&str], env_override: &[(&str, &str)]) -> Started {
        self.spawn_program(&workspace_bin("pmix-test-client"), proc, args, env_override)
    }

    /// Starts `program` as `proc`.
    pub fn spawn_program(
        &self,
        program: &Path,
        proc: &Proc,
        args: &[&str],
        env_override: &[(&str, &str)],
    ) -> Started {
        let env = self.server.setup_fork(proc).expect("setup_fork");
        let mut cmd = Command::new(program);
        cmd.args(args)
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for (k, v) in env_override {
            cmd.env(k, v);
        }
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
        let pid = child.id();
        let (tx, rx) = unbounded();
        let p = proc.clone();
        std::thread::spawn(move || {
            let mut stdout = String::new();
            let mut stderr = String::new();
            let out = child.stdout.take();
            let err = child.stderr.take();
            let err_thread = std::thread::spawn(move || {
                let mut s = String::new();
                if let Some(mut e) = err {
                    let _ = e.read_to_string(&mut s);
                }
                s
            });
            if let Some(mut o) = out {
                let _ = o.read_to_string(&mut stdout);
            }
            stderr.push_str(&err_thread.join().unwrap_or_default());
            let code = child.wait().ok().and_then(|s| s.code());
            let _ = tx.send(Finished {
                proc: p,
                code,
                stdout,
                stderr,
            });
        });
        Started {
            proc: proc.clone(),
            pid,
            rx,
        }
    }
}

/// The value of `key` in `setup_fork`'s environment `env`.
pub fn env_value<'a>(env: &'a [(String, String)], key: &str) -> &'a str {
    env.iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("{key} not in setup_fork's environment"))
}

/// The server's Unix socket named in `setup_fork`'s environment.
pub fn native_socket(env: &[(String, String)]) -> PathBuf {
    let uri = env_value(env, pmix_server::ENV_SERVER_URI);
    PathBuf::from(uri.strip_prefix("unix:").expect("a unix: server URI"))
}

/// The frame a pmix-rs client of `proc` opens with, with the secret of `setup_fork`'s
/// environment `env`: for tests that play a client byte by byte.
pub fn native_hello(proc: &Proc, env: &[(String, String)]) -> Vec<u8> {
    let hex = env_value(env, pmix_server::ENV_SECRET);
    let secret = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("a hex secret"))
        .collect();
    let hello = pmix_wire::Hello {
        magic: pmix_wire::MAGIC.into(),
        version: pmix_wire::PROTOCOL_VERSION,
        nspace: proc.nspace.clone(),
        rank: proc.rank,
        secret,
        pid: std::process::id(),
    };
    let mut out = Vec::new();
    pmix_wire::encode_frame(&hello, &mut out).expect("encoding a hello");
    out
}

/// Waits for every process, at most `deadline` in all. On timeout, kills those still running
/// and panics naming them.
pub fn wait_all(started: Vec<Started>, deadline: Duration) -> Vec<Finished> {
    let end = Instant::now() + deadline;
    let mut done = Vec::new();
    let mut pending = started;
    while !pending.is_empty() {
        let mut still = Vec::new();
        for s in pending {
            let left = end.saturating_duration_since(Instant::now());
            match s.rx.recv_timeout(left) {
                Ok(f) => done.push(f),
                Err(_) => still.push(s),
            }
        }
        if !still.is_empty() {
            let names: Vec<String> = still.iter().map(|s| s.proc.to_string()).collect();
            for s in &still {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(i32::try_from(s.pid).unwrap_or(i32::MAX)),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            let output: Vec<String> = done
                .iter()
                .map(|f| format!("{}: {}{}", f.proc, f.stdout, f.stderr))
                .collect();
            panic!(
                "processes {names:?} did not finish within {deadline:?}; the others said:\n{}",
                output.join("\n")
            );
        }
        pending = still;
    }
    done
}

/// Asserts that every process exited 0, printing what the failing ones said.
pub fn assert_all_ok(finished: &[Finished]) {
    let bad: Vec<String> = finished
        .iter()
        .filter(|f| f.code != Some(0))
        .map(|f| {
            format!(
                "{} exited {:?}\nstdout: {}\nstderr: {}",
                f.proc, f.code, f.stdout, f.stderr
            )
        })
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n---\n"));
}

/// Runs `args` as every rank of each `(namespace, size)` job and checks they all exit 0.
pub fn run_jobs(
    host: &TestHost,
    jobs: &[(&str, u32)],
    args: &[&str],
    deadline: Duration,
) -> Vec<Finished> {
    // Every namespace is registered before any process starts, as a launcher does.
    let namespaces: Vec<_> = jobs
        .iter()
        .map(|(name, size)| (host.job(name, *size), *size))
        .collect();
    let mut started = Vec::new();
    for (ns, size) in namespaces {
        for r in 0..size {
            started.push(host.spawn(&Proc::new(ns.clone(), r), args, &[]));
        }
    }
    let finished = wait_all(started, deadline);
    assert_all_ok(&finished);
    finished
}

/// A `pmixrun --nameserver` process that separate runs share; killed (and its directory, which
/// holds its URI file and, as its `TMPDIR`, its socket's, removed) when dropped, so a failing
/// test leaves nothing behind.
#[derive(Debug)]
pub struct NameServerProcess {
    child: Option<std::process::Child>,
    /// The URI it printed once listening (`unix:<path>`).
    pub uri: String,
    file: PathBuf,
    dir: PathBuf,
    deadline: Duration,
}

static NEXT_NS_DIR: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl NameServerProcess {
    /// Starts one reporting its URI into a file of a fresh directory, and waits (at most
    /// `deadline`) for the URI line it prints once listening; the file must agree.
    pub fn start(pmixrun: &Path, deadline: Duration) -> NameServerProcess {
        Self::start_with(pmixrun, &[], deadline)
    }

    /// [`NameServerProcess::start`] with more options for `pmixrun --nameserver`
    /// (`--one-session`).
    pub fn start_with(pmixrun: &Path, args: &[&str], deadline: Duration) -> NameServerProcess {
        use std::io::BufRead;
        let dir = std::env::temp_dir().join(format!(
            "pmixrs-ns-test.{}.{}",
            std::process::id(),
            NEXT_NS_DIR.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir).expect("creating a directory for the URI file");
        let file = dir.join("ns.uri");
        // Its default socket directory goes into the test's: a name server killed before it
        // could remove it leaves nothing elsewhere.
        let mut child = Command::new(pmixrun)
            .arg("--nameserver")
            .args(args)
            .arg("--report-uri")
            .arg(&file)
            .env("TMPDIR", &dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| {
                let _ = std::fs::remove_dir_all(&dir);
                panic!("starting pmixrun --nameserver: {e}")
            });
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = unbounded();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut ns = NameServerProcess {
            child: Some(child),
            uri: String::new(),
            file,
            dir,
            deadline,
        };
        match lines.recv_timeout(deadline) {
            Ok(uri) => ns.uri = uri,
            Err(e) => panic!("the name server printed no URI within {deadline:?}: {e}"),
        }
        assert!(ns.uri.starts_with("unix:/"), "URI {:?}", ns.uri);
        // Written before the URI is printed.
        let reported = std::fs::read_to_string(&ns.file).expect("reading the URI file");
        assert_eq!(reported.trim(), ns.uri, "the URI file and stdout disagree");
        ns
    }

    /// `--nameserver-uri file:<the URI file>`.
    pub fn file_spec(&self) -> String {
        format!("file:{}", self.file.display())
    }

    /// SIGTERM; it must exit 0 before the deadline.
    pub fn stop(mut self) {
        use nix::sys::signal::{Signal, kill};
        let mut child = self.child.take().expect("running");
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
        kill(pid, Signal::SIGTERM).expect("signalling the name server");
        let (tx, rx) = unbounded();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait());
        });
        match rx.recv_timeout(self.deadline) {
            Ok(status) => {
                let status = status.expect("waiting for the name server");
                assert_eq!(status.code(), Some(0), "the name server exited {status:?}");
            }
            Err(_) => {
                let _ = kill(pid, Signal::SIGKILL);
                panic!(
                    "the name server did not stop within {:?} of SIGTERM",
                    self.deadline
                );
            }
        }
    }
}

impl Drop for NameServerProcess {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A command started with its stdout and stderr collected on threads.
#[derive(Debug)]
pub struct Running {
    child: std::process::Child,
    stdout: Receiver<String>,
    stderr: Receiver<String>,
}

/// How a command ended and what it printed.
#[derive(Debug)]
pub struct Output {
    /// Its exit status.
    pub status: std::process::ExitStatus,
    /// Everything it wrote on stdout.
    pub stdout: String,
    /// Everything it wrote on stderr.
    pub stderr: String,
}

/// Collects a pipe's text on a thread; the receiver gets all of it once the pipe closes.
pub fn collect_text(pipe: Option<impl Read + Send + 'static>) -> Receiver<String> {
    let (tx, rx) = unbounded();
    std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_string(&mut s);
        }
        let _ = tx.send(s);
    });
    rx
}

/// Reads a pipe's text on a thread: each line (without its newline) on the first receiver
/// as it comes, all of it on the second once the pipe closes.
pub fn stream_lines(
    pipe: Option<impl Read + Send + 'static>,
) -> (Receiver<String>, Receiver<String>) {
    use std::io::{BufRead, BufReader};
    let (lines_tx, lines) = unbounded();
    let (rest_tx, rest) = unbounded();
    std::thread::spawn(move || {
        let mut all = String::new();
        if let Some(out) = pipe {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                let _ = lines_tx.send(line.clone());
                all.push_str(&line);
                all.push('\n');
            }
        }
        let _ = rest_tx.send(all);
    });
    (lines, rest)
}

impl Running {
    /// Starts `cmd`, whose stdout and stderr must be piped; `what` names it in a failure.
    pub fn start(mut cmd: Command, what: &str) -> Running {
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
        let stdout = collect_text(child.stdout.take());
        let stderr = collect_text(child.stderr.take());
        Running {
            child,
            stdout,
            stderr,
        }
    }

    /// The command's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The command's stdin, when it was piped.
    pub fn stdin(&mut self) -> &mut std::process::ChildStdin {
        self.child
            .stdin
            .as_mut()
            .expect("the command's stdin is not piped")
    }

    /// A command already started whose stdout the caller reads itself and hands over as
    /// `stdout` (the rest of its text); stderr is collected here.
    pub fn with_stdout(mut child: std::process::Child, stdout: Receiver<String>) -> Running {
        let stderr = collect_text(child.stderr.take());
        Running {
            child,
            stdout,
            stderr,
        }
    }

    /// Waits for the command until `end`; past it, kills it (SIGTERM, which pmixrun passes on
    /// to its job, then SIGKILL) and fails the test, naming it `what`.
    pub fn finish(self, end: Instant, what: &str) -> Output {
        use nix::sys::signal::{Signal, kill};
        let Running {
            mut child,
            stdout,
            stderr,
        } = self;
        let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
        let (tx, rx) = unbounded();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait());
        });
        let text =
            |rx: &Receiver<String>| rx.recv_timeout(Duration::from_secs(10)).unwrap_or_default();
        let status = match rx.recv_deadline(end) {
            Ok(s) => s.expect("waiting for a command"),
            Err(_) => {
                let _ = kill(pid, Signal::SIGTERM);
                let _ = rx.recv_timeout(Duration::from_secs(5));
                let _ = kill(pid, Signal::SIGKILL);
                panic!(
                    "{what}: did not finish in time\nstdout: {}\nstderr: {}",
                    text(&stdout),
                    text(&stderr)
                );
            }
        };
        Output {
            status,
            stdout: text(&stdout),
            stderr: text(&stderr),
        }
    }
}

// ---- C programs compiled by the tests ---------------------------------------------------
//
// The test programs in C (`pmix-tests/openpmix/`, `pmix-tests/mpi/`) are compiled by the test
// run itself, once per test process, into `<target>/tmp/<kind>/`. They link system libraries
// (libpmix, Open MPI, MPICH) that `bash scripts/install-test-deps.sh` installs; a missing one
// fails the test that needs it with a message saying what to install.

/// What to say when a compiler, a library or an interpreter the tests need is missing.
pub const INSTALL_TEST_DEPS: &str = "install the test dependencies with \
     `bash scripts/install-test-deps.sh` (as root; it installs the Debian packages libpmix-dev, \
     libpmi2-0-dev, python3-pmix, openmpi-bin, libopenmpi-dev, mpich, libmpich-dev, pkg-config and \
     MPICH 5)";

/// Makes the libpmix programs `cmd` starts (programs compiled against Debian's libpmix 4.2)
/// load Open MPI 5's OpenPMIx 5.0.11 instead, through `LD_LIBRARY_PATH`: the two are binary
/// compatible for the calls the test programs make.
pub fn use_ompi5_libpmix(cmd: &mut Command) {
    let dir = Path::new("/opt/ompi5/lib/openmpi");
    assert!(
        dir.join("libpmix.so.2").is_file(),
        "Open MPI 5's libpmix is missing: {INSTALL_TEST_DEPS}"
    );
    cmd.env("LD_LIBRARY_PATH", dir);
}

/// A directory holding pmix-capi, pmix-rs's C API, under OpenPMIx's name `libpmix.so.2`,
/// built (once per test process) into the running test's target directory and profile.
pub fn capi_libpmix_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let profile = cargo_build(&["-p", "pmix-capi", "--lib"]);
        let built = profile.join("libpmix_capi.so");
        assert!(built.is_file(), "{} was not built", built.display());
        let dir = profile.join("capi-libpmix");
        std::fs::create_dir_all(&dir).expect("creating the library directory");
        let link = dir.join("libpmix.so.2");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&built, &link).expect("linking libpmix.so.2");
        dir
    })
}

/// Makes the libpmix programs `cmd` starts load pmix-capi ([`capi_libpmix_dir`]) instead of
/// the libpmix they were linked with, through `LD_LIBRARY_PATH`.
pub fn use_capi_libpmix(cmd: &mut Command) {
    cmd.env("LD_LIBRARY_PATH", capi_libpmix_dir());
}

/// Checks the loader's log (`LD_DEBUG=libs`, on `stderr`): `n` processes initialised our
/// `libpmix.so.2` ([`capi_libpmix_dir`]), and none any other `libpmix.so`.
pub fn assert_capi_libpmix_loaded(stderr: &str, n: usize, what: &str) {
    let ours = format!(
        "init: {}",
        capi_libpmix_dir().join("libpmix.so.2").display()
    );
    let inits: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("calling init:") && l.contains("/libpmix.so"))
        .collect();
    assert_eq!(
        inits.iter().filter(|l| l.contains(&ours)).count(),
        n,
        "{what}: {n} process(es) load our libpmix.so.2 ({ours}): {stderr}"
    );
    assert!(
        inits.iter().all(|l| l.contains(&ours)),
        "{what}: another libpmix was loaded too: {inits:#?}"
    );
}

/// Where the tests put programs they compile: `<target>/tmp/<kind>` (the directory Cargo
/// names `CARGO_TARGET_TMPDIR` for integration tests; the library is not given it), created
/// if need be.
pub fn compiled_programs_dir(kind: &str) -> PathBuf {
    let target = profile_dir()
        .parent()
        .expect("target directory")
        .to_path_buf();
    let dir = target.join("tmp").join(kind);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
    dir
}

/// Compiles `source` into `dir/exe` with `compiler`: `cflags` before the source, `libs`
/// after it. The program is written under a name of this process and then renamed into place,
/// since another test process of the same target directory may be running the previous one.
/// The error says which command failed and what it printed.
pub fn compile_c(
    compiler: &Path,
    cflags: &[String],
    source: &Path,
    libs: &[String],
    dir: &Path,
    exe: &str,
) -> Result<PathBuf, String> {
    let fresh = dir.join(format!("{exe}.new.{}", std::process::id()));
    let out = Command::new(compiler)
        .args(cflags)
        .arg("-o")
        .arg(&fresh)
        .arg(source)
        .args(libs)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running {}: {e}; {INSTALL_TEST_DEPS}", compiler.display()))?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&fresh);
        return Err(format!(
            "compiling {} with {} failed ({}):\n{}{}",
            source.display(),
            compiler.display(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let exe_path = dir.join(exe);
    std::fs::rename(&fresh, &exe_path)
        .map_err(|e| format!("renaming the new {} into place: {e}", exe_path.display()))?;
    Ok(exe_path)
}

/// Runs `build` for `key` once per test process, every caller getting its result; callers
/// for other keys are not held up meanwhile.
fn build_once(
    key: &str,
    build: impl FnOnce() -> Result<PathBuf, String>,
) -> Result<PathBuf, String> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, OnceLock};
    type Cell = Arc<OnceLock<Result<PathBuf, String>>>;
    static BUILT: OnceLock<Mutex<HashMap<String, Cell>>> = OnceLock::new();
    let cell = {
        let mut built = BUILT
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(built.entry(key.to_owned()).or_default())
    };
    cell.get_or_init(build).clone()
}

/// The directory of the OpenPMIx test programs' sources (`pmix-tests/openpmix`).
pub fn openpmix_sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("openpmix")
}

/// The compiler and linker flags of a library, from pkg-config.
#[derive(Clone, Debug)]
struct PkgFlags {
    cflags: Vec<String>,
    libs: Vec<String>,
}

/// The flags of the system libpmix (`pkg-config --cflags` / `--libs pmix`), asked once.
fn pmix_flags() -> Result<PkgFlags, String> {
    use std::sync::OnceLock;
    static FLAGS: OnceLock<Result<PkgFlags, String>> = OnceLock::new();
    FLAGS
        .get_or_init(|| {
            let ask = |what: &str| -> Result<Vec<String>, String> {
                let out = Command::new("pkg-config")
                    .args([what, "pmix"])
                    .stdin(Stdio::null())
                    .output()
                    .map_err(|e| format!("running pkg-config: {e}; {INSTALL_TEST_DEPS}"))?;
                if !out.status.success() {
                    return Err(format!(
                        "pkg-config {what} pmix failed (is libpmix-dev installed?): {}; \
                         {INSTALL_TEST_DEPS}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    ));
                }
                Ok(String::from_utf8_lossy(&out.stdout)
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect())
            };
            Ok(PkgFlags {
                cflags: ask("--cflags")?,
                libs: ask("--libs")?,
            })
        })
        .clone()
}

/// Like [`openpmix_program`], with the failure as an error.
pub fn try_openpmix_program(name: &str) -> Result<PathBuf, String> {
    build_once(&format!("openpmix/{name}"), || {
        let flags = pmix_flags()?;
        let mut cflags: Vec<String> = ["-O1", "-Wall", "-Wextra", "-Werror"]
            .map(String::from)
            .to_vec();
        cflags.extend(flags.cflags);
        compile_c(
            Path::new("gcc"),
            &cflags,
            &openpmix_sources().join(format!("{name}.c")),
            &flags.libs,
            &compiled_programs_dir("openpmix"),
            name,
        )
    })
}

/// `pmix-tests/openpmix/<name>.c` compiled with gcc against the system libpmix (OpenPMIx 4.2
/// on Debian 12), once per test process; panics saying what is missing if it cannot be built.
pub fn openpmix_program(name: &str) -> PathBuf {
    try_openpmix_program(name).unwrap_or_else(|e| panic!("{e}"))
}

/// `pmix_host`: a one-node launcher on the real OpenPMIx server library
/// (`pmix-tests/openpmix/pmix_host.c`; its header says how to use it).
pub fn openpmix_host() -> PathBuf {
    openpmix_program("pmix_host")
}

/// `pmix_host -n <n> -t <host_deadline_secs> -- <program> <args>`, with a clean environment
/// ([`clean_command`]): the host kills its clients after that many seconds.
pub fn under_pmix_host(n: u32, host_deadline_secs: u32, program: &Path, args: &[&str]) -> Command {
    let mut cmd = clean_command(&openpmix_host());
    cmd.args([
        "-n",
        &n.to_string(),
        "-t",
        &host_deadline_secs.to_string(),
        "--",
    ])
    .arg(program)
    .args(args);
    cmd
}

/// Checks a `pmix_client job abort <code>` run of 3 ranks, whatever launched it: the job
/// ended with `code`, rank 1 said it was aborting, and ranks 0 and 2 (waiting in a fence rank
/// 1 never joined) were killed, never finished.
pub fn check_abort_of_rank_1(out: &Output, what: &str, code: i32) {
    assert_eq!(out.status.code(), Some(code), "{what}: {out:#?}");
    assert_lines(
        out,
        what,
        "aborting",
        vec![format!("aborting rank=1 code={code}")],
    );
    assert_lines(out, what, "OK", Vec::new());
}

/// Open MPI's C compiler wrapper, by its full name: plain `mpicc` is a Debian alternative
/// that may be MPICH's.
pub const OPENMPI_MPICC: &str = "/usr/bin/mpicc.openmpi";

/// Open MPI's launcher (`mpirun`, ORTE, with an OpenPMIx server inside), by its full name.
pub const OPENMPI_MPIRUN: &str = "/usr/bin/mpirun.openmpi";

/// Like [`openmpi_program`], with the failure as an error.
pub fn try_openmpi_program(name: &str) -> Result<PathBuf, String> {
    build_once(&format!("openmpi/{name}"), || {
        let mpicc = Path::new(OPENMPI_MPICC);
        if !mpicc.exists() {
            return Err(format!(
                "{OPENMPI_MPICC} is missing (Debian's libopenmpi-dev); {INSTALL_TEST_DEPS}"
            ));
        }
        let cflags = ["-O1", "-Wall", "-Wextra", "-Werror"].map(String::from);
        compile_c(
            mpicc,
            &cflags,
            &openpmix_sources().join(format!("{name}.c")),
            &[],
            &compiled_programs_dir("openmpi"),
            name,
        )
    })
}

/// `pmix-tests/openpmix/<name>.c` compiled with Open MPI 4.1's wrapper ([`OPENMPI_MPICC`]),
/// once per test process; panics saying what is missing if it cannot be built.
pub fn openmpi_program(name: &str) -> PathBuf {
    try_openmpi_program(name).unwrap_or_else(|e| panic!("{e}"))
}

/// Debian's python3, the interpreter python3-pmix is installed for (another `python3` on
/// `PATH`, e.g. pyenv's, lacks the `pmix` module).
pub const SYSTEM_PYTHON: &str = "/usr/bin/python3";

/// The python3-pmix test client: (interpreter, script). Checks once that the interpreter
/// imports `pmix`, and panics saying what to install if not.
pub fn openpmix_python_client() -> (PathBuf, PathBuf) {
    use std::sync::OnceLock;
    static CHECKED: OnceLock<Result<(), String>> = OnceLock::new();
    let checked = CHECKED.get_or_init(|| {
        let out = Command::new(SYSTEM_PYTHON)
            .args(["-c", "import pmix"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("running {SYSTEM_PYTHON}: {e}; {INSTALL_TEST_DEPS}"))?;
        if out.status.success() {
            Ok(())
        } else {
            Err(format!(
                "{SYSTEM_PYTHON} cannot import pmix (python3-pmix): {}; {INSTALL_TEST_DEPS}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    });
    if let Err(e) = checked {
        panic!("{e}");
    }
    (
        PathBuf::from(SYSTEM_PYTHON),
        openpmix_sources().join("pmix_client.py"),
    )
}

/// What Open MPI 4.1 needs in its environment to run as the ranks of a job that a launcher
/// other than its own `mpirun` started (pmix_host, pmixrun): without a resource manager it
/// recognises it runs every process as a singleton of size 1, so these Slurm variables make
/// it take its job from PMIx (the values are not used); and the shared-memory transports only,
/// so that no rank opens a TCP listener on every interface.
pub fn openmpi_direct_launch_env() -> Vec<(&'static str, String)> {
    let host = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    vec![
        ("SLURM_JOBID", "1".to_owned()),
        ("SLURM_NODELIST", host),
        ("SLURM_STEP_ID", "0".to_owned()),
        ("OMPI_MCA_btl", "self,vader".to_owned()),
    ]
}

/// The lines of a test program's stdout that start with `word` (e.g. "OK", "job"), each
/// parsed into its `key=value` fields.
pub fn keyed_lines(stdout: &str, word: &str) -> Vec<std::collections::BTreeMap<String, String>> {
    stdout
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            (fields.next() == Some(word)).then(|| {
                fields
                    .filter_map(|f| f.split_once('='))
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect()
            })
        })
        .collect()
}

// ---- What the OpenPMIx test programs print -----------------------------------------------

/// Asserts that the run succeeded, showing all of it otherwise.
pub fn assert_ok(out: &Output, what: &str) {
    assert!(out.status.success(), "{what}: {out:#?}");
}

/// The stdout lines starting with `word`, sorted.
pub fn sorted_lines<'a>(out: &'a Output, word: &str) -> Vec<&'a str> {
    let mut lines: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.split_whitespace().next() == Some(word))
        .collect();
    lines.sort_unstable();
    lines
}

/// Asserts that the stdout lines starting with `word` are `want`, in any order.
pub fn assert_lines(out: &Output, what: &str, word: &str, mut want: Vec<String>) {
    want.sort_unstable();
    assert_eq!(sorted_lines(out, word), want, "{what}: {out:#?}");
}

/// Checks what the scenarios of `pmix_client`/`pmix_client.py` (and `pmix-oracle-client`'s
/// `job` and `modex` twins) printed for a job of `n` ranks, all on this node (app 0, one
/// node), whatever launched it.
pub fn check_client_output(out: &Output, what: &str, n: u32, scenarios: &[&str]) {
    assert_ok(out, what);
    let ranks = || 0..n;
    if scenarios.contains(&"job") {
        let jobs = keyed_lines(&out.stdout, "job");
        assert_eq!(jobs.len(), n as usize, "{what}: job lines: {out:#?}");
        let mut seen: Vec<u32> = Vec::new();
        for job in &jobs {
            let field = |k: &str| job.get(k).map(String::as_str).unwrap_or("(none)");
            let rank: u32 = field("rank").parse().expect("rank");
            seen.push(rank);
            let want: std::collections::BTreeMap<&str, String> = [
                ("size", n.to_string()),
                ("local_size", n.to_string()),
                ("univ_size", n.to_string()),
                ("nodeid", "0".to_owned()),
                ("local_rank", rank.to_string()),
                ("appnum", "0".to_owned()),
            ]
            .into_iter()
            .collect();
            for (k, v) in &want {
                assert_eq!(field(k), v, "{what}: {k} of rank {rank}: {out:#?}");
            }
            // Printed by the C and python clients, not by pmix-oracle-client.
            for (k, v) in [
                ("num_nodes", "1".to_owned()),
                ("node_rank", rank.to_string()),
            ] {
                if job.contains_key(k) {
                    assert_eq!(field(k), v, "{what}: {k} of rank {rank}: {out:#?}");
                }
            }
            assert_eq!(
                field("nspace"),
                jobs[0].get("nspace").map_or("(none)", String::as_str),
                "{what}: ranks disagree on the namespace: {out:#?}"
            );
        }
        seen.sort_unstable();
        assert_eq!(seen, ranks().collect::<Vec<_>>(), "{what}: {out:#?}");
    }
    let mut modex = Vec::new();
    for (scenario, collect) in [("modex", 1), ("modex-direct", 0)] {
        if scenarios.contains(&scenario) {
            modex.extend(ranks().map(|r| format!("modex rank={r} collect={collect} peers={n}")));
        }
    }
    assert_lines(out, what, "modex", modex);
    if scenarios.contains(&"fence") {
        let fences = if n >= 3 { 5 } else { 3 };
        let want = ranks()
            .map(|r| format!("fence rank={r} fences={fences}"))
            .collect();
        assert_lines(out, what, "fence", want);
    }
    if scenarios.contains(&"peers") {
        // How many changed values a rank sees changed depends on the store (see pmix_client.c).
        let mut seen: Vec<u32> = keyed_lines(&out.stdout, "peers")
            .iter()
            .map(|l| {
                let f = |k: &str| l.get(k).map(String::as_str).unwrap_or("(none)");
                assert_eq!(f("peers"), n.to_string(), "{what}: {out:#?}");
                assert_eq!(f("rounds"), "2", "{what}: {out:#?}");
                f("rank").parse().expect("rank")
            })
            .collect();
        seen.sort_unstable();
        assert_eq!(
            seen,
            ranks().collect::<Vec<_>>(),
            "{what}: peers lines: {out:#?}"
        );
    }
    if scenarios.contains(&"publish") {
        let want = ranks()
            .map(|r| format!("publish rank={r} looked_up={}", if r == 0 { 0 } else { 2 }))
            .collect();
        assert_lines(out, what, "publish", want);
    }
    let ok = ranks().map(|r| format!("OK rank={r} size={n}")).collect();
    assert_lines(out, what, "OK", ok);
}

// ---- Commands for the OpenPMIx tests ---------------------------------------------------------

/// A command with stdout and stderr piped and no PMIx, Open MPI or Slurm variables inherited
/// from whatever started the tests.
pub fn clean_command(program: &Path) -> Command {
    let mut cmd = Command::new(program);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if ["PMIX_", "PMIXRS_", "OMPI_", "SLURM_"]
            .iter()
            .any(|p| k.starts_with(p))
        {
            cmd.env_remove(&*k);
        }
    }
    cmd
}

/// `cmd` in a network namespace of its own, where only a loopback interface exists: Open
/// MPI's `mpirun` listens on every interface and cannot be told otherwise. Needs `unshare`
/// (util-linux) with user namespaces, and `ip` (iproute2) to bring the loopback interface up.
pub fn in_private_network(program: &Path, args: &[&str]) -> Command {
    let probe = Command::new("unshare")
        .args(["--net", "--map-root-user", "true"])
        .stdin(Stdio::null())
        .output();
    match probe {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "`unshare --net --map-root-user` fails here ({}): user namespaces are needed to \
             run mpirun on loopback only: {}",
            o.status,
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => panic!("running unshare (util-linux): {e}"),
    }
    let mut cmd = clean_command(Path::new("unshare"));
    cmd.args([
        "--net",
        "--map-root-user",
        "sh",
        "-c",
        "PATH=$PATH:/usr/sbin:/sbin; ip link set lo up && exec \"$@\"",
        "sh",
    ])
    .arg(program)
    .args(args);
    cmd
}

/// An application context running the calling program itself with `args`, `maxprocs`
/// processes of it, nothing else set: how the test clients spawn children of their own kind.
pub fn this_program(args: &[&str], maxprocs: u32) -> Result<pmix_wire::App, String> {
    let exe = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
    let exe = exe.to_string_lossy().into_owned();
    Ok(pmix_wire::App {
        cmd: exe.clone(),
        argv: std::iter::once(exe)
            .chain(args.iter().map(|a| (*a).to_owned()))
            .collect(),
        env: vec![],
        cwd: String::new(),
        maxprocs,
        info: vec![],
    })
}
