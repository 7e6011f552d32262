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
    /// A message could not be encoded (a value serde refused, or a value the OpenPMIx wire
    /// format cannot carry, such as a string with a NUL byte or a count over `i32::MAX`).
    #[error("cannot encode message: {0}")]
    Encode(String),
    /// OpenPMIx wire format: the data ends inside an item. Inside a message this is a
    /// truncated (malformed) message; at the start of an item it is how the reference ends
    /// open-ended lists ("read past end of buffer").
    #[error("OpenPMIx data ends inside an item (at byte {at})")]
    Truncated {
        /// Offset, in the buffer being read, of the item that was cut.
        at: usize,
    },
    /// OpenPMIx wire format: a data type, command, codec or peer kind this crate does not
    /// support (a topology or cpuset value, the `v20` codec, a 2.0 peer's handshake). The
    /// bytes may be valid for the reference; the message cannot be used here.
    #[error("not supported by the OpenPMIx codec: {0}")]
    Unsupported(String),
}

impl Error {
    /// The PMIx status reported to a peer or caller for this error.
    pub fn status(&self) -> Status {
        match self {
            Error::FrameTooLarge { .. } => Status::ERR_BAD_PARAM,
            Error::Malformed(_) => Status::ERR_UNPACK_FAILURE,
            Error::NotPmixRs | Error::VersionMismatch { .. } => Status::ERR_NOT_SUPPORTED,
            Error::Encode(_) => Status::ERR_PACK_FAILURE,
            Error::Truncated { .. } => Status::ERR_UNPACK_READ_PAST_END_OF_BUFFER,
            Error::Unsupported(_) => Status::ERR_NOT_SUPPORTED,
        }
    }
}
