//! A structural check of one MessagePack value, run before serde sees a body.
//!
//! rmp-serde hands every announced array length to serde as a size hint, and serde preallocates
//! up to 1 MiB per collection from it, so a few bytes of crafted headers could make the decoder
//! reserve far more memory than the frame holds. It also recurses once per nesting level, so
//! deeply nested input could overflow the stack. This walk runs first, without recursion and
//! without allocating, and refuses both; after it, every length serde is handed is bounded by
//! the bytes that remain, and the nesting by [`MAX_DEPTH`](crate::MAX_DEPTH). It also finds
//! where the value ends, which is how trailing bytes are detected (rmp-serde does not expose
//! its position in a borrowed slice).

/// Why a body is not one well-formed MessagePack value.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ScanError {
    /// The body ends inside a value.
    Truncated,
    /// A header announces more content than the bytes that remain could hold.
    Oversized { at: usize },
    /// Containers nest deeper than allowed.
    TooDeep { max: usize },
    /// Byte 0xc1, which MessagePack never uses.
    Reserved { at: usize },
}

impl std::fmt::Display for ScanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScanError::Truncated => f.write_str("body ends inside a value"),
            ScanError::Oversized { at } => write!(
                f,
                "header at byte {at} announces more than the remaining bytes hold"
            ),
            ScanError::TooDeep { max } => write!(f, "values nest deeper than {max} levels"),
            ScanError::Reserved { at } => write!(f, "reserved marker 0xc1 at byte {at}"),
        }
    }
}

/// The largest depth [`value_len`] can be asked to check; its stack is an array of this size.
pub(crate) const DEPTH_CAP: usize = 256;

/// Checks the one MessagePack value at the start of `buf` and returns its length in bytes.
///
/// Fails if containers nest more than `max_depth` deep (an empty container counts as a leaf),
/// or if any header announces more elements or bytes than could fit in what remains.
pub(crate) fn value_len(buf: &[u8], max_depth: usize) -> Result<usize, ScanError> {
    let max_depth = max_depth.min(DEPTH_CAP);
    // Unstarted values left in each open container, innermost last.
    let mut open = [0usize; DEPTH_CAP];
    let mut depth: usize = 0;
    // Values announced but not yet started, in every open container together: each needs at
    // least one byte, so this can never exceed the bytes that remain.
    let mut pending: usize = 1;
    let mut r = Reader { buf, pos: 0 };
    loop {
        let at = r.pos;
        let marker = r.u8()?;
        pending -= 1;
        if let Some(top) = depth.checked_sub(1) {
            open[top] -= 1;
        }
        let children = children(&mut r, marker, at)?;
        if children > 0 {
            if depth == max_depth {
                return Err(ScanError::TooDeep { max: max_depth });
            }
            pending = pending
                .checked_add(children)
                .filter(|&p| p <= r.remaining())
                .ok_or(ScanError::Oversized { at })?;
            open[depth] = children;
            depth += 1;
        }
        while depth > 0 && open[depth - 1] == 0 {
            depth -= 1;
        }
        if depth == 0 {
            return Ok(r.pos);
        }
    }
}

/// Reads the marker's payload (at `at`); returns how many values it holds (a container's
/// elements, twice a map's entries).
fn children(r: &mut Reader<'_>, marker: u8, at: usize) -> Result<usize, ScanError> {
    Ok(match marker {
        0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => 0,
        0x80..=0x8f => 2 * usize::from(marker & 0x0f),
        0x90..=0x9f => usize::from(marker & 0x0f),
        0xa0..=0xbf => r.skip_data(usize::from(marker & 0x1f), at)?,
        0xc1 => return Err(ScanError::Reserved { at }),
        // bin 8/16/32, str 8/16/32
        0xc4 | 0xd9 => r.skip_len(1, at)?,
        0xc5 | 0xda => r.skip_len(2, at)?,
        0xc6 | 0xdb => r.skip_len(4, at)?,
        // ext 8/16/32: a length, a type byte, the data
        0xc7 => r.skip_ext(1, at)?,
        0xc8 => r.skip_ext(2, at)?,
        0xc9 => r.skip_ext(4, at)?,
        // float 32/64, uint 8..64, int 8..64
        0xca => r.skip(4)?,
        0xcb => r.skip(8)?,
        0xcc | 0xd0 => r.skip(1)?,
        0xcd | 0xd1 => r.skip(2)?,
        0xce | 0xd2 => r.skip(4)?,
        0xcf | 0xd3 => r.skip(8)?,
        // fixext 1/2/4/8/16: a type byte, then the data
        0xd4 => r.skip(2)?,
        0xd5 => r.skip(3)?,
        0xd6 => r.skip(5)?,
        0xd7 => r.skip(9)?,
        0xd8 => r.skip(17)?,
        0xdc => usize::from(r.u16()?),
        0xdd => r.u32()?,
        0xde => usize::from(r.u16()?) * 2,
        0xdf => r.u32()?.checked_mul(2).ok_or(ScanError::Oversized { at })?,
    })
}

