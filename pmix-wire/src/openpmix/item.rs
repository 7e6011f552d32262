//! [`Item`]: the types that travel as items of a top-level pack, each with its data type tag
//! and its inner encoding.

use pmix_types::{
    AllocDirective, DataArray, DataRange, DataType, Envar, Info, InfoFlags, IofChannel, JobState,
    LinkState, Locality, Persistence, Proc, ProcInfo, ProcState, Rank, Scope, Status, Timeval,
    Value,
};

pub use pmix_types::Kval;

use super::cmd::Cmd;
use super::dialect::BufferType;
use super::pack::Packer;
use super::unpack::Unpacker;
use crate::Error;
use crate::msg::{App, Published, Query};

/// A type that travels as the items of a top-level pack ([`Packer::pack`],
/// [`Unpacker::unpack`]): its data type tag, and its encoding inside a pack.
///
/// Every encoding takes at least one byte (the unpacker relies on that to bound counts).
pub trait Item: Sized {
    /// The data type tag a fully-described pack of these carries.
    const TYPE: DataType;
    /// Writes one item, without count or tag.
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error>;
    /// Reads one item.
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error>;
}

/// Top-level packs of items: the half of [`Packer`] that takes an [`Item`].
impl Packer<'_> {
    /// Writes one top-level pack of `items`: `[count][items]`, or in a fully-described
    /// buffer `[INT32][count][T::TYPE][items]`.
    pub fn pack<T: Item>(&mut self, items: &[T]) -> Result<(), Error> {
        self.pack_header(T::TYPE, items.len())?;
        items.iter().try_for_each(|i| i.pack_item(self))
    }

    /// Writes one top-level pack holding the single item `item`.
    pub fn pack_one<T: Item>(&mut self, item: &T) -> Result<(), Error> {
        self.pack(std::slice::from_ref(item))
    }
}

/// Top-level packs of items: the half of [`Unpacker`] that yields an [`Item`].
impl Unpacker<'_> {
    /// Reads one top-level pack of `T`s, however many it holds.
    pub fn unpack<T: Item>(&mut self) -> Result<Vec<T>, Error> {
        let n = self.unpack_header(T::TYPE)?;
        self.items(n)
    }

    /// Reads one top-level pack that must hold exactly one `T`.
    pub fn unpack_one<T: Item>(&mut self) -> Result<T, Error> {
        let at = self.position();
        let n = self.unpack_header(T::TYPE)?;
        if n != 1 {
            return Err(Error::Malformed(format!(
                "a pack of {n} {:?} items where one was expected (at byte {at})",
                T::TYPE
            )));
        }
        T::unpack_item(self)
    }

    /// Reads one top-level pack that must hold exactly `n` `T`s (a list announced by a count
    /// packed before it).
    pub fn unpack_exact<T: Item>(&mut self, n: usize) -> Result<Vec<T>, Error> {
        let at = self.position();
        let got = self.unpack_header(T::TYPE)?;
        if got != n {
            return Err(Error::Malformed(format!(
                "a pack of {got} {:?} items where {n} were announced (at byte {at})",
                T::TYPE
            )));
        }
        self.items(n)
    }

    /// Reads the items of a list whose length `n` was packed before it (as a `SIZE`): one pack
    /// of `n` when `n > 0`; when `n == 0` the reference writes an empty pack for some lists
    /// and nothing for others, and both are accepted.
    pub fn unpack_announced<T: Item>(&mut self, n: usize) -> Result<Vec<T>, Error> {
        if n == 0 {
            let mut peek = self.clone();
            if peek.unpack_header(T::TYPE).ok() == Some(0) {
                *self = peek;
            }
            return Ok(Vec::new());
        }
        self.unpack_exact(n)
    }

    /// Reads `n` items (`n` already checked against the remaining bytes).
    pub(crate) fn items<T: Item>(&mut self, n: usize) -> Result<Vec<T>, Error> {
        let mut out = Vec::with_capacity(n.min(self.remaining()));
        for _ in 0..n {
            let before = self.position();
            out.push(T::unpack_item(self)?);
            if self.position() == before {
                // An item that takes no bytes would let a count alone drive the loop.
                return Err(self.malformed(format!("empty {:?} item", T::TYPE)));
            }
        }
        Ok(out)
    }
}

/// Reads a `SIZE` count pack.
pub(super) fn size(u: &mut Unpacker<'_>) -> Result<usize, Error> {
    let at = u.position();
    let n = u.unpack_one::<Size>()?.0;
    // Every announced item takes at least one byte.
    u.count(i64::try_from(n).unwrap_or(i64::MAX), at)
}

/// Reads a `SIZE` count and the pack of that many items that follows it (which, for a count
/// of zero, the reference writes for some lists and not for others: both are accepted).
pub(super) fn counted<T: Item>(u: &mut Unpacker<'_>) -> Result<Vec<T>, Error> {
    let n = size(u)?;
    u.unpack_announced(n)
}

