//! Building info arrays one entry at a time: `PMIx_Info_list_start`, `PMIx_Info_list_add`,
//! `PMIx_Info_list_convert`, `PMIx_Info_list_release`. The list is an opaque handle to a Rust
//! vector; only the converted array is C memory.

use core::ffi::{c_char, c_void};

use pmix_client::types::{DataType, Info, Key, Status};

use crate::convert::{info_array_to_c, required_str};
use crate::ctypes::{pmix_data_array_t, pmix_data_type_t, pmix_status_t};
use crate::exports::values::loaded;
use crate::guard::{guarded, guarded_or};

/// The list behind a handle.
type List = Vec<Info>;

/// A new, empty list; release it with `PMIx_Info_list_release`.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Info_list_start() -> *mut c_void {
    guarded_or(core::ptr::null_mut(), || {
        Box::into_raw(Box::<List>::default()).cast()
    })
}

/// Appends `key` with a copy of the `type_` datum at `value` (as `PMIx_Info_load` reads it).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Info_list_add(
    list: *mut c_void,
    key: *const c_char,
    value: *const c_void,
    type_: pmix_data_type_t,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract: a handle from PMIx_Info_list_start, a C string,
        // and a datum of the type.
        unsafe {
            let list = list.cast::<List>().as_mut().ok_or(Status::ERR_BAD_PARAM)?;
            let key = Key::new(required_str(key)?).map_err(|_| Status::ERR_BAD_PARAM)?;
            list.push(Info::new(key, loaded(value, DataType(type_))?));
        }
        Ok(())
    })
}

/// Fills `out` with an array of `PMIX_INFO` holding the list's entries (the caller owns it).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Info_list_convert(
    list: *mut c_void,
    out: *mut pmix_data_array_t,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract: a handle and an array header the caller owns.
        let (list, out) = unsafe {
            (
                list.cast::<List>().as_ref().ok_or(Status::ERR_BAD_PARAM)?,
                out.as_mut().ok_or(Status::ERR_BAD_PARAM)?,
            )
        };
        if list.is_empty() {
            return Err(Status::ERR_EMPTY);
        }
        info_array_to_c(list.clone(), out)
    })
}

/// Frees a list.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Info_list_release(list: *mut c_void) {
    guarded_or((), || {
        if !list.is_null() {
            // SAFETY: the Standard's contract: a handle from PMIx_Info_list_start, released
            // once.
            drop(unsafe { Box::from_raw(list.cast::<List>()) });
        }
    })
}
