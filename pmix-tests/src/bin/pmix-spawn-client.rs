//! The spawn scenarios `tests/spawn.rs` runs under `pmixrun`: a job that starts further jobs
//! of this same program, in a child role, and the children checking what they were given.
//!
//! `pmix-spawn-client <role> [args...]`: exits 0 printing `ok` when every check passed,
//! otherwise prints `FAILED: <what>` and exits 1. Steps between processes are ordered with
//! fences, or with a get that returns only when its target has left, never with sleeps.

use std::process::ExitCode;

use pmix_client::{App, Client, Info, Key, Nspace, Proc, Scope, Status, Value, attr};
use pmix_tests::check;
use pmix_tests::scenario::{Res, e, wildcard};
use pmix_tests::this_program;

/// The key the parent puts before spawning; its children get it from the parent.
const PARENT_KEY: &str = "spawn.parent.value";
/// The key the parent preloads into its children's job data.
const PORT_KEY: &str = "spawn.port";
const PORT: &str = "port-42";
/// A preloaded key in the reserved `pmix` space: the launcher must not pass it on.
const HIDDEN_KEY: &str = "pmix.spawn.test.hidden";
/// The variable the second application context of `two-apps` sets.
const APP_VAR: &str = "SPAWN_T_VAR";

/// `PMIx_Spawn`: the new namespace, or the status it failed with.
fn spawn(c: &Client, job_info: Vec<Info>, apps: Vec<App>) -> Result<Nspace, Status> {
    c.spawn(&job_info, &apps).map_err(|err| err.status())
}

fn user_info(key: &str, value: &str) -> Result<Info, String> {
    Ok(Info::new(Key::new(key).map_err(e("key"))?, value))
}

fn get_str(c: &Client, p: &Proc, key: &str) -> Result<String, String> {
    let v = c.get(p, key, &[]).map_err(e(key))?;
    v.as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{key} is {v:?}"))
}

fn get_u32(c: &Client, p: &Proc, key: &str) -> Result<u32, String> {
    let v = c.get(p, key, &[]).map_err(e(key))?;
    v.as_u32().ok_or_else(|| format!("{key} is {v:?}"))
}

/// Checks that this process was spawned, and returns its parent.
fn spawned_by(c: &Client) -> Result<Proc, String> {
    let me = c.proc().clone();
    let spawned = c.get(&me, attr::SPAWNED, &[]).map_err(e("PMIX_SPAWNED"))?;
    check!(
        spawned == Value::Bool(true),
        "PMIX_SPAWNED of {me} is {spawned:?}"
    );
    let spawned = c
        .get(&wildcard(&me.nspace), attr::SPAWNED, &[])
        .map_err(e("job-level PMIX_SPAWNED"))?;
    check!(
        spawned == Value::Bool(true),
        "job-level PMIX_SPAWNED is {spawned:?}"
    );
    // A per-process attribute: asked of this process's own name.
    let parent = c
        .get(&me, attr::PARENT_ID, &[])
        .map_err(e("PMIX_PARENT_ID"))?;
    let parent = parent
        .as_proc()
        .cloned()
        .ok_or_else(|| format!("PMIX_PARENT_ID is {parent:?}"))?;
    check!(
        parent.nspace != me.nspace,
        "the parent {parent} is in this job"
    );
    // Not a job-level attribute: at the wildcard rank it is not found (as under PRRTE).
    let at_job = c.get(&wildcard(&me.nspace), attr::PARENT_ID, &[]);
    check!(
        at_job.is_err(),
        "PMIX_PARENT_ID found at the wildcard rank: {at_job:?}"
    );
    Ok(parent)
}

