//! `pmixrun` as the daemon of one node in a multi-node run (started by its parent in the
//! tree, see [`crate::multinode::bootstrap`]): a PMIx server under the node's name, whose host is the
//! tree ([`crate::multinode::daemon::host`]), and the local half of a launcher: it starts the node's
//! processes of every job the root launches, forwards their output and ends to the root, and
//! passes the root's signals on.
//!
//! Lifelines: a daemon whose parent is lost (tree link, or its stdin closed by the agent) or
//! which is told to stop by a signal kills its processes, removes what it made and exits.

pub(crate) mod host;

use std::collections::HashMap;
use std::os::unix::process::ExitStatusExt;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, bounded, select, unbounded};
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use pmix_server::types::{Nspace, Proc, Status};
use pmix_server::{NameService, Server, ServerOptions};
use pmix_tree::{Config, Delivery, Dest, Tree, Vertex};
use signal_hook::iterator::Signals;

use crate::multinode::bootstrap::{self, AgentEnded, Boot};
use crate::multinode::daemon::host::DaemonHost;
use crate::multinode::msg::{Answer, End, Launch, Msg, OutputLine, Req, Started, decode, encode};
use crate::multinode::placed::{Placed, Placements};
use crate::node::host::Event;
use crate::node::jobs::{JobLaunch, RunJobs};
use crate::node::output::{Line, Stream};
use crate::plan::launcher_env;
use crate::plan::layout::Layout;

/// Output bytes a daemon may have sent that the root has not written yet.
const OUTPUT_WINDOW: u64 = 4 << 20;

/// Output lines held between the pipes' readers and the forwarder; readers (and so the
/// processes, once their pipes fill) wait beyond it.
const OUTPUT_QUEUE: usize = 1024;

/// Output bytes gathered into one message.
const OUTPUT_BATCH: usize = 64 * 1024;

/// How long a stopping daemon waits for its processes' last output.
const OUTPUT_DRAIN: Duration = Duration::from_secs(2);

/// `pmixrun` started by its [`crate::multinode::guardian`]: reads its [`Boot`] from stdin and runs
/// until the root says the run is over or a lifeline breaks. Returns the exit status.
pub(crate) fn run(signals: Signals) -> u8 {
    let boot = match bootstrap::read_boot(&mut std::io::stdin().lock()) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("pmixrun daemon: {e}");
            return 1;
        }
    };
    crate::setup::init_logging(boot.verbose);
    match Daemon::start(boot, signals) {
        Ok(d) => d.run(),
        Err(e) => {
            eprintln!("pmixrun daemon: {e}");
            1
        }
    }
}

/// Why the daemon's loop ended.
enum Stop {
    /// The root said so (after the daemon reported it was done).
    Done,
    /// A lifeline broke: kill everything and go.
    Lifeline(String),
}

struct Daemon {
    boot: Boot,
    tree: Arc<Tree>,
    server: Server,
    jobs: Arc<Placements>,
    finalized: Arc<std::sync::Mutex<std::collections::HashSet<Proc>>>,
    deliveries: Receiver<Delivery>,
    events: Receiver<Event>,
    events_tx: Sender<Event>,
    agents: Receiver<AgentEnded>,
    /// The daemons this one started, until they joined.
    children: Vec<bootstrap::Started>,
    joined: std::collections::HashSet<Vertex>,
    /// Local processes alive, by job, with their pids.
    running: HashMap<Proc, Pid>,
    /// Each running job as the root launched it and as this node started it, to start a
    /// process of it again.
    launches: HashMap<Nspace, (Launch, JobLaunch)>,
    lines: Option<Sender<Line>>,
    acks: Sender<u64>,
    /// Says when the output thread ended; taken once the run is over.
    forwarder: Option<Receiver<()>>,
    /// The local processes that take pmixrun's input.
    stdin: Arc<crate::node::stdin::Router>,
    /// pmixrun's input for them (`None`: its end), to the thread that writes it and answers
    /// the root.
    relay: Sender<Option<Vec<u8>>>,
    /// The turns of the binding deal this node's running jobs hold (`binding.rs`).
    claims: Arc<std::sync::Mutex<crate::plan::binding::Claims>>,
}

