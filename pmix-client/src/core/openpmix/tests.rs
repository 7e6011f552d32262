//! The translation both ways, checked against what a real OpenPMIx 4.2.2 server and libpmix
//! client exchanged (`pmix-wire/tests/data/openpmix/cap2.jsonl`, connection 1: rank 1 of
//! `testjob`, 2 ranks on node `vm`, gds=hash) and against job information laid out the way
//! the reference's `hash` module lays it out.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicU32, Ordering};

use pmix_types::{
    DataArray, DataRange, Info, InfoFlags, Key, Nspace, Proc, Rank, Scope, Status, Value, attr,
};
use pmix_wire::openpmix::{
    BufferType, Codec, Dialect, JobInfo, Kval, PROC_BLOB, ProcKvals, Reply as OpenpmixReply,
    Request as OpenpmixRequest, encode_message_with, proc_blob_kval,
};
use pmix_wire::{Event, JobData, Kv, Published, Reply, ReplyBody, Request};

use super::*;

fn key(s: &str) -> Key {
    Key::new(s).unwrap()
}

fn ns(s: &str) -> Nspace {
    Nspace::new(s).unwrap()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// The payload of the real server's answer to rank 1's `REQ` (cap2, tag 101, 664 bytes).
const CAP2_REQ_REPLY: &str = concat!(
    "0210746573746a6f62000218706d69782e6e7370616365000310746573746a6f62000216706d69782e6a6f62",
    "6964000310746573746a6f6200021c706d69782e6a6f622e73697a65000e02021c706d69782e6d61782e7369",
    "7a65000e02021e706d69782e6e756d2e6e6f646573000e010216706d69782e6e736469720003302f746d702f",
    "706d6978686f73742e6752305151712f6e73000216706d69782e6e6c697374000306766d000220706d69782e",
    "6266726f70732e6d6f64000312342e322e3272633200021a706d69782e73736e2e6172720027180320706d69",
    "782e73657373696f6e2e696400000effffffff0f1e706d69782e756e69762e73697a6500000e0218706d6978",
    "2e746d706469720002032a2f746d702f706d6978686f73742e67523051517100021c706d69782e6e6f64652e",
    "6172720027180516706d69782e686e616d6500000306766d001e706d69782e6e6f64652e73697a6500000e02",
    "18706d69782e6c706565727300000308302c310014706d69782e6c6c64720000280020706d69782e6c6f6361",
    "6c2e73697a6500020e020216706d69782e70626c6f62001b7202000216706d69782e6c72616e6b000d000216",
    "706d69782e6e72616e6b000d000216706d69782e6772616e6b002800021a706d69782e61707072616e6b0028",
    "000218706d69782e6170706e756d000e000218706d69782e6e6f64656964000e000216706d69782e686e616d",
    "65000306766d000216706d69782e70626c6f62001b7202010216706d69782e6c72616e6b000d010216706d69",
    "782e6e72616e6b000d010216706d69782e6772616e6b002801021a706d69782e61707072616e6b0028010218",
    "706d69782e6170706e756d000e000218706d69782e6e6f64656964000e000216706d69782e686e616d650003",
    "06766d00",
);

fn me() -> Proc {
    Proc::new(ns("testjob"), 1)
}

fn cx(dialect: Dialect) -> Context {
    Context {
        me: me(),
        dialect,
        hostname: Some("vm".into()),
    }
}

/// A session as `crate::openpmix::connect` leaves it after the job data request (tag 101).
fn session(dialect: Dialect) -> Session {
    let mut s = Session::new(cx(dialect), 1000, 0);
    assert_eq!(s.fresh_tag(), 101);
    s
}

fn find<'a>(infos: &'a [Info], k: &str) -> Option<&'a Value> {
    infos.iter().find(|i| i.key.as_str() == k).map(|i| &i.value)
}

// ---- job data --------------------------------------------------------------------------

