//! Sealed memory files: what the server shares with its clients by descriptor (the ds21
//! segments libpmix clients map, the job images pmix-rs clients map).
//!
//! A memory file (`memfd_create`) is sized, filled and then sealed, and the seals are read
//! back: once `F_SEAL_SHRINK` and `F_SEAL_GROW` are on, no process can change its size through
//! any descriptor, so a mapping of it never faults; with `F_SEAL_WRITE` too, no one can change
//! its bytes either; `F_SEAL_SEAL` forbids changing the seals.

use std::ffi::{CStr, CString};
use std::fs::File;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;

use nix::fcntl::{FcntlArg, SealFlag, fcntl};
use nix::sys::memfd::{MFdFlags, memfd_create};

/// Seals that fix a file's size for good.
pub(crate) const SIZE_SEALS: SealFlag = SealFlag::F_SEAL_SHRINK
    .union(SealFlag::F_SEAL_GROW)
    .union(SealFlag::F_SEAL_SEAL);

/// Seals that fix a file's size and bytes for good.
pub(crate) const READ_ONLY_SEALS: SealFlag = SIZE_SEALS.union(SealFlag::F_SEAL_WRITE);

/// A close-on-exec memory file named `name` of `len` bytes, filled by `fill` (zeros if it
/// writes nothing), then sealed with `seals`, which are read back.
pub(crate) fn sealed(
    name: &CStr,
    len: usize,
    seals: SealFlag,
    fill: impl FnOnce(&File) -> io::Result<()>,
) -> io::Result<OwnedFd> {
    let fd = memfd_create(name, MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING)?;
    let file = File::from(fd);
    file.set_len(len as u64)?;
    fill(&file)?;
    fcntl(&file, FcntlArg::F_ADD_SEALS(seals))?;
    let have = SealFlag::from_bits_truncate(fcntl(&file, FcntlArg::F_GET_SEALS)?);
    if !have.contains(seals) {
        return Err(io::Error::other(format!(
            "a memory file sealed {have:?} only"
        )));
    }
    Ok(file.into())
}

/// The longest memory-file name Linux takes is 249 bytes; longer names are cut (the name is
/// for people reading `/proc`).
const NAME_MAX: usize = 200;

/// A sealed, read-only memory file holding `bytes`, named after `name` (cut, NULs dropped).
pub(crate) fn read_only_copy(name: &str, bytes: &[u8]) -> io::Result<OwnedFd> {
    let mut name = name.as_bytes().to_vec();
    name.truncate(NAME_MAX);
    name.retain(|&b| b != 0);
    let name = CString::new(name).map_err(io::Error::other)?;
    sealed(&name, bytes.len(), READ_ONLY_SEALS, |f| {
        f.write_all_at(bytes, 0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_only_file_keeps_its_bytes_and_size() {
        let fd = sealed(c"image", 5, READ_ONLY_SEALS, |f| {
            f.write_all_at(b"hello", 0)
        })
        .unwrap();
        let file = File::from(fd);
        let mut buf = [0u8; 5];
        file.read_exact_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"hello");
        assert!(file.write_all_at(b"j", 0).is_err(), "a write went through");
        assert!(file.set_len(2).is_err(), "it shrank");
        assert!(file.set_len(9).is_err(), "it grew");
    }
}
