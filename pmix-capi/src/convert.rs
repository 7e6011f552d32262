//! The one place C memory is read, written, allocated and freed: between the Standard's C
//! types (`ctypes`) and `pmix_types`.
//!
//! Reading checks what can be checked: a NULL pointer with a nonzero count, a key or
//! namespace with no NUL inside its fixed array, a type code this library does not know, a
//! data array too large to address or nested deeper than [`MAX_DEPTH`], text that is not
//! UTF-8. Each is refused with a status (`PMIX_ERR_BAD_PARAM`, or `PMIX_ERR_NOT_SUPPORTED` for
//! a type of the Standard that is not converted: a cpuset or topology, which hold hwloc's
//! objects, and OpenPMIx's internal key/value and buffer), never read past. What cannot be checked is the
//! C caller's promise: that a non-NULL pointer points at as many objects as its count says,
//! and that a `char *` ends in a NUL.
//!
//! Writing allocates with the C allocator (`calloc`), because the C caller frees what it
//! gets with `free` (the headers' `PMIX_VALUE_RELEASE`, `PMIX_PROC_FREE`...). A write that
//! fails half-way frees what it had allocated.
//!
//! Every data type has one *element form*: its C object as it lies in a `pmix_data_array_t`.
//! A `pmix_value_t` holds most types in that form inside its union, and a few (a proc, a
//! namespace, a proc info, a data array, an info, a registered attribute, and the structured
//! types of `structured`) through a pointer to it; [`held_by_pointer`] says which. So one
//! reader, one writer and one destructor per type serve values and arrays alike.
//!
//! A NULL `char *` of type `PMIX_STRING` reads as `Value::NullString` and writes back as NULL;
//! `""` stays `""`.

use core::ffi::{CStr, c_char, c_void};
use core::mem::size_of;
use core::ptr;

use pmix_types::{
    AllocDirective, DataArray, DataRange, DataType, Envar, Info, InfoFlags, IofChannel, JobState,
    Key, LinkState, Locality, Nspace, Persistence, Proc, ProcInfo, ProcState, Rank, RegAttr, Scope,
    Status, Timeval, Value,
};

use pmix_types::{App, Query};

use crate::ctypes::{
    MAX_KEYLEN, pmix_app_t, pmix_byte_object_t, pmix_data_array_t, pmix_data_buffer_t,
    pmix_envar_t, pmix_info_t, pmix_key_t, pmix_nspace_t, pmix_pdata_t, pmix_proc_info_t,
    pmix_proc_t, pmix_query_t, pmix_regattr_t, pmix_value_t, timeval,
};

mod structured;

/// How deeply data arrays, infos and values may nest inside each other.
pub(crate) const MAX_DEPTH: usize = 16;
/// The most entries read from a NULL-terminated `char **` list.
pub(crate) const MAX_ARGV: usize = 1 << 20;

type Result<T> = core::result::Result<T, Status>;

const BAD: Status = Status::ERR_BAD_PARAM;

/// The status for a type code this library cannot convert: a type of the Standard not
/// converted (a topology, a cpuset...) is not supported; any other number is a bad parameter.
fn unconvertible(ty: DataType) -> Status {
    if ty.name().is_some() {
        Status::ERR_NOT_SUPPORTED
    } else {
        BAD
    }
}

/// The size of a type's element form, for the types this library converts.
pub(crate) fn element_size(ty: DataType) -> Option<usize> {
    Some(match ty {
        DataType::BOOL
        | DataType::BYTE
        | DataType::INT8
        | DataType::UINT8
        | DataType::PERSIST
        | DataType::SCOPE
        | DataType::DATA_RANGE
        | DataType::PROC_STATE
        | DataType::ALLOC_DIRECTIVE
        | DataType::JOB_STATE
        | DataType::LINK_STATE => 1,
        DataType::INT16 | DataType::UINT16 | DataType::DATA_TYPE => 2,
        DataType::IOF_CHANNEL | DataType::LOCTYPE => 2,
        DataType::INT
        | DataType::INT32
        | DataType::UINT
        | DataType::UINT32
        | DataType::PID
        | DataType::STATUS
        | DataType::PROC_RANK
        | DataType::INFO_DIRECTIVES
        | DataType::FLOAT => 4,
        DataType::SIZE | DataType::INT64 | DataType::UINT64 | DataType::TIME | DataType::DOUBLE => {
            8
        }
        DataType::TIMEVAL => size_of::<timeval>(),
        DataType::STRING => size_of::<*mut c_char>(),
        DataType::PROC => size_of::<pmix_proc_t>(),
        DataType::PROC_NSPACE => size_of::<pmix_nspace_t>(),
        DataType::BYTE_OBJECT
        | DataType::REGEX
        | DataType::COMPRESSED_STRING
        | DataType::COMPRESSED_BYTE_OBJECT => size_of::<pmix_byte_object_t>(),
        DataType::PROC_INFO => size_of::<pmix_proc_info_t>(),
        DataType::DATA_ARRAY => size_of::<pmix_data_array_t>(),
        DataType::INFO => size_of::<pmix_info_t>(),
        DataType::VALUE => size_of::<pmix_value_t>(),
        DataType::ENVAR => size_of::<pmix_envar_t>(),
        DataType::REGATTR => size_of::<pmix_regattr_t>(),
        _ => return structured::element_size(ty),
    })
}

/// True for the types a `pmix_value_t` holds through a pointer to their element form.
pub(crate) fn held_by_pointer(ty: DataType) -> bool {
    matches!(
        ty,
        DataType::PROC
            | DataType::PROC_NSPACE
            | DataType::PROC_INFO
            | DataType::DATA_ARRAY
            | DataType::INFO
            | DataType::REGATTR
    ) || structured::held_by_pointer(ty)
}

// ---- reading -------------------------------------------------------------------------------

/// The text before the first NUL of a fixed array; refused when there is no NUL in it or the
/// text is not UTF-8.
pub(crate) fn fixed_str(bytes: &[c_char]) -> Result<&str> {
    let len = bytes.iter().position(|&c| c == 0).ok_or(BAD)?;
    // SAFETY: c_char and u8 have one size and alignment; `len` is within the slice.
    let raw = unsafe { core::slice::from_raw_parts(bytes.as_ptr().cast::<u8>(), len) };
    core::str::from_utf8(raw).map_err(|_| BAD)
}

