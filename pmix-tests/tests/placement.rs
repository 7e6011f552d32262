//! Placement on a node under pmixrun (`docs/PLACEMENT.md`), with real processes: the launcher
//! variables as a shell script and a Python script (environment only) see them, on one node
//! and on two logical nodes; the binding as each process's own `Cpus_allowed_list` shows it,
//! checked against the kernel's own sibling lists (not the files pmixrun reads); and
//! `PMIX_CPUSET`, `PMIX_LOCALITY_STRING` and `PMIX_PACKAGE_RANK` as libpmix 4.2 and 5.0.11
//! clients and pmix-rs's client read and compare them. Written for any machine of 2 CPUs or
//! more.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use pmix_tests::pmixrun_bin;
use pmix_tests::{
    Output, Running, SYSTEM_PYTHON, assert_ok, cargo_build, compile_c, compiled_programs_dir,
    keyed_lines, openpmix_sources, profile_dir, use_ompi5_libpmix,
};

/// For one run; they take a second or two.
const DEADLINE: Duration = Duration::from_secs(60);

/// The variables pmixrun sets, as the scripts print them.
const VARS: [&str; 22] = [
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "GROUP_WORLD_SIZE",
    "ROLE_NAME",
    "ROLE_RANK",
    "ROLE_WORLD_SIZE",
    "TORCHELASTIC_RUN_ID",
    "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS",
    "MASTER_ADDR",
    "MASTER_PORT",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_LOCAL_SIZE",
    "OMPI_COMM_WORLD_NODE_RANK",
    "OMPI_UNIVERSE_SIZE",
    "OMPI_WORLD_SIZE",
    "OMPI_WORLD_LOCAL_SIZE",
];

fn script(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("placement")
        .join(name)
        .display()
        .to_string()
}

/// `program <args>` with none of the launcher variables (nor PMIx ones) inherited from whatever
/// runs the tests, its output piped.
fn clean(program: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if VARS.contains(&&*k) || k.starts_with("PMIX") {
            cmd.env_remove(&*k);
        }
    }
    cmd
}

/// `pmixrun <args>` to its end (see [`clean`]).
fn pmixrun(args: &[&str]) -> (String, Output) {
    let what = format!("pmixrun {}", args.join(" "));
    let cmd = clean(pmixrun_bin(), args);
    let out = Running::start(cmd, &what).finish(Instant::now() + DEADLINE, &what);
    (what, out)
}

fn hostname() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .expect("hostname")
}

/// The `place` lines of a run (`placement/place.sh`, `place.py`), by rank.
fn places(what: &str, out: &Output, n: u32) -> BTreeMap<u32, BTreeMap<String, String>> {
    assert_ok(out, what);
    let lines = keyed_lines(&out.stdout, "place");
    let by_rank: BTreeMap<u32, BTreeMap<String, String>> = lines
        .into_iter()
        .map(|l| (l["rank"].parse().expect("a rank"), l))
        .collect();
    assert_eq!(
        by_rank.keys().copied().collect::<Vec<_>>(),
        (0..n).collect::<Vec<_>>(),
        "{what}: {out:#?}"
    );
    by_rank
}

