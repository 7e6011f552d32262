//! Asking and telling the server: `PMIx_Query_info` (and `_nb`), `PMIx_Query_construct`,
//! `PMIx_Log` (and `_nb`), `PMIx_Job_control` (and `_nb`), `PMIx_Store_internal`.

use core::ffi::{c_char, c_void};

use pmix_client::{Key, Query, Status};

use super::completion::{CbData, complete_infos, complete_op};
use crate::convert::{infos_from_c, infos_out, proc_from_c, procs_from_c, query_from_c};
use crate::convert::{required_str, slice_of, value_from_c};
use crate::ctypes::{
    pmix_info_cbfunc_t, pmix_info_t, pmix_op_cbfunc_t, pmix_proc_t, pmix_query_t, pmix_status_t,
    pmix_value_t,
};
use crate::guard::guarded;
use crate::state;

/// The queries of a query call.
///
/// # Safety
/// The Standard's contract: `queries` holds `nqueries` well-formed queries.
unsafe fn queries_arg(queries: *const pmix_query_t, nqueries: usize) -> Result<Vec<Query>, Status> {
    // SAFETY: the caller's promise.
    unsafe { slice_of(queries, nqueries) }?
        .iter()
        // SAFETY: as above.
        .map(|q| unsafe { query_from_c(q) })
        .collect()
}

/// Asks the server the `queries` and waits: the answers (one info per key answered) go to
/// `*results` and `*nresults`, new memory the caller frees (`PMIX_INFO_FREE`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Query_info(
    queries: *mut pmix_query_t,
    nqueries: usize,
    results: *mut *mut pmix_info_t,
    nresults: *mut usize,
) -> pmix_status_t {
    guarded(|| {
        if results.is_null() || nresults.is_null() {
            return Err(Status::ERR_BAD_PARAM);
        }
        // SAFETY: the Standard's contract.
        let queries = unsafe { queries_arg(queries, nqueries) }?;
        let answers = state::session()?.query(queries)?;
        // SAFETY: both checked not NULL.
        unsafe { infos_out(&answers, results, nresults) }
    })
}

/// Asks the server the `queries`; the answers (one info per key answered) reach
/// `cbfunc(status, info, ninfo, cbdata, release_fn, release_cbdata)` on the progress thread,
/// lent until the callback calls `release_fn(release_cbdata)`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Query_info_nb(
    queries: *mut pmix_query_t,
    nqueries: usize,
    cbfunc: pmix_info_cbfunc_t,
    cbdata: *mut c_void,
) -> pmix_status_t {
    guarded(|| {
        if cbfunc.is_none() {
            return Err(Status::ERR_BAD_PARAM);
        }
        // SAFETY: the Standard's contract.
        let queries = unsafe { queries_arg(queries, nqueries) }?;
        let cbdata = CbData(cbdata);
        state::session()?.query_nb(queries, move |r| complete_infos(r, cbfunc, cbdata));
        Ok(())
    })
}

/// Empties a query (no keys, no qualifiers).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Query_construct(p: *mut pmix_query_t) {
    // SAFETY: a non-NULL `p` is the caller's query.
    if let Some(q) = unsafe { p.as_mut() } {
        q.keys = core::ptr::null_mut();
        q.qualifiers = core::ptr::null_mut();
        q.nqual = 0;
    }
}

/// Logs `data` through the server's host and waits for it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Log(
    data: *const pmix_info_t,
    ndata: usize,
    directives: *const pmix_info_t,
    ndirs: usize,
) -> pmix_status_t {
    // SAFETY: the Standard's contract; without a callback the call waits.
    unsafe { PMIx_Log_nb(data, ndata, directives, ndirs, None, core::ptr::null_mut()) }
}

/// Logs `data` through the server's host; completing through `cbfunc(status, cbdata)` on the
/// progress thread (or, without `cbfunc`, waiting for the host).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Log_nb(
    data: *const pmix_info_t,
    ndata: usize,
    directives: *const pmix_info_t,
    ndirs: usize,
    cbfunc: pmix_op_cbfunc_t,
    cbdata: *mut c_void,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (data, dirs) =
            unsafe { (infos_from_c(data, ndata)?, infos_from_c(directives, ndirs)?) };
        let session = state::session()?;
        if cbfunc.is_none() {
            return session.log(data, dirs);
        }
        let cbdata = CbData(cbdata);
        session.log_nb(data, dirs, move |r| complete_op(r, cbfunc, cbdata));
        Ok(())
    })
}

/// Asks the host to act on `targets` (none: this job) as `directives` say, and waits for its
/// answer; no results come back (`*results` NULL, `*nresults` 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Job_control(
    targets: *const pmix_proc_t,
    ntargets: usize,
    directives: *const pmix_info_t,
    ndirs: usize,
    results: *mut *mut pmix_info_t,
    nresults: *mut usize,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (targets, dirs) = unsafe {
            (
                procs_from_c(targets, ntargets)?,
                infos_from_c(directives, ndirs)?,
            )
        };
        if !results.is_null() && !nresults.is_null() {
            // SAFETY: both checked not NULL.
            unsafe { infos_out(&[], results, nresults) }?;
        }
        state::session()?.job_control(targets, dirs)
    })
}

/// Asks the host to act on `targets` (none: this job) as `directives` say; the outcome
/// reaches `cbfunc(status, NULL, 0, cbdata, NULL, NULL)` on the progress thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Job_control_nb(
    targets: *const pmix_proc_t,
    ntargets: usize,
    directives: *const pmix_info_t,
    ndirs: usize,
    cbfunc: pmix_info_cbfunc_t,
    cbdata: *mut c_void,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (targets, dirs) = unsafe {
            (
                procs_from_c(targets, ntargets)?,
                infos_from_c(directives, ndirs)?,
            )
        };
        let cbdata = CbData(cbdata);
        state::session()?.job_control_nb(targets, dirs, move |r| {
            complete_infos(r.map(|()| Vec::new()), cbfunc, cbdata);
        });
        Ok(())
    })
}

/// Stores `key` = `*val` as the data of `proc` (NULL: this process) for this process's own
/// gets of that process and key, which answer it before asking the client; nothing is sent
/// to the server. A get of everything a process put (a NULL key) does not include it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Store_internal(
    proc: *const pmix_proc_t,
    key: *const c_char,
    val: *mut pmix_value_t,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (proc, key, value) = unsafe {
            let v = val.as_ref().ok_or(Status::ERR_BAD_PARAM)?;
            let p = proc.as_ref().map(proc_from_c).transpose()?;
            (p, required_str(key)?, value_from_c(v)?)
        };
        Key::new(key).map_err(|_| Status::ERR_BAD_PARAM)?;
        let proc = match proc {
            Some(p) => p,
            None => state::session()?.proc()?,
        };
        state::store_internal(proc, key, value)
    })
}
