//! Many vertices over a simulated network, in virtual time: for tests and benchmarks.
//!
//! Every vertex is a [`Core`]; every link has a delay (the same both ways or per direction,
//! see [`Sim::with_delays`]) and keeps its order (a message never overtakes one sent earlier
//! on the same link). Events (deliveries, link failures, timers, scheduled actions) sit in one
//! priority queue by virtual time, ties in the order they were scheduled, so a run is
//! deterministic. A vertex can be killed at any time: its links go down (the neighbours see
//! end of stream one link delay later, after what it had sent), or, killed silently, stay
//! open and mute, so that only the heartbeats notice.
//!
//! A vertex that stops by itself (its parent lost) closes its links as a dying daemon would.
//! Nothing here reads a clock: virtual time starts at an arbitrary `Instant` taken once.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::time::{Duration, Instant};

use crate::core::{Core, Delivery, Outcome, Output, Timing};
use crate::msg::{Dest, FenceKey, Msg};
use crate::{Topology, Vertex};

/// Something that happened to a vertex's host, and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record<T> {
    /// The vertex.
    pub vertex: Vertex,
    /// Virtual time since the start.
    pub at: Duration,
    /// What.
    pub what: T,
}

/// A fence or request that completed: its token (as returned by [`Sim::fence`] or
/// [`Sim::request`]) and result.
pub type Completion = Record<(u64, Outcome)>;

/// An action scheduled on the simulation.
type Action = Box<dyn FnOnce(&mut Sim)>;

/// A request answerer: (vertex, origin, payload) → answer.
type Responder = Box<dyn FnMut(Vertex, Vertex, &[u8]) -> Outcome>;

enum Event {
    Deliver { from: Vertex, to: Vertex, msg: Msg },
    Down { at: Vertex, link: Vertex },
    Timer { v: Vertex, at: Duration },
    Kill { v: Vertex, silent: bool },
    Action(Action),
}

/// A simulated tree.
pub struct Sim {
    base: Instant,
    now: Duration,
    cores: Vec<Core>,
    dead: Vec<bool>,
    /// The timer each core has in the queue.
    timers: Vec<Option<Duration>>,
    queue: BinaryHeap<Reverse<(Duration, u64)>>,
    events: HashMap<u64, Event>,
    seq: u64,
    delay: Box<dyn Fn(Vertex, Vertex) -> Duration>,
    /// When the last message on each directed link arrives (for FIFO with varying delays).
    last_arrival: HashMap<(Vertex, Vertex), Duration>,
    /// (owner, peer): `owner` has closed its end of the link to `peer`.
    closed: HashSet<(Vertex, Vertex)>,
    next_token: u64,
    responder: Option<Responder>,
    completions: Vec<Completion>,
    deliveries: Vec<Record<Delivery>>,
    delivered: u64,
}

impl std::fmt::Debug for Sim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sim")
            .field("now", &self.now)
            .field("vertices", &self.cores.len())
            .field("queued", &self.queue.len())
            .finish_non_exhaustive()
    }
}

impl Sim {
    /// A tree of `topo` whose every link takes `delay`, every link up at time zero.
    pub fn new(topo: Topology, timing: Timing, delay: Duration) -> Sim {
        Sim::with_delays(topo, timing, move |_, _| delay)
    }

    /// A tree whose link from `a` to `b` takes `delay(a, b)` (called for every message).
    pub fn with_delays(
        topo: Topology,
        timing: Timing,
        delay: impl Fn(Vertex, Vertex) -> Duration + 'static,
    ) -> Sim {
        let base = Instant::now();
        let n = topo.size() as usize;
        let cores = (0..topo.size())
            .map(|v| Core::new(topo, v, timing, base))
            .collect();
        let mut sim = Sim {
            base,
            now: Duration::ZERO,
            cores,
            dead: vec![false; n],
            timers: vec![None; n],
            queue: BinaryHeap::new(),
            events: HashMap::new(),
            seq: 0,
            delay: Box::new(delay),
            last_arrival: HashMap::new(),
            closed: HashSet::new(),
            next_token: 0,
            responder: None,
            completions: Vec::new(),
            deliveries: Vec::new(),
            delivered: 0,
        };
        for v in 0..topo.size() {
            for c in topo.children(v) {
                sim.cores[v as usize].link_up(c, base);
            }
            sim.pump(v);
        }
        sim.deliveries.clear();
        sim
    }

