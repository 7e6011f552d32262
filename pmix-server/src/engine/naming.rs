//! Publish, lookup and unpublish: the caller's name-service identity, then the request to
//! the server's own name store ([`names`](super::names)) or to the host, and the answers.

use std::time::Instant;

use pmix_types::{Info, Key, Proc, Status, attr};
use pmix_wire::{Published, Reply, ReplyBody};

use super::host_ops::{HostCall, HostOutcome, PendingHost, failure_of};
use super::names::{Caller, LookupOutcome, NameService, NameStore, SessionId};
use super::{ConnId, Engine, names};

/// The session id of this server in its built-in name service.
pub(super) const SESSION: SessionId = 0;

/// Who answers publish, lookup and unpublish, and the server's own name store.
pub(super) struct Naming {
    pub(super) service: NameService,
    /// The built-in name service; lookups waiting in it are identified by (conn, id).
    pub(super) store: NameStore<(ConnId, u32)>,
}

impl Naming {
    /// The name service of a server on node `hostname`, answered by `service`.
    pub(super) fn new(service: NameService, hostname: &str) -> Self {
        let mut store = NameStore::default();
        store.open_session(SESSION, hostname);
        Naming { service, store }
    }
}

impl Engine {
    /// The name-service identity of a client: the uid and gid it was registered with.
    pub(super) fn caller(&self, conn: ConnId, proc: Proc) -> Option<Caller> {
        let (uid, gid) = self.sessions.creds(conn, proc.rank)?;
        Some(Caller {
            proc,
            uid,
            gid,
            session: SESSION,
        })
    }

    /// The directives passed to a host, with the caller's credentials added as the standard
    /// requires (replacing any the client claimed).
    fn with_creds(caller: &Caller, mut info: Vec<Info>) -> Vec<Info> {
        info.retain(|i| !matches!(i.key.as_str(), attr::USERID | attr::GRPID));
        info.push(Info::attr(attr::USERID, caller.uid));
        info.push(Info::attr(attr::GRPID, caller.gid));
        info
    }

    pub(super) fn publish(
        &mut self,
        conn: ConnId,
        id: u32,
        me: Proc,
        data: Vec<Info>,
        info: Vec<Info>,
    ) {
        let Some(caller) = self.caller(conn, me) else {
            return;
        };
        match self.naming.service {
            NameService::Host => {
                let info = Self::with_creds(&caller, info);
                self.host_call(
                    PendingHost::Status { conn, id },
                    HostCall::Publish {
                        proc: caller.proc,
                        data,
                        info,
                    },
                );
            }
            NameService::BuiltIn => match self.naming.store.publish(&caller, data, &info) {
                Ok(answers) => {
                    self.reply_status(conn, id, Status::SUCCESS);
                    self.answer_lookups(answers);
                }
                Err(status) => self.reply_status(conn, id, status),
            },
        }
    }

    pub(super) fn lookup(
        &mut self,
        conn: ConnId,
        id: u32,
        me: Proc,
        keys: Vec<Key>,
        info: Vec<Info>,
        now: Instant,
    ) {
        let Some(caller) = self.caller(conn, me) else {
            return;
        };
        match self.naming.service {
            NameService::Host => {
                if keys.is_empty() {
                    return self.reply_status(conn, id, Status::ERR_BAD_PARAM);
                }
                let info = Self::with_creds(&caller, info);
                self.host_call(
                    PendingHost::Lookup { conn, id },
                    HostCall::Lookup {
                        proc: caller.proc,
                        keys,
                        info,
                    },
                );
            }
            NameService::BuiltIn => {
                match self
                    .naming
                    .store
                    .lookup(&caller, keys, &info, (conn, id), now)
                {
                    LookupOutcome::Done(result) => self.reply_lookup(conn, id, result),
                    LookupOutcome::Waiting => {}
                }
            }
        }
    }

    pub(super) fn unpublish(
        &mut self,
        conn: ConnId,
        id: u32,
        me: Proc,
        keys: Vec<Key>,
        info: Vec<Info>,
    ) {
        let Some(caller) = self.caller(conn, me) else {
            return;
        };
        match self.naming.service {
            NameService::Host => {
                let info = Self::with_creds(&caller, info);
                self.host_call(
                    PendingHost::Status { conn, id },
                    HostCall::Unpublish {
                        proc: caller.proc,
                        keys,
                        info,
                    },
                );
            }
            NameService::BuiltIn => {
                let status = match self.naming.store.unpublish(&caller, &keys, &info) {
                    Ok(()) => Status::SUCCESS,
                    Err(s) => s,
                };
                self.reply_status(conn, id, status);
            }
        }
    }

    pub(super) fn reply_lookup(
        &mut self,
        conn: ConnId,
        id: u32,
        result: Result<Vec<Published>, Status>,
    ) {
        let reply = match result {
            // Found nothing is not found, however the answer was reached.
            Ok(found) if found.is_empty() => Reply::status(Status::ERR_NOT_FOUND),
            Ok(found) => Reply {
                status: Status::SUCCESS,
                body: ReplyBody::Lookup { found },
            },
            Err(status) => Reply::status(status),
        };
        self.reply(conn, id, reply);
    }

    pub(super) fn answer_lookups(&mut self, answers: names::Answers<(ConnId, u32)>) {
        for ((conn, id), result) in answers {
            self.reply_lookup(conn, id, result);
        }
    }

    /// The host answered a lookup.
    pub(super) fn lookup_done(&mut self, conn: ConnId, id: u32, outcome: HostOutcome) {
        let result = match outcome {
            HostOutcome::Lookup(r) => r,
            other => Err(failure_of(&other)),
        };
        self.reply_lookup(conn, id, result);
    }
}
