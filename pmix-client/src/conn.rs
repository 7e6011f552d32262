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
//! **Late connections.** A core on the local wire (a singleton, `core/local/`) has no socket
//! at first: its requests are answered as they are submitted, and from other threads (a
//! publish releasing a held lookup, a timer the core asked for). When it says a request needs
//! a server, the connector it was opened with ([`Conn::local`]) gives one, and the core then
//! gets the socket's wire and hands over what waits.
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
use std::sync::{Arc, OnceLock, Weak};
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
use crate::store::Store;

/// What a request's completion receives.
pub(crate) type Completion = Box<dyn FnOnce(Result<Reply, Error>) + Send + 'static>;

/// What the core handed out, ready to run once its lock is let go.
enum Ready {
    Complete(Completion, Result<Reply, Error>),
    Event(Event),
    Lost(Proc),
    Timer(u32, Duration),
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
pub(crate) enum Stream {
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

    pub(crate) fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
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

/// A socket to a server: how requests leave and replies come.
struct Socket {
    writer: Mutex<Writer>,
    read: Mutex<ReadSide>,
    /// What must live as long as the connection, let go when it closes (a private server's
    /// lifeline).
    keep: Mutex<Option<Box<dyn Send>>>,
}

/// A server for a core on the local wire, as its connector gives one: a Unix socket past the
/// handshake, the wire to speak there, and what must live as long as the connection.
pub(crate) struct Opened {
    pub(crate) stream: UnixStream,
    pub(crate) input: Input,
    pub(crate) wire: Wire,
    pub(crate) keep: Box<dyn Send>,
}

/// Gets a core on the local wire a server (see the module documentation).
pub(crate) type Connector = Box<dyn Fn() -> Result<Opened, Error> + Send + Sync>;

/// State shared by the callers' threads and the reader thread.
pub(crate) struct Shared {
    core: RwLock<ClientCore>,
    /// The completions of the requests the core has waiting, by id. Kept here, not in the
    /// core: a closure is `Send` but not `Sync`, and the core is read by gets in parallel.
    /// Filled under the core's lock, so that a reply always finds its completion.
    completions: Mutex<HashMap<u32, Completion>>,
    pub(crate) events: Arc<Events>,
    /// The socket, once there is one (from the start, but for a core on the local wire).
    socket: OnceLock<Socket>,
    /// How a core on the local wire gets a server.
    connector: Option<Connector>,
    /// Serialises getting a server.
    connecting: Mutex<()>,
    control: Mutex<Control>,
    /// Signalled when the reader thread has something to do.
    wake_reader: Condvar,
    reader_id: OnceLock<ThreadId>,
    reader: Mutex<Option<JoinHandle<()>>>,
    /// The thread holding the reading role, when it is a caller's.
    caller_reading: Mutex<Option<ThreadId>>,
    /// This, for the reader thread and timers started later.
    this: Weak<Shared>,
}

/// The connection as the client owns it.
pub(crate) struct Conn {
    pub(crate) shared: Arc<Shared>,
}

impl Conn {
    /// Connects, says hello, and starts the reader thread. Returns the job data of our
    /// namespace from the welcome (the native protocol) or the job data request (OpenPMIx).
    pub(crate) fn open(rv: &Rendezvous) -> Result<(Conn, JobIn), Error> {
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
        let socket = Socket::new(stream, input, None).map_err(frame_io(&path))?;
        let shared = Shared::new(ClientCore::new(wire), None);
        let _ = shared.socket.set(socket);
        shared.start_reader().map_err(frame_io(&path))?;
        Ok((Conn { shared }, job))
    }

    /// A connection with no socket yet over `core`, on the local wire: every request is
    /// answered on the caller's thread until one needs a server, which `connector` gives.
    pub(crate) fn local(core: ClientCore, connector: Connector) -> Conn {
        Conn {
            shared: Shared::new(core, Some(connector)),
        }
    }

