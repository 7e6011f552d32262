//! The standalone name server over a real Unix socket, with two launcher sessions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::time::Duration;

use crossbeam_channel::{Receiver, bounded};
use pmix_server::types::{DataRange, Info, Key, Nspace, Persistence, Proc, Status, attr};
use pmix_server::{NameServer, NameServerClient};
use pmix_wire::Published;

const DEADLINE: Duration = Duration::from_secs(10);

/// A directory of the test's own, removed with everything in it when dropped: also when the
/// test fails part way.
struct TestDir(PathBuf);

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A socket path in a fresh directory, which goes when the returned guard does.
fn socket_path(tag: &str) -> (TestDir, PathBuf) {
    let dir = std::env::temp_dir().join(format!("pmixrs-ns-test-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ns.sock");
    (TestDir(dir), path)
}

fn proc(ns: &str, rank: u32) -> Proc {
    Proc::new(Nspace::new(ns).unwrap(), rank)
}

fn me() -> (u32, u32) {
    (
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    )
}

/// Directives as the server adds them: the caller's credentials, plus `extra`.
fn creds(extra: &[Info]) -> Vec<Info> {
    let (uid, gid) = me();
    let mut v = extra.to_vec();
    v.push(Info::attr(attr::USERID, uid));
    v.push(Info::attr(attr::GRPID, gid));
    v
}

fn recv<T>(rx: &Receiver<T>, what: &str) -> T {
    rx.recv_timeout(DEADLINE)
        .unwrap_or_else(|_| panic!("no answer to {what} within {DEADLINE:?}"))
}

fn publish(c: &NameServerClient, p: &Proc, k: &str, v: &str, info: &[Info]) -> Result<(), Status> {
    let (tx, rx) = bounded(1);
    let data = [Info::new(Key::new(k).unwrap(), v)];
    c.publish(p, &data, &creds(info), move |r| {
        let _ = tx.send(r);
    });
    recv(&rx, "publish")
}

fn lookup_rx(
    c: &NameServerClient,
    p: &Proc,
    keys: &[&str],
    info: &[Info],
) -> Receiver<Result<Vec<Published>, Status>> {
    let (tx, rx) = bounded(1);
    let keys: Vec<Key> = keys.iter().map(|k| Key::new(*k).unwrap()).collect();
    c.lookup(p, &keys, &creds(info), move |r| {
        let _ = tx.send(r);
    });
    rx
}

fn lookup(
    c: &NameServerClient,
    p: &Proc,
    keys: &[&str],
    info: &[Info],
) -> Result<Vec<Published>, Status> {
    recv(&lookup_rx(c, p, keys, info), "lookup")
}

fn global() -> Info {
    Info::attr(attr::RANGE, DataRange::GLOBAL)
}

#[test]
fn two_sessions_share_global_names_and_sessions_end_cleanly() {
    let (_dir, path) = socket_path("share");
    let server = NameServer::start(&path, 0o600).unwrap();
    let a = NameServerClient::connect(server.uri(), "node-a").unwrap();
    let b = NameServerClient::connect(server.uri(), "node-b").unwrap();
    let pa = proc("job-a", 0);
    let pb = proc("job-b", 0);
    a.nspace_started(&pa.nspace);
    b.nspace_started(&pb.nspace);

    // A lookup in session b waits for a publish in session a.
    let waiting = lookup_rx(&b, &pb, &["svc"], &[global(), Info::attr(attr::WAIT, 0i32)]);
    publish(&a, &pa, "svc", "port-a", &[global()]).unwrap();
    let found = recv(&waiting, "the waiting lookup").unwrap();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].proc, pa);

    // Session-range data stays in its session; the same key is then free elsewhere.
    publish(&a, &pa, "local", "a", &[]).unwrap();
    assert_eq!(
        lookup(&b, &pb, &["local"], &[global()]).unwrap_err(),
        Status::ERR_NOT_FOUND
    );
    publish(&b, &pb, "local", "b", &[]).unwrap();
    // But GLOBAL names clash across sessions.
    assert_eq!(
        publish(&b, &pb, "svc", "port-b", &[global()]),
        Err(Status::ERR_DUPLICATE_KEY)
    );

    // Indefinite data outlives its session; the rest goes with it.
    let indef = [global(), Info::attr(attr::PERSISTENCE, Persistence::INDEF)];
    publish(&a, &pa, "forever", "x", &indef).unwrap();
    drop(a);
    let c = NameServerClient::connect(server.uri(), "node-c").unwrap();
    let pc = proc("job-c", 0);
    // The end of session a is processed before c's requests (one loop, in order) once a's
    // close was seen; wait for it by polling the observable state with a deadline.
    let start = std::time::Instant::now();
    loop {
        let r = lookup(&c, &pc, &["svc", "forever"], &[global()]).unwrap();
        let keys: Vec<_> = r.iter().map(|p| p.key.as_str().to_owned()).collect();
        if keys == ["forever"] {
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "session a's data never went: {keys:?}"
        );
        std::thread::yield_now();
    }
    server.stop();
    assert!(!path.exists(), "the socket is removed");
}

