//! `openpmix/pmix_iof_tool.c` on the Rust `Tool`, with the same lines (`tests/iof.rs`):
//!
//! `pmix-iof-tool pull PID NSPACE NLINES` pulls the stdout and stderr of every process of
//! NSPACE from the server of PID, prints `tool pulled`, then, once NLINES lines came (30 s at
//! most), `iof rank=<r> channel=<stdout|stderr> line=<line>` for each, deregisters, finalizes
//! and prints `tool finalized`.
//!
//! `pmix-iof-tool push PID NSPACE RANK TEXT` pushes `TEXT\n` to NSPACE:RANK's stdin, ends its
//! input, and prints `tool pushed`.
//!
//! `pmix-iof-tool stall PID NSPACE` pulls every process's output, prints `tool stalled`, and
//! then reads nothing until its stdin closes (a tool that stops reading must hold up nobody).
//!
//! A failure prints `FAIL rank=-1: <what>` on stderr and exits 2.

use std::io::Read;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pmix_client::tool::{Attach, Tool};
use pmix_client::{IofChannel, Nspace, Proc, Rank};

fn job(nspace: &str) -> Result<Nspace, String> {
    Nspace::new(nspace).map_err(|e| format!("namespace {nspace:?}: {e}"))
}

fn number<T: std::str::FromStr>(s: &str) -> Result<T, String> {
    s.parse().map_err(|_| format!("not a number: {s:?}"))
}

fn pull(tool: &mut Tool, nspace: &str, want: usize) -> Result<(), String> {
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    let all = [Proc::new(job(nspace)?, Rank::WILDCARD)];
    let channels = IofChannel(IofChannel::STDOUT.0 | IofChannel::STDERR.0);
    let pull = tool
        .iof_pull(&all, channels, Vec::new(), move |c| {
            let channel = match c.channel {
                IofChannel::STDOUT => "stdout",
                IofChannel::STDERR => "stderr",
                _ => "other",
            };
            let text = String::from_utf8_lossy(&c.data);
            let mut l = sink
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for line in text.lines() {
                l.push(format!(
                    "iof rank={} channel={channel} line={line}",
                    c.source.rank.0
                ));
            }
        })
        .map_err(|e| format!("iof_pull: {e}"))?;
    println!("tool pulled");
    let end = Instant::now() + Duration::from_secs(30);
    let count = || {
        lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    };
    while count() < want {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!("only {} of {want} lines came", count()));
        }
        tool.progress(left).map_err(|e| format!("progress: {e}"))?;
    }
    for l in lines
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
    {
        println!("{l}");
    }
    tool.iof_deregister(pull)
        .map_err(|e| format!("iof_deregister: {e}"))
}

fn run(args: &[String]) -> Result<(), String> {
    let (what, pid, rest) = match args {
        [w, pid, rest @ ..] => (w.as_str(), number::<u32>(pid)?, rest),
        _ => return Err("usage: pmix-iof-tool pull|push|stall PID NSPACE ...".into()),
    };
    let mut tool = Tool::init(Attach::Pid(pid)).map_err(|e| format!("Tool::init: {e}"))?;
    match (what, rest) {
        ("pull", [nspace, n]) => {
            pull(&mut tool, nspace, number(n)?)?;
            tool.finalize().map_err(|e| format!("finalize: {e}"))?;
            println!("tool finalized");
        }
        ("push", [nspace, rank, text]) => {
            let target = [Proc::new(job(nspace)?, Rank(number(rank)?))];
            tool.iof_push(&target, format!("{text}\n").as_bytes())
                .map_err(|e| format!("iof_push: {e}"))?;
            tool.iof_push_end(&target)
                .map_err(|e| format!("iof_push_end: {e}"))?;
            tool.finalize().map_err(|e| format!("finalize: {e}"))?;
            println!("tool pushed");
        }
        ("stall", [nspace]) => {
            let all = [Proc::new(job(nspace)?, Rank::WILDCARD)];
            tool.iof_pull(&all, IofChannel::ALL, Vec::new(), |_| {})
                .map_err(|e| format!("iof_pull: {e}"))?;
            println!("tool stalled");
            // Reads nothing from the server until told to go.
            let _ = std::io::stdin().read_to_end(&mut Vec::new());
        }
        _ => return Err(format!("bad arguments for {what}: {rest:?}")),
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("FAIL rank=-1: {e}");
            ExitCode::from(2)
        }
    }
}