#[test]
fn the_real_servers_job_data_becomes_job_data() {
    let bytes = hex(CAP2_REQ_REPLY);
    assert_eq!(bytes.len(), 664);
    let OpenpmixReply::JobInfo(info) =
        OpenpmixReply::decode(Cmd::REQ, &bytes, Dialect::V41).unwrap()
    else {
        panic!("not job data");
    };
    let here = Here {
        rank: Some(Rank(1)),
        hostname: None,
    };
    let job = from_job_info(info, Dialect::V41, here).unwrap();
    assert_eq!(job.nspace, ns("testjob"));
    // Session: the array, flags dropped.
    assert_eq!(
        find(&job.session, attr::SESSION_ID),
        Some(&Value::Uint32(u32::MAX))
    );
    assert_eq!(find(&job.session, attr::UNIV_SIZE), Some(&Value::Uint32(2)));
    assert!(job.session.iter().all(|i| i.flags == InfoFlags::default()));
    // Job level: the top-level keys, and this node's keys.
    assert_eq!(find(&job.job, attr::JOB_SIZE), Some(&Value::Uint32(2)));
    assert_eq!(
        find(&job.job, attr::NODE_LIST),
        Some(&Value::String("vm".into()))
    );
    assert_eq!(find(&job.job, attr::LOCAL_SIZE), Some(&Value::Uint32(2)));
    assert_eq!(
        find(&job.job, attr::LOCAL_PEERS),
        Some(&Value::String("0,1".into()))
    );
    assert!(find(&job.job, attr::NODE_INFO_ARRAY).is_none());
    assert!(find(&job.job, PROC_BLOB).is_none());
    // One node, id 0 (from the ranks: the array names only the host).
    assert_eq!(job.nodes.len(), 1);
    assert_eq!(job.nodes[0].id, 0);
    assert_eq!(
        find(&job.nodes[0].info, attr::HOSTNAME),
        Some(&Value::String("vm".into()))
    );
    // Both ranks, from their blobs.
    let ranks: Vec<u32> = job.procs.iter().map(|p| p.rank.0).collect();
    assert_eq!(ranks, [0, 1]);
    for p in &job.procs {
        assert_eq!(
            find(&p.info, attr::LOCAL_RANK),
            Some(&Value::Uint16(p.rank.0 as u16))
        );
        assert_eq!(find(&p.info, attr::APPNUM), Some(&Value::Uint32(0)));
        assert_eq!(find(&p.info, attr::NODEID), Some(&Value::Uint32(0)));
    }
    assert_eq!(hostname_of(&job), Some("vm"));
}

fn hostname_of(job: &JobData) -> Option<&str> {
    crate::openpmix::hostname_of(job, Rank(1))
}

fn array(k: &str, infos: Vec<Info>) -> Kval {
    pmix_wire::openpmix::info_array(key(k), infos)
}

fn i(k: &str, v: impl Into<Value>) -> Info {
    Info::new(key(k), v)
}

/// Job information of two nodes and two apps as a server of the `hash` module sends it, with
/// the rank data as `pmix.pblob`s packed in `dialect`.
fn two_node_job(dialect: Dialect) -> JobInfo {
    let mut kvals = vec![
        Kval::new(key(attr::JOB_SIZE), Value::Uint32(4)),
        Kval::new(key("user.job.key"), Value::String("kept".into())),
        array(
            attr::SESSION_INFO_ARRAY,
            vec![i(attr::SESSION_ID, 7u32), i(attr::UNIV_SIZE, 8u32)],
        ),
        // The default session's array, after the job's own: adds only what is missing.
        array(
            attr::SESSION_INFO_ARRAY,
            vec![
                i(attr::SESSION_ID, u32::MAX),
                i(attr::UNIV_SIZE, 99u32),
                i(attr::TMPDIR, "/tmp/s"),
            ],
        ),
        array(
            attr::NODE_INFO_ARRAY,
            vec![
                i(attr::HOSTNAME, "n0"),
                i(attr::NODEID, 0u32),
                i(attr::LOCAL_SIZE, 2u32),
                i(attr::LOCAL_PEERS, "0,2"),
            ],
        ),
        // No node id: the ranks on that host say it.
        array(
            attr::NODE_INFO_ARRAY,
            vec![
                i(attr::HOSTNAME, "n1"),
                i(attr::LOCAL_SIZE, 2u32),
                i(attr::LOCAL_PEERS, "1,3"),
            ],
        ),
        array(
            attr::APP_INFO_ARRAY,
            vec![i(attr::APPNUM, 1u32), i(attr::APP_SIZE, 2u32)],
        ),
        array(
            attr::APP_INFO_ARRAY,
            vec![i(attr::APPNUM, 0u32), i(attr::APP_SIZE, 2u32)],
        ),
        Kval::new(
            key(pmix_wire::openpmix::MAP_BLOB),
            Value::ByteObject(vec![1, 2, 3]),
        ),
    ];
    for r in [3u32, 0, 1, 2] {
        let node = r % 2;
        let kv = [
            Kval::new(key(attr::LOCAL_RANK), Value::Uint16((r / 2) as u16)),
            Kval::new(key(attr::APPNUM), Value::Uint32(r / 2)),
            Kval::new(key(attr::NODEID), Value::Uint32(node + 4)),
            Kval::new(key(attr::HOSTNAME), Value::String(format!("n{node}"))),
        ];
        kvals.push(proc_blob_kval(Rank(r), &kv, dialect).unwrap());
    }
    JobInfo {
        nspace: ns("other"),
        kvals,
    }
}

