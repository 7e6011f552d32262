//! In-memory engine tests: many simulated clients, virtual time, no sockets or threads.

use std::time::{Duration, Instant};

use pmix_types::{
    DataArray, Info, Key, Nspace, Persistence, Proc, Rank, Scope, Status, Value, attr,
};
use pmix_wire::{Kv, ProcKvs, Reply, ReplyBody, Request};

use super::{
    Auth, ConnId, Engine, HostCall, HostOutcome, OpId, Output, PeerCreds, Proofs, SECRET_LEN,
};

const UID: u32 = 1000;
const GID: u32 = 100;

fn ns(s: &str) -> Nspace {
    Nspace::new(s).unwrap()
}

fn key(s: &str) -> Key {
    Key::new(s).unwrap()
}

fn secret(ns: &str, rank: u32) -> [u8; SECRET_LEN] {
    let mut s = [0u8; SECRET_LEN];
    s[0] = ns.len() as u8;
    s[1] = rank as u8;
    s[2] = 0xA5;
    s
}

/// What `name:rank` is registered with: its secret, and whether a bare uid claims it.
fn proofs_by(ns: &str, rank: u32, by_uid: bool) -> Proofs {
    Proofs {
        secret: secret(ns, rank),
        by_uid,
    }
}

/// What `name:rank` is registered with by default: any client library may claim it.
fn proofs(ns: &str, rank: u32) -> Proofs {
    proofs_by(ns, rank, true)
}

/// A harness around one engine: host calls are answered with success unless a test takes them.
struct Sim {
    eng: Engine,
    now: Instant,
    replies: Vec<(ConnId, u32, Reply)>,
    accepted: Vec<ConnId>,
    refused: Vec<(ConnId, Status)>,
    /// The reasons of `refused`, in the same order.
    reasons: Vec<String>,
    closed: Vec<ConnId>,
    host_calls: Vec<(OpId, HostCall)>,
    dmodex: Vec<(u64, Result<Vec<u8>, Status>)>,
    events: Vec<(ConnId, pmix_wire::Event)>,
    cleanups: Vec<super::job_control::Cleanup>,
    auto_host: bool,
    next_id: u32,
    /// Tools accepted, with the names they were given.
    tools: Vec<(ConnId, Proc)>,
    /// Output forwarded to tools.
    iof: Vec<(ConnId, pmix_wire::IofChunk)>,
}

impl Sim {
    fn new() -> Self {
        Sim {
            eng: Engine::new("node0".into(), vec![], crate::NameService::BuiltIn),
            now: Instant::now(),
            replies: vec![],
            accepted: vec![],
            refused: vec![],
            reasons: vec![],
            closed: vec![],
            host_calls: vec![],
            dmodex: vec![],
            events: vec![],
            cleanups: vec![],
            auto_host: true,
            next_id: 1,
            tools: vec![],
            iof: vec![],
        }
    }

    /// Registers `name` with `size` ranks, all on this node, and every rank as a client.
    fn job(&mut self, name: &str, size: u32) {
        let nodes = pmix_regex::generate_regex(&["node0"]).unwrap();
        let ranks: Vec<u32> = (0..size).collect();
        let ppn = pmix_regex::generate_ppn(&[ranks]).unwrap();
        let info = vec![
            Info::attr(attr::JOB_SIZE, size),
            Info::attr(attr::NODE_MAP, Value::Regex(nodes)),
            Info::attr(attr::PROC_MAP, Value::Regex(ppn)),
        ];
        self.eng.register_nspace(ns(name), size, &info).unwrap();
        for r in 0..size {
            self.eng
                .register_client(&Proc::new(ns(name), r), UID, GID, proofs(name, r))
                .unwrap();
        }
    }

    fn pump(&mut self) {
        loop {
            let mut progressed = false;
            while let Some(out) = self.eng.poll_output() {
                progressed = true;
                match out {
                    Output::Accept { conn, .. } => self.accepted.push(conn),
                    Output::ToolAccept { conn, tool, .. } => self.tools.push((conn, tool)),
                    Output::Refuse {
                        conn,
                        status,
                        reason,
                    } => {
                        self.refused.push((conn, status));
                        self.reasons.push(reason);
                    }
                    Output::Reply { conn, id, reply } => self.replies.push((conn, id, reply)),
                    Output::SharedReply { to, reply } => {
                        for (conn, id) in to {
                            self.replies.push((conn, id, (*reply).clone()));
                        }
                    }
                    Output::Close { conn } => {
                        self.closed.push(conn);
                        self.eng.handle_closed(conn);
                    }
                    Output::Host { op, call } => self.host_calls.push((op, call)),
                    Output::Dmodex { token, result } => self.dmodex.push((token, result)),
                    Output::Event { conn, event } => self.events.push((conn, (*event).clone())),
                    Output::Iof { conn, chunk } => self.iof.push((conn, (*chunk).clone())),
                    Output::Cleanup { list } => self.cleanups.extend(list),
                }
            }
            if self.auto_host {
                let calls: Vec<_> = self.host_calls.drain(..).collect();
                for (op, call) in calls {
                    let outcome = match call {
                        HostCall::FenceNb { .. }
                        | HostCall::DirectModex { .. }
                        | HostCall::Group { .. } => {
                            self.host_calls.push((op, call));
                            continue;
                        }
                        _ => HostOutcome::Unit(Ok(())),
                    };
                    progressed = true;
                    self.eng.handle_host_done(op, outcome);
                }
            }
            if !progressed {
                break;
            }
        }
    }

    /// Connects `conn` as `name:rank` with the right credentials; asserts acceptance.
    fn connect(&mut self, conn: ConnId, name: &str, rank: u32) {
        self.hello(
            conn,
            name,
            rank,
            &secret(name, rank),
            PeerCreds { uid: UID, gid: GID },
        );
        assert!(
            self.accepted.contains(&conn),
            "{name}:{rank} was not accepted: {:?}",
            self.refused
        );
    }

    /// Connects `conn` as `name:rank` when the host is answered by hand (`auto_host` off):
    /// answers the client_connected call itself.
    fn connect_answering_host(&mut self, conn: ConnId, name: &str, rank: u32) {
        let auth = Auth::Secret {
            secret: secret(name, rank).to_vec(),
            creds: Some(PeerCreds { uid: UID, gid: GID }),
        };
        self.eng
            .handle_hello(conn, &Proc::new(ns(name), Rank(rank)), auth);
        self.pump();
        let (op, call) = self.host_calls.remove(0);
        assert!(
            matches!(call, HostCall::ClientConnected { .. }),
            "expected client_connected, got {call:?}"
        );
        self.eng.handle_host_done(op, HostOutcome::Unit(Ok(())));
        self.pump();
        assert!(
            self.accepted.contains(&conn),
            "{name}:{rank} was not accepted"
        );
    }

    fn hello(&mut self, conn: ConnId, name: &str, rank: u32, secret: &[u8], creds: PeerCreds) {
        let auth = Auth::Secret {
            secret: secret.to_vec(),
            creds: Some(creds),
        };
        self.eng
            .handle_hello(conn, &Proc::new(ns(name), Rank(rank)), auth);
        self.pump();
    }

    fn send(&mut self, conn: ConnId, req: Request) -> u32 {
        let id = self.next_id;
        self.next_id += 1;
        self.eng.handle_request(conn, id, req, self.now);
        self.pump();
        id
    }

    fn take_reply(&mut self, conn: ConnId, id: u32) -> Option<Reply> {
        let pos = self
            .replies
            .iter()
            .position(|(c, i, _)| *c == conn && *i == id)?;
        Some(self.replies.remove(pos).2)
    }

    fn reply(&mut self, conn: ConnId, id: u32) -> Reply {
        self.take_reply(conn, id)
            .unwrap_or_else(|| panic!("no reply to request {id} of conn {conn}"))
    }

    /// `conn` registers for the events of `codes` (every code when empty); asserts success.
    fn register_events(&mut self, conn: ConnId, codes: &[Status]) {
        let id = self.send(
            conn,
            Request::RegisterEvents {
                codes: codes.to_vec(),
                info: vec![],
            },
        );
        assert_eq!(self.reply(conn, id).status, Status::SUCCESS);
    }

    /// The host answers callback `op`; the engine's outputs are taken.
    fn answer(&mut self, op: OpId, outcome: HostOutcome) {
        self.eng.handle_host_done(op, outcome);
        self.pump();
    }

    fn advance(&mut self, d: Duration) {
        self.now += d;
        self.eng.handle_timeout(self.now);
        self.pump();
    }
}

fn commit(kvs: &[(&str, Scope, Value)]) -> Request {
    Request::Commit {
        kvs: kvs
            .iter()
            .map(|(k, s, v)| Kv {
                scope: *s,
                key: key(k),
                value: v.clone(),
            })
            .collect(),
    }
}

fn fence(procs: Vec<Proc>, collect: bool) -> Request {
    let info = if collect {
        vec![Info::attr(attr::COLLECT_DATA, true)]
    } else {
        vec![]
    };
    Request::Fence { procs, info }
}

fn get(p: Proc, k: &str, info: Vec<Info>) -> Request {
    Request::Get {
        proc: p,
        key: Some(key(k)),
        info,
    }
}

fn fence_data(r: &Reply) -> &[ProcKvs] {
    match &r.body {
        ReplyBody::Fence { data } => data,
        other => panic!("not fence data: {other:?}"),
    }
}

