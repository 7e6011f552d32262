//! Reading the rendezvous the launcher left in the environment: a pmix-rs server's
//! (`docs/PROTOCOL.md`) or an OpenPMIx server's (`docs/OPENPMIX.md`, "The client side").

use std::net::SocketAddr;
use std::path::PathBuf;

use pmix_types::{Nspace, Proc, Rank};
use pmix_wire::PROTOCOL_VERSION;
use pmix_wire::openpmix::{BufferType, Codec, Dialect, Version};

use crate::Error;

/// Where the server is and who we are, as the environment says.
#[derive(Debug)]
pub(crate) struct Rendezvous {
    pub(crate) proc: Proc,
    pub(crate) server: Server,
}

/// The server the launcher points at, and what reaching it takes.
#[derive(Debug)]
pub(crate) enum Server {
    /// A pmix-rs server: its Unix socket and our per-client secret.
    Native { socket: PathBuf, secret: [u8; 16] },
    /// An OpenPMIx server (mpirun, PRRTE, any host on libpmix's server library).
    Openpmix(OpenpmixServer),
}

/// An OpenPMIx server's rendezvous (`PMIX_SERVER_URI*`).
#[derive(Debug)]
pub(crate) struct OpenpmixServer {
    /// The variable the URI came from (it picks the codec, as it does for libpmix).
    pub(crate) var: &'static str,
    /// The URI as given, for messages.
    pub(crate) uri: String,
    /// The server's own identifier, from the URI.
    pub(crate) server: Proc,
    /// Its TCP address.
    pub(crate) addr: SocketAddr,
    /// The codec and buffer type this connection speaks.
    pub(crate) dialect: Dialect,
    /// The `bfrops` module name announced in the handshake (`v41`, `v4`, `v3`, `v21`).
    pub(crate) bfrops: &'static str,
    /// `PMIX_GDS_MODULE`, as the server offered it.
    pub(crate) gds: Option<String>,
    /// `PMIX_HOSTNAME`: the server's name for this node.
    pub(crate) hostname: Option<String>,
    /// `PMIX_VERSION`: the server's OpenPMIx release, when it says (and it reads as one).
    pub(crate) version: Option<Version>,
}

pub(crate) const SERVER_URI: &str = "PMIXRS_SERVER_URI";
pub(crate) const NAMESPACE: &str = "PMIX_NAMESPACE";
pub(crate) const RANK: &str = "PMIX_RANK";
pub(crate) const SECRET: &str = "PMIXRS_SECRET";
pub(crate) const PROTOCOL: &str = "PMIXRS_PROTOCOL";
/// How an OpenPMIx server says packed buffers carry type tags.
pub(crate) const BUFFER_TYPE: &str = pmix_wire::openpmix::BUFFER_TYPE_VAR;
/// The storage modules an OpenPMIx server offers its clients.
pub(crate) const GDS_MODULE: &str = "PMIX_GDS_MODULE";
/// An OpenPMIx server's name for this node.
pub(crate) const HOSTNAME: &str = "PMIX_HOSTNAME";
/// An OpenPMIx server's release.
pub(crate) const VERSION: &str = "PMIX_VERSION";

/// The URI variables of an OpenPMIx server, in the order libpmix looks for them, with the
/// codec and `bfrops` name each one selects. (`PMIX_SERVER_URI2`, PMIx 2.0's `v20`, is not
/// supported.)
pub(crate) const OPENPMIX_URIS: [(&str, Codec, &str); 4] = [
    ("PMIX_SERVER_URI41", Codec::V41, "v41"),
    ("PMIX_SERVER_URI4", Codec::V41, "v4"),
    ("PMIX_SERVER_URI3", Codec::V3, "v3"),
    ("PMIX_SERVER_URI21", Codec::V3, "v21"),
];

fn bad(var: &'static str, reason: impl Into<String>) -> Error {
    Error::BadEnvironment {
        var,
        reason: reason.into(),
    }
}

