//! The dynamic-process scenarios `tests/dynamic.rs` and `cargo xtask conformance` start as
//! real processes: connect and data exchange across namespaces, disconnect, two jobs started
//! apart meeting through publish/lookup, a participant dying in the middle of a connect,
//! event ranges, resolve_peers / resolve_nodes, and spawn.
//!
//! `pmix-dyn-client <scenario>[+<scenario>...] <world>` runs the scenarios in order, in a
//! world of two jobs, A and B, given in one of two ways:
//! - `NSA:SIZE NSB:SIZE`: two namespaces a host registered (the tests' `TestHost`);
//! - `spawn N`: A is the job the launcher started; its rank 0 spawns B, N processes of this
//!   program with the same arguments, which find A through `PMIX_PARENT_ID` (how the
//!   scenarios run under one `pmixrun`).
//!
//! `publish-connect first|second OTHER_SIZE [stood-up]` is a world of its own: the two jobs do
//! not know each other's namespace and find it by publish/lookup (they may be of two runs
//! sharing a name server).
//!
//! Every process plays the part its job and rank give it, prints what it saw as fixed lines
//! (no namespace names, so that callers can compare them), and exits 0 printing `ok`, or
//! prints `FAILED: <what>` and exits 1. Steps between processes are ordered with fences,
//! collectives, lookups that wait for a peer's publication and events, never with sleeps.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, unbounded};
use pmix_client::{
    AppExt, Client, DataArray, DataRange, DataType, Error, Event, HandlerId, Info, Key, Nspace,
    Proc, Rank, Scope, Status, Value, app, attr,
};
use pmix_tests::check;
use pmix_tests::scenario::{Res, e, wildcard};

/// How long a process waits for a peer's step (a waiting lookup, an event, a callback): far
/// more than needed, yet short of the tests' deadline, so that a lost answer is reported by
/// the process that missed it.
const PATIENCE: Duration = Duration::from_secs(30);
/// [`PATIENCE`] as a `PMIX_TIMEOUT` (seconds).
const PATIENCE_SECS: i32 = 30;
/// How soon a connect must fail once a participant has died.
const RELEASE_BOUND: Duration = Duration::from_secs(2);

/// The event code of the range tests (a user code, below `EXTERNAL_ERR_BASE`).
const EV_TEST: Status = Status(-3001);
/// The event code of the markers that close a round of events.
const EV_MARK: Status = Status(-3002);
/// The info key naming which notification an event is.
const TAG: &str = "dyn.tag";

/// What each process commits for `exchange` and `publish-connect`.
const VALUE_KEY: &str = "dyn.value";
/// What each process commits for `disconnect`.
const DISC_KEY: &str = "dyn.disc";
/// Where the first job of `publish-connect ... stood-up` says its connect failed.
const STOOD_UP_KEY: &str = "dyn.stood-up";
/// Where A's rank 0 tells its job the namespace it spawned.
const SPAWNED_KEY: &str = "dyn.spawned";

fn optional() -> Vec<Info> {
    vec![Info::attr(attr::OPTIONAL, true)]
}

fn datum(key: &str, value: impl Into<Value>) -> Result<Info, String> {
    Ok(Info::new(Key::new(key).map_err(e("key"))?, value))
}

/// A value this process holds already (`OPTIONAL`: the server is not asked).
fn local(c: &Client, p: &Proc, key: &str) -> Result<Value, Error> {
    c.get(p, key, &optional())
}

fn local_str(c: &Client, p: &Proc, key: &str) -> Result<String, String> {
    let v = local(c, p, key).map_err(|err| format!("local get of {key} of {p}: {err}"))?;
    v.as_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{key} of {p} is {v:?}"))
}

fn get_u32(c: &Client, p: &Proc, key: &str, info: &[Info]) -> Result<u32, String> {
    let v = c
        .get(p, key, info)
        .map_err(|err| format!("get of {key} of {p}: {err}"))?;
    v.as_u32().ok_or_else(|| format!("{key} of {p} is {v:?}"))
}

/// Checks that a get of data this process must not hold yet fails with `ERR_NOT_FOUND`.
fn not_held(c: &Client, p: &Proc, key: &str) -> Res {
    match local(c, p, key) {
        Err(err) if err.status() == Status::ERR_NOT_FOUND => Ok(()),
        other => Err(format!("{key} of {p} is here already: {other:?}")),
    }
}

fn value_of(p: &Proc, key: &str) -> String {
    format!("{key} of {p}")
}

/// Puts `key` (its value names this process) and commits it.
fn commit_value(c: &Client, key: &str) -> Res {
    let me = c.proc().clone();
    c.put(Scope::GLOBAL, key, value_of(&me, key))
        .map_err(e("put"))?;
    c.commit().map_err(e("commit"))
}

/// Waits (at most [`PATIENCE`]) for a non-blocking call's callback.
fn await_nb<T>(what: &str, rx: &Receiver<T>) -> Result<T, String> {
    rx.recv_timeout(PATIENCE)
        .map_err(|_| format!("{what}: the callback did not run within {PATIENCE:?}"))
}

