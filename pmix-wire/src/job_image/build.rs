//! Writing a job image: from a registration's compact description ([`JobSpec`]), from job
//! data another server expanded ([`JobData`]), or from another image with one process's values
//! changed ([`JobImage::with_proc_values`](super::JobImage::with_proc_values)).

use std::collections::{BTreeMap, HashMap};

use pmix_types::{Info, Nspace, Rank, Value, attr};
use serde::Serialize;

use super::layout::{
    FLAG_DERIVE, FLAG_SPAWNED, HEADER_LEN, IMAGE_VERSION, MAGIC, OFF_FLAGS, OFF_NNODES, OFF_OFFSET,
    OFF_SECTIONS, OFF_SIZE, OFF_TOTAL, OFF_VERSION, SECTIONS, Section, bad,
};
use crate::{Error, JobData, Realm};

/// The node and process maps of a job: node names by node id, and the ranks on each node in
/// the order the process map lists them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeMap {
    /// Node names, by node id.
    pub names: Vec<String>,
    /// The ranks on each node, by node id.
    pub ppn: Vec<Vec<Rank>>,
}

/// What a registration settled for one namespace, from which an image derives the rest: the
/// session, job and app levels as clients get them, the maps, and only the node and process
/// values the host gave.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
    /// The namespace.
    pub nspace: Nspace,
    /// Session-level values.
    pub session: Vec<Info>,
    /// Job-level values.
    pub job: Vec<Info>,
    /// App-level values, by app number.
    pub apps: Vec<Realm>,
    /// `(app number, leader)` in app-number order: the app of a rank is the last whose leader
    /// is at or below it.
    pub app_of_rank: Vec<(u32, Rank)>,
    /// Ranks `0..size` are the job's.
    pub size: u32,
    /// `NPROC_OFFSET`: the global rank of rank 0.
    pub offset: u32,
    /// The job was spawned (every process's `SPAWNED`).
    pub spawned: bool,
    /// The maps, when the host gave them.
    pub maps: Option<NodeMap>,
    /// Node arrays as the host gave them: with maps, each joins the node whose id or name it
    /// names; without, it is a node of its own (its `NODEID`, else its position).
    pub given_nodes: Vec<Vec<Info>>,
    /// Process arrays as the host gave them, by rank.
    pub given_procs: BTreeMap<Rank, Vec<Info>>,
}

/// Everything an image holds, laid out by node id and rank.
struct Parts<'a> {
    nspace: &'a str,
    flags: u32,
    size: u32,
    offset: u32,
    levels: Levels<'a>,
    maps: Option<&'a NodeMap>,
    /// `(node id, values)`, ascending by id.
    nodes: Vec<(u32, Vec<Info>)>,
    procs: Vec<(u32, &'a [Info])>,
}

#[derive(Serialize)]
struct Levels<'a>(&'a [Info], &'a [Info], &'a [Realm], Vec<(u32, u32)>);

fn find<'a>(infos: &'a [Info], key: &str) -> Option<&'a Value> {
    infos
        .iter()
        .find(|i| i.key.as_str() == key)
        .map(|i| &i.value)
}

impl JobSpec {
    /// The image of this job.
    pub fn image_bytes(&self) -> Result<Vec<u8>, Error> {
        let nodes = match &self.maps {
            // A node array joins every node of the map it names, by id or by name.
            Some(m) => {
                let mut by_id: BTreeMap<u32, Vec<Info>> = BTreeMap::new();
                let index: HashMap<&str, u32> = m
                    .names
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (n.as_str(), id_of(i)))
                    .rev()
                    .collect();
                for given in &self.given_nodes {
                    let id = find(given, attr::NODEID)
                        .and_then(Value::as_u32)
                        .filter(|&id| (id as usize) < m.names.len());
                    let name = find(given, attr::HOSTNAME)
                        .and_then(Value::as_str)
                        .and_then(|n| index.get(n).copied());
                    for target in [id, name.filter(|&n| Some(n) != id)].into_iter().flatten() {
                        by_id
                            .entry(target)
                            .or_default()
                            .extend(given.iter().cloned());
                    }
                }
                by_id.into_iter().collect()
            }
            None => {
                let mut nodes: Vec<(u32, Vec<Info>)> = self
                    .given_nodes
                    .iter()
                    .enumerate()
                    .map(|(idx, given)| {
                        let id = find(given, attr::NODEID)
                            .and_then(Value::as_u32)
                            .unwrap_or(id_of(idx));
                        (id, given.clone())
                    })
                    .collect();
                nodes.sort_by_key(|n| n.0);
                nodes
            }
        };
        let mut flags = FLAG_DERIVE;
        if self.spawned {
            flags |= FLAG_SPAWNED;
        }
        write(&Parts {
            nspace: self.nspace.as_str(),
            flags,
            size: self.size,
            offset: self.offset,
            levels: Levels(
                &self.session,
                &self.job,
                &self.apps,
                self.app_of_rank.iter().map(|&(a, r)| (a, r.0)).collect(),
            ),
            maps: self.maps.as_ref(),
            nodes,
            procs: self
                .given_procs
                .iter()
                .map(|(r, i)| (r.0, i.as_slice()))
                .collect(),
        })
    }
}

