//! The scenarios under Slurm: `srun --mpi=pmix` (Slurm's own PMIx server, pmix-rs's clients
//! and library) and pmixrun inside an allocation (`salloc ... pmixrun`), with the failures
//! Slurm adds (scancel, a killed slurmd).

use super::*;

/// `srun -N <nodes> -n <2 × nodes> --mpi=pmix <options> PROGRAM ARGS...` on the cluster's
/// Slurm, with the ring fence ([`launchers::srun_pmix`]).
fn srun(run: &Run<'_>, options: &[&str], program: &Path, args: &[&str]) -> Command {
    let mut cmd = launchers::srun_pmix(run.ctx.nodes);
    cmd.args(options).arg(program).args(args);
    cmd
}

/// `salloc -N<nodes> -n<ranks> pmixrun <options> -n <ranks> <program> <args>`: pmixrun in an
/// allocation, with no host list.
fn salloc_pmixrun(
    run: &Run<'_>,
    options: &[&str],
    program: &Path,
    args: &[&str],
) -> Result<Command, String> {
    let mut cmd = launchers::salloc(run.ctx.nodes);
    cmd.arg(self::program(&run.ctx.programs.pmixrun)?)
        .args(options)
        .args(["-n", &run.ranks().to_string()])
        .arg(program)
        .args(args);
    Ok(cmd)
}

pub(super) fn salloc_pmixrun_demo(run: &Run<'_>) -> Result<String, String> {
    let cmd = salloc_pmixrun(
        run,
        &["--tag-output"],
        program(&run.ctx.programs.demo)?,
        &[],
    )?;
    let out = run.run(cmd)?;
    let n = run.ranks();
    // Tagged with the node: the daemons run under the allocation's names.
    expect_every_rank(&out, n, |r| {
        format!(
            "[{r}@node{}] rank {r} of {n}: checked {} peers",
            r / 2 + 1,
            n - 1
        )
    })
}

/// Without `-n`: the allocation's slots (2 per node) say how many.
pub(super) fn salloc_pmixrun_per_slot(run: &Run<'_>) -> Result<String, String> {
    let mut cmd = launchers::salloc(run.ctx.nodes);
    cmd.arg(self::program(&run.ctx.programs.pmixrun)?)
        .arg(program(&run.ctx.programs.demo)?);
    let out = run.run(cmd)?;
    let n = run.ranks();
    expect_every_rank(&out, n, |r| {
        format!("rank {r} of {n}: checked {} peers", n - 1)
    })
}

pub(super) fn salloc_pmixrun_exit_early(run: &Run<'_>) -> Result<String, String> {
    // Two per node: rank 5 is on node3. The others wait in a job-wide fence.
    let client = program(&run.ctx.programs.test_client)?;
    let out = run.run(salloc_pmixrun(
        run,
        &[],
        client,
        &["stuck-fence", "5", "3"],
    )?)?;
    if out.status.is_none() {
        return Err(out.fail("the run did not end by itself"));
    }
    if out.code() == Some(0) {
        return Err(out.fail("the run exited 0"));
    }
    if !out.stderr.contains("rank 5 exited with status 3") {
        return Err(out.fail("pmixrun's message does not name rank 5"));
    }
    let failed = out
        .stdout
        .lines()
        .filter(|l| l.ends_with("fence failed with ERR_PROC_TERM_WO_SYNC"))
        .count();
    if failed != run.ranks() as usize - 1 {
        return Err(out.fail(&format!(
            "{failed} ranks saw their fence fail, not {}",
            run.ranks() - 1
        )));
    }
    if out.elapsed > Duration::from_secs(10) {
        return Err(out.fail("the run took longer than 10 s to end"));
    }
    Ok(format!(
        "failed in {:.2} s, every other rank's fence failed",
        out.elapsed.as_secs_f64()
    ))
}

pub(super) fn salloc_pmixrun_scancel(run: &Run<'_>) -> Result<String, String> {
    let cmd = salloc_pmixrun(run, &[], Path::new("/bin/sleep"), &["60"])?;
    let (running, _) = wait_for_node3(run, run.start(cmd)?, "sleep")?;
    let since = running.started();
    let jobs = Command::new("squeue")
        .env("SLURM_CONF", cluster::slurm_conf())
        .args(["-h", "-o", "%i"])
        .output()
        .map_err(|e| format!("cannot run squeue: {e}"))?;
    let ids = String::from_utf8_lossy(&jobs.stdout).trim().to_owned();
    if ids.is_empty() {
        let out = running.wait(Instant::now());
        return Err(out.fail("squeue shows no job"));
    }
    let cancelled = Instant::now();
    let status = Command::new("scancel")
        .env("SLURM_CONF", cluster::slurm_conf())
        .args(ids.split_whitespace())
        .status()
        .map_err(|e| format!("cannot run scancel: {e}"))?;
    let out = running.wait(run.deadline.min(cancelled + Duration::from_secs(30)));
    if !status.success() {
        return Err(out.fail(&format!("scancel {ids}: {status}")));
    }
    if out.status.is_none() {
        return Err(out.fail("the run did not end after scancel"));
    }
    if out.code() == Some(0) {
        return Err(out.fail("the run exited 0 after scancel"));
    }
    let after = (since + out.elapsed).saturating_duration_since(cancelled);
    if after > Duration::from_secs(10) {
        return Err(out.fail(&format!(
            "the run ended {:.1} s after scancel, not within 10 s",
            after.as_secs_f64()
        )));
    }
    Ok(format!("ended {:.2} s after scancel", after.as_secs_f64()))
}

