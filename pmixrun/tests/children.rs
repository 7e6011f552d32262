//! What a process pmixrun starts inherits: its signal mask and dispositions, its descriptors
//! (its own PMI-1 connection as `PMI_FD`, and nobody else's), its `argv[0]`; that it dies with
//! pmixrun; what pmixrun leaves in its temporary directory, and what it starts when
//! descriptors are short. Each run is bounded by pmixrun's `--timeout` and by a deadline here.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use crossbeam_channel::unbounded;
use nix::sys::signal::{SigSet, Signal, kill};
use nix::unistd::Pid;

const DEADLINE: Duration = Duration::from_secs(60);

/// What one run printed.
#[derive(Debug)]
struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Runs `cmd` to its end, at most [`DEADLINE`]; past it, kills it and fails the test.
fn run(mut cmd: Command) -> Run {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting the command");
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    let text = |pipe: Option<Box<dyn Read + Send>>| {
        let (tx, rx) = unbounded();
        std::thread::spawn(move || {
            let mut s = String::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_string(&mut s);
            }
            let _ = tx.send(s);
        });
        rx
    };
    let stdout = text(child.stdout.take().map(|p| Box::new(p) as _));
    let stderr = text(child.stderr.take().map(|p| Box::new(p) as _));
    let (tx, done) = unbounded();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let status = match done.recv_timeout(DEADLINE) {
        Ok(s) => s.expect("waiting for the command"),
        Err(_) => {
            // SIGTERM first: pmixrun passes it on, so the job's processes go too.
            let _ = kill(pid, Signal::SIGTERM);
            let _ = done.recv_timeout(Duration::from_secs(5));
            let _ = kill(pid, Signal::SIGKILL);
            panic!("{cmd:?} did not finish within {DEADLINE:?}");
        }
    };
    let collect = |rx: crossbeam_channel::Receiver<String>| {
        rx.recv_timeout(Duration::from_secs(10))
            .expect("output still open after the command ended")
    };
    Run {
        status,
        stdout: collect(stdout),
        stderr: collect(stderr),
    }
}

/// A directory of the test's own, removed with what it holds when dropped, also when the test
/// fails.
struct TestDir(std::path::PathBuf);

