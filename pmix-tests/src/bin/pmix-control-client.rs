//! The scenarios of `openpmix/pmix_control.c` on pmix-rs's client, with the same output lines:
//! queries, logging, job control and the lifecycle events it brings (`tests/control.rs`).
//!
//! `pmix-control-client query|log|kill|signal|unsupported|cleanup DIR|order|watch|late-watch`: see the C
//! program for the first six; `order` registers handlers placed by the `EVENT_HDLR_*`
//! attributes, raises an event for itself and prints `order rank=R first,pre,plain,after,last`
//! in the order they ran; `watch` spawns two copies of itself (which init and finalize) with
//! `NOTIFY_COMPLETION` and `NOTIFY_PROC_TERMINATION` and prints `watch rank=R ends=2
//! job_end=SUCCESS` once it heard of both ends and of the job's; `late-watch` spawns them with
//! `NOTIFY_COMPLETION` alone, registers for `EVENT_JOB_END` two seconds later and prints
//! `late-watch rank=R job_end=SUCCESS` once it heard of the job's end. A failure prints
//! `FAIL rank=R: <what>` on stderr and exits 2.

use std::process::ExitCode;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use pmix_client::{
    AppExt, Client, DataRange, Info, Key, Nspace, Proc, Rank, Status, Value, app, attr,
};
use pmix_tests::check;
use pmix_tests::scenario::{Res, e};
use pmix_wire::Query;

/// How long rank 0 waits for the event of its peer's end.
const PATIENCE: Duration = Duration::from_secs(20);

fn key(k: &str) -> Result<Key, String> {
    Key::new(k).map_err(e("key"))
}

/// The value of `k` among `info`.
fn value_of<'a>(info: &'a [Info], k: &str) -> Option<&'a Value> {
    info.iter().find(|i| i.key.as_str() == k).map(|i| &i.value)
}

fn query(c: &Client) -> Res {
    let me = c.proc().clone();
    let queries = [
        Query {
            keys: vec![
                key(attr::QUERY_NAMESPACES)?,
                key(attr::QUERY_NAMESPACE_INFO)?,
            ],
            qualifiers: vec![],
        },
        Query {
            keys: vec![key(attr::QUERY_PROC_TABLE)?, key(attr::JOB_SIZE)?],
            qualifiers: vec![Info::attr(attr::NSPACE, me.nspace.as_str())],
        },
    ];
    let results = c.query(&queries).map_err(e("query"))?;
    let find = |k: &str| value_of(&results, k);
    let names = find(attr::QUERY_NAMESPACES)
        .and_then(Value::as_str)
        .ok_or("no namespaces")?;
    let has_own = names.split(',').any(|n| n == me.nspace.as_str());
    let Some(Value::DataArray(table)) = find(attr::QUERY_PROC_TABLE) else {
        return Err(format!("no process table in {results:?}"));
    };
    let host = c.get(&me, attr::HOSTNAME, &[]).map_err(e("get hostname"))?;
    let self_exe = std::fs::canonicalize("/proc/self/exe").map_err(|x| x.to_string())?;
    let own = table.items().iter().find_map(|v| match v {
        Value::ProcInfo(pi) if pi.proc == me => Some(pi),
        _ => None,
    });
    let own_pid = own.is_some_and(|pi| pi.pid == std::process::id());
    let own_exe = own
        .is_some_and(|pi| std::fs::canonicalize(&pi.executable_name).is_ok_and(|p| p == self_exe));
    let own_host = own.is_some_and(|pi| host.as_str() == Some(pi.hostname.as_str()));
    let own_state = own.is_some_and(|pi| pi.state == pmix_types::ProcState::RUNNING);
    // This job's entry of the namespaces' information: its name, a command line naming this
    // program, and its size.
    let program = self_exe
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let nsinfo = find(attr::QUERY_NAMESPACE_INFO)
        .and_then(Value::as_array)
        .into_iter()
        .flat_map(|a| a.infos())
        .filter_map(|job| job.value.as_array())
        .map(|a| a.infos().cloned().collect::<Vec<Info>>())
        .find(|f| value_of(f, attr::NSPACE).and_then(Value::as_str) == Some(me.nspace.as_str()))
        .is_some_and(|f| {
            let cmd = value_of(&f, attr::CMD_LINE).and_then(Value::as_str);
            cmd.is_some_and(|c| c.contains(&program))
                && value_of(&f, attr::JOB_SIZE).and_then(Value::as_u64)
                    == Some(table.items().len() as u64)
        });
    let size = find(attr::JOB_SIZE).and_then(Value::as_u64);
    if size != Some(table.items().len() as u64) {
        return Err(format!(
            "job size {size:?}, table of {}",
            table.items().len()
        ));
    }
    println!(
        "query rank={} has_own_nspace={} ptable={} own_pid={} own_exe={} own_host={} own_state={} \
         nsinfo={}",
        me.rank,
        u8::from(has_own),
        table.items().len(),
        u8::from(own_pid),
        u8::from(own_exe),
        u8::from(own_host),
        u8::from(own_state),
        u8::from(nsinfo)
    );
    Ok(())
}

