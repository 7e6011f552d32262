//! The `pmix` Python module of pmix-python, run by real Python processes: one script,
//! `pmix-tests/python/pmix_binding.py` (put/commit/fence/get of every peer, publish/lookup, an
//! event, resolve_peers/resolve_nodes), under pmixrun, under Open MPI 5's `prterun`, and, as an
//! oracle, on Debian's python3-pmix under pmixrun: the two bindings must print the same lines.
//!
//! The module is the cdylib built by cargo, put on `PYTHONPATH` as `pmix.abi3.so` (the wheel
//! `cargo xtask python-wheel` makes holds the same file). python3-pmix is also a module named
//! `pmix`, in Debian's dist-packages, so every run checks which one answered.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pmix_tests::{
    Output, Running, SYSTEM_PYTHON, assert_ok, cargo_build, clean_command, in_private_network,
    openpmix_python_client, pmixrun_bin, sorted_lines,
};

/// For one run of the script; it takes a second or two.
const DEADLINE: Duration = Duration::from_secs(90);

/// The number of ranks of every run.
const N: u32 = 4;

/// A directory holding only `pmix.abi3.so`, the module just built (once per test process).
fn module_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let profile = cargo_build(&["-p", "pmix-python", "--lib"]);
        let dir = profile.join("python-binding-test");
        std::fs::create_dir_all(&dir).expect("making the module's directory");
        let tmp = dir.join(format!("pmix.abi3.so.{}", std::process::id()));
        std::fs::copy(profile.join("libpmix.so"), &tmp).expect("copying the module");
        std::fs::rename(&tmp, dir.join("pmix.abi3.so")).expect("placing the module");
        dir
    })
}

/// The script all runs share.
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python/pmix_binding.py")
}

/// `python3` with our module first on its path. Debian's interpreter: it also has
/// python3-pmix, which ours must shadow.
fn our_python(cmd: &mut Command) {
    cmd.env("PYTHONPATH", module_dir());
}

/// `pmixrun -n N <python> pmix_binding.py <args>`, ours on the path when `ours`.
fn under_pmixrun(ours: bool, args: &[&str]) -> (String, Output) {
    let mut cmd = clean_command(pmixrun_bin());
    cmd.args(["-n", &N.to_string(), SYSTEM_PYTHON])
        .arg(script())
        .args(args)
        .env_remove("PMIXRS_NAMESERVER");
    if ours {
        our_python(&mut cmd);
    } else {
        openpmix_python_client();
        cmd.env_remove("PYTHONPATH");
    }
    let what = format!(
        "pmixrun -n {N} python3 pmix_binding.py {} on {}",
        args.join(" "),
        if ours { "pmix-rs" } else { "python3-pmix" }
    );
    let out = Running::start(cmd, &what).finish(Instant::now() + DEADLINE, &what);
    (what, out)
}

/// The lines every rank of a job of `N` must print, whichever binding and launcher.
fn expected_lines() -> Vec<String> {
    let ranks = 0..N;
    let mut want = Vec::new();
    for r in ranks.clone() {
        want.push(format!("job rank={r} size={N}"));
        for p in ranks.clone() {
            let bytes: String = (p..2 * p + 10).map(|b| format!("{b:02x}")).collect();
            want.push(format!(
                "get rank={r} peer={p} str=value-of-rank-{p} u32={} i64={} bool={} double={:?} \
                 bytes={bytes}",
                4_000_000_000 - u64::from(p),
                -(1i64 << 40) - i64::from(p),
                u32::from(p % 2 == 0),
                1000.5 + 0.25 * f64::from(p),
            ));
        }
        if r != 0 {
            want.push(format!(
                "lookup rank={r} key=pyb.pub.str value=published-by-0 publisher=0"
            ));
            want.push(format!(
                "lookup rank={r} key=pyb.pub.u32 value=424242 publisher=0"
            ));
            want.push(format!(
                "event rank={r} status=-3007 source=0 info=hello-from-0"
            ));
        }
        let all: Vec<String> = ranks.clone().map(|p| p.to_string()).collect();
        want.push(format!("peers rank={r} local={}", all.join(",")));
        want.push(format!("nodes rank={r} count=1"));
        want.push(format!("OK rank={r} size={N}"));
    }
    want.sort_unstable();
    want
}

/// The script's checked lines (all but `binding`, `gil`, `errors` and `const`), sorted.
fn job_lines(out: &Output) -> Vec<String> {
    let skip = ["binding", "gil", "errors", "const"];
    let mut lines: Vec<String> = out
        .stdout
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .next()
                .is_some_and(|w| !skip.contains(&w))
        })
        .map(str::to_owned)
        .collect();
    lines.sort_unstable();
    lines
}

