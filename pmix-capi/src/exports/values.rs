//! Value helpers the headers' macros call: `PMIx_Value_load`, `PMIx_Value_unload`,
//! `PMIx_Value_destruct`, `PMIx_Value_xfer`, `PMIx_Data_array_destruct`, `PMIx_Info_load`,
//! `PMIx_Info_xfer`. Each copies deeply, through `pmix_types`, so what is loaded owns its
//! memory and what it was loaded from stays the caller's.

use core::ffi::{c_char, c_void};

use pmix_client::types::{DataType, Key, Status, Value};

use crate::convert::{
    c_str, data_array_destruct, element_from_c, element_size, fixed_from_str, fixed_str,
    undef_value, value_destruct, value_from_c, value_to_c,
};
use crate::ctypes::pmix_value_t;
use crate::ctypes::{pmix_data_array_t, pmix_data_type_t, pmix_info_t, pmix_status_t};
use crate::guard::guarded;

/// The value of type `ty` that `data` points at, as `PMIx_Value_load` reads it: a string is
/// the `char *` itself, any other type its C object. A NULL `data` is true for `PMIX_BOOL`
/// (an attribute given without a value is set) and a bad parameter for any other type.
///
/// # Safety
/// `data` is NULL or points at what `ty` says.
pub(super) unsafe fn loaded(data: *const c_void, ty: DataType) -> Result<Value, Status> {
    if data.is_null() {
        return match ty {
            DataType::BOOL => Ok(Value::Bool(true)),
            _ => Err(Status::ERR_BAD_PARAM),
        };
    }
    // SAFETY: the caller's promise.
    unsafe {
        if ty == DataType::STRING {
            return Ok(Value::String(
                c_str(data.cast())?.ok_or(Status::ERR_BAD_PARAM)?.to_owned(),
            ));
        }
        element_from_c(ty, data.cast(), 0)
    }
}

/// Loads `val` with a copy of the `type_` datum at `data`. NULL `data` loads an empty value of
/// the type (for `PMIX_BOOL`, true, as [`loaded`] reads it).
///
/// # Safety
/// `val` points at a value the caller owns; `data` is NULL or points at what `type_` says.
unsafe fn load(
    val: *mut pmix_value_t,
    data: *const c_void,
    type_: pmix_data_type_t,
) -> Result<(), Status> {
    // SAFETY: the caller's promise.
    let val = unsafe { val.as_mut() }.ok_or(Status::ERR_BAD_PARAM)?;
    let ty = DataType(type_);
    if data.is_null() && ty != DataType::BOOL {
        element_size(ty).ok_or(Status::ERR_BAD_PARAM)?;
        *val = undef_value();
        val.type_ = type_;
        return Ok(());
    }
    // SAFETY: the caller's promise.
    *val = value_to_c(&unsafe { loaded(data, ty) }?)?;
    Ok(())
}

/// `PMIx_Value_load`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Value_load(
    val: *mut pmix_value_t,
    data: *const c_void,
    type_: pmix_data_type_t,
) -> pmix_status_t {
    // SAFETY: the Standard's contract.
    guarded(|| unsafe { load(val, data, type_) })
}

