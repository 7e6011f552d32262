//! What pmixrun tells its server about a job: the information `register_nspace` takes.
//!
//! Only what the launcher knows and the server cannot derive is given: sizes, the node and
//! process maps of the job's nodes, and each application context. The number of nodes, each
//! node's local peers and leader, each rank's node id, hostname, local and node rank, app
//! ranks and the like are derived by the server from these (see pmix-server's registration,
//! `engine/nspace.rs`), so they are not repeated here. A spawned job is described the same way, from the spawn request's
//! application contexts, plus what tells its processes they were spawned ([`spawned_info`]).

use std::path::{Path, PathBuf};

use pmix_types::{DataArray, Info, Nspace, Proc, Rank, Value, attr};

use crate::cli::{self, App};
use crate::plan::layout::{Layout, wdir_of};
use crate::plan::placement::JobMap;

/// The job's registration information, the job placed as `map` says (a job on this node
/// alone: [`JobMap::one_node`]).
pub(crate) fn job_info(
    map: &JobMap,
    apps: &[App],
    layout: &Layout,
    cwd: &Path,
) -> Result<Vec<Info>, String> {
    let nodes = pmix_regex::generate_regex(&map.names)
        .map_err(|e| format!("cannot describe the nodes {:?}: {e}", map.names))?;
    let ppn = pmix_regex::generate_ppn(&map.ranks)
        .map_err(|e| format!("cannot describe the process map: {e}"))?;
    let napps = u32::try_from(apps.len()).map_err(|_| "too many application contexts")?;
    let mut info = vec![
        Info::attr(attr::JOB_SIZE, layout.size),
        Info::attr(attr::MAX_PROCS, layout.size),
        Info::attr(attr::UNIV_SIZE, layout.size),
        Info::attr(attr::JOB_NUM_APPS, napps),
        Info::attr(attr::NODE_MAP, Value::Regex(nodes)),
        Info::attr(attr::PROC_MAP, Value::Regex(ppn)),
    ];
    for (appnum, (app, first)) in (0u32..).zip(apps.iter().zip(&layout.firsts)) {
        let argv: Vec<String> = std::iter::once(&app.program)
            .chain(&app.args)
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let app_info = DataArray::from_infos(
            [
                Info::attr(attr::APPNUM, appnum),
                Info::attr(attr::APP_SIZE, app.np),
                Info::attr(attr::MAX_PROCS, app.np),
                Info::attr(attr::APPLDR, Rank(*first)),
                Info::attr(attr::WDIR, wdir_of(app, cwd).to_string_lossy().into_owned()),
                Info::attr(attr::APP_ARGV, argv.join(" ")),
            ]
            .into_iter()
            .chain(
                app.pset
                    .iter()
                    .map(|p| Info::attr(attr::PSET_NAME, p.as_str())),
            ),
        );
        info.push(Info::attr(attr::APP_INFO_ARRAY, app_info));
    }
    // Each rank's set in its own data as well: libpmix 4.2 finds no application-level value
    // for a rank, and 5.0 none for the ranks of a later application.
    for (app, first) in apps.iter().zip(&layout.firsts) {
        let Some(pset) = &app.pset else { continue };
        for r in *first..*first + app.np {
            let own = DataArray::from_infos([
                Info::attr(attr::RANK, Rank(r)),
                Info::attr(attr::PSET_NAME, pset.as_str()),
            ]);
            info.push(Info::attr(attr::PROC_DATA, own));
        }
    }
    // The process sets the applications form, for queries.
    let mut psets: Vec<&str> = Vec::new();
    for p in apps.iter().filter_map(|a| a.pset.as_deref()) {
        if !psets.contains(&p) {
            psets.push(p);
        }
    }
    if !psets.is_empty() {
        info.push(Info::attr(attr::PSET_NAMES, psets.join(",")));
    }
    Ok(info)
}

