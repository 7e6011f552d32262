//! [`Server`]: the host-facing API (the standard's server chapter).

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::JoinHandle;

use crossbeam_channel::{Receiver, Sender, bounded, unbounded};
use parking_lot::Mutex;
use pmix_types::{DataRange, Info, Nspace, Proc, Rank, Status, attr};

use crate::Error;
use crate::engine::{Engine, Proofs, SECRET_LEN};
use crate::frontend::{self, Frontends, Personality};
use crate::host::Host;
use crate::mailbox::{Call, LoopMsg, Pmi1Endpoint, Pmi1Way};
use crate::rendezvous::{hex, random_bytes};
use crate::shell::{Shell, ShellParts};
use crate::shell_io::Listener;
use crate::{Limits, NameService};

/// Environment variable naming the server's socket (`unix:<path>`).
pub const ENV_SERVER_URI: &str = "PMIXRS_SERVER_URI";
/// Environment variable carrying the per-client secret (hex).
pub const ENV_SECRET: &str = "PMIXRS_SECRET";
/// Environment variable carrying the server's protocol version.
pub const ENV_PROTOCOL: &str = "PMIXRS_PROTOCOL";

/// How to start a server.
#[derive(Clone, Debug)]
pub struct ServerOptions {
    /// The server's own namespace (`PMIX_SERVER_NSPACE`); default `rs-server-<pid>`.
    pub nspace: Option<Nspace>,
    /// The server's rank (`PMIX_SERVER_RANK`); default 0.
    pub rank: Rank,
    /// Directory under which the rendezvous directory is created (`PMIX_SERVER_TMPDIR`);
    /// default `$TMPDIR` or `/tmp`.
    pub tmpdir: Option<PathBuf>,
    /// System-wide temporary directory (`PMIX_SYSTEM_TMPDIR`); default as `tmpdir`.
    pub system_tmpdir: Option<PathBuf>,
    /// Permission bits of the socket; default `0o600`.
    pub socket_mode: u32,
    /// This node's hostname, to find the local ranks in node maps; default the system's.
    pub hostname: Option<String>,
    /// Largest frame accepted from a client, in bytes.
    pub max_frame: usize,
    /// Who answers publish/lookup/unpublish: the built-in name service (default) or the host.
    pub name_service: NameService,
    /// Also serve processes linked to the C OpenPMIx client library (Open MPI, python3-pmix,
    /// any libpmix program) on a loopback TCP port, and name it in [`Server::setup_fork`]'s
    /// environment; default true.
    pub openpmix: bool,
    /// With [`ServerOptions::openpmix`], also offer libpmix clients the `ds21` storage module:
    /// job data and collected data in shared memory they read in their own thread (see
    /// `docs/OPENPMIX.md`); default true. Off, they use `hash`: everything over the socket.
    pub ds21: bool,
    /// Bounds on what one connection may cost the server.
    pub limits: Limits,
    /// The group context ids (`PMIX_GROUP_CONTEXT_ID`) this server hands out, as
    /// `(first, step)`: `first`, `first + step`, ...; default `(1, 1)`. A host running one
    /// server per node gives each node a residue of its own (node `i` of `n`: `(i + 1, n)`),
    /// so that no two groups of a run get the same id.
    pub context_ids: (u64, u64),
    /// Serve tools (debuggers, job monitors: processes this server did not launch) of this
    /// user and root, and, with [`ServerOptions::openpmix`], write the rendezvous files by
    /// which libpmix tools and the Rust `Tool` find this server by pid or namespace
    /// (`docs/TOOLS.md`); default false: every tool is refused.
    pub tool_support: bool,
    /// With [`ServerOptions::tool_support`], also be this node's system server: write
    /// `pmix.sys.<host>` at the top of `system_tmpdir`, where tools asking for the system
    /// server (`PMIX_CONNECT_TO_SYSTEM`) look; default false.
    pub system_server: bool,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            nspace: None,
            rank: Rank(0),
            tmpdir: None,
            system_tmpdir: None,
            socket_mode: 0o600,
            hostname: None,
            max_frame: pmix_wire::DEFAULT_MAX_FRAME,
            name_service: NameService::BuiltIn,
            openpmix: true,
            ds21: true,
            limits: Limits::default(),
            context_ids: (1, 1),
            tool_support: false,
            system_server: false,
        }
    }
}

