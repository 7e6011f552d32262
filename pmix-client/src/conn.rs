//! The connection to the server: the I/O around the client's sans-IO core (`core/`). The
//! socket, the handshake (`handshake.rs`, `openpmix/`), the writer (caller's thread, under a mutex), the reading role and
//! the reader thread; what is read goes to the [`ClientCore`] message by message, what it
//! gives is written, and the completions and events it hands out are run here, once its lock
//! is let go.
//!
//! **Wire personality.** The rest of the client speaks native [`Request`]s and [`Reply`]s
//! only. How they travel is the core's wire (`core/wire.rs`), fixed at [`Conn::open`]: the
//! native protocol (MessagePack frames over a Unix socket to a pmix-rs server,
//! `docs/PROTOCOL.md`), or OpenPMIx 4.2 over loopback TCP to a libpmix-based server, whose
//! session translates each request into its OpenPMIx message and each answer back
//! (`docs/OPENPMIX.md`, "The client side"). Here they differ in the handshake only.
//!
//! **Who reads.** Reading the socket is a role, held by whoever holds the `read` mutex. A
//! blocking call takes it if it is free and reads on its own thread until its reply has come
//! (dispatching any other reply it meets): a blocking round trip then costs no thread hand-off
//! in the client. The reader thread takes the role only when asked: after a non-blocking
//! request ([`Shared::kick`]), or when a blocking caller gives the role up while other requests
//! are outstanding; it reads until nothing is outstanding, then sleeps again. A blocking call
//! that finds the role taken waits for its reply on its channel, as a non-blocking one would.
//! Before sleeping in `read`, a blocking caller looks for its reply for up to 20 µs
//! (non-blocking reads, yielding the CPU between them): on a shared CPU the server runs
//! meanwhile, and on another CPU the reply is often there before a sleep and wake-up would end.
//!
//! **Locks.** The core is under a read-write lock: gets read the store under its read side,
//! in parallel; requests, replies and events take its write side for as long as the core
//! needs, never across a read or a write of the socket. A request is encoded and written
//! under the writer mutex, so requests leave in the order they were submitted.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};
use std::thread::{self, JoinHandle, ThreadId};
use std::time::{Duration, Instant};

use hashbrown::HashMap;
use parking_lot::{
    Condvar, MappedRwLockReadGuard, MappedRwLockWriteGuard, Mutex, RwLock, RwLockReadGuard,
    RwLockWriteGuard,
};
use pmix_types::Proc;
use pmix_wire::{Event, Reply, Request};

use crate::Error;
use crate::core::get::{GetDirectives, Local};
use crate::core::wire::Wire;
use crate::core::{ClientCore, Input, Output};
use crate::env::{Rendezvous, Server};
use crate::event_registry::Events;
use crate::handshake::{JobIn, frame_io, native_handshake};
use crate::openpmix;
use crate::singleton::Singleton;
use crate::store::Store;

/// What a request's completion receives.
pub(crate) type Completion = Box<dyn FnOnce(Result<Reply, Error>) + Send + 'static>;

/// What the core handed out, ready to run once its lock is let go.
enum Ready {
    Complete(Completion, Result<Reply, Error>),
    Event(Event),
    Lost(Proc),
}

/// Who reads, and why: the reader thread's orders.
struct Control {
    /// The reader thread is asked to take the reading role.
    handoff: bool,
    /// The client is closing: the reader thread ends.
    stop: bool,
    /// The connection is gone.
    closed: bool,
    /// Event handlers are registered: the reader thread reads all the time, so that events
    /// are delivered when they come rather than at the next reply.
    listen: u32,
}

/// The socket: a Unix stream to a pmix-rs server, TCP to an OpenPMIx server.
enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Stream {
    fn try_clone(&self) -> io::Result<Stream> {
        Ok(match self {
            Stream::Unix(s) => Stream::Unix(s.try_clone()?),
            Stream::Tcp(s) => Stream::Tcp(s.try_clone()?),
        })
    }

    fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.shutdown(how),
            Stream::Tcp(s) => s.shutdown(how),
        }
    }

    fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.set_read_timeout(t),
            Stream::Tcp(s) => s.set_read_timeout(t),
        }
    }
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

