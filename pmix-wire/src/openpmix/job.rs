//! A namespace's job data as the OpenPMIx wire carries it, both ways: [`layout`] and
//! [`to_job_info`] arrange a [`JobData`] the way a libpmix client's `hash` storage module
//! files it (what a pmix-rs server hands libpmix clients), and [`from_job_info`] turns such a
//! layout, from a pmix-rs server or a real OpenPMIx one, back into a [`JobData`] (what a
//! pmix-rs client makes of it). The two directions live in one file so that a change to one
//! is seen next to the other, and a property test (`tests/openpmix_job.rs`) holds them to
//! each other.
//!
//! # The layout
//!
//! A flat list of key/value pairs ([`Kval`]):
//!
//! - the job-level keys alone, plus `NODE_LIST` (the hostnames by node id) when the host gave
//!   none;
//! - `pmix.ssn.arr`, an info array of the session-level keys, opening with `SESSION_ID`
//!   (`u32::MAX` when the job has no session: the client files a session array only under its
//!   id);
//! - one `pmix.node.arr` per node and one `pmix.app.arr` per application, each an info array
//!   opening with the node's `NODEID` or the application's `APPNUM` when it lacks one, its
//!   last entry flagged `ARRAY_END` as the reference flags the arrays it builds;
//! - per rank, a `pmix.pblob` byte object ([`PROC_BLOB`]: a `PROC_RANK`, then the rank's
//!   pairs, packed in the connection's dialect).
//!
//! Left out on purpose: `PMIX_REGEX` values (node and process maps), which the levels already
//! spell out (the reference server does not forward them to `hash` clients either), and
//! job-level info arrays that the levels replace.
//!
//! # Reading it back
//!
//! [`from_kvals`] also reads what a real OpenPMIx server sends beyond this layout: a node
//! array may name its node by `HOSTNAME` only, a rank's data may come as a `pmix.pdata` info
//! array whose first entry is `pmix.rank` (a `GETNB` of rank `WILDCARD`; one naming no rank is
//! ignored), the per-node process lists of `pmix.mblob` repeat the rank data and are skipped,
//! and a later array of a level already seen only adds the keys the first lacks.
//!
//! One more step makes the result read the way a pmix-rs server's job data does: the node the
//! reading process runs on ([`Here`]) has its node-level keys (`LOCAL_SIZE`, `LOCAL_PEERS`,
//! ...) also at the job level, where a Get of rank `WILDCARD` finds them (libpmix answers such
//! a Get from this node's array).

use pmix_types::{DataType, Info, Key, Nspace, Proc, Rank, Value, attr};

use super::{
    Dialect, JobInfo, Kval, MAP_BLOB, PROC_BLOB, ProcKvals, decode_rank_blob, info_array,
    proc_blob_kval,
};
use crate::{Error, JobData, ProcRealm, Realm};

/// The session id the reference uses when a job has none.
pub const NO_SESSION: u32 = u32::MAX;

/// Keys whose values are levels of their own here; a host that also gave them as job-level
/// arrays would otherwise have them twice, once in a layout the client reads differently.
const LEVEL_ARRAYS: [&str; 5] = [
    attr::SESSION_INFO_ARRAY,
    attr::JOB_INFO_ARRAY,
    attr::APP_INFO_ARRAY,
    attr::NODE_INFO_ARRAY,
    attr::PROC_DATA,
];

/// A namespace's job data laid out for a libpmix client, before the ranks are packed.
#[derive(Debug)]
pub struct JobLayout<'a> {
    /// Top-level pairs, in order: job keys, then the session, node and application arrays.
    pub top: Vec<Kval>,
    /// Each rank's own keys, for its [`PROC_BLOB`] (or its entry of a `GETNB` answer).
    pub procs: Vec<(Rank, &'a [Info])>,
}

fn find<'a>(infos: &'a [Info], key: &str) -> Option<&'a Value> {
    infos
        .iter()
        .find(|i| i.key.as_str() == key)
        .map(|i| &i.value)
}

fn key(s: &str) -> Option<Key> {
    Key::new(s).ok()
}

fn is_map(i: &Info) -> bool {
    matches!(i.value, Value::Regex(_))
}

