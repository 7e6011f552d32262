//! The demo job the README runs under the launcher (`pmixrun -n 4 .../examples/demo`).
//!
//! Every rank puts two values derived from its rank, commits, joins a collecting fence, then
//! reads every other rank's values back and checks them. It prints one line and exits 0 when
//! everything checks out, 1 on a mismatch, 2 when the PMIx calls themselves fail.

use std::process::ExitCode;

use pmix_client::{Client, Info, Proc, Rank, Scope, Value, attr};

/// The number rank `r` puts: distinct per rank and not just the rank itself, so that a value
/// read from the wrong rank is caught.
fn number_of(r: u32) -> u64 {
    u64::from(r) * 1_000_003 + 17
}

fn name_of(r: u32) -> String {
    format!("rank {r} says hello")
}

fn run() -> Result<Result<String, String>, pmix_client::Error> {
    let client = Client::init()?;
    let me = client.proc().clone();
    let job = Proc::new(me.nspace.clone(), Rank::WILDCARD);
    let size = client.get(&job, attr::JOB_SIZE, &[])?;
    let Some(size) = size.as_u32() else {
        return Ok(Err(format!("{} is not a number: {size:?}", attr::JOB_SIZE)));
    };
    let r = me.rank.0;

    client.put(Scope::GLOBAL, &format!("demo.rank.{r}"), number_of(r))?;
    client.put(Scope::GLOBAL, &format!("demo.name.{r}"), name_of(r))?;
    client.commit()?;
    client.fence(&[], &[Info::attr(attr::COLLECT_DATA, true)])?;

    let mut checked = 0;
    for peer in (0..size).filter(|&p| p != r) {
        let p = Proc::new(me.nspace.clone(), peer);
        let number = client.get(&p, &format!("demo.rank.{peer}"), &[])?;
        if number != Value::Uint64(number_of(peer)) {
            return Ok(Err(format!(
                "rank {r}: demo.rank.{peer} is {number:?}, expected {}",
                number_of(peer)
            )));
        }
        let name = client.get(&p, &format!("demo.name.{peer}"), &[])?;
        if name.as_str() != Some(name_of(peer).as_str()) {
            return Ok(Err(format!(
                "rank {r}: demo.name.{peer} is {name:?}, expected {:?}",
                name_of(peer)
            )));
        }
        checked += 1;
    }
    client.finalize()?;
    Ok(Ok(format!("rank {r} of {size}: checked {checked} peers")))
}

fn main() -> ExitCode {
    match run() {
        Ok(Ok(line)) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Ok(Err(mismatch)) => {
            println!("{mismatch}");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("demo: {e} ({:?})", e.status());
            ExitCode::from(2)
        }
    }
}