    /// Shuts the socket down and joins the reader thread; what waits on the local wire
    /// fails. Called from the reader thread itself (a callback dropping the last handle) it
    /// only shuts down: the thread ends on its own once it sees the end of the stream.
    pub(crate) fn close(&self) {
        let shared = &self.shared;
        let mut outs = Vec::new();
        {
            let mut core = shared.core.write();
            core.handle_close();
            shared.take_outputs(&mut core, &mut outs);
        }
        shared.run(&mut outs, true);
        if let Some(s) = shared.socket.get() {
            let _ = s.writer.lock().stream.shutdown(Shutdown::Both);
        }
        shared.control.lock().stop = true;
        shared.wake_reader.notify_all();
        let handle = shared.reader.lock().take();
        if let Some(h) = handle {
            if !shared.on_reader_thread() && h.join().is_err() {
                tracing::error!("pmix-client reader thread panicked");
            }
        }
        if let Some(s) = shared.socket.get() {
            drop(s.keep.lock().take());
        }
    }
}

impl Socket {
    fn new(stream: Stream, input: Input, keep: Option<Box<dyn Send>>) -> io::Result<Socket> {
        let read_half = stream.try_clone()?;
        Ok(Socket {
            writer: Mutex::new(Writer {
                stream,
                buf: Vec::with_capacity(4096),
            }),
            read: Mutex::new(ReadSide {
                stream: read_half,
                input,
                outs: Vec::new(),
            }),
            keep: Mutex::new(keep),
        })
    }
}

impl Writer {
    /// Writes out what `buf` holds. On error the socket is shut down: the reader will see the
    /// end of the stream and fail everything outstanding.
    fn flush_buf(&mut self) -> io::Result<()> {
        let Writer { stream, buf } = self;
        let written = stream.write_all(buf);
        buf.clear();
        // Don't let one huge commit pin its buffer for the life of the process.
        if buf.capacity() > 1 << 20 {
            *buf = Vec::with_capacity(4096);
        }
        if let Err(e) = &written {
            tracing::warn!("pmix-client: writing to the server failed: {e}");
            let _ = stream.shutdown(Shutdown::Both);
        }
        written
    }
}

impl Shared {
    fn new(core: ClientCore, connector: Option<Connector>) -> Arc<Shared> {
        Arc::new_cyclic(|this| Shared {
            core: RwLock::new(core),
            completions: Mutex::new(HashMap::new()),
            events: Arc::default(),
            socket: OnceLock::new(),
            connector,
            connecting: Mutex::new(()),
            control: Mutex::new(Control {
                handoff: false,
                stop: false,
                closed: false,
                listen: 0,
            }),
            wake_reader: Condvar::new(),
            reader_id: OnceLock::new(),
            reader: Mutex::new(None),
            caller_reading: Mutex::new(None),
            this: this.clone(),
        })
    }