/// The process sets a job's registration information `info` ([`job_info`]) puts the
/// processes of `nspace` in (each rank's `PSET_NAME` in its `PROC_DATA`), with their members
/// in rank order, the sets in the order their first members come: what pmixrun defines on
/// its server (`Server::define_process_set`) when it registers the job.
pub(crate) fn process_sets(nspace: &Nspace, info: &[Info]) -> Vec<(String, Vec<Proc>)> {
    let mut own: Vec<(Rank, &str)> = info
        .iter()
        .filter(|i| i.key.as_str() == attr::PROC_DATA)
        .filter_map(|i| {
            let infos = i.value.as_array()?.infos();
            let (mut rank, mut set) = (None, None);
            for x in infos {
                match x.key.as_str() {
                    attr::RANK => rank = x.value.as_rank(),
                    attr::PSET_NAME => set = x.value.as_str(),
                    _ => {}
                }
            }
            Some((rank?, set?))
        })
        .collect();
    own.sort_unstable_by_key(|(r, _)| *r);
    let mut sets: Vec<(String, Vec<Proc>)> = Vec::new();
    for (rank, set) in own {
        let member = Proc::new(nspace.clone(), rank);
        match sets.iter_mut().find(|(name, _)| name == set) {
            Some((_, members)) => members.push(member),
            None => sets.push((set.to_owned(), vec![member])),
        }
    }
    sets
}

/// The application contexts of a spawn request, as if given on pmixrun's command line.
///
/// `argv[0]` is the program's name as the standard says, but the program started is `cmd`
/// and sees `cmd` as its `argv[0]`. An `env` entry `NAME=value` sets `NAME`; `NAME` alone
/// passes pmixrun's own value on, like `-x NAME`. An empty `cwd` means pmixrun's directory, a
/// relative one is relative to it.
///
/// The directives a single node can honour are applied, an app's own `info` over the job's:
/// `PMIX_WDIR` and `PMIX_SET_ENVAR` (after the app's `env`). The working directory is the
/// app's own `PMIX_WDIR`, else its `cwd`, else the job's `PMIX_WDIR`: Open MPI 5 sends every
/// app of `MPI_Comm_spawn_multiple` with the parent's directory as its `cwd` and the `wdir`
/// info key as the app's `PMIX_WDIR`, which PRRTE lets override the `cwd`.
pub(crate) fn spawn_apps(apps: &[pmix_server::App], job_info: &[Info]) -> Result<Vec<App>, String> {
    // The server passes an application without a process count on: a host may derive one
    // (pmixrun does for debugger daemons, `debug.rs`); left at none, it is refused here.
    if let Some((n, a)) = apps.iter().enumerate().find(|(_, a)| a.maxprocs == 0) {
        return Err(format!("application {n} ({}) asks for no processes", a.cmd));
    }
    apps.iter()
        .map(|a| {
            let mut env: Vec<_> = a
                .env
                .iter()
                .map(|e| {
                    cli::parse_env(e.as_ref())
                        .map_err(|_| format!("environment entry {e:?} names no variable"))
                })
                .collect::<Result<_, _>>()?;
            for i in a.info.iter().chain(job_info) {
                if i.key.as_str() == attr::SET_ENVAR {
                    match &i.value {
                        Value::Envar(e) if !e.name.is_empty() && !e.name.contains('=') => {
                            env.push((e.name.clone().into(), Some(e.value.clone().into())));
                        }
                        other => return Err(format!("PMIX_SET_ENVAR {other:?} is not a variable")),
                    }
                }
            }
            let wdir_in = |info: &[Info]| match info.iter().find(|i| i.key.as_str() == attr::WDIR) {
                Some(Info {
                    value: Value::String(d),
                    ..
                }) => Ok(Some(PathBuf::from(d))),
                Some(other) => Err(format!("PMIX_WDIR {:?} is not a path", other.value)),
                None => Ok(None),
            };
            let own_cwd = (!a.cwd.is_empty()).then(|| PathBuf::from(&a.cwd));
            let wdir = match (wdir_in(&a.info)?, own_cwd) {
                (Some(d), _) | (None, Some(d)) => Some(d),
                (None, None) => wdir_in(job_info)?,
            };
            Ok(App {
                np: a.maxprocs,
                program: a.cmd.clone().into(),
                args: a.argv.iter().skip(1).map(Into::into).collect(),
                wdir,
                env,
                pset: a
                    .info
                    .iter()
                    .find(|i| i.key.as_str() == attr::PSET_NAME)
                    .and_then(|i| i.value.as_str())
                    .map(str::to_owned),
            })
        })
        .collect()
}

/// The spawn attributes pmixrun honours ([`spawn_apps`], and the placement directives of
/// `spawn_placement.rs`; the debugger's are in [`crate::plan::debug::SUPPORTED`]), what
/// `PMIX_QUERY_SPAWN_SUPPORT` answers. Entries of the job information outside the `pmix`
/// prefix are passed to the children as job data.
pub(crate) const SPAWN_ATTRIBUTES: [&str; 9] = [
    attr::WDIR,
    attr::SET_ENVAR,
    attr::PSET_NAME,
    attr::HOST,
    attr::HOSTFILE,
    attr::ADD_HOST,
    attr::ADD_HOSTFILE,
    attr::MAPBY,
    attr::BINDTO,
];

