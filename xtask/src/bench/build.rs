//! Building the two sides: `pmix-bench` with cargo (release), the OpenPMIx host and client with
//! `cc` and `pkg-config pmix`, into the target directory; the platform floor
//! (`xtask/c/floor.c`, no PMIx) with `cc`; and for the launch rows, `pmixrun` with cargo
//! (release) and `xtask/c/mpi_hello.c` with each MPICH's `mpicc`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::mpich::Mpich;

/// Where the programs and the logs go.
pub(crate) struct Dirs {
    target: PathBuf,
    /// `<target>/xtask-bench`: the C programs.
    out: PathBuf,
    /// `<target>/xtask-bench/logs`: every run's stdout and stderr.
    pub(crate) logs: PathBuf,
}

impl Dirs {
    pub(crate) fn new() -> Dirs {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| crate::workspace_root().join("target"));
        let out = target.join("xtask-bench");
        let logs = out.join("logs");
        Dirs { target, out, logs }
    }

    /// The cargo target directory.
    pub(crate) fn target(&self) -> &Path {
        &self.target
    }
}

/// The programs of one side.
pub(crate) enum Bins {
    /// `pmix-bench` (host, client and maps in one program).
    Ours { bench: PathBuf },
    /// `bench_host` and `bench_client` on OpenPMIx.
    Openpmix { host: PathBuf, client: PathBuf },
}

/// Environment variables neither host may inherit: a surrounding PMIx job's (were this run
/// under a launcher) or MCA settings that would steer OpenPMIx away from its defaults.
pub(crate) fn scrubbed(mut cmd: Command) -> Command {
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("PMIX") {
            cmd.env_remove(&k);
        }
    }
    cmd
}

impl Bins {
    /// The host of a job of `n` processes, pinned to `pin` if given. Our host starts
    /// `client` instead of itself if given (the libpmix client, `bench_client`); OpenPMIx's
    /// always starts its own.
    pub(crate) fn job_command(
        &self,
        n: u32,
        pin: Option<u32>,
        timeout: Duration,
        client_args: &[String],
        client: Option<&Path>,
    ) -> Command {
        let client = match self {
            Bins::Ours { .. } => client,
            Bins::Openpmix { client, .. } => Some(client.as_path()),
        };
        let mut cmd = match self {
            Bins::Ours { bench } => scrubbed(Command::new(bench)),
            Bins::Openpmix { host, .. } => scrubbed(Command::new(host)),
        };
        cmd.arg("job");
        if let Some(client) = client {
            cmd.arg("--client").arg(client);
        }
        cmd.args(["--n", &n.to_string()])
            .args(["--timeout", &timeout.as_secs().to_string()]);
        if let Some(cpu) = pin {
            cmd.args(["--pin", &cpu.to_string()]);
        }
        cmd.arg("--").args(client_args);
        cmd
    }

    /// The map generation and big-registration run.
    pub(crate) fn regex_command(&self, quick: bool) -> Command {
        let mut cmd = match self {
            Bins::Ours { bench } => scrubbed(Command::new(bench)),
            Bins::Openpmix { host, .. } => scrubbed(Command::new(host)),
        };
        cmd.arg("regex");
        if quick {
            cmd.arg("--quick");
        }
        cmd
    }
}

fn run_quiet(cmd: &mut Command, what: &str) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {what}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{what} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Builds `bin` of `package` in release mode (cargo's own output goes to our stderr).
pub(crate) fn cargo_release(dirs: &Dirs, package: &str, bin: &str) -> Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(crate::workspace_root())
        .args(["build", "--release", "--quiet", "-p", package, "--bin", bin])
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("cargo build of {bin} failed ({status})"));
    }
    let exe = dirs.target.join("release").join(bin);
    if !exe.exists() {
        return Err(format!("{} was not built", exe.display()));
    }
    Ok(exe)
}

/// Builds `pmix-bench` in release mode.
pub(crate) fn ours(dirs: &Dirs) -> Result<Bins, String> {
    Ok(Bins::Ours {
        bench: cargo_release(dirs, "pmix-tests", "pmix-bench")?,
    })
}

/// Builds pmix-rs's `libpmix.so.2` (`pmix-capi`) in release mode and returns a directory
/// holding it under that name, for a client's `LD_LIBRARY_PATH`.
pub(crate) fn capi(dirs: &Dirs) -> Result<PathBuf, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(crate::workspace_root())
        .args(["build", "--release", "--quiet", "-p", "pmix-capi", "--lib"])
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("cargo build of pmix-capi failed ({status})"));
    }
    let built = dirs.target.join("release").join("libpmix_capi.so");
    let dir = dirs.out.join("capi-libpmix");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let link = dir.join("libpmix.so.2");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&built, &link)
        .map_err(|e| format!("cannot link {}: {e}", link.display()))?;
    Ok(dir)
}

