//! The Standard's names of codes: `PMIx_Error_string`, `PMIx_Data_type_string`,
//! `PMIx_Scope_string`, `PMIx_Data_range_string`, `PMIx_Persistence_string`,
//! `PMIx_Proc_state_string`, `PMIx_Job_state_string`. Each answers a string that lives as long
//! as the process, the constant's name as the Standard spells it (`"PMIX_ERR_NOT_FOUND"`), or
//! `"UNKNOWN"` for a number without one.
//!
//! The other enumerations' strings (`PMIx_Alloc_directive_string`, `PMIx_IOF_channel_string`,
//! `PMIx_Link_state_string`, `PMIx_Device_type_string`, `PMIx_Value_comparison_string`,
//! `PMIx_Info_directives_string`) are the words OpenPMIx prints for them (`"NEW"`,
//! `"STDOUT STDERR "`, `"ACTIVE"`...), not the constants' names, so that a program comparing
//! or showing them sees what it sees on libpmix. Attribute names and keys:
//! `PMIx_Get_attribute_string`, `PMIx_Get_attribute_name`.

use core::ffi::{CStr, c_char};
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::OnceLock;

use parking_lot::Mutex;
use pmix_client::types::{DataRange, DataType, JobState, Persistence, ProcState, Scope, Status};
use pmix_client::types::{InfoFlags, IofChannel, attr};

use crate::convert::{c_str, c_string};
use crate::ctypes::{pmix_data_type_t, pmix_info_directives_t, pmix_scope_t, pmix_status_t};
use crate::guard::guarded_or;

const UNKNOWN: &core::ffi::CStr = c"UNKNOWN";

/// The names of one enumeration, `PMIX_`-prefixed and NUL-terminated, built once.
struct Names<T: 'static> {
    table: OnceLock<Vec<(T, CString)>>,
    named: fn() -> &'static [(T, &'static str)],
}

impl<T: Copy + PartialEq> Names<T> {
    const fn new(named: fn() -> &'static [(T, &'static str)]) -> Self {
        Names {
            table: OnceLock::new(),
            named,
        }
    }

    fn of(&self, code: T) -> *const c_char {
        let table = self.table.get_or_init(|| {
            (self.named)()
                .iter()
                .filter_map(|&(v, n)| Some((v, CString::new(format!("PMIX_{n}")).ok()?)))
                .collect()
        });
        guarded_or(UNKNOWN.as_ptr(), || {
            table
                .iter()
                .find(|(v, _)| *v == code)
                .map_or(UNKNOWN.as_ptr(), |(_, n)| n.as_ptr())
        })
    }
}

static STATUS: Names<Status> = Names::new(|| Status::NAMED);
static DATA_TYPE: Names<DataType> = Names::new(|| DataType::NAMED);
static SCOPE: Names<Scope> = Names::new(|| Scope::NAMED);
static RANGE: Names<DataRange> = Names::new(|| DataRange::NAMED);
static PERSISTENCE: Names<Persistence> = Names::new(|| Persistence::NAMED);
static PROC_STATE: Names<ProcState> = Names::new(|| ProcState::NAMED);
static JOB_STATE: Names<JobState> = Names::new(|| JobState::NAMED);

/// The name of a status code.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Error_string(status: pmix_status_t) -> *const c_char {
    STATUS.of(Status(status))
}

/// The name of a data type.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Data_type_string(ty: pmix_data_type_t) -> *const c_char {
    DATA_TYPE.of(DataType(ty))
}

/// The name of a put scope.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Scope_string(scope: pmix_scope_t) -> *const c_char {
    SCOPE.of(Scope(scope))
}

/// The name of a data range.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Data_range_string(range: u8) -> *const c_char {
    RANGE.of(DataRange(range))
}

/// The name of a persistence.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Persistence_string(persist: u8) -> *const c_char {
    PERSISTENCE.of(Persistence(persist))
}

/// The name of a process state.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Proc_state_string(state: u8) -> *const c_char {
    PROC_STATE.of(ProcState(state))
}

/// The name of a job state.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Job_state_string(state: u8) -> *const c_char {
    JOB_STATE.of(JobState(state))
}

/// The word for `code` in `words`, `fallback` for a code without one.
fn word_of<T: PartialEq>(
    words: &[(T, &'static CStr)],
    code: T,
    fallback: &'static CStr,
) -> *const c_char {
    words
        .iter()
        .find(|(c, _)| *c == code)
        .map_or(fallback, |(_, w)| w)
        .as_ptr()
}

/// The word for an allocation directive (`"NEW"`, `"EXTEND"`, `"RELEASE"`, `"REACQUIRE"`);
/// `"UNSPECIFIED"` for any other.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Alloc_directive_string(directive: u8) -> *const c_char {
    const WORDS: [(u8, &CStr); 4] = [
        (1, c"NEW"),
        (2, c"EXTEND"),
        (3, c"RELEASE"),
        (4, c"REACQUIRE"),
    ];
    word_of(&WORDS, directive, c"UNSPECIFIED")
}

/// The words for the channels set in `channel`, each followed by a space (`"STDOUT STDERR "`);
/// `"NONE"` when none of stdin, stdout, stderr and stddiag is set.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_IOF_channel_string(channel: u16) -> *const c_char {
    // Every combination of the four bits, made once.
    static ALL: OnceLock<Vec<CString>> = OnceLock::new();
    let all = ALL.get_or_init(|| {
        let named = [
            (IofChannel::STDIN, "STDIN"),
            (IofChannel::STDOUT, "STDOUT"),
            (IofChannel::STDERR, "STDERR"),
            (IofChannel::STDDIAG, "STDDIAG"),
        ];
        (0u16..16)
            .map(|bits| {
                let mut s = String::new();
                for (c, w) in named {
                    if bits & c.0 != 0 {
                        s.push_str(w);
                        s.push(' ');
                    }
                }
                if s.is_empty() {
                    s.push_str("NONE");
                }
                CString::new(s).unwrap_or_default()
            })
            .collect()
    });
    guarded_or(UNKNOWN.as_ptr(), || {
        all.get(usize::from(channel & 0xf))
            .map_or(UNKNOWN.as_ptr(), |s| s.as_ptr())
    })
}

