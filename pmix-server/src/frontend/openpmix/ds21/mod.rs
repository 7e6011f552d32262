//! The `ds21` storage module's shared memory, written the way libpmix 4.2's ds21 client reads
//! it: job data and collected data in memory-mapped files that the clients map and search in
//! their own thread, so that a get of a peer's data needs no message to this server.
//!
//! All files live in one directory (`PMIX_DSTORE_21_BASE_PATH`), each a symbolic link to a
//! memory file of the server's, sealed at its size (see [`shm`]: no one can truncate a segment
//! under the server's mapping); clients open them by these names:
//!
//! * `initial-pmix_shared-segment-<k>` (`INITIAL_SEG_SIZE` bytes): the namespace map, a
//!   `size_t` count, a `size_t` "full" flag (the client then attaches segment `k + 1`), and
//!   [`NS_MAX`] records of [`NS_REC`] bytes: the name (256 bytes, NUL-padded), `size_t`
//!   session index, `int` track index, padding, `size_t` number of meta segments, `size_t`
//!   number of data segments.
//! * `smseg-<nspace>-<k>` (`NS_META_SEG_SIZE`): a `size_t` count (unused in the direct mode
//!   pinned by `SM_USE_LINEAR_SEARCH=0`), then one record of three `size_t` (rank, global data
//!   offset, number of valid entries) per rank, at index `rank + 1` (`WILDCARD`, the job level,
//!   at 0), [`META_MAX`] per segment.
//! * `smdataseg-<nspace>-<k>` (`NS_DATA_SEG_SIZE`): a `size_t` free offset, then entries, a
//!   global offset being `k * NS_DATA_SEG_SIZE + offset`. An entry is a `size_t` total size
//!   whose two top bits flag an extension slot and an invalidated entry, a `size_t` key hash
//!   (the sum of the key's `char`s), the NUL-terminated key, and the value as libpmix packs a
//!   `PMIX_VALUE` (a top-level pack of one value in the client's codec). No alignment. A rank's
//!   entries run until an extension slot (empty key, value a `size_t` offset): 0 ends them,
//!   anything else is where they go on.
//! * `smlockseg-<nspace>`: a header (`size_t` size, `uint32_t` number of locks, `size_t`
//!   alignment, `size_t` offset of the mutexes), one `int32_t` in-use flag per lock (a client
//!   takes one at init), and two process-shared `pthread_mutex_t` per lock. A client reads
//!   (any namespace) under its own namespace's lock: signal mutex, main mutex, signal released;
//!   the writer takes every signal mutex then every main mutex of every lock segment.
//!
//! Clients map the lock segment writable, so the writer trusts none of its bytes: the mutexes
//! are plain process-shared ones (as libpmix's own server makes them), and the writer never
//! calls into pthreads on them; it takes and releases them by their lock word alone
//! ([`Mapping::try_lock`]) and never sleeps on one: a lock still taken after [`LOCK_SPIN`] of
//! retrying makes the write fail, and what it was to hold is then served over the socket. A client can
//! thus stop its job's data from reaching the segments, never stop or crash the server.
//!
//! The writer never reads a segment back: [`Ds21`] keeps its own index of every rank's entries
//! (where each key's value lies, where the rank's last extension slot is), and every write goes
//! through [`Mapping`]'s bounds checks.

mod shm;

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pmix_types::{Key, Nspace, Rank, Value};
use pmix_wire::openpmix::{Dialect, Packer};

use self::shm::{Mapping, OutOfBounds, cache_line, page_size};

/// The module's name, as the client announces it in its handshake.
pub(crate) const MODULE: &str = "ds21";

const INITIAL_SEG_SIZE: usize = 4096;
const META_SEG_SIZE: usize = 1 << 22;
const DATA_SEG_SIZE: usize = 1 << 22;

const WORD: usize = 8;
/// `PMIX_MAX_NSLEN + 1`.
const NS_NAME: usize = 256;
/// One namespace record of the initial segment.
const NS_REC: usize = NS_NAME + 8 + 4 + 4 + 8 + 8;
const NS_REC_META: usize = NS_NAME + 16;
const NS_REC_DATA: usize = NS_NAME + 24;
/// Namespace records per initial segment.
const NS_MAX: usize = (INITIAL_SEG_SIZE - 2 * WORD) / NS_REC;
const META_REC: usize = 3 * WORD;
/// Rank records per meta segment.
const META_MAX: usize = (META_SEG_SIZE - WORD) / META_REC;

/// Meta segments per namespace at most (ranks up to about 11 million).
const MAX_META_SEGS: usize = 64;

const EXT_FLAG: u64 = 1 << 63;
const INVALID_FLAG: u64 = 1 << 62;
/// An extension slot: size, hash, the empty key's NUL, an offset.
const EXT_LEN: usize = 2 * WORD + 1 + WORD;
/// How long the writer retries a busy lock before it gives the write up: a reader keeps its
/// lock for one lookup (microseconds), and the event loop, which writes, must not wait on a
/// lock a client may keep for ever.
const LOCK_SPIN: Duration = Duration::from_micros(50);

