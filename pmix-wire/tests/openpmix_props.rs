//! Property tests of the OpenPMIx codec: every value, info and handshake survives encode and
//! decode in every dialect (exactly, or in the documented wire form: floats to six decimals,
//! a proc info without its exit code, an `UNDEF` array without its count), encodings the wire
//! cannot carry are refused rather than garbled, and arbitrary bytes never panic a decoder.

#![allow(clippy::unwrap_used)]

mod strategies;

use pmix_types::{DataArray, DataType, Info, ProcInfo, ProcStats, Status, Value};
use pmix_wire::Error;
use pmix_wire::openpmix::{
    BufferType, ClientHandshake, Codec, Dialect, Header, Identity, Kval, MsgReader, Packer,
    PeerFlag, ServerReply, ToolReply, Unpacker,
};
use proptest::collection::vec;
use proptest::prelude::*;
use strategies::{dialect, info, key, nspace, proc_, value};

/// Replaces floats by ones six decimals represent exactly (their loss is tested apart).
fn exact_floats(v: Value) -> Value {
    match v {
        Value::Float(f) => Value::Float((f.to_bits() % 4096) as f32 / 64.0),
        Value::Double(d) => Value::Double((d.to_bits() % 65536) as f64 / -64.0),
        Value::DataArray(a) => {
            let ty = a.elem_type();
            let items = a.into_items().into_iter().map(exact_floats).collect();
            Value::from(DataArray::new(ty, items).unwrap())
        }
        Value::Info(i) => Value::Info(Box::new(Info {
            value: exact_floats(i.value),
            ..*i
        })),
        other => other,
    }
}

fn has_nul(s: &str) -> bool {
    s.contains('\0')
}

/// What `v` decodes as after a trip through `codec`, or `None` when encoding must fail.
fn wire_form(v: &Value, codec: Codec) -> Option<Value> {
    if !codec.knows(v.data_type()) {
        return None;
    }
    Some(match v {
        Value::String(s) if has_nul(s) => return None,
        Value::ProcInfo(p) => {
            if has_nul(&p.hostname) || has_nul(&p.executable_name) {
                return None;
            }
            Value::ProcInfo(Box::new(ProcInfo {
                exit_code: 0,
                ..(**p).clone()
            }))
        }
        Value::Envar(e) if has_nul(&e.name) || has_nul(&e.value) => return None,
        Value::RegAttr(r)
            if has_nul(&r.name) || has_nul(&r.key) || r.description.iter().any(|d| has_nul(d)) =>
        {
            return None;
        }
        Value::Regex(r) => {
            let blob = r.starts_with(b"blob") && r.contains(&0);
            if r.contains(&0) && !blob {
                return None;
            }
            if blob {
                // Arbitrary bytes are not a well-formed zlib map; skip the case.
                return None;
            }
            v.clone()
        }
        Value::DataArray(a) => {
            if !codec.knows(a.elem_type()) {
                return None;
            }
            if a.elem_type() == DataType::UNDEF {
                Value::from(DataArray::new(DataType::UNDEF, Vec::new()).unwrap())
            } else {
                let items = a
                    .items()
                    .iter()
                    .map(|i| wire_form(i, codec))
                    .collect::<Option<Vec<_>>>()?;
                Value::from(DataArray::new(a.elem_type(), items).unwrap())
            }
        }
        Value::Info(i) => Value::Info(Box::new(Info {
            value: wire_form(&i.value, codec)?,
            ..(**i).clone()
        })),
        // The structured types: C strings cannot hold a NUL (`Debug` shows one as `\0`).
        Value::App(_)
        | Value::Pdata(_)
        | Value::Kval(_)
        | Value::Query(_)
        | Value::Coord(_)
        | Value::Cpuset(_)
        | Value::Geometry(_)
        | Value::DeviceDist(_)
        | Value::Endpoint(_)
        | Value::Topology(_)
        | Value::ProcStats(_)
        | Value::DiskStats(_)
        | Value::NetStats(_)
        | Value::NodeStats(_)
            if format!("{v:?}").contains("\\0") =>
        {
            return None;
        }
        Value::App(a) if i32::try_from(a.maxprocs).is_err() => return None,
        // Not carried: the CPU percentage.
        Value::ProcStats(p) => Value::ProcStats(Box::new(ProcStats {
            percent_cpu: 0.0,
            ..(**p).clone()
        })),
        Value::Pointer(_) => return None,
        other => other.clone(),
    })
}

