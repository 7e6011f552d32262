//! The connection to the server: the I/O around the client's sans-IO core (`core/`). The
//! socket (`stream.rs`), the handshake (`handshake.rs`, `openpmix/`), the writer (caller's
//! thread, under a mutex: `writer.rs`), the reading role and the reader thread (`reader.rs`),
//! a server got late for a core on the local wire (`upstream.rs`); what is read goes to the
//! [`ClientCore`] message by message, what it gives is written, and the completions and events
//! it hands out are run here, once its lock is let go.
//!
//! **Wire personality.** The rest of the client speaks native
//! [`Request`](pmix_wire::Request)s and [`Reply`]s only. How they travel is the core's wire
//! (`core/wire.rs`), fixed at [`Conn::open`]: the native protocol (MessagePack frames over a
//! Unix socket to a pmix-rs server, `docs/PROTOCOL.md`), or OpenPMIx 4.2 over loopback TCP to
//! a libpmix-based server, whose session translates each request into its OpenPMIx message
//! and each answer back (`docs/OPENPMIX.md`, "The client side"). Here they differ in the
//! handshake only.
//!
//! **Locks.** The core is under a read-write lock: gets read the store under its read side,
//! in parallel; requests, replies and events take its write side for as long as the core
//! needs, never across a read or a write of the socket.

mod reader;
mod stream;
mod upstream;
mod writer;

use std::io;
use std::net::Shutdown;
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
use pmix_wire::{Event, Reply};

use crate::Error;
use crate::core::get::{GetDirectives, Local};
use crate::core::wire::Wire;
use crate::core::{ClientCore, Input, Output};
use crate::env::{Rendezvous, Server};
use crate::event_registry::Events;
use crate::handshake::{JobIn, frame_io, native_handshake};
use crate::openpmix;
use crate::store::Store;

pub(crate) use reader::Turn;
use reader::{Control, ReadSide};
pub(crate) use stream::Stream;
pub(crate) use upstream::{Connector, Opened};
use writer::Writer;

/// What a request's completion receives.
pub(crate) type Completion = Box<dyn FnOnce(Result<Reply, Error>) + Send + 'static>;

/// What the core handed out, ready to run once its lock is let go.
enum Ready {
    Complete(Completion, Result<Reply, Error>),
    Event(Event),
    Lost(Proc),
    Timer(u32, Duration),
}

/// A socket to a server: how requests leave and replies come.
struct Socket {
    writer: Mutex<Writer>,
    read: Mutex<ReadSide>,
    /// What must live as long as the connection, let go when it closes (a private server's
    /// lifeline).
    keep: Mutex<Option<Box<dyn Send>>>,
}

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
