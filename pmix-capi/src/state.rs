//! The process's one client, shared by every exported function: `PMIx_Init` creates it (or
//! counts another init of it, as libpmix does), `PMIx_Finalize` ends it with the last init.

use std::collections::HashMap;

use parking_lot::Mutex;
use pmix_client::{Client, Proc, Status, Value};

struct State {
    client: Option<Client>,
    inits: usize,
    /// What `PMIx_Store_internal` stored, by process and key: read by this process's gets
    /// before the client is asked. Kept here rather than in the client's store because the
    /// C API stores for any process and any key, reserved ones included (Open MPI stores the
    /// `PMIX_LOCALITY` it computed for each local peer).
    internal: Option<HashMap<(Proc, String), Value>>,
}

static STATE: Mutex<State> = Mutex::new(State {
    client: None,
    inits: 0,
    internal: None,
});

/// Records `value` as `proc`'s `key` for this process's own gets.
pub(crate) fn store_internal(proc: Proc, key: &str, value: Value) -> Result<(), Status> {
    let mut s = STATE.lock();
    if s.client.is_none() {
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

/// Initializes the client, or counts one more init of the running one.
pub(crate) fn init() -> Result<Client, Status> {
    let mut s = STATE.lock();
    if let Some(c) = &s.client {
        let c = c.clone();
        s.inits += 1;
        return Ok(c);
    }
    let c = Client::init().map_err(|e| e.status())?;
    s.client = Some(c.clone());
    s.inits = 1;
    Ok(c)
}

/// The running client; `PMIX_ERR_INIT` before init and after the last finalize.
pub(crate) fn client() -> Result<Client, Status> {
    STATE.lock().client.clone().ok_or(Status::ERR_INIT)
}

/// True between init and the last finalize.
pub(crate) fn initialized() -> bool {
    STATE.lock().client.is_some()
}

/// Counts one finalize; the last one finalizes the client (outside the lock, so other calls
/// waiting for the state are not held by the server's answer).
pub(crate) fn finalize() -> Result<(), Status> {
    let last = {
        let mut s = STATE.lock();
        if s.client.is_none() {
            return Err(Status::ERR_INIT);
        }
        s.inits -= 1;
        if s.inits == 0 {
            s.internal = None;
            s.client.take()
        } else {
            None
        }
    };
    match last {
        Some(c) => c.finalize().map_err(|e| e.status()),
        None => Ok(()),
    }
}
