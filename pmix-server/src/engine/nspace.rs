//! Turning a host's `register_nspace` information into the job data clients receive.
//!
//! The host may give the five information levels flat or as nested `*_INFO_ARRAY` entries; this
//! module sorts every value into the level the standard says it is retrieved from, and derives
//! what the node and process maps imply but the host left out (local peers, local and node
//! ranks, node ids, hostnames of each rank, app numbers and app ranks, sizes). Values the host
//! gave always win over derived ones.
//!
//! Registration is split in two so that a large job costs little until someone needs its data.
//! [`register`] checks everything, settles the session, job and app levels (a handful of values)
//! and keeps the rest compact: the parsed maps (node names, the ranks on each node) and only the
//! node and process values the host gave. The node and process levels, one realm per node and
//! per rank, are derived from those by [`LazyJob::get`] when the namespace's [`JobData`] is
//! first needed (a local client's welcome, a job-level get or a connect naming the namespace),
//! and kept from then on. A job placed entirely on other nodes is typically never expanded.

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::Arc;

use pmix_types::attr::{self, Level};
use pmix_types::{Info, Nspace, Rank, Value};
use pmix_wire::{JobData, ProcRealm, Realm};

use super::anl_map;
use crate::Error;

/// What registration produced for one namespace.
#[derive(Debug)]
pub(crate) struct Registration {
    /// Everything a client of this namespace receives at init, built on first use.
    pub(crate) job: LazyJob,
    /// Number of processes in the namespace.
    pub(crate) size: u32,
    /// The ranks that run on this server's node, ascending.
    pub(crate) local_ranks: Vec<Rank>,
}

/// A namespace's [`JobData`], derived from its compact registration the first time it is asked
/// for and shared from then on (the same `Arc` each time, which the shell's welcome-frame cache
/// relies on).
#[derive(Debug)]
pub(crate) struct LazyJob(Job);

#[derive(Debug)]
enum Job {
    /// Registered here: derived on first use.
    Derived {
        spec: Box<Spec>,
        built: OnceCell<Arc<JobData>>,
    },
    /// A namespace of another launcher run, as its own server derived it
    /// ([`Registration::foreign`]).
    Given(Arc<JobData>),
}

impl LazyJob {
    /// The job data, derived now if this is the first call.
    pub(crate) fn get(&self) -> &Arc<JobData> {
        match &self.0 {
            Job::Derived { spec, built } => built.get_or_init(|| Arc::new(spec.expand())),
            Job::Given(job) => job,
        }
    }

    /// A job-level value (rank `WILDCARD`) as clients will get it, without deriving the node and
    /// process levels: those are the expensive part of a large job, and the job level is
    /// settled at registration.
    pub(crate) fn job_value(&self, key: &str) -> Option<&Value> {
        match &self.0 {
            Job::Derived { spec, .. } if spec.nodata => None,
            Job::Derived { spec, .. } => find(&spec.job, key),
            Job::Given(job) => find(&job.job, key),
        }
    }

    /// The ranks of the job in process set `name`: those whose own data names it
    /// (`PSET_NAME` in their `PROC_DATA`), or else whose application's does (launchers such
    /// as pmixrun and prterun name the set of each application context given `--pset`).
    pub(crate) fn pset_ranks(&self, name: &str) -> Vec<Rank> {
        fn named(infos: &[Info]) -> Option<&str> {
            find(infos, attr::PSET_NAME).and_then(Value::as_str)
        }
        let spec = match &self.0 {
            Job::Derived { spec, .. } if spec.nodata => return Vec::new(),
            Job::Derived { spec, .. } => spec,
            // Another run's, as its server derived it: each rank's data and its application's.
            Job::Given(job) => {
                let app_set = |info: &[Info]| {
                    let appnum = find(info, attr::APPNUM)?.as_u64()?;
                    let app = job.apps.iter().find(|a| u64::from(a.id) == appnum)?;
                    named(&app.info)
                };
                return job
                    .procs
                    .iter()
                    .filter(|p| named(&p.info).or_else(|| app_set(&p.info)) == Some(name))
                    .map(|p| p.rank)
                    .collect();
            }
        };
        let leaders_ascend = spec.app_of_rank.is_sorted_by_key(|&(_, ldr)| ldr);
        (0..spec.size)
            .map(Rank)
            .filter(|&rank| {
                let own = spec.given_procs.get(&rank).and_then(|i| named(i));
                let set = own.or_else(|| {
                    let (appnum, _) = spec.app_for(rank, leaders_ascend);
                    let app = spec.apps.iter().find(|a| a.id == appnum)?;
                    named(&app.info)
                });
                set == Some(name)
            })
            .collect()
    }

