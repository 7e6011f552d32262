//! What the fuzz targets check (`wire_decode`, `openpmix_decode`, `readers_bounded`), kept here
//! so that `tests/fuzz_corpus.rs` replays their corpora on stable through exactly the same
//! code. Not part of the API.

use serde::Serialize;
use serde::de::DeserializeOwned;

use pmix_types::{Nspace, Proc};

use crate::{
    ClientMsg, Decoded, FrameDecoder, Hello, MAGIC, PROTOCOL_VERSION, ProcKvs, Reply, ReplyBody,
    ServerMsg, Welcome, decode_body, decode_hello, decode_kvs, encode_frame, peek_fence_reply,
};

/// Runs every decoder on `data`, as a stream of frames and as one body, and panics if a
/// decoder panics or if something that decoded does not survive a second round trip.
pub fn check(data: &[u8]) {
    // A small maximum, so that the fuzzer also reaches the size check.
    let decoder = FrameDecoder::new(1 << 16);
    let mut rest = data;
    while let Ok(Decoded::Frame { body, consumed }) = decoder.decode(rest) {
        check_body(body);
        rest = &rest[consumed..];
    }
    check_body(data);
}

fn check_body(body: &[u8]) {
    round_trip::<ClientMsg>(body);
    round_trip::<ServerMsg>(body);
    round_trip::<Welcome>(body);
    check_packed(body);
    let plain = round_trip::<Hello>(body);
    if let Ok(hello) = decode_hello(body) {
        assert!(hello.magic == MAGIC && hello.version == PROTOCOL_VERSION);
        assert!(plain.as_ref() == Some(&hello), "decode_hello disagrees");
    }
}

/// Decodes `body` as a `T`; if that works, encoding and decoding again must give it back.
fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(
    body: &[u8],
) -> Option<T> {
    let msg = decode_body::<T>(body).ok()?;
    let mut frame = Vec::new();
    if let Err(e) = encode_frame(&msg, &mut frame) {
        panic!("a decoded message does not encode: {e}: {msg:?}");
    }
    match decode_body::<T>(&frame[crate::HEADER_LEN..]) {
        Ok(again) => assert!(again == msg, "{again:?} != {msg:?}"),
        Err(e) => panic!("a re-encoded message does not decode: {e}: {msg:?}"),
    }
    Some(msg)
}

/// A fence reply seen by `peek_fence_reply` and decoded process by process must be what the
/// whole decoder makes of it, and refused (somewhere) exactly when that one refuses it.
pub fn check_packed(body: &[u8]) {
    let Some(f) = peek_fence_reply(body) else {
        return;
    };
    let lazy: Result<Vec<ProcKvs>, String> = f
        .procs
        .iter()
        .map(|p| {
            let nspace = Nspace::new(p.nspace).map_err(|e| e.to_string())?;
            let kvs = f
                .data
                .get(p.kvs.clone())
                .ok_or("a range outside the data")?;
            Ok(ProcKvs {
                proc: Proc::new(nspace, p.rank),
                kvs: decode_kvs(kvs).map_err(|e| e.to_string())?,
            })
        })
        .collect();
    match (decode_body::<ServerMsg>(body), lazy) {
        (
            Ok(ServerMsg::Reply {
                id,
                reply:
                    Reply {
                        status,
                        body: ReplyBody::Fence { data },
                    },
            }),
            Ok(lazy),
        ) => {
            assert_eq!(
                (id, status),
                (f.id, f.status),
                "peeked id or status differs"
            );
            assert_eq!(data, lazy, "lazily decoded data differs");
        }
        (Err(_), Err(_)) => {}
        (whole, lazy) => panic!("whole decode {whole:?} but lazy decode {lazy:?}"),
    }
}

/// What the `openpmix_decode` fuzz target checks, for `tests/fuzz_corpus.rs` too: every
/// OpenPMIx decoder runs on `data` (as a handshake, as server answers, as a stream of
/// messages, and as one payload in every dialect) without panicking, and whatever decodes
/// encodes, and is a fixed point from then on: decoding its encoding and encoding again gives
/// the same bytes (the first trip may normalise: floats to six decimals, NULL strings to
/// empty ones, bytes that are not UTF-8 to U+FFFD).
pub fn check_openpmix(data: &[u8]) {
    use crate::openpmix;

    check_handshake(data);
    if let Ok(Some((hs, _))) = openpmix::ClientHandshake::decode_message(data) {
        check_handshake(&hs.encode_body().unwrap_or_default());
    }
    if let Ok(Some((r, _))) = openpmix::ServerReply::decode(data) {
        let mut out = Vec::new();
        r.encode(&mut out);
        assert_eq!(
            openpmix::ServerReply::decode(&out).ok().flatten(),
            Some((r, out.len()))
        );
    }
    for needs_id in [false, true] {
        if let Ok(Some((r, used))) = openpmix::ToolReply::decode(data, needs_id) {
            let mut out = Vec::new();
            r.encode(&mut out).expect("a decoded tool reply encodes");
            assert_eq!(out.len(), used);
            let again = openpmix::ToolReply::decode(&out, needs_id).ok().flatten();
            assert_eq!(again, Some((r, used)));
        }
    }
    let mut reader = openpmix::MsgReader::new(1 << 16);
    reader.feed(data);
    while let Ok(Some(m)) = reader.next_message() {
        match m {
            openpmix::Incoming::Handshake { body, .. } => check_handshake(body),
            openpmix::Incoming::Message { payload, .. } => check_payload(payload),
        }
    }
    let mut reader = openpmix::MsgReader::after_handshake(1 << 16);
    reader.feed(data);
    while let Ok(Some(openpmix::Incoming::Message { payload, .. })) = reader.next_message() {
        check_payload(payload);
    }
    check_payload(data);
}