#[test]
fn levels_are_sorted_out_in_every_dialect() {
    for dialect in [
        Dialect::V41,
        Dialect::new(Codec::V3, BufferType::NonDesc),
        Dialect::new(Codec::V41, BufferType::FullyDesc),
    ] {
        // Through the wire and back, as a CONNECTNB answer carries it.
        let blob = two_node_job(dialect).encode_blob(dialect).unwrap();
        let info = JobInfo::decode_blob(&blob, dialect).unwrap();
        let here = Here {
            rank: None,
            hostname: Some("n1"),
        };
        let job = from_job_info(info, dialect, here).unwrap();
        assert_eq!(job.nspace, ns("other"));
        assert_eq!(
            find(&job.session, attr::SESSION_ID),
            Some(&Value::Uint32(7))
        );
        assert_eq!(find(&job.session, attr::UNIV_SIZE), Some(&Value::Uint32(8)));
        assert_eq!(
            find(&job.session, attr::TMPDIR),
            Some(&Value::String("/tmp/s".into()))
        );
        assert_eq!(
            find(&job.job, "user.job.key"),
            Some(&Value::String("kept".into()))
        );
        assert!(find(&job.job, pmix_wire::openpmix::MAP_BLOB).is_none());
        // n0 has its id; n1's comes from its ranks (NODEID 5).
        let ids: Vec<u32> = job.nodes.iter().map(|n| n.id).collect();
        assert_eq!(ids, [0, 5]);
        // This node is n1 (by name): its keys are job-level too.
        assert_eq!(
            find(&job.job, attr::LOCAL_PEERS),
            Some(&Value::String("1,3".into()))
        );
        let apps: Vec<u32> = job.apps.iter().map(|a| a.id).collect();
        assert_eq!(apps, [0, 1]);
        let ranks: Vec<u32> = job.procs.iter().map(|p| p.rank.0).collect();
        assert_eq!(ranks, [0, 1, 2, 3]);
        assert_eq!(
            find(&job.procs[3].info, attr::HOSTNAME),
            Some(&Value::String("n1".into()))
        );
    }
}

#[test]
fn rank_data_as_info_arrays_is_read_too() {
    // What a GETNB of rank WILDCARD brings: `pmix.pdata` arrays led by the rank.
    let pdata = |r: u32| {
        Kval::new(
            key(attr::PROC_INFO_ARRAY),
            DataArray::from_infos([i(attr::RANK, Value::Rank(Rank(r))), i(attr::NODEID, 0u32)]),
        )
    };
    let kvals = vec![
        Kval::new(key(attr::JOB_SIZE), Value::Uint32(2)),
        pdata(1),
        pdata(0),
        // No rank first: not a rank's data.
        Kval::new(
            key(attr::PROC_INFO_ARRAY),
            DataArray::from_infos([i(attr::NODEID, 0u32)]),
        ),
    ];
    let job = from_kvals(ns("j"), kvals, Dialect::V41, Here::default()).unwrap();
    let ranks: Vec<u32> = job.procs.iter().map(|p| p.rank.0).collect();
    assert_eq!(ranks, [0, 1]);
    assert_eq!(job.procs[0].info, vec![i(attr::NODEID, 0u32)]);
}

