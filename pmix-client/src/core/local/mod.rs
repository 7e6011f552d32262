//! The local wire: the answers of a singleton, a process started with no PMIx server in its
//! environment, which is then a job of its own, as under OpenPMIx and MPICH (see
//! `docs/ARCHITECTURE.md`, `pmix-client`).
//!
//! [`Responder`] answers every request in the process, at once, as the core takes it. What
//! one process can do alone works (commit, fences and connects over itself, its own names,
//! event registrations); what needs other processes fails with `ERR_UNREACH`, the status
//! OpenPMIx gives when its server is unreachable. A spawn is the exception: it waits for a
//! server ([`Answer::NeedsServer`]), which the driver gets (`singleton/`: a private pmixrun
//! adopting this process); the core then swaps this wire for the native one and hands the
//! server what the process committed, published and registered for ([`Responder::hand_over`]),
//! and from then on the singleton is an ordinary client.
//!
//! Sans-IO: a lookup held by `WAIT` with a `TIMEOUT` asks the driver for a timer
//! ([`Answer::Held`]); `PMIx_Log` lines go to the [`Console`] the driver gave.

mod names;

use std::collections::BTreeMap;
use std::time::Duration;

use pmix_types::{Info, Key, Proc, Rank, Status, Value, attr};
use pmix_wire::{Kv, Reply, ReplyBody, Request};

use super::timeout_of;
use names::Names;

/// The status of what a singleton cannot do alone.
pub(crate) const NEEDS_SERVER: Status = Status::ERR_UNREACH;

/// Where a singleton's `PMIx_Log` lines go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Channel {
    Stdout,
    Stderr,
}

/// Writes a log line (ended by a newline) to the process's stdout or stderr; false when the
/// write failed. The driver's, as the core does no I/O.
pub(crate) type Console = Box<dyn Fn(Channel, &str) -> bool + Send + Sync>;

/// What became of a request.
#[derive(Debug)]
pub(crate) enum Answer {
    /// Its reply.
    Now(Reply),
    /// A lookup held by `WAIT` until another thread publishes; with a `TIMEOUT`, it fails
    /// with `ERR_TIMEOUT` once that has passed ([`Responder::expire`]).
    Held(Option<Duration>),
    /// It needs a server (a spawn): kept until the core has one.
    NeedsServer,
}

/// What the server the singleton gets must be told, in order.
pub(crate) struct HandOver {
    /// The process's state, to send first (what each is, for a warning if refused).
    pub(crate) replay: Vec<(&'static str, Request)>,
    /// Requests still waiting, by id: held lookups, then the requests that asked for the
    /// server.
    pub(crate) waiting: Vec<(u32, Request)>,
}

/// A lookup held by `WAIT`.
struct Held {
    keys: Vec<Key>,
    info: Vec<Info>,
    need: usize,
}

/// A singleton's answers and the state a server would otherwise keep.
pub(crate) struct Responder {
    me: Proc,
    console: Console,
    /// Everything committed, a later commit of a key replacing the earlier value: what a
    /// private server is given.
    committed: Vec<Kv>,
    names: Names,
    /// Event registrations (codes, directives) in force, for a private server.
    registrations: Vec<(Vec<Status>, Vec<Info>)>,
    /// Lookups held by `WAIT`, by request id.
    held: BTreeMap<u32, Held>,
    /// Requests waiting for a server, in order.
    parked: Vec<(u32, Request)>,
}

fn status(s: Status) -> Reply {
    Reply::status(s)
}

/// True when every process of `procs` is this one (rank 0 or `WILDCARD` of its namespace).
fn only_me(me: &Proc, procs: &[Proc]) -> Result<(), Status> {
    for p in procs {
        if p.nspace != me.nspace {
            return Err(NEEDS_SERVER);
        }
        if p.rank != me.rank && p.rank != Rank::WILDCARD {
            // A rank of a job of one that does not exist.
            return Err(Status::ERR_BAD_PARAM);
        }
    }
    Ok(())
}

impl Responder {
    /// The answers of singleton `me`, its log going to `console`.
    pub(crate) fn new(me: Proc, console: Console) -> Responder {
        Responder {
            me,
            console,
            committed: Vec::new(),
            names: Names::default(),
            registrations: Vec::new(),
            held: BTreeMap::new(),
            parked: Vec::new(),
        }
    }

