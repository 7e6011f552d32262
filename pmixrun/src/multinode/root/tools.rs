//! The one tool entry point of a multi-node run: a PMIx server at the root, as PRRTE's
//! `prterun` serves tools for its whole DVM (docs/TOOLS.md, "Multi-node runs").
//!
//! It hosts no process. Its host is the one a one-node run's server has ([`RunHost`]), so a
//! tool's queries and job control reach the root's supervisor, which knows every process of
//! every node (pids and programs come with the daemons' reports of a launch) and acts on them
//! through the tree, and the events a tool raises for a range beyond the server go to every
//! daemon. Every job of the run is registered on it (with no local process), so that
//! the server itself answers the namespaces and job-level keys. Tools find it by pmixrun's
//! pid, by its namespace or by its URI, as on one node: `Server::init` writes the rendezvous
//! files, and finalizing it (or dropping it, on any way out of the run) removes them. The
//! daemons' servers keep tool support off.
//!
//! Debuggers attach here too: the daemons' servers hold their processes in init, and each
//! process's `READY_FOR_DEBUG` (and any `DEBUGGER_RELEASE` raised on a node) reaches this
//! server through [`RootTools::event_elsewhere`], which then holds the job for its tools as a
//! one-node server does its own processes (`pmix-server`'s `engine/debug.rs`); a debugger's
//! release goes to every daemon as any tool's event.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crossbeam_channel::Sender;
use pmix_server::types::{DataRange, Info, Nspace, Proc, Status};
use pmix_server::{NameServerClient, Server};
use pmix_tree::{Dest, Tree};

use crate::multinode::msg::{Msg, encode};
use crate::node::host::{Event, RunHost};

/// The root's tool-serving server.
pub(crate) struct RootTools {
    server: Arc<Server>,
    /// The jobs registered and not ended, and those whose end waits for the run's output
    /// ([`RootTools::job_ended`]).
    jobs: Mutex<Jobs>,
}

#[derive(Default)]
struct Jobs {
    running: HashSet<Nspace>,
    ended: Vec<Nspace>,
}

impl RootTools {
    /// Starts the server, its host reporting to `events` (the root's supervisor), serving
    /// names through the run's name server, and passing the events tools raise for a range
    /// beyond it to every daemon over `tree` (once it is up), whose servers deliver them
    /// within their range, as a daemon passes on its processes' events.
    pub(crate) fn start(
        events: &Sender<Event>,
        names: &Arc<NameServerClient>,
        tree: Arc<OnceLock<Arc<Tree>>>,
        system: bool,
    ) -> Result<RootTools, String> {
        let host = RunHost::new(events.clone(), Some(names.clone())).with_beyond(Box::new(
            move |code, source, range, info| {
                let msg = Msg::Event {
                    code,
                    source: source.clone(),
                    range,
                    info: info.to_vec(),
                };
                if let Some(tree) = tree.get() {
                    tree.send(Dest::All, encode(&msg));
                }
            },
        ));
        let server = crate::setup::start_server_with(host, true, system)?;
        tracing::debug!(nspace = %server.proc().nspace, "serving tools at the root");
        Ok(RootTools {
            server: Arc::new(server),
            jobs: Mutex::default(),
        })
    }

    /// Makes `nspace` (its job-level `info`, as the daemons register it) known to tools. A
    /// failure costs tools their view of it, not the run.
    pub(crate) fn job_launched(&self, nspace: &Nspace, info: &[Info]) {
        if let Err(e) = self.server.register_nspace(nspace, 0, info) {
            tracing::warn!(%nspace, "tools will not see the job: {e}");
        }
        self.jobs().running.insert(nspace.clone());
    }

    /// Forgets a job that ended, as the server of a one-node run does (its tools hear
    /// `EVENT_JOB_END`) while other jobs run. The last one's end is told only by
    /// [`RootTools::finish`], once the run's output has reached the root: its processes' last
    /// lines may still be on their way from the daemons when the last of them is reported
    /// ended, and a tool following the output (`pmixps --tail`) stops at the job's end.
    pub(crate) fn job_ended(&self, nspace: &Nspace) {
        let now = {
            let mut jobs = self.jobs();
            jobs.running.remove(nspace);
            if jobs.running.is_empty() {
                jobs.ended.push(nspace.clone());
                false
            } else {
                true
            }
        };
        if now {
            self.server.deregister_nspace(nspace);
        }
    }

    fn jobs(&self) -> std::sync::MutexGuard<'_, Jobs> {
        self.jobs.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The run's output is written: the ends held back are told, and tools are served no
    /// more (the rendezvous files are removed).
    pub(crate) fn finish(&self) {
        let ended = std::mem::take(&mut self.jobs().ended);
        for nspace in ended {
            self.server.deregister_nspace(&nspace);
        }
        if let Err(e) = self.server.finalize() {
            tracing::warn!("finalizing the root's tool server: {e}");
        }
    }

    /// An event a daemon passed on (its processes' and other daemons'): a debugger's
    /// (`READY_FOR_DEBUG` of a process held in init, `DEBUGGER_RELEASE`) goes to the server,
    /// which holds the job for its tools until every node's processes wait, and aborts them all
    /// if its last debugger goes (docs/TOOLS.md, "Debuggers"). Others concern the
    /// daemons' processes, not the tools.
    pub(crate) fn event_elsewhere(
        &self,
        code: Status,
        source: &Proc,
        range: DataRange,
        info: &[Info],
    ) {
        if code != Status::READY_FOR_DEBUG && code != Status::DEBUGGER_RELEASE {
            return;
        }
        if let Err(e) = self.server.notify_event(code, source, range, info) {
            tracing::warn!(%source, "the tools' server did not take {code:?}: {e}");
        }
    }

    /// The server, which also hands the run's output to the tools that pulled it.
    pub(crate) fn server(&self) -> &Arc<Server> {
        &self.server
    }
}
