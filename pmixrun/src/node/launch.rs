//! Starting the processes of a job ([`start`], straight from pmixrun: no helper process in
//! between) and watching them ([`watch`]: a thread per output pipe and one waiting for its
//! end, each reporting over a channel).

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, PoisonError};

use crossbeam_channel::Sender;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use pmix_types::{Proc, Status};

use crate::cli::App;
use crate::node::host::Event;
use crate::node::output::{Line, SMALL_STACK, Stream, start_reader};

/// Why a process could not be started, and the exit status pmixrun then ends with.
#[derive(Debug)]
pub(crate) struct LaunchError {
    /// The one-line message (without the `pmixrun: ` prefix).
    pub(crate) message: String,
    /// The exit status, as a shell gives for the same failure.
    pub(crate) code: u8,
    /// The status a spawn that failed this way is answered with.
    pub(crate) status: Status,
}

impl LaunchError {
    /// A failure that is neither a missing nor a forbidden program.
    pub(crate) fn other(message: String) -> LaunchError {
        LaunchError {
            message,
            code: 1,
            status: Status::ERR_JOB_FAILED_TO_LAUNCH,
        }
    }
}

/// Explains an I/O error the way a shell would, without Rust's "(os error N)" suffix.
pub(crate) fn describe(e: &std::io::Error) -> String {
    match e.raw_os_error() {
        Some(n) => nix::errno::Errno::from_raw(n).desc().to_owned(),
        None => e.to_string(),
    }
}

/// The `-x` variables of `app` with their values: `-x VAR` takes pmixrun's own value, and is
/// left out (with a warning) when pmixrun has none.
pub(crate) fn app_env(app: &App) -> Vec<(OsString, OsString)> {
    app.env
        .iter()
        .filter_map(|(name, value)| match value {
            Some(v) => Some((name.clone(), v.clone())),
            None => {
                let v = std::env::var_os(name);
                if v.is_none() {
                    tracing::warn!(
                        "-x {}: not set in pmixrun's environment, not passed on",
                        name.to_string_lossy()
                    );
                }
                v.map(|v| (name.clone(), v))
            }
        })
        .collect()
}

/// pmixrun's environment as the processes of other nodes get it (where pmixrun's own
/// processes inherit it): every variable but pmixrun's [`launcher_variable`]s and those that
/// describe this machine or this login rather than the job (`HOSTNAME`, `TMPDIR`, `PWD`, `SSH_*`,
/// `DISPLAY`...). The daemons' own environment (the remote login's) lies beneath it.
pub(crate) fn forwarded_env() -> Vec<(OsString, OsString)> {
    const MACHINE: [&str; 9] = [
        "HOSTNAME",
        "TMPDIR",
        "PWD",
        "OLDPWD",
        "SHLVL",
        "_",
        "DISPLAY",
        "XAUTHORITY",
        "TERM_SESSION_ID",
    ];
    std::env::vars_os()
        .filter(|(k, _)| {
            !launcher_variable(k)
                && !k.as_encoded_bytes().starts_with(b"SSH_")
                && !MACHINE.iter().any(|m| k.as_encoded_bytes() == m.as_bytes())
        })
        .collect()
}

/// True for the variables a process must not inherit from pmixrun's own environment: those
/// of a launcher pmixrun itself may run under. MPICH refuses to start when it sees both PMI
/// and PMIx variables.
fn launcher_variable(name: &OsStr) -> bool {
    let n = name.as_encoded_bytes();
    n.starts_with(b"PMI_") || n.starts_with(b"PMIX_") || n.starts_with(b"MPI_LOCAL")
}

/// The names of pmixrun's own [`launcher_variable`]s, which every process is started
/// without.
pub(crate) fn launcher_variables() -> Vec<OsString> {
    std::env::vars_os()
        .map(|(k, _)| k)
        .filter(|k| launcher_variable(k))
        .collect()
}

/// The exit status a shell gives when it cannot start a program.
fn exit_code_for(e: &std::io::Error) -> u8 {
    match e.kind() {
        std::io::ErrorKind::NotFound => 127,
        std::io::ErrorKind::PermissionDenied => 126,
        _ => 1,
    }
}

/// The PMIx status of a spawn whose program cannot be started.
fn spawn_status_for(e: &std::io::Error) -> Status {
    match e.kind() {
        std::io::ErrorKind::NotFound => Status::ERR_JOB_EXE_NOT_FOUND,
        std::io::ErrorKind::PermissionDenied => Status::ERR_JOB_APP_NOT_EXECUTABLE,
        _ => Status::ERR_JOB_FAILED_TO_LAUNCH,
    }
}

