//! Golden byte vectors: a few messages encoded byte for byte as recorded in
//! `tests/golden/*.hex`, so that an accidental change of the wire format fails here.
//!
//! After an intended format change (which also needs a new `PROTOCOL_VERSION`), regenerate
//! the vectors, and the fuzz corpus seeds made from them, with
//!
//! ```text
//! PMIX_BLESS=1 cargo test -p pmix-wire --test golden
//! ```
//!
//! and review the diff. Without the variable a difference fails the test.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};

use pmix_types::{DataArray, DataType, Info, Key, Nspace, Proc, Rank, Scope, Status, Value};
use pmix_wire::{
    ClientMsg, Decoded, FrameDecoder, Hello, JobData, JobImage, JobSpec, Kv, MAGIC, NodeMap,
    PROTOCOL_VERSION, ProcKvs, ProcRealm, Realm, Reply, ReplyBody, Request, ServerMsg, Welcome,
    WelcomeJob, decode_body, decode_hello, encode_frame,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

fn key(s: &str) -> Key {
    Key::new(s).unwrap()
}

fn proc_(ns: &str, rank: u32) -> Proc {
    Proc::new(Nspace::new(ns).unwrap(), rank)
}

fn hello() -> Hello {
    Hello {
        magic: MAGIC.to_owned(),
        version: PROTOCOL_VERSION,
        nspace: Nspace::new("job-1").unwrap(),
        rank: Rank(3),
        secret: (0..16).collect(),
        pid: 4242,
    }
}

fn commit() -> ClientMsg {
    ClientMsg {
        id: 7,
        req: Request::Commit {
            kvs: vec![
                Kv {
                    scope: Scope::GLOBAL,
                    key: key("hostname"),
                    value: Value::String("node01".into()),
                },
                Kv {
                    scope: Scope::LOCAL,
                    key: key("port"),
                    value: Value::Uint16(5000),
                },
                Kv {
                    scope: Scope::REMOTE,
                    key: key("ratio"),
                    value: Value::Double(0.5),
                },
                Kv {
                    scope: Scope::GLOBAL,
                    key: key("blob"),
                    value: Value::ByteObject(vec![1, 2, 3]),
                },
            ],
        },
    }
}

fn fence_reply() -> ServerMsg {
    let kvs = |r: u32| ProcKvs {
        proc: proc_("job-1", r),
        kvs: vec![
            Kv {
                scope: Scope::GLOBAL,
                key: key("addr"),
                value: Value::String(format!("10.0.0.{r}")),
            },
            Kv {
                scope: Scope::GLOBAL,
                key: key("epoch"),
                value: Value::Int64(-(i64::from(r) + 1)),
            },
        ],
    };
    ServerMsg::Reply {
        id: 8,
        reply: Reply {
            status: Status::SUCCESS,
            body: ReplyBody::Fence {
                data: vec![kvs(0), kvs(1)],
            },
        },
    }
}

fn job_data() -> JobData {
    let info = |k: &str, v: Value| Info::new(key(k), v);
    JobData {
        nspace: Nspace::new("job-2").unwrap(),
        session: vec![info("pmix.univ.size", Value::Uint32(4))],
        job: vec![
            info("pmix.job.size", Value::Uint32(2)),
            info("pmix.nmap", Value::Regex(b"pmix[node[2:1-2]]".to_vec())),
            info(
                "pmix.dbg.ready",
                Value::from(
                    DataArray::new(DataType::UINT32, vec![Value::Uint32(0), Value::Uint32(1)])
                        .unwrap(),
                ),
            )
            .required(),
        ],
        apps: vec![Realm {
            id: 0,
            info: vec![info("pmix.appnum", Value::Uint32(0))],
        }],
        nodes: vec![Realm {
            id: 1,
            info: vec![info("pmix.hname", Value::String("node1".into()))],
        }],
        procs: vec![
            ProcRealm {
                rank: Rank(0),
                info: vec![info("pmix.lrank", Value::Uint16(0))],
            },
            ProcRealm {
                rank: Rank(1),
                info: vec![info("pmix.lrank", Value::Uint16(1))],
            },
        ],
    }
}

fn get_reply() -> ServerMsg {
    ServerMsg::Reply {
        id: 9,
        reply: Reply {
            status: Status::SUCCESS,
            body: ReplyBody::Get {
                data: vec![ProcKvs {
                    proc: proc_("job-2", 1),
                    kvs: vec![Kv {
                        scope: Scope::GLOBAL,
                        key: key("addr"),
                        value: Value::String("10.0.1.1".into()),
                    }],
                }],
                jobs: vec![JobImage::from_job_data(&job_data()).unwrap()],
            },
        },
    }
}

fn welcome_refused() -> Welcome {
    Welcome::Refused {
        status: Status::ERR_NOT_SUPPORTED,
        version: PROTOCOL_VERSION,
        reason: "client speaks protocol version 2".into(),
    }
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/wire_decode")
}

fn blessing() -> bool {
    std::env::var_os("PMIX_BLESS").is_some_and(|v| v == "1")
}

fn to_hex(bytes: &[u8]) -> String {
    let mut s = String::new();
    for line in bytes.chunks(32) {
        for b in line {
            s.push_str(&format!("{b:02x}"));
        }
        s.push('\n');
    }
    s
}

fn from_hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .flat_map(|l| l.bytes())
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    assert!(digits.len() % 2 == 0, "odd number of hex digits");
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

/// Compares the frame of `msg` with the recorded one (or records it when blessing), then
/// decodes the recorded bytes and expects `msg` back.
fn check<T>(name: &str, msg: &T)
where
    T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let mut frame = Vec::new();
    encode_frame(msg, &mut frame).unwrap();
    let path = golden_dir().join(format!("{name}.hex"));
    if blessing() {
        let text = format!(
            "# {name}: one frame (length prefix + MessagePack body), 32 bytes a line.\n\
             # Regenerate: PMIX_BLESS=1 cargo test -p pmix-wire --test golden\n{}",
            to_hex(&frame)
        );
        std::fs::create_dir_all(golden_dir()).unwrap();
        std::fs::write(&path, text).unwrap();
        std::fs::write(corpus_dir().join(format!("golden-{name}")), &frame).unwrap();
    }
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; record it with PMIX_BLESS=1 cargo test -p pmix-wire --test golden",
            path.display()
        )
    });
    let golden = from_hex(&text);
    if golden != frame {
        let at = golden
            .iter()
            .zip(&frame)
            .position(|(a, b)| a != b)
            .unwrap_or(golden.len().min(frame.len()));
        panic!(
            "{name}: the encoding changed (first difference at byte {at}; recorded {} bytes, \
             now {}).\nrecorded:\n{}now:\n{}If the change is intended, bump PROTOCOL_VERSION \
             and re-record with PMIX_BLESS=1.",
            golden.len(),
            frame.len(),
            to_hex(&golden),
            to_hex(&frame)
        );
    }
    match FrameDecoder::default().decode(&golden).unwrap() {
        Decoded::Frame { body, consumed } => {
            assert_eq!(consumed, golden.len());
            assert_eq!(&decode_body::<T>(body).unwrap(), msg, "{name}");
        }
        Decoded::NeedMore(n) => panic!("{name}: recorded frame is {n} bytes short"),
    }
}

