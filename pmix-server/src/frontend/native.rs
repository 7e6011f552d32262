//! The native front-end: pmix-rs clients' length-prefixed MessagePack frames
//! (`docs/PROTOCOL.md`), the one wire whose requests are the engine's own.
//!
//! A connection's first frame is the hello (namespace, rank, the secret from the client's
//! environment); nothing more is read until the engine has answered it. Every later frame is a
//! request, handed to the engine as it is. The job data a client is welcomed with is encoded
//! once per job record and the same bytes go to every client of the namespace.

use std::io;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use pmix_types::{Nspace, Proc, Status};
use pmix_wire::{
    ClientMsg, Event, FrameDecoder, FrameReader, JobImage, PROTOCOL_VERSION, Reply, ServerMsg,
    SharedReply, ToolWelcome, Welcome, decode_body, decode_hello, encode_frame,
};

use super::welcomes::{ShareFn, Welcomes};
use super::{SharedAnswer, Step};
use crate::engine::{Auth, GetAnswers, PeerCreds, ToolHello};
use crate::outbuf::OutQueue;

/// The largest hello accepted: a peer that has not authenticated may make the server hold
/// only this much of a frame (a hello is a namespace, a rank and a secret: well under 1 KiB).
const MAX_HELLO: usize = 4096;

/// What the native connections of a server share.
pub(crate) struct Common {
    decoder: FrameDecoder,
    /// Welcome frames and job image files: every client of a namespace gets the same.
    welcomes: Welcomes,
    /// A descriptor to pass with the byte at this index of the output just written (a
    /// welcome's image file), for the shell to take.
    pending_fd: Option<(usize, Arc<OwnedFd>)>,
}

impl Common {
    /// Frames up to `max_frame` bytes are accepted; `share` makes the job image files.
    pub(crate) fn new(max_frame: usize, share: ShareFn) -> Self {
        Common {
            decoder: FrameDecoder::new(max_frame),
            welcomes: Welcomes::new(share),
            pending_fd: None,
        }
    }

    pub(crate) fn decoder(&self) -> FrameDecoder {
        self.decoder
    }

    pub(crate) fn nspace_deregistered(&mut self, nspace: &Nspace) {
        self.welcomes.forget(nspace);
    }

    /// The descriptor to pass with the output just written, and the index of the byte of it
    /// to pass it with.
    pub(crate) fn take_pending_fd(&mut self) -> Option<(usize, Arc<OwnedFd>)> {
        self.pending_fd.take()
    }
}

enum State {
    /// Waiting for the hello.
    Fresh,
    /// The hello is with the engine: nothing more is read until it answers.
    Greeting(Proc),
    /// A tool's hello is with the engine.
    ToolGreeting,
    /// Serving requests (of a client, or of a tool under the name it was given).
    Ready(Proc),
    /// Refused or broken: nothing more is read.
    Done,
}

/// One pmix-rs client's connection.
pub(crate) struct NativeConn {
    reader: FrameReader,
    /// The frame limit once the client is accepted (before, [`MAX_HELLO`]).
    full: FrameDecoder,
    /// The peer's credentials as the kernel reports them, held against the registration's.
    creds: Option<PeerCreds>,
    state: State,
    closing: bool,
}

impl NativeConn {
    pub(crate) fn new(decoder: FrameDecoder, creds: Option<PeerCreds>) -> Self {
        let hello = FrameDecoder::new(MAX_HELLO.min(decoder.max()));
        NativeConn {
            reader: FrameReader::new(hello),
            full: decoder,
            creds,
            state: State::Fresh,
            closing: false,
        }
    }

    /// False while a whole frame waits to be taken: reading more would only buffer it.
    pub(crate) fn wants_input(&self) -> bool {
        !self.reader.has_frame()
    }

    pub(crate) fn read_from(&mut self, src: &mut impl io::Read) -> io::Result<usize> {
        self.reader.read_from(src)
    }

    pub(crate) fn is_closing(&self) -> bool {
        self.closing
    }

    fn who(&self) -> String {
        match &self.state {
            State::Greeting(p) | State::Ready(p) => p.to_string(),
            _ => "an unauthenticated peer".into(),
        }
    }

