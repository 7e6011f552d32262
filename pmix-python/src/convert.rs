//! Python objects to pmix-types and back: the one place that knows how python3-pmix spells a
//! process (`{'nspace': .., 'rank': ..}`), a value (`{'value': .., 'val_type': ..}`), an info
//! (`{'key': .., 'value': .., 'val_type': .., 'flags': ..}`), a byte object
//! (`{'bytes': .., 'size': ..}`) and a data array (`{'type': .., 'array': [..]}`).
//!
//! Bad input (a missing field, a number out of its type's range, an unknown type) is a Python
//! `ValueError` or `TypeError` naming what was wrong; nothing here panics.

use pmix_client::Pdata;
use pmix_types::{
    AllocDirective, DataArray, DataRange, DataType, Envar, Info, InfoFlags, IofChannel, JobState,
    Key, LinkState, Locality, Nspace, Persistence, Proc, ProcInfo, ProcState, Rank, RegAttr, Scope,
    Status, Timeval, Value,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple};

/// A `ValueError` with this message.
pub(crate) fn bad(msg: impl Into<String>) -> PyErr {
    PyValueError::new_err(msg.into())
}

/// The field `name` of a dict, which must be there.
fn field<'py>(d: &Bound<'py, PyDict>, name: &str, what: &str) -> PyResult<Bound<'py, PyAny>> {
    d.get_item(name)?
        .ok_or_else(|| bad(format!("{what} has no '{name}' field: {d}")))
}

/// `obj` as a dict, or a `TypeError` saying what it should have been.
fn as_dict<'a, 'py>(obj: &'a Bound<'py, PyAny>, what: &str) -> PyResult<&'a Bound<'py, PyDict>> {
    obj.cast::<PyDict>()
        .map_err(|_| PyTypeError::new_err(format!("{what} must be a dict, not {obj}")))
}

/// A string given as `str` or as ASCII/UTF-8 `bytes` (python3-pmix hands out its attribute
/// names as bytes, so scripts pass either).
pub(crate) fn text(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(s.to_cow()?.into_owned());
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return String::from_utf8(b.as_bytes().to_vec())
            .map_err(|_| bad(format!("{what} is not UTF-8: {obj}")));
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be a str or bytes, not {obj}"
    )))
}

/// A key (`str` or `bytes`), checked for length.
pub(crate) fn key(obj: &Bound<'_, PyAny>) -> PyResult<Key> {
    let k = text(obj, "a key")?;
    Key::new(&k).map_err(|e| bad(format!("bad key {k:?}: {e}")))
}

/// A namespace (`str` or `bytes`), checked for length.
pub(crate) fn nspace(obj: &Bound<'_, PyAny>) -> PyResult<Nspace> {
    let n = text(obj, "a namespace")?;
    Nspace::new(&n).map_err(|e| bad(format!("bad namespace {n:?}: {e}")))
}

/// A number of the integer type `T`, with a clear error when it does not fit.
fn int<'py, T>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<T>
where
    T: for<'a> FromPyObject<'a, 'py>,
{
    obj.extract::<T>().map_err(|_| {
        bad(format!(
            "{what} must be an integer in the range of {}, not {obj}",
            std::any::type_name::<T>()
        ))
    })
}

/// A process, `{'nspace': .., 'rank': ..}`.
pub(crate) fn proc_from(obj: &Bound<'_, PyAny>) -> PyResult<Proc> {
    let d = as_dict(obj, "a process")?;
    let ns = nspace(&field(d, "nspace", "a process")?)?;
    let rank: u32 = int(&field(d, "rank", "a process")?, "a rank")?;
    Ok(Proc::new(ns, Rank(rank)))
}

/// A list of processes; `None` is the empty list.
pub(crate) fn procs_from(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<Proc>> {
    match obj {
        None => Ok(Vec::new()),
        Some(o) if o.is_none() => Ok(Vec::new()),
        Some(o) => o.try_iter()?.map(|p| proc_from(&p?)).collect(),
    }
}

/// A process as a dict.
pub(crate) fn proc_to<'py>(py: Python<'py>, p: &Proc) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("nspace", p.nspace.as_str())?;
    d.set_item("rank", p.rank.0)?;
    Ok(d)
}

