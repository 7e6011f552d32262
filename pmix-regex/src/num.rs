//! Decimal numbers: formatting without `fmt` machinery (the generators print millions of
//! numbers) and reading one, bounded, for the parsers.

use crate::error::ParseError;

/// Number of decimal digits of `v`.
pub(crate) fn dec_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 10 {
        v /= 10;
        n += 1;
    }
    n
}

/// Writes the digits of `v` into the tail of `buf` and returns where they start.
fn digits(mut v: u64, buf: &mut [u8; 20]) -> usize {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            return i;
        }
    }
}

/// Appends `v` in decimal.
pub(crate) fn push_dec(out: &mut Vec<u8>, v: u64) {
    let mut buf = [0; 20];
    let start = digits(v, &mut buf);
    out.extend_from_slice(&buf[start..]);
}

/// Appends `v` in decimal, zero-padded to at least `width` digits (C's `%0*d`).
pub(crate) fn push_padded_str(out: &mut String, v: u64, width: usize) {
    let mut buf = [0; 20];
    let start = digits(v, &mut buf);
    for _ in (buf.len() - start)..width {
        out.push('0');
    }
    for &d in &buf[start..] {
        out.push(char::from(d));
    }
}

/// Reads a decimal number at `i`, returning it and the index after its last digit.
pub(crate) fn number(
    b: &[u8],
    i: usize,
    base: usize,
    max: u64,
) -> Result<(u64, usize), ParseError> {
    let mut v: u64 = 0;
    let mut j = i;
    while let Some(&c) = b.get(j) {
        if !c.is_ascii_digit() {
            break;
        }
        v = v
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(c - b'0')))
            .filter(|&v| v <= max)
            .ok_or(ParseError::NumberTooLarge { pos: base + i, max })?;
        j += 1;
    }
    if j == i {
        return Err(match b.get(j) {
            Some(&found) => ParseError::Unexpected {
                pos: base + j,
                found,
                expected: "a digit",
            },
            None => ParseError::UnexpectedEnd {
                pos: base + j,
                expected: "a digit",
            },
        });
    }
    Ok((v, j))
}
