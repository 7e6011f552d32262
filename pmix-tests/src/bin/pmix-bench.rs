//! `pmix-bench`: the multi-process benchmark `cargo xtask bench` runs on our stack (host on
//! `pmix-server`, clients on `pmix-client`). `xtask/c/` holds the OpenPMIx twin of this program,
//! which runs the same workloads and prints the same lines.
//!
//! Modes:
//! - `pmix-bench job --n N [--pin CPU] [--timeout SECS] [--client PATH] [-- CLIENT-ARGS]`: the
//!   host. Starts a server, registers one namespace of N local processes, starts N copies of
//!   itself in `client` mode with `setup_fork`'s environment, waits for them (killing them all
//!   at the deadline), then deregisters the namespace. `--pin` puts the host, its server thread
//!   and every client on one CPU. `--client` starts that program with CLIENT-ARGS instead of
//!   this one: `xtask/c/bench_client.c`, the libpmix client, prints the same lines, and finds
//!   the server through the `PMIX_SERVER_URI41` family `setup_fork` adds for libpmix clients.
//!   `PMIX_BENCH_DS21=0` in the host's environment turns off the ds21 store offered to them
//!   (`ServerOptions::ds21`), to compare with everything over the socket.
//!   `BENCH_CLIENT_LIBRARY_PATH` in the host's environment becomes the clients'
//!   `LD_LIBRARY_PATH` (not the host's): the libpmix client on pmix-rs's `libpmix.so.2`.
//! - `pmix-bench client [--get G] [--peer W] [--fence F] [--barrier B] [--pub P]
//!   [--pub-all A]`: one rank's workload; its numbers go to stdout, which the host reads.
//! - `pmix-bench regex [--quick]`: node and process map generation, and the registration of
//!   jobs of 10,000 and 100,000 processes on 1,000 nodes (none of them local), with the
//!   process's memory.
//! - `pmix-bench bigjob [--nodes 10000] [--ppn 100] [--local 0|1] [--native 0|1]`: one
//!   registration of a job of nodes × ppn processes with the node and process maps pmixrun
//!   gives (raw form unless `--native 1`), node names `node00001`...; with `--local 1` the
//!   server's hostname is the middle node (so it has ppn local ranks) and one local rank is
//!   started (`bigclient` mode) to time the first client init, which derives the job data;
//!   with `--local 0` this daemon hosts no rank (`nlocalprocs` 0). Times and RSS of
//!   `register_nspace`, the first access, and `deregister_nspace`.
//!
//! The host prints `RESULT <metric> <value>` for its own numbers, `CLIENT <rank> <metric>
//! <value>` for each rank's, and `NOTE <text>` for anything a reader should know (a workload
//! our stack does not support yet, a process that failed). Metric names end in their unit.

use std::hint::black_box;
use std::io::{Read, Write};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pmix_client::{Client, Info, Key, Nspace, Proc, Rank, Scope, Status, Value, attr};
use pmix_regex::Form;
use pmix_server::{Completion, Host, NoHost, Server, ServerOptions};
use pmix_types::DataArray;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("job") => job_main(&args[1..]),
        Some("client") => client_main(&args[1..]),
        Some("regex") => regex_main(&args[1..]),
        Some("bigjob") => bigjob_main(&args[1..]),
        Some("bigclient") => bigclient_main(),
        _ => Err("usage: pmix-bench job|client|regex|bigjob [options] (see the crate docs)".into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pmix-bench: {e}");
            ExitCode::FAILURE
        }
    }
}

type Res<T = ()> = Result<T, String>;

fn err<E: std::fmt::Display>(what: &str) -> impl FnOnce(E) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// Reads `--name value` options into `known` (name, default) slots; returns what follows `--`.
fn parse_opts<'a>(args: &'a [String], known: &mut [(&str, u64)]) -> Res<&'a [String]> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" {
            return Ok(&args[i + 1..]);
        }
        let name = a
            .strip_prefix("--")
            .ok_or_else(|| format!("unexpected {a:?}"))?;
        let slot = known
            .iter_mut()
            .find(|(n, _)| *n == name)
            .ok_or_else(|| format!("unknown option {a}"))?;
        let v = args
            .get(i + 1)
            .ok_or_else(|| format!("{a} needs a value"))?;
        slot.1 = v.parse().map_err(err(a))?;
        i += 2;
    }
    Ok(&[])
}

