//! The tool handshake of the OpenPMIx wire (`PMIx_tool_init`, `PMIx_tool_attach_to_server`
//! of libpmix 4.2 and 5.0, python3-pmix's `PMIxTool`): reading who the tool is, and the
//! answer that tells it its name and the server's ([`ToolReply`]).
//!
//! The reference's listener serves the flags of tools and launchers of release 4 on
//! (`TOOL_NEEDS_ID`, `TOOL_GIVEN_ID`, `TOOL_CLIENT` and the three launcher ones); so does this
//! one. A launcher is served as a tool: it may ask what a tool may (`docs/TOOLS.md`), nothing
//! more (it does not launch through this server). Pre-4 tools (flags 1, 2) and singletons (9)
//! are refused.

use pmix_types::{Proc, Status};
use pmix_wire::openpmix::{
    ClientHandshake, Dialect, Identity, JobInfo, PeerFlag, Reply as OpenpmixReply, ToolReply,
};

use crate::engine::{PeerCreds, ToolHello};

/// True for the handshake flags this server serves as tools.
pub(super) fn is_tool(flag: PeerFlag) -> bool {
    (PeerFlag::TOOL_NEEDS_ID.0..=PeerFlag::LAUNCHER_CLIENT.0).contains(&flag.0)
}

/// What the front-end keeps of a tool's handshake while the engine decides.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pending {
    pub(super) dialect: Dialect,
    /// The tool asked to be given a name: the answer carries it.
    pub(super) needs_id: bool,
}

/// Reads a tool's handshake: the hello for the engine and what the answer needs, or why it is
/// refused (the status it is told, and the reason for the log). `kernel_uid` is who owns the
/// peer's socket, when the kernel tells.
pub(super) fn read(
    hs: ClientHandshake,
    kernel_uid: Option<u32>,
) -> Result<(ToolHello, Pending), (Status, String)> {
    let flag = hs.identity.flag();
    let unsupported = |why: String| (Status::ERR_NOT_SUPPORTED, why);
    let bad_cred = |why: String| (Status::ERR_INVALID_CRED, why);
    if !is_tool(flag) {
        return Err(unsupported(format!(
            "peers of kind {flag:?} are not served"
        )));
    }
    let dialect = hs.dialect().map_err(|e| unsupported(e.to_string()))?;
    let (stated_uid, stated_gid) = hs
        .identity
        .ids()
        .ok_or_else(|| bad_cred(format!("a {flag:?} handshake without ids")))?;
    // The `native` module's credential is the only proof this wire carries; the kernel
    // confirms it on loopback TCP where it can tell.
    let creds = (hs.psec == "native")
        .then(|| pmix_wire::openpmix::native_credential_ids(&hs.credential))
        .flatten();
    let Some((uid, gid)) = creds else {
        return Err(bad_cred(format!(
            "a tool sent no native credential (security module {:?})",
            hs.psec
        )));
    };
    if (uid, gid) != (stated_uid, stated_gid) {
        return Err(bad_cred(format!(
            "a tool states uid {stated_uid} gid {stated_gid} but its credential says uid {uid} \
             gid {gid}"
        )));
    }
    if let Some(k) = kernel_uid {
        if k != uid {
            return Err((
                Status::ERR_NO_PERMISSIONS,
                format!("a tool claims uid {uid} but its socket belongs to uid {k}"),
            ));
        }
    }
    let needs_id = matches!(flag, PeerFlag::TOOL_NEEDS_ID | PeerFlag::LAUNCHER_NEEDS_ID);
    let proc = match &hs.identity {
        Identity::IdsAndProc { proc, .. } => Some(proc.clone()),
        Identity::Ids { .. } if needs_id => None,
        _ => return Err(bad_cred(format!("a {flag:?} handshake without a name"))),
    };
    let hello = ToolHello {
        proc,
        creds: PeerCreds { uid, gid },
        info: hs.info,
    };
    Ok((hello, Pending { dialect, needs_id }))
}

/// The answer that admits `tool` (named in it if it asked for a name) to `server`.
pub(super) fn accepted(pending: Pending, tool: &Proc, server: &Proc, out: &mut Vec<u8>) {
    let reply = ToolReply {
        status: Status::SUCCESS,
        assigned: pending.needs_id.then(|| tool.clone()),
        server: Some(server.clone()),
        security: Status::SUCCESS,
    };
    if let Err(e) = reply.encode(out) {
        tracing::error!(%tool, "cannot encode a tool's handshake answer: {e}");
    }
}

