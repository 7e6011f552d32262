//! The I/O shell: one thread per vertex running a mio loop around its [`Core`]: the listener
//! for its children, the link to its parent, the authenticated handshakes, output queues,
//! heartbeat timers, and the host's calls (a crossbeam channel plus a [`Waker`]).
//!
//! The connection to the parent, handshake included, is made by [`Tree::start`] itself
//! (blocking, bounded by [`Config::handshake_timeout`]), so that a vertex that cannot join
//! fails to start rather than later. Children connect to the listener; a connection that
//! fails its handshake is closed and logged, and nothing else happens.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, ThreadId};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use pmix_types::Status;
use pmix_wire::{FrameDecoder, FrameReader};
use serde_bytes::ByteBuf;

use crate::auth::{self, Side};
pub use crate::core::Delivery;
use crate::core::{Core, Outcome, Output, Timing};
use crate::msg::{self, HANDSHAKE_MAX_FRAME, Msg, NONCE_LEN};
pub use crate::msg::{Dest, FenceKey};
use crate::{Topology, Vertex};

/// The length of a run's secret.
pub const SECRET_LEN: usize = 32;

/// How one vertex joins the tree.
#[derive(Clone)]
pub struct Config {
    /// This vertex.
    pub me: Vertex,
    /// The tree's shape (same on every vertex).
    pub topology: Topology,
    /// The run's secret (same on every vertex; never sent).
    pub secret: [u8; SECRET_LEN],
    /// Where to listen for the children (port 0: any); ignored by a vertex without children
    /// (it does not listen at all).
    pub listen: SocketAddr,
    /// The parent's address; `None` for the root.
    pub parent: Option<SocketAddr>,
    /// How often a link silent in its outgoing direction sends a heartbeat (default 1 s).
    pub heartbeat: Duration,
    /// How long a link may stay silent in its incoming direction before it is lost (default
    /// 5 s).
    pub dead_after: Duration,
    /// How long the handshake of a new connection may take (default 10 s).
    pub handshake_timeout: Duration,
    /// Test-only: every message waits this long before it is written to a link (no netem
    /// here; for the cost curve at scale). Default zero.
    pub link_delay: Duration,
    /// Largest frame accepted on a link (default 64 MiB).
    pub max_frame: usize,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret stays out of logs.
        f.debug_struct("Config")
            .field("me", &self.me)
            .field("topology", &self.topology)
            .field("listen", &self.listen)
            .field("parent", &self.parent)
            .field("heartbeat", &self.heartbeat)
            .field("dead_after", &self.dead_after)
            .field("handshake_timeout", &self.handshake_timeout)
            .field("link_delay", &self.link_delay)
            .field("max_frame", &self.max_frame)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// A config with the defaults above, listening on every address at any port, and no
    /// parent (set [`Config::parent`] on every vertex but the root).
    pub fn new(me: Vertex, topology: Topology, secret: [u8; SECRET_LEN]) -> Config {
        Config {
            me,
            topology,
            secret,
            listen: SocketAddr::from(([0, 0, 0, 0], 0)),
            parent: None,
            heartbeat: Duration::from_secs(1),
            dead_after: Duration::from_secs(5),
            handshake_timeout: Duration::from_secs(10),
            link_delay: Duration::ZERO,
            max_frame: 64 << 20,
        }
    }
}

/// Why a vertex could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration is inconsistent (a vertex outside the tree, a daemon without a
    /// parent address, a zero heartbeat): a bug of the caller.
    #[error("bad tree configuration: {0}")]
    Config(String),
    /// The listener for the children could not be opened.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// What the system said.
        source: io::Error,
    },
    /// The parent could not be reached, or the link broke during the handshake.
    #[error("cannot connect to the parent at {addr}: {source}")]
    Connect {
        /// The parent's address.
        addr: SocketAddr,
        /// What the system said.
        source: io::Error,
    },
    /// The parent did not complete the handshake correctly (wrong secret, garbage, silence):
    /// it is not the parent this vertex was told of.
    #[error("handshake with the parent at {addr} failed: {reason}")]
    Handshake {
        /// The parent's address.
        addr: SocketAddr,
        /// What went wrong.
        reason: String,
    },
    /// The parent refused this vertex (wrong secret, not its child, already connected).
    #[error("the parent at {addr} refused this vertex: {reason}")]
    Refused {
        /// The parent's address.
        addr: SocketAddr,
        /// The parent's reason.
        reason: String,
    },
    /// The tree's thread or its poller could not be set up.
    #[error("cannot start the tree's thread: {0}")]
    Io(#[from] io::Error),
}

