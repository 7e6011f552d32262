//! OpenPMIx's encodings of the resource-usage samples of [`pmix_types`] (`PROC_STATS`,
//! `DISK_STATS`, `NET_STATS`, `NODE_STATS`).
//!
//! OpenPMIx's own packers disagree with its unpackers here (4.2 to 5.0): `PROC_STATS` is
//! packed without the `peak_vsize` its unpacker reads, and `NODE_STATS` packs the address of
//! its disk and interface arrays instead of their elements. pmix-rs writes and reads what
//! OpenPMIx's unpackers read, so what it sends a libpmix process arrives whole.

use pmix_types::{DataType, DiskStats, NetStats, NodeStats, ProcStats, Timeval};

use super::item::Item;
use super::pack::Packer;
use super::unpack::Unpacker;
use crate::Error;

/// `PROC_STATS`: node, proc, pid, cmd, `BYTE` state, `TIMEVAL` time, `INT32` priority,
/// `INT16` threads, `FLOAT` pss, vsize, rss, peak vsize, `INT16` processor, `TIMEVAL` sample
/// time. The CPU percentage has no place on the wire and reads as 0.
impl Item for ProcStats {
    const TYPE: DataType = DataType::PROC_STATS;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_opt_str(self.node.as_deref())?;
        p.put_proc(&self.proc)?;
        p.put_pid(self.pid);
        p.put_opt_str(self.cmd.as_deref())?;
        p.put_u8(self.state);
        self.time.pack_item(p)?;
        p.put_i32(self.priority);
        p.put_i16(self.num_threads as i16);
        for f in [self.pss, self.vsize, self.rss, self.peak_vsize] {
            p.put_float(f)?;
        }
        p.put_i16(self.processor as i16);
        self.sample_time.pack_item(p)
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        Ok(ProcStats {
            node: u.get_opt_string()?,
            proc: u.get_proc()?,
            pid: u.get_pid()?,
            cmd: u.get_opt_string()?,
            state: u.get_u8()?,
            time: Timeval::unpack_item(u)?,
            percent_cpu: 0.0,
            priority: u.get_i32()?,
            num_threads: u.get_i16()? as u16,
            pss: u.get_float()?,
            vsize: u.get_float()?,
            rss: u.get_float()?,
            peak_vsize: u.get_float()?,
            processor: u.get_i16()? as u16,
            sample_time: Timeval::unpack_item(u)?,
        })
    }
}

/// `DISK_STATS`: the disk's name, then eleven `UINT64` counters in the struct's order.
impl Item for DiskStats {
    const TYPE: DataType = DataType::DISK_STATS;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_opt_str(self.disk.as_deref())?;
        self.counters().into_iter().for_each(|v| p.put_u64(v));
        Ok(())
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        let disk = u.get_opt_string()?;
        let mut c = [0; 11];
        for v in &mut c {
            *v = u.get_u64()?;
        }
        Ok(DiskStats::from_counters(disk, c))
    }
}

/// `NET_STATS`: the interface's name, then six `UINT64` counters in the struct's order.
impl Item for NetStats {
    const TYPE: DataType = DataType::NET_STATS;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_opt_str(self.net_interface.as_deref())?;
        self.counters().into_iter().for_each(|v| p.put_u64(v));
        Ok(())
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        let net_interface = u.get_opt_string()?;
        let mut c = [0; 6];
        for v in &mut c {
            *v = u.get_u64()?;
        }
        Ok(NetStats::from_counters(net_interface, c))
    }
}

/// `NODE_STATS`: the node's name, eleven `FLOAT`s (loads and memory), `TIMEVAL` sample time,
/// then `SIZE` and the disk samples, `SIZE` and the interface samples.
impl Item for NodeStats {
    const TYPE: DataType = DataType::NODE_STATS;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_opt_str(self.node.as_deref())?;
        for f in self.loads() {
            p.put_float(f)?;
        }
        self.sample_time.pack_item(p)?;
        p.put_len(self.diskstats.len());
        self.diskstats.iter().try_for_each(|d| d.pack_item(p))?;
        p.put_len(self.netstats.len());
        self.netstats.iter().try_for_each(|n| n.pack_item(p))
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        let mut stats = NodeStats {
            node: u.get_opt_string()?,
            ..NodeStats::default()
        };
        let mut loads = [0f32; 11];
        for x in &mut loads {
            *x = u.get_float()?;
        }
        stats.set_loads(loads);
        stats.sample_time = Timeval::unpack_item(u)?;
        let n = u.get_len()?;
        stats.diskstats = u.items::<DiskStats>(n)?;
        let n = u.get_len()?;
        stats.netstats = u.items::<NetStats>(n)?;
        Ok(stats)
    }
}