#[test]
fn handshake_refusals_have_their_statuses() {
    let mut s = Sim::new();
    s.job("a", 2);
    let good = PeerCreds { uid: UID, gid: GID };
    s.hello(1, "nope", 0, &secret("nope", 0), good);
    s.hello(2, "a", 7, &secret("a", 7), good);
    s.hello(
        3,
        "a",
        0,
        &secret("a", 0),
        PeerCreds {
            uid: UID + 1,
            gid: GID,
        },
    );
    s.hello(4, "a", 0, &secret("a", 1), good);
    s.hello(5, "a", 0, &secret("a", 0), good);
    s.hello(6, "a", 0, &secret("a", 0), good);
    assert_eq!(
        s.refused,
        vec![
            (1, Status::ERR_NOT_FOUND),
            (2, Status::ERR_NOT_FOUND),
            (3, Status::ERR_NO_PERMISSIONS),
            (4, Status::ERR_INVALID_CRED),
            (6, Status::ERR_EXISTS),
        ]
    );
    assert_eq!(s.accepted, vec![5]);
    // The accepted client is still served.
    let id = s.send(5, commit(&[("k", Scope::GLOBAL, Value::Uint8(1))]));
    assert_eq!(s.reply(5, id).status, Status::SUCCESS);
}

#[test]
fn a_vouched_identity_needs_no_secret_but_still_its_registration_and_credentials() {
    let mut s = Sim::new();
    s.job("a", 3);
    let me = |rank| Proc::new(ns("a"), Rank(rank));
    let vouched = |creds| Auth::Vouched { creds };
    let good = PeerCreds { uid: UID, gid: GID };
    let other_gid = PeerCreds {
        uid: UID,
        gid: GID + 1,
    };
    s.eng.handle_hello(1, &me(0), vouched(None));
    s.eng.handle_hello(2, &me(1), vouched(Some(good)));
    s.eng.handle_hello(3, &me(2), vouched(Some(other_gid)));
    s.eng.handle_hello(4, &me(9), vouched(None));
    s.eng.handle_hello(5, &me(0), vouched(None));
    s.pump();
    let refused = [
        (3, Status::ERR_NO_PERMISSIONS),
        (4, Status::ERR_NOT_FOUND),
        (5, Status::ERR_EXISTS),
    ];
    assert_hellos(&s, &[1, 2], &refused);
}

/// Registers `name:rank` again, saying whether a claim by uid alone may take it.
fn register_by_uid(s: &mut Sim, name: &str, rank: u32, by_uid: bool) {
    let proofs = proofs_by(name, rank, by_uid);
    s.eng
        .register_client(&Proc::new(ns(name), Rank(rank)), UID, GID, proofs)
        .unwrap();
}

/// Asserts which hellos were accepted and which refused, with what.
fn assert_hellos(s: &Sim, accepted: &[ConnId], refused: &[(ConnId, Status)]) {
    assert_eq!(s.accepted, accepted);
    assert_eq!(s.refused, refused, "{:?}", s.reasons);
}

#[test]
fn a_uid_claim_takes_only_a_client_registered_for_it() {
    let mut s = Sim::new();
    s.job("a", 4);
    // Ranks 0 and 2 are pmix-rs and PMI-1 clients; 1 and 3 may be libpmix ones.
    register_by_uid(&mut s, "a", 0, false);
    register_by_uid(&mut s, "a", 2, false);
    let me = |rank| Proc::new(ns("a"), Rank(rank));
    let uid = |gid| Auth::Uid {
        creds: PeerCreds { uid: UID, gid },
    };
    s.eng.handle_hello(1, &me(0), uid(GID));
    s.eng.handle_hello(2, &me(1), uid(GID));
    s.eng.handle_hello(3, &me(3), uid(GID + 1));
    s.eng.handle_hello(4, &me(2), Auth::Vouched { creds: None });
    s.pump();
    let refused = [
        (1, Status::ERR_NO_PERMISSIONS),
        (3, Status::ERR_NO_PERMISSIONS),
    ];
    assert_hellos(&s, &[2, 4], &refused);
    assert!(
        s.reasons[0].contains("a:0") && s.reasons[0].contains("uid alone"),
        "{:?}",
        s.reasons
    );
    // The real rank 0, with its secret, is not kept out by the refused claim.
    s.connect(5, "a", 0);
}

#[test]
fn a_name_claimed_with_its_secret_is_not_taken_by_uid_alone_after() {
    let mut s = Sim::new();
    s.job("a", 2);
    let me = |rank| Proc::new(ns("a"), Rank(rank));
    let uid = || Auth::Uid {
        creds: PeerCreds { uid: UID, gid: GID },
    };
    s.connect(1, "a", 0);
    s.eng.handle_hello(2, &me(0), uid());
    s.pump();
    // Its connection goes without a finalize: the name is still not the uid's to take, but
    // the secret still claims it.
    s.eng.handle_closed(1);
    s.eng.handle_hello(3, &me(0), uid());
    s.pump();
    assert_eq!(
        s.refused,
        vec![
            (2, Status::ERR_NO_PERMISSIONS),
            (3, Status::ERR_NO_PERMISSIONS)
        ]
    );
    assert!(s.reasons[1].contains("with its secret"), "{:?}", s.reasons);
    s.connect(4, "a", 0);
    // Where the uid came first, the real rank is refused, and told how the name was taken.
    s.eng.handle_hello(5, &me(1), uid());
    s.pump();
    assert!(s.accepted.contains(&5));
    s.hello(6, "a", 1, &secret("a", 1), PeerCreds { uid: UID, gid: GID });
    assert_eq!(s.refused[2], (6, Status::ERR_EXISTS));
    assert!(s.reasons[2].contains("by uid alone"), "{:?}", s.reasons);
}

#[test]
fn queries_go_to_the_host_and_its_answer_back() {
    let mut s = Sim::new();
    s.job("a", 1);
    s.connect(1, "a", 0);
    s.auto_host = false;
    let query = |keys: &[&str]| pmix_wire::Query {
        keys: keys.iter().map(|k| Key::new(*k).unwrap()).collect(),
        qualifiers: vec![],
    };
    let asked = s.send(
        1,
        Request::Query {
            queries: vec![query(&[attr::QUERY_PROC_TABLE])],
        },
    );
    let (op, call) = s.host_calls.remove(0);
    let HostCall::Query { proc, queries } = call else {
        panic!("expected a query, got {call:?}");
    };
    assert_eq!(proc, Proc::new(ns("a"), Rank(0)));
    assert_eq!(queries, vec![query(&[attr::QUERY_PROC_TABLE])]);
    let results = vec![Info::attr(attr::QUERY_PROC_TABLE, "a")];
    s.eng
        .handle_host_done(op, HostOutcome::Infos(Ok(results.clone())));
    s.pump();
    assert_eq!(
        s.reply(1, asked),
        Reply {
            status: Status::SUCCESS,
            body: ReplyBody::Query { results },
        }
    );
    // A host that cannot answer: its status reaches the client.
    let refused = s.send(
        1,
        Request::Query {
            queries: vec![query(&[attr::QUERY_PROC_TABLE])],
        },
    );
    let (op, _) = s.host_calls.remove(0);
    s.eng
        .handle_host_done(op, HostOutcome::Infos(Err(Status::ERR_NOT_SUPPORTED)));
    s.pump();
    assert_eq!(s.reply(1, refused).status, Status::ERR_NOT_SUPPORTED);
    // An empty query is the client's mistake; the host never sees it.
    let empty = s.send(1, Request::Query { queries: vec![] });
    assert_eq!(s.reply(1, empty).status, Status::ERR_BAD_PARAM);
    assert!(s.host_calls.is_empty());
}

#[test]
fn host_can_refuse_a_client() {
    let mut s = Sim::new();
    s.job("a", 1);
    s.auto_host = false;
    s.hello(1, "a", 0, &secret("a", 0), PeerCreds { uid: UID, gid: GID });
    assert!(s.accepted.is_empty(), "accepted before the host answered");
    let (op, call) = s.host_calls.remove(0);
    assert!(matches!(call, HostCall::ClientConnected { .. }));
    s.eng
        .handle_host_done(op, HostOutcome::Unit(Err(Status::ERR_NO_PERMISSIONS)));
    s.pump();
    assert_eq!(s.refused, vec![(1, Status::ERR_NO_PERMISSIONS)]);
    // It may try again once the host agrees.
    s.auto_host = true;
    s.connect(2, "a", 0);
}

#[test]
fn barrier_completes_only_when_everyone_arrived() {
    let mut s = Sim::new();
    s.job("a", 4);
    for r in 0..4 {
        s.connect(r as ConnId, "a", r);
    }
    let mut ids = vec![];
    for r in 0..3 {
        ids.push(s.send(r, fence(vec![], false)));
        assert!(s.replies.is_empty(), "fence completed with {} of 4", r + 1);
    }
    ids.push(s.send(3, fence(vec![Proc::new(ns("a"), Rank::WILDCARD)], false)));
    for (r, id) in ids.into_iter().enumerate() {
        let rep = s.reply(r, id);
        assert_eq!(rep.status, Status::SUCCESS);
        assert_eq!(rep.body, ReplyBody::None);
    }
}

#[test]
fn collecting_fence_over_two_namespaces_subset() {
    // The reference's make-check 00: fence over a:0-2 and b:0 with data.
    let mut s = Sim::new();
    s.job("a", 3);
    s.job("b", 1);
    let parts: Vec<Proc> = (0..3)
        .map(|r| Proc::new(ns("a"), r))
        .chain([Proc::new(ns("b"), 0)])
        .collect();
    let members = [(0, "a", 0), (1, "a", 1), (2, "a", 2), (3, "b", 0)];
    for (c, n, r) in members {
        s.connect(c, n, r);
        let id = s.send(
            c,
            commit(&[(
                &format!("key-{n}-{r}"),
                Scope::GLOBAL,
                Value::String(format!("{n}{r}")),
            )]),
        );
        assert_eq!(s.reply(c, id).status, Status::SUCCESS);
    }
    let mut ids = vec![];
    for (c, _, _) in members {
        let mut p = parts.clone();
        p.reverse(); // order of the list does not matter
        ids.push((
            c,
            s.send(c, fence(if c % 2 == 0 { p } else { parts.clone() }, true)),
        ));
    }
    for (c, id) in ids {
        let rep = s.reply(c, id);
        assert_eq!(rep.status, Status::SUCCESS);
        let data = fence_data(&rep);
        assert_eq!(data.len(), 4);
        for (n, r) in [("a", 0), ("a", 1), ("a", 2), ("b", 0)] {
            let pk = data
                .iter()
                .find(|pk| pk.proc == Proc::new(ns(n), r))
                .expect("participant data");
            assert_eq!(pk.kvs[0].value, Value::String(format!("{n}{r}")));
        }
    }
}

