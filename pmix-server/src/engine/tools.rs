//! Tools: processes this server did not launch (debuggers, job monitors, `pmixps`) that
//! connect to ask it about its jobs (`PMIx_tool_init`, `PMIx_tool_attach_to_server`).
//!
//! A tool is authenticated by the uid the kernel confirms for its socket: it is served when
//! that uid is root's or the server's own, refused otherwise, as OpenPMIx's `native` security
//! module does for a tool. One that has no name is given one here (OpenPMIx leaves that to
//! its host's `tool_connected` and refuses such a tool without one); one that brings its own
//! (a tool started by a PMIx server, or named by its caller) keeps it unless a registered
//! namespace or another connected tool has it. The host then has the last word
//! ([`Host::tool_connected`](crate::Host::tool_connected)).
//!
//! What a tool may ask is a short list: queries (the namespaces, process tables, job data),
//! gets (a job's data, its processes' reserved keys and what they committed, answered at
//! once: `get.rs`), events (register, deregister, notify: a debugger's `DEBUGGER_RELEASE`, `debug.rs`), job
//! control and spawn (the host's to carry out, the tool as the requester), and finalize. It
//! belongs to no job: it takes part in no collective, and nothing a job waits for waits for
//! it; its end ends nothing, except that the last debugger's end aborts the processes still
//! held in init (`debug.rs`).
//!
//! Events reach a tool that registered for their code when their range covers it (`LOCAL`,
//! `SESSION`, `GLOBAL`, or a `CUSTOM` range naming it or its namespace), and always when the
//! host raised them (process ends of the server's jobs): a tool watches jobs it is no part
//! of. Every job's end reaches them as `EVENT_JOB_END` from the server when the host
//! deregisters the job's namespace.
//!
//! Tools also pull the processes' output and push their input (`iof.rs`).

use std::collections::HashMap;
use std::time::Instant;

use pmix_types::{DataRange, Info, Nspace, Proc, Rank, Status, attr};
use pmix_wire::{Event, Request};

use super::auth::PeerCreds;
use super::host_ops::{HostCall, HostOutcome, PendingHost, status_of};
use super::nspaces::Nspaces;
use super::sessions::EventReg;
use super::{ConnId, Engine, Output, events, job_control};

/// The tools of one server.
pub(crate) struct Tools {
    /// Tools are served at all (the host enabled tool support).
    enabled: bool,
    /// The uid of the server's own user, whose tools are served (besides root's).
    server_uid: u32,
    /// The number in the next name given out.
    next: u32,
    conns: HashMap<ConnId, ToolConn>,
}

impl Default for Tools {
    fn default() -> Self {
        Tools {
            enabled: false,
            server_uid: u32::MAX,
            next: 1,
            conns: HashMap::new(),
        }
    }
}

struct ToolConn {
    proc: Proc,
    /// The host accepted it.
    active: bool,
    /// The event codes it registered for.
    events: EventReg,
}

/// A tool's handshake, as a front-end read it.
#[derive(Debug)]
#[cfg_attr(test, derive(PartialEq))]
pub(crate) struct ToolHello {
    /// The name it brings, if any.
    pub(crate) proc: Option<Proc>,
    /// Its uid and gid, as the kernel confirmed them (or, where it cannot tell, as claimed).
    pub(crate) creds: PeerCreds,
    /// What it passed along (its pid, its command line, ...).
    pub(crate) info: Vec<Info>,
}

impl Tools {
    /// Serves tools (or stops serving new ones): those of root and of `server_uid`.
    fn set_support(&mut self, enabled: bool, server_uid: u32) {
        self.enabled = enabled;
        self.server_uid = server_uid;
    }

    /// True if connection `conn` is a tool's.
    fn has(&self, conn: ConnId) -> bool {
        self.conns.contains_key(&conn)
    }

    /// How many tools are debuggers (see [`Engine::debuggers`]).
    fn debuggers(&self) -> usize {
        self.conns
            .values()
            .filter(|t| t.active && t.events.names(Status::READY_FOR_DEBUG))
            .count()
    }

    /// The tools registered for `code` (or for every code).
    fn wanting(&self, code: Status) -> Vec<ConnId> {
        self.conns
            .iter()
            .filter(|(_, t)| t.active && t.events.wants(code))
            .map(|(c, _)| *c)
            .collect()
    }