/// The length of the one MessagePack value at the start of `buf`, as [`value_len`] finds it
/// but without checking the nesting: every other check is made (a header announcing more than
/// the remaining bytes hold, a reserved marker, a cut), and there is no recursion, so the cost
/// is bounded by the bytes. For a value whose nesting is checked later, when it is decoded.
pub(crate) fn skip_value(buf: &[u8]) -> Result<usize, ScanError> {
    let mut pending: usize = 1;
    let mut r = Reader { buf, pos: 0 };
    while pending > 0 {
        let at = r.pos;
        let marker = r.u8()?;
        // The markers data is mostly made of first, the rest through the full table.
        let children = match marker {
            0x00..=0x7f | 0xe0..=0xff | 0xc0 | 0xc2 | 0xc3 => 0,
            0x90..=0x9f => usize::from(marker & 0x0f),
            0xa0..=0xbf => r.skip_data(usize::from(marker & 0x1f), at)?,
            _ => children(&mut r, marker, at)?,
        };
        pending = (pending - 1)
            .checked_add(children)
            .filter(|&p| p <= r.remaining())
            .ok_or(ScanError::Oversized { at })?;
    }
    Ok(r.pos)
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N], ScanError> {
        let bytes = self
            .buf
            .get(self.pos..)
            .and_then(|rest| rest.first_chunk::<N>())
            .ok_or(ScanError::Truncated)?;
        self.pos += N;
        Ok(*bytes)
    }

    fn u8(&mut self) -> Result<u8, ScanError> {
        self.take::<1>().map(|[b]| b)
    }

    fn u16(&mut self) -> Result<u16, ScanError> {
        self.take().map(u16::from_be_bytes)
    }

    fn u32(&mut self) -> Result<usize, ScanError> {
        let n = self.take().map(u32::from_be_bytes)?;
        usize::try_from(n).map_err(|_| ScanError::Truncated)
    }

    /// Skips a fixed-size payload of `n` bytes; returns 0 (no children).
    fn skip(&mut self, n: usize) -> Result<usize, ScanError> {
        if n > self.remaining() {
            return Err(ScanError::Truncated);
        }
        self.pos += n;
        Ok(0)
    }

    /// Skips `n` bytes of data whose length the header at `at` announced; returns 0.
    fn skip_data(&mut self, n: usize, at: usize) -> Result<usize, ScanError> {
        if n > self.remaining() {
            return Err(ScanError::Oversized { at });
        }
        self.pos += n;
        Ok(0)
    }

    /// Reads a big-endian length of `width` bytes.
    fn len(&mut self, width: usize) -> Result<usize, ScanError> {
        match width {
            1 => self.u8().map(usize::from),
            2 => self.u16().map(usize::from),
            _ => self.u32(),
        }
    }

    /// Reads a length of `width` bytes and skips that much data.
    fn skip_len(&mut self, width: usize, at: usize) -> Result<usize, ScanError> {
        let n = self.len(width)?;
        self.skip_data(n, at)
    }

    /// Skips an ext value: a length of `width` bytes, a type byte, the data.
    fn skip_ext(&mut self, width: usize, at: usize) -> Result<usize, ScanError> {
        let n = self.len(width)?;
        self.skip(1)?;
        self.skip_data(n, at)
    }
}

