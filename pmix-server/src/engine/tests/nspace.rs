//! Namespace registration and deregistration as the engine sees them.

use pmix_types::{DataArray, Info, Proc, Rank, Scope, Value, attr};

use super::{Sim, commit, get, ns};
use crate::engine::Engine;

#[test]
fn registration_derives_what_the_maps_imply() {
    let mut s = Sim::new();
    let nodes = pmix_regex::generate_regex(&["node1", "node0"]).unwrap();
    let ppn = pmix_regex::generate_ppn(&[vec![0u32, 2], vec![1, 3, 4]]).unwrap();
    let app0 = DataArray::from_infos([
        Info::attr(attr::APPNUM, 0u32),
        Info::attr(attr::APP_SIZE, 2u32),
    ]);
    let app1 = DataArray::from_infos([
        Info::attr(attr::APPNUM, 1u32),
        Info::attr(attr::APP_SIZE, 3u32),
    ]);
    let job = DataArray::from_infos([
        Info::attr(attr::NODE_MAP, Value::Regex(nodes)),
        Info::attr(attr::PROC_MAP, Value::Regex(ppn)),
        Info::attr(attr::UNIV_SIZE, 64u32),
    ]);
    let session = DataArray::from_infos([Info::attr(attr::JOB_INFO_ARRAY, job)]);
    let info = vec![
        Info::attr(attr::SESSION_INFO_ARRAY, session),
        Info::attr(attr::APP_INFO_ARRAY, app0),
        Info::attr(attr::APP_INFO_ARRAY, app1),
    ];
    s.eng.register_nspace(ns("d"), 3, &info).unwrap();
    let nsid = s.eng.ns_id("d").unwrap();
    let n = &s.eng.nspaces[&nsid];
    assert_eq!(n.size, 5);
    assert_eq!(
        n.local,
        vec![Rank(1), Rank(3), Rank(4)],
        "local ranks of node0"
    );
    let job = n.job.get();
    let jv = |k: &str| {
        job.job
            .iter()
            .chain(&job.session)
            .find(|i| i.key.as_str() == k)
            .map(|i| i.value.clone())
    };
    assert_eq!(jv(attr::JOB_SIZE).and_then(|v| v.as_u32()), Some(5));
    assert_eq!(jv(attr::UNIV_SIZE).and_then(|v| v.as_u32()), Some(64));
    assert_eq!(jv(attr::NUM_NODES).and_then(|v| v.as_u32()), Some(2));
    assert_eq!(jv(attr::JOB_NUM_APPS).and_then(|v| v.as_u32()), Some(2));
    assert_eq!(
        jv(attr::LOCAL_PEERS)
            .and_then(|v| v.as_str().map(str::to_owned))
            .as_deref(),
        Some("1,3,4")
    );
    let pv = |r: u32, k: &str| {
        job.procs
            .iter()
            .find(|p| p.rank == Rank(r))
            .and_then(|p| p.info.iter().find(|i| i.key.as_str() == k))
            .map(|i| i.value.clone())
    };
    assert_eq!(pv(3, attr::HOSTNAME), Some(Value::String("node0".into())));
    assert_eq!(pv(3, attr::LOCAL_RANK).and_then(|v| v.as_u32()), Some(1));
    assert_eq!(pv(3, attr::NODEID).and_then(|v| v.as_u32()), Some(1));
    assert_eq!(pv(2, attr::APPNUM).and_then(|v| v.as_u32()), Some(1));
    assert_eq!(pv(2, attr::APP_RANK).and_then(|v| v.as_u32()), Some(0));
    assert_eq!(pv(4, attr::APP_RANK).and_then(|v| v.as_u32()), Some(2));
    let node1 = job.nodes.iter().find(|n| n.id == 0).unwrap();
    assert!(
        node1
            .info
            .iter()
            .any(|i| i.key.as_str() == attr::LOCAL_PEERS && i.value.as_str() == Some("0,2"))
    );
}

#[test]
fn bad_registrations_are_errors() {
    let mut s = Sim::new();
    let nodes = pmix_regex::generate_regex(&["n0", "n1"]).unwrap();
    let ppn = pmix_regex::generate_ppn(&[vec![0u32]]).unwrap();
    let mismatch = vec![
        Info::attr(attr::NODE_MAP, Value::Regex(nodes)),
        Info::attr(attr::PROC_MAP, Value::Regex(ppn)),
    ];
    assert!(s.eng.register_nspace(ns("x"), 1, &mismatch).is_err());
    let app = DataArray::from_infos([Info::attr(attr::APP_SIZE, 2u32)]);
    assert!(
        s.eng
            .register_nspace(ns("y"), 1, &[Info::attr(attr::APP_INFO_ARRAY, app)])
            .is_err()
    );
    assert!(
        s.eng
            .register_nspace(ns("z"), 1, &[Info::attr(attr::NODE_MAP, "garbage[")])
            .is_err()
    );
    assert!(s.eng.ns_id("x").is_none() && s.eng.ns_id("y").is_none());
}

#[test]
fn deregister_purges_the_namespace() {
    let mut s = Sim::new();
    s.job("a", 2);
    s.connect(0, "a", 0);
    s.connect(1, "a", 1);
    let c = s.send(
        0,
        commit(&[("k", Scope::GLOBAL, Value::ByteObject(vec![0; 1000]))]),
    );
    s.reply(0, c);
    let g = s.send(0, get(Proc::new(ns("a"), 1), "k", vec![]));
    s.eng.deregister_nspace("a");
    s.pump();
    assert!(s.closed.contains(&0) && s.closed.contains(&1));
    assert!(s.eng.ns_id("a").is_none());
    assert_eq!(s.eng.store.len(), 0);
    assert!(s.eng.gets.is_empty() && s.eng.sessions.is_empty());
    let _ = g;
}

#[test]
fn register_nodata_gives_clients_no_job_data() {
    let mut s = Sim::new();
    let info = vec![
        Info::attr(attr::REGISTER_NODATA, true),
        Info::attr(attr::JOB_SIZE, 2u32),
    ];
    s.eng.register_nspace(ns("nd"), 2, &info).unwrap();
    let id = s.eng.ns_id("nd").unwrap();
    let job = s.eng.nspaces[&id].job.get();
    assert!(job.job.is_empty() && job.procs.is_empty() && job.session.is_empty());
    assert_eq!(s.eng.nspaces[&id].size, 2);
}

#[test]
fn a_job_registered_as_spawned_says_so_for_every_process() {
    let mut eng = Engine::new("node0".into(), vec![], crate::NameService::BuiltIn);
    let spawned_of = |eng: &Engine, name: &str| -> Vec<Option<bool>> {
        let id = eng.ns_id(name).unwrap();
        eng.nspaces[&id]
            .job
            .get()
            .procs
            .iter()
            .map(|p| {
                p.info
                    .iter()
                    .find(|i| i.key.as_str() == attr::SPAWNED)
                    .and_then(|i| i.value.as_bool())
            })
            .collect()
    };
    let info = |spawned: Option<bool>| {
        let mut v = vec![Info::attr(attr::JOB_SIZE, 2u32)];
        if let Some(s) = spawned {
            v.push(Info::attr(attr::SPAWNED, s));
        }
        v
    };
    eng.register_nspace(ns("child"), 2, &info(Some(true)))
        .unwrap();
    eng.register_nspace(ns("first"), 2, &info(None)).unwrap();
    assert_eq!(spawned_of(&eng, "child"), [Some(true), Some(true)]);
    assert_eq!(spawned_of(&eng, "first"), [Some(false), Some(false)]);
}
