use crate::Status;

/// What can go wrong when building a PMIx value from user input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A namespace longer than [`MAX_NSLEN`](crate::MAX_NSLEN) bytes or containing a NUL byte.
    #[error("invalid namespace ({len} bytes): {reason}")]
    InvalidNspace {
        /// Length of the rejected string in bytes.
        len: usize,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A key that is empty, longer than [`MAX_KEYLEN`](crate::MAX_KEYLEN) bytes, or contains a
    /// NUL byte.
    #[error("invalid key ({len} bytes): {reason}")]
    InvalidKey {
        /// Length of the rejected string in bytes.
        len: usize,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A data array whose elements are not all of its declared type.
    #[error("data array declared as {declared:?} holds an element of type {found:?}")]
    MixedDataArray {
        /// The declared element type.
        declared: crate::DataType,
        /// The type of the first element that does not match.
        found: crate::DataType,
    },
    /// A value was not of the type the caller asked for.
    #[error("expected a value of type {expected:?}, found {found:?}")]
    TypeMismatch {
        /// The type that was asked for.
        expected: crate::DataType,
        /// The type that was there.
        found: crate::DataType,
    },
}

impl Error {
    /// The PMIx status that best describes this error, for reporting through the standard's API.
    pub fn status(&self) -> Status {
        match self {
            Error::InvalidNspace { .. } | Error::InvalidKey { .. } => Status::ERR_BAD_PARAM,
            Error::MixedDataArray { .. } | Error::TypeMismatch { .. } => Status::ERR_TYPE_MISMATCH,
        }
    }
}
