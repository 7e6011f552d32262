//! Creating, initialising and releasing the Standard's structures, the functions OpenPMIx 5's
//! headers call from their macros (4.2's headers do the same work inline):
//! `PMIx_{Info,Value,Proc,Pdata,Byte_object,Envar,Query,App}_create/free`,
//! `PMIx_{Info,Proc,Pdata,Value,Byte_object,Envar,Query,App}_construct`,
//! `PMIx_{Info,Proc,Pdata,Byte_object,Envar,Query,App}_destruct`, `PMIx_Byte_object_load`,
//! `PMIx_Envar_load`, `PMIx_Query_release`, `PMIx_Query_qualifiers_create`,
//! `PMIx_App_release`, `PMIx_App_info_create`, `PMIx_Data_array_create/free`. Arrays come from
//! the C allocator, zeroed, so C code may also `free` them; a `_free` of `n` elements frees
//! what each owns and then the array.

use core::ptr;

use pmix_client::types::{DataType, InfoFlags};

use core::ffi::c_char;

use crate::convert::{
    apps_destruct, argv_free, c_alloc, data_array_destruct, element_destruct, element_size,
    infos_free, undef_value, value_destruct,
};
use crate::ctypes::{
    pmix_app_t, pmix_byte_object_t, pmix_data_array_t, pmix_data_type_t, pmix_envar_t, pmix_info_t,
    pmix_pdata_t, pmix_proc_t, pmix_query_t, pmix_value_t,
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

/// Empties a process, as [`PMIx_Proc_construct`] (a process owns no memory).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Proc_destruct(p: *mut pmix_proc_t) {
    // SAFETY: the Standard's contract.
    unsafe { PMIx_Proc_construct(p) }
}

/// `n` zeroed elements of `T`; NULL for none or when memory runs out.
fn zeroed<T>(n: usize) -> *mut T {
    guarded_or(ptr::null_mut(), || c_alloc(n).unwrap_or(ptr::null_mut()))
}

/// Frees `n` elements at `p` of data type `ty` (what each owns, then the array).
///
/// # Safety
/// NULL, or an array from the C allocator of `n` well-formed elements of that type.
unsafe fn free_elements<T>(p: *mut T, n: usize, ty: DataType) {
    guarded_or((), || {
        if p.is_null() {
            return;
        }
        for k in 0..n {
            // SAFETY: the caller's promise.
            unsafe { element_destruct(ty, p.add(k).cast(), 0) };
        }
        // SAFETY: as above.
        unsafe { libc::free(p.cast()) };
    })
}

/// Frees what the element at `p` of data type `ty` owns and zeroes it (NULL: nothing).
///
/// # Safety
/// NULL or a well-formed element of that type.
unsafe fn destruct_element<T>(p: *mut T, ty: DataType) {
    guarded_or((), || {
        if !p.is_null() {
            // SAFETY: the caller's promise; zeroed is the empty element.
            unsafe {
                element_destruct(ty, p.cast(), 0);
                p.write_bytes(0, 1);
            }
        }
    })
}

/// `n` empty published data; NULL for none.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Pdata_create(n: usize) -> *mut pmix_pdata_t {
    zeroed(n)
}

/// Frees `n` published data from `PMIx_Pdata_create` and what their values own.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Pdata_free(p: *mut pmix_pdata_t, n: usize) {
    guarded_or((), || {
        if p.is_null() {
            return;
        }
        for k in 0..n {
            // SAFETY: the Standard's contract: `n` well-formed data from the C allocator.
            unsafe { value_destruct(&mut (*p.add(k)).value) };
        }
        // SAFETY: as above.
        unsafe { libc::free(p.cast()) };
    })
}

/// Empties a byte object (no bytes).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Byte_object_construct(b: *mut pmix_byte_object_t) {
    // SAFETY: the Standard's contract: NULL or the caller's; zeroed is empty.
    guarded_or((), || unsafe {
        if !b.is_null() {
            b.write_bytes(0, 1);
        }
    })
}

/// Frees a byte object's bytes and empties it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Byte_object_destruct(b: *mut pmix_byte_object_t) {
    // SAFETY: the Standard's contract: NULL or a byte object owning its bytes.
    unsafe { destruct_element(b, DataType::BYTE_OBJECT) }
}

/// `n` empty byte objects; NULL for none.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Byte_object_create(n: usize) -> *mut pmix_byte_object_t {
    zeroed(n)
}

/// Frees `n` byte objects from `PMIx_Byte_object_create` and their bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Byte_object_free(b: *mut pmix_byte_object_t, n: usize) {
    // SAFETY: the Standard's contract.
    unsafe { free_elements(b, n, DataType::BYTE_OBJECT) }
}

/// Points a byte object at the caller's `sz` bytes at `d` (not copied: the byte object owns
/// them from now on, as the Standard's macro has it).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Byte_object_load(
    b: *mut pmix_byte_object_t,
    d: *mut c_char,
    sz: usize,
) {
    guarded_or((), || {
        // SAFETY: the Standard's contract: NULL or the caller's byte object.
        if let Some(b) = unsafe { b.as_mut() } {
            b.bytes = d;
            b.size = if d.is_null() { 0 } else { sz };
        }
    })
}