#[test]
fn a_rank_blob_that_is_not_bytes_or_does_not_decode_is_an_error() {
    let not_bytes = vec![Kval::new(key(PROC_BLOB), Value::Uint32(1))];
    assert!(from_kvals(ns("j"), not_bytes, Dialect::V41, Here::default()).is_err());
    let truncated = vec![Kval::new(key(PROC_BLOB), Value::ByteObject(vec![0x02]))];
    assert!(from_kvals(ns("j"), truncated, Dialect::V41, Here::default()).is_err());
}

// ---- requests ---------------------------------------------------------------------------

/// What the session writes for native request `req`: (tag, payload).
fn written(s: &mut Session, id: u32, req: Request) -> (u32, Vec<u8>, Sent) {
    let mut out = Vec::new();
    let sent = s.encode(id, req, &mut out).unwrap();
    let header: [u8; 16] = out[..16].try_into().unwrap();
    let h = pmix_wire::openpmix::Header::decode(&header);
    assert_eq!(h.pindex, 0);
    assert_eq!(h.nbytes as usize, out.len() - 16);
    (h.tag, out[16..].to_vec(), sent)
}

#[test]
fn requests_are_what_libpmix_sends() {
    // Rank 1's session of cap2, request by request, byte for byte.
    let mut s = session(Dialect::V41);
    let commit = Request::Commit {
        kvs: vec![Kv {
            scope: Scope::GLOBAL,
            key: key("wire.test"),
            value: Value::String("hello-from-1".into()),
        }],
    };
    let (tag, payload, _) = written(&mut s, 7, commit);
    assert_eq!(tag, 102);
    assert_eq!(
        payload,
        hex(concat!(
            "0202020102011b0214776972652e7465737400031a68656c6c6f2d66726f6d2d3100",
            "020202011b0214776972652e7465737400031a68656c6c6f2d66726f6d2d3100"
        ))
    );
    let fence = Request::Fence {
        procs: vec![],
        info: vec![Info::attr(attr::COLLECT_DATA, true)],
    };
    let (tag, payload, _) = written(&mut s, 8, fence);
    assert_eq!(tag, 103);
    assert_eq!(
        payload,
        hex("020302010210746573746a6f6200feffffff0f0201021a706d69782e636f6c6c65637400000101")
    );
    let get = Request::Get {
        proc: Proc::new(ns("testjob"), 0),
        key: Some(key("wire.test")),
        info: vec![],
    };
    let (tag, payload, _) = written(&mut s, 9, get);
    assert_eq!(tag, 104);
    assert_eq!(
        payload,
        hex("02040210746573746a6f6200020002000214776972652e7465737400")
    );
    let barrier = Request::Fence {
        procs: vec![Proc::new(ns("testjob"), Rank::WILDCARD)],
        info: vec![],
    };
    assert_eq!(
        written(&mut s, 10, barrier).1,
        hex("020302010210746573746a6f6200feffffff0f0200")
    );
    let (tag, payload, _) = written(&mut s, 11, Request::Finalize { info: vec![] });
    assert_eq!((tag, payload), (106, hex("0205")));
    // Each tag maps back to its request.
    let waiting: Vec<(u32, u32)> = {
        let t = s.tags;
        let mut v: Vec<_> = t.waiting.iter().map(|(t, w)| (*t, w.id)).collect();
        v.sort_unstable();
        v
    };
    assert_eq!(
        waiting,
        [(102, 7), (103, 8), (104, 9), (105, 10), (106, 11)]
    );
}

fn translated(req: Request) -> Outbound {
    outbound(req, &me(), 1000)
}

