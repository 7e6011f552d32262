//! [`Value`]: one tagged value of any PMIx data type a process can put, get or pass as a
//! directive, and [`Info`]: a key/value pair with directive flags (`pmix_info_t`). The two
//! nest in each other (a value may be an info, an info holds a value), so they share a file.

use serde::{Deserialize, Serialize};

pub(crate) mod requests;

use crate::macros::open_enum;
use crate::{
    AllocDirective, App, Buffer, Coord, Cpuset, DataRange, DataType, DeviceDistance, DeviceType,
    DiskStats, Endpoint, Error, Geometry, IofChannel, JobState, Key, Kval, LinkState, Locality,
    NetStats, NodeStats, Nspace, Persistence, Proc, ProcState, ProcStats, Published, Query, Rank,
    Scope, Status, Timeval, Topology,
};

/// An environment variable to set, with the separator used when it is a list
/// (`pmix_envar_t`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Envar {
    /// Variable name.
    pub name: String,
    /// Value.
    pub value: String,
    /// Separator for prepending/appending to a list value (e.g. `b':'`), or 0.
    pub separator: u8,
}

/// What is known about one process (`pmix_proc_info_t`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ProcInfo {
    /// The process.
    pub proc: Proc,
    /// Host it runs on.
    pub hostname: String,
    /// Executable name.
    pub executable_name: String,
    /// Its pid on that host.
    pub pid: u32,
    /// Exit code, when it has ended.
    pub exit_code: i32,
    /// State.
    pub state: ProcState,
}

/// An attribute as a PMIx library registers it for one of its functions (`pmix_regattr_t`):
/// the elements of a `QUERY_ATTRIBUTE_SUPPORT` answer.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct RegAttr {
    /// The attribute's name in the standard's C spelling (`PMIX_TIMEOUT`).
    pub name: String,
    /// Its key (`pmix.timeout`).
    pub key: String,
    /// The type of its value.
    pub ty: DataType,
    /// What it does, in lines of text (may be empty).
    pub description: Vec<String>,
}

/// An array of values that all have one declared type (`pmix_data_array_t`).
///
/// The element type is kept even when the array is empty. An array declared as
/// [`DataType::VALUE`] may hold values of mixed types.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RawDataArray")]
pub struct DataArray {
    ty: DataType,
    items: Vec<Value>,
}

#[derive(Deserialize)]
struct RawDataArray {
    ty: DataType,
    items: Vec<Value>,
}

impl TryFrom<RawDataArray> for DataArray {
    type Error = Error;
    fn try_from(raw: RawDataArray) -> Result<Self, Error> {
        DataArray::new(raw.ty, raw.items)
    }
}

impl DataArray {
    /// Builds an array, checking that every element has the declared type.
    pub fn new(ty: DataType, items: Vec<Value>) -> Result<Self, Error> {
        if ty != DataType::VALUE {
            if let Some(bad) = items.iter().find(|v| v.data_type() != ty) {
                return Err(Error::MixedDataArray {
                    declared: ty,
                    found: bad.data_type(),
                });
            }
        }
        Ok(DataArray { ty, items })
    }

    /// An array of info entries (the shape of the standard's `*_INFO_ARRAY` attributes).
    pub fn from_infos(infos: impl IntoIterator<Item = Info>) -> Self {
        DataArray {
            ty: DataType::INFO,
            items: infos
                .into_iter()
                .map(|i| Value::Info(Box::new(i)))
                .collect(),
        }
    }

    /// An array of processes (the shape of the standard's process lists: `PSET_MEMBERS`,
    /// `LOCAL_PROCS`, group memberships).
    pub fn from_procs(procs: impl IntoIterator<Item = crate::Proc>) -> Self {
        DataArray {
            ty: DataType::PROC,
            items: procs.into_iter().map(Value::Proc).collect(),
        }
    }

    /// The declared element type.
    pub fn elem_type(&self) -> DataType {
        self.ty
    }

    /// The elements.
    pub fn items(&self) -> &[Value] {
        &self.items
    }

    /// Takes the elements out.
    pub fn into_items(self) -> Vec<Value> {
        self.items
    }

    /// Iterates over the info entries of an info array (other elements are skipped).
    pub fn infos(&self) -> impl Iterator<Item = &Info> {
        self.items.iter().filter_map(|v| match v {
            Value::Info(i) => Some(&**i),
            _ => None,
        })
    }
}

