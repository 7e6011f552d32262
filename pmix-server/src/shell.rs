//! The I/O shell: one mio event-loop thread that owns the engine, the host, the listening
//! socket and every client connection.
//!
//! After each event the shell drains the engine's outputs (encoding replies into the
//! connections' write buffers, calling the host) and re-derives each connection's interest from
//! its state: readable always, writable only while output is queued. Calls from the host's
//! threads and host completions arrive through a channel plus a `mio::Waker`.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixListener as StdUnixListener;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use mio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use mio::{Events, Interest, Poll, Token, Waker};
use pmix_types::{Info, Nspace, Proc, Status};
use pmix_wire::{
    ClientMsg, Event, FrameDecoder, FrameReader, JobData, PROTOCOL_VERSION, ReplyBody, ServerMsg,
    Welcome, decode_body, decode_hello, encode_frame,
};
use serde::Serialize;
use slab::Slab;

use crate::Error;
use crate::engine::{ConnId, Engine, HostCall, HostOutcome, OpId, Output, PeerCreds, SECRET_LEN};
use crate::host::{Completion, Host};
use crate::frontend::openpmix::ds21::Ds21;
use crate::frontend::openpmix::{Gds, OpxConn, OpxStep};
use crate::frontend::pmi1::{Pmi1Conn, Step};

const LISTENER: Token = Token(usize::MAX - 1);
const WAKER: Token = Token(usize::MAX - 2);
const PMI_LISTENER: Token = Token(usize::MAX - 3);
const OPX_LISTENER: Token = Token(usize::MAX - 4);

/// Bytes read from a socket per `read` call.
const READ_CHUNK: usize = 64 * 1024;

/// A call from the host's side of the API.
pub(crate) enum Call {
    RegisterNspace {
        nspace: Nspace,
        nlocalprocs: u32,
        info: Vec<Info>,
        reply: Sender<Result<(), Error>>,
    },
    DeregisterNspace {
        nspace: Nspace,
        reply: Sender<()>,
    },
    RegisterClient {
        proc: Proc,
        uid: u32,
        gid: u32,
        secret: [u8; SECRET_LEN],
        reply: Sender<Result<(), Error>>,
    },
    DeregisterClient {
        proc: Proc,
        reply: Sender<()>,
    },
    ClientSecret {
        proc: Proc,
        reply: Sender<Option<[u8; SECRET_LEN]>>,
    },
    Dmodex {
        proc: Proc,
        done: DmodexDone,
    },
    Notify {
        event: pmix_wire::Event,
    },
    /// Make the way a PMI-1 process will reach the server.
    Pmi1Connect {
        proc: Proc,
        how: Pmi1Way,
        reply: Sender<Result<Pmi1Endpoint, Error>>,
    },
    /// The job data of a namespace, as its clients receive it.
    JobData {
        nspace: Nspace,
        reply: Sender<Option<Arc<JobData>>>,
    },
}

/// How a PMI-1 process is to reach the server.
#[derive(Clone, Copy)]
pub(crate) enum Pmi1Way {
    /// An inherited socket.
    Fd,
    /// TCP to the server's PMI-1 port, naming itself with this id.
    Port(u32),
}

/// Where a PMI-1 process reaches the server.
pub(crate) enum Pmi1Endpoint {
    /// The process's end of a connected socket pair.
    Fd(OwnedFd),
    /// The loopback TCP port to connect to.
    Port(u16),
}

/// A job record with its encoding, kept together so the record's address stays unique.
type EncodedJob = (Arc<JobData>, Arc<[u8]>);

pub(crate) type DmodexDone = Box<dyn FnOnce(Result<Vec<u8>, Status>) + Send>;

/// Messages into the event loop.
pub(crate) enum LoopMsg {
    HostDone(OpId, HostOutcome),
    Call(Call),
    Shutdown,
}

/// A client connection's socket: a Unix socket (native clients, PMI-1 over an inherited
/// socket) or loopback TCP (PMI-1 with `PMI_PORT`).
enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl mio::event::Source for Stream {
    fn register(
        &mut self,
        registry: &mio::Registry,
        token: Token,
        interests: Interest,
    ) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.register(registry, token, interests),
            Stream::Tcp(s) => s.register(registry, token, interests),
        }
    }

    fn reregister(
        &mut self,
        registry: &mio::Registry,
        token: Token,
        interests: Interest,
    ) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.reregister(registry, token, interests),
            Stream::Tcp(s) => s.reregister(registry, token, interests),
        }
    }

    fn deregister(&mut self, registry: &mio::Registry) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.deregister(registry),
            Stream::Tcp(s) => s.deregister(registry),
        }
    }
}

