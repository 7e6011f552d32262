//! What processes ask of the run besides spawn and abort (job control, the process table;
//! logging is `log.rs`), and the lifecycle events the run raises for them, as a custom range that the server
//! delivers to the processes registered for their code:
//!
//! - a process ending abnormally (an exit status other than 0, a signal) while the run is not
//!   stopping: `EVENT_PROC_TERMINATED` to its job, with `ERR_PROC_ABORTED_BY_SIG` when a signal
//!   nobody in the run sent ended it;
//! - a process calling abort: `ERR_PROC_ABORTED` to its job, before the run is stopped;
//! - for a job spawned with `NOTIFY_PROC_TERMINATION`, every end of its processes, and with
//!   `NOTIFY_PROC_ABNORMAL_TERMINATION` the abnormal ones, also to the spawning process;
//!   with `NOTIFY_COMPLETION`, `EVENT_JOB_END` to it once every process ended.
//!
//! A normal end is announced only when asked for, as PRRTE does: Open MPI registers a handler
//! for every code that aborts on whatever it hears, and its ranks end at different times.

use std::os::unix::process::ExitStatusExt;

use pmix_server::Query;
use pmix_types::{DataArray, DataType, ProcInfo, ProcState, Rank, Value, attr};

use super::*;

/// What a job-control request asks to be done to its targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    /// One signal (`JOB_CTRL_SIGNAL`; `JOB_CTRL_KILL` is SIGKILL, "forcibly" in the
    /// standard's words, which needs nothing before it: it ends a stopped process too).
    Send(Signal),
    /// `JOB_CTRL_TERMINATE`, "politely": SIGCONT (a stopped process would not see the rest),
    /// SIGTERM, and SIGKILL after the grace period to a process still there, as PRRTE ends
    /// the processes it kills (there with 250 ms between the steps).
    Terminate,
}

/// What a job-control request asks for; `Err` with the status to answer.
pub(super) fn action_of(directives: &[Info]) -> Result<Action, Status> {
    let mut asked: Option<Action> = None;
    for i in directives {
        let sig = match i.key.as_str() {
            attr::JOB_CTRL_KILL if i.flag().unwrap_or(false) => Action::Send(Signal::SIGKILL),
            attr::JOB_CTRL_TERMINATE if i.flag().unwrap_or(false) => Action::Terminate,
            attr::JOB_CTRL_KILL | attr::JOB_CTRL_TERMINATE => continue,
            attr::JOB_CTRL_SIGNAL => i
                .value
                .as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .and_then(|n| Signal::try_from(n).ok())
                .map(Action::Send)
                .ok_or(Status::ERR_BAD_PARAM)?,
            attr::JOB_CTRL_ID | attr::TIMEOUT => continue,
            // Pause, resume, checkpoint, restart, provision, ...: not done here, and never
            // acknowledged as if they were.
            k if k.starts_with("pmix.jctrl.") => return Err(Status::ERR_NOT_SUPPORTED),
            _ if i.is_required() => return Err(Status::ERR_NOT_SUPPORTED),
            _ => continue,
        };
        match asked {
            Some(a) if a != sig => return Err(Status::ERR_BAD_PARAM),
            _ => asked = Some(sig),
        }
    }
    asked.ok_or(Status::ERR_BAD_PARAM)
}

/// The exit code of an end as PMIx reports it: the status, or 128 + the signal.
fn exit_code(status: &std::io::Result<ExitStatus>) -> i32 {
    match status {
        Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
        Err(_) => 1,
    }
}

/// The process that spawned a job, and which of the job's ends it asked to hear of.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Watcher {
    parent: Proc,
    /// `NOTIFY_COMPLETION`: `EVENT_JOB_END`.
    completion: bool,
    /// `NOTIFY_PROC_TERMINATION`: every process's end.
    every_end: bool,
    /// `NOTIFY_PROC_ABNORMAL_TERMINATION`: the abnormal ones.
    abnormal_ends: bool,
}

