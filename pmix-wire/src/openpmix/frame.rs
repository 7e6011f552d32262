//! Framing: the 16-byte message header and a sans-IO reader that cuts a byte stream into
//! messages.

use crate::Error;

/// Bytes of a message header.
pub const HEADER_LEN: usize = 16;

/// Tag of event notifications a server pushes (`PMIX_PTL_TAG_NOTIFY`).
pub const TAG_NOTIFY: u32 = 0;
/// Tag of heartbeats (`PMIX_PTL_TAG_HEARTBEAT`).
pub const TAG_HEARTBEAT: u32 = 1;
/// Tag of forwarded IO (`PMIX_PTL_TAG_IOF`).
pub const TAG_IOF: u32 = 2;
/// Tags above this one are chosen by the requester, one per outstanding request; a reply
/// carries its request's tag (`PMIX_PTL_TAG_DYNAMIC`). The reference client starts at 101.
pub const TAG_DYNAMIC: u32 = 100;
/// Tag of the client's handshake message.
pub const TAG_HANDSHAKE: u32 = u32::MAX;
/// Peer index of the client's handshake message (it has none yet).
pub const PINDEX_HANDSHAKE: i32 = -1;

/// Largest handshake body the reference server accepts (`PMIX_MAX_CRED_SIZE`, 128 KiB).
pub const MAX_HANDSHAKE_LEN: usize = 128 << 10;

/// Default largest message body a [`MsgReader`] accepts: 256 MiB. (The reference sets no
/// limit by default.)
pub const DEFAULT_MAX_MESSAGE: usize = 256 << 20;

/// The header in front of every message (`pmix_ptl_hdr_t`): 16 bytes, the last 4 padding.
///
/// After the handshake it is big-endian; the client's handshake message alone carries it in
/// the sender's host order, which is little-endian on every platform this crate targets.
/// The padding is written as zero and ignored when read, as the reference does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Header {
    /// Client to server: the peer index the handshake assigned; server to client: the
    /// server's own index (ignored by clients).
    pub pindex: i32,
    /// The request tag (see [`TAG_DYNAMIC`]) or a reserved tag.
    pub tag: u32,
    /// Bytes of payload that follow.
    pub nbytes: u32,
}

impl Header {
    /// The big-endian encoding of every message after the handshake.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        self.encode_with(|v| v.to_be_bytes())
    }

    /// Reads a big-endian header.
    pub fn decode(b: &[u8; HEADER_LEN]) -> Header {
        Self::decode_with(b, u32::from_be_bytes)
    }

    /// The little-endian (host order) encoding of the client's handshake header.
    pub fn encode_handshake(&self) -> [u8; HEADER_LEN] {
        self.encode_with(|v| v.to_le_bytes())
    }

    /// Reads a little-endian handshake header.
    pub fn decode_handshake(b: &[u8; HEADER_LEN]) -> Header {
        Self::decode_with(b, u32::from_le_bytes)
    }

    fn encode_with(&self, bytes: impl Fn(u32) -> [u8; 4]) -> [u8; HEADER_LEN] {
        let mut out = [0; HEADER_LEN];
        out[..4].copy_from_slice(&bytes(self.pindex as u32));
        out[4..8].copy_from_slice(&bytes(self.tag));
        out[8..12].copy_from_slice(&bytes(self.nbytes));
        out
    }

    fn decode_with(b: &[u8; HEADER_LEN], int: impl Fn([u8; 4]) -> u32) -> Header {
        let [a0, a1, a2, a3, b0, b1, b2, b3, c0, c1, c2, c3, ..] = *b;
        Header {
            pindex: int([a0, a1, a2, a3]) as i32,
            tag: int([b0, b1, b2, b3]),
            nbytes: int([c0, c1, c2, c3]),
        }
    }
}

/// Appends one message (big-endian header, then `payload`) to `out`.
pub fn encode_message(
    out: &mut Vec<u8>,
    pindex: i32,
    tag: u32,
    payload: &[u8],
) -> Result<(), Error> {
    encode_message_with(out, pindex, tag, |o| {
        o.extend_from_slice(payload);
        Ok(())
    })
}

