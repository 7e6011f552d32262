//! What every mode of pmixrun sets up the same way: logging, the forwarded signals, this
//! machine's name, the connection to a name server, and pmixrun's PMIx server.

use std::sync::Arc;

use crossbeam_channel::Sender;
use nix::sys::signal::{SigSet, Signal};
use pmix_server::{NameServerClient, NameService, Server, ServerOptions};
use signal_hook::iterator::Signals;

use crate::node::host::{Event, RunHost};
use crate::node::{launch, output, stdin};

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
pub(crate) fn catch_signals() -> Result<Signals, String> {
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
/// The PMIx server of a one-node run, its host [`RunHost`] reporting to `events`, names
/// served by the name server if there is one, else by the server itself; the node's system
/// server too when `system` (`--system-server`).
pub(crate) fn start_server(
    events: &Sender<Event>,
    names: Option<&Arc<NameServerClient>>,
    stdin: Option<Arc<stdin::Router>>,
    system: bool,
) -> Result<Server, String> {
    let mut host = RunHost::new(events.clone(), names.cloned());
    if let Some(router) = stdin {
        host = host.with_stdin(router);
    }
    start_server_with(host, names.is_some(), system)
}

/// The PMIx server of pmixrun with `host`, tools served; names by the host when `named`
/// (it has a name server), else by the server itself; the node's system server too when
/// `system`.
pub(crate) fn start_server_with(
    host: RunHost,
    named: bool,
    system: bool,
) -> Result<Server, String> {
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
            system_server: system,
            ..ServerOptions::default()
        },
    )
    .map_err(|e| format!("cannot start the PMIx server: {e}"))
}
