//! Job control, the process table and lifecycle events, as the supervisor decides
//! them.

use pmix_types::{ProcState as State, Rank, Value, attr};

use super::*;
use crate::supervise::control::{Action, action_of};

/// A request answered through a channel.
fn answered<T: pmix_server::Outcome>() -> (
    Completion<T>,
    crossbeam_channel::Receiver<Result<T, Status>>,
) {
    let (tx, rx) = crossbeam_channel::unbounded();
    let done = Completion::from_fn(move |r| {
        let _ = tx.send(r);
    });
    (done, rx)
}

fn control(
    targets: Vec<Proc>,
    directive: Info,
) -> (
    Event,
    crossbeam_channel::Receiver<Result<Vec<Info>, Status>>,
) {
    let (done, rx) = answered();
    let ev = Event::JobControl {
        requester: p("job", 0),
        targets,
        directives: vec![directive],
        done,
    };
    (ev, rx)
}

fn codes(fake: &Fake) -> Vec<Status> {
    fake.0.borrow().notified.iter().map(|(c, _)| *c).collect()
}

#[test]
fn a_rank_killed_on_request_is_no_failure_and_its_end_is_announced() {
    let fake = Fake::default();
    let (kill, answer) = control(vec![p("job", 1)], Info::attr(attr::JOB_CTRL_KILL, true));
    let status = run_with(
        &fake,
        2,
        vec![kill, signalled("job", 1, 9), exited("job", 0, 0)],
    );
    assert_eq!(status, 0, "{:?}", fake.0.borrow().said);
    assert_eq!(answer.try_recv(), Ok(Ok(vec![])));
    assert_eq!(fake.0.borrow().signals, [(101, Signal::SIGKILL)]);
    // The killed rank's end announced with 128 + 9, no abort by a signal; rank 0's normal
    // end not at all (nobody asked).
    assert_eq!(codes(&fake), [Status::EVENT_PROC_TERMINATED]);
    let first = &fake.0.borrow().notified[0].1;
    assert!(first.contains(&Info::attr(attr::EVENT_AFFECTED_PROC, p("job", 1))));
    assert!(first.contains(&Info::attr(attr::EXIT_CODE, 137)));
}

#[test]
fn signals_and_terminate_reach_the_whole_job_and_unknown_directives_are_refused() {
    let fake = Fake::default();
    let wild = Proc::new(ns("job"), Rank::WILDCARD);
    let (usr1, a1) = control(vec![wild.clone()], Info::attr(attr::JOB_CTRL_SIGNAL, 10i32));
    let (pause, a2) = control(vec![wild.clone()], Info::attr(attr::JOB_CTRL_PAUSE, true));
    let (nobody, a3) = control(vec![p("other", 0)], Info::attr(attr::JOB_CTRL_KILL, true));
    let (term, a4) = control(vec![wild], Info::attr(attr::JOB_CTRL_TERMINATE, true));
    let status = run_with(
        &fake,
        2,
        vec![
            usr1,
            pause,
            nobody,
            term,
            signalled("job", 0, 15),
            signalled("job", 1, 15),
        ],
    );
    assert_eq!(status, 0, "{:?}", fake.0.borrow().said);
    assert_eq!(a1.try_recv(), Ok(Ok(vec![])));
    assert_eq!(a2.try_recv(), Ok(Err(Status::ERR_NOT_SUPPORTED)));
    assert_eq!(a3.try_recv(), Ok(Err(Status::ERR_NOT_FOUND)));
    assert_eq!(a4.try_recv(), Ok(Ok(vec![])));
    assert_eq!(
        fake.0.borrow().signals,
        [
            (100, Signal::SIGUSR1),
            (101, Signal::SIGUSR1),
            // Terminate: SIGCONT first, so that a stopped process sees the SIGTERM.
            (100, Signal::SIGCONT),
            (100, Signal::SIGTERM),
            (101, Signal::SIGCONT),
            (101, Signal::SIGTERM)
        ]
    );
}

#[test]
fn an_unrequested_signal_is_announced_as_an_abort_and_fails_the_run() {
    let fake = Fake::default();
    let status = run_with(&fake, 1, vec![signalled("job", 0, 9)]);
    assert_eq!(status, 128 + 9);
    assert_eq!(
        codes(&fake),
        [
            Status::EVENT_PROC_TERMINATED,
            Status::ERR_PROC_ABORTED_BY_SIG
        ]
    );
}

