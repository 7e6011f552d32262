//! A host's [`LoopHook`]: its socket is polled by the server's own loop, and what it reads
//! there completes a host callback; a wake-up from another thread gets its `turn` called.
//! The "other node" of a two-node job is a thread at the far end of a socket pair.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use pmix_server::mio::net::UnixStream as MioStream;
use pmix_server::mio::{Interest, Token};
use pmix_server::types::{Info, Nspace, Proc, Value, attr};
use pmix_server::{
    Completion, Host, LoopContext, LoopHook, LoopWaker, PmiTransport, Server, ServerOptions,
};

const DEADLINE: Duration = Duration::from_secs(10);

/// How the hook hears that the other node answered.
#[derive(Clone, Copy, PartialEq)]
enum Way {
    /// Bytes on its socket, read in [`LoopHook::event`].
    Socket,
    /// A message on a channel, after a [`LoopWaker::wake`], taken in [`LoopHook::turn`].
    Wake,
}

/// A host whose "network" is one socket polled by the server's loop: a fence's contribution
/// is written there by `fence_nb` itself, and the fence completes with what comes back.
struct Relay {
    way: Way,
    link: MioStream,
    token: Option<Token>,
    pending: Vec<Completion<Vec<u8>>>,
    /// The other node's answers when they come by channel.
    answers: Receiver<Vec<u8>>,
    /// The loop's waker, handed to the other node's thread once the loop started.
    waker_out: Sender<LoopWaker>,
    events: Arc<AtomicUsize>,
    stopped: Arc<AtomicBool>,
}

impl LoopHook for Relay {
    fn start(&mut self, cx: LoopContext) -> std::io::Result<()> {
        assert!(!cx.tokens.is_empty());
        let token = Token(cx.tokens.start);
        cx.registry
            .register(&mut self.link, token, Interest::READABLE)?;
        self.token = Some(token);
        let _ = self.waker_out.send(cx.waker);
        Ok(())
    }

    fn event(&mut self, event: &pmix_server::mio::event::Event) {
        assert_eq!(Some(event.token()), self.token, "an event of another token");
        self.events.fetch_add(1, Ordering::Relaxed);
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match self.link.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) => panic!("reading the link: {e}"),
            }
        }
        if self.way == Way::Socket && !got.is_empty() {
            for done in self.pending.drain(..) {
                done.complete(Ok(got.clone()));
            }
        }
    }

    fn turn(&mut self) -> Option<Instant> {
        if let Ok(answer) = self.answers.try_recv() {
            for done in self.pending.drain(..) {
                done.complete(Ok(answer.clone()));
            }
        }
        None
    }

    fn stop(&mut self) {
        self.stopped.store(true, Ordering::Relaxed);
    }
}

impl Host for Relay {
    fn fence_nb(&mut self, _: &[Proc], _: &[Info], data: Vec<u8>, done: Completion<Vec<u8>>) {
        // On the loop's thread: the hook's socket is written directly.
        self.link.write_all(&data).expect("writing the link");
        self.pending.push(done);
    }

    fn loop_hook(&mut self) -> Option<&mut dyn LoopHook> {
        Some(self)
    }
}

/// A job of two, rank 0 here and rank 1 on a node "elsewhere": its fences go to the host.
fn two_node_job(server: &Server) -> Nspace {
    let ns = Nspace::new("hooked").unwrap();
    let nodes = pmix_server::generate_regex(&[server.hostname(), "elsewhere"]).unwrap();
    let ppn = pmix_server::generate_ppn(&[vec![0], vec![1]]).unwrap();
    let info = [
        Info::attr(attr::JOB_SIZE, 2u32),
        Info::attr(attr::NODE_MAP, Value::Regex(nodes)),
        Info::attr(attr::PROC_MAP, Value::Regex(ppn)),
    ];
    server.register_nspace(&ns, 1, &info).unwrap();
    let (uid, gid) = (
        nix::unistd::geteuid().as_raw(),
        nix::unistd::getegid().as_raw(),
    );
    server
        .register_client(&Proc::new(ns.clone(), 0), uid, gid)
        .unwrap();
    ns
}

/// Rank 0 over PMI-1: init, then a barrier, whose answer it returns.
fn barrier_of_rank_0(server: &Server, ns: &Nspace) -> String {
    let fork = server
        .setup_fork_pmi1(&Proc::new(ns.clone(), 0), PmiTransport::Fd)
        .unwrap();
    let s = UnixStream::from(fork.fd.expect("a socket for the process"));
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    let mut ask = |line: &str| {
        w.write_all(format!("{line}\n").as_bytes()).unwrap();
        let mut l = String::new();
        r.read_line(&mut l)
            .unwrap_or_else(|e| panic!("no answer to {line} within {DEADLINE:?}: {e}"));
        l.trim_end().to_owned()
    };
    let init = ask("cmd=init pmi_version=1 pmi_subversion=1");
    assert!(init.contains("rc=0"), "{init}");
    ask("cmd=barrier_in")
}

fn run(way: Way) {
    let (link, far) = UnixStream::pair().unwrap();
    link.set_nonblocking(true).unwrap();
    far.set_read_timeout(Some(DEADLINE)).unwrap();
    let (answer_tx, answers) = crossbeam_channel::unbounded();
    let (waker_out, waker_in) = crossbeam_channel::bounded(1);
    let events = Arc::new(AtomicUsize::new(0));
    let stopped = Arc::new(AtomicBool::new(false));
    let host = Relay {
        way,
        link: MioStream::from_std(link),
        token: None,
        pending: Vec::new(),
        answers,
        waker_out,
        events: events.clone(),
        stopped: stopped.clone(),
    };
    let server = Server::init(host, ServerOptions::default()).unwrap();
    let waker = waker_in
        .recv_timeout(DEADLINE)
        .expect("the hook was started");
    let ns = two_node_job(&server);
    // The other node: takes the contribution off the link and answers with it.
    let other = std::thread::spawn(move || {
        let mut far = far;
        let mut buf = [0u8; 4096];
        let n = far
            .read(&mut buf)
            .unwrap_or_else(|e| panic!("no contribution within {DEADLINE:?}: {e}"));
        assert!(n > 0, "the link closed");
        match way {
            Way::Socket => far.write_all(&buf[..n]).unwrap(),
            Way::Wake => {
                answer_tx.send(buf[..n].to_vec()).unwrap();
                waker.wake();
            }
        }
        far
    });
    assert_eq!(barrier_of_rank_0(&server, &ns), "cmd=barrier_out rc=0");
    let _far = other.join().expect("the other node's thread");
    if way == Way::Socket {
        assert!(
            events.load(Ordering::Relaxed) > 0,
            "no event reached the hook"
        );
    }
    assert!(!stopped.load(Ordering::Relaxed));
    server.finalize().unwrap();
    assert!(stopped.load(Ordering::Relaxed), "the hook was not stopped");
}

#[test]
fn an_answer_read_by_the_hook_completes_the_fence() {
    run(Way::Socket);
}

#[test]
fn a_wake_up_gets_the_hook_a_turn_that_completes_the_fence() {
    run(Way::Wake);
}
