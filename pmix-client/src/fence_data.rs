//! What collecting fences brought that no get has read yet: each fence's data kept as it
//! arrived (one shared buffer) with a compact index of where each process's entries lie, sorted
//! by process so that finding one is a binary search. A fence over a million processes costs a
//! client its bytes and 16 bytes per process, no hash entry, and nothing is decoded before a
//! get asks for that process.

use std::ops::Range;

use bytes::Bytes;
use pmix_types::Rank;

/// How many fences' data is kept encoded at most: past it, the oldest fence's unread entries
/// are handed back to be decoded, so that what is kept stays bounded.
const MAX_FENCES: usize = 4;

/// A `len` marking an entry as taken.
const TAKEN: u32 = u32::MAX;

/// Where one process's entries lie in its fence's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The store's number for the process's namespace.
    pub(crate) ns: u32,
    pub(crate) rank: u32,
    start: u32,
    len: u32,
}

impl Entry {
    /// An entry for `kvs` of `data`; `None` if the range does not fit the index's integers.
    pub(crate) fn new(ns: u32, rank: Rank, kvs: &Range<usize>) -> Option<Entry> {
        let start = u32::try_from(kvs.start).ok()?;
        let len = u32::try_from(kvs.end.checked_sub(kvs.start)?).ok()?;
        (len != TAKEN).then_some(Entry {
            ns,
            rank: rank.0,
            start,
            len,
        })
    }

    fn key(&self) -> (u32, u32) {
        (self.ns, self.rank)
    }
}

/// At most this many runs of consecutive ranks are kept per fence for direct lookups; a
/// fence of more scattered processes is binary-searched.
const MAX_RUNS: usize = 8;

/// Consecutive ranks of one namespace at consecutive places of a fence's index.
#[derive(Clone, Copy)]
struct Run {
    ns: u32,
    first: u32,
    count: u32,
    /// Where the run's first rank is in the index.
    at: u32,
}

struct Fence {
    data: Bytes,
    /// Ascending by (namespace, rank), one entry per process.
    index: Vec<Entry>,
    /// The index as runs of consecutive ranks (a job-wide fence is one or two), so that a
    /// process is found by arithmetic; empty when there are more than [`MAX_RUNS`].
    runs: Vec<Run>,
    /// Entries not taken yet.
    live: usize,
}

/// The runs of consecutive ranks of a sorted index, unless there are more than [`MAX_RUNS`].
fn runs_of(index: &[Entry]) -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for (i, e) in index.iter().enumerate() {
        match runs.last_mut() {
            Some(r) if r.ns == e.ns && r.first.checked_add(r.count) == Some(e.rank) => {
                r.count += 1;
            }
            _ => {
                if runs.len() == MAX_RUNS {
                    return Vec::new();
                }
                runs.push(Run {
                    ns: e.ns,
                    first: e.rank,
                    count: 1,
                    at: u32::try_from(i).unwrap_or(u32::MAX),
                });
            }
        }
    }
    runs
}

impl Fence {
    fn find(&self, key: (u32, u32)) -> Option<usize> {
        let i = if self.runs.is_empty() {
            self.index.binary_search_by_key(&key, Entry::key).ok()?
        } else {
            let (ns, rank) = key;
            let r = self
                .runs
                .iter()
                .find(|r| r.ns == ns && rank >= r.first && rank - r.first < r.count)?;
            (r.at + (rank - r.first)) as usize
        };
        (self.index.get(i)?.len != TAKEN).then_some(i)
    }

    fn take(&mut self, i: usize) -> Bytes {
        let e = &mut self.index[i];
        let (start, len) = (e.start as usize, e.len as usize);
        e.len = TAKEN;
        self.live -= 1;
        // Every range came from a peek of `data`: in bounds.
        self.data.slice(start..(start + len).min(self.data.len()))
    }
}

/// See the module documentation.
#[derive(Default)]
pub(crate) struct PackedFences {
    /// Oldest first.
    fences: Vec<Fence>,
}

impl PackedFences {
    pub(crate) fn is_empty(&self) -> bool {
        self.fences.is_empty()
    }

