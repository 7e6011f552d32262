//! The one module of the server with `unsafe` code: file-backed shared-memory mappings (the
//! ds21 segments libpmix clients map) and the process-shared pthread mutexes in them.
//!
//! Everything above this module sees offsets and byte slices: every write is checked against
//! the mapping's length here, so no offset computed elsewhere (or derived from anything a
//! client sent) can reach memory outside a segment. Nothing is ever read back from a mapping:
//! the writer keeps its own index of what it wrote, so what a client might scribble in a
//! mapping it can write (the lock segment) is never trusted.
//!
//! The lock segment's mutexes are the exception, and the lock protocol is chosen so that
//! whatever a client writes there stays there. The mutexes are plain process-shared ones (not
//! robust: glibc links a robust mutex into its owner's robust list through pointers kept in
//! the mutex, and follows them on unlock, so a client that overwrote them made the server
//! write through pointers of its choosing). The server never calls into pthreads on a mutex
//! after initialising it: glibc reads a mutex's kind from the mutex itself, so a client could
//! turn even a plain one robust. It takes and releases a mutex by its lock word alone, as
//! glibc does for a plain mutex (word 0 free, 1 taken, 2 taken with sleepers, sleepers woken
//! with `FUTEX_WAKE` on the word): a compare-and-swap and a swap on four bytes of the
//! mapping, and a wake-up of whoever sleeps on that address. Any value a client writes there
//! only makes the lock look busy or free; the server never waits on it (`try_lock`), so a
//! client keeping or faking its lock delays only its own job's use of the segments. What the
//! server cannot prevent: a process of the job's user truncating a segment file (its mapping
//! then faults), which is no more than that user's signals and ptrace can do already.

#![allow(unsafe_code)]

use std::fs::OpenOptions;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicI32, Ordering};

