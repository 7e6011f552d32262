//! [`Packer`]: appends packed data to a `Vec<u8>` in one connection's [`Dialect`].

use pmix_types::{DataType, Status};

use super::dialect::{Codec, Dialect};
use super::flex;
use crate::Error;

/// Appends data to a buffer the way the reference's `PMIX_BFROPS_PACK` does, in one
/// [`Dialect`].
///
/// [`pack`](Packer::pack) writes a *top-level pack* (a count, plus type tags in
/// fully-described buffers, then the items); the `put_*` methods write the inner encoding of
/// one item, which is what composite items are made of and what [`Item`](super::Item)
/// implementations use.
///
/// On error the buffer may hold part of what was being written; the message encoders of this
/// module truncate it back.
///
/// ```
/// use pmix_types::Status;
/// use pmix_wire::openpmix::{Dialect, Packer};
///
/// let mut out = Vec::new();
/// Packer::new(&mut out, Dialect::V41).pack_one(&Status::ERR_NOT_SUPPORTED)?;
/// assert_eq!(out, [0x02, 0x5d]); // count 1, status -47
/// # Ok::<(), pmix_wire::Error>(())
/// ```
#[derive(Debug)]
pub struct Packer<'o> {
    out: &'o mut Vec<u8>,
    dialect: Dialect,
}

impl<'o> Packer<'o> {
    /// A packer appending to `out`.
    pub fn new(out: &'o mut Vec<u8>, dialect: Dialect) -> Self {
        Packer { out, dialect }
    }

    /// The dialect written.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Bytes in the underlying buffer (including what was there before this packer).
    pub fn len(&self) -> usize {
        self.out.len()
    }

