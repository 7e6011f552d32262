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
        for v in [
            self.num_reads_completed,
            self.num_reads_merged,
            self.num_sectors_read,
            self.milliseconds_reading,
            self.num_writes_completed,
            self.num_writes_merged,
            self.num_sectors_written,
            self.milliseconds_writing,
            self.num_ios_in_progress,
            self.milliseconds_io,
            self.weighted_milliseconds_io,
        ] {
            p.put_u64(v);
        }
        Ok(())
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        Ok(DiskStats {
            disk: u.get_opt_string()?,
            num_reads_completed: u.get_u64()?,
            num_reads_merged: u.get_u64()?,
            num_sectors_read: u.get_u64()?,
            milliseconds_reading: u.get_u64()?,
            num_writes_completed: u.get_u64()?,
            num_writes_merged: u.get_u64()?,
            num_sectors_written: u.get_u64()?,
            milliseconds_writing: u.get_u64()?,
            num_ios_in_progress: u.get_u64()?,
            milliseconds_io: u.get_u64()?,
            weighted_milliseconds_io: u.get_u64()?,
        })
    }
}

/// `NET_STATS`: the interface's name, then six `UINT64` counters in the struct's order.
impl Item for NetStats {
    const TYPE: DataType = DataType::NET_STATS;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_opt_str(self.net_interface.as_deref())?;
        for v in [
            self.num_bytes_recvd,
            self.num_packets_recvd,
            self.num_recv_errs,
            self.num_bytes_sent,
            self.num_packets_sent,
            self.num_send_errs,
        ] {
            p.put_u64(v);
        }
        Ok(())
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        Ok(NetStats {
            net_interface: u.get_opt_string()?,
            num_bytes_recvd: u.get_u64()?,
            num_packets_recvd: u.get_u64()?,
            num_recv_errs: u.get_u64()?,
            num_bytes_sent: u.get_u64()?,
            num_packets_sent: u.get_u64()?,
            num_send_errs: u.get_u64()?,
        })
    }
}

/// `NODE_STATS`: the node's name, eleven `FLOAT`s (loads and memory), `TIMEVAL` sample time,
/// then `SIZE` and the disk samples, `SIZE` and the interface samples.
impl Item for NodeStats {
    const TYPE: DataType = DataType::NODE_STATS;
    fn pack_item(&self, p: &mut Packer<'_>) -> Result<(), Error> {
        p.put_opt_str(self.node.as_deref())?;
        for f in [
            self.la,
            self.la5,
            self.la15,
            self.total_mem,
            self.free_mem,
            self.buffers,
            self.cached,
            self.swap_cached,
            self.swap_total,
            self.swap_free,
            self.mapped,
        ] {
            p.put_float(f)?;
        }
        self.sample_time.pack_item(p)?;
        p.put_len(self.diskstats.len());
        self.diskstats.iter().try_for_each(|d| d.pack_item(p))?;
        p.put_len(self.netstats.len());
        self.netstats.iter().try_for_each(|n| n.pack_item(p))
    }
    fn unpack_item(u: &mut Unpacker<'_>) -> Result<Self, Error> {
        let node = u.get_opt_string()?;
        let mut f = [0f32; 11];
        for x in &mut f {
            *x = u.get_float()?;
        }
        let [
            la,
            la5,
            la15,
            total_mem,
            free_mem,
            buffers,
            cached,
            swap_cached,
            swap_total,
            swap_free,
            mapped,
        ] = f;
        let sample_time = Timeval::unpack_item(u)?;
        let n = u.get_len()?;
        let diskstats = u.items::<DiskStats>(n)?;
        let n = u.get_len()?;
        let netstats = u.items::<NetStats>(n)?;
        Ok(NodeStats {
            node,
            la,
            la5,
            la15,
            total_mem,
            free_mem,
            buffers,
            cached,
            swap_cached,
            swap_total,
            swap_free,
            mapped,
            sample_time,
            diskstats,
            netstats,
        })
    }
}
