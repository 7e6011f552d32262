//! The tool handshake of the OpenPMIx wire (`PMIx_tool_init`, `PMIx_tool_attach_to_server`
//! of libpmix 4.2 and 5.0, python3-pmix's `PMIxTool`): reading who the tool is, and the
//! answer that tells it its name and the server's ([`ToolReply`]).
//!
//! The reference's listener serves the flags of tools and launchers of release 4 on
//! (`TOOL_NEEDS_ID`, `TOOL_GIVEN_ID`, `TOOL_CLIENT` and the three launcher ones); so does this
//! one. A launcher is served as a tool: it may query, nothing more (it does not launch
//! through this server). Pre-4 tools (flags 1, 2) and singletons (9) are refused.

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
/// refused. `kernel_uid` is who owns the peer's socket, when the kernel tells.
pub(super) fn read(
    hs: ClientHandshake,
    kernel_uid: Option<u32>,
) -> Result<(ToolHello, Pending), String> {
    let flag = hs.identity.flag();
    if !is_tool(flag) {
        return Err(format!("peers of kind {flag:?} are not served"));
    }
    let dialect = hs.dialect().map_err(|e| e.to_string())?;
    let (stated_uid, stated_gid) = hs
        .identity
        .ids()
        .ok_or_else(|| format!("a {flag:?} handshake without ids"))?;
    // The `native` module's credential is the only proof this wire carries; the kernel
    // confirms it on loopback TCP where it can tell.
    let creds = (hs.psec == "native")
        .then(|| pmix_wire::openpmix::native_credential_ids(&hs.credential))
        .flatten();
    let Some((uid, gid)) = creds else {
        return Err(format!(
            "a tool sent no native credential (security module {:?})",
            hs.psec
        ));
    };
    if (uid, gid) != (stated_uid, stated_gid) {
        return Err(format!(
            "a tool states uid {stated_uid} gid {stated_gid} but its credential says uid {uid} \
             gid {gid}"
        ));
    }
    if let Some(k) = kernel_uid {
        if k != uid {
            return Err(format!(
                "a tool claims uid {uid} but its socket belongs to uid {k}"
            ));
        }
    }
    let needs_id = matches!(flag, PeerFlag::TOOL_NEEDS_ID | PeerFlag::LAUNCHER_NEEDS_ID);
    let proc = match &hs.identity {
        Identity::IdsAndProc { proc, .. } => Some(proc.clone()),
        Identity::Ids { .. } if needs_id => None,
        _ => return Err(format!("a {flag:?} handshake without a name")),
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
