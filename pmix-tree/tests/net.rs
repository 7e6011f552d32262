//! Trees of real vertices on 127.0.0.1, each its own `Tree` in this process.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use pmix_tree::{Config, Delivery, Dest, FenceKey, SECRET_LEN, Topology, Tree, Vertex};
use pmix_types::Status;

const SECRET: [u8; SECRET_LEN] = [7; SECRET_LEN];
/// Every wait in these tests ends by then, so that a hang fails with a message.
const PATIENCE: Duration = Duration::from_secs(20);

type Event = (Vertex, Delivery);
type Outcome = (Vertex, u64, Result<Vec<u8>, Status>);

struct Run {
    trees: BTreeMap<Vertex, Tree>,
    events: Receiver<Event>,
    results: Receiver<Outcome>,
    results_tx: Sender<Outcome>,
}

fn config(me: Vertex, topo: Topology, parent: Option<SocketAddr>) -> Config {
    let mut c = Config::new(me, topo, SECRET);
    c.listen = SocketAddr::from(([127, 0, 0, 1], 0));
    c.parent = parent;
    c
}

/// Starts every vertex of `topo`, parents first; `tweak` adjusts each config.
fn start(topo: Topology, tweak: impl Fn(&mut Config)) -> Run {
    let (tx, events) = crossbeam_channel::unbounded();
    let (results_tx, results) = crossbeam_channel::unbounded();
    let mut trees = BTreeMap::new();
    let mut addrs: BTreeMap<Vertex, SocketAddr> = BTreeMap::new();
    for v in 0..topo.size() {
        let parent = topo.parent(v).map(|p| addrs[&p]);
        let mut c = config(v, topo, parent);
        tweak(&mut c);
        let tx = tx.clone();
        let (tree, addr) = Tree::start(c, move |d| {
            let _ = tx.send((v, d));
        })
        .unwrap_or_else(|e| panic!("vertex {v}: {e}"));
        if let Some(addr) = addr {
            addrs.insert(v, addr);
        }
        trees.insert(v, tree);
    }
    let run = Run {
        trees,
        events,
        results,
        results_tx,
    };
    // Every link up before the test begins.
    let mut up = 0;
    while up < topo.size() - 1 {
        match run.event() {
            (_, Delivery::ChildUp(_)) => up += 1,
            other => panic!("unexpected {other:?} at start"),
        }
    }
    run
}

impl Run {
    fn event(&self) -> Event {
        self.events
            .recv_timeout(PATIENCE)
            .expect("no delivery in time")
    }

    fn result(&self) -> Outcome {
        self.results
            .recv_timeout(PATIENCE)
            .expect("no completion in time")
    }

    fn done(&self, v: Vertex, tag: u64) -> impl FnOnce(Result<Vec<u8>, Status>) + Send + 'static {
        let tx = self.results_tx.clone();
        move |r| {
            let _ = tx.send((v, tag, r));
        }
    }

    fn fence_all(&self, vertices: &[Vertex], seq: u64) {
        for &v in vertices {
            let key = FenceKey {
                set: b"all".to_vec(),
                seq,
            };
            self.trees[&v].fence(key, vertices.to_vec(), vec![v as u8], self.done(v, seq));
        }
    }
}

