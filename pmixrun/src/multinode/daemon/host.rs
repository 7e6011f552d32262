//! A daemon's [`Host`]: what its server cannot do on one node goes over the tree.
//!
//! Fences, connects, disconnects and groups become tree fences over the daemons hosting their
//! participants, or, when some participants belong to another run, requests to the root,
//! which meets that run at the name server they share; direct modex a request to the daemon of the process; names, spawn and abort
//! requests to the root; events beyond the node a message to every daemon. Connection and
//! finalize are reported to the root, which supervises the run.
//!
//! The daemon's tree vertex runs in its server's event loop (the host's [`LoopHook`]): a
//! callback writes to the tree's links on the server's thread, and a fence's release read
//! from the parent completes the clients' fence in the same turn of that loop, with no hop
//! between threads either way. The daemon's other threads reach the vertex through its
//! [`pmix_tree::Tree`] handle.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use pmix_server::mio::event::Event;
use pmix_server::types::{DataRange, Info, Key, Nspace, Proc, Status, attr};
use pmix_server::{App, Completion, GroupOp, Host, LoopContext, LoopHook, Published, Query};
use pmix_tree::{Dest, FenceKey, TreeLoop};

use crate::multinode::msg::{Answer, CrossOp, Msg, Req, answer_of, encode};
use crate::multinode::placed::Placements;

/// What kind of collective a tree fence stands for (part of its key).
#[derive(Clone, Copy)]
enum Collective {
    Fence = 0,
    Connect = 1,
    Disconnect = 2,
    GroupConstruct = 3,
    GroupDestruct = 4,
}

impl Collective {
    /// What the name server's rendezvous calls it, if it may span runs (groups may not).
    fn across_runs(self) -> Option<CrossOp> {
        match self {
            Collective::Fence => Some(CrossOp::Fence),
            Collective::Connect => Some(CrossOp::Connect),
            Collective::Disconnect => Some(CrossOp::Disconnect),
            Collective::GroupConstruct | Collective::GroupDestruct => None,
        }
    }
}

/// The host of a daemon's server.
pub(crate) struct DaemonHost {
    /// This daemon's tree vertex, driven by the server's loop.
    tree: TreeLoop,
    pub(crate) jobs: Arc<Placements>,
    /// The local processes that called finalize: the end of any other is a failure other
    /// nodes must hear of (whether it connected or not, it will enter no more fences).
    pub(crate) finalized: Arc<Mutex<HashSet<Proc>>>,
    /// How many collectives of each kind and participant set this daemon entered: the same
    /// count on every daemon, since every process enters them in the same order.
    seqs: HashMap<Vec<u8>, u64>,
}

impl DaemonHost {
    pub(crate) fn new(tree: TreeLoop, jobs: Arc<Placements>) -> DaemonHost {
        DaemonHost {
            tree,
            jobs,
            finalized: Arc::default(),
            seqs: HashMap::new(),
        }
    }

    /// Enters the tree fence standing for a collective of `procs` with this node's `data`.
    ///
    /// Its key is the kind, the participants and the collective's `PMIX_TIMEOUT` (if any),
    /// with a sequence number per key: a fence with a timeout that some participants never
    /// enter (it times out where it was entered) is not counted by the others, so it must not
    /// shift their count for the fences they all enter.
    fn collective(
        &mut self,
        kind: Collective,
        procs: &[Proc],
        info: &[Info],
        data: Vec<u8>,
        done: impl FnOnce(Result<Vec<u8>, Status>) + Send + 'static,
    ) {
        self.collective_named(kind, "", procs, info, data, done);
    }

    /// [`DaemonHost::collective`] for a collective that has a name of its own (a group's).
    ///
    /// One naming a namespace that is not this run's (a connect to another run, and the
    /// fences and disconnect after it) is the root's to gather: it meets the other runs at
    /// the name server they share.
    fn collective_named(
        &mut self,
        kind: Collective,
        name: &str,
        procs: &[Proc],
        info: &[Info],
        data: Vec<u8>,
        done: impl FnOnce(Result<Vec<u8>, Status>) + Send + 'static,
    ) {
        let foreign = procs.iter().any(|p| self.jobs.get(&p.nspace).is_none());
        let vertices = if foreign {
            let Some(op) = kind.across_runs() else {
                return done(Err(Status::ERR_BAD_PARAM));
            };
            // Only this run's participants name daemons; the root finds them again.
            let ours: Vec<Proc> = procs
                .iter()
                .filter(|p| self.jobs.get(&p.nspace).is_some())
                .cloned()
                .collect();
            if self.jobs.vertices_of(&ours).is_none() {
                return done(Err(Status::ERR_BAD_PARAM));
            }
            Err(op)
        } else {
            match self.jobs.vertices_of(procs) {
                Some(v) => Ok(v),
                None => return done(Err(Status::ERR_BAD_PARAM)),
            }
        };
        let mut set = vec![kind as u8];
        set.extend(encode(&name));
        set.extend(encode(&procs));
        if let Some(t) = info.iter().find(|i| i.key.as_str() == attr::TIMEOUT) {
            set.extend(encode(&t.value));
        }
        let seq = self.seqs.entry(set.clone()).or_insert(0);
        *seq += 1;
        let key = FenceKey { set, seq: *seq };
        match vertices {
            Ok(vertices) => {
                tracing::debug!(?procs, seq = key.seq, ?vertices, "tree fence");
                self.tree.fence(key, vertices, data, done);
            }
            Err(op) => {
                tracing::debug!(?procs, seq = key.seq, ?op, "collective across runs");
                let req = Req::CrossRun {
                    op,
                    key,
                    procs: procs.to_vec(),
                    info: info.to_vec(),
                    data,
                };
                self.tree.request(0, encode(&req), move |r| {
                    done(answer_of(r, |a| match a {
                        Answer::Bytes(b) => Some(b),
                        _ => None,
                    }))
                });
            }
        }
    }