fn encode_value(v: &Value, d: Dialect) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    Packer::new(&mut out, d).pack_one(v)?;
    Ok(out)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn values_round_trip_in_every_dialect(v in value().prop_map(exact_floats), d in dialect()) {
        let Some(want) = wire_form(&v, d.codec) else {
            // Refused, never garbled (a regex whose bytes look like a zlib map may pass).
            if let Ok(bytes) = encode_value(&v, d) {
                let mut u = Unpacker::new(&bytes, d);
                let _ = u.unpack_one::<Value>();
            }
            return Ok(());
        };
        let bytes = encode_value(&v, d).unwrap();
        let mut u = Unpacker::new(&bytes, d);
        prop_assert_eq!(u.unpack_one::<Value>().unwrap(), want);
        u.finish().unwrap();
        // Every strict prefix is cut short, never misread.
        for n in 0..bytes.len() {
            let mut u = Unpacker::new(&bytes[..n], d);
            let r = u.unpack_one::<Value>();
            prop_assert!(r.is_err() || !u.is_empty() || n == bytes.len(), "prefix {} decoded: {:?}", n, r);
        }
    }

    #[test]
    fn infos_and_kvals_round_trip(infos in vec(info(), 0..4), d in dialect()) {
        let infos: Vec<Info> = infos
            .into_iter()
            .map(|i| Info { value: exact_floats(i.value), ..i })
            .filter(|i| wire_form(&i.value, d.codec).as_ref() == Some(&i.value))
            .collect();
        let kvals: Vec<Kval> = infos.iter().map(|i| Kval::new(i.key.clone(), i.value.clone())).collect();
        let mut out = Vec::new();
        let mut p = Packer::new(&mut out, d);
        p.pack(&infos).unwrap();
        p.pack(&kvals).unwrap();
        let mut u = Unpacker::new(&out, d);
        prop_assert_eq!(u.unpack::<Info>().unwrap(), infos);
        prop_assert_eq!(u.unpack::<Kval>().unwrap(), kvals);
        u.finish().unwrap();
    }

    #[test]
    fn floats_keep_six_decimals(x in any::<f64>(), y in any::<f32>(), d in dialect()) {
        for v in [Value::Double(x), Value::Float(y)] {
            let bytes = encode_value(&v, d).unwrap();
            let got = Unpacker::new(&bytes, d).unpack_one::<Value>().unwrap();
            let (orig, back) = match (&v, &got) {
                (Value::Double(a), Value::Double(b)) => (*a, *b),
                (Value::Float(a), Value::Float(b)) => (f64::from(*a), f64::from(*b)),
                _ => panic!("type changed: {got:?}"),
            };
            if orig.is_nan() {
                prop_assert!(back.is_nan());
            } else if orig.is_infinite() {
                prop_assert_eq!(orig, back);
            } else {
                // Six decimals, then the nearest f32/f64: half a unit of the sixth decimal,
                // plus the float's own rounding.
                let tol = 5e-7 + orig.abs() * 1e-7;
                prop_assert!((orig - back).abs() <= tol, "{} came back as {}", orig, back);
            }
        }
    }

    #[test]
    fn handshakes_round_trip(
        p in proc_(),
        uid in any::<u32>(),
        gid in any::<u32>(),
        flag in 0u8..10,
        d in dialect(),
        infos in vec(info(), 0..3),
        stray in any::<bool>(),
        gds in prop::sample::select(vec!["hash", "ds21", "ds12"]),
    ) {
        let identity = match flag {
            0 => Identity::Client(p),
            1 | 2 | 3 | 6 => Identity::Ids { flag: PeerFlag(flag), uid, gid },
            _ => Identity::IdsAndProc { flag: PeerFlag(flag), uid, gid, proc: p },
        };
        let infos: Vec<Info> = infos
            .into_iter()
            .map(|i| Info { value: exact_floats(i.value), ..i })
            .filter(|i| wire_form(&i.value, d.codec).as_ref() == Some(&i.value))
            .collect();
        let hs = ClientHandshake {
            psec: "native".into(),
            credential: pmix_wire::openpmix::native_credential(uid, gid).to_vec(),
            identity,
            version: "4.2.2".into(),
            bfrops: d.codec.name().into(),
            buffer_type: d.buffer,
            gds: gds.into(),
            info: infos,
            stray_byte: stray,
        };
        let mut out = Vec::new();
        hs.encode(&mut out).unwrap();
        let (back, used) = ClientHandshake::decode_message(&out).unwrap().unwrap();
        prop_assert_eq!(used, out.len());
        prop_assert_eq!(&back, &hs);
        prop_assert_eq!(back.dialect().unwrap(), d);
        // Byte by byte through a reader.
        let mut r = MsgReader::new(1 << 20);
        for b in &out[..out.len() - 1] {
            r.feed(std::slice::from_ref(b));
            prop_assert!(r.next_message().unwrap().is_none());
        }
        r.feed(&out[out.len() - 1..]);
        prop_assert!(r.next_message().unwrap().is_some());
    }

    #[test]
    fn server_answers_round_trip(index in any::<u32>(), status in strategies::status(), s in proc_(), a in proc_(), needs in any::<bool>()) {
        let refused = (status != Status::SUCCESS).then_some(ServerReply::refused(status));
        for reply in [ServerReply::accepted(index)].into_iter().chain(refused) {
            let mut out = Vec::new();
            reply.encode(&mut out);
            prop_assert_eq!(ServerReply::decode(&out).unwrap(), Some((reply, out.len())));
            prop_assert_eq!(ServerReply::decode(&out[..out.len() - 1]).unwrap(), None);
        }
        let tool = ToolReply { status: Status::SUCCESS, assigned: needs.then_some(a), server: Some(s), security: status };
        let mut out = Vec::new();
        tool.encode(&mut out).unwrap();
        prop_assert_eq!(ToolReply::decode(&out, needs).unwrap(), Some((tool, out.len())));
        prop_assert_eq!(ToolReply::decode(&out[..out.len() - 1], needs).unwrap(), None);
    }

    #[test]
    fn keys_and_nspaces_are_checked(k in key(), n in nspace(), d in dialect()) {
        let mut out = Vec::new();
        Packer::new(&mut out, d).pack(&[k.as_str().to_owned(), n.as_str().to_owned()]).unwrap();
        let mut u = Unpacker::new(&out, d);
        prop_assert_eq!(u.unpack::<String>().unwrap(), vec![k.as_str().to_owned(), n.as_str().to_owned()]);
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_value_decoders(bytes in vec(any::<u8>(), 0..200), d in dialect()) {
        let mut u = Unpacker::new(&bytes, d);
        let _ = u.unpack::<Value>();
        let mut u = Unpacker::new(&bytes, d);
        while !u.is_empty() && u.unpack::<Kval>().is_ok() {}
        let mut u = Unpacker::new(&bytes, d);
        let _ = u.get_value();
        let mut u = Unpacker::new(&bytes, d);
        let _ = u.unpack::<Info>();
        let _ = ClientHandshake::decode(&bytes);
        let _ = ServerReply::decode(&bytes);
        let _ = ToolReply::decode(&bytes, true);
        if let Some(h) = bytes.first_chunk::<16>() {
            let _ = Header::decode(h);
        }
        let mut r = MsgReader::new(1 << 10);
        r.feed(&bytes);
        while let Ok(Some(_)) = r.next_message() {}
    }
}

