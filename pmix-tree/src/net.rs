//! The I/O shell's front: how a vertex starts ([`Config`], [`Tree::start`] on a thread of its
//! own, [`Tree::embedded`] in its host's mio loop), the [`Tree`] handle through which any
//! thread calls it (a crossbeam channel plus a wake-up of the loop), and the child's side of
//! the handshake. The loop itself (links, the parent's side of handshakes, output queues,
//! heartbeat timers) is [`crate::tree_loop`]'s, the same in both modes.
//!
//! The connection to the parent, handshake included, is made when the vertex starts
//! (blocking, bounded by [`Config::handshake_timeout`]), so that a vertex that cannot join
//! fails to start rather than later. Children connect to the listener; a connection that
//! fails its handshake is closed and logged, and nothing else happens.

use std::io::{self, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::{JoinHandle, ThreadId};
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Poll, Token, Waker};
use pmix_types::Status;
use pmix_wire::{FrameDecoder, FrameReader};
use serde_bytes::ByteBuf;

use crate::auth::{self, Side};
pub use crate::core::Delivery;
use crate::core::{Core, Timing};
use crate::mailbox::{Call, Wake};
use crate::msg::{self, HANDSHAKE_MAX_FRAME, Msg, NONCE_LEN};
pub use crate::msg::{Dest, FenceKey};
use crate::tree_loop::{Parts, TreeLoop};
use crate::{Topology, Vertex};

pub use crate::auth::SECRET_LEN;

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

/// A running vertex's handle. Every method may be called from any thread, never blocks (but
/// [`Tree::shutdown`] of a vertex on a thread of its own, which joins the thread), and every
/// `done` is called exactly once, with an error if the vertex stops first: on the vertex's
/// loop thread, or on the calling thread if the vertex had already stopped. Dropping the
/// handle shuts the vertex down.
pub struct Tree {
    calls: Sender<Call>,
    wake: Arc<OnceLock<Wake>>,
    queued: Arc<AtomicUsize>,
    /// The vertex's own thread ([`Tree::start`]); none when embedded.
    thread: Mutex<Option<JoinHandle<()>>>,
    thread_id: Option<ThreadId>,
}

impl std::fmt::Debug for Tree {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tree")
            .field("queued", &self.queued())
            .finish_non_exhaustive()
    }
}

/// The waker's token on a vertex's own thread; the loop's tokens follow.
const WAKER: Token = Token(0);

impl Tree {
    /// Starts this vertex on a thread of its own: listens (if it has children), connects to
    /// the parent (if any; `Error` if the parent cannot be reached or refuses the handshake),
    /// and starts the thread. Returns the address the children must connect to.
    pub fn start(
        config: Config,
        sink: impl FnMut(Delivery) + Send + 'static,
    ) -> Result<(Tree, Option<SocketAddr>), Error> {
        let me = config.me;
        let (mut tree, mut tree_loop, addr) = Tree::embedded(config, sink)?;
        let mut poll = Poll::new()?;
        let waker = Waker::new(poll.registry(), WAKER)?;
        tree_loop.attach(
            poll.registry().try_clone()?,
            WAKER.0 + 1..usize::MAX,
            move || {
                if let Err(e) = waker.wake() {
                    tracing::error!("cannot wake the tree's thread: {e}");
                }
            },
        )?;
        let thread = std::thread::Builder::new()
            .name(format!("pmix-tree-{me}"))
            .spawn(move || {
                let mut events = Events::with_capacity(256);
                loop {
                    let next = tree_loop.turn();
                    if tree_loop.is_finished() {
                        break;
                    }
                    let timeout = next.map(|t| t.saturating_duration_since(Instant::now()));
                    if let Err(e) = poll.poll(&mut events, timeout) {
                        if e.kind() == io::ErrorKind::Interrupted {
                            continue;
                        }
                        tracing::error!(me, "poll failed: {e}");
                        tree_loop.shutdown();
                        break;
                    }
                    for event in &events {
                        if event.token() != WAKER {
                            tree_loop.event(event);
                        }
                    }
                }
            })?;
        tree.thread_id = Some(thread.thread().id());
        tree.thread = Mutex::new(Some(thread));
        Ok((tree, addr))
    }

    /// Prepares this vertex as [`Tree::start`] does (listener, parent joined), but without a
    /// thread: the [`TreeLoop`] returned is for the caller's own mio loop to drive (attach,
    /// events, turns; see [`crate::tree_loop`]), so that a host whose work is on that loop's
    /// thread calls the vertex directly. The [`Tree`] handle serves the host's other threads;
    /// its [`Tree::shutdown`] only asks the loop to stop.
    pub fn embedded(
        config: Config,
        sink: impl FnMut(Delivery) + Send + 'static,
    ) -> Result<(Tree, TreeLoop, Option<SocketAddr>), Error> {
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
        let (listener, addr) = if topo.children(me).next().is_some() {
            let std_listener =
                std::net::TcpListener::bind(config.listen).map_err(|source| Error::Listen {
                    addr: config.listen,
                    source,
                })?;
            std_listener.set_nonblocking(true)?;
            let addr = std_listener.local_addr()?;
            (Some(TcpListener::from_std(std_listener)), Some(addr))
        } else {
            (None, None)
        };
        let core = Core::new(
            topo,
            me,
            Timing {
                heartbeat: config.heartbeat,
                dead_after: config.dead_after,
            },
            Instant::now(),
        );
        let parent = match parent {
            Some((p, addr)) => {
                let (stream, reader) = join_parent(&config, p, addr)?;
                Some((p, TcpStream::from_std(stream), reader))
            }
            None => None,
        };
        let (tx, rx) = crossbeam_channel::unbounded();
        let queued = Arc::new(AtomicUsize::new(0));
        let wake = Arc::new(OnceLock::new());
        let tree_loop = TreeLoop::new(Parts {
            core,
            listener,
            parent,
            calls: rx,
            wake: wake.clone(),
            sink: Box::new(sink),
            queued: queued.clone(),
            secret: config.secret,
            link_delay: config.link_delay,
            handshake_timeout: config.handshake_timeout,
            max_frame: config.max_frame,
        });
        let tree = Tree {
            calls: tx,
            wake,
            queued,
            thread: Mutex::new(None),
            thread_id: None,
        };
        Ok((tree, tree_loop, addr))
    }

    fn call(&self, call: Call) {
        // If the loop is gone the call comes back and is dropped here: its `done` fails.
        if self.calls.send(call).is_ok() {
            // Not attached yet: its first turn takes the call.
            if let Some(wake) = self.wake.get() {
                wake();
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
        self.call(Call::fence(key, vertices, data, done));
    }

    /// Sends `payload` to `target`'s host as a [`Delivery::Request`]; `done` gets its answer,
    /// or ERR_LOST_CONNECTION if `target` is or becomes unreachable first.
    pub fn request(
        &self,
        target: Vertex,
        payload: Vec<u8>,
        done: impl FnOnce(Result<Vec<u8>, Status>) + Send + 'static,
    ) {
        self.call(Call::request(target, payload, done));
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

    /// Closes every link and stops the vertex (pending `done`s get ERR_LOST_CONNECTION).
    /// Idempotent. On a thread of its own, the vertex's thread is joined, unless this is
    /// called on that thread (from a `done` or the sink): then it only asks the thread to
    /// stop. Embedded, it only asks: the loop's next [`TreeLoop::turn`] stops it.
    pub fn shutdown(&self) {
        self.call(Call::Shutdown);
        if self
            .thread_id
            .is_none_or(|id| std::thread::current().id() == id)
        {
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
