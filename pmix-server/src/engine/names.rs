//! The name service: data published with `PMIx_Publish`, found with `PMIx_Lookup`, withdrawn
//! with `PMIx_Unpublish`.
//!
//! Sans-IO and generic over the token that identifies a waiting lookup, so that one
//! implementation serves both the engine's built-in service (one session: this server) and
//! the standalone name server that several launcher runs share (one session per launcher).
//!
//! # Rules
//!
//! - **Audience.** Published data is visible to the processes its range names, relative to
//!   the publisher: `PROC_LOCAL` the publisher alone, `LOCAL` its node, `NAMESPACE` its
//!   namespace, `SESSION` (the default) its session, `GLOBAL` every session, `CUSTOM` the
//!   processes listed in `PMIX_EVENT_CUSTOM_RANGE` (rank `WILDCARD` for a whole namespace).
//!   `RM` has no audience among clients and is refused.
//! - **Search range.** A lookup's range names, relative to the caller, whose publications it
//!   searches; an entry is found when its publisher is in the search range *and* the caller is
//!   in the entry's audience *and* both run as the same uid.
//! - **Duplicates.** A publish of a key that an entry of the same uid already holds for an
//!   audience overlapping the new one fails with `ERR_DUPLICATE_KEY`; a publish is all or
//!   nothing.
//! - **Unpublish** removes only the caller's own entries (of the given range when one is
//!   given); a key that is not published, or is published only by others, fails the whole
//!   call (`ERR_NOT_FOUND`, `ERR_NO_PERMISSIONS`) and removes nothing. No keys: all of the
//!   caller's entries.
//! - **Persistence.** `FIRST_READ` entries go with the first lookup that returns them; `PROC`
//!   ones when the publisher ends; `APP` (the default) when its namespace ends; `SESSION` ones
//!   when its session ends; `INDEF` ones only by unpublish.
//! - **Waiting.** A lookup with `PMIX_WAIT` (number of keys, 0 or `true` for all) is held
//!   until that many keys are found, or its `PMIX_TIMEOUT` (seconds) passes (`ERR_TIMEOUT`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pmix_types::{DataRange, Info, Key, Nspace, Persistence, Proc, Rank, Status, Value, attr};
use pmix_wire::Published;

/// Who answers clients' publish, lookup and unpublish requests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum NameService {
    /// The server's own name service: every range is served among this server's clients,
    /// with the rules of the standard (ranges, persistence, `WAIT`, duplicates, uid
    /// isolation; see `docs/ARCHITECTURE.md`). `SESSION` and `GLOBAL` then both mean "every
    /// client of this server".
    #[default]
    BuiltIn,
    /// The host's [`Host::publish`](crate::Host::publish), [`Host::lookup`](crate::Host::lookup)
    /// and [`Host::unpublish`](crate::Host::unpublish) callbacks, for
    /// hosts that span nodes or share a name server. The server adds the caller's
    /// `PMIX_USERID` and `PMIX_GRPID` to the directives; `WAIT` and `TIMEOUT` are the host's
    /// to honour.
    Host,
}

/// Identifies a session: a server, or a launcher run attached to a name server.
pub(crate) type SessionId = u64;

/// Who is asking: the process, the credentials the server vouches for, and its session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Caller {
    pub(crate) proc: Proc,
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) session: SessionId,
}

/// A set of processes, described relative to a process.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Audience {
    Global,
    Proc { session: SessionId, proc: Proc },
    Custom(Vec<Proc>),
    Nspace { session: SessionId, nspace: Nspace },
    Session(SessionId),
    Node(Arc<str>),
}

impl Audience {
    /// Order used to handle each unordered pair of kinds once.
    fn order(&self) -> u8 {
        match self {
            Audience::Global => 0,
            Audience::Proc { .. } => 1,
            Audience::Custom(_) => 2,
            Audience::Nspace { .. } => 3,
            Audience::Session(_) => 4,
            Audience::Node(_) => 5,
        }
    }
}

fn custom_has(list: &[Proc], proc: &Proc) -> bool {
    list.iter()
        .any(|p| p.nspace == proc.nspace && (p.rank == Rank::WILDCARD || p.rank == proc.rank))
}

