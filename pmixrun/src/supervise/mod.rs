//! The supervisor: the one place that decides the run's fate from what happens to it.
//!
//! It receives [`Event`]s (process exits from the waiter threads, connect/finalize/abort/spawn
//! from the server's callbacks, signals from the signal thread) on one channel, with a
//! deadline for `--timeout` and for the grace period of a stopping run; it never sleeps.
//!
//! A run is made of jobs: the first one, from the command line, and every job a process
//! spawned, each a namespace whose processes are known by rank. The run ends when every job
//! has ended; a job's namespace is let go as soon as its last process ended. The first failure
//! of any process of any job decides the exit status and stops every job, unless the job is
//! recoverable (`recovery.rs`): then the run goes on without it. What the supervisor
//! does to the world (start a spawned job, signal processes, let a namespace go, tell the
//! user) goes through [`Jobs`], so its decisions are tested without processes.

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use pmix_server::{App, Completion};
use pmix_types::{Info, Nspace, Proc, Status};

use crate::node::host::Event;

mod abort;
mod control;
mod log;
pub(crate) mod recovery;

/// How long processes get between SIGTERM (or a forwarded signal) and SIGKILL, unless
/// `--grace` says otherwise: when the run stops, and after `PMIX_JOB_CTRL_TERMINATE`.
pub(crate) const GRACE: Duration = Duration::from_secs(2);

/// How long to wait for processes to be reaped after SIGKILL before giving up on them (a
/// process stuck in the kernel cannot be killed at all).
const AFTER_KILL: Duration = Duration::from_secs(5);

/// How long a failure waits for the reports of processes that had already ended when it was
/// reported (their waiter threads report within microseconds; this only bounds a lost one).
const SETTLE: Duration = Duration::from_secs(1);

/// The exit status of a run that exceeded `--timeout`, as `timeout(1)` uses.
pub(crate) const TIMEOUT_STATUS: u8 = 124;

/// What the supervisor asks of the world.
pub(crate) trait Jobs {
    /// Registers and starts the job `parent` asked for, every process of it, or fails.
    fn spawn(
        &mut self,
        parent: &Proc,
        job_info: &[Info],
        apps: &[App],
    ) -> Result<Started, SpawnFailed>;
    /// Starts `proc`, which ended, again: the same rank of the same job, with what it was
    /// started with, on its node (`--max-restarts`); why not if it could not be.
    /// `reincarnation` counts its restarts, this one included: its `PMIX_REINCARNATION` from
    /// now on.
    fn restart(&mut self, proc: &Proc, reincarnation: u32) -> Result<Launched, String>;
    /// Sends `sig` to the process group `pid` of `proc`.
    fn signal(&mut self, proc: &Proc, pid: Pid, sig: Signal);
    /// True if `proc`, process `pid`, ended, whether or not its end was reported yet.
    fn has_ended(&mut self, proc: &Proc, pid: Pid) -> bool;
    /// A process ended.
    fn proc_ended(&mut self, proc: &Proc);
    /// Every process of `nspace` ended (or will never start): let the namespace go.
    fn job_ended(&mut self, nspace: &Nspace);
    /// Tells the user something, on one line (pmixrun prefixes `pmixrun: `).
    fn say(&mut self, line: &str) {
        eprintln!("pmixrun: {line}");
    }
    /// Writes a line a process logged (`PMIx_Log`), as it is, on stdout or stderr.
    fn write_log(&mut self, stdout: bool, line: &str) {
        crate::node::launch::write_log(stdout, line);
    }
    /// Sends a line a process logged to the syslog daemon at `severity`; false if it did
    /// not take it.
    fn syslog(&mut self, severity: u8, line: &str) -> bool {
        crate::node::syslog::send(severity, line)
    }
    /// Raises a lifecycle event for the processes `info` names in `EVENT_CUSTOM_RANGE`.
    fn notify(&mut self, code: Status, info: &[Info]);
    /// The node of `proc` in a multi-node run (`None` on one node).
    fn node_of(&self, proc: &Proc) -> Option<String>;
    /// The host name of the node of `proc`.
    fn host_of(&self, proc: &Proc) -> String;
    /// Has the server read and act on what `proc`, which ended, sent before its end (its
    /// abort may still be unread), then report [`Event::ClientSettled`]; false where this
    /// cannot be asked (the end is then decided at once).
    fn hear_out(&mut self, _proc: &Proc) -> bool {
        false
    }
}

