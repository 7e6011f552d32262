//! The client's sans-IO core: the requests waiting for replies, the store, the wire
//! personality that writes requests and reads answers, and what an answer or an event
//! becomes. No socket, thread, lock or clock: the connection (`conn/`) owns a
//! [`ClientCore`] under its lock, writes what it gives, and feeds it what it reads.
//!
//! Its methods are of four kinds, as quinn-proto's `Connection` has them:
//!
//! - getters: [`ClientCore::store`], [`ClientCore::is_closed`], [`ClientCore::has_pending`];
//! - inputs, `handle_*`: [`ClientCore::handle_frame`] (one whole message the server sent, as
//!   [`Input`] cuts them), [`ClientCore::handle_written`] (a request's bytes left),
//!   [`ClientCore::handle_timeout`] (a timer the core asked for ran out),
//!   [`ClientCore::handle_connected`] (a core on the local wire has a server now),
//!   [`ClientCore::handle_lost`] (the connection is gone), [`ClientCore::handle_close`];
//! - commands: [`ClientCore::submit`], [`ClientCore::cancel`], [`ClientCore::fail`],
//!   [`ClientCore::ingest`], [`ClientCore::store_mut`];
//! - outputs, `poll_*`: [`ClientCore::poll_transmit`] (bytes to write, in the order the
//!   requests were submitted) and [`ClientCore::poll_output`] (completions to run and events
//!   to deliver, in the order the server sent what caused them).
//!
//! After any input or command, the driver takes the bytes to write, then the outputs, and
//! runs the outputs only once it has let go of the core: a completion or an event handler
//! may call the client again.
//!
//! A process with no server (a singleton) has a core on the local wire (`local/`,
//! [`Wire::Local`]): requests are answered as they are submitted, nothing is written, and a
//! request that needs a server says so ([`Submitted::needs_server`]); the driver then gets
//! one and hands the core its wire ([`ClientCore::handle_connected`]).

pub(crate) mod get;
pub(crate) mod local;
pub(crate) mod openpmix;
mod pending;
pub(crate) mod wire;

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use hashbrown::HashMap;
use pmix_types::{Proc, Status};
use pmix_wire::{
    Event, FenceReplyRef, IofChunk, Reply, ReplyBody, Request, ServerMsg, decode_body,
};

use crate::Error;
use crate::store::Store;
use local::Answer;
use pending::Pending;
use wire::{Frame, Wire};

pub(crate) use wire::Input;

/// Something for the driver to do once it has let go of the core.
#[derive(Debug)]
pub(crate) enum Output {
    /// Request `id` is done: run its completion with its outcome.
    Complete(u32, Result<Reply, Error>),
    /// Deliver an event to the handlers.
    Event(Event),
    /// Output a tool pulled (`PMIx_IOF_pull`); no client asks for it.
    Iof(IofChunk),
    /// The connection was lost (not closed by this side): tell the handlers of
    /// `ERR_LOST_CONNECTION`, as this process.
    Lost(Proc),
    /// Call [`ClientCore::handle_timeout`] with request `id` once this has passed.
    Timer(u32, Duration),
}

/// `TIMEOUT` in seconds; zero or negative means none, as in the standard. The last one given
/// counts: the house's one rule, in pmix-types.
pub(crate) use pmix_types::timeout_of;

/// A request [`ClientCore::submit`] took: its bytes wait in [`ClientCore::poll_transmit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Submitted {
    /// What its completion will come under.
    pub(crate) id: u32,
    /// Nothing will answer it: it completes when the driver says its bytes were written
    /// ([`ClientCore::handle_written`]).
    pub(crate) once_written: bool,
    /// It waits for a server, which the local wire has not: the driver is to get one and
    /// call [`ClientCore::handle_connected`] (or fail it).
    pub(crate) needs_server: bool,
}

/// The client's state and protocol logic (see the module documentation).
pub(crate) struct ClientCore {
    wire: Wire,
    pending: Pending,
    store: Store,
    /// The members of the groups this process constructed, by group id: a destruct names
    /// them (an OpenPMIx server wants them).
    groups: HashMap<String, Vec<Proc>>,
    /// This side is closing: a connection ending now is not "lost".
    closing: bool,
    transmit: Vec<u8>,
    out: VecDeque<Output>,
}