#[derive(Debug)]
struct SessionInfo {
    host: Arc<str>,
    nspaces: HashSet<Nspace>,
}

#[derive(Debug)]
struct Entry {
    value: Value,
    publisher: Caller,
    range: DataRange,
    audience: Audience,
    persistence: Persistence,
}

/// A lookup held by `PMIX_WAIT`.
#[derive(Debug)]
struct Waiter<T> {
    token: T,
    caller: Caller,
    keys: Vec<Key>,
    need: usize,
    search: Audience,
    deadline: Option<Instant>,
}

/// What a publish or a lookup produced for lookups that were waiting.
pub(crate) type Answers<T> = Vec<(T, Result<Vec<Published>, Status>)>;

/// The outcome of [`NameStore::lookup`].
#[derive(Debug, PartialEq)]
pub(crate) enum LookupOutcome {
    /// Answered now.
    Done(Result<Vec<Published>, Status>),
    /// Held until enough keys are published; the answer comes out of a later call.
    Waiting,
}

/// The published data of one name service.
#[derive(Debug)]
pub(crate) struct NameStore<T> {
    sessions: HashMap<SessionId, SessionInfo>,
    entries: HashMap<Key, Vec<Entry>>,
    waiters: HashMap<u64, Waiter<T>>,
    /// Waiting lookups by key, so a publish wakes only those that asked for its keys.
    waiting_on: HashMap<Key, Vec<u64>>,
    timers: BTreeMap<(Instant, u64), ()>,
    next_waiter: u64,
    /// Every session is one session for names: the `SESSION` range reaches them all.
    one_session: bool,
}

impl<T> Default for NameStore<T> {
    fn default() -> Self {
        NameStore {
            sessions: HashMap::new(),
            entries: HashMap::new(),
            waiters: HashMap::new(),
            waiting_on: HashMap::new(),
            timers: BTreeMap::new(),
            next_waiter: 1,
            one_session: false,
        }
    }
}

/// Directives of a name-service call, read once.
struct Directives {
    range: Option<DataRange>,
    persistence: Option<Persistence>,
    wait: Option<usize>,
    timeout: Option<Duration>,
    custom: Option<Vec<Proc>>,
}

fn directives(info: &[Info]) -> Result<Directives, Status> {
    let mut d = Directives {
        range: None,
        persistence: None,
        wait: None,
        timeout: None,
        custom: None,
    };
    for i in info {
        match i.key.as_str() {
            attr::RANGE => {
                d.range = Some(match &i.value {
                    Value::DataRange(r) => *r,
                    v => DataRange(
                        v.as_u64()
                            .and_then(|n| u8::try_from(n).ok())
                            .ok_or(Status::ERR_BAD_PARAM)?,
                    ),
                });
            }
            attr::PERSISTENCE => {
                d.persistence = Some(match &i.value {
                    Value::Persistence(p) => *p,
                    v => Persistence(
                        v.as_u64()
                            .and_then(|n| u8::try_from(n).ok())
                            .ok_or(Status::ERR_BAD_PARAM)?,
                    ),
                });
            }
            attr::WAIT => {
                d.wait = Some(match &i.value {
                    Value::Bool(true) => 0,
                    Value::Bool(false) => continue,
                    v => v
                        .as_u64()
                        .and_then(|n| usize::try_from(n).ok())
                        .ok_or(Status::ERR_BAD_PARAM)?,
                });
            }
            attr::TIMEOUT => {
                let secs = i.value.as_i64().ok_or(Status::ERR_BAD_PARAM)?;
                d.timeout = (secs > 0).then(|| Duration::from_secs(secs.unsigned_abs()));
            }
            attr::EVENT_CUSTOM_RANGE => {
                let procs = match &i.value {
                    Value::Proc(p) => vec![p.clone()],
                    Value::DataArray(a) => a
                        .items()
                        .iter()
                        .map(|v| v.as_proc().cloned().ok_or(Status::ERR_BAD_PARAM))
                        .collect::<Result<_, _>>()?,
                    _ => return Err(Status::ERR_BAD_PARAM),
                };
                d.custom = Some(procs);
            }
            _ => {}
        }
    }
    Ok(d)
}

