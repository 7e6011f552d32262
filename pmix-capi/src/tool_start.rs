//! How a C tool asks to start and attach: the directives of `PMIx_tool_init`,
//! `PMIx_tool_attach_to_server` and `PMIx_tool_connect_to_server` read into pmix-client's
//! [`Attach`] and [`ToolOptions`], and the tries they ask for.
//!
//! The server: `PMIX_SERVER_PIDINFO` (a pid), `PMIX_SERVER_NSPACE`, `PMIX_SERVER_URI`,
//! `PMIX_TOOL_ATTACHMENT_FILE` (a file whose first line is a URI), `PMIX_CONNECT_TO_SYSTEM`;
//! `PMIX_CONNECT_SYSTEM_FIRST` tries the system server before the one named. None of them:
//! the system server, as libpmix looks for it first. `PMIX_TOOL_DO_NOT_CONNECT` attaches to
//! none; `PMIX_TOOL_CONNECT_OPTIONAL` makes a server not found no failure. Each try is repeated
//! `PMIX_CONNECT_MAX_RETRIES` times more, `PMIX_CONNECT_RETRY_DELAY` seconds apart (default 1).
//! `PMIX_TOOL_NSPACE` with `PMIX_TOOL_RANK` name the tool (at pmix-rs servers; OpenPMIx
//! servers name their tools), `PMIX_TIMEOUT` bounds every answer, `PMIX_SERVER_TMPDIR`,
//! `PMIX_SYSTEM_TMPDIR` and `PMIX_HOSTNAME` say where and as whom servers' files are looked
//! for. Other directives are ignored, as libpmix ignores those it does not know.

use std::path::PathBuf;
use std::time::Duration;

use pmix_client::tool::{Attach, Tool, ToolOptions};
use pmix_client::types::checked_timeout_of;
use pmix_client::{Error, Info, Nspace, Proc, Rank, Status, attr};

/// What the directives ask.
#[derive(Clone, Debug)]
pub(crate) struct ToolStart {
    /// How the tool is made (its `server` is left `None`: `servers` are tried instead).
    pub(crate) options: ToolOptions,
    /// The servers to try, in order; none: attach to none.
    pub(crate) servers: Vec<Attach>,
    /// Whether finding no server is no failure.
    pub(crate) optional: bool,
    /// How many times each server is tried.
    pub(crate) tries: u32,
    /// How long between two rounds of tries.
    pub(crate) retry_delay: Duration,
    /// Whether a server attached becomes the primary one (`PMIX_PRIMARY_SERVER`).
    pub(crate) primary: bool,
}

fn find<'a>(info: &'a [Info], key: &str) -> Option<&'a Info> {
    info.iter().rev().find(|i| i.key.as_str() == key)
}

fn flag(info: &[Info], key: &str) -> Result<bool, Status> {
    find(info, key).map_or(Ok(false), |i| i.flag().ok_or(Status::ERR_BAD_PARAM))
}

fn string(info: &[Info], key: &str) -> Result<Option<String>, Status> {
    find(info, key)
        .map(|i| {
            i.value
                .as_str()
                .map(str::to_owned)
                .ok_or(Status::ERR_BAD_PARAM)
        })
        .transpose()
}

fn number(info: &[Info], key: &str) -> Result<Option<u32>, Status> {
    find(info, key)
        .map(|i| i.value.as_u32().ok_or(Status::ERR_BAD_PARAM))
        .transpose()
}

