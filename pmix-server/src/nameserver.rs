//! A standalone name server that several launcher runs share, and the client a host uses to
//! reach it: the scope `hydra_nameserver` or `ompi-server` give MPI programs.
//!
//! A launcher that has one serves its clients' publish/lookup/unpublish through it (a
//! [`Server`](crate::Server) started with [`NameService::Host`](crate::NameService::Host) whose
//! host forwards those callbacks to a [`NameServerClient`]). Each launcher connection is a
//! session of the server's [name store](crate::engine::names): the rules, ranges and
//! persistence are those of the built-in name service, with `SESSION` meaning one launcher
//! run, `LOCAL` the launchers of one node, and `GLOBAL` every launcher connected.
//!
//! **Trust.** The server listens on a Unix socket (mode 0600 by default). It takes the uid
//! a launcher states for its processes only from a launcher running as root; any other
//! launcher may speak only for processes of its own uid (`ERR_NO_PERMISSIONS` otherwise).

use crate::outbuf::OutQueue;
use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener as StdUnixListener, UnixStream as StdUnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mio::net::{UnixListener, UnixStream};
use mio::{Events, Interest, Poll, Token, Waker};
use parking_lot::Mutex;
use pmix_types::{Info, Key, Nspace, Proc, Status, attr};
use pmix_wire::{
    FrameDecoder, FrameReader, NS_MAGIC, NS_PROTOCOL_VERSION, NsCaller, NsHello, NsMsg, NsReply,
    NsRequest, NsWelcome, Published, decode_body, encode_frame,
};
use slab::Slab;

use crate::Error;
use crate::engine::cross_run::{CrossAnswers, CrossKind, CrossRuns};
use crate::engine::names::{Caller, LookupOutcome, NameStore};

/// Largest frame either side accepts.
const MAX_FRAME: usize = 16 << 20;
const LISTENER: Token = Token(usize::MAX - 1);
const WAKER: Token = Token(usize::MAX - 2);
/// How long a launcher waits for the server's welcome.
const HELLO_WAIT: Duration = Duration::from_secs(10);

/// Answers queued for one connection past which its requests are not taken (back-pressure).
const OUTPUT_LIMIT: usize = 16 << 20;

/// Answers queued for one connection past which it is closed: what it was owed before it
/// stopped reading (lookups that waited for a publish, answered all at once).
const OUTPUT_HARD_LIMIT: usize = 256 << 20;

/// A running name server: a thread serving a Unix socket until stopped or dropped.
pub struct NameServer {
    uri: String,
    path: PathBuf,
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for NameServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NameServer")
            .field("uri", &self.uri)
            .finish()
    }
}

impl NameServer {
    /// Binds `path` (which must not exist) with permission bits `mode` and starts serving,
    /// each connected launcher run a session of its own.
    pub fn start(path: &Path, mode: u32) -> Result<NameServer, Error> {
        Self::start_with(path, mode, false)
    }

    /// [`NameServer::start`] for runs that are one session, as the jobs of one allocation
    /// are: the `SESSION` range (the default one) reaches every connected run, for clients
    /// that cannot ask for `GLOBAL` (Open MPI 5's `MPI_Publish_name`). What persists for a
    /// session still ends with the publisher's run.
    pub fn start_one_session(path: &Path, mode: u32) -> Result<NameServer, Error> {
        Self::start_with(path, mode, true)
    }

