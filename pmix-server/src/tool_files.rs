//! The rendezvous files through which tools find a server, named and laid out as OpenPMIx's
//! (`pmix_ptl_base`) so that libpmix tools (`PMIx_tool_init` with `PMIX_SERVER_PIDINFO`,
//! `PMIX_SERVER_NSPACE`, `PMIX_CONNECT_TO_SYSTEM`) and the Rust `Tool` find this one.
//!
//! * `pmix.<host>.tool.<pid>` and `pmix.<host>.tool.<nspace>`: in the server's private
//!   rendezvous directory (mode 0700, inside the temporary directory). A libpmix tool looks
//!   for them by walking its temporary directory (`PMIX_SYSTEM_TMPDIR`, `TMPDIR` or `/tmp`)
//!   and the directories below it, so it finds them there, and only a tool of this user (or
//!   root) can: nobody else may enter the directory.
//! * `pmix.sys.<host>`: the system server's, at the top of the system temporary directory,
//!   only for a server started as the system server.
//!
//! Each holds five lines: the server's URI (`<nspace>.<rank>;tcp4://127.0.0.1:<port>`), the
//! OpenPMIx version it speaks, its pid, `<euid>:<egid>`, and the time it was written. The
//! server removes them when it stops. See `docs/TOOLS.md`.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use pmix_wire::openpmix::rendezvous::{self, nspace_file_name, pid_file_name, system_file_name};

use crate::Error;

/// What the files say of the server.
pub(crate) struct Contact<'a> {
    /// Its OpenPMIx URI.
    pub(crate) uri: &'a str,
    /// The OpenPMIx version it speaks.
    pub(crate) version: &'a str,
    /// Its hostname, as tools of this node spell it.
    pub(crate) hostname: &'a str,
    /// Its namespace.
    pub(crate) nspace: &'a str,
}

/// Writes the files: the pid and namespace ones in `private_dir`, and with `system_tmpdir`
/// the system server's there. Returns the paths written, for removal; on failure removes
/// what it wrote.
pub(crate) fn write(
    contact: &Contact<'_>,
    private_dir: &Path,
    system_tmpdir: Option<&Path>,
) -> Result<Vec<PathBuf>, Error> {
    let mut paths = vec![
        private_dir.join(pid_file_name(contact.hostname, std::process::id())),
        private_dir.join(nspace_file_name(contact.hostname, contact.nspace)),
    ];
    if let Some(dir) = system_tmpdir {
        paths.push(dir.join(system_file_name(contact.hostname)));
    }
    let text = contents(contact);
    let mut written = Vec::new();
    for p in paths {
        if let Err(e) = write_one(&p, &text) {
            remove(&written);
            return Err(e);
        }
        written.push(p);
    }
    Ok(written)
}

/// Removes the files `write` wrote.
pub(crate) fn remove(paths: &[PathBuf]) {
    for p in paths {
        if let Err(e) = std::fs::remove_file(p) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(file = %p.display(), "cannot remove a rendezvous file: {e}");
            }
        }
    }
}

fn contents(c: &Contact<'_>) -> String {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    rendezvous::Contact {
        uri: c.uri.to_owned(),
        version: Some(c.version.to_owned()),
        pid: Some(std::process::id()),
        ids: Some((
            nix::unistd::geteuid().as_raw(),
            nix::unistd::getegid().as_raw(),
        )),
    }
    .to_text(&stamp.to_string())
}