/// The level array `array` of `infos`, with `id` in front when `infos` lacks its key.
fn level_array(array: &str, id: Info, infos: &[Info]) -> Option<Kval> {
    let array = key(array)?;
    let mut items: Vec<Info> = Vec::with_capacity(infos.len() + 1);
    if find(infos, id.key.as_str()).is_none() {
        items.push(id);
    }
    items.extend(infos.iter().filter(|i| !is_map(i)).cloned());
    Some(info_array(array, items))
}

/// Lays `job` out for a libpmix client (see the module's documentation).
pub fn layout(job: &JobData) -> JobLayout<'_> {
    let mut top: Vec<Kval> = job
        .job
        .iter()
        .filter(|i| !is_map(i) && !LEVEL_ARRAYS.contains(&i.key.as_str()))
        .map(|i| Kval::new(i.key.clone(), i.value.clone()))
        .collect();

    if find(&job.job, attr::NODE_LIST).is_none() {
        let mut nodes: Vec<&Realm> = job.nodes.iter().collect();
        nodes.sort_by_key(|r| r.id);
        let names: Vec<&str> = nodes
            .iter()
            .filter_map(|r| find(&r.info, attr::HOSTNAME).and_then(Value::as_str))
            .collect();
        if let (false, Some(k)) = (names.is_empty(), key(attr::NODE_LIST)) {
            top.push(Kval::new(k, Value::String(names.join(","))));
        }
    }

    // The client files a session array only under its id, and a node or application array
    // only under its id or number: each gets one even when the host named none.
    let session_id = find(&job.session, attr::SESSION_ID)
        .cloned()
        .unwrap_or(Value::Uint32(NO_SESSION));
    if let Some(id) = key(attr::SESSION_ID) {
        top.extend(level_array(
            attr::SESSION_INFO_ARRAY,
            Info::new(id, session_id),
            &job.session,
        ));
    }
    let realms = [
        (attr::NODE_INFO_ARRAY, attr::NODEID, &job.nodes),
        (attr::APP_INFO_ARRAY, attr::APPNUM, &job.apps),
    ];
    for (array, id_key, realms) in realms {
        if let Some(id) = key(id_key) {
            for r in realms {
                top.extend(level_array(array, Info::new(id.clone(), r.id), &r.info));
            }
        }
    }

    let procs = job
        .procs
        .iter()
        .map(|p| (p.rank, p.info.as_slice()))
        .collect();
    JobLayout { top, procs }
}

/// A rank's keys as pairs, maps left out.
fn kvals(infos: &[Info]) -> Vec<Kval> {
    infos
        .iter()
        .filter(|i| !is_map(i))
        .map(|i| Kval::new(i.key.clone(), i.value.clone()))
        .collect()
}

/// `job` as a libpmix client files it: the [`layout`]'s pairs, then one [`PROC_BLOB`] per rank
/// packed in `dialect`. This is the answer to a client's `REQ`, and what a `CONNECTNB`
/// answer carries for each other namespace.
pub fn to_job_info(job: &JobData, dialect: Dialect) -> Result<JobInfo, Error> {
    let procs = job.procs.iter().map(|p| (p.rank, p.info.as_slice()));
    to_job_info_with(job, procs, dialect)
}

/// [`to_job_info`] of a job whose process realms come one at a time: `levels` is the job
/// data without them (its `procs` are ignored), `procs` each rank's keys in rank order. A
/// writer holding a job compactly (`JobImage`) thus never has every rank's realm at once.
pub fn to_job_info_with<I, P>(
    levels: &JobData,
    procs: I,
    dialect: Dialect,
) -> Result<JobInfo, Error>
where
    I: IntoIterator<Item = (Rank, P)>,
    P: AsRef<[Info]>,
{
    let mut pairs = layout(levels).top;
    for (rank, infos) in procs {
        pairs.push(proc_blob_kval(rank, &kvals(infos.as_ref()), dialect)?);
    }
    Ok(JobInfo {
        nspace: levels.nspace.clone(),
        kvals: pairs,
    })
}

/// `job` inside a `GETNB` answer, for a client asking about a process it has no job data for:
/// the [`layout`]'s pairs under rank `WILDCARD`, then each rank's own keys under that rank.
pub fn to_proc_kvals(job: &JobData) -> Vec<ProcKvals> {
    let layout = layout(job);
    let mut out = Vec::with_capacity(layout.procs.len() + 1);
    out.push(ProcKvals {
        proc: Proc::new(job.nspace.clone(), Rank::WILDCARD),
        kvals: layout.top,
    });
    for (rank, infos) in layout.procs {
        out.push(ProcKvals {
            proc: Proc::new(job.nspace.clone(), rank),
            kvals: kvals(infos),
        });
    }
    out
}

