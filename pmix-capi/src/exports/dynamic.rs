//! Dynamic jobs and groups: `PMIx_Spawn`, `PMIx_Connect`, `PMIx_App_create`/`_free`,
//! `PMIx_Group_construct`, `PMIx_Group_destruct`.

use core::ffi::c_char;

use pmix_client::types::attr;
use pmix_client::{Client, DataArray, Info, Value};

use super::data::collective;
use crate::convert::{
    app_from_c, apps_destruct, c_alloc, fixed_from_str, infos_from_c, infos_to_c, procs_from_c,
    required_str, slice_of,
};
use crate::ctypes::{pmix_app_t, pmix_info_t, pmix_nspace_t, pmix_proc_t, pmix_status_t};
use crate::guard::{guarded, guarded_or};
use crate::state;

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
        let (info, apps) = unsafe {
            let apps = slice_of(apps, napps)?
                .iter()
                .map(|a| app_from_c(a))
                .collect::<Result<Vec<_>, _>>()?;
            (infos_from_c(job_info, ninfo)?, apps)
        };
        let child = state::session()?.spawn(info, apps)?;
        // SAFETY: a non-NULL `nspace` is the caller's namespace array.
        if let Some(out) = unsafe { nspace.as_mut() } {
            fixed_from_str(child.as_str(), out)?;
        }
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

/// Constructs group `grp` of `procs` (a collective over them); the group's context id (when
/// `PMIX_GROUP_ASSIGN_CONTEXT_ID` asked for one) and members come back as infos the caller
/// frees (`PMIX_INFO_FREE`), `PMIX_GROUP_CONTEXT_ID` and `PMIX_GROUP_MEMBERSHIP`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Group_construct(
    grp: *const c_char,
    procs: *const pmix_proc_t,
    nprocs: usize,
    directives: *const pmix_info_t,
    ndirs: usize,
    results: *mut *mut pmix_info_t,
    nresults: *mut usize,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (grp, procs, info) = unsafe {
            (
                required_str(grp)?,
                procs_from_c(procs, nprocs)?,
                infos_from_c(directives, ndirs)?,
            )
        };
        let group = state::client()?
            .group_construct(grp, &procs, &info)
            .map_err(|e| e.status())?;
        if results.is_null() || nresults.is_null() {
            return Ok(());
        }
        let mut out = Vec::new();
        if let Some(id) = group.context_id {
            out.push(Info::attr(attr::GROUP_CONTEXT_ID, Value::Size(id)));
        }
        let members = DataArray::from_procs(group.members);
        out.push(Info::attr(
            attr::GROUP_MEMBERSHIP,
            Value::DataArray(Box::new(members)),
        ));
        let p = infos_to_c(&out)?;
        // SAFETY: both checked not NULL.
        unsafe {
            results.write(p);
            nresults.write(out.len());
        }
        Ok(())
    })
}

/// Destructs group `grp`: a collective over its members.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Group_destruct(
    grp: *const c_char,
    directives: *const pmix_info_t,
    ndirs: usize,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (grp, info) = unsafe { (required_str(grp)?, infos_from_c(directives, ndirs)?) };
        state::client()?
            .group_destruct(grp, &info)
            .map_err(|e| e.status())
    })
}