/// A list of processes as a list of dicts.
pub(crate) fn procs_to<'py>(py: Python<'py>, ps: &[Proc]) -> PyResult<Bound<'py, PyList>> {
    let l = PyList::empty(py);
    for p in ps {
        l.append(proc_to(py, p)?)?;
    }
    Ok(l)
}

/// The bytes of a byte object: `{'bytes': b, 'size': n}` (the first `n` bytes) or plain
/// `bytes`/`bytearray`.
fn bytes_from(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    if let Ok(d) = obj.cast::<PyDict>() {
        let mut b: Vec<u8> = field(d, "bytes", "a byte object")?
            .extract()
            .map_err(|_| bad("a byte object's 'bytes' must be bytes"))?;
        if let Some(size) = d.get_item("size")? {
            let size: usize = int(&size, "a byte object's size")?;
            if size > b.len() {
                return Err(bad(format!(
                    "a byte object's size {size} is more than its {} bytes",
                    b.len()
                )));
            }
            b.truncate(size);
        }
        return Ok(b);
    }
    obj.extract()
        .map_err(|_| PyTypeError::new_err(format!("a byte object must be bytes, not {obj}")))
}

/// A byte object as python3-pmix gives it.
fn bytes_to<'py>(py: Python<'py>, b: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    let d = PyDict::new(py);
    d.set_item("bytes", PyBytes::new(py, b))?;
    d.set_item("size", b.len())?;
    Ok(d.into_any())
}

/// The value `obj` taken as type `ty`: the bare Python value (what a value dict's `'value'`
/// holds), not the dict.
pub(crate) fn value_of_type(obj: &Bound<'_, PyAny>, ty: DataType) -> PyResult<Value> {
    let name = ty.name().unwrap_or("an unknown type");
    let v = match ty {
        DataType::UNDEF => Value::Undef,
        DataType::BOOL => Value::Bool(obj.is_truthy()?),
        DataType::BYTE => Value::Byte(int(obj, name)?),
        DataType::STRING => Value::String(text(obj, "a string value")?),
        DataType::SIZE => Value::Size(int(obj, name)?),
        DataType::PID => Value::Pid(int(obj, name)?),
        DataType::INT => Value::Int(int(obj, name)?),
        DataType::INT8 => Value::Int8(int(obj, name)?),
        DataType::INT16 => Value::Int16(int(obj, name)?),
        DataType::INT32 => Value::Int32(int(obj, name)?),
        DataType::INT64 => Value::Int64(int(obj, name)?),
        DataType::UINT => Value::Uint(int(obj, name)?),
        DataType::UINT8 => Value::Uint8(int(obj, name)?),
        DataType::UINT16 => Value::Uint16(int(obj, name)?),
        DataType::UINT32 => Value::Uint32(int(obj, name)?),
        DataType::UINT64 => Value::Uint64(int(obj, name)?),
        DataType::FLOAT => Value::Float(float(obj)? as f32),
        DataType::DOUBLE => Value::Double(float(obj)?),
        DataType::TIMEVAL => {
            let d = as_dict(obj, "a timeval")?;
            Value::Timeval(Timeval {
                sec: int(&field(d, "sec", "a timeval")?, "seconds")?,
                usec: int(&field(d, "usec", "a timeval")?, "microseconds")?,
            })
        }
        DataType::TIME => Value::Time(int(obj, name)?),
        DataType::STATUS => Value::Status(Status(int(obj, name)?)),
        DataType::PROC_RANK => Value::Rank(Rank(int(obj, name)?)),
        DataType::PROC => Value::Proc(proc_from(obj)?),
        DataType::PROC_NSPACE => Value::Nspace(nspace(obj)?),
        DataType::BYTE_OBJECT => Value::ByteObject(bytes_from(obj)?),
        DataType::PERSIST => Value::Persistence(Persistence(int(obj, name)?)),
        DataType::SCOPE => Value::Scope(Scope(int(obj, name)?)),
        DataType::DATA_RANGE => Value::DataRange(DataRange(int(obj, name)?)),
        DataType::INFO_DIRECTIVES => Value::InfoDirectives(InfoFlags(int(obj, name)?)),
        DataType::DATA_TYPE => Value::DataType(DataType(int(obj, name)?)),
        DataType::PROC_STATE => Value::ProcState(ProcState(int(obj, name)?)),
        DataType::DATA_ARRAY => Value::DataArray(Box::new(array_from(obj)?)),
        DataType::INFO => Value::Info(Box::new(info_from(obj)?)),
        DataType::ENVAR => {
            let d = as_dict(obj, "an envar")?;
            Value::Envar(Envar {
                name: text(&field(d, "envar", "an envar")?, "an envar's name")?,
                value: text(&field(d, "value", "an envar")?, "an envar's value")?,
                separator: match d.get_item("separator")? {
                    Some(s) => int(&s, "an envar's separator")?,
                    None => b':',
                },
            })
        }
        DataType::REGEX => Value::Regex(bytes_from(obj)?),
        DataType::COMPRESSED_STRING => Value::CompressedString(bytes_from(obj)?),
        DataType::COMPRESSED_BYTE_OBJECT => Value::CompressedBytes(bytes_from(obj)?),
        DataType::ALLOC_DIRECTIVE => Value::AllocDirective(AllocDirective(int(obj, name)?)),
        DataType::IOF_CHANNEL => Value::IofChannel(IofChannel(int(obj, name)?)),
        DataType::JOB_STATE => Value::JobState(JobState(int(obj, name)?)),
        DataType::LINK_STATE => Value::LinkState(LinkState(int(obj, name)?)),
        DataType::LOCTYPE => Value::Locality(Locality(int(obj, name)?)),
        other => {
            return Err(bad(format!(
                "values of type {other:?} cannot be given from Python"
            )));
        }
    };
    Ok(v)
}

