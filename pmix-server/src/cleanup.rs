//! Carrying out the cleanups clients registered (`PMIx_Job_control` with
//! `REGISTER_CLEANUP`/`REGISTER_CLEANUP_DIR`) when their namespace ends: the I/O half of
//! `engine::job_control`.
//!
//! The server may run with more rights than its clients (a resource manager's daemon), so it
//! removes only what the registering client's uid and gid own, as the reference does, and,
//! unlike it, never follows a symbolic link, at any depth of a path: each directory is opened
//! relative to the one above it with `O_NOFOLLOW | O_DIRECTORY`, its owner checked on the
//! descriptor, and its entries looked at and removed relative to that descriptor
//! (`fstatat`/`unlinkat`), so no path is resolved twice and a client that swaps a directory
//! (or one on the way to it) for a link while the cleanup runs cannot point the server at
//! another's files. A link is removed as a file (when they own it), never descended into; a
//! path that is not absolute, holds `..`, or passes through a link is left alone.

use std::ffi::{CString, OsStr};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use nix::dir::Dir;
use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat};
use nix::unistd::{UnlinkatFlags, unlinkat};

use crate::engine::job_control::Cleanup;

/// Removes what `c` registered, as far as its owner owns it.
pub(crate) fn run(c: &Cleanup) {
    for f in &c.files {
        let Some((parent, name)) = open_parent(Path::new(f)) else {
            continue;
        };
        if entry(c, &parent, &name).is_some_and(|st| !is_dir(&st)) {
            remove(&parent, &name, UnlinkatFlags::NoRemoveDir, f);
        }
    }
    for d in &c.dirs {
        let p = Path::new(d);
        if ignored(c, p) {
            continue;
        }
        let Some((parent, name)) = open_parent(p) else {
            continue;
        };
        if let Some(dir) = open_owned_dir(c, &parent, &name) {
            empty_dir(c, &dir, p);
            if !c.leave_topdir {
                // Fails, as it should, while anything is left in it.
                remove(&parent, &name, UnlinkatFlags::RemoveDir, d);
            }
        }
    }
}

/// The directory holding `path` (opened from `/` one component at a time, never through a
/// link) and the last component's name; None for a path that is not absolute, names no
/// entry, holds `..`, or passes through a link or a missing directory.
fn open_parent(path: &Path) -> Option<(OwnedFd, CString)> {
    let mut names = Vec::new();
    for comp in path.components() {
        match comp {
            Component::RootDir => {}
            Component::Normal(n) => names.push(n),
            Component::CurDir => {}
            Component::Prefix(_) | Component::ParentDir => return None,
        }
    }
    if !path.is_absolute() {
        tracing::debug!(path = %path.display(), "cleanup: not an absolute path, left alone");
        return None;
    }
    let last = names.pop()?;
    let mut dir = nix::fcntl::open("/", dir_flags(), Mode::empty()).ok()?;
    for n in names {
        dir = match openat(&dir, n, dir_flags() | OFlag::O_NOFOLLOW, Mode::empty()) {
            Ok(d) => d,
            Err(e) => {
                tracing::debug!(path = %path.display(), "cleanup: cannot open {n:?} on the way: {e}");
                return None;
            }
        };
    }
    Some((dir, cstring(last)?))
}

fn dir_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC
}

fn cstring(name: &OsStr) -> Option<CString> {
    CString::new(name.as_bytes()).ok()
}

fn is_dir(st: &FileStat) -> bool {
    SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT == SFlag::S_IFDIR
}

fn owned_by(c: &Cleanup, st: &FileStat) -> bool {
    st.st_uid == c.uid && st.st_gid == c.gid
}

/// What `name` in `dir` is (a link is itself, not what it points to), if the cleanup's owner
/// owns it.
fn entry(c: &Cleanup, dir: &impl AsFd, name: &CString) -> Option<FileStat> {
    let st = fstatat(dir, name.as_c_str(), AtFlags::AT_SYMLINK_NOFOLLOW).ok()?;
    owned_by(c, &st).then_some(st)
}

/// The directory `name` in `parent`, opened without following a link, if the cleanup's owner
/// owns it (checked on the descriptor: what was opened is what was checked).
fn open_owned_dir(c: &Cleanup, parent: &impl AsFd, name: &CString) -> Option<OwnedFd> {
    let flags = dir_flags() | OFlag::O_NOFOLLOW;
    let dir = openat(parent, name.as_c_str(), flags, Mode::empty()).ok()?;
    let st = fstat(&dir).ok()?;
    owned_by(c, &st).then_some(dir)
}

fn ignored(c: &Cleanup, p: &Path) -> bool {
    c.ignore.iter().any(|i| Path::new(i) == p)
}

