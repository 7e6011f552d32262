//! What pmixrun does with a spawn's debugger directives (`docs/TOOLS.md`, "Debuggers"):
//!
//! - `DEBUG_STOP_IN_INIT` goes into the new job's data, where its processes' init finds it
//!   and waits for a debugger's release (`false` is left out: libpmix stops on the key alone);
//! - `DEBUG_DAEMONS_PER_NODE` with `DEBUG_TARGET` starts that many debugger daemons on each
//!   node of the target (the job's nodes, or the one process's): the spawn's one application
//!   with its process count replaced; the target goes into the daemons' job data
//!   (`DEBUG_TARGET`), for them to find it;
//! - `DEBUGGER_DAEMONS` with `DEBUG_JOB` (the target's namespace) or `DEBUG_TARGET`, as
//!   OpenPMIx's `debugger` example co-spawns its daemons: an application that asks for no
//!   process count gets one on each node of the target, or `N` with `MAPBY ppr:N:node` in
//!   the job's or the application's info; both keys go into the daemons' job data, where
//!   `PMIx_Get(WILDCARD, PMIX_DEBUG_JOB)` finds the target;
//! - daemons counted so are placed by their target ([`placement`]), not in free slots: they
//!   run beside it, whatever it takes;
//! - `DEBUG_STOP_ON_EXEC` and `DEBUG_DAEMONS_PER_PROC` are refused (`ERR_NOT_SUPPORTED`)
//!   rather than half done.

use std::borrow::Cow;

use pmix_server::App;
use pmix_types::{Info, Nspace, Proc, Rank, Value, attr};

use crate::plan::placement::Placement;

/// The value of `key` among `job_info`, unless absent or `false`.
fn asked<'a>(job_info: &'a [Info], key: &str) -> Option<&'a Value> {
    job_info
        .iter()
        .find(|i| i.key.as_str() == key)
        .map(|i| &i.value)
        .filter(|v| **v != Value::Bool(false))
}

/// The debugger directives a spawn may carry, what `PMIX_QUERY_DEBUG_SUPPORT` answers.
pub(crate) const SUPPORTED: [&str; 5] = [
    attr::DEBUG_STOP_IN_INIT,
    attr::DEBUG_TARGET,
    attr::DEBUG_DAEMONS_PER_NODE,
    attr::DEBUGGER_DAEMONS,
    attr::DEBUG_JOB,
];

/// Why a spawn's debugger directives cannot be honoured, if they cannot.
pub(crate) fn refused(job_info: &[Info]) -> Option<String> {
    if asked(job_info, attr::DEBUG_STOP_ON_EXEC).is_some() {
        return Some(
            "PMIX_DEBUG_STOP_ON_EXEC is not supported (it needs ptrace; use \
             PMIX_DEBUG_STOP_IN_INIT)"
                .into(),
        );
    }
    if asked(job_info, attr::DEBUG_DAEMONS_PER_PROC).is_some() {
        return Some(
            "PMIX_DEBUG_DAEMONS_PER_PROC is not supported (PMIX_DEBUG_DAEMONS_PER_NODE is)".into(),
        );
    }
    None
}

/// Whether a spawn starts debugger daemons (`DEBUG_DAEMONS_PER_NODE` or `DEBUGGER_DAEMONS`),
/// and for which process or job (rank `WILDCARD`): `DEBUG_TARGET`, else `DEBUG_JOB`'s
/// namespace. `Err` for a target that is no name.
pub(crate) fn daemons_target(job_info: &[Info]) -> Result<Option<Proc>, String> {
    if asked(job_info, attr::DEBUG_DAEMONS_PER_NODE).is_none()
        && asked(job_info, attr::DEBUGGER_DAEMONS).is_none()
    {
        return Ok(None);
    }
    if let Some(t) = asked(job_info, attr::DEBUG_TARGET) {
        return match t {
            Value::Proc(p) => Ok(Some(p.clone())),
            other => Err(format!("PMIX_DEBUG_TARGET {other:?}: not a process")),
        };
    }
    let Some(job) = asked(job_info, attr::DEBUG_JOB) else {
        return Ok(None);
    };
    let nspace = match job {
        Value::Nspace(n) => Some(n.clone()),
        v => v.as_str().and_then(|s| Nspace::new(s).ok()),
    };
    nspace
        .map(|n| Some(Proc::new(n, Rank::WILDCARD)))
        .ok_or(format!("PMIX_DEBUG_JOB {job:?}: not a namespace"))
}