#[test]
fn hello_is_unchanged() {
    check("hello", &hello());
    // Independent of the recording: what decode_hello relies on, a 6-element array opening
    // with the magic string and the version.
    let mut frame = Vec::new();
    encode_frame(&hello(), &mut frame).unwrap();
    assert_eq!(&frame[4..12], b"\x96\xa6PMIXRS");
    assert_eq!(frame[12], 0x02);
    assert_eq!(decode_hello(&frame[4..]).unwrap(), hello());
}

#[test]
fn commit_is_unchanged() {
    check("commit", &commit());
}

#[test]
fn fence_reply_is_unchanged() {
    check("fence_reply", &fence_reply());
}

#[test]
fn get_reply_with_job_data_is_unchanged() {
    check("get_reply", &get_reply());
}

#[test]
fn welcome_refused_is_unchanged() {
    check("welcome_refused", &welcome_refused());
}

/// A registration's image: two nodes of the map, three ranks, one of them with a value the host
/// gave, one app. Pins the image layout (`job_image::layout`) as well as the welcome.
fn welcome_accepted() -> Welcome {
    let info = |k: &str, v: Value| Info::new(key(k), v);
    let spec = JobSpec {
        nspace: Nspace::new("job-3").unwrap(),
        session: vec![info("pmix.univ.size", Value::Uint32(3))],
        job: vec![info("pmix.job.size", Value::Uint32(3))],
        apps: vec![Realm {
            id: 0,
            info: vec![info("pmix.appnum", Value::Uint32(0))],
        }],
        app_of_rank: vec![(0, Rank(0))],
        size: 3,
        offset: 0,
        spawned: false,
        maps: Some(NodeMap {
            names: vec!["n0".into(), "n1".into()],
            ppn: vec![vec![Rank(0), Rank(1)], vec![Rank(2)]],
        }),
        given_nodes: vec![],
        given_procs: [(
            Rank(2),
            vec![info("pmix.cpuset", Value::String("core:2".into()))],
        )]
        .into_iter()
        .collect(),
    };
    Welcome::Accepted {
        version: PROTOCOL_VERSION,
        job: WelcomeJob::Inline(JobImage::build(&spec).unwrap()),
    }
}

#[test]
fn welcome_accepted_is_unchanged() {
    check("welcome_accepted", &welcome_accepted());
}