pub(super) fn srun_pmix_demo(run: &Run<'_>) -> Result<String, String> {
    let out = run.run(srun(run, &[], program(&run.ctx.programs.demo)?, &[]))?;
    let n = run.ranks();
    expect_every_rank(&out, n, |r| {
        format!("rank {r} of {n}: checked {} peers", n - 1)
    })
}

pub(super) fn srun_pmix_python(run: &Run<'_>) -> Result<String, String> {
    let module = program(&run.ctx.programs.python_module)?;
    let script = crate::workspace_root().join("pmix-tests/python/pmix_binding.py");
    let mut cmd = srun(run, &[], Path::new("/usr/bin/python3"), &[]);
    // Slurm's PMIx plug-in has no name service (publish and lookup: NOT_SUPPORTED), and
    // slurmstepd cancels the step on any event a process notifies.
    cmd.args([
        script.as_os_str(),
        "no-names".as_ref(),
        "no-events".as_ref(),
    ])
    .env("PYTHONPATH", module);
    let out = run.run(cmd)?;
    let n = run.ranks();
    expect_every_rank(&out, n, |r| format!("binding rank={r} impl=pmix-rs"))?;
    expect_every_rank(&out, n, |r| format!("OK rank={r} size={n}"))
}

/// The C library's programs under srun, on pmix-rs's `libpmix.so.2` and then on the one
/// they were linked with: libpmix's test client (`job modex modex-direct fence`: no
/// `publish`, Slurm's plug-in has no name service) and Open MPI 5's hello. On ours, the
/// loader (`LD_DEBUG=libs`) must have initialised our library once per rank and no other
/// libpmix; both runs must exit 0 and print the same lines (each run's namespace left out).
pub(super) fn srun_pmix_capi(run: &Run<'_>) -> Result<String, String> {
    let lib = program(&run.ctx.programs.capi_lib)?;
    let n = run.ranks();
    let size = n.to_string();
    let ours = format!("calling init: {}", lib.join("libpmix.so.2").display());
    // The ranks' environment alone: srun loads Slurm's PMIx plug-in, and so libpmix, itself,
    // and must keep Debian's. The library path this process inherited (cargo's toolchain
    // directories) would win over `--export`'s in the tasks: srun is given none.
    let on_ours = |exe: &Path, args: &[&str]| -> Result<Finished, String> {
        let export = format!(
            "--export=ALL,LD_LIBRARY_PATH={},LD_DEBUG=libs",
            lib.display()
        );
        let mut cmd = srun(run, &[&export], exe, args);
        cmd.env_remove("LD_LIBRARY_PATH");
        let out = run.run(cmd)?;
        if out.code() != Some(0) {
            return Err(out.fail("did not exit 0 on pmix-rs's libpmix.so.2"));
        }
        let inits: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| l.contains("calling init:") && l.contains("/libpmix.so"))
            .collect();
        let loaded_ours = inits
            .iter()
            .filter(|l| l.trim_end().ends_with(&ours))
            .count();
        if loaded_ours != n as usize || inits.len() != n as usize {
            return Err(out.fail(&format!(
                "{loaded_ours} of {n} ranks initialised {ours}; libpmix inits: {inits:#?}"
            )));
        }
        Ok(out)
    };
    // libpmix's test client, on ours: every rank's job data and both exchanges check out. (On
    // the C library it fails under Slurm 22.05 by slurmstepd's data, not by the library:
    // `APPNUM` comes as an `INT` and every rank of another node has the reader's `NODEID`,
    // which pmix-rs's client corrects; so there is no C run to compare it with. Subset
    // fences are left out: Slurm's ring fence refuses a fence without a rank of every node.)
    let client = program(&run.ctx.programs.libpmix_client)?;
    let out = on_ours(client, &["job", "modex", "modex-direct"])?;
    expect_every_rank(&out, n, |r| format!("OK rank={r} size={n}"))?;
    let client_time = out.elapsed;
    // Open MPI 5's hello: the same lines on ours as on Open MPI's own library.
    let hello = program(&run.ctx.programs.ompi5_hello)?;
    let mine = on_ours(hello, &[size.as_str()])?;
    let on_c = run.run(srun(run, &[], hello, &[size.as_str()]))?;
    if on_c.code() != Some(0) {
        return Err(on_c.fail("did not exit 0 on Open MPI's libpmix"));
    }
    let (a, b) = (comparable_lines(&mine), comparable_lines(&on_c));
    if a.len() < n as usize || a != b {
        return Err(mine.fail(&format!("printed {a:#?} on ours, {b:#?} on Open MPI's")));
    }
    Ok(format!(
        "{n} ranks on {} nodes, ours loaded by each: pmix_client {:.2} s, Open MPI 5 hello {:.2} s",
        run.ctx.nodes,
        client_time.as_secs_f64(),
        mine.elapsed.as_secs_f64()
    ))
}

