//! Hostile input: random, truncated, mutated, oversized and deeply nested bytes never panic,
//! never overflow the stack and fail with an error; the handshake tells other protocols and
//! versions apart from garbage.

#![allow(clippy::unwrap_used)]

mod strategies;

use pmix_types::{DataArray, Info, Key, Scope, Value};
use pmix_wire::{
    ClientMsg, Decoded, Error, FrameDecoder, HEADER_LEN, Hello, Kv, MAX_DEPTH, PROTOCOL_VERSION,
    Request, ServerMsg, Welcome, decode_body, decode_hello, encode_frame,
};
use proptest::collection::vec;
use proptest::prelude::*;
use strategies::{client_msg, fence_reply, server_msg};

fn body_of<T: serde::Serialize>(msg: &T) -> Vec<u8> {
    let mut frame = Vec::new();
    encode_frame(msg, &mut frame).unwrap();
    frame.split_off(HEADER_LEN)
}

fn every_decoder_fails(bytes: &[u8]) {
    assert!(decode_body::<ClientMsg>(bytes).is_err());
    assert!(decode_body::<ServerMsg>(bytes).is_err());
    assert!(decode_body::<Welcome>(bytes).is_err());
    assert!(decode_body::<Hello>(bytes).is_err());
    assert!(decode_body::<Value>(bytes).is_err());
    assert!(decode_hello(bytes).is_err());
}

/// Applies `edits` to `data` in order: overwrite (0), insert (1) or remove (2) one byte at
/// the given position; stops early if nothing is left.
fn mutate(data: &mut Vec<u8>, edits: &[(prop::sample::Index, u8, u8)]) {
    for (at, byte, op) in edits {
        let i = at.index(data.len() + 1);
        match op {
            0 if i < data.len() => data[i] = *byte,
            1 => data.insert(i, *byte),
            _ => {
                data.remove(i.min(data.len() - 1));
            }
        }
        if data.is_empty() {
            break;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10_000))]

    #[test]
    fn random_bytes_do_not_panic(data in vec(any::<u8>(), 0..200)) {
        pmix_wire::fuzzing::check(&data);
    }

    #[test]
    fn mutated_messages_do_not_panic(
        msg in prop_oneof![
            client_msg().prop_map(|m| body_of(&m)),
            server_msg().prop_map(|m| body_of(&m)),
        ],
        edits in vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..4),
    ) {
        let mut data = msg;
        mutate(&mut data, &edits);
        pmix_wire::fuzzing::check(&data);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5_000))]

    /// A damaged fence reply is refused, lazily or whole, exactly when the whole decoder
    /// refuses it, and otherwise decodes to the same data either way.
    #[test]
    fn mutated_fence_replies_decode_alike_lazily_and_whole(
        msg in fence_reply(),
        edits in vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..4),
    ) {
        let mut data = body_of(&msg);
        mutate(&mut data, &edits);
        pmix_wire::fuzzing::check_packed(&data);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// MessagePack is prefix-free: no strict prefix of a message is a message.
    #[test]
    fn every_truncation_is_an_error(msg in server_msg()) {
        let body = body_of(&msg);
        for len in 0..body.len() {
            prop_assert!(decode_body::<ServerMsg>(&body[..len]).is_err(), "prefix {}", len);
        }
        let mut longer = body.clone();
        longer.push(0xc0);
        let e = decode_body::<ServerMsg>(&longer).unwrap_err();
        prop_assert!(e.to_string().contains("1 trailing bytes"), "{}", e);
        prop_assert_eq!(decode_body::<ServerMsg>(&body).unwrap(), msg);
    }
}

#[test]
fn trailing_bytes_are_refused() {
    let msg = ClientMsg {
        id: 1,
        req: Request::Finalize { info: vec![] },
    };
    let mut body = body_of(&msg);
    assert_eq!(decode_body::<ClientMsg>(&body).unwrap(), msg);
    body.extend_from_slice(&[0x01, 0x02]);
    match decode_body::<ClientMsg>(&body) {
        Err(Error::Malformed(m)) => assert!(m.contains("2 trailing bytes"), "{m}"),
        other => panic!("{other:?}"),
    }
}

