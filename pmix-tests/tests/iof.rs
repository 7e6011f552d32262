//! I/O forwarding through `pmixrun` (`docs/TOOLS.md`, "I/O forwarding"): python3-pmix, libpmix
//! 4.2, libpmix 5.0.11 and Rust tools pull a held job's output and see each rank's lines on
//! the right channel with the right source; a tool that stops reading holds up nobody; tools
//! push input to chosen ranks; `--stdin` gives pmixrun's own stdin to rank 0, all ranks, one
//! rank or none. No sleeps: ranks wait on FIFOs or on their stdin, tools say when they are
//! ready, and every run has a deadline.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pmix_tests::{
    HeldJob, Output, Running, Streamed, ToolLib as Lib, assert_ok, assert_pulled_from_prterun,
    iof_lines, pmixrun_bin, tool_command,
};

/// For one run: each takes well under a second.
const DEADLINE: Duration = Duration::from_secs(60);

/// The IOF tool of `lib` with `args` (`pull PID NSPACE NLINES`, `push ...`, `stall ...`).
fn tool(lib: Lib, args: &[&str]) -> Command {
    tool_command(lib, "pmix_iof_tool", "pmix-iof-tool", args)
}

/// A held two-rank job; the tool of `lib` pulls its output, then each rank writes a line of
/// its own and `fed` to stdout and `bye` to stderr: the tool must see the six lines with
/// their source ranks and channels (and deregister, except python3-pmix's, and finalize while
/// the job runs), and pmixrun must still print them itself.
fn pull_from(lib: Lib) {
    pull_from_run(lib, &[]);
}

/// [`pull_from`] a run with `args` too.
fn pull_from_run(lib: Lib, args: &[&str]) {
    let end = Instant::now() + DEADLINE;
    let args: Vec<&str> = ["--stdin", "none"].iter().chain(args).copied().collect();
    let mut job = HeldJob::start_echoing(pmixrun_bin(), &args, 2, end);
    let (pid, nspace) = (job.pid.to_string(), format!("rs-pmixrun-{}", job.pid));
    let what = format!("{lib:?} tool pulling from pmixrun {}", args.join(" "));
    let t = Streamed::start(tool(lib, &["pull", &pid, &nspace, "6"]), &what).wait_for(
        "tool pulled",
        1,
        end,
        &what,
    );
    job.feed(|r| format!("line {r} for the tools\n"), end);
    let got = t.finish(end, &what);
    job.wait_fed(end);
    let out = job.release(end);
    assert_ok(&got, &what);
    let s = |x: &str| x.to_owned();
    assert_eq!(
        iof_lines(&got),
        vec![
            (s("0"), s("stderr"), s("bye rank=0")),
            (s("0"), s("stdout"), s("fed rank=0")),
            (s("0"), s("stdout"), s("line 0 for the tools")),
            (s("1"), s("stderr"), s("bye rank=1")),
            (s("1"), s("stdout"), s("fed rank=1")),
            (s("1"), s("stdout"), s("line 1 for the tools")),
        ],
        "{what}: {got:#?}"
    );
    assert!(got.stdout.contains("tool finalized\n"), "{what}: {got:#?}");
    assert_ok(&out, "the held job");
    for r in 0..2 {
        assert!(
            out.stdout.contains(&format!("line {r} for the tools\n")),
            "{out:#?}"
        );
        assert!(out.stderr.contains(&format!("bye rank={r}\n")), "{out:#?}");
    }
}

#[test]
fn python3_pmix_tool_pulls_each_ranks_output() {
    pull_from(Lib::Python);
}

#[test]
fn libpmix_4_2_tool_pulls_each_ranks_output() {
    pull_from(Lib::C);
}

#[test]
fn libpmix_5_0_tool_pulls_each_ranks_output() {
    pull_from(Lib::CWheel);
}

#[test]
fn rust_tool_pulls_each_ranks_output() {
    pull_from(Lib::Rust);
}

/// The root of a run on two logical nodes (one rank each) hands every node's output to the
/// tools that pulled it (`docs/TOOLS.md`, "Multi-node runs").
const TWO_NODES: [&str; 4] = ["--launcher", "local", "--host", "n[1-2]:1"];

#[test]
fn python3_pmix_tool_pulls_each_nodes_output_from_the_root() {
    pull_from_run(Lib::Python, &TWO_NODES);
}

#[test]
fn libpmix_4_2_tool_pulls_each_nodes_output_from_the_root() {
    pull_from_run(Lib::C, &TWO_NODES);
}

#[test]
fn rust_tool_pulls_each_nodes_output_from_the_root() {
    pull_from_run(Lib::Rust, &TWO_NODES);
}

