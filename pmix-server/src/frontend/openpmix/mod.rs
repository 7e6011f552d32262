//! The OpenPMIx 4.2 personality of the server: what lets processes linked to the C libpmix
//! client (Open MPI, python3-pmix, any libpmix program) run under a pmix-rs server.
//!
//! The wire format itself is `pmix_wire::openpmix`; here is what the server makes of it: the
//! environment a libpmix client needs ([`fork_env`]), the job data it is handed at init
//! (laid out by `pmix_wire::openpmix::job`) and the translation of its requests into the engine's ([`conn`]). The engine
//! serves these clients exactly as it serves native ones, so the two kinds share fences and
//! each other's data.

mod collected;
mod common;
mod conn;
pub(crate) mod ds21;
mod tool;

pub(crate) use collected::SharedCollected;
pub(crate) use common::{Common, Gds};
pub(crate) use conn::OpenpmixConn;

use pmix_types::{Info, Rank, Value};
use pmix_wire::openpmix::job::{layout, to_job_info_with};
use pmix_wire::openpmix::{Dialect, JobInfo, Kval, Reply};
use pmix_wire::{JobData, JobImage};

/// The version this server claims in `PMIX_VERSION`. A libpmix client takes it for its
/// server's and picks its compatibility paths by it: anything before 3.1.100 makes it expect
/// older job-data layouts.
pub(crate) const ADVERTISED_VERSION: &str = "4.2.2";

/// The environment a libpmix client needs to find and talk to this server, `uri` being
/// `<server nspace>.<rank>;tcp4://127.0.0.1:<port>`.
///
/// Only the URI variables of the protocol versions this server speaks are set: the client
/// picks its codec by the first of `PMIX_SERVER_URI41`, `URI4`, `URI3`, `URI21`, `URI2` it
/// finds. `PMIX_GDS_MODULE=hash` makes every datum travel over the socket (the other storage
/// modules are shared-memory layouts, not a protocol).
pub(crate) fn fork_env(
    uri: &str,
    hostname: &str,
    ds21_dir: Option<&std::path::Path>,
) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = [
        "PMIX_SERVER_URI41",
        "PMIX_SERVER_URI4",
        "PMIX_SERVER_URI3",
        "PMIX_SERVER_URI21",
    ]
    .into_iter()
    .map(|k| (k.to_string(), uri.to_string()))
    .collect();
    env.extend(
        [
            ("PMIX_SECURITY_MODE", "native"),
            ("PMIX_BFROP_BUFFER_TYPE", "PMIX_BFROP_BUFFER_NON_DESC"),
            (
                "PMIX_GDS_MODULE",
                if ds21_dir.is_some() {
                    "ds21,hash"
                } else {
                    "hash"
                },
            ),
            ("PMIX_VERSION", ADVERTISED_VERSION),
            ("PMIX_HOSTNAME", hostname),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    if let Some(dir) = ds21_dir {
        env.extend(ds21::fork_env(dir));
    }
    env
}

/// The encoded answer to a `REQ` (no header): the job's levels, then each rank's keys, derived
/// from the image one rank at a time (the whole [`JobData`] is never built for it).
pub(crate) fn encode_job_data(
    job: &JobImage,
    dialect: Dialect,
) -> Result<Vec<u8>, pmix_wire::Error> {
    let levels = job.levels();
    let mut out = Vec::new();
    Reply::JobInfo(to_job_info_with(&levels, proc_realms(job), dialect)?)
        .encode(dialect, &mut out)?;
    Ok(out)
}

/// Each rank's keys as the image derives them, in rank order, one at a time.
fn proc_realms(job: &JobImage) -> impl Iterator<Item = (Rank, Vec<Info>)> + '_ {
    job.proc_ranks()
        .into_iter()
        .filter_map(|rank| Some((rank, job.proc_info(rank)?)))
}

