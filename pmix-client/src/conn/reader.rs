//! Who reads. Reading the socket is a role, held by whoever holds the `read` mutex. A
//! blocking call takes it if it is free and reads on its own thread until its reply has come
//! (dispatching any other reply it meets): a blocking round trip then costs no thread hand-off
//! in the client. The reader thread takes the role only when asked: after a non-blocking
//! request ([`Shared::kick`]), or when a blocking caller gives the role up while other requests
//! are outstanding; it reads until nothing is outstanding, then sleeps again. A blocking call
//! that finds the role taken waits for its reply on its channel, as a non-blocking one would.
//! Before sleeping in `read`, a blocking caller looks for its reply for up to 20 µs
//! (non-blocking reads, yielding the CPU between them): on a shared CPU the server runs
//! meanwhile, and on another CPU the reply is often there before a sleep and wake-up would end.

use std::io::{self, Read};
use std::net::Shutdown;
use std::os::fd::AsRawFd;
use std::thread;
use std::time::{Duration, Instant};

use crate::Error;
use crate::core::Input;

use super::stream::Stream;
use super::{Ready, Shared, Socket};

/// Who reads, and why: the reader thread's orders.
pub(super) struct Control {
    /// The reader thread is asked to take the reading role.
    pub(super) handoff: bool,
    /// The client is closing: the reader thread ends.
    pub(super) stop: bool,
    /// The connection is gone.
    pub(super) closed: bool,
    /// Event handlers are registered: the reader thread reads all the time, so that events
    /// are delivered when they come rather than at the next reply.
    pub(super) listen: u32,
}

/// The reading side of the socket, what was read but not yet given to the core, and the
/// core's outputs on their way to being run.
pub(super) struct ReadSide {
    pub(super) stream: Stream,
    pub(super) input: Input,
    pub(super) outs: Vec<Ready>,
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

impl Shared {
    /// Starts the reader thread (once there is a socket).
    pub(super) fn start_reader(&self) -> io::Result<()> {
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
