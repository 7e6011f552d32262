//! What pmixrun does with a spawn's debugger directives (`docs/TOOLS.md`, "Debuggers"):
//!
//! - `DEBUG_STOP_IN_INIT` goes into the new job's data, where its processes' init finds it
//!   and waits for a debugger's release (`false` is left out: libpmix stops on the key alone);
//! - `DEBUG_DAEMONS_PER_NODE` with `DEBUG_TARGET` starts that many debugger daemons on the
//!   target's node: on one node, that is the spawn's one application with its process count
//!   replaced; the target goes into the daemons' job data (`DEBUG_TARGET`), for them to find
//!   it;
//! - `DEBUGGER_DAEMONS` with `DEBUG_JOB` (the target's namespace) or `DEBUG_TARGET`, as
//!   OpenPMIx's `debugger` example co-spawns its daemons: an application that asks for no
//!   process count gets one per node (on one node: one), or `N` with `MAPBY ppr:N:node` in
//!   the job's or the application's info; both keys go into the daemons' job data, where
//!   `PMIx_Get(WILDCARD, PMIX_DEBUG_JOB)` finds the target;
//! - `DEBUG_STOP_ON_EXEC`, `DEBUG_DAEMONS_PER_PROC`, and daemons or a stop in init in a
//!   multi-node run are refused (`ERR_NOT_SUPPORTED`) rather than half done.

use std::borrow::Cow;

use pmix_server::App;
use pmix_types::{Info, Value, attr};

/// The value of `key` among `job_info`, unless absent or `false`.
fn asked<'a>(job_info: &'a [Info], key: &str) -> Option<&'a Value> {
    job_info
        .iter()
        .find(|i| i.key.as_str() == key)
        .map(|i| &i.value)
        .filter(|v| **v != Value::Bool(false))
}

/// The debugger directives a spawn may carry on one node, what `PMIX_QUERY_DEBUG_SUPPORT`
/// answers there; a run across nodes supports none of them ([`refused`]).
pub(crate) const SUPPORTED: [&str; 5] = [
    attr::DEBUG_STOP_IN_INIT,
    attr::DEBUG_TARGET,
    attr::DEBUG_DAEMONS_PER_NODE,
    attr::DEBUGGER_DAEMONS,
    attr::DEBUG_JOB,
];

/// [`SUPPORTED`] where the run is: `multi_node`, the run spans nodes.
pub(crate) fn supported(multi_node: bool) -> &'static [&'static str] {
    if multi_node { &[] } else { &SUPPORTED }
}

/// Why a spawn's debugger directives cannot be honoured here, if they cannot; `multi_node`:
/// the run spans nodes.
pub(crate) fn refused(job_info: &[Info], multi_node: bool) -> Option<String> {
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
    if asked(job_info, attr::DEBUG_STOP_IN_INIT).is_some() && multi_node {
        // The daemons' servers hold their processes, but nothing tells the root's, where
        // the tools are, that a job waits (READY_FOR_DEBUG), nor that a debugger left.
        return Some("holding processes in init (PMIX_DEBUG_STOP_IN_INIT) on one node only".into());
    }
    if asked(job_info, attr::DEBUG_DAEMONS_PER_NODE).is_some() && multi_node {
        return Some("debugger daemons (PMIX_DEBUG_DAEMONS_PER_NODE) on one node only".into());
    }
    if asked(job_info, attr::DEBUGGER_DAEMONS).is_some() && multi_node {
        return Some("debugger daemons (PMIX_DEBUGGER_DAEMONS) on one node only".into());
    }
    None
}

/// The applications to start for a spawn: as asked, or, for debugger daemons, the one
/// application with `DEBUG_DAEMONS_PER_NODE` processes. `Err` for a malformed request.
pub(crate) fn apps<'a>(apps: &'a [App], job_info: &[Info]) -> Result<Cow<'a, [App]>, String> {
    if asked(job_info, attr::DEBUGGER_DAEMONS).is_some()
        && asked(job_info, attr::DEBUG_DAEMONS_PER_NODE).is_none()
    {
        return co_spawned_daemons(apps, job_info);
    }
    let Some(n) = asked(job_info, attr::DEBUG_DAEMONS_PER_NODE) else {
        return Ok(Cow::Borrowed(apps));
    };
    let n = n
        .as_u32()
        .filter(|n| *n > 0)
        .ok_or("PMIX_DEBUG_DAEMONS_PER_NODE must be a positive number")?;
    if asked(job_info, attr::DEBUG_TARGET).is_none() {
        return Err("PMIX_DEBUG_DAEMONS_PER_NODE without PMIX_DEBUG_TARGET".into());
    }
    let [app] = apps else {
        return Err("debugger daemons are one application".into());
    };
    let mut app = app.clone();
    app.maxprocs = n;
    Ok(Cow::Owned(vec![app]))
}

