//! What processes ask of each other through their servers, as data: an application context
//! to spawn, an event, a published name, a query. The wire crates carry them; clients and
//! hosts use them without knowing any wire.

use serde::{Deserialize, Serialize};

use crate::{DataRange, Info, Key, Proc, Status, Value};

/// One application context of a spawn request (`pmix_app_t`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct App {
    /// The executable.
    pub cmd: String,
    /// Its argv, including argv\[0\].
    pub argv: Vec<String>,
    /// Environment entries (`NAME=value`) to add.
    pub env: Vec<String>,
    /// Working directory; empty means the parent's.
    pub cwd: String,
    /// Number of processes.
    pub maxprocs: u32,
    /// Per-app directives.
    pub info: Vec<Info>,
}

/// A key with a value (`pmix_kval_t`, `PMIX_KVAL`): the unit of job data and committed data
/// on OpenPMIx's wire.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Kval {
    /// The key.
    pub key: Key,
    /// The value.
    pub value: Value,
}

impl Kval {
    /// A key/value pair.
    pub fn new(key: Key, value: impl Into<Value>) -> Self {
        Kval {
            key,
            value: value.into(),
        }
    }
}

/// A packed buffer of OpenPMIx's (`PMIX_BUFFER`): the bytes with the byte that says whether
/// they are fully described (1: not, 2: fully). Only OpenPMIx can read the bytes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Buffer {
    /// OpenPMIx's buffer type byte.
    pub kind: u8,
    /// The packed bytes.
    #[serde(with = "serde_bytes")]
    pub bytes: Vec<u8>,
}

/// One result of a lookup: the value and who published it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Published {
    /// The publishing process.
    pub proc: Proc,
    /// The key.
    pub key: Key,
    /// The value.
    pub value: Value,
}

/// An event delivered to a client.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The event code.
    pub code: Status,
    /// The process that raised it.
    pub source: Proc,
    /// The range it was sent to.
    pub range: DataRange,
    /// Attributes (affected processes, a message, ...).
    pub info: Vec<Info>,
}

/// One query (`pmix_query_t`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Query {
    /// The keys asked for.
    pub keys: Vec<Key>,
    /// Qualifiers (which namespace, which rank, ...).
    pub qualifiers: Vec<Info>,
}