/// Where the reading process runs, to find "this node" among a job's nodes: the node of its
/// rank when the job data is its own namespace's and names the rank's `NODEID`, else the node
/// whose `HOSTNAME` is `hostname`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Here<'a> {
    /// The reader's rank, when the job data is its own namespace's.
    pub rank: Option<Rank>,
    /// The reader's node name.
    pub hostname: Option<&'a str>,
}

/// A node array before its id is known.
struct NodeArray {
    id: Option<u32>,
    hostname: Option<String>,
    info: Vec<Info>,
}

/// The entries of an info array, without the flags (`ARRAY_END`) the sender marked them with.
fn entries(v: &Value) -> Option<Vec<Info>> {
    match v {
        Value::DataArray(a) => Some(
            a.infos()
                .map(|i| Info::new(i.key.clone(), i.value.clone()))
                .collect(),
        ),
        _ => None,
    }
}

/// Adds `more` to `to`, each key only if `to` does not have it yet.
fn add_missing(to: &mut Vec<Info>, more: impl IntoIterator<Item = Info>) {
    for i in more {
        if find(to, i.key.as_str()).is_none() {
            to.push(i);
        }
    }
}

fn infos_of(kvals: Vec<Kval>) -> Vec<Info> {
    kvals
        .into_iter()
        .map(|kv| Info::new(kv.key, kv.value))
        .collect()
}

/// `info` as [`JobData`]; `dialect` is the connection's (rank blobs are packed in it).
pub fn from_job_info(info: JobInfo, dialect: Dialect, here: Here<'_>) -> Result<JobData, Error> {
    from_kvals(info.nspace, info.kvals, dialect, here)
}

