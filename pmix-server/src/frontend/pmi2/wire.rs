//! The PMI-2 wire, sans-IO: length-prefixed frames of `key=value;` pairs.
//!
//! A frame is six ASCII characters holding the decimal length of the body (space padded on
//! either side: MPICH's and Slurm's clients left-justify it, Hydra right-justifies it), then
//! the body: `cmd=<name>;` followed by `key=value;` pairs. A key runs to its first `=`; a
//! value runs to the first `;` that is not doubled, and a literal `;` in a value is written
//! `;;`. Values may hold `=`. Pairs keep their order: a spawn repeats its per-command keys.

use std::fmt;

/// Width of the length field in front of every body.
pub(crate) const LEN_FIELD: usize = 6;

/// Longest body accepted: the clients' own command buffer (`PMII_MAX_COMMAND_LEN`, 64 KiB).
pub(crate) const MAX_BODY: usize = 64 * 1024;

/// Longest value the clients take from a reply (`PMI2_MAX_VALLEN`); a longer one makes them
/// fail the whole reply.
pub(crate) const MAX_VALUE: usize = 1024;

/// One decoded command: its name and its other pairs, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Command {
    pub(crate) cmd: String,
    pub(crate) pairs: Vec<(String, String)>,
}

impl Command {
    /// The first value of `key`.
    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Why a peer's bytes are not a PMI-2 frame. The connection cannot go on after any of them:
/// where the next frame starts is unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FrameError {
    /// The length field is not a decimal number.
    BadLength(String),
    /// The length field announces more than [`MAX_BODY`] bytes.
    TooLong(usize),
    /// The body is not `cmd=<name>;` followed by `key=value;` pairs of UTF-8 text.
    Garbled(&'static str),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::BadLength(s) => write!(f, "a frame length that is not a number: {s:?}"),
            FrameError::TooLong(n) => {
                write!(f, "a frame of {n} bytes, more than the {MAX_BODY} allowed")
            }
            FrameError::Garbled(why) => write!(f, "a garbled frame: {why}"),
        }
    }
}

/// The first whole frame of `input`, and how many bytes it took; `Ok(None)` while it is
/// incomplete. Nothing is allocated from the length field before its bytes are there.
pub(crate) fn decode(input: &[u8]) -> Result<Option<(Command, usize)>, FrameError> {
    match frame_len(input)? {
        Some(end) => Ok(Some((parse_body(&input[LEN_FIELD..end])?, end))),
        None => Ok(None),
    }
}

/// The length (length field included) of the first frame of `input` once all of it is
/// there; `Ok(None)` before. The body is not looked at.
pub(crate) fn frame_len(input: &[u8]) -> Result<Option<usize>, FrameError> {
    if input.len() < LEN_FIELD {
        return Ok(None);
    }
    let end = LEN_FIELD + body_len(&input[..LEN_FIELD])?;
    Ok((input.len() >= end).then_some(end))
}

fn body_len(field: &[u8]) -> Result<usize, FrameError> {
    let text = std::str::from_utf8(field)
        .map_err(|_| FrameError::BadLength(String::from_utf8_lossy(field).into_owned()))?;
    let digits = text.trim_matches(' ');
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(FrameError::BadLength(text.to_owned()));
    }
    let len: usize = digits
        .parse()
        .map_err(|_| FrameError::BadLength(text.to_owned()))?;
    if len > MAX_BODY {
        return Err(FrameError::TooLong(len));
    }
    Ok(len)
}

/// A body: `cmd=<name>;` then pairs.
pub(crate) fn parse_body(body: &[u8]) -> Result<Command, FrameError> {
    let text = std::str::from_utf8(body).map_err(|_| FrameError::Garbled("not UTF-8 text"))?;
    let mut rest = text;
    let mut pairs = Vec::new();
    while !rest.is_empty() {
        let Some(eq) = rest.find('=') else {
            return Err(FrameError::Garbled("a pair without ="));
        };
        let key = &rest[..eq];
        if key.is_empty() || key.contains(';') {
            return Err(FrameError::Garbled("an empty key or a key holding ;"));
        }
        let (value, used) = take_value(&rest[eq + 1..])?;
        pairs.push((key.to_owned(), value));
        rest = &rest[eq + 1 + used..];
    }
    let mut pairs = pairs.into_iter();
    match pairs.next() {
        Some((k, cmd)) if k == "cmd" && !cmd.is_empty() => Ok(Command {
            cmd,
            pairs: pairs.collect(),
        }),
        _ => Err(FrameError::Garbled("the first pair is not cmd=<name>")),
    }
}

/// A value up to its terminating `;`, unescaped, and the bytes it took (terminator included).
fn take_value(s: &str) -> Result<(String, usize), FrameError> {
    let bytes = s.as_bytes();
    let mut value = String::new();
    let mut start = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b';' {
            value.push_str(&s[start..i]);
            if bytes.get(i + 1) == Some(&b';') {
                value.push(';');
                i += 2;
                start = i;
                continue;
            }
            return Ok((value, i + 1));
        }
        i += 1;
    }
    Err(FrameError::Garbled("a value without its closing ;"))
}

