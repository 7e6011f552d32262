//! The name-service scenarios the integration tests (`tests/names.rs`) start as real
//! processes: publish, lookup and unpublish under each range, persistence and directive.
//!
//! `pmix-names-client <scenario> [args...]`: every process plays the part its rank (and
//! namespace) gives it, checks what the name-service rules say it must see, and exits 0
//! printing `ok`, or prints `FAILED: <what>` and exits 1. Steps between processes are ordered
//! with fences or with lookups that wait for a peer's publication, never with sleeps.

use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Duration;

use pmix_client::types::Persistence;
use pmix_client::{
    Client, DataArray, DataRange, DataType, Error, Info, Key, Nspace, Pdata, Proc, Rank, Status,
    Value, attr,
};
use pmix_tests::check;
use pmix_tests::scenario::{Res, e};

/// How long a non-blocking call's callback, or a lookup waiting for a peer's publication, may
/// take: far more than needed, yet short of the tests' deadline, so that a lost answer is
/// reported by the process that missed it.
const PATIENCE: Duration = Duration::from_secs(30);
/// [`PATIENCE`] as a `PMIX_TIMEOUT` (seconds).
const PATIENCE_SECS: i32 = 30;

fn range(r: DataRange) -> Info {
    Info::attr(attr::RANGE, r)
}

fn persist(p: Persistence) -> Info {
    Info::attr(attr::PERSISTENCE, p)
}

/// `RANGE` `CUSTOM` with its process list.
fn custom(procs: &[Proc]) -> Result<Vec<Info>, String> {
    let list = DataArray::new(
        DataType::PROC,
        procs.iter().cloned().map(Value::Proc).collect(),
    )
    .map_err(e("custom range"))?;
    Ok(vec![
        range(DataRange::CUSTOM),
        Info::attr(attr::EVENT_CUSTOM_RANGE, list),
    ])
}

/// `WAIT` for every key, bounded by [`PATIENCE`].
fn wait_all() -> Vec<Info> {
    vec![
        Info::attr(attr::WAIT, true),
        Info::attr(attr::TIMEOUT, PATIENCE_SECS),
    ]
}

/// [`wait_all`] searching every session: what a lookup for another run's data needs (the
/// default search range is the caller's session).
fn wait_all_global() -> Vec<Info> {
    let mut info = wait_all();
    info.push(range(DataRange::GLOBAL));
    info
}

fn datum(key: &str, value: impl Into<Value>) -> Result<Info, String> {
    Ok(Info::new(Key::new(key).map_err(e("key"))?, value))
}

/// Publishes one pair, blocking.
fn publish(c: &Client, key: &str, value: impl Into<Value>, info: &[Info]) -> Res {
    c.publish(&[datum(key, value)?], info)
        .map_err(e(&format!("publish of {key}")))
}

/// Starts a non-blocking call and waits (at most [`PATIENCE`]) for its callback.
fn nb<T: Send + 'static>(
    what: &str,
    start: impl FnOnce(Box<dyn FnOnce(T) + Send>),
) -> Result<T, String> {
    let (tx, rx) = mpsc::channel();
    start(Box::new(move |r| {
        let _ = tx.send(r);
    }));
    rx.recv_timeout(PATIENCE)
        .map_err(|_| format!("{what}: the callback did not run within {PATIENCE:?}"))
}

/// A job-wide fence.
fn fence(c: &Client, step: &str) -> Res {
    c.fence(&[], &[]).map_err(e(&format!("fence {step}")))
}

fn fence_of(c: &Client, procs: &[Proc], step: &str) -> Res {
    c.fence(procs, &[]).map_err(e(&format!("fence {step}")))
}

/// What a lookup must give for one key: the value and the process that published it, or
/// nothing.
type Want = Option<(Value, Proc)>;

fn found(v: impl Into<Value>, by: &Proc) -> Want {
    Some((v.into(), by.clone()))
}

/// Checks a lookup of `keys` against `want`: when nothing is wanted the call must fail with
/// `ERR_NOT_FOUND`; otherwise it succeeds with one entry per key, in order, each found with
/// the wanted value and publisher or not found at all.
fn check_lookup(what: &str, got: Result<Vec<Pdata>, Error>, keys: &[&str], want: &[Want]) -> Res {
    let none = want.iter().all(Option::is_none);
    let found = match got {
        Err(err) if none && err.status() == Status::ERR_NOT_FOUND => return Ok(()),
        Err(err) => {
            return Err(format!(
                "{what}: lookup of {keys:?} failed with {:?} ({err}); expected {want:?}",
                err.status()
            ));
        }
        Ok(found) if none => {
            return Err(format!(
                "{what}: lookup of {keys:?} gave {found:?}; expected ERR_NOT_FOUND"
            ));
        }
        Ok(found) => found,
    };
    check!(
        found.len() == keys.len(),
        "{what}: lookup of {keys:?} gave {} entries: {found:?}",
        found.len()
    );
    for ((p, key), w) in found.iter().zip(keys).zip(want) {
        check!(
            p.key.as_str() == *key,
            "{what}: entry {p:?} where {key} was asked"
        );
        match w {
            None => check!(
                !p.is_found() && p.value == Value::Undef,
                "{what}: {key} was found ({p:?}); it must not be"
            ),
            Some((v, by)) => check!(
                p.proc.as_ref() == Some(by) && p.value == *v,
                "{what}: {key} gave {:?} published by {:?}; expected {v:?} published by {by}",
                p.value,
                p.proc
            ),
        }
    }
    Ok(())
}