/// One value of any PMIx data type.
///
/// Every variant maps to one [`DataType`] ([`Value::data_type`]). Floats are carried bit for
/// bit, and equality compares them by bits, so a value always equals its own round trip (NaN
/// included).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Value {
    /// No value (`PMIX_UNDEF`).
    Undef,
    /// `bool`.
    Bool(bool),
    /// One byte (`uint8_t` as `PMIX_BYTE`).
    Byte(u8),
    /// A string (`char*`).
    String(String),
    /// A NULL `char*` of type `PMIX_STRING`, which C tells apart from `""` (OpenPMIx sends it
    /// with length 0, `""` with length 1). [`Value::as_str`] reads it as `""`.
    NullString,
    /// `size_t`.
    Size(u64),
    /// `pid_t`.
    Pid(u32),
    /// `int`.
    Int(i32),
    /// `int8_t`.
    Int8(i8),
    /// `int16_t`.
    Int16(i16),
    /// `int32_t`.
    Int32(i32),
    /// `int64_t`.
    Int64(i64),
    /// `unsigned int`.
    Uint(u32),
    /// `uint8_t`.
    Uint8(u8),
    /// `uint16_t`.
    Uint16(u16),
    /// `uint32_t`.
    Uint32(u32),
    /// `uint64_t`.
    Uint64(u64),
    /// `float`, carried bit for bit.
    Float(f32),
    /// `double`, carried bit for bit.
    Double(f64),
    /// `struct timeval`.
    Timeval(Timeval),
    /// `time_t`.
    Time(i64),
    /// A status code.
    Status(Status),
    /// A rank (`PMIX_PROC_RANK`).
    Rank(Rank),
    /// A process (`PMIX_PROC`).
    Proc(Proc),
    /// A namespace alone (`PMIX_PROC_NSPACE`).
    Nspace(Nspace),
    /// Opaque bytes (`pmix_byte_object_t`).
    #[serde(with = "serde_bytes")]
    ByteObject(Vec<u8>),
    /// A persistence directive.
    Persistence(Persistence),
    /// A put scope.
    Scope(Scope),
    /// A data range.
    DataRange(DataRange),
    /// Info directive flags.
    InfoDirectives(InfoFlags),
    /// A data type tag.
    DataType(DataType),
    /// A process state.
    ProcState(ProcState),
    /// Information about one process.
    ProcInfo(Box<ProcInfo>),
    /// A typed array.
    DataArray(Box<DataArray>),
    /// One info entry (usually an element of an info array).
    Info(Box<Info>),
    /// An environment variable.
    Envar(Envar),
    /// A node or process map (`PMIX_REGEX`), as produced by `pmix-regex`: the bytes are opaque
    /// here because one of its forms is compressed.
    #[serde(with = "serde_bytes")]
    Regex(Vec<u8>),
    /// A zlib-compressed string (`PMIX_COMPRESSED_STRING`).
    #[serde(with = "serde_bytes")]
    CompressedString(Vec<u8>),
    /// zlib-compressed bytes (`PMIX_COMPRESSED_BYTE_OBJECT`).
    #[serde(with = "serde_bytes")]
    CompressedBytes(Vec<u8>),
    /// An allocation directive.
    AllocDirective(AllocDirective),
    /// IO-forwarding channels.
    IofChannel(IofChannel),
    /// A job state.
    JobState(JobState),
    /// A fabric link state.
    LinkState(LinkState),
    /// A locality bit set (`PMIX_LOCTYPE`).
    Locality(Locality),
    /// A registered attribute (`PMIX_REGATTR`).
    RegAttr(Box<RegAttr>),
    /// An application context (`PMIX_APP`).
    App(Box<App>),
    /// Published data as a lookup returns it (`PMIX_PDATA`).
    Pdata(Box<Published>),
    /// A key with a value (`PMIX_KVAL`).
    Kval(Box<Kval>),
    /// A query (`PMIX_QUERY`).
    Query(Box<Query>),
    /// A packed buffer of OpenPMIx's (`PMIX_BUFFER`).
    Buffer(Box<Buffer>),
    /// The bytes of a data buffer (`PMIX_DATA_BUFFER`, what `PMIx_Data_pack` fills).
    #[serde(with = "serde_bytes")]
    DataBuffer(Vec<u8>),
    /// An address in this process (`PMIX_POINTER`). It means nothing elsewhere: pmix-rs's
    /// wire refuses it, and OpenPMIx sends a placeholder that arrives as a NULL (0).
    #[serde(skip)]
    Pointer(usize),
    /// A fabric coordinate (`PMIX_COORD`).
    Coord(Box<Coord>),
    /// A binding (`PMIX_PROC_CPUSET`).
    Cpuset(Box<Cpuset>),
    /// A device's place in a fabric (`PMIX_GEOMETRY`).
    Geometry(Box<Geometry>),
    /// The distance to a device (`PMIX_DEVICE_DIST`).
    DeviceDist(Box<DeviceDistance>),
    /// A fabric endpoint (`PMIX_ENDPOINT`).
    Endpoint(Box<Endpoint>),
    /// A node's topology (`PMIX_TOPO`).
    Topology(Box<Topology>),
    /// Kinds of device (`PMIX_DEVTYPE`).
    DevType(DeviceType),
    /// A process's usage (`PMIX_PROC_STATS`).
    ProcStats(Box<ProcStats>),
    /// A disk's counters (`PMIX_DISK_STATS`).
    DiskStats(Box<DiskStats>),
    /// An interface's counters (`PMIX_NET_STATS`).
    NetStats(Box<NetStats>),
    /// A node's usage (`PMIX_NODE_STATS`).
    NodeStats(Box<NodeStats>),
    /// Kinds of storage medium, a bit set (`PMIX_STOR_MEDIUM`).
    StorageMedium(u64),
    /// Where storage is reachable from, a bit set (`PMIX_STOR_ACCESS`).
    StorageAccess(u64),
    /// How long storage keeps data, a bit set (`PMIX_STOR_PERSIST`).
    StoragePersistence(u64),
    /// Kinds of storage access, a bit set (`PMIX_STOR_ACCESS_TYPE`).
    StorageAccessType(u16),
}