/// Builds `pmixrun` in release mode, for the launch rows.
pub(crate) fn pmixrun(dirs: &Dirs) -> Result<PathBuf, String> {
    cargo_release(dirs, "pmixrun", "pmixrun")
}

/// `xtask/c/pmi1_bench.c`: barrier and fence loops over the PMI-1 wire protocol.
pub(crate) fn pmi1_bench(dirs: &Dirs) -> Result<PathBuf, String> {
    compile_c(dirs, "pmi1_bench", &[])
}

/// `xtask/c/barrier_floor.c`: the least a barrier across the nodes costs (no PMIx).
pub(crate) fn barrier_floor(dirs: &Dirs) -> Result<PathBuf, String> {
    compile_c(dirs, "barrier_floor", &[])
}

/// `xtask/c/mn_bench.c`: the multi-node bench's libpmix client (Debian's OpenPMIx).
pub(crate) fn mn_bench(dirs: &Dirs) -> Result<PathBuf, String> {
    let flags = libpmix_flags()?;
    compile_c(
        dirs,
        "mn_bench",
        &flags.split_whitespace().collect::<Vec<_>>(),
    )
}

/// The compiler flags of Debian's OpenPMIx (`pkg-config --cflags --libs pmix`).
fn libpmix_flags() -> Result<String, String> {
    run_quiet(
        Command::new("pkg-config").args(["--cflags", "--libs", "pmix"]),
        "pkg-config --cflags --libs pmix",
    )
    .map_err(|e| format!("OpenPMIx development files not found ({e}); install libpmix-dev"))
}

/// Compiles `xtask/c/<name>.c` into `<target>/xtask-bench/<name>` with `cc -O2`.
fn compile_c(dirs: &Dirs, name: &str, flags: &[&str]) -> Result<PathBuf, String> {
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    compile_with(dirs, Path::new(&cc), name, name, flags)
}

/// Compiles `xtask/c/<name>.c` into `<target>/xtask-bench/<exe>` with `cc -O2`.
fn compile_with(
    dirs: &Dirs,
    cc: &Path,
    name: &str,
    exe: &str,
    flags: &[&str],
) -> Result<PathBuf, String> {
    let src = crate::workspace_root().join("xtask").join("c");
    compile_source(
        cc,
        &src.join(format!("{name}.c")),
        &dirs.out.join(exe),
        flags,
    )
}

/// Compiles the C program `src` into `exe` with `cc -O2` (creating `exe`'s directory).
pub(crate) fn compile_source(
    cc: &Path,
    src: &Path,
    exe: &Path,
    flags: &[&str],
) -> Result<PathBuf, String> {
    if let Some(dir) = exe.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    }
    run_quiet(
        Command::new(cc)
            .args(["-O2", "-Wall", "-Wextra", "-pthread", "-o"])
            .arg(exe)
            .arg(src)
            .args(flags),
        &format!("{} {}", cc.display(), src.display()),
    )?;
    Ok(exe.to_path_buf())
}

/// `xtask/c/mpi_hello.c` compiled with one MPICH, and that MPICH's Hydra.
pub(crate) struct MpiHello {
    pub(crate) exe: PathBuf,
    pub(crate) mpiexec: PathBuf,
}

/// Compiles `mpi_hello.c` with `mpich`'s `mpicc`, if it and its `mpiexec` are installed.
pub(crate) fn mpi_hello(dirs: &Dirs, mpich: Mpich) -> Result<MpiHello, String> {
    let (mpicc, mpiexec) = (mpich.mpicc(), mpich.mpiexec());
    for tool in [&mpicc, &mpiexec] {
        if !tool.is_file() {
            return Err(format!("{} not found; {}", tool.display(), mpich.install()));
        }
    }
    let exe = compile_with(
        dirs,
        &mpicc,
        "mpi_hello",
        &format!("mpi_hello-{}", mpich.slug()),
        &[],
    )?;
    Ok(MpiHello { exe, mpiexec })
}

/// The version of an MPICH, for the report: `mpichversion`'s, and Debian's package version.
pub(crate) fn mpich_version(mpich: Mpich) -> Option<String> {
    let text = run_quiet(&mut Command::new(mpich.mpichversion()), "mpichversion").ok()?;
    let v = text
        .lines()
        .find_map(|l| l.strip_prefix("MPICH Version:"))
        .map(str::trim)?;
    let deb = match mpich {
        Mpich::Debian => run_quiet(
            Command::new("dpkg-query").args(["-W", "-f", "${Version}", "mpich"]),
            "dpkg-query",
        )
        .ok(),
        Mpich::Venv => None,
    };
    Some(match deb {
        Some(d) => format!("{}: MPICH {v} (Debian package mpich {d})", mpich.name()),
        None => format!(
            "{}: MPICH {v} in {}",
            mpich.name(),
            mpich.prefix().display()
        ),
    })
}

/// The platform floor: `floor N ITERS` (see `xtask/c/floor.c`), which needs no PMIx.
pub(crate) struct Floor {
    exe: PathBuf,
}

