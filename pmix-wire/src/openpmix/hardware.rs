//! OpenPMIx's encodings of the hardware and fabric types of [`pmix_types`]: cpuset, topology,
//! coordinate, geometry, device distance, endpoint, device type (the `bfrops` base pack
//! functions of OpenPMIx 4.2 to 5.0, and its hwloc glue for cpusets and topologies).

use pmix_types::{
    Coord, CoordView, Cpuset, DataType, DeviceDistance, DeviceType, Endpoint, Geometry,
    TOPOLOGY_SUPPORT_LEN, Topology,
};

use super::item::Item;
use super::pack::Packer;
use super::unpack::Unpacker;
use crate::Error;

/// `COORD`: `UINT8` view, `SIZE` number of dimensions, that many `UINT32`s.
impl Item for Coord {
    const TYPE: DataType = DataType::COORD;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_u8(self.view.0);
        p.put_len(self.coord.len());
        self.coord.iter().for_each(|&c| p.put_u32(c));
        Ok(())
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        let view = CoordView(u.get_u8()?);
        let dims = u.get_len()?;
        let coord = u.items::<u32>(dims)?;
        Ok(Coord { view, coord })
    }
}

/// `GEOMETRY`: `SIZE` fabric, `STRING` uuid and osname, `SIZE` count, coordinates.
impl Item for Geometry {
    const TYPE: DataType = DataType::GEOMETRY;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_size(self.fabric);
        p.put_opt_str(self.uuid.as_deref())?;
        p.put_opt_str(self.osname.as_deref())?;
        p.put_len(self.coordinates.len());
        self.coordinates.iter().try_for_each(|c| c.pack_item(p))
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        let fabric = u.get_size()?;
        let uuid = u.get_opt_string()?;
        let osname = u.get_opt_string()?;
        let n = u.get_len()?;
        let coordinates = u.items::<Coord>(n)?;
        Ok(Geometry {
            fabric,
            uuid,
            osname,
            coordinates,
        })
    }
}

/// `DEVTYPE`: a `UINT64`.
impl Item for DeviceType {
    const TYPE: DataType = DataType::DEVTYPE;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_u64(self.0);
        Ok(())
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        u.get_u64().map(DeviceType)
    }
}

/// `DEVICE_DIST`: `STRING` uuid and osname, `DEVTYPE`, `UINT16` minimum and maximum distance.
impl Item for DeviceDistance {
    const TYPE: DataType = DataType::DEVICE_DIST;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_opt_str(self.uuid.as_deref())?;
        p.put_opt_str(self.osname.as_deref())?;
        self.kind.pack_item(p)?;
        p.put_u16(self.mindist);
        p.put_u16(self.maxdist);
        Ok(())
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        Ok(DeviceDistance {
            uuid: u.get_opt_string()?,
            osname: u.get_opt_string()?,
            kind: DeviceType::unpack_item(u)?,
            mindist: u.get_u16()?,
            maxdist: u.get_u16()?,
        })
    }
}

/// `ENDPOINT`: `STRING` uuid and osname, then the address as a byte object.
impl Item for Endpoint {
    const TYPE: DataType = DataType::ENDPOINT;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_opt_str(self.uuid.as_deref())?;
        p.put_opt_str(self.osname.as_deref())?;
        p.put_bytes(&self.address);
        Ok(())
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        Ok(Endpoint {
            uuid: u.get_opt_string()?,
            osname: u.get_opt_string()?,
            address: u.get_bytes()?.to_vec(),
        })
    }
}

/// `PROC_CPUSET`: hwloc's cpu list as a `STRING`, NULL for an unbound process.
impl Item for Cpuset {
    const TYPE: DataType = DataType::PROC_CPUSET;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_opt_str(self.cpus.as_deref())
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        Ok(Cpuset {
            cpus: u.get_opt_string()?,
        })
    }
}

/// `TOPO`: hwloc's XML as a `STRING`; unless it is NULL, hwloc's support flags follow as
/// [`TOPOLOGY_SUPPORT_LEN`] bare bytes (no count: the reader knows the sizes of hwloc's
/// support structures, which are those of hwloc 2.4 and later).
impl Item for Topology {
    const TYPE: DataType = DataType::TOPO;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        match &self.xml {
            None if self.support.is_empty() => p.put_opt_str(None),
            Some(xml) if self.support.len() == TOPOLOGY_SUPPORT_LEN => {
                p.put_str(xml)?;
                p.put_raw(&self.support);
                Ok(())
            }
            _ => Err(Error::Encode(format!(
                "a topology needs its XML and {TOPOLOGY_SUPPORT_LEN} bytes of support flags, \
                 or neither (here {} bytes)",
                self.support.len()
            ))),
        }
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        let Some(xml) = u.get_opt_string()? else {
            return Ok(Topology::default());
        };
        let support = u.get_raw(TOPOLOGY_SUPPORT_LEN)?.to_vec();
        Ok(Topology {
            xml: Some(xml),
            support,
        })
    }
}
