//! How a blocking call waits for its non-blocking twin: every API file (client, names,
//! dynamic processes, events) builds its blocking calls from these, and they depend on the
//! connection only, so that the connection's own dependencies (the event registry) never lead
//! back to an API file.

use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use pmix_types::Status;
use pmix_wire::Reply;

use crate::Error;
use crate::conn::{Completion, Shared, Turn};

/// How much longer than the caller's `TIMEOUT` a blocking call waits for the server's own
/// `ERR_TIMEOUT` before giving up on its side.
const TIMEOUT_MARGIN: Duration = Duration::from_secs(1);

/// What a blocking call hands its non-blocking twin as the completion.
pub(crate) type Done<T> = Box<dyn FnOnce(Result<T, Error>) + Send + 'static>;

pub(crate) use crate::core::timeout_of;

/// The outcome of a request whose reply carries nothing but its status.
pub(crate) fn status_result(reply: &Reply) -> Result<(), Error> {
    match reply.status {
        Status::SUCCESS => Ok(()),
        status => Err(Error::from_status(status)),
    }
}

/// A completion for a request whose reply carries nothing but its status.
pub(crate) fn on_status(done: impl FnOnce(Result<(), Error>) + Send + 'static) -> Completion {
    Box::new(move |r| done(r.and_then(|reply| status_result(&reply))))
}

/// Runs a non-blocking call and waits for its completion: `start` sends the request with the
/// completion it is given and returns the request's id (`None` when nothing was sent, the
/// completion having run already). `timeout` is the caller's `TIMEOUT`, if any.
pub(crate) fn blocking<T: Send + 'static>(
    shared: &Shared,
    timeout: Option<Duration>,
    start: impl FnOnce(Done<T>) -> Option<u32>,
) -> Result<T, Error> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let id = start(Box::new(move |r| {
        // The caller only stops listening after giving up, when the answer is moot.
        let _ = tx.send(r);
    }));
    wait(shared, &rx, id, timeout)
}

/// Waits for a completion, with the client's backstop when the caller gave a `TIMEOUT`.
fn wait<T>(
    shared: &Shared,
    rx: &Receiver<Result<T, Error>>,
    id: Option<u32>,
    timeout: Option<Duration>,
) -> Result<T, Error> {
    let deadline = timeout.map(|t| Instant::now() + t + TIMEOUT_MARGIN);
    let timed_out = || {
        if let Some(id) = id {
            shared.cancel(id);
        }
        // The reply may have raced the cancel.
        rx.try_recv().unwrap_or(Err(Error::Timeout))
    };
    loop {
        if let Ok(r) = rx.try_recv() {
            return r;
        }
        // Read the reply on this thread if nobody else is reading.
        match shared.read_until(&|| !rx.is_empty(), deadline) {
            Turn::Done => {}
            Turn::Lost => return rx.try_recv().unwrap_or(Err(Error::LostConnection)),
            Turn::TimedOut => return timed_out(),
            Turn::Busy => {
                let got = match deadline {
                    None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                    Some(d) => rx.recv_deadline(d),
                };
                return match got {
                    Ok(r) => r,
                    Err(RecvTimeoutError::Timeout) => timed_out(),
                    Err(RecvTimeoutError::Disconnected) => Err(Error::LostConnection),
                };
            }
        }
    }
}