impl TestDir {
    fn new(tag: &str) -> TestDir {
        let dir =
            std::env::temp_dir().join(format!("pmixrun-children.{}.{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).expect("a temporary directory");
        TestDir(dir)
    }

    /// The names in it that start with `prefix`.
    fn entries(&self, prefix: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(&self.0)
            .expect("reading the test directory")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.starts_with(prefix))
            .collect();
        names.sort_unstable();
        names
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `pmixrun --timeout 50 ARGS...`.
fn pmixrun(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_pmixrun"));
    cmd.args(["--timeout", "50"]).args(args);
    cmd
}

/// `pmixrun ARGS...`, successful: its stdout's lines.
fn lines_of(cmd: Command) -> Vec<String> {
    let r = run(cmd);
    assert!(r.status.success() && r.stderr.is_empty(), "{r:?}");
    r.stdout.lines().map(str::to_owned).collect()
}

/// The bit of `sig` in a /proc status signal set.
/// What rank `rank` printed: the lines pmixrun tagged `[rank] `, without the tag.
fn rank_lines(lines: &[String], rank: u32) -> Vec<String> {
    let prefix = format!("[{rank}] ");
    lines
        .iter()
        .filter_map(|l| l.strip_prefix(&prefix))
        .map(str::to_owned)
        .collect()
}

fn bit(sig: Signal) -> u64 {
    1 << (sig as u32 - 1)
}

/// The `SigBlk` and `SigIgn` lines of /proc/self/status (a `grep` of them as printed), as
/// numbers.
fn masks(lines: &[String]) -> (u64, u64) {
    let field = |name: &str| {
        let found: Vec<u64> = lines
            .iter()
            .filter_map(|l| l.strip_prefix(name))
            .map(|v| u64::from_str_radix(v.trim(), 16).expect("a hexadecimal signal set"))
            .collect();
        assert_eq!(found.len(), 1, "one {name} in {lines:?}");
        found[0]
    };
    (field("SigBlk:"), field("SigIgn:"))
}

/// The signal sets of a process started directly by this test: the environment's.
fn own_children_masks() -> (u64, u64) {
    let mut cmd = Command::new("grep");
    cmd.args(["-E", "^Sig(Blk|Ign):", "/proc/self/status"]);
    masks(&lines_of(cmd))
}

/// glibc's own signals (SIGCANCEL, SIGSETXID, 32 and 33, below SIGRTMIN): glibc's posix_spawn,
/// which std's `Command` uses, sets them to SIG_IGN in the new process before its exec, so any
/// process started that way has them ignored, this test's own children too. No program sees
/// them: glibc's SIGRTMIN is 34.
const GLIBC_INTERNAL: u64 = 0b11 << 31;

#[test]
fn processes_start_with_no_signal_blocked_and_only_inherited_ones_ignored() {
    // Blocked here, inherited by pmixrun (std's Command keeps the mask), unblocked by it.
    let blocked = SigSet::from_iter([Signal::SIGUSR1, Signal::SIGINT, Signal::SIGTERM]);
    blocked.thread_block().expect("blocking signals");
    let grep = ["grep", "-E", "^Sig(Blk|Ign):", "/proc/self/status"];
    let mut args = vec!["-n", "2", "--tag-output"];
    args.extend(grep);
    let lines = lines_of(pmixrun(&args));
    // pmixrun started from a shell that ignores the signals it forwards (and SIGQUIT): it
    // catches the former, so its processes have them back at their default actions.
    let mut sh = Command::new("sh");
    sh.arg("-c")
        .arg(r#"trap '' INT TERM HUP QUIT; exec "$@""#)
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_pmixrun"))
        .args(["--timeout", "50", "-n", "1"])
        .args(grep);
    let ignoring = lines_of(sh);
    blocked.thread_unblock().expect("unblocking signals");

    let (_, env_ignored) = own_children_masks();
    let forwarded = bit(Signal::SIGINT) | bit(Signal::SIGTERM) | bit(Signal::SIGHUP);
    for rank in 0..2 {
        let mine = rank_lines(&lines, rank);
        let (blk, ign) = masks(&mine);
        assert_eq!(blk, 0, "rank {rank}: blocked signals {blk:#x}");
        assert_eq!(
            ign & !GLIBC_INTERNAL,
            env_ignored & !GLIBC_INTERNAL & !forwarded,
            "rank {rank}: ignored signals {ign:#x}, where this test's children have \
             {env_ignored:#x}"
        );
        assert_eq!(ign & (forwarded | bit(Signal::SIGPIPE)), 0, "rank {rank}");
    }
    let (blk, ign) = masks(&ignoring);
    assert_eq!(blk, 0);
    assert_eq!(
        ign & !GLIBC_INTERNAL,
        (env_ignored & !GLIBC_INTERNAL & !forwarded) | bit(Signal::SIGQUIT),
        "{ign:#x}: SIGQUIT inherited, the forwarded signals at their defaults"
    );
}

/// `ls -l /proc/self/fd` as printed: descriptor number to what it is.
fn descriptors(lines: &[String]) -> BTreeMap<i32, String> {
    lines
        .iter()
        .filter_map(|l| {
            let (left, target) = l.split_once(" -> ")?;
            let fd = left.split_whitespace().last()?.parse().ok()?;
            Some((fd, target.to_owned()))
        })
        .collect()
}

#[test]
fn a_pmi1_process_inherits_its_own_connection_as_pmi_fd_and_nothing_else() {
    // What this test's own children inherit, beyond stdio: descriptors the test was given
    // (by cargo, a CI runner); pmixrun passes those on too.
    let mut ls = Command::new("ls");
    ls.args(["-l", "/proc/self/fd"]);
    let env_fds: BTreeSet<i32> = descriptors(&lines_of(ls))
        .into_iter()
        .filter(|(fd, target)| *fd > 2 && !target.starts_with("/proc/"))
        .map(|(fd, _)| fd)
        .collect();

    let lines = lines_of(pmixrun(&[
        "--pmi",
        "pmi1",
        "--tag-output",
        "-n",
        "4",
        "sh",
        "-c",
        r#"echo "PMI_FD=$PMI_FD"; exec ls -l /proc/self/fd"#,
    ]));
    let mut sockets = BTreeSet::new();
    for rank in 0..4 {
        let mine = rank_lines(&lines, rank);
        let pmi_fd: i32 = mine
            .iter()
            .find_map(|l| l.strip_prefix("PMI_FD="))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("rank {rank}: no PMI_FD in {mine:?}"));
        assert!(pmi_fd > 2, "rank {rank}: PMI_FD={pmi_fd}");
        let fds = descriptors(&mine);
        // Rank 0 reads pmixrun's input (`--stdin` 0 by default) through a pipe.
        let stdin = fds.get(&0).map(String::as_str).unwrap_or_default();
        if rank == 0 {
            assert!(stdin.starts_with("pipe:"), "{fds:?}");
        } else {
            assert_eq!(stdin, "/dev/null", "{fds:?}");
        }
        for out in [1, 2] {
            assert!(
                fds.get(&out).is_some_and(|t| t.starts_with("pipe:")),
                "{fds:?}"
            );
        }
        let socket = fds.get(&pmi_fd).filter(|t| t.starts_with("socket:"));
        let socket = socket.unwrap_or_else(|| panic!("rank {rank}: PMI_FD not a socket: {fds:?}"));
        assert!(sockets.insert(socket.clone()), "{socket} given twice");
        // Nothing else: not another rank's connection, nor any of pmixrun's own descriptors
        // (ls's listing of the directory it reads aside).
        let others: Vec<_> = fds
            .iter()
            .filter(|(fd, target)| {
                **fd > 2 && **fd != pmi_fd && !env_fds.contains(fd) && !target.starts_with("/proc/")
            })
            .collect();
        assert!(others.is_empty(), "rank {rank} inherited {others:?}");
    }

    // A PMIx process gets no descriptor at all (it connects to the server's socket itself).
    let lines = lines_of(pmixrun(&[
        "--pmi",
        "pmix",
        "--tag-output",
        "-n",
        "2",
        "sh",
        "-c",
        r#"echo "PMI_FD=${PMI_FD-unset}"; exec ls -l /proc/self/fd"#,
    ]));
    for rank in 0..2 {
        let mine = rank_lines(&lines, rank);
        assert!(mine.iter().any(|l| l == "PMI_FD=unset"), "{mine:?}");
        let others: Vec<_> = descriptors(&mine)
            .into_iter()
            .filter(|(fd, target)| {
                *fd > 2 && !env_fds.contains(fd) && !target.starts_with("/proc/")
            })
            .collect();
        assert!(others.is_empty(), "rank {rank} inherited {others:?}");
    }
}

#[test]
fn the_program_sees_its_name_as_given_and_scripts_without_interpreter_line_run() {
    // argv[0] is the name on the command line, not the file found in PATH.
    let r = run(pmixrun(&["-n", "1", "cat", "/proc/self/cmdline"]));
    assert_eq!(r.status.code(), Some(0), "{r:?}");
    // (pmixrun ends the output's last line.)
    assert_eq!(r.stdout, "cat\0/proc/self/cmdline\0\n");

    // A script without `#!` runs with the shell, as execvp (and so a shell, or Hydra) runs it.
    let dir = TestDir::new("script");
    let dir = &dir.0;
    let script = dir.join("plain-script");
    std::fs::write(&script, "echo \"script $PMIX_RANK $1\"\n").expect("writing the script");
    let mut perms = std::fs::metadata(&script)
        .expect("the script's metadata")
        .permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&script, perms).expect("making the script executable");
    let dir_arg = dir.to_str().expect("utf-8 temp dir");
    let r = run(pmixrun(&[
        "-n",
        "2",
        "--wdir",
        dir_arg,
        "./plain-script",
        "arg",
    ]));
    assert!(r.status.success() && r.stderr.is_empty(), "{r:?}");
    let mut lines: Vec<&str> = r.stdout.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["script 0 arg", "script 1 arg"], "{r:?}");
}

/// Processes this test must kill should it fail (they would otherwise outlive it).
struct Reap(Vec<Pid>);

impl Drop for Reap {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = kill(*pid, Signal::SIGKILL);
        }
    }
}