    /// Whether this is a namespace of another launcher run ([`Registration::foreign`]).
    pub(crate) fn is_foreign(&self) -> bool {
        matches!(self.0, Job::Given(_))
    }

    /// Whether the job data was derived already.
    #[cfg(test)]
    pub(crate) fn is_built(&self) -> bool {
        match &self.0 {
            Job::Derived { built, .. } => built.get().is_some(),
            Job::Given(_) => true,
        }
    }
}

impl Deref for LazyJob {
    type Target = JobData;

    /// Like `std::cell::LazyCell`: derives the job data on first use.
    fn deref(&self) -> &JobData {
        self.get()
    }
}

impl Registration {
    /// A namespace of another launcher run, known from the job data its own server derived
    /// (a connect across runs brings it): none of its processes is local here.
    pub(crate) fn foreign(job: JobData) -> Registration {
        let size = find(&job.job, attr::JOB_SIZE)
            .and_then(Value::as_u32)
            .unwrap_or_else(|| u32::try_from(job.procs.len()).unwrap_or(u32::MAX));
        Registration {
            job: LazyJob(Job::Given(Arc::new(job))),
            size,
            local_ranks: Vec::new(),
        }
    }
}

/// The parsed node and process maps.
#[derive(Debug)]
struct Maps {
    /// Node names, by node id.
    names: Vec<String>,
    /// The ranks on each node, by node id, in the order the map lists them.
    ppn: Vec<Vec<Rank>>,
}

/// Everything needed to derive a namespace's [`JobData`]: the levels settled at registration,
/// the host's node and process values as given, and the maps.
#[derive(Debug)]
struct Spec {
    nspace: Nspace,
    /// The host asked for no data to be stored (`REGISTER_NODATA`): clients get none.
    nodata: bool,
    size: u32,
    /// Final session, job and app levels.
    session: Vec<Info>,
    job: Vec<Info>,
    apps: Vec<Realm>,
    /// (app number, leader) in app-number order, for the app of each rank.
    app_of_rank: Vec<(u32, Rank)>,
    /// `NPROC_OFFSET`: a rank's global rank is the offset plus its rank.
    offset: u32,
    /// `SPAWNED` at job level, which every process repeats.
    spawned: bool,
    /// Node arrays as the host gave them.
    given_nodes: Vec<Vec<Info>>,
    /// Process arrays as the host gave them.
    given_procs: BTreeMap<Rank, Vec<Info>>,
    maps: Option<Maps>,
}

#[derive(Default)]
struct Levels {
    session: Vec<Info>,
    job: Vec<Info>,
    apps: BTreeMap<u32, Vec<Info>>,
    /// Node arrays as given: identified by id and/or hostname.
    nodes: Vec<Vec<Info>>,
    procs: BTreeMap<Rank, Vec<Info>>,
    nodata: bool,
}

#[derive(Clone, Copy, PartialEq)]
enum Ctx {
    Session,
    Job,
}

fn find<'a>(infos: &'a [Info], key: &str) -> Option<&'a Value> {
    infos
        .iter()
        .find(|i| i.key.as_str() == key)
        .map(|i| &i.value)
}

fn has(infos: &[Info], key: &str) -> bool {
    infos.iter().any(|i| i.key.as_str() == key)
}