/// Writes a `SIZE` count and, when it is not zero (or `always`), the pack of the items.
pub(super) fn put_counted<T: Item>(
    p: &mut Packer<'_>,
    items: &[T],
    always: bool,
) -> Result<(), Error> {
    p.pack_one(&Size(items.len() as u64))?;
    if always || !items.is_empty() {
        p.pack(items)?;
    }
    Ok(())
}

/// The data type of a nested packed buffer (`PMIX_BUFFER`, 26).
pub const BUFFER: DataType = DataType::BUFFER;

/// A `SIZE` (`size_t`) item, distinct from a `UINT64` one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Size(pub u64);

/// A `TIME` (`time_t`) item: seconds since the epoch (what a `LOG` request carries first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Time(pub u64);

/// A `BYTE_OBJECT` item: length-prefixed opaque bytes (rank blobs, modex data).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct ByteObject(pub Vec<u8>);

/// A `BUFFER` item: a nested packed buffer with its own buffer type (what a `COMMIT` carries).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Buffer {
    /// How the nested bytes were packed.
    pub buffer_type: BufferType,
    /// The packed bytes.
    pub bytes: Vec<u8>,
}

/// Implements [`Item`] for a one-byte open enumeration.
macro_rules! byte_item {
    ($($t:ty => $tag:ident),* $(,)?) => {
        $(impl Item for $t {
            const TYPE: DataType = DataType::$tag;
            fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
                p.put_u8(self.0);
                Ok(())
            }
            fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
                u.get_u8().map(Self)
            }
        })*
    };
}

byte_item! {
    Scope => SCOPE,
    DataRange => DATA_RANGE,
    Persistence => PERSIST,
    ProcState => PROC_STATE,
    AllocDirective => ALLOC_DIRECTIVE,
    JobState => JOB_STATE,
    LinkState => LINK_STATE,
    Cmd => COMMAND,
}

/// Implements [`Item`] for a type whose encoding is one `put_*`/`get_*` pair.
macro_rules! simple_item {
    ($($t:ty => $tag:ident, $put:ident, $get:ident),* $(,)?) => {
        $(impl Item for $t {
            const TYPE: DataType = DataType::$tag;
            fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
                p.$put(*self);
                Ok(())
            }
            fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
                u.$get()
            }
        })*
    };
}

simple_item! {
    bool => BOOL, put_bool, get_bool,
    u8 => BYTE, put_u8, get_u8,
    u16 => UINT16, put_u16, get_u16,
    u32 => UINT32, put_u32, get_u32,
    u64 => UINT64, put_u64, get_u64,
    i16 => INT16, put_i16, get_i16,
    i32 => INT32, put_i32, get_i32,
    i64 => INT64, put_i64, get_i64,
    Status => STATUS, put_status, get_status,
    DataType => DATA_TYPE, put_data_type, get_data_type,
}

impl Item for i8 {
    const TYPE: DataType = DataType::INT8;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_u8(*self as u8);
        Ok(())
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        u.get_u8().map(|b| b as i8)
    }
}

impl Item for Size {
    const TYPE: DataType = DataType::SIZE;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_size(self.0);
        Ok(())
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        u.get_size().map(Size)
    }
}

impl Item for Time {
    const TYPE: DataType = DataType::TIME;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_u64(self.0);
        Ok(())
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        u.get_u64().map(Time)
    }
}

impl Item for Rank {
    const TYPE: DataType = DataType::PROC_RANK;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_u32(self.0);
        Ok(())
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        u.get_u32().map(Rank)
    }
}

impl Item for InfoFlags {
    const TYPE: DataType = DataType::INFO_DIRECTIVES;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_u32(self.0);
        Ok(())
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        u.get_u32().map(InfoFlags)
    }
}

impl Item for IofChannel {
    const TYPE: DataType = DataType::IOF_CHANNEL;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_u16(self.0);
        Ok(())
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        u.get_u16().map(IofChannel)
    }
}

impl Item for Locality {
    const TYPE: DataType = DataType::LOCTYPE;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_u16(self.0);
        Ok(())
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        u.get_u16().map(Locality)
    }
}

/// A non-NULL string; NULL reads as empty.
impl Item for String {
    const TYPE: DataType = DataType::STRING;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_str(self)
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        u.get_string()
    }
}

/// A string that may be NULL.
impl Item for Option<String> {
    const TYPE: DataType = DataType::STRING;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_opt_str(self.as_deref())
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        u.get_opt_string()
    }
}

impl Item for Timeval {
    const TYPE: DataType = DataType::TIMEVAL;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_i64(self.sec);
        p.put_i64(self.usec);
        Ok(())
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        Ok(Timeval {
            sec: u.get_i64()?,
            usec: u.get_i64()?,
        })
    }
}

