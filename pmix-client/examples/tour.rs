//! A tour of the client's calls in one job, to check a server end to end: every rank runs the
//! same steps, in the order given, and checks what it gets back. The end-to-end tests run it
//! under a real OpenPMIx server (`pmix-tests/tests/openpmix_client.rs`); it runs the same under
//! `pmixrun`.
//!
//! `tour [STEP ...]` (default: `job fetch names events`), on one node:
//!
//! - `job`: the job's size, this node's peers (`resolve_peers`: every rank) and the job's
//!   nodes (`resolve_nodes`: one); prints `job rank=R peers=P nodes=N`.
//! - `fetch`: puts a `GLOBAL` and a `LOCAL` value, commits, fences without collecting, then
//!   reads all of every other rank's data (`get_all`) and one of its keys, and checks that a
//!   key nobody put is not found (`IMMEDIATE`); prints `fetch rank=R peers=P`.
//! - `names`: rank 0 publishes a name the others are already waiting for (lookup with `WAIT`);
//!   after a fence it unpublishes it, and after another every rank's lookup fails; prints
//!   `names rank=R found=K` (K = 1 for the ranks that waited).
//! - `events`: every rank registers a handler for a code of its own; after a fence rank 0
//!   notifies the namespace, and every other rank waits for that event (rank 0's, with its
//!   message); then each deregisters; prints `events rank=R got=G`.
//! - `refused`: a spawn the server cannot do (`pmix_host` has no spawn) fails rather than
//!   hangs; prints `refused rank=R status=S`.
//! - `unknown`: the peers of a namespace nobody registered, and a key of one of its
//!   processes, fail rather than hang; prints `unknown rank=R status=S`.
//! - `abort`: after a fence rank 1 prints `aborting rank=1 code=7` and aborts the job with 7;
//!   the others wait in a fence only the launcher can end.
//!
//! After the last step every rank finalizes and prints `OK rank=R size=N`; a failure prints
//! `FAIL rank=R: <what>` on stderr and exits 2.

use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

use pmix_client::{App, Client, DataRange, Error, Info, Proc, Rank, Scope, Status, Value, attr};

/// The event code of the `events` step (below `PMIX_EXTERNAL_ERR_BASE`, for users).
const TOUR_EVENT: Status = Status(-3101);

/// How long a rank waits for something another rank does.
const WAIT: Duration = Duration::from_secs(20);

type Res<T> = Result<T, String>;

