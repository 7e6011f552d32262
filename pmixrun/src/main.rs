//! `pmixrun`: the reference launcher, a host built only on the public API of `pmix-server`.
//!
//! It starts a PMIx server, registers one job (its application contexts, this node's maps),
//! starts every process with the environment `setup_fork` gives, forwards their output and
//! pmixrun's signals, and exits with the job's status. A process may spawn further jobs; they
//! are registered and started the same way, and the run ends when every job has. See
//! `pmixrun --help`.

mod adopt;
mod binding;
mod bootstrap;
mod capacity;
mod cli;
mod daemon;
mod daemon_host;
mod debug;
mod detect;
mod guardian;
mod host;
mod job;
mod jobs;
mod join;
mod launch;
mod launcher_env;
mod output;
mod placement;
mod root;
mod root_cross;
mod root_jobs;
mod root_sink;
mod root_tools;
mod run_msg;
mod stdin;
mod supervise;
mod syslog;
mod topology;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Sender, unbounded};
use nix::sys::signal::{SigSet, Signal};
use pmix_server::types::{Info, Nspace, Rank, attr};
use pmix_server::{NameServer, NameServerClient, NameService, Server, ServerOptions};
use signal_hook::iterator::Signals;

use crate::host::{Event, RunHost};
use crate::jobs::RunJobs;
use crate::supervise::Supervisor;

/// How long output still in the pipes may take to arrive once every process has ended (a
/// process's own children may hold the pipes open forever).
pub(crate) const OUTPUT_DRAIN: Duration = Duration::from_secs(2);

/// The signals pmixrun passes on to the job.
const FORWARDED: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// Gets ready to receive the forwarded signals, which are queued from now on.
///
/// They are caught by handlers (signal-hook's, which write to a self-pipe that
/// [`start_signal_thread`] reads), not blocked and waited for: a process inherits its creator's
/// signal mask through fork and exec, and std's `Command` does not reset it, whereas handlers
/// go back to the default action on exec. So pmixrun also empties the mask it inherited, and
/// its processes start with an empty mask and default actions (std resets the SIGPIPE Rust
/// ignores) without any code of pmixrun's running between fork and exec.
fn catch_signals() -> Result<Signals, String> {
    SigSet::empty()
        .thread_set_mask()
        .map_err(|e| format!("cannot unblock signals: {e}"))?;
    Signals::new(FORWARDED.map(|s| s as i32))
        .map_err(|e| format!("cannot catch signals: {}", launch::describe(&e)))
}

/// Receives the forwarded signals on a dedicated thread and passes them on as events.
pub(crate) fn start_signal_thread(
    mut signals: Signals,
    events: Sender<Event>,
) -> Result<(), String> {
    std::thread::Builder::new()
        .name("signals".into())
        .stack_size(output::SMALL_STACK)
        .spawn(move || {
            for sig in signals.forever() {
                let Ok(sig) = Signal::try_from(sig) else {
                    continue;
                };
                if events.send(Event::Signal(sig)).is_err() {
                    break;
                }
            }
        })
        .map(drop)
        .map_err(|e| format!("cannot start the signal thread: {}", launch::describe(&e)))
}

pub(crate) fn init_logging(verbose: bool) {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(if verbose { "debug" } else { "warn" }));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// The environment variable that stands for `--nameserver-uri`.
const ENV_NAMESERVER: &str = "PMIXRS_NAMESERVER";

pub(crate) fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into())
}

/// Connects to the name server the options or the environment name, if any.
pub(crate) fn connect_nameserver(
    given: Option<&str>,
) -> Result<Option<Arc<NameServerClient>>, String> {
    let from_env = std::env::var(ENV_NAMESERVER).ok();
    let Some(spec) = given.or(from_env.as_deref()).filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    let uri = match spec.strip_prefix("file:") {
        Some(file) => std::fs::read_to_string(file)
            .map_err(|e| {
                format!(
                    "cannot read the name server's URI from {file}: {}",
                    launch::describe(&e)
                )
            })?
            .trim()
            .to_owned(),
        None => spec.to_owned(),
    };
    NameServerClient::connect(&uri, &hostname())
        .map(|c| Some(Arc::new(c)))
        .map_err(|e| format!("cannot use the name server {uri}: {e}"))
}

/// The name server's default directory, `pmixrs-ns.<pid>.<random>` under $TMPDIR.
pub(crate) const NAMESERVER_PREFIX: &str = "pmixrs-ns";

/// The name server's socket in its default directory.
pub(crate) const NAMESERVER_SOCKET: &str = "names.sock";

