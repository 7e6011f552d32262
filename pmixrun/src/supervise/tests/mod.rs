//! The supervisor's decisions, played against a world without processes ([`Fake`]): failures
//! and who is blamed, aborts, spawns, signals; job control and logging in their own files.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use super::*;

#[test]
fn abort_statuses_that_are_no_exit_status_become_one() {
    assert_eq!(exit_code_of_abort(5), 5);
    assert_eq!(exit_code_of_abort(255), 255);
    assert_eq!(exit_code_of_abort(0), 1);
    assert_eq!(exit_code_of_abort(256), 1);
    assert_eq!(exit_code_of_abort(-25), 1);
}

/// What the supervisor did, as [`Fake`] saw it.
#[derive(Debug, Default)]
struct Log {
    /// The answers `spawn` gives, in order; a spawn beyond them is refused.
    outcomes: VecDeque<Result<Started, SpawnFailed>>,
    spawned_by: Vec<Proc>,
    /// The processes that ended, for `has_ended`, whether or not their ends were reported.
    ended: Vec<i32>,
    signals: Vec<(i32, Signal)>,
    procs_ended: Vec<Proc>,
    jobs_ended: Vec<String>,
    said: Vec<String>,
    logged: Vec<String>,
    /// Lines sent to syslog, with their severity.
    syslogged: Vec<(u8, String)>,
    /// Whether the syslog daemon takes them.
    syslog_up: bool,
    notified: Vec<(Status, Vec<Info>)>,
    /// Whether `hear_out` can be asked, and whom it was asked for.
    hears_out: bool,
    heard_out: Vec<Proc>,
    /// The answers `restart` gives, in order; a restart beyond them fails.
    restart_outcomes: VecDeque<Result<Launched, String>>,
    /// The processes restarted, with their count of restarts.
    restarted: Vec<(Proc, u32)>,
}

/// A world without processes: pids are numbers nobody signals.
#[derive(Clone, Default)]
struct Fake(Rc<RefCell<Log>>);

impl Jobs for Fake {
    fn spawn(
        &mut self,
        parent: &Proc,
        _job_info: &[Info],
        _apps: &[App],
    ) -> Result<Started, SpawnFailed> {
        let mut log = self.0.borrow_mut();
        log.spawned_by.push(parent.clone());
        log.outcomes.pop_front().unwrap_or_else(|| {
            Err(SpawnFailed {
                status: Status::ERR_NOT_SUPPORTED,
                message: "not in this test".into(),
                partial: None,
            })
        })
    }
    fn restart(&mut self, proc: &Proc, reincarnation: u32) -> Result<Launched, String> {
        let mut log = self.0.borrow_mut();
        log.restarted.push((proc.clone(), reincarnation));
        log.restart_outcomes
            .pop_front()
            .unwrap_or_else(|| Err("not in this test".into()))
    }
    fn signal(&mut self, _proc: &Proc, pid: Pid, sig: Signal) {
        self.0.borrow_mut().signals.push((pid.as_raw(), sig));
    }
    fn has_ended(&mut self, _proc: &Proc, pid: Pid) -> bool {
        self.0.borrow().ended.contains(&pid.as_raw())
    }
    fn proc_ended(&mut self, proc: &Proc) {
        self.0.borrow_mut().procs_ended.push(proc.clone());
    }
    fn job_ended(&mut self, nspace: &Nspace) {
        self.0.borrow_mut().jobs_ended.push(nspace.to_string());
    }
    fn say(&mut self, line: &str) {
        self.0.borrow_mut().said.push(line.to_owned());
    }
    fn write_log(&mut self, _stdout: bool, line: &str) {
        self.0.borrow_mut().logged.push(line.to_owned());
    }
    fn syslog(&mut self, severity: u8, line: &str) -> bool {
        let mut me = self.0.borrow_mut();
        me.syslogged.push((severity, line.to_owned()));
        me.syslog_up
    }
    fn notify(&mut self, code: Status, info: &[Info]) {
        self.0.borrow_mut().notified.push((code, info.to_vec()));
    }
    fn node_of(&self, _proc: &Proc) -> Option<String> {
        None
    }
    fn host_of(&self, _proc: &Proc) -> String {
        "here".into()
    }
    fn hear_out(&mut self, proc: &Proc) -> bool {
        let mut log = self.0.borrow_mut();
        log.heard_out.push(proc.clone());
        log.hears_out
    }
}

