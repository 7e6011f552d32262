//! What the `wire_decode` fuzz target checks, kept here so that `tests/fuzz_corpus.rs` replays
//! its corpus on stable through exactly the same code. Not part of the API.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{
    ClientMsg, Decoded, FrameDecoder, Hello, MAGIC, PROTOCOL_VERSION, ServerMsg, Welcome,
    decode_body, decode_hello, encode_frame,
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