/// Byte offset of the lock word in glibc's `pthread_mutex_t` (`__data.__lock`, an `int`,
/// first on every architecture); `init_mutex` refuses other C libraries.
const GLIBC_LOCK_WORD: usize = 0;

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
        Self::map(&file, len)
    }

    /// Maps the first `len` bytes of `file` shared and writable.
    fn map(file: &std::fs::File, len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh mapping chosen by the kernel (no address hint, so nothing existing is
        // replaced) of a file at least `len` bytes long; the descriptor may be closed
        // afterwards, the mapping keeps the file.
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

    /// The lock word of the mutex at `off`.
    fn lock_word(&self, off: usize) -> Option<&AtomicI32> {
        let m = self.mutex_at(off)?;
        // SAFETY: `m` is in bounds and aligned for a `pthread_mutex_t`, so its first 4 bytes
        // are in bounds and aligned for an `i32`; the reference lives no longer than `self`,
        // hence than the mapping. Other processes access these bytes too: clients' glibc with
        // atomic instructions, and a broken client possibly with plain stores, which Rust's
        // memory model does not describe but which at the machine level only ever leave some
        // 32-bit value there; the callers accept every value (they only compare and swap).
        Some(unsafe { AtomicI32::from_ptr(m.cast::<u8>().add(GLIBC_LOCK_WORD).cast::<i32>()) })
    }

    /// Initialises a process-shared mutex at `off`, plain (neither robust nor priority
    /// inheriting), as libpmix's own server does.
    pub(crate) fn init_mutex(&mut self, off: usize) -> io::Result<()> {
        if !cfg!(all(target_os = "linux", target_env = "gnu")) {
            // The lock word's place and meaning below are glibc's.
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the ds21 lock protocol is known for glibc only",
            ));
        }
        let m = self
            .mutex_at(off)
            .ok_or_else(|| io::Error::other("mutex outside the lock segment"))?;
        let mut attr = std::mem::MaybeUninit::<libc::pthread_mutexattr_t>::uninit();
        // SAFETY: `attr` is initialised by pthread_mutexattr_init before any other use and
        // destroyed once; `m` points to `size_of::<pthread_mutex_t>()` aligned bytes inside the
        // mapping (checked by `mutex_at`). pthread_mutex_init only stores into those bytes (it
        // reads nothing from them), so even a process scribbling there concurrently cannot
        // make it touch other memory; clients attach a lock segment only after this (it
        // exists before their processes start).
        unsafe {
            let r = libc::pthread_mutexattr_init(attr.as_mut_ptr());
            if r != 0 {
                return Err(io::Error::from_raw_os_error(r));
            }
            let mut r =
                libc::pthread_mutexattr_setpshared(attr.as_mut_ptr(), libc::PTHREAD_PROCESS_SHARED);
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

    /// Takes the mutex at `off` if it is free, without waiting: true when taken. Only its
    /// lock word is touched (0, free, becomes 1, taken), the way glibc's own
    /// `pthread_mutex_trylock` takes a plain mutex, so clients' `pthread_mutex_lock` waits for
    /// it and their unlocks work as ever; any other value, whatever wrote it, means busy.
    pub(crate) fn try_lock(&self, off: usize) -> bool {
        self.lock_word(off).is_some_and(|w| {
            w.compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        })
    }

    /// Releases the mutex at `off`, which [`Mapping::try_lock`] took: the lock word becomes 0
    /// and, unless it still said 1 (taken, nobody waiting), one waiting client is woken, as
    /// glibc's unlock does (a client that found it taken set it to 2 and sleeps on it).
    pub(crate) fn unlock(&self, off: usize) {
        let Some(w) = self.lock_word(off) else {
            return;
        };
        if w.swap(0, Ordering::Release) != 1 {
            // SAFETY: FUTEX_WAKE reads and writes no memory of this process: the kernel wakes
            // at most one thread sleeping on this address (a shared futex: clients' glibc
            // waits on process-shared mutexes without FUTEX_PRIVATE_FLAG), and the address is
            // inside our mapping. A spurious wake-up is harmless: glibc's waiters re-check.
            unsafe {
                libc::syscall(libc::SYS_futex, std::ptr::from_ref(w), libc::FUTEX_WAKE, 1);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::sync::mpsc;
    use std::time::{Duration, Instant};

    /// Where the mutex lies in the test's segment.
    const AT: usize = 64;
    const SIZE: usize = std::mem::size_of::<libc::pthread_mutex_t>();

    /// A lock file with one mutex, as the server maps it, and a second mapping of the same
    /// file standing for a client process (libpmix takes the mutex with glibc's own calls).
    struct Segment {
        dir: PathBuf,
        server: Mapping,
        client: Mapping,
    }

    impl Segment {
        fn new(name: &str) -> Segment {
            let dir =
                std::env::temp_dir().join(format!("pmixrs-shm-{}-{name}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("a test directory");
            let path = dir.join("smlockseg-test");
            let mut server = Mapping::create(&path, 4096).expect("segment");
            server.init_mutex(AT).expect("mutex");
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .open(&path)
                .expect("open");
            let client = Mapping::map(&file, 4096).expect("client mapping");
            Segment {
                dir,
                server,
                client,
            }
        }

        /// The client's view of the mutex, as an address a thread can take.
        fn client_mutex(&self) -> usize {
            self.client.mutex_at(AT).expect("mutex") as usize
        }

        /// The mutex's bytes, as the client sees them.
        fn bytes(&self) -> Vec<u8> {
            // SAFETY: `AT + SIZE` lies inside the 4096-byte mapping, alive as long as `self`.
            unsafe { std::slice::from_raw_parts(self.client.ptr.as_ptr().add(AT), SIZE).to_vec() }
        }
    }

    impl Drop for Segment {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    // What libpmix's reader calls on its own mapping (`m` from `client_mutex`).
    fn client_lock(m: usize) -> i32 {
        // SAFETY: `m` is an initialised process-shared mutex in a live mapping of the test.
        unsafe { libc::pthread_mutex_lock(m as *mut libc::pthread_mutex_t) }
    }
    fn client_trylock(m: usize) -> i32 {
        // SAFETY: as in `client_lock`.
        unsafe { libc::pthread_mutex_trylock(m as *mut libc::pthread_mutex_t) }
    }
    fn client_unlock(m: usize) -> i32 {
        // SAFETY: as in `client_lock`; the caller's thread holds it.
        unsafe { libc::pthread_mutex_unlock(m as *mut libc::pthread_mutex_t) }
    }

    #[test]
    fn the_writer_and_glibc_clients_exclude_each_other() {
        let s = Segment::new("exclude");
        let m = s.client_mutex();
        assert!(s.server.try_lock(AT));
        assert_eq!(client_trylock(m), libc::EBUSY, "the writer's lock is seen");
        s.server.unlock(AT);
        assert_eq!(client_trylock(m), 0);
        assert!(!s.server.try_lock(AT), "a client's lock is seen");
        assert_eq!(client_unlock(m), 0);

        // A client asleep in pthread_mutex_lock is woken by the writer's unlock.
        assert!(s.server.try_lock(AT));
        let (tx, rx) = mpsc::channel();
        let client = std::thread::spawn(move || {
            let r = client_lock(m);
            let _ = tx.send(r);
            client_unlock(m)
        });
        let word = s.server.lock_word(AT).expect("lock word");
        let deadline = Instant::now() + Duration::from_secs(10);
        // 2: glibc's mark of a mutex with a sleeper.
        while word.load(Ordering::Relaxed) != 2 {
            assert!(Instant::now() < deadline, "the client never waited");
            std::thread::yield_now();
        }
        s.server.unlock(AT);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(0), "not woken");
        assert_eq!(client.join().expect("client thread"), 0);
        assert!(s.server.try_lock(AT), "the client let go");
        s.server.unlock(AT);
    }

    #[test]
    fn what_a_client_scribbles_stays_in_the_segment() {
        let mut s = Segment::new("scribble");
        // Every byte but the lock word, the robust-list pointers and the kind included: the
        // writer takes and releases the mutex and touches none of them.
        s.client
            .write(AT + GLIBC_LOCK_WORD + 4, &[0xa5; SIZE - 4])
            .expect("in bounds");
        let before = s.bytes();
        assert!(s.server.try_lock(AT));
        s.server.unlock(AT);
        assert_eq!(s.bytes(), before);
        // Whatever the lock word says but 0 is a busy lock, given up at once.
        for v in [1, 2, -1, 0x4000_0000 | 4321] {
            s.server
                .lock_word(AT)
                .expect("word")
                .store(v, Ordering::Relaxed);
            let t = Instant::now();
            assert!(!s.server.try_lock(AT), "{v:#x}");
            assert!(t.elapsed() < Duration::from_secs(1));
        }
    }
}
