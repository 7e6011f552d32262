//! The client's local store: job data of every namespace it has heard of, its own puts, and
//! the data of other processes that fences and gets brought in.
//!
//! Everything lives in one hash map keyed by `(namespace, level, id, key)`, where the level
//! says which realm the entry belongs to (session, job, app, node, proc — the information
//! levels of job data — or `Data`, a process's put data) and `id` is the app number, node id
//! or rank. A lookup at one level is exactly one probe, made with a borrowed
//! `(&str, level, u32, &str)` key through hashbrown's [`Equivalent`], so the hot path of Get
//! neither allocates nor hashes twice. Namespaces are interned, so the thousands of entries of
//! one job share one `Arc<str>`.
//!
//! Reserved (`pmix*`) keys and put keys never collide, but they are kept at different levels
//! anyway: job data is the server's word and never changes, put data is a cache.

use std::hash::{Hash, Hasher};

use hashbrown::{Equivalent, HashMap};
use pmix_types::{Info, Key, Nspace, Proc, Rank, Scope, Value, attr};
use pmix_wire::{JobData, ProcKvs};

/// Which realm an entry belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Level {
    Session,
    Job,
    App,
    Node,
    /// Per-rank job data (reserved keys the server registered for that rank).
    Proc,
    /// Hostname -> node id, so that a `HOSTNAME` qualifier is one probe too.
    HostIndex,
    /// A process's put data (own puts, or what fences and gets brought in).
    Data,
}

struct Slot {
    ns: Nspace,
    level: Level,
    id: u32,
    key: Key,
}

/// The borrowed form of [`Slot`]; hashes exactly like it.
#[derive(Clone, Copy)]
struct SlotRef<'a> {
    ns: &'a str,
    level: Level,
    id: u32,
    key: &'a str,
}

impl Hash for Slot {
    fn hash<H: Hasher>(&self, h: &mut H) {
        SlotRef {
            ns: self.ns.as_str(),
            level: self.level,
            id: self.id,
            key: self.key.as_str(),
        }
        .hash(h);
    }
}

impl Hash for SlotRef<'_> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        self.ns.hash(h);
        self.level.hash(h);
        self.id.hash(h);
        self.key.hash(h);
    }
}

impl PartialEq for Slot {
    fn eq(&self, o: &Slot) -> bool {
        self.level == o.level && self.id == o.id && self.key == o.key && self.ns == o.ns
    }
}
impl Eq for Slot {}

impl Equivalent<Slot> for SlotRef<'_> {
    fn equivalent(&self, k: &Slot) -> bool {
        self.level == k.level
            && self.id == k.id
            && self.key == k.key.as_str()
            && self.ns == k.ns.as_str()
    }
}

/// A stored value with the scope it was put with (job data counts as `GLOBAL`).
struct Entry {
    value: Value,
    scope: Scope,
}

/// The put data known for one process: its keys in arrival order (for a Get of all of its
/// data) and whether they are all of it.
#[derive(Default)]
struct ProcData {
    keys: Vec<Key>,
    /// Set when the data came whole from the server (fence collection, Get reply).
    complete: bool,
}

#[derive(PartialEq, Eq, Hash)]
struct ProcId {
    ns: Nspace,
    rank: Rank,
}

#[derive(Clone, Copy)]
struct ProcRef<'a> {
    ns: &'a str,
    rank: Rank,
}

impl Hash for ProcRef<'_> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        // Nspace hashes as its str; the derived Hash of ProcId hashes the fields in order.
        self.ns.hash(h);
        self.rank.hash(h);
    }
}

impl Equivalent<ProcId> for ProcRef<'_> {
    fn equivalent(&self, k: &ProcId) -> bool {
        self.rank == k.rank && self.ns == k.ns.as_str()
    }
}

/// The app and node of one rank, taken from its proc-level job data.
#[derive(Clone, Copy, Default)]
struct Realms {
    app: Option<u32>,
    node: Option<u32>,
}

/// Which level a Get of a reserved key was steered to by qualifiers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LevelSel {
    Session,
    Job,
    App,
    Node,
}

/// The parts of a Get's directives the store needs.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Qualifiers<'a> {
    pub(crate) level: Option<LevelSel>,
    pub(crate) appnum: Option<u32>,
    pub(crate) nodeid: Option<u32>,
    pub(crate) hostname: Option<&'a str>,
    /// `DATA_SCOPE`: only put data of a matching scope is returned.
    pub(crate) scope: Option<Scope>,
}

