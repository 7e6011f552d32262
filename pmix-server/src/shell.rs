//! The I/O shell: one mio event-loop thread that owns the engine, the host, the listening
//! sockets and every client connection, and knows no wire protocol.
//!
//! It reads a connection's bytes into its front-end ([`Proto`]), steps the front-end for what
//! the engine must see, and hands each engine output to the front-end of the connection it is
//! for, which writes the client's bytes into the connection's write buffer. Everything that
//! can happen in a turn is settled by one flat pump ([`Shell::pump`]): take the channel's
//! messages (host answers, calls from the API side), step the connections that may have work,
//! deliver the engine's outputs; again until nothing moves. After each delivery a
//! connection's interest is re-derived from its state: readable always, writable only while
//! output is queued. A host with a [`crate::LoopHook`] has its events handed over, and its
//! `turn` called after every pump, until neither leaves anything for the other.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::ops::Range;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use mio::net::UnixStream;
use mio::{Events, Interest, Poll, Token, Waker};
use pmix_types::{Nspace, Proc, Status, Value};
use slab::Slab;

use crate::conn_watch::ConnWatch;
use crate::engine::{ConnId, Engine, Output};
use crate::frontend::{Frontends, Peer, Personality, Proto, SharedAnswer, Step};
use crate::hook::{LoopContext, LoopWaker, hook_tokens};
use crate::host::{Host, call_host};
use crate::mailbox::{self, Call, DmodexDone, LoopMsg, Pmi1Endpoint, Pmi1Way};
use crate::outbuf::OutQueue;
use crate::shell_io::{Listener, Stream};
use crate::{Error, Limits};

/// The waker's token; listeners count down from below it, connections up from 0, a host's
/// [`crate::LoopHook`] has a range in between ([`hook_tokens`]).
pub(crate) const WAKER: Token = Token(usize::MAX);

/// Bytes read from a socket per `read` call.
const READ_CHUNK: usize = 64 * 1024;

/// API calls taken per round of the loop before the outputs they made are delivered.
const CALLS_PER_ROUND: usize = 64;

/// How soon to try accepting again after the process ran out of descriptors.
const ACCEPT_RETRY: Duration = Duration::from_millis(100);

fn listener_token(index: usize) -> Token {
    Token(usize::MAX - 1 - index)
}

struct ConnIo {
    stream: Stream,
    proto: Proto,
    /// Output queued for the peer.
    out: OutQueue,
    /// Close once the write buffer is empty.
    closing: bool,
    /// Closed and told to the engine; the slot is freed when the pump is done.
    gone: bool,
    writable_interest: bool,
    /// Tells this connection from an earlier one that had the same slot (for timers).
    serial: u64,
    /// Accepted on a listener and not yet authenticated: the peer uid it counts against.
    unauthenticated: Option<Option<u32>>,
    /// Reading stopped before the socket was drained (the front-end held a whole unit of
    /// input, or output was backed up): read again once that clears.
    more_to_read: bool,
    /// The peer closed its end (or failed): read to the end when reading again.
    read_closed: bool,
    /// Requests are held back until the client reads its output.
    held: bool,
    /// Since when output over the limit has waited with none of it written.
    stalled_since: Option<Instant>,
}

impl ConnIo {
    /// Output queued and not yet written.
    fn queued(&self) -> usize {
        self.out.queued()
    }
}

pub(crate) struct Shell<H: Host> {
    poll: Poll,
    listeners: Vec<Listener>,
    engine: Engine,
    host: H,
    conns: Slab<ConnIo>,
    /// Connections that may have work for the engine: after input, or after an answer that a
    /// front-end was holding its next request back for.
    ready: VecDeque<ConnId>,
    /// Closed connections whose slots are freed at the end of the pump.
    gone: Vec<ConnId>,
    frontends: Frontends,
    rx: Receiver<LoopMsg>,
    tx: Sender<LoopMsg>,
    waker: Arc<Waker>,
    dmodex: HashMap<u64, DmodexDone>,
    next_token: u64,
    cleanup: Vec<PathBuf>,
    /// The session directory (`PMIX_TMPDIR`), in `cleanup`; the namespace directories are
    /// made in it.
    session: PathBuf,
    running: bool,
    /// The namespace directories made in the rendezvous directory.
    nsdirs: HashMap<Nspace, PathBuf>,
    scratch: Vec<u8>,
    limits: Limits,
    /// Handshakes in progress by peer uid, and when to look at a connection again
    /// (handshake deadline, stalled output).
    watch: ConnWatch,
    next_serial: u64,
    /// The process ran out of descriptors while accepting: when to try the listeners again.
    accept_retry: Option<Instant>,
    /// The tokens of the host's [`crate::LoopHook`] (empty without one), and when its last
    /// turn asked to turn again.
    hook_tokens: Range<usize>,
    hook_due: Option<Instant>,
    /// The engine's number of output pulls, published for [`crate::Server::iof_deliver`].
    pulls: Arc<std::sync::atomic::AtomicUsize>,
    /// Output chunks dropped for tools that did not read.
    iof_dropped: u64,
}

