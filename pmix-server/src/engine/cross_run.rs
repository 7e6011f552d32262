//! Connects, fences and disconnects whose processes span the namespaces of several launcher
//! runs: the rendezvous the standalone name server keeps for them.
//!
//! Sans-IO and generic over the token that identifies a waiting request, like the
//! [name store](super::names). Each run (a session of the name server) that owns some of the
//! namespaces named sends its part: for a connect, its servers' contribution (opaque here: the
//! job data of its namespaces and its processes' committed data). The operation completes when
//! every namespace named has been contributed by the session that owns it, and every part is
//! answered with every session's data, concatenated in session order.
//!
//! # Rules
//!
//! - A request naming a namespace that no session owns fails at once (`ERR_NOT_FOUND`): the
//!   run the other side belongs to is not attached. A session may send a part only where it
//!   owns some namespace named (`ERR_NO_PERMISSIONS`), and the parts of one operation must come
//!   from launchers of one user, unless a launcher runs as root (`ERR_NO_PERMISSIONS`).
//! - Nothing waits forever: an operation fails with `ERR_TIMEOUT` at the earliest
//!   `PMIX_TIMEOUT` of its parts; with `ERR_UNREACH` when a session it waits for or has a part
//!   of disconnects; with `ERR_PROC_TERM_WO_SYNC` when a process it names ends, or its
//!   namespace does.
//! - What the sessions send together is bounded ([`MAX_GATHERED`]): past it, the part that
//!   would go over fails with `ERR_OUT_OF_RESOURCE` and the others keep waiting.

use std::collections::{BTreeMap, HashMap};
use std::time::Instant;

use pmix_types::{Info, Nspace, Proc, Rank, Status};

use super::names::SessionId;

/// The most data one operation gathers from all its sessions: the answer must fit in one
/// name-server frame (16 MiB), with room for the frame's other fields.
pub(crate) const MAX_GATHERED: usize = (16 << 20) - (64 << 10);

/// The most one session's parts waiting in all operations may hold: a launcher cannot make
/// the name server keep more of its data than this, whatever the number of operations it
/// starts that never complete.
pub(crate) const MAX_WAITING_PER_SESSION: usize = 64 << 20;

/// The most every session's parts waiting may hold together.
pub(crate) const MAX_WAITING: usize = 256 << 20;

/// Which collective a request is part of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum CrossKind {
    Connect,
    Fence,
    Disconnect,
}

/// One session's part.
#[derive(Debug)]
struct Part<T> {
    token: T,
    /// The launcher's uid, from its socket (`None`: unknown).
    peer_uid: Option<u32>,
    data: Vec<u8>,
}

#[derive(Debug)]
struct Op<T> {
    /// The sessions owning a namespace named, as they were when the first part came.
    needed: Vec<SessionId>,
    parts: BTreeMap<SessionId, Part<T>>,
    deadline: Option<Instant>,
}

/// The answers an event produced: each waiting token with its outcome.
pub(crate) type CrossAnswers<T> = Vec<(T, Result<Vec<u8>, Status>)>;

type OpKey = (CrossKind, Vec<Proc>);

/// The connects and disconnects under way across sessions.
#[derive(Debug)]
pub(crate) struct CrossRuns<T> {
    ops: HashMap<OpKey, Op<T>>,
}

impl<T> Default for CrossRuns<T> {
    fn default() -> Self {
        CrossRuns {
            ops: HashMap::new(),
        }
    }
}

impl<T> CrossRuns<T> {
    /// The bytes of the parts waiting: `session`'s, and everyone's.
    fn waiting_bytes(&self, session: SessionId) -> (usize, usize) {
        let mut mine = 0usize;
        let mut everyone = 0usize;
        for (s, p) in self.ops.values().flat_map(|op| op.parts.iter()) {
            everyone = everyone.saturating_add(p.data.len());
            if *s == session {
                mine = mine.saturating_add(p.data.len());
            }
        }
        (mine, everyone)
    }