    pub(crate) fn step(&mut self, out: &mut Vec<u8>) -> Step {
        if self.closing
            || matches!(
                self.state,
                State::Greeting(_) | State::ToolGreeting | State::Done
            )
        {
            return Step::Idle;
        }
        let body = match self.reader.next_frame() {
            Ok(Some(body)) => body,
            Ok(None) => return Step::Idle,
            Err(e) => return self.broken(&e),
        };
        if matches!(self.state, State::Ready(_)) {
            return match decode_body::<ClientMsg>(body) {
                Ok(msg) => Step::Request(msg.id, msg.req),
                Err(e) => self.broken(&e),
            };
        }
        match decode_hello(body) {
            Ok(hello) => {
                let proc = Proc::new(hello.nspace, hello.rank);
                self.state = State::Greeting(proc.clone());
                Step::Hello {
                    proc,
                    auth: Auth::Secret {
                        secret: hello.secret,
                        creds: self.creds,
                    },
                    answers: GetAnswers::WholeProcess,
                }
            }
            // Not a client's: perhaps a tool's.
            Err(pmix_wire::Error::NotPmixRs) => match pmix_wire::decode_tool_hello(body) {
                Ok(hello) => self.tool_hello(hello),
                Err(pmix_wire::Error::NotPmixRs) => {
                    let e = pmix_wire::Error::NotPmixRs;
                    tracing::warn!("refusing a handshake: {e}");
                    self.refused(e.status(), &e.to_string(), out);
                    Step::Close
                }
                Err(e) => {
                    tracing::warn!("refusing a tool's handshake: {e}");
                    self.state = State::ToolGreeting;
                    self.refused(e.status(), &e.to_string(), out);
                    Step::Close
                }
            },
            Err(e) => {
                tracing::warn!("refusing a handshake: {e}");
                self.refused(e.status(), &e.to_string(), out);
                Step::Close
            }
        }
    }

    /// A tool's hello: to the engine with the uid the kernel reports for the socket (a tool
    /// has nothing else to show).
    fn tool_hello(&mut self, hello: pmix_wire::ToolHello) -> Step {
        self.state = State::ToolGreeting;
        let Some(creds) = self.creds else {
            // Cannot happen on a Unix socket under Linux; without it nothing is proven.
            tracing::warn!("refusing a tool: the kernel did not say who owns its socket");
            self.state = State::Done;
            self.closing = true;
            return Step::Close;
        };
        Step::ToolHello(ToolHello {
            proc: hello.proc(),
            creds,
            info: hello.info,
        })
    }

    /// The engine accepted a tool as `tool`.
    pub(crate) fn tool_accepted(&mut self, tool: &Proc, server: &Proc, out: &mut Vec<u8>) {
        if !matches!(self.state, State::ToolGreeting) {
            return;
        }
        self.state = State::Ready(tool.clone());
        self.reader.set_decoder(self.full);
        let welcome = ToolWelcome::Accepted {
            version: PROTOCOL_VERSION,
            tool: tool.clone(),
            server: server.clone(),
        };
        if let Err(e) = encode_frame(&welcome, out) {
            tracing::error!(%tool, "cannot encode a tool's welcome: {e}");
            self.closing = true;
        }
    }

    /// A frame that cannot be read: the stream cannot be trusted past it.
    fn broken(&mut self, e: &pmix_wire::Error) -> Step {
        tracing::warn!(who = %self.who(), "closing connection after a bad frame: {e}");
        self.state = State::Done;
        self.closing = true;
        Step::Close
    }

    /// The engine accepted the client into `image`'s namespace; `can_pass_fds` says whether
    /// the connection carries descriptors.
    pub(crate) fn accepted(
        &mut self,
        common: &mut Common,
        image: &JobImage,
        can_pass_fds: bool,
        out: &mut Vec<u8>,
    ) {
        let State::Greeting(proc) = &self.state else {
            return;
        };
        self.state = State::Ready(proc.clone());
        self.reader.set_decoder(self.full);
        match common.welcomes.welcome(image, can_pass_fds) {
            Some(w) => {
                if let Some(fd) = w.fd {
                    common.pending_fd = Some((out.len(), fd));
                }
                out.extend_from_slice(&w.frame);
            }
            // The client waits for a welcome that cannot come: better it learns now.
            None => self.refused(Status::ERR_PACK_FAILURE, "cannot encode the job data", out),
        }
    }