#[test]
fn the_documented_integers() {
    use pmix_types::Rank;
    use pmix_wire::openpmix::Size;
    let enc = |f: &dyn Fn(&mut Packer<'_>)| {
        let mut out = Vec::new();
        f(&mut Packer::new(&mut out, Dialect::V41));
        out
    };
    assert_eq!(enc(&|p| p.put_size(2)), [0x02]);
    assert_eq!(
        enc(&|p| p.put_u32(Rank::WILDCARD.0)),
        [0xfe, 0xff, 0xff, 0xff, 0x0f]
    );
    assert_eq!(enc(&|p| p.put_u32(4182)), [0xd6, 0x20]);
    assert_eq!(enc(&|p| p.put_status(Status::ERR_NOT_SUPPORTED)), [0x5d]);
    assert_eq!(
        enc(&|p| p.put_i32(i32::MIN)),
        [0xff, 0xff, 0xff, 0xff, 0x0f]
    );
    assert_eq!(
        enc(&|p| p.put_u64(1 << 56)),
        [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01]
    );
    assert_eq!(enc(&|p| p.put_i64(i64::MIN)), [0xff; 9]);
    assert_eq!(enc(&|p| p.pack_one(&Size(1)).unwrap()), [0x02, 0x01]);

    // Range checks: a UINT16 that needs 17 bits, an INT32 that needs 33.
    assert!(
        Unpacker::new(&[0x80, 0x80, 0x04], Dialect::V41)
            .get_u16()
            .is_err()
    );
    assert!(
        Unpacker::new(&[0x80, 0x80, 0x80, 0x80, 0x10], Dialect::V41)
            .get_i32()
            .is_err()
    );
    assert_eq!(
        Unpacker::new(&[0xff, 0xff, 0x03], Dialect::V41)
            .get_u16()
            .unwrap(),
        u16::MAX
    );

    // v3: fixed width, big-endian; size_t and int carry a 2-byte type tag.
    let v3 = Dialect::new(Codec::V3, BufferType::NonDesc);
    let enc3 = |f: &dyn Fn(&mut Packer<'_>)| {
        let mut out = Vec::new();
        f(&mut Packer::new(&mut out, v3));
        out
    };
    assert_eq!(
        enc3(&|p| p.put_status(Status::ERR_NOT_SUPPORTED)),
        (-47i32).to_be_bytes()
    );
    assert_eq!(enc3(&|p| p.put_size(2)), [0, 15, 0, 0, 0, 0, 0, 0, 0, 2]);
    assert_eq!(enc3(&|p| p.put_int(-2)), [0, 9, 0xff, 0xff, 0xff, 0xfe]);
    assert_eq!(enc3(&|p| p.put_pid(7)), [0, 14, 0, 0, 0, 7]);
    assert_eq!(
        enc3(&|p| p.put_str("ab").unwrap()),
        [0, 0, 0, 3, b'a', b'b', 0]
    );
    // A v3 peer may tag a size with a narrower width; it is widened.
    assert_eq!(
        Unpacker::new(&[0, 14, 0, 0, 1, 0], v3).get_size().unwrap(),
        256
    );
    assert!(
        Unpacker::new(&[0, 9, 0xff, 0xff, 0xff, 0xff], v3)
            .get_size()
            .is_err()
    );
}