fn ctx(what: &str) -> impl FnOnce(Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

fn size_of(c: &Client) -> Res<u32> {
    let wild = Proc::new(c.proc().nspace.clone(), Rank::WILDCARD);
    let v = c
        .get(&wild, attr::JOB_SIZE, &[])
        .map_err(ctx("get job size"))?;
    v.as_u32()
        .ok_or_else(|| format!("job size is {v:?}, not a number"))
}

fn job(c: &Client, size: u32) -> Res<()> {
    let me = c.proc().clone();
    let peers = c
        .resolve_peers(None, &me.nspace)
        .map_err(ctx("resolve_peers"))?;
    let want: Vec<Proc> = (0..size).map(|r| Proc::new(me.nspace.clone(), r)).collect();
    if peers != want {
        return Err(format!(
            "this node's peers are {peers:?}, expected {want:?}"
        ));
    }
    let nodes = c.resolve_nodes(&me.nspace).map_err(ctx("resolve_nodes"))?;
    if nodes.len() != 1 {
        return Err(format!("the job runs on {nodes:?}, expected one node"));
    }
    println!(
        "job rank={} peers={} nodes={}",
        me.rank.0,
        peers.len(),
        nodes.len()
    );
    Ok(())
}

fn fetch(c: &Client, size: u32) -> Res<()> {
    let me = c.proc().clone();
    let r = me.rank.0;
    let value = |r: u32| u64::from(r) * 10 + 7;
    c.put(Scope::GLOBAL, "tour.global", value(r))
        .map_err(ctx("put"))?;
    c.put(Scope::LOCAL, "tour.local", format!("local of {r}"))
        .map_err(ctx("put"))?;
    c.commit().map_err(ctx("commit"))?;
    c.fence(&[], &[]).map_err(ctx("fence"))?;
    for peer in (0..size).filter(|&p| p != r) {
        let p = Proc::new(me.nspace.clone(), peer);
        let all = c.get_all(&p, &[]).map_err(ctx("get_all"))?;
        let Value::DataArray(a) = &all else {
            return Err(format!("all of rank {peer}'s data is {all:?}"));
        };
        let find = |k: &str| a.infos().find(|i| i.key.as_str() == k).map(|i| &i.value);
        if find("tour.global") != Some(&Value::Uint64(value(peer)))
            || find("tour.local") != Some(&Value::String(format!("local of {peer}")))
        {
            return Err(format!("all of rank {peer}'s data is {all:?}"));
        }
        let one = c.get(&p, "tour.global", &[]).map_err(ctx("get"))?;
        if one != Value::Uint64(value(peer)) {
            return Err(format!("tour.global of rank {peer} is {one:?}"));
        }
        let immediate = [Info::attr(attr::IMMEDIATE, true)];
        if let Ok(v) = c.get(&p, "tour.never.put", &immediate) {
            return Err(format!("a key rank {peer} never put is {v:?}"));
        }
    }
    println!("fetch rank={r} peers={size}");
    Ok(())
}

fn names(c: &Client) -> Res<()> {
    const KEY: &str = "tour.service";
    let r = c.proc().rank.0;
    let mut found = 0;
    if r == 0 {
        c.publish(
            &[Info::new(
                pmix_client::Key::new(KEY).map_err(|e| e.to_string())?,
                "at rank 0",
            )],
            &[],
        )
        .map_err(ctx("publish"))?;
    } else {
        let wait = [
            Info::attr(attr::WAIT, true),
            Info::attr(attr::TIMEOUT, WAIT.as_secs() as i32),
        ];
        let got = c.lookup(&[KEY], &wait).map_err(ctx("lookup"))?;
        let publisher = Proc::new(c.proc().nspace.clone(), 0);
        if got.len() != 1
            || got[0].value != Value::String("at rank 0".into())
            || got[0].proc.as_ref() != Some(&publisher)
        {
            return Err(format!("lookup of {KEY} gave {got:?}"));
        }
        found += 1;
    }
    c.fence(&[], &[]).map_err(ctx("fence"))?;
    if r == 0 {
        c.unpublish(&[KEY], &[]).map_err(ctx("unpublish"))?;
    }
    c.fence(&[], &[]).map_err(ctx("fence"))?;
    match c.lookup(&[KEY], &[]) {
        Err(Error::NotPublished(_)) => {}
        other => return Err(format!("lookup after unpublish gave {other:?}")),
    }
    println!("names rank={r} found={found}");
    Ok(())
}

fn events(c: &Client) -> Res<()> {
    let me = c.proc().clone();
    let (tx, rx) = mpsc::channel();
    let id = c
        .register_event_handler(&[TOUR_EVENT], &[], move |ev| {
            let _ = tx.send(ev.clone());
        })
        .map_err(ctx("register_event_handler"))?;
    c.fence(&[], &[]).map_err(ctx("fence"))?;
    let mut got = 0;
    if me.rank.0 == 0 {
        let text = [Info::attr(attr::EVENT_TEXT_MESSAGE, "tour event")];
        c.notify_event(TOUR_EVENT, DataRange::NAMESPACE, &text)
            .map_err(ctx("notify_event"))?;
    } else {
        let from = Proc::new(me.nspace.clone(), 0);
        let ev = rx
            .recv_timeout(WAIT)
            .map_err(|_| format!("no event from rank 0 within {WAIT:?}"))?;
        let text = ev
            .info
            .iter()
            .find(|i| i.key.as_str() == attr::EVENT_TEXT_MESSAGE)
            .and_then(|i| i.value.as_str());
        if ev.code != TOUR_EVENT || ev.source != from || text != Some("tour event") {
            return Err(format!("the event is {ev:?}"));
        }
        got += 1;
    }
    c.fence(&[], &[]).map_err(ctx("fence"))?;
    c.deregister_event_handler(id)
        .map_err(ctx("deregister_event_handler"))?;
    println!("events rank={} got={got}", me.rank.0);
    Ok(())
}

fn refused(c: &Client) -> Res<()> {
    let app = App {
        cmd: "/bin/true".into(),
        argv: vec!["true".into()],
        env: vec![],
        cwd: String::new(),
        maxprocs: 1,
        info: vec![],
    };
    let timeout = [Info::attr(attr::TIMEOUT, WAIT.as_secs() as i32)];
    match c.spawn(&timeout, &[app]) {
        Ok(ns) => Err(format!("spawn succeeded: {ns}")),
        Err(e) => {
            println!("refused rank={} status={:?}", c.proc().rank.0, e.status());
            Ok(())
        }
    }
}

fn unknown(c: &Client) -> Res<()> {
    let ns = pmix_client::Nspace::new("tour.no.such.job").map_err(|e| e.to_string())?;
    let status = match c.resolve_peers(None, &ns) {
        Ok(peers) => return Err(format!("peers of a job nobody started: {peers:?}")),
        Err(e) => e.status(),
    };
    let timeout = [Info::attr(attr::TIMEOUT, WAIT.as_secs() as i32)];
    if let Ok(v) = c.get(&Proc::new(ns, 0), "tour.global", &timeout) {
        return Err(format!("a key of a job nobody started: {v:?}"));
    }
    println!("unknown rank={} status={status:?}", c.proc().rank.0);
    Ok(())
}

fn abort(c: &Client) -> Res<()> {
    c.fence(&[], &[]).map_err(ctx("fence"))?;
    if c.proc().rank.0 == 1 {
        println!("aborting rank=1 code=7");
        c.abort(Status(7), "the tour aborts", &[])
            .map_err(ctx("abort"))?;
        std::process::exit(7);
    }
    // Only the launcher ends this.
    c.fence(&[], &[]).map_err(ctx("fence"))?;
    Err("the fence after the abort completed".into())
}

fn run(c: &Client, steps: &[String]) -> Res<u32> {
    let size = size_of(c)?;
    for s in steps {
        match s.as_str() {
            "job" => job(c, size)?,
            "fetch" => fetch(c, size)?,
            "names" => names(c)?,
            "events" => events(c)?,
            "refused" => refused(c)?,
            "unknown" => unknown(c)?,
            "abort" => abort(c)?,
            other => {
                return Err(format!(
                    "unknown step {other} (job, fetch, names, events, refused, unknown, abort)"
                ));
            }
        }
    }
    Ok(size)
}

fn main() -> ExitCode {
    let mut steps: Vec<String> = std::env::args().skip(1).collect();
    if steps.is_empty() {
        steps = ["job", "fetch", "names", "events"]
            .map(String::from)
            .to_vec();
    }
    let c = match Client::init() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("FAIL rank=-1: init: {e}");
            return ExitCode::from(2);
        }
    };
    let rank = c.proc().rank.0;
    match run(&c, &steps) {
        Ok(size) => {
            if let Err(e) = c.finalize() {
                eprintln!("FAIL rank={rank}: finalize: {e}");
                return ExitCode::from(2);
            }
            println!("OK rank={rank} size={size}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("FAIL rank={rank}: {e}");
            ExitCode::from(2)
        }
    }
}