impl<T> NameStore<T> {
    /// Makes the `SESSION` range (and `UNDEF`) of every publish and lookup reach every
    /// session, as the jobs of one allocation share a session: for a name server whose runs
    /// are one session, so that callers that cannot ask for `GLOBAL` (Open MPI 5's
    /// `MPI_Publish_name`) still meet across runs. Persistence keeps its owner: `SESSION`
    /// data still ends with the publisher's own session.
    pub(crate) fn set_one_session(&mut self, one: bool) {
        self.one_session = one;
    }

    /// Declares a session and the node it runs on (again: updates the node).
    pub(crate) fn open_session(&mut self, session: SessionId, host: &str) {
        self.sessions
            .entry(session)
            .and_modify(|s| s.host = host.into())
            .or_insert_with(|| SessionInfo {
                host: host.into(),
                nspaces: HashSet::new(),
            });
    }

    /// Declares that `nspace` belongs to `session`. A namespace belongs to the first session
    /// that declared it until that one says it ended (or ends): another's claim is refused
    /// (`ERR_EXISTS`), so no run can take over another's namespace in custom ranges or
    /// connects across runs.
    pub(crate) fn add_nspace(&mut self, session: SessionId, nspace: &Nspace) -> Result<(), Status> {
        match self.session_of(nspace) {
            Some(owner) if owner != session => return Err(Status::ERR_EXISTS),
            _ => {}
        }
        if let Some(s) = self.sessions.get_mut(&session) {
            s.nspaces.insert(nspace.clone());
        }
        Ok(())
    }

    fn host_of(&self, session: SessionId) -> Option<&Arc<str>> {
        self.sessions.get(&session).map(|s| &s.host)
    }

    /// The session a namespace belongs to (named in a custom range, or in a connect across
    /// sessions).
    pub(crate) fn session_of(&self, nspace: &Nspace) -> Option<SessionId> {
        self.sessions
            .iter()
            .find(|(_, s)| s.nspaces.contains(nspace))
            .map(|(id, _)| *id)
    }

    fn contains(&self, a: &Audience, c: &Caller) -> bool {
        match a {
            Audience::Global => true,
            Audience::Proc { session, proc } => c.session == *session && c.proc == *proc,
            Audience::Custom(list) => custom_has(list, &c.proc),
            Audience::Nspace { session, nspace } => {
                c.session == *session && c.proc.nspace == *nspace
            }
            Audience::Session(s) => c.session == *s,
            Audience::Node(h) => self.host_of(c.session) == Some(h),
        }
    }

    /// Whether some process belongs to both audiences.
    fn overlap(&self, a: &Audience, b: &Audience) -> bool {
        let (a, b) = if a.order() <= b.order() {
            (a, b)
        } else {
            (b, a)
        };
        // A process named in a custom list: which session and node it is in, as far as known.
        let member = |p: &Proc, x: &Audience| -> bool {
            let session = self.session_of(&p.nspace);
            match x {
                Audience::Nspace { nspace, .. } => p.nspace == *nspace,
                Audience::Session(s) => session == Some(*s),
                Audience::Node(h) => session.and_then(|s| self.host_of(s)) == Some(h),
                _ => false,
            }
        };
        match (a, b) {
            (Audience::Global, _) => true,
            (Audience::Proc { session, proc }, x) => self.contains(
                x,
                &Caller {
                    proc: proc.clone(),
                    uid: 0,
                    gid: 0,
                    session: *session,
                },
            ),
            (Audience::Custom(l1), Audience::Custom(l2)) => l1.iter().any(|p| {
                l2.iter().any(|q| {
                    p.nspace == q.nspace
                        && (p.rank == q.rank
                            || p.rank == Rank::WILDCARD
                            || q.rank == Rank::WILDCARD)
                })
            }),
            (Audience::Custom(l), x) => l.iter().any(|p| member(p, x)),
            (
                Audience::Nspace {
                    session: s1,
                    nspace: n1,
                },
                Audience::Nspace {
                    session: s2,
                    nspace: n2,
                },
            ) => s1 == s2 && n1 == n2,
            (
                Audience::Nspace { session, .. } | Audience::Session(session),
                Audience::Session(s),
            ) => session == s,
            (Audience::Nspace { session, .. } | Audience::Session(session), Audience::Node(h)) => {
                self.host_of(*session) == Some(h)
            }
            (Audience::Node(h1), Audience::Node(h2)) => h1 == h2,
            // Every other pair is handled above in its ordered form.
            _ => false,
        }
    }

