//! The scenarios, in the order they run. The reference ones (MPICH's Hydra, Open MPI's
//! `mpirun`) prove the cluster and the harness; the `pmixrun` ones run pmixrun's multi-node
//! command line (`--host`, `--launch-agent`) over real ssh.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use super::cluster::{self, host_list, node_names};
use super::launchers;
use super::procs::{self, Finished, Running};
use super::wait_for;

mod slurm;
use slurm::{
    salloc_pmixrun_abort, salloc_pmixrun_daemon_killed, salloc_pmixrun_demo,
    salloc_pmixrun_exit_early, salloc_pmixrun_fences, salloc_pmixrun_per_slot,
    salloc_pmixrun_scancel, salloc_pmixrun_slurmd_killed, srun_pmix_abort, srun_pmix_capi,
    srun_pmix_demo, srun_pmix_exit_early, srun_pmix_fences, srun_pmix_python,
};

/// The programs the scenarios run; each is the reason it could not be built if it was not.
pub(crate) struct Programs {
    pub(crate) pmixrun: Result<PathBuf, String>,
    /// pmix-client's `demo` example, the README's job.
    pub(crate) demo: Result<PathBuf, String>,
    /// pmix-tests' `pmix-test-client`, the scenario client.
    pub(crate) test_client: Result<PathBuf, String>,
    /// The directory holding the `pmix` Python module (pmix-python) as `pmix.abi3.so`.
    pub(crate) python_module: Result<PathBuf, String>,
    /// `pmix-tests/mpi/hello.c` with Debian's MPICH.
    pub(crate) mpich_hello: Result<PathBuf, String>,
    /// `pmix-tests/mpi/exit_early.c` with Debian's MPICH.
    pub(crate) mpich_exit_early: Result<PathBuf, String>,
    /// `pmix-tests/openpmix/mpi_hello_ompi.c` with Open MPI 4.1.
    pub(crate) ompi_hello: Result<PathBuf, String>,
    /// A directory holding pmix-capi's library as `libpmix.so.2`, pmix-rs's drop-in libpmix.
    pub(crate) capi_lib: Result<PathBuf, String>,
    /// `pmix-tests/openpmix/pmix_client.c` built against Debian's libpmix (OpenPMIx 4.2).
    pub(crate) libpmix_client: Result<PathBuf, String>,
    /// `pmix-tests/mpi/hello.c` with Open MPI 5's `mpicc` (`/opt/ompi5`, its bundled libpmix).
    pub(crate) ompi5_hello: Result<PathBuf, String>,
    /// `pmix-tests/mpi/exit_early.c` with Open MPI 4.1.
    pub(crate) ompi_exit_early: Result<PathBuf, String>,
}

/// What every scenario knows.
pub(crate) struct Ctx {
    pub(crate) nodes: u32,
    pub(crate) programs: Programs,
    /// `<target>/xtask-multinode`: the C programs, the agent wrappers, `logs/`.
    pub(crate) work: PathBuf,
}

/// One scenario being run: its name, its marker, its deadline.
pub(crate) struct Run<'a> {
    pub(crate) ctx: &'a Ctx,
    pub(crate) name: &'static str,
    pub(crate) marker: String,
    pub(crate) deadline: Instant,
    commands: Cell<u32>,
}

