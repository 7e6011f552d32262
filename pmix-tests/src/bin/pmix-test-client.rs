//! The scenario client the integration tests start as real processes.
//!
//! `pmix-test-client <scenario> [args...]`: exits 0 when every check of the scenario passed,
//! otherwise prints what failed and exits 1.

use std::process::ExitCode;
use std::time::Duration;

use pmix_client::{Client, Info, Nspace, Proc, Rank, Scope, Status, Value, attr};
use pmix_tests::check;
use pmix_tests::scenario::{Res, e};

fn job_size(c: &Client, ns: &Nspace) -> Result<u32, String> {
    let v = c
        .get(&Proc::new(ns.clone(), Rank::WILDCARD), attr::JOB_SIZE, &[])
        .map_err(e("get JOB_SIZE"))?;
    v.as_u32().ok_or_else(|| format!("JOB_SIZE is {v:?}"))
}

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

fn fence_key(p: &Proc) -> String {
    format!("fk.{}.{}", p.nspace, p.rank)
}

fn fence_value(p: &Proc) -> Value {
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
fn fence(c: &Client, spec: &str, flags: &str) -> Res {
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

/// make-check 12: put N keys, fence, replace some, fence, everyone sees the new values.
fn replace(c: &Client, n: u32, replaced: &str) -> Res {
    let me = c.proc().clone();
    let replaced: Vec<u32> = replaced
        .split(',')
        .map(|k| k.parse().map_err(e("key index")))
        .collect::<Result<_, _>>()?;
    for k in 0..n {
        c.put(
            Scope::GLOBAL,
            &format!("rk{k}"),
            Value::Uint64(u64::from(me.rank.0) * 1000 + u64::from(k)),
        )
        .map_err(e("put"))?;
    }
    c.commit().map_err(e("commit"))?;
    c.fence(&[], &[Info::attr(attr::COLLECT_DATA, true)])
        .map_err(e("fence 1"))?;
    for &k in &replaced {
        c.put(
            Scope::GLOBAL,
            &format!("rk{k}"),
            Value::String(format!("new{}-{k}", me.rank)),
        )
        .map_err(e("re-put"))?;
    }
    c.commit().map_err(e("commit 2"))?;
    c.fence(&[], &[Info::attr(attr::COLLECT_DATA, true)])
        .map_err(e("fence 2"))?;
    let size = job_size(c, &me.nspace)?;
    for r in 0..size {
        let p = Proc::new(me.nspace.clone(), r);
        for k in 0..n {
            let v = c
                .get(&p, &format!("rk{k}"), &[])
                .map_err(e(&format!("get rk{k} of {p}")))?;
            let want = if replaced.contains(&k) {
                Value::String(format!("new{r}-{k}"))
            } else {
                Value::Uint64(u64::from(r) * 1000 + u64::from(k))
            };
            check!(v == want, "{p} rk{k} = {v:?}, expected {want:?}");
        }
    }
    Ok(())
}

/// make-check 13: store_internal keys are visible to self only.
fn internal(c: &Client, n: u32) -> Res {
    let me = c.proc().clone();
    for k in 0..n {
        c.store_internal(&format!("ik{k}"), Value::Uint32(k))
            .map_err(e("store_internal"))?;
    }
    c.put(Scope::GLOBAL, "visible", true).map_err(e("put"))?;
    c.commit().map_err(e("commit"))?;
    c.fence(&[], &[]).map_err(e("fence"))?;
    for k in 0..n {
        let v = c
            .get(&me, &format!("ik{k}"), &[])
            .map_err(e("own internal get"))?;
        check!(v == Value::Uint32(k), "own ik{k} = {v:?}");
    }
    let size = job_size(c, &me.nspace)?;
    for r in (0..size).filter(|r| *r != me.rank.0) {
        let p = Proc::new(me.nspace.clone(), r);
        c.get(&p, "visible", &[]).map_err(e("peer visible key"))?;
        for k in 0..n {
            match c.get(&p, &format!("ik{k}"), &[]) {
                Err(err) if err.status() == Status::ERR_NOT_FOUND => {}
                other => return Err(format!("internal key ik{k} of {p} is visible: {other:?}")),
            }
        }
    }
    c.fence(&[], &[]).map_err(e("final fence"))
}

/// Get semantics; needs at least 3 ranks.
fn get_semantics(c: &Client) -> Res {
    let me = c.proc().clone();
    let ns = me.nspace.clone();
    let p = |r: u32| Proc::new(ns.clone(), r);
    // Reserved keys are refused by Put.
    match c.put(Scope::GLOBAL, "pmix.mine", 1u32) {
        Err(err) if err.status() == Status::ERR_BAD_PARAM => {}
        other => return Err(format!("put of a reserved key: {other:?}")),
    }
    match me.rank.0 {
        0 => {
            // Rank 1 commits only after fence 1, so an IMMEDIATE get must miss now.
            let imm = c.get(&p(1), "late", &[Info::attr(attr::IMMEDIATE, true)]);
            check!(
                imm.as_ref()
                    .is_err_and(|e| e.status() == Status::ERR_NOT_FOUND),
                "IMMEDIATE get before commit: {imm:?}"
            );
            c.fence(&[], &[]).map_err(e("fence 1"))?;
            // Without IMMEDIATE the get waits for rank 1's commit.
            let v = c.get(&p(1), "late", &[]).map_err(e("get of late"))?;
            check!(v == Value::Int32(-7), "late = {v:?}");
            // Rank 2 commits only after fence 2, which rank 0 enters after this get: timeout.
            let t = c.get(&p(2), "never", &[Info::attr(attr::TIMEOUT, 1i32)]);
            check!(
                t.as_ref().is_err_and(|e| e.status() == Status::ERR_TIMEOUT),
                "get with TIMEOUT: {t:?}"
            );
            c.fence(&[], &[]).map_err(e("fence 2"))?;
            // A key the committed process does not have: NOT_FOUND, no waiting.
            let miss = c.get(&p(1), "nope", &[]);
            check!(
                miss.as_ref()
                    .is_err_and(|e| e.status() == Status::ERR_NOT_FOUND),
                "missing key: {miss:?}"
            );
            // OPTIONAL never asks the server: rank 2's data was never fetched here.
            let opt = c.get(&p(2), "never", &[Info::attr(attr::OPTIONAL, true)]);
            check!(
                opt.as_ref()
                    .is_err_and(|e| e.status() == Status::ERR_NOT_FOUND),
                "OPTIONAL get: {opt:?}"
            );
            let v = c
                .get(&p(2), "never", &[])
                .map_err(e("get of never after commit"))?;
            check!(v == Value::Bool(true), "never = {v:?}");
        }
        1 => {
            c.fence(&[], &[]).map_err(e("fence 1"))?;
            c.put(Scope::GLOBAL, "late", -7i32).map_err(e("put"))?;
            c.commit().map_err(e("commit"))?;
            c.fence(&[], &[]).map_err(e("fence 2"))?;
        }
        _ => {
            c.fence(&[], &[]).map_err(e("fence 1"))?;
            c.fence(&[], &[]).map_err(e("fence 2"))?;
            c.put(Scope::GLOBAL, "never", true).map_err(e("put"))?;
            c.commit().map_err(e("commit"))?;
        }
    }
    c.fence(&[], &[]).map_err(e("fence 3"))
}

/// Job-level data arrives at init and is derived where the host left it out.
/// `anl-map [MAP]`: `PMIX_ANL_MAP` is `MAP`, by default that of a job on one node (all of
/// its ranks on node 0).
fn anl_map(c: &Client, expected: &str) -> Res {
    let me = c.proc().clone();
    let size = job_size(c, &me.nspace)?;
    let wild = Proc::new(me.nspace.clone(), Rank::WILDCARD);
    let map = c.get(&wild, attr::ANL_MAP, &[]).map_err(e("ANL_MAP"))?;
    let want = if expected.is_empty() {
        format!("(vector,(0,1,{size}))")
    } else {
        expected.to_owned()
    };
    check!(map.as_str() == Some(want.as_str()), "ANL_MAP = {map:?}");
    Ok(())
}

/// Each rank attaches a Rust `Tool` to its own server (found by the server's namespace, from
/// the job data, through the server's rendezvous file), finds itself with its own pid in its
/// job's process table, and finalizes the tool; the job then fences: the tools changed
/// nothing for it.
fn tool(c: &Client) -> Res {
    use pmix_client::tool::{Attach, Tool};
    let me = c.proc().clone();
    let size = job_size(c, &me.nspace)?;
    let server = c
        .get(
            &Proc::new(me.nspace.clone(), Rank::WILDCARD),
            attr::SERVER_NSPACE,
            &[],
        )
        .map_err(e("get SERVER_NSPACE"))?;
    let server = server.as_str().ok_or("SERVER_NSPACE is no string")?;
    let mut t = Tool::init(Attach::Nspace(server.to_owned())).map_err(e("Tool::init"))?;
    let table = t
        .query_keys(
            &[attr::QUERY_PROC_TABLE],
            vec![Info::attr(attr::NSPACE, me.nspace.as_str())],
        )
        .map_err(e("query the process table"))?;
    let rows = table
        .iter()
        .find(|i| i.key.as_str() == attr::QUERY_PROC_TABLE)
        .and_then(|i| match &i.value {
            Value::DataArray(a) => Some(a.items().to_vec()),
            _ => None,
        })
        .ok_or("no process table")?;
    check!(
        rows.len() == size as usize,
        "{} rows for {size} ranks",
        rows.len()
    );
    let mine = rows.iter().find_map(|r| match r {
        Value::ProcInfo(p) if p.proc == me => Some(p.pid),
        _ => None,
    });
    check!(
        mine == Some(std::process::id()),
        "my row has pid {mine:?}, I am {}",
        std::process::id()
    );
    t.finalize().map_err(e("tool finalize"))?;
    c.fence(&[], &[]).map_err(e("fence"))
}

/// Groups: every rank constructs the group of all ranks, then its pair's group (ranks 2k and
/// 2k+1), each with a context id; the members come back sorted, every member of a group got
/// the same id and no two groups got the same one (checked through each rank's put of its
/// ids); then the groups are destructed, and a destructed group is not found.
fn groups(c: &Client) -> Res {
    let me = c.proc().clone();
    let size = job_size(c, &me.nspace)?;
    let ctx = [Info::attr(attr::GROUP_ASSIGN_CONTEXT_ID, true)];
    let procs = |ranks: std::ops::Range<u32>| -> Vec<Proc> {
        ranks.map(|r| Proc::new(me.nspace.clone(), r)).collect()
    };
    // Given in reverse: the answer is sorted.
    let mut all = procs(0..size);
    all.reverse();
    let g = c
        .group_construct("all", &all, &ctx)
        .map_err(e("construct all"))?;
    check!(
        g.members == procs(0..size),
        "members of all: {:?}",
        g.members
    );
    let all_id = g.context_id.ok_or("no context id for all")?;
    let pair = me.rank.0 / 2;
    let mates = procs(pair * 2..(pair * 2 + 2).min(size));
    let p = c
        .group_construct(&format!("pair{pair}"), &mates, &ctx)
        .map_err(e("construct pair"))?;
    check!(p.members == mates, "members of the pair: {:?}", p.members);
    let pair_id = p.context_id.ok_or("no context id for the pair")?;
    check!(
        pair_id != all_id,
        "the pair and all share context id {all_id}"
    );
    let ids = Value::String(format!("{all_id} {pair_id}"));
    c.put(Scope::GLOBAL, "gids", ids).map_err(e("put"))?;
    c.commit().map_err(e("commit"))?;
    c.fence(&[], &[Info::attr(attr::COLLECT_DATA, true)])
        .map_err(e("fence"))?;
    for r in 0..size {
        let v = c
            .get(&Proc::new(me.nspace.clone(), r), "gids", &[])
            .map_err(e("get"))?;
        let theirs: Vec<u64> = v
            .as_str()
            .unwrap_or("")
            .split(' ')
            .filter_map(|x| x.parse().ok())
            .collect();
        check!(theirs.len() == 2, "rank {r} put {v:?}");
        check!(
            theirs[0] == all_id,
            "rank {r} got {} for all, I {all_id}",
            theirs[0]
        );
        let same_pair = r / 2 == pair;
        check!(
            (theirs[1] == pair_id) == same_pair && theirs[1] != all_id,
            "rank {r}'s pair id {} against mine {pair_id}",
            theirs[1]
        );
    }
    c.group_destruct(&format!("pair{pair}"), &[])
        .map_err(e("destruct pair"))?;
    c.group_destruct("all", &[]).map_err(e("destruct all"))?;
    match c.group_destruct("all", &[]) {
        Err(err) if err.status() == Status::ERR_NOT_FOUND => Ok(()),
        other => Err(format!("destructing all again: {other:?}")),
    }
}

/// A fence over a group's id: the even ranks put a key, construct `ourgroup` of themselves
/// and fence over `{ourgroup, WILDCARD}` collecting data, after which every member's key is
/// here (`OPTIONAL`: no server trip). An odd rank's fence over the id is refused (no member,
/// or no such group yet), as is any fence over it once destructed; the job then fences.
fn group_fence(c: &Client) -> Res {
    let me = c.proc().clone();
    let size = job_size(c, &me.nspace)?;
    let over_group = [Proc::new(
        Nspace::new("ourgroup").map_err(e("group id"))?,
        Rank::WILDCARD,
    )];
    let collect = [Info::attr(attr::COLLECT_DATA, true)];
    if me.rank.0 % 2 == 1 {
        check!(
            c.fence(&over_group, &collect).is_err(),
            "a fence over a group I am not in succeeded"
        );
        return c.fence(&[], &[]).map_err(e("job fence"));
    }
    c.put(Scope::GLOBAL, &fence_key(&me), fence_value(&me))
        .map_err(e("put"))?;
    c.commit().map_err(e("commit"))?;
    let members: Vec<Proc> = (0..size)
        .step_by(2)
        .map(|r| Proc::new(me.nspace.clone(), r))
        .collect();
    c.group_construct("ourgroup", &members, &[])
        .map_err(e("construct ourgroup"))?;
    c.fence(&over_group, &collect)
        .map_err(e("fence over ourgroup"))?;
    let local_only = [Info::attr(attr::OPTIONAL, true)];
    for p in members.iter().filter(|p| **p != me) {
        let v = c
            .get(p, &fence_key(p), &local_only)
            .map_err(e(&format!("get {} from {p}", fence_key(p))))?;
        check!(v == fence_value(p), "{p} has {v:?}");
    }
    c.group_destruct("ourgroup", &[])
        .map_err(e("destruct ourgroup"))?;
    check!(
        c.fence(&over_group, &[]).is_err(),
        "a fence over a destructed group succeeded"
    );
    c.fence(&[], &[]).map_err(e("job fence"))
}

/// Process sets the host defined before the job started: `QUERY_NUM_PSETS` is `n`,
/// `QUERY_PSET_NAMES` is `names`, and the members of each (`QUERY_PSET_MEMBERSHIP`) are the
/// ranks of this job listed after `=` in `members` ("set=0,2;other=1").
fn psets(c: &Client, n: &str, names: &str, members: &str) -> Res {
    use pmix_wire::Query;
    let me = c.proc().clone();
    let key = |k: &str| pmix_client::types::Key::new(k).map_err(|e| format!("{k}: {e}"));
    let q = Query {
        keys: vec![key(attr::QUERY_NUM_PSETS)?, key(attr::QUERY_PSET_NAMES)?],
        qualifiers: vec![],
    };
    let got = c.query(&[q]).map_err(e("query"))?;
    let num = got.iter().find(|i| i.key.as_str() == attr::QUERY_NUM_PSETS);
    check!(
        num.and_then(|i| i.value.as_u64())
            .map(|v| v.to_string())
            .as_deref()
            == Some(n),
        "QUERY_NUM_PSETS: {num:?}"
    );
    let listed = got
        .iter()
        .find(|i| i.key.as_str() == attr::QUERY_PSET_NAMES);
    check!(
        listed.and_then(|i| i.value.as_str()) == Some(names),
        "QUERY_PSET_NAMES: {listed:?}"
    );
    for spec in members.split(';').filter(|s| !s.is_empty()) {
        let (name, ranks) = spec.split_once('=').ok_or("members: name=ranks")?;
        let want: Vec<Value> = ranks
            .split(',')
            .filter_map(|r| r.parse::<u32>().ok())
            .map(|r| Value::Proc(Proc::new(me.nspace.clone(), r)))
            .collect();
        let q = Query {
            keys: vec![key(attr::QUERY_PSET_MEMBERSHIP)?],
            qualifiers: vec![Info::attr(attr::PSET_NAME, name)],
        };
        let got = c.query(&[q]).map_err(e("membership query"))?;
        let m = got.first().and_then(|i| match &i.value {
            Value::DataArray(a) => Some(a.items().to_vec()),
            _ => None,
        });
        check!(
            m.as_deref() == Some(&want[..]),
            "members of {name}: {got:?}"
        );
    }
    Ok(())
}

/// Every rank puts `rf` = `old<rank>`, reads its right neighbour's (cached from then on),
/// puts `new<rank>`: a plain get still reads the cached old value, one with
/// `GET_REFRESH_CACHE` the new one, which is cached from then on.
fn refresh(c: &Client) -> Res {
    let me = c.proc().clone();
    let size = job_size(c, &me.nspace)?;
    let next = (me.rank.0 + 1) % size;
    let peer = Proc::new(me.nspace.clone(), next);
    let value = |age: &str, r: u32| Value::String(format!("{age}{r}"));
    let round = |age: &str| -> Res {
        c.put(Scope::GLOBAL, "rf", value(age, me.rank.0))
            .map_err(e("put"))?;
        c.commit().map_err(e("commit"))?;
        c.fence(&[], &[]).map_err(e("fence"))
    };
    round("old")?;
    let v = c.get(&peer, "rf", &[]).map_err(e("get"))?;
    check!(v == value("old", next), "first get: {v:?}");
    // Nobody puts the new value before everyone has read the old one.
    c.fence(&[], &[]).map_err(e("fence after reading"))?;
    round("new")?;
    let v = c.get(&peer, "rf", &[]).map_err(e("cached get"))?;
    check!(v == value("old", next), "a plain get left the cache: {v:?}");
    let refresh = [Info::attr(attr::GET_REFRESH_CACHE, true)];
    let v = c.get(&peer, "rf", &refresh).map_err(e("refreshed get"))?;
    check!(v == value("new", next), "refreshed get: {v:?}");
    let v = c.get(&peer, "rf", &[]).map_err(e("get after refresh"))?;
    check!(v == value("new", next), "after the refresh: {v:?}");
    // Everyone has read before anyone finalizes.
    c.fence(&[], &[]).map_err(e("last fence"))
}

fn jobinfo(c: &Client) -> Res {
    let me = c.proc().clone();
    let wild = Proc::new(me.nspace.clone(), Rank::WILDCARD);
    let size = job_size(c, &me.nspace)?;
    let u32_of = |p: &Proc, k: &str| -> Result<u32, String> {
        let v = c.get(p, k, &[]).map_err(e(k))?;
        v.as_u32().ok_or_else(|| format!("{k} is {v:?}"))
    };
    check!(
        u32_of(&wild, attr::LOCAL_SIZE)? == size,
        "LOCAL_SIZE != JOB_SIZE on one node"
    );
    check!(
        u32_of(&wild, attr::UNIV_SIZE)? >= size,
        "UNIV_SIZE < JOB_SIZE"
    );
    check!(u32_of(&me, attr::LOCAL_RANK)? == me.rank.0, "LOCAL_RANK");
    check!(u32_of(&me, attr::NODE_RANK)? == me.rank.0, "NODE_RANK");
    check!(u32_of(&me, attr::RANK)? == me.rank.0, "RANK");
    check!(u32_of(&me, attr::APPNUM)? == 0, "APPNUM");
    let peers = c
        .get(&wild, attr::LOCAL_PEERS, &[])
        .map_err(e("LOCAL_PEERS"))?;
    let want: Vec<String> = (0..size).map(|r| r.to_string()).collect();
    check!(
        peers.as_str() == Some(want.join(",").as_str()),
        "LOCAL_PEERS = {peers:?}"
    );
    let host = c.get(&me, attr::HOSTNAME, &[]).map_err(e("HOSTNAME"))?;
    check!(
        host.as_str().is_some_and(|h| !h.is_empty()),
        "HOSTNAME = {host:?}"
    );
    let nsv = c.get(&wild, attr::NSPACE, &[]).map_err(e("NSPACE"))?;
    check!(nsv.as_str() == Some(me.nspace.as_str()), "NSPACE = {nsv:?}");
    let miss = c.get(&wild, "pmix.no.such.key", &[]);
    check!(
        miss.as_ref()
            .is_err_and(|e| e.status() == Status::ERR_NOT_FOUND),
        "unknown reserved key: {miss:?}"
    );
    Ok(())
}

/// LOCAL / REMOTE / GLOBAL on one node: REMOTE data is invisible to node peers.
fn scope(c: &Client) -> Res {
    let me = c.proc().clone();
    c.put(Scope::LOCAL, "s.local", 1u8).map_err(e("put"))?;
    c.put(Scope::REMOTE, "s.remote", 2u8).map_err(e("put"))?;
    c.put(Scope::GLOBAL, "s.global", 3u8).map_err(e("put"))?;
    c.commit().map_err(e("commit"))?;
    c.fence(&[], &[Info::attr(attr::COLLECT_DATA, true)])
        .map_err(e("fence"))?;
    check!(
        c.get(&me, "s.remote", &[]).map_err(e("own remote"))? == Value::Uint8(2),
        "own REMOTE value"
    );
    let size = job_size(c, &me.nspace)?;
    for r in (0..size).filter(|r| *r != me.rank.0) {
        let p = Proc::new(me.nspace.clone(), r);
        check!(
            c.get(&p, "s.local", &[]).map_err(e("peer local"))? == Value::Uint8(1),
            "peer LOCAL"
        );
        check!(
            c.get(&p, "s.global", &[]).map_err(e("peer global"))? == Value::Uint8(3),
            "peer GLOBAL"
        );
        let rem = c.get(&p, "s.remote", &[]);
        check!(
            rem.as_ref()
                .is_err_and(|e| e.status() == Status::ERR_NOT_FOUND),
            "peer REMOTE visible: {rem:?}"
        );
        // All of a peer's data, as a data array of info.
        let all = c.get_all(&p, &[]).map_err(e("get_all"))?;
        let arr = all
            .as_array()
            .ok_or_else(|| format!("get_all gave {all:?}"))?;
        let keys: Vec<&str> = arr.infos().map(|i| i.key.as_str()).collect();
        check!(
            keys.contains(&"s.local") && keys.contains(&"s.global") && !keys.contains(&"s.remote"),
            "get_all keys {keys:?}"
        );
    }
    c.fence(&[], &[]).map_err(e("final fence"))
}

/// Init must be refused with the named status.
fn expect_refused(status: &str) -> Res {
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
fn double_init(c: &Client) -> Res {
    match Client::init() {
        Err(err) if err.status() == Status::ERR_EXISTS => {}
        other => return Err(format!("second init: {:?}", other.map(|_| ()))),
    }
    c.put(Scope::GLOBAL, "still", "alive").map_err(e("put"))?;
    c.commit().map_err(e("commit"))?;
    c.fence(&[], &[]).map_err(e("fence"))
}

/// C01, `init-cycle N`: finalize and init again N times under the launcher (the same name
/// comes back, with the data it committed in every cycle), then the same as a singleton in
/// this very process (a rendezvous naming no server), whose job is itself alone.
fn init_cycle(first: &Client, cycles: &str) -> Res {
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

fn run(args: &[String]) -> Res {
    let scenario = args.first().map(String::as_str).unwrap_or("");
    let arg = |i: usize| args.get(i).map(String::as_str).unwrap_or("");
    if scenario == "expect-refused" {
        return expect_refused(arg(1));
    }
    if scenario == "stuck-fence" {
        // Before init, so that the client's threads block it too.
        let term = nix::sys::signal::SigSet::from(nix::sys::signal::Signal::SIGTERM);
        nix::sys::signal::pthread_sigmask(
            nix::sys::signal::SigmaskHow::SIG_BLOCK,
            Some(&term),
            None,
        )
        .map_err(e("blocking SIGTERM"))?;
    }
    let c = Client::init().map_err(e("init"))?;
    let result = match scenario {
        "fence" => fence(&c, arg(1), arg(2)),
        "replace" => replace(&c, arg(1).parse().map_err(e("N"))?, arg(2)),
        "internal" => internal(&c, arg(1).parse().map_err(e("N"))?),
        "get-semantics" => get_semantics(&c),
        "jobinfo" => jobinfo(&c),
        "anl-map" => anl_map(&c, arg(1)),
        "refresh" => refresh(&c),
        "groups" => groups(&c),
        "group-fence" => group_fence(&c),
        "tool" => tool(&c),
        "psets" => psets(&c, arg(1), arg(2), arg(3)),
        "scope" => scope(&c),
        "double-init" => double_init(&c),
        "init-cycle" => init_cycle(&c, arg(1)),
        "exit-early" => std::process::exit(3),
        "allgather" => allgather(&c),
        "late-key" => late_key(&c),
        "appinfo" => appinfo(&c, arg(1), arg(2)),
        "exit-rank" => exit_rank(&c, arg(1), arg(2)),
        "abort" => abort(&c, arg(1), arg(2)),
        "hang" => hang(&c),
        "fence-timeout" => fence_timeout(&c),
        "nodeinfo" => nodeinfo(&c),
        "stuck-fence" => stuck_fence(&c, arg(1), arg(2)),
        "recovery" => recovery(&c, arg(1), arg(2), arg(3) == "timed", arg(4)),
        "restart" => restart(&c, arg(1), arg(2), arg(3)),
        other => Err(format!("unknown scenario {other:?}")),
    };
    result?;
    c.finalize().map_err(e("finalize"))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => {
            println!("ok");
            ExitCode::SUCCESS
        }
        Err(msg) => {
            println!("FAILED: {msg}");
            ExitCode::FAILURE
        }
    }
}

/// Blocks this process until it is killed: a rank that waits on the launcher, not on a peer.
fn park_forever() -> ! {
    loop {
        std::thread::park();
    }
}

/// The demo's exchange: everyone puts its rank, fences with data, and reads every rank back;
/// prints one line per rank.
fn allgather(c: &Client) -> Res {
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
fn late_key(c: &Client) -> Res {
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

/// The application context this process belongs to: `appinfo <appnum> <number of apps>`.
fn appinfo(c: &Client, appnum: &str, napps: &str) -> Res {
    let me = c.proc().clone();
    let wild = Proc::new(me.nspace.clone(), Rank::WILDCARD);
    let want_app: u32 = appnum.parse().map_err(e("appnum"))?;
    let want_napps: u32 = napps.parse().map_err(e("napps"))?;
    let u32_of = |p: &Proc, k: &str| -> Result<u32, String> {
        let v = c.get(p, k, &[]).map_err(e(k))?;
        v.as_u32().ok_or_else(|| format!("{k} is {v:?}"))
    };
    let got_app = u32_of(&me, attr::APPNUM)?;
    check!(got_app == want_app, "APPNUM {got_app}, expected {want_app}");
    let got_napps = u32_of(&wild, attr::JOB_NUM_APPS)?;
    check!(
        got_napps == want_napps,
        "JOB_NUM_APPS {got_napps}, expected {want_napps}"
    );
    let app_size = u32_of(&me, attr::APP_SIZE)?;
    let ldr = c.get(&me, attr::APPLDR, &[]).map_err(e("APPLDR"))?;
    let ldr = ldr.as_rank().ok_or_else(|| format!("APPLDR is {ldr:?}"))?;
    let app_rank = c.get(&me, attr::APP_RANK, &[]).map_err(e("APP_RANK"))?;
    check!(
        app_rank.as_rank() == Some(Rank(me.rank.0 - ldr.0)) && me.rank.0 - ldr.0 < app_size,
        "APP_RANK {app_rank:?} with APPLDR {ldr} and APP_SIZE {app_size}"
    );
    let argv = c.get(&me, attr::APP_ARGV, &[]).map_err(e("APP_ARGV"))?;
    check!(
        argv.as_str().is_some_and(|a| a.contains("appinfo")),
        "APP_ARGV {argv:?}"
    );
    println!(
        "rank {} appnum {got_app} of {got_napps} apps, app size {app_size}, leader {ldr}",
        me.rank
    );
    Ok(())
}

/// `exit-rank <rank> <status>`: that rank exits at once without finalize; the others wait to
/// be killed.
fn exit_rank(c: &Client, rank: &str, status: &str) -> Res {
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
fn abort(c: &Client, status: &str, others: &str) -> Res {
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
fn hang(c: &Client) -> Res {
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

/// `fence-timeout` (tests.md C09, simptimeout): rank 0 alone enters a job-wide fence with
/// `TIMEOUT`, which must fail with `ERR_TIMEOUT` and be torn down: a later fence of the whole
/// job completes.
fn fence_timeout(c: &Client) -> Res {
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

/// `nodeinfo`: where this job's ranks run, as this rank reads it, in one line (for runs over
/// several nodes): `nodeinfo rank=R num_nodes=N local_size=L local_peers=A,B`
/// followed by `host.<r>=`, `nodeid.<r>=`, `lrank.<r>=` and `nrank.<r>=` of every rank.
fn nodeinfo(c: &Client) -> Res {
    let me = c.proc().clone();
    let wild = Proc::new(me.nspace.clone(), Rank::WILDCARD);
    let size = job_size(c, &me.nspace)?;
    let text = |p: &Proc, k: &str| -> Result<String, String> {
        let v = c.get(p, k, &[]).map_err(e(&format!("{k} of {p}")))?;
        if let Some(s) = v.as_str() {
            return Ok(s.to_owned());
        }
        v.as_u32()
            .map(|n| n.to_string())
            .ok_or_else(|| format!("{k} of {p} is {v:?}"))
    };
    let mut line = format!(
        "nodeinfo rank={} num_nodes={} local_size={} local_peers={}",
        me.rank,
        text(&wild, attr::NUM_NODES)?,
        text(&wild, attr::LOCAL_SIZE)?,
        text(&wild, attr::LOCAL_PEERS)?,
    );
    for r in 0..size {
        let p = Proc::new(me.nspace.clone(), r);
        for (name, k) in [
            ("host", attr::HOSTNAME),
            ("nodeid", attr::NODEID),
            ("lrank", attr::LOCAL_RANK),
            ("nrank", attr::NODE_RANK),
        ] {
            line.push_str(&format!(" {name}.{r}={}", text(&p, k)?));
        }
    }
    println!("{line}");
    Ok(())
}

/// `stuck-fence <rank> <status|park>`: a job-wide fence that rank `<rank>` (not 0) never joins.
/// The others put and commit `sf.go`, say "ready" and wait in the fence (`TIMEOUT` 60 s) with
/// SIGTERM blocked, so that they can say how it failed before the launcher's SIGKILL:
/// `rank R: fence failed with <status>`. Rank `<rank>` says "ready"; given a status, it waits
/// for every other rank's commit (each is then in the fence or about to be, SIGTERM blocked)
/// and exits with it without finalize; given `park`, it waits to be killed. A failed fence is
/// what the others expect: they finalize and exit 0 after saying so, so that the run's first
/// failure is rank `<rank>`'s alone (exiting 1 too, one on its node could be reported first).
fn stuck_fence(c: &Client, rank: &str, how: &str) -> Res {
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

/// `recovery <rank> <status>`, under `pmixrun --enable-recovery`: once every rank is up (a
/// first fence), rank `<rank>` exits with `<status>` without finalize. Each other rank waits
/// (30 s at most) for `EVENT_PROC_TERMINATED` naming it with that exit code, fences with the
/// other survivors (which completes), then with the whole job and gets a key of the failed
/// rank (both fail: it will never come), and says each outcome in a line
/// `rank R: <what>`; a last fence of the survivors keeps each from finalizing before every
/// other tried (a fence naming a finalized process fails too, with `ERR_NOT_FOUND`). With `<status>` `none`, no rank fails and the whole job's fence
/// completes; with `gone-before-init`, rank `<rank>` is expected never to start (the others'
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
fn recovery(c: &Client, rank: &str, status: &str, timed: bool, event: &str) -> Res {
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

/// `restart <rank> <status> <dir>`, under `pmixrun --max-restarts 1`: in its first life rank
/// `<rank>` leaves `<dir>/rank-<rank>` behind and, once every rank is up (a first fence),
/// exits with `<status>` without finalize. The others, registered for `EVENT_PROC_TERMINATED`
/// before that fence, wait (30 s at most) for it to name the rank; then every rank, the
/// restarted one too, puts its life (1, or 2 for the restarted rank), fences with the whole
/// job collecting data, and says `rank R: rank <rank> is in life L`. A fence that fails with
/// `ERR_PROC_TERM_WO_SYNC` is entered again (for 30 s at most): it may come before the
/// launcher registered the rank again.
fn restart(c: &Client, rank: &str, status: &str, dir: &str) -> Res {
    let me = c.proc().clone();
    let failing: u32 = rank.parse().map_err(e("rank"))?;
    let status: i32 = status.parse().map_err(e("status"))?;
    let marker = std::path::Path::new(dir).join(format!("rank-{failing}"));
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let mut life = 1u32;
    if me.rank.0 == failing {
        if !marker.exists() {
            std::fs::write(&marker, "1").map_err(e("writing the marker"))?;
            c.fence(&[], &[]).map_err(e("first fence"))?;
            std::process::exit(status);
        }
        life = 2;
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
        while !heard(&wait()?) {}
    }
    c.put(Scope::GLOBAL, "rs.life", life).map_err(e("put"))?;
    c.commit().map_err(e("commit"))?;
    let collect = [Info::attr(attr::COLLECT_DATA, true)];
    loop {
        match c.fence(&[], &collect) {
            Ok(()) => break,
            Err(err)
                if err.status() == Status::ERR_PROC_TERM_WO_SYNC
                    && std::time::Instant::now() < deadline => {}
            Err(err) => return Err(format!("fence: {err}")),
        }
    }
    let v = c
        .get(&Proc::new(me.nspace.clone(), failing), "rs.life", &[])
        .map_err(e("get of the restarted rank's life"))?;
    let v = v.as_u32().ok_or_else(|| format!("its life is {v:?}"))?;
    println!("rank {}: rank {failing} is in life {v}", me.rank);
    Ok(())
}