    /// Answers request `id`. Held lookups a publish completed are appended to `released`
    /// with their replies.
    pub(crate) fn answer(
        &mut self,
        id: u32,
        req: Request,
        released: &mut Vec<(u32, Reply)>,
    ) -> Answer {
        let reply = match req {
            Request::Commit { kvs } => {
                for kv in kvs {
                    self.committed.retain(|k| k.key != kv.key);
                    self.committed.push(kv);
                }
                status(Status::SUCCESS)
            }
            Request::Fence { procs, .. } => match only_me(&self.me, &procs) {
                Ok(()) => Reply {
                    status: Status::SUCCESS,
                    body: ReplyBody::Fence { data: Vec::new() },
                },
                Err(s) => status(s),
            },
            Request::Connect { procs, .. } => match only_me(&self.me, &procs) {
                Ok(()) => Reply {
                    status: Status::SUCCESS,
                    body: ReplyBody::Connect {
                        jobs: Vec::new(),
                        data: Vec::new(),
                    },
                },
                Err(s) => status(s),
            },
            Request::Disconnect { procs, .. } => {
                status(only_me(&self.me, &procs).err().unwrap_or(Status::SUCCESS))
            }
            // Reaches here only when the store has no answer: another process's data.
            Request::Get { proc, .. } => status(match only_me(&self.me, &[proc]) {
                Ok(()) | Err(Status::ERR_BAD_PARAM) => Status::ERR_NOT_FOUND,
                Err(s) => s,
            }),
            Request::Publish { data, info } => {
                let s = self.names.publish(data, info);
                if s == Status::SUCCESS {
                    self.release_held(released);
                }
                status(s)
            }
            Request::Lookup { keys, info } => {
                let need = match names::wait_for(&info, keys.len()) {
                    Ok(n) => n,
                    Err(s) => return Answer::Now(status(s)),
                };
                match self.names.lookup(&self.me, &keys, need.unwrap_or(1)) {
                    Some(found) => Reply {
                        status: Status::SUCCESS,
                        body: ReplyBody::Lookup { found },
                    },
                    None if need.is_none() => status(Status::ERR_NOT_FOUND),
                    None => {
                        let timeout = timeout_of(&info);
                        let need = need.unwrap_or(1);
                        self.held.insert(id, Held { keys, info, need });
                        return Answer::Held(timeout);
                    }
                }
            }
            Request::Unpublish { keys, .. } => status(self.names.unpublish(&keys)),
            Request::RegisterEvents { codes, info } => {
                self.registrations.push((codes, info));
                status(Status::SUCCESS)
            }
            Request::DeregisterEvents { codes } => {
                if let Some(i) = self.registrations.iter().position(|(c, _)| *c == codes) {
                    self.registrations.remove(i);
                }
                status(Status::SUCCESS)
            }
            // Nobody else is in any range: the event reaches no one (it never comes back to
            // its source, launched or not).
            Request::Notify { .. } => status(Status::SUCCESS),
            Request::Log { data, .. } => status(self.log(&data)),
            Request::GroupConstruct { procs, .. } => match only_me(&self.me, &procs) {
                Ok(()) => Reply {
                    status: Status::SUCCESS,
                    body: ReplyBody::Group {
                        members: vec![self.me.clone()],
                        context_id: None,
                    },
                },
                Err(s) => status(s),
            },
            Request::GroupDestruct { procs, .. } => {
                status(only_me(&self.me, &procs).err().unwrap_or(Status::SUCCESS))
            }
            // The whole job is this process: it is the caller's to end, as MPI_Abort does
            // after PMIx_Abort.
            Request::Abort { procs, .. } => {
                status(only_me(&self.me, &procs).err().unwrap_or(Status::SUCCESS))
            }
            Request::Finalize { .. } => status(Status::SUCCESS),
            spawn @ Request::Spawn { .. } => {
                self.parked.push((id, spawn));
                return Answer::NeedsServer;
            }
            // Queries (other jobs, the system), job control: a launcher's to answer.
            _ => status(NEEDS_SERVER),
        };
        Answer::Now(reply)
    }

    /// Held lookups a publish completed, taken out with their answers.
    fn release_held(&mut self, out: &mut Vec<(u32, Reply)>) {
        let ids: Vec<u32> = self.held.keys().copied().collect();
        for id in ids {
            let Some(h) = self.held.get(&id) else {
                continue;
            };
            if let Some(found) = self.names.lookup(&self.me, &h.keys, h.need) {
                self.held.remove(&id);
                let reply = Reply {
                    status: Status::SUCCESS,
                    body: ReplyBody::Lookup { found },
                };
                out.push((id, reply));
            }
        }
    }

    /// The `TIMEOUT` of held lookup `id` has passed: true if it was still held (it is no
    /// longer).
    pub(crate) fn expire(&mut self, id: u32) -> bool {
        self.held.remove(&id).is_some()
    }

    /// Forgets request `id` (cancelled, or failed by the driver).
    pub(crate) fn forget(&mut self, id: u32) {
        self.held.remove(&id);
        self.parked.retain(|(i, _)| *i != id);
    }

    /// Everything still waiting, by id, taken out (the singleton ends).
    pub(crate) fn drain_waiting(&mut self) -> Vec<u32> {
        let mut ids: Vec<u32> = std::mem::take(&mut self.held).into_keys().collect();
        ids.extend(self.parked.drain(..).map(|(id, _)| id));
        ids
    }

    /// What a server must be told now that there is one (see the module documentation).
    pub(crate) fn hand_over(mut self) -> HandOver {
        let mut replay = vec![(
            "commit",
            Request::Commit {
                kvs: std::mem::take(&mut self.committed),
            },
        )];
        for (data, info) in self.names.take_all() {
            replay.push(("publish", Request::Publish { data, info }));
        }
        for (codes, info) in self.registrations {
            replay.push((
                "event registration",
                Request::RegisterEvents { codes, info },
            ));
        }
        let mut waiting: Vec<(u32, Request)> = self
            .held
            .into_iter()
            .map(|(id, h)| {
                let req = Request::Lookup {
                    keys: h.keys,
                    info: h.info,
                };
                (id, req)
            })
            .collect();
        waiting.extend(self.parked);
        HandOver { replay, waiting }
    }

    /// `PMIx_Log` of a singleton: `LOG_STDERR` and `LOG_STDOUT` entries are written there,
    /// with the process named as a launcher names it; other channels need a launcher.
    fn log(&self, data: &[Info]) -> Status {
        let mut done = false;
        for d in data {
            let text = match &d.value {
                Value::String(s) => s.as_str(),
                _ => continue,
            };
            let channel = match d.key.as_str() {
                attr::LOG_STDERR => Channel::Stderr,
                attr::LOG_STDOUT => Channel::Stdout,
                _ => continue,
            };
            if !(self.console)(channel, &format!("[{}] {text}\n", self.me)) {
                return Status::ERROR;
            }
            done = true;
        }
        if done { Status::SUCCESS } else { NEEDS_SERVER }
    }
}