/// [`from_job_info`] from the namespace and the pairs (the rank `WILDCARD` entry of a `GETNB`
/// answer has no [`JobInfo`] around it).
pub fn from_kvals(
    nspace: Nspace,
    kvals: Vec<Kval>,
    dialect: Dialect,
    here: Here<'_>,
) -> Result<JobData, Error> {
    let mut session: Option<Vec<Info>> = None;
    let mut job: Vec<Info> = Vec::new();
    let mut nodes: Vec<NodeArray> = Vec::new();
    let mut apps: Vec<(Option<u32>, Vec<Info>)> = Vec::new();
    let mut procs: Vec<ProcRealm> = Vec::new();
    let mut add_proc = |rank: Rank, info: Vec<Info>| match procs.iter_mut().find(|p| p.rank == rank)
    {
        Some(p) => add_missing(&mut p.info, info),
        None => procs.push(ProcRealm { rank, info }),
    };

    for Kval { key, value } in kvals {
        match (key.as_str(), entries(&value)) {
            (attr::SESSION_INFO_ARRAY, Some(infos)) => match &mut session {
                Some(s) => add_missing(s, infos),
                None => session = Some(infos),
            },
            (attr::NODE_INFO_ARRAY, Some(info)) => nodes.push(NodeArray {
                id: find(&info, attr::NODEID).and_then(Value::as_u32),
                hostname: find(&info, attr::HOSTNAME)
                    .and_then(Value::as_str)
                    .map(str::to_owned),
                info,
            }),
            (attr::APP_INFO_ARRAY, Some(info)) => {
                apps.push((find(&info, attr::APPNUM).and_then(Value::as_u32), info));
            }
            (attr::PROC_INFO_ARRAY, Some(mut info)) => {
                let rank = match info.first() {
                    Some(first) if first.key.as_str() == attr::RANK => match &first.value {
                        Value::Rank(r) => Some(*r),
                        v => v.as_u32().map(Rank),
                    },
                    _ => None,
                };
                // An array naming no rank belongs to nobody; the rest of the data still does.
                if let Some(rank) = rank {
                    info.remove(0);
                    add_proc(rank, info);
                }
            }
            (PROC_BLOB, _) => match &value {
                Value::ByteObject(bytes) => {
                    let (rank, kvals) = decode_rank_blob(bytes, dialect)?;
                    add_proc(rank, infos_of(kvals));
                }
                other => {
                    return Err(Error::Malformed(format!(
                        "{PROC_BLOB} of {nspace} is a {:?}, not a byte object",
                        other.data_type()
                    )));
                }
            },
            // The per-node process lists of the map blob say again what the rank data says.
            (MAP_BLOB, _) => {}
            _ => job.push(Info::new(key, value)),
        }
    }

    // Node ids: the array's own, else the id of a rank on that host, else a new one.
    let known: Vec<(String, u32)> = procs
        .iter()
        .filter_map(|p| {
            let host = find(&p.info, attr::HOSTNAME)?.as_str()?;
            let id = find(&p.info, attr::NODEID)?.as_u32()?;
            Some((host.to_owned(), id))
        })
        .collect();
    let mut next_id = nodes
        .iter()
        .filter_map(|n| n.id)
        .chain(known.iter().map(|(_, id)| *id))
        .max()
        .map_or(0, |m| m.saturating_add(1));
    let mut realms: Vec<Realm> = Vec::with_capacity(nodes.len());
    for n in nodes {
        let id =
            n.id.or_else(|| {
                let host = n.hostname.as_deref()?;
                known.iter().find(|(h, _)| h == host).map(|(_, id)| *id)
            })
            .unwrap_or_else(|| {
                let id = next_id;
                next_id = next_id.saturating_add(1);
                id
            });
        match realms.iter_mut().find(|r| r.id == id) {
            Some(r) => add_missing(&mut r.info, n.info),
            None => realms.push(Realm { id, info: n.info }),
        }
    }
    realms.sort_by_key(|r| r.id);

    let mut next_app = apps
        .iter()
        .filter_map(|(id, _)| *id)
        .max()
        .map_or(0, |m| m.saturating_add(1));
    let mut app_realms: Vec<Realm> = Vec::with_capacity(apps.len());
    for (id, info) in apps {
        let id = id.unwrap_or_else(|| {
            let id = next_app;
            next_app = next_app.saturating_add(1);
            id
        });
        match app_realms.iter_mut().find(|r| r.id == id) {
            Some(r) => add_missing(&mut r.info, info),
            None => app_realms.push(Realm { id, info }),
        }
    }
    app_realms.sort_by_key(|r| r.id);
    procs.sort_by_key(|p| p.rank);

    normalize_types(&mut job);
    for level in realms.iter_mut().chain(app_realms.iter_mut()) {
        normalize_types(&mut level.info);
    }
    for p in &mut procs {
        normalize_types(&mut p.info);
    }
    derive_proc_nodes(&mut procs, &realms);
    derive_apps(&mut job, &mut app_realms, &procs);

    if let Some(node) = this_node(&realms, &procs, here) {
        add_missing(&mut job, node.info.iter().cloned());
    }

    Ok(JobData {
        nspace,
        session: session.unwrap_or_default(),
        job,
        apps: app_realms,
        nodes: realms,
        procs,
    })
}

/// Reserved keys whose value came as another integer type than the standard gives them
/// (Slurm's server hands `APPNUM` as an `int`, where the standard says `uint32`) get the
/// standard's type when the value fits in it, so that a caller comparing values, or matching
/// on the variant, sees the same thing under every server. Anything else is left as sent.
fn normalize_types(infos: &mut [Info]) {
    for i in infos {
        let Some(a) = attr::lookup(i.key.as_str()) else {
            continue;
        };
        if i.value.data_type() == a.ty {
            continue;
        }
        let Some(n) = i.value.as_u64() else {
            continue;
        };
        let v = match a.ty {
            DataType::UINT8 => u8::try_from(n).ok().map(Value::Uint8),
            DataType::UINT16 => u16::try_from(n).ok().map(Value::Uint16),
            DataType::UINT32 => u32::try_from(n).ok().map(Value::Uint32),
            DataType::UINT64 => Some(Value::Uint64(n)),
            DataType::SIZE => Some(Value::Size(n)),
            DataType::PROC_RANK => u32::try_from(n).ok().map(|r| Value::Rank(Rank(r))),
            _ => None,
        };
        if let Some(v) = v {
            i.value = v;
        }
    }
}

