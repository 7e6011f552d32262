//! The PMIx Standard's C types, laid out as C lays them out (`#[repr(C)]`), written from the
//! Standard's definitions: the structures a C caller hands this library and gets back.
//! `tests/layout.rs` compiles a C program against Debian's OpenPMIx 4.2 headers and checks
//! every size and field offset here against it.
//!
//! Nothing here reads memory; `convert` does, with every pointer and length checked. The
//! names are the Standard's, so they are not Rust's camel case.
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_int, c_uint, c_void};

/// `PMIX_MAX_NSLEN`: a namespace holds at most this many bytes before its NUL.
pub const MAX_NSLEN: usize = pmix_types::MAX_NSLEN;
/// `PMIX_MAX_KEYLEN`: a key holds at most this many bytes before its NUL.
pub const MAX_KEYLEN: usize = pmix_types::MAX_KEYLEN;

/// `pmix_status_t`.
pub type pmix_status_t = c_int;
/// `pmix_rank_t`.
pub type pmix_rank_t = u32;
/// `pmix_data_type_t`.
pub type pmix_data_type_t = u16;
/// `pmix_scope_t`.
pub type pmix_scope_t = u8;
/// `pmix_info_directives_t`.
pub type pmix_info_directives_t = u32;
/// `pmix_nspace_t`: a fixed array holding a NUL-terminated namespace.
pub type pmix_nspace_t = [c_char; MAX_NSLEN + 1];
/// `pmix_key_t`: a fixed array holding a NUL-terminated key.
pub type pmix_key_t = [c_char; MAX_KEYLEN + 1];

/// `pmix_proc_t`: a namespace and a rank.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_proc_t {
    /// The namespace, NUL-terminated within the array.
    pub nspace: pmix_nspace_t,
    /// The rank.
    pub rank: pmix_rank_t,
}

/// `pmix_byte_object_t`: `size` bytes at `bytes`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_byte_object_t {
    /// The bytes (may be NULL when `size` is 0).
    pub bytes: *mut c_char,
    /// How many.
    pub size: usize,
}

/// `pmix_envar_t`: an environment variable to set.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_envar_t {
    /// Its name.
    pub envar: *mut c_char,
    /// Its value.
    pub value: *mut c_char,
    /// The list separator, or 0.
    pub separator: c_char,
}

/// `struct timeval` as glibc on 64-bit Linux lays it out.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct timeval {
    /// Seconds.
    pub tv_sec: i64,
    /// Microseconds.
    pub tv_usec: i64,
}

/// `pmix_data_array_t`: `size` elements of C type `type_` at `array`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_data_array_t {
    /// The element type.
    pub type_: pmix_data_type_t,
    /// How many elements.
    pub size: usize,
    /// The elements, laid out as a C array of the type's C form.
    pub array: *mut c_void,
}

/// `pmix_proc_info_t`: what is known about one process.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_proc_info_t {
    /// The process.
    pub proc_: pmix_proc_t,
    /// Its host.
    pub hostname: *mut c_char,
    /// Its executable.
    pub executable_name: *mut c_char,
    /// Its pid.
    pub pid: libc::pid_t,
    /// Its exit code.
    pub exit_code: c_int,
    /// Its state (`pmix_proc_state_t`).
    pub state: u8,
}

/// `pmix_regattr_t`: a registered attribute.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_regattr_t {
    /// The attribute's C name.
    pub name: *mut c_char,
    /// Its key.
    pub string: pmix_key_t,
    /// Its value type.
    pub type_: pmix_data_type_t,
    /// Lines of description, a NULL-terminated array.
    pub description: *mut *mut c_char,
}

