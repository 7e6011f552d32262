//! The key/value store of RFC0009: one hash map keyed by (namespace, rank, key).
//!
//! Namespaces are interned to a `u32` so that a lookup key is three words and a `&str`; a probe
//! hashes a borrowed [`Probe`] that is [`Equivalent`] to the stored key, so a Get costs exactly
//! one probe and no allocation. Each process also keeps the list of its keys, in put order, so
//! that "all of this process's data" (the reply that makes a client's next Get local) is a walk
//! over its entries without scanning the map, and a log of its puts, so that "what it put since
//! the last fence" (what a PMI-1 barrier ships) is a walk over those puts only: a barrier late
//! in a run that stored thousands of keys costs what changed, not what is stored.

use std::hash::{Hash, Hasher};

use hashbrown::{Equivalent, HashMap};
use pmix_types::{Key, Rank, Scope, Value};
use pmix_wire::Kv;

/// Interned namespace id.
pub(crate) type NsId = u32;

#[derive(Clone, PartialEq, Eq)]
struct StoreKey {
    ns: NsId,
    rank: Rank,
    key: Key,
}

impl Hash for StoreKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        // Must hash exactly like `Probe`, which is what makes the borrowed lookup valid.
        self.ns.hash(h);
        self.rank.0.hash(h);
        self.key.as_str().hash(h);
    }
}

/// A borrowed lookup key.
struct Probe<'a> {
    ns: NsId,
    rank: Rank,
    key: &'a str,
}

impl Hash for Probe<'_> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.ns.hash(h);
        self.rank.0.hash(h);
        self.key.hash(h);
    }
}

impl Equivalent<StoreKey> for Probe<'_> {
    fn equivalent(&self, k: &StoreKey) -> bool {
        self.ns == k.ns && self.rank == k.rank && self.key == k.key.as_str()
    }
}

/// One stored value with the scope it was put with.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Entry {
    pub(crate) scope: Scope,
    pub(crate) value: Value,
    /// When it was stored: [`Store::seq`] right after.
    seq: u64,
    /// Its key's place in its process's [`ProcKeys::keys`].
    idx: u32,
}

/// One process's keys and puts.
#[derive(Default)]
struct ProcKeys {
    /// Its keys, in first-put order.
    keys: Vec<Key>,
    /// Its puts in order: the store's sequence number after each and the key's place in
    /// `keys`. A key put again appears again (its earlier puts are stale: their number is not
    /// its entry's); compacted to one put per key when stale ones are the majority, so it
    /// holds at most about twice as many puts as keys.
    log: Vec<(u64, u32)>,
}

impl ProcKeys {
    /// Records a put; compacts the log when most of it is stale (`seq_of` gives a key's
    /// current number).
    fn logged(&mut self, seq: u64, idx: u32, seq_of: impl Fn(&Key) -> u64) {
        self.log.push((seq, idx));
        if self.log.len() > 2 * self.keys.len() + 16 {
            let mut fresh: Vec<(u64, u32)> = (0u32..)
                .zip(&self.keys)
                .map(|(i, k)| (seq_of(k), i))
                .collect();
            fresh.sort_unstable();
            self.log = fresh;
        }
    }
}

/// The committed data of every process this server knows.
#[derive(Default)]
pub(crate) struct Store {
    map: HashMap<StoreKey, Entry>,
    /// Keys and puts of each process.
    keys: HashMap<(NsId, Rank), ProcKeys>,
    /// For a Get that names no rank (`RANK_UNDEF`): the first process of a namespace that
    /// stored each key.
    owners: HashMap<OwnerKey, Rank>,
    /// Puts so far, each entry stamped with it.
    seq: u64,
}

#[derive(PartialEq, Eq)]
struct OwnerKey {
    ns: NsId,
    key: Key,
}