#[test]
fn commits_split_by_scope_and_keep_internal_values_home() {
    let kv = |scope, k: &str| Kv {
        scope,
        key: key(k),
        value: Value::Bool(true),
    };
    let req = Request::Commit {
        kvs: vec![
            kv(Scope::LOCAL, "l"),
            kv(Scope::REMOTE, "r"),
            kv(Scope::GLOBAL, "g"),
            kv(Scope::UNDEF, "u"),
            kv(Scope::INTERNAL, "i"),
        ],
    };
    let Outbound::Send(OpenpmixRequest::Commit { parts }, Answer::Status) = translated(req) else {
        panic!("not a commit");
    };
    let keys = |n: usize| -> (Scope, Vec<&str>) {
        (
            parts[n].scope,
            parts[n].kvals.iter().map(|k| k.key.as_str()).collect(),
        )
    };
    assert_eq!(parts.len(), 2);
    assert_eq!(keys(0), (Scope::LOCAL, vec!["l", "g", "u"]));
    assert_eq!(keys(1), (Scope::REMOTE, vec!["r", "g", "u"]));
    // Nothing put: the command alone.
    assert_eq!(
        translated(Request::Commit { kvs: vec![] }),
        Outbound::Send(OpenpmixRequest::Commit { parts: vec![] }, Answer::Status)
    );
}

#[test]
fn a_refreshing_get_asks_without_the_directive() {
    let p = Proc::new(ns("testjob"), 0);
    let timeout = Info::attr(attr::TIMEOUT, 5i32);
    let req = Request::Get {
        proc: p.clone(),
        key: Some(key("k")),
        info: vec![Info::attr(attr::GET_REFRESH_CACHE, true), timeout.clone()],
    };
    assert_eq!(
        outbound(req, &me(), 1000),
        Outbound::Send(
            OpenpmixRequest::Get {
                proc: p,
                info: vec![timeout],
                key: Some(key("k")),
            },
            Answer::Get
        )
    );
}

#[test]
fn every_native_request_has_its_openpmix_request() {
    let p = Proc::new(ns("other"), 3);
    let wild = Proc::new(ns("other"), Rank::WILDCARD);
    let info = vec![Info::attr(attr::TIMEOUT, 5i32)];
    let data = vec![Info::new(key("svc"), "addr")];
    let k = vec![key("svc")];
    let cases: Vec<(Request, Outbound)> = vec![
        (
            // Job data of another namespace: all of it, so that the store may trust it.
            Request::Get {
                proc: wild.clone(),
                key: Some(key(attr::JOB_SIZE)),
                info: vec![],
            },
            Outbound::Send(
                OpenpmixRequest::Get {
                    proc: wild.clone(),
                    info: vec![],
                    key: None,
                },
                Answer::Get,
            ),
        ),
        (
            Request::Publish {
                data: data.clone(),
                info: info.clone(),
            },
            Outbound::Send(
                OpenpmixRequest::Publish {
                    uid: 1000,
                    info: vec![data[0].clone(), info[0].clone()],
                },
                Answer::Status,
            ),
        ),
        (
            Request::Lookup {
                keys: k.clone(),
                info: info.clone(),
            },
            Outbound::Send(
                OpenpmixRequest::Lookup {
                    uid: 1000,
                    keys: k.clone(),
                    info: info.clone(),
                },
                Answer::Lookup,
            ),
        ),
        (
            Request::Unpublish {
                keys: k.clone(),
                info: vec![],
            },
            Outbound::Send(
                OpenpmixRequest::Unpublish {
                    uid: 1000,
                    keys: k.clone(),
                    info: vec![],
                },
                Answer::Status,
            ),
        ),
        (
            Request::Abort {
                status: Status(7),
                message: String::new(),
                procs: vec![],
            },
            Outbound::Send(
                OpenpmixRequest::Abort {
                    status: Status(7),
                    message: None,
                    procs: vec![],
                },
                Answer::Status,
            ),
        ),
        (
            Request::Abort {
                status: Status(7),
                message: "bye".into(),
                procs: vec![p.clone()],
            },
            Outbound::Send(
                OpenpmixRequest::Abort {
                    status: Status(7),
                    message: Some("bye".into()),
                    procs: vec![p.clone()],
                },
                Answer::Status,
            ),
        ),
        (
            Request::RegisterEvents {
                codes: vec![Status(-101)],
                info: vec![],
            },
            Outbound::Send(
                OpenpmixRequest::RegisterEvents {
                    codes: vec![Status(-101)],
                    info: vec![],
                },
                Answer::Status,
            ),
        ),
        (
            Request::DeregisterEvents {
                codes: vec![Status(-101)],
            },
            Outbound::Unanswered(OpenpmixRequest::DeregisterEvents {
                codes: vec![Status(-101)],
            }),
        ),
        (
            Request::Notify {
                event: Event {
                    code: Status(-101),
                    source: me(),
                    range: DataRange::NAMESPACE,
                    info: info.clone(),
                },
            },
            Outbound::Send(
                OpenpmixRequest::Notify {
                    status: Status(-101),
                    range: DataRange::NAMESPACE,
                    info: info.clone(),
                },
                Answer::Status,
            ),
        ),
        (
            Request::Connect {
                procs: vec![wild.clone()],
                info: vec![],
            },
            Outbound::Send(
                OpenpmixRequest::Connect {
                    procs: vec![wild.clone()],
                    info: vec![],
                },
                Answer::Connect,
            ),
        ),
        (
            Request::Disconnect {
                procs: vec![wild.clone()],
                info: vec![],
            },
            Outbound::Send(
                OpenpmixRequest::Disconnect {
                    procs: vec![wild.clone()],
                    info: vec![],
                },
                Answer::Status,
            ),
        ),
        (
            Request::Spawn {
                job_info: info.clone(),
                apps: vec![],
            },
            Outbound::Send(
                OpenpmixRequest::Spawn {
                    job_info: info.clone(),
                    apps: vec![],
                },
                Answer::Spawn,
            ),
        ),
        (
            Request::Query { queries: vec![] },
            Outbound::Send(OpenpmixRequest::Query { queries: vec![] }, Answer::Query),
        ),
        (
            Request::Log {
                data: info.clone(),
                directives: vec![],
            },
            Outbound::Send(
                OpenpmixRequest::Log {
                    timestamp: 0,
                    data: info.clone(),
                    directives: vec![],
                },
                Answer::Status,
            ),
        ),
        (
            Request::JobControl {
                targets: vec![],
                directives: info.clone(),
            },
            Outbound::Send(
                OpenpmixRequest::JobControl {
                    targets: vec![],
                    directives: info.clone(),
                },
                Answer::Info,
            ),
        ),
    ];
    for (req, want) in cases {
        assert_eq!(translated(req.clone()), want, "{req:?}");
    }
}

