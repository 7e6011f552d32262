//! One tool's connection to one server, blocking: the native protocol to a pmix-rs server
//! (its Unix socket, a [`ToolHello`]), or the OpenPMIx wire to any OpenPMIx server (loopback
//! TCP, the tool handshake of libpmix), each request answered before the next is sent.
//!
//! Here are the tool's handshakes only: once connected, a [`ClientCore`] speaks the wire, as
//! it does for a client (`core/`), and this is its blocking driver. What the server sends
//! unasked (forwarded output, events) is kept, in order, for the tool to dispatch
//! ([`Unsolicited`]): read while a request waits for its answer, or by [`Link::receive`].

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use pmix_types::{Info, Proc, Status};
use pmix_wire::openpmix::{
    ClientHandshake, DEFAULT_MAX_MESSAGE, Dialect, Incoming, MsgReader, Request as OpenpmixRequest,
    ToolReply, Version, encode_message_with,
};
use pmix_wire::{
    Event, FrameDecoder, FrameReader, IofChunk, Reply, Request, ToolHello, ToolWelcome,
    decode_body, encode_frame,
};

use crate::Error;
use crate::conn::Stream;
use crate::core::openpmix::{Context, Session};
use crate::core::wire::Wire;
use crate::core::{ClientCore, Input, Output};

/// A connected server, and the names the handshake gave.
pub(crate) struct Link {
    /// Who the tool is at this server.
    pub(crate) me: Proc,
    /// The server's name.
    pub(crate) server: Proc,
    core: ClientCore,
    stream: Stream,
    input: Input,
    /// What the server sent unasked and the tool has not dispatched yet.
    pub(crate) unsolicited: VecDeque<Unsolicited>,
}

/// Most unsolicited messages a link keeps for a tool that does not dispatch them: beyond,
/// the oldest go (a tool that never looks must not grow without bound).
const MAX_UNSOLICITED: usize = 4096;

/// What a server sends a tool unasked.
#[derive(Clone, Debug, PartialEq)]
pub enum Unsolicited {
    /// Output the tool pulled (`PMIx_IOF_pull`).
    Iof(IofChunk),
    /// An event.
    Event(Event),
}

fn io_err(path: &str) -> impl Fn(io::Error) -> Error + '_ {
    move |source| Error::Connect {
        path: path.to_owned(),
        source,
    }
}

impl Link {
    /// Connects to a pmix-rs server's socket as a tool named `name` (or asking for a name).
    pub(crate) fn native(
        socket: &Path,
        name: Option<Proc>,
        info: Vec<Info>,
        timeout: Duration,
    ) -> Result<Link, Error> {
        let path = socket.display().to_string();
        let mut stream = UnixStream::connect(socket).map_err(io_err(&path))?;
        stream
            .set_read_timeout(Some(timeout))
            .map_err(io_err(&path))?;
        let mut out = Vec::new();
        encode_frame(&ToolHello::new(name, info), &mut out)?;
        stream.write_all(&out).map_err(io_err(&path))?;
        let mut reader = FrameReader::new(FrameDecoder::new(pmix_wire::DEFAULT_MAX_FRAME));
        let body = next_frame(&mut reader, &mut stream)?;
        match decode_body::<ToolWelcome>(&body)? {
            ToolWelcome::Accepted { tool, server, .. } => Ok(Link {
                me: tool,
                server,
                core: ClientCore::new(Wire::Native),
                stream: Stream::Unix(stream),
                input: Input::native(reader),
                unsolicited: VecDeque::new(),
            }),
            ToolWelcome::Refused { status, reason, .. } => Err(Error::Refused { status, reason }),
        }
    }

