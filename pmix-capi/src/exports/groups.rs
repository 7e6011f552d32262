//! Groups: `PMIx_Group_construct`, `PMIx_Group_destruct`, `PMIx_Group_invite`,
//! `PMIx_Group_join`, `PMIx_Group_leave`, each also `_nb`. The client's invite, join, leave and
//! destruct wait for their outcome, so their `_nb` forms wait on a thread of their own and
//! complete on the progress thread.

use core::ffi::{c_char, c_int, c_void};

use pmix_client::types::attr;
use pmix_client::{DataArray, Group, GroupOpt, Info, Proc, Status, Value};

use super::completion::{CbData, complete_infos, complete_op, on_own_thread};
use crate::convert::{infos_from_c, infos_out, proc_from_c, procs_from_c, required_str};
use crate::ctypes::pmix_status_t;
use crate::ctypes::{pmix_info_cbfunc_t, pmix_info_t, pmix_op_cbfunc_t, pmix_proc_t};
use crate::guard::guarded;
use crate::state;

/// What a group call answers: the group's context id (when one was assigned),
/// `PMIX_GROUP_CONTEXT_ID`, and its members, `PMIX_GROUP_MEMBERSHIP`; nothing for none.
fn group_results(group: Option<Group>) -> Vec<Info> {
    let Some(group) = group else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(id) = group.context_id {
        out.push(Info::attr(attr::GROUP_CONTEXT_ID, Value::Size(id)));
    }
    let members = DataArray::from_procs(group.members);
    out.push(Info::attr(
        attr::GROUP_MEMBERSHIP,
        Value::DataArray(Box::new(members)),
    ));
    out
}

/// Writes [`group_results`] to the caller's `*results` and `*nresults`, when both are given.
///
/// # Safety
/// Non-NULL out-pointers are valid for writes.
unsafe fn results_out(
    group: Option<Group>,
    results: *mut *mut pmix_info_t,
    nresults: *mut usize,
) -> Result<(), Status> {
    if results.is_null() || nresults.is_null() {
        return Ok(());
    }
    // SAFETY: both checked not NULL; the caller's promise.
    unsafe { infos_out(&group_results(group), results, nresults) }
}

/// The id, processes and directives of a construct or an invitation.
///
/// # Safety
/// The Standard's contract: a C string, `nprocs` processes, `ndirs` entries.
unsafe fn group_args<'a>(
    grp: *const c_char,
    procs: *const pmix_proc_t,
    nprocs: usize,
    directives: *const pmix_info_t,
    ndirs: usize,
) -> Result<(&'a str, Vec<Proc>, Vec<Info>), Status> {
    // SAFETY: the caller's promise.
    unsafe {
        Ok((
            required_str(grp)?,
            procs_from_c(procs, nprocs)?,
            infos_from_c(directives, ndirs)?,
        ))
    }
}

/// Constructs group `grp` of `procs` (a collective over them); the group's context id (when
/// `PMIX_GROUP_ASSIGN_CONTEXT_ID` asked for one) and members come back as infos the caller
/// frees (`PMIX_INFO_FREE`), `PMIX_GROUP_CONTEXT_ID` and `PMIX_GROUP_MEMBERSHIP`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Group_construct(
    grp: *const c_char,
    procs: *const pmix_proc_t,
    nprocs: usize,
    directives: *const pmix_info_t,
    ndirs: usize,
    results: *mut *mut pmix_info_t,
    nresults: *mut usize,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (grp, procs, info) = unsafe { group_args(grp, procs, nprocs, directives, ndirs) }?;
        let group = state::client()?
            .group_construct(grp, &procs, &info)
            .map_err(|e| e.status())?;
        // SAFETY: the caller's out-pointers.
        unsafe { results_out(Some(group), results, nresults) }
    })
}

/// Destructs group `grp`: a collective over its members.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Group_destruct(
    grp: *const c_char,
    directives: *const pmix_info_t,
    ndirs: usize,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (grp, info) = unsafe { (required_str(grp)?, infos_from_c(directives, ndirs)?) };
        state::client()?
            .group_destruct(grp, &info)
            .map_err(|e| e.status())
    })
}

/// [`PMIx_Group_destruct`] completing through `cbfunc(status, cbdata)` on the progress thread
/// (the client's destruct waits, so it waits on a thread of its own).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Group_destruct_nb(
    grp: *const c_char,
    directives: *const pmix_info_t,
    ndirs: usize,
    cbfunc: pmix_op_cbfunc_t,
    cbdata: *mut c_void,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (grp, info) = unsafe { (required_str(grp)?, infos_from_c(directives, ndirs)?) };
        let (grp, client, cbdata) = (grp.to_owned(), state::client()?, CbData(cbdata));
        on_own_thread(move || {
            let r = client.group_destruct(&grp, &info);
            complete_op(r.map_err(|e| e.status()), cbfunc, cbdata)
        })
    })
}

/// [`PMIx_Group_construct`] completing through `cbfunc(status, results, nresults, cbdata,
/// release, release_cbdata)` on the progress thread, the results as the blocking form's, lent
/// until the callback calls `release`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Group_construct_nb(
    grp: *const c_char,
    procs: *const pmix_proc_t,
    nprocs: usize,
    directives: *const pmix_info_t,
    ndirs: usize,
    cbfunc: pmix_info_cbfunc_t,
    cbdata: *mut c_void,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (grp, procs, info) = unsafe { group_args(grp, procs, nprocs, directives, ndirs) }?;
        let cbdata = CbData(cbdata);
        state::client()?.group_construct_nb(grp, &procs, &info, move |r| {
            let r = r.map(|g| group_results(Some(g))).map_err(|e| e.status());
            complete_infos(r, cbfunc, cbdata)
        });
        Ok(())
    })
}

