//! Decimal formatting without `fmt` machinery (the generators print millions of numbers).

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
