//! The listing: every reachable pmixrun, every job it serves, every process of each.

use std::io::Write;
use std::path::PathBuf;

use pmix_client::tool::{ServerFile, Tool, ToolOptions};
use pmix_client::{Error, Info, Value, attr};

/// What to list.
pub(crate) struct Listing {
    /// Only these pmixruns (all when empty).
    pub(crate) pids: Vec<u32>,
    pub(crate) tmpdir: Option<PathBuf>,
    pub(crate) header: bool,
}

/// One line of the table.
struct Row {
    launcher: u32,
    job: String,
    rank: u32,
    pid: u32,
    state: String,
    host: String,
    program: String,
}

/// Lists as `what` says on stdout; false when a pmixrun asked for by pid was not listed.
pub(crate) fn run(what: &Listing) -> Result<bool, Error> {
    let mut tool = Tool::init_with(ToolOptions {
        tmpdir: what.tmpdir.clone(),
        ..ToolOptions::default()
    })?;
    // pmix-rs servers only (a native socket): pmixrun's, not PRRTE's.
    let servers: Vec<ServerFile> = tool
        .list_servers()
        .into_iter()
        .filter(|s| s.native.is_some())
        .filter(|s| what.pids.is_empty() || what.pids.contains(&s.pid))
        .collect();
    let mut rows = Vec::new();
    let mut listed = Vec::new();
    for s in &servers {
        match rows_of(&mut tool, s) {
            Ok(mut r) => {
                rows.append(&mut r);
                listed.push(s.pid);
            }
            Err(e) => eprintln!("pmixps: pmixrun {} ({}): {e}", s.pid, s.path.display()),
        }
    }
    print(&rows, what.header);
    let missing: Vec<u32> = what
        .pids
        .iter()
        .copied()
        .filter(|p| !listed.contains(p))
        .collect();
    for p in &missing {
        if !servers.iter().any(|s| s.pid == *p) {
            eprintln!("pmixps: no pmixrun of pid {p} serves tools here");
        }
    }
    Ok(missing.is_empty())
}

/// The processes of every job of the pmixrun of `file`.
fn rows_of(tool: &mut Tool, file: &ServerFile) -> Result<Vec<Row>, Error> {
    let server = tool.attach_to_server(file.attach())?;
    tool.set_server(&server)?;
    let result = table(tool, file.pid);
    let _ = tool.disconnect(&server);
    result
}

fn table(tool: &mut Tool, launcher: u32) -> Result<Vec<Row>, Error> {
    let names = tool.query_keys(&[attr::QUERY_NAMESPACES], Vec::new())?;
    let list = names
        .iter()
        .find(|i| i.key.as_str() == attr::QUERY_NAMESPACES)
        .and_then(|i| i.value.as_str())
        .unwrap_or_default()
        .to_owned();
    let mut rows = Vec::new();
    for job in list.split(',').filter(|n| !n.is_empty()) {
        let answer = match tool.query_keys(
            &[attr::QUERY_PROC_TABLE],
            vec![Info::attr(attr::NSPACE, job)],
        ) {
            Ok(a) => a,
            // A job that ended between the two questions.
            Err(e) if e.status() == pmix_client::Status::ERR_NOT_FOUND => continue,
            Err(e) => return Err(e),
        };
        let items = answer
            .iter()
            .find(|i| i.key.as_str() == attr::QUERY_PROC_TABLE)
            .and_then(|i| match &i.value {
                Value::DataArray(a) => Some(a.items().to_vec()),
                _ => None,
            })
            .unwrap_or_default();
        for item in items {
            let Value::ProcInfo(p) = item else { continue };
            rows.push(Row {
                launcher,
                job: p.proc.nspace.to_string(),
                rank: p.proc.rank.0,
                pid: p.pid,
                state: p
                    .state
                    .name()
                    .map_or_else(|| p.state.0.to_string(), str::to_owned),
                host: p.hostname.clone(),
                program: p.executable_name.clone(),
            });
        }
    }
    Ok(rows)
}

fn print(rows: &[Row], header: bool) {
    let head = ["PMIXRUN", "JOB", "RANK", "PID", "STATE", "HOST", "PROGRAM"];
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            [
                r.launcher.to_string(),
                r.job.clone(),
                r.rank.to_string(),
                r.pid.to_string(),
                r.state.clone(),
                r.host.clone(),
                r.program.clone(),
            ]
        })
        .collect();
    let mut width = [0usize; 7];
    for (i, h) in head.iter().enumerate() {
        width[i] = if header { h.len() } else { 0 };
    }
    for c in &cells {
        for (i, s) in c.iter().enumerate() {
            width[i] = width[i].max(s.len());
        }
    }
    let mut out = std::io::stdout().lock();
    let mut line = |c: &[String]| {
        let mut s = String::new();
        for (i, cell) in c.iter().enumerate() {
            if i + 1 == c.len() {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<w$}  ", w = width[i]));
            }
        }
        let _ = writeln!(out, "{}", s.trim_end());
    };
    if header {
        line(&head.map(String::from));
    }
    for c in &cells {
        line(c);
    }
}