impl Watcher {
    /// What a spawn's `job_info` asks `parent` to hear of, if anything.
    pub(super) fn of(parent: &Proc, job_info: &[Info]) -> Option<Watcher> {
        let flag = |k: &str| {
            job_info
                .iter()
                .any(|i| i.key.as_str() == k && i.flag().unwrap_or(false))
        };
        let w = Watcher {
            parent: parent.clone(),
            completion: flag(attr::NOTIFY_COMPLETION),
            every_end: flag(attr::NOTIFY_PROC_TERMINATION),
            abnormal_ends: flag(attr::NOTIFY_PROC_ABNORMAL_TERMINATION),
        };
        (w.completion || w.every_end || w.abnormal_ends).then_some(w)
    }
}

/// `EVENT_CUSTOM_RANGE` for `procs`.
fn audience(procs: Vec<Proc>) -> Info {
    let procs = procs.into_iter().map(Value::Proc).collect();
    let array = DataArray::new(DataType::PROC, procs).unwrap_or_else(|_| DataArray::from_infos([]));
    Info::attr(attr::EVENT_CUSTOM_RANGE, array)
}

impl<J: Jobs> Supervisor<J> {
    /// How log lines name a process: as `--tag-output` tags its output, `@node` always in a
    /// multi-node run.
    pub(super) fn tag(&self, proc: &Proc) -> String {
        let at = self
            .jobs
            .node_of(proc)
            .map(|n| format!("@{n}"))
            .unwrap_or_default();
        match self.index.get(&proc.nspace) {
            Some(0) => format!("[{}{at}]", proc.rank),
            Some(j) => format!("[{j}:{}{at}]", proc.rank),
            None => format!("[{proc}{at}]"),
        }
    }

    /// `PMIx_Job_control`: signals the targets (processes of the run; rank `WILDCARD` for a
    /// whole job), or terminates them ([`Action::Terminate`]). A process a request ended by
    /// a signal is no failure of the run.
    pub(super) fn job_control(
        &mut self,
        requester: &Proc,
        targets: &[Proc],
        directives: &[Info],
        done: Completion<Vec<Info>>,
    ) {
        let action = match action_of(directives) {
            Ok(a) => a,
            Err(status) => return done.complete(Err(status)),
        };
        let mut hit: Vec<(usize, usize)> = Vec::new();
        for t in targets {
            let Some(&j) = self.index.get(&t.nspace) else {
                return done.complete(Err(Status::ERR_NOT_FOUND));
            };
            let n = self.table[j].procs.len();
            if t.rank == Rank::WILDCARD {
                hit.extend((0..n).map(|r| (j, r)));
            } else if (t.rank.0 as usize) < n {
                hit.push((j, t.rank.0 as usize));
            } else {
                return done.complete(Err(Status::ERR_NOT_FOUND));
            }
        }
        let who = self.who(requester);
        tracing::debug!(%requester, ?action, n = hit.len(), "job control");
        let mut signalled = Vec::new();
        for (j, r) in hit {
            let nspace = self.table[j].nspace.clone();
            let p = &mut self.table[j].procs[r];
            if p.gone {
                continue;
            }
            p.by_request = true;
            if let Some(pid) = p.pid {
                signalled.push((Proc::new(nspace, r as u32), pid));
            }
        }
        if !signalled.is_empty() {
            let what = match action {
                Action::Send(sig) => format!("{} to be sent to", sig.as_str()),
                Action::Terminate => format!(
                    "the termination (SIGCONT, SIGTERM, SIGKILL after {} ms) of",
                    self.grace.as_millis()
                ),
            };
            self.jobs.say(&format!(
                "{who} asked for {what} {} process(es)",
                signalled.len()
            ));
        }
        let kill_at = Instant::now() + self.grace;
        for (proc, pid) in signalled {
            match action {
                Action::Send(sig) => self.jobs.signal(&proc, pid, sig),
                Action::Terminate => {
                    self.jobs.signal(&proc, pid, Signal::SIGCONT);
                    self.jobs.signal(&proc, pid, Signal::SIGTERM);
                    self.terminating.push((kill_at, proc, pid));
                }
            }
        }
        done.complete(Ok(Vec::new()));
    }

