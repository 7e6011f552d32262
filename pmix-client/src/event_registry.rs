//! The registry of event handlers, which the connection hands every event it reads: who
//! wants which codes, running them, and the backlog of events nobody wanted. It knows nothing
//! of the client's API (`api/events.rs` registers and deregisters through it), so that the
//! connection, which owns it, does not depend on the API built on the connection.
//!
//! [`Events::deliver`] runs the matching handlers in their order, on whichever thread reads
//! the socket; a handler removed while an event is being dispatched is not called for it
//! afterwards, and a panicking handler is caught. The order is the standard's
//! (`order.rs`): handlers of one code, then of several, then of every code, each group in
//! registration order unless the registration placed it otherwise. An event marked
//! `EVENT_NON_DEFAULT` skips the handlers of every code.

use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;
use pmix_types::{DataRange, Info, Proc, Status, attr};
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
    /// A handler of every code is not called for an event marked `EVENT_NON_DEFAULT`: only
    /// handlers that name its code asked for it.
    fn wants(&self, ev: &Event) -> bool {
        if self.codes.is_empty() {
            !is_non_default(ev)
        } else {
            self.codes.contains(&ev.code)
        }
    }
}

/// True if `ev` says it is only for the handlers registered for its code.
fn is_non_default(ev: &Event) -> bool {
    ev.info
        .iter()
        .any(|i| i.key.as_str() == attr::EVENT_NON_DEFAULT && i.flag().unwrap_or(false))
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
            .filter(|h| h.wants(ev))
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use pmix_types::Nspace;

    use super::*;

    /// Registers a handler of `codes` that counts its calls.
    fn counting(events: &Events, codes: &[Status]) -> Arc<AtomicUsize> {
        let n = Arc::new(AtomicUsize::new(0));
        let seen = Arc::clone(&n);
        let f: Arc<HandlerFn> = Arc::new(move |_: &Event| {
            seen.fetch_add(1, Ordering::Relaxed);
        });
        events.add(codes.to_vec(), &[], f).unwrap();
        n
    }

    fn event(code: Status, info: Vec<Info>) -> Event {
        Event {
            code,
            source: Proc::new(Nspace::new("job").unwrap(), 0u32),
            range: DataRange::SESSION,
            info,
        }
    }

    #[test]
    fn a_non_default_event_reaches_only_the_handlers_of_its_code() {
        let events = Events::default();
        let every = counting(&events, &[]);
        let named = counting(&events, &[Status::EVENT_PROC_TERMINATED]);
        let non_default = vec![Info::attr(attr::EVENT_NON_DEFAULT, true)];
        events.deliver(event(Status::EVENT_PROC_TERMINATED, non_default.clone()));
        assert_eq!(every.load(Ordering::Relaxed), 0);
        assert_eq!(named.load(Ordering::Relaxed), 1);
        // Unmarked, or marked false, it reaches both.
        events.deliver(event(Status::EVENT_PROC_TERMINATED, Vec::new()));
        let marked_false = vec![Info::attr(attr::EVENT_NON_DEFAULT, false)];
        events.deliver(event(Status::EVENT_PROC_TERMINATED, marked_false));
        assert_eq!(every.load(Ordering::Relaxed), 2);
        assert_eq!(named.load(Ordering::Relaxed), 3);
        // With no handler of its code, it is kept for `take_events`.
        events.deliver(event(Status::ERR_PROC_ABORTED, non_default));
        assert_eq!(events.take_backlog().len(), 1);
        assert_eq!(every.load(Ordering::Relaxed), 2);
    }
}
