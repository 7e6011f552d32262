//! A tool's session: after `PMIx_tool_init` the process's [`Tool`] lives on one thread of this
//! library, its owner (`pmix-tool`), and every call reaches it as a command over a channel.
//!
//! `Tool` is driven by its caller (`&mut self`, no thread of its own): what servers send
//! unasked (pulled output, events) is read only while a call or [`Tool::progress`] waits.
//! A C tool calls nothing while output arrives (its main thread sleeps in a condition
//! variable), so the owner waits in `Tool::progress` whenever no command is pending, a short
//! slice at a time, and runs the next command between two slices. Owning the tool in one
//! thread rather than locking it keeps the library's callers from ever waiting on a lock the
//! poller holds, and gives the pulls and handlers (which only the owner touches) no lock at
//! all. What the owner hands to C (output, events) it passes on to the progress thread
//! (`progress.rs`) through the closures it is given, never running C code itself.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use pmix_client::tool::{IofPull, Tool};
use pmix_client::{DataRange, Error, Event, Info, IofChannel, IofChunk, Proc, Status};

/// How long the owner waits for a server's message before it looks for commands again: the
/// longest a call waits while the tool is idle.
const POLL_SLICE: Duration = Duration::from_millis(10);

/// What the owner runs for a caller.
type Command = Box<dyn FnOnce(&mut Owner) + Send>;

/// A Rust handler of a tool's events; it runs on the owner thread and must only pass the
/// event on.
pub(crate) type EventFn = Box<dyn Fn(&Event) + Send>;

/// A handle on the running tool; cheap to clone.
#[derive(Clone)]
pub(crate) struct ToolSession {
    commands: Sender<Command>,
}

/// The owner thread's state.
struct Owner {
    /// `None` once finalized: the thread then ends.
    tool: Option<Tool>,
    /// This tool's name while it is attached nowhere (`PMIX_TOOL_NSPACE`/`RANK`, or one made
    /// from the pid).
    unattached_name: Proc,
    /// Registered handlers: their codes (none: every code).
    handlers: Vec<(u64, Vec<Status>, EventFn)>,
    next_handler: u64,
    /// The C API's pull references and the tool's pulls.
    pulls: HashMap<usize, IofPull>,
    next_pull: usize,
    /// The server whose loss was last announced, so a connection lost is announced once.
    announced_loss: Option<Proc>,
}

impl ToolSession {
    /// Starts the owner thread, where `open` makes the tool; answers once it is made.
    pub(crate) fn start(
        unattached_name: Proc,
        open: impl FnOnce() -> Result<Tool, Error> + Send + 'static,
    ) -> Result<ToolSession, Status> {
        let (commands, received) = crossbeam_channel::unbounded::<Command>();
        let (opened, made) = crossbeam_channel::bounded::<Result<(), Status>>(1);
        std::thread::Builder::new()
            .name("pmix-tool".into())
            .spawn(move || match open() {
                Ok(tool) => {
                    let _ = opened.send(Ok(()));
                    let owner = Owner {
                        tool: Some(tool),
                        unattached_name,
                        handlers: Vec::new(),
                        next_handler: 0,
                        pulls: HashMap::new(),
                        next_pull: 0,
                        announced_loss: None,
                    };
                    owner.serve(&received);
                }
                Err(e) => {
                    let _ = opened.send(Err(e.status()));
                }
            })
            .map_err(|_| Status::ERR_OUT_OF_RESOURCE)?;
        // A panic in `open` drops the sender: no tool.
        made.recv().map_err(|_| Status::ERROR)??;
        Ok(ToolSession { commands })
    }

