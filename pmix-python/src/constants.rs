//! The module's `PMIX_*` constants, with the standard's names and numbers, taken from
//! pmix-types' tables (never written out again here): the status codes (`PMIX_SUCCESS`,
//! `PMIX_ERR_NOT_FOUND`, ...), data types (`PMIX_STRING`, `PMIX_UINT32`, ...), scopes
//! (`PMIX_LOCAL`, `PMIX_REMOTE`, `PMIX_GLOBAL`), data ranges (`PMIX_RANGE_*`), persistence
//! (`PMIX_PERSIST_*`), process and job states, info directives (`PMIX_INFO_*`), the reserved
//! ranks (`PMIX_RANK_*`), and every attribute's key string (`PMIX_JOB_SIZE == "pmix.job.size"`).

use pmix_types::{
    DataRange, DataType, InfoFlags, JobState, Persistence, ProcState, Rank, Scope, Status, attr,
};
use pyo3::prelude::*;
use pyo3::types::PyModule;

/// The reserved ranks, which pmix-types keeps as associated constants without a table.
const RANKS: [(&str, Rank); 6] = [
    ("UNDEF", Rank::UNDEF),
    ("WILDCARD", Rank::WILDCARD),
    ("LOCAL_NODE", Rank::LOCAL_NODE),
    ("INVALID", Rank::INVALID),
    ("LOCAL_PEERS", Rank::LOCAL_PEERS),
    ("VALID", Rank::VALID),
];

/// Adds `PMIX_<prefix><name>` for each `(value, name)`.
fn add_table<T: Copy>(
    m: &Bound<'_, PyModule>,
    prefix: &str,
    table: &[(T, &str)],
    number: impl Fn(T) -> i64,
) -> PyResult<()> {
    for &(v, name) in table {
        m.add(format!("PMIX_{prefix}{name}").as_str(), number(v))?;
    }
    Ok(())
}

/// Adds every constant to the module `m`.
pub(crate) fn add_all(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Keys first: where an attribute and a number share a name, the number is what
    // python3-pmix gives.
    for a in attr::ATTRIBUTES {
        m.add(format!("PMIX_{}", a.name).as_str(), a.key)?;
    }
    add_table(m, "", Status::NAMED, |s| s.0.into())?;
    add_table(m, "", DataType::NAMED, |t| t.0.into())?;
    for &(s, name) in Scope::NAMED {
        let name = if s == Scope::UNDEF {
            "SCOPE_UNDEF"
        } else {
            name
        };
        m.add(format!("PMIX_{name}").as_str(), s.0)?;
    }
    add_table(m, "RANGE_", DataRange::NAMED, |r| r.0.into())?;
    add_table(m, "PERSIST_", Persistence::NAMED, |p| p.0.into())?;
    add_table(m, "PROC_STATE_", ProcState::NAMED, |s| s.0.into())?;
    add_table(m, "JOB_STATE_", JobState::NAMED, |s| s.0.into())?;
    add_table(m, "INFO_", InfoFlags::NAMED, |f| f.0.into())?;
    for (name, r) in RANKS {
        m.add(format!("PMIX_RANK_{name}").as_str(), r.0)?;
    }
    m.add("PMIX_MAX_NSLEN", pmix_types::MAX_NSLEN)?;
    m.add("PMIX_MAX_KEYLEN", pmix_types::MAX_KEYLEN)?;
    Ok(())
}
