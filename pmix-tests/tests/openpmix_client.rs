//! pmix-rs clients under real OpenPMIx servers: `pmix_host` (a one-node launcher on Debian's
//! OpenPMIx 4.2 server library, gds=hash) and Debian's Open MPI 4.1 `mpirun`. The Rust
//! programs are `pmix-oracle-client` (the scenarios of `pmix_client.c`, with its keys and
//! values) and the `tour` example of pmix-client (publish/lookup, events, get of all of a
//! process's data, peers and nodes, refusals, abort). A mixed job has libpmix and Rust ranks
//! fence together and read each other's data. `bash scripts/install-test-deps.sh` installs what
//! these need; without it they fail, saying so. Every run is bounded by a deadline.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pmix_tests::{
    OPENMPI_MPIRUN, Output, Running, assert_lines, assert_ok, cargo_build, check_client_output,
    clean_command, in_private_network, keyed_lines, openpmix_program, workspace_bin,
};

/// For one run; they take well under a second.
const DEADLINE: Duration = Duration::from_secs(60);

/// pmix_host's own deadline for its job (`-t`), inside [`DEADLINE`]: at it pmix_host kills
/// the job and says which ranks were still running.
const HOST_DEADLINE_SECS: u32 = 40;

/// The oracle's scenarios.
const SCENARIOS: [&str; 3] = ["job", "modex", "modex-direct"];

/// Runs `cmd` to its end, at most [`DEADLINE`].
fn run(cmd: Command, what: &str) -> Output {
    Running::start(cmd, what).finish(Instant::now() + DEADLINE, what)
}

/// `pmix_host -n <n> -- <program> <args>`.
fn under_pmix_host(n: u32, program: &Path, args: &[&str]) -> Command {
    pmix_tests::under_pmix_host(n, HOST_DEADLINE_SECS, program, args)
}

fn oracle() -> PathBuf {
    workspace_bin("pmix-oracle-client")
}

/// pmix-client's `tour` example, built once per test process.
fn tour() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let profile = cargo_build(&["-p", "pmix-client", "--example", "tour"]);
            profile.join("examples").join("tour")
        })
        .clone()
}

/// A directory of this test process for the wrapper scripts it writes.
fn scratch() -> PathBuf {
    let dir = pmix_tests::compiled_programs_dir("openpmix-client")
        .join(format!("scripts.{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("creating the scripts directory");
    dir
}

/// Writes an executable shell script `name` with `body` after the `#!/bin/sh` line.
fn script(name: &str, body: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = scratch().join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).expect("writing a script");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))
        .expect("making a script executable");
    path
}

