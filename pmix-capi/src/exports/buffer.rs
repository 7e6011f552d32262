//! Data buffers: `PMIx_Data_pack`, `PMIx_Data_unpack`, `PMIx_Data_load`, `PMIx_Data_unload`
//! (4.2's headers' `PMIX_DATA_BUFFER_LOAD`/`_UNLOAD` call these) and the `PMIx_Data_buffer_*`
//! functions (5.0's).
//! The bytes are OpenPMIx's (`pack`); a buffer's memory is the C allocator's,
//! so the headers' macros and `free` work on what `PMIx_Data_buffer_unload` hands out.

use core::ffi::{c_char, c_void};

use pmix_client::{DataType, Status};

use crate::convert::{
    buffer_append, buffer_consume, buffer_destruct, buffer_load, buffer_unload, buffer_unread,
    c_alloc, elements_from_c, elements_to_c,
};
use crate::ctypes::{
    pmix_byte_object_t, pmix_data_buffer_t, pmix_data_type_t, pmix_proc_t, pmix_status_t,
};
use crate::guard::{guarded, guarded_or};
use crate::pack;

/// Packs `num_vals` values of `type_` from `src` (a C array of the type's form: `char *` for
/// strings, `pmix_value_t` for `PMIX_VALUE`...) at the end of `buffer`, as libpmix does.
/// `target` is not read: libpmix packs the same bytes for every peer of 4.0 or later.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Data_pack(
    _target: *const pmix_proc_t,
    buffer: *mut pmix_data_buffer_t,
    src: *mut c_void,
    num_vals: i32,
    type_: pmix_data_type_t,
) -> pmix_status_t {
    guarded(|| {
        let n = usize::try_from(num_vals).map_err(|_| Status::ERR_BAD_PARAM)?;
        // SAFETY: the Standard's contract: a buffer, `n` values at `src`.
        unsafe {
            let b = buffer.as_mut().ok_or(Status::ERR_BAD_PARAM)?;
            let ty = DataType(type_);
            let values = elements_from_c(ty, src.cast(), n)?;
            buffer_append(b, &pack::pack(ty, &values)?)
        }
    })
}

/// Unpacks the next pack of `buffer`, up to `*max_num_values` values of `type_`, into `dest`
/// (room for as many of the type's C form), setting `*max_num_values` to how many. The
/// values' memory (strings, arrays...) is the caller's. The end of the buffer is
/// `PMIX_ERR_UNPACK_READ_PAST_END_OF_BUFFER`; a pack of more values than there is room for
/// fills the room and answers `PMIX_ERR_UNPACK_INADEQUATE_SPACE`, as libpmix does.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Data_unpack(
    _source: *const pmix_proc_t,
    buffer: *mut pmix_data_buffer_t,
    dest: *mut c_void,
    max_num_values: *mut i32,
    type_: pmix_data_type_t,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract: a buffer, a count, room for that many at `dest`.
        unsafe {
            let b = buffer.as_mut().ok_or(Status::ERR_BAD_PARAM)?;
            let max = max_num_values.as_mut().ok_or(Status::ERR_BAD_PARAM)?;
            let want = usize::try_from(*max).map_err(|_| Status::ERR_BAD_PARAM)?;
            let ty = DataType(type_);
            let got = pack::unpack(ty, buffer_unread(b)?, want)?;
            elements_to_c(ty, &got.values, dest.cast())?;
            buffer_consume(b, got.used)?;
            *max = i32::try_from(got.values.len()).map_err(|_| Status::ERR_BAD_PARAM)?;
            match got.status {
                Status::SUCCESS => Ok(()),
                other => Err(other),
            }
        }
    })
}

/// A new empty buffer, released with [`PMIx_Data_buffer_release`]; NULL without memory.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Data_buffer_create() -> *mut pmix_data_buffer_t {
    guarded_or(core::ptr::null_mut(), || {
        c_alloc::<pmix_data_buffer_t>(1).unwrap_or(core::ptr::null_mut())
    })
}

/// Frees a buffer made by [`PMIx_Data_buffer_create`] and its bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Data_buffer_release(b: *mut pmix_data_buffer_t) {
    guarded_or((), || {
        // SAFETY: the caller's buffer from PMIx_Data_buffer_create.
        unsafe {
            buffer_destruct(b);
            libc::free(b.cast());
        }
    })
}

/// Makes a buffer empty (for a buffer in the caller's memory).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Data_buffer_construct(b: *mut pmix_data_buffer_t) {
    // SAFETY: a non-NULL `b` is the caller's buffer, whatever it holds.
    if let Some(b) = unsafe { b.as_mut() } {
        *b = pmix_data_buffer_t {
            base_ptr: core::ptr::null_mut(),
            pack_ptr: core::ptr::null_mut(),
            unpack_ptr: core::ptr::null_mut(),
            bytes_allocated: 0,
            bytes_used: 0,
        };
    }
}

/// Frees a buffer's bytes, leaving it empty.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Data_buffer_destruct(b: *mut pmix_data_buffer_t) {
    // SAFETY: the caller's buffer.
    guarded_or((), || unsafe { buffer_destruct(b) })
}

/// Gives `bytes` (`sz` of them, from `malloc`; the buffer's from now on) to a buffer to unpack,
/// freeing what it held.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Data_buffer_load(
    b: *mut pmix_data_buffer_t,
    bytes: *mut c_char,
    sz: usize,
) {
    guarded_or((), || {
        // SAFETY: the caller's buffer and allocation.
        if let Some(b) = unsafe { b.as_mut() } {
            let _ = unsafe { buffer_load(b, bytes, sz) };
        }
    })
}

/// Hands the bytes of a buffer not unpacked yet to the caller (`*bytes`, to `free`; NULL when
/// none) and empties the buffer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Data_buffer_unload(
    b: *mut pmix_data_buffer_t,
    bytes: *mut *mut c_char,
    sz: *mut usize,
) {
    guarded_or((), || {
        // SAFETY: the caller's buffer and out-pointers.
        unsafe {
            let (Some(b), false, false) = (b.as_mut(), bytes.is_null(), sz.is_null()) else {
                return;
            };
            match buffer_unload(b) {
                Ok((p, n)) => {
                    bytes.write(p);
                    sz.write(n);
                }
                Err(_) => {
                    bytes.write(core::ptr::null_mut());
                    sz.write(0);
                }
            }
        }
    })
}

/// Gives the bytes of `src` (from `malloc`; the buffer's from now on, and `src` is emptied) to
/// `dest` to unpack, freeing what it held.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Data_load(
    dest: *mut pmix_data_buffer_t,
    src: *mut pmix_byte_object_t,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract: a buffer and a byte object.
        unsafe {
            let (b, bo) = (dest.as_mut(), src.as_mut());
            let (Some(b), Some(bo)) = (b, bo) else {
                return Err(Status::ERR_BAD_PARAM);
            };
            buffer_load(b, bo.bytes, bo.size)?;
            bo.bytes = core::ptr::null_mut();
            bo.size = 0;
        }
        Ok(())
    })
}

/// Hands the bytes of `src` not unpacked yet to `dest` (to `free`; NULL when none) and
/// empties the buffer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Data_unload(
    src: *mut pmix_data_buffer_t,
    dest: *mut pmix_byte_object_t,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract: a buffer and a byte object.
        unsafe {
            let (b, bo) = (src.as_mut(), dest.as_mut());
            let (Some(b), Some(bo)) = (b, bo) else {
                return Err(Status::ERR_BAD_PARAM);
            };
            let (p, n) = buffer_unload(b)?;
            bo.bytes = p;
            bo.size = n;
        }
        Ok(())
    })
}