#[test]
fn refusals_are_explicit() {
    let d = Dialect::V41;
    // A string with a NUL byte cannot be a C string.
    assert!(matches!(
        encode_value(&Value::String("a\0b".into()), d),
        Err(Error::Encode(_))
    ));
    // v3 peers know no type above ENVAR.
    let v3 = Dialect::new(Codec::V3, BufferType::NonDesc);
    assert!(matches!(
        encode_value(&Value::Regex(b"raw:a".to_vec()), v3),
        Err(Error::Unsupported(_))
    ));
    // ... and a v3 peer's bytes naming one are refused too, as its module would refuse them.
    let mut bytes = Vec::new();
    Packer::new(&mut bytes, Dialect::V41)
        .put_value(&Value::Regex(b"raw:a".to_vec()))
        .unwrap();
    let mut v3_bytes = vec![0, 49];
    v3_bytes.extend(&bytes[1..]);
    assert!(matches!(
        Unpacker::new(&v3_bytes, v3).get_value(),
        Err(Error::Unsupported(_))
    ));
    // A POINTER is not sent; the reference's placeholder byte reads as a NULL pointer.
    assert!(matches!(
        encode_value(&Value::Pointer(0x1000), d),
        Err(Error::Unsupported(_))
    ));
    let mut bytes = Vec::new();
    Packer::new(&mut bytes, d).put_data_type(DataType::POINTER);
    bytes.push(1);
    assert_eq!(
        Unpacker::new(&bytes, d).get_value().unwrap(),
        Value::Pointer(0)
    );
    // Type numbers no OpenPMIx release gives a value (the holes of removed types, the
    // internal command, `VALUE` as a value's own type, numbers past the last).
    for ty in [
        DataType(29),
        DataType(44),
        DataType::COMMAND,
        DataType::VALUE,
        DataType(70),
        DataType(499),
    ] {
        let mut bytes = Vec::new();
        Packer::new(&mut bytes, d).put_data_type(ty);
        bytes.extend([0; 8]);
        assert!(
            matches!(
                Unpacker::new(&bytes, d).get_value(),
                Err(Error::Unsupported(_))
            ),
            "{ty:?}"
        );
    }
    // Deep nesting is refused, not recursed into.
    let mut bytes = Vec::new();
    for _ in 0..1000 {
        bytes.extend([0x27, 0x15, 0x01]); // DATA_ARRAY of VALUE, one element: ...
    }
    assert!(matches!(
        Unpacker::new(&bytes, d).get_value(),
        Err(Error::Malformed(_))
    ));
    // A count larger than the bytes left is cut short before anything is reserved.
    assert!(matches!(
        Unpacker::new(&[0xfe, 0xff, 0xff, 0xff, 0x0f, 0x00], d).unpack::<Value>(),
        Err(Error::Truncated { .. }) | Err(Error::Malformed(_))
    ));
}