/// How a registered client's name may be claimed: [`Server::register_client_with`].
#[derive(Clone, Debug)]
pub struct ClientOptions {
    /// Whether a libpmix client on the OpenPMIx port may claim the name. That protocol carries
    /// no secret: the claim rests on the peer's uid (and gid), which the kernel confirms, and
    /// on being first. Off, only what the launcher handed the process claims it: the secret
    /// of [`Server::setup_fork`] (a pmix-rs client) or the socket or `PMI_ID` of
    /// [`Server::setup_fork_pmi1`]; `setup_fork` then leaves the OpenPMIx variables out.
    /// Default true (any client library), as for [`Server::register_client`]: a host that
    /// does not know what its process links (a script, a wrapper) must leave it on.
    pub openpmix: bool,
    /// Whether the host will say which process it started for the client
    /// ([`Server::client_started`]). Then a claim on the OpenPMIx port is taken only from
    /// that process or one of its descendants (the kernel names the peer's socket, and the
    /// server looks for it in the process's tree, see `docs/SECURITY.md`), and a claim that
    /// comes before the host said waits for it (within the handshake deadline). Default
    /// false: the uid alone, as libpmix's own servers check.
    pub reports_pid: bool,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            openpmix: true,
            reports_pid: false,
        }
    }
}

/// A running PMIx server: an event-loop thread serving the clients of one node.
///
/// Every method may be called from any thread. Dropping the server finalizes it.
pub struct Server {
    tx: Sender<LoopMsg>,
    waker: Arc<mio::Waker>,
    thread: Mutex<Option<JoinHandle<()>>>,
    socket: PathBuf,
    tmpdir: PathBuf,
    system_tmpdir: PathBuf,
    nspace: Nspace,
    rank: Rank,
    hostname: String,
    /// Where libpmix clients connect (`<nspace>.<rank>;tcp4://127.0.0.1:<port>`).
    openpmix_uri: Option<String>,
    /// The ds21 segments' directory, when libpmix clients are offered ds21.
    ds21_dir: Option<PathBuf>,
    /// How many output pulls tools have registered (kept by the loop), so that
    /// [`Server::iof_deliver`] costs nothing while no tool listens.
    pulls: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("socket", &self.socket)
            .field("nspace", &self.nspace)
            .finish()
    }
}

/// How the rendezvous directories are named: `pmixrs.<pid>.<random>` (see
/// [`crate::rendezvous`]).
const RENDEZVOUS_PREFIX: &str = "pmixrs";

/// The server's socket in its rendezvous directory.
const SOCKET_NAME: &str = "server.sock";

fn system_hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into())
}