#[test]
fn the_process_table_has_pids_programs_and_states() {
    let fake = Fake::default();
    let (done, answer) = answered();
    let q = Event::Query {
        asker: p("job", 0),
        queries: vec![pmix_server::Query {
            keys: vec![
                pmix_types::Key::new(attr::QUERY_PROC_TABLE).unwrap_or_else(|e| panic!("{e}")),
            ],
            qualifiers: vec![],
        }],
        done,
    };
    run_with(&fake, 2, vec![exited("job", 1, 0), q, exited("job", 0, 0)]);
    let infos = answer
        .try_recv()
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|s| panic!("{s:?}"));
    let Value::DataArray(table) = &infos[0].value else {
        panic!("{infos:?}");
    };
    let rows: Vec<(u32, u32, &str, State)> = table
        .items()
        .iter()
        .map(|v| match v {
            Value::ProcInfo(pi) => (
                pi.proc.rank.0,
                pi.pid,
                pi.executable_name.as_str(),
                pi.state,
            ),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        rows,
        [
            (0, 100, "/bin/prog0", State::RUNNING),
            (1, 101, "/bin/prog1", State::TERMINATED)
        ]
    );
}

#[test]
fn a_job_spawned_with_notify_completion_tells_its_parent_how_it_ended() {
    let fake = Fake::default();
    fake.0
        .borrow_mut()
        .outcomes
        .push_back(Ok(pids("job.1", 200, 1)));
    let (tx, _rx) = crossbeam_channel::unbounded();
    let spawn = Event::Spawn {
        parent: p("job", 0),
        job_info: vec![Info::attr(attr::NOTIFY_COMPLETION, true)],
        apps: vec![],
        done: Completion::from_fn(move |r| {
            let _ = tx.send(r);
        }),
    };
    run_with(
        &fake,
        1,
        vec![spawn, exited("job.1", 0, 0), exited("job", 0, 0)],
    );
    let log = fake.0.borrow();
    let (_, info) = log
        .notified
        .iter()
        .find(|(c, _)| *c == Status::EVENT_JOB_END)
        .unwrap_or_else(|| panic!("no job end in {:?}", log.notified));
    assert!(info.contains(&Info::attr(attr::JOB_TERM_STATUS, Status::SUCCESS)));
    let custom = info
        .iter()
        .find(|i| i.key.as_str() == attr::EVENT_CUSTOM_RANGE)
        .unwrap_or_else(|| panic!("{info:?}"));
    let Value::DataArray(to) = &custom.value else {
        panic!("{custom:?}");
    };
    assert_eq!(to.items(), [Value::Proc(p("job", 0))]);
    // The first job was spawned without it: one job end only.
    assert_eq!(
        log.notified
            .iter()
            .filter(|(c, _)| *c == Status::EVENT_JOB_END)
            .count(),
        1
    );
}

#[test]
fn normal_ends_reach_a_parent_that_asked_and_an_abort_is_announced() {
    let fake = Fake::default();
    fake.0
        .borrow_mut()
        .outcomes
        .push_back(Ok(pids("job.1", 200, 2)));
    let (tx, _rx) = crossbeam_channel::unbounded();
    let spawn = Event::Spawn {
        parent: p("job", 0),
        job_info: vec![Info::attr(attr::NOTIFY_PROC_TERMINATION, true)],
        apps: vec![],
        done: Completion::from_fn(move |r| {
            let _ = tx.send(r);
        }),
    };
    let abort = Event::Abort {
        proc: p("job", 0),
        status: Status(3),
        message: String::new(),
        procs: Vec::new(),
        done: Completion::from_fn(|_| {}),
    };
    let status = run_with(
        &fake,
        1,
        vec![
            spawn,
            exited("job.1", 0, 0),
            exited("job.1", 1, 0),
            abort,
            exited("job", 0, 3),
        ],
    );
    assert_eq!(status, 3);
    let log = fake.0.borrow();
    let to = |info: &[Info]| -> Vec<Value> {
        match &info
            .iter()
            .find(|i| i.key.as_str() == attr::EVENT_CUSTOM_RANGE)
            .unwrap_or_else(|| panic!("{info:?}"))
            .value
        {
            Value::DataArray(a) => a.items().to_vec(),
            other => panic!("{other:?}"),
        }
    };
    let (code, info) = &log.notified[0];
    assert_eq!(*code, Status::EVENT_PROC_TERMINATED);
    assert_eq!(to(info), [Value::Proc(p("job", 0))]);
    assert_eq!(log.notified[1].0, Status::EVENT_PROC_TERMINATED);
    let (code, info) = &log.notified[2];
    assert_eq!(*code, Status::ERR_PROC_ABORTED);
    assert_eq!(
        to(info),
        [Value::Proc(Proc::new(ns("job"), Rank::WILDCARD))]
    );
    // The aborting rank's own end comes while the run stops: not announced.
    assert_eq!(log.notified.len(), 3, "{:?}", log.notified);
}

