//! Open MPI 5 for the tests (`tests/ompi5.rs`, `tests/capi.rs`): its tools under the prefix
//! `$PMIXRS_OMPI5` (default `/opt/ompi5`, the PyPI wheel in a venv) and the MPI test programs
//! of `pmix-tests/mpi/` compiled with its `mpicc`, all at once, once per test process.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::{INSTALL_TEST_DEPS, compile_c, compiled_programs_dir};

/// Where Open MPI 5 is: `$PMIXRS_OMPI5`, default `/opt/ompi5`.
pub fn ompi5_prefix() -> PathBuf {
    std::env::var_os("PMIXRS_OMPI5")
        .unwrap_or_else(|| "/opt/ompi5".into())
        .into()
}

/// `<prefix>/bin/<tool>`, or a failure saying how to install it.
pub fn ompi5_tool(tool: &str) -> PathBuf {
    let path = ompi5_prefix().join("bin").join(tool);
    assert!(
        path.is_file(),
        "Open MPI 5: {} is missing (set PMIXRS_OMPI5 to its prefix); {INSTALL_TEST_DEPS}, \
         and Open MPI 5.0.11 into /opt/ompi5",
        path.display()
    );
    path
}

/// The programs: (executable, source in `pmix-tests/mpi`, extra compiler arguments).
const PROGRAMS: [(&str, &str, &[&str]); 9] = [
    ("hello", "hello.c", &[]),
    ("mpmd_a", "mpmd.c", &["-DMPMD_APP=0"]),
    ("mpmd_b", "mpmd.c", &["-DMPMD_APP=1"]),
    ("abort", "abort.c", &[]),
    ("names", "names.c", &[]),
    ("spawn", "spawn.c", &[]),
    ("connect", "connect.c", &[]),
    ("sessions", "sessions.c", &[]),
    ("ulfm", "ulfm.c", &[]),
];

/// The directory of the programs compiled with Open MPI 5's `mpicc`.
fn programs() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let mpicc = ompi5_tool("mpicc");
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("mpi");
        let dir = compiled_programs_dir("ompi5");
        std::thread::scope(|s| {
            let compiling: Vec<_> = PROGRAMS
                .iter()
                .map(|(exe, source, extra)| {
                    let cflags: Vec<String> = ["-O1", "-Wall", "-Wextra", "-Werror"]
                        .iter()
                        .chain(extra.iter())
                        .map(|f| (*f).to_owned())
                        .collect();
                    let (mpicc, src, dir) = (&mpicc, &src, &dir);
                    s.spawn(move || compile_c(mpicc, &cflags, &src.join(source), &[], dir, exe))
                })
                .collect();
            for c in compiling {
                if let Err(e) = c.join().expect("a compiling thread panicked") {
                    panic!("Open MPI 5: {e}");
                }
            }
        });
        dir
    })
}

/// The path of program `exe` (one of `hello`, `mpmd_a`, `mpmd_b`, `abort`, `names`, `spawn`,
/// `connect`, `sessions`, `ulfm`), compiled with Open MPI 5's `mpicc`.
pub fn ompi5_program(exe: &str) -> String {
    programs().join(exe).display().to_string()
}
