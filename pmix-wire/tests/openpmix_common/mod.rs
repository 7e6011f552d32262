//! Loads the OpenPMIx relay captures of `tests/data/openpmix` and cuts each connection into
//! its handshake, the server's answer, and the framed messages of both directions.

#![allow(dead_code)]

use std::path::Path;

use pmix_wire::openpmix::{Header, Incoming, MsgReader, ServerReply};

/// One framed message.
#[derive(Clone, Debug)]
pub(crate) struct Msg {
    pub(crate) header: Header,
    pub(crate) payload: Vec<u8>,
    /// The message's bytes as they were on the wire, header included.
    pub(crate) raw: Vec<u8>,
}

/// One client connection of a capture.
#[derive(Clone, Debug)]
pub(crate) struct Conn {
    pub(crate) id: u32,
    /// The whole client-to-server stream.
    pub c2s: Vec<u8>,
    /// The whole server-to-client stream.
    pub s2c: Vec<u8>,
    /// The handshake message (header and body).
    pub(crate) handshake: Vec<u8>,
    /// Its body.
    pub(crate) handshake_body: Vec<u8>,
    /// The server's raw answer.
    pub(crate) reply: Vec<u8>,
    pub(crate) requests: Vec<Msg>,
    pub(crate) replies: Vec<Msg>,
}

fn field<'a>(line: &'a str, name: &str) -> &'a str {
    let at = line
        .find(&format!("\"{name}\": "))
        .unwrap_or_else(|| panic!("no {name} in {line}"));
    let rest = &line[at + name.len() + 4..];
    let rest = rest.trim_start_matches('"');
    let end = rest.find(['"', ',', '}']).unwrap();
    &rest[..end]
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

pub(crate) fn data_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/openpmix")
}

/// The connections of `capN.jsonl`, in order of their number.
pub(crate) fn load(name: &str) -> Vec<Conn> {
    let path = data_dir().join(format!("{name}.jsonl"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut streams: std::collections::BTreeMap<u32, (Vec<u8>, Vec<u8>)> = Default::default();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let c: u32 = field(line, "c").parse().unwrap();
        let bytes = unhex(field(line, "hex"));
        let e = streams.entry(c).or_default();
        match field(line, "d") {
            "c2s" => e.0.extend(bytes),
            "s2c" => e.1.extend(bytes),
            d => panic!("direction {d}"),
        }
    }
    streams
        .into_iter()
        .map(|(id, (c2s, s2c))| split(id, c2s, s2c))
        .collect()
}

fn messages(reader: &mut MsgReader, stream: &[u8]) -> Vec<Msg> {
    reader.feed(stream);
    let mut out = Vec::new();
    while let Some(m) = reader.next_message().unwrap() {
        match m {
            Incoming::Message { header, payload } => {
                let mut raw = header.encode().to_vec();
                raw.extend_from_slice(payload);
                out.push(Msg {
                    header,
                    payload: payload.to_vec(),
                    raw,
                });
            }
            Incoming::Handshake { .. } => panic!("a second handshake"),
        }
    }
    assert_eq!(reader.buffered(), 0, "a partial message at the end");
    out
}

fn split(id: u32, c2s: Vec<u8>, s2c: Vec<u8>) -> Conn {
    let mut reader = MsgReader::new(1 << 20);
    reader.feed(&c2s);
    let (handshake, handshake_body) = match reader.next_message().unwrap().unwrap() {
        Incoming::Handshake { header, body } => {
            let mut raw = header.encode_handshake().to_vec();
            raw.extend_from_slice(body);
            (raw, body.to_vec())
        }
        other => panic!("first message is not the handshake: {other:?}"),
    };
    let requests = messages(&mut reader, &[]);
    let (_, used) = ServerReply::decode(&s2c).unwrap().unwrap();
    let reply = s2c[..used].to_vec();
    let replies = messages(&mut MsgReader::after_handshake(1 << 20), &s2c[used..]);
    Conn {
        id,
        c2s,
        s2c,
        handshake,
        handshake_body,
        reply,
        requests,
        replies,
    }
}

/// Every capture's connections, with the capture's name.
pub(crate) fn all() -> Vec<(&'static str, Vec<Conn>)> {
    ["cap1", "cap2", "cap3", "cap4", "cap5", "cap6"]
        .into_iter()
        .map(|n| (n, load(n)))
        .collect()
}
