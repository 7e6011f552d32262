//! Property and refusal tests of the C conversions: a value of every supported type survives
//! the trip to C and back; malformed C input is refused with a status, never read past.

use core::ffi::c_char;
use core::ptr;

use proptest::prelude::*;

use super::*;
use crate::ctypes::pmix_value_data;

fn key() -> impl Strategy<Value = Key> {
    "[a-z][a-z0-9._]{0,30}".prop_map(|s| Key::new(s).expect("a valid key"))
}

fn nspace() -> impl Strategy<Value = Nspace> {
    "[a-z][a-z0-9-]{0,40}".prop_map(|s| Nspace::new(s).expect("a valid namespace"))
}

fn text() -> impl Strategy<Value = String> {
    "[^\u{0}]{0,24}"
}

fn proc_() -> impl Strategy<Value = Proc> {
    (nspace(), any::<u32>()).prop_map(|(n, r)| Proc::new(n, Rank(r)))
}

fn opt_text() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(text())
}

fn real() -> impl Strategy<Value = f32> {
    -1e6f32..1e6
}

fn timeval() -> impl Strategy<Value = Timeval> {
    (any::<i64>(), any::<i64>()).prop_map(|(sec, usec)| Timeval { sec, usec })
}

fn coord() -> impl Strategy<Value = pmix_types::Coord> {
    (any::<u8>(), proptest::collection::vec(any::<u32>(), 0..4)).prop_map(|(v, coord)| {
        pmix_types::Coord {
            view: pmix_types::CoordView(v),
            coord,
        }
    })
}

fn disk() -> impl Strategy<Value = pmix_types::DiskStats> {
    (opt_text(), any::<[u64; 11]>())
        .prop_map(|(disk, c)| pmix_types::DiskStats::from_counters(disk, c))
}

fn net() -> impl Strategy<Value = pmix_types::NetStats> {
    (opt_text(), any::<[u64; 6]>())
        .prop_map(|(net_interface, c)| pmix_types::NetStats::from_counters(net_interface, c))
}

/// A value of a structured type of `pmix_common.h` that converts (`convert/structured.rs`),
/// and a NULL string.
fn structured() -> impl Strategy<Value = Value> {
    use pmix_types::{
        App, DeviceDistance, DeviceType, Endpoint, Geometry, NodeStats, ProcStats, Published, Query,
    };
    prop_oneof![
        Just(Value::NullString),
        coord().prop_map(|c| Value::Coord(Box::new(c))),
        (
            any::<u32>(),
            opt_text(),
            opt_text(),
            proptest::collection::vec(coord(), 0..3)
        )
            .prop_map(|(fabric, uuid, osname, coordinates)| {
                Value::Geometry(Box::new(Geometry {
                    fabric: fabric.into(),
                    uuid,
                    osname,
                    coordinates,
                }))
            }),
        (
            opt_text(),
            opt_text(),
            any::<u64>(),
            any::<u16>(),
            any::<u16>()
        )
            .prop_map(|(uuid, osname, kind, mindist, maxdist)| {
                Value::DeviceDist(Box::new(DeviceDistance {
                    uuid,
                    osname,
                    kind: DeviceType(kind),
                    mindist,
                    maxdist,
                }))
            }),
        (
            opt_text(),
            opt_text(),
            proptest::collection::vec(any::<u8>(), 0..16)
        )
            .prop_map(|(uuid, osname, address)| {
                Value::Endpoint(Box::new(Endpoint {
                    uuid,
                    osname,
                    address,
                }))
            }),
        (
            (opt_text(), proc_(), any::<u32>(), opt_text(), 0u8..128),
            (timeval(), real(), any::<i32>(), any::<u16>()),
            ([real(), real(), real(), real()], any::<u16>(), timeval()),
        )
            .prop_map(
                |(
                    (node, proc, pid, cmd, state),
                    (time, percent_cpu, priority, num_threads),
                    ([pss, vsize, rss, peak_vsize], processor, sample_time),
                )| {
                    Value::ProcStats(Box::new(ProcStats {
                        node,
                        proc,
                        pid,
                        cmd,
                        state,
                        time,
                        percent_cpu,
                        priority,
                        num_threads,
                        pss,
                        vsize,
                        rss,
                        peak_vsize,
                        processor,
                        sample_time,
                    }))
                }
            ),
        disk().prop_map(|d| Value::DiskStats(Box::new(d))),
        net().prop_map(|n| Value::NetStats(Box::new(n))),
        (
            opt_text(),
            proptest::array::uniform11(real()),
            timeval(),
            proptest::collection::vec(disk(), 0..2),
            proptest::collection::vec(net(), 0..2)
        )
            .prop_map(|(node, f, sample_time, diskstats, netstats)| {
                let mut stats = NodeStats {
                    node,
                    sample_time,
                    diskstats,
                    netstats,
                    ..NodeStats::default()
                };
                stats.set_loads(f);
                Value::NodeStats(Box::new(stats))
            }),
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(Value::DataBuffer),
        (
            text().prop_filter("a command", |c| !c.is_empty()),
            proptest::collection::vec(text(), 1..3),
            proptest::collection::vec(text(), 0..2),
            text(),
            0u32..1000,
            proptest::collection::vec((key(), any::<u32>()), 0..2)
        )
            .prop_map(|(cmd, argv, env, cwd, maxprocs, info)| {
                Value::App(Box::new(App {
                    cmd,
                    argv,
                    env,
                    cwd,
                    maxprocs,
                    info: info
                        .into_iter()
                        .map(|(k, v)| Info::new(k, Value::Uint32(v)))
                        .collect(),
                }))
            }),
        (
            proptest::collection::vec(key(), 0..3),
            proptest::collection::vec((key(), text()), 0..2)
        )
            .prop_map(|(keys, q)| {
                Value::Query(Box::new(Query {
                    keys,
                    qualifiers: q
                        .into_iter()
                        .map(|(k, v)| Info::new(k, Value::String(v)))
                        .collect(),
                }))
            }),
        (proc_(), key(), any::<i64>()).prop_map(|(proc, key, v)| {
            Value::Pdata(Box::new(Published {
                proc,
                key,
                value: Value::Int64(v),
            }))
        }),
        any::<usize>().prop_map(Value::Pointer),
        any::<u64>().prop_map(|t| Value::DevType(DeviceType(t))),
        any::<u64>().prop_map(Value::StorageMedium),
        any::<u64>().prop_map(Value::StorageAccess),
        any::<u64>().prop_map(Value::StoragePersistence),
        any::<u16>().prop_map(Value::StorageAccessType),
    ]
}

