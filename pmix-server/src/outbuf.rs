//! A connection's queued output and the writing of it to a non-blocking socket, for the event
//! loops of the server and the name server.
//!
//! Front-ends append their frames to a byte buffer. An answer many connections get (a
//! collecting fence's data) is not copied into each of those buffers: it is spliced in as one
//! shared [`Bytes`], and the writer sends it from there with a vectored write. A descriptor
//! can ride along with one byte of the output (a welcome's job image file).

use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;

use bytes::Bytes;

/// At most this many pieces go into one vectored write.
const MAX_IOV: usize = 16;

/// A stream that can pass a descriptor with the first byte of a write (`SCM_RIGHTS`).
pub(crate) trait PassFd: Write {
    /// Writes a prefix of `buf`, passing `fd` with its first byte; `Ok(0)` is a closed peer.
    fn write_with_fd(&mut self, buf: &[u8], fd: BorrowedFd<'_>) -> io::Result<usize>;
}

/// Shared bytes sent after `buf[..at]` of the queue's buffer.
struct Splice {
    at: usize,
    bytes: Bytes,
    /// How much of `bytes` is written.
    sent: usize,
}

/// Output queued for one connection, in order: the buffer's bytes with the splices at their
/// places.
#[derive(Default)]
pub(crate) struct OutQueue {
    buf: Vec<u8>,
    /// `buf[..pos]` is written.
    pos: usize,
    /// In order of `at`; every splice before the one being written is gone.
    splices: VecDeque<Splice>,
    /// Bytes of the splices not written yet.
    spliced: usize,
    /// A descriptor to pass with the byte of `buf` at this index.
    fd: Option<(usize, Arc<OwnedFd>)>,
}

impl OutQueue {
    /// The buffer front-ends append their frames to.
    pub(crate) fn bytes(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Queues `bytes` after everything queued so far, without copying them.
    pub(crate) fn splice(&mut self, bytes: Bytes) {
        if bytes.is_empty() {
            return;
        }
        self.spliced += bytes.len();
        self.splices.push_back(Splice {
            at: self.buf.len(),
            bytes,
            sent: 0,
        });
    }

    /// Passes `fd` with the byte of the buffer at index `at` (one that is queued, not written).
    pub(crate) fn pass_fd(&mut self, at: usize, fd: Arc<OwnedFd>) {
        self.fd = Some((at, fd));
    }

    /// Bytes queued and not yet written.
    pub(crate) fn queued(&self) -> usize {
        self.buf.len() - self.pos + self.spliced
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.queued() == 0
    }

    /// Writes what the socket takes. Returns false when the peer is gone (or a descriptor
    /// cannot be passed over it).
    pub(crate) fn write_to(&mut self, stream: &mut impl PassFd) -> bool {
        loop {
            if self.is_empty() {
                self.reset();
                return true;
            }
            let written = match self.fd_due() {
                Some(fd) => {
                    let end = self.next_splice_at().unwrap_or(self.buf.len());
                    stream.write_with_fd(&self.buf[self.pos..end], fd.as_fd())
                }
                None => {
                    let mut iov = [IoSlice::new(&[]); MAX_IOV];
                    let n = self.pieces(&mut iov);
                    stream.write_vectored(&iov[..n])
                }
            };
            match written {
                Ok(0) => return false,
                Ok(n) => {
                    if self.fd_due().is_some() {
                        self.fd = None;
                    }
                    self.advance(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }

    /// The descriptor, if the next byte to write is the one it goes with.
    fn fd_due(&self) -> Option<Arc<OwnedFd>> {
        let (at, fd) = self.fd.as_ref()?;
        let splice_first = self.splices.front().is_some_and(|s| s.at <= self.pos);
        (*at == self.pos && !splice_first).then(|| fd.clone())
    }

    fn next_splice_at(&self) -> Option<usize> {
        self.splices.iter().map(|s| s.at).find(|&at| at > self.pos)
    }

    /// The unwritten output as slices in order, as many as fit in `iov`, stopping before the
    /// byte a descriptor goes with; returns how many.
    fn pieces<'a>(&'a self, iov: &mut [IoSlice<'a>; MAX_IOV]) -> usize {
        let stop = match &self.fd {
            Some((at, _)) if *at >= self.pos => *at,
            _ => self.buf.len(),
        };
        let mut n = 0;
        let mut from = self.pos;
        let mut full = false;
        for s in &self.splices {
            if s.at > stop {
                break;
            }
            if n + 2 > MAX_IOV {
                full = true;
                break;
            }
            if s.at > from {
                iov[n] = IoSlice::new(&self.buf[from..s.at]);
                n += 1;
                from = s.at;
            }
            iov[n] = IoSlice::new(&s.bytes[s.sent..]);
            n += 1;
        }
        if !full && from < stop && n < MAX_IOV {
            iov[n] = IoSlice::new(&self.buf[from..stop]);
            n += 1;
        }
        n
    }

    /// Marks `n` more bytes written, in the order [`pieces`](Self::pieces) lists them.
    fn advance(&mut self, mut n: usize) {
        while n > 0 {
            match self.splices.front_mut() {
                Some(s) if s.at <= self.pos => {
                    let take = n.min(s.bytes.len() - s.sent);
                    s.sent += take;
                    self.spliced -= take;
                    n -= take;
                    if s.sent == s.bytes.len() {
                        self.splices.pop_front();
                    }
                }
                next => {
                    let end = next.map_or(self.buf.len(), |s| s.at);
                    let take = n.min(end - self.pos);
                    if take == 0 {
                        // More was reported written than was offered.
                        break;
                    }
                    self.pos += take;
                    n -= take;
                }
            }
        }
    }

    /// Everything is written: the buffer starts over, and a large one is given back.
    fn reset(&mut self) {
        self.buf.clear();
        self.pos = 0;
        if self.buf.capacity() > 1 << 20 {
            self.buf.shrink_to(64 * 1024);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A socket that takes at most `room` bytes a call (then would block once, to show the
    /// writer stops) and records descriptors passed, by the offset of their byte.
    struct Sink {
        got: Vec<u8>,
        room: usize,
        block_every: usize,
        calls: usize,
        fds_at: Vec<usize>,
    }

    impl Sink {
        fn new(room: usize, block_every: usize) -> Self {
            Sink {
                got: Vec::new(),
                room,
                block_every,
                calls: 0,
                fds_at: Vec::new(),
            }
        }

        fn call(&mut self) -> io::Result<()> {
            self.calls += 1;
            if self.block_every > 0 && self.calls.is_multiple_of(self.block_every) {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            Ok(())
        }
    }

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.call()?;
            let n = buf.len().min(self.room);
            self.got.extend_from_slice(&buf[..n]);
            Ok(n)
        }

        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            self.call()?;
            let mut n = 0;
            for b in bufs {
                let take = b.len().min(self.room - n);
                self.got.extend_from_slice(&b[..take]);
                n += take;
                if n == self.room {
                    break;
                }
            }
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl PassFd for Sink {
        fn write_with_fd(&mut self, buf: &[u8], _fd: BorrowedFd<'_>) -> io::Result<usize> {
            self.call()?;
            self.fds_at.push(self.got.len());
            let n = buf.len().min(self.room);
            self.got.extend_from_slice(&buf[..n]);
            Ok(n)
        }
    }

    fn an_fd() -> Arc<OwnedFd> {
        Arc::new(std::fs::File::open("/dev/null").unwrap().into())
    }

    /// Queues `parts` (bytes appended, or spliced when `true`), with a descriptor at buffer
    /// index `fd_at`, writes it through sockets of every small size, and checks the stream.
    fn check(parts: &[(&[u8], bool)], fd_at: Option<usize>) {
        let want: Vec<u8> = parts.iter().flat_map(|(b, _)| b.iter().copied()).collect();
        for room in [1, 2, 3, 5, 7, 64, 4096] {
            for block_every in [0, 2, 3] {
                let mut q = OutQueue::default();
                let mut fd_stream_at = None;
                let mut stream_len = 0;
                for (b, shared) in parts {
                    if *shared {
                        q.splice(Bytes::copy_from_slice(b));
                    } else {
                        let start = q.bytes().len();
                        q.bytes().extend_from_slice(b);
                        if let Some(at) = fd_at.filter(|&at| at >= start && at < start + b.len()) {
                            q.pass_fd(at, an_fd());
                            fd_stream_at = Some(stream_len + at - start);
                        }
                    }
                    stream_len += b.len();
                }
                assert_eq!(q.queued(), want.len());
                let mut sink = Sink::new(room, block_every);
                let mut rounds = 0;
                while !q.is_empty() {
                    assert!(q.write_to(&mut sink), "the writer gave up");
                    rounds += 1;
                    assert!(rounds < 100_000, "no progress");
                }
                assert_eq!(sink.got, want, "room {room}, block every {block_every}");
                assert_eq!(sink.fds_at, fd_stream_at.into_iter().collect::<Vec<_>>());
                assert_eq!(q.bytes().len(), 0, "the buffer starts over once written");
            }
        }
    }

    #[test]
    fn plain_bytes_are_written_in_order() {
        check(&[(b"hello, ", false), (b"world", false)], None);
    }

    #[test]
    fn spliced_bytes_come_at_their_place() {
        check(
            &[
                (b"head1", false),
                (b"SHARED-ONE", true),
                (b"head2", false),
                (b"SHARED-TWO", true),
                (b"TWO-MORE", true),
                (b"tail", false),
            ],
            None,
        );
    }

    #[test]
    fn many_splices_need_several_writes() {
        let parts: Vec<(Vec<u8>, bool)> = (0..40u8)
            .map(|i| (vec![b'a' + i % 26; 1 + i as usize % 5], i % 2 == 0))
            .collect();
        let parts: Vec<(&[u8], bool)> = parts.iter().map(|(b, s)| (&b[..], *s)).collect();
        check(&parts, None);
    }

    #[test]
    fn a_descriptor_goes_with_its_byte() {
        // After a splice, in the middle of a frame, and with a splice right at its byte.
        check(
            &[(b"ab", false), (b"SHARED", true), (b"welcome", false)],
            Some(4),
        );
        check(&[(b"welcome", false), (b"SHARED", true)], Some(0));
        check(
            &[(b"ab", false), (b"SHARED", true), (b"cd", false)],
            Some(2),
        );
    }

    #[test]
    fn a_closed_peer_is_reported() {
        let mut q = OutQueue::default();
        q.splice(Bytes::from_static(b"data"));
        let mut sink = Sink::new(0, 0);
        assert!(!q.write_to(&mut sink));
    }
}