#[test]
fn consecutive_fences_over_the_same_set_stay_ordered() {
    let mut s = Sim::new();
    s.job("a", 2);
    s.connect(0, "a", 0);
    s.connect(1, "a", 1);
    let f1 = s.send(0, fence(vec![], false));
    let f2 = s.send(0, fence(vec![], false));
    assert!(s.replies.is_empty());
    let g1 = s.send(1, fence(vec![], false));
    assert!(s.take_reply(0, f1).is_some() && s.take_reply(1, g1).is_some());
    assert!(
        s.take_reply(0, f2).is_none(),
        "second fence completed with one participant"
    );
    let g2 = s.send(1, fence(vec![], false));
    assert!(s.take_reply(0, f2).is_some() && s.take_reply(1, g2).is_some());
}

#[test]
fn fence_rejects_a_caller_outside_the_participants() {
    let mut s = Sim::new();
    s.job("a", 2);
    s.connect(0, "a", 0);
    let id = s.send(0, fence(vec![Proc::new(ns("a"), 1)], false));
    assert_eq!(s.reply(0, id).status, Status::ERR_BAD_PARAM);
    let id = s.send(0, fence(vec![Proc::new(ns("zz"), Rank::WILDCARD)], false));
    assert_eq!(s.reply(0, id).status, Status::ERR_BAD_PARAM);
}

#[test]
fn get_waits_for_commit_and_honours_immediate_and_timeout() {
    let mut s = Sim::new();
    s.job("a", 3);
    for r in 0..3 {
        s.connect(r as ConnId, "a", r);
    }
    let p1 = Proc::new(ns("a"), 1);
    let imm = s.send(
        0,
        get(p1.clone(), "x", vec![Info::attr(attr::IMMEDIATE, true)]),
    );
    assert_eq!(s.reply(0, imm).status, Status::ERR_NOT_FOUND);

    let waiting = s.send(0, get(p1.clone(), "x", vec![]));
    let timed = s.send(
        2,
        get(
            Proc::new(ns("a"), 2),
            "y",
            vec![Info::attr(attr::TIMEOUT, 2i32)],
        ),
    );
    assert!(s.replies.is_empty());
    s.advance(Duration::from_millis(1999));
    assert!(s.take_reply(2, timed).is_none(), "timed out early");
    s.advance(Duration::from_millis(2));
    assert_eq!(s.reply(2, timed).status, Status::ERR_TIMEOUT);
    assert!(
        s.take_reply(0, waiting).is_none(),
        "a get without timeout gave up"
    );

    let c = s.send(
        1,
        commit(&[
            ("x", Scope::GLOBAL, Value::Int64(-5)),
            ("hidden", Scope::REMOTE, Value::Bool(true)),
        ]),
    );
    assert_eq!(s.reply(1, c).status, Status::SUCCESS);
    let rep = s.reply(0, waiting);
    assert_eq!(rep.status, Status::SUCCESS);
    let ReplyBody::Get { data, jobs } = rep.body else {
        panic!("not a get reply")
    };
    assert!(jobs.is_empty(), "own namespace's job data shipped again");
    assert_eq!(
        data[0].kvs.len(),
        1,
        "REMOTE data shown to a process on the same node"
    );
    assert_eq!(data[0].kvs[0].value, Value::Int64(-5));
    // A key the committed process does not have: NOT_FOUND at once, no waiting.
    let miss = s.send(0, get(p1, "nope", vec![]));
    assert_eq!(s.reply(0, miss).status, Status::ERR_NOT_FOUND);
}

#[test]
fn get_with_rank_undef_finds_whoever_stored_the_key() {
    let mut s = Sim::new();
    s.job("a", 3);
    s.job("b", 1);
    for r in 0..3 {
        s.connect(r as ConnId, "a", r);
    }
    let any = Proc::new(ns("a"), Rank::UNDEF);
    let miss = s.send(0, get(any.clone(), "x", vec![]));
    assert_eq!(
        s.reply(0, miss).status,
        Status::ERR_NOT_FOUND,
        "nobody stored it yet: answered at once"
    );
    let c = s.send(2, commit(&[("x", Scope::GLOBAL, Value::Int64(7))]));
    assert_eq!(s.reply(2, c).status, Status::SUCCESS);
    let c = s.send(1, commit(&[("x", Scope::GLOBAL, Value::Int64(8))]));
    assert_eq!(s.reply(1, c).status, Status::SUCCESS);
    let hit = s.send(0, get(any.clone(), "x", vec![]));
    let rep = s.reply(0, hit);
    assert_eq!(rep.status, Status::SUCCESS);
    let ReplyBody::Get { data, .. } = rep.body else {
        panic!("not a get reply")
    };
    assert_eq!(data[0].proc.rank, Rank(2), "the first to store it answers");
    assert_eq!(data[0].kvs[0].value, Value::Int64(7));
    // Job-level keys come first.
    let size = s.send(0, get(any, attr::JOB_SIZE, vec![]));
    assert_eq!(s.reply(0, size).status, Status::SUCCESS);
    // Another namespace's keys are not found in this one.
    let other = s.send(0, get(Proc::new(ns("b"), Rank::UNDEF), "x", vec![]));
    assert_eq!(s.reply(0, other).status, Status::ERR_NOT_FOUND);
}

#[test]
fn reserved_keys_are_refused_and_nothing_is_stored() {
    let mut s = Sim::new();
    s.job("a", 2);
    s.connect(0, "a", 0);
    s.connect(1, "a", 1);
    let c = s.send(
        0,
        commit(&[
            ("ok", Scope::GLOBAL, Value::Uint8(1)),
            ("pmix.mine", Scope::GLOBAL, Value::Uint8(2)),
        ]),
    );
    assert_eq!(s.reply(0, c).status, Status::ERR_BAD_PARAM);
    let g = s.send(
        1,
        get(
            Proc::new(ns("a"), 0),
            "ok",
            vec![Info::attr(attr::IMMEDIATE, true)],
        ),
    );
    assert_eq!(
        s.reply(1, g).status,
        Status::ERR_NOT_FOUND,
        "half of a refused commit was stored"
    );
}

#[test]
fn get_from_another_namespace_ships_its_job_data_once() {
    let mut s = Sim::new();
    s.job("a", 1);
    s.job("b", 1);
    s.connect(0, "a", 0);
    s.connect(1, "b", 0);
    let c = s.send(1, commit(&[("k", Scope::GLOBAL, Value::Uint8(9))]));
    s.reply(1, c);
    let pb = Proc::new(ns("b"), 0);
    let g1 = s.send(0, get(pb.clone(), "k", vec![]));
    let ReplyBody::Get { jobs, .. } = s.reply(0, g1).body else {
        panic!()
    };
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].nspace(), &ns("b"));
    assert!(
        jobs[0]
            .job()
            .iter()
            .any(|i| i.key.as_str() == attr::JOB_SIZE && i.value.as_u32() == Some(1))
    );
    let g2 = s.send(0, get(pb, "k", vec![]));
    let ReplyBody::Get { jobs, .. } = s.reply(0, g2).body else {
        panic!()
    };
    assert!(jobs.is_empty(), "job data shipped twice to the same client");
}

#[test]
fn a_dead_participant_releases_fences_and_gets() {
    let mut s = Sim::new();
    s.job("a", 3);
    for r in 0..3 {
        s.connect(r as ConnId, "a", r);
    }
    let f0 = s.send(0, fence(vec![], true));
    let g1 = s.send(1, get(Proc::new(ns("a"), 2), "never", vec![]));
    s.eng.handle_closed(2);
    s.pump();
    let term = Status::from_name("ERR_PROC_TERM_WO_SYNC").unwrap();
    assert_eq!(s.reply(0, f0).status, term);
    assert_eq!(s.reply(1, g1).status, term);
    // Later fences including the dead process fail at once rather than hang.
    let f1 = s.send(1, fence(vec![], false));
    assert_eq!(s.reply(1, f1).status, term);
}

#[test]
fn finalize_replies_after_the_host_and_closes() {
    let mut s = Sim::new();
    s.job("a", 2);
    s.connect(0, "a", 0);
    s.connect(1, "a", 1);
    s.auto_host = false;
    let f = s.send(0, Request::Finalize { info: vec![] });
    assert!(s.take_reply(0, f).is_none());
    let (op, call) = s.host_calls.remove(0);
    assert!(matches!(call, HostCall::ClientFinalized { .. }));
    s.eng.handle_host_done(op, HostOutcome::Unit(Ok(())));
    s.pump();
    assert_eq!(s.reply(0, f).status, Status::SUCCESS);
    assert!(s.closed.contains(&0));
    // A finalized process may init again, with its secret; and a second instance of it is
    // refused while it is connected again.
    s.auto_host = true;
    s.hello(9, "a", 0, &secret("a", 0), PeerCreds { uid: UID, gid: GID });
    assert_eq!(s.accepted.last(), Some(&9));
    s.hello(
        10,
        "a",
        0,
        &secret("a", 0),
        PeerCreds { uid: UID, gid: GID },
    );
    assert_eq!(s.refused.last(), Some(&(10, Status::ERR_EXISTS)));
    // It is a member again: a fence over the job waits for it rather than failing at once.
    let f = s.send(1, fence(vec![], false));
    assert!(s.take_reply(1, f).is_none());
    let f9 = s.send(9, fence(vec![], false));
    assert_eq!(s.reply(9, f9).status, Status::SUCCESS);
    assert_eq!(s.reply(1, f).status, Status::SUCCESS);
}

