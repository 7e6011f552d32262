//! Groups formed by invitation (`PMIx_Group_invite`, `PMIx_Group_join`) and left
//! (`PMIx_Group_leave`).
//!
//! libpmix invites and joins with events, not commands: the leader raises `GROUP_INVITED`
//! for the invitees (`EVENT_CUSTOM_RANGE`), each answers `GROUP_INVITE_ACCEPTED` or
//! `GROUP_INVITE_DECLINED` to the leader, and once all accepted the leader raises
//! `GROUP_CONSTRUCT_COMPLETE` for the members. The server relays them like any event, and
//! reads them on the way:
//! - `GROUP_CONSTRUCT_COMPLETE` makes the group known here with its members, so that a
//!   member can leave it, and its members hear of each other's failures;
//! - while a process waits for another's answer (a leader for an invitee's, a process that
//!   accepted for the leader's completion), and either is a local client, the end of the
//!   awaited process (with or without finalize) is told to the waiter as `PROC_TERMINATED`
//!   (`EVENT_AFFECTED_PROC`, `GROUP_ID`): the event libpmix's invitation listens for, turning
//!   it into `GROUP_INVITE_FAILED`. The awaited process's server tells a waiter on another
//!   node through the host, since the waiter's server hears of a finalized process nowhere
//!   else; the waiter's server passes on one such event per wait, so that an end it also
//!   learned from the host is told once. Nothing waits forever on a process that is gone.
//!
//! Leaving is a command (`GROUP_LEAVE`), answered at once: the leaver is no longer a member
//! here, and the remaining members hear `GROUP_LEFT` (with `EVENT_AFFECTED_PROC`), which also
//! tells their servers on other nodes.

use pmix_types::{DataRange, Info, Proc, Status, attr};
use pmix_wire::Event;

use super::events::custom_range;
use super::fence::FenceTable;
use super::groups::{Groups, Wait};
use super::host_ops::{HostCall, PendingHost};
use super::sessions::Sessions;
use super::{ConnId, Engine};

fn group_id(event: &Event) -> Option<&str> {
    event
        .info
        .iter()
        .find(|i| i.key.as_str() == attr::GROUP_ID)
        .and_then(|i| i.value.as_str())
}

/// Whether `p` is a client connected here.
fn is_local_client(sessions: &Sessions, p: &Proc) -> bool {
    sessions.active().any(|(_, c)| c.proc == *p)
}

impl Groups {
    /// Records that `waiter` waits for `awaited`'s answer, when either is a local client.
    fn add_wait(&mut self, waiter: &Proc, awaited: Proc, grp: &str, sessions: &Sessions) {
        if is_local_client(sessions, waiter) || is_local_client(sessions, &awaited) {
            self.waits.push(Wait {
                waiter: waiter.clone(),
                awaited,
                grp: grp.to_owned(),
            });
        }
    }

    /// A `PROC_TERMINATED` from the host about a group's formation: whether the wait it ends
    /// was still recorded (it is then ended).
    fn end_wait_told(&mut self, event: &Event) -> bool {
        let affected = event
            .info
            .iter()
            .find(|i| i.key.as_str() == attr::EVENT_AFFECTED_PROC)
            .and_then(|i| i.value.as_proc());
        let waiters = custom_range(event);
        let before = self.waits.len();
        self.waits
            .retain(|w| !(Some(&w.awaited) == affected && waiters.contains(&w.waiter)));
        self.waits.len() != before
    }

    /// Reads a group event on its way, from a local client or from the host.
    fn observe(&mut self, event: &Event, sessions: &Sessions, table: &FenceTable) {
        let code = event.code;
        if code == Status::GROUP_INVITED {
            let leader = &event.source;
            let grp = group_id(event).unwrap_or_default().to_owned();
            for p in custom_range(event) {
                if p != *leader && p.rank.is_valid() {
                    self.add_wait(leader, p, &grp, sessions);
                }
            }
        } else if code == Status::GROUP_INVITE_ACCEPTED || code == Status::GROUP_INVITE_DECLINED {
            let answering = &event.source;
            let leaders = custom_range(event);
            self.waits
                .retain(|w| !(w.awaited == *answering && leaders.contains(&w.waiter)));
            if code == Status::GROUP_INVITE_ACCEPTED {
                let grp = group_id(event).unwrap_or_default().to_owned();
                for l in leaders.into_iter().filter(|l| l.rank.is_valid()) {
                    self.add_wait(answering, l, &grp, sessions);
                }
            }
        } else if code == Status::GROUP_CONSTRUCT_COMPLETE {
            let leader = &event.source;
            let members = custom_range(event);
            self.waits
                .retain(|w| !(w.awaited == *leader && members.contains(&w.waiter)));
            if let Some(grp) = group_id(event).filter(|g| !g.is_empty()) {
                let gid = self.intern(grp);
                let mut members = members;
                members.sort();
                members.dedup();
                self.set_members(gid, members);
            }
        } else if code == Status::GROUP_LEFT {
            let affected = event
                .info
                .iter()
                .find(|i| i.key.as_str() == attr::EVENT_AFFECTED_PROC)
                .and_then(|i| i.value.as_proc());
            if let (Some(grp), Some(gone)) = (group_id(event), affected) {
                let gone = gone.clone();
                self.drop_member(grp, &gone, table);
            }
        }
    }

