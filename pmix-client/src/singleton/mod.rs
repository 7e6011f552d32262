//! A singleton: a process started with no PMIx server in its environment, which is then a
//! job of its own, as under OpenPMIx and MPICH (see `docs/ARCHITECTURE.md`, `pmix-client`).
//!
//! [`Singleton`] is how the connection (`crate::conn`) sends when there is no server: it answers
//! every request in the process, at once, on the caller's thread. What one process can do
//! alone works (commit, fences and connects over itself, its own names, event registrations);
//! what needs other processes fails with `ERR_UNREACH`, the status OpenPMIx gives when its
//! server is unreachable. A spawn is the exception: it starts a private server (pmixrun
//! adopting this process as rank 0 of its job, `private_server.rs`), connects to it, hands it
//! what the process committed, published and registered for, and from then on every request
//! goes there, the singleton being an ordinary client.

mod job;
mod names;
mod private_server;

use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

use hashbrown::HashMap;
use parking_lot::Mutex;
use pmix_types::{Info, Key, Proc, Rank, Status, Value, attr};
use pmix_wire::{JobData, Kv, Reply, ReplyBody, Request};

use crate::Error;
use crate::call::timeout_of;
use crate::conn::{Completion, Conn};
use crate::event_registry::Events;

pub(crate) use job::{hostname, job_data, nspace};

use names::Names;
use private_server::PrivateServer;

/// The status of what a singleton cannot do alone.
pub(crate) const NEEDS_SERVER: Status = Status::ERR_UNREACH;

/// A singleton's answers, and its private server once a spawn started one.
pub(crate) struct Singleton {
    me: Proc,
    state: Arc<Mutex<State>>,
    upstream: OnceLock<Upstream>,
    /// Serialises starting the private server.
    starting: Mutex<()>,
}

/// The private server and the connection to it.
struct Upstream {
    conn: Conn,
    server: PrivateServer,
}

#[derive(Default)]
struct State {
    /// Everything committed, a later commit of a key replacing the earlier value: what a
    /// private server is given.
    committed: Vec<Kv>,
    names: Names,
    /// Event registrations (codes, directives) in force, for a private server.
    registrations: Vec<(Vec<Status>, Vec<Info>)>,
    /// Lookups held by `WAIT`, by token.
    held: HashMap<u32, Held>,
    next_token: u32,
}

struct Held {
    keys: Vec<Key>,
    info: Vec<Info>,
    need: usize,
    done: Completion,
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

impl Singleton {
    /// The singleton `me`.
    pub(crate) fn new(me: Proc) -> Singleton {
        Singleton {
            me,
            state: Arc::default(),
            upstream: OnceLock::new(),
            starting: Mutex::new(()),
        }
    }

    /// The connection to the private server, once a spawn started one.
    pub(crate) fn upstream(&self) -> Option<&Conn> {
        self.upstream.get().map(|u| &u.conn)
    }

    /// Answers `req`, or hands it to the private server; `done` runs on this thread unless the
    /// request was held (a lookup's `WAIT`) or went to the private server. Returns the id to
    /// cancel it by, if it waits.
    pub(crate) fn submit(
        &self,
        events: &Arc<Events>,
        req: Request,
        done: Completion,
    ) -> Option<u32> {
        if let Some(up) = self.upstream() {
            return up.shared.submit_whole(req, done);
        }
        if matches!(req, Request::Spawn { .. }) {
            return match self.start_server(events) {
                Ok(up) => up.shared.submit_whole(req, done),
                Err(e) => {
                    done(Err(e));
                    None
                }
            };
        }
        let (held, released) = {
            let mut st = self.state.lock();
            // A spawn on another thread may have moved everything to the private server
            // while this one waited for the lock (see `start_server`).
            if let Some(up) = self.upstream() {
                drop(st);
                return up.shared.submit_whole(req, done);
            }
            self.answer(&mut st, req, done)
        };
        for (done, reply) in released {
            done(Ok(reply));
        }
        held
    }

