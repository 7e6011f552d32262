//! Unmodified libpmix programs under `pmixrun`: the known-good programs of
//! `pmix-tests/openpmix/` (checked against the real OpenPMIx server in `openpmix_oracle.rs`),
//! that is a libpmix C client, the same scenarios on python3-pmix, and an Open MPI 4.1 hello,
//! now served by pmix-rs's OpenPMIx front-end; and a job mixing libpmix processes with
//! pmix-rs ones (`pmix-oracle-client`), which fence together and read each other's data.
//! `bash scripts/install-test-deps.sh` installs what they need; without it they fail, saying
//! so. Every run is bounded by a deadline.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pmix_tests::pmixrun_bin;
use pmix_tests::{
    Output, Running, assert_lines, assert_ok, cargo_build, check_client_output, keyed_lines,
    openmpi_program, openpmix_program, openpmix_python_client, profile_dir,
};

/// For one run; they take a second or two.
const DEADLINE: Duration = Duration::from_secs(60);

/// Every scenario of the client programs (publish and the split fence need 2 and 3 ranks).
const ALL_SCENARIOS: [&str; 5] = ["job", "modex", "modex-direct", "fence", "publish"];

fn oracle_client() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        cargo_build(&["-p", "pmix-tests", "--bin", "pmix-oracle-client"]);
        profile_dir().join("pmix-oracle-client")
    })
}