/// `r` must be an error with `status`.
fn expect_status<T: std::fmt::Debug>(what: &str, r: Result<T, Error>, status: Status) -> Res {
    match r {
        Err(err) if err.status() == status => Ok(()),
        Err(err) => Err(format!(
            "{what}: failed with {:?} ({err}); expected {status:?}",
            err.status()
        )),
        Ok(v) => Err(format!("{what}: succeeded ({v:?}); expected {status:?}")),
    }
}

/// Blocking and non-blocking calls, both ways of succeeding and failing; 2 or more ranks.
fn basic(c: &Client) -> Res {
    let me = c.proc().clone();
    let p = |r: u32| Proc::new(me.nspace.clone(), r);
    let (r0, r1) = (p(0), p(1));
    match me.rank.0 {
        0 => c
            .publish(
                &[datum("b.str", "text of rank 0")?, datum("b.num", 42u32)?],
                &[],
            )
            .map_err(e("publish"))?,
        1 => {
            let data = [datum("b.nb", "published without blocking")?];
            nb("publish_nb", |done| c.publish_nb(&data, &[], done))?.map_err(e("publish_nb"))?;
        }
        _ => {}
    }
    fence(c, "after publishing")?;
    let keys = ["b.str", "b.num", "b.nb", "b.none"];
    let want = [
        found("text of rank 0", &r0),
        found(42u32, &r0),
        found("published without blocking", &r1),
        None,
    ];
    check_lookup("blocking lookup", c.lookup(&keys, &[]), &keys, &want)?;
    let got = nb("lookup_nb", |done| c.lookup_nb(&keys, &[], done))?;
    check_lookup("lookup_nb", got, &keys, &want)?;
    // A key asked twice gets the same answer twice.
    let twice = ["b.num", "b.none", "b.num"];
    check_lookup(
        "lookup of a key asked twice",
        c.lookup(&twice, &[]),
        &twice,
        &[found(42u32, &r0), None, found(42u32, &r0)],
    )?;
    // Nothing found: the call fails.
    check_lookup(
        "lookup of nothing published",
        c.lookup(&["b.none"], &[]),
        &["b.none"],
        &[None],
    )?;
    let got = nb("lookup_nb", |done| c.lookup_nb(&["b.none"], &[], done))?;
    check_lookup("lookup_nb of nothing published", got, &["b.none"], &[None])?;
    fence(c, "after the lookups")?;
    match me.rank.0 {
        0 => c.unpublish(&["b.str"], &[]).map_err(e("unpublish"))?,
        1 => nb("unpublish_nb", |done| c.unpublish_nb(&["b.nb"], &[], done))?
            .map_err(e("unpublish_nb"))?,
        _ => {}
    }
    fence(c, "after unpublishing")?;
    let want = [None, found(42u32, &r0), None, None];
    check_lookup("lookup after unpublish", c.lookup(&keys, &[]), &keys, &want)?;
    fence(c, "before the last unpublish")?;
    if me.rank.0 == 0 {
        nb("unpublish_nb", |done| c.unpublish_nb(&["b.num"], &[], done))?
            .map_err(e("unpublish_nb of b.num"))?;
    }
    fence(c, "after the last unpublish")?;
    check_lookup(
        "lookup after every key was withdrawn",
        c.lookup(&keys, &[]),
        &keys,
        &[None, None, None, None],
    )?;
    // Refused before anything is sent.
    expect_status(
        "publish of nothing",
        c.publish(&[], &[]),
        Status::ERR_BAD_PARAM,
    )?;
    expect_status(
        "lookup of no key",
        c.lookup(&[], &[]),
        Status::ERR_BAD_PARAM,
    )?;
    fence(c, "at the end")
}

