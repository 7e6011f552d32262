//! `cargo xtask bench` (being written).

use std::process::ExitCode;

/// Entry point of `cargo xtask bench`.
pub(crate) fn run(_args: &[String]) -> ExitCode {
    eprintln!("xtask: bench is not yet implemented");
    ExitCode::from(2)
}
