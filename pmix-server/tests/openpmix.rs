//! The OpenPMIx front-end over real sockets, with `pmix_wire::openpmix` playing the libpmix
//! client: a job whose two ranks exchange data, and peers that misbehave (garbage, lies about
//! who they are, oversized messages, unknown commands, unreadable payloads) while a good
//! client keeps being served. (Real libpmix, python3-pmix and Open MPI programs under pmixrun
//! are tested in pmix-tests.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use pmix_server::types::{Info, Key, Nspace, Proc, Rank, Scope, Status, Value, attr};
use pmix_server::{NoHost, Server, ServerOptions};
use pmix_wire::openpmix::{
    BufferType, ClientHandshake, Cmd, Codec, CommitPart, Dialect, HEADER_LEN, Header, Kval, Reply,
    Request, ServerReply, encode_message, native_credential,
};

const DEADLINE: Duration = Duration::from_secs(10);

fn ids() -> (u32, u32) {
    (
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    )
}

fn server_with_job(name: &str, size: u32) -> (Server, Nspace) {
    let server = Server::init(NoHost, ServerOptions::default()).unwrap();
    let ns = Nspace::new(name).unwrap();
    server
        .register_nspace(&ns, size, &[Info::attr(attr::JOB_SIZE, size)])
        .unwrap();
    let (uid, gid) = ids();
    for r in 0..size {
        server
            .register_client(&Proc::new(ns.clone(), r), uid, gid)
            .unwrap();
    }
    (server, ns)
}

/// A namespace none of whose processes run on this node (a spawned job placed on other
/// nodes, every job at a multi-node run's root) costs this server no files: no directory of
/// its own, no ds21 lock segment; one with local processes gets both.
#[test]
fn only_namespaces_with_local_processes_get_files() {
    let (server, ns) = server_with_job("files-here", 1);
    let env = server.setup_fork(&Proc::new(ns.clone(), 0)).unwrap();
    let var = |name: &str| {
        env.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| std::path::PathBuf::from(v))
            .unwrap_or_else(|| panic!("{name} in the environment"))
    };
    let store = var("PMIX_DSTORE_21_BASE_PATH");
    // PMIX_NSDIR: the session directory (`session` beside the server's socket) joined with
    // the namespace.
    let session = server.socket_path().with_file_name("session");
    let nsdir = session.join(ns.as_str());
    assert!(store.join(format!("smlockseg-{ns}")).is_file());
    assert!(nsdir.is_dir(), "{}", nsdir.display());
    let elsewhere = Nspace::new("files-elsewhere").unwrap();
    server
        .register_nspace(&elsewhere, 0, &[Info::attr(attr::JOB_SIZE, 4u32)])
        .unwrap();
    assert!(!store.join(format!("smlockseg-{elsewhere}")).exists());
    let sibling = nsdir.with_file_name(elsewhere.as_str());
    assert!(!sibling.exists(), "{}", sibling.display());
    server.deregister_nspace(&elsewhere);
}

/// The `host:port` libpmix clients of `server` are told to reach.
fn address(server: &Server, ns: &Nspace) -> String {
    let env = server.setup_fork(&Proc::new(ns.clone(), 0)).unwrap();
    let uri = env
        .iter()
        .find(|(k, _)| k == "PMIX_SERVER_URI41")
        .map(|(_, v)| v.clone())
        .expect("PMIX_SERVER_URI41 in the environment");
    for (k, v) in [
        ("PMIX_GDS_MODULE", "ds21,hash"),
        ("PMIX_SECURITY_MODE", "native"),
        ("SM_USE_LINEAR_SEARCH", "0"),
    ] {
        assert!(env.iter().any(|(a, b)| a == k && b == v), "{k}={v} missing");
    }
    let store = env
        .iter()
        .find(|(k, _)| k == "PMIX_DSTORE_21_BASE_PATH")
        .map(|(_, v)| std::path::PathBuf::from(v))
        .expect("PMIX_DSTORE_21_BASE_PATH in the environment");
    assert!(
        store.join("initial-pmix_shared-segment-0").is_file(),
        "no ds21 namespace map in {}",
        store.display()
    );
    uri.rsplit_once("tcp4://").expect("a tcp4 URI").1.to_owned()
}

