//! Gets: answered from the store when the process's data is here, parked until it commits
//! otherwise (its node asked by direct modex when it lives elsewhere), failed when it is gone
//! or its deadline passes; reserved keys of any process answered from job data.
//!
//! A Get may also wait for one key (`PMIX_REQUIRED_KEY`, or, when the data is fetched from
//! another node, the key asked for): it is released only once the process's data holds that
//! key, whatever it committed before. A direct modex sent to another node carries the key to
//! wait for and the Get's `PMIX_TIMEOUT`, and the node asked parks the request the same way
//! (as OpenPMIx 5's servers and PRRTE do), so a get racing a peer's later commit of the key
//! is answered when the key is there, not with `NOT_FOUND` from the peer's earlier data.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use pmix_types::{Info, Key, Proc, Rank, Scope, Status, attr};
use pmix_wire::{Kv, ProcKvs, Reply, ReplyBody};

use super::host_ops::{HostCall, HostOutcome, PendingHost, decode_blobs, status_of};
use super::sessions::GetAnswers;
use super::store::{NsId, visible};
use super::timers::{Timer, Timers};
use super::{ConnId, Engine, Output, info_flag};

/// Who is waiting for a process's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Requester {
    Client { conn: ConnId, id: u32 },
    Host { token: u64 },
}

struct PendingGet {
    who: Requester,
    key: Option<Key>,
    /// The key whose arrival releases it; `None`: any commit does.
    need: Option<Key>,
    deadline: Option<Instant>,
    timer: u64,
}

/// The Gets waiting until their target's data is here, and the targets asked of the host.
#[derive(Default)]
pub(super) struct Gets {
    parked: HashMap<(NsId, Rank), Vec<PendingGet>>,
    /// Direct-modex requests at the host: the target and the key each asked the other node
    /// to wait for (one request per pair); requesters wait in `parked`.
    dmodex_inflight: HashSet<((NsId, Rank), Option<Key>)>,
}

impl Gets {
    /// `who` waits for `target`'s data (and `key` in it), until `deadline` if any; released
    /// by the arrival of `need` when given, by any commit otherwise.
    pub(super) fn park(
        &mut self,
        target: (NsId, Rank),
        who: Requester,
        key: Option<Key>,
        need: Option<Key>,
        deadline: Option<Instant>,
        timers: &mut Timers,
    ) {
        let timer = timers.new_id();
        if let Some(d) = deadline {
            timers.set(d, timer, Timer::Get { target, timer });
        }
        self.parked.entry(target).or_default().push(PendingGet {
            who,
            key,
            need,
            deadline,
            timer,
        });
    }

    /// Whether the host is to be asked for `target`'s data, to wait for `need` there: not
    /// when a request for that is out already.
    pub(super) fn ask_host(&mut self, target: (NsId, Rank), need: Option<Key>) -> bool {
        self.dmodex_inflight.insert((target, need))
    }

    /// The host answered the direct modex for `target` that waited for `need`.
    pub(super) fn host_answered(&mut self, target: (NsId, Rank), need: Option<Key>) {
        self.dmodex_inflight.remove(&(target, need));
    }

    /// Everyone waiting for `target` whose key to wait for passes `ready` (`None`: none),
    /// with the key each asked for; their deadlines cancelled. The others stay parked.
    pub(super) fn take_ready(
        &mut self,
        target: (NsId, Rank),
        timers: &mut Timers,
        ready: impl Fn(Option<&Key>) -> bool,
    ) -> Vec<(Requester, Option<Key>)> {
        let Some(list) = self.parked.remove(&target) else {
            return Vec::new();
        };
        let (ready, waiting): (Vec<_>, Vec<_>) =
            list.into_iter().partition(|g| ready(g.need.as_ref()));
        if !waiting.is_empty() {
            self.parked.insert(target, waiting);
        }
        ready
            .into_iter()
            .map(|g| {
                if let Some(d) = g.deadline {
                    timers.cancel(d, g.timer);
                }
                (g.who, g.key)
            })
            .collect()
    }

    /// Everyone waiting for `target`, ready or not (see [`Gets::take_ready`]).
    pub(super) fn take(
        &mut self,
        target: (NsId, Rank),
        timers: &mut Timers,
    ) -> Vec<(Requester, Option<Key>)> {
        self.take_ready(target, timers, |_| true)
    }