/// The stdout lines of `out`, sorted, without the fields that name the run's namespace.
fn comparable_lines(out: &Finished) -> Vec<String> {
    let mut lines: Vec<String> = out
        .stdout
        .lines()
        .map(|l| {
            l.split_whitespace()
                .filter(|f| !f.starts_with("nspace="))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    lines.sort_unstable();
    lines
}

pub(super) fn srun_pmix_fences(run: &Run<'_>) -> Result<String, String> {
    let client = program(&run.ctx.programs.test_client)?;
    fence_matrix(run, |args| Ok(srun(run, &[], client, args)))
}

pub(super) fn salloc_pmixrun_fences(run: &Run<'_>) -> Result<String, String> {
    let client = program(&run.ctx.programs.test_client)?;
    fence_matrix(run, |args| salloc_pmixrun(run, &[], client, args))
}

/// The test client's fences, each run by `command(args)`: a fence without data, then a get
/// of every peer's key (each a direct modex across the nodes); a collecting fence, then the
/// same gets; keys replaced between two fences.
fn fence_matrix(
    run: &Run<'_>,
    command: impl Fn(&[&str]) -> Result<Command, String>,
) -> Result<String, String> {
    let n = run.ranks();
    let mut how = Vec::new();
    for args in [
        &["fence", "@:", "b"][..],
        &["fence", "@:", ""],
        &["allgather"],
        &["replace", "4", "1,3"],
    ] {
        let out = run.run(command(args)?)?;
        let ok = out.stdout.lines().filter(|l| *l == "ok").count();
        if out.code() != Some(0) || ok != n as usize {
            return Err(out.fail(&format!("`{}`: {ok} of {n} ranks said ok", args.join(" "))));
        }
        how.push(format!("{} {:.2} s", args[0], out.elapsed.as_secs_f64()));
    }
    Ok(format!(
        "{n} ranks on {} nodes: {}",
        run.ctx.nodes,
        how.join(", ")
    ))
}

pub(super) fn salloc_pmixrun_daemon_killed(run: &Run<'_>) -> Result<String, String> {
    let cmd = salloc_pmixrun(run, &[], Path::new("/bin/sleep"), &["60"])?;
    let (running, daemon) = wait_for_node3(run, run.start(cmd)?, "sleep")?;
    let since = running.started();
    let _ = kill(Pid::from_raw(daemon), Signal::SIGKILL);
    let lost_at = Instant::now();
    let out = running.wait(run.deadline.min(lost_at + Duration::from_secs(30)));
    expect_lost_node3(&out, lost_at, since, Duration::from_secs(5))
}

/// Every rank waits on a FIFO of its own (`<dir>/<rank>`, opened for reading by `cat`) before
/// it runs the demo; node3's slurmd is killed while they wait and started again; then the
/// FIFOs are opened for writing and closed, and the demo must run to the end on every node.
pub(super) fn salloc_pmixrun_slurmd_killed(run: &Run<'_>) -> Result<String, String> {
    let n = run.ranks();
    let fifos = run.ctx.work.join(format!("fifos-{}", run.marker));
    let _ = std::fs::remove_dir_all(&fifos);
    std::fs::create_dir_all(&fifos)
        .map_err(|e| format!("cannot create {}: {e}", fifos.display()))?;
    for r in 0..n {
        let path = fifos.join(r.to_string());
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .map_err(|e| format!("cannot make the FIFO {}: {e}", path.display()))?;
    }
    let demo = program(&run.ctx.programs.demo)?;
    let cmd = salloc_pmixrun(
        run,
        &[],
        Path::new("/bin/sh"),
        &[
            "-c",
            r#"cat "$0/$PMIX_RANK" >/dev/null && exec "$1""#,
            &fifos.to_string_lossy(),
            &demo.to_string_lossy(),
        ],
    )?;
    let (running, _) = wait_for_node3(run, run.start(cmd)?, "cat")?;
    let outcome = restart_slurmd(3).and_then(|()| release_fifos(&fifos, n, run.deadline));
    let out = running.wait(run.deadline);
    let _ = std::fs::remove_dir_all(&fifos);
    outcome.map_err(|e| out.fail(&e))?;
    expect_every_rank(&out, n, |r| {
        format!("rank {r} of {n}: checked {} peers", n - 1)
    })?;
    Ok(format!(
        "{n} ranks finished after node3's slurmd was killed, in {:.2} s",
        out.elapsed.as_secs_f64()
    ))
}

/// Kills node `k`'s slurmd (SIGKILL: no goodbye to slurmctld) and starts it again.
fn restart_slurmd(k: u32) -> Result<(), String> {
    let pid_file = Path::new(cluster::STATE).join(format!("slurmd-node{k}.pid"));
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| format!("no pid in {}", pid_file.display()))?;
    kill(Pid::from_raw(pid), Signal::SIGKILL).map_err(|e| format!("kill slurmd {pid}: {e}"))?;
    let gone = wait_for(Instant::now() + Duration::from_secs(10), || {
        (!Path::new(&format!("/proc/{pid}")).exists()).then_some(())
    });
    if gone.is_none() {
        return Err(format!(
            "node{k}'s slurmd {pid} still there 10 s after SIGKILL"
        ));
    }
    let status = Command::new("bash")
        .arg(crate::multinode::cluster_script())
        .args(["exec", &k.to_string(), "slurmd", "-f"])
        .arg(cluster::slurm_conf())
        .status()
        .map_err(|e| format!("cannot start slurmd again: {e}"))?;
    if !status.success() {
        return Err(format!("starting node{k}'s slurmd again: {status}"));
    }
    Ok(())
}

/// Opens each rank's FIFO for writing and closes it, which lets its `cat` end. A FIFO with no
/// reader yet (its rank not started) cannot be opened without blocking: tried again until
/// `deadline`.
fn release_fifos(dir: &Path, n: u32, deadline: Instant) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    for r in 0..n {
        let path = dir.join(r.to_string());
        let opened = wait_for(deadline, || {
            std::fs::OpenOptions::new()
                .write(true)
                .custom_flags(nix::libc::O_NONBLOCK)
                .open(&path)
                .ok()
        });
        if opened.is_none() {
            return Err(format!("rank {r} never opened its FIFO"));
        }
    }
    Ok(())
}

