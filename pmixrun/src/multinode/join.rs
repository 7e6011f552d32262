//! How daemons started all at once (one `srun` for every node) find their parents in the
//! tree. Tree spawn tells each daemon where its parent listens; `srun` starts them together,
//! so each asks the root's join service instead: it proves it knows the run's secret (an
//! HMAC over a fresh nonce of the root's, never the secret itself), is told where its parent
//! listens once that parent has said so, joins the tree, and then says where it listens for
//! its own children. Answers go down the tree's shape one level at a time.
//!
//! The conversation, each message a big-endian length and a MessagePack body: root →
//! [`Challenge`]; daemon → [`Request`]; root → [`Parent`] (when known); daemon →
//! [`Listening`].

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use pmix_tree::{Topology, Vertex};
use serde::{Deserialize, Serialize};

use crate::multinode::msg::{decode, encode, read_frame, write_frame};

/// What the proofs are bound to.
const LABEL: &[u8] = b"pmixrun join v1";

/// Largest message of the conversation.
const MAX_MESSAGE: u32 = 64 * 1024;

/// How long one conversation may take, waiting for the parent included.
const TIMEOUT: Duration = Duration::from_secs(60);

/// How long a connection may take to prove it knows the run's secret: until it has, it holds
/// a thread and a descriptor of the root's for nothing.
const PROOF_TIMEOUT: Duration = Duration::from_secs(10);

/// Conversations served at once: every daemon of the run four times (its probes of the
/// root's addresses, which leave at once, and its join) and some room; past it a connection
/// is closed at once, so that connections of others (any user can reach the port) cannot
/// take more of the root's threads and descriptors than this, each for at most
/// [`PROOF_TIMEOUT`] unless it proves it knows the secret.
fn max_conversations(topology: &Topology) -> usize {
    4 * topology.size() as usize + 64
}