/// Finds, as `execvp` will, the program that `program` starts from `wdir`, so that a missing
/// program is reported by pmixrun itself rather than as the exit status of a process.
pub(crate) fn find_program(
    program: &OsStr,
    wdir: &Path,
    user_env: &[(OsString, OsString)],
) -> std::io::Result<PathBuf> {
    use std::io::{Error, ErrorKind};
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| -> std::io::Result<()> {
        let meta = std::fs::metadata(p)?;
        if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
            Ok(())
        } else {
            Err(Error::from_raw_os_error(nix::errno::Errno::EACCES as i32))
        }
    };
    if program.as_encoded_bytes().contains(&b'/') {
        let p = wdir.join(program);
        return executable(&p).map(|()| p);
    }
    // The program's PATH is pmixrun's unless `-x PATH=...` changes it.
    let path = user_env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_else(|| "/usr/bin:/bin".into());
    let mut last = Error::from(ErrorKind::NotFound);
    for dir in std::env::split_paths(&path) {
        let p = wdir.join(dir).join(program);
        match executable(&p) {
            Ok(()) => return Ok(p),
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => last = e,
        }
    }
    if last.kind() == ErrorKind::NotFound {
        last = Error::from_raw_os_error(nix::errno::Errno::ENOENT as i32);
    }
    Err(last)
}

/// Finds the program the processes of `app` start from `wdir`, as `execvp` would, so that a
/// missing program is reported by pmixrun (or answers a spawn) rather than being the exit
/// status of a process.
pub(crate) fn check_app(
    app: &App,
    wdir: &Path,
    user_env: &[(OsString, OsString)],
) -> Result<PathBuf, LaunchError> {
    find_program(&app.program, wdir, user_env).map_err(|e| LaunchError {
        message: format!(
            "cannot start {}: {}",
            app.program.to_string_lossy(),
            describe(&e)
        ),
        code: exit_code_for(&e),
        status: spawn_status_for(&e),
    })
}

/// The descriptors pmixrun keeps per process: the read ends of its stdout and stderr pipes,
/// and the server's end of its connection.
const FDS_PER_PROCESS: u64 = 3;

/// Descriptors kept free beyond those: what starting one process takes for a moment (its ends
/// of the pipes, std's error pipe, a PMI-1 socket pair) and what pmixrun itself may still open.
const FDS_SPARE: u64 = 16;

/// The soft descriptor limit pmixrun raises itself to at start (within the hard limit): a
/// server of a few thousand processes needs more than the usual 1024, and its processes
/// inherit a limit that is common anyway.
const FDS_AT_START: u64 = 65536;

/// Raises the soft descriptor limit towards the hard one, to [`FDS_AT_START`] (a running
/// server that runs out of descriptors waits for some to free up; better it never does).
pub(crate) fn raise_descriptor_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    let want = FDS_AT_START.min(hard);
    if want > soft {
        if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, want, hard) {
            tracing::debug!("cannot raise the descriptor limit from {soft} to {want}: {e}");
        }
    }
}

/// Checks that `n` more processes fit within pmixrun's descriptor limit, before any of them
/// is started: a job is started whole or not at all. The soft limit is raised as far as the
/// hard one allows when that makes them fit.
pub(crate) fn check_descriptors(n: u32) -> Result<(), LaunchError> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return Ok(());
    };
    // Those open now (less the one reading the directory).
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return Ok(());
    };
    let open = (dir.count() as u64).saturating_sub(1);
    let need = FDS_PER_PROCESS * u64::from(n) + FDS_SPARE;
    if open + need <= soft {
        return Ok(());
    }
    if open + need <= hard && setrlimit(Resource::RLIMIT_NOFILE, open + need, hard).is_ok() {
        return Ok(());
    }
    let fits = soft.saturating_sub(open + FDS_SPARE) / FDS_PER_PROCESS;
    let want = open + need;
    let remedy = if want <= hard {
        format!("raise it with `ulimit -n {want}` (the hard limit is {hard})")
    } else {
        format!("the hard limit is {hard}: ask for more, or start fewer processes")
    };
    Err(LaunchError {
        message: format!(
            "not enough file descriptors for {n} processes: pmixrun keeps about \
             {FDS_PER_PROCESS} per process and may open {soft} (`ulimit -n`), {open} of them \
             open already, so {fits} more processes fit; {remedy}"
        ),
        code: 1,
        status: Status::ERR_OUT_OF_RESOURCE,
    })
}