    /// Asks the root and answers `done` with what `pick` finds in its answer.
    fn ask_root<T: pmix_server::Outcome>(
        &mut self,
        req: &Req,
        done: Completion<T>,
        pick: impl FnOnce(Answer) -> Option<T> + Send + 'static,
    ) {
        self.tree
            .request(0, encode(req), move |r| done.complete(answer_of(r, pick)));
    }
}

impl LoopHook for DaemonHost {
    fn start(&mut self, cx: LoopContext) -> std::io::Result<()> {
        let waker = cx.waker;
        self.tree
            .attach(cx.registry, cx.tokens, move || waker.wake())
    }

    fn event(&mut self, event: &Event) {
        self.tree.event(event);
    }

    fn turn(&mut self) -> Option<Instant> {
        self.tree.turn()
    }

    fn stop(&mut self) {
        self.tree.shutdown();
    }
}

impl Host for DaemonHost {
    fn loop_hook(&mut self) -> Option<&mut dyn LoopHook> {
        Some(self)
    }

    fn client_connected(&mut self, proc: &Proc, done: Completion<()>) {
        self.tree
            .send(Dest::Vertex(0), encode(&Msg::Connected(proc.clone())));
        done.complete(Ok(()));
    }

    fn client_finalized(&mut self, proc: &Proc, done: Completion<()>) {
        self.finalized
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(proc.clone());
        // Before the reply, hence before the process can exit: the root sees the finalize
        // first (the tree keeps this daemon's messages in order).
        self.tree
            .send(Dest::Vertex(0), encode(&Msg::Finalized(proc.clone())));
        done.complete(Ok(()));
    }

    fn abort(
        &mut self,
        proc: &Proc,
        status: Status,
        message: &str,
        procs: &[Proc],
        done: Completion<()>,
    ) {
        let req = Req::Abort {
            proc: proc.clone(),
            status,
            message: message.to_owned(),
            procs: procs.to_vec(),
        };
        self.ask_root(&req, done, |a| matches!(a, Answer::Unit).then_some(()));
    }

    fn fence_nb(
        &mut self,
        procs: &[Proc],
        info: &[Info],
        data: Vec<u8>,
        done: Completion<Vec<u8>>,
    ) {
        self.collective(Collective::Fence, procs, info, data, move |r| {
            done.complete(r)
        });
    }

    fn direct_modex(&mut self, proc: &Proc, info: &[Info], done: Completion<Vec<u8>>) {
        let Some(v) = self.jobs.vertex_of(proc) else {
            return done.complete(Err(Status::ERR_NOT_FOUND));
        };
        // What the process's daemon acts on: the key to wait for and how long.
        let info = info
            .iter()
            .filter(|i| [attr::REQUIRED_KEY, attr::TIMEOUT].contains(&i.key.as_str()))
            .cloned()
            .collect();
        let req = encode(&Req::Dmodex {
            proc: proc.clone(),
            info,
        });
        self.tree.request(v, req, move |r| {
            done.complete(answer_of(r, |a| match a {
                Answer::Bytes(b) => Some(b),
                _ => None,
            }))
        });
    }

    fn publish(&mut self, proc: &Proc, data: &[Info], info: &[Info], done: Completion<()>) {
        let req = Req::Publish {
            proc: proc.clone(),
            data: data.to_vec(),
            info: info.to_vec(),
        };
        self.ask_root(&req, done, |a| matches!(a, Answer::Unit).then_some(()));
    }

