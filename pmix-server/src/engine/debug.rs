//! Debugger support: processes held in init (`PMIX_DEBUG_STOP_IN_INIT`) until a tool releases
//! them (`PMIX_DEBUGGER_RELEASE`), as libpmix and pmix-rs clients wait.
//!
//! A client of a job with `DEBUG_STOP_IN_INIT` in its job data registers for
//! `DEBUGGER_RELEASE`, then tells the server it is waiting with a `READY_FOR_DEBUG`
//! notification (libpmix 4.2 with range `RM`, 5.0 with a custom range naming the server,
//! pmix-rs with `RM`), then waits. The server:
//!
//! - keeps who waits ("held"), and once every local process of the job waits, tells the tools
//!   registered for `READY_FOR_DEBUG` (one event for the job: `EVENT_AFFECTED_PROC` the job's
//!   `WILDCARD`, `NSPACE`, `BREAKPOINT` `"pmix-init"`); a tool registering later while the
//!   job still waits hears it at once;
//! - delivers a `DEBUGGER_RELEASE` (from a tool or a client) within its range like any event,
//!   and remembers whom it released: a process that says it waits after its release (the
//!   release overtook it) is released at once, so no release is lost to a race;
//! - when the last tool registered for `READY_FOR_DEBUG` by name (a debugger; a registration
//!   for every code does not make one) goes away while processes still wait, asks the host to
//!   abort them ([`HostCall::Abort`], the tool as the
//!   asker): a debugger that dies must not leave a job waiting forever, and releasing it would
//!   run it unobserved where the user asked for it to be held. A tool that never registered
//!   for `READY_FOR_DEBUG` (a `pmixps`) is no debugger: its end changes nothing.
//!
//! Across nodes, the host passes on what other nodes' processes say (`Server::notify_event`,
//! [`Engine::host_debug_event`]): a `READY_FOR_DEBUG` whose source is a process of another
//! node holds it here too, and from then on the job is ready once every one of its processes
//! waits, on whatever node (the server tools attach to, hosting none of them, learns so when
//! the job waits everywhere, and aborts them all when its last debugger goes); a
//! `DEBUGGER_RELEASE` raised elsewhere is remembered as one raised here.

use std::collections::BTreeSet;
use std::collections::{HashMap, HashSet};

use pmix_types::{DataRange, Info, Proc, Rank, Status, attr};
use pmix_wire::Event;

use super::host_ops::{HostCall, PendingHost};
use super::nspaces::Nspaces;
use super::store::NsId;
use super::{ConnId, Engine, events};

/// The held processes and the releases already sent.
#[derive(Default)]
pub(super) struct Debug {
    /// Local processes waiting in init, by namespace.
    held: HashMap<NsId, BTreeSet<Rank>>,
    /// Ranks released by namespace (`WILDCARD`: the whole job).
    released: HashMap<NsId, HashSet<Rank>>,
    /// Namespaces whose every local process waits (announced to the tools).
    ready: HashSet<NsId>,
    /// Namespaces with processes of other nodes held: ready once all their processes wait.
    elsewhere: HashSet<NsId>,
}

/// The breakpoint libpmix names for a stop in init.
const BREAKPOINT_INIT: &str = "pmix-init";

/// What a process saying it waits for a debugger comes to.
enum Held {
    /// A release overtook it: released now.
    Released,
    /// Held, with others of its job still to say so.
    Waiting,
    /// Held, and the last of its job: the job is ready for a debugger.
    JobReady,
}

impl Debug {
    /// Process `rank` of `ns` waits for a debugger: the job is ready once `count` of its
    /// processes wait (the local ones, or all of them once other nodes report theirs).
    fn hold(&mut self, ns: NsId, rank: Rank, count: usize) -> Held {
        let released = self
            .released
            .get(&ns)
            .is_some_and(|r| r.contains(&Rank::WILDCARD) || r.contains(&rank));
        if released {
            return Held::Released;
        }
        self.held.entry(ns).or_default().insert(rank);
        let waiting = self.held.get(&ns).map_or(0, BTreeSet::len);
        if waiting >= count && self.ready.insert(ns) {
            Held::JobReady
        } else {
            Held::Waiting
        }
    }

