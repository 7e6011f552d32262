//! Exchanging data: `PMIx_Put`, `PMIx_Commit`, `PMIx_Fence` (and `_nb`), `PMIx_Get` (and
//! `_nb`, also in a tool: `session.rs`).

use core::ffi::{c_char, c_void};

use pmix_client::{Client, Info, Proc, Scope, Status, Value, attr};

use super::completion::{CbData, complete_op};
use crate::convert::{c_alloc, c_str, infos_from_c, proc_from_c, procs_from_c, value_destruct};
use crate::convert::{required_str, value_from_c, value_to_c};
use crate::ctypes::{
    pmix_info_t, pmix_op_cbfunc_t, pmix_proc_t, pmix_scope_t, pmix_status_t, pmix_value_cbfunc_t,
    pmix_value_t,
};
use crate::guard::guarded;
use crate::progress::run_on_progress_thread;
use crate::state;

/// Stores `key` = `*val` for peers in `scope` to get once committed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Put(
    scope: pmix_scope_t,
    key: *const c_char,
    val: *mut pmix_value_t,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract: a C string and a value, or NULLs (refused).
        let (key, value) = unsafe {
            let v = val.as_ref().ok_or(Status::ERR_BAD_PARAM)?;
            (required_str(key)?, value_from_c(v)?)
        };
        state::client()?
            .put(Scope(scope), key, value)
            .map_err(|e| e.status())
    })
}

/// Sends what was put since the last commit to the server.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Commit() -> pmix_status_t {
    guarded(|| state::client()?.commit().map_err(|e| e.status()))
}

/// The processes and directives of a collective (a fence, a connect).
///
/// # Safety
/// The Standard's contract: `procs` holds `nprocs` processes, `info` `ninfo` entries.
pub(super) unsafe fn procs_and_info(
    procs: *const pmix_proc_t,
    nprocs: usize,
    info: *const pmix_info_t,
    ninfo: usize,
) -> Result<(Vec<Proc>, Vec<Info>), Status> {
    // SAFETY: the caller's promise.
    unsafe { Ok((procs_from_c(procs, nprocs)?, infos_from_c(info, ninfo)?)) }
}

/// Runs the blocking collective `call` of the client over `procs` with `info`.
///
/// # Safety
/// As [`procs_and_info`].
#[track_caller]
pub(super) unsafe fn collective(
    procs: *const pmix_proc_t,
    nprocs: usize,
    info: *const pmix_info_t,
    ninfo: usize,
    call: impl FnOnce(&Client, &[Proc], &[Info]) -> Result<(), pmix_client::Error>,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the caller's promise.
        let (procs, info) = unsafe { procs_and_info(procs, nprocs, info, ninfo) }?;
        call(&state::client()?, &procs, &info).map_err(|e| e.status())
    })
}

/// Waits until every process of `procs` (none: the whole namespace) has called it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Fence(
    procs: *const pmix_proc_t,
    nprocs: usize,
    info: *const pmix_info_t,
    ninfo: usize,
) -> pmix_status_t {
    // SAFETY: the Standard's contract.
    unsafe { collective(procs, nprocs, info, ninfo, Client::fence) }
}

/// The completion a non-blocking collective hands the client.
pub(super) type Done = Box<dyn FnOnce(Result<(), pmix_client::Error>) + Send>;

/// Starts the non-blocking collective `call` of the client over `procs` with `info`, its
/// outcome reaching `cbfunc(status, cbdata)` on the progress thread.
///
/// # Safety
/// As [`procs_and_info`].
#[track_caller]
pub(super) unsafe fn collective_nb(
    procs: *const pmix_proc_t,
    nprocs: usize,
    info: *const pmix_info_t,
    ninfo: usize,
    cbfunc: pmix_op_cbfunc_t,
    cbdata: *mut c_void,
    call: impl FnOnce(&Client, &[Proc], &[Info], Done),
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the caller's promise.
        let (procs, info) = unsafe { procs_and_info(procs, nprocs, info, ninfo) }?;
        let client = state::client()?;
        let cbdata = CbData(cbdata);
        let done: Done =
            Box::new(move |result| complete_op(result.map_err(|e| e.status()), cbfunc, cbdata));
        call(&client, &procs, &info, done);
        Ok(())
    })
}

/// [`PMIx_Fence`] completing through `cbfunc(status, cbdata)` on the progress thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Fence_nb(
    procs: *const pmix_proc_t,
    nprocs: usize,
    info: *const pmix_info_t,
    ninfo: usize,
    cbfunc: pmix_op_cbfunc_t,
    cbdata: *mut c_void,
) -> pmix_status_t {
    // SAFETY: the Standard's contract.
    unsafe {
        collective_nb(
            procs,
            nprocs,
            info,
            ninfo,
            cbfunc,
            cbdata,
            |c, p, i, done| c.fence_nb(p, i, done),
        )
    }
}

