//! The root's part of the connects, fences and disconnects that span this run and others
//! (some participant's namespace is not this run's).
//!
//! Each daemon hosting a participant of this run sends its node's part as a request
//! ([`Req::CrossRun`](crate::multinode::msg::Req::CrossRun)). The root gathers them, as a tree fence
//! would, contributes the run's part once to the name server shared with the other runs (its
//! rendezvous waits for their parts), and answers every daemon that sent one with what the
//! name server answers: every run's data, from which each daemon's server learns the other
//! runs' namespaces and their processes' committed data.
//!
//! Nothing waits forever. While the root gathers, an operation fails for every daemon that
//! sent its part with `ERR_TIMEOUT` at its `PMIX_TIMEOUT`, with `ERR_PROC_TERM_WO_SYNC` when a
//! participant of this run ends, and with `ERR_LOST_CONNECTION` when a daemon it waits for is
//! lost. Once contributed, the name server's rendezvous applies the same rules (the other
//! runs leaving included) and its answer is passed on, except that the loss of a daemon
//! taking part still fails it here at once.
//!
//! [`Gathers`] is the state, without I/O; [`start`] runs it on a thread of its own.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use crossbeam_channel::{RecvTimeoutError, Sender, unbounded};
use pmix_server::NameServerClient;
use pmix_server::types::{Info, Proc, Rank, Status};
use pmix_tree::{FenceKey, Topology, Tree, Vertex};
use pmix_wire::ConnectPart;

use crate::multinode::msg::{Answer, CrossOp, encode};
use crate::multinode::placed::Placements;

/// One daemon's part, as its request brought it.
#[derive(Debug)]
pub(crate) struct Part {
    /// The daemon, and its request's id there.
    pub(crate) origin: Vertex,
    pub(crate) id: u64,
    pub(crate) op: CrossOp,
    pub(crate) key: FenceKey,
    pub(crate) procs: Vec<Proc>,
    pub(crate) info: Vec<Info>,
    pub(crate) data: Vec<u8>,
}

/// The run's part, every daemon's gathered: what the root sends the name server.
#[derive(Debug, PartialEq)]
pub(crate) struct Contribution {
    pub(crate) key: FenceKey,
    pub(crate) op: CrossOp,
    pub(crate) procs: Vec<Proc>,
    pub(crate) info: Vec<Info>,
    /// The daemons' data, concatenated in vertex order (each daemon's server sends frames,
    /// which concatenate); a connect's merged into one frame.
    pub(crate) data: Vec<u8>,
}

/// The answer to one daemon's request: the daemon, its request's id, and the outcome.
pub(crate) type Reply = (Vertex, u64, Result<Vec<u8>, Status>);

#[derive(Debug)]
struct Gather {
    procs: Vec<Proc>,
    /// The daemons hosting this run's participants, sorted.
    needed: Vec<Vertex>,
    /// Each daemon's request id and data (taken once contributed).
    parts: BTreeMap<Vertex, (u64, Vec<u8>)>,
    deadline: Option<Instant>,
    /// Handed to the name server: its answer ends it.
    contributed: bool,
}

impl Gather {
    fn names(&self, proc: &Proc) -> bool {
        self.procs
            .iter()
            .any(|p| p.nspace == proc.nspace && (p.rank == proc.rank || p.rank == Rank::WILDCARD))
    }

    fn fail(self, status: Status) -> Vec<Reply> {
        self.parts
            .into_iter()
            .map(|(v, (id, _))| (v, id, Err(status)))
            .collect()
    }
}

/// The collectives across runs this root is gathering or has contributed.
#[derive(Debug, Default)]
pub(crate) struct Gathers {
    ops: HashMap<FenceKey, Gather>,
}

