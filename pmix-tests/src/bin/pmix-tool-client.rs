//! `openpmix/pmix_tool.c` on the Rust `Tool`, with the same output lines (`tests/tools.rs`):
//!
//! `pmix-tool-client pid PID | nspace NSPACE | uri URI | system` attaches to the server so
//! found, prints `tool me=<nspace>.<rank>`, one `tool job=<nspace> rank=<r> pid=<pid>
//! host=<host> exe=<executable> state=<state>` line per process of the first job the server
//! lists that is not the tool's, then `tool finalized`. A failure prints
//! `FAIL rank=-1: <what>` on stderr and exits 2.

use std::process::ExitCode;

use pmix_client::tool::{Attach, Tool};
use pmix_client::{Info, Value, attr};

fn run(args: &[String]) -> Result<(), String> {
    let how = match args {
        [w] if w == "system" => Attach::System,
        [w, v] if w == "pid" => Attach::Pid(v.parse().map_err(|_| format!("bad pid {v:?}"))?),
        [w, v] if w == "nspace" => Attach::Nspace(v.clone()),
        [w, v] if w == "uri" => Attach::Uri(v.clone()),
        _ => {
            return Err(
                "usage: pmix-tool-client pid PID | nspace NSPACE | uri URI | system".into(),
            );
        }
    };
    let mut tool = Tool::init(how).map_err(|e| format!("PMIx_tool_init (Tool::init): {e}"))?;
    let me = tool.proc().cloned().ok_or("no name")?;
    println!("tool me={}.{}", me.nspace, me.rank.0);
    let names = tool
        .query_keys(&[attr::QUERY_NAMESPACES], Vec::new())
        .map_err(|e| format!("query namespaces: {e}"))?;
    let list = names
        .iter()
        .find(|i| i.key.as_str() == attr::QUERY_NAMESPACES)
        .and_then(|i| i.value.as_str())
        .ok_or("no namespaces in the answer")?;
    let job = list
        .split(',')
        .find(|n| !n.is_empty() && *n != me.nspace.as_str())
        .ok_or("no job among the namespaces")?
        .to_owned();
    let table = tool
        .query_keys(
            &[attr::QUERY_PROC_TABLE],
            vec![Info::attr(attr::NSPACE, job.as_str())],
        )
        .map_err(|e| format!("query the process table of {job}: {e}"))?;
    let rows = table
        .iter()
        .find(|i| i.key.as_str() == attr::QUERY_PROC_TABLE)
        .and_then(|i| match &i.value {
            Value::DataArray(a) => Some(a.items()),
            _ => None,
        })
        .ok_or("no process table in the answer")?;
    for row in rows {
        let Value::ProcInfo(p) = row else {
            return Err(format!(
                "a process table entry that is no PROC_INFO: {row:?}"
            ));
        };
        println!(
            "tool job={} rank={} pid={} host={} exe={} state={}",
            p.proc.nspace, p.proc.rank.0, p.pid, p.hostname, p.executable_name, p.state.0
        );
    }
    tool.finalize().map_err(|e| format!("finalize: {e}"))?;
    println!("tool finalized");
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
