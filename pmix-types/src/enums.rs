//! The standard's small enumerations, as open newtypes with the header's numbers.

use crate::macros::open_enum;

open_enum! {
    /// Where a Put value is visible (`pmix_scope_t`).
    pub struct Scope(u8);
    /// Not given; treated as the default (`PMIX_SCOPE_UNDEF`).
    UNDEF = 0,
    /// Only processes on the same node.
    LOCAL = 1,
    /// Only processes on other nodes.
    REMOTE = 2,
    /// Everyone.
    GLOBAL = 3,
    /// Only the putting process itself (store_internal).
    INTERNAL = 4,
}

open_enum! {
    /// Which processes may see published data or an event (`pmix_data_range_t`).
    pub struct DataRange(u8);
    UNDEF = 0,
    /// The resource manager only.
    RM = 1,
    /// Processes on the local node.
    LOCAL = 2,
    /// Processes of the publisher's namespace.
    NAMESPACE = 3,
    /// Processes of the session (allocation).
    SESSION = 4,
    /// Everyone.
    GLOBAL = 5,
    /// An explicit list of processes.
    CUSTOM = 6,
    /// The publishing process alone.
    PROC_LOCAL = 7,
    INVALID = 255,
}

open_enum! {
    /// How long published data lives (`pmix_persistence_t`).
    pub struct Persistence(u8);
    /// Until explicitly unpublished.
    INDEF = 0,
    /// Until the first successful lookup.
    FIRST_READ = 1,
    /// Until the publishing process ends.
    PROC = 2,
    /// Until the publisher's namespace ends.
    APP = 3,
    /// Until the session ends.
    SESSION = 4,
    INVALID = 255,
}

open_enum! {
    /// The state of a process (`pmix_proc_state_t`).
    pub struct ProcState(u8);
    UNDEF = 0,
    PREPPED = 1,
    LAUNCH_UNDERWAY = 2,
    RESTART = 3,
    TERMINATE = 4,
    RUNNING = 5,
    CONNECTED = 6,
    UNTERMINATED = 15,
    TERMINATED = 20,
    ERROR = 50,
    KILLED_BY_CMD = 51,
    ABORTED = 52,
    FAILED_TO_START = 53,
    ABORTED_BY_SIG = 54,
    TERM_WO_SYNC = 55,
    COMM_FAILED = 56,
    SENSOR_BOUND_EXCEEDED = 57,
    CALLED_ABORT = 58,
    HEARTBEAT_FAILED = 59,
    MIGRATING = 60,
    CANNOT_RESTART = 61,
    TERM_NON_ZERO = 62,
    FAILED_TO_LAUNCH = 63,
}

open_enum! {
    /// The state of a job (`pmix_job_state_t`).
    pub struct JobState(u8);
    UNDEF = 0,
    AWAITING_ALLOC = 1,
    LAUNCH_UNDERWAY = 2,
    RUNNING = 3,
    SUSPENDED = 4,
    CONNECTED = 5,
    UNTERMINATED = 15,
    TERMINATED = 20,
    TERMINATED_WITH_ERROR = 50,
}

open_enum! {
    /// An allocation request's directive (`pmix_alloc_directive_t`).
    pub struct AllocDirective(u8);
    NEW = 1,
    EXTEND = 2,
    RELEASE = 3,
    REAQUIRE = 4,
    EXTERNAL = 128,
}

open_enum! {
    /// IO forwarding channels, a bit set (`pmix_iof_channel_t`).
    pub struct IofChannel(u16);
    NONE = 0,
    STDIN = 0x1,
    STDOUT = 0x2,
    STDERR = 0x4,
    STDDIAG = 0x8,
    ALL = 0xff,
}

open_enum! {
    /// The state of a fabric link (`pmix_link_state_t`).
    pub struct LinkState(u8);
    UNKNOWN = 0,
    DOWN = 1,
    UP = 2,
}

open_enum! {
    /// How close two processes are, a bit set (`pmix_locality_t`); the numbers are the header's.
    pub struct Locality(u16);
    UNKNOWN = 0,
    SHARE_HWTHREAD = 0x1,
    SHARE_CORE = 0x2,
    SHARE_L1CACHE = 0x4,
    SHARE_L2CACHE = 0x8,
    SHARE_L3CACHE = 0x10,
    SHARE_PACKAGE = 0x20,
    SHARE_NUMA = 0x40,
    SHARE_NODE = 0x4000,
    NONLOCAL = 0x8000,
}

open_enum! {
    /// The type tag of a value (`pmix_data_type_t`), numbered as in the standard's header.
    pub struct DataType(u16);
    UNDEF = 0,
    BOOL = 1,
    BYTE = 2,
    STRING = 3,
    SIZE = 4,
    PID = 5,
    INT = 6,
    INT8 = 7,
    INT16 = 8,
    INT32 = 9,
    INT64 = 10,
    UINT = 11,
    UINT8 = 12,
    UINT16 = 13,
    UINT32 = 14,
    UINT64 = 15,
    FLOAT = 16,
    DOUBLE = 17,
    TIMEVAL = 18,
    TIME = 19,
    STATUS = 20,
    VALUE = 21,
    PROC = 22,
    APP = 23,
    INFO = 24,
    PDATA = 25,
    /// Removed from 4.2's header, still registered by OpenPMIx 5.
    BUFFER = 26,
    BYTE_OBJECT = 27,
    KVAL = 28,
    PERSIST = 30,
    POINTER = 31,
    SCOPE = 32,
    DATA_RANGE = 33,
    COMMAND = 34,
    INFO_DIRECTIVES = 35,
    DATA_TYPE = 36,
    PROC_STATE = 37,
    PROC_INFO = 38,
    DATA_ARRAY = 39,
    PROC_RANK = 40,
    QUERY = 41,
    COMPRESSED_STRING = 42,
    ALLOC_DIRECTIVE = 43,
    IOF_CHANNEL = 45,
    ENVAR = 46,
    COORD = 47,
    REGATTR = 48,
    REGEX = 49,
    JOB_STATE = 50,
    LINK_STATE = 51,
    PROC_CPUSET = 52,
    GEOMETRY = 53,
    DEVICE_DIST = 54,
    ENDPOINT = 55,
    TOPO = 56,
    DEVTYPE = 57,
    LOCTYPE = 58,
    COMPRESSED_BYTE_OBJECT = 59,
    PROC_NSPACE = 60,
    PROC_STATS = 61,
    DISK_STATS = 62,
    NET_STATS = 63,
    NODE_STATS = 64,
    DATA_BUFFER = 65,
    STOR_MEDIUM = 66,
    STOR_ACCESS = 67,
    STOR_PERSIST = 68,
    STOR_ACCESS_TYPE = 69,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_values_survive_and_print_their_number() {
        let s = Scope(42);
        assert_eq!(format!("{s:?}"), "Scope(42)");
        assert_eq!(format!("{:?}", Scope::REMOTE), "REMOTE");
        assert_eq!(DataType::from_name("REGEX"), Some(DataType(49)));
    }
}