/// Empties an environment variable directive.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Envar_construct(e: *mut pmix_envar_t) {
    // SAFETY: the Standard's contract: NULL or the caller's; zeroed is empty.
    guarded_or((), || unsafe {
        if !e.is_null() {
            e.write_bytes(0, 1);
        }
    })
}

/// Frees an environment variable directive's strings and empties it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Envar_destruct(e: *mut pmix_envar_t) {
    // SAFETY: the Standard's contract: NULL or a directive owning its strings.
    unsafe { destruct_element(e, DataType::ENVAR) }
}

/// `n` empty environment variable directives; NULL for none.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Envar_create(n: usize) -> *mut pmix_envar_t {
    zeroed(n)
}

/// Frees `n` directives from `PMIx_Envar_create` and their strings.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Envar_free(e: *mut pmix_envar_t, n: usize) {
    // SAFETY: the Standard's contract.
    unsafe { free_elements(e, n, DataType::ENVAR) }
}

/// Fills an environment variable directive with copies of `var` and `value` (each left
/// empty when NULL) and `separator`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Envar_load(
    e: *mut pmix_envar_t,
    var: *const c_char,
    value: *const c_char,
    separator: c_char,
) {
    guarded_or((), || {
        // SAFETY: the Standard's contract: NULL or the caller's directive, C strings or NULL.
        if let Some(e) = unsafe { e.as_mut() } {
            // SAFETY: as above; strdup of NULL is not called.
            unsafe {
                e.envar = if var.is_null() {
                    ptr::null_mut()
                } else {
                    libc::strdup(var)
                };
                e.value = if value.is_null() {
                    ptr::null_mut()
                } else {
                    libc::strdup(value)
                };
            }
            e.separator = separator;
        }
    })
}

/// Frees a query's keys and qualifiers and empties it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Query_destruct(q: *mut pmix_query_t) {
    guarded_or((), || {
        // SAFETY: the Standard's contract: NULL or a query owning its keys and qualifiers.
        if let Some(q) = unsafe { q.as_mut() } {
            // SAFETY: as above.
            unsafe {
                argv_free(q.keys);
                infos_free(q.qualifiers, q.nqual);
            }
            q.keys = ptr::null_mut();
            q.qualifiers = ptr::null_mut();
            q.nqual = 0;
        }
    })
}

/// `n` empty queries; NULL for none.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Query_create(n: usize) -> *mut pmix_query_t {
    zeroed(n)
}

/// Gives a query `n` empty qualifiers (its old ones freed).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Query_qualifiers_create(q: *mut pmix_query_t, n: usize) {
    guarded_or((), || {
        // SAFETY: the Standard's contract: NULL or a query owning its qualifiers.
        if let Some(q) = unsafe { q.as_mut() } {
            // SAFETY: as above.
            unsafe { infos_free(q.qualifiers, q.nqual) };
            q.qualifiers = c_alloc(n).unwrap_or(ptr::null_mut());
            q.nqual = if q.qualifiers.is_null() { 0 } else { n };
        }
    })
}

/// Frees `n` queries from `PMIx_Query_create` and what they own.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Query_free(q: *mut pmix_query_t, n: usize) {
    guarded_or((), || {
        if q.is_null() {
            return;
        }
        for k in 0..n {
            // SAFETY: the Standard's contract: `n` well-formed queries.
            unsafe { PMIx_Query_destruct(q.add(k)) };
        }
        // SAFETY: as above, from the C allocator.
        unsafe { libc::free(q.cast()) };
    })
}

/// Frees one query from `PMIx_Query_create` ([`PMIx_Query_free`] of 1).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Query_release(q: *mut pmix_query_t) {
    // SAFETY: the Standard's contract.
    unsafe { PMIx_Query_free(q, 1) }
}

/// Empties an application context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_App_construct(a: *mut pmix_app_t) {
    // SAFETY: the Standard's contract: NULL or the caller's; zeroed is empty.
    guarded_or((), || unsafe {
        if !a.is_null() {
            a.write_bytes(0, 1);
        }
    })
}

/// Frees what an application context owns and empties it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_App_destruct(a: *mut pmix_app_t) {
    // SAFETY: the Standard's contract: NULL or a context owning its members.
    guarded_or((), || unsafe { apps_destruct(a, 1) })
}

/// Frees one application context from `PMIx_App_create` and what it owns.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_App_release(a: *mut pmix_app_t) {
    // SAFETY: the Standard's contract.
    unsafe { super::dynamic::PMIx_App_free(a, 1) }
}

/// Gives an application context `n` empty infos (its old ones freed).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_App_info_create(a: *mut pmix_app_t, n: usize) {
    guarded_or((), || {
        // SAFETY: the Standard's contract: NULL or a context owning its infos.
        if let Some(a) = unsafe { a.as_mut() } {
            // SAFETY: as above.
            unsafe { infos_free(a.info, a.ninfo) };
            a.info = c_alloc(n).unwrap_or(ptr::null_mut());
            a.ninfo = if a.info.is_null() { 0 } else { n };
        }
    })
}