impl Gathers {
    /// Daemon `part.origin`'s part; `needed` are the daemons hosting this run's participants.
    /// `Ok(Some)` when it was the last: the run's part, to contribute; `Err` with the replies
    /// to send when it is refused, or fails the operation.
    pub(crate) fn join(
        &mut self,
        part: Part,
        mut needed: Vec<Vertex>,
        now: Instant,
    ) -> Result<Option<Contribution>, Vec<Reply>> {
        let refuse = |p: &Part| vec![(p.origin, p.id, Err(Status::ERR_BAD_PARAM))];
        needed.sort_unstable();
        needed.dedup();
        let g = self.ops.entry(part.key.clone()).or_insert_with(|| Gather {
            procs: part.procs.clone(),
            needed,
            parts: BTreeMap::new(),
            deadline: pmix_types::timeout_of(&part.info).map(|t| now + t),
            contributed: false,
        });
        // One part per daemon hosting a participant: anything else is a daemon's error, and
        // must not drop the parts already here.
        if g.needed.binary_search(&part.origin).is_err() || g.parts.contains_key(&part.origin) {
            let reply = refuse(&part);
            if g.parts.is_empty() {
                self.ops.remove(&part.key);
            }
            return Err(reply);
        }
        g.parts.insert(part.origin, (part.id, part.data));
        if g.parts.len() < g.needed.len() {
            return Ok(None);
        }
        g.contributed = true;
        let mut data = Vec::new();
        for (_, d) in g.parts.values_mut() {
            data.append(d);
        }
        if part.op == CrossOp::Connect {
            data = match merge_connect_parts(&data) {
                Ok(d) => d,
                Err(e) => {
                    tracing::warn!("a daemon's part of a connect across runs: {e}");
                    let failed = self
                        .ops
                        .remove(&part.key)
                        .map(|g| g.fail(Status::ERR_UNPACK_FAILURE));
                    return Err(failed.unwrap_or_default());
                }
            };
        }
        Ok(Some(Contribution {
            key: part.key,
            op: part.op,
            procs: part.procs,
            info: part.info,
            data,
        }))
    }

    /// The name server answered the contribution of `key`: every daemon gets the answer.
    pub(crate) fn answered(
        &mut self,
        key: &FenceKey,
        result: &Result<Vec<u8>, Status>,
    ) -> Vec<Reply> {
        let Some(g) = self.ops.remove(key) else {
            // Failed here already (a daemon was lost).
            return Vec::new();
        };
        g.parts
            .into_iter()
            .map(|(v, (id, _))| (v, id, result.clone()))
            .collect()
    }

    /// The daemons `lost` picks are gone: every operation needing one fails for the others.
    pub(crate) fn lost(&mut self, lost: impl Fn(Vertex) -> bool) -> Vec<Reply> {
        self.fail_where(Status::ERR_LOST_CONNECTION, |g| {
            g.needed.iter().any(|v| lost(*v))
        })
        .into_iter()
        .filter(|(v, _, _)| !lost(*v))
        .collect()
    }

    /// A process of this run ended: an operation still gathering that names it cannot
    /// complete (one contributed is the name server's to fail).
    pub(crate) fn proc_ended(&mut self, proc: &Proc) -> Vec<Reply> {
        self.fail_where(Status::ERR_PROC_TERM_WO_SYNC, |g| {
            !g.contributed && g.names(proc)
        })
    }

    /// When the earliest operation still gathering times out.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        self.ops
            .values()
            .filter(|g| !g.contributed)
            .filter_map(|g| g.deadline)
            .min()
    }

    /// Fails the operations still gathering whose deadline passed.
    pub(crate) fn handle_timeout(&mut self, now: Instant) -> Vec<Reply> {
        self.fail_where(Status::ERR_TIMEOUT, |g| {
            !g.contributed && g.deadline.is_some_and(|d| d <= now)
        })
    }

    fn fail_where(&mut self, status: Status, pred: impl Fn(&Gather) -> bool) -> Vec<Reply> {
        let keys: Vec<FenceKey> = self
            .ops
            .iter()
            .filter(|(_, g)| pred(g))
            .map(|(k, _)| k.clone())
            .collect();
        let mut out = Vec::new();
        for k in keys {
            if let Some(g) = self.ops.remove(&k) {
                out.extend(g.fail(status));
            }
        }
        out
    }
}

/// The daemons' parts of a connect (frames of `ConnectPart`s), as one part: every daemon's
/// server sends the job data of this run's namespaces along (for the other runs' servers,
/// which do not know them), and the other runs need each once.
fn merge_connect_parts(data: &[u8]) -> Result<Vec<u8>, pmix_wire::Error> {
    let mut merged = ConnectPart::default();
    for part in pmix_wire::decode_frame_lists::<ConnectPart>(data)? {
        for job in part.jobs {
            if merged.jobs.iter().all(|j| j.nspace != job.nspace) {
                merged.jobs.push(job);
            }
        }
        merged.data.extend(part.data);
    }
    let mut out = Vec::new();
    pmix_wire::encode_frame(&[merged], &mut out)?;
    Ok(out)
}