impl Server {
    /// Starts a server: creates a private rendezvous directory (mode 0700, named
    /// `pmixrs.<pid>.<random>` in `tmpdir`; directories so named that servers which are gone
    /// left there are removed first, see [`crate::rendezvous`]) holding the socket
    /// (mode `socket_mode`) and the session directory its clients are given as `PMIX_TMPDIR`
    /// (each namespace's `PMIX_NSDIR` is made in it; the server removes both, and says so with
    /// `PMIX_TDIR_RMCLEAN`), and the event-loop thread that serves it with `host`'s callbacks.
    pub fn init(host: impl Host, options: ServerOptions) -> Result<Server, Error> {
        let pid = std::process::id();
        let nspace = match options.nspace {
            Some(n) => n,
            None => Nspace::new(format!("rs-server-{pid}"))
                .map_err(|e| Error::BadParam(e.to_string()))?,
        };
        let tmpdir = options.tmpdir.unwrap_or_else(std::env::temp_dir);
        let system_tmpdir = options.system_tmpdir.unwrap_or_else(|| tmpdir.clone());
        let hostname = options.hostname.unwrap_or_else(system_hostname);
        // Those of servers killed before they could remove theirs go first.
        Server::remove_stale_dirs(&tmpdir);
        let dir = crate::rendezvous::create_private_dir(&tmpdir, RENDEZVOUS_PREFIX)?;
        let socket = dir.join(SOCKET_NAME);
        let mut cleanup = vec![dir.clone()];
        let result = (|| {
            let listener = std::os::unix::net::UnixListener::bind(&socket)
                .map_err(Error::io(format!("binding {}", socket.display())))?;
            cleanup.push(socket.clone());
            std::fs::set_permissions(
                &socket,
                std::fs::Permissions::from_mode(options.socket_mode),
            )
            .map_err(Error::io("setting the socket's mode"))?;
            // The session's temporary directory (`PMIX_TMPDIR`), private to this server: Open
            // MPI removes the plain files at the top of the directory it is given there when
            // it ends, so it must never be a shared one like /tmp.
            let session = private_dir(dir.join("session"))?;
            cleanup.push(session.clone());
            let poll = mio::Poll::new().map_err(Error::io("creating the event loop"))?;
            let waker = Arc::new(
                mio::Waker::new(poll.registry(), crate::shell::WAKER)
                    .map_err(Error::io("creating the waker"))?,
            );
            let openpmix = if options.openpmix {
                let l = std::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
                    .map_err(Error::io("binding the OpenPMIx port"))?;
                let port = l
                    .local_addr()
                    .map_err(Error::io("reading the OpenPMIx port"))?
                    .port();
                (Some(l), Some(port))
            } else {
                (None, None)
            };
            let (openpmix_listener, openpmix_port) = openpmix;
            let uri = openpmix_port
                .map(|port| format!("{}.{};tcp4://127.0.0.1:{port}", nspace, options.rank.0));
            if let Some(uri) = uri.as_deref().filter(|_| options.tool_support) {
                let contact = crate::tool_files::Contact {
                    uri,
                    version: crate::frontend::openpmix::ADVERTISED_VERSION,
                    hostname: &hostname,
                    nspace: nspace.as_str(),
                };
                let system = options.system_server.then_some(system_tmpdir.as_path());
                cleanup.extend(crate::tool_files::write(&contact, &dir, system)?);
            }
            // The ds21 segments: in the rendezvous directory, not the session one, whose top
            // Open MPI cleans when it ends.
            let ds21 = if options.openpmix && options.ds21 {
                let d = private_dir(dir.join("ds21"))?;
                cleanup.push(d.clone());
                match crate::frontend::openpmix::ds21::Ds21::new(d.clone()) {
                    Ok(store) => Some((store, d)),
                    Err(e) => {
                        tracing::warn!("libpmix clients will not be offered ds21: {e}");
                        None
                    }
                }
            } else {
                None
            };
            let (ds21, ds21_dir) = match ds21 {
                Some((s, d)) => (Some(s), Some(d)),
                None => (None, None),
            };
            let (tx, rx): (Sender<LoopMsg>, Receiver<LoopMsg>) = unbounded();
            let mut extras = vec![
                Info::attr(attr::SERVER_NSPACE, nspace.as_str()),
                Info::attr(attr::SERVER_RANK, options.rank),
                Info::attr(attr::TMPDIR, session.to_string_lossy().into_owned()),
                Info::attr(attr::NSDIR, session.to_string_lossy().into_owned()),
                // This server removes the session and namespace directories itself.
                Info::attr(attr::TDIR_RMCLEAN, true),
            ];
            // Where tools and libpmix processes reach it (`PMIX_SERVER_URI`).
            if let Some(u) = &uri {
                extras.push(Info::attr(attr::SERVER_URI, u.as_str()));
            }
            let mut engine = Engine::new(hostname.clone(), extras, options.name_service);
            engine.set_tool_support(options.tool_support, nix::unistd::geteuid().as_raw());
            engine.set_context_ids(options.context_ids.0, options.context_ids.1);
            let mut listeners = vec![
                Listener::unix(listener, Personality::Native)
                    .map_err(Error::io("making the listener non-blocking"))?,
            ];
            if let Some(l) = openpmix_listener {
                listeners.push(
                    Listener::tcp(l, Personality::Openpmix)
                        .map_err(Error::io("making the OpenPMIx port non-blocking"))?,
                );
            }
            let frontends = Frontends {
                native: frontend::native::Common::new(
                    options.max_frame,
                    crate::memfd::read_only_copy,
                ),
                pmi1: frontend::pmi1::Common::default(),
                pmi2: frontend::pmi2::node_attrs::Common::default(),
                openpmix: frontend::openpmix::Common::new(ds21, hostname.clone()),
            };
            let pulls = Arc::new(AtomicUsize::new(0));
            let parts = ShellParts {
                poll,
                listeners,
                frontends,
                rx,
                tx: tx.clone(),
                waker: waker.clone(),
                cleanup: cleanup.clone(),
                session: session.clone(),
                limits: options.limits.clone(),
                pulls: pulls.clone(),
            };
            let shell = Shell::new(parts, engine, host)?;
            let thread = std::thread::Builder::new()
                .name("pmix-server".into())
                .spawn(move || shell.run())
                .map_err(Error::io("starting the event-loop thread"))?;
            Ok((tx, waker, thread, uri, ds21_dir, pulls))
        })();
        let (tx, waker, thread, openpmix_uri, ds21_dir, pulls) = match result {
            Ok(v) => v,
            Err(e) => {
                for p in cleanup.iter().rev() {
                    let _ = if p.is_dir() {
                        std::fs::remove_dir(p)
                    } else {
                        std::fs::remove_file(p)
                    };
                }
                return Err(e);
            }
        };
        Ok(Server {
            pulls,
            tx,
            waker,
            thread: Mutex::new(Some(thread)),
            socket,
            tmpdir,
            system_tmpdir,
            nspace,
            rank: options.rank,
            hostname,
            openpmix_uri,
            ds21_dir,
        })
    }