    /// Runs `f` on the owner and waits for its answer (bounded by the tool's request
    /// timeout, which every server exchange has).
    fn owner_call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Owner) -> Result<T, Status> + Send + 'static,
    ) -> Result<T, Status> {
        let (tx, rx) = crossbeam_channel::bounded(1);
        self.commands
            .send(Box::new(move |o| {
                let _ = tx.send(f(o));
            }))
            .map_err(|_| Status::ERR_INIT)?;
        // The owner dropped the command unanswered: it panicked, or the tool was finalized.
        rx.recv().map_err(|_| Status::ERR_INIT)?
    }

    /// Runs `f` on the owner; `done` gets its answer there (it must pass it on, not call C),
    /// or `ERR_INIT` wherever the command is dropped unrun (the tool finalized meanwhile).
    fn owner_call_nb<T: 'static>(
        &self,
        f: impl FnOnce(&mut Owner) -> Result<T, Status> + Send + 'static,
        done: impl FnOnce(Result<T, Status>) + Send + 'static,
    ) {
        let answer = Answer(Some(done), PhantomData);
        // A command refused comes back in the error and is dropped here, answering.
        let _ = self.commands.send(Box::new(move |o| answer.give(f(o))));
    }

    /// Runs `f` on the tool and waits for its answer.
    pub(crate) fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Tool) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Status> {
        self.owner_call(|o| f(o.tool()?).map_err(|e| e.status()))
    }

    /// Runs `f` on the tool; `done` gets its answer on the owner thread.
    pub(crate) fn call_nb<T: 'static>(
        &self,
        f: impl FnOnce(&mut Tool) -> Result<T, Error> + Send + 'static,
        done: impl FnOnce(Result<T, Status>) + Send + 'static,
    ) {
        self.owner_call_nb(|o| f(o.tool()?).map_err(|e| e.status()), done);
    }

    /// This tool's name: at its primary server, or the one it has while attached nowhere.
    pub(crate) fn proc(&self) -> Result<Proc, Status> {
        self.owner_call(|o| {
            let name = o.unattached_name.clone();
            Ok(o.tool()?.proc().cloned().unwrap_or(name))
        })
    }

    /// Registers `f` for the events of `codes` (none: every code) at the primary server;
    /// answers the handler's number.
    pub(crate) fn register_event_handler(
        &self,
        codes: Vec<Status>,
        f: EventFn,
    ) -> Result<u64, Status> {
        self.owner_call(move |o| o.register(codes, f))
    }

    /// [`ToolSession::register_event_handler`] answering through `done`.
    pub(crate) fn register_event_handler_nb(
        &self,
        codes: Vec<Status>,
        f: EventFn,
        done: impl FnOnce(Result<u64, Status>) + Send + 'static,
    ) {
        self.owner_call_nb(move |o| o.register(codes, f), done);
    }

    /// Removes handler `id`; the server is told when no other handler wants its codes.
    pub(crate) fn deregister_event_handler(&self, id: u64) -> Result<(), Status> {
        self.owner_call(move |o| {
            let at = o
                .handlers
                .iter()
                .position(|h| h.0 == id)
                .ok_or(Status::ERR_BAD_PARAM)?;
            let (_, codes, _) = o.handlers.remove(at);
            if o.handlers.iter().any(|h| h.1 == codes) {
                return Ok(());
            }
            o.tool()?.deregister_events(&codes).map_err(|e| e.status())
        })
    }

    /// Pulls `procs`' output on `channels` to the handler `handler_of` makes for the pull's
    /// reference (it runs on the owner thread, and may run before this answers); answers
    /// the reference.
    pub(crate) fn iof_pull<H: FnMut(&IofChunk) + Send + 'static>(
        &self,
        procs: Vec<Proc>,
        channels: IofChannel,
        directives: Vec<Info>,
        handler_of: impl FnOnce(usize) -> H + Send + 'static,
    ) -> Result<usize, Status> {
        self.owner_call(move |o| {
            let id = o.next_pull;
            let pull = o
                .tool()?
                .iof_pull(&procs, channels, directives, handler_of(id))
                .map_err(|e| e.status())?;
            o.next_pull += 1;
            o.pulls.insert(id, pull);
            Ok(id)
        })
    }

    /// Ends pull `id`; `done` gets the answer on the owner thread.
    pub(crate) fn iof_deregister(
        &self,
        id: usize,
        done: impl FnOnce(Result<(), Status>) + Send + 'static,
    ) {
        self.owner_call_nb(
            move |o| {
                let pull = o.pulls.remove(&id).ok_or(Status::ERR_BAD_PARAM)?;
                o.tool()?.iof_deregister(pull).map_err(|e| e.status())
            },
            done,
        );
    }

    /// Finalizes the tool at every server; the owner thread then ends.
    pub(crate) fn finalize(&self) -> Result<(), Status> {
        self.owner_call(|o| {
            o.handlers.clear();
            let tool = o.tool.take().ok_or(Status::ERR_INIT)?;
            tool.finalize().map_err(|e| e.status())
        })
    }
}

