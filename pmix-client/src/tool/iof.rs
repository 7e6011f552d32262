//! A tool's I/O forwarding (`PMIx_IOF_pull`, `PMIx_IOF_deregister`, `PMIx_IOF_push`), and the
//! receive loop that delivers what servers send a tool unasked.
//!
//! A [`Tool`] has no thread of its own: what a server sends unasked ([`Unsolicited`]: pulled
//! output, events) is read while a call waits for its answer, or while [`Tool::progress`]
//! waits, and dispatched then, on the caller's thread: output to the handler of its pull,
//! events into the queue [`Tool::next_event`] and [`Tool::take_events`] read (`control.rs`). A tool
//! that wants output as it comes calls [`Tool::progress`] in a loop (`pmixps --tail` does).
//! Each link keeps at most a few thousand undispatched messages, dropping the oldest.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use pmix_types::{Info, IofChannel, Proc, attr};
use pmix_wire::{Event, IofChunk, ReplyBody, Request};

use super::Tool;
use super::wire::Unsolicited;
use crate::Error;

/// Handles the chunks of one pull.
pub type IofHandler = Box<dyn FnMut(&IofChunk) + Send>;

/// Events kept for [`Tool::next_event`] and [`Tool::take_events`] at most; beyond, the
/// oldest go.
const MAX_EVENTS: usize = 256;

/// One pull of this tool.
pub(super) struct Pull {
    /// The server it was made at, and that server's id for it.
    server: Proc,
    id: u64,
    handler: IofHandler,
}

/// What a tool keeps for I/O forwarding and unasked messages.
#[derive(Default)]
pub(super) struct Inbox {
    /// By this tool's own number for each pull (the tag its chunks carry).
    pulls: std::collections::HashMap<u64, Pull>,
    next_tag: u64,
    events: VecDeque<Event>,
}

/// A pull, as [`Tool::iof_pull`] returns it, for [`Tool::iof_deregister`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct IofPull(u64);

impl Tool {
    /// Asks the primary server to forward `procs`' output on `channels` (`STDOUT`, `STDERR`,
    /// `STDDIAG`, a bit set; rank `WILDCARD` for a whole job) to `handler`
    /// (`PMIx_IOF_pull`), dressed as `directives` say (`IOF_TAG_OUTPUT`,
    /// `IOF_TIMESTAMP_OUTPUT`, `IOF_XML_OUTPUT`). Output written before the pull is not
    /// sent (pmix-rs servers cache none). The handler runs on this thread, in
    /// [`Tool::progress`] and in any other call.
    pub fn iof_pull(
        &mut self,
        procs: &[Proc],
        channels: IofChannel,
        directives: Vec<Info>,
        handler: impl FnMut(&IofChunk) + Send + 'static,
    ) -> Result<IofPull, Error> {
        let tag = self.inbox.next_tag;
        self.inbox.next_tag += 1;
        let server = self.server().cloned().ok_or(Error::NotInitialized)?;
        // Registered first: chunks may come right behind the answer.
        self.inbox.pulls.insert(
            tag,
            Pull {
                server,
                id: u64::MAX,
                handler: Box::new(handler),
            },
        );
        let reply = self.request(Request::IofPull {
            procs: procs.to_vec(),
            channels,
            directives,
            tag,
        });
        match reply {
            Ok(r) => match r.body {
                ReplyBody::IofPull { id } if r.status.is_success() => {
                    if let Some(p) = self.inbox.pulls.get_mut(&tag) {
                        p.id = id;
                    }
                    Ok(IofPull(tag))
                }
                _ => {
                    self.inbox.pulls.remove(&tag);
                    Err(if r.status.is_success() {
                        Error::Protocol("a pull answered without its id".into())
                    } else {
                        Error::from_status(r.status)
                    })
                }
            },
            Err(e) => {
                self.inbox.pulls.remove(&tag);
                Err(e)
            }
        }
    }

    /// Ends a pull (`PMIx_IOF_deregister`): its handler is called no more.
    pub fn iof_deregister(&mut self, pull: IofPull) -> Result<(), Error> {
        let p = self
            .inbox
            .pulls
            .remove(&pull.0)
            .ok_or_else(|| Error::BadParam(format!("no pull {}", pull.0)))?;
        let i = self.index_of(&p.server)?;
        let link = &mut self.servers[i];
        let reply = link.request(Request::IofDeregister {
            id: p.id,
            directives: Vec::new(),
        })?;
        if reply.status.is_success() {
            Ok(())
        } else {
            Err(Error::from_status(reply.status))
        }
    }

    /// Sends `data` to `targets`' stdin through the primary server (`PMIx_IOF_push`; no
    /// targets: the server's choice, rank 0 of pmixrun's job). `ERR_OUT_OF_RESOURCE` when a
    /// target's input queue is full: try again later.
    pub fn iof_push(&mut self, targets: &[Proc], data: &[u8]) -> Result<(), Error> {
        self.push(targets, Some(data.to_vec()), Vec::new())
    }

    /// Ends `targets`' input (`PMIx_IOF_push` with `IOF_COMPLETE`): their stdin closes once
    /// what was pushed is written.
    pub fn iof_push_end(&mut self, targets: &[Proc]) -> Result<(), Error> {
        self.push(
            targets,
            None,
            vec![Info::attr(
                attr::IOF_COMPLETE,
                pmix_types::Value::Bool(true),
            )],
        )
    }

    fn push(
        &mut self,
        targets: &[Proc],
        data: Option<Vec<u8>>,
        directives: Vec<Info>,
    ) -> Result<(), Error> {
        let reply = self.request(Request::IofPush {
            targets: targets.to_vec(),
            directives,
            data,
        })?;
        if reply.status.is_success() {
            Ok(())
        } else {
            Err(Error::from_status(reply.status))
        }
    }

    /// Waits up to `timeout` for the primary server to send something unasked, dispatching
    /// all that came (from every server); returns how many messages were dispatched. A
    /// connection lost is an error.
    pub fn progress(&mut self, timeout: Duration) -> Result<usize, Error> {
        let mut n = self.dispatch();
        if n > 0 {
            return Ok(n);
        }
        let deadline = Instant::now() + timeout;
        let request_timeout = self.options.timeout;
        let link = self.primary_link()?;
        let got = link.receive(deadline);
        link.set_timeout(request_timeout)?;
        if let Some(u) = got? {
            link.unsolicited.push_front(u);
        }
        n += self.dispatch();
        Ok(n)
    }

    /// The events servers sent that were not read yet, oldest first.
    pub fn take_events(&mut self) -> Vec<Event> {
        self.inbox.events.drain(..).collect()
    }

    /// The oldest event dispatched and not read yet.
    pub(super) fn pop_event(&mut self) -> Option<Event> {
        self.inbox.events.pop_front()
    }

    /// Hands what every link kept to its receiver.
    pub(super) fn dispatch(&mut self) -> usize {
        let mut n = 0;
        for link in &mut self.servers {
            while let Some(u) = link.unsolicited.pop_front() {
                n += 1;
                match u {
                    Unsolicited::Iof(c) => {
                        if let Some(p) = self.inbox.pulls.get_mut(&c.tag) {
                            (p.handler)(&c);
                        }
                    }
                    Unsolicited::Event(e) => {
                        if self.inbox.events.len() >= MAX_EVENTS {
                            self.inbox.events.pop_front();
                        }
                        self.inbox.events.push_back(e);
                    }
                }
            }
        }
        n
    }
}
