//! The process map in ANL notation: MPICH's `PMI_process_mapping`, which PMIx carries as the
//! job-level `PMIX_ANL_MAP` (MPICH built on PMIx reads it, Slurm's PMIx plugin provides it) and
//! the PMI-1 front-end answers from the job data.
//!
//! The notation is `(vector,(first_node,node_count,ranks_per_node),...)`: blocks of
//! consecutive ranks in rank order, each placing `ranks_per_node` ranks on each of
//! `node_count` consecutive nodes, nodes numbered as in the node map (`PMIX_NODEID`).

use std::fmt::Write as _;

use pmix_types::Rank;

/// The longest map a namespace's job data gets: a map that does not fit (a round-robin
/// placement of a large job lists every rank) is left out, and a reader works the placement
/// out itself, as it does when a launcher gives none.
pub(crate) const MAX_JOB_DATA_LEN: usize = 4096;

/// The runs of consecutive ranks on one node, `(node, ranks)`, from each rank's node in rank
/// order.
pub(crate) fn runs(nodes_in_rank_order: impl IntoIterator<Item = u32>) -> Vec<(u32, u32)> {
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for node in nodes_in_rank_order {
        match runs.last_mut() {
            Some((last, count)) if *last == node => *count += 1,
            _ => runs.push((node, 1)),
        }
    }
    runs
}

/// Encodes runs of `(node, ranks)` as the vector, merging runs of equal length on consecutive
/// nodes into one block. Empty when there are no runs or the map would be longer than
/// `max_len` characters: unknown rather than cut.
pub(crate) fn of_runs(runs: &[(u32, u32)], max_len: usize) -> String {
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

/// The map of a job of `size` ranks whose node `n` (its id) holds the ranks `ppn[n]`; `None`
/// when a rank is on no node or on two, or the map is longer than `max_len`. Costs one
/// 4-byte slot per rank while it works, as much as the parsed process map itself.
pub(crate) fn of_ppn(ppn: &[Vec<Rank>], size: u32, max_len: usize) -> Option<String> {
    const NOWHERE: u32 = u32::MAX;
    let len = usize::try_from(size).ok()?;
    let mut node_of: Vec<u32> = vec![NOWHERE; len];
    for (node, ranks) in ppn.iter().enumerate() {
        let node = u32::try_from(node).ok().filter(|&n| n != NOWHERE)?;
        for r in ranks {
            let slot = node_of.get_mut(usize::try_from(r.0).ok()?)?;
            if *slot != NOWHERE {
                return None;
            }
            *slot = node;
        }
    }
    if node_of.contains(&NOWHERE) {
        return None;
    }
    let map = of_runs(&runs(node_of), max_len);
    (!map.is_empty()).then_some(map)
}

#[cfg(test)]
mod tests {
    use pmix_types::Rank;

    use super::{MAX_JOB_DATA_LEN, of_ppn, of_runs, runs};

    #[test]
    fn runs_become_blocks() {
        // Everything on one node.
        assert_eq!(of_runs(&[(0, 4)], 100), "(vector,(0,1,4))");
        // Block distribution over three nodes, two per node.
        assert_eq!(of_runs(&[(0, 2), (1, 2), (2, 2)], 100), "(vector,(0,3,2))");
        // Uneven: the last node has fewer.
        assert_eq!(
            of_runs(&[(0, 3), (1, 3), (2, 1)], 100),
            "(vector,(0,2,3),(2,1,1))"
        );
        // Round robin over two nodes: one block per rank, nodes not consecutive in order.
        assert_eq!(
            of_runs(&[(0, 1), (1, 1), (0, 1), (1, 1)], 100),
            "(vector,(0,2,1),(0,2,1))"
        );
        assert_eq!(of_runs(&[], 100), "");
        // Too long for the limit: unknown rather than cut.
        assert_eq!(of_runs(&[(0, 1), (5, 1), (0, 1)], 20), "");
        assert_eq!(runs([0, 0, 1, 1, 0]), [(0, 2), (1, 2), (0, 1)]);
    }

    #[test]
    fn maps_of_ranks_per_node() {
        let ppn = |nodes: &[&[u32]]| -> Vec<Vec<Rank>> {
            nodes
                .iter()
                .map(|n| n.iter().copied().map(Rank).collect())
                .collect()
        };
        let max = MAX_JOB_DATA_LEN;
        assert_eq!(
            of_ppn(&ppn(&[&[0, 1, 2]]), 3, max).as_deref(),
            Some("(vector,(0,1,3))")
        );
        assert_eq!(
            of_ppn(&ppn(&[&[0, 1], &[2, 3], &[4]]), 5, max).as_deref(),
            Some("(vector,(0,2,2),(2,1,1))")
        );
        // By node: the ranks listed in any order on their node.
        assert_eq!(
            of_ppn(&ppn(&[&[2, 0], &[1, 3]]), 4, max).as_deref(),
            Some("(vector,(0,2,1),(0,2,1))")
        );
        // A rank nowhere, on two nodes, or past the job: no map.
        assert_eq!(of_ppn(&ppn(&[&[0], &[2]]), 3, max), None);
        assert_eq!(of_ppn(&ppn(&[&[0, 1], &[1]]), 2, max), None);
        assert_eq!(of_ppn(&ppn(&[&[0, 5]]), 2, max), None);
        assert_eq!(of_ppn(&ppn(&[&[0]]), 1, 10), None);
        assert_eq!(of_ppn(&[], 0, max), None);
    }
}
