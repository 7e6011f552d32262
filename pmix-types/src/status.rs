//! [`Status`]: the standard's status, error and event codes (`pmix_status_t`).

use crate::macros::open_enum;

open_enum! {
    /// A PMIx status code, with every code of the standard's `pmix_common.h` (same numbers and
    /// names, without the `PMIX_` prefix).
    ///
    /// A value, not an error: `SUCCESS` is 0, and some negative codes also mean success
    /// (`OPERATION_SUCCEEDED`) or name events rather than failures. Unknown codes round-trip.
    pub struct Status(i32);
    SUCCESS = 0,
    ERROR = -1,
    ERR_SILENT = -2,
    DEBUGGER_RELEASE = -3,
    ERR_PROC_RESTART = -4,
    ERR_PROC_CHECKPOINT = -5,
    ERR_PROC_MIGRATE = -6,
    ERR_PROC_REQUESTED_ABORT = -8,
    ERR_EXISTS = -11,
    ERR_INVALID_CRED = -12,
    ERR_WOULD_BLOCK = -15,
    ERR_UNKNOWN_DATA_TYPE = -16,
    ERR_TYPE_MISMATCH = -18,
    ERR_UNPACK_INADEQUATE_SPACE = -19,
    ERR_UNPACK_FAILURE = -20,
    ERR_PACK_FAILURE = -21,
    ERR_NO_PERMISSIONS = -23,
    ERR_TIMEOUT = -24,
    ERR_UNREACH = -25,
    ERR_BAD_PARAM = -27,
    ERR_RESOURCE_BUSY = -28,
    ERR_OUT_OF_RESOURCE = -29,
    ERR_INIT = -31,
    ERR_NOMEM = -32,
    ERR_NOT_FOUND = -46,
    ERR_NOT_SUPPORTED = -47,
    ERR_COMM_FAILURE = -49,
    ERR_UNPACK_READ_PAST_END_OF_BUFFER = -50,
    ERR_CONFLICTING_CLEANUP_DIRECTIVES = -51,
    ERR_PARTIAL_SUCCESS = -52,
    ERR_DUPLICATE_KEY = -53,
    PROCESS_SET_DEFINE = -55,
    PROCESS_SET_DELETE = -56,
    READY_FOR_DEBUG = -58,
    ERR_PARAM_VALUE_NOT_SUPPORTED = -59,
    ERR_EMPTY = -60,
    ERR_LOST_CONNECTION = -61,
    ERR_EXISTS_OUTSIDE_SCOPE = -62,
    QUERY_PARTIAL_SUCCESS = -104,
    PROC_TERMINATED = -111,
    ERR_EVENT_REGISTRATION = -144,
    EVENT_JOB_END = -145,
    OPERATION_IN_PROGRESS = -156,
    OPERATION_SUCCEEDED = -157,
    ERR_INVALID_OPERATION = -158,
    ERR_REPEAT_ATTR_REGISTRATION = -171,
    EVENT_PROC_TERMINATED = -201,
    EXTERNAL_ERR_BASE = -3000,
}

impl Status {
    /// True for codes that report success (`SUCCESS`, `OPERATION_SUCCEEDED`).
    pub fn is_success(self) -> bool {
        matches!(self, Status::SUCCESS | Status::OPERATION_SUCCEEDED)
    }

    /// `Ok(())` for a success code, `Err(self)` otherwise.
    pub fn into_result(self) -> Result<(), Status> {
        if self.is_success() { Ok(()) } else { Err(self) }
    }
}

impl core::fmt::Display for Status {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.name() {
            Some(n) => write!(f, "PMIX_{n} ({})", self.0),
            None => write!(f, "PMIx status {}", self.0),
        }
    }
}

impl std::error::Error for Status {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_match_the_header() {
        assert_eq!(Status::ERR_NOT_FOUND.0, -46);
        assert_eq!(Status::ERR_TIMEOUT.0, -24);
        assert_eq!(Status::ERR_DUPLICATE_KEY.0, -53);
        assert_eq!(Status::from_name("ERR_NOT_SUPPORTED"), Some(Status(-47)));
        assert_eq!(Status(-9999).to_string(), "PMIx status -9999");
        assert_eq!(
            Status::ERR_NOT_FOUND.to_string(),
            "PMIX_ERR_NOT_FOUND (-46)"
        );
    }
}