    /// Hands the server output `source` wrote on `channel` (`PMIx_server_IOF_deliver`): it
    /// goes to the tools that pulled it (`PMIx_IOF_pull`), and nowhere if none did (the server
    /// keeps no copy; a tool sees output delivered after its pull). Returns at once; a tool
    /// that does not read loses chunks rather than hold anything up (`docs/TOOLS.md`).
    /// Deliver whole lines where possible: the pull's formats (`IOF_TAG_OUTPUT`, ...) dress
    /// each line.
    pub fn iof_deliver(
        &self,
        source: &Proc,
        channel: pmix_types::IofChannel,
        data: &[u8],
    ) -> Result<(), Error> {
        if self.pulls.load(Ordering::Acquire) == 0 {
            return Ok(());
        }
        let unix_secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let call = Call::IofDeliver {
            source: source.clone(),
            channel,
            data: data.to_vec(),
            unix_secs,
        };
        self.tx
            .send(LoopMsg::Call(call))
            .map_err(|_| Error::Stopped)?;
        let _ = self.waker.wake();
        Ok(())
    }

    fn call<T>(&self, make: impl FnOnce(Sender<T>) -> Call) -> Result<T, Error> {
        let (reply, rx) = bounded(1);
        self.tx
            .send(LoopMsg::Call(make(reply)))
            .map_err(|_| Error::Stopped)?;
        let _ = self.waker.wake();
        rx.recv().map_err(|_| Error::Stopped)
    }

    /// Removes the rendezvous directories that servers which are gone left in `tmpdir` (as
    /// [`Server::init`] does before making its own): for a host that outlives a server killed
    /// without finalizing, e.g. a process that watches a daemon embedding one. Returns how
    /// many were removed.
    pub fn remove_stale_dirs(tmpdir: &Path) -> usize {
        crate::rendezvous::remove_stale_dirs(tmpdir, RENDEZVOUS_PREFIX, SOCKET_NAME)
    }

    /// The path of the server's socket.
    pub fn socket_path(&self) -> &Path {
        &self.socket
    }

    /// The server's own process identifier.
    pub fn proc(&self) -> Proc {
        Proc::new(self.nspace.clone(), self.rank)
    }

    /// The hostname this server considers its node's.
    pub fn hostname(&self) -> &str {
        &self.hostname
    }

    /// Registers a namespace and its information (flat attributes or the standard's
    /// `SESSION/JOB/APP/NODE/PROC_INFO_ARRAY`s, nested to any depth). `nlocalprocs` is the
    /// number of its processes on this node, used when the info does not say which they are:
    /// with a node map that does not name this node, 0 means none (a multi-node host registers
    /// every job on every node, also where it has no process).
    pub fn register_nspace(
        &self,
        nspace: &Nspace,
        nlocalprocs: u32,
        info: &[Info],
    ) -> Result<(), Error> {
        let info = info.to_vec();
        let nspace = nspace.clone();
        self.call(|reply| Call::RegisterNspace {
            nspace,
            nlocalprocs,
            info,
            reply,
        })?
    }

