//! The byte format of `PMIx_Data_pack` and `PMIx_Data_unpack`: this library's own, read only
//! by this library (the Standard leaves a buffer's bytes to the implementation; OpenPMIx's
//! are not read here, and ours are not OpenPMIx's).
//!
//! Each value packed is one *element*: its data type (2 bytes, little-endian), the length of
//! what follows (4 bytes, little-endian), and the value in MessagePack as pmix-rs's wire
//! encodes a `pmix_types::Value`. A pack of `n` values appends `n` elements, so values may be
//! unpacked as many at a time as the reader likes. Unpacking checks every length against the
//! bytes that remain and decodes through the wire's bounded decoder (nesting and sizes
//! limited before anything is allocated); it never reads past the buffer.

use pmix_types::{DataType, Status, Value};

/// The bytes of an element before its value.
const HEADER: usize = 6;

/// `values`, each packed as an element of type `ty`.
pub(crate) fn pack(ty: DataType, values: &[Value]) -> Result<Vec<u8>, Status> {
    let mut out = Vec::new();
    for v in values {
        let body = rmp_serde::to_vec(v).map_err(|_| Status::ERR_PACK_FAILURE)?;
        let len = u32::try_from(body.len()).map_err(|_| Status::ERR_PACK_FAILURE)?;
        out.extend_from_slice(&ty.0.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&body);
    }
    Ok(out)
}

/// At most `max` elements of type `ty` from the start of `bytes`, and how many bytes they
/// took. Unpacking stops early at the end of the bytes or at an element of another type; no
/// element at all is `ERR_UNPACK_READ_PAST_END_OF_BUFFER` at the end and `ERR_TYPE_MISMATCH`
/// before an element of another type. A truncated or undecodable element is
/// `ERR_UNPACK_FAILURE`.
pub(crate) fn unpack(
    ty: DataType,
    bytes: &[u8],
    max: usize,
) -> Result<(Vec<Value>, usize), Status> {
    let mut values = Vec::new();
    let mut at = 0;
    while values.len() < max {
        let rest = &bytes[at..];
        if rest.is_empty() {
            break;
        }
        let (head, body) = rest
            .split_at_checked(HEADER)
            .ok_or(Status::ERR_UNPACK_FAILURE)?;
        let elem_ty = DataType(u16::from_le_bytes([head[0], head[1]]));
        if elem_ty != ty {
            if values.is_empty() {
                return Err(Status::ERR_TYPE_MISMATCH);
            }
            break;
        }
        let len = u32::from_le_bytes([head[2], head[3], head[4], head[5]]) as usize;
        let body = body.get(..len).ok_or(Status::ERR_UNPACK_FAILURE)?;
        let v: Value = pmix_wire::decode_body(body).map_err(|_| Status::ERR_UNPACK_FAILURE)?;
        values.push(v);
        at += HEADER + len;
    }
    if values.is_empty() && max > 0 {
        return Err(Status::ERR_UNPACK_READ_PAST_END_OF_BUFFER);
    }
    Ok((values, at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmix_types::Proc;

    #[test]
    fn values_unpack_as_packed_in_any_grouping() {
        let vals = [Value::Uint32(7), Value::Uint32(8), Value::Uint32(9)];
        let mut bytes = pack(DataType::UINT32, &vals).unwrap();
        let p = Proc::new(pmix_types::Nspace::new("ns").unwrap(), pmix_types::Rank(3));
        bytes.extend(pack(DataType::PROC, &[Value::Proc(p.clone())]).unwrap());
        let (one, n1) = unpack(DataType::UINT32, &bytes, 1).unwrap();
        assert_eq!(one, [Value::Uint32(7)]);
        // Asking for more than there are of this type stops at the next type.
        let (two, n2) = unpack(DataType::UINT32, &bytes[n1..], 5).unwrap();
        assert_eq!(two, [Value::Uint32(8), Value::Uint32(9)]);
        let rest = &bytes[n1 + n2..];
        assert_eq!(
            unpack(DataType::UINT32, rest, 1),
            Err(Status::ERR_TYPE_MISMATCH)
        );
        let (procs, n3) = unpack(DataType::PROC, rest, 1).unwrap();
        assert_eq!(procs, [Value::Proc(p)]);
        assert_eq!(
            unpack(DataType::PROC, &rest[n3..], 1),
            Err(Status::ERR_UNPACK_READ_PAST_END_OF_BUFFER)
        );
    }

    #[test]
    fn truncated_and_corrupt_elements_are_refused() {
        let bytes = pack(DataType::STRING, &[Value::String("hello".into())]).unwrap();
        for cut in 1..bytes.len() {
            assert_eq!(
                unpack(DataType::STRING, &bytes[..cut], 1),
                Err(Status::ERR_UNPACK_FAILURE),
                "cut at {cut}"
            );
        }
        let mut huge = bytes.clone();
        huge[2..6].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            unpack(DataType::STRING, &huge, 1),
            Err(Status::ERR_UNPACK_FAILURE)
        );
        let mut junk = bytes;
        junk[HEADER] = 0xc1; // never used in MessagePack
        assert_eq!(
            unpack(DataType::STRING, &junk, 1),
            Err(Status::ERR_UNPACK_FAILURE)
        );
    }
}