/// `pmixrun <args>` with stdout and stderr piped. Open MPI's shared-memory and self transports
/// only: its TCP one would listen on every interface.
fn pmixrun(args: &[&std::ffi::OsStr]) -> Command {
    let mut cmd = Command::new(pmixrun_bin());
    cmd.args(args)
        .env("OMPI_MCA_btl", "self,vader")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

/// `pmixrun -n <n> <program> <args>`.
fn under_pmixrun(n: u32, program: &Path, args: &[&str]) -> Command {
    let n = n.to_string();
    let mut all = vec![os("-n"), os(&n), program.as_os_str()];
    all.extend(args.iter().map(|a| os(a)));
    pmixrun(&all)
}

fn run(cmd: Command, what: &str) -> Output {
    Running::start(cmd, what).finish(Instant::now() + DEADLINE, what)
}

#[test]
fn libpmix_client_under_pmixrun() {
    let client = openpmix_program("pmix_client");
    for n in [2, 4] {
        let what = format!("pmixrun -n {n} pmix_client {}", ALL_SCENARIOS.join(" "));
        let out = run(under_pmixrun(n, &client, &ALL_SCENARIOS), &what);
        check_client_output(&out, &what, n, &ALL_SCENARIOS);
    }
    // On the hash store, whose first get after a collecting fence brings every other rank's
    // data (shared parts, never the client's own), with libpmix 4.2.2 and 5.0.11.
    for lib in ["debian", "wheel"] {
        let what = format!(
            "PMIX_MCA_gds=hash pmixrun -n 4 pmix_client ({lib} libpmix) {}",
            ALL_SCENARIOS.join(" ")
        );
        let mut cmd = under_pmixrun(4, &client, &ALL_SCENARIOS);
        cmd.env("PMIX_MCA_gds", "hash");
        if lib == "wheel" {
            pmix_tests::use_ompi5_libpmix(&mut cmd);
        }
        let out = run(cmd, &what);
        check_client_output(&out, &what, 4, &ALL_SCENARIOS);
    }
}

/// `pmixrun [--launcher local --host a:1,b:3] -n 4 pmix_client <scenario>` with Debian's
/// libpmix (`lib` "debian") or Open MPI 5's ("wheel"), the store `gds` if given, to a
/// successful end: its output and how it was run.
fn pmix_client_run(lib: &str, gds: Option<&str>, nodes: bool, scenario: &str) -> (String, Output) {
    let client = openpmix_program("pmix_client");
    let what = format!(
        "{}pmixrun{} -n 4 pmix_client {scenario} ({lib} libpmix)",
        gds.map(|g| format!("PMIX_MCA_gds={g} "))
            .unwrap_or_default(),
        if nodes {
            " --launcher local --host a:1,b:3"
        } else {
            ""
        }
    );
    let mut args: Vec<&std::ffi::OsStr> = Vec::new();
    if nodes {
        args.extend([os("--launcher"), os("local"), os("--host"), os("a:1,b:3")]);
    }
    args.extend([os("-n"), os("4"), client.as_os_str(), os(scenario)]);
    let mut cmd = pmixrun(&args);
    if let Some(g) = gds {
        cmd.env("PMIX_MCA_gds", g);
    }
    if lib == "wheel" {
        pmix_tests::use_ompi5_libpmix(&mut cmd);
    }
    let out = run(cmd, &what);
    assert_ok(&out, &what);
    (what, out)
}

/// Keys built from the namespace (`"<nspace>-<rank>-local"`, as OpenPMIx's examples and real
/// codes make them) are stored and read back, for libpmix 4.2.2 and 5.0.11 on either store,
/// on one node and on two logical ones: no namespace pmixrun makes begins with `pmix`, the
/// prefix the standard reserves for attributes (issue 35: with `pmixrun-<pid>` libpmix 4.2
/// found no peer's key, and our server refused 5.0.11's commits).
#[test]
fn keys_named_after_the_namespace_are_ordinary_keys() {
    for (lib, gds, nodes) in [
        ("debian", "ds21", false),
        ("debian", "hash", true),
        ("wheel", "hash", false),
        ("wheel", "ds21", true),
    ] {
        let (what, out) = pmix_client_run(lib, Some(gds), nodes, "nskeys");
        assert_lines(
            &out,
            &what,
            "nskeys",
            (0..4).map(|r| format!("nskeys rank={r} peers=4")).collect(),
        );
    }
}

/// `PMIX_LOCAL_PROCS` at the wildcard rank: this job's processes on the reader's node, as many
/// as `LOCAL_SIZE`, each in `LOCAL_PEERS` (issue 35: PRRTE answers it, pmixrun did not), for
/// libpmix 4.2.2 and 5.0.11, on one node and on two logical ones (1 and 3 ranks).
#[test]
fn local_procs_name_this_nodes_processes() {
    for (lib, nodes) in [
        ("debian", false),
        ("wheel", false),
        ("debian", true),
        ("wheel", true),
    ] {
        let (what, out) = pmix_client_run(lib, None, nodes, "local-procs");
        let per_node = |r: u32| {
            if !nodes {
                4
            } else if r == 0 {
                1
            } else {
                3
            }
        };
        assert_lines(
            &out,
            &what,
            "lprocs",
            (0..4)
                .map(|r| format!("lprocs rank={r} n={}", per_node(r)))
                .collect(),
        );
    }
}

/// A second publish of a key on the same range is refused with the standard's
/// `PMIX_ERR_DUPLICATE_KEY` (-53), and the first value stays, for libpmix 4.2 and 5.0.11
/// clients, whether pmixrun's server keeps the names or a name server does. (PRRTE accepts
/// the second publish; docs/OPENPMIX.md.)
#[test]
fn libpmix_duplicate_publish_is_refused_with_the_standard_status() {
    let client = openpmix_program("pmix_client");
    let ns = pmix_tests::NameServerProcess::start(pmixrun_bin(), DEADLINE);
    let uri = ns.file_spec();
    for ompi5 in [false, true] {
        for nameserver in [false, true] {
            let mut args: Vec<&std::ffi::OsStr> = Vec::new();
            if nameserver {
                args.extend([os("--nameserver-uri"), os(&uri)]);
            }
            args.extend([os("-n"), os("2"), client.as_os_str(), os("duplicate")]);
            let mut cmd = pmixrun(&args);
            cmd.env_remove("PMIXRS_NAMESERVER");
            if ompi5 {
                pmix_tests::use_ompi5_libpmix(&mut cmd);
            }
            let what = format!("pmixrun (libpmix 5: {ompi5}, name server: {nameserver}) duplicate");
            let out = run(cmd, &what);
            assert_ok(&out, &what);
            let want = vec![
                "duplicate rank=0 again=-53 value=first".to_owned(),
                "duplicate rank=1 again=0 value=first".to_owned(),
            ];
            assert_lines(&out, &what, "duplicate", want);
        }
    }
    ns.stop();
}

/// libpmix clients pick the `ds21` store pmixrun's server offers: job-level gets, and after a
/// collecting fence every peer's data (twice, the second time with changed and new values), come
/// from the shared-memory segments, so the server sees no `GETNB` at all. Its debug log names
/// each client's storage module and each `GETNB` it receives.
#[test]
fn libpmix_peers_read_shared_memory_after_a_collecting_fence() {
    let client = openpmix_program("pmix_client");
    for n in [2, 4] {
        let what = format!("pmixrun -n {n} pmix_client job peers");
        let mut cmd = under_pmixrun(n, &client, &["job", "peers"]);
        cmd.env("RUST_LOG", "pmix_server::frontend::openpmix=debug");
        let out = run(cmd, &what);
        check_client_output(&out, &what, n, &["job", "peers"]);
        // Every changed value was seen changed: the segments were updated in place (same
        // length) and by invalidation and appending (longer), not cached.
        let want = (0..n)
            .map(|r| format!("peers rank={r} peers={n} rounds=2 fresh={}", 2 * n))
            .collect();
        assert_lines(&out, &what, "peers", want);
        assert_all_chose_ds21(&out, &what, n);
        let getnb: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| l.contains("GETNB request"))
            .collect();
        assert!(
            getnb.is_empty(),
            "{what}: gets went to the server: {getnb:#?}"
        );
    }
}

