//! Property tests of the OpenPMIx codec: every value, info and handshake survives encode and
//! decode in every dialect (exactly, or in the documented wire form: floats to six decimals,
//! a proc info without its exit code, an `UNDEF` array without its count), encodings the wire
//! cannot carry are refused rather than garbled, and arbitrary bytes never panic a decoder.

#![allow(clippy::unwrap_used)]

mod strategies;

use pmix_types::{DataArray, DataType, Info, ProcInfo, Status, Value};
use pmix_wire::Error;
use pmix_wire::openpmix::{
    BufferType, ClientHandshake, Codec, Dialect, Header, Identity, Kval, MsgReader, Packer,
    PeerFlag, ServerReply, ToolReply, Unpacker,
};
use proptest::collection::vec;
use proptest::prelude::*;
use strategies::{info, key, nspace, proc_, value};

const DIALECTS: [Dialect; 4] = [
    Dialect::V41,
    Dialect {
        codec: Codec::V41,
        buffer: BufferType::FullyDesc,
    },
    Dialect {
        codec: Codec::V3,
        buffer: BufferType::NonDesc,
    },
    Dialect {
        codec: Codec::V3,
        buffer: BufferType::FullyDesc,
    },
];

fn dialect() -> impl Strategy<Value = Dialect> {
    prop::sample::select(DIALECTS.to_vec())
}

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
    // Types with no Value variant.
    for ty in [
        DataType::TOPO,
        DataType::PROC_CPUSET,
        DataType::GEOMETRY,
        DataType::ENDPOINT,
        DataType::COORD,
        DataType::POINTER,
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