impl ClientCore {
    /// A core speaking `wire`, with an empty store.
    pub(crate) fn new(wire: Wire) -> ClientCore {
        ClientCore {
            wire,
            pending: Pending::default(),
            store: Store::default(),
            groups: HashMap::new(),
            closing: false,
            transmit: Vec::with_capacity(4096),
            out: VecDeque::new(),
        }
    }

    // ---- getters ---------------------------------------------------------------------------

    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    /// True once the connection is known to be gone (or closed by this side).
    pub(crate) fn is_closed(&self) -> bool {
        self.pending.closed
    }

    /// True while some request waits for its reply.
    pub(crate) fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// True when the job data of `proc`'s namespace is here.
    pub(crate) fn has_job(&self, proc: &Proc) -> bool {
        self.store.has_job(proc.nspace.as_str())
    }

    // ---- commands --------------------------------------------------------------------------

    pub(crate) fn store_mut(&mut self) -> &mut Store {
        &mut self.store
    }

    pub(crate) fn groups_mut(&mut self) -> &mut HashMap<String, Vec<Proc>> {
        &mut self.groups
    }

    /// Sends `req`: its bytes go to [`ClientCore::poll_transmit`] and its reply, when it
    /// comes, to [`ClientCore::poll_output`] under the id returned. `whole`: the caller hands
    /// the reply on as sent ([`crate::Client::request`]), so a collecting fence's data is
    /// decoded into it rather than only taken into the store, still encoded. An error: it was
    /// not sent (the connection is gone, or the request cannot be written in this protocol).
    pub(crate) fn submit(&mut self, req: Request, whole: bool) -> Result<Submitted, Error> {
        if self.pending.closed {
            return Err(Error::LostConnection);
        }
        let id = self.pending.insert(whole);
        let mut submitted = Submitted {
            id,
            once_written: false,
            needs_server: false,
        };
        if let Wire::Local(responder) = &mut self.wire {
            let mut released = Vec::new();
            let answer = responder.answer(id, req, &mut released);
            for (held, reply) in released {
                self.complete(held, reply);
            }
            match answer {
                Answer::Now(reply) => self.complete(id, reply),
                Answer::Held(Some(after)) => self.out.push_back(Output::Timer(id, after)),
                Answer::Held(None) => {}
                Answer::NeedsServer => submitted.needs_server = true,
            }
            return Ok(submitted);
        }
        submitted.once_written = self.encode(id, req)?;
        Ok(submitted)
    }

    /// Writes request `id`, already filed, to the transmit buffer. True when nothing will
    /// answer it. On error it is no longer filed.
    fn encode(&mut self, id: u32, req: Request) -> Result<bool, Error> {
        match self.wire.encode(id, req, &mut self.transmit) {
            Ok(None) => Ok(false),
            Ok(Some(reply)) => {
                if let Some(w) = self.pending.get_mut(id) {
                    w.once_written = Some(reply);
                }
                Ok(true)
            }
            Err(e) => {
                self.pending.take(id);
                Err(e)
            }
        }
    }

    /// Forgets a request the caller stopped waiting for; a late reply is then dropped.
    pub(crate) fn cancel(&mut self, id: u32) {
        self.pending.take(id);
        if let Wire::Local(responder) = &mut self.wire {
            responder.forget(id);
        }
    }

    /// True while request `id` waits for its reply.
    pub(crate) fn is_waiting(&self, id: u32) -> bool {
        self.pending.contains(id)
    }

    /// Fails request `id` with `e` (its bytes could not be written, or its answer read, or
    /// no server could be had for it).
    pub(crate) fn fail(&mut self, id: u32, e: Error) {
        if let Wire::Local(responder) = &mut self.wire {
            responder.forget(id);
        }
        if self.pending.take(id).is_some() {
            self.out.push_back(Output::Complete(id, Err(e)));
        }
    }