/// What the shell is started with, besides the engine and the host.
pub(crate) struct ShellParts {
    pub(crate) poll: Poll,
    pub(crate) listeners: Vec<Listener>,
    pub(crate) frontends: Frontends,
    pub(crate) rx: Receiver<LoopMsg>,
    pub(crate) tx: Sender<LoopMsg>,
    pub(crate) waker: Arc<Waker>,
    /// What init created, removed in reverse order at shutdown.
    pub(crate) cleanup: Vec<PathBuf>,
    pub(crate) session: PathBuf,
    pub(crate) limits: Limits,
    /// The number of pulls, for the API side ([`crate::Server::iof_deliver`]).
    pub(crate) pulls: Arc<std::sync::atomic::AtomicUsize>,
}

impl<H: Host> Shell<H> {
    pub(crate) fn new(parts: ShellParts, engine: Engine, mut host: H) -> Result<Self, Error> {
        let ShellParts {
            poll,
            mut listeners,
            frontends,
            rx,
            tx,
            waker,
            cleanup,
            session,
            limits,
            pulls,
        } = parts;
        for (i, l) in listeners.iter_mut().enumerate() {
            l.register(poll.registry(), listener_token(i))
                .map_err(Error::io("registering a listener"))?;
        }
        let hook_tokens = match host.loop_hook() {
            Some(hook) => {
                let cx = LoopContext {
                    registry: poll
                        .registry()
                        .try_clone()
                        .map_err(Error::io("cloning the loop's registry"))?,
                    tokens: hook_tokens(),
                    waker: LoopWaker(waker.clone()),
                };
                hook.start(cx)
                    .map_err(Error::io("starting the host's loop hook"))?;
                hook_tokens()
            }
            None => 0..0,
        };
        Ok(Shell {
            poll,
            listeners,
            engine,
            host,
            conns: Slab::new(),
            ready: VecDeque::new(),
            gone: Vec::new(),
            frontends,
            rx,
            tx,
            waker,
            dmodex: HashMap::new(),
            next_token: 1,
            cleanup,
            session,
            running: true,
            nsdirs: HashMap::new(),
            scratch: vec![0; READ_CHUNK],
            watch: ConnWatch::new(limits.unauthenticated_per_uid),
            limits,
            next_serial: 0,
            accept_retry: None,
            hook_tokens,
            hook_due: None,
            pulls,
            iof_dropped: 0,
        })
    }

