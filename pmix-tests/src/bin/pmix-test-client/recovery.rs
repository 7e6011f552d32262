//! A job that goes on without a rank (`pmixrun --enable-recovery`) or with it restarted
//! (`--max-restarts`): what the survivors are told, and what their fences and gets do.

use std::time::Duration;

use pmix_client::{Client, Info, Proc, Scope, Status, Value, attr};
use pmix_tests::check;
use pmix_tests::scenario::{Res, e};

use crate::job_data::job_size;
use crate::lifecycle::park_forever;

/// `recovery <rank> <status>`, under `pmixrun --enable-recovery`: once every rank is up (a
/// first fence), rank `<rank>` exits with `<status>` without finalize. Each other rank waits
/// (30 s at most) for `EVENT_PROC_TERMINATED` naming it with that exit code, fences with the
/// other survivors (which completes), then with the whole job and gets a key of the failed
/// rank (both fail: it will never come), and says each outcome in a line `rank R: <what>`; a
/// last fence of the survivors keeps each from finalizing before every other tried (a fence
/// naming only a finalized process fails too, with `ERR_NOT_FOUND`). With `<status>` `none`,
/// no rank fails and the whole job's fence completes; with `gone-before-init`, rank `<rank>` is expected never to start (the others'
/// first fence fails); with `abort:<status>`, rank `<rank>` calls abort with that status and
/// waits to be ended, and the others wait for `ERR_PROC_ABORTED` instead; with
/// `abort-by-<r>:<status>` rank `<r>` calls abort of rank `<rank>`, which waits to be ended,
/// and then goes on as the other survivors do. With a third
/// argument `timed`, every rank says `on <its hostname>`, the failing rank `exiting at <ns>`
/// and each survivor `told at <ns>` (when its handler ran; nanoseconds since the epoch) and
/// finishes after the survivors' fence: what the whole job's fence does without a rank is the
/// launcher's choice (PRRTE's completes it). A fourth argument names the event the survivors
/// wait for instead of `EVENT_PROC_TERMINATED`: `exit-nonzero`, `ERR_EXIT_NONZERO_TERM` (with
/// the same affected process and exit code), which PRRTE's `prterun --runtime-options
/// recoverable,notifyerrors` sends for a rank's non-zero exit and sends to no default handler.
pub(crate) fn recovery(c: &Client, rank: &str, status: &str, timed: bool, event: &str) -> Res {
    let me = c.proc().clone();
    let failing: u32 = rank.parse().map_err(e("rank"))?;
    let size = job_size(c, &me.nspace)?;
    let peer = |r: u32| Proc::new(me.nspace.clone(), r);
    let survivors: Vec<Proc> = (0..size).filter(|r| *r != failing).map(peer).collect();
    let last_fence = || {
        c.fence(&survivors, &[])
            .map_err(e("last fence of the survivors"))
    };
    let say = |what: String| println!("rank {}: {what}", me.rank);
    // The timeouts only bound a failure of this test: the server must fail these at once.
    let timeout = [Info::attr(attr::TIMEOUT, 30i32)];
    let job_fence = || match c.fence(&[], &timeout) {
        Ok(()) => Err(format!("the job's fence completed without rank {failing}")),
        Err(err) => {
            say(format!("job fence failed with {:?}", err.status()));
            Ok(())
        }
    };
    // Who calls abort, if somebody does: the failing rank itself, or another.
    let (status, aborter): (Option<i32>, Option<u32>) = match status {
        "none" => (None, None),
        "gone-before-init" => return job_fence().and_then(|()| last_fence()),
        s => match abort_request(s) {
            Some((by, s)) => {
                let by = by.map_or(Ok(failing), |r| r.parse().map_err(e("aborting rank")))?;
                (Some(s.parse().map_err(e("status"))?), Some(by))
            }
            None => (Some(s.parse().map_err(e("status"))?), None),
        },
    };
    let abort = aborter.is_some();
    let code = match (abort, event) {
        (true, _) => Status::ERR_PROC_ABORTED,
        (false, "") => Status::EVENT_PROC_TERMINATED,
        (false, "exit-nonzero") => Status::ERR_EXIT_NONZERO_TERM,
        (false, other) => return Err(format!("unknown event {other:?}")),
    };
    let (tx, told) = std::sync::mpsc::channel();
    c.register_event_handler(&[code], &[], move |ev| {
        let value = |k: &str| {
            ev.info
                .iter()
                .find(|i| i.key.as_str() == k)
                .map(|i| i.value.clone())
        };
        let at = wall_clock_ns();
        let _ = tx.send((value(attr::EVENT_AFFECTED_PROC), value(attr::EXIT_CODE), at));
    })
    .map_err(e("registering for the event"))?;
    if timed {
        let host = nix::unistd::gethostname().map_err(e("gethostname"))?;
        say(format!("on {}", host.to_string_lossy()));
    }
    c.fence(&[], &[]).map_err(e("first fence"))?;
    let Some(status) = status else {
        return c.fence(&[], &[]).map_err(e("fence of the whole job"));
    };
    if me.rank.0 == failing && aborter == Some(failing) {
        c.abort(Status(status), "recovery test", &[])
            .map_err(e("abort"))?;
        park_forever()
    }
    if me.rank.0 == failing && abort {
        // Another rank aborts it: it waits to be ended.
        park_forever()
    }
    if aborter == Some(me.rank.0) {
        c.abort(Status(status), "recovery test", &[peer(failing)])
            .map_err(e("abort of the failing rank"))?;
    }
    if me.rank.0 == failing {
        if timed {
            say(format!("exiting at {}", wall_clock_ns()));
        }
        std::process::exit(status);
    }
    let (who, exit_code, at) = told
        .recv_timeout(Duration::from_secs(30))
        .map_err(e("waiting for the event"))?;
    check!(
        who == Some(Value::Proc(peer(failing)))
            && exit_code.as_ref().and_then(Value::as_i64) == Some(i64::from(status)),
        "{code:?} for {who:?} with exit code {exit_code:?}"
    );
    say(format!("told rank {failing} ended with {status}"));
    if timed {
        say(format!("told at {at}"));
    }
    c.fence(&survivors, &[])
        .map_err(e("fence of the survivors"))?;
    say("survivors' fence done".into());
    if timed {
        return Ok(());
    }
    job_fence()?;
    match c.get(&peer(failing), "rc.never", &timeout) {
        Ok(v) => Err(format!("a get of the failed rank's key found {v:?}")),
        Err(err) => {
            say(format!("get failed with {:?}", err.status()));
            last_fence()
        }
    }
}