fn ns(s: &str) -> Nspace {
    Nspace::new(s).unwrap_or_else(|e| panic!("{e}"))
}

fn p(nspace: &str, rank: u32) -> Proc {
    Proc::new(ns(nspace), rank)
}

fn exit(code: i32) -> std::io::Result<ExitStatus> {
    Ok(ExitStatus::from_raw(code << 8))
}

fn exited(nspace: &str, rank: u32, code: i32) -> Event {
    Event::Exited {
        proc: p(nspace, rank),
        status: exit(code),
    }
}

/// `rank` of `nspace` killed by signal `sig`.
fn signalled(nspace: &str, rank: u32, sig: i32) -> Event {
    Event::Exited {
        proc: p(nspace, rank),
        status: Ok(ExitStatus::from_raw(sig)),
    }
}

/// `rank` started as `pid`, running `/bin/prog<rank>`.
fn launched(rank: u32, pid: i32) -> Launched {
    Launched {
        rank,
        pid: Pid::from_raw(pid),
        exe: format!("/bin/prog{rank}"),
    }
}

fn pids(ns: &str, first: i32, n: i32) -> Started {
    Started {
        nspace: self::ns(ns),
        size: n as u32,
        procs: (0u32..)
            .zip(first..first + n)
            .map(|(rank, pid)| launched(rank, pid))
            .collect(),
    }
}

/// Every rank connected; `ends` after.
fn connected_then(size: u32, ends: Vec<Event>) -> Vec<Event> {
    let mut events: Vec<Event> = (0..size).map(|r| Event::Connected(p("job", r))).collect();
    events.extend(ends);
    events
}

/// A rank that finalized and exited 0.
fn finished(rank: u32) -> [Event; 2] {
    [Event::Finalized(p("job", rank)), exited("job", rank, 0)]
}

/// A spawn request of `parent`, and where its answer will arrive.
fn spawn_by(parent: Proc) -> (Event, crossbeam_channel::Receiver<Result<Nspace, Status>>) {
    let (tx, rx) = crossbeam_channel::unbounded();
    let ev = Event::Spawn {
        parent,
        job_info: vec![],
        apps: vec![],
        done: Completion::from_fn(move |r| {
            let _ = tx.send(r);
        }),
    };
    (ev, rx)
}

/// An abort by `proc` of itself with status 7 and message "bye", and where its answer will
/// arrive.
fn abort_by(proc: Proc) -> (Event, crossbeam_channel::Receiver<Result<(), Status>>) {
    abort_of(proc, Vec::new())
}

/// [`abort_by`], of `procs`.
fn abort_of(
    proc: Proc,
    procs: Vec<Proc>,
) -> (Event, crossbeam_channel::Receiver<Result<(), Status>>) {
    let (tx, rx) = crossbeam_channel::unbounded();
    let ev = Event::Abort {
        proc,
        status: Status(7),
        message: "bye".into(),
        procs,
        done: Completion::from_fn(move |r| {
            let _ = tx.send(r);
        }),
    };
    (ev, rx)
}

/// Runs a first job "job" of `size` processes with pids 100, 101, ... through `events`
/// (the channel then closes, so a run still waiting for something returns).
fn run_with(fake: &Fake, size: u32, events: Vec<Event>) -> u8 {
    run_recovering(fake, size, events, false)
}

/// [`run_with`], every job recoverable if `recovery` (`--enable-recovery`).
fn run_recovering(fake: &Fake, size: u32, events: Vec<Event>, recovery: bool) -> u8 {
    run_set(fake, size, events, |sup| sup.set_recovery(recovery))
}

/// [`run_with`], the supervisor first set up by `set`.
fn run_set(
    fake: &Fake,
    size: u32,
    events: Vec<Event>,
    set: impl FnOnce(&mut Supervisor<Fake>),
) -> u8 {
    let (tx, rx) = crossbeam_channel::unbounded();
    for e in events {
        let _ = tx.send(e);
    }
    drop(tx);
    let mut sup = Supervisor::new(fake.clone(), None);
    set(&mut sup);
    let job = sup.add_job(ns("job"), size);
    for rank in 0..size {
        sup.started(job, launched(rank, 100 + rank as i32));
    }
    sup.run(&rx)
}

fn run(size: u32, events: Vec<Event>) -> u8 {
    run_with(&Fake::default(), size, events)
}