/// Appends one frame: `cmd=<cmd>;` then `pairs`, each value's `;` doubled.
pub(crate) fn encode(cmd: &str, pairs: &[(&str, &str)], out: &mut Vec<u8>) {
    let mut body = String::with_capacity(16 + pairs.len() * 16);
    push_pair(&mut body, "cmd", cmd);
    for (k, v) in pairs {
        push_pair(&mut body, k, v);
    }
    // Our bodies stay far below a million bytes, so six digits always hold the length.
    out.extend_from_slice(format!("{:<width$}", body.len(), width = LEN_FIELD).as_bytes());
    out.extend_from_slice(body.as_bytes());
}

fn push_pair(body: &mut String, key: &str, value: &str) {
    body.push_str(key);
    body.push('=');
    for c in value.chars() {
        if c == ';' {
            body.push(';');
        }
        body.push(c);
    }
    body.push(';');
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn frame(body: &str) -> Vec<u8> {
        let mut f = format!("{:<6}", body.len()).into_bytes();
        f.extend_from_slice(body.as_bytes());
        f
    }

    #[test]
    fn hydra_and_client_length_fields_both_read() {
        let body = "cmd=kvs-put;key=k;value=a;;b=c;";
        let left = frame(body);
        let right = [format!("{:>6}", body.len()).into_bytes(), body.into()].concat();
        for f in [left, right] {
            let (c, used) = decode(&f).unwrap().unwrap();
            assert_eq!(used, f.len());
            assert_eq!(c.cmd, "kvs-put");
            assert_eq!(c.get("key"), Some("k"));
            assert_eq!(c.get("value"), Some("a;b=c"));
        }
    }

    #[test]
    fn an_incomplete_frame_waits_and_bad_ones_are_named() {
        assert_eq!(decode(b"12  "), Ok(None));
        assert_eq!(decode(b"12    cmd=fin"), Ok(None));
        assert!(matches!(
            decode(b"abcdefcmd=x;"),
            Err(FrameError::BadLength(_))
        ));
        assert!(matches!(
            decode(b"-1    cmd=x;"),
            Err(FrameError::BadLength(_))
        ));
        assert_eq!(decode(b"999999"), Err(FrameError::TooLong(999_999)));
        assert!(matches!(
            decode(&frame("key=v;")),
            Err(FrameError::Garbled(_))
        ));
        assert!(matches!(
            decode(&frame("cmd=x;k=v")),
            Err(FrameError::Garbled(_))
        ));
        assert!(matches!(
            decode(&frame("cmd=x;novalue;")),
            Err(FrameError::Garbled(_))
        ));
        assert!(matches!(
            decode(&frame("cmd=;")),
            Err(FrameError::Garbled(_))
        ));
    }

    #[test]
    fn encoding_doubles_semicolons() {
        let mut out = Vec::new();
        encode(
            "kvs-get-response",
            &[("value", "x;y;"), ("rc", "0")],
            &mut out,
        );
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "39    cmd=kvs-get-response;value=x;;y;;;rc=0;"
        );
    }

    fn key() -> impl proptest::strategy::Strategy<Value = String> {
        "[a-zA-Z0-9_\\-\\[\\]/.]{1,40}"
    }

    proptest::proptest! {
        #[test]
        fn values_round_trip_exactly(
            pairs in proptest::collection::vec((key(), ".{0,60}"), 0..8),
            cmd in "[a-z\\-]{1,20}",
            split in 0usize..2000,
        ) {
            let borrowed: Vec<(&str, &str)> =
                pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let mut out = Vec::new();
            encode(&cmd, &borrowed, &mut out);
            // However the bytes arrive, nothing decodes before the whole frame is there.
            let cut = split % (out.len() + 1);
            if cut < out.len() {
                proptest::prop_assert_eq!(decode(&out[..cut]), Ok(None));
            }
            let (c, used) = decode(&out).unwrap().unwrap();
            proptest::prop_assert_eq!(used, out.len());
            proptest::prop_assert_eq!(c.cmd, cmd);
            proptest::prop_assert_eq!(c.pairs, pairs);
        }

        #[test]
        fn arbitrary_bytes_decode_or_fail_without_panic(
            input in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
        ) {
            if let Ok(Some((_, used))) = decode(&input) {
                proptest::prop_assert!(used <= input.len());
            }
        }

        #[test]
        fn garbled_bodies_behind_valid_lengths_fail_cleanly(body in "[a-z=;]{0,80}") {
            match decode(&frame(&body)) {
                Ok(Some((c, used))) => {
                    proptest::prop_assert_eq!(used, body.len() + LEN_FIELD);
                    proptest::prop_assert!(!c.cmd.is_empty());
                }
                Ok(None) => proptest::prop_assert!(false, "a whole frame read as incomplete"),
                Err(FrameError::Garbled(_)) => {}
                Err(e) => proptest::prop_assert!(false, "{e}"),
            }
        }
    }
}