fn float(obj: &Bound<'_, PyAny>) -> PyResult<f64> {
    obj.extract().map_err(|_| {
        bad(format!(
            "a floating-point value must be a number, not {obj}"
        ))
    })
}

/// A data array, `{'type': t, 'array': [..]}`, each element a bare value of type `t` (an
/// info dict for `PMIX_INFO`, a process dict for `PMIX_PROC`).
fn array_from(obj: &Bound<'_, PyAny>) -> PyResult<DataArray> {
    let d = as_dict(obj, "a data array")?;
    let ty = DataType(int(&field(d, "type", "a data array")?, "a data type")?);
    let items = field(d, "array", "a data array")?
        .try_iter()?
        .map(|item| {
            let item = item?;
            if ty == DataType::VALUE {
                value_from(&item)
            } else {
                value_of_type(&item, ty)
            }
        })
        .collect::<PyResult<Vec<_>>>()?;
    DataArray::new(ty, items).map_err(|e| bad(format!("bad data array: {e}")))
}

/// A value dict, `{'value': v, 'val_type': t}`.
pub(crate) fn value_from(obj: &Bound<'_, PyAny>) -> PyResult<Value> {
    let d = as_dict(obj, "a value")?;
    typed_value(d, "a value")
}

/// The `'value'` and `'val_type'` fields of a value or info dict.
fn typed_value(d: &Bound<'_, PyDict>, what: &str) -> PyResult<Value> {
    let ty = DataType(int(&field(d, "val_type", what)?, "a val_type")?);
    match d.get_item("value")? {
        Some(v) => value_of_type(&v, ty),
        None if ty == DataType::UNDEF => Ok(Value::Undef),
        None => Err(bad(format!("{what} has no 'value' field: {d}"))),
    }
}