/// Reads `info`; a directive of the wrong type is `ERR_BAD_PARAM`, an attachment file that
/// cannot be read `ERR_NOT_FOUND`.
pub(crate) fn tool_start(info: &[Info]) -> Result<ToolStart, Status> {
    let mut named = Vec::new();
    if let Some(pid) = number(info, attr::SERVER_PIDINFO)? {
        named.push(Attach::Pid(pid));
    }
    if let Some(ns) = string(info, attr::SERVER_NSPACE)? {
        named.push(Attach::Nspace(ns));
    }
    if let Some(uri) = string(info, attr::SERVER_URI)? {
        named.push(Attach::Uri(uri));
    }
    if let Some(file) = string(info, attr::TOOL_ATTACHMENT_FILE)? {
        let text = std::fs::read_to_string(&file).map_err(|_| Status::ERR_NOT_FOUND)?;
        let uri = text.lines().next().unwrap_or("").trim();
        if uri.is_empty() {
            return Err(Status::ERR_BAD_PARAM);
        }
        named.push(Attach::Uri(uri.to_owned()));
    }
    let servers = if flag(info, attr::TOOL_DO_NOT_CONNECT)? {
        Vec::new()
    } else if flag(info, attr::CONNECT_TO_SYSTEM)? || named.is_empty() {
        vec![Attach::System]
    } else if flag(info, attr::CONNECT_SYSTEM_FIRST)? {
        std::iter::once(Attach::System).chain(named).collect()
    } else {
        named
    };
    let name = match (
        string(info, attr::TOOL_NSPACE)?,
        number(info, attr::TOOL_RANK)?,
    ) {
        (Some(ns), rank) => {
            let ns = Nspace::new(ns).map_err(|_| Status::ERR_BAD_PARAM)?;
            Some(Proc::new(ns, Rank(rank.unwrap_or(0))))
        }
        (None, _) => None,
    };
    let mut options = ToolOptions {
        name,
        tmpdir: string(info, attr::SERVER_TMPDIR)?.map(PathBuf::from),
        system_tmpdir: string(info, attr::SYSTEM_TMPDIR)?.map(PathBuf::from),
        hostname: string(info, attr::HOSTNAME)?,
        ..ToolOptions::default()
    };
    if let Some(t) = checked_timeout_of(info)? {
        options.timeout = t;
    }
    Ok(ToolStart {
        options,
        servers,
        optional: flag(info, attr::TOOL_CONNECT_OPTIONAL)?,
        tries: number(info, attr::CONNECT_MAX_RETRIES)?
            .unwrap_or(0)
            .saturating_add(1),
        retry_delay: Duration::from_secs(
            number(info, attr::CONNECT_RETRY_DELAY)?.unwrap_or(1).into(),
        ),
        primary: flag(info, attr::PRIMARY_SERVER)?,
    })
}

impl ToolStart {
    /// The name a tool has while attached nowhere: the one asked for, else one of this pid.
    pub(crate) fn unattached_name(&self) -> Proc {
        self.options.name.clone().unwrap_or_else(|| {
            let ns = format!("pmixrs-tool.{}", std::process::id());
            // The name is short and plain: always a valid namespace.
            Proc::new(Nspace::new(ns).unwrap_or_else(|_| unreachable!()), Rank(0))
        })
    }

    /// Makes the tool, attached to the first of `servers` that answers.
    pub(crate) fn open(&self) -> Result<Tool, Error> {
        if self.servers.is_empty() {
            return Tool::init_with(self.options.clone());
        }
        match self.first_answering(|how| {
            Tool::init_with(ToolOptions {
                server: Some(how.clone()),
                ..self.options.clone()
            })
        }) {
            Err(_) if self.optional => Tool::init_with(self.options.clone()),
            r => r,
        }
    }

    /// Attaches `tool` to the first of `servers` that answers; answers its name and makes
    /// it the primary server when asked to.
    pub(crate) fn attach(&self, tool: &mut Tool) -> Result<Proc, Error> {
        if self.servers.is_empty() {
            return Err(Error::BadParam("no server named".into()));
        }
        let server = self.first_answering(|how| tool.attach_to_server(how.clone()))?;
        if self.primary {
            tool.set_server(&server)?;
        }
        Ok(server)
    }