    /// Session `session`'s part of a `kind` over `procs`. `owner` tells which session owns a
    /// namespace. Returns the answers this part completes (its own included), or the reason
    /// it is refused; `Ok` with nothing means it waits.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn join(
        &mut self,
        kind: CrossKind,
        session: SessionId,
        peer_uid: Option<u32>,
        mut procs: Vec<Proc>,
        info: &[Info],
        data: Vec<u8>,
        token: T,
        now: Instant,
        owner: impl Fn(&Nspace) -> Option<SessionId>,
    ) -> Result<CrossAnswers<T>, (T, Status)> {
        if procs.is_empty() {
            return Err((token, Status::ERR_BAD_PARAM));
        }
        let timeout = match pmix_types::checked_timeout_of(info) {
            Ok(t) => t,
            Err(s) => return Err((token, s)),
        };
        procs.sort();
        procs.dedup();
        let mut needed = Vec::new();
        for p in &procs {
            match owner(&p.nspace) {
                Some(s) => needed.push(s),
                None => return Err((token, Status::ERR_NOT_FOUND)),
            }
        }
        needed.sort_unstable();
        needed.dedup();
        if !needed.contains(&session) {
            return Err((token, Status::ERR_NO_PERMISSIONS));
        }
        let (mine, everyone) = self.waiting_bytes(session);
        let over_waiting = mine.saturating_add(data.len()) > MAX_WAITING_PER_SESSION
            || everyone.saturating_add(data.len()) > MAX_WAITING;
        let key = (kind, procs);
        let op = self.ops.entry(key.clone()).or_insert_with(|| Op {
            needed,
            parts: BTreeMap::new(),
            deadline: None,
        });
        if op.parts.contains_key(&session) {
            // One part per session at a time: a second, before the first completed, is a
            // client's error, not a reason to drop the first.
            return Err((token, Status::ERR_BAD_PARAM));
        }
        if !op.needed.contains(&session) {
            return Err((token, Status::ERR_NO_PERMISSIONS));
        }
        let same_user = op.parts.values().all(|p| match (p.peer_uid, peer_uid) {
            (Some(a), Some(b)) => a == b || a == 0 || b == 0,
            _ => true,
        });
        if !same_user {
            return Err((token, Status::ERR_NO_PERMISSIONS));
        }
        let gathered: usize = op.parts.values().map(|p| p.data.len()).sum();
        if gathered.saturating_add(data.len()) > MAX_GATHERED {
            return Err((token, Status::ERR_OUT_OF_RESOURCE));
        }
        if over_waiting {
            // An operation this part would have opened is not kept empty.
            let fresh = op.parts.is_empty();
            if fresh {
                self.ops.remove(&key);
            }
            return Err((token, Status::ERR_OUT_OF_RESOURCE));
        }
        if let Some(t) = timeout {
            let d = now + t;
            op.deadline = Some(op.deadline.map_or(d, |old| old.min(d)));
        }
        op.parts.insert(
            session,
            Part {
                token,
                peer_uid,
                data,
            },
        );
        if op.needed.iter().all(|s| op.parts.contains_key(s)) {
            let Some(op) = self.ops.remove(&key) else {
                return Ok(Vec::new());
            };
            let mut all = Vec::with_capacity(op.parts.values().map(|p| p.data.len()).sum());
            for p in op.parts.values() {
                all.extend_from_slice(&p.data);
            }
            return Ok(op
                .parts
                .into_values()
                .map(|p| (p.token, Ok(all.clone())))
                .collect());
        }
        Ok(Vec::new())
    }

    /// Fails every operation `pred` picks, answering its parts with `status`.
    fn fail_where(
        &mut self,
        status: Status,
        pred: impl Fn(&OpKey, &Op<T>) -> bool,
    ) -> CrossAnswers<T> {
        let keys: Vec<OpKey> = self
            .ops
            .iter()
            .filter(|(k, op)| pred(k, op))
            .map(|(k, _)| k.clone())
            .collect();
        let mut out = Vec::new();
        for k in keys {
            if let Some(op) = self.ops.remove(&k) {
                out.extend(op.parts.into_values().map(|p| (p.token, Err(status))));
            }
        }
        out
    }

    /// A session disconnected: every operation it has a part of or that waits for it fails
    /// (its own parts have nobody left to answer, and are dropped).
    pub(crate) fn session_ended(&mut self, session: SessionId) -> CrossAnswers<T> {
        for op in self.ops.values_mut() {
            op.parts.remove(&session);
        }
        self.fail_where(Status::ERR_UNREACH, |_, op| {
            op.needed.contains(&session) || op.parts.is_empty()
        })
    }

    /// A process ended: operations naming it (or its whole namespace) fail.
    pub(crate) fn proc_ended(&mut self, proc: &Proc) -> CrossAnswers<T> {
        self.fail_where(Status::ERR_PROC_TERM_WO_SYNC, |(_, procs), _| {
            procs.iter().any(|p| {
                p.nspace == proc.nspace && (p.rank == proc.rank || p.rank == Rank::WILDCARD)
            })
        })
    }

    /// A namespace ended: operations naming it fail.
    pub(crate) fn nspace_ended(&mut self, nspace: &Nspace) -> CrossAnswers<T> {
        self.fail_where(Status::ERR_PROC_TERM_WO_SYNC, |(_, procs), _| {
            procs.iter().any(|p| p.nspace == *nspace)
        })
    }

    /// When the earliest deadline is.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.ops.values().filter_map(|op| op.deadline).min()
    }

    /// Fails the operations whose deadline passed.
    pub(crate) fn handle_timeout(&mut self, now: Instant) -> CrossAnswers<T> {
        self.fail_where(Status::ERR_TIMEOUT, |_, op| {
            op.deadline.is_some_and(|d| d <= now)
        })
    }
}

#[cfg(test)]
mod tests;
