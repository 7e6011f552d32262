//! The exported functions that need no server, called as C would call them: the enumeration
//! strings beyond the codes `pmix_capi_more.c` compares with libpmix's (unknown codes, bits
//! libpmix ignores), attribute names, node and process maps read back by `pmix-regex`, and the
//! requests answered `PMIX_ERR_NOT_SUPPORTED` (out-pointers emptied, nothing else touched),
//! the argv helpers' corner cases (`pmix_capi_helpers.c` compares the common ones with
//! OpenPMIx 5.0.11).
#![allow(unsafe_code)]

use core::ffi::{CStr, c_char, c_int};
use std::ptr;

use pmix_capi::ctypes::{pmix_byte_object_t, pmix_info_t};
use pmix_capi::exports::{argv, regex, strings, topology, unsupported};

/// The text of a C string the library answered.
fn text(p: *const c_char) -> String {
    assert!(!p.is_null());
    // SAFETY: the library answers NUL-terminated strings that live as long as it is loaded.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .expect("UTF-8")
        .to_owned()
}

/// `PMIX_ERR_NOT_SUPPORTED`, `PMIX_ERR_BAD_PARAM`, `PMIX_ERR_INIT`, `PMIX_ERR_EXISTS`.
const NOT_SUPPORTED: i32 = -47;
const BAD_PARAM: i32 = -27;
const INIT: i32 = -31;
const EXISTS: i32 = -11;

#[test]
fn enumeration_strings_cover_unknown_codes_and_every_bit() {
    assert_eq!(text(strings::PMIx_Alloc_directive_string(4)), "REACQUIRE");
    assert_eq!(
        text(strings::PMIx_Alloc_directive_string(200)),
        "UNSPECIFIED"
    );
    assert_eq!(text(strings::PMIx_IOF_channel_string(0x8)), "STDDIAG ");
    assert_eq!(text(strings::PMIx_IOF_channel_string(0x5)), "STDIN STDERR ");
    // Bits above stddiag name no channel.
    assert_eq!(text(strings::PMIx_IOF_channel_string(0x10)), "NONE");
    assert_eq!(text(strings::PMIx_Link_state_string(9)), "UNKNOWN");
    assert_eq!(text(strings::PMIx_Device_type_string(0x10)), "DMA");
    // Several types at once name none.
    assert_eq!(text(strings::PMIx_Device_type_string(0x6)), "UNKNOWN");
    assert_eq!(text(strings::PMIx_Value_comparison_string(-1)), "UNKNOWN");
    for (flags, want) in [
        (0x1 | 0x4, "REQUIRED:PROCESSED"),
        (0x10, "OPTIONAL:PERSISTENT"),
        (0x8 | 0x1, "QUALIFIER"),
        (0x8000_0000, "OPTIONAL"),
    ] {
        let p = strings::PMIx_Info_directives_string(flags);
        assert_eq!(text(p), want, "{flags:#x}");
        // SAFETY: new memory from the C allocator, the caller's to free.
        unsafe { libc::free(p.cast()) };
    }
}

#[test]
fn attribute_names_and_keys_map_both_ways() {
    // SAFETY: C strings, or NULL, as the Standard's contract has them.
    unsafe {
        assert_eq!(
            text(strings::PMIx_Get_attribute_name(c"pmix.job.size".as_ptr())),
            "PMIX_JOB_SIZE"
        );
        let user = c"my.key".as_ptr();
        assert_eq!(strings::PMIx_Get_attribute_name(user), user);
        assert!(strings::PMIx_Get_attribute_name(ptr::null()).is_null());
        assert_eq!(
            text(strings::PMIx_Get_attribute_string(
                c"PMIX_JOB_SIZE".as_ptr()
            )),
            "pmix.job.size"
        );
        assert!(strings::PMIx_Get_attribute_string(c"PMIX_NO_SUCH".as_ptr()).is_null());
    }
}

/// Calls `generate` on `input` and returns the map it wrote, freed.
fn generated(
    generate: unsafe extern "C" fn(*const c_char, *mut *mut c_char) -> i32,
    input: &CStr,
) -> Result<Vec<u8>, i32> {
    let mut out: *mut c_char = ptr::null_mut();
    // SAFETY: a C string and an out-pointer of ours.
    let rc = unsafe { generate(input.as_ptr(), &mut out) };
    if rc != 0 {
        assert!(out.is_null(), "nothing written on failure");
        return Err(rc);
    }
    let map = text(out).into_bytes();
    // SAFETY: new memory from the C allocator, the caller's to free.
    unsafe { libc::free(out.cast()) };
    Ok(map)
}

#[test]
fn node_and_process_maps_read_back() {
    let nodes = generated(regex::PMIx_generate_regex, c"c001,c002,c005").expect("a node map");
    assert_eq!(
        pmix_regex::parse_regex(&nodes).expect("readable"),
        ["c001", "c002", "c005"]
    );
    let ppn = generated(regex::PMIx_generate_ppn, c"0,1;2-4").expect("a process map");
    assert_eq!(
        pmix_regex::parse_ppn(&ppn).expect("readable"),
        [vec![0, 1], vec![2, 3, 4]]
    );
    assert_eq!(
        generated(regex::PMIx_generate_regex, c"a,,b"),
        Err(BAD_PARAM)
    );
    assert_eq!(generated(regex::PMIx_generate_ppn, c"0;x"), Err(BAD_PARAM));
    // SAFETY: NULL input, refused before any read.
    let rc = unsafe { regex::PMIx_generate_regex(ptr::null(), &mut ptr::null_mut()) };
    assert_eq!(rc, BAD_PARAM);
}

