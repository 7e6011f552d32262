//! Open MPI 5 both ways. Unmodified Open MPI 5.0.11 programs (its bundled OpenPMIx 5.0.11
//! client) under pmixrun: the MPI test programs of `pmix-tests/mpi/`, compiled once per test
//! process with `$PMIXRS_OMPI5/bin/mpicc` (default `/opt/ompi5`, the PyPI wheel in a venv).
//! And pmix-rs clients under Open MPI 5's own launcher, PRRTE's `prterun` (an OpenPMIx 5.0.11
//! server), which must log no `PMIX ERROR` about what they send. `bash
//! scripts/install-test-deps.sh` installs Open MPI 5; without it these tests fail, saying so.
//! Every run is bounded by a deadline; the programs check their own results and the tests
//! check exit statuses and the lines they print.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use pmix_tests::ompi5::{ompi5_program, ompi5_tool};
use pmix_tests::pmixrun_bin;
use pmix_tests::{
    NameServerProcess, Output, Running, assert_lines, cargo_build, check_client_output,
    clean_command, compiled_programs_dir, in_private_network, workspace_bin,
};

/// For one run; they take a few seconds at most.
const DEADLINE: Duration = Duration::from_secs(60);

/// Runs `pmixrun <args>` in `cwd` to its end, at most [`DEADLINE`]; Open MPI 5's libpmix
/// must have logged no `PMIX ERROR` about what our server sent it.
fn pmixrun_in(cwd: &Path, args: &[&str]) -> (String, Output) {
    pmixrun_with(cwd, &[], args)
}

/// [`pmixrun_in`] with `env` set for pmixrun and its job.
fn pmixrun_with(cwd: &Path, env: &[(&str, &str)], args: &[&str]) -> (String, Output) {
    let what = format!("Open MPI 5: pmixrun {}", args.join(" "));
    let mut cmd = clean_command(pmixrun_bin());
    cmd.args(args).current_dir(cwd).envs(env.iter().copied());
    let out = Running::start(cmd, &what).finish(Instant::now() + DEADLINE, &what);
    assert_no_pmix_error(&what, &out);
    (what, out)
}

fn pmixrun(args: &[&str]) -> (String, Output) {
    pmixrun_in(&std::env::temp_dir(), args)
}

fn assert_code(what: &str, out: &Output, code: i32) {
    assert_eq!(out.status.code(), Some(code), "{what}: {out:#?}");
}

/// Its stdout lines are exactly `want`, in any order.
fn assert_stdout(what: &str, out: &Output, want: &[String]) {
    let mut got: Vec<&str> = out.stdout.lines().collect();
    got.sort_unstable();
    let mut want: Vec<&str> = want.iter().map(String::as_str).collect();
    want.sort_unstable();
    assert_eq!(got, want, "{what}: {out:#?}");
}

/// No line of either stream is OpenPMIx's error log.
fn assert_no_pmix_error(what: &str, out: &Output) {
    let bad: Vec<&str> = out
        .stdout
        .lines()
        .chain(out.stderr.lines())
        .filter(|l| l.contains("PMIX ERROR"))
        .collect();
    assert!(
        bad.is_empty(),
        "{what}: the server logged {bad:#?}\n{out:#?}"
    );
}

// ---- Open MPI 5 programs under pmixrun ----------------------------------------------------