impl<'a> Run<'a> {
    pub(crate) fn new(ctx: &'a Ctx, s: &Scenario, marker: String) -> Run<'a> {
        Run {
            ctx,
            name: s.name,
            marker,
            deadline: Instant::now() + s.deadline,
            commands: Cell::new(0),
        }
    }

    /// Starts a command of this scenario (see [`procs::start`]).
    fn start(&self, cmd: Command) -> Result<Running, String> {
        let k = self.commands.get() + 1;
        self.commands.set(k);
        procs::start(
            cmd,
            &self.marker,
            &self.ctx.work.join("logs"),
            &format!("{}-{k}", self.name),
        )
    }

    /// Runs a command of this scenario to its end or the scenario's deadline.
    fn run(&self, cmd: Command) -> Result<Finished, String> {
        Ok(self.start(cmd)?.wait(self.deadline))
    }

    fn ranks(&self) -> u32 {
        launchers::ranks(self.ctx.nodes)
    }
}

/// One named check.
pub(crate) struct Scenario {
    pub(crate) name: &'static str,
    /// One line: what it shows.
    pub(crate) what: &'static str,
    /// Runs `pmixrun` multi-node (`--references-only` skips it).
    pub(crate) pmixrun: bool,
    /// The whole scenario's deadline: every command of it is killed then.
    pub(crate) deadline: Duration,
    /// How long its processes and files may take to go once it ended.
    pub(crate) settle: Duration,
    /// Ok: a line on how it went; Err: why it failed.
    pub(crate) run: fn(&Run<'_>) -> Result<String, String>,
}

/// Every scenario, in order.
pub(crate) const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "ssh",
        what: "every node answers `pssh nodeK hostname` with its name",
        pmixrun: false,
        deadline: Duration::from_secs(30),
        settle: Duration::from_secs(3),
        run: ssh,
    },
    Scenario {
        name: "hydra-hello",
        what: "MPICH hello across the nodes under mpiexec.hydra -launcher ssh",
        pmixrun: false,
        deadline: Duration::from_secs(60),
        settle: Duration::from_secs(3),
        run: hydra_hello,
    },
    Scenario {
        name: "openmpi-hello",
        what: "Open MPI 4.1 hello across the nodes under mpirun (agent pssh)",
        pmixrun: false,
        deadline: Duration::from_secs(60),
        settle: Duration::from_secs(3),
        run: openmpi_hello,
    },
    // Not Hydra: Debian's MPICH 4.0.2 Hydra over ssh hangs when a rank exits without
    // MPI_Finalize ("unable to send signal downstream"), see docs/MULTINODE-TESTING.md.
    Scenario {
        name: "openmpi-exit-early",
        what: "under Open MPI's mpirun, a rank on node3 exits without MPI_Finalize: the run fails",
        pmixrun: false,
        deadline: Duration::from_secs(60),
        settle: Duration::from_secs(3),
        run: openmpi_exit_early,
    },
    Scenario {
        name: "pmixrun-demo",
        what: "pmixrun --launch-agent pssh --host node1:2,... runs the demo, exit 0",
        pmixrun: true,
        deadline: Duration::from_secs(60),
        settle: Duration::from_secs(3),
        run: pmixrun_demo,
    },
    Scenario {
        name: "pmixrun-mpich-hello",
        what: "MPICH hello (PMI-1) across the nodes under pmixrun",
        pmixrun: true,
        deadline: Duration::from_secs(60),
        settle: Duration::from_secs(3),
        run: pmixrun_mpich_hello,
    },
    Scenario {
        name: "pmixrun-openmpi-hello",
        what: "Open MPI 4.1 hello across the nodes under pmixrun",
        pmixrun: true,
        deadline: Duration::from_secs(60),
        settle: Duration::from_secs(3),
        run: pmixrun_openmpi_hello,
    },
    Scenario {
        name: "pmixrun-exit-early",
        what: "a rank on node3 exits without finalize: the run fails in < 10 s naming the rank",
        pmixrun: true,
        deadline: Duration::from_secs(60),
        settle: Duration::from_secs(3),
        run: pmixrun_exit_early,
    },
    Scenario {
        name: "pmixrun-recovery",
        what: "--enable-recovery: the last rank (on the last node) exits 5; the others on every \
               node hear of it, fence among themselves, fail a fence and a get naming it at \
               once, and finish; the run exits 5",
        pmixrun: true,
        deadline: Duration::from_secs(60),
        settle: Duration::from_secs(3),
        run: pmixrun_recovery,
    },
    Scenario {
        name: "pmixrun-restart",
        what: "--max-restarts 1: the last rank (on the last node) exits 3 in its first life; \
               its daemon starts it again and every rank, on every node, fences with its \
               second life and reads what it put; the run exits 0",
        pmixrun: true,
        deadline: Duration::from_secs(60),
        settle: Duration::from_secs(3),
        run: pmixrun_restart,
    },
    Scenario {
        name: "pmixrun-daemon-killed",
        what: "node3's pmixrun daemon gets SIGKILL mid-run: the run ends in seconds naming node3",
        pmixrun: true,
        deadline: Duration::from_secs(60),
        settle: Duration::from_secs(5),
        run: pmixrun_daemon_killed,
    },
    Scenario {
        name: "pmixrun-daemon-stopped",
        what: "node3's pmixrun daemon gets SIGSTOP mid-run: the run ends naming node3, and \
               the stopped daemon, its ranks and its directory are gone after it",
        pmixrun: true,
        deadline: Duration::from_secs(90),
        settle: Duration::from_secs(10),
        run: pmixrun_daemon_stopped,
    },
    Scenario {
        name: "pmixrun-link-down",
        what: "node3's link goes down (silent loss): the run ends naming node3; link restored",
        pmixrun: true,
        deadline: Duration::from_secs(90),
        settle: Duration::from_secs(20),
        run: pmixrun_link_down,
    },
    Scenario {
        name: "pmixrun-not-found",
        what: "pmixrun is not found on node2: the run fails with a message naming node2",
        pmixrun: true,
        deadline: Duration::from_secs(60),
        settle: Duration::from_secs(3),
        run: pmixrun_not_found,
    },
    Scenario {
        name: "srun-pmix-demo",
        what: "Slurm's srun --mpi=pmix (libpmix 4.2 in slurmstepd) runs pmix-rs's demo on every node",
        pmixrun: true,
        deadline: Duration::from_secs(60),
        settle: Duration::from_secs(5),
        run: srun_pmix_demo,
    },
    Scenario {
        name: "srun-pmix-python",
        what: "under srun --mpi=pmix: pmix-rs's Python module (pmix_binding.py: put/commit/fence/get of every peer, resolve_peers/nodes) on every node",
        pmixrun: true,
        deadline: Duration::from_secs(90),
        settle: Duration::from_secs(5),
        run: srun_pmix_python,
    },
    Scenario {
        name: "srun-pmix-capi",
        what: "under srun --mpi=pmix with pmix-rs's libpmix.so.2 (pmix-capi) first on the ranks' LD_LIBRARY_PATH: libpmix's pmix_client.c and Open MPI 5's hello load it on every rank and print what they print on the C library",
        pmixrun: true,
        deadline: Duration::from_secs(120),
        settle: Duration::from_secs(5),
        run: srun_pmix_capi,
    },
    Scenario {
        name: "srun-pmix-fences",
        what: "under srun --mpi=pmix: fences with and without data, direct-modex gets, replaced keys",
        pmixrun: true,
        deadline: Duration::from_secs(90),
        settle: Duration::from_secs(5),
        run: srun_pmix_fences,
    },
    Scenario {
        name: "srun-pmix-abort",
        what: "under srun --mpi=pmix, rank 0 aborts with 7 while the others wait (not in a fence): srun exits 7 in seconds",
        pmixrun: true,
        deadline: Duration::from_secs(60),
        settle: Duration::from_secs(20),
        run: srun_pmix_abort,
    },
    Scenario {
        name: "salloc-pmixrun-per-slot",
        what: "salloc -N<nodes> -n<2 x nodes> pmixrun demo, no -n: one process per slot of the allocation, as srun and mpirun start",
        pmixrun: true,
        deadline: Duration::from_secs(60),
        settle: Duration::from_secs(5),
        run: salloc_pmixrun_per_slot,
    },
    Scenario {
        name: "salloc-pmixrun-demo",
        what: "salloc -N<nodes> pmixrun -n <2 x nodes> demo: pmixrun reads the allocation, starts its daemons with one srun (no ssh)",
        pmixrun: true,
        deadline: Duration::from_secs(60),
        settle: Duration::from_secs(5),
        run: salloc_pmixrun_demo,
    },
    Scenario {
        name: "salloc-pmixrun-exit-early",
        what: "salloc ... pmixrun: rank 5 (node3) exits 3 without finalize mid-fence: the run ends in seconds naming it",
        pmixrun: true,
        deadline: Duration::from_secs(60),
        settle: Duration::from_secs(5),
        run: salloc_pmixrun_exit_early,
    },
    Scenario {
        name: "salloc-pmixrun-scancel",
        what: "salloc ... pmixrun -n 8 sleep 60, then scancel of the job: the run ends in seconds, nothing left on any node",
        pmixrun: true,
        deadline: Duration::from_secs(90),
        settle: Duration::from_secs(20),
        run: salloc_pmixrun_scancel,
    },
    Scenario {
        name: "salloc-pmixrun-abort",
        what: "salloc ... pmixrun: rank 0 aborts with 7 while the others wait in a fence: pmixrun exits 7 in seconds",
        pmixrun: true,
        deadline: Duration::from_secs(60),
        settle: Duration::from_secs(5),
        run: salloc_pmixrun_abort,
    },
    Scenario {
        name: "salloc-pmixrun-fences",
        what: "salloc ... pmixrun: fences with and without data, direct-modex gets, replaced keys (as under srun --mpi=pmix)",
        pmixrun: true,
        deadline: Duration::from_secs(90),
        settle: Duration::from_secs(5),
        run: salloc_pmixrun_fences,
    },
    Scenario {
        name: "salloc-pmixrun-daemon-killed",
        what: "salloc ... pmixrun -n 8 sleep 60, node3's pmixrun daemon (started by srun) killed: the run ends in seconds naming node3",
        pmixrun: true,
        deadline: Duration::from_secs(90),
        settle: Duration::from_secs(20),
        run: salloc_pmixrun_daemon_killed,
    },
    Scenario {
        name: "salloc-pmixrun-slurmd-killed",
        what: "salloc ... pmixrun: node3's slurmd killed (and started again) mid-run: the job, under slurmstepd, finishes its fences and exits 0",
        pmixrun: true,
        deadline: Duration::from_secs(90),
        settle: Duration::from_secs(20),
        run: salloc_pmixrun_slurmd_killed,
    },
    Scenario {
        name: "srun-pmix-exit-early",
        what: "under srun --mpi=pmix --kill-on-bad-exit, rank 5 exits 3 without finalize: the step ends in seconds",
        pmixrun: true,
        deadline: Duration::from_secs(60),
        settle: Duration::from_secs(5),
        run: srun_pmix_exit_early,
    },
];

