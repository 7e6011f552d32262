//! The connection to the server: handshake, the writer (caller's thread, under a mutex), the
//! reading of replies, and the failure path that completes every outstanding request when the
//! connection dies.
//!
//! **Wire personality.** The rest of the client speaks native [`Request`]s and [`Reply`]s
//! only. How they travel is the connection's [`Wire`], fixed at [`Conn::open`]: the native
//! protocol (MessagePack frames over a Unix socket to a pmix-rs server, `docs/PROTOCOL.md`),
//! or OpenPMIx 4.2 over loopback TCP to a libpmix-based server, where [`openpmix::Session`]
//! translates each request into its OpenPMIx message and each answer back
//! (`docs/OPENPMIX.md`, "The client side"). The two differ in three places only: the handshake,
//! how a request is written ([`Shared::send`]), and how what is read is cut up and dispatched
//! ([`Input`], `dispatch_buffered`); reading roles, waiting and failure are shared.
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

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, OnceLock};
use std::thread::{self, JoinHandle, ThreadId};
use std::time::{Duration, Instant};

use bytes::Bytes;
use hashbrown::HashMap;
use parking_lot::{Condvar, Mutex, RwLock};
use pmix_types::{Proc, Status};
use pmix_wire::openpmix::{Incoming, MsgReader};
use pmix_wire::{
    ClientMsg, Decoded, FenceReplyRef, FrameDecoder, FrameReader, Hello, JobData, JobImage, MAGIC,
    PROTOCOL_VERSION, Reply, ReplyBody, Request, ServerMsg, Welcome, WelcomeJob, decode_body,
    encode_frame, peek_fence_reply,
};

use crate::Error;
use crate::env::{Rendezvous, Server};
use crate::event_registry::Events;
use crate::openpmix::{self, Sent, Session};
use crate::singleton::Singleton;
use crate::store::Store;

/// What a request's completion receives.
pub(crate) type Completion = Box<dyn FnOnce(Result<Reply, Error>) + Send + 'static>;

/// How long the handshake may take: a server that accepted the socket but never answers must
/// not hang init forever.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);

/// Bytes read from the socket at a time.
const READ_CHUNK: usize = 64 << 10;

/// An outstanding request.
struct Waiter {
    done: Completion,
    /// The caller wants a collecting fence's data in the reply as sent ([`Shared::submit_whole`]),
    /// not only taken into the store.
    whole: bool,
}

struct Pending {
    next_id: u32,
    waiting: HashMap<u32, Waiter>,
    /// Set once the connection is gone; later requests fail at once with it.
    closed: bool,
    /// The reader thread is asked to take the reading role.
    handoff: bool,
    /// The client is closing: the reader thread ends.
    stop: bool,
    /// Event handlers are registered: the reader thread reads all the time, so that events
    /// are delivered when they come rather than at the next reply.
    listen: u32,
}

/// The protocol of a connection (see the module documentation).
enum Wire {
    /// pmix-rs's own: a request is a [`ClientMsg`] frame, answered by a [`ServerMsg`].
    Native,
    /// OpenPMIx 4.2: requests and answers translated by the session.
    Openpmix(Session),
    /// No server: a singleton answers its own requests in the process, or passes them on to
    /// the private server it started (`singleton/`). Nothing is read or written here.
    Singleton(Singleton),
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

/// What was read but not yet dispatched, cut up by the connection's protocol.
enum Input {
    /// Native frames.
    Native(FrameReader),
    /// OpenPMIx messages; `chunk` is what each read fills before it is fed to the reader.
    Openpmix { reader: MsgReader, chunk: Box<[u8]> },
}

impl Input {
    /// Reads once from `src` (see [`FrameReader::read_from`]).
    fn read_from(&mut self, src: &mut impl Read) -> io::Result<usize> {
        match self {
            Input::Native(r) => r.read_from(src),
            Input::Openpmix { reader, chunk } => {
                let n = src.read(chunk)?;
                reader.feed(chunk.get(..n).unwrap_or_default());
                Ok(n)
            }
        }
    }

