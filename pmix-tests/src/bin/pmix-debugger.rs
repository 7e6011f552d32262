//! A debugger on the Rust `Tool` (`tests/debugger.rs`; `openpmix/pmix_debugger.c` is its
//! libpmix twin, with the same lines):
//!
//! `pmix-debugger PID [spawn N PROGRAM ARGS...]` attaches to the pmixrun of that pid,
//! registers for `READY_FOR_DEBUG` and `EVENT_JOB_END`, with `spawn` starts a job of `N`
//! processes of `PROGRAM ARGS` held in init (`PMIx_Spawn` with `DEBUG_STOP_IN_INIT`) and
//! prints `debugger spawned job=<nspace>`, waits for a job held in init (that one, if
//! spawned) to be ready and prints
//! `debugger ready job=<nspace>`, one `debugger proc rank=<r> pid=<pid>` line per process
//! (its process table), then `debugger waiting`, and reads one command from stdin:
//!
//! - `daemons N PROGRAM ARGS...`: spawns `N` debugger daemons for the job (`PMIx_Spawn` with
//!   `DEBUG_TARGET` the job and `DEBUG_DAEMONS_PER_NODE` N), prints
//!   `debugger daemons job=<nspace>`, and reads the next command;
//! - `co-daemons PROGRAM ARGS...`: spawns debugger daemons as OpenPMIx's `debugger` example
//!   does (`MAPBY ppr:1:node`, `DEBUGGER_DAEMONS`, `DEBUG_JOB` the job's namespace, an
//!   application with no process count), prints `debugger daemons job=<nspace>`;
//! - `release`: sends `DEBUGGER_RELEASE` to the job, prints `debugger released`;
//! - `kill`: kills the job (`PMIx_Job_control`, `JOB_CTRL_KILL`), prints `debugger killed`;
//!
//! then waits for the job's end (`debugger job-end job=<nspace>`), finalizes and prints
//! `debugger finalized`. At the end of stdin it exits 3 without a word to the server (a
//! debugger that dies). A failure prints `FAIL rank=-1: <what>` on stderr and exits 2.

use std::io::BufRead;
use std::process::ExitCode;
use std::time::Duration;

use pmix_client::tool::{Attach, Tool};
use pmix_client::{Info, Nspace, Proc, Rank, Status, Value, attr};

/// How long each wait for the server may take.
const WAIT: Duration = Duration::from_secs(60);

fn nspace_of(info: &[Info]) -> Option<String> {
    info.iter()
        .find(|i| i.key.as_str() == attr::NSPACE)
        .and_then(|i| i.value.as_str())
        .map(str::to_owned)
}

/// Spawns `n` processes of `argv` with `job_info`; their namespace.
fn spawn(tool: &mut Tool, job_info: Vec<Info>, n: u32, argv: &[String]) -> Result<String, String> {
    let cmd = argv.first().ok_or("spawn: no program")?;
    let app = pmix_client::App {
        cmd: cmd.clone(),
        argv: argv.to_vec(),
        env: Vec::new(),
        cwd: String::new(),
        maxprocs: n,
        info: Vec::new(),
    };
    let ns = tool
        .spawn(job_info, vec![app])
        .map_err(|e| format!("spawn: {e}"))?;
    Ok(ns.to_string())
}

