//! Who is at the other end of a loopback TCP connection.
//!
//! OpenPMIx clients reach their server over loopback TCP and *claim* a uid and gid in their
//! handshake. Unix sockets tell the server the truth (`SO_PEERCRED`); TCP does not, but on
//! Linux the kernel lists every TCP socket with its owner's uid in `/proc/net/tcp` and
//! `/proc/net/tcp6`. The peer's socket is the one whose local address is the peer's and whose
//! remote address is ours; the kernel also gives its inode, which names it among a process's
//! descriptors (`socket:[<inode>]`, see `lineage.rs`). Elsewhere, or if the table cannot be
//! read, the answer is "unknown" and only the claim is checked.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// What the kernel says of the peer's end of a loopback TCP connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TcpPeer {
    /// The uid that owns the socket.
    pub(crate) uid: u32,
    /// The socket's inode: a process holding it has a descriptor `socket:[<inode>]`.
    pub(crate) inode: u64,
}

/// The owner and inode of the socket at `peer` that is connected to `ours`, if the OS can tell.
///
/// Asks the kernel's socket diagnostics (netlink `NETLINK_SOCK_DIAG`) for that one socket: a
/// hash lookup. Reading `/proc/net/tcp` instead walks every bucket of the kernel's TCP tables,
/// which costs milliseconds on a machine with a lot of memory; it is the fallback.
pub(crate) fn peer_socket(ours: SocketAddr, peer: SocketAddr) -> Option<TcpPeer> {
    diag_socket(ours, peer).or_else(|| proc_socket(ours, peer))
}

/// `SOCK_DIAG_BY_FAMILY`, `NLM_F_REQUEST`, `IPPROTO_TCP`.
const SOCK_DIAG_BY_FAMILY: u16 = 20;
const NLM_F_REQUEST: u16 = 1;
const IPPROTO_TCP: u8 = 6;

/// An address as `inet_diag_sockid` holds it: 16 bytes in network order (IPv4 in the first 4).
fn diag_addr(ip: IpAddr) -> [u8; 16] {
    let mut b = [0u8; 16];
    match ip {
        IpAddr::V4(v4) => b[..4].copy_from_slice(&v4.octets()),
        IpAddr::V6(v6) => b = v6.octets(),
    }
    b
}

/// The request for the one TCP socket whose local end is `local` and remote end `remote`: a
/// `nlmsghdr` and an `inet_diag_req_v2` without `NLM_F_DUMP` (an exact lookup).
fn diag_request(local: SocketAddr, remote: SocketAddr) -> Option<Vec<u8>> {
    let family: u8 = match (local, remote) {
        (SocketAddr::V4(_), SocketAddr::V4(_)) => 2,  // AF_INET
        (SocketAddr::V6(_), SocketAddr::V6(_)) => 10, // AF_INET6
        _ => return None,
    };
    let mut r = Vec::with_capacity(72);
    r.extend(72u32.to_ne_bytes());
    r.extend(SOCK_DIAG_BY_FAMILY.to_ne_bytes());
    r.extend(NLM_F_REQUEST.to_ne_bytes());
    r.extend(1u32.to_ne_bytes()); // sequence number
    r.extend(0u32.to_ne_bytes()); // port id: the kernel's
    r.extend([family, IPPROTO_TCP, 0, 0]);
    r.extend(u32::MAX.to_ne_bytes()); // every state
    r.extend(local.port().to_be_bytes());
    r.extend(remote.port().to_be_bytes());
    r.extend(diag_addr(local.ip()));
    r.extend(diag_addr(remote.ip()));
    r.extend(0u32.to_ne_bytes()); // any interface
    r.extend([0xff; 8]); // INET_DIAG_NOCOOKIE
    Some(r)
}

/// The uid and inode of the `inet_diag_msg` answering [`diag_request`], if the answer is one.
fn diag_reply_socket(reply: &[u8]) -> Option<TcpPeer> {
    let u16_at = |at: usize| Some(u16::from_ne_bytes(reply.get(at..at + 2)?.try_into().ok()?));
    let u32_at = |at: usize| Some(u32::from_ne_bytes(reply.get(at..at + 4)?.try_into().ok()?));
    // nlmsghdr (16 bytes), then family, state, timer, retrans, the 48-byte sockid, expires,
    // rqueue, wqueue, uid, inode.
    if u16_at(4)? != SOCK_DIAG_BY_FAMILY || (u32_at(0)? as usize) < 16 + 72 {
        return None;
    }
    Some(TcpPeer {
        uid: u32_at(16 + 4 + 48 + 12)?,
        inode: u64::from(u32_at(16 + 4 + 48 + 16)?),
    })
}

fn diag_socket(ours: SocketAddr, peer: SocketAddr) -> Option<TcpPeer> {
    use nix::sys::socket::{
        AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto,
        socket,
    };
    use std::os::fd::AsRawFd;
    let req = diag_request(peer, ours)?;
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkSockDiag,
    )
    .ok()?;
    sendto(
        fd.as_raw_fd(),
        &req,
        &NetlinkAddr::new(0, 0),
        MsgFlags::empty(),
    )
    .ok()?;
    let mut buf = [0u8; 512];
    let n = recv(fd.as_raw_fd(), &mut buf, MsgFlags::empty()).ok()?;
    diag_reply_socket(buf.get(..n)?)
}