/// The key in a `pmix_key_t`.
pub(crate) fn key_from_c(key: &pmix_key_t) -> Result<Key> {
    Key::new(fixed_str(key)?).map_err(|_| BAD)
}

/// The namespace in a `pmix_nspace_t`.
pub(crate) fn nspace_from_c(ns: &pmix_nspace_t) -> Result<Nspace> {
    Nspace::new(fixed_str(ns)?).map_err(|_| BAD)
}

/// The process in a `pmix_proc_t`.
pub(crate) fn proc_from_c(p: &pmix_proc_t) -> Result<Proc> {
    Ok(Proc::new(nspace_from_c(&p.nspace)?, Rank(p.rank)))
}

/// The text of a C string; `None` for NULL.
///
/// # Safety
/// A non-NULL `s` points at a NUL-terminated string.
pub(crate) unsafe fn c_str<'a>(s: *const c_char) -> Result<Option<&'a str>> {
    if s.is_null() {
        return Ok(None);
    }
    // SAFETY: the caller's promise.
    let text = unsafe { CStr::from_ptr(s) };
    text.to_str().map(Some).map_err(|_| BAD)
}

/// The text of a C string that must be there.
///
/// # Safety
/// As [`c_str`].
pub(crate) unsafe fn required_str<'a>(s: *const c_char) -> Result<&'a str> {
    // SAFETY: the caller's promise.
    unsafe { c_str(s) }?.ok_or(BAD)
}

/// `n` objects at `p` as a slice: empty when `n` is 0 (whatever `p`), refused when `p` is NULL
/// with a nonzero `n` or `n` objects could not fit in memory.
///
/// # Safety
/// A non-NULL `p` points at `n` initialised objects that outlive `'a`.
pub(crate) unsafe fn slice_of<'a, T>(p: *const T, n: usize) -> Result<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null()
        || n.checked_mul(size_of::<T>().max(1))
            .is_none_or(|b| b > isize::MAX as usize)
    {
        return Err(BAD);
    }
    // SAFETY: non-NULL, size checked, the caller's promise for the rest.
    Ok(unsafe { core::slice::from_raw_parts(p, n) })
}

/// The processes of a `pmix_proc_t` array.
///
/// # Safety
/// As [`slice_of`].
pub(crate) unsafe fn procs_from_c(p: *const pmix_proc_t, n: usize) -> Result<Vec<Proc>> {
    // SAFETY: the caller's promise.
    unsafe { slice_of(p, n) }?.iter().map(proc_from_c).collect()
}

/// The entries of a `pmix_info_t` array.
///
/// # Safety
/// As [`slice_of`], and every value in the array is well formed as [`value_from_c`] says.
pub(crate) unsafe fn infos_from_c(p: *const pmix_info_t, n: usize) -> Result<Vec<Info>> {
    // SAFETY: the caller's promise.
    let infos = unsafe { slice_of(p, n) }?;
    // SAFETY: the caller's promise.
    infos.iter().map(|i| unsafe { info_from_c(i, 0) }).collect()
}

/// One `pmix_info_t`.
///
/// # Safety
/// As [`value_from_c`].
pub(crate) unsafe fn info_from_c(i: &pmix_info_t, depth: usize) -> Result<Info> {
    Ok(Info {
        key: key_from_c(&i.key)?,
        // SAFETY: the caller's promise.
        value: unsafe { value_at_depth(&i.value, depth) }?,
        flags: InfoFlags(i.flags),
    })
}

/// The strings of a NULL-terminated `char *` list (NULL itself is an empty list), at most
/// [`MAX_ARGV`] of them.
///
/// # Safety
/// A non-NULL `argv` points at a NULL-terminated array of NUL-terminated strings.
pub(crate) unsafe fn argv_from_c(argv: *const *mut c_char) -> Result<Vec<String>> {
    let mut out = Vec::new();
    if argv.is_null() {
        return Ok(out);
    }
    for n in 0..MAX_ARGV {
        // SAFETY: the array goes on until its NULL, which has not come yet.
        let s = unsafe { argv.add(n).read() };
        // SAFETY: the caller's promise.
        match unsafe { c_str(s) }? {
            Some(s) => out.push(s.to_owned()),
            None => return Ok(out),
        }
    }
    Err(BAD)
}

/// The value in a `pmix_value_t`.
///
/// # Safety
/// The value's pointers (its string, its byte object's bytes, its proc, its data array and
/// what those point at) point at what its type and counts say, or are NULL.
pub(crate) unsafe fn value_from_c(v: &pmix_value_t) -> Result<Value> {
    // SAFETY: the caller's promise.
    unsafe { value_at_depth(v, 0) }
}

unsafe fn value_at_depth(v: &pmix_value_t, depth: usize) -> Result<Value> {
    let ty = DataType(v.type_);
    if ty == DataType::UNDEF {
        return Ok(Value::Undef);
    }
    if depth > MAX_DEPTH {
        return Err(BAD);
    }
    if element_size(ty).is_none() {
        return Err(unconvertible(ty));
    }
    let at: *const u8 = if held_by_pointer(ty) {
        // SAFETY: every pointer member of the union has the same representation.
        let p = unsafe { v.data.ptr };
        if p.is_null() {
            return Err(BAD);
        }
        p.cast()
    } else {
        ptr::from_ref(&v.data).cast()
    };
    // SAFETY: `at` is the element form of `ty` (inline, or the pointee), per the caller.
    unsafe { element_from_c(ty, at, depth) }
}

/// Reads `T` at `at`, which need not be aligned.
///
/// # Safety
/// `at` points at `size_of::<T>()` readable bytes holding a valid `T`.
unsafe fn read<T: Copy>(at: *const u8) -> T {
    // SAFETY: the caller's promise.
    unsafe { at.cast::<T>().read_unaligned() }
}

/// The bytes of a byte object.
///
/// # Safety
/// As [`slice_of`] for its bytes.
unsafe fn bytes_from_c(bo: &pmix_byte_object_t) -> Result<Vec<u8>> {
    // SAFETY: the caller's promise.
    Ok(unsafe { slice_of(bo.bytes.cast::<u8>().cast_const(), bo.size) }?.to_vec())
}

/// An owned string from a C string that must be there.
///
/// # Safety
/// As [`c_str`].
unsafe fn owned(s: *const c_char) -> Result<String> {
    // SAFETY: the caller's promise.
    unsafe { required_str(s) }.map(str::to_owned)
}

