//! `pmix-capi`, pmix-rs's `libpmix.so.2`, under real programs: the unmodified libpmix C test
//! client (`pmix-tests/openpmix/pmix_client.c`, compiled against Debian's OpenPMIx 4.2
//! headers) run under `pmixrun` with `LD_LIBRARY_PATH` at a directory holding our library
//! prints what it prints on Debian's libpmix, and the dynamic loader says ours was loaded.
//! `docs/CAPI.md` says how to use the library.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pmix_tests::{
    Output, Running, cargo_build, check_client_output, openpmix_program, pmixrun_bin,
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

/// `pmixrun -n <n> pmix_client <scenarios>`, on our library when `ours`, else on Debian's.
/// With `ours`, the loader logs the libraries it initialises (`LD_DEBUG=libs`, on stderr).
fn pmix_client_run(n: u32, ours: bool) -> Output {
    let client = openpmix_program("pmix_client");
    let mut cmd = Command::new(pmixrun_bin());
    cmd.args(["-n", &n.to_string()])
        .arg(&client)
        .args(SCENARIOS)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if ours {
        cmd.env("LD_LIBRARY_PATH", our_libpmix_dir())
            .env("LD_DEBUG", "libs");
    }
    let what = format!("pmixrun -n {n} pmix_client (ours: {ours})");
    Running::start(cmd, &what).finish(Instant::now() + DEADLINE, &what)
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
    let ours = pmix_client_run(n, true);
    check_client_output(&ours, "pmix_client on pmix-capi", n, &SCENARIOS);
    let loaded = format!("init: {}", our_libpmix_dir().join("libpmix.so.2").display());
    let inits = ours.stderr.lines().filter(|l| l.contains(&loaded)).count();
    assert_eq!(
        inits, n as usize,
        "every rank loads our libpmix.so.2 ({loaded}): {ours:#?}"
    );
    assert!(
        !ours.stderr.contains("pmix2/lib/libpmix.so.2"),
        "Debian's libpmix was loaded too: {ours:#?}"
    );

    let debian = pmix_client_run(n, false);
    check_client_output(&debian, "pmix_client on Debian's libpmix", n, &SCENARIOS);
    assert_eq!(comparable_lines(&ours), comparable_lines(&debian));
}