fn program(p: &Result<PathBuf, String>) -> Result<&Path, String> {
    p.as_deref()
        .map_err(|e| format!("its program could not be built: {e}"))
}

/// Checks that `out` exited 0 and that its stdout has, for each of `n` ranks exactly once, a
/// line `line(rank)` (any order; other lines allowed).
fn expect_every_rank(
    out: &Finished,
    n: u32,
    line: impl Fn(u32) -> String,
) -> Result<String, String> {
    if out.code() != Some(0) {
        return Err(out.fail("did not exit 0"));
    }
    let lines: Vec<&str> = out.stdout.lines().collect();
    for r in 0..n {
        let want = line(r);
        let seen = lines.iter().filter(|l| **l == want).count();
        if seen != 1 {
            return Err(out.fail(&format!("{want:?} printed {seen} times, not once")));
        }
    }
    Ok(format!(
        "{n} ranks on {} nodes in {:.2} s",
        n / 2,
        out.elapsed.as_secs_f64()
    ))
}

fn ssh(run: &Run<'_>) -> Result<String, String> {
    let started: Vec<(u32, Result<Running, String>)> = (1..=run.ctx.nodes)
        .map(|k| {
            let mut cmd = Command::new(cluster::pssh());
            cmd.arg(format!("node{k}")).arg("hostname");
            (k, run.start(cmd))
        })
        .collect();
    let start = Instant::now();
    for (k, running) in started {
        let out = running?.wait(run.deadline);
        if out.code() != Some(0) || out.stdout.trim() != format!("node{k}") {
            return Err(out.fail(&format!("node{k} did not answer with its name")));
        }
    }
    Ok(format!(
        "{} nodes answered in {:.2} s",
        run.ctx.nodes,
        start.elapsed().as_secs_f64()
    ))
}