/// A job whose processes were started.
#[derive(Debug)]
pub(crate) struct Started {
    /// Its namespace, registered.
    pub(crate) nspace: Nspace,
    /// Its number of processes.
    pub(crate) size: u32,
    /// Each rank started, in rank order; a rank missing never will be.
    pub(crate) procs: Vec<Launched>,
}

/// One process started.
#[derive(Debug, Clone)]
pub(crate) struct Launched {
    pub(crate) rank: u32,
    /// Its process group.
    pub(crate) pid: Pid,
    /// The program it runs, as found on its node (`PATH` resolved), for the process tables.
    pub(crate) exe: String,
}

/// A spawn that failed.
#[derive(Debug)]
pub(crate) struct SpawnFailed {
    /// What the requesting process is answered.
    pub(crate) status: Status,
    /// Why, for the user.
    pub(crate) message: String,
    /// What was done before the failure: the registered namespace and the processes started
    /// (ranks 0, 1, ...). The supervisor kills them and lets the namespace go once they ended.
    pub(crate) partial: Option<Started>,
}

#[derive(Debug, Default)]
struct ProcState {
    /// Its process group; `None` until started (or if it never was).
    pid: Option<Pid>,
    /// The program it runs (empty until started).
    exe: String,
    /// Ended, or never to be started.
    gone: bool,
    connected: bool,
    finalized: bool,
    /// A job-control request signalled it: its end by a signal is no failure.
    by_request: bool,
    /// It called abort in a recoverable job and is being ended: its end is no further failure.
    aborted: bool,
    /// How many times it was started again after a failure.
    restarts: u32,
}

#[derive(Debug)]
struct Job {
    nspace: Nspace,
    procs: Vec<ProcState>,
    /// Left over from a spawn that failed part way: killed, and its ends are no failure.
    doomed: bool,
    /// Every process ended and the namespace was let go.
    ended: bool,
    /// Who hears of its ends beyond itself: the process that spawned it, and what it asked
    /// to hear of (`NOTIFY_COMPLETION`, `NOTIFY_PROC_TERMINATION`, ...).
    watcher: Option<control::Watcher>,
    /// How its first abnormal end ended it (the status and exit code of `EVENT_JOB_END`).
    term: Option<(Status, i32)>,
    /// Its generation: 0 for the command line's job (and a job a tool spawned), its parent's
    /// plus one for a spawned job.
    depth: u32,
    /// Its failed processes do not stop the run (`recovery.rs`).
    recoverable: bool,
    /// How many times each of its processes may be started again after a failure.
    max_restarts: u32,
}

/// Why a process's end fails the run.
#[derive(Debug)]
struct Failure {
    status: u8,
    reason: String,
    /// Killed by a signal (nobody in the run sent one yet: the run was not stopping).
    by_signal: bool,
    /// The process that ended without finalize and whose last requests the server is still
    /// reading: an abort among them explains its end better.
    unheard: Option<Proc>,
    /// Of a recoverable job: the run goes on.
    recoverable: bool,
    /// The process whose end it is (none for a failure to wait for it).
    proc: Option<Proc>,
}

/// The first failure reported, held until the ends of the processes that had ended with it
/// are reported too: the waiter threads report in no particular order, so the failure
/// reported first need not be the first that happened. A rank killed while another fences
/// with it is the typical case: the other's fence fails, it exits with an error, and its
/// waiter may well report before the killed rank's does.
#[derive(Debug)]
struct Settling {
    /// The failures reported so far, in the order they were.
    failures: Vec<Failure>,
    /// The processes that had ended when the first was reported, not reported yet.
    waiting: Vec<Proc>,
    give_up_at: Instant,
}