/// The value of type `ty` whose element form is at `at`.
///
/// # Safety
/// `at` points at the element form of `ty`, well formed as [`value_from_c`] says.
pub(crate) unsafe fn element_from_c(ty: DataType, at: *const u8, depth: usize) -> Result<Value> {
    if depth > MAX_DEPTH {
        return Err(BAD);
    }
    // SAFETY (for every read below): `at` holds the element form of `ty`, whose C type each
    // arm reads; bools are read as bytes, so any byte is a valid read.
    unsafe {
        Ok(match ty {
            DataType::BOOL => Value::Bool(read::<u8>(at) != 0),
            DataType::BYTE => Value::Byte(read(at)),
            // A NULL string is kept apart from "" (`Value::NullString`), so it goes back NULL.
            DataType::STRING => match c_str(read(at))? {
                Some(s) => Value::String(s.to_owned()),
                None => Value::NullString,
            },
            DataType::SIZE => Value::Size(read::<usize>(at) as u64),
            DataType::PID => Value::Pid(read::<libc::pid_t>(at) as u32),
            DataType::INT => Value::Int(read(at)),
            DataType::INT8 => Value::Int8(read(at)),
            DataType::INT16 => Value::Int16(read(at)),
            DataType::INT32 => Value::Int32(read(at)),
            DataType::INT64 => Value::Int64(read(at)),
            DataType::UINT => Value::Uint(read(at)),
            DataType::UINT8 => Value::Uint8(read(at)),
            DataType::UINT16 => Value::Uint16(read(at)),
            DataType::UINT32 => Value::Uint32(read(at)),
            DataType::UINT64 => Value::Uint64(read(at)),
            DataType::FLOAT => Value::Float(read(at)),
            DataType::DOUBLE => Value::Double(read(at)),
            DataType::TIMEVAL => {
                let tv: timeval = read(at);
                Value::Timeval(Timeval {
                    sec: tv.tv_sec,
                    usec: tv.tv_usec,
                })
            }
            DataType::TIME => Value::Time(read::<libc::time_t>(at)),
            DataType::STATUS => Value::Status(Status(read(at))),
            DataType::PROC_RANK => Value::Rank(Rank(read(at))),
            DataType::PROC => Value::Proc(proc_from_c(&read::<pmix_proc_t>(at))?),
            DataType::PROC_NSPACE => Value::Nspace(nspace_from_c(&read::<pmix_nspace_t>(at))?),
            DataType::BYTE_OBJECT => Value::ByteObject(bytes_from_c(&read(at))?),
            DataType::REGEX => Value::Regex(bytes_from_c(&read(at))?),
            DataType::COMPRESSED_STRING => Value::CompressedString(bytes_from_c(&read(at))?),
            DataType::COMPRESSED_BYTE_OBJECT => Value::CompressedBytes(bytes_from_c(&read(at))?),
            DataType::PERSIST => Value::Persistence(Persistence(read(at))),
            DataType::SCOPE => Value::Scope(Scope(read(at))),
            DataType::DATA_RANGE => Value::DataRange(DataRange(read(at))),
            DataType::INFO_DIRECTIVES => Value::InfoDirectives(InfoFlags(read(at))),
            DataType::DATA_TYPE => Value::DataType(DataType(read(at))),
            DataType::PROC_STATE => Value::ProcState(ProcState(read(at))),
            DataType::ALLOC_DIRECTIVE => Value::AllocDirective(AllocDirective(read(at))),
            DataType::IOF_CHANNEL => Value::IofChannel(IofChannel(read(at))),
            DataType::JOB_STATE => Value::JobState(JobState(read(at))),
            DataType::LINK_STATE => Value::LinkState(LinkState(read(at))),
            DataType::LOCTYPE => Value::Locality(Locality(read(at))),
            DataType::PROC_INFO => {
                let pi: pmix_proc_info_t = read(at);
                Value::ProcInfo(Box::new(ProcInfo {
                    proc: proc_from_c(&pi.proc_)?,
                    hostname: owned(pi.hostname)?,
                    executable_name: owned(pi.executable_name)?,
                    pid: pi.pid as u32,
                    exit_code: pi.exit_code,
                    state: ProcState(pi.state),
                }))
            }
            DataType::ENVAR => {
                let e: pmix_envar_t = read(at);
                Value::Envar(Envar {
                    name: owned(e.envar)?,
                    value: owned(e.value)?,
                    separator: e.separator as u8,
                })
            }
            DataType::REGATTR => {
                let r: pmix_regattr_t = read(at);
                Value::RegAttr(Box::new(RegAttr {
                    name: owned(r.name)?,
                    key: fixed_str(&r.string)?.to_owned(),
                    ty: DataType(r.type_),
                    description: argv_from_c(r.description)?,
                }))
            }
            DataType::INFO => {
                Value::Info(Box::new(info_from_c(&read::<pmix_info_t>(at), depth + 1)?))
            }
            DataType::VALUE => value_at_depth(&read::<pmix_value_t>(at), depth + 1)?,
            DataType::DATA_ARRAY => Value::DataArray(Box::new(array_from_c(&read(at), depth + 1)?)),
            _ => structured::from_c(ty, at, depth)?,
        })
    }
}

/// The elements of a `pmix_data_array_t`.
///
/// # Safety
/// As [`value_from_c`]: a non-NULL `array` holds `size` elements of the declared type.
unsafe fn array_from_c(d: &pmix_data_array_t, depth: usize) -> Result<DataArray> {
    let ty = DataType(d.type_);
    let size = element_size(ty).ok_or_else(|| unconvertible(ty))?;
    // SAFETY: checks NULL and the total size; the caller's promise for the rest.
    let bytes = unsafe {
        slice_of(
            d.array.cast::<u8>().cast_const(),
            d.size.saturating_mul(size),
        )
    }?;
    if d.size > 0 && bytes.len() / size != d.size {
        return Err(BAD);
    }
    let items = bytes
        .chunks_exact(size)
        // SAFETY: each chunk is one element of `ty`, per the caller.
        .map(|e| unsafe { element_from_c(ty, e.as_ptr(), depth) })
        .collect::<Result<Vec<_>>>()?;
    DataArray::new(ty, items).map_err(|_| BAD)
}

// ---- writing -------------------------------------------------------------------------------

