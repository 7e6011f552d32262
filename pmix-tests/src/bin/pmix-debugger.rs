//! A debugger on the Rust `Tool` (`tests/debugger.rs`; `openpmix/pmix_debugger.c` is its
//! libpmix twin, with the same lines):
//!
//! `pmix-debugger PID` attaches to the pmixrun of that pid, registers for `READY_FOR_DEBUG`
//! and `EVENT_JOB_END`, waits for a job held in init to be ready and prints
//! `debugger ready job=<nspace>`, one `debugger proc rank=<r> pid=<pid>` line per process
//! (its process table), then `debugger waiting`, and reads one command from stdin:
//!
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

fn run(pid: u32) -> Result<ExitCode, String> {
    let mut tool = Tool::init(Attach::Pid(pid)).map_err(|e| format!("Tool::init: {e}"))?;
    tool.register_events(&[Status::READY_FOR_DEBUG, Status::EVENT_JOB_END])
        .map_err(|e| format!("register_events: {e}"))?;
    let ready = tool
        .wait_event(Status::READY_FOR_DEBUG, WAIT)
        .map_err(|e| format!("waiting for READY_FOR_DEBUG: {e}"))?;
    let job = nspace_of(&ready.info).ok_or("READY_FOR_DEBUG without NSPACE")?;
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
    let mut line = String::new();
    let n = std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| format!("stdin: {e}"))?;
    if n == 0 {
        // Gone without a word: no finalize, no release.
        std::process::exit(3);
    }
    let ns = Nspace::new(job.clone()).map_err(|e| e.to_string())?;
    match line.trim() {
        "release" => {
            tool.release_job(&ns).map_err(|e| format!("release: {e}"))?;
            println!("debugger released");
        }
        "kill" => {
            let all = [Proc::new(ns, Rank::WILDCARD)];
            tool.job_control(&all, vec![Info::attr(attr::JOB_CTRL_KILL, true)])
                .map_err(|e| format!("job control: {e}"))?;
            println!("debugger killed");
        }
        other => return Err(format!("unknown command {other:?}")),
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
    let pid = std::env::args().nth(1).and_then(|p| p.parse().ok());
    let Some(pid) = pid else {
        eprintln!("FAIL rank=-1: usage: pmix-debugger PID");
        return ExitCode::from(2);
    };
    match run(pid) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("FAIL rank=-1: {e}");
            ExitCode::from(2)
        }
    }
}