#[derive(Debug, Clone, Copy)]
struct Stopping {
    /// When the remaining processes get SIGKILL, unless that happened already.
    kill_at: Option<Instant>,
    /// When to stop waiting for them.
    give_up_at: Option<Instant>,
}

/// The state of the run.
#[derive(Debug)]
pub(crate) struct Supervisor<J: Jobs> {
    jobs: J,
    /// Every job of the run, in the order they were added; the first is the command line's.
    table: Vec<Job>,
    /// Where each namespace is in `table`.
    index: HashMap<Nspace, usize>,
    /// The exit status, set by the first failure.
    status: Option<u8>,
    /// A failure waiting for the reports of processes that ended with it.
    settling: Option<Settling>,
    stopping: Option<Stopping>,
    /// `--timeout` and its deadline.
    timeout: Option<(Duration, Instant)>,
    /// Between SIGTERM and SIGKILL (`--grace`).
    grace: Duration,
    /// Processes a job-control request asked to terminate: each gets SIGKILL at its instant
    /// if it is still there.
    terminating: Vec<(Instant, Proc, Pid)>,
    /// The deepest generation of spawned jobs allowed (`--max-spawn-depth`).
    max_spawn_depth: u32,
    /// Jobs are recoverable unless their spawn says otherwise (`--enable-recovery`).
    recovery: bool,
    /// How many times a process of a job is restarted unless its spawn says otherwise
    /// (`--max-restarts`).
    max_restarts: u32,
}

fn exit_code_of_abort(status: i32) -> u8 {
    u8::try_from(status).ok().filter(|s| *s != 0).unwrap_or(1)
}

fn signal_name(sig: i32) -> String {
    Signal::try_from(sig)
        .map(|s| s.as_str().to_owned())
        .unwrap_or_else(|_| format!("signal {sig}"))
}

/// Why `who`'s end with `status` fails the run, if it does; `unfinalized` if it connected and
/// never finalized.
fn failure_of(
    who: &str,
    status: std::io::Result<ExitStatus>,
    unfinalized: bool,
) -> Option<Failure> {
    let fail = |status, reason| {
        Some(Failure {
            status,
            reason,
            by_signal: false,
            unheard: None,
            recoverable: false,
            proc: None,
        })
    };
    let status = match status {
        Ok(s) => s,
        Err(e) => {
            return fail(
                1,
                format!(
                    "cannot wait for {who}: {}",
                    crate::node::launch::describe(&e)
                ),
            );
        }
    };
    let without = if unfinalized {
        " without calling finalize"
    } else {
        ""
    };
    match (status.code(), status.signal()) {
        (Some(0), _) if unfinalized => fail(
            1,
            format!("{who} exited with status 0 without calling finalize"),
        ),
        (Some(0), _) => None,
        (Some(code), _) => fail(
            u8::try_from(code).unwrap_or(1),
            format!("{who} exited with status {code}{without}"),
        ),
        (None, Some(sig)) => Some(Failure {
            status: u8::try_from(128 + sig).unwrap_or(255),
            reason: format!("{who} was killed by {}{without}", signal_name(sig)),
            by_signal: true,
            unheard: None,
            recoverable: false,
            proc: None,
        }),
        (None, None) => fail(1, format!("{who} ended with {status}")),
    }
}

/// The process groups of the processes still running.
fn alive(table: &[Job]) -> impl Iterator<Item = (Proc, Pid)> + '_ {
    table.iter().flat_map(|j| {
        (0u32..)
            .zip(&j.procs)
            .filter(|(_, p)| !p.gone)
            .filter_map(|(rank, p)| Some((Proc::new(j.nspace.clone(), rank), p.pid?)))
    })
}

impl<J: Jobs> Supervisor<J> {
    /// A run without jobs yet, acting through `jobs`, with `timeout` counted from now.
    pub(crate) fn new(jobs: J, timeout: Option<Duration>) -> Supervisor<J> {
        Supervisor {
            jobs,
            table: Vec::new(),
            index: HashMap::new(),
            status: None,
            settling: None,
            stopping: None,
            timeout: timeout.map(|t| (t, Instant::now() + t)),
            grace: GRACE,
            terminating: Vec::new(),
            max_spawn_depth: crate::cli::MAX_SPAWN_DEPTH,
            recovery: false,
            max_restarts: 0,
        }
    }