impl AsFd for Stream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            Stream::Unix(s) => s.as_fd(),
            Stream::Tcp(s) => s.as_fd(),
        }
    }
}

impl AsRawFd for Stream {
    fn as_raw_fd(&self) -> RawFd {
        self.as_fd().as_raw_fd()
    }
}

/// The reading side of the socket, what was read but not yet given to the core, and the
/// core's outputs on their way to being run.
struct ReadSide {
    stream: Stream,
    input: Input,
    outs: Vec<Ready>,
}

/// What a blocking caller's turn at reading came to.
pub(crate) enum Turn {
    /// `done` became true.
    Done,
    /// Someone else is reading: wait on the channel.
    Busy,
    /// The deadline passed.
    TimedOut,
    /// The connection is gone (every outstanding request has been failed).
    Lost,
}

struct Writer {
    stream: Stream,
    buf: Vec<u8>,
}

/// How requests leave.
enum Link {
    /// A socket to a server.
    Socket {
        writer: Mutex<Writer>,
        read: Mutex<ReadSide>,
    },
    /// No server: a singleton answers its own requests in the process, or passes them on to
    /// the private server it started (`singleton/`).
    Singleton(Singleton),
}

/// State shared by the callers' threads and the reader thread.
pub(crate) struct Shared {
    core: RwLock<ClientCore>,
    /// The completions of the requests the core has waiting, by id. Kept here, not in the
    /// core: a closure is `Send` but not `Sync`, and the core is read by gets in parallel.
    /// Filled under the core's lock, so that a reply always finds its completion.
    completions: Mutex<HashMap<u32, Completion>>,
    /// Shared with a singleton's connection to its private server, whose events reach the
    /// same handlers.
    pub(crate) events: Arc<Events>,
    link: Link,
    control: Mutex<Control>,
    /// Signalled when the reader thread has something to do.
    wake_reader: Condvar,
    reader_id: OnceLock<ThreadId>,
    /// The thread holding the reading role, when it is a caller's.
    caller_reading: Mutex<Option<ThreadId>>,
}

/// The connection as the client owns it: the shared state plus the reader thread's handle.
pub(crate) struct Conn {
    pub(crate) shared: Arc<Shared>,
    reader: Mutex<Option<JoinHandle<()>>>,
}

impl Conn {
    /// Connects, says hello, and starts the reader thread. Returns the job data of our
    /// namespace from the welcome (the native protocol) or the job data request (OpenPMIx).
    pub(crate) fn open(rv: &Rendezvous) -> Result<(Conn, JobIn), Error> {
        Conn::open_with_events(rv, Arc::default())
    }

    /// [`Conn::open`] delivering events to `events`.
    pub(crate) fn open_with_events(
        rv: &Rendezvous,
        events: Arc<Events>,
    ) -> Result<(Conn, JobIn), Error> {
        let (stream, wire, input, job, path) = match &rv.server {
            Server::Native { socket, secret } => {
                let (stream, input, job) = native_handshake(rv, socket, secret)?;
                let path = socket.display().to_string();
                (Stream::Unix(stream), Wire::Native, input, job, path)
            }
            Server::Openpmix(srv) => {
                let c = openpmix::connect(&rv.proc, srv)?;
                let path = srv.uri.clone();
                (
                    Stream::Tcp(c.stream),
                    Wire::Openpmix(c.session),
                    Input::openpmix(c.reader),
                    JobIn::Data(c.job),
                    path,
                )
            }
        };
        let read_half = stream.try_clone().map_err(frame_io(&path))?;
        let link = Link::Socket {
            writer: Mutex::new(Writer {
                stream,
                buf: Vec::with_capacity(4096),
            }),
            read: Mutex::new(ReadSide {
                stream: read_half,
                input,
                outs: Vec::new(),
            }),
        };
        let shared = Shared::new(ClientCore::new(wire), events, link);
        let for_reader = Arc::clone(&shared);
        let handle = thread::Builder::new()
            .name("pmix-client-reader".into())
            .spawn(move || reader_loop(&for_reader))
            .map_err(frame_io(&path))?;
        let _ = shared.reader_id.set(handle.thread().id());
        Ok((
            Conn {
                shared,
                reader: Mutex::new(Some(handle)),
            },
            job,
        ))
    }

