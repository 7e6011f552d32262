//! Process groups (construct, destruct, context ids, a fence over a group's id) and the
//! process sets the host defined.

use pmix_client::{Client, Info, Nspace, Proc, Rank, Scope, Status, Value, attr};
use pmix_tests::check;
use pmix_tests::scenario::{Res, e};

use crate::fences::{fence_key, fence_value};
use crate::job_data::job_size;

/// Groups: every rank constructs the group of all ranks, then its pair's group (ranks 2k and
/// 2k+1), each with a context id; the members come back sorted, every member of a group got
/// the same id and no two groups got the same one (checked through each rank's put of its
/// ids); then the groups are destructed, and a destructed group is not found.
pub(crate) fn groups(c: &Client) -> Res {
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
pub(crate) fn group_fence(c: &Client) -> Res {
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
pub(crate) fn psets(c: &Client, n: &str, names: &str, members: &str) -> Res {
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