    /// The Get for `target` whose deadline `timer` passed, removed.
    pub(super) fn expire(&mut self, target: (NsId, Rank), timer: u64) -> Option<Requester> {
        let list = self.parked.get_mut(&target)?;
        let pos = list.iter().position(|g| g.timer == timer)?;
        let g = list.swap_remove(pos);
        if list.is_empty() {
            self.parked.remove(&target);
        }
        Some(g.who)
    }

    /// Drops the Gets of a connection that ended: nobody will read their answers.
    pub(super) fn forget_conn(&mut self, conn: ConnId) {
        for list in self.parked.values_mut() {
            list.retain(|g| !matches!(g.who, Requester::Client { conn: c2, .. } if c2 == conn));
        }
    }

    /// The targets of namespace `ns` that someone waits for.
    pub(super) fn targets_in(&self, ns: NsId) -> Vec<(NsId, Rank)> {
        self.parked
            .keys()
            .filter(|(n, _)| *n == ns)
            .copied()
            .collect()
    }

    /// True when no Get waits.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.parked.is_empty()
    }
}

impl Engine {
    pub(super) fn get(
        &mut self,
        conn: ConnId,
        id: u32,
        target: &Proc,
        key: Option<Key>,
        info: &[Info],
        now: Instant,
    ) {
        if self.get_group_info(conn, id, target, key.as_ref(), info) {
            return;
        }
        let Some(ns) = self.ns_id(target.nspace.as_str()) else {
            return self.reply_status(conn, id, Status::ERR_NOT_FOUND);
        };
        let Some(nsinfo) = self.nspaces.get(&ns) else {
            return self.reply_status(conn, id, Status::ERR_NOT_FOUND);
        };
        if target.rank == Rank::UNDEF {
            if let Some(k) = &key {
                let job_level = nsinfo
                    .job
                    .image()
                    .job()
                    .iter()
                    .chain(nsinfo.job.image().session());
                if !job_level.clone().any(|i| i.key == *k) {
                    // A key posted by any process of the namespace: the first that stored it
                    // answers. Nothing is waited for: there is no process to wait for.
                    return match self.store.owner(ns, k.as_str()) {
                        Some(rank) => {
                            self.answer_get(Requester::Client { conn, id }, (ns, rank), Some(k))
                        }
                        None => self.reply_status(conn, id, Status::ERR_NOT_FOUND),
                    };
                }
            }
        }
        if !target.rank.is_valid() {
            // Job-level data: the client asks only for namespaces it lacks (RFC0009).
            let image = nsinfo.job.image();
            let found = key.as_ref().is_none_or(|k| {
                image
                    .job()
                    .iter()
                    .chain(image.session())
                    .any(|i| i.key == *k)
            });
            let job = image.clone();
            if let Some(c) = self.sessions.conn_mut(conn) {
                c.has_jobs.insert(ns);
            }
            let status = found_status(found);
            return self.reply(
                conn,
                id,
                Reply {
                    status,
                    body: ReplyBody::Get {
                        data: vec![],
                        jobs: vec![job],
                    },
                },
            );
        }
        if target.rank.0 >= nsinfo.size {
            return self.reply_status(conn, id, Status::ERR_NOT_FOUND);
        }
        // A reserved key of a process (its node, its local rank...) is job data, which this
        // server holds for every process of the job: never waited for, never asked of the
        // process's node (libpmix clients ask for those of processes on other nodes).
        if let Some(k) = key.as_ref().filter(|k| k.is_reserved()) {
            let own = nsinfo.job.image().proc_value(target.rank, k.as_str());
            if let Some(value) = own {
                let kv = Kv {
                    scope: Scope::GLOBAL,
                    key: k.clone(),
                    value,
                };
                let data = vec![ProcKvs {
                    proc: target.clone(),
                    kvs: vec![kv],
                }];
                let body = ReplyBody::Get {
                    data,
                    jobs: Vec::new(),
                };
                return self.reply(
                    conn,
                    id,
                    Reply {
                        status: Status::SUCCESS,
                        body,
                    },
                );
            }
        }
        let t = (ns, target.rank);
        let local = nsinfo.is_local(target.rank);
        let required = required_key(info);
        // Asking the other node again is for data fetched from there.
        let refresh = !local && info_flag(info, attr::GET_REFRESH_CACHE);
        let holds = |k: &Key| self.store.get(ns, target.rank, k.as_str()).is_some();
        if self.commits.has(&t) && !refresh && required.as_ref().is_none_or(holds) {
            return self.answer_get(Requester::Client { conn, id }, t, key.as_ref());
        }
        if let Some(&status) = self.sessions.gone().get(&t) {
            return self.reply_status(conn, id, status);
        }
        let immediate = info_flag(info, attr::IMMEDIATE);
        if immediate {
            return self.reply_status(conn, id, Status::ERR_NOT_FOUND);
        }
        let deadline = pmix_types::timeout_of(info).map(|d| now + d);
        let who = Requester::Client { conn, id };
        // Data fetched from another node is waited for until it holds the key asked for.
        let need = if local {
            required
        } else {
            required.or_else(|| key.clone())
        };
        self.gets
            .park(t, who, key, need.clone(), deadline, &mut self.timers);
        if !local {
            self.ask_host_for(target, t, need, info);
        }
    }