/// `n` zeroed objects from the C allocator; NULL for none.
pub(crate) fn c_alloc<T>(n: usize) -> Result<*mut T> {
    if n == 0 {
        return Ok(ptr::null_mut());
    }
    // SAFETY: calloc checks n * size for overflow and returns NULL when it cannot.
    let p = unsafe { libc::calloc(n, size_of::<T>().max(1)) }.cast::<T>();
    if p.is_null() {
        Err(Status::ERR_NOMEM)
    } else {
        Ok(p)
    }
}

/// A copy of `s` as a C string from the C allocator; refused when `s` holds a NUL.
pub(crate) fn c_string(s: &str) -> Result<*mut c_char> {
    if s.as_bytes().contains(&0) {
        return Err(BAD);
    }
    let p = c_alloc::<c_char>(s.len() + 1)?;
    // SAFETY: `p` has room for the text and the NUL calloc left after it.
    unsafe { ptr::copy_nonoverlapping(s.as_ptr(), p.cast::<u8>(), s.len()) };
    Ok(p)
}

/// Copies `s` into a fixed array, NUL-terminated; refused when it does not fit or holds a NUL.
pub(crate) fn fixed_from_str(s: &str, out: &mut [c_char]) -> Result<()> {
    let b = s.as_bytes();
    if b.len() >= out.len() || b.contains(&0) {
        return Err(BAD);
    }
    out.fill(0);
    for (o, &c) in out.iter_mut().zip(b) {
        *o = c as c_char;
    }
    Ok(())
}

/// A `pmix_proc_t` naming `p`.
pub(crate) fn proc_to_c(p: &Proc) -> pmix_proc_t {
    let mut out = pmix_proc_t {
        nspace: [0; crate::ctypes::MAX_NSLEN + 1],
        rank: p.rank.0,
    };
    // A checked namespace always fits and holds no NUL.
    let _ = fixed_from_str(p.nspace.as_str(), &mut out.nspace);
    out
}

/// A new array of `procs` from the C allocator (`PMIX_PROC_FREE` frees it); NULL for none.
pub(crate) fn procs_to_c(procs: &[Proc]) -> Result<*mut pmix_proc_t> {
    let out = c_alloc::<pmix_proc_t>(procs.len())?;
    for (n, p) in procs.iter().enumerate() {
        // SAFETY: `out` has room for every process.
        unsafe { out.add(n).write(proc_to_c(p)) };
    }
    Ok(out)
}

/// A zeroed `pmix_value_t` of type `PMIX_UNDEF`.
pub(crate) fn undef_value() -> pmix_value_t {
    pmix_value_t {
        type_: DataType::UNDEF.0,
        data: crate::ctypes::pmix_value_data { uint64: 0 },
    }
}

/// `v` as a `pmix_value_t` whose memory the C caller owns (and frees with
/// `PMIx_Value_destruct`).
pub(crate) fn value_to_c(v: &Value) -> Result<pmix_value_t> {
    let mut out = undef_value();
    // SAFETY: `out` is a zeroed value of type UNDEF, which write_value fills.
    match unsafe { write_value(v, &mut out, 0) } {
        Ok(()) => Ok(out),
        Err(e) => {
            // SAFETY: what write_value left is well formed (zeroed where it stopped).
            unsafe { value_destruct(&mut out) };
            Err(e)
        }
    }
}

/// Fills `out` (a zeroed `PMIX_UNDEF` value) with `v`. On failure `out` is still well formed,
/// for [`value_destruct`] to free what was allocated.
///
/// # Safety
/// `out` is zeroed.
unsafe fn write_value(v: &Value, out: &mut pmix_value_t, depth: usize) -> Result<()> {
    let ty = v.data_type();
    if ty == DataType::UNDEF {
        return Ok(());
    }
    if depth > MAX_DEPTH {
        return Err(BAD);
    }
    let size = element_size(ty).ok_or_else(|| unconvertible(ty))?;
    out.type_ = ty.0;
    if held_by_pointer(ty) {
        let p = c_alloc::<u8>(size)?;
        out.data.ptr = p.cast();
        // SAFETY: `p` is `size` zeroed bytes, the element form's size.
        unsafe { element_to_c(v, p, depth) }
    } else {
        // SAFETY: the union is at least as large as every inline element form, and zeroed.
        unsafe { element_to_c(v, ptr::from_mut(&mut out.data).cast(), depth) }
    }
}

/// Writes `T` at `at`, which need not be aligned.
///
/// # Safety
/// `at` points at `size_of::<T>()` writable bytes.
unsafe fn write<T>(at: *mut u8, x: T) {
    // SAFETY: the caller's promise.
    unsafe { at.cast::<T>().write_unaligned(x) }
}

/// A byte object holding a copy of `b`.
fn c_bytes(b: &[u8]) -> Result<pmix_byte_object_t> {
    let p = c_alloc::<u8>(b.len())?;
    if !b.is_empty() {
        // SAFETY: `p` has room for `b`.
        unsafe { ptr::copy_nonoverlapping(b.as_ptr(), p, b.len()) };
    }
    Ok(pmix_byte_object_t {
        bytes: p.cast(),
        size: b.len(),
    })
}