/// One conversation counted against [`max_conversations`] while it lasts.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(count: &Arc<AtomicUsize>, max: usize) -> Option<Slot> {
        let prev = count.fetch_add(1, Ordering::AcqRel);
        let slot = Slot(count.clone());
        (prev < max).then_some(slot)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct Challenge {
    #[serde(with = "serde_bytes")]
    nonce: Vec<u8>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Request {
    vertex: Vertex,
    #[serde(with = "serde_bytes")]
    proof: Vec<u8>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Parent {
    addrs: Vec<SocketAddr>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Listening {
    addrs: Vec<SocketAddr>,
}

fn send<T: Serialize>(stream: &mut TcpStream, msg: &T) -> std::io::Result<()> {
    write_frame(stream, &encode(msg))
}

fn receive<T: for<'de> Deserialize<'de>>(stream: &mut TcpStream) -> Result<T, String> {
    let body = read_frame(stream, MAX_MESSAGE).map_err(|e| format!("reading: {e}"))?;
    decode(&body).ok_or_else(|| "an undecodable message".to_owned())
}

/// Where every vertex that said so listens (vertex 0: the root's tree).
type Directory = Arc<(Mutex<HashMap<Vertex, Vec<SocketAddr>>>, Condvar)>;

/// The root's join service: a thread answering daemons until dropped.
pub(crate) struct JoinService {
    port: u16,
    stop: Arc<AtomicBool>,
}

impl JoinService {
    /// Listens on every address of this machine and serves the daemons of `topology`, the
    /// root's own tree listening at `root`.
    pub(crate) fn start(
        secret: [u8; pmix_tree::net::SECRET_LEN],
        topology: Topology,
        root: Vec<SocketAddr>,
    ) -> Result<JoinService, String> {
        let listener = TcpListener::bind(("0.0.0.0", 0))
            .map_err(|e| format!("cannot listen for the daemons: {e}"))?;
        let port = listener
            .local_addr()
            .map_err(|e| format!("cannot listen for the daemons: {e}"))?
            .port();
        let directory: Directory = Arc::default();
        directory
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(0, root);
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        std::thread::Builder::new()
            .name("join".into())
            .stack_size(crate::node::output::SMALL_STACK)
            .spawn(move || {
                let serving = Arc::new(AtomicUsize::new(0));
                let max = max_conversations(&topology);
                for stream in listener.incoming() {
                    if stopping.load(Ordering::Acquire) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let Some(slot) = Slot::take(&serving, max) else {
                        tracing::debug!(max, "join: too many connections at once, closing one");
                        continue;
                    };
                    let directory = directory.clone();
                    let spawned = std::thread::Builder::new()
                        .name("join-conn".into())
                        .stack_size(crate::node::output::SMALL_STACK)
                        .spawn(move || {
                            let _slot = slot;
                            if let Err(e) = serve(stream, &secret, topology, &directory) {
                                tracing::warn!("a daemon's join failed: {e}");
                            }
                        });
                    if let Err(e) = spawned {
                        tracing::warn!("cannot serve a daemon's join: {e}");
                    }
                }
            })
            .map_err(|e| format!("cannot start the join service: {e}"))?;
        Ok(JoinService { port, stop })
    }

    /// The addresses the daemons are told to ask at.
    pub(crate) fn addrs(&self) -> Vec<SocketAddr> {
        crate::multinode::bootstrap::my_addresses(false, self.port)
    }
}

impl Drop for JoinService {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wakes the accepting thread, which then sees the flag.
        let _ = TcpStream::connect_timeout(&SocketAddr::from(([127, 0, 0, 1], self.port)), TIMEOUT);
    }
}

/// One daemon's conversation, at the root.
fn serve(
    mut stream: TcpStream,
    secret: &[u8],
    topology: Topology,
    directory: &Directory,
) -> Result<(), String> {
    let deadline = Instant::now() + TIMEOUT;
    stream
        .set_read_timeout(Some(PROOF_TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(PROOF_TIMEOUT)))
        .map_err(|e| e.to_string())?;
    let nonce = pmix_tree::auth::fresh_nonce().map_err(|e| format!("no nonce: {e}"))?;
    // A daemon probing which of the root's addresses it can reach connects and leaves at
    // once: nothing to say about it.
    let challenge = Challenge {
        nonce: nonce.to_vec(),
    };
    if let Err(e) = send(&mut stream, &challenge) {
        tracing::debug!("a connection left before the challenge: {e}");
        return Ok(());
    }
    let mut first = [0u8; 1];
    match stream.peek(&mut first) {
        Ok(0) | Err(_) => {
            tracing::debug!("a connection left without asking");
            return Ok(());
        }
        Ok(_) => {}
    }
    let req: Request = receive(&mut stream)?;
    let vertex = req.vertex;
    if !pmix_tree::auth::check_token(secret, LABEL, &vertex.to_be_bytes(), &nonce, &req.proof) {
        return Err(format!("vertex {vertex}: a wrong proof"));
    }
    let Some(parent) = topology.parent(vertex).filter(|_| vertex < topology.size()) else {
        return Err(format!("vertex {vertex} is no daemon of this run"));
    };
    // Proven: it may now wait for its parent as long as a join takes.
    stream
        .set_read_timeout(Some(TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(TIMEOUT)))
        .map_err(|e| e.to_string())?;
    let (lock, ready) = &**directory;
    let mut known = lock.lock().unwrap_or_else(PoisonError::into_inner);
    let addrs = loop {
        if let Some(a) = known.get(&parent) {
            break a.clone();
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "vertex {vertex}: its parent {parent} never said where it listens"
            ));
        }
        known = ready
            .wait_timeout(known, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    };
    drop(known);
    send(&mut stream, &Parent { addrs }).map_err(|e| e.to_string())?;
    let listening: Listening = receive(&mut stream)?;
    lock.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(vertex, listening.addrs);
    ready.notify_all();
    Ok(())
}

/// A daemon's side, until it has joined the tree: what it must tell the root then.
pub(crate) struct Joining {
    stream: TcpStream,
}

/// Asks the root's join service (at `service`) where `vertex`'s parent listens.
pub(crate) fn ask_parent(
    service: &[SocketAddr],
    secret: &[u8],
    vertex: Vertex,
) -> Result<(Vec<SocketAddr>, Joining), String> {
    let addr = crate::multinode::bootstrap::reachable_parent(service)?;
    let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT)
        .map_err(|e| format!("cannot reach the root at {addr}: {e}"))?;
    stream
        .set_read_timeout(Some(TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(TIMEOUT)))
        .map_err(|e| e.to_string())?;
    let challenge: Challenge = receive(&mut stream)?;
    let proof =
        pmix_tree::auth::prove_token(secret, LABEL, &vertex.to_be_bytes(), &challenge.nonce);
    send(&mut stream, &Request { vertex, proof }).map_err(|e| e.to_string())?;
    let parent: Parent = receive(&mut stream)?;
    Ok((parent.addrs, Joining { stream }))
}

