//! Name publishing: `PMIx_Publish`, `PMIx_Lookup`, `PMIx_Unpublish`, and their `_nb` forms.

use core::ffi::{c_char, c_void};

use pmix_client::{Info, Status};

use super::completion::{CbData, complete_op};
use crate::convert::{argv_from_c, fixed_str, infos_from_c, pdata_free, pdata_to_c, proc_to_c};
use crate::convert::{slice_of, value_to_c};
use crate::ctypes::pmix_status_t;
use crate::ctypes::{pmix_info_t, pmix_lookup_cbfunc_t, pmix_op_cbfunc_t, pmix_pdata_t};
use crate::guard::guarded;
use crate::progress::run_on_progress_thread;
use crate::state;

/// The data and the directives of a publish: the directives are the keys that are attributes
/// of the standard (`PMIX_RANGE`...); any other key is data, `pmixrs.svc` too, as libpmix and
/// OpenPMIx's servers take it.
///
/// # Safety
/// The Standard's contract: `info` holds `ninfo` entries.
unsafe fn publish_args(
    info: *const pmix_info_t,
    ninfo: usize,
) -> Result<(Vec<Info>, Vec<Info>), Status> {
    // SAFETY: the caller's promise.
    let all = unsafe { infos_from_c(info, ninfo) }?;
    let (directives, data) = pmix_client::types::split_publish_info(all);
    Ok((data, directives))
}

/// Publishes the key/value pairs of `info` (with the directives among them, `PMIX_RANGE`...).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Publish(info: *const pmix_info_t, ninfo: usize) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (data, directives) = unsafe { publish_args(info, ninfo) }?;
        state::client()?
            .publish(&data, &directives)
            .map_err(|e| e.status())
    })
}

/// [`PMIx_Publish`] completing through `cbfunc(status, cbdata)` on the progress thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Publish_nb(
    info: *const pmix_info_t,
    ninfo: usize,
    cbfunc: pmix_op_cbfunc_t,
    cbdata: *mut c_void,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (data, directives) = unsafe { publish_args(info, ninfo) }?;
        let cbdata = CbData(cbdata);
        state::client()?.publish_nb(&data, &directives, move |r| {
            complete_op(r.map_err(|e| e.status()), cbfunc, cbdata)
        });
        Ok(())
    })
}

/// Looks up the keys of `data`, filling each found entry's value and publisher.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Lookup(
    data: *mut pmix_pdata_t,
    ndata: usize,
    info: *const pmix_info_t,
    ninfo: usize,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract: `data` holds `ndata` entries, `info` `ninfo`.
        let (entries, info) = unsafe { (slice_of(data, ndata)?, infos_from_c(info, ninfo)?) };
        if entries.is_empty() {
            return Err(Status::ERR_BAD_PARAM);
        }
        let keys = entries
            .iter()
            .map(|d| fixed_str(&d.key))
            .collect::<Result<Vec<_>, _>>()?;
        let found = state::client()?
            .lookup(&keys, &info)
            .map_err(|e| e.status())?;
        for (n, pd) in found.iter().enumerate().take(ndata) {
            let Some(publisher) = &pd.proc else { continue };
            let value = value_to_c(&pd.value)?;
            // SAFETY: entry `n` of the caller's array, which it gave us to fill; its old
            // value is the caller's (PMIX_PDATA_CONSTRUCT leaves it empty).
            unsafe {
                let out = &mut *data.add(n);
                out.proc_ = proc_to_c(publisher);
                out.value = value;
            }
        }
        Ok(())
    })
}

/// Looks up the keys of the NULL-terminated `keys`; what was found reaches
/// `cbfunc(status, data, ndata, cbdata)` on the progress thread, one entry per key found (its
/// key, value and publisher), lent until the callback returns.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Lookup_nb(
    keys: *mut *mut c_char,
    info: *const pmix_info_t,
    ninfo: usize,
    cbfunc: pmix_lookup_cbfunc_t,
    cbdata: *mut c_void,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (keys, info) = unsafe { (argv_from_c(keys)?, infos_from_c(info, ninfo)?) };
        if keys.is_empty() {
            return Err(Status::ERR_BAD_PARAM);
        }
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let cbdata = CbData(cbdata);
        state::client()?.lookup_nb(&keys, &info, move |r| {
            run_on_progress_thread(move || {
                let cbdata = cbdata;
                let Some(f) = cbfunc else { return };
                let found: Vec<_> = match r {
                    Ok(all) => all
                        .into_iter()
                        .filter_map(|pd| Some((pd.proc?, pd.key, pd.value)))
                        .collect(),
                    Err(e) => {
                        // SAFETY: the caller's callback, with no data.
                        unsafe { f(e.status().0, core::ptr::null_mut(), 0, cbdata.0) };
                        return;
                    }
                };
                match pdata_to_c(&found) {
                    // SAFETY: the caller's callback; the data is freed once it returns.
                    Ok(p) => unsafe {
                        f(Status::SUCCESS.0, p, found.len(), cbdata.0);
                        pdata_free(p, found.len());
                    },
                    // SAFETY: the caller's callback, with no data.
                    Err(s) => unsafe { f(s.0, core::ptr::null_mut(), 0, cbdata.0) },
                }
            })
        });
        Ok(())
    })
}

/// Withdraws the keys of the NULL-terminated `keys` (NULL: every key this process published).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Unpublish(
    keys: *mut *mut c_char,
    info: *const pmix_info_t,
    ninfo: usize,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (keys, info) = unsafe { (argv_from_c(keys)?, infos_from_c(info, ninfo)?) };
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        state::client()?
            .unpublish(&keys, &info)
            .map_err(|e| e.status())
    })
}

/// [`PMIx_Unpublish`] completing through `cbfunc(status, cbdata)` on the progress thread.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Unpublish_nb(
    keys: *mut *mut c_char,
    info: *const pmix_info_t,
    ninfo: usize,
    cbfunc: pmix_op_cbfunc_t,
    cbdata: *mut c_void,
) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract.
        let (keys, info) = unsafe { (argv_from_c(keys)?, infos_from_c(info, ninfo)?) };
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        let cbdata = CbData(cbdata);
        state::client()?.unpublish_nb(&keys, &info, move |r| {
            complete_op(r.map_err(|e| e.status()), cbfunc, cbdata)
        });
        Ok(())
    })
}
