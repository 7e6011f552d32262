//! `cargo xtask multinode`: pmixrun across the pretend cluster, next to the reference
//! launchers, as root.
//!
//! It brings up `scripts/multinode/cluster.sh up ssh slurm` (network-namespace nodes
//! `node1..N` with real sshd and a slurmd each, slurmctld and munge on the host, see `docs/MULTINODE-TESTING.md`), runs the scenarios in order, each with a
//! deadline, checks after each that nothing was left behind (no process of the scenario on
//! the host or any node, no new entry in any node's `/tmp`), prints PASS/FAIL per scenario
//! and a summary, and tears the cluster down on every way out: success, failure, panic
//! (a guard), SIGINT/SIGTERM/SIGHUP (a signal thread). A cluster an earlier run left is
//! torn down first.
//!
//! The binaries are built in release mode into the target directory, which the nodes see
//! (they share the host's filesystem except `/tmp`).

pub(crate) mod cluster;
pub(crate) mod launchers;
pub(crate) mod proc_table;
pub(crate) mod procs;
mod scenarios;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use crate::bench::build::{Dirs, compile_source};
use scenarios::{Ctx, Programs, Run, SCENARIOS, Scenario};

const USAGE: &str = "\
usage: cargo xtask multinode [options]        (as root)

Brings up the pretend cluster (scripts/multinode/cluster.sh: network-namespace nodes with
sshd and slurmd, slurmctld and munge on the host), runs the multi-node scenarios in order, each with a deadline and a check that it left
nothing behind (processes on the host or the nodes, files in the nodes' /tmp), prints PASS or
FAIL per scenario and a summary, and tears the cluster down however it ends. Exit 0 only if
every scenario run passed.

options:
    --nodes N            nodes in the cluster (default 4, at least 3); ranks are 2 per node
    --only NAME[,NAME..] run only those scenarios, in the suite's order
    --references-only    skip the pmixrun scenarios (and building pmixrun)
    --list               list the scenarios and exit
    -h, --help           this text";

struct Options {
    nodes: u32,
    only: Option<Vec<String>>,
    references_only: bool,
    list: bool,
}

impl Options {
    fn parse(args: &[String]) -> Result<Options, String> {
        let mut o = Options {
            nodes: 4,
            only: None,
            references_only: false,
            list: false,
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
            match a.as_str() {
                "--nodes" => {
                    o.nodes = value()?
                        .parse()
                        .ok()
                        .filter(|n| (3..=64).contains(n))
                        .ok_or("--nodes takes 3 to 64")?;
                }
                "--only" => {
                    let names: Vec<String> = value()?.split(',').map(str::to_owned).collect();
                    if let Some(name) = names
                        .iter()
                        .find(|n| !SCENARIOS.iter().any(|s| s.name == n.as_str()))
                    {
                        return Err(format!("no scenario {name:?} (--list lists them)"));
                    }
                    o.only = Some(names);
                }
                "--references-only" => o.references_only = true,
                "--list" => o.list = true,
                _ => return Err(format!("unknown option {a:?}")),
            }
        }
        Ok(o)
    }

    fn selected(&self, s: &Scenario) -> bool {
        match &self.only {
            Some(names) => names.iter().any(|n| n.as_str() == s.name),
            None => !(self.references_only && s.pmixrun),
        }
    }
}

/// The commands cluster.sh and the scenarios need, and the Debian package of each.
const TOOLS: &[(&str, &str)] = &[
    ("ip", "iproute2"),
    ("nsenter", "util-linux"),
    ("unshare", "util-linux"),
    ("sshd", "openssh-server"),
    ("ssh", "openssh-client"),
    ("ssh-keygen", "openssh-client"),
    ("slurmctld", "slurmctld"),
    ("slurmd", "slurmd"),
    ("srun", "slurm-client"),
    ("sinfo", "slurm-client"),
    ("munged", "munge"),
    ("munge", "munge"),
];

fn on_path(tool: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .any(|d| d.join(tool).is_file())
}

/// Refuses, saying why, when the cluster cannot be brought up here.
pub(crate) fn preflight(target: &Path) -> Result<(), String> {
    if !nix::unistd::geteuid().is_root() {
        return Err(
            "needs root (network namespaces, mounts, an sshd per node); run it as \
                    root, e.g. `sudo -E cargo xtask multinode`"
                .into(),
        );
    }
    let missing: Vec<(&str, &str)> = TOOLS.iter().copied().filter(|(t, _)| !on_path(t)).collect();
    if !missing.is_empty() {
        let tools: Vec<&str> = missing.iter().map(|(t, _)| *t).collect();
        let mut pkgs: Vec<&str> = missing.iter().map(|(_, p)| *p).collect();
        pkgs.dedup();
        return Err(format!(
            "the pretend cluster needs {} (Debian packages {}): install them with \
             `bash scripts/install-test-deps.sh` as root",
            tools.join(", "),
            pkgs.join(" ")
        ));
    }
    if target.starts_with("/tmp") {
        return Err(format!(
            "the target directory {} is under /tmp, which every node has its own of: the \
             nodes would not see the binaries; set CARGO_TARGET_DIR elsewhere",
            target.display()
        ));
    }
    Ok(())
}

/// Polls `found` every 50 ms until it returns something or `deadline` passes.
pub(crate) fn wait_for<T>(deadline: Instant, mut found: impl FnMut() -> Option<T>) -> Option<T> {
    loop {
        if let Some(t) = found() {
            return Some(t);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The vendored cluster script.
pub(crate) fn cluster_script() -> PathBuf {
    crate::workspace_root()
        .join("scripts")
        .join("multinode")
        .join("cluster.sh")
}

/// `cargo build --release` of `args` (cargo's output on our stderr).
pub(crate) fn cargo_build_release(args: &[&str]) -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(crate::workspace_root())
        .args(["build", "--release", "--quiet"])
        .args(args)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!(
            "cargo build --release {} failed ({status})",
            args.join(" ")
        ))
    }
}

fn built(path: PathBuf) -> Result<PathBuf, String> {
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!("{} was not built", path.display()))
    }
}