impl Floor {
    /// `n` clients doing `round_trips` request/echo round trips each; all on CPU 0 if `pinned`
    /// (`taskset` execs the floor, so it stays the leader of the run's process group).
    pub(crate) fn command(&self, n: u32, pinned: bool, round_trips: u32) -> Command {
        let mut cmd = if pinned {
            let mut c = Command::new("taskset");
            c.args(["-c", "0"]).arg(&self.exe);
            c
        } else {
            Command::new(&self.exe)
        };
        cmd.args([n.to_string(), round_trips.to_string()]);
        cmd
    }
}

/// Compiles the platform floor.
pub(crate) fn floor(dirs: &Dirs) -> Result<Floor, String> {
    Ok(Floor {
        exe: compile_c(dirs, "floor", &[])?,
    })
}

/// Compiles the C host and client against OpenPMIx, if its development files are installed.
pub(crate) fn openpmix(dirs: &Dirs) -> Result<Bins, String> {
    let version = run_quiet(
        Command::new("pkg-config").args(["--modversion", "pmix"]),
        "pkg-config --modversion pmix",
    )
    .map_err(|e| format!("OpenPMIx development files not found ({e}); install libpmix-dev"))?;
    let flags = libpmix_flags()?;
    let flags: Vec<&str> = flags.split_whitespace().collect();
    let host = compile_c(dirs, "bench_host", &flags)?;
    let client = compile_c(dirs, "bench_client", &flags)?;
    eprintln!(
        "xtask bench: OpenPMIx {version}: built {}",
        dirs.out.display()
    );
    Ok(Bins::Openpmix { host, client })
}

impl Bins {
    /// The libpmix client program, on OpenPMIx's side.
    pub(crate) fn libpmix_client(&self) -> Option<&Path> {
        match self {
            Bins::Openpmix { client, .. } => Some(client),
            Bins::Ours { .. } => None,
        }
    }
}

/// The scale rows' OpenPMIx host and client (`pmix-tests/openpmix/pmix_bighost.c` and
/// `pmix_bigclient.c`), compiled against Debian's OpenPMIx: (host, client).
pub(crate) fn openpmix_scale(dirs: &Dirs) -> Result<(PathBuf, PathBuf), String> {
    let flags = libpmix_flags()?;
    let flags: Vec<&str> = flags.split_whitespace().collect();
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let src = crate::workspace_root().join("pmix-tests").join("openpmix");
    let mut built = Vec::new();
    for name in ["pmix_bighost", "pmix_bigclient"] {
        built.push(compile_source(
            Path::new(&cc),
            &src.join(format!("{name}.c")),
            &dirs.out.join(name),
            &flags,
        )?);
    }
    let client = built.pop().unwrap_or_default();
    let host = built.pop().unwrap_or_default();
    Ok((host, client))
}

/// The version line of OpenPMIx's Debian package, for the report.
pub(crate) fn openpmix_version() -> Option<String> {
    let v = run_quiet(
        Command::new("pkg-config").args(["--modversion", "pmix"]),
        "pkg-config",
    )
    .ok()?;
    let deb = run_quiet(
        Command::new("dpkg-query").args(["-W", "-f", "${Version}", "libpmix2"]),
        "dpkg-query",
    )
    .ok();
    Some(match deb {
        Some(d) => format!("OpenPMIx {v} (Debian libpmix2 {d})"),
        None => format!("OpenPMIx {v}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::exec::{self, Sample};
    use crate::bench::report::FLOOR;

    #[test]
    fn the_floor_prints_one_number_per_client_pinned_or_not() {
        let tmp = std::env::temp_dir().join(format!("xtask-floor-test-{}", std::process::id()));
        let dirs = Dirs {
            target: tmp.clone(),
            out: tmp.clone(),
            logs: tmp.join("logs"),
        };
        let floor = match floor(&dirs) {
            Ok(f) => f,
            Err(e) => panic!("{e}"),
        };
        for pinned in [true, false] {
            let deadline = Duration::from_secs(30);
            let outcome = exec::run(floor.command(3, pinned, 20), deadline, &dirs.logs, "floor");
            assert_eq!(outcome.failure, None, "pinned: {pinned}");
            let clients = outcome.stdout.lines().filter(|l| l.starts_with("CLIENT "));
            assert_eq!(clients.count(), 3, "{}", outcome.stdout);
            let v = Sample::parse(&outcome.stdout).values.get(FLOOR).copied();
            assert!(v.is_some_and(|v| v > 0.0), "{}", outcome.stdout);
        }
        let outcome = exec::run(
            floor.command(0, false, 20),
            Duration::from_secs(30),
            &dirs.logs,
            "floor-bad",
        );
        let failure = outcome.failure.unwrap_or_default();
        assert!(failure.contains("N must be"), "{failure}");
        let _ = std::fs::remove_dir_all(&tmp);
    }
}