/// Who sees what under each range: `ranges <A> <B>` run as namespace A of 3 ranks and B of 2,
/// in one session on one node.
fn ranges(c: &Client, a: &str, b: &str) -> Res {
    let me = c.proc().clone();
    let a = Nspace::new(a).map_err(e("namespace A"))?;
    let b = Nspace::new(b).map_err(e("namespace B"))?;
    let both = [
        Proc::new(a.clone(), Rank::WILDCARD),
        Proc::new(b.clone(), Rank::WILDCARD),
    ];
    let a0 = Proc::new(a.clone(), 0);
    let a2 = Proc::new(a.clone(), 2);
    let b0 = Proc::new(b.clone(), 0);
    let in_a = me.nspace == a;
    check!(in_a || me.nspace == b, "{me} is in neither {a} nor {b}");
    if me == a0 {
        publish(c, "r.proclocal", "pl", &[range(DataRange::PROC_LOCAL)])?;
        publish(c, "r.local", "lo", &[range(DataRange::LOCAL)])?;
        publish(c, "r.nspace", "ns", &[range(DataRange::NAMESPACE)])?;
        publish(c, "r.session", "se", &[range(DataRange::SESSION)])?;
        publish(c, "r.default", "de", &[])?;
        publish(c, "r.global", "gl", &[range(DataRange::GLOBAL)])?;
        // Neither the publisher nor A:1 nor B:1 is listed.
        publish(c, "r.custom", "cu", &custom(&[a2.clone(), b0.clone()])?)?;
        publish(
            c,
            "r.customns",
            "cn",
            &custom(&[Proc::new(b.clone(), Rank::WILDCARD)])?,
        )?;
    }
    if me.rank.0 == 0 {
        // The same key in two namespaces: disjoint audiences, no clash.
        publish(
            c,
            "r.same",
            format!("same of {}", me.nspace),
            &[range(DataRange::NAMESPACE)],
        )?;
    }
    fence_of(c, &both, "after publishing")?;

    // Default lookups search the session: what each process finds is the audience's say.
    let keys = [
        "r.proclocal",
        "r.local",
        "r.nspace",
        "r.session",
        "r.default",
        "r.global",
        "r.custom",
        "r.customns",
    ];
    let values = ["pl", "lo", "ns", "se", "de", "gl", "cu", "cn"];
    let sees = [
        me == a0,
        true,
        in_a,
        true,
        true,
        true,
        me == a2 || me == b0,
        !in_a,
    ];
    let want: Vec<Want> = values
        .iter()
        .zip(sees)
        .map(|(v, s)| if s { found(*v, &a0) } else { None })
        .collect();
    check_lookup("lookup in the session", c.lookup(&keys, &[]), &keys, &want)?;
    let got = nb("lookup_nb", |done| c.lookup_nb(&keys, &[], done))?;
    check_lookup("lookup_nb in the session", got, &keys, &want)?;
    // One node, one session: searching the node or everything finds the same.
    for r in [DataRange::LOCAL, DataRange::GLOBAL, DataRange::SESSION] {
        check_lookup(
            &format!("lookup with RANGE {r:?}"),
            c.lookup(&keys, &[range(r)]),
            &keys,
            &want,
        )?;
    }
    let own = Proc::new(me.nspace.clone(), 0);
    check_lookup(
        "r.same",
        c.lookup(&["r.same"], &[]),
        &["r.same"],
        &[found(format!("same of {}", me.nspace), &own)],
    )?;

    // The lookup's range limits whose publications are searched.
    let two = ["r.session", "r.global"];
    let from_a0 = |yes: bool| -> Vec<Want> {
        ["se", "gl"]
            .iter()
            .map(|v| if yes { found(*v, &a0) } else { None })
            .collect()
    };
    check_lookup(
        "lookup searching the namespace",
        c.lookup(&two, &[range(DataRange::NAMESPACE)]),
        &two,
        &from_a0(in_a),
    )?;
    check_lookup(
        "lookup searching PROC_LOCAL",
        c.lookup(&two, &[range(DataRange::PROC_LOCAL)]),
        &two,
        &from_a0(me == a0),
    )?;
    check_lookup(
        "lookup searching a custom list with the publisher",
        c.lookup(&two, &custom(&[a0.clone(), b0.clone()])?),
        &two,
        &from_a0(true),
    )?;
    check_lookup(
        "lookup searching a custom list without the publisher",
        c.lookup(&two, &custom(&[Proc::new(a.clone(), 1), b0.clone()])?),
        &two,
        &from_a0(false),
    )?;
    check_lookup(
        "lookup searching namespace A by wildcard",
        c.lookup(&two, &custom(&[Proc::new(a.clone(), Rank::WILDCARD)])?),
        &two,
        &from_a0(true),
    )?;
    // CUSTOM without a list, and RM, are refused.
    expect_status(
        "publish CUSTOM without a list",
        c.publish(&[datum("r.bad", 1u8)?], &[range(DataRange::CUSTOM)]),
        Status::ERR_BAD_PARAM,
    )?;
    fence_of(c, &both, "at the end")
}

const PERSIST_KEYS: [&str; 6] = [
    "p.proc",
    "p.app",
    "p.default",
    "p.session",
    "p.indef",
    "p.first",
];