    /// Connects to an OpenPMIx server at `uri` (`<nspace>.<rank>;tcp4://<addr>:<port>`) as a
    /// libpmix tool asking for a name would; `version` is the server's, from its rendezvous
    /// file, when known.
    pub(crate) fn openpmix(
        uri: &str,
        version: Option<&str>,
        info: Vec<Info>,
        timeout: Duration,
    ) -> Result<Link, Error> {
        let addr = uri
            .split_once(';')
            .and_then(|(_, a)| {
                a.strip_prefix("tcp4://")
                    .or_else(|| a.strip_prefix("tcp6://"))
            })
            .and_then(|a| a.parse::<SocketAddr>().ok())
            .ok_or_else(|| Error::BadParam(format!("{uri:?} is no OpenPMIx server URI")))?;
        let mut stream = TcpStream::connect_timeout(&addr, timeout).map_err(io_err(uri))?;
        stream.set_nodelay(true).map_err(io_err(uri))?;
        stream
            .set_read_timeout(Some(timeout))
            .map_err(io_err(uri))?;
        let uid = nix::unistd::geteuid().as_raw();
        let gid = nix::unistd::getegid().as_raw();
        let dialect = Dialect::V41;
        let mut hello = ClientHandshake::tool_needs_id(uid, gid, dialect);
        // PRRTE's `prterun` reads them (it crashes without), as libpmix tools send them.
        hello.info = info;
        hello.stray_byte = ClientHandshake::stray_byte_for(
            version.and_then(|v| Version::parse(v.trim_start_matches('v'))),
        );
        let mut out = Vec::new();
        hello.encode(&mut out)?;
        stream.write_all(&out).map_err(io_err(uri))?;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let (reply, used) = loop {
            if let Some(done) = ToolReply::decode(&buf, true)? {
                break done;
            }
            let n = read_some(&mut stream, &mut chunk).map_err(io_err(uri))?;
            if n == 0 {
                return Err(Error::Refused {
                    status: Status::ERR_UNREACH,
                    reason: "the OpenPMIx server closed the connection during the tool \
                             handshake"
                        .into(),
                });
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        if !reply.status.is_success() || !reply.security.is_success() {
            return Err(Error::Refused {
                status: if reply.status.is_success() {
                    reply.security
                } else {
                    reply.status
                },
                reason: "the OpenPMIx server refused the tool".into(),
            });
        }
        let (Some(me), Some(server)) = (reply.assigned, reply.server) else {
            return Err(Error::Protocol("a tool reply without names".into()));
        };
        let mut reader = MsgReader::after_handshake(DEFAULT_MAX_MESSAGE);
        reader.feed(buf.get(used..).unwrap_or_default());
        let cx = Context {
            me: me.clone(),
            dialect,
            hostname: None,
        };
        // The reference's tools send their messages with peer index 0.
        let pindex = 0;
        let mut session = Session::new(cx, uid, pindex);
        // As libpmix's tool init: ask for the job data of its own namespace (a server
        // expects it; the answer holds nothing a tool needs).
        let tag = session.fresh_tag();
        out.clear();
        encode_message_with(&mut out, pindex, tag, |o| {
            OpenpmixRequest::Req.encode(dialect, o)
        })?;
        stream.write_all(&out).map_err(lost)?;
        let mut unasked = Vec::new();
        'answered: loop {
            while let Some(m) = reader.next_message()? {
                if let Incoming::Message { header, payload } = m {
                    if header.tag == tag {
                        break 'answered;
                    }
                    // Kept for the core, which reads what the server sends unasked.
                    unasked.push((header, payload.to_vec()));
                }
            }
            let n = read_some(&mut stream, &mut chunk).map_err(lost)?;
            if n == 0 {
                return Err(Error::LostConnection);
            }
            reader.feed(&chunk[..n]);
        }
        let mut link = Link {
            me,
            server,
            core: ClientCore::new(Wire::Openpmix(session)),
            stream: Stream::Tcp(stream),
            input: Input::openpmix(reader),
            unsolicited: VecDeque::new(),
        };
        for (header, payload) in unasked {
            link.core.handle_frame(crate::core::wire::Frame::Openpmix {
                tag: header.tag,
                payload: &payload,
            })?;
        }
        link.take_unasked();
        Ok(link)
    }

    /// The connection's core: its store holds the job data and process data the server's
    /// answers brought (a tool's `get.rs` reads it).
    pub(crate) fn core_mut(&mut self) -> &mut ClientCore {
        &mut self.core
    }

    /// Sends `req` and waits for its answer.
    pub(crate) fn request(&mut self, req: Request) -> Result<Reply, Error> {
        let s = self.core.submit(req, true)?;
        let mut out = Vec::new();
        self.core.poll_transmit(&mut out);
        if let Err(e) = self.stream.write_all(&out) {
            self.core.cancel(s.id);
            return Err(lost(e));
        }
        if s.once_written {
            self.core.handle_written(s.id);
        }
        loop {
            while let Some(o) = self.core.poll_output() {
                match o {
                    Output::Complete(id, r) if id == s.id => return r,
                    other => self.keep(other),
                }
            }
            let read = match self.dispatch_buffered() {
                Ok(true) => Ok(()),
                Ok(false) => self.read_once(),
                Err(e) => Err(e),
            };
            if let Err(e) = read {
                self.core.cancel(s.id);
                return Err(e);
            }
        }
    }

    /// Keeps what the core handed out unasked for the tool; stray answers (to a request
    /// given up on) are no concern of a blocking tool.
    fn keep(&mut self, o: Output) {
        let u = match o {
            Output::Iof(c) => Unsolicited::Iof(c),
            Output::Event(e) => Unsolicited::Event(e),
            _ => return,
        };
        if self.unsolicited.len() >= MAX_UNSOLICITED {
            self.unsolicited.pop_front();
        }
        self.unsolicited.push_back(u);
    }

    /// Keeps everything the core handed out.
    fn take_unasked(&mut self) {
        while let Some(o) = self.core.poll_output() {
            self.keep(o);
        }
    }

    /// Hands every whole message already read to the core; false when there was none.
    fn dispatch_buffered(&mut self) -> Result<bool, Error> {
        let mut any = false;
        while let Some(frame) = self.input.next_frame()? {
            self.core.handle_frame(frame)?;
            any = true;
        }
        Ok(any)
    }

    /// Reads once, waiting as long as the socket's timeout allows.
    fn read_once(&mut self) -> Result<(), Error> {
        loop {
            match self.input.read_from(&mut self.stream) {
                Ok(0) => {
                    self.core.handle_lost();
                    return Err(Error::LostConnection);
                }
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(lost(e)),
            }
        }
    }
}

impl Link {
    /// Waits until `deadline` for the server to send something unasked; `None` if it sent
    /// nothing by then. What is already kept comes first.
    pub(crate) fn receive(&mut self, deadline: Instant) -> Result<Option<Unsolicited>, Error> {
        loop {
            self.take_unasked();
            if let Some(u) = self.unsolicited.pop_front() {
                return Ok(Some(u));
            }
            if self.dispatch_buffered()? {
                continue;
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            // A zero timeout means none to the socket: wait at least a millisecond.
            let left = deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1));
            self.stream.set_read_timeout(Some(left)).map_err(lost)?;
            match self.read_once() {
                Ok(()) => {}
                Err(Error::Timeout) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
    }

    /// Sets how long a request's answer may take again, after [`Link::receive`] changed it.
    pub(crate) fn set_timeout(&mut self, timeout: Duration) -> Result<(), Error> {
        self.stream.set_read_timeout(Some(timeout)).map_err(lost)
    }
}

fn lost(e: io::Error) -> Error {
    if matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    ) {
        Error::Timeout
    } else {
        Error::LostConnection
    }
}

/// The next whole frame's body.
fn next_frame(reader: &mut FrameReader, stream: &mut UnixStream) -> Result<Vec<u8>, Error> {
    loop {
        if let Some(body) = reader.next_frame()? {
            return Ok(body.to_vec());
        }
        match reader.read_from(stream) {
            Ok(0) => return Err(Error::LostConnection),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(lost(e)),
        }
    }
}

fn read_some(stream: &mut impl Read, chunk: &mut [u8]) -> io::Result<usize> {
    loop {
        match stream.read(chunk) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            r => return r,
        }
    }
}