/// A started command's stdout, line by line.
fn stdout_lines(child: &mut std::process::Child) -> crossbeam_channel::Receiver<String> {
    use std::io::BufRead;
    let out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let (tx, lines) = unbounded();
    std::thread::spawn(move || {
        // Until the pipe closes, or nobody listens any more.
        let _ = out
            .lines()
            .map_while(Result::ok)
            .try_for_each(|l| tx.send(l));
    });
    lines
}

/// Waits for `child` at most [`DEADLINE`]; past it, kills it and fails the test.
fn wait(mut child: std::process::Child, what: &str) -> ExitStatus {
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    let (tx, done) = unbounded();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    match done.recv_timeout(DEADLINE) {
        Ok(s) => s.expect("waiting"),
        Err(_) => {
            let _ = kill(pid, Signal::SIGKILL);
            panic!("{what} did not end within {DEADLINE:?}");
        }
    }
}

/// Starts `pmixrun --nameserver` with `TMPDIR` `tmp` and waits for the URI it prints.
fn start_nameserver(mut cmd: Command, tmp: &std::path::Path) -> (std::process::Child, String) {
    let mut child = cmd
        .env("TMPDIR", tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("starting pmixrun --nameserver");
    let lines = stdout_lines(&mut child);
    match lines.recv_timeout(DEADLINE) {
        Ok(uri) => (child, uri),
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the name server printed no URI within {DEADLINE:?}: {e}")
        }
    }
}