    /// Runs until shutdown.
    pub(crate) fn run(mut self) {
        mailbox::set_loop_thread(&self.tx);
        let mut events = Events::with_capacity(256);
        // What the hook queued or was asked before the loop started.
        self.settle();
        while self.running {
            self.forget_idle_timers();
            let next = [
                self.engine.poll_timeout(),
                self.watch.next(),
                self.accept_retry,
                self.hook_due,
            ]
            .into_iter()
            .flatten()
            .min();
            let timeout = next.map(|t| t.saturating_duration_since(Instant::now()));
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!("event loop poll failed: {e}");
                break;
            }
            for ev in events.iter() {
                match ev.token() {
                    WAKER => {}
                    Token(t) if self.hook_tokens.contains(&t) => {
                        if let Some(hook) = self.host.loop_hook() {
                            hook.event(ev);
                        }
                    }
                    Token(t) => match self.listener_at(t) {
                        Some(index) => self.accept(index),
                        None => {
                            if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                                self.read(t, ev.is_read_closed() || ev.is_error());
                            }
                            if ev.is_writable() {
                                self.flush(t);
                            }
                        }
                    },
                }
            }
            let now = Instant::now();
            self.engine.handle_timeout(now);
            self.expire(now);
            if self.accept_retry.is_some_and(|t| t <= now) {
                self.accept_retry = None;
                for index in 0..self.listeners.len() {
                    self.accept(index);
                }
            }
            self.settle();
        }
        self.shutdown();
    }

    /// Pumps, then lets the hook end its turn (writing what the host's callbacks queued on
    /// it); again while the hook's turn left the pump something (answers it completed).
    fn settle(&mut self) {
        loop {
            self.pump();
            let Some(hook) = self.host.loop_hook() else {
                return;
            };
            self.hook_due = hook.turn();
            if self.rx.is_empty() && self.ready.is_empty() {
                return;
            }
        }
    }

    /// Drops the timers at the front that no longer have anything to watch (the connection
    /// authenticated, caught up or went): without them the loop need not wake, nor read the
    /// clock, for nothing.
    fn forget_idle_timers(&mut self) {
        let conns = &self.conns;
        self.watch.drop_idle(|conn, serial| {
            conns.get(conn).is_some_and(|c| {
                !c.gone
                    && c.serial == serial
                    && (c.unauthenticated.is_some() || c.stalled_since.is_some())
            })
        });
    }

    /// Closes the connections whose time is up: no handshake within the limit, or output
    /// over the limit that the client has not read for too long.
    fn expire(&mut self, now: Instant) {
        while let Some((_, conn, serial)) = self.watch.pop_due(now) {
            let Some(c) = self
                .conns
                .get(conn)
                .filter(|c| !c.gone && c.serial == serial)
            else {
                continue;
            };
            if c.unauthenticated.is_some() {
                tracing::warn!(
                    conn,
                    "closing a connection that did not complete its handshake within {:?}",
                    self.limits.handshake_timeout
                );
                self.close(conn);
            } else if let Some(since) = c.stalled_since {
                let due = since + self.limits.stall_timeout;
                if due <= now {
                    tracing::warn!(
                        conn,
                        queued = c.queued(),
                        "closing a client that has read none of its output for {:?}",
                        self.limits.stall_timeout
                    );
                    self.close(conn);
                } else {
                    self.watch.look_again(due, conn, serial);
                }
            }
        }
    }

    /// Settles everything that can move now, in one flat loop: messages from the channel,
    /// connections with work, the engine's outputs; until a round moves nothing.
    fn pump(&mut self) {
        loop {
            let mut moved = false;
            // Most rounds find the channel empty: asking is cheaper than trying. At most
            // `CALLS_PER_ROUND` calls before what they produced is written out: a burst of
            // output for many pulls must not pile up in the engine's queue first.
            let mut calls = 0;
            while calls < CALLS_PER_ROUND && !self.rx.is_empty() {
                let Ok(msg) = self.rx.try_recv() else {
                    break;
                };
                calls += 1;
                moved = true;
                match msg {
                    LoopMsg::HostDone(op, outcome) => self.engine.handle_host_done(op, outcome),
                    LoopMsg::Call(call) => self.call(call),
                    LoopMsg::Shutdown => self.running = false,
                }
            }
            while let Some(conn) = self.ready.pop_front() {
                moved = true;
                self.step(conn);
            }
            moved |= self.drain_outputs();
            moved |= self.wake();
            if !moved {
                break;
            }
        }
        for conn in self.gone.drain(..) {
            self.conns.try_remove(conn);
        }
        self.publish_pulls();
    }

    /// Tells [`crate::Server::iof_deliver`] how many pulls tools have registered.
    fn publish_pulls(&self) {
        self.pulls.store(
            self.engine.pull_count(),
            std::sync::atomic::Ordering::Release,
        );
    }

    fn call(&mut self, call: Call) {
        // The API side waits on these replies; if it gave up, nobody reads them.
        match call {
            Call::RegisterNspace {
                nspace,
                nlocalprocs,
                info,
                reply,
            } => {
                let result = self
                    .engine
                    .register_nspace(nspace.clone(), nlocalprocs, &info);
                // What only the namespace's own processes use (their directory, the ds21
                // lock segment they take at init) is made where some of them run: a job's
                // start then costs the nodes it does not run on no files.
                if result.is_ok() && nlocalprocs > 0 {
                    self.make_nsdir(&nspace);
                    self.frontends.nspace_registered(&nspace, nlocalprocs);
                }
                let _ = reply.send(result);
            }
            Call::DeregisterNspace { nspace, reply } => {
                self.engine.deregister_nspace(nspace.as_str());
                if let Some(dir) = self.nsdirs.remove(&nspace) {
                    remove_nsdir(&dir);
                }
                self.frontends.nspace_deregistered(&nspace);
                // Its clients' cleanups are done when the host hears it is let go.
                self.drain_outputs();
                release_free_memory();
                let _ = reply.send(());
            }
            Call::RegisterClient {
                proc,
                uid,
                gid,
                proofs,
                reply,
            } => {
                let _ = reply.send(self.engine.register_client(&proc, uid, gid, proofs));
            }
            Call::DeregisterClient { proc, reply } => {
                self.engine.deregister_client(&proc);
                let _ = reply.send(());
            }
            Call::ClientStarted { proc, pid } => self.engine.client_started(&proc, pid),
            Call::ClientProofs { proc, reply } => {
                let _ = reply.send(self.engine.client_proofs(&proc));
            }
            Call::Dmodex { proc, info, done } => {
                let token = self.next_token;
                self.next_token += 1;
                self.dmodex.insert(token, done);
                self.engine
                    .dmodex_request(&proc, &info, token, Instant::now());
            }
            Call::Notify { event } => self.engine.host_notify(&event),
            Call::SettleClient { proc, done } => {
                self.read_out(&proc);
                done();
            }
            Call::ClientEnded { proc } => {
                // Its close, once read, is the better witness: it says whether it finalized.
                self.read_out(&proc);
                self.engine.client_ended(&proc);
            }
            Call::DefinePset { name, members } => self.engine.define_pset(name, members),
            Call::DeletePset { name, reply } => {
                let _ = reply.send(self.engine.delete_pset(&name));
            }
            Call::ProcEndedElsewhere { proc, status } => {
                self.engine.proc_ended_elsewhere(&proc, status)
            }
            Call::ProcRestarted {
                proc,
                reincarnation,
            } => self.engine.proc_restarted(&proc, reincarnation),
            Call::Pmi1Connect { proc, how, reply } => {
                let _ = reply.send(self.pmi1_connect(proc, how));
            }
            Call::IofDeliver {
                source,
                channel,
                data,
                unix_secs,
            } => self.engine.iof_deliver(&source, channel, &data, unix_secs),
            Call::JobData { nspace, reply } => {
                let _ = reply.send(self.engine.job_data(nspace.as_str()));
            }
        }
    }

    /// Creates the namespace's own directory (`NSDIR`) when it lies in the server's
    /// rendezvous directory: clients (Open MPI) keep their session files there and
    /// remove it when they end.
    fn make_nsdir(&mut self, nspace: &Nspace) {
        use std::os::unix::fs::DirBuilderExt;
        // Only the job level: deriving the whole job data here would make every registration
        // pay for the per-node and per-rank data (a second for a million ranks).
        let Some(dir) = self
            .engine
            .job_value(nspace.as_str(), pmix_types::attr::NSDIR)
            .and_then(Value::as_str)
            .map(PathBuf::from)
        else {
            return;
        };
        if dir.parent() != Some(self.session.as_path()) {
            return;
        }
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {
                self.nsdirs.insert(nspace.clone(), dir);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                tracing::warn!(dir = %dir.display(), "cannot create the namespace directory: {e}")
            }
        }
    }

    /// Makes the way a PMI-1 process will reach the server: a socket pair made for it, or a
    /// one-time id to show on the PMI-1 port.
    fn pmi1_connect(&mut self, proc: Proc, how: Pmi1Way) -> Result<Pmi1Endpoint, Error> {
        if !self.engine.is_registered(&proc) {
            return Err(Error::UnknownProc(proc));
        }
        match how {
            Pmi1Way::Fd => {
                let (ours, theirs) = std::os::unix::net::UnixStream::pair()
                    .map_err(Error::io("making a PMI-1 socket pair"))?;
                ours.set_nonblocking(true)
                    .map_err(Error::io("making a PMI-1 socket non-blocking"))?;
                let stream = Stream::Unix(UnixStream::from_std(ours));
                self.add_conn(stream, Proto::pmi1_for(proc))
                    .map_err(Error::io("registering a PMI-1 socket"))?;
                Ok(Pmi1Endpoint::Fd(OwnedFd::from(theirs)))
            }
            Pmi1Way::Port(id) => {
                let port = self.pmi1_port()?;
                if !self.frontends.pmi1.hand_out(id, proc) {
                    return Err(Error::io("handing out a PMI_ID")(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        "id in use",
                    )));
                }
                Ok(Pmi1Endpoint::Port(port))
            }
        }
    }

    /// The PMI-1 TCP port, listening on loopback from the first time it is needed.
    fn pmi1_port(&mut self) -> Result<u16, Error> {
        if let Some(l) = self.listeners.iter().find(|l| l.kind == Personality::Pmi1) {
            return l.port().map_err(Error::io("reading the PMI-1 port"));
        }
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        let l = std::net::TcpListener::bind(addr).map_err(Error::io("binding the PMI-1 port"))?;
        let mut l = Listener::tcp(l, Personality::Pmi1).map_err(Error::io("the PMI-1 port"))?;
        l.register(self.poll.registry(), listener_token(self.listeners.len()))
            .map_err(Error::io("registering the PMI-1 port"))?;
        let port = l.port().map_err(Error::io("reading the PMI-1 port"))?;
        self.listeners.push(l);
        Ok(port)
    }

    /// Registers a new connection with the poll and keeps it.
    fn add_conn(&mut self, mut stream: Stream, proto: Proto) -> io::Result<ConnId> {
        let entry = self.conns.vacant_entry();
        let conn = entry.key();
        self.poll
            .registry()
            .register(&mut stream, Token(conn), Interest::READABLE)?;
        self.next_serial += 1;
        entry.insert(ConnIo {
            stream,
            proto,
            out: OutQueue::default(),
            closing: false,
            gone: false,
            writable_interest: false,
            serial: self.next_serial,
            unauthenticated: None,
            more_to_read: false,
            read_closed: false,
            held: false,
            stalled_since: None,
        });
        Ok(conn)
    }

    /// The listener whose token is `token`, if it is one's.
    fn listener_at(&self, token: usize) -> Option<usize> {
        let index = (usize::MAX - 1).checked_sub(token)?;
        (index < self.listeners.len()).then_some(index)
    }

    /// Accepts what listener `index` has waiting.
    fn accept(&mut self, index: usize) {
        loop {
            let Some(l) = self.listeners.get(index) else {
                return;
            };
            let kind = l.kind;
            match l.accept() {
                Ok((stream, peer)) => self.accepted(stream, kind, peer),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if is_out_of_descriptors(&e) => {
                    // The connections stay queued in the kernel; with an edge-triggered
                    // listener nothing would say so again, so try again shortly.
                    if self.accept_retry.is_none() {
                        tracing::warn!(
                            "out of file descriptors: connections wait until some are free \
                             (raise `ulimit -n`)"
                        );
                    }
                    self.accept_retry = Some(Instant::now() + ACCEPT_RETRY);
                    return;
                }
                Err(e) => {
                    tracing::warn!("{kind:?} accept failed: {e}");
                    return;
                }
            }
        }
    }

    fn accepted(&mut self, stream: Stream, kind: Personality, peer: Peer) {
        let uid = peer.creds.map(|c| c.uid).or(peer.tcp_owner.map(|t| t.uid));
        if let Err(trying) = self.watch.start_handshake(uid) {
            tracing::warn!(
                ?uid,
                "refusing a {kind:?} connection: {trying} of this uid have not completed \
                 their handshake yet"
            );
            return;
        }
        let proto = Proto::accepted_on(kind, peer, &self.frontends);
        match self.add_conn(stream, proto) {
            Ok(conn) => {
                if let Some(c) = self.conns.get_mut(conn) {
                    c.unauthenticated = Some(uid);
                    let at = Instant::now() + self.limits.handshake_timeout;
                    self.watch.look_again(at, conn, c.serial);
                }
            }
            Err(e) => {
                self.watch.handshake_over(uid);
                tracing::warn!("cannot register a {kind:?} connection: {e}");
            }
        }
    }

    /// A live connection (not closed).
    fn live(&mut self, conn: ConnId) -> Option<&mut ConnIo> {
        self.conns.get_mut(conn).filter(|c| !c.gone)
    }

    /// Reads what the connection has. `to_end`: the peer closed or failed, so read until the
    /// end of the stream is seen. Reading stops early while the front-end holds a whole unit
    /// of input it has not taken, or while the client's output is backed up: its requests
    /// then wait in the kernel, and reading resumes when that clears.
    fn read(&mut self, conn: ConnId, to_end: bool) {
        let limit = self.limits.output_queue;
        let Some(c) = self.conns.get_mut(conn).filter(|c| !c.gone) else {
            return;
        };
        c.read_closed |= to_end;
        let to_end = c.read_closed;
        let mut closed = false;
        loop {
            if c.queued() > limit {
                c.held = true;
                c.more_to_read = true;
                break;
            }
            if !c.proto.wants_input() {
                c.more_to_read = true;
                break;
            }
            match c.proto.read_from(&mut c.stream, &mut self.scratch) {
                Ok(0) => {
                    closed = true;
                    break;
                }
                Ok(n) => {
                    // A short read (the front-end offers at least READ_CHUNK) emptied the
                    // socket: new data will raise a new readiness event, so the read that
                    // would say WouldBlock is saved.
                    if n < READ_CHUNK && !to_end {
                        break;
                    }
                }
                Err(e) => match e.kind() {
                    io::ErrorKind::WouldBlock => break,
                    io::ErrorKind::Interrupted => {}
                    _ => {
                        closed = true;
                        break;
                    }
                },
            }
        }
        if closed {
            c.more_to_read = false;
            // What arrived before the end is served, and its answers written, first.
            self.step(conn);
            self.drain_outputs();
            self.close(conn);
        } else {
            self.ready.push_back(conn);
        }
    }

    /// Hands the engine what the connection's front-end has for it, one request at a time
    /// while the client's output stays under the limit.
    fn step(&mut self, conn: ConnId) {
        loop {
            let limit = self.limits.output_queue;
            let Some(c) = self.conns.get_mut(conn).filter(|c| !c.gone && !c.closing) else {
                return;
            };
            if c.queued() > limit {
                c.held = true;
                break;
            }
            let engine_conn = engine_id(conn, c.serial);
            match c.proto.step(&mut self.frontends, c.out.bytes()) {
                Step::Idle => break,
                Step::Close => {
                    self.close_after_flush(conn);
                    return;
                }
                Step::Hello {
                    proc,
                    auth,
                    answers,
                } => self.engine.handle_hello(engine_conn, &proc, auth, answers),
                Step::ToolHello(hello) => self.engine.handle_tool_hello(engine_conn, hello),
                Step::Request(id, req) => {
                    self.engine
                        .handle_request(engine_conn, id, req, Instant::now());
                    // Its answer is in the write buffer before the next request is taken,
                    // so the limit above sees it.
                    self.drain_outputs();
                }
            }
        }
        let limit = self.limits.output_queue;
        let Some(c) = self.conns.get_mut(conn).filter(|c| !c.gone) else {
            return;
        };
        // What the front-end answered itself; the engine's answers were written as delivered.
        if c.queued() > 0 || c.closing {
            self.flush(conn);
        }
        let Some(c) = self.conns.get_mut(conn).filter(|c| !c.gone) else {
            return;
        };
        if c.more_to_read && !c.held && c.proto.wants_input() && c.queued() <= limit {
            c.more_to_read = false;
            self.read(conn, false);
        }
    }

    /// Lets the connections a front-end woke look again at what they wait for; true if any.
    fn wake(&mut self) -> bool {
        let woken = self.frontends.take_woken();
        // A slot taken over by a newer connection meanwhile is woken for nothing: a front-end
        // that waits for nothing does nothing.
        for &conn in &woken {
            self.deliver(conn, |p, fe, out| p.woken(fe, out.bytes()));
        }
        !woken.is_empty()
    }

    /// Delivers the engine's outputs; true if there were any.
    /// Writes out what the engine produced. The count of pulls is published first, before
    /// any answer goes out (here, also from [`Self::step`] between a connection's requests): a
    /// tool told its pull is registered may make the job write at once, and that output must
    /// not find the count still 0 (an `IOF_PULL` answered inside `step` before the count was
    /// published lost a rank's first lines about one run in ten under load).
    fn drain_outputs(&mut self) -> bool {
        self.publish_pulls();
        let mut any = false;
        while let Some(out) = self.engine.poll_output() {
            any = true;
            self.output(out);
        }
        any
    }

    fn output(&mut self, out: Output) {
        match out {
            Output::Accept { conn, job } => {
                if let Some(conn) = self.authenticated(conn) {
                    let unix = self
                        .conns
                        .get(conn)
                        .is_some_and(|c| matches!(c.stream, Stream::Unix(_)));
                    self.deliver(conn, |p, fe, out| {
                        p.accepted(fe, conn, &job, unix, out.bytes())
                    });
                }
            }
            Output::ToolAccept { conn, tool, server } => {
                if let Some(conn) = self.authenticated(conn) {
                    self.deliver(conn, |p, _, out| {
                        p.tool_accepted(&tool, &server, out.bytes())
                    });
                }
            }
            Output::CheckLineage { conn, pid, inode } => {
                let holds = crate::lineage::holds_socket(pid, inode);
                if holds.is_none() {
                    tracing::debug!(conn, pid, "cannot tell who holds a client's socket");
                }
                self.engine.lineage_checked(conn, holds);
            }
            Output::Refuse {
                conn,
                status,
                reason,
            } => {
                if let Some(conn) = self.slot_of(conn) {
                    self.deliver(conn, |p, _, out| p.refused(status, &reason, out.bytes()));
                }
            }
            Output::Reply { conn, id, reply } => {
                if let Some(conn) = self.slot_of(conn) {
                    self.deliver(conn, |p, fe, out| p.replied(fe, id, reply, out));
                }
            }
            Output::SharedReply { to, reply } => {
                let answer = SharedAnswer::new(reply);
                for (conn, id) in to {
                    if let Some(conn) = self.slot_of(conn) {
                        self.deliver(conn, |p, fe, out| p.replied_shared(fe, id, &answer, out));
                    }
                }
            }
            Output::Event { conn, event } => {
                if let Some(conn) = self.slot_of(conn) {
                    self.deliver(conn, |p, _, out| p.event(&event, out.bytes()));
                }
            }
            Output::Iof { conn, chunk } => {
                let Some(slot) = self.slot_of(conn) else {
                    return;
                };
                // A tool far behind loses output rather than hold memory or anyone up
                // (the newest is dropped, as `IOF_DROP_NEWEST` says).
                let behind = self
                    .conns
                    .get(slot)
                    .is_some_and(|c| c.queued() > self.limits.output_queue);
                if behind {
                    self.iof_dropped += 1;
                    if self.iof_dropped.is_power_of_two() {
                        tracing::warn!(
                            conn,
                            dropped = self.iof_dropped,
                            "a tool does not read its output: dropping chunks"
                        );
                    }
                    return;
                }
                self.deliver(slot, |p, _, out| p.iof(&chunk, out.bytes()));
            }
            Output::Close { conn } => {
                if let Some(conn) = self.slot_of(conn) {
                    self.close_after_flush(conn);
                }
            }
            Output::Host { op, call } => {
                call_host(&mut self.host, op, call, &self.tx, &self.waker);
            }
            Output::Dmodex { token, result } => {
                if let Some(done) = self.dmodex.remove(&token) {
                    done(result);
                }
            }
            Output::Cleanup { list } => list.iter().for_each(crate::cleanup::run),
        }
    }

    /// The engine accepted connection `conn` (a client or a tool): it no longer counts as
    /// unauthenticated. Its slot, if it is still there.
    fn authenticated(&mut self, conn: ConnId) -> Option<usize> {
        let conn = self.slot_of(conn)?;
        let uid = self
            .conns
            .get_mut(conn)
            .and_then(|c| c.unauthenticated.take());
        if let Some(uid) = uid {
            self.watch.handshake_over(uid);
        }
        Some(conn)
    }

    /// Reads and acts on what the process `proc`, seen ended by the host, has sent: its bytes
    /// are in the kernel even when its end was seen first, and reading them to the end (the
    /// process being gone) closes its connections.
    fn read_out(&mut self, proc: &Proc) {
        for conn in self.engine.conns_of_proc(proc) {
            if let Some(slot) = self.slot_of(conn) {
                self.read(slot, false);
            }
        }
        self.pump();
    }

    /// The slot of the live connection the engine calls `conn` (see [`engine_id`]); None for
    /// a connection gone, even if a newer one has its slot.
    fn slot_of(&self, conn: ConnId) -> Option<usize> {
        let slot = conn & SLOT_MASK;
        self.conns
            .get(slot)
            .filter(|c| !c.gone && engine_id(slot, c.serial) == conn)
            .map(|_| slot)
    }

    /// Hands an engine output to the connection's front-end, then writes what it produced.
    fn deliver(&mut self, conn: ConnId, f: impl FnOnce(&mut Proto, &mut Frontends, &mut OutQueue)) {
        let Some(c) = self.conns.get_mut(conn).filter(|c| !c.gone) else {
            return;
        };
        f(&mut c.proto, &mut self.frontends, &mut c.out);
        if let Some((at, fd)) = self.frontends.native.take_pending_fd() {
            c.out.pass_fd(at, fd);
        }
        if c.stalled_since.is_some() && c.queued() > self.limits.output_queue_hard {
            tracing::warn!(
                conn,
                queued = c.queued(),
                "closing a client that does not read its output"
            );
            self.close(conn);
            return;
        }
        if c.proto.is_closing() {
            self.close_after_flush(conn);
        } else {
            // Stepped again if the front-end may have held input back for this answer.
            if c.more_to_read || !c.proto.wants_input() {
                self.ready.push_back(conn);
            }
            self.flush(conn);
        }
    }

    fn flush(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get_mut(conn).filter(|c| !c.gone) else {
            return;
        };
        let before = c.queued();
        let dead = !c.out.write_to(&mut c.stream);
        if c.queued() > self.limits.output_queue {
            // Backed up: the stall clock runs from the last write that made progress.
            if c.stalled_since.is_none() || c.queued() < before {
                let now = Instant::now();
                if c.stalled_since.is_none() {
                    let at = now + self.limits.stall_timeout;
                    self.watch.look_again(at, conn, c.serial);
                }
                c.stalled_since = Some(now);
            }
        } else {
            c.stalled_since = None;
            if c.held {
                // The client caught up: take its requests (and read its bytes) again.
                c.held = false;
                self.ready.push_back(conn);
            }
        }
        let want_write = !c.out.is_empty();
        let done_closing = c.closing && c.out.is_empty();
        if want_write != c.writable_interest && !dead {
            let interest = if want_write {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            if self
                .poll
                .registry()
                .reregister(&mut c.stream, Token(conn), interest)
                .is_ok()
            {
                c.writable_interest = want_write;
            }
        }
        if dead || done_closing {
            self.close(conn);
        }
    }

    fn close_after_flush(&mut self, conn: ConnId) {
        if let Some(c) = self.live(conn) {
            c.closing = true;
        }
        self.flush(conn);
    }

    /// Closes the connection and tells the engine; the pump delivers what that causes.
    fn close(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get_mut(conn).filter(|c| !c.gone) else {
            return;
        };
        c.gone = true;
        c.proto.closed(&mut self.frontends);
        let _ = self.poll.registry().deregister(&mut c.stream);
        c.stream.shutdown();
        let unauthenticated = c.unauthenticated.take();
        let engine_conn = engine_id(conn, c.serial);
        self.gone.push(conn);
        if let Some(uid) = unauthenticated {
            self.watch.handshake_over(uid);
        }
        self.engine.handle_closed(engine_conn);
    }

    fn shutdown(&mut self) {
        if let Some(hook) = self.host.loop_hook() {
            hook.stop();
        }
        // The front-ends' shared memory is unmapped and its files removed before the
        // directories go.
        self.frontends.shutdown();
        let conns: Vec<ConnId> = self.conns.iter().map(|(k, _)| k).collect();
        for conn in conns {
            if let Some(mut c) = self.conns.try_remove(conn) {
                let _ = self.poll.registry().deregister(&mut c.stream);
                c.stream.shutdown();
            }
        }
        for done in self.dmodex.drain().map(|(_, d)| d) {
            done(Err(Status::ERR_INIT));
        }
        for (_, dir) in self.nsdirs.drain() {
            remove_nsdir(&dir);
        }
        // What the jobs left at the top of the session directory (the namespace directories
        // are gone by now); then the list below removes the directory itself.
        if let Ok(entries) = std::fs::read_dir(&self.session) {
            for e in entries.flatten() {
                let p = e.path();
                let r = if e.file_type().is_ok_and(|t| t.is_dir()) {
                    std::fs::remove_dir_all(&p)
                } else {
                    std::fs::remove_file(&p)
                };
                if let Err(e) = r {
                    tracing::warn!(path = %p.display(), "cannot remove: {e}");
                }
            }
        }
        // Remove what init created, innermost first, and nothing else.
        for path in self.cleanup.iter().rev() {
            let res = if path.is_dir() {
                std::fs::remove_dir(path)
            } else {
                std::fs::remove_file(path)
            };
            if let Err(e) = res {
                tracing::warn!(path = %path.display(), "cannot remove: {e}");
            }
        }
    }
}