/// Job `m` with ranks `here` on node0, this node (each registered and connected as the
/// connection of its number), and ranks `there` on node1.
fn two_node_job(s: &mut Sim, here: &[u32], there: &[u32]) {
    let nodes = pmix_regex::generate_regex(&["node0", "node1"]).unwrap();
    let ppn = pmix_regex::generate_ppn(&[here.to_vec(), there.to_vec()]).unwrap();
    let info = vec![
        Info::attr(attr::NODE_MAP, Value::Regex(nodes)),
        Info::attr(attr::PROC_MAP, Value::Regex(ppn)),
    ];
    s.eng
        .register_nspace(ns("m"), here.len() as u32, &info)
        .unwrap();
    for &r in here {
        s.eng
            .register_client(&Proc::new(ns("m"), r), UID, GID, proofs("m", r))
            .unwrap();
        s.connect(r as ConnId, "m", r);
    }
}

#[test]
fn fence_with_remote_participants_goes_through_the_host() {
    let mut s = Sim::new();
    two_node_job(&mut s, &[0, 1], &[2, 3]);
    for r in 0..2u32 {
        let c = s.send(
            r as ConnId,
            commit(&[
                ("v", Scope::GLOBAL, Value::Uint32(r)),
                ("l", Scope::LOCAL, Value::Uint32(r)),
            ]),
        );
        s.reply(r as ConnId, c);
    }
    let a = s.send(0, fence(vec![], true));
    let b = s.send(1, fence(vec![], true));
    assert!(s.replies.is_empty(), "completed without the other node");
    let (op, call) = s.host_calls.remove(0);
    let HostCall::FenceNb { data, .. } = call else {
        panic!("expected fence_nb, got {call:?}")
    };
    // Our contribution excludes LOCAL data; the other node adds its own.
    let ours = super::decode_blobs(&data).unwrap();
    assert_eq!(ours.len(), 2);
    assert!(
        ours.iter()
            .all(|pk| pk.kvs.iter().all(|kv| kv.key.as_str() == "v"))
    );
    let theirs: Vec<ProcKvs> = (2..4)
        .map(|r| ProcKvs {
            proc: Proc::new(ns("m"), r),
            kvs: vec![Kv {
                scope: Scope::GLOBAL,
                key: key("v"),
                value: Value::Uint32(r),
            }],
        })
        .collect();
    let mut all = data.clone();
    pmix_wire::encode_frame(&theirs, &mut all).unwrap();
    s.eng.handle_host_done(op, HostOutcome::Bytes(Ok(all)));
    s.pump();
    for (c, id) in [(0, a), (1, b)] {
        let rep = s.reply(c, id);
        assert_eq!(rep.status, Status::SUCCESS);
        assert_eq!(fence_data(&rep).len(), 4);
    }
    // Remote data is now served locally, without another trip to the host.
    let g = s.send(0, get(Proc::new(ns("m"), 3), "v", vec![]));
    assert_eq!(s.reply(0, g).status, Status::SUCCESS);
    assert!(s.host_calls.is_empty());
}

#[test]
fn direct_modex_for_a_remote_process_asks_the_host_once() {
    let mut s = Sim::new();
    two_node_job(&mut s, &[0], &[1]);
    let remote = Proc::new(ns("m"), 1);
    let g1 = s.send(0, get(remote.clone(), "v", vec![]));
    let g2 = s.send(0, get(remote.clone(), "w", vec![]));
    assert_eq!(
        s.host_calls.len(),
        1,
        "direct modex requests were not coalesced"
    );
    let (op, _) = s.host_calls.remove(0);
    let mut blob = Vec::new();
    let pk = vec![ProcKvs {
        proc: remote,
        kvs: vec![Kv {
            scope: Scope::GLOBAL,
            key: key("v"),
            value: Value::Bool(true),
        }],
    }];
    pmix_wire::encode_frame(&pk, &mut blob).unwrap();
    s.eng.handle_host_done(op, HostOutcome::Bytes(Ok(blob)));
    s.pump();
    assert_eq!(s.reply(0, g1).status, Status::SUCCESS);
    assert_eq!(s.reply(0, g2).status, Status::ERR_NOT_FOUND);
}

#[test]
fn dmodex_request_from_the_host_waits_for_commit_and_hides_local_data() {
    let mut s = Sim::new();
    s.job("a", 1);
    s.connect(0, "a", 0);
    s.eng.dmodex_request(&Proc::new(ns("a"), 0), 77);
    s.pump();
    assert!(s.dmodex.is_empty());
    let c = s.send(
        0,
        commit(&[
            ("g", Scope::GLOBAL, Value::Uint8(1)),
            ("l", Scope::LOCAL, Value::Uint8(2)),
        ]),
    );
    s.reply(0, c);
    let (token, result) = s.dmodex.remove(0);
    assert_eq!(token, 77);
    let data = super::decode_blobs(&result.unwrap()).unwrap();
    assert_eq!(
        data[0]
            .kvs
            .iter()
            .map(|kv| kv.key.as_str())
            .collect::<Vec<_>>(),
        ["g"]
    );
}

#[test]
fn registration_derives_what_the_maps_imply() {
    let mut s = Sim::new();
    let nodes = pmix_regex::generate_regex(&["node1", "node0"]).unwrap();
    let ppn = pmix_regex::generate_ppn(&[vec![0u32, 2], vec![1, 3, 4]]).unwrap();
    let app0 = DataArray::from_infos([
        Info::attr(attr::APPNUM, 0u32),
        Info::attr(attr::APP_SIZE, 2u32),
    ]);
    let app1 = DataArray::from_infos([
        Info::attr(attr::APPNUM, 1u32),
        Info::attr(attr::APP_SIZE, 3u32),
    ]);
    let job = DataArray::from_infos([
        Info::attr(attr::NODE_MAP, Value::Regex(nodes)),
        Info::attr(attr::PROC_MAP, Value::Regex(ppn)),
        Info::attr(attr::UNIV_SIZE, 64u32),
    ]);
    let session = DataArray::from_infos([Info::attr(attr::JOB_INFO_ARRAY, job)]);
    let info = vec![
        Info::attr(attr::SESSION_INFO_ARRAY, session),
        Info::attr(attr::APP_INFO_ARRAY, app0),
        Info::attr(attr::APP_INFO_ARRAY, app1),
    ];
    s.eng.register_nspace(ns("d"), 3, &info).unwrap();
    let nsid = s.eng.ns_id("d").unwrap();
    let n = &s.eng.nspaces[&nsid];
    assert_eq!(n.size, 5);
    assert_eq!(
        n.local,
        vec![Rank(1), Rank(3), Rank(4)],
        "local ranks of node0"
    );
    let job = n.job.get();
    let jv = |k: &str| {
        job.job
            .iter()
            .chain(&job.session)
            .find(|i| i.key.as_str() == k)
            .map(|i| i.value.clone())
    };
    assert_eq!(jv(attr::JOB_SIZE).and_then(|v| v.as_u32()), Some(5));
    assert_eq!(jv(attr::UNIV_SIZE).and_then(|v| v.as_u32()), Some(64));
    assert_eq!(jv(attr::NUM_NODES).and_then(|v| v.as_u32()), Some(2));
    assert_eq!(jv(attr::JOB_NUM_APPS).and_then(|v| v.as_u32()), Some(2));
    assert_eq!(
        jv(attr::LOCAL_PEERS)
            .and_then(|v| v.as_str().map(str::to_owned))
            .as_deref(),
        Some("1,3,4")
    );
    let pv = |r: u32, k: &str| {
        job.procs
            .iter()
            .find(|p| p.rank == Rank(r))
            .and_then(|p| p.info.iter().find(|i| i.key.as_str() == k))
            .map(|i| i.value.clone())
    };
    assert_eq!(pv(3, attr::HOSTNAME), Some(Value::String("node0".into())));
    assert_eq!(pv(3, attr::LOCAL_RANK).and_then(|v| v.as_u32()), Some(1));
    assert_eq!(pv(3, attr::NODEID).and_then(|v| v.as_u32()), Some(1));
    assert_eq!(pv(2, attr::APPNUM).and_then(|v| v.as_u32()), Some(1));
    assert_eq!(pv(2, attr::APP_RANK).and_then(|v| v.as_u32()), Some(0));
    assert_eq!(pv(4, attr::APP_RANK).and_then(|v| v.as_u32()), Some(2));
    let node1 = job.nodes.iter().find(|n| n.id == 0).unwrap();
    assert!(
        node1
            .info
            .iter()
            .any(|i| i.key.as_str() == attr::LOCAL_PEERS && i.value.as_str() == Some("0,2"))
    );
}

#[test]
fn bad_registrations_are_errors() {
    let mut s = Sim::new();
    let nodes = pmix_regex::generate_regex(&["n0", "n1"]).unwrap();
    let ppn = pmix_regex::generate_ppn(&[vec![0u32]]).unwrap();
    let mismatch = vec![
        Info::attr(attr::NODE_MAP, Value::Regex(nodes)),
        Info::attr(attr::PROC_MAP, Value::Regex(ppn)),
    ];
    assert!(s.eng.register_nspace(ns("x"), 1, &mismatch).is_err());
    let app = DataArray::from_infos([Info::attr(attr::APP_SIZE, 2u32)]);
    assert!(
        s.eng
            .register_nspace(ns("y"), 1, &[Info::attr(attr::APP_INFO_ARRAY, app)])
            .is_err()
    );
    assert!(
        s.eng
            .register_nspace(ns("z"), 1, &[Info::attr(attr::NODE_MAP, "garbage[")])
            .is_err()
    );
    assert!(s.eng.ns_id("x").is_none() && s.eng.ns_id("y").is_none());
}

