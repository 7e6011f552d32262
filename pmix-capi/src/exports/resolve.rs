//! Where a job runs: `PMIx_Resolve_peers`, `PMIx_Resolve_nodes`.

use core::ffi::c_char;

use pmix_client::{Nspace, Status};

use crate::convert::{c_str, c_string, procs_to_c, required_str};
use crate::ctypes::{pmix_proc_t, pmix_status_t};
use crate::guard::guarded;
use crate::state;

/// The namespace named by a C string.
///
/// # Safety
/// A NUL-terminated string or NULL (refused).
unsafe fn nspace_arg(nspace: *const c_char) -> Result<Nspace, Status> {
    // SAFETY: the caller's promise.
    Nspace::new(unsafe { required_str(nspace) }?).map_err(|_| Status::ERR_BAD_PARAM)
}

/// The processes of `nspace` on `nodename` (NULL: this node), as a new array the caller frees
/// (`PMIX_PROC_FREE`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Resolve_peers(
    nodename: *const c_char,
    nspace: *const c_char,
    procs: *mut *mut pmix_proc_t,
    nprocs: *mut usize,
) -> pmix_status_t {
    guarded(|| {
        if procs.is_null() || nprocs.is_null() {
            return Err(Status::ERR_BAD_PARAM);
        }
        // SAFETY: the Standard's contract.
        let (node, nspace) = unsafe { (c_str(nodename)?, nspace_arg(nspace)?) };
        let found = state::client()?
            .resolve_peers(node, &nspace)
            .map_err(|e| e.status())?;
        let out = procs_to_c(&found)?;
        // SAFETY: the out-pointers were checked.
        unsafe {
            procs.write(out);
            nprocs.write(found.len());
        }
        Ok(())
    })
}

/// The nodes running processes of `nspace`, as a new comma-separated string the caller frees.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Resolve_nodes(
    nspace: *const c_char,
    nodelist: *mut *mut c_char,
) -> pmix_status_t {
    guarded(|| {
        if nodelist.is_null() {
            return Err(Status::ERR_BAD_PARAM);
        }
        // SAFETY: the Standard's contract.
        let nspace = unsafe { nspace_arg(nspace) }?;
        let nodes = state::client()?
            .resolve_nodes(&nspace)
            .map_err(|e| e.status())?;
        let list = c_string(&nodes.join(","))?;
        // SAFETY: checked not NULL.
        unsafe { nodelist.write(list) };
        Ok(())
    })
}
