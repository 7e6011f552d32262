//! Nspaces: the namespaces registered with this server (and those of other runs a connect
//! brought), interned as [`NsId`]s, with each one's size, local ranks and job data. The owner
//! of registration and deregistration's bookkeeping and of the job-data lookups; what else a
//! namespace's end clears is the engine's wiring (`Engine::deregister_nspace`).

use std::collections::HashMap;
use std::ops::Index;
use std::sync::Arc;

use pmix_types::{Info, Nspace, Proc, Rank, Value, attr};
use pmix_wire::JobData;

use super::job_control::Cleanup;
use super::nspace::{self, LazyJob, Locale, Registration};
use super::store::NsId;
use crate::Error;

pub(super) struct Namespace {
    pub(super) name: Nspace,
    pub(super) size: u32,
    pub(super) local: Vec<Rank>,
    /// Its job data: the compact image, and the whole job data derived when first needed.
    pub(super) job: Arc<LazyJob>,
}

impl Namespace {
    pub(super) fn is_local(&self, rank: Rank) -> bool {
        self.local.binary_search(&rank).is_ok()
    }
}

/// The namespaces known here, by name and by id.
pub(super) struct Nspaces {
    /// This node's name, for the job data registration derives.
    hostname: String,
    /// Job-level values every namespace receives (tmpdirs, the server's identity).
    job_extras: Vec<Info>,
    ids: HashMap<Nspace, NsId>,
    by_id: HashMap<NsId, Namespace>,
    next: NsId,
    /// This server's own identity (from the job extras), the source of the events it raises.
    me: Proc,
    /// Cleanups registered by clients, run when their namespace ends.
    cleanups: HashMap<NsId, Vec<Cleanup>>,
}

impl Nspaces {
    pub(super) fn new(hostname: String, job_extras: Vec<Info>) -> Self {
        let me = nspace::server_proc(&job_extras);
        Nspaces {
            hostname,
            job_extras,
            ids: HashMap::new(),
            by_id: HashMap::new(),
            next: 1,
            me,
            cleanups: HashMap::new(),
        }
    }

    /// This server's own identity, the source of the events it raises.
    pub(super) fn me(&self) -> &Proc {
        &self.me
    }

    /// The host this server runs on.
    pub(super) fn hostname(&self) -> &str {
        &self.hostname
    }

    /// A value every namespace receives from this server (its identity, its URI, tmpdirs).
    pub(super) fn server_value(&self, key: &str) -> Option<&Value> {
        self.job_extras
            .iter()
            .find(|i| i.key.as_str() == key)
            .map(|i| &i.value)
    }

    /// `cleanup` is to run when namespace `ns` ends.
    pub(super) fn add_cleanup(&mut self, ns: NsId, cleanup: Cleanup) {
        self.cleanups.entry(ns).or_default().push(cleanup);
    }

    /// The cleanups registered for namespace `ns`, which ends.
    pub(super) fn take_cleanups(&mut self, ns: NsId) -> Option<Vec<Cleanup>> {
        self.cleanups.remove(&ns)
    }

    /// `register_nspace`: derives the registration and stores it; the id, if it is new.
    pub(super) fn register(
        &mut self,
        nspace: Nspace,
        nlocalprocs: u32,
        info: &[Info],
    ) -> Result<Option<NsId>, Error> {
        let locale = Locale {
            hostname: &self.hostname,
            job_extras: &self.job_extras,
        };
        let reg = nspace::register(&nspace, nlocalprocs, info, &locale)?;
        Ok(self.insert(nspace, reg))
    }

    /// Stores a namespace's registration, under a new id if it is new (re-registration
    /// replaces the job data: a host may add information). The id, if it is new.
    pub(super) fn insert(&mut self, nspace: Nspace, reg: Registration) -> Option<NsId> {
        let (id, new) = match self.ids.get(&nspace) {
            Some(&id) => (id, false),
            None => {
                let id = self.next;
                self.next += 1;
                self.ids.insert(nspace.clone(), id);
                (id, true)
            }
        };
        self.by_id.insert(
            id,
            Namespace {
                name: nspace,
                size: reg.size,
                local: reg.local_ranks,
                job: reg.job,
            },
        );
        new.then_some(id)
    }

