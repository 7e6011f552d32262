//! Events: `PMIx_Register_event_handler`, `PMIx_Deregister_event_handler`,
//! `PMIx_Notify_event`.
//!
//! A C handler is registered with the session (a client's or a tool's, `session.rs`) as a
//! Rust handler that hands each event to the progress thread, where the C handler runs (as
//! libpmix runs handlers on its progress thread, never on the client's reader or the tool's
//! owner thread). The handler gets the event's info in memory this
//! library owns until the handler calls the completion function it was given; that function
//! frees it and calls the handler's own `cbfunc(PMIX_SUCCESS, thiscbdata)` (on the progress
//! thread), so the handler may release its results there.

use core::ffi::c_void;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use pmix_client::{DataRange, Event, Status};

use super::completion::{CbData, complete_op, complete_reference};
use crate::convert::{infos_free, infos_from_c, infos_to_c, proc_to_c, slice_of};
use crate::ctypes::{
    pmix_data_range_t, pmix_hdlr_reg_cbfunc_t, pmix_info_t, pmix_notification_fn_t,
    pmix_op_cbfunc_t, pmix_proc_t, pmix_status_t,
};
use crate::guard::{guarded, guarded_reference};
use crate::progress::run_on_progress_thread;
use crate::session::Handler;
use crate::state;

/// The C reference of each registered handler and the session's handler for it.
static HANDLERS: Mutex<Option<HashMap<usize, Handler>>> = Mutex::new(None);
/// The next C reference (the Standard's blocking registration answers it as its status, so it
/// stays within an int's positive range for any plausible number of registrations).
static NEXT_REF: AtomicUsize = AtomicUsize::new(0);

/// What a C handler holds while it works on one event, until it calls [`event_done`].
struct Notification {
    source: pmix_proc_t,
    info: *mut pmix_info_t,
    ninfo: usize,
}

/// The completion function handed to C handlers: frees the event's memory and hands the
/// handler's `cbfunc(PMIX_SUCCESS, thiscbdata)` to the progress thread. Handlers run
/// independently of each other here (the client has no chain to stop), so the status is not
/// acted on.
unsafe extern "C" fn event_done(
    _status: pmix_status_t,
    _results: *mut pmix_info_t,
    _nresults: usize,
    cbfunc: pmix_op_cbfunc_t,
    thiscbdata: *mut c_void,
    notification_cbdata: *mut c_void,
) {
    if !notification_cbdata.is_null() {
        // SAFETY: the box `deliver` leaked for this handler call, given back once.
        let n = unsafe { Box::from_raw(notification_cbdata.cast::<Notification>()) };
        // SAFETY: made by infos_to_c, freed once.
        unsafe { infos_free(n.info, n.ninfo) };
    }
    complete_op(Ok(()), cbfunc, CbData(thiscbdata));
}

/// Runs the C handler `f` (registered as `refid`) on `ev`; on the progress thread.
fn deliver(f: pmix_notification_fn_t, refid: usize, ev: Event) {
    let Some(f) = f else { return };
    // An event whose info cannot be given to C still reaches the handler, without its info.
    let (info, ninfo) = match infos_to_c(&ev.info) {
        Ok(p) => (p, ev.info.len()),
        Err(_) => (core::ptr::null_mut(), 0),
    };
    let n = Box::into_raw(Box::new(Notification {
        source: proc_to_c(&ev.source),
        info,
        ninfo,
    }));
    // SAFETY: the handler gets the event in memory valid until it calls event_done with `n`.
    unsafe {
        f(
            refid,
            ev.code.0,
            &raw const (*n).source,
            (*n).info,
            (*n).ninfo,
            core::ptr::null_mut(),
            0,
            Some(event_done),
            n.cast(),
        );
    }
}

/// Registers `evhdlr` for `codes` (none: every code). With `cbfunc`, it completes through
/// `cbfunc(status, refid, cbdata)` on the progress thread; without, it blocks and answers the
/// handler's reference (zero or more) or an error (negative).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Register_event_handler(
    codes: *mut pmix_status_t,
    ncodes: usize,
    info: *mut pmix_info_t,
    ninfo: usize,
    evhdlr: pmix_notification_fn_t,
    cbfunc: pmix_hdlr_reg_cbfunc_t,
    cbdata: *mut c_void,
) -> pmix_status_t {
    guarded_reference(|| {
        if evhdlr.is_none() {
            return Err(Status::ERR_BAD_PARAM);
        }
        // SAFETY: the Standard's contract.
        let (codes, info) = unsafe { (slice_of(codes, ncodes)?, infos_from_c(info, ninfo)?) };
        let codes: Vec<Status> = codes.iter().map(|&c| Status(c)).collect();
        let session = state::session()?;
        let refid = NEXT_REF.fetch_add(1, Ordering::Relaxed);
        let handler = move |ev: &Event| {
            let ev = ev.clone();
            run_on_progress_thread(move || deliver(evhdlr, refid, ev));
        };
        if cbfunc.is_none() {
            let id = session.register_event_handler(codes, info, handler)?;
            HANDLERS.lock().get_or_insert_default().insert(refid, id);
            return Ok(Some(refid));
        }
        let cbdata = CbData(cbdata);
        session.register_event_handler_nb(codes, info, handler, move |r| {
            let status = match r {
                Ok(id) => {
                    HANDLERS.lock().get_or_insert_default().insert(refid, id);
                    Status::SUCCESS
                }
                Err(s) => s,
            };
            complete_reference(status, refid, cbfunc, cbdata);
        });
        Ok(None)
    })
}

/// Removes the handler registered as `evhdlr_ref_id`; with `cbfunc`, completing through
/// `cbfunc(status, cbdata)` on the progress thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Deregister_event_handler(
    evhdlr_ref_id: usize,
    cbfunc: pmix_op_cbfunc_t,
    cbdata: *mut c_void,
) -> pmix_status_t {
    guarded(|| {
        let session = state::session()?;
        let id = HANDLERS
            .lock()
            .get_or_insert_default()
            .remove(&evhdlr_ref_id)
            .ok_or(Status::ERR_BAD_PARAM)?;
        // Deregistration is local and at once: the server's acknowledgement is not awaited
        // for the C caller's sake either way.
        let result = session.deregister_event_handler(id);
        if cbfunc.is_some() {
            complete_op(result, cbfunc, CbData(cbdata));
            return Ok(());
        }
        result
    })
}

/// Raises event `status` for the processes in `range` that registered for it. The source is
/// always this process (a client or a tool speaks only for itself); `source` is not read. With
/// `cbfunc`, completing through `cbfunc(status, cbdata)` on the progress thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Notify_event(
    status: pmix_status_t,
    _source: *const pmix_proc_t,
    range: pmix_data_range_t,
    info: *mut pmix_info_t,
    ninfo: usize,
    cbfunc: pmix_op_cbfunc_t,
    cbdata: *mut c_void,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let info = unsafe { infos_from_c(info, ninfo) }?;
        let session = state::session()?;
        let (code, range) = (Status(status), DataRange(range));
        if cbfunc.is_none() {
            return session.notify_event(code, range, info);
        }
        let cbdata = CbData(cbdata);
        session.notify_event_nb(code, range, info, move |r| complete_op(r, cbfunc, cbdata));
        Ok(())
    })
}