/// Reads MessagePack heads one at a time, by MessagePack's own rules and independently of the
/// layout serde would expect: the handshake's magic and version, and the fixed frame of a
/// collecting fence's reply (see [`crate::packed`]). Every read is checked; `None` means the
/// bytes are not what was asked for (or are cut short).
pub(crate) struct Head<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Head<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Head { buf, pos: 0 }
    }

    /// Bytes read so far.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// The bytes not read yet.
    pub(crate) fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or_default()
    }

    /// Moves past `n` bytes.
    pub(crate) fn skip(&mut self, n: usize) -> Option<()> {
        self.take(n).map(|_| ())
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let bytes = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(bytes)
    }

    fn be(&mut self, n: usize) -> Option<u64> {
        Some(
            self.take(n)?
                .iter()
                .fold(0, |acc, &b| (acc << 8) | u64::from(b)),
        )
    }

    fn marker(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    /// The length of an array.
    pub(crate) fn array_len(&mut self) -> Option<u64> {
        match self.marker()? {
            m @ 0x90..=0x9f => Some(u64::from(m & 0x0f)),
            0xdc => self.be(2),
            0xdd => self.be(4),
            _ => None,
        }
    }

    /// The number of entries of a map.
    pub(crate) fn map_len(&mut self) -> Option<u64> {
        match self.marker()? {
            m @ 0x80..=0x8f => Some(u64::from(m & 0x0f)),
            0xde => self.be(2),
            0xdf => self.be(4),
            _ => None,
        }
    }

    /// The bytes of a string (not checked to be UTF-8).
    pub(crate) fn str(&mut self) -> Option<&'a [u8]> {
        let len = match self.marker()? {
            m @ 0xa0..=0xbf => u64::from(m & 0x1f),
            0xd9 => self.be(1)?,
            0xda => self.be(2)?,
            0xdb => self.be(4)?,
            _ => return None,
        };
        self.take(usize::try_from(len).ok()?)
    }

    /// An integer in any of MessagePack's encodings.
    pub(crate) fn int(&mut self) -> Option<i128> {
        let signed = |v: u64, bits: u32| {
            let shift = 64 - bits;
            i128::from(((v << shift) as i64) >> shift)
        };
        match self.marker()? {
            m @ 0x00..=0x7f => Some(i128::from(m)),
            m @ 0xe0..=0xff => Some(i128::from(m as i8)),
            0xcc => self.be(1).map(i128::from),
            0xcd => self.be(2).map(i128::from),
            0xce => self.be(4).map(i128::from),
            0xcf => self.be(8).map(i128::from),
            0xd0 => Some(signed(self.be(1)?, 8)),
            0xd1 => Some(signed(self.be(2)?, 16)),
            0xd2 => Some(signed(self.be(4)?, 32)),
            0xd3 => Some(signed(self.be(8)?, 64)),
            _ => None,
        }
    }

    /// A non-negative integer in any of MessagePack's encodings.
    pub(crate) fn uint(&mut self) -> Option<u64> {
        u64::try_from(self.int()?).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_of_simple_values() {
        assert_eq!(value_len(&[0x01, 0xff], 8), Ok(1));
        assert_eq!(value_len(&[0x92, 0x01, 0xa1, b'x', 0x00], 8), Ok(4));
        assert_eq!(value_len(&[0x81, 0xa1, b'k', 0x90], 8), Ok(4));
        assert_eq!(value_len(&[0xcd, 0x01], 8), Err(ScanError::Truncated));
        assert_eq!(value_len(&[], 8), Err(ScanError::Truncated));
        assert_eq!(value_len(&[0xc1], 8), Err(ScanError::Reserved { at: 0 }));
    }

    #[test]
    fn announced_lengths_are_bounded_by_the_input() {
        let huge_array = [0xdd, 0xff, 0xff, 0xff, 0xff, 0x00];
        assert_eq!(
            value_len(&huge_array, 8),
            Err(ScanError::Oversized { at: 0 })
        );
        let huge_str = [0x91, 0xdb, 0xff, 0xff, 0xff, 0xff, b'a'];
        assert_eq!(value_len(&huge_str, 8), Err(ScanError::Oversized { at: 1 }));
        let huge_map = [0xdf, 0x80, 0x00, 0x00, 0x00];
        assert_eq!(value_len(&huge_map, 8), Err(ScanError::Oversized { at: 0 }));
    }

    proptest::proptest! {
        /// The skip finds the same end as the check, whatever the bytes, and fails only
        /// where the check does.
        #[test]
        fn a_skip_ends_where_the_check_does(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
        ) {
            match value_len(&data, DEPTH_CAP) {
                Ok(len) => proptest::prop_assert_eq!(skip_value(&data), Ok(len)),
                Err(_) => proptest::prop_assert!(skip_value(&data).is_err()),
            }
        }
    }

    #[test]
    fn depth_counts_non_empty_containers() {
        let mut v = vec![0x91; 4];
        v.push(0x90);
        assert_eq!(value_len(&v, 4), Ok(5));
        v.insert(0, 0x91);
        assert_eq!(value_len(&v, 4), Err(ScanError::TooDeep { max: 4 }));
    }
}