impl Joining {
    /// Tells the root where this daemon listens for its children (none: a leaf).
    pub(crate) fn listening(mut self, addrs: Vec<SocketAddr>) -> Result<(), String> {
        send(&mut self.stream, &Listening { addrs }).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemons_learn_their_parents_level_by_level_and_strangers_are_refused() {
        let secret = [9u8; pmix_tree::net::SECRET_LEN];
        let topo = Topology::new(7, 2);
        let root = vec![SocketAddr::from(([127, 0, 0, 1], 1000))];
        let svc = JoinService::start(secret, topo, root.clone()).unwrap_or_else(|e| panic!("{e}"));
        let at = vec![SocketAddr::from(([127, 0, 0, 1], svc.port))];
        // Vertex 3's parent is 1: asked first, answered once 1 has said where it listens.
        let (tx, rx) = std::sync::mpsc::channel();
        let at3 = at.clone();
        let waiter = std::thread::spawn(move || {
            let (parent, j) = ask_parent(&at3, &secret, 3).unwrap_or_else(|e| panic!("{e}"));
            let _ = tx.send(parent);
            j.listening(Vec::new()).unwrap_or_else(|e| panic!("{e}"));
        });
        let (p1, j1) = ask_parent(&at, &secret, 1).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p1, root);
        let mine = vec![SocketAddr::from(([127, 0, 0, 1], 1001))];
        j1.listening(mine.clone()).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(rx.recv_timeout(TIMEOUT).ok(), Some(mine));
        let _ = waiter.join();
        // A wrong secret gets no answer: the root closes the conversation.
        assert!(ask_parent(&at, &[1u8; 32], 2).is_err());
        // Neither does a vertex outside the tree.
        assert!(ask_parent(&at, &secret, 7).is_err());
    }

    /// Connections that say nothing hold at most the service's few slots: past them a
    /// connection is closed at once (no thread, no descriptor kept for it), and a slot is free
    /// again when its connection goes.
    #[test]
    fn idle_connections_cannot_take_more_than_the_slots() {
        use std::io::Read;
        let secret = [9u8; pmix_tree::net::SECRET_LEN];
        let topo = Topology::new(3, 2);
        let max = max_conversations(&topo);
        let root = vec![SocketAddr::from(([127, 0, 0, 1], 1000))];
        let svc = JoinService::start(secret, topo, root).unwrap_or_else(|e| panic!("{e}"));
        let at = SocketAddr::from(([127, 0, 0, 1], svc.port));
        // Each slot's connection is sent its challenge (read here, so it is being served).
        let connect = || {
            let c = TcpStream::connect_timeout(&at, TIMEOUT).unwrap();
            c.set_read_timeout(Some(TIMEOUT)).unwrap();
            c
        };
        let mut idle: Vec<TcpStream> = (0..max)
            .map(|_| {
                let mut c = connect();
                let mut len = [0u8; 4];
                c.read_exact(&mut len).unwrap();
                c
            })
            .collect();
        let mut extra = connect();
        let mut buf = [0u8; 4];
        assert_eq!(
            extra.read(&mut buf).unwrap(),
            0,
            "an extra connection was served"
        );
        // One slot freed: a new connection is served again (its challenge comes).
        drop(idle.pop());
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let mut c = connect();
            if c.read(&mut buf).unwrap_or(0) > 0 {
                break;
            }
            assert!(Instant::now() < deadline, "the freed slot was never reused");
        }
    }
}
