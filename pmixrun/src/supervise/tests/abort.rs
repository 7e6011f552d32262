//! Aborts that name processes (`abort.rs`): who is ended, who is told, what the run does.

use nix::sys::signal::Signal::{SIGCONT, SIGTERM};
use pmix_types::{Rank, Value};

use super::*;

/// Who heard `ERR_PROC_ABORTED` of whom, in order.
fn aborted_told(log: &Log) -> Vec<Value> {
    log.notified
        .iter()
        .filter(|(c, _)| *c == Status::ERR_PROC_ABORTED)
        .filter_map(|(_, info)| {
            info.iter()
                .find(|i| i.key.as_str() == pmix_types::attr::EVENT_AFFECTED_PROC)
                .map(|i| i.value.clone())
        })
        .collect()
}

#[test]
fn an_abort_of_others_in_a_recoverable_job_ends_them_and_not_its_caller() {
    let (abort, answered) = abort_of(p("job", 0), vec![p("job", 2), p("job", 3), p("job", 2)]);
    let mut ends = vec![abort, signalled("job", 2, 15), signalled("job", 3, 15)];
    ends.extend(finished(0));
    ends.extend(finished(1));
    let fake = Fake::default();
    assert_eq!(run_recovering(&fake, 4, connected_then(4, ends), true), 7);
    assert_eq!(answered.try_recv(), Ok(Ok(())));
    let log = fake.0.borrow();
    assert_eq!(
        log.said,
        [
            "rank 0 called abort of rank 2, rank 3 with status 7: bye; the others go on (recovery enabled)"
        ]
    );
    assert_eq!(
        log.signals,
        [
            (102, SIGCONT),
            (102, SIGTERM),
            (103, SIGCONT),
            (103, SIGTERM)
        ]
    );
    assert_eq!(
        aborted_told(&log),
        [Value::Proc(p("job", 2)), Value::Proc(p("job", 3))]
    );
}

#[test]
fn an_abort_of_a_whole_namespace_ends_every_process_of_it_and_nobody_goes_on() {
    let (abort, answered) = abort_of(p("job", 1), vec![Proc::new(ns("job"), Rank::WILDCARD)]);
    let ends = vec![
        abort,
        signalled("job", 0, 15),
        signalled("job", 1, 15),
        signalled("job", 2, 15),
    ];
    let fake = Fake::default();
    assert_eq!(run_recovering(&fake, 3, connected_then(3, ends), true), 7);
    assert_eq!(answered.try_recv(), Ok(Ok(())));
    let log = fake.0.borrow();
    assert_eq!(
        log.said,
        ["rank 1 called abort of rank 0, rank 1, rank 2 with status 7: bye"]
    );
    let terms: Vec<_> = log.signals.iter().filter(|(_, s)| *s == SIGTERM).collect();
    assert_eq!(terms, [&(100, SIGTERM), &(101, SIGTERM), &(102, SIGTERM)]);
    // Once for the namespace, not once per process to every process of it (N² events).
    assert_eq!(
        aborted_told(&log),
        [Value::Proc(Proc::new(ns("job"), Rank::WILDCARD))]
    );
}

#[test]
fn an_abort_naming_a_process_not_of_the_run_is_refused_and_ends_nobody() {
    for procs in [
        vec![p("job", 1), p("other", 0)],
        vec![p("job", 3)],
        vec![Proc::new(ns("job"), Rank::LOCAL_PEERS)],
    ] {
        let (abort, answered) = abort_of(p("job", 0), procs.clone());
        let mut ends = vec![abort];
        ends.extend(finished(0));
        ends.extend(finished(1));
        let fake = Fake::default();
        assert_eq!(run_recovering(&fake, 2, connected_then(2, ends), true), 0);
        assert_eq!(answered.try_recv(), Ok(Err(Status::ERR_NOT_FOUND)));
        let log = fake.0.borrow();
        assert_eq!(log.said.len(), 1, "{procs:?}: {:?}", log.said);
        assert!(
            log.said[0].starts_with("rank 0 asked to abort ")
                && log.said[0]
                    .ends_with(", which is not a process of this run; nothing was aborted"),
            "{:?}",
            log.said
        );
        assert!(log.signals.is_empty(), "{:?}", log.signals);
        assert!(aborted_told(&log).is_empty());
    }
}

#[test]
fn an_abort_of_others_in_a_job_that_is_not_recoverable_stops_the_run() {
    let (abort, answered) = abort_of(p("job", 0), vec![p("job", 1)]);
    let ends = vec![abort, signalled("job", 0, 15), signalled("job", 1, 15)];
    let fake = Fake::default();
    assert_eq!(run_recovering(&fake, 2, connected_then(2, ends), false), 7);
    assert_eq!(answered.try_recv(), Ok(Ok(())));
    let log = fake.0.borrow();
    assert_eq!(
        log.said,
        ["rank 0 called abort of rank 1 with status 7: bye; killing the job"]
    );
}
