//! The singleton scenarios `tests/singleton.rs` runs: a pmix-rs client started as a plain
//! process, with no PMIx server in its environment.
//!
//! `pmix-singleton-client <scenario> [args...]`: exits 0 printing `ok` when every check
//! passed, otherwise prints `FAILED: <what>` and exits 1. Lines before `ok` report what was
//! seen, for the test to compare with what it knows independently (this process's pid, the
//! host name).

use std::process::ExitCode;

use pmix_client::{Client, DataRange, Info, Key, Nspace, Proc, Scope, Status, Value, attr};
use pmix_tests::check;
use pmix_tests::scenario::{Res, e, wildcard};
use pmix_tests::this_program;

fn get_u32(c: &Client, p: &Proc, key: &str) -> Result<u32, String> {
    let v = c.get(p, key, &[]).map_err(e(key))?;
    v.as_u32().ok_or_else(|| format!("{key} is {v:?}"))
}

fn get_str(c: &Client, p: &Proc, key: &str) -> Result<String, String> {
    let v = c.get(p, key, &[]).map_err(e(key))?;
    v.as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{key} is {v:?}"))
}

/// `PARENT_ID` of a spawned process (a per-process attribute, asked of its own name).
fn parent_of(c: &Client) -> Result<Proc, String> {
    let parent = c
        .get(c.proc(), attr::PARENT_ID, &[])
        .map_err(e("PARENT_ID"))?;
    parent
        .as_proc()
        .cloned()
        .ok_or_else(|| format!("PARENT_ID is {parent:?}"))
}

fn info(key: &str, value: impl Into<Value>) -> Result<Info, String> {
    Ok(Info::new(Key::new(key).map_err(e("key"))?, value))
}

/// The status a call failed with, or a message if it did not fail.
fn status_of<T: std::fmt::Debug>(
    what: &str,
    r: Result<T, pmix_client::Error>,
) -> Result<Status, String> {
    match r {
        Ok(v) => Err(format!("{what} succeeded: {v:?}")),
        Err(err) => Ok(err.status()),
    }
}

