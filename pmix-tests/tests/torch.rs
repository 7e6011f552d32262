//! PyTorch users: `pmixrun -n N python3 train.py` runs a `torch.distributed` job (backend gloo,
//! `init_method="env://"`) to the same end as `torchrun`, with no flags. torchrun is the
//! oracle, run in the same test: the same program under both must print the same lines (the
//! trained weights, an all-reduce, and the variables torchrun sets that scripts read). The
//! venv is `scripts/install-test-deps.sh`'s: torch from PyPI at `$PMIXRS_TORCH` (default
//! /opt/torch).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pmix_tests::{Output, Running, assert_ok, pmixrun_bin, sorted_lines, stream_lines};

/// A torch job of four ranks takes 5-10 s here (each imports torch, about 1.5 s of CPU).
const DEADLINE: Duration = Duration::from_secs(120);

/// The job (`pmix-tests/py/torch_train.py`, which `cargo xtask bench --torch` times too).
const TRAIN: &str = include_str!("../py/torch_train.py");

/// Rank 2 leaves with status 3 right after joining; the others wait in an all-reduce that
/// cannot complete without it.
const FAIL: &str = r#"import sys
import torch
import torch.distributed as dist
dist.init_process_group("gloo", init_method="env://")
if dist.get_rank() == 2:
    sys.exit(3)
t = torch.ones(1)
dist.all_reduce(t)
print("survived", flush=True)
"#;

/// Every rank says it is ready with its pid; rank 0 then waits in a barrier the others never
/// join (in C++, where Python's SIGINT handler cannot run until it returns), the others sleep.
const HANG: &str = r#"import os, time
import torch.distributed as dist
dist.init_process_group("gloo", init_method="env://")
print("ready", os.getpid(), flush=True)
if dist.get_rank() == 0:
    dist.barrier()
else:
    time.sleep(1000)
"#;

/// The venv's interpreter and torchrun, checked to import torch.
fn torch_venv() -> (PathBuf, PathBuf) {
    let prefix =
        std::env::var_os("PMIXRS_TORCH").map_or_else(|| "/opt/torch".into(), PathBuf::from);
    let python = prefix.join("bin").join("python");
    let has = Command::new(&python)
        .args(["-c", "import torch.distributed"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has,
        "no torch in {}: run `bash scripts/install-test-deps.sh` as root",
        prefix.display()
    );
    (python, prefix.join("bin").join("torchrun"))
}

/// `text` written as a script for one test (tests run in parallel).
fn script(name: &str, text: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("pmixrs-torch.{}.{name}.py", std::process::id()));
    std::fs::write(&path, text).expect("writing a torch script");
    path
}

/// `program args` with its output piped, no input, and none of the variables a launcher
/// around the test run would have set (each launcher under test sets its own).
fn command(program: &Path, args: &[&std::ffi::OsStr]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_remove("PMIXRS_NAMESERVER")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for v in [
        "MASTER_ADDR",
        "MASTER_PORT",
        "RANK",
        "WORLD_SIZE",
        "LOCAL_RANK",
    ] {
        cmd.env_remove(v);
    }
    cmd
}

fn run(cmd: Command, what: &str) -> Output {
    Running::start(cmd, what).finish(Instant::now() + DEADLINE, what)
}

/// What the job printed that must not depend on the launcher: the variables and the
/// training's end, each rank's lines sorted.
fn job_lines(out: &Output) -> Vec<String> {
    let mut lines: Vec<String> = sorted_lines(out, "env")
        .into_iter()
        .chain(sorted_lines(out, "torch"))
        .map(str::to_owned)
        .collect();
    lines.sort_unstable();
    lines
}

fn os(s: &str) -> &std::ffi::OsStr {
    s.as_ref()
}

#[test]
fn a_torch_job_under_pmixrun_ends_as_under_torchrun_on_one_node() {
    let (python, torchrun) = torch_venv();
    let train = script("one-node", TRAIN);
    // `--standalone`: its rendezvous on a port it finds free (the default, 29500, is shared
    // by every torchrun of the machine).
    let what = "torchrun --standalone --nproc-per-node 4 train.py";
    let oracle = run(
        command(
            &torchrun,
            &[
                os("--standalone"),
                os("--nproc-per-node"),
                os("4"),
                train.as_os_str(),
            ],
        ),
        what,
    );
    assert_ok(&oracle, what);
    let what = "pmixrun -n 4 python train.py";
    let ours = run(
        command(
            pmixrun_bin(),
            &[os("-n"), os("4"), python.as_os_str(), train.as_os_str()],
        ),
        what,
    );
    assert_ok(&ours, what);
    let _ = std::fs::remove_file(&train);
    let want = job_lines(&oracle);
    assert_eq!(want.len(), 8, "four ranks, two lines each: {oracle:#?}");
    assert_eq!(job_lines(&ours), want, "{what}: {ours:#?}");
}

