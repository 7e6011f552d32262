//! `pmixrun` as the root of a multi-node run: it starts a daemon on every node through the
//! tree (see [`crate::multinode::bootstrap`]), launches each job on them, and supervises the run as on
//! one node: the same [`Supervisor`] decides, acting on remote processes through the tree
//! ([`RootJobs`]). It serves the names of the run (its own name server, or the one given) and
//! writes every process's output, and it is the run's one entry point for tools
//! ([`crate::multinode::root::tools`]).
//!
//! The root hosts no process: vertex `i + 1` of the tree is the daemon of node `i`.

pub(crate) mod cross;
pub(crate) mod jobs;
pub(crate) mod sink;
pub(crate) mod tools;

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, unbounded};
use pmix_server::types::{Info, Nspace, Rank, attr};
use pmix_server::{NameServer, NameServerClient};
use pmix_tree::{Config, Dest, Topology, Tree, Vertex};
use signal_hook::iterator::Signals;

use crate::cli::{self, Launcher, Protocol};
use crate::multinode::bootstrap::{self, AgentEnded, Boot};
use crate::multinode::msg::{Msg, encode};
use crate::multinode::placed::Placements;
use crate::multinode::root::jobs::{Job, RootJobs};
use crate::multinode::root::sink::{Control, RootSink};
use crate::multinode::root::tools::RootTools;
use crate::plan::layout::Layout;
use crate::plan::placement::{NodeList, Placement, SlotUsage};
use crate::supervise::Supervisor;

/// How long the daemons may take to join, and a job to start on them.
pub(crate) const LAUNCH_TIMEOUT: Duration = Duration::from_secs(60);

/// How long the daemons get to send their last output once the run is over.
const FINISH_TIMEOUT: Duration = Duration::from_secs(5);

/// Tree heartbeats, and the silence after which a node is lost.
const HEARTBEAT: Duration = Duration::from_secs(1);
const DEAD_AFTER: Duration = Duration::from_secs(4);

/// Everything the multi-node run needs from the command line, already checked.
pub(crate) struct RootRun {
    pub(crate) opts: cli::Options,
    pub(crate) nodes: NodeList,
    pub(crate) placement: Placement,
    pub(crate) layout: Layout,
    pub(crate) cwd: PathBuf,
    pub(crate) user_env: Vec<Vec<(OsString, OsString)>>,
    pub(crate) pmi: Protocol,
    pub(crate) names: Option<Arc<NameServerClient>>,
    /// The nodes are those of the Slurm allocation pmixrun runs in (no host list given).
    pub(crate) from_allocation: bool,
}

