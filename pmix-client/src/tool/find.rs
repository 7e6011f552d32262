//! Finding a server from outside its job: the rendezvous files OpenPMIx servers and pmix-rs
//! servers write (`pmix_wire::openpmix::rendezvous`), searched where libpmix tools search
//! them: the file of a server's pid or namespace anywhere under the temporary directory, the
//! system server's at its top (`docs/TOOLS.md`).
//!
//! Only what this user or root could have written is believed (`crate::trust`): directories
//! descended into, rendezvous files and sockets must belong to this process's user or root
//! and be writable by no one else (a sticky directory such as `/tmp` excepted). Another
//! user's files are skipped, so a tool never connects to a server that user planted for it.

use std::path::{Path, PathBuf};

use pmix_wire::openpmix::rendezvous::{Contact, nspace_file_name, pid_file_name, system_file_name};

use super::Attach;
use crate::Error;
use crate::trust::Trust;

/// How deep under the temporary directory files are looked for: a server's own directory
/// lies one level down (pmix-rs: `pmixrs.<pid>.<random>`; PRRTE: `prte.<host>.<uid>/...`
/// two or three), and walking all of `/tmp` is neither needed nor cheap.
pub(crate) const MAX_DEPTH: usize = 4;

/// Where a found server listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Found {
    /// What its file says (the URI alone when given one).
    pub(crate) contact: Contact,
    /// A pmix-rs server's native socket, next to its file: tools speak the native protocol
    /// there.
    pub(crate) native: Option<PathBuf>,
}

/// The server `how` names: its rendezvous file under `tmpdir` (the file of a pid or
/// namespace, anywhere down to [`MAX_DEPTH`]; the system server's at the top of
/// `system_tmpdir`), or the URI itself.
pub(crate) fn find(
    how: &Attach,
    host: &str,
    tmpdir: &Path,
    system_tmpdir: &Path,
) -> Result<Found, Error> {
    let trust = Trust::me();
    let file = match how {
        Attach::Uri(uri) => return Ok(from_uri(uri)),
        Attach::Pid(pid) => search(tmpdir, &pid_file_name(host, *pid), &trust)?,
        Attach::Nspace(ns) => search(tmpdir, &nspace_file_name(host, ns), &trust)?,
        Attach::System => {
            let p = system_tmpdir.join(system_file_name(host));
            if !p.is_file() {
                return Err(unreachable(format!(
                    "no system server on {host}: {} does not exist",
                    p.display()
                )));
            }
            if let Err(why) = trust.entry(&p) {
                return Err(unreachable(format!("not trusting {}: {why}", p.display())));
            }
            p
        }
    };
    let text = std::fs::read_to_string(&file).map_err(|e| Error::Connect {
        path: file.display().to_string(),
        source: e,
    })?;
    let contact = Contact::parse(&text)
        .ok_or_else(|| Error::Protocol(format!("{} names no server URI", file.display())))?;
    let native = native_beside(&file, &trust);
    Ok(Found { contact, native })
}

/// The pmix-rs server's native socket next to its rendezvous file `file`, if there is one
/// `trust` believes.
pub(crate) fn native_beside(file: &Path, trust: &Trust) -> Option<PathBuf> {
    file.parent()
        .map(|d| d.join(NATIVE_SOCKET))
        .filter(|s| is_socket(s) && trust.entry(s).is_ok())
}

/// The name of a pmix-rs server's socket in its rendezvous directory.
pub(crate) const NATIVE_SOCKET: &str = "server.sock";

pub(crate) fn is_socket(p: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket())
}

/// A server given by URI: `unix:<path>` is a pmix-rs server's native socket; anything else an
/// OpenPMIx URI.
fn from_uri(uri: &str) -> Found {
    let native = uri.strip_prefix("unix:").map(PathBuf::from);
    Found {
        contact: Contact {
            uri: uri.to_owned(),
            version: None,
            pid: None,
            ids: None,
        },
        native,
    }
}

fn unreachable(why: String) -> Error {
    Error::Connect {
        path: String::new(),
        source: std::io::Error::new(std::io::ErrorKind::NotFound, why),
    }
}

