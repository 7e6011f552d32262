//! The native protocol's tool handshake: how a tool (a process no server launched: a
//! debugger, a job monitor, `pmixps`) introduces itself to a pmix-rs server, and the answer.
//!
//! A tool opens the server's Unix socket as a client does and sends a [`ToolHello`] instead of
//! a [`Hello`](crate::Hello); the two are told apart by their magic string. The server answers
//! with a [`ToolWelcome`]. From then on the tool speaks as a client does ([`ClientMsg`]
//! requests, [`ServerMsg`] answers), with the short list of requests a tool may make
//! (`docs/TOOLS.md`).
//!
//! [`ClientMsg`]: crate::ClientMsg
//! [`ServerMsg`]: crate::ServerMsg

use pmix_types::{Info, Nspace, Proc, Rank, Status};
use serde::{Deserialize, Serialize};

use crate::Error;
use crate::msg::PROTOCOL_VERSION;

/// Magic string opening a tool's handshake (a client's opens with [`MAGIC`](crate::MAGIC)).
pub const TOOL_MAGIC: &str = "PMIXRS-TOOL";

/// A tool's first frame.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolHello {
    /// Always [`TOOL_MAGIC`].
    pub magic: String,
    /// The tool's protocol version ([`PROTOCOL_VERSION`]).
    pub version: u16,
    /// The name the tool brings, if it has one; without, the server gives it one.
    pub nspace: Option<Nspace>,
    /// Its rank, with `nspace`.
    pub rank: Rank,
    /// What it passes along: its pid (`PROC_PID`), its command line (`CMD_LINE`), ...
    pub info: Vec<Info>,
}

impl ToolHello {
    /// The hello of a tool of this protocol version, named `proc` or asking for a name.
    pub fn new(proc: Option<Proc>, info: Vec<Info>) -> Self {
        let (nspace, rank) = match proc {
            Some(p) => (Some(p.nspace), p.rank),
            None => (None, Rank(0)),
        };
        ToolHello {
            magic: TOOL_MAGIC.into(),
            version: PROTOCOL_VERSION,
            nspace,
            rank,
            info,
        }
    }

    /// The name the tool brings.
    pub fn proc(&self) -> Option<Proc> {
        self.nspace.clone().map(|n| Proc::new(n, self.rank))
    }
}

/// The server's answer to a [`ToolHello`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ToolWelcome {
    /// The tool is served.
    Accepted {
        /// The server's protocol version.
        version: u16,
        /// The tool's name: the one it brought, or the one the server gave it.
        tool: Proc,
        /// The server's own name.
        server: Proc,
    },
    /// The tool is refused; the connection will be closed.
    Refused {
        /// Why: `ERR_NO_PERMISSIONS` (another user's tool), `ERR_NOT_SUPPORTED` (the server
        /// serves no tools, or speaks another version), `ERR_EXISTS` (the name it brought is
        /// taken), or the host's status.
        status: Status,
        /// The server's protocol version.
        version: u16,
        /// A human-readable reason.
        reason: String,
    },
}

/// Decodes a tool's hello: [`Error::NotPmixRs`] if the frame is no tool hello at all,
/// [`Error::VersionMismatch`] if it is one of another version.
pub fn decode_tool_hello(body: &[u8]) -> Result<ToolHello, Error> {
    let mut r = crate::scan::Head::new(body);
    if r.array_len().is_none_or(|n| n < 2) || r.str() != Some(TOOL_MAGIC.as_bytes()) {
        return Err(Error::NotPmixRs);
    }
    let theirs = r
        .uint()
        .ok_or_else(|| Error::Malformed("tool handshake version is not a number".into()))?;
    if theirs != u64::from(PROTOCOL_VERSION) {
        let theirs = u16::try_from(theirs).map_err(|_| {
            Error::Malformed(format!("tool handshake version {theirs} is out of range"))
        })?;
        return Err(Error::VersionMismatch {
            theirs,
            ours: PROTOCOL_VERSION,
        });
    }
    crate::decode_body(body)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn body<T: Serialize>(msg: &T) -> Vec<u8> {
        let mut out = Vec::new();
        crate::encode_frame(msg, &mut out).unwrap();
        out.split_off(crate::HEADER_LEN)
    }

    #[test]
    fn tool_hellos_round_trip_and_are_told_apart() {
        let named = Proc::new(Nspace::new("mytool").unwrap(), 3);
        for hello in [
            ToolHello::new(None, vec![Info::attr(pmix_types::attr::PROC_PID, 42u32)]),
            ToolHello::new(Some(named.clone()), Vec::new()),
        ] {
            let back = decode_tool_hello(&body(&hello)).unwrap();
            assert_eq!(back, hello);
        }
        assert_eq!(
            decode_tool_hello(&body(&ToolHello::new(Some(named), vec![])))
                .unwrap()
                .proc()
                .map(|p| p.rank),
            Some(Rank(3))
        );
        // A client's hello is no tool's, and a tool's is no client's.
        let client = crate::Hello {
            magic: crate::MAGIC.into(),
            version: PROTOCOL_VERSION,
            nspace: Nspace::new("job").unwrap(),
            rank: Rank(0),
            secret: vec![1; 16],
            pid: 1,
        };
        assert!(matches!(
            decode_tool_hello(&body(&client)),
            Err(Error::NotPmixRs)
        ));
        assert!(matches!(
            crate::decode_hello(&body(&ToolHello::new(None, vec![]))),
            Err(Error::NotPmixRs)
        ));
        let mut other = ToolHello::new(None, vec![]);
        other.version = PROTOCOL_VERSION + 1;
        assert!(matches!(
            decode_tool_hello(&body(&other)),
            Err(Error::VersionMismatch { .. })
        ));
        assert!(matches!(decode_tool_hello(b"\x93"), Err(Error::NotPmixRs)));
        assert!(matches!(decode_tool_hello(&[]), Err(Error::NotPmixRs)));
    }
}