/// Runs the job across the nodes; returns the exit status.
pub(crate) fn run(r: RootRun, signals: Signals) -> Result<u8, String> {
    let this_host = crate::setup::hostname();
    let launcher = match r.opts.nodes.launcher {
        None if r.from_allocation => Launcher::Slurm,
        _ => crate::plan::placement::launcher(&r.opts.nodes, &r.nodes, &this_host),
    };
    let local = launcher == Launcher::Local;
    let slurm = launcher == Launcher::Slurm;
    let daemons = u32::try_from(r.nodes.len()).map_err(|_| "too many nodes")?;
    let topology = Topology::new(daemons + 1, r.opts.nodes.radix);
    let secret =
        pmix_tree::auth::random_secret().map_err(|e| format!("cannot read /dev/urandom: {e}"))?;
    // Names: the given name server, or a private one for this run.
    let (names, _own_names) = match r.names.clone() {
        Some(n) => (n, None),
        None => {
            let (client, server) = private_nameserver(&this_host)?;
            (client, Some(server))
        }
    };
    let (events_tx, events) = unbounded();
    crate::setup::start_signal_thread(signals, events_tx.clone())?;
    // Tools attach here, not to the daemons; on any way out its rendezvous files go with it.
    let tree_cell: Arc<OnceLock<Arc<Tree>>> = Arc::new(OnceLock::new());
    let tools = Arc::new(RootTools::start(
        &events_tx,
        &names,
        tree_cell.clone(),
        r.opts.system_server,
    )?);
    let root_node = r
        .nodes
        .names()
        .find(|n| crate::plan::placement::is_this_machine(n, &this_host))
        .unwrap_or(&this_host)
        .to_owned();
    let (control_tx, control) = unbounded();
    let (lines_tx, lines) = unbounded();
    let places = Arc::new(Placements::default());
    let lost: Arc<Mutex<HashSet<Vertex>>> = Arc::default();
    let mut node_names = vec![this_host.clone()];
    node_names.extend(r.nodes.names().map(str::to_owned));
    // Collectives with other runs need a name server shared with them.
    let cross = match &r.names {
        Some(shared) => Some(
            crate::multinode::root::cross::start(
                tree_cell.clone(),
                shared.clone(),
                places.clone(),
                topology,
            )
            .map_err(|e| format!("cannot start a thread: {e}"))?,
        ),
        None => None,
    };
    let (stdin_acks_tx, stdin_acks) = unbounded();
    let sink = RootSink {
        stdin_acks: stdin_acks_tx,
        tree: tree_cell.clone(),
        events: events_tx.clone(),
        control: control_tx,
        lines: lines_tx.clone(),
        names: names.clone(),
        places: places.clone(),
        topology,
        nodes: node_names.clone(),
        lost: lost.clone(),
        cross: cross
            .as_ref()
            .map(crate::multinode::root::cross::CrossRuns::sender),
        logs: Default::default(),
        tools: tools.clone(),
    };
    let mut config = Config::new(0, topology, secret);
    config.listen = if local {
        ([127, 0, 0, 1], 0).into()
    } else {
        ([0, 0, 0, 0], 0).into()
    };
    config.heartbeat = HEARTBEAT;
    config.link_delay = r.opts.nodes.link_delay;
    config.dead_after = DEAD_AFTER;
    let (tree, listening) = Tree::start(config, move |d| sink.deliver(d))
        .map_err(|e| format!("cannot start the tree: {e}"))?;
    let tree = Arc::new(tree);
    let _ = tree_cell.set(tree.clone());
    let port = listening.map(|a| a.port()).unwrap_or(0);
    let program =
        std::env::current_exe().map_err(|e| format!("cannot find pmixrun's own program: {e}"))?;
    let boot = Boot {
        vertex: 0,
        size: daemons + 1,
        radix: r.opts.nodes.radix,
        secret: secret.to_vec(),
        parent: Vec::new(),
        nodes: node_names.clone(),
        agent: if local {
            Vec::new()
        } else {
            r.opts.nodes.launch_agent.clone()
        },
        program,
        heartbeat_ms: HEARTBEAT.as_millis() as u64,
        link_delay_us: r.opts.nodes.link_delay.as_micros() as u64,
        dead_after_ms: DEAD_AFTER.as_millis() as u64,
        verbose: r.opts.verbose,
        join: Vec::new(),
    };
    let mut boot = boot;
    let here = bootstrap::my_addresses(local, port);
    let (agents_tx, agents) = unbounded();
    // Under Slurm one srun starts every daemon, and they find their parents through the
    // join service (kept until every daemon is up); otherwise the tree spawns itself.
    let mut join = None;
    let (children, failed) = if slurm {
        let service = crate::multinode::join::JoinService::start(secret, topology, here)?;
        boot.join = service.addrs();
        join = Some(service);
        match bootstrap::start_srun(&boot, &node_names[1..], &agents_tx) {
            Ok(srun) => (vec![srun], None),
            Err(e) => (Vec::new(), Some(e)),
        }
    } else {
        bootstrap::start_children(&boot, &here, &agents_tx)
    };
    let mut end = Ending {
        tree: tree.clone(),
        children,
        agents,
        reaped: HashSet::new(),
        control: control.clone(),
        lost: lost.clone(),
        daemons,
    };
    if let Some(e) = failed {
        end.finish(false);
        return Err(e);
    }
    if let Err(e) = wait_for_daemons(&mut end, &boot) {
        end.finish(false);
        return Err(e);
    }
    drop(join);
    tracing::debug!(daemons, "every daemon joined");
    let tag = r.opts.tag_output;
    let ack_tree = tree.clone();
    let nspace = Nspace::new(format!("rs-pmixrun-{}", std::process::id()))
        .map_err(|e| format!("cannot name the job: {e}"))?;
    // Every node's output reaches the root, which hands it to the tools that pulled it.
    let output_done = crate::node::output::start_writer(
        tag,
        lines,
        Some(crate::node::output::Remote {
            nodes: node_names.clone(),
            ack: Box::new(move |v, n| ack_tree.send(Dest::Vertex(v), encode(&Msg::OutputAck(n)))),
        }),
        Some(crate::node::output::to_tools(
            tools.server().clone(),
            nspace.clone(),
        )),
    )
    .map_err(|e| format!("cannot start the output thread: {e}"))?;
    drop(lines_tx);
    // Empty: launching the first job takes its slots, as it does a spawned job's.
    let usage = SlotUsage::new(&r.nodes);
    let mut jobs = RootJobs {
        tree: tree.clone(),
        events: events_tx.clone(),
        control,
        places,
        nodes: r.nodes,
        usage,
        placements: HashMap::new(),
        names,
        cwd: r.cwd,
        first: nspace.clone(),
        spawned: 0,
        pmi: r.pmi,
        oversubscribe: r.opts.nodes.oversubscribe,
        stdin: r.opts.stdin,
        daemons,
        lost,
        // Processes of other machines start with the root's environment, as those of this
        // one would (the -x variables over it).
        forwarded: if local {
            Vec::new()
        } else {
            crate::node::launch::forwarded_env()
        },
        place: r.opts.place,
        tools: tools.clone(),
        root_node,
        logical: local,
    };
    // The daemons of the processes that take pmixrun's input.
    let mut readers: Vec<Vertex> = (0..r.layout.size)
        .filter(|rank| r.opts.stdin.takes(*rank))
        .map(|rank| r.placement.node_of(rank).map_or(1, |n| n as Vertex + 1))
        .collect();
    readers.sort_unstable();
    readers.dedup();
    let job = Job {
        nspace: &nspace,
        tag: 0,
        apps: &r.opts.apps,
        layout: &r.layout,
        place: jobs.place,
    };
    let debug = r
        .opts
        .stop_in_init
        .then(|| Info::attr(attr::DEBUG_STOP_IN_INIT, Rank::WILDCARD));
    let first = jobs.launch(job, r.placement, &r.user_env, debug.into_iter().collect());
    if !readers.is_empty() && first.is_ok() {
        forward_stdin(tree.clone(), readers, stdin_acks);
    }
    let mut sup = Supervisor::new(jobs, r.opts.timeout);
    sup.set_grace(r.opts.grace);
    sup.set_max_spawn_depth(r.opts.max_spawn_depth);
    sup.set_recovery(r.opts.enable_recovery);
    sup.set_max_restarts(r.opts.max_restarts);
    match first {
        Ok(started) => {
            sup.add_started_job(started);
        }
        Err(failed) => {
            let job = sup.add_job(nspace.clone(), r.layout.size);
            if let Some(p) = failed.partial {
                for l in p.procs {
                    sup.started(job, l);
                }
            }
            sup.not_started(job, failed.exit, &failed.message);
        }
    }
    let status = sup.run(&events);
    tree.send(Dest::All, encode(&Msg::Shutdown));
    end.finish(true);
    if output_done
        .recv_timeout(crate::node::output::OUTPUT_DRAIN)
        .is_err()
    {
        tracing::warn!("output still open after every process ended; not waiting for it");
    }
    tools.finish();
    Ok(status)
}

