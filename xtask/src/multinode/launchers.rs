//! The launchers' command lines on the pretend cluster, 2 ranks per node, up to (not
//! including) the program: the multi-node scenarios and `cargo xtask bench --multinode` add
//! their options, program and arguments.

use std::process::Command;

use super::cluster::{self, host_list, node_names};

/// Ranks on `nodes` nodes: two per node.
pub(crate) fn ranks(nodes: u32) -> u32 {
    2 * nodes
}

/// MPICH's Hydra over ssh (pssh as its agent).
pub(crate) fn hydra(nodes: u32) -> Command {
    let mut cmd = Command::new("/usr/bin/mpiexec.hydra");
    cmd.args(["-launcher", "ssh", "-launcher-exec"])
        .arg(cluster::pssh())
        .args([
            "-hosts",
            &node_names(nodes),
            "-n",
            &ranks(nodes).to_string(),
        ]);
    cmd
}

/// Open MPI 4.1's `mpirun`, 2 slots per node, pssh as its agent, TCP on the cluster's network.
pub(crate) fn mpirun(nodes: u32) -> Command {
    let mut cmd = Command::new("/usr/bin/mpirun.openmpi");
    cmd.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "--mca",
        "plm_rsh_agent",
    ])
    .arg(cluster::pssh())
    .args(["--host", &host_list(nodes, 2)])
    .args(["--mca", "oob_tcp_if_include", "10.77.0.0/16"])
    .args(["--mca", "btl_tcp_if_include", "10.77.0.0/16"])
    .args(["-n", &ranks(nodes).to_string()]);
    cmd
}

/// Slurm's own launcher and PMIx server, `srun -N<nodes> -n<ranks> --mpi=pmix`, with the ring
/// fence: with Slurm 22.05's default choice a fence without data takes the tree, which on this
/// cluster completes on the non-root nodes before every node joined (libpmix's own clients
/// see it too; see docs/MULTINODE-TESTING.md).
pub(crate) fn srun_pmix(nodes: u32) -> Command {
    let mut cmd = Command::new("srun");
    cmd.env("SLURM_CONF", cluster::slurm_conf())
        .env("SLURM_PMIX_FENCE", "ring")
        .args(["-N", &nodes.to_string(), "-n", &ranks(nodes).to_string()])
        .arg("--mpi=pmix");
    cmd
}

/// `salloc -N<nodes> -n<ranks>`: an allocation of the cluster's Slurm, for the command that
/// follows (pmixrun, with no host list).
pub(crate) fn salloc(nodes: u32) -> Command {
    let mut cmd = Command::new("salloc");
    cmd.env("SLURM_CONF", cluster::slurm_conf()).args([
        "-N",
        &nodes.to_string(),
        "-n",
        &ranks(nodes).to_string(),
    ]);
    cmd
}