// ---- messages ----

use pmix_types::{DataRange, Key, Proc, Rank, Scope};
use pmix_wire::openpmix::{
    Cmd, CommitPart, JobInfo, Notification, ProcKvals, Reply, Request, info_array,
};
use pmix_wire::{App, Published, Query};

/// Strings a C string can carry.
fn text() -> impl Strategy<Value = String> {
    vec(any::<char>().prop_filter("no NUL", |&c| c != '\0'), 0..8).prop_map(String::from_iter)
}

/// A value that comes back exactly from a trip through `codec`.
fn wire_value(codec: Codec) -> impl Strategy<Value = Value> {
    strategies::small_value().prop_filter_map("not representable", move |v| {
        wire_form(&exact_floats(v), codec)
    })
}

fn wire_info(codec: Codec) -> impl Strategy<Value = Info> {
    (key(), wire_value(codec), any::<u32>()).prop_map(|(key, value, flags)| Info {
        key,
        value,
        flags: pmix_types::InfoFlags(flags),
    })
}

fn wire_infos(codec: Codec) -> impl Strategy<Value = Vec<Info>> {
    vec(wire_info(codec), 0..3)
}

fn wire_kvals(codec: Codec) -> impl Strategy<Value = Vec<Kval>> {
    vec(
        (key(), wire_value(codec)).prop_map(|(k, v)| Kval::new(k, v)),
        0..3,
    )
}

fn procs() -> impl Strategy<Value = Vec<Proc>> {
    vec(proc_(), 0..3)
}

fn keys() -> impl Strategy<Value = Vec<Key>> {
    vec(key(), 0..3)
}

fn statuses() -> impl Strategy<Value = Vec<Status>> {
    vec(strategies::status(), 0..3)
}

fn app(codec: Codec) -> impl Strategy<Value = App> {
    (
        text(),
        vec(text(), 0..3),
        vec(text(), 0..3),
        text(),
        0..=i32::MAX as u32,
        wire_infos(codec),
    )
        .prop_map(|(cmd, argv, env, cwd, maxprocs, info)| App {
            cmd,
            argv,
            env,
            cwd,
            maxprocs,
            info,
        })
}

fn query(codec: Codec) -> impl Strategy<Value = Query> {
    (keys(), wire_infos(codec)).prop_map(|(keys, qualifiers)| Query { keys, qualifiers })
}

