//! One tool's connection to one server, blocking: the native protocol to a pmix-rs server
//! (its Unix socket, a [`ToolHello`]), or the OpenPMIx wire to any OpenPMIx server (loopback
//! TCP, the tool handshake of libpmix), each request answered before the next is sent.
//! What the server sends unasked (forwarded output, events) is kept, in order, for the tool
//! to dispatch ([`Unsolicited`]): read while a request waits for its answer, or by
//! [`Link::receive`].

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use pmix_types::{Info, Proc, Status};
use pmix_wire::openpmix::{
    ClientHandshake, Cmd, DEFAULT_MAX_MESSAGE, Dialect, Incoming, MsgReader,
    Request as OpenpmixRequest, ToolReply, Version, encode_message_with,
};
use pmix_wire::{
    ClientMsg, Event, FrameDecoder, FrameReader, IofChunk, Reply, Request, ServerMsg, ToolHello,
    ToolWelcome, decode_body, encode_frame,
};

use crate::Error;
use crate::core::openpmix::{Answer, Context, Outbound};

/// A connected server, and the names the handshake gave.
pub(crate) struct Link {
    /// Who the tool is at this server.
    pub(crate) me: Proc,
    /// The server's name.
    pub(crate) server: Proc,
    wire: Wire,
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

/// Keeps `u` for the tool, dropping the oldest beyond [`MAX_UNSOLICITED`].
fn keep(queue: &mut VecDeque<Unsolicited>, u: Unsolicited) {
    if queue.len() >= MAX_UNSOLICITED {
        queue.pop_front();
    }
    queue.push_back(u);
}

/// An OpenPMIx message the server sent on a reserved tag: output (tag 2), an event (tag 0).
fn openpmix_unsolicited(tag: u32, payload: &[u8], dialect: Dialect) -> Option<Unsolicited> {
    match tag {
        pmix_wire::openpmix::TAG_IOF => {
            let c = pmix_wire::openpmix::IofChunk::decode(payload, dialect).ok()?;
            Some(Unsolicited::Iof(IofChunk {
                tag: c.local_id,
                source: c.source,
                channel: c.channel,
                info: c.info,
                data: c.data,
            }))
        }
        pmix_wire::openpmix::TAG_NOTIFY => crate::core::openpmix::event(payload, dialect)
            .ok()
            .map(Unsolicited::Event),
        _ => None,
    }
}

enum Wire {
    Native {
        stream: UnixStream,
        reader: FrameReader,
        next_id: u32,
    },
    Openpmix {
        stream: TcpStream,
        reader: MsgReader,
        cx: Context,
        uid: u32,
        pindex: i32,
        next_tag: u32,
    },
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
                wire: Wire::Native {
                    stream,
                    reader,
                    next_id: 1,
                },
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
        let mut link = Link {
            me: me.clone(),
            server,
            wire: Wire::Openpmix {
                stream,
                reader,
                cx: Context {
                    me,
                    dialect,
                    hostname: None,
                },
                uid,
                // The reference's tools send their messages with peer index 0.
                pindex: 0,
                next_tag: pmix_wire::openpmix::TAG_DYNAMIC,
            },
            unsolicited: VecDeque::new(),
        };
        // As libpmix's tool init: ask for the job data of its own namespace (a server
        // expects it; the answer holds nothing a tool needs).
        link.exchange_openpmix(OpenpmixRequest::Req, None)?;
        Ok(link)
    }

    /// Sends `req` and waits for its answer.
    pub(crate) fn request(&mut self, req: Request) -> Result<Reply, Error> {
        let Link {
            wire, unsolicited, ..
        } = self;
        match wire {
            Wire::Native {
                stream,
                reader,
                next_id,
            } => {
                let id = *next_id;
                *next_id = next_id.wrapping_add(1).max(1);
                let mut out = Vec::new();
                encode_frame(&ClientMsg { id, req }, &mut out)?;
                stream.write_all(&out).map_err(lost)?;
                loop {
                    let body = next_frame(reader, stream)?;
                    match decode_body::<ServerMsg>(&body)? {
                        ServerMsg::Reply { id: got, reply } if got == id => return Ok(reply),
                        ServerMsg::Iof(c) => keep(unsolicited, Unsolicited::Iof(c)),
                        ServerMsg::Event(e) => keep(unsolicited, Unsolicited::Event(e)),
                        // Stray answers are no concern of a blocking tool.
                        _ => {}
                    }
                }
            }
            Wire::Openpmix { cx, uid, .. } => {
                match crate::core::openpmix::outbound(req, &cx.me, *uid) {
                    Outbound::Send(r, answer) => self.exchange_openpmix(r, Some(answer)),
                    Outbound::Unanswered(_) | Outbound::Unsupported(_) => Err(Error::NotSupported(
                        "a tool's request the OpenPMIx server has no answer for".into(),
                    )),
                }
            }
        }
    }