    fn start_with(path: &Path, mode: u32, one_session: bool) -> Result<NameServer, Error> {
        let listener = StdUnixListener::bind(path)
            .map_err(Error::io(format!("binding {}", path.display())))?;
        let started = (|| {
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                .map_err(Error::io("setting the socket's mode"))?;
            listener
                .set_nonblocking(true)
                .map_err(Error::io("making the listener non-blocking"))?;
            let poll = Poll::new().map_err(Error::io("creating the event loop"))?;
            let waker = Arc::new(
                Waker::new(poll.registry(), WAKER).map_err(Error::io("creating the waker"))?,
            );
            let mut listener = UnixListener::from_std(listener);
            poll.registry()
                .register(&mut listener, LISTENER, Interest::READABLE)
                .map_err(Error::io("registering the listener"))?;
            let stop = Arc::new(AtomicBool::new(false));
            let mut store = NameStore::default();
            store.set_one_session(one_session);
            let mut lp = Loop {
                poll,
                listener,
                conns: Slab::new(),
                store,
                cross: CrossRuns::default(),
                decoder: FrameDecoder::new(MAX_FRAME),
                next_session: 1,
                stop: stop.clone(),
            };
            let thread = std::thread::Builder::new()
                .name("pmix-nameserver".into())
                .spawn(move || lp.run())
                .map_err(Error::io("starting the name server thread"))?;
            Ok((stop, waker, thread))
        })();
        match started {
            Ok((stop, waker, thread)) => Ok(NameServer {
                uri: format!("unix:{}", path.display()),
                path: path.to_owned(),
                stop,
                waker,
                thread: Some(thread),
            }),
            Err(e) => {
                let _ = std::fs::remove_file(path);
                Err(e)
            }
        }
    }

    /// The address launchers connect to (`unix:<path>`).
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// Stops serving, closes every session and removes the socket.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Drop for NameServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

struct Conn {
    stream: UnixStream,
    reader: FrameReader,
    out: OutQueue,
    writable: bool,
    /// Requests are not taken while its answers are backed up ([`OUTPUT_LIMIT`]).
    held: bool,
    /// The session, once the hello was accepted.
    session: Option<u64>,
    /// The peer's uid, from the socket.
    peer_uid: Option<u32>,
}

struct Loop {
    poll: Poll,
    listener: UnixListener,
    conns: Slab<Conn>,
    store: NameStore<(usize, u32)>,
    /// Connects and disconnects across runs under way.
    cross: CrossRuns<(usize, u32)>,
    decoder: FrameDecoder,
    next_session: u64,
    stop: Arc<AtomicBool>,
}

impl Loop {
    fn run(&mut self) {
        let mut events = Events::with_capacity(128);
        while !self.stop.load(Ordering::Acquire) {
            let next = match (self.store.poll_timeout(), self.cross.poll_timeout()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let timeout = next.map(|t| t.saturating_duration_since(Instant::now()));
            if let Err(e) = self.poll.poll(&mut events, timeout) {
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!("name server poll failed: {e}");
                break;
            }
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept(),
                    WAKER => {}
                    Token(c) => {
                        if ev.is_readable() || ev.is_read_closed() || ev.is_error() {
                            self.read(c);
                        }
                        if ev.is_writable() {
                            self.flush(c);
                        }
                    }
                }
            }
            let now = Instant::now();
            let expired = self.store.handle_timeout(now);
            self.answer(expired);
            let expired = self.cross.handle_timeout(now);
            self.answer_cross(expired);
        }
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((mut stream, _)) => {
                    let peer_uid = {
                        use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
                        getsockopt(&stream, PeerCredentials).ok().map(|c| c.uid())
                    };
                    let entry = self.conns.vacant_entry();
                    let key = entry.key();
                    if self
                        .poll
                        .registry()
                        .register(&mut stream, Token(key), Interest::READABLE)
                        .is_err()
                    {
                        continue;
                    }
                    entry.insert(Conn {
                        stream,
                        reader: FrameReader::new(self.decoder),
                        out: OutQueue::default(),
                        writable: false,
                        held: false,
                        session: None,
                        peer_uid,
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::warn!("name server accept failed: {e}");
                    break;
                }
            }
        }
    }