/// Copies the datum of `val` out, its size in `*sz`. A string (`*sz` its length, without the
/// NUL, as OpenPMIx counts) and the bytes of a byte object (or regex, compressed bytes) go to
/// new memory at `*data`, as does a data array (a new `pmix_data_array_t *`); the caller frees
/// them. Any other datum is copied into the caller's memory at `*data` (a `uint16_t` for
/// `PMIX_UINT16`, a `pmix_proc_t` for `PMIX_PROC`...).
///
/// As OpenPMIx, a NULL `*data` is `PMIX_ERR_BAD_PARAM` for every type but a string and a byte
/// object, with nothing written: Open MPI 5 passes `&n` for a `size_t n = 0` when it unloads
/// the number of process sets (`MPI_Session_get_num_psets`) and counts on that refusal; memory
/// allocated there would land in `n` as a count.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Value_unload(
    val: *mut pmix_value_t,
    data: *mut *mut c_void,
    sz: *mut usize,
) -> pmix_status_t {
    guarded(|| {
        if data.is_null() || sz.is_null() {
            return Err(Status::ERR_BAD_PARAM);
        }
        // SAFETY: the Standard's contract: a well-formed value.
        let v = unsafe { value_from_c(val.as_ref().ok_or(Status::ERR_BAD_PARAM)?) }?;
        let ty = v.data_type();
        let size = element_size(ty).ok_or(Status::ERR_NOT_SUPPORTED)?;
        // SAFETY: `data` is not NULL (checked above); the Standard's contract makes it valid.
        if unsafe { data.read() }.is_null() && ty != DataType::STRING && ty != DataType::BYTE_OBJECT
        {
            return Err(Status::ERR_BAD_PARAM);
        }
        let c = value_to_c(&v)?;
        // The datum leaves `c` (inline or by its pointer) for the caller: only the shell of a
        // pointer-held datum is dropped, nothing it owns.
        // SAFETY: `c` is the value just written; `*data` is the caller's memory for the
        // datum, or NULL.
        unsafe {
            let (out, n) = match ty {
                // A NULL string (what PRRTE gives an unbound process as its locality) unloads
                // as NULL and size 0.
                DataType::STRING if c.data.string.is_null() => (core::ptr::null_mut(), 0),
                DataType::STRING => {
                    let s = c.data.string;
                    (s.cast(), libc::strlen(s))
                }
                DataType::BYTE_OBJECT
                | DataType::REGEX
                | DataType::COMPRESSED_STRING
                | DataType::COMPRESSED_BYTE_OBJECT => (c.data.bo.bytes.cast(), c.data.bo.size),
                DataType::DATA_ARRAY => (c.data.ptr, size),
                _ => {
                    let from = if crate::convert::held_by_pointer(ty) {
                        c.data.ptr.cast::<u8>().cast_const()
                    } else {
                        core::ptr::from_ref(&c.data).cast::<u8>()
                    };
                    let out = data.read().cast::<u8>();
                    core::ptr::copy_nonoverlapping(from, out, size);
                    if crate::convert::held_by_pointer(ty) {
                        libc::free(c.data.ptr);
                    }
                    (out.cast(), size)
                }
            };
            data.write(out);
            sz.write(n);
        }
        Ok(())
    })
}

/// Frees what `val` owns and leaves it empty.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Value_destruct(val: *mut pmix_value_t) {
    // SAFETY: the Standard's contract: a value this library or the caller built.
    let _ = guarded(|| {
        unsafe { value_destruct(val) };
        Ok(())
    });
}

/// Loads `dest` with a deep copy of `src`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Value_xfer(
    dest: *mut pmix_value_t,
    src: *const pmix_value_t,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        unsafe {
            let v = value_from_c(src.as_ref().ok_or(Status::ERR_BAD_PARAM)?)?;
            let dest = dest.as_mut().ok_or(Status::ERR_BAD_PARAM)?;
            *dest = value_to_c(&v)?;
        }
        Ok(())
    })
}

/// Frees a data array's elements and memory, leaving it empty.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Data_array_destruct(d: *mut pmix_data_array_t) {
    let _ = guarded(|| {
        // SAFETY: the Standard's contract.
        unsafe { data_array_destruct(d) };
        Ok(())
    });
}

/// Loads `info` with `key` and a copy of the `type_` datum at `data` (as `PMIx_Value_load`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Info_load(
    info: *mut pmix_info_t,
    key: *const c_char,
    data: *const c_void,
    type_: pmix_data_type_t,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        unsafe {
            let info = info.as_mut().ok_or(Status::ERR_BAD_PARAM)?;
            let key = c_str(key)?.ok_or(Status::ERR_BAD_PARAM)?;
            Key::new(key).map_err(|_| Status::ERR_BAD_PARAM)?;
            fixed_from_str(key, &mut info.key)?;
            info.flags = 0;
            load(&mut info.value, data, type_)
        }
    })
}

/// Loads `dest` with the key, flags and a deep copy of the value of `src`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Info_xfer(
    dest: *mut pmix_info_t,
    src: *const pmix_info_t,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        unsafe {
            let src = src.as_ref().ok_or(Status::ERR_BAD_PARAM)?;
            let dest = dest.as_mut().ok_or(Status::ERR_BAD_PARAM)?;
            let key = fixed_str(&src.key)?;
            let v = value_from_c(&src.value)?;
            fixed_from_str(key, &mut dest.key)?;
            dest.flags = src.flags;
            dest.value = value_to_c(&v)?;
        }
        Ok(())
    })
}