/// Parses the environment. A pmix-rs server (`PMIXRS_SERVER_URI`) is preferred; without one,
/// an OpenPMIx server's URI; without either, [`Error::NoServer`] (a singleton), unless
/// `PMIX_NAMESPACE` is set. The server URI is checked first so that a process started by
/// something else gets the one clear error rather than a complaint about a secret.
pub(crate) fn parse(get: &dyn Fn(&str) -> Option<String>) -> Result<Rendezvous, Error> {
    if let Some(uri) = get(SERVER_URI) {
        let socket = native_socket(get, &uri)?;
        let proc = identity(get)?;
        let hex = get(SECRET).ok_or_else(|| bad(SECRET, "not set"))?;
        let secret =
            parse_secret(&hex).ok_or_else(|| bad(SECRET, "expected 32 lowercase hex digits"))?;
        return Ok(Rendezvous {
            proc,
            server: Server::Native { socket, secret },
        });
    }
    let found = OPENPMIX_URIS
        .iter()
        .find_map(|&(var, codec, bfrops)| Some((var, get(var)?, codec, bfrops)));
    let Some((var, uri, codec, bfrops)) = found else {
        // A launcher that names the process but not its server left a broken rendezvous:
        // running as a singleton under a name it gave would be a second, separate job.
        if get(NAMESPACE).is_some() {
            return Err(bad(
                NAMESPACE,
                "set, but no server is named (PMIXRS_SERVER_URI, PMIX_SERVER_URI41/4/3/21)",
            ));
        }
        return Err(Error::NoServer);
    };
    let server = openpmix(get, var, uri, codec, bfrops)?;
    Ok(Rendezvous {
        proc: identity(get)?,
        server: Server::Openpmix(server),
    })
}

/// The socket of `PMIXRS_SERVER_URI`, and the protocol version check.
fn native_socket(get: &dyn Fn(&str) -> Option<String>, uri: &str) -> Result<PathBuf, Error> {
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
    Ok(socket)
}

/// `PMIX_NAMESPACE` and `PMIX_RANK`: who we are, whichever server started us.
fn identity(get: &dyn Fn(&str) -> Option<String>) -> Result<Proc, Error> {
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
    Ok(Proc::new(nspace, rank))
}