/// Every one of the `n` clients of a run logged at `pmix_server::frontend::openpmix=debug` chose ds21.
fn assert_all_chose_ds21(out: &Output, what: &str, n: u32) {
    let ds21 = out
        .stderr
        .lines()
        .filter(|l| l.contains("chose its storage module") && l.contains("gds=Ds21"))
        .count();
    assert_eq!(
        ds21, n as usize,
        "{what}: not every client chose ds21: {out:#?}"
    );
}

/// A rank of the job attacking the ds21 segments harms only itself (issue 18, items 1 and 6):
/// scribbling over the robust-list words of every mutex while the server writes the segments
/// must not crash the server, keeping its read lock must not stall the server (the honest
/// ranks fail any round slower than 1 s; `pmix_ds21_hostile.c` says how), and trying to
/// truncate (or grow) every segment while the others fence and read must not kill the server
/// with SIGBUS: the kernel refuses every one of those calls.
#[test]
fn a_rank_attacking_the_ds21_lock_segment_harms_only_itself() {
    let program = openpmix_program("pmix_ds21_hostile");
    let n = 3;
    for (mode, rounds) in [("truncate", 100), ("scribble", 300), ("hold", 5)] {
        let rounds = rounds.to_string();
        let what = format!("pmixrun -n {n} pmix_ds21_hostile {mode} {rounds}");
        let mut cmd = under_pmixrun(n, &program, &[mode, &rounds]);
        cmd.env("RUST_LOG", "pmix_server::frontend::openpmix=debug");
        let out = run(cmd, &what);
        assert_ok(&out, &what);
        assert_all_chose_ds21(&out, &what, n);
        assert_lines(
            &out,
            &what,
            "OK",
            (0..n).map(|r| format!("OK rank={r} size={n}")).collect(),
        );
        let honest = keyed_lines(&out.stdout, "honest");
        assert_eq!(honest.len(), n as usize - 1, "{what}: {out:#?}");
        assert!(
            honest.iter().all(|h| h.get("rounds") == Some(&rounds)),
            "{what}: {out:#?}"
        );
        if mode == "truncate" {
            let tried = keyed_lines(&out.stdout, "attack");
            let [t] = tried.as_slice() else {
                panic!("{what}: no single attack line: {out:#?}");
            };
            let refused: u64 = t.get("refused").and_then(|v| v.parse().ok()).unwrap_or(0);
            assert_eq!(
                t.get("truncated").map(String::as_str),
                Some("0"),
                "{what}: a segment's size changed: {out:#?}"
            );
            assert!(refused > 0, "{what}: nothing was tried: {out:#?}");
        }
    }
}

#[test]
fn libpmix_abort_ends_the_job_with_its_code() {
    let client = openpmix_program("pmix_client");
    let what = "pmixrun -n 3 pmix_client job abort 7";
    let out = run(under_pmixrun(3, &client, &["job", "abort", "7"]), what);
    pmix_tests::check_abort_of_rank_1(&out, what, 7);
}

