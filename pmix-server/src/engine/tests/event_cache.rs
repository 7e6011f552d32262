//! Events that announce a state, heard by clients that register for them afterwards.

use pmix_types::{DataRange, Info, Proc, Status, attr};
use pmix_wire::Event;

use super::{Sim, ns};
use crate::engine::ConnId;

fn pset_name(e: &Event) -> Option<&str> {
    e.info
        .iter()
        .find(|i| i.key.as_str() == attr::PSET_NAME)
        .and_then(|i| i.value.as_str())
}

fn taken(s: &mut Sim) -> Vec<(ConnId, Status, Option<String>)> {
    s.events
        .drain(..)
        .map(|(c, e)| (c, e.code, pset_name(&e).map(str::to_owned)))
        .collect()
}

#[test]
fn a_process_set_defined_before_a_registration_is_heard_at_it_once() {
    let mut s = Sim::new();
    s.job("a", 3);
    for r in 0..3 {
        s.connect(r as ConnId, "a", r);
    }
    s.eng
        .define_pset("app://one".into(), vec![Proc::new(ns("a"), 0)]);
    s.eng
        .define_pset("app://two".into(), vec![Proc::new(ns("a"), 1)]);
    // Redefined: the later definition replaces the earlier.
    s.eng
        .define_pset("app://one".into(), vec![Proc::new(ns("a"), 2)]);
    s.pump();
    assert!(s.events.is_empty(), "nobody registered yet");
    s.register_events(0, &[Status::PROCESS_SET_DEFINE]);
    let d = Status::PROCESS_SET_DEFINE;
    assert_eq!(
        taken(&mut s),
        vec![
            (0, d, Some("app://two".into())),
            (0, d, Some("app://one".into()))
        ]
    );
    assert_eq!(
        s.eng.pset_members("app://one"),
        Some(vec![Proc::new(ns("a"), 2)])
    );
    // Named again, or among other codes: not heard again.
    s.register_events(0, &[Status::PROCESS_SET_DEFINE, Status::PROCESS_SET_DELETE]);
    assert_eq!(taken(&mut s), vec![]);
    // A registration for every code (a default handler) hears none of them.
    s.register_events(1, &[]);
    assert_eq!(taken(&mut s), vec![]);
    // A deleted set's definition is no longer told; its deletion is.
    assert!(s.eng.delete_pset("app://two"));
    s.pump();
    let _ = taken(&mut s);
    s.register_events(2, &[Status::PROCESS_SET_DEFINE]);
    assert_eq!(taken(&mut s), vec![(2, d, Some("app://one".into()))]);
    s.register_events(2, &[Status::PROCESS_SET_DELETE]);
    assert_eq!(
        taken(&mut s),
        vec![(2, Status::PROCESS_SET_DELETE, Some("app://two".into()))]
    );
}

#[test]
fn a_jobs_end_reaches_a_late_registration_within_its_range_only() {
    let mut s = Sim::new();
    s.job("a", 2);
    s.connect(0, "a", 0);
    s.connect(1, "a", 1);
    let end = |info: Vec<Info>| Event {
        code: Status::EVENT_JOB_END,
        source: Proc::new(ns("host"), 0),
        range: DataRange::CUSTOM,
        info: [
            Info::attr(attr::EVENT_CUSTOM_RANGE, Proc::new(ns("a"), 0)),
            Info::attr(attr::NSPACE, "child"),
        ]
        .into_iter()
        .chain(info)
        .collect(),
    };
    s.eng.host_notify(&end(vec![]));
    // Not kept: marked so, or an event of the moment.
    s.eng
        .host_notify(&end(vec![Info::attr(attr::EVENT_DO_NOT_CACHE, true)]));
    s.eng.host_notify(&Event {
        code: Status::ERR_PROC_ABORTED,
        source: Proc::new(ns("host"), 0),
        range: DataRange::SESSION,
        info: vec![],
    });
    s.pump();
    s.register_events(1, &[Status::EVENT_JOB_END, Status::ERR_PROC_ABORTED]);
    assert_eq!(taken(&mut s), vec![], "rank 1 is outside the range");
    s.register_events(0, &[Status::EVENT_JOB_END, Status::ERR_PROC_ABORTED]);
    let got: Vec<_> = s.events.drain(..).collect();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!((got[0].0, got[0].1.code), (0, Status::EVENT_JOB_END));
    assert_eq!(got[0].1.source, Proc::new(ns("host"), 0));
    assert!(
        !got[0]
            .1
            .info
            .iter()
            .any(|i| i.key.as_str() == attr::EVENT_DO_NOT_CACHE)
    );
}