/// The union of `pmix_value_t`: one member per data type. The members this library reads
/// and writes are listed; the union is as large and as aligned as the Standard's (16 bytes:
/// `struct timeval`, a byte object, an envar's two pointers and separator are the largest).
#[repr(C)]
#[derive(Clone, Copy)]
pub union pmix_value_data {
    /// `PMIX_BOOL`.
    pub flag: bool,
    /// `PMIX_BYTE`.
    pub byte: u8,
    /// `PMIX_STRING`.
    pub string: *mut c_char,
    /// `PMIX_SIZE`.
    pub size: usize,
    /// `PMIX_PID`.
    pub pid: libc::pid_t,
    /// `PMIX_INT`.
    pub integer: c_int,
    /// `PMIX_INT8`.
    pub int8: i8,
    /// `PMIX_INT16`.
    pub int16: i16,
    /// `PMIX_INT32`.
    pub int32: i32,
    /// `PMIX_INT64`.
    pub int64: i64,
    /// `PMIX_UINT`.
    pub uint: c_uint,
    /// `PMIX_UINT8`.
    pub uint8: u8,
    /// `PMIX_UINT16`.
    pub uint16: u16,
    /// `PMIX_UINT32`.
    pub uint32: u32,
    /// `PMIX_UINT64`.
    pub uint64: u64,
    /// `PMIX_FLOAT`.
    pub fval: f32,
    /// `PMIX_DOUBLE`.
    pub dval: f64,
    /// `PMIX_TIMEVAL`.
    pub tv: timeval,
    /// `PMIX_TIME`.
    pub time: libc::time_t,
    /// `PMIX_STATUS`.
    pub status: pmix_status_t,
    /// `PMIX_PROC_RANK`.
    pub rank: pmix_rank_t,
    /// `PMIX_PROC_NSPACE`.
    pub nspace: *mut pmix_nspace_t,
    /// `PMIX_PROC`.
    pub proc_: *mut pmix_proc_t,
    /// `PMIX_BYTE_OBJECT`, `PMIX_REGEX`, `PMIX_COMPRESSED_*`.
    pub bo: pmix_byte_object_t,
    /// `PMIX_PROC_INFO`.
    pub pinfo: *mut pmix_proc_info_t,
    /// `PMIX_DATA_ARRAY`.
    pub darray: *mut pmix_data_array_t,
    /// `PMIX_POINTER`, and the pointee of `PMIX_INFO` and `PMIX_REGATTR` values.
    pub ptr: *mut c_void,
    /// `PMIX_ENVAR`.
    pub envar: pmix_envar_t,
}

/// `pmix_value_t`: a type tag and the union member it names.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_value_t {
    /// The data type (`PMIX_UINT32`, ...).
    pub type_: pmix_data_type_t,
    /// The value.
    pub data: pmix_value_data,
}

/// `pmix_info_t`: a key, directive flags and a value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_info_t {
    /// The key, NUL-terminated within the array.
    pub key: pmix_key_t,
    /// Directive flags.
    pub flags: pmix_info_directives_t,
    /// The value.
    pub value: pmix_value_t,
}

/// `pmix_pdata_t`: a published datum: its publisher, key and value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_pdata_t {
    /// The publisher.
    pub proc_: pmix_proc_t,
    /// The key.
    pub key: pmix_key_t,
    /// The value.
    pub value: pmix_value_t,
}

/// `pmix_app_t`: one application context of a spawn.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_app_t {
    /// The command.
    pub cmd: *mut c_char,
    /// Its arguments, a NULL-terminated array.
    pub argv: *mut *mut c_char,
    /// Environment additions, a NULL-terminated array of `NAME=value`.
    pub env: *mut *mut c_char,
    /// The working directory.
    pub cwd: *mut c_char,
    /// How many processes.
    pub maxprocs: c_int,
    /// Directives.
    pub info: *mut pmix_info_t,
    /// How many directives.
    pub ninfo: usize,
}

/// `pmix_query_t`: keys to ask about and qualifiers.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_query_t {
    /// The keys, a NULL-terminated array.
    pub keys: *mut *mut c_char,
    /// Qualifiers.
    pub qualifiers: *mut pmix_info_t,
    /// How many qualifiers.
    pub nqual: usize,
}

/// `pmix_op_cbfunc_t`: the completion of an operation that returns only a status.
pub type pmix_op_cbfunc_t =
    Option<unsafe extern "C" fn(status: pmix_status_t, cbdata: *mut c_void)>;

/// `pmix_spawn_cbfunc_t`: the completion of `PMIx_Spawn_nb`, with the new job's namespace
/// (the library's, released when the callback returns).
pub type pmix_spawn_cbfunc_t =
    Option<unsafe extern "C" fn(status: pmix_status_t, nspace: *mut c_char, cbdata: *mut c_void)>;