/// Headers announcing 4 GiB inside a frame of a few bytes, at the top and inside a message.
#[test]
fn huge_announced_lengths_fail_fast() {
    let huge: [&[u8]; 6] = [
        &[0xdb, 0xff, 0xff, 0xff, 0xff],       // str 32
        &[0xc6, 0xff, 0xff, 0xff, 0xff],       // bin 32
        &[0xdd, 0xff, 0xff, 0xff, 0xff],       // array 32
        &[0xdf, 0xff, 0xff, 0xff, 0xff],       // map 32
        &[0xc9, 0xff, 0xff, 0xff, 0xff, 0x01], // ext 32
        &[0xdc, 0xff, 0xff],                   // array 16
    ];
    for h in huge {
        let mut alone = h.to_vec();
        alone.extend_from_slice(b"abc");
        every_decoder_fails(&alone);
        // ClientMsg [id, {"Commit": [<huge>]}]: the header sits where a Vec<Kv> is expected.
        let mut inside = vec![0x92, 0x07, 0x81, 0xa6];
        inside.extend_from_slice(b"Commit");
        inside.push(0x91);
        inside.extend_from_slice(h);
        inside.extend_from_slice(&[0x90; 8]);
        match decode_body::<ClientMsg>(&inside) {
            Err(Error::Malformed(m)) => assert!(m.contains("announces"), "{m}"),
            other => panic!("{other:?}"),
        }
    }
}

/// Nesting far beyond the limit is refused by the iterative scan before anything recurses,
/// so even a 128 KiB stack is enough.
#[test]
fn deep_nesting_does_not_overflow_the_stack() {
    std::thread::Builder::new()
        .stack_size(128 << 10)
        .spawn(deep_nesting)
        .unwrap()
        .join()
        .unwrap();
}

fn deep_nesting() {
    let mut arrays = vec![0x91; 100_000];
    arrays.push(0xc0);
    every_decoder_fails(&arrays);

    // DataArray in DataArray, 100,000 deep: {"DataArray": [39, [<inner>]]} each.
    let level: &[u8] = b"\x81\xa9DataArray\x92\x27\x91";
    let mut nested = level.repeat(100_000);
    nested.push(0xc0);
    every_decoder_fails(&nested);
    match decode_body::<Value>(&nested) {
        Err(Error::Malformed(m)) => assert!(m.contains("deeper than"), "{m}"),
        other => panic!("{other:?}"),
    }
    let mut frame = (nested.len() as u32).to_be_bytes().to_vec();
    frame.extend_from_slice(&nested);
    match FrameDecoder::default().decode(&frame).unwrap() {
        Decoded::Frame { body, .. } => assert!(decode_body::<Value>(body).is_err()),
        other => panic!("{other:?}"),
    }
}

/// Nested info arrays decode up to the documented depth, in a 1 MiB stack even in a debug
/// build, and one level more is refused with a clear error.
#[test]
fn nesting_up_to_the_limit_decodes_in_a_small_stack() {
    let worker = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(|| {
            let mut value = Value::Uint8(1);
            for levels in 0.. {
                let msg = ClientMsg {
                    id: 1,
                    req: Request::Commit {
                        kvs: vec![Kv {
                            scope: Scope::GLOBAL,
                            key: Key::new("k").unwrap(),
                            value: value.clone(),
                        }],
                    },
                };
                match decode_body::<ClientMsg>(&body_of(&msg)) {
                    Ok(back) => assert_eq!(back, msg),
                    Err(Error::Malformed(m)) => {
                        assert!(m.contains(&format!("deeper than {MAX_DEPTH}")), "{m}");
                        return levels;
                    }
                    Err(e) => panic!("{e}"),
                }
                let info = Info::new(Key::new(format!("l{levels}")).unwrap(), value);
                value = Value::from(DataArray::from_infos([info]));
            }
            unreachable!()
        })
        .unwrap();
    let levels = worker.join().unwrap();
    assert!(levels >= 10, "only {levels} levels of info arrays fit");
}