/// The image of job data as another server derived it: its node and process levels are
/// taken as they are, nothing is derived.
pub fn job_data_image(job: &JobData) -> Result<Vec<u8>, Error> {
    let size = find(&job.job, attr::JOB_SIZE)
        .and_then(Value::as_u32)
        .unwrap_or_else(|| {
            job.procs
                .iter()
                .map(|p| p.rank.0.saturating_add(1))
                .max()
                .unwrap_or(0)
        });
    let mut nodes: Vec<(u32, Vec<Info>)> =
        job.nodes.iter().map(|n| (n.id, n.info.clone())).collect();
    nodes.sort_by_key(|n| n.0);
    let mut procs: BTreeMap<u32, Vec<&Info>> = BTreeMap::new();
    for p in &job.procs {
        procs.entry(p.rank.0).or_default().extend(&p.info);
    }
    let procs: Vec<(u32, Vec<Info>)> = procs
        .into_iter()
        .map(|(r, i)| (r, i.into_iter().cloned().collect()))
        .collect();
    write(&Parts {
        nspace: job.nspace.as_str(),
        flags: 0,
        size,
        offset: 0,
        levels: Levels(&job.session, &job.job, &job.apps, Vec::new()),
        maps: None,
        nodes,
        procs: procs.iter().map(|(r, i)| (*r, i.as_slice())).collect(),
    })
}

fn id_of(idx: usize) -> u32 {
    u32::try_from(idx).unwrap_or(u32::MAX)
}

fn len32(n: usize, what: &str) -> Result<u32, Error> {
    u32::try_from(n).map_err(|_| Error::Encode(format!("job image: {what} over 4 GiB")))
}

fn msgpack<T: Serialize + ?Sized>(v: &T) -> Result<Vec<u8>, Error> {
    rmp_serde::to_vec(v).map_err(|e| Error::Encode(e.to_string()))
}

/// A section being written: its bytes.
#[derive(Default)]
struct Out(Vec<u8>);

impl Out {
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn record<const N: usize>(&mut self, r: [u32; N]) {
        for v in r {
            self.u32(v);
        }
    }
}

/// The ranges `(first, count)` of a node's ranks, in map order, runs of consecutive ranks
/// joined.
fn runs(ranks: &[Rank]) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for r in ranks {
        match out.last_mut() {
            Some((first, count)) if first.checked_add(*count) == Some(r.0) => *count += 1,
            _ => out.push((r.0, 1)),
        }
    }
    out
}

/// Where each placed rank below `size` runs, as disjoint `(first, count, node, local rank of
/// first)` records ascending by first rank. A rank the map places on several nodes counts on
/// the first of them.
fn rank_index(ranges: &[Vec<(u32, u32)>], size: u32) -> Vec<[u32; 4]> {
    let mut all: Vec<[u32; 4]> = Vec::new();
    for (node, node_ranges) in ranges.iter().enumerate() {
        let mut local = 0u32;
        for &(first, count) in node_ranges {
            let end = first.saturating_add(count).min(size);
            if first < end {
                all.push([first, end - first, id_of(node), local]);
            }
            local = local.saturating_add(count);
        }
    }
    let mut sorted = all.clone();
    sorted.sort_unstable_by_key(|r| (r[0], r[2]));
    let disjoint = sorted.windows(2).all(|w| w[0][0] + w[0][1] <= w[1][0]);
    if disjoint {
        return sorted;
    }
    // Some rank is placed twice: nodes in id order take what is still free.
    let mut taken: BTreeMap<u32, u32> = BTreeMap::new(); // first -> end, disjoint
    let mut out = Vec::new();
    for [first, count, node, local] in all {
        let end = first + count;
        let mut at = first;
        // Intervals that may overlap [first, end): the one starting at or before `first`, and
        // those starting inside.
        let start_key = taken.range(..=first).next_back().map_or(first, |(&s, _)| s);
        let overlapping: Vec<(u32, u32)> =
            taken.range(start_key..end).map(|(&s, &e)| (s, e)).collect();
        let mut pieces = Vec::new();
        for (s, e) in overlapping {
            if e <= at {
                continue;
            }
            if s > at {
                pieces.push((at, s.min(end)));
            }
            at = at.max(e);
            if at >= end {
                break;
            }
        }
        if at < end {
            pieces.push((at, end));
        }
        for (s, e) in pieces {
            taken.insert(s, e);
            out.push([s, e - s, node, local + (s - first)]);
        }
    }
    out.sort_unstable_by_key(|r| r[0]);
    out
}

