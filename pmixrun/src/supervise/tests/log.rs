//! `PMIx_Log`'s channels, as the supervisor serves them.

use pmix_types::{Value, attr};

use super::*;
use crate::supervise::log::utc;
use pmix_types::DataArray;

/// A log request of rank 1 and where its answer arrives.
fn log(
    data: Vec<Info>,
    directives: Vec<Info>,
) -> (Event, crossbeam_channel::Receiver<Result<(), Status>>) {
    let (tx, rx) = crossbeam_channel::unbounded();
    let ev = Event::Log {
        source: p("job", 1),
        data,
        directives,
        done: Completion::from_fn(move |r| {
            let _ = tx.send(r);
        }),
        ticket: crate::node::log_budget::LogBudget::default()
            .take(&[])
            .expect("an empty budget"),
    };
    (ev, rx)
}

/// Runs a two-rank job through `events`.
fn run_logs(fake: &Fake, events: Vec<Event>) {
    let mut all = events;
    all.extend([exited("job", 0, 0), exited("job", 1, 0)]);
    run_with(fake, 2, all);
}

#[test]
fn stderr_lines_are_tagged_with_their_source() {
    let fake = Fake::default();
    let (ev, answer) = log(vec![Info::attr(attr::LOG_STDERR, "one\ntwo\n")], vec![]);
    run_logs(&fake, vec![ev]);
    assert_eq!(fake.0.borrow().logged, ["[1] one", "[1] two"]);
    assert_eq!(answer.try_recv(), Ok(Ok(())));
}

#[test]
fn syslog_gets_the_severity_asked_for_or_err() {
    let fake = Fake::default();
    fake.0.borrow_mut().syslog_up = true;
    let (plain, a1) = log(vec![Info::attr(attr::LOG_SYSLOG, "x")], vec![]);
    let (warn, a2) = log(
        vec![Info::attr(attr::LOG_LOCAL_SYSLOG, "y")],
        vec![Info::attr(attr::LOG_SYSLOG_PRI, 4i32)],
    );
    run_logs(&fake, vec![plain, warn]);
    assert_eq!(
        fake.0.borrow().syslogged,
        [(3, "[1] x".to_owned()), (4, "[1] y".to_owned())]
    );
    assert_eq!(a1.try_recv(), Ok(Ok(())));
    assert_eq!(a2.try_recv(), Ok(Ok(())));
}

#[test]
fn nothing_served_is_not_available_and_something_served_is_success() {
    let fake = Fake::default();
    // No syslog daemon, no mail: nothing can take these.
    let email = DataArray::from_infos([Info::attr(attr::LOG_MSG, "m")]);
    let (none, a1) = log(
        vec![
            Info::attr(attr::LOG_SYSLOG, "x"),
            Info::attr(attr::LOG_EMAIL, email),
        ],
        vec![],
    );
    let (some, a2) = log(
        vec![
            Info::attr(attr::LOG_SYSLOG, "x"),
            Info::attr(attr::LOG_JOB_RECORD, "kept"),
        ],
        vec![],
    );
    run_logs(&fake, vec![none, some]);
    assert_eq!(a1.try_recv(), Ok(Err(Status::ERR_NOT_AVAILABLE)));
    assert_eq!(a2.try_recv(), Ok(Ok(())));
    assert!(
        fake.0
            .borrow()
            .said
            .contains(&"job record: [1] kept".to_owned()),
        "{:?}",
        fake.0.borrow().said
    );
}

#[test]
fn once_stops_at_the_first_channel_that_took_it_and_timestamps_lead() {
    let fake = Fake::default();
    let (ev, answer) = log(
        vec![
            Info::attr(attr::LOG_SYSLOG, "x"),
            Info::attr(attr::LOG_STDOUT, "out"),
            Info::attr(attr::LOG_STDERR, "err"),
        ],
        vec![
            Info::attr(attr::LOG_ONCE, true),
            Info::new(
                pmix_types::Key::new(attr::LOG_TIMESTAMP).unwrap_or_else(|e| panic!("{e}")),
                Value::Time(86_400 * 365),
            ),
        ],
    );
    run_logs(&fake, vec![ev]);
    // Syslog is down: stdout takes it, stderr is not tried.
    assert_eq!(fake.0.borrow().logged, ["[1] 1971-01-01T00:00:00Z out"]);
    assert_eq!(answer.try_recv(), Ok(Ok(())));
}

#[test]
fn utc_dates_are_the_calendar_s() {
    assert_eq!(utc(0), "1970-01-01T00:00:00Z");
    assert_eq!(utc(951_782_400), "2000-02-29T00:00:00Z");
    assert_eq!(utc(1_795_656_061), "2026-11-26T01:21:01Z");
    assert_eq!(utc(-1), "1969-12-31T23:59:59Z");
}