/// Invites `procs` into group `grp`, this process its leader, and waits until every invitee
/// accepted; the results are the group's members (`PMIX_GROUP_MEMBERSHIP`). Unlike libpmix,
/// which waits for ever then, the first decline fails it (`PMIX_GROUP_INVITE_DECLINED`), and
/// so does an invitee's end (`PMIX_GROUP_INVITE_FAILED`) and `PMIX_TIMEOUT`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Group_invite(
    grp: *const c_char,
    procs: *const pmix_proc_t,
    nprocs: usize,
    info: *const pmix_info_t,
    ninfo: usize,
    results: *mut *mut pmix_info_t,
    nresults: *mut usize,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (grp, procs, info) = unsafe { group_args(grp, procs, nprocs, info, ninfo) }?;
        let group = state::client()?
            .group_invite(grp, &procs, &info)
            .map_err(|e| e.status())?;
        // SAFETY: the caller's out-pointers.
        unsafe { results_out(Some(group), results, nresults) }
    })
}

/// [`PMIx_Group_invite`] completing through `cbfunc` on the progress thread, with its results
/// lent until the callback calls its release function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Group_invite_nb(
    grp: *const c_char,
    procs: *const pmix_proc_t,
    nprocs: usize,
    info: *const pmix_info_t,
    ninfo: usize,
    cbfunc: pmix_info_cbfunc_t,
    cbdata: *mut c_void,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (grp, procs, info) = unsafe { group_args(grp, procs, nprocs, info, ninfo) }?;
        let (grp, client, cbdata) = (grp.to_owned(), state::client()?, CbData(cbdata));
        on_own_thread(move || {
            let r = client.group_invite(&grp, &procs, &info);
            let r = r.map(|g| group_results(Some(g))).map_err(|e| e.status());
            complete_infos(r, cbfunc, cbdata)
        })
    })
}

/// The arguments of a join: the group, its leader, the answer and the directives.
///
/// # Safety
/// The Standard's contract: a C string, a process, `ninfo` entries.
unsafe fn join_args<'a>(
    grp: *const c_char,
    leader: *const pmix_proc_t,
    opt: c_int,
    info: *const pmix_info_t,
    ninfo: usize,
) -> Result<(&'a str, Proc, GroupOpt, Vec<Info>), Status> {
    let opt = match opt {
        0 => GroupOpt::Decline,
        1 => GroupOpt::Accept,
        _ => return Err(Status::ERR_BAD_PARAM),
    };
    // SAFETY: the caller's promise.
    unsafe {
        let leader = leader.as_ref().ok_or(Status::ERR_BAD_PARAM)?;
        Ok((
            required_str(grp)?,
            proc_from_c(leader)?,
            opt,
            infos_from_c(info, ninfo)?,
        ))
    }
}

/// Answers `leader`'s invitation into `grp`: `PMIX_GROUP_DECLINE` (0) returns at once with no
/// results; `PMIX_GROUP_ACCEPT` (1) waits until the leader completes the group and answers its
/// members (`PMIX_GROUP_MEMBERSHIP`). (libpmix's join returns once the answer is sent.)
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Group_join(
    grp: *const c_char,
    leader: *const pmix_proc_t,
    opt: c_int,
    info: *const pmix_info_t,
    ninfo: usize,
    results: *mut *mut pmix_info_t,
    nresults: *mut usize,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (grp, leader, opt, info) = unsafe { join_args(grp, leader, opt, info, ninfo) }?;
        let group = state::client()?
            .group_join(grp, &leader, opt, &info)
            .map_err(|e| e.status())?;
        // SAFETY: the caller's out-pointers.
        unsafe { results_out(group, results, nresults) }
    })
}

/// [`PMIx_Group_join`] completing through `cbfunc` on the progress thread, with its results
/// lent until the callback calls its release function.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Group_join_nb(
    grp: *const c_char,
    leader: *const pmix_proc_t,
    opt: c_int,
    info: *const pmix_info_t,
    ninfo: usize,
    cbfunc: pmix_info_cbfunc_t,
    cbdata: *mut c_void,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (grp, leader, opt, info) = unsafe { join_args(grp, leader, opt, info, ninfo) }?;
        let (grp, client, cbdata) = (grp.to_owned(), state::client()?, CbData(cbdata));
        on_own_thread(move || {
            let r = client.group_join(&grp, &leader, opt, &info);
            complete_infos(r.map(group_results).map_err(|e| e.status()), cbfunc, cbdata)
        })
    })
}

/// Leaves group `grp`; the other members hear `PMIX_GROUP_LEFT`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Group_leave(
    grp: *const c_char,
    info: *const pmix_info_t,
    ninfo: usize,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (grp, info) = unsafe { (required_str(grp)?, infos_from_c(info, ninfo)?) };
        state::client()?
            .group_leave(grp, &info)
            .map_err(|e| e.status())
    })
}

/// [`PMIx_Group_leave`] completing through `cbfunc(status, cbdata)` on the progress thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Group_leave_nb(
    grp: *const c_char,
    info: *const pmix_info_t,
    ninfo: usize,
    cbfunc: pmix_op_cbfunc_t,
    cbdata: *mut c_void,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (grp, info) = unsafe { (required_str(grp)?, infos_from_c(info, ninfo)?) };
        let (grp, client, cbdata) = (grp.to_owned(), state::client()?, CbData(cbdata));
        on_own_thread(move || {
            let r = client.group_leave(&grp, &info);
            complete_op(r.map_err(|e| e.status()), cbfunc, cbdata)
        })
    })
}
