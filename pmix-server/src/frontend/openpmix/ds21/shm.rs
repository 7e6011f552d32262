//! The one module of the server with `unsafe` code: shared-memory mappings (the ds21 segments
//! libpmix clients map) and the process-shared pthread mutexes in them.
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
//! client keeping or faking its lock delays only its own job's use of the segments.
//!
//! The segments' sizes are out of clients' reach too. A mapping of a file faults (SIGBUS) where
//! it lies past the file's end, and a segment kept as a plain file in the server's directory
//! could be truncated by any process of the job's user. So a segment is a memory file
//! (`memfd_create`) that the server sizes and then seals against shrinking and growing
//! (`F_SEAL_SHRINK`, `F_SEAL_GROW`, then `F_SEAL_SEAL`, so that no one can add or change seals,
//! `F_SEAL_WRITE` included, whose absence the lock segment needs). The kernel refuses every
//! `ftruncate`, `truncate` and `O_TRUNC` on it from then on, whoever tries, through whichever
//! descriptor: every page of the server's mapping stays backed for as long as it exists. (A hole
//! punched with `fallocate` is read back as zeros, never a fault; the server never reads
//! anything back, so that changes what clients see, nothing more.) Being memory, not a file in
//! `$TMPDIR`, a segment also cannot fault because that file system is full.
//!
//! libpmix opens a segment by path. The path, in the server's directory, is a symbolic link to
//! `/proc/<server pid>/fd/<n>`, the descriptor the server keeps open as long as the mapping;
//! opening it opens that same memory file, for processes with the server's uid and gid while
//! the server is dumpable (the kernel's ptrace read check, which Yama does not restrict: Yama
//! only restricts attaching). The server maps the descriptor itself, never the path: whatever
//! is later made of the link (removed, pointed elsewhere) misleads only the clients that follow
//! it, which are that user's own processes. The descriptor is close-on-exec, so no process
//! the server starts inherits it.

#![allow(unsafe_code)]

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicI32, Ordering};

/// Byte offset of the lock word in glibc's `pthread_mutex_t` (`__data.__lock`, an `int`,
/// first on every architecture); `init_mutex` refuses other C libraries.
const GLIBC_LOCK_WORD: usize = 0;

/// A write past the end of a mapping was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutOfBounds;

/// The longest memory-file name Linux takes (249 bytes) is more than any segment needs; longer
/// names (long namespaces) are cut, the name being for people reading `/proc` only.
const MEMFD_NAME_MAX: usize = 200;

/// A shared, writable mapping of a whole memory file this server created.
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
    /// The memory file, open as long as the mapping: the path clients open leads to it.
    fd: OwnedFd,
}

// SAFETY: the mapping is plain memory owned by this value; nothing in it is tied to the thread
// that made it.
unsafe impl Send for Mapping {}

