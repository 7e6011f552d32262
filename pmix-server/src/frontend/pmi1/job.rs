//! What a PMI-1 process is told about its job, read off the job data the engine derives for
//! every client: size, application number, universe size, node-local rank and size, whether
//! the job was spawned, and the node map in MPICH's `PMI_process_mapping` notation.

use std::fmt::Write as _;

use pmix_types::{Info, Rank, Value, attr};
use pmix_wire::JobData;

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

/// The node map in MPICH's notation, `(vector,(first_node,node_count,ranks_per_node),...)`:
/// blocks of consecutive ranks, each block placing `ranks_per_node` ranks on each of
/// `node_count` consecutive nodes. Empty (MPICH then works the map out itself) when the job data
/// does not say where every rank is, or when the map does not fit in `max_len` characters.
pub(crate) fn process_mapping(job: &JobData, max_len: usize) -> String {
    let n = size(job);
    let mut runs: Vec<(u32, u32)> = Vec::new(); // (node, consecutive ranks on it)
    for rank in 0..n {
        let Some(node) = node_of(job, rank) else {
            // No node map: the job is on one node if all of it is local here.
            let local = u32_of(find(&job.job, attr::LOCAL_SIZE));
            return if local == Some(n) {
                mapping_of_runs(&[(0, n)], max_len)
            } else {
                String::new()
            };
        };
        match runs.last_mut() {
            Some((last, count)) if *last == node => *count += 1,
            _ => runs.push((node, 1)),
        }
    }
    mapping_of_runs(&runs, max_len)
}

/// Encodes runs of (node, ranks) as MPICH's vector, merging runs of equal length on
/// consecutive nodes into one block.
pub(crate) fn mapping_of_runs(runs: &[(u32, u32)], max_len: usize) -> String {
    let mut blocks: Vec<(u32, u32, u32)> = Vec::new(); // (first node, nodes, per node)
    for &(node, count) in runs {
        match blocks.last_mut() {
            Some((first, nodes, per))
                if *per == count && first.checked_add(*nodes) == Some(node) =>
            {
                *nodes += 1
            }
            _ => blocks.push((node, 1, count)),
        }
    }
    if blocks.is_empty() {
        return String::new();
    }
    let mut out = String::from("(vector");
    for (first, nodes, per) in blocks {
        let _ = write!(out, ",({first},{nodes},{per})");
        if out.len() + 1 > max_len {
            return String::new();
        }
    }
    out.push(')');
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn runs_become_blocks() {
        // Everything on one node.
        assert_eq!(mapping_of_runs(&[(0, 4)], 100), "(vector,(0,1,4))");
        // Block distribution over three nodes, two per node.
        assert_eq!(
            mapping_of_runs(&[(0, 2), (1, 2), (2, 2)], 100),
            "(vector,(0,3,2))"
        );
        // Uneven: the last node has fewer.
        assert_eq!(
            mapping_of_runs(&[(0, 3), (1, 3), (2, 1)], 100),
            "(vector,(0,2,3),(2,1,1))"
        );
        // Round robin over two nodes: one block per rank, nodes not consecutive in order.
        assert_eq!(
            mapping_of_runs(&[(0, 1), (1, 1), (0, 1), (1, 1)], 100),
            "(vector,(0,2,1),(0,2,1))"
        );
        assert_eq!(mapping_of_runs(&[], 100), "");
        // Too long for the limit: unknown rather than cut.
        assert_eq!(mapping_of_runs(&[(0, 1), (5, 1), (0, 1)], 20), "");
    }
}
