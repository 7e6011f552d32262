//! The wire front-ends, behind one contract: each translates one wire personality into the
//! engine's requests and the engine's answers back into its wire.
//!
//! A connection's personality is a [`Proto`]; the shell knows nothing more of it. It hands a
//! connection's bytes to [`Proto::read_from`], asks [`Proto::step`] for what the engine must
//! see ([`Step`]), and hands every engine output for the connection to the matching method
//! (`accepted`, `refused`, `replied`, `replied_shared`, `event`), which appends what the
//! client is to receive to the connection's write buffer. What the connections of one
//! personality share across the server (encoded job data, `PMI_ID`s handed out, the ds21
//! segments, PMI-2's node attributes) lives in [`Frontends`], which every call is given. When
//! one connection changes what another waits for there (a PMI-2 node attribute put), the
//! other is named by [`Frontends::take_woken`] and the shell calls its [`Proto::woken`];
//! [`Proto::closed`] tells a front-end its connection is gone.
//!
//! Sans-IO like the engine, except `openpmix/ds21/`, which writes shared-memory segments.
//! Adding a personality is a folder here, a variant of [`Proto`] and of [`Personality`], and a
//! listener in the shell. PMI-2 has no listener of its own: a PMI-1 connection whose `init`
//! asks for version 2 becomes one ([`Proto::step`] swaps the variant).

mod job_bytes;
pub(crate) mod native;
pub(crate) mod openpmix;
pub(crate) mod pmi1;
pub(crate) mod pmi2;
mod welcomes;

use std::cell::OnceCell;
use std::io;
use std::sync::Arc;

use pmix_types::{Nspace, Proc, Status};
use pmix_wire::{Event, Reply, Request};

use self::native::NativeConn;
use self::openpmix::OpenpmixConn;
use self::pmi1::Pmi1Conn;
use self::pmi2::Pmi2Conn;
use crate::engine::nspace::LazyJob;
use crate::engine::{Auth, ConnId, GetAnswers, PeerCreds, ToolHello};
use crate::outbuf::OutQueue;
use crate::tcp_peer::TcpPeer;

/// What a connection's front-end wants done next.
#[derive(Debug)]
#[cfg_attr(test, derive(PartialEq))]
pub(crate) enum Step {
    /// Nothing until more bytes arrive or the engine answers.
    Idle,
    /// Close the connection once its queued bytes are written (the reason is logged).
    Close,
    /// The client named itself: authenticate it with the engine.
    Hello {
        proc: Proc,
        auth: Auth,
        /// What its Gets are to be answered with: what this front-end does with them.
        answers: GetAnswers,
    },
    /// A tool (a process this server did not launch) asks to connect.
    ToolHello(ToolHello),
    /// Hand the engine request `id` (the id is the connection's own).
    Request(u32, Request),
}

/// The kind of listener a connection arrived on, which decides its personality.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Personality {
    /// pmix-rs clients, on the server's Unix socket.
    Native,
    /// MPICH's PMI-1 over the loopback port of `PMI_PORT`.
    Pmi1,
    /// libpmix clients over loopback TCP.
    Openpmix,
}

impl Personality {
    /// True when the front-end holds a TCP peer's claimed uid against the kernel's: only
    /// then is the (not free) lookup of the socket's owner worth making.
    pub(crate) fn checks_tcp_owner(self) -> bool {
        matches!(self, Personality::Openpmix)
    }
}

/// What the operating system tells about a new connection's peer.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Peer {
    /// A Unix socket's peer credentials (`SO_PEERCRED`).
    pub(crate) creds: Option<PeerCreds>,
    /// The owner and inode of a loopback TCP peer's socket, when asked for and known.
    pub(crate) tcp_owner: Option<TcpPeer>,
}

/// A connection's wire personality and its protocol state.
pub(crate) enum Proto {
    /// pmix-rs clients: MessagePack frames.
    Native(NativeConn),
    /// MPICH's PMI-1 text lines.
    Pmi1(Box<Pmi1Conn>),
    /// PMI-2 frames, after a PMI-1 `init pmi_version=2` handed the connection over.
    Pmi2(Box<Pmi2Conn>),
    /// The OpenPMIx 4.2 wire protocol of libpmix clients.
    Openpmix(Box<OpenpmixConn>),
}

/// What the front-ends keep across connections.
pub(crate) struct Frontends {
    pub(crate) native: native::Common,
    pub(crate) pmi1: pmi1::Common,
    pub(crate) pmi2: pmi2::node_attrs::Common,
    pub(crate) openpmix: openpmix::Common,
}

impl Frontends {
    /// A namespace was registered with `nlocalprocs` processes on this node.
    pub(crate) fn nspace_registered(&mut self, nspace: &Nspace, nlocalprocs: u32) {
        self.openpmix.nspace_registered(nspace, nlocalprocs);
    }