fn opt(known: &[(&str, u64)], name: &str) -> u64 {
    known
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(0, |(_, v)| *v)
}

/// Resident set size of this process in KiB.
fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn us_per(d: Duration, n: u64) -> f64 {
    d.as_secs_f64() * 1e6 / n.max(1) as f64
}

/// Puts the calling thread (and so every thread and process it starts later) on `cpu`.
fn pin_to(cpu: usize) -> Res {
    let mut set = nix::sched::CpuSet::new();
    set.set(cpu).map_err(err("cpu set"))?;
    nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
        .map_err(err("sched_setaffinity"))
}

// ---- host -------------------------------------------------------------------------------------

/// The host callbacks a one-node job needs: fences never leave the node (a fence upcall gets
/// its own contribution back, the complete allgather of one node), abort ends the job.
/// Publish/lookup/unpublish are served by the server's built-in name service (its default),
/// so they need no callback.
struct BenchHost {
    aborted: Arc<AtomicBool>,
}

impl Host for BenchHost {
    fn abort(&mut self, proc: &Proc, status: Status, message: &str, _: &[Proc], d: Completion<()>) {
        eprintln!("pmix-bench: {proc} aborted the job ({status:?}): {message}");
        self.aborted.store(true, Ordering::SeqCst);
        d.complete(Ok(()));
    }

    fn fence_nb(&mut self, _: &[Proc], _: &[Info], data: Vec<u8>, done: Completion<Vec<u8>>) {
        done.complete(Ok(data));
    }
}

/// What the OpenPMIx host registers too: sizes, this node's maps and peers, and one
/// `PROC_INFO_ARRAY` per rank.
fn job_info(hostname: &str, n: u32) -> Res<Vec<Info>> {
    let nodes = pmix_regex::generate_regex_with(&[hostname], Form::Native).map_err(err("map"))?;
    let ranks: Vec<u32> = (0..n).collect();
    let ppn = pmix_regex::generate_ppn_with(&[&ranks], Form::Native).map_err(err("map"))?;
    let peers: Vec<String> = ranks.iter().map(u32::to_string).collect();
    let mut info = vec![
        Info::attr(attr::JOB_SIZE, n),
        Info::attr(attr::UNIV_SIZE, n),
        Info::attr(attr::LOCAL_SIZE, n),
        Info::attr(attr::NUM_NODES, 1u32),
        Info::attr(attr::LOCAL_PEERS, peers.join(",")),
        Info::attr(attr::NODE_MAP, Value::Regex(nodes)),
        Info::attr(attr::PROC_MAP, Value::Regex(ppn)),
    ];
    for r in 0..n {
        let local = u16::try_from(r).map_err(err("local rank"))?;
        let per_proc = DataArray::from_infos([
            Info::attr(attr::RANK, Rank(r)),
            Info::attr(attr::LOCAL_RANK, local),
            Info::attr(attr::NODE_RANK, local),
            Info::attr(attr::NODEID, 0u32),
            Info::attr(attr::HOSTNAME, hostname),
        ]);
        info.push(Info::attr(attr::PROC_INFO_ARRAY, per_proc));
    }
    Ok(info)
}

struct Running {
    rank: u32,
    child: Child,
    status: Option<ExitStatus>,
}

/// Takes `--client PATH` out of the host's options (those before `--`), if it is there.
fn take_client(args: &[String]) -> Res<(Option<String>, Vec<String>)> {
    let mut rest = Vec::with_capacity(args.len());
    let mut client = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == "--" {
            rest.push(a.clone());
            rest.extend(it.cloned());
            break;
        }
        if a == "--client" {
            client = Some(it.next().ok_or("--client needs a value")?.clone());
        } else {
            rest.push(a.clone());
        }
    }
    Ok((client, rest))
}