    fn lookup(
        &mut self,
        proc: &Proc,
        keys: &[Key],
        info: &[Info],
        done: Completion<Vec<Published>>,
    ) {
        let req = Req::Lookup {
            proc: proc.clone(),
            keys: keys.to_vec(),
            info: info.to_vec(),
        };
        self.ask_root(&req, done, |a| match a {
            Answer::Lookup(l) => Some(l),
            _ => None,
        });
    }

    fn unpublish(&mut self, proc: &Proc, keys: &[Key], info: &[Info], done: Completion<()>) {
        let req = Req::Unpublish {
            proc: proc.clone(),
            keys: keys.to_vec(),
            info: info.to_vec(),
        };
        self.ask_root(&req, done, |a| matches!(a, Answer::Unit).then_some(()));
    }

    fn spawn(&mut self, proc: &Proc, job_info: &[Info], apps: &[App], done: Completion<Nspace>) {
        let req = Req::Spawn {
            parent: proc.clone(),
            job_info: job_info.to_vec(),
            apps: apps.to_vec(),
        };
        self.ask_root(&req, done, |a| match a {
            Answer::Nspace(n) => Some(n),
            _ => None,
        });
    }

    fn connect(&mut self, procs: &[Proc], info: &[Info], data: Vec<u8>, done: Completion<Vec<u8>>) {
        self.collective(Collective::Connect, procs, info, data, move |r| {
            done.complete(r)
        });
    }

    fn group(
        &mut self,
        op: GroupOp,
        grp: &str,
        procs: &[Proc],
        info: &[Info],
        data: Vec<u8>,
        done: Completion<Vec<u8>>,
    ) {
        let kind = match op {
            GroupOp::Construct => Collective::GroupConstruct,
            GroupOp::Destruct => Collective::GroupDestruct,
        };
        self.collective_named(kind, grp, procs, info, data, move |r| done.complete(r));
    }

    fn disconnect(&mut self, procs: &[Proc], info: &[Info], done: Completion<()>) {
        self.collective(Collective::Disconnect, procs, info, Vec::new(), move |r| {
            done.complete(r.map(drop))
        });
    }

    fn log(&mut self, proc: &Proc, data: &[Info], directives: &[Info], done: Completion<()>) {
        let req = Req::Log {
            source: proc.clone(),
            data: data.to_vec(),
            directives: directives.to_vec(),
        };
        self.ask_root(&req, done, |a| matches!(a, Answer::Unit).then_some(()));
    }

    fn job_control(
        &mut self,
        proc: &Proc,
        targets: &[Proc],
        directives: &[Info],
        done: Completion<Vec<Info>>,
    ) {
        let req = Req::JobControl {
            requester: proc.clone(),
            targets: targets.to_vec(),
            directives: directives.to_vec(),
        };
        self.ask_root(&req, done, infos);
    }

    fn query(&mut self, proc: &Proc, queries: &[Query], done: Completion<Vec<Info>>) {
        let req = Req::Query {
            asker: proc.clone(),
            queries: queries.to_vec(),
        };
        self.ask_root(&req, done, infos);
    }

    fn notify_event(
        &mut self,
        code: Status,
        source: &Proc,
        range: DataRange,
        info: &[Info],
        done: Completion<()>,
    ) {
        let msg = Msg::Event {
            code,
            source: source.clone(),
            range,
            info: info.to_vec(),
        };
        self.tree.send(Dest::All, encode(&msg));
        done.complete(Ok(()));
    }
}

/// The info list of a root's answer.
fn infos(a: Answer) -> Option<Vec<Info>> {
    match a {
        Answer::Infos(i) => Some(i),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::multinode::placed::Placed;
    use pmix_server::types::Rank;

    fn ns(s: &str) -> Nspace {
        Nspace::new(s).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn participants_map_to_the_daemons_hosting_them() {
        let jobs = Placements::default();
        jobs.insert(ns("a"), Placed::new(vec![1, 1, 2, 3]));
        jobs.insert(ns("b"), Placed::new(vec![4]));
        let all_a = [Proc::new(ns("a"), Rank::WILDCARD)];
        assert_eq!(jobs.vertices_of(&all_a), Some(vec![1, 2, 3]));
        let some = [Proc::new(ns("b"), 0), Proc::new(ns("a"), 1)];
        assert_eq!(jobs.vertices_of(&some), Some(vec![1, 4]));
        assert_eq!(jobs.vertices_of(&[Proc::new(ns("a"), 9)]), None);
        assert_eq!(jobs.vertices_of(&[Proc::new(ns("c"), 0)]), None);
        assert_eq!(jobs.vertex_of(&Proc::new(ns("a"), 3)), Some(3));
        let mut lost = jobs.procs_on(|v| v == 1 || v == 4);
        lost.sort();
        assert_eq!(
            lost,
            [
                Proc::new(ns("a"), 0),
                Proc::new(ns("a"), 1),
                Proc::new(ns("b"), 0)
            ]
        );
    }
}
