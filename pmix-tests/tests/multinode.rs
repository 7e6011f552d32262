//! `pmixrun` over several nodes, end to end (level 2 of `MULTINODE.md`'s testing): real runs
//! on logical nodes of this machine (`--launcher local`: one daemon per node, each a
//! `pmix-server` under the node's name), no root needed.
//!
//! Every run is bounded by a deadline (past it pmixrun is killed and the test fails with what
//! it printed), gets a fresh `TMPDIR` under the target's tmp directory and a marker variable
//! of its own in its environment (daemons and processes inherit it), and afterwards must
//! leave nothing behind: no process carrying the marker, nothing in its `TMPDIR`. A failing
//! test kills what is left of its run.
//!
//! Layout of the usual run, `--host n1:2,n2:2,n3:2 -n 6` (`--map-by slot`): ranks 0-1 on n1,
//! 2-3 on n2, 4-5 on n3.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, unbounded};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pmix_tests::pmixrun_bin;
use pmix_tests::{
    Output, Running, check_abort_of_rank_1, check_client_output, compile_c, compiled_programs_dir,
    keyed_lines, openmpi_program, openpmix_program, openpmix_python_client, workspace_bin,
};

/// For one run: they take about a second.
const DEADLINE: Duration = Duration::from_secs(60);

/// How long what a run started may take to disappear once pmixrun has ended (or, for the
/// lifeline, was killed): "within a few seconds".
const CLEANUP: Duration = Duration::from_secs(8);

/// The variable marking every process of one run.
const MARKER: &str = "PMIXRS_MULTINODE_TEST_RUN";

/// Three logical nodes of two slots.
const HOSTS: &str = "n1:2,n2:2,n3:2";

/// The node of each rank of `-n 6` on [`HOSTS`].
const NODE_OF_6: [&str; 6] = ["n1", "n1", "n2", "n2", "n3", "n3"];

fn bin(name: &str) -> String {
    workspace_bin(name).display().to_string()
}

fn client() -> String {
    bin("pmix-test-client")
}

// ---- processes of a run -------------------------------------------------------------------

/// A process of this machine carrying a run's marker.
#[derive(Debug)]
struct Seen {
    pid: i32,
    ppid: i32,
    cmdline: String,
    env: BTreeMap<String, String>,
}

/// The processes whose environment has `MARKER=value` (zombies have none: they are gone).
fn marked(value: &str) -> Vec<Seen> {
    let want = format!("{MARKER}={value}");
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let path = entry.path();
        let Ok(environ) = std::fs::read(path.join("environ")) else {
            continue;
        };
        let env: BTreeMap<String, String> = environ
            .split(|b| *b == 0)
            .filter_map(|kv| {
                let kv = String::from_utf8_lossy(kv);
                kv.split_once('=')
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
            })
            .collect();
        if env.get(MARKER).map(String::as_str) != want.split_once('=').map(|(_, v)| v) {
            continue;
        }
        let cmdline = std::fs::read(path.join("cmdline"))
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .unwrap_or_default();
        // stat: "pid (comm) state ppid ...", comm possibly holding blanks and parentheses.
        let ppid = std::fs::read_to_string(path.join("stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse().ok())
            })
            .unwrap_or(0);
        out.push(Seen {
            pid,
            ppid,
            cmdline,
            env,
        });
    }
    out
}

/// One run's marker and `TMPDIR`; kills what is left of the run and removes the directory
/// when dropped, so that a failing test leaves nothing either.
struct Fixture {
    id: String,
    tmp: PathBuf,
}

static NEXT_RUN: AtomicU32 = AtomicU32::new(0);

impl Fixture {
    fn new(name: &str) -> Fixture {
        let id = format!(
            "{}-{}-{name}",
            std::process::id(),
            NEXT_RUN.fetch_add(1, Ordering::Relaxed)
        );
        let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("multinode")
            .join(&id);
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap_or_else(|e| panic!("creating {}: {e}", tmp.display()));
        Fixture { id, tmp }
    }

    /// `pmixrun --launcher local --host <hosts> <args>`, with this run's TMPDIR and marker.
    fn pmixrun(&self, hosts: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new(pmixrun_bin());
        cmd.args(["--launcher", "local", "--host", hosts])
            .args(args)
            .env("TMPDIR", &self.tmp)
            .env(MARKER, &self.id)
            .env_remove("PMIXRS_NAMESERVER")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    }

    fn procs(&self) -> Vec<Seen> {
        marked(&self.id)
    }

    /// Runs pmixrun to its end, at most `deadline`, then checks that nothing is left.
    fn run_within(&self, deadline: Duration, hosts: &str, args: &[&str]) -> Run {
        let what = format!("pmixrun --host {hosts} {}", args.join(" "));
        let started = Instant::now();
        let out = Running::start(self.pmixrun(hosts, args), &what)
            .finish(Instant::now() + deadline, &what);
        let run = Run {
            what,
            took: started.elapsed(),
            out,
        };
        self.assert_clean(&run.what);
        run
    }

    fn run(&self, hosts: &str, args: &[&str]) -> Run {
        self.run_within(DEADLINE, hosts, args)
    }

    /// Starts pmixrun, its stdout read line by line as it comes.
    fn start(&self, hosts: &str, args: &[&str]) -> Live {
        let what = format!("pmixrun --host {hosts} {}", args.join(" "));
        let mut child = self
            .pmixrun(hosts, args)
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = unbounded();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Live {
            what,
            child,
            lines,
            seen: Vec::new(),
            started: Instant::now(),
        }
    }