/// The completion of a command run for a non-blocking call: given the command's result, or
/// `ERR_INIT` when dropped without one.
struct Answer<T, D: FnOnce(Result<T, Status>)>(Option<D>, PhantomData<fn(T)>);

impl<T, D: FnOnce(Result<T, Status>)> Answer<T, D> {
    fn give(mut self, result: Result<T, Status>) {
        if let Some(done) = self.0.take() {
            done(result);
        }
    }
}

impl<T, D: FnOnce(Result<T, Status>)> Drop for Answer<T, D> {
    fn drop(&mut self) {
        if let Some(done) = self.0.take() {
            done(Err(Status::ERR_INIT));
        }
    }
}

impl Owner {
    fn tool(&mut self) -> Result<&mut Tool, Status> {
        self.tool.as_mut().ok_or(Status::ERR_INIT)
    }

    fn register(&mut self, codes: Vec<Status>, f: EventFn) -> Result<u64, Status> {
        self.tool()?
            .register_events(&codes)
            .map_err(|e| e.status())?;
        let id = self.next_handler;
        self.next_handler += 1;
        self.handlers.push((id, codes, f));
        Ok(id)
    }

    /// Runs commands as they come and waits for servers' messages in between, until the
    /// tool is finalized or every handle is gone.
    fn serve(mut self, commands: &Receiver<Command>) {
        while self.tool.is_some() {
            let command = match commands.try_recv() {
                Ok(c) => Some(c),
                Err(TryRecvError::Disconnected) => return,
                // Nothing to wait for (attached nowhere, or the connection is lost): wait
                // for the next command instead.
                Err(TryRecvError::Empty) if !self.wait_for_servers() => match commands.recv() {
                    Ok(c) => Some(c),
                    Err(_) => return,
                },
                Err(TryRecvError::Empty) => None,
            };
            if let Some(c) = command {
                // A panicking command drops its answer channel: its caller hears ERR_INIT.
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| c(&mut self)));
            }
            self.deliver_events();
        }
    }

    /// Waits one slice for what servers send unasked; false when there is nothing to wait on.
    fn wait_for_servers(&mut self) -> bool {
        let Some(tool) = self.tool.as_mut() else {
            return false;
        };
        match tool.progress(POLL_SLICE) {
            Ok(_) => true,
            Err(Error::LostConnection) => {
                let server = tool.server().cloned();
                if server.is_some() && server != self.announced_loss {
                    self.announced_loss.clone_from(&server);
                    if let Some(source) = server {
                        self.hand_out(&Event {
                            code: Status::ERR_LOST_CONNECTION_TO_SERVER,
                            source,
                            range: DataRange::PROC_LOCAL,
                            info: Vec::new(),
                        });
                    }
                }
                false
            }
            Err(_) => false,
        }
    }

    /// Hands the events the tool received to the handlers that want them.
    fn deliver_events(&mut self) {
        let events = match self.tool.as_mut() {
            Some(t) => t.take_events(),
            None => return,
        };
        for ev in &events {
            self.hand_out(ev);
        }
    }

    fn hand_out(&self, ev: &Event) {
        for (_, codes, f) in &self.handlers {
            if codes.is_empty() || codes.contains(&ev.code) {
                f(ev);
            }
        }
    }
}
