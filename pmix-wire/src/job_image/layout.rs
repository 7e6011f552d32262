//! The byte layout of a job image, version 1: a fixed header, a table of sections, the
//! sections. Every integer is a little-endian `u32`; nothing needs alignment, so an image can
//! be read in place from a mapping or from the middle of a frame.
//!
//! ```text
//! 0    magic "PMIXRSJI"
//! 8    version (1)
//! 12   flags (bit 0: derive reserved keys from the maps; bit 1: the job was spawned)
//! 16   total length of the image in bytes
//! 20   job size (ranks 0..size are the job's)
//! 24   NPROC_OFFSET (global rank of rank 0)
//! 28   number of nodes in the node map (0: no maps)
//! 32   SECTIONS × (offset, length), each within the image
//! ```
//!
//! The sections, by [`Section`]: see each variant.

use crate::Error;

/// The first eight bytes of every image.
pub(crate) const MAGIC: &[u8; 8] = b"PMIXRSJI";
/// The layout this crate writes and reads.
pub const IMAGE_VERSION: u32 = 1;
/// Derive the reserved keys of nodes and processes from the maps (a registration's image);
/// unset, the node and process levels are exactly what was given (another server's job data).
pub(crate) const FLAG_DERIVE: u32 = 1;
/// The job was spawned: every process's `SPAWNED` is true.
pub(crate) const FLAG_SPAWNED: u32 = 2;

pub(crate) const OFF_VERSION: usize = 8;
pub(crate) const OFF_FLAGS: usize = 12;
pub(crate) const OFF_TOTAL: usize = 16;
pub(crate) const OFF_SIZE: usize = 20;
pub(crate) const OFF_OFFSET: usize = 24;
pub(crate) const OFF_NNODES: usize = 28;
pub(crate) const OFF_SECTIONS: usize = 32;

/// The sections of an image, in table order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Section {
    /// The namespace's name, UTF-8.
    Nspace = 0,
    /// MessagePack of the session, job and app levels and the app of each rank:
    /// `(Vec<Info>, Vec<Info>, Vec<Realm>, Vec<(u32, u32)>)`.
    Levels,
    /// `nnodes + 1` offsets into [`Section::Names`]: node `i`'s map name is `[off[i], off[i+1])`.
    NameOffsets,
    /// Node names and hostnames, bytes.
    Names,
    /// `nnodes + 1` indices into [`Section::NodeRanges`]: node `i`'s ranges are
    /// `[idx[i], idx[i+1])`, in the order the process map lists its ranks.
    NodeRangeIndex,
    /// `(first rank, count)` pairs.
    NodeRanges,
    /// Where each placed rank runs: `(first rank, count, node id, local rank of the first)`,
    /// ascending by first rank and disjoint (a rank the map places twice counts on the first
    /// node, by id).
    RankIndex,
    /// `(hostname offset, hostname length, node id)`, the hostname in [`Section::Names`],
    /// ascending by hostname: the node of a `HOSTNAME` qualifier.
    HostIndex,
    /// `(node id, blob offset, blob length)`, ascending by id: the node values the host gave.
    GivenNodes,
    /// `(rank, blob offset, blob length)`, ascending by rank: the process values the host
    /// gave.
    GivenProcs,
    /// MessagePack `Vec<Info>` blobs of the given nodes and processes.
    Blobs,
}

/// How many sections the table has.
pub(crate) const SECTIONS: usize = 11;
/// Where the sections start: right after the table.
pub(crate) const HEADER_LEN: usize = OFF_SECTIONS + SECTIONS * 8;

/// Reads the `u32` at byte `at` of `b`, if it lies inside.
pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    let end = at.checked_add(4)?;
    let s = b.get(at..end)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// A section's bytes, read as a table of `N`-field records of `u32`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Table<'a, const N: usize> {
    bytes: &'a [u8],
}

impl<'a, const N: usize> Table<'a, N> {
    /// The records in `bytes`, which must hold whole records.
    pub(crate) fn new(bytes: &'a [u8]) -> Result<Self, Error> {
        if bytes.len() % (4 * N) != 0 {
            return Err(bad(format!(
                "a table of {N}-field records is {} bytes long",
                bytes.len()
            )));
        }
        Ok(Table { bytes })
    }

    pub(crate) fn len(&self) -> usize {
        self.bytes.len() / (4 * N)
    }

    /// Field `f` of record `i`.
    pub(crate) fn field(&self, i: usize, f: usize) -> Option<u32> {
        u32_at(self.bytes, i.checked_mul(4 * N)? + 4 * f)
    }

    /// Record `i`.
    pub(crate) fn record(&self, i: usize) -> Option<[u32; N]> {
        let mut out = [0; N];
        for (f, slot) in out.iter_mut().enumerate() {
            *slot = self.field(i, f)?;
        }
        Some(out)
    }

    /// The number of records whose field `f` satisfies `pred`, when the records are ordered
    /// so that those come first (a binary search; in a table that is not so ordered, some
    /// count, never a fault).
    pub(crate) fn partition_point(&self, f: usize, pred: impl Fn(u32) -> bool) -> usize {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.field(mid, f).is_some_and(&pred) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

pub(crate) fn bad(what: impl std::fmt::Display) -> Error {
    Error::Malformed(format!("job image: {what}"))
}
