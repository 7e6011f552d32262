//! The "flex128" integer coding of the `v4`/`v41` codecs (OpenPMIx's psquash module).
//!
//! An unsigned value goes out 7 bits a byte, least significant group first, with 0x80 set on
//! every byte but the last. At most eight such bytes carry 56 bits; a value that needs more has
//! a ninth byte holding its last 8 bits verbatim, with no continuation bit, so no value takes
//! more than nine bytes (this is where flex128 differs from LEB128). Signed values are
//! sign-extended to 64 bits and zig-zagged first, so small negative numbers stay short.

/// Longest flex128 encoding of a 64-bit value.
pub(crate) const MAX_LEN: usize = 9;

/// Appends `v` in flex128.
pub(crate) fn put(out: &mut Vec<u8>, mut v: u64) {
    for _ in 0..MAX_LEN - 1 {
        let low = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(low);
            return;
        }
        out.push(low | 0x80);
    }
    // Eight groups of 7 bits leave at most 8 bits.
    out.push(v as u8);
}

/// Reads one flex128 value at the start of `buf`: the value and the bytes it used, or `None`
/// when `buf` ends inside it.
///
/// Overlong encodings (`80 00` for 0) are accepted, as the reference accepts them; whether the
/// value fits the type it was read as is the caller's check.
pub(crate) fn get(buf: &[u8]) -> Option<(u64, usize)> {
    let mut v: u64 = 0;
    for i in 0..MAX_LEN - 1 {
        let b = *buf.get(i)?;
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    let last = *buf.get(MAX_LEN - 1)?;
    Some((v | (u64::from(last) << 56), MAX_LEN))
}

/// Zig-zags a sign-extended value: 0, -1, 1, -2, ... become 0, 1, 2, 3, ...
pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Undoes [`zigzag`].
pub(crate) fn unzigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        put(&mut out, v);
        out
    }

    #[test]
    fn the_documented_examples() {
        assert_eq!(enc(2), [0x02]);
        assert_eq!(enc(0xFFFF_FFFE), [0xfe, 0xff, 0xff, 0xff, 0x0f]);
        assert_eq!(enc(4182), [0xd6, 0x20]);
        assert_eq!(enc(zigzag(1)), [0x02]);
        assert_eq!(enc(zigzag(-47)), [0x5d]);
        assert_eq!(
            enc(zigzag(i64::from(i32::MIN))),
            [0xff, 0xff, 0xff, 0xff, 0x0f]
        );
        assert_eq!(enc(0), [0x00]);
    }

    #[test]
    fn the_ninth_byte_is_verbatim() {
        // 2^56 - 1 still fits in eight groups.
        assert_eq!(
            enc((1 << 56) - 1),
            [0xff; 7].iter().copied().chain([0x7f]).collect::<Vec<_>>()
        );
        // 2^56: eight continuation bytes, then 0x01 with no continuation bit.
        let mut want = vec![0x80; 8];
        want.push(0x01);
        assert_eq!(enc(1 << 56), want);
        let mut want = vec![0xff; 8];
        want.push(0xff);
        assert_eq!(enc(u64::MAX), want);
        // A ninth byte with its top bit set is data, not a continuation.
        assert_eq!(get(&want), Some((u64::MAX, 9)));
        assert_eq!(enc(zigzag(i64::MIN)), want);
        assert_eq!(unzigzag(u64::MAX), i64::MIN);
    }

    #[test]
    fn decoding_stops_where_it_should() {
        assert_eq!(get(&[0x02, 0xff]), Some((2, 1)));
        assert_eq!(get(&[0xd6, 0x20, 0x00]), Some((4182, 2)));
        assert_eq!(get(&[0x80, 0x00]), Some((0, 2)));
        assert_eq!(get(&[]), None);
        assert_eq!(get(&[0x80]), None);
        assert_eq!(get(&[0x80; 8]), None);
    }

    proptest::proptest! {
        #[test]
        fn every_u64_round_trips(v: u64) {
            let e = enc(v);
            proptest::prop_assert!(e.len() <= MAX_LEN);
            proptest::prop_assert_eq!(get(&e), Some((v, e.len())));
        }

        #[test]
        fn every_i64_round_trips(v: i64) {
            proptest::prop_assert_eq!(unzigzag(zigzag(v)), v);
        }
    }
}
