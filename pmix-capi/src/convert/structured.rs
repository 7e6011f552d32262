//! The element forms of the structured types of `pmix_common.h` that [`super`] delegates:
//! fabric coordinates and geometries, device distances, endpoints, usage samples, data
//! buffers, application contexts, queries and published data, the storage bit sets and
//! pointers. Each has a reader, a writer and a destructor, as the parent's types do.
//!
//! A cpuset (`pmix_cpuset_t`) and a topology (`pmix_topology_t`) hold hwloc objects, which
//! this library, linking no hwloc, cannot make or read; a `pmix_kval_t` and a `pmix_buffer_t`
//! are OpenPMIx's internals. Those four are not converted (`PMIX_ERR_NOT_SUPPORTED`).

use core::ffi::c_char;
use core::mem::size_of;
use core::ptr;

use pmix_types::{
    App, Coord, CoordView, DataType, DeviceDistance, DeviceType, DiskStats, Endpoint, Geometry,
    NetStats, NodeStats, ProcStats, Published, Timeval, Value,
};

use super::{
    BAD, Result, apps_destruct, argv_free, argv_to_c, buffer_append, buffer_destruct, bytes_from_c,
    c_alloc, c_bytes, c_str, c_string, fixed_from_str, infos_free, infos_to_c, key_from_c,
    proc_from_c, proc_to_c, read, slice_of, unconvertible, value_at_depth, value_destruct_at,
    write, write_value,
};
use crate::ctypes::{
    pmix_app_t, pmix_coord_t, pmix_data_buffer_t, pmix_device_distance_t, pmix_disk_stats_t,
    pmix_endpoint_t, pmix_geometry_t, pmix_net_stats_t, pmix_node_stats_t, pmix_pdata_t,
    pmix_proc_stats_t, pmix_query_t, timeval,
};

/// The size of the element form of the types of this module.
pub(super) fn element_size(ty: DataType) -> Option<usize> {
    Some(match ty {
        DataType::COORD => size_of::<pmix_coord_t>(),
        DataType::GEOMETRY => size_of::<pmix_geometry_t>(),
        DataType::DEVICE_DIST => size_of::<pmix_device_distance_t>(),
        DataType::ENDPOINT => size_of::<pmix_endpoint_t>(),
        DataType::PROC_STATS => size_of::<pmix_proc_stats_t>(),
        DataType::DISK_STATS => size_of::<pmix_disk_stats_t>(),
        DataType::NET_STATS => size_of::<pmix_net_stats_t>(),
        DataType::NODE_STATS => size_of::<pmix_node_stats_t>(),
        DataType::DATA_BUFFER => size_of::<pmix_data_buffer_t>(),
        DataType::APP => size_of::<pmix_app_t>(),
        DataType::QUERY => size_of::<pmix_query_t>(),
        DataType::PDATA => size_of::<pmix_pdata_t>(),
        DataType::POINTER => size_of::<*mut u8>(),
        DataType::DEVTYPE
        | DataType::STOR_MEDIUM
        | DataType::STOR_ACCESS
        | DataType::STOR_PERSIST => 8,
        DataType::STOR_ACCESS_TYPE => 2,
        _ => return None,
    })
}

/// True for the types of this module a `pmix_value_t` holds through a pointer (its union's
/// `coord`, `geometry`, `devdist`, ... members; an app, a query and a published datum have
/// no member and go through `ptr`, as an info does).
pub(super) fn held_by_pointer(ty: DataType) -> bool {
    element_size(ty).is_some()
        && !matches!(
            ty,
            DataType::POINTER
                | DataType::DEVTYPE
                | DataType::STOR_MEDIUM
                | DataType::STOR_ACCESS
                | DataType::STOR_PERSIST
                | DataType::STOR_ACCESS_TYPE
        )
}

/// A string that may be NULL.
///
/// # Safety
/// As [`c_str`].
unsafe fn opt_owned(s: *const c_char) -> Result<Option<String>> {
    // SAFETY: the caller's promise.
    Ok(unsafe { c_str(s) }?.map(str::to_owned))
}

/// A C string for `s`, NULL for `None`.
fn c_opt_string(s: Option<&str>) -> Result<*mut c_char> {
    s.map_or(Ok(ptr::null_mut()), c_string)
}

fn timeval_from_c(t: timeval) -> Timeval {
    Timeval {
        sec: t.tv_sec,
        usec: t.tv_usec,
    }
}