/// `pmixrun --nameserver`: serves names until SIGINT, SIGTERM or SIGHUP.
fn run_nameserver(opts: &cli::NameServerOptions, mut signals: Signals) -> Result<u8, String> {
    let (path, dir) = match &opts.socket {
        Some(p) => (p.clone(), None),
        None => {
            // Unpredictable, so that nobody can take it first; those of name servers killed
            // before they could remove theirs go first.
            let tmp = std::env::temp_dir();
            pmix_server::rendezvous::remove_stale_dirs(&tmp, NAMESERVER_PREFIX, NAMESERVER_SOCKET);
            let dir = pmix_server::rendezvous::create_private_dir(&tmp, NAMESERVER_PREFIX)
                .map_err(|e| format!("cannot make the name server's directory: {e}"))?;
            (dir.join(NAMESERVER_SOCKET), Some(dir))
        }
    };
    let cleanup = |report: Option<&PathBuf>| {
        if let Some(f) = report {
            let _ = std::fs::remove_file(f);
        }
        if let Some(d) = &dir {
            let _ = std::fs::remove_dir(d);
        }
    };
    let started = if opts.one_session {
        NameServer::start_one_session(&path, 0o600)
    } else {
        NameServer::start(&path, 0o600)
    };
    let server = match started {
        Ok(s) => s,
        Err(e) => {
            cleanup(None);
            return Err(format!("cannot start the name server: {e}"));
        }
    };
    let uri = server.uri().to_owned();
    if let Some(file) = &opts.report_uri {
        // Written whole and then renamed, so that a reader never sees half a URI.
        let tmp = file.with_extension("tmp");
        let written =
            std::fs::write(&tmp, format!("{uri}\n")).and_then(|()| std::fs::rename(&tmp, file));
        if let Err(e) = written {
            server.stop();
            cleanup(None);
            return Err(format!(
                "cannot write {}: {}",
                file.display(),
                launch::describe(&e)
            ));
        }
    }
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{uri}");
        let _ = out.flush();
    }
    if let Some(sig) = signals.forever().next() {
        tracing::debug!(sig, "name server stopping");
    }
    server.stop();
    cleanup(opts.report_uri.as_ref());
    Ok(0)
}

/// The PMIx server of a one-node run, its host [`RunHost`] reporting to `events`, names
/// served by the name server if there is one, else by the server itself.
pub(crate) fn start_server(
    events: &Sender<Event>,
    names: Option<&Arc<NameServerClient>>,
    stdin: Option<Arc<stdin::Router>>,
) -> Result<Server, String> {
    let mut host = RunHost::new(events.clone(), names.cloned());
    if let Some(router) = stdin {
        host = host.with_stdin(router);
    }
    start_server_with(host, names.is_some())
}

/// The PMIx server of pmixrun with `host`, tools served; names by the host when `named`
/// (it has a name server), else by the server itself.
pub(crate) fn start_server_with(host: RunHost, named: bool) -> Result<Server, String> {
    Server::init(
        host,
        ServerOptions {
            name_service: if named {
                NameService::Host
            } else {
                NameService::BuiltIn
            },
            // Debuggers and monitors attach by pmixrun's pid (docs/TOOLS.md).
            tool_support: true,
            ..ServerOptions::default()
        },
    )
    .map_err(|e| format!("cannot start the PMIx server: {e}"))
}