/// `basics`: a singleton's identity, job data, data exchange with itself, names, and what
/// needs a server. Prints `singleton nspace=... rank=... host=...` and the job keys.
fn basics() -> Res {
    let c = Client::init().map_err(e("init"))?;
    let me = c.proc().clone();
    let wild = wildcard(&me.nspace);
    let host = get_str(&c, &me, attr::HOSTNAME)?;
    println!(
        "singleton nspace={} rank={} host={host}",
        me.nspace, me.rank
    );
    for key in [
        attr::JOB_SIZE,
        attr::UNIV_SIZE,
        attr::LOCAL_SIZE,
        attr::MAX_PROCS,
        attr::NUM_NODES,
    ] {
        println!("{key}={}", get_u32(&c, &wild, key)?);
    }
    for key in [
        attr::LOCAL_RANK,
        attr::NODE_RANK,
        attr::APPNUM,
        attr::RANK,
        attr::NODEID,
    ] {
        println!("{key}={}", get_u32(&c, &me, key)?);
    }
    println!(
        "{}={}",
        attr::LOCAL_PEERS,
        get_str(&c, &wild, attr::LOCAL_PEERS)?
    );
    println!("{}={}", attr::NSPACE, get_str(&c, &wild, attr::NSPACE)?);
    println!(
        "{}={}",
        attr::SINGLETON,
        get_str(&c, &wild, attr::SINGLETON)?
    );

    // Put, commit, fence (over the job, and over itself by name), get.
    c.put(Scope::GLOBAL, "s.global", 7u32).map_err(e("put"))?;
    c.put(Scope::LOCAL, "s.local", "here").map_err(e("put"))?;
    c.commit().map_err(e("commit"))?;
    c.fence(&[], &[Info::attr(attr::COLLECT_DATA, true)])
        .map_err(e("fence"))?;
    c.fence(std::slice::from_ref(&me), &[])
        .map_err(e("fence over myself"))?;
    c.fence(std::slice::from_ref(&wild), &[])
        .map_err(e("fence over my job"))?;
    check!(
        c.get(&me, "s.global", &[]).map_err(e("get"))? == Value::Uint32(7),
        "own value"
    );
    let miss = status_of("get of a key never put", c.get(&me, "s.none", &[]))?;
    check!(miss == Status::ERR_NOT_FOUND, "missing key: {miss:?}");
    let other_rank = Proc::new(me.nspace.clone(), 1);
    let s = status_of("get from rank 1", c.get(&other_rank, "s.global", &[]))?;
    check!(s == Status::ERR_NOT_FOUND, "rank 1 of a job of one: {s:?}");
    println!("data ok");

    // Names: publish, lookup, duplicate, unpublish, lookup of what is gone.
    c.publish(&[info("svc.port", "tcp://1.2.3.4:5")?], &[])
        .map_err(e("publish"))?;
    let found = c.lookup(&["svc.port"], &[]).map_err(e("lookup"))?;
    check!(
        found.len() == 1 && found[0].value == Value::from("tcp://1.2.3.4:5"),
        "lookup: {found:?}"
    );
    check!(found[0].proc.as_ref() == Some(&me), "publisher {found:?}");
    let dup = status_of(
        "second publish",
        c.publish(&[info("svc.port", "other")?], &[]),
    )?;
    check!(dup == Status::ERR_DUPLICATE_KEY, "duplicate: {dup:?}");
    c.unpublish(&["svc.port"], &[]).map_err(e("unpublish"))?;
    let gone = status_of("lookup after unpublish", c.lookup(&["svc.port"], &[]))?;
    check!(gone == Status::ERR_NOT_FOUND, "after unpublish: {gone:?}");
    // A lookup that waits is released by a publish from another thread.
    let c2 = c.clone();
    let waiter = std::thread::spawn(move || {
        c2.lookup(
            &["late.key"],
            &[
                Info::attr(attr::WAIT, true),
                Info::attr(attr::TIMEOUT, 30i32),
            ],
        )
    });
    c.publish(&[info("late.key", 99u32)?], &[])
        .map_err(e("publish late"))?;
    let late = waiter
        .join()
        .map_err(|_| "the waiting thread panicked".to_owned())?
        .map_err(e("waiting lookup"))?;
    check!(late[0].value == Value::Uint32(99), "late: {late:?}");
    // One that waits for a key nobody publishes ends at its TIMEOUT.
    let t = status_of(
        "lookup that nobody answers",
        c.lookup(
            &["never"],
            &[
                Info::attr(attr::WAIT, true),
                Info::attr(attr::TIMEOUT, 1i32),
            ],
        ),
    )?;
    check!(t == Status::ERR_TIMEOUT, "timed out lookup: {t:?}");
    println!("names ok");

    // What needs a server.
    let other = Proc::new(Nspace::new("elsewhere").map_err(e("nspace"))?, 0);
    let s = status_of(
        "fence with another job",
        c.fence(&[me.clone(), other.clone()], &[]),
    )?;
    println!("fence-other={s:?}");
    let s = status_of(
        "connect",
        c.connect(&[me.clone(), wildcard(&other.nspace)], &[]),
    )?;
    println!("connect-other={s:?}");
    let s = status_of("get from another job", c.get(&other, "k", &[]))?;
    println!("get-other={s:?}");
    let s = status_of(
        "query",
        c.query(&[pmix_wire::Query {
            keys: vec![Key::new(attr::QUERY_NAMESPACES).map_err(e("key"))?],
            qualifiers: vec![],
        }]),
    )?;
    println!("query={s:?}");
    // Events raised reach nobody else, and are no error.
    c.notify_event(Status(-150), DataRange::SESSION, &[])
        .map_err(e("notify"))?;
    c.finalize().map_err(e("finalize"))?;
    let after = status_of("put after finalize", c.put(Scope::GLOBAL, "k", 1u8))?;
    check!(after == Status::ERR_INIT, "after finalize: {after:?}");
    Ok(())
}

/// `reinit N`: N init/finalize cycles; the namespace stays the same, data does not survive.
fn reinit(n: u32) -> Res {
    let mut first: Option<Nspace> = None;
    for i in 0..n {
        let c = Client::init().map_err(e("init"))?;
        let ns = c.proc().nspace.clone();
        check!(
            first.as_ref().is_none_or(|f| *f == ns),
            "cycle {i}: {ns} vs {first:?}"
        );
        first.get_or_insert(ns);
        check!(
            get_u32(&c, &wildcard(&c.proc().nspace), attr::JOB_SIZE)? == 1,
            "job size"
        );
        let gone = status_of("get of the last cycle's key", c.get(c.proc(), "cycle", &[]))?;
        check!(gone == Status::ERR_NOT_FOUND, "cycle {i}: {gone:?}");
        c.put(Scope::GLOBAL, "cycle", i).map_err(e("put"))?;
        c.commit().map_err(e("commit"))?;
        c.fence(&[], &[]).map_err(e("fence"))?;
        check!(
            c.get(c.proc(), "cycle", &[]).map_err(e("get"))? == Value::Uint32(i),
            "cycle value"
        );
        c.finalize().map_err(e("finalize"))?;
    }
    println!("cycles={n}");
    Ok(())
}

