//! Queries (`PMIx_Query_info`): the keys this server answers from its own tables, and the
//! rest, passed to the host.
//!
//! Answered here: the namespaces registered (`QUERY_NAMESPACES`; `QUERY_NAMESPACE_INFO`, a
//! `JOB_INFO_ARRAY` per namespace with its `NSPACE`, `CMD_LINE` and `JOB_SIZE`), the process
//! sets named in a
//! job's data or defined by the host (`QUERY_NUM_PSETS`, `QUERY_PSET_NAMES`, and
//! `QUERY_PSET_MEMBERSHIP` of either kind, named by a `PSET_NAME` qualifier), the
//! functions and attributes this server serves (`SERVER_FUNCTIONS`, `QUERY_SUPPORTED_KEYS`,
//! `QUERY_ATTRIBUTE_SUPPORT`, in `attributes.rs`), its URI (`SERVER_URI`, unless a `HOSTNAME`
//! qualifier names another host), and any job-level key of a namespace's data (`JOB_SIZE` and
//! the like, of the namespace named by a `NSPACE` qualifier, else the caller's). Everything
//! else (process tables with their pids, job status, host functions) is the host's
//! ([`Host::query`](crate::Host::query)); answers from both are merged into one reply, one
//! [`Info`] per answered key, as OpenPMIx lays them out.

use pmix_types::{DataArray, Info, Key, Proc, Status, Value, attr};
use pmix_wire::{Query, Reply, ReplyBody};

use super::host_ops::{HostCall, HostOutcome, PendingHost, failure_of};
use super::{ConnId, Engine, success};

/// The query keys answered here.
const LOCAL_KEYS: &[&str] = &[
    attr::QUERY_NAMESPACES,
    attr::QUERY_NAMESPACE_INFO,
    attr::QUERY_NUM_PSETS,
    attr::QUERY_PSET_NAMES,
    attr::QUERY_PSET_MEMBERSHIP,
    attr::QUERY_SUPPORTED_KEYS,
    attr::QUERY_ATTRIBUTE_SUPPORT,
    attr::SERVER_FUNCTIONS,
];

/// A comma-separated list, as query answers give lists of names.
fn comma_list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    items.into_iter().collect::<Vec<_>>().join(",")
}

fn qualifier<'a>(q: &'a Query, key: &str) -> Option<&'a Value> {
    q.qualifiers
        .iter()
        .find(|i| i.key.as_str() == key)
        .map(|i| &i.value)
}

impl Engine {
    /// A client's queries: what is known here is answered at once, the rest goes to the host.
    pub(super) fn query(&mut self, conn: ConnId, id: u32, me: Proc, queries: Vec<Query>) {
        if queries.is_empty() || queries.iter().any(|q| q.keys.is_empty()) {
            return self.reply_status(conn, id, Status::ERR_BAD_PARAM);
        }
        let mut local = Vec::new();
        let mut rest = Vec::new();
        for q in queries {
            let target = qualifier(&q, attr::NSPACE)
                .and_then(|v| match v {
                    Value::Nspace(n) => Some(n.as_str().to_owned()),
                    other => other.as_str().map(str::to_owned),
                })
                .unwrap_or_else(|| me.nspace.as_str().to_owned());
            let mut unanswered = Vec::new();
            for key in q.keys.iter() {
                if key.as_str() == attr::QUERY_ATTRIBUTE_SUPPORT {
                    let found = super::attributes::attribute_support(&q);
                    if found.is_empty() {
                        unanswered.push(key.clone());
                    }
                    local.extend(found);
                    continue;
                }
                match self.answer_key(key, &q, &target) {
                    Some(value) => local.push(Info::new(key.clone(), value)),
                    None => unanswered.push(key.clone()),
                }
            }
            if !unanswered.is_empty() {
                rest.push(Query {
                    keys: unanswered,
                    qualifiers: q.qualifiers,
                });
            }
        }
        if rest.is_empty() {
            return self.reply(conn, id, success(ReplyBody::Query { results: local }));
        }
        self.host_call(
            PendingHost::Query { conn, id, local },
            HostCall::Query {
                proc: me,
                queries: rest,
            },
        );
    }

    /// The answer to one key, if this server knows it.
    fn answer_key(&self, key: &Key, q: &Query, nspace: &str) -> Option<Value> {
        let psets = || self.pset_names(nspace);
        Some(match key.as_str() {
            attr::QUERY_NAMESPACES => {
                let mut names: Vec<&str> = self.nspaces.values().map(|n| n.name.as_str()).collect();
                names.sort_unstable();
                Value::String(comma_list(names))
            }
            // One `JOB_INFO_ARRAY` per namespace (an array of infos, as PRRTE lays it out
            // and libpmix reads it): its name, its command line when its applications name
            // their argv, and its size.
            attr::QUERY_NAMESPACE_INFO => {
                let mut spaces: Vec<_> = self.nspaces.values().collect();
                spaces.sort_unstable_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
                let jobs = spaces.into_iter().map(|n| {
                    let mut infos = vec![Info::attr(attr::NSPACE, n.name.as_str())];
                    if let Some(cmd) = n.job.cmd_line() {
                        infos.push(Info::attr(attr::CMD_LINE, cmd));
                    }
                    infos.push(Info::attr(attr::JOB_SIZE, n.size));
                    Info::attr(attr::JOB_INFO_ARRAY, DataArray::from_infos(infos))
                });
                Value::from(DataArray::from_infos(jobs))
            }
            attr::QUERY_NUM_PSETS => Value::Size(psets().len() as u64),
            attr::QUERY_PSET_NAMES => Value::String(psets().join(",")),
            attr::QUERY_PSET_MEMBERSHIP => {
                let name = qualifier(q, attr::PSET_NAME)?.as_str()?;
                Value::from(pmix_types::DataArray::from_procs(self.pset_members(name)?))
            }
            attr::QUERY_SUPPORTED_KEYS => Value::String(comma_list(LOCAL_KEYS.iter().copied())),
            attr::SERVER_FUNCTIONS => Value::from(super::attributes::server_functions()),
            // This server's URI, unless a `HOSTNAME` qualifier names another host (the host
            // may know that one's).
            attr::SERVER_URI => {
                let other_host = qualifier(q, attr::HOSTNAME)
                    .and_then(Value::as_str)
                    .is_some_and(|h| h != self.nspaces.hostname());
                if other_host {
                    return None;
                }
                self.nspaces.server_value(attr::SERVER_URI)?.clone()
            }
            // Not a query key: a job-level value of the namespace, if its data holds one.
            _ if !key.as_str().starts_with("pmix.qry.") => {
                self.job_value(nspace, key.as_str())?.clone()
            }
            _ => return None,
        })
    }

    /// The host answered the queries this server could not: its answers join those found
    /// here. A host that failed still leaves the local answers, as a partial success.
    pub(super) fn query_done(
        &mut self,
        conn: ConnId,
        id: u32,
        mut local: Vec<Info>,
        outcome: HostOutcome,
    ) {
        let reply = match outcome {
            HostOutcome::Infos(Ok(results)) => {
                local.extend(results);
                success(ReplyBody::Query { results: local })
            }
            _ if !local.is_empty() => Reply {
                status: Status::QUERY_PARTIAL_SUCCESS,
                body: ReplyBody::Query { results: local },
            },
            other => Reply::status(failure_of(&other)),
        };
        self.reply(conn, id, reply);
    }
}
