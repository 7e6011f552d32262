//! What a PMI-1 process is told about its job, read off the job data the engine derives for
//! every client: size, application number, universe size, node-local rank and size, whether
//! the job was spawned, and the node map in MPICH's `PMI_process_mapping` notation.

use pmix_types::{Info, Rank, Value, attr};
use pmix_wire::JobData;

use crate::engine::anl_map;

fn find<'a>(infos: &'a [Info], key: &str) -> Option<&'a Value> {
    infos
        .iter()
        .find(|i| i.key.as_str() == key)
        .map(|i| &i.value)
}

fn proc_info(job: &JobData, rank: u32) -> &[Info] {
    // Derived job data lists the ranks in order; a host's own list may not.
    let by_index = job
        .procs
        .get(rank as usize)
        .filter(|p| p.rank == Rank(rank));
    by_index
        .or_else(|| job.procs.iter().find(|p| p.rank == Rank(rank)))
        .map_or(&[][..], |p| &p.info)
}

fn u32_of(v: Option<&Value>) -> Option<u32> {
    v.and_then(Value::as_u32)
}

/// The number of processes in the job.
pub(crate) fn size(job: &JobData) -> u32 {
    u32_of(find(&job.job, attr::JOB_SIZE)).unwrap_or(job.procs.len() as u32)
}

/// The universe size (`MPI_UNIVERSE_SIZE`): the session's, else the job's size.
pub(crate) fn universe_size(job: &JobData) -> u32 {
    u32_of(find(&job.session, attr::UNIV_SIZE).or_else(|| find(&job.job, attr::UNIV_SIZE)))
        .unwrap_or_else(|| size(job))
}

/// The application number of `rank` (`MPI_APPNUM`).
pub(crate) fn appnum(job: &JobData, rank: u32) -> u32 {
    u32_of(find(proc_info(job, rank), attr::APPNUM)).unwrap_or(0)
}

/// True if the job was started by a spawn.
pub(crate) fn spawned(job: &JobData) -> bool {
    find(&job.job, attr::SPAWNED)
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// The process that spawned `rank`'s job (`PMIX_PARENT_ID`: in the rank's own data, or, from
/// a host that gives it so, at the job level).
pub(crate) fn parent(job: &JobData, rank: u32) -> Option<&pmix_types::Proc> {
    find(proc_info(job, rank), attr::PARENT_ID)
        .or_else(|| find(&job.job, attr::PARENT_ID))
        .and_then(|v| match v {
            Value::Proc(p) => Some(p),
            _ => None,
        })
}

/// The node of `rank`, when the job data says.
fn node_of(job: &JobData, rank: u32) -> Option<u32> {
    u32_of(find(proc_info(job, rank), attr::NODEID))
}

/// `rank`'s index among the processes of its node, and how many there are
/// (`MPI_LOCALRANKID`, `MPI_LOCALNRANKS`).
pub(crate) fn local_rank_and_size(job: &JobData, rank: u32) -> (u32, u32) {
    let info = proc_info(job, rank);
    let lrank = u32_of(find(info, attr::LOCAL_RANK)).unwrap_or(0);
    let lsize = node_of(job, rank)
        .and_then(|n| job.nodes.iter().find(|r| r.id == n))
        .and_then(|r| u32_of(find(&r.info, attr::LOCAL_SIZE)))
        .or_else(|| u32_of(find(&job.job, attr::LOCAL_SIZE)))
        .unwrap_or(1);
    (lrank, lsize)
}

/// The node map in MPICH's notation (see `engine::anl_map`). Empty (MPICH then works the map
/// out itself) when the job data does not say where every rank is, or when the map does not
/// fit in `max_len` characters.
pub(crate) fn process_mapping(job: &JobData, max_len: usize) -> String {
    let n = size(job);
    let nodes: Option<Vec<u32>> = (0..n).map(|rank| node_of(job, rank)).collect();
    match nodes {
        Some(nodes) => anl_map::of_runs(&anl_map::runs(nodes), max_len),
        // No node map: the job is on one node if all of it is local here.
        None if u32_of(find(&job.job, attr::LOCAL_SIZE)) == Some(n) => {
            anl_map::of_runs(&[(0, n)], max_len)
        }
        None => String::new(),
    }
}