fn request(codec: Codec) -> BoxedStrategy<Request> {
    let infos = move || wire_infos(codec);
    prop_oneof![
        Just(Request::Req),
        Just(Request::Finalize),
        (strategies::status(), prop::option::of(text()), procs()).prop_map(
            |(status, message, procs)| Request::Abort {
                status,
                message,
                procs
            }
        ),
        vec((any::<u8>(), wire_kvals(codec)), 0..3).prop_map(|parts| Request::Commit {
            parts: parts
                .into_iter()
                .map(|(s, kvals)| CommitPart {
                    scope: Scope(s),
                    kvals
                })
                .collect()
        }),
        (procs(), infos()).prop_map(|(procs, info)| Request::Fence { procs, info }),
        (proc_(), infos(), prop::option::of(key())).prop_map(|(proc, info, key)| Request::Get {
            proc,
            info,
            key
        }),
        (any::<u32>(), infos()).prop_map(|(uid, info)| Request::Publish { uid, info }),
        (any::<u32>(), keys(), infos()).prop_map(|(uid, keys, info)| Request::Lookup {
            uid,
            keys,
            info
        }),
        (any::<u32>(), keys(), infos()).prop_map(|(uid, keys, info)| Request::Unpublish {
            uid,
            keys,
            info
        }),
        (infos(), vec(app(codec), 0..3))
            .prop_map(|(job_info, apps)| Request::Spawn { job_info, apps }),
        (procs(), infos()).prop_map(|(procs, info)| Request::Connect { procs, info }),
        (procs(), infos()).prop_map(|(procs, info)| Request::Disconnect { procs, info }),
        (statuses(), infos()).prop_map(|(codes, info)| Request::RegisterEvents { codes, info }),
        statuses().prop_map(|codes| Request::DeregisterEvents { codes }),
        (strategies::status(), any::<u8>(), infos()).prop_map(|(status, r, info)| {
            Request::Notify {
                status,
                range: DataRange(r),
                info,
            }
        }),
        vec(query(codec), 0..3).prop_map(|queries| Request::Query { queries }),
        (procs(), infos()).prop_map(|(targets, directives)| Request::JobControl {
            targets,
            directives
        }),
        (any::<u64>(), infos(), infos()).prop_map(|(timestamp, data, directives)| {
            Request::Log {
                timestamp,
                data,
                directives,
            }
        }),
        ("[a-z:/]{0,12}", procs(), infos())
            .prop_map(|(grp, procs, info)| Request::GroupConstruct { grp, procs, info }),
        ("[a-z:/]{0,12}", procs(), infos()).prop_map(|(grp, procs, info)| Request::GroupDestruct {
            grp,
            procs,
            info
        }),
        ("[a-z:/]{0,12}", infos()).prop_map(|(grp, info)| Request::GroupLeave { grp, info }),
        (procs(), infos(), any::<u16>(), any::<u64>()).prop_map(
            |(procs, directives, c, local_id)| Request::IofPull {
                procs,
                directives,
                channels: pmix_types::IofChannel(c),
                local_id
            }
        ),
        (procs(), infos(), prop::option::of(vec(any::<u8>(), 0..32))).prop_map(
            |(targets, directives, data)| Request::IofPush {
                targets,
                directives,
                data
            }
        ),
        (infos(), any::<u64>())
            .prop_map(|(directives, refid)| Request::IofDeregister { directives, refid }),
        (
            prop_oneof![Just(17u8), 19u8..=21, 25u8..=26, 30u8..=255],
            vec(any::<u8>(), 0..16)
        )
            .prop_map(|(c, payload)| {
                Request::Other {
                    cmd: Cmd(c),
                    payload,
                }
            }),
    ]
    .boxed()
}

fn job_info(codec: Codec) -> impl Strategy<Value = JobInfo> {
    (nspace(), wire_kvals(codec)).prop_map(|(nspace, kvals)| JobInfo { nspace, kvals })
}