    pub(crate) fn refused(&mut self, status: Status, reason: &str, out: &mut Vec<u8>) {
        let encoded = if matches!(self.state, State::ToolGreeting) {
            encode_frame(
                &ToolWelcome::Refused {
                    status,
                    version: PROTOCOL_VERSION,
                    reason: reason.to_owned(),
                },
                out,
            )
        } else {
            encode_frame(
                &Welcome::Refused {
                    status,
                    version: PROTOCOL_VERSION,
                    reason: reason.to_owned(),
                },
                out,
            )
        };
        if let Err(e) = encoded {
            tracing::error!("cannot encode a refusal: {e}");
        }
        self.state = State::Done;
        self.closing = true;
    }

    pub(crate) fn replied(&mut self, id: u32, reply: Reply, out: &mut Vec<u8>) {
        if let Err(e) = encode_frame(&ServerMsg::Reply { id, reply }, out) {
            tracing::error!(who = %self.who(), "cannot encode a reply: {e}");
        }
    }

    /// The shared reply's frame head goes into this connection's output and its body is
    /// spliced in after it: one copy of the body for every connection it answers.
    pub(crate) fn replied_shared(&mut self, id: u32, answer: &SharedAnswer, out: &mut OutQueue) {
        let shared = answer
            .native
            .get_or_init(|| match SharedReply::new(answer.reply()) {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::error!("cannot encode a shared reply: {e}");
                    None
                }
            });
        let Some(shared) = shared else {
            return;
        };
        match shared.write_head(id, out.bytes()) {
            Ok(()) => out.splice(shared.body().clone()),
            Err(e) => tracing::error!(who = %self.who(), "cannot encode a reply: {e}"),
        }
    }

    pub(crate) fn event(&mut self, event: &Event, out: &mut Vec<u8>) {
        if let Err(e) = encode_frame(&ServerMsg::Event(event.clone()), out) {
            tracing::error!(who = %self.who(), "cannot encode an event: {e}");
        }
    }

    pub(crate) fn iof(&mut self, chunk: &pmix_wire::IofChunk, out: &mut Vec<u8>) {
        if let Err(e) = encode_frame(&ServerMsg::Iof(chunk.clone()), out) {
            tracing::error!(who = %self.who(), "cannot encode forwarded output: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::os::fd::BorrowedFd;

    use pmix_types::{Key, Scope, Value};
    use pmix_wire::{HEADER_LEN, Kv, ProcKvs, ReplyBody};

    use super::*;
    use crate::outbuf::PassFd;

    /// A socket that takes everything.
    struct Sink(Vec<u8>);

    impl io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl PassFd for Sink {
        fn write_with_fd(&mut self, _: &[u8], _: BorrowedFd<'_>) -> io::Result<usize> {
            Err(io::ErrorKind::Unsupported.into())
        }
    }

    /// A collecting fence's answer to many clients is queued for each as a few head bytes
    /// and the one shared body, and each client still reads exactly its own frame.
    #[test]
    fn a_shared_reply_is_not_copied_per_connection() {
        let kv = Kv {
            scope: Scope::GLOBAL,
            key: Key::new("blob").unwrap(),
            value: Value::ByteObject(vec![7; 1 << 20]),
        };
        let reply = Reply {
            status: Status::SUCCESS,
            body: ReplyBody::Fence {
                data: vec![ProcKvs {
                    proc: Proc::new(Nspace::new("job").unwrap(), 0),
                    kvs: vec![kv],
                }],
            },
        };
        let answer = SharedAnswer::new(Arc::new(reply.clone()));
        for id in [1u32, 300, 70_000] {
            let mut conn = NativeConn::new(FrameDecoder::new(1 << 30), None);
            let mut out = OutQueue::default();
            conn.replied_shared(id, &answer, &mut out);
            assert!(
                out.bytes().len() <= HEADER_LEN + 16,
                "{} bytes copied into the connection's buffer",
                out.bytes().len()
            );
            let mut sink = Sink(Vec::new());
            assert!(out.write_to(&mut sink));
            let mut want = Vec::new();
            encode_frame(
                &ServerMsg::Reply {
                    id,
                    reply: reply.clone(),
                },
                &mut want,
            )
            .unwrap();
            assert!(sink.0 == want, "the frame for request {id} differs");
        }
    }
}
