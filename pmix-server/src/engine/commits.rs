//! Which processes' data is here and how new it is: a process is "committed" once it
//! committed on this node or its data came from another, numbered by a sequence that counts
//! commits (collecting fences hand each waiter what was committed since its last one), and,
//! of the local processes, when their data last went to other nodes in a fence's
//! contribution (a barrier sends only what they stored since).

use std::collections::HashMap;

use pmix_types::{Rank, Scope};
use pmix_wire::{Kv, ProcKvs};

use super::nspaces::Nspaces;
use super::store::{NsId, Store};

/// A process, by the engine's number for its namespace and its rank.
type Key = (NsId, Rank);

#[derive(Default)]
pub(crate) struct Commits {
    /// Processes whose data is here, with the sequence number of their latest commit.
    committed: HashMap<Key, u64>,
    /// Of the local processes, the store's sequence number ([`super::store::Store::seq`])
    /// when their data was last sent to other nodes.
    shipped: HashMap<Key, u64>,
    /// The sequence number of the latest commit.
    seq: u64,
}

impl Commits {
    /// `p` committed, or its data arrived from another node: its latest commit is now.
    pub(crate) fn record(&mut self, p: Key) {
        self.seq += 1;
        self.committed.insert(p, self.seq);
    }

    /// Whether `p`'s data is here.
    pub(crate) fn has(&self, p: &Key) -> bool {
        self.committed.contains_key(p)
    }

    /// The sequence number of `p`'s latest commit.
    pub(crate) fn of(&self, p: &Key) -> Option<u64> {
        self.committed.get(p).copied()
    }

    /// The sequence number of the latest commit of any process.
    pub(crate) fn latest(&self) -> u64 {
        self.seq
    }

    /// `p`'s data, as the store had it at `at`, goes to other nodes now; when it last did.
    pub(crate) fn ship(&mut self, p: Key, at: u64) -> Option<u64> {
        self.shipped.insert(p, at)
    }

    /// `p` was started again: what its earlier life committed is no longer its data.
    pub(crate) fn forget(&mut self, p: &Key) {
        self.committed.remove(p);
        self.shipped.remove(p);
    }

    /// The namespace `id` is gone: so is what is known of its processes.
    pub(crate) fn purge_nspace(&mut self, id: NsId) {
        self.committed.retain(|(n, _), _| *n != id);
        self.shipped.retain(|(n, _), _| *n != id);
        self.committed.shrink_to_fit();
    }

    /// Stores data that came from other nodes (through the host) so that later gets are
    /// served here; returns the processes it belonged to.
    pub(super) fn store_remote(
        &mut self,
        data: &[ProcKvs],
        nspaces: &Nspaces,
        store: &mut Store,
    ) -> Vec<(NsId, Rank)> {
        let mut arrived = Vec::with_capacity(data.len());
        for pk in data {
            if let Some(ns) = nspaces.id(pk.proc.nspace.as_str()) {
                for kv in &pk.kvs {
                    store.put(ns, pk.proc.rank, kv.key.clone(), kv.scope, kv.value.clone());
                }
                self.record((ns, pk.proc.rank));
                arrived.push((ns, pk.proc.rank));
            }
        }
        arrived
    }

    /// A client's commit of `kvs` as process `p`: stored (internal-scope values aside) and
    /// recorded, unless one of the keys is reserved (returned; nothing is stored).
    pub(super) fn commit(
        &mut self,
        p: Key,
        kvs: Vec<Kv>,
        store: &mut Store,
    ) -> Result<(), pmix_types::Key> {
        if let Some(bad) = kvs.iter().find(|kv| kv.key.is_reserved()) {
            return Err(bad.key.clone());
        }
        let (ns, rank) = p;
        for kv in kvs {
            if kv.scope != Scope::INTERNAL {
                store.put(ns, rank, kv.key, kv.scope, kv.value);
            }
        }
        self.record(p);
        Ok(())
    }
}