    /// The connections (by the id [`Proto::accepted`] was given) whose front-end must look
    /// again at what they wait for, because another connection changed it ([`Proto::woken`]).
    pub(crate) fn take_woken(&mut self) -> Vec<ConnId> {
        self.pmi2.take_woken()
    }

    /// The server stops: shared memory is unmapped and its files removed.
    pub(crate) fn shutdown(&mut self) {
        self.openpmix.shutdown();
    }

    /// A namespace was let go: what was kept for it goes too.
    pub(crate) fn nspace_deregistered(&mut self, nspace: &Nspace) {
        self.native.nspace_deregistered(nspace);
        self.openpmix.nspace_deregistered(nspace);
        self.pmi2.nspace_deregistered(nspace);
    }
}

/// An answer for several requests (a collecting fence's data), as each personality encodes
/// it: once per answer, not once per request.
pub(crate) struct SharedAnswer {
    reply: Arc<Reply>,
    native: OnceCell<Option<pmix_wire::SharedReply>>,
    openpmix: openpmix::SharedCollected,
}

impl SharedAnswer {
    pub(crate) fn new(reply: Arc<Reply>) -> Self {
        SharedAnswer {
            reply,
            native: OnceCell::new(),
            openpmix: openpmix::SharedCollected::default(),
        }
    }

    pub(crate) fn reply(&self) -> &Reply {
        &self.reply
    }
}

impl Proto {
    /// The personality of a connection accepted on a listener of kind `kind`.
    pub(crate) fn accepted_on(kind: Personality, peer: Peer, fe: &Frontends) -> Proto {
        match kind {
            Personality::Native => Proto::Native(NativeConn::new(fe.native.decoder(), peer.creds)),
            Personality::Pmi1 => Proto::Pmi1(Box::new(Pmi1Conn::with_port())),
            Personality::Openpmix => Proto::Openpmix(Box::new(OpenpmixConn::new(
                peer.tcp_owner,
                fe.openpmix.offers_ds21(),
            ))),
        }
    }

    /// A PMI-1 connection over a socket the server made for `proc`.
    pub(crate) fn pmi1_for(proc: Proc) -> Proto {
        Proto::Pmi1(Box::new(Pmi1Conn::with_fd(proc)))
    }

    /// Reads what `src` has ready into the connection's input: `Ok(0)` at the end of the
    /// stream. `scratch` is a buffer the caller lends to front-ends that copy their input.
    pub(crate) fn read_from(
        &mut self,
        src: &mut impl io::Read,
        scratch: &mut [u8],
    ) -> io::Result<usize> {
        match self {
            // Straight into the frame reader's buffer: no copy.
            Proto::Native(n) => n.read_from(src),
            Proto::Pmi1(p) => src.read(scratch).inspect(|&n| p.feed(&scratch[..n])),
            Proto::Pmi2(p) => src.read(scratch).inspect(|&n| p.feed(&scratch[..n])),
            Proto::Openpmix(o) => src.read(scratch).inspect(|&n| o.feed(&scratch[..n])),
        }
    }

    /// The next thing the engine must see from this connection; replies the front-end gives
    /// itself are appended to `out`. Called again until it says [`Step::Idle`].
    pub(crate) fn step(&mut self, fe: &mut Frontends, out: &mut Vec<u8>) -> Step {
        match self {
            Proto::Native(n) => n.step(out),
            Proto::Pmi1(p) => {
                let step = p.step(&mut fe.pmi1, out);
                match p.take_upgrade() {
                    Some((proc, rest)) => {
                        *self = Proto::Pmi2(Box::new(Pmi2Conn::upgraded(proc, rest, out)));
                        self.step(fe, out)
                    }
                    None => step,
                }
            }
            Proto::Pmi2(p) => p.step(&mut fe.pmi1, &mut fe.pmi2, out),
            Proto::Openpmix(o) => o.step(&mut fe.openpmix, out),
        }
    }

    /// Another connection changed what this one may wait for (see [`Frontends::take_woken`]).
    pub(crate) fn woken(&mut self, fe: &mut Frontends, out: &mut Vec<u8>) {
        if let Proto::Pmi2(p) = self {
            p.woken(&mut fe.pmi2, out);
        }
    }

    /// The connection is closed (by either side).
    pub(crate) fn closed(&mut self, fe: &mut Frontends) {
        match self {
            Proto::Pmi2(p) => p.closed(&mut fe.pmi2),
            // A PMI-1 process of a job whose PMI-2 processes wait for node attributes will
            // put none: they must not wait for it forever.
            Proto::Pmi1(p) => {
                if let Some((ns, clean)) = p.ended_process() {
                    fe.pmi2.process_ended(ns, clean);
                }
            }
            Proto::Native(_) | Proto::Openpmix(_) => {}
        }
    }

