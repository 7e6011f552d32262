//! The root's tree thread: what the daemons send becomes the supervisor's events, the
//! launch's control messages, output lines and answers (names, abort, spawn), and the parts of
//! collectives across runs go to their gathering ([`crate::multinode::root::cross`]).

use std::collections::HashSet;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crossbeam_channel::Sender;
use pmix_server::types::Status;
use pmix_server::{Completion, NameServerClient};
use pmix_tree::{Delivery, Topology, Tree, Vertex};

use crate::multinode::msg::{Answer, End, Msg, Req, Started, decode, encode};
use crate::multinode::placed::Placements;
use crate::multinode::root::cross::{Input as CrossInput, Part as CrossPart};
use crate::multinode::root::tools::RootTools;
use crate::node::host::{Event, forward};
use crate::node::output::{Line, Stream};

/// What the root's tree thread hands the thread launching jobs.
#[derive(Debug)]
pub(crate) enum Control {
    Up(Vertex),
    Started(Started),
    AgentFailed(String),
    /// A subtree was lost ([`RootSink::lost`] has its vertices); why, for the user.
    Lost(String),
    Done(Vertex),
}

/// The root's tree thread: turns what arrives into the supervisor's events, the launch's
/// control messages, output lines, and answers.
pub(crate) struct RootSink {
    pub(crate) tree: Arc<OnceLock<Arc<Tree>>>,
    pub(crate) events: Sender<Event>,
    pub(crate) control: Sender<Control>,
    pub(crate) lines: Sender<Line>,
    pub(crate) names: Arc<NameServerClient>,
    pub(crate) places: Arc<Placements>,
    pub(crate) topology: Topology,
    pub(crate) nodes: Vec<String>,
    /// Every daemon lost so far.
    pub(crate) lost: Arc<Mutex<HashSet<Vertex>>>,
    /// The gathering of collectives across runs ([`crate::multinode::root::cross`]); `None` without a
    /// name server shared with other runs, when no namespace of another run can be reached.
    pub(crate) cross: Option<Sender<CrossInput>>,
    /// Where daemons' [`Msg::StdinAck`]s go (the thread forwarding pmixrun's stdin).
    pub(crate) stdin_acks: Sender<Vertex>,
    /// What the daemons' log requests may hold while they wait for the supervisor.
    pub(crate) logs: crate::node::log_budget::LogBudget,
    /// The run's tool entry point, told of the daemons' debugger events.
    pub(crate) tools: Arc<RootTools>,
}

impl RootSink {
    pub(crate) fn deliver(&self, d: Delivery) {
        match d {
            Delivery::Message { from, payload } => {
                if let Some(msg) = decode::<Msg>(&payload) {
                    self.message(from, msg);
                }
            }
            Delivery::Request {
                origin,
                id,
                payload,
            } => match decode::<Req>(&payload) {
                Some(req) => self.request(origin, id, req),
                None => self.respond(origin, id, Err(Status::ERR_UNPACK_FAILURE)),
            },
            Delivery::Lost { vertex, reason } => {
                let topo = self.topology;
                let procs = self.places.procs_on(|v| topo.in_subtree(vertex, v));
                let below = (vertex..topo.size())
                    .filter(|v| *v != vertex && topo.in_subtree(vertex, *v))
                    .count();
                let node = self.nodes.get(vertex as usize).cloned().unwrap_or_default();
                let what = match below {
                    0 => node,
                    n => format!("{node} (and the {n} nodes it started)"),
                };
                self.lost
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend((vertex..topo.size()).filter(|v| topo.in_subtree(vertex, *v)));
                if let Some(cross) = &self.cross {
                    let _ = cross.send(CrossInput::Lost(vertex));
                }
                let _ = self
                    .control
                    .send(Control::Lost(format!("lost {what}: {reason}")));
                let _ = self.events.send(Event::NodeLost {
                    what,
                    reason,
                    procs,
                });
            }
            Delivery::ChildUp(_) | Delivery::ParentLost { .. } => {}
        }
    }