#[test]
fn a_launcher_cannot_speak_for_another_user_and_timeouts_fire() {
    let (_dir, path) = socket_path("uid");
    let server = NameServer::start(&path, 0o600).unwrap();
    let a = NameServerClient::connect(server.uri(), "node-a").unwrap();
    let p = proc("job", 0);
    let (uid, gid) = me();
    if uid != 0 {
        let (tx, rx) = bounded(1);
        let forged = [
            Info::attr(attr::USERID, uid + 1),
            Info::attr(attr::GRPID, gid),
        ];
        a.publish(&p, &[Info::attr("k", "v")], &forged, move |r| {
            let _ = tx.send(r);
        });
        assert_eq!(recv(&rx, "forged publish"), Err(Status::ERR_NO_PERMISSIONS));
    }
    let waiting = lookup_rx(
        &a,
        &p,
        &["never"],
        &[
            Info::attr(attr::WAIT, 0i32),
            Info::attr(attr::TIMEOUT, 1i32),
        ],
    );
    assert_eq!(
        recv(&waiting, "a lookup with TIMEOUT"),
        Err(Status::ERR_TIMEOUT)
    );
    // When the server goes away, requests fail instead of hanging.
    let pending = lookup_rx(&a, &p, &["never"], &[Info::attr(attr::WAIT, 0i32)]);
    server.stop();
    assert_eq!(
        recv(&pending, "a lookup when the server stops"),
        Err(Status::ERR_UNREACH)
    );
    assert_eq!(publish(&a, &p, "k", "v", &[]), Err(Status::ERR_UNREACH));
}

#[test]
fn garbage_on_the_socket_does_not_hurt_other_sessions() {
    use std::io::{Read, Write};
    let (_dir, path) = socket_path("garbage");
    let server = NameServer::start(&path, 0o600).unwrap();
    let good = NameServerClient::connect(server.uri(), "n").unwrap();
    let mut bad = std::os::unix::net::UnixStream::connect(&path).unwrap();
    bad.set_read_timeout(Some(DEADLINE)).unwrap();
    // A frame whose body is not a hello: refused, and closed.
    bad.write_all(&[0, 0, 0, 3, 0xc1, 0xc1, 0xc1]).unwrap();
    let mut rest = Vec::new();
    let _ = bad.read_to_end(&mut rest);
    assert!(!rest.is_empty(), "a refusal is sent before closing");
    // An absurd frame length: closed.
    let mut bad2 = std::os::unix::net::UnixStream::connect(&path).unwrap();
    bad2.set_read_timeout(Some(DEADLINE)).unwrap();
    bad2.write_all(&[0xff, 0xff, 0xff, 0xff]).unwrap();
    let mut rest = Vec::new();
    assert!(bad2.read_to_end(&mut rest).is_ok());
    assert!(
        NameServerClient::connect("unix:/nonexistent/ns.sock", "n").is_err(),
        "a missing server is a clear error"
    );
    let p = proc("job", 0);
    publish(&good, &p, "k", "v", &[]).unwrap();
    assert_eq!(lookup(&good, &p, &["k"], &[]).unwrap().len(), 1);
}