impl Value {
    /// The standard's type tag of this value.
    pub fn data_type(&self) -> DataType {
        match self {
            Value::Undef => DataType::UNDEF,
            Value::Bool(_) => DataType::BOOL,
            Value::Byte(_) => DataType::BYTE,
            Value::String(_) | Value::NullString => DataType::STRING,
            Value::Size(_) => DataType::SIZE,
            Value::Pid(_) => DataType::PID,
            Value::Int(_) => DataType::INT,
            Value::Int8(_) => DataType::INT8,
            Value::Int16(_) => DataType::INT16,
            Value::Int32(_) => DataType::INT32,
            Value::Int64(_) => DataType::INT64,
            Value::Uint(_) => DataType::UINT,
            Value::Uint8(_) => DataType::UINT8,
            Value::Uint16(_) => DataType::UINT16,
            Value::Uint32(_) => DataType::UINT32,
            Value::Uint64(_) => DataType::UINT64,
            Value::Float(_) => DataType::FLOAT,
            Value::Double(_) => DataType::DOUBLE,
            Value::Timeval(_) => DataType::TIMEVAL,
            Value::Time(_) => DataType::TIME,
            Value::Status(_) => DataType::STATUS,
            Value::Rank(_) => DataType::PROC_RANK,
            Value::Proc(_) => DataType::PROC,
            Value::Nspace(_) => DataType::PROC_NSPACE,
            Value::ByteObject(_) => DataType::BYTE_OBJECT,
            Value::Persistence(_) => DataType::PERSIST,
            Value::Scope(_) => DataType::SCOPE,
            Value::DataRange(_) => DataType::DATA_RANGE,
            Value::InfoDirectives(_) => DataType::INFO_DIRECTIVES,
            Value::DataType(_) => DataType::DATA_TYPE,
            Value::ProcState(_) => DataType::PROC_STATE,
            Value::ProcInfo(_) => DataType::PROC_INFO,
            Value::DataArray(_) => DataType::DATA_ARRAY,
            Value::Info(_) => DataType::INFO,
            Value::Envar(_) => DataType::ENVAR,
            Value::Regex(_) => DataType::REGEX,
            Value::CompressedString(_) => DataType::COMPRESSED_STRING,
            Value::CompressedBytes(_) => DataType::COMPRESSED_BYTE_OBJECT,
            Value::AllocDirective(_) => DataType::ALLOC_DIRECTIVE,
            Value::IofChannel(_) => DataType::IOF_CHANNEL,
            Value::JobState(_) => DataType::JOB_STATE,
            Value::LinkState(_) => DataType::LINK_STATE,
            Value::Locality(_) => DataType::LOCTYPE,
            Value::RegAttr(_) => DataType::REGATTR,
            Value::App(_) => DataType::APP,
            Value::Pdata(_) => DataType::PDATA,
            Value::Kval(_) => DataType::KVAL,
            Value::Query(_) => DataType::QUERY,
            Value::Buffer(_) => DataType::BUFFER,
            Value::DataBuffer(_) => DataType::DATA_BUFFER,
            Value::Pointer(_) => DataType::POINTER,
            Value::Coord(_) => DataType::COORD,
            Value::Cpuset(_) => DataType::PROC_CPUSET,
            Value::Geometry(_) => DataType::GEOMETRY,
            Value::DeviceDist(_) => DataType::DEVICE_DIST,
            Value::Endpoint(_) => DataType::ENDPOINT,
            Value::Topology(_) => DataType::TOPO,
            Value::DevType(_) => DataType::DEVTYPE,
            Value::ProcStats(_) => DataType::PROC_STATS,
            Value::DiskStats(_) => DataType::DISK_STATS,
            Value::NetStats(_) => DataType::NET_STATS,
            Value::NodeStats(_) => DataType::NODE_STATS,
            Value::StorageMedium(_) => DataType::STOR_MEDIUM,
            Value::StorageAccess(_) => DataType::STOR_ACCESS,
            Value::StoragePersistence(_) => DataType::STOR_PERSIST,
            Value::StorageAccessType(_) => DataType::STOR_ACCESS_TYPE,
        }
    }

