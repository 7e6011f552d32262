//! Every value and every message survives encode -> frame split -> decode, whether the bytes
//! arrive at once, one by one, or in arbitrary chunks; and the frames a server builds without
//! the owned message (a borrowed welcome, a reply shared by several requests) are the bytes of
//! the plain encoding.

#![allow(clippy::unwrap_used)]

mod strategies;

use std::collections::BTreeSet;
use std::fmt::Debug;

use pmix_types::{Info, Key, Nspace, Proc, Scope, Status, Value};
use pmix_wire::{
    Decoded, Error, FrameDecoder, FrameReader, HEADER_LEN, Hello, JobImage, Kv, MAGIC,
    PROTOCOL_VERSION, ProcKvs, Reply, ReplyBody, ServerMsg, SharedReply, Welcome, WelcomeJob,
    decode_body, decode_hello, decode_kvs, encode_frame, encode_welcome, peek_fence_reply,
};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use serde::Serialize;
use serde::de::DeserializeOwned;
use strategies::*;

/// Encodes `msg`, then checks that every way of receiving the frame gives it back.
fn check_round_trip<T>(msg: &T, chunks: &[usize]) -> Result<(), TestCaseError>
where
    T: Serialize + DeserializeOwned + PartialEq + Debug,
{
    let mut frame = Vec::new();
    encode_frame(msg, &mut frame).unwrap();
    let total = frame.len();
    let body_len = u32::from_be_bytes(frame[..HEADER_LEN].try_into().unwrap()) as usize;
    prop_assert_eq!(body_len + HEADER_LEN, total);

    let decoder = FrameDecoder::default();
    match decoder.decode(&frame).unwrap() {
        Decoded::Frame { body, consumed } => {
            prop_assert_eq!(consumed, total);
            prop_assert_eq!(&decode_body::<T>(body).unwrap(), msg);
        }
        other => prop_assert!(false, "whole frame not decoded: {:?}", other),
    }

    // Byte by byte: every strict prefix asks for exactly what is missing (only the rest of the
    // header while that is incomplete, since the body length is not known yet).
    for have in 0..total {
        let want = if have < HEADER_LEN {
            HEADER_LEN - have
        } else {
            total - have
        };
        prop_assert_eq!(
            decoder.decode(&frame[..have]).unwrap(),
            Decoded::NeedMore(want),
            "prefix of {} bytes",
            have
        );
    }

    // Two frames back to back, received in chunks: a reader that reads exactly what NeedMore
    // asks for never reads into the next frame, and FrameReader yields both.
    let mut stream = frame.clone();
    stream.extend_from_slice(&frame);
    let mut reader = FrameReader::default();
    let mut got = Vec::new();
    let mut sent = 0;
    let mut chunk = chunks.iter().cycle();
    while sent < stream.len() {
        let n = (*chunk.next().unwrap()).min(stream.len() - sent);
        reader.extend(&stream[sent..sent + n]);
        sent += n;
        while let Some(body) = reader.next_frame().unwrap() {
            got.push(decode_body::<T>(body).unwrap());
        }
        prop_assert_eq!(reader.buffered(), sent - got.len() * total);
        if got.len() < 2 {
            prop_assert!(reader.needed() > 0);
            prop_assert!(reader.needed() <= (got.len() + 1) * total - sent);
        }
    }
    prop_assert_eq!(got.len(), 2);
    prop_assert_eq!(&got[0], msg);
    prop_assert_eq!(&got[1], msg);
    prop_assert_eq!(reader.buffered(), 0);

    // The same stream read straight from a source that hands out the chunks.
    let mut src = Chunked {
        data: &stream,
        chunks: chunks.to_vec(),
        next: 0,
    };
    let mut reader = FrameReader::default();
    let mut got = Vec::new();
    while reader.read_from(&mut src).unwrap() > 0 {
        while let Some(body) = reader.next_frame().unwrap() {
            got.push(decode_body::<T>(body).unwrap());
        }
    }
    prop_assert_eq!(got.len(), 2);
    prop_assert_eq!(&got[1], msg);
    prop_assert_eq!(reader.buffered(), 0);
    Ok(())
}

/// A `Read` that hands out `data` in pieces of the given sizes, in turn.
struct Chunked<'a> {
    data: &'a [u8],
    chunks: Vec<usize>,
    next: usize,
}