    /// The processes `range` names relative to `caller`.
    fn audience(
        &self,
        range: DataRange,
        caller: &Caller,
        custom: Option<&[Proc]>,
    ) -> Result<Audience, Status> {
        Ok(match range {
            DataRange::PROC_LOCAL => Audience::Proc {
                session: caller.session,
                proc: caller.proc.clone(),
            },
            DataRange::LOCAL => match self.host_of(caller.session) {
                Some(h) => Audience::Node(h.clone()),
                None => Audience::Session(caller.session),
            },
            DataRange::NAMESPACE => Audience::Nspace {
                session: caller.session,
                nspace: caller.proc.nspace.clone(),
            },
            DataRange::UNDEF | DataRange::SESSION if self.one_session => Audience::Global,
            DataRange::UNDEF | DataRange::SESSION => Audience::Session(caller.session),
            DataRange::GLOBAL => Audience::Global,
            DataRange::CUSTOM => match custom {
                Some(list) if !list.is_empty() => Audience::Custom(list.to_vec()),
                _ => return Err(Status::ERR_BAD_PARAM),
            },
            DataRange::RM => return Err(Status::ERR_NOT_SUPPORTED),
            _ => return Err(Status::ERR_BAD_PARAM),
        })
    }

    /// `PMIx_Publish`: stores every pair of `data`, or none. Lookups waiting for these keys
    /// may be answered: their answers are returned.
    pub(crate) fn publish(
        &mut self,
        caller: &Caller,
        data: Vec<Info>,
        info: &[Info],
    ) -> Result<Answers<T>, Status> {
        let d = directives(info)?;
        if data.is_empty() {
            return Err(Status::ERR_BAD_PARAM);
        }
        let range = d.range.unwrap_or(DataRange::SESSION);
        let persistence = d.persistence.unwrap_or(Persistence::APP);
        if !matches!(
            persistence,
            Persistence::INDEF
                | Persistence::FIRST_READ
                | Persistence::PROC
                | Persistence::APP
                | Persistence::SESSION
        ) {
            return Err(Status::ERR_BAD_PARAM);
        }
        let audience = self.audience(range, caller, d.custom.as_deref())?;
        // All checks first: a publish is all or nothing.
        for (n, i) in data.iter().enumerate() {
            if data[..n].iter().any(|j| j.key == i.key) {
                return Err(Status::ERR_DUPLICATE_KEY);
            }
            let clash = self.entries.get(&i.key).is_some_and(|list| {
                list.iter()
                    .any(|e| e.publisher.uid == caller.uid && self.overlap(&e.audience, &audience))
            });
            if clash {
                return Err(Status::ERR_DUPLICATE_KEY);
            }
        }
        let keys: Vec<Key> = data.iter().map(|i| i.key.clone()).collect();
        for i in data {
            self.entries.entry(i.key).or_default().push(Entry {
                value: i.value,
                publisher: caller.clone(),
                range,
                audience: audience.clone(),
                persistence,
            });
        }
        Ok(self.wake(&keys))
    }

    /// Answers the waiting lookups that asked for any of `keys` and are now satisfied.
    fn wake(&mut self, keys: &[Key]) -> Answers<T> {
        let mut ids: Vec<u64> = keys
            .iter()
            .filter_map(|k| self.waiting_on.get(k))
            .flatten()
            .copied()
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let mut answers = Vec::new();
        for id in ids {
            let Some(w) = self.waiters.get(&id) else {
                continue;
            };
            let found = self.count_found(&w.caller, &w.keys, &w.search);
            if found >= w.need {
                if let Some(w) = self.remove_waiter(id) {
                    let result = self.take(&w.caller, &w.keys, &w.search);
                    answers.push((w.token, result));
                }
            }
        }
        answers
    }

