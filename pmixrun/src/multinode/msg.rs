//! What the root and the daemons of a multi-node run say to each other. pmix-tree carries
//! the bytes (and knows nothing of their meaning); here they are MessagePack, through serde.
//!
//! [`Msg`] are one-way messages ([`pmix_tree::Tree::send`]); [`Req`] are requests answered
//! through the tree ([`pmix_tree::Tree::request`]) with the bytes of an [`Answer`].

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;

use pmix_server::types::{DataRange, Info, Key, Nspace, Proc, Status};
use pmix_server::{App as SpawnApp, Published, Query};
use pmix_tree::{FenceKey, Vertex};
use serde::{Deserialize, Serialize};

use crate::cli::{App, Protocol};

/// A one-way message.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Msg {
    /// Daemon → root: this daemon's server is up and its children daemons are started.
    Up { vertex: Vertex, pid: u32 },
    /// Daemon → root: the launch agent that was to start `vertex` (a child of the sender)
    /// ended before that daemon joined.
    AgentFailed { vertex: Vertex, message: String },
    /// Root → every daemon: register a job and start the ranks placed on each daemon.
    Launch(Box<Launch>),
    /// Daemon → root: the local ranks of a job started, or the first that could not.
    Started(Started),
    /// Daemon → root: a process connected to its server.
    Connected(Proc),
    /// Daemon → root: a process called finalize.
    Finalized(Proc),
    /// Daemon → root: a process ended; `code`/`signal` as its wait status said, or `error`
    /// if waiting for it failed.
    Exited { proc: Proc, end: End },
    /// Daemon → every daemon: a process ended without finalize; what waits for it must fail.
    ProcEnded { proc: Proc, status: Status },
    /// Daemon → every daemon: a process that ended is being started again (before it starts),
    /// its `reincarnation`-th restart; what names it waits for its new life.
    ProcRestarted { proc: Proc, reincarnation: u32 },
    /// Daemon → root: output of local processes.
    Output(Vec<OutputLine>),
    /// Root → daemon: that many bytes of its output were written.
    OutputAck(u64),
    /// Root → daemon: send `signal` to these local processes (by pid, which is their group).
    Signal {
        procs: Vec<(Proc, i32)>,
        signal: i32,
    },
    /// Root → every daemon: every process of the job ended; let its namespace go.
    JobEnded(Nspace),
    /// Daemon → every daemon: a PMIx event raised on one node for processes of others.
    Event {
        code: Status,
        source: Proc,
        range: DataRange,
        info: Vec<Info>,
    },
    /// Root → every daemon: the run is over; send the last output, then [`Msg::Done`].
    Shutdown,
    /// Daemon → root: every output line of this daemon was sent before this.
    Done,
    /// Root → the daemons of the processes that take input: a chunk of pmixrun's stdin, for
    /// each of their local ones (`crate::node::stdin`); answered [`Msg::StdinAck`] once written.
    Stdin(#[serde(with = "serde_bytes")] Vec<u8>),
    /// Daemon → root: the last [`Msg::Stdin`] chunk was taken by its local processes (the
    /// root sends no more until then: input goes no faster than the slowest reader).
    StdinAck,
    /// Root → those daemons: pmixrun's stdin ended; close their processes' stdin.
    StdinEnd,
}

/// How a process ended, as the daemon that waited for it saw it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum End {
    /// It exited with this status.
    Code(i32),
    /// It was killed by this signal.
    Signal(i32),
    /// Waiting for it failed.
    Error(String),
}

/// One line (or piece of an overlong line) a process wrote.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct OutputLine {
    pub(crate) job: u32,
    pub(crate) rank: u32,
    pub(crate) stderr: bool,
    #[serde(with = "serde_bytes")]
    pub(crate) bytes: Vec<u8>,
}

/// A job as every daemon registers it.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Launch {
    pub(crate) nspace: Nspace,
    /// 0 for the first job, `n` for the `n`-th spawned one (for output tags).
    pub(crate) tag: u32,
    pub(crate) size: u32,
    /// Its registration information, the same on every node (maps of every node included).
    pub(crate) info: Vec<Info>,
    /// Its application contexts, with absolute working directories and every environment
    /// variable resolved at the root.
    pub(crate) apps: Vec<WireApp>,
    /// The first rank of each application context.
    pub(crate) firsts: Vec<u32>,
    /// The daemon of each rank.
    pub(crate) vertex_of_rank: Vec<Vertex>,
    pub(crate) pmi: WireProtocol,
    /// Where on its node each process runs and what it is told of its place.
    pub(crate) place: crate::cli::Place,
    /// Which of its ranks take pmixrun's input (`--stdin`; the first job only).
    pub(crate) stdin: crate::node::stdin::Target,
}

