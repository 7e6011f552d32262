//! Late connections: a core on the local wire (a singleton, `core/local/`) has no socket at
//! first: its requests are answered as they are submitted, and from other threads (a publish
//! releasing a held lookup, a timer the core asked for). When it says a request needs a
//! server, the connector it was opened with ([`Conn::local`](super::Conn::local)) gives one,
//! and the core then gets the socket's wire and hands over what waits.

use std::os::unix::net::UnixStream;

use crate::Error;
use crate::core::Input;
use crate::core::wire::Wire;
use crate::handshake::frame_io;

use super::stream::Stream;
use super::{Ready, Shared, Socket};

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

impl Shared {
    /// Gets the server request `id` needs (see the module documentation), once: the core
    /// then hands over what waits. If none can be had, request `id` fails, and the next one
    /// that needs a server tries again.
    pub(super) fn connect(&self, id: u32) {
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
}
