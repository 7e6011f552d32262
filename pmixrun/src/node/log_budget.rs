//! What `PMIx_Log` requests may hold of pmixrun's memory while they wait for the supervisor,
//! which writes them (on pmixrun's stderr or stdout, or to syslog) one after the other: a
//! stderr nobody reads stops it, and every request behind it waits in its queue. The bytes
//! of the requests waiting are counted; past [`LOG_BUDGET`] a request is refused at once
//! (`ERR_OUT_OF_RESOURCE`, which `PMIx_Log` may answer) rather than queued.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use pmix_server::types::{Info, Value};

/// The most bytes of log data waiting for the supervisor, per way in (this node's processes;
/// the daemons' forwarded requests at a multi-node root).
pub(crate) const LOG_BUDGET: usize = 16 << 20;

/// The bytes of log data waiting, shared by a way in and the requests it let through.
#[derive(Clone, Default)]
pub(crate) struct LogBudget(Arc<AtomicUsize>);

/// A request's share of the budget, given back when the request is dropped (written, or
/// answered otherwise).
#[derive(Debug)]
pub(crate) struct LogTicket {
    waiting: Arc<AtomicUsize>,
    bytes: usize,
}

impl LogBudget {
    /// A ticket for a request of `data`, or `None` when the budget cannot take it. A request
    /// alone bigger than the budget is let through when nothing else waits, so that every
    /// size can be logged.
    pub(crate) fn take(&self, data: &[Info]) -> Option<LogTicket> {
        let bytes = size_of(data);
        let prev = self.0.fetch_add(bytes, Ordering::AcqRel);
        let ticket = LogTicket {
            waiting: self.0.clone(),
            bytes,
        };
        (prev == 0 || prev + bytes <= LOG_BUDGET).then_some(ticket)
    }
}

impl Drop for LogTicket {
    fn drop(&mut self) {
        self.waiting.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

/// About how many bytes `data` holds: its strings and byte objects, and a little per entry.
fn size_of(data: &[Info]) -> usize {
    data.iter()
        .map(|i| {
            64 + i.key.as_str().len()
                + match &i.value {
                    Value::String(s) => s.len(),
                    Value::ByteObject(b) => b.len(),
                    _ => 0,
                }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmix_server::types::attr;

    fn line(n: usize) -> Vec<Info> {
        vec![Info::attr(attr::LOG_STDERR, "x".repeat(n))]
    }

    #[test]
    fn requests_past_the_budget_are_refused_until_earlier_ones_are_done() {
        let budget = LogBudget::default();
        let held: Vec<LogTicket> = (0..16)
            .map(|_| {
                budget
                    .take(&line((1 << 20) - 100))
                    .expect("within the budget")
            })
            .collect();
        assert!(budget.take(&line(1 << 20)).is_none(), "past the budget");
        drop(held);
        assert!(
            budget.take(&line(1 << 20)).is_some(),
            "the budget came back"
        );
        // One bigger than the whole budget goes when nothing else waits.
        let big = budget.take(&line(LOG_BUDGET * 2)).expect("alone");
        assert!(budget.take(&line(10)).is_none());
        drop(big);
    }
}
