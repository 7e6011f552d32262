//! The one module of the client with `unsafe` code: receiving the job image file the server
//! passes with the welcome, and mapping it.
//!
//! The file is a sealed memory file (`docs/PROTOCOL.md`, "Welcome"): before mapping it, the
//! seals are read back from the kernel, and only a file that nobody can shrink, grow or write
//! any more is mapped. Its bytes then cannot change under the mapping and no page of it can
//! vanish, so reading it as an ordinary `&[u8]` is sound; the image reader checks every
//! offset inside it, so what it says cannot take a read outside it.

#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::ptr::NonNull;

use bytes::Bytes;
use nix::fcntl::{FcntlArg, SealFlag, fcntl};

/// The seals a job image file must carry.
const REQUIRED: SealFlag = SealFlag::F_SEAL_SHRINK
    .union(SealFlag::F_SEAL_GROW)
    .union(SealFlag::F_SEAL_WRITE);

/// A read-only mapping of a whole sealed file.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is immutable memory (sealed against writes) owned by this value.
unsafe impl Send for Mapping {}
// SAFETY: as above; shared reads of immutable memory.
unsafe impl Sync for Mapping {}

impl AsRef<[u8]> for Mapping {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `ptr` is a live mapping of `len` readable bytes (see `map`), whose contents
        // and size the seals fix for as long as it exists.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping `map` made; nothing borrows it any more (the
        // `Bytes` that owned it is gone).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// Maps the job image file `fd`, which the welcome says is `len` bytes long. Fails, mapping
/// nothing, unless the file is exactly that long and sealed against writes and size changes.
pub(crate) fn map(fd: OwnedFd, len: u64) -> io::Result<Bytes> {
    let file = File::from(fd);
    let seals = SealFlag::from_bits_truncate(fcntl(&file, FcntlArg::F_GET_SEALS)?);
    if !seals.contains(REQUIRED) {
        return Err(io::Error::other(format!(
            "the job image file is sealed {seals:?} only"
        )));
    }
    let size = file.metadata()?.len();
    if size != len || size == 0 {
        return Err(io::Error::other(format!(
            "the job image file has {size} bytes, the welcome says {len}"
        )));
    }
    let len = usize::try_from(len).map_err(io::Error::other)?;
    // SAFETY: a fresh read-only mapping chosen by the kernel (no address hint, so nothing
    // existing is replaced) of a file of exactly `len` bytes that no one can shrink or write
    // (checked above): every byte stays readable and unchanged while mapped.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    let ptr =
        NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave a null mapping"))?;
    Ok(Bytes::from_owner(Mapping { ptr, len }))
}

/// Reads from a Unix socket, keeping the first descriptor that comes along (`SCM_RIGHTS`);
/// any other is closed.
pub(crate) fn recv_with_fd(
    stream: &UnixStream,
    buf: &mut [u8],
    fd: &mut Option<OwnedFd>,
) -> io::Result<usize> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut cmsg = nix::cmsg_space!([RawFd; 1]);
    let mut iov = [io::IoSliceMut::new(buf)];
    let msg = recvmsg::<()>(
        stream.as_raw_fd(),
        &mut iov,
        Some(&mut cmsg),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .map_err(io::Error::from)?;
    let bytes = msg.bytes;
    for c in msg.cmsgs().map_err(io::Error::from)? {
        if let ControlMessageOwned::ScmRights(fds) = c {
            for raw in fds {
                // SAFETY: the kernel just installed `raw` in this process with this message;
                // nothing else knows of it, so it is owned (and closed when dropped) here.
                let owned = unsafe { OwnedFd::from_raw_fd(raw) };
                if fd.is_none() {
                    *fd = Some(owned);
                }
            }
        }
    }
    Ok(bytes)
}