#[test]
fn deregister_purges_the_namespace() {
    let mut s = Sim::new();
    s.job("a", 2);
    s.connect(0, "a", 0);
    s.connect(1, "a", 1);
    let c = s.send(
        0,
        commit(&[("k", Scope::GLOBAL, Value::ByteObject(vec![0; 1000]))]),
    );
    s.reply(0, c);
    let g = s.send(0, get(Proc::new(ns("a"), 1), "k", vec![]));
    s.eng.deregister_nspace("a");
    s.pump();
    assert!(s.closed.contains(&0) && s.closed.contains(&1));
    assert!(s.eng.ns_id("a").is_none());
    assert_eq!(s.eng.store.len(), 0);
    assert!(s.eng.gets.is_empty() && s.eng.sessions.is_empty());
    let _ = g;
}

#[test]
fn many_clients_fence_and_get_each_other() {
    let mut s = Sim::new();
    let n = 64u32;
    s.job("big", n);
    for r in 0..n {
        s.connect(r as ConnId, "big", r);
        let c = s.send(
            r as ConnId,
            commit(&[("ep", Scope::GLOBAL, Value::Uint64(u64::from(r) * 7))]),
        );
        s.reply(r as ConnId, c);
    }
    let ids: Vec<u32> = (0..n)
        .map(|r| s.send(r as ConnId, fence(vec![], false)))
        .collect();
    for (r, id) in ids.into_iter().enumerate() {
        assert_eq!(s.reply(r, id).status, Status::SUCCESS);
    }
    for r in 0..n {
        let peer = (r + 1) % n;
        let g = s.send(r as ConnId, get(Proc::new(ns("big"), peer), "ep", vec![]));
        let ReplyBody::Get { data, .. } = s.reply(r as ConnId, g).body else {
            panic!()
        };
        assert_eq!(data[0].kvs[0].value, Value::Uint64(u64::from(peer) * 7));
    }
}

#[test]
fn register_nodata_gives_clients_no_job_data() {
    let mut s = Sim::new();
    let info = vec![
        Info::attr(attr::REGISTER_NODATA, true),
        Info::attr(attr::JOB_SIZE, 2u32),
    ];
    s.eng.register_nspace(ns("nd"), 2, &info).unwrap();
    let id = s.eng.ns_id("nd").unwrap();
    let job = s.eng.nspaces[&id].job.get();
    assert!(job.job.is_empty() && job.procs.is_empty() && job.session.is_empty());
    assert_eq!(s.eng.nspaces[&id].size, 2);
}

fn publish(pairs: &[(&str, &str)], info: Vec<Info>) -> Request {
    Request::Publish {
        data: pairs.iter().map(|(k, v)| Info::new(key(k), *v)).collect(),
        info,
    }
}

fn lookup(keys: &[&str], info: Vec<Info>) -> Request {
    Request::Lookup {
        keys: keys.iter().map(|k| key(k)).collect(),
        info,
    }
}

fn found_keys(r: &Reply) -> Vec<(String, Proc)> {
    match &r.body {
        ReplyBody::Lookup { found } => found
            .iter()
            .map(|p| (p.key.as_str().to_owned(), p.proc.clone()))
            .collect(),
        other => panic!("not a lookup reply: {other:?}"),
    }
}

#[test]
fn builtin_name_service_serves_publish_lookup_unpublish() {
    let mut sim = Sim::new();
    sim.job("a", 2);
    sim.connect(1, "a", 0);
    sim.connect(2, "a", 1);
    let id = sim.send(1, publish(&[("svc", "port")], vec![]));
    assert_eq!(sim.reply(1, id).status, Status::SUCCESS);
    let id = sim.send(2, lookup(&["svc", "other"], vec![]));
    let r = sim.reply(2, id);
    assert_eq!(r.status, Status::SUCCESS);
    assert_eq!(found_keys(&r), [("svc".to_owned(), Proc::new(ns("a"), 0))]);
    let id = sim.send(2, publish(&[("svc", "mine")], vec![]));
    assert_eq!(sim.reply(2, id).status, Status::ERR_DUPLICATE_KEY);
    let id = sim.send(
        2,
        Request::Unpublish {
            keys: vec![key("svc")],
            info: vec![],
        },
    );
    assert_eq!(sim.reply(2, id).status, Status::ERR_NO_PERMISSIONS);
    let id = sim.send(
        1,
        Request::Unpublish {
            keys: vec![key("svc")],
            info: vec![],
        },
    );
    assert_eq!(sim.reply(1, id).status, Status::SUCCESS);
    let id = sim.send(2, lookup(&["svc"], vec![]));
    assert_eq!(sim.reply(2, id).status, Status::ERR_NOT_FOUND);
}

#[test]
fn waiting_lookup_is_answered_by_a_later_publish_or_times_out() {
    let mut sim = Sim::new();
    sim.job("a", 3);
    for r in 0..3 {
        sim.connect(r as ConnId + 1, "a", r);
    }
    let wait = vec![Info::attr(attr::WAIT, 0i32)];
    let waiting = sim.send(2, lookup(&["late"], wait.clone()));
    let timed = sim.send(
        3,
        lookup(
            &["never"],
            vec![
                Info::attr(attr::WAIT, 0i32),
                Info::attr(attr::TIMEOUT, 5i32),
            ],
        ),
    );
    assert!(
        sim.take_reply(2, waiting).is_none(),
        "WAIT must hold the lookup"
    );
    let id = sim.send(1, publish(&[("late", "v")], vec![]));
    assert_eq!(sim.reply(1, id).status, Status::SUCCESS);
    let r = sim.reply(2, waiting);
    assert_eq!(r.status, Status::SUCCESS);
    assert_eq!(found_keys(&r)[0].0, "late");
    assert!(sim.take_reply(3, timed).is_none());
    sim.advance(Duration::from_secs(5));
    assert_eq!(sim.reply(3, timed).status, Status::ERR_TIMEOUT);
    // A waiter whose client goes away is dropped: a later publish answers nobody.
    let gone = sim.send(2, lookup(&["later"], wait));
    sim.eng.handle_closed(2);
    sim.pump();
    sim.send(1, publish(&[("later", "v")], vec![]));
    assert!(sim.take_reply(2, gone).is_none());
}

#[test]
fn publications_end_with_their_process_or_namespace() {
    let mut sim = Sim::new();
    sim.job("a", 2);
    sim.job("b", 1);
    sim.connect(1, "a", 0);
    sim.connect(2, "a", 1);
    sim.connect(3, "b", 0);
    let per = |p: Persistence| vec![Info::attr(attr::PERSISTENCE, p)];
    sim.send(1, publish(&[("proc", "x")], per(Persistence::PROC)));
    sim.send(1, publish(&[("app", "x")], vec![]));
    sim.send(1, publish(&[("indef", "x")], per(Persistence::INDEF)));
    sim.eng.handle_closed(1);
    sim.pump();
    let id = sim.send(3, lookup(&["proc", "app", "indef"], vec![]));
    let names: Vec<_> = found_keys(&sim.reply(3, id))
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(names, ["app", "indef"], "PROC data goes with its publisher");
    sim.eng.deregister_nspace("a");
    sim.pump();
    let id = sim.send(3, lookup(&["proc", "app", "indef"], vec![]));
    let names: Vec<_> = found_keys(&sim.reply(3, id))
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(names, ["indef"], "APP data goes with its namespace");
}

#[test]
fn host_name_service_gets_the_callers_credentials() {
    let mut sim = Sim::new();
    sim.eng = Engine::new("node0".into(), vec![], crate::NameService::Host);
    sim.auto_host = false;
    sim.job("a", 1);
    sim.connect_answering_host(1, "a", 0);
    // A client cannot pass itself off as another user.
    let forged = vec![Info::attr(attr::USERID, 0u32)];
    let id = sim.send(1, publish(&[("k", "v")], forged));
    let (op, call) = sim.host_calls.remove(0);
    let HostCall::Publish { proc, info, .. } = call else {
        panic!("expected a publish call, got {call:?}");
    };
    assert_eq!(proc, Proc::new(ns("a"), 0));
    let uids: Vec<_> = info
        .iter()
        .filter(|i| i.key.as_str() == attr::USERID)
        .map(|i| i.value.as_u32())
        .collect();
    assert_eq!(uids, [Some(UID)]);
    assert!(
        info.iter()
            .any(|i| i.key.as_str() == attr::GRPID && i.value.as_u32() == Some(GID))
    );
    sim.eng
        .handle_host_done(op, HostOutcome::Unit(Err(Status::ERR_DUPLICATE_KEY)));
    sim.pump();
    assert_eq!(
        sim.reply(1, id).status,
        Status::ERR_DUPLICATE_KEY,
        "the host's status reaches the client"
    );
    let id = sim.send(1, lookup(&["k"], vec![]));
    let (op, _) = sim.host_calls.remove(0);
    sim.eng
        .handle_host_done(op, HostOutcome::Lookup(Ok(vec![])));
    sim.pump();
    assert_eq!(sim.reply(1, id).status, Status::ERR_NOT_FOUND);
}