impl Daemon {
    fn start(mut boot: Boot, signals: Signals) -> Result<Daemon, String> {
        // Started by one srun for every node: the task rank says which vertex this is, and
        // the root's join service where the parent listens.
        let srun = !boot.join.is_empty();
        let mut joining = None;
        let parents = if srun {
            boot.vertex = srun_vertex()?;
            let (addrs, j) =
                crate::multinode::join::ask_parent(&boot.join, &boot.secret, boot.vertex)?;
            joining = Some(j);
            addrs
        } else {
            boot.parent.clone()
        };
        let me = boot.vertex;
        let local = boot.agent.is_empty() && !srun;
        let parent = bootstrap::reachable_parent(&parents)?;
        let mut config = Config::new(me, boot.topology(), boot.secret()?);
        config.parent = Some(parent);
        config.listen = if local {
            ([127, 0, 0, 1], 0).into()
        } else {
            ([0, 0, 0, 0], 0).into()
        };
        config.heartbeat = Duration::from_millis(boot.heartbeat_ms);
        config.link_delay = Duration::from_micros(boot.link_delay_us);
        config.dead_after = Duration::from_millis(boot.dead_after_ms);
        let (deliveries_tx, deliveries) = unbounded();
        // The vertex runs in the server's event loop (see `daemon_host`).
        let (tree, tree_loop, listening) = Tree::embedded(config, move |d| {
            let _ = deliveries_tx.send(d);
        })
        .map_err(|e| format!("cannot join the tree at {parent}: {e}"))?;
        let tree = Arc::new(tree);
        let jobs = Arc::new(Placements::default());
        let host = DaemonHost::new(tree_loop, jobs.clone());
        let finalized = host.finalized.clone();
        let server = Server::init(
            host,
            ServerOptions {
                hostname: Some(boot.node(me).to_owned()),
                name_service: NameService::Host,
                // Each daemon hands out the group context ids of its own residue (the root,
                // vertex 0, serves no process): unique across the run.
                context_ids: (u64::from(me), u64::from(boot.size.max(1))),
                ..ServerOptions::default()
            },
        )
        .map_err(|e| format!("cannot start the PMIx server: {e}"))?;
        let (events_tx, events) = unbounded();
        crate::setup::start_signal_thread(signals, events_tx.clone())?;
        let (agents_tx, agents) = unbounded();
        let mut children = Vec::new();
        if let Some(j) = joining {
            let here = listening.map(|a| bootstrap::my_addresses(false, a.port()));
            j.listening(here.unwrap_or_default())?;
        } else if let Some(addr) = listening {
            let (started, failed) = bootstrap::start_children(
                &boot,
                &bootstrap::my_addresses(local, addr.port()),
                &agents_tx,
            );
            if let Some(e) = failed {
                // Reported as the failure of the first child not started.
                let vertex = boot
                    .topology()
                    .children(me)
                    .nth(started.len())
                    .unwrap_or(me);
                tree.send(
                    Dest::Vertex(0),
                    encode(&Msg::AgentFailed { vertex, message: e }),
                );
            }
            children = started;
        }
        watch_stdin(events_tx.clone())?;
        let (lines_tx, lines_rx) = bounded(OUTPUT_QUEUE);
        let (acks, acks_rx) = unbounded();
        let forwarder = start_forwarder(tree.clone(), lines_rx, acks_rx)?;
        tree.send(
            Dest::Vertex(0),
            encode(&Msg::Up {
                vertex: me,
                pid: std::process::id(),
            }),
        );
        let stdin = crate::node::stdin::Router::new();
        let tree_for_relay = tree.clone();
        Ok(Daemon {
            boot,
            tree,
            server,
            jobs,
            finalized,
            deliveries,
            events,
            events_tx,
            agents,
            children,
            joined: Default::default(),
            running: HashMap::new(),
            launches: HashMap::new(),
            claims: Arc::default(),
            lines: Some(lines_tx),
            acks,
            forwarder: Some(forwarder),
            relay: start_relay(stdin.clone(), tree_for_relay)?,
            stdin,
        })
    }

