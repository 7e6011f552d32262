//! The inner encoding of [`Value`] and of the composite types a value can hold.

use pmix_types::{
    AllocDirective, App, Coord, Cpuset, DataArray, DataRange, DataType, DeviceDistance, DeviceType,
    DiskStats, Endpoint, Envar, Geometry, Info, InfoFlags, IofChannel, JobState, Key, Kval,
    LinkState, Locality, NetStats, NodeStats, Nspace, Persistence, Proc, ProcInfo, ProcState,
    ProcStats, Published, Query, Rank, RegAttr, Scope, Timeval, Topology, Value,
};

use super::item::Item;
use super::pack::Packer;
use super::unpack::Unpacker;
use crate::Error;

/// Why a `POINTER` is never encoded, though one is decoded (the reference's placeholder byte,
/// standing for an address that means nothing to another process).
pub(crate) const POINTER_REFUSED: &str = "a POINTER means nothing to another process";

/// The second field of the zlib form of a `REGEX` value.
const BLOB_COMPONENT: &[u8] = b"component=zlib:";

impl Packer<'_> {
    /// A `PROC`: the namespace as a string, then the rank as a `PROC_RANK`.
    pub fn put_proc(&mut self, p: &Proc) -> Result<(), Error> {
        self.put_str(p.nspace.as_str())?;
        self.put_u32(p.rank.0);
        Ok(())
    }

    /// A `VALUE`: the type tag, then the payload.
    pub fn put_value(&mut self, v: &Value) -> Result<(), Error> {
        let ty = v.data_type();
        if !self.dialect().codec.knows(ty) {
            return Err(Error::Unsupported(format!(
                "a {ty:?} value cannot be sent to a {} peer",
                self.dialect().codec.name()
            )));
        }
        self.put_data_type(ty);
        self.put_value_payload(v)
    }

    /// An `INFO`: key, directives, type tag, payload.
    pub fn put_info(&mut self, i: &Info) -> Result<(), Error> {
        self.put_str(i.key.as_str())?;
        self.put_u32(i.flags.0);
        self.put_value(&i.value)
    }

    /// The payload of `v` alone, as it follows its type tag.
    ///
    /// Floats and doubles go out the reference's way, printed with C's `%f` into a string:
    /// six decimals, so `1e-7` arrives as `0.0` and `0.1f32` as `0.1` rounded to the nearest
    /// `f32`; precision beyond the sixth decimal is lost.
    pub fn put_value_payload(&mut self, v: &Value) -> Result<(), Error> {
        match v {
            Value::Undef => {}
            Value::Bool(b) => self.put_bool(*b),
            Value::Byte(b) | Value::Uint8(b) => self.put_u8(*b),
            Value::Int8(i) => self.put_u8(*i as u8),
            Value::String(s) => self.put_str(s)?,
            Value::NullString => self.put_opt_str(None)?,
            Value::Size(n) => self.put_size(*n),
            Value::Pid(p) => self.put_pid(*p),
            Value::Int(i) => self.put_int(*i),
            Value::Int16(i) => self.put_i16(*i),
            Value::Int32(i) => self.put_i32(*i),
            Value::Int64(i) => self.put_i64(*i),
            Value::Uint(u) => self.put_uint(*u),
            Value::Uint16(u) => self.put_u16(*u),
            Value::Uint32(u) => self.put_u32(*u),
            Value::Uint64(u) => self.put_u64(*u),
            Value::Float(f) => self.put_float(*f)?,
            Value::Double(d) => self.put_str(&format_f(*d))?,
            Value::Timeval(t) => t.pack_item(self)?,
            // time_t travels as the bits of a uint64_t.
            Value::Time(t) => self.put_u64(*t as u64),
            Value::Status(s) => self.put_status(*s),
            Value::Rank(r) => self.put_u32(r.0),
            Value::Proc(p) => self.put_proc(p)?,
            Value::Nspace(n) => self.put_str(n.as_str())?,
            Value::ByteObject(b) | Value::CompressedString(b) | Value::CompressedBytes(b) => {
                self.put_bytes(b)
            }
            Value::Persistence(p) => self.put_u8(p.0),
            Value::Scope(s) => self.put_u8(s.0),
            Value::DataRange(r) => self.put_u8(r.0),
            Value::InfoDirectives(f) => self.put_u32(f.0),
            Value::DataType(t) => self.put_data_type(*t),
            Value::ProcState(s) => self.put_u8(s.0),
            Value::ProcInfo(pi) => self.put_proc_info(pi)?,
            Value::DataArray(a) => self.put_data_array(a)?,
            Value::Info(i) => self.put_info(i)?,
            Value::Envar(e) => self.put_envar(e)?,
            Value::Regex(r) => self.put_regex(r)?,
            Value::AllocDirective(d) => self.put_u8(d.0),
            Value::IofChannel(c) => self.put_u16(c.0),
            Value::JobState(s) => self.put_u8(s.0),
            Value::LinkState(s) => self.put_u8(s.0),
            Value::Locality(l) => self.put_u16(l.0),
            Value::RegAttr(r) => self.put_regattr(r)?,
            Value::App(a) => a.pack_item(self)?,
            Value::Pdata(d) => d.pack_item(self)?,
            Value::Kval(k) => k.pack_item(self)?,
            Value::Query(q) => q.pack_item(self)?,
            Value::Buffer(b) => {
                self.put_u8(b.kind);
                self.put_bytes(&b.bytes);
            }
            Value::DataBuffer(b) => self.put_bytes(b),
            Value::Pointer(_) => return Err(Error::Unsupported(POINTER_REFUSED.into())),
            Value::Coord(c) => c.pack_item(self)?,
            Value::Cpuset(c) => c.pack_item(self)?,
            Value::Geometry(g) => g.pack_item(self)?,
            Value::DeviceDist(d) => d.pack_item(self)?,
            Value::Endpoint(e) => e.pack_item(self)?,
            Value::Topology(t) => t.pack_item(self)?,
            Value::DevType(t) => t.pack_item(self)?,
            Value::ProcStats(s) => s.pack_item(self)?,
            Value::DiskStats(s) => s.pack_item(self)?,
            Value::NetStats(s) => s.pack_item(self)?,
            Value::NodeStats(s) => s.pack_item(self)?,
            Value::StorageMedium(v) | Value::StorageAccess(v) | Value::StoragePersistence(v) => {
                self.put_u64(*v)
            }
            Value::StorageAccessType(v) => self.put_u16(*v),
            other => {
                return Err(Error::Unsupported(format!(
                    "a {:?} value has no OpenPMIx encoding here",
                    other.data_type()
                )));
            }
        }
        Ok(())
    }

    /// A `FLOAT`: printed with C's `%f` into a string, as the reference sends it (see
    /// [`Packer::put_value_payload`]).
    pub fn put_float(&mut self, f: f32) -> Result<(), Error> {
        self.put_str(&format_f(f64::from(f)))
    }

    /// A `PROC_INFO`: proc, host name, executable, pid, state. The exit code of
    /// [`ProcInfo`] has no place in the reference's layout and is not sent.
    pub fn put_proc_info(&mut self, pi: &ProcInfo) -> Result<(), Error> {
        self.put_proc(&pi.proc)?;
        self.put_str_or_null(&pi.hostname)?;
        self.put_str_or_null(&pi.executable_name)?;
        self.put_pid(pi.pid);
        self.put_u8(pi.state.0);
        Ok(())
    }

    /// A `REGATTR`: name, key (both strings), type, then an `INT32` count of description
    /// lines and the lines.
    ///
    /// The type goes as an `INT16`, which is how libpmix reads a `DATA_TYPE` field
    /// (`pmix_bfrops_base_unpack_datatype`); its packer writes a `UINT16`, which in `v41`'s
    /// variable-length integers is another encoding, so libpmix misreads the types of its
    /// own servers' answers (1 as -1) and reads ours right.
    pub fn put_regattr(&mut self, r: &RegAttr) -> Result<(), Error> {
        self.put_str(&r.name)?;
        self.put_str(&r.key)?;
        self.put_i16(r.ty.0 as i16);
        let n = i32::try_from(r.description.len())
            .map_err(|_| Error::Unsupported("a description of 2^31 lines".into()))?;
        self.put_i32(n);
        for line in &r.description {
            self.put_str(line)?;
        }
        Ok(())
    }

    /// A `DATA_ARRAY`: element type tag, `SIZE` count, then the elements' payloads (each a
    /// whole `VALUE`, tag included, in an array of type `VALUE`). An array of type `UNDEF`
    /// carries no elements and is sent with count 0.
    pub fn put_data_array(&mut self, a: &DataArray) -> Result<(), Error> {
        let ty = a.elem_type();
        if !self.dialect().codec.knows(ty) {
            return Err(Error::Unsupported(format!(
                "an array of {ty:?} cannot be sent to a {} peer",
                self.dialect().codec.name()
            )));
        }
        self.put_data_type(ty);
        if ty == DataType::UNDEF {
            self.put_size(0);
            return Ok(());
        }
        self.put_len(a.items().len());
        a.items()
            .iter()
            .try_for_each(|item| self.put_element(ty, item))
    }

    /// One element of an array of `ty` (a data array's, or a top-level pack's such as
    /// `PMIx_Data_pack` writes): a whole `VALUE`, type tag included, when `ty` is `VALUE`;
    /// otherwise the payload of `v`, which must be of type `ty`.
    pub fn put_element(&mut self, ty: DataType, v: &Value) -> Result<(), Error> {
        if ty == DataType::VALUE {
            return self.put_value(v);
        }
        if v.data_type() != ty {
            return Err(Error::Encode(format!(
                "a {:?} value among elements of {ty:?}",
                v.data_type()
            )));
        }
        self.put_value_payload(v)
    }

    /// A top-level pack of `values`, each an element of type `ty` ([`Packer::put_element`]):
    /// what `PMIx_Data_pack` appends to a buffer.
    pub fn pack_elements(&mut self, ty: DataType, values: &[Value]) -> Result<(), Error> {
        self.pack_header(ty, values.len())?;
        values.iter().try_for_each(|v| self.put_element(ty, v))
    }

    /// An `ENVAR`: name, value, separator byte.
    pub fn put_envar(&mut self, e: &Envar) -> Result<(), Error> {
        self.put_str_or_null(&e.name)?;
        self.put_str_or_null(&e.value)?;
        self.put_u8(e.separator);
        Ok(())
    }

    /// A `REGEX` the way the reference's regex modules write it: the `pmix[...]` (or any
    /// `pmix`-prefixed) and `raw:` forms as NUL-terminated bytes with no length, the zlib form
    /// (`blob:\0component=zlib:\0size=N:\0` and N bytes) verbatim, anything else as a packed
    /// string (one count-1 pack, as the reference's fallback writes it).
    ///
    /// OpenPMIx 4.2.x reads the zlib form with a wrong length; send it only to peers that are
    /// OpenPMIx 5.0.10 or later, or pmix-rs.
    pub fn put_regex(&mut self, r: &[u8]) -> Result<(), Error> {
        if r.starts_with(b"pmix") || r.starts_with(b"raw:") {
            if r.contains(&0) {
                return Err(Error::Encode("a regex with a NUL byte".into()));
            }
            self.put_raw(r);
            self.put_u8(0);
            return Ok(());
        }
        if let Some(len) = blob_len(r) {
            if len != r.len() {
                return Err(Error::Encode(format!(
                    "a zlib regex of {} bytes whose header says {len}",
                    r.len()
                )));
            }
            self.put_raw(r);
            return Ok(());
        }
        self.pack_header(DataType::STRING, 1)?;
        self.put_cstr(Some(r))
    }
}