impl Hash for OwnerKey {
    fn hash<H: Hasher>(&self, h: &mut H) {
        // Must hash exactly like `OwnerProbe`.
        self.ns.hash(h);
        self.key.as_str().hash(h);
    }
}

struct OwnerProbe<'a> {
    ns: NsId,
    key: &'a str,
}

impl Hash for OwnerProbe<'_> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.ns.hash(h);
        self.key.hash(h);
    }
}

impl Equivalent<OwnerKey> for OwnerProbe<'_> {
    fn equivalent(&self, k: &OwnerKey) -> bool {
        self.ns == k.ns && self.key == k.key.as_str()
    }
}

impl Store {
    /// Stores (or replaces) a value.
    pub(crate) fn put(&mut self, ns: NsId, rank: Rank, key: Key, scope: Scope, value: Value) {
        let probe = Probe {
            ns,
            rank,
            key: key.as_str(),
        };
        self.seq += 1;
        let seq = self.seq;
        let procs = self.keys.entry((ns, rank)).or_default();
        let idx = match self.map.get_mut(&probe) {
            Some(e) => {
                let idx = e.idx;
                *e = Entry {
                    scope,
                    value,
                    seq,
                    idx,
                };
                idx
            }
            None => {
                let idx = u32::try_from(procs.keys.len()).unwrap_or(u32::MAX);
                procs.keys.push(key.clone());
                let owner = OwnerProbe {
                    ns,
                    key: key.as_str(),
                };
                if self.owners.get(&owner).is_none() {
                    self.owners.insert(
                        OwnerKey {
                            ns,
                            key: key.clone(),
                        },
                        rank,
                    );
                }
                self.map.insert(
                    StoreKey { ns, rank, key },
                    Entry {
                        scope,
                        value,
                        seq,
                        idx,
                    },
                );
                idx
            }
        };
        let map = &self.map;
        procs.logged(seq, idx, |k| {
            let probe = Probe {
                ns,
                rank,
                key: k.as_str(),
            };
            map.get(&probe).map_or(0, |e| e.seq)
        });
    }

    /// One probe.
    pub(crate) fn get(&self, ns: NsId, rank: Rank, key: &str) -> Option<&Entry> {
        self.map.get(&Probe { ns, rank, key })
    }

    /// The first process of namespace `ns` that stored `key` (one probe).
    pub(crate) fn owner(&self, ns: NsId, key: &str) -> Option<Rank> {
        self.owners.get(&OwnerProbe { ns, key }).copied()
    }

    /// True if the process has stored anything.
    #[cfg(test)]
    pub(crate) fn has_proc(&self, ns: NsId, rank: Rank) -> bool {
        self.keys.contains_key(&(ns, rank))
    }

    /// All data of one process whose scope passes `visible`, in put order.
    pub(crate) fn proc_kvs(
        &self,
        ns: NsId,
        rank: Rank,
        visible: impl Fn(Scope) -> bool,
    ) -> Vec<Kv> {
        self.proc_kvs_since(ns, rank, 0, visible)
    }

    /// The number of puts so far: what [`Store::proc_kvs_since`] takes to mean "now".
    pub(crate) fn seq(&self) -> u64 {
        self.seq
    }