/// What the gathering thread is told.
#[derive(Debug)]
pub(crate) enum Input {
    /// A daemon's request.
    Part(Part),
    /// The name server's answer to a contribution.
    Answered {
        key: FenceKey,
        result: Result<Vec<u8>, Status>,
    },
    /// The subtree rooted at this daemon is lost.
    Lost(Vertex),
    /// A process of the run ended.
    ProcEnded(Proc),
    /// The run is over.
    Stop,
}

/// The gathering thread's handle: tells it the run is over when dropped.
pub(crate) struct CrossRuns {
    tx: Sender<Input>,
}

impl CrossRuns {
    /// Where the root's tree thread sends what concerns the gathers.
    pub(crate) fn sender(&self) -> Sender<Input> {
        self.tx.clone()
    }
}

impl Drop for CrossRuns {
    fn drop(&mut self) {
        let _ = self.tx.send(Input::Stop);
    }
}

/// Starts the thread that gathers the daemons' parts and meets the other runs through `names`,
/// answering the daemons through `tree` (once set).
pub(crate) fn start(
    tree: Arc<OnceLock<Arc<Tree>>>,
    names: Arc<NameServerClient>,
    places: Arc<Placements>,
    topology: Topology,
) -> std::io::Result<CrossRuns> {
    let (tx, rx) = unbounded();
    let answers = tx.clone();
    std::thread::Builder::new()
        .name("pmixrun-cross".into())
        .spawn(move || {
            let mut gathers = Gathers::default();
            let respond = |replies: Vec<Reply>| {
                let Some(tree) = tree.get() else { return };
                for (v, id, r) in replies {
                    tree.respond(v, id, r.map(|b| encode(&Answer::Bytes(b))));
                }
            };
            loop {
                let input = match gathers.poll_timeout() {
                    Some(d) => rx.recv_deadline(d),
                    None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                };
                let replies = match input {
                    Ok(Input::Part(part)) => {
                        let needed = needed_for(&places, &part.procs);
                        match gathers.join(part, needed, Instant::now()) {
                            Ok(None) => Vec::new(),
                            Ok(Some(c)) => {
                                contribute(&names, c, &answers);
                                Vec::new()
                            }
                            Err(replies) => replies,
                        }
                    }
                    Ok(Input::Answered { key, result }) => gathers.answered(&key, &result),
                    Ok(Input::Lost(root)) => gathers.lost(|v| topology.in_subtree(root, v)),
                    Ok(Input::ProcEnded(p)) => gathers.proc_ended(&p),
                    Err(RecvTimeoutError::Timeout) => gathers.handle_timeout(Instant::now()),
                    Ok(Input::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                };
                respond(replies);
            }
        })?;
    Ok(CrossRuns { tx })
}

/// The daemons hosting the participants of this run among `procs` (none if one of them is
/// not a process of the run).
fn needed_for(places: &Placements, procs: &[Proc]) -> Vec<Vertex> {
    let ours: Vec<Proc> = procs
        .iter()
        .filter(|p| places.get(&p.nspace).is_some())
        .cloned()
        .collect();
    places.vertices_of(&ours).unwrap_or_default()
}

/// Sends the run's part to the name server; its answer comes back to the thread.
fn contribute(names: &NameServerClient, c: Contribution, answers: &Sender<Input>) {
    let tx = answers.clone();
    let key = c.key;
    let done = move |result: Result<Vec<u8>, Status>| {
        let _ = tx.send(Input::Answered { key, result });
    };
    match c.op {
        CrossOp::Connect => names.connect_procs(&c.procs, &c.info, c.data, done),
        CrossOp::Fence => names.fence_procs(&c.procs, &c.info, c.data, done),
        CrossOp::Disconnect => {
            names.disconnect_procs(&c.procs, &c.info, move |r| done(r.map(|()| Vec::new())))
        }
    }
}

#[cfg(test)]
mod tests;