/// ULFM (Open MPI 5.0.11 is built with it: `ompi_info` says "FT MPI support: yes") under
/// `pmixrun --enable-recovery`: the last of 4 ranks kills itself; the others' barrier fails,
/// they revoke and shrink `MPI_COMM_WORLD`, and sum their ranks over the 3 survivors; the run
/// ends with the killed rank's status. Open MPI's catch-all event handler aborts its process
/// on any event but the failures it handles: the survivors must hear no other (seen failing
/// so, each survivor aborting with `EVENT_PROC_TERMINATED`'s -201, before pmixrun marked that
/// event `EVENT_NON_DEFAULT` for a recoverable job). On one node, and on two logical nodes of
/// this machine (`--launcher local`, ranks 0-1 on n1 and 2-3 on n2: the killed rank's node
/// tells the other). Across nodes without Open MPI's `han` collectives: its hierarchical
/// barrier (`coll_han_barrier.c`, 5.0.11 and main alike) ignores what its node-level and
/// leaders' barriers return and always succeeds, so a barrier with a dead rank on a node of
/// two or more "completes" for its node mates (seen: "the barrier with a dead rank returned
/// 0"); `han` takes part only in jobs that span nodes.
#[test]
fn ulfm_survivors_shrink_the_world_after_a_rank_is_killed() {
    let ft = ("OMPI_MCA_mpi_ft_enable", "1");
    let ulfm = ompi5_program("ulfm");
    let one_node = ["--enable-recovery", "-n", "4", &ulfm];
    let two_nodes = [
        "--launcher",
        "local",
        "--host",
        "n1:2,n2:2",
        "--enable-recovery",
        "-n",
        "4",
        &ulfm,
    ];
    let runs = [
        (&one_node[..], &[ft][..]),
        (&two_nodes[..], &[ft, ("OMPI_MCA_coll", "^han")][..]),
    ];
    for (args, env) in runs {
        let (what, out) = pmixrun_with(&std::env::temp_dir(), env, args);
        assert_code(&what, &out, 128 + 9);
        let want: Vec<String> = (0..3)
            .map(|r| format!("rank {r}: 3 survivors, sum 3"))
            .collect();
        assert_stdout(&what, &out, &want);
        assert!(
            out.stderr.contains(
                "pmixrun: rank 3 was killed by SIGKILL without calling finalize; the others go on"
            ),
            "{what}: {out:#?}"
        );
        assert!(!out.stderr.contains("called abort"), "{what}: {out:#?}");
    }
}

#[test]
fn hello_at_1_and_4_ranks_and_two_programs_in_one_job() {
    for n in [1u32, 4] {
        let ns = n.to_string();
        let (what, out) = pmixrun(&["-n", &ns, &ompi5_program("hello"), &ns]);
        assert_code(&what, &out, 0);
        let sum = n * (n - 1) / 2;
        let want: Vec<String> = (0..n)
            .map(|r| format!("hello rank {r} of {n} appnum 0 sum {sum}"))
            .collect();
        assert_stdout(&what, &out, &want);
    }
    let (a, b) = (ompi5_program("mpmd_a"), ompi5_program("mpmd_b"));
    let (what, out) = pmixrun(&["-n", "1", &a, "1", "2", ":", "-n", "2", &b, "1", "2"]);
    assert_code(&what, &out, 0);
    let want: Vec<String> = (0..3)
        .map(|r| {
            let (app, prog) = if r == 0 { (0, "mpmd_a") } else { (1, "mpmd_b") };
            format!("mpmd rank {r} of 3 appnum {app} program {prog}")
        })
        .collect();
    assert_stdout(&what, &out, &want);
}

#[test]
fn hello_with_processes_bound_and_told_their_locality() {
    // Open MPI 5 takes PMIX_CPUSET as a sign that the process is bound and compares the
    // locality strings of its local peers itself (docs/PLACEMENT.md): with either binding it
    // must run as before, and the launcher variables pmixrun sets must not disturb it.
    for bind_to in ["none", "core"] {
        let hello = ompi5_program("hello");
        let (what, out) = pmixrun(&[
            "--bind-to",
            bind_to,
            "--report-bindings",
            "-n",
            "2",
            &hello,
            "2",
        ]);
        assert_code(&what, &out, 0);
        let want: Vec<String> = (0..2)
            .map(|r| format!("hello rank {r} of 2 appnum 0 sum 1"))
            .collect();
        assert_stdout(&what, &out, &want);
        let reports = out
            .stderr
            .lines()
            .filter(|l| l.starts_with("pmixrun: ["))
            .count();
        assert_eq!(reports, 2, "{what}: {out:#?}");
    }
}