#[test]
fn deregistration_is_complete_once_sent() {
    let mut s = session(Dialect::V41);
    let (tag, payload, sent) = written(
        &mut s,
        3,
        Request::DeregisterEvents {
            codes: vec![Status(-101)],
        },
    );
    assert_eq!(tag, 102);
    assert_eq!(payload[..2], [0x02, 14]);
    assert!(matches!(
        sent,
        Sent::Done(Reply {
            status: Status::SUCCESS,
            ..
        })
    ));
    // Nothing waits for an answer; the next request takes the next tag.
    assert!(s.tags.waiting.is_empty());
    assert_eq!(
        written(&mut s, 4, Request::Finalize { info: vec![] }).0,
        103
    );
}

#[test]
fn tags_wrap_past_the_reserved_ones_and_skip_those_in_use() {
    let mut t = Tags::new();
    t.next = u32::MAX;
    t.waiting.insert(
        101,
        Waiting {
            id: 0,
            cmd: Cmd::GETNB,
            answer: Answer::Get,
        },
    );
    assert_eq!(t.fresh(), u32::MAX);
    assert_eq!(t.fresh(), 102);
}

// ---- answers ----------------------------------------------------------------------------

/// Encodes `reply` as the server would, then reads it as the session does for the request
/// of id 5 sent as `req`.
fn answered(s: &mut Session, req: Request, reply: &OpenpmixReply) -> Result<Reply, Error> {
    let (tag, _, _) = written(s, 5, req);
    let mut msg = Vec::new();
    encode_message_with(&mut msg, 0, tag, |o| reply.encode(s.cx.dialect, o)).unwrap();
    let (id, r) = s.take(tag, &msg[16..], |_| panic!("no event")).unwrap();
    assert_eq!(id, 5);
    r
}