    fn message(&self, from: Vertex, msg: Msg) {
        let event = match msg {
            Msg::Up { vertex, .. } => {
                let _ = self.control.send(Control::Up(vertex));
                return;
            }
            Msg::AgentFailed { message, .. } => {
                let _ = self.control.send(Control::AgentFailed(message));
                return;
            }
            Msg::Started(s) => {
                let _ = self.control.send(Control::Started(s));
                return;
            }
            Msg::Done => {
                let _ = self.control.send(Control::Done(from));
                return;
            }
            Msg::StdinAck => {
                let _ = self.stdin_acks.send(from);
                return;
            }
            Msg::Output(lines) => {
                for l in lines {
                    let _ = self.lines.send(Line {
                        job: l.job,
                        rank: l.rank,
                        stream: if l.stderr {
                            Stream::Stderr
                        } else {
                            Stream::Stdout
                        },
                        bytes: l.bytes,
                        vertex: Some(from),
                    });
                }
                return;
            }
            Msg::Event {
                code,
                source,
                range,
                info,
            } => {
                self.tools.event_elsewhere(code, &source, range, &info);
                return;
            }
            Msg::Connected(p) => Event::Connected(p),
            Msg::Finalized(p) => Event::Finalized(p),
            Msg::Exited { proc, end } => {
                if let Some(cross) = &self.cross {
                    let _ = cross.send(CrossInput::ProcEnded(proc.clone()));
                }
                Event::Exited {
                    proc,
                    status: match end {
                        End::Code(c) => Ok(ExitStatus::from_raw((c & 0xff) << 8)),
                        End::Signal(s) => Ok(ExitStatus::from_raw(s & 0x7f)),
                        End::Error(e) => Err(std::io::Error::other(e)),
                    },
                }
            }
            _ => return,
        };
        let _ = self.events.send(event);
    }

    fn respond(&self, origin: Vertex, id: u64, answer: Result<Answer, Status>) {
        if let Some(tree) = self.tree.get() {
            tree.respond(origin, id, answer.map(|a| encode(&a)));
        }
    }

    /// A completion that sends its answer back through the tree.
    fn completion<T: pmix_server::Outcome>(
        &self,
        origin: Vertex,
        id: u64,
        wrap: impl FnOnce(T) -> Answer + Send + 'static,
    ) -> Completion<T> {
        let tree = self.tree.clone();
        Completion::from_fn(move |r: Result<T, Status>| {
            if let Some(tree) = tree.get() {
                tree.respond(origin, id, r.map(|v| encode(&wrap(v))));
            }
        })
    }

    fn request(&self, origin: Vertex, id: u64, req: Req) {
        match req {
            Req::Abort {
                proc,
                status,
                message,
                procs,
            } => {
                let done = self.completion(origin, id, |()| Answer::Unit);
                let ev = Event::Abort {
                    proc,
                    status,
                    message,
                    procs,
                    done,
                };
                if let Err(crossbeam_channel::SendError(Event::Abort { done, .. })) =
                    self.events.send(ev)
                {
                    done.complete(Ok(()));
                }
            }
            Req::Spawn {
                parent,
                job_info,
                apps,
            } => {
                let done = self.completion(origin, id, Answer::Nspace);
                let ev = Event::Spawn {
                    parent,
                    job_info,
                    apps,
                    done,
                };
                if let Err(crossbeam_channel::SendError(Event::Spawn { done, .. })) =
                    self.events.send(ev)
                {
                    done.complete(Err(Status::ERR_JOB_CANCELED));
                }
            }
            Req::Publish { proc, data, info } => {
                let done = self.completion(origin, id, |()| Answer::Unit);
                self.names
                    .publish(&proc, &data, &info, move |r| done.complete(r));
            }
            Req::Lookup { proc, keys, info } => {
                let done = self.completion(origin, id, Answer::Lookup);
                self.names
                    .lookup(&proc, &keys, &info, move |r| done.complete(r));
            }
            Req::Unpublish { proc, keys, info } => {
                let done = self.completion(origin, id, |()| Answer::Unit);
                self.names
                    .unpublish(&proc, &keys, &info, move |r| done.complete(r));
            }
            Req::Log {
                source,
                data,
                directives,
            } => {
                let done = self.completion(origin, id, |()| Answer::Unit);
                let Some(ticket) = self.logs.take(&data) else {
                    return done.complete(Err(Status::ERR_OUT_OF_RESOURCE));
                };
                let ev = Event::Log {
                    source,
                    data,
                    directives,
                    done,
                    ticket,
                };
                forward(&self.events, ev);
            }
            Req::JobControl {
                requester,
                targets,
                directives,
            } => {
                let done = self.completion(origin, id, Answer::Infos);
                let ev = Event::JobControl {
                    requester,
                    targets,
                    directives,
                    done,
                };
                forward(&self.events, ev);
            }
            Req::Query { asker, queries } => {
                let done = self.completion(origin, id, Answer::Infos);
                let ev = Event::Query {
                    asker,
                    queries,
                    done,
                };
                forward(&self.events, ev);
            }
            Req::CrossRun {
                op,
                key,
                procs,
                info,
                data,
            } => {
                let part = CrossPart {
                    origin,
                    id,
                    op,
                    key,
                    procs,
                    info,
                    data,
                };
                let sent = match &self.cross {
                    Some(cross) => cross.send(CrossInput::Part(part)).is_ok(),
                    None => false,
                };
                if !sent {
                    // No other run is reachable: the namespace named is unknown.
                    self.respond(origin, id, Err(Status::ERR_BAD_PARAM));
                }
            }
            Req::Dmodex { .. } | Req::SettleClient(_) | Req::Restart { .. } => {
                self.respond(origin, id, Err(Status::ERR_NOT_FOUND))
            }
        }
    }
}
