//! What a hostile or broken peer can cost the server (`docs/SECURITY.md`, "Limits"): each test
//! plays the peer over a real socket to a real server and measures what the server holds or
//! does. The server runs in this test process, so its memory is this process's; the peers
//! are raw sockets, speaking each protocol byte by byte.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use pmix_server::types::{Key, Proc, Rank, Scope, Status, Value};
use pmix_server::{Completion, Host, Limits, NoHost, PmiTransport, ServerOptions};
use pmix_tests::{TestHost, native_hello, native_socket};
use pmix_wire::{ClientMsg, Kv, Request, ServerMsg, Welcome, decode_body, encode_frame};

/// The tests measure this process's memory: one at a time, so that none counts another's.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// This process's resident memory, in bytes.
fn rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kib * 1024
}

/// A connection to the server's native socket, not yet greeted.
fn connect(host: &TestHost, proc: &Proc) -> UnixStream {
    let env = host.server.setup_fork(proc).expect("setup_fork");
    let s = UnixStream::connect(native_socket(&env)).expect("connect to the server");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// A connection of `proc` that has sent its hello (and not read the answer).
fn say_hello(host: &TestHost, proc: &Proc) -> UnixStream {
    let env = host.server.setup_fork(proc).expect("setup_fork");
    let mut s = connect(host, proc);
    s.write_all(&native_hello(proc, &env)).unwrap();
    s
}

/// A native client of `proc`, greeted and welcomed: what a pmix-rs client does at init.
fn greeted(host: &TestHost, proc: &Proc) -> UnixStream {
    let mut s = say_hello(host, proc);
    match next_frame::<Welcome>(&mut s) {
        Welcome::Accepted { .. } => s,
        refused => panic!("{proc} refused: {refused:?}"),
    }
}

/// The next frame from the server, read exactly (a frame's bytes and no more, so that the
/// next call finds the next frame).
fn next_frame<T: serde::de::DeserializeOwned>(s: &mut UnixStream) -> T {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)
        .expect("the server answered within the deadline");
    let mut body = vec![0; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body)
        .expect("the server sent the whole frame");
    decode_body(&body).unwrap()
}

fn send(s: &mut UnixStream, id: u32, req: Request) {
    let mut out = Vec::new();
    encode_frame(&ClientMsg { id, req }, &mut out).unwrap();
    s.write_all(&out).unwrap();
}

/// True when the server closed `s` within `deadline` (what it had sent before is skipped).
fn closed_by_server(s: &mut UnixStream, deadline: Duration) -> bool {
    s.set_read_timeout(Some(deadline)).unwrap();
    let mut buf = vec![0; 64 << 10];
    let end = Instant::now() + deadline;
    while Instant::now() < end {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
            Err(_) => return false,
        }
    }
    false
}

#[test]
fn an_announced_frame_costs_only_the_bytes_that_arrive() {
    let _serial = one_at_a_time();
    let host = TestHost::start(NoHost);
    let ns = host.job("announce", 5);
    let rank = |r| Proc::new(ns.clone(), Rank(r));
    let before = rss();
    // The largest frame announced, one byte of it sent: before any hello...
    let mut strangers: Vec<UnixStream> = (0..4).map(|_| connect(&host, &rank(0))).collect();
    for s in &mut strangers {
        // The server may hang up as soon as it reads the length.
        let _ = s.write_all(&(256u32 << 20).to_be_bytes());
        let _ = s.write_all(&[0]);
    }
    // ...and after one.
    let mut clients: Vec<UnixStream> = (0..4).map(|r| greeted(&host, &rank(r))).collect();
    for c in &mut clients {
        c.write_all(&(256u32 << 20).to_be_bytes()).unwrap();
        c.write_all(&[0]).unwrap();
    }
    // A round trip after the bytes were sent: the server has read them by its answer.
    let _sync = greeted(&host, &rank(4));
    let grown = rss().saturating_sub(before);
    assert!(
        grown < 64 << 20,
        "eight peers announcing 256 MiB and sending one byte each grew the server by {} MiB",
        grown >> 20
    );
    // A peer that has not said who it is may not announce more than a hello.
    for (i, s) in strangers.iter_mut().enumerate() {
        assert!(
            closed_by_server(s, Duration::from_secs(10)),
            "stranger {i}: a frame too large for a hello was not refused"
        );
    }
}

