//! Bounds on what one connection may cost the server, whatever its peer does: how much output
//! may wait for a client that does not read, how long a connection may take to authenticate,
//! how many may try at once. `docs/SECURITY.md` says what each protects against.

use std::time::Duration;

/// Bounds on what one connection may cost the server ([`ServerOptions::limits`]).
///
/// [`ServerOptions::limits`]: crate::ServerOptions::limits
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Output queued for a client beyond which the server takes no more of its requests
    /// (and reads no more of its bytes) until the client has read enough; default 16 MiB.
    pub output_queue: usize,
    /// A client holding more than [`Limits::output_queue`] unread is closed when none of it
    /// could be written for this long; default 60 s.
    pub stall_timeout: Duration,
    /// A client already over [`Limits::output_queue`] whose queue grows past this (events and
    /// shared answers keep coming while it does not read) is closed at once; default 256 MiB.
    pub output_queue_hard: usize,
    /// How long an accepted connection has to complete its handshake; default 10 s.
    pub handshake_timeout: Duration,
    /// Connections that have not completed their handshake allowed at once per peer uid
    /// (peers whose uid the kernel does not tell count as one uid); default 4096, above the
    /// connections a node's whole job makes at once when it starts.
    pub unauthenticated_per_uid: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            output_queue: 16 << 20,
            stall_timeout: Duration::from_secs(60),
            output_queue_hard: 256 << 20,
            handshake_timeout: Duration::from_secs(10),
            unauthenticated_per_uid: 4096,
        }
    }
}
