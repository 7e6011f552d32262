//! A namespace's job data written out in full, by information level: the expanded form a
//! host registers and a connect carries, which a [`JobImage`](crate::JobImage) holds compactly.

use pmix_types::{Info, Nspace, Rank};
use serde::{Deserialize, Serialize};

/// The data of one information level entry that is keyed by a number (an app or a node).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Realm {
    /// The app number or node id.
    pub id: u32,
    /// Its attributes.
    pub info: Vec<Info>,
}

/// Everything registered for one namespace, by information level: what a client receives at
/// init so that job-level Gets never leave the process.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobData {
    /// The namespace.
    pub nspace: Nspace,
    /// Session-level attributes.
    pub session: Vec<Info>,
    /// Job-level attributes (retrieved with rank WILDCARD).
    pub job: Vec<Info>,
    /// Per-application attributes, by app number.
    pub apps: Vec<Realm>,
    /// Per-node attributes, by node id.
    pub nodes: Vec<Realm>,
    /// Per-process attributes, by rank.
    pub procs: Vec<ProcRealm>,
}

/// The attributes of one rank.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProcRealm {
    /// The rank.
    pub rank: Rank,
    /// Its attributes.
    pub info: Vec<Info>,
}
