//! An info entry's directive flags and truth, the functions OpenPMIx 5's headers call from
//! their `PMIX_INFO_*` and `PMIX_CHECK_TRUE` macros: `PMIx_Info_required`, `_optional`,
//! `_processed`, `_set_end`, `_qualifier`, `_persistent` (each setting its flag; optional
//! clears the required one), `PMIx_Info_is_required`, `_is_optional`, `_was_processed`,
//! `_is_end`, `_is_qualifier`, `_is_persistent`, and `PMIx_Value_true`, `PMIx_Info_true`.

use pmix_client::Value;
use pmix_client::types::InfoFlags;

use crate::convert::value_from_c;
use crate::ctypes::{pmix_info_t, pmix_value_t};
use crate::guard::guarded_or;

/// Sets (`on`) or clears `flag` of the entry at `p` (NULL: nothing).
///
/// # Safety
/// NULL or an info entry the caller owns.
unsafe fn set(p: *mut pmix_info_t, flag: InfoFlags, on: bool) {
    guarded_or((), || {
        // SAFETY: the caller's promise.
        if let Some(i) = unsafe { p.as_mut() } {
            if on {
                i.flags |= flag.0;
            } else {
                i.flags &= !flag.0;
            }
        }
    })
}

/// Whether the entry at `p` has `flag` (false for NULL).
///
/// # Safety
/// NULL or an info entry.
unsafe fn has(p: *const pmix_info_t, flag: InfoFlags) -> bool {
    // SAFETY: the caller's promise.
    guarded_or(false, || {
        unsafe { p.as_ref() }.is_some_and(|i| InfoFlags(i.flags).contains(flag))
    })
}

/// Marks an entry required.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Info_required(p: *mut pmix_info_t) {
    // SAFETY: the Standard's contract.
    unsafe { set(p, InfoFlags::REQD, true) }
}

/// Marks an entry optional (clears required).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Info_optional(p: *mut pmix_info_t) {
    // SAFETY: the Standard's contract.
    unsafe { set(p, InfoFlags::REQD, false) }
}

/// Marks a required entry processed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Info_processed(p: *mut pmix_info_t) {
    // SAFETY: the Standard's contract.
    unsafe { set(p, InfoFlags::REQD_PROCESSED, true) }
}

/// Marks an entry as its array's end.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Info_set_end(p: *mut pmix_info_t) {
    // SAFETY: the Standard's contract.
    unsafe { set(p, InfoFlags::ARRAY_END, true) }
}

/// Marks an entry as a qualifier of the others.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Info_qualifier(p: *mut pmix_info_t) {
    // SAFETY: the Standard's contract.
    unsafe { set(p, InfoFlags::QUALIFIER, true) }
}

/// Marks an entry persistent (its value is not freed with it).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Info_persistent(p: *mut pmix_info_t) {
    // SAFETY: the Standard's contract.
    unsafe { set(p, InfoFlags::PERSISTENT, true) }
}

/// Whether an entry is required.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Info_is_required(p: *const pmix_info_t) -> bool {
    // SAFETY: the Standard's contract.
    unsafe { has(p, InfoFlags::REQD) }
}

/// Whether an entry is optional (not required; false for NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Info_is_optional(p: *const pmix_info_t) -> bool {
    // SAFETY: the Standard's contract.
    !p.is_null() && !unsafe { has(p, InfoFlags::REQD) }
}

/// Whether a required entry was processed.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Info_was_processed(p: *const pmix_info_t) -> bool {
    // SAFETY: the Standard's contract.
    unsafe { has(p, InfoFlags::REQD_PROCESSED) }
}

/// Whether an entry is its array's end.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Info_is_end(p: *const pmix_info_t) -> bool {
    // SAFETY: the Standard's contract.
    unsafe { has(p, InfoFlags::ARRAY_END) }
}

/// Whether an entry is a qualifier.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Info_is_qualifier(p: *const pmix_info_t) -> bool {
    // SAFETY: the Standard's contract.
    unsafe { has(p, InfoFlags::QUALIFIER) }
}

/// Whether an entry is persistent.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Info_is_persistent(p: *const pmix_info_t) -> bool {
    // SAFETY: the Standard's contract.
    unsafe { has(p, InfoFlags::PERSISTENT) }
}

/// `pmix_boolean_t`'s `PMIX_BOOL_TRUE`, `PMIX_BOOL_FALSE`, `PMIX_NON_BOOL`.
const BOOL_TRUE: i32 = 0;
const BOOL_FALSE: i32 = 1;
const NON_BOOL: i32 = 2;

/// What a value says as a flag: no value (`PMIX_UNDEF`) is true, as an attribute given
/// without one is; a bool is itself; a string is true when empty (or only blanks), a number
/// is true unless it is 0, `yes`/`true` are true and `no`/`false` false (in any case, at the
/// string's start); anything else is no boolean.
pub(crate) fn truth(v: &Value) -> i32 {
    let verdict = |b: bool| if b { BOOL_TRUE } else { BOOL_FALSE };
    match v {
        Value::Undef => BOOL_TRUE,
        Value::Bool(b) => verdict(*b),
        Value::String(s) => {
            let s = s.trim_start();
            let lower = s.get(..5).unwrap_or(s).to_ascii_lowercase();
            if s.is_empty() {
                BOOL_TRUE
            } else if s.starts_with(|c: char| c.is_ascii_digit()) {
                let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
                verdict(digits.bytes().any(|d| d != b'0'))
            } else if lower.starts_with("yes") || lower.starts_with("true") {
                BOOL_TRUE
            } else if lower.starts_with("no") || lower.starts_with("false") {
                BOOL_FALSE
            } else {
                NON_BOOL
            }
        }
        _ => NON_BOOL,
    }
}

/// Whether a value is true, false or no boolean (`truth`); NULL and values this library
/// cannot read are no boolean.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Value_true(v: *const pmix_value_t) -> i32 {
    guarded_or(NON_BOOL, || {
        // SAFETY: the Standard's contract: NULL or a well-formed value.
        match unsafe { v.as_ref() }.map(|v| unsafe { value_from_c(v) }) {
            Some(Ok(v)) => truth(&v),
            _ => NON_BOOL,
        }
    })
}

/// [`PMIx_Value_true`] of an entry's value.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Info_true(p: *const pmix_info_t) -> i32 {
    // SAFETY: the Standard's contract: NULL or a well-formed entry.
    guarded_or(NON_BOOL, || unsafe {
        p.as_ref().map_or(NON_BOOL, |i| PMIx_Value_true(&i.value))
    })
}