/// The event each child of `spawn` raises for its parent.
const CHILD_EVENT: Status = Status(-151);

/// `spawn N`: a singleton registers for an event, puts, commits and publishes, spawns N
/// children (`child` below), fences with them, reads what each published back and says whose
/// events it heard. Prints `parent ...` lines; the
/// children's lines come through the private server's output.
fn spawn(n: u32) -> Res {
    let c = Client::init().map_err(e("init"))?;
    let me = c.proc().clone();
    // Registered while a singleton: the private server must learn of it.
    let heard = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let h = std::sync::Arc::clone(&heard);
    c.register_event_handler(&[CHILD_EVENT], &[], move |ev| {
        if let Ok(mut v) = h.lock() {
            v.push(ev.source.to_string());
        }
    })
    .map_err(e("register"))?;
    c.put(Scope::GLOBAL, "parent.data", format!("from {me}"))
        .map_err(e("put"))?;
    c.commit().map_err(e("commit"))?;
    c.publish(&[info("parent.port", "port-7")?], &[])
        .map_err(e("publish"))?;
    let ns = c
        .spawn(&[], &[this_program(&["child", &n.to_string()], n)?])
        .map_err(e("spawn"))?;
    println!("parent nspace={} spawned={ns}", me.nspace);
    c.fence(&[me.clone(), wildcard(&ns)], &[])
        .map_err(e("fence with the children"))?;
    let keys: Vec<String> = (0..n).map(|r| format!("child.{r}")).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    let found = c.lookup(&keys, &[]).map_err(e("lookup of the children"))?;
    for p in &found {
        let who = p.proc.as_ref().map(ToString::to_string).unwrap_or_default();
        println!("parent read {}={:?} from {who}", p.key.as_str(), p.value);
    }
    check!(
        found.iter().all(|p| p.is_found()),
        "not every child: {found:?}"
    );
    // Each child raised its event before the fence the parent has passed.
    let mut heard = heard
        .lock()
        .map_err(|_| "a poisoned lock".to_owned())?
        .clone();
    heard.sort();
    println!("parent heard {}", heard.join(" "));
    // Everyone has read before anyone finalizes.
    c.fence(&[me, wildcard(&ns)], &[])
        .map_err(e("last fence"))?;
    c.finalize().map_err(e("finalize"))
}

/// `child N`: a child of `spawn N`: finds its parent, reads what it committed and published,
/// publishes for it, and fences with it.
fn child(n: u32) -> Res {
    let c = Client::init().map_err(e("init"))?;
    let me = c.proc().clone();
    let wild = wildcard(&me.nspace);
    let parent = parent_of(&c)?;
    check!(get_u32(&c, &wild, attr::JOB_SIZE)? == n, "job size");
    let single = c.get(&wild, attr::SINGLETON, &[]);
    check!(
        single
            .as_ref()
            .is_err_and(|e| e.status() == Status::ERR_NOT_FOUND),
        "a launched child has SINGLETON: {single:?}"
    );
    let data = get_str(&c, &parent, "parent.data")?;
    let port = c.lookup(&["parent.port"], &[]).map_err(e("lookup"))?;
    let port = port[0].value.as_str().unwrap_or_default().to_owned();
    println!(
        "child rank={} parent={parent} data={data:?} port={port}",
        me.rank
    );
    c.publish(&[info(&format!("child.{}", me.rank), me.rank.0)?], &[])
        .map_err(e("publish"))?;
    c.notify_event(CHILD_EVENT, DataRange::SESSION, &[])
        .map_err(e("notify"))?;
    c.fence(&[parent.clone(), wild.clone()], &[])
        .map_err(e("fence with the parent"))?;
    c.fence(&[parent, wild], &[]).map_err(e("last fence"))?;
    c.finalize().map_err(e("finalize"))
}

