//! Who is at the other end of a loopback TCP connection.
//!
//! OpenPMIx clients reach their server over loopback TCP and *claim* a uid and gid in their
//! handshake. Unix sockets tell the server the truth (`SO_PEERCRED`); TCP does not, but on
//! Linux the kernel lists every TCP socket with its owner's uid in `/proc/net/tcp` and
//! `/proc/net/tcp6`. The peer's socket is the one whose local address is the peer's and whose
//! remote address is ours. Elsewhere, or if the table cannot be read, the answer is "unknown"
//! and only the claim is checked.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The uid owning the socket at `peer` that is connected to `ours`, if the OS can tell.
pub(crate) fn peer_uid(ours: SocketAddr, peer: SocketAddr) -> Option<u32> {
    let table = match peer {
        SocketAddr::V4(_) => "/proc/net/tcp",
        SocketAddr::V6(_) => "/proc/net/tcp6",
    };
    let text = std::fs::read_to_string(table).ok()?;
    find_owner(&text, ours, peer)
}

/// Finds the owner of the socket `peer -> ours` in a `/proc/net/tcp`-style table.
fn find_owner(table: &str, ours: SocketAddr, peer: SocketAddr) -> Option<u32> {
    table.lines().skip(1).find_map(|line| {
        let mut f = line.split_whitespace();
        let _slot = f.next()?;
        let local = parse_addr(f.next()?)?;
        let remote = parse_addr(f.next()?)?;
        // state, tx/rx queues, timer, retransmits, then the uid.
        let uid = f.nth(4)?.parse().ok()?;
        (local == peer && remote == ours).then_some(uid)
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
        assert_eq!(find_owner(&table, ours, peer), Some(1234));
        assert_eq!(find_owner(&table, peer, ours), Some(0));
        let stranger: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(find_owner(&table, ours, stranger), None);
        assert_eq!(find_owner("garbage\n1: zz:zz", ours, peer), None);
    }

    #[test]
    fn reads_this_process_own_connection() {
        use std::net::{TcpListener, TcpStream};
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, peer) = l.accept().unwrap();
        let me = nix::unistd::geteuid().as_raw();
        if std::path::Path::new("/proc/net/tcp").exists() {
            assert_eq!(peer_uid(s.local_addr().unwrap(), peer), Some(me));
            assert_eq!(peer, c.local_addr().unwrap());
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