/// Checks the launcher variables of a run of `n` ranks in which rank `r` is local rank
/// `local(r)` of `local_size` on the job's node number `group(r)`.
fn check_vars(
    what: &str,
    out: &Output,
    n: u32,
    local_size: u32,
    local: impl Fn(u32) -> u32,
    group: impl Fn(u32) -> u32,
) -> u16 {
    let by_rank = places(what, out, n);
    let ports: Vec<&str> = by_rank
        .values()
        .map(|l| l["MASTER_PORT"].as_str())
        .collect();
    let port: u16 = ports[0]
        .parse()
        .unwrap_or_else(|_| panic!("{what}: {ports:?}"));
    assert!(
        ports.iter().all(|p| *p == ports[0]),
        "{what}: ports {ports:?}"
    );
    let host = hostname();
    let groups = {
        let mut g: Vec<u32> = (0..n).map(&group).collect();
        g.sort_unstable();
        g.dedup();
        g.len()
    };
    let run_id = &by_rank[&0]["TORCHELASTIC_RUN_ID"];
    assert!(run_id.starts_with("rs-pmixrun-"), "{what}: {out:#?}");
    for (&r, l) in &by_rank {
        let want = [
            ("RANK", r.to_string()),
            ("LOCAL_RANK", local(r).to_string()),
            ("WORLD_SIZE", n.to_string()),
            ("LOCAL_WORLD_SIZE", local_size.to_string()),
            ("GROUP_RANK", group(r).to_string()),
            ("GROUP_WORLD_SIZE", groups.to_string()),
            ("ROLE_NAME", "default".to_owned()),
            ("ROLE_RANK", r.to_string()),
            ("ROLE_WORLD_SIZE", n.to_string()),
            ("TORCHELASTIC_RUN_ID", run_id.clone()),
            ("TORCHELASTIC_RESTART_COUNT", "0".to_owned()),
            ("TORCHELASTIC_MAX_RESTARTS", "0".to_owned()),
            ("MASTER_ADDR", host.clone()),
            ("OMPI_COMM_WORLD_RANK", r.to_string()),
            ("OMPI_COMM_WORLD_SIZE", n.to_string()),
            ("OMPI_COMM_WORLD_LOCAL_RANK", local(r).to_string()),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", local_size.to_string()),
            ("OMPI_COMM_WORLD_NODE_RANK", local(r).to_string()),
            ("OMPI_UNIVERSE_SIZE", n.to_string()),
            ("OMPI_WORLD_SIZE", n.to_string()),
            ("OMPI_WORLD_LOCAL_SIZE", local_size.to_string()),
        ];
        for (k, v) in want {
            assert_eq!(l[k], v, "{what}: {k} of rank {r}: {out:#?}");
        }
    }
    port
}

#[test]
fn a_shell_script_and_a_python_script_read_their_place_on_one_node() {
    for program in [
        vec!["sh", &script("place.sh")],
        vec![SYSTEM_PYTHON, &script("place.py")],
    ] {
        let mut args = vec!["-n", "3"];
        args.extend(program.iter().map(|s| &**s));
        let (what, out) = pmixrun(&args);
        let port = check_vars(&what, &out, 3, 3, |r| r, |_| 0);
        assert!((20000..30000).contains(&port), "{what}: port {port}");
    }
}

/// The default `MASTER_PORT` of a job named `nspace`, as `docs/PLACEMENT.md` states it:
/// 20000 plus the 32-bit FNV-1a hash of the name modulo 10000.
fn hashed_port(nspace: &str) -> u16 {
    let h = nspace.bytes().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    20000 + u16::try_from(h % 10000).unwrap_or(0)
}

#[test]
fn a_master_port_taken_on_this_machine_gives_way_to_a_free_one() {
    // Another program (or another job) holds the port this job would get: its ranks are
    // told the next free one, not one their rank 0 cannot bind. The job's name comes from
    // pmixrun's pid, known here before pmixrun runs: a shell waits to be told, then becomes
    // pmixrun (exec keeps the pid).
    let sh = script("place.sh");
    let pmixrun = pmixrun_bin().display().to_string();
    let args = [
        "-c",
        "read go && exec \"$@\"",
        "sh",
        &pmixrun,
        "-n",
        "2",
        "sh",
        &sh,
    ];
    let mut cmd = clean(Path::new("sh"), &args);
    cmd.stdin(Stdio::piped());
    let what = "pmixrun -n 2 sh place.sh, its MASTER_PORT taken";
    let mut running = Running::start(cmd, what);
    let taken = hashed_port(&format!("rs-pmixrun-{}", running.pid()));
    // Held until the job ended (or someone else holds it already: the same for pmixrun).
    let holder = std::net::TcpListener::bind(("0.0.0.0", taken)).ok();
    {
        use std::io::Write as _;
        running
            .stdin()
            .write_all(b"go\n")
            .expect("telling the shell to go");
    }
    let out = running.finish(Instant::now() + DEADLINE, what);
    let port = check_vars(what, &out, 2, 2, |r| r, |_| 0);
    drop(holder);
    assert_ne!(port, taken, "{what}: {out:#?}");
    assert!((20000..30000).contains(&port), "{what}: port {port}");
}

