//! The sans-IO state machine of one vertex: messages from its links, link ups and downs, its
//! host's calls and the time in; messages to send, completions and deliveries out.
//!
//! No I/O, no threads, no clock reads: the caller passes `now` with every input, drains
//! [`Core::poll_output`] after each, and calls [`Core::handle_timeout`] at [`Core::poll_timeout`].
//! [`crate::net`] drives it over TCP; [`crate::sim`] drives many of them over a simulated
//! network in virtual time.
//!
//! What the core keeps: its links' states and last activity (for heartbeats and silence), the
//! fences it takes part in or relays, its own pending requests, and the subtrees it knows to
//! be lost. A vertex that relays a request keeps nothing for it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::time::{Duration, Instant};

use pmix_types::Status;
use serde_bytes::ByteBuf;

use crate::msg::{Dest, FenceKey, Msg, Part};
use crate::{Hop, Topology, Vertex};

/// The liveness settings of a vertex.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// How long a link may be silent in its outgoing direction before a heartbeat is sent.
    pub heartbeat: Duration,
    /// How long a link may be silent in its incoming direction before it is lost.
    pub dead_after: Duration,
}

/// What the tree tells its host, in the order it happened, on the tree's thread (the sink must
/// not block for long).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// Vertex `v`, a child of this one, completed its handshake (its link is up).
    ChildUp(Vertex),
    /// A message from `from`.
    Message {
        /// The sending vertex.
        from: Vertex,
        /// What it says.
        payload: Vec<u8>,
    },
    /// A request from `origin`, to be answered (once) with [`crate::Tree::respond`]`(origin,
    /// id, ..)`.
    Request {
        /// The asking vertex.
        origin: Vertex,
        /// The request's id at `origin`.
        id: u64,
        /// The question.
        payload: Vec<u8>,
    },
    /// The subtree rooted at `vertex` is lost (`reason` names what was seen: EOF, error,
    /// silence, failed handshake). Delivered on every vertex once the root has spread it;
    /// pending fences and requests involving it have already failed.
    Lost {
        /// The root of the lost subtree.
        vertex: Vertex,
        /// What was seen.
        reason: String,
    },
    /// This vertex's parent is lost: the lifeline. The tree is shut down.
    ParentLost {
        /// What was seen.
        reason: String,
    },
}

/// The result of a fence or a request.
pub type Outcome = Result<Vec<u8>, Status>;

/// What the core asks of its driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Output {
    /// Send `msg` on the link to the neighbour `link` (parent or child), after everything sent
    /// there before.
    Send {
        /// The neighbour.
        link: Vertex,
        /// The message.
        msg: Msg,
    },
    /// Send the same `msg` on each of `links`, as [`Output::Send`] to each in turn: a driver
    /// encodes it once (a fence's answer, the whole job's data, goes to every child).
    SendAll {
        /// The neighbours.
        links: Vec<Vertex>,
        /// The message.
        msg: Msg,
    },
    /// The link to `link` is finished (its peer stayed silent, or joined after its subtree was
    /// declared lost): close it. No link-down is expected back for it.
    Close {
        /// The neighbour.
        link: Vertex,
    },
    /// The fence or request the driver started with `token` is over.
    Complete {
        /// The driver's token.
        token: u64,
        /// Its result.
        result: Outcome,
    },
    /// Something for the host.
    Deliver(Delivery),
}

/// The state of the link to one neighbour.
#[derive(Debug)]
enum State {
    /// Not connected yet: what is sent waits here.
    Pending(Vec<Msg>),
    Up,
    Down,
}

#[derive(Debug)]
struct Link {
    state: State,
    last_rx: Instant,
    last_tx: Instant,
}

impl Link {
    fn up(now: Instant) -> Link {
        Link {
            state: State::Up,
            last_rx: now,
            last_tx: now,
        }
    }
}

/// One fence as this vertex sees it.
#[derive(Debug)]
struct Fence {
    vertices: Vec<Vertex>,
    /// Children whose subtree holds participants: the ones heard from and released to.
    children: Vec<Vertex>,
    /// Children not heard from yet.
    waiting: Vec<Vertex>,
    /// Whether this vertex participates and has not contributed yet.
    waiting_me: bool,
    /// The host's call, once made.
    token: Option<u64>,
    parts: Vec<Part>,
    /// Sent up; waiting for the release.
    sent_up: bool,
}

