//! Job images: a namespace's job data in a compact, read-in-place form.
//!
//! A registration describes a job by its levels (session, job, apps: a handful of values), its
//! node and process maps, and whatever node and process values the host gave explicitly. The
//! node and process levels the standard defines — a rank's node, hostname, local and node
//! rank, app, global rank; a node's size, peers and leader — follow from those, so an image
//! stores only the description and derives each value when it is asked for ([`JobImage::proc_value`],
//! [`JobImage::node_value`]). A job of a million ranks on ten thousand nodes is a few hundred
//! kilobytes, and reading one value touches a few cache lines of it.
//!
//! The same bytes serve every reader: the server keeps one per namespace, writes it once into
//! a sealed memory file that every local client of the job maps, or sends it inline in the
//! welcome where that cannot be done; the client answers gets from it in place. The layout
//! (`layout.rs`, `docs/PROTOCOL.md`) is versioned and every read is bounds-checked: a hostile
//! image yields errors or missing values, never a fault, a panic or an unbounded loop.
//!
//! [`JobImage::expand`] gives the whole [`JobData`] (every node and rank realm), for what needs
//! it all: the OpenPMIx front-end's job info, a connect's job data for another run.

mod build;
mod derive;
pub(crate) mod layout;

use std::fmt;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use pmix_types::{Info, Nspace, Rank, Value};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

pub use build::{JobSpec, NodeMap, job_data_image};
pub use derive::{NODE_KEYS, PROC_KEYS, join_ranks};
pub use layout::IMAGE_VERSION;
use layout::{
    FLAG_DERIVE, FLAG_SPAWNED, HEADER_LEN, MAGIC, OFF_FLAGS, OFF_NNODES, OFF_OFFSET, OFF_SECTIONS,
    OFF_SIZE, OFF_TOTAL, OFF_VERSION, SECTIONS, Section, Table, bad, u32_at,
};

use crate::decode::decode_with_depth;
use crate::{Error, JobData, MAX_DEPTH, Realm};

/// How deep the MessagePack inside an image may nest: as deep as job data in a welcome.
const BLOB_DEPTH: usize = MAX_DEPTH - 8;

/// A validated job image; cheap to clone (the bytes and the decoded levels are shared).
#[derive(Clone)]
pub struct JobImage(Arc<Inner>);

struct Inner {
    bytes: Bytes,
    nspace: Nspace,
    flags: u32,
    size: u32,
    offset: u32,
    nnodes: u32,
    sections: [(usize, usize); SECTIONS],
    session: Vec<Info>,
    job: Vec<Info>,
    apps: Vec<Realm>,
    app_of_rank: Vec<(u32, Rank)>,
    /// The given node and process values, by the index of their first record, decoded on
    /// first use.
    given_nodes: Box<[OnceLock<Vec<Info>>]>,
    given_procs: Box<[OnceLock<Vec<Info>>]>,
}

type Levels = (Vec<Info>, Vec<Info>, Vec<Realm>, Vec<(u32, u32)>);

