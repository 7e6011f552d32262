//! Two separately launched jobs meet by a well-known service name, the way MPI programs do
//! with `MPI_Open_port`, `MPI_Publish_name`, `MPI_Lookup_name` and `MPI_Comm_accept` /
//! `MPI_Comm_connect`, here on PMIx publish and lookup.
//!
//! `rendezvous server` opens a port (a loopback TCP listener; its "port name" is the address
//! it really listens on, `tcp://127.0.0.1:PORT`), publishes it under the service name
//! [`SERVICE`] with `GLOBAL` range, accepts one connection, answers its greeting, and
//! unpublishes the name. `rendezvous client` looks the service name up (waiting up to
//! 30 seconds for it to be published), connects to the port, greets the server and checks the
//! answer names both the client and the process that published the name. Each prints one
//! line and exits 0 when all went well, 1 when the other side said something unexpected, 2
//! when a PMIx call or the connection failed.
//!
//! Separate `pmixrun` runs share `GLOBAL` names through a name server:
//!
//! ```text
//! cargo build -p pmixrun -p pmix-client --example rendezvous
//! target/debug/pmixrun --nameserver --report-uri /tmp/ns.uri &
//! # once /tmp/ns.uri exists (the name server writes it when it listens):
//! target/debug/pmixrun --nameserver-uri file:/tmp/ns.uri target/debug/examples/rendezvous server &
//! target/debug/pmixrun --nameserver-uri file:/tmp/ns.uri target/debug/examples/rendezvous client
//! kill %1   # stops the name server
//! ```
//!
//! Both sides name `GLOBAL`: the publish so that other runs may see the name, the lookup
//! so that it searches them (its default range is the caller's own run).
//!
//! `--nameserver-uri` also takes the URI itself (`unix:/path`, which the name server prints),
//! and `PMIXRS_NAMESERVER` stands for the option. Either run may start first: the client's
//! lookup waits for the publication. Without a name server each run has names of its own and
//! the client's lookup times out.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::process::ExitCode;

use pmix_client::{Client, DataRange, Info, Key, Proc, attr};

/// The well-known service name the server publishes its port under.
const SERVICE: &str = "pmix-rs.example.rendezvous";

/// How long the client waits for the service to be published, in seconds.
const LOOKUP_TIMEOUT: i32 = 30;

/// Why the example failed: the other side broke the protocol (exit 1), or a call failed
/// (exit 2).
enum Failure {
    Mismatch(String),
    Call(String),
}

fn call<E: std::fmt::Display>(what: &'static str) -> impl FnOnce(E) -> Failure {
    move |e| Failure::Call(format!("{what}: {e}"))
}

fn greeting(client: &Proc) -> String {
    format!("hello from {client}")
}

fn answer(client: &str, server: &Proc) -> String {
    format!("welcome {client}, this is {server}")
}

/// Reads one line, without its newline.
fn read_line(stream: &TcpStream) -> Result<String, Failure> {
    let mut line = String::new();
    BufReader::new(stream)
        .read_line(&mut line)
        .map_err(call("reading from the connection"))?;
    Ok(line.trim_end_matches('\n').to_owned())
}

fn server(c: &Client) -> Result<String, Failure> {
    let me = c.proc().clone();
    // MPI_Open_port: a port name that any process of the machine can connect to.
    let listener = TcpListener::bind("127.0.0.1:0").map_err(call("opening the port"))?;
    let addr = listener.local_addr().map_err(call("the port's address"))?;
    let port = format!("tcp://{addr}");
    // MPI_Publish_name, visible to other jobs: GLOBAL range.
    let key = Key::new(SERVICE).map_err(call("service name"))?;
    c.publish(
        &[Info::new(key, port.clone())],
        &[Info::attr(attr::RANGE, DataRange::GLOBAL)],
    )
    .map_err(call("publishing the service name"))?;
    // MPI_Comm_accept.
    let (mut stream, _) = listener.accept().map_err(call("accepting"))?;
    let hello = read_line(&stream)?;
    let Some(who) = hello.strip_prefix("hello from ") else {
        return Err(Failure::Mismatch(format!(
            "server: unexpected greeting {hello:?}"
        )));
    };
    writeln!(stream, "{}", answer(who, &me)).map_err(call("answering"))?;
    // MPI_Unpublish_name before closing the port.
    c.unpublish(&[SERVICE], &[Info::attr(attr::RANGE, DataRange::GLOBAL)])
        .map_err(call("unpublishing the service name"))?;
    Ok(format!("server {me}: {who} connected to {port}"))
}

fn client(c: &Client) -> Result<String, Failure> {
    let me = c.proc().clone();
    // MPI_Lookup_name, waiting for the server to publish.
    let found = c
        .lookup(
            &[SERVICE],
            &[
                Info::attr(attr::RANGE, DataRange::GLOBAL),
                Info::attr(attr::WAIT, true),
                Info::attr(attr::TIMEOUT, LOOKUP_TIMEOUT),
            ],
        )
        .map_err(call("looking up the service name"))?;
    let Some(entry) = found.first() else {
        return Err(Failure::Mismatch("lookup gave no entry".into()));
    };
    let Some(server) = entry.proc.as_ref() else {
        return Err(Failure::Mismatch(format!("{SERVICE} not found: {found:?}")));
    };
    let Some(port) = entry.value.as_str() else {
        return Err(Failure::Mismatch(format!(
            "{SERVICE} is {:?}, not a port name",
            entry.value
        )));
    };
    let Some(addr) = port.strip_prefix("tcp://") else {
        return Err(Failure::Mismatch(format!(
            "{port:?} is not a tcp:// port name"
        )));
    };
    // MPI_Comm_connect.
    let mut stream = TcpStream::connect(addr).map_err(call("connecting to the port"))?;
    writeln!(stream, "{}", greeting(&me)).map_err(call("greeting"))?;
    let reply = read_line(&stream)?;
    let want = answer(&me.to_string(), server);
    if reply != want {
        return Err(Failure::Mismatch(format!(
            "client: the server answered {reply:?}, expected {want:?}"
        )));
    }
    Ok(format!("client {me}: {server} answered at {port}"))
}

fn run(role: &str) -> Result<String, Failure> {
    let c = Client::init().map_err(call("init"))?;
    let line = match role {
        "server" => server(&c)?,
        "client" => client(&c)?,
        _ => {
            return Err(Failure::Call(format!(
                "usage: rendezvous server|client (not {role:?})"
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
            eprintln!("rendezvous {role}: {m}");
            ExitCode::from(2)
        }
    }
}
