//! Where the ranks of every job of a multi-node run are on the tree: read by the root (to
//! route and to know what a lost daemon took with it) and by each daemon (its host's fences
//! and direct modex).

use std::collections::HashMap;
use std::sync::{Arc, PoisonError, RwLock};

use pmix_server::types::{Nspace, Proc, Rank};
use pmix_tree::Vertex;

/// Where the ranks of every namespace of the run are: shared by a daemon's host (on its
/// server's thread) and its main loop (which learns of new jobs).
#[derive(Debug, Default)]
pub(crate) struct Placements {
    jobs: RwLock<HashMap<Nspace, Arc<Placed>>>,
}

/// One job's ranks on the tree.
#[derive(Debug)]
pub(crate) struct Placed {
    /// The daemon of each rank.
    pub(crate) vertex_of_rank: Vec<Vertex>,
    /// Every daemon with ranks of it, sorted.
    pub(crate) vertices: Vec<Vertex>,
}

impl Placed {
    pub(crate) fn new(vertex_of_rank: Vec<Vertex>) -> Placed {
        let mut vertices = vertex_of_rank.clone();
        vertices.sort_unstable();
        vertices.dedup();
        Placed {
            vertex_of_rank,
            vertices,
        }
    }
}

impl Placements {
    pub(crate) fn insert(&self, nspace: Nspace, placed: Placed) {
        self.jobs
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(nspace, Arc::new(placed));
    }

    pub(crate) fn remove(&self, nspace: &Nspace) {
        self.jobs
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(nspace);
    }

    pub(crate) fn get(&self, nspace: &Nspace) -> Option<Arc<Placed>> {
        self.jobs
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(nspace)
            .cloned()
    }

    /// The daemon hosting `proc`.
    pub(crate) fn vertex_of(&self, proc: &Proc) -> Option<Vertex> {
        self.get(&proc.nspace)?
            .vertex_of_rank
            .get(proc.rank.0 as usize)
            .copied()
    }

    /// The processes of every job hosted by one of `lost`.
    pub(crate) fn procs_on(&self, lost: impl Fn(Vertex) -> bool) -> Vec<Proc> {
        let jobs = self.jobs.read().unwrap_or_else(PoisonError::into_inner);
        let mut procs = Vec::new();
        for (nspace, placed) in jobs.iter() {
            for (rank, v) in (0u32..).zip(&placed.vertex_of_rank) {
                if lost(*v) {
                    procs.push(Proc::new(nspace.clone(), rank));
                }
            }
        }
        procs
    }

    /// The daemons hosting `procs` (a `WILDCARD` rank meaning its whole job), sorted; `None`
    /// if one is not a process of the run.
    pub(crate) fn vertices_of(&self, procs: &[Proc]) -> Option<Vec<Vertex>> {
        let mut out = Vec::new();
        for p in procs {
            let placed = self.get(&p.nspace)?;
            if p.rank == Rank::WILDCARD {
                out.extend(&placed.vertices);
            } else {
                out.push(*placed.vertex_of_rank.get(p.rank.0 as usize)?);
            }
        }
        out.sort_unstable();
        out.dedup();
        Some(out)
    }
}