    /// Processes with entries not taken yet, over all fences.
    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        self.fences.iter().map(|f| f.live).sum()
    }

    /// True when some fence holds entries of the process not taken yet.
    pub(crate) fn contains(&self, ns: u32, rank: Rank) -> bool {
        self.fences.iter().any(|f| f.find((ns, rank.0)).is_some())
    }

    /// Takes the process's entries out of every fence that has some, oldest first (each newer
    /// than the one before).
    pub(crate) fn take(&mut self, ns: u32, rank: Rank) -> Vec<Bytes> {
        let mut out = Vec::new();
        for f in &mut self.fences {
            if let Some(i) = f.find((ns, rank.0)) {
                out.push(f.take(i));
            }
        }
        self.fences.retain(|f| f.live > 0);
        out
    }

    /// Keeps a fence's `data` with `index` (a process listed twice keeps its last entries).
    /// Past [`MAX_FENCES`], returns the oldest fence's entries not taken yet, which the caller
    /// must decode before anything newer of those processes.
    pub(crate) fn add(&mut self, data: Bytes, mut index: Vec<Entry>) -> Vec<(u32, Rank, Bytes)> {
        // Stable: of a process listed twice, the later entry ends last and is kept.
        index.sort_by_key(Entry::key);
        index.reverse();
        index.dedup_by_key(|e| e.key());
        index.reverse();
        let mut spilled = Vec::new();
        if self.fences.len() >= MAX_FENCES {
            let mut oldest = self.fences.remove(0);
            for i in 0..oldest.index.len() {
                if oldest.index[i].len != TAKEN {
                    let (ns, rank) = oldest.index[i].key();
                    spilled.push((ns, Rank(rank), oldest.take(i)));
                }
            }
        }
        let live = index.len();
        if live > 0 {
            let runs = runs_of(&index);
            self.fences.push(Fence {
                data,
                index,
                runs,
                live,
            });
        }
        spilled
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn entry(ns: u32, rank: u32, start: usize, len: usize) -> Entry {
        Entry::new(ns, Rank(rank), &(start..start + len)).unwrap()
    }

    #[test]
    fn entries_are_found_taken_once_and_oldest_first() {
        let mut p = PackedFences::default();
        let a = Bytes::from_static(b"aaaabbbb");
        let b = Bytes::from_static(b"ccccdddd");
        assert!(
            p.add(a, vec![entry(0, 1, 4, 4), entry(0, 0, 0, 4)])
                .is_empty()
        );
        assert!(
            p.add(b, vec![entry(0, 1, 0, 4), entry(1, 1, 4, 4)])
                .is_empty()
        );
        assert!(p.contains(0, Rank(0)) && p.contains(0, Rank(1)) && p.contains(1, Rank(1)));
        assert!(!p.contains(1, Rank(0)));
        assert_eq!(p.take(0, Rank(1)), vec![&b"bbbb"[..], &b"cccc"[..]]);
        assert!(!p.contains(0, Rank(1)));
        assert!(p.take(0, Rank(1)).is_empty());
        assert_eq!(p.live(), 2);
        assert_eq!(p.take(0, Rank(0)), vec![&b"aaaa"[..]]);
        assert_eq!(p.take(1, Rank(1)), vec![&b"dddd"[..]]);
        assert!(p.is_empty(), "fences with nothing left are dropped");
    }

    #[test]
    fn past_the_bound_the_oldest_fence_is_handed_back() {
        let mut p = PackedFences::default();
        for round in 0..MAX_FENCES {
            let data = Bytes::from(vec![round as u8; 8]);
            assert!(
                p.add(data, vec![entry(0, 0, 0, 2), entry(0, 1, 2, 2)])
                    .is_empty()
            );
        }
        p.take(0, Rank(0));
        let spilled = p.add(Bytes::from(vec![9; 8]), vec![entry(0, 1, 0, 2)]);
        // Rank 0 was taken from every fence; rank 1 of the oldest comes back.
        assert_eq!(spilled, vec![(0, Rank(1), Bytes::from(vec![0u8; 2]))]);
        assert_eq!(p.take(0, Rank(1)).len(), MAX_FENCES);
    }

    #[test]
    fn runs_and_scattered_processes_are_found_alike() {
        // One run with a gap (this process's own rank left out), then many scattered ranks of
        // another namespace (past MAX_RUNS: binary search).
        let mut entries: Vec<Entry> = (0..100u32)
            .filter(|&r| r != 40)
            .map(|r| entry(0, r, r as usize, 1))
            .collect();
        entries.extend((0..20u32).map(|k| entry(1, k * 7, 100 + k as usize, 1)));
        let mut p = PackedFences::default();
        p.add(Bytes::from(vec![0u8; 200]), entries.clone());
        assert_eq!(p.fences[0].runs.len(), 0, "too scattered for runs");
        let mut q = PackedFences::default();
        q.add(Bytes::from(vec![0u8; 200]), entries[..99].to_vec());
        assert_eq!(q.fences[0].runs.len(), 2);
        for store in [&mut p, &mut q] {
            assert!(!store.contains(0, Rank(40)));
            assert!(!store.contains(0, Rank(100)));
            assert!(!store.contains(2, Rank(0)));
            for e in &entries[..99] {
                assert!(store.contains(e.ns, Rank(e.rank)), "{e:?}");
            }
            assert_eq!(store.take(0, Rank(41)).len(), 1);
            assert!(!store.contains(0, Rank(41)));
            assert!(store.contains(0, Rank(42)));
        }
        assert!(p.contains(1, Rank(7 * 19)) && !p.contains(1, Rank(8)));
    }

    #[test]
    fn a_process_listed_twice_keeps_its_last_entries() {
        let mut p = PackedFences::default();
        p.add(
            Bytes::from_static(b"xxyy"),
            vec![entry(0, 3, 0, 2), entry(0, 3, 2, 2)],
        );
        assert_eq!(p.take(0, Rank(3)), vec![&b"yy"[..]]);
    }
}