    /// Removes `who` from group `grp`; whether it was a member here.
    fn drop_member(&mut self, grp: &str, who: &Proc, table: &FenceTable) -> bool {
        let Some(gid) = self.id_of(grp) else {
            return false;
        };
        let Some(left) = self.remove_member(gid, who) else {
            return false;
        };
        if left == 0 {
            self.dissolve(gid);
            self.forget_if_unused(gid, table);
        }
        true
    }

    /// `me` leaves group `grp`: the members that remain, or why it cannot.
    fn leave(&mut self, me: &Proc, grp: &str, table: &FenceTable) -> Result<Vec<Proc>, Status> {
        if grp.is_empty() {
            return Err(Status::ERR_BAD_PARAM);
        }
        let rest = self
            .id_of(grp)
            .and_then(|gid| self.members(gid))
            .map(|m| m.iter().filter(|p| *p != me).cloned().collect::<Vec<_>>());
        if !self.drop_member(grp, me, table) {
            // Unknown here, or this process is not a member by name.
            return Err(Status::ERR_NOT_FOUND);
        }
        Ok(rest.unwrap_or_default())
    }

    /// `gone` ended: the waits for its answer, removed (its own waits end too).
    fn end_waits_on(&mut self, gone: &Proc) -> Vec<Wait> {
        let (ended, kept): (Vec<Wait>, Vec<Wait>) = std::mem::take(&mut self.waits)
            .into_iter()
            .partition(|w| w.awaited == *gone || w.waiter == *gone);
        self.waits = kept;
        ended.into_iter().filter(|w| w.waiter != *gone).collect()
    }
}

impl Engine {
    /// Whether an event from the host is to be delivered here: a `PROC_TERMINATED` about a
    /// group's formation only while the wait it ends is still recorded (it is then ended).
    pub(super) fn group_event_from_host(&mut self, event: &Event) -> bool {
        if event.code != Status::PROC_TERMINATED || group_id(event).is_none() {
            self.observe_group_event(event);
            return true;
        }
        self.groups.end_wait_told(event)
    }

    /// Reads a group event on its way, from a local client or from the host.
    pub(super) fn observe_group_event(&mut self, event: &Event) {
        self.groups
            .observe(event, &self.sessions, &self.collectives.table);
    }

    /// A member leaves group `grp` (`PMIx_Group_leave`).
    pub(super) fn group_leave(&mut self, conn: ConnId, id: u32, me: &Proc, grp: &str) {
        let rest = match self.groups.leave(me, grp, &self.collectives.table) {
            Ok(rest) => rest,
            Err(status) => return self.reply_status(conn, id, status),
        };
        self.reply_status(conn, id, Status::SUCCESS);
        if rest.is_empty() {
            return;
        }
        let range = pmix_types::DataArray::from_procs(rest);
        let event = Event {
            code: Status::GROUP_LEFT,
            source: me.clone(),
            range: DataRange::CUSTOM,
            info: vec![
                Info::attr(attr::GROUP_ID, grp),
                Info::attr(attr::EVENT_AFFECTED_PROC, me.clone()),
                Info::attr(attr::EVENT_CUSTOM_RANGE, range),
            ],
        };
        self.notify(&event, Some(conn));
        self.host_call(PendingHost::Nothing, HostCall::NotifyEvent { event });
    }

    /// `gone` ended (with or without finalize): whoever here waits for its answer hears
    /// `PROC_TERMINATED`, and its own waits end.
    pub(super) fn group_waits_end(&mut self, gone: &Proc) {
        for w in self.groups.end_waits_on(gone) {
            let local = is_local_client(&self.sessions, &w.waiter);
            let mut event = Event {
                code: Status::PROC_TERMINATED,
                source: self.nspaces.me().clone(),
                range: DataRange::PROC_LOCAL,
                info: vec![
                    Info::attr(attr::EVENT_AFFECTED_PROC, w.awaited.clone()),
                    Info::attr(attr::GROUP_ID, w.grp.as_str()),
                    Info::attr(
                        attr::EVENT_TEXT_MESSAGE,
                        format!(
                            "{} ended before answering in the formation of group {}",
                            w.awaited, w.grp
                        ),
                    ),
                ],
            };
            let waiter = w.waiter;
            if local {
                self.deliver(&event, move |_, c| c.proc == waiter);
            } else {
                event.range = DataRange::CUSTOM;
                event
                    .info
                    .push(Info::attr(attr::EVENT_CUSTOM_RANGE, waiter));
                self.host_call(PendingHost::Nothing, HostCall::NotifyEvent { event });
            }
        }
    }
}