/// Every rank says `word rank=R <rest>`.
fn assert_every_rank(out: &Output, what: &str, word: &str, rest: &str) {
    let want: Vec<String> = (0..N).map(|r| format!("{word} rank={r} {rest}")).collect();
    assert_eq!(sorted_lines(out, word), want, "{what}: {out:#?}");
}

#[test]
fn our_module_under_pmixrun_sees_every_peer_the_event_and_lets_threads_run_in_a_fence() {
    let (what, out) = under_pmixrun(true, &["gil", "errors"]);
    assert_ok(&out, &what);
    assert_every_rank(&out, &what, "binding", "impl=pmix-rs");
    assert_eq!(job_lines(&out), expected_lines(), "{what}: {out:#?}");
    assert_every_rank(&out, &what, "gil", "ok");
    assert_every_rank(&out, &what, "errors", "ok");
}

#[test]
fn our_module_under_prterun_sees_every_peer_and_the_event() {
    let prefix: PathBuf = std::env::var_os("PMIXRS_OMPI5")
        .unwrap_or_else(|| "/opt/ompi5".into())
        .into();
    let prterun = prefix.join("bin/prterun");
    assert!(
        prterun.is_file(),
        "{} is missing: run `bash scripts/install-test-deps.sh` as root",
        prterun.display()
    );
    let script = script();
    let n = N.to_string();
    let path = format!("PYTHONPATH={}", module_dir().display());
    let args = [
        "--allow-run-as-root",
        "--oversubscribe",
        "-n",
        &n,
        "-x",
        &path,
        SYSTEM_PYTHON,
        script.to_str().expect("a UTF-8 path"),
        "errors",
    ];
    // PRRTE forwards -x NAME=VALUE to the ranks; the launcher itself runs without it.
    let mut cmd = in_private_network(&prterun, &args);
    cmd.env_remove("PYTHONPATH").stdin(Stdio::null());
    let what = format!("prterun {}", args.join(" "));
    let out = Running::start(cmd, &what).finish(Instant::now() + DEADLINE, &what);
    assert_ok(&out, &what);
    assert_every_rank(&out, &what, "binding", "impl=pmix-rs");
    assert_eq!(job_lines(&out), expected_lines(), "{what}: {out:#?}");
    assert_every_rank(&out, &what, "errors", "ok");
}

#[test]
fn python3_pmix_prints_the_same_lines_as_our_module_and_its_constants_are_ours() {
    let (what_c, theirs) = under_pmixrun(false, &["constants"]);
    assert_ok(&theirs, &what_c);
    assert_every_rank(&theirs, &what_c, "binding", "impl=python3-pmix");
    let (what_rs, ours) = under_pmixrun(true, &["constants"]);
    assert_ok(&ours, &what_rs);
    assert_every_rank(&ours, &what_rs, "binding", "impl=pmix-rs");
    assert_eq!(
        job_lines(&ours),
        job_lines(&theirs),
        "{what_rs} and {what_c} differ:\n{ours:#?}\n{theirs:#?}"
    );
    assert_eq!(
        job_lines(&theirs),
        expected_lines(),
        "{what_c}: {theirs:#?}"
    );

    // Every constant both modules have holds the same number or key.
    let consts = |out: &Output| -> std::collections::BTreeMap<String, String> {
        out.stdout
            .lines()
            .filter_map(|l| l.strip_prefix("const "))
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    };
    let (ours, theirs) = (consts(&ours), consts(&theirs));
    assert!(ours.len() > 500, "{what_rs}: only {} constants", ours.len());
    let shared: Vec<&String> = ours.keys().filter(|k| theirs.contains_key(*k)).collect();
    assert!(
        shared.len() > 400,
        "only {} constants in common",
        shared.len()
    );
    let differ: Vec<String> = shared
        .iter()
        .filter(|k| ours[**k] != theirs[**k])
        .map(|k| format!("{k}: ours {}, python3-pmix {}", ours[*k], theirs[*k]))
        .collect();
    assert!(
        differ.is_empty(),
        "constants differ:\n{}",
        differ.join("\n")
    );
    for needed in [
        "PMIX_SUCCESS",
        "PMIX_ERR_NOT_FOUND",
        "PMIX_GLOBAL",
        "PMIX_LOCAL",
        "PMIX_REMOTE",
        "PMIX_RANK_WILDCARD",
        "PMIX_STRING",
        "PMIX_INT",
        "PMIX_UINT32",
        "PMIX_BOOL",
        "PMIX_BYTE_OBJECT",
        "PMIX_JOB_SIZE",
    ] {
        assert!(shared.iter().any(|k| *k == needed), "{needed} missing");
    }
}