#[test]
fn sessions_make_communicators_from_groups_and_list_process_sets() {
    // MPI_Comm_create_from_group and MPI_Intercomm_create_from_groups construct PMIx groups
    // with a context id; MPI_Session_get_num_psets counts Open MPI's three built-in sets
    // and those the launcher defines (none here).
    // One node, then two logical ones (the groups across them go through the daemons' tree).
    for (n, hosts) in [(1u32, ""), (4, ""), (4, "a:2,b:2")] {
        let ns = n.to_string();
        let sessions = ompi5_program("sessions");
        let mut args = vec!["-n", &ns, &sessions, "3"];
        if !hosts.is_empty() {
            args.splice(0..0, ["--launcher", "local", "--host", hosts]);
        }
        let (what, out) = pmixrun(&args);
        assert_code(&what, &out, 0);
        let sum = n * (n - 1) / 2;
        let want: Vec<String> = (0..n)
            .map(|r| {
                let (remote, remote_sum) = match (n, r % 2) {
                    (1, _) => (0, 0),
                    (_, 0) => (n / 2, (0..n).filter(|x| x % 2 == 1).sum::<u32>()),
                    _ => (n.div_ceil(2), (0..n).filter(|x| x % 2 == 0).sum::<u32>()),
                };
                format!(
                    "sessions rank {r} of {n}: psets 3 sum {sum} remote {remote} \
                     remote-sum {remote_sum}"
                )
            })
            .collect();
        assert_stdout(&what, &out, &want);
    }
}

#[test]
fn mpi_abort_ends_the_job_with_its_code() {
    // Rank 1 aborts with 7 while the others are blocked in MPI.
    let (what, out) = pmixrun(&["-n", "3", &ompi5_program("abort"), "7"]);
    assert_code(&what, &out, 7);
    assert_stdout(&what, &out, &["rank 1 aborting with 7".to_owned()]);
    assert!(
        out.stderr.contains("rank 1 called abort with status 7"),
        "{what}: pmixrun did not say why the job failed: {out:#?}"
    );
}

#[test]
fn comm_spawn_and_spawn_multiple_with_argv_and_per_app_working_directories() {
    // Two parents spawn two children.
    let (what, out) = pmixrun(&["-n", "2", &ompi5_program("spawn"), "parent"]);
    assert_code(&what, &out, 0);
    assert_stdout(
        &what,
        &out,
        &[
            "parent rank 0 of 2: talked with 2 children".to_owned(),
            "parent rank 1 of 2: talked with 2 children".to_owned(),
            "child rank 0 of 2 appnum 0: talked with 2 parents".to_owned(),
            "child rank 1 of 2 appnum 0: talked with 2 parents".to_owned(),
        ],
    );
    // Two commands, one child with the argument "a b=c  d;e" (spaces, `;`), two with "x".
    let (what, out) = pmixrun(&["-n", "1", &ompi5_program("spawn"), "multiple"]);
    assert_code(&what, &out, 0);
    assert_stdout(
        &what,
        &out,
        &[
            "parent rank 0 of 1: talked with 3 children".to_owned(),
            "childA rank 0 of 3 appnum 0: talked with 1 parents".to_owned(),
            "childB rank 1 of 3 appnum 1: talked with 1 parents".to_owned(),
            "childB rank 2 of 3 appnum 1: talked with 1 parents".to_owned(),
        ],
    );
    // Each command in the directory of its `wdir` info key, not the parent's.
    let base = compiled_programs_dir("ompi5").join(format!("wdir.{}", std::process::id()));
    let (dir_a, dir_b) = (base.join("a"), base.join("b with space"));
    for d in [&dir_a, &dir_b] {
        std::fs::create_dir_all(d).expect("creating a working directory");
    }
    let (da, db) = (dir_a.display().to_string(), dir_b.display().to_string());
    let (what, out) = pmixrun_in(
        &base,
        &["-n", "1", &ompi5_program("spawn"), "wdir", &da, &db],
    );
    let _ = std::fs::remove_dir_all(&base);
    assert_code(&what, &out, 0);
    assert_stdout(
        &what,
        &out,
        &[
            "parent rank 0 of 1: talked with 2 children".to_owned(),
            "wdirA rank 0 of 2 appnum 0: talked with 1 parents".to_owned(),
            "wdirB rank 1 of 2 appnum 1: talked with 1 parents".to_owned(),
        ],
    );
}