/// A libpmix-like client over TCP.
struct Peer {
    s: TcpStream,
    next_tag: u32,
}

impl Peer {
    fn connect(addr: &str) -> Peer {
        let s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(DEADLINE)).unwrap();
        Peer { s, next_tag: 101 }
    }

    fn hello_with(addr: &str, proc: Proc, uid: u32, gid: u32) -> (Peer, Option<ServerReply>) {
        Peer::hello_gds(addr, proc, uid, gid, Dialect::V41, "hash")
    }

    fn hello_gds(
        addr: &str,
        proc: Proc,
        uid: u32,
        gid: u32,
        dialect: Dialect,
        gds: &str,
    ) -> (Peer, Option<ServerReply>) {
        let mut p = Peer::connect(addr);
        let hs = ClientHandshake::simple_client(
            proc,
            native_credential(uid, gid).to_vec(),
            dialect,
            gds,
        );
        let mut out = Vec::new();
        hs.encode(&mut out).unwrap();
        p.s.write_all(&out).unwrap();
        let mut b = [0u8; 8];
        let answer = match p.s.read_exact(&mut b) {
            Ok(()) => ServerReply::decode(&b).unwrap().map(|(r, _)| r),
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => None,
            Err(e) => panic!("no handshake answer within {DEADLINE:?}: {e}"),
        };
        (p, answer)
    }

    fn hello(addr: &str, proc: Proc) -> Peer {
        let (uid, gid) = ids();
        let (p, answer) = Peer::hello_with(addr, proc, uid, gid);
        let answer = answer.expect("an answer to the handshake");
        assert_eq!(answer.status, Status::SUCCESS);
        p
    }

    fn send_raw(&mut self, tag: u32, payload: &[u8]) {
        let mut out = Vec::new();
        encode_message(&mut out, 0, tag, payload).unwrap();
        self.s.write_all(&out).unwrap();
    }

    fn send(&mut self, req: &Request) -> u32 {
        let tag = self.next_tag;
        self.next_tag += 1;
        let mut payload = Vec::new();
        req.encode(Dialect::V41, &mut payload).unwrap();
        self.send_raw(tag, &payload);
        tag
    }

    /// The next message: its tag and payload.
    fn recv(&mut self) -> (u32, Vec<u8>) {
        let mut h = [0u8; HEADER_LEN];
        self.s
            .read_exact(&mut h)
            .unwrap_or_else(|e| panic!("no message within {DEADLINE:?}: {e}"));
        let h = Header::decode(&h);
        let mut payload = vec![0; h.nbytes as usize];
        self.s.read_exact(&mut payload).unwrap();
        (h.tag, payload)
    }

    fn ask(&mut self, req: &Request) -> Reply {
        let tag = self.send(req);
        let (got, payload) = self.recv();
        assert_eq!(got, tag, "the answer carries the request's tag");
        Reply::decode(req.cmd(), &payload, Dialect::V41).unwrap()
    }

    /// True if the server closed the connection (within the deadline).
    fn closed(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.s.read(&mut b), Ok(0))
            || matches!(self.s.read(&mut b), Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset)
    }
}

fn key(s: &str) -> Key {
    Key::new(s).unwrap()
}

fn commit(k: &str, v: Value) -> Request {
    let kv = Kval::new(key(k), v);
    Request::Commit {
        parts: vec![
            CommitPart {
                scope: Scope::LOCAL,
                kvals: vec![kv.clone()],
            },
            CommitPart {
                scope: Scope::REMOTE,
                kvals: vec![kv],
            },
        ],
    }
}