    fn run(mut self) -> u8 {
        let stop = loop {
            let step = select! {
                recv(self.deliveries) -> d => match d {
                    Ok(d) => self.delivery(d),
                    Err(_) => Some(Stop::Lifeline("the tree stopped".into())),
                },
                // A closed channel is ready at once: replaced by one that never is, or this
                // loop would spin (a leaf daemon starts no agents).
                recv(self.events) -> e => match e {
                    Ok(e) => self.event(e),
                    Err(_) => { self.events = crossbeam_channel::never(); None }
                },
                recv(self.agents) -> a => match a {
                    Ok(a) => { self.agent_ended(&a); None }
                    // Every agent reported (or there were none): nothing more to wait for
                    // there, and a disconnected channel would be ready forever.
                    Err(_) => { self.agents = crossbeam_channel::never(); None }
                },
            };
            if let Some(stop) = step {
                break stop;
            }
        };
        let code = match &stop {
            Stop::Done => 0,
            Stop::Lifeline(why) => {
                tracing::warn!(node = self.boot.node(self.boot.vertex), "{why}: stopping");
                1
            }
        };
        self.kill_all();
        if let Err(e) = self.server.finalize() {
            tracing::warn!("finalizing the server: {e}");
        }
        self.tree.shutdown();
        // The agents still running (those reaped meanwhile first taken off).
        while let Ok(a) = self.agents.try_recv() {
            self.children.retain(|c| c.vertex != a.vertex);
        }
        for c in &self.children {
            c.kill();
        }
        code
    }

    fn delivery(&mut self, d: Delivery) -> Option<Stop> {
        match d {
            Delivery::ChildUp(v) => {
                self.joined.insert(v);
            }
            Delivery::Message { payload, .. } => {
                let msg: Msg = decode(&payload)?;
                return self.message(msg);
            }
            Delivery::Request {
                origin,
                id,
                payload,
            } => match decode::<Req>(&payload) {
                Some(Req::Dmodex { proc, info }) => {
                    let tree = self.tree.clone();
                    self.server.dmodex_request(&proc, &info, move |r| {
                        tree.respond(origin, id, r.map(|b| encode(&Answer::Bytes(b))))
                    });
                }
                Some(Req::Restart {
                    proc,
                    reincarnation,
                }) => {
                    let answer = Answer::Restarted(self.restart(&proc, reincarnation));
                    self.tree.respond(origin, id, Ok(encode(&answer)));
                }
                Some(Req::SettleClient(proc)) => {
                    let tree = self.tree.clone();
                    self.server.settle_client(&proc, move || {
                        tree.respond(origin, id, Ok(encode(&Answer::Unit)))
                    });
                }
                _ => self
                    .tree
                    .respond(origin, id, Err(Status::ERR_NOT_SUPPORTED)),
            },
            Delivery::Lost { vertex, reason } => {
                let topo = self.boot.topology();
                tracing::debug!(vertex, %reason, "lost a subtree");
                for p in self.jobs.procs_on(|v| topo.in_subtree(vertex, v)) {
                    let _ = self
                        .server
                        .proc_ended_elsewhere(&p, Status::ERR_LOST_CONNECTION);
                }
            }
            Delivery::ParentLost { reason } => {
                return Some(if self.forwarder.is_none() {
                    Stop::Done
                } else {
                    Stop::Lifeline(format!("lost the parent daemon ({reason})"))
                });
            }
        }
        None
    }

