//! Rendezvous directories: private directories in a shared temporary directory such as /tmp,
//! named `<prefix>.<pid>.<random>` so that nobody can take a name before its server does, and
//! removed by a later start once the process that made one is gone (a server killed with
//! SIGKILL cannot remove its own).
//!
//! See `docs/SECURITY.md` ("Rendezvous directories and process lifetime").

use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

use std::io::Read;

use crate::Error;

/// How many random names are tried before giving up (each collision is a name someone else
/// made; with 64 random bits, a second one means someone is guessing).
const ATTEMPTS: u32 = 4;

/// What to do when no private directory can be made under `parent`.
fn remedy(parent: &Path) -> String {
    format!(
        "set TMPDIR to a directory only you can write to (it is {})",
        parent.display()
    )
}

/// Creates a fresh directory `<parent>/<prefix>.<pid>.<16 random hex digits>` that only this
/// user may enter (mode 0700), and checks that it is a directory of this user's that nobody
/// else may enter.
pub fn create_private_dir(parent: &Path, prefix: &str) -> Result<PathBuf, Error> {
    let pid = std::process::id();
    let mut last = None;
    for _ in 0..ATTEMPTS {
        let random = random_bytes::<8>()?;
        let dir = parent.join(format!("{prefix}.{pid}.{}", hex(&random)));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => return check_private(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some((dir, e)),
            Err(e) => {
                return Err(Error::Io {
                    context: format!("creating {} ({})", dir.display(), remedy(parent)),
                    source: e,
                });
            }
        }
    }
    let (dir, e) = last.ok_or_else(|| Error::BadParam("no attempt made".into()))?;
    Err(Error::Io {
        context: format!(
            "creating {} and {} other random names (someone creates names in {} ahead of \
             this process: {})",
            dir.display(),
            ATTEMPTS - 1,
            parent.display(),
            remedy(parent)
        ),
        source: e,
    })
}

/// `dir`, just made, if it is what was asked for: a real directory, this user's, mode 0700.
fn check_private(dir: PathBuf) -> Result<PathBuf, Error> {
    let meta = std::fs::symlink_metadata(&dir)
        .map_err(Error::io(format!("checking {}", dir.display())))?;
    let euid = nix::unistd::geteuid().as_raw();
    if !meta.is_dir() || meta.uid() != euid || meta.mode() & 0o077 != 0 {
        return Err(Error::Io {
            context: format!(
                "{} is not a private directory of this user's (owner {}, mode {:o})",
                dir.display(),
                meta.uid(),
                meta.mode() & 0o7777
            ),
            source: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        });
    }
    Ok(dir)
}

/// The pid in `name` if it is `<prefix>.<pid>.<suffix>`, the naming of
/// [`create_private_dir`] (a suffix of up to 16 lowercase hex digits; earlier versions used a
/// decimal counter, which this also matches).
fn pid_of(name: &str, prefix: &str) -> Option<i32> {
    let rest = name.strip_prefix(prefix)?.strip_prefix('.')?;
    let (pid, suffix) = rest.split_once('.')?;
    let digits = |s: &str, hex: bool| {
        !s.is_empty()
            && s.len() <= 16
            && s.bytes()
                .all(|b| b.is_ascii_digit() || (hex && (b'a'..=b'f').contains(&b)))
    };
    if !digits(pid, false) || !digits(suffix, true) {
        return None;
    }
    pid.parse().ok().filter(|p| *p > 0)
}

/// True if process `pid` may be running: it exists, or it is another user's (kill says EPERM),
/// and it is not on its way out. A server killed with SIGKILL closes its sockets while exiting
/// and then stays a zombie until its parent reaps it, and those who learn of its death by its
/// closed connections (its daemons, whose guardians then clean up) may look meanwhile.
fn may_be_running(pid: i32) -> bool {
    let exists = !matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
        Err(nix::errno::Errno::ESRCH)
    );
    exists && !is_exiting(pid)
}

