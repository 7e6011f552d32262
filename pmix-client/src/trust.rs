//! Whose files this process believes: its own user's and root's, writable by no one else (a
//! directory others may write is believed when sticky, as `/tmp`: there others cannot replace
//! what they do not own; a socket by its owner alone). Tools look for servers' rendezvous
//! files with it, and a singleton for the `pmixrun` it starts.

use std::fs::Metadata;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::Path;

/// Bits of a mode that let the group or others write.
const SOMEONE_ELSE_WRITES: u32 = 0o022;
const STICKY: u32 = 0o1000;

pub(crate) struct Trust {
    uid: u32,
}

impl Trust {
    /// This process's (effective) user.
    pub(crate) fn me() -> Trust {
        Trust::of(nix::unistd::geteuid().as_raw())
    }

    pub(crate) fn of(uid: u32) -> Trust {
        Trust { uid }
    }

    /// Whether what `m` describes (at `path`, for the message) is believed.
    fn check(&self, path: &Path, m: &Metadata) -> Result<(), String> {
        if m.uid() != self.uid && m.uid() != 0 {
            return Err(format!("{} belongs to uid {}", path.display(), m.uid()));
        }
        let exempt = (m.is_dir() && m.mode() & STICKY != 0) || m.file_type().is_socket();
        if m.mode() & SOMEONE_ELSE_WRITES != 0 && !exempt {
            return Err(format!(
                "{} is writable by others (mode {:o})",
                path.display(),
                m.mode() & 0o7777
            ));
        }
        Ok(())
    }

    /// Whether the entry `p` itself (a link is not followed) is believed.
    pub(crate) fn entry(&self, p: &Path) -> Result<(), String> {
        let m = std::fs::symlink_metadata(p).map_err(|e| format!("{}: {e}", p.display()))?;
        self.check(p, &m)
    }

    /// Whether the file `p` leads to, and everything that decides what it leads to, is
    /// believed: the file, and each directory from `/` down to it on its own path and on the
    /// path its links resolve to.
    pub(crate) fn path(&self, p: &Path) -> Result<(), String> {
        let followed = |path: &Path| {
            let m = std::fs::metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
            self.check(path, &m)
        };
        let real = std::fs::canonicalize(p).map_err(|e| format!("{}: {e}", p.display()))?;
        followed(&real)?;
        for path in [p, real.as_path()] {
            for dir in path
                .ancestors()
                .skip(1)
                .filter(|d| !d.as_os_str().is_empty())
            {
                followed(dir)?;
            }
        }
        Ok(())
    }
}