    /// Takes in the data a reply carries (fence collection, a Get's process data and job
    /// data, a connect's), so the next Get of it is local. Failure replies count too: the
    /// server ships a namespace's job data once, possibly with a not-found. Consumes the
    /// payload: the callers that need it afterwards clone first.
    pub(crate) fn ingest(&mut self, reply: Reply) {
        match reply.body {
            ReplyBody::Fence { data } if !data.is_empty() => {
                self.store.insert_proc_kvs(data);
            }
            ReplyBody::Get { data, jobs } => {
                for image in jobs {
                    self.store.insert_image(image);
                }
                if !data.is_empty() {
                    self.store.insert_proc_kvs(data);
                }
            }
            ReplyBody::Connect { jobs, data } => {
                for job in jobs {
                    self.store.insert_job(job);
                }
                if !data.is_empty() {
                    self.store.insert_proc_kvs(data);
                }
            }
            _ => {}
        }
    }

    // ---- inputs ----------------------------------------------------------------------------

    /// Request `id`'s bytes were written: one that nothing answers is complete.
    pub(crate) fn handle_written(&mut self, id: u32) {
        let reply = self.pending.get_mut(id).and_then(|w| w.once_written.take());
        if let Some(reply) = reply {
            self.complete(id, reply);
        }
    }

    /// One whole message from the server. An error means the stream cannot be read any
    /// further (the driver then ends the connection); an answer that does not decode fails
    /// its request alone where the framing allows.
    pub(crate) fn handle_frame(&mut self, frame: Frame<'_>) -> Result<(), Error> {
        match (frame, &mut self.wire) {
            (Frame::Native(body), Wire::Native) => self.handle_native(body, None),
            (Frame::Large(frame, body), Wire::Native) => {
                let bytes = frame.get(body).ok_or_else(|| {
                    Error::Protocol("a frame's body lies outside its storage".into())
                })?;
                self.handle_native(bytes, Some(&frame))
            }
            (Frame::Openpmix { tag, payload }, Wire::Openpmix(session)) => {
                let out = &mut self.out;
                let answer = session.take(tag, payload, |o| out.push_back(o));
                match answer {
                    Some((id, Ok(reply))) => self.complete(id, reply),
                    Some((id, Err(e))) => {
                        tracing::warn!("pmix-client: {e}");
                        self.fail(id, e);
                    }
                    None => {}
                }
                Ok(())
            }
            _ => Err(Error::Protocol(
                "a message in another protocol than the connection's".into(),
            )),
        }
    }

    /// A timer asked for by [`Output::Timer`] ran out: a lookup still held fails with
    /// `ERR_TIMEOUT`.
    pub(crate) fn handle_timeout(&mut self, id: u32) {
        if let Wire::Local(responder) = &mut self.wire {
            if responder.expire(id) {
                self.complete(id, Reply::status(Status::ERR_TIMEOUT));
            }
        }
    }

    /// A core on the local wire has a server now, spoken to over `wire`: what the process
    /// did alone is sent first (replies to it only warn if refused), then the requests that
    /// still wait, under their ids. An error: this core was not on the local wire.
    pub(crate) fn handle_connected(&mut self, wire: Wire) -> Result<(), Error> {
        if !matches!(self.wire, Wire::Local(_)) {
            return Err(Error::Protocol("a connection that has one already".into()));
        }
        let Wire::Local(responder) = std::mem::replace(&mut self.wire, wire) else {
            return Ok(());
        };
        let handed = responder.hand_over();
        for (what, req) in handed.replay {
            let id = self.pending.insert_own(what);
            if let Err(e) = self.encode(id, req) {
                tracing::warn!("pmix-client: the singleton's {what} cannot be sent: {e}");
            }
        }
        for (id, req) in handed.waiting {
            match self.encode(id, req) {
                Ok(false) => {}
                Ok(true) => self.handle_written(id),
                Err(e) => self.fail(id, e),
            }
        }
        Ok(())
    }

