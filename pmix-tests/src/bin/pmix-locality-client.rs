//! `openpmix/pmix_locality.c` on pmix-rs's client (`tests/placement.rs`): reads its own
//! `PMIX_CPUSET`, `PMIX_LOCALITY_STRING` and `PMIX_PACKAGE_RANK` and the next rank's locality
//! string, compares the two with `Client::relative_locality`, and prints
//! `loc rank=R allowed=A cpuset=C locality=L pkgrank=K peer=Q peerloc=M rel=0xX`
//! (A: its `Cpus_allowed_list`), then `OK rank=R size=N`. A failure prints
//! `FAIL rank=R: <what>` on stderr and exits 2.

use std::process::ExitCode;

use pmix_client::{Client, Proc, Rank, Value, attr};

fn run(c: &Client) -> Result<String, String> {
    let me = c.proc().clone();
    let get = |p: &Proc, k: &str| c.get(p, k, &[]).map_err(|e| format!("get {k} of {p}: {e}"));
    let string = |p: &Proc, k: &str| -> Result<String, String> {
        match get(p, k)? {
            Value::String(s) => Ok(s),
            v => Err(format!("{k} of {p} is not a string: {v:?}")),
        }
    };
    let wild = Proc::new(me.nspace.clone(), Rank::WILDCARD);
    let size = get(&wild, attr::JOB_SIZE)?
        .as_u32()
        .ok_or("JOB_SIZE is not a number")?;
    let cpuset = string(&me, attr::CPUSET)?;
    let locality = string(&me, attr::LOCALITY_STRING)?;
    let pkgrank = match get(&me, attr::PACKAGE_RANK)? {
        Value::Uint16(n) => n,
        v => return Err(format!("PACKAGE_RANK is not a uint16: {v:?}")),
    };
    let peer = Proc::new(me.nspace.clone(), (me.rank.0 + 1) % size);
    let peerloc = string(&peer, attr::LOCALITY_STRING)?;
    let rel = c
        .relative_locality(&locality, &peerloc)
        .map_err(|e| format!("relative_locality: {e}"))?;
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| e.to_string())?;
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(str::trim)
        .ok_or("no Cpus_allowed_list")?;
    Ok(format!(
        "loc rank={} allowed={allowed} cpuset={cpuset} locality={locality} pkgrank={pkgrank} \
         peer={} peerloc={peerloc} rel=0x{:x}\nOK rank={} size={size}",
        me.rank.0, peer.rank.0, rel.0, me.rank.0
    ))
}

fn main() -> ExitCode {
    let c = match Client::init() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("FAIL rank=-1: init: {e}");
            return ExitCode::from(2);
        }
    };
    let rank = c.proc().rank.0;
    match run(&c).and_then(|out| c.finalize().map(|()| out).map_err(|e| e.to_string())) {
        Ok(out) => {
            println!("{out}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("FAIL rank={rank}: {e}");
            ExitCode::from(2)
        }
    }
}