/// A rank's node, and what that node says about the rank when the host left it out.
///
/// The node is the node array of the rank's `HOSTNAME` when there is one, else that of its
/// `NODEID`: Slurm's server (libpmix 4.2 in slurmstepd) gives every rank of another node the
/// reader's own `NODEID`, next to the right `HOSTNAME`, so a rank's node-level keys would be
/// answered from the reader's node. The rank's `NODEID` is set to that node's id. A rank
/// without `LOCAL_RANK` (Slurm gives it only to the reader's node's ranks) gets its place in
/// that node's `LOCAL_PEERS`. `NODE_RANK` is not derived: it counts the ranks of every job on
/// the node, which one job's data does not tell.
fn derive_proc_nodes(procs: &mut [ProcRealm], nodes: &[Realm]) {
    for p in procs {
        let by_host = find(&p.info, attr::HOSTNAME)
            .and_then(Value::as_str)
            .and_then(|h| {
                nodes
                    .iter()
                    .find(|n| find(&n.info, attr::HOSTNAME).and_then(Value::as_str) == Some(h))
            });
        let node = match by_host {
            Some(n) => {
                match p.info.iter_mut().find(|i| i.key.as_str() == attr::NODEID) {
                    Some(i) => i.value = Value::Uint32(n.id),
                    None => p.info.push(Info::attr(attr::NODEID, Value::Uint32(n.id))),
                }
                n
            }
            None => {
                let id = find(&p.info, attr::NODEID).and_then(Value::as_u32);
                match nodes.iter().find(|n| Some(n.id) == id) {
                    Some(n) => n,
                    None => continue,
                }
            }
        };
        if find(&p.info, attr::LOCAL_RANK).is_some() {
            continue;
        }
        let place = find(&node.info, attr::LOCAL_PEERS)
            .and_then(Value::as_str)
            .and_then(|peers| {
                peers
                    .split(',')
                    .position(|r| r.trim().parse::<u32>().ok() == Some(p.rank.0))
            })
            .and_then(|i| u16::try_from(i).ok());
        if let Some(i) = place {
            p.info.push(Info::attr(attr::LOCAL_RANK, Value::Uint16(i)));
        }
    }
}

/// The application level, when the host gave the ranks' `APPNUM` but not the applications
/// (Slurm's server sends no `pmix.app.arr` and no `JOB_NUM_APPS`): each application's
/// `APP_SIZE` and `APPLDR` (its lowest rank), and the job's `JOB_NUM_APPS`. Only when every
/// rank of the job is here (`JOB_SIZE` of them): a count over part of the job would be wrong.
fn derive_apps(job: &mut Vec<Info>, apps: &mut Vec<Realm>, procs: &[ProcRealm]) {
    let size = find(job, attr::JOB_SIZE).and_then(Value::as_u32);
    if size.is_none_or(|n| usize::try_from(n).ok() != Some(procs.len())) {
        return;
    }
    // appnum -> (ranks, lowest rank)
    let mut seen: Vec<(u32, u32, Rank)> = Vec::new();
    for p in procs {
        let Some(app) = find(&p.info, attr::APPNUM).and_then(Value::as_u32) else {
            return;
        };
        match seen.iter_mut().find(|(a, _, _)| *a == app) {
            Some((_, n, ldr)) => {
                *n += 1;
                *ldr = (*ldr).min(p.rank);
            }
            None => seen.push((app, 1, p.rank)),
        }
    }
    for (app, n, ldr) in seen {
        let derived = [
            Info::attr(attr::APPNUM, Value::Uint32(app)),
            Info::attr(attr::APP_SIZE, Value::Uint32(n)),
            Info::attr(attr::APPLDR, Value::Rank(ldr)),
        ];
        match apps.iter_mut().find(|r| r.id == app) {
            Some(r) => add_missing(&mut r.info, derived),
            None => apps.push(Realm {
                id: app,
                info: derived.into(),
            }),
        }
    }
    apps.sort_by_key(|r| r.id);
    let napps = u32::try_from(apps.len()).unwrap_or(u32::MAX);
    add_missing(job, [Info::attr(attr::JOB_NUM_APPS, Value::Uint32(napps))]);
}

