//! Golden vectors: the bytes real OpenPMIx 4.2.2 servers and clients (libpmix C clients, Open
//! MPI 4.1, python3-pmix; NON_DESC and FULLY_DESC; the v41 and v4 codecs) exchanged, decoded
//! and checked field by field, and encoded again to the same bytes where the encoding is
//! canonical.

#![allow(clippy::unwrap_used)]

mod openpmix_common;

use openpmix_common::{Conn, all, load};
use pmix_types::{DataType, InfoFlags, Key, Nspace, Proc, Rank, Scope, Status, Value};
use pmix_wire::Published;
use pmix_wire::openpmix::{
    BufferType, ClientHandshake, Cmd, Codec, CommitPart, Dialect, Identity, Kval, PROC_BLOB,
    Packer, ProcKvals, Reply, Request, ServerReply, Unpacker, decode_rank_blob, encode_message,
    native_credential_ids, peek_cmd, proc_blob_kval,
};

fn dialect_of(c: &Conn) -> Dialect {
    ClientHandshake::decode(&c.handshake_body)
        .unwrap()
        .dialect()
        .unwrap()
}

#[test]
fn every_handshake_decodes_and_encodes_to_the_same_bytes() {
    let mut seen = 0;
    for (name, conns) in all() {
        for c in &conns {
            let hs = ClientHandshake::decode(&c.handshake_body).unwrap();
            assert_eq!(hs.psec, "native", "{name}");
            assert_eq!(native_credential_ids(&hs.credential), Some((0, 0)));
            assert_eq!(hs.version, "4.2.2rc2");
            assert!(hs.stray_byte && hs.info.is_empty());
            let Identity::Client(p) = &hs.identity else {
                panic!("{name}: not a simple client")
            };
            assert_eq!(p.nspace.as_str(), "testjob");
            assert!(p.rank.0 < 2);
            let (bfrops, buffer, gds) = match name {
                "cap1" => ("v41", BufferType::NonDesc, "ds21"),
                "cap5" => ("v41", BufferType::FullyDesc, "hash"),
                "cap6" => ("v4", BufferType::NonDesc, "hash"),
                _ => ("v41", BufferType::NonDesc, "hash"),
            };
            assert_eq!(
                (hs.bfrops.as_str(), hs.buffer_type, hs.gds.as_str()),
                (bfrops, buffer, gds)
            );
            assert_eq!(hs.dialect().unwrap().codec, Codec::V41);

            let mut again = Vec::new();
            hs.encode(&mut again).unwrap();
            assert_eq!(again, c.handshake, "{name} connection {}", c.id);
            assert_eq!(
                ClientHandshake::decode_message(&c.c2s).unwrap().unwrap(),
                (hs, c.handshake.len())
            );

            let (reply, used) = ServerReply::decode(&c.s2c).unwrap().unwrap();
            assert_eq!(used, 8);
            assert_eq!(reply.status, Status::SUCCESS);
            let mut again = Vec::new();
            reply.encode(&mut again);
            assert_eq!(again, c.reply);
            seen += 1;
        }
    }
    assert_eq!(seen, 12);
}

#[test]
fn the_documented_handshake_bytes() {
    let c = &load("cap2")[0];
    let want = "ffffffffffffffff3400000000000000\
                6e617469766500\
                00000008\
                0000000000000000\
                00\
                746573746a6f620000000001\
                342e322e3272633200\
                7634310001686173680000";
    let hex: String = c.handshake.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, want);
    // Peer indexes: the first connection got 0, the second 1.
    let conns = load("cap2");
    assert_eq!(conns[0].reply, [0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(conns[1].reply, [0, 0, 0, 0, 0, 0, 0, 1]);
    assert_eq!(
        ServerReply::decode(&conns[1].reply).unwrap().unwrap().0,
        ServerReply::accepted(1)
    );
}

#[test]
fn framing_reproduces_every_stream() {
    for (name, conns) in all() {
        for c in &conns {
            let mut c2s = c.handshake.clone();
            for m in &c.requests {
                let mut one = Vec::new();
                encode_message(&mut one, m.header.pindex, m.header.tag, &m.payload).unwrap();
                assert_eq!(one, m.raw);
                c2s.extend(one);
            }
            assert_eq!(c2s, c.c2s, "{name} connection {} c2s", c.id);
            let mut s2c = c.reply.clone();
            for m in &c.replies {
                s2c.extend(&m.raw);
            }
            assert_eq!(s2c, c.s2c, "{name} connection {} s2c", c.id);
            // Clients use their peer index; requests start at tag 101.
            let index = ServerReply::decode(&c.reply)
                .unwrap()
                .unwrap()
                .0
                .peer_index
                .unwrap();
            assert!(c.requests.iter().all(|m| m.header.pindex as u32 == index));
            assert_eq!(c.requests[0].header.tag, 101);
        }
    }
}

/// The job data of a `REQ` reply, read item by item: a string, then KVAL packs to the end.
fn job_kvals(payload: &[u8], d: Dialect) -> (String, Vec<Kval>) {
    let mut u = Unpacker::new(payload, d);
    let nspace = u.unpack_one::<String>().unwrap();
    let mut kvals = Vec::new();
    while !u.is_empty() {
        kvals.extend(u.unpack::<Kval>().unwrap());
    }
    (nspace, kvals)
}

fn find<'a>(kvals: &'a [Kval], key: &str) -> &'a Value {
    &kvals.iter().find(|k| k.key.as_str() == key).unwrap().value
}

