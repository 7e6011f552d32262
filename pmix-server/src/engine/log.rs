//! Logging (`PMIx_Log`): the host's to carry out (pmixrun prints on its stderr); the server
//! only names the source, so that a client cannot log in another's name.

use pmix_types::{Info, Proc, Status, attr};

use super::host_ops::{HostCall, PendingHost};
use super::{ConnId, Engine};

impl Engine {
    /// `PMIx_Log` from a client: to the host, with the caller named as the source.
    pub(super) fn log(
        &mut self,
        conn: ConnId,
        id: u32,
        me: Proc,
        data: Vec<Info>,
        mut directives: Vec<Info>,
    ) {
        if data.is_empty() {
            return self.reply_status(conn, id, Status::ERR_BAD_PARAM);
        }
        // The source is who sends it, whatever the request claims.
        directives.retain(|i| i.key.as_str() != attr::LOG_SOURCE);
        directives.push(Info::attr(attr::LOG_SOURCE, me.clone()));
        self.host_call(
            PendingHost::Status { conn, id },
            HostCall::Log {
                proc: me,
                data,
                directives,
            },
        );
    }
}
