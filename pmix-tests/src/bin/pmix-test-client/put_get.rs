//! Data the processes put and get: replaced keys, internal keys, get directives (`IMMEDIATE`,
//! `TIMEOUT`, `OPTIONAL`), the cache and its refresh, and the scopes.

use pmix_client::{Client, Info, Proc, Scope, Status, Value, attr};
use pmix_tests::check;
use pmix_tests::scenario::{Res, e};

use crate::job_data::job_size;

/// make-check 12: put N keys, fence, replace some, fence, everyone sees the new values.
pub(crate) fn replace(c: &Client, n: u32, replaced: &str) -> Res {
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
pub(crate) fn internal(c: &Client, n: u32) -> Res {
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
pub(crate) fn get_semantics(c: &Client) -> Res {
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

/// Every rank puts `rf` = `old<rank>`, reads its right neighbour's (cached from then on),
/// puts `new<rank>`: a plain get still reads the cached old value, one with
/// `GET_REFRESH_CACHE` the new one, which is cached from then on.
pub(crate) fn refresh(c: &Client) -> Res {
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

/// LOCAL / REMOTE / GLOBAL on one node: REMOTE data is invisible to node peers.
pub(crate) fn scope(c: &Client) -> Res {
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
