//! The shell's watch over connections it may have to close: how many connections of each
//! peer uid are still in their handshake (a budget per uid, so that one user cannot hold
//! every slot unauthenticated), and when to look at a connection again (its handshake
//! deadline, or its stalled output's). The shell decides what to do with a connection when
//! its time comes; this only keeps the counts and the times.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Instant;

use crate::engine::ConnId;

/// Handshakes in progress by peer uid, and the times to look at connections again.
pub(crate) struct ConnWatch {
    handshaking: HashMap<Option<u32>, usize>,
    per_uid: usize,
    /// When to look at a connection again, with its serial (entries of connections gone or
    /// changed since are skipped by the caller).
    due: BinaryHeap<Reverse<(Instant, ConnId, u64)>>,
}

impl ConnWatch {
    /// At most `per_uid` connections of one peer uid in their handshake at once.
    pub(crate) fn new(per_uid: usize) -> ConnWatch {
        ConnWatch {
            handshaking: HashMap::new(),
            per_uid,
            due: BinaryHeap::new(),
        }
    }

    /// Counts a new connection of `uid` in its handshake; `Err` with the number already in
    /// theirs when the uid has its budget's worth.
    pub(crate) fn start_handshake(&mut self, uid: Option<u32>) -> Result<(), usize> {
        let trying = self.handshaking.entry(uid).or_default();
        if *trying >= self.per_uid {
            return Err(*trying);
        }
        *trying += 1;
        Ok(())
    }

    /// A connection of `uid` no longer counts as in its handshake (it completed it, or went).
    pub(crate) fn handshake_over(&mut self, uid: Option<u32>) {
        if let Some(n) = self.handshaking.get_mut(&uid) {
            *n -= 1;
            if *n == 0 {
                self.handshaking.remove(&uid);
            }
        }
    }

    /// Look at `conn` (as of `serial`) again at `at`.
    pub(crate) fn look_again(&mut self, at: Instant, conn: ConnId, serial: u64) {
        self.due.push(Reverse((at, conn, serial)));
    }

    /// The earliest time to look at a connection again.
    pub(crate) fn next(&self) -> Option<Instant> {
        self.due.peek().map(|Reverse((t, ..))| *t)
    }

    /// The next connection due by `now`, taken off (its time, id and serial).
    pub(crate) fn pop_due(&mut self, now: Instant) -> Option<(Instant, ConnId, u64)> {
        match self.due.peek() {
            Some(&Reverse((at, conn, serial))) if at <= now => {
                self.due.pop();
                Some((at, conn, serial))
            }
            _ => None,
        }
    }

    /// Drops the times at the front whose connection `watching` says has nothing to watch any
    /// more: without them the loop need not wake, nor read the clock, for nothing.
    pub(crate) fn drop_idle(&mut self, watching: impl Fn(ConnId, u64) -> bool) {
        while let Some(&Reverse((_, conn, serial))) = self.due.peek() {
            if watching(conn, serial) {
                break;
            }
            self.due.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::ConnWatch;

    #[test]
    fn handshakes_are_counted_per_uid_and_times_come_in_order() {
        let mut w = ConnWatch::new(2);
        assert_eq!(w.start_handshake(Some(5)), Ok(()));
        assert_eq!(w.start_handshake(Some(5)), Ok(()));
        assert_eq!(w.start_handshake(Some(5)), Err(2));
        assert_eq!(w.start_handshake(None), Ok(()));
        w.handshake_over(Some(5));
        assert_eq!(w.start_handshake(Some(5)), Ok(()));

        let t0 = std::time::Instant::now();
        w.look_again(t0 + Duration::from_secs(2), 1, 10);
        w.look_again(t0 + Duration::from_secs(1), 2, 20);
        assert_eq!(w.next(), Some(t0 + Duration::from_secs(1)));
        assert_eq!(w.pop_due(t0), None);
        assert_eq!(
            w.pop_due(t0 + Duration::from_secs(1)),
            Some((t0 + Duration::from_secs(1), 2, 20))
        );
        w.drop_idle(|conn, _| conn != 1);
        assert_eq!(w.next(), None);
    }
}
