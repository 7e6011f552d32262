//! The scenarios of `openpmix/pmix_invite.c` on pmix-rs's client, with the same output lines,
//! so that any rank may run either program (`tests/groups.rs`): groups by invitation
//! (`group_invite`, `group_join`) and leaving them (`group_leave`).
//!
//! `pmix-group-client accept|accept-destruct|decline|ends|dies|silent`: `accept`, `decline`
//! and `ends` as in the C program
//! (rank 0 leads; in `decline` its invitation fails with `GROUP_INVITE_DECLINED`, printing
//! `declined rank=0 by=1`; in `ends` with `GROUP_INVITE_FAILED`, printing
//! `failed rank=0 affected=1`); `dies`: rank 1 exits without finalize when invited, and rank 0's
//! invitation fails (`failed rank=0 affected=1`); `silent`: rank 1 never answers, and rank 0's
//! invitation with `TIMEOUT` 2 fails with a timeout (`timeout rank=0`); `accept-destruct` is
//! `accept` after which the remaining members destruct the group (`destructed rank=R`);
//! `lcid` is `openpmix/pmix_group.c`'s (every rank shares a local CID in `GROUP_INFO` and
//! reads every member's back under the context id), printing `other=ERR_NOT_FOUND`. A
//! failure prints
//! `FAIL rank=R: <what>` on stderr and exits 2.

use std::process::ExitCode;
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use pmix_client::{
    Client, DataArray, Error, Event, GroupOpt, Info, Proc, Rank, Status, Value, attr,
};
use pmix_tests::scenario::{Res, e};

/// How long any wait for an event lasts, as in the C program.
const PATIENCE: Duration = Duration::from_secs(30);

/// Events of `codes`, as they come.
fn listen(c: &Client, codes: &[Status]) -> Result<Receiver<Event>, String> {
    let (tx, rx) = channel();
    let tx = Mutex::new(tx);
    c.register_event_handler(codes, &[], move |ev| {
        if let Ok(tx) = tx.lock() {
            let _ = tx.send(ev.clone());
        }
    })
    .map_err(e("registering"))?;
    Ok(rx)
}

fn next(rx: &Receiver<Event>, what: &str) -> Result<Event, String> {
    rx.recv_timeout(PATIENCE)
        .map_err(|_| format!("no {what} within 30 s"))
}

fn affected(ev: &Event) -> Option<u32> {
    ev.info
        .iter()
        .find(|i| i.key.as_str() == attr::EVENT_AFFECTED_PROC)
        .and_then(|i| i.value.as_proc())
        .map(|p| p.rank.0)
}

fn fence(c: &Client) -> Res {
    let all = Proc::new(c.proc().nspace.clone(), Rank::WILDCARD);
    c.fence(&[all], &[]).map_err(e("fence"))
}

fn ranks(c: &Client, r: &[u32]) -> Vec<Proc> {
    r.iter()
        .map(|r| Proc::new(c.proc().nspace.clone(), *r))
        .collect()
}

/// Waits for an invitation into `grp`; the leader.
fn invitation(rx: &Receiver<Event>, grp: &str) -> Result<Proc, String> {
    let ev = next(rx, "GROUP_INVITED")?;
    let to = ev
        .info
        .iter()
        .find(|i| i.key.as_str() == attr::GROUP_ID)
        .and_then(|i| i.value.as_str());
    if to != Some(grp) || ev.source.rank.0 != 0 {
        return Err(format!("invited into {to:?} by {}", ev.source));
    }
    Ok(ev.source)
}

fn server_status(r: Result<pmix_client::Group, Error>) -> Result<Status, String> {
    match r {
        Ok(g) => Err(format!("the invitation succeeded: {g:?}")),
        Err(err) => Ok(err.status()),
    }
}

/// `destruct`: the members that stay destruct the group (every rank must be this program).
fn accept(c: &Client, invited: &Receiver<Event>, left: &Receiver<Event>, destruct: bool) -> Res {
    let me = c.proc().rank.0;
    fence(c)?;
    if me == 0 {
        let g = c
            .group_invite("inv", &ranks(c, &[0, 1, 2]), &[])
            .map_err(e("group_invite"))?;
        if g.members != ranks(c, &[0, 1, 2]) {
            return Err(format!("members {:?}", g.members));
        }
        println!("invited rank=0");
    } else {
        let leader = invitation(invited, "inv")?;
        let g = c
            .group_join("inv", &leader, GroupOpt::Accept, &[])
            .map_err(e("group_join"))?
            .ok_or("joined nothing")?;
        println!(
            "joined rank={me} leader={} members={}",
            leader.rank.0,
            g.members.len()
        );
    }
    fence(c)?;
    if me == 1 {
        c.group_leave("inv", &[]).map_err(e("group_leave"))?;
        println!("left rank=1");
    } else {
        let ev = next(left, "GROUP_LEFT")?;
        println!("heard rank={me} left={}", affected(&ev).unwrap_or(u32::MAX));
        if destruct {
            // Among themselves: the server knows who left.
            c.group_destruct("inv", &[Info::attr(attr::TIMEOUT, 20)])
                .map_err(e("group_destruct"))?;
            println!("destructed rank={me}");
        }
    }
    fence(c)
}

