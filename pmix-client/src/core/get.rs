//! Get resolution: what the store answers on the caller's thread and when the server must be
//! asked, by the rules of `docs/PROTOCOL.md` (see [`crate::Client::get`]).

use std::time::Duration;

use pmix_types::{DataArray, Info, Key, Proc, Rank, Scope, Status, Value, attr, is_reserved_key};

use super::ClientCore;
use super::timeout_of;
use crate::Error;
use crate::store::{LevelSel, Lookup, Qualifiers, Store};

/// The directives of a Get that the client acts on; the server receives all of them.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct GetDirectives<'a> {
    pub(crate) optional: bool,
    /// `GET_REFRESH_CACHE`: another process's put data is asked of the server even when
    /// cached.
    pub(crate) refresh: bool,
    pub(crate) timeout: Option<Duration>,
    pub(crate) q: Qualifiers<'a>,
}

fn bool_directive(info: &Info) -> bool {
    info.flag().unwrap_or(false)
}

impl<'a> GetDirectives<'a> {
    pub(crate) fn parse(info: &'a [Info]) -> Result<Self, Error> {
        let mut d = GetDirectives {
            timeout: timeout_of(info),
            ..GetDirectives::default()
        };
        for i in info {
            match i.key.as_str() {
                attr::OPTIONAL => d.optional = bool_directive(i),
                attr::GET_REFRESH_CACHE => d.refresh = bool_directive(i),
                attr::DATA_SCOPE => {
                    let s = match i.value {
                        Value::Scope(s) => s,
                        ref v => v
                            .as_u32()
                            .and_then(|n| u8::try_from(n).ok())
                            .map(Scope)
                            .ok_or_else(|| {
                                Error::BadParam(format!("{} must be a scope", attr::DATA_SCOPE))
                            })?,
                    };
                    d.q.scope = Some(s);
                }
                attr::SESSION_INFO if bool_directive(i) => d.q.level = Some(LevelSel::Session),
                attr::JOB_INFO if bool_directive(i) => d.q.level = Some(LevelSel::Job),
                attr::APP_INFO if bool_directive(i) => d.q.level = Some(LevelSel::App),
                attr::NODE_INFO if bool_directive(i) => d.q.level = Some(LevelSel::Node),
                attr::APPNUM => d.q.appnum = i.value.as_u32(),
                attr::NODEID => d.q.nodeid = i.value.as_u32(),
                attr::HOSTNAME => d.q.hostname = i.value.as_str(),
                _ => {}
            }
        }
        Ok(d)
    }

    /// The directives for reading the store once the server answered (and refreshed it):
    /// whatever the store now lacks is not there.
    pub(crate) fn answered(mut self) -> Self {
        self.optional = true;
        self.refresh = false;
        self
    }
}

/// What the server is asked when the store cannot answer a Get of `proc`'s `key`: the wire
/// key, whether it is reserved, and whom to ask about. A reserved key is only ever asked for
/// because the target's namespace is unknown here; the server is then asked for that
/// namespace's job level (rank `WILDCARD`), which it answers at once with the job data,
/// rather than for the target process, which it would hold until that process commits. The
/// answer for the target then comes from the store.
pub(crate) struct ServerGet {
    pub(crate) ask: Proc,
    pub(crate) key: Option<Key>,
    pub(crate) reserved: bool,
}

impl ServerGet {
    pub(crate) fn new(proc: &Proc, key: Option<&str>) -> Result<ServerGet, Error> {
        let key = key
            .map(Key::new)
            .transpose()
            .map_err(|e| Error::BadParam(e.to_string()))?;
        let reserved = key.as_ref().is_some_and(Key::is_reserved);
        let ask = if reserved {
            Proc::new(proc.nspace.clone(), Rank::WILDCARD)
        } else {
            proc.clone()
        };
        Ok(ServerGet { ask, key, reserved })
    }