/// The variable whose value becomes the clients' `LD_LIBRARY_PATH` (not the host's): the
/// bench runs libpmix's client program on pmix-rs's `libpmix.so.2` this way.
const CLIENT_LIBRARY_PATH: &str = "BENCH_CLIENT_LIBRARY_PATH";

fn job_main(args: &[String]) -> Res {
    let (client, args) = take_client(args)?;
    let mut o = [("n", 2), ("pin", u64::MAX), ("timeout", 120)];
    let client_args = parse_opts(&args, &mut o)?;
    let n = u32::try_from(opt(&o, "n")).map_err(err("--n"))?;
    if n == 0 {
        return Err("--n must be at least 1".into());
    }
    let pin = opt(&o, "pin");
    if pin != u64::MAX {
        pin_to(usize::try_from(pin).map_err(err("--pin"))?)?;
    }
    let deadline = Instant::now() + Duration::from_secs(opt(&o, "timeout"));
    let mut out = String::new();
    let mut result = |name: &str, v: f64| out.push_str(&format!("RESULT {name} {v:.3}\n"));

    let aborted = Arc::new(AtomicBool::new(false));
    let host = BenchHost {
        aborted: aborted.clone(),
    };
    let rss0 = rss_kb();
    let t = Instant::now();
    let options = ServerOptions {
        ds21: std::env::var("PMIX_BENCH_DS21").map_or(true, |v| v != "0"),
        ..ServerOptions::default()
    };
    let server = Server::init(host, options).map_err(err("server init"))?;
    result("server_init_ms", ms(t.elapsed()));
    result("rss_start_kb", rss0 as f64);
    result("rss_init_kb", rss_kb() as f64);

    let ns = Nspace::new("bench").map_err(err("nspace"))?;
    let info = job_info(server.hostname(), n)?;
    let t = Instant::now();
    server
        .register_nspace(&ns, n, &info)
        .map_err(err("register_nspace"))?;
    result("register_nspace_ms", ms(t.elapsed()));
    drop(info);
    result("rss_reg_kb", rss_kb() as f64);

    // This program in client mode, or the one `--client` names (its arguments are the same).
    let (exe, client_mode) = match client {
        Some(path) => (std::path::PathBuf::from(path), None),
        None => (
            std::env::current_exe().map_err(err("own path"))?,
            Some("client"),
        ),
    };
    let uid = nix::unistd::getuid().as_raw();
    let gid = nix::unistd::getgid().as_raw();
    let mut children = Vec::new();
    let mut failures = Vec::new();
    let t = Instant::now();
    for r in 0..n {
        let p = Proc::new(ns.clone(), r);
        server
            .register_client(&p, uid, gid)
            .map_err(err("register_client"))?;
        let env = server.setup_fork(&p).map_err(err("setup_fork"))?;
        let mut cmd = Command::new(&exe);
        if let Some(dir) = std::env::var_os(CLIENT_LIBRARY_PATH) {
            cmd.env("LD_LIBRARY_PATH", dir);
        }
        let child = cmd
            .args(client_mode)
            .args(client_args)
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn();
        match child {
            Ok(child) => children.push(Running {
                rank: r,
                child,
                status: None,
            }),
            Err(e) => {
                failures.push(format!("rank {r} could not start: {e}"));
                break;
            }
        }
    }
    result("launch_ms", ms(t.elapsed()));

    // Reap with a deadline; a rank that fails or aborts ends the job for everyone.
    let mut killed = false;
    loop {
        for c in children.iter_mut().filter(|c| c.status.is_none()) {
            if let Ok(Some(st)) = c.child.try_wait() {
                c.status = Some(st);
                // Once the job is being killed, only the cause is worth a line.
                if !st.success() && !killed {
                    failures.push(format!("rank {} ended with {st}", c.rank));
                }
            }
        }
        if children.iter().all(|c| c.status.is_some()) {
            break;
        }
        let timed_out = Instant::now() > deadline;
        if !killed && (timed_out || aborted.load(Ordering::SeqCst) || !failures.is_empty()) {
            if timed_out {
                failures.push("deadline passed: killing every rank still running".into());
            }
            let mut n = 0;
            for c in children.iter_mut().filter(|c| c.status.is_none()) {
                let _ = c.child.kill();
                n += 1;
            }
            failures.push(format!("killed the {n} ranks still running"));
            killed = true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    result("job_ms", ms(t.elapsed()));
    result("rss_end_kb", rss_kb() as f64);
    server.deregister_nspace(&ns);
    result("rss_dereg_kb", rss_kb() as f64);
    let _ = server.finalize();

    for c in &mut children {
        let mut text = String::new();
        if let Some(mut o) = c.child.stdout.take() {
            let _ = o.read_to_string(&mut text);
        }
        for line in text.lines() {
            match line.strip_prefix("NOTE ") {
                Some(note) => out.push_str(&format!("NOTE rank {}: {note}\n", c.rank)),
                None => out.push_str(&format!("CLIENT {} {line}\n", c.rank)),
            }
        }
    }
    for f in &failures {
        out.push_str(&format!("NOTE FAILED {f}\n"));
    }
    std::io::stdout()
        .write_all(out.as_bytes())
        .map_err(err("stdout"))?;
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("; "))
    }
}

