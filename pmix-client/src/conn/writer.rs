//! Requests out: a request is submitted to the core, encoded and written under the writer
//! mutex on the caller's thread, so requests leave in the order they were submitted; what
//! the local wire answers at once, or what completes once written, is run before returning.

use std::io::{self, Write};
use std::net::Shutdown;

use pmix_wire::Request;

use crate::Error;

use super::stream::Stream;
use super::{Completion, Shared};

pub(super) struct Writer {
    pub(super) stream: Stream,
    pub(super) buf: Vec<u8>,
}

impl Writer {
    /// Writes out what `buf` holds. On error the socket is shut down: the reader will see the
    /// end of the stream and fail everything outstanding.
    pub(super) fn flush_buf(&mut self) -> io::Result<()> {
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
    /// Sends a request; `done` runs once with the reply (on the reader thread) or with the
    /// error that prevented one (on this thread, if the request never left). Returns the id
    /// under which it waits, for [`Shared::cancel`].
    pub(crate) fn submit(&self, req: Request, done: Completion) -> Option<u32> {
        self.submit_as(req, done, false)
    }

    /// [`Shared::submit`] for a caller that hands the reply on as sent
    /// ([`crate::Client::request`]): a collecting fence's data is then decoded into the reply
    /// (and taken into the store by the caller), rather than only taken into the store, still
    /// encoded.
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
}