/// Adds `key = value` unless the host already gave that key.
fn add_missing(infos: &mut Vec<Info>, key: &'static str, value: impl Into<Value>) {
    if !has(infos, key) {
        infos.push(Info::attr(key, value));
    }
}

fn array_infos(value: &Value, what: &str) -> Result<Vec<Info>, Error> {
    match value {
        Value::DataArray(a) => Ok(a.infos().cloned().collect()),
        other => Err(Error::BadRegistration(format!(
            "{what} must be a data array of info, found {:?}",
            other.data_type()
        ))),
    }
}

impl Levels {
    fn walk(&mut self, infos: &[Info], ctx: Ctx) -> Result<(), Error> {
        for info in infos {
            match info.key.as_str() {
                attr::SESSION_INFO_ARRAY => {
                    let inner = array_infos(&info.value, "SESSION_INFO_ARRAY")?;
                    self.walk(&inner, Ctx::Session)?;
                }
                attr::JOB_INFO_ARRAY => {
                    let inner = array_infos(&info.value, "JOB_INFO_ARRAY")?;
                    self.walk(&inner, Ctx::Job)?;
                }
                attr::APP_INFO_ARRAY => {
                    let inner = array_infos(&info.value, "APP_INFO_ARRAY")?;
                    let appnum = find(&inner, attr::APPNUM)
                        .and_then(Value::as_u32)
                        .ok_or_else(|| {
                            Error::BadRegistration("an APP_INFO_ARRAY lacks PMIX_APPNUM".into())
                        })?;
                    self.apps.entry(appnum).or_default().extend(inner);
                }
                attr::NODE_INFO_ARRAY => {
                    let inner = array_infos(&info.value, "NODE_INFO_ARRAY")?;
                    if !has(&inner, attr::NODEID) && !has(&inner, attr::HOSTNAME) {
                        return Err(Error::BadRegistration(
                            "a NODE_INFO_ARRAY has neither PMIX_NODEID nor PMIX_HOSTNAME".into(),
                        ));
                    }
                    self.nodes.push(inner);
                }
                attr::PROC_DATA => {
                    let inner = array_infos(&info.value, "PROC_INFO_ARRAY")?;
                    let rank = find(&inner, attr::RANK)
                        .and_then(Value::as_rank)
                        .or_else(|| {
                            find(&inner, attr::PROCID)
                                .and_then(Value::as_proc)
                                .map(|p| p.rank)
                        })
                        .ok_or_else(|| {
                            Error::BadRegistration("a PROC_INFO_ARRAY lacks PMIX_RANK".into())
                        })?;
                    self.procs.entry(rank).or_default().extend(inner);
                }
                attr::REGISTER_NODATA => self.nodata = info.flag().unwrap_or(true),
                key => {
                    let session_only =
                        attr::lookup(key).is_some_and(|a| a.levels == [Level::Session]);
                    if ctx == Ctx::Session || session_only {
                        self.session.push(info.clone());
                    } else {
                        self.job.push(info.clone());
                    }
                }
            }
        }
        Ok(())
    }
}

/// Reads a node or process map given as a string or a `PMIX_REGEX` value.
fn map_text(v: &Value) -> Option<&[u8]> {
    match v {
        Value::String(s) => Some(s.as_bytes()),
        Value::Regex(b) => Some(b),
        _ => None,
    }
}

