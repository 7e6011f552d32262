//! Groups formed by invitation (`PMIx_Group_invite`, `PMIx_Group_join`) and left
//! (`PMIx_Group_leave`).
//!
//! Invitations and answers are events, as libpmix sends them, so that a pmix-rs process and a
//! libpmix one can invite each other: the leader raises `GROUP_INVITED` for the invitees, each
//! answers `GROUP_INVITE_ACCEPTED` or `GROUP_INVITE_DECLINED` to the leader, and once all
//! accepted the leader raises `GROUP_CONSTRUCT_COMPLETE` for the members (which makes the
//! group known to their servers). Unlike libpmix, which waits for ever when an invitee
//! declines or ends, the leader here fails at the first decline, at an invitee's end (the
//! server tells it, `PROC_TERMINATED`) and at its `TIMEOUT`, and tells those who accepted
//! (`GROUP_CONSTRUCT_ABORT`); a process that accepted waits for the completion, and fails
//! likewise when the leader ends or aborts. Leaving is a request to the server, which tells
//! the other members (`GROUP_LEFT`).

use std::time::Instant;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use pmix_types::{DataArray, DataRange, Info, Proc, Status, Value, attr};
use pmix_wire::{Event, Request};

use crate::call::{blocking, on_status, timeout_of};
use crate::{Client, Error, Group, HandlerId};

/// How an invited process answers (`pmix_group_opt_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupOpt {
    /// `PMIX_GROUP_ACCEPT`: become a member.
    Accept,
    /// `PMIX_GROUP_DECLINE`: stay out.
    Decline,
}

/// Events received by a handler installed for one call, read by the calling thread.
struct Listener<'a> {
    client: &'a Client,
    id: HandlerId,
    rx: Receiver<Event>,
    deadline: Option<Instant>,
}

impl<'a> Listener<'a> {
    fn new(client: &'a Client, codes: &[Status], info: &[Info]) -> Result<Self, Error> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut codes = codes.to_vec();
        codes.push(Status::ERR_LOST_CONNECTION);
        let id = client.register_event_handler(&codes, &[], move |ev| {
            // The caller stops listening only once it is done.
            let _ = tx.send(ev.clone());
        })?;
        Ok(Listener {
            client,
            id,
            rx,
            deadline: timeout_of(info).map(|t| Instant::now() + t),
        })
    }

    /// The next event, or why none will come.
    fn next(&self) -> Result<Event, Error> {
        let ev = match self.deadline {
            Some(d) => self.rx.recv_deadline(d).map_err(|e| match e {
                RecvTimeoutError::Timeout => Error::Timeout,
                RecvTimeoutError::Disconnected => Error::LostConnection,
            })?,
            None => self.rx.recv().map_err(|_| Error::LostConnection)?,
        };
        if ev.code == Status::ERR_LOST_CONNECTION {
            return Err(Error::LostConnection);
        }
        Ok(ev)
    }
}

impl Drop for Listener<'_> {
    fn drop(&mut self) {
        // A lost connection took the registration with it.
        let _ = self.client.deregister_event_handler(self.id);
    }
}

fn info_str<'e>(ev: &'e Event, key: &str) -> Option<&'e str> {
    ev.info
        .iter()
        .find(|i| i.key.as_str() == key)
        .and_then(|i| i.value.as_str())
}

fn affected(ev: &Event) -> Option<&Proc> {
    ev.info
        .iter()
        .find(|i| i.key.as_str() == attr::EVENT_AFFECTED_PROC)
        .and_then(|i| i.value.as_proc())
}

fn proc_array(procs: &[Proc]) -> Result<Value, Error> {
    Ok(Value::DataArray(Box::new(DataArray::from_procs(
        procs.iter().cloned(),
    ))))
}

impl Client {
    /// Raises a group event for `range` (non-default handlers only, `GROUP_ID` attached).
    fn group_event(
        &self,
        code: Status,
        grp: &str,
        range: Value,
        extra: Vec<Info>,
    ) -> Result<(), Error> {
        let mut info = vec![
            Info::attr(attr::EVENT_CUSTOM_RANGE, range),
            Info::attr(attr::EVENT_NON_DEFAULT, true),
            Info::attr(attr::GROUP_ID, grp),
        ];
        info.extend(extra);
        self.notify_event(code, DataRange::CUSTOM, &info)
    }

