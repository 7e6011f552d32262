//! `pmixrun --nameserver`: a name server alone, for runs that publish and connect across
//! each other.

use std::path::PathBuf;

use pmix_server::NameServer;
use signal_hook::iterator::Signals;

use crate::cli;
use crate::node::launch;

/// The name server's default directory, `pmixrs-ns.<pid>.<random>` under $TMPDIR.
pub(crate) const NAMESERVER_PREFIX: &str = "pmixrs-ns";

/// The name server's socket in its default directory.
pub(crate) const NAMESERVER_SOCKET: &str = "names.sock";

/// `pmixrun --nameserver`: serves names until SIGINT, SIGTERM or SIGHUP.
pub(crate) fn run(opts: &cli::NameServerOptions, mut signals: Signals) -> Result<u8, String> {
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