    /// The engine accepted the client (connection `conn`) into the job `job`; `can_pass_fds`
    /// says whether its connection carries descriptors (a Unix socket).
    pub(crate) fn accepted(
        &mut self,
        fe: &mut Frontends,
        conn: ConnId,
        job: &LazyJob,
        can_pass_fds: bool,
        out: &mut Vec<u8>,
    ) {
        match self {
            Proto::Native(n) => n.accepted(&mut fe.native, job.image(), can_pass_fds, out),
            Proto::Pmi1(p) => p.accepted(job.get().clone(), out),
            Proto::Pmi2(p) => p.accepted(conn, job.get().clone(), &mut fe.pmi2, out),
            Proto::Openpmix(o) => o.accepted(job.image().clone(), conn as u32, out),
        }
    }

    /// The engine accepted a tool as `tool`; `server` is the server's own name.
    pub(crate) fn tool_accepted(&mut self, tool: &Proc, server: &Proc, out: &mut Vec<u8>) {
        match self {
            Proto::Native(n) => n.tool_accepted(tool, server, out),
            // PMI-1 and PMI-2 have no tools: their front-ends never ask for one.
            Proto::Pmi1(_) | Proto::Pmi2(_) => {}
            Proto::Openpmix(o) => o.tool_accepted(tool, server, out),
        }
    }

    /// The engine refused the client; the connection closes once this is written.
    pub(crate) fn refused(&mut self, status: Status, reason: &str, out: &mut Vec<u8>) {
        match self {
            Proto::Native(n) => n.refused(status, reason, out),
            Proto::Pmi1(p) => p.refused(status, reason, out),
            Proto::Pmi2(p) => p.refused(status, reason, out),
            Proto::Openpmix(o) => o.refused(status, out),
        }
    }

    /// The engine's answer to request `id`.
    pub(crate) fn replied(
        &mut self,
        fe: &mut Frontends,
        id: u32,
        reply: Reply,
        out: &mut OutQueue,
    ) {
        match self {
            Proto::Native(n) => n.replied(id, reply, out.bytes()),
            Proto::Pmi1(p) => p.replied(id, &reply, out.bytes()),
            Proto::Pmi2(p) => p.replied(id, &reply, out.bytes()),
            Proto::Openpmix(o) => o.replied(&mut fe.openpmix, id, &reply, None, out),
        }
    }

    /// The engine's answer to request `id`, one of several requests that get the same one.
    pub(crate) fn replied_shared(
        &mut self,
        fe: &mut Frontends,
        id: u32,
        answer: &SharedAnswer,
        out: &mut OutQueue,
    ) {
        match self {
            Proto::Native(n) => n.replied_shared(id, answer, out),
            Proto::Pmi1(p) => p.replied(id, answer.reply(), out.bytes()),
            Proto::Pmi2(p) => p.replied(id, answer.reply(), out.bytes()),
            Proto::Openpmix(o) => o.replied(
                &mut fe.openpmix,
                id,
                &answer.reply,
                Some(&answer.openpmix),
                out,
            ),
        }
    }

    /// An event the client registered for.
    pub(crate) fn event(&mut self, event: &Event, out: &mut Vec<u8>) {
        match self {
            Proto::Native(n) => n.event(event, out),
            // PMI-1 and PMI-2 have no events (and their processes never register for any).
            Proto::Pmi1(_) | Proto::Pmi2(_) => {}
            Proto::Openpmix(o) => o.event(event, out),
        }
    }

    /// Output a tool pulled (only tools pull, and only the native and OpenPMIx front-ends
    /// serve tools).
    pub(crate) fn iof(&mut self, chunk: &pmix_wire::IofChunk, out: &mut Vec<u8>) {
        match self {
            Proto::Native(n) => n.iof(chunk, out),
            Proto::Pmi1(_) | Proto::Pmi2(_) => {}
            Proto::Openpmix(o) => o.iof(chunk, out),
        }
    }

    /// False while the front-end holds a whole unit of input (frame, line, message) it has
    /// not taken: the shell then reads no more, so what a peer sends ahead of its answers
    /// waits in the kernel, not in the server.
    pub(crate) fn wants_input(&self) -> bool {
        match self {
            Proto::Native(n) => n.wants_input(),
            Proto::Pmi1(p) => p.wants_input(),
            Proto::Pmi2(p) => p.wants_input(),
            Proto::Openpmix(o) => o.wants_input(),
        }
    }

    /// True once the connection is to be closed when its queued bytes are written.
    pub(crate) fn is_closing(&self) -> bool {
        match self {
            Proto::Native(n) => n.is_closing(),
            Proto::Pmi1(p) => p.is_closing(),
            Proto::Pmi2(p) => p.is_closing(),
            Proto::Openpmix(o) => o.is_closing(),
        }
    }
}
