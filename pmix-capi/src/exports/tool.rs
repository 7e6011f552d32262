//! The tool's life cycle and servers: `PMIx_tool_init`, `PMIx_tool_finalize`,
//! `PMIx_tool_attach_to_server`, `PMIx_tool_connect_to_server` (4.2's deprecated form),
//! `PMIx_tool_disconnect`, `PMIx_tool_get_servers`, `PMIx_tool_set_server`.
//!
//! The directives are read by `tool_start.rs`; the tool runs on its owner thread
//! (`tool_session.rs`). After `PMIx_tool_init` the functions a client and a tool share
//! (queries, logging, job control, spawn, events) go to the tool (`session.rs`).

use pmix_client::Status;

use crate::convert::{infos_from_c, proc_from_c, proc_to_c, procs_to_c};
use crate::ctypes::{pmix_info_t, pmix_proc_t, pmix_status_t};
use crate::guard::guarded;
use crate::state;
use crate::tool_session::ToolSession;
use crate::tool_start::{ToolStart, tool_start};

/// Writes `p` to `out` when `out` is not NULL.
///
/// # Safety
/// `out` is NULL or points at a `pmix_proc_t` the caller owns.
unsafe fn write_proc(out: *mut pmix_proc_t, p: &pmix_client::Proc) {
    if !out.is_null() {
        // SAFETY: the caller's promise.
        unsafe { out.write(proc_to_c(p)) };
    }
}

/// Starts this process as a tool attached to the server `info` names (none: the system
/// server), or to none (`PMIX_TOOL_DO_NOT_CONNECT`), and writes its name into `proc` (when
/// not NULL). A second init counts, as `PMIx_Init` does; a client's process cannot be a tool.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_tool_init(
    proc: *mut pmix_proc_t,
    info: *mut pmix_info_t,
    ninfo: usize,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract: `info` holds `ninfo` entries.
        let start = tool_start(&unsafe { infos_from_c(info, ninfo) }?)?;
        let tool =
            state::tool_init(|| ToolSession::start(start.unattached_name(), move || start.open()))?;
        let me = tool.proc()?;
        // SAFETY: the Standard's contract: NULL or the caller's pmix_proc_t.
        unsafe { write_proc(proc, &me) };
        Ok(())
    })
}

/// Counts one finalize of the tool; the last one finalizes at every server.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_tool_finalize() -> pmix_status_t {
    guarded(|| {
        state::tool()?;
        state::finalize(&[])
    })
}

/// Attaches to `start`'s server; answers it and this tool's name.
fn attach(start: ToolStart) -> Result<(pmix_client::Proc, pmix_client::Proc), Status> {
    let tool = state::tool()?;
    let server = tool.call(move |t| start.attach(t))?;
    Ok((server, tool.proc()?))
}

/// Reads the directives of an attachment: NULL is refused, as the Standard says.
///
/// # Safety
/// `info` holds `ninfo` entries.
unsafe fn attach_directives(info: *const pmix_info_t, ninfo: usize) -> Result<ToolStart, Status> {
    if info.is_null() {
        return Err(Status::ERR_BAD_PARAM);
    }
    // SAFETY: the caller's promise.
    tool_start(&unsafe { infos_from_c(info, ninfo) }?)
}

/// Attaches to one more server, named by `info` as for `PMIx_tool_init`; writes its name to
/// `server` and this tool's to `myproc` (each when not NULL). It becomes the primary server
/// with `PMIX_PRIMARY_SERVER`, or if it is the first.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_tool_attach_to_server(
    myproc: *mut pmix_proc_t,
    server: *mut pmix_proc_t,
    info: *mut pmix_info_t,
    ninfo: usize,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (srv, me) = attach(unsafe { attach_directives(info, ninfo) }?)?;
        // SAFETY: the Standard's contract: each NULL or the caller's pmix_proc_t.
        unsafe {
            write_proc(server, &srv);
            write_proc(myproc, &me);
        }
        Ok(())
    })
}

/// 4.2's deprecated form of [`PMIx_tool_attach_to_server`]: the server attached becomes the
/// primary one; this tool's name is written to `proc` (when not NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_tool_connect_to_server(
    proc: *mut pmix_proc_t,
    info: *mut pmix_info_t,
    ninfo: usize,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let mut start = unsafe { attach_directives(info, ninfo) }?;
        start.primary = true;
        let (_, me) = attach(start)?;
        // SAFETY: the Standard's contract: NULL or the caller's pmix_proc_t.
        unsafe { write_proc(proc, &me) };
        Ok(())
    })
}

/// Reads the server a call names.
///
/// # Safety
/// `server` is NULL (refused) or a valid `pmix_proc_t`.
unsafe fn server_arg(server: *const pmix_proc_t) -> Result<pmix_client::Proc, Status> {
    // SAFETY: the caller's promise.
    proc_from_c(unsafe { server.as_ref() }.ok_or(Status::ERR_BAD_PARAM)?)
}

/// Finalizes at `server` and closes its connection; the tool stays initialized.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_tool_disconnect(server: *const pmix_proc_t) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let server = unsafe { server_arg(server) }?;
        state::tool()?.call(move |t| t.disconnect(&server))
    })
}

/// The servers this tool is attached to, as a new array the caller frees
/// (`PMIX_PROC_FREE`); NULL and 0 for none.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_tool_get_servers(
    servers: *mut *mut pmix_proc_t,
    nservers: *mut usize,
) -> pmix_status_t {
    guarded(|| {
        if servers.is_null() || nservers.is_null() {
            return Err(Status::ERR_BAD_PARAM);
        }
        let found = state::tool()?.call(|t| Ok(t.get_servers()))?;
        let out = procs_to_c(&found)?;
        // SAFETY: the out-pointers were checked.
        unsafe {
            servers.write(out);
            nservers.write(found.len());
        }
        Ok(())
    })
}

/// Makes `server`, one this tool is attached to, the primary server. The directives are
/// read for their validity; none changes the choice.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_tool_set_server(
    server: *const pmix_proc_t,
    info: *mut pmix_info_t,
    ninfo: usize,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let server = unsafe {
            infos_from_c(info, ninfo)?;
            server_arg(server)?
        };
        state::tool()?.call(move |t| t.set_server(&server))
    })
}
