//! Dynamic jobs: `PMIx_Spawn`, `PMIx_Connect`, `PMIx_Disconnect` (each also `_nb`),
//! `PMIx_App_create`/`_free`.

use core::ffi::c_void;

use pmix_client::{App, Client, Info, Status};

use super::completion::CbData;
use super::data::{collective, collective_nb};
use crate::convert::{app_from_c, apps_destruct, c_alloc, fixed_from_str, infos_from_c, slice_of};
use crate::ctypes::{pmix_app_t, pmix_info_t, pmix_nspace_t, pmix_op_cbfunc_t, pmix_proc_t};
use crate::ctypes::{pmix_spawn_cbfunc_t, pmix_status_t};
use crate::guard::{guarded, guarded_or};
use crate::progress::run_on_progress_thread;
use crate::state;

/// The job directives and applications of a spawn.
///
/// # Safety
/// The Standard's contract: `job_info` holds `ninfo` entries, `apps` `napps` contexts.
unsafe fn spawn_args(
    job_info: *const pmix_info_t,
    ninfo: usize,
    apps: *const pmix_app_t,
    napps: usize,
) -> Result<(Vec<Info>, Vec<App>), Status> {
    // SAFETY: the caller's promise.
    unsafe {
        let apps = slice_of(apps, napps)?
            .iter()
            .map(|a| app_from_c(a))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((infos_from_c(job_info, ninfo)?, apps))
    }
}

/// Starts the applications `apps` as a new job; its namespace is written to `nspace` (when not
/// NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Spawn(
    job_info: *const pmix_info_t,
    ninfo: usize,
    apps: *const pmix_app_t,
    napps: usize,
    nspace: *mut pmix_nspace_t,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (info, apps) = unsafe { spawn_args(job_info, ninfo, apps, napps) }?;
        let child = state::session()?.spawn(info, apps)?;
        // SAFETY: a non-NULL `nspace` is the caller's namespace array.
        if let Some(out) = unsafe { nspace.as_mut() } {
            fixed_from_str(child.as_str(), out)?;
        }
        Ok(())
    })
}

/// [`PMIx_Spawn`] completing through `cbfunc(status, nspace, cbdata)` on the progress thread,
/// the new job's namespace lent until the callback returns (empty on failure).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Spawn_nb(
    job_info: *const pmix_info_t,
    ninfo: usize,
    apps: *const pmix_app_t,
    napps: usize,
    cbfunc: pmix_spawn_cbfunc_t,
    cbdata: *mut c_void,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (info, apps) = unsafe { spawn_args(job_info, ninfo, apps, napps) }?;
        let cbdata = CbData(cbdata);
        state::session()?.spawn_nb(info, apps, move |r| {
            run_on_progress_thread(move || {
                let cbdata = cbdata;
                let Some(f) = cbfunc else { return };
                let mut nspace: pmix_nspace_t = [0; crate::ctypes::MAX_NSLEN + 1];
                let status = match r {
                    Ok(child) => fixed_from_str(child.as_str(), &mut nspace)
                        .err()
                        .unwrap_or(Status::SUCCESS),
                    Err(status) => status,
                };
                // SAFETY: the caller's callback; the namespace lives until it returns.
                unsafe { f(status.0, nspace.as_mut_ptr(), cbdata.0) };
            })
        });
        Ok(())
    })
}

/// Connects this process with `procs`: a collective over them all.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Connect(
    procs: *const pmix_proc_t,
    nprocs: usize,
    info: *const pmix_info_t,
    ninfo: usize,
) -> pmix_status_t {
    // SAFETY: the Standard's contract.
    unsafe { collective(procs, nprocs, info, ninfo, Client::connect) }
}

/// [`PMIx_Connect`] completing through `cbfunc(status, cbdata)` on the progress thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Connect_nb(
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
            |c, p, i, done| c.connect_nb(p, i, done),
        )
    }
}

/// Undoes a connect with `procs`: a collective over the same processes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Disconnect(
    procs: *const pmix_proc_t,
    nprocs: usize,
    info: *const pmix_info_t,
    ninfo: usize,
) -> pmix_status_t {
    // SAFETY: the Standard's contract.
    unsafe { collective(procs, nprocs, info, ninfo, Client::disconnect) }
}

/// [`PMIx_Disconnect`] completing through `cbfunc(status, cbdata)` on the progress thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Disconnect_nb(
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
            |c, p, i, done| c.disconnect_nb(p, i, done),
        )
    }
}

/// `n` zeroed application contexts, which the caller releases with [`PMIx_App_free`]; NULL
/// when there is no memory.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_App_create(n: usize) -> *mut pmix_app_t {
    guarded_or(core::ptr::null_mut(), || {
        c_alloc::<pmix_app_t>(n).unwrap_or(core::ptr::null_mut())
    })
}

/// Frees `n` application contexts made by [`PMIx_App_create`] and what each holds.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_App_free(p: *mut pmix_app_t, n: usize) {
    guarded_or((), || {
        // SAFETY: the caller's array, from PMIx_App_create, its members from the C allocator.
        unsafe {
            apps_destruct(p, n);
            libc::free(p.cast());
        }
    })
}