/// A tool that pulls and then reads nothing, and one killed after its pull: the job writes
/// far more than the server queues for a tool (16 MiB) and still ends well, with all of its
/// output on pmixrun's stdout.
#[test]
fn a_tool_that_stops_reading_or_dies_holds_up_nobody() {
    let end = Instant::now() + DEADLINE;
    let mut job = HeldJob::start_echoing(pmixrun_bin(), &["--stdin", "none"], 2, end);
    let (pid, nspace) = (job.pid.to_string(), format!("rs-pmixrun-{}", job.pid));
    let mut stalled = {
        let mut cmd = tool(Lib::Rust, &["stall", &pid, &nspace]);
        cmd.stdin(Stdio::piped());
        Streamed::start(cmd, "stalled tool").wait_for("tool stalled", 1, end, "stalled tool")
    };
    let mut dead = {
        let mut cmd = tool(Lib::Rust, &["stall", &pid, &nspace]);
        cmd.stdin(Stdio::piped());
        Streamed::start(cmd, "dying tool").wait_for("tool stalled", 1, end, "dying tool")
    };
    let _ = dead.child.kill();
    let _ = dead.child.wait();
    // 2 x 12 MiB of 1 KiB lines.
    const LINES: usize = 12 * 1024;
    let line = format!("{}\n", "x".repeat(1023));
    job.feed(|_| line.repeat(LINES), end);
    job.wait_fed(end);
    let out = job.release(end);
    assert_ok(&out, "the job beside a stalled tool");
    let n = out.stdout.lines().filter(|l| l.len() == 1023).count();
    assert_eq!(n, 2 * LINES, "pmixrun lost output");
    // The server did drop output for the stalled tool (its warning, which pmixrun logs).
    assert!(
        out.stderr.contains("a tool does not read its output"),
        "no output was dropped for the stalled tool: {}",
        out.stderr
    );
    // The stalled tool, told to go, finalizes (its queue drained or dropped) or is gone
    // with the server; either way it is not stuck.
    let _ = stalled.stdin().write_all(b"go");
    drop(stalled.child.stdin.take());
    let _ = stalled.finish(end, "the stalled tool");
}

/// `pmixrun -n 2 [--stdin MODE] sh -c 'read lines; say eof'`, fed "a\nb\n" then closed.
fn with_stdin(mode: Option<&str>) -> Output {
    with_stdin_on(&[], mode)
}

/// [`with_stdin`] with more options for pmixrun (`nodes`).
fn with_stdin_on(nodes: &[&str], mode: Option<&str>) -> Output {
    let end = Instant::now() + DEADLINE;
    let mut cmd = Command::new(pmixrun_bin());
    cmd.args(nodes);
    if let Some(m) = mode {
        cmd.args(["--stdin", m]);
    }
    cmd.args(["-n", "2", "sh", "-c"])
        .arg(concat!(
            r#"while read l; do echo "got rank=$PMIX_RANK line=$l"; done; "#,
            r#"echo "eof rank=$PMIX_RANK""#
        ))
        .env_remove("PMIXRS_NAMESERVER")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut run = Streamed::start(cmd, "pmixrun with input");
    let _ = run.stdin().write_all(b"a\nb\n");
    drop(run.child.stdin.take());
    let out = run.finish(end, "pmixrun with input");
    assert_ok(&out, &format!("--stdin {mode:?}"));
    out
}

fn got_lines(out: &Output) -> Vec<&str> {
    let mut v: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("got ") || l.starts_with("eof "))
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn pmixrun_gives_its_stdin_to_rank_0_by_default_and_as_stdin_says() {
    let eof = ["eof rank=0", "eof rank=1"];
    let with = |got: &[&'static str]| {
        let mut v: Vec<&str> = got.iter().copied().chain(eof).collect();
        v.sort_unstable();
        v
    };
    let out = with_stdin(None);
    assert_eq!(
        got_lines(&out),
        with(&["got rank=0 line=a", "got rank=0 line=b"]),
        "{out:#?}"
    );
    let out = with_stdin(Some("1"));
    assert_eq!(
        got_lines(&out),
        with(&["got rank=1 line=a", "got rank=1 line=b"]),
        "{out:#?}"
    );
    let out = with_stdin(Some("all"));
    let all = [
        "got rank=0 line=a",
        "got rank=0 line=b",
        "got rank=1 line=a",
        "got rank=1 line=b",
    ];
    assert_eq!(got_lines(&out), with(&all), "{out:#?}");
    // None: both read end of file at once, and nothing of pmixrun's input.
    let out = with_stdin(Some("none"));
    assert_eq!(got_lines(&out), with(&[]), "{out:#?}");
}

/// Across two logical nodes (one daemon each, `--launcher local`), pmixrun's stdin goes down
/// the tree to the rank of the other node, or to both.
#[test]
fn pmixrun_gives_its_stdin_to_ranks_on_other_nodes() {
    let nodes = ["--launcher", "local", "--host", "n1,n2", "--map-by", "node"];
    let out = with_stdin_on(&nodes, Some("1"));
    assert_eq!(
        got_lines(&out),
        vec![
            "eof rank=0",
            "eof rank=1",
            "got rank=1 line=a",
            "got rank=1 line=b"
        ],
        "{out:#?}"
    );
    let out = with_stdin_on(&nodes, Some("all"));
    assert_eq!(
        got_lines(&out),
        vec![
            "eof rank=0",
            "eof rank=1",
            "got rank=0 line=a",
            "got rank=0 line=b",
            "got rank=1 line=a",
            "got rank=1 line=b",
        ],
        "{out:#?}"
    );
}

