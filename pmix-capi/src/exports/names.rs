//! Name publishing: `PMIx_Publish`, `PMIx_Lookup`, `PMIx_Unpublish`.

use core::ffi::c_char;

use pmix_client::Status;

use crate::convert::{argv_from_c, fixed_str, infos_from_c, proc_to_c, slice_of, value_to_c};
use crate::ctypes::{pmix_info_t, pmix_pdata_t, pmix_status_t};
use crate::guard::guarded;
use crate::state;

/// Publishes the key/value pairs of `info` (with the directives among them, `PMIX_RANGE`...:
/// the keys that are attributes of the standard; any other key is data, `pmixrs.svc` too, as
/// libpmix and OpenPMIx's servers take it).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Publish(info: *const pmix_info_t, ninfo: usize) -> pmix_status_t {
    guarded(|| {
        // SAFETY: the Standard's contract: `info` holds `ninfo` entries.
        let all = unsafe { infos_from_c(info, ninfo) }?;
        let (directives, data) = pmix_client::types::split_publish_info(all);
        state::client()?
            .publish(&data, &directives)
            .map_err(|e| e.status())
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