/// The kernel's flag of a task that has begun to exit (`PF_EXITING`, in `/proc/<pid>/stat`).
const PF_EXITING: u64 = 0x4;

/// True if `/proc` says process `pid` is exiting or a zombie: state `Z` or `X`, or the
/// `PF_EXITING` flag, set before its files are closed.
fn is_exiting(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // `pid (comm) state ppid pgrp session tty_nr tpgid flags ...`; comm may hold anything.
    let Some(close) = stat.rfind(')') else {
        return false;
    };
    let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    let state = fields.first().copied().unwrap_or_default();
    let flags: u64 = fields.get(6).and_then(|f| f.parse().ok()).unwrap_or(0);
    state == "Z" || state == "X" || flags & PF_EXITING != 0
}

/// True if a server may still be listening on `socket`: anything but "refused" or "no such
/// file" counts (a server in another pid namespace shares the directory but not the pids).
fn may_be_served(socket: &Path) -> bool {
    match std::os::unix::net::UnixStream::connect(socket) {
        Ok(_) => true,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound
        ),
    }
}

/// Removes the rendezvous directories under `parent` that a process which is gone left:
/// entries named as [`create_private_dir`] names them with `prefix`, that are directories
/// (never a symbolic link, which is not followed) owned by this user, whose process does not
/// exist (or is exiting, or a zombie), and on whose `socket` nobody listens. Anything else is left alone. Returns how many
/// were removed; a failure to remove one is logged, not returned.
pub fn remove_stale_dirs(parent: &Path, prefix: &str, socket: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return 0;
    };
    let euid = nix::unistd::geteuid().as_raw();
    let me = i32::try_from(std::process::id()).unwrap_or(0);
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| pid_of(n, prefix)) else {
            continue;
        };
        let path = entry.path();
        // lstat: a symbolic link is no directory here.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_dir() || meta.uid() != euid || pid == me || may_be_running(pid) {
            continue;
        }
        if may_be_served(&path.join(socket)) {
            continue;
        }
        // Does not follow symbolic links inside it either.
        match std::fs::remove_dir_all(&path) {
            Ok(()) => {
                tracing::debug!(dir = %path.display(), pid, "removed a stale rendezvous directory");
                removed += 1;
            }
            Err(e) => tracing::warn!(
                dir = %path.display(),
                "cannot remove a stale rendezvous directory: {e}"
            ),
        }
    }
    removed
}

/// `N` bytes from the kernel's randomness: names no one can guess first, secrets.
pub(crate) fn random_bytes<const N: usize>() -> Result<[u8; N], Error> {
    let mut buf = [0u8; N];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .map_err(Error::io("reading /dev/urandom"))?;
    Ok(buf)
}