/// A value of any type that holds no other value.
fn leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        structured(),
        Just(Value::Undef),
        any::<bool>().prop_map(Value::Bool),
        any::<u8>().prop_map(Value::Byte),
        text().prop_map(Value::String),
        any::<u64>().prop_map(Value::Size),
        any::<u32>().prop_map(Value::Pid),
        any::<i32>().prop_map(Value::Int),
        any::<i8>().prop_map(Value::Int8),
        any::<i16>().prop_map(Value::Int16),
        any::<i32>().prop_map(Value::Int32),
        any::<i64>().prop_map(Value::Int64),
        any::<u32>().prop_map(Value::Uint),
        any::<u8>().prop_map(Value::Uint8),
        any::<u16>().prop_map(Value::Uint16),
        any::<u32>().prop_map(Value::Uint32),
        any::<u64>().prop_map(Value::Uint64),
        any::<f32>().prop_map(Value::Float),
        any::<f64>().prop_map(Value::Double),
        (any::<i64>(), any::<i64>()).prop_map(|(sec, usec)| Value::Timeval(Timeval { sec, usec })),
        any::<i64>().prop_map(Value::Time),
        any::<i32>().prop_map(|s| Value::Status(Status(s))),
        any::<u32>().prop_map(|r| Value::Rank(Rank(r))),
        proc_().prop_map(Value::Proc),
        nspace().prop_map(Value::Nspace),
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(Value::ByteObject),
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(Value::Regex),
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(Value::CompressedString),
        proptest::collection::vec(any::<u8>(), 0..64).prop_map(Value::CompressedBytes),
        any::<u8>().prop_map(|x| Value::Persistence(Persistence(x))),
        any::<u8>().prop_map(|x| Value::Scope(Scope(x))),
        any::<u8>().prop_map(|x| Value::DataRange(DataRange(x))),
        any::<u32>().prop_map(|x| Value::InfoDirectives(InfoFlags(x))),
        any::<u16>().prop_map(|x| Value::DataType(DataType(x))),
        any::<u8>().prop_map(|x| Value::ProcState(ProcState(x))),
        any::<u8>().prop_map(|x| Value::AllocDirective(AllocDirective(x))),
        any::<u16>().prop_map(|x| Value::IofChannel(IofChannel(x))),
        any::<u8>().prop_map(|x| Value::JobState(JobState(x))),
        any::<u8>().prop_map(|x| Value::LinkState(LinkState(x))),
        any::<u16>().prop_map(|x| Value::Locality(Locality(x))),
        (
            proc_(),
            text(),
            text(),
            any::<u32>(),
            any::<i32>(),
            any::<u8>()
        )
            .prop_map(|(proc, hostname, executable_name, pid, exit_code, state)| {
                Value::ProcInfo(Box::new(ProcInfo {
                    proc,
                    hostname,
                    executable_name,
                    pid,
                    exit_code,
                    state: ProcState(state),
                }))
            }),
        (text(), text(), 1u8..128).prop_map(|(name, value, separator)| Value::Envar(Envar {
            name,
            value,
            separator
        })),
        (
            text(),
            key(),
            any::<u16>(),
            proptest::collection::vec(text(), 0..3)
        )
            .prop_map(
                |(name, key, ty, description)| Value::RegAttr(Box::new(RegAttr {
                    name,
                    key: key.as_str().to_owned(),
                    ty: DataType(ty),
                    description,
                }))
            ),
    ]
}