#[test]
fn publish_lookup_and_connect_accept_within_one_run() {
    // Rank 0 publishes, looks up, fails to publish twice, unpublishes; the classes are Open
    // MPI 5's for what the server answers. The name starts with `pmix` without being an
    // attribute: it is data, not a directive, as under PRRTE.
    let (what, out) = pmixrun(&[
        "-n",
        "2",
        &ompi5_program("names"),
        "errors",
        "pmixrs.ompi5.svc",
        "port-one",
        "port-two",
    ]);
    assert_code(&what, &out, 0);
    assert_stdout(
        &what,
        &out,
        &[
            "errors: lookup of an unpublished name failed: MPI_ERR_NAME (38)".to_owned(),
            // The standard's PMIX_ERR_DUPLICATE_KEY, which Open MPI 5 classes as internal: it
            // looks for PMIX_EXISTS only (docs/OPENPMIX.md).
            "errors: duplicate publish failed: MPI_ERR_INTERN (17)".to_owned(),
            "errors: lookup after unpublish failed: MPI_ERR_NAME (38)".to_owned(),
            "errors: second unpublish failed: MPI_ERR_SERVICE (48)".to_owned(),
            "names errors rank 0 ok".to_owned(),
            "names errors rank 1 ok".to_owned(),
        ],
    );
    // Two programs of one run: app 0 accepts on a published port, app 1 connects to it.
    let svc = "ompi5.together.svc";
    let connect = ompi5_program("connect");
    let (what, out) = pmixrun(&[
        "-n", "2", &connect, "together", svc, ":", "-n", "1", &connect, "together", svc,
    ]);
    assert_code(&what, &out, 0);
    assert_stdout(
        &what,
        &out,
        &[
            format!("server: published {svc}"),
            "server rank 0 of 2: exchanged with 1 remote ranks".to_owned(),
            "server rank 1 of 2: exchanged with 1 remote ranks".to_owned(),
            "client rank 0 of 1: exchanged with 2 remote ranks".to_owned(),
        ],
    );
}

/// Starts `pmixrun <args>` without waiting for it.
fn start_pmixrun(args: &[&str]) -> (String, Running) {
    let what = format!("Open MPI 5: pmixrun {}", args.join(" "));
    let mut cmd = clean_command(pmixrun_bin());
    cmd.args(args).current_dir(std::env::temp_dir());
    let running = Running::start(cmd, &what);
    (what, running)
}

/// Waits for a run [`start_pmixrun`] started, at most until `end`.
fn finish_pmixrun((what, running): (String, Running), end: Instant) -> (String, Output) {
    let out = running.finish(end, &what);
    assert_no_pmix_error(&what, &out);
    (what, out)
}

#[test]
fn names_across_runs_through_a_one_session_name_server() {
    // Open MPI 5 publishes and looks up at the SESSION range, and its info keys offer no
    // other but a namespace: the runs share a name server that makes them one session.
    let ns = NameServerProcess::start_with(pmixrun_bin(), &["--one-session"], DEADLINE);
    let uri = ns.file_spec();
    let names = ompi5_program("names");
    let (svc, port, ack, ackport) = ("pmixrs.ompi5.xrun", "port-of-a", "ompi5.xrun.ack", "b");
    let end = Instant::now() + DEADLINE;
    // Started together: B polls for A's name, A polls for B's acknowledgement.
    let a = start_pmixrun(&[
        "--nameserver-uri",
        &uri,
        "-n",
        "2",
        &names,
        "publisher",
        svc,
        port,
        ack,
        ackport,
    ]);
    let b = start_pmixrun(&[
        "--nameserver-uri",
        &uri,
        "-n",
        "1",
        &names,
        "looker",
        svc,
        port,
        ack,
        ackport,
    ]);
    let (what_b, out_b) = finish_pmixrun(b, end);
    let (what_a, out_a) = finish_pmixrun(a, end);
    assert_code(&what_a, &out_a, 0);
    assert_code(&what_b, &out_b, 0);
    assert_stdout(
        &what_a,
        &out_a,
        &[
            format!("publisher: published {svc}"),
            format!("publisher: got {ack} = {ackport}, unpublished {svc}"),
            "names publisher rank 0 ok".to_owned(),
            "names publisher rank 1 ok".to_owned(),
        ],
    );
    assert_stdout(
        &what_b,
        &out_b,
        &[
            format!("looker: publishing {svc} again failed: MPI_ERR_INTERN (17)"),
            format!("looker: found {svc} = {port}, acknowledged, saw it unpublished"),
            "names looker rank 0 ok".to_owned(),
        ],
    );
    ns.stop();
}