    /// Nothing of the run is left: no marked process (waiting at most [`CLEANUP`] for them
    /// to go: polled, since they are no children of ours), nothing in its TMPDIR.
    fn assert_clean(&self, what: &str) {
        let end = Instant::now() + CLEANUP;
        loop {
            let left = self.procs();
            if left.is_empty() {
                break;
            }
            if Instant::now() > end {
                let list: Vec<String> = left
                    .iter()
                    .map(|p| format!("{} (parent {}): {}", p.pid, p.ppid, p.cmdline))
                    .collect();
                panic!(
                    "{what}: processes of the run still there {CLEANUP:?} after it ended:\n{}",
                    list.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut files: Vec<String> = std::fs::read_dir(&self.tmp)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        files.sort_unstable();
        assert!(files.is_empty(), "{what}: left in its TMPDIR: {files:?}");
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        for p in self.procs() {
            let _ = kill(Pid::from_raw(p.pid), Signal::SIGKILL);
        }
        let _ = std::fs::remove_dir_all(&self.tmp);
    }
}

/// What one run did.
struct Run {
    what: String,
    took: Duration,
    out: Output,
}

impl std::fmt::Debug for Run {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({:?}, {:?})\n--- stdout:\n{}--- stderr:\n{}",
            self.what, self.took, self.out.status, self.out.stdout, self.out.stderr
        )
    }
}

impl Run {
    fn code(&self) -> Option<i32> {
        self.out.status.code()
    }

    fn stdout(&self) -> &str {
        &self.out.stdout
    }

    fn stderr(&self) -> &str {
        &self.out.stderr
    }

    fn assert_ok(&self) {
        assert_eq!(self.code(), Some(0), "{self:?}");
    }

    fn sorted_lines(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.out.stdout.lines().collect();
        v.sort_unstable();
        v
    }

    fn oks(&self) -> usize {
        self.out.stdout.lines().filter(|l| *l == "ok").count()
    }
}

/// A pmixrun still running, its stdout lines as they come.
struct Live {
    what: String,
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
    started: Instant,
}

impl Live {
    fn pid(&self) -> Pid {
        Pid::from_raw(i32::try_from(self.child.id()).expect("pid"))
    }

    /// Waits until `n` lines equal to `line` came, at most [`DEADLINE`] from the start.
    fn wait_for(&mut self, line: &str, n: usize) {
        let end = self.started + DEADLINE;
        while self.seen.iter().filter(|l| *l == line).count() < n {
            match self.lines.recv_deadline(end) {
                Ok(l) => self.seen.push(l),
                Err(e) => {
                    let _ = kill(self.pid(), Signal::SIGKILL);
                    panic!(
                        "{}: {n} lines {line:?} never came ({e}); it said:\n{}",
                        self.what,
                        self.seen.join("\n")
                    );
                }
            }
        }
    }