// ---- client -----------------------------------------------------------------------------------

/// One rank's lines for the host, written at the end in one go.
#[derive(Default)]
struct Report(String);

impl Report {
    fn add(&mut self, name: &str, v: f64) {
        self.0.push_str(&format!("{name} {v:.3}\n"));
    }
    fn note(&mut self, text: &str) {
        self.0.push_str(&format!("NOTE {text}\n"));
    }
}

fn barrier(c: &Client) -> Res {
    c.fence(&[], &[]).map_err(err("fence (barrier)"))
}

fn fence_collect(c: &Client) -> Res {
    c.fence(&[], &[Info::attr(attr::COLLECT_DATA, true)])
        .map_err(err("fence (collect)"))
}

fn get_job_loop(c: &Client, wild: &Proc, iters: u64) -> Res<f64> {
    let t = Instant::now();
    for _ in 0..iters {
        black_box(
            c.get(wild, attr::JOB_SIZE, &[])
                .map_err(err("get JOB_SIZE"))?,
        );
    }
    Ok(us_per(t.elapsed(), iters))
}

fn card_of(rank: u32) -> String {
    format!("card-{rank:08}-{:050}", 0)
}

/// One pass of gets of every rank's card, each checked; mean µs per get.
fn peers_pass(c: &Client, peers: &[(Proc, String)]) -> Res<f64> {
    let t = Instant::now();
    for (p, want) in peers {
        let v = c.get(p, "bench.card", &[]).map_err(err("get bench.card"))?;
        if v.as_str() != Some(want.as_str()) {
            return Err(format!("{p}'s bench.card is {v:?}, expected {want:?}"));
        }
    }
    Ok(us_per(t.elapsed(), peers.len() as u64))
}

/// Time spent in each call of [`pub_loop`].
struct PubTimes {
    publish: Duration,
    lookup: Duration,
    unpublish: Duration,
}

/// Publishes, looks up (checking the value) and unpublishes one key, `iters` times.
/// `Ok(None)`: the server does not support publishing.
fn pub_loop(c: &Client, iters: u64, prefix: &str) -> Res<Option<PubTimes>> {
    let rank = c.proc().rank.0;
    let mut t = PubTimes {
        publish: Duration::ZERO,
        lookup: Duration::ZERO,
        unpublish: Duration::ZERO,
    };
    for i in 0..iters {
        let name = format!("{prefix}.{rank}.{i}");
        let key = Key::new(&name).map_err(err("key"))?;
        let val = format!("port-{rank}-{i}");
        let data = [Info::new(key, val.as_str())];

        let t0 = Instant::now();
        let r = c.publish(&data, &[]);
        t.publish += t0.elapsed();
        match r {
            Err(e) if e.status() == Status::ERR_NOT_SUPPORTED => return Ok(None),
            r => r.map_err(err("publish"))?,
        }

        let t0 = Instant::now();
        let found = c.lookup(&[&name], &[]).map_err(err("lookup"));
        t.lookup += t0.elapsed();
        let found = found?;
        match found.as_slice() {
            [p] if p.is_found() && p.value.as_str() == Some(val.as_str()) => {}
            other => return Err(format!("lookup of {name} returned {other:?}")),
        }

        let t0 = Instant::now();
        let r = c.unpublish(&[&name], &[]);
        t.unpublish += t0.elapsed();
        r.map_err(err("unpublish"))?;
    }
    Ok(Some(t))
}

