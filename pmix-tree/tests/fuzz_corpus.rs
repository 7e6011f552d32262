//! Replays the `tree_decode` fuzz corpus on stable through the fuzz target's own check, so
//! that every input that once found a bug (and every seed) stays a regression test.
//!
//! The seeds are one frame of each message kind, a few frames back to back, an oversized
//! announcement and garbage; rewrite them with `PMIX_BLESS=1 cargo test -p pmix-tree --test
//! fuzz_corpus`.

use std::path::{Path, PathBuf};

use pmix_tree::msg::{self, Msg, Part};
use pmix_tree::{Dest, FenceKey};
use pmix_types::Status;
use serde_bytes::ByteBuf;

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/tree_decode")
}

fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let key = FenceKey {
        set: b"job".to_vec(),
        seq: 3,
    };
    let msgs = [
        (
            "hello",
            Msg::Hello {
                vertex: 5,
                nonce: ByteBuf::from(vec![1; 32]),
            },
        ),
        (
            "challenge",
            Msg::Challenge {
                nonce: ByteBuf::from(vec![2; 32]),
                proof: ByteBuf::from(vec![3; 32]),
            },
        ),
        (
            "proof",
            Msg::Proof {
                proof: ByteBuf::from(vec![4; 32]),
            },
        ),
        ("welcome", Msg::Welcome),
        (
            "refused",
            Msg::Refused {
                reason: "no".into(),
            },
        ),
        (
            "fence_up",
            Msg::FenceUp {
                key: key.clone(),
                vertices: vec![0, 1, 4],
                parts: vec![Part {
                    vertex: 4,
                    data: b"four".to_vec(),
                }],
            },
        ),
        (
            "fence_down",
            Msg::FenceDown {
                key: key.clone(),
                result: Ok(ByteBuf::from(b"all".to_vec())),
            },
        ),
        (
            "fence_down_err",
            Msg::FenceDown {
                key,
                result: Err(Status::ERR_LOST_CONNECTION),
            },
        ),
        (
            "request",
            Msg::Request {
                origin: 1,
                target: 9,
                id: 7,
                payload: ByteBuf::from(b"q".to_vec()),
            },
        ),
        (
            "response",
            Msg::Response {
                origin: 1,
                id: 7,
                result: Ok(ByteBuf::from(b"a".to_vec())),
            },
        ),
        (
            "message_all",
            Msg::Message {
                from: 3,
                dest: Dest::All,
                payload: ByteBuf::from(b"m".to_vec()),
            },
        ),
        (
            "message_one",
            Msg::Message {
                from: 3,
                dest: Dest::Vertex(2),
                payload: ByteBuf::from(b"m".to_vec()),
            },
        ),
        (
            "lost",
            Msg::Lost {
                vertex: 4,
                reason: "silent".into(),
            },
        ),
        ("heartbeat", Msg::Heartbeat),
    ];
    let mut seeds = Vec::new();
    let mut stream = Vec::new();
    for (name, m) in &msgs {
        let mut frame = Vec::new();
        msg::encode(m, &mut frame).expect("encodes");
        stream.extend_from_slice(&frame);
        seeds.push((*name, frame));
    }
    seeds.push(("stream", stream));
    seeds.push(("over_max", vec![0xff, 0xff, 0xff, 0xff, 0x91, 0xc0]));
    seeds.push(("garbage", b"\x00\x00\x00\x03\x81\xa1x".to_vec()));
    seeds
}

#[test]
fn tree_decode_corpus_replays() {
    let dir = corpus();
    if std::env::var_os("PMIX_BLESS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(&dir).expect("corpus directory");
        for (name, data) in seeds() {
            std::fs::write(dir.join(format!("seed-{name}")), data).expect("seed written");
        }
    }
    let mut replayed = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("corpus entry").path();
        if path.is_file() {
            let data = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            msg::fuzz_check(&data);
            replayed += 1;
        }
    }
    assert!(replayed >= 10, "only {replayed} tree_decode corpus files");
}

#[test]
fn every_seed_but_the_bad_ones_decodes() {
    for (name, data) in seeds() {
        let mut reader = pmix_wire::FrameReader::new(pmix_wire::FrameDecoder::new(1 << 12));
        reader.extend(&data);
        let first = reader.next_frame();
        match name {
            "over_max" => assert!(first.is_err()),
            "garbage" => assert!(msg::decode(first.unwrap().unwrap()).is_err()),
            _ => assert!(msg::decode(first.unwrap().unwrap()).is_ok(), "{name}"),
        }
    }
}