fn log(c: &Client) -> Res {
    let rank = c.proc().rank;
    let text = format!("log from rank {rank}");
    c.log(&[Info::attr(attr::LOG_STDERR, text)], &[])
        .map_err(e("log"))?;
    println!("log rank={rank} ok");
    Ok(())
}

/// `log-flood N SIZE FIFO`: N non-blocking logs of SIZE bytes each to pmixrun's stderr at
/// once, then "sent" into FIFO (pmixrun's output may be held up behind the logs), then waits
/// for every answer and counts them.
fn log_flood(c: &Client, n: &str, size: &str, fifo: &str) -> Res {
    let n: usize = n.parse().map_err(e("N"))?;
    let size: usize = size.parse().map_err(e("SIZE"))?;
    let (tx, rx) = mpsc::channel();
    let text = "y".repeat(size);
    for _ in 0..n {
        let tx = tx.clone();
        c.log_nb(
            &[Info::attr(attr::LOG_STDERR, text.clone())],
            &[],
            move |r| {
                let _ = tx.send(r.map_err(|e| e.status()));
            },
        );
    }
    std::fs::write(fifo, "sent\n").map_err(e("the FIFO"))?;
    let (mut ok, mut refused, mut other) = (0, 0, 0);
    for _ in 0..n {
        match rx.recv_timeout(std::time::Duration::from_secs(60)) {
            Ok(Ok(())) => ok += 1,
            Ok(Err(s)) if s == Status::ERR_OUT_OF_RESOURCE => refused += 1,
            Ok(Err(_)) => other += 1,
            Err(_) => return Err(format!("answers stopped after {}", ok + refused + other)),
        }
    }
    println!("log-flood ok={ok} refused={refused} other={other}");
    Ok(())
}

fn kill_peer(c: &Client, scenario: &str) -> Res {
    let me = c.proc().clone();
    let all = [Proc::new(me.nspace.clone(), Rank::WILDCARD)];
    if me.rank != Rank(0) {
        // Where only a kill gets us out: rank 0 never enters the second fence.
        c.fence(&all, &[]).map_err(e("fence"))?;
        c.fence(&all, &[]).map_err(e("second fence"))?;
        return Err("the second fence completed".into());
    }
    let (tx, rx) = mpsc::channel();
    let tx = Mutex::new(tx);
    c.register_event_handler(&[Status::EVENT_PROC_TERMINATED], &[], move |ev| {
        let get = |k: &str| value_of(&ev.info, k);
        let affected = get(attr::EVENT_AFFECTED_PROC).and_then(|v| v.as_proc().cloned());
        let code = get(attr::EXIT_CODE).and_then(Value::as_i64);
        if let Ok(tx) = tx.lock() {
            let _ = tx.send((affected, code));
        }
    })
    .map_err(e("register"))?;
    c.fence(&all, &[]).map_err(e("fence"))?;
    let directive = if scenario == "kill" {
        Info::attr(attr::JOB_CTRL_KILL, true)
    } else {
        Info::attr(attr::JOB_CTRL_SIGNAL, 15i32)
    };
    let peer = Proc::new(me.nspace.clone(), 1);
    c.job_control(std::slice::from_ref(&peer), &[directive])
        .map_err(e("job control"))?;
    loop {
        let (affected, code) = rx
            .recv_timeout(PATIENCE)
            .map_err(|_| "no EVENT_PROC_TERMINATED for rank 1 within 20 s")?;
        if affected.as_ref() == Some(&peer) {
            println!("{scenario} rank=0 affected=1 exit={}", code.unwrap_or(-1));
            return Ok(());
        }
    }
}

