//! This node's processes, for a one-node run and for each daemon of a multi-node run: the
//! server's host ([`host`]), registering and starting jobs ([`jobs`], [`launch`]), their
//! output, input and syslog, and how many this machine can run ([`capacity`]).

pub(crate) mod capacity;
pub(crate) mod host;
pub(crate) mod jobs;
pub(crate) mod launch;
pub(crate) mod output;
pub(crate) mod stdin;
pub(crate) mod syslog;