    /// `attempt` on each server in turn, `tries` rounds `retry_delay` apart; the last failure
    /// if none answered.
    fn first_answering<T>(
        &self,
        mut attempt: impl FnMut(&Attach) -> Result<T, Error>,
    ) -> Result<T, Error> {
        let mut last = Error::BadParam("no server named".into());
        for round in 0..self.tries {
            if round > 0 {
                // A retry delay the caller asked for, not synchronisation.
                std::thread::sleep(self.retry_delay);
            }
            for how in &self.servers {
                match attempt(how) {
                    Ok(t) => return Ok(t),
                    Err(e) => last = e,
                }
            }
        }
        Err(last)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use pmix_client::Value;

    use super::*;

    #[test]
    fn directives_name_servers_in_the_order_libpmix_tries_them() {
        let s = tool_start(&[Info::attr(attr::SERVER_PIDINFO, Value::Pid(42))]).unwrap();
        assert_eq!(s.servers, vec![Attach::Pid(42)]);
        assert_eq!((s.tries, s.optional, s.primary), (1, false, false));
        let s = tool_start(&[
            Info::attr(attr::SERVER_NSPACE, "job"),
            Info::attr(attr::CONNECT_SYSTEM_FIRST, true),
        ])
        .unwrap();
        assert_eq!(
            s.servers,
            vec![Attach::System, Attach::Nspace("job".into())]
        );
        assert_eq!(tool_start(&[]).unwrap().servers, vec![Attach::System]);
        let s = tool_start(&[
            Info::attr(attr::SERVER_URI, "x"),
            Info::attr(attr::TOOL_DO_NOT_CONNECT, Value::Undef),
        ])
        .unwrap();
        assert!(s.servers.is_empty());
    }

    #[test]
    fn names_retries_and_timeouts_are_read() {
        let s = tool_start(&[
            Info::attr(attr::SERVER_URI, "unix:/x"),
            Info::attr(attr::TOOL_NSPACE, "mytool"),
            Info::attr(attr::TOOL_RANK, Value::Uint32(3)),
            Info::attr(attr::CONNECT_MAX_RETRIES, Value::Uint32(2)),
            Info::attr(attr::CONNECT_RETRY_DELAY, Value::Uint32(5)),
            Info::attr(attr::TIMEOUT, Value::Int(7)),
        ])
        .unwrap();
        let me = Proc::new(Nspace::new("mytool").unwrap(), Rank(3));
        assert_eq!(s.options.name.as_ref(), Some(&me));
        assert_eq!(s.unattached_name(), me);
        assert_eq!((s.tries, s.retry_delay), (3, Duration::from_secs(5)));
        assert_eq!(s.options.timeout, Duration::from_secs(7));
    }

    #[test]
    fn directives_of_the_wrong_type_are_refused() {
        for bad in [
            Info::attr(attr::SERVER_PIDINFO, "12"),
            Info::attr(attr::SERVER_URI, Value::Uint32(1)),
            Info::attr(attr::CONNECT_TO_SYSTEM, Value::Uint32(1)),
            Info::attr(attr::TIMEOUT, "soon"),
            Info::attr(attr::TOOL_NSPACE, "x".repeat(300)),
        ] {
            assert_eq!(
                tool_start(std::slice::from_ref(&bad)).unwrap_err(),
                Status::ERR_BAD_PARAM,
                "{bad:?}"
            );
        }
        let missing = Info::attr(attr::TOOL_ATTACHMENT_FILE, "/nonexistent/pmixrs/attach");
        assert_eq!(tool_start(&[missing]).unwrap_err(), Status::ERR_NOT_FOUND);
    }

    /// A tool told to attach nowhere starts without a server; one told to attach to a server
    /// that is not there fails after its tries, unless connecting was optional.
    #[test]
    fn a_missing_server_fails_unless_optional() {
        let gone = Info::attr(attr::SERVER_URI, "unix:/nonexistent/pmixrs/server.sock");
        let s = tool_start(std::slice::from_ref(&gone)).unwrap();
        assert!(s.open().is_err());
        let s = tool_start(&[gone, Info::attr(attr::TOOL_CONNECT_OPTIONAL, true)]).unwrap();
        let mut tool = s.open().unwrap();
        assert!(tool.get_servers().is_empty());
        assert!(s.attach(&mut tool).is_err());
        let none = tool_start(&[Info::attr(attr::TOOL_DO_NOT_CONNECT, true)]).unwrap();
        assert!(none.open().unwrap().get_servers().is_empty());
    }
}
