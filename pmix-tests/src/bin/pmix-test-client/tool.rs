//! A tool attached from inside a job's process to its own server.

use pmix_client::{Client, Info, Proc, Rank, Value, attr};
use pmix_tests::check;
use pmix_tests::scenario::{Res, e};

use crate::job_data::job_size;

/// Each rank attaches a Rust `Tool` to its own server (found by the server's namespace, from
/// the job data, through the server's rendezvous file), finds itself with its own pid in its
/// job's process table, and finalizes the tool; the job then fences: the tools changed
/// nothing for it.
pub(crate) fn tool(c: &Client) -> Res {
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
