//! The registry of event handlers, which the connection hands every event it reads: who
//! wants which codes, running them, and the backlog of events nobody wanted. It knows nothing
//! of the client's API (`api/events.rs` registers and deregisters through it), so that the
//! connection, which owns it, does not depend on the API built on the connection.
//!
//! [`Events::deliver`] runs the matching handlers in their order, on whichever thread reads
//! the socket; a handler removed while an event is being dispatched is not called for it
//! afterwards, and a panicking handler is caught. The order is the standard's
//! (`order.rs`): handlers of one code, then of several, then of every code, each group in
//! registration order unless the registration placed it otherwise.

use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use pmix_types::{DataRange, Info, Proc, Status};
use pmix_wire::Event;

use crate::Error;
use crate::event_order::{Placement, place};

/// How many undelivered events are kept; older ones are dropped (and logged) beyond that.
const BACKLOG: usize = 64;

pub(crate) type HandlerFn = dyn Fn(&Event) + Send + Sync + 'static;

pub(crate) struct Handler {
    id: u64,
    /// Empty: every code.
    pub(crate) codes: Vec<Status>,
    pub(crate) f: Arc<HandlerFn>,
    /// Cleared on deregistration, so that a handler removed while an event is being
    /// dispatched is not called for it afterwards.
    active: Arc<AtomicBool>,
    /// Where it asked to be (`EVENT_HDLR_*`), and its name.
    pub(crate) placement: Placement,
}

impl Handler {
    fn wants(&self, code: Status) -> bool {
        self.codes.is_empty() || self.codes.contains(&code)
    }
}

#[derive(Default)]
pub(crate) struct Events {
    backlog: Mutex<VecDeque<Event>>,
    /// In the order they run.
    handlers: Mutex<Vec<Handler>>,
    next_id: AtomicU64,
}

/// Runs one handler. A panicking handler must not take the reader thread down: every
/// outstanding request would then wait forever.
fn run(f: &HandlerFn, ev: &Event) {
    if panic::catch_unwind(AssertUnwindSafe(|| f(ev))).is_err() {
        tracing::error!(
            "pmix-client: an event handler panicked on {:?}; the client carries on",
            ev.code
        );
    }
}

impl Events {
    /// Runs every handler whose codes match, in their order; keeps the event for
    /// `Client::take_events` if none does. Called by whichever thread reads the socket.
    pub(crate) fn deliver(&self, ev: Event) {
        tracing::debug!("pmix-client: event {:?} from {}", ev.code, ev.source);
        if !self.dispatch(&ev) {
            let mut q = self.backlog.lock();
            if q.len() == BACKLOG {
                if let Some(old) = q.pop_front() {
                    tracing::warn!("pmix-client: no handler for event {:?}; dropped", old.code);
                }
            }
            q.push_back(ev);
        }
    }

    /// Runs the matching handlers; false if there were none.
    fn dispatch(&self, ev: &Event) -> bool {
        // Called without the lock held: a handler may register or deregister handlers.
        let matching: Vec<(Arc<HandlerFn>, Arc<AtomicBool>)> = self
            .handlers
            .lock()
            .iter()
            .filter(|h| h.wants(ev.code))
            .map(|h| (Arc::clone(&h.f), Arc::clone(&h.active)))
            .collect();
        for (f, active) in &matching {
            if active.load(Ordering::Acquire) {
                run(f.as_ref(), ev);
            }
        }
        !matching.is_empty()
    }

    /// The connection is gone: the handlers that want `ERR_LOST_CONNECTION` hear of it from
    /// this process itself (the server cannot tell them). Not kept when none does.
    pub(crate) fn connection_lost(&self, me: Proc) {
        let ev = Event {
            code: Status::ERR_LOST_CONNECTION,
            source: me,
            range: DataRange::PROC_LOCAL,
            info: Vec::new(),
        };
        self.dispatch(&ev);
    }

    /// Adds a handler where its `info` (`EVENT_HDLR_FIRST`, `_LAST`, `_BEFORE`, ...) places
    /// it; refused when that place is taken (a second `FIRST`, say) or unknown.
    pub(crate) fn add(
        &self,
        codes: Vec<Status>,
        info: &[Info],
        f: Arc<HandlerFn>,
    ) -> Result<u64, Error> {
        let placement = Placement::from_info(&codes, info);
        let mut hs = self.handlers.lock();
        let at = place(hs.iter().map(|h| &h.placement), &placement)?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        hs.insert(
            at,
            Handler {
                id,
                codes,
                f,
                active: Arc::new(AtomicBool::new(true)),
                placement,
            },
        );
        Ok(id)
    }

    /// Takes a handler out; the caller drops it, outside the lock (the closure may own the
    /// last handle of the client).
    pub(crate) fn remove(&self, id: u64) -> Option<Handler> {
        let mut hs = self.handlers.lock();
        let at = hs.iter().position(|h| h.id == id)?;
        let h = hs.remove(at);
        h.active.store(false, Ordering::Release);
        Some(h)
    }

    /// Takes every handler out (finalize).
    pub(crate) fn clear(&self) -> usize {
        let all = std::mem::take(&mut *self.handlers.lock());
        for h in &all {
            h.active.store(false, Ordering::Release);
        }
        all.len()
    }

    /// Takes the events that arrived with no handler to take them.
    pub(crate) fn take_backlog(&self) -> Vec<Event> {
        self.backlog.lock().drain(..).collect()
    }
}