#[test]
fn the_real_servers_get_answer_is_cached_whole() {
    let mut s = session(Dialect::V41);
    let req = Request::Get {
        proc: Proc::new(ns("testjob"), 0),
        key: Some(key("wire.test")),
        info: vec![],
    };
    let (tag, _, _) = written(&mut s, 5, req);
    let payload =
        hex("020002260210746573746a6f6200000214776972652e7465737400031a68656c6c6f2d66726f6d2d3000");
    let (id, reply) = s.take(tag, &payload, |_| panic!("no event")).unwrap();
    assert_eq!(id, 5);
    let reply = reply.unwrap();
    assert_eq!(reply.status, Status::SUCCESS);
    let ReplyBody::Get { data, jobs } = reply.body else {
        panic!("not a get answer");
    };
    assert!(jobs.is_empty());
    assert_eq!(data.len(), 1);
    assert_eq!(data[0].proc, Proc::new(ns("testjob"), 0));
    assert_eq!(
        data[0].kvs,
        vec![Kv {
            scope: Scope::GLOBAL,
            key: key("wire.test"),
            value: Value::String("hello-from-0".into()),
        }]
    );
    // Answered once: a second message on that tag is nobody's.
    assert!(s.take(tag, &payload, |_| {}).is_none());
}

#[test]
fn another_namespaces_data_brings_its_job_data() {
    let mut s = session(Dialect::V41);
    let target = Proc::new(ns("other"), 2);
    let job = two_node_job(Dialect::V41);
    let answer = OpenpmixReply::Get {
        status: Status::SUCCESS,
        data: vec![
            ProcKvals {
                proc: Proc::new(ns("other"), Rank::WILDCARD),
                kvals: job.kvals,
            },
            ProcKvals {
                proc: target.clone(),
                kvals: vec![
                    Kval::new(key(attr::LOCAL_RANK), Value::Uint16(1)),
                    Kval::new(key("pmix.extra.only.here"), Value::Bool(true)),
                    Kval::new(key("svc.addr"), Value::String("10.0.0.2".into())),
                ],
            },
        ],
    };
    let req = Request::Get {
        proc: target.clone(),
        key: Some(key("svc.addr")),
        info: vec![],
    };
    let reply = answered(&mut s, req, &answer).unwrap();
    let ReplyBody::Get { data, jobs } = reply.body else {
        panic!("not a get answer");
    };
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].nspace(), &ns("other"));
    let rank2 = pmix_wire::ProcRealm {
        rank: Rank(2),
        info: jobs[0].proc_info(Rank(2)).unwrap(),
    };
    // The rank's own job data is kept, the reserved keys only the answer had are added.
    assert_eq!(find(&rank2.info, attr::LOCAL_RANK), Some(&Value::Uint16(1)));
    assert_eq!(
        find(&rank2.info, "pmix.extra.only.here"),
        Some(&Value::Bool(true))
    );
    // This node is "vm", none of theirs: no node's keys at their job level.
    assert!(find(jobs[0].job(), attr::LOCAL_PEERS).is_none());
    assert_eq!(data.len(), 1);
    assert_eq!(data[0].proc, target);
    let keys: Vec<&str> = data[0].kvs.iter().map(|kv| kv.key.as_str()).collect();
    assert_eq!(keys, ["svc.addr"]);
}

#[test]
fn a_status_alone_answers_anything() {
    let mut s = session(Dialect::V41);
    let refused = OpenpmixReply::Status(Status::ERR_NOT_SUPPORTED);
    let reqs = [
        Request::Get {
            proc: Proc::new(ns("testjob"), 0),
            key: None,
            info: vec![],
        },
        Request::Lookup {
            keys: vec![key("k")],
            info: vec![],
        },
        Request::Spawn {
            job_info: vec![],
            apps: vec![],
        },
        Request::Connect {
            procs: vec![me()],
            info: vec![],
        },
        Request::Query { queries: vec![] },
        Request::Commit { kvs: vec![] },
    ];
    for req in reqs {
        let r = answered(&mut s, req.clone(), &refused).unwrap();
        assert_eq!(r.status, Status::ERR_NOT_SUPPORTED, "{req:?}");
    }
}

