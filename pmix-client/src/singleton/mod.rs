//! A singleton: a process started with no PMIx server in its environment, which is then a
//! job of its own, as under OpenPMIx and MPICH (see `docs/ARCHITECTURE.md`, `pmix-client`).
//!
//! Its requests are answered by the core's local wire (`core/local/`); here is what that
//! needs from the outside: the job data it starts with (`job.rs`), the stdout and stderr its
//! `PMIx_Log` writes to, and, when a spawn needs a server, the private server it starts
//! (pmixrun adopting this process as rank 0 of its job, `private_server.rs`) and connects to
//! as an ordinary client.

mod job;
mod private_server;

use std::io::Write;

use pmix_types::Proc;

use crate::Error;
use crate::conn::{Conn, Opened};
use crate::core::ClientCore;
use crate::core::local::{Channel, Responder};
use crate::core::wire::Wire;
use crate::env::Server;
use crate::handshake::{JobIn, native_handshake};

pub(crate) use job::{hostname, job_data, nspace};

use private_server::PrivateServer;

/// The connection of singleton `me`, with no server, and its job data. No socket and no
/// reader thread until a spawn starts the private server.
pub(crate) fn open(me: Proc) -> (Conn, JobIn) {
    let job = JobIn::Data(job_data(&me.nspace, &hostname()));
    let responder = Responder::new(me.clone(), Box::new(console));
    let core = ClientCore::new(Wire::Local(Box::new(responder)));
    let conn = Conn::local(core, Box::new(move || start_server(&me)));
    (conn, job)
}

/// Writes a `PMIx_Log` line where it goes.
fn console(channel: Channel, line: &str) -> bool {
    let written = match channel {
        Channel::Stdout => std::io::stdout().write_all(line.as_bytes()),
        Channel::Stderr => std::io::stderr().write_all(line.as_bytes()),
    };
    written.is_ok()
}

/// Starts the private server and connects to it as `me` (the connection's lifeline to it
/// kept with the connection: it ends once the processes it started have, after the singleton
/// let go).
fn start_server(me: &Proc) -> Result<Opened, Error> {
    let (server, rv) = PrivateServer::start(me)?;
    let Server::Native { socket, secret } = &rv.server else {
        return Err(Error::PrivateServer(
            "pmixrun named an OpenPMIx server".into(),
        ));
    };
    // The job data of the welcome is the singleton's own, which it has.
    let (stream, input, _job) = native_handshake(&rv, socket, secret)?;
    Ok(Opened {
        stream,
        input,
        wire: Wire::Native,
        keep: Box::new(server),
    })
}