impl Error {
    /// The PMIx status for this error.
    pub fn status(&self) -> Status {
        match self {
            Error::Config(_) => Status::ERR_BAD_PARAM,
            Error::Listen { .. } | Error::Io(_) => Status::ERROR,
            Error::Connect { .. } => Status::ERR_UNREACH,
            Error::Handshake { .. } | Error::Refused { .. } => Status::ERR_INVALID_CRED,
        }
    }
}

/// A `done` callback, called exactly once: with the result, or with ERR_LOST_CONNECTION when
/// dropped uncalled (the tree stopped first, or the call never reached it).
struct Done(Option<Box<dyn FnOnce(Outcome) + Send>>);

impl Done {
    fn new(f: impl FnOnce(Outcome) + Send + 'static) -> Done {
        Done(Some(Box::new(f)))
    }

    fn call(mut self, result: Outcome) {
        if let Some(f) = self.0.take() {
            f(result)
        }
    }
}

impl Drop for Done {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f(Err(Status::ERR_LOST_CONNECTION))
        }
    }
}

/// A host's call, on its way to the tree's thread.
enum Call {
    Fence {
        key: FenceKey,
        vertices: Vec<Vertex>,
        data: Vec<u8>,
        done: Done,
    },
    Request {
        target: Vertex,
        payload: Vec<u8>,
        done: Done,
    },
    Respond {
        origin: Vertex,
        id: u64,
        answer: Outcome,
    },
    Send {
        dest: Dest,
        payload: Vec<u8>,
    },
    Shutdown,
}

/// A running vertex: its thread and links. Every method may be called from any thread, never
/// blocks (but [`Tree::shutdown`], which joins the thread), and every `done` is called exactly
/// once, with an error if the tree shuts down first: on the tree's thread, or on the calling
/// thread if the tree had already stopped. Dropping the handle shuts the vertex down.
pub struct Tree {
    calls: Sender<Call>,
    waker: Arc<Waker>,
    queued: Arc<AtomicUsize>,
    thread: Mutex<Option<JoinHandle<()>>>,
    thread_id: ThreadId,
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tree")
            .field("queued", &self.queued())
            .finish_non_exhaustive()
    }
}

const WAKER: Token = Token(0);
const LISTENER: Token = Token(1);
const FIRST_CONN: usize = 2;

impl Tree {
    /// Starts this vertex: listens (if it has children), connects to the parent (if any;
    /// `Error` if the parent cannot be reached or refuses the handshake), and starts the
    /// thread. Returns the address the children must connect to.
    pub fn start(
        config: Config,
        sink: impl FnMut(Delivery) + Send + 'static,
    ) -> Result<(Tree, Option<SocketAddr>), Error> {
        let topo = config.topology;
        let me = config.me;
        if me >= topo.size() {
            return Err(Error::Config(format!(
                "vertex {me} outside a tree of {}",
                topo.size()
            )));
        }
        if config.heartbeat.is_zero() || config.dead_after.is_zero() {
            return Err(Error::Config("zero heartbeat or dead_after".into()));
        }
        let parent = match (topo.parent(me), config.parent) {
            (None, _) => None,
            (Some(p), Some(addr)) => Some((p, addr)),
            (Some(p), None) => {
                return Err(Error::Config(format!(
                    "vertex {me} has no address for its parent {p}"
                )));
            }
        };
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let (listener, addr) = if topo.children(me).next().is_some() {
            let std_listener =
                std::net::TcpListener::bind(config.listen).map_err(|source| Error::Listen {
                    addr: config.listen,
                    source,
                })?;
            std_listener.set_nonblocking(true)?;
            let addr = std_listener.local_addr()?;
            let mut listener = TcpListener::from_std(std_listener);
            poll.registry()
                .register(&mut listener, LISTENER, Interest::READABLE)?;
            (Some(listener), Some(addr))
        } else {
            (None, None)
        };
        let now = Instant::now();
        let mut core = Core::new(
            topo,
            me,
            Timing {
                heartbeat: config.heartbeat,
                dead_after: config.dead_after,
            },
            now,
        );
        let mut conns = HashMap::new();
        let mut by_vertex = HashMap::new();
        if let Some((p, addr)) = parent {
            let (stream, reader) = join_parent(&config, p, addr)?;
            let mut stream = TcpStream::from_std(stream);
            let token = Token(FIRST_CONN);
            poll.registry()
                .register(&mut stream, token, Interest::READABLE)?;
            conns.insert(FIRST_CONN, Conn::new(stream, reader, Role::Link(p)));
            by_vertex.insert(p, FIRST_CONN);
            // Whatever the parent sent right after its welcome is in the reader already.
            core.on_time(Instant::now());
        }
        let (tx, rx) = crossbeam_channel::unbounded();
        let queued = Arc::new(AtomicUsize::new(0));
        let shell = Shell {
            core,
            poll,
            listener,
            conns,
            by_vertex,
            next_conn: FIRST_CONN + 1,
            calls: rx,
            dones: HashMap::new(),
            next_token: 0,
            sink: Box::new(sink),
            queued: queued.clone(),
            secret: config.secret,
            link_delay: config.link_delay,
            handshake_timeout: config.handshake_timeout,
            max_frame: config.max_frame,
            stop: false,
            pending_reads: Vec::new(),
        };
        let thread = std::thread::Builder::new()
            .name(format!("pmix-tree-{me}"))
            .spawn(move || shell.run())?;
        let thread_id = thread.thread().id();
        let tree = Tree {
            calls: tx,
            waker,
            queued,
            thread: Mutex::new(Some(thread)),
            thread_id,
        };
        Ok((tree, addr))
    }

