//! Filling and comparing keys, namespaces and process names, the functions OpenPMIx 5's
//! headers call from their macros: `PMIx_Load_key`, `PMIx_Load_nspace`, `PMIx_Load_procid`,
//! `PMIx_Proc_load`, `PMIx_Xfer_procid`, `PMIx_Check_key`, `PMIx_Check_reserved_key`,
//! `PMIx_Check_nspace`, `PMIx_Nspace_invalid`, `PMIx_Check_rank`, `PMIx_Check_procid`,
//! `PMIx_Procid_invalid`.
//!
//! A source longer than the array is cut at the array's last byte but one, as the Standard's
//! macros cut it; a cut never splits the terminating NUL away.

use core::ffi::c_char;

use crate::convert::slice_of;
use pmix_client::Rank;

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

/// Copies process `src` into `dst`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Xfer_procid(dst: *mut pmix_proc_t, src: *const pmix_proc_t) {
    guarded_or((), || {
        // SAFETY: the Standard's contract: NULL or processes of the caller's.
        if let (Some(d), Some(s)) = unsafe { (dst.as_mut(), src.as_ref()) } {
            // SAFETY: as above.
            unsafe { load_fixed(d.nspace.as_mut_ptr(), MAX_NSLEN + 1, s.nspace.as_ptr()) };
            d.rank = s.rank;
        }
    })
}

/// True when `key` is reserved for the Standard's attributes (it starts with `pmix`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Check_reserved_key(key: *const c_char) -> bool {
    guarded_or(false, || {
        // SAFETY: the Standard's contract: a C string or NULL.
        let key = unsafe { bounded(key, MAX_KEYLEN) };
        key.len() >= 4 && key[..4].iter().map(|&c| c as u8).eq(*b"pmix")
    })
}

/// True when a namespace is NULL or empty.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Nspace_invalid(nspace: *const c_char) -> bool {
    // SAFETY: the Standard's contract: a C string or NULL.
    guarded_or(true, || unsafe { bounded(nspace, MAX_NSLEN) }.is_empty())
}

/// True when two ranks are equal or either is `PMIX_RANK_WILDCARD`.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Check_rank(a: pmix_rank_t, b: pmix_rank_t) -> bool {
    a == b || a == Rank::WILDCARD.0 || b == Rank::WILDCARD.0
}

/// True when two processes match: their namespaces as [`PMIx_Check_nspace`], their ranks as
/// [`PMIx_Check_rank`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Check_procid(a: *const pmix_proc_t, b: *const pmix_proc_t) -> bool {
    guarded_or(false, || {
        // SAFETY: the Standard's contract: NULL (no match) or processes.
        let (Some(a), Some(b)) = (unsafe { a.as_ref() }, unsafe { b.as_ref() }) else {
            return false;
        };
        // SAFETY: both namespaces are arrays of MAX_NSLEN + 1 bytes.
        let same_nspace = unsafe { PMIx_Check_nspace(a.nspace.as_ptr(), b.nspace.as_ptr()) };
        same_nspace && PMIx_Check_rank(a.rank, b.rank)
    })
}

/// True when a process is NULL, or has no namespace or the rank `PMIX_RANK_INVALID`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Procid_invalid(p: *const pmix_proc_t) -> bool {
    guarded_or(true, || {
        // SAFETY: the Standard's contract: NULL or a process.
        unsafe { p.as_ref() }.is_none_or(|p| {
            // SAFETY: a namespace array of MAX_NSLEN + 1 bytes.
            let no_nspace = unsafe { PMIx_Nspace_invalid(p.nspace.as_ptr()) };
            no_nspace || p.rank == Rank::INVALID.0
        })
    })
}
