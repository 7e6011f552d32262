//! Process sets: the named sets of processes a host defines (`PMIx_server_define_process_set`)
//! or names in a job's data (`PSET_NAMES`, with each member's `PSET_NAME` in its application's
//! or its own data, as `pmixrun --pset` registers them), what queries list (`QUERY_NUM_PSETS`,
//! `QUERY_PSET_NAMES`, `QUERY_PSET_MEMBERSHIP`), and the events their definition and
//! deletion raise for every client (`PROCESS_SET_DEFINE`, `PROCESS_SET_DELETE`, with
//! `PSET_NAME` and, for a definition, `PSET_MEMBERS`).

use std::collections::BTreeMap;

use pmix_types::DataArray;
use pmix_types::{DataRange, Info, Proc, Status, Value, attr};
use pmix_wire::Event;

use super::Engine;
use super::nspaces::Nspaces;

/// The process sets the host defined, by name.
#[derive(Debug, Default)]
pub(crate) struct Psets {
    sets: BTreeMap<String, Vec<Proc>>,
}

impl Psets {
    /// Process set `name` is (re)defined with `members`: the definition event's info.
    fn define(&mut self, name: String, members: Vec<Proc>) -> Vec<Info> {
        let info = vec![
            Info::attr(attr::PSET_NAME, name.as_str()),
            Info::attr(
                attr::PSET_MEMBERS,
                DataArray::from_procs(members.iter().cloned()),
            ),
        ];
        self.sets.insert(name, members);
        info
    }

    /// Process set `name` is deleted: the deletion event's info, or `None` if there was none.
    fn delete(&mut self, name: &str) -> Option<Vec<Info>> {
        self.sets.remove(name)?;
        Some(vec![Info::attr(attr::PSET_NAME, name)])
    }

    /// The process sets a client of `nspace` sees: those its job data names, then those the
    /// host defined.
    fn names(&self, nspaces: &Nspaces, nspace: &str) -> Vec<String> {
        let mut names: Vec<String> = match nspaces.job_value(nspace, attr::PSET_NAMES) {
            Some(Value::String(s)) => s
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            Some(Value::DataArray(a)) => a
                .items()
                .iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
            _ => Vec::new(),
        };
        for n in self.sets.keys() {
            if !names.contains(n) {
                names.push(n.clone());
            }
        }
        names
    }

    /// The members of process set `name`: as the host defined it, or else the processes of
    /// every namespace whose job data puts them in it; `None` if it has none.
    fn members(&self, nspaces: &Nspaces, name: &str) -> Option<Vec<Proc>> {
        if let Some(members) = self.sets.get(name) {
            return Some(members.clone());
        }
        let mut nspaces: Vec<_> = nspaces.values().collect();
        nspaces.sort_unstable_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
        let members: Vec<Proc> = nspaces
            .into_iter()
            .flat_map(|n| {
                let ranks = n.job.pset_ranks(name);
                ranks.into_iter().map(|r| Proc::new(n.name.clone(), r))
            })
            .collect();
        (!members.is_empty()).then_some(members)
    }
}

impl Engine {
    /// The host defines (or redefines) process set `name` with `members`.
    pub(crate) fn define_pset(&mut self, name: String, members: Vec<Proc>) {
        let info = self.psets.define(name, members);
        self.pset_event(Status::PROCESS_SET_DEFINE, info);
    }

    /// The host deletes process set `name`; false if there was none.
    pub(crate) fn delete_pset(&mut self, name: &str) -> bool {
        let Some(info) = self.psets.delete(name) else {
            return false;
        };
        self.pset_event(Status::PROCESS_SET_DELETE, info);
        true
    }

    fn pset_event(&mut self, code: Status, info: Vec<Info>) {
        let event = Event {
            code,
            source: self.nspaces.me().clone(),
            range: DataRange::SESSION,
            info,
        };
        self.notify(&event, None);
    }

    /// The process sets a client of `nspace` sees (see [`Psets::names`]).
    pub(super) fn pset_names(&self, nspace: &str) -> Vec<String> {
        self.psets.names(&self.nspaces, nspace)
    }

    /// The members of process set `name` (see [`Psets::members`]).
    pub(super) fn pset_members(&self, name: &str) -> Option<Vec<Proc>> {
        self.psets.members(&self.nspaces, name)
    }
}