    /// The connection of singleton `me`, with no server (`singleton/`), and its job data.
    /// No socket and no reader thread: everything is answered on the caller's thread, or by
    /// the private server's connection once a spawn started one.
    pub(crate) fn singleton(me: Proc) -> Result<(Conn, JobIn), Error> {
        let single = Singleton::new(me);
        let job = JobIn::Data(single.job());
        let shared = Shared::new(
            ClientCore::new(Wire::Local),
            Arc::default(),
            Link::Singleton(single),
        );
        Ok((
            Conn {
                shared,
                reader: Mutex::new(None),
            },
            job,
        ))
    }

    /// Shuts the socket down and joins the reader thread. Called from the reader thread
    /// itself (a callback dropping the last handle) it only shuts down: the thread ends on
    /// its own once it sees the end of the stream.
    pub(crate) fn close(&self) {
        self.shared.core.write().handle_close();
        match &self.shared.link {
            Link::Singleton(s) => s.close(),
            Link::Socket { writer, .. } => {
                let _ = writer.lock().stream.shutdown(Shutdown::Both);
            }
        }
        self.shared.control.lock().stop = true;
        self.shared.wake_reader.notify_all();
        let handle = self.reader.lock().take();
        if let Some(h) = handle {
            if self.shared.on_reader_thread() {
                return;
            }
            if h.join().is_err() {
                tracing::error!("pmix-client reader thread panicked");
            }
        }
    }
}

impl Shared {
    fn new(core: ClientCore, events: Arc<Events>, link: Link) -> Arc<Shared> {
        Arc::new(Shared {
            core: RwLock::new(core),
            completions: Mutex::new(HashMap::new()),
            events,
            link,
            control: Mutex::new(Control {
                handoff: false,
                stop: false,
                closed: false,
                listen: 0,
            }),
            wake_reader: Condvar::new(),
            reader_id: OnceLock::new(),
            caller_reading: Mutex::new(None),
        })
    }

