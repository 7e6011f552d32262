//! The process's session with PMIx: a client (`PMIx_Init`) or a tool (`PMIx_tool_init`), and
//! the one place where the calls both make are routed to the one there is. An exported
//! function that either may call asks `state::session()` and calls a method here; a new one
//! is a method (a match of two arms) and a line in its export.
//!
//! Completions (`done`) run on the client's reader thread or the tool's owner thread: the
//! exports pass them on to the progress thread (`exports/completion.rs`) before any C code
//! runs.

use pmix_client::{
    App, Client, DataRange, Event, HandlerId, Info, Nspace, Proc, Query, Status, Value,
};

use crate::tool_session::ToolSession;

/// A client or a tool; cheap to clone.
#[derive(Clone)]
pub(crate) enum Session {
    /// Started by a server: `PMIx_Init`.
    Client(Client),
    /// Attached to servers from outside: `PMIx_tool_init`.
    Tool(ToolSession),
}

/// An event handler as the session registered it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Handler {
    /// The client's.
    Client(HandlerId),
    /// The tool session's number.
    Tool(u64),
}

fn status(e: pmix_client::Error) -> Status {
    e.status()
}

impl Session {
    /// This process's name: the client's, or the tool's at its primary server.
    pub(crate) fn proc(&self) -> Result<Proc, Status> {
        match self {
            Session::Client(c) => Ok(c.proc().clone()),
            Session::Tool(t) => t.proc(),
        }
    }

    /// `PMIx_Get` of `key` of `proc` (no key: all `proc` put).
    pub(crate) fn get(
        &self,
        proc: Proc,
        key: Option<String>,
        info: Vec<Info>,
    ) -> Result<Value, Status> {
        match self {
            Session::Client(c) => match &key {
                Some(k) => c.get(&proc, k, &info),
                None => c.get_all(&proc, &info),
            }
            .map_err(status),
            Session::Tool(t) => t.call(move |t| t.get(&proc, key.as_deref(), &info)),
        }
    }

    /// `PMIx_Get_nb`.
    pub(crate) fn get_nb(
        &self,
        proc: Proc,
        key: Option<String>,
        info: Vec<Info>,
        done: impl FnOnce(Result<Value, Status>) + Send + 'static,
    ) {
        match self {
            Session::Client(c) => {
                c.get_nb(&proc, key.as_deref(), &info, move |r| {
                    done(r.map_err(status))
                });
            }
            Session::Tool(t) => t.call_nb(move |t| t.get(&proc, key.as_deref(), &info), done),
        }
    }

    /// `PMIx_Query_info`.
    pub(crate) fn query(&self, queries: Vec<Query>) -> Result<Vec<Info>, Status> {
        match self {
            Session::Client(c) => c.query(&queries).map_err(status),
            Session::Tool(t) => t.call(move |t| t.query(queries)),
        }
    }

    /// `PMIx_Query_info_nb`.
    pub(crate) fn query_nb(
        &self,
        queries: Vec<Query>,
        done: impl FnOnce(Result<Vec<Info>, Status>) + Send + 'static,
    ) {
        match self {
            Session::Client(c) => c.query_nb(&queries, move |r| done(r.map_err(status))),
            Session::Tool(t) => t.call_nb(move |t| t.query(queries), done),
        }
    }

    /// `PMIx_Log`.
    pub(crate) fn log(&self, data: Vec<Info>, directives: Vec<Info>) -> Result<(), Status> {
        match self {
            Session::Client(c) => c.log(&data, &directives).map_err(status),
            Session::Tool(t) => t.call(move |t| t.log(data, directives)),
        }
    }

    /// `PMIx_Log_nb`.
    pub(crate) fn log_nb(
        &self,
        data: Vec<Info>,
        directives: Vec<Info>,
        done: impl FnOnce(Result<(), Status>) + Send + 'static,
    ) {
        match self {
            Session::Client(c) => {
                c.log_nb(&data, &directives, move |r| done(r.map_err(status)));
            }
            Session::Tool(t) => t.call_nb(move |t| t.log(data, directives), done),
        }
    }

    /// `PMIx_Job_control`.
    pub(crate) fn job_control(
        &self,
        targets: Vec<Proc>,
        directives: Vec<Info>,
    ) -> Result<(), Status> {
        match self {
            Session::Client(c) => c.job_control(&targets, &directives).map_err(status),
            Session::Tool(t) => t.call(move |t| t.job_control(&targets, directives)),
        }
    }