/// What a spawn starts: its applications, as asked or, for debugger daemons, counted.
pub(crate) struct Spawned<'a> {
    pub(crate) apps: Cow<'a, [App]>,
    /// For debugger daemons counted here, each application's processes on each node of the
    /// target ([`placement`]); `None` for a spawn placed as any other.
    pub(crate) per_node: Option<Vec<u32>>,
}

/// The applications to start for a spawn: as asked, or, for debugger daemons, the one
/// application with `DEBUG_DAEMONS_PER_NODE` processes on each of the `nodes` nodes of their
/// target. `Err` for a malformed request.
pub(crate) fn apps<'a>(
    apps: &'a [App],
    job_info: &[Info],
    nodes: u32,
) -> Result<Spawned<'a>, String> {
    let per_node = if asked(job_info, attr::DEBUGGER_DAEMONS).is_some()
        && asked(job_info, attr::DEBUG_DAEMONS_PER_NODE).is_none()
    {
        co_spawned_daemons(apps, job_info)?
    } else if let Some(n) = asked(job_info, attr::DEBUG_DAEMONS_PER_NODE) {
        let n = n
            .as_u32()
            .filter(|n| *n > 0)
            .ok_or("PMIX_DEBUG_DAEMONS_PER_NODE must be a positive number")?;
        if asked(job_info, attr::DEBUG_TARGET).is_none() {
            return Err("PMIX_DEBUG_DAEMONS_PER_NODE without PMIX_DEBUG_TARGET".into());
        }
        if apps.len() != 1 {
            return Err("debugger daemons are one application".into());
        }
        Some(vec![n])
    } else {
        None
    };
    let Some(per_node) = per_node else {
        return Ok(Spawned {
            apps: Cow::Borrowed(apps),
            per_node: None,
        });
    };
    let mut out = apps.to_vec();
    for (app, n) in out.iter_mut().zip(&per_node) {
        app.maxprocs = n.saturating_mul(nodes);
    }
    Ok(Spawned {
        apps: Cow::Owned(out),
        per_node: Some(per_node),
    })
}

/// Where debugger daemons counted by [`apps`] go: each application's `per_node` processes on
/// each node of `on` (indices into the run's nodes, ascending) in turn, of a run of `nodes`
/// nodes, beside their target whatever it takes of the nodes' slots.
pub(crate) fn placement(per_node: &[u32], on: &[usize], nodes: usize) -> Placement {
    let mut node_of = Vec::new();
    let mut ranks = vec![Vec::new(); nodes];
    for &n in per_node {
        for &node in on {
            for _ in 0..n {
                let rank = u32::try_from(node_of.len()).unwrap_or(u32::MAX);
                if let Some(r) = ranks.get_mut(node) {
                    r.push(rank);
                }
                node_of.push(node);
            }
        }
    }
    Placement { node_of, ranks }
}