/// Parses the node map and the process map into node names and the ranks on each node.
fn parse_maps(node_map: &Value, proc_map: &Value) -> Result<Maps, Error> {
    let bad = |what: &str, e: &dyn std::fmt::Display| {
        Error::BadRegistration(format!("cannot parse PMIX_{what}: {e}"))
    };
    let nodes = map_text(node_map).ok_or_else(|| bad("NODE_MAP", &"not a string or regex"))?;
    let procs = map_text(proc_map).ok_or_else(|| bad("PROC_MAP", &"not a string or regex"))?;
    let names = pmix_regex::parse_regex(nodes).map_err(|e| bad("NODE_MAP", &e))?;
    let ppn = pmix_regex::parse_ppn(procs).map_err(|e| bad("PROC_MAP", &e))?;
    if names.len() != ppn.len() {
        return Err(Error::BadRegistration(format!(
            "PMIX_NODE_MAP names {} nodes but PMIX_PROC_MAP has {} entries",
            names.len(),
            ppn.len()
        )));
    }
    let ppn = ppn
        .into_iter()
        .map(|ranks| ranks.into_iter().map(Rank).collect())
        .collect();
    Ok(Maps { names, ppn })
}

fn join_ranks(ranks: &[Rank]) -> String {
    let mut s = String::with_capacity(ranks.len() * 4);
    for (i, r) in ranks.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&r.0.to_string());
    }
    s
}

/// A server-wide job-level value as one namespace gets it: the namespace directory
/// (`NSDIR`) is the server's directory joined with the namespace, so that a job that removes
/// its directory at the end (Open MPI does) removes only its own.
pub(crate) fn per_namespace(extra: &Info, nspace: &Nspace) -> Info {
    match (extra.key.as_str(), extra.value.as_str()) {
        (attr::NSDIR, Some(base)) => Info::attr(attr::NSDIR, format!("{base}/{nspace}")),
        _ => extra.clone(),
    }
}

/// Where this server runs, for deciding which ranks are local.
pub(crate) struct Locale<'a> {
    /// This node's hostname.
    pub(crate) hostname: &'a str,
    /// Extra job-level values every namespace gets (tmpdirs, server identity).
    pub(crate) job_extras: &'a [Info],
}