#[test]
fn the_first_failure_decides_the_status() {
    use Event::*;
    let ok = |rank| exited("job", rank, 0);
    assert_eq!(run(2, vec![ok(0), ok(1)]), 0);
    assert_eq!(
        run(
            2,
            vec![Connected(p("job", 1)), Finalized(p("job", 1)), ok(1), ok(0)]
        ),
        0,
        "a process that never used PMIx may end with 0"
    );
    assert_eq!(run(2, vec![Connected(p("job", 1)), ok(1), ok(0)]), 1);
    let failed = |rank, c| exited("job", rank, c);
    assert_eq!(run(3, vec![failed(2, 3), failed(0, 4), ok(1)]), 3);
    let killed = Exited {
        proc: p("job", 0),
        status: Ok(ExitStatus::from_raw(9)),
    };
    assert_eq!(run(1, vec![killed]), 137);
    assert_eq!(run(1, vec![Signal(nix::sys::signal::SIGINT), ok(0)]), 130);
}

/// Rank 0 is killed while rank 1 fences with it; rank 1's fence fails and it exits with
/// status 1. Its waiter reports first, but rank 0 had already ended then: rank 0 is
/// blamed, with its status.
#[test]
fn a_killed_rank_is_blamed_even_when_the_rank_it_failed_reports_first() {
    use Event::*;
    let fake = Fake::default();
    fake.0.borrow_mut().ended = vec![100, 101];
    let mut events: Vec<Event> = (0..3).map(|r| Connected(p("job", r))).collect();
    events.extend([
        exited("job", 1, 1),
        signalled("job", 0, 9),
        exited("job", 2, 143),
    ]);
    assert_eq!(run_with(&fake, 3, events), 137);
    let log = fake.0.borrow();
    let blamed = "rank 0 was killed by SIGKILL without calling finalize; killing the job";
    assert_eq!(log.said, [blamed]);
    let left = [(102, nix::sys::signal::SIGTERM)];
    assert_eq!(log.signals, left, "only rank 2 is left");

    // Ended on its own, with nobody else ended: blamed at once, as before.
    let fake = Fake::default();
    fake.0.borrow_mut().ended = vec![101];
    let events = vec![exited("job", 1, 1), exited("job", 0, 143)];
    assert_eq!(run_with(&fake, 2, events), 1);
    assert_eq!(
        fake.0.borrow().said,
        ["rank 1 exited with status 1; killing the job"]
    );
}

#[test]
fn the_run_ends_when_every_job_has_ended() {
    let fake = Fake::default();
    fake.0
        .borrow_mut()
        .outcomes
        .push_back(Ok(pids("job.1", 200, 2)));
    let (spawn, answer) = spawn_by(p("job", 0));
    // The parent leaves at once; its children go on, and the run waits for them.
    let events = vec![
        spawn,
        exited("job", 0, 0),
        exited("job.1", 1, 0),
        exited("job.1", 0, 0),
    ];
    assert_eq!(run_with(&fake, 1, events), 0);
    assert_eq!(answer.try_recv(), Ok(Ok(ns("job.1"))));
    let log = fake.0.borrow();
    assert_eq!(log.spawned_by, [p("job", 0)]);
    assert_eq!(
        log.jobs_ended,
        ["job", "job.1"],
        "each job ends with its last process"
    );
    // Handled, not drained: the run did not end with the first job.
    assert_eq!(log.procs_ended, [p("job", 0), p("job.1", 1), p("job.1", 0)]);
    assert!(log.signals.is_empty() && log.said.is_empty(), "{log:?}");
}

#[test]
fn a_spawned_process_failing_fails_the_run_and_stops_every_job() {
    use Event::*;
    let fake = Fake::default();
    fake.0
        .borrow_mut()
        .outcomes
        .push_back(Ok(pids("job.1", 200, 2)));
    let (spawn, _answer) = spawn_by(p("job", 0));
    let events = vec![
        spawn,
        Connected(p("job.1", 1)),
        exited("job.1", 1, 3),
        Exited {
            proc: p("job", 0),
            status: Ok(ExitStatus::from_raw(15)),
        },
        exited("job.1", 0, 0),
    ];
    assert_eq!(run_with(&fake, 1, events), 3);
    let log = fake.0.borrow();
    assert_eq!(
        log.said,
        ["rank 1 of job.1 exited with status 3 without calling finalize; killing the job"]
    );
    assert_eq!(
        log.signals,
        [
            (100, nix::sys::signal::SIGTERM),
            (200, nix::sys::signal::SIGTERM)
        ],
        "the first job's process and the other child"
    );
    assert_eq!(log.jobs_ended, ["job", "job.1"]);
}

