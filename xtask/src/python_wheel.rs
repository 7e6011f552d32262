//! `cargo xtask python-wheel [maturin args...]`: the wheel of the `pmix` Python module
//! (pmix-python), one abi3 wheel for every CPython from 3.8, built by `maturin build --release`
//! with the maturin of the venv at `$PMIXRS_MATURIN` (default /opt/maturin, which
//! `scripts/install-test-deps.sh` makes). The wheel lands in `target/wheels/`; further
//! arguments go to maturin as they are (`--out DIR`, `--interpreter ...`).

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use crate::workspace_root;

/// The maturin to run.
fn maturin() -> PathBuf {
    std::env::var_os("PMIXRS_MATURIN")
        .map_or_else(|| PathBuf::from("/opt/maturin"), PathBuf::from)
        .join("bin")
        .join("maturin")
}

/// Builds the wheel; its exit code is maturin's.
pub(crate) fn run(args: &[String]) -> ExitCode {
    if args.iter().any(|a| a == "--help" || a == "-h") {
        eprintln!(
            "usage: cargo xtask python-wheel [maturin build args...]\n\n\
             Builds the `pmix` module's wheel (pmix-python) into target/wheels/ with \
             `maturin build --release`, maturin from $PMIXRS_MATURIN (default /opt/maturin)."
        );
        return ExitCode::SUCCESS;
    }
    let maturin = maturin();
    if !maturin.is_file() {
        eprintln!(
            "xtask python-wheel: no {}: run `bash scripts/install-test-deps.sh` as root \
             (or set PMIXRS_MATURIN to a venv with maturin)",
            maturin.display()
        );
        return ExitCode::FAILURE;
    }
    let root = workspace_root();
    let manifest = root.join("pmix-python").join("Cargo.toml");
    eprintln!("xtask python-wheel: {} build --release", maturin.display());
    let status = Command::new(&maturin)
        .args(["build", "--release", "--manifest-path"])
        .arg(&manifest)
        .args(args)
        .current_dir(&root)
        .status();
    match status {
        Ok(s) if s.success() => ExitCode::SUCCESS,
        Ok(s) => {
            eprintln!("xtask python-wheel: maturin failed ({s})");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("xtask python-wheel: running {}: {e}", maturin.display());
            ExitCode::FAILURE
        }
    }
}