/// Debugger daemons marked `DEBUGGER_DAEMONS`, as OpenPMIx's `debugger` example spawns them:
/// the target named (`DEBUG_JOB` or `DEBUG_TARGET`), and an application without a process
/// count given `N` of `MAPBY ppr:N:node` (its own, else the job's), else one: the count on
/// one node, where daemons are started.
fn co_spawned_daemons<'a>(apps: &'a [App], job_info: &[Info]) -> Result<Cow<'a, [App]>, String> {
    if asked(job_info, attr::DEBUG_JOB).is_none() && asked(job_info, attr::DEBUG_TARGET).is_none() {
        return Err("PMIX_DEBUGGER_DAEMONS without PMIX_DEBUG_JOB or PMIX_DEBUG_TARGET".into());
    }
    if apps.iter().all(|a| a.maxprocs > 0) {
        return Ok(Cow::Borrowed(apps));
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
    let mut out = apps.to_vec();
    for app in out.iter_mut().filter(|a| a.maxprocs == 0) {
        app.maxprocs = per_node(&app.info)?.or(job_default).unwrap_or(1);
    }
    Ok(Cow::Owned(out))
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

    #[test]
    fn daemons_per_node_replace_the_count_of_the_one_application() {
        let info = vec![target(), Info::attr(attr::DEBUG_DAEMONS_PER_NODE, 2u16)];
        let asked = [app(7)];
        let out = apps(&asked, &info).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out[0].maxprocs, 2);
        assert_eq!(job_data(&info), [target()]);
        assert!(refused(&info, false).is_none());
        assert!(refused(&info, true).is_some());
        // Without a target, with two applications, with zero: refused.
        let no_target = [Info::attr(attr::DEBUG_DAEMONS_PER_NODE, 2u16)];
        assert!(apps(&[app(1)], &no_target).is_err());
        assert!(apps(&[app(1), app(1)], &info).is_err());
        let zero = [target(), Info::attr(attr::DEBUG_DAEMONS_PER_NODE, 0u16)];
        assert!(apps(&[app(1)], &zero).is_err());
        // An ordinary spawn is left alone.
        assert_eq!(
            apps(&[app(3)], &[]).unwrap_or_else(|e| panic!("{e}"))[0].maxprocs,
            3
        );
    }

    #[test]
    fn stop_in_init_travels_on_one_node_and_stop_on_exec_is_refused() {
        let stop = Info::attr(attr::DEBUG_STOP_IN_INIT, true);
        let asked = std::slice::from_ref(&stop);
        // On one node only.
        assert!(refused(asked, false).is_none());
        assert!(refused(asked, true).is_some());
        assert_eq!(job_data(asked), [stop]);
        assert!(job_data(&[Info::attr(attr::DEBUG_STOP_IN_INIT, false)]).is_empty());
        let exec = [Info::attr(attr::DEBUG_STOP_ON_EXEC, true)];
        assert!(refused(&exec, false).is_some());
        let per_proc = [target(), Info::attr(attr::DEBUG_DAEMONS_PER_PROC, 1u16)];
        assert!(refused(&per_proc, false).is_some());
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
        let out = apps(&none, &info).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(out[0].maxprocs, 1);
        assert_eq!(job_data(&info), [daemons.clone(), job.clone()]);
        assert!(refused(&info, false).is_none());
        assert!(refused(&info, true).is_some(), "one node only");
        // ppr:2 in the application's own info wins; no mapping: one; a count given is kept.
        let mut own = app(0);
        own.info = vec![ppr("2")];
        let two = apps(std::slice::from_ref(&own), &info).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(two[0].maxprocs, 2);
        let bare = [daemons.clone(), job.clone()];
        assert_eq!(
            apps(&[app(0)], &bare).unwrap_or_else(|e| panic!("{e}"))[0].maxprocs,
            1
        );
        assert_eq!(
            apps(&[app(3)], &bare).unwrap_or_else(|e| panic!("{e}"))[0].maxprocs,
            3
        );
        // No target, or a mapping that is no count: refused.
        assert!(apps(&[app(0)], std::slice::from_ref(&daemons)).is_err());
        assert!(apps(&[app(0)], &[ppr("x"), daemons, job]).is_err());
    }
}
