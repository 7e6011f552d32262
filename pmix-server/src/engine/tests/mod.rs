//! The engine's tests: `Sim`, the harness that drives one engine with many simulated
//! clients and virtual time, and the helpers the concerns' test files share.

use std::time::{Duration, Instant};

use pmix_types::{Info, Key, Nspace, Proc, Rank, Scope, Status, Value, attr};
use pmix_wire::{Kv, ProcKvs, Reply, ReplyBody, Request};

use super::host_ops::{decode_blobs, decode_frames};
use super::{
    Auth, ConnId, Engine, GetAnswers, HostCall, HostOutcome, OpId, Output, PeerCreds, Proofs,
    SECRET_LEN,
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
        lineage: false,
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
    /// The job data each accepted connection was sent.
    welcomed: Vec<(ConnId, std::sync::Arc<super::nspace::LazyJob>)>,
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
    /// Lineage checks asked for: connection, pid, socket inode.
    lineage: Vec<(ConnId, u32, u64)>,
}

impl Sim {
    fn new() -> Self {
        Sim {
            eng: Engine::new("node0".into(), vec![], crate::NameService::BuiltIn),
            now: Instant::now(),
            replies: vec![],
            accepted: vec![],
            welcomed: vec![],
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
            lineage: vec![],
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
                    Output::Accept { conn, job } => {
                        self.accepted.push(conn);
                        self.welcomed.push((conn, job));
                    }
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
                    Output::CheckLineage { conn, pid, inode } => {
                        self.lineage.push((conn, pid, inode));
                    }
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
        self.eng.handle_hello(
            conn,
            &Proc::new(ns(name), Rank(rank)),
            auth,
            GetAnswers::WholeProcess,
        );
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
        self.hello_as(conn, (name, rank), secret, creds, GetAnswers::WholeProcess);
    }

    /// Connects `conn` as `name:rank` as a front-end that passes on one value per Get (PMI-1,
    /// PMI-2) does; asserts acceptance.
    fn connect_key_only(&mut self, conn: ConnId, name: &str, rank: u32) {
        let creds = PeerCreds { uid: UID, gid: GID };
        let secret = secret(name, rank);
        self.hello_as(conn, (name, rank), &secret, creds, GetAnswers::KeyOnly);
        assert!(
            self.accepted.contains(&conn),
            "{name}:{rank} was not accepted"
        );
    }

    fn hello_as(
        &mut self,
        conn: ConnId,
        (name, rank): (&str, u32),
        secret: &[u8],
        creds: PeerCreds,
        answers: GetAnswers,
    ) {
        let auth = Auth::Secret {
            secret: secret.to_vec(),
            creds: Some(creds),
        };
        let proc = Proc::new(ns(name), Rank(rank));
        self.eng.handle_hello(conn, &proc, auth, answers);
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

mod collective;
mod connect;
mod control;
mod debug;
mod event_cache;
mod events;
mod get;
mod group_membership;
mod groups;
mod hello;
mod iof;
mod naming;
mod nspace;
mod psets;
mod spawn;
mod tools;

/// The frames of a connect contribution: every part, decoded.
fn connect_parts(data: &[u8]) -> Vec<pmix_wire::ConnectPart> {
    decode_frames::<pmix_wire::ConnectPart>(data).expect("undecodable connect contribution")
}

/// Takes the one host call of `sim`, which must be a connect; returns its op and contribution.
fn take_connect_call(sim: &mut Sim) -> (OpId, Vec<u8>) {
    assert_eq!(sim.host_calls.len(), 1, "{:?}", sim.host_calls);
    match sim.host_calls.remove(0) {
        (op, HostCall::Connect { data, .. }) => (op, data),
        (_, other) => panic!("expected a connect, got {other:?}"),
    }
}