/// `abort:<status>` is `(None, status)`, `abort-by-<rank>:<status>` `(Some(rank), status)`.
fn abort_request(s: &str) -> Option<(Option<&str>, &str)> {
    if let Some(status) = s.strip_prefix("abort:") {
        return Some((None, status));
    }
    let (by, status) = s.strip_prefix("abort-by-")?.split_once(':')?;
    Some((Some(by), status))
}

/// Nanoseconds since the epoch: times that processes of one machine (its logical nodes too)
/// compare (`cargo xtask bench --recovery`).
fn wall_clock_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// `restart <rank> <status> <dir> [<failures>]`, under `pmixrun --max-restarts <failures>`
/// (`<failures>` 1 when not given): rank `<rank>` counts its lives in `<dir>/rank-<rank>`, the
/// witness of how often it was started, and exits with `<status>` without finalize in its
/// first `<failures>` lives, in the first once every rank is up (a first fence). Its last
/// life reads its own `PMIX_REINCARNATION`, which must be its life less one. The others,
/// registered for `EVENT_PROC_TERMINATED` before that fence, wait (30 s at most) until it
/// named the rank `<failures>` times; then every rank, the restarted one too, puts its life
/// and the reincarnation it read, fences with the whole job collecting data, and says
/// `rank R: rank <rank> is in life L, reincarnation K, C here`: K as the restarted rank read
/// it, C the `PMIX_REINCARNATION` of that rank in the job data of rank R (what it received
/// when it connected: 0 for the ranks that did before the restart). A fence that fails with
/// `ERR_PROC_TERM_WO_SYNC` is entered again (for 30 s at most): it may come before the
/// launcher registered the rank again.
pub(crate) fn restart(c: &Client, rank: &str, status: &str, dir: &str, failures: &str) -> Res {
    let me = c.proc().clone();
    let failing: u32 = rank.parse().map_err(e("rank"))?;
    let status: i32 = status.parse().map_err(e("status"))?;
    let failures: u32 = match failures {
        "" => 1,
        n => n.parse().map_err(e("failures"))?,
    };
    let marker = std::path::Path::new(dir).join(format!("rank-{failing}"));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let failing_proc = Proc::new(me.nspace.clone(), failing);
    let reincarnation_of = |p: &Proc| -> Result<u32, String> {
        let v = c
            .get(p, attr::REINCARNATION, &[])
            .map_err(e("get of REINCARNATION"))?;
        v.as_u32().ok_or_else(|| format!("REINCARNATION is {v:?}"))
    };
    let mut life = 1u32;
    let mut reincarnation = 0u32;
    if me.rank.0 == failing {
        let lived: u32 = match std::fs::read_to_string(&marker) {
            Ok(s) => s.trim().parse().map_err(e("the marker"))?,
            Err(_) => 0,
        };
        life = lived + 1;
        std::fs::write(&marker, life.to_string()).map_err(e("writing the marker"))?;
        if life == 1 {
            c.fence(&[], &[]).map_err(e("first fence"))?;
        }
        if life <= failures {
            std::process::exit(status);
        }
        reincarnation = reincarnation_of(&me)?;
        if reincarnation != life - 1 {
            return Err(format!(
                "REINCARNATION {reincarnation} in life {life}: the marker says {} restarts",
                life - 1
            ));
        }
    } else {
        let (tx, told) = std::sync::mpsc::channel();
        c.register_event_handler(&[Status::EVENT_PROC_TERMINATED], &[], move |ev| {
            let _ = tx.send(ev.info.clone());
        })
        .map_err(e("registering for EVENT_PROC_TERMINATED"))?;
        c.fence(&[], &[]).map_err(e("first fence"))?;
        let failed = Value::Proc(Proc::new(me.nspace.clone(), failing));
        let heard = |info: &[Info]| {
            info.iter()
                .any(|i| i.key.as_str() == attr::EVENT_AFFECTED_PROC && i.value == failed)
        };
        let wait = || {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            told.recv_timeout(left)
                .map_err(e("waiting for EVENT_PROC_TERMINATED"))
        };
        for _ in 0..failures {
            while !heard(&wait()?) {}
        }
    }
    c.put(Scope::GLOBAL, "rs.life", life).map_err(e("put"))?;
    c.put(Scope::GLOBAL, "rs.reinc", reincarnation)
        .map_err(e("put"))?;
    c.commit().map_err(e("commit"))?;
    let collect = [Info::attr(attr::COLLECT_DATA, true)];
    // Until this node's server hears of the restart, the fence fails at once: entered again,
    // each time a little later (1 ms, doubling to 64 ms), so that the processes waiting do
    // not keep their servers' loops busy for as long as the restart takes.
    let mut pause = Duration::from_millis(1);
    loop {
        match c.fence(&[], &collect) {
            Ok(()) => break,
            Err(err)
                if err.status() == Status::ERR_PROC_TERM_WO_SYNC
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(64));
            }
            Err(err) => return Err(format!("fence: {err}")),
        }
    }
    let put_by_it = |key: &str| -> Result<u32, String> {
        let v = c
            .get(&failing_proc, key, &[])
            .map_err(e("get of what the restarted rank put"))?;
        v.as_u32().ok_or_else(|| format!("its {key} is {v:?}"))
    };
    let (v, k) = (put_by_it("rs.life")?, put_by_it("rs.reinc")?);
    let here = reincarnation_of(&failing_proc)?;
    println!(
        "rank {}: rank {failing} is in life {v}, reincarnation {k}, {here} here",
        me.rank
    );
    Ok(())
}
