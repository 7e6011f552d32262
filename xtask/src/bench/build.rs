//! Building the two sides: `pmix-bench` with cargo (release), the OpenPMIx host and client with
//! `cc` and `pkg-config pmix`, into the target directory.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

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
}

/// The programs of one side.
pub(crate) enum Bins {
    /// `pmix-bench` (host, client and maps in one program).
    Ours { bench: PathBuf },
    /// `bench_host` and `bench_client` on OpenPMIx.
    OpenPmix { host: PathBuf, client: PathBuf },
}

/// Environment variables neither host may inherit: a surrounding PMIx job's (were this run
/// under a launcher) or MCA settings that would steer OpenPMIx away from its defaults.
fn scrubbed(mut cmd: Command) -> Command {
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("PMIX") {
            cmd.env_remove(&k);
        }
    }
    cmd
}

impl Bins {
    /// The host of a job of `n` processes, pinned to `pin` if given.
    pub(crate) fn job_command(
        &self,
        n: u32,
        pin: Option<u32>,
        timeout: Duration,
        client_args: &[String],
    ) -> Command {
        let mut cmd = match self {
            Bins::Ours { bench } => scrubbed(Command::new(bench)),
            Bins::OpenPmix { host, client } => {
                let mut c = scrubbed(Command::new(host));
                c.arg("job").arg("--client").arg(client);
                c
            }
        };
        if let Bins::Ours { .. } = self {
            cmd.arg("job");
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
            Bins::OpenPmix { host, .. } => scrubbed(Command::new(host)),
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

/// Builds `pmix-bench` in release mode (cargo's own output goes to our stderr).
pub(crate) fn ours(dirs: &Dirs) -> Result<Bins, String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let status = Command::new(cargo)
        .current_dir(crate::workspace_root())
        .args([
            "build",
            "--release",
            "--quiet",
            "-p",
            "pmix-tests",
            "--bin",
            "pmix-bench",
        ])
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("cargo build of pmix-bench failed ({status})"));
    }
    let bench = dirs.target.join("release").join("pmix-bench");
    if !bench.exists() {
        return Err(format!("{} was not built", bench.display()));
    }
    Ok(Bins::Ours { bench })
}

/// Compiles the C host and client against OpenPMIx, if its development files are installed.
pub(crate) fn openpmix(dirs: &Dirs) -> Result<Bins, String> {
    let version = run_quiet(
        Command::new("pkg-config").args(["--modversion", "pmix"]),
        "pkg-config --modversion pmix",
    )
    .map_err(|e| format!("OpenPMIx development files not found ({e}); install libpmix-dev"))?;
    let flags = run_quiet(
        Command::new("pkg-config").args(["--cflags", "--libs", "pmix"]),
        "pkg-config --cflags --libs pmix",
    )?;
    std::fs::create_dir_all(&dirs.out)
        .map_err(|e| format!("cannot create {}: {e}", dirs.out.display()))?;
    let src = crate::workspace_root().join("xtask").join("c");
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let compile = |name: &str| -> Result<PathBuf, String> {
        let exe = dirs.out.join(name);
        run_quiet(
            Command::new(&cc)
                .args(["-O2", "-Wall", "-Wextra", "-pthread", "-o"])
                .arg(&exe)
                .arg(src.join(format!("{name}.c")))
                .args(flags.split_whitespace()),
            &format!("cc {name}.c"),
        )?;
        Ok(exe)
    };
    let host = compile("bench_host")?;
    let client = compile("bench_client")?;
    eprintln!(
        "xtask bench: OpenPMIx {version}: built {}",
        dirs.out.display()
    );
    Ok(Bins::OpenPmix { host, client })
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