/// The word for a link state: `"INACTIVE"` (`PMIX_LINK_DOWN`), `"ACTIVE"` (`PMIX_LINK_UP`),
/// `"UNKNOWN"` for any other.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Link_state_string(state: u8) -> *const c_char {
    const WORDS: [(u8, &CStr); 2] = [(1, c"INACTIVE"), (2, c"ACTIVE")];
    word_of(&WORDS, state, UNKNOWN)
}

/// The word for one device type (`"GPU"`, `"NETWORK"`...); `"UNKNOWN"` for none or several.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Device_type_string(ty: u64) -> *const c_char {
    const WORDS: [(u64, &CStr); 6] = [
        (0x1, c"BLOCK"),
        (0x2, c"GPU"),
        (0x4, c"NETWORK"),
        (0x8, c"OPENFABRICS"),
        (0x10, c"DMA"),
        (0x20, c"COPROCESSOR"),
    ];
    word_of(&WORDS, ty, UNKNOWN)
}

/// The words for the outcome of `PMIx_Value_compare`: `"EQUAL"`, `"VALUE1 GREATER"`,
/// `"VALUE2 GREATER"`, `"DIFFERENT TYPES"`; `"UNKNOWN"` for any other.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Value_comparison_string(cmp: core::ffi::c_int) -> *const c_char {
    const WORDS: [(core::ffi::c_int, &CStr); 4] = [
        (0, c"EQUAL"),
        (1, c"VALUE1 GREATER"),
        (2, c"VALUE2 GREATER"),
        (3, c"DIFFERENT TYPES"),
    ];
    word_of(&WORDS, cmp, UNKNOWN)
}

/// The words for an info's directive flags, in new memory the caller frees: `"QUALIFIER"` for
/// a qualifier, else `"REQUIRED"` or `"OPTIONAL"`, followed by `":END"` (the array's end
/// mark), `":PROCESSED"` (a required directive done) and `":PERSISTENT"` for those bits; NULL
/// when there is no memory.
#[unsafe(no_mangle)]
pub extern "C" fn PMIx_Info_directives_string(directives: pmix_info_directives_t) -> *mut c_char {
    guarded_or(core::ptr::null_mut(), || {
        c_string(&directives_words(InfoFlags(directives))).unwrap_or(core::ptr::null_mut())
    })
}

/// What [`PMIx_Info_directives_string`] says of `flags`.
pub(crate) fn directives_words(flags: InfoFlags) -> String {
    if flags.contains(InfoFlags::QUALIFIER) {
        return "QUALIFIER".to_owned();
    }
    let mut s = String::from(if flags.contains(InfoFlags::REQD) {
        "REQUIRED"
    } else {
        "OPTIONAL"
    });
    for (bit, word) in [
        (InfoFlags::ARRAY_END, ":END"),
        (InfoFlags::REQD_PROCESSED, ":PROCESSED"),
        (InfoFlags::PERSISTENT, ":PERSISTENT"),
    ] {
        if flags.contains(bit) {
            s.push_str(word);
        }
    }
    s
}

/// The C copies of the strings the attribute functions answer, made once each and kept, so
/// the pointers handed out stay valid while the library is loaded.
fn kept(s: String) -> *const c_char {
    static KEPT: Mutex<Option<HashMap<String, CString>>> = Mutex::new(None);
    let mut kept = KEPT.lock();
    let kept = kept.get_or_insert_default();
    let c = kept
        .entry(s)
        .or_insert_with_key(|s| CString::new(s.as_str()).unwrap_or_default());
    c.as_ptr()
}

/// The key string of the attribute named `attribute` (`"PMIX_JOB_SIZE"` or `"JOB_SIZE"`:
/// `"pmix.job.size"`); NULL for a name the Standard does not have. The string is the
/// library's, valid while it is loaded.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Get_attribute_string(attribute: *const c_char) -> *const c_char {
    guarded_or(core::ptr::null(), || {
        // SAFETY: the Standard's contract: a C string or NULL.
        let Ok(Some(name)) = (unsafe { c_str(attribute) }) else {
            return core::ptr::null();
        };
        attr::lookup_name(name).map_or(core::ptr::null(), |a| kept(a.key.to_owned()))
    })
}

/// The name of the attribute whose key is `key` (`"pmix.job.size"`: `"PMIX_JOB_SIZE"`); a
/// string that is no attribute's key comes back as is (the caller's pointer), as libpmix
/// answers; NULL for NULL. The name is the library's, valid while it is loaded.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn PMIx_Get_attribute_name(key: *const c_char) -> *const c_char {
    guarded_or(key, || {
        // SAFETY: the Standard's contract: a C string or NULL.
        let Ok(Some(k)) = (unsafe { c_str(key) }) else {
            return key;
        };
        attr::lookup(k).map_or(key, |a| kept(format!("PMIX_{}", a.name)))
    })
}
