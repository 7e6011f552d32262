//! The variables ML frameworks and MPI-aware scripts read their place in the job from, which
//! pmixrun sets for every process unless `--no-launcher-env`.
//!
//! # The variables
//!
//! | variable | value |
//! | --- | --- |
//! | `RANK`, `OMPI_COMM_WORLD_RANK` | the process's rank in its job |
//! | `WORLD_SIZE`, `OMPI_COMM_WORLD_SIZE`, `OMPI_WORLD_SIZE`, `OMPI_UNIVERSE_SIZE` | the job's size |
//! | `LOCAL_RANK`, `OMPI_COMM_WORLD_LOCAL_RANK` | its rank among the job's processes on its node |
//! | `LOCAL_WORLD_SIZE`, `OMPI_COMM_WORLD_LOCAL_SIZE`, `OMPI_WORLD_LOCAL_SIZE` | the job's processes on its node |
//! | `OMPI_COMM_WORLD_NODE_RANK` | its node rank (`PMIX_NODE_RANK`), which pmixrun makes its local rank |
//! | `GROUP_RANK` | the index of its node among the job's nodes (torchrun's node rank) |
//! | `GROUP_WORLD_SIZE` | the number of the job's nodes (torchrun's agents) |
//! | `ROLE_NAME`, `ROLE_RANK`, `ROLE_WORLD_SIZE` | `default`, the rank, the job's size: torchrun's one role |
//! | `TORCHELASTIC_RUN_ID` | the job's namespace (torchrun's rendezvous id) |
//! | `TORCHELASTIC_RESTART_COUNT`, `TORCHELASTIC_MAX_RESTARTS` | `0`: pmixrun restarts no process |
//! | `MASTER_ADDR` | the host of rank 0: its node's name; this machine's hostname under `--launcher local`, whose nodes are all this machine |
//! | `MASTER_PORT` | `--master-port`, else 20000 + (FNV-1a hash of the namespace mod 10000); when rank 0 runs on the machine that chooses it (one node, logical nodes, or the root's own node), the next free port from there if that one is taken |
//!
//! Spawned jobs get their own: ranks, sizes and port of the spawned job. The `OMPI_*` ones are
//! those Open MPI 5's `mpirun` gives every process (its OpenPMIx's `ompi` programming-model
//! plug-in sets them, with the universe the job's size as pmixrun registers it), less those
//! that configure Open MPI itself (`OMPI_MCA_*`) or describe the command (`OMPI_COMMAND`,
//! `OMPI_ARGV`, `OMPI_NUM_APP_CTX`, `OMPI_FIRST_RANKS`...).
//!
//! `OMPI_COMM_WORLD_NODE_RANK` is, in Open MPI, the process's rank among *all* the processes
//! of its node (every job), not the node's index: `GROUP_RANK` is that. The port is chosen
//! once per job, where it starts: by pmixrun on one node, by the root of a multi-node run,
//! which tells every daemon in the job's launch. It is checked free when the job starts on
//! the machine that chooses it if rank 0 runs there (two jobs at once, or another program on
//! the port, must not make rank 0's rendezvous fail): the first of the 64 ports from the
//! hashed one that can be bound, else one the kernel picks. Rank 0 on another machine gets
//! the hashed one unchecked (nothing of the run runs there before the job's processes do); a
//! run that needs a particular one says `--master-port`.
//!
//! torchrun's `TORCHELASTIC_USE_AGENT_STORE` is left out: it would tell rank 0 that a store
//! already listens at `MASTER_PORT` (torchrun's agent's); under pmixrun rank 0 makes it, as
//! with `init_method="env://"` anywhere.
//!
//! A variable the user sets with `-x` wins over these (see `launch.rs`). pmixrun's own values
//! of these variables (from a launcher pmixrun itself runs under) are not forwarded to other
//! nodes' processes when pmixrun sets them: they would win there as `-x` does.

use std::ffi::OsStr;

use pmix_types::Nspace;

/// Every variable this module sets.
pub(crate) const NAMES: [&str; 22] = [
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_NAME",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS",
    "MASTER_ADDR",
    "MASTER_PORT",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "OMPI_COMM_WORLD_NODE_RANK",
    "OMPI_UNIVERSE_SIZE",
    "OMPI_WORLD_SIZE",
    "OMPI_WORLD_LOCAL_SIZE",
];

/// Whether `name` is one of [`NAMES`].
pub(crate) fn is_launcher_variable(name: &OsStr) -> bool {
    NAMES.iter().any(|n| name == *n)
}