/// Everything one process is started with.
pub(crate) struct Spawn<'a> {
    /// The program's file, as [`find_program`] found it.
    pub(crate) path: &'a Path,
    pub(crate) app: &'a App,
    /// The `-x` variables.
    pub(crate) user_env: &'a [(OsString, OsString)],
    /// pmixrun's own variables the process must not inherit ([`launcher_variables`]).
    pub(crate) scrub: &'a [OsString],
    /// What `setup_fork` (or `setup_fork_pmi1`) gave.
    pub(crate) pmix_env: Vec<(String, String)>,
    /// The launcher variables (`launcher_env.rs`), beneath the `-x` ones.
    pub(crate) launcher_env: Vec<(String, String)>,
    /// The CPUs to pin the process to before its program starts (`binding.rs`), if any.
    pub(crate) pin: Option<String>,
    /// A PMI-1 process's end of its connection, to be inherited as `PMI_FD`.
    pub(crate) pmi_fd: Option<OwnedFd>,
    pub(crate) wdir: &'a Path,
    /// Its stdin is a pipe for forwarded input ([`crate::node::stdin`]), not /dev/null.
    pub(crate) stdin: bool,
}

/// Held while a process is being created. A PMI-1 process's end of its connection must
/// survive its exec, so its close-on-exec flag is cleared just before the spawn, and pmixrun's
/// copy is closed right after it; every process created in that window would inherit it too.
/// Processes are created only by [`start`] (pmixrun runs nothing else, and neither its server
/// nor its libraries start processes), and [`start`] holds this lock from the clearing to the
/// closing, so no other process can. (Today one thread, the supervisor's, starts every process;
/// the lock keeps that reasoning true should that change.) Every other descriptor pmixrun
/// makes is close-on-exec (std and mio open everything so), so nothing else leaks either.
static SPAWNING: Mutex<()> = Mutex::new(());

/// The `PMI_FD` descriptor made ready to be inherited: a number above stdin, stdout and
/// stderr (which the spawn replaces; std keeps those three open in pmixrun, so this is only
/// a guard), without close-on-exec. Call it with [`SPAWNING`] held.
fn inheritable(fd: OwnedFd) -> std::io::Result<OwnedFd> {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    // std duplicates with F_DUPFD_CLOEXEC from 3 up.
    let fd = if fd.as_raw_fd() <= 2 {
        fd.try_clone()?
    } else {
        fd
    };
    fcntl(&fd, FcntlArg::F_SETFD(FdFlag::empty()))?;
    Ok(fd)
}

/// The first argument of pmixrun started by itself as a process of a job, before it execs the
/// job's program: [`exec_program`].
pub(crate) const EXEC_MARKER: &str = "--pmixrun-internal-exec";

/// pmixrun's own program, as the kernel knows it (also when its file was replaced since).
const SELF: &str = "/proc/self/exe";

/// Starts one process: std's `Command` (posix_spawn or fork and exec) runs pmixrun's own
/// program again ([`EXEC_MARKER`]), which asks for SIGKILL should pmixrun die
/// (`PR_SET_PDEATHSIG`, kept across exec) and execs the job's program in place, same process,
/// same pid ([`exec_program`]); so no process of a job outlives pmixrun, even killed with
/// SIGKILL or crashed. The process is in its own process group, so that a terminal's Ctrl-C
/// reaches only pmixrun (which passes it on once), and so that signals reach whatever the
/// process started.
///
/// The parent-death signal is sent when the *thread* that created the process ends, not the
/// process: every process is created here, on pmixrun's main thread (the supervisor's), which
/// lives as long as pmixrun. The kernel clears it on the exec of a set-user-ID or set-group-ID
/// program (or one with file capabilities), which then does not die with pmixrun. Processes
/// the process itself starts are its own to end.
///
/// The process starts with an empty signal mask and every signal at its default action unless
/// pmixrun's own parent had it ignored: pmixrun blocks no signal (`main` empties its mask and
/// catches the signals it forwards with handlers, which exec resets), and std resets the
/// SIGPIPE that Rust programs ignore (at each exec). (glibc's posix_spawn, which std uses,
/// leaves glibc's own two signals below SIGRTMIN, 32 and 33, ignored, as in every process
/// started that way; no program sees them.) Its stdin is /dev/null, or a pipe for
/// [`crate::node::stdin`]; its stdout and stderr are pipes for [`watch`].
pub(crate) fn start(mut s: Spawn<'_>) -> Result<Child, LaunchError> {
    debug_assert_eq!(
        std::thread::current().name(),
        Some("main"),
        "the parent-death signal follows the thread that creates a process"
    );
    let pmi_fd = s.pmi_fd.take();
    let failed = |e: std::io::Error| LaunchError {
        message: format!(
            "cannot start {}: {}",
            s.app.program.to_string_lossy(),
            describe(&e)
        ),
        code: exit_code_for(&e),
        status: spawn_status_for(&e),
    };
    // A poisoned lock guards nothing broken: it holds no data.
    let serial = SPAWNING.lock().unwrap_or_else(PoisonError::into_inner);
    let inherited = match pmi_fd {
        Some(fd) => Some(inheritable(fd).map_err(|e| {
            LaunchError::other(format!(
                "cannot pass the PMI connection on: {}",
                describe(&e)
            ))
        })?),
        None => None,
    };
    let pmi_fd = inherited.as_ref().map(AsRawFd::as_raw_fd);
    let spawned = command(&s, pmi_fd).spawn();
    // pmixrun's copy goes at once (the process has its own): the connection must close when
    // the process ends, and no later process may inherit it.
    drop(inherited);
    drop(serial);
    spawned.map_err(failed)
}