#[test]
fn the_variables_are_right_on_two_logical_nodes_mapped_either_way() {
    let sh = script("place.sh");
    let py = script("place.py");
    let hosts = ["--launcher", "local", "--host", "n[1-2]:2", "-n", "4"];
    // By slot: ranks 0-1 on n1, 2-3 on n2; by node: 0 and 2 on n1, 1 and 3 on n2.
    for (map_by, program) in [("slot", ["sh", &sh]), ("node", [SYSTEM_PYTHON, &py])] {
        let mut args = hosts.to_vec();
        args.extend(["--map-by", map_by]);
        args.extend(program);
        let (what, out) = pmixrun(&args);
        if map_by == "slot" {
            check_vars(&what, &out, 4, 2, |r| r % 2, |r| r / 2);
        } else {
            check_vars(&what, &out, 4, 2, |r| r / 2, |r| r % 2);
        }
    }
}

#[test]
fn x_wins_over_a_launcher_variable_and_master_port_sets_the_port() {
    let sh = script("place.sh");
    for hosts in [&[][..], &["--launcher", "local", "--host", "n[1-2]:1"]] {
        let mut args = hosts.to_vec();
        args.extend([
            "--master-port",
            "23456",
            "-x",
            "RANK=77",
            "-n",
            "2",
            "sh",
            &sh,
        ]);
        let (what, out) = pmixrun(&args);
        for (r, l) in places(&what, &out, 2) {
            assert_eq!(l["RANK"], "77", "{what}: {out:#?}");
            assert_eq!(l["OMPI_COMM_WORLD_RANK"], r.to_string(), "{what}: {out:#?}");
            assert_eq!(l["MASTER_PORT"], "23456", "{what}: {out:#?}");
        }
    }
}

#[test]
fn no_launcher_env_sets_none_of_them() {
    let (sh, py) = (script("place.sh"), script("place.py"));
    for program in [["sh", &sh], [SYSTEM_PYTHON, &py]] {
        for hosts in [&[][..], &["--launcher", "local", "--host", "n[1-2]:1"]] {
            let mut args = hosts.to_vec();
            args.extend(["--no-launcher-env", "-n", "2"]);
            args.extend(program);
            let (what, out) = pmixrun(&args);
            for (r, l) in places(&what, &out, 2) {
                for k in VARS {
                    assert_eq!(l[k], "unset", "{what}: {k} of rank {r}: {out:#?}");
                }
            }
        }
    }
}

// ---- Binding ------------------------------------------------------------------------------

/// A CPU list (`0-3,8`) as a set; parsed here, not with pmix-rs's parser.
fn cpus(list: &str) -> Vec<u32> {
    let mut v = Vec::new();
    for item in list.trim().split(',').filter(|s| !s.is_empty()) {
        let (a, b) = item.split_once('-').unwrap_or((item, item));
        let (a, b): (u32, u32) = (a.parse().expect("cpu"), b.parse().expect("cpu"));
        v.extend(a..=b);
    }
    v.sort_unstable();
    v
}

/// This test process's own CPUs (pmixrun, started by it, may use the same).
fn my_cpus() -> Vec<u32> {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let list = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list");
    cpus(list)
}

