//! The tool interface (`PMIx_tool_init`, `PMIx_tool_attach_to_server`,
//! `PMIx_tool_get_servers`, `PMIx_tool_set_server`, `PMIx_tool_disconnect`,
//! `PMIx_tool_finalize`): a process that no server launched (a debugger, a job monitor,
//! `pmixps`) attaches to running servers and asks them about their jobs.
//!
//! A [`Tool`] finds a server by its pid, its namespace, its URI, or as the node's system
//! server ([`Attach`]), through the rendezvous files servers write (`docs/TOOLS.md`). To a
//! pmix-rs server it speaks the native protocol over the server's socket; to an OpenPMIx
//! server (PRRTE's `prterun`, any libpmix server with tool support) the OpenPMIx wire as a
//! libpmix tool does. It may hold several servers at once; requests go to the primary one,
//! which [`Tool::set_server`] chooses.
//!
//! Calls are blocking, one at a time per tool. What a tool may ask is the server's to say: a
//! pmix-rs server answers queries, gets of its jobs' data ([`Tool::get`], `get.rs`), events
//! (`Tool::register_events`, `Tool::notify_event`, `Tool::release` of processes held in
//! init), job control, spawn, output pulls and input pushes, and finalize (`docs/TOOLS.md`).
//! What servers send unasked (pulled output, events) is dispatched during calls,
//! [`Tool::progress`] and [`Tool::next_event`] (`iof.rs`).
//!
//! ```no_run
//! use pmix_client::tool::{Attach, Tool};
//! use pmix_client::{Info, attr};
//!
//! let mut tool = Tool::init(Attach::Pid(12345))?;
//! let names = tool.query_keys(&[attr::QUERY_NAMESPACES], Vec::new())?;
//! let job = "rs-pmixrun-12345";
//! let table = tool.query_keys(&[attr::QUERY_PROC_TABLE], vec![Info::attr(attr::NSPACE, job)])?;
//! println!("{names:?} {table:?}");
//! tool.finalize()?;
//! # Ok::<(), pmix_client::Error>(())
//! ```

mod control;
mod find;
mod get;
mod iof;
mod list;
mod wire;

pub use self::iof::{IofHandler, IofPull};
pub use self::list::ServerFile;
pub use self::wire::Unsolicited;

use std::path::PathBuf;
use std::time::Duration;

use pmix_types::{Info, Proc, Status, attr};
use pmix_wire::{Query, Reply, ReplyBody, Request};

use crate::Error;

use self::wire::Link;

/// The longest command line a tool passes to a server (`CMD_LINE`).
const MAX_CMD_LINE: usize = 1024;

/// How a tool finds the server to attach to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Attach {
    /// The server of this pid (`PMIX_SERVER_PIDINFO`): `pmixrun`'s pid, `prterun`'s.
    Pid(u32),
    /// The server of this namespace (`PMIX_SERVER_NSPACE`).
    Nspace(String),
    /// The server at this URI (`PMIX_SERVER_URI`): an OpenPMIx URI
    /// (`<nspace>.<rank>;tcp4://<address>:<port>`), or `unix:<socket>` for a pmix-rs server's
    /// native socket.
    Uri(String),
    /// This node's system server (`PMIX_CONNECT_TO_SYSTEM`).
    System,
}

/// How a tool starts.
#[derive(Clone, Debug)]
pub struct ToolOptions {
    /// The server to attach to first; `None` attaches to none (a tool may attach later).
    pub server: Option<Attach>,
    /// Where servers' rendezvous files are looked for (their pid and namespace files anywhere
    /// below it); default `PMIX_SYSTEM_TMPDIR`, else `TMPDIR`, else `/tmp`, as libpmix.
    pub tmpdir: Option<PathBuf>,
    /// Where the system server's file lies; default as `tmpdir`.
    pub system_tmpdir: Option<PathBuf>,
    /// This node's name as servers spell it in their files; default the system's hostname.
    pub hostname: Option<String>,
    /// The name to use at pmix-rs servers (OpenPMIx servers always name their tools); default
    /// none: the server gives one.
    pub name: Option<Proc>,
    /// How long a server may take to answer; default 60 s.
    pub timeout: Duration,
}