#[test]
fn answers_become_native_replies() {
    let mut s = session(Dialect::new(Codec::V3, BufferType::FullyDesc));
    // Fence: the collection is empty, whatever was asked.
    let r = answered(
        &mut s,
        Request::Fence {
            procs: vec![],
            info: vec![Info::attr(attr::COLLECT_DATA, true)],
        },
        &OpenpmixReply::Status(Status::SUCCESS),
    )
    .unwrap();
    assert_eq!(
        r,
        Reply {
            status: Status::SUCCESS,
            body: ReplyBody::Fence { data: vec![] }
        }
    );
    let found = vec![Published {
        proc: Proc::new(ns("testjob"), 0),
        key: key("svc"),
        value: Value::String("addr".into()),
    }];
    let r = answered(
        &mut s,
        Request::Lookup {
            keys: vec![key("svc")],
            info: vec![],
        },
        &OpenpmixReply::Lookup {
            status: Status::SUCCESS,
            found: found.clone(),
        },
    )
    .unwrap();
    assert_eq!(r.body, ReplyBody::Lookup { found });
    let spawn = Request::Spawn {
        job_info: vec![],
        apps: vec![],
    };
    let r = answered(
        &mut s,
        spawn.clone(),
        &OpenpmixReply::Spawn {
            status: Status::SUCCESS,
            nspace: Some(ns("child")),
            job: vec![],
        },
    )
    .unwrap();
    assert_eq!(
        r.body,
        ReplyBody::Spawn {
            nspace: ns("child")
        }
    );
    // A success naming no namespace stays one: the caller calls it a protocol error.
    let r = answered(
        &mut s,
        spawn,
        &OpenpmixReply::Spawn {
            status: Status::SUCCESS,
            nspace: None,
            job: vec![],
        },
    )
    .unwrap();
    assert_eq!(r.body, ReplyBody::None);
    let job = two_node_job(s.cx.dialect);
    let r = answered(
        &mut s,
        Request::Connect {
            procs: vec![Proc::new(ns("other"), Rank::WILDCARD)],
            info: vec![],
        },
        &OpenpmixReply::Connect {
            status: Status::SUCCESS,
            jobs: vec![job],
        },
    )
    .unwrap();
    let ReplyBody::Connect { jobs, data } = r.body else {
        panic!("not a connect answer");
    };
    assert!(data.is_empty());
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].procs.len(), 4);
    let results = vec![Info::new(key("pmix.qry.nspaces"), "a,b")];
    let r = answered(
        &mut s,
        Request::Query { queries: vec![] },
        &OpenpmixReply::Info {
            status: Status::SUCCESS,
            info: results.clone(),
        },
    )
    .unwrap();
    assert_eq!(r.body, ReplyBody::Query { results });
}

#[test]
fn an_answer_that_does_not_decode_fails_its_request_alone() {
    let mut s = session(Dialect::V41);
    let (tag, _, _) = written(&mut s, 9, Request::Commit { kvs: vec![] });
    let (id, r) = s.take(tag, &[0xff, 0xff], |_| {}).unwrap();
    assert_eq!(id, 9);
    assert!(matches!(r, Err(Error::Protocol(_))), "{r:?}");
}

#[test]
fn notifications_become_events() {
    let mut s = session(Dialect::V41);
    let n = Notification {
        status: Status::ERR_PROC_TERM_WO_SYNC,
        source: Proc::new(ns("pmix-server"), 0),
        info: vec![Info::attr(attr::EVENT_TEXT_MESSAGE, "gone")],
        range: None,
    };
    let mut payload = Vec::new();
    n.encode(Dialect::V41, &mut payload).unwrap();
    let got = AtomicU32::new(0);
    let none = s.take(TAG_NOTIFY, &payload, |o| {
        let crate::core::Output::Event(ev) = o else {
            panic!("not an event: {o:?}")
        };
        assert_eq!(ev.code, Status::ERR_PROC_TERM_WO_SYNC);
        assert_eq!(ev.source, Proc::new(ns("pmix-server"), 0));
        assert_eq!(ev.range, DataRange::UNDEF);
        assert_eq!(ev.info, n.info);
        got.fetch_add(1, Ordering::Relaxed);
    });
    assert!(none.is_none());
    assert_eq!(got.load(Ordering::Relaxed), 1);
    // Heartbeats are nobody's.
    assert!(s.take(1, &[], |_| panic!("no event")).is_none());
}