    fn message(&mut self, msg: Msg) -> Option<Stop> {
        match msg {
            Msg::Launch(l) => self.launch(*l),
            Msg::Signal { procs, signal } => {
                let Ok(sig) = Signal::try_from(signal) else {
                    return None;
                };
                for (proc, pid) in procs {
                    if self.running.get(&proc) == Some(&Pid::from_raw(pid)) {
                        crate::node::launch::signal(Pid::from_raw(pid), sig);
                    }
                }
            }
            Msg::ProcEnded { proc, status } => {
                let _ = self.server.proc_ended_elsewhere(&proc, status);
            }
            Msg::ProcRestarted {
                proc,
                reincarnation,
            } => {
                let _ = self.server.proc_restarted(&proc, reincarnation);
            }
            Msg::Event {
                code,
                source,
                range,
                info,
            } => {
                let _ = self.server.notify_event(code, &source, range, &info);
            }
            Msg::JobEnded(nspace) => {
                self.launches.remove(&nspace);
                self.server.deregister_nspace(&nspace);
                self.jobs.remove(&nspace);
                { self.claims.lock() }
                    .unwrap_or_else(PoisonError::into_inner)
                    .release(nspace.as_str());
            }
            Msg::OutputAck(n) => {
                let _ = self.acks.send(n);
            }
            Msg::Stdin(data) => {
                let _ = self.relay.send(Some(data));
            }
            Msg::StdinEnd => {
                let _ = self.relay.send(None);
            }
            Msg::Shutdown => self.finish_output(),
            _ => {}
        }
        None
    }

    /// The run is over: once the last output is on its way, tells the root, which then
    /// closes the tree (and this daemon ends on losing its parent).
    fn finish_output(&mut self) {
        self.kill_all();
        self.lines = None;
        let drained = self
            .forwarder
            .take()
            .is_none_or(|done| done.recv_timeout(OUTPUT_DRAIN).is_ok());
        if !drained {
            tracing::warn!("output still open after every process ended; not waiting for it");
        }
        self.tree.send(Dest::Vertex(0), encode(&Msg::Done));
    }

    /// What starts this node's processes of the job `l`, and which they are (ascending);
    /// `None` once the run is over (their output would go nowhere).
    fn run_jobs(&self, l: &Launch) -> Option<(RunJobs<'_>, Vec<u32>)> {
        let me = self.boot.vertex;
        let ranks: Vec<u32> = (0u32..)
            .zip(&l.vertex_of_rank)
            .filter(|(_, v)| **v == me)
            .map(|(r, _)| r)
            .collect();
        let lines = self.lines.clone()?;
        // `--launcher local`: every node is this machine.
        let logical = self.boot.agent.is_empty() && self.boot.join.is_empty();
        let (group_rank, groups, master_addr) =
            launcher_env::group_and_master(&l.vertex_of_rank, me, &self.boot.nodes, logical);
        let run = RunJobs {
            server: &self.server,
            names: None,
            cwd: std::path::PathBuf::from("/"),
            first: l.nspace.clone(),
            spawned: 0,
            events: self.events_tx.clone(),
            lines,
            pmi: l.pmi.into(),
            place: l.place,
            group_rank,
            groups,
            master_addr,
            free_master_port: false,
            stdin: Some((l.stdin, self.stdin.clone())),
            psets: Default::default(),
            claims: Arc::clone(&self.claims),
            job_places: std::collections::HashMap::new(),
            launched: Default::default(),
        };
        Some((run, ranks))
    }

    fn launch(&mut self, l: Launch) {
        let layout = Layout {
            firsts: l.firsts.clone(),
            size: l.size,
        };
        let job = JobLaunch::new(l.tag, l.apps.iter().map(|a| a.to_app()).collect(), layout);
        self.jobs
            .insert(l.nspace.clone(), Placed::new(l.vertex_of_rank.clone()));
        let mut report = Started {
            nspace: l.nspace.clone(),
            vertex: self.boot.vertex,
            procs: Vec::new(),
            failed: None,
        };
        let Some((run, ranks)) = self.run_jobs(&l) else {
            return;
        };
        let (apps, layout) = (&job.apps, &job.layout);
        let registered = run.local_info(&l.nspace, &ranks).and_then(|local| {
            let info: Vec<_> = l.info.iter().cloned().chain(local).collect();
            run.register_nspace(&l.nspace, ranks.len() as u32, &info)?;
            run.register_clients(&l.nspace, apps, layout, &ranks)
        });
        let mut started = Vec::new();
        match registered {
            Err(message) => {
                report.failed = ranks
                    .first()
                    .map(|r| (*r, 1, Status::ERR_JOB_FAILED_TO_LAUNCH, message));
            }
            Ok(()) if ranks.is_empty() => {}
            Ok(()) => {
                let (procs, failed) =
                    run.start_ranks(&l.nspace, l.tag, apps, layout, &job.user_env, &ranks);
                if let Some(e) = failed {
                    let rank = ranks.get(procs.len()).copied().unwrap_or(0);
                    report.failed = Some((rank, e.code, e.status, e.message));
                }
                started = procs;
            }
        }
        drop(run);
        for p in started {
            self.running
                .insert(Proc::new(l.nspace.clone(), p.rank), p.pid);
            report.procs.push((p.rank, p.pid.as_raw(), p.exe));
        }
        self.tree
            .send(Dest::Vertex(0), encode(&Msg::Started(report)));
        self.launches.insert(l.nspace.clone(), (l, job));
    }