fn unsupported(c: &Client) -> Res {
    let r = c.job_control(&[], &[Info::attr(attr::JOB_CTRL_PAUSE, true)]);
    let status = match r {
        Ok(()) => "SUCCESS".to_owned(),
        Err(err) if err.status() == Status::ERR_NOT_SUPPORTED => "NOT-SUPPORTED".to_owned(),
        Err(err) => format!("{err}"),
    };
    println!("unsupported rank={} status={status}", c.proc().rank);
    Ok(())
}

fn cleanup(c: &Client, dir: &str) -> Res {
    let rank = c.proc().rank;
    let top = format!("{dir}/rank{rank}");
    let loose = format!("{dir}/file{rank}");
    std::fs::create_dir_all(format!("{top}/sub")).map_err(e("mkdir"))?;
    std::fs::write(format!("{top}/sub/f"), "x").map_err(e("write"))?;
    std::fs::write(&loose, "x").map_err(e("write"))?;
    let directives = [
        Info::attr(attr::REGISTER_CLEANUP_DIR, top),
        Info::attr(attr::CLEANUP_RECURSIVE, true),
        Info::attr(attr::REGISTER_CLEANUP, loose),
    ];
    c.job_control(&[], &directives).map_err(e("job control"))?;
    println!("cleanup rank={rank} registered");
    Ok(())
}

