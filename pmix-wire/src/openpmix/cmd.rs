//! [`Cmd`]: the command byte that opens every request (`pmix_cmd_t`).

use super::macros::open_u8;

open_u8! {
    /// A command (`pmix_cmd_t`, packed as a `COMMAND`, one byte): the first item of every
    /// request's payload, and of a notification a server pushes. Unknown commands survive as
    /// their number.
    pub struct Cmd;
    /// Job data at init (`PMIX_REQ_CMD`).
    REQ = 0,
    /// `PMIx_Abort`.
    ABORT = 1,
    /// `PMIx_Commit`.
    COMMIT = 2,
    /// `PMIx_Fence_nb`.
    FENCENB = 3,
    /// `PMIx_Get_nb` for data the client does not hold.
    GETNB = 4,
    /// `PMIx_Finalize`.
    FINALIZE = 5,
    /// `PMIx_Publish_nb`.
    PUBLISHNB = 6,
    /// `PMIx_Lookup_nb`.
    LOOKUPNB = 7,
    /// `PMIx_Unpublish_nb`.
    UNPUBLISHNB = 8,
    /// `PMIx_Spawn_nb`.
    SPAWNNB = 9,
    /// `PMIx_Connect_nb`.
    CONNECTNB = 10,
    /// `PMIx_Disconnect_nb`.
    DISCONNECTNB = 11,
    /// An event: client to server `PMIx_Notify_event`, server to client a notification.
    NOTIFY = 12,
    /// Event handler registration.
    REGEVENTS = 13,
    /// Event handler deregistration (never answered).
    DEREGEVENTS = 14,
    /// `PMIx_Query_info_nb`.
    QUERY = 15,
    /// `PMIx_Log_nb`.
    LOG = 16,
    /// `PMIx_Allocation_request_nb`.
    ALLOC = 17,
    /// `PMIx_Job_control_nb`.
    JOB_CONTROL = 18,
    /// `PMIx_Process_monitor_nb`.
    MONITOR = 19,
    /// `PMIx_Get_credential`.
    GET_CREDENTIAL = 20,
    /// `PMIx_Validate_credential`.
    VALIDATE_CRED = 21,
    /// IO forwarding registration.
    IOF_PULL = 22,
    /// IO forwarding data.
    IOF_PUSH = 23,
    /// `PMIx_Group_construct`.
    GROUP_CONSTRUCT = 24,
    /// `PMIx_Group_join`.
    GROUP_JOIN = 25,
    /// `PMIx_Group_invite`.
    GROUP_INVITE = 26,
    /// `PMIx_Group_leave`.
    GROUP_LEAVE = 27,
    /// `PMIx_Group_destruct`.
    GROUP_DESTRUCT = 28,
    /// IO forwarding deregistration.
    IOF_DEREG = 29,
    /// `PMIx_Fabric_register`.
    FABRIC_REGISTER = 30,
    /// `PMIx_Fabric_update`.
    FABRIC_UPDATE = 31,
    /// `PMIx_Compute_distances`.
    COMPUTE_DEVICE_DISTANCES = 32,
}

impl Cmd {
    /// False for the one command the reference never answers (`DEREGEVENTS`); every other
    /// request must get exactly one reply, or the client waits forever.
    pub fn expects_reply(self) -> bool {
        self != Cmd::DEREGEVENTS
    }
}
