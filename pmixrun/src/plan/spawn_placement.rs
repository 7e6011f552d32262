//! A spawn's placement directives (`PMIX_HOST`, `PMIX_HOSTFILE`, `PMIX_ADD_HOST`,
//! `PMIX_ADD_HOSTFILE`, `PMIX_MAPBY`, `PMIX_BINDTO`), read from its job information and each
//! application's: what [`Placement::spawn`](crate::plan::placement::Placement::spawn) and
//! the binding of the new job do with them, or why the spawn is refused.
//!
//! # The rules
//!
//! - `PMIX_HOST` (a `--host` list; slot counts in it are not read) and `PMIX_HOSTFILE` (a
//!   hostfile's path) in an application's own information restrict it to those nodes; in the
//!   job's, every application that names none itself. A name is a node of the run, or, for
//!   a node that is this machine, `localhost` or this machine's name. A name that is none of
//!   the run's nodes is refused with `PMIX_ERR_NOT_FOUND`.
//! - `PMIX_ADD_HOST` and `PMIX_ADD_HOSTFILE` naming nodes already in the run are honoured
//!   (there is nothing to add); a run does not take new nodes once started.
//! - `PMIX_MAPBY`: `slot`, `node`, `ppr:N:node`, `core`, `package` (`socket`), `numa` (as
//!   `slot` across nodes, then each node's processes to those objects in turn, as
//!   `--map-by`), with the modifiers `OVERSUBSCRIBE` and `NOOVERSUBSCRIBE`; case does not
//!   matter. `PMIX_BINDTO`: `none`, `core`, `package` (`socket`), `numa`. The job's own, else
//!   the first application's that gives one.
//! - What cannot be honoured (another mapping, `ppr` over another object, another modifier,
//!   binding to hardware threads or caches, a host to add) fails the spawn with
//!   `PMIX_ERR_NOT_SUPPORTED` and a message naming the attribute when it is marked required,
//!   and is otherwise left out, with a note in pmixrun's `-v` log. A value of the wrong type
//!   or a hostfile that cannot be read is `PMIX_ERR_BAD_PARAM`.

use pmix_server::App;
use pmix_types::{Info, Status, attr};

use crate::cli::{BindTo, Place};
use crate::plan::layout::Layout;
use crate::plan::placement::{
    NodeList, Placement, SlotUsage, SpawnMap, SpawnRules, is_this_machine,
};

/// Why a spawn's directives refuse it: the status its spawn fails with, and what pmixrun
/// says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refused {
    pub(crate) status: Status,
    pub(crate) message: String,
}

fn bad(message: String) -> Refused {
    Refused {
        status: Status::ERR_BAD_PARAM,
        message,
    }
}

/// A spawn's placement, as its directives ask.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SpawnPlacement {
    /// Which nodes each application goes to, and how.
    pub(crate) rules: SpawnRules,
    /// The objects each node's processes go to in turn, when `PMIX_MAPBY` names one kind or
    /// `slot`, `node` or `ppr` (then [`BindTo::None`]).
    pub(crate) map_to: Option<BindTo>,
    /// `PMIX_BINDTO`.
    pub(crate) bind_to: Option<BindTo>,
    /// The optional directives left out, each with why (for the `-v` log).
    pub(crate) ignored: Vec<String>,
}

impl SpawnPlacement {
    /// Where on its node each process of the job runs: the run's `place`, with the spawn's
    /// mapping and binding over it (`--bind-to`'s default is then the mapping's object).
    pub(crate) fn place(&self, run: Place) -> Place {
        let map_to = self.map_to.unwrap_or(run.map_to);
        let bind_to = match (self.bind_to, self.map_to) {
            (Some(b), _) => b,
            (None, Some(m)) if m != BindTo::None => m,
            (None, _) => run.bind_to,
        };
        Place {
            map_to,
            bind_to,
            ..run
        }
    }
}

/// The string value of `info`, or why not.
fn text(info: &Info) -> Result<&str, Refused> {
    info.value
        .as_str()
        .ok_or_else(|| bad(format!("{} {:?} is not a string", name(info), info.value)))
}

/// The attribute's name as the standard writes it (`PMIX_HOST`).
fn name(info: &Info) -> &'static str {
    match info.key.as_str() {
        attr::HOST => "PMIX_HOST",
        attr::HOSTFILE => "PMIX_HOSTFILE",
        attr::ADD_HOST => "PMIX_ADD_HOST",
        attr::ADD_HOSTFILE => "PMIX_ADD_HOSTFILE",
        attr::MAPBY => "PMIX_MAPBY",
        _ => "PMIX_BINDTO",
    }
}

