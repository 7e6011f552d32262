use pmix_types::{Nspace, Proc, Status};

/// What can go wrong in the server library's API.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system call failed (creating the rendezvous directory or socket, starting
    /// the event loop); `context` says which.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// `register_nspace` was given information that contradicts itself or cannot be parsed; the
    /// message names the attribute. Nothing was registered.
    #[error("invalid namespace registration: {0}")]
    BadRegistration(String),
    /// The namespace is not registered.
    #[error("namespace {0} is not registered")]
    UnknownNspace(Nspace),
    /// The process is not registered as a client.
    #[error("process {0} is not registered")]
    UnknownProc(Proc),
    /// An argument is out of range; the message says which.
    #[error("bad parameter: {0}")]
    BadParam(String),
    /// The server has been finalized (or its event loop has stopped).
    #[error("the server is not running")]
    Stopped,
}

impl Error {
    /// The PMIx status for this error.
    pub fn status(&self) -> Status {
        match self {
            Error::Io { .. } => Status::ERROR,
            Error::BadRegistration(_) | Error::BadParam(_) => Status::ERR_BAD_PARAM,
            Error::UnknownNspace(_) | Error::UnknownProc(_) => Status::ERR_NOT_FOUND,
            Error::Stopped => Status::ERR_INIT,
        }
    }

    pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let context = context.into();
        move |source| Error::Io { context, source }
    }
}