#[test]
fn a_killed_pmixrun_takes_its_processes_along_and_its_leftovers_go() {
    use std::os::fd::AsFd;
    let tmp = TestDir::new("kill");
    // Each rank holds the FIFO open for writing; reading it ends when every rank has ended.
    let fifo = tmp.0.join("alive");
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let reader = std::fs::File::options()
        .read(true)
        .custom_flags(libc_o_nonblock())
        .open(&fifo)
        .expect("opening the FIFO");
    let mut cmd = pmixrun(&[
        "-n",
        "2",
        "sh",
        "-c",
        r#"exec 3>"$1"; echo "ready $$"; exec sleep 600"#,
        "sh",
    ]);
    cmd.arg(&fifo)
        .env("TMPDIR", &tmp.0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().expect("starting pmixrun");
    let pmixrun_pid = Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    let mut ranks = Reap(vec![pmixrun_pid]);
    let lines = stdout_lines(&mut child);
    while ranks.0.len() < 3 {
        match lines.recv_timeout(DEADLINE) {
            Ok(l) => {
                let pid = l.strip_prefix("ready ").and_then(|p| p.parse().ok());
                let pid = pid.unwrap_or_else(|| panic!("unexpected output {l:?}"));
                ranks.0.push(Pid::from_raw(pid));
            }
            Err(e) => panic!("the ranks never got ready: {e}"),
        }
    }
    assert_eq!(tmp.entries("pmixrs.").len(), 1, "one rendezvous directory");
    kill(pmixrun_pid, Signal::SIGKILL).expect("killing pmixrun");
    let status = wait(child, "pmixrun after SIGKILL");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9)
    );

    // Every rank is gone once the FIFO has no writer left.
    nix::fcntl::fcntl(
        reader.as_fd(),
        nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::empty()),
    )
    .expect("making the FIFO blocking");
    let (tx, eof) = unbounded();
    std::thread::spawn(move || {
        let mut reader = reader;
        let mut buf = [0u8; 16];
        let _ = tx.send(reader.read(&mut buf));
    });
    match eof.recv_timeout(Duration::from_secs(10)) {
        Ok(Ok(0)) => {}
        Ok(r) => panic!("reading the FIFO: {r:?}"),
        Err(_) => panic!(
            "the ranks {:?} outlived pmixrun by 10 s (killed now)",
            &ranks.0[1..]
        ),
    }

    // The rendezvous directory it could not remove goes with the next pmixrun's start.
    assert_eq!(tmp.entries("pmixrs.").len(), 1, "left behind by SIGKILL");
    let mut next = pmixrun(&["-n", "1", "true"]);
    next.env("TMPDIR", &tmp.0);
    let r = run(next);
    assert!(r.status.success() && r.stderr.is_empty(), "{r:?}");
    assert_eq!(tmp.entries("pmixrs."), Vec::<String>::new());

    // The same for the name server's default directory.
    let mut ns = Command::new(env!("CARGO_BIN_EXE_pmixrun"));
    ns.arg("--nameserver");
    let (mut first, _) = start_nameserver(ns, &tmp.0);
    first.kill().expect("killing the name server");
    let _ = wait(first, "the name server after SIGKILL");
    assert_eq!(tmp.entries("pmixrs-ns.").len(), 1, "left behind by SIGKILL");
    let mut ns = Command::new(env!("CARGO_BIN_EXE_pmixrun"));
    ns.arg("--nameserver");
    let (second, uri) = start_nameserver(ns, &tmp.0);
    let second_pid = Pid::from_raw(i32::try_from(second.id()).expect("pid"));
    let _reap = Reap(vec![second_pid]);
    assert_eq!(
        tmp.entries("pmixrs-ns.").len(),
        1,
        "only the second's: {uri}"
    );
    kill(second_pid, Signal::SIGTERM).expect("stopping the name server");
    let status = wait(second, "the name server after SIGTERM");
    assert_eq!(status.code(), Some(0));
    assert_eq!(tmp.entries("pmixrs-ns."), Vec::<String>::new());
}

