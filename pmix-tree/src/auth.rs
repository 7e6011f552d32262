//! The proofs of a link's handshake: HMAC-SHA256 of the run's secret over both vertices and
//! both fresh nonces, with a different label for each direction so that neither side's proof
//! can be replayed as the other's; and the same kind of proof for a host's own handshakes
//! ([`prove_token`]).

use std::io::Read;

use hmac::{Hmac, Mac};
use sha2::Sha256;

use crate::Vertex;
use crate::msg::NONCE_LEN;

/// The length of a run's secret.
pub const SECRET_LEN: usize = 32;

type HmacSha256 = Hmac<Sha256>;

/// `N` random bytes from the kernel.
fn random<const N: usize>() -> std::io::Result<[u8; N]> {
    let mut n = [0; N];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut n)?;
    Ok(n)
}

/// A fresh random nonce from the kernel.
pub(crate) fn nonce() -> std::io::Result<[u8; NONCE_LEN]> {
    random()
}

/// A new run's secret, from the kernel: what every vertex of the run proves it knows.
pub fn random_secret() -> std::io::Result<[u8; SECRET_LEN]> {
    random()
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

/// A proof, for a host's own handshake outside the tree (e.g. a daemon asking the root where
/// its parent listens), that the sender knows the run's secret: HMAC-SHA256 of the secret
/// over `label`, `data` (what the proof vouches for) and the checker's fresh `nonce`.
pub fn prove_token(secret: &[u8], label: &[u8], data: &[u8], nonce: &[u8]) -> Vec<u8> {
    token_mac(secret, label, data, nonce)
        .map(|m| m.finalize().into_bytes().to_vec())
        .unwrap_or_default()
}

/// Whether `proof` is [`prove_token`]'s for the same arguments (compared in constant time).
pub fn check_token(secret: &[u8], label: &[u8], data: &[u8], nonce: &[u8], proof: &[u8]) -> bool {
    token_mac(secret, label, data, nonce).is_some_and(|m| m.verify_slice(proof).is_ok())
}

/// A fresh random nonce from the kernel, for [`prove_token`]'s checker.
pub fn fresh_nonce() -> std::io::Result<[u8; NONCE_LEN]> {
    nonce()
}

fn token_mac(secret: &[u8], label: &[u8], data: &[u8], nonce: &[u8]) -> Option<HmacSha256> {
    let mut m = HmacSha256::new_from_slice(secret).ok()?;
    // Lengths first, so that no two (label, data) pairs hash alike.
    m.update(&(label.len() as u64).to_be_bytes());
    m.update(label);
    m.update(&(data.len() as u64).to_be_bytes());
    m.update(data);
    m.update(nonce);
    Some(m)
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

    #[test]
    fn a_token_checks_only_with_the_same_secret_label_data_and_nonce() {
        let n = fresh_nonce().unwrap();
        let p = prove_token(b"secret", b"join", b"vertex 3", &n);
        assert!(check_token(b"secret", b"join", b"vertex 3", &n, &p));
        assert!(!check_token(b"secreT", b"join", b"vertex 3", &n, &p));
        assert!(!check_token(b"secret", b"joi", b"nvertex 3", &n, &p));
        assert!(!check_token(b"secret", b"join", b"vertex 4", &n, &p));
        assert!(!check_token(b"secret", b"join", b"vertex 3", &[0; 32], &p));
    }
}