/// The answer of the store to a Get.
#[derive(Debug, PartialEq)]
pub(crate) enum Lookup {
    Found(Value),
    /// The store is authoritative and the key is not there.
    Missing,
    /// The store knows nothing definitive: job data of this namespace has not arrived, or put
    /// data of this process is not cached.
    Unknown,
}

/// True when a value put with `have` is selected by a `DATA_SCOPE` of `want`: `GLOBAL` data is
/// visible wherever local or remote data is.
fn scope_matches(want: Option<Scope>, have: Scope) -> bool {
    match want {
        None => true,
        Some(w) if w == Scope::UNDEF || w == Scope::GLOBAL => true,
        Some(w) if w == Scope::LOCAL || w == Scope::REMOTE => {
            have == w || have == Scope::GLOBAL || have == Scope::UNDEF
        }
        Some(w) => have == w,
    }
}

/// See the module documentation.
#[derive(Default)]
pub(crate) struct Store {
    map: HashMap<Slot, Entry>,
    /// Interned namespaces; the flag says whether their job data has arrived.
    nspaces: HashMap<Nspace, bool>,
    procs: HashMap<ProcId, ProcData>,
    /// App and node of every rank whose job data named them.
    realms: HashMap<ProcId, Realms>,
}

impl Store {
    fn intern(&mut self, ns: &Nspace) -> Nspace {
        match self.nspaces.get_key_value(ns.as_str()) {
            Some((k, _)) => k.clone(),
            None => {
                self.nspaces.insert(ns.clone(), false);
                ns.clone()
            }
        }
    }

    fn get(&self, ns: &str, level: Level, id: u32, key: &str) -> Option<&Entry> {
        self.map.get(&SlotRef { ns, level, id, key })
    }

    /// True when the job data of `ns` has arrived, which makes the store authoritative for
    /// its reserved keys.
    pub(crate) fn has_job(&self, ns: &str) -> bool {
        self.nspaces.get(ns).copied().unwrap_or(false)
    }

    /// Takes in a namespace's job data. Arriving again (it is shipped with replies too) it
    /// replaces the earlier copy entry by entry; it never changes after registration anyway.
    pub(crate) fn insert_job(&mut self, job: JobData) {
        let ns = self.intern(&job.nspace);
        self.nspaces.insert(ns.clone(), true);
        let mut put = |level: Level, id: u32, infos: Vec<Info>| {
            for info in infos {
                if level == Level::Node && info.key.as_str() == attr::HOSTNAME {
                    if let Some(Ok(host)) = info.value.as_str().map(Key::new) {
                        self.map.insert(
                            Slot {
                                ns: ns.clone(),
                                level: Level::HostIndex,
                                id: 0,
                                key: host,
                            },
                            Entry {
                                value: Value::Uint32(id),
                                scope: Scope::GLOBAL,
                            },
                        );
                    }
                }
                self.map.insert(
                    Slot {
                        ns: ns.clone(),
                        level,
                        id,
                        key: info.key,
                    },
                    Entry {
                        value: info.value,
                        scope: Scope::GLOBAL,
                    },
                );
            }
        };
        put(Level::Session, 0, job.session);
        put(Level::Job, 0, job.job);
        for app in job.apps {
            put(Level::App, app.id, app.info);
        }
        for node in job.nodes {
            put(Level::Node, node.id, node.info);
        }
        for p in job.procs {
            let mut r = Realms::default();
            for i in &p.info {
                match i.key.as_str() {
                    attr::APPNUM => r.app = i.value.as_u32(),
                    attr::NODEID => r.node = i.value.as_u32(),
                    _ => {}
                }
            }
            if r.app.is_some() || r.node.is_some() {
                self.realms.insert(
                    ProcId {
                        ns: ns.clone(),
                        rank: p.rank,
                    },
                    r,
                );
            }
            put(Level::Proc, p.rank.0, p.info);
        }
    }

    /// Records one put value of `proc`, replacing an earlier value of the key.
    pub(crate) fn insert_data(&mut self, proc: &Proc, key: Key, value: Value, scope: Scope) {
        let ns = self.intern(&proc.nspace);
        let slot = Slot {
            ns: ns.clone(),
            level: Level::Data,
            id: proc.rank.0,
            key,
        };
        let new_key = slot.key.clone();
        if self.map.insert(slot, Entry { value, scope }).is_none() {
            self.procs
                .entry(ProcId {
                    ns,
                    rank: proc.rank,
                })
                .or_default()
                .keys
                .push(new_key);
        }
    }

