use std::io;

use pmix_types::Status;

/// What can go wrong in a client call.
///
/// Every variant maps to the PMIx [`Status`] the standard's API would return
/// ([`Error::status`]), so a C-ABI layer or a log line can report the standard's code; the
/// variants add the context a Rust caller needs to act (which variable was wrong, what the
/// server said).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The process was not started by a PMIx server: neither `PMIXRS_SERVER_URI` (a pmix-rs
    /// server) nor `PMIX_SERVER_URI41`/`4`/`3`/`21` (an OpenPMIx server) is set. No longer
    /// returned by [`Client::init`](crate::Client::init), which makes such a process a
    /// singleton; kept for callers that match on it.
    #[error(
        "not started by a PMIx server: neither PMIXRS_SERVER_URI (pmix-rs) nor \
         PMIX_SERVER_URI41/4/3/21 (OpenPMIx) is set"
    )]
    NoServer,
    /// The environment the server gave the process is incomplete or malformed; the launcher
    /// and the client disagree about the rendezvous, which no retry will fix.
    #[error("bad environment variable {var}: {reason}")]
    BadEnvironment {
        /// The variable.
        var: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// The server speaks another version of the native protocol than this library.
    #[error("server speaks protocol version {server}, this client speaks {client}")]
    VersionMismatch {
        /// The server's version.
        server: u16,
        /// Ours.
        client: u16,
    },
    /// The server refused the handshake; `status` says why (`ERR_INVALID_CRED`,
    /// `ERR_NOT_FOUND`, `ERR_EXISTS`, ...).
    #[error("server refused the connection ({status:?}): {reason}")]
    Refused {
        /// The server's status.
        status: Status,
        /// The server's explanation.
        reason: String,
    },
    /// Connecting to or talking with the server failed at the socket level before the
    /// connection was established.
    #[error("cannot reach the server at {path}: {source}")]
    Connect {
        /// The socket path.
        path: String,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The server sent something this client cannot understand; the connection is unusable.
    #[error("protocol error: {0}")]
    Protocol(String),
    /// The client was finalized (or never initialized); no further calls are possible.
    #[error("the client is not initialized")]
    NotInitialized,
    /// The connection to the server is gone; every outstanding and later request fails with
    /// this.
    #[error("lost the connection to the server")]
    LostConnection,
    /// The server answered with a failure status.
    #[error("server returned {status:?}")]
    Server {
        /// The server's status.
        status: Status,
    },
    /// The data asked for does not exist (and, for a local answer, the rules of
    /// `docs/PROTOCOL.md` say the server would not have it either).
    #[error("{key} not found for {proc}")]
    NotFound {
        /// The process asked about, as `nspace:rank`.
        proc: String,
        /// The key, or `*` for all of its data.
        key: String,
    },
    /// A key beginning with `pmix` was given to Put: that namespace is reserved for the
    /// standard's attributes (RFC0009).
    #[error("key {0:?} is reserved for PMIx attributes")]
    ReservedKey(String),
    /// An argument was invalid (a key too long, an unknown scope, ...).
    #[error("invalid argument: {0}")]
    BadParam(String),
    /// A publish was refused for a duplicate key (`ERR_DUPLICATE_KEY`): one of its keys is
    /// already published in the call's range, or the call names a key twice. The value
    /// published first is kept and nothing of the refused call is stored.
    #[error("duplicate key: {0}")]
    DuplicateKey(String),
    /// A lookup found none of its keys (within its `WAIT`, if any), or an unpublish found
    /// nothing of the caller's to withdraw (`ERR_NOT_FOUND`). Names the keys.
    #[error("not published: {0}")]
    NotPublished(String),
    /// A blocking call was made from inside a completion callback, which runs on the thread
    /// that would have to deliver the answer; waiting would deadlock.
    #[error("blocking call from a completion callback would deadlock")]
    WouldDeadlock,
    /// The server did not answer within the `TIMEOUT` the caller gave (plus a margin); the
    /// server is expected to enforce the timeout itself, this is the client's backstop.
    #[error("timed out waiting for the server")]
    Timeout,
    /// The request cannot be expressed in the protocol the server speaks (an OpenPMIx
    /// server has no counterpart for it); nothing was sent.
    #[error("not supported by this server's protocol: {0}")]
    NotSupported(String),
    /// A singleton's spawn could not start the private server it needs (`pmixrun`, see
    /// [`Client::spawn`](crate::Client::spawn)): none was found, it failed to start, or it did
    /// not say where its server is in time. Nothing was spawned.
    #[error("a singleton cannot start its private server: {0}")]
    PrivateServer(String),
    /// A compressed string value (`PMIX_COMPRESSED_STRING`, what libpmix makes of a long
    /// string put) could not be decompressed: corrupt, not UTF-8, or longer than
    /// [`MAX_DECOMPRESSED_STRING`](crate::MAX_DECOMPRESSED_STRING).
    #[error("a compressed string value: {0}")]
    Decompress(String),
    /// A frame could not be encoded or decoded.
    #[error(transparent)]
    Wire(#[from] pmix_wire::Error),
}

impl Error {
    /// The PMIx status the standard's API reports for this error.
    pub fn status(&self) -> Status {
        match self {
            Error::NoServer | Error::BadEnvironment { .. } | Error::NotInitialized => {
                Status::ERR_INIT
            }
            Error::VersionMismatch { .. } | Error::NotSupported(_) => Status::ERR_NOT_SUPPORTED,
            Error::Refused { status, .. } | Error::Server { status } => *status,
            Error::Connect { .. } | Error::PrivateServer(_) => Status::ERR_UNREACH,
            Error::Protocol(_) | Error::Decompress(_) => Status::ERR_UNPACK_FAILURE,
            Error::LostConnection => Status::ERR_LOST_CONNECTION,
            Error::NotFound { .. } | Error::NotPublished(_) => Status::ERR_NOT_FOUND,
            Error::DuplicateKey(_) => Status::ERR_DUPLICATE_KEY,
            Error::ReservedKey(_) | Error::BadParam(_) => Status::ERR_BAD_PARAM,
            Error::WouldDeadlock => Status::ERR_WOULD_BLOCK,
            Error::Timeout => Status::ERR_TIMEOUT,
            Error::Wire(e) => e.status(),
        }
    }

    /// An error for a status the server returned. `SUCCESS` never reaches here.
    pub(crate) fn from_status(status: Status) -> Error {
        Error::Server { status }
    }
}
