//! Events (`PMIx_Register_event_handler`, `PMIx_Deregister_event_handler`,
//! `PMIx_Notify_event`): handlers registered for status codes, run for every event the server
//! pushes (`ServerMsg::Event`) whose code they asked for.
//!
//! This is the API; the handlers themselves live in the connection's registry
//! ([`event_registry`](crate::event_registry)), to which the reader thread hands every event.
//! While any handler is registered the reader thread reads all the time ([`Shared::listen`]),
//! so an event is delivered when it arrives, not when the next reply happens to be read.
//! Registrations are mirrored to the server, which counts them per code (`RegisterEvents`
//! adds one, `DeregisterEvents` with the same codes removes one) and sends only events some
//! registration wants.
//!
//! Events that no handler took wait in a small bounded backlog for [`Client::take_events`]:
//! they come from registrations made with [`Client::request`], or arrive for a handler
//! deregistered while they were on the way.

use std::sync::Arc;

use pmix_types::{DataRange, Info, Status};
use pmix_wire::{Event, Request};

use crate::call::{blocking, on_status, status_result, timeout_of};
use crate::conn::Shared;
use crate::event_registry::HandlerFn;
use crate::{Client, Error};

/// A registered event handler, as [`Client::register_event_handler`] returns it, for
/// [`Client::deregister_event_handler`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HandlerId(u64);

/// Removes a handler whose registration failed, and the reason to listen it added.
fn unregister_locally(shared: &Shared, id: u64) {
    if let Some(h) = shared.events.remove(id) {
        shared.listen(false);
        drop(h);
    }
}

impl Client {
    /// Registers `handler` for events with one of `codes` (every code when empty)
    /// (`PMIx_Register_event_handler`), and tells the server, which then sends them.
    ///
    /// Every event goes to every handler whose codes match, in the standard's order: handlers
    /// of one code, then of several, then of every code, each group in registration order
    /// unless `info` places the handler otherwise (`EVENT_HDLR_FIRST`, `EVENT_HDLR_LAST`,
    /// `EVENT_HDLR_FIRST_IN_CATEGORY`, `EVENT_HDLR_LAST_IN_CATEGORY`, `EVENT_HDLR_PREPEND`,
    /// `EVENT_HDLR_APPEND`, `EVENT_HDLR_BEFORE`/`EVENT_HDLR_AFTER` the handler of that
    /// `EVENT_HDLR_NAME`); a place already taken or a name unknown in the category is
    /// `ERR_EVENT_REGISTRATION` ([`Error::Server`]), without a message to the server. Handlers
    /// run on the thread reading the socket: the client's reader thread, which reads all the
    /// time while a handler is registered, so events are delivered when they come (a blocking
    /// call may read and dispatch one on its own thread now and then). They must be short; a
    /// blocking call made inside one fails with [`Error::WouldDeadlock`] (the `_nb` calls
    /// work, and so does [`Client::deregister_event_handler`]); a panic is caught and logged.
    ///
    /// `info` is passed to the server as is. Besides the events the server relays
    /// ([`Client::notify_event`] of other processes, the host's), a handler for
    /// `ERR_LOST_CONNECTION` hears of the connection being lost from this process itself,
    /// and a handler for `ERR_PROC_TERM_WO_SYNC` of processes of this job, or of jobs
    /// connected to it, that ended without finalizing (the event's info names the process,
    /// `EVENT_AFFECTED_PROC`).
    ///
    /// A handler that owns a [`Client`] keeps the client alive (and so never finalized by
    /// drop) until it is deregistered or the client finalized, which drops every handler.
    pub fn register_event_handler(
        &self,
        codes: &[Status],
        info: &[Info],
        handler: impl Fn(&Event) + Send + Sync + 'static,
    ) -> Result<HandlerId, Error> {
        self.check_blocking()?;
        // No backstop: a timeout would leave the handler registered under an id nobody
        // knows, and the server answers a registration at once.
        blocking(self.shared(), None, |done| {
            self.send_register(codes, info, Arc::new(handler), done)
        })
    }

    /// [`Client::register_event_handler`] completing through `done`, which runs on the
    /// reader thread, or at once on the caller's if the request cannot be sent. The handler
    /// may run before `done` does (an event of a code some other registration asked for).
    pub fn register_event_handler_nb(
        &self,
        codes: &[Status],
        info: &[Info],
        handler: impl Fn(&Event) + Send + Sync + 'static,
        done: impl FnOnce(Result<HandlerId, Error>) + Send + 'static,
    ) {
        if let Err(e) = self.check() {
            return done(Err(e));
        }
        self.send_register(codes, info, Arc::new(handler), done);
        self.shared().kick();
    }