/// A value of any supported type, with infos and arrays nested a few levels.
fn value() -> impl Strategy<Value = Value> {
    leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            (key(), inner.clone(), any::<u32>()).prop_map(|(key, value, flags)| {
                Value::Info(Box::new(Info {
                    key,
                    value,
                    flags: InfoFlags(flags),
                }))
            }),
            // Mixed types: an array of VALUE.
            proptest::collection::vec(inner.clone(), 0..4).prop_map(|items| {
                Value::from(DataArray::new(DataType::VALUE, items).expect("VALUE arrays mix"))
            }),
            // One type: as many copies of one element as asked.
            (inner, 0usize..4).prop_filter_map("no array of UNDEF", |(item, n)| {
                let ty = item.data_type();
                (ty != DataType::UNDEF)
                    .then(|| Value::from(DataArray::new(ty, vec![item; n]).expect("one type")))
            }),
        ]
    })
}

proptest! {
    #[test]
    fn every_supported_value_round_trips_through_c(v in value()) {
        let mut c = value_to_c(&v).expect("convertible");
        // SAFETY: `c` was just built by value_to_c.
        let back = unsafe { value_from_c(&c) };
        // SAFETY: as above; destruct frees everything and leaves UNDEF.
        unsafe { value_destruct(&mut c) };
        prop_assert_eq!(back, Ok(v));
        prop_assert_eq!(c.type_, DataType::UNDEF.0);
    }

    #[test]
    fn info_arrays_round_trip_through_c(infos in proptest::collection::vec(
        (key(), value()).prop_map(|(k, v)| Info::new(k, v)), 0..6)
    ) {
        let c = infos_to_c(&infos).expect("convertible");
        // SAFETY: `c` holds infos.len() entries just built.
        let back = unsafe { infos_from_c(c, infos.len()) };
        // SAFETY: as above.
        unsafe { infos_free(c, infos.len()) };
        prop_assert_eq!(back, Ok(infos));
    }

    #[test]
    fn infos_written_to_out_pointers_read_back(infos in proptest::collection::vec(
        (key(), value()).prop_map(|(k, v)| Info::new(k, v)), 0..6)
    ) {
        let mut results: *mut pmix_info_t = ptr::null_mut();
        let mut n = usize::MAX;
        // SAFETY: both out-pointers are ours.
        unsafe { infos_out(&infos, &mut results, &mut n) }.expect("convertible");
        prop_assert_eq!(n, infos.len());
        prop_assert_eq!(results.is_null(), infos.is_empty());
        // SAFETY: `results` holds `n` entries just built.
        let back = unsafe { infos_from_c(results, n) };
        // SAFETY: as above.
        unsafe { infos_free(results, n) };
        prop_assert_eq!(back, Ok(infos));
    }

    /// Published data handed to a lookup's callback: each entry's publisher, key and value as
    /// found.
    #[test]
    fn published_data_goes_to_c_whole(found in proptest::collection::vec(
        (proc_(), key(), value()), 0..6)
    ) {
        let p = pdata_to_c(&found).expect("convertible");
        prop_assert_eq!(p.is_null(), found.is_empty());
        for (n, (publisher, key, value)) in found.iter().enumerate() {
            // SAFETY: `p` holds found.len() entries just built.
            let entry = unsafe { &*p.add(n) };
            prop_assert_eq!(&proc_from_c(&entry.proc_).expect("a process"), publisher);
            prop_assert_eq!(&key_from_c(&entry.key).expect("a key"), key);
            // SAFETY: as above.
            prop_assert_eq!(&unsafe { value_from_c(&entry.value) }.expect("a value"), value);
        }
        // SAFETY: as above, freed once.
        unsafe { pdata_free(p, found.len()) };
    }

    /// A key array filled to the end with no NUL is refused, whatever its bytes.
    #[test]
    fn unterminated_keys_are_refused(fill in 1u8..=255) {
        let mut info = zeroed_info();
        info.key = [fill as c_char; MAX_KEYLEN_C];
        // SAFETY: one well-formed info but for its key.
        prop_assert_eq!(unsafe { infos_from_c(&info, 1) }, Err(Status::ERR_BAD_PARAM));
    }

    /// A type code outside the Standard's is a bad parameter; never read as any type.
    #[test]
    fn unknown_type_codes_are_refused(code in 70u16..u16::MAX) {
        let v = pmix_value_t { type_: code, data: pmix_value_data { uint64: 0 } };
        // SAFETY: the union is initialised.
        prop_assert_eq!(unsafe { value_from_c(&v) }, Err(Status::ERR_BAD_PARAM));
    }
}

