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
//! first needed (a PMI-1 or PMI-2 client's setup or welcome, a connect naming the namespace), and kept
//! from then on. Native clients get the image itself, and libpmix clients what the OpenPMIx
//! front-end derives from it one rank at a time: a job of theirs is never expanded.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use pmix_types::attr::{self, Level};
use pmix_types::{Info, Nspace, Proc, Rank, Value};
use pmix_wire::job_image::join_ranks;
use pmix_wire::{JobData, JobImage, JobSpec, NodeMap, Realm};

use super::anl_map;
use crate::Error;

/// What registration produced for one namespace.
#[derive(Debug)]
pub(crate) struct Registration {
    /// Everything a client of this namespace receives at init.
    pub(crate) job: Arc<LazyJob>,
    /// Number of processes in the namespace.
    pub(crate) size: u32,
    /// The ranks that run on this server's node, ascending.
    pub(crate) local_ranks: Vec<Rank>,
}

/// A namespace's job data: its compact image (what native clients get, and what answers the
/// engine's own questions), and the whole [`JobData`] derived from it the first time a
/// front-end that needs every realm asks (the same `Arc` each time, which the front-ends'
/// encoding caches rely on).
#[derive(Debug)]
pub(crate) struct LazyJob {
    image: JobImage,
    full: OnceLock<Arc<JobData>>,
    /// A namespace of another launcher run ([`Registration::foreign`]).
    foreign: bool,
}

impl LazyJob {
    fn new(image: JobImage, foreign: bool) -> LazyJob {
        LazyJob {
            image,
            full: OnceLock::new(),
            foreign,
        }
    }

    /// The job data with every node and process realm, derived now if this is the first call.
    pub(crate) fn get(&self) -> &Arc<JobData> {
        self.full.get_or_init(|| Arc::new(self.image.expand()))
    }

    /// The compact image.
    pub(crate) fn image(&self) -> &JobImage {
        &self.image
    }

    /// A job-level value (rank `WILDCARD`) as clients will get it.
    pub(crate) fn job_value(&self, key: &str) -> Option<&Value> {
        self.image.job_value(key)
    }

    /// The job's command line (`PMIX_CMD_LINE`): each application's `APP_ARGV`, in
    /// application order, joined with ` : ` as a launcher's command line separates them;
    /// `None` when no application names its argv.
    pub(crate) fn cmd_line(&self) -> Option<String> {
        let mut apps: Vec<&pmix_wire::Realm> = self.image.apps().iter().collect();
        apps.sort_by_key(|a| a.id);
        let argvs: Vec<&str> = apps
            .iter()
            .filter_map(|a| find(&a.info, attr::APP_ARGV).and_then(Value::as_str))
            .collect();
        (!argvs.is_empty()).then(|| argvs.join(" : "))
    }

    /// The ranks of the job in process set `name`: those whose own data names it
    /// (`PSET_NAME` in their `PROC_DATA`), or else whose application's does (launchers such
    /// as pmixrun and prterun name the set of each application context given `--pset`).
    pub(crate) fn pset_ranks(&self, name: &str) -> Vec<Rank> {
        let named = |v: Option<Value>| v.as_ref().and_then(Value::as_str) == Some(name);
        let img = &self.image;
        let app_named = |appnum: Option<u32>| {
            img.apps()
                .iter()
                .find(|a| Some(a.id) == appnum)
                .and_then(|a| find(&a.info, attr::PSET_NAME))
                .and_then(Value::as_str)
                == Some(name)
        };
        (0..img.size())
            .map(Rank)
            .filter(|&rank| match img.proc_value(rank, attr::PSET_NAME) {
                Some(v) => named(Some(v)),
                None => app_named(img.realms_of(rank).0),
            })
            .collect()
    }

    /// This job data with `infos` among `rank`'s process values (see
    /// [`JobImage::with_proc_values`]): a new image, whose whole job data is derived again
    /// when first needed.
    pub(crate) fn with_proc_values(&self, rank: Rank, infos: &[Info]) -> Result<LazyJob, Error> {
        let image = self.image.with_proc_values(rank, infos).map_err(|e| {
            Error::BadRegistration(format!("cannot lay out the job data again: {e}"))
        })?;
        Ok(LazyJob::new(image, self.foreign))
    }

    /// Whether this is a namespace of another launcher run ([`Registration::foreign`]).
    pub(crate) fn is_foreign(&self) -> bool {
        self.foreign
    }

    /// Whether the whole job data was derived already.
    #[cfg(test)]
    pub(crate) fn is_built(&self) -> bool {
        self.full.get().is_some()
    }
}

