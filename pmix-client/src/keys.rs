//! The attribute keys the client interprets itself.
//!
//! Kept here rather than taken from `pmix_types::attr` while that table is being regenerated;
//! the strings are the standard's, so switching to the shared constants changes nothing.

/// `PMIX_OPTIONAL`: a Get miss must not contact the server.
pub(crate) const OPTIONAL: &str = "pmix.optional";
/// `PMIX_TIMEOUT`: seconds the server may take.
pub(crate) const TIMEOUT: &str = "pmix.timeout";
/// `PMIX_DATA_SCOPE`: which put scope a Get searches.
pub(crate) const DATA_SCOPE: &str = "pmix.scope";
/// `PMIX_APPNUM`.
pub(crate) const APPNUM: &str = "pmix.appnum";
/// `PMIX_NODEID`.
pub(crate) const NODEID: &str = "pmix.nodeid";
/// `PMIX_HOSTNAME`.
pub(crate) const HOSTNAME: &str = "pmix.hname";
/// `PMIX_SESSION_INFO`: qualifier selecting the session level.
pub(crate) const SESSION_INFO: &str = "pmix.ssn.info";
/// `PMIX_JOB_INFO`: qualifier selecting the job level.
pub(crate) const JOB_INFO: &str = "pmix.job.info";
/// `PMIX_APP_INFO`: qualifier selecting an app level.
pub(crate) const APP_INFO: &str = "pmix.app.info";
/// `PMIX_NODE_INFO`: qualifier selecting a node level.
pub(crate) const NODE_INFO: &str = "pmix.node.info";