/// An application context on the wire ([`App`] holds `OsString`s).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WireApp {
    pub(crate) np: u32,
    #[serde(with = "serde_bytes")]
    pub(crate) program: Vec<u8>,
    pub(crate) args: Vec<serde_bytes::ByteBuf>,
    #[serde(with = "serde_bytes")]
    pub(crate) wdir: Vec<u8>,
    pub(crate) env: Vec<(serde_bytes::ByteBuf, serde_bytes::ByteBuf)>,
    pub(crate) pset: Option<String>,
}

impl WireApp {
    /// `app` with working directory `wdir` and its variables as `env` resolves them.
    pub(crate) fn new(app: &App, wdir: &std::path::Path, env: &[(OsString, OsString)]) -> WireApp {
        let bytes = |s: &std::ffi::OsStr| serde_bytes::ByteBuf::from(s.as_bytes().to_vec());
        WireApp {
            np: app.np,
            program: app.program.as_bytes().to_vec(),
            args: app.args.iter().map(|a| bytes(a)).collect(),
            wdir: wdir.as_os_str().as_bytes().to_vec(),
            env: env.iter().map(|(k, v)| (bytes(k), bytes(v))).collect(),
            pset: app.pset.clone(),
        }
    }

    /// Back to an application context (every variable given its value).
    pub(crate) fn to_app(&self) -> App {
        let os = |b: &[u8]| OsString::from_vec(b.to_vec());
        App {
            np: self.np,
            program: os(&self.program),
            args: self.args.iter().map(|a| os(a)).collect(),
            wdir: Some(PathBuf::from(os(&self.wdir))),
            env: self.env.iter().map(|(k, v)| (os(k), Some(os(v)))).collect(),
            pset: self.pset.clone(),
        }
    }
}

/// [`Protocol`] on the wire.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub(crate) enum WireProtocol {
    Pmix,
    Pmi1,
    Pmi1Port,
    Pmi2,
    Pmi2Port,
}

impl From<Protocol> for WireProtocol {
    fn from(p: Protocol) -> Self {
        match p {
            Protocol::Auto | Protocol::Pmix => WireProtocol::Pmix,
            Protocol::Pmi1 => WireProtocol::Pmi1,
            Protocol::Pmi1Port => WireProtocol::Pmi1Port,
            Protocol::Pmi2 => WireProtocol::Pmi2,
            Protocol::Pmi2Port => WireProtocol::Pmi2Port,
        }
    }
}

impl From<WireProtocol> for Protocol {
    fn from(p: WireProtocol) -> Self {
        match p {
            WireProtocol::Pmix => Protocol::Pmix,
            WireProtocol::Pmi1 => Protocol::Pmi1,
            WireProtocol::Pmi1Port => Protocol::Pmi1Port,
            WireProtocol::Pmi2 => Protocol::Pmi2,
            WireProtocol::Pmi2Port => Protocol::Pmi2Port,
        }
    }
}

/// What a daemon reports once it tried to start its ranks of a job.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Started {
    pub(crate) nspace: Nspace,
    pub(crate) vertex: Vertex,
    /// The ranks started, with their pids and programs.
    pub(crate) procs: Vec<(u32, i32, String)>,
    /// The first rank that could not start: (rank, exit status for the run, message).
    pub(crate) failed: Option<(u32, u8, Status, String)>,
}

