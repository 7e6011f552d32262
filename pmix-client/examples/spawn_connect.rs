//! A job starts another and the two talk, the way MPI's `MPI_Comm_spawn` does it on top of
//! a process manager (MPICH's flow: the parent opens a port, spawns the children with the
//! port name preloaded in their key-value space, and the children connect back to it).
//!
//! The parent (run with no argument) opens a port, a loopback TCP listener whose "port name"
//! is the address it really listens on (`tcp://127.0.0.1:PORT`), commits a value, and spawns
//! two processes of this same program in the `child` role with the port name in the job
//! information of the spawn: the launcher hands every entry whose key does not begin with
//! `pmix` to the children as job-level data. Each child reads the port name from its job
//! data, connects to it, greets the parent and checks the answer. Then parent and children
//! connect through PMIx (`PMIx_Connect` over the parent and the children's whole namespace),
//! read the values the other side committed, and disconnect. Everybody prints one line and
//! exits 0 when all went well, 1 when the other side said something unexpected, 2 when a
//! call or the connection failed.
//!
//! ```text
//! cargo build -p pmixrun -p pmix-client --example spawn_connect
//! target/debug/pmixrun -n 1 ./target/debug/examples/spawn_connect
//! ```
//!
//! prints, in some order:
//!
//! ```text
//! child rs-pmixrun-<pid>.1:0: rs-pmixrun-<pid>:0 answered at tcp://127.0.0.1:<port>; its data: parent rs-pmixrun-<pid>:0 was here
//! child rs-pmixrun-<pid>.1:1: rs-pmixrun-<pid>:0 answered at tcp://127.0.0.1:<port>; its data: parent rs-pmixrun-<pid>:0 was here
//! parent rs-pmixrun-<pid>:0: rs-pmixrun-<pid>.1:0 and rs-pmixrun-<pid>.1:1 connected back to tcp://127.0.0.1:<port>; their data: child rs-pmixrun-<pid>.1:0 was here, child rs-pmixrun-<pid>.1:1 was here
//! ```
//!
//! The run ends when the parent and both children have.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::ExitCode;

use pmix_client::{AppExt, Client, Info, Key, Nspace, Proc, Rank, Scope, Value, app, attr};

/// The job-level key the parent preloads the port name under.
const PORT_KEY: &str = "example.port";
/// What the parent commits for the children to read after the connect.
const PARENT_KEY: &str = "example.parent";
/// What each child commits for the parent.
const CHILD_KEY: &str = "example.child";
/// How many children the parent spawns.
const CHILDREN: u32 = 2;

/// Why the example failed: the other side broke the protocol (exit 1), or a call failed
/// (exit 2).
enum Failure {
    Mismatch(String),
    Call(String),
}

fn call<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> Failure {
    move |e| Failure::Call(format!("{what}: {e}"))
}

fn greeting(child: &Proc) -> String {
    format!("hello from {child}")
}

fn answer(child: &str, parent: &Proc) -> String {
    format!("welcome {child}, this is {parent}")
}

/// Reads one line, without its newline.
fn read_line(stream: &TcpStream) -> Result<String, Failure> {
    let mut line = String::new();
    BufReader::new(stream)
        .read_line(&mut line)
        .map_err(call("reading from the connection"))?;
    Ok(line.trim_end_matches('\n').to_owned())
}

fn string(v: Value, what: &str) -> Result<String, Failure> {
    v.as_str()
        .map(str::to_owned)
        .ok_or_else(|| Failure::Mismatch(format!("{what} is {v:?}, not a string")))
}

/// The participants of the connect: the parent and every child.
fn participants(parent: &Proc, children: &Nspace) -> [Proc; 2] {
    [parent.clone(), Proc::new(children.clone(), Rank::WILDCARD)]
}