impl Item for ByteObject {
    const TYPE: DataType = DataType::BYTE_OBJECT;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_bytes(&self.0);
        Ok(())
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        u.get_bytes().map(|b| ByteObject(b.to_vec()))
    }
}

impl Item for Buffer {
    const TYPE: DataType = BUFFER;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_u8(self.buffer_type.as_u8());
        p.put_bytes(&self.bytes);
        Ok(())
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        let buffer_type = BufferType::from_u8(u.get_u8()?)?;
        let bytes = u.get_bytes()?.to_vec();
        Ok(Buffer { buffer_type, bytes })
    }
}

impl Item for Proc {
    const TYPE: DataType = DataType::PROC;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_proc(self)
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        u.get_proc()
    }
}

impl Item for Value {
    const TYPE: DataType = DataType::VALUE;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_value(self)
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        u.get_value()
    }
}

impl Item for Info {
    const TYPE: DataType = DataType::INFO;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_info(self)
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        u.get_info()
    }
}

impl Item for Kval {
    const TYPE: DataType = DataType::KVAL;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_str(self.key.as_str())?;
        p.put_value(&self.value)
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        let key = u.get_key()?;
        let value = u.get_value()?;
        Ok(Kval { key, value })
    }
}

/// `PDATA`: published data as a lookup returns it.
impl Item for Published {
    const TYPE: DataType = DataType::PDATA;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_proc(&self.proc)?;
        p.put_str(self.key.as_str())?;
        p.put_value(&self.value)
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        let proc = u.get_proc()?;
        let key = u.get_key()?;
        let value = u.get_value()?;
        Ok(Published { proc, key, value })
    }
}

impl Item for ProcInfo {
    const TYPE: DataType = DataType::PROC_INFO;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_proc_info(self)
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        u.get_proc_info()
    }
}

impl Item for DataArray {
    const TYPE: DataType = DataType::DATA_ARRAY;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_data_array(self)
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        u.get_data_array()
    }
}

impl Item for Envar {
    const TYPE: DataType = DataType::ENVAR;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_envar(self)
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        u.get_envar()
    }
}

/// `APP` (`pmix_app_t`): `STRING` cmd, `INT` argc (an `int` for historical reasons), argv
/// strings, `INT32` envc, env strings, `STRING` cwd, `INT` maxprocs, `SIZE` ninfo, infos.
/// An empty `cmd` or `cwd` travels as NULL.
impl Item for App {
    const TYPE: DataType = DataType::APP;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_str_or_null(&self.cmd)?;
        p.put_int(count_i32(self.argv.len())?);
        self.argv.iter().try_for_each(|a| p.put_str(a))?;
        p.put_i32(count_i32(self.env.len())?);
        self.env.iter().try_for_each(|e| p.put_str(e))?;
        p.put_str_or_null(&self.cwd)?;
        let maxprocs = i32::try_from(self.maxprocs)
            .map_err(|_| Error::Encode(format!("maxprocs {} exceeds an int", self.maxprocs)))?;
        p.put_int(maxprocs);
        p.put_len(self.info.len());
        self.info.iter().try_for_each(|i| p.put_info(i))
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        let cmd = u.get_string()?;
        let at = u.position();
        let argc = u.get_int()?;
        let argc = u.count(i64::from(argc), at)?;
        let argv = u.items::<String>(argc)?;
        let at = u.position();
        let envc = u.get_i32()?;
        let envc = u.count(i64::from(envc), at)?;
        let env = u.items::<String>(envc)?;
        let cwd = u.get_string()?;
        let maxprocs = u.get_int()?;
        let maxprocs = u32::try_from(maxprocs)
            .map_err(|_| u.malformed(format!("negative maxprocs {maxprocs}")))?;
        let ninfo = u.get_len()?;
        let info = u.items::<Info>(ninfo)?;
        Ok(App {
            cmd,
            argv,
            env,
            cwd,
            maxprocs,
            info,
        })
    }
}

/// `QUERY` (`pmix_query_t`): `INT32` nkeys, key strings, `SIZE` nqual, qualifier infos.
impl Item for Query {
    const TYPE: DataType = DataType::QUERY;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_i32(count_i32(self.keys.len())?);
        self.keys.iter().try_for_each(|k| p.put_str(k.as_str()))?;
        p.put_len(self.qualifiers.len());
        self.qualifiers.iter().try_for_each(|i| p.put_info(i))
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        let at = u.position();
        let nkeys = u.get_i32()?;
        let nkeys = u.count(i64::from(nkeys), at)?;
        let mut keys = Vec::with_capacity(nkeys);
        for _ in 0..nkeys {
            keys.push(u.get_key()?);
        }
        let nqual = u.get_len()?;
        let qualifiers = u.items::<Info>(nqual)?;
        Ok(Query { keys, qualifiers })
    }
}

fn count_i32(n: usize) -> Result<i32, Error> {
    i32::try_from(n).map_err(|_| Error::Encode(format!("{n} items are too many for an int")))
}