/// Tools push a line to one rank each and end its input, while pmixrun's own stdin stays open
/// and silent: each rank echoes its tool's line, then reads end of file.
#[test]
fn tools_push_input_to_the_ranks_they_choose() {
    let end = Instant::now() + DEADLINE;
    let mut cmd = Command::new(pmixrun_bin());
    cmd.args(["--stdin", "all", "-n", "3", "sh", "-c"])
        .arg(concat!(
            r#"echo "ready rank=$PMIX_RANK"; "#,
            r#"while read l; do echo "got rank=$PMIX_RANK line=$l"; done; "#,
            r#"echo "eof rank=$PMIX_RANK""#
        ))
        .env_remove("PMIXRS_NAMESERVER")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let run = Streamed::start(cmd, "pmixrun").wait_for("ready rank=", 3, end, "pmixrun");
    let pid = run.child.id().to_string();
    let nspace = format!("rs-pmixrun-{pid}");
    for (lib, rank) in [(Lib::Rust, "2"), (Lib::C, "0"), (Lib::CWheel, "1")] {
        let text = format!("from-{lib:?}");
        let what = format!("{lib:?} tool pushing to rank {rank}");
        let cmd = tool(lib, &["push", &pid, &nspace, rank, &text]);
        let out = Running::start(cmd, &what).finish(end, &what);
        assert_ok(&out, &what);
        assert!(out.stdout.contains("tool pushed"), "{what}: {out:#?}");
    }
    let out = run.finish(end, "pmixrun");
    assert_ok(&out, "pmixrun fed by tools");
    assert_eq!(
        got_lines(&out),
        vec![
            "eof rank=0",
            "eof rank=1",
            "eof rank=2",
            "got rank=0 line=from-C",
            "got rank=1 line=from-CWheel",
            "got rank=2 line=from-Rust",
        ],
        "{out:#?}"
    );
}

/// The Rust `Tool` pulls over the OpenPMIx wire from PRRTE's `prterun` (OpenPMIx 5.0.11):
/// the reference server caches output for late joiners, so the tool also gets the `held`
/// lines written before its pull (a pmix-rs server keeps none), then the rest, each with its
/// source and channel.
#[test]
fn rust_tool_pulls_from_prterun() {
    let prterun = std::path::Path::new("/opt/ompi5/bin/prterun");
    assert!(
        prterun.is_file(),
        "{} is missing: {}",
        prterun.display(),
        pmix_tests::INSTALL_TEST_DEPS
    );
    let end = Instant::now() + DEADLINE;
    let mut job =
        HeldJob::start_echoing(prterun, &["--allow-run-as-root", "--oversubscribe"], 2, end);
    let pid = job.pid.to_string();
    let host = nix::unistd::gethostname()
        .expect("gethostname")
        .to_string_lossy()
        .into_owned();
    let first = format!("prterun-{host}-{pid}@1");
    let what = "Rust tool pulling from prterun";
    let t = Streamed::start(tool(Lib::Rust, &["pull", &pid, &first, "8"]), what).wait_for(
        "tool pulled",
        1,
        end,
        what,
    );
    job.feed(|r| format!("line {r} for the tools\n"), end);
    let got = t.finish(end, what);
    job.wait_fed(end);
    let out = job.release(end);
    assert_ok(&got, what);
    assert_pulled_from_prterun(&got, what);
    assert_ok(&out, "prterun's job");
}

/// `pmixps --tail NSPACE` follows a held job's output (its stderr merged into stdout here):
/// each rank's lines with `[rank] ` in front, and it ends when the job does.
#[test]
fn pmixps_tail_follows_a_jobs_output_until_it_ends() {
    let pmixps = pmix_tests::cargo_build(&["-p", "pmixps", "--bin", "pmixps"]).join("pmixps");
    let end = Instant::now() + DEADLINE;
    let mut job = HeldJob::start_echoing(pmixrun_bin(), &["--stdin", "none"], 2, end);
    let nspace = format!("rs-pmixrun-{}", job.pid);
    let mut cmd = Command::new("sh");
    cmd.args(["-c", r#"exec "$0" --tail "$1" 2>&1"#])
        .arg(&pmixps)
        .arg(&nspace)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let tail = Streamed::start(cmd, "pmixps --tail").wait_for(
        "pmixps: following",
        1,
        end,
        "pmixps --tail",
    );
    job.feed(|r| format!("line {r} for the tools\n"), end);
    job.wait_fed(end);
    let out = job.release(end);
    assert_ok(&out, "the held job");
    let got = tail.finish(end, "pmixps --tail");
    assert_ok(&got, "pmixps --tail");
    for r in 0..2 {
        for line in [
            format!("[{r}] line {r} for the tools"),
            format!("[{r}] bye rank={r}"),
            format!("[{r}] fed rank={r}"),
        ] {
            assert!(
                got.stdout.lines().any(|l| l == line),
                "no {line:?}: {got:#?}"
            );
        }
    }
}
