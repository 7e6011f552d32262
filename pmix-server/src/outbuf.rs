//! Writing queued output to a non-blocking socket, for the event loops of the server and the
//! name server.

use std::io::{self, Write};

/// Writes `buf[*pos..]` to `stream` until it is all written or the socket is full; empties
/// `buf` once all of it is written. Returns false when the peer is gone.
pub(crate) fn write_queued(stream: &mut impl Write, buf: &mut Vec<u8>, pos: &mut usize) -> bool {
    let mut alive = true;
    while *pos < buf.len() {
        match stream.write(&buf[*pos..]) {
            Ok(0) => {
                alive = false;
                break;
            }
            Ok(n) => *pos += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => {
                alive = false;
                break;
            }
        }
    }
    if *pos == buf.len() {
        buf.clear();
        *pos = 0;
    }
    alive
}