    /// The string, if this is a string value (a NULL string reads as `""`).
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            Value::NullString => Some(""),
            _ => None,
        }
    }

    /// The boolean, if this is a bool value. Following the standard, an info entry given with
    /// no value ([`Value::Undef`]) means `true` for boolean directives; that reading is the
    /// caller's to apply.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// The value as an unsigned 64-bit integer, for any integer type whose value fits.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::Byte(v) | Value::Uint8(v) => Some(v.into()),
            Value::Uint16(v) => Some(v.into()),
            Value::Uint(v) | Value::Uint32(v) | Value::Pid(v) => Some(v.into()),
            Value::Uint64(v) | Value::Size(v) => Some(v),
            Value::Rank(r) => Some(r.0.into()),
            Value::Int8(v) => u64::try_from(v).ok(),
            Value::Int16(v) => u64::try_from(v).ok(),
            Value::Int(v) | Value::Int32(v) => u64::try_from(v).ok(),
            Value::Int64(v) | Value::Time(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a signed 64-bit integer, for any integer type whose value fits.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::Int8(v) => Some(v.into()),
            Value::Int16(v) => Some(v.into()),
            Value::Int(v) | Value::Int32(v) => Some(v.into()),
            Value::Int64(v) | Value::Time(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }

    /// The value as a `u32`, for any integer type whose value fits.
    pub fn as_u32(&self) -> Option<u32> {
        self.as_u64().and_then(|v| u32::try_from(v).ok())
    }

    /// The rank, for a rank value or any integer that fits in 32 bits.
    pub fn as_rank(&self) -> Option<Rank> {
        self.as_u32().map(Rank)
    }

    /// The process, if this is a proc value.
    pub fn as_proc(&self) -> Option<&Proc> {
        match self {
            Value::Proc(p) => Some(p),
            _ => None,
        }
    }

    /// The bytes of a byte object.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::ByteObject(b) => Some(b),
            _ => None,
        }
    }

    /// The array, if this is a data array.
    pub fn as_array(&self) -> Option<&DataArray> {
        match self {
            Value::DataArray(a) => Some(a),
            _ => None,
        }
    }

    /// A type-mismatch error for asking this value for `expected`.
    pub fn mismatch(&self, expected: DataType) -> Error {
        Error::TypeMismatch {
            expected,
            found: self.data_type(),
        }
    }
}

impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        use Value as V;
        match (self, other) {
            (V::Float(a), V::Float(b)) => a.to_bits() == b.to_bits(),
            (V::Double(a), V::Double(b)) => a.to_bits() == b.to_bits(),
            (V::Undef, V::Undef) | (V::NullString, V::NullString) => true,
            (V::Bool(a), V::Bool(b)) => a == b,
            (V::Byte(a), V::Byte(b)) | (V::Uint8(a), V::Uint8(b)) => a == b,
            (V::String(a), V::String(b)) => a == b,
            (V::Size(a), V::Size(b)) | (V::Uint64(a), V::Uint64(b)) => a == b,
            (V::Pid(a), V::Pid(b)) | (V::Uint(a), V::Uint(b)) | (V::Uint32(a), V::Uint32(b)) => {
                a == b
            }
            (V::Int(a), V::Int(b)) | (V::Int32(a), V::Int32(b)) => a == b,
            (V::Int8(a), V::Int8(b)) => a == b,
            (V::Int16(a), V::Int16(b)) => a == b,
            (V::Int64(a), V::Int64(b)) | (V::Time(a), V::Time(b)) => a == b,
            (V::Uint16(a), V::Uint16(b)) => a == b,
            (V::Timeval(a), V::Timeval(b)) => a == b,
            (V::Status(a), V::Status(b)) => a == b,
            (V::Rank(a), V::Rank(b)) => a == b,
            (V::Proc(a), V::Proc(b)) => a == b,
            (V::Nspace(a), V::Nspace(b)) => a == b,
            (V::ByteObject(a), V::ByteObject(b))
            | (V::Regex(a), V::Regex(b))
            | (V::CompressedString(a), V::CompressedString(b))
            | (V::CompressedBytes(a), V::CompressedBytes(b)) => a == b,
            (V::Persistence(a), V::Persistence(b)) => a == b,
            (V::Scope(a), V::Scope(b)) => a == b,
            (V::DataRange(a), V::DataRange(b)) => a == b,
            (V::InfoDirectives(a), V::InfoDirectives(b)) => a == b,
            (V::DataType(a), V::DataType(b)) => a == b,
            (V::ProcState(a), V::ProcState(b)) => a == b,
            (V::ProcInfo(a), V::ProcInfo(b)) => a == b,
            (V::DataArray(a), V::DataArray(b)) => a == b,
            (V::Info(a), V::Info(b)) => a == b,
            (V::Envar(a), V::Envar(b)) => a == b,
            (V::AllocDirective(a), V::AllocDirective(b)) => a == b,
            (V::IofChannel(a), V::IofChannel(b)) => a == b,
            (V::JobState(a), V::JobState(b)) => a == b,
            (V::LinkState(a), V::LinkState(b)) => a == b,
            (V::Locality(a), V::Locality(b)) => a == b,
            (V::RegAttr(a), V::RegAttr(b)) => a == b,
            (V::App(a), V::App(b)) => a == b,
            (V::Pdata(a), V::Pdata(b)) => a == b,
            (V::Kval(a), V::Kval(b)) => a == b,
            (V::Query(a), V::Query(b)) => a == b,
            (V::Buffer(a), V::Buffer(b)) => a == b,
            (V::DataBuffer(a), V::DataBuffer(b)) => a == b,
            (V::Pointer(a), V::Pointer(b)) => a == b,
            (V::Coord(a), V::Coord(b)) => a == b,
            (V::Cpuset(a), V::Cpuset(b)) => a == b,
            (V::Geometry(a), V::Geometry(b)) => a == b,
            (V::DeviceDist(a), V::DeviceDist(b)) => a == b,
            (V::Endpoint(a), V::Endpoint(b)) => a == b,
            (V::Topology(a), V::Topology(b)) => a == b,
            (V::DevType(a), V::DevType(b)) => a == b,
            (V::ProcStats(a), V::ProcStats(b)) => a == b,
            (V::DiskStats(a), V::DiskStats(b)) => a == b,
            (V::NetStats(a), V::NetStats(b)) => a == b,
            (V::NodeStats(a), V::NodeStats(b)) => a == b,
            (V::StorageMedium(a), V::StorageMedium(b))
            | (V::StorageAccess(a), V::StorageAccess(b))
            | (V::StoragePersistence(a), V::StoragePersistence(b)) => a == b,
            (V::StorageAccessType(a), V::StorageAccessType(b)) => a == b,
            _ => false,
        }
    }
}

macro_rules! value_from {
    ($($t:ty => $v:ident),* $(,)?) => {
        $(impl From<$t> for Value {
            fn from(x: $t) -> Value {
                Value::$v(x)
            }
        })*
    };
}