    /// Makes every job added from now on recoverable unless its spawn says otherwise
    /// (`--enable-recovery`).
    pub(crate) fn set_recovery(&mut self, recovery: bool) {
        self.recovery = recovery;
    }

    /// Restarts each failed process of a job added from now on up to `n` times unless its
    /// spawn says otherwise (`--max-restarts`); a job with restarts is recoverable.
    pub(crate) fn set_max_restarts(&mut self, n: u32) {
        self.max_restarts = n;
    }

    /// Sets the deepest generation of spawned jobs allowed (default [`crate::cli::MAX_SPAWN_DEPTH`]).
    pub(crate) fn set_max_spawn_depth(&mut self, depth: u32) {
        self.max_spawn_depth = depth;
    }

    /// Sets how long processes get between SIGTERM and SIGKILL (default [`GRACE`]).
    pub(crate) fn set_grace(&mut self, grace: Duration) {
        self.grace = grace;
    }

    /// What the supervisor acts through.
    pub(crate) fn jobs_mut(&mut self) -> &mut J {
        &mut self.jobs
    }

    /// Adds a job of `size` processes, none started yet; returns its index.
    pub(crate) fn add_job(&mut self, nspace: Nspace, size: u32) -> usize {
        let i = self.table.len();
        self.index.insert(nspace.clone(), i);
        self.table.push(Job {
            nspace,
            procs: (0..size).map(|_| ProcState::default()).collect(),
            doomed: false,
            ended: false,
            watcher: None,
            term: None,
            depth: 0,
            recoverable: self.recovery || self.max_restarts > 0,
            max_restarts: self.max_restarts,
        });
        i
    }

    /// Adds a job whose processes started (those that did not never will).
    pub(crate) fn add_started_job(&mut self, started: Started) -> usize {
        let i = self.add_job(started.nspace, started.size);
        for l in started.procs {
            self.started(i, l);
        }
        if let Some(j) = self.table.get_mut(i) {
            for p in j.procs.iter_mut().filter(|p| p.pid.is_none()) {
                p.gone = true;
            }
        }
        i
    }

    /// Records that a process of job `job` was started.
    pub(crate) fn started(&mut self, job: usize, l: Launched) {
        if let Some(p) = self
            .table
            .get_mut(job)
            .and_then(|j| j.procs.get_mut(l.rank as usize))
        {
            p.pid = Some(l.pid);
            p.exe = l.exe;
        }
    }

    /// Processes of the first job could not be started: the run fails, and those not started
    /// yet never will be.
    pub(crate) fn not_started(&mut self, job: usize, status: u8, message: &str) {
        if let Some(j) = self.table.get_mut(job) {
            for p in j.procs.iter_mut().filter(|p| p.pid.is_none()) {
                p.gone = true;
            }
        }
        self.fail(status, message.to_owned());
    }

    /// The job and the state of `proc`, if it is one of the run's.
    fn find(&mut self, proc: &Proc) -> Option<(usize, &mut ProcState)> {
        let &j = self.index.get(&proc.nspace)?;
        let p = self.table.get_mut(j)?.procs.get_mut(proc.rank.0 as usize)?;
        Some((j, p))
    }

    /// How messages name a process: by rank in the first job, by rank and namespace in the
    /// spawned ones.
    fn who(&self, proc: &Proc) -> String {
        match self.index.get(&proc.nspace) {
            Some(0) => format!("rank {}", proc.rank),
            _ => format!("rank {} of {}", proc.rank, proc.nspace),
        }
    }

    fn signal_all(&mut self, sig: Signal) {
        for (proc, pid) in alive(&self.table) {
            self.jobs.signal(&proc, pid, sig);
        }
    }

    /// Starts stopping the run with `sig`, SIGKILL following after the grace period.
    fn stop(&mut self, sig: Signal) {
        if self.stopping.is_some() {
            return;
        }
        tracing::debug!(?sig, "stopping the run");
        self.signal_all(sig);
        self.stopping = Some(Stopping {
            kill_at: Some(Instant::now() + self.grace),
            give_up_at: None,
        });
    }

