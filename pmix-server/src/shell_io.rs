//! The sockets of the I/O shell: listeners and connections over Unix sockets or loopback TCP,
//! behind one type each, and what the kernel says about a peer.

use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, BorrowedFd};

use mio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use mio::{Interest, Registry, Token};

use crate::engine::PeerCreds;
use crate::frontend::{Peer, Personality};
use crate::outbuf::PassFd;

/// A connection's socket: a Unix socket (native clients, PMI-1 over an inherited socket) or
/// loopback TCP (PMI-1 with `PMI_PORT`, libpmix clients).
pub(crate) enum Stream {
    Unix(UnixStream),
    Tcp(TcpStream),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write_vectored(bufs),
            Stream::Tcp(s) => s.write_vectored(bufs),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl mio::event::Source for Stream {
    fn register(
        &mut self,
        registry: &Registry,
        token: Token,
        interests: Interest,
    ) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.register(registry, token, interests),
            Stream::Tcp(s) => s.register(registry, token, interests),
        }
    }

    fn reregister(
        &mut self,
        registry: &Registry,
        token: Token,
        interests: Interest,
    ) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.reregister(registry, token, interests),
            Stream::Tcp(s) => s.reregister(registry, token, interests),
        }
    }

    fn deregister(&mut self, registry: &Registry) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.deregister(registry),
            Stream::Tcp(s) => s.deregister(registry),
        }
    }
}

impl Stream {
    pub(crate) fn shutdown(&self) {
        let _ = match self {
            Stream::Unix(s) => s.shutdown(std::net::Shutdown::Both),
            Stream::Tcp(s) => s.shutdown(std::net::Shutdown::Both),
        };
    }
}

/// A listening socket and the personality of the connections it accepts.
pub(crate) struct Listener {
    socket: ListenSocket,
    pub(crate) kind: Personality,
}

enum ListenSocket {
    Unix(UnixListener),
    Tcp(TcpListener),
}

impl Listener {
    pub(crate) fn unix(l: std::os::unix::net::UnixListener, kind: Personality) -> io::Result<Self> {
        l.set_nonblocking(true)?;
        Ok(Listener {
            socket: ListenSocket::Unix(UnixListener::from_std(l)),
            kind,
        })
    }

    pub(crate) fn tcp(l: std::net::TcpListener, kind: Personality) -> io::Result<Self> {
        l.set_nonblocking(true)?;
        Ok(Listener {
            socket: ListenSocket::Tcp(TcpListener::from_std(l)),
            kind,
        })
    }

    pub(crate) fn register(&mut self, registry: &Registry, token: Token) -> io::Result<()> {
        match &mut self.socket {
            ListenSocket::Unix(l) => registry.register(l, token, Interest::READABLE),
            ListenSocket::Tcp(l) => registry.register(l, token, Interest::READABLE),
        }
    }

    /// The TCP port listened on.
    pub(crate) fn port(&self) -> io::Result<u16> {
        match &self.socket {
            ListenSocket::Tcp(l) => Ok(l.local_addr()?.port()),
            ListenSocket::Unix(_) => Err(io::Error::other("a Unix socket has no port")),
        }
    }

    /// The next waiting connection and what the kernel says of its peer.
    pub(crate) fn accept(&self) -> io::Result<(Stream, Peer)> {
        match &self.socket {
            ListenSocket::Unix(l) => {
                let (s, _) = l.accept()?;
                let peer = Peer {
                    creds: peer_creds(&s),
                    tcp_owner: None,
                };
                Ok((Stream::Unix(s), peer))
            }
            ListenSocket::Tcp(l) => {
                let (s, peer_addr) = l.accept()?;
                let _ = s.set_nodelay(true);
                let tcp_owner = if self.kind.checks_tcp_owner() {
                    s.local_addr()
                        .ok()
                        .and_then(|ours| crate::tcp_peer::peer_socket(ours, peer_addr))
                } else {
                    None
                };
                let peer = Peer {
                    creds: None,
                    tcp_owner,
                };
                Ok((Stream::Tcp(s), peer))
            }
        }
    }
}

/// The credentials of a Unix socket's peer.
fn peer_creds(stream: &UnixStream) -> Option<PeerCreds> {
    use nix::sys::socket::{getsockopt, sockopt::PeerCredentials};
    match getsockopt(stream, PeerCredentials) {
        Ok(c) => Some(PeerCreds {
            uid: c.uid(),
            gid: c.gid(),
        }),
        Err(e) => {
            tracing::warn!("cannot read peer credentials: {e}");
            None
        }
    }
}

impl PassFd for Stream {
    fn write_with_fd(&mut self, buf: &[u8], fd: BorrowedFd<'_>) -> io::Result<usize> {
        match self {
            Stream::Unix(sock) => sock.write_with_fd(buf, fd),
            Stream::Tcp(_) => Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "a descriptor cannot be passed over TCP",
            )),
        }
    }
}

impl PassFd for UnixStream {
    fn write_with_fd(&mut self, buf: &[u8], fd: BorrowedFd<'_>) -> io::Result<usize> {
        use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
        let fds = [fd.as_raw_fd()];
        let cmsg = [ControlMessage::ScmRights(&fds)];
        let iov = [io::IoSlice::new(buf)];
        let flags = MsgFlags::MSG_NOSIGNAL | MsgFlags::MSG_DONTWAIT;
        sendmsg::<()>(self.as_raw_fd(), &iov, &cmsg, flags, None).map_err(io::Error::from)
    }
}
