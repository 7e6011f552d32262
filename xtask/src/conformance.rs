//! `cargo xtask conformance` (being written).

use std::process::ExitCode;

/// Entry point of `cargo xtask conformance`.
pub(crate) fn run(_args: &[String]) -> ExitCode {
    eprintln!("xtask: conformance is not yet implemented");
    ExitCode::from(2)
}