impl Registration {
    /// A namespace of another launcher run, known from the job data its own server derived
    /// (a connect across runs brings it): none of its processes is local here.
    pub(crate) fn foreign(job: JobData) -> Result<Registration, Error> {
        let image = JobImage::from_job_data(&job)
            .map_err(|e| Error::BadRegistration(format!("job data of {}: {e}", job.nspace)))?;
        let size = image.size();
        let lazy = LazyJob::new(image, true);
        let _ = lazy.full.set(Arc::new(job));
        Ok(Registration {
            job: Arc::new(lazy),
            size,
            local_ranks: Vec::new(),
        })
    }
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

/// The server's own process, from the job-level values every namespace receives.
pub(crate) fn server_proc(extras: &[Info]) -> Proc {
    let nspace = find(extras, attr::SERVER_NSPACE)
        .and_then(|v| v.as_str())
        .and_then(|s| Nspace::new(s).ok())
        .unwrap_or_else(|| Nspace::new("rs-server").expect("a valid namespace name"));
    let rank = find(extras, attr::SERVER_RANK)
        .and_then(|v| v.as_rank())
        .unwrap_or(Rank(0));
    Proc::new(nspace, rank)
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
fn parse_maps(node_map: &Value, proc_map: &Value) -> Result<NodeMap, Error> {
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
    Ok(NodeMap { names, ppn })
}

/// Puts the node and process maps of the job level in OpenPMIx's compact `pmix[...]` form where
/// that is shorter than what the host gave (a raw map of a million ranks is megabytes, its
/// compact form a few hundred kilobytes): every client of the job reads them, libpmix's and
/// ours alike parse both forms. A value keeps its type (a string stays a string).
fn compact_maps(job: &mut [Info], maps: &NodeMap) {
    let ranks: Vec<Vec<u32>> = maps
        .ppn
        .iter()
        .map(|r| r.iter().map(|r| r.0).collect())
        .collect();
    let nodes = pmix_regex::generate_regex_with(&maps.names, pmix_regex::Form::Native);
    let procs = pmix_regex::generate_ppn_with(&ranks, pmix_regex::Form::Native);
    for (key, compact) in [(attr::NODE_MAP, nodes), (attr::PROC_MAP, procs)] {
        let Ok(compact) = compact else { continue };
        let Some(info) = job.iter_mut().find(|i| i.key.as_str() == key) else {
            continue;
        };
        let shorter = map_text(&info.value).is_some_and(|t| compact.len() < t.len());
        if !shorter {
            continue;
        }
        info.value = match &info.value {
            Value::String(_) => match String::from_utf8(compact) {
                Ok(s) => Value::String(s),
                Err(_) => continue,
            },
            _ => Value::Regex(compact),
        };
    }
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
    if let Some(m) = &maps {
        compact_maps(&mut lv.job, m);
    }

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
    // WILDCARD of LOCAL_SIZE, LOCAL_PEERS or LOCAL_PROCS means to them). This node's only:
    // what each client holds grows with its node, not with the job.
    let lsize = u32::try_from(local_ranks.len()).unwrap_or(u32::MAX);
    add_missing(&mut lv.job, attr::LOCAL_SIZE, lsize);
    add_missing(&mut lv.job, attr::LOCAL_PEERS, join_ranks(&local_ranks));
    if !has(&lv.job, attr::LOCAL_PROCS) {
        let procs = local_ranks.iter().map(|&r| Proc::new(nspace.clone(), r));
        add_missing(
            &mut lv.job,
            attr::LOCAL_PROCS,
            pmix_types::DataArray::from_procs(procs),
        );
    }
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

    let spec = if lv.nodata {
        // The host registered the namespace for bookkeeping only: clients get no data.
        JobSpec {
            nspace: nspace.clone(),
            session: Vec::new(),
            job: Vec::new(),
            apps: Vec::new(),
            app_of_rank: Vec::new(),
            size: 0,
            offset: 0,
            spawned: false,
            maps: None,
            given_nodes: Vec::new(),
            given_procs: BTreeMap::new(),
        }
    } else {
        JobSpec {
            nspace: nspace.clone(),
            session: lv.session,
            job: lv.job,
            apps: lv
                .apps
                .into_iter()
                .map(|(id, info)| Realm { id, info })
                .collect(),
            app_of_rank,
            size,
            offset,
            spawned,
            maps,
            given_nodes: lv.nodes,
            given_procs: lv.procs,
        }
    };
    let image = JobImage::build(&spec)
        .map_err(|e| Error::BadRegistration(format!("cannot lay out the job data: {e}")))?;
    Ok(Registration {
        job: Arc::new(LazyJob::new(image, false)),
        size,
        local_ranks,
    })
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
