//! `PMIx_Abort` (and PMI-1's and PMI-2's abort): which processes it ends, and what it does to
//! the run.
//!
//! An abort names the processes to end (`procs`); none means the caller, as PRRTE reads it,
//! and a rank of `WILDCARD` every process of that namespace. A process or namespace that is
//! not the run's refuses the whole request with `ERR_NOT_FOUND` and ends nobody. The caller
//! is ended only if it is among them: an abort of others returns to it once they are being
//! ended.
//!
//! If every process named belongs to a recoverable job (`recovery.rs`) and the run is not
//! stopping, only they are ended (SIGTERM, SIGKILL after the grace period), the others hear
//! `ERR_PROC_ABORTED` for each (for a whole namespace, once: its processes are the ones told),
//! and the abort's status becomes the run's unless an earlier
//! failure's is. Otherwise the run fails with the abort's status and every job is stopped,
//! as mpiexec does for `MPI_Abort`: the processes of a job depend on each other.

use std::collections::{HashMap, HashSet};

use pmix_types::Rank;

use super::*;

/// How many of the processes an abort ends pmixrun names in its message.
const NAMED: usize = 4;

impl<J: Jobs> Supervisor<J> {
    /// `caller` asked for `procs` to be aborted with `status`; `done` answers it.
    pub(super) fn abort(
        &mut self,
        caller: &Proc,
        status: Status,
        message: &str,
        procs: &[Proc],
        done: Completion<()>,
    ) {
        let targets = match self.abort_targets(caller, procs) {
            Ok(t) => t,
            Err(unknown) => {
                let who = self.who(caller);
                self.jobs.say(&format!(
                    "{who} asked to abort {unknown}, which is not a process of this run; \
                     nothing was aborted"
                ));
                return done.complete(Err(Status::ERR_NOT_FOUND));
            }
        };
        // The end of a process that waited to hear its last requests is this abort's doing:
        // the abort says why.
        if let Some(settling) = &mut self.settling {
            settling
                .failures
                .retain(|f| !f.unheard.as_ref().is_some_and(|u| targets.contains(u)));
            settling.waiting.retain(|w| !targets.contains(w));
        }
        // A failure that happened before is decided first.
        self.settle();
        for t in self.announced(&targets) {
            self.announce_abort(&t, status);
        }
        let reason = self.abort_reason(caller, status, message, &targets);
        let recoverable = targets.iter().all(|t| self.is_recoverable(t));
        if recoverable && self.stopping.is_none() {
            self.survive(exit_code_of_abort(status.0), &reason, &targets);
            for t in &targets {
                self.end_aborted(t);
            }
        } else {
            self.fail(exit_code_of_abort(status.0), reason);
        }
        // Answered once the run is being stopped (or those named are being ended): what the
        // caller does after its abort returns can no longer change the outcome.
        done.complete(Ok(()));
    }

    /// The processes `procs` names, each once, in their order; the caller if it names none.
    /// `Err` holds the first entry that is not a process of the run.
    fn abort_targets(&self, caller: &Proc, procs: &[Proc]) -> Result<Vec<Proc>, Proc> {
        if procs.is_empty() {
            return Ok(vec![caller.clone()]);
        }
        let mut seen = HashSet::new();
        let mut targets = Vec::new();
        for p in procs {
            let size = self
                .index
                .get(&p.nspace)
                .map(|&j| self.table[j].procs.len())
                .ok_or_else(|| p.clone())?;
            let named: Vec<Proc> = if p.rank == Rank::WILDCARD {
                (0..size)
                    .map(|r| Proc::new(p.nspace.clone(), r as u32))
                    .collect()
            } else if (p.rank.0 as usize) < size {
                vec![p.clone()]
            } else {
                return Err(p.clone());
            };
            targets.extend(named.into_iter().filter(|t| seen.insert(t.clone())));
        }
        Ok(targets)
    }

    /// Whom the abort of `targets` is announced as aborted: each of them, but a namespace all
    /// of whose processes are among them once, as `(nspace, WILDCARD)`. Its processes are
    /// those told, and all are ending: one event each, not one per process of it (N² for a
    /// namespace of N).
    fn announced(&self, targets: &[Proc]) -> Vec<Proc> {
        let mut named: HashMap<&Nspace, usize> = HashMap::new();
        for t in targets {
            *named.entry(&t.nspace).or_default() += 1;
        }
        let whole = |ns: &Nspace| {
            self.index
                .get(ns)
                .is_some_and(|&j| named.get(ns) == Some(&self.table[j].procs.len()))
        };
        let mut once = HashSet::new();
        targets
            .iter()
            .filter_map(|t| {
                if !whole(&t.nspace) {
                    Some(t.clone())
                } else if once.insert(&t.nspace) {
                    Some(Proc::new(t.nspace.clone(), Rank::WILDCARD))
                } else {
                    None
                }
            })
            .collect()
    }

    /// What pmixrun says of `caller`'s abort of `targets`.
    fn abort_reason(
        &self,
        caller: &Proc,
        status: Status,
        message: &str,
        targets: &[Proc],
    ) -> String {
        let by = if self.index.contains_key(&caller.nspace) {
            self.who(caller)
        } else {
            // Not a process of the run: a tool (the server aborts the processes a debugger
            // left held in init, in its name).
            return format!("tool {caller}: {message}");
        };
        let of = if targets == [caller.clone()] {
            String::new()
        } else {
            let mut names: Vec<String> = targets.iter().take(NAMED).map(|t| self.who(t)).collect();
            if targets.len() > NAMED {
                names.push(format!("{} more", targets.len() - NAMED));
            }
            format!(" of {}", names.join(", "))
        };
        let s = status.0;
        if message.is_empty() {
            format!("{by} called abort{of} with status {s}")
        } else {
            format!("{by} called abort{of} with status {s}: {message}")
        }
    }
}