/// `pmix_lookup_cbfunc_t`: the completion of `PMIx_Lookup_nb`, with the data found (the
/// library's, released when the callback returns).
pub type pmix_lookup_cbfunc_t = Option<
    unsafe extern "C" fn(
        status: pmix_status_t,
        data: *mut pmix_pdata_t,
        ndata: usize,
        cbdata: *mut c_void,
    ),
>;

/// `pmix_value_cbfunc_t`: the completion of `PMIx_Get_nb`; the value belongs to the library
/// and is released when the callback returns.
pub type pmix_value_cbfunc_t =
    Option<unsafe extern "C" fn(status: pmix_status_t, kv: *mut pmix_value_t, cbdata: *mut c_void)>;

/// `pmix_data_range_t`.
pub type pmix_data_range_t = u8;

/// `pmix_data_buffer_t`: packed bytes. `base_ptr` holds `bytes_allocated` bytes, of which
/// `bytes_used` are packed; `pack_ptr` is where the next pack writes (`base_ptr +
/// bytes_used`), `unpack_ptr` where the next unpack reads.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_data_buffer_t {
    /// The allocation (from the C allocator), or NULL.
    pub base_ptr: *mut c_char,
    /// The end of the packed bytes.
    pub pack_ptr: *mut c_char,
    /// The next byte to unpack.
    pub unpack_ptr: *mut c_char,
    /// The allocation's size.
    pub bytes_allocated: usize,
    /// How many bytes are packed.
    pub bytes_used: usize,
}

/// `pmix_topology_t`: a topology and the library that describes it.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_topology_t {
    /// The describing library's name (`"hwloc"`).
    pub source: *mut c_char,
    /// The library's object.
    pub topology: *mut c_void,
}

/// `pmix_cpuset_t`: a set of processors and the library that describes it.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_cpuset_t {
    /// The describing library's name.
    pub source: *mut c_char,
    /// The library's bitmap.
    pub bitmap: *mut c_void,
}

/// `pmix_release_cbfunc_t`: how a callback hands back memory the library lent it.
pub type pmix_release_cbfunc_t = Option<unsafe extern "C" fn(cbdata: *mut c_void)>;

/// `pmix_info_cbfunc_t`: the completion of a call answering infos (`PMIx_Query_info_nb`,
/// `PMIx_Job_control_nb`); the callback calls `release_fn(release_cbdata)` when done with
/// them.
pub type pmix_info_cbfunc_t = Option<
    unsafe extern "C" fn(
        status: pmix_status_t,
        info: *mut pmix_info_t,
        ninfo: usize,
        cbdata: *mut c_void,
        release_fn: pmix_release_cbfunc_t,
        release_cbdata: *mut c_void,
    ),
>;

/// `pmix_iof_channel_t`: a bit set of I/O channels.
pub type pmix_iof_channel_t = u16;

/// `pmix_iof_cbfunc_t`: a tool's handler of pulled output, given the pull's reference, the
/// channel, the source and the bytes (the library's, for the call only).
pub type pmix_iof_cbfunc_t = Option<
    unsafe extern "C" fn(
        iofhdlr: usize,
        channel: pmix_iof_channel_t,
        source: *mut pmix_proc_t,
        payload: *mut pmix_byte_object_t,
        info: *mut pmix_info_t,
        ninfo: usize,
    ),
>;

/// `pmix_hdlr_reg_cbfunc_t`: the completion of `PMIx_Register_event_handler`.
pub type pmix_hdlr_reg_cbfunc_t =
    Option<unsafe extern "C" fn(status: pmix_status_t, refid: usize, cbdata: *mut c_void)>;

/// `pmix_event_notification_cbfunc_fn_t`: what an event handler calls when it is done with
/// an event: its status, results for the handlers after it, and `cbfunc(thiscbdata)` for the
/// library to call once it no longer needs the results.
pub type pmix_event_notification_cbfunc_fn_t = Option<
    unsafe extern "C" fn(
        status: pmix_status_t,
        results: *mut pmix_info_t,
        nresults: usize,
        cbfunc: pmix_op_cbfunc_t,
        thiscbdata: *mut c_void,
        notification_cbdata: *mut c_void,
    ),
