//! Where events the server sends (`ServerMsg::Event`) arrive.
//!
//! Event registration (`register_event_handler` and the `RegisterEvents` request) is later
//! work; until then the reader thread hands events here, and they are kept in a small bounded
//! backlog so that a handler registered soon after can still see what came first. The
//! registry of handlers will live in this type, so the reader thread does not change.

use std::collections::VecDeque;

use parking_lot::Mutex;
use pmix_wire::Event;

/// How many undelivered events are kept; older ones are dropped (and logged) beyond that.
const BACKLOG: usize = 64;

#[derive(Default)]
pub(crate) struct Events {
    backlog: Mutex<VecDeque<Event>>,
}

impl Events {
    /// Called by the reader thread for every event.
    pub(crate) fn deliver(&self, ev: Event) {
        tracing::debug!("pmix-client: event {:?} from {}", ev.code, ev.source);
        let mut q = self.backlog.lock();
        if q.len() == BACKLOG {
            if let Some(old) = q.pop_front() {
                tracing::warn!("pmix-client: no handler for event {:?}; dropped", old.code);
            }
        }
        q.push_back(ev);
    }

    /// Takes the events that arrived with no handler to take them.
    pub(crate) fn take_backlog(&self) -> Vec<Event> {
        self.backlog.lock().drain(..).collect()
    }
}
