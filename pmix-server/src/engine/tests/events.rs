//! Events: notification by range, failures of connected jobs.

use pmix_types::{DataArray, Info, Proc, Status, Value, attr};
use pmix_wire::Request;

use super::{Sim, ns};

#[test]
fn connected_jobs_hear_of_each_others_failures() {
    let mut sim = Sim::new();
    sim.job("a", 1);
    sim.job("b", 1);
    sim.connect(1, "a", 0);
    sim.connect(2, "b", 0);
    let id = sim.send(
        1,
        Request::RegisterEvents {
            codes: vec![Status::ERR_PROC_TERM_WO_SYNC],
            info: vec![],
        },
    );
    sim.reply(1, id);
    let procs = vec![Proc::new(ns("a"), 0), Proc::new(ns("b"), 0)];
    let i1 = sim.send(
        1,
        Request::Connect {
            procs: procs.clone(),
            info: vec![],
        },
    );
    let i2 = sim.send(
        2,
        Request::Connect {
            procs,
            info: vec![],
        },
    );
    sim.reply(1, i1);
    sim.reply(2, i2);
    sim.eng.handle_closed(2);
    sim.pump();
    assert_eq!(sim.events.len(), 1, "the connected job is told");
    assert_eq!(sim.events[0].0, 1);
}

#[test]
fn notify_reaches_registered_clients_in_range_only() {
    let mut sim = Sim::new();
    sim.job("a", 3);
    sim.job("b", 1);
    for (conn, name, rank) in [(1, "a", 0), (2, "a", 1), (3, "a", 2), (4, "b", 0)] {
        sim.connect(conn, name, rank);
    }
    let code = Status(-5000);
    for conn in [1, 2, 4] {
        let id = sim.send(
            conn,
            Request::RegisterEvents {
                codes: vec![code],
                info: vec![],
            },
        );
        sim.reply(conn, id);
    }
    let notify = |range: pmix_types::DataRange, info: Vec<Info>| Request::Notify {
        event: pmix_wire::Event {
            code,
            // A forged source is replaced by the real one.
            source: Proc::new(ns("b"), 0),
            range,
            info,
        },
    };
    let id = sim.send(1, notify(pmix_types::DataRange::NAMESPACE, vec![]));
    assert_eq!(sim.reply(1, id).status, Status::SUCCESS);
    let told: Vec<_> = sim.events.drain(..).map(|(c, e)| (c, e.source)).collect();
    assert_eq!(
        told,
        [(2, Proc::new(ns("a"), 0))],
        "a:2 did not register; b is another job"
    );
    let id = sim.send(1, notify(pmix_types::DataRange::GLOBAL, vec![]));
    sim.reply(1, id);
    let mut told: Vec<_> = sim.events.drain(..).map(|(c, _)| c).collect();
    told.sort();
    assert_eq!(told, [2, 4]);
    let list = DataArray::new(
        pmix_types::DataType::PROC,
        vec![Value::Proc(Proc::new(ns("b"), 0))],
    )
    .unwrap();
    let id = sim.send(
        1,
        notify(
            pmix_types::DataRange::CUSTOM,
            vec![Info::attr(attr::EVENT_CUSTOM_RANGE, list)],
        ),
    );
    sim.reply(1, id);
    let told: Vec<_> = sim.events.drain(..).map(|(c, _)| c).collect();
    assert_eq!(told, [4]);
    // Deregistered: no more events.
    let id = sim.send(4, Request::DeregisterEvents { codes: vec![code] });
    sim.reply(4, id);
    let id = sim.send(1, notify(pmix_types::DataRange::GLOBAL, vec![]));
    sim.reply(1, id);
    let told: Vec<_> = sim.events.drain(..).map(|(c, _)| c).collect();
    assert_eq!(told, [2]);
}