/// O_NONBLOCK, for opening a FIFO's read end before any writer.
fn libc_o_nonblock() -> i32 {
    nix::fcntl::OFlag::O_NONBLOCK.bits()
}

#[test]
fn names_taken_in_advance_stop_neither_pmixrun_nor_its_name_server() {
    let tmp = TestDir::new("taken");
    // `$$` is pmixrun's pid once the shell execs it: the names a predictable scheme would use
    // (`pmixrs.<pid>.0`, `pmixrs-ns.<pid>`) are taken before pmixrun starts.
    let take = r#"mkdir "$TMPDIR/pmixrs.$$.0" "$TMPDIR/pmixrs-ns.$$" && exec "$0" "$@""#;
    let mut job = Command::new("sh");
    job.args(["-c", take, env!("CARGO_BIN_EXE_pmixrun")])
        .args(["--timeout", "50", "-n", "1", "true"])
        .env("TMPDIR", &tmp.0);
    let r = run(job);
    assert!(r.status.success() && r.stderr.is_empty(), "{r:?}");

    let mut ns = Command::new("sh");
    ns.args(["-c", take, env!("CARGO_BIN_EXE_pmixrun"), "--nameserver"]);
    let (child, uri) = start_nameserver(ns, &tmp.0);
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    let _reap = Reap(vec![pid]);
    assert!(uri.starts_with("unix:/"), "{uri}");
    kill(pid, Signal::SIGTERM).expect("stopping the name server");
    assert_eq!(wait(child, "the name server").code(), Some(0));
    // Only the names taken in advance are left, two per run (the test's to remove).
    assert_eq!(tmp.entries("pmixrs").len(), 4, "{:?}", tmp.entries(""));
}

#[test]
fn a_job_needing_more_descriptors_than_allowed_is_not_started() {
    let limited = |n: &str| {
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            r#"ulimit -n 64 && exec "$0" "$@""#,
            env!("CARGO_BIN_EXE_pmixrun"),
        ])
        .args(["--timeout", "50", "-n", n, "sh", "-c", "echo started"]);
        run(cmd)
    };
    let r = limited("40");
    assert_eq!(r.status.code(), Some(1), "{r:?}");
    assert_eq!(r.stdout, "", "no process started: {r:?}");
    assert!(
        r.stderr.contains("ulimit -n") && r.stderr.contains("64") && r.stderr.contains("40"),
        "the message names the limit and the remedy: {r:?}"
    );
    let r = limited("4");
    assert!(r.status.success() && r.stderr.is_empty(), "{r:?}");
    assert_eq!(r.stdout.lines().count(), 4, "{r:?}");
}

#[test]
fn pmixrun_raises_its_soft_descriptor_limit_within_the_hard_one() {
    let (_, hard) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .expect("getrlimit");
    let mut cmd = Command::new("sh");
    cmd.args([
        "-c",
        r#"ulimit -Sn 64 && exec "$0" "$@""#,
        env!("CARGO_BIN_EXE_pmixrun"),
    ])
    .args(["--timeout", "50", "-n", "40", "sh", "-c", "ulimit -Sn"]);
    let r = run(cmd);
    assert!(
        r.status.success(),
        "40 processes under a soft limit of 64: {r:?}"
    );
    let want = hard.min(65536).to_string();
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 40, "{r:?}");
    assert!(
        lines.iter().all(|l| l.trim() == want),
        "each process inherits the raised soft limit {want}: {lines:?}"
    );
}