#[test]
fn three_ranks_get_job_data_fence_and_read_each_other() {
    let (server, ns) = server_with_job("openpmix-job", 3);
    let addr = address(&server, &ns);
    std::thread::scope(|s| {
        for rank in 0..3u32 {
            let (ns, addr) = (ns.clone(), addr.clone());
            s.spawn(move || {
                let mut p = Peer::hello(&addr, Proc::new(ns.clone(), rank));
                let Reply::JobInfo(job) = p.ask(&Request::Req) else {
                    panic!("REQ answered with something else")
                };
                assert_eq!(job.nspace, ns);
                let size = job
                    .kvals
                    .iter()
                    .find(|k| k.key.as_str() == attr::JOB_SIZE)
                    .map(|k| k.value.clone());
                assert_eq!(size, Some(Value::Uint32(3)));
                let blobs = job
                    .kvals
                    .iter()
                    .filter(|k| k.key.as_str() == "pmix.pblob")
                    .count();
                assert_eq!(blobs, 3, "one rank blob per rank");

                let mine = format!("value of {rank}");
                let r = p.ask(&commit("t.k", Value::String(mine)));
                assert_eq!(r.status(), Status::SUCCESS);
                let r = p.ask(&Request::Fence {
                    procs: vec![Proc::new(ns.clone(), Rank::WILDCARD)],
                    info: vec![Info::attr(attr::COLLECT_DATA, true)],
                });
                assert_eq!(r.status(), Status::SUCCESS);

                let peer = (rank + 1) % 3;
                let r = p.ask(&Request::Get {
                    proc: Proc::new(ns.clone(), peer),
                    info: vec![],
                    key: Some(key("t.k")),
                });
                let Reply::Get { status, data } = r else {
                    panic!("GETNB answered with something else")
                };
                assert_eq!(status, Status::SUCCESS);
                let theirs = data
                    .iter()
                    .find(|d| d.proc == Proc::new(ns.clone(), peer))
                    .and_then(|d| d.kvals.iter().find(|k| k.key.as_str() == "t.k"))
                    .map(|k| k.value.clone());
                assert_eq!(theirs, Some(Value::String(format!("value of {peer}"))));
                // The first answer after a collecting fence carries every other participant's
                // data, so the client's other gets stay local: the process asked about first,
                // then the rest, each once, and never the client's own (libpmix 5.0 fails
                // storing its own keys again).
                let procs: Vec<u32> = data.iter().map(|d| d.proc.rank.0).collect();
                assert_eq!(
                    procs,
                    [peer, (rank + 2) % 3],
                    "the first get after the fence brings the others' data"
                );

                // DEREGEVENTS is never answered: the next message is FINALIZE's answer.
                p.send(&Request::DeregisterEvents { codes: vec![] });
                let fin = p.send(&Request::Finalize);
                let (tag, payload) = p.recv();
                assert_eq!(tag, fin);
                let r = Reply::decode(Cmd::FINALIZE, &payload, Dialect::V41).unwrap();
                assert_eq!(r.status(), Status::SUCCESS);
            });
        }
    });
}

/// This process's resident memory, in bytes (the server runs in it).
fn rss() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: usize = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb << 10
}

/// Forty-eight `hash` clients of a fence that collected 24 MiB ask for a peer and do not read
/// the answer: each answer carries every other participant's data, and those parts are
/// encoded once and shared by every answer, not one copy per answer (issue 32: 1.2 GB in
/// pmixrun before). The other tests of this file move kilobytes, so they do not blur the
/// measure.
#[test]
fn unread_get_answers_after_a_large_fence_share_one_copy_of_its_data() {
    const RANKS: u32 = 48;
    const EACH: usize = 512 << 10;
    let (server, ns) = server_with_job("openpmix-big-fence", RANKS);
    let addr = address(&server, &ns);
    let committed = std::sync::Barrier::new(RANKS as usize + 1);
    let asked = std::sync::Barrier::new(RANKS as usize + 1);
    let measured = std::sync::Barrier::new(RANKS as usize + 1);
    let (before, after) = std::thread::scope(|s| {
        for rank in 0..RANKS {
            let (ns, addr) = (ns.clone(), addr.clone());
            let (committed, asked, measured) = (&committed, &asked, &measured);
            s.spawn(move || {
                let mut p = Peer::hello(&addr, Proc::new(ns.clone(), rank));
                let fill = u8::try_from(rank).unwrap();
                let r = p.ask(&commit("t.big", Value::ByteObject(vec![fill; EACH])));
                assert_eq!(r.status(), Status::SUCCESS);
                committed.wait();
                let r = p.ask(&Request::Fence {
                    procs: vec![Proc::new(ns.clone(), Rank::WILDCARD)],
                    info: vec![Info::attr(attr::COLLECT_DATA, true)],
                });
                assert_eq!(r.status(), Status::SUCCESS);
                let tag = p.send(&Request::Get {
                    proc: Proc::new(ns.clone(), (rank + 1) % RANKS),
                    info: vec![],
                    key: Some(key("t.big")),
                });
                // Only the header: the rest of the answer waits in the server.
                let mut h = [0u8; HEADER_LEN];
                p.s.read_exact(&mut h).unwrap();
                let h = Header::decode(&h);
                assert_eq!(h.tag, tag);
                let others = (RANKS as usize - 1) * EACH;
                assert!(
                    h.nbytes as usize > others,
                    "the answer carries every other rank's data: {} bytes",
                    h.nbytes
                );
                asked.wait();
                measured.wait();
            });
        }
        committed.wait();
        let before = rss();
        asked.wait();
        let after = rss();
        measured.wait();
        (before, after)
    });
    let data = RANKS as usize * EACH;
    let grown = after.saturating_sub(before);
    eprintln!(
        "{RANKS} unread answers to a {} MiB fence: server +{} MiB",
        data >> 20,
        grown >> 20
    );
    assert!(
        grown < 8 * data,
        "answers of {RANKS} clients to a fence of {} MiB grew the server by {} MiB",
        data >> 20,
        grown >> 20
    );
    drop(server);
}