/// `persist-publish`, 2 ranks: rank 0 publishes under every persistence, rank 1 reads them
/// all and consumes the first-read one.
fn persist_publish(c: &Client) -> Res {
    let me = c.proc().clone();
    let r0 = Proc::new(me.nspace.clone(), 0);
    if me.rank.0 == 0 {
        publish(c, "p.proc", "proc", &[persist(Persistence::PROC)])?;
        publish(c, "p.app", "app", &[persist(Persistence::APP)])?;
        publish(c, "p.default", "default", &[])?;
        publish(c, "p.session", "session", &[persist(Persistence::SESSION)])?;
        publish(c, "p.indef", "indef", &[persist(Persistence::INDEF)])?;
        publish(c, "p.first", "first", &[persist(Persistence::FIRST_READ)])?;
    }
    fence(c, "after publishing")?;
    if me.rank.0 == 1 {
        let want: Vec<Want> = ["proc", "app", "default", "session", "indef"]
            .iter()
            .map(|v| found(*v, &r0))
            .collect();
        check_lookup(
            "lookup while the publisher lives",
            c.lookup(&PERSIST_KEYS[..5], &[]),
            &PERSIST_KEYS[..5],
            &want,
        )?;
        let two = ["p.first", "p.indef"];
        check_lookup(
            "first read",
            c.lookup(&two, &[]),
            &two,
            &[found("first", &r0), found("indef", &r0)],
        )?;
        check_lookup(
            "second read",
            c.lookup(&two, &[]),
            &two,
            &[None, found("indef", &r0)],
        )?;
    }
    fence(c, "at the end")
}

/// `persist-after <publisher namespace> <proc|app>`: what is left of `persist-publish`'s
/// rank 0 after that process ended (`proc`), or after its namespace was deregistered too
/// (`app`).
fn persist_after(c: &Client, publisher: &str, ended: &str) -> Res {
    let by = Proc::new(Nspace::new(publisher).map_err(e("namespace"))?, 0);
    let app_gone = match ended {
        "proc" => false,
        "app" => true,
        other => return Err(format!("persist-after: {other:?} is neither proc nor app")),
    };
    let want = [
        None,
        (!app_gone).then(|| (Value::from("app"), by.clone())),
        (!app_gone).then(|| (Value::from("default"), by.clone())),
        found("session", &by),
        found("indef", &by),
        None,
    ];
    check_lookup(
        &format!("lookup after the publisher's {ended} ended"),
        c.lookup(&PERSIST_KEYS, &[]),
        &PERSIST_KEYS,
        &want,
    )?;
    // Data of a process that is gone is still not anyone else's to withdraw.
    expect_status(
        "unpublish of a departed process's key",
        c.unpublish(&["p.indef"], &[]),
        Status::ERR_NO_PERMISSIONS,
    )?;
    check_lookup(
        "lookup after the refused unpublish",
        c.lookup(&["p.indef"], &[]),
        &["p.indef"],
        &[found("indef", &by)],
    )
}

/// `wait`, 3 ranks: lookups held by `WAIT` until publications that come after them.
fn wait(c: &Client) -> Res {
    let me = c.proc().clone();
    let p = |r: u32| Proc::new(me.nspace.clone(), r);
    let (r1, r2) = (p(1), p(2));
    let pair = [p(0), p(1)];
    match me.rank.0 {
        0 => {
            let (all_tx, all_rx) = mpsc::channel();
            let all = ["w.a", "w.b"];
            c.lookup_nb(&all, &wait_all(), move |r| {
                let _ = all_tx.send(r);
            });
            let (one_tx, one_rx) = mpsc::channel();
            let one = ["w.c", "w.d"];
            c.lookup_nb(
                &one,
                &[
                    Info::attr(attr::WAIT, 1u32),
                    Info::attr(attr::TIMEOUT, PATIENCE_SECS),
                ],
                move |r| {
                    let _ = one_tx.send(r);
                },
            );
            // The server has both lookups before this fence; rank 1 publishes after it.
            fence_of(c, &pair, "1")?;
            fence_of(c, &pair, "2")?;
            // w.c is published (w.d never is): one key was all the second lookup waited for.
            let got = one_rx
                .recv_timeout(PATIENCE)
                .map_err(|_| "the WAIT 1 lookup was not answered".to_string())?;
            check_lookup("lookup with WAIT 1", got, &one, &[found("c", &r1), None])?;
            // w.a is published but w.b is not until after fence 3: still waiting.
            if let Ok(early) = all_rx.try_recv() {
                return Err(format!(
                    "the lookup waiting for w.a and w.b was answered before w.b was published: \
                     {early:?}"
                ));
            }
            fence_of(c, &pair, "3")?;
            let got = all_rx
                .recv_timeout(PATIENCE)
                .map_err(|_| "the WAIT lookup was not answered".to_string())?;
            check_lookup(
                "lookup with WAIT",
                got,
                &all,
                &[found("a", &r1), found("b", &r1)],
            )?;
        }
        1 => {
            fence_of(c, &pair, "1")?;
            publish(c, "w.a", "a", &[])?;
            publish(c, "w.c", "c", &[])?;
            fence_of(c, &pair, "2")?;
            fence_of(c, &pair, "3")?;
            publish(c, "w.b", "b", &[])?;
            // Rank 2 publishes w.ready right before its blocking lookup of w.blk.
            check_lookup(
                "lookup of w.ready",
                c.lookup(&["w.ready"], &wait_all()),
                &["w.ready"],
                &[found("ready", &r2)],
            )?;
            publish(c, "w.blk", "blk", &[])?;
        }
        _ => {
            publish(c, "w.ready", "ready", &[])?;
            check_lookup(
                "blocking lookup with WAIT",
                c.lookup(&["w.blk"], &wait_all()),
                &["w.blk"],
                &[found("blk", &r1)],
            )?;
        }
    }
    fence(c, "at the end")
}