// ---- the world ---------------------------------------------------------------------------

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Side {
    A,
    B,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::A => "a",
            Side::B => "b",
        }
    }
}

/// The two jobs and this process's place in them.
struct World {
    a: Nspace,
    a_size: u32,
    b: Nspace,
    b_size: u32,
    me: Proc,
    /// B was spawned by A's rank 0 (under a launcher), rather than registered by the host.
    spawned: bool,
}

impl World {
    fn side(&self) -> Side {
        if self.me.nspace == self.a {
            Side::A
        } else {
            Side::B
        }
    }

    fn rank(&self) -> u32 {
        self.me.rank.0
    }

    fn ns(&self, side: Side) -> &Nspace {
        match side {
            Side::A => &self.a,
            Side::B => &self.b,
        }
    }

    fn size(&self, side: Side) -> u32 {
        match side {
            Side::A => self.a_size,
            Side::B => self.b_size,
        }
    }

    fn other(&self) -> Side {
        match self.side() {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }

    fn proc(&self, side: Side, rank: u32) -> Proc {
        Proc::new(self.ns(side).clone(), rank)
    }

    /// Both jobs, whole: the participants of the collectives.
    fn both(&self) -> Vec<Proc> {
        vec![wildcard(&self.a), wildcard(&self.b)]
    }

    /// Every process of both jobs.
    fn everyone(&self) -> Vec<Proc> {
        [Side::A, Side::B]
            .into_iter()
            .flat_map(|s| (0..self.size(s)).map(move |r| (s, r)))
            .map(|(s, r)| self.proc(s, r))
            .collect()
    }

    /// `"a 1"`: how this process names itself in what it prints.
    fn label(&self) -> String {
        format!("{} {}", self.side().name(), self.rank())
    }
}

fn parse_job(arg: &str) -> Result<(Nspace, u32), String> {
    let (ns, size) = arg
        .rsplit_once(':')
        .ok_or_else(|| format!("{arg:?} is not NSPACE:SIZE"))?;
    Ok((
        Nspace::new(ns).map_err(e("namespace"))?,
        size.parse().map_err(e("size"))?,
    ))
}

/// The world of `args` (the scenario's arguments after its name).
fn world(c: &Client, all_args: &[String], args: &[String]) -> Result<World, String> {
    let me = c.proc().clone();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    if arg(0) != "spawn" {
        let (a, a_size) = parse_job(arg(0))?;
        let (b, b_size) = parse_job(arg(1))?;
        check!(
            me.nspace == a || me.nspace == b,
            "{me} is in neither {a} nor {b}"
        );
        return Ok(World {
            a,
            a_size,
            b,
            b_size,
            me,
            spawned: false,
        });
    }
    let n: u32 = arg(1).parse().map_err(e("N"))?;
    let own = wildcard(&me.nspace);
    let own_size = get_u32(c, &own, attr::JOB_SIZE, &[])?;
    let spawned = matches!(c.get(&me, attr::SPAWNED, &[]), Ok(Value::Bool(true)));
    if spawned {
        let parent = c.get(&me, attr::PARENT_ID, &[]).map_err(e("PARENT_ID"))?;
        let parent = parent
            .as_proc()
            .cloned()
            .ok_or_else(|| format!("PARENT_ID is {parent:?}"))?;
        check!(parent.rank == Rank(0), "spawned by {parent}, not by rank 0");
        check!(own_size == n, "spawned job of {own_size}, expected {n}");
        let a_size = get_u32(c, &wildcard(&parent.nspace), attr::JOB_SIZE, &[])?;
        return Ok(World {
            a: parent.nspace,
            a_size,
            b: me.nspace.clone(),
            b_size: own_size,
            me,
            spawned: true,
        });
    }
    let b = if me.rank == Rank(0) {
        let exe = std::env::current_exe().map_err(e("current exe"))?;
        let child = app(exe.to_string_lossy(), n).with_args(all_args.iter().cloned());
        let b = c.spawn(&[], &[child]).map_err(e("spawn"))?;
        c.put(Scope::GLOBAL, SPAWNED_KEY, b.as_str())
            .map_err(e("put"))?;
        c.commit().map_err(e("commit"))?;
        b
    } else {
        // Waits for rank 0 to commit what it spawned.
        let v = c
            .get(
                &Proc::new(me.nspace.clone(), 0),
                SPAWNED_KEY,
                &[Info::attr(attr::TIMEOUT, PATIENCE_SECS)],
            )
            .map_err(e("the spawned namespace"))?;
        let s = v
            .as_str()
            .ok_or_else(|| format!("{SPAWNED_KEY} is {v:?}"))?;
        Nspace::new(s).map_err(e("spawned namespace"))?
    };
    Ok(World {
        a: me.nspace.clone(),
        a_size: own_size,
        b,
        b_size: n,
        me,
        spawned: true,
    })
}

// ---- events --------------------------------------------------------------------------------

/// Registers a handler for `codes` that hands every event to the returned channel.
fn handler(c: &Client, codes: &[Status]) -> Result<(HandlerId, Receiver<Event>), String> {
    let (tx, rx) = unbounded();
    let id = c
        .register_event_handler(codes, &[], move |ev| {
            let _ = tx.send(ev.clone());
        })
        .map_err(e("register_event_handler"))?;
    Ok((id, rx))
}

fn tag_of(ev: &Event) -> &str {
    ev.info
        .iter()
        .find(|i| i.key.as_str() == TAG)
        .and_then(|i| i.value.as_str())
        .unwrap_or("")
}

fn custom_range(procs: &[Proc]) -> Result<Info, String> {
    let list = DataArray::new(
        DataType::PROC,
        procs.iter().cloned().map(Value::Proc).collect(),
    )
    .map_err(e("custom range"))?;
    Ok(Info::attr(attr::EVENT_CUSTOM_RANGE, list))
}

fn notify(c: &Client, code: Status, range: DataRange, tag: &str, custom: &[Proc]) -> Res {
    let mut info = vec![datum(TAG, tag)?];
    if range == DataRange::CUSTOM {
        info.push(custom_range(custom)?);
    }
    c.notify_event(code, range, &info)
        .map_err(e(&format!("notify {tag}")))
}

/// Waits for one event, at most [`PATIENCE`].
fn next_event(rx: &Receiver<Event>, what: &str) -> Result<Event, String> {
    rx.recv_timeout(PATIENCE)
        .map_err(|_| format!("no {what} within {PATIENCE:?}"))
}

/// Waits for the marker of every sender in `from` but this process, in any order, each
/// carrying `tag`; anything else on the channel is an error.
fn await_marks(w: &World, rx: &Receiver<Event>, from: &[Proc], tag: &str) -> Res {
    let mut missing: Vec<Proc> = from.iter().filter(|p| **p != w.me).cloned().collect();
    while !missing.is_empty() {
        let ev = next_event(rx, &format!("{tag} marker from {missing:?}"))?;
        check!(
            tag_of(&ev) == tag,
            "marker {:?} in round {tag}",
            tag_of(&ev)
        );
        let at = missing.iter().position(|p| *p == ev.source);
        let Some(at) = at else {
            return Err(format!("unexpected marker {ev:?}"));
        };
        missing.swap_remove(at);
    }
    Ok(())
}

fn affected(ev: &Event) -> Option<&Proc> {
    ev.info
        .iter()
        .find(|i| i.key.as_str() == attr::EVENT_AFFECTED_PROC)
        .and_then(|i| i.value.as_proc())
}

// ---- scenarios -----------------------------------------------------------------------------

/// `spawned` (spawn worlds): the children know their parent; both jobs meet in a fence over
/// the two namespaces.
fn spawned(c: &Client, w: &World) -> Res {
    check!(w.spawned, "spawned needs the world `spawn N`");
    let other = w.other();
    let size = get_u32(c, &wildcard(w.ns(other)), attr::JOB_SIZE, &[])?;
    check!(
        size == w.size(other),
        "job size of {} is {size}",
        w.ns(other)
    );
    if w.side() == Side::B {
        let parent = c
            .get(c.proc(), attr::PARENT_ID, &[])
            .map_err(e("PARENT_ID"))?;
        check!(
            parent.as_proc() == Some(&w.proc(Side::A, 0)),
            "PARENT_ID is {parent:?}"
        );
    }
    c.fence(&w.both(), &[]).map_err(e("fence over both jobs"))?;
    match w.side() {
        Side::A => println!(
            "a {} of {}: b has {} processes",
            w.rank(),
            w.a_size,
            w.b_size
        ),
        Side::B => println!(
            "b {} of {}: spawned by a 0 of {}",
            w.rank(),
            w.b_size,
            w.a_size
        ),
    }
    Ok(())
}

/// Checks that this process holds `key` of every other process of both jobs, and both jobs'
/// sizes, without asking the server.
fn holds_everything(c: &Client, w: &World, key: &str) -> Res {
    for p in w.everyone() {
        if p == w.me {
            continue;
        }
        let v = local_str(c, &p, key)?;
        check!(v == value_of(&p, key), "{key} of {p} is {v:?}");
    }
    for side in [Side::A, Side::B] {
        let size = local(c, &wildcard(w.ns(side)), attr::JOB_SIZE)
            .map_err(|err| format!("local job size of {}: {err}", w.ns(side)))?;
        check!(
            size.as_u32() == Some(w.size(side)),
            "job size of {} is {size:?}",
            w.ns(side)
        );
    }
    Ok(())
}

/// `exchange`: each process commits a value; after a connect over both jobs every process
/// holds every other's value and the other job's size.
fn exchange(c: &Client, w: &World) -> Res {
    commit_value(c, VALUE_KEY)?;
    let other = w.other();
    not_held(c, &w.proc(other, 0), VALUE_KEY)?;
    if !w.spawned {
        // A spawned child has read its parent's job size already.
        not_held(c, &wildcard(w.ns(other)), attr::JOB_SIZE)?;
    }
    c.connect(&w.both(), &[]).map_err(e("connect"))?;
    holds_everything(c, w, VALUE_KEY)?;
    println!(
        "{} of {}: connected to {} of {}, read {} values",
        w.label(),
        w.size(w.side()),
        other.name(),
        w.size(other),
        w.a_size + w.b_size - 1
    );
    Ok(())
}

/// What each process commits for `fence-both`, `fence-part` and `publish-connect`.
const FENCE_KEY: &str = "dyn.fence";

/// `fence-both` (`part` false): a collecting fence over both whole jobs, with no connect
/// before it; afterwards every process holds every other's value without asking the server.
/// `fence-part` (`part` true): the fence is over all of A and B's rank 0 only; the rest of B
/// stays out, so the participants hold each other's values and not theirs, which a get still
/// finds through the server. Both end with a barrier over both jobs.
fn fence_across(c: &Client, w: &World, part: bool) -> Res {
    commit_value(c, FENCE_KEY)?;
    let mut procs = vec![wildcard(&w.a)];
    procs.push(if part {
        w.proc(Side::B, 0)
    } else {
        wildcard(&w.b)
    });
    let inside = |p: &Proc| p.nspace == w.a || !part || p.rank == Rank(0);
    let collect = [Info::attr(attr::COLLECT_DATA, true)];
    if inside(&w.me) {
        c.fence(&procs, &collect).map_err(e("fence"))?;
        let mut read = 0;
        for p in w.everyone().into_iter().filter(|p| *p != w.me) {
            if inside(&p) {
                let v = local_str(c, &p, FENCE_KEY)?;
                check!(v == value_of(&p, FENCE_KEY), "{FENCE_KEY} of {p} is {v:?}");
                read += 1;
            } else {
                not_held(c, &p, FENCE_KEY)?;
                let v = c
                    .get(&p, FENCE_KEY, &[Info::attr(attr::TIMEOUT, PATIENCE_SECS)])
                    .map_err(e("get of a process outside the fence"))?;
                check!(
                    v.as_str() == Some(value_of(&p, FENCE_KEY).as_str()),
                    "{FENCE_KEY} of {p} (outside the fence) is {v:?}"
                );
            }
        }
        println!(
            "{}: fenced over {}, held {read} values",
            w.label(),
            if part { "a and b 0" } else { "a and b" }
        );
    } else {
        println!("{}: stayed out of the fence", w.label());
    }
    // Nobody leaves (taking its data along) before the gets above are done.
    c.fence(&w.both(), &[]).map_err(e("closing barrier"))
}

/// `disconnect`: connect and disconnect (blocking, then non-blocking); the data the connect
/// brought stays. With a host-registered world, B's last rank then ends without finalize:
/// its own job hears of it, A (no longer connected) does not.
fn disconnect(c: &Client, w: &World) -> Res {
    let leaver = (!w.spawned).then(|| w.proc(Side::B, w.b_size - 1));
    if leaver.is_some() {
        check!(w.b_size >= 2, "disconnect needs two processes in b");
    }
    let (_, events) = handler(c, &[Status::ERR_PROC_TERM_WO_SYNC, EV_MARK])?;
    commit_value(c, DISC_KEY)?;
    c.connect(&w.both(), &[]).map_err(e("connect"))?;
    holds_everything(c, w, DISC_KEY)?;
    c.disconnect(&w.both(), &[]).map_err(e("disconnect"))?;
    holds_everything(c, w, DISC_KEY)?;
    let (tx, rx) = unbounded();
    let done = tx.clone();
    c.connect_nb(&w.both(), &[], move |r| {
        let _ = done.send(r);
    });
    await_nb("connect_nb", &rx)?.map_err(e("connect_nb"))?;
    c.disconnect_nb(&w.both(), &[], move |r| {
        let _ = tx.send(r);
    });
    await_nb("disconnect_nb", &rx)?.map_err(e("disconnect_nb"))?;
    let Some(leaver) = leaver else {
        println!("{}: connected and disconnected twice", w.label());
        return Ok(());
    };
    if w.me == leaver {
        println!("{}: leaving without finalize", w.label());
        std::process::exit(1);
    }
    let first = w.proc(Side::B, 0);
    if w.side() == Side::B {
        let ev = next_event(&events, "event about the leaver")?;
        check!(
            ev.code == Status::ERR_PROC_TERM_WO_SYNC && affected(&ev) == Some(&leaver),
            "expected the end of {leaver}, got {ev:?}"
        );
        if w.me == first {
            // Whatever the server sent A about the leaver went out before this.
            notify(
                c,
                EV_MARK,
                DataRange::CUSTOM,
                "after-leave",
                &[wildcard(&w.a)],
            )?;
        }
        println!("{}: heard that {} left", w.label(), leaver.rank);
    } else {
        let ev = next_event(&events, "marker after the leave")?;
        check!(
            ev.code == EV_MARK && ev.source == first,
            "a disconnected job heard {ev:?}"
        );
        println!("{}: heard nothing of b after the disconnect", w.label());
    }
    Ok(())
}

/// `publish-connect first|second OTHER_SIZE [stood-up|left]`: two jobs started apart; each rank
/// 0 publishes its namespace, every process looks the other's up (waiting for it), then the
/// first's rank 0 connects with the whole second job, then all connect and read each other's
/// values, commit a second value and read each other's after a
/// collecting fence over both jobs, and disconnect. With `stood-up`, the second never
/// connects: the first's connect (`PMIX_TIMEOUT` 2 s) must fail with `ERR_TIMEOUT` within
/// [`PATIENCE`], after which its rank 0 publishes [`STOOD_UP_KEY`], which the second waits for
/// before it leaves (so that the failure is the timeout's, not its end's). With `left`, the
/// first's rank 0 publishes [`STOOD_UP_KEY`] once every rank of its job found the second, and
/// connects with no timeout; the second leaves when it sees the key, without connecting: the
/// first's connect must fail (with whichever status says the other run is gone) within
/// [`PATIENCE`], not wait for ever.
fn publish_connect(c: &Client, args: &[String]) -> Res {
    let me = c.proc().clone();
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    let (mine, theirs) = match arg(0) {
        "first" => ("dyn.meet.first", "dyn.meet.second"),
        "second" => ("dyn.meet.second", "dyn.meet.first"),
        other => {
            return Err(format!(
                "publish-connect: {other:?} is neither first nor second"
            ));
        }
    };
    let other_size: u32 = arg(1).parse().map_err(e("OTHER_SIZE"))?;
    let own_size = get_u32(c, &wildcard(&me.nspace), attr::JOB_SIZE, &[])?;
    commit_value(c, VALUE_KEY)?;
    if me.rank == Rank(0) {
        c.publish(&[datum(mine, me.nspace.as_str())?], &[])
            .map_err(e("publish"))?;
    }
    let found = c
        .lookup(
            &[theirs],
            &[
                Info::attr(attr::WAIT, true),
                Info::attr(attr::TIMEOUT, PATIENCE_SECS),
            ],
        )
        .map_err(e("lookup"))?;
    let entry = found.first().ok_or("lookup gave no entry")?;
    let ns = entry
        .value
        .as_str()
        .ok_or_else(|| format!("{theirs} is {:?}", entry.value))?;
    let other = Nspace::new(ns).map_err(e("namespace"))?;
    check!(other != me.nspace, "found my own namespace");
    check!(
        entry.proc == Some(Proc::new(other.clone(), 0)),
        "{theirs} published by {:?}",
        entry.proc
    );
    not_held(c, &Proc::new(other.clone(), 0), VALUE_KEY)?;
    let stood_up = match arg(2) {
        "stood-up" => Some(StoodUp::Waits),
        "left" => Some(StoodUp::Leaves),
        _ => None,
    };
    let (a, a_size, b, b_size) = if arg(0) == "first" {
        (me.nspace.clone(), own_size, other, other_size)
    } else {
        (other, other_size, me.nspace.clone(), own_size)
    };
    let w = World {
        a,
        a_size,
        b,
        b_size,
        me,
        spawned: false,
    };
    if let Some(how) = stood_up {
        return stood_up_connect(c, &w, arg(0) == "first", how);
    }
    // First the first job's rank 0 alone with the whole second job: then the servers of
    // each run know the other's namespace, or not, depending on where their processes are
    // (a server of the first run hosting only its other ranks does not).
    if w.side() == Side::B || w.rank() == 0 {
        let pair = [w.proc(Side::A, 0), wildcard(&w.b)];
        c.connect(&pair, &[]).map_err(e("connect of a 0 and b"))?;
    }
    c.connect(&w.both(), &[]).map_err(e("connect"))?;
    holds_everything(c, &w, VALUE_KEY)?;
    commit_value(c, FENCE_KEY)?;
    not_held(c, &w.proc(w.other(), 0), FENCE_KEY)?;
    c.fence(&w.both(), &[Info::attr(attr::COLLECT_DATA, true)])
        .map_err(e("fence"))?;
    holds_everything(c, &w, FENCE_KEY)?;
    if w.rank() == 0 {
        c.unpublish(&[mine], &[]).map_err(e("unpublish"))?;
    }
    c.disconnect(&w.both(), &[]).map_err(e("disconnect"))?;
    println!(
        "{} {}: met {} processes by lookup, connected and fenced",
        arg(0),
        w.rank(),
        w.size(w.other())
    );
    Ok(())
}

/// How the second job of [`publish_connect`] lets the first's connect down.
#[derive(Clone, Copy)]
enum StoodUp {
    /// It stays, never connecting, until the first's connect timed out.
    Waits,
    /// It leaves once the first found it; the first's connect has no timeout.
    Leaves,
}

/// The `stood-up` and `left` ends of [`publish_connect`].
fn stood_up_connect(c: &Client, w: &World, first: bool, how: StoodUp) -> Res {
    let wait = [
        Info::attr(attr::WAIT, true),
        Info::attr(attr::TIMEOUT, PATIENCE_SECS),
    ];
    if !first {
        c.lookup(&[STOOD_UP_KEY], &wait)
            .map_err(e("lookup of the first's failure"))?;
        println!("second {}: never connected", w.rank());
        return Ok(());
    }
    let own = [wildcard(&w.me.nspace)];
    if let StoodUp::Leaves = how {
        // Every rank of the first job found the second before its rank 0 lets it go.
        c.fence(&own, &[]).map_err(e("fence"))?;
        if w.rank() == 0 {
            c.publish(&[datum(STOOD_UP_KEY, "leave")?], &[])
                .map_err(e("publish"))?;
        }
    }
    let info = match how {
        StoodUp::Waits => vec![Info::attr(attr::TIMEOUT, 2i32)],
        StoodUp::Leaves => Vec::new(),
    };
    let t0 = Instant::now();
    let r = c.connect(&w.both(), &info);
    let took = t0.elapsed();
    let status = match r {
        Err(err) => err.status(),
        Ok(()) => return Err("a connect with a run that never connects succeeded".into()),
    };
    check!(took < PATIENCE, "the connect failed only after {took:?}");
    if let StoodUp::Leaves = how {
        // Which status depends on how far the other run had gone: the name server no
        // longer knowing its namespace, the namespace ending, or the run disconnecting.
        let gone = [
            Status::ERR_NOT_FOUND,
            Status::ERR_PROC_TERM_WO_SYNC,
            Status::ERR_UNREACH,
        ];
        check!(gone.contains(&status), "the connect failed with {status:?}");
        println!("first {}: the other run left, the connect failed", w.rank());
        return Ok(());
    }
    check!(
        status == Status::ERR_TIMEOUT,
        "a connect nobody answers failed with {status:?}"
    );
    // Every rank of the first job has failed before its rank 0 tells the second.
    c.fence(&own, &[]).map_err(e("fence"))?;
    if w.rank() == 0 {
        c.publish(&[datum(STOOD_UP_KEY, "timed out")?], &[])
            .map_err(e("publish"))?;
    }
    println!(
        "first {}: stood up, the connect failed with ERR_TIMEOUT",
        w.rank()
    );
    Ok(())
}

/// `killed` (host-registered world): A and B's first ranks connect; then everybody but B's
/// last rank enters a connect over both whole jobs and says so by publishing; B's last rank
/// waits for that and exits 1 without finalize. The connect fails for everybody with
/// `ERR_PROC_TERM_WO_SYNC` within [`RELEASE_BOUND`], and each survivor's handler hears of
/// the dead process (A through the earlier connect).
fn killed(c: &Client, w: &World) -> Res {
    check!(!w.spawned, "killed needs a host-registered world");
    check!(w.b_size >= 2, "killed needs two processes in b");
    let victim = w.proc(Side::B, w.b_size - 1);
    let survivors: Vec<Proc> = w.everyone().into_iter().filter(|p| *p != victim).collect();
    let in_connect = |p: &Proc| format!("dyn.in-connect.{}.{}", p.nspace, p.rank);
    if w.me == victim {
        let keys: Vec<String> = survivors.iter().map(in_connect).collect();
        let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        c.lookup(
            &keys,
            &[
                Info::attr(attr::WAIT, true),
                Info::attr(attr::TIMEOUT, PATIENCE_SECS),
            ],
        )
        .map_err(e("waiting for the survivors to connect"))?;
        println!("victim: exits in the middle of the connect");
        std::process::exit(1);
    }
    let (_, events) = handler(c, &[Status::ERR_PROC_TERM_WO_SYNC])?;
    // Connect the two jobs without the victim: from now on A hears of B's processes.
    let mut first: Vec<Proc> = vec![wildcard(&w.a)];
    first.extend((0..w.b_size - 1).map(|r| w.proc(Side::B, r)));
    c.connect(&first, &[])
        .map_err(e("connect without the victim"))?;
    let (tx, rx) = unbounded();
    let started = Instant::now();
    c.connect_nb(&w.both(), &[], move |r| {
        let _ = tx.send((r, started.elapsed()));
    });
    // The server handles this process's requests in order: the connect above is under way
    // once this publication is stored.
    c.publish(&[datum(&in_connect(&w.me), true)?], &[])
        .map_err(e("publish"))?;
    let (r, took) = await_nb("connect with the victim", &rx)?;
    match r {
        Err(err) if err.status() == Status::ERR_PROC_TERM_WO_SYNC => {}
        other => {
            return Err(format!(
                "connect with a dying participant gave {other:?}, expected \
                 ERR_PROC_TERM_WO_SYNC"
            ));
        }
    }
    check!(
        took <= RELEASE_BOUND,
        "the connect failed only after {took:?}"
    );
    let ev = next_event(&events, "ERR_PROC_TERM_WO_SYNC event")?;
    check!(
        ev.code == Status::ERR_PROC_TERM_WO_SYNC && affected(&ev) == Some(&victim),
        "expected the end of {victim}, got {ev:?}"
    );
    // The survivors carry on.
    c.fence(&survivors, &[])
        .map_err(e("fence of the survivors"))?;
    println!(
        "{}: released with ERR_PROC_TERM_WO_SYNC, told of b {}",
        w.label(),
        victim.rank
    );
    Ok(())
}

/// What a process must receive in `events`: (tag, source) pairs.
fn expected_events(w: &World) -> Vec<(&'static str, Proc)> {
    let a = |r| w.proc(Side::A, r);
    let b = |r| w.proc(Side::B, r);
    let mut want = Vec::new();
    let me = &w.me;
    if w.side() == Side::A && *me != a(0) {
        want.push(("ns-a", a(0)));
    }
    if *me == a(0) {
        want.push(("local", a(0)));
    }
    if w.side() == Side::B && *me != b(1) {
        want.push(("ns-b", b(1)));
    }
    if *me == a(2) {
        want.push(("custom-one", b(0)));
    }
    if w.side() == Side::B {
        want.push(("custom-b", a(1)));
    }
    want.sort();
    want
}

/// `events`: handlers see exactly the events their ranges give them. A's rank 0 notifies its
/// namespace and itself (`PROC_LOCAL`), B's rank 1 its namespace, B's rank 0 A's rank 2 alone
/// (`CUSTOM`), A's rank 1 all of B (`CUSTOM` with rank `WILDCARD`); no sender hears its own,
/// no namespace event crosses jobs. Markers sent after a fence close the round. Then the
/// test handler is deregistered and the server sends no more test events.
fn events(c: &Client, w: &World) -> Res {
    check!(
        w.a_size >= 3 && w.b_size >= 2,
        "events needs 3 processes in a and 2 in b"
    );
    let a = |r| w.proc(Side::A, r);
    let b = |r| w.proc(Side::B, r);
    let (test_id, tests) = handler(c, &[EV_TEST])?;
    let (_, marks) = handler(c, &[EV_MARK])?;
    c.fence(&w.both(), &[])
        .map_err(e("fence after registering"))?;
    let me = w.me.clone();
    if me == a(0) {
        notify(c, EV_TEST, DataRange::NAMESPACE, "ns-a", &[])?;
        notify(c, EV_TEST, DataRange::PROC_LOCAL, "local", &[])?;
    } else if me == a(1) {
        notify(c, EV_TEST, DataRange::CUSTOM, "custom-b", &[wildcard(&w.b)])?;
    } else if me == b(0) {
        notify(c, EV_TEST, DataRange::CUSTOM, "custom-one", &[a(2)])?;
    } else if me == b(1) {
        notify(c, EV_TEST, DataRange::NAMESPACE, "ns-b", &[])?;
    }
    // Every notification has been handed out before anybody leaves this fence; the markers
    // come after them on every connection.
    c.fence(&w.both(), &[])
        .map_err(e("fence after notifying"))?;
    let markers = [a(1), b(1)];
    if markers.contains(&me) {
        notify(c, EV_MARK, DataRange::GLOBAL, "round-1", &[])?;
    }
    await_marks(w, &marks, &markers, "round-1")?;
    let mut got: Vec<(String, Proc, DataRange)> = tests
        .try_iter()
        .map(|ev| (tag_of(&ev).to_owned(), ev.source.clone(), ev.range))
        .collect();
    got.sort_by(|x, y| (&x.0, &x.1).cmp(&(&y.0, &y.1)));
    let want = expected_events(w);
    let got_pairs: Vec<(&str, Proc)> = got
        .iter()
        .map(|(t, p, _)| (t.as_str(), p.clone()))
        .collect();
    check!(got_pairs == want, "received {got:?}, expected {want:?}");
    for (tag, _, range) in &got {
        let sent = match tag.as_str() {
            "ns-a" | "ns-b" => DataRange::NAMESPACE,
            "local" => DataRange::PROC_LOCAL,
            _ => DataRange::CUSTOM,
        };
        check!(*range == sent, "{tag} arrived with range {range:?}");
    }
    // Round 2: without a handler for EV_TEST the server sends none.
    c.deregister_event_handler(test_id)
        .map_err(e("deregister_event_handler"))?;
    c.fence(&w.both(), &[])
        .map_err(e("fence after deregistering"))?;
    if me == a(0) {
        notify(c, EV_TEST, DataRange::GLOBAL, "after", &[])?;
    }
    c.fence(&w.both(), &[])
        .map_err(e("fence after the second notification"))?;
    if markers.contains(&me) {
        notify(c, EV_MARK, DataRange::GLOBAL, "round-2", &[])?;
    }
    await_marks(w, &marks, &markers, "round-2")?;
    let late: Vec<Event> = tests.try_iter().collect();
    check!(late.is_empty(), "a deregistered handler ran for {late:?}");
    let kept = c.take_events();
    check!(
        kept.is_empty(),
        "the server sent events nobody registered for: {kept:?}"
    );
    println!(
        "{}: received {} events as the ranges say",
        w.label(),
        want.len()
    );
    Ok(())
}

/// Checks resolve_peers and resolve_nodes of both jobs (all on this node) and of a namespace
/// nobody registered.
fn resolves(c: &Client, w: &World, host: &str, sides: &[Side]) -> Res {
    for &side in sides {
        let ns = w.ns(side);
        let all: Vec<Proc> = (0..w.size(side)).map(|r| w.proc(side, r)).collect();
        let peers = c
            .resolve_peers(None, ns)
            .map_err(e(&format!("resolve_peers of {ns}")))?;
        check!(peers == all, "peers of {ns} here: {peers:?}");
        let peers = c
            .resolve_peers(Some(host), ns)
            .map_err(e(&format!("resolve_peers of {ns} on {host}")))?;
        check!(peers == all, "peers of {ns} on {host}: {peers:?}");
        let none = c
            .resolve_peers(Some("no-such-node.invalid"), ns)
            .map_err(e(&format!("resolve_peers of {ns} elsewhere")))?;
        check!(none.is_empty(), "peers of {ns} on no node: {none:?}");
        let nodes = c
            .resolve_nodes(ns)
            .map_err(e(&format!("resolve_nodes of {ns}")))?;
        check!(nodes == [host], "nodes of {ns}: {nodes:?}");
    }
    Ok(())
}

/// `resolve`: resolve_peers / resolve_nodes of both jobs, before the connect (the first
/// rank of each job: the server sends the other's job data) and after it (everybody).
fn resolve(c: &Client, w: &World) -> Res {
    let host = c.get(&w.me, attr::HOSTNAME, &[]).map_err(e("HOSTNAME"))?;
    let host = host
        .as_str()
        .ok_or_else(|| format!("HOSTNAME is {host:?}"))?
        .to_owned();
    if w.rank() == 0 {
        resolves(c, w, &host, &[w.other()])?;
    }
    c.connect(&w.both(), &[]).map_err(e("connect"))?;
    resolves(c, w, &host, &[Side::A, Side::B])?;
    let nobody = Nspace::new("dyn-no-such-nspace").map_err(e("namespace"))?;
    match c.resolve_peers(None, &nobody) {
        Err(err) if err.status() == Status::ERR_NOT_FOUND => {}
        other => return Err(format!("resolve_peers of an unknown namespace: {other:?}")),
    }
    match c.resolve_nodes(&nobody) {
        Err(err) if err.status() == Status::ERR_NOT_FOUND => {}
        other => return Err(format!("resolve_nodes of an unknown namespace: {other:?}")),
    }
    println!(
        "{}: a has {} and b {} processes on this node",
        w.label(),
        w.a_size,
        w.b_size
    );
    Ok(())
}

/// `connect-nowhere`: a connect of this whole job with a namespace no run has (the host's to
/// find, being unknown to the server) fails, within [`PATIENCE`]; prints its status.
fn connect_nowhere(c: &Client) -> Res {
    let me = c.proc().clone();
    let nowhere = Nspace::new("pmix-rs.nowhere").map_err(e("namespace"))?;
    let procs = [wildcard(&me.nspace), wildcard(&nowhere)];
    let t0 = Instant::now();
    let r = c.connect(&procs, &[Info::attr(attr::TIMEOUT, PATIENCE_SECS)]);
    let took = t0.elapsed();
    let status = match r {
        Err(err) => err.status(),
        Ok(()) => return Err("a connect with a namespace nobody has succeeded".into()),
    };
    check!(took < PATIENCE, "the connect failed only after {took:?}");
    println!("{}: connect-nowhere failed with {status:?}", me.rank);
    Ok(())
}

fn run(args: &[String]) -> Res {
    let scenarios = args.first().map(String::as_str).unwrap_or("");
    let c = Client::init().map_err(e("init"))?;
    if scenarios == "publish-connect" {
        publish_connect(&c, args.get(1..).unwrap_or_default())?;
    } else if scenarios == "connect-nowhere" {
        connect_nowhere(&c)?;
    } else {
        let w = world(&c, args, args.get(1..).unwrap_or_default())?;
        for scenario in scenarios.split('+') {
            match scenario {
                "spawned" => spawned(&c, &w),
                "exchange" => exchange(&c, &w),
                "disconnect" => disconnect(&c, &w),
                "fence-both" => fence_across(&c, &w, false),
                "fence-part" => fence_across(&c, &w, true),
                "killed" => killed(&c, &w),
                "events" => events(&c, &w),
                "resolve" => resolve(&c, &w),
                other => Err(format!("unknown scenario {other:?}")),
            }?;
        }
    }
    c.finalize().map_err(e("finalize"))
}

fn main() -> ExitCode {
    pmix_tests::scenario::run_main(run)
}