impl std::io::Read for Chunked<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let want = self.chunks[self.next % self.chunks.len()];
        self.next += 1;
        let n = want.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

#[test]
fn read_from_grows_for_big_frames_and_gives_the_room_back() {
    let big = vec![7u8; 300_000];
    let mut frame = Vec::new();
    encode_frame(&serde_bytes::ByteBuf::from(big.clone()), &mut frame).unwrap();
    let mut src: &[u8] = &frame;
    let mut reader = FrameReader::default();
    let mut got = None;
    while reader.read_from(&mut src).unwrap() > 0 {
        if let Some(body) = reader.next_frame().unwrap() {
            got = Some(
                decode_body::<serde_bytes::ByteBuf>(body)
                    .unwrap()
                    .into_vec(),
            );
        }
    }
    assert_eq!(got.as_deref(), Some(&big[..]));
    assert_eq!(reader.buffered(), 0);
}

proptest! {
    /// A peer that announces a large frame and then sends little makes the reader hold about
    /// what arrived, never what was announced.
    #[test]
    fn an_announced_length_never_sizes_the_buffer(
        announced in 1u32..=(256 << 20),
        sent in 0usize..300_000,
        chunks in vec(512usize..70_000, 1..6),
    ) {
        let mut stream = announced.to_be_bytes().to_vec();
        stream.resize(4 + sent.min(announced as usize), 0xa5);
        let mut src = Chunked { data: &stream, chunks, next: 0 };
        let mut reader = FrameReader::new(pmix_wire::FrameDecoder::new(256 << 20));
        let mut received = 0;
        loop {
            let n = reader.read_from(&mut src).unwrap();
            if n == 0 {
                break;
            }
            received += n;
            prop_assert!(
                reader.held() <= 2 * received + (64 << 10),
                "{} bytes held after {received} received", reader.held()
            );
        }
        prop_assert_eq!(received, stream.len());
    }
}

#[test]
fn a_small_maximum_refuses_before_anything_big_is_held() {
    // As a server reads a hello: a small maximum first, the full one after.
    let mut reader = FrameReader::new(pmix_wire::FrameDecoder::new(1024));
    let mut src: &[u8] = &[0, 0x10, 0, 0, 1, 2, 3];
    reader.read_from(&mut src).unwrap();
    assert!(
        reader.has_frame(),
        "an oversized header must be reported, not waited on"
    );
    assert!(reader.next_frame().is_err());
    assert!(reader.held() <= 64 << 10);
    let mut reader = FrameReader::new(pmix_wire::FrameDecoder::new(1024));
    reader.set_decoder(pmix_wire::FrameDecoder::new(1 << 20));
    let mut src: &[u8] = &[0, 0x10, 0, 0, 1, 2, 3];
    reader.read_from(&mut src).unwrap();
    assert!(!reader.has_frame());
    assert!(reader.next_frame().unwrap().is_none());
}

fn chunks() -> impl Strategy<Value = Vec<usize>> {
    vec(1usize..48, 1..8)
}

