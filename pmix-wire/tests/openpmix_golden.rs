//! Golden vectors: the bytes real OpenPMIx 4.2.2 servers and clients (libpmix C clients, Open
//! MPI 4.1, python3-pmix; NON_DESC and FULLY_DESC; the v41 and v4 codecs) exchanged, decoded
//! and checked field by field, and encoded again to the same bytes where the encoding is
//! canonical.

#![allow(clippy::unwrap_used)]

mod openpmix_common;

use openpmix_common::{Conn, all, load};
use pmix_types::{DataType, InfoFlags, Key, Nspace, Proc, Rank, Status, Value};
use pmix_wire::openpmix::{
    BufferType, ClientHandshake, Codec, Dialect, Identity, Kval, Packer, ServerReply, Unpacker,
    encode_message, native_credential_ids,
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