/// Checks the registration of one namespace and settles what it needs at once; the node and
/// process levels are derived later (see the module docs).
pub(crate) fn register(
    nspace: &Nspace,
    nlocalprocs: u32,
    info: &[Info],
    locale: &Locale<'_>,
) -> Result<Registration, Error> {
    let mut lv = Levels::default();
    lv.walk(info, Ctx::Job)?;

    let maps = match (find(&lv.job, attr::NODE_MAP), find(&lv.job, attr::PROC_MAP)) {
        (Some(n), Some(p)) => Some(parse_maps(n, p)?),
        (None, None) => None,
        _ => {
            return Err(Error::BadRegistration(
                "PMIX_NODE_MAP and PMIX_PROC_MAP must be given together".into(),
            ));
        }
    };

    let size = match find(&lv.job, attr::JOB_SIZE) {
        Some(v) => v
            .as_u32()
            .ok_or_else(|| Error::BadRegistration("PMIX_JOB_SIZE is not an integer".into()))?,
        None => match &maps {
            Some(m) => u32::try_from(m.ppn.iter().map(Vec::len).sum::<usize>())
                .map_err(|_| Error::BadRegistration("too many ranks".into()))?,
            None if !lv.procs.is_empty() => lv.procs.keys().map(|r| r.0 + 1).max().unwrap_or(0),
            None => nlocalprocs,
        },
    };
    if let Some(m) = &maps {
        if let Some(bad) = m.ppn.iter().flatten().find(|r| r.0 >= size) {
            return Err(Error::BadRegistration(format!(
                "PMIX_PROC_MAP places rank {bad} but the job has {size} processes"
            )));
        }
    }

    // Applications: their rank ranges follow app order and APP_SIZE.
    if lv.apps.is_empty() {
        lv.apps.insert(0, Vec::new());
    }
    let napps = u32::try_from(lv.apps.len()).unwrap_or(u32::MAX);
    let single_app = lv.apps.len() == 1;
    let mut app_of_rank: Vec<(u32, Rank)> = Vec::new(); // (appnum, first rank) ranges
    let mut next = 0u32;
    for (&appnum, infos) in lv.apps.iter_mut() {
        let app_size = match find(infos, attr::APP_SIZE).and_then(Value::as_u32) {
            Some(s) => s,
            None if single_app => size,
            None => 0,
        };
        let ldr = find(infos, attr::APPLDR)
            .and_then(Value::as_rank)
            .unwrap_or(Rank(next));
        app_of_rank.push((appnum, ldr));
        if !has(infos, attr::APPNUM) {
            infos.insert(0, Info::attr(attr::APPNUM, appnum));
        }
        add_missing(infos, attr::APP_SIZE, app_size);
        add_missing(infos, attr::APPLDR, ldr);
        add_missing(infos, attr::MAX_PROCS, app_size);
        next = ldr.0.saturating_add(app_size);
    }

    let offset = find(&lv.job, attr::NPROC_OFFSET)
        .and_then(Value::as_u32)
        .unwrap_or(0);
    // A job registered as spawned says so at job level; each process says the same.
    let spawned = find(&lv.job, attr::SPAWNED)
        .and_then(Value::as_bool)
        .unwrap_or(false);

    // Which ranks are on this node: the host's list, else the first node of the map with this
    // node's name, else none when the host says it has none here (a job of other nodes that
    // this node's server must know about), else the only node of the map, else the first
    // `nlocalprocs` ranks.
    let mut local_ranks =
        if let Some(peers) = find(&lv.job, attr::LOCAL_PEERS).and_then(Value::as_str) {
            parse_rank_list(peers)?
        } else if let Some(m) = &maps {
            match m.names.iter().position(|n| n == locale.hostname) {
                Some(idx) => m.ppn[idx].clone(),
                None if nlocalprocs == 0 => Vec::new(),
                None if m.names.len() == 1 => m.ppn[0].clone(),
                None => (0..nlocalprocs.min(size)).map(Rank).collect(),
            }
        } else {
            (0..nlocalprocs.min(size)).map(Rank).collect()
        };
    local_ranks.sort_unstable();
    local_ranks.dedup();

    // Job and session defaults.
    if !has(&lv.job, attr::NSPACE) {
        lv.job.insert(0, Info::attr(attr::NSPACE, nspace.as_str()));
    }
    add_missing(&mut lv.job, attr::JOBID, nspace.as_str());
    add_missing(&mut lv.job, attr::JOB_SIZE, size);
    add_missing(&mut lv.job, attr::MAX_PROCS, size);
    add_missing(&mut lv.job, attr::JOB_NUM_APPS, napps);
    if let Some(m) = &maps {
        add_missing(
            &mut lv.job,
            attr::NUM_NODES,
            u32::try_from(m.names.len()).unwrap_or(u32::MAX),
        );
    }
    // This node's values are also job-level for the clients on it (what a Get with rank
    // WILDCARD of LOCAL_SIZE or LOCAL_PEERS means to them).
    let lsize = u32::try_from(local_ranks.len()).unwrap_or(u32::MAX);
    add_missing(&mut lv.job, attr::LOCAL_SIZE, lsize);
    add_missing(&mut lv.job, attr::LOCAL_PEERS, join_ranks(&local_ranks));
    if let Some(first) = local_ranks.first() {
        add_missing(&mut lv.job, attr::LOCALLDR, *first);
    }
    for extra in locale.job_extras {
        if !has(&lv.job, extra.key.as_str()) {
            lv.job.push(per_namespace(extra, nspace));
        }
    }
    // Where every rank runs, in ANL notation, from the maps or, without them, for a job all
    // of whose ranks are on this node.
    let anl_map = match &maps {
        Some(m) => anl_map::of_ppn(&m.ppn, size, anl_map::MAX_JOB_DATA_LEN),
        None if local_ranks.len() == size as usize => {
            anl_map::of_ppn(&[local_ranks.clone()], size, anl_map::MAX_JOB_DATA_LEN)
        }
        None => None,
    };
    if let Some(map) = anl_map {
        add_missing(&mut lv.job, attr::ANL_MAP, map);
    }
    if !has(&lv.session, attr::UNIV_SIZE) && !has(&lv.job, attr::UNIV_SIZE) {
        lv.session.push(Info::attr(attr::UNIV_SIZE, size));
    }

    let spec = Spec {
        nspace: nspace.clone(),
        nodata: lv.nodata,
        size,
        session: lv.session,
        job: lv.job,
        apps: lv
            .apps
            .into_iter()
            .map(|(id, info)| Realm { id, info })
            .collect(),
        app_of_rank,
        offset,
        spawned,
        given_nodes: lv.nodes,
        given_procs: lv.procs,
        maps,
    };
    Ok(Registration {
        job: LazyJob(Job::Derived {
            spec: Box::new(spec),
            built: OnceCell::new(),
        }),
        size,
        local_ranks,
    })
}