    /// Takes in the whole put data of some processes, as a fence or a Get reply carries it.
    pub(crate) fn insert_proc_kvs(&mut self, data: Vec<ProcKvs>) {
        for pk in data {
            for kv in pk.kvs {
                self.insert_data(&pk.proc, kv.key, kv.value, kv.scope);
            }
            let ns = self.intern(&pk.proc.nspace);
            self.procs
                .entry(ProcId {
                    ns,
                    rank: pk.proc.rank,
                })
                .or_default()
                .complete = true;
        }
    }

    /// Looks a put key of a process up.
    pub(crate) fn get_data(&self, proc: &Proc, key: &str, scope: Option<Scope>) -> Option<Value> {
        self.get(proc.nspace.as_str(), Level::Data, proc.rank.0, key)
            .filter(|e| scope_matches(scope, e.scope))
            .map(|e| e.value.clone())
    }

    /// All put data of a process as info entries, if the store holds all of it (or `force`,
    /// for the caller's own data, which is always whole here).
    pub(crate) fn all_data(
        &self,
        proc: &Proc,
        scope: Option<Scope>,
        force: bool,
    ) -> Option<Vec<Info>> {
        let pd = self.procs.get(&ProcRef {
            ns: proc.nspace.as_str(),
            rank: proc.rank,
        });
        let Some(pd) = pd else {
            return force.then(Vec::new);
        };
        if !pd.complete && !force {
            return None;
        }
        Some(
            pd.keys
                .iter()
                .filter_map(|k| {
                    let e = self.get(proc.nspace.as_str(), Level::Data, proc.rank.0, k.as_str())?;
                    scope_matches(scope, e.scope).then(|| Info::new(k.clone(), e.value.clone()))
                })
                .collect(),
        )
    }

    fn level_value(&self, ns: &str, level: Level, id: u32, key: &str) -> Option<Value> {
        self.get(ns, level, id, key).map(|e| e.value.clone())
    }

    /// The app number and node id of a rank: registered at its proc level, else at the job
    /// level (a job of one app on one node may register them only there). One probe for
    /// both in the usual case.
    fn realms_of(&self, ns: &str, rank: Rank) -> Realms {
        let mut r = if rank.is_valid() {
            self.realms
                .get(&ProcRef { ns, rank })
                .copied()
                .unwrap_or_default()
        } else {
            Realms::default()
        };
        if r.app.is_none() {
            r.app = self
                .get(ns, Level::Job, 0, attr::APPNUM)
                .and_then(|e| e.value.as_u32());
        }
        if r.node.is_none() {
            r.node = self
                .get(ns, Level::Job, 0, attr::NODEID)
                .and_then(|e| e.value.as_u32());
        }
        r
    }

    /// Resolves a reserved key (docs/PROTOCOL.md, "Get"). `own_rank` stands in for a
    /// WILDCARD target when an app or node qualifier names no realm: it is the caller's rank
    /// if the namespace is the caller's.
    pub(crate) fn get_reserved(
        &self,
        ns: &str,
        rank: Rank,
        key: &str,
        q: &Qualifiers<'_>,
        own_rank: Option<Rank>,
    ) -> Lookup {
        let who = if rank.is_valid() {
            rank
        } else {
            own_rank.unwrap_or(rank)
        };
        let found = match q.level {
            Some(LevelSel::Session) => self.level_value(ns, Level::Session, 0, key),
            Some(LevelSel::Job) => self.level_value(ns, Level::Job, 0, key),
            Some(LevelSel::App) => q
                .appnum
                .or_else(|| self.realms_of(ns, who).app)
                .and_then(|a| self.level_value(ns, Level::App, a, key)),
            Some(LevelSel::Node) => q
                .nodeid
                .or_else(|| {
                    let h = q.hostname?;
                    self.get(ns, Level::HostIndex, 0, h)?.value.as_u32()
                })
                .or_else(|| self.realms_of(ns, who).node)
                .and_then(|n| self.level_value(ns, Level::Node, n, key)),
            None if rank == Rank::WILDCARD => self
                .level_value(ns, Level::Job, 0, key)
                .or_else(|| self.level_value(ns, Level::Session, 0, key)),
            None if rank.is_valid() => {
                self.level_value(ns, Level::Proc, rank.0, key).or_else(|| {
                    let r = self.realms_of(ns, rank);
                    r.app
                        .and_then(|a| self.level_value(ns, Level::App, a, key))
                        .or_else(|| {
                            r.node
                                .and_then(|n| self.level_value(ns, Level::Node, n, key))
                        })
                        .or_else(|| self.level_value(ns, Level::Job, 0, key))
                })
            }
            // Other reserved ranks (LOCAL_NODE, UNDEF, ...) name sets; only the job level
            // answers for a set.
            None => self.level_value(ns, Level::Job, 0, key),
        };
        match found {
            Some(v) => Lookup::Found(v),
            // Checked only on a miss, so that a hit costs one probe.
            None if self.has_job(ns) => Lookup::Missing,
            None => Lookup::Unknown,
        }
    }