fn decline(c: &Client, invited: &Receiver<Event>) -> Res {
    fence(c)?;
    if c.proc().rank.0 == 0 {
        let status = server_status(c.group_invite("dec", &ranks(c, &[0, 1]), &[]))?;
        if status != Status::GROUP_INVITE_DECLINED {
            return Err(format!("the invitation failed with {status:?}"));
        }
        println!("declined rank=0 by=1");
    } else {
        let leader = invitation(invited, "dec")?;
        println!("declining rank=1");
        let got = c
            .group_join("dec", &leader, GroupOpt::Decline, &[])
            .map_err(e("group_join"))?;
        if got.is_some() {
            return Err("declining returned a group".into());
        }
    }
    fence(c)
}

/// Rank 1 ends when invited (`finalize`: after finalizing; else at once, without), and rank
/// 0's invitation fails.
fn ends(c: &Client, invited: &Receiver<Event>, finalize: bool) -> Res {
    fence(c)?;
    if c.proc().rank.0 == 0 {
        let status = server_status(c.group_invite("gone", &ranks(c, &[0, 1]), &[]))?;
        if status != Status::GROUP_INVITE_FAILED {
            return Err(format!("the invitation failed with {status:?}"));
        }
        println!("failed rank=0 affected=1");
    } else {
        invitation(invited, "gone")?;
        println!("ending rank=1");
        if !finalize {
            use std::io::Write;
            let _ = std::io::stdout().flush();
            std::process::exit(0);
        }
    }
    Ok(())
}

fn silent(c: &Client, invited: &Receiver<Event>) -> Res {
    fence(c)?;
    if c.proc().rank.0 == 0 {
        let r = c.group_invite("quiet", &ranks(c, &[0, 1]), &[Info::attr(attr::TIMEOUT, 2)]);
        match r {
            Err(Error::Timeout) => println!("timeout rank=0"),
            other => return Err(format!("the invitation ended with {other:?}")),
        }
    } else {
        invitation(invited, "quiet")?;
    }
    fence(c)
}

fn lcid(c: &Client) -> Res {
    let me = c.proc().clone();
    let size = c
        .get(
            &Proc::new(me.nspace.clone(), Rank::WILDCARD),
            attr::JOB_SIZE,
            &[],
        )
        .map_err(e("job size"))?
        .as_u32()
        .ok_or("job size")?;
    let all: Vec<u32> = (0..size).collect();
    let mine = Value::Size(1000 + 10 * u64::from(me.rank.0));
    let shared = DataArray::from_infos(vec![Info::attr(attr::GROUP_LOCAL_CID, mine)]);
    let info = [
        Info::attr(attr::GROUP_ASSIGN_CONTEXT_ID, true),
        Info::attr(attr::GROUP_INFO, Value::DataArray(Box::new(shared))),
    ];
    let g = c
        .group_construct("lcid", &ranks(c, &all), &info)
        .map_err(e("group_construct"))?;
    let ctx = g.context_id.ok_or("no context id")?;
    c.group_destruct("lcid", &[]).map_err(e("group_destruct"))?;
    let under = |ctx: u64| {
        [
            Info::attr(attr::GROUP_CONTEXT_ID, Value::Size(ctx)).qualifier(),
            Info::attr(attr::TIMEOUT, 10),
        ]
    };
    let mut cids = Vec::new();
    for p in ranks(c, &all) {
        let v = c
            .get(&p, attr::GROUP_LOCAL_CID, &under(ctx))
            .map_err(e("get of a local CID"))?;
        let Value::Size(n) = v else {
            return Err(format!("{p}'s local CID is {v:?}"));
        };
        cids.push(n.to_string());
    }
    let other = match c.get(
        &ranks(c, &[0])[0],
        attr::GROUP_LOCAL_CID,
        &under(ctx + 1000),
    ) {
        Ok(v) => return Err(format!("a local CID under another context id: {v:?}")),
        Err(err) => err.status(),
    };
    println!(
        "lcid rank={} cids={} other={other:?}",
        me.rank.0,
        cids.join(",")
    );
    Ok(())
}

fn run(c: &Client, scenario: &str) -> Res {
    let invited = listen(c, &[Status::GROUP_INVITED])?;
    let left = listen(c, &[Status::GROUP_LEFT])?;
    match scenario {
        "accept" => accept(c, &invited, &left, false),
        "accept-destruct" => accept(c, &invited, &left, true),
        "decline" => decline(c, &invited),
        "ends" => ends(c, &invited, true),
        "dies" => ends(c, &invited, false),
        "silent" => silent(c, &invited),
        "lcid" => lcid(c),
        other => Err(format!("unknown scenario {other}")),
    }
}

fn main() -> ExitCode {
    let scenario = std::env::args().nth(1).unwrap_or_default();
    let c = match Client::init() {
        Ok(c) => c,
        Err(err) => {
            eprintln!("FAIL rank=-1: init: {err}");
            return ExitCode::from(2);
        }
    };
    let rank = c.proc().rank.0;
    let outcome = run(&c, &scenario).and_then(|()| c.finalize().map_err(e("finalize")));
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(what) => {
            eprintln!("FAIL rank={rank}: {what}");
            ExitCode::from(2)
        }
    }
}