impl Spec {
    /// The job data clients receive.
    fn expand(&self) -> JobData {
        if self.nodata {
            // The host registered the namespace for bookkeeping only.
            return JobData {
                nspace: self.nspace.clone(),
                session: vec![],
                job: vec![],
                apps: vec![],
                nodes: vec![],
                procs: vec![],
            };
        }
        JobData {
            nspace: self.nspace.clone(),
            session: self.session.clone(),
            job: self.job.clone(),
            apps: self.apps.clone(),
            nodes: self.nodes(),
            procs: self.procs(),
        }
    }

    /// One realm per node of the map, or the host's node arrays as given without a map.
    fn nodes(&self) -> Vec<Realm> {
        let Some(maps) = &self.maps else {
            return self
                .given_nodes
                .iter()
                .enumerate()
                .map(|(idx, given)| Realm {
                    id: find(given, attr::NODEID)
                        .and_then(Value::as_u32)
                        .unwrap_or(u32::try_from(idx).unwrap_or(u32::MAX)),
                    info: given.clone(),
                })
                .collect();
        };
        let mut realms = Vec::with_capacity(maps.names.len());
        for (idx, (name, ranks)) in maps.names.iter().zip(&maps.ppn).enumerate() {
            let id = u32::try_from(idx).unwrap_or(u32::MAX);
            // Host-given node arrays for this node, matched by id or by name.
            let mut infos: Vec<Info> = Vec::new();
            for given in &self.given_nodes {
                let by_id = find(given, attr::NODEID).and_then(Value::as_u32) == Some(id);
                let by_name =
                    find(given, attr::HOSTNAME).and_then(Value::as_str) == Some(name.as_str());
                if by_id || by_name {
                    infos.extend(given.iter().cloned());
                }
            }
            add_missing(&mut infos, attr::NODEID, id);
            add_missing(&mut infos, attr::HOSTNAME, name.as_str());
            let lsize = u32::try_from(ranks.len()).unwrap_or(u32::MAX);
            add_missing(&mut infos, attr::LOCAL_SIZE, lsize);
            add_missing(&mut infos, attr::NODE_SIZE, lsize);
            add_missing(&mut infos, attr::LOCAL_PEERS, join_ranks(ranks));
            if let Some(first) = ranks.iter().min() {
                add_missing(&mut infos, attr::LOCALLDR, *first);
            }
            realms.push(Realm { id, info: infos });
        }
        realms
    }

    /// The app number and leader of the app `rank` belongs to: the last app, in app-number
    /// order, whose leader is at or below the rank.
    fn app_for(&self, rank: Rank, leaders_ascend: bool) -> (u32, Rank) {
        if leaders_ascend {
            // Then the apps with a leader at or below the rank are a prefix.
            let n = self.app_of_rank.partition_point(|&(_, ldr)| ldr <= rank);
            return n
                .checked_sub(1)
                .map_or((0, Rank(0)), |i| self.app_of_rank[i]);
        }
        let mut best = (0, Rank(0));
        for &(appnum, ldr) in &self.app_of_rank {
            if ldr <= rank {
                best = (appnum, ldr);
            }
        }
        best
    }