    /// Starts `proc`, a process of this node that failed, again ([`Req::Restart`]): every
    /// other daemon hears first that it lives again (their servers forget its end), and that
    /// it ended after all if it could not start; `reincarnation` counts its restarts, this
    /// one included. Its pid and program, or why not.
    fn restart(&mut self, proc: &Proc, reincarnation: u32) -> Result<(i32, String), String> {
        let Some((l, job)) = self.launches.get(&proc.nspace) else {
            return Err(format!("the job {} is not running here", proc.nspace));
        };
        let Some((run, ranks)) = self.run_jobs(l) else {
            return Err("the run is over".into());
        };
        self.tree.send(
            Dest::All,
            encode(&Msg::ProcRestarted {
                proc: proc.clone(),
                reincarnation,
            }),
        );
        // Its new life finalizes anew.
        { self.finalized.lock() }
            .unwrap_or_else(PoisonError::into_inner)
            .remove(proc);
        let restarted = run.restart_rank(proc, reincarnation, job, &ranks);
        drop(run);
        match restarted {
            Ok(p) => {
                self.running.insert(proc.clone(), p.pid);
                Ok((p.pid.as_raw(), p.exe))
            }
            Err(e) => {
                let _ = self.server.client_ended(proc);
                let msg = Msg::ProcEnded {
                    proc: proc.clone(),
                    status: Status::ERR_PROC_TERM_WO_SYNC,
                };
                self.tree.send(Dest::All, encode(&msg));
                Err(e)
            }
        }
    }

    fn event(&mut self, e: Event) -> Option<Stop> {
        match e {
            Event::Exited { proc, status } => {
                self.running.remove(&proc);
                let end = match &status {
                    Ok(s) => match (s.code(), s.signal()) {
                        (Some(c), _) => End::Code(c),
                        (None, Some(sig)) => End::Signal(sig),
                        (None, None) => End::Code(1),
                    },
                    Err(e) => End::Error(crate::node::launch::describe(e)),
                };
                let lock = |m: &std::sync::Mutex<std::collections::HashSet<Proc>>| {
                    m.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .contains(&proc)
                };
                // What waits here for one that never connected fails too.
                let _ = self.server.client_ended(&proc);
                if !lock(&self.finalized) {
                    // Other nodes' processes may wait for it (connected or not): they must not.
                    let msg = Msg::ProcEnded {
                        proc: proc.clone(),
                        status: Status::ERR_PROC_TERM_WO_SYNC,
                    };
                    self.tree.send(Dest::All, encode(&msg));
                }
                self.tree
                    .send(Dest::Vertex(0), encode(&Msg::Exited { proc, end }));
            }
            Event::Signal(sig) => {
                return Some(Stop::Lifeline(format!("received {}", sig.as_str())));
            }
            Event::StdinClosed => {
                return Some(Stop::Lifeline("the launch agent went away".into()));
            }
            _ => {}
        }
        None
    }

    /// A daemon this one started ended: before joining, a launch failure the root must hear of.
    fn agent_ended(&mut self, a: &AgentEnded) {
        // Reaped: its pid may be anyone's now, never to be signalled again.
        self.children.retain(|c| c.vertex != a.vertex);
        if self.joined.contains(&a.vertex) {
            return;
        }
        let message = bootstrap::agent_failure(&self.boot, a);
        self.tree.send(
            Dest::Vertex(0),
            encode(&Msg::AgentFailed {
                vertex: a.vertex,
                message,
            }),
        );
    }

