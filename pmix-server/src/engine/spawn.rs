//! `PMIx_Spawn`: checked here, carried out by the host, its new namespace handed back.

use pmix_types::{Info, Proc, Rank, Status};
use pmix_wire::{App, Reply, ReplyBody};

use super::host_ops::{HostCall, HostOutcome, PendingHost, failure_of};
use super::{ConnId, Engine, success};

impl Engine {
    /// `PMIx_Spawn` from `me` (a client or a tool): the host's to carry out, if its
    /// processes can be ranks of one job (the host checks them against its resources).
    pub(super) fn spawn(
        &mut self,
        conn: ConnId,
        id: u32,
        me: Proc,
        job_info: Vec<Info>,
        apps: Vec<App>,
    ) {
        let size = apps
            .iter()
            .try_fold(0u32, |n, a| n.checked_add(a.maxprocs))
            .filter(|n| *n < Rank::WILDCARD.0);
        // An application without a process count is the host's to refuse or to count (as
        // PRRTE counts `MAPBY ppr:N:node` daemons of a debugger), not the server's.
        if size.is_none() || apps.is_empty() || apps.iter().any(|a| a.cmd.is_empty()) {
            return self.reply_status(conn, id, Status::ERR_BAD_PARAM);
        }
        self.host_call(
            PendingHost::Spawn { conn, id },
            HostCall::Spawn {
                proc: me,
                job_info,
                apps,
            },
        );
    }

    /// The host answered a spawn: the new namespace, or why not.
    pub(super) fn spawn_done(&mut self, conn: ConnId, id: u32, outcome: HostOutcome) {
        let reply = match outcome {
            HostOutcome::Nspace(Ok(nspace)) => success(ReplyBody::Spawn { nspace }),
            other => Reply::status(failure_of(&other)),
        };
        self.reply(conn, id, reply);
    }
}
