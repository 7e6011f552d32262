//! Fences: over participant specs, collecting or not, blocking or not; the demo's allgather,
//! a get waiting for a key put after a fence, and fences that time out or that a rank never
//! joins.

use std::time::Duration;

use pmix_client::{Client, Info, Nspace, Proc, Rank, Scope, Status, Value, attr};
use pmix_tests::check;
use pmix_tests::scenario::{Res, e};

use crate::job_data::job_size;
use crate::lifecycle::park_forever;

/// Parses "a:0-2;b:0" / "a:;b:" into a participant list ("a:" = whole namespace).
fn parse_spec(spec: &str) -> Result<Vec<Proc>, String> {
    let mut out = Vec::new();
    for part in spec.split(';').filter(|p| !p.is_empty()) {
        let (ns, ranks) = part
            .split_once(':')
            .ok_or_else(|| format!("bad spec part {part}"))?;
        let ns = Nspace::new(ns).map_err(e("nspace"))?;
        if ranks.is_empty() {
            out.push(Proc::new(ns, Rank::WILDCARD));
            continue;
        }
        for r in ranks.split(',') {
            match r.split_once('-') {
                Some((a, b)) => {
                    let (a, b): (u32, u32) =
                        (a.parse().map_err(e("rank"))?, b.parse().map_err(e("rank"))?);
                    out.extend((a..=b).map(|r| Proc::new(ns.clone(), r)));
                }
                None => out.push(Proc::new(ns.clone(), r.parse::<u32>().map_err(e("rank"))?)),
            }
        }
    }
    Ok(out)
}

pub(crate) fn fence_key(p: &Proc) -> String {
    format!("fk.{}.{}", p.nspace, p.rank)
}

pub(crate) fn fence_value(p: &Proc) -> Value {
    Value::String(format!("{}-{}", p.nspace, p.rank))
}

fn do_fence(c: &Client, procs: &[Proc], info: &[Info], blocking: bool) -> Res {
    if blocking {
        return c.fence(procs, info).map_err(e("fence"));
    }
    let (tx, rx) = std::sync::mpsc::channel();
    c.fence_nb(procs, info, move |r| {
        let _ = tx.send(r);
    });
    match rx.recv_timeout(Duration::from_secs(60)) {
        Ok(r) => r.map_err(e("fence_nb")),
        Err(_) => Err("fence_nb callback never ran".into()),
    }
}

/// make-check 00-05: fence over a participant spec (`@` standing for this process's namespace),
/// flags 'd' (collect) and 'b' (blocking).
pub(crate) fn fence(c: &Client, spec: &str, flags: &str) -> Res {
    let me = c.proc().clone();
    let collect = flags.contains('d');
    let blocking = flags.contains('b');
    c.put(Scope::GLOBAL, &fence_key(&me), fence_value(&me))
        .map_err(e("put"))?;
    c.commit().map_err(e("commit"))?;
    let spec = parse_spec(&spec.replace('@', me.nspace.as_str()))?;
    // Expand wildcards to find who takes part.
    let mut members = Vec::new();
    for p in &spec {
        if p.rank == Rank::WILDCARD {
            let n = job_size(c, &p.nspace)?;
            members.extend((0..n).map(|r| Proc::new(p.nspace.clone(), r)));
        } else {
            members.push(p.clone());
        }
    }
    if !members.contains(&me) {
        return Ok(());
    }
    let info = if collect {
        vec![Info::attr(attr::COLLECT_DATA, true)]
    } else {
        vec![]
    };
    do_fence(c, &spec, &info, blocking)?;
    // After a collecting fence the data is here: OPTIONAL (local only) must find it.
    let get_info = if collect {
        vec![Info::attr(attr::OPTIONAL, true)]
    } else {
        vec![]
    };
    for p in members.iter().filter(|p| **p != me) {
        let v = c
            .get(p, &fence_key(p), &get_info)
            .map_err(e(&format!("get {} from {p}", fence_key(p))))?;
        check!(
            v == fence_value(p),
            "{p} has {v:?}, expected {:?}",
            fence_value(p)
        );
    }
    Ok(())
}

/// The demo's exchange: everyone puts its rank, fences with data, and reads every rank back;
/// prints one line per rank.
pub(crate) fn allgather(c: &Client) -> Res {
    let me = c.proc().clone();
    c.put(Scope::GLOBAL, "ag.rank", me.rank.0)
        .map_err(e("put"))?;
    c.commit().map_err(e("commit"))?;
    c.fence(&[], &[Info::attr(attr::COLLECT_DATA, true)])
        .map_err(e("fence"))?;
    let size = job_size(c, &me.nspace)?;
    for r in 0..size {
        let v = c
            .get(&Proc::new(me.nspace.clone(), r), "ag.rank", &[])
            .map_err(e("get"))?;
        check!(v == Value::Uint32(r), "rank {r} put {v:?}");
    }
    println!("rank {} of {size}: saw all {size} values", me.rank);
    Ok(())
}

