//! Framing: a 4-byte big-endian body length, then a MessagePack body.

use std::ops::Range;

use bytes::Bytes;
use pmix_types::Status;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::decode::decode_body;
use crate::msg::{Hello, MAGIC, PROTOCOL_VERSION, Reply, ServerMsg, Welcome, WelcomeJob};
use crate::{Error, scan};

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
        // Cannot overflow on 64-bit targets; on 32-bit ones a maximum near usize::MAX could.
        let total = len
            .checked_add(HEADER_LEN)
            .ok_or(Error::FrameTooLarge { len, max: self.max })?;
        match buf.get(HEADER_LEN..total) {
            Some(body) => Ok(Decoded::Frame {
                body,
                consumed: total,
            }),
            None => Ok(Decoded::NeedMore(total - buf.len())),
        }
    }
}

/// A read buffer for an I/O shell: append what the socket gave, then take whole frame bodies
/// until none is complete.
///
/// Frames are handed out as slices of the buffer, without copying; the space they used is
/// reclaimed on the next [`extend`](FrameReader::extend), so a read that brought many small
/// frames costs one move of the leftover bytes, not one per frame.
#[derive(Debug, Default)]
pub struct FrameReader {
    decoder: FrameDecoder,
    /// Initialized storage; bytes `start..end` are received and not yet handed out, the rest
    /// is room for the next read (zeroed once, when the buffer grew, not before every read).
    buf: Vec<u8>,
    /// Bytes at the front of `buf` that belong to frames already handed out.
    start: usize,
    /// End of the received bytes.
    end: usize,
}

/// A frame taken whole from a [`FrameReader`]: the storage it was read into, and where its
/// body lies there.
pub type TakenFrame = (Vec<u8>, Range<usize>);

/// The least room [`FrameReader::read_from`] offers a read: a read that returns less emptied
/// the source (a non-blocking socket: until more arrives).
pub const READ_ROOM: usize = 64 << 10;

impl FrameReader {
    /// An empty reader that splits frames with `decoder`.
    pub fn new(decoder: FrameDecoder) -> Self {
        FrameReader {
            decoder,
            buf: Vec::new(),
            start: 0,
            end: 0,
        }
    }

    /// Makes room for at least `n` more bytes after `end`: first by moving the unread bytes
    /// to the front, then by growing.
    fn reserve(&mut self, n: usize) {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        // A big frame's buffer does not stay forever once it is consumed (given up before
        // growing, so that room asked for now is kept).
        if self.end == 0 && self.buf.len() > 4 * READ_ROOM {
            self.buf = vec![0; READ_ROOM];
        }
        if self.buf.len() - self.end < n {
            self.buf.resize(self.end + n, 0);
        }
    }

    /// Appends bytes received from the peer.
    pub fn extend(&mut self, bytes: &[u8]) {
        self.reserve(bytes.len());
        self.buf[self.end..self.end + bytes.len()].copy_from_slice(bytes);
        self.end += bytes.len();
    }

    /// Reads once from `src` straight into the buffer (no copy, no zeroing of the room each
    /// time); returns what `read` returned (`Ok(0)`: end of stream).
    ///
    /// The room offered grows with what has arrived, never with what a header announces: at
    /// most as much again as is buffered (and 64 KiB at least), so a peer that
    /// announces a large frame and sends little costs little.
    pub fn read_from(&mut self, src: &mut impl std::io::Read) -> std::io::Result<usize> {
        let room = READ_ROOM.max(self.needed().min(self.buffered()));
        self.reserve(room);
        let n = src.read(&mut self.buf[self.end..])?;
        self.end += n;
        Ok(n)
    }

    /// The body of the next complete frame, or `None` until more bytes arrive.
    ///
    /// An error (a frame over the maximum) is final: the stream cannot be resynchronised, and
    /// the same error is returned again until the reader is dropped.
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, Error> {
        let rest = &self.buf[self.start..self.end];
        match self.decoder.decode(rest)? {
            Decoded::Frame { body, consumed } => {
                self.start += consumed;
                if self.start == self.end {
                    self.start = 0;
                    self.end = 0;
                }
                Ok(Some(body))
            }
            Decoded::NeedMore(_) => Ok(None),
        }
    }