/// A request to another vertex.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Req {
    /// To the daemon of `proc`: its data, once it committed (bytes of `dmodex_request`);
    /// `info`: the asking server's `PMIX_REQUIRED_KEY` (answer once the data holds it) and
    /// `PMIX_TIMEOUT`.
    Dmodex { proc: Proc, info: Vec<Info> },
    /// To the daemon of `proc`, which failed: start it again as its job was started
    /// (`--max-restarts`), its `reincarnation`-th restart (its `PMIX_REINCARNATION` from now
    /// on); answered [`Answer::Restarted`].
    Restart { proc: Proc, reincarnation: u32 },
    /// To the daemon of `proc`, which ended: answered once its server read and acted on what
    /// `proc` sent before its end (an abort it wrote just before exiting reaches the root
    /// first, on the same path).
    SettleClient(Proc),
    /// To the root: the name service.
    Publish {
        proc: Proc,
        data: Vec<Info>,
        info: Vec<Info>,
    },
    Lookup {
        proc: Proc,
        keys: Vec<Key>,
        info: Vec<Info>,
    },
    Unpublish {
        proc: Proc,
        keys: Vec<Key>,
        info: Vec<Info>,
    },
    /// To the root: start a job.
    Spawn {
        parent: Proc,
        job_info: Vec<Info>,
        apps: Vec<SpawnApp>,
    },
    /// To the root: abort `procs` (none: `proc`).
    Abort {
        proc: Proc,
        status: Status,
        message: String,
        procs: Vec<Proc>,
    },
    /// To the root: write what a process logged (`PMIx_Log`).
    Log {
        source: Proc,
        data: Vec<Info>,
        directives: Vec<Info>,
    },
    /// To the root: act on processes of the run (`PMIx_Job_control`).
    JobControl {
        requester: Proc,
        targets: Vec<Proc>,
        directives: Vec<Info>,
    },
    /// To the root: what only the supervisor knows (process tables).
    Query { asker: Proc, queries: Vec<Query> },
    /// To the root: this daemon's part of a collective some of whose participants belong to
    /// another run (a namespace that is not this run's). The root gathers the part of every
    /// daemon hosting a participant of this run, contributes the run's part to the name
    /// server shared with the other runs, and answers each with what comes back
    /// ([`Answer::Bytes`]: every run's data, as the name server concatenated it).
    CrossRun {
        op: CrossOp,
        /// The collective's key, the one a tree fence of it would have: the same on every
        /// daemon taking part.
        key: FenceKey,
        procs: Vec<Proc>,
        info: Vec<Info>,
        #[serde(with = "serde_bytes")]
        data: Vec<u8>,
    },
}

/// The collectives that may span runs (what the name server's rendezvous offers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum CrossOp {
    Connect,
    Fence,
    Disconnect,
}

/// The answer to a [`Req`] that succeeded (failures travel as the tree's `Err(Status)`).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Answer {
    Unit,
    Bytes(#[serde(with = "serde_bytes")] Vec<u8>),
    Lookup(Vec<Published>),
    Nspace(Nspace),
    Infos(Vec<Info>),
    /// To [`Req::Restart`]: the process's pid (its group) and program, or why it could not
    /// start.
    Restarted(Result<(i32, String), String>),
}

/// Encodes a message, request or answer.
pub(crate) fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Every type here serializes (no maps with non-string keys, no failing Serialize impls).
    rmp_serde::to_vec(value).unwrap_or_default()
}

/// Decodes what a peer of the run sent; `None` (logged) for bytes that are not one.
pub(crate) fn decode<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Option<T> {
    match rmp_serde::from_slice(bytes) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::warn!("undecodable message from the tree: {e}");
            None
        }
    }
}

/// Writes `body` as one frame on a stream (a boot message, the join conversation): a
/// big-endian length, then the bytes.
pub(crate) fn write_frame(out: &mut impl std::io::Write, body: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(body.len()).map_err(|_| std::io::ErrorKind::InvalidInput)?;
    out.write_all(&len.to_be_bytes())?;
    out.write_all(body)?;
    out.flush()
}

/// Reads one frame [`write_frame`] wrote; `Err` (`InvalidData`) for one announced longer than
/// `max` bytes, without reading it.
pub(crate) fn read_frame(input: &mut impl std::io::Read, max: u32) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    input.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len);
    if len > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes"),
        ));
    }
    let mut body = vec![0u8; len as usize];
    input.read_exact(&mut body)?;
    Ok(body)
}

/// The answer the tree brought back, as what a host completion expects.
pub(crate) fn answer_of<T>(
    r: Result<Vec<u8>, Status>,
    pick: impl FnOnce(Answer) -> Option<T>,
) -> Result<T, Status> {
    let bytes = r?;
    decode::<Answer>(&bytes)
        .and_then(pick)
        .ok_or(Status::ERR_UNPACK_FAILURE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applications_cross_the_wire_unchanged() {
        let app = App {
            np: 3,
            program: OsString::from_vec(b"./a\xff".to_vec()),
            args: vec!["x y".into(), OsString::from_vec(vec![0xfe])],
            wdir: None,
            env: vec![],
            pset: None,
        };
        let env = vec![("A".into(), OsString::from_vec(b"1=\xff".to_vec()))];
        let wire = WireApp::new(&app, std::path::Path::new("/w"), &env);
        let back: WireApp = decode(&encode(&wire)).unwrap_or_else(|| panic!("undecodable"));
        let back = back.to_app();
        assert_eq!(back.program, app.program);
        assert_eq!(back.args, app.args);
        assert_eq!(back.wdir, Some(PathBuf::from("/w")));
        assert_eq!(back.env, vec![(env[0].0.clone(), Some(env[0].1.clone()))]);
        assert!(decode::<Msg>(b"\xc1 not a message").is_none());
    }
}
