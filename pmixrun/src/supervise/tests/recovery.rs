//! Recoverable jobs: a failed process is told and counted, the others go on.

use nix::sys::signal::Signal::{SIGCONT, SIGTERM};
use pmix_types::{Rank, Value, attr};

use super::*;
use crate::supervise::recovery::{max_restarts, recoverable};

#[test]
fn a_failed_rank_of_a_recoverable_job_leaves_the_others_running() {
    let mut ends = vec![exited("job", 1, 3)];
    ends.extend(finished(0));
    ends.extend(finished(2));
    let fake = Fake::default();
    assert_eq!(run_recovering(&fake, 3, connected_then(3, ends), true), 3);
    let log = fake.0.borrow();
    assert_eq!(
        log.said,
        [
            "rank 1 exited with status 3 without calling finalize; the others go on (recovery enabled)"
        ]
    );
    assert!(log.signals.is_empty(), "{:?}", log.signals);
    assert_eq!(log.jobs_ended, ["job"]);
    // The others heard of it: which rank, with what exit code, sent to the whole job.
    let (code, info) = &log.notified[0];
    assert_eq!(*code, Status::EVENT_PROC_TERMINATED);
    let value = |k: &str| info.iter().find(|i| i.key.as_str() == k).map(|i| &i.value);
    assert_eq!(
        value(attr::EVENT_AFFECTED_PROC),
        Some(&Value::Proc(p("job", 1)))
    );
    assert_eq!(value(attr::EXIT_CODE).and_then(Value::as_i64), Some(3));
    let range = format!("{:?}", value(attr::EVENT_CUSTOM_RANGE));
    assert!(range.contains(&format!("{:?}", Rank::WILDCARD)), "{range}");
    // Only to handlers registered for the code: a catch-all one (Open MPI's) would end them.
    assert_eq!(value(attr::EVENT_NON_DEFAULT), Some(&Value::Bool(true)));
    // And what PRRTE sends for it instead, with the same information.
    let codes: Vec<Status> = log.notified.iter().map(|(c, _)| *c).collect();
    assert_eq!(
        codes,
        [Status::EVENT_PROC_TERMINATED, Status::ERR_EXIT_NONZERO_TERM]
    );
    assert_eq!(log.notified[1].1, *info);

    // Without recovery the same end stops the others.
    let mut ends = vec![exited("job", 1, 3)];
    ends.extend([exited("job", 0, 143), exited("job", 2, 143)]);
    let fake = Fake::default();
    assert_eq!(run_recovering(&fake, 3, connected_then(3, ends), false), 3);
    let log = fake.0.borrow();
    assert_eq!(log.signals, [(100, SIGTERM), (102, SIGTERM)]);
    let (code, info) = &log.notified[0];
    assert_eq!(*code, Status::EVENT_PROC_TERMINATED);
    assert_eq!(log.notified.len(), 1, "{:?}", log.notified);
    assert!(
        !info
            .iter()
            .any(|i| i.key.as_str() == attr::EVENT_NON_DEFAULT),
        "{info:?}"
    );
}

#[test]
fn every_failure_is_told_and_the_first_decides_the_status() {
    let ends = vec![
        exited("job", 2, 5),
        signalled("job", 0, 9),
        exited("job", 1, 0),
    ];
    let fake = Fake::default();
    assert_eq!(run_recovering(&fake, 3, ends, true), 5);
    let log = fake.0.borrow();
    assert_eq!(
        log.said,
        [
            "rank 2 exited with status 5; the others go on (recovery enabled)",
            "rank 0 was killed by SIGKILL; the others go on (recovery enabled)",
        ]
    );
    assert!(log.signals.is_empty(), "{:?}", log.signals);
    // A signal pmixrun passes on afterwards stops the run but keeps the first status.
    let ends = vec![
        exited("job", 1, 4),
        Event::Signal(nix::sys::signal::SIGINT),
        exited("job", 0, 130),
    ];
    assert_eq!(run_recovering(&Fake::default(), 2, ends, true), 4);
}

#[test]
fn an_abort_in_a_recoverable_job_ends_only_its_caller() {
    let (abort, answered) = abort_by(p("job", 1));
    let mut ends = vec![abort, signalled("job", 1, 15)];
    ends.extend(finished(0));
    let fake = Fake::default();
    assert_eq!(run_recovering(&fake, 2, connected_then(2, ends), true), 7);
    assert_eq!(answered.try_recv(), Ok(Ok(())));
    let log = fake.0.borrow();
    assert_eq!(
        log.said,
        ["rank 1 called abort with status 7: bye; the others go on (recovery enabled)"]
    );
    assert_eq!(log.signals, [(101, SIGCONT), (101, SIGTERM)]);
    let codes: Vec<Status> = log.notified.iter().map(|(c, _)| *c).collect();
    assert_eq!(
        codes,
        [Status::ERR_PROC_ABORTED, Status::EVENT_PROC_TERMINATED],
        "its end by the SIGTERM it was sent is no abort by a signal"
    );
}