    /// Forgets a held lookup the caller stopped waiting for.
    pub(crate) fn cancel(&self, id: u32) {
        match self.upstream() {
            Some(up) => up.shared.cancel(id),
            None => drop(self.state.lock().held.remove(&id)),
        }
    }

    /// Answers a request under the state's lock. Returns the token of a lookup held, and the
    /// completions to run after the lock with their replies (the request's own, and those of
    /// held lookups a publish released).
    fn answer(
        &self,
        st: &mut State,
        req: Request,
        done: Completion,
    ) -> (Option<u32>, Vec<(Completion, Reply)>) {
        let mut released = Vec::new();
        let reply = match req {
            Request::Commit { kvs } => {
                for kv in kvs {
                    st.committed.retain(|k| k.key != kv.key);
                    st.committed.push(kv);
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
                let s = st.names.publish(data, info);
                if s == Status::SUCCESS {
                    released = self.release_held(st);
                }
                status(s)
            }
            Request::Lookup { keys, info } => {
                let need = match names::wait_for(&info, keys.len()) {
                    Ok(n) => n,
                    Err(s) => return (None, vec![(done, status(s))]),
                };
                match st.names.lookup(&self.me, &keys, need.unwrap_or(1)) {
                    Some(found) => Reply {
                        status: Status::SUCCESS,
                        body: ReplyBody::Lookup { found },
                    },
                    None if need.is_none() => status(Status::ERR_NOT_FOUND),
                    None => {
                        let token = st.next_token;
                        st.next_token = st.next_token.wrapping_add(1);
                        let timeout = timeout_of(&info);
                        st.held.insert(
                            token,
                            Held {
                                keys,
                                info,
                                need: need.unwrap_or(1),
                                done,
                            },
                        );
                        if let Some(t) = timeout {
                            expire_later(Arc::downgrade(&self.state), token, t);
                        }
                        return (Some(token), released);
                    }
                }
            }
            Request::Unpublish { keys, .. } => status(st.names.unpublish(&keys)),
            Request::RegisterEvents { codes, info } => {
                st.registrations.push((codes, info));
                status(Status::SUCCESS)
            }
            Request::DeregisterEvents { codes } => {
                if let Some(i) = st.registrations.iter().position(|(c, _)| *c == codes) {
                    st.registrations.remove(i);
                }
                status(Status::SUCCESS)
            }
            // Nobody else is in any range: the event reaches no one (it never comes back to
            // its source, launched or not).
            Request::Notify { .. } => status(Status::SUCCESS),
            Request::Log { data, .. } => status(log(&self.me, &data)),
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
            // Queries (other jobs, the system), job control: a launcher's to answer.
            _ => status(NEEDS_SERVER),
        };
        released.push((done, reply));
        (None, released)
    }

    /// Held lookups a publish completed, taken out with their answers.
    fn release_held(&self, st: &mut State) -> Vec<(Completion, Reply)> {
        let tokens: Vec<u32> = st.held.keys().copied().collect();
        let mut out = Vec::new();
        for t in tokens {
            let Some(h) = st.held.get(&t) else { continue };
            let (keys, need) = (h.keys.clone(), h.need);
            if let Some(found) = st.names.lookup(&self.me, &keys, need) {
                if let Some(h) = st.held.remove(&t) {
                    let reply = Reply {
                        status: Status::SUCCESS,
                        body: ReplyBody::Lookup { found },
                    };
                    out.push((h.done, reply));
                }
            }
        }
        out
    }

    /// Starts the private server and moves this process's state there (see the module
    /// documentation); once only.
    fn start_server(&self, events: &Arc<Events>) -> Result<&Conn, Error> {
        let _one = self.starting.lock();
        if let Some(up) = self.upstream() {
            return Ok(up);
        }
        let (server, rv) = PrivateServer::start(&self.me)?;
        let (conn, _job) = Conn::open_with_events(&rv, Arc::clone(events))?;
        conn.shared.store_mut().set_me(self.me.clone());
        // Events come whenever the server sends them: read all the time.
        conn.shared.listen(true);
        // Under the state's lock until the connection is in place, so that no other thread's
        // commit or publish is answered here after the state was handed over.
        let mut st = self.state.lock();
        let held: Vec<Held> = st.held.drain().map(|(_, h)| h).collect();
        let committed = std::mem::take(&mut st.committed);
        let published = st.names.take_all();
        let registrations = std::mem::take(&mut st.registrations);
        // In this order on one connection, which the server serves in order: the spawn that
        // follows finds them done.
        let warn = |what: &'static str| -> Completion {
            Box::new(move |r| match r {
                Ok(reply) if reply.status == Status::SUCCESS => {}
                Ok(reply) => tracing::warn!(
                    "pmix-client: the private server refused the singleton's {what}: {:?}",
                    reply.status
                ),
                Err(e) => tracing::warn!("pmix-client: the singleton's {what}: {e}"),
            })
        };
        conn.shared
            .submit_whole(Request::Commit { kvs: committed }, warn("commit"));
        for (data, info) in published {
            conn.shared
                .submit_whole(Request::Publish { data, info }, warn("publish"));
        }
        for (codes, info) in registrations {
            conn.shared.submit_whole(
                Request::RegisterEvents { codes, info },
                warn("event registration"),
            );
        }
        let _ = self.upstream.set(Upstream { conn, server });
        drop(st);
        let up = self
            .upstream()
            .ok_or_else(|| Error::Protocol("the private server's connection was lost".into()))?;
        // Outside the lock: a completion that fails at once may call the client again.
        for h in held {
            let req = Request::Lookup {
                keys: h.keys,
                info: h.info,
            };
            up.shared.submit_whole(req, h.done);
        }
        Ok(up)
    }

