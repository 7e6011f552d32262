//! The process's one client, shared by every exported function: `PMIx_Init` creates it (or
//! counts another init of it, as libpmix does), `PMIx_Finalize` ends it with the last init.

use parking_lot::Mutex;
use pmix_client::{Client, Status};

struct State {
    client: Option<Client>,
    inits: usize,
}

static STATE: Mutex<State> = Mutex::new(State {
    client: None,
    inits: 0,
});

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
        if s.inits == 0 { s.client.take() } else { None }
    };
    match last {
        Some(c) => c.finalize().map_err(|e| e.status()),
        None => Ok(()),
    }
}