/// The node `here` names among `nodes` (see [`Here`]).
fn this_node<'a>(nodes: &'a [Realm], procs: &[ProcRealm], here: Here<'_>) -> Option<&'a Realm> {
    let by_rank = here
        .rank
        .and_then(|r| procs.iter().find(|p| p.rank == r))
        .and_then(|p| find(&p.info, attr::NODEID))
        .and_then(Value::as_u32)
        .and_then(|id| nodes.iter().find(|r| r.id == id));
    by_rank.or_else(|| {
        let host = here.hostname?;
        nodes
            .iter()
            .find(|r| find(&r.info, attr::HOSTNAME).and_then(Value::as_str) == Some(host))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmix_types::InfoFlags;

    fn info(k: &'static str, v: impl Into<Value>) -> Info {
        Info::attr(k, v)
    }

    fn job() -> JobData {
        JobData {
            nspace: Nspace::new("j").unwrap(),
            session: vec![info(attr::UNIV_SIZE, 4u32)],
            job: vec![
                info(attr::JOB_SIZE, 2u32),
                info(attr::NODE_MAP, Value::Regex(b"raw:n0\0".to_vec())),
                info(attr::LOCAL_SIZE, 2u32),
            ],
            apps: vec![Realm {
                id: 0,
                info: vec![info(attr::APP_SIZE, 2u32)],
            }],
            nodes: vec![Realm {
                id: 0,
                info: vec![info(attr::NODEID, 0u32), info(attr::HOSTNAME, "n0")],
            }],
            procs: (0..2)
                .map(|r| ProcRealm {
                    rank: Rank(r),
                    info: vec![info(attr::LOCAL_RANK, r as u16)],
                })
                .collect(),
        }
    }

    fn array_of<'a>(l: &'a JobLayout<'_>, k: &str) -> Vec<&'a Info> {
        l.top
            .iter()
            .filter(|kv| kv.key.as_str() == k)
            .flat_map(|kv| match &kv.value {
                Value::DataArray(a) => a.infos().collect::<Vec<_>>(),
                _ => Vec::new(),
            })
            .collect()
    }

    #[test]
    fn maps_are_left_out_and_levels_become_arrays() {
        let j = job();
        let l = layout(&j);
        let keys: Vec<&str> = l.top.iter().map(|kv| kv.key.as_str()).collect();
        assert!(!keys.contains(&attr::NODE_MAP), "{keys:?}");
        assert!(keys.contains(&attr::JOB_SIZE));
        assert_eq!(
            l.top
                .iter()
                .find(|kv| kv.key.as_str() == attr::NODE_LIST)
                .map(|kv| kv.value.clone()),
            Some(Value::String("n0".into()))
        );

        let session = array_of(&l, attr::SESSION_INFO_ARRAY);
        assert_eq!(session[0].key.as_str(), attr::SESSION_ID);
        assert_eq!(session[0].value, Value::Uint32(u32::MAX));
        assert_eq!(session[1].key.as_str(), attr::UNIV_SIZE);
        assert!(session[1].flags.contains(InfoFlags::ARRAY_END));
        assert!(!session[0].flags.contains(InfoFlags::ARRAY_END));

        // The node realm has its id already: not added twice.
        let node = array_of(&l, attr::NODE_INFO_ARRAY);
        assert_eq!(
            node.iter()
                .filter(|i| i.key.as_str() == attr::NODEID)
                .count(),
            1
        );
        let app = array_of(&l, attr::APP_INFO_ARRAY);
        assert_eq!(app[0].key.as_str(), attr::APPNUM);
        assert_eq!(app[0].value, Value::Uint32(0));

        assert_eq!(l.procs.len(), 2);
        assert_eq!(l.procs[1].0, Rank(1));
    }

    /// Job data as Slurm 22.05's server (libpmix 4.2 in slurmstepd) sends it to a reader on
    /// node1 of a 2-node, 4-rank step: node arrays with `HOSTNAME`, `NODEID` and
    /// `LOCAL_PEERS`; each rank's data as `pmix.pdata`, with `APPNUM` and `APPLDR` as `int`,
    /// `LOCAL_RANK` only for node1's ranks, and node1's `NODEID` for every rank; no
    /// application array, no `JOB_NUM_APPS`.
    fn slurm_kvals() -> Vec<Kval> {
        let node = |id: u32, host: &str, peers: &str| {
            super::super::info_array(
                Key::new(attr::NODE_INFO_ARRAY).unwrap(),
                vec![
                    info(attr::HOSTNAME, host),
                    info(attr::NODEID, id),
                    info(attr::LOCAL_PEERS, peers),
                    info(attr::LOCAL_SIZE, 2u32),
                ],
            )
        };
        let rank = |r: u32| {
            let mut i = vec![
                info(attr::RANK, Rank(r)),
                info(attr::APPNUM, Value::Int(0)),
                info(attr::APPLDR, Value::Int(0)),
                info(attr::HOSTNAME, if r < 2 { "node1" } else { "node2" }),
            ];
            if r < 2 {
                i.push(info(attr::LOCAL_RANK, Value::Uint16(r as u16)));
            }
            i.push(info(attr::NODEID, 0u32));
            super::super::info_array(Key::new(attr::PROC_INFO_ARRAY).unwrap(), i)
        };
        let mut kv = vec![Kval {
            key: Key::new(attr::JOB_SIZE).unwrap(),
            value: Value::Uint32(4),
        }];
        kv.push(node(0, "node1", "0,1"));
        kv.push(node(1, "node2", "2,3"));
        kv.extend((0..4).map(rank));
        kv
    }

    fn proc_value<'a>(j: &'a JobData, r: u32, k: &str) -> Option<&'a Value> {
        j.procs
            .iter()
            .find(|p| p.rank == Rank(r))
            .and_then(|p| find(&p.info, k))
    }

    #[test]
    fn slurm_job_data_reads_with_each_rank_on_its_own_node() {
        let here = Here {
            rank: Some(Rank(0)),
            hostname: Some("node1"),
        };
        let j = from_kvals(Nspace::new("s").unwrap(), slurm_kvals(), Dialect::V41, here).unwrap();
        for r in 0..4 {
            let node = if r < 2 { 0u32 } else { 1 };
            assert_eq!(
                proc_value(&j, r, attr::NODEID),
                Some(&Value::Uint32(node)),
                "rank {r}"
            );
            // Its place in its node's LOCAL_PEERS, given or derived.
            assert_eq!(
                proc_value(&j, r, attr::LOCAL_RANK),
                Some(&Value::Uint16((r % 2) as u16)),
                "rank {r}"
            );
            // The standard's types.
            assert_eq!(proc_value(&j, r, attr::APPNUM), Some(&Value::Uint32(0)));
            assert_eq!(proc_value(&j, r, attr::APPLDR), Some(&Value::Rank(Rank(0))));
            // Only what one job's data can tell.
            assert_eq!(proc_value(&j, r, attr::NODE_RANK), None);
        }
        // The application level, from the ranks' APPNUM.
        assert_eq!(find(&j.job, attr::JOB_NUM_APPS), Some(&Value::Uint32(1)));
        assert_eq!(j.apps.len(), 1);
        assert_eq!(
            find(&j.apps[0].info, attr::APP_SIZE),
            Some(&Value::Uint32(4))
        );
        assert_eq!(
            find(&j.apps[0].info, attr::APPLDR),
            Some(&Value::Rank(Rank(0)))
        );
        // This node's keys at the job level: node1's.
        assert_eq!(find(&j.job, attr::LOCAL_PEERS), Some(&Value::from("0,1")));
    }

    #[test]
    fn applications_are_not_counted_from_part_of_a_job() {
        let mut kv = slurm_kvals();
        kv.pop(); // rank 3's data
        let j = from_kvals(Nspace::new("s").unwrap(), kv, Dialect::V41, Here::default()).unwrap();
        assert_eq!(find(&j.job, attr::JOB_NUM_APPS), None);
        assert!(j.apps.is_empty());
    }

    #[test]
    fn a_value_that_does_not_fit_the_standard_type_is_kept_as_sent() {
        let mut infos = vec![
            info(attr::APPNUM, Value::Int(-1)),
            info(attr::LOCAL_RANK, Value::Uint32(70_000)),
            info("app.key", Value::Int(3)),
            info(attr::JOB_SIZE, Value::Size(4)),
        ];
        normalize_types(&mut infos);
        assert_eq!(infos[0].value, Value::Int(-1));
        assert_eq!(infos[1].value, Value::Uint32(70_000));
        assert_eq!(infos[2].value, Value::Int(3));
        assert_eq!(infos[3].value, Value::Uint32(4));
    }
}