impl Stream {
    fn shutdown(&self) {
        let _ = match self {
            Stream::Unix(s) => s.shutdown(std::net::Shutdown::Both),
            Stream::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }
}

/// Which loopback TCP listener a connection came to.
#[derive(Clone, Copy, Debug)]
enum TcpKind {
    /// PMI-1 with `PMI_PORT`.
    Pmi1,
    /// libpmix clients.
    OpenPmix,
}

/// The protocol personality of a connection.
enum Proto {
    /// The native protocol: MessagePack frames.
    Native {
        reader: FrameReader,
        /// The handshake has been received.
        greeted: bool,
    },
    /// MPICH's PMI-1 text lines.
    Pmi1(Box<Pmi1Conn>),
    /// The OpenPMIx 4.2 wire protocol of libpmix clients.
    Opx(Box<OpxConn>),
}

struct ConnIo {
    stream: Stream,
    proto: Proto,
    wbuf: Vec<u8>,
    wpos: usize,
    /// Close once the write buffer is empty.
    closing: bool,
    creds: Option<PeerCreds>,
    writable_interest: bool,
}

impl ConnIo {
    fn new(stream: Stream, proto: Proto, creds: Option<PeerCreds>) -> Self {
        ConnIo {
            stream,
            proto,
            wbuf: Vec::new(),
            wpos: 0,
            closing: false,
            creds,
            writable_interest: false,
        }
    }
}

/// Encodes `Welcome::Accepted` from a shared job record without cloning it: the same bytes as
/// serializing the owned enum (checked by a test).
#[derive(Serialize)]
enum WelcomeRef<'a> {
    Accepted { version: u16, job: &'a JobData },
}

pub(crate) struct Shell<H: Host> {
    poll: Poll,
    listener: UnixListener,
    engine: Engine,
    host: H,
    conns: Slab<ConnIo>,
    rx: Receiver<LoopMsg>,
    tx: Sender<LoopMsg>,
    waker: Arc<Waker>,
    decoder: FrameDecoder,
    dmodex: HashMap<u64, DmodexDone>,
    next_token: u64,
    /// Encoded welcome frames by job record: every client of a namespace gets the same bytes.
    welcome_cache: HashMap<usize, (Arc<JobData>, Arc<[u8]>)>,
    cleanup: Vec<PathBuf>,
    /// The session directory (`PMIX_TMPDIR`), in `cleanup`; the namespace directories are
    /// made in it.
    session: PathBuf,
    running: bool,
    /// The loopback TCP listener of PMI-1 processes started with `PMI_PORT`, made on first
    /// need.
    pmi_listener: Option<TcpListener>,
    /// `PMI_ID`s handed out and not yet used, with their processes.
    pmi_ids: HashMap<u32, Proc>,
    /// PMI-1 and libpmix connections that may have input to process (after input or an
    /// answer).
    pmi_ready: VecDeque<ConnId>,
    /// The PMI-1 connections are being stepped (no nested stepping from inside).
    pmi_pumping: bool,
    /// The loopback TCP listener of libpmix clients.
    opx_listener: Option<TcpListener>,
    /// Encoded job data (the answer to a libpmix client's first request), by job record and
    /// dialect: every client of a namespace gets the same bytes.
    opx_jobs: HashMap<(usize, pmix_wire::openpmix::Dialect, Gds), EncodedJob>,
    /// The ds21 shared-memory store offered to libpmix clients, when it is.
    ds21: Option<Ds21>,
    /// This node's name (the ds21 job level holds this node's keys).
    hostname: String,
    /// The namespace directories made in the rendezvous directory.
    nsdirs: HashMap<Nspace, PathBuf>,
    scratch: Vec<u8>,
}

impl<H: Host> Shell<H> {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        poll: Poll,
        listener: StdUnixListener,
        engine: Engine,
        host: H,
        rx: Receiver<LoopMsg>,
        tx: Sender<LoopMsg>,
        waker: Arc<Waker>,
        max_frame: usize,
        cleanup: Vec<PathBuf>,
        session: PathBuf,
        opx_listener: Option<std::net::TcpListener>,
        ds21: Option<Ds21>,
        hostname: String,
    ) -> Result<Self, Error> {
        listener
            .set_nonblocking(true)
            .map_err(Error::io("making the listener non-blocking"))?;
        let mut listener = UnixListener::from_std(listener);
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)
            .map_err(Error::io("registering the listener"))?;
        let opx_listener = match opx_listener {
            Some(l) => {
                l.set_nonblocking(true)
                    .map_err(Error::io("making the OpenPMIx port non-blocking"))?;
                let mut l = TcpListener::from_std(l);
                poll.registry()
                    .register(&mut l, OPX_LISTENER, Interest::READABLE)
                    .map_err(Error::io("registering the OpenPMIx port"))?;
                Some(l)
            }
            None => None,
        };
        Ok(Shell {
            poll,
            listener,
            engine,
            host,
            conns: Slab::new(),
            rx,
            tx,
            waker,
            decoder: FrameDecoder::new(max_frame),
            dmodex: HashMap::new(),
            next_token: 1,
            welcome_cache: HashMap::new(),
            cleanup,
            session,
            running: true,
            pmi_listener: None,
            pmi_ids: HashMap::new(),
            pmi_ready: VecDeque::new(),
            pmi_pumping: false,
            opx_listener,
            opx_jobs: HashMap::new(),
            ds21,
            hostname,
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
                    LISTENER => self.accept(),
                    PMI_LISTENER => self.accept_tcp(TcpKind::Pmi1),
                    OPX_LISTENER => self.accept_tcp(TcpKind::OpenPmix),
                    WAKER => {}
                    Token(conn) => {
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            self.read(conn, ev.is_read_closed() || ev.is_error());
                        }
                        if ev.is_writable() {
                            self.flush(conn);
                        }
                    }
                }
            }
            self.drain_channel();
            self.engine.handle_timeout(Instant::now());
            self.drain_engine();
        }
        self.shutdown();
    }

    fn drain_channel(&mut self) {
        while let Ok(msg) = self.rx.try_recv() {
            match msg {
                LoopMsg::HostDone(op, outcome) => {
                    self.engine.handle_host_done(op, outcome, Instant::now())
                }
                LoopMsg::Call(call) => self.call(call),
                LoopMsg::Shutdown => self.running = false,
            }
            self.drain_engine();
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
                    if let Some(ds) = &mut self.ds21 {
                        // Its clients take their lock at init: the segment exists before they
                        // start. Without it they use the hash store.
                        if let Err(e) = ds.add_nspace(&nspace, nlocalprocs) {
                            tracing::warn!(%nspace, "no ds21 lock segment, libpmix clients will use hash: {e}");
                        }
                    }
                }
                let _ = reply.send(result);
            }
            Call::DeregisterNspace { nspace, reply } => {
                self.engine
                    .deregister_nspace(nspace.as_str(), Instant::now());
                if let Some(dir) = self.nsdirs.remove(&nspace) {
                    remove_nsdir(&dir);
                }
                if let Some(ds) = &mut self.ds21 {
                    ds.del_nspace(&nspace);
                }
                self.welcome_cache
                    .retain(|_, (job, _)| job.nspace != nspace);
                self.opx_jobs.retain(|_, (job, _)| job.nspace != nspace);
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
    /// rendezvous directory: libpmix clients (Open MPI) keep their session files there and
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

    fn pmi1_connect(&mut self, proc: Proc, how: Pmi1Way) -> Result<Pmi1Endpoint, Error> {
        if self.engine.client_secret(&proc).is_none() {
            return Err(Error::UnknownProc(proc));
        }
        match how {
            Pmi1Way::Fd => {
                let (ours, theirs) = std::os::unix::net::UnixStream::pair()
                    .map_err(Error::io("making a PMI-1 socket pair"))?;
                ours.set_nonblocking(true)
                    .map_err(Error::io("making a PMI-1 socket non-blocking"))?;
                let stream = Stream::Unix(UnixStream::from_std(ours));
                let proto = Proto::Pmi1(Box::new(Pmi1Conn::with_fd(proc)));
                self.add_conn(stream, proto, None)
                    .map_err(Error::io("registering a PMI-1 socket"))?;
                Ok(Pmi1Endpoint::Fd(OwnedFd::from(theirs)))
            }
            Pmi1Way::Port(id) => {
                let port = self.pmi_port()?;
                if self.pmi_ids.contains_key(&id) {
                    return Err(Error::io("handing out a PMI_ID")(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        "id in use",
                    )));
                }
                // A process started again under the same name gets a fresh id.
                self.pmi_ids.retain(|_, p| *p != proc);
                self.pmi_ids.insert(id, proc);
                Ok(Pmi1Endpoint::Port(port))
            }
        }
    }

    /// The PMI-1 TCP port, listening on loopback from the first time it is needed.
    fn pmi_port(&mut self) -> Result<u16, Error> {
        if self.pmi_listener.is_none() {
            let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
            let mut l = TcpListener::bind(addr).map_err(Error::io("binding the PMI-1 port"))?;
            self.poll
                .registry()
                .register(&mut l, PMI_LISTENER, Interest::READABLE)
                .map_err(Error::io("registering the PMI-1 port"))?;
            self.pmi_listener = Some(l);
        }
        let l = self
            .pmi_listener
            .as_ref()
            .ok_or_else(|| Error::io("binding the PMI-1 port")(io::Error::other("no listener")))?;
        Ok(l.local_addr()
            .map_err(Error::io("reading the PMI-1 port"))?
            .port())
    }

    /// Registers a new connection with the poll and keeps it.
    fn add_conn(
        &mut self,
        mut stream: Stream,
        proto: Proto,
        creds: Option<PeerCreds>,
    ) -> io::Result<ConnId> {
        let entry = self.conns.vacant_entry();
        let conn = entry.key();
        self.poll
            .registry()
            .register(&mut stream, Token(conn), Interest::READABLE)?;
        entry.insert(ConnIo::new(stream, proto, creds));
        Ok(conn)
    }

    /// Accepts what a loopback TCP listener has: PMI-1 processes that were given `PMI_PORT`,
    /// or libpmix clients.
    fn accept_tcp(&mut self, kind: TcpKind) {
        loop {
            let listener = match kind {
                TcpKind::Pmi1 => self.pmi_listener.as_ref(),
                TcpKind::OpenPmix => self.opx_listener.as_ref(),
            };
            let Some(l) = listener else {
                return;
            };
            match l.accept() {
                Ok((stream, peer)) => {
                    let _ = stream.set_nodelay(true);
                    let proto = match kind {
                        TcpKind::Pmi1 => Proto::Pmi1(Box::new(Pmi1Conn::with_port())),
                        TcpKind::OpenPmix => {
                            // The uid the kernel knows for the peer's socket, to hold its
                            // claimed credentials against.
                            let kernel_uid = stream
                                .local_addr()
                                .ok()
                                .and_then(|ours| crate::tcp_peer::peer_uid(ours, peer));
                            Proto::Opx(Box::new(OpxConn::new(kernel_uid, self.ds21.is_some())))
                        }
                    };
                    if let Err(e) = self.add_conn(Stream::Tcp(stream), proto, None) {
                        tracing::warn!("cannot register a {kind:?} connection: {e}");
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!("{kind:?} accept failed: {e}");
                    return;
                }
            }
        }
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((stream, _)) => {
                    let creds = peer_creds(&stream);
                    let proto = Proto::Native {
                        reader: FrameReader::new(self.decoder),
                        greeted: false,
                    };
                    if let Err(e) = self.add_conn(Stream::Unix(stream), proto, creds) {
                        tracing::warn!("cannot register a new connection: {e}");
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!("accept failed: {e}");
                    return;
                }
            }
        }
    }

    /// Reads what the connection has. `to_end`: the peer closed or failed, so read until the
    /// end of the stream is seen.
    fn read(&mut self, conn: ConnId, to_end: bool) {
        let mut closed = false;
        {
            let Some(c) = self.conns.get_mut(conn) else {
                return;
            };
            loop {
                let got = match &mut c.proto {
                    Proto::Native { reader, .. } => reader.read_from(&mut c.stream),
                    Proto::Pmi1(p) => c.stream.read(&mut self.scratch).inspect(|&n| {
                        p.feed(&self.scratch[..n]);
                    }),
                    Proto::Opx(o) => c.stream.read(&mut self.scratch).inspect(|&n| {
                        o.feed(&self.scratch[..n]);
                    }),
                };
                match got {
                    Ok(0) => {
                        closed = true;
                        break;
                    }
                    Ok(n) => {
                        // A short read (the reader offers at least READ_CHUNK) emptied the
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
        }
        match self.conns.get(conn).map(|c| &c.proto) {
            Some(Proto::Native { .. }) => self.process_frames(conn),
            Some(Proto::Pmi1(_)) => {
                self.pmi_ready.push_back(conn);
                self.drain_engine();
            }
            Some(Proto::Opx(_)) => {
                self.pmi_ready.push_back(conn);
                self.drain_engine();
            }
            None => {}
        }
        if closed {
            self.close(conn);
        }
    }

    /// Processes a PMI-1 connection's lines up to the first that needs the engine.
    fn step_pmi(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        if c.closing {
            return;
        }
        let Proto::Pmi1(p) = &mut c.proto else {
            return;
        };
        let mut step = p.step(&mut c.wbuf);
        loop {
            match step {
                Step::Idle => break,
                Step::Close => {
                    self.close_after_flush(conn);
                    return;
                }
                Step::Hello(proc) => {
                    match self.engine.client_secret(&proc) {
                        Some(secret) => {
                            self.engine
                                .handle_hello(conn, &proc.nspace, proc.rank, &secret, None)
                        }
                        None => self.pmi_refuse(conn, Status::ERR_NOT_FOUND, "not registered"),
                    }
                    break;
                }
                Step::Initack(id) => {
                    let Some(proc) = self.pmi_ids.remove(&id) else {
                        self.pmi_refuse(conn, Status::ERR_INVALID_CRED, "unknown pmiid");
                        break;
                    };
                    let Some(Proto::Pmi1(p)) = self.conns.get_mut(conn).map(|c| &mut c.proto)
                    else {
                        return;
                    };
                    step = p.bind(proc);
                    continue;
                }
                Step::Request(id, req) => {
                    self.engine.handle_request(conn, id, req, Instant::now());
                    break;
                }
            }
        }
        self.flush(conn);
    }

    /// Processes what a libpmix client has sent, up to the first message that must wait.
    fn step_opx(&mut self, conn: ConnId) {
        loop {
            let Some(c) = self.conns.get_mut(conn) else {
                return;
            };
            if c.closing {
                return;
            }
            let Proto::Opx(o) = &mut c.proto else {
                return;
            };
            match o.step(&mut c.wbuf) {
                OpxStep::Idle => break,
                OpxStep::Close => {
                    self.close_after_flush(conn);
                    return;
                }
                OpxStep::Hello { proc, creds } => match self.engine.client_secret(&proc) {
                    Some(secret) => self.engine.handle_hello(
                        conn,
                        &proc.nspace,
                        proc.rank,
                        &secret,
                        Some(creds),
                    ),
                    None => {
                        tracing::info!(conn, %proc, "refusing a libpmix client: not registered");
                        self.close(conn);
                        return;
                    }
                },
                OpxStep::JobData {
                    tag,
                    job,
                    dialect,
                    gds,
                } => {
                    if gds == Gds::Ds21 {
                        self.ds21_job(&job);
                    }
                    let bytes = self.opx_job_bytes(&job, dialect, gds);
                    if let Some(ConnIo {
                        proto: Proto::Opx(o),
                        wbuf,
                        ..
                    }) = self.conns.get_mut(conn)
                    {
                        o.send_job_data(tag, bytes.as_deref(), wbuf);
                    }
                }
                OpxStep::Request(id, req) => {
                    self.engine.handle_request(conn, id, req, Instant::now());
                }
            }
            // Not drain_engine: this runs inside its pump.
            self.drain_outputs();
        }
        self.flush(conn);
    }

    /// The encoded job data of `job` for a client speaking `dialect`; None if it cannot be
    /// encoded (the client is then told so).
    fn opx_job_bytes(
        &mut self,
        job: &Arc<JobData>,
        dialect: pmix_wire::openpmix::Dialect,
        gds: Gds,
    ) -> Option<Arc<[u8]>> {
        let key = (Arc::as_ptr(job) as usize, dialect, gds);
        if let Some((_, bytes)) = self.opx_jobs.get(&key) {
            return Some(bytes.clone());
        }
        let encoded = match gds {
            Gds::Hash => crate::frontend::openpmix::encode_job_data(job, dialect),
            Gds::Ds21 => {
                let mut out = Vec::new();
                pmix_wire::openpmix::Reply::JobInfo(crate::frontend::openpmix::ds21_job_info(job))
                    .encode(dialect, &mut out)
                    .map(|()| out)
            }
        };
        match encoded {
            Ok(bytes) => {
                let bytes: Arc<[u8]> = bytes.into();
                // Keeping the Arc keeps the address from being reused by another record.
                self.opx_jobs.insert(key, (job.clone(), bytes.clone()));
                Some(bytes)
            }
            Err(e) => {
                tracing::error!(nspace = %job.nspace, "cannot encode job data for libpmix: {e}");
                None
            }
        }
    }

    /// Puts a namespace's job data in the ds21 segments, once, before a ds21 client's `REQ` is
    /// answered: done lazily because most namespaces never have a ds21 client (pmix-rs
    /// clients use the socket), and their node and rank levels are derived only when needed.
    /// On failure the client finds nothing there and asks over the socket.
    fn ds21_job(&mut self, job: &JobData) {
        let Some(ds) = &mut self.ds21 else {
            return;
        };
        if ds.has_job(&job.nspace) {
            return;
        }
        let r = crate::frontend::openpmix::ds21_job_batches(job, &self.hostname)
            .map_err(crate::frontend::openpmix::ds21::Ds21Error::from)
            .and_then(|b| ds.store(&b, Some(&job.nspace)));
        if let Err(e) = r {
            tracing::warn!(nspace = %job.nspace, "job data not in the ds21 segments: {e}");
        }
    }

    /// Puts a collecting fence's data in the ds21 segments when one of the processes it
    /// answers is a ds21 libpmix client, before any answer is sent: their gets of each other's
    /// data are then served from memory. True when the data is there.
    fn ds21_fence(&mut self, to: &[ConnId], reply: &pmix_wire::Reply) -> bool {
        let ReplyBody::Fence { data } = &reply.body else {
            return false;
        };
        if data.is_empty() || reply.status != Status::SUCCESS {
            return false;
        }
        let wanted = to.iter().any(|&c| {
            matches!(self.conns.get(c).map(|c| &c.proto),
                Some(Proto::Opx(o)) if o.gds() == Some(Gds::Ds21))
        });
        let Some(ds) = &mut self.ds21 else {
            return false;
        };
        if !wanted {
            return false;
        }
        let r = crate::frontend::openpmix::ds21_fence_batches(data)
            .map_err(crate::frontend::openpmix::ds21::Ds21Error::from)
            .and_then(|b| ds.store(&b, None));
        match r {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!("fence data not in the ds21 segments, served over the socket: {e}");
                false
            }
        }
    }

    /// Hands an engine answer to a libpmix connection; false if the connection is not one.
    fn deliver_opx(&mut self, conn: ConnId, f: impl FnOnce(&mut OpxConn, &mut Vec<u8>)) -> bool {
        let Some(c) = self.conns.get_mut(conn) else {
            return false;
        };
        let Proto::Opx(o) = &mut c.proto else {
            return false;
        };
        f(o, &mut c.wbuf);
        // Messages may be waiting behind the one this answers (the handshake).
        self.pmi_ready.push_back(conn);
        if o.is_closing() {
            self.close_after_flush(conn);
        } else {
            self.flush(conn);
        }
        true
    }

    fn pmi_refuse(&mut self, conn: ConnId, status: Status, reason: &str) {
        if let Some(c) = self.conns.get_mut(conn) {
            if let Proto::Pmi1(p) = &mut c.proto {
                p.refused(status, reason, &mut c.wbuf);
            }
        }
        self.close_after_flush(conn);
    }

    /// Hands an engine answer to a PMI-1 connection; false if the connection is not one.
    fn deliver_pmi(&mut self, conn: ConnId, f: impl FnOnce(&mut Pmi1Conn, &mut Vec<u8>)) -> bool {
        let Some(c) = self.conns.get_mut(conn) else {
            return false;
        };
        let Proto::Pmi1(p) = &mut c.proto else {
            return false;
        };
        f(p, &mut c.wbuf);
        let closing = p.is_closing();
        self.pmi_ready.push_back(conn);
        if closing {
            self.close_after_flush(conn);
        } else {
            self.flush(conn);
        }
        true
    }

    fn process_frames(&mut self, conn: ConnId) {
        loop {
            let Some(c) = self.conns.get_mut(conn) else {
                return;
            };
            if c.closing {
                break;
            }
            let creds = c.creds;
            let Proto::Native { reader, greeted } = &mut c.proto else {
                return;
            };
            let greeted = *greeted;
            let frame = match reader.next_frame() {
                Ok(Some(body)) => {
                    if greeted {
                        Ok(Frame::Msg(decode_body::<ClientMsg>(body)))
                    } else {
                        Ok(Frame::Hello(decode_hello(body)))
                    }
                }
                Ok(None) => break,
                Err(e) => Err(e),
            };
            match frame {
                Ok(Frame::Hello(Ok(hello))) => {
                    if let Some(ConnIo {
                        proto: Proto::Native { greeted, .. },
                        ..
                    }) = self.conns.get_mut(conn)
                    {
                        *greeted = true;
                    }
                    self.engine
                        .handle_hello(conn, &hello.nspace, hello.rank, &hello.secret, creds);
                }
                Ok(Frame::Hello(Err(e))) => {
                    tracing::warn!(conn, "refusing a handshake: {e}");
                    let refusal = Welcome::Refused {
                        status: e.status(),
                        version: PROTOCOL_VERSION,
                        reason: e.to_string(),
                    };
                    self.send(conn, &refusal);
                    self.close_after_flush(conn);
                    break;
                }
                Ok(Frame::Msg(Ok(msg))) => {
                    self.engine
                        .handle_request(conn, msg.id, msg.req, Instant::now())
                }
                Ok(Frame::Msg(Err(e))) | Err(e) => {
                    let who = self
                        .engine
                        .conn_proc(conn)
                        .map(|p| p.to_string())
                        .unwrap_or_else(|| "unauthenticated peer".into());
                    tracing::warn!(conn, %who, "closing connection after a bad frame: {e}");
                    self.close(conn);
                    return;
                }
            }
            self.drain_engine();
        }
    }

    fn send<T: Serialize>(&mut self, conn: ConnId, msg: &T) {
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        if let Err(e) = encode_frame(msg, &mut c.wbuf) {
            tracing::error!(conn, "cannot encode a message: {e}");
            return;
        }
        self.flush(conn);
    }

    fn send_bytes(&mut self, conn: ConnId, bytes: &[u8]) {
        let Some(c) = self.conns.get_mut(conn) else {
            return;
        };
        c.wbuf.extend_from_slice(bytes);
        self.flush(conn);
    }

    fn flush(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get_mut(conn) else {
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
        if let Some(c) = self.conns.get_mut(conn) {
            c.closing = true;
        }
        self.flush(conn);
    }

    fn close(&mut self, conn: ConnId) {
        if let Some(mut c) = self.conns.try_remove(conn) {
            let _ = self.poll.registry().deregister(&mut c.stream);
            self.engine.handle_closed(conn, Instant::now());
            self.drain_engine();
        }
    }

    fn welcome_bytes(&mut self, job: &Arc<JobData>) -> Option<Arc<[u8]>> {
        let key = Arc::as_ptr(job) as usize;
        if let Some((_, bytes)) = self.welcome_cache.get(&key) {
            return Some(bytes.clone());
        }
        let mut out = Vec::new();
        if let Err(e) = encode_frame(
            &WelcomeRef::Accepted {
                version: PROTOCOL_VERSION,
                job,
            },
            &mut out,
        ) {
            tracing::error!("cannot encode job data: {e}");
            return None;
        }
        let bytes: Arc<[u8]> = out.into();
        // Keeping the Arc alive keeps the address from being reused by another job record.
        self.welcome_cache.insert(key, (job.clone(), bytes.clone()));
        Some(bytes)
    }

    fn drain_engine(&mut self) {
        self.drain_outputs();
        if self.pmi_pumping {
            return;
        }
        self.pmi_pumping = true;
        while let Some(conn) = self.pmi_ready.pop_front() {
            match self.conns.get(conn).map(|c| &c.proto) {
                Some(Proto::Pmi1(_)) => self.step_pmi(conn),
                Some(Proto::Opx(_)) => self.step_opx(conn),
                _ => {}
            }
            self.drain_outputs();
        }
        self.pmi_pumping = false;
    }

    fn drain_outputs(&mut self) {
        while let Some(out) = self.engine.poll_output() {
            match out {
                Output::Accept { conn, job } => {
                    if self.deliver_pmi(conn, |p, out| p.accepted(job.clone(), out)) {
                        continue;
                    }
                    if self.deliver_opx(conn, |o, out| o.accepted(job.clone(), conn as u32, out)) {
                        continue;
                    }
                    if let Some(bytes) = self.welcome_bytes(&job) {
                        self.send_bytes(conn, &bytes);
                    }
                }
                Output::Refuse {
                    conn,
                    status,
                    reason,
                } => {
                    if self.deliver_pmi(conn, |p, out| p.refused(status, &reason, out)) {
                        self.close_after_flush(conn);
                        continue;
                    }
                    if self.deliver_opx(conn, |o, _| o.refused()) {
                        // The reference closes a refused libpmix client without a word.
                        self.close(conn);
                        continue;
                    }
                    self.send(
                        conn,
                        &Welcome::Refused {
                            status,
                            version: PROTOCOL_VERSION,
                            reason,
                        },
                    );
                    self.close_after_flush(conn);
                }
                Output::Reply { conn, id, reply } => {
                    let in_shm = self.ds21_fence(&[conn], &reply);
                    if self.deliver_pmi(conn, |p, out| p.replied(id, &reply, out))
                        || self.deliver_opx(conn, |o, out| o.replied(id, &reply, in_shm, out))
                    {
                        continue;
                    }
                    self.send(conn, &ServerMsg::Reply { id, reply })
                }
                Output::SharedReply { to, reply } => match SharedFrame::new(&reply) {
                    Ok(shared) => {
                        let conns: Vec<ConnId> = to.iter().map(|&(c, _)| c).collect();
                        let in_shm = self.ds21_fence(&conns, &reply);
                        for (conn, id) in to {
                            if self.deliver_pmi(conn, |p, out| p.replied(id, &reply, out))
                                || self
                                    .deliver_opx(conn, |o, out| o.replied(id, &reply, in_shm, out))
                            {
                                continue;
                            }
                            let Some(c) = self.conns.get_mut(conn) else {
                                continue;
                            };
                            if let Err(e) = shared.write(id, &mut c.wbuf) {
                                tracing::error!(conn, "cannot encode a reply: {e}");
                                continue;
                            }
                            self.flush(conn);
                        }
                    }
                    Err(e) => tracing::error!("cannot encode a shared reply: {e}"),
                },
                Output::Close { conn } => self.close_after_flush(conn),
                Output::Host { op, call } => self.call_host(op, call),
                Output::Dmodex { token, result } => {
                    if let Some(done) = self.dmodex.remove(&token) {
                        done(result);
                    }
                }
                Output::Event { conn, event } => {
                    // PMI-1 has no events (and its processes never register for any).
                    match self.conns.get(conn).map(|c| &c.proto) {
                        Some(Proto::Native { .. }) => {
                            self.send(conn, &ServerMsg::Event(Event::clone(&event)))
                        }
                        Some(Proto::Opx(_)) => {
                            self.deliver_opx(conn, |o, out| o.event(&event, out));
                        }
                        _ => {}
                    }
                }
            }
        }
    }

    fn completion<T: crate::host::Outcome>(&self, op: OpId) -> Completion<T> {
        Completion::new(op, self.tx.clone(), self.waker.clone())
    }

    fn call_host(&mut self, op: OpId, call: HostCall) {
        match call {
            HostCall::ClientConnected { proc } => {
                let done = self.completion(op);
                self.host.client_connected(&proc, done);
            }
            HostCall::ClientFinalized { proc } => {
                let done = self.completion(op);
                self.host.client_finalized(&proc, done);
            }
            HostCall::Abort {
                proc,
                status,
                message,
                procs,
            } => {
                let done = self.completion(op);
                self.host.abort(&proc, status, &message, &procs, done);
            }
            HostCall::FenceNb { procs, info, data } => {
                let done = self.completion(op);
                self.host.fence_nb(&procs, &info, data, done);
            }
            HostCall::DirectModex { proc, info } => {
                let done = self.completion(op);
                self.host.direct_modex(&proc, &info, done);
            }
            HostCall::Publish { proc, data, info } => {
                let done = self.completion(op);
                self.host.publish(&proc, &data, &info, done);
            }
            HostCall::Lookup { proc, keys, info } => {
                let done = self.completion(op);
                self.host.lookup(&proc, &keys, &info, done);
            }
            HostCall::Unpublish { proc, keys, info } => {
                let done = self.completion(op);
                self.host.unpublish(&proc, &keys, &info, done);
            }
            HostCall::Spawn {
                proc,
                job_info,
                apps,
            } => {
                let done = self.completion(op);
                self.host.spawn(&proc, &job_info, &apps, done);
            }
            HostCall::Connect { procs, info } => {
                let done = self.completion(op);
                self.host.connect(&procs, &info, done);
            }
            HostCall::Disconnect { procs, info } => {
                let done = self.completion(op);
                self.host.disconnect(&procs, &info, done);
            }
            HostCall::NotifyEvent { event } => {
                let done = self.completion(op);
                self.host
                    .notify_event(event.code, &event.source, event.range, &event.info, done);
            }
        }
        // A host that answered at once has put its answer in the channel.
        self.drain_channel();
    }

    fn shutdown(&mut self) {
        // Unmapped and its files removed before the directories go.
        self.ds21 = None;
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

/// A reply encoded once and sent to several requests, each frame differing only in the id.
///
/// MessagePack encodes a struct's fields one after the other, and the reply is the last field
/// of `ServerMsg::Reply`, so a frame is "everything up to the reply" (small, per id) followed by
/// the reply's bytes (large, shared). A test checks this against the plain encoding.
struct SharedFrame {
    body: Vec<u8>,
    /// Encoding of the placeholder reply used to find where the reply starts.
    placeholder_len: usize,
}

impl SharedFrame {
    fn new(reply: &pmix_wire::Reply) -> Result<Self, pmix_wire::Error> {
        let body = rmp_serde::to_vec(reply).map_err(|e| pmix_wire::Error::Encode(e.to_string()))?;
        let placeholder = rmp_serde::to_vec(&pmix_wire::Reply::status(Status::SUCCESS))
            .map_err(|e| pmix_wire::Error::Encode(e.to_string()))?;
        Ok(SharedFrame {
            body,
            placeholder_len: placeholder.len(),
        })
    }

    fn write(&self, id: u32, out: &mut Vec<u8>) -> Result<(), pmix_wire::Error> {
        let head = rmp_serde::to_vec(&ServerMsg::Reply {
            id,
            reply: pmix_wire::Reply::status(Status::SUCCESS),
        })
        .map_err(|e| pmix_wire::Error::Encode(e.to_string()))?;
        let head = &head[..head.len() - self.placeholder_len];
        let len = u32::try_from(head.len() + self.body.len())
            .map_err(|_| pmix_wire::Error::Encode("reply too large for one frame".into()))?;
        out.reserve(4 + len as usize);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(head);
        out.extend_from_slice(&self.body);
        Ok(())
    }
}

enum Frame {
    Hello(Result<pmix_wire::Hello, pmix_wire::Error>),
    Msg(Result<ClientMsg, pmix_wire::Error>),
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

fn peer_creds(stream: &UnixStream) -> Option<PeerCreds> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    match getsockopt(stream, PeerCredentials) {
        Ok(c) => Some(PeerCreds {
            uid: c.uid(),
            gid: c.gid(),
        }),
        Err(e) => {
            tracing::warn!("cannot read peer credentials: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmix_types::Nspace;

    #[test]
    fn shared_reply_frames_equal_plain_ones() {
        use pmix_types::{Key, Proc, Scope, Value};
        use pmix_wire::{Kv, ProcKvs, Reply, ReplyBody};
        let kv = Kv {
            scope: Scope::GLOBAL,
            key: Key::new("k").unwrap(),
            value: Value::Uint64(u64::MAX),
        };
        let data = vec![ProcKvs {
            proc: Proc::new(Nspace::new("n").unwrap(), 3),
            kvs: vec![kv; 5],
        }];
        let reply = Reply {
            status: Status::SUCCESS,
            body: ReplyBody::Fence { data },
        };
        let shared = SharedFrame::new(&reply).unwrap();
        for id in [0u32, 1, 127, 128, 255, 256, 65535, 65536, u32::MAX] {
            let mut a = Vec::new();
            shared.write(id, &mut a).unwrap();
            let mut b = Vec::new();
            encode_frame(
                &ServerMsg::Reply {
                    id,
                    reply: reply.clone(),
                },
                &mut b,
            )
            .unwrap();
            assert_eq!(a, b, "id {id}");
        }
    }

    #[test]
    fn borrowed_welcome_encodes_like_the_owned_one() {
        let job = JobData {
            nspace: Nspace::new("ns").unwrap(),
            session: vec![],
            job: vec![Info::attr("pmix.job.size", 4u32)],
            apps: vec![],
            nodes: vec![],
            procs: vec![],
        };
        let mut a = Vec::new();
        encode_frame(
            &WelcomeRef::Accepted {
                version: PROTOCOL_VERSION,
                job: &job,
            },
            &mut a,
        )
        .unwrap();
        let mut b = Vec::new();
        encode_frame(
            &Welcome::Accepted {
                version: PROTOCOL_VERSION,
                job: Box::new(job),
            },
            &mut b,
        )
        .unwrap();
        assert_eq!(a, b);
    }
}