/// Tells the server `ns` is `c`'s and waits until it took that in: a lookup sent after it on
/// the same connection is answered after it was handled (requests of other connections may
/// otherwise overtake it).
fn started(c: &NameServerClient, ns: &str) {
    c.nspace_started(&Nspace::new(ns).unwrap());
    let _ = lookup(c, &proc(ns, 0), &["nothing"], &[]);
}

fn all(ns: &str) -> Proc {
    Proc::new(Nspace::new(ns).unwrap(), pmix_server::types::Rank::WILDCARD)
}

fn connect_rx(
    c: &NameServerClient,
    procs: &[Proc],
    info: &[Info],
    data: &[u8],
) -> Receiver<Result<Vec<u8>, Status>> {
    let (tx, rx) = bounded(1);
    c.connect_procs(procs, info, data.to_vec(), move |r| {
        let _ = tx.send(r);
    });
    rx
}

#[test]
fn runs_connect_fence_and_disconnect_through_the_name_server() {
    let (_dir, path) = socket_path("xconnect");
    let server = NameServer::start_one_session(&path, 0o600).unwrap();
    let a = NameServerClient::connect(server.uri(), "node-a").unwrap();
    let b = NameServerClient::connect(server.uri(), "node-b").unwrap();
    started(&a, "job-a");
    started(&b, "job-b");
    let procs = [all("job-a"), all("job-b")];

    // b's part waits for a's; both get both parts, a's (the first session) first.
    let from_b = connect_rx(&b, &procs, &[], b"part-b");
    assert!(
        from_b.recv_timeout(Duration::from_millis(200)).is_err(),
        "answered before a's part came"
    );
    let from_a = connect_rx(&a, &procs, &[], b"part-a");
    assert_eq!(recv(&from_a, "a's connect").unwrap(), b"part-apart-b");
    assert_eq!(recv(&from_b, "b's connect").unwrap(), b"part-apart-b");

    // A fence over both runs gathers the same way.
    let (ta, ra) = bounded(1);
    a.fence_procs(&procs, &[], b"fa".to_vec(), move |r| {
        let _ = ta.send(r);
    });
    let (tb, rb) = bounded(1);
    b.fence_procs(&procs, &[], b"fb".to_vec(), move |r| {
        let _ = tb.send(r);
    });
    assert_eq!(recv(&ra, "a's fence").unwrap(), b"fafb");
    assert_eq!(recv(&rb, "b's fence").unwrap(), b"fafb");

    // And a disconnect.
    let (ta, ra) = bounded(1);
    a.disconnect_procs(&procs, &[], move |r| {
        let _ = ta.send(r);
    });
    let (tb, rb) = bounded(1);
    b.disconnect_procs(&procs, &[], move |r| {
        let _ = tb.send(r);
    });
    assert_eq!(recv(&ra, "a's disconnect"), Ok(()));
    assert_eq!(recv(&rb, "b's disconnect"), Ok(()));

    // A namespace no run attached owns: refused at once.
    let r = connect_rx(&a, &[all("job-a"), all("job-nobody")], &[], b"");
    assert_eq!(recv(&r, "a connect to nobody"), Err(Status::ERR_NOT_FOUND));
    // A run cannot take part where it owns no namespace.
    let r = connect_rx(&a, &[all("job-b")], &[], b"");
    assert_eq!(recv(&r, "a connect for b"), Err(Status::ERR_NO_PERMISSIONS));
    server.stop();
}