/// Debugger daemons marked `DEBUGGER_DAEMONS`, as OpenPMIx's `debugger` example spawns them:
/// the target named (`DEBUG_JOB` or `DEBUG_TARGET`), and an application without a process
/// count given `N` of `MAPBY ppr:N:node` (its own, else the job's), else one, on each node of
/// the target: each application's count per node, or `None` when every application gave a
/// count (they are then placed as any spawn).
fn co_spawned_daemons(apps: &[App], job_info: &[Info]) -> Result<Option<Vec<u32>>, String> {
    if asked(job_info, attr::DEBUG_JOB).is_none() && asked(job_info, attr::DEBUG_TARGET).is_none() {
        return Err("PMIX_DEBUGGER_DAEMONS without PMIX_DEBUG_JOB or PMIX_DEBUG_TARGET".into());
    }
    if apps.iter().all(|a| a.maxprocs > 0) {
        return Ok(None);
    }
    let per_node = |info: &[Info]| -> Result<Option<u32>, String> {
        let Some(map) = asked(info, attr::MAPBY).and_then(Value::as_str) else {
            return Ok(None);
        };
        let lower = map.to_ascii_lowercase();
        match lower.strip_prefix("ppr:").and_then(|r| r.split_once(':')) {
            Some((n, obj)) if obj.starts_with("node") => n
                .parse::<u32>()
                .ok()
                .filter(|n| *n > 0)
                .map(Some)
                .ok_or(format!(
                    "PMIX_MAPBY {map:?}: not a count of processes per node"
                )),
            _ => Ok(None),
        }
    };
    let job_default = per_node(job_info)?;
    let mut counts = Vec::with_capacity(apps.len());
    for app in apps {
        // A count given is the application's count in all, not per node.
        let n = match app.maxprocs {
            0 => per_node(&app.info)?.or(job_default).unwrap_or(1),
            given => {
                return Err(format!(
                    "PMIX_DEBUGGER_DAEMONS: {} asks for {given} processes beside applications \
                 counted per node; give every application a count, or none",
                    app.cmd
                ));
            }
        };
        counts.push(n);
    }
    Ok(Some(counts))
}

