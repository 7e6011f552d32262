//! NULL-terminated string lists (`char **`, "argv"), the functions OpenPMIx 5's headers call
//! from their `PMIX_ARGV_*` and `PMIX_SETENV` macros: `PMIx_Argv_count`,
//! `PMIx_Argv_append_nosize`, `PMIx_Argv_prepend_nosize`, `PMIx_Argv_append_unique_nosize`,
//! `PMIx_Argv_free`, `PMIx_Argv_split`, `PMIx_Argv_split_with_empty`, `PMIx_Argv_split_inter`,
//! `PMIx_Argv_join`, `PMIx_Argv_copy`, `PMIx_Setenv`. Lists and their strings are the C
//! allocator's; a list that changes may move (`*argv` is updated). A list is read up to its
//! NULL (at most 2^20 entries) and its strings must be UTF-8, else `PMIX_ERR_BAD_PARAM` (NULL
//! from the functions that answer a list or a string).

use core::ffi::{c_char, c_int};

use pmix_client::Status;

use crate::convert::required_str;
use crate::convert::{argv_append, argv_free, argv_from_c, argv_to_c, c_str, c_string};
use crate::ctypes::pmix_status_t;
use crate::guard::{guarded, guarded_or};

/// The number of strings in `argv` (0 for NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Argv_count(argv: *mut *mut c_char) -> c_int {
    guarded_or(0, || {
        // SAFETY: the Standard's contract: a list or NULL.
        let n = unsafe { argv_from_c(argv) }.map_or(0, |l| l.len());
        c_int::try_from(n).unwrap_or(c_int::MAX)
    })
}

/// Appends a copy of `arg` to the list at `*argv` (NULL: a new list).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Argv_append_nosize(
    argv: *mut *mut *mut c_char,
    arg: *const c_char,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract: a list from the C allocator (or NULL) and a string.
        unsafe {
            let argv = argv.as_mut().ok_or(Status::ERR_BAD_PARAM)?;
            argv_append(argv, required_str(arg)?)
        }
    })
}

/// Replaces the list at `*argv` with `edit` of its strings, as a new list (the old one and
/// its strings freed).
///
/// # Safety
/// `argv` is NULL (refused) or points at a list from the C allocator, or NULL.
unsafe fn rewrite(
    argv: *mut *mut *mut c_char,
    edit: impl FnOnce(&mut Vec<String>),
) -> Result<(), Status> {
    // SAFETY: the caller's promise.
    let slot = unsafe { argv.as_mut() }.ok_or(Status::ERR_BAD_PARAM)?;
    // SAFETY: as above.
    let mut list = unsafe { argv_from_c(*slot) }?;
    edit(&mut list);
    let new = argv_to_c(&list.iter().map(String::as_str).collect::<Vec<_>>())?;
    // SAFETY: the old list is the caller's, from the C allocator, replaced here.
    unsafe { argv_free(*slot) };
    *slot = new;
    Ok(())
}

/// Puts a copy of `arg` first in the list at `*argv` (NULL: a new list).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Argv_prepend_nosize(
    argv: *mut *mut *mut c_char,
    arg: *const c_char,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract: a string, and a list as `rewrite` takes it.
        unsafe {
            let arg = required_str(arg)?;
            rewrite(argv, |l| l.insert(0, arg.to_owned()))
        }
    })
}

/// Appends a copy of `arg` to the list at `*argv` unless the list has it already.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Argv_append_unique_nosize(
    argv: *mut *mut *mut c_char,
    arg: *const c_char,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract: a string, and a list as `rewrite` takes it.
        unsafe {
            let arg = required_str(arg)?;
            rewrite(argv, |l| {
                if !l.iter().any(|s| s == arg) {
                    l.push(arg.to_owned());
                }
            })
        }
    })
}

/// Frees a list and its strings (NULL: nothing).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Argv_free(argv: *mut *mut c_char) {
    // SAFETY: the Standard's contract: a list from the C allocator, or NULL.
    guarded_or((), || unsafe { argv_free(argv) })
}

/// The pieces of `src` between the `delimiter` bytes, empty ones kept when `include_empty`
/// (`"a,,b"`: `a`, ``, `b`; a delimiter at the end makes no empty last piece), as a new list;
/// NULL when there is no piece, `src` is NULL or the delimiter is not a byte.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Argv_split_inter(
    src: *const c_char,
    delimiter: c_int,
    include_empty: bool,
) -> *mut *mut c_char {
    guarded_or(core::ptr::null_mut(), || {
        // SAFETY: the Standard's contract: a C string or NULL.
        let Ok(Some(src)) = (unsafe { c_str(src) }) else {
            return core::ptr::null_mut();
        };
        let Ok(delimiter) = u8::try_from(delimiter) else {
            return core::ptr::null_mut();
        };
        let pieces = split(src, char::from(delimiter), include_empty);
        if pieces.is_empty() {
            return core::ptr::null_mut();
        }
        argv_to_c(&pieces).unwrap_or(core::ptr::null_mut())
    })
}