/// Writes the element form of `v` at `at`, whose zeroed bytes are as many as its type's.
/// Each allocation is stored as soon as it is made, so a failure leaves a well-formed element
/// for [`element_destruct`].
///
/// # Safety
/// `at` points at `element_size(v.data_type())` zeroed writable bytes.
unsafe fn element_to_c(v: &Value, at: *mut u8, depth: usize) -> Result<()> {
    if depth > MAX_DEPTH {
        return Err(BAD);
    }
    // SAFETY (for every write below): `at` has room for the element form of v's type, which
    // each arm writes.
    unsafe {
        match v {
            Value::Undef => return Err(BAD),
            Value::Bool(b) => write(at, u8::from(*b)),
            Value::Byte(x) | Value::Uint8(x) => write(at, *x),
            Value::String(s) => write(at, c_string(s)?),
            Value::NullString => write(at, ptr::null_mut::<c_char>()),
            Value::Size(x) => write(at, usize::try_from(*x).map_err(|_| BAD)?),
            Value::Pid(x) => write(at, *x as libc::pid_t),
            Value::Int(x) | Value::Int32(x) => write(at, *x),
            Value::Int8(x) => write(at, *x),
            Value::Int16(x) => write(at, *x),
            Value::Int64(x) | Value::Time(x) => write(at, *x),
            Value::Uint(x) | Value::Uint32(x) => write(at, *x),
            Value::Uint16(x) => write(at, *x),
            Value::Uint64(x) => write(at, *x),
            Value::Float(x) => write(at, *x),
            Value::Double(x) => write(at, *x),
            Value::Timeval(t) => write(
                at,
                timeval {
                    tv_sec: t.sec,
                    tv_usec: t.usec,
                },
            ),
            Value::Status(s) => write(at, s.0),
            Value::Rank(r) => write(at, r.0),
            Value::Proc(p) => write(at, proc_to_c(p)),
            Value::Nspace(n) => {
                let mut ns: pmix_nspace_t = [0; crate::ctypes::MAX_NSLEN + 1];
                fixed_from_str(n.as_str(), &mut ns)?;
                write(at, ns)
            }
            Value::ByteObject(b)
            | Value::Regex(b)
            | Value::CompressedString(b)
            | Value::CompressedBytes(b) => write(at, c_bytes(b)?),
            Value::Persistence(x) => write(at, x.0),
            Value::Scope(x) => write(at, x.0),
            Value::DataRange(x) => write(at, x.0),
            Value::InfoDirectives(x) => write(at, x.0),
            Value::DataType(x) => write(at, x.0),
            Value::ProcState(x) => write(at, x.0),
            Value::AllocDirective(x) => write(at, x.0),
            Value::IofChannel(x) => write(at, x.0),
            Value::JobState(x) => write(at, x.0),
            Value::LinkState(x) => write(at, x.0),
            Value::Locality(x) => write(at, x.0),
            Value::ProcInfo(pi) => {
                let out = &mut *at.cast::<pmix_proc_info_t>();
                out.proc_ = proc_to_c(&pi.proc);
                out.pid = pi.pid as libc::pid_t;
                out.exit_code = pi.exit_code;
                out.state = pi.state.0;
                out.hostname = c_string(&pi.hostname)?;
                out.executable_name = c_string(&pi.executable_name)?;
            }
            Value::Envar(e) => {
                let out = &mut *at.cast::<pmix_envar_t>();
                out.separator = e.separator as c_char;
                out.envar = c_string(&e.name)?;
                out.value = c_string(&e.value)?;
            }
            Value::RegAttr(r) => {
                let out = &mut *at.cast::<pmix_regattr_t>();
                out.type_ = r.ty.0;
                fixed_from_str(&r.key, &mut out.string)?;
                out.name = c_string(&r.name)?;
                let lines: Vec<&str> = r.description.iter().map(String::as_str).collect();
                out.description = argv_to_c(&lines)?;
            }
            Value::Info(i) => info_to_c(i, &mut *at.cast::<pmix_info_t>(), depth + 1)?,
            Value::DataArray(a) => array_to_c(a, &mut *at.cast::<pmix_data_array_t>(), depth + 1)?,
            _ => structured::to_c(v, at, depth)?,
        }
    }
    Ok(())
}

/// Fills `out` (zeroed) with `i`; on failure `out` is well formed for destruction.
///
/// # Safety
/// `out` is zeroed.
unsafe fn info_to_c(i: &Info, out: &mut pmix_info_t, depth: usize) -> Result<()> {
    fixed_from_str(i.key.as_str(), &mut out.key)?;
    out.flags = i.flags.0;
    // SAFETY: out.value is zeroed.
    unsafe { write_value(&i.value, &mut out.value, depth) }
}

/// Fills `out` (zeroed) with `a`; on failure `out` is well formed for destruction.
///
/// # Safety
/// `out` is zeroed.
unsafe fn array_to_c(a: &DataArray, out: &mut pmix_data_array_t, depth: usize) -> Result<()> {
    let ty = a.elem_type();
    let size = element_size(ty).ok_or_else(|| unconvertible(ty))?;
    out.type_ = ty.0;
    let items = a.items();
    let p = c_alloc::<u8>(items.len().checked_mul(size).ok_or(BAD)?)?;
    out.array = p.cast();
    out.size = items.len();
    for (n, item) in items.iter().enumerate() {
        // An array of VALUE holds pmix_value_t elements whatever each item's type.
        // SAFETY: element `n` of `p` is `size` zeroed bytes.
        unsafe {
            let at = p.add(n * size);
            if ty == DataType::VALUE {
                write_value(item, &mut *at.cast::<pmix_value_t>(), depth + 1)?;
            } else {
                element_to_c(item, at, depth + 1)?;
            }
        }
    }
    Ok(())
}

/// `infos` as a `pmix_info_t` array from the C allocator (NULL when empty), which the C side
/// frees with [`infos_free`].
pub(crate) fn infos_to_c(infos: &[Info]) -> Result<*mut pmix_info_t> {
    let p = c_alloc::<pmix_info_t>(infos.len())?;
    for (n, i) in infos.iter().enumerate() {
        // SAFETY: element `n` of `p` is zeroed.
        if let Err(e) = unsafe { info_to_c(i, &mut *p.add(n), 0) } {
            // SAFETY: every element is well formed: filled, half filled or zeroed.
            unsafe { infos_free(p, infos.len()) };
            return Err(e);
        }
    }
    Ok(p)
}

/// Writes a new info array holding `infos` to `*results` and its length to `*nresults` (NULL
/// and 0 for none), for the caller to free.
///
/// # Safety
/// `results` and `nresults` are valid for writes.
pub(crate) unsafe fn infos_out(
    infos: &[Info],
    results: *mut *mut pmix_info_t,
    nresults: *mut usize,
) -> Result<()> {
    let p = infos_to_c(infos)?;
    // SAFETY: the caller's promise.
    unsafe {
        results.write(p);
        nresults.write(infos.len());
    }
    Ok(())
}

/// A new array of published data, one per `(publisher, key, value)`, for [`pdata_free`].
pub(crate) fn pdata_to_c(found: &[(Proc, Key, Value)]) -> Result<*mut pmix_pdata_t> {
    let p = c_alloc::<pmix_pdata_t>(found.len())?;
    for (n, (publisher, key, value)) in found.iter().enumerate() {
        let made = value_to_c(value).and_then(|v| {
            let mut k: pmix_key_t = [0; MAX_KEYLEN + 1];
            fixed_from_str(key.as_str(), &mut k)?;
            Ok((k, v))
        });
        match made {
            // SAFETY: element `n` of `p` is zeroed and ours to fill.
            Ok((key, value)) => unsafe {
                p.add(n).write(pmix_pdata_t {
                    proc_: proc_to_c(publisher),
                    key,
                    value,
                })
            },
            Err(e) => {
                // SAFETY: every element is filled or zeroed.
                unsafe { pdata_free(p, found.len()) };
                return Err(e);
            }
        }
    }
    Ok(p)
}

