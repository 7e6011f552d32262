//! The tool programs of the tests (`tests/tools.rs`, `tests/iof.rs`): each one written on
//! python3-pmix, on libpmix (run with Debian's 4.2 or Open MPI 5's 5.0.11) and on the Rust
//! `Tool`, with the same arguments and output lines.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::{cargo_build, openpmix_program, openpmix_python_client, openpmix_sources, profile_dir};

/// Which library a tool program is built on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolLib {
    /// `openpmix/<name>.py` on python3-pmix (OpenPMIx 4.2).
    Python,
    /// `openpmix/<name>.c` with Debian's libpmix 4.2.
    C,
    /// `openpmix/<name>.c` with Open MPI 5's OpenPMIx 5.0.11.
    CWheel,
    /// A `pmix-tests` binary on the Rust `Tool` (native protocol to pmix-rs servers).
    Rust,
}

/// The command running tool `name` of `lib` (`rust_bin`: the name of its Rust twin) with
/// `args`: no PMIx variables of the test's environment, stdin /dev/null, stdout and stderr
/// piped.
pub fn tool_command(lib: ToolLib, name: &str, rust_bin: &str, args: &[&str]) -> Command {
    let argv: Vec<OsString> = match lib {
        ToolLib::Python => {
            let (python, _) = openpmix_python_client();
            vec![
                python.into(),
                "-W".into(),
                "ignore".into(),
                openpmix_sources().join(format!("{name}.py")).into(),
            ]
        }
        ToolLib::C | ToolLib::CWheel => vec![openpmix_program(name).into()],
        ToolLib::Rust => vec![rust_program(rust_bin).into()],
    };
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .args(args)
        .env_remove("PMIXRS_SERVER_URI")
        .env_remove("PMIX_SERVER_URI41")
        .env_remove("PMIX_SERVER_URI4")
        .env_remove("PMIX_SERVER_URI3")
        .env_remove("PMIX_SERVER_URI21")
        .env_remove("PMIX_NAMESPACE")
        .env_remove("PMIX_RANK")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if lib == ToolLib::CWheel {
        crate::use_ompi5_libpmix(&mut cmd);
    }
    cmd
}

/// A `pmix-tests` binary, built once per test process.
fn rust_program(bin: &str) -> PathBuf {
    use std::collections::HashSet;
    use std::sync::Mutex;
    static BUILT: Mutex<Option<HashSet<String>>> = Mutex::new(None);
    let mut built = BUILT
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let set = built.get_or_insert_with(HashSet::new);
    if !set.contains(bin) {
        cargo_build(&["-p", "pmix-tests", "--bin", bin]);
        set.insert(bin.to_owned());
    }
    profile_dir().join(bin)
}

/// The lines `iof rank=R channel=C line=L` a tool printed, as `(R, C, L)`, sorted.
pub fn iof_lines(out: &crate::Output) -> Vec<(String, String, String)> {
    let mut v: Vec<_> = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("iof rank="))
        .filter_map(|l| {
            let (rank, rest) = l.split_once(" channel=")?;
            let (channel, line) = rest.split_once(" line=")?;
            Some((rank.to_owned(), channel.to_owned(), line.to_owned()))
        })
        .collect();
    v.sort();
    v
}

/// Checks that a tool's pull from a held echoing job of `prterun` (two ranks, fed `line R for
/// the tools`) got every rank's lines with their channel: the `held` line `prterun` cached
/// before the pull (a pmix-rs server keeps none), then what came after.
pub fn assert_pulled_from_prterun(got: &crate::Output, what: &str) {
    let lines = iof_lines(got);
    for r in ["0", "1"] {
        for (channel, line) in [
            ("stdout", format!("held rank={r} pid=")),
            ("stdout", format!("line {r} for the tools")),
            ("stdout", format!("fed rank={r}")),
            ("stderr", format!("bye rank={r}")),
        ] {
            assert!(
                lines
                    .iter()
                    .any(|(rr, c, l)| rr == r && c == channel && l.starts_with(&line)),
                "{what}: no {channel} line {line:?} of rank {r}: {got:#?}"
            );
        }
    }
}