/// The same from `/proc/net/tcp` (or `tcp6`).
fn proc_socket(ours: SocketAddr, peer: SocketAddr) -> Option<TcpPeer> {
    let table = match peer {
        SocketAddr::V4(_) => "/proc/net/tcp",
        SocketAddr::V6(_) => "/proc/net/tcp6",
    };
    let text = std::fs::read_to_string(table).ok()?;
    find_owner(&text, ours, peer)
}

/// Finds the owner and inode of the socket `peer -> ours` in a `/proc/net/tcp`-style table.
fn find_owner(table: &str, ours: SocketAddr, peer: SocketAddr) -> Option<TcpPeer> {
    table.lines().skip(1).find_map(|line| {
        let mut f = line.split_whitespace();
        let _slot = f.next()?;
        let local = parse_addr(f.next()?)?;
        let remote = parse_addr(f.next()?)?;
        if local != peer || remote != ours {
            return None;
        }
        // state, tx/rx queues, timer, retransmits, then the uid; a timeout, then the inode.
        let uid = f.nth(4)?.parse().ok()?;
        let inode = f.nth(1)?.parse().ok()?;
        Some(TcpPeer { uid, inode })
    })
}

/// `0100007F:1F90` (the address as the kernel's words in host order, then the port).
fn parse_addr(s: &str) -> Option<SocketAddr> {
    let (addr, port) = s.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let w = addr.get(i * 8..i * 8 + 8)?;
        Some(u32::from_str_radix(w, 16).ok()?.to_ne_bytes())
    };
    let ip = match addr.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            let v6 = Ipv6Addr::from(b);
            // A v4 client of a dual-stack listener shows up as ::ffff:a.b.c.d.
            match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None => IpAddr::V6(v6),
            }
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex4(ip: [u8; 4]) -> String {
        format!("{:08X}", u32::from_ne_bytes(ip))
    }

    #[test]
    fn finds_the_peer_socket_and_not_ours() {
        let lo = hex4([127, 0, 0, 1]);
        let table = format!(
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
             0: {lo}:9C40 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1\n\
             1: {lo}:9C40 {lo}:D431 01 00000000:00000000 00:00000000 00000000     0        0 2 1\n\
             2: {lo}:D431 {lo}:9C40 01 00000000:00000000 00:00000000 00000000  1234        0 3 1\n"
        );
        let ours: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        let peer: SocketAddr = "127.0.0.1:54321".parse().unwrap();
        let owner = |uid, inode| Some(TcpPeer { uid, inode });
        assert_eq!(find_owner(&table, ours, peer), owner(1234, 3));
        assert_eq!(find_owner(&table, peer, ours), owner(0, 2));
        let stranger: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(find_owner(&table, ours, stranger), None);
        assert_eq!(find_owner("garbage\n1: zz:zz", ours, peer), None);
    }

    #[test]
    fn reads_this_process_own_connection() {
        use std::net::{TcpListener, TcpStream};
        use std::os::fd::AsRawFd;
        use std::os::unix::fs::MetadataExt;
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, peer) = l.accept().unwrap();
        let me = nix::unistd::geteuid().as_raw();
        // The inode the kernel gives is the one this process's descriptor names.
        let inode = std::fs::metadata(format!("/proc/self/fd/{}", c.as_raw_fd()))
            .ok()
            .map(|m| m.ino());
        if std::path::Path::new("/proc/net/tcp").exists() {
            let got = peer_socket(s.local_addr().unwrap(), peer);
            assert_eq!(got.map(|p| p.uid), Some(me));
            assert_eq!(got.map(|p| p.inode), inode);
            assert_eq!(proc_socket(s.local_addr().unwrap(), peer), got);
            assert_eq!(peer, c.local_addr().unwrap());
        }
        let ours = s.local_addr().unwrap();
        // Where the kernel has socket diagnostics (Linux with inet_diag, as here), they
        // answer for the one socket asked about, and for no other.
        if std::path::Path::new("/proc/net/tcp").exists() {
            assert_eq!(diag_socket(ours, peer).map(|p| p.uid), Some(me));
            assert_eq!(diag_socket(ours, peer).map(|p| p.inode), inode);
            // A socket that does not exist: no answer (the kernel says ENOENT).
            let gone: SocketAddr = "127.0.0.1:1".parse().unwrap();
            assert_eq!(diag_socket(ours, gone), None);
        }
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn parses_v6_words() {
        let a = parse_addr("0000000000000000FFFF00000100007F:0050").unwrap();
        assert_eq!(a, "127.0.0.1:80".parse().unwrap());
        let a = parse_addr("00000000000000000000000001000000:0050").unwrap();
        assert_eq!(a, "[::1]:80".parse().unwrap());
        assert_eq!(parse_addr("0100007F"), None);
        assert_eq!(parse_addr("0100:0050"), None);
    }
}