/// Frees an array of published data made by [`pdata_to_c`].
///
/// # Safety
/// A non-NULL `p` is a pdata array from the C allocator with `n` well-formed entries.
pub(crate) unsafe fn pdata_free(p: *mut pmix_pdata_t, n: usize) {
    if p.is_null() {
        return;
    }
    for k in 0..n {
        // SAFETY: the caller's promise.
        unsafe { value_destruct(&mut (*p.add(k)).value) };
    }
    // SAFETY: the caller's promise.
    unsafe { libc::free(p.cast()) };
}

/// Fills `out` with an array of `PMIX_INFO` holding `infos`, whose memory the C caller owns.
pub(crate) fn info_array_to_c(infos: Vec<Info>, out: &mut pmix_data_array_t) -> Result<()> {
    let mut filled = pmix_data_array_t {
        type_: DataType::INFO.0,
        size: 0,
        array: ptr::null_mut(),
    };
    // SAFETY: `filled` is empty; on failure it is well formed for destruction.
    match unsafe { array_to_c(&DataArray::from_infos(infos), &mut filled, 0) } {
        Ok(()) => {
            *out = filled;
            Ok(())
        }
        Err(e) => {
            // SAFETY: as above.
            unsafe { data_array_destruct(&mut filled) };
            Err(e)
        }
    }
}

/// Appends a copy of `arg` to the NULL-terminated `char **` at `*argv` (NULL: a new one),
/// growing it with the C allocator.
///
/// # Safety
/// `*argv` is NULL or a NULL-terminated array from the C allocator.
pub(crate) unsafe fn argv_append(argv: &mut *mut *mut c_char, arg: &str) -> Result<()> {
    let mut n = 0;
    if !argv.is_null() {
        // SAFETY: the caller's promise; the loop ends at the NULL.
        while !unsafe { *argv.add(n) }.is_null() && n < MAX_ARGV {
            n += 1;
        }
    }
    let copy = c_string(arg)?;
    // SAFETY: realloc of the caller's array (or NULL) to n + 2 slots.
    let grown = unsafe { libc::realloc(argv.cast(), (n + 2) * size_of::<*mut c_char>()) }
        .cast::<*mut c_char>();
    if grown.is_null() {
        // SAFETY: from c_string.
        unsafe { libc::free(copy.cast()) };
        return Err(Status::ERR_NOMEM);
    }
    // SAFETY: `grown` has n + 2 slots.
    unsafe {
        *grown.add(n) = copy;
        *grown.add(n + 1) = ptr::null_mut();
    }
    *argv = grown;
    Ok(())
}

/// `strings` as a NULL-terminated `char **` from the C allocator.
pub(crate) fn argv_to_c(strings: &[&str]) -> Result<*mut *mut c_char> {
    let p = c_alloc::<*mut c_char>(strings.len() + 1)?;
    for (n, s) in strings.iter().enumerate() {
        match c_string(s) {
            // SAFETY: `p` has strings.len() + 1 slots.
            Ok(c) => unsafe { *p.add(n) = c },
            Err(e) => {
                // SAFETY: the slots so far hold strings, the rest NULL.
                unsafe { argv_free(p) };
                return Err(e);
            }
        }
    }
    Ok(p)
}

// ---- freeing -------------------------------------------------------------------------------

/// Frees what a `pmix_value_t` owns and leaves it `PMIX_UNDEF` (`PMIx_Value_destruct`). A type
/// this library does not know is left as it is: what it owns cannot be known.
///
/// # Safety
/// The value is well formed and owns its memory, allocated with the C allocator.
pub(crate) unsafe fn value_destruct(v: *mut pmix_value_t) {
    // SAFETY: the caller's promise.
    unsafe { value_destruct_at(v, 0) }
}

unsafe fn value_destruct_at(v: *mut pmix_value_t, depth: usize) {
    if v.is_null() || depth > MAX_DEPTH {
        return;
    }
    // SAFETY: the caller's promise.
    let v = unsafe { &mut *v };
    let ty = DataType(v.type_);
    if ty != DataType::UNDEF && element_size(ty).is_none() {
        return;
    }
    // SAFETY: the union holds the element form of `ty`, inline or through its pointer.
    unsafe {
        if held_by_pointer(ty) {
            let p = v.data.ptr.cast::<u8>();
            if !p.is_null() {
                element_destruct(ty, p, depth);
                libc::free(p.cast());
            }
        } else {
            element_destruct(ty, ptr::from_mut(&mut v.data).cast(), depth);
        }
    }
    *v = undef_value();
}

/// Frees what the element form of `ty` at `at` owns.
///
/// # Safety
/// `at` holds a well-formed element of `ty` owning its memory.
pub(crate) unsafe fn element_destruct(ty: DataType, at: *mut u8, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    // SAFETY: the element form of `ty` is at `at`, per the caller.
    unsafe {
        match ty {
            DataType::STRING => {
                libc::free(read::<*mut c_char>(at).cast());
                write(at, ptr::null_mut::<c_char>());
            }
            DataType::BYTE_OBJECT
            | DataType::REGEX
            | DataType::COMPRESSED_STRING
            | DataType::COMPRESSED_BYTE_OBJECT => {
                let bo = &mut *at.cast::<pmix_byte_object_t>();
                libc::free(bo.bytes.cast());
                bo.bytes = ptr::null_mut();
                bo.size = 0;
            }
            DataType::PROC_INFO => {
                let pi = &mut *at.cast::<pmix_proc_info_t>();
                libc::free(pi.hostname.cast());
                libc::free(pi.executable_name.cast());
                pi.hostname = ptr::null_mut();
                pi.executable_name = ptr::null_mut();
            }
            DataType::ENVAR => {
                let e = &mut *at.cast::<pmix_envar_t>();
                libc::free(e.envar.cast());
                libc::free(e.value.cast());
                e.envar = ptr::null_mut();
                e.value = ptr::null_mut();
            }
            DataType::REGATTR => {
                let r = &mut *at.cast::<pmix_regattr_t>();
                libc::free(r.name.cast());
                argv_free(r.description);
                r.name = ptr::null_mut();
                r.description = ptr::null_mut();
            }
            DataType::INFO => {
                let i = &mut *at.cast::<pmix_info_t>();
                value_destruct_at(&mut i.value, depth + 1);
            }
            DataType::VALUE => value_destruct_at(at.cast(), depth + 1),
            DataType::DATA_ARRAY => array_destruct_at(at.cast(), depth + 1),
            _ => structured::destruct(ty, at, depth),
        }
    }
}