/// The port of a job's `MASTER_PORT` unless `--master-port` says another.
pub(crate) fn default_port(nspace: &Nspace) -> u16 {
    // FNV-1a, 32 bits: the same on every node and in every version of pmixrun.
    let mut h: u32 = 0x811c_9dc5;
    for b in nspace.as_str().bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    20000 + (h % 10000) as u16
}

/// `preferred` if `is_free` says so, else the first free one of the 63 after it (from 20000
/// again past 29999), else a port the kernel has free, else `preferred`.
pub(crate) fn free_port_from(preferred: u16, is_free: impl Fn(u16) -> bool) -> u16 {
    let span = 10000u16;
    (0..64u16)
        .map(|k| 20000 + (preferred.saturating_sub(20000) + k) % span)
        .find(|p| is_free(*p))
        .or_else(|| {
            let l = std::net::TcpListener::bind(("0.0.0.0", 0)).ok()?;
            Some(l.local_addr().ok()?.port())
        })
        .unwrap_or(preferred)
}

/// Whether a listener could take `port` on every address of this machine now.
pub(crate) fn is_free_here(port: u16) -> bool {
    std::net::TcpListener::bind(("0.0.0.0", port)).is_ok()
}

/// A job's `MASTER_PORT`: `given` (`--master-port`), else the hashed default, which, when
/// rank 0 runs on this machine (`rank0_here`), is checked free here and another taken if it
/// is not ([`free_port_from`]).
pub(crate) fn master_port(given: Option<u16>, nspace: &Nspace, rank0_here: bool) -> u16 {
    if let Some(port) = given {
        return port;
    }
    let port = default_port(nspace);
    if rank0_here {
        free_port_from(port, is_free_here)
    } else {
        port
    }
}

/// For the daemon of vertex `me` of a multi-node run, whose vertices are on `nodes` (index:
/// vertex), and a job whose rank `r` is on vertex `vertex_of_rank[r]`: this node's index among
/// the job's nodes (`GROUP_RANK`; 0 when it has none of its ranks), how many nodes the job
/// has (`GROUP_WORLD_SIZE`) and `MASTER_ADDR`, the node of rank 0, or this machine's hostname
/// when the nodes are `logical` (`--launcher local`).
pub(crate) fn group_and_master(
    vertex_of_rank: &[u32],
    me: u32,
    nodes: &[String],
    logical: bool,
) -> (u32, u32, String) {
    let mut used: Vec<u32> = vertex_of_rank.to_vec();
    used.sort_unstable();
    used.dedup();
    let group = used.iter().position(|v| *v == me).unwrap_or(0);
    let master = if logical {
        nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "localhost".into())
    } else {
        vertex_of_rank
            .first()
            .and_then(|v| nodes.get(*v as usize))
            .cloned()
            .unwrap_or_else(|| "localhost".into())
    };
    let groups = u32::try_from(used.len()).unwrap_or(u32::MAX);
    (u32::try_from(group).unwrap_or(0), groups, master)
}

/// What the variables of a job's processes on one node are made of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct NodeJob {
    /// The job's size.
    pub(crate) size: u32,
    /// Its processes on this node.
    pub(crate) local_size: u32,
    /// This node's index among the job's nodes.
    pub(crate) group_rank: u32,
    /// How many nodes the job has.
    pub(crate) groups: u32,
    /// `TORCHELASTIC_RUN_ID`: the job's namespace.
    pub(crate) run_id: String,
    /// `MASTER_ADDR`.
    pub(crate) master_addr: String,
    /// `MASTER_PORT`.
    pub(crate) master_port: u16,
}

