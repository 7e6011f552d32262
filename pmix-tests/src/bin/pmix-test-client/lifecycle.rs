//! How a process starts and ends: a refused init, a second init, init and finalize in
//! cycles, a rank's exit or abort, and a job that never ends.

use pmix_client::{Client, Info, Nspace, Proc, Rank, Scope, Status, Value, attr};
use pmix_tests::check;
use pmix_tests::scenario::{Res, e};

use crate::job_data::job_size;

/// Init must be refused with the named status.
pub(crate) fn expect_refused(status: &str) -> Res {
    let want = Status::from_name(status).ok_or_else(|| format!("unknown status {status}"))?;
    match Client::init() {
        Err(err) if err.status() == want => Ok(()),
        Err(err) => Err(format!(
            "refused with {:?} ({err}), expected {want:?}",
            err.status()
        )),
        Ok(_) => Err("init succeeded".into()),
    }
}

/// A second connection as the same process is refused; the first keeps working.
pub(crate) fn double_init(c: &Client) -> Res {
    match Client::init() {
        Err(err) if err.status() == Status::ERR_EXISTS => {}
        other => return Err(format!("second init: {:?}", other.map(|_| ()))),
    }
    c.put(Scope::GLOBAL, "still", "alive").map_err(e("put"))?;
    c.commit().map_err(e("commit"))?;
    c.fence(&[], &[]).map_err(e("fence"))
}

/// `finalize-barrier`: rank 0 finalizes with `PMIX_EMBED_BARRIER`, the others then enter a
/// plain fence over the namespace, which only that embedded barrier can complete (a fence
/// whose participant finalized without one fails with `ERR_NOT_FOUND`).
pub(crate) fn finalize_barrier(c: &Client) -> Res {
    if c.proc().rank.0 == 0 {
        let embed = [Info::attr(attr::EMBED_BARRIER, true)];
        return c
            .finalize_with(&embed)
            .map_err(e("finalize with EMBED_BARRIER"));
    }
    let all = [Proc::new(c.proc().nspace.clone(), Rank::WILDCARD)];
    c.fence(&all, &[])
        .map_err(e("the fence rank 0's finalize was to join"))
}

/// C01, `init-cycle N`: finalize and init again N times under the launcher (the same name
/// comes back, with the data it committed in every cycle), then the same as a singleton in
/// this very process (a rendezvous naming no server), whose job is itself alone.
pub(crate) fn init_cycle(first: &Client, cycles: &str) -> Res {
    let n: u32 = cycles.parse().map_err(e("N"))?;
    let me = first.proc().clone();
    let size = job_size(first, &me.nspace)?;
    first
        .put(Scope::GLOBAL, "ic.first", me.rank.0)
        .map_err(e("put"))?;
    first.commit().map_err(e("commit"))?;
    first.finalize().map_err(e("finalize"))?;
    let after = first.put(Scope::GLOBAL, "ic.after", 1u8);
    check!(
        after
            .as_ref()
            .is_err_and(|e| e.status() == Status::ERR_INIT),
        "put after finalize: {after:?}"
    );
    let mut c = first.clone();
    for i in 1..=n {
        c = Client::init().map_err(e("init again"))?;
        check!(
            *c.proc() == me,
            "init {i} named {} instead of {me}",
            c.proc()
        );
        check!(job_size(&c, &me.nspace)? == size, "job size in cycle {i}");
        c.put(Scope::GLOBAL, "ic.cycle", i).map_err(e("put"))?;
        c.commit().map_err(e("commit"))?;
        if i < n {
            c.finalize().map_err(e("finalize"))?;
        }
    }
    // Nobody fences until everyone is done cycling: a fence naming a process between its
    // finalize and its next init fails at once, as it must for a process that is gone.
    let done = format!("ic.done.{}", me.rank);
    c.publish(
        &[Info::new(
            pmix_client::Key::new(&done).map_err(e("key"))?,
            true,
        )],
        &[],
    )
    .map_err(e("publish"))?;
    let keys: Vec<String> = (0..size).map(|r| format!("ic.done.{r}")).collect();
    let keys: Vec<&str> = keys.iter().map(String::as_str).collect();
    c.lookup(
        &keys,
        &[
            Info::attr(attr::WAIT, true),
            Info::attr(attr::TIMEOUT, 60i32),
        ],
    )
    .map_err(e("waiting for everyone's cycles"))?;
    c.fence(&[], &[Info::attr(attr::COLLECT_DATA, true)])
        .map_err(e("fence"))?;
    // What this process put before it finalized is the server's now, no longer its own:
    // others read it, it does not (a process's own data is only what it put since init).
    let own = c.get(&me, "ic.first", &[]);
    check!(
        own.as_ref()
            .is_err_and(|e| e.status() == Status::ERR_NOT_FOUND),
        "own ic.first of an earlier init: {own:?}"
    );
    for r in 0..size {
        let p = Proc::new(me.nspace.clone(), r);
        if r != me.rank.0 {
            let v = c.get(&p, "ic.first", &[]).map_err(e("get ic.first"))?;
            check!(v == Value::Uint32(r), "ic.first of {p}: {v:?}");
        }
        let v = c.get(&p, "ic.cycle", &[]).map_err(e("get ic.cycle"))?;
        check!(v == Value::Uint32(n), "ic.cycle of {p}: {v:?}");
    }
    c.fence(&[], &[]).map_err(e("last fence"))?;
    c.finalize().map_err(e("last finalize"))?;

    let mut single: Option<Nspace> = None;
    for i in 0..n {
        let s = Client::init_with_env(|_| None).map_err(e("singleton init"))?;
        let sp = s.proc().clone();
        check!(
            single.as_ref().is_none_or(|ns| *ns == sp.nspace),
            "singleton {i} is {sp}, was {single:?}"
        );
        check!(
            sp.nspace.as_str().starts_with("singleton.")
                && sp
                    .nspace
                    .as_str()
                    .ends_with(&format!(".{}", std::process::id()))
                && sp.rank == Rank(0),
            "singleton named {sp}"
        );
        check!(job_size(&s, &sp.nspace)? == 1, "singleton job size");
        s.put(Scope::GLOBAL, "ic.single", i)
            .map_err(e("singleton put"))?;
        s.commit().map_err(e("singleton commit"))?;
        s.fence(&[], &[]).map_err(e("singleton fence"))?;
        let v = s.get(&sp, "ic.single", &[]).map_err(e("singleton get"))?;
        check!(v == Value::Uint32(i), "singleton value {v:?}");
        let with_job = s.fence(
            &[sp.clone(), Proc::new(me.nspace.clone(), Rank::WILDCARD)],
            &[],
        );
        check!(
            with_job
                .as_ref()
                .is_err_and(|e| e.status() == Status::ERR_UNREACH),
            "a singleton's fence with a launched job: {with_job:?}"
        );
        s.finalize().map_err(e("singleton finalize"))?;
        single = Some(sp.nspace);
    }
    Ok(())
}