impl JobImage {
    /// Reads an image, checking its header, that every section lies inside it and that its
    /// tables hold whole records. The small levels are decoded now; node and process values
    /// only when asked for.
    pub fn parse(bytes: Bytes) -> Result<JobImage, Error> {
        let b = &bytes[..];
        if b.len() < HEADER_LEN || &b[..MAGIC.len()] != MAGIC {
            return Err(Error::Malformed("not a job image".into()));
        }
        let word = |at| u32_at(b, at).ok_or_else(|| bad("header cut short"));
        let version = word(OFF_VERSION)?;
        if version != layout::IMAGE_VERSION {
            return Err(bad(format!(
                "layout version {version}, this side reads {}",
                layout::IMAGE_VERSION
            )));
        }
        if word(OFF_TOTAL)? as usize != b.len() {
            return Err(bad(format!(
                "header says {} bytes, the image has {}",
                word(OFF_TOTAL)?,
                b.len()
            )));
        }
        let mut sections = [(0usize, 0usize); SECTIONS];
        for (i, s) in sections.iter_mut().enumerate() {
            let off = word(OFF_SECTIONS + 8 * i)? as usize;
            let len = word(OFF_SECTIONS + 8 * i + 4)? as usize;
            if off < HEADER_LEN || off.checked_add(len).is_none_or(|end| end > b.len()) {
                return Err(bad(format!("section {i} lies outside the image")));
            }
            *s = (off, len);
        }
        let sec = |s: Section| {
            let (off, len) = sections[s as usize];
            &b[off..off + len]
        };
        let nspace = std::str::from_utf8(sec(Section::Nspace))
            .map_err(|_| bad("the namespace is not UTF-8"))
            .and_then(|s| Nspace::new(s).map_err(bad))?;
        let (session, job, apps, app_of_rank): Levels =
            decode_with_depth(sec(Section::Levels), BLOB_DEPTH)?;
        let nnodes = word(OFF_NNODES)?;
        // The per-node tables have one entry per node and one more.
        let entries = |s: Section| sec(s).len() / 4;
        if nnodes > 0
            && (entries(Section::NameOffsets) != nnodes as usize + 1
                || entries(Section::NodeRangeIndex) != nnodes as usize + 1)
        {
            return Err(bad("node tables do not match the node count"));
        }
        Table::<2>::new(sec(Section::NodeRanges))?;
        Table::<4>::new(sec(Section::RankIndex))?;
        Table::<3>::new(sec(Section::HostIndex))?;
        let slots = |s: Section| -> Result<Box<[OnceLock<Vec<Info>>]>, Error> {
            let n = Table::<3>::new(sec(s))?.len();
            Ok((0..n).map(|_| OnceLock::new()).collect())
        };
        let given_nodes = slots(Section::GivenNodes)?;
        let given_procs = slots(Section::GivenProcs)?;
        let image = Inner {
            nspace,
            flags: word(OFF_FLAGS)?,
            size: word(OFF_SIZE)?,
            offset: word(OFF_OFFSET)?,
            nnodes,
            sections,
            session,
            job,
            apps,
            app_of_rank: app_of_rank.into_iter().map(|(a, r)| (a, Rank(r))).collect(),
            given_nodes,
            given_procs,
            bytes,
        };
        Ok(JobImage(Arc::new(image)))
    }

    /// The image of `spec` (a registration's).
    pub fn build(spec: &JobSpec) -> Result<JobImage, Error> {
        Self::parse(Bytes::from(spec.image_bytes()?))
    }

    /// The image of job data another server expanded: nothing is derived.
    pub fn from_job_data(job: &JobData) -> Result<JobImage, Error> {
        Self::parse(Bytes::from(job_data_image(job)?))
    }

    /// The image's bytes, as written.
    pub fn bytes(&self) -> &Bytes {
        &self.0.bytes
    }

    /// The namespace.
    pub fn nspace(&self) -> &Nspace {
        &self.0.nspace
    }

    /// The job's size: ranks `0..size` are its processes.
    pub fn size(&self) -> u32 {
        self.0.size
    }

    /// Session-level values.
    pub fn session(&self) -> &[Info] {
        &self.0.session
    }

    /// Job-level values.
    pub fn job(&self) -> &[Info] {
        &self.0.job
    }

    /// App-level values of every app.
    pub fn apps(&self) -> &[Realm] {
        &self.0.apps
    }

    /// A job-level value.
    pub fn job_value(&self, key: &str) -> Option<&Value> {
        find(&self.0.job, key)
    }

    /// The number of nodes in the node map (0 without maps).
    pub fn map_nodes(&self) -> u32 {
        self.0.nnodes
    }

    fn derives(&self) -> bool {
        self.0.flags & FLAG_DERIVE != 0
    }

    fn spawned(&self) -> bool {
        self.0.flags & FLAG_SPAWNED != 0
    }

    fn section(&self, s: Section) -> &[u8] {
        let (off, len) = self.0.sections[s as usize];
        self.0.bytes.get(off..off + len).unwrap_or_default()
    }