    /// The Get's answer for `target` once the server answered with `status` and the reply's
    /// data is in the store: `local` reads the store ([`GetDirectives::answered`]),
    /// `has_job` says whether the target's job data is here now.
    pub(crate) fn answer(
        &self,
        status: Status,
        target: &Proc,
        local: impl FnOnce() -> Local,
        has_job: impl Fn() -> bool,
    ) -> Result<Value, Error> {
        if status != Status::SUCCESS && !self.reserved {
            return Err(Error::from_status(status));
        }
        let key = self.key.as_ref().map(Key::as_str);
        match local() {
            Local::Done(Err(Error::NotFound { .. })) if key.is_none() => {
                // Success with no data: the process put nothing.
                Ok(Value::from(DataArray::from_infos(Vec::new())))
            }
            // Still no job data for the namespace: the server's status says why.
            Local::Done(Err(Error::NotFound { .. })) | Local::AskServer
                if self.reserved && status != Status::SUCCESS && !has_job() =>
            {
                Err(Error::from_status(status))
            }
            Local::Done(r) => r,
            Local::AskServer => Err(not_found(target, key)),
        }
    }
}

/// What the local store says about a Get.
pub(crate) enum Local {
    Done(Result<Value, Error>),
    AskServer,
}

pub(crate) fn not_found(proc: &Proc, key: Option<&str>) -> Error {
    Error::NotFound {
        proc: proc.to_string(),
        key: key.unwrap_or("*").to_owned(),
    }
}

impl ClientCore {
    /// Answers a Get from the store if the rules of docs/PROTOCOL.md allow it. `None`: put
    /// data a collecting fence brought of `proc` is still encoded; decode it
    /// ([`ClientCore::unpack`]) and ask again with `unpacked`.
    pub(crate) fn resolve_get(
        &self,
        me: &Proc,
        proc: &Proc,
        key: Option<&str>,
        d: &GetDirectives<'_>,
        unpacked: bool,
    ) -> Option<Local> {
        // What another process put may have changed since it was cached; job data does not.
        let put_data = proc.rank != Rank::WILDCARD && key.is_none_or(|k| !is_reserved_key(k));
        if d.refresh && put_data && proc != me {
            return Some(Local::AskServer);
        }
        // Put data a collecting fence brought of `proc` is decoded when first asked for.
        // (The cheap tests first: a get of job data never looks for fence data.)
        if !unpacked && put_data && self.store.has_packed(proc) {
            return None;
        }
        Some(from_store(&self.store, me, proc, key, d))
    }

    /// [`ClientCore::resolve_get`], decoding first the put data a collecting fence brought
    /// of `proc` if it needs to be.
    pub(crate) fn resolve_get_unpacked(
        &mut self,
        me: &Proc,
        proc: &Proc,
        key: Option<&str>,
        d: &GetDirectives<'_>,
    ) -> Local {
        if let Some(answer) = self.resolve_get(me, proc, key, d, false) {
            return answer;
        }
        if let Err(e) = self.store.unpack(proc) {
            return Local::Done(Err(Error::Protocol(format!(
                "fence data of {proc} does not decode: {e}"
            ))));
        }
        let answer = self.resolve_get(me, proc, key, d, true);
        answer.unwrap_or(Local::AskServer)
    }
}

/// What the store says, its fence data of `proc` decoded.
fn from_store(
    store: &Store,
    me: &Proc,
    proc: &Proc,
    key: Option<&str>,
    d: &GetDirectives<'_>,
) -> Local {
    let Some(key) = key else {
        let mine = proc == me;
        return match store.all_data(proc, d.q.scope, mine) {
            Some(infos) => Local::Done(Ok(Value::from(DataArray::from_infos(infos)))),
            None if d.optional => Local::Done(Err(not_found(proc, None))),
            None => Local::AskServer,
        };
    };
    let ns = proc.nspace.as_str();
    if is_reserved_key(key) {
        let own_rank = (ns == me.nspace.as_str()).then_some(me.rank);
        return match store.get_reserved(ns, proc.rank, key, &d.q, own_rank) {
            Lookup::Found(v) => Local::Done(Ok(v)),
            Lookup::Missing => Local::Done(Err(not_found(proc, Some(key)))),
            Lookup::Unknown if d.optional => Local::Done(Err(not_found(proc, Some(key)))),
            Lookup::Unknown => Local::AskServer,
        };
    }
    if proc.rank == Rank::WILDCARD {
        // Put data belongs to a process; the only non-reserved keys a namespace has are
        // whatever the host registered at the job level.
        return Local::Done(
            store
                .get_job_user_key(ns, key)
                .ok_or_else(|| not_found(proc, Some(key))),
        );
    }
    if let Some(v) = store.get_data(proc, key, d.q.scope) {
        return Local::Done(Ok(v));
    }
    if proc == me || d.optional {
        // Everything this process put is here, committed or not.
        return Local::Done(Err(not_found(proc, Some(key))));
    }
    Local::AskServer
}
