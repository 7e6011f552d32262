use pmix_types::Status;

/// What can go wrong decoding or encoding native-protocol frames.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The frame announces a body larger than the configured maximum; the connection should be
    /// closed (nothing was allocated for it).
    #[error("frame of {len} bytes exceeds the maximum of {max} bytes")]
    FrameTooLarge {
        /// The announced body length.
        len: usize,
        /// The configured maximum.
        max: usize,
    },
    /// The body is not a valid message; the connection should be closed.
    #[error("malformed message: {0}")]
    Malformed(String),
    /// The peer is not speaking this protocol at all.
    #[error("peer does not speak the pmix-rs protocol")]
    NotPmixRs,
    /// The peer speaks another version of this protocol.
    #[error("peer speaks protocol version {theirs}, this side speaks {ours}")]
    VersionMismatch {
        /// The peer's version.
        theirs: u16,
        /// Ours.
        ours: u16,
    },
    /// A message could not be encoded (a value serde refused).
    #[error("cannot encode message: {0}")]
    Encode(String),
}

impl Error {
    /// The PMIx status reported to a peer or caller for this error.
    pub fn status(&self) -> Status {
        match self {
            Error::FrameTooLarge { .. } => Status::ERR_BAD_PARAM,
            Error::Malformed(_) => Status::ERR_UNPACK_FAILURE,
            Error::NotPmixRs | Error::VersionMismatch { .. } => Status::ERR_NOT_SUPPORTED,
            Error::Encode(_) => Status::ERR_PACK_FAILURE,
        }
    }
}