    fn table<const N: usize>(&self, s: Section) -> Table<'_, N> {
        Table::new(self.section(s)).unwrap_or_default()
    }

    /// The values given for the entry `key` (a node id or a rank) of a `GivenNodes` or
    /// `GivenProcs` table: every record with that key, in order, decoded the first time they
    /// are asked for and kept (a repeated get reads them in place). A blob that does not
    /// decode counts as empty.
    fn given(&self, s: Section, key: u32) -> Option<&[Info]> {
        let t = self.table::<3>(s);
        let first = t.partition_point(0, |k| k < key);
        if t.field(first, 0) != Some(key) {
            return None;
        }
        let cache = match s {
            Section::GivenNodes => &self.0.given_nodes,
            _ => &self.0.given_procs,
        };
        let slot = cache.get(first)?;
        Some(slot.get_or_init(|| {
            let mut out = Vec::new();
            let mut i = first;
            while let Some([k, off, len]) = t.record(i) {
                if k != key {
                    break;
                }
                let blobs = self.section(Section::Blobs);
                let infos = blobs
                    .get(off as usize..(off as usize).saturating_add(len as usize))
                    .and_then(|b| decode_with_depth::<Vec<Info>>(b, BLOB_DEPTH).ok())
                    .unwrap_or_default();
                out.extend(infos);
                i += 1;
            }
            out
        }))
    }

    /// The keys of a `GivenNodes` or `GivenProcs` table, ascending, without repeats.
    fn given_keys(&self, s: Section) -> Vec<u32> {
        let t = self.table::<3>(s);
        let mut out: Vec<u32> = (0..t.len()).filter_map(|i| t.field(i, 0)).collect();
        out.dedup();
        out
    }

    /// Node `id`'s name in the map.
    fn map_name(&self, id: u32) -> Option<&str> {
        let offs = self.table::<1>(Section::NameOffsets);
        let (a, b) = (offs.field(id as usize, 0)?, offs.field(id as usize + 1, 0)?);
        let bytes = self.section(Section::Names).get(a as usize..b as usize)?;
        std::str::from_utf8(bytes).ok()
    }

    /// The node whose hostname is `host`.
    pub fn node_by_host(&self, host: &str) -> Option<u32> {
        let t = self.table::<3>(Section::HostIndex);
        let names = self.section(Section::Names);
        let name_of = |i: usize| -> Option<&[u8]> {
            let [off, len, _] = t.record(i)?;
            names.get(off as usize..(off as usize).saturating_add(len as usize))
        };
        let (mut lo, mut hi) = (0, t.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if name_of(mid).is_some_and(|n| n < host.as_bytes()) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (name_of(lo)? == host.as_bytes())
            .then(|| t.field(lo, 2))
            .flatten()
    }

    /// The ids of the nodes the image describes, ascending.
    pub fn node_ids(&self) -> Vec<u32> {
        let mut ids = self.given_keys(Section::GivenNodes);
        if self.derives() && self.0.nnodes > 0 {
            ids.extend(0..self.0.nnodes);
            ids.sort_unstable();
            ids.dedup();
        }
        ids
    }

    /// The ranks whose process values the host gave, ascending.
    pub fn given_proc_ranks(&self) -> Vec<Rank> {
        self.given_keys(Section::GivenProcs)
            .into_iter()
            .map(Rank)
            .collect()
    }
}

impl fmt::Debug for JobImage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobImage")
            .field("nspace", &self.0.nspace)
            .field("size", &self.0.size)
            .field("nodes", &self.0.nnodes)
            .field("bytes", &self.0.bytes.len())
            .finish()
    }
}

impl JobImage {
    /// True when `other` is this very image (a clone of it), not merely equal bytes: a check
    /// that costs nothing whatever the image's size.
    pub fn is_same(&self, other: &JobImage) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// This image's identity: equal for its clones, different from any other image alive
    /// (the address of what they share), for caches keyed by the image.
    pub fn identity(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }
}

impl PartialEq for JobImage {
    fn eq(&self, other: &JobImage) -> bool {
        self.0.bytes == other.0.bytes
    }
}

impl Serialize for JobImage {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serde_bytes::Bytes::new(&self.0.bytes).serialize(s)
    }
}

impl<'de> Deserialize<'de> for JobImage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<JobImage, D::Error> {
        let b = serde_bytes::ByteBuf::deserialize(d)?;
        JobImage::parse(Bytes::from(b.into_vec())).map_err(serde::de::Error::custom)
    }
}

pub(crate) fn find<'a>(infos: &'a [Info], key: &str) -> Option<&'a Value> {
    infos
        .iter()
        .find(|i| i.key.as_str() == key)
        .map(|i| &i.value)
}

#[cfg(test)]
mod tests;