    /// The store, for reading (gets run in parallel under it).
    pub(crate) fn store(&self) -> MappedRwLockReadGuard<'_, Store> {
        RwLockReadGuard::map(self.core.read(), ClientCore::store)
    }

    /// The store, for writing.
    pub(crate) fn store_mut(&self) -> MappedRwLockWriteGuard<'_, Store> {
        RwLockWriteGuard::map(self.core.write(), ClientCore::store_mut)
    }

    /// The members of the groups this process constructed, by group id.
    pub(crate) fn groups(&self) -> MappedRwLockWriteGuard<'_, HashMap<String, Vec<Proc>>> {
        RwLockWriteGuard::map(self.core.write(), ClientCore::groups_mut)
    }

    /// True on a thread that is reading replies (the reader thread, or a caller while it
    /// reads): completions run there, and a blocking wait would wait for itself.
    pub(crate) fn on_reader_thread(&self) -> bool {
        if let Some(up) = self.upstream() {
            return up.on_reader_thread();
        }
        let me = thread::current().id();
        self.reader_id.get() == Some(&me) || *self.caller_reading.lock() == Some(me)
    }

    /// A singleton's connection to its private server, once it has one: requests go there,
    /// and so do the questions of who reads.
    fn upstream(&self) -> Option<&Shared> {
        match &self.link {
            Link::Singleton(s) => s.upstream().map(|c| &*c.shared),
            Link::Socket { .. } => None,
        }
    }

    /// Starts (`true`) or ends (`false`) one reason to read all the time (an event handler).
    pub(crate) fn listen(&self, on: bool) {
        let mut c = self.control.lock();
        if on {
            c.listen += 1;
            c.handoff = true;
            drop(c);
            self.wake_reader.notify_one();
        } else {
            c.listen = c.listen.saturating_sub(1);
        }
    }

    /// Asks the reader thread to read: a non-blocking request was sent, and nobody may be
    /// reading for it.
    pub(crate) fn kick(&self) {
        if let Some(up) = self.upstream() {
            return up.kick();
        }
        self.control.lock().handoff = true;
        self.wake_reader.notify_one();
    }

    /// Hands every whole message already buffered to the core, one at a time, and runs
    /// what each gives before the next is read (completions and events keep the server's
    /// order, and none runs under the core's lock).
    fn dispatch_buffered(&self, rs: &mut ReadSide) -> Result<(), Error> {
        let ReadSide { input, outs, .. } = rs;
        while let Some(frame) = input.next_frame()? {
            let result = {
                let mut core = self.core.write();
                let r = core.handle_frame(frame);
                self.take_outputs(&mut core, outs);
                r
            };
            self.run(outs, true);
            result?;
        }
        Ok(())
    }

    /// Runs what the core handed out: completions (`catch`: a panicking one is caught, as
    /// on the reading thread; otherwise it is the caller's own), events.
    fn run(&self, outs: &mut Vec<Ready>, catch: bool) {
        for o in outs.drain(..) {
            match o {
                Ready::Complete(done, r) if catch => run_completion(done, r),
                Ready::Complete(done, r) => done(r),
                Ready::Event(ev) => self.events.deliver(ev),
                Ready::Lost(me) => self.events.connection_lost(me),
            }
        }
    }

    /// Moves the core's outputs into `outs`, each completion with its closure.
    fn take_outputs(&self, core: &mut ClientCore, outs: &mut Vec<Ready>) {
        while let Some(o) = core.poll_output() {
            outs.push(match o {
                Output::Complete(id, r) => match self.completions.lock().remove(&id) {
                    Some(done) => Ready::Complete(done, r),
                    None => continue,
                },
                Output::Event(ev) => Ready::Event(ev),
                Output::Lost(me) => Ready::Lost(me),
            });
        }
    }

    /// A blocking caller's turn at reading: reads and dispatches replies on this thread until
    /// `done()` (the caller's reply has been dispatched) or `deadline`, if the reading role is
    /// free.
    pub(crate) fn read_until(&self, done: &dyn Fn() -> bool, deadline: Option<Instant>) -> Turn {
        let read = match &self.link {
            Link::Socket { read, .. } => read,
            // Answers come on the caller's thread, from another thread (a publish releasing a
            // held lookup, a timer) or from the private server's reader: wait on the channel.
            Link::Singleton(s) => {
                return match s.upstream() {
                    Some(up) => up.shared.read_until(done, deadline),
                    None => Turn::Busy,
                };
            }
        };
        let Some(mut rs) = read.try_lock() else {
            return Turn::Busy;
        };
        *self.caller_reading.lock() = Some(thread::current().id());
        let turn = loop {
            match self.dispatch_buffered(&mut rs) {
                Ok(()) => {}
                Err(e) => break Err(e),
            }
            if done() {
                break Ok(Turn::Done);
            }
            let timeout = match deadline {
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => break Ok(Turn::TimedOut),
                },
                None => None,
            };
            if deadline.is_some() {
                if let Err(e) = rs.stream.set_read_timeout(timeout) {
                    break Err(Error::Connect {
                        path: "server".into(),
                        source: e,
                    });
                }
            }
            // The reply usually comes within microseconds: look for it a few times, letting
            // the server run meanwhile if it shares our CPU, before sleeping in the kernel.
            match spin_fill(&mut rs) {
                Ok(Some(true)) => continue,
                Ok(Some(false)) => break Err(Error::LostConnection),
                Ok(None) => {}
                Err(e) => {
                    break Err(Error::Connect {
                        path: "server".into(),
                        source: e,
                    });
                }
            }
            match fill(&mut rs) {
                Ok(true) => {}
                Ok(false) => break Err(Error::LostConnection),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    break Ok(Turn::TimedOut);
                }
                Err(e) => {
                    break Err(Error::Connect {
                        path: "server".into(),
                        source: e,
                    });
                }
            }
        };
        if deadline.is_some() {
            let _ = rs.stream.set_read_timeout(None);
        }
        *self.caller_reading.lock() = None;
        match turn {
            Ok(turn) => {
                drop(rs);
                // Others still wait for replies: someone must go on reading.
                if self.core.read().has_pending() {
                    self.kick();
                }
                turn
            }
            Err(e) => {
                tracing::warn!("pmix-client: connection to the server lost: {e}");
                let _ = rs.stream.shutdown(Shutdown::Both);
                drop(rs);
                self.fail_all();
                Turn::Lost
            }
        }
    }

    /// Sends a request; `done` runs once with the reply (on the reader thread) or with the
    /// error that prevented one (on this thread, if the request never left). Returns the id
    /// under which it waits, for [`Shared::cancel`].
    pub(crate) fn submit(&self, req: Request, done: Completion) -> Option<u32> {
        self.submit_as(req, done, false)
    }

    /// [`Shared::submit`] for a caller that hands the reply on as sent ([`crate::Client::request`]):
    /// a collecting fence's data is then decoded into the reply (and taken into the store by
    /// the caller), rather than only taken into the store, still encoded.
    pub(crate) fn submit_whole(&self, req: Request, done: Completion) -> Option<u32> {
        self.submit_as(req, done, true)
    }

    fn submit_as(&self, req: Request, done: Completion, whole: bool) -> Option<u32> {
        let writer = match &self.link {
            Link::Socket { writer, .. } => writer,
            Link::Singleton(s) => {
                if self.control.lock().stop {
                    done(Err(Error::LostConnection));
                    return None;
                }
                return s.submit(&self.events, req, done);
            }
        };
        let mut outs = Vec::new();
        // Held from encoding to writing: requests leave in the order they were submitted.
        let mut w = writer.lock();
        let submitted = {
            let mut core = self.core.write();
            match core.submit(req, whole) {
                Ok(s) => {
                    self.completions.lock().insert(s.id, done);
                    core.poll_transmit(&mut w.buf);
                    s
                }
                Err(e) => {
                    drop(core);
                    drop(w);
                    done(Err(e));
                    return None;
                }
            }
        };
        let id = submitted.id;
        let Writer { stream, buf } = &mut *w;
        let written = stream.write_all(buf);
        buf.clear();
        // Don't let one huge commit pin its buffer for the life of the process.
        if buf.capacity() > 1 << 20 {
            *buf = Vec::with_capacity(4096);
        }
        if let Err(e) = written {
            tracing::warn!("pmix-client: writing to the server failed: {e}");
            // The reader will see the end of the stream and fail everything outstanding.
            let _ = stream.shutdown(Shutdown::Both);
            drop(w);
            {
                let mut core = self.core.write();
                core.fail(id, Error::LostConnection);
                self.take_outputs(&mut core, &mut outs);
            }
            self.run(&mut outs, false);
            return None;
        }
        drop(w);
        if submitted.once_written {
            // Complete once sent: nothing will answer it.
            {
                let mut core = self.core.write();
                core.handle_written(id);
                self.take_outputs(&mut core, &mut outs);
            }
            self.run(&mut outs, true);
            return None;
        }
        Some(id)
    }

    /// Forgets a request the caller stopped waiting for; a late reply is then dropped.
    pub(crate) fn cancel(&self, id: u32) {
        if let Link::Singleton(s) = &self.link {
            return s.cancel(id);
        }
        // Dropped outside the lock: the closure may own the last handle of the client.
        let waiter = {
            let mut core = self.core.write();
            core.cancel(id);
            self.completions.lock().remove(&id)
        };
        drop(waiter);
    }

    /// Takes in the data a reply carries ([`ClientCore::ingest`]).
    pub(crate) fn ingest(&self, reply: Reply) {
        self.core.write().ingest(reply);
    }

    /// The connection is gone: fail everything outstanding, and everything later.
    fn fail_all(&self) {
        let mut outs = Vec::new();
        {
            let mut core = self.core.write();
            core.handle_lost();
            self.take_outputs(&mut core, &mut outs);
        }
        self.control.lock().closed = true;
        self.wake_reader.notify_all();
        self.run(&mut outs, true);
    }

    /// Answers a Get from the store if the rules of docs/PROTOCOL.md allow it
    /// ([`ClientCore::resolve_get`]), under the core's read lock; fence data still encoded
    /// is decoded first, under its write lock.
    pub(crate) fn resolve_get(
        &self,
        me: &Proc,
        proc: &Proc,
        key: Option<&str>,
        d: &GetDirectives<'_>,
    ) -> Local {
        if let Some(answer) = self.core.read().resolve_get(me, proc, key, d, false) {
            return answer;
        }
        if let Err(e) = self.core.write().unpack(proc) {
            return Local::Done(Err(Error::Protocol(format!(
                "fence data of {proc} does not decode: {e}"
            ))));
        }
        let answer = self.core.read().resolve_get(me, proc, key, d, true);
        answer.unwrap_or(Local::AskServer)
    }

    /// True when the job data of `proc`'s namespace is here.
    pub(crate) fn has_job(&self, proc: &Proc) -> bool {
        self.core.read().has_job(proc)
    }

    /// True once the connection is known to be gone.
    pub(crate) fn is_closed(&self) -> bool {
        if let Some(up) = self.upstream() {
            return up.is_closed();
        }
        self.core.read().is_closed()
    }
}