#[test]
fn terminate_is_its_own_action_and_kill_is_sigkill() {
    let yes = |k: &'static str| Info::attr(k, true);
    assert_eq!(
        action_of(&[yes(attr::JOB_CTRL_TERMINATE)]),
        Ok(Action::Terminate)
    );
    assert_eq!(
        action_of(&[yes(attr::JOB_CTRL_KILL)]),
        Ok(Action::Send(Signal::SIGKILL))
    );
    // Two different things at once are refused, not one of them picked.
    assert_eq!(
        action_of(&[yes(attr::JOB_CTRL_TERMINATE), yes(attr::JOB_CTRL_KILL)]),
        Err(Status::ERR_BAD_PARAM)
    );
}

/// `QUERY_JOB_STATUS` of a job named by an `NSPACE` qualifier.
fn job_status_query() -> (
    Event,
    crossbeam_channel::Receiver<Result<Vec<Info>, Status>>,
) {
    let (done, rx) = answered();
    let ev = Event::Query {
        asker: p("tool", 0),
        queries: vec![pmix_server::Query {
            keys: vec![
                pmix_types::Key::new(attr::QUERY_JOB_STATUS).unwrap_or_else(|e| panic!("{e}")),
            ],
            qualifiers: vec![Info::attr(attr::NSPACE, "job")],
        }],
        done,
    };
    (ev, rx)
}

#[test]
fn the_job_status_is_success_until_a_process_ends_abnormally() {
    let fake = Fake::default();
    let (before, before_rx) = job_status_query();
    let (after, after_rx) = job_status_query();
    run_with(
        &fake,
        2,
        vec![before, exited("job", 1, 3), after, exited("job", 0, 0)],
    );
    let status = |rx: crossbeam_channel::Receiver<Result<Vec<Info>, Status>>| {
        let infos = rx
            .try_recv()
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|s| panic!("{s:?}"));
        assert_eq!(infos[0].key.as_str(), attr::QUERY_JOB_STATUS, "{infos:?}");
        match &infos[0].value {
            Value::Status(s) => *s,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(status(before_rx), Status::SUCCESS);
    assert_eq!(status(after_rx), Status::ERR_EXIT_NONZERO_TERM);
}

/// What a spawn may ask of a one-node run: the spawn attributes pmixrun honours and the
/// debugger's, as comma-separated keys (`QUERY_SPAWN_SUPPORT`, `QUERY_DEBUG_SUPPORT`).
#[test]
fn spawn_and_debug_support_are_answered_with_the_attributes_honoured() {
    let fake = Fake::default();
    let (done, rx) = answered();
    let key = |k: &str| pmix_types::Key::new(k).unwrap_or_else(|e| panic!("{e}"));
    let ev = Event::Query {
        asker: p("job", 0),
        queries: vec![pmix_server::Query {
            keys: vec![
                key(attr::QUERY_SPAWN_SUPPORT),
                key(attr::QUERY_DEBUG_SUPPORT),
            ],
            qualifiers: Vec::new(),
        }],
        done,
    };
    run_with(&fake, 1, vec![ev, exited("job", 0, 0)]);
    let infos = rx
        .try_recv()
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|s| panic!("{s:?}"));
    let answer = |k: &str| -> Vec<String> {
        let v = infos
            .iter()
            .find(|i| i.key.as_str() == k)
            .and_then(|i| i.value.as_str())
            .unwrap_or_else(|| panic!("no {k} in {infos:?}"));
        v.split(',').map(str::to_owned).collect()
    };
    let spawn = answer(attr::QUERY_SPAWN_SUPPORT);
    for k in [attr::WDIR, attr::SET_ENVAR, attr::DEBUG_STOP_IN_INIT] {
        assert!(spawn.iter().any(|s| s == k), "{k} not in {spawn:?}");
    }
    assert_eq!(
        answer(attr::QUERY_DEBUG_SUPPORT),
        [
            attr::DEBUG_STOP_IN_INIT,
            attr::DEBUG_TARGET,
            attr::DEBUG_DAEMONS_PER_NODE,
            attr::DEBUGGER_DAEMONS,
            attr::DEBUG_JOB
        ]
    );
}
