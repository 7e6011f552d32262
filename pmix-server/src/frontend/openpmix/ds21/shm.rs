//! The one module of the server with `unsafe` code: file-backed shared-memory mappings (the
//! ds21 segments libpmix clients map) and the process-shared pthread mutexes in them.
//!
//! Everything above this module sees offsets and byte slices: every write is checked against
//! the mapping's length here, so no offset computed elsewhere (or derived from anything a
//! client sent) can reach memory outside a segment. Nothing is ever read back from a mapping:
//! the writer keeps its own index of what it wrote, so what a client might scribble in a
//! mapping it can write (the lock segment) is never trusted.

#![allow(unsafe_code)]

use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::ptr::NonNull;
use std::time::Duration;

/// A write past the end of a mapping was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutOfBounds;

/// A shared, writable mapping of a whole file this server created.
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; nothing in it is tied to the thread
// that made it.
unsafe impl Send for Mapping {}

impl Mapping {
    /// Creates `path` (which must not exist; mode 0600), sizes it to `len` bytes (zeros, a
    /// sparse file) and maps all of it shared and writable.
    pub(crate) fn create(path: &Path, len: usize) -> io::Result<Mapping> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty segment"));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)?;
        file.set_len(len as u64)?;
        // SAFETY: a fresh mapping chosen by the kernel (no address hint, so nothing existing is
        // replaced) of a file we just sized to `len`; the descriptor may be closed afterwards,
        // the mapping keeps the file.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>())
            .ok_or_else(|| io::Error::other("mmap returned a null mapping"))?;
        Ok(Mapping { ptr, len })
    }

    fn check(&self, off: usize, n: usize) -> Result<(), OutOfBounds> {
        match off.checked_add(n) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(OutOfBounds),
        }
    }

    /// Copies `bytes` to `off`.
    pub(crate) fn write(&mut self, off: usize, bytes: &[u8]) -> Result<(), OutOfBounds> {
        self.check(off, bytes.len())?;
        // SAFETY: `off + bytes.len() <= len` was checked, so the destination lies inside the
        // mapping, which lives as long as `self`; `bytes` is ordinary memory of ours, so the two
        // do not overlap. Other processes may read the bytes concurrently only when the ds21
        // lock protocol lets them (the caller holds the write lock), and they cannot write
        // them (they map data segments read-only).
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.ptr.as_ptr().add(off), bytes.len());
        }
        Ok(())
    }

    /// Writes `v` in host byte order at `off` (C's `size_t`, unaligned as the format wants).
    pub(crate) fn write_u64(&mut self, off: usize, v: u64) -> Result<(), OutOfBounds> {
        self.write(off, &v.to_ne_bytes())
    }

    /// Writes `v` in host byte order at `off`.
    pub(crate) fn write_u32(&mut self, off: usize, v: u32) -> Result<(), OutOfBounds> {
        self.write(off, &v.to_ne_bytes())
    }

    /// The address of a `pthread_mutex_t` at `off`, when one fits there, suitably aligned.
    fn mutex_at(&self, off: usize) -> Option<*mut libc::pthread_mutex_t> {
        self.check(off, std::mem::size_of::<libc::pthread_mutex_t>())
            .ok()?;
        // SAFETY: in bounds, checked just above.
        let p = unsafe { self.ptr.as_ptr().add(off) };
        (p as usize % std::mem::align_of::<libc::pthread_mutex_t>() == 0)
            .then_some(p.cast::<libc::pthread_mutex_t>())
    }

    /// Initialises a process-shared, robust mutex at `off`.
    pub(crate) fn init_mutex(&mut self, off: usize) -> io::Result<()> {
        let m = self
            .mutex_at(off)
            .ok_or_else(|| io::Error::other("mutex outside the lock segment"))?;
        let mut attr = std::mem::MaybeUninit::<libc::pthread_mutexattr_t>::uninit();
        // SAFETY: `attr` is initialised by pthread_mutexattr_init before any other use and
        // destroyed once; `m` points to `size_of::<pthread_mutex_t>()` aligned bytes inside the
        // mapping (checked by `mutex_at`), which no client uses yet: clients attach a lock
        // segment only after the server initialised it (it exists before their processes start).
        unsafe {
            let r = libc::pthread_mutexattr_init(attr.as_mut_ptr());
            if r != 0 {
                return Err(io::Error::from_raw_os_error(r));
            }
            let mut r =
                libc::pthread_mutexattr_setpshared(attr.as_mut_ptr(), libc::PTHREAD_PROCESS_SHARED);
            // Robust: when a client dies holding its lock, the next locker is told so instead
            // of waiting for ever.
            if r == 0 {
                r = libc::pthread_mutexattr_setrobust(
                    attr.as_mut_ptr(),
                    libc::PTHREAD_MUTEX_ROBUST,
                );
            }
            if r == 0 {
                r = libc::pthread_mutex_init(m, attr.as_ptr());
            }
            libc::pthread_mutexattr_destroy(attr.as_mut_ptr());
            if r != 0 {
                return Err(io::Error::from_raw_os_error(r));
            }
        }
        Ok(())
    }

    /// Locks the mutex at `off`, giving up after `wait` (a client that holds its read lock
    /// that long is stuck). A mutex whose holder died is taken over (the mutexes are robust): its
    /// data is only ever written by this server, under all the locks.
    pub(crate) fn lock_mutex(&self, off: usize, wait: Duration) -> io::Result<()> {
        let m = self
            .mutex_at(off)
            .ok_or_else(|| io::Error::other("mutex outside the lock segment"))?;
        let mut now = std::mem::MaybeUninit::<libc::timespec>::uninit();
        // SAFETY: clock_gettime fills the timespec it is given.
        let now = unsafe {
            if libc::clock_gettime(libc::CLOCK_REALTIME, now.as_mut_ptr()) != 0 {
                return Err(io::Error::last_os_error());
            }
            now.assume_init()
        };
        let nanos = now.tv_nsec as u64 + u64::from(wait.subsec_nanos());
        let deadline = libc::timespec {
            tv_sec: now.tv_sec
                + wait.as_secs() as libc::time_t
                + (nanos / 1_000_000_000) as libc::time_t,
            tv_nsec: (nanos % 1_000_000_000) as _,
        };
        // SAFETY: `m` is an initialised process-shared mutex inside the mapping (`init_mutex`
        // ran on it at creation). Clients can write the lock segment, so a misbehaving client
        // could corrupt the mutex; that can make this call fail or time out, and it touches no
        // memory but the mutex's own bytes.
        let r = unsafe { libc::pthread_mutex_timedlock(m, &deadline) };
        match r {
            0 => Ok(()),
            libc::EOWNERDEAD => {
                // SAFETY: as above; this thread now holds the mutex, which is what
                // pthread_mutex_consistent requires.
                unsafe { libc::pthread_mutex_consistent(m) };
                Ok(())
            }
            r => Err(io::Error::from_raw_os_error(r)),
        }
    }

    /// Unlocks the mutex at `off`, which this thread locked with [`Mapping::lock_mutex`].
    pub(crate) fn unlock_mutex(&self, off: usize) {
        if let Some(m) = self.mutex_at(off) {
            // SAFETY: as in `lock_mutex`; the caller locked it on this thread.
            unsafe {
                libc::pthread_mutex_unlock(m);
            }
        }
    }

    /// Destroys the mutex at `off` (the segment is going away).
    pub(crate) fn destroy_mutex(&mut self, off: usize) {
        if let Some(m) = self.mutex_at(off) {
            // SAFETY: as in `lock_mutex`; destroying an unlocked mutex no one will use again
            // (the file is unlinked and this mapping is about to be dropped).
            unsafe {
                libc::pthread_mutex_destroy(m);
            }
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` are exactly what mmap returned, unmapped once, here; nothing
        // borrows the mapping past `self`.
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// The system's page size.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(v).ok().filter(|&v| v > 0).unwrap_or(4096)
}

/// The L1 data cache line, 64 when the system does not say (as libpmix assumes).
pub(crate) fn cache_line() -> usize {
    // SAFETY: sysconf has no memory effects.
    let v = unsafe { libc::sysconf(libc::_SC_LEVEL1_DCACHE_LINESIZE) };
    usize::try_from(v).ok().filter(|&v| v > 0).unwrap_or(64)
}