/// Runs a completion on the reader thread. A panicking user callback must not take the
/// reader down with it: every other outstanding request would then wait forever.
fn run_completion(done: Completion, result: Result<Reply, Error>) {
    if panic::catch_unwind(AssertUnwindSafe(move || done(result))).is_err() {
        tracing::error!("pmix-client: a completion callback panicked; the client carries on");
    }
}

/// The reader thread: sleeps until asked to read, then reads until nothing is outstanding.
fn reader_loop(shared: &Shared) {
    let Link::Socket { read, .. } = &shared.link else {
        return;
    };
    loop {
        {
            let mut c = shared.control.lock();
            while !(c.handoff || c.stop || c.closed || c.listen > 0) {
                shared.wake_reader.wait(&mut c);
            }
            if c.stop || c.closed {
                return;
            }
            c.handoff = false;
        }
        let mut rs = read.lock();
        let result = loop {
            if let Err(e) = shared.dispatch_buffered(&mut rs) {
                break Err(e);
            }
            {
                let idle = !shared.core.read().has_pending();
                let c = shared.control.lock();
                if (idle && c.listen == 0) || c.stop {
                    break Ok(());
                }
            }
            match fill(&mut rs) {
                Ok(true) => {}
                Ok(false) => break Err(Error::LostConnection),
                Err(e) => {
                    break Err(Error::Connect {
                        path: "server".into(),
                        source: e,
                    });
                }
            }
        };
        match result {
            Ok(()) => {
                drop(rs);
                // A blocking caller may have found the role taken just before it was given up.
                let waiting = shared.core.read().has_pending();
                let mut c = shared.control.lock();
                if waiting && !c.stop {
                    c.handoff = true;
                }
            }
            Err(e) => {
                if shared.control.lock().stop {
                    tracing::debug!("pmix-client: connection closed");
                } else {
                    tracing::warn!("pmix-client: connection to the server lost: {e}");
                }
                let _ = rs.stream.shutdown(Shutdown::Both);
                drop(rs);
                shared.fail_all();
                return;
            }
        }
    }
}