/// An info dict, `{'key': k, 'value': v, 'val_type': t}` with optional `'flags'`.
pub(crate) fn info_from(obj: &Bound<'_, PyAny>) -> PyResult<Info> {
    let d = as_dict(obj, "an info")?;
    let mut info = Info::new(
        key(&field(d, "key", "an info")?)?,
        typed_value(d, "an info")?,
    );
    if let Some(f) = d.get_item("flags")? {
        if !f.is_none() {
            info.flags = InfoFlags(int(&f, "info flags")?);
        }
    }
    Ok(info)
}

/// A list of info dicts; `None` is the empty list.
pub(crate) fn infos_from(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<Info>> {
    match obj {
        None => Ok(Vec::new()),
        Some(o) if o.is_none() => Ok(Vec::new()),
        Some(o) => o.try_iter()?.map(|i| info_from(&i?)).collect(),
    }
}

/// The bare Python value of `v` (what a value dict's `'value'` holds).
pub(crate) fn bare_value<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    let o = match v {
        Value::Undef => py.None().into_bound(py),
        Value::Bool(b) => b.into_pyobject(py)?.to_owned().into_any(),
        Value::Byte(n) | Value::Uint8(n) => n.into_pyobject(py)?.into_any(),
        Value::String(s) => s.into_pyobject(py)?.into_any(),
        // A NULL string reads as empty here, as it always has.
        Value::NullString => "".into_pyobject(py)?.into_any(),
        Value::Size(n) | Value::Uint64(n) => n.into_pyobject(py)?.into_any(),
        Value::Pid(n) | Value::Uint(n) | Value::Uint32(n) => n.into_pyobject(py)?.into_any(),
        Value::Int(n) | Value::Int32(n) => n.into_pyobject(py)?.into_any(),
        Value::Int8(n) => n.into_pyobject(py)?.into_any(),
        Value::Int16(n) => n.into_pyobject(py)?.into_any(),
        Value::Int64(n) | Value::Time(n) => n.into_pyobject(py)?.into_any(),
        Value::Uint16(n) => n.into_pyobject(py)?.into_any(),
        Value::Float(f) => f64::from(*f).into_pyobject(py)?.into_any(),
        Value::Double(f) => f.into_pyobject(py)?.into_any(),
        Value::Timeval(t) => {
            let d = PyDict::new(py);
            d.set_item("sec", t.sec)?;
            d.set_item("usec", t.usec)?;
            d.into_any()
        }
        Value::Status(s) => s.0.into_pyobject(py)?.into_any(),
        Value::Rank(r) => r.0.into_pyobject(py)?.into_any(),
        Value::Proc(p) => proc_to(py, p)?.into_any(),
        Value::Nspace(n) => n.as_str().into_pyobject(py)?.into_any(),
        Value::ByteObject(b)
        | Value::Regex(b)
        | Value::CompressedString(b)
        | Value::CompressedBytes(b) => bytes_to(py, b)?,
        Value::Persistence(p) => p.0.into_pyobject(py)?.into_any(),
        Value::Scope(s) => s.0.into_pyobject(py)?.into_any(),
        Value::DataRange(r) => r.0.into_pyobject(py)?.into_any(),
        Value::InfoDirectives(f) => f.0.into_pyobject(py)?.into_any(),
        Value::DataType(t) => t.0.into_pyobject(py)?.into_any(),
        Value::ProcState(s) => s.0.into_pyobject(py)?.into_any(),
        Value::ProcInfo(p) => proc_info_to(py, p)?,
        Value::DataArray(a) => {
            let d = PyDict::new(py);
            d.set_item("type", a.elem_type().0)?;
            let items = PyList::empty(py);
            for item in a.items() {
                if a.elem_type() == DataType::VALUE {
                    items.append(value_to(py, item)?)?;
                } else {
                    items.append(bare_value(py, item)?)?;
                }
            }
            d.set_item("array", items)?;
            d.into_any()
        }
        Value::Info(i) => info_to(py, i)?.into_any(),
        Value::Envar(e) => {
            let d = PyDict::new(py);
            d.set_item("envar", &e.name)?;
            d.set_item("value", &e.value)?;
            d.set_item("separator", e.separator)?;
            d.into_any()
        }
        Value::AllocDirective(a) => a.0.into_pyobject(py)?.into_any(),
        Value::IofChannel(c) => c.0.into_pyobject(py)?.into_any(),
        Value::JobState(s) => s.0.into_pyobject(py)?.into_any(),
        Value::LinkState(s) => s.0.into_pyobject(py)?.into_any(),
        Value::Locality(l) => l.0.into_pyobject(py)?.into_any(),
        Value::RegAttr(r) => reg_attr_to(py, r)?,
        // `Value` is non-exhaustive: a type added to pmix-types before it is added here.
        other => {
            return Err(bad(format!(
                "values of type {:?} have no Python form yet",
                other.data_type()
            )));
        }
    };
    Ok(o)
}