/// A spawn request as a job: its application contexts ([`spawn_apps`]) and their layout.
pub(crate) fn spawn_job(
    apps: &[pmix_server::App],
    job_info: &[Info],
) -> Result<(Vec<App>, Layout), String> {
    let apps = spawn_apps(apps, job_info)?;
    let layout = Layout::new(&apps)?;
    Ok((apps, layout))
}

/// The namespace of the run's `n`-th spawned job: `<first>.<n>`.
pub(crate) fn spawned_nspace(
    first: &pmix_types::Nspace,
    n: u32,
) -> Result<pmix_types::Nspace, String> {
    pmix_types::Nspace::new(format!("{first}.{n}")).map_err(|e| format!("cannot name the job: {e}"))
}

/// What the registration of a spawned job of `size` processes adds to [`job_info`]: who
/// spawned it (`PMIX_PARENT_ID`, in each rank's own data: a per-process attribute, which a
/// process asks of its own name; at the job level, as PRRTE, it is not found), that it was
/// spawned (`PMIX_SPAWNED`, at the job level and in each rank's own data, where the server
/// would otherwise derive `false`), and
/// every entry of the request's job information that is not a `pmix` directive: data the
/// parent preloaded for its children, which they read with a get of their own namespace's
/// rank `WILDCARD`.
pub(crate) fn spawned_info(parent: &Proc, job_info: &[Info], size: u32) -> Vec<Info> {
    let mut info = vec![Info::attr(attr::SPAWNED, true)];
    info.extend((0..size).map(|r| {
        let own = DataArray::from_infos([
            Info::attr(attr::RANK, Rank(r)),
            Info::attr(attr::SPAWNED, true),
            Info::attr(attr::PARENT_ID, parent.clone()),
        ]);
        Info::attr(attr::PROC_DATA, own)
    }));
    info.extend(
        job_info
            .iter()
            .filter(|i| !i.key.as_str().starts_with("pmix"))
            .cloned(),
    );
    info.extend(crate::plan::debug::job_data(job_info));
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(np: u32, program: &str) -> App {
        App {
            np,
            program: program.into(),
            args: vec!["x y".into()],
            wdir: None,
            env: vec![],
            pset: None,
        }
    }

    #[test]
    fn app_contexts_follow_each_other() {
        let apps = [app(2, "a"), app(3, "b"), app(1, "c")];
        let l = Layout::new(&apps).map_err(|e| e.to_string());
        assert_eq!(
            l,
            Ok(Layout {
                firsts: vec![0, 2, 5],
                size: 6
            })
        );
        let l = Layout::new(&apps).unwrap_or_else(|e| panic!("{e}"));
        let owners: Vec<usize> = (0..6).map(|r| l.app_of(r)).collect();
        assert_eq!(owners, [0, 0, 1, 1, 1, 2]);
        assert!(Layout::new(&[app(u32::MAX, "a"), app(1, "b")]).is_err());
    }

    #[test]
    fn one_app_info_array_per_app_context() {
        let mut apps = [app(2, "a"), app(3, "b")];
        apps[1].wdir = Some("sub".into());
        let l = Layout::new(&apps).unwrap_or_else(|e| panic!("{e}"));
        let map = JobMap::one_node("node1", l.size);
        let info =
            job_info(&map, &apps, &l, Path::new("/home/u")).unwrap_or_else(|e| panic!("{e}"));
        let get = |infos: &[Info], k: &str| {
            infos
                .iter()
                .find(|i| i.key.as_str() == k)
                .map(|i| i.value.clone())
        };
        assert_eq!(get(&info, attr::JOB_SIZE), Some(Value::Uint32(5)));
        assert_eq!(get(&info, attr::JOB_NUM_APPS), Some(Value::Uint32(2)));
        let arrays: Vec<Vec<Info>> = info
            .iter()
            .filter(|i| i.key.as_str() == attr::APP_INFO_ARRAY)
            .filter_map(|i| i.value.as_array().map(|a| a.infos().cloned().collect()))
            .collect();
        assert_eq!(arrays.len(), 2);
        assert_eq!(get(&arrays[1], attr::APPNUM), Some(Value::Uint32(1)));
        assert_eq!(get(&arrays[1], attr::APP_SIZE), Some(Value::Uint32(3)));
        assert_eq!(get(&arrays[1], attr::APPLDR), Some(Value::Rank(Rank(2))));
        assert_eq!(
            get(&arrays[1], attr::WDIR),
            Some(Value::String("/home/u/sub".into()))
        );
        assert_eq!(
            get(&arrays[0], attr::APP_ARGV),
            Some(Value::String("a x y".into()))
        );
    }

    #[test]
    fn process_sets_are_named_by_app_and_by_rank() {
        let mut apps = [app(1, "a"), app(2, "b"), app(1, "c")];
        apps[0].pset = Some("s1".into());
        apps[1].pset = Some("s2".into());
        apps[2].pset = Some("s1".into());
        let l = Layout::new(&apps).unwrap_or_else(|e| panic!("{e}"));
        let map = JobMap::one_node("node1", l.size);
        let info = job_info(&map, &apps, &l, Path::new("/")).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<&Value> = info
            .iter()
            .filter(|i| i.key.as_str() == attr::PSET_NAMES)
            .map(|i| &i.value)
            .collect();
        assert_eq!(names, [&Value::String("s1,s2".into())]);
        // Each rank's own data names its set.
        let job = pmix_types::Nspace::new("j").unwrap_or_else(|e| panic!("{e}"));
        let sets = process_sets(&job, &info);
        let members = |ranks: &[u32]| -> Vec<Proc> {
            ranks.iter().map(|r| Proc::new(job.clone(), *r)).collect()
        };
        assert_eq!(
            sets,
            vec![
                ("s1".to_owned(), members(&[0, 3])),
                ("s2".to_owned(), members(&[1, 2])),
            ]
        );
    }

    #[test]
    fn a_job_on_three_nodes_has_their_maps_and_registers() {
        use crate::plan::placement::{NodeList, Placement};
        let apps = [app(3, "a"), app(2, "b")];
        let l = Layout::new(&apps).unwrap_or_else(|e| panic!("{e}"));
        let nodes =
            NodeList::parse_hosts(&["n1:2,n2:2,n3:2".into()]).unwrap_or_else(|e| panic!("{e}"));
        let p =
            Placement::map(&nodes, &l, cli::MapBy::Node, false).unwrap_or_else(|e| panic!("{e}"));
        let map = p.job_map(&nodes);
        let info = job_info(&map, &apps, &l, Path::new("/")).unwrap_or_else(|e| panic!("{e}"));
        let get = |k: &str| info.iter().find(|i| i.key.as_str() == k).map(|i| &i.value);
        let Some(Value::Regex(node_map)) = get(attr::NODE_MAP) else {
            panic!("{info:?}")
        };
        let Some(Value::Regex(proc_map)) = get(attr::PROC_MAP) else {
            panic!("{info:?}")
        };
        assert_eq!(
            pmix_regex::parse_regex(node_map).map_err(|e| e.to_string()),
            Ok(vec!["n1".to_owned(), "n2".into(), "n3".into()])
        );
        let ranks = pmix_regex::parse_ppn(proc_map).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ranks, [vec![0, 3], vec![1, 4], vec![2]]);
        // The server derives these from the maps; giving them too would be giving them twice.
        for derived in [attr::NUM_NODES, attr::LOCAL_PEERS, attr::HOSTNAME] {
            assert!(get(derived).is_none(), "{derived} given");
        }

        // A server on n2 takes the job, its maps agreeing with each other and with the size.
        let (events, _rx) = crossbeam_channel::unbounded();
        let server = pmix_server::Server::init(
            crate::node::host::RunHost::new(events, None),
            pmix_server::ServerOptions {
                hostname: Some("n2".into()),
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let ns = |n: &str| pmix_types::Nspace::new(n).unwrap_or_else(|e| panic!("{e}"));
        let local = u32::try_from(p.ranks_on(1).len()).unwrap_or_else(|e| panic!("{e}"));
        let registered = server.register_nspace(&ns("three"), local, &info);
        // The same job with a map that lost a node is refused: the check above means something.
        let mut short = map.clone();
        short.ranks.pop();
        let info = job_info(&short, &apps, &l, Path::new("/")).unwrap_or_else(|e| panic!("{e}"));
        let refused = server.register_nspace(&ns("short"), local, &info);
        let _ = server.finalize();
        assert!(registered.is_ok(), "{registered:?}");
        assert!(refused.is_err(), "{refused:?}");
    }

    #[test]
    fn spawn_requests_become_app_contexts() {
        let req = pmix_server::App {
            cmd: "./child".into(),
            argv: vec!["child-name".into(), "a".into(), "b c".into()],
            env: vec!["X=1=2".into(), "PATH".into()],
            cwd: String::new(),
            maxprocs: 3,
            info: vec![],
        };
        let mut other = req.clone();
        other.cwd = "sub".into();
        other.argv.clear();
        let apps = spawn_apps(&[req.clone(), other], &[]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            apps[0],
            App {
                np: 3,
                program: "./child".into(),
                args: vec!["a".into(), "b c".into()],
                wdir: None,
                env: vec![("X".into(), Some("1=2".into())), ("PATH".into(), None)],
                pset: None,
            }
        );
        assert_eq!(apps[1].wdir, Some(PathBuf::from("sub")));
        assert!(apps[1].args.is_empty());
        let mut bad = req.clone();
        bad.env = vec!["=x".into()];
        assert!(spawn_apps(&[bad], &[]).is_err());
    }

    #[test]
    fn spawn_directives_a_node_can_honour() {
        let envar = |n: &str, v: &str| {
            Value::Envar(pmix_types::Envar {
                name: n.into(),
                value: v.into(),
                separator: 0,
            })
        };
        let mut a = pmix_server::App {
            cmd: "./child".into(),
            argv: vec!["child".into()],
            env: vec!["A=1".into()],
            cwd: String::new(),
            maxprocs: 1,
            info: vec![Info::attr(attr::WDIR, "/app-dir")],
        };
        let job = [
            Info::attr(attr::WDIR, "/job-dir"),
            Info::attr(attr::SET_ENVAR, envar("B", "2")),
        ];
        let apps = spawn_apps(std::slice::from_ref(&a), &job).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            apps[0].wdir,
            Some(PathBuf::from("/app-dir")),
            "the app's own wins"
        );
        assert_eq!(
            apps[0].env,
            vec![
                ("A".into(), Some("1".into())),
                ("B".into(), Some("2".into()))
            ]
        );
        a.info.clear();
        let apps = spawn_apps(std::slice::from_ref(&a), &job).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(apps[0].wdir, Some(PathBuf::from("/job-dir")));
        a.cwd = "given".into();
        let apps = spawn_apps(std::slice::from_ref(&a), &job).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            apps[0].wdir,
            Some(PathBuf::from("given")),
            "cwd wins over the job's PMIX_WDIR"
        );
        // Open MPI 5's MPI_Comm_spawn_multiple: the parent's directory as cwd, the app's
        // `wdir` info key as its PMIX_WDIR.
        a.info = vec![Info::attr(attr::WDIR, "/wdir-key")];
        let apps = spawn_apps(std::slice::from_ref(&a), &job).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            apps[0].wdir,
            Some(PathBuf::from("/wdir-key")),
            "the app's own PMIX_WDIR wins over its cwd"
        );
        a.info = vec![Info::attr(attr::WDIR, 3u32)];
        assert!(spawn_apps(std::slice::from_ref(&a), &job).is_err());
        let bad = [Info::attr(attr::SET_ENVAR, "B=2")];
        assert!(spawn_apps(std::slice::from_ref(&a), &bad).is_err());
    }

    #[test]
    fn spawned_jobs_learn_their_parent_and_preloaded_data() {
        let parent = Proc::new(
            pmix_types::Nspace::new("p").unwrap_or_else(|e| panic!("{e}")),
            2,
        );
        let user = |k: &str, v: &str| {
            Info::new(pmix_types::Key::new(k).unwrap_or_else(|e| panic!("{e}")), v)
        };
        let given = [
            user("port.name", "tcp://x"),
            Info::attr(attr::WDIR, "/tmp"),
            user("pmix.private", "dropped"),
        ];
        let info = spawned_info(&parent, &given, 2);
        let keys: Vec<&str> = info.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(
            keys,
            [attr::SPAWNED, attr::PROC_DATA, attr::PROC_DATA, "port.name"]
        );
        assert_eq!(info[0].value, Value::Bool(true));
        let second: Vec<Info> = info[2]
            .value
            .as_array()
            .map(|a| a.infos().cloned().collect())
            .unwrap_or_default();
        assert_eq!(
            second,
            [
                Info::attr(attr::RANK, Rank(1)),
                Info::attr(attr::SPAWNED, true),
                Info::attr(attr::PARENT_ID, parent)
            ]
        );
    }
}