/// The CPUs of `cpu`'s core (`thread_siblings_list`) or package (`core_siblings_list`) that
/// this process may use.
fn siblings(cpu: u32, file: &str, allowed: &[u32]) -> Vec<u32> {
    let path = format!("/sys/devices/system/cpu/cpu{cpu}/topology/{file}");
    let list = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    cpus(&list)
        .into_iter()
        .filter(|c| allowed.contains(c))
        .collect()
}

/// Runs `place.sh` on `n` ranks with `placement` (such as `--bind-to core`) and
/// `--report-bindings` (and `extra` first), checks what `--report-bindings` said (`pinned` or
/// not) against what each process sees, and returns each rank's CPUs and the report's host of
/// each.
fn bound_cpus(
    placement: &[&str],
    pinned: bool,
    n: u32,
    extra: &[&str],
) -> (String, Vec<Vec<u32>>, Vec<String>) {
    let ns = n.to_string();
    let sh = script("place.sh");
    let mut args = extra.to_vec();
    args.extend(placement);
    args.extend(["--report-bindings", "-n", &ns, "sh", &sh]);
    let (what, out) = pmixrun(&args);
    let by_rank = places(&what, &out, n);
    let seen: Vec<Vec<u32>> = by_rank.values().map(|l| cpus(&l["cpus"])).collect();
    let mut hosts = Vec::new();
    for r in 0..n {
        let line = out
            .stderr
            .lines()
            .find(|l| {
                l.starts_with("pmixrun: [")
                    && l.split(']').next().and_then(|h| h.rsplit(':').next())
                        == Some(&r.to_string())
            })
            .unwrap_or_else(|| panic!("{what}: no report for rank {r}: {out:#?}"));
        let host = line["pmixrun: [".len()..]
            .split(':')
            .next()
            .unwrap_or_default();
        hosts.push(host.to_owned());
        let reported = line
            .split("CPUs ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .unwrap_or_else(|| panic!("{what}: {line}"));
        assert_eq!(cpus(reported), seen[r as usize], "{what}: {line}: {out:#?}");
        assert_eq!(
            line.contains("bound to "),
            pinned,
            "{what}: {line}: {out:#?}"
        );
    }
    (what, seen, hosts)
}

#[test]
fn bind_to_none_leaves_every_process_every_cpu() {
    let mine = my_cpus();
    let (what, seen, _) = bound_cpus(&["--bind-to", "none"], false, 2, &[]);
    assert!(
        seen.iter().all(|s| *s == mine),
        "{what}: {seen:?}, mine {mine:?}"
    );
}

#[test]
fn bind_to_core_pins_each_process_to_a_core_of_its_own() {
    let mine = my_cpus();
    let cores: std::collections::BTreeSet<Vec<u32>> = mine
        .iter()
        .map(|&c| siblings(c, "thread_siblings_list", &mine))
        .collect();
    let check = |what: &str, seen: &[Vec<u32>]| {
        for s in seen {
            assert!(!s.is_empty(), "{what}: {seen:?}");
            assert_eq!(
                *s,
                siblings(s[0], "thread_siblings_list", &mine),
                "{what}: {seen:?}"
            );
        }
        if cores.len() >= 2 {
            assert_ne!(seen[0], seen[1], "{what}: two cores, one shared: {seen:?}");
        }
    };
    for placement in [&["--bind-to", "core"][..], &["--map-by", "core"]] {
        let (what, seen, _) = bound_cpus(placement, true, 2, &[]);
        check(&what, &seen);
    }
    // Two logical nodes of two processes each: each node deals its cores out on its own.
    let (what, seen, hosts) = bound_cpus(
        &["--bind-to", "core"],
        true,
        4,
        &["--launcher", "local", "--host", "n[1-2]:2"],
    );
    assert_eq!(hosts, ["n1", "n1", "n2", "n2"], "{what}");
    check(&what, &seen[..2]);
    check(&what, &seen[2..]);
    assert_eq!(
        seen[0], seen[2],
        "{what}: each node starts from its first core: {seen:?}"
    );
}

#[test]
fn bind_to_package_pins_each_process_to_a_package() {
    let mine = my_cpus();
    let (what, seen, _) = bound_cpus(&["--bind-to", "socket"], true, 2, &[]);
    for s in &seen {
        assert!(!s.is_empty(), "{what}: {seen:?}");
        assert_eq!(
            *s,
            siblings(s[0], "core_siblings_list", &mine),
            "{what}: {seen:?}"
        );
    }
}

// ---- What clients read --------------------------------------------------------------------

/// `openpmix/<name>.c` compiled against Debian's libpmix and hwloc (which libpmix-dev
/// brings).
fn compile_libpmix_program(name: &str) -> PathBuf {
    let ask = |what: &str| -> Vec<String> {
        let out = Command::new("pkg-config")
            .args([what, "pmix"])
            .output()
            .expect("pkg-config (libpmix-dev)");
        assert!(out.status.success(), "pkg-config {what} pmix: {out:?}");
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    let mut cflags: Vec<String> = ["-O1", "-Wall", "-Wextra", "-Werror"]
        .map(String::from)
        .to_vec();
    cflags.extend(ask("--cflags"));
    let mut libs = ask("--libs");
    libs.push("-lhwloc".into());
    compile_c(
        Path::new("gcc"),
        &cflags,
        &openpmix_sources().join(format!("{name}.c")),
        &libs,
        &compiled_programs_dir("openpmix"),
        name,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// `openpmix/pmix_locality.c`, once.
fn locality_program() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| compile_libpmix_program("pmix_locality"))
}

fn native_locality_client() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        cargo_build(&["-p", "pmix-tests", "--bin", "pmix-locality-client"]);
        profile_dir().join("pmix-locality-client")
    })
}

