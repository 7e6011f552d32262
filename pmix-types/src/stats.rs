//! Resource-usage samples a host reports (`PMIX_PROC_STATS`, `PMIX_DISK_STATS`,
//! `PMIX_NET_STATS`, `PMIX_NODE_STATS`), the answers of a monitoring query.

use serde::{Deserialize, Serialize};

use crate::{Proc, Timeval};

/// One sample of a process's usage (`pmix_proc_stats_t`). Memory sizes are in MBytes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProcStats {
    /// The node it runs on.
    pub node: Option<String>,
    /// The process.
    pub proc: Proc,
    /// Its pid.
    pub pid: u32,
    /// Its command.
    pub cmd: Option<String>,
    /// Its state letter, as `ps` shows it (`R`, `S`, ...).
    pub state: u8,
    /// CPU time used.
    pub time: Timeval,
    /// CPU use in percent (not carried on OpenPMIx's wire).
    pub percent_cpu: f32,
    /// Scheduling priority.
    pub priority: i32,
    /// Number of threads.
    pub num_threads: u16,
    /// Proportional set size.
    pub pss: f32,
    /// Virtual size.
    pub vsize: f32,
    /// Resident set size.
    pub rss: f32,
    /// Peak virtual size (not carried on OpenPMIx's wire).
    pub peak_vsize: f32,
    /// The CPU it last ran on.
    pub processor: u16,
    /// When the sample was taken.
    pub sample_time: Timeval,
}

/// One sample of a disk's counters (`pmix_disk_stats_t`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct DiskStats {
    /// The disk's name.
    pub disk: Option<String>,
    /// Reads completed.
    pub num_reads_completed: u64,
    /// Reads merged.
    pub num_reads_merged: u64,
    /// Sectors read.
    pub num_sectors_read: u64,
    /// Time spent reading.
    pub milliseconds_reading: u64,
    /// Writes completed.
    pub num_writes_completed: u64,
    /// Writes merged.
    pub num_writes_merged: u64,
    /// Sectors written.
    pub num_sectors_written: u64,
    /// Time spent writing.
    pub milliseconds_writing: u64,
    /// I/Os in progress.
    pub num_ios_in_progress: u64,
    /// Time spent doing I/O.
    pub milliseconds_io: u64,
    /// Weighted time spent doing I/O.
    pub weighted_milliseconds_io: u64,
}

/// One sample of a network interface's counters (`pmix_net_stats_t`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct NetStats {
    /// The interface's name.
    pub net_interface: Option<String>,
    /// Bytes received.
    pub num_bytes_recvd: u64,
    /// Packets received.
    pub num_packets_recvd: u64,
    /// Receive errors.
    pub num_recv_errs: u64,
    /// Bytes sent.
    pub num_bytes_sent: u64,
    /// Packets sent.
    pub num_packets_sent: u64,
    /// Send errors.
    pub num_send_errs: u64,
}

/// One sample of a node's load, memory, disks and interfaces (`pmix_node_stats_t`). Memory
/// sizes are in MBytes.
#[derive(Clone, Debug, PartialEq, Default, Serialize, Deserialize)]
pub struct NodeStats {
    /// The node's name.
    pub node: Option<String>,
    /// Load average over 1 minute.
    pub la: f32,
    /// Over 5 minutes.
    pub la5: f32,
    /// Over 15 minutes.
    pub la15: f32,
    /// Total memory.
    pub total_mem: f32,
    /// Free memory.
    pub free_mem: f32,
    /// Buffers.
    pub buffers: f32,
    /// Page cache.
    pub cached: f32,
    /// Swap cache.
    pub swap_cached: f32,
    /// Total swap.
    pub swap_total: f32,
    /// Free swap.
    pub swap_free: f32,
    /// Mapped memory.
    pub mapped: f32,
    /// When the sample was taken.
    pub sample_time: Timeval,
    /// One per disk.
    pub diskstats: Vec<DiskStats>,
    /// One per interface.
    pub netstats: Vec<NetStats>,
}

impl DiskStats {
    /// The eleven counters in the struct's (and the wire's) order.
    pub fn counters(&self) -> [u64; 11] {
        [
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
        ]
    }

    /// A sample of `disk` from its counters in [`DiskStats::counters`]' order.
    pub fn from_counters(disk: Option<String>, c: [u64; 11]) -> Self {
        let [
            num_reads_completed,
            num_reads_merged,
            num_sectors_read,
            milliseconds_reading,
            num_writes_completed,
            num_writes_merged,
            num_sectors_written,
            milliseconds_writing,
            num_ios_in_progress,
            milliseconds_io,
            weighted_milliseconds_io,
        ] = c;
        DiskStats {
            disk,
            num_reads_completed,
            num_reads_merged,
            num_sectors_read,
            milliseconds_reading,
            num_writes_completed,
            num_writes_merged,
            num_sectors_written,
            milliseconds_writing,
            num_ios_in_progress,
            milliseconds_io,
            weighted_milliseconds_io,
        }
    }
}

impl NetStats {
    /// The six counters in the struct's (and the wire's) order.
    pub fn counters(&self) -> [u64; 6] {
        [
            self.num_bytes_recvd,
            self.num_packets_recvd,
            self.num_recv_errs,
            self.num_bytes_sent,
            self.num_packets_sent,
            self.num_send_errs,
        ]
    }

    /// A sample of `net_interface` from its counters in [`NetStats::counters`]' order.
    pub fn from_counters(net_interface: Option<String>, c: [u64; 6]) -> Self {
        let [
            num_bytes_recvd,
            num_packets_recvd,
            num_recv_errs,
            num_bytes_sent,
            num_packets_sent,
            num_send_errs,
        ] = c;
        NetStats {
            net_interface,
            num_bytes_recvd,
            num_packets_recvd,
            num_recv_errs,
            num_bytes_sent,
            num_packets_sent,
            num_send_errs,
        }
    }
}

impl NodeStats {
    /// The eleven loads and memory sizes, `la` to `mapped`, in the struct's (and the wire's)
    /// order.
    pub fn loads(&self) -> [f32; 11] {
        [
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
        ]
    }

    /// Sets the loads and memory sizes from [`NodeStats::loads`]' order.
    pub fn set_loads(&mut self, l: [f32; 11]) {
        [
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
        ] = l;
    }
}
