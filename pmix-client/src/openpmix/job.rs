//! An OpenPMIx server's job information turned into the [`JobData`] the store files: the
//! reverse of the layout `pmix-server` hands libpmix clients (`pmix-server/src/openpmix/job.rs`).
//!
//! What arrives (the answer to `REQ`, or the job-level byte object of a `GETNB` or `CONNECTNB`
//! answer, as the `hash` storage module packs them) is a flat list of key/value pairs:
//! job-level keys alone; `pmix.ssn.arr`, an info array of session-level keys; one
//! `pmix.node.arr` per node and one `pmix.app.arr` per application, each an info array
//! naming its node (`NODEID`, else `HOSTNAME`) or application (`APPNUM`); and per rank either
//! a `pmix.pblob` byte object (a `PROC_RANK` then the rank's pairs, in the connection's
//! dialect; the `REQ` answer) or a `pmix.pdata` info array whose first entry is `pmix.rank`
//! (a `GETNB` of rank `WILDCARD`). A later session array (the default session, when the job
//! has its own) only adds keys the first lacks.
//!
//! One more step makes the result read the way a pmix-rs server's job data does: the node
//! this process runs on has its node-level keys (`LOCAL_SIZE`, `LOCAL_PEERS`, `LOCALLDR`, ...)
//! also at the job level, where a Get of rank `WILDCARD` finds them (libpmix answers such a
//! Get from this node's array).

use pmix_types::{Info, Nspace, Rank, Value, attr};
use pmix_wire::openpmix::{Dialect, JobInfo, Kval, MAP_BLOB, PROC_BLOB, decode_rank_blob};
use pmix_wire::{JobData, ProcRealm, Realm};

/// Where this process runs, to find "this node" among a job's nodes.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Here<'a> {
    /// This process's rank, when `info` is its own namespace's.
    pub(crate) rank: Option<Rank>,
    /// This node's name.
    pub(crate) hostname: Option<&'a str>,
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

fn find<'a>(infos: &'a [Info], key: &str) -> Option<&'a Value> {
    infos
        .iter()
        .find(|i| i.key.as_str() == key)
        .map(|i| &i.value)
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
pub(crate) fn job_data(
    info: JobInfo,
    dialect: Dialect,
    here: Here<'_>,
) -> Result<JobData, pmix_wire::Error> {
    job_data_of(info.nspace, info.kvals, dialect, here)
}

/// [`job_data`] from the namespace and the pairs.
pub(crate) fn job_data_of(
    nspace: Nspace,
    kvals: Vec<Kval>,
    dialect: Dialect,
    here: Here<'_>,
) -> Result<JobData, pmix_wire::Error> {
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
                match rank {
                    Some(rank) => {
                        info.remove(0);
                        add_proc(rank, info);
                    }
                    None => tracing::debug!(
                        "pmix-client: a {} array of {nspace} names no rank; ignored",
                        attr::PROC_INFO_ARRAY
                    ),
                }
            }
            (PROC_BLOB, _) => match &value {
                Value::ByteObject(bytes) => {
                    let (rank, kvals) = decode_rank_blob(bytes, dialect)?;
                    add_proc(rank, infos_of(kvals));
                }
                other => {
                    return Err(pmix_wire::Error::Malformed(format!(
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

    // This node's keys at the job level too.
    let mine = here
        .rank
        .and_then(|r| procs.iter().find(|p| p.rank == r))
        .and_then(|p| find(&p.info, attr::NODEID))
        .and_then(Value::as_u32)
        .filter(|id| realms.iter().any(|r| r.id == *id))
        .or_else(|| {
            let host = here.hostname?;
            realms
                .iter()
                .find(|r| find(&r.info, attr::HOSTNAME).and_then(Value::as_str) == Some(host))
                .map(|r| r.id)
        });
    if let Some(node) = mine.and_then(|id| realms.iter().find(|r| r.id == id)) {
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

/// The hostname a rank's job data names, if any.
pub(crate) fn hostname_of(job: &JobData, rank: Rank) -> Option<&str> {
    let p = job.procs.iter().find(|p| p.rank == rank)?;
    if let Some(h) = find(&p.info, attr::HOSTNAME).and_then(Value::as_str) {
        return Some(h);
    }
    let node = find(&p.info, attr::NODEID).and_then(Value::as_u32)?;
    let n = job.nodes.iter().find(|n| n.id == node)?;
    find(&n.info, attr::HOSTNAME).and_then(Value::as_str)
}