pub(super) fn srun_pmix_abort(run: &Run<'_>) -> Result<String, String> {
    let client = program(&run.ctx.programs.test_client)?;
    // The others wait outside any fence: slurmstepd keeps an unfinished fence, and itself
    // with its /tmp/spmix_appdir_*, for PMIxTimeout (300 s) after the step ended.
    expect_abort(&run.run(srun(run, &[], client, &["abort", "7", "park"]))?)
}

pub(super) fn salloc_pmixrun_abort(run: &Run<'_>) -> Result<String, String> {
    let client = program(&run.ctx.programs.test_client)?;
    expect_abort(&run.run(salloc_pmixrun(run, &[], client, &["abort", "7"])?)?)
}

/// Checks a run whose rank 0 aborted with 7: the launcher exited 7 within 10 s.
fn expect_abort(out: &Finished) -> Result<String, String> {
    if out.code() != Some(7) {
        return Err(out.fail("the launcher did not exit with the aborting rank's 7"));
    }
    if out.elapsed > Duration::from_secs(10) {
        return Err(out.fail("the abort took longer than 10 s"));
    }
    Ok(format!("exited 7 in {:.2} s", out.elapsed.as_secs_f64()))
}

pub(super) fn srun_pmix_exit_early(run: &Run<'_>) -> Result<String, String> {
    // Block distribution, 2 per node: rank 5 is on node3. The others wait to be killed
    // (not in a fence: there slurmstepd would wait PMIxTimeout, 300 s by default).
    let client = program(&run.ctx.programs.test_client)?;
    let out = run.run(srun(
        run,
        &["--kill-on-bad-exit=1"],
        client,
        &["exit-rank", "5", "3"],
    ))?;
    if out.status.is_none() {
        return Err(out.fail("the step did not end by itself"));
    }
    if out.code() == Some(0) {
        return Err(out.fail("srun exited 0"));
    }
    if !out.stderr.contains("node3") {
        return Err(out.fail("srun's messages do not name node3"));
    }
    if out.elapsed > Duration::from_secs(10) {
        return Err(out.fail("the step took longer than 10 s to end"));
    }
    Ok(format!(
        "step ended ({}) in {:.2} s",
        out.status.map_or("killed".into(), |s| s.to_string()),
        out.elapsed.as_secs_f64()
    ))
}