/// Writes a new file (never through a symbolic link or over someone's file), mode 0640 as
/// the reference's. A file of the same name left by a server that is gone is replaced, if it
/// is this user's. The file appears whole: its text goes into a temporary file next to it,
/// which is then hard-linked under the name (failing, as `create_new` would, if the name is
/// taken), so that a tool looking for it meanwhile finds nothing rather than a file not yet
/// written.
fn write_one(path: &Path, text: &str) -> Result<(), Error> {
    let err = |what: &'static str| Error::io(format!("{what} {}", path.display()));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = path.with_file_name(format!(".{name}.{}.new", std::process::id()));
    let create = || {
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o640)
            .open(&tmp)
    };
    let mut file = match create() {
        // Left by a server of this pid (an earlier process of it) killed while writing it.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && plain_file_of_ours(&tmp) => {
            std::fs::remove_file(&tmp).map_err(err("replacing"))?;
            create()
        }
        other => other,
    }
    .map_err(err("writing"))?;
    let written = file.write_all(text.as_bytes()).map_err(err("writing"));
    drop(file);
    let linked = written.and_then(|()| {
        match std::fs::hard_link(&tmp, path) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && stale_of_ours(path) => {
                std::fs::remove_file(path).map_err(err("replacing"))?;
                std::fs::hard_link(&tmp, path)
            }
            other => other,
        }
        .map_err(err("writing"))
    });
    let _ = std::fs::remove_file(&tmp);
    linked
}

/// True if `path` is a plain file of this user's naming a process that is gone (its third
/// line).
fn stale_of_ours(path: &Path) -> bool {
    if !plain_file_of_ours(path) {
        return false;
    }
    let pid = std::fs::read_to_string(path)
        .ok()
        .and_then(|t| rendezvous::Contact::parse(&t)?.pid)
        .and_then(|p| i32::try_from(p).ok());
    pid.is_some_and(|p| {
        p > 0
            && matches!(
                nix::sys::signal::kill(nix::unistd::Pid::from_raw(p), None),
                Err(nix::errno::Errno::ESRCH)
            )
    })
}

/// True if `path` is a plain file (not a link) of this user's.
fn plain_file_of_ours(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .is_ok_and(|m| m.is_file() && m.uid() == nix::unistd::geteuid().as_raw())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn files_are_named_and_laid_out_as_openpmix_reads_them() {
        let dir = std::env::temp_dir().join(format!("pmixrs-toolfiles.{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let sys = dir.join("sys");
        std::fs::create_dir(&sys).unwrap();
        let c = Contact {
            uri: "srv.0;tcp4://127.0.0.1:5",
            version: "4.2.2",
            hostname: "nodeA",
            nspace: "srv",
        };
        let paths = write(&c, &dir, Some(&sys)).unwrap();
        let pid = std::process::id();
        assert_eq!(
            paths,
            vec![
                dir.join(format!("pmix.nodeA.tool.{pid}")),
                dir.join("pmix.nodeA.tool.srv"),
                sys.join("pmix.sys.nodeA"),
            ]
        );
        for p in &paths {
            let text = std::fs::read_to_string(p).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(
                lines[..3],
                ["srv.0;tcp4://127.0.0.1:5", "4.2.2", &pid.to_string()]
            );
            let ids = format!(
                "{}:{}",
                nix::unistd::geteuid().as_raw(),
                nix::unistd::getegid().as_raw()
            );
            assert_eq!(lines[3], ids);
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(p).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o640, "{}", p.display());
        }
        // A second server of the same pid cannot be, so the same names are taken: refused,
        // and nothing of the second attempt is left.
        let again = Contact {
            nspace: "other",
            ..c
        };
        assert!(write(&again, &dir, None).is_err());
        assert!(!dir.join("pmix.nodeA.tool.other").exists());
        remove(&paths);
        for p in &paths {
            assert!(!p.exists());
        }
        // A file left by a process that is gone is replaced.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let old = dir.join("pmix.nodeA.tool.srv");
        std::fs::write(
            &old,
            format!("old.0;tcp4://127.0.0.1:1\n4.2.2\n{dead}\n0:0\n0\n"),
        )
        .unwrap();
        let paths = write(&c, &dir, None).unwrap();
        assert!(std::fs::read_to_string(&old).unwrap().starts_with("srv.0;"));
        remove(&paths);
        // Written whole under a temporary name first, which is gone afterwards.
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .filter(|n| n != "sys")
            .collect();
        assert!(left.is_empty(), "{left:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