/// Appends one message to `out` whose payload `write` appends in place (no copy); the
/// header's length is filled in afterwards. On error `out` is left as it was.
pub fn encode_message_with(
    out: &mut Vec<u8>,
    pindex: i32,
    tag: u32,
    write: impl FnOnce(&mut Vec<u8>) -> Result<(), Error>,
) -> Result<(), Error> {
    encode_message_followed_by(out, pindex, tag, 0, write)
}

/// As [`encode_message_with`], for a message whose payload goes on with `trailing` bytes
/// the caller sends right after what `write` appended (bytes encoded once and shared by
/// several messages); the header counts them.
pub fn encode_message_followed_by(
    out: &mut Vec<u8>,
    pindex: i32,
    tag: u32,
    trailing: usize,
    write: impl FnOnce(&mut Vec<u8>) -> Result<(), Error>,
) -> Result<(), Error> {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER_LEN]);
    let patch = write(out).and_then(|()| {
        let len = out.len() - start - HEADER_LEN + trailing;
        u32::try_from(len)
            .map_err(|_| Error::Encode(format!("a payload of {len} bytes is too large")))
    });
    match patch {
        Ok(nbytes) => {
            let header = Header {
                pindex,
                tag,
                nbytes,
            };
            out[start..start + HEADER_LEN].copy_from_slice(&header.encode());
            Ok(())
        }
        Err(e) => {
            out.truncate(start);
            Err(e)
        }
    }
}

/// Appends the client's handshake message (little-endian header with pindex -1 and tag
/// `u32::MAX`, then `body`) to `out`.
pub fn encode_handshake_message(out: &mut Vec<u8>, body: &[u8]) -> Result<(), Error> {
    let nbytes = u32::try_from(body.len())
        .ok()
        .filter(|&n| n as usize <= MAX_HANDSHAKE_LEN)
        .ok_or(Error::FrameTooLarge {
            len: body.len(),
            max: MAX_HANDSHAKE_LEN,
        })?;
    let header = Header {
        pindex: PINDEX_HANDSHAKE,
        tag: TAG_HANDSHAKE,
        nbytes,
    };
    out.extend_from_slice(&header.encode_handshake());
    out.extend_from_slice(body);
    Ok(())
}

/// One unit cut from the stream by a [`MsgReader`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Incoming<'a> {
    /// The client's handshake message (little-endian header); decode `body` with
    /// [`ClientHandshake::decode`](super::ClientHandshake::decode).
    Handshake {
        /// Its header.
        header: Header,
        /// Its body.
        body: &'a [u8],
    },
    /// A message.
    Message {
        /// Its header.
        header: Header,
        /// Its payload.
        payload: &'a [u8],
    },
}

/// Cuts the bytes a peer sends into messages, without I/O: feed it what the socket gave, then
/// take messages until none is complete.
///
/// A server-side reader ([`MsgReader::new`]) expects the client's handshake message first
/// (little-endian header, body at most [`MAX_HANDSHAKE_LEN`]), then big-endian messages. A
/// client reads the server's handshake answer, which has no header, with
/// [`ServerReply::decode`](super::ServerReply::decode), and the messages after it with
/// [`MsgReader::after_handshake`].
///
/// A header announcing more than the maximum is an error before anything is allocated for it,
/// and stays one (the stream cannot be resynchronised): close the connection.
#[derive(Clone, Debug)]
pub struct MsgReader {
    buf: Vec<u8>,
    /// Bytes at the front of `buf` already handed out.
    start: usize,
    max: usize,
    expect_handshake: bool,
}

impl MsgReader {
    /// A server-side reader: the handshake first, then messages of at most `max_body` bytes.
    pub fn new(max_body: usize) -> Self {
        MsgReader {
            buf: Vec::new(),
            start: 0,
            max: max_body,
            expect_handshake: true,
        }
    }

    /// A reader of messages only (a client's, or a server's once the handshake is done).
    pub fn after_handshake(max_body: usize) -> Self {
        MsgReader {
            expect_handshake: false,
            ..MsgReader::new(max_body)
        }
    }

    /// The largest message body accepted.
    pub fn max_body(&self) -> usize {
        self.max
    }

    /// True until the handshake message has been taken.
    pub fn expects_handshake(&self) -> bool {
        self.expect_handshake
    }

