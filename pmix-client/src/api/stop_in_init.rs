//! Holding the process in [`Client::init`] for a debugger (`PMIX_DEBUG_STOP_IN_INIT`), as
//! libpmix's `PMIx_Init` does: a job whose data holds `DEBUG_STOP_IN_INIT` (`true`, or a rank:
//! this one or `WILDCARD`) waits, once connected, until a `DEBUGGER_RELEASE` event reaches it.
//!
//! The order is the reference's, so that no release is missed: register for
//! `DEBUGGER_RELEASE`, then tell the server it waits (`READY_FOR_DEBUG` with `BREAKPOINT`
//! `"pmix-init"`, range `RM`), then wait. A pmix-rs server remembers releases it delivered
//! before a process said it waits, and aborts the held processes when their debugger goes
//! away without releasing them (`docs/TOOLS.md`, "Debuggers"), so the wait needs no timeout
//! of its own; a lost connection ends it with [`Error::LostConnection`].

use std::sync::mpsc;

use pmix_types::{DataRange, Info, Proc, Rank, Status, Value, attr};

use crate::{Client, Error};

/// Whether `value` of `DEBUG_STOP_IN_INIT` holds process `rank`.
fn holds(value: &Value, rank: Rank) -> bool {
    match value {
        Value::Bool(b) => *b,
        v => match v.as_rank() {
            Some(r) => r == Rank::WILDCARD || r == rank,
            // A value of another type holds every process, as libpmix does.
            None => true,
        },
    }
}

impl Client {
    /// Waits for a debugger's release if the job asks for a stop in init.
    pub(crate) fn stop_in_init(&self) -> Result<(), Error> {
        let me = self.proc().clone();
        let job = Proc::new(me.nspace.clone(), Rank::WILDCARD);
        let optional = [Info::attr(attr::OPTIONAL, true)];
        let Ok(value) = self.get(&job, attr::DEBUG_STOP_IN_INIT, &optional) else {
            return Ok(());
        };
        if !holds(&value, me.rank) {
            return Ok(());
        }
        tracing::debug!(proc = %me, "stopped in init: waiting for a debugger's release");
        let (tx, rx) = mpsc::channel();
        let tx = parking_lot::Mutex::new(tx);
        let codes = [Status::DEBUGGER_RELEASE, Status::ERR_LOST_CONNECTION];
        let name = [Info::attr(attr::EVENT_HDLR_NAME, "WAIT-FOR-DEBUGGER")];
        let id = self.register_event_handler(&codes, &name, move |ev| {
            let _ = tx.lock().send(ev.code);
        })?;
        let ready = [
            Info::attr(attr::EVENT_NON_DEFAULT, true),
            Info::attr(attr::BREAKPOINT, "pmix-init"),
        ];
        self.notify_event(Status::READY_FOR_DEBUG, DataRange::RM, &ready)?;
        let got = rx.recv();
        let _ = self.deregister_event_handler(id);
        match got {
            Ok(Status::DEBUGGER_RELEASE) => {
                tracing::debug!(proc = %me, "released by the debugger");
                Ok(())
            }
            _ => Err(Error::LostConnection),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn which_values_hold_a_process() {
        assert!(holds(&Value::Bool(true), Rank(3)));
        assert!(!holds(&Value::Bool(false), Rank(3)));
        assert!(holds(&Value::Rank(Rank::WILDCARD), Rank(3)));
        assert!(holds(&Value::Rank(Rank(3)), Rank(3)));
        assert!(!holds(&Value::Rank(Rank(2)), Rank(3)));
        assert!(holds(&Value::String("yes".into()), Rank(0)));
    }
}
