//! Jobs that survive their failed processes (`--enable-recovery`, and a spawn's
//! `JOB_RECOVERABLE` or `JOB_CONTINUOUS`), as PRRTE's recoverable jobs do.
//!
//! A failure of a process of a recoverable job (an exit status other than 0, a signal nobody
//! in the run sent, an end without finalize, an abort) does not stop the run: pmixrun says
//! why, the first such failure's status becomes the run's exit status, and the rest of the
//! run goes on. The others hear of it by the lifecycle events of `control.rs`; the server
//! fails what waits for it (fences and gets naming it, now and later:
//! `pmix_server::Server::client_ended`). A process that calls abort is itself ended
//! (SIGTERM, SIGKILL after the grace period), since it waits for that, and only it. A failure
//! of a job that is not recoverable still stops every job, and a run-level failure
//! (`--timeout`, a signal to pmixrun, a node lost) always does.
//!
//! A job may also restart its failed processes (`--max-restarts N`, a spawn's `MAX_RESTARTS`;
//! either makes the job recoverable): a process that failed is started again, the same rank
//! of the same job, at most N times; a failure so recovered does not count for the run's
//! exit status. Not for an abort (the process asked to end). Across nodes the daemon of its
//! node starts it, and every node's server forgets its end (`multinode/daemon/mod.rs`).

use pmix_types::attr;

use super::*;

/// The spawn attributes of recovery pmixrun honours, for `QUERY_SPAWN_SUPPORT`.
pub(crate) const ATTRIBUTES: [&str; 3] = [
    attr::JOB_RECOVERABLE,
    attr::JOB_CONTINUOUS,
    attr::MAX_RESTARTS,
];

/// Whether a job spawned with `job_info` survives its failed processes: as its
/// `JOB_RECOVERABLE` or `JOB_CONTINUOUS` says (true if either is), else as the run's
/// `--enable-recovery` (`run_default`) says.
pub(super) fn recoverable(job_info: &[Info], run_default: bool) -> bool {
    let asked: Vec<bool> = job_info
        .iter()
        .filter(|i| [attr::JOB_RECOVERABLE, attr::JOB_CONTINUOUS].contains(&i.key.as_str()))
        .map(|i| i.flag().unwrap_or(false))
        .collect();
    if asked.is_empty() {
        run_default
    } else {
        asked.contains(&true)
    }
}

/// How many times each process of a job spawned with `job_info` may be restarted: its
/// `MAX_RESTARTS`, else the run's `--max-restarts` (`run_default`).
pub(super) fn max_restarts(job_info: &[Info], run_default: u32) -> u32 {
    job_info
        .iter()
        .find(|i| i.key.as_str() == attr::MAX_RESTARTS)
        .and_then(|i| i.value.as_i64())
        .and_then(|n| u32::try_from(n).ok())
        .unwrap_or(run_default)
}

impl<J: Jobs> Supervisor<J> {
    /// Starts `proc`, whose end failed as `reason` says, again if its job has restarts left
    /// for it; false if it was not (then the failure stands).
    pub(super) fn restart(&mut self, proc: &Proc, reason: &str) -> bool {
        if self.stopping.is_some() {
            return false;
        }
        let Some((j, p)) = self.find(proc) else {
            return false;
        };
        let (restarts, aborted) = (p.restarts, p.aborted);
        let (max, ended) = (self.table[j].max_restarts, self.table[j].ended);
        if restarts >= max || aborted || ended {
            return false;
        }
        let n = restarts + 1;
        let who = self.who(proc);
        match self.jobs.restart(proc, n) {
            Ok(l) => {
                if let Some((_, p)) = self.find(proc) {
                    *p = ProcState {
                        pid: Some(l.pid),
                        exe: l.exe,
                        restarts: n,
                        ..ProcState::default()
                    };
                }
                self.jobs
                    .say(&format!("{reason}; restarting it ({n} of {max})"));
                true
            }
            Err(e) => {
                if let Some((_, p)) = self.find(proc) {
                    p.restarts = n;
                }
                self.jobs.say(&format!("cannot restart {who}: {e}"));
                false
            }
        }
    }

    /// Records the failure of a process of a recoverable job: says why, and makes its status
    /// the run's unless an earlier failure's is; the run goes on. `ending` are being ended
    /// for it (an abort's), so they are not among the others that go on.
    pub(super) fn survive(&mut self, status: u8, reason: &str, ending: &[Proc]) {
        let others = alive(&self.table).any(|(p, _)| !ending.contains(&p));
        let tail = if others {
            "; the others go on (recovery enabled)"
        } else {
            ""
        };
        self.jobs.say(&format!("{reason}{tail}"));
        self.status.get_or_insert(status);
    }

    /// True if `proc` belongs to a job that survives its failed processes.
    pub(super) fn is_recoverable(&self, proc: &Proc) -> bool {
        self.index
            .get(&proc.nspace)
            .and_then(|&j| self.table.get(j))
            .is_some_and(|j| j.recoverable)
    }

    /// `proc`, of a recoverable job, called abort: it is ended, and its end is no further
    /// failure (its abort was the failure).
    pub(super) fn end_aborted(&mut self, proc: &Proc) {
        let Some((_, p)) = self.find(proc) else {
            return;
        };
        p.aborted = true;
        p.by_request = true;
        let Some(pid) = p.pid.filter(|_| !p.gone) else {
            return;
        };
        self.jobs.signal(proc, pid, Signal::SIGCONT);
        self.jobs.signal(proc, pid, Signal::SIGTERM);
        self.terminating
            .push((Instant::now() + self.grace, proc.clone(), pid));
    }
}