const SHARE_NODE: u32 = 0x4000;
const SHARE_HWTHREAD: u32 = 0x1;

/// Checks the `loc` lines of a 2-rank run: each process's `PMIX_CPUSET` is the set it may run
/// on, the locality string it reads of its peer is the one the peer reads of itself, and the
/// relative locality says they share a hardware thread exactly when their CPU sets meet.
fn check_loc_lines(what: &str, out: &Output) -> Vec<BTreeMap<String, String>> {
    assert_ok(out, what);
    let mut lines = keyed_lines(&out.stdout, "loc");
    lines.sort_by_key(|l| l["rank"].clone());
    assert_eq!(lines.len(), 2, "{what}: {out:#?}");
    for (i, l) in lines.iter().enumerate() {
        let other = &lines[1 - i];
        assert_eq!(cpus(&l["cpuset"]), cpus(&l["allowed"]), "{what}: {l:?}");
        if let Some(parsed) = l.get("parsed") {
            assert_eq!(
                cpus(parsed),
                cpus(&l["allowed"]),
                "{what}: libpmix parsed {l:?}"
            );
        }
        assert_eq!(l["peerloc"], other["locality"], "{what}: {lines:?}");
        let rel = u32::from_str_radix(l["rel"].trim_start_matches("0x"), 16).expect("rel");
        let meet = cpus(&l["allowed"])
            .iter()
            .any(|c| cpus(&other["allowed"]).contains(c));
        assert!(rel & SHARE_NODE != 0, "{what}: {l:?}");
        assert_eq!(rel & SHARE_HWTHREAD != 0, meet, "{what}: {lines:?}");
    }
    lines
}