/// pmixrun's stdin, down the tree to the daemons of the processes that take it, one chunk at
/// a time (the next once every one of them said it was written: nothing piles up on the way),
/// then its end. Not read from a terminal pmixrun is in the background of.
fn forward_stdin(tree: Arc<Tree>, readers: Vec<Vertex>, acks: crossbeam_channel::Receiver<Vertex>) {
    if crate::node::stdin::is_background_terminal() {
        tracing::debug!("stdin is a terminal pmixrun is in the background of: not read");
        return;
    }
    let down = tree.clone();
    let to = readers.clone();
    let chunk = move |data: &[u8]| {
        let msg = encode(&Msg::Stdin(data.to_vec()));
        for v in &to {
            down.send(Dest::Vertex(*v), msg.clone());
        }
        let mut waiting: HashSet<Vertex> = to.iter().copied().collect();
        while !waiting.is_empty() {
            match acks.recv() {
                Ok(v) => {
                    waiting.remove(&v);
                }
                // The run is over.
                Err(_) => return false,
            }
        }
        true
    };
    let end = move || {
        for v in &readers {
            tree.send(Dest::Vertex(*v), encode(&Msg::StdinEnd));
        }
    };
    if let Err(e) = crate::node::stdin::read_stdin(chunk, end) {
        tracing::warn!("cannot start the stdin thread: {e}");
    }
}