    fn remove_waiter(&mut self, id: u64) -> Option<Waiter<T>> {
        let w = self.waiters.remove(&id)?;
        for k in &w.keys {
            if let Some(list) = self.waiting_on.get_mut(k) {
                list.retain(|x| *x != id);
                if list.is_empty() {
                    self.waiting_on.remove(k);
                }
            }
        }
        if let Some(d) = w.deadline {
            self.timers.remove(&(d, id));
        }
        Some(w)
    }

    /// The entry of `key` that `caller` finds searching `search`, if any.
    fn find(&self, caller: &Caller, key: &Key, search: &Audience) -> Option<usize> {
        self.entries.get(key)?.iter().position(|e| {
            e.publisher.uid == caller.uid
                && self.contains(&e.audience, caller)
                && self.contains(search, &e.publisher)
        })
    }

    fn count_found(&self, caller: &Caller, keys: &[Key], search: &Audience) -> usize {
        keys.iter()
            .filter(|k| self.find(caller, k, search).is_some())
            .count()
    }

    /// Reads what `caller` finds, consuming first-read entries.
    fn take(
        &mut self,
        caller: &Caller,
        keys: &[Key],
        search: &Audience,
    ) -> Result<Vec<Published>, Status> {
        let mut found = Vec::new();
        for key in keys {
            let Some(pos) = self.find(caller, key, search) else {
                continue;
            };
            let Some(list) = self.entries.get_mut(key) else {
                continue;
            };
            let e = &list[pos];
            found.push(Published {
                proc: e.publisher.proc.clone(),
                key: key.clone(),
                value: e.value.clone(),
            });
            if e.persistence == Persistence::FIRST_READ {
                list.swap_remove(pos);
                if list.is_empty() {
                    self.entries.remove(key);
                }
            }
        }
        if found.is_empty() {
            Err(Status::ERR_NOT_FOUND)
        } else {
            Ok(found)
        }
    }

    /// `PMIx_Lookup`. With `PMIX_WAIT` and too few keys found, the lookup is held and
    /// answered later through `token`.
    pub(crate) fn lookup(
        &mut self,
        caller: &Caller,
        mut keys: Vec<Key>,
        info: &[Info],
        token: T,
        now: Instant,
    ) -> LookupOutcome {
        let d = match directives(info) {
            Ok(d) => d,
            Err(s) => return LookupOutcome::Done(Err(s)),
        };
        let mut seen = HashSet::new();
        keys.retain(|k| seen.insert(k.clone()));
        if keys.is_empty() {
            return LookupOutcome::Done(Err(Status::ERR_BAD_PARAM));
        }
        let range = d.range.unwrap_or(DataRange::SESSION);
        let search = match self.audience(range, caller, d.custom.as_deref()) {
            Ok(a) => a,
            Err(s) => return LookupOutcome::Done(Err(s)),
        };
        let Some(wait) = d.wait else {
            return LookupOutcome::Done(self.take(caller, &keys, &search));
        };
        let need = if wait == 0 {
            keys.len()
        } else {
            wait.min(keys.len())
        };
        if self.count_found(caller, &keys, &search) >= need {
            return LookupOutcome::Done(self.take(caller, &keys, &search));
        }
        let id = self.next_waiter;
        self.next_waiter += 1;
        let deadline = d.timeout.map(|t| now + t);
        if let Some(dl) = deadline {
            self.timers.insert((dl, id), ());
        }
        for k in &keys {
            self.waiting_on.entry(k.clone()).or_default().push(id);
        }
        self.waiters.insert(
            id,
            Waiter {
                token,
                caller: caller.clone(),
                keys,
                need,
                search,
                deadline,
            },
        );
        LookupOutcome::Waiting
    }

