//! Reading the rendezvous `setup_fork` left in the environment (`docs/PROTOCOL.md`).

use std::path::PathBuf;

use pmix_types::{Nspace, Proc, Rank};
use pmix_wire::PROTOCOL_VERSION;

use crate::Error;

/// Where the server is and who we are, as the environment says.
#[derive(Debug)]
pub(crate) struct Rendezvous {
    pub(crate) proc: Proc,
    pub(crate) socket: PathBuf,
    pub(crate) secret: [u8; 16],
}

pub(crate) const SERVER_URI: &str = "PMIXRS_SERVER_URI";
pub(crate) const NAMESPACE: &str = "PMIX_NAMESPACE";
pub(crate) const RANK: &str = "PMIX_RANK";
pub(crate) const SECRET: &str = "PMIXRS_SECRET";
pub(crate) const PROTOCOL: &str = "PMIXRS_PROTOCOL";

fn bad(var: &'static str, reason: impl Into<String>) -> Error {
    Error::BadEnvironment {
        var,
        reason: reason.into(),
    }
}

/// Parses the environment; the server URI is checked first so that a process started by
/// something else gets the one clear error rather than a complaint about a secret.
pub(crate) fn parse(get: &dyn Fn(&str) -> Option<String>) -> Result<Rendezvous, Error> {
    let uri = get(SERVER_URI).ok_or(Error::NoServer)?;
    let Some(path) = uri.strip_prefix("unix:") else {
        return Err(bad(SERVER_URI, format!("{uri:?} is not unix:<path>")));
    };
    let socket = PathBuf::from(path);
    if !socket.is_absolute() {
        return Err(bad(SERVER_URI, format!("{path:?} is not an absolute path")));
    }

    // Checked before connecting: a server of another version would refuse us anyway, and
    // saying so here names both versions without a round trip.
    if let Some(v) = get(PROTOCOL) {
        let server: u16 = v
            .trim()
            .parse()
            .map_err(|_| bad(PROTOCOL, format!("{v:?} is not a version number")))?;
        if server != PROTOCOL_VERSION {
            return Err(Error::VersionMismatch {
                server,
                client: PROTOCOL_VERSION,
            });
        }
    }

    let ns = get(NAMESPACE).ok_or_else(|| bad(NAMESPACE, "not set"))?;
    let nspace = Nspace::new(&ns).map_err(|e| bad(NAMESPACE, e.to_string()))?;
    let rank = get(RANK).ok_or_else(|| bad(RANK, "not set"))?;
    let rank: u32 = rank
        .trim()
        .parse()
        .map_err(|_| bad(RANK, format!("{rank:?} is not a rank")))?;
    let rank = Rank(rank);
    if !rank.is_valid() {
        return Err(bad(RANK, format!("{rank} does not name one process")));
    }

    let hex = get(SECRET).ok_or_else(|| bad(SECRET, "not set"))?;
    let secret =
        parse_secret(&hex).ok_or_else(|| bad(SECRET, "expected 32 lowercase hex digits"))?;

    Ok(Rendezvous {
        proc: Proc::new(nspace, rank),
        socket,
        secret,
    })
}

fn parse_secret(hex: &str) -> Option<[u8; 16]> {
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    let bytes = hex.as_bytes();
    if bytes.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (o, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        *o = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_32_lowercase_hex_digits() {
        let s = parse_secret("000102030405060708090a0b0c0d0eff");
        assert_eq!(
            s,
            Some([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 255])
        );
        assert_eq!(parse_secret("000102030405060708090A0B0C0D0EFF"), None);
        assert_eq!(parse_secret("0001"), None);
        assert_eq!(parse_secret("zz0102030405060708090a0b0c0d0eff"), None);
    }
}
