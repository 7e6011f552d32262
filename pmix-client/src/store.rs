//! The client's local store: job data of every namespace it has heard of, its own puts, and
//! the data of other processes that fences and gets brought in.
//!
//! A namespace's job data is its [`JobImage`], kept whole (mapped from the server's memory
//! file, or as the bytes that came inline): node and process values are read from it, and
//! derived from its maps, when a get asks for them, so a client of a job of a million ranks
//! holds a few hundred kilobytes it shares with its node's other clients, not a realm per rank.
//! The small levels (session, job, apps) and everything else live in one hash map keyed by
//! `(namespace, level, id, key)`, where the level says which realm the entry belongs to
//! (session, job, app, or `Data`, a process's put data) and `id` is the app number or rank. A
//! lookup at one level is exactly one probe, made with a borrowed `(&str, level, u32, &str)`
//! key through hashbrown's [`Equivalent`], so the hot path of Get neither allocates nor hashes
//! twice. Namespaces are interned, so the entries of one job share one `Arc<str>`.
//!
//! Reserved (`pmix*`) keys and put keys never collide, but they are kept at different levels
//! anyway: job data is the server's word and never changes, put data is a cache.
//!
//! What a collecting fence brings is kept as it arrived, one shared copy of the encoded data
//! with each process's byte range ([`Store::insert_fence`]), and a process's entries are
//! decoded into the map only when a get first asks for that process ([`Store::unpack`]). A
//! fence over a job then costs a client one copy and one pass over the bytes, not an
//! allocation per key of every participant, most of which it may never read.

use std::hash::{Hash, Hasher};

use bytes::Bytes;
use hashbrown::{Equivalent, HashMap};
use pmix_types::{Info, Key, Nspace, Proc, Rank, Scope, Value, attr};
use pmix_wire::{FenceReplyRef, JobData, JobImage, ProcKvs};

use crate::fence_data::{self, PackedFences};

/// Which realm an entry belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Level {
    Session,
    Job,
    App,
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

/// What the store knows of a namespace besides its name.
#[derive(Clone, Copy)]
struct NsState {
    /// A small number of its own, for keys that need not hash the name.
    id: u32,
    /// Its job data has arrived.
    has_job: bool,
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
    /// Interned namespaces.
    nspaces: HashMap<Nspace, NsState>,
    /// The same, by [`NsState::id`].
    by_id: Vec<Nspace>,
    procs: HashMap<ProcId, ProcData>,
    /// The job image of each namespace whose job data arrived.
    images: HashMap<Nspace, JobImage>,
    /// This process. Copies of its committed data that replies carry back are not taken in:
    /// what it put since is newer, and its internal values were never sent.
    me: Option<Proc>,
    /// What collecting fences brought that no get has needed yet, by process
    /// (`fence_data.rs`), newer than what the map holds of those processes.
    packed: PackedFences,
}

impl Store {
    fn intern(&mut self, ns: &Nspace) -> Nspace {
        match self.nspaces.get_key_value(ns.as_str()) {
            Some((k, _)) => k.clone(),
            None => {
                self.add_nspace(ns.clone());
                ns.clone()
            }
        }
    }

    fn add_nspace(&mut self, ns: Nspace) -> u32 {
        let id = u32::try_from(self.by_id.len()).unwrap_or(u32::MAX);
        self.by_id.push(ns.clone());
        self.nspaces.insert(ns, NsState { id, has_job: false });
        id
    }

    /// The id of a namespace named by the server, which is checked if it is new here.
    fn ns_id_of(&mut self, ns: &str) -> Result<u32, pmix_types::Error> {
        match self.nspaces.get(ns) {
            Some(st) => Ok(st.id),
            None => Ok(self.add_nspace(Nspace::new(ns)?)),
        }
    }

    /// Records which process this store belongs to (see [`Store::insert_proc_kvs`]).
    pub(crate) fn set_me(&mut self, me: Proc) {
        self.me = Some(me);
    }

    /// This process, once [`Store::set_me`] has run.
    pub(crate) fn me(&self) -> Option<&Proc> {
        self.me.as_ref()
    }

