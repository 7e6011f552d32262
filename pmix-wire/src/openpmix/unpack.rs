//! [`Unpacker`]: a bounded, borrowing reader of packed data in one connection's [`Dialect`].

use pmix_types::{DataType, Status};

use super::dialect::{Codec, Dialect};
use super::flex;
use crate::Error;

/// How deeply values may nest (a data array of infos whose values are data arrays, ...).
/// Real job data nests two levels; the limit keeps hostile input from exhausting the stack.
pub const MAX_NESTING: u32 = 32;

/// Reads packed data the way the reference's `PMIX_BFROPS_UNPACK` does, in one [`Dialect`].
///
/// Every read is bounds-checked and returns an error instead of panicking; a count or length
/// read off the wire never reserves more memory than the bytes that remain could fill; values
/// nest at most [`MAX_NESTING`] levels deep. Running out of bytes is [`Error::Truncated`],
/// which is also how open-ended lists end: read items while [`is_empty`](Unpacker::is_empty)
/// is false.
///
/// ```
/// use pmix_types::Status;
/// use pmix_wire::openpmix::{Dialect, Unpacker};
///
/// let mut u = Unpacker::new(&[0x02, 0x5d], Dialect::V41);
/// assert_eq!(u.unpack_one::<Status>()?, Status::ERR_NOT_SUPPORTED);
/// u.finish()?;
/// # Ok::<(), pmix_wire::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Unpacker<'a> {
    buf: &'a [u8],
    pos: usize,
    dialect: Dialect,
    depth: u32,
}

impl<'a> Unpacker<'a> {
    /// A reader over `buf`.
    pub fn new(buf: &'a [u8], dialect: Dialect) -> Self {
        Unpacker {
            buf,
            pos: 0,
            dialect,
            depth: 0,
        }
    }

