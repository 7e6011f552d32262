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
//! output is queued.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use mio::net::UnixStream;
use mio::{Events, Interest, Poll, Token, Waker};
use pmix_types::{Nspace, Proc, Status};
use slab::Slab;

use crate::Error;
use crate::engine::{ConnId, Engine, Output};
use crate::frontend::{Frontends, Peer, Personality, Proto, SharedAnswer, Step};
use crate::host::{Host, call_host};
use crate::mailbox::{Call, DmodexDone, LoopMsg, Pmi1Endpoint, Pmi1Way};
use crate::shell_io::{Listener, Stream};

/// The waker's token; listeners count down from below it, connections up from 0.
pub(crate) const WAKER: Token = Token(usize::MAX);

/// Bytes read from a socket per `read` call.
const READ_CHUNK: usize = 64 * 1024;

fn listener_token(index: usize) -> Token {
    Token(usize::MAX - 1 - index)
}

struct ConnIo {
    stream: Stream,
    proto: Proto,
    wbuf: Vec<u8>,
    wpos: usize,
    /// Close once the write buffer is empty.
    closing: bool,
    /// Closed and told to the engine; the slot is freed when the pump is done, so that no
    /// output still queued for it reaches a new connection given the same number.
    gone: bool,
    writable_interest: bool,
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
}

