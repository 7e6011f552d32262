//! Topology: `PMIx_Load_topology`, `PMIx_Get_cpuset`, `PMIx_Parse_cpuset_string`,
//! `PMIx_Cpuset_construct`, `PMIx_Compute_distances` (and `_nb`), which answer
//! `PMIX_ERR_NOT_SUPPORTED` (this library has no topology library, and a cpuset's bitmap is
//! hwloc's; Open MPI then discovers the topology itself); `PMIx_Get_relative_locality`, which
//! needs none (it compares two locality strings); and `pmix_framework_names`, the list of
//! OpenPMIx's plugin frameworks, empty here (there are none).

use core::ffi::{c_char, c_void};

use pmix_client::Status;

use crate::convert::required_str;
use crate::ctypes::{pmix_cpuset_t, pmix_info_t, pmix_status_t, pmix_topology_t};
use crate::guard::guarded;
use crate::state;

/// A NULL-terminated list of C strings, shareable as a static.
#[repr(transparent)]
pub struct CStrList<const N: usize>([*const c_char; N]);
// SAFETY: the pointers are NULL or static strings, never written.
unsafe impl<const N: usize> Sync for CStrList<N> {}

/// `pmix_framework_names`: OpenPMIx's plugin frameworks, a NULL-terminated list that Open MPI
/// reads; this library has none.
#[unsafe(no_mangle)]
pub static pmix_framework_names: CStrList<1> = CStrList([core::ptr::null()]);

/// Not supported: there is no topology to load.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Load_topology(_topo: *mut pmix_topology_t) -> pmix_status_t {
    Status::ERR_NOT_SUPPORTED.0
}

/// Not supported: there is no topology to read the binding from.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Get_cpuset(_cpuset: *mut pmix_cpuset_t, _ref: u8) -> pmix_status_t {
    Status::ERR_NOT_SUPPORTED.0
}

/// Not supported: a cpuset holds an hwloc bitmap, and this library has no hwloc.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Parse_cpuset_string(
    _cpuset_string: *const c_char,
    _cpuset: *mut pmix_cpuset_t,
) -> pmix_status_t {
    Status::ERR_NOT_SUPPORTED.0
}

/// How close the processes of the locality strings `locality1` and `locality2`
/// (`PMIX_LOCALITY_STRING` values, with or without the `hwloc:` prefix) are, written to
/// `*locality`: `PMIX_LOCALITY_SHARE_NODE` plus a bit for each kind of object they share.
/// `PMIX_ERR_BAD_PARAM` for a string that is not a locality string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Get_relative_locality(
    locality1: *const c_char,
    locality2: *const c_char,
    locality: *mut u16,
) -> pmix_status_t {
    guarded(|| {
        if locality.is_null() {
            return Err(Status::ERR_BAD_PARAM);
        }
        // SAFETY: the Standard's contract: two C strings.
        let (a, b) = unsafe { (required_str(locality1)?, required_str(locality2)?) };
        let rel = state::client()?
            .relative_locality(a, b)
            .map_err(|e| e.status())?;
        // SAFETY: checked not NULL.
        unsafe { locality.write(rel.0) };
        Ok(())
    })
}

/// Makes a cpuset empty.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Cpuset_construct(cpuset: *mut pmix_cpuset_t) {
    // SAFETY: a non-NULL `cpuset` is the caller's.
    if let Some(c) = unsafe { cpuset.as_mut() } {
        c.source = core::ptr::null_mut();
        c.bitmap = core::ptr::null_mut();
    }
}

/// Not supported: there is no topology to measure; `*distances` and `*ndist` say none.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Compute_distances(
    _topo: *mut pmix_topology_t,
    _cpuset: *mut pmix_cpuset_t,
    _info: *mut pmix_info_t,
    _ninfo: usize,
    distances: *mut *mut c_void,
    ndist: *mut usize,
) -> pmix_status_t {
    // SAFETY: non-NULL out-pointers are the caller's.
    unsafe {
        if !distances.is_null() {
            distances.write(core::ptr::null_mut());
        }
        if !ndist.is_null() {
            ndist.write(0);
        }
    }
    Status::ERR_NOT_SUPPORTED.0
}

/// Not supported, as [`PMIx_Compute_distances`]; the callback is not called.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Compute_distances_nb(
    _topo: *mut pmix_topology_t,
    _cpuset: *mut pmix_cpuset_t,
    _info: *mut pmix_info_t,
    _ninfo: usize,
    _cbfunc: *mut c_void,
    _cbdata: *mut c_void,
) -> pmix_status_t {
    Status::ERR_NOT_SUPPORTED.0
}