/// The command that starts `s`: pmixrun's own program, which [`exec_program`]s it.
fn command(s: &Spawn<'_>, pmi_fd: Option<i32>) -> Command {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(SELF);
    cmd.arg0("pmixrun")
        .arg(EXEC_MARKER)
        .arg(std::process::id().to_string())
        .arg(s.pin.as_deref().unwrap_or(NO_PIN))
        .arg(s.path)
        // The program sees its name as given, as execvp would have shown it.
        .arg(&s.app.program)
        .args(&s.app.args);
    for name in s.scrub {
        cmd.env_remove(name);
    }
    // The launcher variables go beneath the `-x` ones, which win; the PMIx variables come
    // last: a stray `-x PMIX_RANK=...` must not break the job.
    cmd.envs(s.launcher_env.iter().map(|(k, v)| (k, v)))
        .envs(s.user_env.iter().map(|(k, v)| (k, v)))
        .envs(s.pmix_env.iter().map(|(k, v)| (k, v)))
        .current_dir(s.wdir)
        .stdin(if s.stdin {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    if let Some(fd) = pmi_fd {
        cmd.env("PMI_FD", fd.to_string());
    }
    cmd
}

/// The CPU list argument of [`exec_program`] that pins nothing.
pub(crate) const NO_PIN: &str = "-";

/// Pins this process to `cpus` (a CPU list, `0-3,8`), or leaves it be for [`NO_PIN`].
fn pin(cpus: &OsStr) -> Result<(), String> {
    if cpus == NO_PIN {
        return Ok(());
    }
    let text = cpus.to_string_lossy();
    let list = pmix_types::locality::parse_cpu_list(&text)
        .filter(|l| !l.is_empty())
        .ok_or_else(|| format!("{text:?} is not a CPU list"))?;
    let mut set = nix::sched::CpuSet::new();
    for cpu in list {
        set.set(cpu as usize)
            .map_err(|e| format!("CPU {cpu}: {}", e.desc()))?;
    }
    nix::sched::sched_setaffinity(Pid::from_raw(0), &set)
        .map_err(|e| format!("CPUs {text}: {}", e.desc()))
}

/// pmixrun started by [`start`] with `args` (those after [`EXEC_MARKER`]: pmixrun's pid, the
/// CPUs to pin it to or [`NO_PIN`], the program's file, its `argv[0]`, its arguments): asks
/// to be killed when pmixrun's thread that started it ends, pins itself, and execs the
/// program. Returns only if that fails, with the exit status a
/// shell gives, after saying why on stderr (the process's, which pmixrun forwards).
pub(crate) fn exec_program(args: &[OsString]) -> u8 {
    use std::os::unix::process::CommandExt;
    let [parent, cpus, path, arg0, rest @ ..] = args else {
        eprintln!("pmixrun: {EXEC_MARKER} is pmixrun's own; not for use");
        return 2;
    };
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL) {
        eprintln!("pmixrun: cannot ask to die with pmixrun: {}", e.desc());
        return 1;
    }
    // pmixrun may have died before that; then no signal will come.
    let parent: Option<i32> = parent.to_str().and_then(|p| p.parse().ok());
    if parent != Some(nix::unistd::getppid().as_raw()) {
        return 1;
    }
    if let Err(e) = pin(cpus) {
        eprintln!("pmixrun: cannot bind {}: {e}", arg0.to_string_lossy());
        return 1;
    }
    let e = Command::new(path).arg0(arg0).args(rest).exec();
    // A file the kernel cannot execute: execvp, hence a shell and Hydra, run it with the
    // shell (a script without `#!`).
    let e = if e.raw_os_error() == Some(nix::errno::Errno::ENOEXEC as i32) {
        Command::new("/bin/sh")
            .arg0(arg0)
            .arg(path)
            .args(rest)
            .exec()
    } else {
        e
    };
    eprintln!(
        "pmixrun: cannot start {}: {}",
        arg0.to_string_lossy(),
        describe(&e)
    );
    exit_code_for(&e)
}

/// Watches a process [`start`] started as `proc` of the job tagged `job`: a thread per output
/// pipe (and one writing its stdin pipe, handed to `stdin`), and one waiting for its end, which it reports as [`Event::Exited`]. Returns its pid,
/// which is also its process group. If a thread cannot be started, the process is killed.
pub(crate) fn watch(
    mut child: Child,
    proc: &Proc,
    job: u32,
    events: &Sender<Event>,
    lines: &Sender<Line>,
    stdin: Option<&crate::node::stdin::Router>,
) -> Result<Pid, LaunchError> {
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let rank = proc.rank.0;
    let thread_failed = |e: std::io::Error| {
        LaunchError::other(format!(
            "cannot start a thread for {proc}: {}",
            describe(&e)
        ))
    };
    let mut readers = || -> std::io::Result<()> {
        if let Some(out) = child.stdout.take() {
            start_reader(job, rank, Stream::Stdout, out, lines.clone())?;
        }
        if let Some(err) = child.stderr.take() {
            start_reader(job, rank, Stream::Stderr, err, lines.clone())?;
        }
        if let (Some(pipe), Some(router)) = (child.stdin.take(), stdin) {
            router.attach(proc, pipe)?;
        }
        Ok(())
    };
    if let Err(e) = readers() {
        abandon(child);
        return Err(thread_failed(e));
    }
    let events = events.clone();
    let proc = proc.clone();
    let waiter = std::thread::Builder::new()
        .name(format!("wait-{job}.{rank}"))
        .stack_size(SMALL_STACK)
        .spawn(move || {
            let status = child.wait();
            let _ = events.send(Event::Exited { proc, status });
        });
    match waiter {
        Ok(_) => Ok(pid),
        Err(e) => {
            // The child moved into the closure that never ran; kill it by its group instead.
            let _ = killpg(pid, Signal::SIGKILL);
            Err(thread_failed(e))
        }
    }
}

/// Kills a process [`start`] started and nobody watches (its group: it may have started
/// others), and reaps it.
pub(crate) fn abandon(mut child: Child) {
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let _ = killpg(pid, Signal::SIGKILL);
    let _ = child.kill();
    let _ = child.wait();
}

/// True if the process `pid`, started by [`start`], ended: a zombie its waiter has not reaped
/// yet, or reaped already (then it is no child of pmixrun's any more, even if its pid was
/// taken again). It is not reaped here.
pub(crate) fn has_ended(pid: Pid) -> bool {
    use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    match waitid(Id::Pid(pid), flags) {
        Ok(WaitStatus::StillAlive) => false,
        Ok(_) | Err(nix::errno::Errno::ECHILD) => true,
        Err(_) => false,
    }
}

/// Sends `sig` to the process group of a process started by [`start`].
pub(crate) fn signal(pid: Pid, sig: Signal) {
    match killpg(pid, sig) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
        Err(e) => tracing::warn!(%pid, ?sig, "cannot signal the process group: {e}"),
    }
}

/// Writes a line a process logged (`PMIx_Log`), or pmixrun's report of a process, on
/// pmixrun's stdout or stderr, whole: the stream's lock keeps it from mixing with the output
/// writer's lines, and one write call (atomic on a pipe up to 4 KiB) from mixing with what
/// the daemons sharing the stream write.
pub(crate) fn write_log(stdout: bool, line: &str) {
    use std::io::Write;
    let text = format!("{line}\n");
    // A closed stream has nowhere to take it; the log call still succeeded as far as the
    // process is concerned.
    let _ = if stdout {
        std::io::stdout().lock().write_all(text.as_bytes())
    } else {
        std::io::stderr().lock().write_all(text.as_bytes())
    };
}
