//! Project automation for pmix-rs, run as `cargo xtask <command>` (an alias in
//! `.cargo/config.toml`).
//!
//! Commands:
//! - `gen-attrs [--check]`: regenerate `pmix-types/src/attr/generated.rs` from
//!   `pmix-types/attributes.tsv`; with `--check`, only report whether it is up to date.
//!
//! - `conformance`: run the conformance scenarios against our stack and print a matrix.
//! - `bench`: run the benchmark workloads on our stack and on OpenPMIx, side by side
//!   (`--multinode`: launchers side by side on the pretend cluster, as root).
//! - `multinode`: pmixrun and the reference launchers on the pretend cluster (as root).
//! - `python-wheel`: the `pmix` Python module's wheel (pmix-python), by maturin.
//!
//! `fuzz` is a reserved name: it fails with exit code 2 rather than pretend to succeed.

mod bench;
mod conformance;
mod gen_attrs;
mod multinode;
mod python_wheel;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// One subcommand.
struct Command {
    name: &'static str,
    usage: &'static str,
    run: fn(&[String]) -> ExitCode,
}

/// Every subcommand, in the order `help` lists them.
const COMMANDS: &[Command] = &[
    Command {
        name: "gen-attrs",
        usage: "gen-attrs [--check]   regenerate the attribute table (or check it is fresh)",
        run: run_gen_attrs,
    },
    Command {
        name: "conformance",
        usage: "conformance [...]     run the conformance scenarios (--help for options)",
        run: conformance::run,
    },
    Command {
        name: "bench",
        usage: "bench [...]           benchmarks, ours next to OpenPMIx (--help for options)",
        run: bench::run,
    },
    Command {
        name: "multinode",
        usage: "multinode [...]       multi-node scenarios on the pretend cluster (root)",
        run: multinode::run,
    },
    Command {
        name: "python-wheel",
        usage: "python-wheel [...]    the pmix Python module's wheel, by maturin (--help)",
        run: python_wheel::run,
    },
    Command {
        name: "fuzz",
        usage: "fuzz                  (not yet implemented)",
        run: not_yet_implemented,
    },
];

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(first) = args.first() else {
        print_usage();
        return ExitCode::from(2);
    };
    if matches!(first.as_str(), "help" | "-h" | "--help") {
        print_usage();
        return ExitCode::SUCCESS;
    }
    match COMMANDS.iter().find(|c| c.name == first) {
        Some(command) => (command.run)(&args[1..]),
        None => {
            eprintln!("xtask: unknown command {first:?}");
            print_usage();
            ExitCode::from(2)
        }
    }
}

fn print_usage() {
    eprintln!("usage: cargo xtask <command>\n\ncommands:");
    for command in COMMANDS {
        eprintln!("    {}", command.usage);
    }
}

fn not_yet_implemented(_args: &[String]) -> ExitCode {
    eprintln!("xtask: this command is not yet implemented");
    ExitCode::from(2)
}

/// The workspace root: xtask sits directly below it.
fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir.parent().unwrap_or(manifest_dir).to_path_buf()
}

fn run_gen_attrs(args: &[String]) -> ExitCode {
    let check = match args {
        [] => false,
        [flag] if flag == "--check" => true,
        _ => {
            eprintln!("usage: cargo xtask gen-attrs [--check]");
            return ExitCode::from(2);
        }
    };
    let root = workspace_root();
    let tsv_path = root.join(gen_attrs::TSV_PATH);
    let out_path = root.join(gen_attrs::OUT_PATH);
    let tsv = match std::fs::read_to_string(&tsv_path) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("xtask: cannot read {}: {e}", tsv_path.display());
            return ExitCode::FAILURE;
        }
    };
    let generated = match gen_attrs::generate(&tsv) {
        Ok(text) => text,
        Err(errors) => {
            for error in errors {
                eprintln!("{}: {error}", gen_attrs::TSV_PATH);
            }
            return ExitCode::FAILURE;
        }
    };
    let current = std::fs::read_to_string(&out_path).unwrap_or_default();
    if current == generated {
        return ExitCode::SUCCESS;
    }
    if check {
        eprintln!(
            "xtask: {} is stale; run `cargo xtask gen-attrs`",
            gen_attrs::OUT_PATH
        );
        return ExitCode::FAILURE;
    }
    match std::fs::write(&out_path, generated) {
        Ok(()) => {
            eprintln!("xtask: wrote {}", gen_attrs::OUT_PATH);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("xtask: cannot write {}: {e}", out_path.display());
            ExitCode::FAILURE
        }
    }
}