    /// What one process stored (or stored again) after [`Store::seq`] was `since`, whose
    /// scope passes `visible`, in put order.
    pub(crate) fn proc_kvs_since(
        &self,
        ns: NsId,
        rank: Rank,
        since: u64,
        visible: impl Fn(Scope) -> bool,
    ) -> Vec<Kv> {
        let Some(procs) = self.keys.get(&(ns, rank)) else {
            return Vec::new();
        };
        if since == 0 {
            return procs
                .keys
                .iter()
                .filter_map(|k| {
                    let e = self.get(ns, rank, k.as_str())?;
                    visible(e.scope).then(|| Kv {
                        scope: e.scope,
                        key: k.clone(),
                        value: e.value.clone(),
                    })
                })
                .collect();
        }
        // The puts after `since` are the log's tail; a key's latest put is the one whose
        // number is its entry's. Given back in first-put order, as a walk over every key would.
        let first = procs.log.partition_point(|&(seq, _)| seq <= since);
        let mut fresh: Vec<(u32, Kv)> = procs.log[first..]
            .iter()
            .filter_map(|&(seq, idx)| {
                let k = procs.keys.get(idx as usize)?;
                let e = self.get(ns, rank, k.as_str()).filter(|e| e.seq == seq)?;
                visible(e.scope).then(|| {
                    let kv = Kv {
                        scope: e.scope,
                        key: k.clone(),
                        value: e.value.clone(),
                    };
                    (idx, kv)
                })
            })
            .collect();
        fresh.sort_unstable_by_key(|(idx, _)| *idx);
        fresh.into_iter().map(|(_, kv)| kv).collect()
    }

    /// Removes every value of one process. A key it was the first to store is then owned by
    /// the lowest other rank of its namespace that stored it, if any.
    pub(crate) fn purge_proc(&mut self, ns: NsId, rank: Rank) {
        let Some(procs) = self.keys.remove(&(ns, rank)) else {
            return;
        };
        for key in procs.keys {
            let probe = OwnerProbe {
                ns,
                key: key.as_str(),
            };
            let owned = self.owners.get(&probe) == Some(&rank);
            let other = owned
                .then(|| {
                    self.keys
                        .keys()
                        .filter(|(n, r)| *n == ns && self.get(ns, *r, key.as_str()).is_some())
                        .map(|(_, r)| *r)
                        .min()
                })
                .flatten();
            let owner = OwnerKey {
                ns,
                key: key.clone(),
            };
            match other {
                Some(r) => {
                    self.owners.insert(owner, r);
                }
                None if owned => {
                    self.owners.remove(&owner);
                }
                None => {}
            }
            self.map.remove(&StoreKey { ns, rank, key });
        }
    }

    /// Removes every value of a namespace and gives the memory back.
    pub(crate) fn purge_nspace(&mut self, ns: NsId) {
        self.map.retain(|k, _| k.ns != ns);
        self.keys.retain(|(n, _), _| *n != ns);
        self.owners.retain(|k, _| k.ns != ns);
        self.map.shrink_to_fit();
        self.keys.shrink_to_fit();
        self.owners.shrink_to_fit();
    }

