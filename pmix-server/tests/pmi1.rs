//! The PMI-1 front-end over real sockets: hand-written PMI-1 peers on the inherited-socket
//! and the TCP transports, one thread each, against a running server. (Unmodified MPICH
//! programs under pmixrun are tested in pmix-tests.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::sync::Barrier;
use std::time::Duration;

use pmix_server::types::{Info, Nspace, Proc, attr};
use pmix_server::{NoHost, PmiFork, PmiTransport, Server, ServerOptions};

const DEADLINE: Duration = Duration::from_secs(10);

/// One PMI-1 peer: a request line out, one reply line in, within the deadline.
struct Peer {
    r: BufReader<Box<dyn std::io::Read + Send>>,
    w: Box<dyn Write + Send>,
}

impl Peer {
    fn connect(fork: PmiFork) -> (Peer, Vec<(String, String)>) {
        let env = fork.env;
        let var = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let peer = match fork.fd {
            Some(fd) => {
                let s = UnixStream::from(fd);
                s.set_read_timeout(Some(DEADLINE)).unwrap();
                Peer {
                    r: BufReader::new(Box::new(s.try_clone().unwrap())),
                    w: Box::new(s),
                }
            }
            None => {
                let s = TcpStream::connect(var("PMI_PORT").expect("PMI_PORT")).unwrap();
                s.set_read_timeout(Some(DEADLINE)).unwrap();
                Peer {
                    r: BufReader::new(Box::new(s.try_clone().unwrap())),
                    w: Box::new(s),
                }
            }
        };
        (peer, env)
    }

    /// Writes a request line in one piece, as MPICH does.
    fn send(&mut self, line: &str) {
        self.w.write_all(format!("{line}\n").as_bytes()).unwrap();
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        let n = self
            .r
            .read_line(&mut l)
            .unwrap_or_else(|e| panic!("no reply within {DEADLINE:?}: {e}"));
        assert!(n > 0, "the server closed the connection");
        assert!(l.len() <= 1024, "a reply longer than MPICH reads: {l}");
        l.trim_end().to_owned()
    }

    fn ask(&mut self, line: &str) -> String {
        self.send(line);
        self.line()
    }

    /// The value of `key` in a reply line.
    fn field<'a>(reply: &'a str, key: &str) -> Option<&'a str> {
        reply
            .split(' ')
            .filter_map(|t| t.split_once('='))
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }
}

fn rc(reply: &str) -> i32 {
    Peer::field(reply, "rc")
        .unwrap_or_else(|| panic!("no rc in {reply}"))
        .parse()
        .unwrap()
}

fn server_with_job(name: &str, size: u32) -> (Server, Nspace) {
    let server = Server::init(NoHost, ServerOptions::default()).unwrap();
    let ns = Nspace::new(name).unwrap();
    server
        .register_nspace(&ns, size, &[Info::attr(attr::JOB_SIZE, size)])
        .unwrap();
    let (uid, gid) = (
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    );
    for r in 0..size {
        server
            .register_client(&Proc::new(ns.clone(), r), uid, gid)
            .unwrap();
    }
    (server, ns)
}