/// `parent N`: puts a value, spawns N children preloaded with a port name, and fences with
/// them once they have read both.
fn parent(c: &Client, n: u32) -> Res {
    let me = c.proc().clone();
    c.put(Scope::GLOBAL, PARENT_KEY, format!("from {me}"))
        .map_err(e("put"))?;
    c.commit().map_err(e("commit"))?;
    let n_arg = n.to_string();
    let job_info = vec![
        user_info(PORT_KEY, PORT)?,
        user_info(HIDDEN_KEY, "must not reach the children")?,
    ];
    let ns = spawn(c, job_info, vec![this_program(&["child", &n_arg], n)?])
        .map_err(|s| format!("spawn: {s:?}"))?;
    check!(ns != me.nspace, "spawn answered my own namespace {ns}");
    println!("parent spawned {n} into {ns}");
    c.fence(&[me, wildcard(&ns)], &[])
        .map_err(e("fence with the children"))?;
    println!("parent: children done");
    Ok(())
}

/// `child N`: a child of `parent N`.
fn child(c: &Client, n: u32) -> Res {
    let me = c.proc().clone();
    let parent = spawned_by(c)?;
    let size = get_u32(c, &wildcard(&me.nspace), attr::JOB_SIZE)?;
    check!(size == n, "job size {size}, expected {n}");
    let port = get_str(c, &wildcard(&me.nspace), PORT_KEY)?;
    check!(port == PORT, "preloaded {PORT_KEY} is {port:?}");
    match c.get(&wildcard(&me.nspace), HIDDEN_KEY, &[]) {
        Err(err) if err.status() == Status::ERR_NOT_FOUND => {}
        other => return Err(format!("{HIDDEN_KEY} was passed on: {other:?}")),
    }
    let from_parent = get_str(c, &parent, PARENT_KEY)?;
    check!(
        from_parent == format!("from {parent}"),
        "the parent's value is {from_parent:?}"
    );
    c.fence(&[parent.clone(), wildcard(&me.nspace)], &[])
        .map_err(e("fence with the parent"))?;
    println!("child {} of {n}: parent {parent}, port {port}", me.rank);
    Ok(())
}

/// `parent-leaves N`: spawns N `child-outlives` and leaves at once.
fn parent_leaves(c: &Client, n: u32) -> Res {
    let ns = spawn(c, vec![], vec![this_program(&["child-outlives"], n)?])
        .map_err(|s| format!("spawn: {s:?}"))?;
    println!("parent spawned {n} into {ns} and leaves");
    Ok(())
}

/// `child-outlives`: waits for its parent to leave (a get of a key the parent never puts
/// fails only then), then ends normally.
fn child_outlives(c: &Client) -> Res {
    let parent = spawned_by(c)?;
    match c.get(&parent, "spawn.never.put", &[]) {
        Err(_) => {}
        Ok(v) => return Err(format!("got {v:?} from {parent}")),
    }
    println!("child {}: parent gone", c.proc().rank);
    Ok(())
}

/// `two-apps DIR`: spawns two application contexts (2 processes, then 1 with a variable set
/// and `DIR` as its working directory) and leaves.
fn two_apps(c: &Client, dir: &str) -> Res {
    let first = this_program(&["child-app", "0", "-", "-"], 2)?;
    let mut second = this_program(&["child-app", "1", "second app", dir], 1)?;
    second.env = vec![format!("{APP_VAR}=second app")];
    second.cwd = dir.to_owned();
    let ns = spawn(c, vec![], vec![first, second]).map_err(|s| format!("spawn: {s:?}"))?;
    println!("parent spawned 2 app contexts into {ns}");
    Ok(())
}