impl Default for ToolOptions {
    fn default() -> Self {
        ToolOptions {
            server: None,
            tmpdir: None,
            system_tmpdir: None,
            hostname: None,
            name: None,
            timeout: Duration::from_secs(60),
        }
    }
}

/// A tool attached to PMIx servers.
pub struct Tool {
    options: ToolOptions,
    tmpdir: PathBuf,
    system_tmpdir: PathBuf,
    hostname: String,
    servers: Vec<Link>,
    /// Index of the primary server in `servers`.
    primary: usize,
    /// Pulls and what servers sent unasked (`iof.rs`).
    inbox: iof::Inbox,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("servers", &self.get_servers())
            .field(
                "primary",
                &self.servers.get(self.primary).map(|l| &l.server),
            )
            .finish()
    }
}

impl Tool {
    /// Starts a tool attached to the server `how` names (`PMIx_tool_init`).
    pub fn init(how: Attach) -> Result<Tool, Error> {
        Tool::init_with(ToolOptions {
            server: Some(how),
            ..ToolOptions::default()
        })
    }

    /// Starts a tool as `options` say.
    pub fn init_with(options: ToolOptions) -> Result<Tool, Error> {
        let tmpdir = options
            .tmpdir
            .clone()
            .or_else(|| std::env::var_os("PMIX_SYSTEM_TMPDIR").map(PathBuf::from))
            .unwrap_or_else(std::env::temp_dir);
        let system_tmpdir = options
            .system_tmpdir
            .clone()
            .unwrap_or_else(|| tmpdir.clone());
        let hostname = options.hostname.clone().unwrap_or_else(|| {
            nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .unwrap_or_else(|| "localhost".into())
        });
        let mut tool = Tool {
            options,
            tmpdir,
            system_tmpdir,
            hostname,
            servers: Vec::new(),
            primary: 0,
            inbox: iof::Inbox::default(),
        };
        if let Some(how) = tool.options.server.clone() {
            tool.attach_to_server(how)?;
        }
        Ok(tool)
    }

    /// Attaches to another server (`PMIx_tool_attach_to_server`); the first one attached is
    /// the primary. Returns the server's name.
    pub fn attach_to_server(&mut self, how: Attach) -> Result<Proc, Error> {
        let found = find::find(&how, &self.hostname, &self.tmpdir, &self.system_tmpdir)?;
        // What libpmix tools tell a server of themselves; the command line cut to fit well
        // within the hello a server reads before it knows who speaks (4 KiB for pmix-rs).
        let mut cmd_line = std::env::args().collect::<Vec<_>>().join(" ");
        if cmd_line.len() > MAX_CMD_LINE {
            let mut end = MAX_CMD_LINE;
            while !cmd_line.is_char_boundary(end) {
                end -= 1;
            }
            cmd_line.truncate(end);
        }
        let info = vec![
            Info::attr(attr::PROC_PID, pmix_types::Value::Pid(std::process::id())),
            Info::attr(attr::CMD_LINE, cmd_line),
        ];
        let link = match &found.native {
            Some(socket) => Link::native(
                socket,
                self.options.name.clone(),
                info,
                self.options.timeout,
            )?,
            None => Link::openpmix(
                &found.contact.uri,
                found.contact.version.as_deref(),
                info,
                self.options.timeout,
            )?,
        };
        let server = link.server.clone();
        if self.servers.iter().any(|l| l.server == server) {
            // Already attached: the new connection is let go.
            let _ = Tool::finalize_link(link);
            return Ok(server);
        }
        self.servers.push(link);
        Ok(server)
    }

    /// This tool's name at its primary server (servers name tools, each its own way).
    pub fn proc(&self) -> Option<&Proc> {
        self.servers.get(self.primary).map(|l| &l.me)
    }

