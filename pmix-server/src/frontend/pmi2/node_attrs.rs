//! PMI-2 node attributes (`info-putnodeattr`, `info-getnodeattr`): values the processes of a
//! job on one node share, kept by the node's server, one table per namespace.
//!
//! A get with `wait=TRUE` of an attribute nobody put yet waits for the put, but never forever:
//! it fails when a process of the job on this node ends without finalize (it may have been the
//! one to put it), or when no process of the job on this node is left that could put it
//! (every one of them waits, finalized, or ended). Once a namespace's waits failed, later
//! waits in it fail at once: the job is stuck and will be torn down.

use std::collections::HashMap;

use pmix_types::Nspace;

use crate::engine::ConnId;

/// What a wait for an attribute comes to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Wait {
    /// The attribute's value.
    Found(String),
    /// Nothing will put it (the reason).
    Failed(String),
    /// The connection is woken (see [`Common::take_woken`]) when something changes.
    Waiting,
}

#[derive(Default)]
struct NodeJob {
    attrs: HashMap<String, String>,
    /// Connections waiting for an attribute, until they are answered.
    waiters: Vec<ConnId>,
    /// The job's processes on this node.
    local_size: u32,
    /// Processes of the job on this node that finalized or ended.
    ended: u32,
    /// Why waits in this namespace fail, once they do.
    failed: Option<String>,
}

/// The node attributes of every namespace with PMI-2 processes here, and the connections to
/// wake because a wait of theirs may be decided.
#[derive(Default)]
pub(crate) struct Common {
    jobs: HashMap<Nspace, NodeJob>,
    woken: Vec<ConnId>,
}

impl Common {
    /// A process of `ns` joined; the job has `local_size` processes on this node.
    pub(crate) fn joined(&mut self, ns: &Nspace, local_size: u32) {
        let j = self.jobs.entry(ns.clone()).or_default();
        j.local_size = j.local_size.max(local_size);
    }

    /// Stores an attribute and wakes every waiter of the namespace.
    pub(crate) fn put(&mut self, ns: &Nspace, key: &str, value: &str) {
        let j = self.jobs.entry(ns.clone()).or_default();
        j.attrs.insert(key.to_owned(), value.to_owned());
        self.woken.extend(j.waiters.iter().copied());
    }

    /// The attribute, if it was put.
    pub(crate) fn get(&self, ns: &Nspace, key: &str) -> Option<&str> {
        self.jobs.get(ns)?.attrs.get(key).map(String::as_str)
    }

    /// Connection `conn` waits for `key`: answered now, or registered until it is woken and
    /// asks again.
    pub(crate) fn wait(&mut self, ns: &Nspace, key: &str, conn: ConnId) -> Wait {
        let j = self.jobs.entry(ns.clone()).or_default();
        if let Some(v) = j.attrs.get(key) {
            let v = v.clone();
            j.waiters.retain(|&c| c != conn);
            return Wait::Found(v);
        }
        if !j.waiters.contains(&conn) {
            j.waiters.push(conn);
        }
        if j.failed.is_none() && j.waiters.len() as u32 + j.ended >= j.local_size {
            j.failed =
                Some("no process of the job on this node is left to put the attribute".to_owned());
            self.woken.extend(j.waiters.iter().copied());
        }
        if let Some(why) = j.failed.clone() {
            j.waiters.retain(|&c| c != conn);
            return Wait::Failed(why);
        }
        Wait::Waiting
    }

    /// A process of `ns` finalized (`clean`) or ended without finalize; it waits no more.
    pub(crate) fn ended(&mut self, ns: &Nspace, conn: ConnId, clean: bool) {
        if let Some(j) = self.jobs.get_mut(ns) {
            j.waiters.retain(|&c| c != conn);
        }
        self.process_ended(ns, clean);
    }

    /// A process of `ns` that is no PMI-2 connection (a PMI-1 one: it cannot put a node
    /// attribute or wait for one) finalized (`clean`) or ended without finalize: it will put
    /// nothing, which the job's waits here must count, whenever they come.
    pub(crate) fn process_ended(&mut self, ns: &Nspace, clean: bool) {
        let j = self.jobs.entry(ns.clone()).or_default();
        j.ended += 1;
        if !clean && j.failed.is_none() {
            j.failed = Some("a process of the job on this node ended without finalize".into());
        }
        self.woken.extend(j.waiters.iter().copied());
    }

    /// The connections to wake; each asks again for what it waits for.
    pub(crate) fn take_woken(&mut self) -> Vec<ConnId> {
        let mut w = std::mem::take(&mut self.woken);
        w.sort_unstable();
        w.dedup();
        w
    }

    /// The namespace is gone from this server.
    pub(crate) fn nspace_deregistered(&mut self, ns: &Nspace) {
        if let Some(j) = self.jobs.remove(ns) {
            self.woken.extend(j.waiters);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ns() -> Nspace {
        Nspace::new("job").unwrap()
    }

    /// The process that could have put the attribute finalized over PMI-1 (before or while
    /// the other waits): the wait fails instead of lasting forever.
    #[test]
    fn a_process_ending_over_pmi1_counts() {
        let mut c = Common::default();
        c.process_ended(&ns(), true);
        c.joined(&ns(), 2);
        assert!(matches!(c.wait(&ns(), "k", 1), Wait::Failed(_)));
        let mut c = Common::default();
        c.joined(&ns(), 2);
        assert_eq!(c.wait(&ns(), "k", 1), Wait::Waiting);
        c.process_ended(&ns(), true);
        assert_eq!(c.take_woken(), vec![1]);
        assert!(matches!(c.wait(&ns(), "k", 1), Wait::Failed(_)));
    }

    #[test]
    fn a_wait_ends_with_the_put() {
        let mut c = Common::default();
        c.joined(&ns(), 3);
        assert_eq!(c.wait(&ns(), "k", 1), Wait::Waiting);
        c.put(&ns(), "k", "v;w");
        assert_eq!(c.take_woken(), vec![1]);
        assert_eq!(c.wait(&ns(), "k", 1), Wait::Found("v;w".into()));
        assert_eq!(c.get(&ns(), "k"), Some("v;w"));
    }

    #[test]
    fn a_process_ending_without_finalize_fails_the_waiters() {
        let mut c = Common::default();
        c.joined(&ns(), 3);
        assert_eq!(c.wait(&ns(), "k", 1), Wait::Waiting);
        c.ended(&ns(), 2, false);
        assert_eq!(c.take_woken(), vec![1]);
        assert!(matches!(c.wait(&ns(), "k", 1), Wait::Failed(_)));
    }

    #[test]
    fn waits_fail_once_nobody_is_left_to_put() {
        let mut c = Common::default();
        c.joined(&ns(), 3);
        assert_eq!(c.wait(&ns(), "k", 1), Wait::Waiting);
        c.ended(&ns(), 2, true);
        assert_eq!(c.take_woken(), vec![1]);
        // One more process could still put it.
        assert_eq!(c.wait(&ns(), "k", 1), Wait::Waiting);
        // The last one waits too: all of them fail.
        assert!(matches!(c.wait(&ns(), "x", 3), Wait::Failed(_)));
        assert_eq!(c.take_woken(), vec![1, 3]);
        assert!(matches!(c.wait(&ns(), "k", 1), Wait::Failed(_)));
    }
}
