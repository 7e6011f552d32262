//! Creating, initialising and releasing the Standard's structures, the functions OpenPMIx 5's
//! headers call from their macros (4.2's headers do the same work inline):
//! `PMIx_{Info,Value,Proc}_create/free`, `PMIx_{Info,Proc,Pdata,Value}_construct`,
//! `PMIx_{Info,Pdata}_destruct`, `PMIx_Info_qualifier`, `PMIx_Data_array_create/free`.
//! Arrays come from the C allocator, zeroed, so C code may also `free` them.

use core::ptr;

use pmix_client::types::{DataType, InfoFlags};

use crate::convert::{
    c_alloc, data_array_destruct, element_size, infos_free, undef_value, value_destruct,
};
use crate::ctypes::{
    pmix_data_array_t, pmix_data_type_t, pmix_info_t, pmix_pdata_t, pmix_proc_t, pmix_value_t,
};
use crate::guard::guarded_or;

/// `n` empty info entries; NULL for none or when memory runs out.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Info_create(n: usize) -> *mut pmix_info_t {
    guarded_or(ptr::null_mut(), || c_alloc(n).unwrap_or(ptr::null_mut()))
}

/// Frees `n` info entries from `PMIx_Info_create` and what their values own.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Info_free(p: *mut pmix_info_t, n: usize) {
    // SAFETY: the Standard's contract: an array from PMIx_Info_create of `n` entries.
    guarded_or((), || unsafe { infos_free(p, n) })
}

/// Empties an info entry (no key, no flags, `PMIX_UNDEF`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Info_construct(p: *mut pmix_info_t) {
    guarded_or((), || {
        // SAFETY: the Standard's contract: NULL or an entry the caller owns.
        if let Some(i) = unsafe { p.as_mut() } {
            i.key.fill(0);
            i.flags = 0;
            i.value = undef_value();
        }
    })
}

/// Frees what an info entry's value owns, unless the entry is marked persistent.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Info_destruct(p: *mut pmix_info_t) {
    guarded_or((), || {
        // SAFETY: the Standard's contract: NULL or a well-formed entry.
        if let Some(i) = unsafe { p.as_mut() } {
            if !InfoFlags(i.flags).contains(InfoFlags::PERSISTENT) {
                // SAFETY: as above.
                unsafe { value_destruct(&mut i.value) };
            }
        }
    })
}

/// Marks an info entry as a qualifier of the others.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Info_qualifier(p: *mut pmix_info_t) {
    guarded_or((), || {
        // SAFETY: the Standard's contract: NULL or an entry the caller owns.
        if let Some(i) = unsafe { p.as_mut() } {
            i.flags |= InfoFlags::QUALIFIER.0;
        }
    })
}

/// `n` empty values; NULL for none.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Value_create(n: usize) -> *mut pmix_value_t {
    guarded_or(ptr::null_mut(), || c_alloc(n).unwrap_or(ptr::null_mut()))
}

/// Frees `n` values from `PMIx_Value_create` and what they own.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Value_free(v: *mut pmix_value_t, n: usize) {
    guarded_or((), || {
        if v.is_null() {
            return;
        }
        // SAFETY: the Standard's contract: `n` well-formed values from the C allocator.
        unsafe {
            for k in 0..n {
                value_destruct(v.add(k));
            }
            libc::free(v.cast());
        }
    })
}

/// Empties a value (`PMIX_UNDEF`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Value_construct(v: *mut pmix_value_t) {
    // SAFETY: the Standard's contract: NULL or a value the caller owns.
    guarded_or((), || unsafe {
        if let Some(v) = v.as_mut() {
            *v = undef_value();
        }
    })
}

/// `n` zeroed processes; NULL for none.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Proc_create(n: usize) -> *mut pmix_proc_t {
    guarded_or(ptr::null_mut(), || c_alloc(n).unwrap_or(ptr::null_mut()))
}

/// Frees processes from `PMIx_Proc_create`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Proc_free(p: *mut pmix_proc_t, _n: usize) {
    // SAFETY: the Standard's contract: NULL or an array from the C allocator.
    guarded_or((), || unsafe { libc::free(p.cast()) })
}

/// Empties a process (empty namespace, rank 0).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Proc_construct(p: *mut pmix_proc_t) {
    guarded_or((), || {
        // SAFETY: the Standard's contract: NULL or a process the caller owns.
        if let Some(p) = unsafe { p.as_mut() } {
            p.nspace.fill(0);
            p.rank = 0;
        }
    })
}

/// Empties a published datum (`PMIX_UNDEF` value).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Pdata_construct(p: *mut pmix_pdata_t) {
    guarded_or((), || {
        // SAFETY: the Standard's contract: NULL or a datum the caller owns.
        if let Some(d) = unsafe { p.as_mut() } {
            d.proc_.nspace.fill(0);
            d.proc_.rank = 0;
            d.key.fill(0);
            d.value = undef_value();
        }
    })
}

/// Frees what a published datum's value owns.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Pdata_destruct(p: *mut pmix_pdata_t) {
    guarded_or((), || {
        // SAFETY: the Standard's contract: NULL or a well-formed datum.
        if let Some(d) = unsafe { p.as_mut() } {
            // SAFETY: as above.
            unsafe { value_destruct(&mut d.value) };
        }
    })
}

/// A new data array of `n` zeroed elements of `type_`; NULL for a type this library does not
/// convert or when memory runs out.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Data_array_create(
    n: usize,
    type_: pmix_data_type_t,
) -> *mut pmix_data_array_t {
    guarded_or(ptr::null_mut(), || {
        let Some(size) = element_size(DataType(type_)) else {
            return ptr::null_mut();
        };
        let Ok(d) = c_alloc::<pmix_data_array_t>(1) else {
            return ptr::null_mut();
        };
        let Some(array) = n.checked_mul(size).and_then(|b| c_alloc::<u8>(b).ok()) else {
            // SAFETY: from c_alloc.
            unsafe { libc::free(d.cast()) };
            return ptr::null_mut();
        };
        // SAFETY: `d` is one fresh array header.
        unsafe {
            d.write(pmix_data_array_t {
                type_,
                size: if array.is_null() { 0 } else { n },
                array: array.cast(),
            })
        };
        d
    })
}

/// Frees a data array from `PMIx_Data_array_create`, its elements and what they own.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Data_array_free(d: *mut pmix_data_array_t) {
    guarded_or((), || {
        // SAFETY: the Standard's contract: NULL or an array from PMIx_Data_array_create.
        unsafe {
            data_array_destruct(d);
            libc::free(d.cast());
        }
    })
}