    /// Asks the host for `target`'s data (`t` here), to be answered once it holds `need`,
    /// unless a request for it is out already; `info` is the Get's (its `PMIX_TIMEOUT` bounds
    /// the wait there too).
    fn ask_host_for(&mut self, target: &Proc, t: (NsId, Rank), need: Option<Key>, info: &[Info]) {
        if !self.gets.ask_host(t, need.clone()) {
            return;
        }
        let mut info: Vec<Info> = info
            .iter()
            .filter(|i| i.key.as_str() != attr::REQUIRED_KEY)
            .cloned()
            .collect();
        if let Some(k) = &need {
            info.push(Info::attr(attr::REQUIRED_KEY, k.as_str()));
        }
        self.host_call(
            PendingHost::Dmodex { target: t, need },
            HostCall::DirectModex {
                proc: target.clone(),
                info,
            },
        );
    }

    /// Answers one Get for a process whose data is here.
    pub(super) fn answer_get(
        &mut self,
        who: Requester,
        (ns, rank): (NsId, Rank),
        key: Option<&Key>,
    ) {
        match who {
            Requester::Host { token } => {
                let result = self.remote_blob((ns, rank));
                self.out.push_back(Output::Dmodex { token, result });
            }
            Requester::Client { conn, id } => {
                let Some(c) = self.sessions.conn(conn) else {
                    return;
                };
                let requester_rank = c.proc.rank;
                let requester_ns = c.ns;
                let ship_job = !c.has_jobs.contains(&ns);
                let Some(nsinfo) = self.nspaces.get(&ns) else {
                    return self.reply_status(conn, id, Status::ERR_NOT_FOUND);
                };
                let owner_local = nsinfo.is_local(rank);
                let is_self = requester_ns == ns && requester_rank == rank;
                let may_see = |s: Scope| is_self || visible(s, owner_local);
                let kvs = match (key, c.answers) {
                    (Some(k), GetAnswers::KeyOnly) => self
                        .store
                        .get(ns, rank, k.as_str())
                        .filter(|e| may_see(e.scope))
                        .map(|e| Kv {
                            scope: e.scope,
                            key: k.clone(),
                            value: e.value.clone(),
                        })
                        .into_iter()
                        .collect(),
                    _ => self.store.proc_kvs(ns, rank, may_see),
                };
                let found = key.is_none_or(|k| kvs.iter().any(|kv| kv.key == *k));
                let jobs = if ship_job {
                    vec![nsinfo.job.image().clone()]
                } else {
                    Vec::new()
                };
                let proc = Proc::new(nsinfo.name.clone(), rank);
                if ship_job {
                    if let Some(c) = self.sessions.conn_mut(conn) {
                        c.has_jobs.insert(ns);
                    }
                }
                let status = found_status(found);
                let body = ReplyBody::Get {
                    data: vec![ProcKvs { proc, kvs }],
                    jobs,
                };
                self.reply(conn, id, Reply { status, body });
            }
        }
    }

