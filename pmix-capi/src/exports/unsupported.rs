//! Requests pmix-client cannot express, answering `PMIX_ERR_NOT_SUPPORTED` (the `_nb` forms
//! without calling their callback, as the Standard says of a call that fails at once):
//! allocations (`PMIx_Allocation_request`), process monitoring (`PMIx_Process_monitor`),
//! credentials (`PMIx_Get_credential`, `PMIx_Validate_credential`), fabrics
//! (`PMIx_Fabric_register`, `_update`, `_deregister`), each also `_nb`; pmix-rs's wire has no
//! request for them, and its server none to answer. And `PMIx_Register_attributes`, a function
//! of the server's host, not of a client. Out-pointers are set to none first, so a caller
//! that frees them frees nothing.

use core::ffi::{c_char, c_void};

use pmix_client::Status;

use crate::ctypes::{pmix_byte_object_t, pmix_info_t, pmix_status_t};

/// `PMIX_ERR_NOT_SUPPORTED`, after setting non-NULL result out-pointers to none.
///
/// # Safety
/// Non-NULL out-pointers are valid for writes.
unsafe fn no_results(results: *mut *mut pmix_info_t, nresults: *mut usize) -> pmix_status_t {
    if !results.is_null() && !nresults.is_null() {
        // SAFETY: the caller's promise.
        unsafe {
            results.write(core::ptr::null_mut());
            nresults.write(0);
        }
    }
    Status::ERR_NOT_SUPPORTED.0
}

/// Not supported: no allocation request on pmix-rs's wire.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Allocation_request(
    _directive: u8,
    _info: *mut pmix_info_t,
    _ninfo: usize,
    results: *mut *mut pmix_info_t,
    nresults: *mut usize,
) -> pmix_status_t {
    // SAFETY: the Standard's contract.
    unsafe { no_results(results, nresults) }
}

/// Not supported, as [`PMIx_Allocation_request`].
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Allocation_request_nb(
    _directive: u8,
    _info: *mut pmix_info_t,
    _ninfo: usize,
    _cbfunc: *mut c_void,
    _cbdata: *mut c_void,
) -> pmix_status_t {
    Status::ERR_NOT_SUPPORTED.0
}

/// Not supported: no monitoring request on pmix-rs's wire.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Process_monitor(
    _monitor: *const pmix_info_t,
    _error: pmix_status_t,
    _directives: *const pmix_info_t,
    _ndirs: usize,
    results: *mut *mut pmix_info_t,
    nresults: *mut usize,
) -> pmix_status_t {
    // SAFETY: the Standard's contract.
    unsafe { no_results(results, nresults) }
}

/// Not supported, as [`PMIx_Process_monitor`].
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Process_monitor_nb(
    _monitor: *const pmix_info_t,
    _error: pmix_status_t,
    _directives: *const pmix_info_t,
    _ndirs: usize,
    _cbfunc: *mut c_void,
    _cbdata: *mut c_void,
) -> pmix_status_t {
    Status::ERR_NOT_SUPPORTED.0
}

/// Not supported: no credential request on pmix-rs's wire; `*credential` is left empty.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Get_credential(
    _info: *const pmix_info_t,
    _ninfo: usize,
    credential: *mut pmix_byte_object_t,
) -> pmix_status_t {
    if !credential.is_null() {
        // SAFETY: the Standard's contract: a non-NULL out-pointer is the caller's.
        unsafe {
            credential.write(pmix_byte_object_t {
                bytes: core::ptr::null_mut(),
                size: 0,
            })
        };
    }
    Status::ERR_NOT_SUPPORTED.0
}

/// Not supported, as [`PMIx_Get_credential`].
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Get_credential_nb(
    _info: *const pmix_info_t,
    _ninfo: usize,
    _cbfunc: *mut c_void,
    _cbdata: *mut c_void,
) -> pmix_status_t {
    Status::ERR_NOT_SUPPORTED.0
}

/// Not supported: no validation request on pmix-rs's wire.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Validate_credential(
    _cred: *const pmix_byte_object_t,
    _info: *const pmix_info_t,
    _ninfo: usize,
    results: *mut *mut pmix_info_t,
    nresults: *mut usize,
) -> pmix_status_t {
    // SAFETY: the Standard's contract.
    unsafe { no_results(results, nresults) }
}

/// Not supported, as [`PMIx_Validate_credential`].
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Validate_credential_nb(
    _cred: *const pmix_byte_object_t,
    _info: *const pmix_info_t,
    _ninfo: usize,
    _cbfunc: *mut c_void,
    _cbdata: *mut c_void,
) -> pmix_status_t {
    Status::ERR_NOT_SUPPORTED.0
}

/// Not supported: no fabric request on pmix-rs's wire; the fabric object is left untouched.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Fabric_register(
    _fabric: *mut c_void,
    _directives: *const pmix_info_t,
    _ndirs: usize,
) -> pmix_status_t {
    Status::ERR_NOT_SUPPORTED.0
}

/// Not supported, as [`PMIx_Fabric_register`].
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Fabric_register_nb(
    _fabric: *mut c_void,
    _directives: *const pmix_info_t,
    _ndirs: usize,
    _cbfunc: *mut c_void,
    _cbdata: *mut c_void,
) -> pmix_status_t {
    Status::ERR_NOT_SUPPORTED.0
}

/// Not supported, as [`PMIx_Fabric_register`].
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Fabric_update(_fabric: *mut c_void) -> pmix_status_t {
    Status::ERR_NOT_SUPPORTED.0
}

/// Not supported, as [`PMIx_Fabric_register`].
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Fabric_update_nb(
    _fabric: *mut c_void,
    _cbfunc: *mut c_void,
    _cbdata: *mut c_void,
) -> pmix_status_t {
    Status::ERR_NOT_SUPPORTED.0
}

/// Not supported, as [`PMIx_Fabric_register`].
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Fabric_deregister(_fabric: *mut c_void) -> pmix_status_t {
    Status::ERR_NOT_SUPPORTED.0
}

/// Not supported, as [`PMIx_Fabric_register`].
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Fabric_deregister_nb(
    _fabric: *mut c_void,
    _cbfunc: *mut c_void,
    _cbdata: *mut c_void,
) -> pmix_status_t {
    Status::ERR_NOT_SUPPORTED.0
}

/// Not supported: the Standard gives this to a server's host, registering the attributes it
/// supports for `function`; a client has none to register.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Register_attributes(
    _function: *mut c_char,
    _attrs: *mut *mut c_char,
) -> pmix_status_t {
    Status::ERR_NOT_SUPPORTED.0
}