/// `wait-timeout`, 2 ranks: `WAIT` with `TIMEOUT` fails with `ERR_TIMEOUT`, and the lookup
/// that timed out is gone: it consumes nothing published later.
fn wait_timeout(c: &Client) -> Res {
    let me = c.proc().clone();
    let r1 = Proc::new(me.nspace.clone(), 1);
    let one_second = |wait: Value| {
        vec![
            Info::attr(attr::WAIT, wait),
            Info::attr(attr::TIMEOUT, 1i32),
        ]
    };
    if me.rank.0 == 1 {
        publish(c, "t.x", "x", &[])?;
    }
    fence(c, "1")?;
    if me.rank.0 == 0 {
        expect_status(
            "blocking lookup with WAIT and TIMEOUT",
            c.lookup(&["t.late"], &one_second(Value::Bool(true))),
            Status::ERR_TIMEOUT,
        )?;
        // The server times it out: the non-blocking form has no backstop of its own.
        let got = nb("lookup_nb", |done| {
            c.lookup_nb(&["t.late"], &one_second(Value::Bool(true)), done)
        })?;
        match got {
            Err(Error::Server { status }) if status == Status::ERR_TIMEOUT => {}
            other => {
                return Err(format!(
                    "lookup_nb with WAIT and TIMEOUT gave {other:?}; expected the server's \
                     ERR_TIMEOUT"
                ));
            }
        }
        // One of two keys is there, but WAIT wants both.
        let two = ["t.x", "t.y"];
        expect_status(
            "lookup waiting for a published and an unpublished key",
            c.lookup(&two, &one_second(Value::Bool(true))),
            Status::ERR_TIMEOUT,
        )?;
        check_lookup(
            "lookup with WAIT 1 of a published and an unpublished key",
            c.lookup(&two, &one_second(Value::Uint32(1))),
            &two,
            &[found("x", &r1), None],
        )?;
    }
    fence(c, "2")?;
    if me.rank.0 == 1 {
        publish(c, "t.late", "late", &[persist(Persistence::FIRST_READ)])?;
    }
    fence(c, "3")?;
    if me.rank.0 == 0 {
        check_lookup(
            "lookup after the timed-out ones",
            c.lookup(&["t.late"], &[]),
            &["t.late"],
            &[found("late", &r1)],
        )?;
    }
    fence(c, "at the end")
}

/// `duplicates`, 2 ranks: a key published twice in overlapping ranges is refused, the first
/// value kept and nothing of the refused call stored.
fn duplicates(c: &Client) -> Res {
    let me = c.proc().clone();
    let (r0, r1) = (
        Proc::new(me.nspace.clone(), 0),
        Proc::new(me.nspace.clone(), 1),
    );
    let dup = Status::ERR_DUPLICATE_KEY;
    if me.rank.0 == 0 {
        publish(c, "d.k", "first", &[])?;
    }
    fence(c, "1")?;
    match me.rank.0 {
        0 => {
            expect_status(
                "publishing one's own key again",
                c.publish(&[datum("d.k", "again")?], &[]),
                dup,
            )?;
        }
        1 => {
            expect_status(
                "publish of a taken key",
                c.publish(&[datum("d.k", "second")?], &[]),
                dup,
            )?;
            expect_status(
                "publish of a new and a taken key",
                c.publish(&[datum("d.fresh", "fresh")?, datum("d.k", "third")?], &[]),
                dup,
            )?;
            let data = [datum("d.k", "fourth")?];
            let got = nb("publish_nb", |done| c.publish_nb(&data, &[], done))?;
            expect_status("publish_nb of a taken key", got, dup)?;
            // Rank 1 alone is an audience inside the session: still a clash.
            expect_status(
                "PROC_LOCAL publish of a key taken for the session",
                c.publish(&[datum("d.k", "fifth")?], &[range(DataRange::PROC_LOCAL)]),
                dup,
            )?;
            expect_status(
                "publish naming a key twice",
                c.publish(&[datum("d.twice", 1u8)?, datum("d.twice", 2u8)?], &[]),
                dup,
            )?;
        }
        _ => {}
    }
    fence(c, "2")?;
    let keys = ["d.k", "d.fresh", "d.twice"];
    check_lookup(
        "lookup after the refused publishes",
        c.lookup(&keys, &[]),
        &keys,
        &[found("first", &r0), None, None],
    )?;
    fence(c, "3")?;
    if me.rank.0 == 0 {
        c.unpublish(&["d.k"], &[]).map_err(e("unpublish"))?;
    }
    fence(c, "4")?;
    if me.rank.0 == 1 {
        publish(c, "d.k", "second", &[])?;
    }
    fence(c, "5")?;
    check_lookup(
        "lookup after the key was freed and taken again",
        c.lookup(&["d.k"], &[]),
        &["d.k"],
        &[found("second", &r1)],
    )?;
    fence(c, "at the end")
}