    /// Forgets a namespace: its data, its clients (whose connections are closed) and every
    /// request waiting on it.
    pub fn deregister_nspace(&self, nspace: &Nspace) {
        let nspace = nspace.clone();
        let _ = self.call(|reply| Call::DeregisterNspace { nspace, reply });
    }

    /// Raises an event for this server's clients (`PMIx_Notify_event` on the host's side):
    /// delivered to those that registered for `code` within `range` of `source`
    /// (`PROC_LOCAL`, `NAMESPACE`, `CUSTOM` with `PMIX_EVENT_CUSTOM_RANGE` in `info`; any
    /// other range reaches every client). Returns once the event is queued.
    ///
    /// A multi-node host passes on its other nodes' debugger events here (`docs/TOOLS.md`,
    /// "Debuggers"): a `READY_FOR_DEBUG` whose source is a process of a registered job that is
    /// not local holds that process (delivered to nobody, as a local client's is not); the
    /// job is then ready for the tools once all its processes wait, and the last debugger's
    /// end aborts them all. A `DEBUGGER_RELEASE` is remembered as one raised here is, for a
    /// process it overtakes.
    pub fn notify_event(
        &self,
        code: Status,
        source: &Proc,
        range: DataRange,
        info: &[Info],
    ) -> Result<(), Error> {
        let event = pmix_wire::Event {
            code,
            source: source.clone(),
            range,
            info: info.to_vec(),
        };
        self.tx
            .send(LoopMsg::Call(Call::Notify { event }))
            .map_err(|_| Error::Stopped)?;
        let _ = self.waker.wake();
        Ok(())
    }

    /// Defines process set `name` with `members` (`PMIx_server_define_process_set`), or
    /// redefines it: its clients' queries list it (`QUERY_PSET_NAMES`, `QUERY_NUM_PSETS`,
    /// `QUERY_PSET_MEMBERSHIP`), and every client registered for `PROCESS_SET_DEFINE` hears of
    /// it (`PSET_NAME`, `PSET_MEMBERS`). A name the clients' job data already gives
    /// (`PSET_NAMES`) is listed once.
    pub fn define_process_set(&self, name: &str, members: &[Proc]) -> Result<(), Error> {
        if name.is_empty() {
            return Err(Error::BadParam("a process set needs a name".into()));
        }
        let call = Call::DefinePset {
            name: name.to_owned(),
            members: members.to_vec(),
        };
        self.tx
            .send(LoopMsg::Call(call))
            .map_err(|_| Error::Stopped)?;
        let _ = self.waker.wake();
        Ok(())
    }

    /// Deletes process set `name` (`PMIx_server_delete_process_set`): clients registered for
    /// `PROCESS_SET_DELETE` hear of it. `Error::BadParam` if the host defined none of that
    /// name.
    pub fn delete_process_set(&self, name: &str) -> Result<(), Error> {
        let (reply, rx) = bounded(1);
        let call = Call::DeletePset {
            name: name.to_owned(),
            reply,
        };
        self.tx
            .send(LoopMsg::Call(call))
            .map_err(|_| Error::Stopped)?;
        let _ = self.waker.wake();
        match rx.recv() {
            Ok(true) => Ok(()),
            Ok(false) => Err(Error::BadParam(format!("no process set {name}"))),
            Err(_) => Err(Error::Stopped),
        }
    }

    /// Tells the server that `proc`, a process of another node, ended with `status`: what waits
    /// for it here fails at once with `status` (gets of its data not yet here, fences and
    /// connects it takes part in, including those this node already handed to the host), and so
    /// does what asks for it later; its namespace's local processes get a `status` event naming
    /// it (`PMIX_EVENT_AFFECTED_PROC`). A multi-node host calls this when another node reports
    /// a process that ended without finalize (`ERR_PROC_TERM_WO_SYNC`), or loses a node
    /// (`ERR_LOST_CONNECTION` for each of its processes). Idempotent; unknown processes are
    /// ignored.
    pub fn proc_ended_elsewhere(&self, proc: &Proc, status: Status) -> Result<(), Error> {
        let proc = proc.clone();
        self.tx
            .send(LoopMsg::Call(Call::ProcEndedElsewhere { proc, status }))
            .map_err(|_| Error::Stopped)?;
        let _ = self.waker.wake();
        Ok(())
    }

