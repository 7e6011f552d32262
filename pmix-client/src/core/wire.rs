//! The wire personalities of the core: how a request is written and how what is read is cut
//! into messages and read back, both directions in one place.

use std::io::{self, Read};
use std::ops::Range;

use bytes::Bytes;

use pmix_wire::openpmix::{Incoming, MsgReader};
use pmix_wire::{ClientMsg, FrameReader, Reply, Request, encode_frame};

use super::local::Responder;
use super::openpmix::{Sent, Session};
use crate::Error;

/// Bytes an OpenPMIx read takes at a time.
const OPENPMIX_CHUNK: usize = 64 << 10;

/// Native frames at least this large are taken from the reader whole, without a copy (a
/// collecting fence's data is then kept in the very buffer it was read into).
pub(super) const LARGE_FRAME: usize = 1 << 20;

/// The protocol of a connection, fixed when it opens.
pub(crate) enum Wire {
    /// pmix-rs's own: a request is a [`ClientMsg`] frame, answered by a `ServerMsg`.
    Native,
    /// OpenPMIx 4.2: requests and answers translated by the session.
    Openpmix(Session),
    /// No server: a singleton's requests are answered in the process (`local/`); nothing is
    /// written or read.
    Local(Box<Responder>),
}

impl Wire {
    /// Appends request `id` to `out`. `Ok(Some(reply))` for a request nothing will answer:
    /// that is its reply once written. On error nothing was appended.
    pub(super) fn encode(
        &mut self,
        id: u32,
        req: Request,
        out: &mut Vec<u8>,
    ) -> Result<Option<Reply>, Error> {
        match self {
            Wire::Native => {
                encode_frame(&ClientMsg { id, req }, out)?;
                Ok(None)
            }
            Wire::Openpmix(session) => match session.encode(id, req, out)? {
                Sent::AwaitReply => Ok(None),
                Sent::Done(reply) => Ok(Some(reply)),
            },
            Wire::Local(_) => Err(Error::Protocol("a singleton sends nothing".into())),
        }
    }
}

/// What was read but not yet handed to the core, cut into messages by the connection's
/// protocol. Kept by whoever reads (outside the core's lock, so that a read that sleeps
/// holds up no get), fed by [`Input::read_from`] or [`Input::feed`].
pub(crate) struct Input(InputKind);

enum InputKind {
    /// Native frames.
    Native(FrameReader),
    /// OpenPMIx messages; `chunk` is what each read fills before it is fed to the reader.
    Openpmix { reader: MsgReader, chunk: Box<[u8]> },
}

/// One whole message from the server, as [`crate::core::ClientCore::handle_frame`] takes it.
pub(crate) enum Frame<'a> {
    /// A native frame's body.
    Native(&'a [u8]),
    /// A large native frame, taken whole from the reader: its storage and its body there.
    Large(Bytes, Range<usize>),
    /// An OpenPMIx message.
    Openpmix { tag: u32, payload: &'a [u8] },
}

impl Input {
    /// Native frames, `reader` holding whatever followed the handshake.
    pub(crate) fn native(reader: FrameReader) -> Input {
        Input(InputKind::Native(reader))
    }

    /// OpenPMIx messages, `reader` holding whatever followed the handshake.
    pub(crate) fn openpmix(reader: MsgReader) -> Input {
        Input(InputKind::Openpmix {
            reader,
            chunk: vec![0; OPENPMIX_CHUNK].into_boxed_slice(),
        })
    }

    /// Reads once from `src` into the buffer (as rustls's `read_tls` does: the caller owns
    /// the source; native frames are read in place, with no copy).
    pub(crate) fn read_from(&mut self, src: &mut impl Read) -> io::Result<usize> {
        match &mut self.0 {
            InputKind::Native(r) => r.read_from(src),
            InputKind::Openpmix { reader, chunk } => {
                let n = src.read(chunk)?;
                reader.feed(chunk.get(..n).unwrap_or_default());
                Ok(n)
            }
        }
    }

    /// Appends bytes received.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        match &mut self.0 {
            InputKind::Native(r) => r.extend(bytes),
            InputKind::Openpmix { reader, .. } => reader.feed(bytes),
        }
    }

    /// Bytes read and not yet handed out.
    pub(crate) fn buffered(&self) -> usize {
        match &self.0 {
            InputKind::Native(r) => r.buffered(),
            InputKind::Openpmix { reader, .. } => reader.buffered(),
        }
    }

    /// The next whole message buffered, if any. An error means the stream can no longer be
    /// read (a frame over the limit, a handshake message after the handshake).
    pub(crate) fn next_frame(&mut self) -> Result<Option<Frame<'_>>, Error> {
        match &mut self.0 {
            InputKind::Native(r) => {
                if let Some((buf, body)) = r.take_large_frame(LARGE_FRAME)? {
                    return Ok(Some(Frame::Large(Bytes::from(buf), body)));
                }
                Ok(r.next_frame()?.map(Frame::Native))
            }
            InputKind::Openpmix { reader, .. } => match reader.next_message()? {
                None => Ok(None),
                Some(Incoming::Message { header, payload }) => Ok(Some(Frame::Openpmix {
                    tag: header.tag,
                    payload,
                })),
                Some(_) => Err(Error::Protocol(
                    "a handshake message from the server".into(),
                )),
            },
        }
    }
}
