//! Job-level data as a process reads it: sizes, ranks, peers, the ANL map, its application
//! and where its job's ranks run.

use pmix_client::{Client, Nspace, Proc, Rank, Status, attr};
use pmix_tests::check;
use pmix_tests::scenario::{Res, e};

pub(crate) fn job_size(c: &Client, ns: &Nspace) -> Result<u32, String> {
    let v = c
        .get(&Proc::new(ns.clone(), Rank::WILDCARD), attr::JOB_SIZE, &[])
        .map_err(e("get JOB_SIZE"))?;
    v.as_u32().ok_or_else(|| format!("JOB_SIZE is {v:?}"))
}

pub(crate) fn jobinfo(c: &Client) -> Res {
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

/// Job-level data arrives at init and is derived where the host left it out.
/// `anl-map [MAP]`: `PMIX_ANL_MAP` is `MAP`, by default that of a job on one node (all of
/// its ranks on node 0).
pub(crate) fn anl_map(c: &Client, expected: &str) -> Res {
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

/// The application context this process belongs to: `appinfo <appnum> <number of apps>`.
pub(crate) fn appinfo(c: &Client, appnum: &str, napps: &str) -> Res {
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

/// `oversubscribed`: prints `rank R oversubscribed=B`, whether the job data of this node says
/// it is oversubscribed (`PMIX_NODE_OVERSUBSCRIBED` of the namespace, absent: false).
pub(crate) fn oversubscribed(c: &Client) -> Res {
    let me = c.proc().clone();
    let wild = Proc::new(me.nspace.clone(), Rank::WILDCARD);
    let said = match c.get(&wild, attr::NODE_OVERSUBSCRIBED, &[]) {
        Ok(v) => v
            .as_bool()
            .ok_or_else(|| format!("NODE_OVERSUBSCRIBED is {v:?}"))?,
        Err(err) if err.status() == Status::ERR_NOT_FOUND => false,
        Err(err) => return Err(format!("get of NODE_OVERSUBSCRIBED: {err}")),
    };
    println!("rank {} oversubscribed={said}", me.rank);
    Ok(())
}

/// `nodeinfo`: where this job's ranks run, as this rank reads it, in one line (for runs over
/// several nodes): `nodeinfo rank=R num_nodes=N local_size=L local_peers=A,B`
/// followed by `host.<r>=`, `nodeid.<r>=`, `lrank.<r>=` and `nrank.<r>=` of every rank.
pub(crate) fn nodeinfo(c: &Client) -> Res {
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