    /// `PMIx_Unpublish`: removes `keys` (all of the caller's entries when empty), all or
    /// nothing.
    pub(crate) fn unpublish(
        &mut self,
        caller: &Caller,
        keys: &[Key],
        info: &[Info],
    ) -> Result<(), Status> {
        let d = directives(info)?;
        let mine = |e: &Entry| {
            e.publisher.proc == caller.proc
                && e.publisher.session == caller.session
                && d.range.is_none_or(|r| r == e.range)
        };
        if keys.is_empty() {
            self.remove_where(|_, e| mine(e));
            return Ok(());
        }
        for k in keys {
            let list = self.entries.get(k).map(Vec::as_slice).unwrap_or_default();
            if !list.iter().any(&mine) {
                let others = list.iter().any(|e| {
                    e.publisher.uid == caller.uid
                        && !(e.publisher.proc == caller.proc
                            && e.publisher.session == caller.session)
                });
                return Err(if others {
                    Status::ERR_NO_PERMISSIONS
                } else {
                    Status::ERR_NOT_FOUND
                });
            }
        }
        for k in keys {
            if let Some(list) = self.entries.get_mut(k) {
                list.retain(|e| !mine(e));
                if list.is_empty() {
                    self.entries.remove(k);
                }
            }
        }
        Ok(())
    }

    fn remove_where(&mut self, pred: impl Fn(&Key, &Entry) -> bool) {
        self.entries.retain(|k, list| {
            list.retain(|e| !pred(k, e));
            !list.is_empty()
        });
    }

    /// A process ended: its `PROC` entries go, and its waiting lookups are forgotten.
    pub(crate) fn end_proc(&mut self, session: SessionId, proc: &Proc) {
        self.remove_where(|_, e| {
            e.persistence == Persistence::PROC
                && e.publisher.session == session
                && e.publisher.proc == *proc
        });
        let ids: Vec<u64> = self
            .waiters
            .iter()
            .filter(|(_, w)| w.caller.session == session && w.caller.proc == *proc)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.remove_waiter(id);
        }
    }

    /// A namespace ended: `PROC` and `APP` entries of its processes go, and their waiting
    /// lookups are forgotten.
    pub(crate) fn end_nspace(&mut self, session: SessionId, nspace: &Nspace) {
        self.remove_where(|_, e| {
            matches!(e.persistence, Persistence::PROC | Persistence::APP)
                && e.publisher.session == session
                && e.publisher.proc.nspace == *nspace
        });
        let ids: Vec<u64> = self
            .waiters
            .iter()
            .filter(|(_, w)| w.caller.session == session && w.caller.proc.nspace == *nspace)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.remove_waiter(id);
        }
        if let Some(s) = self.sessions.get_mut(&session) {
            s.nspaces.remove(nspace);
        }
    }

    /// A session ended: everything of it but `INDEF` entries goes.
    pub(crate) fn end_session(&mut self, session: SessionId) {
        self.remove_where(|_, e| {
            e.publisher.session == session && e.persistence != Persistence::INDEF
        });
        let ids: Vec<u64> = self
            .waiters
            .iter()
            .filter(|(_, w)| w.caller.session == session)
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.remove_waiter(id);
        }
        self.sessions.remove(&session);
    }

    /// Forgets the waiting lookups whose token matches (their requester went away).
    pub(crate) fn forget_waiters(&mut self, pred: impl Fn(&T) -> bool) {
        let ids: Vec<u64> = self
            .waiters
            .iter()
            .filter(|(_, w)| pred(&w.token))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            self.remove_waiter(id);
        }
    }

    /// When [`NameStore::handle_timeout`] must next be called.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.timers.keys().next().map(|(t, _)| *t)
    }

    /// Fails the waiting lookups whose `TIMEOUT` has passed.
    pub(crate) fn handle_timeout(&mut self, now: Instant) -> Answers<T> {
        let mut out = Vec::new();
        while let Some(&(t, id)) = self.timers.keys().next() {
            if t > now {
                break;
            }
            self.timers.remove(&(t, id));
            if let Some(w) = self.remove_waiter(id) {
                out.push((w.token, Err(Status::ERR_TIMEOUT)));
            }
        }
        out
    }

    /// Number of published entries.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.values().map(Vec::len).sum()
    }

    /// Number of lookups waiting.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.waiters.len()
    }
}

#[cfg(test)]
mod tests;