/// The table of `(id, blob offset, blob length)` of given values, each entry's values
/// appended to `blobs` as a MessagePack blob.
fn given_table<'a>(
    blobs: &mut Out,
    entries: impl Iterator<Item = (u32, &'a [Info])>,
) -> Result<Out, Error> {
    let mut table = Out::default();
    for (id, infos) in entries {
        let b = msgpack(infos)?;
        table.record([
            id,
            len32(blobs.0.len(), "the blobs")?,
            len32(b.len(), "a blob")?,
        ]);
        blobs.0.extend_from_slice(&b);
    }
    Ok(table)
}

/// A host index record `(name, offset, length, node)` for hostname `h` of node `id`, the name
/// appended to `names`.
type HostRecord = (Vec<u8>, u32, u32, u32);

fn add_host(names: &mut Out, hosts: &mut Vec<HostRecord>, h: &str, id: u32) -> Result<(), Error> {
    let at = names.0.len();
    names.0.extend_from_slice(h.as_bytes());
    hosts.push((
        h.as_bytes().to_vec(),
        len32(at, "names")?,
        len32(h.len(), "a name")?,
        id,
    ));
    Ok(())
}

fn write(p: &Parts<'_>) -> Result<Vec<u8>, Error> {
    let mut sections: Vec<Out> = (0..SECTIONS).map(|_| Out::default()).collect();
    let sec = |s: Section| s as usize;
    sections[sec(Section::Nspace)]
        .0
        .extend_from_slice(p.nspace.as_bytes());
    sections[sec(Section::Levels)].0 = msgpack(&p.levels)?;

    let mut names = Out::default();
    let mut nnodes = 0;
    if let Some(m) = p.maps {
        nnodes = len32(m.names.len(), "the node map")?;
        let mut offs = Out::default();
        for n in &m.names {
            offs.u32(len32(names.0.len(), "the node names")?);
            names.0.extend_from_slice(n.as_bytes());
        }
        offs.u32(len32(names.0.len(), "the node names")?);
        sections[sec(Section::NameOffsets)] = offs;

        let ranges: Vec<Vec<(u32, u32)>> = m.ppn.iter().map(|r| runs(r)).collect();
        let mut idx = Out::default();
        let mut node_ranges = Out::default();
        let mut n = 0usize;
        for r in &ranges {
            idx.u32(len32(n, "the node ranges")?);
            for &(first, count) in r {
                node_ranges.record([first, count]);
            }
            n += r.len();
        }
        idx.u32(len32(n, "the node ranges")?);
        sections[sec(Section::NodeRangeIndex)] = idx;
        sections[sec(Section::NodeRanges)] = node_ranges;
        let mut rank_idx = Out::default();
        for r in rank_index(&ranges, p.size) {
            rank_idx.record(r);
        }
        sections[sec(Section::RankIndex)] = rank_idx;
    }

    // Host index: each node's hostname, the one the host gave over the map's.
    let mut hosts: Vec<HostRecord> = Vec::new();
    let given_host = |id: u32| -> Option<&str> {
        let i = p.nodes.partition_point(|n| n.0 < id);
        p.nodes[i..]
            .iter()
            .take_while(|n| n.0 == id)
            .find_map(|n| find(&n.1, attr::HOSTNAME).and_then(Value::as_str))
    };
    if let Some(m) = p.maps {
        let mut off = 0usize;
        for (i, n) in m.names.iter().enumerate() {
            let id = id_of(i);
            match given_host(id) {
                Some(h) if h != n => add_host(&mut names, &mut hosts, h, id)?,
                // The map's name, already in the names.
                _ => hosts.push((
                    n.as_bytes().to_vec(),
                    len32(off, "names")?,
                    len32(n.len(), "a name")?,
                    id,
                )),
            }
            off += n.len();
        }
    } else {
        let mut seen = Vec::new();
        for (id, _) in &p.nodes {
            if seen.last() == Some(id) {
                continue;
            }
            seen.push(*id);
            if let Some(h) = given_host(*id) {
                add_host(&mut names, &mut hosts, h, *id)?;
            }
        }
    }
    hosts.sort_by(|a, b| a.0.cmp(&b.0).then(a.3.cmp(&b.3)));
    let mut host_idx = Out::default();
    for (_, off, len, id) in hosts {
        host_idx.record([off, len, id]);
    }
    sections[sec(Section::HostIndex)] = host_idx;
    sections[sec(Section::Names)] = names;

    let mut blobs = Out::default();
    let given_nodes = given_table(&mut blobs, p.nodes.iter().map(|(id, i)| (*id, &i[..])))?;
    let given_procs = given_table(&mut blobs, p.procs.iter().map(|(r, i)| (*r, *i)))?;
    sections[sec(Section::GivenNodes)] = given_nodes;
    sections[sec(Section::GivenProcs)] = given_procs;
    sections[sec(Section::Blobs)] = blobs;

    let body: usize = sections.iter().map(|s| s.0.len()).sum();
    let total = HEADER_LEN + body;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(MAGIC);
    let mut head = Out::default();
    head.u32(IMAGE_VERSION);
    head.u32(p.flags);
    head.u32(len32(total, "the image")?);
    head.u32(p.size);
    head.u32(p.offset);
    head.u32(nnodes);
    out.extend_from_slice(&head.0);
    debug_assert_eq!(out.len(), OFF_SECTIONS);
    debug_assert_eq!(
        (
            OFF_VERSION,
            OFF_FLAGS,
            OFF_TOTAL,
            OFF_SIZE,
            OFF_OFFSET,
            OFF_NNODES
        ),
        (8, 12, 16, 20, 24, 28)
    );
    let mut at = HEADER_LEN;
    for s in &sections {
        out.extend_from_slice(&len32(at, "the image")?.to_le_bytes());
        out.extend_from_slice(&len32(s.0.len(), "a section")?.to_le_bytes());
        at += s.0.len();
    }
    for s in sections {
        out.extend_from_slice(&s.0);
    }
    Ok(out)
}