fn timeval_to_c(t: Timeval) -> timeval {
    timeval {
        tv_sec: t.sec,
        tv_usec: t.usec,
    }
}

/// # Safety
/// `c` is well formed (`coord` holds `dims` values, or is NULL with none).
unsafe fn coord_from_c(c: &pmix_coord_t) -> Result<Coord> {
    Ok(Coord {
        view: CoordView(c.view),
        // SAFETY: the caller's promise.
        coord: unsafe { slice_of(c.coord.cast_const(), c.dims) }?.to_vec(),
    })
}

/// Fills a zeroed `out`; on failure it is well formed for [`coord_destruct`].
fn coord_to_c(c: &Coord, out: &mut pmix_coord_t) -> Result<()> {
    out.view = c.view.0;
    let p = c_alloc::<u32>(c.coord.len())?;
    out.coord = p;
    if !c.coord.is_empty() {
        // SAFETY: `p` has room for the values.
        unsafe { ptr::copy_nonoverlapping(c.coord.as_ptr(), p, c.coord.len()) };
    }
    out.dims = c.coord.len();
    Ok(())
}

/// # Safety
/// `c` owns its values, from the C allocator.
unsafe fn coord_destruct(c: &mut pmix_coord_t) {
    // SAFETY: the caller's promise.
    unsafe { libc::free(c.coord.cast()) };
    c.coord = ptr::null_mut();
    c.dims = 0;
}

/// Frees what `n` coordinates at `p` own, and `p`.
///
/// # Safety
/// A non-NULL `p` holds `n` coordinates from the C allocator.
unsafe fn coords_free(p: *mut pmix_coord_t, n: usize) {
    if p.is_null() {
        return;
    }
    // SAFETY: the caller's promise.
    unsafe {
        for k in 0..n {
            coord_destruct(&mut *p.add(k));
        }
        libc::free(p.cast());
    }
}

/// Allocates `items.len()` zeroed C objects and fills each with `fill`; on failure frees them
/// with `free` (which must accept a zeroed or half-filled array of that length).
fn c_array<T, C>(
    items: &[T],
    fill: impl Fn(&T, &mut C) -> Result<()>,
    free: unsafe fn(*mut C, usize),
) -> Result<*mut C> {
    let p = c_alloc::<C>(items.len())?;
    for (n, item) in items.iter().enumerate() {
        // SAFETY: element `n` of `p` is zeroed.
        if let Err(e) = fill(item, unsafe { &mut *p.add(n) }) {
            // SAFETY: every element is zeroed, filled or half filled.
            unsafe { free(p, items.len()) };
            return Err(e);
        }
    }
    Ok(p)
}

unsafe fn disk_stats_free(p: *mut pmix_disk_stats_t, n: usize) {
    if p.is_null() {
        return;
    }
    // SAFETY: the caller's promise: `n` disk samples from the C allocator.
    unsafe {
        for k in 0..n {
            libc::free((*p.add(k)).disk.cast());
        }
        libc::free(p.cast());
    }
}

unsafe fn net_stats_free(p: *mut pmix_net_stats_t, n: usize) {
    if p.is_null() {
        return;
    }
    // SAFETY: the caller's promise: `n` interface samples from the C allocator.
    unsafe {
        for k in 0..n {
            libc::free((*p.add(k)).net_interface.cast());
        }
        libc::free(p.cast());
    }
}

/// # Safety
/// As [`c_str`] for the disk's name.
unsafe fn disk_stats_from_c(d: &pmix_disk_stats_t) -> Result<DiskStats> {
    // SAFETY: the caller's promise.
    let disk = unsafe { opt_owned(d.disk) }?;
    Ok(DiskStats::from_counters(disk, d.counters))
}

fn disk_stats_to_c(d: &DiskStats, out: &mut pmix_disk_stats_t) -> Result<()> {
    out.counters = d.counters();
    out.disk = c_opt_string(d.disk.as_deref())?;
    Ok(())
}

/// # Safety
/// As [`c_str`] for the interface's name.
unsafe fn net_stats_from_c(n: &pmix_net_stats_t) -> Result<NetStats> {
    // SAFETY: the caller's promise.
    let name = unsafe { opt_owned(n.net_interface) }?;
    Ok(NetStats::from_counters(name, n.counters))
}

