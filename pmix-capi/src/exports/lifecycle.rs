//! `PMIx_Init`, `PMIx_Initialized`, `PMIx_Finalize`, `PMIx_Abort`, `PMIx_Get_version`, and the
//! marker symbol that tells this library from OpenPMIx's.

use core::ffi::{c_char, c_int};

use pmix_client::Status;

use crate::convert::{c_str, infos_from_c, proc_to_c, procs_from_c};
use crate::ctypes::{pmix_info_t, pmix_proc_t, pmix_status_t};
use crate::guard::{guarded, guarded_or};
use crate::state;

/// Present only in this library: `nm -D libpmix.so.2 | grep pmixrs_capi` tells it from
/// OpenPMIx's, and a program can look it up with `dlsym` to learn which one it runs on.
#[unsafe(no_mangle)]
pub static pmixrs_capi_marker: [u8; 8] = *b"pmix-rs\0";

/// Connects to the server that launched the process (or makes it a singleton) and writes
/// the process's name into `proc` when it is not NULL.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Init(
    proc: *mut pmix_proc_t,
    info: *mut pmix_info_t,
    ninfo: usize,
) -> pmix_status_t {
    guarded(|| {
        // Directives are read for their validity; none changes how this client starts.
        // SAFETY: the Standard's contract: `info` holds `ninfo` entries.
        unsafe { infos_from_c(info, ninfo) }?;
        let client = state::init()?;
        if !proc.is_null() {
            // SAFETY: a non-NULL `proc` points at a pmix_proc_t the caller owns.
            unsafe { proc.write(proc_to_c(client.proc())) };
        }
        Ok(())
    })
}

/// 1 between init and the last finalize, 0 otherwise.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Initialized() -> c_int {
    guarded_or(0, || c_int::from(state::initialized()))
}

/// Counts one finalize; the last one tells the server and disconnects.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Finalize(info: *const pmix_info_t, ninfo: usize) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract: `info` holds `ninfo` entries.
        let info = unsafe { infos_from_c(info, ninfo) }?;
        state::finalize(&info)
    })
}

/// Asks the host to abort `procs` (none: the whole namespace) with `status`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Abort(
    status: c_int,
    msg: *const c_char,
    procs: *mut pmix_proc_t,
    nprocs: usize,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract: a C string, `nprocs` processes.
        let (msg, procs) = unsafe { (c_str(msg)?.unwrap_or(""), procs_from_c(procs, nprocs)?) };
        state::client()?
            .abort(Status(status), msg, &procs)
            .map_err(|e| e.status())
    })
}

/// This library's name and version, `"pmix-rs <version>"`.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Get_version() -> *const c_char {
    static VERSION: &str = concat!("pmix-rs ", env!("CARGO_PKG_VERSION"), "\0");
    VERSION.as_ptr().cast()
}

/// Does nothing: this library progresses on threads of its own (the client's reader and the
/// progress thread), never waiting for the caller to drive it.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Progress() {}