const CASES: u32 = 10_000;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn values_round_trip(v in value(), chunks in chunks()) {
        // A Value travels inside an Info; on its own it round-trips too.
        check_round_trip(&v, &chunks)?;
    }

    #[test]
    fn hellos_round_trip(h in hello(), chunks in chunks()) {
        check_round_trip(&h, &chunks)?;
        let mut frame = Vec::new();
        encode_frame(&h, &mut frame).unwrap();
        prop_assert_eq!(decode_hello(&frame[HEADER_LEN..]).unwrap(), h);
    }

    #[test]
    fn welcomes_round_trip(w in welcome(), chunks in chunks()) {
        check_round_trip(&w, &chunks)?;
    }

    #[test]
    fn client_msgs_round_trip(m in client_msg(), chunks in chunks()) {
        check_round_trip(&m, &chunks)?;
    }

    #[test]
    fn server_msgs_round_trip(m in server_msg(), chunks in chunks()) {
        check_round_trip(&m, &chunks)?;
    }

    /// Seen without decoding, then decoded process by process, a fence reply gives back
    /// exactly what it carried.
    #[test]
    fn fence_replies_peek_as_they_decode(m in fence_reply()) {
        let mut frame = Vec::new();
        encode_frame(&m, &mut frame).unwrap();
        let body = &frame[HEADER_LEN..];
        let f = peek_fence_reply(body).unwrap();
        let ServerMsg::Reply { id, reply } = &m else { unreachable!() };
        let ReplyBody::Fence { data } = &reply.body else { unreachable!() };
        prop_assert_eq!((f.id, f.status), (*id, reply.status));
        prop_assert_eq!(f.procs.len(), data.len());
        for (p, want) in f.procs.iter().zip(data) {
            prop_assert_eq!(p.nspace, want.proc.nspace.as_str());
            prop_assert_eq!(p.rank, want.proc.rank);
            prop_assert_eq!(&decode_kvs(&f.data[p.kvs.clone()]).unwrap(), &want.kvs);
        }
        pmix_wire::fuzzing::check_packed(body);
    }

    #[test]
    fn an_image_of_job_data_holds_every_value_of_it(job in job_data()) {
        let image = JobImage::from_job_data(&job).unwrap();
        prop_assert_eq!(image.nspace(), &job.nspace);
        prop_assert_eq!(image.session(), &job.session[..]);
        prop_assert_eq!(image.job(), &job.job[..]);
        prop_assert_eq!(image.apps(), &job.apps[..]);
        // Realms of one id or rank are merged, in order.
        for node in &job.nodes {
            let merged: Vec<Info> = job.nodes.iter().filter(|n| n.id == node.id)
                .flat_map(|n| n.info.clone()).collect();
            prop_assert_eq!(image.node_info(node.id), Some(merged));
        }
        for p in &job.procs {
            let merged: Vec<Info> = job.procs.iter().filter(|q| q.rank == p.rank)
                .flat_map(|q| q.info.clone()).collect();
            prop_assert_eq!(image.proc_info(p.rank), Some(merged));
        }
        // And the welcome carrying it inline decodes to the same image.
        let mut frame = Vec::new();
        encode_welcome(&WelcomeJob::Inline(image.clone()), &mut frame).unwrap();
        let back: Welcome = decode_body(&frame[HEADER_LEN..]).unwrap();
        prop_assert_eq!(back, Welcome::Accepted { version: PROTOCOL_VERSION, job: WelcomeJob::Inline(image) });
    }

    /// Appended after whatever `out` held, a shared reply's frame for any id is the plain
    /// frame of that reply.
    #[test]
    fn shared_replies_frame_like_plain_ones(
        status in status(),
        body in reply_body(),
        ids in vec(any::<u32>(), 1..4),
        before in vec(any::<u8>(), 0..3),
    ) {
        let reply = Reply { status, body };
        let shared = SharedReply::new(&reply).unwrap();
        for id in ids {
            let mut a = before.clone();
            shared.write(id, &mut a).unwrap();
            let mut b = before.clone();
            encode_frame(&ServerMsg::Reply { id, reply: reply.clone() }, &mut b).unwrap();
            // The head with the shared body sent after it is the same frame.
            let mut c = before.clone();
            shared.write_head(id, &mut c).unwrap();
            c.extend_from_slice(shared.body());
            prop_assert_eq!(&a, &b, "id {}", id);
            prop_assert_eq!(c, b, "id {} (head and body)", id);
        }
    }

    #[test]
    fn name_server_msgs_round_trip(
        m in ns_msg(),
        r in ns_reply(),
        h in ns_hello(),
        chunks in chunks(),
    ) {
        check_round_trip(&m, &chunks)?;
        check_round_trip(&r, &chunks)?;
        check_round_trip(&h, &chunks)?;
    }

    #[test]
    fn connect_parts_round_trip(
        jobs in vec(job_data(), 0..2),
        data in vec(proc_kvs(), 0..3),
        chunks in chunks(),
    ) {
        // A host concatenates frames of lists of parts: each frame decodes on its own.
        check_round_trip(&vec![pmix_wire::ConnectPart { jobs, data }], &chunks)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// The handshake check reads only magic and version, whatever shape the rest has.
    #[test]
    fn hello_classifies_magic_and_version(
        magic in prop_oneof![Just(MAGIC.to_owned()), any_string()],
        version in prop_oneof![Just(PROTOCOL_VERSION), any::<u16>()],
        h in hello(),
        tail in vec(any::<u32>(), 0..6),
    ) {
        let this = Hello { magic: magic.clone(), version, ..h.clone() };
        let mut body = Vec::new();
        rmp_encode(&this, &mut body);
        // Another version may send a different shape after the version number.
        let mut other_shape = Vec::new();
        rmp_encode(&(magic.clone(), version, tail), &mut other_shape);
        for b in [&body, &other_shape] {
            let r = decode_hello(b);
            if magic != MAGIC {
                prop_assert!(matches!(r, Err(Error::NotPmixRs)), "{:?}", r);
            } else if version != PROTOCOL_VERSION {
                prop_assert!(
                    matches!(r, Err(Error::VersionMismatch { theirs, ours })
                        if theirs == version && ours == PROTOCOL_VERSION),
                    "{:?}", r
                );
            }
        }
        if magic == MAGIC && version == PROTOCOL_VERSION {
            prop_assert_eq!(decode_hello(&body).unwrap(), this);
            prop_assert!(matches!(decode_hello(&other_shape), Err(Error::Malformed(_))));
        }
    }
}

