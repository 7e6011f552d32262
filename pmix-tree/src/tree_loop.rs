//! A vertex's I/O, driven by a mio loop: its own thread's ([`crate::Tree::start`]) or its
//! host's ([`crate::Tree::embedded`], to spare a daemon a hop between threads on every fence).
//!
//! [`TreeLoop`] owns the vertex's [`Core`], the listener for its children, the link to its
//! parent, the parent's side of the children's authenticated handshakes, output queues and
//! heartbeat timers. Its owner registers it on a mio registry ([`TreeLoop::attach`]), hands
//! it the events of its tokens ([`TreeLoop::event`]) and calls [`TreeLoop::turn`] after every
//! poll; the [`crate::Tree`] handle's calls from other threads wait in a channel that `turn`
//! empties, after the handle woke the loop.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Write};
use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;
use mio::event::Event;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Registry, Token};
use pmix_types::Status;
use pmix_wire::{FrameDecoder, FrameReader};
use serde_bytes::ByteBuf;

use crate::auth::SECRET_LEN;
use crate::auth::{self, Side};
use crate::core::{Core, Delivery, Output};
use crate::mailbox::{Call, Done, Wake};
use crate::msg::{self, Dest, FenceKey, HANDSHAKE_MAX_FRAME, Msg, NONCE_LEN};
use crate::{Topology, Vertex};

/// The listener's token, relative to the first of the loop's tokens; connections follow.
const LISTENER: usize = 0;
const FIRST_CONN: usize = 1;

/// What a connection is for.
enum Role {
    /// Accepted, handshake under way (this vertex is the parent).
    Handshake { deadline: Instant, step: Step },
    /// The link to this neighbour.
    Link(Vertex),
}

/// Handshakes under way at once on a vertex's listener: each child twice and some room.
/// Past it a new connection is closed at once (any user can reach the port; each connection
/// not yet proven costs a descriptor and a read buffer until its handshake deadline).
fn max_handshakes(topo: &Topology, me: Vertex) -> usize {
    2 * topo.children(me).count() + 16
}

enum Step {
    AwaitHello,
    AwaitProof {
        child: Vertex,
        child_nonce: Vec<u8>,
        parent_nonce: [u8; NONCE_LEN],
    },
}

struct Conn {
    stream: TcpStream,
    reader: FrameReader,
    /// Encoded frames to write; `written` of them are.
    out: Vec<u8>,
    written: usize,
    /// Frames held back by the test-only link delay, with the time each may go.
    held: VecDeque<(Instant, Vec<u8>)>,
    role: Role,
    writable: bool,
}

impl Conn {
    fn new(stream: TcpStream, reader: FrameReader, role: Role) -> Conn {
        Conn {
            stream,
            reader,
            out: Vec::new(),
            written: 0,
            held: VecDeque::new(),
            role,
            writable: false,
        }
    }

    fn queued(&self) -> usize {
        self.out.len() - self.written + self.held.iter().map(|(_, f)| f.len()).sum::<usize>()
    }