    /// Starts the reader thread (once there is a socket).
    fn start_reader(&self) -> io::Result<()> {
        let Some(for_reader) = self.this.upgrade() else {
            return Ok(());
        };
        let handle = thread::Builder::new()
            .name("pmix-client-reader".into())
            .spawn(move || reader_loop(&for_reader))?;
        let _ = self.reader_id.set(handle.thread().id());
        *self.reader.lock() = Some(handle);
        Ok(())
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
        let me = thread::current().id();
        self.reader_id.get() == Some(&me) || *self.caller_reading.lock() == Some(me)
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
                Ready::Timer(id, after) => self.arm_timer(id, after),
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
                Output::Timer(id, after) => Ready::Timer(id, after),
                Output::Iof(chunk) => {
                    tracing::debug!("pmix-client: ignoring output nobody pulled: {chunk:?}");
                    continue;
                }
            });
        }
    }

    /// A blocking caller's turn at reading: reads and dispatches replies on this thread until
    /// `done()` (the caller's reply has been dispatched) or `deadline`, if the reading role is
    /// free.
    pub(crate) fn read_until(&self, done: &dyn Fn() -> bool, deadline: Option<Instant>) -> Turn {
        // No socket: answers come on the caller's thread or from another one (a publish
        // releasing a held lookup, a timer): wait on the channel.
        let Some(socket) = self.socket.get() else {
            return Turn::Busy;
        };
        let Some(mut rs) = socket.read.try_lock() else {
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
        let mut outs = Vec::new();
        // Held from encoding to writing: requests leave in the order they were submitted.
        let mut writer = self.socket.get().map(|s| s.writer.lock());
        let (submitted, waiting, unsent) = {
            let mut core = self.core.write();
            match core.submit(req, whole) {
                Ok(s) => {
                    self.completions.lock().insert(s.id, done);
                    if let Some(w) = writer.as_mut() {
                        core.poll_transmit(&mut w.buf);
                    }
                    self.take_outputs(&mut core, &mut outs);
                    let unsent = writer.is_none() && core.poll_transmit(&mut Vec::new());
                    (s, core.is_waiting(s.id), unsent)
                }
                Err(e) => {
                    drop(core);
                    drop(writer);
                    done(Err(e));
                    return None;
                }
            }
        };
        let id = submitted.id;
        // The socket came between looking for it and taking the core (a server got for the
        // local wire): the bytes are written below, in order.
        let written = match (writer, unsent) {
            (Some(mut w), _) => w.flush_buf(),
            (None, true) => self.flush(),
            (None, false) => Ok(()),
        };
        if written.is_err() {
            {
                let mut core = self.core.write();
                core.fail(id, Error::LostConnection);
                self.take_outputs(&mut core, &mut outs);
            }
            self.run(&mut outs, false);
            return None;
        }
        // Answers the local wire gave at once: the caller's own, or lookups a publish released.
        self.run(&mut outs, false);
        if submitted.needs_server {
            self.connect(id);
        }
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
        waiting.then_some(id)
    }

    /// Writes what the core has to write, under the writer mutex.
    fn flush(&self) -> io::Result<()> {
        let Some(socket) = self.socket.get() else {
            return Ok(());
        };
        let mut w = socket.writer.lock();
        self.core.write().poll_transmit(&mut w.buf);
        w.flush_buf()
    }

    /// Gets the server request `id` needs (see the module documentation), once: the core
    /// then hands over what waits. If none can be had, request `id` fails, and the next one
    /// that needs a server tries again.
    fn connect(&self, id: u32) {
        let _one = self.connecting.lock();
        if self.socket.get().is_some() || !self.core.read().is_waiting(id) {
            // Handed over already, or cancelled meanwhile.
            return;
        }
        let opened = match &self.connector {
            Some(connector) => connector(),
            None => Err(Error::Protocol("no server to send to".into())),
        };
        let mut outs = Vec::new();
        let attached = opened.and_then(|o| self.attach(o, &mut outs));
        if let Err(e) = attached {
            let mut core = self.core.write();
            core.fail(id, e);
            self.take_outputs(&mut core, &mut outs);
        }
        self.run(&mut outs, true);
    }

    /// Puts a server's socket under a core on the local wire and writes what the core hands
    /// over to it.
    fn attach(&self, opened: Opened, outs: &mut Vec<Ready>) -> Result<(), Error> {
        let Opened {
            stream,
            input,
            wire,
            keep,
        } = opened;
        let socket =
            Socket::new(Stream::Unix(stream), input, Some(keep)).map_err(frame_io("server"))?;
        let _ = self.socket.set(socket);
        let Some(socket) = self.socket.get() else {
            return Err(Error::Protocol("the server's socket was lost".into()));
        };
        {
            let mut w = socket.writer.lock();
            {
                let mut core = self.core.write();
                core.handle_connected(wire)?;
                core.poll_transmit(&mut w.buf);
                self.take_outputs(&mut core, outs);
            }
            // A failed write is seen by the reader, which fails everything outstanding.
            let _ = w.flush_buf();
        }
        // What the server sends unasked comes at any time, and the requests handed over were
        // never kicked for: read all the time.
        self.listen(true);
        self.start_reader().map_err(frame_io("server"))
    }

    /// Calls [`ClientCore::handle_timeout`] for request `id` once `after` has passed, on a
    /// thread of its own: a core on the local wire has no reader thread, and timers are few
    /// (a lookup that waits with a `TIMEOUT`).
    fn arm_timer(&self, id: u32, after: Duration) {
        let this = self.this.clone();
        let deadline = Instant::now() + after;
        let spawned = thread::Builder::new()
            .name("pmix-client-timer".into())
            .spawn(move || {
                while let Some(left) = deadline.checked_duration_since(Instant::now()) {
                    thread::sleep(left);
                }
                if let Some(shared) = this.upgrade() {
                    shared.handle_timeout(id);
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("pmix-client: no timer thread for a lookup's TIMEOUT: {e}");
        }
    }

    fn handle_timeout(&self, id: u32) {
        let mut outs = Vec::new();
        {
            let mut core = self.core.write();
            core.handle_timeout(id);
            self.take_outputs(&mut core, &mut outs);
        }
        self.run(&mut outs, true);
    }

    /// Forgets a request the caller stopped waiting for; a late reply is then dropped.
    pub(crate) fn cancel(&self, id: u32) {
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
        self.core.write().resolve_get_unpacked(me, proc, key, d)
    }

    /// True when the job data of `proc`'s namespace is here.
    pub(crate) fn has_job(&self, proc: &Proc) -> bool {
        self.core.read().has_job(proc)
    }

    /// True once the connection is known to be gone.
    pub(crate) fn is_closed(&self) -> bool {
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
    let Some(Socket { read, .. }) = shared.socket.get() else {
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