    /// Sends an OpenPMIx request and reads its answer as `answer` says (`None`: the answer
    /// is read and dropped, as the job data of `REQ`).
    fn exchange_openpmix(
        &mut self,
        req: OpenpmixRequest,
        answer: Option<Answer>,
    ) -> Result<Reply, Error> {
        let Link {
            wire, unsolicited, ..
        } = self;
        let Wire::Openpmix {
            stream,
            reader,
            cx,
            pindex,
            next_tag,
            ..
        } = wire
        else {
            return Err(Error::Protocol("not an OpenPMIx link".into()));
        };
        let tag = *next_tag;
        *next_tag = next_tag
            .wrapping_add(1)
            .max(pmix_wire::openpmix::TAG_DYNAMIC);
        let cmd: Cmd = req.cmd();
        let mut out = Vec::new();
        encode_message_with(&mut out, *pindex, tag, |o| req.encode(cx.dialect, o))?;
        stream.write_all(&out).map_err(lost)?;
        let mut chunk = [0u8; 64 << 10];
        loop {
            while let Some(m) = reader.next_message()? {
                if let Incoming::Message { header, payload } = m {
                    if header.tag != tag {
                        if let Some(u) = openpmix_unsolicited(header.tag, payload, cx.dialect) {
                            keep(unsolicited, u);
                        }
                        continue;
                    }
                    return match answer {
                        Some(a) => Ok(crate::core::openpmix::inbound(cmd, a, payload, cx)?),
                        None => Ok(Reply::status(Status::SUCCESS)),
                    };
                }
            }
            let n = read_some(stream, &mut chunk).map_err(lost)?;
            if n == 0 {
                return Err(Error::LostConnection);
            }
            reader.feed(&chunk[..n]);
        }
    }
}

impl Link {
    /// Waits until `deadline` for the server to send something unasked; `None` if it sent
    /// nothing by then. What is already kept comes first.
    pub(crate) fn receive(&mut self, deadline: Instant) -> Result<Option<Unsolicited>, Error> {
        let Link {
            wire, unsolicited, ..
        } = self;
        loop {
            if let Some(u) = unsolicited.pop_front() {
                return Ok(Some(u));
            }
            // A zero timeout means none to the socket: wait at least a millisecond.
            let left = deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1));
            match wire {
                Wire::Native { stream, reader, .. } => {
                    if let Some(body) = reader.next_frame()? {
                        match decode_body::<ServerMsg>(body)? {
                            ServerMsg::Iof(c) => keep(unsolicited, Unsolicited::Iof(c)),
                            ServerMsg::Event(e) => keep(unsolicited, Unsolicited::Event(e)),
                            _ => {}
                        }
                        continue;
                    }
                    if Instant::now() >= deadline {
                        return Ok(None);
                    }
                    stream.set_read_timeout(Some(left)).map_err(lost)?;
                    let r = reader.read_from(stream);
                    match r {
                        Ok(0) => return Err(Error::LostConnection),
                        Ok(_) => {}
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => match lost(e) {
                            Error::Timeout => return Ok(None),
                            other => return Err(other),
                        },
                    }
                }
                Wire::Openpmix {
                    stream, reader, cx, ..
                } => {
                    if let Some(m) = reader.next_message()? {
                        if let Incoming::Message { header, payload } = m {
                            if let Some(u) = openpmix_unsolicited(header.tag, payload, cx.dialect) {
                                keep(unsolicited, u);
                            }
                        }
                        continue;
                    }
                    if Instant::now() >= deadline {
                        return Ok(None);
                    }
                    stream.set_read_timeout(Some(left)).map_err(lost)?;
                    let mut chunk = [0u8; 64 << 10];
                    match read_some(stream, &mut chunk) {
                        Ok(0) => return Err(Error::LostConnection),
                        Ok(n) => reader.feed(&chunk[..n]),
                        Err(e) => match lost(e) {
                            Error::Timeout => return Ok(None),
                            other => return Err(other),
                        },
                    }
                }
            }
        }
    }

    /// Sets how long a request's answer may take again, after [`Link::receive`] changed it.
    pub(crate) fn set_timeout(&mut self, timeout: Duration) -> Result<(), Error> {
        match &mut self.wire {
            Wire::Native { stream, .. } => stream.set_read_timeout(Some(timeout)),
            Wire::Openpmix { stream, .. } => stream.set_read_timeout(Some(timeout)),
        }
        .map_err(lost)
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