/// The pieces of `s` between `delimiter`s, as [`PMIx_Argv_split_inter`] describes.
fn split(s: &str, delimiter: char, include_empty: bool) -> Vec<&str> {
    let s = s.strip_suffix(delimiter).unwrap_or(s);
    if s.is_empty() {
        return Vec::new();
    }
    s.split(delimiter)
        .filter(|p| include_empty || !p.is_empty())
        .collect()
}

/// [`PMIx_Argv_split_inter`] without empty pieces.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Argv_split(src: *const c_char, delimiter: c_int) -> *mut *mut c_char {
    // SAFETY: the Standard's contract.
    unsafe { PMIx_Argv_split_inter(src, delimiter, false) }
}

/// [`PMIx_Argv_split_inter`] with empty pieces.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Argv_split_with_empty(
    src: *const c_char,
    delimiter: c_int,
) -> *mut *mut c_char {
    // SAFETY: the Standard's contract.
    unsafe { PMIx_Argv_split_inter(src, delimiter, true) }
}

/// The strings of `argv` joined by the `delimiter` byte, a new string (`""` for an empty or
/// NULL list); NULL when the delimiter is not a byte or there is no memory.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Argv_join(argv: *mut *mut c_char, delimiter: c_int) -> *mut c_char {
    guarded_or(core::ptr::null_mut(), || {
        let (Ok(delimiter), Ok(list)) = (
            u8::try_from(delimiter),
            // SAFETY: the Standard's contract: a list or NULL.
            unsafe { argv_from_c(argv) },
        ) else {
            return core::ptr::null_mut();
        };
        let joined = list.join(char::from(delimiter).encode_utf8(&mut [0; 4]));
        c_string(&joined).unwrap_or(core::ptr::null_mut())
    })
}

/// A copy of `argv`, new memory (NULL for NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Argv_copy(argv: *mut *mut c_char) -> *mut *mut c_char {
    guarded_or(core::ptr::null_mut(), || {
        if argv.is_null() {
            return core::ptr::null_mut();
        }
        // SAFETY: the Standard's contract: a list.
        let Ok(list) = (unsafe { argv_from_c(argv) }) else {
            return core::ptr::null_mut();
        };
        argv_to_c(&list.iter().map(String::as_str).collect::<Vec<_>>())
            .unwrap_or(core::ptr::null_mut())
    })
}

/// Sets `name=value` in the environment list at `*env`: replaces an entry for `name` when
/// `overwrite` (else `PMIX_ERR_EXISTS` when there is one), appends one otherwise. When
/// `*env` is the process's own `environ`, `setenv(3)` changes it instead.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Setenv(
    name: *const c_char,
    value: *const c_char,
    overwrite: bool,
    env: *mut *mut *mut c_char,
) -> pmix_status_t {
    unsafe extern "C" {
        static mut environ: *mut *mut c_char;
    }
    guarded(|| {
        // SAFETY: the Standard's contract: a name, a value or NULL (empty), a list's address.
        let (name_str, value_str, slot) = unsafe {
            (
                required_str(name)?,
                c_str(value)?.unwrap_or(""),
                env.as_mut().ok_or(Status::ERR_BAD_PARAM)?,
            )
        };
        if name_str.is_empty() || name_str.contains('=') {
            return Err(Status::ERR_BAD_PARAM);
        }
        // SAFETY: reading the address `environ` holds, not through it.
        if *slot == unsafe { environ } {
            let value = std::ffi::CString::new(value_str).map_err(|_| Status::ERR_BAD_PARAM)?;
            // SAFETY: two C strings; the process's environment, as the caller asked.
            let rc = unsafe { libc::setenv(name, value.as_ptr(), c_int::from(overwrite)) };
            return if rc == 0 {
                Ok(())
            } else {
                Err(Status::ERR_NOMEM)
            };
        }
        let prefix = format!("{name_str}=");
        let entry = format!("{prefix}{value_str}");
        let mut outcome = Ok(());
        // SAFETY: `env` is a list's address, as `rewrite` takes it.
        unsafe {
            rewrite(env, |l| {
                match l.iter_mut().find(|e| e.starts_with(&prefix)) {
                    Some(_) if !overwrite => outcome = Err(Status::ERR_EXISTS),
                    Some(e) => *e = entry,
                    None => l.push(entry),
                }
            })
        }?;
        outcome
    })
}