/// `child-app APPNUM VALUE DIR`: a process of `two-apps`; `-` means "not set" and "anywhere".
fn child_app(c: &Client, appnum: &str, value: &str, dir: &str) -> Res {
    let me = c.proc().clone();
    spawned_by(c)?;
    let want: u32 = appnum.parse().map_err(e("APPNUM"))?;
    let got = get_u32(c, &me, attr::APPNUM)?;
    check!(got == want, "appnum {got}, expected {want}");
    let size = get_u32(c, &wildcard(&me.nspace), attr::JOB_SIZE)?;
    check!(size == 3, "job size {size}");
    let napps = get_u32(c, &wildcard(&me.nspace), attr::JOB_NUM_APPS)?;
    check!(napps == 2, "{napps} app contexts");
    let var = std::env::var(APP_VAR).ok();
    check!(
        var.as_deref() == (value != "-").then_some(value),
        "{APP_VAR} is {var:?}"
    );
    if dir != "-" {
        let cwd = std::env::current_dir().map_err(e("cwd"))?;
        let want = std::path::Path::new(dir).canonicalize().map_err(e(dir))?;
        check!(cwd == want, "working directory {}", cwd.display());
    }
    println!("child-app rank {} appnum {got}", me.rank);
    Ok(())
}

/// `spawn-missing`: spawns that cannot start fail with the status that says why; the parent
/// goes on, and a spawn after them works.
fn spawn_missing(c: &Client) -> Res {
    let mut missing = this_program(&[], 1)?;
    missing.cmd = "no-such-program-for-spawn".into();
    missing.argv = vec![missing.cmd.clone()];
    let r = spawn(c, vec![], vec![missing.clone()]);
    check!(
        r == Err(Status::ERR_JOB_EXE_NOT_FOUND),
        "spawn of a missing program: {r:?}"
    );
    // One missing program among several application contexts: nothing of it starts.
    let r = spawn(
        c,
        vec![],
        vec![this_program(&["child-outlives"], 2)?, missing],
    );
    check!(
        r == Err(Status::ERR_JOB_EXE_NOT_FOUND),
        "spawn of a good and a missing program: {r:?}"
    );
    let mut nowhere = this_program(&["child-outlives"], 1)?;
    nowhere.cwd = "/no/such/dir/for/spawn".into();
    let r = spawn(c, vec![], vec![nowhere]);
    check!(
        r == Err(Status::ERR_JOB_WDIR_NOT_FOUND),
        "spawn into a missing directory: {r:?}"
    );
    let mut not_exe = this_program(&[], 1)?;
    not_exe.cmd = "/etc/passwd".into();
    let r = spawn(c, vec![], vec![not_exe]);
    check!(
        r == Err(Status::ERR_JOB_APP_NOT_EXECUTABLE),
        "spawn of a file that is no program: {r:?}"
    );
    // More processes than the machine can run: refused at once, nothing allocated for them
    // (this crashed pmixrun once, allocating per rank first).
    let r = spawn(c, vec![], vec![this_program(&[], 4_000_000_000)?]);
    check!(
        r == Err(Status::ERR_OUT_OF_RESOURCE),
        "spawn of 4e9 processes: {r:?}"
    );
    // Counts that do not add up to a job's size in 32 bits.
    let r = spawn(
        c,
        vec![],
        vec![this_program(&[], u32::MAX)?, this_program(&[], 2)?],
    );
    check!(
        r == Err(Status::ERR_BAD_PARAM),
        "spawn whose counts overflow: {r:?}"
    );
    c.fence(&[], &[]).map_err(e("fence after the failures"))?;
    let ns = spawn(c, vec![], vec![this_program(&["child-outlives"], 1)?])
        .map_err(|s| format!("spawn after the failures: {s:?}"))?;
    println!("spawn failures reported; then spawned {ns}");
    Ok(())
}

/// `spawn-failing-child HOW`: spawns one `child-fails HOW` and waits to be killed.
fn spawn_failing_child(c: &Client, how: &str) -> Res {
    let ns = spawn(c, vec![], vec![this_program(&["child-fails", how], 1)?])
        .map_err(|s| format!("spawn: {s:?}"))?;
    println!("parent spawned {ns}");
    park_forever()
}