#[test]
fn job_data_values_decode_and_encode_to_the_same_bytes() {
    for (name, conns) in all() {
        for c in &conns {
            let d = dialect_of(c);
            let req = &c.replies[0];
            assert_eq!(req.header.tag, 101);
            let (nspace, kvals) = job_kvals(&req.payload, d);
            assert_eq!(nspace, "testjob");
            if name == "cap1" {
                // ds21 clients get only the nspace and the info arrays.
                assert!(kvals.iter().all(|k| k.key.as_str() != "pmix.job.size"));
            } else {
                assert_eq!(find(&kvals, "pmix.job.size"), &Value::Uint32(2), "{name}");
                assert_eq!(
                    find(&kvals, "pmix.nspace"),
                    &Value::String("testjob".into())
                );
            }
            // Re-encoded the way the reference packs them, one KVAL a pack.
            let mut again = Vec::new();
            let mut p = Packer::new(&mut again, d);
            p.pack_one(&nspace).unwrap();
            for k in &kvals {
                p.pack_one(k).unwrap();
            }
            assert_eq!(again, req.payload, "{name} connection {}", c.id);
        }
    }
}

#[test]
fn job_data_arrays_and_rank_blobs() {
    let c = &load("cap2")[1];
    let d = dialect_of(c);
    let (_, kvals) = job_kvals(&c.replies[0].payload, d);
    let Value::DataArray(ssn) = find(&kvals, "pmix.ssn.arr") else {
        panic!()
    };
    assert_eq!(ssn.elem_type(), DataType::INFO);
    let infos: Vec<_> = ssn.infos().collect();
    assert_eq!(infos[0].key.as_str(), "pmix.session.id");
    assert_eq!(infos[0].value, Value::Uint32(u32::MAX));
    assert_eq!(infos[1].value, Value::Uint32(2));
    // The server marks the last element of arrays it builds.
    assert_eq!(infos[2].flags, InfoFlags::ARRAY_END);
    assert_eq!(infos[1].flags, InfoFlags::NONE);
    let Value::DataArray(node) = find(&kvals, "pmix.node.arr") else {
        panic!()
    };
    let lldr = node
        .infos()
        .find(|i| i.key.as_str() == "pmix.lldr")
        .unwrap();
    assert_eq!(lldr.value, Value::Rank(Rank(0)));
    let lpeers = node
        .infos()
        .find(|i| i.key.as_str() == "pmix.lpeers")
        .unwrap();
    assert_eq!(lpeers.value, Value::String("0,1".into()));

    let blobs: Vec<_> = kvals
        .iter()
        .filter(|k| k.key.as_str() == "pmix.pblob")
        .collect();
    assert_eq!(blobs.len(), 2);
    for (rank, blob) in blobs.iter().enumerate() {
        let Value::ByteObject(bytes) = &blob.value else {
            panic!()
        };
        let mut u = Unpacker::new(bytes, d);
        assert_eq!(u.unpack_one::<Rank>().unwrap(), Rank(rank as u32));
        let mut inner = Vec::new();
        while !u.is_empty() {
            inner.extend(u.unpack::<Kval>().unwrap());
        }
        assert_eq!(find(&inner, "pmix.lrank"), &Value::Uint16(rank as u16));
        assert_eq!(find(&inner, "pmix.grank"), &Value::Rank(Rank(rank as u32)));
        assert_eq!(find(&inner, "pmix.hname"), &Value::String("vm".into()));
    }
}