fn net_stats_to_c(n: &NetStats, out: &mut pmix_net_stats_t) -> Result<()> {
    out.counters = n.counters();
    out.net_interface = c_opt_string(n.net_interface.as_deref())?;
    Ok(())
}

/// The value of type `ty` (one of this module's) whose element form is at `at`.
///
/// # Safety
/// As [`super::element_from_c`].
pub(super) unsafe fn from_c(ty: DataType, at: *const u8, depth: usize) -> Result<Value> {
    // SAFETY (for every read below): `at` holds the element form of `ty`, whose C type each
    // arm reads; its pointers are what the Standard says, per the caller.
    unsafe {
        Ok(match ty {
            DataType::COORD => Value::Coord(Box::new(coord_from_c(&read(at))?)),
            DataType::GEOMETRY => {
                let g: pmix_geometry_t = read(at);
                let coordinates = slice_of(g.coordinates.cast_const(), g.ncoords)?
                    .iter()
                    .map(|c| coord_from_c(c))
                    .collect::<Result<_>>()?;
                Value::Geometry(Box::new(Geometry {
                    fabric: g.fabric as u64,
                    uuid: opt_owned(g.uuid)?,
                    osname: opt_owned(g.osname)?,
                    coordinates,
                }))
            }
            DataType::DEVICE_DIST => {
                let d: pmix_device_distance_t = read(at);
                Value::DeviceDist(Box::new(DeviceDistance {
                    uuid: opt_owned(d.uuid)?,
                    osname: opt_owned(d.osname)?,
                    kind: DeviceType(d.type_),
                    mindist: d.mindist,
                    maxdist: d.maxdist,
                }))
            }
            DataType::ENDPOINT => {
                let e: pmix_endpoint_t = read(at);
                Value::Endpoint(Box::new(Endpoint {
                    uuid: opt_owned(e.uuid)?,
                    osname: opt_owned(e.osname)?,
                    address: bytes_from_c(&e.endpt)?,
                }))
            }
            DataType::PROC_STATS => {
                let s: pmix_proc_stats_t = read(at);
                Value::ProcStats(Box::new(ProcStats {
                    node: opt_owned(s.node)?,
                    proc: proc_from_c(&s.proc_)?,
                    pid: s.pid as u32,
                    cmd: opt_owned(s.cmd)?,
                    state: s.state as u8,
                    time: timeval_from_c(s.time),
                    percent_cpu: s.percent_cpu,
                    priority: s.priority,
                    num_threads: s.num_threads,
                    pss: s.pss,
                    vsize: s.vsize,
                    rss: s.rss,
                    peak_vsize: s.peak_vsize,
                    processor: s.processor,
                    sample_time: timeval_from_c(s.sample_time),
                }))
            }
            DataType::DISK_STATS => Value::DiskStats(Box::new(disk_stats_from_c(&read(at))?)),
            DataType::NET_STATS => Value::NetStats(Box::new(net_stats_from_c(&read(at))?)),
            DataType::NODE_STATS => {
                let s: pmix_node_stats_t = read(at);
                let mut stats = NodeStats {
                    node: opt_owned(s.node)?,
                    sample_time: timeval_from_c(s.sample_time),
                    diskstats: slice_of(s.diskstats.cast_const(), s.ndiskstats)?
                        .iter()
                        .map(|d| disk_stats_from_c(d))
                        .collect::<Result<_>>()?,
                    netstats: slice_of(s.netstats.cast_const(), s.nnetstats)?
                        .iter()
                        .map(|n| net_stats_from_c(n))
                        .collect::<Result<_>>()?,
                    ..NodeStats::default()
                };
                stats.set_loads(s.loads);
                Value::NodeStats(Box::new(stats))
            }
            DataType::DATA_BUFFER => {
                // What a buffer holds is its packed bytes from its base, as OpenPMIx sends it.
                let b: pmix_data_buffer_t = read(at);
                if b.bytes_used > b.bytes_allocated {
                    return Err(BAD);
                }
                Value::DataBuffer(
                    slice_of(b.base_ptr.cast::<u8>().cast_const(), b.bytes_used)?.to_vec(),
                )
            }
            DataType::APP => Value::App(Box::new(super::app_from_c(&read(at))?)),
            DataType::QUERY => Value::Query(Box::new(super::query_from_c(&read(at))?)),
            DataType::PDATA => {
                let d: pmix_pdata_t = read(at);
                Value::Pdata(Box::new(Published {
                    proc: proc_from_c(&d.proc_)?,
                    key: key_from_c(&d.key)?,
                    value: value_at_depth(&d.value, depth + 1)?,
                }))
            }
            DataType::POINTER => Value::Pointer(read::<*mut u8>(at) as usize),
            DataType::DEVTYPE => Value::DevType(DeviceType(read(at))),
            DataType::STOR_MEDIUM => Value::StorageMedium(read(at)),
            DataType::STOR_ACCESS => Value::StorageAccess(read(at)),
            DataType::STOR_PERSIST => Value::StoragePersistence(read(at)),
            DataType::STOR_ACCESS_TYPE => Value::StorageAccessType(read(at)),
            _ => return Err(unconvertible(ty)),
        })
    }
}

