//! PMI-2 clients under `pmixrun`: `pmi2/pmi2_client.c` linked to Slurm's libpmi2 (Debian
//! libpmi2-0-dev) for what a real client does (init, job attributes, put/fence/get across
//! ranks with values holding `;` and `=`, node attributes with waits, the name service,
//! spawn, abort), on one node and on two logical nodes; and `pmix-pmi2-wire`, a client of
//! this project's own on the wire, for what libpmi2 never sends (`thrid`, garbage,
//! oversized frames). Every run has a deadline.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pmix_tests::{Output, Running, compile_c, compiled_programs_dir, pmixrun_bin, workspace_bin};

const DEADLINE: Duration = Duration::from_secs(60);

/// `pmi2_client.c`, compiled once per test process against Slurm's libpmi2.
fn libpmi2_client() -> &'static Path {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let built = BIN.get_or_init(|| {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("pmi2/pmi2_client.c");
        compile_c(
            Path::new("gcc"),
            &["-Wall".into(), "-Werror".into()],
            &src,
            &["-lpmi2".into()],
            &compiled_programs_dir("pmi2"),
            "pmi2_client",
        )
    });
    match built {
        Ok(p) => p,
        Err(e) => panic!(
            "{e}\n(Slurm's libpmi2 comes with the Debian package libpmi2-0-dev: bash \
             scripts/install-test-deps.sh)"
        ),
    }
}

/// `pmixrun <args>`, waited for until the deadline.
fn pmixrun(args: &[&str]) -> Output {
    let mut cmd = Command::new(pmixrun_bin());
    cmd.args(["--timeout", "50"])
        .args(args)
        .current_dir(std::env::temp_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env_remove("PMIXRS_NAMESERVER");
    let what = format!("pmixrun {}", args.join(" "));
    Running::start(cmd, &what).finish(Instant::now() + DEADLINE, &what)
}

fn lines<'a>(text: &'a str, word: &str) -> Vec<&'a str> {
    let mut l: Vec<&str> = text
        .lines()
        .filter(|l| l.split_whitespace().next() == Some(word))
        .collect();
    l.sort_unstable();
    l
}

fn assert_ok(out: &Output, what: &str) {
    assert!(out.status.success(), "{what}: {out:#?}");
}

/// Both the one-node and the two-logical-node forms of a run.
const PLACEMENTS: [&[&str]; 2] = [&[], &["--launcher", "local", "--host", "n[1-2]:2"]];

#[test]
fn libpmi2_init_job_attributes_and_kvs_across_ranks() {
    let prog = libpmi2_client().to_str().expect("path");
    for (placement, mapping) in PLACEMENTS
        .iter()
        .zip(["(vector,(0,1,4))", "(vector,(0,2,2))"])
    {
        // Auto-detected: the program links libpmi2.
        let mut args = placement.to_vec();
        args.extend(["-n", "4", prog, "basic"]);
        let out = pmixrun(&args);
        assert_ok(&out, "basic");
        let inits = lines(&out.stdout, "init");
        assert_eq!(inits.len(), 4, "{out:#?}");
        for (r, l) in inits.iter().enumerate() {
            assert!(
                l.starts_with(&format!(
                    "init rank={r} size=4 appnum=0 spawned=0 jobid=rs-pmixrun-"
                )),
                "{l}"
            );
            assert!(
                l.ends_with(&format!("mapping={mapping} universe=4 hwloc_found=0")),
                "{l}"
            );
        }
        let want: Vec<String> = (0..4).map(|r| format!("kvs rank={r} ok")).collect();
        assert_eq!(lines(&out.stdout, "kvs"), want, "{out:#?}");
    }
    // Over loopback TCP: fullinit names the process by its PMI_ID (srcid).
    let out = pmixrun(&["--pmi", "pmi2-port", "-n", "3", prog, "basic"]);
    assert_ok(&out, "basic over pmi2-port");
    assert_eq!(lines(&out.stdout, "kvs").len(), 3, "{out:#?}");
}

#[test]
fn libpmi2_node_attributes_wait_for_the_put_and_never_forever() {
    let prog = libpmi2_client().to_str().expect("path");
    for placement in PLACEMENTS {
        let mut args = placement.to_vec();
        args.extend(["-n", "4", prog, "nodeattr"]);
        let out = pmixrun(&args);
        assert_ok(&out, "nodeattr");
        let want: Vec<String> = (0..4)
            .map(|r| format!("nodeattr rank={r} shared=ok never=failed"))
            .collect();
        assert_eq!(lines(&out.stdout, "nodeattr"), want, "{out:#?}");
    }
}