    /// Tells the server that `proc`, which ended (on this node or another), was started again:
    /// the same rank of the same namespace, in a new life, its `reincarnation`-th (1 for the
    /// first restart). It is no longer gone (fences and gets naming it wait for it again, as
    /// for a process that has not committed yet), and what was known of its earlier life's
    /// data is forgotten: gets of it wait for what the new life commits, here or on its node.
    /// Its `PMIX_REINCARNATION` is `reincarnation` in the job data every client connecting from
    /// now on receives (the new life itself, and its peers) and in the gets this server
    /// answers; clients connected before keep the job data they received at init. A host that
    /// restarts a process calls this before starting it (then registers the client again,
    /// [`Server::register_client`]), and a multi-node host on every other node too. Unknown
    /// processes are ignored.
    pub fn proc_restarted(&self, proc: &Proc, reincarnation: u32) -> Result<(), Error> {
        let proc = proc.clone();
        self.tx
            .send(LoopMsg::Call(Call::ProcRestarted {
                proc,
                reincarnation,
            }))
            .map_err(|_| Error::Stopped)?;
        let _ = self.waker.wake();
        Ok(())
    }

    /// Tells the server that the process of the local client `proc` ended (the host reaped
    /// it). What it sent before is read and acted on first; if that leaves no connection of
    /// it open, whatever waits for it fails with `ERR_PROC_TERM_WO_SYNC` as
    /// [`Server::proc_ended_elsewhere`] says: a process that ended before init, or without
    /// ever being a PMIx client, would otherwise hold every fence of its namespace forever.
    /// A client whose connection closed is known gone already (then this does nothing).
    pub fn client_ended(&self, proc: &Proc) -> Result<(), Error> {
        let proc = proc.clone();
        self.tx
            .send(LoopMsg::Call(Call::ClientEnded { proc }))
            .map_err(|_| Error::Stopped)?;
        let _ = self.waker.wake();
        Ok(())
    }

    /// Registers a local client that will connect with the given user and group ids, with the
    /// default [`ClientOptions`]: any client library may claim it (see
    /// [`Server::register_client_with`]).
    ///
    /// A host that needs per-client state keeps it itself, keyed by the [`Proc`] every
    /// callback receives.
    pub fn register_client(&self, proc: &Proc, uid: u32, gid: u32) -> Result<(), Error> {
        self.register_client_with(proc, uid, gid, &ClientOptions::default())
    }

    /// Registers a local client as [`Server::register_client`] does, saying with `options`
    /// what may claim its name: a host that knows its process is a pmix-rs or PMI-1 client
    /// turns [`ClientOptions::openpmix`] off, and no other process of the user can take the
    /// name through the OpenPMIx port (see `docs/SECURITY.md`).
    pub fn register_client_with(
        &self,
        proc: &Proc,
        uid: u32,
        gid: u32,
        options: &ClientOptions,
    ) -> Result<(), Error> {
        let proofs = Proofs {
            secret: random_bytes::<SECRET_LEN>()?,
            by_uid: options.openpmix,
            lineage: options.openpmix && options.reports_pid,
        };
        let proc = proc.clone();
        self.call(|reply| Call::RegisterClient {
            proc,
            uid,
            gid,
            proofs,
            reply,
        })?
    }

    /// Tells the server the pid of the process started for the registered client `proc`, as
    /// [`ClientOptions::reports_pid`] promised: a claim of its name on the OpenPMIx port must
    /// come from that process or one of its descendants. Call it as soon as the process is
    /// started (a claim made before waits for it).
    pub fn client_started(&self, proc: &Proc, pid: u32) -> Result<(), Error> {
        let proc = proc.clone();
        self.tx
            .send(LoopMsg::Call(Call::ClientStarted { proc, pid }))
            .map_err(|_| Error::Stopped)?;
        let _ = self.waker.wake();
        Ok(())
    }

    /// Forgets a client; closes its connection if it has one.
    pub fn deregister_client(&self, proc: &Proc) {
        let proc = proc.clone();
        let _ = self.call(|reply| Call::DeregisterClient { proc, reply });
    }