    fn call(&self, call: Call) {
        // If the thread is gone the call comes back and is dropped here: its `done` fails.
        if self.calls.send(call).is_ok() {
            if let Err(e) = self.waker.wake() {
                tracing::error!("cannot wake the tree's thread: {e}");
            }
        }
    }

    /// Joins a fence. `vertices`: every vertex with participants (sorted, this one included),
    /// the same list on each of them. `done` gets the concatenation of every participating
    /// vertex's `data` (in vertex order), or an error: ERR_LOST_CONNECTION if a participating
    /// vertex (or one on the way) is lost, ERR_BAD_PARAM if `vertices` is malformed.
    pub fn fence(
        &self,
        key: FenceKey,
        vertices: Vec<Vertex>,
        data: Vec<u8>,
        done: impl FnOnce(Result<Vec<u8>, Status>) + Send + 'static,
    ) {
        self.call(Call::Fence {
            key,
            vertices,
            data,
            done: Done::new(done),
        });
    }

    /// Sends `payload` to `target`'s host as a [`Delivery::Request`]; `done` gets its answer,
    /// or ERR_LOST_CONNECTION if `target` is or becomes unreachable first.
    pub fn request(
        &self,
        target: Vertex,
        payload: Vec<u8>,
        done: impl FnOnce(Result<Vec<u8>, Status>) + Send + 'static,
    ) {
        self.call(Call::Request {
            target,
            payload,
            done: Done::new(done),
        });
    }

    /// Answers a [`Delivery::Request`].
    pub fn respond(&self, origin: Vertex, id: u64, answer: Result<Vec<u8>, Status>) {
        self.call(Call::Respond { origin, id, answer });
    }

    /// Sends `payload` to `dest`, after everything this vertex sent there before.
    pub fn send(&self, dest: Dest, payload: Vec<u8>) {
        self.call(Call::Send { dest, payload });
    }