#[test]
fn misbehaving_peers_are_cut_off_and_a_good_one_is_served() {
    let (server, ns) = server_with_job("openpmix-bad", 1);
    let addr = address(&server, &ns);
    let (uid, gid) = ids();

    // Garbage instead of a handshake.
    let mut p = Peer::connect(&addr);
    p.s.write_all(&[0xff; 64]).unwrap();
    assert!(p.closed(), "garbage must close the connection");

    // A process that was never registered, and a uid that is not the registered one.
    let stranger = Proc::new(Nspace::new("not-a-job").unwrap(), 0);
    let (mut p, answer) = Peer::hello_with(&addr, stranger, uid, gid);
    assert!(answer.is_none(), "an unknown process gets no answer");
    assert!(p.closed());
    let (mut p, answer) = Peer::hello_with(&addr, Proc::new(ns.clone(), 0), uid + 1, gid);
    assert!(answer.is_none(), "a false uid gets no answer");
    assert!(p.closed());

    // The real rank 0 then connects and is served; it misbehaves within the protocol.
    let mut p = Peer::hello(&addr, Proc::new(ns.clone(), 0));
    // An unknown command is answered NOT_SUPPORTED, and the connection goes on.
    let mut alloc = Vec::new();
    {
        let mut pk = pmix_wire::openpmix::Packer::new(&mut alloc, Dialect::V41);
        pk.pack_one(&Cmd::ALLOC).unwrap();
    }
    p.send_raw(900, &alloc);
    let (tag, payload) = p.recv();
    assert_eq!(tag, 900);
    let r = Reply::decode(Cmd::ALLOC, &payload, Dialect::V41).unwrap();
    assert_eq!(r.status(), Status::ERR_NOT_SUPPORTED);
    // A COMMIT whose buffer is cut short gets an error status, and the connection goes on.
    let mut bad = Vec::new();
    Request::Commit {
        parts: vec![CommitPart {
            scope: Scope::GLOBAL,
            kvals: vec![Kval::new(key("k"), Value::String("x".repeat(50)))],
        }],
    }
    .encode(Dialect::V41, &mut bad)
    .unwrap();
    bad.truncate(bad.len() - 10);
    p.send_raw(901, &bad);
    let (tag, payload) = p.recv();
    assert_eq!(tag, 901);
    let r = Reply::decode(Cmd::COMMIT, &payload, Dialect::V41).unwrap();
    assert_ne!(r.status(), Status::SUCCESS);
    let r = p.ask(&commit("k", Value::Uint32(7)));
    assert_eq!(r.status(), Status::SUCCESS, "a good commit after a bad one");

    // A second connection claiming the connected rank is refused; the first goes on.
    let (mut q, answer) = Peer::hello_with(&addr, Proc::new(ns.clone(), 0), uid, gid);
    assert!(answer.is_none());
    assert!(q.closed());
    let r = p.ask(&Request::Get {
        proc: Proc::new(ns.clone(), 0),
        info: vec![],
        key: Some(key("k")),
    });
    assert_eq!(r.status(), Status::SUCCESS);

    // A header announcing a gigantic message ends the connection before anything is
    // allocated for it.
    let mut h = Header {
        pindex: 0,
        tag: 902,
        nbytes: u32::MAX,
    }
    .encode()
    .to_vec();
    h.push(0);
    p.s.write_all(&h).unwrap();
    assert!(p.closed(), "an oversized message must close the connection");
}

