//! The engine's deadlines: one table, ordered by time, for the Gets and the collectives that
//! wait with a timeout. One table keeps [`Engine::poll_timeout`](super::Engine::poll_timeout)
//! a single look, and expiry in deadline order whichever concern set the deadline.

use std::collections::BTreeMap;
use std::time::Instant;

use pmix_types::Rank;

use super::store::NsId;

/// What a deadline ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Timer {
    /// A parked Get for `target`, numbered `timer` among its waiters.
    Get { target: (NsId, Rank), timer: u64 },
    /// A fence, connect, disconnect or group collective.
    Fence { seq: u64 },
}

/// The deadlines set, each with an id that orders equal instants by when they were set.
#[derive(Default)]
pub(super) struct Timers {
    next: u64,
    at: BTreeMap<(Instant, u64), Timer>,
}

impl Timers {
    /// A fresh id, for a waiter that may or may not get a deadline.
    pub(super) fn new_id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Ends `timer` at `deadline`; `id` from [`Timers::new_id`].
    pub(super) fn set(&mut self, deadline: Instant, id: u64, timer: Timer) {
        self.at.insert((deadline, id), timer);
    }

    /// Ends collective `seq` at `deadline`.
    pub(super) fn set_fence(&mut self, deadline: Instant, seq: u64) {
        let id = self.new_id();
        self.set(deadline, id, Timer::Fence { seq });
    }

    /// Removes the deadline set with `id` at `deadline`.
    pub(super) fn cancel(&mut self, deadline: Instant, id: u64) {
        self.at.remove(&(deadline, id));
    }

    /// Removes collective `seq`'s deadline, if it has one.
    pub(super) fn cancel_fence(&mut self, seq: u64) {
        self.at.retain(|_, t| *t != Timer::Fence { seq });
    }

    /// The earliest deadline.
    pub(super) fn poll_timeout(&self) -> Option<Instant> {
        self.at.keys().next().map(|(t, _)| *t)
    }

    /// The earliest deadline not after `now`, removed.
    pub(super) fn pop_expired(&mut self, now: Instant) -> Option<Timer> {
        let (&(t, id), _) = self.at.iter().next()?;
        if t > now {
            return None;
        }
        self.at.remove(&(t, id))
    }
}