fn hydra(run: &Run<'_>, program: &Path, args: &[&str]) -> Command {
    let mut cmd = launchers::hydra(run.ctx.nodes);
    cmd.arg(program).args(args);
    cmd
}

fn hydra_hello(run: &Run<'_>) -> Result<String, String> {
    let n = run.ranks();
    let out = run.run(hydra(
        run,
        program(&run.ctx.programs.mpich_hello)?,
        &[&n.to_string()],
    ))?;
    expect_every_rank(&out, n, |r| {
        format!(
            "hello rank {r} of {n} appnum 0 sum {}",
            u64::from(n) * u64::from(n - 1) / 2
        )
    })
}

/// Open MPI 4.1's `mpirun` across the nodes, 2 slots each, with pssh as its agent.
fn mpirun(run: &Run<'_>, program: &Path, args: &[&str]) -> Command {
    let mut cmd = launchers::mpirun(run.ctx.nodes);
    cmd.arg(program).args(args);
    cmd
}

fn openmpi_hello(run: &Run<'_>) -> Result<String, String> {
    let n = run.ranks();
    let out = run.run(mpirun(
        run,
        program(&run.ctx.programs.ompi_hello)?,
        &[&n.to_string()],
    ))?;
    expect_every_rank(&out, n, |r| {
        format!(
            "OK rank={r} size={n} sum={}",
            u64::from(n) * u64::from(n - 1) / 2
        )
    })
}