    /// The environment a registered client's process must be started with.
    ///
    /// It names this server for pmix-rs clients (`PMIXRS_*`) and, unless
    /// [`ServerOptions::openpmix`] is off or the client was registered with
    /// [`ClientOptions::openpmix`] off, for libpmix clients too (`PMIX_SERVER_URI41` and its
    /// companions; `PMIX_GDS_MODULE=ds21,hash` and the ds21 store's directory unless
    /// [`ServerOptions::ds21`] is off, see `docs/OPENPMIX.md`).
    pub fn setup_fork(&self, proc: &Proc) -> Result<Vec<(String, String)>, Error> {
        let p = proc.clone();
        let proofs = self.call(|reply| Call::ClientProofs { proc: p, reply })?;
        let proofs = proofs.ok_or_else(|| Error::UnknownProc(proc.clone()))?;
        let secret = proofs.secret;
        let mut env: Vec<(String, String)> = vec![
            ("PMIX_NAMESPACE".into(), proc.nspace.to_string()),
            ("PMIX_RANK".into(), proc.rank.0.to_string()),
            (
                ENV_SERVER_URI.into(),
                format!("unix:{}", self.socket.display()),
            ),
            (ENV_SECRET.into(), hex(&secret)),
            (ENV_PROTOCOL.into(), pmix_wire::PROTOCOL_VERSION.to_string()),
            (
                "PMIX_SERVER_TMPDIR".into(),
                self.tmpdir.display().to_string(),
            ),
            (
                "PMIX_SYSTEM_TMPDIR".into(),
                self.system_tmpdir.display().to_string(),
            ),
        ];
        if let Some(uri) = self.openpmix_uri.as_ref().filter(|_| proofs.by_uid) {
            // Both families in one environment: our client prefers PMIXRS_SERVER_URI, a
            // libpmix client reads only the PMIX_* ones.
            env.extend(crate::frontend::openpmix::fork_env(
                uri,
                &self.hostname,
                self.ds21_dir.as_deref(),
            ));
        }
        Ok(env)
    }

