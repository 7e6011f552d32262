//! The known-good programs of `pmix-tests/openpmix/` under the real OpenPMIx (Debian's libpmix
//! 4.2) and the real Open MPI 4.1 launcher: `pmix_client` (libpmix) and `pmix_client.py`
//! (python3-pmix) under `pmix_host` (a launcher on the OpenPMIx server library), and
//! `mpi_hello_ompi` under Debian's `mpirun` and under `pmix_host`. These check the programs
//! and the test harness themselves, so that the tests running them under pmix-rs (and pmix-rs
//! clients under `pmix_host`) can trust them. `bash scripts/install-test-deps.sh` installs what
//! they need; without it they fail, saying so. Every run is bounded by a deadline.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use pmix_tests::{
    OPENMPI_MPIRUN, Output, Running, assert_lines, assert_ok, check_client_output, clean_command,
    in_private_network, openmpi_direct_launch_env, openmpi_program, openpmix_host,
    openpmix_program, openpmix_python_client,
};

/// For one run; they take well under a second.
const DEADLINE: Duration = Duration::from_secs(30);

/// pmix_host's own deadline for its job (`-t`), inside [`DEADLINE`]: at it pmix_host kills
/// the job and says which ranks were still running.
const HOST_DEADLINE_SECS: u32 = 20;

/// Every scenario of the client programs (publish and the split fence need 2 and 3 ranks).
const ALL_SCENARIOS: [&str; 5] = ["job", "modex", "modex-direct", "fence", "publish"];

/// Runs `cmd` to its end, at most [`DEADLINE`].
fn run(cmd: Command, what: &str) -> Output {
    Running::start(cmd, what).finish(Instant::now() + DEADLINE, what)
}

/// `pmix_host -n <n> -- <program> <args>`.
fn under_pmix_host(n: u32, program: &Path, args: &[&str]) -> Command {
    pmix_tests::under_pmix_host(n, HOST_DEADLINE_SECS, program, args)
}

#[test]
fn libpmix_client_under_the_openpmix_server() {
    let client = openpmix_program("pmix_client");
    for n in [2, 4] {
        let what = format!(
            "pmix_host -n {n} -- pmix_client {}",
            ALL_SCENARIOS.join(" ")
        );
        let out = run(under_pmix_host(n, &client, &ALL_SCENARIOS), &what);
        check_client_output(&out, &what, n, &ALL_SCENARIOS);
        // The C client's scenario of pmix-rs's ds21 test, checked here to be known-good.
        let what = format!("pmix_host -n {n} -- pmix_client job peers");
        let out = run(under_pmix_host(n, &client, &["job", "peers"]), &what);
        check_client_output(&out, &what, n, &["job", "peers"]);
    }
}

#[test]
fn libpmix_client_abort_ends_the_job_with_its_code() {
    let client = openpmix_program("pmix_client");
    let what = "pmix_host -n 3 -- pmix_client job abort 7";
    let out = run(under_pmix_host(3, &client, &["job", "abort", "7"]), what);
    pmix_tests::check_abort_of_rank_1(&out, what, 7);
    assert!(
        out.stderr.contains("called abort with status 7"),
        "{what}: pmix_host did not report the abort: {out:#?}"
    );
}

#[test]
fn python_client_under_the_openpmix_server() {
    let (python, script) = openpmix_python_client();
    let what = format!(
        "pmix_host -n 3 -- pmix_client.py {}",
        ALL_SCENARIOS.join(" ")
    );
    let mut cmd = under_pmix_host(3, &python, &[]);
    cmd.arg(&script).args(ALL_SCENARIOS);
    let out = run(cmd, &what);
    check_client_output(&out, &what, 3, &ALL_SCENARIOS);
}

#[test]
fn open_mpi_hello_under_debian_mpirun() {
    let hello = openmpi_program("mpi_hello_ompi");
    let mpirun = Path::new(OPENMPI_MPIRUN);
    assert!(
        mpirun.exists(),
        "{OPENMPI_MPIRUN} is missing (openmpi-bin); {}",
        pmix_tests::INSTALL_TEST_DEPS
    );
    let what = "mpirun.openmpi -n 2 mpi_hello_ompi 2";
    let hello = hello.to_string_lossy();
    // Root inside the namespace: mpirun wants to be told that is intended.
    let cmd = in_private_network(
        mpirun,
        &[
            "--allow-run-as-root",
            "--oversubscribe",
            "--mca",
            "btl",
            "self,vader",
            "-n",
            "2",
            &hello,
            "2",
        ],
    );
    let out = run(cmd, what);
    assert_ok(&out, what);
    assert_lines(
        &out,
        what,
        "OK",
        vec![
            "OK rank=0 size=2 sum=1".to_owned(),
            "OK rank=1 size=2 sum=1".to_owned(),
        ],
    );
}

#[test]
fn open_mpi_hello_under_the_openpmix_server() {
    // What pmixrun has to do for Open MPI 4.1 too: a launcher that is not Open MPI's own,
    // the Slurm variables so Open MPI takes its job from PMIx.
    let hello = openmpi_program("mpi_hello_ompi");
    let what = "pmix_host -n 2 -- mpi_hello_ompi 2 (Slurm variables set)";
    let mut cmd = under_pmix_host(2, &hello, &["2"]);
    cmd.envs(openmpi_direct_launch_env());
    let out = run(cmd, what);
    assert_ok(&out, what);
    assert_lines(
        &out,
        what,
        "OK",
        vec![
            "OK rank=0 size=2 sum=1".to_owned(),
            "OK rank=1 size=2 sum=1".to_owned(),
        ],
    );
}

#[test]
fn pmix_host_ends_a_job_at_its_deadline() {
    // A process that never connects and never ends: pmix_host kills it at its -t.
    let mut cmd = clean_command(&openpmix_host());
    cmd.args(["-n", "2", "-t", "0.5", "--", "sleep", "600"]);
    let what = "pmix_host -t 0.5 -- sleep 600";
    let started = Instant::now();
    let out = run(cmd, what);
    assert_eq!(out.status.code(), Some(124), "{what}: {out:#?}");
    assert!(
        out.stderr.contains("deadline of 0.5 s passed") && out.stderr.contains("never connected"),
        "{what}: {out:#?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{what}: took {:?}",
        started.elapsed()
    );
}