/// Everything before the first process starts; an error here is a one-line message.
fn run(opts: cli::Options, signals: Signals) -> Result<u8, String> {
    let layout = job::Layout::new(&opts.apps)?;
    // The nodes: those named, else those of the Slurm allocation pmixrun runs in (unless
    // told to stay on this machine), else this machine alone.
    let named = placement::NodeList::from_options(&opts.nodes)?;
    let from_allocation = named.is_none() && opts.nodes.launcher != Some(cli::Launcher::Local);
    let nodes = match named {
        Some(n) => Some(n),
        None if from_allocation => placement::NodeList::from_allocation()?,
        None if opts.nodes.launcher == Some(cli::Launcher::Slurm) => {
            return Err(
                "--launcher slurm: not inside a Slurm allocation (no SLURM_JOB_NODELIST)".into(),
            );
        }
        None => None,
    };
    let nodes = match nodes {
        Some(nodes) => {
            let n = &opts.nodes;
            let placement = placement::Placement::map(&nodes, &layout, n.map_by, n.oversubscribe)?;
            Some((nodes, placement))
        }
        None => None,
    };
    let cwd = std::env::current_dir().map_err(|e| {
        format!(
            "cannot find the current directory: {}",
            launch::describe(&e)
        )
    })?;
    for app in &opts.apps {
        let dir = job::wdir_of(app, &cwd);
        if app.wdir.is_some() && !dir.is_dir() {
            return Err(format!("--wdir {}: not a directory", dir.display()));
        }
    }
    let user_env: Vec<_> = opts.apps.iter().map(launch::app_env).collect();
    let pmi = match opts.pmi {
        cli::Protocol::Auto => {
            // A PMI program (libpmi2, MPICH) anywhere in the job makes it a PMI job.
            let pmi = opts.apps.iter().zip(&user_env).find_map(|(app, env)| {
                launch::find_program(&app.program, &job::wdir_of(app, &cwd), env)
                    .ok()
                    .map(|p| detect::protocol_of(&p))
                    .filter(|p| p.is_pmi())
            });
            match pmi {
                Some(p) => {
                    tracing::debug!("PMI program: speaking {p:?}");
                    p
                }
                None => cli::Protocol::Pmix,
            }
        }
        p => p,
    };

    if opts.stop_in_init && pmi.is_pmi() {
        return Err(
            "--stop-in-init: PMI-1 and PMI-2 processes have no PMIx init to hold them in".into(),
        );
    }
    if opts.stop_in_init && nodes.is_some() {
        return Err(
            "--stop-in-init: on one node only (the root, where debuggers attach, does not learn \
             when every node's processes wait; docs/TOOLS.md)"
                .into(),
        );
    }
    let names = connect_nameserver(opts.nameserver_uri.as_deref())?;
    if let Some((nodes, placement)) = nodes {
        let r = root::RootRun {
            opts,
            nodes,
            placement,
            layout,
            cwd,
            user_env,
            pmi,
            names,
            from_allocation,
        };
        return root::run(r, signals);
    }
    let (events_tx, events) = unbounded();
    start_signal_thread(signals, events_tx.clone())?;
    let nspace = Nspace::new(format!("pmixrun-{}", std::process::id()))
        .map_err(|e| format!("cannot name the job: {e}"))?;
    let router = stdin::Router::new();
    router.set_first(nspace.clone());
    let server = Arc::new(start_server(
        &events_tx,
        names.as_ref(),
        Some(router.clone()),
    )?);

    let (lines_tx, lines) = unbounded();
    let jobs = RunJobs {
        server: &server,
        names,
        cwd,
        first: nspace.clone(),
        spawned: 0,
        events: events_tx,
        lines: lines_tx,
        pmi,
        place: opts.place,
        group_rank: 0,
        master_addr: server.hostname().to_owned(),
        stdin: Some((opts.stdin, router.clone())),
    };
    let debug = opts
        .stop_in_init
        .then(|| Info::attr(attr::DEBUG_STOP_IN_INIT, Rank::WILDCARD));
    jobs.register(&nspace, &opts.apps, &layout, debug.into_iter().collect())?;
    let tools = output::to_tools(server.clone(), nspace.clone());
    let output_done = output::start_writer(opts.tag_output, lines, None, Some(tools))
        .map_err(|e| format!("cannot start the output thread: {}", launch::describe(&e)))?;
    let mut sup = Supervisor::new(jobs, opts.timeout);
    sup.set_grace(opts.grace);
    let job = sup.add_job(nspace.clone(), layout.size);
    let (procs, failed) = sup
        .jobs_mut()
        .start(&nspace, 0, &opts.apps, &layout, &user_env);
    for l in procs {
        sup.started(job, l);
    }
    if let Some(e) = failed {
        sup.not_started(job, e.code, &e.message);
    }
    if opts.stdin != stdin::Target::None {
        if stdin::is_background_terminal() {
            tracing::debug!("stdin is a terminal pmixrun is in the background of: not read");
        } else {
            if let Err(e) = router.forward_own_stdin() {
                // The processes are running: they go on without input.
                tracing::warn!("cannot start the stdin thread: {}", launch::describe(&e));
            }
        }
    }
    // The supervisor holds the last senders of output (for spawned jobs) apart from the
    // readers': once it is done, the writer ends when the last pipe closes.
    let status = sup.run(&events);
    if output_done.recv_timeout(OUTPUT_DRAIN).is_err() {
        tracing::warn!("output still open after every process ended; not waiting for it");
    }
    if let Err(e) = server.finalize() {
        tracing::warn!("finalizing the server: {e}");
    }
    Ok(status)
}

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
    if argv.first().is_some_and(|a| a == launch::EXEC_MARKER) {
        return ExitCode::from(launch::exec_program(&argv[1..]));
    }
    let daemon = argv.first().is_some_and(|a| a == bootstrap::DAEMON_FLAG);
    let worker = argv.first().is_some_and(|a| a == guardian::WORKER_FLAG);
    launch::raise_descriptor_limit();
    if daemon || worker {
        return match catch_signals() {
            Ok(signals) => ExitCode::from(if worker {
                daemon::run(signals)
            } else {
                guardian::run(signals)
            }),
            Err(e) => {
                eprintln!("pmixrun daemon: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if argv.first().is_some_and(|a| a == adopt::ADOPT_FLAG) {
        init_logging(false);
        let result = catch_signals().and_then(|signals| adopt::run(&argv[1..], signals));
        return match result {
            Ok(status) => ExitCode::from(status),
            Err(msg) => {
                eprintln!("pmixrun: {msg}");
                ExitCode::FAILURE
            }
        };
    }
    let mode = match cli::parse_mode(argv) {
        Ok(m) => m,
        Err(e) => e.exit(),
    };
    let signals = match catch_signals() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("pmixrun: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match mode {
        cli::Mode::NameServer(o) => {
            init_logging(o.verbose);
            run_nameserver(&o, signals)
        }
        cli::Mode::Job(o) => {
            init_logging(o.verbose);
            run(o, signals)
        }
    };
    match result {
        Ok(status) => ExitCode::from(status),
        Err(msg) => {
            eprintln!("pmixrun: {msg}");
            ExitCode::FAILURE
        }
    }
}