    /// SIGKILL for the processes asked to terminate whose grace period is over, if they are
    /// still there.
    pub(super) fn kill_terminated(&mut self, now: Instant) {
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.terminating)
            .into_iter()
            .partition(|(at, _, _)| *at <= now);
        self.terminating = later;
        for (_, proc, pid) in due {
            let there = self
                .find(&proc)
                .is_some_and(|(_, p)| !p.gone && p.pid == Some(pid));
            if there {
                tracing::debug!(%proc, "still there after SIGTERM: SIGKILL");
                self.jobs.signal(&proc, pid, Signal::SIGKILL);
            }
        }
    }

    /// `PMIx_Query_info` for what the server does not know: the process tables
    /// (`QUERY_PROC_TABLE`, `QUERY_LOCAL_PROC_TABLE`, of the `NSPACE` qualifier's job, else
    /// the asking process's), with host names, programs, pids and states, the job's
    /// status (`QUERY_JOB_STATUS`), and what a spawn may ask of this run
    /// (`QUERY_SPAWN_SUPPORT`, `QUERY_DEBUG_SUPPORT`: comma-separated attribute keys).
    pub(super) fn query(&mut self, asker: &Proc, queries: &[Query], done: Completion<Vec<Info>>) {
        let mut answers = Vec::new();
        for q in queries {
            let nspace = q
                .qualifiers
                .iter()
                .find(|i| i.key.as_str() == attr::NSPACE)
                .and_then(|i| match &i.value {
                    Value::Nspace(n) => Some(n.clone()),
                    v => v.as_str().and_then(|s| Nspace::new(s).ok()),
                })
                .unwrap_or_else(|| asker.nspace.clone());
            for key in &q.keys {
                let local = match key.as_str() {
                    attr::QUERY_PROC_TABLE => false,
                    attr::QUERY_LOCAL_PROC_TABLE => true,
                    attr::QUERY_SPAWN_SUPPORT | attr::QUERY_DEBUG_SUPPORT => {
                        let debug = &crate::plan::debug::SUPPORTED;
                        let keys: Vec<&str> = if key.as_str() == attr::QUERY_SPAWN_SUPPORT {
                            crate::plan::job::SPAWN_ATTRIBUTES
                                .iter()
                                .chain(&super::recovery::ATTRIBUTES)
                                .chain(debug)
                                .copied()
                                .collect()
                        } else {
                            debug.to_vec()
                        };
                        answers.push(Info::new(key.clone(), Value::String(keys.join(","))));
                        continue;
                    }
                    attr::QUERY_JOB_STATUS => {
                        let Some(status) = self.job_status(&nspace) else {
                            return done.complete(Err(Status::ERR_NOT_FOUND));
                        };
                        answers.push(Info::new(key.clone(), Value::Status(status)));
                        continue;
                    }
                    _ => continue,
                };
                let Some(table) = self.proc_table(&nspace, local.then_some(asker)) else {
                    return done.complete(Err(Status::ERR_NOT_FOUND));
                };
                answers.push(Info::new(key.clone(), table));
            }
        }
        done.complete(if answers.is_empty() {
            Err(Status::ERR_NOT_SUPPORTED)
        } else {
            Ok(answers)
        });
    }

    /// `QUERY_JOB_STATUS` of `nspace`: the first abnormal end among its processes (as the
    /// run's exit status reports it), else success.
    fn job_status(&self, nspace: &Nspace) -> Option<Status> {
        let &j = self.index.get(nspace)?;
        Some(
            self.table[j]
                .term
                .map_or(Status::SUCCESS, |(status, _)| status),
        )
    }

    /// The processes of `nspace` (on the node of `near`, if given), as `PROC_INFO`s.
    fn proc_table(&self, nspace: &Nspace, near: Option<&Proc>) -> Option<Value> {
        let &j = self.index.get(nspace)?;
        let here = near.map(|p| self.jobs.host_of(p));
        let items = (0u32..)
            .zip(&self.table[j].procs)
            .map(|(rank, p)| (Proc::new(nspace.clone(), rank), p))
            .filter(|(proc, _)| here.as_ref().is_none_or(|h| *h == self.jobs.host_of(proc)))
            .map(|(proc, p)| {
                Value::ProcInfo(Box::new(ProcInfo {
                    hostname: self.jobs.host_of(&proc),
                    proc,
                    executable_name: p.exe.clone(),
                    pid: p.pid.map_or(0, |pid| pid.as_raw().unsigned_abs()),
                    exit_code: 0,
                    state: match (p.pid, p.gone) {
                        (_, true) => ProcState::TERMINATED,
                        (Some(_), false) => ProcState::RUNNING,
                        (None, false) => ProcState::UNDEF,
                    },
                }))
            })
            .collect();
        DataArray::new(DataType::PROC_INFO, items)
            .ok()
            .map(Value::from)
    }

    /// Raises the events of a process's end.
    pub(super) fn announce_end(&mut self, proc: &Proc, status: &std::io::Result<ExitStatus>) {
        let stopping = self.stopping.is_some();
        let Some((j, p)) = self.find(proc) else {
            return;
        };
        let by_request = p.by_request;
        let job = &mut self.table[j];
        let code = exit_code(status);
        let signal = status.as_ref().ok().and_then(|s| s.signal());
        if code != 0 && job.term.is_none() {
            let st = if signal.is_some() {
                Status::ERR_PROC_ABORTED_BY_SIG
            } else {
                Status::ERR_EXIT_NONZERO_TERM
            };
            job.term = Some((st, code));
        }
        let abnormal = code != 0;
        let mut to = Vec::new();
        // Not while the run stops: every process is being ended, and telling each of the
        // others of each end would cost the square of the job's size for nobody's benefit.
        if abnormal && !stopping && !job.doomed {
            to.push(Proc::new(job.nspace.clone(), Rank::WILDCARD));
        }
        if let Some(w) = &job.watcher {
            if w.every_end || (abnormal && w.abnormal_ends) {
                to.push(w.parent.clone());
            }
        }
        if to.is_empty() {
            return;
        }
        let info = vec![
            Info::attr(attr::EVENT_AFFECTED_PROC, proc.clone()),
            Info::attr(attr::EXIT_CODE, code),
            audience(to),
        ];
        let killed = signal.is_some() && !by_request && !stopping && !job.doomed;
        if job.recoverable {
            // Its processes go on, and a catch-all handler must not end them for an event it
            // does not know: Open MPI's aborts on any code but the failures it handles
            // (ERR_PROC_TERM_WO_SYNC, ERR_PROC_ABORTED_BY_SIG, ERR_PROC_ABORTED). Handlers
            // registered for this code still hear it.
            let mut only_asked = info.clone();
            only_asked.push(Info::attr(attr::EVENT_NON_DEFAULT, true));
            self.jobs.notify(Status::EVENT_PROC_TERMINATED, &only_asked);
            if abnormal && signal.is_none() {
                // What PRRTE's recoverable jobs (`--runtime-options recoverable,notifyerrors`)
                // hear of the same end instead, for the programs written for it.
                self.jobs.notify(Status::ERR_EXIT_NONZERO_TERM, &only_asked);
            }
        } else {
            self.jobs.notify(Status::EVENT_PROC_TERMINATED, &info);
        }
        if killed {
            self.jobs.notify(Status::ERR_PROC_ABORTED_BY_SIG, &info);
        }
    }

    /// Raises `ERR_PROC_ABORTED` for a process that called abort, before the run stops.
    pub(super) fn announce_abort(&mut self, proc: &Proc, status: Status) {
        let Some(&j) = self.index.get(&proc.nspace) else {
            return;
        };
        let job = &self.table[j];
        let info = vec![
            Info::attr(attr::EVENT_AFFECTED_PROC, proc.clone()),
            Info::attr(attr::EXIT_CODE, status.0),
            audience(vec![Proc::new(job.nspace.clone(), Rank::WILDCARD)]),
        ];
        self.jobs.notify(Status::ERR_PROC_ABORTED, &info);
    }

    /// Raises `EVENT_JOB_END` for job `j`, which just ended, to the process that spawned it
    /// with `NOTIFY_COMPLETION`.
    pub(super) fn announce_job_end(&mut self, j: usize) {
        let job = &self.table[j];
        let Some(w) = job.watcher.as_ref().filter(|w| w.completion) else {
            return;
        };
        let (status, code) = job.term.unwrap_or((Status::SUCCESS, 0));
        let info = vec![
            Info::attr(
                attr::EVENT_AFFECTED_PROC,
                Proc::new(job.nspace.clone(), Rank::WILDCARD),
            ),
            Info::attr(attr::NSPACE, job.nspace.as_str()),
            Info::attr(attr::JOB_TERM_STATUS, status),
            Info::attr(attr::EXIT_CODE, code),
            audience(vec![w.parent.clone()]),
        ];
        self.jobs.notify(Status::EVENT_JOB_END, &info);
    }
}