impl<H: Host> Shell<H> {
    pub(crate) fn new(parts: ShellParts, engine: Engine, host: H) -> Result<Self, Error> {
        let ShellParts {
            poll,
            mut listeners,
            frontends,
            rx,
            tx,
            waker,
            cleanup,
            session,
        } = parts;
        for (i, l) in listeners.iter_mut().enumerate() {
            l.register(poll.registry(), listener_token(i))
                .map_err(Error::io("registering a listener"))?;
        }
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
        })
    }

    /// Runs until shutdown.
    pub(crate) fn run(mut self) {
        let mut events = Events::with_capacity(256);
        while self.running {
            let timeout = self
                .engine
                .poll_timeout()
                .map(|t| t.saturating_duration_since(Instant::now()));
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
            self.engine.handle_timeout(Instant::now());
            self.pump();
        }
        self.shutdown();
    }

    /// Settles everything that can move now, in one flat loop: messages from the channel,
    /// connections with work, the engine's outputs; until a round moves nothing.
    fn pump(&mut self) {
        loop {
            let mut moved = false;
            while let Ok(msg) = self.rx.try_recv() {
                moved = true;
                match msg {
                    LoopMsg::HostDone(op, outcome) => {
                        self.engine.handle_host_done(op, outcome, Instant::now())
                    }
                    LoopMsg::Call(call) => self.call(call),
                    LoopMsg::Shutdown => self.running = false,
                }
            }
            while let Some(conn) = self.ready.pop_front() {
                moved = true;
                self.step(conn);
            }
            moved |= self.drain_outputs();
            if !moved {
                break;
            }
        }
        for conn in self.gone.drain(..) {
            self.conns.try_remove(conn);
        }
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
                if result.is_ok() {
                    self.make_nsdir(&nspace);
                    self.frontends.nspace_registered(&nspace, nlocalprocs);
                }
                let _ = reply.send(result);
            }
            Call::DeregisterNspace { nspace, reply } => {
                self.engine
                    .deregister_nspace(nspace.as_str(), Instant::now());
                if let Some(dir) = self.nsdirs.remove(&nspace) {
                    remove_nsdir(&dir);
                }
                self.frontends.nspace_deregistered(&nspace);
                release_free_memory();
                let _ = reply.send(());
            }
            Call::RegisterClient {
                proc,
                uid,
                gid,
                secret,
                reply,
            } => {
                let _ = reply.send(self.engine.register_client(&proc, uid, gid, secret));
            }
            Call::DeregisterClient { proc, reply } => {
                self.engine.deregister_client(&proc, Instant::now());
                let _ = reply.send(());
            }
            Call::ClientSecret { proc, reply } => {
                let _ = reply.send(self.engine.client_secret(&proc));
            }
            Call::Dmodex { proc, done } => {
                let token = self.next_token;
                self.next_token += 1;
                self.dmodex.insert(token, done);
                self.engine.dmodex_request(&proc, token, Instant::now());
            }
            Call::Notify { event } => self.engine.host_notify(&event),
            Call::Pmi1Connect { proc, how, reply } => {
                let _ = reply.send(self.pmi1_connect(proc, how));
            }
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
        let Some(job) = self.engine.job_data(nspace.as_str()) else {
            return;
        };
        let Some(dir) = job
            .job
            .iter()
            .find(|i| i.key.as_str() == pmix_types::attr::NSDIR)
            .and_then(|i| i.value.as_str())
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
        entry.insert(ConnIo {
            stream,
            proto,
            wbuf: Vec::new(),
            wpos: 0,
            closing: false,
            gone: false,
            writable_interest: false,
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
                Err(e) => {
                    tracing::warn!("{kind:?} accept failed: {e}");
                    return;
                }
            }
        }
    }

    fn accepted(&mut self, stream: Stream, kind: Personality, peer: Peer) {
        let proto = Proto::accepted_on(kind, peer, &self.frontends);
        if let Err(e) = self.add_conn(stream, proto) {
            tracing::warn!("cannot register a {kind:?} connection: {e}");
        }
    }

    /// A live connection (not closed).
    fn live(&mut self, conn: ConnId) -> Option<&mut ConnIo> {
        self.conns.get_mut(conn).filter(|c| !c.gone)
    }

    /// Reads what the connection has. `to_end`: the peer closed or failed, so read until the
    /// end of the stream is seen.
    fn read(&mut self, conn: ConnId, to_end: bool) {
        let Some(c) = self.conns.get_mut(conn).filter(|c| !c.gone) else {
            return;
        };
        let mut closed = false;
        loop {
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
            // What arrived before the end is served, and its answers written, first.
            self.step(conn);
            self.drain_outputs();
            self.close(conn);
        } else {
            self.ready.push_back(conn);
        }
    }

    /// Hands the engine what the connection's front-end has for it.
    fn step(&mut self, conn: ConnId) {
        loop {
            let Some(c) = self.conns.get_mut(conn).filter(|c| !c.gone && !c.closing) else {
                return;
            };
            match c.proto.step(&mut self.frontends, &mut c.wbuf) {
                Step::Idle => break,
                Step::Close => {
                    self.close_after_flush(conn);
                    return;
                }
                Step::Hello { proc, auth } => self.engine.handle_hello(conn, &proc, auth),
                Step::Request(id, req) => self.engine.handle_request(conn, id, req, Instant::now()),
            }
        }
        self.flush(conn);
    }

    /// Delivers the engine's outputs; true if there were any.
    fn drain_outputs(&mut self) -> bool {
        let mut any = false;
        while let Some(out) = self.engine.poll_output() {
            any = true;
            self.output(out);
        }
        any
    }

    fn output(&mut self, out: Output) {
        match out {
            Output::Accept { conn, job } => self.deliver(conn, |p, fe, out| {
                p.accepted(fe, conn, &job, out);
            }),
            Output::Refuse {
                conn,
                status,
                reason,
            } => self.deliver(conn, |p, _, out| p.refused(status, &reason, out)),
            Output::Reply { conn, id, reply } => {
                self.deliver(conn, |p, fe, out| p.replied(fe, id, reply, out))
            }
            Output::SharedReply { to, reply } => {
                let answer = SharedAnswer::new(reply);
                for (conn, id) in to {
                    self.deliver(conn, |p, fe, out| p.replied_shared(fe, id, &answer, out));
                }
            }
            Output::Event { conn, event } => self.deliver(conn, |p, _, out| p.event(&event, out)),
            Output::Close { conn } => self.close_after_flush(conn),
            Output::Host { op, call } => {
                call_host(&mut self.host, op, call, &self.tx, &self.waker);
            }
            Output::Dmodex { token, result } => {
                if let Some(done) = self.dmodex.remove(&token) {
                    done(result);
                }
            }
        }
    }

    /// Hands an engine output to the connection's front-end, then writes what it produced.
    /// The connection is stepped again: its front-end may have held input back for this.
    fn deliver(&mut self, conn: ConnId, f: impl FnOnce(&mut Proto, &mut Frontends, &mut Vec<u8>)) {
        let Some(c) = self.conns.get_mut(conn).filter(|c| !c.gone) else {
            return;
        };
        f(&mut c.proto, &mut self.frontends, &mut c.wbuf);
        if c.proto.is_closing() {
            self.close_after_flush(conn);
        } else {
            self.ready.push_back(conn);
            self.flush(conn);
        }
    }

    fn flush(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get_mut(conn).filter(|c| !c.gone) else {
            return;
        };
        let dead = !crate::outbuf::write_queued(&mut c.stream, &mut c.wbuf, &mut c.wpos);
        if c.wbuf.is_empty() && c.wbuf.capacity() > 1 << 20 {
            c.wbuf.shrink_to(64 * 1024);
        }
        let want_write = !c.wbuf.is_empty();
        let done_closing = c.closing && c.wbuf.is_empty();
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
        let _ = self.poll.registry().deregister(&mut c.stream);
        c.stream.shutdown();
        self.gone.push(conn);
        self.engine.handle_closed(conn, Instant::now());
    }

    fn shutdown(&mut self) {
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