impl Mapping {
    /// Makes a memory file of `len` bytes (zeros), sealed at that size, maps all of it shared
    /// and writable, and creates `path` (which must not exist) as a symbolic link through which
    /// other processes of this uid open the same memory file. Fails, making nothing, where the
    /// kernel has no sealed memory files or the link does not lead back to the file.
    pub(crate) fn create(path: &Path, len: usize) -> io::Result<Mapping> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty segment"));
        }
        let name = path.file_name().map_or(&[][..], |n| n.as_bytes());
        let name = CString::new(&name[..name.len().min(MEMFD_NAME_MAX)])
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in a segment name"))?;
        let fd = crate::memfd::sealed(&name, len, crate::memfd::SIZE_SEALS, |_| Ok(()))?;
        let map = Self::map(fd, len)?;
        let link = format!("/proc/{}/fd/{}", std::process::id(), map.fd.as_raw_fd());
        std::os::unix::fs::symlink(&link, path)?;
        // A /proc that is not mounted, or not this pid namespace's, would give clients another
        // file or none.
        let (ours, theirs) = (
            File::from(map.fd.try_clone()?).metadata()?,
            std::fs::metadata(path),
        );
        match theirs {
            Ok(m) if (m.dev(), m.ino()) == (ours.dev(), ours.ino()) => Ok(map),
            other => {
                let _ = std::fs::remove_file(path);
                Err(io::Error::other(format!(
                    "{} does not lead to the segment ({link}): {}",
                    path.display(),
                    other.map_or_else(|e| e.to_string(), |_| "another file".into())
                )))
            }
        }
    }

    /// Maps the first `len` bytes of `fd` shared and writable; the mapping keeps `fd`.
    fn map(fd: OwnedFd, len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh mapping chosen by the kernel (no address hint, so nothing existing is
        // replaced) of a file at least `len` bytes long. That its pages stay backed, so that
        // the accesses below never fault, is the seals' doing (`create`): a mapping of an
        // unsealed file faults (SIGBUS) where another process truncated it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>())
            .ok_or_else(|| io::Error::other("mmap returned a null mapping"))?;
        Ok(Mapping { ptr, len, fd })
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
        // mapping, which lives as long as `self` and whose file no one can shrink (sealed in
        // `create`), so the copy cannot fault; `bytes` is ordinary memory of ours, so the two
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
        // are in bounds (of a file sealed at the mapping's size: never a fault) and aligned for
        // an `i32`; the reference lives no longer than `self`, hence than the mapping. Other processes access these bytes too: clients' glibc with
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

/// Whether processes of this uid can open this process's descriptors through `/proc` (the
/// kernel refuses it while the process is not dumpable: set-user-ID, capabilities, or
/// `PR_SET_DUMPABLE` 0), which is how libpmix clients reach the segments. (A client that cannot
/// open its lock segment at init uses `hash`, so a case missed here costs speed.)
pub(crate) fn fds_reachable() -> io::Result<()> {
    match nix::sys::prctl::get_dumpable() {
        Ok(true) => Ok(()),
        Ok(false) => Err(io::Error::other(
            "this process is not dumpable: other processes cannot open its /proc/<pid>/fd",
        )),
        Err(e) => Err(e.into()),
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
    use std::fs::OpenOptions;
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
            let client = Mapping::map(file.into(), 4096).expect("client mapping");
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
    fn no_one_can_change_a_segments_size_and_the_path_only_leads_to_it() {
        let mut s = Segment::new("sealed");
        let path = s.dir.join("smlockseg-test");
        // The path is a link to the server's descriptor, which no exec inherits.
        let target = std::fs::read_link(&path).expect("a link");
        let fd = s.server.fd.as_raw_fd();
        assert_eq!(
            target,
            PathBuf::from(format!("/proc/{}/fd/{fd}", std::process::id()))
        );
        let flags =
            nix::fcntl::fcntl(&s.server.fd, nix::fcntl::FcntlArg::F_GETFD).expect("F_GETFD");
        assert_ne!(flags & libc::FD_CLOEXEC, 0, "inherited by children");
        // Every way of changing the size, through the path as a client would, is refused.
        let refused = |r: io::Result<()>, what: &str| {
            let e = r.expect_err(what);
            assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{what}: {e}");
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .expect("open");
        refused(file.set_len(0), "shrink");
        refused(file.set_len(4095), "shrink by a byte");
        refused(file.set_len(8192), "grow");
        refused(
            OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(&path)
                .map(drop),
            "O_TRUNC",
        );
        refused(
            nix::fcntl::fcntl(
                &file,
                nix::fcntl::FcntlArg::F_ADD_SEALS(nix::fcntl::SealFlag::F_SEAL_WRITE),
            )
            .map(drop)
            .map_err(io::Error::from),
            "another seal",
        );
        assert_eq!(file.metadata().expect("stat").len(), 4096);
        // The segment is the same memory for both sides, to its last byte.
        s.server.write(4095, &[0x5a]).expect("in bounds");
        let client = Mapping::map(file.into(), 4096).expect("client mapping");
        // SAFETY: byte 4095 of a live 4096-byte mapping.
        assert_eq!(unsafe { *client.ptr.as_ptr().add(4095) }, 0x5a);
        // Whatever replaces the link, the server's mapping is its own.
        std::fs::remove_file(&path).expect("unlink");
        std::fs::write(&path, b"").expect("a file in its place");
        s.server.write(4095, &[0xa5]).expect("in bounds");
        // SAFETY: as above.
        assert_eq!(unsafe { *client.ptr.as_ptr().add(4095) }, 0xa5);
        assert!(
            Mapping::create(&path, 4096).is_err(),
            "an existing path is not reused"
        );
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