#[test]
fn requests_without_a_wire_form_are_not_supported_with_results_emptied() {
    let mut results = ptr::dangling_mut::<pmix_info_t>();
    let mut n = 7usize;
    // SAFETY (here and below): out-pointers of ours.
    let rc = unsafe {
        unsupported::PMIx_Allocation_request(1, ptr::null_mut(), 0, &mut results, &mut n)
    };
    assert_eq!((rc, results.is_null(), n), (NOT_SUPPORTED, true, 0));
    let (mut results, mut n) = (ptr::dangling_mut::<pmix_info_t>(), 7usize);
    let rc = unsafe {
        unsupported::PMIx_Process_monitor(ptr::null(), 0, ptr::null(), 0, &mut results, &mut n)
    };
    assert_eq!((rc, results.is_null(), n), (NOT_SUPPORTED, true, 0));
    let (mut results, mut n) = (ptr::dangling_mut::<pmix_info_t>(), 7usize);
    let rc = unsafe {
        unsupported::PMIx_Validate_credential(ptr::null(), ptr::null(), 0, &mut results, &mut n)
    };
    assert_eq!((rc, results.is_null(), n), (NOT_SUPPORTED, true, 0));
    let mut cred = pmix_byte_object_t {
        bytes: ptr::dangling_mut(),
        size: 3,
    };
    let rc = unsafe { unsupported::PMIx_Get_credential(ptr::null(), 0, &mut cred) };
    assert_eq!(
        (rc, cred.bytes.is_null(), cred.size),
        (NOT_SUPPORTED, true, 0)
    );
    let null = ptr::null_mut();
    assert_eq!(
        unsupported::PMIx_Fabric_register(null, ptr::null(), 0),
        NOT_SUPPORTED
    );
    assert_eq!(unsupported::PMIx_Fabric_update(null), NOT_SUPPORTED);
    assert_eq!(unsupported::PMIx_Fabric_deregister(null), NOT_SUPPORTED);
    assert_eq!(
        unsupported::PMIx_Register_attributes(null.cast(), null.cast()),
        NOT_SUPPORTED
    );
    assert_eq!(
        topology::PMIx_Parse_cpuset_string(c"hwloc:0-3".as_ptr(), null.cast()),
        NOT_SUPPORTED
    );
}

#[test]
fn relative_locality_needs_an_initialized_library() {
    let mut loc = 0u16;
    // SAFETY: two C strings and an out-pointer of ours.
    let rc = unsafe {
        topology::PMIx_Get_relative_locality(
            c"hwloc:SK0:L30".as_ptr(),
            c"hwloc:SK0:L31".as_ptr(),
            &mut loc,
        )
    };
    assert_eq!((rc, loc), (INIT, 0));
}

/// The strings of a C list, which is then freed.
fn taken(l: *mut *mut c_char) -> Vec<String> {
    let mut out = Vec::new();
    for n in 0.. {
        // SAFETY: a NULL-terminated list the library made.
        let s = unsafe { *l.add(n) };
        if s.is_null() {
            break;
        }
        out.push(text(s));
    }
    // SAFETY: the library's list, the caller's to free.
    unsafe { argv::PMIx_Argv_free(l) };
    out
}

#[test]
fn argv_lists_split_join_and_set_environment_lists() {
    // SAFETY (the whole test): C strings and lists of the library's, as the headers' macros
    // pass them.
    unsafe {
        let sep = c_int::from(b',');
        assert_eq!(
            taken(argv::PMIx_Argv_split(c"a,,b,".as_ptr(), sep)),
            ["a", "b"]
        );
        assert_eq!(
            taken(argv::PMIx_Argv_split_with_empty(c",a,,b,".as_ptr(), sep)),
            ["", "a", "", "b"]
        );
        assert!(argv::PMIx_Argv_split(c",".as_ptr(), sep).is_null());
        assert!(argv::PMIx_Argv_split(c"a".as_ptr(), 300).is_null());
        let joined = argv::PMIx_Argv_join(ptr::null_mut(), sep);
        assert_eq!(text(joined), "");
        libc::free(joined.cast());

        let mut env: *mut *mut c_char = ptr::null_mut();
        let set = |env: &mut *mut *mut c_char, name: &CStr, value: &CStr, over: bool| {
            argv::PMIx_Setenv(name.as_ptr(), value.as_ptr(), over, env)
        };
        assert_eq!(set(&mut env, c"X", c"1", false), 0);
        assert_eq!(set(&mut env, c"X", c"2", false), EXISTS);
        assert_eq!(set(&mut env, c"X=Y", c"2", true), BAD_PARAM);
        assert_eq!(taken(env), ["X=1"]);
    }
}
