//! What the supervisor acts through at the root of a multi-node run: the daemons, over the
//! tree. Launching a job (the first and every spawned one) registers it on every daemon and
//! waits for each to report its ranks started.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use pmix_server::NameServerClient;
use pmix_server::types::{Info, Nspace, Proc, Status};
use pmix_tree::{Dest, Tree, Vertex};

use crate::cli::{App, Place, Protocol};
use crate::multinode::msg::{Answer, Launch, Msg, Req, WireApp, answer_of, encode};
use crate::multinode::placed::{Placed, Placements};
use crate::multinode::root::LAUNCH_TIMEOUT;
use crate::multinode::root::sink::Control;
use crate::multinode::root::tools::RootTools;
use crate::node::host::Event;
use crate::plan::launcher_env;
use crate::plan::layout::{self, Layout};
use crate::plan::placement::{NodeList, Placement, SlotUsage};
use crate::plan::{debug, job, spawn_placement};
use crate::supervise::{self, Jobs, SpawnFailed};

/// A job to launch: its namespace, output tag (0 for the first job, `n` for the `n`-th
/// spawned one), application contexts and their layout, and where on its node each process
/// runs.
pub(crate) struct Job<'a> {
    pub(crate) nspace: &'a Nspace,
    pub(crate) tag: u32,
    pub(crate) apps: &'a [App],
    pub(crate) layout: &'a Layout,
    pub(crate) place: Place,
}

/// A job that did not start on every daemon.
#[derive(Debug)]
pub(crate) struct NotLaunched {
    pub(crate) status: Status,
    pub(crate) exit: u8,
    pub(crate) message: String,
    pub(crate) partial: Option<supervise::Started>,
}

/// What the supervisor acts through at the root: the daemons, over the tree.
pub(crate) struct RootJobs {
    pub(crate) tree: Arc<Tree>,
    /// The supervisor's events (for what the daemons answer later).
    pub(crate) events: Sender<Event>,
    pub(crate) control: Receiver<Control>,
    pub(crate) places: Arc<Placements>,
    pub(crate) nodes: NodeList,
    pub(crate) usage: SlotUsage,
    pub(crate) placements: HashMap<Nspace, Placement>,
    pub(crate) names: Arc<NameServerClient>,
    pub(crate) cwd: PathBuf,
    pub(crate) first: Nspace,
    pub(crate) spawned: u32,
    pub(crate) pmi: Protocol,
    pub(crate) oversubscribe: bool,
    /// Which ranks of the first job take pmixrun's input.
    pub(crate) stdin: crate::node::stdin::Target,
    pub(crate) daemons: u32,
    pub(crate) lost: Arc<Mutex<HashSet<Vertex>>>,
    /// The root's environment, beneath each application context's own variables.
    pub(crate) forwarded: Vec<(OsString, OsString)>,
    /// Where on its node each process runs and what it is told of its place.
    pub(crate) place: crate::cli::Place,
    /// The run's tool entry point, which knows every job of the run.
    pub(crate) tools: Arc<RootTools>,
    /// The root's node as the run's node list names it (its hostname if the list does not
    /// name it): where a tool asking at the root is, for `QUERY_LOCAL_PROC_TABLE`.
    pub(crate) root_node: String,
    /// Every node is this machine (`--launcher local`).
    pub(crate) logical: bool,
}

impl RootJobs {
    /// A job's `MASTER_PORT`, chosen here for every node, checked free on this machine when
    /// rank 0 runs here: on every logical node, or on the root's own node.
    fn master_port(&self, nspace: &Nspace, placement: &Placement) -> u16 {
        let rank0_node = placement
            .node_of(0)
            .and_then(|n| self.nodes.nodes.get(n))
            .map(|n| n.name.as_str());
        let here = self.logical || rank0_node == Some(self.root_node.as_str());
        launcher_env::master_port(self.place.master_port, nspace, here)
    }

