//! This node's processes, for a one-node run and for each daemon of a multi-node run: the
//! server's host ([`host`]), registering and starting jobs ([`jobs`], [`launch`]), their
//! output, input and syslog, how many this machine can run ([`capacity`]), and what waiting
//! `PMIx_Log` requests may hold ([`log_budget`]).

pub(crate) mod capacity;
pub(crate) mod hints;
pub(crate) mod host;
pub(crate) mod jobs;
pub(crate) mod launch;
pub(crate) mod log_budget;
pub(crate) mod output;
pub(crate) mod stdin;
pub(crate) mod syslog;