/// `lose-server`: a singleton spawns one child (`kill-server`) that kills the private server;
/// the lookup the singleton is waiting in, with no timeout, must end with a lost connection,
/// and later calls that need the server fail at once.
fn lose_server() -> Res {
    let c = Client::init().map_err(e("init"))?;
    let me = c.proc().clone();
    let ns = c
        .spawn(&[], &[this_program(&["kill-server"], 1)?])
        .map_err(e("spawn"))?;
    // The child kills the server after this, not while the spawn's answer is on its way.
    c.fence(&[me.clone(), wildcard(&ns)], &[])
        .map_err(e("fence with the child"))?;
    let s = status_of(
        "a lookup nobody will answer",
        c.lookup(&["never.published"], &[Info::attr(attr::WAIT, true)]),
    )?;
    println!("waiting lookup={s:?}");
    let s = status_of("a fence after", c.fence(&[], &[]))?;
    println!("fence after={s:?}");
    // What is local still is.
    let size = get_u32(&c, &wildcard(&me.nspace), attr::JOB_SIZE)?;
    println!("job size after={size}");
    Ok(())
}

/// `kill-server`: kills its launcher, the private server (it runs as pmixrun's child).
fn kill_server() -> Res {
    let c = Client::init().map_err(e("init"))?;
    let wild = wildcard(&c.proc().nspace);
    let parent = parent_of(&c)?;
    c.fence(&[parent, wild], &[])
        .map_err(e("fence with the parent"))?;
    let server = nix::unistd::getppid();
    nix::sys::signal::kill(server, nix::sys::signal::Signal::SIGKILL)
        .map_err(e("killing the server"))?;
    // Dies with it (pmixrun's processes get SIGKILL when it does).
    loop {
        std::thread::park();
    }
}

/// `orphan`: a singleton spawns one child (`hang`), fences with it, says `parent ready` and
/// blocks until it is killed; the test kills it, and its private server must then stop the
/// child and end.
fn orphan() -> Res {
    let c = Client::init().map_err(e("init"))?;
    let me = c.proc().clone();
    let ns = c
        .spawn(&[], &[this_program(&["hang"], 1)?])
        .map_err(e("spawn"))?;
    c.fence(&[me, wildcard(&ns)], &[])
        .map_err(e("fence with the child"))?;
    println!("parent ready");
    loop {
        std::thread::park();
    }
}

/// `hang`: the child of `orphan`: fences with its parent, prints its pid, blocks.
fn hang() -> Res {
    let c = Client::init().map_err(e("init"))?;
    let wild = wildcard(&c.proc().nspace);
    let parent = parent_of(&c)?;
    println!("child pid={}", std::process::id());
    c.fence(&[parent, wild], &[])
        .map_err(e("fence with the parent"))?;
    loop {
        std::thread::park();
    }
}

/// `no-server-to-start`: a spawn whose private server cannot start fails, and the process
/// goes on as a singleton.
fn no_server_to_start() -> Res {
    let c = Client::init().map_err(e("init"))?;
    let s = status_of("spawn", c.spawn(&[], &[this_program(&["child", "1"], 1)?]))?;
    println!("spawn={s:?}");
    c.put(Scope::GLOBAL, "after", 1u8).map_err(e("put"))?;
    c.commit().map_err(e("commit"))?;
    c.fence(&[], &[]).map_err(e("fence"))?;
    check!(
        c.get(c.proc(), "after", &[]).map_err(e("get"))? == Value::Uint8(1),
        "value after the failed spawn"
    );
    c.finalize().map_err(e("finalize"))
}

/// `init-status`: init must fail; prints the status.
fn init_status() -> Res {
    let s = status_of("init", Client::init())?;
    println!("init={s:?}");
    Ok(())
}

fn run(args: &[String]) -> Res {
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    let num = |i: usize| -> Result<u32, String> { arg(i).parse().map_err(e("N")) };
    match arg(0) {
        "basics" => basics(),
        "reinit" => reinit(num(1)?),
        "spawn" => spawn(num(1)?),
        "child" => child(num(1)?),
        "lose-server" => lose_server(),
        "kill-server" => kill_server(),
        "init-status" => init_status(),
        "orphan" => orphan(),
        "no-server-to-start" => no_server_to_start(),
        "hang" => hang(),
        other => Err(format!("unknown scenario {other:?}")),
    }
}

fn main() -> ExitCode {
    pmix_tests::scenario::run_main(run)
}