/// Two runs of the connect program sharing a one-session name server: the `server.0` ranks of
/// one accept on a published port `svc`, the `client.0` ranks of the other connect; each run
/// on logical nodes of this machine (`--launcher local --host`) when it names some (`.1`).
/// Open MPI's PMIx_Connect names both runs' namespaces, and its MPI_Comm_disconnect is a
/// PMIx_Fence over both: the name server is their rendezvous, and each run learns the
/// other's job data and modex from it. Every rank checks the numbers it receives over the
/// intercommunicator.
fn connect_accept_across_runs(server: (u32, Option<&str>), client: (u32, Option<&str>), svc: &str) {
    let ns = NameServerProcess::start_with(pmixrun_bin(), &["--one-session"], DEADLINE);
    let uri = ns.file_spec();
    let connect = ompi5_program("connect");
    let end = Instant::now() + DEADLINE;
    let args = |(n, hosts): (u32, Option<&str>), side: &str| {
        let mut a = vec!["--nameserver-uri".to_owned(), uri.clone()];
        if let Some(h) = hosts {
            a.extend(["--launcher", "local", "--host", h].map(str::to_owned));
        }
        a.extend([
            "-n".to_owned(),
            n.to_string(),
            connect.clone(),
            side.to_owned(),
            svc.to_owned(),
        ]);
        a
    };
    let (server_args, client_args) = (args(server, "server"), args(client, "client"));
    // Started together: the client's rank 0 polls until the server's port is published.
    let started_server = start_pmixrun(&server_args.iter().map(String::as_str).collect::<Vec<_>>());
    let started_client = start_pmixrun(&client_args.iter().map(String::as_str).collect::<Vec<_>>());
    let (what_c, out_c) = finish_pmixrun(started_client, end);
    let (what_s, out_s) = finish_pmixrun(started_server, end);
    assert_code(&what_s, &out_s, 0);
    assert_code(&what_c, &out_c, 0);
    let mut want = vec![format!("server: published {svc}")];
    want.extend((0..server.0).map(|r| {
        format!(
            "server rank {r} of {}: exchanged with {} remote ranks",
            server.0, client.0
        )
    }));
    assert_stdout(&what_s, &out_s, &want);
    let want: Vec<String> = (0..client.0)
        .map(|r| {
            format!(
                "client rank {r} of {}: exchanged with {} remote ranks",
                client.0, server.0
            )
        })
        .collect();
    assert_stdout(&what_c, &out_c, &want);
    ns.stop();
}

#[test]
fn connect_accept_across_runs_through_a_one_session_name_server() {
    connect_accept_across_runs((2, None), (1, None), "ompi5.xrun.connect");
}

#[test]
fn connect_accept_across_a_one_node_run_and_a_two_node_run() {
    // The accepting run's ranks are on two logical nodes: its root gathers the connect and
    // the fence of MPI_Comm_disconnect from both daemons and meets the other run for them.
    let two = Some("xa:1,xb:1");
    connect_accept_across_runs((2, two), (1, None), "ompi5.xrun.connect2");
    // The connecting side on two nodes, the accepting side on one.
    connect_accept_across_runs((1, None), (2, two), "ompi5.xrun.connect3");
}

// ---- pmix-rs clients under prterun ------------------------------------------------------

/// `prterun -n <n> <program> <args>` on loopback only, its server handing out `gds` (`None`:
/// its default, `shmem2,hash`).
fn under_prterun(gds: Option<&str>, n: u32, program: &Path, args: &[&str]) -> (String, Output) {
    under_prterun_with(gds, &[], n, program, args)
}

/// [`under_prterun`] with prterun's `options` too.
fn under_prterun_with(
    gds: Option<&str>,
    options: &[&str],
    n: u32,
    program: &Path,
    args: &[&str],
) -> (String, Output) {
    let prterun = ompi5_tool("prterun");
    let program = program.to_string_lossy();
    let n = n.to_string();
    let mut all = vec!["--allow-run-as-root", "--oversubscribe"];
    all.extend_from_slice(options);
    all.extend_from_slice(&["-n", &n, &program]);
    all.extend_from_slice(args);
    let what = format!(
        "PMIX_MCA_gds={} prterun {}",
        gds.unwrap_or("(default)"),
        all.join(" ")
    );
    let mut cmd: Command = in_private_network(&prterun, &all);
    if let Some(g) = gds {
        cmd.env("PMIX_MCA_gds", g);
    }
    let out = Running::start(cmd, &what).finish(Instant::now() + DEADLINE, &what);
    (what, out)
}