    /// `targets` (`WILDCARD`: a whole job) are released: they wait no more, and those not
    /// waiting yet are released when they say so.
    fn release(&mut self, targets: Vec<(NsId, Rank)>) {
        for (ns, rank) in targets {
            self.released.entry(ns).or_default().insert(rank);
            if let Some(held) = self.held.get_mut(&ns) {
                if rank == Rank::WILDCARD {
                    held.clear();
                } else {
                    held.remove(&rank);
                }
            }
        }
        self.held.retain(|_, h| !h.is_empty());
        let held = &self.held;
        self.ready.retain(|ns| held.contains_key(ns));
    }

    /// A held process's connection ended: it waits no more.
    pub(super) fn proc_gone(&mut self, ns: NsId, rank: Rank) {
        if let Some(h) = self.held.get_mut(&ns) {
            h.remove(&rank);
            if h.is_empty() {
                self.held.remove(&ns);
                self.ready.remove(&ns);
            }
        }
    }

    /// A namespace was deregistered.
    pub(super) fn forget(&mut self, ns: NsId) {
        self.held.remove(&ns);
        self.released.remove(&ns);
        self.ready.remove(&ns);
        self.elsewhere.remove(&ns);
    }

    /// The namespaces whose every local process waits.
    fn ready_jobs(&self) -> Vec<NsId> {
        self.ready.iter().copied().collect()
    }

    /// Whether any process is held.
    fn holds_any(&self) -> bool {
        !self.held.is_empty()
    }

    /// Every process held, no longer (nobody will release them).
    fn take_held(&mut self) -> HashMap<NsId, BTreeSet<Rank>> {
        self.ready.clear();
        std::mem::take(&mut self.held)
    }
}

/// The job-level `READY_FOR_DEBUG` of namespace `ns`, raised by this server.
fn ready_event(nspaces: &Nspaces, ns: NsId) -> Option<Event> {
    let name = nspaces.get(&ns)?.name.clone();
    Some(Event {
        code: Status::READY_FOR_DEBUG,
        source: nspaces.me().clone(),
        range: DataRange::CUSTOM,
        info: vec![
            Info::attr(
                attr::EVENT_AFFECTED_PROC,
                Proc::new(name.clone(), Rank::WILDCARD),
            ),
            Info::attr(attr::NSPACE, name.as_str()),
            Info::attr(attr::BREAKPOINT, BREAKPOINT_INIT),
        ],
    })
}

/// A release for one process, from this server (for one the release overtook).
fn release_event(nspaces: &Nspaces, ns: NsId, rank: Rank) -> Event {
    let target = nspaces.get(&ns).map(|n| Proc::new(n.name.clone(), rank));
    Event {
        code: Status::DEBUGGER_RELEASE,
        source: nspaces.me().clone(),
        range: DataRange::CUSTOM,
        info: target
            .map(|p| Info::attr(attr::EVENT_CUSTOM_RANGE, p))
            .into_iter()
            .collect(),
    }
}

impl Engine {
    /// A client said it waits for a debugger (`READY_FOR_DEBUG`).
    pub(super) fn ready_for_debug(&mut self, conn: ConnId, ns: NsId, rank: Rank) {
        self.hold_for_debug(Some(conn), ns, rank);
    }

    /// Process `rank` of `ns` waits for a debugger: here (`conn`, its connection) or on
    /// another node (`None`).
    fn hold_for_debug(&mut self, conn: Option<ConnId>, ns: NsId, rank: Rank) {
        let count = match self.nspaces.get(&ns) {
            Some(n) if self.debug.elsewhere.contains(&ns) => n.size as usize,
            Some(n) => n.local.len(),
            None => return,
        };
        match self.debug.hold(ns, rank, count) {
            Held::Released => {
                // Another node's process is released by its own server.
                if let Some(conn) = conn {
                    tracing::debug!(conn, %rank, "released before it said it waits: released now");
                    let event = release_event(&self.nspaces, ns, rank);
                    self.send_event(vec![conn], &event);
                }
            }
            Held::Waiting => {}
            Held::JobReady => {
                if let Some(event) = ready_event(&self.nspaces, ns) {
                    let nspace = self.nspaces.get(&ns).map(|n| n.name.to_string());
                    tracing::info!(?nspace, "every process of the job waits for a debugger");
                    let tools = self.tools_wanting(Status::READY_FOR_DEBUG);
                    self.send_event(tools, &event);
                }
            }
        }
    }