#[test]
fn libpmix_clients_read_and_compare_what_they_were_given() {
    let program = locality_program().display().to_string();
    for libpmix5 in [false, true] {
        for bind_to in ["none", "core"] {
            let what =
                format!("pmixrun --bind-to {bind_to} -n 2 pmix_locality (libpmix 5: {libpmix5})");
            let mut cmd = Command::new(pmixrun_bin());
            cmd.args(["--bind-to", bind_to, "-n", "2", &program])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            if libpmix5 {
                use_ompi5_libpmix(&mut cmd);
            }
            let out = Running::start(cmd, &what).finish(Instant::now() + DEADLINE, &what);
            let lines = check_loc_lines(&what, &out);
            for l in &lines {
                // libpmix 4.2 and 5.0 answer a comparison they made with
                // PMIX_ERR_TAKE_NEXT_OPTION, and parse neither form without "hwloc:".
                assert!(
                    ["0", "-1366"].contains(&l["rel_rc"].as_str()),
                    "{what}: {l:?}"
                );
                assert_ne!(l["bare_parse_rc"], "0", "{what}: {l:?}");
            }
            if bind_to == "none" {
                let mut ranks: Vec<&str> = lines.iter().map(|l| l["pkgrank"].as_str()).collect();
                ranks.sort_unstable();
                assert_eq!(ranks, ["0", "1"], "{what}: {lines:?}");
            }
        }
    }
}

#[test]
fn pmix_rs_clients_read_peers_localities_and_compare_them() {
    let program = native_locality_client().display().to_string();
    for bind_to in ["none", "core"] {
        let (what, out) = pmixrun(&["--bind-to", bind_to, "-n", "2", &program]);
        check_loc_lines(&what, &out);
    }
}

// ---- Locality strings against libpmix's, on a machine this is not -------------------------

/// Writes a sysfs-like tree of two packages of two cores of two threads (CPUs 0,1,4,5 on
/// package 0, cores {0,4} and {1,5}; 2,3,6,7 on package 1), L1 and L2 per core, L3 and a NUMA
/// node per package, with the files pmixrun reads and those hwloc reads (masks, `bus/cpu`).
fn two_package_tree(root: &Path) {
    let _ = std::fs::remove_dir_all(root);
    let w = |rel: &str, text: &str| {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("a fixture directory");
        std::fs::write(&path, format!("{text}\n")).expect("a fixture file");
    };
    let mask = |cpus: &[u32]| format!("{:08x}", cpus.iter().fold(0u32, |m, c| m | 1 << c));
    let list = |cpus: &[u32]| {
        cpus.iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    for f in ["online", "possible", "present"] {
        w(&format!("sys/devices/system/cpu/{f}"), "0-7");
    }
    w("sys/devices/system/node/online", "0-1");
    for cpu in 0..8u32 {
        let first = cpu % 4;
        let (package, core_id) = (first / 2, first % 2);
        let core = [first, first + 4];
        let pkg: [u32; 4] = if package == 0 {
            [0, 1, 4, 5]
        } else {
            [2, 3, 6, 7]
        };
        let d = format!("sys/devices/system/cpu/cpu{cpu}");
        w(&format!("{d}/online"), "1");
        w(
            &format!("{d}/topology/physical_package_id"),
            &package.to_string(),
        );
        w(&format!("{d}/topology/core_id"), &core_id.to_string());
        w(&format!("{d}/topology/die_id"), "0");
        for (name, cpus) in [
            ("thread_siblings", &core[..]),
            ("core_cpus", &core),
            ("core_siblings", &pkg),
            ("package_cpus", &pkg),
        ] {
            w(&format!("{d}/topology/{name}"), &mask(cpus));
            w(&format!("{d}/topology/{name}_list"), &list(cpus));
        }
        for (index, level, kind, shared, size) in [
            (0, 1, "Data", &core[..], "32K"),
            (1, 1, "Instruction", &core, "32K"),
            (2, 2, "Unified", &core, "1024K"),
            (3, 3, "Unified", &pkg, "32768K"),
        ] {
            let c = format!("{d}/cache/index{index}");
            w(&format!("{c}/level"), &level.to_string());
            w(&format!("{c}/type"), kind);
            w(&format!("{c}/size"), size);
            w(&format!("{c}/shared_cpu_list"), &list(shared));
            w(&format!("{c}/shared_cpu_map"), &mask(shared));
        }
        let link = root.join(format!("sys/bus/cpu/devices/cpu{cpu}"));
        std::fs::create_dir_all(link.parent().expect("a parent")).expect("bus/cpu");
        let _ = std::os::unix::fs::symlink(format!("../../../devices/system/cpu/cpu{cpu}"), link);
    }
    for (node, cpus) in [(0, [0u32, 1, 4, 5]), (1, [2, 3, 6, 7])] {
        let d = format!("sys/devices/system/node/node{node}");
        w(&format!("{d}/cpulist"), &list(&cpus));
        w(&format!("{d}/cpumap"), &mask(&cpus));
        w(
            &format!("{d}/meminfo"),
            &format!("Node {node} MemTotal:       1000000 kB"),
        );
    }
}

/// `pmixrun ARGS` with the topology of the tree at `root` (pinning nothing), which must
/// succeed within [`DEADLINE`].
fn pmixrun_on_tree(root: &Path, args: &[&str], what: &str) -> Output {
    let mut cmd = Command::new(pmixrun_bin());
    cmd.args(args)
        .env("PMIXRS_TOPOLOGY_ROOT", root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = Running::start(cmd, what).finish(Instant::now() + DEADLINE, what);
    assert_ok(&out, what);
    out
}

/// `openpmix/pmix_locstr.c`, once.
fn locstr_program() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| compile_libpmix_program("pmix_locstr"))
}