value_from! {
    bool => Bool,
    String => String,
    i8 => Int8,
    i16 => Int16,
    i32 => Int32,
    i64 => Int64,
    u8 => Uint8,
    u16 => Uint16,
    u32 => Uint32,
    u64 => Uint64,
    f32 => Float,
    f64 => Double,
    Timeval => Timeval,
    Status => Status,
    Rank => Rank,
    Proc => Proc,
    Nspace => Nspace,
    Scope => Scope,
    DataRange => DataRange,
    Persistence => Persistence,
    ProcState => ProcState,
    Envar => Envar,
    JobState => JobState,
}

impl From<&str> for Value {
    fn from(s: &str) -> Value {
        Value::String(s.to_owned())
    }
}

impl From<DataArray> for Value {
    fn from(a: DataArray) -> Value {
        Value::DataArray(Box::new(a))
    }
}

impl From<Info> for Value {
    fn from(i: Info) -> Value {
        Value::Info(Box::new(i))
    }
}

impl From<Vec<u8>> for Value {
    fn from(b: Vec<u8>) -> Value {
        Value::ByteObject(b)
    }
}

open_enum! {
    /// Directive flags of an info entry (`pmix_info_directives_t`), a bit set.
    pub struct InfoFlags(u32);
    /// No flags.
    NONE = 0,
    /// The receiver must honour this directive or fail the call.
    REQD = 0x1,
    /// Marks the end of an info array (a C-ABI artefact; carried for fidelity).
    ARRAY_END = 0x2,
    /// A required directive has been processed.
    REQD_PROCESSED = 0x4,
    /// This entry qualifies another one (e.g. which namespace a key refers to).
    QUALIFIER = 0x8,
    /// The entry is to be kept across operations.
    PERSISTENT = 0x10,
}

impl InfoFlags {
    /// True if every bit of `other` is set here.
    pub fn contains(self, other: InfoFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for InfoFlags {
    type Output = InfoFlags;
    fn bitor(self, rhs: InfoFlags) -> InfoFlags {
        InfoFlags(self.0 | rhs.0)
    }
}

/// A key, a value and directive flags: the unit of every directive list and of job data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Info {
    /// The key (an attribute name or a user key).
    pub key: Key,
    /// The value.
    pub value: Value,
    /// Directive flags.
    pub flags: InfoFlags,
}

impl Info {
    /// An info entry without flags.
    pub fn new(key: Key, value: impl Into<Value>) -> Self {
        Info {
            key,
            value: value.into(),
            flags: InfoFlags::NONE,
        }
    }

    /// An info entry for a key known to be valid, such as an attribute constant.
    ///
    /// # Panics
    /// If `key` is not a valid key; use [`Key::new`] for keys that come from input.
    #[allow(clippy::expect_used)]
    pub fn attr(key: &'static str, value: impl Into<Value>) -> Self {
        Info::new(
            Key::from_static(key).expect("attribute keys are valid"),
            value,
        )
    }

    /// Marks the entry as required.
    pub fn required(mut self) -> Self {
        self.flags = self.flags | InfoFlags::REQD;
        self
    }

    /// Marks the entry as a qualifier.
    pub fn qualifier(mut self) -> Self {
        self.flags = self.flags | InfoFlags::QUALIFIER;
        self
    }

    /// True when the entry is required.
    pub fn is_required(&self) -> bool {
        self.flags.contains(InfoFlags::REQD)
    }