/// The process and directives of a get; a NULL `proc` is this process (a client, or a tool
/// by its name at its primary server).
///
/// # Safety
/// The Standard's contract: a process or NULL, a C string or NULL, `ninfo` entries.
unsafe fn get_args(
    proc: *const pmix_proc_t,
    key: *const c_char,
    info: *const pmix_info_t,
    ninfo: usize,
) -> Result<(Proc, Option<String>, Vec<Info>), Status> {
    // SAFETY: the caller's promise.
    unsafe {
        let proc = match proc.as_ref() {
            Some(p) => proc_from_c(p)?,
            None => state::session()?.proc()?,
        };
        Ok((
            proc,
            c_str(key)?.map(str::to_owned),
            infos_from_c(info, ninfo)?,
        ))
    }
}

/// `key` of `proc` (no key: everything `proc` put) into a new value at `*val`, which the caller
/// releases (`PMIX_VALUE_RELEASE`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Get(
    proc: *const pmix_proc_t,
    key: *const c_char,
    info: *const pmix_info_t,
    ninfo: usize,
    val: *mut *mut pmix_value_t,
) -> pmix_status_t {
    guarded(|| {
        if val.is_null() {
            return Err(Status::ERR_BAD_PARAM);
        }
        // SAFETY: the Standard's contract.
        let (proc, key, info) = unsafe { get_args(proc, key, info, ninfo) }?;
        let session = state::session()?;
        let stored = key.as_deref().and_then(|k| state::internal(&proc, k));
        let value = match stored {
            Some(v) => Ok(v),
            None => session.get(proc, key.clone(), info),
        };
        let value = no_empty_locality(key.as_deref(), value)?;
        let out = c_alloc::<pmix_value_t>(1)?;
        match value_to_c(&value) {
            // SAFETY: `out` is one fresh value; `val` was checked not NULL.
            Ok(v) => unsafe {
                out.write(v);
                val.write(out);
            },
            Err(e) => {
                // SAFETY: from c_alloc.
                unsafe { libc::free(out.cast()) };
                return Err(e);
            }
        }
        Ok(())
    })
}

/// An empty `PMIX_LOCALITY_STRING` answered as not found. PRRTE gives an unbound process a
/// NULL locality string, which reaches the caller as a string value holding NULL
/// (`Value::NullString`), as libpmix hands it on (Open MPI then knows no locality); an empty
/// one, which Open MPI would parse as a locality and crash on, never means a locality.
fn no_empty_locality(key: Option<&str>, got: Result<Value, Status>) -> Result<Value, Status> {
    match got {
        Ok(Value::String(s)) if s.is_empty() && key == Some(attr::LOCALITY_STRING) => {
            Err(Status::ERR_NOT_FOUND)
        }
        other => other,
    }
}

/// Hands `result` to `cbfunc` on the progress thread, in a value this library releases
/// when the callback returns.
fn complete_get(result: Result<Value, Status>, cbfunc: pmix_value_cbfunc_t, cbdata: CbData) {
    run_on_progress_thread(move || {
        let cbdata = cbdata;
        let Some(f) = cbfunc else { return };
        let converted = result.and_then(|v| value_to_c(&v));
        match converted {
            Ok(mut v) => {
                // SAFETY: the caller's callback gets a value valid until it returns, which is
                // then released here.
                unsafe {
                    f(Status::SUCCESS.0, &mut v, cbdata.0);
                    value_destruct(&mut v);
                }
            }
            // SAFETY: the caller's callback, with no value.
            Err(s) => unsafe { f(s.0, core::ptr::null_mut(), cbdata.0) },
        }
    });
}

/// [`PMIx_Get`] completing through `cbfunc(status, value, cbdata)` on the progress thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Get_nb(
    proc: *const pmix_proc_t,
    key: *const c_char,
    info: *const pmix_info_t,
    ninfo: usize,
    cbfunc: pmix_value_cbfunc_t,
    cbdata: *mut c_void,
) -> pmix_status_t {
    guarded(|| {
        if cbfunc.is_none() {
            return Err(Status::ERR_BAD_PARAM);
        }
        // SAFETY: the Standard's contract.
        let (proc, key, info) = unsafe { get_args(proc, key, info, ninfo) }?;
        let cbdata = CbData(cbdata);
        if let Some(v) = key.as_deref().and_then(|k| state::internal(&proc, k)) {
            complete_get(Ok(v), cbfunc, cbdata);
            return Ok(());
        }
        let k = key.clone();
        state::session()?.get_nb(proc, key, info, move |r| {
            complete_get(no_empty_locality(k.as_deref(), r), cbfunc, cbdata);
        });
        Ok(())
    })
}