    /// Number of stored values.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}

/// Whether data put with `scope` by `owner` is visible to `reader`, given whether they share
/// a node.
pub(super) fn visible(scope: Scope, same_node: bool) -> bool {
    match scope {
        Scope::LOCAL => same_node,
        Scope::REMOTE => !same_node,
        Scope::INTERNAL => false,
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use pmix_types::{Key, Rank, Scope, Value};
    use pmix_wire::Kv;

    use super::Store;

    /// What was put since a point, against a model that walks every key (what the store did
    /// before it kept a log of puts), over a long pseudo-random run of puts and re-puts of
    /// three processes; the log stays within about twice the keys.
    #[test]
    fn puts_since_a_point_match_a_walk_over_every_key() {
        let mut s = Store::default();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        let mut marks = vec![0u64];
        for round in 0..3000u32 {
            let rank = Rank(u32::try_from(next(3)).unwrap());
            let key = Key::new(format!("k{}", next(40))).unwrap();
            let scope = if next(5) == 0 {
                Scope::LOCAL
            } else {
                Scope::GLOBAL
            };
            s.put(1, rank, key, scope, Value::Uint32(round));
            if next(50) == 0 {
                marks.push(s.seq());
            }
        }
        for &since in &marks {
            for r in 0..3 {
                let fast = s.proc_kvs_since(1, Rank(r), since, |sc| sc != Scope::LOCAL);
                let walk: Vec<Kv> = s.keys[&(1, Rank(r))]
                    .keys
                    .iter()
                    .filter_map(|k| {
                        let e = s.get(1, Rank(r), k.as_str())?;
                        (e.seq > since && e.scope != Scope::LOCAL).then(|| Kv {
                            scope: e.scope,
                            key: k.clone(),
                            value: e.value.clone(),
                        })
                    })
                    .collect();
                assert_eq!(fast, walk, "rank {r} since {since}");
            }
        }
        for p in s.keys.values() {
            assert!(p.log.len() <= 2 * p.keys.len() + 17, "{}", p.log.len());
        }
    }

    #[test]
    fn put_replaces_and_keeps_order() {
        let mut s = Store::default();
        let k = |s: &str| Key::new(s).unwrap();
        s.put(1, Rank(0), k("a"), Scope::GLOBAL, Value::Uint32(1));
        s.put(1, Rank(0), k("b"), Scope::LOCAL, Value::Uint32(2));
        s.put(1, Rank(0), k("a"), Scope::REMOTE, Value::Uint32(3));
        assert_eq!(s.get(1, Rank(0), "a").unwrap().value, Value::Uint32(3));
        assert!(s.get(1, Rank(1), "a").is_none());
        assert!(s.get(2, Rank(0), "a").is_none());
        let all = s.proc_kvs(1, Rank(0), |_| true);
        assert_eq!(
            all.iter().map(|kv| kv.key.as_str()).collect::<Vec<_>>(),
            ["a", "b"]
        );
        let remote_hidden = s.proc_kvs(1, Rank(0), |sc| sc != Scope::REMOTE);
        assert_eq!(remote_hidden.len(), 1);
        s.put(1, Rank(4), k("b"), Scope::GLOBAL, Value::Uint32(4));
        s.put(2, Rank(5), k("b"), Scope::GLOBAL, Value::Uint32(5));
        assert_eq!(s.owner(1, "a"), Some(Rank(0)));
        assert_eq!(s.owner(1, "b"), Some(Rank(0)), "the first to store it");
        assert_eq!(s.owner(2, "b"), Some(Rank(5)));
        assert_eq!(s.owner(1, "c"), None);
        s.purge_nspace(1);
        assert_eq!(s.owner(1, "a"), None);
        assert_eq!(s.owner(2, "b"), Some(Rank(5)));
        s.purge_nspace(2);
        assert_eq!(s.len(), 0);
        assert!(!s.has_proc(1, Rank(0)));
    }

    #[test]
    fn purging_a_process_forgets_its_values_and_hands_its_keys_on() {
        let mut s = Store::default();
        let k = |s: &str| Key::new(s).unwrap();
        s.put(1, Rank(1), k("a"), Scope::GLOBAL, Value::Uint32(1));
        s.put(1, Rank(3), k("a"), Scope::GLOBAL, Value::Uint32(3));
        s.put(1, Rank(2), k("a"), Scope::GLOBAL, Value::Uint32(2));
        s.put(1, Rank(1), k("b"), Scope::GLOBAL, Value::Uint32(1));
        s.put(2, Rank(1), k("a"), Scope::GLOBAL, Value::Uint32(9));
        s.purge_proc(1, Rank(1));
        assert!(!s.has_proc(1, Rank(1)));
        assert!(s.get(1, Rank(1), "a").is_none());
        assert!(s.proc_kvs(1, Rank(1), |_| true).is_empty());
        assert_eq!(s.owner(1, "a"), Some(Rank(2)));
        assert_eq!(s.owner(1, "b"), None);
        assert_eq!(s.owner(2, "a"), Some(Rank(1)));
        assert_eq!(s.len(), 3);
        s.purge_proc(1, Rank(1));
        s.put(1, Rank(1), k("b"), Scope::GLOBAL, Value::Uint32(5));
        assert_eq!(s.owner(1, "b"), Some(Rank(1)));
        assert_eq!(s.get(1, Rank(1), "b").unwrap().value, Value::Uint32(5));
    }
}