    /// Invites `procs` into group `grp` with this process as its leader
    /// (`PMIx_Group_invite`), and returns the group once every invitee accepted (each calls
    /// [`Client::group_join`], or libpmix's `PMIx_Group_join`, when it hears
    /// `GROUP_INVITED`). `procs` name processes by rank (this one may be among them). Fails
    /// with `GROUP_INVITE_DECLINED` ([`Error::Server`]) at the first decline,
    /// `GROUP_INVITE_FAILED` when an invitee ends before answering, and [`Error::Timeout`]
    /// when `TIMEOUT` (seconds) passes first; those who accepted then hear
    /// `GROUP_CONSTRUCT_ABORT`. No context id is assigned to a group formed this way.
    pub fn group_invite(&self, grp: &str, procs: &[Proc], info: &[Info]) -> Result<Group, Error> {
        self.check_blocking()?;
        if grp.is_empty() {
            return Err(Error::BadParam("a group needs an id".into()));
        }
        if procs.iter().any(|p| !p.rank.is_valid()) {
            return Err(Error::BadParam(
                "invitations name processes by rank, not whole namespaces".into(),
            ));
        }
        let me = self.proc().clone();
        let mut members: Vec<Proc> = procs.to_vec();
        members.push(me.clone());
        members.sort();
        members.dedup();
        let mut awaited: Vec<Proc> = members.iter().filter(|p| **p != me).cloned().collect();
        if awaited.is_empty() {
            return Err(Error::BadParam("nobody to invite".into()));
        }
        let listener = Listener::new(
            self,
            &[
                Status::GROUP_INVITE_ACCEPTED,
                Status::GROUP_INVITE_DECLINED,
                Status::PROC_TERMINATED,
            ],
            info,
        )?;
        self.group_event(Status::GROUP_INVITED, grp, proc_array(&awaited)?, vec![])?;
        let mut accepted = Vec::new();
        let outcome = loop {
            if awaited.is_empty() {
                break Ok(());
            }
            let ev = match listener.next() {
                Ok(ev) => ev,
                Err(e) => break Err(e),
            };
            let from = match ev.code {
                Status::PROC_TERMINATED => affected(&ev).cloned(),
                _ => Some(ev.source.clone()),
            };
            let Some(at) = from.and_then(|p| awaited.iter().position(|a| *a == p)) else {
                continue;
            };
            let who = awaited.remove(at);
            match ev.code {
                Status::GROUP_INVITE_ACCEPTED => accepted.push(who),
                Status::GROUP_INVITE_DECLINED => {
                    break Err(Error::from_status(Status::GROUP_INVITE_DECLINED));
                }
                _ => break Err(Error::from_status(Status::GROUP_INVITE_FAILED)),
            }
        };
        drop(listener);
        if let Err(e) = outcome {
            if !accepted.is_empty() {
                // Best effort: they fail at their own deadline or the leader's end otherwise.
                let _ = self.group_event(
                    Status::GROUP_CONSTRUCT_ABORT,
                    grp,
                    proc_array(&accepted)?,
                    vec![],
                );
            }
            return Err(e);
        }
        self.group_event(
            Status::GROUP_CONSTRUCT_COMPLETE,
            grp,
            proc_array(&members)?,
            vec![Info::attr(attr::GROUP_MEMBERSHIP, proc_array(&members)?)],
        )?;
        self.shared()
            .groups()
            .insert(grp.to_owned(), members.clone());
        Ok(Group {
            members,
            context_id: None,
        })
    }

    /// Answers `leader`'s invitation into group `grp` (`PMIx_Group_join`). Declining returns
    /// at once (`None`). Accepting waits for the leader's `GROUP_CONSTRUCT_COMPLETE` and
    /// returns the group; it fails with `GROUP_CONSTRUCT_ABORT` ([`Error::Server`]) when the
    /// leader gives up, `GROUP_LEADER_FAILED` when the leader ends first, and
    /// [`Error::Timeout`] when `TIMEOUT` (seconds) passes first. (libpmix's join returns as
    /// soon as the answer is sent.)
    pub fn group_join(
        &self,
        grp: &str,
        leader: &Proc,
        opt: GroupOpt,
        info: &[Info],
    ) -> Result<Option<Group>, Error> {
        self.check_blocking()?;
        if grp.is_empty() {
            return Err(Error::BadParam("a group needs an id".into()));
        }
        let answer = |code| self.group_event(code, grp, Value::Proc(leader.clone()), vec![]);
        if opt == GroupOpt::Decline {
            answer(Status::GROUP_INVITE_DECLINED)?;
            return Ok(None);
        }
        // Listening before answering: the completion may follow the answer at once.
        let listener = Listener::new(
            self,
            &[
                Status::GROUP_CONSTRUCT_COMPLETE,
                Status::GROUP_CONSTRUCT_ABORT,
                Status::PROC_TERMINATED,
            ],
            info,
        )?;
        answer(Status::GROUP_INVITE_ACCEPTED)?;
        loop {
            let ev = listener.next()?;
            let about_grp = info_str(&ev, attr::GROUP_ID) == Some(grp);
            match ev.code {
                Status::PROC_TERMINATED if affected(&ev) == Some(leader) => {
                    return Err(Error::from_status(Status::GROUP_LEADER_FAILED));
                }
                Status::GROUP_CONSTRUCT_ABORT if about_grp && ev.source == *leader => {
                    return Err(Error::from_status(Status::GROUP_CONSTRUCT_ABORT));
                }
                Status::GROUP_CONSTRUCT_COMPLETE if about_grp && ev.source == *leader => {
                    let range = ev
                        .info
                        .iter()
                        .find(|i| i.key.as_str() == attr::EVENT_CUSTOM_RANGE)
                        .map(|i| i.value.clone());
                    let mut members: Vec<Proc> = match range {
                        Some(Value::DataArray(a)) => a
                            .items()
                            .iter()
                            .filter_map(|v| v.as_proc().cloned())
                            .collect(),
                        Some(Value::Proc(p)) => vec![p],
                        _ => Vec::new(),
                    };
                    members.sort();
                    members.dedup();
                    self.shared()
                        .groups()
                        .insert(grp.to_owned(), members.clone());
                    return Ok(Some(Group {
                        members,
                        context_id: None,
                    }));
                }
                _ => {}
            }
        }
    }

    /// Leaves group `grp` (`PMIx_Group_leave`): this process is no longer a member, and the
    /// others hear `GROUP_LEFT` (`EVENT_AFFECTED_PROC` naming it). Not a collective: it
    /// returns once the server has taken note. A group the server does not know this process
    /// a member of is `ERR_NOT_FOUND` ([`Error::Server`]).
    pub fn group_leave(&self, grp: &str, info: &[Info]) -> Result<(), Error> {
        self.check_blocking()?;
        if grp.is_empty() {
            return Err(Error::BadParam("a group needs an id".into()));
        }
        blocking(self.shared(), timeout_of(info), |done| {
            self.shared().submit(
                Request::GroupLeave {
                    grp: grp.to_owned(),
                    info: info.to_vec(),
                },
                on_status(done),
            )
        })?;
        self.shared().groups().remove(grp);
        Ok(())
    }
}
