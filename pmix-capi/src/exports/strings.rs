//! The Standard's names of codes: `PMIx_Error_string`, `PMIx_Data_type_string`,
//! `PMIx_Scope_string`, `PMIx_Data_range_string`, `PMIx_Persistence_string`,
//! `PMIx_Proc_state_string`, `PMIx_Job_state_string`. Each answers a string that lives as long
//! as the process, the constant's name as the Standard spells it (`"PMIX_ERR_NOT_FOUND"`), or
//! `"UNKNOWN"` for a number without one.

use core::ffi::c_char;
use std::ffi::CString;
use std::sync::OnceLock;

use pmix_client::types::{DataRange, DataType, JobState, Persistence, ProcState, Scope, Status};

use crate::ctypes::{pmix_data_type_t, pmix_scope_t, pmix_status_t};
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