    /// True when the underlying buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.out.is_empty()
    }

    /// The underlying buffer.
    pub fn bytes(&self) -> &[u8] {
        self.out
    }

    /// Writes the head of a top-level pack of `n` items of type `ty`; the caller writes the
    /// items with the `put_*` methods.
    pub fn pack_header(&mut self, ty: DataType, n: usize) -> Result<(), Error> {
        let n = i32::try_from(n)
            .map_err(|_| Error::Encode(format!("{n} items are too many for one pack")))?;
        if self.dialect.fully_described() {
            self.put_data_type(DataType::INT32);
        }
        self.put_i32(n);
        if self.dialect.fully_described() {
            self.put_data_type(ty);
        }
        Ok(())
    }

    /// Appends raw bytes (for layouts with no length of their own).
    pub fn put_raw(&mut self, bytes: &[u8]) {
        self.out.extend_from_slice(bytes);
    }

    /// A one-byte item: `BOOL`, `BYTE`, `INT8`, `UINT8` and the one-byte enumerations.
    pub fn put_u8(&mut self, b: u8) {
        self.out.push(b);
    }

    /// A `BOOL`.
    pub fn put_bool(&mut self, b: bool) {
        self.out.push(u8::from(b));
    }

    /// A `UINT16` (and the data type tags and IO channels that travel as one).
    pub fn put_u16(&mut self, v: u16) {
        match self.dialect.codec {
            Codec::V41 => flex::put(self.out, u64::from(v)),
            Codec::V3 => self.out.extend_from_slice(&v.to_be_bytes()),
        }
    }

    /// A `UINT32` (and ranks and info directives).
    pub fn put_u32(&mut self, v: u32) {
        match self.dialect.codec {
            Codec::V41 => flex::put(self.out, u64::from(v)),
            Codec::V3 => self.out.extend_from_slice(&v.to_be_bytes()),
        }
    }

    /// A `UINT64` (and `TIME`).
    pub fn put_u64(&mut self, v: u64) {
        match self.dialect.codec {
            Codec::V41 => flex::put(self.out, v),
            Codec::V3 => self.out.extend_from_slice(&v.to_be_bytes()),
        }
    }

    /// An `INT16`.
    pub fn put_i16(&mut self, v: i16) {
        match self.dialect.codec {
            Codec::V41 => flex::put(self.out, flex::zigzag(i64::from(v))),
            Codec::V3 => self.out.extend_from_slice(&v.to_be_bytes()),
        }
    }

    /// An `INT32` (and counts, string lengths and statuses).
    pub fn put_i32(&mut self, v: i32) {
        match self.dialect.codec {
            Codec::V41 => flex::put(self.out, flex::zigzag(i64::from(v))),
            Codec::V3 => self.out.extend_from_slice(&v.to_be_bytes()),
        }
    }

    /// An `INT64`.
    pub fn put_i64(&mut self, v: i64) {
        match self.dialect.codec {
            Codec::V41 => flex::put(self.out, flex::zigzag(v)),
            Codec::V3 => self.out.extend_from_slice(&v.to_be_bytes()),
        }
    }

    /// A `STATUS`.
    pub fn put_status(&mut self, s: Status) {
        self.put_i32(s.0);
    }

    /// A data type tag (`pmix_data_type_t`, packed as a `UINT16`).
    pub fn put_data_type(&mut self, ty: DataType) {
        self.put_u16(ty.0);
    }

    /// A `SIZE` (`size_t`): a varint in `v41`; in `v3` a `UINT64` tag and 8 bytes.
    pub fn put_size(&mut self, v: u64) {
        match self.dialect.codec {
            Codec::V41 => flex::put(self.out, v),
            Codec::V3 => {
                self.put_data_type(DataType::UINT64);
                self.put_u64(v);
            }
        }
    }

    /// A length as a `SIZE`.
    pub(crate) fn put_len(&mut self, n: usize) {
        // usize is at most 64 bits on every supported target.
        self.put_size(n as u64);
    }

    /// An `INT` (C `int`): a signed varint in `v41`; in `v3` an `INT32` tag and 4 bytes.
    pub fn put_int(&mut self, v: i32) {
        if self.dialect.codec == Codec::V3 {
            self.put_data_type(DataType::INT32);
        }
        self.put_i32(v);
    }

    /// A `UINT` (C `unsigned int`): the reference packs it exactly like an `INT`, the same
    /// bits as a signed value: in `v41` zig-zagged (3000000000 as -1294967296), in `v3` an
    /// `INT32` tag and 4 bytes.
    pub fn put_uint(&mut self, v: u32) {
        match self.dialect.codec {
            Codec::V41 => self.put_i32(v as i32),
            Codec::V3 => {
                self.put_data_type(DataType::INT32);
                self.put_u32(v);
            }
        }
    }

    /// A `PID`: always a `UINT32` type tag (the width of `pid_t` on Linux), then the value.
    pub fn put_pid(&mut self, pid: u32) {
        self.put_data_type(DataType::UINT32);
        self.put_u32(pid);
    }

    /// A non-NULL `STRING`: its length including the NUL, then the bytes and the NUL.
    ///
    /// Fails for a string holding a NUL byte, which C would cut short.
    pub fn put_str(&mut self, s: &str) -> Result<(), Error> {
        self.put_cstr(Some(s.as_bytes()))
    }

    /// A `STRING` that may be NULL: `None` is length 0 and nothing else.
    pub fn put_opt_str(&mut self, s: Option<&str>) -> Result<(), Error> {
        self.put_cstr(s.map(str::as_bytes))
    }

    /// A string whose empty value the reference sends as NULL (length 0).
    pub(crate) fn put_str_or_null(&mut self, s: &str) -> Result<(), Error> {
        self.put_opt_str(Some(s).filter(|s| !s.is_empty()))
    }

    /// A `STRING` from raw bytes (not necessarily UTF-8), `None` for NULL.
    pub(crate) fn put_cstr(&mut self, s: Option<&[u8]>) -> Result<(), Error> {
        let Some(s) = s else {
            self.put_i32(0);
            return Ok(());
        };
        if s.contains(&0) {
            return Err(Error::Encode(
                "a string with a NUL byte cannot travel as a C string".into(),
            ));
        }
        let len = s
            .len()
            .checked_add(1)
            .and_then(|n| i32::try_from(n).ok())
            .ok_or_else(|| Error::Encode(format!("string of {} bytes is too long", s.len())))?;
        // Room for the length, the bytes and the NUL at once: pushing the NUL onto a buffer
        // the bytes filled would copy all of it to a larger one.
        self.out.reserve(4 + s.len() + 1);
        self.put_i32(len);
        self.out.extend_from_slice(s);
        self.out.push(0);
        Ok(())
    }

    /// A `BYTE_OBJECT` (also `COMPRESSED_STRING` and `COMPRESSED_BYTE_OBJECT`): `SIZE`
    /// length, then the bytes.
    pub fn put_bytes(&mut self, bytes: &[u8]) {
        self.put_len(bytes.len());
        self.out.extend_from_slice(bytes);
    }
}

/// Runs `f` on `out`; on error, `out` is truncated back to where it was.
pub(super) fn atomically(
    out: &mut Vec<u8>,
    dialect: Dialect,
    f: impl FnOnce(&mut Packer<'_>) -> Result<(), Error>,
) -> Result<(), Error> {
    let start = out.len();
    let r = f(&mut Packer::new(out, dialect));
    if r.is_err() {
        out.truncate(start);
    }
    r
}
