//! `pmixrun`: the reference launcher, a host built only on the public API of `pmix-server`.
//!
//! It starts a PMIx server, registers one job (its application contexts, this node's maps),
//! starts every process with the environment `setup_fork` gives, forwards their output and
//! pmixrun's signals, and exits with the job's status. A process may spawn further jobs; they
//! are registered and started the same way, and the run ends when every job has. See
//! `pmixrun --help`.

mod cli;
mod modes;
mod multinode;
mod node;
mod plan;
mod setup;
mod supervise;

use std::process::ExitCode;

use crate::multinode::{bootstrap, daemon, guardian};
use crate::node::launch;
use crate::setup::{catch_signals, init_logging};

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
    if argv.first().is_some_and(|a| a == modes::adopt::ADOPT_FLAG) {
        init_logging(false);
        let result = catch_signals().and_then(|signals| modes::adopt::run(&argv[1..], signals));
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
            modes::nameserver::run(&o, signals)
        }
        cli::Mode::Job(o) => {
            init_logging(o.verbose);
            modes::single::run(o, signals)
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