/// Checks a run in which `rank` exited with status 3 without finalize: it failed, the rank
/// said so, and the run ended within `within`.
fn expect_failed_run(out: &Finished, rank: u32, within: Duration) -> Result<(), String> {
    if out.status.is_none() {
        return Err(out.fail("the run did not end by itself"));
    }
    if out.code() == Some(0) {
        return Err(out.fail("the run exited 0"));
    }
    let said = format!("rank {rank} exiting with 3 without MPI_Finalize");
    if !out.stdout.lines().any(|l| l == said) {
        return Err(out.fail(&format!("no line {said:?}: the rank did not get that far")));
    }
    if out.elapsed > within {
        return Err(out.fail(&format!(
            "the run took longer than {:.0} s to fail",
            within.as_secs_f64()
        )));
    }
    Ok(())
}

fn openmpi_exit_early(run: &Run<'_>) -> Result<String, String> {
    // node1:2,node2:2,node3:2: rank 5 is on node3.
    let out = run.run(mpirun(
        run,
        program(&run.ctx.programs.ompi_exit_early)?,
        &["5", "3"],
    ))?;
    expect_failed_run(&out, 5, Duration::from_secs(30))?;
    Ok(format!(
        "failed ({}) in {:.2} s",
        out.status.map_or("killed".into(), |s| s.to_string()),
        out.elapsed.as_secs_f64()
    ))
}

/// `pmixrun --launch-agent <agent> --host node1:2,... <options> -n <2 × nodes>` (options
/// before `-n`: what follows `-n N` is the program).
fn pmixrun(run: &Run<'_>, agent: &Path, options: &[&str]) -> Result<Command, String> {
    let mut cmd = Command::new(program(&run.ctx.programs.pmixrun)?);
    cmd.arg("--launch-agent")
        .arg(agent)
        .args(["--host", &host_list(run.ctx.nodes, 2)])
        .args(options)
        .args(["-n", &run.ranks().to_string()]);
    Ok(cmd)
}

fn pmixrun_demo(run: &Run<'_>) -> Result<String, String> {
    let mut cmd = pmixrun(run, &cluster::pssh(), &[])?;
    cmd.arg(program(&run.ctx.programs.demo)?);
    let out = run.run(cmd)?;
    if out.code() != Some(0) {
        return Err(out.fail("the demo did not exit 0"));
    }
    Ok(format!(
        "{} ranks on {} nodes in {:.2} s",
        run.ranks(),
        run.ctx.nodes,
        out.elapsed.as_secs_f64()
    ))
}