fn run(pid: u32, spawning: &[String]) -> Result<ExitCode, String> {
    let mut tool = Tool::init(Attach::Pid(pid)).map_err(|e| format!("Tool::init: {e}"))?;
    tool.register_events(&[Status::READY_FOR_DEBUG, Status::EVENT_JOB_END])
        .map_err(|e| format!("register_events: {e}"))?;
    let spawned = match spawning {
        [] => None,
        [w, n, argv @ ..] if w == "spawn" => {
            let n = n.parse().map_err(|_| format!("bad count {n:?}"))?;
            let stop = vec![Info::attr(attr::DEBUG_STOP_IN_INIT, true)];
            let ns = spawn(&mut tool, stop, n, argv)?;
            println!("debugger spawned job={ns}");
            Some(ns)
        }
        other => return Err(format!("unknown arguments {other:?}")),
    };
    let job = loop {
        let ready = tool
            .wait_event(Status::READY_FOR_DEBUG, WAIT)
            .map_err(|e| format!("waiting for READY_FOR_DEBUG: {e}"))?;
        let job = nspace_of(&ready.info).ok_or("READY_FOR_DEBUG without NSPACE")?;
        if spawned.as_ref().is_none_or(|s| *s == job) {
            break job;
        }
    };
    println!("debugger ready job={job}");
    let table = tool
        .query_keys(
            &[attr::QUERY_PROC_TABLE],
            vec![Info::attr(attr::NSPACE, job.as_str())],
        )
        .map_err(|e| format!("query the process table: {e}"))?;
    let rows = table
        .iter()
        .find_map(|i| match &i.value {
            Value::DataArray(a) => Some(a.items().to_vec()),
            _ => None,
        })
        .ok_or("no process table")?;
    for row in rows {
        if let Value::ProcInfo(p) = row {
            println!("debugger proc rank={} pid={}", p.proc.rank.0, p.pid);
        }
    }
    println!("debugger waiting");
    let ns = Nspace::new(job.clone()).map_err(|e| e.to_string())?;
    let all = Proc::new(ns.clone(), Rank::WILDCARD);
    loop {
        let mut line = String::new();
        let n = std::io::stdin()
            .lock()
            .read_line(&mut line)
            .map_err(|e| format!("stdin: {e}"))?;
        if n == 0 {
            // Gone without a word: no finalize, no release.
            std::process::exit(3);
        }
        let words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        match words.first().map(String::as_str) {
            Some("release") => {
                tool.release_job(&ns).map_err(|e| format!("release: {e}"))?;
                println!("debugger released");
                break;
            }
            Some("kill") => {
                tool.job_control(
                    std::slice::from_ref(&all),
                    vec![Info::attr(attr::JOB_CTRL_KILL, true)],
                )
                .map_err(|e| format!("job control: {e}"))?;
                println!("debugger killed");
                break;
            }
            Some("daemons") => {
                let [_, n, argv @ ..] = words.as_slice() else {
                    return Err("daemons N PROGRAM ARGS...".into());
                };
                let directives = vec![
                    Info::attr(attr::DEBUG_TARGET, all.clone()),
                    Info::attr(
                        attr::DEBUG_DAEMONS_PER_NODE,
                        n.parse::<u16>().map_err(|_| format!("bad count {n:?}"))?,
                    ),
                ];
                let daemons = spawn(&mut tool, directives, 1, argv)?;
                println!("debugger daemons job={daemons}");
            }
            Some("co-daemons") => {
                let directives = vec![
                    Info::attr(attr::MAPBY, "ppr:1:node"),
                    Info::attr(attr::DEBUGGER_DAEMONS, true),
                    Info::attr(attr::DEBUG_JOB, all.nspace.as_str()),
                ];
                let daemons = spawn(&mut tool, directives, 0, &words[1..])?;
                println!("debugger daemons job={daemons}");
            }
            _ => return Err(format!("unknown command {line:?}")),
        }
    }
    loop {
        let ev = tool
            .wait_event(Status::EVENT_JOB_END, WAIT)
            .map_err(|e| format!("waiting for the job's end: {e}"))?;
        if nspace_of(&ev.info).as_deref() == Some(job.as_str()) {
            break;
        }
    }
    println!("debugger job-end job={job}");
    tool.finalize().map_err(|e| format!("finalize: {e}"))?;
    println!("debugger finalized");
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let pid = args.first().and_then(|p| p.parse().ok());
    let Some(pid) = pid else {
        eprintln!("FAIL rank=-1: usage: pmix-debugger PID [spawn N PROGRAM ARGS...]");
        return ExitCode::from(2);
    };
    match run(pid, &args[1..]) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("FAIL rank=-1: {e}");
            ExitCode::from(2)
        }
    }
}