    /// The servers this tool is attached to (`PMIx_tool_get_servers`).
    pub fn get_servers(&self) -> Vec<Proc> {
        self.servers.iter().map(|l| l.server.clone()).collect()
    }

    /// Makes `server` the primary server, the one requests go to (`PMIx_tool_set_server`).
    pub fn set_server(&mut self, server: &Proc) -> Result<(), Error> {
        let i = self.index_of(server)?;
        self.primary = i;
        Ok(())
    }

    /// The primary server's name.
    pub fn server(&self) -> Option<&Proc> {
        self.servers.get(self.primary).map(|l| &l.server)
    }

    /// The connection to the primary server.
    fn primary_link(&mut self) -> Result<&mut Link, Error> {
        self.servers
            .get_mut(self.primary)
            .ok_or(Error::NotInitialized)
    }

    fn index_of(&self, server: &Proc) -> Result<usize, Error> {
        self.servers
            .iter()
            .position(|l| l.server == *server)
            .ok_or_else(|| Error::BadParam(format!("not attached to {server}")))
    }

    /// Sends a request to the primary server and waits for its answer: the escape hatch for
    /// requests without a method here. What the server sent meanwhile unasked is dispatched
    /// (`iof.rs`).
    pub fn request(&mut self, req: Request) -> Result<Reply, Error> {
        let link = self.primary_link()?;
        let reply = link.request(req);
        self.dispatch();
        reply
    }

    /// Asks the primary server (`PMIx_Query_info`): one [`Info`] per answered key. A partial
    /// answer (`QUERY_PARTIAL_SUCCESS`) is returned as it is; a failure is an error.
    pub fn query(&mut self, queries: Vec<Query>) -> Result<Vec<Info>, Error> {
        let reply = self.request(Request::Query { queries })?;
        match reply {
            Reply {
                status,
                body: ReplyBody::Query { results },
            } if status.is_success() || status == Status::QUERY_PARTIAL_SUCCESS => Ok(results),
            Reply { status, .. } if !status.is_success() => Err(Error::from_status(status)),
            Reply { .. } => Err(Error::Protocol("a query answered without results".into())),
        }
    }

    /// [`Tool::query`] of one query: `keys`, with `qualifiers` (`NSPACE`, ...).
    pub fn query_keys(&mut self, keys: &[&str], qualifiers: Vec<Info>) -> Result<Vec<Info>, Error> {
        let keys = keys
            .iter()
            .map(|k| pmix_types::Key::new(*k).map_err(|e| Error::BadParam(e.to_string())))
            .collect::<Result<Vec<_>, _>>()?;
        self.query(vec![Query { keys, qualifiers }])
    }

    /// Finalizes at `server` and closes its connection (`PMIx_tool_disconnect`); the job
    /// there is not affected. The next server attached becomes the primary if it was.
    pub fn disconnect(&mut self, server: &Proc) -> Result<(), Error> {
        let i = self.index_of(server)?;
        let link = self.servers.remove(i);
        if self.primary >= self.servers.len() || self.primary > i {
            self.primary = self.primary.saturating_sub(1);
        }
        Tool::finalize_link(link)
    }

    /// Finalizes at every server (`PMIx_tool_finalize`); the first failure is returned after
    /// all were tried. A server that is gone already counts as finalized.
    pub fn finalize(mut self) -> Result<(), Error> {
        let mut first = Ok(());
        for link in self.servers.drain(..) {
            let r = Tool::finalize_link(link);
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    /// Finalizes at one server. A server already gone (its job ended and it stopped, as
    /// pmixrun does) has nothing left to be told: that is no failure.
    fn finalize_link(mut link: Link) -> Result<(), Error> {
        let reply = match link.request(Request::Finalize { info: Vec::new() }) {
            Err(Error::LostConnection) => return Ok(()),
            r => r?,
        };
        if reply.status.is_success() {
            Ok(())
        } else {
            Err(Error::from_status(reply.status))
        }
    }
}

impl Drop for Tool {
    fn drop(&mut self) {
        for link in self.servers.drain(..) {
            let _ = Tool::finalize_link(link);
        }
    }
}