/// A recoverable job under prterun (`--runtime-options recoverable,notifyerrors`, what `cargo
/// xtask bench --recovery` runs): rank 3 of 4 exits 3 without finalize; PRRTE tells the
/// others with `ERR_EXIT_NONZERO_TERM` naming it and its exit code (and sends no
/// `EVENT_PROC_TERMINATED`: waiting for that one times out), they fence among themselves, and
/// prterun ends with the rank's status.
#[test]
fn pmix_rs_survivors_under_prterun_are_told_of_a_failed_rank() {
    let test_client = workspace_bin("pmix-test-client");
    let options = ["--runtime-options", "recoverable,notifyerrors"];
    let args = ["recovery", "3", "3", "timed", "exit-nonzero"];
    let (what, out) = under_prterun_with(None, &options, 4, &test_client, &args);
    assert_no_pmix_error(&what, &out);
    assert_code(&what, &out, 3);
    for rank in 0..3 {
        for said in ["told rank 3 ended with 3", "survivors' fence done"] {
            let line = format!("rank {rank}: {said}");
            assert!(
                out.stdout.lines().any(|l| l == line),
                "{what}: no {line:?}\n{out:#?}"
            );
        }
    }
    assert!(
        out.stdout.contains("rank 3: exiting at "),
        "{what}: {out:#?}"
    );
}

#[test]
fn pmix_rs_clients_under_prterun_with_either_store_and_no_pmix_error() {
    let demo = {
        let profile = cargo_build(&["-p", "pmix-client", "--example", "demo"]);
        profile.join("examples").join("demo")
    };
    let oracle = workspace_bin("pmix-oracle-client");
    let test_client = workspace_bin("pmix-test-client");
    let control_client = workspace_bin("pmix-control-client");
    let scenarios = ["job", "modex", "modex-direct"];
    for gds in [None, Some("hash")] {
        let (what, out) = under_prterun(gds, 2, &demo, &[]);
        assert_no_pmix_error(&what, &out);
        assert_code(&what, &out, 0);
        assert_lines(
            &out,
            &what,
            "rank",
            (0..2)
                .map(|r| format!("rank {r} of 2: checked 1 peers"))
                .collect(),
        );
        let (what, out) = under_prterun(gds, 2, &oracle, &scenarios);
        assert_no_pmix_error(&what, &out);
        check_client_output(&out, &what, 2, &scenarios);
        // A get with GET_REFRESH_CACHE reads what a peer committed after it was cached.
        let (what, out) = under_prterun(gds, 3, &test_client, &["refresh"]);
        assert_no_pmix_error(&what, &out);
        assert_code(&what, &out, 0);
        assert_lines(&out, &what, "ok", vec!["ok".to_owned(); 3]);
        // Groups with context ids, constructed and destructed through its OpenPMIx 5 server.
        let (what, out) = under_prterun(gds, 3, &test_client, &["groups"]);
        assert_no_pmix_error(&what, &out);
        assert_code(&what, &out, 0);
        assert_lines(&out, &what, "ok", vec!["ok".to_owned(); 3]);
        // Queries answered by PRRTE: its namespaces and the job's process table, in which
        // each process finds its own pid, program and host. (Its state there is not RUNNING
        // but the state PRRTE gives a process once it has connected, so it is not checked.)
        let (what, out) = under_prterun(gds, 2, &control_client, &["query"]);
        assert_no_pmix_error(&what, &out);
        assert_code(&what, &out, 0);
        let mut rows: Vec<String> = out
            .stdout
            .lines()
            .filter(|l| l.starts_with("query "))
            .map(|l| l.split(" own_state=").next().unwrap_or(l).to_owned())
            .collect();
        rows.sort_unstable();
        let want: Vec<String> = (0..2)
            .map(|r| {
                format!("query rank={r} has_own_nspace=1 ptable=2 own_pid=1 own_exe=1 own_host=1")
            })
            .collect();
        assert_eq!(rows, want, "{what}: {out:#?}");
    }
}
