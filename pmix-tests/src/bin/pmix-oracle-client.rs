//! The Rust twin of `pmix-tests/openpmix/pmix_client.c`'s `job` and `modex` scenarios, on
//! `pmix-client`: the same keys, scopes and values (each a function of the rank), the same
//! checks, the same output lines. Run in one job with libpmix processes, it shows that the two
//! kinds of client fence together and read each other's data; run under a real OpenPMIx server
//! it shows that our client speaks that server's protocol.
//!
//! `pmix-oracle-client [job|modex|modex-direct ...]` (default: `job modex`); prints
//! `modex rank=R collect=C peers=P` per modex scenario and `OK rank=R size=N` at the end, or
//! `FAIL rank=R: <what>` on stderr and exits 2.

use std::process::ExitCode;

use pmix_client::{Client, Info, Proc, Rank, Scope, Value, attr};

const K_LOCAL_STR: &str = "oracle.local.str";
const K_REMOTE_U32: &str = "oracle.remote.u32";
const K_GLOBAL_I64: &str = "oracle.global.i64";
const K_GLOBAL_BOOL: &str = "oracle.global.bool";
const K_GLOBAL_BYTES: &str = "oracle.global.bytes";
const K_GLOBAL_DOUBLE: &str = "oracle.global.double";
const K_GLOBAL_STR: &str = "oracle.global.str";

fn local_str(r: u32) -> String {
    format!("local-value-of-rank-{r}")
}

fn global_str(r: u32) -> String {
    format!(
        "global value of rank {r}: the quick brown fox jumps over the lazy dog, \
         0123456789 abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ !#$%&()*+-./:;<=>?@"
    )
}

fn remote_u32(r: u32) -> u32 {
    4_000_000_000 - r
}

fn global_i64(r: u32) -> i64 {
    -(1i64 << 40) - i64::from(r)
}

fn global_bool(r: u32) -> bool {
    r % 2 == 0
}

fn global_double(r: u32) -> f64 {
    1000.5 + 0.125 * f64::from(r)
}

fn bytes_of(r: u32) -> Vec<u8> {
    (0..200 + r as usize)
        .map(|i| (i as u32).wrapping_mul(7).wrapping_add(r.wrapping_mul(13)) as u8)
        .collect()
}

type Res<T> = Result<T, String>;

fn get(c: &Client, p: &Proc, key: &str) -> Res<Value> {
    c.get(p, key, &[])
        .map_err(|e| format!("get {key} of {p}: {e}"))
}

fn get_u32(c: &Client, p: &Proc, key: &str) -> Res<u32> {
    let v = get(c, p, key)?;
    v.as_u32()
        .ok_or_else(|| format!("{key} of {p} is {v:?}, not a number"))
}

fn expect(what: &str, got: Value, want: Value) -> Res<()> {
    if got == want {
        Ok(())
    } else {
        Err(format!("{what} is {got:?}, expected {want:?}"))
    }
}

fn job(c: &Client, size: u32) -> Res<()> {
    let me = c.proc().clone();
    let wild = Proc::new(me.nspace.clone(), Rank::WILDCARD);
    let local_size = get_u32(c, &wild, attr::LOCAL_SIZE)?;
    let univ = get_u32(c, &wild, attr::UNIV_SIZE)?;
    let nodeid = get_u32(c, &me, attr::NODEID)?;
    let lrank = get_u32(c, &me, attr::LOCAL_RANK)?;
    let appnum = get_u32(c, &me, attr::APPNUM)?;
    for r in 0..size {
        let p = Proc::new(me.nspace.clone(), r);
        get_u32(c, &p, attr::NODEID)?;
        get_u32(c, &p, attr::LOCAL_RANK)?;
    }
    println!(
        "job rank={} size={size} local_size={local_size} univ_size={univ} nodeid={nodeid} \
         local_rank={lrank} appnum={appnum} nspace={}",
        me.rank.0, me.nspace
    );
    Ok(())
}

