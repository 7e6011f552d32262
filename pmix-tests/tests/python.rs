//! Python users: `pmixrun -n N python3 app.py` with mpi4py over the MPI wheels people install
//! from PyPI, with no flags. The venvs are `scripts/install-test-deps.sh`'s: MPICH 5.0.2
//! (`$PMIXRS_MPICH5`, default /opt/mpich5) and Open MPI 5.0.11 (`$PMIXRS_OMPI5`, default
//! /opt/ompi5), each with mpi4py, whose wheel loads the `libmpi` of its interpreter's prefix at
//! run time: pmixrun's `--pmi auto` must see which (MPICH refuses a PMIx launcher).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pmix_tests::{Output, Running, pmixrun_bin};

const DEADLINE: Duration = Duration::from_secs(90);

/// An mpi4py program: every rank's line after an allreduce of the ranks.
const APP: &str = "from mpi4py import MPI
c = MPI.COMM_WORLD
s = c.allreduce(c.Get_rank())
print('mpi4py rank %d of %d sum %d' % (c.Get_rank(), c.Get_size(), s), flush=True)
";

/// The interpreter of the venv at `$var` (default `default`), with mpi4py in it.
fn python(var: &str, default: &str) -> PathBuf {
    let prefix = std::env::var_os(var).map_or_else(|| PathBuf::from(default), PathBuf::from);
    let python = prefix.join("bin").join("python");
    let has = Command::new(&python)
        .args(["-c", "import mpi4py"])
        .stdin(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has,
        "no mpi4py in {}: run `bash scripts/install-test-deps.sh` as root",
        prefix.display()
    );
    python
}

/// The mpi4py program, written for one run (`name`: the test's, as tests run in parallel).
fn app(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("pmixrs-mpi4py.{}.{name}.py", std::process::id()));
    std::fs::write(&path, APP).expect("writing the mpi4py program");
    path
}

/// `pmixrun [pmi] -n <n> <python> -m mpi4py <app>` to its end (`label` names the test).
fn run(label: &str, pmi: Option<&str>, n: u32, python: &PathBuf) -> Output {
    let app = app(&format!("{label}-{}-{n}", pmi.unwrap_or("auto")));
    let mut cmd = Command::new(pmixrun_bin());
    if let Some(p) = pmi {
        cmd.args(["--pmi", p]);
    }
    cmd.args(["-n", &n.to_string()])
        .arg(python)
        .args(["-m", "mpi4py"])
        .arg(&app)
        .env_remove("PMIXRS_NAMESERVER")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let what = format!("pmixrun -n {n} {} -m mpi4py app.py", python.display());
    let out = Running::start(cmd, &what).finish(Instant::now() + DEADLINE, &what);
    let _ = std::fs::remove_file(&app);
    out
}

fn check_ranks(out: &Output, n: u32) {
    assert_eq!(out.status.code(), Some(0), "{out:#?}");
    let sum = n * (n - 1) / 2;
    let mut lines: Vec<&str> = out.stdout.lines().collect();
    lines.sort_unstable();
    let want: Vec<String> = (0..n)
        .map(|r| format!("mpi4py rank {r} of {n} sum {sum}"))
        .collect();
    assert_eq!(lines, want, "{out:#?}");
}

#[test]
fn mpi4py_over_the_mpich_wheel_needs_no_flags() {
    let python = python("PMIXRS_MPICH5", "/opt/mpich5");
    check_ranks(&run("mpich", None, 3, &python), 3);
    // Told to speak PMIx, MPICH refuses; pmixrun names the option that fixes it, once.
    let out = run("mpich", Some("pmix"), 2, &python);
    assert_ne!(out.status.code(), Some(0), "{out:#?}");
    let hint = "does not speak PMIx: run pmixrun with --pmi pmi1";
    assert_eq!(out.stderr.matches(hint).count(), 1, "{out:#?}");
}

#[test]
fn mpi4py_over_the_open_mpi_wheel_needs_no_flags() {
    let python = python("PMIXRS_OMPI5", "/opt/ompi5");
    check_ranks(&run("ompi", None, 3, &python), 3);
}
