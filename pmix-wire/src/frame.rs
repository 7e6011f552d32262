//! Framing: a 4-byte big-endian body length, then a MessagePack body.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Error;
use crate::msg::{Hello, MAGIC, PROTOCOL_VERSION};

/// Bytes of the length prefix.
pub const HEADER_LEN: usize = 4;

/// Default largest accepted body: 256 MiB, enough for the job data of a million processes.
pub const DEFAULT_MAX_FRAME: usize = 256 << 20;

/// The outcome of looking for one frame at the start of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A whole frame: its body, and how many bytes of the buffer it used (header included).
    Frame {
        /// The body.
        body: &'a [u8],
        /// Bytes to consume from the buffer.
        consumed: usize,
    },
    /// The buffer holds only part of a frame; at least this many more bytes are needed.
    NeedMore(usize),
}

/// Splits a byte stream into frame bodies, refusing oversized frames before allocating.
#[derive(Clone, Copy, Debug)]
pub struct FrameDecoder {
    max: usize,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        FrameDecoder {
            max: DEFAULT_MAX_FRAME,
        }
    }
}

impl FrameDecoder {
    /// A decoder that accepts bodies of at most `max` bytes.
    pub fn new(max: usize) -> Self {
        FrameDecoder { max }
    }

    /// The largest body accepted.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Looks for one frame at the start of `buf`.
    pub fn decode<'a>(&self, buf: &'a [u8]) -> Result<Decoded<'a>, Error> {
        let Some(header) = buf.first_chunk::<HEADER_LEN>() else {
            return Ok(Decoded::NeedMore(HEADER_LEN - buf.len()));
        };
        let len = u32::from_be_bytes(*header) as usize;
        if len > self.max {
            return Err(Error::FrameTooLarge { len, max: self.max });
        }
        let total = HEADER_LEN + len;
        match buf.get(HEADER_LEN..total) {
            Some(body) => Ok(Decoded::Frame {
                body,
                consumed: total,
            }),
            None => Ok(Decoded::NeedMore(total - buf.len())),
        }
    }
}

/// Appends one frame holding `msg` to `out`.
pub fn encode_frame<T: Serialize>(msg: &T, out: &mut Vec<u8>) -> Result<(), Error> {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER_LEN]);
    if let Err(e) = rmp_serde::encode::write(out, msg) {
        out.truncate(start);
        return Err(Error::Encode(e.to_string()));
    }
    let len = out.len() - start - HEADER_LEN;
    let Ok(len32) = u32::try_from(len) else {
        out.truncate(start);
        return Err(Error::Encode(format!(
            "message of {len} bytes is too large for one frame"
        )));
    };
    out[start..start + HEADER_LEN].copy_from_slice(&len32.to_be_bytes());
    Ok(())
}

/// Decodes a frame body as a message of type `T`; trailing bytes are an error.
pub fn decode_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, Error> {
    let mut de = rmp_serde::Deserializer::from_read_ref(body);
    let msg = T::deserialize(&mut de).map_err(|e| Error::Malformed(e.to_string()))?;
    let rest = de.get_ref().len();
    if rest != 0 {
        return Err(Error::Malformed(format!(
            "{rest} trailing bytes after the message"
        )));
    }
    Ok(msg)
}

/// Decodes the handshake, telling a peer of another protocol or version apart from a
/// malformed one: the magic and the version are checked before the rest is read.
pub fn decode_hello(body: &[u8]) -> Result<Hello, Error> {
    #[derive(serde::Deserialize)]
    struct Head(String, u16, serde::de::IgnoredAny);
    let head: Result<Head, _> = rmp_serde::from_slice(body);
    match head {
        Ok(Head(magic, _, _)) if magic != MAGIC => return Err(Error::NotPmixRs),
        Ok(Head(_, v, _)) if v != PROTOCOL_VERSION => {
            return Err(Error::VersionMismatch {
                theirs: v,
                ours: PROTOCOL_VERSION,
            });
        }
        Ok(_) => {}
        Err(_) => return Err(Error::NotPmixRs),
    }
    decode_body(body)
}
