//! Process sets the host defines: listed by queries, announced by events.

use pmix_types::{DataArray, Info, Proc, Rank, Status, Value, attr};
use pmix_wire::{Query, Reply, ReplyBody, Request};

use super::{GID, Sim, UID, key, ns, proofs};

fn query(keys: &[&str], qualifiers: Vec<Info>) -> Request {
    Request::Query {
        queries: vec![Query {
            keys: keys.iter().map(|k| key(k)).collect(),
            qualifiers,
        }],
    }
}

fn results(r: &Reply) -> Vec<(String, Value)> {
    match &r.body {
        ReplyBody::Query { results } => results
            .iter()
            .map(|i| (i.key.as_str().to_owned(), i.value.clone()))
            .collect(),
        other => panic!("not a query answer: {other:?} ({:?})", r.status),
    }
}

#[test]
fn defined_sets_are_listed_with_their_members_and_announced() {
    let mut s = Sim::new();
    s.job("a", 2);
    s.connect(0, "a", 0);
    s.connect(1, "a", 1);
    let reg = s.send(
        1,
        Request::RegisterEvents {
            codes: vec![Status::PROCESS_SET_DEFINE, Status::PROCESS_SET_DELETE],
            info: vec![],
        },
    );
    assert_eq!(s.reply(1, reg).status, Status::SUCCESS);
    let q = s.send(0, query(&[attr::QUERY_NUM_PSETS], vec![]));
    assert_eq!(
        results(&s.reply(0, q)),
        vec![(attr::QUERY_NUM_PSETS.to_owned(), Value::Size(0))]
    );
    let members = vec![Proc::new(ns("a"), 1)];
    s.eng.define_pset("app://odd".into(), members.clone());
    s.pump();
    let (conn, ev) = s.events.remove(0);
    assert_eq!((conn, ev.code), (1, Status::PROCESS_SET_DEFINE));
    assert!(
        ev.info
            .iter()
            .any(|i| i.key.as_str() == attr::PSET_NAME && i.value.as_str() == Some("app://odd"))
    );
    assert!(s.events.is_empty(), "rank 0 registered for nothing");
    let q = s.send(
        0,
        query(
            &[
                attr::QUERY_NUM_PSETS,
                attr::QUERY_PSET_NAMES,
                attr::QUERY_PSET_MEMBERSHIP,
            ],
            vec![Info::attr(attr::PSET_NAME, "app://odd")],
        ),
    );
    let got = results(&s.reply(0, q));
    assert_eq!(got[0].1, Value::Size(1));
    assert_eq!(got[1].1, Value::String("app://odd".into()));
    let Value::DataArray(a) = &got[2].1 else {
        panic!("membership {:?}", got[2])
    };
    assert_eq!(a.items(), &[Value::Proc(members[0].clone())]);
    assert!(s.eng.delete_pset("app://odd"));
    assert!(!s.eng.delete_pset("app://odd"));
    s.pump();
    assert_eq!(s.events.remove(0).1.code, Status::PROCESS_SET_DELETE);
    let q = s.send(0, query(&[attr::QUERY_NUM_PSETS], vec![]));
    assert_eq!(results(&s.reply(0, q))[0].1, Value::Size(0));
}

/// Sets a launcher names in a job's data (`pmixrun --pset`: `PSET_NAME` per application, and
/// per process) are answered with their members too, across namespaces.
#[test]
fn sets_named_in_job_data_have_their_members_answered() {
    let mut s = Sim::new();
    let app = |n: u32, ldr: u32, size: u32, pset: &'static str| {
        Info::attr(
            attr::APP_INFO_ARRAY,
            DataArray::from_infos([
                Info::attr(attr::APPNUM, n),
                Info::attr(attr::APPLDR, Rank(ldr)),
                Info::attr(attr::APP_SIZE, size),
                Info::attr(attr::PSET_NAME, pset),
            ]),
        )
    };
    let p = vec![
        Info::attr(attr::JOB_SIZE, 3u32),
        Info::attr(attr::PSET_NAMES, "ocean,land"),
        app(0, 0, 1, "land"),
        app(1, 1, 2, "ocean"),
    ];
    s.eng.register_nspace(ns("p"), 3, &p).unwrap();
    // Another job puts its rank 1 in "land" through its own data only.
    let q = vec![
        Info::attr(attr::JOB_SIZE, 2u32),
        Info::attr(
            attr::PROC_DATA,
            DataArray::from_infos([
                Info::attr(attr::RANK, Rank(1)),
                Info::attr(attr::PSET_NAME, "land"),
            ]),
        ),
    ];
    s.eng.register_nspace(ns("q"), 2, &q).unwrap();
    s.eng
        .register_client(&Proc::new(ns("p"), 0), UID, GID, proofs("p", 0))
        .unwrap();
    s.connect(1, "p", 0);
    let members = |s: &mut Sim, name: &'static str| {
        let asked = s.send(
            1,
            query(
                &[attr::QUERY_PSET_MEMBERSHIP],
                vec![Info::attr(attr::PSET_NAME, name)],
            ),
        );
        let reply = s.reply(1, asked).clone();
        results(&reply)
    };
    let procs = |v: &[(&str, u32)]| {
        let items = v
            .iter()
            .map(|(n, r)| Value::Proc(Proc::new(ns(n), Rank(*r))));
        Value::from(DataArray::new(pmix_types::DataType::PROC, items.collect()).unwrap())
    };
    assert_eq!(
        members(&mut s, "ocean"),
        vec![(
            attr::QUERY_PSET_MEMBERSHIP.to_owned(),
            procs(&[("p", 1), ("p", 2)])
        )]
    );
    assert_eq!(
        members(&mut s, "land"),
        vec![(
            attr::QUERY_PSET_MEMBERSHIP.to_owned(),
            procs(&[("p", 0), ("q", 1)])
        )]
    );
}
