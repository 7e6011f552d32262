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
//! Gets of the same target and key share a request only if its wait there covers theirs: a
//! request that ends by its own timeout fails only the Gets that could have timed out too.

use std::collections::HashMap;
use std::time::Instant;

use pmix_types::{Info, Key, Proc, Rank, Scope, Status, attr};
use pmix_wire::{Kv, ProcKvs, Reply, ReplyBody};

use super::commits::Commits;
use super::host_ops::{Asked, HostCall, HostOutcome, PendingHost, decode_blobs, status_of};
use super::nspaces::Nspaces;
use super::sessions::{GetAnswers, Sessions};
use super::store::{NsId, Store, visible};
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
    /// The direct-modex request it waits on, if its target lives on another node.
    via: Option<u64>,
}

/// The Gets waiting until their target's data is here, and the targets asked of the host.
#[derive(Default)]
pub(super) struct Gets {
    parked: HashMap<(NsId, Rank), Vec<PendingGet>>,
    /// Direct-modex requests at the host, by what they ask: each one's number and when the
    /// other node stops waiting (the `PMIX_TIMEOUT` it was given; `None`: never). Requesters
    /// wait in `parked`. A Get joins a request for its target and key that waits at least as
    /// long as it does (whose ending, by its timeout, is then never the Get's failure), or
    /// makes its own.
    dmodex_inflight: HashMap<Asked, Vec<(u64, Option<Instant>)>>,
    next_request: u64,
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
        (deadline, via): (Option<Instant>, Option<u64>),
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
            via,
        });
    }

    /// The direct-modex request a Get of `target` waiting for `need` until `deadline` is to
    /// wait on, and whether it is new (the host is to be asked): an outstanding one for the
    /// same target and key whose wait at the other node covers the Get's, or a new one.
    fn request_for(
        &mut self,
        target: (NsId, Rank),
        need: &Option<Key>,
        deadline: Option<Instant>,
    ) -> (u64, bool) {
        let covers = |theirs: Option<Instant>| match (theirs, deadline) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(theirs), Some(mine)) => theirs >= mine,
        };
        let out = self
            .dmodex_inflight
            .entry((target, need.clone()))
            .or_default();
        if let Some(&(request, _)) = out.iter().find(|(_, theirs)| covers(*theirs)) {
            return (request, false);
        }
        self.next_request += 1;
        out.push((self.next_request, deadline));
        (self.next_request, true)
    }

    /// Everyone waiting for `target` for whom `ready` holds, with the key each asked for;
    /// their deadlines cancelled. The others stay parked.
    fn take_where(
        &mut self,
        target: (NsId, Rank),
        timers: &mut Timers,
        ready: impl Fn(&PendingGet) -> bool,
    ) -> Vec<(Requester, Option<Key>)> {
        let Some(list) = self.parked.remove(&target) else {
            return Vec::new();
        };
        let (ready, waiting): (Vec<_>, Vec<_>) = list.into_iter().partition(|g| ready(g));
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

    /// Everyone waiting for `target`, ready or not (see [`Gets::take_where`]).
    pub(super) fn take(
        &mut self,
        target: (NsId, Rank),
        timers: &mut Timers,
    ) -> Vec<(Requester, Option<Key>)> {
        self.take_where(target, timers, |_| true)
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

/// What a client's Get comes to.
pub(super) enum GetStep {
    /// Answered at once.
    Reply(Reply),
    /// The target's data is here: answered from it.
    Answer((NsId, Rank), Option<Key>),
    /// Parked until the data is here; the host is to be asked for it when given.
    Parked(Option<(PendingHost, HostCall)>),
}

impl Requester {
    /// What tells this requester its Get failed with `status`.
    pub(super) fn failure(self, status: Status) -> Output {
        match self {
            Requester::Client { conn, id } => Output::Reply {
                conn,
                id,
                reply: Reply::status(status),
            },
            Requester::Host { token } => Output::Dmodex {
                token,
                result: Err(status),
            },
        }
    }
}

impl Gets {
    /// A client's Get of `target`'s `key` on `conn` (request `id`): answered from the store
    /// or, for reserved keys, from job data, or parked (see [`GetStep`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn request(
        &mut self,
        (conn, id): (ConnId, u32),
        target: &Proc,
        key: Option<Key>,
        info: &[Info],
        now: Instant,
        (nspaces, store, commits): (&Nspaces, &Store, &Commits),
        sessions: &mut Sessions,
        timers: &mut Timers,
    ) -> GetStep {
        let not_found = || GetStep::Reply(Reply::status(Status::ERR_NOT_FOUND));
        let Some(ns) = nspaces.id(target.nspace.as_str()) else {
            return not_found();
        };
        let Some(nsinfo) = nspaces.get(&ns) else {
            return not_found();
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
                    return match store.owner(ns, k.as_str()) {
                        Some(rank) => GetStep::Answer((ns, rank), key),
                        None => not_found(),
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
            if let Some(c) = sessions.conn_mut(conn) {
                c.has_jobs.insert(ns);
            }
            let status = found_status(found);
            return GetStep::Reply(Reply {
                status,
                body: ReplyBody::Get {
                    data: vec![],
                    jobs: vec![job],
                },
            });
        }
        if target.rank.0 >= nsinfo.size {
            return not_found();
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
                return GetStep::Reply(Reply {
                    status: Status::SUCCESS,
                    body,
                });
            }
        }
        let t = (ns, target.rank);
        let local = nsinfo.is_local(target.rank);
        let required = required_key(info);
        // Asking the other node again is for data fetched from there.
        let refresh = !local && info_flag(info, attr::GET_REFRESH_CACHE);
        let holds = |k: &Key| store.get(ns, target.rank, k.as_str()).is_some();
        if commits.has(&t) && !refresh && required.as_ref().is_none_or(holds) {
            return GetStep::Answer(t, key);
        }
        if let Some(&status) = sessions.gone().get(&t) {
            return GetStep::Reply(Reply::status(status));
        }
        let immediate = info_flag(info, attr::IMMEDIATE);
        if immediate {
            return not_found();
        }
        let deadline = pmix_types::timeout_of(info).map(|d| now + d);
        let who = Requester::Client { conn, id };
        // Data fetched from another node is waited for until it holds the key asked for.
        let need = if local {
            required
        } else {
            required.or_else(|| key.clone())
        };
        if local {
            self.park(t, who, key, need, (deadline, None), timers);
            return GetStep::Parked(None);
        }
        let (request, new) = self.request_for(t, &need, deadline);
        self.park(t, who, key, need.clone(), (deadline, Some(request)), timers);
        if !new {
            return GetStep::Parked(None);
        }
        GetStep::Parked(Some(ask_host_for(target, (t, request), need, info)))
    }

    /// A host asks for the data of a local process on behalf of another node, to be answered
    /// once it committed, and holds `PMIX_REQUIRED_KEY` if `info` names one, or `PMIX_TIMEOUT`
    /// (if given) passed: the answer now, or none while it waits.
    pub(super) fn host_request(
        &mut self,
        proc: &Proc,
        info: &[Info],
        token: u64,
        now: Instant,
        (nspaces, store, commits): (&Nspaces, &Store, &Commits),
        timers: &mut Timers,
    ) -> Option<Output> {
        let Some(ns) = nspaces.id(proc.nspace.as_str()) else {
            return Some(Output::Dmodex {
                token,
                result: Err(Status::ERR_NOT_FOUND),
            });
        };
        let target = (ns, proc.rank);
        let need = required_key(info);
        let holds = |k: &Key| store.get(ns, proc.rank, k.as_str()).is_some();
        if commits.has(&target) && need.as_ref().is_none_or(holds) {
            let result = remote_blob(target, nspaces, store);
            Some(Output::Dmodex { token, result })
        } else {
            let who = Requester::Host { token };
            let deadline = pmix_types::timeout_of(info).map(|d| now + d);
            self.park(target, who, None, need, (deadline, None), timers);
            None
        }
    }

    /// The target committed: everyone waiting for it whom its data now releases, with the key
    /// each asked for.
    pub(super) fn release(
        &mut self,
        target: (NsId, Rank),
        store: &Store,
        timers: &mut Timers,
    ) -> Vec<(Requester, Option<Key>)> {
        let (ns, rank) = target;
        self.take_where(target, timers, |g| {
            g.need
                .as_ref()
                .is_none_or(|k| store.get(ns, rank, k.as_str()).is_some())
        })
    }

    /// The host answered direct-modex request `request`, which asked `asked`: the data it
    /// brought, or why none.
    pub(super) fn host_answered_with(
        &mut self,
        (asked, request): (Asked, u64),
        outcome: HostOutcome,
    ) -> Result<Vec<ProcKvs>, Status> {
        if let Some(out) = self.dmodex_inflight.get_mut(&asked) {
            out.retain(|(r, _)| *r != request);
            if out.is_empty() {
                self.dmodex_inflight.remove(&asked);
            }
        }
        match outcome {
            HostOutcome::Bytes(Ok(bytes)) => decode_blobs(&bytes),
            other => Err(status_of(&other)),
        }
    }
}

/// The host call of direct-modex request `request`, asking for `target`'s data (`t` here),
/// to be answered once it holds `need`; `info` is the Get's (its `PMIX_TIMEOUT` bounds the
/// wait there too).
fn ask_host_for(
    target: &Proc,
    (t, request): ((NsId, Rank), u64),
    need: Option<Key>,
    info: &[Info],
) -> (PendingHost, HostCall) {
    let mut info: Vec<Info> = info
        .iter()
        .filter(|i| i.key.as_str() != attr::REQUIRED_KEY)
        .cloned()
        .collect();
    if let Some(k) = &need {
        info.push(Info::attr(attr::REQUIRED_KEY, k.as_str()));
    }
    (
        PendingHost::Dmodex {
            asked: (t, need.clone()),
            request,
        },
        HostCall::DirectModex {
            proc: target.clone(),
            info,
        },
    )
}

/// The answer to one Get for a process whose data is here (none when its connection is gone).
pub(super) fn answer(
    who: Requester,
    (ns, rank): (NsId, Rank),
    key: Option<&Key>,
    nspaces: &Nspaces,
    store: &Store,
    sessions: &mut Sessions,
) -> Option<Output> {
    match who {
        Requester::Host { token } => {
            let result = remote_blob((ns, rank), nspaces, store);
            Some(Output::Dmodex { token, result })
        }
        Requester::Client { conn, id } => {
            let c = sessions.conn(conn)?;
            let viewer = Viewer {
                me: Some((c.ns, c.proc.rank)),
                answers: c.answers,
                ship_job: !c.has_jobs.contains(&ns),
            };
            let reply = proc_reply(&viewer, (ns, rank), key, nspaces, store);
            if viewer.ship_job && nspaces.get(&ns).is_some() {
                if let Some(c) = sessions.conn_mut(conn) {
                    c.has_jobs.insert(ns);
                }
            }
            Some(Output::Reply { conn, id, reply })
        }
    }
}

/// Who asks for a process's data, as its answer depends on it.
struct Viewer {
    /// The asking process (a tool is none): it sees all of its own data.
    me: Option<(NsId, Rank)>,
    answers: GetAnswers,
    /// The namespace's job data goes with the answer.
    ship_job: bool,
}

/// The answer to a Get of a process whose data is here, as `viewer` may see it.
fn proc_reply(
    viewer: &Viewer,
    (ns, rank): (NsId, Rank),
    key: Option<&Key>,
    nspaces: &Nspaces,
    store: &Store,
) -> Reply {
    let Some(nsinfo) = nspaces.get(&ns) else {
        return Reply::status(Status::ERR_NOT_FOUND);
    };
    let owner_local = nsinfo.is_local(rank);
    let is_self = viewer.me == Some((ns, rank));
    let may_see = |s: Scope| is_self || visible(s, owner_local);
    let kvs = match (key, viewer.answers) {
        (Some(k), GetAnswers::KeyOnly) => store
            .get(ns, rank, k.as_str())
            .filter(|e| may_see(e.scope))
            .map(|e| Kv {
                scope: e.scope,
                key: k.clone(),
                value: e.value.clone(),
            })
            .into_iter()
            .collect(),
        _ => store.proc_kvs(ns, rank, may_see),
    };
    let found = key.is_none_or(|k| kvs.iter().any(|kv| kv.key == *k));
    let jobs = if viewer.ship_job {
        vec![nsinfo.job.image().clone()]
    } else {
        Vec::new()
    };
    let proc = Proc::new(nsinfo.name.clone(), rank);
    Reply {
        status: found_status(found),
        body: ReplyBody::Get {
            data: vec![ProcKvs { proc, kvs }],
            jobs,
        },
    }
}

/// The data of a local process that other nodes may see, encoded for the host.
fn remote_blob(
    (ns, rank): (NsId, Rank),
    nspaces: &Nspaces,
    store: &Store,
) -> Result<Vec<u8>, Status> {
    let Some(name) = nspaces.get(&ns).map(|n| n.name.clone()) else {
        return Err(Status::ERR_NOT_FOUND);
    };
    let kvs = store.proc_kvs(ns, rank, |s| visible(s, false));
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
        match self.get_step((conn, id), target, key, info, now) {
            GetStep::Reply(reply) => self.reply(conn, id, reply),
            GetStep::Answer(t, key) => {
                self.answer_get(Requester::Client { conn, id }, t, key.as_ref());
            }
            GetStep::Parked(None) => {}
            GetStep::Parked(Some((pending, call))) => self.host_call(pending, call),
        }
    }

    /// What [`Gets::request`] makes of the Get `(conn, id)`.
    fn get_step(
        &mut self,
        (conn, id): (ConnId, u32),
        target: &Proc,
        key: Option<Key>,
        info: &[Info],
        now: Instant,
    ) -> GetStep {
        let data = (&self.nspaces, &self.store, &self.commits);
        self.gets.request(
            (conn, id),
            target,
            key,
            info,
            now,
            data,
            &mut self.sessions,
            &mut self.timers,
        )
    }

    /// A tool's Get (`PMIx_Get` in a tool): job data and processes' reserved keys, as a
    /// client's, and what a process committed that a process of no job on this node may see
    /// (no `LOCAL` data of processes elsewhere). A tool belongs to no job and waits for
    /// none: its Gets are `IMMEDIATE`, never parked nor asked of other nodes. Every answer
    /// carries the namespace's job data (a tool's connection keeps no record of what it has).
    pub(super) fn tool_get(
        &mut self,
        conn: ConnId,
        id: u32,
        target: &Proc,
        key: Option<Key>,
        info: &[Info],
        now: Instant,
    ) {
        let mut info = info.to_vec();
        info.retain(|i| i.key.as_str() != attr::IMMEDIATE);
        info.push(Info::attr(attr::IMMEDIATE, true));
        let reply = match self.get_step((conn, id), target, key, &info, now) {
            GetStep::Reply(reply) => reply,
            GetStep::Answer(t, key) => {
                let viewer = Viewer {
                    me: None,
                    answers: GetAnswers::WholeProcess,
                    ship_job: true,
                };
                proc_reply(&viewer, t, key.as_ref(), &self.nspaces, &self.store)
            }
            // Not with `IMMEDIATE`; should it ever be, the tool is not kept waiting.
            GetStep::Parked(_) => Reply::status(Status::ERR_NOT_FOUND),
        };
        self.reply(conn, id, reply);
    }

    /// Answers one Get for a process whose data is here.
    fn answer_get(&mut self, who: Requester, target: (NsId, Rank), key: Option<&Key>) {
        let answer = answer(
            who,
            target,
            key,
            &self.nspaces,
            &self.store,
            &mut self.sessions,
        );
        self.out.extend(answer);
    }

    /// The target committed: answer everyone waiting for it whom its data now releases.
    pub(super) fn release_gets(&mut self, target: (NsId, Rank)) {
        for (who, key) in self.gets.release(target, &self.store, &mut self.timers) {
            self.answer_get(who, target, key.as_ref());
        }
    }

    pub(super) fn fail_gets(&mut self, target: (NsId, Rank), status: Status) {
        for (who, _) in self.gets.take(target, &mut self.timers) {
            self.out.push_back(who.failure(status));
        }
    }

    /// A host asks for the data of a local process on behalf of another node (see
    /// [`Gets::host_request`]).
    pub(crate) fn dmodex_request(&mut self, proc: &Proc, info: &[Info], token: u64, now: Instant) {
        let data = (&self.nspaces, &self.store, &self.commits);
        let answer = self
            .gets
            .host_request(proc, info, token, now, data, &mut self.timers);
        self.out.extend(answer);
    }

    /// The host answered direct-modex request `request`, which asked `asked`: the target's
    /// data is stored and its Gets released, or they fail.
    pub(super) fn dmodex_done(&mut self, asked: Asked, request: u64, outcome: HostOutcome) {
        let target = asked.0;
        let status = match self.gets.host_answered_with((asked, request), outcome) {
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
        // Gets waiting on other requests (other keys, longer waits) go on waiting.
        let answered = self
            .gets
            .take_where(target, &mut self.timers, |g| g.via == Some(request));
        for (who, _) in answered {
            self.out.push_back(who.failure(status));
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