    /// Bytes queued on this vertex's links, not yet written (for back-pressure at the host:
    /// e.g. a daemon stops reading its processes' pipes above a bound).
    pub fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    /// Closes every link, stops the thread (pending `done`s get ERR_LOST_CONNECTION).
    /// Idempotent. Called on the tree's own thread (from a `done` or the sink), it only asks
    /// the thread to stop.
    pub fn shutdown(&self) {
        self.call(Call::Shutdown);
        if std::thread::current().id() == self.thread_id {
            return;
        }
        let handle = self
            .thread
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
        if let Some(handle) = handle {
            if handle.join().is_err() {
                tracing::error!("the tree's thread panicked");
            }
        }
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Connects to the parent and runs the child's side of the handshake, blocking until
/// `handshake_timeout`.
fn join_parent(
    config: &Config,
    parent: Vertex,
    addr: SocketAddr,
) -> Result<(std::net::TcpStream, FrameReader), Error> {
    let deadline = Instant::now() + config.handshake_timeout;
    let connect = |source| Error::Connect { addr, source };
    let handshake = |reason: String| Error::Handshake { addr, reason };
    let mut stream =
        std::net::TcpStream::connect_timeout(&addr, config.handshake_timeout).map_err(connect)?;
    stream.set_nodelay(true).map_err(connect)?;
    stream
        .set_write_timeout(Some(config.handshake_timeout))
        .map_err(connect)?;
    let mut reader = FrameReader::new(FrameDecoder::new(HANDSHAKE_MAX_FRAME));
    let me = config.me;
    let child_nonce = auth::nonce()?;
    write_msg(
        &mut stream,
        &Msg::Hello {
            vertex: me,
            nonce: ByteBuf::from(child_nonce.to_vec()),
        },
    )
    .map_err(connect)?;
    let (parent_nonce, proof) = match read_msg(&mut stream, &mut reader, deadline, addr)? {
        Msg::Challenge { nonce, proof } => (nonce, proof),
        Msg::Refused { reason } => return Err(Error::Refused { addr, reason }),
        other => return Err(handshake(format!("expected a challenge, got {other:?}"))),
    };
    let secret = &config.secret;
    if parent_nonce.len() != NONCE_LEN
        || !auth::check(
            secret,
            Side::Parent,
            parent,
            me,
            &child_nonce,
            &parent_nonce,
            &proof,
        )
    {
        return Err(handshake("the parent's proof is wrong".into()));
    }
    let proof = auth::prove(secret, Side::Child, parent, me, &child_nonce, &parent_nonce);
    write_msg(
        &mut stream,
        &Msg::Proof {
            proof: ByteBuf::from(proof),
        },
    )
    .map_err(connect)?;
    match read_msg(&mut stream, &mut reader, deadline, addr)? {
        Msg::Welcome => {}
        Msg::Refused { reason } => return Err(Error::Refused { addr, reason }),
        other => return Err(handshake(format!("expected a welcome, got {other:?}"))),
    }
    reader.set_decoder(FrameDecoder::new(config.max_frame));
    stream.set_nonblocking(true).map_err(connect)?;
    Ok((stream, reader))
}

/// Test support, not part of the API.
#[doc(hidden)]
pub mod testing {
    use super::{Config, Error, join_parent};

    /// Joins the parent as vertex `config.me`, then hands back the raw link, on which nothing
    /// is ever sent unless the caller does: a vertex that went silent.
    pub fn join_and_go_silent(config: Config) -> Result<std::net::TcpStream, Error> {
        let (Some(p), Some(addr)) = (config.topology.parent(config.me), config.parent) else {
            return Err(Error::Config("no parent".into()));
        };
        join_parent(&config, p, addr).map(|(stream, _)| stream)
    }
}

fn write_msg(stream: &mut std::net::TcpStream, msg: &Msg) -> io::Result<()> {
    let mut out = Vec::new();
    msg::encode(msg, &mut out).map_err(io::Error::other)?;
    stream.write_all(&out)
}

/// Reads one message from a blocking stream, by `deadline`.
fn read_msg(
    stream: &mut std::net::TcpStream,
    reader: &mut FrameReader,
    deadline: Instant,
    addr: SocketAddr,
) -> Result<Msg, Error> {
    let handshake = |reason: String| Error::Handshake { addr, reason };
    loop {
        match reader.next_frame() {
            Ok(Some(body)) => {
                return msg::decode(body).map_err(|e| handshake(e.to_string()));
            }
            Ok(None) => {}
            Err(e) => return Err(handshake(e.to_string())),
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(handshake("timed out".into()));
        }
        stream
            .set_read_timeout(Some(left))
            .map_err(|source| Error::Connect { addr, source })?;
        match reader.read_from(stream) {
            Ok(0) => return Err(handshake("the parent closed the connection".into())),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Err(handshake("timed out".into()));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(source) => return Err(Error::Connect { addr, source }),
        }
    }
}

/// What a connection is for.
enum Role {
    /// Accepted, handshake under way (this vertex is the parent).
    Handshake { deadline: Instant, step: Step },
    /// The link to this neighbour.
    Link(Vertex),
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

/// The tree's thread.
struct Shell {
    core: Core,
    poll: Poll,
    listener: Option<TcpListener>,
    conns: HashMap<usize, Conn>,
    by_vertex: HashMap<Vertex, usize>,
    next_conn: usize,
    calls: Receiver<Call>,
    dones: HashMap<u64, Done>,
    next_token: u64,
    sink: Box<dyn FnMut(Delivery) + Send>,
    queued: Arc<AtomicUsize>,
    secret: [u8; SECRET_LEN],
    link_delay: Duration,
    handshake_timeout: Duration,
    max_frame: usize,
    stop: bool,
    /// Connections that may hold frames not yet taken (the parent's, at start).
    pending_reads: Vec<usize>,
}

impl Shell {
    fn run(mut self) {
        let mut events = Events::with_capacity(256);
        self.pending_reads = self.conns.keys().copied().collect();
        loop {
            let now = Instant::now();
            for t in std::mem::take(&mut self.pending_reads) {
                self.read(t, now);
            }
            self.pump();
            self.flush_all();
            if self.stop {
                break;
            }
            let timeout = self.next_wake().map(|t| t.saturating_duration_since(now));
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!(me = self.core.me(), "poll failed: {e}");
                break;
            }
            let now = Instant::now();
            for event in &events {
                match event.token() {
                    WAKER => self.drain_calls(now),
                    LISTENER => self.accept(now),
                    Token(t) => {
                        if event.is_writable() {
                            self.write(t, now);
                        }
                        if event.is_readable() || event.is_read_closed() || event.is_error() {
                            self.read(t, now);
                        }
                    }
                }
                self.pump();
            }
            self.tick(Instant::now());
        }
        self.core.shutdown();
        self.pump();
        self.drain_before_close();
        for (_, mut conn) in self.conns.drain() {
            let _ = self.poll.registry().deregister(&mut conn.stream);
        }
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
        self.core.next_deadline().into_iter().chain(conns).min()
    }

    /// Timers: the core's, handshakes that took too long, held frames whose delay is over.
    fn tick(&mut self, now: Instant) {
        if self.core.next_deadline().is_some_and(|d| d <= now) {
            self.core.on_time(now);
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
                Output::Send { link, msg } => self.enqueue(link, &msg),
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

    fn enqueue(&mut self, link: Vertex, msg: &Msg) {
        let Some(conn) = self
            .by_vertex
            .get(&link)
            .and_then(|t| self.conns.get_mut(t))
        else {
            return;
        };
        let mut frame = Vec::new();
        if let Err(e) = msg::encode(msg, &mut frame) {
            tracing::error!(link, "cannot encode a message: {e}");
            return;
        }
        if self.link_delay.is_zero() {
            conn.out.extend_from_slice(&frame);
        } else {
            conn.held
                .push_back((Instant::now() + self.link_delay, frame));
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
            if let Err(e) = self
                .poll
                .registry()
                .reregister(&mut conn.stream, Token(t), interest)
            {
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
                    if let Err(e) = stream.set_nodelay(true) {
                        tracing::warn!("TCP_NODELAY on a connection from {peer}: {e}");
                    }
                    let t = self.next_conn;
                    self.next_conn += 1;
                    if let Err(e) =
                        self.poll
                            .registry()
                            .register(&mut stream, Token(t), Interest::READABLE)
                    {
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
        loop {
            let end = self.take_frames(t, now);
            let Some(conn) = self.conns.get_mut(&t) else {
                return;
            };
            if let Some(reason) = end {
                return self.lost(t, reason, now);
            }
            match conn.reader.read_from(&mut conn.stream) {
                Ok(0) => {
                    self.take_frames(t, now);
                    return self.lost(t, "end of stream".into(), now);
                }
                Ok(_) => {}
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
            let _ = self.poll.registry().deregister(&mut conn.stream);
            if let Role::Link(v) = conn.role {
                self.by_vertex.remove(&v);
            }
        }
    }

    /// At shutdown: gives what is queued a bounded chance to be written.
    fn drain_before_close(&mut self) {
        for conn in self.conns.values_mut() {
            while let Some((_, frame)) = conn.held.pop_front() {
                conn.out.extend_from_slice(&frame);
            }
        }
        let deadline = Instant::now() + Duration::from_secs(1).min(self.handshake_timeout);
        let mut events = Events::with_capacity(64);
        loop {
            self.conns.retain(|_, c| c.flush().is_ok());
            let mut busy = false;
            for (&t, conn) in &mut self.conns {
                if conn.written < conn.out.len() {
                    busy = true;
                    if !conn.writable {
                        conn.writable = true;
                        let _ = self.poll.registry().reregister(
                            &mut conn.stream,
                            Token(t),
                            Interest::READABLE | Interest::WRITABLE,
                        );
                    }
                }
            }
            let now = Instant::now();
            if !busy || now >= deadline {
                return;
            }
            if self.poll.poll(&mut events, Some(deadline - now)).is_err() {
                return;
            }
        }
    }
}
