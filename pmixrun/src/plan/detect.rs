//! What a program expects of its launcher, judged from the shared libraries it links.
//!
//! `--pmi auto`: a program linking Slurm's `libpmi2.so` speaks PMI-2; an MPICH program links
//! `libmpi.so.12` (MPICH's ABI; Open MPI's is `libmpi.so.40`) or, for older builds,
//! `libmpich.so`: it speaks PMI-1, or PMI-2 when MPICH was built for it, which the same PMI
//! socket serves (the process's init says which). Anything else is taken to speak PMIx. A
//! statically linked MPICH program cannot be recognised this way; `--pmi pmi1` says it.
//!
//! An Open MPI 4 program (`libmpi.so.40`) speaks PMIx through libpmix, but only believes it
//! was launched when it also recognises a resource manager (see [`open_mpi_env`]).
//!
//! A pmix-rs client ([`is_pmix_rs_client`]) is registered so that only its secret claims its
//! rank, not a bare uid on the OpenPMIx port (`docs/SECURITY.md`).

use std::path::Path;

use object::read::elf::{Dyn, ElfFile64, FileHeader};
use object::read::{ReadCache, ReadRef};
use object::{Endianness, elf};

use crate::cli::Protocol;

/// The `DT_NEEDED` entries of an ELF executable; `None` if it is not one (a script, say).
fn needed_libraries<'data, R: ReadRef<'data>>(data: R) -> Option<Vec<String>> {
    let file = ElfFile64::<Endianness, R>::parse(data).ok()?;
    let endian = file.endian();
    let sections = file.elf_header().sections(endian, data).ok()?;
    let (entries, link) = sections.dynamic(endian, data).ok()??;
    let strings = sections.strings(endian, data, link).ok()?;
    Some(
        entries
            .iter()
            .filter(|d| d.tag32(endian) == Some(elf::DT_NEEDED))
            .filter_map(|d| strings.get(u32::try_from(d.d_val(endian)).ok()?).ok())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect(),
    )
}

/// The program at `path`, read as far as a question about it needs: its headers, dynamic
/// section and the sections asked for, not the whole file (a Python interpreter is megabytes,
/// read at every start of a job running it).
fn open(path: &Path) -> Option<ReadCache<std::fs::File>> {
    std::fs::File::open(path).ok().map(ReadCache::new)
}

fn libraries_of(path: &Path) -> Vec<String> {
    open(path)
        .and_then(|file| needed_libraries(&file))
        .unwrap_or_default()
}

/// The name of the variable a pmix-rs client reads its secret from: in the read-only data of
/// every program that can prove its rank to a pmix-rs server.
const PMIX_RS_MARK: &[u8] = b"PMIXRS_SECRET";

/// True if the program at `path` is a pmix-rs client: an ELF executable that holds
/// [`PMIX_RS_MARK`] in its read-only data and does not link libpmix. Anything else may be a
/// libpmix client, known or not: a program linking `libpmix.so`, one that loads it later (Open
/// MPI's, through a plug-in; python3 with python3-pmix), a script.
pub(crate) fn is_pmix_rs_client(path: &Path) -> bool {
    use object::{Object, ObjectSection};
    let Some(cache) = open(path) else {
        return false;
    };
    let Ok(file) = ElfFile64::<Endianness, _>::parse(&cache) else {
        return false;
    };
    // A static executable has no dynamic section, hence no libraries.
    let libs = needed_libraries(&cache).unwrap_or_default();
    if libs.iter().any(|l| l.starts_with("libpmix.so")) {
        return false;
    }
    let rodata = file.section_by_name(".rodata").and_then(|s| s.data().ok());
    rodata.is_some_and(|d| memchr::memmem::find(d, PMIX_RS_MARK).is_some())
}

/// True if the program at `path` links Open MPI 4 (`libmpi.so.40`).
pub(crate) fn is_open_mpi(path: &Path) -> bool {
    libraries_of(path).iter().any(|l| l == "libmpi.so.40")
}

/// What an Open MPI 4 process needs besides PMIx to run as part of a job rather than as a
/// singleton. Open MPI 4.1 decides how it was started before it looks at PMIx: unless it sees
/// its own launcher's daemon or a resource manager it knows, it starts alone ("0 of 1"). The
/// Slurm variables of a job step are the smallest set it accepts; they also make it leave
/// process binding to the launcher, which pmixrun does not do either.
pub(crate) fn open_mpi_env(hostname: &str, job_id: u32) -> Vec<(String, String)> {
    vec![
        ("SLURM_JOBID".into(), job_id.to_string()),
        ("SLURM_NODELIST".into(), hostname.into()),
        ("SLURM_STEP_ID".into(), "0".into()),
    ]
}

/// The protocol of the program at `path`, from its libraries.
pub(crate) fn protocol_of(path: &Path) -> Protocol {
    let libs = libraries_of(path);
    if libs.iter().any(|l| l.starts_with("libpmi2.so")) {
        Protocol::Pmi2
    } else if libs
        .iter()
        .any(|l| l == "libmpi.so.12" || l.starts_with("libmpich.so"))
    {
        Protocol::Pmi1
    } else {
        Protocol::Pmix
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dynamic_executable_lists_its_libraries_and_junk_lists_none() {
        // The test binary itself links the C library.
        let me = std::env::current_exe().map(std::fs::read);
        let Ok(Ok(data)) = me else {
            panic!("cannot read the test executable")
        };
        let libs = needed_libraries(&data[..]).unwrap_or_default();
        assert!(
            libs.iter().any(|l| l.starts_with("libc.so")),
            "libc not among {libs:?}"
        );
        assert_eq!(needed_libraries(&b"#!/bin/sh\necho hi\n"[..]), None);
        assert_eq!(needed_libraries(&data[..100]), None);
        let me = std::env::current_exe().unwrap_or_default();
        assert_eq!(protocol_of(&me), Protocol::Pmix);
        assert_eq!(protocol_of(Path::new("/nonexistent")), Protocol::Pmix);
        assert!(!is_open_mpi(&me));
        assert!(!is_pmix_rs_client(Path::new("/nonexistent")));
        assert!(!is_pmix_rs_client(Path::new("/bin/sh")));
    }
}
