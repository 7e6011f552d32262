//! What the `wire_decode` fuzz target checks, kept here so that `tests/fuzz_corpus.rs` replays
//! its corpus on stable through exactly the same code. Not part of the API.

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