/// A process writes its abort and exits: its end can be seen before the server read the
/// abort. The end waits until the server read what the process sent.
#[test]
fn an_abort_read_after_its_processs_end_says_why_the_run_failed() {
    use Event::*;
    let abort = |rank| abort_by(p("job", rank)).0;
    let fake = Fake::default();
    fake.0.borrow_mut().hears_out = true;
    let events = vec![
        Connected(p("job", 1)),
        exited("job", 1, 1),
        abort(1),
        ClientSettled(p("job", 1)),
        exited("job", 0, 143),
    ];
    assert_eq!(run_with(&fake, 2, events), 7);
    let log = fake.0.borrow();
    assert_eq!(log.heard_out, [p("job", 1)]);
    assert_eq!(
        log.said,
        ["rank 1 called abort with status 7: bye; killing the job"]
    );
    // Nothing more to hear: the end stands.
    let fake = Fake::default();
    fake.0.borrow_mut().hears_out = true;
    let events = vec![
        Connected(p("job", 1)),
        exited("job", 1, 3),
        ClientSettled(p("job", 1)),
        exited("job", 0, 143),
    ];
    assert_eq!(run_with(&fake, 2, events), 3);
    assert_eq!(
        fake.0.borrow().said,
        ["rank 1 exited with status 3 without calling finalize; killing the job"]
    );
}

#[test]
fn an_abort_in_a_tools_name_fails_the_run_naming_the_tool() {
    let fake = Fake::default();
    let abort = Event::Abort {
        proc: p("srv-tool-1", 0),
        status: Status::ERR_LOST_CONNECTION,
        message: "the debugger went away".into(),
        procs: vec![p("job", 0), p("job", 1)],
        done: Completion::from_fn(|_| {}),
    };
    let events = vec![abort, exited("job", 0, 143), exited("job", 1, 143)];
    assert_eq!(run_with(&fake, 2, events), 1);
    assert_eq!(
        fake.0.borrow().said,
        ["tool srv-tool-1:0: the debugger went away; killing the job"]
    );
}

#[test]
fn abort_in_a_spawned_job_ends_the_run_with_its_status() {
    let fake = Fake::default();
    fake.0
        .borrow_mut()
        .outcomes
        .push_back(Ok(pids("job.1", 200, 1)));
    let (spawn, _answer) = spawn_by(p("job", 0));
    let (abort, answered) = abort_by(p("job.1", 0));
    let events = vec![spawn, abort, exited("job.1", 0, 7), exited("job", 0, 143)];
    assert_eq!(run_with(&fake, 1, events), 7);
    assert_eq!(answered.try_recv(), Ok(Ok(())));
    assert_eq!(
        fake.0.borrow().said,
        ["rank 0 of job.1 called abort with status 7: bye; killing the job"]
    );
}

#[test]
fn a_failed_spawn_answers_the_parent_and_the_run_goes_on() {
    let fake = Fake::default();
    fake.0.borrow_mut().outcomes.push_back(Err(SpawnFailed {
        status: Status::ERR_JOB_EXE_NOT_FOUND,
        message: "cannot start nope: No such file or directory".into(),
        partial: None,
    }));
    let (spawn, answer) = spawn_by(p("job", 0));
    assert_eq!(run_with(&fake, 1, vec![spawn, exited("job", 0, 0)]), 0);
    assert_eq!(answer.try_recv(), Ok(Err(Status::ERR_JOB_EXE_NOT_FOUND)));
    let log = fake.0.borrow();
    assert_eq!(
        log.said,
        ["spawn by rank 0 failed: cannot start nope: No such file or directory"]
    );
    assert_eq!(log.jobs_ended, ["job"]);
    assert!(log.signals.is_empty());
}