    /// How a registered client that speaks MPICH's PMI-1 ("simple PMI") or PMI-2 (Slurm's
    /// libpmi2, MPICH built for it; its `init` line asks for version 2) reaches this server,
    /// and the environment its process must be started with.
    ///
    /// With [`PmiTransport::Fd`] the server makes a connected socket pair and keeps one end;
    /// the other is returned in [`PmiFork::fd`], and the host must pass it to the process and
    /// add `PMI_FD=<its descriptor number in the process>` to the environment (the number is
    /// only known where the process is started). With [`PmiTransport::Port`] the process
    /// connects to a loopback TCP port and names itself with a one-time random `PMI_ID`.
    ///
    /// The environment has `PMI_RANK`, `PMI_SIZE`, `MPI_LOCALNRANKS`, `MPI_LOCALRANKID`, and
    /// `PMI_SPAWNED=1` for a spawned job; `PMI_PORT` and `PMI_ID` with `Port`. It never names
    /// a PMIx variable: MPICH refuses to start when it sees both families, so the host must
    /// also remove any `PMI_*` or `PMIX_*` variable the process would otherwise inherit.
    pub fn setup_fork_pmi1(&self, proc: &Proc, transport: PmiTransport) -> Result<PmiFork, Error> {
        let nspace = proc.nspace.clone();
        let job = self
            .call(|reply| Call::JobData { nspace, reply })?
            .ok_or_else(|| Error::UnknownProc(proc.clone()))?;
        let rank = proc.rank.0;
        let (lrank, lsize) = crate::frontend::pmi1::job::local_rank_and_size(&job, rank);
        let mut env: Vec<(String, String)> = vec![
            ("PMI_RANK".into(), rank.to_string()),
            (
                "PMI_SIZE".into(),
                crate::frontend::pmi1::job::size(&job).to_string(),
            ),
            ("MPI_LOCALNRANKS".into(), lsize.to_string()),
            ("MPI_LOCALRANKID".into(), lrank.to_string()),
        ];
        if crate::frontend::pmi1::job::spawned(&job) {
            env.push(("PMI_SPAWNED".into(), "1".into()));
        }
        let mut tries = 0;
        loop {
            let how = match transport {
                PmiTransport::Fd => Pmi1Way::Fd,
                // MPICH reads PMI_ID as a C int: a positive 31-bit number.
                PmiTransport::Port => {
                    Pmi1Way::Port(u32::from_ne_bytes(random_bytes::<4>()?) & 0x7fff_ffff)
                }
            };
            let p = proc.clone();
            match self.call(|reply| Call::Pmi1Connect {
                proc: p,
                how,
                reply,
            })? {
                Ok(Pmi1Endpoint::Fd(fd)) => return Ok(PmiFork { env, fd: Some(fd) }),
                Ok(Pmi1Endpoint::Port(port)) => {
                    let Pmi1Way::Port(id) = how else {
                        unreachable!("a port answers a port request")
                    };
                    env.push(("PMI_PORT".into(), format!("127.0.0.1:{port}")));
                    env.push(("PMI_ID".into(), id.to_string()));
                    return Ok(PmiFork { env, fd: None });
                }
                Err(e) if tries < 3 && matches!(transport, PmiTransport::Port) => {
                    tracing::debug!("PMI_ID collision, drawing another: {e}");
                    tries += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Asks for the data of a local process on behalf of another node (the host's direct
    /// modex). `done` runs on the event-loop thread once the process has committed, with bytes
    /// the requesting node's server understands (pass them to its `direct_modex` completion).
    /// `info` is what the requesting server's `direct_modex` was given: with
    /// `PMIX_REQUIRED_KEY`, the answer waits until the process's data holds that key; with
    /// `PMIX_TIMEOUT`, it is `ERR_TIMEOUT` once that passed.
    pub fn dmodex_request(
        &self,
        proc: &Proc,
        info: &[Info],
        done: impl FnOnce(Result<Vec<u8>, Status>) + Send + 'static,
    ) {
        let msg = LoopMsg::Call(Call::Dmodex {
            proc: proc.clone(),
            info: info.to_vec(),
            done: Box::new(done),
        });
        match self.tx.send(msg) {
            Ok(()) => {
                let _ = self.waker.wake();
            }
            Err(crossbeam_channel::SendError(LoopMsg::Call(Call::Dmodex { done, .. }))) => {
                done(Err(Status::ERR_INIT))
            }
            Err(_) => {}
        }
    }

    /// Reads and acts on everything the client `proc` has sent so far, then runs `done` on the
    /// event-loop thread. For a host that saw a process end: the process may have written its
    /// last requests (an abort) just before, and the server may not have read them yet; once
    /// `done` runs, every host callback they cause has been made.
    pub fn settle_client(&self, proc: &Proc, done: impl FnOnce() + Send + 'static) {
        let msg = LoopMsg::Call(Call::SettleClient {
            proc: proc.clone(),
            done: Box::new(done),
        });
        match self.tx.send(msg) {
            Ok(()) => {
                let _ = self.waker.wake();
            }
            Err(crossbeam_channel::SendError(LoopMsg::Call(Call::SettleClient {
                done, ..
            }))) => done(),
            Err(_) => {}
        }
    }

    /// Stops the server: closes every connection, removes the socket and the rendezvous
    /// directory (and nothing else), and joins the event-loop thread. Idempotent.
    pub fn finalize(&self) -> Result<(), Error> {
        let Some(thread) = self.thread.lock().take() else {
            return Ok(());
        };
        let _ = self.tx.send(LoopMsg::Shutdown);
        let _ = self.waker.wake();
        thread.join().map_err(|_| Error::Stopped)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.finalize();
    }
}

/// How a PMI-1 process reaches the server (see [`Server::setup_fork_pmi1`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PmiTransport {
    /// An inherited, already connected socket (`PMI_FD`), as Hydra does by default.
    Fd,
    /// Loopback TCP (`PMI_PORT`), the process naming itself with a one-time `PMI_ID`.
    Port,
}

/// What a PMI-1 process is started with.
#[derive(Debug)]
pub struct PmiFork {
    /// Environment variables to set.
    pub env: Vec<(String, String)>,
    /// With [`PmiTransport::Fd`]: the process's end of its connection, to be inherited by it
    /// and named in `PMI_FD`. Dropping it unused closes the connection.
    pub fd: Option<std::os::fd::OwnedFd>,
}

/// Creates `path`, a directory only this user may enter, which must not exist yet.
fn private_dir(path: std::path::PathBuf) -> Result<std::path::PathBuf, Error> {
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&path)
        .map_err(Error::io(format!("creating {}", path.display())))?;
    Ok(path)
}