/// The state machine of one vertex.
#[derive(Debug)]
pub struct Core {
    topo: Topology,
    me: Vertex,
    timing: Timing,
    now: Instant,
    /// `None` at the root.
    parent: Option<Link>,
    children: BTreeMap<Vertex, Link>,
    /// Roots of the subtrees known lost here.
    lost: Vec<Vertex>,
    fences: HashMap<FenceKey, Fence>,
    /// Own pending requests: id → (target, token).
    requests: HashMap<u64, (Vertex, u64)>,
    next_id: u64,
    out: VecDeque<Output>,
    stopped: bool,
}

fn lost_connection() -> Status {
    Status::ERR_LOST_CONNECTION
}

/// Whether `vertices` is sorted, without duplicates, and every one below `size`.
pub(crate) fn valid_set(topo: &Topology, vertices: &[Vertex]) -> bool {
    vertices.windows(2).all(|w| w[0] < w[1]) && vertices.last().is_none_or(|&v| v < topo.size())
}

/// Whether the subtree of `v` holds one of `sorted`. The descendants of `v` at each level
/// below it are a contiguous range, so this costs a binary search per level.
pub(crate) fn subtree_intersects(topo: &Topology, v: Vertex, sorted: &[Vertex]) -> bool {
    let size = u64::from(topo.size());
    let k = u64::from(topo.radix());
    let (mut lo, mut hi) = (u64::from(v), u64::from(v));
    while lo < size {
        let top = hi.min(size - 1);
        let i = sorted.partition_point(|&x| u64::from(x) < lo);
        if sorted.get(i).is_some_and(|&x| u64::from(x) <= top) {
            return true;
        }
        lo = lo.saturating_mul(k).saturating_add(1);
        hi = top.saturating_mul(k).saturating_add(k);
    }
    false
}

impl Core {
    /// Vertex `me` of `topo` at time `now`: its parent link (if any) is up, its children's
    /// links are pending until [`Core::link_up`].
    pub fn new(topo: Topology, me: Vertex, timing: Timing, now: Instant) -> Core {
        let children = topo
            .children(me)
            .map(|c| {
                (
                    c,
                    Link {
                        state: State::Pending(Vec::new()),
                        last_rx: now,
                        last_tx: now,
                    },
                )
            })
            .collect();
        Core {
            topo,
            me,
            timing,
            now,
            parent: topo.parent(me).map(|_| Link::up(now)),
            children,
            lost: Vec::new(),
            fences: HashMap::new(),
            requests: HashMap::new(),
            next_id: 0,
            out: VecDeque::new(),
            stopped: false,
        }
    }

    /// This vertex.
    pub fn me(&self) -> Vertex {
        self.me
    }

    /// The tree.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// True once the parent is lost or [`Core::shutdown`] was called: every input is ignored.
    pub fn is_stopped(&self) -> bool {
        self.stopped
    }

    /// How long a link may be silent before it is lost ([`Timing::dead_after`]).
    pub fn dead_after(&self) -> Duration {
        self.timing.dead_after
    }

    /// Fences and requests not completed yet (fences relayed for others included).
    pub fn pending(&self) -> usize {
        self.fences.len() + self.requests.len()
    }

    /// The next output, if any.
    pub fn poll_output(&mut self) -> Option<Output> {
        self.out.pop_front()
    }