#[test]
fn what_a_spawn_started_before_failing_is_killed_and_let_go() {
    let fake = Fake::default();
    fake.0.borrow_mut().outcomes.push_back(Err(SpawnFailed {
        status: Status::ERR_JOB_FAILED_TO_LAUNCH,
        message: "cannot start a thread".into(),
        partial: Some(pids("job.1", 200, 2)),
    }));
    let (spawn, answer) = spawn_by(p("job", 0));
    let killed = |rank| Event::Exited {
        proc: p("job.1", rank),
        status: Ok(ExitStatus::from_raw(9)),
    };
    let events = vec![
        spawn,
        Event::Connected(p("job.1", 0)),
        killed(0),
        killed(1),
        exited("job", 0, 0),
    ];
    assert_eq!(run_with(&fake, 1, events), 0, "the parent's job is fine");
    assert_eq!(answer.try_recv(), Ok(Err(Status::ERR_JOB_FAILED_TO_LAUNCH)));
    let log = fake.0.borrow();
    assert_eq!(
        log.signals,
        [(200, Signal::SIGKILL), (201, Signal::SIGKILL)]
    );
    assert_eq!(log.jobs_ended, ["job.1", "job"]);
    assert_eq!(log.said.len(), 1, "{log:?}");

    // Registered but nothing started: the namespace goes at once.
    let fake = Fake::default();
    fake.0.borrow_mut().outcomes.push_back(Err(SpawnFailed {
        status: Status::ERR_JOB_FAILED_TO_LAUNCH,
        message: "cannot register".into(),
        partial: Some(pids("job.1", 200, 0)),
    }));
    let (spawn, _answer) = spawn_by(p("job", 0));
    run_with(&fake, 1, vec![spawn, exited("job", 0, 0)]);
    assert_eq!(fake.0.borrow().jobs_ended, ["job.1", "job"]);
}

#[test]
fn no_spawn_once_the_run_is_stopping_or_over() {
    let fake = Fake::default();
    let (spawn, answer) = spawn_by(p("job", 0));
    let (late, late_answer) = spawn_by(p("job", 1));
    let events = vec![exited("job", 1, 2), spawn, exited("job", 0, 143), late];
    assert_eq!(run_with(&fake, 2, events), 2);
    assert_eq!(answer.try_recv(), Ok(Err(Status::ERR_JOB_CANCELED)));
    assert_eq!(late_answer.try_recv(), Ok(Err(Status::ERR_JOB_CANCELED)));
    assert!(fake.0.borrow().spawned_by.is_empty());
}

#[test]
fn a_first_job_that_cannot_start_ends_without_waiting() {
    let fake = Fake::default();
    let (tx, rx) = crossbeam_channel::unbounded::<Event>();
    let mut sup = Supervisor::new(fake.clone(), None);
    let job = sup.add_job(ns("job"), 3);
    sup.not_started(job, 127, "cannot start nope: No such file or directory");
    // The channel stays open: only the supervisor's own bookkeeping can end the run.
    assert_eq!(sup.run(&rx), 127);
    drop(tx);
    assert_eq!(fake.0.borrow().jobs_ended, ["job"]);
}

mod abort;
mod control;
mod log;
mod recovery;

/// Each job spawning the next one, as OpenPMIx's `resolve` does when it cannot tell it is a
/// child: the run refuses the generation past `--max-spawn-depth`, says so, and goes on.
#[test]
fn spawns_stop_at_the_deepest_generation_allowed() {
    let fake = Fake::default();
    for g in 1..=3 {
        fake.0
            .borrow_mut()
            .outcomes
            .push_back(Ok(pids(&format!("job.{g}"), 200 + 10 * g, 1)));
    }
    let (tx, rx) = crossbeam_channel::unbounded();
    let mut answers = Vec::new();
    for parent in ["job", "job.1", "job.2"] {
        let (spawn, answer) = spawn_by(p(parent, 0));
        tx.send(spawn).expect("queued");
        answers.push(answer);
    }
    for ns in ["job", "job.1", "job.2"] {
        tx.send(exited(ns, 0, 0)).expect("queued");
    }
    drop(tx);
    let mut sup = Supervisor::new(fake.clone(), None);
    sup.set_max_spawn_depth(2);
    let job = sup.add_job(ns("job"), 1);
    sup.started(job, launched(0, 100));
    assert_eq!(sup.run(&rx), 0, "a refused spawn is the parent's to handle");
    let got: Vec<_> = answers.iter().map(|a| a.try_recv()).collect();
    assert_eq!(
        got,
        [
            Ok(Ok(ns("job.1"))),
            Ok(Ok(ns("job.2"))),
            Ok(Err(Status::ERR_OUT_OF_RESOURCE))
        ]
    );
    let log = fake.0.borrow();
    assert_eq!(
        log.spawned_by,
        [p("job", 0), p("job.1", 0)],
        "the third never started"
    );
    assert!(
        log.said
            .iter()
            .any(|l| l.contains("generation 3") && l.contains("--max-spawn-depth")),
        "{:?}",
        log.said
    );
}