/// The one file named `name` under `dir` (down to [`MAX_DEPTH`], never through a symbolic
/// link). Several with the same name (servers of the same pid in other pid namespaces, or a
/// file left by a server killed) are an error naming them, as the reference refuses to pick.
fn search(dir: &Path, name: &str, trust: &Trust) -> Result<PathBuf, Error> {
    let mut found = Vec::new();
    walk(dir, &|n| n == name, MAX_DEPTH, trust, &mut found);
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(unreachable(format!(
            "no server's rendezvous file {name} under {} (is the server running, with tool \
             support, as this user?)",
            dir.display()
        ))),
        _ => Err(unreachable(format!(
            "several rendezvous files {name} under {}: {}",
            dir.display(),
            found
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
    }
}

/// The files under `dir` (down to `depth` levels, never through a symbolic link) whose name
/// `wanted` accepts, in directories and files `trust` believes; what it does not is skipped
/// with a note.
pub(crate) fn walk(
    dir: &Path,
    wanted: &dyn Fn(&str) -> bool,
    depth: usize,
    trust: &Trust,
    found: &mut Vec<PathBuf>,
) {
    // Directories this user may not read are skipped, as others' private ones are.
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let Ok(t) = e.file_type() else { continue };
        let is_wanted = t.is_file() && e.file_name().to_str().is_some_and(wanted);
        let descend = t.is_dir() && depth > 1;
        if !(is_wanted || descend) {
            continue;
        }
        let p = e.path();
        if let Err(why) = trust.entry(&p) {
            tracing::debug!(path = %p.display(), "tool: skipping what another user could have placed: {why}");
            continue;
        }
        if is_wanted {
            found.push(p);
        } else {
            walk(&p, wanted, depth - 1, trust, found);
        }
    }
}

/// The files of two servers on host `h` under a fresh `<tmp>/<name>.<pid>`: a pmix-rs one of
/// pid 7 and namespace `srv` (with its socket, in `pmixrs.7.00ab`) and an OpenPMIx one of pid
/// 70 (in `prte.h.0/dvm`). Returns the top, the pmix-rs server's directory, the file text and
/// the listening socket (which must live while the test runs).
#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) fn two_servers(
    name: &str,
) -> (
    PathBuf,
    PathBuf,
    &'static str,
    std::os::unix::net::UnixListener,
) {
    let top = std::env::temp_dir().join(format!("{name}.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&top);
    let srv = top.join("pmixrs.7.00ab");
    let prte = top.join("prte.h.0").join("dvm");
    std::fs::create_dir_all(&srv).unwrap();
    std::fs::create_dir_all(&prte).unwrap();
    // Whatever the umask: tools believe only directories no one else may write.
    for d in [&top, &srv, &top.join("prte.h.0"), &prte] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let text = "srv.0;tcp4://127.0.0.1:5\n4.2.2\n7\n0:0\nnow\n";
    std::fs::write(srv.join("pmix.h.tool.7"), text).unwrap();
    std::fs::write(srv.join("pmix.h.tool.srv"), text).unwrap();
    let l = std::os::unix::net::UnixListener::bind(srv.join("server.sock")).unwrap();
    std::fs::write(prte.join("pmix.h.tool.70"), "prte@0.0;tcp4://127.0.0.1:6\n").unwrap();
    (top, srv, text, l)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// Rendezvous files another user could have placed are not believed: in a directory
    /// others may write (not sticky), writable by others, or (as root, who can make one)
    /// belonging to another user; the tool then finds no server rather than theirs.
    #[test]
    fn files_another_user_could_have_placed_are_skipped() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
        };
        let (top, srv, _, _l) = two_servers("pmixrs-trust");
        assert!(find(&Attach::Pid(7), "h", &top, &top).is_ok());
        mode(&srv, 0o777);
        assert!(find(&Attach::Pid(7), "h", &top, &top).is_err());
        mode(&srv, 0o1777);
        assert!(find(&Attach::Pid(7), "h", &top, &top).is_ok());
        mode(&srv, 0o755);
        let file = srv.join("pmix.h.tool.7");
        mode(&file, 0o666);
        assert!(find(&Attach::Pid(7), "h", &top, &top).is_err());
        mode(&file, 0o644);
        std::fs::write(top.join("pmix.sys.h"), "sys.0;tcp4://127.0.0.1:7\n").unwrap();
        mode(&top.join("pmix.sys.h"), 0o646);
        assert!(find(&Attach::System, "h", &top, &top).is_err());
        if nix::unistd::geteuid().is_root() {
            let other = Some(nix::unistd::Uid::from_raw(1001));
            nix::unistd::chown(&file, other, None).unwrap();
            let e = find(&Attach::Pid(7), "h", &top, &top).unwrap_err();
            assert!(e.to_string().contains("no server's rendezvous file"), "{e}");
            nix::unistd::chown(&file, Some(nix::unistd::Uid::from_raw(0)), None).unwrap();
            // Another user's socket next to a good file is not used.
            nix::unistd::chown(&srv.join("server.sock"), other, None).unwrap();
            assert_eq!(find(&Attach::Pid(7), "h", &top, &top).unwrap().native, None);
        }
        std::fs::remove_dir_all(&top).unwrap();
    }

    #[test]
    fn files_are_found_by_pid_nspace_and_system_and_say_which_protocol() {
        let (top, srv, text, _l) = two_servers("pmixrs-find");
        std::fs::write(
            top.join("pmix.sys.h"),
            "sys.0;tcp4://127.0.0.1:7\nv5.0.11\n",
        )
        .unwrap();

        let f = find(&Attach::Pid(7), "h", &top, &top).unwrap();
        assert_eq!(f.contact.uri, "srv.0;tcp4://127.0.0.1:5");
        assert_eq!(f.contact.pid, Some(7));
        assert_eq!(f.native, Some(srv.join("server.sock")));
        let f = find(&Attach::Nspace("srv".into()), "h", &top, &top).unwrap();
        assert_eq!(f.native, Some(srv.join("server.sock")));
        // Pid 70 is not pid 7's prefix match, and an OpenPMIx server has no native socket.
        let f = find(&Attach::Pid(70), "h", &top, &top).unwrap();
        assert_eq!(
            (f.contact.uri.as_str(), f.native),
            ("prte@0.0;tcp4://127.0.0.1:6", None)
        );
        let f = find(&Attach::System, "h", &top, &top).unwrap();
        assert_eq!(f.contact.version.as_deref(), Some("v5.0.11"));
        assert!(find(&Attach::Pid(8), "h", &top, &top).is_err());
        assert!(find(&Attach::Pid(7), "other-host", &top, &top).is_err());
        assert!(find(&Attach::System, "other-host", &top, &top).is_err());
        // Two servers' files of the same name: no guess.
        let again = top.join("pmixrs.7.00cd");
        std::fs::create_dir_all(&again).unwrap();
        std::fs::write(again.join("pmix.h.tool.7"), text).unwrap();
        let e = find(&Attach::Pid(7), "h", &top, &top).unwrap_err();
        assert!(e.to_string().contains("several"), "{e}");
        let f = find(&Attach::Uri("unix:/x/server.sock".into()), "h", &top, &top).unwrap();
        assert_eq!(f.native, Some(PathBuf::from("/x/server.sock")));
        std::fs::remove_dir_all(&top).unwrap();
    }
}