    /// Ends it all: held lookups fail, the private server's connection is closed and the
    /// server let go (it ends once the processes it started have).
    pub(crate) fn close(&self) {
        let held: Vec<Held> = self.state.lock().held.drain().map(|(_, h)| h).collect();
        for h in held {
            (h.done)(Err(Error::NotInitialized));
        }
        if let Some(up) = self.upstream.get() {
            up.conn.close();
            up.server.release();
        }
    }

    /// The job data this singleton starts with.
    pub(crate) fn job(&self) -> JobData {
        job_data(&self.me.nspace, &hostname())
    }
}

/// Fails the held lookup `token` with `ERR_TIMEOUT` once `after` has passed, unless it was
/// answered (or the singleton is gone) by then. A thread of its own: a singleton has no
/// event loop, and lookups that wait with a timeout are few.
fn expire_later(state: Weak<Mutex<State>>, token: u32, after: Duration) {
    let deadline = Instant::now() + after;
    let spawned = std::thread::Builder::new()
        .name("pmix-singleton-timer".into())
        .spawn(move || {
            while let Some(left) = deadline.checked_duration_since(Instant::now()) {
                std::thread::sleep(left);
            }
            let held = state.upgrade().and_then(|s| s.lock().held.remove(&token));
            if let Some(h) = held {
                (h.done)(Ok(Reply::status(Status::ERR_TIMEOUT)));
            }
        });
    if let Err(e) = spawned {
        tracing::warn!("pmix-client: no timer thread for a lookup's TIMEOUT: {e}");
    }
}

/// `PMIx_Log` of a singleton: `LOG_STDERR` and `LOG_STDOUT` entries are written there, with
/// the process named as a launcher names it; other channels need a launcher.
fn log(me: &Proc, data: &[Info]) -> Status {
    use std::io::Write;
    let mut done = false;
    for d in data {
        let text = match &d.value {
            Value::String(s) => s.as_str(),
            _ => continue,
        };
        let line = format!("[{me}] {text}\n");
        let written = match d.key.as_str() {
            attr::LOG_STDERR => std::io::stderr().write_all(line.as_bytes()),
            attr::LOG_STDOUT => std::io::stdout().write_all(line.as_bytes()),
            _ => continue,
        };
        if written.is_err() {
            return Status::ERROR;
        }
        done = true;
    }
    if done { Status::SUCCESS } else { NEEDS_SERVER }
}