/// The answer to a `REQ` from a client on the `ds21` store: the namespace, then only the
/// session, node and application arrays (the client files those in its own hash; the rest it
/// reads from the segments). `levels` is the job data without its process realms
/// ([`JobImage::levels`]): none of them is read.
pub(crate) fn ds21_job_info(levels: &JobData) -> JobInfo {
    let arrays = [
        pmix_types::attr::SESSION_INFO_ARRAY,
        pmix_types::attr::NODE_INFO_ARRAY,
        pmix_types::attr::APP_INFO_ARRAY,
    ];
    let kvals = layout(levels)
        .top
        .into_iter()
        .filter(|kv| arrays.contains(&kv.key.as_str()))
        .collect();
    JobInfo {
        nspace: levels.nspace.clone(),
        kvals,
    }
}

/// A namespace's job data as the ds21 store holds it: the job level (job keys and this node's
/// keys, the info arrays left out), then each rank's keys, each rank's batch made when the
/// iterator gets to it (from the image, never from a whole [`JobData`]).
pub(crate) fn ds21_job_batches<'a>(
    job: &'a JobImage,
    levels: &JobData,
    hostname: &str,
) -> impl Iterator<Item = Result<ds21::Batch, pmix_wire::Error>> + 'a {
    let first = ds21_job_level(levels, hostname);
    let nspace = levels.nspace.clone();
    let ranks = proc_realms(job).map(move |(rank, infos)| {
        let pairs = infos
            .iter()
            .filter(|i| !matches!(i.value, Value::Regex(_)))
            .map(|i| Ok((i.key.clone(), ds21::pack_value(&i.value)?)))
            .collect::<Result<Vec<_>, pmix_wire::Error>>()?;
        Ok(ds21::Batch {
            nspace: nspace.clone(),
            level: ds21::Level::Rank(rank),
            pairs,
        })
    });
    std::iter::once(first).chain(ranks)
}

/// The ds21 job level: job keys and this node's keys, the info arrays left out.
fn ds21_job_level(levels: &JobData, hostname: &str) -> Result<ds21::Batch, pmix_wire::Error> {
    use pmix_types::attr;
    let layout = layout(levels);
    let skip = [
        attr::SESSION_INFO_ARRAY,
        attr::NODE_INFO_ARRAY,
        attr::APP_INFO_ARRAY,
        attr::JOB_INFO_ARRAY,
    ];
    let mut seen = std::collections::HashSet::new();
    let mut pairs = Vec::new();
    for Kval { key, value } in &layout.top {
        if skip.contains(&key.as_str()) || !seen.insert(key.as_str().to_owned()) {
            continue;
        }
        pairs.push((key.clone(), ds21::pack_value(value)?));
    }
    // This node's keys at the job level, as the reference's store files them.
    let here = levels.nodes.iter().find(|n| {
        n.info
            .iter()
            .any(|i| i.key.as_str() == attr::HOSTNAME && i.value.as_str() == Some(hostname))
    });
    if let Some(node) = here.or(if levels.nodes.len() == 1 {
        levels.nodes.first()
    } else {
        None
    }) {
        for i in &node.info {
            let k = i.key.as_str();
            if [attr::HOSTNAME, attr::NODEID, attr::HOSTNAME_ALIASES].contains(&k)
                || matches!(i.value, Value::Regex(_))
                || !seen.insert(k.to_owned())
            {
                continue;
            }
            pairs.push((i.key.clone(), ds21::pack_value(&i.value)?));
        }
    }
    Ok(ds21::Batch {
        nspace: levels.nspace.clone(),
        level: ds21::Level::Job,
        pairs,
    })
}

/// A collecting fence's data as ds21 batches, one per process.
pub(crate) fn ds21_fence_batches(
    data: &[pmix_wire::ProcKvs],
) -> Result<Vec<ds21::Batch>, pmix_wire::Error> {
    data.iter()
        .filter(|pk| pk.proc.rank.0 < Rank::INVALID.0 && !pk.kvs.is_empty())
        .map(|pk| {
            let pairs = pk
                .kvs
                .iter()
                .map(|kv| Ok((kv.key.clone(), ds21::pack_value(&kv.value)?)))
                .collect::<Result<Vec<_>, pmix_wire::Error>>()?;
            Ok(ds21::Batch {
                nspace: pk.proc.nspace.clone(),
                level: ds21::Level::Rank(pk.proc.rank),
                pairs,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests;