/// `unpublish`, 2 ranks: only one's own keys, all or nothing; no keys withdraws all of them.
fn unpublish(c: &Client) -> Res {
    let me = c.proc().clone();
    let (r0, r1) = (
        Proc::new(me.nspace.clone(), 0),
        Proc::new(me.nspace.clone(), 1),
    );
    match me.rank.0 {
        0 => {
            c.publish(
                &[datum("u.a", "a")?, datum("u.b", "b")?, datum("u.c", "c")?],
                &[],
            )
            .map_err(e("publish"))?;
            publish(c, "u.g", "g", &[range(DataRange::GLOBAL)])?;
        }
        1 => publish(c, "u.x", "x", &[])?,
        _ => {}
    }
    fence(c, "1")?;
    let perm = Status::ERR_NO_PERMISSIONS;
    let nf = Status::ERR_NOT_FOUND;
    match me.rank.0 {
        0 => {
            // u.g is published for GLOBAL, not NAMESPACE.
            expect_status(
                "unpublish of u.g in another range",
                c.unpublish(&["u.g"], &[range(DataRange::NAMESPACE)]),
                nf,
            )?;
        }
        1 => {
            expect_status(
                "unpublish of rank 0's key",
                c.unpublish(&["u.a"], &[]),
                perm,
            )?;
            expect_status(
                "unpublish of an own and a foreign key",
                c.unpublish(&["u.x", "u.a"], &[]),
                perm,
            )?;
            expect_status(
                "unpublish of an unknown key",
                c.unpublish(&["u.nope"], &[]),
                nf,
            )?;
            expect_status(
                "unpublish of an own and an unknown key",
                c.unpublish(&["u.x", "u.nope"], &[]),
                nf,
            )?;
            let got = nb("unpublish_nb", |done| c.unpublish_nb(&["u.b"], &[], done))?;
            expect_status("unpublish_nb of rank 0's key", got, perm)?;
        }
        _ => {}
    }
    fence(c, "2")?;
    let keys = ["u.a", "u.b", "u.c", "u.x", "u.g"];
    check_lookup(
        "lookup after the refused unpublishes",
        c.lookup(&keys, &[]),
        &keys,
        &[
            found("a", &r0),
            found("b", &r0),
            found("c", &r0),
            found("x", &r1),
            found("g", &r0),
        ],
    )?;
    fence(c, "3")?;
    match me.rank.0 {
        0 => {
            c.unpublish(&["u.g"], &[range(DataRange::GLOBAL)])
                .map_err(e("unpublish of u.g in its range"))?;
            c.unpublish(&[], &[]).map_err(e("unpublish of all"))?;
        }
        1 => nb("unpublish_nb", |done| c.unpublish_nb(&[], &[], done))?
            .map_err(e("unpublish_nb of all"))?,
        _ => {}
    }
    fence(c, "4")?;
    check_lookup(
        "lookup after unpublishing all",
        c.lookup(&keys, &[]),
        &keys,
        &[None, None, None, None, None],
    )?;
    fence(c, "at the end")
}

/// A key found that another run published: its publisher must not be in this namespace.
fn from_elsewhere<'a>(c: &Client, what: &str, got: &'a [Pdata]) -> Result<&'a Proc, String> {
    let first = got.first().ok_or_else(|| format!("{what}: empty result"))?;
    let by = first
        .proc
        .as_ref()
        .ok_or_else(|| format!("{what}: {} not found: {got:?}", first.key.as_str()))?;
    check!(
        by.nspace != c.proc().nspace,
        "{what}: published by {by}, a process of this run"
    );
    Ok(by)
}

