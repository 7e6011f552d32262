//! Carrying out the cleanups clients registered (`PMIx_Job_control` with
//! `REGISTER_CLEANUP`/`REGISTER_CLEANUP_DIR`) when their namespace ends: the I/O half of
//! `engine::job_control`.
//!
//! The server may run with more rights than its clients (a resource manager's daemon), so it
//! removes only what the registering client's uid and gid own, as the reference does, and,
//! unlike it, never follows a symbolic link: a link is removed as a file (when they own it),
//! never descended into, so a client cannot point the server at another's directory.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::engine::job_control::Cleanup;

/// Removes what `c` registered, as far as its owner owns it.
pub(crate) fn run(c: &Cleanup) {
    for f in &c.files {
        let p = Path::new(f);
        if owned(c, p).is_some_and(|m| !m.is_dir()) {
            remove_file(p);
        }
    }
    for d in &c.dirs {
        let p = Path::new(d);
        if owned(c, p).is_some_and(|m| m.is_dir()) && !ignored(c, p) {
            empty_dir(c, p, true);
        }
    }
}

/// The metadata of `p` (not following a link) if the cleanup's owner owns it.
fn owned(c: &Cleanup, p: &Path) -> Option<fs::Metadata> {
    let m = fs::symlink_metadata(p).ok()?;
    (m.uid() == c.uid && m.gid() == c.gid).then_some(m)
}

fn ignored(c: &Cleanup, p: &Path) -> bool {
    c.ignore.iter().any(|i| Path::new(i) == p)
}

fn remove_file(p: &Path) {
    if let Err(e) = fs::remove_file(p) {
        tracing::debug!(path = %p.display(), "cleanup: cannot remove: {e}");
    }
}

/// Removes what `dir` holds that the owner owns (subdirectories only when recursive), then
/// `dir` itself once empty, unless it is a registered directory to be left.
fn empty_dir(c: &Cleanup, dir: &Path, top: bool) {
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if ignored(c, &p) {
                continue;
            }
            let Some(m) = owned(c, &p) else { continue };
            if m.is_dir() {
                if c.recursive {
                    empty_dir(c, &p, false);
                }
            } else if !c.empty_only {
                remove_file(&p);
            }
        }
    }
    if top && c.leave_topdir {
        return;
    }
    // Fails, as it should, while anything is left in it.
    let _ = fs::remove_dir(dir);
}

#[cfg(test)]
mod tests {
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
}