    /// Reads a boolean directive the standard's way: a bool value, or no value at all
    /// ([`Value::Undef`]), which means `true`.
    pub fn flag(&self) -> Option<bool> {
        match self.value {
            Value::Undef => Some(true),
            ref v => v.as_bool(),
        }
    }
}

/// The `PMIX_TIMEOUT` directive among `info`, in seconds: `None` when it is absent, not an
/// integer, or 0 or less (no limit). Of several, the last one given counts, as everywhere a
/// directive is repeated ([`checked_timeout_of`] says which rule and tells a non-integer).
pub fn timeout_of(info: &[Info]) -> Option<core::time::Duration> {
    checked_timeout_of(info).ok().flatten()
}

/// [`timeout_of`], refusing a `PMIX_TIMEOUT` that is not an integer with `ERR_BAD_PARAM`
/// instead of reading it as no limit. The one rule for the whole house: the last
/// `PMIX_TIMEOUT` among `info` counts; 0 or less means no limit.
pub fn checked_timeout_of(info: &[Info]) -> Result<Option<core::time::Duration>, Status> {
    let Some(given) = info
        .iter()
        .rev()
        .find(|i| i.key.as_str() == crate::attr::TIMEOUT)
    else {
        return Ok(None);
    };
    let secs = given.value.as_i64().ok_or(Status::ERR_BAD_PARAM)?;
    Ok((secs > 0).then(|| core::time::Duration::from_secs(secs.unsigned_abs())))
}

/// Splits the one list of a publish (`PMIx_Publish`, OpenPMIx's `PUBLISHNB`) into its
/// directives and its data: the directives are the keys that are attributes of the standard
/// ([`crate::attr::lookup`]), any other key is data, even one that starts with `pmix`
/// (RFC0009 reserves the prefix, but libpmix and PRRTE publish such names, and Open MPI
/// passes a service name through unchanged). Returns `(directives, data)`.
pub fn split_publish_info(info: Vec<Info>) -> (Vec<Info>, Vec<Info>) {
    info.into_iter()
        .partition(|i| crate::attr::lookup(i.key.as_str()).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_publish_splits_attributes_from_data_even_data_named_pmix() {
        let info = |k: &str| Info::new(Key::new(k).unwrap(), Value::from("v"));
        let (directives, data) = split_publish_info(vec![
            info("pmixrs.svc"),
            Info::attr(crate::attr::RANGE, Value::Uint32(1)),
            info("svc"),
            Info::attr(crate::attr::TIMEOUT, Value::Int32(3)),
        ]);
        let keys = |l: &[Info]| {
            l.iter()
                .map(|i| i.key.as_str().to_owned())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            keys(&directives),
            [crate::attr::RANGE, crate::attr::TIMEOUT]
        );
        assert_eq!(keys(&data), ["pmixrs.svc", "svc"]);
    }

    #[test]
    fn nan_equals_itself_by_bits() {
        assert_eq!(Value::Double(f64::NAN), Value::Double(f64::NAN));
        assert_ne!(Value::Double(0.0), Value::Double(-0.0));
        assert_ne!(Value::Uint32(1), Value::Uint64(1));
    }

    #[test]
    fn data_array_checks_its_elements() {
        assert!(DataArray::new(DataType::UINT32, vec![Value::Uint32(1)]).is_ok());
        let e = DataArray::new(DataType::UINT32, vec![Value::Uint32(1), Value::Bool(true)]);
        assert_eq!(
            e.unwrap_err(),
            Error::MixedDataArray {
                declared: DataType::UINT32,
                found: DataType::BOOL
            }
        );
        assert!(DataArray::new(DataType::VALUE, vec![Value::Uint32(1), Value::Bool(true)]).is_ok());
    }

    #[test]
    fn integer_accessors_check_range() {
        assert_eq!(Value::Int32(-1).as_u64(), None);
        assert_eq!(Value::Uint64(u64::MAX).as_u32(), None);
        assert_eq!(Value::Uint16(7).as_u32(), Some(7));
        assert_eq!(Value::Size(5).as_i64(), Some(5));
    }

    #[test]
    fn the_last_timeout_counts() {
        use core::time::Duration;
        let t = |v: Value| Info::new(Key::new(crate::attr::TIMEOUT).unwrap(), v);
        let other = Info::new(Key::new("x").unwrap(), Value::Int32(7));
        assert_eq!(timeout_of(&[]), None);
        assert_eq!(timeout_of(std::slice::from_ref(&other)), None);
        assert_eq!(
            timeout_of(&[t(Value::Int32(5)), other.clone(), t(Value::Int32(9))]),
            Some(Duration::from_secs(9))
        );
        // The last one says "no limit", whatever came before.
        assert_eq!(timeout_of(&[t(Value::Int32(5)), t(Value::Int32(0))]), None);
        assert_eq!(timeout_of(&[t(Value::Int32(5)), t(Value::Int32(-1))]), None);
        // A non-integer last one: no limit for timeout_of, refused by checked_timeout_of.
        let bad = [t(Value::Int32(5)), t(Value::String("soon".into()))];
        assert_eq!(timeout_of(&bad), None);
        assert_eq!(checked_timeout_of(&bad), Err(Status::ERR_BAD_PARAM));
        assert_eq!(
            checked_timeout_of(&[t(Value::String("soon".into())), t(Value::Uint64(3))]),
            Ok(Some(Duration::from_secs(3)))
        );
    }
}
