//! Asking and telling the server: `PMIx_Query_info_nb`, `PMIx_Query_construct`,
//! `PMIx_Log_nb`, `PMIx_Job_control_nb`, `PMIx_Store_internal`, `PMIx_Get_attribute_string`.

use core::ffi::{c_char, c_void};
use std::collections::HashMap;
use std::ffi::CString;

use parking_lot::Mutex;
use pmix_client::types::attr;
use pmix_client::{Key, Status};

use super::completion::{CbData, complete_infos, complete_op};
use crate::convert::{c_str, infos_from_c, proc_from_c, procs_from_c, query_from_c, required_str};
use crate::convert::{slice_of, value_from_c};
use crate::ctypes::{
    pmix_info_cbfunc_t, pmix_info_t, pmix_op_cbfunc_t, pmix_proc_t, pmix_query_t, pmix_status_t,
    pmix_value_t,
};
use crate::guard::{guarded, guarded_or};
use crate::state;

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
        let queries = unsafe { slice_of(queries, nqueries) }?
            .iter()
            // SAFETY: as above.
            .map(|q| unsafe { query_from_c(q) })
            .collect::<Result<Vec<_>, _>>()?;
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

/// The key string of the attribute named `attribute` (`"PMIX_JOB_SIZE"` or `"JOB_SIZE"`:
/// `"pmix.job.size"`); NULL for a name the Standard does not have. The string is the
/// library's, valid while it is loaded.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Get_attribute_string(attribute: *const c_char) -> *const c_char {
    static KEYS: Mutex<Option<HashMap<&'static str, CString>>> = Mutex::new(None);
    guarded_or(core::ptr::null(), || {
        // SAFETY: the Standard's contract: a C string or NULL.
        let Ok(Some(name)) = (unsafe { c_str(attribute) }) else {
            return core::ptr::null();
        };
        let Some(a) = attr::lookup_name(name) else {
            return core::ptr::null();
        };
        let mut keys = KEYS.lock();
        let keys = keys.get_or_insert_default();
        // Each key's C copy is made once and kept, so the pointer stays valid.
        let c = keys
            .entry(a.key)
            .or_insert_with(|| CString::new(a.key).unwrap_or_default());
        c.as_ptr()
    })
}