    /// Bytes read and not yet handed out.
    fn buffered(&self) -> usize {
        match self {
            Input::Native(r) => r.buffered(),
            Input::Openpmix { reader, .. } => reader.buffered(),
        }
    }
}

/// The reading side of the socket and what was read but not yet dispatched.
struct ReadSide {
    stream: Stream,
    input: Input,
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

/// State shared by the callers' threads and the reader thread.
pub(crate) struct Shared {
    wire: Wire,
    pub(crate) store: RwLock<Store>,
    /// Shared with a singleton's connection to its private server, whose events reach the
    /// same handlers.
    pub(crate) events: Arc<Events>,
    pending: Mutex<Pending>,
    /// Signalled when the reader thread has something to do.
    wake_reader: Condvar,
    writer: Mutex<Writer>,
    read: Mutex<ReadSide>,
    reader_id: OnceLock<ThreadId>,
    /// The thread holding the reading role, when it is a caller's.
    caller_reading: Mutex<Option<ThreadId>>,
    /// The members of the groups this process constructed, by group id: a destruct names
    /// them (an OpenPMIx server wants them).
    pub(crate) groups: Mutex<HashMap<String, Vec<pmix_types::Proc>>>,
}

/// The connection as the client owns it: the shared state plus the reader thread's handle.
pub(crate) struct Conn {
    pub(crate) shared: Arc<Shared>,
    reader: Mutex<Option<JoinHandle<()>>>,
}

fn frame_io(path: &str) -> impl Fn(io::Error) -> Error + '_ {
    move |source| Error::Connect {
        path: path.to_owned(),
        source,
    }
}

/// Reads one whole frame body during the handshake, keeping whatever followed it.
fn read_frame(
    mut read: impl FnMut(&mut [u8]) -> io::Result<usize>,
    buf: &mut Vec<u8>,
    dec: &FrameDecoder,
    path: &str,
) -> Result<Vec<u8>, Error> {
    loop {
        if let Decoded::Frame { body, consumed } = dec.decode(buf)? {
            let body = body.to_vec();
            buf.drain(..consumed);
            return Ok(body);
        }
        let start = buf.len();
        buf.resize(start + READ_CHUNK, 0);
        let n = match read(&mut buf[start..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                buf.truncate(start);
                continue;
            }
            Err(e) => {
                buf.truncate(start);
                return Err(frame_io(path)(e));
            }
        };
        buf.truncate(start + n);
        if n == 0 {
            return Err(Error::Connect {
                path: path.to_owned(),
                source: io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "server closed the connection during the handshake",
                ),
            });
        }
    }
}

/// Where the welcome left the namespace's job data.
pub(crate) enum JobIn {
    /// Its image, inline or mapped.
    Image(JobImage),
    /// Job data in full (the OpenPMIx wire, a singleton).
    Data(JobData),
    /// The image file could not be mapped (why): ask the server for the image.
    Fetch(String),
}