/// A get of a key the peer puts after it committed something else (two ranks, each on a node
/// of its own): rank 1 commits "early"; rank 0 asks for rank 1's "late" (non-blocking) and
/// then fences with rank 1, so that its request reached rank 1's node, and rank 1's early
/// data its own, before rank 1 puts "late". The get waits for that key (its node asked rank
/// 1's to, as OpenPMIx 5 with PRRTE does) instead of failing on the early data.
pub(crate) fn late_key(c: &Client) -> Res {
    let me = c.proc().clone();
    let peer = Proc::new(me.nspace.clone(), 1);
    if me.rank.0 == 1 {
        c.put(Scope::GLOBAL, "early", 1u32).map_err(e("put"))?;
        c.commit().map_err(e("commit"))?;
        c.fence(&[], &[]).map_err(e("fence"))?;
        c.put(Scope::GLOBAL, "late", 2u32).map_err(e("put"))?;
        c.commit().map_err(e("commit"))?;
    } else {
        let (tx, rx) = std::sync::mpsc::channel();
        let timeout = [Info::attr(attr::TIMEOUT, 20i32)];
        c.get_nb(&peer, Some("late"), &timeout, move |r| {
            let _ = tx.send(r);
        });
        c.fence(&[], &[]).map_err(e("fence"))?;
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(30))
            .map_err(e("waiting for the get"))?
            .map_err(e("get of the late key"))?;
        check!(got == Value::Uint32(2), "late is {got:?}");
        println!("rank 0: got the late key");
    }
    c.fence(&[], &[]).map_err(e("last fence"))?;
    Ok(())
}

/// `fence-timeout` (tests.md C09, simptimeout): rank 0 alone enters a job-wide fence with
/// `TIMEOUT`, which must fail with `ERR_TIMEOUT` and be torn down: a later fence of the whole
/// job completes.
pub(crate) fn fence_timeout(c: &Client) -> Res {
    let me = c.proc().clone();
    if me.rank.0 == 0 {
        let r = c.fence(&[], &[Info::attr(attr::TIMEOUT, 1i32)]);
        check!(
            r.as_ref().is_err_and(|e| e.status() == Status::ERR_TIMEOUT),
            "fence with TIMEOUT: {r:?}"
        );
        c.put(Scope::GLOBAL, "ft.timed-out", true)
            .map_err(e("put"))?;
        c.commit().map_err(e("commit"))?;
    } else {
        // Joining before rank 0's fence timed out would complete it: wait for its commit.
        c.get(&Proc::new(me.nspace.clone(), 0), "ft.timed-out", &[])
            .map_err(e("get of rank 0's key"))?;
    }
    c.fence(&[], &[]).map_err(e("fence after the timeout"))
}

/// `stuck-fence <rank> <status|park>`: a job-wide fence that rank `<rank>` (not 0) never joins.
/// The others put and commit `sf.go`, say "ready" and wait in the fence (`TIMEOUT` 60 s) with
/// SIGTERM blocked, so that they can say how it failed before the launcher's SIGKILL:
/// `rank R: fence failed with <status>`. Rank `<rank>` says "ready"; given a status, it waits
/// for every other rank's commit (each is then in the fence or about to be, SIGTERM blocked)
/// and exits with it without finalize; given `park`, it waits to be killed. A failed fence is
/// what the others expect: they finalize and exit 0 after saying so, so that the run's first
/// failure is rank `<rank>`'s alone (exiting 1 too, one on its node could be reported first).
pub(crate) fn stuck_fence(c: &Client, rank: &str, how: &str) -> Res {
    let me = c.proc().clone();
    let stuck: u32 = rank.parse().map_err(e("rank"))?;
    if me.rank.0 == stuck {
        println!("ready");
        if how == "park" {
            park_forever()
        }
        let status: i32 = how.parse().map_err(e("status"))?;
        for r in (0..job_size(c, &me.nspace)?).filter(|r| *r != stuck) {
            c.get(&Proc::new(me.nspace.clone(), r), "sf.go", &[])
                .map_err(e("get of a peer's key"))?;
        }
        std::process::exit(status);
    }
    c.put(Scope::GLOBAL, "sf.go", true).map_err(e("put"))?;
    c.commit().map_err(e("commit"))?;
    println!("ready");
    match c.fence(&[], &[Info::attr(attr::TIMEOUT, 60i32)]) {
        Ok(()) => Err(format!("the fence completed without rank {stuck}")),
        Err(err) => {
            println!("rank {}: fence failed with {:?}", me.rank, err.status());
            Ok(())
        }
    }
}