>;

/// `pmix_notification_fn_t`: an event handler.
pub type pmix_notification_fn_t = Option<
    unsafe extern "C" fn(
        evhdlr_registration_id: usize,
        status: pmix_status_t,
        source: *const pmix_proc_t,
        info: *mut pmix_info_t,
        ninfo: usize,
        results: *mut pmix_info_t,
        nresults: usize,
        cbfunc: pmix_event_notification_cbfunc_fn_t,
        cbdata: *mut c_void,
    ),
>;

/// `pmix_coord_t`: a point in a fabric's coordinate space.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_coord_t {
    /// Logical or physical (`pmix_coord_view_t`).
    pub view: u8,
    /// `dims` values.
    pub coord: *mut u32,
    /// How many dimensions.
    pub dims: usize,
}

/// `pmix_geometry_t`: where a device sits in a fabric.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_geometry_t {
    /// The fabric's index.
    pub fabric: usize,
    /// The device's UUID.
    pub uuid: *mut c_char,
    /// The device's name in the operating system.
    pub osname: *mut c_char,
    /// `ncoords` coordinates.
    pub coordinates: *mut pmix_coord_t,
    /// How many coordinates.
    pub ncoords: usize,
}

/// `pmix_device_distance_t`: how far a process is from a device.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_device_distance_t {
    /// The device's UUID.
    pub uuid: *mut c_char,
    /// The device's name in the operating system.
    pub osname: *mut c_char,
    /// Its kind (`pmix_device_type_t`).
    pub type_: u64,
    /// Distance from the nearest CPU of the binding.
    pub mindist: u16,
    /// Distance from the farthest.
    pub maxdist: u16,
}

/// `pmix_endpoint_t`: a fabric endpoint.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_endpoint_t {
    /// The device's UUID.
    pub uuid: *mut c_char,
    /// The device's name in the operating system.
    pub osname: *mut c_char,
    /// The endpoint's address.
    pub endpt: pmix_byte_object_t,
}

/// `pmix_proc_stats_t`: one sample of a process's usage.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_proc_stats_t {
    /// Its node.
    pub node: *mut c_char,
    /// The process.
    pub proc_: pmix_proc_t,
    /// Its pid.
    pub pid: libc::pid_t,
    /// Its command.
    pub cmd: *mut c_char,
    /// Its state letter.
    pub state: c_char,
    /// CPU time used.
    pub time: timeval,
    /// CPU use in percent.
    pub percent_cpu: f32,
    /// Priority.
    pub priority: i32,
    /// Threads.
    pub num_threads: u16,
    /// Proportional set size.
    pub pss: f32,
    /// Virtual size.
    pub vsize: f32,
    /// Resident set size.
    pub rss: f32,
    /// Peak virtual size.
    pub peak_vsize: f32,
    /// The CPU it last ran on.
    pub processor: u16,
    /// When sampled.
    pub sample_time: timeval,
}

/// `pmix_disk_stats_t`: one sample of a disk's counters.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_disk_stats_t {
    /// The disk.
    pub disk: *mut c_char,
    /// The counters, in the struct's order (reads completed ... weighted milliseconds).
    pub counters: [u64; 11],
}

/// `pmix_net_stats_t`: one sample of an interface's counters.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_net_stats_t {
    /// The interface.
    pub net_interface: *mut c_char,
    /// The counters, in the struct's order (bytes received ... send errors).
    pub counters: [u64; 6],
}

/// `pmix_node_stats_t`: one sample of a node's load, memory, disks and interfaces.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmix_node_stats_t {
    /// The node.
    pub node: *mut c_char,
    /// Loads and memory, in the struct's order (`la` ... `mapped`).
    pub loads: [f32; 11],
    /// When sampled.
    pub sample_time: timeval,
    /// `ndiskstats` disk samples.
    pub diskstats: *mut pmix_disk_stats_t,
    /// How many.
    pub ndiskstats: usize,
    /// `nnetstats` interface samples.
    pub netstats: *mut pmix_net_stats_t,
    /// How many.
    pub nnetstats: usize,
}