    /// The target committed: answer everyone waiting for it whom its data now releases.
    pub(super) fn release_gets(&mut self, target: (NsId, Rank)) {
        let (ns, rank) = target;
        let ready = self.gets.take_ready(target, &mut self.timers, |need| {
            need.is_none_or(|k| self.store.get(ns, rank, k.as_str()).is_some())
        });
        for (who, key) in ready {
            self.answer_get(who, target, key.as_ref());
        }
    }

    pub(super) fn fail_gets(&mut self, target: (NsId, Rank), status: Status) {
        for (who, _) in self.gets.take(target, &mut self.timers) {
            self.fail_requester(who, status);
        }
    }

    pub(super) fn fail_requester(&mut self, who: Requester, status: Status) {
        match who {
            Requester::Client { conn, id } => self.reply_status(conn, id, status),
            Requester::Host { token } => self.out.push_back(Output::Dmodex {
                token,
                result: Err(status),
            }),
        }
    }
    /// A host asks for the data of a local process on behalf of another node, to be answered
    /// once it committed, and holds `PMIX_REQUIRED_KEY` if `info` names one, or `PMIX_TIMEOUT`
    /// (if given) passed.
    pub(crate) fn dmodex_request(&mut self, proc: &Proc, info: &[Info], token: u64, now: Instant) {
        let Some(ns) = self.ns_id(proc.nspace.as_str()) else {
            self.out.push_back(Output::Dmodex {
                token,
                result: Err(Status::ERR_NOT_FOUND),
            });
            return;
        };
        let target = (ns, proc.rank);
        let need = required_key(info);
        let holds = |k: &Key| self.store.get(ns, proc.rank, k.as_str()).is_some();
        if self.commits.has(&target) && need.as_ref().is_none_or(holds) {
            let result = self.remote_blob(target);
            self.out.push_back(Output::Dmodex { token, result });
        } else {
            let who = Requester::Host { token };
            let deadline = pmix_types::timeout_of(info).map(|d| now + d);
            self.gets
                .park(target, who, None, need, deadline, &mut self.timers);
        }
    }

    /// The data of a local process that other nodes may see, encoded for the host.
    fn remote_blob(&self, (ns, rank): (NsId, Rank)) -> Result<Vec<u8>, Status> {
        let Some(name) = self.nspaces.get(&ns).map(|n| n.name.clone()) else {
            return Err(Status::ERR_NOT_FOUND);
        };
        let kvs = self.store.proc_kvs(ns, rank, |s| visible(s, false));
        let mut out = Vec::new();
        pmix_wire::encode_frame(
            &vec![ProcKvs {
                proc: Proc::new(name, rank),
                kvs,
            }],
            &mut out,
        )
        .map_err(|e| e.status())?;
        Ok(out)
    }

    /// The host answered a direct modex for `target`: its data is stored and its Gets
    /// released, or they fail.
    pub(super) fn dmodex_done(
        &mut self,
        target: (NsId, Rank),
        asked: Option<Key>,
        outcome: HostOutcome,
    ) {
        self.gets.host_answered(target, asked.clone());
        let result = match outcome {
            HostOutcome::Bytes(Ok(bytes)) => decode_blobs(&bytes),
            other => Err(status_of(&other)),
        };
        let status = match result {
            Ok(blobs) => {
                self.store_remote(&blobs);
                if self.commits.has(&target) {
                    self.release_gets(target);
                }
                // Those waiting for the key this request asked the other node to wait for,
                // still not there: it answered without it (its wait timed out, or it does not
                // wait for keys).
                Status::ERR_NOT_FOUND
            }
            Err(status) => status,
        };
        // Gets waiting for other keys have requests of their own.
        let answered = self
            .gets
            .take_ready(target, &mut self.timers, |need| need == asked.as_ref());
        for (who, _) in answered {
            self.fail_requester(who, status);
        }
    }
}

/// The key `PMIX_REQUIRED_KEY` names in `info`, if it names a valid one.
fn required_key(info: &[Info]) -> Option<Key> {
    info.iter()
        .find(|i| i.key.as_str() == attr::REQUIRED_KEY)
        .and_then(|i| i.value.as_str())
        .and_then(|k| Key::new(k).ok())
}

/// The status of a Get whose key was or was not among the data.
fn found_status(found: bool) -> Status {
    if found {
        Status::SUCCESS
    } else {
        Status::ERR_NOT_FOUND
    }
}