    fn send_register(
        &self,
        codes: &[Status],
        info: &[Info],
        f: Arc<HandlerFn>,
        done: impl FnOnce(Result<HandlerId, Error>) + Send + 'static,
    ) -> Option<u32> {
        // Installed before the server hears of it, so that nothing the registration brings
        // can arrive before the handler is there.
        let shared = self.shared_arc();
        let hid = match shared.events.add(codes.to_vec(), info, f) {
            Ok(hid) => hid,
            Err(e) => {
                done(Err(e));
                return None;
            }
        };
        shared.listen(true);
        let for_done = Arc::clone(&shared);
        shared.submit(
            Request::RegisterEvents {
                codes: codes.to_vec(),
                info: info.to_vec(),
            },
            Box::new(move |r| match r.and_then(|reply| status_result(&reply)) {
                Ok(()) => done(Ok(HandlerId(hid))),
                Err(e) => {
                    unregister_locally(&for_done, hid);
                    done(Err(e));
                }
            }),
        )
    }

    /// Removes a handler (`PMIx_Deregister_event_handler`): once this returns it is not
    /// called again, and no call of it is under way (unless this is called from a handler
    /// or a completion, which does not wait for the server's acknowledgement). The server is
    /// told to withdraw the registration's codes.
    ///
    /// An id that is not registered (any more) is [`Error::BadParam`]. A lost connection is
    /// not an error here: the handler is gone, and so is the server's registration.
    pub fn deregister_event_handler(&self, id: HandlerId) -> Result<(), Error> {
        self.check()?;
        let Some(h) = self.shared().events.remove(id.0) else {
            return Err(Error::BadParam(format!(
                "no event handler registered as {id:?}"
            )));
        };
        self.shared().listen(false);
        let req = Request::DeregisterEvents { codes: h.codes };
        drop(h.f);
        if self.shared().on_reader_thread() {
            self.shared().submit(req, Box::new(|_| {}));
            return Ok(());
        }
        match blocking(self.shared(), None, |done| {
            self.shared().submit(req, on_status(done))
        }) {
            Err(Error::LostConnection) => Ok(()),
            r => r,
        }
    }

    /// Raises an event (`PMIx_Notify_event`) with this process as its source, for the
    /// processes in `range` that registered for `code`.
    ///
    /// The server delivers it relative to this process: `NAMESPACE` to this job, `LOCAL`,
    /// `SESSION` and `GLOBAL` to every client of the server, `CUSTOM` to the processes listed
    /// in `info` under `EVENT_CUSTOM_RANGE` (a proc, or a data array of procs, rank
    /// `WILDCARD` for a whole namespace), `RM` to the host. It never comes back to this
    /// process. `PROC_LOCAL` is this process alone: its own handlers run, on the caller's
    /// thread, before this returns, and nothing is sent. `info` travels with the event;
    /// `TIMEOUT` (seconds) bounds the wait for the server's acknowledgement.
    pub fn notify_event(&self, code: Status, range: DataRange, info: &[Info]) -> Result<(), Error> {
        self.check()?;
        if range == DataRange::PROC_LOCAL {
            self.shared().events.deliver(self.event(code, range, info));
            return Ok(());
        }
        self.check_blocking()?;
        blocking(self.shared(), timeout_of(info), |done| {
            self.send_notify(code, range, info, done)
        })
    }

    /// [`Client::notify_event`] completing through `done` (`PMIx_Notify_event` with a
    /// callback); `done` runs on the reader thread, or at once on the caller's for
    /// `PROC_LOCAL` (after this process's handlers) and when the request cannot be sent.
    pub fn notify_event_nb(
        &self,
        code: Status,
        range: DataRange,
        info: &[Info],
        done: impl FnOnce(Result<(), Error>) + Send + 'static,
    ) {
        if let Err(e) = self.check() {
            return done(Err(e));
        }
        if range == DataRange::PROC_LOCAL {
            self.shared().events.deliver(self.event(code, range, info));
            return done(Ok(()));
        }
        self.send_notify(code, range, info, done);
        self.shared().kick();
    }

    fn event(&self, code: Status, range: DataRange, info: &[Info]) -> Event {
        Event {
            code,
            source: self.proc().clone(),
            range,
            info: info.to_vec(),
        }
    }

    fn send_notify(
        &self,
        code: Status,
        range: DataRange,
        info: &[Info],
        done: impl FnOnce(Result<(), Error>) + Send + 'static,
    ) -> Option<u32> {
        self.shared().submit(
            Request::Notify {
                event: self.event(code, range, info),
            },
            on_status(done),
        )
    }

    /// Events the server sent that no handler took (oldest first, at most 64 kept; taking
    /// them empties the backlog).
    ///
    /// With [`Client::register_event_handler`] this is rarely needed: events reach handlers
    /// as they arrive. What stays here are events of registrations made through
    /// [`Client::request`] (`Request::RegisterEvents`), events that arrived just after their
    /// handler was deregistered, and `PROC_LOCAL` notifications no handler wanted.
    pub fn take_events(&self) -> Vec<Event> {
        self.shared().events.take_backlog()
    }
}
