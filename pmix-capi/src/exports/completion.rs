//! How non-blocking calls complete: the C callback runs on the progress thread with the
//! caller's `cbdata`, and memory lent to a callback comes back through a release function.

use core::ffi::c_void;

use pmix_client::{Info, Status};

use crate::convert::{infos_free, infos_to_c};
use crate::ctypes::{pmix_hdlr_reg_cbfunc_t, pmix_info_cbfunc_t, pmix_info_t, pmix_op_cbfunc_t};
use crate::progress::run_on_progress_thread;

/// A C callback's `cbdata` (or other pointer the C side lent), handed back untouched on the
/// progress thread.
pub(crate) struct CbData(pub(crate) *mut c_void);
// SAFETY: the pointer is only given back to the C callback it came with; what it points at
// is the C caller's to synchronise, as with libpmix.
unsafe impl Send for CbData {}

/// Calls `cbfunc(status, cbdata)` (if there is one) on the progress thread: the completion of
/// a non-blocking call that answers a status.
pub(crate) fn complete_op(result: Result<(), Status>, cbfunc: pmix_op_cbfunc_t, cbdata: CbData) {
    let status = result.err().unwrap_or(Status::SUCCESS);
    run_on_progress_thread(move || {
        let cbdata = cbdata;
        if let Some(f) = cbfunc {
            // SAFETY: the caller's callback, with the caller's cbdata.
            unsafe { f(status.0, cbdata.0) };
        }
    });
}

/// Calls `cbfunc(status, reference, cbdata)` (if there is one) on the progress thread: the
/// completion of a registration (an event handler's, a pull's).
pub(crate) fn complete_reference(
    status: Status,
    reference: usize,
    cbfunc: pmix_hdlr_reg_cbfunc_t,
    cbdata: CbData,
) {
    run_on_progress_thread(move || {
        let cbdata = cbdata;
        if let Some(f) = cbfunc {
            // SAFETY: the caller's callback, with the caller's cbdata.
            unsafe { f(status.0, reference, cbdata.0) };
        }
    });
}

/// Infos lent to a `pmix_info_cbfunc_t` callback until it calls the release function.
struct Lent {
    infos: *mut pmix_info_t,
    n: usize,
}

/// The release function handed with lent infos: frees them.
unsafe extern "C" fn release_lent(cbdata: *mut c_void) {
    if cbdata.is_null() {
        return;
    }
    // SAFETY: `cbdata` is the box `complete_infos` leaked, given back once.
    let lent = unsafe { Box::from_raw(cbdata.cast::<Lent>()) };
    // SAFETY: the infos were made by infos_to_c and are freed once, here.
    unsafe { infos_free(lent.infos, lent.n) };
}

/// Calls `cbfunc(status, infos, n, cbdata, release, release_cbdata)` on the progress thread:
/// the completion of a non-blocking call that answers infos, lent to the callback until it
/// calls `release(release_cbdata)`.
pub(crate) fn complete_infos(
    result: Result<Vec<Info>, Status>,
    cbfunc: pmix_info_cbfunc_t,
    cbdata: CbData,
) {
    run_on_progress_thread(move || {
        let cbdata = cbdata;
        let Some(f) = cbfunc else { return };
        let (status, infos) = match result {
            Ok(infos) => (Status::SUCCESS, infos),
            Err(s) => (s, Vec::new()),
        };
        match infos_to_c(&infos) {
            Ok(p) if !infos.is_empty() => {
                let lent = Box::into_raw(Box::new(Lent {
                    infos: p,
                    n: infos.len(),
                }));
                // SAFETY: the caller's callback; the infos stay valid until it releases them.
                unsafe {
                    f(
                        status.0,
                        p,
                        infos.len(),
                        cbdata.0,
                        Some(release_lent),
                        lent.cast(),
                    )
                };
            }
            // Nothing to lend: no infos, or they could not be made (that status instead).
            made => {
                let status = made.err().unwrap_or(status);
                let none = core::ptr::null_mut();
                // SAFETY: the caller's callback, with no infos.
                unsafe { f(status.0, none, 0, cbdata.0, None, none.cast()) }
            }
        }
    });
}

/// An operation answering a status, from a C function with an optional `cbfunc`: with one,
/// `start` gets a completion that calls `cbfunc(status, cbdata)` on the progress thread;
/// without, the completion's status is waited for here and returned (the operation answers
/// or is dropped, which answers `PMIX_ERR_INIT`, within its own request timeout).
pub(crate) fn op_or_wait(
    cbfunc: pmix_op_cbfunc_t,
    cbdata: *mut c_void,
    start: impl FnOnce(Box<dyn FnOnce(Result<(), Status>) + Send>),
) -> Result<(), Status> {
    if cbfunc.is_some() {
        let cbdata = CbData(cbdata);
        start(Box::new(move |r| complete_op(r, cbfunc, cbdata)));
        return Ok(());
    }
    let (tx, rx) = crossbeam_channel::bounded(1);
    start(Box::new(move |r| {
        let _ = tx.send(r);
    }));
    rx.recv().map_err(|_| Status::ERR_INIT)?
}

/// Runs `work` (a blocking call of the client and its completion) on a thread of its own: the
/// `_nb` form of a call the client has only in blocking form. `PMIX_ERR_OUT_OF_RESOURCE` when
/// no thread can be started (then `work` never runs).
pub(crate) fn on_own_thread(work: impl FnOnce() + Send + 'static) -> Result<(), Status> {
    std::thread::Builder::new()
        .name("pmix-capi-nb".into())
        .spawn(work)
        .map(drop)
        .map_err(|_| Status::ERR_OUT_OF_RESOURCE)
}