/// The node names a host directive gives: a `--host` list or a hostfile's.
fn names_in(info: &Info) -> Result<Vec<String>, Refused> {
    let value = text(info)?;
    let list = match info.key.as_str() {
        attr::HOSTFILE | attr::ADD_HOSTFILE => NodeList::read_hostfile(value.as_ref()),
        _ => NodeList::parse_hosts(&[value.to_owned()]),
    };
    let list = list.map_err(|e| bad(format!("{}: {e}", name(info))))?;
    Ok(list.names().map(str::to_owned).collect())
}

/// The index of the run's node `wanted` names, if one: the node of that name, else, for a
/// name of this machine, the first node that is this machine.
fn node_named(nodes: &NodeList, wanted: &str, this_host: &str) -> Option<usize> {
    let names: Vec<&str> = nodes.names().collect();
    names.iter().position(|n| *n == wanted).or_else(|| {
        is_this_machine(wanted, this_host)
            .then(|| names.iter().position(|n| is_this_machine(n, this_host)))
            .flatten()
    })
}

/// The nodes a host directive names, as indices into `nodes` (ascending, no repeats).
fn hosts_of(info: &Info, nodes: &NodeList, this_host: &str) -> Result<Vec<usize>, Refused> {
    let mut found = Vec::new();
    for n in names_in(info)? {
        let Some(i) = node_named(nodes, &n, this_host) else {
            let run: Vec<&str> = nodes.names().collect();
            return Err(Refused {
                status: Status::ERR_NOT_FOUND,
                message: format!(
                    "{}: host {n} is not one of the run's ({})",
                    name(info),
                    run.join(",")
                ),
            });
        };
        found.push(i);
    }
    found.sort_unstable();
    found.dedup();
    Ok(found)
}

/// A directive that cannot be honoured: refused if required, else noted and left out.
fn cannot(info: &Info, why: String, ignored: &mut Vec<String>) -> Result<(), Refused> {
    let message = format!("{} {why}", name(info));
    if info.is_required() {
        return Err(Refused {
            status: Status::ERR_NOT_SUPPORTED,
            message,
        });
    }
    ignored.push(message);
    Ok(())
}

/// An object kind by its PMIx name.
fn object(word: &str) -> Option<BindTo> {
    match word {
        "none" => Some(BindTo::None),
        "core" => Some(BindTo::Core),
        "package" | "socket" => Some(BindTo::Package),
        "numa" => Some(BindTo::Numa),
        _ => None,
    }
}

/// The mapping, object and oversubscription a `PMIX_MAPBY` value asks, or why it cannot be
/// honoured.
fn map_by(value: &str) -> Result<(SpawnMap, BindTo, Option<bool>), String> {
    let lower = value.to_ascii_lowercase();
    let mut words = lower.split(':');
    let (map, to) = match words.next().unwrap_or_default() {
        "slot" => (SpawnMap::Slot, BindTo::None),
        "node" => (SpawnMap::Node, BindTo::None),
        "ppr" => {
            let n = words
                .next()
                .and_then(|n| n.parse::<u32>().ok())
                .filter(|n| *n > 0);
            match (n, words.next()) {
                (Some(n), Some("node")) => (SpawnMap::PerNode(n), BindTo::None),
                _ => return Err(format!("{value:?}: only ppr:N:node is supported")),
            }
        }
        w => match object(w).filter(|o| *o != BindTo::None) {
            Some(o) => (SpawnMap::Slot, o),
            None => {
                return Err(format!(
                    "{value:?} is not supported (slot, node, ppr:N:node, core, package, numa)"
                ));
            }
        },
    };
    let mut over = None;
    for m in words {
        over = Some(match m {
            "oversubscribe" => true,
            "nooversubscribe" => false,
            _ => return Err(format!("{value:?}: the modifier {m:?} is not supported")),
        });
    }
    Ok((map, to, over))
}