    /// Answers every request delivered from now on at once with `f(vertex, origin,
    /// payload)` (without it, requests are only recorded; answer them with [`Sim::respond`]).
    pub fn set_responder(&mut self, f: impl FnMut(Vertex, Vertex, &[u8]) -> Outcome + 'static) {
        self.responder = Some(Box::new(f));
    }

    /// Virtual time since the start.
    pub fn now(&self) -> Duration {
        self.now
    }

    /// The tree.
    pub fn topology(&self) -> Topology {
        *self.cores[0].topology()
    }

    /// Vertex `v`'s core.
    pub fn core(&self, v: Vertex) -> &Core {
        &self.cores[v as usize]
    }

    /// Whether `v` was killed.
    pub fn is_dead(&self, v: Vertex) -> bool {
        self.dead[v as usize]
    }

    /// Messages delivered so far.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Every completion so far, in order.
    pub fn completions(&self) -> &[Completion] {
        &self.completions
    }

    /// Everything delivered to the hosts so far (requests, messages, losses), in order.
    pub fn deliveries(&self) -> &[Record<Delivery>] {
        &self.deliveries
    }

    fn instant(&self) -> Instant {
        self.base + self.now
    }

    fn token(&mut self) -> u64 {
        self.next_token += 1;
        self.next_token
    }

    /// Vertex `v` joins a fence now; returns the token its completion will carry.
    pub fn fence(&mut self, v: Vertex, key: FenceKey, vertices: Vec<Vertex>, data: Vec<u8>) -> u64 {
        let token = self.token();
        let now = self.instant();
        if !self.dead[v as usize] {
            self.cores[v as usize].fence(token, key, vertices, data, now);
            self.pump(v);
        }
        token
    }

    /// Vertex `v` sends a request now; returns the token its completion will carry.
    pub fn request(&mut self, v: Vertex, target: Vertex, payload: Vec<u8>) -> u64 {
        let token = self.token();
        let now = self.instant();
        if !self.dead[v as usize] {
            self.cores[v as usize].request(token, target, payload, now);
            self.pump(v);
        }
        token
    }

    /// Vertex `v` answers request `id` of `origin` now.
    pub fn respond(&mut self, v: Vertex, origin: Vertex, id: u64, result: Outcome) {
        let now = self.instant();
        if !self.dead[v as usize] {
            self.cores[v as usize].respond(origin, id, result, now);
            self.pump(v);
        }
    }

    /// Vertex `v` sends a message now.
    pub fn send(&mut self, v: Vertex, dest: Dest, payload: Vec<u8>) {
        let now = self.instant();
        if !self.dead[v as usize] {
            self.cores[v as usize].send(dest, payload, now);
            self.pump(v);
        }
    }

    /// Kills `v` now: see [`Sim::kill_at`].
    pub fn kill(&mut self, v: Vertex, silent: bool) {
        self.do_kill(v, silent);
    }

    /// Kills `v` at time `at` (after the events already scheduled for that time): it stops
    /// handling anything; unless `silent`, its neighbours see its links close one link delay
    /// later.
    pub fn kill_at(&mut self, at: Duration, v: Vertex, silent: bool) {
        self.schedule(at, Event::Kill { v, silent });
    }

    /// Runs `action` at time `at` (after the events already scheduled for that time).
    pub fn at(&mut self, at: Duration, action: impl FnOnce(&mut Sim) + 'static) {
        self.schedule(at, Event::Action(Box::new(action)));
    }

    fn schedule(&mut self, at: Duration, event: Event) {
        let seq = self.seq;
        self.seq += 1;
        self.events.insert(seq, event);
        self.queue.push(Reverse((at.max(self.now), seq)));
    }

    /// The time of the next event, if any.
    pub fn next_event(&self) -> Option<Duration> {
        self.queue.peek().map(|Reverse((t, _))| *t)
    }

    /// Handles the next event; `false` if there is none.
    pub fn step(&mut self) -> bool {
        let Some(Reverse((at, seq))) = self.queue.pop() else {
            return false;
        };
        self.now = at;
        let Some(event) = self.events.remove(&seq) else {
            return true;
        };
        let now = self.instant();
        match event {
            Event::Deliver { from, to, msg } => {
                if !self.dead[to as usize] && !self.closed.contains(&(to, from)) {
                    self.delivered += 1;
                    self.cores[to as usize].handle(from, msg, now);
                    self.pump(to);
                }
            }
            Event::Down { at, link } => {
                if !self.dead[at as usize] && self.closed.insert((at, link)) {
                    self.cores[at as usize].link_down(link, "end of stream", now);
                    self.pump(at);
                }
            }
            Event::Timer { v, at } => {
                if !self.dead[v as usize] && self.timers[v as usize] == Some(at) {
                    self.timers[v as usize] = None;
                    self.cores[v as usize].handle_timeout(now);
                    self.pump(v);
                }
            }
            Event::Kill { v, silent } => self.do_kill(v, silent),
            Event::Action(action) => action(self),
        }
        true
    }