    /// The host passes on a debugger event of another node (`Server::notify_event`): a
    /// `READY_FOR_DEBUG` of another node's process holds it here (`true`: the event goes no
    /// further, as a client's does not), and one of a namespace unknown here is dropped; a
    /// `DEBUGGER_RELEASE` is remembered (and delivered).
    pub(super) fn host_debug_event(&mut self, event: &Event) -> bool {
        if event.code == Status::DEBUGGER_RELEASE {
            self.debugger_released(event);
            return false;
        }
        if event.code != Status::READY_FOR_DEBUG {
            return false;
        }
        let source = &event.source;
        let Some(ns) = self.ns_id(source.nspace.as_str()) else {
            // Of a namespace this server does not know (any more: the job ended and was
            // deregistered while the event travelled): no job to hold, and a process's own
            // readiness is no event for anyone.
            return true;
        };
        let elsewhere = self
            .nspaces
            .get(&ns)
            .is_some_and(|n| source.rank.0 < n.size && !n.is_local(source.rank));
        if !elsewhere {
            return false;
        }
        if self.debug.elsewhere.insert(ns) {
            // From now on the job counts all its processes, so the local ones may not yet
            // have made it ready.
            self.debug.ready.remove(&ns);
        }
        self.hold_for_debug(None, ns, source.rank);
        true
    }

    /// A `DEBUGGER_RELEASE` was notified (already delivered within its range): the processes
    /// it reaches wait no more, and those not waiting yet are released when they say so.
    pub(super) fn debugger_released(&mut self, event: &Event) {
        let targets: Vec<(NsId, Rank)> = match event.range {
            DataRange::CUSTOM => events::custom_range(event)
                .iter()
                .filter_map(|p| Some((self.ns_id(p.nspace.as_str())?, p.rank)))
                .collect(),
            DataRange::NAMESPACE => self
                .ns_id(event.source.nspace.as_str())
                .map(|ns| (ns, Rank::WILDCARD))
                .into_iter()
                .collect(),
            DataRange::PROC_LOCAL => Vec::new(),
            // LOCAL, SESSION, GLOBAL: every job of this server.
            _ => self.nspaces.ids().map(|ns| (ns, Rank::WILDCARD)).collect(),
        };
        self.debug.release(targets);
    }

    /// A tool just registered for `codes`: if it listens for `READY_FOR_DEBUG`, it hears of
    /// the jobs that already wait.
    pub(super) fn tell_new_debugger(&mut self, conn: ConnId, codes: &[Status]) {
        if !codes.is_empty() && !codes.contains(&Status::READY_FOR_DEBUG) {
            return;
        }
        let ready: Vec<NsId> = self.debug.ready_jobs();
        for ns in ready {
            if let Some(event) = ready_event(&self.nspaces, ns) {
                self.send_event(vec![conn], &event);
            }
        }
    }

    /// The debugger `tool` (a tool registered for `READY_FOR_DEBUG`) is gone: if it was the
    /// last and processes still wait, the host is asked to abort them.
    pub(super) fn debugger_gone(&mut self, tool: &Proc) {
        if self.debuggers() > 0 || !self.debug.holds_any() {
            return;
        }
        let mut procs = Vec::new();
        for (ns, ranks) in self.debug.take_held() {
            if let Some(n) = self.nspaces.get(&ns) {
                procs.extend(ranks.iter().map(|r| Proc::new(n.name.clone(), *r)));
            }
        }
        if procs.is_empty() {
            return;
        }
        let message = format!(
            "the debugger {tool} went away without releasing {} process(es) held in init",
            procs.len()
        );
        tracing::warn!("{message}");
        self.host_call(
            PendingHost::Nothing,
            HostCall::Abort {
                proc: tool.clone(),
                status: Status::ERR_LOST_CONNECTION,
                message,
                procs,
            },
        );
    }
}