/// The answer that refuses a tool: the status alone.
///
/// The reference then closes the connection. A libpmix 4.2 tool does not look at the status
/// (its `recv_connect_ack` drops it; fixed in 5.0): it goes on as if accepted and sends its
/// `REQ`, and, when the close reaches it before its `REQ` is out, waits for the answer
/// forever. So the connection stays open for that one message, which gets an empty answer
/// ([`answer_refused`]) that fails the tool's init at once; the handshake deadline closes
/// it if no message comes.
pub(super) fn refused(status: Status, out: &mut Vec<u8>) {
    let reply = ToolReply {
        status,
        assigned: None,
        server: None,
        security: status,
    };
    // A failure status encodes without the names: it cannot fail.
    let _ = reply.encode(out);
}

/// The answer to the one message of a refused tool ([`refused`]): empty, which libpmix
/// cannot read as its job data, so its `PMIx_tool_init` fails.
pub(super) fn answer_refused(tag: u32, out: &mut Vec<u8>) {
    let _ = pmix_wire::openpmix::encode_message(out, 0, tag, &[]);
}

/// The answer to a tool's `REQ`: its namespace and no data. A tool belongs to no job the
/// server knows; libpmix then fills in the few keys of a tool's own (its job id, size 1)
/// itself, as it does for a tool that connected to nobody.
pub(super) fn job_data(tool: &Proc, dialect: Dialect) -> Result<Vec<u8>, pmix_wire::Error> {
    let mut out = Vec::new();
    OpenpmixReply::JobInfo(JobInfo {
        nspace: tool.nspace.clone(),
        kvals: Vec::new(),
    })
    .encode(dialect, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use pmix_types::Nspace;
    use pmix_wire::openpmix::native_credential;

    fn hs(identity: Identity, cred: (u32, u32)) -> ClientHandshake {
        let mut h = ClientHandshake::simple_client(
            Proc::new(Nspace::new("x").unwrap(), 0),
            native_credential(cred.0, cred.1).to_vec(),
            Dialect::V41,
            "hash",
        );
        h.identity = identity;
        h
    }

    fn needs_id(uid: u32, gid: u32) -> Identity {
        Identity::Ids {
            flag: PeerFlag::TOOL_NEEDS_ID,
            uid,
            gid,
        }
    }

    #[test]
    fn tool_handshakes_are_read_checked_and_answered() {
        let (hello, pending) = read(hs(needs_id(5, 6), (5, 6)), Some(5)).unwrap();
        assert_eq!(hello.proc, None);
        assert_eq!(hello.creds, PeerCreds { uid: 5, gid: 6 });
        assert!(pending.needs_id);
        let named = Proc::new(Nspace::new("dbg").unwrap(), 2);
        let given = Identity::IdsAndProc {
            flag: PeerFlag::TOOL_GIVEN_ID,
            uid: 5,
            gid: 6,
            proc: named.clone(),
        };
        let (hello, pending) = read(hs(given, (5, 6)), None).unwrap();
        assert_eq!(hello.proc, Some(named.clone()));
        assert!(!pending.needs_id);
        // The ids stated and the credential's must agree, and the kernel's uid with both.
        let e = read(hs(needs_id(0, 0), (5, 6)), Some(5)).unwrap_err();
        assert_eq!(e.0, Status::ERR_INVALID_CRED, "{e:?}");
        let e = read(hs(needs_id(5, 6), (5, 6)), Some(7)).unwrap_err();
        assert_eq!(e.0, Status::ERR_NO_PERMISSIONS, "{e:?}");
        let singleton = Identity::IdsAndProc {
            flag: PeerFlag::SINGLETON_CLIENT,
            uid: 5,
            gid: 6,
            proc: named.clone(),
        };
        assert_eq!(
            read(hs(singleton, (5, 6)), None).unwrap_err().0,
            Status::ERR_NOT_SUPPORTED
        );
        // The answer names the tool only when it asked for a name.
        let server = Proc::new(Nspace::new("srv").unwrap(), 0);
        for needs in [true, false] {
            let p = Pending {
                dialect: Dialect::V41,
                needs_id: needs,
            };
            let mut out = Vec::new();
            accepted(p, &named, &server, &mut out);
            let (r, used) = ToolReply::decode(&out, needs).unwrap().unwrap();
            assert_eq!(used, out.len());
            assert_eq!(r.assigned, needs.then(|| named.clone()));
            assert_eq!(r.server, Some(server.clone()));
        }
        let mut out = Vec::new();
        refused(Status::ERR_NO_PERMISSIONS, &mut out);
        assert_eq!(out, Status::ERR_NO_PERMISSIONS.0.to_be_bytes());
    }
}