/// Two logical nodes of two ranks each against two torchrun agents of two ranks each (a
/// static rendezvous on this machine): the same variables (node index, nodes, local sizes)
/// and the same training.
#[test]
fn a_torch_job_on_two_logical_nodes_ends_as_under_two_torchrun_agents() {
    let (python, torchrun) = torch_venv();
    let train = script("two-nodes", TRAIN);
    let port = std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
        .to_string();
    let agent = |node: &str| {
        let args = [
            "--nnodes",
            "2",
            "--node-rank",
            node,
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            &port,
            "--nproc-per-node",
            "2",
        ];
        let mut all: Vec<&std::ffi::OsStr> = args.iter().map(|a| os(a)).collect();
        all.push(train.as_os_str());
        Running::start(command(&torchrun, &all), "torchrun agent")
    };
    let (first, second) = (agent("0"), agent("1"));
    let end = Instant::now() + DEADLINE;
    let (first, second) = (
        first.finish(end, "torchrun --node-rank 0"),
        second.finish(end, "torchrun --node-rank 1"),
    );
    assert_ok(&first, "torchrun --node-rank 0");
    assert_ok(&second, "torchrun --node-rank 1");
    let mut want = job_lines(&first);
    want.extend(job_lines(&second));
    want.sort_unstable();
    assert_eq!(want.len(), 8, "{first:#?} {second:#?}");

    let what = "pmixrun --launcher local --host a:2,b:2 -n 4 python train.py";
    let args = ["--launcher", "local", "--host", "a:2,b:2", "-n", "4"];
    let mut all: Vec<&std::ffi::OsStr> = args.iter().map(|a| os(a)).collect();
    all.extend([python.as_os_str(), train.as_os_str()]);
    let ours = run(command(pmixrun_bin(), &all), what);
    assert_ok(&ours, what);
    let _ = std::fs::remove_file(&train);
    assert_eq!(job_lines(&ours), want, "{what}: {ours:#?}");
}

/// A rank that fails ends the job at once (the others wait in an all-reduce that will never
/// complete), with the rank's status and a message naming it.
#[test]
fn a_failing_torch_rank_ends_the_job_with_its_status() {
    let (python, _) = torch_venv();
    let fail = script("fail", FAIL);
    let what = "pmixrun -n 4 python fail.py";
    let out = run(
        command(
            pmixrun_bin(),
            &[os("-n"), os("4"), python.as_os_str(), fail.as_os_str()],
        ),
        what,
    );
    let _ = std::fs::remove_file(&fail);
    assert_eq!(out.status.code(), Some(3), "{what}: {out:#?}");
    assert!(
        out.stderr.contains("pmixrun: rank 2 exited with status 3"),
        "{what}: {out:#?}"
    );
    assert!(!out.stdout.contains("survived"), "{what}: {out:#?}");
}

/// Ctrl-C (SIGINT to pmixrun) ends every rank, the one blocked in C++ included, and pmixrun
/// exits 130.
#[test]
fn ctrl_c_ends_every_torch_rank() {
    let (python, _) = torch_venv();
    let hang = script("hang", HANG);
    let mut child = command(
        pmixrun_bin(),
        &[os("-n"), os("2"), python.as_os_str(), hang.as_os_str()],
    )
    .spawn()
    .expect("starting pmixrun");
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    let (lines, rest) = stream_lines(child.stdout.take());
    let end = Instant::now() + DEADLINE;
    let mut ranks = Vec::new();
    while ranks.len() < 2 {
        match lines.recv_deadline(end) {
            Ok(l) => {
                if let Some(p) = l.strip_prefix("ready ") {
                    ranks.push(p.parse::<i32>().expect("a pid"));
                }
            }
            Err(e) => {
                let _ = kill(pid, Signal::SIGKILL);
                panic!("the torch job never got ready: {e}");
            }
        }
    }
    kill(pid, Signal::SIGINT).expect("signalling pmixrun");
    let out = Running::with_stdout(child, rest).finish(Instant::now() + DEADLINE, "pmixrun");
    let _ = std::fs::remove_file(&hang);
    assert_eq!(out.status.code(), Some(130), "{out:#?}");
    // pmixrun waits for its ranks before it exits: none is left.
    for r in ranks {
        assert!(
            !Path::new(&format!("/proc/{r}")).exists() || is_zombie_of_another(r),
            "rank pid {r} outlived pmixrun"
        );
    }
}

/// A pid that still names a process only because it is a zombie nobody of ours reaps.
fn is_zombie_of_another(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}
