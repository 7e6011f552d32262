//! `pmix-scale`: the scale rows of `cargo xtask bench --scale` on our stack (issue 29's
//! "Measured"): one daemon's view of a job of `nodes × ppn` processes, hosted by `pmix-server`
//! with the node and process maps pmixrun gives, and real `pmix-client` processes on it.
//! `pmix-tests/openpmix/pmix_bighost.c` and `pmix_bigclient.c` are its twin on OpenPMIx's
//! server and client libraries and print the same lines.
//!
//! `pmix-scale host --phase PHASE --nodes N --ppn P [--clients K] [--reps R] [--timeout S]
//! [--client PROGRAM]` (`--client`: start PROGRAM, e.g. libpmix's `pmix_bigclient`, as the
//! clients instead of `pmix-scale client`, to measure how our server serves libpmix clients)
//! runs one phase in a fresh server (so that every memory number starts from the same place):
//!
//! - `reg0`: `register_nspace` on a daemon that hosts no rank of the job (its hostname is not
//!   in the node map, `nlocalprocs` 0): time and the RSS it adds, then `deregister_nspace`.
//! - `first`: `register_nspace` on the daemon of the middle node (`node…` number `N/2 + 1`,
//!   P local ranks), then one local client (its first local rank) started alone: its init,
//!   the RSS init added to it, then gets of a far rank's (half the job away, on another node)
//!   `HOSTNAME`, `LOCAL_RANK`, `NODEID` and of the far node's `LOCAL_PEERS` (`NODE_INFO` +
//!   `HOSTNAME`), each the first call and the mean of R repeated calls, every value checked.
//!   The host samples the client's VmRSS and Pss and its own while the client is alive.
//! - `many`: `register_nspace` as in `first`, then K local clients started back to back:
//!   the wall time from the first start to the last init done, and, with all K alive (each
//!   waits on its stdin after init), the node's memory: the server's and every client's VmRSS
//!   and Pss (`/proc/<pid>/smaps_rollup`: shared pages divided among their users). With K = P
//!   the clients then join a job-wide collecting fence after a put of 100 bytes each; the host's
//!   `fence_nb` answers with their node's contribution plus the data of every other rank of
//!   the job, fabricated before the fence in the server's format (one frame per node of
//!   `ProcKvs`, as each node's server would contribute); each client times the fence and its
//!   first get of the far rank's value (checked), and the node's memory is sampled again.
//!
//! Output: `RESULT <metric> <value>` (metric names end in their unit), `NA <metric> <reason>`
//! for a row this run cannot give, `NOTE <text>`. Every child has the host's deadline: past
//! it they are killed and the host fails. A client whose host goes away sees its stdin end and
//! finalizes.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pmix_client::{Client, Info, Key, Nspace, Proc, Rank, Scope, Status, Value, attr};
use pmix_regex::Form;
use pmix_server::{Completion, Host, Server, ServerOptions};
use pmix_types::DataArray;
use pmix_wire::{Kv, ProcKvs};

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("host") => host_main(&args[1..]),
        Some("client") => client_main(&args[1..]),
        _ => Err("usage: pmix-scale host|client [options] (see the program's docs)".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            println!("NOTE FAILED {e}");
            eprintln!("pmix-scale: {e}");
            ExitCode::FAILURE
        }
    }
}

type Res<T = ()> = Result<T, String>;

fn err<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// `--name value` pairs; `known` gives the names and defaults.
fn parse_opts(args: &[String], known: &mut [(&str, String)]) -> Res {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let name = a
            .strip_prefix("--")
            .ok_or_else(|| format!("unexpected {a:?}"))?;
        let slot = known
            .iter_mut()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| format!("unknown option {a}"))?;
        slot.1 = it
            .next()
            .ok_or_else(|| format!("{a} needs a value"))?
            .clone();
    }
    Ok(())
}

fn opt<'a>(known: &'a [(&str, String)], name: &str) -> &'a str {
    known
        .iter()
        .find(|(n, _)| *n == name)
        .map_or("", |(_, v)| v.as_str())
}

fn num(known: &[(&str, String)], name: &str) -> Res<u32> {
    opt(known, name)
        .parse()
        .map_err(|_| format!("--{name} takes a number"))
}

/// A `kB` field of a `/proc/<pid>` file (`VmRSS` of `status`, `Pss` of `smaps_rollup`).
fn proc_kb(pid: &str, file: &str, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/{file}"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix(field))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn rss_kb(pid: &str) -> u64 {
    proc_kb(pid, "status", "VmRSS:")
}