    /// Records that `rank` of namespace `ns` was restarted `reincarnation` times
    /// (`REINCARNATION`): its job data is laid out again with that value, which every client
    /// connecting from now on receives and every get answered here reads. Clients connected
    /// before keep the job data they received. Nothing changes when the value is already so.
    pub(super) fn set_reincarnation(&mut self, ns: NsId, rank: Rank, reincarnation: u32) {
        let Some(n) = self.by_id.get_mut(&ns) else {
            return;
        };
        let now = n.job.image().proc_value(rank, attr::REINCARNATION);
        if rank.0 >= n.size || now.and_then(|v| v.as_u32()) == Some(reincarnation) {
            return;
        }
        let value = [Info::attr(attr::REINCARNATION, reincarnation)];
        match n.job.with_proc_values(rank, &value) {
            Ok(job) => n.job = Arc::new(job),
            Err(e) => tracing::warn!(nspace = %n.name, %rank, "reincarnation not recorded: {e}"),
        }
    }

    /// Forgets a namespace: its id and what was registered, if it was known.
    pub(super) fn remove(&mut self, nspace: &str) -> Option<(NsId, Option<Namespace>)> {
        let id = self.ids.remove(nspace)?;
        Some((id, self.by_id.remove(&id)))
    }

    pub(super) fn id(&self, nspace: &str) -> Option<NsId> {
        self.ids.get(nspace).copied()
    }

    pub(super) fn get(&self, id: &NsId) -> Option<&Namespace> {
        self.by_id.get(id)
    }

    pub(super) fn ids(&self) -> impl Iterator<Item = NsId> + '_ {
        self.by_id.keys().copied()
    }

    pub(super) fn values(&self) -> impl Iterator<Item = &Namespace> {
        self.by_id.values()
    }

    /// The job data of a namespace, as its clients receive it (derived on first need).
    pub(super) fn job_data(&self, nspace: &str) -> Option<Arc<JobData>> {
        let ns = self.id(nspace)?;
        self.get(&ns).map(|n| n.job.get().clone())
    }

    /// A job-level value of a namespace, read without deriving its node and process data.
    pub(super) fn job_value(&self, nspace: &str, key: &str) -> Option<&Value> {
        let ns = self.id(nspace)?;
        self.get(&ns)?.job.job_value(key)
    }

    /// The job data of `participants`' namespaces registered here by the host, when some of
    /// them are not (they belong to another launcher run, whose servers learn ours from it);
    /// none otherwise. Also when that run's namespace is known here from an earlier connect:
    /// another server of this run taking part (on another node) may not know it, nor its
    /// servers ours.
    pub(super) fn jobs_for_foreign(&self, participants: &[Proc]) -> Vec<JobData> {
        let mut nss: Vec<&Nspace> = participants.iter().map(|p| &p.nspace).collect();
        nss.dedup();
        let known: Vec<Option<&Namespace>> = nss
            .iter()
            .map(|n| self.id(n.as_str()).and_then(|id| self.get(&id)))
            .collect();
        if known.iter().all(|n| n.is_some_and(|n| !n.job.is_foreign())) {
            return Vec::new();
        }
        known
            .into_iter()
            .flatten()
            .filter(|n| !n.job.is_foreign())
            .map(|n| JobData::clone(n.job.get()))
            .collect()
    }

    /// Registers the namespaces of another launcher run that a connect brought, from their
    /// job data: none of their processes is local here. A namespace known here already is
    /// left as it is (its own registration is better than another server's view of it).
    pub(super) fn register_foreign(&mut self, jobs: Vec<JobData>) {
        for job in jobs {
            if self.id(job.nspace.as_str()).is_some() {
                continue;
            }
            let nspace = job.nspace.clone();
            match nspace::Registration::foreign(job) {
                Ok(reg) => {
                    self.insert(nspace, reg);
                }
                Err(e) => tracing::warn!(%nspace, "cannot take in another run's job data: {e}"),
            }
        }
    }
}

impl Index<&NsId> for Nspaces {
    type Output = Namespace;

    fn index(&self, id: &NsId) -> &Namespace {
        &self.by_id[id]
    }
}