    /// The nodes (indices, ascending) of `target`, a process or (rank `WILDCARD`) a job of
    /// the run, if it is one.
    fn nodes_of(&self, target: &Proc) -> Option<Vec<usize>> {
        let p = self.placements.get(&target.nspace)?;
        if target.rank == pmix_server::types::Rank::WILDCARD {
            Some(p.used())
        } else {
            p.node_of(target.rank.0).map(|n| vec![n])
        }
    }

    /// Registers `job` on every daemon and starts its processes where `placement` says.
    pub(crate) fn launch(
        &mut self,
        job: Job<'_>,
        placement: Placement,
        user_env: &[Vec<(OsString, OsString)>],
        extra: Vec<Info>,
    ) -> Result<supervise::Started, NotLaunched> {
        let Job {
            nspace,
            tag,
            apps,
            layout,
            place,
        } = job;
        let refuse = |message: String| NotLaunched {
            status: Status::ERR_JOB_FAILED_TO_LAUNCH,
            exit: 1,
            message,
            partial: None,
        };
        let mut info = job::job_info(&placement.job_map(&self.nodes), apps, layout, &self.cwd)
            .map_err(refuse)?;
        info.extend(extra);
        let vertex_of_rank: Vec<Vertex> = (0..layout.size)
            .map(|r| placement.node_of(r).map_or(1, |n| n as Vertex + 1))
            .collect();
        let launch = Launch {
            nspace: nspace.clone(),
            tag,
            size: layout.size,
            info,
            apps: apps
                .iter()
                .zip(user_env)
                .map(|(a, own)| {
                    // The root's own launcher variables would win over those the daemons set.
                    let forwarded = self.forwarded.iter().filter(|(k, _)| {
                        !(self.place.launcher_env && launcher_env::is_launcher_variable(k))
                    });
                    let env: Vec<_> = forwarded.chain(own).cloned().collect();
                    WireApp::new(a, &layout::wdir_of(a, &self.cwd), &env)
                })
                .collect(),
            firsts: layout.firsts.clone(),
            vertex_of_rank: vertex_of_rank.clone(),
            pmi: self.pmi.into(),
            place: crate::cli::Place {
                master_port: Some(self.master_port(nspace, &placement)),
                ..place
            },
            stdin: if tag == 0 {
                self.stdin
            } else {
                crate::node::stdin::Target::None
            },
        };
        self.tools.job_launched(nspace, &launch.info);
        self.places
            .insert(nspace.clone(), Placed::new(vertex_of_rank));
        self.names.nspace_started(nspace);
        self.usage.add(&placement);
        self.placements.insert(nspace.clone(), placement);
        self.tree
            .send(Dest::All, encode(&Msg::Launch(Box::new(launch))));
        // Every daemon registers the job (so that any of them can serve its data and route
        // to it); those hosting ranks start them.
        let deadline = Instant::now() + LAUNCH_TIMEOUT;
        let mut reported = HashSet::new();
        let mut procs = Vec::new();
        let mut failure: Option<(u32, u8, Status, String)> = None;
        let missing = |reported: &HashSet<Vertex>| {
            let lost = self.lost.lock().unwrap_or_else(PoisonError::into_inner);
            (1..=self.daemons).any(|v| !reported.contains(&v) && !lost.contains(&v))
        };
        while missing(&reported) {
            match self.control.recv_deadline(deadline) {
                Ok(Control::Started(s)) if s.nspace == *nspace => {
                    reported.insert(s.vertex);
                    procs.extend(
                        s.procs
                            .into_iter()
                            .map(|(rank, pid, exe)| supervise::Launched {
                                rank,
                                pid: Pid::from_raw(pid),
                                exe,
                            }),
                    );
                    if let Some(f) = s.failed {
                        if failure.as_ref().is_none_or(|g| f.0 < g.0) {
                            failure = Some(f);
                        }
                    }
                }
                Ok(Control::Lost(why)) => {
                    failure.get_or_insert((0, 1, Status::ERR_LOST_CONNECTION, why));
                }
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => {
                    failure.get_or_insert((
                        0,
                        1,
                        Status::ERR_JOB_FAILED_TO_LAUNCH,
                        format!(
                            "the job did not start within {} s",
                            LAUNCH_TIMEOUT.as_secs()
                        ),
                    ));
                    break;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        procs.sort_unstable_by_key(|l| l.rank);
        let launched = supervise::Started {
            nspace: nspace.clone(),
            size: layout.size,
            procs,
        };
        match failure {
            None => Ok(launched),
            Some((_, exit, status, message)) => Err(NotLaunched {
                status,
                exit,
                message,
                partial: Some(launched),
            }),
        }
    }
}

impl Jobs for RootJobs {
    fn spawn(
        &mut self,
        parent: &Proc,
        job_info: &[Info],
        apps: &[pmix_server::App],
    ) -> Result<supervise::Started, SpawnFailed> {
        let refuse = |status, message| SpawnFailed {
            status,
            message,
            partial: None,
        };
        if let Some(m) = debug::refused(job_info) {
            return Err(refuse(Status::ERR_NOT_SUPPORTED, m));
        }
        // Debugger daemons go to the nodes of their target.
        let target_nodes = match debug::daemons_target(job_info) {
            Err(m) => return Err(refuse(Status::ERR_BAD_PARAM, m)),
            Ok(None) => None,
            Ok(Some(t)) => Some(self.nodes_of(&t).ok_or_else(|| {
                refuse(
                    Status::ERR_NOT_FOUND,
                    format!("debugger daemons: their target {t} is not a process of this run"),
                )
            })?),
        };
        let count = target_nodes.as_ref().map_or(1, Vec::len);
        let spawned = debug::apps(apps, job_info, u32::try_from(count).unwrap_or(u32::MAX))
            .map_err(|m| refuse(Status::ERR_BAD_PARAM, m))?;
        let asked = &spawned.apps;
        // Every node taken to run what this one can (their kernels are not asked).
        let nodes = u64::try_from(self.nodes.len()).unwrap_or(u64::MAX);
        let max = crate::node::capacity::max_procs().saturating_mul(nodes);
        crate::node::capacity::check_spawn(asked, max)
            .map_err(|m| refuse(Status::ERR_OUT_OF_RESOURCE, m))?;
        let (apps, layout) =
            job::spawn_job(asked, job_info).map_err(|m| refuse(Status::ERR_BAD_PARAM, m))?;
        let placed = match (target_nodes, &spawned.per_node) {
            (Some(on), Some(per_node)) => spawn_placement::PlacedSpawn {
                placement: debug::placement(per_node, &on, self.nodes.len()),
                place: self.place,
            },
            _ => spawn_placement::place_spawn(
                job_info,
                asked,
                &layout,
                &self.nodes,
                &self.usage,
                self.oversubscribe,
                self.place,
                &self.root_node,
            )
            .map_err(|r| refuse(r.status, r.message))?,
        };
        let user_env: Vec<_> = apps.iter().map(crate::node::launch::app_env).collect();
        self.spawned += 1;
        let n = self.spawned;
        let nspace = job::spawned_nspace(&self.first, n)
            .map_err(|m| refuse(Status::ERR_JOB_FAILED_TO_LAUNCH, m))?;
        let extra = job::spawned_info(parent, job_info, layout.size);
        let job = Job {
            nspace: &nspace,
            tag: n,
            apps: &apps,
            layout: &layout,
            place: placed.place,
        };
        self.launch(job, placed.placement, &user_env, extra)
            .map_err(|f| SpawnFailed {
                status: f.status,
                message: f.message,
                partial: f.partial,
            })
    }

    fn restart(&mut self, proc: &Proc, reincarnation: u32) -> Result<supervise::Launched, String> {
        let node = self.node_of(proc).unwrap_or_default();
        let Some(v) = self.places.vertex_of(proc) else {
            return Err(format!("the node of {proc} is not known"));
        };
        // Answered by the daemon at once (or by the tree, if that daemon is or gets lost);
        // the deadline bounds a daemon that hangs.
        let (tx, answer) = crossbeam_channel::bounded(1);
        let req = Req::Restart {
            proc: proc.clone(),
            reincarnation,
        };
        self.tree.request(v, encode(&req), move |r| {
            let _ = tx.send(r);
        });
        let answer = answer
            .recv_deadline(Instant::now() + LAUNCH_TIMEOUT)
            .map_err(|e| match e {
                RecvTimeoutError::Timeout => {
                    let secs = LAUNCH_TIMEOUT.as_secs();
                    format!("the daemon of {node} did not answer within {secs} s")
                }
                RecvTimeoutError::Disconnected => "the tree stopped".to_owned(),
            })?;
        let restarted = answer_of(answer, |a| match a {
            Answer::Restarted(r) => Some(r),
            _ => None,
        });
        match restarted {
            Ok(Ok((pid, exe))) => Ok(supervise::Launched {
                rank: proc.rank.0,
                pid: Pid::from_raw(pid),
                exe,
            }),
            Ok(Err(why)) => Err(format!("{node}: {why}")),
            Err(Status::ERR_LOST_CONNECTION) => Err(format!("the daemon of {node} is gone")),
            Err(status) => Err(format!("the daemon of {node} answered {status}")),
        }
    }

    fn signal(&mut self, proc: &Proc, pid: Pid, sig: Signal) {
        let Some(v) = self.places.vertex_of(proc) else {
            return;
        };
        let msg = Msg::Signal {
            procs: vec![(proc.clone(), pid.as_raw())],
            signal: sig as i32,
        };
        self.tree.send(Dest::Vertex(v), encode(&msg));
    }

    fn has_ended(&mut self, _proc: &Proc, _pid: Pid) -> bool {
        // Known only where it runs; its end is on its way if it happened.
        false
    }

    fn proc_ended(&mut self, proc: &Proc) {
        self.names.proc_ended(proc);
    }

    fn job_ended(&mut self, nspace: &Nspace) {
        tracing::debug!(%nspace, "job ended");
        self.tree
            .send(Dest::All, encode(&Msg::JobEnded(nspace.clone())));
        self.names.nspace_ended(nspace);
        self.tools.job_ended(nspace);
        self.places.remove(nspace);
        if let Some(p) = self.placements.remove(nspace) {
            self.usage.remove(&p);
        }
    }

    fn notify(&mut self, code: Status, info: &[Info]) {
        // The root hosts no server: the daemons raise it, each for its own processes.
        let msg = Msg::Event {
            code,
            source: Proc::new(self.first.clone(), pmix_server::types::Rank::UNDEF),
            range: pmix_server::types::DataRange::CUSTOM,
            info: info.to_vec(),
        };
        self.tree.send(Dest::All, encode(&msg));
    }

    fn node_of(&self, proc: &Proc) -> Option<String> {
        let v = self.places.vertex_of(proc)?;
        let node = self
            .nodes
            .names()
            .nth(usize::try_from(v).ok()?.checked_sub(1)?)?;
        Some(node.to_owned())
    }

    fn hear_out(&mut self, proc: &Proc) -> bool {
        let Some(v) = self.places.vertex_of(proc) else {
            return false;
        };
        let events = self.events.clone();
        let who = proc.clone();
        self.tree
            .request(v, encode(&Req::SettleClient(proc.clone())), move |_| {
                let _ = events.send(Event::ClientSettled(who));
            });
        true
    }

    fn host_of(&self, proc: &Proc) -> String {
        match self.node_of(proc) {
            Some(node) => node,
            // No process of the run: a tool asking at the root, which is on the root's node.
            None if self.places.get(&proc.nspace).is_none() => self.root_node.clone(),
            None => String::new(),
        }
    }
}