/// An OpenPMIx server URI: `<server nspace>.<server rank>;tcp4://<ip>:<port>` (or
/// `tcp6://[<ip>]:<port>`); the server's rank follows the last dot of its identifier.
fn openpmix(
    get: &dyn Fn(&str) -> Option<String>,
    var: &'static str,
    uri: String,
    codec: Codec,
    bfrops: &'static str,
) -> Result<OpenpmixServer, Error> {
    let malformed = |why: &str| bad(var, format!("{uri:?} {why}"));
    let (id, addr) = uri
        .split_once(';')
        .ok_or_else(|| malformed("is not <nspace>.<rank>;tcp4://<address>:<port>"))?;
    let (ns, rank) = id
        .rsplit_once('.')
        .ok_or_else(|| malformed("names no server rank (<nspace>.<rank>)"))?;
    let nspace = Nspace::new(ns).map_err(|e| malformed(&e.to_string()))?;
    let rank: u32 = rank
        .parse()
        .map_err(|_| malformed("names no server rank (<nspace>.<rank>)"))?;
    let hostport = addr
        .strip_prefix("tcp4://")
        .or_else(|| addr.strip_prefix("tcp6://"))
        .ok_or_else(|| malformed("is not a tcp4:// or tcp6:// address"))?;
    let addr: SocketAddr = hostport
        .parse()
        .map_err(|_| malformed("does not end in <address>:<port>"))?;
    let buffer = BufferType::from_env_value(get(BUFFER_TYPE).as_deref());
    Ok(OpenpmixServer {
        var,
        uri: uri.clone(),
        server: Proc::new(nspace, rank),
        addr,
        dialect: Dialect::new(codec, buffer),
        bfrops,
        gds: get(GDS_MODULE),
        hostname: get(HOSTNAME),
        version: get(VERSION).as_deref().and_then(Version::parse),
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

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    const ID: [(&str, &str); 2] = [(NAMESPACE, "job.7"), (RANK, "3")];

    fn openpmix_of(vars: &[(&str, &str)]) -> Result<OpenpmixServer, Error> {
        let mut all = ID.to_vec();
        all.extend_from_slice(vars);
        let rv = parse(&env(&all))?;
        assert_eq!(rv.proc.to_string(), "job.7:3");
        match rv.server {
            Server::Openpmix(o) => Ok(o),
            Server::Native { .. } => panic!("not an OpenPMIx rendezvous"),
        }
    }

    #[test]
    fn an_openpmix_uri_picks_the_codec_as_libpmix_does() {
        let uri = "pmix-server.27233;tcp4://127.0.0.1:39345";
        let o = openpmix_of(&[
            ("PMIX_SERVER_URI21", uri),
            ("PMIX_SERVER_URI41", uri),
            ("PMIX_SERVER_URI3", uri),
            (GDS_MODULE, "hash"),
            (HOSTNAME, "vm"),
            (VERSION, "5.0.11rc1"),
        ])
        .unwrap();
        assert_eq!(o.version, Some(Version::new(5, 0, 11)));
        assert_eq!(o.var, "PMIX_SERVER_URI41");
        assert_eq!((o.dialect, o.bfrops), (Dialect::V41, "v41"));
        assert_eq!(o.server.to_string(), "pmix-server:27233");
        assert_eq!(o.addr, "127.0.0.1:39345".parse().unwrap());
        assert_eq!(o.gds.as_deref(), Some("hash"));
        assert_eq!(o.hostname.as_deref(), Some("vm"));
        let o = openpmix_of(&[("PMIX_SERVER_URI4", uri), ("PMIX_SERVER_URI3", uri)]).unwrap();
        assert_eq!((o.dialect, o.bfrops), (Dialect::V41, "v4"));
        // A version that does not read as one is no version, not an error.
        assert_eq!(o.version, None);
        let o = openpmix_of(&[("PMIX_SERVER_URI4", uri), (VERSION, "dev")]).unwrap();
        assert_eq!(o.version, None);
        let o = openpmix_of(&[
            ("PMIX_SERVER_URI21", uri),
            (BUFFER_TYPE, "PMIX_BFROP_BUFFER_FULLY_DESC"),
        ])
        .unwrap();
        assert_eq!(
            (o.dialect, o.bfrops),
            (Dialect::new(Codec::V3, BufferType::FullyDesc), "v21")
        );
        // The server's rank follows the last dot; IPv6 in brackets.
        let o =
            openpmix_of(&[("PMIX_SERVER_URI3", "prterun-vm-1234@0.0;tcp6://[::1]:5000")]).unwrap();
        assert_eq!(o.server.to_string(), "prterun-vm-1234@0:0");
        assert_eq!(o.addr, "[::1]:5000".parse().unwrap());
        assert_eq!(o.dialect.codec, Codec::V3);
    }

    #[test]
    fn a_pmix_rs_server_comes_first() {
        let rv = parse(&env(&[
            (SERVER_URI, "unix:/tmp/s"),
            (SECRET, "000102030405060708090a0b0c0d0eff"),
            ("PMIX_SERVER_URI41", "srv.0;tcp4://127.0.0.1:1"),
            ID[0],
            ID[1],
        ]))
        .unwrap();
        assert!(matches!(rv.server, Server::Native { .. }), "{rv:?}");
    }

    #[test]
    fn bad_openpmix_uris_name_their_variable() {
        for uri in [
            "no-semicolon",
            "nodot;tcp4://127.0.0.1:1",
            "srv.x;tcp4://127.0.0.1:1",
            "srv.0;usock:/tmp/s",
            "srv.0;tcp4://127.0.0.1",
        ] {
            let e = openpmix_of(&[("PMIX_SERVER_URI41", uri)]).unwrap_err();
            assert!(
                matches!(
                    e,
                    Error::BadEnvironment {
                        var: "PMIX_SERVER_URI41",
                        ..
                    }
                ),
                "{uri}: {e:?}"
            );
        }
        // No identity: named too.
        let e = parse(&env(&[("PMIX_SERVER_URI41", "srv.0;tcp4://127.0.0.1:1")])).unwrap_err();
        assert!(
            matches!(e, Error::BadEnvironment { var: NAMESPACE, .. }),
            "{e:?}"
        );
    }
}