    /// When [`Core::handle_timeout`] must be called next (a heartbeat to send, a silence to notice).
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.stopped {
            return None;
        }
        self.parent
            .iter()
            .chain(self.children.values())
            .filter(|l| matches!(l.state, State::Up))
            .map(|l| (l.last_tx + self.timing.heartbeat).min(l.last_rx + self.timing.dead_after))
            .min()
    }

    /// The time is `now`: sends heartbeats, notices silent links.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        if self.stopped {
            return;
        }
        let Timing {
            heartbeat,
            dead_after,
        } = self.timing;
        if let (Some(p), Some(link)) = (self.topo.parent(self.me), self.parent.as_ref()) {
            if now >= link.last_rx + dead_after {
                self.out.push_back(Output::Close { link: p });
                self.parent_lost(format!("parent {p} silent for {dead_after:?}"));
                return;
            }
            if now >= link.last_tx + heartbeat {
                self.send_on(p, Msg::Heartbeat);
            }
        }
        let mut silent = Vec::new();
        let mut idle = Vec::new();
        for (&c, link) in &self.children {
            if !matches!(link.state, State::Up) {
                continue;
            }
            if now >= link.last_rx + dead_after {
                silent.push(c);
            } else if now >= link.last_tx + heartbeat {
                idle.push(c);
            }
        }
        for c in idle {
            self.send_on(c, Msg::Heartbeat);
        }
        for c in silent {
            if let Some(link) = self.children.get_mut(&c) {
                link.state = State::Down;
            }
            self.out.push_back(Output::Close { link: c });
            self.child_lost(c, format!("vertex {c} silent for {dead_after:?}"));
        }
    }

    /// The link to child `c` completed its handshake.
    pub fn link_up(&mut self, c: Vertex, now: Instant) {
        self.now = now;
        if self.stopped {
            self.out.push_back(Output::Close { link: c });
            return;
        }
        let lost = self.is_lost(c);
        let Some(link) = self.children.get_mut(&c) else {
            tracing::warn!(me = self.me, c, "link up from a vertex that is not a child");
            self.out.push_back(Output::Close { link: c });
            return;
        };
        if lost || !matches!(link.state, State::Pending(_)) {
            self.out.push_back(Output::Close { link: c });
            return;
        }
        let State::Pending(queued) = std::mem::replace(&mut link.state, State::Up) else {
            return;
        };
        link.last_rx = now;
        link.last_tx = now;
        self.out.push_back(Output::Deliver(Delivery::ChildUp(c)));
        for msg in queued {
            self.send_on(c, msg);
        }
    }

    /// The link to neighbour `link` closed or failed (`reason` says how).
    pub fn link_down(&mut self, link: Vertex, reason: &str, now: Instant) {
        self.now = now;
        if self.stopped {
            return;
        }
        if Some(link) == self.topo.parent(self.me) {
            self.parent_lost(format!("link to parent {link}: {reason}"));
            return;
        }
        let Some(l) = self.children.get_mut(&link) else {
            return;
        };
        if matches!(l.state, State::Down) {
            return;
        }
        l.state = State::Down;
        self.child_lost(link, format!("link to vertex {link}: {reason}"));
    }

    /// Stops this vertex: every pending fence and request fails with ERR_LOST_CONNECTION.
    pub fn shutdown(&mut self) {
        if !self.stopped {
            self.stopped = true;
            self.fail_all();
        }
    }

    /// Joins fence `key` (see [`crate::Tree::fence`]); completes `token`.
    pub fn fence(
        &mut self,
        token: u64,
        key: FenceKey,
        vertices: Vec<Vertex>,
        data: Vec<u8>,
        now: Instant,
    ) {
        self.now = now;
        if self.stopped {
            return self.complete(token, Err(lost_connection()));
        }
        if !valid_set(&self.topo, &vertices) || vertices.binary_search(&self.me).is_err() {
            return self.complete(token, Err(Status::ERR_BAD_PARAM));
        }
        if self.involves_lost(&vertices) {
            return self.complete(token, Err(lost_connection()));
        }
        let me = self.me;
        let fence = self.fence_state(&key, vertices.clone());
        if fence.vertices != vertices || !fence.waiting_me {
            return self.complete(token, Err(Status::ERR_BAD_PARAM));
        }
        fence.waiting_me = false;
        fence.token = Some(token);
        fence.parts.push(Part { vertex: me, data });
        self.progress(&key);
    }

    /// Sends a request to `target` (see [`crate::Tree::request`]); completes `token`.
    pub fn request(&mut self, token: u64, target: Vertex, payload: Vec<u8>, now: Instant) {
        self.now = now;
        if self.stopped {
            return self.complete(token, Err(lost_connection()));
        }
        if target >= self.topo.size() {
            return self.complete(token, Err(Status::ERR_BAD_PARAM));
        }
        if self.is_lost(target) {
            return self.complete(token, Err(lost_connection()));
        }
        let id = self.next_id;
        self.next_id += 1;
        self.requests.insert(id, (target, token));
        let msg = Msg::Request {
            origin: self.me,
            target,
            id,
            payload: ByteBuf::from(payload),
        };
        self.route(target, msg, None);
    }

    /// Answers request `id` of `origin`.
    pub fn respond(&mut self, origin: Vertex, id: u64, result: Outcome, now: Instant) {
        self.now = now;
        if self.stopped || origin >= self.topo.size() {
            return;
        }
        let msg = Msg::Response {
            origin,
            id,
            result: result.map(ByteBuf::from),
        };
        self.route(origin, msg, None);
    }

    /// Sends a message to `dest` (see [`crate::Tree::send`]).
    pub fn send(&mut self, dest: Dest, payload: Vec<u8>, now: Instant) {
        self.now = now;
        if self.stopped {
            return;
        }
        let msg = Msg::Message {
            from: self.me,
            dest,
            payload: ByteBuf::from(payload),
        };
        match dest {
            Dest::Vertex(t) if t >= self.topo.size() => {
                tracing::warn!(
                    me = self.me,
                    t,
                    "message to a vertex beyond the tree dropped"
                );
            }
            Dest::Vertex(t) => self.route(t, msg, None),
            Dest::All => match self.topo.parent(self.me) {
                Some(p) => self.send_on(p, msg),
                None => self.flood(msg),
            },
        }
    }

    /// A message arrived on the link to neighbour `link`.
    pub fn handle(&mut self, link: Vertex, msg: Msg, now: Instant) {
        self.now = now;
        if self.stopped {
            return;
        }
        let from_parent = Some(link) == self.topo.parent(self.me);
        let l = if from_parent {
            self.parent.as_mut()
        } else {
            self.children.get_mut(&link)
        };
        match l {
            Some(l) if matches!(l.state, State::Up) => l.last_rx = now,
            _ => {
                tracing::warn!(
                    me = self.me,
                    link,
                    "message on a link that is not up dropped"
                );
                return;
            }
        }
        match msg {
            Msg::Heartbeat => {}
            Msg::FenceUp {
                key,
                vertices,
                parts,
            } if !from_parent => self.fence_up(link, key, vertices, parts),
            Msg::FenceDown { key, result } if from_parent => self.fence_down(key, result),
            Msg::Request {
                origin,
                target,
                id,
                payload,
            } => {
                if origin >= self.topo.size() || target >= self.topo.size() {
                    return self.invalid(link, "request");
                }
                if target == self.me {
                    self.out.push_back(Output::Deliver(Delivery::Request {
                        origin,
                        id,
                        payload: payload.into_vec(),
                    }));
                } else {
                    let msg = Msg::Request {
                        origin,
                        target,
                        id,
                        payload,
                    };
                    self.route(target, msg, Some(link));
                }
            }
            Msg::Response { origin, id, result } => {
                if origin >= self.topo.size() {
                    return self.invalid(link, "response");
                }
                let msg = Msg::Response { origin, id, result };
                self.route(origin, msg, Some(link));
            }
            Msg::Message {
                from,
                dest,
                payload,
            } => self.message(link, from_parent, from, dest, payload),
            Msg::Lost { vertex, reason } => {
                if from_parent {
                    if vertex < self.topo.size() {
                        self.mark_lost(vertex);
                        self.announce(vertex, reason);
                    }
                } else if vertex < self.topo.size() && self.topo.in_subtree(link, vertex) {
                    self.child_lost(vertex, reason);
                } else {
                    self.invalid(link, "loss report");
                }
            }
            other => {
                tracing::warn!(me = self.me, link, msg = ?other, "unexpected message dropped");
            }
        }
    }

    fn invalid(&self, link: Vertex, what: &str) {
        tracing::warn!(me = self.me, link, "invalid {what} dropped");
    }

    fn complete(&mut self, token: u64, result: Outcome) {
        self.out.push_back(Output::Complete { token, result });
    }

    /// The link to neighbour `link` (the parent or a child), if there is one.
    fn link_mut(&mut self, link: Vertex) -> Option<&mut Link> {
        if Some(link) == self.topo.parent(self.me) {
            self.parent.as_mut()
        } else {
            self.children.get_mut(&link)
        }
    }

    /// Sends `msg` on each of `links`: now on those that are up (one [`Output::SendAll`], or
    /// an [`Output::Send`] for one), once they are on those pending, never on those down.
    fn send_on_all(&mut self, links: &[Vertex], msg: Msg) {
        let now = self.now;
        let mut up = Vec::with_capacity(links.len());
        for &link in links {
            let Some(l) = self.link_mut(link) else {
                continue;
            };
            match &mut l.state {
                State::Up => {
                    l.last_tx = now;
                    up.push(link);
                }
                State::Pending(queue) => queue.push(msg.clone()),
                State::Down => {}
            }
        }
        match up.as_slice() {
            [] => {}
            [link] => self.out.push_back(Output::Send { link: *link, msg }),
            _ => self.out.push_back(Output::SendAll { links: up, msg }),
        }
    }

    /// Sends `msg` on the link to neighbour `link` (see [`Core::send_on_all`]).
    fn send_on(&mut self, link: Vertex, msg: Msg) {
        self.send_on_all(&[link], msg);
    }

    /// Sends `msg` one hop towards `to`, or handles it here if `to` is this vertex. A message
    /// that would go back where it came from is dropped (only a confused peer sends one).
    fn route(&mut self, to: Vertex, msg: Msg, came_from: Option<Vertex>) {
        let next = match self.topo.hop(self.me, to) {
            Hop::Here => return self.arrived(msg),
            Hop::Up => self.topo.parent(self.me),
            Hop::Down(c) => Some(c),
        };
        match next {
            Some(n) if Some(n) != came_from => self.send_on(n, msg),
            _ => tracing::warn!(me = self.me, to, "unroutable message dropped"),
        }
    }

    /// A routed message reached its destination, this vertex.
    fn arrived(&mut self, msg: Msg) {
        match msg {
            Msg::Request {
                origin,
                id,
                payload,
                ..
            } => self.out.push_back(Output::Deliver(Delivery::Request {
                origin,
                id,
                payload: payload.into_vec(),
            })),
            Msg::Response { id, result, .. } => {
                if let Some((_, token)) = self.requests.remove(&id) {
                    self.complete(token, result.map(ByteBuf::into_vec));
                }
            }
            Msg::Message { from, payload, .. } => {
                self.out.push_back(Output::Deliver(Delivery::Message {
                    from,
                    payload: payload.into_vec(),
                }))
            }
            _ => {}
        }
    }

    fn message(
        &mut self,
        link: Vertex,
        from_parent: bool,
        from: Vertex,
        dest: Dest,
        payload: ByteBuf,
    ) {
        if from >= self.topo.size() || (!from_parent && !self.topo.in_subtree(link, from)) {
            return self.invalid(link, "message");
        }
        let msg = Msg::Message {
            from,
            dest,
            payload,
        };
        match dest {
            Dest::Vertex(t) if t < self.topo.size() => self.route(t, msg, Some(link)),
            Dest::Vertex(_) => self.invalid(link, "message"),
            Dest::All => match self.topo.parent(self.me) {
                Some(p) if !from_parent => self.send_on(p, msg),
                _ => self.flood(msg),
            },
        }
    }

    /// A message to every vertex, on its way down: delivered here unless this vertex sent it,
    /// and passed to every child.
    fn flood(&mut self, msg: Msg) {
        let children: Vec<Vertex> = self.children.keys().copied().collect();
        for c in children {
            self.send_on(c, msg.clone());
        }
        if let Msg::Message { from, payload, .. } = msg {
            if from != self.me {
                self.out.push_back(Output::Deliver(Delivery::Message {
                    from,
                    payload: payload.into_vec(),
                }));
            }
        }
    }

    /// The fence `key`'s state here, created (for `vertices`) if new.
    fn fence_state(&mut self, key: &FenceKey, vertices: Vec<Vertex>) -> &mut Fence {
        let topo = self.topo;
        let me = self.me;
        self.fences.entry(key.clone()).or_insert_with(|| {
            let children: Vec<Vertex> = topo
                .children(me)
                .filter(|&c| subtree_intersects(&topo, c, &vertices))
                .collect();
            Fence {
                waiting_me: vertices.binary_search(&me).is_ok(),
                waiting: children.clone(),
                children,
                vertices,
                token: None,
                parts: Vec::new(),
                sent_up: false,
            }
        })
    }

    fn fence_up(&mut self, c: Vertex, key: FenceKey, vertices: Vec<Vertex>, parts: Vec<Part>) {
        let topo = self.topo;
        let parts_ok = parts.windows(2).all(|w| w[0].vertex < w[1].vertex)
            && parts
                .iter()
                .all(|p| topo.in_subtree(c, p.vertex) && vertices.binary_search(&p.vertex).is_ok());
        if !valid_set(&topo, &vertices) || !parts_ok || !subtree_intersects(&topo, c, &vertices) {
            return self.invalid(c, "fence contribution");
        }
        if self.involves_lost(&vertices) {
            // Failed here already; the child hears of the loss from the root.
            return;
        }
        let fence = self.fence_state(&key, vertices.clone());
        if fence.vertices != vertices {
            return tracing::warn!(me = self.me, c, ?key, "fence key reused for another set");
        }
        let Some(i) = fence.waiting.iter().position(|&w| w == c) else {
            return tracing::warn!(me = self.me, c, ?key, "second contribution dropped");
        };
        fence.waiting.swap_remove(i);
        fence.parts.extend(parts);
        self.progress(&key);
    }

    /// Sends fence `key` up, or releases it at the root, once nothing more is awaited here.
    fn progress(&mut self, key: &FenceKey) {
        let Some(fence) = self.fences.get_mut(key) else {
            return;
        };
        if fence.waiting_me || !fence.waiting.is_empty() || fence.sent_up {
            return;
        }
        let mut parts = std::mem::take(&mut fence.parts);
        // Each child's parts are sorted already: a stable sort of runs is a merge.
        parts.sort_by_key(|p| p.vertex);
        match self.topo.parent(self.me) {
            Some(p) => {
                fence.sent_up = true;
                let msg = Msg::FenceUp {
                    key: key.clone(),
                    vertices: fence.vertices.clone(),
                    parts,
                };
                self.send_on(p, msg);
            }
            None => {
                let total = parts.iter().map(|p| p.data.len()).sum();
                let mut data = Vec::with_capacity(total);
                for p in parts {
                    data.extend_from_slice(&p.data);
                }
                self.fence_down(key.clone(), Ok(ByteBuf::from(data)));
            }
        }
    }

    /// Releases fence `key` here and below.
    fn fence_down(&mut self, key: FenceKey, result: Result<ByteBuf, Status>) {
        let Some(fence) = self.fences.remove(&key) else {
            return;
        };
        // One message for every child, encoded once by the driver; copied only if this
        // vertex also takes part itself.
        let own = fence.token.map(|token| (token, result.clone()));
        let msg = Msg::FenceDown { key, result };
        self.send_on_all(&fence.children, msg);
        if let Some((token, result)) = own {
            self.complete(token, result.map(ByteBuf::into_vec));
        }
    }

    fn is_lost(&self, v: Vertex) -> bool {
        self.lost.iter().any(|&r| self.topo.in_subtree(r, v))
    }

    fn involves_lost(&self, vertices: &[Vertex]) -> bool {
        self.lost
            .iter()
            .any(|&r| subtree_intersects(&self.topo, r, vertices))
    }

    /// The subtree of `v` is lost: every pending fence and request involving it fails.
    fn mark_lost(&mut self, v: Vertex) {
        if !self.is_lost(v) {
            self.lost.push(v);
        }
        let topo = self.topo;
        let mut failed: Vec<FenceKey> = self
            .fences
            .iter()
            .filter(|(_, f)| subtree_intersects(&topo, v, &f.vertices))
            .map(|(k, _)| k.clone())
            .collect();
        failed.sort();
        for key in failed {
            if let Some(Fence {
                token: Some(token), ..
            }) = self.fences.remove(&key)
            {
                self.complete(token, Err(lost_connection()));
            }
        }
        let mut failed: Vec<(u64, u64)> = self
            .requests
            .iter()
            .filter(|(_, (target, _))| topo.in_subtree(v, *target))
            .map(|(&id, &(_, token))| (id, token))
            .collect();
        failed.sort();
        for (id, token) in failed {
            self.requests.remove(&id);
            self.complete(token, Err(lost_connection()));
        }
    }

    /// The subtree of `v`, below this vertex, is lost: fail here at once and tell the root
    /// (at the root: tell everyone).
    fn child_lost(&mut self, v: Vertex, reason: String) {
        match self.topo.parent(self.me) {
            Some(p) => {
                self.mark_lost(v);
                self.send_on(p, Msg::Lost { vertex: v, reason });
            }
            None => {
                if self.is_lost(v) {
                    return;
                }
                self.mark_lost(v);
                self.announce(v, reason);
            }
        }
    }

    /// Tells the host and every child that the subtree of `v` is lost (spreading from the
    /// root).
    fn announce(&mut self, v: Vertex, reason: String) {
        let children: Vec<Vertex> = self.children.keys().copied().collect();
        for c in children {
            let msg = Msg::Lost {
                vertex: v,
                reason: reason.clone(),
            };
            self.send_on(c, msg);
        }
        self.out
            .push_back(Output::Deliver(Delivery::Lost { vertex: v, reason }));
    }

    fn parent_lost(&mut self, reason: String) {
        self.stopped = true;
        self.fail_all();
        self.out
            .push_back(Output::Deliver(Delivery::ParentLost { reason }));
    }

    fn fail_all(&mut self) {
        let mut tokens: Vec<u64> = self.fences.drain().filter_map(|(_, f)| f.token).collect();
        tokens.extend(self.requests.drain().map(|(_, (_, token))| token));
        tokens.sort();
        for token in tokens {
            self.complete(token, Err(lost_connection()));
        }
        for link in self.children.values_mut() {
            link.state = State::Down;
        }
        if let Some(p) = self.parent.as_mut() {
            p.state = State::Down;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subtree_intersection_agrees_with_the_walk() {
        for (size, radix) in [(1, 1), (5, 1), (17, 2), (40, 3), (100, 16)] {
            let t = Topology::new(size, radix);
            for v in 0..size {
                for w in 0..size {
                    let expect = t.in_subtree(v, w);
                    assert_eq!(subtree_intersects(&t, v, &[w]), expect, "{v} {w}");
                }
                assert!(!subtree_intersects(&t, v, &[]));
                let all: Vec<Vertex> = (0..size).collect();
                assert!(subtree_intersects(&t, v, &all));
            }
        }
    }

    #[test]
    fn a_malformed_set_is_a_bad_param() {
        let now = Instant::now();
        let timing = Timing {
            heartbeat: Duration::from_secs(1),
            dead_after: Duration::from_secs(5),
        };
        let mut core = Core::new(Topology::new(4, 2), 1, timing, now);
        let key = FenceKey {
            set: vec![],
            seq: 0,
        };
        for (token, vertices) in [vec![2, 1], vec![1, 1], vec![0, 2], vec![1, 4], vec![]]
            .into_iter()
            .enumerate()
        {
            core.fence(token as u64, key.clone(), vertices, vec![], now);
            assert_eq!(
                core.poll_output(),
                Some(Output::Complete {
                    token: token as u64,
                    result: Err(Status::ERR_BAD_PARAM)
                })
            );
        }
        assert_eq!(core.pending(), 0);
    }

    /// A fence's answer goes to every child as one output, the message built once (a driver
    /// encodes it once), and to the vertex's own part.
    #[test]
    fn a_fence_answer_is_one_output_for_every_child() {
        let now = Instant::now();
        let timing = Timing {
            heartbeat: Duration::from_secs(1),
            dead_after: Duration::from_secs(5),
        };
        let mut root = Core::new(Topology::new(5, 4), 0, timing, now);
        for c in 1..5 {
            root.link_up(c, now);
        }
        while root.poll_output().is_some() {}
        let key = FenceKey {
            set: b"j".to_vec(),
            seq: 1,
        };
        let all: Vec<Vertex> = (0..5).collect();
        root.fence(7, key.clone(), all.clone(), b"r".to_vec(), now);
        for c in 1..5 {
            let up = Msg::FenceUp {
                key: key.clone(),
                vertices: all.clone(),
                parts: vec![Part {
                    vertex: c,
                    data: vec![b'0' + c as u8],
                }],
            };
            root.handle(c, up, now);
        }
        let want = Msg::FenceDown {
            key,
            result: Ok(ByteBuf::from(b"r1234".to_vec())),
        };
        let outputs: Vec<Output> = std::iter::from_fn(|| root.poll_output()).collect();
        assert_eq!(
            outputs,
            vec![
                Output::SendAll {
                    links: vec![1, 2, 3, 4],
                    msg: want
                },
                Output::Complete {
                    token: 7,
                    result: Ok(b"r1234".to_vec())
                }
            ]
        );
    }
}
