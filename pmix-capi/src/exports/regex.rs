//! Node and process maps: `PMIx_generate_regex` and `PMIx_generate_ppn`, over `pmix-regex`.
//! They write the raw form (`raw:node1,node2`, `raw:0,1;2,3`), which every OpenPMIx since 4.0
//! reads and OpenPMIx 4.2.8+ and 5.0.2+ write themselves (`pmix-regex`'s crate docs say why
//! not the older `pmix[...]` form); a plain C string the caller frees.

use core::ffi::c_char;

use pmix_client::Status;
use pmix_regex::{Form, GenerateError};

use crate::convert::{c_string, required_str};
use crate::ctypes::pmix_status_t;
use crate::guard::guarded;

/// Writes `generate(input)` to `*out` as a new C string.
///
/// # Safety
/// `input` is a C string or NULL (refused); a non-NULL `out` is valid for writes.
#[track_caller]
unsafe fn generated(
    input: *const c_char,
    out: *mut *mut c_char,
    generate: fn(&str, Form) -> Result<Vec<u8>, GenerateError>,
) -> pmix_status_t {
    guarded(|| {
        if out.is_null() {
            return Err(Status::ERR_BAD_PARAM);
        }
        // SAFETY: the caller's promise.
        let input = unsafe { required_str(input) }?;
        let map = generate(input, Form::Raw).map_err(|_| Status::ERR_BAD_PARAM)?;
        let map = String::from_utf8(map).map_err(|_| Status::ERR_BAD_PARAM)?;
        let s = c_string(&map)?;
        // SAFETY: checked not NULL.
        unsafe { out.write(s) };
        Ok(())
    })
}

/// The node map of the comma-separated node names `input` (`"c001,c002"`:
/// `"raw:c001,c002"`), in `*regex`; `PMIX_ERR_BAD_PARAM` for an empty name.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_generate_regex(
    input: *const c_char,
    regex: *mut *mut c_char,
) -> pmix_status_t {
    // SAFETY: the Standard's contract.
    unsafe { generated(input, regex, pmix_regex::generate_regex_str) }
}

/// The process map of `input`, each node's ranks (`a` or `a-b`, comma-separated) with the
/// nodes separated by `;` (`"0,1;2"`: `"raw:0,1;2"`), in `*ppn`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_generate_ppn(
    input: *const c_char,
    ppn: *mut *mut c_char,
) -> pmix_status_t {
    // SAFETY: the Standard's contract.
    unsafe { generated(input, ppn, pmix_regex::generate_ppn_str) }
}