#[test]
fn a_spawn_says_whether_its_job_is_recoverable() {
    let flag = |k: &'static str, v: bool| vec![Info::attr(k, v)];
    assert!(!recoverable(&[], false));
    assert!(recoverable(&[], true));
    assert!(recoverable(&flag(attr::JOB_RECOVERABLE, true), false));
    assert!(recoverable(&flag(attr::JOB_CONTINUOUS, true), false));
    assert!(!recoverable(&flag(attr::JOB_RECOVERABLE, false), true));

    // A recoverable child in a run without recovery: its failure leaves the run going; its
    // parent's failure then stops it, with the child's status, the first.
    let fake = Fake::default();
    fake.0
        .borrow_mut()
        .outcomes
        .push_back(Ok(pids("job.1", 200, 2)));
    let spawn = Event::Spawn {
        parent: p("job", 0),
        job_info: flag(attr::JOB_RECOVERABLE, true),
        apps: vec![],
        done: Completion::from_fn(|_| {}),
    };
    let events = vec![
        spawn,
        exited("job.1", 0, 6),
        exited("job", 0, 2),
        exited("job.1", 1, 143),
    ];
    assert_eq!(run_recovering(&fake, 1, events, false), 6);
    let log = fake.0.borrow();
    assert_eq!(
        log.said,
        [
            "rank 0 of job.1 exited with status 6; the others go on (recovery enabled)",
            "rank 0 exited with status 2; killing the job",
        ]
    );
    assert_eq!(log.signals, [(201, SIGTERM)]);
}

#[test]
fn a_failed_process_is_restarted_at_most_the_times_allowed() {
    let fake = Fake::default();
    fake.0
        .borrow_mut()
        .restart_outcomes
        .push_back(Ok(launched(1, 201)));
    // Rank 1 fails, is restarted as pid 201, fails again: no restart left.
    let ends = vec![
        exited("job", 1, 3),
        signalled("job", 1, 9),
        exited("job", 0, 0),
    ];
    assert_eq!(run_set(&fake, 2, ends, |s| s.set_max_restarts(1)), 137);
    let log = fake.0.borrow();
    assert_eq!(log.restarted, [(p("job", 1), 1)]);
    assert_eq!(
        log.said,
        [
            "rank 1 exited with status 3; restarting it (1 of 1)",
            "rank 1 was killed by SIGKILL; the others go on (recovery enabled)",
        ]
    );
    assert!(log.signals.is_empty(), "{:?}", log.signals);
    assert_eq!(log.jobs_ended, ["job"]);
}

#[test]
fn a_restarted_process_that_then_succeeds_leaves_the_run_successful() {
    let fake = Fake::default();
    for pid in [200, 201] {
        fake.0
            .borrow_mut()
            .restart_outcomes
            .push_back(Ok(launched(0, pid)));
    }
    // Its only process: the job is not let go between its three lives, each restart counted.
    let ends = vec![
        exited("job", 0, 3),
        exited("job", 0, 3),
        exited("job", 0, 0),
    ];
    assert_eq!(run_set(&fake, 1, ends, |s| s.set_max_restarts(2)), 0);
    let log = fake.0.borrow();
    assert_eq!(
        log.said,
        [
            "rank 0 exited with status 3; restarting it (1 of 2)",
            "rank 0 exited with status 3; restarting it (2 of 2)",
        ]
    );
    assert_eq!(log.restarted, [(p("job", 0), 1), (p("job", 0), 2)]);
    assert_eq!(log.jobs_ended, ["job"]);

    // A restart that fails leaves the failure standing.
    let fake = Fake::default();
    let ends = vec![exited("job", 1, 3), exited("job", 0, 0)];
    assert_eq!(run_set(&fake, 2, ends, |s| s.set_max_restarts(2)), 3);
    assert_eq!(
        fake.0.borrow().said,
        [
            "cannot restart rank 1: not in this test",
            "rank 1 exited with status 3; the others go on (recovery enabled)",
        ]
    );
}

#[test]
fn an_abort_is_not_restarted_and_a_spawn_may_ask_for_restarts() {
    let (abort, _answered) = abort_by(p("job", 1));
    let mut ends = vec![abort, signalled("job", 1, 15)];
    ends.extend(finished(0));
    let fake = Fake::default();
    let events = connected_then(2, ends);
    assert_eq!(run_set(&fake, 2, events, |s| s.set_max_restarts(3)), 7);
    assert!(fake.0.borrow().restarted.is_empty());

    let n = |v: u32| vec![Info::attr(attr::MAX_RESTARTS, v)];
    assert_eq!(max_restarts(&[], 4), 4);
    assert_eq!(max_restarts(&n(2), 0), 2);
    assert_eq!(max_restarts(&n(0), 4), 0);
}