/// Writes the element form of `v` (one of this module's types) at `at`; on failure what is
/// there is well formed for [`destruct`].
///
/// # Safety
/// As [`super::element_to_c`].
pub(super) unsafe fn to_c(v: &Value, at: *mut u8, depth: usize) -> Result<()> {
    // SAFETY (for every write below): `at` has room for the zeroed element form of v's type.
    unsafe {
        match v {
            Value::Coord(c) => coord_to_c(c, &mut *at.cast())?,
            Value::Geometry(g) => {
                let out = &mut *at.cast::<pmix_geometry_t>();
                out.fabric = usize::try_from(g.fabric).map_err(|_| BAD)?;
                out.uuid = c_opt_string(g.uuid.as_deref())?;
                out.osname = c_opt_string(g.osname.as_deref())?;
                out.coordinates = c_array(&g.coordinates, coord_to_c, coords_free)?;
                out.ncoords = g.coordinates.len();
            }
            Value::DeviceDist(d) => {
                let out = &mut *at.cast::<pmix_device_distance_t>();
                out.type_ = d.kind.0;
                out.mindist = d.mindist;
                out.maxdist = d.maxdist;
                out.uuid = c_opt_string(d.uuid.as_deref())?;
                out.osname = c_opt_string(d.osname.as_deref())?;
            }
            Value::Endpoint(e) => {
                let out = &mut *at.cast::<pmix_endpoint_t>();
                out.uuid = c_opt_string(e.uuid.as_deref())?;
                out.osname = c_opt_string(e.osname.as_deref())?;
                out.endpt = c_bytes(&e.address)?;
            }
            Value::ProcStats(s) => {
                let out = &mut *at.cast::<pmix_proc_stats_t>();
                out.proc_ = proc_to_c(&s.proc);
                out.pid = s.pid as libc::pid_t;
                out.state = s.state as c_char;
                out.time = timeval_to_c(s.time);
                out.percent_cpu = s.percent_cpu;
                out.priority = s.priority;
                out.num_threads = s.num_threads;
                out.pss = s.pss;
                out.vsize = s.vsize;
                out.rss = s.rss;
                out.peak_vsize = s.peak_vsize;
                out.processor = s.processor;
                out.sample_time = timeval_to_c(s.sample_time);
                out.node = c_opt_string(s.node.as_deref())?;
                out.cmd = c_opt_string(s.cmd.as_deref())?;
            }
            Value::DiskStats(d) => disk_stats_to_c(d, &mut *at.cast())?,
            Value::NetStats(n) => net_stats_to_c(n, &mut *at.cast())?,
            Value::NodeStats(s) => {
                let out = &mut *at.cast::<pmix_node_stats_t>();
                out.loads = s.loads();
                out.sample_time = timeval_to_c(s.sample_time);
                out.node = c_opt_string(s.node.as_deref())?;
                out.diskstats = c_array(&s.diskstats, disk_stats_to_c, disk_stats_free)?;
                out.ndiskstats = s.diskstats.len();
                out.netstats = c_array(&s.netstats, net_stats_to_c, net_stats_free)?;
                out.nnetstats = s.netstats.len();
            }
            Value::DataBuffer(b) => buffer_append(&mut *at.cast(), b)?,
            Value::App(a) => app_to_c(a, &mut *at.cast())?,
            Value::Query(q) => {
                let out = &mut *at.cast::<pmix_query_t>();
                let keys: Vec<&str> = q.keys.iter().map(|k| k.as_str()).collect();
                out.keys = argv_to_c(&keys)?;
                out.qualifiers = infos_to_c(&q.qualifiers)?;
                out.nqual = q.qualifiers.len();
            }
            Value::Pdata(d) => {
                let out = &mut *at.cast::<pmix_pdata_t>();
                out.proc_ = proc_to_c(&d.proc);
                fixed_from_str(d.key.as_str(), &mut out.key)?;
                write_value(&d.value, &mut out.value, depth + 1)?;
            }
            Value::Pointer(p) => write(at, *p as *mut u8),
            Value::DevType(t) => write(at, t.0),
            Value::StorageMedium(x) | Value::StorageAccess(x) | Value::StoragePersistence(x) => {
                write(at, *x)
            }
            Value::StorageAccessType(x) => write(at, *x),
            other => return Err(unconvertible(other.data_type())),
        }
    }
    Ok(())
}

