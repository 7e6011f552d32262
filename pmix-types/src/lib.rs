//! The PMIx data model shared by every pmix-rs crate.
//!
//! This crate owns the vocabulary of the PMIx standard in Rust form: process identifiers
//! ([`Proc`], [`Rank`], [`Nspace`]), keys ([`Key`]), the tagged [`Value`] covering every data type
//! a client can put or get, [`Info`] with its directive flags, the open [`Status`] code newtype
//! (numbers exactly as in the standard's `pmix_common.h`), the small enums ([`Scope`],
//! [`DataRange`], [`Persistence`], [`ProcState`], ...), and the [attribute table](attr) (key
//! string, value type, information level).
//!
//! It does no I/O and knows no wire format: `pmix-wire` encodes these types, `pmix-server` and
//! `pmix-client` move them. An application author usually wants `pmix-client`; a host author
//! `pmix-server`. Both re-export this crate.

mod enums;
mod error;
mod hardware;
mod macros;
mod names;
mod stats;
mod status;
mod time;
mod value;

pub mod attr;
pub mod locality;

pub use enums::{
    AllocDirective, DataRange, DataType, IofChannel, JobState, LinkState, Locality, Persistence,
    ProcState, Scope,
};
pub use error::Error;
pub use hardware::{
    Coord, CoordView, Cpuset, DeviceDistance, DeviceType, Endpoint, Geometry, TOPOLOGY_SUPPORT_LEN,
    Topology,
};
pub use names::{Key, Nspace, Proc, Rank, is_reserved_key};
pub use stats::{DiskStats, NetStats, NodeStats, ProcStats};
pub use status::Status;
pub use time::Timeval;
pub use value::requests::{App, Buffer, Event, Kval, Published, Query};
pub use value::{DataArray, Envar, ProcInfo, RegAttr, Value};
pub use value::{Info, InfoFlags, checked_timeout_of, split_publish_info, timeout_of};

/// Longest namespace, in bytes, that the standard allows (`PMIX_MAX_NSLEN`).
pub const MAX_NSLEN: usize = 255;
/// Longest key, in bytes, that the standard allows (`PMIX_MAX_KEYLEN`).
pub const MAX_KEYLEN: usize = 511;
/// The application-number wildcard (`PMIX_APP_WILDCARD`).
pub const APP_WILDCARD: u32 = 0xFFFF_FFFF;