    /// One realm per rank of the job, plus the host's arrays for ranks outside it, by rank.
    fn procs(&self) -> Vec<ProcRealm> {
        const UNPLACED: u32 = u32::MAX;
        // The node that places each rank first, and the rank's position on it.
        let mut place: Vec<(u32, u16)> = Vec::new();
        if let Some(maps) = &self.maps {
            place = vec![(UNPLACED, 0); self.size as usize];
            for (idx, ranks) in maps.ppn.iter().enumerate() {
                let id = u32::try_from(idx).unwrap_or(u32::MAX);
                for (lrank, rank) in ranks.iter().enumerate() {
                    // Every rank of the map is below the size (checked at registration).
                    if let Some(p) = place.get_mut(rank.0 as usize) {
                        if p.0 == UNPLACED {
                            *p = (id, u16::try_from(lrank).unwrap_or(u16::MAX));
                        }
                    }
                }
            }
        }
        let leaders_ascend = self.app_of_rank.is_sorted_by_key(|&(_, ldr)| ldr);
        let mut given = self.given_procs.iter().peekable();
        let mut out = Vec::with_capacity(self.size as usize);
        for r in 0..self.size {
            let rank = Rank(r);
            let given_here = given.next_if(|(g, _)| **g == rank).map(|(_, infos)| infos);
            // Without host values for the rank nothing can be present already: skip the checks.
            let check = given_here.is_some();
            let add = |p: &mut Vec<Info>, key: &'static str, value: Value| {
                if !check || !has(p, key) {
                    p.push(Info::attr(key, value));
                }
            };
            let mut p = Vec::with_capacity(given_here.map_or(0, Vec::len) + 10);
            match given_here {
                Some(infos) => p.extend(infos.iter().cloned()),
                // First, where the checked path below inserts it.
                None => p.push(Info::attr(attr::RANK, rank)),
            }
            if let Some(&(node, lrank)) = place.get(r as usize).filter(|p| p.0 != UNPLACED) {
                let name = self
                    .maps
                    .as_ref()
                    .and_then(|m| m.names.get(node as usize))
                    .map_or("", String::as_str);
                add(&mut p, attr::NODEID, node.into());
                add(&mut p, attr::HOSTNAME, name.into());
                add(&mut p, attr::LOCAL_RANK, lrank.into());
                add(&mut p, attr::NODE_RANK, lrank.into());
            }
            let (appnum, ldr) = self.app_for(rank, leaders_ascend);
            if check && !has(&p, attr::RANK) {
                p.insert(0, Info::attr(attr::RANK, rank));
            }
            let global = Rank(self.offset.saturating_add(r));
            add(&mut p, attr::GLOBAL_RANK, global.into());
            add(&mut p, attr::APPNUM, appnum.into());
            add(&mut p, attr::APP_RANK, Rank(r - ldr.0.min(r)).into());
            add(&mut p, attr::REINCARNATION, 0u32.into());
            add(&mut p, attr::SPAWNED, self.spawned.into());
            out.push(ProcRealm { rank, info: p });
        }
        // The host may describe ranks beyond the job's size; they keep what it gave.
        out.extend(given.map(|(&rank, infos)| ProcRealm {
            rank,
            info: infos.clone(),
        }));
        out
    }
}

/// Parses a comma-separated rank list (`PMIX_LOCAL_PEERS`), allowing `a-b` ranges.
pub(crate) fn parse_rank_list(s: &str) -> Result<Vec<Rank>, Error> {
    let bad = || Error::BadRegistration(format!("PMIX_LOCAL_PEERS is not a rank list: {s:?}"));
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let a: u32 = a.parse().map_err(|_| bad())?;
                let b: u32 = b.parse().map_err(|_| bad())?;
                if b < a || b - a > 10_000_000 {
                    return Err(bad());
                }
                out.extend((a..=b).map(Rank));
            }
            None => out.push(Rank(part.parse().map_err(|_| bad())?)),
        }
    }
    Ok(out)
}

#[cfg(test)]
#[path = "nspace_tests.rs"]
mod tests;