    /// Takes connection `c`'s requests one frame at a time, reading more only when no whole
    /// frame waits, and not at all while its answers are backed up past [`OUTPUT_LIMIT`]:
    /// what a peer sends ahead of reading its answers then waits in the kernel (which stops
    /// the sender), not in the name server. Reading resumes once its answers drained.
    fn read(&mut self, c: usize) {
        loop {
            let Some(conn) = self.conns.get_mut(c) else {
                return;
            };
            if conn.out.queued() > OUTPUT_LIMIT {
                conn.held = true;
                return;
            }
            match conn.reader.next_frame() {
                Ok(Some(body)) => {
                    let body = body.to_vec();
                    self.frame(c, &body);
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(
                        conn = c,
                        "name server: closing a connection after a bad frame: {e}"
                    );
                    return self.close(c);
                }
            }
            match conn.reader.read_from(&mut conn.stream) {
                Ok(0) => return self.close(c),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return self.close(c),
            }
        }
    }

    fn frame(&mut self, c: usize, body: &[u8]) {
        let Some(conn) = self.conns.get(c) else {
            return;
        };
        let Some(session) = conn.session else {
            let welcome = match decode_body::<NsHello>(body) {
                Ok(h) if h.magic == NS_MAGIC && h.version == NS_PROTOCOL_VERSION => {
                    let session = self.next_session;
                    self.next_session += 1;
                    self.store.open_session(session, &h.host);
                    if let Some(conn) = self.conns.get_mut(c) {
                        conn.session = Some(session);
                    }
                    NsWelcome {
                        status: Status::SUCCESS,
                        version: NS_PROTOCOL_VERSION,
                        reason: String::new(),
                    }
                }
                Ok(h) => NsWelcome {
                    status: Status::ERR_NOT_SUPPORTED,
                    version: NS_PROTOCOL_VERSION,
                    reason: format!(
                        "expected the name-server protocol {NS_MAGIC} v{NS_PROTOCOL_VERSION}, got {:?} v{}",
                        h.magic, h.version
                    ),
                },
                Err(e) => NsWelcome {
                    status: Status::ERR_BAD_PARAM,
                    version: NS_PROTOCOL_VERSION,
                    reason: format!("undecodable hello: {e}"),
                },
            };
            let refused = !welcome.status.is_success();
            self.send(c, &welcome);
            if refused {
                self.close(c);
            }
            return;
        };
        let msg = match decode_body::<NsMsg>(body) {
            Ok(m) => m,
            Err(e) => {
                tracing::warn!(
                    conn = c,
                    "name server: closing after an undecodable request: {e}"
                );
                return self.close(c);
            }
        };
        let peer_uid = conn.peer_uid;
        let id = msg.id;
        // A launcher not running as root speaks only for its own user.
        let caller = |nc: NsCaller| -> Result<Caller, Status> {
            match peer_uid {
                Some(uid) if uid != 0 && uid != nc.uid => Err(Status::ERR_NO_PERMISSIONS),
                _ => Ok(Caller {
                    proc: nc.proc,
                    uid: nc.uid,
                    gid: nc.gid,
                    session,
                }),
            }
        };
        let result: Result<Vec<Published>, Status> = match msg.req {
            NsRequest::Publish {
                caller: nc,
                data,
                info,
            } => caller(nc).and_then(|who| {
                let answers = self.store.publish(&who, data, &info)?;
                self.answer(answers);
                Ok(Vec::new())
            }),
            NsRequest::Lookup {
                caller: nc,
                keys,
                info,
            } => match caller(nc) {
                Ok(who) => match self
                    .store
                    .lookup(&who, keys, &info, (c, id), Instant::now())
                {
                    LookupOutcome::Done(r) => r,
                    LookupOutcome::Waiting => return,
                },
                Err(s) => Err(s),
            },
            NsRequest::Unpublish {
                caller: nc,
                keys,
                info,
            } => caller(nc)
                .and_then(|who| self.store.unpublish(&who, &keys, &info))
                .map(|()| Vec::new()),
            NsRequest::NspaceStarted { nspace } => {
                let r = self.store.add_nspace(session, &nspace);
                if r.is_err() {
                    tracing::warn!(session, %nspace, "name server: refusing a claim on another run's namespace");
                }
                r.map(|()| Vec::new())
            }
            NsRequest::NspaceEnded { nspace } => {
                // Only its owner can say it ended.
                if self.store.session_of(&nspace) == Some(session) {
                    let failed = self.cross.nspace_ended(&nspace);
                    self.answer_cross(failed);
                }
                self.store.end_nspace(session, &nspace);
                Ok(Vec::new())
            }
            NsRequest::ProcEnded { proc } => {
                if self.store.session_of(&proc.nspace) == Some(session) {
                    let failed = self.cross.proc_ended(&proc);
                    self.answer_cross(failed);
                }
                self.store.end_proc(session, &proc);
                Ok(Vec::new())
            }
            NsRequest::Connect { procs, info, data } => {
                return self.cross_join(c, id, CrossKind::Connect, session, procs, &info, data);
            }
            NsRequest::Fence { procs, info, data } => {
                return self.cross_join(c, id, CrossKind::Fence, session, procs, &info, data);
            }
            NsRequest::Disconnect { procs, info } => {
                let kind = CrossKind::Disconnect;
                return self.cross_join(c, id, kind, session, procs, &info, Vec::new());
            }
            _ => Err(Status::ERR_NOT_SUPPORTED),
        };
        self.reply(c, id, result);
    }

