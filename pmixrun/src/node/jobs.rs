//! Registering and starting jobs: the first one, from the command line, and each one a process
//! spawns. [`RunJobs`] is what the supervisor acts through in pmixrun.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use crossbeam_channel::Sender;
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use pmix_server::types::{DataArray, Info, Nspace, Proc, Rank, Status, attr};
use pmix_server::{ClientOptions, NameServerClient, PmiTransport, Server};

use crate::cli::{App, Place, Protocol};
use crate::node::host::Event;
use crate::node::launch::{self, LaunchError};
use crate::node::output::Line;
use crate::plan::binding::{self, Bound, Claims};
use crate::plan::launcher_env::{self, NodeJob};
use crate::plan::layout::{self, Layout};
use crate::plan::placement::{JobMap, NodeList, SlotUsage};
use crate::plan::{job, spawn_placement};
use crate::supervise::{Jobs, Launched, SpawnFailed, Started};

/// pmixrun's side of the run: its server, the name server it reports to, and where processes'
/// exits and output go.
pub(crate) struct RunJobs<'a> {
    pub(crate) server: &'a Server,
    pub(crate) names: Option<Arc<NameServerClient>>,
    /// pmixrun's working directory, where relative working directories start.
    pub(crate) cwd: PathBuf,
    /// The first job's namespace; the `n`-th spawned job's is `<first>.<n>`.
    pub(crate) first: Nspace,
    /// How many spawned jobs were named so far (a spawn refused before it is registered
    /// takes no number).
    pub(crate) spawned: u32,
    pub(crate) events: Sender<Event>,
    pub(crate) lines: Sender<Line>,
    /// The protocol every process of the run speaks.
    pub(crate) pmi: Protocol,
    /// Where on this node each process runs and what it is told of its place.
    pub(crate) place: Place,
    /// This node's index among the jobs' nodes, and the host of their rank 0 (the same for
    /// every job this `RunJobs` starts: see `launcher_env.rs`).
    pub(crate) group_rank: u32,
    /// How many nodes the jobs have (`GROUP_WORLD_SIZE`).
    pub(crate) groups: u32,
    pub(crate) master_addr: String,
    /// Every process of the jobs runs on this machine (one node): a job's default
    /// `MASTER_PORT` is checked to be free here, and another taken if it is not. (Across
    /// nodes the root chooses it and every daemon is told it in the job's launch.)
    pub(crate) free_master_port: bool,
    /// Which processes of the first job take input, and where it is routed (one-node runs;
    /// `None`: every process's stdin is /dev/null).
    pub(crate) stdin: Option<(crate::node::stdin::Target, Arc<crate::node::stdin::Router>)>,
    /// The process sets each job's `--pset` defined, deleted when the job ends.
    pub(crate) psets: std::sync::Mutex<std::collections::HashMap<Nspace, Vec<String>>>,
    /// The turns of the binding deal this node's running jobs hold (`binding.rs`).
    pub(crate) claims: Arc<Mutex<Claims>>,
    /// The jobs spawned here whose directives place them otherwise than [`RunJobs::place`].
    pub(crate) job_places: HashMap<Nspace, Place>,
    /// How each job [`RunJobs::start`] started was, to start a process of it again.
    pub(crate) launched: HashMap<Nspace, JobLaunch>,
}

/// A registered job as [`RunJobs::start_ranks`] takes it: namespace, output tag, application
/// contexts, layout and each context's environment.
type JobParts<'a> = (
    &'a Nspace,
    u32,
    &'a [App],
    &'a Layout,
    &'a [Vec<(OsString, OsString)>],
);

/// What a job was started with: its output tag, application contexts, layout and each
/// context's environment.
#[derive(Debug, Clone)]
pub(crate) struct JobLaunch {
    pub(crate) tag: u32,
    pub(crate) apps: Vec<App>,
    pub(crate) layout: Layout,
    pub(crate) user_env: Vec<Vec<(OsString, OsString)>>,
}

