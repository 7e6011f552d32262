//! Job control (`PMIx_Job_control`).
//!
//! Cleanup registrations (`REGISTER_CLEANUP`, `REGISTER_CLEANUP_DIR` with `CLEANUP_RECURSIVE`,
//! `CLEANUP_IGNORE`, `CLEANUP_LEAVE_TOPDIR`, `CLEANUP_EMPTY`) are the server's own, as in the
//! reference: kept by namespace, with the uid and gid of the client that asked, and handed to
//! the shell ([`Output::Cleanup`]) when the namespace is deregistered, which removes only what
//! those ids own. Every other directive (kill, terminate, signal, and those nobody implements
//! here) goes to the host, which answers `ERR_NOT_SUPPORTED` for what it cannot do: a request
//! is never acknowledged without being acted on.

use pmix_types::{Info, Proc, Rank, Status, attr};

use super::host_ops::{HostCall, PendingHost};
use super::store::NsId;
use super::{ConnId, Engine, Output};

/// What to remove when a namespace ends, and as whom.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cleanup {
    /// The uid and gid of the client that registered it: only files they own are removed.
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    /// Files to remove.
    pub(crate) files: Vec<String>,
    /// Directories to empty and remove.
    pub(crate) dirs: Vec<String>,
    /// Descend into subdirectories (else only the directories' files go).
    pub(crate) recursive: bool,
    /// Remove only empty subdirectories, no files.
    pub(crate) empty_only: bool,
    /// Keep the registered directories themselves.
    pub(crate) leave_topdir: bool,
    /// Paths never removed.
    pub(crate) ignore: Vec<String>,
}

/// Directives that are cleanup registrations.
const CLEANUP_KEYS: &[&str] = &[
    attr::REGISTER_CLEANUP,
    attr::REGISTER_CLEANUP_DIR,
    attr::CLEANUP_RECURSIVE,
    attr::CLEANUP_EMPTY,
    attr::CLEANUP_IGNORE,
    attr::CLEANUP_LEAVE_TOPDIR,
];

/// Directives that only qualify a request: on their own they ask for nothing.
const QUALIFIERS: &[&str] = &[attr::JOB_CTRL_ID, attr::TIMEOUT];

/// The comma-separated paths of a cleanup directive; `None` if its value is not a string.
fn paths(i: &Info) -> Option<Vec<String>> {
    let s = i.value.as_str()?;
    Some(
        s.split(',')
            .filter(|p| !p.is_empty())
            .map(str::to_owned)
            .collect(),
    )
}

/// The cleanup a request registers, if any; `Err` for a malformed one.
pub(crate) fn parse_cleanup(
    directives: &[Info],
    uid: u32,
    gid: u32,
) -> Result<Option<Cleanup>, Status> {
    let mut c = Cleanup {
        uid,
        gid,
        ..Cleanup::default()
    };
    let mut any = false;
    for i in directives {
        let bad = Status::ERR_BAD_PARAM;
        match i.key.as_str() {
            attr::REGISTER_CLEANUP => c.files.extend(paths(i).ok_or(bad)?),
            attr::REGISTER_CLEANUP_DIR => c.dirs.extend(paths(i).ok_or(bad)?),
            attr::CLEANUP_IGNORE => c.ignore.extend(paths(i).ok_or(bad)?),
            attr::CLEANUP_RECURSIVE => c.recursive = i.flag().unwrap_or(false),
            attr::CLEANUP_EMPTY => c.empty_only = i.flag().unwrap_or(false),
            attr::CLEANUP_LEAVE_TOPDIR => c.leave_topdir = i.flag().unwrap_or(false),
            _ => continue,
        }
        any = true;
    }
    if c.dirs.iter().any(|d| c.ignore.contains(d)) {
        return Err(Status::ERR_CONFLICTING_CLEANUP_DIRECTIVES);
    }
    Ok(any.then_some(c))
}

impl Engine {
    /// `PMIx_Job_control` from a client.
    pub(super) fn job_control(
        &mut self,
        conn: ConnId,
        id: u32,
        me: Proc,
        targets: Vec<Proc>,
        directives: Vec<Info>,
    ) {
        let Some(caller) = self.caller(conn, me.clone()) else {
            return;
        };
        let cleanup = match parse_cleanup(&directives, caller.uid, caller.gid) {
            Ok(c) => c,
            Err(status) => return self.reply_status(conn, id, status),
        };
        let (_, actions): (Vec<Info>, Vec<Info>) = directives
            .into_iter()
            .partition(|i| CLEANUP_KEYS.contains(&i.key.as_str()));
        let acts = actions
            .iter()
            .any(|i| !QUALIFIERS.contains(&i.key.as_str()));
        if cleanup.is_none() && !acts {
            return self.reply_status(conn, id, Status::ERR_BAD_PARAM);
        }
        let targets = if targets.is_empty() {
            vec![Proc::new(me.nspace.clone(), Rank::WILDCARD)]
        } else {
            targets
        };
        if let Some(cleanup) = cleanup {
            // Registered with each namespace targeted (a rank's runs when its job ends).
            let mut done: Vec<NsId> = Vec::new();
            for t in &targets {
                match self.ns_id(t.nspace.as_str()) {
                    Some(ns) if !done.contains(&ns) => {
                        done.push(ns);
                        self.nspaces.add_cleanup(ns, cleanup.clone());
                    }
                    Some(_) => {}
                    None => return self.reply_status(conn, id, Status::ERR_NOT_FOUND),
                }
            }
        }
        if !acts {
            return self.reply_status(conn, id, Status::SUCCESS);
        }
        self.host_call(
            PendingHost::Status { conn, id },
            HostCall::JobControl {
                proc: me,
                targets,
                directives: actions,
            },
        );
    }

    /// The cleanups registered for a namespace that ends, for the shell to carry out.
    pub(super) fn run_cleanups(&mut self, ns: NsId) {
        if let Some(list) = self.nspaces.take_cleanups(ns) {
            if !list.is_empty() {
                self.out.push_back(Output::Cleanup { list });
            }
        }
    }
}