fn check_handshake(body: &[u8]) {
    use crate::openpmix::ClientHandshake;
    let Ok(hs) = ClientHandshake::decode(body) else {
        return;
    };
    let first = match hs.encode_body() {
        Ok(b) => b,
        // Replacing bytes that are not UTF-8 can grow a body past the limit.
        Err(crate::Error::FrameTooLarge { .. }) => return,
        Err(e) => panic!("a decoded handshake does not encode: {e}: {hs:?}"),
    };
    let again = ClientHandshake::decode(&first)
        .unwrap_or_else(|e| panic!("a re-encoded handshake does not decode: {e}: {hs:?}"));
    assert_eq!(
        again.encode_body().ok(),
        Some(first),
        "handshake not a fixed point"
    );
}

/// Decodes with `decode`; if that works, the encoding must decode again and encode to the
/// same bytes.
fn fixed_point<T: std::fmt::Debug>(
    what: &str,
    data: &[u8],
    decode: impl Fn(&[u8]) -> Result<T, crate::Error>,
    encode: impl Fn(&T) -> Result<Vec<u8>, crate::Error>,
) {
    let Ok(a) = decode(data) else {
        return;
    };
    let first = match encode(&a) {
        Ok(first) => first,
        // The one refusal by design of what decodes: a POINTER is read (the reference's
        // placeholder) but never sent.
        Err(crate::Error::Unsupported(why)) if why == crate::openpmix::POINTER_REFUSED => return,
        Err(e) => panic!("a decoded {what} does not encode: {e}: {a:?}"),
    };
    let b = decode(&first)
        .unwrap_or_else(|e| panic!("a re-encoded {what} does not decode: {e}: {a:?}"));
    let second = encode(&b).unwrap_or_else(|e| panic!("{what} does not encode twice: {e}: {b:?}"));
    assert!(
        first == second,
        "{what} not a fixed point: {a:?} then {b:?}"
    );
}

fn check_payload(payload: &[u8]) {
    use crate::openpmix::{
        BufferType, Cmd, Codec, Dialect, Kval, Notification, Packer, Reply, Request, Unpacker,
        peek_cmd,
    };
    use pmix_types::{Info, Value};

    for codec in [Codec::V41, Codec::V3] {
        for buffer in [BufferType::NonDesc, BufferType::FullyDesc] {
            let d = Dialect::new(codec, buffer);
            let _ = peek_cmd(payload, d);
            fixed_point(
                "request",
                payload,
                |b| Request::decode(b, d),
                |r| {
                    let mut out = Vec::new();
                    r.encode(d, &mut out).map(|()| out)
                },
            );
            for cmd in [
                Cmd::REQ,
                Cmd::FENCENB,
                Cmd::GETNB,
                Cmd::LOOKUPNB,
                Cmd::SPAWNNB,
                Cmd::CONNECTNB,
                Cmd::JOB_CONTROL,
                Cmd::DEREGEVENTS,
            ] {
                fixed_point(
                    "reply",
                    payload,
                    |b| Reply::decode(cmd, b, d),
                    |r| {
                        let mut out = Vec::new();
                        r.encode(d, &mut out).map(|()| out)
                    },
                );
            }
            fixed_point(
                "notification",
                payload,
                |b| Notification::decode(b, d),
                |n| {
                    let mut out = Vec::new();
                    n.encode(d, &mut out).map(|()| out)
                },
            );
            fixed_point(
                "value pack",
                payload,
                |b| Unpacker::new(b, d).unpack::<Value>(),
                |v| {
                    let mut out = Vec::new();
                    Packer::new(&mut out, d).pack(v).map(|()| out)
                },
            );
            fixed_point(
                "info pack",
                payload,
                |b| Unpacker::new(b, d).unpack::<Info>(),
                |v| {
                    let mut out = Vec::new();
                    Packer::new(&mut out, d).pack(v).map(|()| out)
                },
            );
            fixed_point(
                "kval pack",
                payload,
                |b| Unpacker::new(b, d).unpack::<Kval>(),
                |v| {
                    let mut out = Vec::new();
                    Packer::new(&mut out, d).pack(v).map(|()| out)
                },
            );
            fixed_point(
                "app pack",
                payload,
                |b| Unpacker::new(b, d).unpack::<crate::App>(),
                |v| {
                    let mut out = Vec::new();
                    Packer::new(&mut out, d).pack(v).map(|()| out)
                },
            );
            fixed_point(
                "query pack",
                payload,
                |b| Unpacker::new(b, d).unpack::<crate::Query>(),
                |v| {
                    let mut out = Vec::new();
                    Packer::new(&mut out, d).pack(v).map(|()| out)
                },
            );
        }
    }
}