    fn reply(&mut self, c: usize, id: u32, result: Result<Vec<Published>, Status>) {
        let reply = match result {
            Ok(found) => NsReply {
                id,
                status: Status::SUCCESS,
                found,
                data: Vec::new(),
            },
            Err(status) => NsReply {
                id,
                status,
                found: Vec::new(),
                data: Vec::new(),
            },
        };
        self.send(c, &reply);
    }

    /// A session's part of a connect or disconnect across runs.
    #[allow(clippy::too_many_arguments)]
    fn cross_join(
        &mut self,
        c: usize,
        id: u32,
        kind: CrossKind,
        session: u64,
        procs: Vec<Proc>,
        info: &[Info],
        data: Vec<u8>,
    ) {
        let peer_uid = self.conns.get(c).and_then(|conn| conn.peer_uid);
        let store = &self.store;
        let joined = self.cross.join(
            kind,
            session,
            peer_uid,
            procs,
            info,
            data,
            (c, id),
            Instant::now(),
            |n| store.session_of(n),
        );
        match joined {
            Ok(answers) => self.answer_cross(answers),
            Err((_, status)) => self.answer_cross(vec![((c, id), Err(status))]),
        }
    }

    fn answer_cross(&mut self, answers: CrossAnswers<(usize, u32)>) {
        for ((c, id), result) in answers {
            let (status, data) = match result {
                Ok(data) => (Status::SUCCESS, data),
                Err(status) => (status, Vec::new()),
            };
            let reply = NsReply {
                id,
                status,
                found: Vec::new(),
                data,
            };
            self.send(c, &reply);
        }
    }

    fn answer(&mut self, answers: crate::engine::names::Answers<(usize, u32)>) {
        for ((c, id), result) in answers {
            self.reply(c, id, result);
        }
    }

    fn send<T: serde::Serialize>(&mut self, c: usize, msg: &T) {
        let Some(conn) = self.conns.get_mut(c) else {
            return;
        };
        if let Err(e) = encode_frame(msg, conn.out.bytes()) {
            tracing::error!("name server: cannot encode a reply: {e}");
            return;
        }
        self.flush(c);
    }

    fn flush(&mut self, c: usize) {
        let Some(conn) = self.conns.get_mut(c) else {
            return;
        };
        let dead = !conn.out.write_to(&mut conn.stream);
        if conn.out.queued() > OUTPUT_HARD_LIMIT {
            // Answers it was owed before it stopped reading (lookups that waited for a
            // publish) pile up: a peer that reads none of them is not kept at any cost.
            tracing::warn!(
                conn = c,
                queued = conn.out.queued(),
                "name server: closing a connection that does not read its answers"
            );
            return self.close(c);
        }
        let resume = conn.held && !dead && conn.out.queued() <= OUTPUT_LIMIT;
        if resume {
            conn.held = false;
        }
        let want = !conn.out.is_empty();
        if want != conn.writable && !dead {
            let interest = if want {
                Interest::READABLE | Interest::WRITABLE
            } else {
                Interest::READABLE
            };
            if self
                .poll
                .registry()
                .reregister(&mut conn.stream, Token(c), interest)
                .is_ok()
            {
                conn.writable = want;
            }
        }
        if dead {
            self.close(c);
        } else if resume {
            self.read(c);
        }
    }