    /// Runs every event up to time `t` included, then sets the time to `t`.
    pub fn run_until(&mut self, t: Duration) {
        while self.next_event().is_some_and(|e| e <= t) {
            self.step();
        }
        self.now = self.now.max(t);
    }

    /// Runs until nothing but timers is left (or until `limit`, whichever comes first);
    /// returns whether that happened before `limit`.
    pub fn run_until_idle(&mut self, limit: Duration) -> bool {
        loop {
            let only_timers = self
                .events
                .values()
                .all(|e| matches!(e, Event::Timer { .. }));
            if only_timers {
                return true;
            }
            match self.next_event() {
                Some(t) if t <= limit => {
                    self.step();
                }
                _ => return false,
            }
        }
    }

    fn neighbours(&self, v: Vertex) -> Vec<Vertex> {
        let topo = self.topology();
        topo.parent(v).into_iter().chain(topo.children(v)).collect()
    }

    fn do_kill(&mut self, v: Vertex, silent: bool) {
        if self.dead[v as usize] {
            return;
        }
        self.dead[v as usize] = true;
        self.timers[v as usize] = None;
        if !silent {
            self.close_all(v);
        }
    }

    /// `v` closes every link: each neighbour sees the end of stream after what `v` sent.
    fn close_all(&mut self, v: Vertex) {
        for n in self.neighbours(v) {
            self.close(v, n);
        }
    }

    fn close(&mut self, v: Vertex, n: Vertex) {
        if self.closed.insert((v, n)) {
            let at = self.arrival(v, n);
            self.schedule(at, Event::Down { at: n, link: v });
        }
    }

    /// When a message sent now from `a` to `b` arrives, behind those sent before.
    fn arrival(&mut self, a: Vertex, b: Vertex) -> Duration {
        let at = self.now + (self.delay)(a, b);
        let last = self.last_arrival.entry((a, b)).or_insert(at);
        *last = (*last).max(at);
        *last
    }

    /// `msg` from `from` to `to` arrives after the link's delay, unless the link is closed.
    fn transmit(&mut self, from: Vertex, to: Vertex, msg: Msg) {
        if !self.closed.contains(&(from, to)) {
            let at = self.arrival(from, to);
            self.schedule(at, Event::Deliver { from, to, msg });
        }
    }

    /// Carries out what core `v` asked for.
    fn pump(&mut self, v: Vertex) {
        while let Some(out) = self.cores[v as usize].poll_output() {
            match out {
                Output::Send { link, msg } => self.transmit(v, link, msg),
                Output::SendAll { links, msg } => {
                    for link in links {
                        self.transmit(v, link, msg.clone());
                    }
                }
                Output::Close { link } => self.close(v, link),
                Output::Complete { token, result } => self.completions.push(Record {
                    vertex: v,
                    at: self.now,
                    what: (token, result),
                }),
                Output::Deliver(d) => {
                    let answer = match (&d, self.responder.as_mut()) {
                        (
                            Delivery::Request {
                                origin,
                                id,
                                payload,
                            },
                            Some(f),
                        ) => Some((*origin, *id, f(v, *origin, payload))),
                        _ => None,
                    };
                    self.deliveries.push(Record {
                        vertex: v,
                        at: self.now,
                        what: d,
                    });
                    if let Some((origin, id, result)) = answer {
                        let now = self.instant();
                        self.cores[v as usize].respond(origin, id, result, now);
                    }
                }
            }
        }
        let core = &self.cores[v as usize];
        if core.is_stopped() {
            self.close_all(v);
            return;
        }
        let deadline = core
            .poll_timeout()
            .map(|d| d.saturating_duration_since(self.base));
        if deadline.is_some() && deadline != self.timers[v as usize] {
            self.timers[v as usize] = deadline;
            if let Some(at) = deadline {
                self.schedule(at, Event::Timer { v, at });
            }
        }
    }
}