/// Ids around each MessagePack integer width, where the per-id head changes length.
#[test]
fn shared_reply_frames_equal_plain_ones() {
    let kv = Kv {
        scope: Scope::GLOBAL,
        key: Key::new("k").unwrap(),
        value: Value::Uint64(u64::MAX),
    };
    let data = vec![ProcKvs {
        proc: Proc::new(Nspace::new("n").unwrap(), 3),
        kvs: vec![kv; 5],
    }];
    let reply = Reply {
        status: Status::SUCCESS,
        body: ReplyBody::Fence { data },
    };
    let shared = SharedReply::new(&reply).unwrap();
    for id in [0u32, 1, 127, 128, 255, 256, 65535, 65536, u32::MAX] {
        let mut a = Vec::new();
        shared.write(id, &mut a).unwrap();
        let mut b = Vec::new();
        encode_frame(
            &ServerMsg::Reply {
                id,
                reply: reply.clone(),
            },
            &mut b,
        )
        .unwrap();
        assert_eq!(a, b, "id {id}");
        let back: ServerMsg = decode_body(&a[HEADER_LEN..]).unwrap();
        assert_eq!(
            back,
            ServerMsg::Reply {
                id,
                reply: reply.clone()
            }
        );
    }
}

fn rmp_encode<T: Serialize>(msg: &T, out: &mut Vec<u8>) {
    let mut frame = Vec::new();
    encode_frame(msg, &mut frame).unwrap();
    out.extend_from_slice(&frame[HEADER_LEN..]);
}

/// The strategies reach every variant (a variant missing from a strategy would silently go
/// untested).
#[test]
fn strategies_cover_every_variant() {
    fn names<T: Debug>(strategy: impl Strategy<Value = T>, n: usize) -> BTreeSet<String> {
        let mut runner = TestRunner::deterministic();
        (0..n)
            .map(|_| {
                let v = strategy.new_tree(&mut runner).unwrap().current();
                let d = format!("{v:?}");
                d.split(['(', ' ', '{']).next().unwrap().to_owned()
            })
            .collect()
    }
    // Every variant of Value occurs, nested ones included.
    let values: BTreeSet<_> = {
        let mut runner = TestRunner::deterministic();
        let mut seen = BTreeSet::new();
        for _ in 0..5_000 {
            let v = value().new_tree(&mut runner).unwrap().current();
            seen.insert(v.data_type());
        }
        seen
    };
    assert_eq!(values.len(), 65, "value types generated: {values:?}");
    assert_eq!(names(request(), 3_000).len(), 20);
    assert_eq!(names(reply_body(), 1_000).len(), 8);
    let server = names(server_msg(), 500);
    assert!(
        server.contains("Reply") && server.contains("Event"),
        "{server:?}"
    );
    assert_eq!(names(welcome(), 200).len(), 2);
    assert_eq!(names(ns_request(), 500).len(), 9);
}

/// A value nested a few levels deep, by construction rather than by chance.
#[test]
fn nested_info_arrays_round_trip() {
    let mut v = Value::Uint32(7);
    for i in 0..8 {
        let info = Info::new(Key::new(format!("level{i}")).unwrap(), v);
        v = Value::from(pmix_types::DataArray::from_infos([info.clone(), info]));
    }
    check_round_trip(&v, &[3]).unwrap();
    let msg = ServerMsg::Event(pmix_wire::Event {
        code: pmix_types::Status(-1),
        source: pmix_types::Proc::new(pmix_types::Nspace::new("n").unwrap(), 0),
        range: pmix_types::DataRange::GLOBAL,
        info: vec![Info::new(Key::new("k").unwrap(), v)],
    });
    check_round_trip(&msg, &[1, 1000]).unwrap();
}