/// A name server private to this run. Its socket (in a private directory) is removed as soon
/// as the root, its only client, is connected: nothing of it stays in `$TMPDIR`, even if the
/// root is killed.
fn private_nameserver(host: &str) -> Result<(Arc<NameServerClient>, NameServer), String> {
    let tmp = std::env::temp_dir();
    let dir = pmix_server::rendezvous::create_private_dir(
        &tmp,
        crate::modes::nameserver::NAMESERVER_PREFIX,
    )
    .map_err(|e| format!("cannot make the name server's directory: {e}"))?;
    let path = dir.join(crate::modes::nameserver::NAMESERVER_SOCKET);
    let connected = NameServer::start(&path, 0o600)
        .map_err(|e| format!("cannot start the name server: {e}"))
        .and_then(|server| {
            NameServerClient::connect(server.uri(), host)
                .map(|client| (Arc::new(client), server))
                .map_err(|e| format!("cannot use the run's name server: {e}"))
        });
    let _ = std::fs::remove_dir_all(&dir);
    connected
}

/// Waits until every daemon said it is up, or says why not.
fn wait_for_daemons(end: &mut Ending, boot: &Boot) -> Result<(), String> {
    let (control, agents, daemons) = (end.control.clone(), end.agents.clone(), end.daemons);
    let deadline = Instant::now() + LAUNCH_TIMEOUT;
    let mut up = HashSet::new();
    while (up.len() as u32) < daemons {
        crossbeam_channel::select! {
            recv(control) -> c => match c {
                Ok(Control::Up(v)) => { up.insert(v); }
                Ok(Control::AgentFailed(message)) => return Err(message),
                Ok(Control::Lost(why)) => return Err(format!("{why} while starting")),
                Ok(_) => {}
                Err(_) => return Err("the tree stopped".into()),
            },
            recv(agents) -> a => {
                if let Ok(a) = a {
                    end.reaped.insert(a.vertex);
                    if !up.contains(&a.vertex) {
                        return Err(bootstrap::agent_failure(boot, &a));
                    }
                }
            },
            default(deadline.saturating_duration_since(Instant::now())) => {
                let missing: Vec<&str> = (1..=daemons)
                    .filter(|v| !up.contains(v))
                    .map(|v| boot.node(v))
                    .collect();
                return Err(format!(
                    "the daemons of {} did not join within {} s",
                    missing.join(","),
                    LAUNCH_TIMEOUT.as_secs()
                ));
            },
        }
    }
    Ok(())
}

/// The end of the run, whatever it was: the daemons say they are done (or are given up on),
/// the tree closes, and the agents are reaped.
struct Ending {
    tree: Arc<Tree>,
    children: Vec<bootstrap::Started>,
    agents: Receiver<AgentEnded>,
    /// The agents (of the root's children) already reaped.
    reaped: HashSet<Vertex>,
    control: Receiver<Control>,
    lost: Arc<Mutex<HashSet<Vertex>>>,
    daemons: u32,
}

impl Ending {
    fn finish(&mut self, wait_for_done: bool) {
        let deadline = Instant::now() + FINISH_TIMEOUT;
        if wait_for_done {
            let mut done = HashSet::new();
            let missing = |done: &HashSet<Vertex>| {
                let lost = self.lost.lock().unwrap_or_else(PoisonError::into_inner);
                (1..=self.daemons).any(|v| !done.contains(&v) && !lost.contains(&v))
            };
            while missing(&done) {
                match self.control.recv_deadline(deadline) {
                    Ok(Control::Done(v)) => {
                        done.insert(v);
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        }
        self.tree.shutdown();
        // The agents of lost daemons may wait on a dead link for a long time: no waiting.
        {
            let lost = self.lost.lock().unwrap_or_else(PoisonError::into_inner);
            let doomed = self
                .children
                .iter()
                .filter(|c| lost.contains(&c.vertex) && !self.reaped.contains(&c.vertex));
            for c in doomed {
                c.kill();
            }
        }
        while self.reaped.len() < self.children.len() {
            match self.agents.recv_deadline(deadline) {
                Ok(a) => {
                    self.reaped.insert(a.vertex);
                }
                Err(_) => break,
            }
        }
        // Those not reaped by now (a reaped one's pid may be anyone's).
        for c in self
            .children
            .iter()
            .filter(|c| !self.reaped.contains(&c.vertex))
        {
            c.kill();
        }
    }
}