    /// `PMIx_Job_control_nb`.
    pub(crate) fn job_control_nb(
        &self,
        targets: Vec<Proc>,
        directives: Vec<Info>,
        done: impl FnOnce(Result<(), Status>) + Send + 'static,
    ) {
        match self {
            Session::Client(c) => {
                c.job_control_nb(&targets, &directives, move |r| done(r.map_err(status)));
            }
            Session::Tool(t) => t.call_nb(move |t| t.job_control(&targets, directives), done),
        }
    }

    /// `PMIx_Spawn`: the new job's namespace.
    pub(crate) fn spawn(&self, job_info: Vec<Info>, apps: Vec<App>) -> Result<Nspace, Status> {
        match self {
            Session::Client(c) => c.spawn(&job_info, &apps).map_err(status),
            Session::Tool(t) => t.call(move |t| t.spawn(job_info, apps)),
        }
    }

    /// `PMIx_Spawn_nb`.
    pub(crate) fn spawn_nb(
        &self,
        job_info: Vec<Info>,
        apps: Vec<App>,
        done: impl FnOnce(Result<Nspace, Status>) + Send + 'static,
    ) {
        match self {
            Session::Client(c) => c.spawn_nb(&job_info, &apps, move |r| done(r.map_err(status))),
            Session::Tool(t) => t.call_nb(move |t| t.spawn(job_info, apps), done),
        }
    }

    /// `PMIx_Register_event_handler` without a callback. A tool's handlers run on its owner
    /// thread, a client's on its reader: `handler` must only pass events on.
    pub(crate) fn register_event_handler(
        &self,
        codes: Vec<Status>,
        info: Vec<Info>,
        handler: impl Fn(&Event) + Send + Sync + 'static,
    ) -> Result<Handler, Status> {
        match self {
            Session::Client(c) => c
                .register_event_handler(&codes, &info, handler)
                .map(Handler::Client)
                .map_err(status),
            Session::Tool(t) => t
                .register_event_handler(codes, Box::new(handler))
                .map(Handler::Tool),
        }
    }

    /// `PMIx_Register_event_handler` with a callback.
    pub(crate) fn register_event_handler_nb(
        &self,
        codes: Vec<Status>,
        info: Vec<Info>,
        handler: impl Fn(&Event) + Send + Sync + 'static,
        done: impl FnOnce(Result<Handler, Status>) + Send + 'static,
    ) {
        match self {
            Session::Client(c) => c.register_event_handler_nb(&codes, &info, handler, move |r| {
                done(r.map(Handler::Client).map_err(status));
            }),
            Session::Tool(t) => t.register_event_handler_nb(codes, Box::new(handler), move |r| {
                done(r.map(Handler::Tool));
            }),
        }
    }

    /// `PMIx_Deregister_event_handler`.
    pub(crate) fn deregister_event_handler(&self, handler: Handler) -> Result<(), Status> {
        match (self, handler) {
            (Session::Client(c), Handler::Client(id)) => {
                c.deregister_event_handler(id).map_err(status)
            }
            (Session::Tool(t), Handler::Tool(id)) => t.deregister_event_handler(id),
            // A handler of an earlier session of the other kind.
            _ => Err(Status::ERR_BAD_PARAM),
        }
    }

    /// `PMIx_Notify_event` without a callback.
    pub(crate) fn notify_event(
        &self,
        code: Status,
        range: DataRange,
        info: Vec<Info>,
    ) -> Result<(), Status> {
        match self {
            Session::Client(c) => c.notify_event(code, range, &info).map_err(status),
            Session::Tool(t) => t.call(move |t| t.notify_event(code, range, info)),
        }
    }

    /// `PMIx_Notify_event` with a callback.
    pub(crate) fn notify_event_nb(
        &self,
        code: Status,
        range: DataRange,
        info: Vec<Info>,
        done: impl FnOnce(Result<(), Status>) + Send + 'static,
    ) {
        match self {
            Session::Client(c) => {
                c.notify_event_nb(code, range, &info, move |r| done(r.map_err(status)));
            }
            Session::Tool(t) => t.call_nb(move |t| t.notify_event(code, range, info), done),
        }
    }
}