/// Fills a zeroed `out` with `a`; on failure it is well formed for [`apps_destruct`].
fn app_to_c(a: &App, out: &mut pmix_app_t) -> Result<()> {
    out.maxprocs = i32::try_from(a.maxprocs).map_err(|_| BAD)?;
    out.cmd = c_string(&a.cmd)?;
    let argv: Vec<&str> = a.argv.iter().map(String::as_str).collect();
    out.argv = argv_to_c(&argv)?;
    let env: Vec<&str> = a.env.iter().map(String::as_str).collect();
    out.env = argv_to_c(&env)?;
    out.cwd = c_opt_string(Some(a.cwd.as_str()).filter(|c| !c.is_empty()))?;
    out.info = infos_to_c(&a.info)?;
    out.ninfo = a.info.len();
    Ok(())
}

/// Frees what the element form of `ty` (one of this module's) at `at` owns.
///
/// # Safety
/// As [`super::element_destruct`].
pub(super) unsafe fn destruct(ty: DataType, at: *mut u8, depth: usize) {
    // SAFETY: the element form of `ty` is at `at`, owning its memory, per the caller.
    unsafe {
        match ty {
            DataType::COORD => coord_destruct(&mut *at.cast()),
            DataType::GEOMETRY => {
                let g = &mut *at.cast::<pmix_geometry_t>();
                libc::free(g.uuid.cast());
                libc::free(g.osname.cast());
                coords_free(g.coordinates, g.ncoords);
                at.write_bytes(0, size_of::<pmix_geometry_t>());
            }
            DataType::DEVICE_DIST => {
                let d = &mut *at.cast::<pmix_device_distance_t>();
                libc::free(d.uuid.cast());
                libc::free(d.osname.cast());
                at.write_bytes(0, size_of::<pmix_device_distance_t>());
            }
            DataType::ENDPOINT => {
                let e = &mut *at.cast::<pmix_endpoint_t>();
                libc::free(e.uuid.cast());
                libc::free(e.osname.cast());
                libc::free(e.endpt.bytes.cast());
                at.write_bytes(0, size_of::<pmix_endpoint_t>());
            }
            DataType::PROC_STATS => {
                let s = &mut *at.cast::<pmix_proc_stats_t>();
                libc::free(s.node.cast());
                libc::free(s.cmd.cast());
                at.write_bytes(0, size_of::<pmix_proc_stats_t>());
            }
            DataType::DISK_STATS => {
                libc::free((*at.cast::<pmix_disk_stats_t>()).disk.cast());
                at.write_bytes(0, size_of::<pmix_disk_stats_t>());
            }
            DataType::NET_STATS => {
                libc::free((*at.cast::<pmix_net_stats_t>()).net_interface.cast());
                at.write_bytes(0, size_of::<pmix_net_stats_t>());
            }
            DataType::NODE_STATS => {
                let s = &mut *at.cast::<pmix_node_stats_t>();
                libc::free(s.node.cast());
                disk_stats_free(s.diskstats, s.ndiskstats);
                net_stats_free(s.netstats, s.nnetstats);
                at.write_bytes(0, size_of::<pmix_node_stats_t>());
            }
            DataType::DATA_BUFFER => buffer_destruct(at.cast()),
            DataType::APP => apps_destruct(at.cast(), 1),
            DataType::QUERY => {
                let q = &mut *at.cast::<pmix_query_t>();
                argv_free(q.keys);
                infos_free(q.qualifiers, q.nqual);
                at.write_bytes(0, size_of::<pmix_query_t>());
            }
            DataType::PDATA => {
                value_destruct_at(&mut (*at.cast::<pmix_pdata_t>()).value, depth + 1);
            }
            _ => {}
        }
    }
}