#[test]
fn libpmi2_publish_lookup_unpublish() {
    let prog = libpmi2_client().to_str().expect("path");
    let out = pmixrun(&["--pmi", "pmi2", "-n", "2", prog, "names"]);
    assert_ok(&out, "names");
    let want: Vec<String> = (0..2)
        .map(|r| format!("names rank={r} port=tag#0$p;o=rt$"))
        .collect();
    assert_eq!(lines(&out.stdout, "names"), want, "{out:#?}");
}

#[test]
fn libpmi2_spawn_with_preput_and_info_keys() {
    let prog = libpmi2_client().to_str().expect("path");
    for placement in PLACEMENTS {
        let mut args = placement.to_vec();
        args.extend(["-n", "2", prog, "spawn"]);
        let out = pmixrun(&args);
        assert_ok(&out, "spawn");
        assert_eq!(
            lines(&out.stdout, "spawn"),
            ["spawn rank=0 size=2 child_job_differs=1 child_key=ok"],
            "{out:#?}"
        );
        // Two commands of one process each: one job of two ranks, app numbers 0 and 1, each
        // with its own arguments and the working directory its wdir info key gave. They read
        // the preput key in their own job (and one of them rank 0's key in the parent's job,
        // while the parent waits for a key of theirs).
        let want = [
            "child rank=0 size=2 appnum=0 preput=ok parent=ok cwd=/tmp arg=a b;c",
            "child rank=1 size=2 appnum=1 preput=ok parent=ok cwd=/ arg=d=e",
        ];
        assert_eq!(lines(&out.stdout, "child"), want, "{out:#?}");
    }
}

#[test]
fn libpmi2_abort_ends_the_run_with_its_exit_code() {
    let prog = libpmi2_client().to_str().expect("path");
    let out = pmixrun(&["-n", "3", prog, "abort"]);
    assert_eq!(out.status.code(), Some(1), "{out:#?}");
    assert!(out.stdout.contains("abort rank=1 aborting"), "{out:#?}");
    // Nobody got through the fence rank 1 never joined.
    assert!(!out.stdout.contains("survived"), "{out:#?}");
    assert!(
        out.stderr
            .contains("rank 1 called abort with status 1: pmi2_client; aborting on purpose"),
        "{out:#?}"
    );
}

/// `pmix-pmi2-wire <scenario>` with its standard input and output on the PMI socket, `n`
/// ranks.
fn wire(scenario: &str, n: &str) -> Output {
    let client = workspace_bin("pmix-pmi2-wire");
    let client = client.to_str().expect("path");
    pmixrun(&[
        "--pmi",
        "pmi2",
        "-n",
        n,
        "bash",
        "-c",
        r#"exec "$0" "$@" <&"$PMI_FD" >&"$PMI_FD""#,
        client,
        scenario,
    ])
}

#[test]
fn own_client_thrid_is_echoed_and_semicolons_round_trip() {
    let out = wire("thrid", "2");
    assert_ok(&out, "thrid");
    assert_eq!(
        lines(&out.stderr, "wire"),
        ["wire thrid rank=0 echoed", "wire thrid rank=1 echoed"],
        "{out:#?}"
    );
}

#[test]
fn own_client_a_node_attribute_wait_is_woken_by_another_process_put() {
    let out = wire("wake", "2");
    assert_ok(&out, "wake");
    assert_eq!(
        lines(&out.stderr, "wire"),
        ["wire wake rank=0 put", "wire wake rank=1 woken"],
        "{out:#?}"
    );
}

#[test]
fn own_client_garbage_and_oversized_frames_get_an_error_and_a_close() {
    for (scenario, why) in [
        ("garbage", "a_frame_length_that_is_not_a_number"),
        (
            "oversized",
            "a_frame_of_999999_bytes,_more_than_the_65536_allowed",
        ),
    ] {
        // One rank: a rank ending without finalize makes pmixrun end the others.
        let out = wire(scenario, "1");
        // The client saw the error frame, then the end of the connection; it then exits
        // without finalize, which pmixrun reports as a failure of the run.
        let got = lines(&out.stderr, "wire");
        assert_eq!(got.len(), 1, "{scenario}: {out:#?}");
        assert!(
            got[0].starts_with(&format!("wire {scenario} rank=0 {why}")),
            "{out:#?}"
        );
        assert!(!out.stderr.contains("FAILED"), "{out:#?}");
    }
}