/// Frees a data array's elements and their memory, leaving it empty
/// (`PMIx_Data_array_destruct`).
///
/// # Safety
/// The array is well formed and owns its memory, allocated with the C allocator.
pub(crate) unsafe fn data_array_destruct(d: *mut pmix_data_array_t) {
    // SAFETY: the caller's promise.
    unsafe { array_destruct_at(d, 0) }
}

unsafe fn array_destruct_at(d: *mut pmix_data_array_t, depth: usize) {
    if d.is_null() || depth > MAX_DEPTH {
        return;
    }
    // SAFETY: the caller's promise.
    let d = unsafe { &mut *d };
    let ty = DataType(d.type_);
    let Some(size) = element_size(ty) else {
        return;
    };
    let p = d.array.cast::<u8>();
    if !p.is_null() {
        for n in 0..d.size {
            // SAFETY: the array holds `d.size` elements of `ty`.
            unsafe { element_destruct(ty, p.add(n * size), depth) };
        }
        // SAFETY: allocated with the C allocator, per the caller.
        unsafe { libc::free(p.cast()) };
    }
    d.array = ptr::null_mut();
    d.size = 0;
}

/// Frees an info array of `n` entries and what they own.
///
/// # Safety
/// A non-NULL `p` is an info array from the C allocator with `n` well-formed entries.
pub(crate) unsafe fn infos_free(p: *mut pmix_info_t, n: usize) {
    if p.is_null() {
        return;
    }
    for k in 0..n {
        // SAFETY: the caller's promise.
        unsafe { value_destruct(&mut (*p.add(k)).value) };
    }
    // SAFETY: the caller's promise.
    unsafe { libc::free(p.cast()) };
}

/// Frees a NULL-terminated `char **` and its strings.
///
/// # Safety
/// A non-NULL `argv` is a NULL-terminated array from the C allocator of strings from it.
pub(crate) unsafe fn argv_free(argv: *mut *mut c_char) {
    if argv.is_null() {
        return;
    }
    let mut n = 0;
    // SAFETY: the caller's promise; the loop ends at the NULL.
    unsafe {
        while !(*argv.add(n)).is_null() {
            libc::free((*argv.add(n)).cast::<c_void>());
            n += 1;
        }
        libc::free(argv.cast());
    }
}

// ---- structures of dynamic jobs and queries ---------------------------------------------------

/// The application context in a `pmix_app_t` (an empty argv is `[cmd]`).
///
/// # Safety
/// The app's strings, lists and directives are what the Standard says (or NULL).
pub(crate) unsafe fn app_from_c(a: &pmix_app_t) -> Result<App> {
    // SAFETY: the caller's promise.
    unsafe {
        let cmd = c_str(a.cmd)?.ok_or(BAD)?.to_owned();
        let mut argv = argv_from_c(a.argv)?;
        if argv.is_empty() {
            argv.push(cmd.clone());
        }
        Ok(App {
            cmd,
            argv,
            env: argv_from_c(a.env)?,
            cwd: c_str(a.cwd)?.unwrap_or_default().to_owned(),
            maxprocs: u32::try_from(a.maxprocs).map_err(|_| BAD)?,
            info: infos_from_c(a.info, a.ninfo)?,
        })
    }
}

/// Frees what each of `n` apps at `p` owns and zeroes them.
///
/// # Safety
/// A non-NULL `p` holds `n` apps whose memory is the C allocator's.
pub(crate) unsafe fn apps_destruct(p: *mut pmix_app_t, n: usize) {
    if p.is_null() {
        return;
    }
    for k in 0..n {
        // SAFETY: the caller's promise.
        unsafe {
            let a = &mut *p.add(k);
            libc::free(a.cmd.cast());
            argv_free(a.argv);
            argv_free(a.env);
            libc::free(a.cwd.cast());
            infos_free(a.info, a.ninfo);
            p.add(k).write_bytes(0, 1);
        }
    }
}

/// The query in a `pmix_query_t`: its keys (a NULL-terminated list) and qualifiers.
///
/// # Safety
/// As [`argv_from_c`] and [`infos_from_c`].
pub(crate) unsafe fn query_from_c(q: &pmix_query_t) -> Result<Query> {
    // SAFETY: the caller's promise.
    let (keys, qualifiers) =
        unsafe { (argv_from_c(q.keys)?, infos_from_c(q.qualifiers, q.nqual)?) };
    Ok(Query {
        keys: keys
            .iter()
            .map(|k| Key::new(k).map_err(|_| BAD))
            .collect::<Result<_>>()?,
        qualifiers,
    })
}

// ---- packing -------------------------------------------------------------------------------

/// `n` elements of `ty` at `src` (what `PMIx_Data_pack` packs).
///
/// # Safety
/// A non-NULL `src` holds `n` well-formed elements of `ty` (as [`value_from_c`] says).
pub(crate) unsafe fn elements_from_c(ty: DataType, src: *const u8, n: usize) -> Result<Vec<Value>> {
    let size = element_size(ty).ok_or_else(|| unconvertible(ty))?;
    let bytes = n.checked_mul(size).ok_or(BAD)?;
    // SAFETY: the caller's promise.
    let all = unsafe { slice_of(src, bytes) }?;
    all.chunks_exact(size)
        // SAFETY: each chunk is one element of `ty`, per the caller.
        .map(|e| unsafe { element_from_c(ty, e.as_ptr(), 0) })
        .collect()
}