    /// This side closes the connection: what ends it from now on is no loss. On the local
    /// wire nothing else will end it: it is closed now, and what still waits fails.
    pub(crate) fn handle_close(&mut self) {
        self.closing = true;
        if let Wire::Local(responder) = &mut self.wire {
            self.pending.closed = true;
            for id in responder.drain_waiting() {
                if self.pending.take(id).is_some() {
                    self.out
                        .push_back(Output::Complete(id, Err(Error::NotInitialized)));
                }
            }
        }
    }

    /// The connection is gone: everything outstanding fails, and everything later.
    pub(crate) fn handle_lost(&mut self) {
        // Lost, rather than closed by this side, and noticed for the first time.
        let lost = !self.pending.closed && !self.closing;
        self.pending.closed = true;
        let failed: Vec<u32> = self.pending.drain().collect();
        for id in failed {
            self.out
                .push_back(Output::Complete(id, Err(Error::LostConnection)));
        }
        if lost {
            if let Some(me) = self.store.me() {
                self.out.push_back(Output::Lost(me.clone()));
            }
        }
    }

    // ---- outputs ---------------------------------------------------------------------------

    /// Moves the bytes to write into `buf` (appending). False when there were none.
    pub(crate) fn poll_transmit(&mut self, buf: &mut Vec<u8>) -> bool {
        if self.transmit.is_empty() {
            return false;
        }
        if buf.is_empty() {
            std::mem::swap(buf, &mut self.transmit);
        } else {
            buf.append(&mut self.transmit);
        }
        // Don't let one huge commit pin its buffer for the life of the process.
        if self.transmit.capacity() > 1 << 20 {
            self.transmit = Vec::with_capacity(4096);
        }
        true
    }

    /// The next thing for the driver to do, in order.
    pub(crate) fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    // ---- internals -------------------------------------------------------------------------

    fn complete(&mut self, id: u32, reply: Reply) {
        match self.pending.take(id) {
            Some(w) => match w.own {
                None => self.out.push_back(Output::Complete(id, Ok(reply))),
                Some(what) if reply.status != Status::SUCCESS => tracing::warn!(
                    "pmix-client: the server refused the singleton's {what}: {:?}",
                    reply.status
                ),
                Some(_) => {}
            },
            None => tracing::debug!("pmix-client: reply to unknown or cancelled request {id}"),
        }
    }

    /// One native frame: a reply completes its request, an event goes to the handlers.
    /// `owner`, when given, holds `body`.
    fn handle_native(&mut self, body: &[u8], owner: Option<&Bytes>) -> Result<(), Error> {
        if let Some(f) = pmix_wire::peek_fence_reply(body) {
            if self.complete_fence(&f, owner)? {
                return Ok(());
            }
        }
        let msg: ServerMsg = decode_body(body)?;
        match msg {
            ServerMsg::Reply { id, reply } => self.complete(id, reply),
            ServerMsg::Event(ev) => self.out.push_back(Output::Event(ev)),
            ServerMsg::Iof(chunk) => self.out.push_back(Output::Iof(chunk)),
            other => tracing::debug!("pmix-client: ignoring unknown server message {other:?}"),
        }
        Ok(())
    }

    /// Takes in a collecting fence's data still encoded (docs/ARCHITECTURE.md, `pmix-client`),
    /// then completes the fence with a reply that no longer carries it. A caller that wants the
    /// reply as sent has it decoded whole instead: `false` then, and nothing is done here.
    ///
    /// The data is taken even if nobody waits any more (a fence given up on): the server
    /// counts it as delivered and will not send it again.
    ///
    /// `owner`, when given, holds the frame `f` was found in: the data is kept as a slice of
    /// it rather than copied.
    fn complete_fence(
        &mut self,
        f: &FenceReplyRef<'_>,
        owner: Option<&Bytes>,
    ) -> Result<bool, Error> {
        if self.pending.wants_whole(f.id) {
            return Ok(false);
        }
        if !f.procs.is_empty() {
            self.store
                .insert_fence(f, owner)
                .map_err(|e| Error::Protocol(format!("fence reply: {e}")))?;
        }
        self.complete(
            f.id,
            Reply {
                status: f.status,
                body: ReplyBody::Fence { data: Vec::new() },
            },
        );
        Ok(true)
    }
}

#[cfg(test)]
mod tests;