/// A reply and the command of the request it answers.
fn reply(codec: Codec) -> BoxedStrategy<(Cmd, Reply)> {
    let st = || strategies::status();
    prop_oneof![
        (
            prop::sample::select(vec![
                Cmd::FENCENB,
                Cmd::COMMIT,
                Cmd::FINALIZE,
                Cmd::ABORT,
                Cmd(99)
            ]),
            st()
        )
            .prop_map(|(c, s)| (c, Reply::Status(s))),
        job_info(codec).prop_map(|j| (Cmd::REQ, Reply::JobInfo(j))),
        (
            st(),
            vec(
                (proc_(), wire_kvals(codec)).prop_map(|(proc, kvals)| ProcKvals { proc, kvals }),
                0..3
            )
        )
            .prop_map(|(status, data)| (Cmd::GETNB, Reply::Get { status, data })),
        (
            st(),
            vec(
                (proc_(), key(), wire_value(codec)).prop_map(|(proc, key, value)| Published {
                    proc,
                    key,
                    value
                }),
                0..3
            )
        )
            .prop_map(|(status, found)| (Cmd::LOOKUPNB, Reply::Lookup { status, found })),
        (st(), prop::option::of(nspace()), wire_kvals(codec)).prop_map(|(status, nspace, job)| (
            Cmd::SPAWNNB,
            Reply::Spawn {
                status,
                nspace,
                job
            }
        )),
        (st(), vec(job_info(codec), 0..3))
            .prop_map(|(status, jobs)| (Cmd::CONNECTNB, Reply::Connect { status, jobs })),
        (
            prop::sample::select(vec![Cmd::JOB_CONTROL, Cmd::QUERY]),
            st(),
            wire_infos(codec)
        )
            .prop_map(|(c, status, info)| (c, Reply::Info { status, info })),
        (st(), prop::option::of(any::<u64>()))
            .prop_map(|(status, refid)| (Cmd::IOF_PULL, Reply::IofPull { status, refid })),
        (st(), procs(), prop::option::of(any::<u64>())).prop_map(
            |(status, members, context_id)| (
                Cmd::GROUP_CONSTRUCT,
                Reply::Group {
                    status,
                    members,
                    context_id
                }
            )
        ),
    ]
    .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn requests_round_trip(
        (d, req) in dialect().prop_flat_map(|d| (Just(d), request(d.codec))),
    ) {
        let mut out = Vec::new();
        req.encode(d, &mut out).unwrap();
        prop_assert_eq!(pmix_wire::openpmix::peek_cmd(&out, d).unwrap(), req.cmd());
        let back = Request::decode(&out, d).unwrap();
        prop_assert_eq!(&back, &req);
        // Framed, split byte by byte.
        let mut stream = Vec::new();
        pmix_wire::openpmix::encode_message(&mut stream, 3, 101, &out).unwrap();
        let mut r = MsgReader::after_handshake(1 << 20);
        let mut got = None;
        for b in &stream {
            r.feed(std::slice::from_ref(b));
            if let Some(pmix_wire::openpmix::Incoming::Message { header, payload }) = r.next_message().unwrap() {
                prop_assert_eq!((header.pindex, header.tag), (3, 101));
                got = Some(Request::decode(payload, d).unwrap());
            }
        }
        prop_assert_eq!(got, Some(req));
    }

    #[test]
    fn replies_round_trip(
        (d, (cmd, rep)) in dialect().prop_flat_map(|d| (Just(d), reply(d.codec))),
    ) {
        let mut out = Vec::new();
        rep.encode(d, &mut out).unwrap();
        prop_assert_eq!(Reply::decode(cmd, &out, d).unwrap(), rep.clone());
        // A status alone answers any request.
        let mut status_only = Vec::new();
        Reply::Status(rep.status()).encode(d, &mut status_only).unwrap();
        if cmd != Cmd::REQ {
            prop_assert_eq!(Reply::decode(cmd, &status_only, d).unwrap().status(), rep.status());
        }
    }

    #[test]
    fn notifications_round_trip(
        d in dialect(),
        status in strategies::status(),
        source in proc_(),
        info in vec(info(), 0..3),
        range in prop::option::of(any::<u8>()),
    ) {
        let info: Vec<Info> = info
            .into_iter()
            .map(|i| Info { value: exact_floats(i.value), ..i })
            .filter(|i| wire_form(&i.value, d.codec).as_ref() == Some(&i.value))
            .collect();
        let n = Notification { status, source, info, range: range.map(DataRange) };
        let mut out = Vec::new();
        n.encode(d, &mut out).unwrap();
        prop_assert_eq!(Notification::decode(&out, d).unwrap(), n);
    }

    #[test]
    fn rank_blobs_and_info_arrays_round_trip(
        d in dialect(),
        rank in strategies::rank(),
        kvals in wire_kvals(Codec::V3),
        infos in wire_infos(Codec::V3),
        k in key(),
    ) {
        let blob = pmix_wire::openpmix::rank_blob(rank, &kvals, d).unwrap();
        prop_assert_eq!(pmix_wire::openpmix::decode_rank_blob(&blob, d).unwrap(), (rank, kvals));
        let infos: Vec<Info> = infos.into_iter().map(|i| Info { flags: pmix_types::InfoFlags::NONE, ..i }).collect();
        let arr = info_array(k, infos.clone());
        let Value::DataArray(a) = &arr.value else { panic!() };
        let flags: Vec<_> = a.infos().map(|i| i.flags.contains(pmix_types::InfoFlags::ARRAY_END)).collect();
        prop_assert_eq!(flags.iter().filter(|f| **f).count(), usize::from(!infos.is_empty()));
        prop_assert!(flags.last().copied().unwrap_or(true));
    }

    /// The fuzz target's checks on random bytes and on mutated real messages.
    #[test]
    fn mutated_messages_never_panic_and_reach_a_fixed_point(
        seed in prop::sample::select(seeds()),
        edits in vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 0..6),
    ) {
        let mut data = seed;
        for (at, byte, op) in &edits {
            let i = at.index(data.len() + 1);
            match op {
                0 if i < data.len() => data[i] = *byte,
                1 => data.insert(i, *byte),
                _ if i < data.len() => {
                    data.remove(i);
                }
                _ => {}
            }
        }
        pmix_wire::fuzzing::check_openpmix(&data);
    }

    #[test]
    fn random_bytes_never_panic_any_decoder(bytes in vec(any::<u8>(), 0..64)) {
        pmix_wire::fuzzing::check_openpmix(&bytes);
    }
}