    fn kill_now(&mut self) {
        tracing::debug!("killing the run");
        self.signal_all(Signal::SIGKILL);
        self.stopping = Some(Stopping {
            kill_at: None,
            give_up_at: Some(Instant::now() + AFTER_KILL),
        });
    }

    /// Records a failure that stops the run: says why, sets the exit status unless an earlier
    /// failure (of a recoverable job) did, stops every job.
    fn fail(&mut self, status: u8, reason: String) {
        if self.stopping.is_some() {
            return;
        }
        self.settling = None;
        let others = alive(&self.table).next().is_some();
        let tail = if others { "; killing the job" } else { "" };
        self.jobs.say(&format!("{reason}{tail}"));
        self.status.get_or_insert(status);
        self.stop(Signal::SIGTERM);
    }

    /// Acts on a process's failure: the run stops, unless its job is recoverable.
    fn failed(&mut self, f: Failure) {
        if f.recoverable {
            if f.proc.as_ref().is_some_and(|p| self.restart(p, &f.reason)) {
                return;
            }
            self.survive(f.status, &f.reason, &[]);
        } else {
            self.fail(f.status, f.reason);
        }
    }

    fn exited(&mut self, proc: &Proc, status: std::io::Result<ExitStatus>) {
        self.jobs.proc_ended(proc);
        self.announce_end(proc, &status);
        let stopping = self.stopping.is_some();
        let Some((j, p)) = self.find(proc) else {
            return;
        };
        p.gone = true;
        let unfinalized = p.connected && !p.finalized;
        let asked =
            p.aborted || (p.by_request && status.as_ref().is_ok_and(|s| s.signal().is_some()));
        if stopping || self.table[j].doomed || asked {
            // Expected: it was told to stop.
            return;
        }
        let who = self.who(proc);
        let mut failure = failure_of(&who, status, unfinalized);
        let recoverable = self.table[j].recoverable;
        if let Some(f) = &mut failure {
            f.recoverable = recoverable;
            f.proc = Some(proc.clone());
        }
        // Ended without finalize and not by a signal: it may have asked for an abort just
        // before, which the server has not read yet. Its end waits for that to be heard.
        let hearing = unfinalized
            && failure.as_ref().is_some_and(|f| !f.by_signal)
            && self.jobs.hear_out(proc);
        if hearing {
            if let Some(f) = &mut failure {
                f.unheard = Some(proc.clone());
            }
        }
        if let Some(settling) = &mut self.settling {
            settling.waiting.retain(|w| w != proc);
            if hearing {
                settling.waiting.push(proc.clone());
            }
            settling.failures.extend(failure);
            if settling.waiting.is_empty() {
                self.settle();
            }
            return;
        }
        let Some(failure) = failure else { return };
        // Processes that ended too, whose reports are still on their way; and this one's last
        // requests.
        let mut waiting = Vec::new();
        if hearing {
            waiting.push(proc.clone());
        }
        for job in self.table.iter().filter(|j| !j.doomed) {
            for (rank, p) in (0u32..).zip(&job.procs) {
                let who = Proc::new(job.nspace.clone(), rank);
                match p.pid {
                    Some(pid) if !p.gone && self.jobs.has_ended(&who, pid) => waiting.push(who),
                    _ => {}
                }
            }
        }
        if waiting.is_empty() {
            return self.failed(failure);
        }
        tracing::debug!(?waiting, "a failure waits for the ends reported after it");
        self.settling = Some(Settling {
            failures: vec![failure],
            waiting,
            give_up_at: Instant::now() + SETTLE,
        });
    }

    /// Decides between failures that happened together: a process killed by a signal cannot
    /// have been reacting to another's end (nobody in the run signalled it), whereas one that
    /// exited with an error status may have been (its fence or get failed because a peer was
    /// gone), so the first killed process is blamed, or else the first reported. In a
    /// recoverable job the others are failures too, told after it.
    fn settle(&mut self) {
        let Some(settling) = self.settling.take() else {
            return;
        };
        let mut failures = settling.failures;
        let first = failures.iter().position(|f| f.by_signal).unwrap_or(0);
        if first < failures.len() {
            let f = failures.remove(first);
            let go_on = f.recoverable;
            self.failed(f);
            if go_on {
                for f in failures {
                    self.failed(f);
                }
            }
        }
    }