#[test]
fn another_users_process_never_sees_published_data() {
    let mut sim = Sim::new();
    sim.job("a", 2);
    // Rank 1 runs as another user.
    sim.eng
        .register_client(&Proc::new(ns("a"), 1), UID + 1, GID, proofs("a", 1))
        .unwrap();
    sim.connect(1, "a", 0);
    sim.hello(
        2,
        "a",
        1,
        &secret("a", 1),
        PeerCreds {
            uid: UID + 1,
            gid: GID,
        },
    );
    assert!(sim.accepted.contains(&2));
    let global = vec![Info::attr(attr::RANGE, pmix_types::DataRange::GLOBAL)];
    sim.send(1, publish(&[("svc", "port")], global.clone()));
    let id = sim.send(2, lookup(&["svc"], global.clone()));
    assert_eq!(sim.reply(2, id).status, Status::ERR_NOT_FOUND);
    let id = sim.send(
        2,
        Request::Unpublish {
            keys: vec![key("svc")],
            info: vec![],
        },
    );
    assert_eq!(
        sim.reply(2, id).status,
        Status::ERR_NOT_FOUND,
        "for them it does not exist"
    );
    // The same name is free for them.
    let id = sim.send(2, publish(&[("svc", "theirs")], global));
    assert_eq!(sim.reply(2, id).status, Status::SUCCESS);
}

#[test]
fn connect_across_namespaces_exchanges_job_and_process_data() {
    let mut sim = Sim::new();
    sim.job("a", 2);
    sim.job("b", 1);
    sim.connect(1, "a", 0);
    sim.connect(2, "a", 1);
    sim.connect(3, "b", 0);
    sim.send(1, commit(&[("ka", Scope::GLOBAL, Value::from("from-a0"))]));
    sim.send(3, commit(&[("kb", Scope::GLOBAL, Value::from("from-b0"))]));
    let procs = vec![Proc::new(ns("a"), Rank::WILDCARD), Proc::new(ns("b"), 0)];
    let connect = |procs: &Vec<Proc>| Request::Connect {
        procs: procs.clone(),
        info: vec![],
    };
    let i1 = sim.send(1, connect(&procs));
    let i3 = sim.send(3, connect(&procs));
    assert!(
        sim.take_reply(1, i1).is_none(),
        "a connect waits for every participant"
    );
    // A fence over the same list is a different collective.
    let f = sim.send(2, fence(procs.clone(), false));
    assert!(sim.take_reply(2, f).is_none());
    let i2 = sim.send(2, connect(&procs));
    for (conn, id, other) in [(1, i1, "b"), (2, i2, "b"), (3, i3, "a")] {
        let r = sim.reply(conn, id);
        assert_eq!(r.status, Status::SUCCESS);
        let ReplyBody::Connect { jobs, data } = &r.body else {
            panic!("not a connect reply: {r:?}");
        };
        let names: Vec<_> = jobs.iter().map(|j| j.nspace.as_str()).collect();
        assert_eq!(names, [other], "each side gets the other's job data");
        let mut keys: Vec<_> = data
            .iter()
            .flat_map(|pk| pk.kvs.iter().map(|kv| kv.key.as_str().to_owned()))
            .collect();
        keys.sort();
        assert_eq!(keys, ["ka", "kb"]);
    }
    // The fence is still waiting for the others.
    assert!(sim.take_reply(2, f).is_none());
    // Disconnect is a collective too.
    let d1 = sim.send(
        1,
        Request::Disconnect {
            procs: procs.clone(),
            info: vec![],
        },
    );
    let d2 = sim.send(
        2,
        Request::Disconnect {
            procs: procs.clone(),
            info: vec![],
        },
    );
    assert!(sim.take_reply(1, d1).is_none());
    let d3 = sim.send(
        3,
        Request::Disconnect {
            procs,
            info: vec![],
        },
    );
    for (conn, id) in [(1, d1), (2, d2), (3, d3)] {
        assert_eq!(sim.reply(conn, id).status, Status::SUCCESS);
    }
    // An empty list is refused.
    let e = sim.send(
        1,
        Request::Connect {
            procs: vec![],
            info: vec![],
        },
    );
    assert_eq!(sim.reply(1, e).status, Status::ERR_BAD_PARAM);
}

#[test]
fn a_participant_dying_mid_connect_fails_the_others_and_raises_an_event() {
    let mut sim = Sim::new();
    sim.job("a", 1);
    sim.job("b", 2);
    sim.job("c", 1);
    sim.connect(1, "a", 0);
    sim.connect(2, "b", 0);
    sim.connect(3, "b", 1);
    sim.connect(4, "c", 0);
    for conn in [1, 3, 4] {
        let id = sim.send(
            conn,
            Request::RegisterEvents {
                codes: vec![],
                info: vec![],
            },
        );
        assert_eq!(sim.reply(conn, id).status, Status::SUCCESS);
    }
    let procs = vec![
        Proc::new(ns("a"), Rank::WILDCARD),
        Proc::new(ns("b"), Rank::WILDCARD),
    ];
    let i1 = sim.send(
        1,
        Request::Connect {
            procs: procs.clone(),
            info: vec![],
        },
    );
    let i3 = sim.send(
        3,
        Request::Connect {
            procs,
            info: vec![],
        },
    );
    // b:0 dies before connecting.
    sim.eng.handle_closed(2);
    sim.pump();
    assert_eq!(sim.reply(1, i1).status, Status::ERR_PROC_TERM_WO_SYNC);
    assert_eq!(sim.reply(3, i3).status, Status::ERR_PROC_TERM_WO_SYNC);
    // Its own job hears of it; an unrelated job does not, nor does a (not yet connected) job.
    let told: Vec<ConnId> = sim.events.iter().map(|(c, _)| *c).collect();
    assert_eq!(told, [3]);
    let (_, ev) = &sim.events[0];
    assert_eq!(ev.code, Status::ERR_PROC_TERM_WO_SYNC);
    assert!(
        ev.info
            .iter()
            .any(|i| i.key.as_str() == attr::EVENT_AFFECTED_PROC
                && i.value.as_proc() == Some(&Proc::new(ns("b"), 0)))
    );
}

#[test]
fn connected_jobs_hear_of_each_others_failures() {
    let mut sim = Sim::new();
    sim.job("a", 1);
    sim.job("b", 1);
    sim.connect(1, "a", 0);
    sim.connect(2, "b", 0);
    let id = sim.send(
        1,
        Request::RegisterEvents {
            codes: vec![Status::ERR_PROC_TERM_WO_SYNC],
            info: vec![],
        },
    );
    sim.reply(1, id);
    let procs = vec![Proc::new(ns("a"), 0), Proc::new(ns("b"), 0)];
    let i1 = sim.send(
        1,
        Request::Connect {
            procs: procs.clone(),
            info: vec![],
        },
    );
    let i2 = sim.send(
        2,
        Request::Connect {
            procs,
            info: vec![],
        },
    );
    sim.reply(1, i1);
    sim.reply(2, i2);
    sim.eng.handle_closed(2);
    sim.pump();
    assert_eq!(sim.events.len(), 1, "the connected job is told");
    assert_eq!(sim.events[0].0, 1);
}

#[test]
fn notify_reaches_registered_clients_in_range_only() {
    let mut sim = Sim::new();
    sim.job("a", 3);
    sim.job("b", 1);
    for (conn, name, rank) in [(1, "a", 0), (2, "a", 1), (3, "a", 2), (4, "b", 0)] {
        sim.connect(conn, name, rank);
    }
    let code = Status(-5000);
    for conn in [1, 2, 4] {
        let id = sim.send(
            conn,
            Request::RegisterEvents {
                codes: vec![code],
                info: vec![],
            },
        );
        sim.reply(conn, id);
    }
    let notify = |range: pmix_types::DataRange, info: Vec<Info>| Request::Notify {
        event: pmix_wire::Event {
            code,
            // A forged source is replaced by the real one.
            source: Proc::new(ns("b"), 0),
            range,
            info,
        },
    };
    let id = sim.send(1, notify(pmix_types::DataRange::NAMESPACE, vec![]));
    assert_eq!(sim.reply(1, id).status, Status::SUCCESS);
    let told: Vec<_> = sim.events.drain(..).map(|(c, e)| (c, e.source)).collect();
    assert_eq!(
        told,
        [(2, Proc::new(ns("a"), 0))],
        "a:2 did not register; b is another job"
    );
    let id = sim.send(1, notify(pmix_types::DataRange::GLOBAL, vec![]));
    sim.reply(1, id);
    let mut told: Vec<_> = sim.events.drain(..).map(|(c, _)| c).collect();
    told.sort();
    assert_eq!(told, [2, 4]);
    let list = DataArray::new(
        pmix_types::DataType::PROC,
        vec![Value::Proc(Proc::new(ns("b"), 0))],
    )
    .unwrap();
    let id = sim.send(
        1,
        notify(
            pmix_types::DataRange::CUSTOM,
            vec![Info::attr(attr::EVENT_CUSTOM_RANGE, list)],
        ),
    );
    sim.reply(1, id);
    let told: Vec<_> = sim.events.drain(..).map(|(c, _)| c).collect();
    assert_eq!(told, [4]);
    // Deregistered: no more events.
    let id = sim.send(4, Request::DeregisterEvents { codes: vec![code] });
    sim.reply(4, id);
    let id = sim.send(1, notify(pmix_types::DataRange::GLOBAL, vec![]));
    sim.reply(1, id);
    let told: Vec<_> = sim.events.drain(..).map(|(c, _)| c).collect();
    assert_eq!(told, [2]);
}

