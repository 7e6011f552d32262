//! The events that announce a state (a process set defined or deleted, a job's end), kept so
//! that a client registering for one by name after it was raised still hears of it, as
//! OpenPMIx's servers cache events for late registrations.
//!
//! Only those codes are kept (other events are of the moment), unless raised with
//! `EVENT_DO_NOT_CACHE`; a set's definition or deletion replaces what was kept of the same
//! set, and at most [`KEPT`] events are kept, the oldest dropped first. A registration hears
//! the kept events of the codes it names and its connection did not name before, that the
//! event's range reaches, after the registration's answer. A registration for every code
//! (a default handler, such as Open MPI registers for errors) is not told of past states it
//! did not ask for. A tool registering late hears them too, those its range reaches as
//! live events reach tools (`tools.rs`).

use std::collections::VecDeque;
use std::sync::Arc;

use pmix_types::{Proc, Status, Value, attr};
use pmix_wire::Event;

use super::events::reaches;
use super::{ConnId, Engine, info_flag};

/// How many events are kept at most.
const KEPT: usize = 256;

/// Whether events of `code` announce a state that lasts.
fn announces_state(code: Status) -> bool {
    code == Status::PROCESS_SET_DEFINE
        || code == Status::PROCESS_SET_DELETE
        || code == Status::EVENT_JOB_END
}

/// The process set an event is about.
fn pset_of(event: &Event) -> Option<&Value> {
    event
        .info
        .iter()
        .find(|i| i.key.as_str() == attr::PSET_NAME)
        .map(|i| &i.value)
}

/// The events kept for late registrations, oldest first.
#[derive(Debug, Default)]
pub(super) struct EventCache {
    kept: VecDeque<Arc<Event>>,
}

impl EventCache {
    /// Keeps `event` if it announces a state.
    pub(super) fn keep(&mut self, event: &Event) {
        if !announces_state(event.code) || info_flag(&event.info, attr::EVENT_DO_NOT_CACHE) {
            return;
        }
        if let Some(set) = pset_of(event) {
            let is_pset =
                |c: Status| c == Status::PROCESS_SET_DEFINE || c == Status::PROCESS_SET_DELETE;
            self.kept
                .retain(|e| !(is_pset(e.code) && pset_of(e) == Some(set)));
        }
        if self.kept.len() == KEPT {
            self.kept.pop_front();
        }
        self.kept.push_back(Arc::new(event.clone()));
    }

    /// The kept events of `codes` that reach client `proc`.
    fn of_codes(&self, codes: &[Status], proc: &Proc) -> Vec<Arc<Event>> {
        self.of_codes_where(codes, |e| reaches(e, proc))
    }

    /// The kept events of `codes` that `reaches` says reach their listener.
    pub(super) fn of_codes_where(
        &self,
        codes: &[Status],
        reaches: impl Fn(&Event) -> bool,
    ) -> Vec<Arc<Event>> {
        self.kept
            .iter()
            .filter(|e| codes.contains(&e.code) && reaches(e))
            .cloned()
            .collect()
    }
}

impl Engine {
    /// A client registers for `codes` (every code when empty): answered, then told the kept
    /// events of the codes it names for the first time.
    pub(super) fn register_events(&mut self, conn: ConnId, id: u32, codes: &[Status]) {
        let Some(c) = self.sessions.conn_mut(conn) else {
            return;
        };
        let newly: Vec<Status> = codes
            .iter()
            .copied()
            .filter(|code| !c.events.names(*code))
            .collect();
        c.events.add(codes);
        let late = self.event_cache.of_codes(&newly, &c.proc);
        self.reply_status(conn, id, Status::SUCCESS);
        for event in late {
            self.send_event(vec![conn], &event);
        }
    }
}