fn pmixrun_mpich_hello(run: &Run<'_>) -> Result<String, String> {
    let n = run.ranks();
    let mut cmd = pmixrun(run, &cluster::pssh(), &["--pmi", "pmi1"])?;
    cmd.arg(program(&run.ctx.programs.mpich_hello)?)
        .arg(n.to_string());
    let out = run.run(cmd)?;
    expect_every_rank(&out, n, |r| {
        format!(
            "hello rank {r} of {n} appnum 0 sum {}",
            u64::from(n) * u64::from(n - 1) / 2
        )
    })
}

fn pmixrun_openmpi_hello(run: &Run<'_>) -> Result<String, String> {
    let n = run.ranks();
    let mut cmd = pmixrun(run, &cluster::pssh(), &[])?;
    // As in pmix-tests' openmpi_direct_launch_env: Open MPI 4.1 takes its job from PMIx only
    // under a resource manager it recognises, so these Slurm variables (values unused); TCP
    // between the nodes on the cluster's network.
    // pmixrun passes its environment on to the ranks of every node.
    cmd.env("SLURM_JOBID", "1")
        .env("SLURM_NODELIST", node_names(run.ctx.nodes))
        .env("SLURM_STEP_ID", "0")
        .env("OMPI_MCA_btl", "self,vader,tcp")
        .env("OMPI_MCA_btl_tcp_if_include", "10.77.0.0/16")
        .env("OMPI_MCA_oob_tcp_if_include", "10.77.0.0/16")
        .arg(program(&run.ctx.programs.ompi_hello)?)
        .arg(n.to_string());
    let out = run.run(cmd)?;
    expect_every_rank(&out, n, |r| {
        format!(
            "OK rank={r} size={n} sum={}",
            u64::from(n) * u64::from(n - 1) / 2
        )
    })
}

fn pmixrun_exit_early(run: &Run<'_>) -> Result<String, String> {
    // node1:2,node2:2,node3:2: rank 5 is on node3.
    let mut cmd = pmixrun(run, &cluster::pssh(), &["--pmi", "pmi1"])?;
    cmd.arg(program(&run.ctx.programs.mpich_exit_early)?)
        .args(["5", "3"]);
    let out = run.run(cmd)?;
    expect_failed_run(&out, 5, Duration::from_secs(10))?;
    if !out.stderr.contains("rank 5") {
        return Err(out.fail("pmixrun's message does not name rank 5"));
    }
    Ok(format!("failed in {:.2} s", out.elapsed.as_secs_f64()))
}

fn pmixrun_recovery(run: &Run<'_>) -> Result<String, String> {
    let n = run.ranks();
    let failing = n - 1;
    let mut cmd = pmixrun(
        run,
        &cluster::pssh(),
        &["--enable-recovery", "--tag-output"],
    )?;
    cmd.arg(program(&run.ctx.programs.test_client)?)
        .args(["recovery", &failing.to_string(), "5"]);
    let out = run.run(cmd)?;
    if out.code() != Some(5) {
        return Err(out.fail("did not exit with the failed rank's 5"));
    }
    // What each survivor says, in its order (pmix-tests/tests/recovery.rs's `survivor_lines`),
    // tagged `[<rank>@<node>] `.
    for r in 0..failing {
        let said: Vec<&str> = out
            .stdout
            .lines()
            .filter_map(|l| l.strip_prefix(&format!("[{r}@"))?.split_once("] "))
            .map(|(_, line)| line)
            .collect();
        let want = [
            format!("rank {r}: told rank {failing} ended with 5"),
            format!("rank {r}: survivors' fence done"),
            format!("rank {r}: job fence failed with ERR_PROC_TERM_WO_SYNC"),
            format!("rank {r}: get failed with ERR_PROC_TERM_WO_SYNC"),
            "ok".to_owned(),
        ];
        if said != want {
            return Err(out.fail(&format!("rank {r} said {said:?}, not {want:?}")));
        }
    }
    let reason = format!("pmixrun: rank {failing} exited with status 5 without calling finalize");
    if !out.stderr.lines().any(|l| l.starts_with(&reason)) {
        return Err(out.fail(&format!("pmixrun did not say {reason:?}")));
    }
    Ok(format!(
        "{failing} survivors on {} nodes told and finished in {:.2} s",
        run.ctx.nodes,
        out.elapsed.as_secs_f64()
    ))
}