    /// Appends bytes received from the peer.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes received and not handed out yet.
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The header of the next message with the largest body allowed for it, once a header
    /// has arrived.
    fn next_header(&self) -> Option<(Header, usize)> {
        let head = self
            .buf
            .get(self.start..)
            .and_then(|rest| rest.first_chunk::<HEADER_LEN>())?;
        Some(if self.expect_handshake {
            (
                Header::decode_handshake(head),
                self.max.min(MAX_HANDSHAKE_LEN),
            )
        } else {
            (Header::decode(head), self.max)
        })
    }

    /// True when a whole message is buffered (or the next header is over the maximum, which
    /// [`MsgReader::next_message`] reports): nothing more need be read before it is taken.
    pub fn has_message(&self) -> bool {
        self.next_header().is_some_and(|(header, max)| {
            let len = header.nbytes as usize;
            len > max || self.buffered() >= HEADER_LEN + len
        })
    }

    /// The next complete message, or `None` until more bytes arrive.
    pub fn next_message(&mut self) -> Result<Option<Incoming<'_>>, Error> {
        let start = self.start;
        let Some((header, max)) = self.next_header() else {
            return Ok(None);
        };
        let len = header.nbytes as usize;
        if len > max {
            return Err(Error::FrameTooLarge { len, max });
        }
        let body_start = start + HEADER_LEN;
        let end = body_start + len;
        if self.buf.len() < end {
            return Ok(None);
        }
        self.start = end;
        let handshake = std::mem::take(&mut self.expect_handshake);
        let body = self.buf.get(body_start..end).unwrap_or_default();
        Ok(Some(if handshake {
            Incoming::Handshake { header, body }
        } else {
            Incoming::Message {
                header,
                payload: body,
            }
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_in_both_orders() {
        let h = Header {
            pindex: -1,
            tag: u32::MAX,
            nbytes: 52,
        };
        let le = h.encode_handshake();
        assert_eq!(le, *b"\xff\xff\xff\xff\xff\xff\xff\xff\x34\0\0\0\0\0\0\0");
        assert_eq!(Header::decode_handshake(&le), h);
        let h = Header {
            pindex: 0,
            tag: 101,
            nbytes: 2,
        };
        assert_eq!(h.encode(), *b"\0\0\0\0\0\0\0\x65\0\0\0\x02\0\0\0\0");
        let mut padded = h.encode();
        padded[15] = 7;
        assert_eq!(Header::decode(&padded), h);
    }

    #[test]
    fn reader_takes_the_handshake_then_messages() {
        let mut stream = Vec::new();
        encode_handshake_message(&mut stream, b"hello").unwrap();
        encode_message(&mut stream, 3, 101, &[0x02, 0x00]).unwrap();
        encode_message(&mut stream, 3, 102, &[]).unwrap();
        let mut r = MsgReader::new(DEFAULT_MAX_MESSAGE);
        let mut got = Vec::new();
        for b in &stream {
            r.feed(std::slice::from_ref(b));
            while let Some(m) = r.next_message().unwrap() {
                got.push(match m {
                    Incoming::Handshake { header, body } => (true, header.tag, body.to_vec()),
                    Incoming::Message { header, payload } => (false, header.tag, payload.to_vec()),
                });
            }
        }
        assert_eq!(
            got,
            [
                (true, u32::MAX, b"hello".to_vec()),
                (false, 101, vec![2, 0]),
                (false, 102, vec![])
            ]
        );
        assert_eq!(r.buffered(), 0);
    }

    #[test]
    fn oversized_headers_are_refused_and_stay_refused() {
        let mut r = MsgReader::new(DEFAULT_MAX_MESSAGE);
        let h = Header {
            pindex: -1,
            tag: u32::MAX,
            nbytes: MAX_HANDSHAKE_LEN as u32 + 1,
        };
        r.feed(&h.encode_handshake());
        assert!(matches!(r.next_message(), Err(Error::FrameTooLarge { .. })));
        assert!(matches!(r.next_message(), Err(Error::FrameTooLarge { .. })));
        let mut r = MsgReader::after_handshake(10);
        r.feed(
            &Header {
                pindex: 0,
                tag: 5,
                nbytes: 11,
            }
            .encode(),
        );
        assert!(matches!(
            r.next_message(),
            Err(Error::FrameTooLarge { len: 11, max: 10 })
        ));
    }
}