#[test]
fn a_connect_fails_when_the_other_run_leaves_or_never_comes() {
    let (_dir, path) = socket_path("xconnect-fail");
    let server = NameServer::start_one_session(&path, 0o600).unwrap();
    let a = NameServerClient::connect(server.uri(), "node-a").unwrap();
    let b = NameServerClient::connect(server.uri(), "node-b").unwrap();
    started(&a, "job-a");
    started(&b, "job-b");
    let procs = [all("job-a"), all("job-b")];

    // The run owning b disconnects from the name server mid-connect.
    let waiting = connect_rx(&a, &procs, &[], b"part-a");
    assert!(
        waiting.recv_timeout(Duration::from_millis(200)).is_err(),
        "answered before b left"
    );
    drop(b);
    assert_eq!(recv(&waiting, "a's connect"), Err(Status::ERR_UNREACH));

    // A run that never comes: PMIX_TIMEOUT.
    let c = NameServerClient::connect(server.uri(), "node-c").unwrap();
    started(&c, "job-c");
    let timeout = [Info::attr(attr::TIMEOUT, 1u32)];
    let waiting = connect_rx(&a, &[all("job-a"), all("job-c")], &timeout, b"part-a");
    assert_eq!(
        recv(&waiting, "a's timed connect"),
        Err(Status::ERR_TIMEOUT)
    );
    server.stop();
}

/// The name server's memory, as the kernel counts it (this test process hosts it).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// A peer that sends lookups of a large value and reads none of the answers: the name server
/// stops taking its requests once some 16 MiB of answers wait for it (before, it answered all
/// 150, 1.2 GB), serves everyone else meanwhile, and every answer still comes once the peer
/// reads.
#[test]
fn a_peer_that_does_not_read_its_answers_costs_a_bounded_amount() {
    use pmix_wire::{
        FrameDecoder, FrameReader, NS_MAGIC, NS_PROTOCOL_VERSION, NsCaller, NsHello, NsMsg,
        NsRequest, encode_frame,
    };
    use std::io::{Read, Write};
    const LOOKUPS: u32 = 150;
    let (_dir, path) = socket_path("slow");
    let server = NameServer::start(&path, 0o600).unwrap();
    let a = NameServerClient::connect(server.uri(), "node-a").unwrap();
    let pa = proc("job-a", 0);
    a.nspace_started(&pa.nspace);
    let big = "x".repeat(8 << 20);
    publish(&a, &pa, "big", &big, &[global()]).unwrap();
    let before = rss_bytes();

    let mut raw = std::os::unix::net::UnixStream::connect(&path).unwrap();
    let (uid, gid) = me();
    let mut out = Vec::new();
    let hello = NsHello {
        magic: NS_MAGIC.into(),
        version: NS_PROTOCOL_VERSION,
        host: "node-b".into(),
    };
    encode_frame(&hello, &mut out).unwrap();
    for id in 0..LOOKUPS {
        let req = NsRequest::Lookup {
            caller: NsCaller {
                proc: proc("job-b", 0),
                uid,
                gid,
            },
            keys: vec![Key::new("big").unwrap()],
            info: vec![global()],
        };
        encode_frame(&NsMsg { id, req }, &mut out).unwrap();
    }
    raw.write_all(&out).unwrap();
    // Everyone else is served meanwhile (this also lets the server take what it will of b's).
    let pc = proc("job-c", 0);
    let c = NameServerClient::connect(server.uri(), "node-c").unwrap();
    for _ in 0..3 {
        assert_eq!(lookup(&c, &pc, &["big"], &[global()]).unwrap().len(), 1);
    }
    let grown = rss_bytes().saturating_sub(before);
    assert!(
        grown < 200 << 20,
        "the name server holds {} MiB of answers for a peer that reads none",
        grown >> 20
    );
    // Reading them all: every answer comes.
    raw.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut reader = FrameReader::new(FrameDecoder::new(64 << 20));
    let mut answers = 0;
    let mut buf = vec![0u8; 1 << 20];
    while answers < LOOKUPS + 1 {
        while let Some(_body) = reader.next_frame().unwrap() {
            answers += 1;
        }
        if answers > LOOKUPS {
            break;
        }
        let n = raw.read(&mut buf).expect("the answers keep coming");
        assert!(n > 0, "closed after {answers} answers");
        reader.extend(&buf[..n]);
    }
    // The welcome and one answer per lookup.
    assert_eq!(answers, LOOKUPS + 1);
    server.stop();
}
