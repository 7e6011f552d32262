//! What a tool asks of the jobs it attached to besides queries: events (register, notify, a
//! debugger's `DEBUGGER_RELEASE`), job control, logging and spawn, each sent to the primary
//! server.

use std::time::Duration;

use pmix_types::{DataArray, DataRange, Info, Nspace, Proc, Rank, Status, attr};
use pmix_wire::{App, Event, Reply, ReplyBody, Request};

use super::Tool;
use crate::Error;

fn status_of(reply: Reply) -> Result<(), Error> {
    if reply.status.is_success() {
        Ok(())
    } else {
        Err(Error::from_status(reply.status))
    }
}

impl Tool {
    /// Asks the primary server for the events of `codes` (every code when empty)
    /// (`PMIx_Register_event_handler`); [`Tool::next_event`] reads them. A pmix-rs server
    /// sends a tool the events whose range covers it and those its host raises about its jobs
    /// (process and job ends); registering for `READY_FOR_DEBUG` makes this tool a debugger of
    /// the server's jobs held in init (`docs/TOOLS.md`, "Debuggers").
    pub fn register_events(&mut self, codes: &[Status]) -> Result<(), Error> {
        status_of(self.request(Request::RegisterEvents {
            codes: codes.to_vec(),
            info: Vec::new(),
        })?)
    }

    /// Withdraws a registration made with the same `codes`.
    pub fn deregister_events(&mut self, codes: &[Status]) -> Result<(), Error> {
        status_of(self.request(Request::DeregisterEvents {
            codes: codes.to_vec(),
        })?)
    }

    /// The next event a server sent, waiting at most `timeout` (for the primary server);
    /// `None` if none came. Events arriving while another call waits for its answer are kept
    /// (the latest 256); pulled output that comes meanwhile goes to its handler (`iof.rs`).
    pub fn next_event(&mut self, timeout: Duration) -> Result<Option<Event>, Error> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            self.dispatch();
            if let Some(ev) = self.pop_event() {
                return Ok(Some(ev));
            }
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.progress(left)?;
        }
    }

    /// Waits up to `timeout` for an event of `code`, dropping others.
    pub fn wait_event(&mut self, code: Status, timeout: Duration) -> Result<Event, Error> {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.next_event(left)? {
                Some(ev) if ev.code == code => return Ok(ev),
                Some(_) => {}
                None => return Err(Error::Timeout),
            }
        }
    }

    /// Raises an event (`PMIx_Notify_event`) with this tool as its source. A tool belongs to
    /// no job, so `NAMESPACE` reaches nobody: name processes with a `CUSTOM` range
    /// (`EVENT_CUSTOM_RANGE` in `info`), or use [`Tool::release`].
    pub fn notify_event(
        &mut self,
        code: Status,
        range: DataRange,
        info: Vec<Info>,
    ) -> Result<(), Error> {
        let source = self.proc().cloned().ok_or(Error::NotInitialized)?;
        status_of(self.request(Request::Notify {
            event: Event {
                code,
                source,
                range,
                info,
            },
        })?)
    }

    /// Releases processes held in init (`PMIX_DEBUGGER_RELEASE` to `procs`; rank `WILDCARD`
    /// for a whole job), as debuggers do.
    pub fn release(&mut self, procs: &[Proc]) -> Result<(), Error> {
        let range = DataArray::from_procs(procs.iter().cloned());
        let info = vec![
            Info::attr(attr::EVENT_CUSTOM_RANGE, range),
            Info::attr(attr::EVENT_NON_DEFAULT, true),
        ];
        self.notify_event(Status::DEBUGGER_RELEASE, DataRange::CUSTOM, info)
    }

    /// [`Tool::release`] of every process of job `nspace`.
    pub fn release_job(&mut self, nspace: &Nspace) -> Result<(), Error> {
        self.release(&[Proc::new(nspace.clone(), Rank::WILDCARD)])
    }

    /// `PMIx_Job_control` of `targets` (rank `WILDCARD` for a whole job): `JOB_CTRL_KILL`,
    /// `JOB_CTRL_TERMINATE`, `JOB_CTRL_SIGNAL`, as the host supports.
    pub fn job_control(&mut self, targets: &[Proc], directives: Vec<Info>) -> Result<(), Error> {
        status_of(self.request(Request::JobControl {
            targets: targets.to_vec(),
            directives,
        })?)
    }

    /// `PMIx_Log` from a tool: `data` by channel (`LOG_STDERR`, `LOG_SYSLOG`, ...) through
    /// the primary server's host.
    pub fn log(&mut self, data: Vec<Info>, directives: Vec<Info>) -> Result<(), Error> {
        status_of(self.request(Request::Log { data, directives })?)
    }

    /// `PMIx_Spawn` from a tool: starts `apps` as a new job; returns its namespace.
    pub fn spawn(&mut self, job_info: Vec<Info>, apps: Vec<App>) -> Result<Nspace, Error> {
        match self.request(Request::Spawn { job_info, apps })? {
            Reply {
                status,
                body: ReplyBody::Spawn { nspace },
            } if status.is_success() => Ok(nspace),
            Reply { status, .. } if !status.is_success() => Err(Error::from_status(status)),
            Reply { .. } => Err(Error::Protocol(
                "a spawn answered without a namespace".into(),
            )),
        }
    }
}