    fn kill_all(&mut self) {
        for pid in self.running.values() {
            crate::node::launch::signal(*pid, Signal::SIGKILL);
        }
    }
}

/// This daemon's vertex when srun started it: its task rank plus one.
fn srun_vertex() -> Result<u32, String> {
    std::env::var("SLURM_PROCID")
        .ok()
        .and_then(|r| r.parse::<u32>().ok())
        .and_then(|r| r.checked_add(1))
        .ok_or_else(|| "started for srun, but SLURM_PROCID says no task rank".to_owned())
}

/// Starts the thread writing pmixrun's input (from the root) to the local processes that
/// take it, acknowledging each chunk once they took it (the root sends one at a time, so
/// this channel holds at most one).
fn start_relay(
    router: Arc<crate::node::stdin::Router>,
    tree: Arc<Tree>,
) -> Result<Sender<Option<Vec<u8>>>, String> {
    let (tx, rx) = crossbeam_channel::unbounded::<Option<Vec<u8>>>();
    std::thread::Builder::new()
        .name("stdin-relay".into())
        .stack_size(crate::node::output::SMALL_STACK)
        .spawn(move || {
            while let Ok(Some(data)) = rx.recv() {
                router.feed_all(&data);
                tree.send(Dest::Vertex(0), encode(&Msg::StdinAck));
            }
            router.end_all();
        })
        .map_err(|e| format!("cannot start the stdin relay: {e}"))?;
    Ok(tx)
}

/// Reports the end of stdin (the agent or the parent gone) as [`Event::StdinClosed`].
fn watch_stdin(events: Sender<Event>) -> Result<(), String> {
    std::thread::Builder::new()
        .name("lifeline".into())
        .stack_size(crate::node::output::SMALL_STACK)
        .spawn(move || {
            let mut buf = [0u8; 256];
            let mut stdin = std::io::stdin().lock();
            loop {
                match std::io::Read::read(&mut stdin, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
            let _ = events.send(Event::StdinClosed);
        })
        .map(drop)
        .map_err(|e| format!("cannot watch stdin: {e}"))
}

/// Starts the thread that sends the processes' output to the root, no more than
/// [`OUTPUT_WINDOW`] bytes ahead of what the root has written. It ends once every reader has,
/// and then sends on the channel returned, so that its end can be awaited with a deadline.
fn start_forwarder(
    tree: Arc<Tree>,
    lines: Receiver<Line>,
    acks: Receiver<u64>,
) -> Result<Receiver<()>, String> {
    let (done_tx, done) = bounded(1);
    std::thread::Builder::new()
        .name("output".into())
        .spawn(move || {
            forward(&tree, &lines, &acks);
            let _ = done_tx.send(());
        })
        .map_err(|e| format!("cannot start the output thread: {e}"))?;
    Ok(done)
}

/// The forwarder's loop: batches of lines to the root, within the window.
fn forward(tree: &Tree, lines: &Receiver<Line>, acks: &Receiver<u64>) {
    let mut unacked: u64 = 0;
    while let Ok(first) = lines.recv() {
        let mut batch = Vec::new();
        let mut size = 0;
        let mut next = Some(first);
        while let Some(line) = next.take() {
            size += line.bytes.len();
            batch.push(OutputLine {
                job: line.job,
                rank: line.rank,
                stderr: line.stream == Stream::Stderr,
                bytes: line.bytes,
            });
            if size < OUTPUT_BATCH {
                next = lines.try_recv().ok();
            }
        }
        while unacked > OUTPUT_WINDOW {
            match acks.recv() {
                Ok(n) => unacked = unacked.saturating_sub(n),
                Err(_) => return,
            }
        }
        while let Ok(n) = acks.try_recv() {
            unacked = unacked.saturating_sub(n);
        }
        unacked += size as u64;
        tree.send(Dest::Vertex(0), encode(&Msg::Output(batch)));
    }
}