fn modex(c: &Client, size: u32, collect: bool) -> Res<()> {
    let me = c.proc().clone();
    let r = me.rank.0;
    let put =
        |scope, key: &str, v: Value| c.put(scope, key, v).map_err(|e| format!("put {key}: {e}"));
    put(Scope::LOCAL, K_LOCAL_STR, Value::String(local_str(r)))?;
    put(Scope::REMOTE, K_REMOTE_U32, Value::Uint32(remote_u32(r)))?;
    put(Scope::GLOBAL, K_GLOBAL_I64, Value::Int64(global_i64(r)))?;
    put(Scope::GLOBAL, K_GLOBAL_BOOL, Value::Bool(global_bool(r)))?;
    put(
        Scope::GLOBAL,
        K_GLOBAL_DOUBLE,
        Value::Double(global_double(r)),
    )?;
    put(Scope::GLOBAL, K_GLOBAL_STR, Value::String(global_str(r)))?;
    put(
        Scope::GLOBAL,
        K_GLOBAL_BYTES,
        Value::ByteObject(bytes_of(r)),
    )?;
    c.commit().map_err(|e| format!("commit: {e}"))?;

    let wild = Proc::new(me.nspace.clone(), Rank::WILDCARD);
    let info = if collect {
        vec![Info::attr(attr::COLLECT_DATA, true)]
    } else {
        Vec::new()
    };
    c.fence(std::slice::from_ref(&wild), &info)
        .map_err(|e| format!("fence: {e}"))?;

    let my_node = get_u32(c, &me, attr::NODEID)?;
    for peer in 0..size {
        let p = Proc::new(me.nspace.clone(), peer);
        let same_node = get_u32(c, &p, attr::NODEID)? == my_node;
        let this = peer == r;
        let what = |k: &str| format!("{k} of rank {peer}");
        if this || same_node {
            expect(
                &what(K_LOCAL_STR),
                get(c, &p, K_LOCAL_STR)?,
                Value::String(local_str(peer)),
            )?;
        }
        if this || !same_node {
            expect(
                &what(K_REMOTE_U32),
                get(c, &p, K_REMOTE_U32)?,
                Value::Uint32(remote_u32(peer)),
            )?;
        } else if c.get(&p, K_REMOTE_U32, &[]).is_ok() {
            return Err(format!(
                "got {K_REMOTE_U32}, put with REMOTE, of rank {peer} on this node"
            ));
        }
        expect(
            &what(K_GLOBAL_I64),
            get(c, &p, K_GLOBAL_I64)?,
            Value::Int64(global_i64(peer)),
        )?;
        expect(
            &what(K_GLOBAL_BOOL),
            get(c, &p, K_GLOBAL_BOOL)?,
            Value::Bool(global_bool(peer)),
        )?;
        expect(
            &what(K_GLOBAL_DOUBLE),
            get(c, &p, K_GLOBAL_DOUBLE)?,
            Value::Double(global_double(peer)),
        )?;
        expect(
            &what(K_GLOBAL_STR),
            get(c, &p, K_GLOBAL_STR)?,
            Value::String(global_str(peer)),
        )?;
        expect(
            &what(K_GLOBAL_BYTES),
            get(c, &p, K_GLOBAL_BYTES)?,
            Value::ByteObject(bytes_of(peer)),
        )?;
    }
    let immediate = [Info::attr(attr::IMMEDIATE, true)];
    let next = Proc::new(me.nspace.clone(), (r + 1) % size);
    if c.get(&next, "oracle.never.put", &immediate).is_ok() {
        return Err(format!(
            "get of a key rank {} never put succeeded",
            next.rank
        ));
    }
    println!(
        "modex rank={r} collect={} peers={size}",
        if collect { 1 } else { 0 }
    );
    Ok(())
}

fn run(c: &Client, scenarios: &[String]) -> Res<u32> {
    let me = c.proc().clone();
    let size = get_u32(
        c,
        &Proc::new(me.nspace.clone(), Rank::WILDCARD),
        attr::JOB_SIZE,
    )?;
    for s in scenarios {
        match s.as_str() {
            "job" => job(c, size)?,
            "modex" => modex(c, size, true)?,
            "modex-direct" => modex(c, size, false)?,
            other => {
                return Err(format!(
                    "unknown scenario {other} (job, modex, modex-direct)"
                ));
            }
        }
    }
    Ok(size)
}

fn main() -> ExitCode {
    let mut scenarios: Vec<String> = std::env::args().skip(1).collect();
    if scenarios.is_empty() {
        scenarios = vec!["job".into(), "modex".into()];
    }
    let c = match Client::init() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("FAIL rank=-1: init: {e}");
            return ExitCode::from(2);
        }
    };
    let rank = c.proc().rank.0;
    match run(&c, &scenarios) {
        Ok(size) => {
            if let Err(e) = c.finalize() {
                eprintln!("FAIL rank={rank}: finalize: {e}");
                return ExitCode::from(2);
            }
            println!("OK rank={rank} size={size}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("FAIL rank={rank}: {e}");
            ExitCode::from(2)
        }
    }
}