#[test]
fn python_client_under_pmixrun() {
    let (python, script) = openpmix_python_client();
    let what = format!("pmixrun -n 3 pmix_client.py {}", ALL_SCENARIOS.join(" "));
    let mut args = vec![os("-n"), os("3"), python.as_os_str(), script.as_os_str()];
    args.extend(ALL_SCENARIOS.iter().map(|a| os(a)));
    let out = run(pmixrun(&args), &what);
    check_client_output(&out, &what, 3, &ALL_SCENARIOS);
}

#[test]
fn open_mpi_hello_under_pmixrun() {
    let hello = openmpi_program("mpi_hello_ompi");
    // pmixrun's server works under $TMPDIR. Open MPI removes the plain files at the top of
    // the session directory it is given when it ends: a file of ours there must survive.
    let tmp = profile_dir()
        .join("tmp")
        .join(format!("ompi-tmpdir-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("a temporary directory");
    let canary = tmp.join("canary");
    std::fs::write(&canary, "still here").expect("the canary file");
    for n in [2u32, 4, 8] {
        let what = format!("pmixrun -n {n} mpi_hello_ompi");
        let mut cmd = under_pmixrun(n, &hello, &[&n.to_string()]);
        cmd.env("TMPDIR", &tmp);
        let out = run(cmd, &what);
        assert_ok(&out, &what);
        let sum: u32 = (0..n).sum();
        let want = (0..n)
            .map(|r| format!("OK rank={r} size={n} sum={sum}"))
            .collect();
        assert_lines(&out, &what, "OK", want);
        assert!(
            canary.is_file(),
            "{what}: a file in the server's TMPDIR was removed"
        );
    }
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .expect("reading the temporary directory")
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != "canary")
        .collect();
    assert!(left.is_empty(), "left behind in TMPDIR: {left:?}");
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn open_mpi_hello_with_its_processes_bound_to_cores() {
    // Open MPI 4.1 under pmixrun, pinned and with the OMPI_COMM_WORLD_* variables set (its
    // launcher component knows their names; they must not make it start otherwise).
    let hello = openmpi_program("mpi_hello_ompi");
    let what = "pmixrun --bind-to core -n 2 mpi_hello_ompi";
    let mut all = vec![
        os("--bind-to"),
        os("core"),
        os("-n"),
        os("2"),
        hello.as_os_str(),
    ];
    all.push(os("2"));
    let out = run(pmixrun(&all), what);
    assert_ok(&out, what);
    let want = (0..2u32)
        .map(|r| format!("OK rank={r} size=2 sum=1"))
        .collect();
    assert_lines(&out, what, "OK", want);
}

#[test]
fn libpmix_and_pmix_rs_processes_share_one_job() {
    let c = openpmix_program("pmix_client");
    let rs = oracle_client();
    let scenarios = ["job", "modex", "modex-direct"];
    let what = "pmixrun -n 2 pmix_client job modex modex-direct : -n 2 pmix-oracle-client \
                job modex modex-direct";
    let mut args = vec![os("-n"), os("2"), c.as_os_str()];
    args.extend(scenarios.iter().map(|a| os(a)));
    args.extend([os(":"), os("-n"), os("2"), rs.as_os_str()]);
    args.extend(scenarios.iter().map(|a| os(a)));
    let out = run(pmixrun(&args), what);
    // Modex: every rank read every other's values, whichever library put them.
    check_client_output(&out, what, 4, &["modex", "modex-direct"]);
    let jobs = keyed_lines(&out.stdout, "job");
    assert_eq!(jobs.len(), 4, "{what}: {out:#?}");
    for job in &jobs {
        let f = |k: &str| job.get(k).map(String::as_str).unwrap_or("(none)");
        let rank: u32 = f("rank").parse().expect("rank");
        assert_eq!(f("size"), "4", "{what}: {out:#?}");
        assert_eq!(f("local_rank"), rank.to_string(), "{what}: {out:#?}");
        assert_eq!(
            f("appnum"),
            if rank < 2 { "0" } else { "1" },
            "{what}: {out:#?}"
        );
        assert_eq!(f("nspace"), jobs[0]["nspace"], "{what}: {out:#?}");
    }
}

#[test]
fn a_libpmix_process_spawns_a_job() {
    let spawn = openpmix_program("pmix_spawn");
    let what = "pmixrun -n 1 pmix_spawn 3";
    let out = run(under_pmixrun(1, &spawn, &["3"]), what);
    assert_ok(&out, what);
    let parents = keyed_lines(&out.stdout, "parent");
    assert_eq!(parents.len(), 1, "{what}: {out:#?}");
    let (parent, child) = (&parents[0]["nspace"], &parents[0]["child_nspace"]);
    assert_ne!(parent, child, "{what}: {out:#?}");
    let children = keyed_lines(&out.stdout, "child");
    let mut ranks: Vec<&str> = children.iter().map(|c| c["rank"].as_str()).collect();
    ranks.sort_unstable();
    assert_eq!(ranks, ["0", "1", "2"], "{what}: {out:#?}");
    for c in &children {
        assert_eq!(&c["nspace"], child, "{what}: {out:#?}");
        assert_eq!(&c["parent"], parent, "{what}: {out:#?}");
        assert_eq!(c["size"], "3", "{what}: {out:#?}");
    }
}

#[test]
fn libpmix_processes_connect_to_a_spawned_job_and_read_its_data() {
    let spawn = openpmix_program("pmix_spawn");
    let what = "pmixrun -n 1 pmix_spawn 2 connect";
    let out = run(under_pmixrun(1, &spawn, &["2", "connect"]), what);
    assert_ok(&out, what);
    let parents = keyed_lines(&out.stdout, "parent");
    assert_eq!(parents.len(), 1, "{what}: {out:#?}");
    let (parent, child) = (&parents[0]["nspace"], &parents[0]["child_nspace"]);
    // Every datum read across the connection, as (reader, owner, value, owner's job size):
    // the parent reads both children's, each child the parent's.
    let mut links: Vec<[String; 4]> = keyed_lines(&out.stdout, "link")
        .into_iter()
        .map(|l| {
            [
                format!("{}/{}", l["from"], l["rank"]),
                format!("{}/{}", l["peer"], l["peer_rank"]),
                l["value"].clone(),
                l["peer_size"].clone(),
            ]
        })
        .collect();
    links.sort();
    let link = |reader: String, owner: &str, rank: u32, role: &str, size: &str| {
        [
            reader,
            format!("{owner}/{rank}"),
            format!("{role}-{owner}-{rank}"),
            size.to_owned(),
        ]
    };
    let mut want = vec![
        link(format!("{parent}/0"), child, 0, "child", "2"),
        link(format!("{parent}/0"), child, 1, "child", "2"),
        link(format!("{child}/0"), parent, 0, "parent", "1"),
        link(format!("{child}/1"), parent, 0, "parent", "1"),
    ];
    want.sort();
    assert_eq!(links, want, "{what}: {out:#?}");
}

#[test]
fn a_pmix_rs_rank_cannot_be_claimed_through_the_openpmix_port() {
    // A job of two: rank 0 a pmix-rs client (registered so), rank 1 possibly a libpmix one.
    // Another process of the user, libpmix's client given rank 1's environment, names itself
    // rank 0 before the real rank 0 starts: it must be refused, and rank 0 must then run.
    let h = pmix_tests::TestHost::start(pmix_server::NoHost);
    let ns = h.job("claimed", 2);
    let rank0 = pmix_server::types::Proc::new(ns.clone(), 0);
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    let pmix_rs = pmix_server::ClientOptions {
        openpmix: false,
        ..Default::default()
    };
    h.server
        .register_client_with(&rank0, uid.as_raw(), gid.as_raw(), &pmix_rs)
        .expect("register_client_with");
    let env = h
        .server
        .setup_fork(&pmix_server::types::Proc::new(ns, 1))
        .expect("setup_fork");
    let what = "libpmix's pmix_client claiming rank 0 of a pmix-rs job";
    let mut cmd = Command::new(openpmix_program("pmix_client"));
    cmd.env_clear()
        .envs(env)
        .env("PMIX_RANK", "0")
        .arg("job")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = Running::start(cmd, what).finish(Instant::now() + DEADLINE, what);
    assert!(
        !out.status.success() && out.stderr.contains("FAIL rank=0: PMIx_Init"),
        "{what}: it was not refused at PMIx_Init: {out:#?}"
    );
    let started = h.spawn(&rank0, &["jobinfo"], &[]);
    pmix_tests::assert_all_ok(&pmix_tests::wait_all(vec![started], DEADLINE));
}

#[test]
fn a_libpmix_rank_is_claimed_only_from_the_process_started_for_it() {
    // A job of one whose host reports the process it started for rank 0 (as pmixrun does):
    // a wrapper script, standing for `sh -c`, python3 or a job script, that runs libpmix's
    // pmix_client as its child once told to. Another process of the same user, outside that
    // process's tree, given rank 0's environment, claims the name first over the OpenPMIx
    // port: it must be refused (the uid alone took it before), and the real client must run.
    use std::io::Write as _;
    let h = pmix_tests::TestHost::start(pmix_server::NoHost);
    let ns = pmix_server::types::Nspace::new("lineage").expect("namespace");
    let nodes = pmix_server::generate_regex(&[h.server.hostname()]).expect("node map");
    let ppn = pmix_server::generate_ppn(&[vec![0]]).expect("proc map");
    use pmix_server::types::{Info, Value, attr};
    let info = vec![
        Info::attr(attr::JOB_SIZE, 1u32),
        Info::attr(attr::NODE_MAP, Value::Regex(nodes)),
        Info::attr(attr::PROC_MAP, Value::Regex(ppn)),
    ];
    h.server
        .register_nspace(&ns, 1, &info)
        .expect("register_nspace");
    let rank0 = pmix_server::types::Proc::new(ns, 0);
    let (uid, gid) = (nix::unistd::getuid(), nix::unistd::getgid());
    let reported = pmix_server::ClientOptions {
        openpmix: true,
        reports_pid: true,
    };
    h.server
        .register_client_with(&rank0, uid.as_raw(), gid.as_raw(), &reported)
        .expect("register_client_with");
    let env = h.server.setup_fork(&rank0).expect("setup_fork");
    let client = openpmix_program("pmix_client");
    let mut wrapper = Command::new("sh");
    wrapper
        .args(["-c", "read go && \"$0\" job"])
        .arg(&client)
        .env_clear()
        .envs(env.clone())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let what = "a wrapper running libpmix's pmix_client as its child";
    let mut real = Running::start(wrapper, what);
    h.server
        .client_started(&rank0, real.pid())
        .expect("client_started");

    let stranger = "another process of the user claiming rank 0 with its environment";
    let mut cmd = Command::new(&client);
    cmd.env_clear()
        .envs(env)
        .arg("job")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = Running::start(cmd, stranger).finish(Instant::now() + DEADLINE, stranger);
    assert!(
        !out.status.success() && out.stderr.contains("FAIL rank=0: PMIx_Init"),
        "{stranger}: it was not refused at PMIx_Init: {out:#?}"
    );

    real.stdin()
        .write_all(b"go\n")
        .expect("telling the wrapper to go");
    let out = real.finish(Instant::now() + DEADLINE, what);
    assert_ok(&out, what);
    assert!(out.stdout.contains("job rank=0"), "{what}: {out:#?}");
}

/// Runs `pmixrun [--launcher local --host a:1,b:2] <args>` with Debian's libpmix (`lib`
/// "debian") or Open MPI 5's ("wheel", through `LD_LIBRARY_PATH`), to a successful end.
fn pmixrun_with_libpmix(lib: &str, nodes: bool, args: &[&std::ffi::OsStr], what: &str) -> Output {
    let mut all: Vec<&std::ffi::OsStr> = Vec::new();
    if nodes {
        all.extend([os("--launcher"), os("local"), os("--host"), os("a:1,b:2")]);
    }
    all.extend_from_slice(args);
    let mut cmd = pmixrun(&all);
    if lib == "wheel" {
        pmix_tests::use_ompi5_libpmix(&mut cmd);
    }
    let out = Running::start(cmd, what).finish(Instant::now() + DEADLINE, what);
    assert_ok(&out, what);
    out
}

/// `PMIx_Group_construct` and `_destruct` from libpmix against pmixrun, one node and two
/// logical ones, with Debian's libpmix 4.2.2 (no membership in the results: it reads the
/// context id right after the status) and with Open MPI 5's OpenPMIx 5.0.11
/// (`LD_LIBRARY_PATH`, when installed: the program uses only calls both have).
#[test]
fn libpmix_groups_get_context_ids_from_pmixrun() {
    let program = openpmix_program("pmix_group");
    for (lib, members) in [("debian", 0), ("wheel", 3)] {
        for nodes in [false, true] {
            let what = format!("pmix_group with the {lib} libpmix, nodes {nodes}");
            let args = [os("-n"), os("3"), program.as_os_str()];
            let out = pmixrun_with_libpmix(lib, nodes, &args, &what);
            // Every rank got the same id for "all"; pair 0 (ranks 0, 1) another, rank 2's
            // pair a third.
            let mut lines: Vec<&str> = out.stdout.lines().collect();
            lines.sort_unstable();
            let ids: Vec<(u64, u64, u32)> = lines
                .iter()
                .map(|l| {
                    let f: Vec<&str> = l.split(' ').collect();
                    let num = |i: usize, k: &str| {
                        f.get(i)
                            .and_then(|x| x.strip_prefix(k))
                            .and_then(|x| x.parse::<u64>().ok())
                            .unwrap_or_else(|| panic!("{what}: line {l:?}"))
                    };
                    (num(2, "all="), num(3, "pair="), num(4, "members=") as u32)
                })
                .collect();
            assert_eq!(ids.len(), 3, "{what}: {out:#?}");
            let all = ids[0].0;
            assert!(
                ids.iter().all(|i| i.0 == all && i.2 == members),
                "{what}: {ids:?}"
            );
            assert_eq!(ids[0].1, ids[1].1, "{what}: {ids:?}");
            let distinct = [all, ids[0].1, ids[2].1];
            assert!(
                distinct[0] != distinct[1]
                    && distinct[1] != distinct[2]
                    && distinct[0] != distinct[2],
                "{what}: {ids:?}"
            );
        }
    }
}

/// A fence over a group's id from libpmix (`pmix_group fence`): the even ranks construct
/// `ourgroup` and fence over `{ourgroup, WILDCARD}` collecting data, then read each other's
/// keys; the odd rank's fence over it fails. Both libraries, one node and two logical ones
/// (ranks 0 and 2 apart).
#[test]
fn libpmix_fences_over_a_group_id() {
    let program = openpmix_program("pmix_group");
    for lib in ["debian", "wheel"] {
        for nodes in [false, true] {
            let what = format!("pmix_group fence with the {lib} libpmix, nodes {nodes}");
            let args = [os("-n"), os("3"), program.as_os_str(), os("fence")];
            let out = pmixrun_with_libpmix(lib, nodes, &args, &what);
            let mut lines: Vec<&str> = out.stdout.lines().collect();
            lines.sort_unstable();
            let want = [
                "gfence rank=0 members=0,2",
                "gfence rank=1 members=none",
                "gfence rank=2 members=0,2",
            ];
            assert_eq!(lines, want, "{what}: {out:#?}");
        }
    }
}

/// pmixrun's `--pset` sets as libpmix reads them: every rank's `PMIX_PSET_NAME` (what Open MPI
/// 5 makes a set's group from) and the names `PMIX_QUERY_PSET_NAMES` lists, with both
/// libraries, the second set's ranks in a later application, on one node and two.
#[test]
fn libpmix_reads_every_ranks_process_set_and_queries_the_names() {
    let program = openpmix_program("pmix_group");
    let p = program.as_os_str();
    for lib in ["debian", "wheel"] {
        for nodes in [false, true] {
            let what = format!("pmix_group pset with the {lib} libpmix, nodes {nodes}");
            let args = [
                os("-n"),
                os("2"),
                os("--pset"),
                os("app://a"),
                p,
                os("pset"),
                os(":"),
                os("-n"),
                os("1"),
                os("--pset"),
                os("app://b"),
                p,
                os("pset"),
            ];
            let out = pmixrun_with_libpmix(lib, nodes, &args, &what);
            let mut lines: Vec<&str> = out.stdout.lines().collect();
            lines.sort_unstable();
            let want: Vec<String> = (0..3)
                .map(|r| {
                    format!("pset rank={r} names=app://a,app://a,app://b query=app://a,app://b")
                })
                .collect();
            assert_eq!(lines, want, "{what}: {out:#?}");
        }
    }
}

/// Groups by invitation from libpmix against pmixrun (`pmix_invite.c`), with both libraries,
/// on one node and two logical ones: invitations accepted (the blocking `PMIx_Group_invite`
/// completes, the members hear the completion) and a member leaving (`GROUP_LEAVE`, the others
/// hear `PMIX_GROUP_LEFT`); a decline reaching the leader; an invitee that ends without
/// answering failing the invitation (`PMIX_GROUP_INVITE_FAILED`, which libpmix raises from
/// the server's `PMIX_PROC_TERMINATED`) within the program's 30 s; leaving an unknown group.
#[test]
fn libpmix_invites_joins_declines_and_leaves_groups_under_pmixrun() {
    let program = openpmix_program("pmix_invite");
    let p = program.as_os_str();
    let cases: [(&str, u32, Vec<&str>); 4] = [
        (
            "accept",
            3,
            vec![
                "heard rank=0 left=1",
                "heard rank=2 left=1",
                "invited rank=0",
                "joined rank=1 leader=0 members=3",
                "joined rank=2 leader=0 members=3",
                "left rank=1",
            ],
        ),
        (
            "decline",
            2,
            vec!["declined rank=0 by=1", "declining rank=1"],
        ),
        ("ends", 2, vec!["ending rank=1", "failed rank=0 affected=1"]),
        ("leave-unknown", 2, vec![]),
    ];
    for lib in ["debian", "wheel"] {
        for nodes in [false, true] {
            for (scenario, n, want) in &cases {
                let what = format!("pmix_invite {scenario} with the {lib} libpmix, nodes {nodes}");
                let n = n.to_string();
                let args = [os("-n"), os(&n), p, os(scenario)];
                let out = pmixrun_with_libpmix(lib, nodes, &args, &what);
                let mut lines: Vec<&str> = out.stdout.lines().collect();
                lines.sort_unstable();
                if *scenario == "leave-unknown" {
                    assert_eq!(lines.len(), 2, "{what}: {out:#?}");
                    assert!(
                        lines
                            .iter()
                            .all(|l| l.contains("NOT-FOUND") || l.contains("PMIX_ERR_NOT_FOUND")),
                        "{what}: {lines:?}"
                    );
                } else {
                    assert_eq!(lines, *want, "{what}: {out:#?}");
                }
            }
        }
    }
}

/// Open MPI 5's way of sharing local CIDs: each member's `PMIX_GROUP_LOCAL_CID` in
/// `PMIX_GROUP_INFO` at construction, read back by every member with `PMIx_Get` qualified by
/// the group's `PMIX_GROUP_CONTEXT_ID` (after the destruct, as OpenPMIx's example does), from
/// libpmix 4.2.2 and 5.0.11, on one node and two logical ones; another context id finds
/// nothing.
#[test]
fn libpmix_reads_members_local_cids_under_the_groups_context_id() {
    let program = openpmix_program("pmix_group");
    for lib in ["debian", "wheel"] {
        for nodes in [false, true] {
            let what = format!("pmix_group lcid with the {lib} libpmix, nodes {nodes}");
            let args = [os("-n"), os("3"), program.as_os_str(), os("lcid")];
            let out = pmixrun_with_libpmix(lib, nodes, &args, &what);
            let mut lines: Vec<&str> = out.stdout.lines().collect();
            lines.sort_unstable();
            let not_found = if lib == "debian" {
                "NOT-FOUND"
            } else {
                "PMIX_ERR_NOT_FOUND"
            };
            let want: Vec<String> = (0..3)
                .map(|r| format!("lcid rank={r} cids=1000,1010,1020 other={not_found}"))
                .collect();
            assert_eq!(lines, want, "{what}: {out:#?}");
        }
    }
}