fn pmixrun_restart(run: &Run<'_>) -> Result<String, String> {
    let n = run.ranks();
    let failing = n - 1;
    // Where the failing rank marks its first life: the nodes share this machine's files.
    let dir = run.ctx.work.join(format!("restart-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let mut cmd = pmixrun(run, &cluster::pssh(), &["--max-restarts", "1"])?;
    cmd.arg(program(&run.ctx.programs.test_client)?)
        .args(["restart", &failing.to_string(), "3"])
        .arg(&dir);
    let out = run.run(cmd);
    let _ = std::fs::remove_dir_all(&dir);
    let out = out?;
    let said = expect_every_rank(&out, n, |r| {
        let here = u32::from(r == failing);
        format!("rank {r}: rank {failing} is in life 2, reincarnation 1, {here} here")
    })?;
    let restarted = format!(
        "pmixrun: rank {failing} exited with status 3 without calling finalize; restarting it \
         (1 of 1)"
    );
    if out.stderr.lines().collect::<Vec<_>>() != [restarted.as_str()] {
        return Err(out.fail(&format!("pmixrun said more or less than {restarted:?}")));
    }
    Ok(said)
}

/// Starts a run of `sleep 60` on every rank and waits until node3's pmixrun daemon and its
/// ranks are there; returns the run and the daemon's pid.
fn start_long_run(run: &Run<'_>, agent: &Path) -> Result<(Running, i32), String> {
    let mut cmd = pmixrun(run, agent, &[])?;
    cmd.args(["/bin/sleep", "60"]);
    wait_for_node3(run, run.start(cmd)?, "sleep")
}

/// Waits until the run has node3's pmixrun daemon and its ranks (running `rank_program`);
/// returns it and the daemon's pid.
fn wait_for_node3(
    run: &Run<'_>,
    mut running: Running,
    rank_program: &str,
) -> Result<(Running, i32), String> {
    let limit = Instant::now() + Duration::from_secs(30);
    let found = wait_for(limit.min(run.deadline), || {
        if !running.is_running() {
            return Some(None);
        }
        // The daemon itself, not its guardian (which would remove what the daemon leaves).
        let daemon = procs::on_node(3, "pmixrun")
            .iter()
            .find(|p| p.cmdline.contains("--pmixrun-internal-daemon-worker"))
            .map(|p| p.pid)?;
        // Its ranks too: the run is under way, not still starting.
        procs::on_node(3, rank_program).first()?;
        Some(Some(daemon))
    });
    match found {
        Some(Some(pid)) => Ok((running, pid)),
        Some(None) => {
            let out = running.wait(run.deadline);
            Err(out.fail("the run ended before node3 had a pmixrun daemon with its ranks"))
        }
        None => {
            let out = running.wait(Instant::now());
            Err(out.fail("no pmixrun daemon with ranks on node3 within 30 s"))
        }
    }
}

/// Checks a run that lost node3: it ended by itself, failed, within `within` of the loss,
/// and said it was node3.
fn expect_lost_node3(
    out: &Finished,
    lost_at: Instant,
    running_since: Instant,
    within: Duration,
) -> Result<String, String> {
    if out.status.is_none() {
        return Err(out.fail("the run did not end by itself"));
    }
    if out.code() == Some(0) {
        return Err(out.fail("the run exited 0"));
    }
    let after = (running_since + out.elapsed).saturating_duration_since(lost_at);
    if after > within {
        return Err(out.fail(&format!(
            "the run ended {:.1} s after node3 was lost, not within {:.0} s",
            after.as_secs_f64(),
            within.as_secs_f64()
        )));
    }
    if !out.stderr.contains("node3") {
        return Err(out.fail("pmixrun's message does not name node3"));
    }
    Ok(format!(
        "ended {:.2} s after node3 was lost",
        after.as_secs_f64()
    ))
}

fn pmixrun_daemon_killed(run: &Run<'_>) -> Result<String, String> {
    let (running, daemon) = start_long_run(run, &cluster::pssh())?;
    let since = running.started();
    let _ = kill(Pid::from_raw(daemon), Signal::SIGKILL);
    let lost_at = Instant::now();
    let out = running.wait(run.deadline.min(lost_at + Duration::from_secs(30)));
    expect_lost_node3(&out, lost_at, since, Duration::from_secs(5))
}

/// A daemon that cannot act (SIGSTOP: not even on SIGTERM) is lost to the root by its
/// silence; its guardian, whose agent the root closes, must still end it (the scenario's
/// check of what is left after the run fails otherwise).
fn pmixrun_daemon_stopped(run: &Run<'_>) -> Result<String, String> {
    let (running, daemon) = start_long_run(run, &cluster::pssh())?;
    let since = running.started();
    let _ = kill(Pid::from_raw(daemon), Signal::SIGSTOP);
    let lost_at = Instant::now();
    let out = running.wait(run.deadline.min(lost_at + Duration::from_secs(60)));
    expect_lost_node3(&out, lost_at, since, Duration::from_secs(30))
}

/// Takes the host side of node3's link down; brings it up again when dropped.
struct LinkDown(&'static str);

impl LinkDown {
    fn take(link: &'static str) -> Result<LinkDown, String> {
        set_link(link, "down")?;
        Ok(LinkDown(link))
    }
}

fn set_link(link: &str, state: &str) -> Result<(), String> {
    let out = Command::new("ip")
        .args(["link", "set", link, state])
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip link set {link} {state} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Drop for LinkDown {
    fn drop(&mut self) {
        if let Err(e) = set_link(self.0, "up") {
            eprintln!("xtask multinode: cannot restore the link: {e}");
        }
    }
}

fn pmixrun_link_down(run: &Run<'_>) -> Result<String, String> {
    let (running, _) = start_long_run(run, &cluster::pssh())?;
    let since = running.started();
    let out;
    let lost_at;
    {
        let _down = LinkDown::take("pmxv3")?;
        lost_at = Instant::now();
        out = running.wait(run.deadline.min(lost_at + Duration::from_secs(60)));
    }
    // Heartbeats, not TCP timeouts: seconds.
    expect_lost_node3(&out, lost_at, since, Duration::from_secs(30))
}

fn pmixrun_not_found(run: &Run<'_>) -> Result<String, String> {
    // The agent is run as `AGENT HOST COMMAND...`; for node2 it runs a command that does not
    // exist there instead, so the remote shell says "not found" and exits 127, as it would
    // on a node without pmixrun.
    let agent = run.ctx.work.join("agent-no-pmixrun-on-node2");
    let script = format!(
        "#!/bin/sh\n# --launch-agent of `cargo xtask multinode --only pmixrun-not-found`\n\
         host=$1; shift\n\
         if [ \"$host\" = node2 ]; then exec {pssh} \"$host\" /nonexistent/pmixrun \"$@\"; fi\n\
         exec {pssh} \"$host\" \"$@\"\n",
        pssh = cluster::pssh().display()
    );
    write_executable(&agent, &script)?;
    let mut cmd = pmixrun(run, &agent, &[])?;
    cmd.arg(program(&run.ctx.programs.demo)?);
    let out = run.run(cmd)?;
    if out.status.is_none() {
        return Err(out.fail("the run did not end by itself"));
    }
    if out.code() == Some(0) {
        return Err(out.fail("the run exited 0"));
    }
    if !out.stderr.contains("node2") {
        return Err(out.fail("pmixrun's message does not name node2"));
    }
    Ok(format!(
        "failed in {:.2} s naming node2",
        out.elapsed.as_secs_f64()
    ))
}

fn write_executable(path: &Path, text: &str) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("cannot chmod {}: {e}", path.display()))
}