impl JobLaunch {
    /// A job started with output tag `tag`, application contexts `apps` laid out as
    /// `layout`, each context's environment as [`launch::app_env`] makes it.
    pub(crate) fn new(tag: u32, apps: Vec<App>, layout: Layout) -> JobLaunch {
        let user_env = apps.iter().map(launch::app_env).collect();
        JobLaunch {
            tag,
            apps,
            layout,
            user_env,
        }
    }
}

impl RunJobs<'_> {
    /// Registers `nspace` (its information: [`job::job_info`] plus `extra`) and its processes.
    pub(crate) fn register(
        &self,
        nspace: &Nspace,
        apps: &[App],
        layout: &Layout,
        extra: Vec<Info>,
    ) -> Result<(), String> {
        let map = JobMap::one_node(self.server.hostname(), layout.size);
        let mut info = job::job_info(&map, apps, layout, &self.cwd)?;
        info.extend(extra);
        let all: Vec<u32> = (0..layout.size).collect();
        info.extend(self.local_info(nspace, &all)?);
        self.register_nspace(nspace, layout.size, &info)?;
        self.register_clients(nspace, apps, layout, &all)
    }

    /// Where each of this node's processes `ranks` (ascending) of `nspace` runs
    /// (`binding.rs`), after those of the jobs running here.
    fn bindings(&self, nspace: &Nspace, ranks: &[u32]) -> Result<Option<Vec<Bound>>, String> {
        let place = self.job_places.get(nspace).unwrap_or(&self.place);
        let turns = { self.claims.lock() }
            .unwrap_or_else(PoisonError::into_inner)
            .claim(nspace.as_str(), ranks.len());
        binding::on_this_node(place.map_to, place.bind_to, &turns)
    }

    /// What the registration of a job says of its processes `ranks` on this node (ascending):
    /// the CPU set, locality string and package rank of each, as data of the process, and
    /// whether they oversubscribe this node (`PMIX_NODE_OVERSUBSCRIBED`, job data for the
    /// processes here, as this node's other values are).
    pub(crate) fn local_info(&self, nspace: &Nspace, ranks: &[u32]) -> Result<Vec<Info>, String> {
        let Some(bound) = self.bindings(nspace, ranks)? else {
            return Ok(Vec::new());
        };
        let mut info: Vec<Info> = ranks
            .iter()
            .zip(bound)
            .map(|(&rank, b)| {
                let data = DataArray::from_infos([
                    Info::attr(attr::RANK, Rank(rank)),
                    Info::attr(attr::CPUSET, b.cpuset()),
                    Info::attr(attr::LOCALITY_STRING, b.locality.as_str()),
                    Info::attr(attr::PACKAGE_RANK, b.package_rank),
                ]);
                Info::attr(attr::PROC_DATA, data)
            })
            .collect();
        // The turns `bindings` claimed for the job (a claim is the job's from then on).
        let turns = { self.claims.lock() }
            .unwrap_or_else(PoisonError::into_inner)
            .claim(nspace.as_str(), ranks.len());
        if binding::oversubscribed(&turns) {
            info.push(Info::attr(attr::NODE_OVERSUBSCRIBED, true));
        }
        Ok(info)
    }

    /// Registers `nspace`, `nlocal` of whose processes are on this node, with its
    /// information, defines the process sets it names, and tells the name server it started.
    pub(crate) fn register_nspace(
        &self,
        nspace: &Nspace,
        nlocal: u32,
        info: &[Info],
    ) -> Result<(), String> {
        self.server
            .register_nspace(nspace, nlocal, info)
            .map_err(|e| format!("cannot register the job {nspace}: {e}"))?;
        // `--pset`: raised for the job's processes as PROCESS_SET_DEFINE (kept by the server
        // for those that register later, as they all do).
        for (name, members) in job::process_sets(nspace, info) {
            self.server
                .define_process_set(&name, &members)
                .map_err(|e| format!("cannot define process set {name}: {e}"))?;
            self.psets
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .entry(nspace.clone())
                .or_default()
                .push(name);
        }
        if let Some(ns) = &self.names {
            ns.nspace_started(nspace);
        }
        Ok(())
    }

    /// Registers the processes `ranks` of `nspace` (those of this node) as clients.
    pub(crate) fn register_clients(
        &self,
        nspace: &Nspace,
        apps: &[App],
        layout: &Layout,
        ranks: &[u32],
    ) -> Result<(), String> {
        let uid = nix::unistd::getuid().as_raw();
        let gid = nix::unistd::getgid().as_raw();
        let options: Vec<ClientOptions> = apps.iter().map(|a| self.client_options(a)).collect();
        for &rank in ranks {
            let p = Proc::new(nspace.clone(), rank);
            self.server
                .register_client_with(&p, uid, gid, &options[layout.app_of(rank)])
                .map_err(|e| format!("cannot register {p}: {e}"))?;
        }
        Ok(())
    }

    /// What may claim the ranks of `app`: a bare uid on the OpenPMIx port only when they may
    /// be libpmix clients, that is unless they speak PMI-1 or the program is a pmix-rs client
    /// (see `detect.rs`; a program that cannot be found yet fails later, at its start).
    fn client_options(&self, app: &App) -> ClientOptions {
        let openpmix = match self.pmi {
            p if p.is_pmi() => false,
            _ => {
                let env = launch::app_env(app);
                !launch::find_program(&app.program, &layout::wdir_of(app, &self.cwd), &env)
                    .is_ok_and(|p| crate::plan::detect::is_pmix_rs_client(&p))
            }
        };
        // Every process registered here is started by `start_ranks`, which says its pid (or,
        // adopted, is the singleton that started this pmixrun): a claim on the OpenPMIx port
        // must come from that process's tree.
        ClientOptions {
            openpmix,
            reports_pid: true,
        }
    }

    /// Starts the processes of a registered job in rank order, each with the environment
    /// `setup_fork` gives plus its application context's `user_env`, tagging their output
    /// with `tag`. Starts none if their descriptors would not fit within pmixrun's limit, and
    /// stops at the first that cannot start: returns the pids of those started (ranks 0, 1,
    /// ...) and why the next one could not.
    pub(crate) fn start(
        &mut self,
        nspace: &Nspace,
        tag: u32,
        apps: &[App],
        layout: &Layout,
        user_env: &[Vec<(OsString, OsString)>],
    ) -> (Vec<Launched>, Option<LaunchError>) {
        let launch = JobLaunch {
            tag,
            apps: apps.to_vec(),
            layout: layout.clone(),
            user_env: user_env.to_vec(),
        };
        self.launched.insert(nspace.clone(), launch);
        let all: Vec<u32> = (0..layout.size).collect();
        self.start_ranks(nspace, tag, apps, layout, user_env, &all)
    }

    /// [`RunJobs::start`] for the processes `ranks` only (ascending; those of this node):
    /// the processes returned are those of `ranks[..n]`, in order.
    pub(crate) fn start_ranks(
        &self,
        nspace: &Nspace,
        tag: u32,
        apps: &[App],
        layout: &Layout,
        user_env: &[Vec<(OsString, OsString)>],
        ranks: &[u32],
    ) -> (Vec<Launched>, Option<LaunchError>) {
        let job = (nspace, tag, apps, layout, user_env);
        self.start_some(job, ranks, |_| true)
    }

    /// Starts `proc`, a process of this node that ended, again, as its job `l` was started,
    /// `ranks` (ascending) being the job's processes on this node: the server forgets its end
    /// and its earlier life's data and learns its `REINCARNATION` (its count of restarts),
    /// registers it again (a new secret; what waited for the old one is over), and it starts
    /// as it did among `ranks` (its binding, its local rank).
    pub(crate) fn restart_rank(
        &self,
        proc: &Proc,
        reincarnation: u32,
        l: &JobLaunch,
        ranks: &[u32],
    ) -> Result<Launched, String> {
        let rank = proc.rank.0;
        if !ranks.contains(&rank) {
            return Err(format!("{proc} is not a process of this node"));
        }
        self.server
            .proc_restarted(proc, reincarnation)
            .map_err(|e| format!("cannot tell the server {proc} lives again: {e}"))?;
        self.register_clients(&proc.nspace, &l.apps, &l.layout, &[rank])?;
        let job = (&proc.nspace, l.tag, &l.apps[..], &l.layout, &l.user_env[..]);
        match self.start_some(job, ranks, |r| r == rank) {
            (mut started, None) => started.pop().ok_or_else(|| "it did not start".to_owned()),
            (_, Some(e)) => Err(e.message),
        }
    }

    /// [`RunJobs::start_ranks`] for those of `ranks` that `chosen` says, each started as it
    /// is among `ranks` (its binding, its local rank).
    fn start_some(
        &self,
        (nspace, tag, apps, layout, user_env): JobParts<'_>,
        ranks: &[u32],
        chosen: impl Fn(u32) -> bool,
    ) -> (Vec<Launched>, Option<LaunchError>) {
        let here: Vec<(u32, u32)> = (0u32..)
            .zip(ranks.iter().copied())
            .filter(|(_, rank)| chosen(*rank))
            .collect();
        let count = u32::try_from(here.len()).unwrap_or(u32::MAX);
        if let Err(e) = launch::check_descriptors(count) {
            return (Vec::new(), Some(e));
        }
        let wdirs: Vec<_> = apps.iter().map(|a| layout::wdir_of(a, &self.cwd)).collect();
        // Each application context's program, found when its first process starts.
        let mut paths: Vec<Option<PathBuf>> = vec![None; apps.len()];
        // Per application context: the extra variables an Open MPI program needs.
        let mut ompi_env: Vec<Vec<(String, String)>> = vec![Vec::new(); apps.len()];
        let scrub = launch::launcher_variables();
        let bound = match self.bindings(nspace, ranks) {
            Ok(b) => b,
            Err(e) => return (Vec::new(), Some(LaunchError::other(e))),
        };
        let node_job = NodeJob {
            size: layout.size,
            local_size: u32::try_from(ranks.len()).unwrap_or(u32::MAX),
            group_rank: self.group_rank,
            groups: self.groups,
            run_id: nspace.to_string(),
            master_addr: self.master_addr.clone(),
            master_port: launcher_env::master_port(
                self.place.master_port,
                nspace,
                self.free_master_port,
            ),
        };
        // Every process's setup (a round trip to the server thread or two each) is done before
        // the first process starts: once started, processes compete for the CPUs the server
        // thread and this one need, and early MPI ranks spin waiting for the late ones.
        let mut setups = Vec::with_capacity(here.len());
        for &(_, rank) in &here {
            let proc = Proc::new(nspace.clone(), rank);
            let setup = match self.pmi {
                p if !p.is_pmi() => self.server.setup_fork(&proc).map(|env| (env, None)),
                p => {
                    let transport = if p.over_port() {
                        PmiTransport::Port
                    } else {
                        PmiTransport::Fd
                    };
                    self.server
                        .setup_fork_pmi1(&proc, transport)
                        .map(|f| (f.env, f.fd))
                }
            };
            match setup {
                Ok(s) => setups.push((proc, s)),
                Err(e) => {
                    let e = LaunchError::other(format!("cannot set up {proc}: {e}"));
                    return (Vec::new(), Some(e));
                }
            }
        }
        // For the same reason every process is started, back to back, before any is watched
        // (three threads each): the last rank execs as early as it can.
        let mut children = Vec::with_capacity(here.len());
        let mut failed = None;
        for (&(local, rank), (proc, (mut pmix_env, pmi_fd))) in here.iter().zip(setups) {
            let a = layout.app_of(rank);
            let here = bound.as_ref().and_then(|b| b.get(local as usize));
            if self.place.report_bindings {
                if let Some(b) = here {
                    launch::write_log(
                        false,
                        &format!(
                            "pmixrun: [{}:{rank}] {}",
                            self.server.hostname(),
                            b.describe()
                        ),
                    );
                }
            }
            if paths[a].is_none() {
                match launch::check_app(&apps[a], &wdirs[a], &user_env[a]) {
                    Ok(path) => {
                        if matches!(self.pmi, Protocol::Pmix | Protocol::Auto)
                            && crate::plan::detect::is_open_mpi(&path)
                        {
                            ompi_env[a] = crate::plan::detect::open_mpi_env(
                                self.server.hostname(),
                                std::process::id(),
                            );
                        }
                        paths[a] = Some(path)
                    }
                    Err(e) => {
                        failed = Some(e);
                        break;
                    }
                }
            }
            let Some(path) = &paths[a] else { break };
            pmix_env.extend(ompi_env[a].iter().cloned());
            let spawn = launch::Spawn {
                path,
                app: &apps[a],
                user_env: &user_env[a],
                scrub: &scrub,
                pmix_env,
                launcher_env: if self.place.launcher_env {
                    node_job.vars(rank, local)
                } else {
                    Vec::new()
                },
                pin: here.filter(|b| b.pinned).map(Bound::cpuset),
                pmi_fd,
                wdir: &wdirs[a],
                stdin: tag == 0 && self.stdin.as_ref().is_some_and(|(t, _)| t.takes(rank)),
            };
            let exe = path.to_string_lossy().into_owned();
            match launch::start(spawn) {
                Ok(child) => {
                    if let Err(e) = self.server.client_started(&proc, child.id()) {
                        tracing::warn!(%proc, "cannot tell the server its pid: {e}");
                    }
                    children.push((proc, child, exe));
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        let mut pids = Vec::with_capacity(children.len());
        let mut children = children.into_iter();
        for (proc, child, exe) in children.by_ref() {
            let router = self.stdin.as_ref().map(|(_, r)| &**r);
            match launch::watch(child, &proc, tag, &self.events, &self.lines, router) {
                Ok(pid) => {
                    tracing::debug!(%proc, %pid, "started");
                    let rank = proc.rank.0;
                    pids.push(Launched { rank, pid, exe });
                }
                Err(e) => {
                    // Those of later ranks were started but are watched by nobody.
                    failed = Some(e);
                    break;
                }
            }
        }
        children.for_each(|(_, child, _)| launch::abandon(child));
        (pids, failed)
    }
}

impl Jobs for RunJobs<'_> {
    fn spawn(
        &mut self,
        parent: &Proc,
        job_info: &[Info],
        apps: &[pmix_server::App],
    ) -> Result<Started, SpawnFailed> {
        let refuse = |status, message| SpawnFailed {
            status,
            message,
            partial: None,
        };
        if let Some(m) = crate::plan::debug::refused(job_info) {
            return Err(refuse(Status::ERR_NOT_SUPPORTED, m));
        }
        crate::node::capacity::check_spawn(apps, crate::node::capacity::max_procs())
            .map_err(|m| refuse(Status::ERR_OUT_OF_RESOURCE, m))?;
        // One node: debugger daemons' target is on it.
        let asked = crate::plan::debug::apps(apps, job_info, 1)
            .map_err(|m| refuse(Status::ERR_BAD_PARAM, m))?
            .apps;
        let (apps, layout) =
            job::spawn_job(&asked, job_info).map_err(|m| refuse(Status::ERR_BAD_PARAM, m))?;
        // One node: its directives can only name it, and say how it binds.
        let this = NodeList::this_machine(self.server.hostname());
        let placed = spawn_placement::place_spawn(
            job_info,
            &asked,
            &layout,
            &this,
            &SlotUsage::new(&this),
            true,
            self.place,
            self.server.hostname(),
        )
        .map_err(|r| refuse(r.status, r.message))?;
        // What can be checked before anything is registered or started, is.
        let user_env: Vec<_> = apps.iter().map(launch::app_env).collect();
        for (app, env) in apps.iter().zip(&user_env) {
            let wdir = layout::wdir_of(app, &self.cwd);
            if !wdir.is_dir() {
                return Err(refuse(
                    Status::ERR_JOB_WDIR_NOT_FOUND,
                    format!("working directory {}: not a directory", wdir.display()),
                ));
            }
            launch::check_app(app, &wdir, env).map_err(|e| refuse(e.status, e.message))?;
        }
        self.spawned += 1;
        let n = self.spawned;
        let nspace = job::spawned_nspace(&self.first, n)
            .map_err(|m| refuse(Status::ERR_JOB_FAILED_TO_LAUNCH, m))?;
        let extra = job::spawned_info(parent, job_info, layout.size);
        if placed.place != self.place {
            self.job_places.insert(nspace.clone(), placed.place);
        }
        if let Err(message) = self.register(&nspace, &apps, &layout, extra) {
            return Err(SpawnFailed {
                status: Status::ERR_JOB_FAILED_TO_LAUNCH,
                message,
                partial: Some(Started {
                    nspace,
                    size: layout.size,
                    procs: Vec::new(),
                }),
            });
        }
        match self.start(&nspace, n, &apps, &layout, &user_env) {
            (procs, None) => Ok(Started {
                nspace,
                size: layout.size,
                procs,
            }),
            (procs, Some(e)) => Err(SpawnFailed {
                status: e.status,
                message: e.message,
                partial: Some(Started {
                    nspace,
                    size: layout.size,
                    procs,
                }),
            }),
        }
    }

    fn signal(&mut self, _proc: &Proc, pid: Pid, sig: Signal) {
        launch::signal(pid, sig);
    }

    fn restart(&mut self, proc: &Proc, reincarnation: u32) -> Result<Launched, String> {
        let Some(l) = self.launched.get(&proc.nspace) else {
            return Err(format!("how {} was started is not known", proc.nspace));
        };
        let all: Vec<u32> = (0..l.layout.size).collect();
        self.restart_rank(proc, reincarnation, l, &all)
    }

    fn has_ended(&mut self, _proc: &Proc, pid: Pid) -> bool {
        launch::has_ended(pid)
    }

    fn hear_out(&mut self, proc: &Proc) -> bool {
        let events = self.events.clone();
        let who = proc.clone();
        self.server.settle_client(proc, move || {
            let _ = events.send(Event::ClientSettled(who));
        });
        true
    }

    fn proc_ended(&mut self, proc: &Proc) {
        // What a process published to last as long as it does goes when it ends.
        if let Some(ns) = &self.names {
            ns.proc_ended(proc);
        }
        // Fences and gets waiting for a process that never connected fail rather than hang.
        let _ = self.server.client_ended(proc);
    }

    fn job_ended(&mut self, nspace: &Nspace) {
        tracing::debug!(%nspace, "job ended");
        // Its process sets end with it: raised as PROCESS_SET_DELETE to whoever registered.
        let sets = self
            .psets
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(nspace);
        for name in sets.unwrap_or_default() {
            if let Err(e) = self.server.delete_process_set(&name) {
                tracing::debug!(%nspace, %name, "process set not deleted: {e}");
            }
        }
        self.server.deregister_nspace(nspace);
        self.job_places.remove(nspace);
        { self.claims.lock() }
            .unwrap_or_else(PoisonError::into_inner)
            .release(nspace.as_str());
        if let Some(ns) = &self.names {
            ns.nspace_ended(nspace);
        }
    }

    fn notify(&mut self, code: Status, info: &[Info]) {
        let me = self.server.proc();
        let _ = self
            .server
            .notify_event(code, &me, pmix_server::types::DataRange::CUSTOM, info);
    }

    fn node_of(&self, _proc: &Proc) -> Option<String> {
        None
    }

    fn host_of(&self, _proc: &Proc) -> String {
        self.server.hostname().to_owned()
    }
}