    fn get(&self, ns: &str, level: Level, id: u32, key: &str) -> Option<&Entry> {
        self.map.get(&SlotRef { ns, level, id, key })
    }

    /// True when the job data of `ns` has arrived, which makes the store authoritative for
    /// its reserved keys.
    pub(crate) fn has_job(&self, ns: &str) -> bool {
        self.nspaces.get(ns).is_some_and(|st| st.has_job)
    }

    /// Takes in a namespace's job data as another server expanded it (a connect's, a get's).
    pub(crate) fn insert_job(&mut self, job: JobData) {
        match JobImage::from_job_data(&job) {
            Ok(image) => self.insert_image(image),
            Err(e) => tracing::warn!("pmix-client: job data of {} unusable: {e}", job.nspace),
        }
    }

    /// Takes in a namespace's job image. Arriving again (it is shipped with replies too) it
    /// replaces the earlier one; it never changes after registration anyway.
    pub(crate) fn insert_image(&mut self, image: JobImage) {
        let ns = self.intern(image.nspace());
        if let Some(st) = self.nspaces.get_mut(ns.as_str()) {
            st.has_job = true;
        }
        let mut put = |level: Level, id: u32, infos: &[Info]| {
            for info in infos {
                self.map.insert(
                    Slot {
                        ns: ns.clone(),
                        level,
                        id,
                        key: info.key.clone(),
                    },
                    Entry {
                        value: info.value.clone(),
                        scope: Scope::GLOBAL,
                    },
                );
            }
        };
        put(Level::Session, 0, image.session());
        put(Level::Job, 0, image.job());
        for app in image.apps() {
            put(Level::App, app.id, &app.info);
        }
        self.images.insert(ns, image);
    }

    fn image(&self, ns: &str) -> Option<&JobImage> {
        self.images.get(ns)
    }

    fn node_value(&self, ns: &str, id: u32, key: &str) -> Option<Value> {
        self.image(ns)?.node_value(id, key)
    }