/// A client choosing `ds21` is served, and its job data answer is the short one: the
/// namespace and the info arrays (the rest is in the segments); `ds21` in the `v3` codec, a
/// module not offered (`ds12`), and `ds21` from a server that does not offer it are refused.
#[test]
fn ds21_clients_get_the_short_job_answer_and_other_stores_are_refused() {
    let (server, ns) = server_with_job("openpmix-ds21", 4);
    let addr = address(&server, &ns);
    let (uid, gid) = ids();
    let (mut p, answer) = Peer::hello_gds(
        &addr,
        Proc::new(ns.clone(), 0),
        uid,
        gid,
        Dialect::V41,
        "ds21",
    );
    assert_eq!(answer.map(|a| a.status), Some(Status::SUCCESS));
    let Reply::JobInfo(job) = p.ask(&Request::Req) else {
        panic!("REQ answered with something else")
    };
    assert_eq!(job.nspace, ns);
    let keys: Vec<&str> = job.kvals.iter().map(|k| k.key.as_str()).collect();
    assert!(!keys.is_empty());
    assert!(
        keys.iter().all(|k| [
            attr::SESSION_INFO_ARRAY,
            attr::NODE_INFO_ARRAY,
            attr::APP_INFO_ARRAY
        ]
        .contains(k)),
        "{keys:?}"
    );
    // The job data went into the segments before the answer.
    let env = server.setup_fork(&Proc::new(ns.clone(), 0)).unwrap();
    let store = env
        .iter()
        .find(|(k, _)| k == "PMIX_DSTORE_21_BASE_PATH")
        .map(|(_, v)| std::path::PathBuf::from(v))
        .unwrap();
    assert!(store.join(format!("smdataseg-{ns}-0")).is_file());
    assert!(store.join(format!("smlockseg-{ns}")).is_file());

    let v3 = Dialect::new(Codec::V3, BufferType::NonDesc);
    for (rank, dialect, gds) in [(1, v3, "ds21"), (2, Dialect::V41, "ds12")] {
        let (mut p, answer) =
            Peer::hello_gds(&addr, Proc::new(ns.clone(), rank), uid, gid, dialect, gds);
        assert!(answer.is_none(), "{gds} in {dialect:?} was accepted");
        assert!(p.closed());
    }
    drop(p);
    server.deregister_nspace(&ns);
    assert!(!store.join(format!("smdataseg-{ns}-0")).exists());
    assert!(!store.join(format!("smlockseg-{ns}")).exists());
    drop(server);
    assert!(!store.exists(), "the store's directory outlived the server");

    let off = ServerOptions {
        ds21: false,
        ..ServerOptions::default()
    };
    let server = Server::init(NoHost, off).unwrap();
    let ns = Nspace::new("openpmix-no-ds21").unwrap();
    server
        .register_nspace(&ns, 1, &[Info::attr(attr::JOB_SIZE, 1u32)])
        .unwrap();
    server
        .register_client(&Proc::new(ns.clone(), 0), uid, gid)
        .unwrap();
    let env = server.setup_fork(&Proc::new(ns.clone(), 0)).unwrap();
    assert!(
        env.iter()
            .any(|(k, v)| k == "PMIX_GDS_MODULE" && v == "hash")
    );
    assert!(!env.iter().any(|(k, _)| k == "PMIX_DSTORE_21_BASE_PATH"));
    let uri = env
        .iter()
        .find(|(k, _)| k == "PMIX_SERVER_URI41")
        .map(|(_, v)| v.clone())
        .unwrap();
    let addr = uri.rsplit_once("tcp4://").unwrap().1;
    let (_p, answer) = Peer::hello_gds(addr, Proc::new(ns, 0), uid, gid, Dialect::V41, "ds21");
    assert!(
        answer.is_none(),
        "ds21 accepted by a server not offering it"
    );
}
