//! Filling and comparing keys, namespaces and process names, the functions OpenPMIx 5's
//! headers call from their macros: `PMIx_Load_key`, `PMIx_Load_nspace`, `PMIx_Load_procid`,
//! `PMIx_Proc_load`, `PMIx_Check_key`, `PMIx_Check_nspace`.
//!
//! A source longer than the array is cut at the array's last byte but one, as the Standard's
//! macros cut it; a cut never splits the terminating NUL away.

use core::ffi::c_char;

use crate::convert::slice_of;
use crate::ctypes::{MAX_KEYLEN, MAX_NSLEN, pmix_proc_t, pmix_rank_t};
use crate::guard::guarded_or;

/// Clears `dst` (`cap` bytes) and copies at most `cap - 1` bytes of `src` into it.
///
/// # Safety
/// `dst` is NULL or `cap` writable bytes; `src` is NULL or a C string.
unsafe fn load_fixed(dst: *mut c_char, cap: usize, src: *const c_char) {
    if dst.is_null() {
        return;
    }
    // SAFETY: the caller's promise.
    unsafe {
        core::ptr::write_bytes(dst, 0, cap);
        if !src.is_null() {
            let len = libc::strnlen(src, cap - 1);
            core::ptr::copy_nonoverlapping(src, dst, len);
        }
    }
}

/// Fills a `pmix_key_t` with `src`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Load_key(key: *mut c_char, src: *const c_char) {
    // SAFETY: the Standard's contract: a pmix_key_t and a C string.
    guarded_or((), || unsafe { load_fixed(key, MAX_KEYLEN + 1, src) })
}

/// Fills a `pmix_nspace_t` with `src`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Load_nspace(nspace: *mut c_char, src: *const c_char) {
    // SAFETY: the Standard's contract: a pmix_nspace_t and a C string.
    guarded_or((), || unsafe { load_fixed(nspace, MAX_NSLEN + 1, src) })
}

/// Fills a process name.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Load_procid(
    p: *mut pmix_proc_t,
    nspace: *const c_char,
    rank: pmix_rank_t,
) {
    guarded_or((), || {
        // SAFETY: the Standard's contract: NULL or a process the caller owns, a C string.
        if let Some(p) = unsafe { p.as_mut() } {
            // SAFETY: as above.
            unsafe { load_fixed(p.nspace.as_mut_ptr(), MAX_NSLEN + 1, nspace) };
            p.rank = rank;
        }
    })
}

/// The same as [`PMIx_Load_procid`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Proc_load(
    p: *mut pmix_proc_t,
    nspace: *const c_char,
    rank: pmix_rank_t,
) {
    // SAFETY: the Standard's contract.
    unsafe { PMIx_Load_procid(p, nspace, rank) }
}

/// The text of `s` up to its NUL or `cap` bytes, empty for NULL.
///
/// # Safety
/// `s` is NULL or a C string (or an array of at least `cap` bytes).
unsafe fn bounded<'a>(s: *const c_char, cap: usize) -> &'a [c_char] {
    if s.is_null() {
        return &[];
    }
    // SAFETY: the caller's promise; strnlen reads no further than `cap`.
    unsafe { slice_of(s, libc::strnlen(s, cap)) }.unwrap_or(&[])
}

/// True when two keys are equal (within `PMIX_MAX_KEYLEN` bytes).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Check_key(a: *const c_char, b: *const c_char) -> bool {
    // SAFETY: the Standard's contract: two C strings.
    guarded_or(false, || unsafe {
        bounded(a, MAX_KEYLEN) == bounded(b, MAX_KEYLEN)
    })
}

/// True when two namespaces are equal, or either is empty (which matches any).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Check_nspace(a: *const c_char, b: *const c_char) -> bool {
    guarded_or(false, || {
        // SAFETY: the Standard's contract: two C strings or NULLs.
        let (a, b) = unsafe { (bounded(a, MAX_NSLEN), bounded(b, MAX_NSLEN)) };
        a.is_empty() || b.is_empty() || a == b
    })
}