impl super::JobImage {
    /// This image with `infos` among the process values of `rank`, each replacing what was
    /// given for its key (a restarted process's `REINCARNATION`, which then wins over the
    /// derived 0); everything else as it was. The image is written anew from what it holds,
    /// which costs what its size does: for rare changes, not per client.
    pub fn with_proc_values(&self, rank: Rank, infos: &[Info]) -> Result<super::JobImage, Error> {
        let maps = if self.0.nnodes == 0 {
            None
        } else {
            let mut m = NodeMap::default();
            for id in 0..self.0.nnodes {
                let name = self.map_name(id).ok_or_else(|| bad("a node has no name"))?;
                let ranks = self
                    .ranks_of_node(id)
                    .ok_or_else(|| bad("a node's ranks cannot be read"))?;
                m.names.push(name.to_owned());
                m.ppn.push(ranks);
            }
            Some(m)
        };
        let nodes: Vec<(u32, Vec<Info>)> = self
            .given_keys(Section::GivenNodes)
            .into_iter()
            .map(|id| {
                (
                    id,
                    self.given(Section::GivenNodes, id)
                        .unwrap_or_default()
                        .to_vec(),
                )
            })
            .collect();
        let mut procs: BTreeMap<u32, Vec<Info>> = self
            .given_keys(Section::GivenProcs)
            .into_iter()
            .map(|r| {
                (
                    r,
                    self.given(Section::GivenProcs, r)
                        .unwrap_or_default()
                        .to_vec(),
                )
            })
            .collect();
        let mine = procs.entry(rank.0).or_default();
        mine.retain(|i| infos.iter().all(|new| new.key != i.key));
        mine.extend(infos.iter().cloned());
        let bytes = write(&Parts {
            nspace: self.0.nspace.as_str(),
            flags: self.0.flags,
            size: self.0.size,
            offset: self.0.offset,
            levels: Levels(
                &self.0.session,
                &self.0.job,
                &self.0.apps,
                self.0.app_of_rank.iter().map(|&(a, r)| (a, r.0)).collect(),
            ),
            maps: maps.as_ref(),
            nodes,
            procs: procs.iter().map(|(r, i)| (*r, i.as_slice())).collect(),
        })?;
        super::JobImage::parse(bytes::Bytes::from(bytes))
    }
}