fn compile(cc: &str, source: &str, exe: &Path) -> Result<PathBuf, String> {
    if !Path::new(cc).is_file() {
        return Err(format!(
            "{cc} is missing: install the test dependencies (`bash scripts/install-test-deps.sh`)"
        ));
    }
    compile_source(
        Path::new(cc),
        &crate::workspace_root().join(source),
        exe,
        &[],
    )
}

/// A library built at `lib`, copied to `dir/name`, as a directory to put first on a search
/// path: the `pmix` Python module (`pmix.abi3.so` on `PYTHONPATH`), pmix-capi (`libpmix.so.2`
/// on `LD_LIBRARY_PATH`).
fn library_dir(lib: &Path, dir: &Path, name: &str) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    std::fs::copy(lib, dir.join(name))
        .map_err(|e| format!("cannot copy {} into {}: {e}", lib.display(), dir.display()))?;
    Ok(dir.to_path_buf())
}

/// `source` compiled with gcc against the system libpmix (`pkg-config pmix`).
fn compile_against_libpmix(source: &str, exe: &Path) -> Result<PathBuf, String> {
    let out = Command::new("pkg-config")
        .args(["--cflags", "--libs", "pmix"])
        .output()
        .map_err(|e| format!("cannot run pkg-config: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "pkg-config knows no pmix (install libpmix-dev): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let flags = String::from_utf8_lossy(&out.stdout).into_owned();
    let flags: Vec<&str> = flags.split_whitespace().collect();
    compile_source(
        Path::new("gcc"),
        &crate::workspace_root().join(source),
        exe,
        &flags,
    )
}

/// Builds what the selected scenarios run: pmixrun and the demo with cargo, the test
/// programs of pmix-tests with each MPI's compiler wrapper.
fn build(opts: &Options, dirs: &Dirs, work: &Path) -> Result<Programs, String> {
    let release = dirs.target().join("release");
    let need_pmixrun = SCENARIOS.iter().any(|s| s.pmixrun && opts.selected(s));
    let bin = work.join("bin");
    let (pmixrun, demo, test_client, python_module, capi_lib) = if need_pmixrun {
        cargo_build_release(&[
            "-p",
            "pmixrun",
            "-p",
            "pmix-client",
            "-p",
            "pmix-tests",
            "--bins",
            "--examples",
        ])?;
        cargo_build_release(&["-p", "pmix-python", "--lib"])?;
        cargo_build_release(&["-p", "pmix-capi", "--lib"])?;
        (
            built(release.join("pmixrun")),
            built(release.join("examples").join("demo")),
            built(release.join("pmix-test-client")),
            library_dir(
                &release.join("libpmix.so"),
                &work.join("python"),
                "pmix.abi3.so",
            ),
            library_dir(
                &release.join("libpmix_capi.so"),
                &work.join("capi"),
                "libpmix.so.2",
            ),
        )
    } else {
        let skipped = || Err("not built (--references-only)".to_owned());
        (skipped(), skipped(), skipped(), skipped(), skipped())
    };
    Ok(Programs {
        pmixrun,
        demo,
        test_client,
        python_module,
        mpich_hello: compile(
            "/usr/bin/mpicc.mpich",
            "pmix-tests/mpi/hello.c",
            &bin.join("mpich-hello"),
        ),
        mpich_exit_early: compile(
            "/usr/bin/mpicc.mpich",
            "pmix-tests/mpi/exit_early.c",
            &bin.join("mpich-exit-early"),
        ),
        ompi_hello: compile(
            "/usr/bin/mpicc.openmpi",
            "pmix-tests/openpmix/mpi_hello_ompi.c",
            &bin.join("ompi-hello"),
        ),
        ompi_exit_early: compile(
            "/usr/bin/mpicc.openmpi",
            "pmix-tests/mpi/exit_early.c",
            &bin.join("ompi-exit-early"),
        ),
        capi_lib,
        libpmix_client: compile_against_libpmix(
            "pmix-tests/openpmix/pmix_client.c",
            &bin.join("pmix_client"),
        ),
        ompi5_hello: compile(
            "/opt/ompi5/bin/mpicc",
            "pmix-tests/mpi/hello.c",
            &bin.join("ompi5-hello"),
        ),
    })
}

/// Entry point of `cargo xtask multinode`.
pub(crate) fn run(args: &[String]) -> ExitCode {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let opts = match Options::parse(args) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("xtask multinode: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    if opts.list {
        for s in SCENARIOS {
            let tag = if s.pmixrun { " [pmixrun]" } else { "" };
            println!("{:<24}{} {}", s.name, tag, s.what);
        }
        return ExitCode::SUCCESS;
    }
    let dirs = Dirs::new();
    if let Err(e) = preflight(dirs.target()) {
        eprintln!("xtask multinode: refusing: {e}");
        return ExitCode::from(2);
    }
    let work = dirs.target().join("xtask-multinode");
    let started = Instant::now();
    let programs = match build(&opts, &dirs, &work) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("xtask multinode: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "xtask multinode: built in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let ctx = Ctx {
        nodes: opts.nodes,
        programs,
        work,
    };
    let cluster = match cluster::Cluster::up(&cluster_script(), opts.nodes) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("xtask multinode: {e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "xtask multinode: cluster of {} nodes up in {:.2} s",
        opts.nodes,
        cluster.up_time.as_secs_f64()
    );
    let results = run_scenarios(&opts, &ctx, &dirs);
    cluster.down("after the scenarios");

    println!(
        "\nsummary ({} nodes, {} ranks per run):",
        opts.nodes,
        2 * opts.nodes
    );
    let mut failed = 0;
    for (s, result) in &results {
        let tag = if s.pmixrun { " [pmixrun]" } else { "" };
        match result {
            Ok(_) => println!("  PASS  {}{tag}", s.name),
            Err(_) => {
                failed += 1;
                println!("  FAIL  {}{tag}", s.name);
            }
        }
    }
    // The reasons again, last: a log cut to its tail still says why.
    for (s, result) in &results {
        if let Err(why) = result {
            println!("\nwhy {} failed: {why}", s.name);
        }
    }
    println!(
        "{} passed, {failed} failed, in {:.1} s",
        results.len() - failed,
        started.elapsed().as_secs_f64()
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn run_scenarios<'s>(
    opts: &Options,
    ctx: &Ctx,
    dirs: &Dirs,
) -> Vec<(&'s Scenario, Result<String, String>)> {
    let build_dirs = [dirs.target().to_path_buf()];
    let selected: Vec<&Scenario> = SCENARIOS.iter().filter(|s| opts.selected(s)).collect();
    let total = selected.len();
    let mut results = Vec::new();
    for (i, s) in selected.into_iter().enumerate() {
        if cluster::STOPPING.load(std::sync::atomic::Ordering::SeqCst) {
            break;
        }
        let marker = format!("{}-{}-{}", std::process::id(), i, s.name);
        let before = procs::Before::take(opts.nodes);
        let run = Run::new(ctx, s, marker.clone());
        let t = Instant::now();
        let mut result = (s.run)(&run);
        let elapsed = t.elapsed();
        if let Err(left) = before.check_nothing_left(&marker, &build_dirs, s.settle) {
            result = match result {
                Ok(_) => Err(left),
                Err(e) => Err(format!("{e}\n    and {left}")),
            };
        }
        match &result {
            Ok(how) => println!(
                "[{}/{total}] PASS {} ({:.2} s): {how}",
                i + 1,
                s.name,
                elapsed.as_secs_f64()
            ),
            Err(why) => println!(
                "[{}/{total}] FAIL {} ({:.2} s): {why}",
                i + 1,
                s.name,
                elapsed.as_secs_f64()
            ),
        }
        results.push((s, result));
    }
    results
}