/// The native handshake: hello, welcome. Returns the socket, what followed the welcome, and
/// the job data.
fn native_handshake(
    rv: &Rendezvous,
    socket: &std::path::Path,
    secret: &[u8; 16],
) -> Result<(UnixStream, Input, JobIn), Error> {
    let path = socket.display().to_string();
    let mut stream = UnixStream::connect(socket).map_err(frame_io(&path))?;
    stream
        .set_read_timeout(Some(HANDSHAKE_TIMEOUT))
        .map_err(frame_io(&path))?;

    let hello = Hello {
        magic: MAGIC.to_owned(),
        version: PROTOCOL_VERSION,
        nspace: rv.proc.nspace.clone(),
        rank: rv.proc.rank,
        secret: secret.to_vec(),
        pid: std::process::id(),
    };
    let mut out = Vec::with_capacity(256);
    encode_frame(&hello, &mut out)?;
    stream.write_all(&out).map_err(frame_io(&path))?;

    let dec = FrameDecoder::default();
    let mut inbuf = Vec::new();
    let mut fd = None;
    let body = read_frame(
        |buf| crate::job_file::recv_with_fd(&stream, buf, &mut fd),
        &mut inbuf,
        &dec,
        &path,
    )?;
    let welcome: Welcome = decode_body(&body)?;
    let job = match welcome {
        Welcome::Refused {
            status,
            version,
            reason,
        } => {
            if status == Status::ERR_NOT_SUPPORTED && version != PROTOCOL_VERSION {
                return Err(Error::VersionMismatch {
                    server: version,
                    client: PROTOCOL_VERSION,
                });
            }
            return Err(Error::Refused { status, reason });
        }
        Welcome::Accepted { version, job } => {
            if version != PROTOCOL_VERSION {
                return Err(Error::VersionMismatch {
                    server: version,
                    client: PROTOCOL_VERSION,
                });
            }
            job
        }
    };
    let job = match job {
        WelcomeJob::Inline(image) => JobIn::Image(image),
        WelcomeJob::Shared { len } => match fd {
            None => JobIn::Fetch("the welcome came without the job image file".into()),
            Some(fd) => match crate::job_file::map(fd, len) {
                Err(e) => JobIn::Fetch(format!("cannot map the job image file: {e}")),
                Ok(bytes) => JobIn::Image(JobImage::parse(bytes)?),
            },
        },
    };
    if let JobIn::Image(image) = &job {
        if *image.nspace() != rv.proc.nspace {
            return Err(Error::Protocol(format!(
                "welcome carries the job data of {:?}, not of our namespace {:?}",
                image.nspace(),
                rv.proc.nspace
            )));
        }
    }
    stream.set_read_timeout(None).map_err(frame_io(&path))?;

    let mut reader = FrameReader::new(dec);
    // Whatever followed the welcome in the same read.
    reader.extend(&inbuf);
    Ok((stream, Input::Native(reader), job))
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
                let input = Input::Openpmix {
                    reader: c.reader,
                    chunk: vec![0; READ_CHUNK].into_boxed_slice(),
                };
                let path = srv.uri.clone();
                (
                    Stream::Tcp(c.stream),
                    Wire::Openpmix(c.session),
                    input,
                    JobIn::Data(c.job),
                    path,
                )
            }
        };
        let read_half = stream.try_clone().map_err(frame_io(&path))?;
        let shared = Shared::new(wire, events, stream, read_half, input);
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
    /// No reader thread: everything is answered on the caller's thread, or by the private
    /// server's connection once a spawn started one.
    pub(crate) fn singleton(me: Proc) -> Result<(Conn, JobIn), Error> {
        let single = Singleton::new(me);
        let job = JobIn::Data(single.job());
        // Stands for the socket the other wires have; nothing reads or writes it.
        let (stream, read_half) = UnixStream::pair().map_err(frame_io("singleton"))?;
        let input = Input::Native(FrameReader::new(FrameDecoder::default()));
        let shared = Shared::new(
            Wire::Singleton(single),
            Arc::default(),
            Stream::Unix(stream),
            Stream::Unix(read_half),
            input,
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
        if let Wire::Singleton(s) = &self.shared.wire {
            s.close();
        }
        let _ = self.shared.writer.lock().stream.shutdown(Shutdown::Both);
        self.shared.pending.lock().stop = true;
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
    fn new(
        wire: Wire,
        events: Arc<Events>,
        stream: Stream,
        read_half: Stream,
        input: Input,
    ) -> Arc<Shared> {
        Arc::new(Shared {
            wire,
            store: RwLock::new(Store::default()),
            events,
            pending: Mutex::new(Pending {
                next_id: 0,
                waiting: HashMap::new(),
                closed: false,
                handoff: false,
                stop: false,
                listen: 0,
            }),
            wake_reader: Condvar::new(),
            writer: Mutex::new(Writer {
                stream,
                buf: Vec::with_capacity(4096),
            }),
            read: Mutex::new(ReadSide {
                stream: read_half,
                input,
            }),
            reader_id: OnceLock::new(),
            caller_reading: Mutex::new(None),
            groups: Mutex::default(),
        })
    }
}

impl Shared {
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
        match &self.wire {
            Wire::Singleton(s) => s.upstream().map(|c| &*c.shared),
            _ => None,
        }
    }

    /// Starts (`true`) or ends (`false`) one reason to read all the time (an event handler).
    pub(crate) fn listen(&self, on: bool) {
        let mut p = self.pending.lock();
        if on {
            p.listen += 1;
            p.handoff = true;
            drop(p);
            self.wake_reader.notify_one();
        } else {
            p.listen = p.listen.saturating_sub(1);
        }
    }

    /// Asks the reader thread to read: a non-blocking request was sent, and nobody may be
    /// reading for it.
    pub(crate) fn kick(&self) {
        if let Some(up) = self.upstream() {
            return up.kick();
        }
        self.pending.lock().handoff = true;
        self.wake_reader.notify_one();
    }

    /// A blocking caller's turn at reading: reads and dispatches replies on this thread until
    /// `done()` (the caller's reply has been dispatched) or `deadline`, if the reading role is
    /// free.
    pub(crate) fn read_until(&self, done: &dyn Fn() -> bool, deadline: Option<Instant>) -> Turn {
        if let Wire::Singleton(s) = &self.wire {
            // Answers come on the caller's thread, from another thread (a publish releasing a
            // held lookup, a timer) or from the private server's reader: wait on the channel.
            return match s.upstream() {
                Some(up) => up.shared.read_until(done, deadline),
                None => Turn::Busy,
            };
        }
        let Some(mut rs) = self.read.try_lock() else {
            return Turn::Busy;
        };
        *self.caller_reading.lock() = Some(thread::current().id());
        let turn = loop {
            match dispatch_buffered(self, &mut rs) {
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
                if !self.pending.lock().waiting.is_empty() {
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
        if let Wire::Singleton(s) = &self.wire {
            if self.pending.lock().stop {
                done(Err(Error::LostConnection));
                return None;
            }
            return s.submit(&self.events, req, done);
        }
        let id = {
            let mut p = self.pending.lock();
            if p.closed {
                drop(p);
                done(Err(Error::LostConnection));
                return None;
            }
            // Ids wrap; skip any still outstanding (the protocol forbids reusing them).
            let mut id = p.next_id;
            while p.waiting.contains_key(&id) {
                id = id.wrapping_add(1);
            }
            p.next_id = id.wrapping_add(1);
            p.waiting.insert(id, Waiter { done, whole });
            id
        };
        match self.send(id, req) {
            Ok(None) => Some(id),
            // Complete once sent: nothing will answer it.
            Ok(Some(reply)) => {
                self.complete(id, reply);
                None
            }
            Err(e) => {
                // Taken out before calling: the completion may submit again.
                let waiter = self.pending.lock().waiting.remove(&id);
                if let Some(w) = waiter {
                    (w.done)(Err(e));
                }
                None
            }
        }
    }

    /// Writes request `id` as the connection's protocol has it. `Ok(Some(reply))` for a request
    /// nothing will answer: that is its reply.
    fn send(&self, id: u32, req: Request) -> Result<Option<Reply>, Error> {
        let mut w = self.writer.lock();
        let Writer { stream, buf } = &mut *w;
        buf.clear();
        let done = match &self.wire {
            Wire::Native => {
                encode_frame(&ClientMsg { id, req }, buf)?;
                None
            }
            Wire::Openpmix(session) => match session.encode(id, req, buf)? {
                Sent::AwaitReply => None,
                Sent::Done(reply) => Some(reply),
            },
            Wire::Singleton(_) => {
                return Err(Error::Protocol("a singleton sends nothing".into()));
            }
        };
        if let Err(e) = stream.write_all(buf) {
            tracing::warn!("pmix-client: writing to the server failed: {e}");
            // The reader will see the end of the stream and fail everything outstanding.
            let _ = stream.shutdown(Shutdown::Both);
            return Err(Error::LostConnection);
        }
        // Don't let one huge commit pin its buffer for the life of the process.
        if buf.capacity() > 1 << 20 {
            *buf = Vec::with_capacity(4096);
        }
        Ok(done)
    }

    /// Forgets a request the caller stopped waiting for; a late reply is then dropped.
    pub(crate) fn cancel(&self, id: u32) {
        if let Wire::Singleton(s) = &self.wire {
            return s.cancel(id);
        }
        // Dropped outside the lock: the closure may own the last handle of the client.
        let waiter = self.pending.lock().waiting.remove(&id);
        drop(waiter);
    }

    /// Takes in the data a reply carries (fence collection, a Get's process data and job
    /// data, a connect's), so the next Get of it is local. Failure replies count too: the
    /// server ships a namespace's job data once, possibly with a not-found. Consumes the
    /// payload: the callers that need it afterwards clone first.
    pub(crate) fn ingest(&self, reply: Reply) {
        match reply.body {
            ReplyBody::Fence { data } if !data.is_empty() => {
                self.store.write().insert_proc_kvs(data);
            }
            ReplyBody::Get { data, jobs } => {
                if data.is_empty() && jobs.is_empty() {
                    return;
                }
                let mut st = self.store.write();
                for image in jobs {
                    st.insert_image(image);
                }
                st.insert_proc_kvs(data);
            }
            ReplyBody::Connect { jobs, data } => {
                if data.is_empty() && jobs.is_empty() {
                    return;
                }
                let mut st = self.store.write();
                for job in jobs {
                    st.insert_job(job);
                }
                st.insert_proc_kvs(data);
            }
            _ => {}
        }
    }

    /// Takes in a collecting fence's data still encoded (docs/ARCHITECTURE.md, `pmix-client`),
    /// then completes the fence with a reply that no longer carries it. A caller that wants the
    /// reply as sent has it decoded whole instead: `false` then, and nothing is done here.
    ///
    /// The data is taken even if nobody waits any more (a fence given up on): the server
    /// counts it as delivered and will not send it again.
    ///
    /// `owner`, when given, holds the frame `f` was found in: the data is kept as a slice of
    /// it rather than copied.
    fn complete_fence(&self, f: &FenceReplyRef<'_>, owner: Option<&Bytes>) -> Result<bool, Error> {
        if self
            .pending
            .lock()
            .waiting
            .get(&f.id)
            .is_some_and(|w| w.whole)
        {
            return Ok(false);
        }
        if !f.procs.is_empty() {
            self.store
                .write()
                .insert_fence(f, owner)
                .map_err(|e| Error::Protocol(format!("fence reply: {e}")))?;
        }
        self.complete(
            f.id,
            Reply {
                status: f.status,
                body: ReplyBody::Fence { data: Vec::new() },
            },
        );
        Ok(true)
    }

    fn complete(&self, id: u32, reply: Reply) {
        let waiter = self.pending.lock().waiting.remove(&id);
        match waiter {
            Some(w) => run_completion(w.done, Ok(reply)),
            None => tracing::debug!("pmix-client: reply to unknown or cancelled request {id}"),
        }
    }

    /// Fails one request whose answer could not be read.
    fn fail(&self, id: u32, e: Error) {
        tracing::warn!("pmix-client: {e}");
        let waiter = self.pending.lock().waiting.remove(&id);
        if let Some(w) = waiter {
            run_completion(w.done, Err(e));
        }
    }

    /// The connection is gone: fail everything outstanding, and everything later.
    fn fail_all(&self) {
        let (waiting, lost): (Vec<Completion>, bool) = {
            let mut p = self.pending.lock();
            // Lost, rather than closed by this side, and noticed for the first time.
            let lost = !p.closed && !p.stop;
            p.closed = true;
            (p.waiting.drain().map(|(_, w)| w.done).collect(), lost)
        };
        self.wake_reader.notify_all();
        for done in waiting {
            run_completion(done, Err(Error::LostConnection));
        }
        if lost {
            let me = self.store.read().me().cloned();
            if let Some(me) = me {
                self.events.connection_lost(me);
            }
        }
    }

    /// True when the job data of `proc`'s namespace is here.
    pub(crate) fn has_job(&self, proc: &pmix_types::Proc) -> bool {
        self.store.read().has_job(proc.nspace.as_str())
    }

    /// True once the connection is known to be gone.
    pub(crate) fn is_closed(&self) -> bool {
        if let Some(up) = self.upstream() {
            return up.is_closed();
        }
        self.pending.lock().closed
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
    loop {
        {
            let mut p = shared.pending.lock();
            while !(p.handoff || p.stop || p.closed || p.listen > 0) {
                shared.wake_reader.wait(&mut p);
            }
            if p.stop || p.closed {
                return;
            }
            p.handoff = false;
        }
        let mut rs = shared.read.lock();
        let result = loop {
            if let Err(e) = dispatch_buffered(shared, &mut rs) {
                break Err(e);
            }
            {
                let p = shared.pending.lock();
                if (p.waiting.is_empty() && p.listen == 0) || p.stop {
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
                let p = shared.pending.lock();
                if !p.waiting.is_empty() && !p.stop {
                    drop(p);
                    shared.pending.lock().handoff = true;
                }
            }
            Err(e) => {
                if shared.pending.lock().stop {
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

/// Dispatches every whole frame (or message) already buffered.
fn dispatch_buffered(shared: &Shared, rs: &mut ReadSide) -> Result<(), Error> {
    match (&mut rs.input, &shared.wire) {
        (Input::Native(reader), Wire::Native) => dispatch_native(shared, reader),
        (Input::Openpmix { reader, .. }, Wire::Openpmix(session)) => {
            dispatch_openpmix(shared, session, reader)
        }
        (_, Wire::Singleton(_)) => Ok(()),
        _ => Err(Error::Protocol(
            "the reader and the writer speak different protocols".into(),
        )),
    }
}

/// Dispatches every OpenPMIx message already buffered: answers complete their requests (one
/// that does not decode fails its request alone; the framing is intact), events go to the
/// handlers.
fn dispatch_openpmix(
    shared: &Shared,
    session: &Session,
    reader: &mut MsgReader,
) -> Result<(), Error> {
    while let Some(m) = reader.next_message()? {
        let Incoming::Message { header, payload } = m else {
            return Err(Error::Protocol(
                "a handshake message from the server".into(),
            ));
        };
        if let Some((id, reply)) = session.take(header.tag, payload, |ev| {
            shared.events.deliver(ev);
        }) {
            match reply {
                Ok(reply) => shared.complete(id, reply),
                Err(e) => shared.fail(id, e),
            }
        }
    }
    Ok(())
}

/// Frames at least this large are taken from the reader whole, without a copy (a collecting
/// fence's data is then kept in the very buffer it was read into).
const LARGE_FRAME: usize = 1 << 20;

/// Dispatches every whole native frame already buffered.
fn dispatch_native(shared: &Shared, reader: &mut FrameReader) -> Result<(), Error> {
    loop {
        if let Some((buf, body)) = reader.take_large_frame(LARGE_FRAME)? {
            let frame = Bytes::from(buf);
            dispatch_frame(shared, &frame[body], Some(&frame))?;
            continue;
        }
        let Some(body) = reader.next_frame()? else {
            return Ok(());
        };
        dispatch_frame(shared, body, None)?;
    }
}

/// Dispatches one native frame's `body`; `owner`, when given, holds it.
fn dispatch_frame(shared: &Shared, body: &[u8], owner: Option<&Bytes>) -> Result<(), Error> {
    if let Some(f) = peek_fence_reply(body) {
        if shared.complete_fence(&f, owner)? {
            return Ok(());
        }
    }
    let msg: ServerMsg = decode_body(body)?;
    match msg {
        ServerMsg::Reply { id, reply } => shared.complete(id, reply),
        ServerMsg::Event(ev) => shared.events.deliver(ev),
        other => tracing::debug!("pmix-client: ignoring unknown server message {other:?}"),
    }
    Ok(())
}

/// Reads what the socket has (blocking until something comes). `Ok(false)`: end of stream.
fn fill(rs: &mut ReadSide) -> io::Result<bool> {
    let ReadSide { stream, input } = rs;
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
    let ReadSide { stream, input } = rs;
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