    /// The next complete frame if its body is at least `min` bytes long, as the storage it was
    /// read into and the body's range there: the reader's own buffer is handed over (no copy of
    /// a large frame, which would otherwise be copied out by whoever keeps it), and whatever
    /// followed the frame moves to a fresh buffer. `None` when the next frame is smaller or
    /// not complete: take it with [`FrameReader::next_frame`].
    pub fn take_large_frame(&mut self, min: usize) -> Result<Option<TakenFrame>, Error> {
        let (body, consumed) = match self.decoder.decode(&self.buf[self.start..self.end])? {
            Decoded::Frame { body, consumed } if body.len() >= min => (body.len(), consumed),
            _ => return Ok(None),
        };
        let frame_end = self.start + consumed;
        let rest = self
            .buf
            .get(frame_end..self.end)
            .unwrap_or_default()
            .to_vec();
        let mut taken = std::mem::take(&mut self.buf);
        taken.truncate(frame_end);
        let range = frame_end - body..frame_end;
        self.start = 0;
        self.end = 0;
        if !rest.is_empty() {
            self.extend(&rest);
        }
        Ok(Some((taken, range)))
    }

    /// How many more bytes the next frame needs at least (0 when one is complete or the
    /// buffered header is over the maximum); a hint for sizing the next read.
    pub fn needed(&self) -> usize {
        match self.decoder.decode(&self.buf[self.start..self.end]) {
            Ok(Decoded::NeedMore(n)) => n,
            _ => 0,
        }
    }

    /// Bytes received and not yet handed out as frames.
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// True when a whole frame is buffered (or the next header is over the maximum, which
    /// [`FrameReader::next_frame`] reports): nothing more need be read before it is taken.
    pub fn has_frame(&self) -> bool {
        !matches!(
            self.decoder.decode(&self.buf[self.start..self.end]),
            Ok(Decoded::NeedMore(_))
        )
    }

    /// Bytes of storage the reader holds (received or room for the next read).
    pub fn held(&self) -> usize {
        self.buf.len()
    }