    fn proc_value(&self, ns: &str, rank: Rank, key: &str) -> Option<Value> {
        self.image(ns)?.proc_value(rank, key)
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

    /// Takes in a collecting fence's data, still encoded: one copy of the bytes, and for each
    /// process where its entries lie. They count as all of that process's data, newer than what
    /// the store holds; [`Store::unpack`] decodes them when a get needs them. This process's
    /// own entry is skipped, as in [`Store::insert_proc_kvs`].
    ///
    /// Fails, taking nothing, if a namespace is not a valid name (as decoding the reply whole
    /// would have).
    ///
    /// `owner`, when given, is the frame `f` lies in: the data is kept as a slice of it, not
    /// copied.
    pub(crate) fn insert_fence(
        &mut self,
        f: &FenceReplyRef<'_>,
        owner: Option<&Bytes>,
    ) -> Result<(), pmix_types::Error> {
        // The processes of a fence are usually of one namespace: its name is looked up once.
        let mut ids = Vec::with_capacity(f.procs.len());
        let mut last: Option<(&str, u32)> = None;
        for p in &f.procs {
            let id = match last {
                Some((name, id)) if name == p.nspace => id,
                _ => self.ns_id_of(p.nspace)?,
            };
            last = Some((p.nspace, id));
            ids.push(id);
        }
        let me = self.me.as_ref().and_then(|me| {
            let st = self.nspaces.get(me.nspace.as_str())?;
            Some((st.id, me.rank))
        });
        let data = match owner {
            Some(frame) => frame.slice_ref(f.data),
            None => Bytes::copy_from_slice(f.data),
        };
        let index: Vec<fence_data::Entry> = f
            .procs
            .iter()
            .zip(ids)
            .filter(|(p, id)| me != Some((*id, p.rank)))
            .filter_map(|(p, id)| fence_data::Entry::new(id, p.rank, &p.kvs))
            .collect();
        // Past the bound, the oldest fence's unread entries go into the map now.
        for (id, rank, bytes) in self.packed.add(data, index) {
            let Some(ns) = self.by_id.get(id as usize) else {
                continue;
            };
            let proc = Proc::new(ns.clone(), rank);
            if let Err(e) = self.decode_packed(&proc, &bytes) {
                tracing::warn!("pmix-client: fence data of {proc} does not decode: {e}");
            }
        }
        Ok(())
    }

    /// True when a collecting fence brought data of `proc` that [`Store::unpack`] has not
    /// decoded yet: until it has, the map may hold older values of its keys.
    pub(crate) fn has_packed(&self, proc: &Proc) -> bool {
        !self.packed.is_empty()
            && self
                .nspaces
                .get(proc.nspace.as_str())
                .is_some_and(|st| self.packed.contains(st.id, proc.rank))
    }

    /// Decodes what a collecting fence brought of `proc` into the map, each entry replacing an
    /// older value of its key; all of its data is then here. Entries that do not decode are an
    /// error (the server sent something that is not data) and leave nothing of them behind.
    pub(crate) fn unpack(&mut self, proc: &Proc) -> Result<(), pmix_wire::Error> {
        let Some(st) = self.nspaces.get(proc.nspace.as_str()) else {
            return Ok(());
        };
        // Oldest first, each newer than the one before; all are taken, whatever decodes.
        let mut result = Ok(());
        for bytes in self.packed.take(st.id, proc.rank) {
            if let Err(e) = self.decode_packed(proc, &bytes) {
                result = Err(e);
            }
        }
        result
    }

    fn decode_packed(&mut self, proc: &Proc, bytes: &[u8]) -> Result<(), pmix_wire::Error> {
        let kvs = pmix_wire::decode_kvs(bytes)?;
        self.insert_whole(proc, kvs);
        Ok(())
    }

    /// Takes in all of a process's data (newer than what the map holds of it).
    fn insert_whole(&mut self, proc: &Proc, kvs: Vec<pmix_wire::Kv>) {
        let ns = self.intern(&proc.nspace);
        let mut new_keys = Vec::new();
        for kv in kvs {
            let slot = Slot {
                ns: ns.clone(),
                level: Level::Data,
                id: proc.rank.0,
                key: kv.key,
            };
            let key = slot.key.clone();
            let entry = Entry {
                value: kv.value,
                scope: kv.scope,
            };
            if self.map.insert(slot, entry).is_none() {
                new_keys.push(key);
            }
        }
        let pd = self
            .procs
            .entry(ProcId {
                ns,
                rank: proc.rank,
            })
            .or_default();
        pd.keys.extend(new_keys);
        pd.complete = true;
    }

    /// Takes in the whole put data of some processes, as a fence, a Get or a Connect reply
    /// carries it. This process's own entry is skipped: the store already holds all of its
    /// data, newer than the committed copy.
    pub(crate) fn insert_proc_kvs(&mut self, data: Vec<ProcKvs>) {
        for pk in data {
            if self.me.as_ref() == Some(&pk.proc) {
                continue;
            }
            // Anything a fence brought of it is older than this.
            if let Err(e) = self.unpack(&pk.proc) {
                tracing::warn!(
                    "pmix-client: fence data of {} does not decode: {e}",
                    pk.proc
                );
            }
            self.insert_whole(&pk.proc, pk.kvs);
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
        let mut r = match self.image(ns) {
            Some(image) if rank.is_valid() => {
                let (app, node) = image.realms_of(rank);
                Realms { app, node }
            }
            _ => Realms::default(),
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
                .or_else(|| self.image(ns)?.node_by_host(q.hostname?))
                .or_else(|| self.realms_of(ns, who).node)
                .and_then(|n| self.node_value(ns, n, key)),
            None if rank == Rank::WILDCARD => self
                .level_value(ns, Level::Job, 0, key)
                .or_else(|| self.level_value(ns, Level::Session, 0, key)),
            None if rank.is_valid() => self.proc_value(ns, rank, key).or_else(|| {
                let r = self.realms_of(ns, rank);
                r.app
                    .and_then(|a| self.level_value(ns, Level::App, a, key))
                    .or_else(|| r.node.and_then(|n| self.node_value(ns, n, key)))
                    .or_else(|| self.level_value(ns, Level::Job, 0, key))
            }),
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

/// Parses a rank list as `PMIX_LOCAL_PEERS` holds it: comma-separated ranks, `a-b` ranges
/// allowed. `None` if it is malformed.
pub(crate) fn parse_rank_list(s: &str) -> Option<Vec<Rank>> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let a: u32 = a.trim().parse().ok()?;
                let b: u32 = b.trim().parse().ok()?;
                // A bound on what one entry may expand to: the text comes from the server.
                if b < a || b - a > 10_000_000 {
                    return None;
                }
                out.extend((a..=b).map(Rank));
            }
            None => out.push(Rank(part.parse().ok()?)),
        }
    }
    Some(out)
}

/// Where the processes of a namespace run, as its job data says.
impl Store {
    fn job_str(&self, ns: &str, key: &str) -> Option<&str> {
        self.get(ns, Level::Job, 0, key)?.value.as_str()
    }