    /// Starts the job `parent` asked for and answers it; a failure is the parent's to handle,
    /// not the run's.
    fn spawn(&mut self, parent: &Proc, job_info: &[Info], apps: &[App], done: Completion<Nspace>) {
        if self.stopping.is_some() {
            return done.complete(Err(Status::ERR_JOB_CANCELED));
        }
        // A tool's spawn (its parent is no process of the run) starts a generation 1 job.
        let depth = self
            .index
            .get(&parent.nspace)
            .and_then(|&j| self.table.get(j))
            .map_or(1, |j| j.depth.saturating_add(1));
        if depth > self.max_spawn_depth {
            let who = self.who(parent);
            self.jobs.say(&format!(
                "spawn by {who} refused: the job would be generation {depth} of jobs spawned \
                 by jobs, and this run allows {} (--max-spawn-depth)",
                self.max_spawn_depth
            ));
            return done.complete(Err(Status::ERR_OUT_OF_RESOURCE));
        }
        match self.jobs.spawn(parent, job_info, apps) {
            Ok(started) => {
                let nspace = started.nspace.clone();
                tracing::debug!(%parent, %nspace, n = started.procs.len(), "spawned");
                let j = self.add_started_job(started);
                self.table[j].depth = depth;
                let restarts = recovery::max_restarts(job_info, self.max_restarts);
                self.table[j].max_restarts = restarts;
                self.table[j].recoverable =
                    recovery::recoverable(job_info, self.recovery) || restarts > 0;
                self.table[j].watcher = control::Watcher::of(parent, job_info);
                done.complete(Ok(nspace));
            }
            Err(failed) => {
                let who = self.who(parent);
                self.jobs
                    .say(&format!("spawn by {who} failed: {}", failed.message));
                if let Some(partial) = failed.partial {
                    let j = self.add_started_job(partial);
                    self.table[j].doomed = true;
                    let doomed: Vec<_> = alive(&self.table[j..=j]).collect();
                    for (proc, pid) in doomed {
                        self.jobs.signal(&proc, pid, Signal::SIGKILL);
                    }
                }
                done.complete(Err(failed.status));
            }
        }
    }

    fn handle(&mut self, ev: Event) {
        tracing::debug!(?ev, "event");
        match ev {
            Event::Connected(proc) => {
                if let Some((_, p)) = self.find(&proc) {
                    p.connected = true;
                    // Connected again after a finalize (init after finalize): its end counts
                    // as a failure again unless it finalizes again.
                    p.finalized = false;
                }
            }
            Event::Finalized(proc) => {
                if let Some((_, p)) = self.find(&proc) {
                    p.finalized = true;
                }
            }
            Event::Exited { proc, status } => self.exited(&proc, status),
            Event::ClientSettled(proc) => {
                if let Some(settling) = &mut self.settling {
                    settling.waiting.retain(|w| *w != proc);
                    if settling.waiting.is_empty() {
                        self.settle();
                    }
                }
            }
            Event::Abort {
                proc,
                status,
                message,
                procs,
                done,
            } => self.abort(&proc, status, &message, &procs, done),
            Event::Spawn {
                parent,
                job_info,
                apps,
                done,
            } => self.spawn(&parent, &job_info, &apps, done),
            Event::NodeLost {
                what,
                reason,
                procs,
            } => {
                // Its processes will never be reported: they are gone with it.
                for p in &procs {
                    if let Some((_, state)) = self.find(p) {
                        state.gone = true;
                    }
                }
                if self.stopping.is_none() {
                    self.settle();
                    self.fail(1, format!("lost {what}: {reason}"));
                }
            }
            Event::StdinClosed => {}
            // The ticket goes (and the budget with it) once the request is written.
            Event::Log {
                source,
                data,
                directives,
                done,
                ticket: _ticket,
            } => self.log(&source, &data, &directives, done),
            Event::JobControl {
                requester,
                targets,
                directives,
                done,
            } => self.job_control(&requester, &targets, &directives, done),
            Event::Query {
                asker,
                queries,
                done,
            } => self.query(&asker, &queries, done),
            Event::Signal(sig) => {
                self.settle();
                if self.stopping.is_some() {
                    // A second Ctrl-C, or one while the run is already going: no more grace.
                    self.jobs
                        .say(&format!("received {}; killing the job now", sig.as_str()));
                    self.kill_now();
                } else {
                    self.jobs.say(&format!(
                        "received {}; passing it on to the job",
                        sig.as_str()
                    ));
                    self.status
                        .get_or_insert(u8::try_from(128 + sig as i32).unwrap_or(255));
                    self.stop(sig);
                }
            }
        }
    }

