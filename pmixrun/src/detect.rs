//! `--pmi auto`: which protocol a program speaks, judged from the shared libraries it links.
//!
//! An MPICH program links `libmpi.so.12` (MPICH's ABI; Open MPI's is `libmpi.so.40`) or, for
//! older builds, `libmpich.so`: it speaks PMI-1. Anything else is taken to speak PMIx. A
//! statically linked MPICH program cannot be recognised this way; `--pmi pmi1` says it.

use std::path::Path;

use object::read::elf::{Dyn, ElfFile64, FileHeader};
use object::{Endianness, elf};

use crate::cli::Protocol;

/// The `DT_NEEDED` entries of an ELF executable; `None` if it is not one (a script, say).
fn needed_libraries(data: &[u8]) -> Option<Vec<String>> {
    let file = ElfFile64::<Endianness>::parse(data).ok()?;
    let endian = file.endian();
    let sections = file.elf_header().sections(endian, data).ok()?;
    let (entries, link) = sections.dynamic(endian, data).ok()??;
    let strings = sections.strings(endian, data, link).ok()?;
    Some(
        entries
            .iter()
            .filter(|d| d.tag32(endian) == Some(elf::DT_NEEDED))
            .filter_map(|d| d.string(endian, strings).ok())
            .map(|s| String::from_utf8_lossy(s).into_owned())
            .collect(),
    )
}

/// The protocol of the program at `path`, from its libraries.
pub(crate) fn protocol_of(path: &Path) -> Protocol {
    let Ok(data) = std::fs::read(path) else {
        return Protocol::Pmix;
    };
    let libs = needed_libraries(&data).unwrap_or_default();
    if libs
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
        let libs = needed_libraries(&data).unwrap_or_default();
        assert!(
            libs.iter().any(|l| l.starts_with("libc.so")),
            "libc not among {libs:?}"
        );
        assert_eq!(needed_libraries(b"#!/bin/sh\necho hi\n"), None);
        assert_eq!(needed_libraries(&data[..100]), None);
        let me = std::env::current_exe().unwrap_or_default();
        assert_eq!(protocol_of(&me), Protocol::Pmix);
        assert_eq!(protocol_of(Path::new("/nonexistent")), Protocol::Pmix);
    }
}