/// `xrun-first`, the first of two runs sharing a name server: publishes a service, then waits
/// for the second run's reply.
fn xrun_first(c: &Client) -> Res {
    let me = c.proc().clone();
    let ns = me.nspace.as_str();
    publish(c, "x.session", format!("session of {ns}"), &[])?;
    publish(
        c,
        "x.local",
        format!("local of {ns}"),
        &[range(DataRange::LOCAL)],
    )?;
    publish(
        c,
        "x.indef",
        format!("indef of {ns}"),
        &[range(DataRange::GLOBAL), persist(Persistence::INDEF)],
    )?;
    publish(
        c,
        "x.persist-session",
        format!("persist-session of {ns}"),
        &[range(DataRange::GLOBAL), persist(Persistence::SESSION)],
    )?;
    // Last: the second run waits for it, and then finds the others published.
    publish(
        c,
        "x.service",
        format!("service of {ns}"),
        &[range(DataRange::GLOBAL)],
    )?;
    let got = c
        .lookup(&["x.reply"], &wait_all_global())
        .map_err(e("waiting for the reply"))?;
    let by = from_elsewhere(c, "x.reply", &got)?;
    let want = Value::from(format!("reply to {ns}"));
    check!(
        got[0].value == want,
        "x.reply is {:?}, expected {want:?}",
        got[0].value
    );
    // Published for this process alone by the other run, before its reply.
    let only_me = ["x.custom"];
    check_lookup(
        "lookup of the other run's CUSTOM key",
        c.lookup(&only_me, &[range(DataRange::GLOBAL)]),
        &only_me,
        &[found(format!("custom for {me}"), by)],
    )?;
    // The second run ends (and its APP data with it) only once it has read this. FIRST_READ:
    // this run may end (and with it its APP data) before the second run's lookup arrives.
    publish(
        c,
        "x.done",
        "checked",
        &[range(DataRange::GLOBAL), persist(Persistence::FIRST_READ)],
    )?;
    println!("first: {by} replied");
    Ok(())
}

/// `xrun-second`: finds the first run's service, checks what else crosses runs and what does
/// not, and replies.
fn xrun_second(c: &Client) -> Res {
    let got = c
        .lookup(&["x.service"], &wait_all_global())
        .map_err(e("waiting for the service"))?;
    let by = from_elsewhere(c, "x.service", &got)?.clone();
    let theirs = by.nspace.as_str();
    let want = Value::from(format!("service of {theirs}"));
    check!(
        got[0].value == want,
        "x.service is {:?}, expected {want:?}",
        got[0].value
    );
    // The default search range, SESSION, is this run only.
    for info in [vec![], vec![range(DataRange::SESSION)]] {
        check_lookup(
            &format!("lookup of x.service with {info:?}"),
            c.lookup(&["x.service"], &info),
            &["x.service"],
            &[None],
        )?;
    }
    // SESSION data stays in its run, whatever range the lookup searches; LOCAL data is seen
    // on the node (searching the node or everything); GLOBAL (INDEF) data too.
    let keys = ["x.session", "x.local", "x.indef", "x.persist-session"];
    let want = [
        None,
        found(format!("local of {theirs}"), &by),
        found(format!("indef of {theirs}"), &by),
        found(format!("persist-session of {theirs}"), &by),
    ];
    for r in [DataRange::GLOBAL, DataRange::LOCAL] {
        check_lookup(
            &format!("lookup of the other run's keys searching {r:?}"),
            c.lookup(&keys, &[range(r)]),
            &keys,
            &want,
        )?;
    }
    check_lookup(
        "lookup of the other run's keys searching this session",
        c.lookup(&keys, &[]),
        &keys,
        &[None, None, None, None],
    )?;
    // GLOBAL names are unique across runs; SESSION ones only within a run.
    expect_status(
        "publish of the other run's GLOBAL key",
        c.publish(&[datum("x.service", "mine")?], &[range(DataRange::GLOBAL)]),
        Status::ERR_DUPLICATE_KEY,
    )?;
    // So are LOCAL ones on one node.
    expect_status(
        "publish of the other run's LOCAL key",
        c.publish(&[datum("x.local", "mine")?], &[range(DataRange::LOCAL)]),
        Status::ERR_DUPLICATE_KEY,
    )?;
    publish(c, "x.session", "session of the second run", &[])?;
    // For the first run's process alone: not even this one sees it.
    publish(
        c,
        "x.custom",
        format!("custom for {by}"),
        &custom(std::slice::from_ref(&by))?,
    )?;
    check_lookup(
        "lookup of a CUSTOM key listing only the other run's process",
        c.lookup(&["x.custom"], &[range(DataRange::GLOBAL)]),
        &["x.custom"],
        &[None],
    )?;
    publish(
        c,
        "x.reply",
        format!("reply to {theirs}"),
        &[range(DataRange::GLOBAL)],
    )?;
    // Stay until the first run has read what this one published for it.
    c.lookup(&["x.done"], &wait_all_global())
        .map_err(e("waiting for the first run to finish its checks"))?;
    println!("second: found the service of {by}");
    Ok(())
}

