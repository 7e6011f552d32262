//! Where a process runs and what it can reach, as PMIx describes it: a binding
//! ([`Cpuset`]), a node's topology ([`Topology`]), fabric coordinates ([`Coord`],
//! [`Geometry`]), fabric endpoints ([`Endpoint`]) and the distance to devices
//! ([`DeviceDistance`], [`DeviceType`]).
//!
//! pmix-rs does not link hwloc: a cpuset and a topology are kept as the text hwloc exchanges
//! them in (a cpu list such as `0-3,8`, a topology's XML), for whoever holds hwloc to parse.

use serde::{Deserialize, Serialize};

use crate::macros::open_enum;

open_enum! {
    /// How a coordinate is to be read (`pmix_coord_view_t`).
    pub struct CoordView(u8);
    /// Not said.
    UNDEF = 0,
    /// Logical coordinates.
    LOGICAL = 1,
    /// Physical coordinates.
    PHYSICAL = 2,
}

open_enum! {
    /// Kinds of device, a bit set (`pmix_device_type_t`).
    pub struct DeviceType(u64);
    /// Unknown.
    UNKNOWN = 0,
    /// A block device (disk).
    BLOCK = 0x01,
    /// A GPU.
    GPU = 0x02,
    /// A network interface.
    NETWORK = 0x04,
    /// An OpenFabrics device.
    OPENFABRICS = 0x08,
    /// A DMA engine.
    DMA = 0x10,
    /// A co-processor.
    COPROC = 0x20,
}

/// A point in a fabric's coordinate space (`pmix_coord_t`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Coord {
    /// Logical or physical.
    pub view: CoordView,
    /// One value per dimension.
    pub coord: Vec<u32>,
}

/// Where a device sits in a fabric (`pmix_geometry_t`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Geometry {
    /// The fabric's index.
    pub fabric: u64,
    /// The device's UUID, if given.
    pub uuid: Option<String>,
    /// The device's name in the operating system, if given.
    pub osname: Option<String>,
    /// Its coordinates, one per view.
    pub coordinates: Vec<Coord>,
}

/// How far a process is from a device (`pmix_device_distance_t`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct DeviceDistance {
    /// The device's UUID, if given.
    pub uuid: Option<String>,
    /// The device's name in the operating system, if given.
    pub osname: Option<String>,
    /// What kind of device.
    pub kind: DeviceType,
    /// Distance from the nearest CPU of the process's binding.
    pub mindist: u16,
    /// Distance from the farthest CPU of the process's binding.
    pub maxdist: u16,
}

/// A fabric endpoint of a process (`pmix_endpoint_t`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Endpoint {
    /// The device's UUID, if given.
    pub uuid: Option<String>,
    /// The device's name in the operating system, if given.
    pub osname: Option<String>,
    /// The fabric's address of the endpoint.
    #[serde(with = "serde_bytes")]
    pub address: Vec<u8>,
}

/// The CPUs a process is bound to (`pmix_cpuset_t`), as hwloc's cpu list text.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Cpuset {
    /// The cpu list (`0-3,8`); `None` for a process that is not bound.
    pub cpus: Option<String>,
}

/// How many bytes of hwloc's support flags follow a topology on OpenPMIx's wire: its
/// discovery, cpubind and membind support structures (6, 11 and 15 one-byte flags in hwloc
/// 2.4 and later).
pub const TOPOLOGY_SUPPORT_LEN: usize = 6 + 11 + 15;

/// A node's hardware topology (`pmix_topology_t`), kept as hwloc's XML export.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Topology {
    /// The XML; `None` for no topology.
    pub xml: Option<String>,
    /// hwloc's support flags (discovery, cpubind, membind: [`TOPOLOGY_SUPPORT_LEN`] bytes),
    /// which hwloc's XML leaves out; empty with no XML.
    #[serde(with = "serde_bytes")]
    pub support: Vec<u8>,
}