#[test]
fn frame_reader_reports_oversized_frames() {
    let mut reader = FrameReader::new(FrameDecoder::new(16));
    reader.extend(&[0, 0, 0, 17]);
    assert!(matches!(
        reader.next_frame(),
        Err(Error::FrameTooLarge { len: 17, max: 16 })
    ));
    assert_eq!(reader.needed(), 0);
    let mut reader = FrameReader::new(FrameDecoder::new(16));
    reader.extend(&[0, 0, 0, 16]);
    assert!(reader.next_frame().unwrap().is_none());
    assert_eq!(reader.needed(), 16);
}

proptest! {
    /// Frames of every size back to back, received in chunks, taken with `take_large_frame`
    /// where they are large and `next_frame` where not: every body comes out once, in order,
    /// byte for byte, and nothing is left over.
    #[test]
    fn large_frames_taken_whole_and_small_ones_borrowed_give_the_stream_back(
        sizes in vec(0usize..5000, 1..8),
        chunks in vec(1usize..3000, 1..6),
        min in 1usize..3000,
    ) {
        let bodies: Vec<Vec<u8>> = sizes
            .iter()
            .enumerate()
            .map(|(i, &n)| (0..n).map(|j| (i * 31 + j) as u8).collect())
            .collect();
        let mut stream = Vec::new();
        for b in &bodies {
            stream.extend_from_slice(&u32::try_from(b.len()).unwrap().to_be_bytes());
            stream.extend_from_slice(b);
        }
        let mut reader = FrameReader::default();
        let mut got: Vec<Vec<u8>> = Vec::new();
        let mut sent = 0;
        let mut chunk = chunks.iter().cycle();
        while sent < stream.len() {
            let n = (*chunk.next().unwrap()).min(stream.len() - sent);
            reader.extend(&stream[sent..sent + n]);
            sent += n;
            loop {
                if let Some((buf, body)) = reader.take_large_frame(min).unwrap() {
                    prop_assert!(body.len() >= min);
                    got.push(buf[body].to_vec());
                    continue;
                }
                match reader.next_frame().unwrap() {
                    Some(body) => {
                        prop_assert!(body.len() < min);
                        got.push(body.to_vec());
                    }
                    None => break,
                }
            }
        }
        prop_assert_eq!(got, bodies);
        prop_assert_eq!(reader.buffered(), 0);
    }
}

/// More than a big buffer's worth handed to an empty reader at once (what follows a large
/// frame taken whole, or a handshake's leftovers) is kept whole; it used to be cut to the read
/// window and panic.
#[test]
fn a_large_extend_into_an_empty_reader_is_kept() {
    let body = vec![7u8; 600 << 10];
    let mut stream = u32::try_from(body.len()).unwrap().to_be_bytes().to_vec();
    stream.extend_from_slice(&body);
    stream.extend_from_slice(&stream.clone());
    let mut reader = FrameReader::default();
    // A big frame first, so the reader holds a big buffer when it is emptied.
    reader.extend(&stream);
    let (_, first) = reader.take_large_frame(1).unwrap().unwrap();
    assert_eq!(first.len(), body.len());
    assert_eq!(reader.next_frame().unwrap(), Some(&body[..]));
    // Empty now, with a large buffer: a large extend must still fit.
    reader.extend(&stream);
    assert_eq!(reader.next_frame().unwrap(), Some(&body[..]));
    assert_eq!(reader.next_frame().unwrap(), Some(&body[..]));
    assert_eq!(reader.buffered(), 0);
}

/// A pointer means nothing in another process: the native wire refuses it (an error, not a
/// panic), and leaves nothing half-written; a NULL string stays apart from `""`.
#[test]
fn pointers_are_refused_and_null_strings_kept() {
    let mut out = vec![7];
    assert!(pmix_wire::encode_frame(&Value::Pointer(0x1000), &mut out).is_err());
    assert_eq!(out, [7]);
    for v in [Value::NullString, Value::String(String::new())] {
        let mut out = Vec::new();
        pmix_wire::encode_frame(&v, &mut out).unwrap();
        let back: Value = pmix_wire::decode_body(&out[pmix_wire::HEADER_LEN..]).unwrap();
        assert_eq!(back, v);
    }
}