    /// The dialect read.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// True when everything has been read.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or_default()
    }

    /// Fails if bytes are left.
    pub fn finish(&self) -> Result<(), Error> {
        if self.is_empty() {
            Ok(())
        } else {
            Err(Error::Malformed(format!(
                "{} bytes left over at byte {}",
                self.remaining(),
                self.pos
            )))
        }
    }

    fn truncated(&self) -> Error {
        Error::Truncated { at: self.pos }
    }

    pub(crate) fn malformed(&self, what: impl std::fmt::Display) -> Error {
        Error::Malformed(format!("{what} (at byte {})", self.pos))
    }

    /// Reads the head of a top-level pack of type `ty` and returns its count, which is at most
    /// the bytes that remain (every item takes at least one byte).
    pub fn unpack_header(&mut self, ty: DataType) -> Result<usize, Error> {
        let at = self.pos;
        if self.dialect.fully_described() {
            let tag = self.get_data_type()?;
            if tag != DataType::INT32 {
                return Err(Error::Malformed(format!(
                    "pack count tagged {tag:?}, not INT32 (at byte {at})"
                )));
            }
        }
        let n = self.get_i32()?;
        if self.dialect.fully_described() {
            let tag = self.get_data_type()?;
            if tag != ty {
                return Err(Error::Malformed(format!(
                    "a pack of {tag:?} where {ty:?} was expected (at byte {at})"
                )));
            }
        }
        self.count(i64::from(n), at)
    }

    /// Checks a count read off the wire against the bytes that remain.
    pub(crate) fn count(&self, n: i64, at: usize) -> Result<usize, Error> {
        let n = usize::try_from(n)
            .map_err(|_| Error::Malformed(format!("negative count {n} (at byte {at})")))?;
        if n > self.remaining() {
            return Err(Error::Truncated { at });
        }
        Ok(n)
    }

    /// Runs `f` one nesting level down, failing beyond [`MAX_NESTING`].
    pub(crate) fn nested<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, Error>,
    ) -> Result<T, Error> {
        if self.depth >= MAX_NESTING {
            return Err(self.malformed(format!("values nest deeper than {MAX_NESTING} levels")));
        }
        self.depth += 1;
        let r = f(self);
        self.depth -= 1;
        r
    }

    /// Takes `n` raw bytes.
    pub fn get_raw(&mut self, n: usize) -> Result<&'a [u8], Error> {
        let end = self.pos.checked_add(n).ok_or_else(|| self.truncated())?;
        let bytes = self
            .buf
            .get(self.pos..end)
            .ok_or_else(|| self.truncated())?;
        self.pos = end;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let bytes = self
            .rest()
            .first_chunk::<N>()
            .copied()
            .ok_or_else(|| self.truncated())?;
        self.pos += N;
        Ok(bytes)
    }

    /// Reads a flex128 value that must fit in `bits` bits.
    fn flex(&mut self, bits: u32, what: &str) -> Result<u64, Error> {
        let at = self.pos;
        let (v, used) = flex::get(self.rest()).ok_or_else(|| self.truncated())?;
        self.pos += used;
        if bits < 64 && v >> bits != 0 {
            return Err(Error::Malformed(format!(
                "{what} value {v:#x} out of range (at byte {at})"
            )));
        }
        Ok(v)
    }

    /// A one-byte item.
    pub fn get_u8(&mut self) -> Result<u8, Error> {
        self.array::<1>().map(|[b]| b)
    }

    /// A `BOOL` (any non-zero byte is true, as in the reference).
    pub fn get_bool(&mut self) -> Result<bool, Error> {
        self.get_u8().map(|b| b != 0)
    }

    /// A `UINT16`.
    pub fn get_u16(&mut self) -> Result<u16, Error> {
        match self.dialect.codec {
            Codec::V41 => self.flex(16, "UINT16").map(|v| v as u16),
            Codec::V3 => self.array().map(u16::from_be_bytes),
        }
    }

    /// A `UINT32`.
    pub fn get_u32(&mut self) -> Result<u32, Error> {
        match self.dialect.codec {
            Codec::V41 => self.flex(32, "UINT32").map(|v| v as u32),
            Codec::V3 => self.array().map(u32::from_be_bytes),
        }
    }

    /// A `UINT64`.
    pub fn get_u64(&mut self) -> Result<u64, Error> {
        match self.dialect.codec {
            Codec::V41 => self.flex(64, "UINT64"),
            Codec::V3 => self.array().map(u64::from_be_bytes),
        }
    }

    /// An `INT16`.
    pub fn get_i16(&mut self) -> Result<i16, Error> {
        match self.dialect.codec {
            Codec::V41 => self.flex(16, "INT16").map(|v| flex::unzigzag(v) as i16),
            Codec::V3 => self.array().map(i16::from_be_bytes),
        }
    }

    /// An `INT32`.
    pub fn get_i32(&mut self) -> Result<i32, Error> {
        match self.dialect.codec {
            // A zig-zagged value under 2^32 is a sign-extended 32-bit value.
            Codec::V41 => self.flex(32, "INT32").map(|v| flex::unzigzag(v) as i32),
            Codec::V3 => self.array().map(i32::from_be_bytes),
        }
    }

    /// An `INT64`.
    pub fn get_i64(&mut self) -> Result<i64, Error> {
        match self.dialect.codec {
            Codec::V41 => self.flex(64, "INT64").map(flex::unzigzag),
            Codec::V3 => self.array().map(i64::from_be_bytes),
        }
    }

    /// A `STATUS`.
    pub fn get_status(&mut self) -> Result<Status, Error> {
        self.get_i32().map(Status)
    }

    /// A data type tag.
    pub fn get_data_type(&mut self) -> Result<DataType, Error> {
        self.get_u16().map(DataType)
    }

    /// An integer preceded by a type tag naming its width (`v3`'s `SIZE`, `INT`, `UINT`, and
    /// `PID` in both codecs), widened to `i128`.
    fn get_tagged_int(&mut self) -> Result<(DataType, i128), Error> {
        let at = self.pos;
        let ty = self.get_data_type()?;
        let v = match ty {
            DataType::INT8 => i128::from(self.get_u8()? as i8),
            DataType::UINT8 => i128::from(self.get_u8()?),
            DataType::INT16 => i128::from(self.get_i16()?),
            DataType::UINT16 => i128::from(self.get_u16()?),
            DataType::INT32 => i128::from(self.get_i32()?),
            DataType::UINT32 => i128::from(self.get_u32()?),
            DataType::INT64 => i128::from(self.get_i64()?),
            DataType::UINT64 => i128::from(self.get_u64()?),
            other => {
                return Err(Error::Malformed(format!(
                    "an integer tagged {other:?} (at byte {at})"
                )));
            }
        };
        Ok((ty, v))
    }

    fn fit<T: TryFrom<i128>>(&self, v: i128, what: &str) -> Result<T, Error> {
        T::try_from(v).map_err(|_| self.malformed(format!("{what} value {v} out of range")))
    }

    /// A `SIZE`.
    pub fn get_size(&mut self) -> Result<u64, Error> {
        match self.dialect.codec {
            Codec::V41 => self.flex(64, "SIZE"),
            Codec::V3 => {
                let (_, v) = self.get_tagged_int()?;
                self.fit(v, "SIZE")
            }
        }
    }

    /// A `SIZE` used as a length or count: at most the bytes that remain.
    pub(crate) fn get_len(&mut self) -> Result<usize, Error> {
        let at = self.pos;
        let n = self.get_size()?;
        self.count(i64::try_from(n).unwrap_or(i64::MAX), at)
    }

    /// An `INT` (C `int`).
    pub fn get_int(&mut self) -> Result<i32, Error> {
        match self.dialect.codec {
            Codec::V41 => self.get_i32(),
            Codec::V3 => match self.get_tagged_int()? {
                // The reference reads the 4 bytes of its own width as they are.
                (DataType::INT32 | DataType::UINT32, v) => Ok(v as u32 as i32),
                (_, v) => self.fit(v, "INT"),
            },
        }
    }

    /// A `UINT` (C `unsigned int`), packed as the bits of an `INT` ([`Packer::put_uint`]).
    ///
    /// [`Packer::put_uint`]: super::Packer::put_uint
    pub fn get_uint(&mut self) -> Result<u32, Error> {
        match self.dialect.codec {
            Codec::V41 => self.get_i32().map(|v| v as u32),
            Codec::V3 => match self.get_tagged_int()? {
                (DataType::INT32 | DataType::UINT32, v) => Ok(v as u32),
                (_, v) => self.fit(v, "UINT"),
            },
        }
    }

    /// A `PID`: a type tag naming its width, then the value.
    pub fn get_pid(&mut self) -> Result<u32, Error> {
        let (_, v) = self.get_tagged_int()?;
        self.fit(v, "PID")
    }

    /// A `STRING` as bytes without the NUL; `None` for NULL (length 0).
    pub(crate) fn get_cstr(&mut self) -> Result<Option<&'a [u8]>, Error> {
        let at = self.pos;
        let len = self.get_i32()?;
        if len == 0 {
            return Ok(None);
        }
        let len = self.count(i64::from(len), at)?;
        let bytes = self.get_raw(len)?;
        match bytes.split_last() {
            Some((0, s)) if !s.contains(&0) => Ok(Some(s)),
            _ => Err(Error::Malformed(format!(
                "a string of {len} bytes that is not one NUL-terminated C string (at byte {at})"
            ))),
        }
    }

    /// A `STRING` that may be NULL. Bytes that are not UTF-8 are replaced (U+FFFD), as C
    /// strings carry no encoding.
    pub fn get_opt_string(&mut self) -> Result<Option<String>, Error> {
        // Valid UTF-8 (what real programs send) is checked by the fast validator and copied
        // once; anything else is read lossily.
        Ok(self.get_cstr()?.map(|s| match std::str::from_utf8(s) {
            Ok(text) => text.to_owned(),
            Err(_) => String::from_utf8_lossy(s).into_owned(),
        }))
    }

    /// A `STRING`, NULL read as empty.
    pub fn get_string(&mut self) -> Result<String, Error> {
        Ok(self.get_opt_string()?.unwrap_or_default())
    }

    /// A `BYTE_OBJECT`'s bytes, borrowed.
    pub fn get_bytes(&mut self) -> Result<&'a [u8], Error> {
        let n = self.get_len()?;
        self.get_raw(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A C string as the packer writes it.
    fn cstr(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let packed = super::super::pack::Packer::new(&mut out, Dialect::V41).put_cstr(Some(bytes));
        assert!(packed.is_ok());
        out
    }

    #[test]
    fn strings_read_whole_when_utf8_and_lossily_otherwise() {
        let text = "débit 10 Gb/s".as_bytes();
        let wire = cstr(text);
        let mut u = Unpacker::new(&wire, Dialect::V41);
        assert_eq!(u.get_string().ok().as_deref(), Some("débit 10 Gb/s"));
        let wire = cstr(&[b'a', 0xff, b'b']);
        let mut u = Unpacker::new(&wire, Dialect::V41);
        assert_eq!(u.get_string().ok().as_deref(), Some("a\u{fffd}b"));
    }
}
