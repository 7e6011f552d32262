//! `pmixps --tail NSPACE`: follows a running job's output, as `tail -f` a file, through I/O
//! forwarding (`PMIx_IOF_pull`; `docs/TOOLS.md`, "I/O forwarding").
//!
//! It finds the pmixrun serving the job among those listed, pulls the stdout and stderr of
//! every process of it, and writes each line to its own stdout or stderr with the rank in
//! front (`[rank] `), until the job ends (`EVENT_JOB_END`) or its pmixrun goes away. Output
//! written before it attached is not shown (pmix-rs servers cache none).

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use pmix_client::tool::{Tool, ToolOptions};
use pmix_client::{Error, IofChannel, Nspace, Proc, Rank, Status, Value, attr};

/// Follows `job`'s output; false when no pmixrun here serves it.
pub(crate) fn run(job: &str, tmpdir: Option<PathBuf>) -> Result<bool, Error> {
    let nspace = Nspace::new(job).map_err(|e| Error::BadParam(e.to_string()))?;
    let mut tool = Tool::init_with(ToolOptions {
        tmpdir,
        ..ToolOptions::default()
    })?;
    let Some(launcher) = attach_to_job(&mut tool, job)? else {
        eprintln!("pmixps: no pmixrun here serves the job {job}");
        return Ok(false);
    };
    // Registered before the pull, so that the job's end cannot come unseen in between.
    tool.register_events(&[Status::EVENT_JOB_END])?;
    let all = [Proc::new(nspace, Rank::WILDCARD)];
    let channels = IofChannel(IofChannel::STDOUT.0 | IofChannel::STDERR.0);
    tool.iof_pull(&all, channels, Vec::new(), |chunk| {
        let text = prefixed(chunk.source.rank.0, &chunk.data);
        // A closed stdout or stderr (`pmixps --tail | head`) ends nothing but that output.
        let _ = if chunk.channel == IofChannel::STDERR {
            std::io::stderr().lock().write_all(&text)
        } else {
            let mut out = std::io::stdout().lock();
            out.write_all(&text).and_then(|()| out.flush())
        };
    })?;
    eprintln!("pmixps: following {job} of pmixrun {launcher}");
    loop {
        match tool.progress(Duration::from_secs(1)) {
            Ok(_) => {}
            // pmixrun ended: so did the job.
            Err(Error::LostConnection) => return Ok(true),
            Err(e) => return Err(e),
        }
        let ended = tool
            .take_events()
            .iter()
            .any(|ev| ev.code == Status::EVENT_JOB_END && names_job(&ev.info, job));
        if ended {
            let _ = tool.finalize();
            return Ok(true);
        }
    }
}

/// Attaches to the pmixrun serving `job` (its primary server then); its pid.
fn attach_to_job(tool: &mut Tool, job: &str) -> Result<Option<u32>, Error> {
    for file in tool.list_servers() {
        if file.native.is_none() {
            continue;
        }
        let Ok(server) = tool.attach_to_server(file.attach()) else {
            continue;
        };
        // A server that ends or fails while asked is not the one: the others are asked.
        let names = match tool
            .set_server(&server)
            .and_then(|()| tool.query_keys(&[attr::QUERY_NAMESPACES], Vec::new()))
        {
            Ok(names) => names,
            Err(_) => {
                let _ = tool.disconnect(&server);
                continue;
            }
        };
        let serves = names
            .iter()
            .filter(|i| i.key.as_str() == attr::QUERY_NAMESPACES)
            .filter_map(|i| i.value.as_str())
            .any(|list| list.split(',').any(|n| n == job));
        if serves {
            return Ok(Some(file.pid));
        }
        let _ = tool.disconnect(&server);
    }
    Ok(None)
}

/// Whether an event's info names `job` (`NSPACE`, or the affected process's namespace).
fn names_job(info: &[pmix_client::Info], job: &str) -> bool {
    info.iter().any(|i| match &i.value {
        Value::Proc(p) => p.nspace.as_str() == job,
        v => i.key.as_str() == attr::NSPACE && v.as_str() == Some(job),
    })
}

/// `data` with `[rank] ` before each line.
fn prefixed(rank: u32, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len() + 8);
    for line in data.split_inclusive(|&b| b == b'\n') {
        out.extend_from_slice(format!("[{rank}] ").as_bytes());
        out.extend_from_slice(line);
    }
    if out.last().is_some_and(|&b| b != b'\n') {
        out.push(b'\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_gets_its_rank() {
        assert_eq!(prefixed(3, b"a\nb\n"), b"[3] a\n[3] b\n");
        assert_eq!(prefixed(0, b"no newline"), b"[0] no newline\n");
    }
}