    fn node_str(&self, ns: &str, id: u32, key: &str) -> Option<String> {
        match self.node_value(ns, id, key)? {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The ranks the host described one by one (whose process data it gave).
    fn described_ranks(&self, ns: &str) -> Vec<Rank> {
        self.image(ns)
            .map_or_else(Vec::new, JobImage::given_proc_ranks)
    }

    fn rank_host(&self, ns: &str, rank: Rank) -> Option<String> {
        match self.proc_value(ns, rank, attr::HOSTNAME)? {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The hostname of the node a rank runs on (its proc level, else its node's).
    pub(crate) fn hostname_of(&self, ns: &str, rank: Rank) -> Option<String> {
        if let Some(h) = self.rank_host(ns, rank) {
            return Some(h);
        }
        let node = self.realms_of(ns, rank).node?;
        self.node_str(ns, node, attr::HOSTNAME)
    }

    /// The ranks of `ns` on the node named `host`, ascending; `here` says that node is this
    /// process's, whose server registered the job-level `LOCAL_PEERS`. `Ok(None)` when the
    /// job data of `ns` is not here; `Err` names a malformed peer list.
    ///
    /// The node's own `LOCAL_PEERS` come first, then the ranks whose job data names the
    /// node; a job registered without any node information answers from its job-level
    /// `LOCAL_PEERS` for this node, and with nothing elsewhere.
    pub(crate) fn ranks_on(
        &self,
        ns: &str,
        host: Option<&str>,
        here: bool,
    ) -> Result<Option<Vec<Rank>>, String> {
        if !self.has_job(ns) {
            return Ok(None);
        }
        let parse = |list: &str| {
            parse_rank_list(list).ok_or_else(|| {
                format!("{} of {ns} is not a rank list: {list:?}", attr::LOCAL_PEERS)
            })
        };
        let node = host.and_then(|h| self.image(ns)?.node_by_host(h));
        let mut ranks = if let Some(id) = node {
            match self.node_str(ns, id, attr::LOCAL_PEERS) {
                Some(list) => parse(&list)?,
                // Ranks placed by the map have their node's peers derived: only ranks the host
                // described one by one can name a node without peers.
                None => self
                    .described_ranks(ns)
                    .into_iter()
                    .filter(|&r| self.realms_of(ns, r).node == Some(id))
                    .collect(),
            }
        } else {
            let by_host: Vec<Rank> = match host {
                Some(h) => self
                    .described_ranks(ns)
                    .into_iter()
                    .filter(|&r| self.rank_host(ns, r).as_deref() == Some(h))
                    .collect(),
                None => Vec::new(),
            };
            if !by_host.is_empty() || !here || self.has_topology(ns) {
                by_host
            } else {
                match self.job_str(ns, attr::LOCAL_PEERS) {
                    Some(list) => parse(list)?,
                    None => Vec::new(),
                }
            }
        };
        ranks.sort_unstable();
        ranks.dedup();
        Ok(Some(ranks))
    }

    /// True when the job data of `ns` says where its processes run: nodes with hostnames,
    /// or hostnames of ranks.
    fn has_topology(&self, ns: &str) -> bool {
        let nodes = self.image(ns).map_or_else(Vec::new, JobImage::node_ids);
        nodes
            .iter()
            .any(|&id| self.node_str(ns, id, attr::HOSTNAME).is_some())
            || self.hostname_of(ns, Rank(0)).is_some()
    }

    /// The hostnames of the nodes running processes of `ns`, in node order without repeats;
    /// `here` is this process's hostname, the answer for a job registered without node
    /// information whose processes run on this node. `None` when the job data of `ns` is not
    /// here.
    ///
    /// `NODE_LIST` when the host registered it; else the nodes of the node-level data that
    /// run any rank; else the hostnames of the ranks.
    pub(crate) fn nodes_of(&self, ns: &str, here: Option<&str>) -> Option<Vec<String>> {
        if !self.has_job(ns) {
            return None;
        }
        fn add(out: &mut Vec<String>, h: &str) {
            if !h.is_empty() && !out.iter().any(|o| o == h) {
                out.push(h.to_owned());
            }
        }
        let mut out: Vec<String> = Vec::new();
        if let Some(list) = self.job_str(ns, attr::NODE_LIST) {
            for h in list.split(',') {
                add(&mut out, h.trim());
            }
            return Some(out);
        }
        for id in self.image(ns).map_or_else(Vec::new, JobImage::node_ids) {
            let empty = match self.node_str(ns, id, attr::LOCAL_PEERS) {
                Some(list) => parse_rank_list(&list).is_some_and(|r| r.is_empty()),
                None => {
                    self.node_value(ns, id, attr::LOCAL_SIZE)
                        .and_then(|v| v.as_u32())
                        == Some(0)
                }
            };
            if let (false, Some(h)) = (empty, self.node_str(ns, id, attr::HOSTNAME)) {
                add(&mut out, &h);
            }
        }
        if out.is_empty() {
            for r in self.described_ranks(ns) {
                if let Some(h) = self.rank_host(ns, r) {
                    add(&mut out, &h);
                }
            }
        }
        if out.is_empty() && !self.has_topology(ns) {
            let local = self
                .job_str(ns, attr::LOCAL_PEERS)
                .and_then(parse_rank_list)
                .is_some_and(|r| !r.is_empty());
            if let (true, Some(h)) = (local, here) {
                add(&mut out, h);
            }
        }
        Some(out)
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

    fn fence_body(data: Vec<ProcKvs>) -> Vec<u8> {
        use pmix_wire::{Reply, ReplyBody, ServerMsg};
        let msg = ServerMsg::Reply {
            id: 1,
            reply: Reply {
                status: pmix_types::Status::SUCCESS,
                body: ReplyBody::Fence { data },
            },
        };
        let mut frame = Vec::new();
        pmix_wire::encode_frame(&msg, &mut frame).unwrap();
        frame.split_off(pmix_wire::HEADER_LEN)
    }

    /// Takes a fence reply in, kept in the frame it came in (as a large frame is).
    fn take_fence(s: &mut Store, data: Vec<ProcKvs>) {
        let body = Bytes::from(fence_body(data));
        s.insert_fence(&pmix_wire::peek_fence_reply(&body).unwrap(), Some(&body))
            .unwrap();
    }

    fn kvs_of(rank: u32, round: u8) -> ProcKvs {
        ProcKvs {
            proc: Proc::new(Nspace::new("job").unwrap(), rank),
            kvs: vec![
                Kv {
                    scope: Scope::GLOBAL,
                    key: key("card"),
                    value: Value::String(format!("card-{rank}-{round}")),
                },
                Kv {
                    scope: Scope::LOCAL,
                    key: key(&format!("only.{round}")),
                    value: Value::Uint8(round),
                },
            ],
        }
    }

    /// What a get with no key, and gets of some keys, give for one process.
    type Seen = (Option<Vec<Info>>, Vec<Option<Value>>);

    /// Everything a get can see of the processes of `data`.
    fn seen(s: &mut Store, data: &[ProcKvs]) -> Vec<Seen> {
        data.iter()
            .map(|pk| {
                s.unpack(&pk.proc).unwrap();
                assert!(!s.has_packed(&pk.proc));
                let keys = ["card", "only.1", "only.2", "none"];
                (
                    s.all_data(&pk.proc, None, false),
                    keys.iter().map(|k| s.get_data(&pk.proc, k, None)).collect(),
                )
            })
            .collect()
    }

    #[test]
    fn fence_data_decoded_when_asked_equals_fence_data_decoded_at_once() {
        let me = Proc::new(Nspace::new("job").unwrap(), 0);
        let first: Vec<ProcKvs> = (0..4).map(|r| kvs_of(r, 1)).collect();
        let second: Vec<ProcKvs> = (0..4).map(|r| kvs_of(r, 2)).collect();
        let mut eager = Store::default();
        eager.set_me(me.clone());
        eager.insert_proc_kvs(first.clone());
        eager.insert_proc_kvs(second.clone());
        let mut lazy = Store::default();
        lazy.set_me(me.clone());
        // Two fences before any get: the newer values win, the older keys stay.
        take_fence(&mut lazy, first.clone());
        take_fence(&mut lazy, second.clone());
        assert!(lazy.has_packed(&second[1].proc));
        // Our own entry is not taken: what we put since is newer.
        assert!(!lazy.has_packed(&me));
        assert_eq!(lazy.packed.live(), 6, "two fences of three processes each");
        assert_eq!(seen(&mut lazy, &second), seen(&mut eager, &second));
        assert!(lazy.packed.is_empty());
        let all = lazy.all_data(&second[1].proc, None, false).unwrap();
        assert_eq!(all.len(), 3, "{all:?}");
        // A Get reply after a fence that no get has read yet: the fence's data is older.
        let mut lazy = Store::default();
        take_fence(&mut lazy, first.clone());
        lazy.insert_proc_kvs(second.clone());
        let mut eager = Store::default();
        eager.insert_proc_kvs(first);
        eager.insert_proc_kvs(second.clone());
        assert_eq!(seen(&mut lazy, &second), seen(&mut eager, &second));
    }

    #[test]
    fn bad_fence_data_is_an_error_not_a_panic() {
        let good = fence_body(vec![kvs_of(1, 1)]);
        let f = pmix_wire::peek_fence_reply(&good).unwrap();
        // Entries that are not key/value pairs: found out when a get asks for them.
        let mut bad = good.clone();
        let at = f.procs[0].kvs.start + (f.data.as_ptr() as usize - good.as_ptr() as usize);
        // The first entry's scope (after the markers of the entries and of the entry) is nil.
        assert_eq!(&bad[at..at + 2], &[0x92, 0x93]);
        bad[at + 2] = 0xc0;
        if let Some(f) = pmix_wire::peek_fence_reply(&bad) {
            let mut s = Store::default();
            s.insert_fence(&f, None).unwrap();
            assert!(s.unpack(&kvs_of(1, 1).proc).is_err());
            assert!(!s.has_packed(&kvs_of(1, 1).proc));
        } else {
            panic!("the damage should only show when decoding the entries");
        }
        // A namespace that is not a valid name: nothing is taken.
        let mut nul = good.clone();
        let ns_at = nul.windows(3).position(|w| w == b"job").unwrap();
        nul[ns_at + 1] = 0;
        let f = pmix_wire::peek_fence_reply(&nul).unwrap();
        let mut s = Store::default();
        assert!(s.insert_fence(&f, None).is_err());
        assert!(s.packed.is_empty());
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

    #[test]
    fn rank_lists_parse_with_ranges_and_refuse_nonsense() {
        let r =
            |s: &str| parse_rank_list(s).map(|v| v.into_iter().map(|r| r.0).collect::<Vec<_>>());
        assert_eq!(r("0-2, 5,7-7"), Some(vec![0, 1, 2, 5, 7]));
        assert_eq!(r(""), Some(vec![]));
        assert_eq!(r("3-1"), None);
        assert_eq!(r("a"), None);
        assert_eq!(r("0-4294967295"), None);
    }
}