/// The fuzz corpus seeds (messages cut from the captures).
fn seeds() -> Vec<Vec<u8>> {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/openpmix_decode");
    let mut out: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    out.sort();
    out
}

#[test]
fn a_v3_fence_by_hand() {
    // FENCENB in v3 NON_DESC, laid out from the reference's v3 module: every count an INT32
    // of 4 bytes, SIZE a UINT64 tag and 8 bytes, ranks 4 bytes, strings with a 4-byte length.
    let d = Dialect::new(Codec::V3, BufferType::NonDesc);
    let mut want = Vec::new();
    want.extend([0, 0, 0, 1, 3]); // one COMMAND: FENCENB
    want.extend([0, 0, 0, 1, 0, 15, 0, 0, 0, 0, 0, 0, 0, 1]); // one SIZE: 1
    want.extend([
        0, 0, 0, 1, 0, 0, 0, 3, b'j', b'b', 0, 0xff, 0xff, 0xff, 0xfe,
    ]); // PROC jb:WILDCARD
    want.extend([0, 0, 0, 1, 0, 15, 0, 0, 0, 0, 0, 0, 0, 1]); // one SIZE: 1
    want.extend([0, 0, 0, 1, 0, 0, 0, 2, b'k', 0, 0, 0, 0, 0, 0, 1, 1]); // INFO k, flags 0, BOOL true
    let req = Request::Fence {
        procs: vec![Proc::new(
            pmix_types::Nspace::new("jb").unwrap(),
            Rank::WILDCARD,
        )],
        info: vec![Info::new(Key::new("k").unwrap(), true)],
    };
    let mut out = Vec::new();
    req.encode(d, &mut out).unwrap();
    assert_eq!(out, want);
    assert_eq!(Request::decode(&want, d).unwrap(), req);
    // Fully described: INT32 tag before each count, the item type after it (2 bytes each).
    let fd = Dialect::new(Codec::V3, BufferType::FullyDesc);
    let mut out = Vec::new();
    Request::Finalize.encode(fd, &mut out).unwrap();
    assert_eq!(out, [0, 9, 0, 0, 0, 1, 0, 34, 5]);
}