    /// Forgets the tool on `conn`: its name, and whether it was a debugger (registered for
    /// `READY_FOR_DEBUG` by name).
    fn remove(&mut self, conn: ConnId) -> Option<(Proc, bool)> {
        let t = self.conns.remove(&conn)?;
        let debugger = t.events.names(Status::READY_FOR_DEBUG);
        Some((t.proc, debugger))
    }

    /// A tool's handshake on `conn`: its name and what the host hears of it, or why it is
    /// refused. `nspaces` are the namespaces a tool's name must not take.
    fn admit(
        &mut self,
        conn: ConnId,
        hello: ToolHello,
        nspaces: &Nspaces,
    ) -> Result<(Proc, Vec<Info>), (Status, String)> {
        if !self.enabled {
            let why = "this server does not serve tools (its host did not enable them)";
            return Err((Status::ERR_NOT_SUPPORTED, why.into()));
        }
        let uid = hello.creds.uid;
        if uid != 0 && uid != self.server_uid {
            let why = format!(
                "uid {uid} is neither the server's ({}) nor root's",
                self.server_uid
            );
            return Err((Status::ERR_NO_PERMISSIONS, why));
        }
        let proc = match hello.proc {
            Some(p) => {
                if nspaces.id(p.nspace.as_str()).is_some() || self.named(&p) {
                    let why = format!("the name {p} it brings is taken");
                    return Err((Status::ERR_EXISTS, why));
                }
                p
            }
            None => match self.fresh_name(nspaces) {
                Ok(p) => p,
                Err(why) => return Err((Status::ERR_NOMEM, why)),
            },
        };
        let mut info = vec![
            Info::attr(attr::USERID, hello.creds.uid),
            Info::attr(attr::GRPID, hello.creds.gid),
        ];
        info.extend(hello.info);
        self.conns.insert(
            conn,
            ToolConn {
                proc: proc.clone(),
                active: false,
                events: EventReg::default(),
            },
        );
        Ok((proc, info))
    }

    fn named(&self, p: &Proc) -> bool {
        self.conns.values().any(|t| t.proc == *p)
    }

    /// A fresh name for a tool: `<server nspace>-tool-<n>`, rank 0.
    fn fresh_name(&mut self, nspaces: &Nspaces) -> Result<Proc, String> {
        loop {
            let n = self.next;
            self.next = n.checked_add(1).ok_or("out of tool names")?;
            let name = format!("{}-tool-{n}", nspaces.me().nspace);
            let nspace = Nspace::new(name).map_err(|e| e.to_string())?;
            let proc = Proc::new(nspace, Rank(0));
            if nspaces.id(proc.nspace.as_str()).is_none() && !self.named(&proc) {
                return Ok(proc);
            }
        }
    }

    /// The host answered `tool_connected` for `conn` with `status`: the tool, accepted
    /// (`Ok`) or forgotten (`Err`); `None` if it is gone.
    fn connected(&mut self, conn: ConnId, status: Status) -> Option<Result<Proc, Proc>> {
        let t = self.conns.get_mut(&conn)?;
        if status.is_success() {
            t.active = true;
            Some(Ok(t.proc.clone()))
        } else {
            let tool = t.proc.clone();
            self.conns.remove(&conn);
            Some(Err(tool))
        }
    }

    /// The tool on `conn`, and whether the host accepted it.
    fn caller(&self, conn: ConnId) -> Option<(Proc, bool)> {
        self.conns.get(&conn).map(|t| (t.proc.clone(), t.active))
    }

    /// The events the tool on `conn` registers for.
    fn events(&mut self, conn: ConnId) -> Option<&mut EventReg> {
        self.conns.get_mut(&conn).map(|t| &mut t.events)
    }

    /// The tools that `event` reaches and that registered for it, but `except` (see the
    /// module's doc). `from_host`: the host raised it.
    fn reached_by(&self, event: &Event, except: Option<ConnId>, from_host: bool) -> Vec<ConnId> {
        if from_host && event.code == Status::EVENT_JOB_END {
            // Tools hear every job's end from the server itself (`tools_job_ended`).
            return Vec::new();
        }
        self.conns
            .iter()
            .filter(|(c, t)| Some(**c) != except && t.active && t.events.wants(event.code))
            .filter(|(_, t)| tool_reached(event, from_host, &t.proc))
            .map(|(c, _)| *c)
            .collect()
    }
}