fn pss_kb(pid: &str) -> u64 {
    proc_kb(pid, "smaps_rollup", "Pss:")
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

/// Lines for the xtask, written at the end in one go.
#[derive(Default)]
struct Out(String);

impl Out {
    fn result(&mut self, name: &str, v: f64) {
        self.0.push_str(&format!("RESULT {name} {v:.3}\n"));
    }
    fn na(&mut self, name: &str, why: &str) {
        self.0.push_str(&format!("NA {name} {why}\n"));
    }
    fn print(&self) -> Res {
        let mut stdout = std::io::stdout().lock();
        stdout
            .write_all(self.0.as_bytes())
            .and_then(|()| stdout.flush())
            .map_err(err("stdout"))
    }
}

// ---- the job ----------------------------------------------------------------------------------

/// The job's shape, as both the host and its clients know it.
#[derive(Clone, Copy)]
struct Shape {
    nodes: u32,
    ppn: u32,
}

impl Shape {
    fn nprocs(self) -> u32 {
        self.nodes * self.ppn
    }
    /// The node this daemon serves: the middle one.
    fn here(self) -> u32 {
        self.nodes / 2
    }
    /// Half the job away from `rank`: on another node when there are two or more.
    fn far(self, rank: u32) -> u32 {
        (rank + self.nprocs() / 2) % self.nprocs()
    }
}

/// Node `i`'s name (0-based index): `node00001`, ...
fn node_name(i: u32) -> String {
    format!("node{:05}", i + 1)
}

/// The value every rank puts before the fence, and the host fabricates for the others: 100
/// bytes (`--fence-bytes`) naming the rank.
fn blob_of(rank: u32, bytes: usize) -> String {
    let head = format!("r{rank}-");
    format!("{head}{}", "x".repeat(bytes.saturating_sub(head.len())))
}

const BLOB_KEY: &str = "scale.blob";
const NSPACE: &str = "scale";

/// The job information pmixrun registers for one app (its maps in their raw form).
fn job_info(shape: Shape) -> Res<Vec<Info>> {
    let nprocs = shape.nprocs();
    let names: Vec<String> = (0..shape.nodes).map(node_name).collect();
    let ranks: Vec<Vec<u32>> = (0..shape.nodes)
        .map(|n| (n * shape.ppn..(n + 1) * shape.ppn).collect())
        .collect();
    let nmap = pmix_regex::generate_regex_with(&names, Form::Raw).map_err(err("node map"))?;
    let pmap = pmix_regex::generate_ppn_with(&ranks, Form::Raw).map_err(err("proc map"))?;
    let app = DataArray::from_infos([
        Info::attr(attr::APPNUM, 0u32),
        Info::attr(attr::APP_SIZE, nprocs),
        Info::attr(attr::MAX_PROCS, nprocs),
        Info::attr(attr::APPLDR, Rank(0)),
        Info::attr(attr::WDIR, "/tmp"),
        Info::attr(attr::APP_ARGV, "pmix-scale client"),
    ]);
    Ok(vec![
        Info::attr(attr::JOB_SIZE, nprocs),
        Info::attr(attr::MAX_PROCS, nprocs),
        Info::attr(attr::UNIV_SIZE, nprocs),
        Info::attr(attr::NUM_NODES, shape.nodes),
        Info::attr(attr::JOB_NUM_APPS, 1u32),
        Info::attr(attr::NODE_MAP, Value::Regex(nmap)),
        Info::attr(attr::PROC_MAP, Value::Regex(pmap)),
        Info::attr(attr::APP_INFO_ARRAY, app),
    ])
}

// ---- host -------------------------------------------------------------------------------------

/// The fence: the node's own contribution plus every other node's, fabricated in advance
/// (`ready`); a job-wide fence without it is answered with the node's contribution alone.
struct ScaleHost {
    others: Arc<Mutex<Option<Vec<u8>>>>,
}

impl Host for ScaleHost {
    fn abort(&mut self, proc: &Proc, status: Status, message: &str, _: &[Proc], d: Completion<()>) {
        eprintln!("pmix-scale: {proc} aborted the job ({status:?}): {message}");
        d.complete(Ok(()));
    }

    fn fence_nb(&mut self, _: &[Proc], _: &[Info], mut data: Vec<u8>, done: Completion<Vec<u8>>) {
        let others = self.others.lock().map(|mut o| o.take()).unwrap_or(None);
        if let Some(others) = others {
            data.extend_from_slice(&others);
        }
        done.complete(Ok(data));
    }
}

/// Every rank's fence data but `here`'s node's: one frame of `ProcKvs` per node, as that
/// node's server would contribute it.
fn fabricate(shape: Shape, bytes: usize) -> Res<Vec<u8>> {
    let ns = Nspace::new(NSPACE).map_err(err("nspace"))?;
    let key = Key::new(BLOB_KEY).map_err(err("key"))?;
    let mut out = Vec::new();
    for node in (0..shape.nodes).filter(|n| *n != shape.here()) {
        let part: Vec<ProcKvs> = (node * shape.ppn..(node + 1) * shape.ppn)
            .map(|r| ProcKvs {
                proc: Proc::new(ns.clone(), r),
                kvs: vec![Kv {
                    scope: Scope::GLOBAL,
                    key: key.clone(),
                    value: Value::String(blob_of(r, bytes)),
                }],
            })
            .collect();
        pmix_wire::encode_frame(&part, &mut out).map_err(err("encode"))?;
    }
    Ok(out)
}

/// One started client: its process, its stdin (closed to let it finalize) and its lines.
struct Started {
    child: Child,
    stdin: Option<ChildStdin>,
    pid: String,
}

/// A line a client printed, and when it arrived.
struct Line {
    client: usize,
    text: String,
    at: Instant,
}

/// The clients of one phase, all killed when dropped (only after the host's deadline does
/// that happen before they ended by themselves).
struct Clients {
    list: Vec<Started>,
    lines: mpsc::Receiver<Line>,
    tx: mpsc::Sender<Line>,
    deadline: Instant,
}

impl Clients {
    fn new(deadline: Instant) -> Clients {
        let (tx, lines) = mpsc::channel();
        Clients {
            list: Vec::new(),
            lines,
            tx,
            deadline,
        }
    }

    fn start(&mut self, mut cmd: Command) -> Res {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(err("start a client"))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let idx = self.list.len();
        let tx = self.tx.clone();
        std::thread::spawn(move || {
            for text in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx
                    .send(Line {
                        client: idx,
                        text,
                        at: Instant::now(),
                    })
                    .is_err()
                {
                    break;
                }
            }
        });
        self.list.push(Started {
            pid: child.id().to_string(),
            stdin: child.stdin.take(),
            child,
        });
        Ok(())
    }

    /// Reads lines until every client printed `mark`; gives each client's lines before it, and
    /// when the last mark came.
    fn until(&mut self, mark: &str) -> Res<(Vec<Vec<String>>, Instant)> {
        let mut got = vec![Vec::new(); self.list.len()];
        let mut marked = vec![false; self.list.len()];
        let mut last = Instant::now();
        while marked.iter().any(|m| !m) {
            let left = self.deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).map_err(|_| {
                let n = marked.iter().filter(|m| !**m).count();
                format!("{n} clients did not print {mark} before the deadline")
            })?;
            if line.text.starts_with("NOTE FAILED") {
                return Err(format!("client {}: {}", line.client, line.text));
            }
            if line.text == mark {
                marked[line.client] = true;
                last = line.at;
            } else {
                got[line.client].push(line.text);
            }
        }
        Ok((got, last))
    }

    fn tell(&mut self, what: &str) -> Res {
        for c in &mut self.list {
            if let Some(stdin) = &mut c.stdin {
                stdin
                    .write_all(what.as_bytes())
                    .and_then(|()| stdin.flush())
                    .map_err(err("a client's stdin"))?;
            }
        }
        Ok(())
    }

    /// Closes every client's stdin (they finalize and exit) and waits for them until the
    /// deadline.
    fn finish(&mut self) -> Res {
        for c in &mut self.list {
            c.stdin = None;
        }
        for c in &mut self.list {
            loop {
                match c.child.try_wait().map_err(err("wait"))? {
                    Some(st) if st.success() => break,
                    Some(st) => return Err(format!("client {} exited with {st}", c.pid)),
                    None if Instant::now() > self.deadline => {
                        return Err("clients did not exit before the deadline".into());
                    }
                    None => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        }
        Ok(())
    }

    /// The clients' summed VmRSS and Pss (kB), sampled now.
    fn memory(&self) -> (u64, u64) {
        self.list
            .iter()
            .fold((0, 0), |(r, p), c| (r + rss_kb(&c.pid), p + pss_kb(&c.pid)))
    }
}

impl Drop for Clients {
    fn drop(&mut self) {
        for c in &mut self.list {
            if c.child.try_wait().ok().flatten().is_none() {
                let _ = c.child.kill();
                let _ = c.child.wait();
            }
        }
    }
}

/// `name value` lines of clients: each metric's values.
fn metrics(lines: &[Vec<String>]) -> std::collections::BTreeMap<String, Vec<f64>> {
    let mut m = std::collections::BTreeMap::<String, Vec<f64>>::new();
    for line in lines.iter().flatten() {
        if let Some((name, v)) = line.strip_prefix("RESULT ").and_then(|l| l.split_once(' ')) {
            if let Ok(v) = v.parse() {
                m.entry(name.to_owned()).or_default().push(v);
            }
        } else if let Some(rest) = line.strip_prefix("NA ") {
            m.entry(format!("NA {rest}")).or_default();
        }
    }
    m
}

fn host_main(args: &[String]) -> Res {
    let mut o = [
        ("phase", String::new()),
        ("nodes", "1000".into()),
        ("ppn", "100".into()),
        ("clients", "0".into()),
        ("reps", "10000".into()),
        ("fence-bytes", "100".into()),
        ("timeout", "600".into()),
        ("client", String::new()),
    ];
    parse_opts(args, &mut o)?;
    let shape = Shape {
        nodes: num(&o, "nodes")?,
        ppn: num(&o, "ppn")?,
    };
    if shape.nodes < 2 || shape.ppn == 0 || shape.nodes.checked_mul(shape.ppn).is_none() {
        return Err("--nodes must be at least 2, --ppn at least 1, their product a u32".into());
    }
    let clients = match num(&o, "clients")? {
        0 => shape.ppn,
        k if k <= shape.ppn => k,
        k => {
            return Err(format!(
                "--clients {k}: more than the {} local ranks",
                shape.ppn
            ));
        }
    };
    let deadline = Instant::now() + Duration::from_secs(u64::from(num(&o, "timeout")?));
    let phase = opt(&o, "phase").to_owned();
    let local = match phase.as_str() {
        "reg0" => false,
        "first" | "many" => true,
        p => return Err(format!("--phase {p:?}: reg0, first or many")),
    };
    let mut out = Out::default();
    let me = "self";

    let others = Arc::new(Mutex::new(None));
    let options = ServerOptions {
        hostname: Some(if local {
            node_name(shape.here())
        } else {
            "elsewhere".into()
        }),
        ..ServerOptions::default()
    };
    let server = Server::init(
        ScaleHost {
            others: others.clone(),
        },
        options,
    )
    .map_err(err("server init"))?;
    let info = job_info(shape)?;
    let ns = Nspace::new(NSPACE).map_err(err("nspace"))?;
    let before = rss_kb(me);
    let t = Instant::now();
    server
        .register_nspace(&ns, if local { shape.ppn } else { 0 }, &info)
        .map_err(err("register_nspace"))?;
    out.result("register_nspace_ms", ms(t.elapsed()));
    drop(info);
    out.result("register_nspace_rss_kb", rss_kb(me) as f64 - before as f64);

    let exe = std::env::current_exe().map_err(err("own path"))?;
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    let base = shape.here() * shape.ppn;
    let client_cmd = |rank: u32, role: &str| -> Res<Command> {
        let p = Proc::new(ns.clone(), rank);
        server
            .register_client(&p, uid, gid)
            .map_err(err("register_client"))?;
        let env = server.setup_fork(&p).map_err(err("setup_fork"))?;
        // Another client program (libpmix's `pmix_bigclient`, for how our server serves
        // libpmix clients), or our own.
        let mut cmd = match opt(&o, "client") {
            "" => {
                let mut c = Command::new(&exe);
                c.args(["client", role]);
                c.args(["--fence-bytes", opt(&o, "fence-bytes")]);
                c
            }
            other => {
                let mut c = Command::new(other);
                c.arg(role);
                c
            }
        };
        cmd.args(["--nodes", opt(&o, "nodes"), "--ppn", opt(&o, "ppn")])
            .args(["--reps", opt(&o, "reps")])
            .envs(env);
        Ok(cmd)
    };

    match phase.as_str() {
        "first" => {
            let mut c = Clients::new(deadline);
            c.start(client_cmd(base, "first")?)?;
            let (lines, _) = c.until("READY")?;
            let (crss, cpss) = c.memory();
            out.result("first_client_rss_kb", crss as f64);
            out.result("first_client_pss_kb", cpss as f64);
            out.result(
                "first_server_rss_added_kb",
                rss_kb(me) as f64 - before as f64,
            );
            for (name, vs) in metrics(&lines) {
                match name.strip_prefix("NA ") {
                    Some(rest) => {
                        let (m, why) = rest.split_once(' ').unwrap_or((rest, ""));
                        out.na(&format!("first_{m}"), why);
                    }
                    None => out.result(
                        &format!("first_{name}"),
                        vs.iter().sum::<f64>() / vs.len() as f64,
                    ),
                }
            }
            c.finish()?;
        }
        "many" => {
            let cmds = (0..clients)
                .map(|k| client_cmd(base + k, "many"))
                .collect::<Res<Vec<_>>>()?;
            let mut c = Clients::new(deadline);
            let t0 = Instant::now();
            for cmd in cmds {
                c.start(cmd)?;
            }
            let (lines, last) = c.until("READY")?;
            out.result("many_wall_ms", ms(last - t0));
            let m = metrics(&lines);
            if let Some(v) = m.get("init_ms") {
                out.result("many_init_mean_ms", v.iter().sum::<f64>() / v.len() as f64);
                out.result("many_init_max_ms", v.iter().copied().fold(0.0, f64::max));
            }
            if let Some(v) = m.get("rss_added_kb") {
                let mean = v.iter().sum::<f64>() / v.len() as f64;
                out.result("many_client_rss_added_kb", mean);
            }
            let (crss, cpss) = c.memory();
            let (srss, spss) = (rss_kb(me), pss_kb(me));
            out.result("many_clients", f64::from(clients));
            out.result("many_server_rss_kb", srss as f64);
            out.result("many_clients_rss_kb", crss as f64);
            out.result("many_node_rss_kb", (srss + crss) as f64);
            out.result("many_server_pss_kb", spss as f64);
            out.result("many_clients_pss_kb", cpss as f64);
            out.result("many_node_pss_kb", (spss + cpss) as f64);
            if clients == shape.ppn {
                let bytes = num(&o, "fence-bytes")? as usize;
                let t = Instant::now();
                let blob = fabricate(shape, bytes)?;
                out.result("fence_fabricate_ms", ms(t.elapsed()));
                out.result("fence_others_bytes", blob.len() as f64);
                *others.lock().map_err(|_| "lock")? = Some(blob);
                let t = Instant::now();
                c.tell("FENCE\n")?;
                let (lines, last) = c.until("DONE")?;
                out.result("fence_wall_ms", ms(last - t));
                for (name, vs) in metrics(&lines) {
                    if name.starts_with("NA ") {
                        continue;
                    }
                    let mean = vs.iter().sum::<f64>() / vs.len() as f64;
                    out.result(&name, mean);
                    if name == "fence_us" {
                        out.result("fence_max_us", vs.iter().copied().fold(0.0, f64::max));
                    }
                }
                let (crss, cpss) = c.memory();
                let (srss, spss) = (rss_kb(me), pss_kb(me));
                out.result("fenced_node_rss_kb", (srss + crss) as f64);
                out.result("fenced_node_pss_kb", (spss + cpss) as f64);
                out.result("fenced_server_rss_kb", srss as f64);
                out.result("fenced_clients_pss_kb", cpss as f64);
            } else {
                for m in [
                    "fence_us",
                    "fence_max_us",
                    "get_after_fence_first_us",
                    "get_after_fence_us",
                    "fenced_node_rss_kb",
                    "fenced_node_pss_kb",
                    "fenced_server_rss_kb",
                    "fenced_clients_pss_kb",
                ] {
                    out.na(
                        m,
                        "the job-wide fence needs every local rank (--clients = --ppn)",
                    );
                }
            }
            c.finish()?;
        }
        _ => {
            let t = Instant::now();
            server.deregister_nspace(&ns);
            out.result("deregister_nspace_ms", ms(t.elapsed()));
        }
    }
    let _ = server.finalize();
    out.print()
}

// ---- clients ----------------------------------------------------------------------------------

/// The first call of `get` (µs), then the mean of `reps` more, after `check` of its value.
fn timed_get(
    c: &Client,
    p: &Proc,
    key: &str,
    info: &[Info],
    reps: u32,
    check: impl Fn(&Value) -> bool,
) -> Res<(f64, f64)> {
    let t = Instant::now();
    let v = c.get(p, key, info).map_err(err(key))?;
    let first = us(t.elapsed());
    if !check(&v) {
        return Err(format!("{p}'s {key} is {v:?}"));
    }
    let t = Instant::now();
    for _ in 0..reps {
        std::hint::black_box(c.get(p, key, info).map_err(err(key))?);
    }
    Ok((first, us(t.elapsed()) / f64::from(reps.max(1))))
}

/// Waits for the host's word on stdin; `None` at its end.
fn wait_host() -> Option<String> {
    let mut line = String::new();
    match std::io::stdin().read_line(&mut line) {
        Ok(n) if n > 0 => Some(line.trim().to_owned()),
        _ => None,
    }
}

fn client_main(args: &[String]) -> Res {
    let role = args.first().ok_or("client first|many")?.clone();
    let mut o = [
        ("nodes", String::new()),
        ("ppn", String::new()),
        ("reps", "10000".into()),
        ("fence-bytes", "100".into()),
    ];
    parse_opts(&args[1..], &mut o)?;
    let shape = Shape {
        nodes: num(&o, "nodes")?,
        ppn: num(&o, "ppn")?,
    };
    let reps = num(&o, "reps")?;
    let mut out = Out::default();

    let rss0 = rss_kb("self");
    let t = Instant::now();
    let c = Client::init().map_err(err("init"))?;
    out.result("init_ms", ms(t.elapsed()));
    out.result("rss_added_kb", rss_kb("self") as f64 - rss0 as f64);
    let me = c.proc().clone();
    let far = shape.far(me.rank.0);
    let far_node = far / shape.ppn;
    let far_proc = Proc::new(me.nspace.clone(), far);

    if role == "first" {
        let name = node_name(far_node);
        let (f, r) = timed_get(&c, &far_proc, attr::HOSTNAME, &[], reps, |v| {
            v.as_str() == Some(name.as_str())
        })?;
        out.result("get_hostname_first_us", f);
        out.result("get_hostname_us", r);
        let (f, r) = timed_get(&c, &far_proc, attr::LOCAL_RANK, &[], reps, |v| {
            v.as_u64() == Some(u64::from(far % shape.ppn))
        })?;
        out.result("get_local_rank_first_us", f);
        out.result("get_local_rank_us", r);
        let (f, r) = timed_get(&c, &far_proc, attr::NODEID, &[], reps, |v| {
            v.as_u64() == Some(u64::from(far_node))
        })?;
        out.result("get_nodeid_first_us", f);
        out.result("get_nodeid_us", r);
        let peers: Vec<String> = (far_node * shape.ppn..(far_node + 1) * shape.ppn)
            .map(|r| r.to_string())
            .collect();
        let peers = peers.join(",");
        let wild = Proc::new(me.nspace.clone(), Rank::WILDCARD);
        let on_node = [
            Info::attr(attr::NODE_INFO, true),
            Info::attr(attr::HOSTNAME, name.as_str()),
        ];
        let (f, r) = timed_get(&c, &wild, attr::LOCAL_PEERS, &on_node, reps, |v| {
            v.as_str() == Some(peers.as_str())
        })?;
        out.result("get_node_peers_first_us", f);
        out.result("get_node_peers_us", r);
    }
    out.0.push_str("READY\n");
    out.print()?;
    out = Out::default();

    if wait_host().as_deref() == Some("FENCE") {
        let bytes = num(&o, "fence-bytes")? as usize;
        c.put(Scope::GLOBAL, BLOB_KEY, blob_of(me.rank.0, bytes))
            .map_err(err("put"))?;
        c.commit().map_err(err("commit"))?;
        let t = Instant::now();
        c.fence(&[], &[Info::attr(attr::COLLECT_DATA, true)])
            .map_err(err("fence"))?;
        out.result("fence_us", us(t.elapsed()));
        let want = blob_of(far, bytes);
        let (f, r) = timed_get(&c, &far_proc, BLOB_KEY, &[], reps.min(1000), |v| {
            v.as_str() == Some(want.as_str())
        })?;
        out.result("get_after_fence_first_us", f);
        out.result("get_after_fence_us", r);
        out.0.push_str("DONE\n");
        out.print()?;
        wait_host();
    }
    c.finalize().map_err(err("finalize"))
}