fn proc_info_to<'py>(py: Python<'py>, p: &ProcInfo) -> PyResult<Bound<'py, PyAny>> {
    let d = PyDict::new(py);
    d.set_item("proc", proc_to(py, &p.proc)?)?;
    d.set_item("hostname", &p.hostname)?;
    d.set_item("executable_name", &p.executable_name)?;
    d.set_item("pid", p.pid)?;
    d.set_item("exit_code", p.exit_code)?;
    d.set_item("state", p.state.0)?;
    Ok(d.into_any())
}

fn reg_attr_to<'py>(py: Python<'py>, r: &RegAttr) -> PyResult<Bound<'py, PyAny>> {
    let d = PyDict::new(py);
    d.set_item("name", &r.name)?;
    d.set_item("key", &r.key)?;
    d.set_item("type", r.ty.0)?;
    d.set_item("description", &r.description)?;
    Ok(d.into_any())
}

/// A value dict, `{'value': v, 'val_type': t}`.
pub(crate) fn value_to<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("value", bare_value(py, v)?)?;
    d.set_item("val_type", v.data_type().0)?;
    Ok(d)
}

/// An info dict, `{'key': k, 'value': v, 'val_type': t, 'flags': f}`.
pub(crate) fn info_to<'py>(py: Python<'py>, i: &Info) -> PyResult<Bound<'py, PyDict>> {
    let d = value_to(py, &i.value)?;
    d.set_item("key", i.key.as_str())?;
    d.set_item("flags", i.flags.0)?;
    Ok(d)
}

/// A list of info dicts.
pub(crate) fn infos_to<'py>(py: Python<'py>, infos: &[Info]) -> PyResult<Bound<'py, PyList>> {
    let l = PyList::empty(py);
    for i in infos {
        l.append(info_to(py, i)?)?;
    }
    Ok(l)
}

/// A lookup's answer for one key, `{'proc': .., 'key': .., 'value': .., 'val_type': ..}`.
pub(crate) fn pdata_to<'py>(py: Python<'py>, p: &Pdata) -> PyResult<Bound<'py, PyDict>> {
    let d = value_to(py, &p.value)?;
    d.set_item("key", p.key.as_str())?;
    if let Some(proc) = &p.proc {
        d.set_item("proc", proc_to(py, proc)?)?;
    }
    Ok(d)
}

/// A list of strings (keys), each `str` or `bytes`; `None` is the empty list.
pub(crate) fn texts_from(obj: Option<&Bound<'_, PyAny>>, what: &str) -> PyResult<Vec<String>> {
    match obj {
        None => Ok(Vec::new()),
        Some(o) if o.is_none() => Ok(Vec::new()),
        Some(o) if o.is_instance_of::<PyString>() => Err(PyTypeError::new_err(format!(
            "{what} must be a list of strings, not one string"
        ))),
        Some(o) => o.try_iter()?.map(|s| text(&s?, what)).collect(),
    }
}

/// The `(rc, value)` pair python3-pmix returns.
pub(crate) fn pair<'py>(
    py: Python<'py>,
    rc: Status,
    value: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyTuple::new(py, [rc.0.into_pyobject(py)?.into_any(), value])?.into_any())
}