#[test]
fn a_client_that_reads_no_answers_is_held_back_then_closed() {
    let _serial = one_at_a_time();
    let options = ServerOptions {
        limits: Limits {
            stall_timeout: Duration::from_secs(2),
            ..Limits::default()
        },
        ..ServerOptions::default()
    };
    let host = TestHost::start_with(NoHost, options);
    let ns = host.job("noreader", 2);
    let me = Proc::new(ns.clone(), Rank(0));
    let mut c = greeted(&host, &me);
    let key = Key::new("big").unwrap();
    let kvs = vec![Kv {
        scope: Scope::GLOBAL,
        key: key.clone(),
        value: Value::ByteObject(vec![7; 1 << 20]),
    }];
    send(&mut c, 1, Request::Commit { kvs });
    match next_frame::<ServerMsg>(&mut c) {
        ServerMsg::Reply { reply, .. } => assert_eq!(reply.status, Status::SUCCESS),
        other => panic!("commit answered with {other:?}"),
    }
    let before = rss();
    // 300 gets of the 1 MiB value, whose answers are never read.
    let mut batch = Vec::new();
    for id in 2..302 {
        let req = Request::Get {
            proc: me.clone(),
            key: Some(key.clone()),
            info: vec![],
        };
        encode_frame(&ClientMsg { id, req }, &mut batch).unwrap();
    }
    c.write_all(&batch).unwrap();
    let _sync = greeted(&host, &Proc::new(ns.clone(), Rank(1)));
    let grown = rss().saturating_sub(before);
    assert!(
        grown < 96 << 20,
        "300 unread answers of 1 MiB grew the server by {} MiB",
        grown >> 20
    );
    // It reads nothing for longer than the stall limit: the server lets it go (a hang-up is
    // reported whatever the events asked for).
    let mut fds = [nix::poll::PollFd::new(
        std::os::fd::AsFd::as_fd(&c),
        nix::poll::PollFlags::empty(),
    )];
    let n = nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(20_000u16)).unwrap();
    let hung_up = fds[0]
        .revents()
        .is_some_and(|r| r.contains(nix::poll::PollFlags::POLLHUP));
    assert!(
        n == 1 && hung_up,
        "a client that read none of its answers for 20 s was not closed"
    );
}

#[test]
fn connections_that_never_say_who_they_are_are_bounded_and_timed_out() {
    let _serial = one_at_a_time();
    let options = ServerOptions {
        limits: Limits {
            handshake_timeout: Duration::from_secs(1),
            unauthenticated_per_uid: 2,
            ..Limits::default()
        },
        ..ServerOptions::default()
    };
    let host = TestHost::start_with(NoHost, options);
    let ns = host.job("silent", 1);
    let me = Proc::new(ns.clone(), Rank(0));
    let mut silent: Vec<UnixStream> = (0..2).map(|_| connect(&host, &me)).collect();
    // Over the bound: closed at once (well before the handshake timeout).
    let mut third = connect(&host, &me);
    assert!(
        closed_by_server(&mut third, Duration::from_millis(900)),
        "a third silent connection of the same uid was accepted"
    );
    for (i, s) in silent.iter_mut().enumerate() {
        assert!(
            closed_by_server(s, Duration::from_secs(10)),
            "silent connection {i} was still open 10 s after a 1 s handshake limit"
        );
    }
    // The real client still gets in.
    let _c = greeted(&host, &me);
}