#[test]
fn fence_requests_and_messages_over_seven_vertices() {
    let topo = Topology::new(7, 2);
    let run = start(topo, |_| {});
    let all: Vec<Vertex> = (0..7).collect();
    let expect: Vec<u8> = (0..7).collect();

    // Two fences back to back.
    run.fence_all(&all, 0);
    run.fence_all(&all, 1);
    let mut got = BTreeMap::new();
    for _ in 0..14 {
        let (v, seq, r) = run.result();
        assert_eq!(r.as_deref(), Ok(&expect[..]), "vertex {v} fence {seq}");
        assert!(got.insert((v, seq), ()).is_none());
    }

    // A subset fence: vertices 3 and 5 (whose paths meet at the root).
    for v in [3, 5] {
        let key = FenceKey {
            set: b"sub".to_vec(),
            seq: 0,
        };
        run.trees[&v].fence(key, vec![3, 5], vec![v as u8, 0xff], run.done(v, 9));
    }
    for _ in 0..2 {
        let (_, _, r) = run.result();
        assert_eq!(r, Ok(vec![3, 0xff, 5, 0xff]));
    }

    // Vertex 3 asks every vertex (itself too); each answers with its number.
    for t in 0..7 {
        run.trees[&3].request(t, vec![t as u8], run.done(3, u64::from(t)));
    }
    let mut answered = 0;
    let mut asked = 0;
    while answered < 7 {
        crossbeam_channel::select! {
            recv(run.events) -> e => match e.expect("events") {
                (v, Delivery::Request { origin, id, payload }) => {
                    assert_eq!(origin, 3);
                    assert_eq!(payload, vec![v as u8]);
                    asked += 1;
                    run.trees[&v].respond(origin, id, Ok(vec![v as u8, 42]));
                }
                other => panic!("unexpected {other:?}"),
            },
            recv(run.results) -> r => {
                let (_, t, r) = r.expect("results");
                assert_eq!(r, Ok(vec![t as u8, 42]));
                answered += 1;
            },
            default(PATIENCE) => panic!("requests not answered in time"),
        }
    }
    assert_eq!(asked, 7);

    // Vertex 4 sends to every other vertex, in order; vertex 6 to vertex 1.
    for i in 0..3u8 {
        run.trees[&4].send(Dest::All, vec![4, i]);
    }
    run.trees[&6].send(Dest::Vertex(1), vec![6]);
    let mut seen: BTreeMap<Vertex, Vec<Vec<u8>>> = BTreeMap::new();
    for _ in 0..(6 * 3 + 1) {
        match run.event() {
            (v, Delivery::Message { from, payload }) => {
                assert_eq!(from, payload[0] as Vertex);
                seen.entry(v).or_default().push(payload);
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    for v in 0..7 {
        let want: Vec<Vec<u8>> = if v == 4 {
            vec![]
        } else {
            (0..3).map(|i| vec![4, i]).collect()
        };
        let got: Vec<Vec<u8>> = seen
            .get(&v)
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter(|p| p[0] == 4)
            .collect();
        assert_eq!(got, want, "vertex {v}");
    }
    assert_eq!(
        seen[&1].iter().filter(|p| p[..] == [6]).count(),
        1,
        "vertex 1 got vertex 6's message once"
    );
    assert!(run.events.try_recv().is_err(), "nothing else delivered");
    for tree in run.trees.values() {
        tree.shutdown();
    }
}

#[test]
fn a_wrong_secret_or_a_stranger_is_refused() {
    let topo = Topology::new(3, 2);
    let (root, addr) = Tree::start(config(0, topo, None), |_| {}).expect("root");
    let addr = addr.expect("the root listens");

    let mut wrong = config(1, topo, Some(addr));
    wrong.secret = [8; SECRET_LEN];
    let err = Tree::start(wrong, |_| {}).expect_err("a wrong secret must fail");
    assert_eq!(err.status(), Status::ERR_INVALID_CRED, "{err}");

    // Vertex 5 is nobody's child here (the tree has 3 vertices): refused.
    let mut stranger = config(1, Topology::new(12, 2), Some(addr));
    stranger.me = 5;
    let err = Tree::start(stranger, |_| {}).expect_err("not a child");
    assert!(matches!(err, pmix_tree::Error::Refused { .. }), "{err}");

    // The root still takes its real children, once each.
    let (one, _) = Tree::start(config(1, topo, Some(addr)), |_| {}).expect("vertex 1");
    let err = Tree::start(config(1, topo, Some(addr)), |_| {}).expect_err("a second vertex 1");
    assert!(matches!(err, pmix_tree::Error::Refused { .. }), "{err}");
    drop(one);
    root.shutdown();
}

#[test]
fn a_lost_vertex_fails_pending_fences_everywhere() {
    let topo = Topology::new(7, 2);
    let mut run = start(topo, |_| {});
    let all: Vec<Vertex> = (0..7).collect();
    // Everyone but vertex 1 joins; then vertex 1 goes away (its children 3 and 4 with it).
    for &v in &all[..] {
        if v != 1 {
            let key = FenceKey {
                set: b"all".to_vec(),
                seq: 0,
            };
            run.trees[&v].fence(key, all.clone(), vec![], run.done(v, 0));
        }
    }
    drop(run.trees.remove(&1));
    let mut failed = BTreeMap::new();
    let mut lost = BTreeMap::new();
    let mut orphans = BTreeMap::new();
    let deadline = Instant::now() + PATIENCE;
    while failed.len() < 6 || lost.len() < 4 || orphans.len() < 2 {
        assert!(Instant::now() < deadline, "{failed:?} {lost:?} {orphans:?}");
        crossbeam_channel::select! {
            recv(run.events) -> e => match e.expect("events") {
                (v, Delivery::Lost { vertex, .. }) => {
                    assert_eq!(vertex, 1);
                    assert!(lost.insert(v, ()).is_none());
                }
                (v, Delivery::ParentLost { .. }) => {
                    assert!(v == 3 || v == 4, "{v} lost its parent");
                    assert!(orphans.insert(v, ()).is_none());
                }
                other => panic!("unexpected {other:?}"),
            },
            recv(run.results) -> r => {
                let (v, _, r) = r.expect("results");
                assert_eq!(r, Err(Status::ERR_LOST_CONNECTION), "vertex {v}");
                assert!(failed.insert(v, ()).is_none());
            },
            default(PATIENCE) => panic!("no failure in time"),
        }
    }
    // Later fences involving vertex 1 fail at once; one without it still works.
    let key = FenceKey {
        set: b"late".to_vec(),
        seq: 0,
    };
    run.trees[&2].fence(key, vec![0, 1, 2], vec![], run.done(2, 1));
    assert_eq!(run.result().2, Err(Status::ERR_LOST_CONNECTION));
    for v in [0, 2, 5, 6] {
        let key = FenceKey {
            set: b"rest".to_vec(),
            seq: 0,
        };
        run.trees[&v].fence(key, vec![0, 2, 5, 6], vec![v as u8], run.done(v, 2));
    }
    for _ in 0..4 {
        assert_eq!(run.result().2, Ok(vec![0, 2, 5, 6]));
    }
    // The root goes: its child 2 loses its parent, then 2's children theirs.
    drop(run.trees.remove(&0));
    let mut orphans = BTreeMap::new();
    while orphans.len() < 3 {
        match run.event() {
            (v, Delivery::ParentLost { .. }) => {
                orphans.insert(v, ());
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(orphans.keys().copied().collect::<Vec<_>>(), [2, 5, 6]);
}

#[test]
fn a_silent_child_is_lost_within_dead_after_plus_heartbeat() {
    let topo = Topology::new(3, 2);
    let tweak = |c: &mut Config| {
        c.heartbeat = Duration::from_millis(50);
        c.dead_after = Duration::from_millis(300);
    };
    let (tx, events) = crossbeam_channel::unbounded();
    let mut c = config(0, topo, None);
    tweak(&mut c);
    let (root, addr) = Tree::start(c, move |d| {
        let _ = tx.send(d);
    })
    .expect("root");
    let addr = addr.expect("listens");
    // Vertex 1 joins, then its thread is stopped without closing anything: the raw socket
    // stays open, and silent.
    let mut c = config(1, topo, Some(addr));
    tweak(&mut c);
    let silent = pmix_tree::net::testing::join_and_go_silent(c).expect("vertex 1 joins");
    match events.recv_timeout(PATIENCE) {
        Ok(Delivery::ChildUp(1)) => {}
        other => panic!("{other:?}"),
    }
    // Vertex 2 is a real vertex: its heartbeats keep it (and the root, for it) alive.
    let (tx2, events2) = crossbeam_channel::unbounded();
    let mut c = config(2, topo, Some(addr));
    tweak(&mut c);
    let two = Tree::start(c, move |d| {
        let _ = tx2.send(d);
    })
    .expect("vertex 2")
    .0;
    match events.recv_timeout(PATIENCE) {
        Ok(Delivery::ChildUp(2)) => {}
        other => panic!("{other:?}"),
    }
    let joined = Instant::now();
    match events.recv_timeout(PATIENCE) {
        Ok(Delivery::Lost { vertex: 1, reason }) => {
            assert!(reason.contains("silent"), "{reason}");
        }
        other => panic!("{other:?}"),
    }
    // Not before dead_after (the bound above is the deadline of the wait).
    assert!(joined.elapsed() >= Duration::from_millis(250));
    // Vertex 2 heard of the loss, and nothing else happens for longer than dead_after.
    match events2.recv_timeout(PATIENCE) {
        Ok(Delivery::Lost { vertex: 1, .. }) => {}
        other => panic!("{other:?}"),
    }
    let idle = Duration::from_millis(600);
    assert!(events.recv_timeout(idle).is_err(), "the root lost vertex 2");
    assert!(events2.try_recv().is_err(), "vertex 2 lost the root");
    drop(silent);
    root.shutdown();
    match events2.recv_timeout(PATIENCE) {
        Ok(Delivery::ParentLost { .. }) => {}
        other => panic!("{other:?}"),
    }
    // An orphan's calls fail.
    let (tx, rx) = crossbeam_channel::bounded(1);
    two.request(0, vec![], move |r| {
        let _ = tx.send(r);
    });
    assert_eq!(
        rx.recv_timeout(PATIENCE).expect("done called"),
        Err(Status::ERR_LOST_CONNECTION)
    );
}

#[test]
fn a_link_delay_holds_every_message_back() {
    let delay = Duration::from_millis(30);
    let topo = Topology::new(3, 2);
    let run = start(topo, |c| c.link_delay = delay);
    let all: Vec<Vertex> = (0..3).collect();
    let started = Instant::now();
    run.fence_all(&all, 0);
    for _ in 0..3 {
        assert_eq!(run.result().2, Ok(vec![0, 1, 2]));
    }
    // Up and down one link each: at least two delays.
    assert!(started.elapsed() >= 2 * delay, "{:?}", started.elapsed());
}

#[test]
fn an_embedded_vertex_runs_in_its_hosts_own_loop() {
    use mio::{Events, Poll, Token, Waker};

    // 0 and 3 on threads of their own, 1 (3's parent) in a loop this test runs.
    let topo = Topology::new(4, 2);
    let (tx, events) = crossbeam_channel::unbounded::<Event>();
    let (results_tx, results) = crossbeam_channel::unbounded::<Outcome>();
    let sink = |v: Vertex| {
        let tx = tx.clone();
        move |d| {
            let _ = tx.send((v, d));
        }
    };
    let done = |v: Vertex, tag: u64| {
        let tx = results_tx.clone();
        move |r| {
            let _ = tx.send((v, tag, r));
        }
    };
    let (root, addr0) = Tree::start(config(0, topo, None), sink(0)).expect("root");
    let (one, mut one_loop, addr1) =
        Tree::embedded(config(1, topo, addr0), sink(1)).expect("vertex 1");
    let mut poll = Poll::new().expect("poll");
    // The host's own token and the vertex's range, anywhere in the token space.
    let waker = Waker::new(poll.registry(), Token(7)).expect("waker");
    one_loop
        .attach(
            poll.registry().try_clone().expect("registry"),
            100..200,
            move || {
                let _ = waker.wake();
            },
        )
        .expect("attach");
    assert_eq!(one_loop.tokens(), 100..200);
    let all: Vec<Vertex> = (0..4).collect();
    let key = |seq| FenceKey {
        set: b"all".to_vec(),
        seq,
    };
    let (ended_tx, ended) = crossbeam_channel::bounded(1);
    let host_done = done(1, 0);
    let own = all.clone();
    let host = std::thread::spawn(move || {
        // A call on the loop's own thread, before the first turn: no channel, no wake-up.
        one_loop.fence(key(0), own, vec![1], host_done);
        let mut events = Events::with_capacity(64);
        loop {
            let next = one_loop.turn();
            if one_loop.is_finished() {
                break;
            }
            let timeout = next.map_or(PATIENCE, |t| t.saturating_duration_since(Instant::now()));
            poll.poll(&mut events, Some(timeout)).expect("poll");
            for ev in &events {
                if one_loop.tokens().contains(&ev.token().0) {
                    one_loop.event(ev);
                }
            }
        }
        let _ = ended_tx.send(());
    });
    // Vertex 3 joins through vertex 1's listener, served by that loop.
    let (two, _) = Tree::start(config(2, topo, addr0), sink(2)).expect("vertex 2");
    let (three, _) = Tree::start(config(3, topo, addr1), sink(3)).expect("vertex 3");
    let handles = [(0, &root), (2, &two), (3, &three)];
    for (v, t) in handles {
        t.fence(key(0), all.clone(), vec![v as u8], done(v, 0));
    }
    // A second fence with vertex 1's part through its handle, from this thread.
    for (v, t) in handles.into_iter().chain([(1, &one)]) {
        t.fence(key(1), all.clone(), vec![v as u8], done(v, 1));
    }
    let mut got = BTreeMap::new();
    for _ in 0..8 {
        let (v, seq, r) = results.recv_timeout(PATIENCE).expect("a fence's end");
        assert_eq!(
            r.as_deref(),
            Ok(&[0u8, 1, 2, 3][..]),
            "vertex {v} fence {seq}"
        );
        assert!(got.insert((v, seq), ()).is_none());
    }
    // The handle stops the embedded vertex: its loop ends, its child loses its parent.
    one.shutdown();
    ended
        .recv_timeout(PATIENCE)
        .expect("the embedded vertex's loop did not end");
    host.join().expect("the host's loop");
    loop {
        match events.recv_timeout(PATIENCE).expect("vertex 3 told") {
            (3, Delivery::ParentLost { .. }) => break,
            (_, Delivery::ChildUp(_) | Delivery::Lost { .. } | Delivery::ParentLost { .. }) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}

/// Connections that never say hello hold at most a few handshake slots of a vertex (each
/// child twice and 16): past them the vertex closes a new connection at once, instead of
/// keeping a descriptor and a read buffer for it until its handshake deadline.
#[test]
fn idle_connections_take_at_most_the_handshake_slots() {
    use std::io::Read;
    use std::net::TcpStream;
    let topo = Topology::new(2, 2);
    // A handshake deadline far beyond the test's patience: only the cap can close it.
    let mut c = config(0, topo, None);
    c.handshake_timeout = Duration::from_secs(600);
    let (_root, addr) = Tree::start(c, |_| {}).expect("root");
    let addr = addr.expect("the root listens");
    let slots = 2 + 16;
    let idle: Vec<TcpStream> = (0..slots)
        .map(|_| TcpStream::connect_timeout(&addr, PATIENCE).expect("connect"))
        .collect();
    let mut extra = TcpStream::connect_timeout(&addr, PATIENCE).expect("connect");
    extra.set_read_timeout(Some(PATIENCE)).expect("timeout");
    let mut buf = [0u8; 8];
    // Closed at once: the end of the stream or a reset, not the read timing out.
    let r = extra.read(&mut buf);
    let closed = match &r {
        Ok(n) => *n == 0,
        Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
    };
    assert!(closed, "the extra connection was kept: {r:?}");
    drop(idle);
}