    /// A non-reserved key asked of rank WILDCARD: job-level data registered by the host
    /// under a user key, if any.
    pub(crate) fn get_job_user_key(&self, ns: &str, key: &str) -> Option<Value> {
        self.level_value(ns, Level::Job, 0, key)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pmix_wire::{Kv, ProcRealm, Realm};
    use std::hash::BuildHasher;

    fn key(s: &str) -> Key {
        Key::new(s).unwrap()
    }

    #[test]
    fn borrowed_and_owned_slots_hash_alike() {
        let b = hashbrown::DefaultHashBuilder::default();
        let owned = Slot {
            ns: Nspace::new("job").unwrap(),
            level: Level::Data,
            id: 7,
            key: key("k"),
        };
        let borrowed = SlotRef {
            ns: "job",
            level: Level::Data,
            id: 7,
            key: "k",
        };
        assert_eq!(b.hash_one(&owned), b.hash_one(borrowed));
        // The boundary between the namespace and the key must matter.
        let shifted = SlotRef {
            ns: "jo",
            level: Level::Data,
            id: 7,
            key: "bk",
        };
        assert_ne!(b.hash_one(&owned), b.hash_one(shifted));
        let p = ProcId {
            ns: Nspace::new("job").unwrap(),
            rank: Rank(3),
        };
        assert_eq!(
            b.hash_one(&p),
            b.hash_one(ProcRef {
                ns: "job",
                rank: Rank(3)
            })
        );
    }

    #[test]
    fn namespaces_are_interned() {
        let mut s = Store::default();
        let p1 = Proc::new(Nspace::new("job").unwrap(), 1);
        let p2 = Proc::new(Nspace::new("job").unwrap(), 2);
        s.insert_data(&p1, key("a"), Value::Bool(true), Scope::GLOBAL);
        s.insert_data(&p2, key("a"), Value::Bool(true), Scope::GLOBAL);
        let arcs: Vec<_> = s.map.keys().map(|k| k.ns.as_str().as_ptr()).collect();
        assert_eq!(arcs[0], arcs[1]);
    }

    #[test]
    fn replacing_a_key_does_not_duplicate_it_in_the_index() {
        let mut s = Store::default();
        let p = Proc::new(Nspace::new("job").unwrap(), 1);
        s.insert_proc_kvs(vec![ProcKvs {
            proc: p.clone(),
            kvs: vec![
                Kv {
                    scope: Scope::GLOBAL,
                    key: key("a"),
                    value: Value::Uint8(1),
                },
                Kv {
                    scope: Scope::LOCAL,
                    key: key("a"),
                    value: Value::Uint8(2),
                },
            ],
        }]);
        let all = s.all_data(&p, None, false).unwrap();
        assert_eq!(all, vec![Info::new(key("a"), Value::Uint8(2))]);
        assert_eq!(s.all_data(&p, Some(Scope::REMOTE), false).unwrap(), vec![]);
    }

    #[test]
    fn hostname_qualifier_finds_the_node() {
        let mut s = Store::default();
        let ns = Nspace::new("job").unwrap();
        s.insert_job(JobData {
            nspace: ns.clone(),
            session: vec![],
            job: vec![],
            apps: vec![],
            nodes: vec![Realm {
                id: 4,
                info: vec![
                    Info::new(key(attr::HOSTNAME), "n4"),
                    Info::new(key("pmix.local.size"), Value::Uint32(2)),
                ],
            }],
            procs: vec![ProcRealm {
                rank: Rank(0),
                info: vec![],
            }],
        });
        let q = Qualifiers {
            level: Some(LevelSel::Node),
            hostname: Some("n4"),
            ..Qualifiers::default()
        };
        assert_eq!(
            s.get_reserved("job", Rank::WILDCARD, "pmix.local.size", &q, None),
            Lookup::Found(Value::Uint32(2))
        );
    }
}