#[test]
fn a_job_of_three_exchanges_data_over_both_transports() {
    let (server, ns) = server_with_job("pmi1-job", 3);
    let barrier = Barrier::new(3);
    std::thread::scope(|s| {
        for rank in 0..3u32 {
            let transport = if rank == 2 {
                PmiTransport::Port
            } else {
                PmiTransport::Fd
            };
            let fork = server
                .setup_fork_pmi1(&Proc::new(ns.clone(), rank), transport)
                .unwrap();
            let (ns, barrier) = (ns.clone(), &barrier);
            s.spawn(move || {
                let (mut p, env) = Peer::connect(fork);
                let var = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
                assert!(
                    !env.iter().any(|(k, _)| k.starts_with("PMIX_")),
                    "PMIx variables in a PMI-1 environment: {env:?}"
                );
                assert_eq!(var("MPI_LOCALNRANKS").as_deref(), Some("3"));
                if transport == PmiTransport::Port {
                    let id = var("PMI_ID").unwrap();
                    p.send(&format!("cmd=initack pmiid={id}"));
                    assert_eq!(p.line(), "cmd=initack rc=0");
                    assert_eq!(p.line(), "cmd=set size=3");
                    assert_eq!(p.line(), format!("cmd=set rank={rank}"));
                    assert_eq!(p.line(), "cmd=set debug=0");
                } else {
                    assert_eq!(var("PMI_RANK"), Some(rank.to_string()));
                    assert_eq!(var("PMI_SIZE").as_deref(), Some("3"));
                }
                let init = p.ask("cmd=init pmi_version=1 pmi_subversion=1");
                assert!(init.starts_with("cmd=response_to_init"), "{init}");
                assert_eq!(rc(&init), 0);
                let maxes = p.ask("cmd=get_maxes");
                assert_eq!(Peer::field(&maxes, "vallen_max"), Some("1024"));
                let kvs = p.ask("cmd=get_my_kvsname");
                assert_eq!(Peer::field(&kvs, "kvsname"), Some(ns.as_str()));
                let map = p.ask(&format!("cmd=get kvsname={ns} key=PMI_process_mapping"));
                assert_eq!(Peer::field(&map, "value"), Some("(vector,(0,1,3))"));
                // A key nobody put is answered at once.
                let miss = p.ask(&format!("cmd=get kvsname={ns} key=PMI_hwloc_xmlfile"));
                assert_ne!(rc(&miss), 0, "{miss}");
                let put = p.ask(&format!(
                    "cmd=put kvsname={ns} key=addr-{rank} value=a=b;{rank}"
                ));
                assert_eq!(rc(&put), 0, "{put}");
                assert_eq!(p.ask("cmd=barrier_in"), "cmd=barrier_out rc=0");
                for other in 0..3 {
                    let got = p.ask(&format!("cmd=get kvsname={ns} key=addr-{other}"));
                    assert_eq!(Peer::field(&got, "value"), Some(&*format!("a=b;{other}")));
                }
                // Names: the first publisher wins, a duplicate is refused.
                barrier.wait();
                let published = p.ask(&format!("cmd=publish_name service=svc port=port-{rank}"));
                let mine = rc(&published) == 0;
                assert_eq!(p.ask("cmd=barrier_in"), "cmd=barrier_out rc=0");
                let found = p.ask("cmd=lookup_name service=svc");
                assert_eq!(rc(&found), 0, "{found}");
                let port = Peer::field(&found, "port").unwrap().to_owned();
                if mine {
                    assert_eq!(port, format!("port-{rank}"));
                } else {
                    assert_eq!(rc(&published), 1, "{published}");
                }
                let none = p.ask("cmd=lookup_name service=nothing");
                assert_eq!(rc(&none), 1, "{none}");
                assert_eq!(p.ask("cmd=barrier_in"), "cmd=barrier_out rc=0");
                if mine {
                    assert_eq!(rc(&p.ask("cmd=unpublish_name service=svc")), 0);
                }
                assert_eq!(p.ask("cmd=barrier_in"), "cmd=barrier_out rc=0");
                assert_eq!(rc(&p.ask("cmd=unpublish_name service=svc")), 1);
                let fin = p.ask("cmd=finalize");
                assert!(fin.starts_with("cmd=finalize_ack"), "{fin}");
            });
        }
    });
    server.finalize().unwrap();
}

#[test]
fn a_bad_peer_is_closed_and_the_others_are_served() {
    let (server, ns) = server_with_job("pmi1-bad", 2);
    let good = server
        .setup_fork_pmi1(&Proc::new(ns.clone(), 0), PmiTransport::Fd)
        .unwrap();
    let bad = server
        .setup_fork_pmi1(&Proc::new(ns.clone(), 1), PmiTransport::Fd)
        .unwrap();
    let (mut good, _) = Peer::connect(good);
    let (mut bad, _) = Peer::connect(bad);
    assert_eq!(rc(&good.ask("cmd=init pmi_version=1 pmi_subversion=1")), 0);
    // A line far past any PMI-1 limit, without an end.
    let junk = vec![b'x'; 64 * 1024];
    let _ = bad.w.write_all(&junk);
    let err = bad.line();
    assert!(err.starts_with("cmd=error rc=-1"), "{err}");
    let mut rest = String::new();
    assert_eq!(
        bad.r.read_line(&mut rest).unwrap_or(0),
        0,
        "still open after a bad line: {rest}"
    );
    // A stranger on the TCP port with a made-up id is refused.
    let anyone = server
        .setup_fork_pmi1(&Proc::new(ns.clone(), 0), PmiTransport::Port)
        .unwrap();
    let port = anyone
        .env
        .iter()
        .find(|(k, _)| k == "PMI_PORT")
        .map(|(_, v)| v.clone())
        .unwrap();
    let s = TcpStream::connect(&port).unwrap();
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut stranger = Peer {
        r: BufReader::new(Box::new(s.try_clone().unwrap())),
        w: Box::new(s),
    };
    let refused = stranger.ask("cmd=initack pmiid=12345");
    assert!(refused.starts_with("cmd=initack rc="), "{refused}");
    assert_ne!(rc(&refused), 0);
    // The good one goes on.
    let put = good.ask(&format!("cmd=put kvsname={ns} key=k value=v"));
    assert_eq!(rc(&put), 0, "{put}");
    let got = good.ask(&format!("cmd=get kvsname={ns} key=k"));
    assert_eq!(Peer::field(&got, "value"), Some("v"));
    let unknown = good.ask("cmd=frobnicate");
    assert_eq!(unknown, "cmd=frobnicate_result rc=-1 msg=unknown_command");
    assert!(good.ask("cmd=finalize").starts_with("cmd=finalize_ack"));
    server.finalize().unwrap();
}