#[test]
fn pmi1_input_stays_bounded_while_a_request_waits() {
    let _serial = one_at_a_time();
    let host = TestHost::start(NoHost);
    let ns = host.job("pmiflood", 2);
    let fork = host
        .server
        .setup_fork_pmi1(&Proc::new(ns.clone(), Rank(0)), PmiTransport::Fd)
        .expect("setup_fork_pmi1");
    let mut s = UnixStream::from(fork.fd.expect("a PMI-1 socket"));
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(b"cmd=init pmi_version=1 pmi_subversion=1\n")
        .unwrap();
    let mut line = [0u8; 256];
    let n = s.read(&mut line).unwrap();
    assert!(
        line[..n].starts_with(b"cmd=response_to_init rc=0"),
        "{:?}",
        String::from_utf8_lossy(&line[..n])
    );
    // A barrier that waits for rank 1, which never comes; then a flood.
    s.write_all(b"cmd=barrier_in\n").unwrap();
    s.set_nonblocking(true).unwrap();
    let chunk = vec![b'x'; 1 << 20];
    let mut accepted = 0usize;
    let cap = 256usize << 20;
    let end = Instant::now() + Duration::from_secs(30);
    while accepted < cap && Instant::now() < end {
        match s.write(&chunk) {
            Ok(n) => accepted += n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                // Full for now; a server still reading makes room within a second.
                let mut fds = [nix::poll::PollFd::new(
                    std::os::fd::AsFd::as_fd(&s),
                    nix::poll::PollFlags::POLLOUT,
                )];
                if nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(1000u16)).unwrap() == 0 {
                    break;
                }
            }
            Err(e) => panic!("writing the flood: {e}"),
        }
    }
    assert!(
        accepted < 16 << 20,
        "the server took {} MiB of one PMI-1 connection's input while its barrier waited",
        accepted >> 20
    );
}

/// A host that holds every handshake for the test to answer.
struct Gatekeeper(crossbeam_channel::Sender<(Proc, Completion<()>)>);

impl Host for Gatekeeper {
    fn client_connected(&mut self, proc: &Proc, done: Completion<()>) {
        let _ = self.0.send((proc.clone(), done));
    }
}

#[test]
fn a_late_answer_for_a_connection_gone_never_reaches_the_next_one() {
    let _serial = one_at_a_time();
    let (tx, rx) = crossbeam_channel::unbounded();
    let host = TestHost::start(Gatekeeper(tx));
    let ns = host.job("late", 2);
    let wait = |what: &str| {
        rx.recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|_| panic!("the host was not asked about {what}"))
    };
    // Rank 0 says hello and leaves before the host has answered.
    let first = say_hello(&host, &Proc::new(ns.clone(), Rank(0)));
    let (_, first_done) = wait("rank 0");
    drop(first);
    // A call through the loop: by its answer the loop has seen rank 0 leave.
    host.server
        .setup_fork(&Proc::new(ns.clone(), Rank(1)))
        .unwrap();
    // Rank 1 comes in (into the slot rank 0 had), and the host refuses rank 0, late.
    let mut second = say_hello(&host, &Proc::new(ns.clone(), Rank(1)));
    let (who, second_done) = wait("rank 1");
    assert_eq!(who.rank, Rank(1));
    first_done.complete(Err(Status::ERR_NO_PERMISSIONS));
    second_done.complete(Ok(()));
    match next_frame::<Welcome>(&mut second) {
        Welcome::Accepted { .. } => {}
        refused => panic!("rank 1 got the answer meant for rank 0: {refused:?}"),
    }
}

#[test]
fn requests_sent_before_the_welcome_are_served_after_it() {
    let _serial = one_at_a_time();
    let (tx, rx) = crossbeam_channel::unbounded();
    let host = TestHost::start(Gatekeeper(tx));
    let ns = host.job("eager", 1);
    let me = Proc::new(ns.clone(), Rank(0));
    // The hello and a commit in one write, before any answer.
    let mut c = say_hello(&host, &me);
    let kvs = vec![Kv {
        scope: Scope::GLOBAL,
        key: Key::new("early").unwrap(),
        value: Value::Uint32(7),
    }];
    send(&mut c, 1, Request::Commit { kvs });
    // The host takes its time; only then is the client in.
    let (_, done) = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the host was asked about the client");
    done.complete(Ok(()));
    match next_frame::<Welcome>(&mut c) {
        Welcome::Accepted { .. } => {}
        refused => panic!("refused: {refused:?}"),
    }
    match next_frame::<ServerMsg>(&mut c) {
        ServerMsg::Reply { id: 1, reply } => assert_eq!(
            reply.status,
            Status::SUCCESS,
            "a request sent ahead of the welcome must be served, not refused for want of init"
        ),
        other => panic!("expected the commit's answer, got {other:?}"),
    }
}