const MAX_KEYLEN_C: usize = crate::ctypes::MAX_KEYLEN + 1;

fn zeroed_info() -> pmix_info_t {
    pmix_info_t {
        key: [0; MAX_KEYLEN_C],
        flags: 0,
        value: undef_value(),
    }
}

#[test]
fn a_null_string_comes_back_null_and_an_empty_one_empty() {
    let null = pmix_value_t {
        type_: DataType::STRING.0,
        data: pmix_value_data {
            string: ptr::null_mut(),
        },
    };
    // SAFETY: a string value holding NULL.
    let v = unsafe { value_from_c(&null) }.unwrap();
    assert_eq!(v, Value::NullString);
    assert_eq!(v.as_str(), Some(""));
    let mut c = value_to_c(&v).unwrap();
    assert_eq!(c.type_, DataType::STRING.0);
    // SAFETY: value_to_c wrote a string value.
    assert!(unsafe { c.data.string }.is_null());
    // SAFETY: built by value_to_c.
    unsafe { value_destruct(&mut c) };
    let mut empty = value_to_c(&Value::String(String::new())).unwrap();
    // SAFETY: as above.
    unsafe {
        assert!(!empty.data.string.is_null());
        assert_eq!(value_from_c(&empty), Ok(Value::String(String::new())));
        value_destruct(&mut empty);
    }
}

#[test]
fn types_of_the_standard_without_a_conversion_are_not_supported() {
    // hwloc's objects (this library links no hwloc) and OpenPMIx's internal structures.
    for ty in [
        DataType::TOPO,
        DataType::PROC_CPUSET,
        DataType::KVAL,
        DataType::BUFFER,
    ] {
        let v = pmix_value_t {
            type_: ty.0,
            data: pmix_value_data { uint64: 0 },
        };
        // SAFETY: the union is initialised.
        assert_eq!(
            unsafe { value_from_c(&v) },
            Err(Status::ERR_NOT_SUPPORTED),
            "{ty:?}"
        );
    }
}

#[test]
fn null_pointers_with_counts_are_refused() {
    // SAFETY: every call below is given NULL with a count, which must be refused unread.
    unsafe {
        assert_eq!(infos_from_c(ptr::null(), 3), Err(Status::ERR_BAD_PARAM));
        assert_eq!(procs_from_c(ptr::null(), 1), Err(Status::ERR_BAD_PARAM));
        assert_eq!(infos_from_c(ptr::null(), 0), Ok(vec![]));
    }
    let mut d = pmix_data_array_t {
        type_: DataType::UINT32.0,
        size: 5,
        array: ptr::null_mut(),
    };
    let v = pmix_value_t {
        type_: DataType::DATA_ARRAY.0,
        data: pmix_value_data { darray: &mut d },
    };
    // SAFETY: the array's NULL with its count of 5 is what is tested.
    assert_eq!(unsafe { value_from_c(&v) }, Err(Status::ERR_BAD_PARAM));
    // A pointer-held type with a NULL pointer.
    let v = pmix_value_t {
        type_: DataType::PROC.0,
        data: pmix_value_data {
            proc_: ptr::null_mut(),
        },
    };
    // SAFETY: as above.
    assert_eq!(unsafe { value_from_c(&v) }, Err(Status::ERR_BAD_PARAM));
    // A byte object claiming bytes it does not have.
    let v = pmix_value_t {
        type_: DataType::BYTE_OBJECT.0,
        data: pmix_value_data {
            bo: pmix_byte_object_t {
                bytes: ptr::null_mut(),
                size: 9,
            },
        },
    };
    // SAFETY: as above.
    assert_eq!(unsafe { value_from_c(&v) }, Err(Status::ERR_BAD_PARAM));
}