fn remove(dir: &impl AsFd, name: &CString, how: UnlinkatFlags, what: &dyn std::fmt::Debug) {
    if let Err(e) = unlinkat(dir, name.as_c_str(), how) {
        tracing::debug!(?what, ?name, "cleanup: cannot remove: {e}");
    }
}

/// Removes what the open directory `dir` (at `path`, for the ignore list) holds that the owner
/// owns: files unless only empty directories go, subdirectories (emptied first) when
/// recursive.
fn empty_dir(c: &Cleanup, dir: &OwnedFd, path: &Path) {
    let Ok(listing) = dir
        .try_clone()
        .map_err(|_| ())
        .and_then(|d| Dir::from_fd(d).map_err(|_| ()))
    else {
        return;
    };
    let names: Vec<CString> = {
        let mut listing = listing;
        listing
            .iter()
            .flatten()
            .map(|e| e.file_name().to_owned())
            .filter(|n| n.as_bytes() != b"." && n.as_bytes() != b"..")
            .collect()
    };
    for name in names {
        let child: PathBuf = path.join(OsStr::from_bytes(name.as_bytes()));
        if ignored(c, &child) {
            continue;
        }
        let Some(st) = entry(c, dir, &name) else {
            continue;
        };
        if is_dir(&st) {
            if c.recursive {
                if let Some(sub) = open_owned_dir(c, dir, &name) {
                    empty_dir(c, &sub, &child);
                    remove(dir, &name, UnlinkatFlags::RemoveDir, &child);
                }
            }
        } else if !c.empty_only {
            remove(dir, &name, UnlinkatFlags::NoRemoveDir, &child);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::os::unix::fs::MetadataExt;

    use super::*;

    fn me(dir: &Path) -> Cleanup {
        let m = fs::metadata(dir).unwrap();
        Cleanup {
            uid: m.uid(),
            gid: m.gid(),
            ..Cleanup::default()
        }
    }

    #[test]
    fn directories_go_recursively_or_not_and_links_are_never_followed() {
        let base = std::env::temp_dir().join(format!("pmixrs-cleanup-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        let (top, outside) = (base.join("top"), base.join("outside"));
        fs::create_dir_all(top.join("sub")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(top.join("a"), "a").unwrap();
        fs::write(top.join("sub/b"), "b").unwrap();
        fs::write(outside.join("keep"), "k").unwrap();
        std::os::unix::fs::symlink(&outside, top.join("link")).unwrap();
        let dir = top.to_str().unwrap().to_owned();

        // Not recursive: the files go, the subdirectory and so the directory stay.
        run(&Cleanup {
            dirs: vec![dir.clone()],
            ..me(&base)
        });
        assert!(!top.join("a").exists() && top.join("sub/b").exists());
        assert!(outside.join("keep").exists(), "followed a link");

        // Recursive: everything, the link itself but not what it points to.
        run(&Cleanup {
            dirs: vec![dir],
            recursive: true,
            ..me(&base)
        });
        assert!(!top.exists());
        assert!(outside.join("keep").exists(), "followed a link");

        // Files another uid owns stay.
        let f = outside.join("keep");
        run(&Cleanup {
            files: vec![f.to_str().unwrap().to_owned()],
            uid: me(&base).uid + 1,
            ..me(&base)
        });
        assert!(f.exists());
        fs::remove_dir_all(&base).unwrap();
    }

    /// A directory on the way to a registered one replaced by a link (as a rank can do to its
    /// own directory after registering it): nothing behind the link is touched, at any depth,
    /// for files and directories alike.
    #[test]
    fn a_link_on_the_way_is_not_followed() {
        let base = std::env::temp_dir().join(format!("pmixrs-cleanup-way-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        let victim = base.join("victim");
        fs::create_dir_all(victim.join("inner/deeper")).unwrap();
        for f in ["inner/a", "inner/b", "inner/deeper/c", "file"] {
            fs::write(victim.join(f), "v").unwrap();
        }
        // `work` was a directory when the cleanup was registered; now it is a link.
        std::os::unix::fs::symlink(&victim, base.join("work")).unwrap();
        let path = |p: &str| base.join(p).to_str().unwrap().to_owned();
        run(&Cleanup {
            dirs: vec![path("work/inner")],
            files: vec![path("work/file")],
            recursive: true,
            ..me(&base)
        });
        for f in ["inner/a", "inner/b", "inner/deeper/c", "file"] {
            assert!(victim.join(f).exists(), "removed {f} through a link");
        }
        // Relative paths and `..` are refused, too.
        run(&Cleanup {
            dirs: vec![
                format!("{}/../victim/inner", path("nothing")),
                "victim".into(),
            ],
            recursive: true,
            ..me(&base)
        });
        assert!(victim.join("inner/a").exists());
        fs::remove_dir_all(&base).unwrap();
    }
}
