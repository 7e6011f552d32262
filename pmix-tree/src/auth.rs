//! The proofs of a link's handshake: HMAC-SHA256 of the run's secret over both vertices and
//! both fresh nonces, with a different label for each direction so that neither side's proof
//! can be replayed as the other's.

use std::io::Read;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::Vertex;
use crate::msg::NONCE_LEN;

type HmacSha256 = Hmac<Sha256>;

/// A fresh random nonce from the kernel.
pub(crate) fn nonce() -> std::io::Result<[u8; NONCE_LEN]> {
    let mut n = [0; NONCE_LEN];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut n)?;
    Ok(n)
}

/// Which side of the link a proof comes from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Side {
    Parent,
    Child,
}

/// The MAC of `side` for the handshake of `child` (under `parent`), over both nonces; `None`
/// only if HMAC refused the key (it accepts every length).
fn mac(
    secret: &[u8],
    side: Side,
    parent: Vertex,
    child: Vertex,
    child_nonce: &[u8],
    parent_nonce: &[u8],
) -> Option<HmacSha256> {
    let mut m = HmacSha256::new_from_slice(secret).ok()?;
    m.update(match side {
        Side::Parent => b"pmix-tree parent proof v1",
        Side::Child => b"pmix-tree child proof v1.",
    });
    m.update(&parent.to_be_bytes());
    m.update(&child.to_be_bytes());
    m.update(child_nonce);
    m.update(parent_nonce);
    Some(m)
}

/// The proof `side` sends.
pub(crate) fn prove(
    secret: &[u8],
    side: Side,
    parent: Vertex,
    child: Vertex,
    child_nonce: &[u8],
    parent_nonce: &[u8],
) -> Vec<u8> {
    mac(secret, side, parent, child, child_nonce, parent_nonce)
        .map(|m| m.finalize().into_bytes().to_vec())
        .unwrap_or_default()
}

/// Whether `proof` is what `side` must send (compared in constant time).
pub(crate) fn check(
    secret: &[u8],
    side: Side,
    parent: Vertex,
    child: Vertex,
    child_nonce: &[u8],
    parent_nonce: &[u8],
    proof: &[u8],
) -> bool {
    mac(secret, side, parent, child, child_nonce, parent_nonce)
        .is_some_and(|m| m.verify_slice(proof).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_checks_only_with_the_same_secret_side_and_nonces() {
        let (a, b) = (nonce().unwrap(), nonce().unwrap());
        assert_ne!(a, b);
        let p = prove(b"secret", Side::Parent, 0, 1, &a, &b);
        assert!(check(b"secret", Side::Parent, 0, 1, &a, &b, &p));
        assert!(!check(b"secreT", Side::Parent, 0, 1, &a, &b, &p));
        assert!(!check(b"secret", Side::Child, 0, 1, &a, &b, &p));
        assert!(!check(b"secret", Side::Parent, 0, 2, &a, &b, &p));
        assert!(!check(b"secret", Side::Parent, 0, 1, &b, &a, &p));
        assert!(!check(b"secret", Side::Parent, 0, 1, &a, &b, &p[1..]));
    }
}