/// `bytes` in lower-case hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A directory of the test's own, removed when dropped.
    struct TestDir(PathBuf);

    impl Drop for TestDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn test_dir(tag: &str) -> TestDir {
        let d = std::env::temp_dir().join(format!(
            "pmixrs-rendezvous-test.{}.{tag}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir(&d).unwrap();
        TestDir(d)
    }

    /// The pid of a process that has ended (and was reaped).
    fn dead_pid() -> i32 {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = i32::try_from(c.id()).unwrap();
        c.wait().unwrap();
        pid
    }

    #[test]
    fn names_are_ours_only() {
        assert_eq!(pid_of("pmixrs.12.0123456789abcdef", "pmixrs"), Some(12));
        assert_eq!(pid_of("pmixrs.12.0", "pmixrs"), Some(12));
        for other in [
            "pmixrs.12",
            "pmixrs.12.",
            "pmixrs..ab",
            "pmixrs.0.ab",
            "pmixrs.12.ABC",
            "pmixrs.12.ab.c",
            "pmixrs.12.0123456789abcdef0",
            "pmixrs-ns.12.ab",
            "xpmixrs.12.ab",
            "pmixrs.-1.ab",
        ] {
            assert_eq!(pid_of(other, "pmixrs"), None, "{other}");
        }
    }

    #[test]
    fn private_dirs_are_fresh_unpredictable_and_private() {
        let t = test_dir("create");
        let a = create_private_dir(&t.0, "pmixrs").unwrap();
        let b = create_private_dir(&t.0, "pmixrs").unwrap();
        assert_ne!(a, b);
        let name = a.file_name().unwrap().to_str().unwrap();
        assert_eq!(
            pid_of(name, "pmixrs"),
            i32::try_from(std::process::id()).ok()
        );
        assert_eq!(name.rsplit('.').next().unwrap().len(), 16, "{name}");
        let meta = std::fs::symlink_metadata(&a).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o700);
        // Where nothing can be made, the error says what to do.
        let e = create_private_dir(&t.0.join("missing"), "pmixrs").unwrap_err();
        assert!(e.to_string().contains("set TMPDIR"), "{e}");
    }

    /// A server killed with SIGKILL is a zombie until reaped, and those who clean up after it
    /// may look before that: its directory goes too.
    #[test]
    fn a_zombies_directory_is_stale() {
        use nix::sys::wait::{Id, WaitPidFlag, waitid};
        let t = test_dir("zombie");
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = i32::try_from(c.id()).unwrap();
        // Waits for its end without reaping it: it stays a zombie.
        waitid(
            Id::Pid(nix::unistd::Pid::from_raw(pid)),
            WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT,
        )
        .unwrap();
        assert!(is_exiting(pid));
        let dir = t.0.join(format!("pmixrs.{pid}.0123456789abcdef"));
        std::fs::create_dir(&dir).unwrap();
        assert_eq!(remove_stale_dirs(&t.0, "pmixrs", "server.sock"), 1);
        assert!(!dir.exists());
        c.wait().unwrap();
        // A live process is no zombie (this one).
        assert!(!is_exiting(i32::try_from(std::process::id()).unwrap()));
    }

    #[test]
    fn only_stale_directories_of_ours_are_removed() {
        let t = test_dir("sweep");
        let dead = dead_pid();
        let mk = |name: &str| {
            let p = t.0.join(name);
            std::fs::create_dir(&p).unwrap();
            p
        };
        let stale = mk(&format!("pmixrs.{dead}.0123456789abcdef"));
        std::fs::create_dir(stale.join("session")).unwrap();
        std::fs::write(stale.join("session").join("f"), "x").unwrap();
        // A symbolic link inside is removed, not followed.
        let victim = mk("victim");
        std::fs::write(victim.join("keep"), "x").unwrap();
        std::os::unix::fs::symlink(&victim, stale.join("link")).unwrap();
        let old_style = mk(&format!("pmixrs.{dead}.0"));
        let alive = mk(&format!("pmixrs.{}.00000000000000ab", std::process::id()));
        let init = mk("pmixrs.1.00000000000000ab");
        let other_prefix = mk(&format!("pmixrs-ns.{dead}.00000000000000ab"));
        let foreign = mk(&format!("pmixrs.{dead}.zz"));
        // A symbolic link named as ours, to a directory: neither followed nor removed.
        let linked = t.0.join(format!("pmixrs.{dead}.00000000000000cd"));
        std::os::unix::fs::symlink(&victim, &linked).unwrap();
        // A dead pid whose socket is served (another pid namespace): left alone.
        let served = mk(&format!("pmixrs.{dead}.00000000000000ef"));
        let _listener = std::os::unix::net::UnixListener::bind(served.join("server.sock")).unwrap();

        assert_eq!(remove_stale_dirs(&t.0, "pmixrs", "server.sock"), 2);
        assert!(!stale.exists() && !old_style.exists());
        for kept in [&alive, &init, &other_prefix, &foreign, &served, &victim] {
            assert!(kept.is_dir(), "{} was removed", kept.display());
        }
        assert!(victim.join("keep").exists());
        assert!(std::fs::symlink_metadata(&linked).unwrap().is_symlink());
    }
}
