//! Starting one process of the job and watching it: a thread per output pipe and one waiting
//! for its end, each reporting over a channel.

use std::ffi::{OsStr, OsString};
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crossbeam_channel::Sender;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use pmix_types::{Proc, Status};

use crate::cli::App;
use crate::host::Event;
use crate::output::{Line, SMALL_STACK, Stream, start_reader};

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

/// The first argument that makes pmixrun the exec helper of [`exec_helper`].
pub(crate) const EXEC_HELPER: &str = "--pmixrun-exec-helper";

/// The same, for a PMI-1 process whose connection arrives as the helper's stdin.
pub(crate) const EXEC_HELPER_PMI_FD: &str = "--pmixrun-exec-helper-pmi-fd";

/// True for the variables a process must not inherit from pmixrun's own environment: those
/// of a launcher pmixrun itself may run under. MPICH refuses to start when it sees both PMI
/// and PMIx variables.
fn launcher_variable(name: &OsStr) -> bool {
    let n = name.as_encoded_bytes();
    n.starts_with(b"PMI_") || n.starts_with(b"PMIX_") || n.starts_with(b"MPI_LOCAL")
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

/// pmixrun run as `pmixrun --pmixrun-exec-helper PROGRAM ARGS...` in a new process: becomes
/// PROGRAM with the forwarded signals unblocked.
///
/// pmixrun blocks the signals it forwards in all its threads (one thread receives them with
/// `sigwait`), and a process inherits its creator's signal mask through fork and exec; std's
/// `Command` does not reset it, and code between fork and exec needs `unsafe`. So every
/// process starts as this helper, which unblocks them in safe code and then execs the program:
/// same pid, same process group, same environment and directory.
///
/// With `pmi_fd`, its stdin is the process's PMI-1 connection (std's `Command` can pass a
/// descriptor only as stdin, stdout or stderr, with close-on-exec everywhere else): the
/// helper moves it to a descriptor that survives exec, names it in `PMI_FD`, and gives the
/// program /dev/null as stdin like every other process.
pub(crate) fn exec_helper(
    signals: &nix::sys::signal::SigSet,
    argv: &[OsString],
    pmi_fd: bool,
) -> u8 {
    use std::os::unix::process::CommandExt;
    let Some((program, args)) = argv.split_first() else {
        eprintln!("pmixrun: {EXEC_HELPER} needs a program");
        return 127;
    };
    if let Err(e) = signals.thread_unblock() {
        eprintln!("pmixrun: cannot unblock signals: {e}");
        return 1;
    }
    let mut cmd = Command::new(program);
    cmd.args(args);
    if pmi_fd {
        // dup() gives a descriptor without close-on-exec.
        let moved = nix::unistd::dup(std::io::stdin()).and_then(|fd| {
            let null = std::fs::File::open("/dev/null").map_err(|_| nix::errno::Errno::ENOENT)?;
            nix::unistd::dup2_stdin(&null)?;
            Ok(fd)
        });
        match moved {
            Ok(fd) => {
                cmd.env("PMI_FD", fd.as_raw_fd().to_string());
                // It must stay open through exec.
                std::mem::forget(fd);
            }
            Err(e) => {
                eprintln!("pmixrun: cannot pass the PMI connection on: {e}");
                return 1;
            }
        }
    }
    let e = cmd.exec();
    // The program was checked before this helper started, so this is rare (a race with the
    // file system, a program the kernel refuses): the message goes to the job's stderr.
    eprintln!(
        "pmixrun: cannot start {}: {}",
        program.to_string_lossy(),
        describe(&e)
    );
    exit_code_for(&e)
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

/// Checks that the processes of `app` can be started from `wdir`, as `execvp` will find the
/// program, so that a missing program is reported by pmixrun (or answers a spawn) rather than
/// being the exit status of a process.
pub(crate) fn check_app(
    app: &App,
    wdir: &Path,
    user_env: &[(OsString, OsString)],
) -> Result<(), LaunchError> {
    find_program(&app.program, wdir, user_env)
        .map(drop)
        .map_err(|e| LaunchError {
            message: format!(
                "cannot start {}: {}",
                app.program.to_string_lossy(),
                describe(&e)
            ),
            code: exit_code_for(&e),
            status: spawn_status_for(&e),
        })
}

/// Everything one process is started with.
pub(crate) struct Spawn<'a> {
    /// pmixrun's own executable, run as the exec helper.
    pub(crate) helper: &'a Path,
    /// The process.
    pub(crate) proc: &'a Proc,
    /// Its job's number in tagged output (0: the first job, `n`: the `n`-th spawned one).
    pub(crate) job: u32,
    pub(crate) app: &'a App,
    /// The `-x` variables.
    pub(crate) user_env: &'a [(OsString, OsString)],
    /// What `setup_fork` (or `setup_fork_pmi1`) gave.
    pub(crate) pmix_env: Vec<(String, String)>,
    /// A PMI-1 process's end of its connection, to be inherited as `PMI_FD`.
    pub(crate) pmi_fd: Option<OwnedFd>,
    pub(crate) wdir: &'a Path,
}

/// Starts one process, its output readers and its waiter. Returns its pid, which is also its
/// process group: each process gets its own group so that a terminal's Ctrl-C reaches only
/// pmixrun (which passes it on once), and so that signals reach whatever the process started.
pub(crate) fn spawn(
    s: Spawn<'_>,
    events: &Sender<Event>,
    lines: &Sender<Line>,
) -> Result<Pid, LaunchError> {
    check_app(s.app, s.wdir, s.user_env)?;
    let mut cmd = Command::new(s.helper);
    let (helper_flag, stdin) = match s.pmi_fd {
        Some(fd) => (EXEC_HELPER_PMI_FD, Stdio::from(fd)),
        None => (EXEC_HELPER, Stdio::null()),
    };
    for (name, _) in std::env::vars_os().filter(|(k, _)| launcher_variable(k)) {
        cmd.env_remove(name);
    }
    cmd.arg(helper_flag)
        .arg(&s.app.program)
        .args(&s.app.args)
        // The PMIx variables come last: a stray `-x PMIX_RANK=...` must not break the job.
        .envs(s.user_env.iter().map(|(k, v)| (k, v)))
        .envs(s.pmix_env)
        .current_dir(s.wdir)
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = cmd.spawn().map_err(|e| LaunchError {
        message: format!("cannot start {}: {}", s.helper.display(), describe(&e)),
        code: exit_code_for(&e),
        // pmixrun's own executable is missing, or the working directory went away.
        status: Status::ERR_JOB_FAILED_TO_LAUNCH,
    })?;
    let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let (job, rank) = (s.job, s.proc.rank.0);
    let thread_failed = |e: std::io::Error| {
        LaunchError::other(format!(
            "cannot start a thread for {}: {}",
            s.proc,
            describe(&e)
        ))
    };
    let mut watch = || -> std::io::Result<()> {
        if let Some(out) = child.stdout.take() {
            start_reader(job, rank, Stream::Stdout, out, lines.clone())?;
        }
        if let Some(err) = child.stderr.take() {
            start_reader(job, rank, Stream::Stderr, err, lines.clone())?;
        }
        Ok(())
    };
    if let Err(e) = watch() {
        let _ = child.kill();
        let _ = child.wait();
        return Err(thread_failed(e));
    }
    let events = events.clone();
    let proc = s.proc.clone();
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

/// Sends `sig` to the process group of a process started by [`spawn`].
pub(crate) fn signal(pid: Pid, sig: Signal) {
    match killpg(pid, sig) {
        Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
        Err(e) => tracing::warn!(%pid, ?sig, "cannot signal the process group: {e}"),
    }
}