#[test]
fn spawn_goes_to_the_host_and_its_answer_to_the_client() {
    let mut sim = Sim::new();
    sim.auto_host = false;
    sim.job("a", 1);
    sim.connect_answering_host(1, "a", 0);
    let app = pmix_wire::App {
        cmd: "/bin/true".into(),
        argv: vec!["true".into()],
        env: vec![],
        cwd: String::new(),
        maxprocs: 2,
        info: vec![],
    };
    let id = sim.send(
        1,
        Request::Spawn {
            job_info: vec![],
            apps: vec![app.clone()],
        },
    );
    let (op, call) = sim.host_calls.remove(0);
    let HostCall::Spawn { proc, apps, .. } = call else {
        panic!("expected a spawn call: {call:?}");
    };
    assert_eq!((proc, apps), (Proc::new(ns("a"), 0), vec![app.clone()]));
    sim.eng
        .handle_host_done(op, HostOutcome::Nspace(Ok(ns("child"))));
    sim.pump();
    let r = sim.reply(1, id);
    assert_eq!(
        r.body,
        ReplyBody::Spawn {
            nspace: ns("child")
        }
    );
    // A failed spawn is the host's status; malformed apps never reach the host.
    let id = sim.send(
        1,
        Request::Spawn {
            job_info: vec![],
            apps: vec![app.clone()],
        },
    );
    let (op, _) = sim.host_calls.remove(0);
    sim.eng
        .handle_host_done(op, HostOutcome::Nspace(Err(Status::ERR_JOB_EXE_NOT_FOUND)));
    sim.pump();
    assert_eq!(sim.reply(1, id).status, Status::ERR_JOB_EXE_NOT_FOUND);
    let id = sim.send(
        1,
        Request::Spawn {
            job_info: vec![],
            apps: vec![],
        },
    );
    assert_eq!(sim.reply(1, id).status, Status::ERR_BAD_PARAM);
    assert!(sim.host_calls.is_empty());
}

#[test]
fn a_job_registered_as_spawned_says_so_for_every_process() {
    let mut eng = Engine::new("node0".into(), vec![], crate::NameService::BuiltIn);
    let spawned_of = |eng: &Engine, name: &str| -> Vec<Option<bool>> {
        let id = eng.ns_id(name).unwrap();
        eng.nspaces[&id]
            .job
            .get()
            .procs
            .iter()
            .map(|p| {
                p.info
                    .iter()
                    .find(|i| i.key.as_str() == attr::SPAWNED)
                    .and_then(|i| i.value.as_bool())
            })
            .collect()
    };
    let info = |spawned: Option<bool>| {
        let mut v = vec![Info::attr(attr::JOB_SIZE, 2u32)];
        if let Some(s) = spawned {
            v.push(Info::attr(attr::SPAWNED, s));
        }
        v
    };
    eng.register_nspace(ns("child"), 2, &info(Some(true)))
        .unwrap();
    eng.register_nspace(ns("first"), 2, &info(None)).unwrap();
    assert_eq!(spawned_of(&eng, "child"), [Some(true), Some(true)]);
    assert_eq!(spawned_of(&eng, "first"), [Some(false), Some(false)]);
}

#[test]
fn repeated_collecting_fences_send_only_what_changed() {
    let mut sim = Sim::new();
    sim.job("a", 3);
    for r in 0..3 {
        sim.connect(r as ConnId + 1, "a", r);
    }
    let shipped = |sim: &mut Sim, conns: &[ConnId]| -> Vec<Vec<u32>> {
        let ids: Vec<(ConnId, u32)> = conns
            .iter()
            .map(|c| (*c, sim.send(*c, fence(vec![], true))))
            .collect();
        ids.into_iter()
            .map(|(c, id)| {
                let r = sim.reply(c, id);
                assert_eq!(r.status, Status::SUCCESS);
                let mut ranks: Vec<u32> = fence_data(&r).iter().map(|pk| pk.proc.rank.0).collect();
                ranks.sort();
                ranks
            })
            .collect()
    };
    for r in 0..3u32 {
        sim.send(
            r as ConnId + 1,
            commit(&[("k", Scope::GLOBAL, Value::from(r))]),
        );
    }
    assert_eq!(
        shipped(&mut sim, &[1, 2, 3]),
        vec![vec![0, 1, 2]; 3],
        "everything, the first time"
    );
    assert_eq!(
        shipped(&mut sim, &[1, 2, 3]),
        vec![Vec::<u32>::new(); 3],
        "nothing changed"
    );
    sim.send(2, commit(&[("k", Scope::GLOBAL, Value::from(10u32))]));
    let r = shipped(&mut sim, &[1, 2, 3]);
    assert_eq!(r, vec![vec![1]; 3], "only the re-committed rank");
    // A barrier (no collection) in between does not change what collectors hold.
    let ids: Vec<_> = [1, 2, 3]
        .iter()
        .map(|c| (*c, sim.send(*c, fence(vec![], false))))
        .collect();
    for (c, id) in ids {
        sim.reply(c, id);
    }
    sim.send(3, commit(&[("k", Scope::GLOBAL, Value::from(20u32))]));
    assert_eq!(shipped(&mut sim, &[1, 2, 3]), vec![vec![2]; 3]);
    // Another participant list is tracked on its own: everything, the first time.
    let ids: Vec<_> = [1, 2, 3]
        .iter()
        .map(|c| {
            (
                *c,
                sim.send(
                    *c,
                    fence(
                        vec![
                            Proc::new(ns("a"), 0),
                            Proc::new(ns("a"), 1),
                            Proc::new(ns("a"), 2),
                        ],
                        true,
                    ),
                ),
            )
        })
        .collect();
    for (c, id) in ids {
        let r = sim.reply(c, id);
        assert_eq!(
            fence_data(&r).len(),
            3,
            "another participant list is tracked on its own"
        );
    }
}

#[test]
fn a_process_ended_on_another_node_fails_what_waits_for_it_here() {
    let mut s = Sim::new();
    two_node_job(&mut s, &[0, 1], &[2, 3]);
    // A job-wide fence already handed to the host, and a get of rank 3's data.
    let a = s.send(0, fence(vec![], true));
    let b = s.send(1, fence(vec![], true));
    let g = s.send(0, get(Proc::new(ns("m"), 3), "v", vec![]));
    let calls: Vec<HostCall> = s.host_calls.drain(..).map(|(_, c)| c).collect();
    assert!(
        calls.iter().any(|c| matches!(c, HostCall::FenceNb { .. })),
        "{calls:?}"
    );
    assert!(s.replies.is_empty());
    s.eng
        .proc_ended_elsewhere(&Proc::new(ns("m"), 3), Status::ERR_PROC_TERM_WO_SYNC);
    s.pump();
    for (c, id) in [(0, a), (1, b), (0, g)] {
        assert_eq!(s.reply(c, id).status, Status::ERR_PROC_TERM_WO_SYNC);
    }
    // Later ones fail at once, and a rank that is not gone is still asked for.
    let g = s.send(1, get(Proc::new(ns("m"), 3), "v", vec![]));
    assert_eq!(s.reply(1, g).status, Status::ERR_PROC_TERM_WO_SYNC);
    let f = s.send(
        0,
        fence(vec![Proc::new(ns("m"), 0), Proc::new(ns("m"), 3)], false),
    );
    assert_eq!(s.reply(0, f).status, Status::ERR_PROC_TERM_WO_SYNC);
    let g2 = s.send(1, get(Proc::new(ns("m"), 2), "v", vec![]));
    assert!(s.replies.is_empty(), "rank 2 is not gone: {:?}", s.replies);
    let _ = g2;
}

#[test]
fn reserved_keys_of_a_remote_process_come_from_job_data_at_once() {
    let mut s = Sim::new();
    // Rank 0 here on node0; rank 1 on node1, which never committed.
    two_node_job(&mut s, &[0], &[1]);
    let g = s.send(0, get(Proc::new(ns("m"), 1), attr::NODEID, vec![]));
    let rep = s.reply(0, g);
    assert_eq!(rep.status, Status::SUCCESS);
    let ReplyBody::Get { data, .. } = rep.body else {
        panic!("not get data: {:?}", rep.body)
    };
    assert_eq!(data[0].kvs[0].value, Value::Uint32(1));
    assert!(
        s.host_calls.is_empty(),
        "asked the host: {:?}",
        s.host_calls
    );
    // A key of the process's own is still waited for (and fetched from its node).
    let g = s.send(0, get(Proc::new(ns("m"), 1), "mine", vec![]));
    assert!(s.take_reply(0, g).is_none());
    assert!(matches!(
        s.host_calls.first(),
        Some((_, HostCall::DirectModex { .. }))
    ));
}

#[test]
fn barriers_across_nodes_send_only_the_values_stored_since_over_whole_namespaces() {
    let mut s = Sim::new();
    two_node_job(&mut s, &[0, 1], &[2, 3]);
    // One barrier of ranks 0 and 1 (with `procs` as given), completed by the host with
    // nothing from the other node; the keys this node sent of each rank, sorted.
    let barrier = |s: &mut Sim, procs: Vec<Proc>| -> Vec<Vec<String>> {
        let ids: Vec<(ConnId, u32)> = (0..2)
            .map(|c| (c, s.send(c, fence(procs.clone(), false))))
            .collect();
        let (op, call) = s.host_calls.remove(0);
        let HostCall::FenceNb { data, .. } = call else {
            panic!("expected fence_nb, got {call:?}")
        };
        let mut sent: Vec<(u32, Vec<String>)> = super::decode_blobs(&data)
            .unwrap()
            .into_iter()
            .map(|pk| {
                let mut keys: Vec<String> = pk.kvs.iter().map(|kv| kv.key.to_string()).collect();
                keys.sort();
                (pk.proc.rank.0, keys)
            })
            .collect();
        sent.sort();
        s.eng.handle_host_done(op, HostOutcome::Bytes(Ok(data)));
        s.pump();
        for (c, id) in ids {
            assert_eq!(s.reply(c, id).status, Status::SUCCESS);
        }
        sent.into_iter().map(|(_, keys)| keys).collect()
    };
    let put = |s: &mut Sim, rank: u32, k: &str| {
        let c = s.send(
            rank as ConnId,
            commit(&[(k, Scope::GLOBAL, Value::Uint32(rank))]),
        );
        s.reply(rank as ConnId, c);
    };
    put(&mut s, 0, "a");
    put(&mut s, 1, "a");
    assert_eq!(
        barrier(&mut s, vec![]),
        [vec!["a"], vec!["a"]],
        "the first time, all"
    );
    put(&mut s, 0, "b");
    assert_eq!(
        barrier(&mut s, vec![]),
        [vec!["b"]],
        "then only the new value"
    );
    assert!(
        barrier(&mut s, vec![]).is_empty(),
        "nothing new, nothing sent"
    );
    put(&mut s, 1, "a");
    assert_eq!(
        barrier(&mut s, vec![]),
        [vec!["a"]],
        "a value stored again is new"
    );
    // Over some ranks, the nodes taking part may not have had the rest: all of a process
    // that stored anything since.
    put(&mut s, 0, "c");
    let some = vec![
        Proc::new(ns("m"), 0),
        Proc::new(ns("m"), 1),
        Proc::new(ns("m"), 2),
    ];
    assert_eq!(barrier(&mut s, some), [vec!["a", "b", "c"]]);
}