fn order(c: &Client) -> Res {
    const CODE: Status = Status(-12345);
    let seen: Arc<Mutex<Vec<&'static str>>> = Arc::default();
    let (tx, rx) = mpsc::channel::<()>();
    let tx = Mutex::new(tx);
    let yes = |k: &'static str| Info::attr(k, true);
    let regs: [(&'static str, &[Status], Vec<Info>); 5] = [
        (
            "plain",
            &[CODE],
            vec![Info::attr(attr::EVENT_HDLR_NAME, "plain")],
        ),
        ("last", &[], vec![yes(attr::EVENT_HDLR_LAST)]),
        ("first", &[], vec![yes(attr::EVENT_HDLR_FIRST)]),
        ("pre", &[CODE], vec![yes(attr::EVENT_HDLR_PREPEND)]),
        (
            "after",
            &[CODE],
            vec![Info::attr(attr::EVENT_HDLR_AFTER, "plain")],
        ),
    ];
    for (name, codes, info) in regs {
        let seen = Arc::clone(&seen);
        let done = (name == "last")
            .then(|| tx.lock().map(|t| t.clone()).ok())
            .flatten();
        c.register_event_handler(codes, &info, move |_| {
            if let Ok(mut s) = seen.lock() {
                s.push(name);
            }
            if let Some(d) = &done {
                let _ = d.send(());
            }
        })
        .map_err(e("register"))?;
    }
    c.notify_event(CODE, DataRange::PROC_LOCAL, &[])
        .map_err(e("notify"))?;
    rx.recv_timeout(PATIENCE)
        .map_err(|_| "the last handler never ran")?;
    let seen = seen.lock().map_err(|_| "poisoned")?.join(",");
    println!("order rank={} {seen}", c.proc().rank);
    Ok(())
}

/// A lifecycle event as heard: its code, `EVENT_AFFECTED_PROC` and `JOB_TERM_STATUS`.
type Heard = (Status, Option<Proc>, Option<Status>);

/// Registers a handler for the lifecycle events of `codes`: what it hears.
fn lifecycle_events(c: &Client, codes: &[Status]) -> Result<mpsc::Receiver<Heard>, String> {
    let (tx, rx) = mpsc::channel::<Heard>();
    let tx = Mutex::new(tx);
    c.register_event_handler(codes, &[], move |ev| {
        let get = |k: &str| value_of(&ev.info, k);
        let affected = get(attr::EVENT_AFFECTED_PROC).and_then(|v| v.as_proc().cloned());
        let term = match get(attr::JOB_TERM_STATUS) {
            Some(Value::Status(s)) => Some(*s),
            _ => None,
        };
        if let Ok(tx) = tx.lock() {
            let _ = tx.send((ev.code, affected, term));
        }
    })
    .map_err(e("register"))?;
    Ok(rx)
}

fn watch(c: &Client) -> Res {
    let codes = [Status::EVENT_PROC_TERMINATED, Status::EVENT_JOB_END];
    let rx = lifecycle_events(c, &codes)?;
    let me = std::env::current_exe().map_err(e("current_exe"))?;
    let job_info = [
        Info::attr(attr::NOTIFY_COMPLETION, true),
        Info::attr(attr::NOTIFY_PROC_TERMINATION, true),
    ];
    let child = app(me.to_string_lossy(), 2).with_arg("child");
    let nspace: Nspace = c.spawn(&job_info, &[child]).map_err(e("spawn"))?;
    let (mut ends, mut job_end) = (0, None);
    while job_end.is_none() || ends < 2 {
        let (code, affected, term) = rx
            .recv_timeout(PATIENCE)
            .map_err(|_| format!("heard of {ends} ends and job end {job_end:?} only"))?;
        match affected {
            Some(p) if p.nspace == nspace && code == Status::EVENT_PROC_TERMINATED => ends += 1,
            Some(p) if p.nspace == nspace && code == Status::EVENT_JOB_END => {
                job_end = Some(term.and_then(Status::name).unwrap_or("none"));
            }
            other => return Err(format!("an event {code:?} about {other:?}")),
        }
    }
    println!(
        "watch rank={} ends={ends} job_end={}",
        c.proc().rank,
        job_end.unwrap_or_default()
    );
    Ok(())
}

/// A job's end heard by a handler registered after it: spawns two children with
/// `NOTIFY_COMPLETION` and no handler, waits until the server lists their namespace no more
/// (their job ended and was let go), then registers for `EVENT_JOB_END`.
fn late_watch(c: &Client) -> Res {
    let me = std::env::current_exe().map_err(e("current_exe"))?;
    let job_info = [Info::attr(attr::NOTIFY_COMPLETION, true)];
    let child = app(me.to_string_lossy(), 2).with_arg("child");
    let nspace: Nspace = c.spawn(&job_info, &[child]).map_err(e("spawn"))?;
    wait_gone(c, &nspace)?;
    let rx = lifecycle_events(c, &[Status::EVENT_JOB_END])?;
    let (_, affected, term) = rx.recv_timeout(PATIENCE).map_err(|_| "no job end heard")?;
    check!(
        affected.as_ref().is_some_and(|p| p.nspace == nspace),
        "a job end about {affected:?}"
    );
    println!(
        "late-watch rank={} job_end={}",
        c.proc().rank,
        term.and_then(Status::name).unwrap_or("none")
    );
    Ok(())
}

/// Waits (within [`PATIENCE`]) until the server lists `nspace` no more.
fn wait_gone(c: &Client, nspace: &Nspace) -> Res {
    let end = std::time::Instant::now() + PATIENCE;
    let query = [Query {
        keys: vec![key(attr::QUERY_NAMESPACES)?],
        qualifiers: vec![],
    }];
    loop {
        let results = c.query(&query).map_err(e("query namespaces"))?;
        let listed = value_of(&results, attr::QUERY_NAMESPACES)
            .and_then(Value::as_str)
            .is_some_and(|names| names.split(',').any(|n| n == nspace.as_str()));
        if !listed {
            return Ok(());
        }
        if std::time::Instant::now() > end {
            return Err(format!("{nspace} was still listed after {PATIENCE:?}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn run(args: &[String]) -> Res {
    let c = Client::init().map_err(e("init"))?;
    match args.first().map(String::as_str) {
        Some("query") => query(&c)?,
        Some("log") => log(&c)?,
        Some("log-flood") => log_flood(
            &c,
            args.get(1).map_or("", String::as_str),
            args.get(2).map_or("", String::as_str),
            args.get(3).map_or("", String::as_str),
        )?,
        Some(s @ ("kill" | "signal")) => kill_peer(&c, s)?,
        Some("unsupported") => unsupported(&c)?,
        Some("cleanup") => cleanup(&c, args.get(1).ok_or("cleanup needs a directory")?)?,
        Some("order") => order(&c)?,
        Some("watch") => watch(&c)?,
        Some("late-watch") => late_watch(&c)?,
        // A spawned copy: only there to start and end.
        Some("child") => {}
        other => return Err(format!("unknown scenario {other:?}")),
    }
    c.finalize().map_err(e("finalize"))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(what) => {
            let rank = std::env::var("PMIX_RANK").unwrap_or_else(|_| "-1".into());
            eprintln!("FAIL rank={rank}: {what}");
            ExitCode::from(2)
        }
    }
}
