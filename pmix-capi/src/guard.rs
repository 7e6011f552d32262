//! The FFI boundary's safety net: every exported function runs its body through [`guarded`]
//! (or [`guarded_or`]), so a panic becomes an error status for the C caller instead of
//! unwinding into C.

use std::panic::{AssertUnwindSafe, catch_unwind};

use pmix_client::Status;

use crate::ctypes::pmix_status_t;

/// Runs `body`, answering its status: `PMIX_SUCCESS` for `Ok`, the status for `Err`, and
/// `PMIX_ERROR` for a panic. With `PMIXRS_CAPI_TRACE` set in the environment, every error
/// is written to stderr with the place of the exported function that answered it.
#[track_caller]
pub(crate) fn guarded(body: impl FnOnce() -> Result<(), Status>) -> pmix_status_t {
    let status = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => Status::SUCCESS,
        Ok(Err(s)) => s,
        Err(_) => Status::ERROR,
    };
    if status != Status::SUCCESS && tracing() {
        let at = std::panic::Location::caller();
        eprintln!("pmix-capi: {}:{}: {status:?}", at.file(), at.line());
    }
    status.0
}

/// [`guarded`] for the functions whose blocking form answers a reference (a handler's, a
/// pull's) as their status: `Ok(Some(reference))` answers it (zero or more), `Ok(None)`
/// `PMIX_SUCCESS`.
#[track_caller]
pub(crate) fn guarded_reference(
    body: impl FnOnce() -> Result<Option<usize>, Status>,
) -> pmix_status_t {
    let mut reference = None;
    let status = guarded(|| {
        reference = body()?;
        Ok(())
    });
    match reference {
        Some(r) if status == Status::SUCCESS.0 => {
            pmix_status_t::try_from(r).unwrap_or(Status::ERR_OUT_OF_RESOURCE.0)
        }
        _ => status,
    }
}

/// Whether `PMIXRS_CAPI_TRACE` is set (read once).
fn tracing() -> bool {
    static TRACE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACE.get_or_init(|| std::env::var_os("PMIXRS_CAPI_TRACE").is_some())
}

/// Runs `body`, answering `fallback` if it panics.
pub(crate) fn guarded_or<T>(fallback: T, body: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}
