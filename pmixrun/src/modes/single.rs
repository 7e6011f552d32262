//! `pmixrun PROGRAM…` on one node: a PMIx server, the job registered and started here, and
//! the supervisor until every job has ended.

use std::sync::Arc;

use crossbeam_channel::unbounded;
use pmix_server::types::{Info, Nspace, Rank, attr};
use signal_hook::iterator::Signals;

use crate::cli;
use crate::multinode::root;
use crate::node::jobs::RunJobs;
use crate::node::output::{self, OUTPUT_DRAIN};
use crate::node::{launch, stdin};
use crate::plan::{detect, interpreter, layout, placement};
use crate::setup::{connect_nameserver, start_server, start_signal_thread};
use crate::supervise::Supervisor;

/// Everything before the first process starts; an error here is a one-line message.
pub(crate) fn run(mut opts: cli::Options, signals: Signals) -> Result<u8, String> {
    // The nodes: those named, else those of the Slurm allocation pmixrun runs in (unless
    // told to stay on this machine), else this machine alone.
    let named = placement::NodeList::from_options(&opts.nodes)?;
    let from_allocation = named.is_none() && opts.nodes.launcher != Some(cli::Launcher::Local);
    let nodes = match named {
        Some(n) => Some(n),
        None if from_allocation => placement::NodeList::from_allocation()?,
        None if opts.nodes.launcher == Some(cli::Launcher::Slurm) => {
            return Err(
                "--launcher slurm: not inside a Slurm allocation (no SLURM_JOB_NODELIST)".into(),
            );
        }
        None => None,
    };
    // Not told how many processes: one per slot of the nodes named or allocated (as mpirun
    // and srun start in an allocation), for a run of one application context.
    if let (false, [only], Some(nodes)) = (opts.counts_given, opts.apps.as_mut_slice(), &nodes) {
        only.np = u32::try_from(nodes.total_slots())
            .unwrap_or(u32::MAX)
            .max(1);
    }
    let layout = layout::Layout::new(&opts.apps)?;
    let nodes = match nodes {
        Some(nodes) => {
            let n = &opts.nodes;
            let placement = placement::Placement::map(&nodes, &layout, n.map_by, n.oversubscribe)?;
            Some((nodes, placement))
        }
        None => None,
    };
    let cwd = std::env::current_dir().map_err(|e| {
        format!(
            "cannot find the current directory: {}",
            launch::describe(&e)
        )
    })?;
    for app in &opts.apps {
        let dir = layout::wdir_of(app, &cwd);
        if app.wdir.is_some() && !dir.is_dir() {
            return Err(format!("--wdir {}: not a directory", dir.display()));
        }
    }
    let user_env: Vec<_> = opts.apps.iter().map(launch::app_env).collect();
    let pmi = match opts.pmi {
        cli::Protocol::Auto => {
            // A PMI program (libpmi2, MPICH; or a Python program whose mpi4py will load
            // MPICH) anywhere in the job makes it a PMI job.
            let pmi = opts.apps.iter().zip(&user_env).find_map(|(app, env)| {
                let wdir = layout::wdir_of(app, &cwd);
                let path = launch::find_program(&app.program, &wdir, env).ok()?;
                let linked = detect::protocol_of(&path);
                if linked.is_pmi() {
                    return Some(linked);
                }
                let ld_path = env
                    .iter()
                    .rev()
                    .find(|(k, _)| k == "LD_LIBRARY_PATH")
                    .map(|(_, v)| v.clone())
                    .or_else(|| std::env::var_os("LD_LIBRARY_PATH"));
                let find = |name: &std::ffi::OsStr| launch::find_program(name, &wdir, env).ok();
                interpreter::mpi_protocol(&path, ld_path.as_deref(), find).filter(|p| p.is_pmi())
            });
            match pmi {
                Some(p) => {
                    tracing::debug!("PMI program: speaking {p:?}");
                    p
                }
                None => cli::Protocol::Pmix,
            }
        }
        p => p,
    };

    if opts.stop_in_init && pmi.is_pmi() {
        return Err(
            "--stop-in-init: PMI-1 and PMI-2 processes have no PMIx init to hold them in".into(),
        );
    }
    let names = connect_nameserver(opts.nameserver_uri.as_deref())?;
    if let Some((nodes, placement)) = nodes {
        let r = root::RootRun {
            opts,
            nodes,
            placement,
            layout,
            cwd,
            user_env,
            pmi,
            names,
            from_allocation,
        };
        return root::run(r, signals);
    }
    let (events_tx, events) = unbounded();
    start_signal_thread(signals, events_tx.clone())?;
    let nspace = Nspace::new(format!("rs-pmixrun-{}", std::process::id()))
        .map_err(|e| format!("cannot name the job: {e}"))?;
    let router = stdin::Router::new();
    router.set_first(nspace.clone());
    let server = Arc::new(start_server(
        &events_tx,
        names.as_ref(),
        Some(router.clone()),
        opts.system_server,
    )?);

    let (lines_tx, lines) = unbounded();
    let jobs = RunJobs {
        server: &server,
        names,
        cwd,
        first: nspace.clone(),
        spawned: 0,
        events: events_tx,
        lines: lines_tx,
        pmi,
        place: opts.place,
        group_rank: 0,
        groups: 1,
        master_addr: server.hostname().to_owned(),
        free_master_port: true,
        stdin: Some((opts.stdin, router.clone())),
        psets: Default::default(),
        claims: Default::default(),
        job_places: std::collections::HashMap::new(),
        launched: Default::default(),
    };
    let debug = opts
        .stop_in_init
        .then(|| Info::attr(attr::DEBUG_STOP_IN_INIT, Rank::WILDCARD));
    jobs.register(&nspace, &opts.apps, &layout, debug.into_iter().collect())?;
    let tools = output::to_tools(server.clone(), nspace.clone());
    let output_done = output::start_writer(opts.tag_output, lines, None, Some(tools))
        .map_err(|e| format!("cannot start the output thread: {}", launch::describe(&e)))?;
    let mut sup = Supervisor::new(jobs, opts.timeout);
    sup.set_grace(opts.grace);
    sup.set_max_spawn_depth(opts.max_spawn_depth);
    sup.set_recovery(opts.enable_recovery);
    sup.set_max_restarts(opts.max_restarts);
    let job = sup.add_job(nspace.clone(), layout.size);
    let (procs, failed) = sup
        .jobs_mut()
        .start(&nspace, 0, &opts.apps, &layout, &user_env);
    for l in procs {
        sup.started(job, l);
    }
    if let Some(e) = failed {
        sup.not_started(job, e.code, &e.message);
    }
    if opts.stdin != stdin::Target::None {
        if stdin::is_background_terminal() {
            tracing::debug!("stdin is a terminal pmixrun is in the background of: not read");
        } else {
            if let Err(e) = router.forward_own_stdin() {
                // The processes are running: they go on without input.
                tracing::warn!("cannot start the stdin thread: {}", launch::describe(&e));
            }
        }
    }
    // The supervisor holds the last senders of output (for spawned jobs) apart from the
    // readers': once it is done, the writer ends when the last pipe closes.
    let status = sup.run(&events);
    if output_done.recv_timeout(OUTPUT_DRAIN).is_err() {
        tracing::warn!("output still open after every process ended; not waiting for it");
    }
    if let Err(e) = server.finalize() {
        tracing::warn!("finalizing the server: {e}");
    }
    Ok(status)
}