/// `child-fails HOW`: `exit3` exits 3 without finalize, `abort7` aborts with 7, `hang` waits
/// to be killed.
fn child_fails(c: &Client, how: &str) -> Res {
    spawned_by(c)?;
    println!("child ready");
    match how {
        "exit3" => std::process::exit(3),
        "abort7" => {
            c.abort(Status(7), "child gives up", &[])
                .map_err(e("abort"))?;
            park_forever()
        }
        "hang" => park_forever(),
        other => Err(format!("unknown way to fail {other:?}")),
    }
}

/// `spawn-placed N DIRECTIVE...`: spawns N `child-where` with placement directives, each
/// `KEY=VALUE` (KEY `host`, `hostfile`, `add-host`, `mapby` or `bindto`; `!KEY` marks it
/// required, `app:KEY` puts it in the application's own information rather than the job's),
/// and says what the spawn answered.
fn spawn_placed(c: &Client, n: u32, directives: &[String]) -> Res {
    let mut job_info = Vec::new();
    let mut app = this_program(&["child-where"], n)?;
    for d in directives {
        let (required, d) = d
            .strip_prefix('!')
            .map_or((false, d.as_str()), |d| (true, d));
        let (own, d) = d.strip_prefix("app:").map_or((false, d), |d| (true, d));
        let (key, value) = d
            .split_once('=')
            .ok_or_else(|| format!("directive {d:?} is not KEY=VALUE"))?;
        let key = match key {
            "host" => attr::HOST,
            "hostfile" => attr::HOSTFILE,
            "add-host" => attr::ADD_HOST,
            "mapby" => attr::MAPBY,
            "bindto" => attr::BINDTO,
            other => return Err(format!("unknown directive {other:?}")),
        };
        let info = Info::attr(key, value);
        let info = if required { info.required() } else { info };
        if own {
            app.info.push(info);
        } else {
            job_info.push(info);
        }
    }
    match spawn(c, job_info, vec![app]) {
        Ok(ns) => println!("spawned {n} into {ns}"),
        Err(status) => println!("spawn refused: {status}"),
    }
    Ok(())
}

/// `child-where`: a child of `spawn-placed`, saying where it runs: its rank, its node's name
/// and id as PMIx tells them, and the CPUs the kernel lets it use.
fn child_where(c: &Client) -> Res {
    spawned_by(c)?;
    let me = c.proc().clone();
    let host = get_str(c, &me, attr::HOSTNAME)?;
    let node = get_u32(c, &me, attr::NODEID)?;
    let status = std::fs::read_to_string("/proc/self/status").map_err(e("/proc/self/status"))?;
    let cpus = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(str::trim)
        .ok_or("no Cpus_allowed_list")?;
    println!("child {} on {host} (node {node}), CPUs {cpus}", me.rank);
    Ok(())
}

/// Blocks until the process is killed: it waits on the launcher, not on a peer.
fn park_forever() -> ! {
    loop {
        std::thread::park();
    }
}

fn run(args: &[String]) -> Res {
    let role = args.first().map(String::as_str).unwrap_or("");
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    let n = || arg(1).parse::<u32>().map_err(e("N"));
    let c = Client::init().map_err(e("init"))?;
    match role {
        "parent" => parent(&c, n()?),
        "child" => child(&c, n()?),
        "parent-leaves" => parent_leaves(&c, n()?),
        "child-outlives" => child_outlives(&c),
        "two-apps" => two_apps(&c, arg(1)),
        "child-app" => child_app(&c, arg(1), arg(2), arg(3)),
        "spawn-missing" => spawn_missing(&c),
        "spawn-failing-child" => spawn_failing_child(&c, arg(1)),
        "child-fails" => child_fails(&c, arg(1)),
        "spawn-placed" => spawn_placed(&c, n()?, args.get(2..).unwrap_or_default()),
        "child-where" => child_where(&c),
        other => Err(format!("unknown role {other:?}")),
    }?;
    c.finalize().map_err(e("finalize"))
}

fn main() -> ExitCode {
    pmix_tests::scenario::run_main(run)
}