#[test]
fn the_documented_session_bytes() {
    let c = &load("cap2")[0];
    let d = Dialect::V41;
    // Commit: SCOPE LOCAL then a BUFFER of one KVAL "wire.test" = "hello-from-1".
    let commit = &c.requests[1].payload;
    let mut u = Unpacker::new(commit, d);
    u.unpack_one::<pmix_wire::openpmix::Cmd>().unwrap();
    assert_eq!(
        u.unpack_one::<pmix_types::Scope>().unwrap(),
        pmix_types::Scope::LOCAL
    );
    let buf = u.unpack_one::<pmix_wire::openpmix::Buffer>().unwrap();
    assert_eq!(buf.buffer_type, BufferType::NonDesc);
    let kv = Unpacker::new(&buf.bytes, d).unpack_one::<Kval>().unwrap();
    assert_eq!(
        kv,
        Kval::new(Key::new("wire.test").unwrap(), "hello-from-1")
    );
    // Fence: a wildcard proc of the job.
    let fence = &c.requests[2].payload;
    let mut u = Unpacker::new(fence, d);
    u.unpack_one::<pmix_wire::openpmix::Cmd>().unwrap();
    assert_eq!(u.unpack_one::<pmix_wire::openpmix::Size>().unwrap().0, 1);
    assert_eq!(
        u.unpack_one::<Proc>().unwrap(),
        Proc::new(Nspace::new("testjob").unwrap(), Rank::WILDCARD)
    );
}

/// Every request and reply of a connection, decoded, with the request each reply answers.
struct Decoded {
    requests: Vec<(u32, Request)>,
    replies: Vec<(u32, Cmd, Reply)>,
}

/// Decodes every message of `c` and checks that each encodes back to the same bytes.
fn decode_all(name: &str, c: &Conn) -> Decoded {
    let d = dialect_of(c);
    let mut cmds = std::collections::HashMap::new();
    let mut requests = Vec::new();
    for m in &c.requests {
        let req = Request::decode(&m.payload, d)
            .unwrap_or_else(|e| panic!("{name} c{} tag {}: {e}", c.id, m.header.tag));
        assert_eq!(peek_cmd(&m.payload, d).unwrap(), req.cmd());
        let mut again = Vec::new();
        req.encode(d, &mut again).unwrap();
        assert_eq!(again, m.payload, "{name} c{} request {:?}", c.id, req.cmd());
        cmds.insert(m.header.tag, req.cmd());
        requests.push((m.header.tag, req));
    }
    let mut replies = Vec::new();
    for m in &c.replies {
        let cmd = cmds[&m.header.tag];
        assert!(cmd.expects_reply());
        let reply = Reply::decode(cmd, &m.payload, d)
            .unwrap_or_else(|e| panic!("{name} c{} reply to {cmd:?}: {e}", c.id));
        let mut again = Vec::new();
        reply.encode(d, &mut again).unwrap();
        assert_eq!(again, m.payload, "{name} c{} reply to {cmd:?}", c.id);
        replies.push((m.header.tag, cmd, reply));
    }
    // Every request but DEREGEVENTS got exactly one reply.
    let answered: Vec<u32> = replies.iter().map(|r| r.0).collect();
    for (tag, req) in &requests {
        let n = answered.iter().filter(|t| *t == tag).count();
        assert_eq!(
            n,
            usize::from(req.cmd().expects_reply()),
            "{name} tag {tag}"
        );
    }
    Decoded { requests, replies }
}

fn k(s: &str) -> Key {
    Key::new(s).unwrap()
}

fn testjob(rank: Rank) -> Proc {
    Proc::new(Nspace::new("testjob").unwrap(), rank)
}

#[test]
fn every_message_decodes_and_encodes_to_the_same_bytes() {
    let mut counts = std::collections::BTreeMap::new();
    for (name, conns) in all() {
        for c in &conns {
            let d = decode_all(name, c);
            for (_, r) in &d.requests {
                *counts.entry(format!("{:?}", r.cmd())).or_insert(0) += 1;
            }
            // No request needed the catch-all.
            assert!(
                d.requests
                    .iter()
                    .all(|(_, r)| !matches!(r, Request::Other { .. }))
            );
        }
    }
    let names: Vec<_> = counts.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "COMMIT",
            "DEREGEVENTS",
            "FENCENB",
            "FINALIZE",
            "GETNB",
            "JOB_CONTROL",
            "LOOKUPNB",
            "PUBLISHNB",
            "REGEVENTS",
            "REQ",
            "UNPUBLISHNB"
        ]
    );
}