/// The slot bits of an engine connection id; the rest is the connection's serial.
const SLOT_MASK: usize = 0xffff_ffff;
const _: () = assert!(
    usize::BITS == 64,
    "engine connection ids pack a slot and a serial"
);

/// What the engine calls the connection in `slot`: the slot and the connection's serial, so
/// that what the engine still has for a connection gone (a host's late answer to its
/// handshake, say) never reaches a later connection given the same slot.
fn engine_id(slot: usize, serial: u64) -> ConnId {
    // Serials wrap after 2^32 connections; the slot bits stay exact.
    slot | ((serial as usize) << 32)
}

/// True for `accept` failing because the process or the system has no descriptor left.
fn is_out_of_descriptors(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(code) if code == libc::EMFILE || code == libc::ENFILE
    )
}

/// Gives the memory a deregistered namespace freed back to the system. glibc keeps freed
/// memory in its heap for reuse, so without this a server that hosted a big job stays at that
/// job's size for the rest of its life.
fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; it takes no pointers
    // from us and is safe to call at any time from any thread.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Removes a namespace directory and what the job left in it (it may already be gone: Open
/// MPI removes its own).
fn remove_nsdir(dir: &std::path::Path) {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => {
            tracing::warn!(dir = %dir.display(), "cannot remove the namespace directory: {e}")
        }
    }
}