    /// Changes the largest frame accepted from now on (a server accepts only a small frame
    /// before a peer has authenticated, its full maximum after).
    pub fn set_decoder(&mut self, decoder: FrameDecoder) {
        self.decoder = decoder;
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

/// Decodes concatenated frames, each holding a list of `T` (how hosts and name servers join
/// the contributions of several servers: one frame each, back to back), into one list.
pub fn decode_frame_lists<T: DeserializeOwned>(mut bytes: &[u8]) -> Result<Vec<T>, Error> {
    let decoder = FrameDecoder::default();
    let mut all = Vec::new();
    while !bytes.is_empty() {
        match decoder.decode(bytes)? {
            Decoded::Frame { body, consumed } => {
                let mut part: Vec<T> = decode_body(body)?;
                all.append(&mut part);
                bytes = &bytes[consumed..];
            }
            Decoded::NeedMore(_) => {
                return Err(Error::Malformed("a truncated frame".into()));
            }
        }
    }
    Ok(all)
}

/// Appends the frame accepting a client, with [`PROTOCOL_VERSION`] and `job`.
///
/// A server that welcomes many clients of one namespace encodes this once and sends the bytes
/// to each.
pub fn encode_welcome(job: &WelcomeJob, out: &mut Vec<u8>) -> Result<(), Error> {
    encode_frame(
        &Welcome::Accepted {
            version: PROTOCOL_VERSION,
            job: job.clone(),
        },
        out,
    )
}

/// A reply encoded once and framed for several requests, each frame differing only in the
/// request id: a collecting fence answers every participant with the same, possibly large,
/// data.
///
/// [`write`](SharedReply::write) appends exactly what [`encode_frame`] of
/// [`ServerMsg::Reply`] would. This relies on MessagePack writing a struct variant's fields
/// one after the other with the reply last, so a frame is the small per-id part up to the
/// reply followed by the shared reply bytes; `write` checks that assumption on every call
/// rather than trusting it. A writer that can send bytes from several places takes the
/// per-id part alone ([`write_head`](SharedReply::write_head)) and sends the shared
/// [`body`](SharedReply::body) after it, never copying the body.
#[derive(Clone, Debug)]
pub struct SharedReply {
    /// The reply's MessagePack encoding.
    body: Bytes,
    /// The encoding of [`SharedReply::placeholder`], which `write` encodes in the reply's
    /// place to learn where the reply starts.
    placeholder: Vec<u8>,
}

impl SharedReply {
    /// Encodes `reply` once.
    pub fn new(reply: &Reply) -> Result<Self, Error> {
        let encode = |r: &Reply| rmp_serde::to_vec(r).map_err(|e| Error::Encode(e.to_string()));
        Ok(SharedReply {
            body: encode(reply)?.into(),
            placeholder: encode(&Self::placeholder())?,
        })
    }

    /// The smallest reply there is, so the per-id head costs next to nothing to encode.
    fn placeholder() -> Reply {
        Reply::status(Status::SUCCESS)
    }

    /// Appends the frame answering request `id` with the reply to `out`.
    pub fn write(&self, id: u32, out: &mut Vec<u8>) -> Result<(), Error> {
        // The head is a few bytes; one reservation spares the copy of a big body on growth.
        out.reserve(HEADER_LEN + 16 + self.body.len());
        self.write_head(id, out)?;
        out.extend_from_slice(&self.body);
        Ok(())
    }

    /// The reply's encoding: what follows [`write_head`](SharedReply::write_head)'s bytes in
    /// the frame.
    pub fn body(&self) -> &Bytes {
        &self.body
    }

    /// Appends the frame answering request `id` up to the reply, the frame's length counting
    /// the [`body`](SharedReply::body) that must follow.
    pub fn write_head(&self, id: u32, out: &mut Vec<u8>) -> Result<(), Error> {
        let start = out.len();
        let head = ServerMsg::Reply {
            id,
            reply: Self::placeholder(),
        };
        encode_frame(&head, out)?;
        let Some(reply_at) = out.len().checked_sub(self.placeholder.len()) else {
            out.truncate(start);
            return Err(Error::Encode(
                "the reply head is shorter than its reply".into(),
            ));
        };
        if reply_at < start + HEADER_LEN || out[reply_at..] != self.placeholder[..] {
            out.truncate(start);
            return Err(Error::Encode(
                "the reply is not the last thing in its message; cannot share it".into(),
            ));
        }
        out.truncate(reply_at);
        let len = out.len() - start - HEADER_LEN + self.body.len();
        let Ok(len32) = u32::try_from(len) else {
            out.truncate(start);
            return Err(Error::Encode(format!(
                "reply of {len} bytes is too large for one frame"
            )));
        };
        out[start..start + HEADER_LEN].copy_from_slice(&len32.to_be_bytes());
        Ok(())
    }
}

/// Decodes the handshake, telling a peer of another protocol or version apart from a
/// malformed one: the magic and the version are checked before the rest is read.
///
/// Only the first two elements of the `Hello` array are read for that check, so a future
/// version may change everything after the version number and still be told apart cleanly.
/// A body that is not an array opening with the magic string is [`Error::NotPmixRs`]; one with
/// the magic and another version is [`Error::VersionMismatch`], whatever follows.
pub fn decode_hello(body: &[u8]) -> Result<Hello, Error> {
    let mut r = scan::Head::new(body);
    if r.array_len().is_none_or(|n| n < 2) {
        return Err(Error::NotPmixRs);
    }
    if r.str() != Some(MAGIC.as_bytes()) {
        return Err(Error::NotPmixRs);
    }
    let theirs = r
        .uint()
        .ok_or_else(|| Error::Malformed("handshake version is not a number".into()))?;
    if theirs != u64::from(PROTOCOL_VERSION) {
        let theirs = u16::try_from(theirs)
            .map_err(|_| Error::Malformed(format!("handshake version {theirs} is out of range")))?;
        return Err(Error::VersionMismatch {
            theirs,
            ours: PROTOCOL_VERSION,
        });
    }
    decode_body(body)
}