#[test]
fn libpmix_session_contents() {
    for name in ["cap2", "cap5", "cap6"] {
        let conns = load(name);
        for c in &conns {
            let me = ClientHandshake::decode(&c.handshake_body).unwrap();
            let me = me.identity.proc().unwrap().rank;
            let peer = Rank(1 - me.0);
            let d = decode_all(name, c);
            let reqs: Vec<&Request> = d.requests.iter().map(|(_, r)| r).collect();
            assert_eq!(reqs[0], &Request::Req);
            let Request::Commit { parts } = reqs[1] else {
                panic!("{:?}", reqs[1])
            };
            let hello = Kval::new(k("wire.test"), format!("hello-from-{}", me.0));
            assert_eq!(
                parts,
                &[
                    CommitPart {
                        scope: Scope::LOCAL,
                        kvals: vec![hello.clone()]
                    },
                    CommitPart {
                        scope: Scope::REMOTE,
                        kvals: vec![hello]
                    },
                ]
            );
            let Request::Fence { procs, info } = reqs[2] else {
                panic!()
            };
            assert_eq!(procs, &[testjob(Rank::WILDCARD)]);
            assert_eq!(info.len(), 1);
            assert_eq!(info[0].key.as_str(), "pmix.collect");
            assert_eq!(info[0].value, Value::Bool(true));
            assert_eq!(
                reqs[3],
                &Request::Get {
                    proc: testjob(peer),
                    info: vec![],
                    key: Some(k("wire.test"))
                }
            );
            assert_eq!(reqs.last().unwrap(), &&Request::Finalize);

            let (_, _, Reply::JobInfo(job)) = &d.replies[0] else {
                panic!()
            };
            assert_eq!(job.nspace.as_str(), "testjob");
            assert_eq!(find(&job.kvals, "pmix.job.size"), &Value::Uint32(2));
            let blobs: Vec<_> = job
                .kvals
                .iter()
                .filter(|k| k.key.as_str() == PROC_BLOB)
                .map(|k| decode_rank_blob(k.value.as_bytes().unwrap(), dialect_of(c)).unwrap())
                .collect();
            assert_eq!(
                blobs.iter().map(|b| b.0).collect::<Vec<_>>(),
                [Rank(0), Rank(1)]
            );
            // The rank blob is rebuilt identically from its parts.
            for (rank, kvals) in &blobs {
                let kv = proc_blob_kval(*rank, kvals, dialect_of(c)).unwrap();
                assert!(job.kvals.contains(&kv));
            }

            let get = d.replies.iter().find(|r| r.1 == Cmd::GETNB).unwrap();
            assert_eq!(
                get.2,
                Reply::Get {
                    status: Status::SUCCESS,
                    data: vec![ProcKvals {
                        proc: testjob(peer),
                        kvals: vec![Kval::new(k("wire.test"), format!("hello-from-{}", peer.0))],
                    }],
                }
            );
            for (_, cmd, r) in &d.replies {
                if *cmd != Cmd::REQ && *cmd != Cmd::GETNB && *cmd != Cmd::LOOKUPNB {
                    assert_eq!(r, &Reply::Status(Status::SUCCESS), "{cmd:?}");
                }
            }
            if me == Rank(0) {
                let publish = reqs.iter().find(|r| r.cmd() == Cmd::PUBLISHNB).unwrap();
                let Request::Publish { uid: 0, info } = publish else {
                    panic!()
                };
                assert_eq!(info[0].key.as_str(), "wire.pub");
                assert!(reqs.contains(&&Request::Lookup {
                    uid: 0,
                    keys: vec![k("wire.pub")],
                    info: vec![]
                }));
                assert!(reqs.contains(&&Request::Unpublish {
                    uid: 0,
                    keys: vec![k("wire.pub")],
                    info: vec![]
                }));
                let lookup = d.replies.iter().find(|r| r.1 == Cmd::LOOKUPNB).unwrap();
                assert_eq!(
                    lookup.2,
                    Reply::Lookup {
                        status: Status::SUCCESS,
                        found: vec![Published {
                            proc: testjob(Rank(0)),
                            key: k("wire.pub"),
                            value: Value::String("published-value".into()),
                        }],
                    }
                );
            }
        }
    }
}