/// The spawn's placement directives (`job_info`, each of `apps`' own) on the run's `nodes`,
/// this machine being `this_host`.
pub(crate) fn read(
    job_info: &[Info],
    apps: &[App],
    nodes: &NodeList,
    this_host: &str,
) -> Result<SpawnPlacement, Refused> {
    let mut out = SpawnPlacement::default();
    let find = |info: &'_ [Info], keys: [&str; 2]| -> Option<Info> {
        info.iter()
            .find(|i| keys.contains(&i.key.as_str()))
            .cloned()
    };
    // Hosts to add: honoured when the run has them already.
    for i in job_info
        .iter()
        .chain(apps.iter().flat_map(|a| &a.info))
        .filter(|i| matches!(i.key.as_str(), attr::ADD_HOST | attr::ADD_HOSTFILE))
    {
        let new: Vec<String> = names_in(i)?
            .into_iter()
            .filter(|n| node_named(nodes, n, this_host).is_none())
            .collect();
        if !new.is_empty() {
            let why = format!(
                "{}: pmixrun does not add hosts to a running run",
                new.join(",")
            );
            cannot(i, why, &mut out.ignored)?;
        }
    }
    let job_hosts = match find(job_info, [attr::HOST, attr::HOSTFILE]) {
        Some(i) => Some(hosts_of(&i, nodes, this_host)?),
        None => None,
    };
    for a in apps {
        let own = match find(&a.info, [attr::HOST, attr::HOSTFILE]) {
            Some(i) => Some(hosts_of(&i, nodes, this_host)?),
            None => job_hosts.clone(),
        };
        out.rules.hosts.push(own);
    }
    let first = |key: &str| {
        job_info
            .iter()
            .chain(apps.iter().flat_map(|a| &a.info))
            .find(|i| i.key.as_str() == key)
            .cloned()
    };
    if let Some(i) = first(attr::MAPBY) {
        match map_by(text(&i)?) {
            Ok((map, to, over)) => {
                out.rules.map = map;
                out.rules.oversubscribe = over;
                out.map_to = Some(to);
            }
            Err(why) => cannot(&i, why, &mut out.ignored)?,
        }
    }
    if let Some(i) = first(attr::BINDTO) {
        let v = text(&i)?;
        match object(&v.to_ascii_lowercase()) {
            Some(o) => out.bind_to = Some(o),
            None => cannot(
                &i,
                format!("{v:?} is not supported (none, core, package, numa)"),
                &mut out.ignored,
            )?,
        }
    }
    Ok(out)
}

/// A spawned job placed: the node of each rank, and where on its node each runs.
pub(crate) struct PlacedSpawn {
    pub(crate) placement: Placement,
    pub(crate) place: Place,
}