/// `xrun-after`: a run after the first two ended finds only the INDEF data: APP and SESSION
/// persistence ended with the runs.
fn xrun_after(c: &Client) -> Res {
    let keys = [
        "x.indef",
        "x.service",
        "x.local",
        "x.session",
        "x.reply",
        "x.persist-session",
        "x.custom",
    ];
    let got = c
        .lookup(&keys, &[range(DataRange::GLOBAL)])
        .map_err(e("lookup"))?;
    let by = from_elsewhere(c, "x.indef", &got)?.clone();
    let mut want = vec![found(format!("indef of {}", by.nspace), &by)];
    want.extend([None, None, None, None, None, None]);
    check_lookup("lookup after the runs ended", Ok(got), &keys, &want)?;
    expect_status(
        "unpublish of another run's key",
        c.unpublish(&["x.indef"], &[]),
        Status::ERR_NO_PERMISSIONS,
    )?;
    println!("after: only the INDEF data of {} is left", by.nspace);
    Ok(())
}

/// `expect-present <key>`: another run has published `key` (GLOBAL), or will.
fn expect_present(c: &Client, key: &str) -> Res {
    let mut info = wait_all();
    info.push(range(DataRange::GLOBAL));
    let got = c
        .lookup(&[key], &info)
        .map_err(e(&format!("lookup of {key}")))?;
    from_elsewhere(c, key, &got).map(|_| ())
}

/// `expect-absent <key>`: `key`, published by another run, is not found from this one.
fn expect_absent(c: &Client, key: &str) -> Res {
    check_lookup(
        "lookup searching GLOBAL",
        c.lookup(&[key], &[range(DataRange::GLOBAL)]),
        &[key],
        &[None],
    )
}

/// `abandon-wait <key>`: leaves a lookup waiting for `key` (searching GLOBAL) and ends.
fn abandon_wait(c: &Client, key: &str) -> Res {
    c.lookup_nb(
        &[key],
        &[Info::attr(attr::WAIT, true), range(DataRange::GLOBAL)],
        |r| {
            // Failed by this client's own finalize is fine; an answer from the server is not.
            if !matches!(r, Err(pmix_client::Error::LostConnection)) {
                println!("FAILED: the abandoned lookup was answered: {r:?}");
            }
        },
    );
    // The server has the lookup before this fence completes.
    fence(c, "after the lookup")
}

/// `first-read-after <key>`: publishes `key` FIRST_READ (GLOBAL) after an abandoned lookup
/// waited for it: the first read is this one's, not the departed waiter's.
fn first_read_after(c: &Client, key: &str) -> Res {
    let me = c.proc().clone();
    let global = [range(DataRange::GLOBAL)];
    publish(
        c,
        key,
        "to be read once",
        &[range(DataRange::GLOBAL), persist(Persistence::FIRST_READ)],
    )?;
    check_lookup(
        "first read",
        c.lookup(&[key], &global),
        &[key],
        &[found("to be read once", &me)],
    )?;
    check_lookup("second read", c.lookup(&[key], &global), &[key], &[None])
}

/// `wait-lost`: a lookup waits (without `TIMEOUT`) on a name server that the test then
/// stops; it must fail, and so must later calls, rather than hang.
fn wait_lost(c: &Client) -> Res {
    let (tx, rx) = mpsc::channel();
    c.lookup_nb(
        &["lost.never"],
        &[Info::attr(attr::WAIT, true), range(DataRange::GLOBAL)],
        move |r| {
            let _ = tx.send(r);
        },
    );
    // The launcher has forwarded the lookup before this fence completes.
    fence(c, "after the lookup")?;
    println!("waiting");
    let got = rx
        .recv_timeout(PATIENCE)
        .map_err(|_| "the lookup was not answered after the name server stopped".to_string())?;
    expect_status("the waiting lookup", got, Status::ERR_UNREACH)?;
    expect_status(
        "publish after the name server stopped",
        c.publish(&[datum("lost.after", 1u8)?], &[]),
        Status::ERR_UNREACH,
    )
}

fn run(args: &[String]) -> Res {
    let scenario = args.first().map(String::as_str).unwrap_or("");
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    let c = Client::init().map_err(e("init"))?;
    match scenario {
        "basic" => basic(&c),
        "ranges" => ranges(&c, arg(1), arg(2)),
        "persist-publish" => persist_publish(&c),
        "persist-after" => persist_after(&c, arg(1), arg(2)),
        "wait" => wait(&c),
        "wait-timeout" => wait_timeout(&c),
        "duplicates" => duplicates(&c),
        "unpublish" => unpublish(&c),
        "xrun-first" => xrun_first(&c),
        "xrun-second" => xrun_second(&c),
        "xrun-after" => xrun_after(&c),
        "expect-present" => expect_present(&c, arg(1)),
        "expect-absent" => expect_absent(&c, arg(1)),
        "abandon-wait" => abandon_wait(&c, arg(1)),
        "wait-lost" => wait_lost(&c),
        "first-read-after" => first_read_after(&c, arg(1)),
        other => Err(format!("unknown scenario {other:?}")),
    }?;
    c.finalize().map_err(e("finalize"))
}

fn main() -> ExitCode {
    pmix_tests::scenario::run_main(run)
}