fn parent(c: &Client) -> Result<String, Failure> {
    let me = c.proc().clone();
    // MPI_Open_port.
    let listener = TcpListener::bind("127.0.0.1:0").map_err(call("opening the port"))?;
    let addr = listener.local_addr().map_err(call("the port's address"))?;
    let port = format!("tcp://{addr}");
    c.put(Scope::GLOBAL, PARENT_KEY, format!("parent {me} was here"))
        .map_err(call("put"))?;
    c.commit().map_err(call("commit"))?;
    // PMI_Spawn_multiple with the port name preloaded in the children's key-value space.
    let exe = std::env::current_exe().map_err(call("finding this program"))?;
    let children = app(exe.to_string_lossy(), CHILDREN).with_arg("child");
    let key = Key::new(PORT_KEY).map_err(call("port key"))?;
    let ns = c
        .spawn(&[Info::new(key, port.clone())], &[children])
        .map_err(call("spawn"))?;
    // MPI_Comm_accept, once per child.
    let mut met = Vec::new();
    for _ in 0..CHILDREN {
        let (mut stream, _) = listener.accept().map_err(call("accepting"))?;
        let hello = read_line(&stream)?;
        let Some(who) = hello.strip_prefix("hello from ") else {
            return Err(Failure::Mismatch(format!(
                "parent: unexpected greeting {hello:?}"
            )));
        };
        writeln!(stream, "{}", answer(who, &me)).map_err(call("answering"))?;
        met.push(who.to_owned());
    }
    met.sort();
    let want: Vec<String> = (0..CHILDREN)
        .map(|r| Proc::new(ns.clone(), r).to_string())
        .collect();
    if met != want {
        return Err(Failure::Mismatch(format!(
            "parent: met {met:?}, expected the children {want:?}"
        )));
    }
    // The port has served its purpose (MPI_Close_port).
    drop(listener);
    let all = participants(&me, &ns);
    c.connect(&all, &[]).map_err(call("connect"))?;
    let mut data = Vec::new();
    for r in 0..CHILDREN {
        let child = Proc::new(ns.clone(), r);
        let v = c.get(&child, CHILD_KEY, &[]).map_err(call("get"))?;
        data.push(string(v, CHILD_KEY)?);
    }
    c.disconnect(&all, &[]).map_err(call("disconnect"))?;
    Ok(format!(
        "parent {me}: {} connected back to {port}; their data: {}",
        met.join(" and "),
        data.join(", ")
    ))
}

fn child(c: &Client) -> Result<String, Failure> {
    let me = c.proc().clone();
    let own = Proc::new(me.nspace.clone(), Rank::WILDCARD);
    // A per-process attribute: asked of this process's own name.
    let parent = c
        .get(&me, attr::PARENT_ID, &[])
        .map_err(call("PARENT_ID"))?;
    let Some(parent) = parent.as_proc().cloned() else {
        return Err(Failure::Mismatch(format!("PARENT_ID is {parent:?}")));
    };
    // MPIDI_CH3_GetParentPort: the port name the parent preloaded.
    let port = string(
        c.get(&own, PORT_KEY, &[]).map_err(call("the port name"))?,
        PORT_KEY,
    )?;
    let Some(addr) = port.strip_prefix("tcp://") else {
        return Err(Failure::Mismatch(format!(
            "{port:?} is not a tcp:// port name"
        )));
    };
    // MPI_Comm_connect.
    let mut stream = TcpStream::connect(addr).map_err(call("connecting to the port"))?;
    writeln!(stream, "{}", greeting(&me)).map_err(call("greeting"))?;
    let reply = read_line(&stream)?;
    let want = answer(&me.to_string(), &parent);
    if reply != want {
        return Err(Failure::Mismatch(format!(
            "child: the parent answered {reply:?}, expected {want:?}"
        )));
    }
    drop(stream);
    c.put(Scope::GLOBAL, CHILD_KEY, format!("child {me} was here"))
        .map_err(call("put"))?;
    c.commit().map_err(call("commit"))?;
    let all = participants(&parent, &me.nspace);
    c.connect(&all, &[]).map_err(call("connect"))?;
    let data = string(
        c.get(&parent, PARENT_KEY, &[]).map_err(call("get"))?,
        PARENT_KEY,
    )?;
    c.disconnect(&all, &[]).map_err(call("disconnect"))?;
    Ok(format!(
        "child {me}: {parent} answered at {port}; its data: {data}"
    ))
}

fn run(role: &str) -> Result<String, Failure> {
    let c = Client::init().map_err(call("init"))?;
    let line = match role {
        "" => parent(&c)?,
        "child" => child(&c)?,
        _ => {
            return Err(Failure::Call(format!(
                "usage: spawn_connect [child] (not {role:?})"
            )));
        }
    };
    c.finalize().map_err(call("finalize"))?;
    Ok(line)
}

fn main() -> ExitCode {
    let role = std::env::args().nth(1).unwrap_or_default();
    match run(&role) {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(Failure::Mismatch(m)) => {
            println!("{m}");
            ExitCode::from(1)
        }
        Err(Failure::Call(m)) => {
            eprintln!("spawn_connect {role}: {m}");
            ExitCode::from(2)
        }
    }
}
