//! The process's one session (`session.rs`: a client or a tool), shared by every exported
//! function: `PMIx_Init` or `PMIx_tool_init` starts it (or counts another init of it, as
//! libpmix does), `PMIx_Finalize` or `PMIx_tool_finalize` ends it with the last init.

use std::collections::HashMap;

use parking_lot::Mutex;
use pmix_client::{Client, Info, Proc, Status, Value};

use crate::session::Session;
use crate::tool_session::ToolSession;

struct State {
    session: Option<Session>,
    inits: usize,
    /// What `PMIx_Store_internal` stored, by process and key: read by this process's gets
    /// before the client is asked. Kept here rather than in the client's store because the
    /// C API stores for any process and any key, reserved ones included (Open MPI stores the
    /// `PMIX_LOCALITY` it computed for each local peer).
    internal: Option<HashMap<(Proc, String), Value>>,
}

static STATE: Mutex<State> = Mutex::new(State {
    session: None,
    inits: 0,
    internal: None,
});

/// Records `value` as `proc`'s `key` for this process's own gets.
pub(crate) fn store_internal(proc: Proc, key: &str, value: Value) -> Result<(), Status> {
    let mut s = STATE.lock();
    if s.session.is_none() {
        return Err(Status::ERR_INIT);
    }
    s.internal
        .get_or_insert_default()
        .insert((proc, key.to_owned()), value);
    Ok(())
}

/// What [`store_internal`] stored as `proc`'s `key`.
pub(crate) fn internal(proc: &Proc, key: &str) -> Option<Value> {
    let s = STATE.lock();
    s.internal
        .as_ref()?
        .get(&(proc.clone(), key.to_owned()))
        .cloned()
}

/// Initializes the client, or counts one more init of the running one. A tool is no client:
/// `PMIX_ERR_NOT_SUPPORTED` in a tool's process.
pub(crate) fn init() -> Result<Client, Status> {
    let mut s = STATE.lock();
    match &s.session {
        Some(Session::Client(c)) => {
            let c = c.clone();
            s.inits += 1;
            Ok(c)
        }
        Some(Session::Tool(_)) => Err(Status::ERR_NOT_SUPPORTED),
        None => {
            let c = Client::init().map_err(|e| e.status())?;
            s.session = Some(Session::Client(c.clone()));
            s.inits = 1;
            Ok(c)
        }
    }
}

/// Starts the tool with `start`, or counts one more init of the running one.
/// `PMIX_ERR_NOT_SUPPORTED` in a client's process.
pub(crate) fn tool_init(
    start: impl FnOnce() -> Result<ToolSession, Status>,
) -> Result<ToolSession, Status> {
    let mut s = STATE.lock();
    match &s.session {
        Some(Session::Tool(t)) => {
            let t = t.clone();
            s.inits += 1;
            Ok(t)
        }
        Some(Session::Client(_)) => Err(Status::ERR_NOT_SUPPORTED),
        None => {
            let t = start()?;
            s.session = Some(Session::Tool(t.clone()));
            s.inits = 1;
            Ok(t)
        }
    }
}

/// The running session; `PMIX_ERR_INIT` before init and after the last finalize.
pub(crate) fn session() -> Result<Session, Status> {
    STATE.lock().session.clone().ok_or(Status::ERR_INIT)
}

/// The running client; `PMIX_ERR_INIT` before init and after the last finalize,
/// `PMIX_ERR_NOT_SUPPORTED` in a tool (for what only a client does).
pub(crate) fn client() -> Result<Client, Status> {
    match session()? {
        Session::Client(c) => Ok(c),
        Session::Tool(_) => Err(Status::ERR_NOT_SUPPORTED),
    }
}

/// The running tool; `PMIX_ERR_INIT` before `PMIx_tool_init` and after the last finalize,
/// `PMIX_ERR_NOT_SUPPORTED` in a client.
pub(crate) fn tool() -> Result<ToolSession, Status> {
    match session()? {
        Session::Tool(t) => Ok(t),
        Session::Client(_) => Err(Status::ERR_NOT_SUPPORTED),
    }
}

/// True between init and the last finalize.
pub(crate) fn initialized() -> bool {
    STATE.lock().session.is_some()
}

/// Counts one finalize, of a client or a tool alike; the last one finalizes the session
/// (outside the lock, so other calls waiting for the state are not held by the server's
/// answer) with `info`'s directives (a client's `PMIX_EMBED_BARRIER`).
pub(crate) fn finalize(info: &[Info]) -> Result<(), Status> {
    let last = {
        let mut s = STATE.lock();
        if s.session.is_none() {
            return Err(Status::ERR_INIT);
        }
        s.inits -= 1;
        if s.inits == 0 {
            s.internal = None;
            s.session.take()
        } else {
            None
        }
    };
    match last {
        Some(Session::Client(c)) => c.finalize_with(info).map_err(|e| e.status()),
        Some(Session::Tool(t)) => t.finalize(),
        None => Ok(()),
    }
}