impl NodeJob {
    /// The variables of the process of rank `rank`, local rank `local_rank`.
    pub(crate) fn vars(&self, rank: u32, local_rank: u32) -> Vec<(String, String)> {
        let v = |n: &str, x: String| (n.to_owned(), x);
        vec![
            v("RANK", rank.to_string()),
            v("LOCAL_RANK", local_rank.to_string()),
            v("WORLD_SIZE", self.size.to_string()),
            v("LOCAL_WORLD_SIZE", self.local_size.to_string()),
            v("GROUP_RANK", self.group_rank.to_string()),
            v("GROUP_WORLD_SIZE", self.groups.to_string()),
            v("ROLE_NAME", "default".to_owned()),
            v("ROLE_RANK", rank.to_string()),
            v("ROLE_WORLD_SIZE", self.size.to_string()),
            v("TORCHELASTIC_RUN_ID", self.run_id.clone()),
            v("TORCHELASTIC_RESTART_COUNT", "0".to_owned()),
            v("TORCHELASTIC_MAX_RESTARTS", "0".to_owned()),
            v("MASTER_ADDR", self.master_addr.clone()),
            v("MASTER_PORT", self.master_port.to_string()),
            v("OMPI_COMM_WORLD_RANK", rank.to_string()),
            v("OMPI_COMM_WORLD_SIZE", self.size.to_string()),
            v("OMPI_COMM_WORLD_LOCAL_RANK", local_rank.to_string()),
            v("OMPI_COMM_WORLD_LOCAL_SIZE", self.local_size.to_string()),
            v("OMPI_COMM_WORLD_NODE_RANK", local_rank.to_string()),
            v("OMPI_UNIVERSE_SIZE", self.size.to_string()),
            v("OMPI_WORLD_SIZE", self.size.to_string()),
            v("OMPI_WORLD_LOCAL_SIZE", self.local_size.to_string()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_port_gives_way_to_the_next_free_one() {
        assert_eq!(free_port_from(25000, |_| true), 25000);
        assert_eq!(free_port_from(25000, |p| p > 25002), 25003);
        // Past 29999 the search goes on from 20000.
        assert_eq!(free_port_from(29999, |p| p < 29000), 20000);
        // None of the 64 free: one the kernel has free, not one of them.
        let p = free_port_from(25000, |_| false);
        assert!(!(25000..25064).contains(&p), "{p}");
    }

    #[test]
    fn the_master_port_is_the_given_one_or_the_default_free_where_rank_0_runs() {
        let ns = Nspace::new("pmixrun-port-test").unwrap_or_else(|e| panic!("{e}"));
        let port = default_port(&ns);
        assert_eq!(master_port(Some(29500), &ns, true), 29500);
        // Something listens on the default port here (this test, or whatever held it).
        let _held = std::net::TcpListener::bind(("0.0.0.0", port));
        let chosen = master_port(None, &ns, true);
        assert_ne!(chosen, port);
        assert!(is_free_here(chosen), "{chosen}");
        // Rank 0 elsewhere: the port every node computes, unchecked.
        assert_eq!(master_port(None, &ns, false), port);
    }

    #[test]
    fn every_variable_is_set_and_named() {
        let job = NodeJob {
            size: 6,
            local_size: 2,
            group_rank: 2,
            groups: 3,
            run_id: "rs-pmixrun-7".into(),
            master_addr: "n1".into(),
            master_port: 29500,
        };
        let vars = job.vars(5, 1);
        let names: Vec<&str> = vars.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, NAMES);
        let get = |n: &str| vars.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
        assert_eq!(get("RANK"), Some("5"));
        assert_eq!(get("GROUP_RANK"), Some("2"));
        assert_eq!(get("GROUP_WORLD_SIZE"), Some("3"));
        assert_eq!(get("ROLE_RANK"), Some("5"));
        assert_eq!(get("ROLE_WORLD_SIZE"), Some("6"));
        assert_eq!(get("TORCHELASTIC_RUN_ID"), Some("rs-pmixrun-7"));
        assert_eq!(get("OMPI_COMM_WORLD_LOCAL_SIZE"), Some("2"));
        assert!(is_launcher_variable(OsStr::new("MASTER_PORT")));
        assert!(!is_launcher_variable(OsStr::new("PATH")));
    }

    #[test]
    fn the_group_is_the_index_among_the_jobs_nodes() {
        let nodes: Vec<String> = ["root", "n1", "n2", "n3"].map(String::from).to_vec();
        // Ranks 0-1 on vertex 3, 2-3 on vertex 1: vertex 1 is the job's first node.
        let of = [3, 3, 1, 1];
        assert_eq!(group_and_master(&of, 1, &nodes, false), (0, 2, "n3".into()));
        assert_eq!(group_and_master(&of, 3, &nodes, false), (1, 2, "n3".into()));
        assert_eq!(group_and_master(&of, 2, &nodes, false).0, 0);
        let here = nix::unistd::gethostname().map(|h| h.to_string_lossy().into_owned());
        assert_eq!(Ok(group_and_master(&of, 3, &nodes, true).2), here);
    }

    #[test]
    fn the_default_port_is_a_fixed_function_of_the_namespace() {
        let a = default_port(&Nspace::new("rs-pmixrun-1234").unwrap_or_else(|e| panic!("{e}")));
        let b = default_port(&Nspace::new("rs-pmixrun-1234.1").unwrap_or_else(|e| panic!("{e}")));
        assert!((20000..30000).contains(&a) && (20000..30000).contains(&b));
        assert_ne!(a, b);
        // FNV-1a of "a" is 0xe40c292c.
        let one = default_port(&Nspace::new("a").unwrap_or_else(|e| panic!("{e}")));
        assert_eq!(u32::from(one), 20000 + 0xe40c_292c % 10000);
    }
}
