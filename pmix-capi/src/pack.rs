//! The byte format of `PMIx_Data_pack` and `PMIx_Data_unpack`: OpenPMIx's (its `bfrops`
//! module `v41`, which 4.2 and 5.0 share), so a buffer packed by libpmix unpacks here and one
//! packed here unpacks in libpmix. The encoding is pmix-wire's OpenPMIx codec
//! (`pmix_wire::openpmix`), the one pmix-rs speaks to OpenPMIx peers on the wire.
//!
//! Each `PMIx_Data_pack` call appends one *pack*: the count of values as an `INT32`, then the
//! values (in a fully-described buffer, type tags before the count and before the values).
//! libpmix packs for every target with its own module and buffer type, whatever the target
//! (a peer's module only differs for peers older than 4.0, whose flex128 integers it lacks),
//! and so does this library: `v41`, and the buffer type of this process's environment, as
//! libpmix reads it.
//!
//! Unpacking reads one pack per call, as libpmix does: a pack of more values than the caller
//! has room for yields as many as fit and `PMIX_ERR_UNPACK_INADEQUATE_SPACE`, the rest left
//! unread. Every count and length is checked against the bytes that remain and nesting is
//! bounded (the codec's checks); nothing is read past the buffer.

use pmix_types::{DataType, Status, Value};
use pmix_wire::openpmix::{BUFFER_TYPE_VAR, BufferType, Codec, Dialect, Packer, Unpacker};

/// What one `PMIx_Data_unpack` read.
#[derive(Debug, PartialEq)]
pub(crate) struct Unpacked {
    /// The values, at most as many as asked for.
    pub(crate) values: Vec<Value>,
    /// The bytes they took, from the start of the unread ones.
    pub(crate) used: usize,
    /// `SUCCESS`, or `ERR_UNPACK_INADEQUATE_SPACE` when the pack held more values.
    pub(crate) status: Status,
}

/// How this process packs: libpmix's module, and the buffer type its server gave it.
fn dialect() -> Dialect {
    let buffer = BufferType::from_env_value(std::env::var(BUFFER_TYPE_VAR).ok().as_deref());
    Dialect::new(Codec::V41, buffer)
}

/// One pack of `values`, each of type `ty` (any type for `VALUE`).
pub(crate) fn pack(ty: DataType, values: &[Value]) -> Result<Vec<u8>, Status> {
    pack_in(dialect(), ty, values)
}

fn pack_in(dialect: Dialect, ty: DataType, values: &[Value]) -> Result<Vec<u8>, Status> {
    let mut out = Vec::new();
    Packer::new(&mut out, dialect)
        .pack_elements(ty, values)
        .map_err(|e| match e {
            pmix_wire::Error::Unsupported(_) => Status::ERR_NOT_SUPPORTED,
            _ => Status::ERR_PACK_FAILURE,
        })?;
    Ok(out)
}

/// At most `max` values of type `ty` from the pack at the start of `bytes`.
///
/// No room (`max` 0) is `ERR_UNPACK_INADEQUATE_SPACE` and nothing at all left
/// `ERR_UNPACK_READ_PAST_END_OF_BUFFER`, as in libpmix; so is a pack that ends early. A pack
/// that is not of `ty` reads as values of `ty` would in libpmix, where the bytes allow, and
/// is otherwise `ERR_UNPACK_FAILURE` (`ERR_NOT_SUPPORTED` for a type with no conversion).
pub(crate) fn unpack(ty: DataType, bytes: &[u8], max: usize) -> Result<Unpacked, Status> {
    unpack_in(dialect(), ty, bytes, max)
}