/// Reads what the socket has (blocking until something comes). `Ok(false)`: end of stream.
fn fill(rs: &mut ReadSide) -> io::Result<bool> {
    let ReadSide { stream, input, .. } = rs;
    loop {
        match input.read_from(stream) {
            Ok(0) => {
                let pending = input.buffered();
                if pending != 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!("connection closed inside a frame ({pending} bytes pending)"),
                    ));
                }
                return Ok(false);
            }
            Ok(_) => return Ok(true),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
}

/// How long a blocking caller looks for its reply before sleeping in `read`.
const SPIN: Duration = Duration::from_micros(20);

/// Reads whatever has arrived, without waiting.
struct DontWait<'a>(&'a Stream);

impl Read for DontWait<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        nix::sys::socket::recv(
            self.0.as_raw_fd(),
            buf,
            nix::sys::socket::MsgFlags::MSG_DONTWAIT,
        )
        .map_err(io::Error::from)
    }
}

/// Looks for data for up to [`SPIN`], yielding the CPU between looks. `Ok(None)`: nothing
/// came; `Ok(Some(false))`: end of stream.
fn spin_fill(rs: &mut ReadSide) -> io::Result<Option<bool>> {
    let ReadSide { stream, input, .. } = rs;
    let start = Instant::now();
    loop {
        match input.read_from(&mut DontWait(stream)) {
            Ok(0) => return Ok(Some(false)),
            Ok(_) => return Ok(Some(true)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        if start.elapsed() >= SPIN {
            return Ok(None);
        }
        thread::yield_now();
    }
}