/// Quotes a path for a shell script.
fn sh(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

/// Checks the lines of the `tour` steps every three-rank run of it has: `fetch` (every peer's
/// data), `names` (rank 0 publishes, the others find it) and `events` (rank 0 raises one, the
/// others get it).
fn check_tour_exchange(out: &Output, what: &str) {
    let per_rank = |f: &dyn Fn(u32) -> String| (0..3).map(f).collect::<Vec<_>>();
    assert_lines(
        out,
        what,
        "fetch",
        per_rank(&|r| format!("fetch rank={r} peers=3")),
    );
    assert_lines(
        out,
        what,
        "names",
        per_rank(&|r| format!("names rank={r} found={}", u32::from(r != 0))),
    );
    assert_lines(
        out,
        what,
        "events",
        per_rank(&|r| format!("events rank={r} got={}", u32::from(r != 0))),
    );
}

#[test]
fn rust_clients_under_the_openpmix_server() {
    let oracle = oracle();
    for n in [2, 4] {
        let what = format!(
            "pmix_host -n {n} -- pmix-oracle-client {}",
            SCENARIOS.join(" ")
        );
        let out = run(under_pmix_host(n, &oracle, &SCENARIOS), &what);
        check_client_output(&out, &what, n, &SCENARIOS);
    }
}

#[test]
fn rust_and_libpmix_clients_in_one_job() {
    // Even ranks run libpmix's client, odd ranks ours: each reads the other kind's job data
    // lines the same, and fences with and reads the modex data of the other kind.
    let libpmix = openpmix_program("pmix_client");
    let mixed = script(
        "mixed.sh",
        &format!(
            "if [ $((PMIX_RANK % 2)) -eq 0 ]; then exec {} \"$@\"; else exec {} \"$@\"; fi",
            sh(&libpmix),
            sh(&oracle())
        ),
    );
    for n in [2, 4] {
        let what = format!(
            "pmix_host -n {n} -- (pmix_client | pmix-oracle-client) {}",
            SCENARIOS.join(" ")
        );
        let out = run(under_pmix_host(n, &mixed, &SCENARIOS), &what);
        check_client_output(&out, &what, n, &SCENARIOS);
        // Both kinds really ran: pmix_client's job line has fields the oracle's lacks.
        let libpmix_lines = keyed_lines(&out.stdout, "job")
            .into_iter()
            .filter(|j| j.contains_key("node_rank"))
            .count();
        assert_eq!(libpmix_lines, (n / 2) as usize, "{what}: {out:#?}");
    }
}

#[test]
fn every_codec_and_buffer_type_the_server_offers() {
    // libpmix picks its codec by the first URI variable it finds; so does our client. The
    // server answers in whatever dialect the handshake names.
    let oracle = sh(&oracle());
    let cases = [
        (
            "v4",
            format!("exec env -u PMIX_SERVER_URI41 {oracle} \"$@\""),
        ),
        (
            "v3",
            format!("exec env -u PMIX_SERVER_URI41 -u PMIX_SERVER_URI4 {oracle} \"$@\""),
        ),
        (
            "v21",
            format!(
                "exec env -u PMIX_SERVER_URI41 -u PMIX_SERVER_URI4 -u PMIX_SERVER_URI3 {oracle} \
                 \"$@\""
            ),
        ),
        (
            "fully-described",
            format!("PMIX_BFROP_BUFFER_TYPE=PMIX_BFROP_BUFFER_FULLY_DESC exec {oracle} \"$@\""),
        ),
    ];
    for (name, body) in cases {
        let wrapper = script(&format!("{name}.sh"), &body);
        let what = format!("pmix_host -n 3 -- pmix-oracle-client ({name})");
        let out = run(under_pmix_host(3, &wrapper, &SCENARIOS), &what);
        check_client_output(&out, &what, 3, &SCENARIOS);
    }
}

#[test]
fn every_call_under_the_openpmix_server() {
    let steps = ["job", "fetch", "names", "events", "refused", "unknown"];
    let what = format!("pmix_host -n 3 -- tour {}", steps.join(" "));
    let out = run(under_pmix_host(3, &tour(), &steps), &what);
    assert_ok(&out, &what);
    let per_rank = |f: &dyn Fn(u32) -> String| (0..3).map(f).collect::<Vec<_>>();
    assert_lines(
        &out,
        &what,
        "job",
        per_rank(&|r| format!("job rank={r} peers=3 nodes=1")),
    );
    check_tour_exchange(&out, &what);
    // pmix_host has no spawn: the server refuses it, and nobody waits forever.
    assert_lines(
        &out,
        &what,
        "refused",
        per_rank(&|r| format!("refused rank={r} status=ERR_NOT_SUPPORTED")),
    );
    // Nor does it know other namespaces: its direct-modex upcall refuses, and so do the
    // server's answers to a job-data fetch and to a get.
    assert_lines(
        &out,
        &what,
        "unknown",
        per_rank(&|r| format!("unknown rank={r} status=ERR_NOT_SUPPORTED")),
    );
    assert_lines(
        &out,
        &what,
        "OK",
        per_rank(&|r| format!("OK rank={r} size=3")),
    );
}

#[test]
fn abort_under_the_openpmix_server_ends_the_job_with_its_code() {
    let what = "pmix_host -n 3 -- tour job abort";
    let out = run(under_pmix_host(3, &tour(), &["job", "abort"]), what);
    assert_eq!(out.status.code(), Some(7), "{what}: {out:#?}");
    assert_lines(
        &out,
        what,
        "aborting",
        vec!["aborting rank=1 code=7".to_owned()],
    );
    assert_lines(&out, what, "OK", Vec::new());
    assert!(
        out.stderr.contains("called abort with status 7"),
        "{what}: pmix_host did not report the abort: {out:#?}"
    );
}

/// Debian's `mpirun` starting `n` copies of `program`, its OpenPMIx server handing out the
/// hash storage module (root inside the namespace: mpirun wants to be told that is meant).
fn under_mpirun(n: u32, program: &Path, args: &[&str]) -> Command {
    let mpirun = Path::new(OPENMPI_MPIRUN);
    assert!(
        mpirun.exists(),
        "{OPENMPI_MPIRUN} is missing (openmpi-bin); {}",
        pmix_tests::INSTALL_TEST_DEPS
    );
    let program = program.to_string_lossy();
    let n = n.to_string();
    let mut all = vec!["--allow-run-as-root", "--oversubscribe", "-n", &n, &program];
    all.extend_from_slice(args);
    let mut cmd = in_private_network(mpirun, &all);
    cmd.env("PMIX_MCA_gds", "hash");
    cmd
}

#[test]
fn rust_clients_under_open_mpi_mpirun() {
    let what = format!(
        "mpirun.openmpi -n 2 pmix-oracle-client {}",
        SCENARIOS.join(" ")
    );
    let out = run(under_mpirun(2, &oracle(), &SCENARIOS), &what);
    check_client_output(&out, &what, 2, &SCENARIOS);

    // Publish/lookup through mpirun's name service, all of a peer's data, peers and nodes.
    // (Client-raised events do not reach the other ranks under Open MPI 4.1's mpirun, not
    // even between libpmix clients, so `events` is not run here.)
    let steps = ["job", "fetch", "names"];
    let what = format!("mpirun.openmpi -n 3 tour {}", steps.join(" "));
    let out = run(under_mpirun(3, &tour(), &steps), &what);
    assert_ok(&out, &what);
    let per_rank = |f: &dyn Fn(u32) -> String| (0..3).map(f).collect::<Vec<_>>();
    assert_lines(
        &out,
        &what,
        "job",
        per_rank(&|r| format!("job rank={r} peers=3 nodes=1")),
    );
    assert_lines(
        &out,
        &what,
        "fetch",
        per_rank(&|r| format!("fetch rank={r} peers=3")),
    );
    assert_lines(
        &out,
        &what,
        "names",
        per_rank(&|r| format!("names rank={r} found={}", u32::from(r != 0))),
    );
    assert_lines(
        &out,
        &what,
        "OK",
        per_rank(&|r| format!("OK rank={r} size=3")),
    );
}

#[test]
fn rust_clients_speaking_openpmix_to_pmixrun() {
    // pmixrun's server speaks both protocols and names both in the environment; without
    // PMIXRS_SERVER_URI our client takes the OpenPMIx one, as a libpmix client would: the two
    // sides of pmix-rs's OpenPMIx support, checked against each other.
    let profile = cargo_build(&["-p", "pmixrun", "--bin", "pmixrun"]);
    let pmixrun = profile.join("pmixrun");
    let cases = [
        ("oracle", oracle(), SCENARIOS.to_vec()),
        ("tour", tour(), vec!["job", "fetch", "names", "events"]),
    ];
    for (name, program, args) in cases {
        let wrapper = script(
            &format!("openpmix-{name}.sh"),
            &format!("exec env -u PMIXRS_SERVER_URI {} \"$@\"", sh(&program)),
        );
        let what = format!("pmixrun -n 3 {name} {} (over OpenPMIx)", args.join(" "));
        let mut cmd = clean_command(&pmixrun);
        cmd.args(["-n", "3"]).arg(&wrapper).args(&args);
        let out = run(cmd, &what);
        if name == "oracle" {
            check_client_output(&out, &what, 3, &args);
        } else {
            assert_ok(&out, &what);
            let per_rank = |f: &dyn Fn(u32) -> String| (0..3).map(f).collect::<Vec<_>>();
            check_tour_exchange(&out, &what);
            assert_lines(
                &out,
                &what,
                "OK",
                per_rank(&|r| format!("OK rank={r} size=3")),
            );
        }
    }
}