/// Whether `event` reaches tool `p` by its range: the host's events reach every tool; of the
/// others, those of the local, session and global ranges, and a custom range naming it.
fn tool_reached(event: &Event, from_host: bool, p: &Proc) -> bool {
    match event.range {
        _ if from_host => true,
        DataRange::LOCAL | DataRange::SESSION | DataRange::GLOBAL => true,
        DataRange::CUSTOM => events::custom_range(event)
            .iter()
            .any(|c| c.nspace == p.nspace && (c.rank == Rank::WILDCARD || c.rank == p.rank)),
        _ => false,
    }
}

impl Engine {
    /// Serves tools (or stops serving new ones): those of root and of `server_uid`.
    pub(crate) fn set_tool_support(&mut self, enabled: bool, server_uid: u32) {
        self.tools.set_support(enabled, server_uid);
    }

    /// True if connection `conn` is a tool's.
    pub(crate) fn is_tool(&self, conn: ConnId) -> bool {
        self.tools.has(conn)
    }

    /// A tool's handshake: refused at once, or handed to the host with the tool's name.
    pub(crate) fn handle_tool_hello(&mut self, conn: ConnId, hello: ToolHello) {
        let uid = hello.creds.uid;
        match self.tools.admit(conn, hello, &self.nspaces) {
            Ok((tool, info)) => self.host_call(
                PendingHost::ToolConnect { conn },
                HostCall::ToolConnected { tool, info },
            ),
            Err((status, reason)) => {
                tracing::warn!(conn, uid, ?status, "refusing a tool: {reason}");
                self.out.push_back(Output::Refuse {
                    conn,
                    status,
                    reason,
                });
            }
        }
    }

    /// The host answered `tool_connected`.
    pub(super) fn tool_connect_done(&mut self, conn: ConnId, outcome: &HostOutcome) {
        let status = status_of(outcome);
        match self.tools.connected(conn, status) {
            None => {}
            Some(Ok(tool)) => {
                tracing::debug!(conn, %tool, "a tool connected");
                self.out.push_back(Output::ToolAccept {
                    conn,
                    tool,
                    server: self.nspaces.me().clone(),
                });
            }
            Some(Err(tool)) => {
                tracing::warn!(%tool, ?status, "the host refused a tool");
                self.out.push_back(Output::Refuse {
                    conn,
                    status,
                    reason: "the host refused the tool".into(),
                });
            }
        }
    }

    /// A request from a tool (`conn` is one, [`Engine::is_tool`]).
    pub(super) fn tool_request(&mut self, conn: ConnId, id: u32, req: Request, now: Instant) {
        let Some((me, active)) = self.tools.caller(conn) else {
            return;
        };
        if !active {
            return self.reply_status(conn, id, Status::ERR_INIT);
        }
        match req {
            Request::Query { queries } => self.query(conn, id, me, queries),
            Request::Get { proc, key, info } => self.tool_get(conn, id, &proc, key, &info, now),
            Request::RegisterEvents { codes, .. } => {
                let newly: Vec<Status> = match self.tools.events(conn) {
                    Some(events) => {
                        let newly = codes.iter().copied().filter(|c| !events.names(*c));
                        let newly = newly.collect();
                        events.add(&codes);
                        newly
                    }
                    None => Vec::new(),
                };
                self.reply_status(conn, id, Status::SUCCESS);
                self.tell_new_debugger(conn, &codes);
                // The states announced before (a process set defined...), as a client hears
                // them when it registers late (`event_cache.rs`).
                let kept = self.event_cache.of_codes_where(&newly, |e| {
                    self.tools
                        .conns
                        .get(&conn)
                        .is_some_and(|t| tool_reached(e, false, &t.proc))
                });
                for event in kept {
                    self.send_event(vec![conn], &event);
                }
            }
            Request::DeregisterEvents { codes } => {
                if let Some(events) = self.tools.events(conn) {
                    events.remove(&codes);
                }
                self.reply_status(conn, id, Status::SUCCESS);
                if codes.contains(&Status::READY_FOR_DEBUG) {
                    self.debugger_gone(&me);
                }
            }
            Request::Notify { mut event } => {
                // The source is who sends it, whatever the message claims.
                event.source = me;
                self.relay_notification(conn, id, event);
            }
            Request::JobControl {
                targets,
                directives,
            } => self.tool_job_control(conn, id, me, targets, directives),
            Request::Spawn { job_info, apps } => self.spawn(conn, id, me, job_info, apps),
            Request::IofPull {
                procs,
                channels,
                directives,
                tag,
            } => self.iof_pull(conn, id, procs, channels, &directives, tag),
            Request::IofDeregister { id: pull, .. } => self.iof_deregister(conn, id, pull),
            Request::IofPush {
                targets,
                directives,
                data,
            } => self.iof_push(conn, id, me, targets, directives, data),
            Request::Finalize { .. } => {
                tracing::debug!(conn, tool = %me, "a tool finalized");
                self.tool_closed(conn);
                self.reply_status(conn, id, Status::SUCCESS);
            }
            other => {
                tracing::debug!(conn, tool = %me, ?other, "a tool asked what tools may not");
                self.reply_status(conn, id, Status::ERR_NOT_SUPPORTED);
            }
        }
    }