#[test]
fn arrays_too_large_to_address_are_refused_unread() {
    let mut one = 7u32;
    let mut d = pmix_data_array_t {
        type_: DataType::UINT32.0,
        size: usize::MAX / 2,
        array: ptr::from_mut(&mut one).cast(),
    };
    let v = pmix_value_t {
        type_: DataType::DATA_ARRAY.0,
        data: pmix_value_data { darray: &mut d },
    };
    // SAFETY: the count is what is tested: refused before any element is read.
    assert_eq!(unsafe { value_from_c(&v) }, Err(Status::ERR_BAD_PARAM));
}

#[test]
fn a_data_array_containing_itself_is_refused_at_the_depth_bound() {
    let element = Box::into_raw(Box::new(undef_value()));
    let d = Box::into_raw(Box::new(pmix_data_array_t {
        type_: DataType::VALUE.0,
        size: 1,
        array: element.cast(),
    }));
    // SAFETY: both are live boxes; a cycle of valid pointers: only the depth bound ends the
    // walk. Both are freed after.
    unsafe {
        (*element).type_ = DataType::DATA_ARRAY.0;
        (*element).data.darray = d;
        let v = pmix_value_t {
            type_: DataType::DATA_ARRAY.0,
            data: pmix_value_data { darray: d },
        };
        assert_eq!(value_from_c(&v), Err(Status::ERR_BAD_PARAM));
        drop(Box::from_raw(d));
        drop(Box::from_raw(element));
    }
}

#[test]
fn unterminated_namespaces_and_bad_text_are_refused() {
    let p = pmix_proc_t {
        nspace: [b'n' as c_char; crate::ctypes::MAX_NSLEN + 1],
        rank: 0,
    };
    assert_eq!(proc_from_c(&p), Err(Status::ERR_BAD_PARAM));
    let mut info = zeroed_info();
    info.key[..2].copy_from_slice(&[0xff_u8 as c_char, 0]);
    // SAFETY: one well-formed info but for its key, which is not UTF-8.
    assert_eq!(
        unsafe { infos_from_c(&info, 1) },
        Err(Status::ERR_BAD_PARAM)
    );
}

#[test]
fn strings_holding_a_nul_cannot_go_to_c() {
    assert_eq!(
        value_to_c(&Value::String("a\0b".into())).err(),
        Some(Status::ERR_BAD_PARAM)
    );
    // Half written when it fails: what was allocated is freed (run under a leak checker to
    // see it); the info array's first entry was fine.
    let infos = vec![
        Info::new(Key::new("k1").expect("key"), Value::String("fine".into())),
        Info::new(Key::new("k2").expect("key"), Value::String("bad\0".into())),
    ];
    assert_eq!(infos_to_c(&infos).err(), Some(Status::ERR_BAD_PARAM));
}

#[test]
fn data_buffers_grow_read_and_refuse_pointers_outside_their_bytes() {
    use crate::ctypes::pmix_data_buffer_t;
    let mut b = pmix_data_buffer_t {
        base_ptr: ptr::null_mut(),
        pack_ptr: ptr::null_mut(),
        unpack_ptr: ptr::null_mut(),
        bytes_allocated: 0,
        bytes_used: 0,
    };
    // SAFETY: the buffer is this test's, its memory the C allocator's throughout.
    unsafe {
        buffer_append(&mut b, b"hello").unwrap();
        buffer_append(&mut b, &[7u8; 100]).unwrap();
        assert_eq!(b.bytes_used, 105);
        assert!(b.bytes_allocated >= 105);
        assert_eq!(&buffer_unread(&b).unwrap()[..5], b"hello");
        buffer_consume(&mut b, 5).unwrap();
        assert_eq!(buffer_unread(&b).unwrap(), &[7u8; 100][..]);
        assert_eq!(buffer_consume(&mut b, 101), Err(Status::ERR_BAD_PARAM));
        // An unpack pointer outside the used bytes, more used than allocated: refused.
        let good = b.unpack_ptr;
        b.unpack_ptr = b.base_ptr.wrapping_add(200);
        assert!(buffer_unread(&b).is_err());
        b.unpack_ptr = good;
        b.bytes_used = b.bytes_allocated + 1;
        assert!(buffer_unread(&b).is_err());
        b.bytes_used = 105;
        let (bytes, n) = buffer_unload(&mut b).unwrap();
        assert_eq!(n, 100);
        assert!(b.base_ptr.is_null() && b.bytes_used == 0);
        buffer_load(&mut b, bytes, n).unwrap();
        assert_eq!(buffer_unread(&b).unwrap().len(), 100);
        buffer_destruct(&mut b);
    }
}