/// C's `printf("%f", x)`: fixed notation with six decimals, `inf`, `nan`.
pub(crate) fn format_f(x: f64) -> String {
    if x.is_nan() {
        if x.is_sign_negative() { "-nan" } else { "nan" }.to_owned()
    } else if x.is_infinite() {
        if x < 0.0 { "-inf" } else { "inf" }.to_owned()
    } else {
        format!("{x:.6}")
    }
}

/// Longest number prefix [`parse_f`] looks for in text that is not a number as a whole.
const MAX_NUMBER_LEN: usize = 512;

/// C's `strtod`: leading white space skipped, the longest number prefix read, trailing text
/// ignored, 0 when there is no number at all.
fn parse_f<T: std::str::FromStr + Default>(s: &str) -> T {
    let s = s.trim_start_matches(|c: char| c.is_ascii_whitespace());
    if let Ok(v) = s.parse() {
        return v;
    }
    // Longest prefix that is a number; numbers are ASCII, so every index is a char boundary.
    // The longest `%f` of a double has about 320 characters; the bound keeps a hostile string
    // from costing a parse per byte of a long message.
    let end = s
        .bytes()
        .take(MAX_NUMBER_LEN)
        .position(|b| !(b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.')))
        .unwrap_or(s.len().min(MAX_NUMBER_LEN));
    (1..=end)
        .rev()
        .find_map(|n| s.get(..n).and_then(|p| p.parse().ok()))
        .unwrap_or_default()
}

/// The total length of a zlib-form regex at the start of `b`, if `b` starts with one:
/// `blob` ... NUL, `component=zlib:` NUL, `size=N:` NUL, then N bytes.
fn blob_len(b: &[u8]) -> Option<usize> {
    if !b.starts_with(b"blob") {
        return None;
    }
    let first = b.iter().position(|&c| c == 0)? + 1;
    let rest = b.get(first..)?;
    if !rest.starts_with(BLOB_COMPONENT) {
        return None;
    }
    let second = first + rest.iter().position(|&c| c == 0)? + 1;
    let rest = b.get(second..)?;
    let end = rest.iter().position(|&c| c == 0)?;
    let size = rest
        .get(..end)?
        .strip_prefix(b"size=")?
        .strip_suffix(b":")?;
    if size.is_empty() || !size.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n: usize = std::str::from_utf8(size).ok()?.parse().ok()?;
    (second + end + 1).checked_add(n)
}

impl Unpacker<'_> {
    /// A key: a non-NULL string of 1 to 511 bytes.
    pub fn get_key(&mut self) -> Result<Key, Error> {
        let s = self.get_string()?;
        Key::new(&s).map_err(|e| self.malformed(e))
    }

    /// A namespace string (NULL reads as the empty namespace).
    pub fn get_nspace(&mut self) -> Result<Nspace, Error> {
        let s = self.get_string()?;
        Nspace::new(&s).map_err(|e| self.malformed(e))
    }

    /// A `PROC`.
    pub fn get_proc(&mut self) -> Result<Proc, Error> {
        let nspace = self.get_nspace()?;
        let rank = Rank(self.get_u32()?);
        Ok(Proc { nspace, rank })
    }

    /// A `VALUE`: type tag and payload.
    pub fn get_value(&mut self) -> Result<Value, Error> {
        let ty = self.get_data_type()?;
        self.get_value_payload(ty)
    }

    /// An `INFO`.
    pub fn get_info(&mut self) -> Result<Info, Error> {
        let key = self.get_key()?;
        let flags = InfoFlags(self.get_u32()?);
        let value = self.get_value()?;
        Ok(Info { key, value, flags })
    }

    /// A `FLOAT` ([`Packer::put_float`]); NULL reads as 0.
    pub fn get_float(&mut self) -> Result<f32, Error> {
        Ok(self
            .get_opt_string()?
            .map(|s| parse_f(&s))
            .unwrap_or_default())
    }

    /// The payload of a value of type `ty`.
    ///
    /// A type number no OpenPMIx release defines (`COMMAND`, `VALUE` alone, numbers above
    /// the standard's) is [`Error::Unsupported`]: its length is unknown here, so the rest of
    /// the message cannot be read either.
    pub fn get_value_payload(&mut self, ty: DataType) -> Result<Value, Error> {
        self.nested(|u| u.payload(ty))
    }

    fn payload(&mut self, ty: DataType) -> Result<Value, Error> {
        self.check_known(ty)?;
        Ok(match ty {
            DataType::UNDEF => Value::Undef,
            DataType::BOOL => Value::Bool(self.get_bool()?),
            DataType::BYTE => Value::Byte(self.get_u8()?),
            DataType::STRING => self
                .get_opt_string()?
                .map_or(Value::NullString, Value::String),
            DataType::SIZE => Value::Size(self.get_size()?),
            DataType::PID => Value::Pid(self.get_pid()?),
            DataType::INT => Value::Int(self.get_int()?),
            DataType::INT8 => Value::Int8(self.get_u8()? as i8),
            DataType::INT16 => Value::Int16(self.get_i16()?),
            DataType::INT32 => Value::Int32(self.get_i32()?),
            DataType::INT64 => Value::Int64(self.get_i64()?),
            DataType::UINT => Value::Uint(self.get_uint()?),
            DataType::UINT8 => Value::Uint8(self.get_u8()?),
            DataType::UINT16 => Value::Uint16(self.get_u16()?),
            DataType::UINT32 => Value::Uint32(self.get_u32()?),
            DataType::UINT64 => Value::Uint64(self.get_u64()?),
            DataType::FLOAT => Value::Float(self.get_float()?),
            DataType::DOUBLE => Value::Double(
                self.get_opt_string()?
                    .map(|s| parse_f(&s))
                    .unwrap_or_default(),
            ),
            DataType::TIMEVAL => Value::Timeval(Timeval::unpack_item(self)?),
            DataType::TIME => Value::Time(self.get_u64()? as i64),
            DataType::STATUS => Value::Status(self.get_status()?),
            DataType::PROC_RANK => Value::Rank(Rank(self.get_u32()?)),
            DataType::PROC => Value::Proc(self.get_proc()?),
            DataType::PROC_NSPACE => Value::Nspace(self.get_nspace()?),
            DataType::BYTE_OBJECT => Value::ByteObject(self.get_bytes()?.to_vec()),
            DataType::COMPRESSED_STRING => Value::CompressedString(self.get_bytes()?.to_vec()),
            DataType::COMPRESSED_BYTE_OBJECT => Value::CompressedBytes(self.get_bytes()?.to_vec()),
            DataType::PERSIST => Value::Persistence(Persistence(self.get_u8()?)),
            DataType::SCOPE => Value::Scope(Scope(self.get_u8()?)),
            DataType::DATA_RANGE => Value::DataRange(DataRange(self.get_u8()?)),
            DataType::INFO_DIRECTIVES => Value::InfoDirectives(InfoFlags(self.get_u32()?)),
            DataType::DATA_TYPE => Value::DataType(self.get_data_type()?),
            DataType::PROC_STATE => Value::ProcState(ProcState(self.get_u8()?)),
            DataType::PROC_INFO => Value::ProcInfo(Box::new(self.get_proc_info()?)),
            DataType::DATA_ARRAY => Value::DataArray(Box::new(self.get_data_array()?)),
            DataType::INFO => Value::Info(Box::new(self.get_info()?)),
            DataType::ENVAR => Value::Envar(self.get_envar()?),
            DataType::REGEX => Value::Regex(self.get_regex()?),
            DataType::ALLOC_DIRECTIVE => Value::AllocDirective(AllocDirective(self.get_u8()?)),
            DataType::IOF_CHANNEL => Value::IofChannel(IofChannel(self.get_u16()?)),
            DataType::JOB_STATE => Value::JobState(JobState(self.get_u8()?)),
            DataType::LINK_STATE => Value::LinkState(LinkState(self.get_u8()?)),
            DataType::LOCTYPE => Value::Locality(Locality(self.get_u16()?)),
            DataType::REGATTR => Value::RegAttr(Box::new(self.get_regattr()?)),
            DataType::APP => Value::App(Box::new(App::unpack_item(self)?)),
            DataType::PDATA => Value::Pdata(Box::new(Published::unpack_item(self)?)),
            DataType::KVAL => Value::Kval(Box::new(Kval::unpack_item(self)?)),
            DataType::QUERY => Value::Query(Box::new(Query::unpack_item(self)?)),
            DataType::BUFFER => Value::Buffer(Box::new(pmix_types::Buffer {
                kind: self.get_u8()?,
                bytes: self.get_bytes()?.to_vec(),
            })),
            DataType::DATA_BUFFER => Value::DataBuffer(self.get_bytes()?.to_vec()),
            DataType::POINTER => {
                // The reference's placeholder byte: the address is not sent.
                self.get_u8()?;
                Value::Pointer(0)
            }
            DataType::COORD => Value::Coord(Box::new(Coord::unpack_item(self)?)),
            DataType::PROC_CPUSET => Value::Cpuset(Box::new(Cpuset::unpack_item(self)?)),
            DataType::GEOMETRY => Value::Geometry(Box::new(Geometry::unpack_item(self)?)),
            DataType::DEVICE_DIST => {
                Value::DeviceDist(Box::new(DeviceDistance::unpack_item(self)?))
            }
            DataType::ENDPOINT => Value::Endpoint(Box::new(Endpoint::unpack_item(self)?)),
            DataType::TOPO => Value::Topology(Box::new(Topology::unpack_item(self)?)),
            DataType::DEVTYPE => Value::DevType(DeviceType::unpack_item(self)?),
            DataType::PROC_STATS => Value::ProcStats(Box::new(ProcStats::unpack_item(self)?)),
            DataType::DISK_STATS => Value::DiskStats(Box::new(DiskStats::unpack_item(self)?)),
            DataType::NET_STATS => Value::NetStats(Box::new(NetStats::unpack_item(self)?)),
            DataType::NODE_STATS => Value::NodeStats(Box::new(NodeStats::unpack_item(self)?)),
            DataType::STOR_MEDIUM => Value::StorageMedium(self.get_u64()?),
            DataType::STOR_ACCESS => Value::StorageAccess(self.get_u64()?),
            DataType::STOR_PERSIST => Value::StoragePersistence(self.get_u64()?),
            DataType::STOR_ACCESS_TYPE => Value::StorageAccessType(self.get_u16()?),
            other => {
                return Err(Error::Unsupported(format!(
                    "a value of type {other:?} (at byte {})",
                    self.position()
                )));
            }
        })
    }

    /// Refuses a type the codec's reference module does not register (`v3` knows nothing
    /// above `ENVAR`), as the reference would.
    fn check_known(&self, ty: DataType) -> Result<(), Error> {
        if self.dialect().codec.knows(ty) {
            Ok(())
        } else {
            Err(Error::Unsupported(format!(
                "a {ty:?} value from a {} peer (at byte {})",
                self.dialect().codec.name(),
                self.position()
            )))
        }
    }

    /// A `REGATTR` ([`Packer::put_regattr`]). The reference refuses a missing key.
    pub fn get_regattr(&mut self) -> Result<RegAttr, Error> {
        let name = self.get_string()?;
        let at = self.position();
        let key = self
            .get_opt_string()?
            .ok_or_else(|| self.malformed(format!("a REGATTR without its key (at byte {at})")))?;
        // As libpmix reads it (see `Packer::put_regattr`).
        let ty = DataType(self.get_i16()? as u16);
        let at = self.position();
        let n = self.get_i32()?;
        let n = self.count(i64::from(n), at)?;
        let mut description = Vec::with_capacity(n);
        for _ in 0..n {
            description.push(self.get_string()?);
        }
        Ok(RegAttr {
            name,
            key,
            ty,
            description,
        })
    }

    /// A `PROC_INFO` (the exit code, not on the wire, reads as 0).
    pub fn get_proc_info(&mut self) -> Result<ProcInfo, Error> {
        Ok(ProcInfo {
            proc: self.get_proc()?,
            hostname: self.get_string()?,
            executable_name: self.get_string()?,
            pid: self.get_pid()?,
            exit_code: 0,
            state: ProcState(self.get_u8()?),
        })
    }

    /// A `DATA_ARRAY`. An array of type `UNDEF` reads as empty whatever its count says (its
    /// elements take no bytes, so the count is not kept).
    pub fn get_data_array(&mut self) -> Result<DataArray, Error> {
        self.nested(|u| {
            let ty = u.get_data_type()?;
            u.check_known(ty)?;
            let at = u.position();
            let n = u.get_size()?;
            if ty == DataType::UNDEF {
                return DataArray::new(ty, Vec::new()).map_err(|e| u.malformed(e));
            }
            let n = u.count(i64::try_from(n).unwrap_or(i64::MAX), at)?;
            let items = u.elements(ty, n)?;
            DataArray::new(ty, items).map_err(|e| u.malformed(e))
        })
    }

    /// One element of an array of `ty` ([`Packer::put_element`]).
    pub fn get_element(&mut self, ty: DataType) -> Result<Value, Error> {
        if ty == DataType::VALUE {
            self.get_value()
        } else {
            self.get_value_payload(ty)
        }
    }

    /// `n` elements of `ty` (`n` already checked against the remaining bytes); an element
    /// that takes no bytes is refused, so a count alone cannot drive the loop.
    fn elements(&mut self, ty: DataType, n: usize) -> Result<Vec<Value>, Error> {
        let mut items = Vec::with_capacity(n);
        for _ in 0..n {
            let before = self.position();
            items.push(self.get_element(ty)?);
            if self.position() == before {
                return Err(self.malformed(format!("empty {ty:?} element")));
            }
        }
        Ok(items)
    }

    /// A top-level pack of elements of type `ty` ([`Packer::pack_elements`]), of which at
    /// most `max` are read: the values, and how many the pack held (more than `max` leaves
    /// the rest unread, and the reader inside the pack, as libpmix's `PMIx_Data_unpack`
    /// does).
    pub fn unpack_elements(
        &mut self,
        ty: DataType,
        max: usize,
    ) -> Result<(Vec<Value>, usize), Error> {
        let n = self.unpack_header(ty)?;
        let values = self.elements(ty, n.min(max))?;
        Ok((values, n))
    }

    /// An `ENVAR`.
    pub fn get_envar(&mut self) -> Result<Envar, Error> {
        Ok(Envar {
            name: self.get_string()?,
            value: self.get_string()?,
            separator: self.get_u8()?,
        })
    }

    /// A `REGEX`, in any of the forms [`Packer::put_regex`] writes; the bytes of the map,
    /// without the NUL of the string forms.
    pub fn get_regex(&mut self) -> Result<Vec<u8>, Error> {
        let rest = self.rest();
        if rest.starts_with(b"pmix") || rest.starts_with(b"raw:") {
            let Some(end) = rest.iter().position(|&c| c == 0) else {
                return Err(Error::Truncated {
                    at: self.position(),
                });
            };
            let map = self.get_raw(end)?.to_vec();
            self.get_u8()?;
            return Ok(map);
        }
        if let Some(len) = blob_len(rest) {
            return Ok(self.get_raw(len)?.to_vec());
        }
        let n = self.unpack_header(DataType::STRING)?;
        if n != 1 {
            return Err(self.malformed(format!("a regex string pack of {n} items")));
        }
        Ok(self.get_cstr()?.unwrap_or_default().to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::openpmix::{Codec, Dialect};

    #[test]
    fn floats_print_like_c() {
        assert_eq!(format_f(3.5), "3.500000");
        assert_eq!(format_f(-0.0), "-0.000000");
        assert_eq!(format_f(1e-7), "0.000000");
        assert_eq!(format_f(f64::NAN), "nan");
        assert_eq!(format_f(f64::NEG_INFINITY), "-inf");
        assert_eq!(format_f(f64::from(0.1f32)), "0.100000");
        assert_eq!(format_f(1e20), "100000000000000000000.000000");
    }

    #[test]
    fn floats_parse_like_strtod() {
        assert_eq!(parse_f::<f64>("3.500000"), 3.5);
        assert_eq!(parse_f::<f64>("  -2.25xyz"), -2.25);
        assert_eq!(parse_f::<f64>("garbage"), 0.0);
        assert!(parse_f::<f64>("nan").is_nan());
        assert_eq!(parse_f::<f32>("inf"), f32::INFINITY);
        assert_eq!(parse_f::<f32>("0.100000"), 0.1f32);
    }

    #[test]
    fn zlib_regex_length() {
        let mut b = b"blob:\0component=zlib:\0size=3:\0abc".to_vec();
        assert_eq!(blob_len(&b), Some(b.len()));
        b.extend_from_slice(b"tail");
        assert_eq!(blob_len(&b), Some(b.len() - 4));
        assert_eq!(blob_len(b"blob:\0component=lz4:\0size=3:\0abc"), None);
        assert_eq!(blob_len(b"blob:\0component=zlib:\0size=x:\0abc"), None);
    }

    #[test]
    fn regex_forms_round_trip() {
        for d in [Dialect::V41, Dialect::new(Codec::V3, Default::default())] {
            for map in [
                b"pmix[node[2:1-4]]".to_vec(),
                b"raw:0,1;2,3".to_vec(),
                b"blob:\0component=zlib:\0size=2:\0\x00\xff".to_vec(),
                b"node1,node2".to_vec(),
            ] {
                let mut out = Vec::new();
                Packer::new(&mut out, d).put_regex(&map).unwrap();
                out.push(0x42);
                let mut u = Unpacker::new(&out, d);
                assert_eq!(u.get_regex().unwrap(), map);
                assert_eq!(u.rest(), [0x42]);
            }
        }
        let mut out = Vec::new();
        Packer::new(&mut out, Dialect::V41)
            .put_regex(b"raw:a,b")
            .unwrap();
        assert_eq!(out, b"raw:a,b\0");
    }
}
