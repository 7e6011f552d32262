//! Spawn: to the host and its answer back.

use pmix_types::{Proc, Status};
use pmix_wire::{ReplyBody, Request};

use super::{Sim, ns};
use crate::engine::{HostCall, HostOutcome};

#[test]
fn spawn_goes_to_the_host_and_its_answer_to_the_client() {
    let mut sim = Sim::new();
    sim.auto_host = false;
    sim.job("a", 1);
    sim.connect_answering_host(1, "a", 0);
    let app = pmix_wire::App {
        cmd: "/bin/true".into(),
        argv: vec!["true".into()],
        env: vec![],
        cwd: String::new(),
        maxprocs: 2,
        info: vec![],
    };
    let id = sim.send(
        1,
        Request::Spawn {
            job_info: vec![],
            apps: vec![app.clone()],
        },
    );
    let (op, call) = sim.host_calls.remove(0);
    let HostCall::Spawn { proc, apps, .. } = call else {
        panic!("expected a spawn call: {call:?}");
    };
    assert_eq!((proc, apps), (Proc::new(ns("a"), 0), vec![app.clone()]));
    sim.eng
        .handle_host_done(op, HostOutcome::Nspace(Ok(ns("child"))));
    sim.pump();
    let r = sim.reply(1, id);
    assert_eq!(
        r.body,
        ReplyBody::Spawn {
            nspace: ns("child")
        }
    );
    // A failed spawn is the host's status; malformed apps never reach the host.
    let id = sim.send(
        1,
        Request::Spawn {
            job_info: vec![],
            apps: vec![app.clone()],
        },
    );
    let (op, _) = sim.host_calls.remove(0);
    sim.eng
        .handle_host_done(op, HostOutcome::Nspace(Err(Status::ERR_JOB_EXE_NOT_FOUND)));
    sim.pump();
    assert_eq!(sim.reply(1, id).status, Status::ERR_JOB_EXE_NOT_FOUND);
    let id = sim.send(
        1,
        Request::Spawn {
            job_info: vec![],
            apps: vec![],
        },
    );
    assert_eq!(sim.reply(1, id).status, Status::ERR_BAD_PARAM);
    assert!(sim.host_calls.is_empty());
}
