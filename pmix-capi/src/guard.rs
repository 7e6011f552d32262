//! The FFI boundary's safety net: every exported function runs its body through [`guarded`]
//! (or [`guarded_or`]), so a panic becomes an error status for the C caller instead of
//! unwinding into C.

use std::panic::{AssertUnwindSafe, catch_unwind};

use pmix_client::Status;

use crate::ctypes::pmix_status_t;

/// Runs `body`, answering its status: `PMIX_SUCCESS` for `Ok`, the status for `Err`, and
/// `PMIX_ERROR` for a panic.
pub(crate) fn guarded(body: impl FnOnce() -> Result<(), Status>) -> pmix_status_t {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => Status::SUCCESS.0,
        Ok(Err(s)) => s.0,
        Err(_) => Status::ERROR.0,
    }
}

/// Runs `body`, answering `fallback` if it panics.
pub(crate) fn guarded_or<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}