    /// Writes what it can; `Err` if the link is broken.
    fn flush(&mut self) -> io::Result<()> {
        while self.written < self.out.len() {
            match self.stream.write(&self.out[self.written..]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if self.written == self.out.len() {
            self.out.clear();
            self.written = 0;
        }
        Ok(())
    }
}

/// One vertex's I/O, driven by its owner's mio loop on the owner's thread (see the module's
/// documentation). Made by [`crate::Tree::embedded`]; every `done` it is given is called
/// exactly once, on the loop's thread, with an error if the vertex stops first.
pub struct TreeLoop {
    core: Core,
    registry: Option<Registry>,
    /// The loop's tokens; the listener has the first, connections the next ones.
    tokens: Range<usize>,
    listener: Option<TcpListener>,
    conns: HashMap<usize, Conn>,
    by_vertex: HashMap<Vertex, usize>,
    next_conn: usize,
    calls: Receiver<Call>,
    /// How the handle wakes this loop: set by [`TreeLoop::attach`].
    wake: Arc<OnceLock<Wake>>,
    dones: HashMap<u64, Done>,
    next_token: u64,
    sink: Box<dyn FnMut(Delivery) + Send>,
    queued: Arc<AtomicUsize>,
    secret: [u8; SECRET_LEN],
    link_delay: Duration,
    handshake_timeout: Duration,
    max_frame: usize,
    /// Asked to stop (a shutdown call, or the parent lost); `finished` once it has.
    stop: bool,
    finished: bool,
    /// Connections that may hold frames not yet taken (the parent's, at start).
    pending_reads: Vec<usize>,
    /// When the last turn asked to be called again at the latest, if it did.
    due: Option<Instant>,
}

impl std::fmt::Debug for TreeLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TreeLoop")
            .field("me", &self.core.me())
            .field("tokens", &self.tokens)
            .field("links", &self.by_vertex.len())
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

/// What [`crate::Tree::embedded`] made before the loop is attached.
pub(crate) struct Parts {
    pub(crate) core: Core,
    pub(crate) listener: Option<TcpListener>,
    /// The link to the parent, handshake done, and what was read past its welcome.
    pub(crate) parent: Option<(Vertex, TcpStream, FrameReader)>,
    pub(crate) calls: Receiver<Call>,
    pub(crate) wake: Arc<OnceLock<Wake>>,
    pub(crate) sink: Box<dyn FnMut(Delivery) + Send>,
    pub(crate) queued: Arc<AtomicUsize>,
    pub(crate) secret: [u8; SECRET_LEN],
    pub(crate) link_delay: Duration,
    pub(crate) handshake_timeout: Duration,
    pub(crate) max_frame: usize,
}

impl TreeLoop {
    pub(crate) fn new(parts: Parts) -> TreeLoop {
        let mut conns = HashMap::new();
        let mut by_vertex = HashMap::new();
        if let Some((p, stream, reader)) = parts.parent {
            conns.insert(FIRST_CONN, Conn::new(stream, reader, Role::Link(p)));
            by_vertex.insert(p, FIRST_CONN);
        }
        TreeLoop {
            core: parts.core,
            registry: None,
            tokens: 0..0,
            listener: parts.listener,
            // Whatever the parent sent right after its welcome is in its reader already.
            pending_reads: conns.keys().copied().collect(),
            conns,
            by_vertex,
            next_conn: FIRST_CONN + 1,
            calls: parts.calls,
            wake: parts.wake,
            dones: HashMap::new(),
            next_token: 0,
            sink: parts.sink,
            queued: parts.queued,
            secret: parts.secret,
            link_delay: parts.link_delay,
            handshake_timeout: parts.handshake_timeout,
            max_frame: parts.max_frame,
            stop: false,
            finished: false,
            due: None,
        }
    }

    /// Registers the vertex's sockets on `registry` under tokens from `tokens` (the loop's
    /// events on them go to [`TreeLoop::event`]): one for the listener, then one per
    /// connection ever accepted (never reused; once they run out, newcomers are refused), so
    /// the range should be large. Gives the [`crate::Tree`] handle `wake`, which must make the
    /// loop call [`TreeLoop::turn`] soon. Called once, before the first `turn`.
    pub fn attach(
        &mut self,
        registry: Registry,
        tokens: Range<usize>,
        wake: impl Fn() + Send + Sync + 'static,
    ) -> io::Result<()> {
        if tokens.len() < FIRST_CONN + 2 || self.registry.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a tree loop is attached once, with at least three tokens",
            ));
        }
        if let Some(l) = self.listener.as_mut() {
            registry.register(l, Token(tokens.start + LISTENER), Interest::READABLE)?;
        }
        for (&t, conn) in &mut self.conns {
            registry.register(
                &mut conn.stream,
                Token(tokens.start + t),
                Interest::READABLE,
            )?;
        }
        self.registry = Some(registry);
        self.tokens = tokens;
        // Calls the handle made before this are in the channel; the first turn takes them.
        let _ = self.wake.set(Box::new(wake));
        Ok(())
    }

    /// The tokens given to [`TreeLoop::attach`].
    pub fn tokens(&self) -> Range<usize> {
        self.tokens.clone()
    }

    /// An event of the loop's poll for one of this vertex's tokens.
    pub fn event(&mut self, event: &Event) {
        if self.finished {
            return;
        }
        let now = Instant::now();
        match event.token().0.checked_sub(self.tokens.start) {
            Some(LISTENER) => self.accept(now),
            Some(t) => {
                if event.is_writable() {
                    self.write(t, now);
                }
                if event.is_readable() || event.is_read_closed() || event.is_error() {
                    self.read(t, now);
                }
            }
            None => {}
        }
        self.pump();
    }

    /// Settles what is pending: the handle's calls, timers, output written. Called after
    /// every poll of the loop (and whenever the handle's `wake` asked); returns when it must
    /// be called again at the latest, without an event. Once the vertex stopped (a shutdown,
    /// or the parent lost) it closes every link and returns `None` from then on.
    pub fn turn(&mut self) -> Option<Instant> {
        if self.finished {
            return None;
        }
        let now = Instant::now();
        self.check_late(now);
        for t in std::mem::take(&mut self.pending_reads) {
            self.read(t, now);
        }
        self.drain_calls(now);
        self.tick(now);
        self.pump();
        self.flush_all();
        if self.stop {
            self.finish();
            return None;
        }
        self.due = self.next_wake();
        self.due
    }

    /// Says so when this turn comes a link's whole silence allowance after the time the last
    /// one asked for: this process (or its host's loop) stalled for that long, and its
    /// neighbours, which heard nothing from it meanwhile, may have judged it lost. Sent
    /// nothing otherwise: what a neighbour's verdict then names is not this vertex's doing.
    fn check_late(&self, now: Instant) {
        let Some(due) = self.due else {
            return;
        };
        let late = now.saturating_duration_since(due);
        if late >= self.core.dead_after() {
            tracing::warn!(
                me = self.core.me(),
                "this vertex's loop ran {late:.1?} after it was due: its neighbours heard \
                 nothing from it meanwhile"
            );
        }
    }

    /// True once the vertex stopped and closed its links: its loop may end.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Stops the vertex now: pending `done`s get ERR_LOST_CONNECTION, what is queued gets a
    /// bounded chance (1 s) to be written, every link is closed. Idempotent.
    pub fn shutdown(&mut self) {
        self.stop = true;
        if !self.finished {
            self.finish();
        }
    }

    /// [`crate::Tree::fence`], on the loop's thread: no hop through the channel.
    pub fn fence(
        &mut self,
        key: FenceKey,
        vertices: Vec<Vertex>,
        data: Vec<u8>,
        done: impl FnOnce(Result<Vec<u8>, Status>) + Send + 'static,
    ) {
        self.direct(Call::fence(key, vertices, data, done));
    }

    /// [`crate::Tree::request`], on the loop's thread.
    pub fn request(
        &mut self,
        target: Vertex,
        payload: Vec<u8>,
        done: impl FnOnce(Result<Vec<u8>, Status>) + Send + 'static,
    ) {
        self.direct(Call::request(target, payload, done));
    }

    /// [`crate::Tree::respond`], on the loop's thread.
    pub fn respond(&mut self, origin: Vertex, id: u64, answer: Result<Vec<u8>, Status>) {
        self.direct(Call::Respond { origin, id, answer });
    }

    /// [`crate::Tree::send`], on the loop's thread.
    pub fn send(&mut self, dest: Dest, payload: Vec<u8>) {
        self.direct(Call::Send { dest, payload });
    }

    /// A call made on the loop's thread. The handle's calls made before it go first, so that
    /// what this vertex sends keeps the order in which its host's threads sent it.
    fn direct(&mut self, call: Call) {
        let now = Instant::now();
        self.drain_calls(now);
        self.apply(call, now);
        // Written by the loop's next turn, together with what else this turn sends.
    }

    /// Ends the vertex: fails what is pending, writes what is queued (bounded), closes.
    fn finish(&mut self) {
        self.finished = true;
        self.core.shutdown();
        self.pump();
        self.drain_before_close();
        // Calls that arrived too late fail (their `done`s are dropped uncalled).
        for call in self.calls.try_iter() {
            drop(call);
        }
        self.dones.clear();
        self.queued.store(0, Ordering::Relaxed);
    }

    /// When the loop must wake up without an event.
    fn next_wake(&self) -> Option<Instant> {
        let conns = self.conns.values().flat_map(|c| {
            let handshake = match c.role {
                Role::Handshake { deadline, .. } => Some(deadline),
                Role::Link(_) => None,
            };
            handshake.into_iter().chain(c.held.front().map(|(t, _)| *t))
        });
        self.core.poll_timeout().into_iter().chain(conns).min()
    }

    /// Timers: the core's, handshakes that took too long, held frames whose delay is over.
    fn tick(&mut self, now: Instant) {
        if self.core.poll_timeout().is_some_and(|d| d <= now) {
            self.core.handle_timeout(now);
        }
        let expired: Vec<usize> = self
            .conns
            .iter()
            .filter(|(_, c)| matches!(c.role, Role::Handshake { deadline, .. } if deadline <= now))
            .map(|(&t, _)| t)
            .collect();
        for t in expired {
            tracing::warn!(
                me = self.core.me(),
                "handshake timed out; connection closed"
            );
            self.close(t);
        }
        for conn in self.conns.values_mut() {
            while conn.held.front().is_some_and(|(t, _)| *t <= now) {
                if let Some((_, frame)) = conn.held.pop_front() {
                    conn.out.extend_from_slice(&frame);
                }
            }
        }
    }

    fn drain_calls(&mut self, now: Instant) {
        while let Ok(call) = self.calls.try_recv() {
            self.apply(call, now);
        }
    }

    fn apply(&mut self, call: Call, now: Instant) {
        match call {
            Call::Fence {
                key,
                vertices,
                data,
                done,
            } => {
                let token = self.token(done);
                self.core.fence(token, key, vertices, data, now);
            }
            Call::Request {
                target,
                payload,
                done,
            } => {
                let token = self.token(done);
                self.core.request(token, target, payload, now);
            }
            Call::Respond { origin, id, answer } => self.core.respond(origin, id, answer, now),
            Call::Send { dest, payload } => self.core.send(dest, payload, now),
            Call::Shutdown => self.stop = true,
        }
        self.pump();
    }

    fn token(&mut self, done: Done) -> u64 {
        let token = self.next_token;
        self.next_token += 1;
        self.dones.insert(token, done);
        token
    }

    /// Carries out what the core asked for.
    fn pump(&mut self) {
        while let Some(out) = self.core.poll_output() {
            match out {
                Output::Send { link, msg } => self.enqueue(&[link], &msg),
                Output::SendAll { links, msg } => self.enqueue(&links, &msg),
                Output::Close { link } => {
                    if let Some(t) = self.by_vertex.get(&link).copied() {
                        self.close(t);
                    }
                }
                Output::Complete { token, result } => {
                    if let Some(done) = self.dones.remove(&token) {
                        done.call(result);
                    }
                }
                Output::Deliver(d) => {
                    if matches!(d, Delivery::ParentLost { .. }) {
                        self.stop = true;
                    }
                    (self.sink)(d);
                }
            }
        }
        if self.core.is_stopped() {
            self.stop = true;
        }
    }

    /// Queues `msg` on the links to `links`, encoded once.
    fn enqueue(&mut self, links: &[Vertex], msg: &Msg) {
        let delayed = !self.link_delay.is_zero();
        // One link and no test delay, as most messages go: straight into its output queue.
        if let ([link], false) = (links, delayed) {
            let conn = self.by_vertex.get(link).and_then(|t| self.conns.get_mut(t));
            if let Some(conn) = conn {
                if let Err(e) = msg::encode(msg, &mut conn.out) {
                    tracing::error!(link, "cannot encode a message: {e}");
                }
            }
            return;
        }
        let mut frame = Vec::new();
        if let Err(e) = msg::encode(msg, &mut frame) {
            return tracing::error!(?links, "cannot encode a message: {e}");
        }
        for link in links {
            let Some(conn) = self.by_vertex.get(link).and_then(|t| self.conns.get_mut(t)) else {
                continue;
            };
            // Into the output queue, unless a test's link delay holds it back.
            if delayed {
                let go = Instant::now() + self.link_delay;
                conn.held.push_back((go, frame.clone()));
            } else {
                conn.out.extend_from_slice(&frame);
            }
        }
    }

    /// Writes what every connection has queued, updates interests and the queued count.
    fn flush_all(&mut self) {
        let tokens: Vec<usize> = self.conns.keys().copied().collect();
        let now = Instant::now();
        for t in tokens {
            self.write(t, now);
        }
        let queued = self.conns.values().map(Conn::queued).sum();
        self.queued.store(queued, Ordering::Relaxed);
    }

    fn write(&mut self, t: usize, now: Instant) {
        let Some(conn) = self.conns.get_mut(&t) else {
            return;
        };
        if let Err(e) = conn.flush() {
            return self.lost(t, format!("write failed: {e}"), now);
        }
        let want = conn.written < conn.out.len();
        if want != conn.writable {
            conn.writable = want;
            let interest = if want {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            let token = Token(self.tokens.start + t);
            let res = match self.registry.as_ref() {
                Some(r) => r.reregister(&mut conn.stream, token, interest),
                None => Err(not_attached()),
            };
            if let Err(e) = res {
                self.lost(t, format!("cannot poll: {e}"), now);
            }
        }
    }

    fn accept(&mut self, now: Instant) {
        loop {
            let Some(listener) = self.listener.as_ref() else {
                return;
            };
            match listener.accept() {
                Ok((mut stream, peer)) => {
                    // Anyone may connect: those not yet proven are bounded, so that they
                    // cannot take the descriptors and buffers the run's own children need.
                    let proving = self
                        .conns
                        .values()
                        .filter(|c| matches!(c.role, Role::Handshake { .. }))
                        .count();
                    let max = max_handshakes(self.core.topology(), self.core.me());
                    if proving >= max {
                        tracing::debug!(
                            max,
                            "too many handshakes under way; a connection from {peer} closed"
                        );
                        continue;
                    }
                    if let Err(e) = stream.set_nodelay(true) {
                        tracing::warn!("TCP_NODELAY on a connection from {peer}: {e}");
                    }
                    let t = self.next_conn;
                    let token = self.tokens.start + t;
                    if token >= self.tokens.end {
                        tracing::warn!("no token left for a connection from {peer}; closed");
                        continue;
                    }
                    self.next_conn += 1;
                    let res = match self.registry.as_ref() {
                        Some(r) => r.register(&mut stream, Token(token), Interest::READABLE),
                        None => Err(not_attached()),
                    };
                    if let Err(e) = res {
                        tracing::warn!("cannot poll a connection from {peer}: {e}");
                        continue;
                    }
                    let reader = FrameReader::new(FrameDecoder::new(HANDSHAKE_MAX_FRAME));
                    let role = Role::Handshake {
                        deadline: now + self.handshake_timeout,
                        step: Step::AwaitHello,
                    };
                    self.conns.insert(t, Conn::new(stream, reader, role));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // Out of descriptors, most likely: the connection waits in the backlog.
                    tracing::warn!(me = self.core.me(), "accept failed: {e}");
                    return;
                }
            }
        }
    }

    /// Reads what connection `t` has, and handles every whole frame.
    fn read(&mut self, t: usize, now: Instant) {
        let mut drained = false;
        loop {
            let end = self.take_frames(t, now);
            let Some(conn) = self.conns.get_mut(&t) else {
                return;
            };
            if let Some(reason) = end {
                return self.lost(t, reason, now);
            }
            if drained {
                return;
            }
            match conn.reader.read_from(&mut conn.stream) {
                Ok(0) => {
                    self.take_frames(t, now);
                    return self.lost(t, "end of stream".into(), now);
                }
                // A short read emptied the socket: what arrives later raises a new event, so
                // the read that would say WouldBlock is saved (one syscall per message).
                Ok(n) => drained = n < pmix_wire::READ_ROOM,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.take_frames(t, now);
                    return;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return self.lost(t, format!("read failed: {e}"), now),
            }
        }
    }

    /// Handles the whole frames connection `t` holds; `Some(why)` if it must be closed.
    fn take_frames(&mut self, t: usize, now: Instant) -> Option<String> {
        loop {
            let conn = self.conns.get_mut(&t)?;
            let msg = match conn.reader.next_frame() {
                Ok(Some(body)) => msg::decode(body),
                Ok(None) => return None,
                Err(e) => return Some(format!("bad frame: {e}")),
            };
            let msg = match msg {
                Ok(msg) => msg,
                Err(e) => return Some(format!("bad message: {e}")),
            };
            match conn.role {
                Role::Link(v) => self.core.handle(v, msg, now),
                Role::Handshake { .. } => self.handshake(t, msg, now),
            }
            self.pump();
        }
    }

    /// The parent's side of a child's handshake.
    fn handshake(&mut self, t: usize, msg: Msg, now: Instant) {
        let me = self.core.me();
        let topo = *self.core.topology();
        let Some(conn) = self.conns.get_mut(&t) else {
            return;
        };
        let Role::Handshake { step, .. } = &mut conn.role else {
            return;
        };
        let refusal = match (&*step, msg) {
            (Step::AwaitHello, Msg::Hello { vertex, nonce }) => {
                if topo.parent(vertex) != Some(me) || vertex >= topo.size() {
                    Some(format!("vertex {vertex} is not a child of vertex {me}"))
                } else if self.by_vertex.contains_key(&vertex) {
                    Some(format!("vertex {vertex} is already connected"))
                } else if nonce.len() != NONCE_LEN {
                    Some("bad nonce".into())
                } else {
                    match auth::nonce() {
                        Ok(parent_nonce) => {
                            let proof = auth::prove(
                                &self.secret,
                                Side::Parent,
                                me,
                                vertex,
                                &nonce,
                                &parent_nonce,
                            );
                            *step = Step::AwaitProof {
                                child: vertex,
                                child_nonce: nonce.into_vec(),
                                parent_nonce,
                            };
                            let challenge = Msg::Challenge {
                                nonce: ByteBuf::from(parent_nonce.to_vec()),
                                proof: ByteBuf::from(proof),
                            };
                            if let Err(e) = msg::encode(&challenge, &mut conn.out) {
                                tracing::error!("cannot encode a challenge: {e}");
                            }
                            None
                        }
                        Err(e) => Some(format!("no nonce: {e}")),
                    }
                }
            }
            (
                Step::AwaitProof {
                    child,
                    child_nonce,
                    parent_nonce,
                },
                Msg::Proof { proof },
            ) => {
                let child = *child;
                if !auth::check(
                    &self.secret,
                    Side::Child,
                    me,
                    child,
                    child_nonce,
                    parent_nonce,
                    &proof,
                ) {
                    Some(format!("vertex {child}'s proof is wrong"))
                } else if self.by_vertex.contains_key(&child) {
                    Some(format!("vertex {child} is already connected"))
                } else {
                    if let Err(e) = msg::encode(&Msg::Welcome, &mut conn.out) {
                        tracing::error!("cannot encode a welcome: {e}");
                    }
                    conn.role = Role::Link(child);
                    conn.reader.set_decoder(FrameDecoder::new(self.max_frame));
                    self.by_vertex.insert(child, t);
                    tracing::debug!(me, child, "child joined");
                    self.core.link_up(child, now);
                    None
                }
            }
            (_, other) => Some(format!("unexpected {other:?} during the handshake")),
        };
        if let Some(reason) = refusal {
            tracing::warn!(me, "handshake refused: {reason}; connection closed");
            if let Some(conn) = self.conns.get_mut(&t) {
                let _ = msg::encode(&Msg::Refused { reason }, &mut conn.out);
                let _ = conn.flush();
            }
            self.close(t);
        }
    }

    /// Connection `t` failed or closed: a handshake is forgotten, a link is reported down.
    fn lost(&mut self, t: usize, reason: String, now: Instant) {
        let Some(conn) = self.conns.get(&t) else {
            return;
        };
        match conn.role {
            Role::Link(v) => {
                tracing::info!(me = self.core.me(), v, "link lost: {reason}");
                self.close(t);
                self.core.link_down(v, &reason, now);
                self.pump();
            }
            Role::Handshake {
                step: Step::AwaitHello,
                ..
            } => {
                // Nothing said: a daemon probing which of this vertex's addresses it can
                // reach, or a port scan.
                tracing::debug!(
                    me = self.core.me(),
                    "connection closed before a hello: {reason}"
                );
                self.close(t);
            }
            Role::Handshake { .. } => {
                tracing::warn!(me = self.core.me(), "handshake failed: {reason}");
                self.close(t);
            }
        }
    }

    fn close(&mut self, t: usize) {
        if let Some(mut conn) = self.conns.remove(&t) {
            if let Some(r) = self.registry.as_ref() {
                let _ = r.deregister(&mut conn.stream);
            }
            if let Role::Link(v) = conn.role {
                self.by_vertex.remove(&v);
            }
        }
    }

    /// At shutdown: gives what is queued a bounded chance to be written, on a poll of its
    /// own (the owner's loop is busy calling this), then closes every connection.
    fn drain_before_close(&mut self) {
        if let (Some(r), Some(l)) = (self.registry.as_ref(), self.listener.as_mut()) {
            let _ = r.deregister(l);
        }
        self.listener = None;
        let mut conns: Vec<Conn> = self.conns.drain().map(|(_, c)| c).collect();
        self.by_vertex.clear();
        let Ok(mut poll) = Poll::new() else {
            return;
        };
        for (i, conn) in conns.iter_mut().enumerate() {
            if let Some(r) = self.registry.as_ref() {
                let _ = r.deregister(&mut conn.stream);
            }
            while let Some((_, frame)) = conn.held.pop_front() {
                conn.out.extend_from_slice(&frame);
            }
            let _ = poll
                .registry()
                .register(&mut conn.stream, Token(i), Interest::WRITABLE);
        }
        let deadline = Instant::now() + Duration::from_secs(1).min(self.handshake_timeout);
        let mut events = Events::with_capacity(64);
        loop {
            conns.retain_mut(|c| c.flush().is_ok() && c.written < c.out.len());
            let now = Instant::now();
            if conns.is_empty() || now >= deadline {
                return;
            }
            if poll.poll(&mut events, Some(deadline - now)).is_err() {
                return;
            }
        }
    }
}

fn not_attached() -> io::Error {
    io::Error::other("the tree loop is not attached to a poll")
}
