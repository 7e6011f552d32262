//! The job data a singleton gives itself: a job of one process, rank 0, on this node, with
//! the levels and keys a pmix-rs server derives for a one-process job (`pmix-server`'s
//! `engine/nspace.rs`), so that a program reads the same keys whether launched or not.

use pmix_types::{Info, Nspace, Rank, Value, attr};
use pmix_wire::{JobData, ProcRealm, Realm};

/// The namespace of a singleton: `singleton.<host>.<pid>`, the form OpenPMIx gives its
/// singletons, unique on the node while the process lives.
pub(crate) fn nspace(host: &str, pid: u32) -> Nspace {
    // A host name is at most 64 bytes, so this fits the 255 bytes of a namespace; should a
    // strange one not, the pid alone still names the process on this node ("singleton.<u32>"
    // is always a valid namespace).
    Nspace::new(format!("singleton.{host}.{pid}"))
        .or_else(|_| Nspace::new(format!("singleton.{pid}")))
        .expect("singleton.<pid> is a valid namespace")
}

/// This node's name, as the singleton reports it (`PMIX_HOSTNAME`).
pub(crate) fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// The job data of singleton `nspace` on `host`: session, job, app 0, node 0 and rank 0.
pub(crate) fn job_data(nspace: &Nspace, host: &str) -> JobData {
    let one = 1u32;
    let me = Rank(0);
    let first: u16 = 0;
    let session = vec![Info::attr(attr::UNIV_SIZE, one)];
    let job = vec![
        Info::attr(attr::NSPACE, nspace.as_str()),
        Info::attr(attr::JOBID, nspace.as_str()),
        Info::attr(attr::JOB_SIZE, one),
        Info::attr(attr::MAX_PROCS, one),
        Info::attr(attr::JOB_NUM_APPS, one),
        Info::attr(attr::NUM_NODES, one),
        Info::attr(attr::NPROC_OFFSET, me),
        Info::attr(attr::LOCAL_SIZE, one),
        Info::attr(attr::LOCAL_PEERS, "0"),
        Info::attr(attr::LOCALLDR, me),
        Info::attr(attr::SPAWNED, false),
        // Where a launched process finds its server's name: here, itself.
        Info::attr(attr::SERVER_NSPACE, nspace.as_str()),
        Info::attr(attr::SERVER_RANK, me),
        Info::attr(attr::SINGLETON, nspace.as_str()),
    ];
    let apps = vec![Realm {
        id: 0,
        info: vec![
            Info::attr(attr::APPNUM, 0u32),
            Info::attr(attr::APP_SIZE, one),
            Info::attr(attr::MAX_PROCS, one),
            Info::attr(attr::APPLDR, me),
        ],
    }];
    let nodes = vec![Realm {
        id: 0,
        info: vec![
            Info::attr(attr::NODEID, 0u32),
            Info::attr(attr::HOSTNAME, host),
            Info::attr(attr::LOCAL_SIZE, one),
            Info::attr(attr::NODE_SIZE, one),
            Info::attr(attr::LOCAL_PEERS, "0"),
            Info::attr(attr::LOCALLDR, me),
        ],
    }];
    let procs = vec![ProcRealm {
        rank: me,
        info: vec![
            Info::attr(attr::RANK, me),
            Info::attr(attr::NODEID, 0u32),
            Info::attr(attr::HOSTNAME, host),
            Info::attr(attr::LOCAL_RANK, Value::from(first)),
            Info::attr(attr::NODE_RANK, Value::from(first)),
            Info::attr(attr::GLOBAL_RANK, me),
            Info::attr(attr::APPNUM, 0u32),
            Info::attr(attr::APP_RANK, me),
            Info::attr(attr::REINCARNATION, 0u32),
            Info::attr(attr::SPAWNED, false),
        ],
    }];
    JobData {
        nspace: nspace.clone(),
        session,
        job,
        apps,
        nodes,
        procs,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_singleton_is_named_as_openpmix_names_it() {
        assert_eq!(nspace("node7", 4242).as_str(), "singleton.node7.4242");
        let long = "h".repeat(300);
        assert_eq!(nspace(&long, 4242).as_str(), "singleton.4242");
    }
}
