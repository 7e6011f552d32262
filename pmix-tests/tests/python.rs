//! Python users: `pmixrun -n N python3 app.py` with mpi4py over the MPI wheels people install
//! from PyPI, with no flags. The venvs are `scripts/install-test-deps.sh`'s: MPICH 5.0.2
//! (`$PMIXRS_MPICH5`, default /opt/mpich5) and Open MPI 5.0.11 (`$PMIXRS_OMPI5`, default
//! /opt/ompi5), each with mpi4py, whose wheel loads the `libmpi` of its interpreter's prefix at
//! run time: pmixrun's `--pmi auto` must see which (MPICH refuses a PMIx launcher).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pmix_tests::{NameServerProcess, Output, Running, pmixrun_bin};

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

/// mpi4py's dynamic processes (`pmix-tests/py/mpi4py_dynamic.py`).
fn dynamic_script() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("py/mpi4py_dynamic.py")
}

/// `pmixrun [opts] -n <n> <python> mpi4py_dynamic.py <args>`, started.
fn start_dynamic(python: &PathBuf, opts: &[&str], n: u32, args: &[&str]) -> (String, Running) {
    let mut cmd = Command::new(pmixrun_bin());
    cmd.args(opts)
        .args(["-n", &n.to_string()])
        .arg(python)
        .arg(dynamic_script())
        .args(args)
        .env_remove("PMIXRS_NAMESERVER")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let what = format!(
        "pmixrun -n {n} {} mpi4py_dynamic.py {}",
        python.display(),
        args.join(" ")
    );
    let running = Running::start(cmd, &what);
    (what, running)
}

fn sorted(out: &Output) -> Vec<String> {
    let mut lines: Vec<String> = out.stdout.lines().map(str::to_owned).collect();
    lines.sort_unstable();
    lines
}

/// `MPI_Comm_spawn` from mpi4py: two ranks spawn two children, which merge with them.
fn mpi4py_spawns(python: &PathBuf) {
    let (what, run) = start_dynamic(python, &[], 2, &["spawn"]);
    let out = run.finish(Instant::now() + DEADLINE, &what);
    assert_eq!(out.status.code(), Some(0), "{what}: {out:#?}");
    let want: Vec<String> = ["child", "parent"]
        .iter()
        .flat_map(|side| (0..2).map(move |r| format!("spawn {side} rank {r} of 2 merged 4 sum 10")))
        .collect();
    assert_eq!(sorted(&out), want, "{what}: {out:#?}");
}

/// `MPI_Publish_name`/`MPI_Lookup_name` and accept/connect between two runs through a name
/// server both use (`--nameserver-uri`): 2 accepting ranks, 1 connecting.
fn mpi4py_connects_across_runs(python: &PathBuf, service: &str) {
    // One session: Open MPI joins the two runs' processes with collectives across runs.
    let ns = NameServerProcess::start_with(pmixrun_bin(), &["--one-session"], DEADLINE);
    let uri = ns.file_spec();
    let opts = ["--nameserver-uri", uri.as_str()];
    let end = Instant::now() + DEADLINE;
    let (what_s, server) = start_dynamic(python, &opts, 2, &["server", service]);
    let (what_c, client) = start_dynamic(python, &opts, 1, &["client", service]);
    let out_c = client.finish(end, &what_c);
    let out_s = server.finish(end, &what_s);
    ns.stop();
    assert_eq!(out_s.status.code(), Some(0), "{what_s}: {out_s:#?}");
    assert_eq!(out_c.status.code(), Some(0), "{what_c}: {out_c:#?}");
    assert_eq!(
        sorted(&out_s),
        [
            "server rank 0 merged 3 sum 6",
            "server rank 1 merged 3 sum 6"
        ],
        "{what_s}: {out_s:#?}"
    );
    assert_eq!(
        sorted(&out_c),
        ["client rank 0 merged 3 sum 6"],
        "{what_c}: {out_c:#?}"
    );
}

#[test]
fn mpi4py_over_the_mpich_wheel_spawns_and_connects_across_runs() {
    let python = python("PMIXRS_MPICH5", "/opt/mpich5");
    mpi4py_spawns(&python);
    mpi4py_connects_across_runs(&python, &format!("mpi4py.mpich.{}", std::process::id()));
}

#[test]
fn mpi4py_over_the_open_mpi_wheel_spawns_and_connects_across_runs() {
    let python = python("PMIXRS_OMPI5", "/opt/ompi5");
    mpi4py_spawns(&python);
    mpi4py_connects_across_runs(&python, &format!("mpi4py.ompi.{}", std::process::id()));
}