fn hello_v1() -> Hello {
    Hello {
        magic: pmix_wire::MAGIC.into(),
        version: PROTOCOL_VERSION,
        nspace: pmix_types::Nspace::new("ns").unwrap(),
        rank: pmix_types::Rank(0),
        secret: vec![7; 16],
        pid: 1,
    }
}

#[test]
fn handshake_classification() {
    // Valid.
    assert_eq!(decode_hello(&body_of(&hello_v1())).unwrap(), hello_v1());

    // Wrong magic.
    let other = Hello {
        magic: "PMIX".into(),
        ..hello_v1()
    };
    assert!(matches!(
        decode_hello(&body_of(&other)),
        Err(Error::NotPmixRs)
    ));

    // Version 3 encoded by hand, in today's shape and in a shape version 2 cannot read.
    let mut v2 = b"\x96\xa6PMIXRS\x03\xa2ns\x00\xc4\x01\x07\x01".to_vec();
    let want = |r: Result<Hello, Error>| match r {
        Err(e @ Error::VersionMismatch { theirs: 3, ours: 2 }) => {
            assert_eq!(e.status(), pmix_types::Status::ERR_NOT_SUPPORTED);
        }
        other => panic!("{other:?}"),
    };
    want(decode_hello(&v2));
    v2 = b"\x93\xa6PMIXRS\xcd\x00\x03\x81\xa1x\xc0".to_vec();
    want(decode_hello(&v2));
    // As a 16-bit signed integer too: any integer encoding of the number is accepted.
    want(decode_hello(b"\x92\xa6PMIXRS\xd1\x00\x03"));
    assert!(matches!(
        decode_hello(b"\x92\xa6PMIXRS\xce\x00\x01\x00\x00"),
        Err(Error::Malformed(_))
    ));

    // Garbage, and other protocols.
    for junk in [
        &b""[..],
        b"\x00",
        b"GET / HTTP/1.1\r\n",
        b"\x96",
        b"\x91\xa6PMIXRS",
        b"\x96\xa6PMIXRT\x01",
        b"\x81\xa6PMIXRS\x01",
    ] {
        assert!(
            matches!(decode_hello(junk), Err(Error::NotPmixRs)),
            "{junk:?}"
        );
    }
    // The magic, then something that is not a version: ours, but broken.
    for broken in [&b"\x96\xa6PMIXRS\xa1x"[..], b"\x96\xa6PMIXRS"] {
        assert!(matches!(decode_hello(broken), Err(Error::Malformed(_))));
    }
    // A right head with a broken rest.
    let mut broken = body_of(&hello_v1());
    broken.truncate(broken.len() - 1);
    assert!(matches!(decode_hello(&broken), Err(Error::Malformed(_))));
}

#[test]
fn oversized_frames_are_refused_from_the_header() {
    let d = FrameDecoder::new(1024);
    assert!(matches!(
        d.decode(&[0xff, 0xff, 0xff, 0xff]),
        Err(Error::FrameTooLarge {
            len: 0xffff_ffff,
            max: 1024
        })
    ));
    assert!(matches!(
        d.decode(&[0, 0, 4, 1]),
        Err(Error::FrameTooLarge { len: 1025, .. })
    ));
    assert_eq!(d.decode(&[0, 0, 4, 0]).unwrap(), Decoded::NeedMore(1024));
    assert_eq!(
        FrameDecoder::new(0).decode(&[0, 0, 0, 0]).unwrap(),
        Decoded::Frame {
            body: &[],
            consumed: 4
        }
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    /// Whatever arrives, in whatever pieces, the stream readers hold no more than it allows and
    /// say truthfully whether a whole frame or message is there.
    #[test]
    fn stream_readers_stay_bounded_and_truthful(
        head in prop_oneof![
            Just(Vec::new()),
            (0u32..=(256 << 20)).prop_map(|n| n.to_be_bytes().to_vec()),
        ],
        data in vec(any::<u8>(), 0..20_000),
        piece in any::<u8>(),
    ) {
        let mut input = vec![piece];
        input.extend(head);
        input.extend(data);
        pmix_wire::fuzzing::check_readers(&input);
    }
}