    fn close(&mut self, c: usize) {
        if let Some(mut conn) = self.conns.try_remove(c) {
            let _ = self.poll.registry().deregister(&mut conn.stream);
            if let Some(session) = conn.session {
                // The launcher run is over: so is everything of it that does not persist
                // indefinitely, and its waiting lookups, and every connect across runs that
                // waits for it.
                let failed = self.cross.session_ended(session);
                self.store.end_session(session);
                self.answer_cross(failed);
            }
        }
    }
}

type Pending = Box<dyn FnOnce(Result<NsReply, Status>) + Send>;

struct ClientShared {
    writer: Mutex<StdUnixStream>,
    pending: Mutex<HashMap<u32, Pending>>,
    next_id: AtomicU32,
    alive: AtomicBool,
}

impl ClientShared {
    /// Fails everything outstanding, once the connection is gone.
    fn fail_all(&self) {
        self.alive.store(false, Ordering::Release);
        let pending: Vec<Pending> = self.pending.lock().drain().map(|(_, p)| p).collect();
        for p in pending {
            p(Err(Status::ERR_UNREACH));
        }
    }
}

/// A host's connection to a [`NameServer`]: forwards publish/lookup/unpublish for its
/// processes and tells the server when processes and namespaces end.
///
/// Requests are written on the calling thread (the server's event loop, when called from
/// [`Host`](crate::Host) callbacks: they are small) and answered through their completion
/// closures, on a reader thread. If the connection is lost, outstanding and later
/// requests fail with `ERR_UNREACH`.
pub struct NameServerClient {
    shared: Arc<ClientShared>,
    reader: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for NameServerClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NameServerClient")
            .field("alive", &self.shared.alive.load(Ordering::Relaxed))
            .finish()
    }
}

/// The credentials the server attached to a request's directives (see
/// [`NameService::Host`](crate::NameService::Host)); this process's own when absent.
fn caller_of(proc: &Proc, info: &[Info]) -> NsCaller {
    let find = |k: &str| {
        info.iter()
            .find(|i| i.key.as_str() == k)
            .and_then(|i| i.value.as_u32())
    };
    NsCaller {
        proc: proc.clone(),
        uid: find(attr::USERID).unwrap_or_else(|| nix::unistd::geteuid().as_raw()),
        gid: find(attr::GRPID).unwrap_or_else(|| nix::unistd::getegid().as_raw()),
    }
}

impl NameServerClient {
    /// Connects to the server at `uri` (`unix:<path>`, or a bare path) as a session running
    /// on node `host`.
    pub fn connect(uri: &str, host: &str) -> Result<NameServerClient, Error> {
        let path = uri.strip_prefix("unix:").unwrap_or(uri);
        let mut stream = StdUnixStream::connect(path)
            .map_err(Error::io(format!("connecting to the name server at {uri}")))?;
        let mut out = Vec::new();
        encode_frame(
            &NsHello {
                magic: NS_MAGIC.into(),
                version: NS_PROTOCOL_VERSION,
                host: host.into(),
            },
            &mut out,
        )
        .map_err(|e| Error::BadParam(e.to_string()))?;
        stream
            .write_all(&out)
            .map_err(Error::io("greeting the name server"))?;
        stream
            .set_read_timeout(Some(HELLO_WAIT))
            .map_err(Error::io("setting a read timeout"))?;
        let mut reader = FrameReader::new(FrameDecoder::new(MAX_FRAME));
        let welcome: NsWelcome = loop {
            if let Some(body) = reader
                .next_frame()
                .map_err(|e| Error::BadParam(format!("name server: {e}")))?
            {
                break decode_body(body)
                    .map_err(|e| Error::BadParam(format!("name server welcome: {e}")))?;
            }
            let mut buf = [0u8; 4096];
            let n = stream
                .read(&mut buf)
                .map_err(Error::io("waiting for the name server's welcome"))?;
            if n == 0 {
                return Err(Error::BadParam(format!(
                    "the name server at {uri} closed the connection"
                )));
            }
            reader.extend(&buf[..n]);
        };
        if !welcome.status.is_success() {
            return Err(Error::BadParam(format!(
                "the name server at {uri} refused us: {}",
                welcome.reason
            )));
        }
        stream
            .set_read_timeout(None)
            .map_err(Error::io("clearing the read timeout"))?;
        let read_half = stream
            .try_clone()
            .map_err(Error::io("cloning the name-server socket"))?;
        let shared = Arc::new(ClientShared {
            writer: Mutex::new(stream),
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU32::new(1),
            alive: AtomicBool::new(true),
        });
        let s2 = shared.clone();
        let reader = std::thread::Builder::new()
            .name("pmix-ns-client".into())
            .spawn(move || read_replies(read_half, reader, &s2))
            .map_err(Error::io("starting the name-server reader"))?;
        Ok(NameServerClient {
            shared,
            reader: Mutex::new(Some(reader)),
        })
    }