#[test]
fn locality_strings_are_libpmixs_on_a_two_package_machine() {
    let root = compiled_programs_dir("placement").join(format!("tree-{}", std::process::id()));
    two_package_tree(&root);
    // What pmixrun reports for each process, on that tree (pinning nothing).
    let mut reported: Vec<(String, String)> = Vec::new();
    for (args, want) in [
        (
            &["--bind-to", "core", "-n", "5"][..],
            &["0,4", "1,5", "2,6", "3,7", "0,4"][..],
        ),
        (
            &["--map-by", "package", "--bind-to", "core", "-n", "4"],
            &["0,4", "2,6", "1,5", "3,7"],
        ),
        (&["--bind-to", "numa", "-n", "2"], &["0-1,4-5", "2-3,6-7"]),
        (
            &["--map-by", "core", "--bind-to", "package", "-n", "3"],
            &["0-1,4-5", "0-1,4-5", "2-3,6-7"],
        ),
        (&["--bind-to", "none", "-n", "1"], &["0-7"]),
    ] {
        let what = format!(
            "PMIXRS_TOPOLOGY_ROOT=<tree> pmixrun {} --report-bindings true",
            args.join(" ")
        );
        let args: Vec<&str> = args
            .iter()
            .copied()
            .chain(["--report-bindings", "true"])
            .collect();
        let out = pmixrun_on_tree(&root, &args, &what);
        let mut lines: Vec<(u32, String, String)> = out
            .stderr
            .lines()
            .filter_map(|l| {
                let rank = l
                    .strip_prefix("pmixrun: [")?
                    .split(']')
                    .next()?
                    .rsplit(':')
                    .next()?;
                let rest = l.split("CPUs ").nth(1)?;
                let (cpus, loc) = rest.split_once(" (")?;
                Some((
                    rank.parse().ok()?,
                    cpus.to_owned(),
                    loc.trim_end_matches(')').to_owned(),
                ))
            })
            .collect();
        lines.sort();
        let got: Vec<&str> = lines.iter().map(|(_, c, _)| c.as_str()).collect();
        assert_eq!(got, want, "{what}: {out:#?}");
        reported.extend(lines.into_iter().map(|(_, c, l)| (c, l)));
    }
    // What libpmix's server writes for the same CPU sets, hwloc reading the same tree.
    let mut cmd = Command::new(locstr_program());
    cmd.args(reported.iter().map(|(c, _)| c))
        .env("HWLOC_FSROOT", &root)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let what = "HWLOC_FSROOT=<tree> pmix_locstr";
    let out = Running::start(cmd, what).finish(Instant::now() + DEADLINE, what);
    assert_ok(&out, what);
    let reference = keyed_lines(&out.stdout, "locstr");
    assert_eq!(reference.len(), reported.len(), "{what}: {out:#?}");
    for ((cpus, ours), theirs) in reported.iter().zip(&reference) {
        assert_eq!(&theirs["cpus"], cpus, "{what}: {out:#?}");
        assert_eq!(
            ours, &theirs["locality"],
            "CPUs {cpus}: pmixrun's locality string"
        );
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// `PMIX_NODE_OVERSUBSCRIBED`: on the two-package tree (eight CPUs: four cores of two
/// threads), eight processes fill the node and nine oversubscribe it; the job's processes on
/// it are told (Open MPI's then yield the CPU while they wait instead of spinning).
#[test]
fn a_job_with_more_processes_than_cpus_is_told_its_node_is_oversubscribed() {
    let root = compiled_programs_dir("placement").join(format!("osub-tree-{}", std::process::id()));
    two_package_tree(&root);
    let client = pmix_tests::workspace_bin("pmix-test-client");
    let client = client.to_str().expect("a UTF-8 path");
    for (n, want) in [(8u32, false), (9, true)] {
        let what = format!("PMIXRS_TOPOLOGY_ROOT=<tree> pmixrun -n {n} oversubscribed");
        let out = pmixrun_on_tree(
            &root,
            &["-n", &n.to_string(), client, "oversubscribed"],
            &what,
        );
        let mut got: Vec<&str> = out
            .stdout
            .lines()
            .filter(|l| l.contains(" oversubscribed="))
            .collect();
        got.sort_unstable();
        let expected: Vec<String> = (0..n)
            .map(|r| format!("rank {r} oversubscribed={want}"))
            .collect();
        assert_eq!(got, expected, "{what}: {out:#?}");
    }
    let _ = std::fs::remove_dir_all(&root);
}

/// A spawned job is bound after its parent, not on top of it, and as its `PMIX_BINDTO` or
/// `PMIX_MAPBY` says: on the two-package tree (pinning nothing), the CPUs pmixrun reports for
/// the parent and then its child.
#[test]
fn a_spawned_job_is_bound_after_its_parent_and_as_it_asks() {
    let root =
        compiled_programs_dir("placement").join(format!("spawn-tree-{}", std::process::id()));
    two_package_tree(&root);
    let client = pmix_tests::workspace_bin("pmix-spawn-client");
    let client = client.to_str().expect("a UTF-8 path");
    for (bind_to, directives, want) in [
        // The child takes the next core, not the parent's.
        ("core", &[][..], &["0,4", "1,5"][..]),
        ("none", &["!bindto=core"], &["0-7", "1,5"]),
        ("core", &["bindto=none"], &["0,4", "0-7"]),
        ("core", &["!bindto=package"], &["0,4", "2-3,6-7"]),
        ("core", &["!mapby=package"], &["0,4", "2-3,6-7"]),
    ] {
        let what = format!(
            "PMIXRS_TOPOLOGY_ROOT=<tree> pmixrun --bind-to {bind_to} -n 1 spawn-placed 1 {}",
            directives.join(" ")
        );
        let mut args = vec!["--report-bindings", "--bind-to", bind_to, "-n", "1"];
        args.extend([client, "spawn-placed", "1"]);
        args.extend(directives);
        let out = pmixrun_on_tree(&root, &args, &what);
        // One line each, the parent's first: the child starts once the parent has.
        let got: Vec<&str> = out
            .stderr
            .lines()
            .filter(|l| l.starts_with("pmixrun: ["))
            .filter_map(|l| l.split("CPUs ").nth(1)?.split(' ').next())
            .collect();
        assert_eq!(got, want, "{what}: {out:#?}");
        assert!(out.stdout.contains("spawned 1 into"), "{what}: {out:#?}");
    }
    let _ = std::fs::remove_dir_all(&root);
}