/// Places a spawned job of `layout`, asked for by `job_info` and `apps`, on the run's `nodes`
/// where `usage` says what runs (see [`read`] and [`Placement::spawn`]), the run's own
/// `--oversubscribe` and `place` under the spawn's directives; those left out are noted in
/// the `-v` log.
#[expect(
    clippy::too_many_arguments,
    reason = "the run's state a spawn is placed in"
)]
pub(crate) fn place_spawn(
    job_info: &[Info],
    apps: &[App],
    layout: &Layout,
    nodes: &NodeList,
    usage: &SlotUsage,
    oversubscribe: bool,
    place: Place,
    this_host: &str,
) -> Result<PlacedSpawn, Refused> {
    let asked = read(job_info, apps, nodes, this_host)?;
    for note in &asked.ignored {
        tracing::info!("spawn: optional {note}: left out");
    }
    let placement =
        Placement::spawn(nodes, usage, layout, oversubscribe, &asked.rules).map_err(|message| {
            Refused {
                status: Status::ERR_OUT_OF_RESOURCE,
                message,
            }
        })?;
    Ok(PlacedSpawn {
        placement,
        place: asked.place(place),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(info: Vec<Info>) -> App {
        App {
            cmd: "./child".into(),
            argv: vec!["child".into()],
            env: vec![],
            cwd: String::new(),
            maxprocs: 1,
            info,
        }
    }

    fn nodes(list: &str) -> NodeList {
        NodeList::parse_hosts(&[list.to_owned()]).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn hosts_are_per_app_over_the_job_and_must_be_the_runs() {
        let run = nodes("a:2,b:2,c:2");
        let job = [Info::attr(attr::HOST, "c,a")];
        let apps = [app(vec![Info::attr(attr::HOST, "b:4")]), app(vec![])];
        let got = read(&job, &apps, &run, "elsewhere").unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(got.rules.hosts, [Some(vec![1]), Some(vec![0, 2])]);
        assert_eq!(got.rules.map, SpawnMap::Slot);
        let e = read(&[Info::attr(attr::HOST, "a,zz")], &apps[1..], &run, "x");
        assert_eq!(
            e,
            Err(Refused {
                status: Status::ERR_NOT_FOUND,
                message: "PMIX_HOST: host zz is not one of the run's (a,b,c)".into()
            })
        );
        let e = read(&[Info::attr(attr::HOST, 3u32)], &apps, &run, "x");
        assert_eq!(e.map_err(|r| r.status).err(), Some(Status::ERR_BAD_PARAM));
        // This machine by any of its names, on one node.
        let one = NodeList::this_machine("n1.lab");
        for name in ["localhost", "n1", "n1.lab"] {
            let got = read(&[Info::attr(attr::HOST, name)], &apps[1..], &one, "n1.lab");
            assert_eq!(
                got.map(|p| p.rules.hosts),
                Ok(vec![Some(vec![0])]),
                "{name}"
            );
        }
    }

    #[test]
    fn hostfiles_name_hosts_too() {
        let dir = std::env::temp_dir().join(format!("pmixrun-spawn-hf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let file = dir.join("hosts");
        std::fs::write(&file, "b slots=1\n").unwrap_or_else(|e| panic!("{e}"));
        let path = file.to_string_lossy().into_owned();
        let got = read(
            &[Info::attr(attr::HOSTFILE, path.as_str())],
            &[app(vec![])],
            &nodes("a,b"),
            "x",
        );
        let missing = read(
            &[Info::attr(attr::HOSTFILE, "/nonexistent/hosts")],
            &[app(vec![])],
            &nodes("a,b"),
            "x",
        );
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(got.map(|p| p.rules.hosts), Ok(vec![Some(vec![1])]));
        assert_eq!(
            missing.map_err(|r| r.status).err(),
            Some(Status::ERR_BAD_PARAM)
        );
    }

    #[test]
    fn mappings_and_bindings_honoured() {
        let run = nodes("a,b");
        let with = |info: Vec<Info>| read(&info, &[app(vec![])], &run, "x");
        let got = with(vec![
            Info::attr(attr::MAPBY, "PPR:2:node:oversubscribe"),
            Info::attr(attr::BINDTO, "core"),
        ])
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(got.rules.map, SpawnMap::PerNode(2));
        assert_eq!(got.rules.oversubscribe, Some(true));
        assert_eq!(
            (got.map_to, got.bind_to),
            (Some(BindTo::None), Some(BindTo::Core))
        );
        let run_place = Place {
            map_to: BindTo::Numa,
            bind_to: BindTo::Numa,
            ..Place::default()
        };
        let p = got.place(run_place);
        assert_eq!((p.map_to, p.bind_to), (BindTo::None, BindTo::Core));
        // A mapping to objects binds to them unless told otherwise, as --map-by does.
        let got =
            with(vec![Info::attr(attr::MAPBY, "package")]).unwrap_or_else(|e| panic!("{e:?}"));
        let p = got.place(Place::default());
        assert_eq!((p.map_to, p.bind_to), (BindTo::Package, BindTo::Package));
        assert_eq!(got.rules.map, SpawnMap::Slot);
        // Nothing said: the run's.
        let p = with(vec![])
            .unwrap_or_else(|e| panic!("{e:?}"))
            .place(run_place);
        assert_eq!(p, run_place);
    }

    #[test]
    fn what_cannot_be_honoured_is_refused_if_required_else_noted() {
        let run = nodes("a,b");
        for (key, value, says) in [
            (
                attr::MAPBY,
                "ppr:2:package",
                "PMIX_MAPBY \"ppr:2:package\": only ppr:N:node",
            ),
            (
                attr::MAPBY,
                "l3cache",
                "PMIX_MAPBY \"l3cache\" is not supported",
            ),
            (
                attr::MAPBY,
                "node:span",
                "PMIX_MAPBY \"node:span\": the modifier \"span\"",
            ),
            (
                attr::BINDTO,
                "hwthread",
                "PMIX_BINDTO \"hwthread\" is not supported",
            ),
            (
                attr::ADD_HOST,
                "a,zz",
                "PMIX_ADD_HOST zz: pmixrun does not add hosts",
            ),
        ] {
            let optional = Info::attr(key, value);
            let got = read(std::slice::from_ref(&optional), &[app(vec![])], &run, "x")
                .unwrap_or_else(|e| panic!("{e:?}"));
            assert_eq!(got.ignored.len(), 1, "{value}");
            assert!(got.ignored[0].starts_with(says), "{:?}", got.ignored);
            assert_eq!(
                got.rules,
                SpawnRules {
                    hosts: vec![None],
                    ..SpawnRules::default()
                }
            );
            // Required, in the app's own information.
            let required = app(vec![optional.required()]);
            match read(&[], &[required], &run, "x") {
                Err(Refused { status, message }) => {
                    assert_eq!(status, Status::ERR_NOT_SUPPORTED);
                    assert!(message.starts_with(says), "{message}");
                }
                other => panic!("{value}: {other:?}"),
            }
        }
        // Adding a host the run has is honoured: nothing to add.
        let got = read(
            &[Info::attr(attr::ADD_HOST, "b").required()],
            &[app(vec![])],
            &run,
            "x",
        );
        assert_eq!(got.map(|p| p.ignored), Ok(vec![]));
    }
}