/// What cannot be put into the segments. The caller logs it; the clients then ask for the data
/// over the socket, as if it had never been offered in memory.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Ds21Error {
    /// A segment file could not be made.
    #[error("cannot create a ds21 segment: {0}")]
    Io(#[from] io::Error),
    /// A client held its read lock (or its lock word said so) for longer than [`LOCK_SPIN`].
    #[error("a client holds its ds21 read lock")]
    Busy,
    /// A namespace whose name cannot be part of a file name (it has a `/`).
    #[error("namespace {0} cannot name a ds21 segment file")]
    Name(Nspace),
    /// A write computed outside a segment was refused (a bug, never memory corruption).
    #[error("a ds21 write fell outside its segment")]
    Bounds,
    /// A value the codec cannot pack.
    #[error("cannot pack a value: {0}")]
    Pack(#[from] pmix_wire::Error),
}

impl From<OutOfBounds> for Ds21Error {
    fn from(_: OutOfBounds) -> Self {
        Ds21Error::Bounds
    }
}

/// The environment a libpmix client needs to use this store: where it is, and the sizes and
/// search mode the segments are written for (the client would otherwise take them from
/// whatever its environment holds).
pub(crate) fn fork_env(dir: &Path) -> Vec<(String, String)> {
    [
        ("PMIX_DSTORE_21_BASE_PATH", dir.display().to_string()),
        ("INITIAL_SEG_SIZE", INITIAL_SEG_SIZE.to_string()),
        ("NS_META_SEG_SIZE", META_SEG_SIZE.to_string()),
        ("NS_DATA_SEG_SIZE", DATA_SEG_SIZE.to_string()),
        ("SM_USE_LINEAR_SEARCH", "0".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The key hash: the sum of the key's bytes as C `char`s (signed on x86-64), wrapping.
fn key_hash(key: &str) -> u64 {
    key.bytes().fold(0u64, |h, b| {
        #[allow(clippy::unnecessary_cast)]
        let c = b as libc::c_char as i64;
        h.wrapping_add(c as u64)
    })
}

/// A value packed the way the client unpacks it from an entry: one `VALUE`, non-described,
/// in the `v41` codec (the only one served ds21).
pub(crate) fn pack_value(v: &Value) -> Result<Vec<u8>, pmix_wire::Error> {
    let mut out = Vec::new();
    Packer::new(&mut out, Dialect::V41).pack_one(v)?;
    Ok(out)
}

/// The segment files are named after the namespace: a `/` would put them elsewhere.
fn file_safe(nspace: &Nspace) -> Result<(), Ds21Error> {
    if nspace.as_str().contains('/') {
        return Err(Ds21Error::Name(nspace.clone()));
    }
    Ok(())
}

fn entry_len(key: &str, data: usize) -> usize {
    2 * WORD + key.len() + 1 + data
}

/// One rank's entries, as written.
#[derive(Default)]
struct RankRec {
    /// Global offset of the first entry (the meta record's offset).
    start: u64,
    /// Valid entries (what the meta record's count says).
    count: u64,
    /// Global offset of the rank's last extension slot (value 0).
    tail: u64,
    /// Global offset of each key's entry and the length of its value.
    keys: HashMap<String, (u64, usize)>,
}

/// One namespace's segments.
struct NsSegs {
    meta: Vec<Mapping>,
    data: Vec<Mapping>,
    /// Free offset inside the last data segment.
    free: usize,
    ranks: HashMap<u64, RankRec>,
    /// The job data is in.
    job: bool,
    paths: Vec<PathBuf>,
}

/// A namespace's lock segment.
struct LockSeg {
    map: Mapping,
    /// Offsets of the mutexes: (signal, main) per lock.
    mutexes: Vec<(usize, usize)>,
    path: PathBuf,
}

impl Drop for LockSeg {
    /// The mutexes are not destroyed (that would call into pthreads on bytes clients can
    /// write, and needs nothing freed): the file goes, the mapping with it.
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The server's side of the ds21 store.
pub(crate) struct Ds21 {
    dir: PathBuf,
    /// The initial segments, each with the namespaces of its records, in record order.
    initial: Vec<(Mapping, Vec<Nspace>)>,
    spaces: HashMap<Nspace, NsSegs>,
    locks: HashMap<Nspace, LockSeg>,
}

/// Which record of a namespace a batch of pairs belongs to.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Level {
    /// The job level (`WILDCARD`).
    Job,
    /// A rank's own.
    Rank(Rank),
}

impl Level {
    /// The meta index and the rank field of the meta record.
    fn meta(self) -> (u64, u64) {
        match self {
            Level::Job => (0, u64::from(Rank::WILDCARD.0)),
            Level::Rank(r) => (u64::from(r.0) + 1, u64::from(r.0)),
        }
    }
}

/// Pairs to store for one process or the job level, values already packed.
pub(crate) struct Batch {
    pub(crate) nspace: Nspace,
    pub(crate) level: Level,
    pub(crate) pairs: Vec<(Key, Vec<u8>)>,
}

impl Ds21 {
    /// A store in `dir` (which exists and is private to this server): makes the first
    /// initial segment, which every client attaches at init. Fails where clients could not
    /// reach the segments, or the kernel cannot seal them (see `shm`).
    pub(crate) fn new(dir: PathBuf) -> Result<Ds21, Ds21Error> {
        shm::fds_reachable()?;
        let seg = Mapping::create(&dir.join("initial-pmix_shared-segment-0"), INITIAL_SEG_SIZE)?;
        Ok(Ds21 {
            dir,
            initial: vec![(seg, Vec::new())],
            spaces: HashMap::new(),
            locks: HashMap::new(),
        })
    }

    /// The lock segment of a namespace with `local_size` local processes: it must exist before
    /// they start, each taking one of its locks at init (a client finding none left uses the
    /// `hash` store instead).
    pub(crate) fn add_nspace(&mut self, nspace: &Nspace, local_size: u32) -> Result<(), Ds21Error> {
        if self.locks.contains_key(nspace) {
            return Ok(());
        }
        file_safe(nspace)?;
        let n = local_size.max(1) as usize;
        let line = cache_line();
        let align = (std::mem::size_of::<libc::pthread_mutex_t>() / line + 1) * line;
        let hdr = ((4 * WORD + 4 * n) / align + 1) * align;
        let page = page_size();
        let size = ((hdr + 2 * n * align) / page + 1) * page;
        let path = self.dir.join(format!("smlockseg-{nspace}"));
        let mut map = Mapping::create(&path, size)?;
        let header = (|| {
            map.write_u64(0, size as u64)?;
            map.write_u32(WORD, n as u32)?;
            map.write_u64(2 * WORD, align as u64)?;
            map.write_u64(3 * WORD, hdr as u64)
        })();
        let mut seg = LockSeg {
            map,
            mutexes: Vec::with_capacity(n),
            path,
        };
        header?;
        for i in 0..n {
            let a = hdr + align * 2 * i;
            let b = a + align;
            seg.map.init_mutex(a)?;
            seg.map.init_mutex(b)?;
            seg.mutexes.push((a, b));
        }
        self.locks.insert(nspace.clone(), seg);
        Ok(())
    }

    /// Whether the namespace's job data is in.
    pub(crate) fn has_job(&self, nspace: &Nspace) -> bool {
        self.spaces.get(nspace).is_some_and(|s| s.job)
    }

    /// Forgets a namespace: its record leaves the namespace map (clients then find nothing
    /// and ask the server) and its files are removed.
    pub(crate) fn del_nspace(&mut self, nspace: &Nspace) {
        if self.spaces.contains_key(nspace) {
            if let Err(e) = self.locked(|this| this.remove_record(nspace)) {
                tracing::warn!(%nspace, "cannot take the ds21 namespace record out: {e}");
            }
            if let Some(s) = self.spaces.remove(nspace) {
                let NsSegs {
                    meta, data, paths, ..
                } = s;
                drop(meta);
                drop(data);
                for p in paths {
                    let _ = std::fs::remove_file(p);
                }
            }
        }
        self.locks.remove(nspace);
    }

    /// Stores `batches` under the write lock; a batch's pairs replace the same keys at the
    /// same level. Namespaces new to the store enter the namespace map. `job` names the
    /// namespace whose job data this is.
    pub(crate) fn store(
        &mut self,
        batches: &[Batch],
        job: Option<&Nspace>,
    ) -> Result<(), Ds21Error> {
        self.store_each(batches.iter().map(Ok), job)
    }

    /// [`store`](Self::store) of batches made one at a time while the locks are held (a job's
    /// million ranks need not be packed all at once). A batch that cannot be made stops the
    /// writing there, with what came before it written, and the namespace is not marked as
    /// stored.
    pub(crate) fn store_each<B: std::borrow::Borrow<Batch>>(
        &mut self,
        batches: impl IntoIterator<Item = Result<B, Ds21Error>>,
        job: Option<&Nspace>,
    ) -> Result<(), Ds21Error> {
        self.locked(|this| {
            for b in batches {
                match this.store_one(b?.borrow()) {
                    // That namespace's data is served over the socket; the others' is here.
                    Err(Ds21Error::Name(n)) => {
                        tracing::warn!(nspace = %n, "not in the ds21 segments: its name has a '/'");
                    }
                    r => r?,
                }
            }
            if let Some(ns) = job {
                this.space(ns)?.job = true;
            }
            Ok(())
        })
    }

    /// Runs `f` holding the write lock of every lock segment (a client reads any namespace
    /// under its own namespace's lock); [`Ds21Error::Busy`], with nothing written, when a lock
    /// stays taken for [`LOCK_SPIN`].
    fn locked<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, Ds21Error>,
    ) -> Result<T, Ds21Error> {
        let mut held: Vec<(Nspace, usize)> = Vec::new();
        let mut busy = false;
        let give_up = Instant::now() + LOCK_SPIN;
        // Signal mutexes first, so that readers arriving now wait there; then the main ones,
        // which readers still reading hold.
        'outer: for phase in 0..2 {
            for (ns, seg) in &self.locks {
                for &(a, b) in &seg.mutexes {
                    let m = if phase == 0 { a } else { b };
                    while !seg.map.try_lock(m) {
                        if Instant::now() >= give_up {
                            busy = true;
                            break 'outer;
                        }
                        std::hint::spin_loop();
                    }
                    held.push((ns.clone(), m));
                }
            }
        }
        let result = if busy { Err(Ds21Error::Busy) } else { f(self) };
        for (ns, m) in held.iter().rev() {
            if let Some(seg) = self.locks.get(ns) {
                seg.map.unlock(*m);
            }
        }
        result
    }

    /// The namespace's segments, made (and entered in the namespace map) on first use.
    fn space(&mut self, nspace: &Nspace) -> Result<&mut NsSegs, Ds21Error> {
        if !self.spaces.contains_key(nspace) {
            file_safe(nspace)?;
            let meta_path = self.dir.join(format!("smseg-{nspace}-0"));
            let data_path = self.dir.join(format!("smdataseg-{nspace}-0"));
            let meta = Mapping::create(&meta_path, META_SEG_SIZE)?;
            let made = Mapping::create(&data_path, DATA_SEG_SIZE)
                .map_err(Ds21Error::from)
                .and_then(|mut data| {
                    data.write_u64(0, WORD as u64)?;
                    Ok(data)
                })
                .and_then(|data| self.add_record(nspace).map(|()| data));
            let data = match made {
                Ok(d) => d,
                Err(e) => {
                    drop(meta);
                    let _ = std::fs::remove_file(&meta_path);
                    let _ = std::fs::remove_file(&data_path);
                    return Err(e);
                }
            };
            self.spaces.insert(
                nspace.clone(),
                NsSegs {
                    meta: vec![meta],
                    data: vec![data],
                    free: WORD,
                    ranks: HashMap::new(),
                    job: false,
                    paths: vec![meta_path, data_path],
                },
            );
        }
        Ok(self.spaces.get_mut(nspace).expect("made above"))
    }

    /// A namespace record: its name and its numbers of meta and data segments.
    fn record(nspace: &Nspace, meta: usize, data: usize) -> [u8; NS_REC] {
        let mut rec = [0u8; NS_REC];
        let name = nspace.as_str().as_bytes();
        let len = name.len().min(NS_NAME - 1);
        rec[..len].copy_from_slice(&name[..len]);
        rec[NS_REC_META..NS_REC_META + WORD].copy_from_slice(&(meta as u64).to_ne_bytes());
        rec[NS_REC_DATA..NS_REC_DATA + WORD].copy_from_slice(&(data as u64).to_ne_bytes());
        rec
    }

    /// Enters a namespace in the namespace map, after the last record; a full initial segment
    /// is flagged so, and the next one made.
    fn add_record(&mut self, nspace: &Nspace) -> Result<(), Ds21Error> {
        if self
            .initial
            .last()
            .is_none_or(|(_, names)| names.len() >= NS_MAX)
        {
            let k = self.initial.len();
            let seg = Mapping::create(
                &self.dir.join(format!("initial-pmix_shared-segment-{k}")),
                INITIAL_SEG_SIZE,
            )?;
            self.initial.push((seg, Vec::new()));
            if k > 0 {
                self.initial[k - 1].0.write_u64(WORD, 1)?;
            }
        }
        let (seg, names) = self.initial.last_mut().expect("one at least");
        seg.write(2 * WORD + names.len() * NS_REC, &Self::record(nspace, 1, 1))?;
        names.push(nspace.clone());
        seg.write_u64(0, names.len() as u64)?;
        Ok(())
    }

    /// Rewrites a namespace's segment counts in its record.
    fn update_record(&mut self, nspace: &Nspace) -> Result<(), Ds21Error> {
        let Some(s) = self.spaces.get(nspace) else {
            return Ok(());
        };
        let rec = Self::record(nspace, s.meta.len(), s.data.len());
        for (seg, names) in &mut self.initial {
            if let Some(i) = names.iter().position(|n| n == nspace) {
                seg.write(2 * WORD + i * NS_REC, &rec)?;
            }
        }
        Ok(())
    }

    /// Takes a namespace's record out of the map: the segment's last record moves into its
    /// place.
    fn remove_record(&mut self, nspace: &Nspace) -> Result<(), Ds21Error> {
        let counts: HashMap<Nspace, (usize, usize)> = self
            .spaces
            .iter()
            .map(|(n, s)| (n.clone(), (s.meta.len(), s.data.len())))
            .collect();
        for (seg, names) in &mut self.initial {
            let Some(i) = names.iter().position(|n| n == nspace) else {
                continue;
            };
            names.swap_remove(i);
            if let Some(moved) = names.get(i) {
                let (m, d) = counts.get(moved).copied().unwrap_or((1, 1));
                seg.write(2 * WORD + i * NS_REC, &Self::record(moved, m, d))?;
            }
            seg.write(2 * WORD + names.len() * NS_REC, &[0u8; NS_REC])?;
            seg.write_u64(0, names.len() as u64)?;
        }
        Ok(())
    }

    /// Writes one batch.
    fn store_one(&mut self, b: &Batch) -> Result<(), Ds21Error> {
        let (idx, rank_field) = b.level.meta();
        if idx >= (META_MAX * MAX_META_SEGS) as u64 {
            tracing::warn!(nspace = %b.nspace, level = ?b.level, "a rank beyond what the ds21 segments index: served over the socket");
            return Ok(());
        }
        let dir = self.dir.clone();
        let space = self.space(&b.nspace)?;
        let before = (space.meta.len(), space.data.len());
        space.put(idx, rank_field, &b.pairs, &dir, &b.nspace)?;
        let after = (space.meta.len(), space.data.len());
        if before != after {
            self.update_record(&b.nspace)?;
        }
        Ok(())
    }
}

impl Drop for Ds21 {
    fn drop(&mut self) {
        self.locks.clear();
        for (_, s) in self.spaces.drain() {
            let NsSegs {
                meta, data, paths, ..
            } = s;
            drop(meta);
            drop(data);
            for p in paths {
                let _ = std::fs::remove_file(p);
            }
        }
        let n = self.initial.len();
        self.initial.clear();
        for k in 0..n {
            let _ = std::fs::remove_file(self.dir.join(format!("initial-pmix_shared-segment-{k}")));
        }
    }
}

impl NsSegs {
    /// Global offset of the next free byte.
    fn global_free(&self) -> u64 {
        ((self.data.len() - 1) * DATA_SEG_SIZE + self.free) as u64
    }

    /// The data segment and local offset of a global offset.
    fn data_at(&mut self, global: u64) -> Result<(&mut Mapping, usize), Ds21Error> {
        let g = usize::try_from(global).map_err(|_| Ds21Error::Bounds)?;
        let seg = self
            .data
            .get_mut(g / DATA_SEG_SIZE)
            .ok_or(Ds21Error::Bounds)?;
        Ok((seg, g % DATA_SEG_SIZE))
    }

    /// Writes an entry (or, with `ext`, an extension slot whose value is `data`) at `global`.
    fn write_entry(
        &mut self,
        global: u64,
        key: &str,
        data: &[u8],
        ext: bool,
    ) -> Result<(), Ds21Error> {
        let len = entry_len(key, data.len());
        let mut e = Vec::with_capacity(len);
        let size = len as u64 | if ext { EXT_FLAG } else { 0 };
        e.extend_from_slice(&size.to_ne_bytes());
        e.extend_from_slice(&key_hash(key).to_ne_bytes());
        e.extend_from_slice(key.as_bytes());
        e.push(0);
        e.extend_from_slice(data);
        let (seg, off) = self.data_at(global)?;
        seg.write(off, &e)?;
        Ok(())
    }

    /// Makes the next data segment; the free offset moves to its start.
    fn grow_data(&mut self, dir: &Path, nspace: &Nspace) -> Result<(), Ds21Error> {
        let k = self.data.len();
        let path = dir.join(format!("smdataseg-{nspace}-{k}"));
        let mut seg = Mapping::create(&path, DATA_SEG_SIZE)?;
        self.paths.push(path);
        seg.write_u64(0, WORD as u64)?;
        self.data.push(seg);
        self.free = WORD;
        Ok(())
    }

    fn set_free(&mut self, free: usize) -> Result<(), Ds21Error> {
        self.free = free;
        let last = self.data.last_mut().ok_or(Ds21Error::Bounds)?;
        last.write_u64(0, free as u64)?;
        Ok(())
    }

    /// Writes a meta record, making meta segments up to the one it lies in.
    fn put_meta(
        &mut self,
        idx: u64,
        rec: [u64; 3],
        dir: &Path,
        nspace: &Nspace,
    ) -> Result<(), Ds21Error> {
        let idx = usize::try_from(idx).map_err(|_| Ds21Error::Bounds)?;
        let (k, i) = (idx / META_MAX, idx % META_MAX);
        while self.meta.len() <= k {
            let path = dir.join(format!("smseg-{nspace}-{}", self.meta.len()));
            let seg = Mapping::create(&path, META_SEG_SIZE)?;
            self.paths.push(path);
            self.meta.push(seg);
        }
        let mut b = [0u8; META_REC];
        for (j, v) in rec.iter().enumerate() {
            b[j * WORD..(j + 1) * WORD].copy_from_slice(&v.to_ne_bytes());
        }
        self.meta[k].write(WORD + i * META_REC, &b)?;
        Ok(())
    }

    /// Stores pairs for the record at meta index `idx`.
    fn put(
        &mut self,
        idx: u64,
        rank_field: u64,
        pairs: &[(Key, Vec<u8>)],
        dir: &Path,
        nspace: &Nspace,
    ) -> Result<(), Ds21Error> {
        let mut rec = self.ranks.remove(&idx);
        let result = self.put_into(&mut rec, idx, rank_field, pairs, dir, nspace);
        if let Some(r) = rec {
            self.ranks.insert(idx, r);
        }
        result
    }

    fn put_into(
        &mut self,
        rec: &mut Option<RankRec>,
        idx: u64,
        rank_field: u64,
        pairs: &[(Key, Vec<u8>)],
        dir: &Path,
        nspace: &Nspace,
    ) -> Result<(), Ds21Error> {
        // Later pairs of a batch win over earlier ones with the same key.
        let mut last: HashMap<&str, usize> = HashMap::new();
        for (i, (k, _)) in pairs.iter().enumerate() {
            last.insert(k.as_str(), i);
        }
        let mut fresh: Vec<(&str, &[u8])> = Vec::new();
        let mut changed = false;
        for (i, (k, data)) in pairs.iter().enumerate() {
            let key = k.as_str();
            if last.get(key) != Some(&i) {
                continue;
            }
            if let Some(r) = rec.as_mut() {
                if let Some(&(at, len)) = r.keys.get(key) {
                    if len == data.len() {
                        // Same size: the value is replaced where it lies.
                        let (seg, off) = self.data_at(at)?;
                        seg.write(off + 2 * WORD + key.len() + 1, data)?;
                        continue;
                    }
                    // Otherwise the old entry is invalidated and the new one appended.
                    let size = entry_len(key, len) as u64 | INVALID_FLAG;
                    let (seg, off) = self.data_at(at)?;
                    seg.write_u64(off, size)?;
                    r.keys.remove(key);
                    r.count -= 1;
                    changed = true;
                }
            }
            fresh.push((key, data));
        }
        // Appended as one run, ended by an empty extension slot; a run reaching the end of a
        // segment goes on in a new one, through an extension slot.
        let mut first: Option<u64> = None;
        let mut added: Vec<(String, u64, usize)> = Vec::new();
        for (key, data) in fresh {
            let len = entry_len(key, data.len());
            if WORD + len + EXT_LEN > DATA_SEG_SIZE {
                tracing::warn!(%nspace, key, "a value too large for a ds21 data segment: served over the socket");
                continue;
            }
            if self.free + len + EXT_LEN > DATA_SEG_SIZE {
                let end = self.global_free();
                let had_run = first.is_some();
                self.grow_data(dir, nspace)?;
                if had_run {
                    let next = self.global_free();
                    self.write_entry(end, "", &next.to_ne_bytes(), true)?;
                }
            }
            let at = self.global_free();
            self.write_entry(at, key, data, false)?;
            let free = self.free + len;
            self.set_free(free)?;
            first.get_or_insert(at);
            added.push((key.to_owned(), at, data.len()));
        }
        if let Some(first) = first {
            let tail = self.global_free();
            self.write_entry(tail, "", &0u64.to_ne_bytes(), true)?;
            let free = self.free + EXT_LEN;
            self.set_free(free)?;
            let r = match rec.as_mut() {
                Some(r) => {
                    // The run hangs off the rank's previous end.
                    let (seg, off) = self.data_at(r.tail)?;
                    seg.write_u64(off + 2 * WORD + 1, first)?;
                    r
                }
                None => rec.insert(RankRec {
                    start: first,
                    ..RankRec::default()
                }),
            };
            r.tail = tail;
            for (k, at, len) in added {
                r.keys.insert(k, (at, len));
                r.count += 1;
            }
            changed = true;
        }
        if changed {
            if let Some(r) = rec.as_ref() {
                self.put_meta(idx, [rank_field, r.start, r.count], dir, nspace)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A private directory for one test.
    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pmixrs-ds21-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("a test directory");
        d
    }

    fn word(b: &[u8], at: usize) -> u64 {
        u64::from_ne_bytes(b[at..at + WORD].try_into().expect("8 bytes"))
    }

    /// Reads a rank's pairs the way libpmix's ds21 client does, from the files alone.
    fn read(dir: &Path, ns: &str, level: Level) -> Option<Vec<(String, Vec<u8>)>> {
        let (mut meta_n, mut data_n) = (0, 0);
        let mut found = false;
        for k in 0.. {
            let Ok(init) = std::fs::read(dir.join(format!("initial-pmix_shared-segment-{k}")))
            else {
                break;
            };
            assert_eq!(init.len(), INITIAL_SEG_SIZE);
            for i in 0..word(&init, 0) as usize {
                let rec = &init[2 * WORD + i * NS_REC..][..NS_REC];
                let name = &rec[..rec.iter().position(|&b| b == 0).expect("NUL")];
                if name == ns.as_bytes() {
                    meta_n = word(rec, NS_REC_META) as usize;
                    data_n = word(rec, NS_REC_DATA) as usize;
                    found = true;
                }
            }
            if word(&init, WORD) != 1 {
                break;
            }
        }
        if !found {
            return None;
        }
        let meta: Vec<Vec<u8>> = (0..meta_n)
            .map(|k| std::fs::read(dir.join(format!("smseg-{ns}-{k}"))).expect("meta"))
            .collect();
        let data: Vec<Vec<u8>> = (0..data_n)
            .map(|k| std::fs::read(dir.join(format!("smdataseg-{ns}-{k}"))).expect("data"))
            .collect();
        let (idx, rank) = level.meta();
        let idx = idx as usize;
        let m = meta.get(idx / META_MAX)?;
        let rec = WORD + (idx % META_MAX) * META_REC;
        let (r, mut addr, mut count) = (word(m, rec), word(m, rec + WORD), word(m, rec + 16));
        if addr == 0 {
            return None;
        }
        assert_eq!(r, rank);
        let mut out = Vec::new();
        while count > 0 {
            let seg = &data[addr as usize / DATA_SEG_SIZE];
            let at = addr as usize % DATA_SEG_SIZE;
            let size = word(seg, at);
            let len = (size & !(EXT_FLAG | INVALID_FLAG)) as usize;
            if size & INVALID_FLAG != 0 {
                addr += len as u64;
            } else if size & EXT_FLAG != 0 {
                assert_eq!(len, EXT_LEN);
                let next = word(seg, at + 2 * WORD + 1);
                if next == 0 {
                    break;
                }
                addr = next;
            } else {
                let key_at = at + 2 * WORD;
                let klen = seg[key_at..].iter().position(|&b| b == 0).expect("NUL");
                let key = String::from_utf8(seg[key_at..key_at + klen].to_vec()).expect("utf8");
                assert_eq!(word(seg, at + WORD), key_hash(&key), "hash of {key}");
                out.push((key, seg[key_at + klen + 1..at + len].to_vec()));
                count -= 1;
                addr += len as u64;
            }
        }
        assert_eq!(count, 0, "the chain ended before the count");
        Some(out)
    }

    fn ns(s: &str) -> Nspace {
        Nspace::new(s).expect("nspace")
    }

    fn batch(n: &str, level: Level, pairs: &[(&str, Value)]) -> Batch {
        Batch {
            nspace: ns(n),
            level,
            pairs: pairs
                .iter()
                .map(|(k, v)| (Key::new(*k).expect("key"), pack_value(v).expect("pack")))
                .collect(),
        }
    }

    fn packed(pairs: &[(&str, Value)]) -> Vec<(String, Vec<u8>)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), pack_value(v).expect("pack")))
            .collect()
    }

    #[test]
    fn what_is_written_reads_back_the_clients_way() {
        let d = dir("readback");
        let mut ds = Ds21::new(d.clone()).expect("store");
        ds.add_nspace(&ns("job"), 2).expect("lock segment");
        let job = [
            ("pmix.job.size", Value::Uint32(2)),
            ("pmix.lpeers", Value::String("0,1".into())),
        ];
        let r0 = [
            ("pmix.lrank", Value::Uint16(0)),
            ("k.str", Value::String("abc".into())),
            ("k.i64", Value::Int64(-5)),
        ];
        let r1 = [
            ("pmix.lrank", Value::Uint16(1)),
            ("k.\u{e9}", Value::Bool(true)),
        ];
        ds.store(
            &[
                batch("job", Level::Job, &job),
                batch("job", Level::Rank(Rank(0)), &r0),
                batch("job", Level::Rank(Rank(1)), &r1),
            ],
            Some(&ns("job")),
        )
        .expect("store");
        assert!(ds.has_job(&ns("job")));
        assert_eq!(read(&d, "job", Level::Job), Some(packed(&job)));
        assert_eq!(read(&d, "job", Level::Rank(Rank(0))), Some(packed(&r0)));
        assert_eq!(read(&d, "job", Level::Rank(Rank(1))), Some(packed(&r1)));
        assert_eq!(read(&d, "job", Level::Rank(Rank(2))), None);
        assert_eq!(read(&d, "other", Level::Job), None);

        // A second round: a value of the same length replaced in place, one of another
        // length invalidated and appended, a new key; rank 1 untouched.
        let more = [
            ("k.i64", Value::Int64(-6)),
            ("k.str", Value::String("a longer string".into())),
            ("k.new", Value::Uint32(7)),
        ];
        ds.store(&[batch("job", Level::Rank(Rank(0)), &more)], None)
            .expect("store");
        let mut got = read(&d, "job", Level::Rank(Rank(0))).expect("rank 0");
        got.sort();
        let mut want = packed(&[
            ("pmix.lrank", Value::Uint16(0)),
            ("k.i64", Value::Int64(-6)),
            ("k.str", Value::String("a longer string".into())),
            ("k.new", Value::Uint32(7)),
        ]);
        want.sort();
        assert_eq!(got, want);
        assert_eq!(read(&d, "job", Level::Rank(Rank(1))), Some(packed(&r1)));

        // The lock segment: its header, one lock per local process.
        let lock = std::fs::read(d.join("smlockseg-job")).expect("lock segment");
        assert_eq!(word(&lock, 0) as usize, lock.len());
        assert_eq!(u32::from_ne_bytes(lock[8..12].try_into().expect("4")), 2);
        let (align, offs) = (word(&lock, 16) as usize, word(&lock, 24) as usize);
        assert!(align >= std::mem::size_of::<libc::pthread_mutex_t>());
        assert!(offs >= 4 * WORD + 2 * 4 && offs + 4 * align <= lock.len());

        drop(ds);
        let left: Vec<_> = std::fs::read_dir(&d).expect("dir").flatten().collect();
        assert!(left.is_empty(), "left behind: {left:?}");
        let _ = std::fs::remove_dir(&d);
    }

    #[test]
    fn data_larger_than_a_segment_continues_in_the_next() {
        let d = dir("grow");
        let mut ds = Ds21::new(d.clone()).expect("store");
        let big = |i: u8| Value::ByteObject(vec![i; 300 << 10]);
        let keys: Vec<String> = (0..20).map(|i| format!("k.big.{i}")).collect();
        let pairs: Vec<(&str, Value)> = keys
            .iter()
            .enumerate()
            .map(|(i, k)| (k.as_str(), big(i as u8)))
            .collect();
        // Half, then the other half after another rank's data: two runs, three segments.
        ds.store(&[batch("g", Level::Rank(Rank(0)), &pairs[..10])], None)
            .expect("store");
        ds.store(
            &[batch(
                "g",
                Level::Rank(Rank(1)),
                &[("k.small", Value::Uint8(1))],
            )],
            None,
        )
        .expect("store");
        ds.store(&[batch("g", Level::Rank(Rank(0)), &pairs[10..])], None)
            .expect("store");
        // Too large for any segment: left out, the rest stored.
        let huge = [
            ("k.huge", Value::ByteObject(vec![0; DATA_SEG_SIZE])),
            ("k.after", Value::Uint8(2)),
        ];
        ds.store(&[batch("g", Level::Rank(Rank(1)), &huge)], None)
            .expect("store");
        assert!(ds.spaces[&ns("g")].data.len() >= 2);
        assert_eq!(read(&d, "g", Level::Rank(Rank(0))), Some(packed(&pairs)));
        assert_eq!(
            read(&d, "g", Level::Rank(Rank(1))),
            Some(packed(&[
                ("k.small", Value::Uint8(1)),
                ("k.after", Value::Uint8(2))
            ]))
        );
        drop(ds);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_namespace_map_grows_and_shrinks() {
        let d = dir("map");
        let mut ds = Ds21::new(d.clone()).expect("store");
        let names: Vec<String> = (0..2 * NS_MAX + 3).map(|i| format!("ns{i}")).collect();
        for n in &names {
            ds.store(&[batch(n, Level::Job, &[("k", Value::Uint8(1))])], None)
                .expect("store");
        }
        for n in &names {
            assert!(read(&d, n, Level::Job).is_some(), "{n}");
        }
        ds.del_nspace(&ns("ns3"));
        ds.del_nspace(&ns(&names[names.len() - 1]));
        for (i, n) in names.iter().enumerate() {
            let gone = i == 3 || i == names.len() - 1;
            assert_eq!(read(&d, n, Level::Job).is_none(), gone, "{n}");
        }
        assert!(!d.join("smseg-ns3-0").exists());
        drop(ds);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn writes_outside_a_mapping_are_refused() {
        let d = dir("bounds");
        let mut m = Mapping::create(&d.join("seg"), 64).expect("mapping");
        assert!(m.write(60, &[1, 2, 3, 4]).is_ok());
        assert_eq!(m.write(61, &[1, 2, 3, 4]), Err(OutOfBounds));
        assert_eq!(m.write(usize::MAX, &[1]), Err(OutOfBounds));
        assert_eq!(m.write_u64(57, 1), Err(OutOfBounds));
        assert!(
            Mapping::create(&d.join("seg"), 64).is_err(),
            "an existing file is not reused"
        );
        drop(m);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_namespace_with_a_slash_names_no_file() {
        let d = dir("slash");
        let mut ds = Ds21::new(d.clone()).expect("store");
        let bad = ns("../escape");
        assert!(matches!(ds.add_nspace(&bad, 1), Err(Ds21Error::Name(_))));
        let r = ds.store(
            &[batch("../escape", Level::Job, &[("k", Value::Uint8(1))])],
            None,
        );
        assert!(r.is_ok(), "{r:?}");
        assert!(!d.join("..").join("escape").exists());
        assert_eq!(read(&d, "../escape", Level::Job), None);
        drop(ds);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_kept_read_lock_makes_a_write_fail_at_once_and_only_while_kept() {
        let d = dir("busy");
        let mut ds = Ds21::new(d.clone()).expect("store");
        ds.add_nspace(&ns("job"), 2).expect("lock segment");
        let pairs = [("k", Value::Uint8(1))];
        // A reader keeps the main mutex of the second lock (a client faking it writes the
        // same word).
        let (_, main) = ds.locks[&ns("job")].mutexes[1];
        assert!(ds.locks[&ns("job")].map.try_lock(main));
        let t = Instant::now();
        let r = ds.store(&[batch("job", Level::Job, &pairs)], Some(&ns("job")));
        assert!(matches!(r, Err(Ds21Error::Busy)), "{r:?}");
        assert!(
            t.elapsed() < Duration::from_millis(500),
            "waited {:?}",
            t.elapsed()
        );
        assert!(!ds.has_job(&ns("job")));
        assert_eq!(read(&d, "job", Level::Job), None, "nothing written");
        // Every lock the writer took on the way was let go: once the reader lets go too, the
        // write goes through.
        ds.locks[&ns("job")].map.unlock(main);
        ds.store(&[batch("job", Level::Job, &pairs)], Some(&ns("job")))
            .expect("store");
        assert_eq!(read(&d, "job", Level::Job), Some(packed(&pairs)));
        drop(ds);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn key_hash_sums_signed_chars() {
        assert_eq!(key_hash("ab"), 97 + 98);
        #[allow(clippy::unnecessary_cast)]
        let signed = (0xc3u8 as libc::c_char as i64) + (0xa9u8 as libc::c_char as i64);
        assert_eq!(key_hash("\u{e9}"), signed as u64);
    }
}