/// The debugger directives a spawned job's data carries (`DEBUG_STOP_IN_INIT`,
/// `DEBUG_TARGET`, `DEBUGGER_DAEMONS`, `DEBUG_JOB`).
pub(crate) fn job_data(job_info: &[Info]) -> Vec<Info> {
    job_info
        .iter()
        .filter(|i| {
            matches!(
                i.key.as_str(),
                attr::DEBUG_STOP_IN_INIT
                    | attr::DEBUG_TARGET
                    | attr::DEBUGGER_DAEMONS
                    | attr::DEBUG_JOB
            )
        })
        .filter(|i| i.value != Value::Bool(false))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmix_types::{Nspace, Proc, Rank};

    fn app(n: u32) -> App {
        App {
            cmd: "gdbserver".into(),
            argv: vec!["gdbserver".into()],
            env: vec![],
            cwd: String::new(),
            maxprocs: n,
            info: vec![],
        }
    }

    fn target() -> Info {
        let job = Nspace::new("rs-pmixrun-1").unwrap_or_else(|e| panic!("{e}"));
        Info::attr(attr::DEBUG_TARGET, Proc::new(job, Rank::WILDCARD))
    }

    fn counts(s: &Spawned<'_>) -> Vec<u32> {
        s.apps.iter().map(|a| a.maxprocs).collect()
    }

    #[test]
    fn daemons_per_node_replace_the_count_of_the_one_application() {
        let info = vec![target(), Info::attr(attr::DEBUG_DAEMONS_PER_NODE, 2u16)];
        let asked = [app(7)];
        let out = apps(&asked, &info, 1).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((counts(&out), out.per_node), (vec![2], Some(vec![2])));
        // On the three nodes of the target: two on each.
        let three = apps(&asked, &info, 3).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(counts(&three), [6]);
        assert_eq!(job_data(&info), [target()]);
        assert!(refused(&info).is_none());
        let job = Nspace::new("rs-pmixrun-1").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            daemons_target(&info),
            Ok(Some(Proc::new(job, Rank::WILDCARD)))
        );
        // Without a target, with two applications, with zero: refused.
        let no_target = [Info::attr(attr::DEBUG_DAEMONS_PER_NODE, 2u16)];
        assert!(apps(&[app(1)], &no_target, 1).is_err());
        assert!(apps(&[app(1), app(1)], &info, 1).is_err());
        let zero = [target(), Info::attr(attr::DEBUG_DAEMONS_PER_NODE, 0u16)];
        assert!(apps(&[app(1)], &zero, 1).is_err());
        // An ordinary spawn is left alone.
        let three_asked = [app(3)];
        let plain = apps(&three_asked, &[], 2).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((counts(&plain), plain.per_node), (vec![3], None));
        assert_eq!(daemons_target(&[]), Ok(None));
    }

    #[test]
    fn daemons_go_to_each_node_of_their_target_in_turn() {
        // Two applications, 2 and 1 per node, on nodes 0 and 2 of 3.
        let p = placement(&[2, 1], &[0, 2], 3);
        assert_eq!(p.node_of, [0, 0, 2, 2, 0, 2]);
        assert_eq!(p.ranks, [vec![0, 1, 4], vec![], vec![2, 3, 5]]);
    }

    #[test]
    fn stop_in_init_travels_and_stop_on_exec_is_refused() {
        let stop = Info::attr(attr::DEBUG_STOP_IN_INIT, true);
        let asked = std::slice::from_ref(&stop);
        assert!(refused(asked).is_none());
        assert_eq!(job_data(asked), [stop]);
        assert!(job_data(&[Info::attr(attr::DEBUG_STOP_IN_INIT, false)]).is_empty());
        let exec = [Info::attr(attr::DEBUG_STOP_ON_EXEC, true)];
        assert!(refused(&exec).is_some());
        let per_proc = [target(), Info::attr(attr::DEBUG_DAEMONS_PER_PROC, 1u16)];
        assert!(refused(&per_proc).is_some());
    }

    /// OpenPMIx's `debugger` example: `MAPBY ppr:1:node`, `DEBUGGER_DAEMONS`, `DEBUG_JOB`, an
    /// application with no count.
    #[test]
    fn co_spawned_daemons_get_their_count_and_find_their_target() {
        let job = Info::attr(attr::DEBUG_JOB, "rs-pmixrun-1");
        let daemons = Info::attr(attr::DEBUGGER_DAEMONS, Value::Undef);
        let ppr = |n: &str| Info::attr(attr::MAPBY, format!("ppr:{n}:node"));
        let info = vec![ppr("1"), daemons.clone(), job.clone()];
        let none = [app(0)];
        let out = apps(&none, &info, 1).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((counts(&out), out.per_node), (vec![1], Some(vec![1])));
        // On two nodes: one on each.
        let two_nodes = apps(&none, &info, 2).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(counts(&two_nodes), [2]);
        let ns = Nspace::new("rs-pmixrun-1").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            daemons_target(&info),
            Ok(Some(Proc::new(ns, Rank::WILDCARD)))
        );
        assert_eq!(job_data(&info), [daemons.clone(), job.clone()]);
        assert!(refused(&info).is_none());
        // ppr:2 in the application's own info wins; no mapping: one; a count given is kept,
        // and the spawn placed as any other.
        let mut own = app(0);
        own.info = vec![ppr("2")];
        let two = apps(std::slice::from_ref(&own), &info, 1).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(counts(&two), [2]);
        let bare = [daemons.clone(), job.clone()];
        let one = apps(&none, &bare, 1).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(counts(&one), [1]);
        let three = [app(3)];
        let given = apps(&three, &bare, 2).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((counts(&given), given.per_node), (vec![3], None));
        // No target, a mapping that is no count, counts given and not: refused.
        assert!(apps(&[app(0)], std::slice::from_ref(&daemons), 1).is_err());
        assert!(apps(&[app(0), app(2)], &bare, 1).is_err());
        assert!(apps(&[app(0)], &[ppr("x"), daemons, job], 1).is_err());
    }
}