/// `exit-rank <rank> <status>`: that rank exits at once without finalize; the others wait to
/// be killed.
pub(crate) fn exit_rank(c: &Client, rank: &str, status: &str) -> Res {
    let rank: u32 = rank.parse().map_err(e("rank"))?;
    let status: i32 = status.parse().map_err(e("status"))?;
    if c.proc().rank.0 == rank {
        std::process::exit(status);
    }
    park_forever()
}

/// `abort <status> [park]`: once every rank is up (a first fence of the whole job), rank 0
/// aborts the job; the others wait in a fence rank 0 never joins, or with `park` outside any
/// PMIx call (slurmstepd keeps an unfinished fence's state, and itself, for its `PMIxTimeout`
/// after the step ended).
///
/// Without the first fence rank 0 could abort while another node was still starting its
/// ranks, and the launcher's teardown of a half-started node is another test than this one.
pub(crate) fn abort(c: &Client, status: &str, others: &str) -> Res {
    let status: i32 = status.parse().map_err(e("status"))?;
    c.fence(&[], &[]).map_err(e("first fence"))?;
    if c.proc().rank.0 == 0 {
        c.abort(Status(status), "test abort", &[])
            .map_err(e("abort"))?;
        park_forever()
    }
    if others == "park" {
        park_forever()
    }
    c.fence(&[], &[]).map_err(e("fence"))?;
    Err("the fence completed without rank 0".into())
}

/// A job that never ends: rank 0 fences with rank 1, which waits for data rank 0 never
/// commits. Every rank says "ready" once it is about to block.
pub(crate) fn hang(c: &Client) -> Res {
    let me = c.proc().clone();
    let peer = |r: u32| Proc::new(me.nspace.clone(), r);
    println!("ready");
    match me.rank.0 {
        0 => c.fence(&[peer(0), peer(1)], &[]).map_err(e("fence"))?,
        1 => {
            c.get(&peer(0), "never", &[]).map_err(e("get"))?;
        }
        _ => park_forever(),
    }
    Err("the hang ended".into())
}

/// Blocks this process until it is killed: a rank that waits on the launcher, not on a peer.
pub(crate) fn park_forever() -> ! {
    loop {
        std::thread::park();
    }
}