/// Writes `values` as elements of `ty` at `dest` (what `PMIx_Data_unpack` fills), refusing a
/// value of another type (`PMIX_VALUE` holds any). On failure what was written is freed.
///
/// # Safety
/// `dest` has room for `values.len()` elements of `ty`.
pub(crate) unsafe fn elements_to_c(ty: DataType, values: &[Value], dest: *mut u8) -> Result<()> {
    let size = element_size(ty).ok_or_else(|| unconvertible(ty))?;
    if values.is_empty() {
        return Ok(());
    }
    if dest.is_null() {
        return Err(BAD);
    }
    for (n, v) in values.iter().enumerate() {
        // SAFETY: the caller's promise: element `n` is within `dest`; it is zeroed first.
        let written = unsafe {
            let at = dest.add(n * size);
            at.write_bytes(0, size);
            if ty == DataType::VALUE {
                write_value(v, &mut *at.cast::<pmix_value_t>(), 0)
            } else if v.data_type() != ty {
                Err(Status::ERR_TYPE_MISMATCH)
            } else {
                element_to_c(v, at, 0)
            }
        };
        if let Err(e) = written {
            for k in 0..=n {
                // SAFETY: elements 0..=n are well formed (the last maybe half filled).
                unsafe { element_destruct(ty, dest.add(k * size), 0) };
            }
            return Err(e);
        }
    }
    Ok(())
}

// ---- data buffers --------------------------------------------------------------------------

/// Where a buffer's next unpack reads, as an offset from its base, with its fields checked:
/// no bytes without an allocation, no more used than allocated, the unpack pointer within the
/// used bytes.
fn buffer_read_offset(b: &pmix_data_buffer_t) -> Result<usize> {
    if b.base_ptr.is_null() {
        return if b.bytes_used == 0 && b.bytes_allocated == 0 {
            Ok(0)
        } else {
            Err(BAD)
        };
    }
    let off = (b.unpack_ptr as usize).wrapping_sub(b.base_ptr as usize);
    if b.bytes_used > b.bytes_allocated || off > b.bytes_used {
        return Err(BAD);
    }
    Ok(off)
}

/// The bytes of a buffer not unpacked yet.
///
/// # Safety
/// The buffer's `base_ptr` holds `bytes_allocated` bytes.
pub(crate) unsafe fn buffer_unread(b: &pmix_data_buffer_t) -> Result<&[u8]> {
    let off = buffer_read_offset(b)?;
    if b.base_ptr.is_null() {
        return Ok(&[]);
    }
    // SAFETY: checked within the used bytes; the caller's promise for the allocation.
    Ok(
        unsafe {
            core::slice::from_raw_parts(b.base_ptr.cast::<u8>().add(off), b.bytes_used - off)
        },
    )
}

/// Moves a buffer's unpack pointer on by `n` bytes (no further than the end).
///
/// # Safety
/// As [`buffer_unread`].
pub(crate) unsafe fn buffer_consume(b: &mut pmix_data_buffer_t, n: usize) -> Result<()> {
    let off = buffer_read_offset(b)?;
    if n > b.bytes_used - off {
        return Err(BAD);
    }
    if n > 0 {
        // SAFETY: within the used bytes, checked above.
        b.unpack_ptr = unsafe { b.base_ptr.add(off + n) };
    }
    Ok(())
}

/// Appends `bytes` to a buffer, growing its allocation with the C allocator.
///
/// # Safety
/// As [`buffer_unread`], and the allocation is the C allocator's.
pub(crate) unsafe fn buffer_append(b: &mut pmix_data_buffer_t, bytes: &[u8]) -> Result<()> {
    let off = buffer_read_offset(b)?;
    let need = b
        .bytes_used
        .checked_add(bytes.len())
        .ok_or(Status::ERR_NOMEM)?;
    if need > b.bytes_allocated {
        let size = need.max(b.bytes_allocated.saturating_mul(2)).max(64);
        // SAFETY: the caller's allocation (or NULL), grown.
        let grown = unsafe { libc::realloc(b.base_ptr.cast(), size) }.cast::<c_char>();
        if grown.is_null() {
            return Err(Status::ERR_NOMEM);
        }
        b.base_ptr = grown;
        b.bytes_allocated = size;
    }
    // SAFETY: the allocation holds `need` bytes; `off` is within the used ones.
    unsafe {
        ptr::copy_nonoverlapping(
            bytes.as_ptr(),
            b.base_ptr.cast::<u8>().add(b.bytes_used),
            bytes.len(),
        );
        b.bytes_used = need;
        b.pack_ptr = b.base_ptr.add(need);
        b.unpack_ptr = b.base_ptr.add(off);
    }
    Ok(())
}

/// Frees a buffer's bytes and empties it.
///
/// # Safety
/// A non-NULL `b` is a buffer whose allocation (if any) is the C allocator's.
pub(crate) unsafe fn buffer_destruct(b: *mut pmix_data_buffer_t) {
    // SAFETY: the caller's promise.
    unsafe {
        if let Some(b) = b.as_mut() {
            libc::free(b.base_ptr.cast());
            b.base_ptr = ptr::null_mut();
            b.pack_ptr = ptr::null_mut();
            b.unpack_ptr = ptr::null_mut();
            b.bytes_allocated = 0;
            b.bytes_used = 0;
        }
    }
}

/// Makes `size` bytes at `bytes` (from the C allocator, now the buffer's) a buffer's content,
/// after freeing what it held.
///
/// # Safety
/// `bytes` is NULL or an allocation of at least `size` bytes from the C allocator.
pub(crate) unsafe fn buffer_load(
    b: &mut pmix_data_buffer_t,
    bytes: *mut c_char,
    size: usize,
) -> Result<()> {
    if bytes.is_null() && size != 0 {
        return Err(BAD);
    }
    // SAFETY: the caller's promise.
    unsafe {
        buffer_destruct(b);
        b.base_ptr = bytes;
        b.unpack_ptr = bytes;
        b.pack_ptr = if bytes.is_null() {
            bytes
        } else {
            bytes.add(size)
        };
    }
    b.bytes_allocated = size;
    b.bytes_used = size;
    Ok(())
}

/// A copy of a buffer's unread bytes from the C allocator (NULL when none) and their count;
/// the buffer is emptied.
///
/// # Safety
/// As [`buffer_append`].
pub(crate) unsafe fn buffer_unload(b: &mut pmix_data_buffer_t) -> Result<(*mut c_char, usize)> {
    // SAFETY: the caller's promise.
    let rest = unsafe { buffer_unread(b) }?;
    let copy = c_alloc::<u8>(rest.len())?;
    if !rest.is_empty() {
        // SAFETY: `copy` has room for them.
        unsafe { ptr::copy_nonoverlapping(rest.as_ptr(), copy, rest.len()) };
    }
    let n = rest.len();
    // SAFETY: the caller's promise.
    unsafe { buffer_destruct(b) };
    Ok((copy.cast(), n))
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
