//! The one tool entry point of a multi-node run: a PMIx server at the root, as PRRTE's
//! `prterun` serves tools for its whole DVM (docs/TOOLS.md, "Multi-node runs").
//!
//! It hosts no process. Its host is the one a one-node run's server has ([`RunHost`]), so a
//! tool's queries and job control reach the root's supervisor, which knows every process of
//! every node (pids and programs come with the daemons' reports of a launch) and acts on them
//! through the tree. Every job of the run is registered on it (with no local process), so that
//! the server itself answers the namespaces and job-level keys. Tools find it by pmixrun's
//! pid, by its namespace or by its URI, as on one node: `Server::init` writes the rendezvous
//! files, and finalizing it (or dropping it, on any way out of the run) removes them. The
//! daemons' servers keep tool support off.

use std::sync::Arc;

use crossbeam_channel::Sender;
use pmix_server::types::{Info, Nspace};
use pmix_server::{NameServerClient, Server};

use crate::host::Event;

/// The root's tool-serving server.
pub(crate) struct RootTools {
    server: Arc<Server>,
}

impl RootTools {
    /// Starts the server, its host reporting to `events` (the root's supervisor) and serving
    /// names through the run's name server.
    pub(crate) fn start(
        events: &Sender<Event>,
        names: &Arc<NameServerClient>,
    ) -> Result<RootTools, String> {
        let server = crate::start_server(events, Some(names))?;
        tracing::debug!(nspace = %server.proc().nspace, "serving tools at the root");
        Ok(RootTools {
            server: Arc::new(server),
        })
    }

    /// Makes `nspace` (its job-level `info`, as the daemons register it) known to tools. A
    /// failure costs tools their view of it, not the run.
    pub(crate) fn job_launched(&self, nspace: &Nspace, info: &[Info]) {
        if let Err(e) = self.server.register_nspace(nspace, 0, info) {
            tracing::warn!(%nspace, "tools will not see the job: {e}");
        }
    }

    /// Forgets a job that ended, as the server of a one-node run does.
    pub(crate) fn job_ended(&self, nspace: &Nspace) {
        self.server.deregister_nspace(nspace);
    }

    /// Stops serving tools and removes the rendezvous files.
    pub(crate) fn finalize(&self) {
        if let Err(e) = self.server.finalize() {
            tracing::warn!("finalizing the root's tool server: {e}");
        }
    }
}