#[test]
fn open_mpi_session_contents() {
    for c in &load("cap3") {
        let d = decode_all("cap3", c);
        let reqs: Vec<&Request> = d.requests.iter().map(|(_, r)| r).collect();
        let me = ClientHandshake::decode(&c.handshake_body)
            .unwrap()
            .identity
            .proc()
            .unwrap()
            .clone();
        // Cleanup registrations: the namespace directory, recursively, then the vader segment.
        let jc: Vec<_> = reqs
            .iter()
            .filter(|r| r.cmd() == Cmd::JOB_CONTROL)
            .collect();
        let Request::JobControl {
            targets,
            directives,
        } = jc[0]
        else {
            panic!()
        };
        assert_eq!(targets, std::slice::from_ref(&me));
        assert_eq!(directives[0].key.as_str(), "pmix.reg.cleanupdir");
        assert_eq!(directives[1].key.as_str(), "pmix.clnup.recurse");
        assert_eq!(directives[1].value, Value::Bool(true));
        let Request::JobControl { directives, .. } = jc[1] else {
            panic!()
        };
        assert_eq!(directives[0].key.as_str(), "pmix.reg.cleanup");
        assert!(
            directives[0]
                .value
                .as_str()
                .unwrap()
                .starts_with("/dev/shm/vader_segment")
        );
        // The real server refused job control, with a status alone.
        let refusals: Vec<_> = d
            .replies
            .iter()
            .filter(|r| r.1 == Cmd::JOB_CONTROL)
            .collect();
        assert!(refusals.iter().all(|r| r.2
            == Reply::Info {
                status: Status::ERR_NOT_SUPPORTED,
                info: vec![]
            }));
        // Open MPI's model-declared event handler, then its deregistrations.
        assert!(reqs.contains(&&Request::RegisterEvents {
            codes: vec![Status::MODEL_DECLARED],
            info: vec![]
        }));
        assert_eq!(
            reqs.iter().filter(|r| r.cmd() == Cmd::DEREGEVENTS).count(),
            4
        );
        // The job-level hwloc lookup is immediate; the server had nothing.
        let get = d.requests.iter().find(|(_, r)| matches!(r, Request::Get { key: Some(k), .. } if k.as_str() == "pmix.hwlocxml2")).unwrap();
        let Request::Get { proc, info, .. } = &get.1 else {
            panic!()
        };
        assert_eq!(proc.rank, Rank::WILDCARD);
        assert_eq!(info[0].key.as_str(), "pmix.immediate");
        assert_eq!(info[0].flags, InfoFlags::ARRAY_END);
        let answer = d.replies.iter().find(|r| r.0 == get.0).unwrap();
        assert_eq!(
            answer.2,
            Reply::Get {
                status: Status::SUCCESS,
                data: vec![]
            }
        );
        // The modex: the vader endpoint blob, put with scope LOCAL and REMOTE.
        let Request::Commit { parts } = reqs.iter().find(|r| r.cmd() == Cmd::COMMIT).unwrap()
        else {
            panic!()
        };
        let vader = parts[0]
            .kvals
            .iter()
            .find(|k| k.key.as_str() == "btl.vader.4.1")
            .unwrap();
        assert_eq!(vader.value.as_bytes().unwrap().len(), 4152);
        // A peer's modex data comes back in one GETNB reply.
        let modex = d
            .replies
            .iter()
            .find(|r| matches!(&r.2, Reply::Get { data, .. } if !data.is_empty()))
            .unwrap();
        let Reply::Get { data, .. } = &modex.2 else {
            panic!()
        };
        assert_eq!(data[0].proc.nspace.as_str(), "testjob");
        assert!(
            data[0]
                .kvals
                .iter()
                .any(|k| k.key.as_str() == "btl.vader.4.1")
        );
    }
}

#[test]
fn python_session_contents() {
    for c in &load("cap4") {
        let d = decode_all("cap4", c);
        let cmds: Vec<Cmd> = d.requests.iter().map(|(_, r)| r.cmd()).collect();
        assert_eq!(
            cmds,
            [
                Cmd::REQ,
                Cmd::COMMIT,
                Cmd::FENCENB,
                Cmd::GETNB,
                Cmd::FINALIZE
            ]
        );
    }
}

#[test]
fn the_v4_codec_sends_the_same_bytes_as_v41() {
    let (v4, v41) = (load("cap6"), load("cap2"));
    for (a, b) in v4.iter().zip(&v41) {
        // Requests other than REQ and the job data (which holds a temporary directory name)
        // are byte for byte the same.
        for (x, y) in a.requests.iter().zip(&b.requests).skip(1) {
            assert_eq!(x.payload, y.payload);
        }
    }
}
