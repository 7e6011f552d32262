//! What the libpmix connections of a server share: the storage modules a client may choose
//! (`Gds`), each namespace's job data encoded once per dialect and storage module, and the ds21
//! shared-memory store when the server offers it.
//!
//! The store is filled lazily: a namespace's job data goes into the segments before its first
//! ds21 client's `REQ` is answered (most namespaces never have one: pmix-rs clients use the
//! socket), and a collecting fence's data before the first ds21 client among its participants
//! is answered.

use std::sync::Arc;

use pmix_types::{Nspace, Status};
use pmix_wire::openpmix::Dialect;
use pmix_wire::{JobImage, Reply, ReplyBody};

use super::ds21::{Ds21, Ds21Error};
use crate::frontend::job_bytes::JobBytes;

/// The storage module a client chose in its handshake: how its job data and collected data
/// reach it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Gds {
    /// Everything over the socket.
    Hash,
    /// Job data and collected data in the shared-memory segments (`openpmix::ds21`).
    Ds21,
}

/// The state the libpmix connections of one server share.
pub(crate) struct Common {
    /// Encoded job data (the answer to a `REQ`) by job record, dialect and storage module.
    jobs: JobBytes<(Dialect, Gds)>,
    /// The ds21 store offered to libpmix clients, when it is.
    ds21: Option<Ds21>,
    /// This node's name (the ds21 job level holds this node's keys).
    hostname: String,
}

impl Common {
    pub(crate) fn new(ds21: Option<Ds21>, hostname: String) -> Self {
        Common {
            jobs: JobBytes::new(),
            ds21,
            hostname,
        }
    }

    /// True when clients may choose the ds21 store.
    pub(crate) fn offers_ds21(&self) -> bool {
        self.ds21.is_some()
    }

    /// A namespace's ds21 lock segment is made when it is registered with processes on this
    /// node: its clients take the lock at init, before they ask anything, and a client reads
    /// every namespace under its own namespace's lock, so a namespace none of whose processes
    /// run here needs none. Without it its clients fall back to hash.
    pub(crate) fn nspace_registered(&mut self, nspace: &Nspace, nlocalprocs: u32) {
        if let Some(ds) = &mut self.ds21 {
            if let Err(e) = ds.add_nspace(nspace, nlocalprocs) {
                tracing::warn!(%nspace, "no ds21 lock segment, libpmix clients will use hash: {e}");
            }
        }
    }

    /// Unmaps the ds21 segments and removes their files.
    pub(crate) fn shutdown(&mut self) {
        self.ds21 = None;
    }

    pub(crate) fn nspace_deregistered(&mut self, nspace: &Nspace) {
        if let Some(ds) = &mut self.ds21 {
            ds.del_nspace(nspace);
        }
        self.jobs.forget(nspace);
    }

    /// The encoded answer to a `REQ` of `job` for a client speaking `dialect` on store `gds`
    /// (for ds21, with the job data put in the segments first); None if it cannot be encoded.
    pub(crate) fn job_bytes(
        &mut self,
        job: &JobImage,
        dialect: Dialect,
        gds: Gds,
    ) -> Option<Arc<[u8]>> {
        if gds == Gds::Ds21 {
            self.store_job(job);
        }
        self.jobs
            .get_or_encode(job, (dialect, gds), |job| match gds {
                Gds::Hash => super::encode_job_data(job, dialect),
                Gds::Ds21 => {
                    let mut out = Vec::new();
                    pmix_wire::openpmix::Reply::JobInfo(super::ds21_job_info(&job.levels()))
                        .encode(dialect, &mut out)
                        .map(|()| out)
                }
            })
    }

    /// Puts a namespace's job data in the ds21 segments, once. On failure the client finds
    /// nothing there and asks over the socket.
    fn store_job(&mut self, job: &JobImage) {
        let Some(ds) = &mut self.ds21 else {
            return;
        };
        if ds.has_job(job.nspace()) {
            return;
        }
        let levels = job.levels();
        let batches = super::ds21_job_batches(job, &levels, &self.hostname)
            .map(|b| b.map_err(Ds21Error::from));
        if let Err(e) = ds.store_each(batches, Some(job.nspace())) {
            tracing::warn!(nspace = %job.nspace(), "job data not in the ds21 segments: {e}");
        }
    }

    /// Puts a collecting fence's data in the ds21 segments; true when it is there (a ds21
    /// client then reads its peers' data from memory instead of being sent it).
    pub(crate) fn store_fence(&mut self, reply: &Reply) -> bool {
        let ReplyBody::Fence { data } = &reply.body else {
            return false;
        };
        if data.is_empty() || reply.status != Status::SUCCESS {
            return false;
        }
        let Some(ds) = &mut self.ds21 else {
            return false;
        };
        let r = super::ds21_fence_batches(data)
            .map_err(Ds21Error::from)
            .and_then(|b| ds.store(&b, None));
        match r {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!("fence data not in the ds21 segments, served over the socket: {e}");
                false
            }
        }
    }
}