    /// Lets go of every job whose processes all ended (and none of whose failures waits to be
    /// decided: it may be restarted).
    fn end_finished_jobs(&mut self) {
        for j in 0..self.table.len() {
            let job = &mut self.table[j];
            let deciding = self
                .settling
                .as_ref()
                .is_some_and(|s| s.waiting.iter().any(|w| w.nspace == job.nspace));
            if !job.ended && !deciding && job.procs.iter().all(|p| p.gone) {
                job.ended = true;
                self.announce_job_end(j);
                self.jobs.job_ended(&self.table[j].nspace);
            }
        }
    }

    /// The next instant at which something must happen without an event.
    fn deadline(&self) -> Option<Instant> {
        let term = self.terminating.iter().map(|(at, _, _)| *at).min();
        if let Some(s) = &self.settling {
            return Some(term.map_or(s.give_up_at, |t| t.min(s.give_up_at)));
        }
        let run = match self.stopping {
            Some(s) => s.kill_at.or(s.give_up_at),
            None => self.timeout.map(|(_, at)| at),
        };
        match (run, term) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn on_deadline(&mut self) -> bool {
        let now = Instant::now();
        if self.terminating.iter().any(|(at, _, _)| *at <= now) {
            self.kill_terminated(now);
            return true;
        }
        if self.settling.is_some() {
            tracing::warn!("processes that ended were never reported; deciding without them");
            self.settle();
            return true;
        }
        match self.stopping {
            Some(Stopping {
                kill_at: Some(_), ..
            }) => {
                self.kill_now();
                true
            }
            Some(Stopping { kill_at: None, .. }) => {
                let stuck: Vec<Pid> = alive(&self.table).map(|(_, pid)| pid).collect();
                self.jobs.say(&format!(
                    "processes {stuck:?} did not end after SIGKILL; leaving them behind"
                ));
                false
            }
            None => {
                let secs = self.timeout.map_or(0, |(t, _)| t.as_secs());
                self.fail(
                    TIMEOUT_STATUS,
                    format!("the job did not finish within --timeout {secs} s"),
                );
                true
            }
        }
    }

    /// Runs every job to its end and returns pmixrun's exit status.
    pub(crate) fn run(mut self, events: &Receiver<Event>) -> u8 {
        self.end_finished_jobs();
        while self.table.iter().any(|j| !j.ended) {
            let ev = match self.deadline() {
                Some(at) => events.recv_deadline(at),
                None => events.recv().map_err(|_| RecvTimeoutError::Disconnected),
            };
            match ev {
                Ok(ev) => {
                    self.handle(ev);
                    self.end_finished_jobs();
                }
                Err(RecvTimeoutError::Timeout) => {
                    if !self.on_deadline() {
                        break;
                    }
                    self.end_finished_jobs();
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        self.settle();
        // Namespaces of processes left behind go too: pmixrun is ending.
        for job in self.table.iter_mut().filter(|j| !j.ended) {
            job.ended = true;
            self.jobs.job_ended(&job.nspace);
        }
        // Events still queued (an abort or a spawn racing the run's end) are answered, not
        // dropped.
        while let Ok(ev) = events.try_recv() {
            crate::node::host::cancel(ev);
        }
        self.status.unwrap_or(0)
    }
}

#[cfg(test)]
mod tests;
