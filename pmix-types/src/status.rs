//! [`Status`]: the standard's status, error and event codes (`pmix_status_t`).

use crate::macros::open_enum;

open_enum! {
    /// A PMIx status code, with every code of the standard's `pmix_common.h` (same numbers and
    /// names, without the `PMIX_` prefix).
    ///
    /// A value, not an error: `SUCCESS` is 0, and some negative codes also mean success
    /// (`OPERATION_SUCCEEDED`) or name events rather than failures. Unknown codes round-trip.
    ///
    /// The names of `pmix_deprecated.h` are here too, so codes sent by older peers still print
    /// by name. Where two names share a number the current one comes first, which makes it the
    /// one [`Status::name`] reports.
    pub struct Status(i32);
    SUCCESS = 0,
    ERROR = -1,
    /// Deprecated.
    ERR_SILENT = -2,
    DEBUGGER_RELEASE = -3,
    /// Deprecated alias of [`Status::DEBUGGER_RELEASE`].
    ERR_DEBUGGER_RELEASE = -3,
    ERR_PROC_RESTART = -4,
    ERR_PROC_CHECKPOINT = -5,
    ERR_PROC_MIGRATE = -6,
    /// Deprecated.
    ERR_PROC_ABORTED = -7,
    ERR_PROC_REQUESTED_ABORT = -8,
    /// Deprecated.
    ERR_PROC_ABORTING = -9,
    /// Deprecated.
    ERR_SERVER_FAILED_REQUEST = -10,
    ERR_EXISTS = -11,
    /// Deprecated alias of [`Status::ERR_EXISTS`].
    EXISTS = -11,
    ERR_INVALID_CRED = -12,
    /// Deprecated.
    ERR_HANDSHAKE_FAILED = -13,
    /// Deprecated.
    ERR_READY_FOR_HANDSHAKE = -14,
    ERR_WOULD_BLOCK = -15,
    ERR_UNKNOWN_DATA_TYPE = -16,
    /// Deprecated.
    ERR_PROC_ENTRY_NOT_FOUND = -17,
    ERR_TYPE_MISMATCH = -18,
    ERR_UNPACK_INADEQUATE_SPACE = -19,
    ERR_UNPACK_FAILURE = -20,
    ERR_PACK_FAILURE = -21,
    /// Deprecated.
    ERR_PACK_MISMATCH = -22,
    ERR_NO_PERMISSIONS = -23,
    ERR_TIMEOUT = -24,
    ERR_UNREACH = -25,
    /// Deprecated.
    ERR_IN_ERRNO = -26,
    ERR_BAD_PARAM = -27,
    ERR_RESOURCE_BUSY = -28,
    ERR_OUT_OF_RESOURCE = -29,
    /// Deprecated.
    ERR_DATA_VALUE_NOT_FOUND = -30,
    ERR_INIT = -31,
    ERR_NOMEM = -32,
    /// Deprecated.
    ERR_INVALID_ARG = -33,
    /// Deprecated.
    ERR_INVALID_KEY = -34,
    /// Deprecated.
    ERR_INVALID_KEY_LENGTH = -35,
    /// Deprecated.
    ERR_INVALID_VAL = -36,
    /// Deprecated.
    ERR_INVALID_VAL_LENGTH = -37,
    /// Deprecated.
    ERR_INVALID_LENGTH = -38,
    /// Deprecated.
    ERR_INVALID_NUM_ARGS = -39,
    /// Deprecated.
    ERR_INVALID_ARGS = -40,
    /// Deprecated.
    ERR_INVALID_NUM_PARSED = -41,
    /// Deprecated.
    ERR_INVALID_KEYVALP = -42,
    /// Deprecated.
    ERR_INVALID_SIZE = -43,
    /// Deprecated.
    ERR_INVALID_NAMESPACE = -44,
    /// Deprecated.
    ERR_SERVER_NOT_AVAIL = -45,
    ERR_NOT_FOUND = -46,
    ERR_NOT_SUPPORTED = -47,
    /// Deprecated.
    ERR_NOT_IMPLEMENTED = -48,
    ERR_COMM_FAILURE = -49,
    ERR_UNPACK_READ_PAST_END_OF_BUFFER = -50,
    ERR_CONFLICTING_CLEANUP_DIRECTIVES = -51,
    ERR_PARTIAL_SUCCESS = -52,
    ERR_DUPLICATE_KEY = -53,
    PROCESS_SET_DEFINE = -55,
    PROCESS_SET_DELETE = -56,
    READY_FOR_DEBUG = -58,
    /// Deprecated alias of [`Status::READY_FOR_DEBUG`].
    DEBUG_WAITING_FOR_NOTIFY = -58,
    ERR_PARAM_VALUE_NOT_SUPPORTED = -59,
    ERR_EMPTY = -60,
    ERR_LOST_CONNECTION = -61,
    ERR_EXISTS_OUTSIDE_SCOPE = -62,
    /// Deprecated.
    ERR_FATAL = -63,
    /// Deprecated.
    ERR_NOT_AVAILABLE = -64,
    /// Deprecated.
    ERR_VALUE_OUT_OF_BOUNDS = -65,
    /// Deprecated.
    ERR_FILE_OPEN_FAILURE = -67,
    /// Deprecated.
    ERR_FILE_READ_FAILURE = -68,
    /// Deprecated.
    ERR_FILE_WRITE_FAILURE = -69,
    /// Deprecated.
    ERR_SYS_LIMITS_PIPES = -70,
    /// Deprecated.
    ERR_SYS_LIMITS_CHILDREN = -71,
    /// Deprecated.
    ERR_PIPE_SETUP_FAILURE = -72,
    /// Deprecated.
    ERR_EXE_NOT_ACCESSIBLE = -73,
    /// Deprecated.
    ERR_JOB_WDIR_NOT_ACCESSIBLE = -74,
    /// Deprecated.
    ERR_SYS_LIMITS_FILES = -75,
    /// Deprecated.
    ERR_LOST_CONNECTION_TO_SERVER = -101,
    /// Deprecated.
    ERR_LOST_PEER_CONNECTION = -102,
    /// Deprecated.
    ERR_LOST_CONNECTION_TO_CLIENT = -103,
    QUERY_PARTIAL_SUCCESS = -104,
    /// Deprecated.
    NOTIFY_ALLOC_COMPLETE = -105,
    JCTRL_CHECKPOINT = -106,
    JCTRL_CHECKPOINT_COMPLETE = -107,
    JCTRL_PREEMPT_ALERT = -108,
    MONITOR_HEARTBEAT_ALERT = -109,
    MONITOR_FILE_ALERT = -110,
    PROC_TERMINATED = -111,
    /// Deprecated.
    ERR_INVALID_TERMINATION = -112,
    FABRIC_UPDATE_ENDPOINTS = -113,
    ERR_EVENT_REGISTRATION = -144,
    EVENT_JOB_END = -145,
    /// Deprecated alias of [`Status::EVENT_JOB_END`].
    ERR_JOB_TERMINATED = -145,
    /// Deprecated.
    ERR_UPDATE_ENDPOINTS = -146,
    MODEL_DECLARED = -147,
    /// Deprecated.
    GDS_ACTION_COMPLETE = -148,
    /// Deprecated.
    PROC_HAS_CONNECTED = -149,
    /// Deprecated.
    CONNECT_REQUESTED = -150,
    MODEL_RESOURCES = -151,
    OPENMP_PARALLEL_ENTERED = -152,
    OPENMP_PARALLEL_EXITED = -153,
    LAUNCHER_READY = -155,
    OPERATION_IN_PROGRESS = -156,
    OPERATION_SUCCEEDED = -157,
    ERR_INVALID_OPERATION = -158,
    GROUP_INVITED = -159,
    GROUP_LEFT = -160,
    GROUP_INVITE_ACCEPTED = -161,
    GROUP_INVITE_DECLINED = -162,
    GROUP_INVITE_FAILED = -163,
    GROUP_MEMBERSHIP_UPDATE = -164,
    GROUP_CONSTRUCT_ABORT = -165,
    GROUP_CONSTRUCT_COMPLETE = -166,
    GROUP_LEADER_SELECTED = -167,
    GROUP_LEADER_FAILED = -168,
    GROUP_CONTEXT_ID_ASSIGNED = -169,
    GROUP_MEMBER_FAILED = -170,
    ERR_REPEAT_ATTR_REGISTRATION = -171,
    ERR_IOF_FAILURE = -172,
    ERR_IOF_COMPLETE = -173,
    LAUNCH_COMPLETE = -174,
    FABRIC_UPDATED = -175,
    FABRIC_UPDATE_PENDING = -176,
    ERR_JOB_APP_NOT_EXECUTABLE = -177,
    ERR_JOB_NO_EXE_SPECIFIED = -178,
    ERR_JOB_FAILED_TO_MAP = -179,
    ERR_JOB_CANCELED = -180,
    ERR_JOB_FAILED_TO_LAUNCH = -181,
    ERR_JOB_ABORTED = -182,
    ERR_JOB_KILLED_BY_CMD = -183,
    ERR_JOB_ABORTED_BY_SIG = -184,
    ERR_JOB_TERM_WO_SYNC = -185,
    ERR_JOB_SENSOR_BOUND_EXCEEDED = -186,
    ERR_JOB_NON_ZERO_TERM = -187,
    ERR_JOB_ALLOC_FAILED = -188,
    ERR_JOB_ABORTED_BY_SYS_EVENT = -189,
    ERR_JOB_EXE_NOT_FOUND = -190,
    EVENT_JOB_START = -191,
    EVENT_SESSION_START = -192,
    EVENT_SESSION_END = -193,
    ERR_PROC_TERM_WO_SYNC = -200,
    EVENT_PROC_TERMINATED = -201,
    EVENT_SYS_BASE = -230,
    /// Deprecated alias of [`Status::EVENT_SYS_BASE`].
    ERR_SYS_BASE = -230,
    EVENT_NODE_DOWN = -231,
    /// Deprecated alias of [`Status::EVENT_NODE_DOWN`].
    ERR_NODE_DOWN = -231,
    EVENT_NODE_OFFLINE = -232,
    /// Deprecated alias of [`Status::EVENT_NODE_OFFLINE`].
    ERR_NODE_OFFLINE = -232,
    ERR_JOB_WDIR_NOT_FOUND = -233,
    ERR_JOB_INSUFFICIENT_RESOURCES = -234,
    ERR_JOB_SYS_OP_FAILED = -235,
    EVENT_SYS_OTHER = -330,
    /// Deprecated alias of [`Status::EVENT_SYS_OTHER`].
    ERR_SYS_OTHER = -330,
    EVENT_NO_ACTION_TAKEN = -331,
    EVENT_PARTIAL_ACTION_TAKEN = -332,
    EVENT_ACTION_DEFERRED = -333,
    EVENT_ACTION_COMPLETE = -334,
    ERR_PROC_KILLED_BY_CMD = -400,
    ERR_PROC_FAILED_TO_START = -401,
    ERR_PROC_ABORTED_BY_SIG = -402,
    ERR_PROC_SENSOR_BOUND_EXCEEDED = -403,
    ERR_EXIT_NONZERO_TERM = -404,
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

    #[test]
    fn aliased_numbers_report_the_current_name() {
        for (code, name) in [
            (-3, "DEBUGGER_RELEASE"),
            (-11, "ERR_EXISTS"),
            (-58, "READY_FOR_DEBUG"),
            (-145, "EVENT_JOB_END"),
            (-230, "EVENT_SYS_BASE"),
            (-231, "EVENT_NODE_DOWN"),
            (-232, "EVENT_NODE_OFFLINE"),
            (-330, "EVENT_SYS_OTHER"),
        ] {
            assert_eq!(Status(code).name(), Some(name), "code {code}");
        }
        assert_eq!(Status::ERR_JOB_TERMINATED, Status::EVENT_JOB_END);
        assert_eq!(Status::ERR_DEBUGGER_RELEASE, Status::DEBUGGER_RELEASE);
        assert_eq!(Status::DEBUG_WAITING_FOR_NOTIFY, Status::READY_FOR_DEBUG);
    }

    #[test]
    fn every_name_is_listed_once() {
        let mut names: Vec<&str> = Status::NAMED.iter().map(|(_, n)| *n).collect();
        names.sort_unstable();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "a status name is listed twice");
    }

    /// Where the standard's headers are installed; `PMIX_INCLUDE_DIR` overrides it.
    fn header_dir() -> std::path::PathBuf {
        std::env::var_os("PMIX_INCLUDE_DIR")
            .map(Into::into)
            .unwrap_or_else(|| "/usr/lib/x86_64-linux-gnu/pmix2/include".into())
    }

    /// The status codes `#define`d in a header: `PMIX_SUCCESS`, every `PMIX_x` defined as a
    /// negative number, and every `PMIX_x` defined as another status already found (the
    /// deprecated header's aliases). Other headers' non-status macros are never negative.
    fn header_statuses(text: &str, found: &mut Vec<(String, i32)>) {
        for line in text.lines() {
            let Some(rest) = line.trim_start().strip_prefix('#') else {
                continue;
            };
            let Some(rest) = rest.trim_start().strip_prefix("define") else {
                continue;
            };
            let mut words = rest.split_whitespace();
            let (Some(name), Some(value)) = (words.next(), words.next()) else {
                continue;
            };
            let Some(name) = name.strip_prefix("PMIX_") else {
                continue;
            };
            let value = value.trim_start_matches('(').trim_end_matches(')');
            let number = match value.parse::<i32>() {
                Ok(n) if n < 0 || name == "SUCCESS" => n,
                Ok(_) => continue,
                Err(_) => {
                    let Some(target) = value.strip_prefix("PMIX_") else {
                        continue;
                    };
                    match found.iter().find(|(n, _)| n == target) {
                        Some((_, n)) => *n,
                        None => continue,
                    }
                }
            };
            found.push((name.to_owned(), number));
        }
    }

    #[test]
    fn table_matches_the_installed_header() {
        let dir = header_dir();
        let common = dir.join("pmix_common.h");
        // CI installs libpmix-dev, so this comparison runs there; without the header there is
        // nothing to compare against.
        let Ok(text) = std::fs::read_to_string(&common) else {
            return;
        };
        let mut found = Vec::new();
        header_statuses(&text, &mut found);
        // A parser that silently stopped matching would make the loop below vacuous.
        assert!(
            found.len() >= 100,
            "only {} status codes parsed from {}",
            found.len(),
            common.display()
        );
        if let Ok(text) = std::fs::read_to_string(dir.join("pmix_deprecated.h")) {
            header_statuses(&text, &mut found);
        }
        let mut missing = Vec::new();
        for (name, number) in &found {
            if Status::from_name(name) != Some(Status(*number)) {
                missing.push(format!("PMIX_{name} = {number}"));
            }
        }
        assert!(
            missing.is_empty(),
            "not in the table as in the header: {missing:?}"
        );
        let invented: Vec<_> = Status::NAMED
            .iter()
            .filter(|(v, n)| !found.iter().any(|(hn, hv)| hn == n && *hv == v.0))
            .collect();
        assert!(invented.is_empty(), "not in the header: {invented:?}");
    }
}
