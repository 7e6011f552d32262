//! A tool's I/O forwarding: `PMIx_IOF_pull`, `PMIx_IOF_deregister`, `PMIx_IOF_push`.
//!
//! Pulled output reaches the C handler on the progress thread (as libpmix calls it on its
//! own), the chunk's bytes lent for the call only; a pull without a handler writes the output
//! to this process's stdout or stderr, by channel, as libpmix does.

use core::ffi::c_void;
use std::io::Write;

use pmix_client::{Info, IofChannel, IofChunk, Status, attr};

use super::completion::{CbData, complete_reference, op_or_wait};
use crate::convert::{infos_free, infos_from_c, infos_to_c, proc_to_c, procs_from_c, slice_of};
use crate::ctypes::{
    pmix_byte_object_t, pmix_hdlr_reg_cbfunc_t, pmix_info_t, pmix_iof_cbfunc_t, pmix_iof_channel_t,
    pmix_op_cbfunc_t, pmix_proc_t, pmix_status_t,
};
use crate::guard::{guarded, guarded_reference};
use crate::progress::run_on_progress_thread;
use crate::state;

/// Hands `chunk` of pull `id` to `handler`, or to stdout/stderr without one; on the progress
/// thread.
fn deliver(handler: pmix_iof_cbfunc_t, id: usize, chunk: &IofChunk) {
    let Some(f) = handler else {
        // Diagnostics go where errors go.
        let _ = if chunk.channel == IofChannel::STDOUT {
            std::io::stdout().write_all(&chunk.data)
        } else {
            std::io::stderr().write_all(&chunk.data)
        };
        return;
    };
    let mut source = proc_to_c(&chunk.source);
    let mut payload = pmix_byte_object_t {
        bytes: chunk.data.as_ptr().cast_mut().cast(),
        size: chunk.data.len(),
    };
    // A chunk whose info cannot be given to C still reaches the handler, without its info.
    let (info, ninfo) = match infos_to_c(&chunk.info) {
        Ok(p) => (p, chunk.info.len()),
        Err(_) => (core::ptr::null_mut(), 0),
    };
    // SAFETY: the caller's handler; the source, the bytes (which it must not write) and the
    // info live until it returns.
    unsafe {
        f(
            id,
            chunk.channel.0,
            &raw mut source,
            &raw mut payload,
            info,
            ninfo,
        );
        infos_free(info, ninfo);
    }
}

/// Asks the tool's primary server for `procs`' output on `channel` (a bit set; rank
/// `PMIX_RANK_WILDCARD` for a whole job), to `cbfunc` (NULL: this process's stdout and
/// stderr). Without `regcbfunc` it answers the pull's reference (zero or more) or an error;
/// with one, `regcbfunc(status, reference, regcbdata)` runs on the progress thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_IOF_pull(
    procs: *const pmix_proc_t,
    nprocs: usize,
    directives: *const pmix_info_t,
    ndirs: usize,
    channel: pmix_iof_channel_t,
    cbfunc: pmix_iof_cbfunc_t,
    regcbfunc: pmix_hdlr_reg_cbfunc_t,
    regcbdata: *mut c_void,
) -> pmix_status_t {
    guarded_reference(|| {
        // SAFETY: the Standard's contract.
        let (procs, dirs) = unsafe {
            (
                procs_from_c(procs, nprocs)?,
                infos_from_c(directives, ndirs)?,
            )
        };
        if procs.is_empty() {
            return Err(Status::ERR_BAD_PARAM);
        }
        let handler_of = move |id: usize| {
            move |chunk: &IofChunk| {
                let chunk = chunk.clone();
                run_on_progress_thread(move || deliver(cbfunc, id, &chunk));
            }
        };
        let result = state::tool()?.iof_pull(procs, IofChannel(channel), dirs, handler_of);
        if regcbfunc.is_none() {
            return result.map(Some);
        }
        let (status, id) = match result {
            Ok(id) => (Status::SUCCESS, id),
            Err(s) => (s, 0),
        };
        complete_reference(status, id, regcbfunc, CbData(regcbdata));
        Ok(None)
    })
}

/// Ends pull `iofhdlr`: its handler is called no more. With `cbfunc`, completing through
/// `cbfunc(status, cbdata)` on the progress thread; without, waiting for the server.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_IOF_deregister(
    iofhdlr: usize,
    directives: *const pmix_info_t,
    ndirs: usize,
    cbfunc: pmix_op_cbfunc_t,
    cbdata: *mut c_void,
) -> pmix_status_t {
    guarded(|| {
        // Directives are read for their validity; the server's cache is not flushed here.
        // SAFETY: the Standard's contract.
        unsafe { infos_from_c(directives, ndirs) }?;
        let tool = state::tool()?;
        op_or_wait(cbfunc, cbdata, |done| tool.iof_deregister(iofhdlr, done))
    })
}

/// Sends the bytes of `bo` to `targets`' stdin through the tool's primary server; an empty
/// `bo`, or `PMIX_IOF_COMPLETE` among the directives, ends their input once what was sent is
/// written. Forwarding this process's own stdin (`PMIX_IOF_PUSH_STDIN`) is not supported.
/// With `cbfunc`, completing through `cbfunc(status, cbdata)` on the progress thread;
/// without, waiting for the server.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_IOF_push(
    targets: *const pmix_proc_t,
    ntargets: usize,
    bo: *mut pmix_byte_object_t,
    directives: *const pmix_info_t,
    ndirs: usize,
    cbfunc: pmix_op_cbfunc_t,
    cbdata: *mut c_void,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract: `bo` is NULL or a byte object of `size` bytes.
        let (targets, dirs, data) = unsafe {
            let data = match bo.as_ref() {
                Some(b) => Some(slice_of(b.bytes.cast_const().cast::<u8>(), b.size)?.to_vec()),
                None => None,
            };
            (
                procs_from_c(targets, ntargets)?,
                infos_from_c(directives, ndirs)?,
                data,
            )
        };
        let given = |key: &str| {
            dirs.iter()
                .any(|i: &Info| i.key.as_str() == key && i.flag() == Some(true))
        };
        if given(attr::IOF_PUSH_STDIN) {
            return Err(Status::ERR_NOT_SUPPORTED);
        }
        let end = given(attr::IOF_COMPLETE);
        let data = match data {
            Some(d) if !d.is_empty() => Some(d),
            // An empty byte object ends the input, as with libpmix.
            Some(_) => None,
            None if end => None,
            None => return Err(Status::ERR_BAD_PARAM),
        };
        let tool = state::tool()?;
        op_or_wait(cbfunc, cbdata, |done| {
            tool.call_nb(
                move |t| match data {
                    Some(d) => {
                        t.iof_push(&targets, &d)?;
                        if end {
                            t.iof_push_end(&targets)
                        } else {
                            Ok(())
                        }
                    }
                    None => t.iof_push_end(&targets),
                },
                done,
            );
        })
    })
}