    /// Whether the connection is still up.
    pub fn is_connected(&self) -> bool {
        self.shared.alive.load(Ordering::Acquire)
    }

    fn submit(&self, req: NsRequest, done: Pending) {
        if !self.is_connected() {
            return done(Err(Status::ERR_UNREACH));
        }
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        let mut out = Vec::new();
        if let Err(e) = encode_frame(&NsMsg { id, req }, &mut out) {
            tracing::warn!("name server request not encodable: {e}");
            return done(Err(Status::ERR_BAD_PARAM));
        }
        self.shared.pending.lock().insert(id, done);
        let written = self.shared.writer.lock().write_all(&out);
        if written.is_err() {
            let _ = self.shared.writer.lock().shutdown(std::net::Shutdown::Both);
            self.shared.fail_all();
        }
    }

    /// Forwards a publish (for the [`Host::publish`](crate::Host::publish) callback: pass
    /// `move |r| done.complete(r)`).
    pub fn publish(
        &self,
        proc: &Proc,
        data: &[Info],
        info: &[Info],
        done: impl FnOnce(Result<(), Status>) + Send + 'static,
    ) {
        let req = NsRequest::Publish {
            caller: caller_of(proc, info),
            data: data.to_vec(),
            info: info.to_vec(),
        };
        self.submit(req, Box::new(move |r| done(r.map(drop))));
    }

    /// Forwards a lookup (for the [`Host::lookup`](crate::Host::lookup) callback).
    pub fn lookup(
        &self,
        proc: &Proc,
        keys: &[Key],
        info: &[Info],
        done: impl FnOnce(Result<Vec<Published>, Status>) + Send + 'static,
    ) {
        let req = NsRequest::Lookup {
            caller: caller_of(proc, info),
            keys: keys.to_vec(),
            info: info.to_vec(),
        };
        self.submit(req, Box::new(move |r| done(r.map(|reply| reply.found))));
    }

    /// Forwards an unpublish (for the [`Host::unpublish`](crate::Host::unpublish) callback).
    pub fn unpublish(
        &self,
        proc: &Proc,
        keys: &[Key],
        info: &[Info],
        done: impl FnOnce(Result<(), Status>) + Send + 'static,
    ) {
        let req = NsRequest::Unpublish {
            caller: caller_of(proc, info),
            keys: keys.to_vec(),
            info: info.to_vec(),
        };
        self.submit(req, Box::new(move |r| done(r.map(drop))));
    }