fn unpack_in(dialect: Dialect, ty: DataType, bytes: &[u8], max: usize) -> Result<Unpacked, Status> {
    if max == 0 {
        return Err(Status::ERR_UNPACK_INADEQUATE_SPACE);
    }
    let mut u = Unpacker::new(bytes, dialect);
    let (values, held) = u.unpack_elements(ty, max).map_err(|e| match e {
        pmix_wire::Error::Truncated { .. } => Status::ERR_UNPACK_READ_PAST_END_OF_BUFFER,
        pmix_wire::Error::Unsupported(_) => Status::ERR_NOT_SUPPORTED,
        _ => Status::ERR_UNPACK_FAILURE,
    })?;
    let status = if held > values.len() {
        Status::ERR_UNPACK_INADEQUATE_SPACE
    } else {
        Status::SUCCESS
    };
    Ok(Unpacked {
        values,
        used: u.position(),
        status,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmix_types::{Nspace, Proc, Rank};

    const V41: Dialect = Dialect::V41;

    fn full() -> Dialect {
        Dialect::new(Codec::V41, BufferType::FullyDesc)
    }

    #[test]
    fn packs_are_libpmix_bytes() {
        // What libpmix 4.2 and 5.0 write for these calls (pmix-tests' pmix_capi_pack.c
        // compares whole buffers): count 3 (zig-zagged), then 7, -1, 300 (zig-zagged flex128).
        let vals = [Value::Int32(7), Value::Int32(-1), Value::Int32(300)];
        assert_eq!(
            pack_in(V41, DataType::INT32, &vals).unwrap(),
            [0x06, 0x0e, 0x01, 0xd8, 0x04]
        );
        // A string: count 1, length with the NUL, the bytes, the NUL.
        let s = [Value::String("ab".into())];
        assert_eq!(
            pack_in(V41, DataType::STRING, &s).unwrap(),
            [0x02, 0x06, b'a', b'b', 0]
        );
        // An unsigned int goes as the bits of a signed one (libpmix 4.2's and 5.0's bytes).
        assert_eq!(
            pack_in(V41, DataType::UINT, &[Value::Uint(3_000_000_000)]).unwrap(),
            [0x02, 0xff, 0x87, 0xfd, 0xd2, 0x09]
        );
        // Fully described: INT32's tag (9), count, STRING's tag (3), the string.
        assert_eq!(
            pack_in(full(), DataType::STRING, &s).unwrap(),
            [0x09, 0x02, 0x03, 0x06, b'a', b'b', 0]
        );
    }

    #[test]
    fn packs_unpack_one_call_at_a_time() {
        let p = Proc::new(Nspace::new("ns").unwrap(), Rank(3));
        for d in [V41, full()] {
            let mut bytes =
                pack_in(d, DataType::UINT32, &[Value::Uint32(7), Value::Uint32(8)]).unwrap();
            bytes.extend(pack_in(d, DataType::PROC, &[Value::Proc(p.clone())]).unwrap());
            bytes.extend(pack_in(d, DataType::VALUE, &[Value::Proc(p.clone())]).unwrap());
            let u = unpack_in(d, DataType::UINT32, &bytes, 5).unwrap();
            assert_eq!(u.values, [Value::Uint32(7), Value::Uint32(8)]);
            assert_eq!(u.status, Status::SUCCESS);
            let rest = &bytes[u.used..];
            let u = unpack_in(d, DataType::PROC, rest, 1).unwrap();
            assert_eq!(u.values, [Value::Proc(p.clone())]);
            let rest = &rest[u.used..];
            let u = unpack_in(d, DataType::VALUE, rest, 1).unwrap();
            assert_eq!(u.values, [Value::Proc(p.clone())]);
            assert_eq!(
                unpack_in(d, DataType::PROC, &rest[u.used..], 1),
                Err(Status::ERR_UNPACK_READ_PAST_END_OF_BUFFER)
            );
        }
    }

    #[test]
    fn too_little_room_yields_what_fits() {
        let vals = [Value::Uint16(1), Value::Uint16(2), Value::Uint16(3)];
        let bytes = pack_in(V41, DataType::UINT16, &vals).unwrap();
        let u = unpack_in(V41, DataType::UINT16, &bytes, 2).unwrap();
        assert_eq!(u.values, vals[..2]);
        assert_eq!(u.status, Status::ERR_UNPACK_INADEQUATE_SPACE);
        assert_eq!(u.used, 3);
        assert_eq!(
            unpack_in(V41, DataType::UINT16, &bytes, 0),
            Err(Status::ERR_UNPACK_INADEQUATE_SPACE)
        );
    }

    #[test]
    fn truncated_oversized_and_mistyped_packs_are_refused() {
        let s = [Value::String("hello".into())];
        let bytes = pack_in(V41, DataType::STRING, &s).unwrap();
        for cut in 0..bytes.len() {
            assert_eq!(
                unpack_in(V41, DataType::STRING, &bytes[..cut], 1),
                Err(Status::ERR_UNPACK_READ_PAST_END_OF_BUFFER),
                "cut at {cut}"
            );
        }
        // A count of 2^31 - 1 values in five bytes.
        let huge = [0xfe, 0xff, 0xff, 0xff, 0x0f];
        assert_eq!(
            unpack_in(V41, DataType::UINT8, &huge, 4),
            Err(Status::ERR_UNPACK_READ_PAST_END_OF_BUFFER)
        );
        // A negative count.
        assert_eq!(
            unpack_in(V41, DataType::UINT8, &[0x01, 0x00], 4),
            Err(Status::ERR_UNPACK_FAILURE)
        );
        // A string length with no string after it.
        let mut long = bytes.clone();
        long[1] = 0xfe;
        assert_eq!(
            unpack_in(V41, DataType::STRING, &long, 1),
            Err(Status::ERR_UNPACK_READ_PAST_END_OF_BUFFER)
        );
        // A UINT16 whose flex128 value does not fit, and a VALUE of an unknown type.
        assert_eq!(
            unpack_in(V41, DataType::UINT16, &[0x02, 0xff, 0xff, 0x7f], 1),
            Err(Status::ERR_UNPACK_FAILURE)
        );
        assert_eq!(
            unpack_in(V41, DataType::VALUE, &[0x02, 0xff, 0x7f], 1),
            Err(Status::ERR_NOT_SUPPORTED)
        );
        // Fully described, the tags must match.
        let tagged = pack_in(full(), DataType::STRING, &s).unwrap();
        assert_eq!(
            unpack_in(full(), DataType::INT32, &tagged, 1),
            Err(Status::ERR_UNPACK_FAILURE)
        );
        // A value of another type than the pack's is not packed.
        assert_eq!(
            pack_in(V41, DataType::INT32, &[Value::Uint32(1)]),
            Err(Status::ERR_PACK_FAILURE)
        );
    }

    #[test]
    fn data_arrays_nest_only_so_deep() {
        // A VALUE holding a data array of VALUEs holding data arrays ..., deeper than allowed.
        let mut bytes = vec![0x02];
        for _ in 0..100 {
            // VALUE tag 39 (DATA_ARRAY), element type 21 (VALUE), one element.
            bytes.extend([39, 21, 1]);
        }
        bytes.push(0);
        assert_eq!(
            unpack_in(V41, DataType::VALUE, &bytes, 1),
            Err(Status::ERR_UNPACK_FAILURE)
        );
    }
}