/// Feeds `data` to the stream readers of both wires, in pieces whose sizes come from the data
/// itself, and panics if a reader holds more than the bytes that arrived allow (at most as
/// much again, plus a 64 KiB read window) or if `has_frame`/`has_message` disagree with what
/// the next read of a frame or message gives.
pub fn check_readers(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    // Small maximums, so that the fuzzer also reaches the size checks.
    let piece = usize::from(first).max(1) * 97;
    let mut frames = crate::FrameReader::new(FrameDecoder::new(1 << 20));
    let mut messages = crate::openpmix::MsgReader::new(1 << 20);
    let mut received = 0;
    let mut src = rest;
    while !src.is_empty() {
        let mut chunk = &src[..piece.min(src.len())];
        let n = frames.read_from(&mut chunk).unwrap_or(0);
        messages.feed(&src[..n]);
        src = &src[n..];
        received += n;
        assert!(
            frames.held() <= 2 * received + (64 << 10),
            "the frame reader holds {} bytes after {received} arrived",
            frames.held()
        );
        assert!(messages.buffered() <= received);
        loop {
            let announced = frames.has_frame();
            match frames.next_frame() {
                Ok(Some(_)) => assert!(announced, "has_frame said no, next_frame gave one"),
                Ok(None) => {
                    assert!(!announced, "has_frame said yes, next_frame gave none");
                    break;
                }
                Err(_) => {
                    assert!(announced, "has_frame must report a frame over the maximum");
                    return;
                }
            }
        }
        loop {
            let announced = messages.has_message();
            match messages.next_message() {
                Ok(Some(_)) => assert!(announced, "has_message said no, next_message gave one"),
                Ok(None) => {
                    assert!(!announced, "has_message said yes, next_message gave none");
                    break;
                }
                Err(_) => {
                    assert!(
                        announced,
                        "has_message must report a message over the maximum"
                    );
                    return;
                }
            }
        }
    }
}

/// Reads `data` as a job image and, if it parses, asks it everything a client or server
/// would: nothing may panic, and every answer is bounded by the image (checked here by doing
/// it: a hostile count that made a read allocate or loop without bound would hang the fuzzer).
pub fn check_image(data: &[u8]) {
    use pmix_types::Rank;

    use crate::JobImage;
    use crate::job_image::{NODE_KEYS, PROC_KEYS};

    let Ok(image) = JobImage::parse(bytes::Bytes::copy_from_slice(data)) else {
        return;
    };
    let size = image.size();
    let ranks = (0..size.min(32)).chain([size.saturating_sub(1), size, u32::MAX - 2]);
    for r in ranks.map(Rank) {
        let _ = image.placement(r);
        let _ = image.realms_of(r);
        let info = image.proc_info(r);
        for key in PROC_KEYS {
            let one = image.proc_value(r, key);
            // A value read alone is the one the whole realm lists for the key (the last of
            // its repeats).
            if let Some(info) = &info {
                let listed = info.iter().rev().find(|i| i.key.as_str() == key);
                assert_eq!(one.as_ref(), listed.map(|i| &i.value), "rank {r}, {key}");
            }
        }
    }
    let ids = image.node_ids();
    for &id in ids.iter().take(32).chain([&u32::MAX]) {
        let info = image.node_info(id);
        for key in NODE_KEYS {
            let one = image.node_value(id, key);
            if let Some(info) = &info {
                let listed = info.iter().rev().find(|i| i.key.as_str() == key);
                assert_eq!(one.as_ref(), listed.map(|i| &i.value), "node {id}, {key}");
            }
        }
        let _ = image.ranks_of_node(id);
    }
    for host in ["", "n0", "node1", "\u{0}"] {
        // A hostile index may name any node; the answer only has to come.
        let _ = image.node_by_host(host);
    }
    let _ = image.given_proc_ranks();
    // The whole job data, for an image small enough to expand in a moment.
    if size <= 4096 && ids.len() <= 4096 {
        let job = image.expand();
        assert_eq!(&job.nspace, image.nspace());
    }
}

#[cfg(test)]
mod tests {
    use pmix_types::Value;

    use super::fixed_point;
    use crate::openpmix::{BufferType, Codec, Dialect, Packer};

    /// A decoded POINTER (a mutation of a message found it in CI) is not sent again, by
    /// design: no fixed point to reach, and no panic.
    #[test]
    fn a_decoded_pointer_is_exempt_from_the_fixed_point() {
        let d = Dialect::new(Codec::V41, BufferType::NonDesc);
        fixed_point(
            "value pack",
            b"",
            |_| Ok(vec![Value::Pointer(0)]),
            |v: &Vec<Value>| {
                let mut out = Vec::new();
                Packer::new(&mut out, d).pack(v).map(|()| out)
            },
        );
    }
}