    /// Waits for the end, at most `deadline` from now.
    fn finish(self, deadline: Duration) -> Run {
        let Live {
            what,
            child,
            lines,
            seen,
            started,
        } = self;
        let (tx, rest) = unbounded();
        std::thread::spawn(move || {
            let mut text: String = seen.iter().map(|l| format!("{l}\n")).collect();
            for l in lines.iter() {
                text.push_str(&l);
                text.push('\n');
            }
            let _ = tx.send(text);
        });
        let out = Running::with_stdout(child, rest).finish(Instant::now() + deadline, &what);
        Run {
            what,
            took: started.elapsed(),
            out,
        }
    }
}

fn count_lines(r: &Run, f: impl Fn(&str) -> bool) -> usize {
    r.stdout().lines().filter(|l| f(l)).count()
}

// ---- job data ---------------------------------------------------------------------------

/// Checks the `nodeinfo` lines of a run whose rank `r` ran on `hosts[r]`, the nodes being
/// numbered in the order of `nodes`.
fn check_nodeinfo(r: &Run, nodes: &[&str], hosts: &[&str]) {
    let n = hosts.len();
    let lines = keyed_lines(r.stdout(), "nodeinfo");
    assert_eq!(lines.len(), n, "{r:?}");
    let on = |node: &str| -> Vec<usize> { (0..n).filter(|&q| hosts[q] == node).collect() };
    let mut seen = Vec::new();
    for l in &lines {
        let f = |k: &str| l.get(k).map(String::as_str).unwrap_or("(none)");
        let rank: usize = f("rank").parse().expect("rank");
        seen.push(rank);
        let mine = on(hosts[rank]);
        let peers: Vec<String> = mine.iter().map(usize::to_string).collect();
        assert_eq!(
            f("num_nodes"),
            nodes.len().to_string(),
            "rank {rank}: {r:?}"
        );
        assert_eq!(
            f("local_size"),
            mine.len().to_string(),
            "rank {rank}: {r:?}"
        );
        assert_eq!(f("local_peers"), peers.join(","), "rank {rank}: {r:?}");
        for (q, host) in hosts.iter().enumerate() {
            let id = nodes.iter().position(|x| x == host).expect("a node");
            let lrank = on(host).iter().position(|&x| x == q).expect("a local rank");
            for (k, want) in [
                ("host", host.to_string()),
                ("nodeid", id.to_string()),
                ("lrank", lrank.to_string()),
                ("nrank", lrank.to_string()),
            ] {
                assert_eq!(
                    f(&format!("{k}.{q}")),
                    want,
                    "{k} of rank {q} at rank {rank}: {r:?}"
                );
            }
        }
    }
    seen.sort_unstable();
    assert_eq!(seen, (0..n).collect::<Vec<_>>(), "{r:?}");
}

#[test]
fn groups_across_nodes_agree_on_their_context_ids() {
    let f = Fixture::new("groups");
    let c = client();
    // Pairs within a node and a pair across two (n1:1 puts ranks 0 and 1 apart).
    for hosts in ["n1:2,n2:2", "n1:1,n2:2"] {
        let n = if hosts == "n1:2,n2:2" { "4" } else { "3" };
        let r = f.run(hosts, &["-n", n, &c, "groups"]);
        r.assert_ok();
        assert_eq!(
            count_lines(&r, |l| l == "ok"),
            n.parse::<usize>().unwrap_or(0),
            "{r:?}"
        );
    }
}

#[test]
fn a_fence_over_a_group_spanning_nodes_is_over_its_members() {
    let f = Fixture::new("group-fence");
    let c = client();
    // n1:1 puts the even ranks 0 and 2 on two nodes.
    let r = f.run("n1:1,n2:3", &["-n", "4", &c, "group-fence"]);
    r.assert_ok();
    assert_eq!(count_lines(&r, |l| l == "ok"), 4, "{r:?}");
}

#[test]
fn job_data_as_ranks_on_three_nodes_see_it() {
    let f = Fixture::new("jobdata");
    let c = client();
    let r = f.run("n1:2,n2:1,n3:2", &["-n", "5", &c, "nodeinfo"]);
    r.assert_ok();
    assert_eq!(r.stderr(), "", "{r:?}");
    check_nodeinfo(&r, &["n1", "n2", "n3"], &["n1", "n1", "n2", "n3", "n3"]);
    // One rank per node in turn, n2 (one slot) skipped once full.
    let r = f.run(
        "n1:2,n2:1,n3:2",
        &["--map-by", "node", "-n", "5", &c, "nodeinfo"],
    );
    r.assert_ok();
    check_nodeinfo(&r, &["n1", "n2", "n3"], &["n1", "n2", "n3", "n1", "n3"]);
    // The same placements in ANL notation, as every rank reads them.
    for (map_by, anl) in [
        ("slot", "(vector,(0,1,2),(1,1,1),(2,1,2))"),
        ("node", "(vector,(0,3,1),(0,1,1),(2,1,1))"),
    ] {
        let r = f.run(
            "n1:2,n2:1,n3:2",
            &["--map-by", map_by, "-n", "5", &c, "anl-map", anl],
        );
        r.assert_ok();
        assert_eq!(count_lines(&r, |l| l == "ok"), 5, "{r:?}");
    }
}

#[test]
fn without_a_count_one_process_runs_per_slot_of_the_nodes() {
    // As mpirun does with a host list (and in an allocation): no -n, every slot filled.
    let f = Fixture::new("per-slot");
    let r = f.run("n1:2,n2:1,n3:2", &[&client(), "nodeinfo"]);
    r.assert_ok();
    check_nodeinfo(&r, &["n1", "n2", "n3"], &["n1", "n1", "n2", "n3", "n3"]);
    // Told how many, it starts that many.
    let r = f.run("n1:2,n2:1,n3:2", &["-n", "2", &client(), "nodeinfo"]);
    r.assert_ok();
    check_nodeinfo(&r, &["n1"], &["n1", "n1"]);
}

/// A PMI-1 process in bash over the inherited socket (`PMI_FD`, fds above 9 need bash):
/// prints its rank and `PMI_process_mapping` as MPICH reads it.
const PMI1_MAPPING: &str = r#"q() { printf '%s\n' "$1" >&"$PMI_FD"; IFS= read -r reply <&"$PMI_FD"; }
q 'cmd=init pmi_version=1 pmi_subversion=1'
q 'cmd=get_my_kvsname'; kvs=${reply##*kvsname=}
q "cmd=get kvsname=$kvs key=PMI_process_mapping"; map=${reply##*value=}
echo "pmi1 rank=$PMI_RANK mapping=$map"
q 'cmd=finalize'"#;

#[test]
fn mpich_process_mapping_describes_the_nodes() {
    let f = Fixture::new("mapping");
    for (map_by, want) in [
        ("slot", "(vector,(0,1,2),(1,1,1),(2,1,2))"),
        // Ranks on n1, n2, n3, n1, n3.
        ("node", "(vector,(0,3,1),(0,1,1),(2,1,1))"),
    ] {
        let r = f.run(
            "n1:2,n2:1,n3:2",
            &[
                "--pmi",
                "pmi1",
                "--map-by",
                map_by,
                "-n",
                "5",
                "bash",
                "-c",
                PMI1_MAPPING,
            ],
        );
        r.assert_ok();
        let want: Vec<String> = (0..5)
            .map(|rank| format!("pmi1 rank={rank} mapping={want}"))
            .collect();
        let mut want: Vec<&str> = want.iter().map(String::as_str).collect();
        want.sort_unstable();
        assert_eq!(r.sorted_lines(), want, "{r:?}");
    }
}

#[test]
fn libpmix_job_data_on_three_nodes() {
    let f = Fixture::new("libpmix-job");
    let c = openpmix_program("pmix_client").display().to_string();
    let r = f.run("n1:2,n2:1,n3:2", &["-n", "5", &c, "job"]);
    r.assert_ok();
    let hosts = ["n1", "n1", "n2", "n3", "n3"];
    let lrank = [0, 1, 0, 0, 1];
    let local = [2, 2, 1, 2, 2];
    let nodeid = [0, 0, 1, 2, 2];
    let jobs = keyed_lines(r.stdout(), "job");
    assert_eq!(jobs.len(), 5, "{r:?}");
    for job in &jobs {
        let f = |k: &str| job.get(k).map(String::as_str).unwrap_or("(none)");
        let rank: usize = f("rank").parse().expect("rank");
        for (k, want) in [
            ("hostname", hosts[rank].to_string()),
            ("num_nodes", "3".to_owned()),
            ("nodeid", nodeid[rank].to_string()),
            ("local_size", local[rank].to_string()),
            ("local_rank", lrank[rank].to_string()),
            ("node_rank", lrank[rank].to_string()),
            ("size", "5".to_owned()),
        ] {
            assert_eq!(f(k), want, "{k} of rank {rank}: {r:?}");
        }
    }
}

// ---- fences and gets --------------------------------------------------------------------

#[test]
fn collecting_and_non_collecting_fences_over_all_and_over_subsets_spanning_nodes() {
    let f = Fixture::new("fences");
    let c = client();
    for (spec, flags) in [
        // The whole job, collecting (gets then local only: OPTIONAL), blocking and not.
        ("@:", "db"),
        ("@:", "d"),
        // Not collecting: every get of a rank on another node is a direct modex.
        ("@:", "b"),
        ("@:", ""),
        // Subsets over all three nodes, and over two.
        ("@:0,3,5", "db"),
        ("@:1,2", "b"),
        ("@:1,4", "d"),
    ] {
        let r = f.run(HOSTS, &["-n", "6", &c, "fence", spec, flags]);
        r.assert_ok();
        assert_eq!(r.oks(), 6, "{r:?}");
        assert_eq!(r.stderr(), "", "{r:?}");
    }
}

#[test]
fn back_to_back_fences_never_mix() {
    let f = Fixture::new("b2b");
    // Two collecting fences, the second changing values of the first.
    let r = f.run(HOSTS, &["-n", "6", &client(), "replace", "4", "1,3"]);
    r.assert_ok();
    assert_eq!(r.oks(), 6, "{r:?}");
    // Fences of libpmix processes one after another, on subsets and on all, with data.
    let c = openpmix_program("pmix_client").display().to_string();
    let r = f.run(HOSTS, &["-n", "6", &c, "fence"]);
    check_client_output(&r.out, &r.what, 6, &["fence"]);
    // Internal keys stay home across nodes, then a final fence.
    let r = f.run(HOSTS, &["-n", "6", &client(), "internal", "3"]);
    r.assert_ok();
}

#[test]
fn get_of_a_rank_on_another_node_by_direct_modex() {
    let f = Fixture::new("dmodex");
    // One rank per node: rank 0 (n1) waits for a key rank 1 (n2) commits later; a get with
    // TIMEOUT of rank 2 (n3) times out; OPTIONAL never asks; a missing key is NOT_FOUND.
    let r = f.run("n1:1,n2:1,n3:1", &["-n", "3", &client(), "get-semantics"]);
    r.assert_ok();
    assert_eq!(r.oks(), 3, "{r:?}");
}

#[test]
fn a_get_racing_a_peers_later_commit_waits_for_its_key() {
    let f = Fixture::new("latekey");
    // Rank 1 (n2) committed "early" when rank 0's (n1) get of its "late" reaches n2; n2
    // answers once "late" is committed, not with the early data (which had no such key).
    let r = f.run("n1:1,n2:1", &["-n", "2", &client(), "late-key"]);
    r.assert_ok();
    assert_eq!(r.oks(), 2, "{r:?}");
    assert!(r.out.stdout.contains("rank 0: got the late key"), "{r:?}");
}

// ---- names, spawn, connect, events, abort -----------------------------------------------

#[test]
fn publish_lookup_and_unpublish_across_nodes() {
    let f = Fixture::new("names");
    let c = bin("pmix-names-client");
    for (scenario, n) in [
        ("basic", 3),
        ("wait", 3),
        ("wait-timeout", 2),
        ("duplicates", 2),
        ("unpublish", 2),
    ] {
        let r = f.run("n1:1,n2:1,n3:1", &["-n", &n.to_string(), &c, scenario]);
        r.assert_ok();
        assert_eq!(r.oks(), n, "{r:?}");
        assert_eq!(r.stderr(), "", "{r:?}");
    }
}

/// `pmixrun --tag-output -n 1 pmix-spawn-client parent N` on `hosts`: the run, and the nodes
/// of its `N` children (sorted), each tagged as one of the first spawned job.
fn spawn_children(f: &Fixture, hosts: &str, n: usize) -> (Run, Vec<String>) {
    let r = f.run(
        hosts,
        &[
            "--tag-output",
            "-n",
            "1",
            &bin("pmix-spawn-client"),
            "parent",
            &n.to_string(),
        ],
    );
    r.assert_ok();
    let mut nodes: Vec<String> = r
        .stdout()
        .lines()
        .filter(|l| l.contains("] child ") && l.contains(&format!(" of {n}: parent ")))
        .map(|l| {
            let tag = l.split(']').next().unwrap_or("");
            assert!(tag.starts_with("[1:"), "a child's tag {tag:?}: {r:?}");
            tag.split('@').nth(1).unwrap_or("?").to_owned()
        })
        .collect();
    nodes.sort_unstable();
    (r, nodes)
}

#[test]
fn spawn_from_a_rank_places_the_children_on_the_free_slots_of_the_nodes() {
    let f = Fixture::new("spawn");
    // The parent takes n1's slot; three children fill n2 and n3.
    let (r, nodes) = spawn_children(&f, "n1:1,n2:2,n3:1", 3);
    assert_eq!(nodes, ["n2", "n2", "n3"], "{r:?}");
    assert!(r.stdout().contains("[0@n1] parent: children done"), "{r:?}");
}

/// The slot the first job leaves free on its own node is free for a spawn (the root once
/// counted the first job's slots twice, and refused this spawn with `ERR_OUT_OF_RESOURCE`).
#[test]
fn a_spawn_takes_the_slot_the_first_job_left_free_on_its_node() {
    let f = Fixture::new("spawnfree");
    let (r, nodes) = spawn_children(&f, "n1:2,n2:1", 2);
    assert_eq!(nodes, ["n1", "n2"], "{r:?}");
}

#[test]
fn connect_and_disconnect_across_namespaces_on_different_nodes() {
    let f = Fixture::new("connect");
    // a: rank 0 on n1, 1-2 on n2; b (spawned by a's rank 0): on n3.
    let r = f.run_within(
        Duration::from_secs(30),
        "n1:1,n2:2,n3:2",
        &[
            "-n",
            "3",
            &bin("pmix-dyn-client"),
            "spawned+exchange+disconnect",
            "spawn",
            "2",
        ],
    );
    r.assert_ok();
    let mut want = Vec::new();
    for (side, size, other, other_size) in [("a", 3, "b", 2), ("b", 2, "a", 3)] {
        for rank in 0..size {
            want.push(if side == "a" {
                format!("a {rank} of 3: b has 2 processes")
            } else {
                format!("b {rank} of 2: spawned by a 0 of 3")
            });
            want.push(format!(
                "{side} {rank} of {size}: connected to {other} of {other_size}, read 4 values"
            ));
            want.push(format!("{side} {rank}: connected and disconnected twice"));
            want.push("ok".to_owned());
        }
    }
    let mut want: Vec<&str> = want.iter().map(String::as_str).collect();
    want.sort_unstable();
    assert_eq!(r.sorted_lines(), want, "{r:?}");
}

#[test]
fn events_with_namespace_and_custom_ranges_reach_ranks_on_other_nodes() {
    let f = Fixture::new("events");
    let r = f.run_within(
        Duration::from_secs(30),
        "n1:1,n2:2,n3:2",
        &["-n", "3", &bin("pmix-dyn-client"), "events", "spawn", "2"],
    );
    r.assert_ok();
    let mut want = Vec::new();
    for (side, rank, n) in [
        ("a", 0, 1),
        ("a", 1, 1),
        ("a", 2, 2),
        ("b", 0, 2),
        ("b", 1, 1),
    ] {
        want.push(format!(
            "{side} {rank}: received {n} events as the ranges say"
        ));
        want.push("ok".to_owned());
    }
    let mut want: Vec<&str> = want.iter().map(String::as_str).collect();
    want.sort_unstable();
    assert_eq!(r.sorted_lines(), want, "{r:?}");
}

#[test]
fn abort_from_a_rank_on_the_second_node_ends_the_run_with_its_status() {
    let f = Fixture::new("abort");
    // libpmix: rank 1 (n2) aborts while ranks 0 (n1) and 2 (n2) wait in a fence.
    let c = openpmix_program("pmix_client").display().to_string();
    let r = f.run("n1:1,n2:2", &["-n", "3", &c, "abort", "5"]);
    check_abort_of_rank_1(&r.out, &r.what, 5);
    assert!(
        r.stderr()
            .contains("pmixrun: rank 1 called abort with status 5"),
        "{r:?}"
    );
}

// ---- MPI and libpmix programs -----------------------------------------------------------

/// `pmix-tests/mpi/hello.c` compiled with `mpicc` into `<target>/tmp/<dir>`, once per process.
fn mpi_hello(cell: &'static OnceLock<Result<PathBuf, String>>, mpicc: &Path, dir: &str) -> String {
    let built = cell.get_or_init(|| {
        if !mpicc.is_file() {
            return Err(format!(
                "{} is missing; {}",
                mpicc.display(),
                pmix_tests::INSTALL_TEST_DEPS
            ));
        }
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("mpi")
            .join("hello.c");
        let flags = ["-O1", "-Wall", "-Wextra", "-Werror"].map(String::from);
        compile_c(
            mpicc,
            &flags,
            &src,
            &[],
            &compiled_programs_dir(dir),
            "hello",
        )
    });
    match built {
        Ok(p) => p.display().to_string(),
        Err(e) => panic!("{e}"),
    }
}

fn mpich_hello_across_nodes(hello: &str, env: &[&str]) {
    let f = Fixture::new("mpich");
    for pmi in ["pmi1", "pmi1-port"] {
        let mut args = vec!["--pmi", pmi];
        for e in env {
            args.extend(["-x", e]);
        }
        args.extend(["-n", "6", hello, "6"]);
        let r = f.run(HOSTS, &args);
        r.assert_ok();
        let want: Vec<String> = (0..6)
            .map(|rank| format!("hello rank {rank} of 6 appnum 0 sum 15"))
            .collect();
        let mut want: Vec<&str> = want.iter().map(String::as_str).collect();
        want.sort_unstable();
        assert_eq!(r.sorted_lines(), want, "{r:?}");
    }
}

#[test]
fn mpich_4_hello_across_nodes() {
    static CELL: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let hello = mpi_hello(&CELL, Path::new("/usr/bin/mpicc.mpich"), "multinode-mpich4");
    mpich_hello_across_nodes(&hello, &[]);
}

#[test]
fn mpich_5_hello_across_nodes() {
    static CELL: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let prefix = std::env::var_os("PMIXRS_MPICH5").unwrap_or_else(|| "/opt/mpich5".into());
    let mpicc = Path::new(&prefix).join("bin").join("mpicc");
    let hello = mpi_hello(&CELL, &mpicc, "multinode-mpich5");
    mpich_hello_across_nodes(&hello, &[]);
}

#[test]
fn open_mpi_hello_across_nodes_over_tcp() {
    let f = Fixture::new("ompi");
    let hello = openmpi_program("mpi_hello_ompi").display().to_string();
    // Logical nodes are one machine: Open MPI's shared-memory transport (vader) would pair
    // ranks of different "nodes" through segments named after the node and collide; tcp on
    // loopback only, as between real nodes.
    let r = f.run(
        HOSTS,
        &[
            "-x",
            "OMPI_MCA_btl=self,tcp",
            "-x",
            "OMPI_MCA_btl_tcp_if_include=lo",
            "-n",
            "6",
            &hello,
            "6",
        ],
    );
    r.assert_ok();
    let want: Vec<String> = (0..6)
        .map(|r| format!("OK rank={r} size=6 sum=15"))
        .collect();
    pmix_tests::assert_lines(&r.out, &r.what, "OK", want);
}

#[test]
fn python_pmix_client_across_nodes() {
    let f = Fixture::new("python");
    let (python, script) = openpmix_python_client();
    let (python, script) = (python.display().to_string(), script.display().to_string());
    let r = f.run(
        "n1:1,n2:1,n3:1",
        &["-n", "3", &python, &script, "fence", "publish"],
    );
    check_client_output(&r.out, &r.what, 3, &["fence", "publish"]);
}

#[test]
fn libpmix_and_pmix_rs_processes_share_one_job_across_nodes() {
    let f = Fixture::new("mixed");
    let c = openpmix_program("pmix_client").display().to_string();
    let rs = bin("pmix-oracle-client");
    // libpmix ranks 0-2 on n1-n2, pmix-rs ranks 3-5 on n2-n3: a collecting fence and a
    // non-collecting one (direct modex), each rank reading every other's values.
    let mut args = vec![
        "-n",
        "3",
        c.as_str(),
        "modex",
        "modex-direct",
        ":",
        "-n",
        "3",
    ];
    args.extend([rs.as_str(), "modex", "modex-direct"]);
    let r = f.run(HOSTS, &args);
    check_client_output(&r.out, &r.what, 6, &["modex", "modex-direct"]);
}

// ---- output -----------------------------------------------------------------------------

/// Each rank writes `LINES` lines of `WIDTH` copies of its rank's digit to stdout and to
/// stderr at once, each line needing several writes.
const OUTPUT_SCRIPT: &str = r#"p=$(printf "%0${WIDTH}d" 0 | tr 0 "$PMIX_RANK")
i=0
while [ $i -lt $LINES ]; do
  printf '%s-%s-%s\n' "$PMIX_RANK" $i "$p"
  printf '%s-%s-%s\n' "$PMIX_RANK" $i "$p" >&2
  i=$((i+1))
done"#;

fn check_tagged(text: &str, stream: &str, lines: usize, width: usize, r: &Run) {
    let mut next = [0usize; 6];
    for l in text.lines() {
        let (tag, body) = l
            .split_once("] ")
            .unwrap_or_else(|| panic!("{stream}: an untagged line {l:.80?}: {r:.2000?}"));
        let (rank, node) = tag
            .trim_start_matches('[')
            .split_once('@')
            .unwrap_or_else(|| panic!("{stream}: a tag without a node {tag:?}"));
        let rank: usize = rank.parse().expect("a rank in the tag");
        assert_eq!(node, NODE_OF_6[rank], "{stream}: the node of rank {rank}");
        let mut parts = body.splitn(3, '-');
        let (who, i, payload) = (parts.next(), parts.next(), parts.next());
        assert_eq!(who, Some(rank.to_string().as_str()), "{stream}: {l:.80?}");
        assert_eq!(
            i.and_then(|i| i.parse().ok()),
            Some(next[rank]),
            "{stream}: rank {rank}'s lines out of order or mixed: {l:.80?}"
        );
        let digit = char::from_digit(rank as u32, 10).expect("a digit");
        assert!(
            payload.is_some_and(|p| p.len() == width && p.chars().all(|c| c == digit)),
            "{stream}: rank {rank}'s line {} mixed with another: {l:.120?}",
            next[rank]
        );
        next[rank] += 1;
    }
    assert_eq!(next, [lines; 6], "{stream}: lines per rank");
}

#[test]
fn output_of_every_node_arrives_in_whole_lines_tagged_with_rank_and_node() {
    let f = Fixture::new("output");
    let (lines, width) = (200, 5000);
    let mut cmd_args = vec!["--tag-output"];
    let (l, w) = (format!("LINES={lines}"), format!("WIDTH={width}"));
    cmd_args.extend(["-x", &l, "-x", &w, "-n", "6", "sh", "-c", OUTPUT_SCRIPT]);
    let r = f.run(HOSTS, &cmd_args);
    r.assert_ok();
    check_tagged(r.stdout(), "stdout", lines, width, &r);
    check_tagged(r.stderr(), "stderr", lines, width, &r);
}

/// `VmHWM` of a process, in kB.
fn vm_hwm_kb(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[test]
fn a_rank_writing_64_mb_is_held_back_not_buffered_by_the_root() {
    let f = Fixture::new("backpressure");
    const LINE: usize = 1024;
    const LINES: usize = 64 * 1024;
    // Rank 1, on n2, writes 64 MiB through `head`, which the test finds blocked in write(2)
    // while nobody reads pmixrun's stdout.
    let script = format!(
        "if [ \"$PMIX_RANK\" = 1 ]; then yes \"$(printf %0{}d 0)\" | head -n {LINES}; fi",
        LINE - 1
    );
    let mut child = f
        .pmixrun("n1:1,n2:1", &["-n", "2", "sh", "-c", &script])
        .spawn()
        .expect("starting pmixrun");
    let root = child.id();
    let mut out = child.stdout.take().expect("stdout");
    let stderr = pmix_tests::collect_text(child.stderr.take());
    let end = Instant::now() + DEADLINE;
    // Polled: the writer is no child of ours to wait for.
    let blocked = loop {
        let head = f
            .procs()
            .into_iter()
            .find(|p| p.cmdline.starts_with("head "));
        let in_write = head.as_ref().is_some_and(|h| {
            std::fs::read_to_string(format!("/proc/{}/syscall", h.pid))
                .is_ok_and(|s| s.starts_with("1 0x1 "))
        });
        if in_write {
            break vm_hwm_kb(root);
        }
        if Instant::now() > end {
            let _ = child.kill();
            panic!("the writer never blocked in write(2) while pmixrun's stdout was not read");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Now read it all, noting the root's high-water mark as it goes.
    let mut peak = blocked.unwrap_or(0);
    let mut total = 0usize;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = out.read(&mut buf).expect("reading pmixrun's stdout");
        if n == 0 {
            break;
        }
        total += n;
        if let Some(h) = vm_hwm_kb(root) {
            peak = peak.max(h);
        }
    }
    let status = child.wait().expect("waiting for pmixrun");
    let stderr = stderr
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_default();
    f.assert_clean("backpressure");
    assert!(status.success(), "{status:?}: {stderr}");
    assert_eq!(total, LINE * LINES, "bytes of output: {stderr}");
    let output_kb = (LINE * LINES / 1024) as u64;
    assert!(
        peak < output_kb / 2,
        "pmixrun's VmHWM reached {peak} kB for {output_kb} kB of output (at the block: \
         {blocked:?} kB)"
    );
}

// ---- exit statuses, timeout, signals ----------------------------------------------------

#[test]
fn exit_statuses_across_nodes() {
    let f = Fixture::new("status");
    // Rank 3 (n2) exits 7 without finalize; the others wait until killed.
    let r = f.run(HOSTS, &["-n", "6", &client(), "exit-rank", "3", "7"]);
    assert_eq!(r.code(), Some(7), "{r:?}");
    assert_eq!(
        r.stderr(),
        "pmixrun: rank 3 exited with status 7 without calling finalize; killing the job\n"
    );
    // Killed by a signal on n3: 128 + signal.
    let r = f.run(
        HOSTS,
        &[
            "-n",
            "6",
            "sh",
            "-c",
            "[ \"$PMIX_RANK\" != 5 ] || kill -9 $$",
        ],
    );
    assert_eq!(r.code(), Some(137), "{r:?}");
    // "; killing the job" follows when ranks of other nodes were still running.
    assert!(
        r.stderr()
            .starts_with("pmixrun: rank 5 was killed by SIGKILL"),
        "{r:?}"
    );
    // Plain programs on every node.
    let r = f.run(HOSTS, &["-n", "6", "true"]);
    r.assert_ok();
    let r = f.run(
        HOSTS,
        &["-n", "6", "sh", "-c", "exit $((PMIX_RANK == 4 ? 9 : 0))"],
    );
    assert_eq!(r.code(), Some(9), "{r:?}");
}

#[test]
fn timeout_kills_a_job_hanging_on_every_node() {
    let f = Fixture::new("timeout");
    let r = f.run(HOSTS, &["--timeout", "2", "-n", "6", &client(), "hang"]);
    assert_eq!(r.code(), Some(124), "{r:?}");
    assert_eq!(
        r.stderr(),
        "pmixrun: the job did not finish within --timeout 2 s; killing the job\n"
    );
    assert_eq!(count_lines(&r, |l| l == "ready"), 6, "{r:?}");
    assert!(r.took >= Duration::from_secs(2), "{r:?}");
}

#[test]
fn sigterm_to_pmixrun_reaches_the_ranks_of_every_node() {
    let f = Fixture::new("sigterm");
    let mut live = f.start(HOSTS, &["-n", "6", &client(), "hang"]);
    live.wait_for("ready", 6);
    kill(live.pid(), Signal::SIGTERM).expect("signalling pmixrun");
    let r = live.finish(DEADLINE);
    f.assert_clean(&r.what);
    assert_eq!(r.code(), Some(128 + 15), "{r:?}");
    assert_eq!(
        r.stderr(),
        "pmixrun: received SIGTERM; passing it on to the job\n"
    );
}

// ---- failures ---------------------------------------------------------------------------

/// The `rank R: fence failed with STATUS` lines, by rank.
fn fence_failures(r: &Run) -> BTreeMap<u32, String> {
    r.stdout()
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("rank ")?;
            let (rank, status) = rest.split_once(": fence failed with ")?;
            Some((rank.parse().ok()?, status.to_owned()))
        })
        .collect()
}

#[test]
fn a_rank_exiting_mid_fence_fails_the_fence_on_every_node_at_once() {
    let f = Fixture::new("exit-mid-fence");
    // Rank 3 (n2) exits 5 once rank 0 committed; the others wait in a fence with a 60 s
    // TIMEOUT, SIGTERM blocked so that they can say how the fence ended. pmixrun's SIGKILL
    // comes only after a 30 s grace: the fence's failure, not the kill, must end them (with
    // the default 2 s, a loaded machine could kill a rank before it printed its failure).
    let r = f.run(
        HOSTS,
        &[
            "--grace",
            "30",
            "-n",
            "6",
            &client(),
            "stuck-fence",
            "3",
            "5",
        ],
    );
    assert_eq!(r.code(), Some(5), "{r:?}");
    assert!(
        r.stderr().starts_with(
            "pmixrun: rank 3 exited with status 5 without calling finalize; killing the job\n"
        ),
        "{r:?}"
    );
    let failed = fence_failures(&r);
    let want: BTreeMap<u32, String> = [0, 1, 2, 4, 5]
        .map(|rank| (rank, "ERR_PROC_TERM_WO_SYNC".to_owned()))
        .into();
    assert_eq!(failed, want, "{r:?}");
    assert!(r.took < Duration::from_secs(20), "{r:?}");
}

/// `--enable-recovery` across nodes: rank 3 (n2) exits 5; the ranks of every node hear of it,
/// fence among themselves, see their fence of the whole job and a get of rank 3's data fail,
/// and finish; the run's status is rank 3's.
#[test]
fn with_recovery_the_ranks_of_every_node_outlive_a_failed_rank() {
    let f = Fixture::new("recovery");
    let r = f.run(
        HOSTS,
        &[
            "--enable-recovery",
            "-n",
            "6",
            &client(),
            "recovery",
            "3",
            "5",
        ],
    );
    assert_eq!(r.code(), Some(5), "{r:?}");
    let lines = r.sorted_lines();
    for rank in [0, 1, 2, 4, 5] {
        for said in [
            "told rank 3 ended with 5",
            "survivors' fence done",
            "job fence failed with ERR_PROC_TERM_WO_SYNC",
            "get failed with ERR_PROC_TERM_WO_SYNC",
        ] {
            let line = format!("rank {rank}: {said}");
            assert!(lines.contains(&line.as_str()), "no {line:?}: {r:?}");
        }
    }
    assert_eq!((r.oks(), lines.len()), (5, 25), "{r:?}");
    assert!(
        r.stderr()
            .starts_with("pmixrun: rank 3 exited with status 5 without calling finalize"),
        "{r:?}"
    );
    assert!(!r.stderr().contains("killing"), "{r:?}");
}

#[test]
fn a_daemon_killed_mid_fence_ends_the_run_naming_its_node() {
    let f = Fixture::new("daemon-killed");
    // Rank 3 (n2) never joins; the others wait in the fence.
    let mut live = f.start(HOSTS, &["-n", "6", &client(), "stuck-fence", "3", "park"]);
    live.wait_for("ready", 6);
    let procs = f.procs();
    let rank3 = procs
        .iter()
        .find(|p| {
            p.env.get("PMIX_RANK").map(String::as_str) == Some("3")
                && p.cmdline.contains("pmix-test-client")
        })
        .unwrap_or_else(|| panic!("no rank 3 among {procs:#?}"));
    let daemon = procs
        .iter()
        .find(|p| p.pid == rank3.ppid)
        .unwrap_or_else(|| panic!("no parent of rank 3 among {procs:#?}"));
    assert!(
        daemon.cmdline.contains("--pmixrun-internal-daemon"),
        "rank 3's parent is {daemon:?}"
    );
    let killed = Instant::now();
    kill(Pid::from_raw(daemon.pid), Signal::SIGKILL).expect("killing n2's daemon");
    let r = live.finish(DEADLINE);
    let ended = killed.elapsed();
    assert!(
        ended < Duration::from_secs(10),
        "the run took {ended:?} to end: {r:?}"
    );
    assert_ne!(r.code(), Some(0), "{r:?}");
    assert!(
        r.stderr()
            .lines()
            .any(|l| l.starts_with("pmixrun: ") && l.contains("n2")),
        "no message naming n2: {r:?}"
    );
    // The ranks of n1 and n3 were in the fence: it failed rather than hung.
    let failed = fence_failures(&r);
    assert_eq!(
        failed.keys().copied().collect::<Vec<_>>(),
        [0, 1, 4, 5],
        "{r:?}"
    );
    // The killed daemon could not remove its own directory: someone else must.
    f.assert_clean(&r.what);
}

#[test]
fn daemons_whose_root_dies_kill_their_ranks_and_exit() {
    let f = Fixture::new("lifeline");
    let mut live = f.start(HOSTS, &["-n", "6", &client(), "hang"]);
    live.wait_for("ready", 6);
    let daemons = f
        .procs()
        .iter()
        .filter(|p| p.cmdline.contains("--pmixrun-internal-daemon-worker"))
        .count();
    assert_eq!(daemons, 3, "{:#?}", f.procs());
    kill(live.pid(), Signal::SIGKILL).expect("killing pmixrun");
    let r = live.finish(DEADLINE);
    assert_eq!(r.out.status.code(), None, "{r:?}");
    // Within CLEANUP of the root's death: no daemon, no rank, no socket, no directory.
    f.assert_clean("after the root's SIGKILL");
}