/// A tool of the server's user connects as `conn` and is accepted: its name.
fn tool(s: &mut Sim, conn: ConnId) -> Proc {
    s.eng.handle_tool_hello(
        conn,
        crate::engine::ToolHello {
            proc: None,
            creds: PeerCreds { uid: UID, gid: GID },
            info: vec![],
        },
    );
    s.pump();
    s.tools
        .iter()
        .find(|(c, _)| *c == conn)
        .map(|(_, p)| p.clone())
        .unwrap_or_else(|| panic!("tool {conn} not accepted: {:?}", s.refused))
}

mod control;
mod debug;
mod group_membership;
mod groups;
mod iof;
mod psets;
mod tools;

/// The frames of a connect contribution: every part, decoded.
fn connect_parts(data: &[u8]) -> Vec<pmix_wire::ConnectPart> {
    super::decode_frames::<pmix_wire::ConnectPart>(data).expect("undecodable connect contribution")
}

/// Takes the one host call of `sim`, which must be a connect; returns its op and contribution.
fn take_connect_call(sim: &mut Sim) -> (OpId, Vec<u8>) {
    assert_eq!(sim.host_calls.len(), 1, "{:?}", sim.host_calls);
    match sim.host_calls.remove(0) {
        (op, HostCall::Connect { data, .. }) => (op, data),
        (_, other) => panic!("expected a connect, got {other:?}"),
    }
}

#[test]
fn connect_across_runs_brings_each_run_the_others_namespace() {
    // Two servers, each of one launcher run: a (2 ranks) is known only to the first, b (1
    // rank) only to the second. What the host gathers (here by hand; a name server between
    // runs in pmixrun) is the concatenation of both contributions.
    let mut one = Sim::new();
    let mut two = Sim::new();
    one.auto_host = false;
    two.auto_host = false;
    one.job("a", 2);
    two.job("b", 1);
    one.connect_answering_host(1, "a", 0);
    one.connect_answering_host(2, "a", 1);
    two.connect_answering_host(1, "b", 0);
    let c = one.send(1, commit(&[("ka", Scope::GLOBAL, Value::from("from-a0"))]));
    assert_eq!(one.reply(1, c).status, Status::SUCCESS);
    let c = two.send(1, commit(&[("kb", Scope::GLOBAL, Value::from("from-b0"))]));
    assert_eq!(two.reply(1, c).status, Status::SUCCESS);
    let procs = vec![
        Proc::new(ns("a"), Rank::WILDCARD),
        Proc::new(ns("b"), Rank::WILDCARD),
    ];
    let connect = || Request::Connect {
        procs: procs.clone(),
        info: vec![],
    };
    let i1 = one.send(1, connect());
    assert!(
        one.host_calls.is_empty(),
        "went to the host before a:1 came"
    );
    let i2 = one.send(2, connect());
    let j1 = two.send(1, connect());
    let (op_one, data_one) = take_connect_call(&mut one);
    let (op_two, data_two) = take_connect_call(&mut two);
    // Each contribution carries its run's namespace and its committed data.
    let parts = connect_parts(&data_one);
    let jobs: Vec<_> = parts
        .iter()
        .flat_map(|p| &p.jobs)
        .map(|j| j.nspace.as_str())
        .collect();
    assert_eq!(jobs, ["a"]);
    let senders: Vec<_> = parts
        .iter()
        .flat_map(|p| &p.data)
        .map(|pk| pk.proc.clone())
        .collect();
    assert_eq!(senders, [Proc::new(ns("a"), 0)], "a:1 committed nothing");
    let jobs: Vec<_> = connect_parts(&data_two)
        .iter()
        .flat_map(|p| p.jobs.clone())
        .map(|j| j.nspace)
        .collect();
    assert_eq!(jobs, [ns("b")]);
    let mut all = data_one;
    all.extend_from_slice(&data_two);
    one.answer(op_one, HostOutcome::Bytes(Ok(all.clone())));
    two.answer(op_two, HostOutcome::Bytes(Ok(all)));
    let replies = [
        (one.reply(1, i1), "b", "kb"),
        (one.reply(2, i2), "b", "kb"),
        (two.reply(1, j1), "a", "ka"),
    ];
    for (r, other, key) in replies {
        assert_eq!(r.status, Status::SUCCESS, "{r:?}");
        let ReplyBody::Connect { jobs, data } = &r.body else {
            panic!("not a connect reply: {r:?}");
        };
        let names: Vec<_> = jobs.iter().map(|j| j.nspace.as_str()).collect();
        assert_eq!(names, [other], "each side gets the other run's job data");
        assert!(
            data.iter()
                .flat_map(|pk| &pk.kvs)
                .any(|kv| kv.key.as_str() == key),
            "{key} missing from {data:?}"
        );
    }
    // The other run's namespace is known from now on: its job data and its processes' data
    // are served here.
    let size = one.send(
        2,
        get(Proc::new(ns("b"), Rank::WILDCARD), attr::JOB_SIZE, vec![]),
    );
    let r = one.reply(2, size);
    assert_eq!(r.status, Status::SUCCESS, "{r:?}");
    let kb = one.send(2, get(Proc::new(ns("b"), 0), "kb", vec![]));
    let ReplyBody::Get { data, .. } = one.reply(2, kb).body else {
        panic!("not a get reply")
    };
    assert_eq!(data[0].kvs[0].value, Value::from("from-b0"));
    // A second connect with b, now known here, still carries a's job data (and not b's):
    // another server of a's run may be taking part without knowing b, nor b's servers a.
    let again = Request::Connect {
        procs: vec![Proc::new(ns("a"), 0), Proc::new(ns("b"), 0)],
        info: vec![],
    };
    let c = one.send(1, again);
    let (op, data) = take_connect_call(&mut one);
    let jobs: Vec<_> = connect_parts(&data)
        .into_iter()
        .flat_map(|p| p.jobs)
        .map(|j| j.nspace)
        .collect();
    assert_eq!(jobs, [ns("a")]);
    one.answer(op, HostOutcome::Bytes(Ok(data)));
    assert_eq!(one.reply(1, c).status, Status::SUCCESS);
    // A fence over both runs (Open MPI's disconnect) goes to the host, none of b being here.
    let f = one.send(1, fence(procs.clone(), false));
    let f2 = one.send(2, fence(procs.clone(), false));
    assert_eq!(one.host_calls.len(), 1, "{:?}", one.host_calls);
    let (op, call) = one.host_calls.remove(0);
    assert!(matches!(call, HostCall::FenceNb { .. }), "{call:?}");
    one.answer(op, HostOutcome::Bytes(Ok(Vec::new())));
    assert_eq!(one.reply(1, f).status, Status::SUCCESS);
    assert_eq!(one.reply(2, f2).status, Status::SUCCESS);
    // A disconnect too; the host's failure is each participant's.
    let d1 = one.send(
        1,
        Request::Disconnect {
            procs: procs.clone(),
            info: vec![],
        },
    );
    let d2 = one.send(
        2,
        Request::Disconnect {
            procs,
            info: vec![],
        },
    );
    let (op, call) = one.host_calls.remove(0);
    assert!(matches!(call, HostCall::Disconnect { .. }), "{call:?}");
    one.answer(op, HostOutcome::Unit(Err(Status::ERR_UNREACH)));
    assert_eq!(one.reply(1, d1).status, Status::ERR_UNREACH);
    assert_eq!(one.reply(2, d2).status, Status::ERR_UNREACH);
}

#[test]
fn only_a_connect_or_disconnect_may_name_an_unknown_namespace() {
    let mut sim = Sim::new();
    sim.auto_host = false;
    sim.job("a", 1);
    sim.connect_answering_host(1, "a", 0);
    let procs = vec![
        Proc::new(ns("a"), Rank::WILDCARD),
        Proc::new(ns("elsewhere"), Rank::WILDCARD),
    ];
    // A fence over a namespace nobody here knows is refused at once, as before.
    let f = sim.send(1, fence(procs.clone(), false));
    assert_eq!(sim.reply(1, f).status, Status::ERR_BAD_PARAM);
    assert!(sim.host_calls.is_empty());
    // A connect goes to the host, whose refusal is the client's answer; nothing is learnt.
    let c = sim.send(
        1,
        Request::Connect {
            procs,
            info: vec![],
        },
    );
    let (op, data) = take_connect_call(&mut sim);
    let jobs: Vec<_> = connect_parts(&data)
        .into_iter()
        .flat_map(|p| p.jobs)
        .collect();
    assert_eq!(jobs.len(), 1, "the job data of a goes with it");
    sim.answer(op, HostOutcome::Bytes(Err(Status::ERR_NOT_FOUND)));
    assert_eq!(sim.reply(1, c).status, Status::ERR_NOT_FOUND);
    assert!(sim.eng.ns_id("elsewhere").is_none());
}
