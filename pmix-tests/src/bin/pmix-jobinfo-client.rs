//! `openpmix/pmix_jobinfo.c` on pmix-rs's client (`tests/bigjob.rs`): the same gets, the same
//! lines, so the test can hold the two against each other. See the C program's header.

use std::process::ExitCode;

use pmix_client::{Client, Info, Proc, Rank, Value, attr};

fn show(what: &str, name: &str, v: &Value) -> String {
    let (ty, text) = match v {
        Value::String(s) => ("str", s.clone()),
        Value::Uint16(n) => ("u16", n.to_string()),
        Value::Uint32(n) => ("u32", n.to_string()),
        Value::Rank(r) => ("rank", r.0.to_string()),
        Value::Bool(b) => ("bool", b.to_string()),
        other => ("other", format!("{:?}", other.data_type())),
    };
    format!("{what} {name} {ty} {text}")
}

fn run(c: &Client, ranks: &[String]) -> Result<Vec<String>, String> {
    let me = c.proc().clone();
    let get = |p: &Proc, k: &str, info: &[Info]| {
        c.get(p, k, info)
            .map_err(|e| format!("get {k} of {p}: {e}"))
    };
    let wild = Proc::new(me.nspace.clone(), Rank::WILDCARD);
    let mut out = Vec::new();
    for (name, key) in [
        ("size", attr::JOB_SIZE),
        ("local_size", attr::LOCAL_SIZE),
        ("local_peers", attr::LOCAL_PEERS),
    ] {
        out.push(show("job", name, &get(&wild, key, &[])?));
    }
    let mut first_host = None;
    for r in ranks {
        let rank: u32 = r.parse().map_err(|_| format!("{r:?} is not a rank"))?;
        let p = Proc::new(me.nspace.clone(), rank);
        for (name, key) in [
            ("hostname", attr::HOSTNAME),
            ("nodeid", attr::NODEID),
            ("local_rank", attr::LOCAL_RANK),
            ("node_rank", attr::NODE_RANK),
            ("global_rank", attr::GLOBAL_RANK),
            ("appnum", attr::APPNUM),
            ("app_rank", attr::APP_RANK),
        ] {
            let v = get(&p, key, &[])?;
            if first_host.is_none() && key == attr::HOSTNAME {
                first_host = v.as_str().map(str::to_owned);
            }
            out.push(show(r, name, &v));
        }
    }
    if let Some(host) = first_host {
        let info = [
            Info::attr(attr::NODE_INFO, true),
            Info::attr(attr::HOSTNAME, host),
        ];
        out.push(show(
            "node",
            "local_size",
            &get(&wild, attr::LOCAL_SIZE, &info)?,
        ));
        out.push(show(
            "node",
            "local_peers",
            &get(&wild, attr::LOCAL_PEERS, &info)?,
        ));
    }
    out.push(format!("OK rank={}", me.rank));
    Ok(out)
}

fn main() -> ExitCode {
    let ranks: Vec<String> = std::env::args().skip(1).collect();
    let c = match Client::init() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("FAIL rank=-1: init: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&c, &ranks) {
        Ok(lines) => {
            for l in lines {
                println!("{l}");
            }
            let _ = c.finalize();
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("FAIL rank={}: {e}", c.proc().rank);
            ExitCode::from(2)
        }
    }
}