    /// This run's part of a connect whose processes span the namespaces of several runs (for
    /// the [`Host::connect`](crate::Host::connect) callback): `data` is what this run's server
    /// contributes; answered, once every run owning a namespace of `procs` sent its part, with
    /// every run's, concatenated. Fails as the name server's rendezvous does (see
    /// `docs/PROTOCOL.md`): `ERR_NOT_FOUND` when no run attached owns a namespace named,
    /// `ERR_TIMEOUT` after `PMIX_TIMEOUT`, `ERR_UNREACH` when a run taking part disconnects.
    pub fn connect_procs(
        &self,
        procs: &[Proc],
        info: &[Info],
        data: Vec<u8>,
        done: impl FnOnce(Result<Vec<u8>, Status>) + Send + 'static,
    ) {
        let req = NsRequest::Connect {
            procs: procs.to_vec(),
            info: info.to_vec(),
            data,
        };
        self.submit(req, Box::new(move |r| done(r.map(|reply| reply.data))));
    }

    /// This run's part of a fence across runs, once connected (for the
    /// [`Host::fence_nb`](crate::Host::fence_nb) callback): gathered as
    /// [`NameServerClient::connect_procs`] is.
    pub fn fence_procs(
        &self,
        procs: &[Proc],
        info: &[Info],
        data: Vec<u8>,
        done: impl FnOnce(Result<Vec<u8>, Status>) + Send + 'static,
    ) {
        let req = NsRequest::Fence {
            procs: procs.to_vec(),
            info: info.to_vec(),
            data,
        };
        self.submit(req, Box::new(move |r| done(r.map(|reply| reply.data))));
    }

    /// This run's part of a disconnect across runs (for the
    /// [`Host::disconnect`](crate::Host::disconnect) callback).
    pub fn disconnect_procs(
        &self,
        procs: &[Proc],
        info: &[Info],
        done: impl FnOnce(Result<(), Status>) + Send + 'static,
    ) {
        let req = NsRequest::Disconnect {
            procs: procs.to_vec(),
            info: info.to_vec(),
        };
        self.submit(req, Box::new(move |r| done(r.map(drop))));
    }

    /// Tells the server a namespace of this session started.
    pub fn nspace_started(&self, nspace: &Nspace) {
        let nspace = nspace.clone();
        let what = nspace.clone();
        let said = Box::new(move |r: Result<_, Status>| {
            if let Err(s) = r {
                tracing::warn!(nspace = %what, "the name server refused this run's namespace ({s}): another run claimed it first");
            }
        });
        self.submit(NsRequest::NspaceStarted { nspace }, said);
    }

    /// Tells the server a namespace of this session ended (its `APP` data goes).
    pub fn nspace_ended(&self, nspace: &Nspace) {
        let nspace = nspace.clone();
        self.submit(NsRequest::NspaceEnded { nspace }, Box::new(|_| {}));
    }

    /// Tells the server a process of this session ended (its `PROC` data goes).
    pub fn proc_ended(&self, proc: &Proc) {
        let proc = proc.clone();
        self.submit(NsRequest::ProcEnded { proc }, Box::new(|_| {}));
    }
}

impl Drop for NameServerClient {
    fn drop(&mut self) {
        let _ = self.shared.writer.lock().shutdown(std::net::Shutdown::Both);
        if let Some(t) = self.reader.lock().take() {
            let _ = t.join();
        }
    }
}

fn read_replies(mut stream: StdUnixStream, mut reader: FrameReader, shared: &ClientShared) {
    'outer: loop {
        loop {
            let body = match reader.next_frame() {
                Ok(Some(body)) => body,
                Ok(None) => break,
                Err(e) => {
                    tracing::warn!("name server sent a bad frame: {e}");
                    break 'outer;
                }
            };
            match decode_body::<NsReply>(body) {
                Ok(reply) => {
                    let done = shared.pending.lock().remove(&reply.id);
                    match done {
                        Some(done) if reply.status.is_success() => done(Ok(reply)),
                        Some(done) => done(Err(reply.status)),
                        None => tracing::debug!(id = reply.id, "reply to no request"),
                    }
                }
                Err(e) => {
                    tracing::warn!("name server sent an undecodable reply: {e}");
                    break 'outer;
                }
            }
        }
        match reader.read_from(&mut stream) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
    shared.fail_all();
}