    /// `PMIx_Job_control` from a tool: kill, terminate or signal processes it names (a tool
    /// has no job of its own to default to). Cleanup registrations are a job's processes'
    /// (they run when their job ends, with their ids): a tool's are refused.
    fn tool_job_control(
        &mut self,
        conn: ConnId,
        id: u32,
        me: Proc,
        targets: Vec<Proc>,
        directives: Vec<Info>,
    ) {
        if targets.is_empty() {
            return self.reply_status(conn, id, Status::ERR_BAD_PARAM);
        }
        if let Some(t) = targets
            .iter()
            .find(|t| self.ns_id(t.nspace.as_str()).is_none())
        {
            tracing::debug!(conn, tool = %me, target = %t, "job control of an unknown job");
            return self.reply_status(conn, id, Status::ERR_NOT_FOUND);
        }
        match job_control::parse_cleanup(&directives, 0, 0) {
            Ok(None) => {}
            Ok(Some(_)) => return self.reply_status(conn, id, Status::ERR_NOT_SUPPORTED),
            Err(status) => return self.reply_status(conn, id, status),
        }
        self.host_call(
            PendingHost::Status { conn, id },
            HostCall::JobControl {
                proc: me,
                targets,
                directives,
            },
        );
    }

    /// How many tools are debuggers: registered for `READY_FOR_DEBUG` by name (not only
    /// through a registration for every code, as a monitor's).
    pub(super) fn debuggers(&self) -> usize {
        self.tools.debuggers()
    }

    /// The tools registered for `code` (or for every code).
    pub(super) fn tools_wanting(&self, code: Status) -> Vec<ConnId> {
        self.tools.wanting(code)
    }

    /// Delivers `event` to the tools that registered for it and that it reaches (see the
    /// module's doc), but `except` (the notifier). `from_host`: the host raised it.
    pub(super) fn deliver_to_tools(
        &mut self,
        event: &Event,
        except: Option<ConnId>,
        from_host: bool,
    ) {
        let targets = self.tools.reached_by(event, except, from_host);
        self.send_event(targets, event);
    }

    /// Job `nspace` ended (its namespace was deregistered): `EVENT_JOB_END` for the tools
    /// registered for it (`EVENT_AFFECTED_PROC` the job's `WILDCARD`, `NSPACE`).
    pub(super) fn tools_job_ended(&mut self, nspace: &Nspace) {
        let event = Event {
            code: Status::EVENT_JOB_END,
            source: self.nspaces.me().clone(),
            range: DataRange::SESSION,
            info: vec![
                Info::attr(
                    attr::EVENT_AFFECTED_PROC,
                    Proc::new(nspace.clone(), Rank::WILDCARD),
                ),
                Info::attr(attr::NSPACE, nspace.as_str()),
            ],
        };
        self.deliver_to_tools(&event, None, false);
    }

    /// A tool's connection ended: it is forgotten. True if `conn` was a tool's.
    pub(super) fn tool_closed(&mut self, conn: ConnId) -> bool {
        self.iof_forget(conn);
        let Some((tool, debugger)) = self.tools.remove(conn) else {
            return false;
        };
        if debugger {
            self.debugger_gone(&tool);
        }
        true
    }
}