fn client_main(args: &[String]) -> Res {
    let mut o = [
        ("get", 100_000),
        ("peer", 10_000),
        ("fence", 100),
        ("barrier", 1000),
        ("pub", 2000),
        ("pub-all", 200),
    ];
    parse_opts(args, &mut o)?;
    let mut rep = Report::default();

    let t = Instant::now();
    let c = Client::init().map_err(err("init"))?;
    rep.add("init_ms", ms(t.elapsed()));
    let me = c.proc().clone();
    let rank = me.rank.0;
    let wild = Proc::new(me.nspace.clone(), Rank::WILDCARD);
    let n = c
        .get(&wild, attr::JOB_SIZE, &[])
        .map_err(err("get JOB_SIZE"))?
        .as_u32()
        .ok_or("JOB_SIZE is not a uint32")?;

    // Job-level get: rank 0 alone while the others wait in the fence, then everyone at once.
    barrier(&c)?;
    if rank == 0 {
        rep.add("get_job_solo_us", get_job_loop(&c, &wild, opt(&o, "get"))?);
    }
    barrier(&c)?;
    let all_iters = (opt(&o, "get") / u64::from(n)).max(1000);
    rep.add("get_job_all_us", get_job_loop(&c, &wild, all_iters)?);
    barrier(&c)?;

    // Modex: a 64-byte business card and two numbers, commit, the first collecting fence.
    let t = Instant::now();
    c.put(Scope::GLOBAL, "bench.card", card_of(rank))
        .and_then(|()| c.put(Scope::GLOBAL, "bench.port", 10_000 + rank))
        .and_then(|()| {
            c.put(
                Scope::GLOBAL,
                "bench.addr",
                0x0a00_0000u64 + u64::from(rank),
            )
        })
        .map_err(err("put"))?;
    c.commit().map_err(err("commit"))?;
    rep.add("put_commit_us", us_per(t.elapsed(), 1));
    let t = Instant::now();
    fence_collect(&c)?;
    rep.add("fence_first_us", us_per(t.elapsed(), 1));
    // Untimed: no rank starts the CPU-bound gets below while a peer has yet to see the fence
    // complete (see docs/benchmarks.md, "The first collecting fence").
    barrier(&c)?;

    // Every rank's card: the first pass, then repeated passes.
    let peers: Vec<(Proc, String)> = (0..n)
        .map(|r| (Proc::new(me.nspace.clone(), r), card_of(r)))
        .collect();
    rep.add("get_peer_first_us", peers_pass(&c, &peers)?);
    let passes = (opt(&o, "peer") / u64::from(n)).max(1);
    let mut sum = 0.0;
    for _ in 0..passes {
        sum += peers_pass(&c, &peers)?;
    }
    rep.add("get_peer_warm_us", sum / passes as f64);
    barrier(&c)?;

    let iters = opt(&o, "fence");
    let t = Instant::now();
    for _ in 0..iters {
        fence_collect(&c)?;
    }
    rep.add("fence_collect_us", us_per(t.elapsed(), iters));

    barrier(&c)?;
    let iters = opt(&o, "barrier");
    let t = Instant::now();
    for _ in 0..iters {
        barrier(&c)?;
    }
    rep.add("barrier_us", us_per(t.elapsed(), iters));

    // Publish/lookup/unpublish: rank 0 alone, then every rank with keys of its own.
    if rank == 0 {
        let iters = opt(&o, "pub");
        match pub_loop(&c, iters, "solo")? {
            Some(t) => {
                rep.add("pub_solo_publish_us", us_per(t.publish, iters));
                rep.add("pub_solo_lookup_us", us_per(t.lookup, iters));
                rep.add("pub_solo_unpublish_us", us_per(t.unpublish, iters));
            }
            None => rep.note("publish: ERR_NOT_SUPPORTED (publish/lookup rows not measured)"),
        }
    }
    barrier(&c)?;
    let iters = opt(&o, "pub-all");
    if let Some(t) = pub_loop(&c, iters, "all")? {
        rep.add(
            "pub_all_op_us",
            us_per(t.publish + t.lookup + t.unpublish, 3 * iters),
        );
    }
    barrier(&c)?;

    let t = Instant::now();
    c.finalize().map_err(err("finalize"))?;
    rep.add("finalize_ms", ms(t.elapsed()));

    // One write, so that nothing of it is lost if the host reads while we exit.
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(rep.0.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(err("stdout"))
}

// ---- regex and big registrations ------------------------------------------------------------------

fn node_names(n: usize) -> String {
    (1..=n)
        .map(|i| format!("nid{i:06}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// `nodes` nodes of `ppn` consecutive ranks: "0,1,2,3;4,5,6,7;...".
fn ppn_text(nodes: u32, ppn: u32) -> String {
    (0..nodes)
        .map(|n| {
            (n * ppn..(n + 1) * ppn)
                .map(|r| r.to_string())
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect::<Vec<_>>()
        .join(";")
}

/// The best of `reps` runs of `f`, and its output's length.
fn best_of(reps: u32, f: impl Fn() -> Res<Vec<u8>>) -> Res<(f64, usize)> {
    let mut best = f64::INFINITY;
    let mut len = 0;
    for _ in 0..reps {
        let t = Instant::now();
        let out = f()?;
        best = best.min(ms(t.elapsed()));
        len = out.len();
    }
    Ok((best, len))
}

fn regex_main(args: &[String]) -> Res {
    let quick = match args {
        [] => false,
        [q] if q == "--quick" => true,
        _ => return Err("usage: pmix-bench regex [--quick]".into()),
    };
    let mut out = String::new();
    let mut result = |name: &str, v: f64| out.push_str(&format!("RESULT {name} {v:.3}\n"));
    // Started first, as the OpenPMIx host must (its generators need the library initialized).
    let server = Server::init(NoHost, ServerOptions::default()).map_err(err("server init"))?;
    let sizes: &[u32] = if quick { &[10_000] } else { &[10_000, 100_000] };
    for &n in sizes {
        let names = node_names(n as usize);
        let reps = if n >= 100_000 { 3 } else { 5 };
        let (t, len) = best_of(reps, || {
            pmix_regex::generate_regex_str(&names, Form::Native).map_err(err("generate_regex"))
        })?;
        result(&format!("generate_regex_{n}_ms"), t);
        result(&format!("generate_regex_{n}_bytes"), len as f64);
        let ppn = ppn_text(n, 4);
        let reps = if n >= 100_000 { 1 } else { 3 };
        let (t, len) = best_of(reps, || {
            pmix_regex::generate_ppn_str(&ppn, Form::Native).map_err(err("generate_ppn"))
        })?;
        result(&format!("generate_ppn_{n}_ms"), t);
        result(&format!("generate_ppn_{n}_bytes"), len as f64);
    }

    // Jobs on 1,000 nodes, this host not among them: only the maps and sizes are registered.
    let nodes = 1000u32;
    let ppns: &[u32] = if quick { &[10] } else { &[10, 100] };
    for &ppn in ppns {
        let nprocs = nodes * ppn;
        let nmap = pmix_regex::generate_regex_str(&node_names(nodes as usize), Form::Native)
            .map_err(err("node map"))?;
        let pmap = pmix_regex::generate_ppn_str(&ppn_text(nodes, ppn), Form::Native)
            .map_err(err("proc map"))?;
        let info = vec![
            Info::attr(attr::JOB_SIZE, nprocs),
            Info::attr(attr::UNIV_SIZE, nprocs),
            Info::attr(attr::MAX_PROCS, nprocs),
            Info::attr(attr::NUM_NODES, nodes),
            Info::attr(attr::NODE_MAP, Value::Regex(nmap)),
            Info::attr(attr::PROC_MAP, Value::Regex(pmap)),
        ];
        let ns = Nspace::new(format!("bigjob{nprocs}")).map_err(err("nspace"))?;
        let before = rss_kb();
        let t = Instant::now();
        server
            .register_nspace(&ns, 0, &info)
            .map_err(err("register_nspace"))?;
        result(&format!("register_nspace_{nprocs}_ms"), ms(t.elapsed()));
        let after = rss_kb();
        let t = Instant::now();
        server.deregister_nspace(&ns);
        result(&format!("deregister_nspace_{nprocs}_ms"), ms(t.elapsed()));
        let gone = rss_kb();
        result(
            &format!("register_nspace_{nprocs}_rss_kb"),
            after as f64 - before as f64,
        );
        result(&format!("rss_before_reg_{nprocs}_kb"), before as f64);
        result(&format!("rss_after_dereg_{nprocs}_kb"), gone as f64);
    }
    let _ = server.finalize();
    std::io::stdout()
        .write_all(out.as_bytes())
        .map_err(err("stdout"))
}

// ---- one big job ------------------------------------------------------------------------------

/// `nodes` node names `node00001`, `node00002`, ...
fn big_node_names(nodes: u32) -> Vec<String> {
    (1..=nodes).map(|i| format!("node{i:05}")).collect()
}

fn bigjob_main(args: &[String]) -> Res {
    let mut o = [("nodes", 10_000), ("ppn", 100), ("local", 1), ("native", 0)];
    parse_opts(args, &mut o)?;
    let nodes = u32::try_from(opt(&o, "nodes")).map_err(err("--nodes"))?;
    let ppn = u32::try_from(opt(&o, "ppn")).map_err(err("--ppn"))?;
    let local = opt(&o, "local") != 0;
    let form = if opt(&o, "native") != 0 {
        Form::Native
    } else {
        Form::Raw
    };
    let nprocs = nodes.checked_mul(ppn).ok_or("too many processes")?;
    if nodes == 0 || ppn == 0 {
        return Err("--nodes and --ppn must be at least 1".into());
    }
    let mut out = String::new();
    let mut result = |name: &str, v: f64| out.push_str(&format!("RESULT {name} {v:.3}\n"));

    let names = big_node_names(nodes);
    let here = names[(nodes / 2) as usize].clone();
    let options = ServerOptions {
        hostname: Some(if local {
            here.clone()
        } else {
            "elsewhere".into()
        }),
        ..ServerOptions::default()
    };
    let aborted = Arc::new(AtomicBool::new(false));
    let server = Server::init(
        BenchHost {
            aborted: aborted.clone(),
        },
        options,
    )
    .map_err(err("server init"))?;

    // The maps as pmixrun builds them (`pmixrun/src/plan/job.rs`).
    let ranks: Vec<Vec<u32>> = (0..nodes)
        .map(|n| (n * ppn..(n + 1) * ppn).collect())
        .collect();
    let nmap = pmix_regex::generate_regex_with(&names, form).map_err(err("node map"))?;
    let pmap = pmix_regex::generate_ppn_with(&ranks, form).map_err(err("proc map"))?;
    drop(ranks);
    drop(names);
    result("node_map_bytes", nmap.len() as f64);
    result("proc_map_bytes", pmap.len() as f64);
    let app = DataArray::from_infos([
        Info::attr(attr::APPNUM, 0u32),
        Info::attr(attr::APP_SIZE, nprocs),
        Info::attr(attr::MAX_PROCS, nprocs),
        Info::attr(attr::APPLDR, Rank(0)),
        Info::attr(attr::WDIR, "/tmp"),
        Info::attr(attr::APP_ARGV, "pmix-bench bigclient"),
    ]);
    let info = vec![
        Info::attr(attr::JOB_SIZE, nprocs),
        Info::attr(attr::MAX_PROCS, nprocs),
        Info::attr(attr::UNIV_SIZE, nprocs),
        Info::attr(attr::JOB_NUM_APPS, 1u32),
        Info::attr(attr::NODE_MAP, Value::Regex(nmap)),
        Info::attr(attr::PROC_MAP, Value::Regex(pmap)),
        Info::attr(attr::APP_INFO_ARRAY, app),
    ];
    let ns = Nspace::new("bigjob").map_err(err("nspace"))?;
    let nlocal = if local { ppn } else { 0 };

    let before = rss_kb();
    let t = Instant::now();
    server
        .register_nspace(&ns, nlocal, &info)
        .map_err(err("register_nspace"))?;
    result("register_nspace_ms", ms(t.elapsed()));
    let after = rss_kb();
    result("rss_before_kb", before as f64);
    result("register_nspace_rss_kb", after as f64 - before as f64);
    drop(info);

    if local {
        // One local rank's init: what forces the job data when a job has ranks here.
        let rank = (nodes / 2) * ppn;
        let p = Proc::new(ns.clone(), rank);
        let uid = nix::unistd::getuid().as_raw();
        let gid = nix::unistd::getgid().as_raw();
        server
            .register_client(&p, uid, gid)
            .map_err(err("register_client"))?;
        let env = server.setup_fork(&p).map_err(err("setup_fork"))?;
        let exe = std::env::current_exe().map_err(err("own path"))?;
        let t = Instant::now();
        let child = Command::new(exe)
            .arg("bigclient")
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .output()
            .map_err(err("client"))?;
        result("first_client_total_ms", ms(t.elapsed()));
        if !child.status.success() {
            return Err(format!("the client failed: {}", child.status));
        }
        for line in String::from_utf8_lossy(&child.stdout).lines() {
            if let Some(rest) = line.strip_prefix("RESULT ") {
                out_push(&mut result, rest);
            }
        }
        result("rss_after_first_client_kb", rss_kb() as f64 - before as f64);
        server.deregister_client(&p);
    }

    let t = Instant::now();
    server.deregister_nspace(&ns);
    result("deregister_nspace_ms", ms(t.elapsed()));
    result("rss_kept_after_dereg_kb", rss_kb() as f64 - before as f64);
    let _ = server.finalize();
    std::io::stdout()
        .write_all(out.as_bytes())
        .map_err(err("stdout"))
}

/// Passes on a client's `name value` result as the host's `client_<name>`.
fn out_push(result: &mut impl FnMut(&str, f64), rest: &str) {
    if let Some((name, v)) = rest.split_once(' ') {
        if let Ok(v) = v.parse() {
            result(&format!("client_{name}"), v);
        }
    }
}

/// The local rank of `bigjob`: init (which receives the job data), a job-level get, the
/// hostname of the job's last rank (on another node), finalize.
fn bigclient_main() -> Res {
    let rss0 = rss_kb();
    let t = Instant::now();
    let c = Client::init().map_err(err("init"))?;
    let init = ms(t.elapsed());
    let me = c.proc().clone();
    let wild = Proc::new(me.nspace.clone(), Rank::WILDCARD);
    let n = c
        .get(&wild, attr::JOB_SIZE, &[])
        .map_err(err("get JOB_SIZE"))?
        .as_u32()
        .ok_or("JOB_SIZE is not a uint32")?;
    let last = Proc::new(me.nspace.clone(), n - 1);
    let t = Instant::now();
    let host = c
        .get(&last, attr::HOSTNAME, &[])
        .map_err(err("get HOSTNAME"))?;
    let get = ms(t.elapsed());
    if host.as_str().is_none_or(|h| !h.starts_with("node")) {
        return Err(format!("rank {} has hostname {host:?}", n - 1));
    }
    let rss = rss_kb();
    c.finalize().map_err(err("finalize"))?;
    println!("RESULT init_ms {init:.3}");
    println!("RESULT get_remote_hostname_ms {get:.3}");
    println!("RESULT rss_added_kb {}", rss as f64 - rss0 as f64);
    Ok(())
}
