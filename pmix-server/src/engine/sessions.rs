//! Sessions: the clients registered with the server, their connections, and the processes
//! gone. The owner of who is connected as whom: the handshake's checks, the bookkeeping of a
//! connection's end, and the views other concerns read (a connection's process and
//! namespace, the job data it holds, its event registrations).

use std::collections::{HashMap, HashSet};

use pmix_types::{Proc, Rank, Status};

use super::ConnId;
use super::auth::{Auth, Claim, Proofs, constant_time_eq};
use super::store::NsId;

struct ClientReg {
    uid: u32,
    gid: u32,
    proofs: Proofs,
    conn: Option<ConnId>,
    /// How the name was last claimed: a name once claimed with a secret or a way made for
    /// it is not taken by uid alone afterwards (a reconnection), even where that was allowed.
    claimed: Option<Claim>,
    finalized: bool,
    /// The process the host started for the name, once it said so.
    pid: Option<u32>,
}

pub(super) enum ConnState {
    /// Authenticated; waiting for the host's client_connected.
    Connecting,
    Active,
    /// Finalize was asked; waiting for the host.
    Finalizing,
}

/// What the answer to a client's Get of one key carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GetAnswers {
    /// All of that process's data the client may see: it keeps them, so that its next Get
    /// of the process is local (pmix-rs and libpmix clients).
    WholeProcess,
    /// The key asked for only: the front-end passes one value on and keeps nothing (PMI-1
    /// and PMI-2), and a process that put thousands of keys must not cost each Get of one of
    /// them a copy of all.
    KeyOnly,
}

pub(super) struct Conn {
    pub(super) proc: Proc,
    pub(super) ns: NsId,
    pub(super) state: ConnState,
    /// What its Gets are answered with.
    pub(super) answers: GetAnswers,
    /// Namespaces whose job data this client already holds (RFC0009 shipping).
    pub(super) has_jobs: HashSet<NsId>,
    /// The event codes it registered for.
    pub(super) events: EventReg,
    /// By participant list (numbered by `FenceTable::list_id`): the commit sequence number up to
    /// which this client received every participant's data from a collecting fence. The next
    /// collecting fence over the list sends it only what was committed since: it holds the
    /// rest in its store.
    pub(super) collected: HashMap<u32, u64>,
}

/// A client's event registrations, counted: each registration adds, each deregistration
/// removes one.
#[derive(Default)]
pub(super) struct EventReg {
    /// Registrations for every code.
    all: u32,
    codes: HashMap<Status, u32>,
}

impl EventReg {
    pub(super) fn wants(&self, code: Status) -> bool {
        self.all > 0 || self.codes.get(&code).is_some_and(|n| *n > 0)
    }

    /// Registered for `code` by name (a registration for every code does not count).
    pub(super) fn names(&self, code: Status) -> bool {
        self.codes.contains_key(&code)
    }

    pub(super) fn add(&mut self, codes: &[Status]) {
        if codes.is_empty() {
            self.all += 1;
        }
        for c in codes {
            *self.codes.entry(*c).or_default() += 1;
        }
    }

    pub(super) fn remove(&mut self, codes: &[Status]) {
        if codes.is_empty() {
            self.all = self.all.saturating_sub(1);
        }
        for c in codes {
            if let Some(n) = self.codes.get_mut(c) {
                *n -= 1;
                if *n == 0 {
                    self.codes.remove(c);
                }
            }
        }
    }
}

/// Why a hello was refused: the status and the reason the client is told.
pub(super) type Refusal = (Status, String);

/// What an accepted hello waits for next.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Admit {
    /// The host's `client_connected`.
    Host,
    /// Whether process `pid` or one of its descendants holds the socket `inode`.
    Lineage { pid: u32, inode: u64 },
    /// The host to say which process it started for the name (then `Lineage`).
    Pid,
}

/// A claim by uid alone that waits for the lineage of its socket to be known.
struct Proving {
    proc: Proc,
    ns: NsId,
    answers: GetAnswers,
    inode: u64,
}

/// How a client's connection ended.
pub(super) struct Closed {
    pub(super) proc: Proc,
    pub(super) ns: NsId,
    /// It had asked to finalize.
    pub(super) finalized: bool,
}

/// The registered clients, the connected ones, and the processes gone.
#[derive(Default)]
pub(super) struct Sessions {
    clients: HashMap<(NsId, Rank), ClientReg>,
    conns: HashMap<ConnId, Conn>,
    /// Local processes whose connection ended, with the status to give whoever waits for them.
    gone: HashMap<(NsId, Rank), Status>,
    /// Claims by uid alone whose socket's lineage is being checked or waits for the pid.
    proving: HashMap<ConnId, Proving>,
}

impl Sessions {
    /// `register_client`: the process may connect, as `uid`/`gid` with `proofs`.
    pub(super) fn register(&mut self, key: (NsId, Rank), uid: u32, gid: u32, proofs: Proofs) {
        self.gone.remove(&key);
        self.clients.insert(
            key,
            ClientReg {
                uid,
                gid,
                proofs,
                conn: None,
                claimed: None,
                finalized: false,
                pid: None,
            },
        );
    }

    /// The host started process `pid` for `key`: the claims waiting for it, each with the
    /// inode of its socket, to be checked against it.
    pub(super) fn started(&mut self, key: (NsId, Rank), pid: u32) -> Vec<(ConnId, u64)> {
        let Some(reg) = self.clients.get_mut(&key) else {
            return Vec::new();
        };
        reg.pid = Some(pid);
        let mut waiting: Vec<(ConnId, u64)> = self
            .proving
            .iter()
            .filter(|(_, p)| (p.ns, p.proc.rank) == key)
            .map(|(&conn, p)| (conn, p.inode))
            .collect();
        waiting.sort_unstable();
        waiting
    }

    /// The lineage of `conn`'s socket is known: whether the process started for its name or
    /// one of its descendants holds it (`None`: the system cannot tell). The name the claim
    /// named, and whether it took it; `None` if no claim of `conn` was under way.
    pub(super) fn proven(
        &mut self,
        conn: ConnId,
        holds: Option<bool>,
    ) -> Option<(Proc, Result<(), Refusal>)> {
        let p = self.proving.remove(&conn)?;
        let key = (p.ns, p.proc.rank);
        if holds == Some(false) {
            let pid = self.clients.get(&key).and_then(|r| r.pid);
            let reason = format!(
                "{} was claimed by uid over the OpenPMIx port from a socket that neither the \
                 process started for it (pid {}) nor any of its descendants holds",
                p.proc,
                pid.map_or("unknown".to_owned(), |p| p.to_string())
            );
            return Some((p.proc, Err((Status::ERR_NO_PERMISSIONS, reason))));
        }
        let taken = self.take(conn, &p.proc, p.ns, Claim::Uid, p.answers);
        Some((p.proc, taken))
    }

    /// `deregister_client`: forgets the process; its connection, if any, to be closed.
    pub(super) fn deregister(&mut self, key: (NsId, Rank)) -> Option<ConnId> {
        self.proving.retain(|_, p| (p.ns, p.proc.rank) != key);
        self.clients.remove(&key).and_then(|reg| reg.conn)
    }

    /// Forgets every client of namespace `ns` and its processes gone.
    pub(super) fn purge_nspace(&mut self, ns: NsId) {
        self.clients.retain(|(n, _), _| *n != ns);
        self.gone.retain(|(n, _), _| *n != ns);
    }

    /// Gives back memory after a namespace was purged.
    pub(super) fn shrink(&mut self) {
        self.clients.shrink_to_fit();
    }

    pub(super) fn is_registered(&self, key: (NsId, Rank)) -> bool {
        self.clients.contains_key(&key)
    }

    pub(super) fn proofs(&self, key: (NsId, Rank)) -> Option<Proofs> {
        self.clients.get(&key).map(|c| c.proofs)
    }

    /// The uid and gid that rank `rank` of connection `conn`'s namespace registered with.
    pub(super) fn creds(&self, conn: ConnId, rank: Rank) -> Option<(u32, u32)> {
        let c = self.conns.get(&conn)?;
        let reg = self.clients.get(&(c.ns, rank))?;
        Some((reg.uid, reg.gid))
    }

    /// A client's hello on `conn` as `proc` (of namespace `ns`), proved as `auth` says: the
    /// connection is recorded (waiting for the host), or the refusal returned.
    pub(super) fn hello(
        &mut self,
        conn: ConnId,
        proc: &Proc,
        ns: NsId,
        auth: Auth,
        answers: GetAnswers,
    ) -> Result<Admit, Refusal> {
        let (nspace, rank) = (&proc.nspace, proc.rank);
        let claim = auth.claim();
        let (secret, creds, socket) = match auth {
            Auth::Secret { secret, creds } => (Some(secret), creds, None),
            Auth::Vouched { creds } => (None, creds, None),
            Auth::Uid { creds, socket } => (None, Some(creds), socket),
        };
        let Some(reg) = self.clients.get_mut(&(ns, rank)) else {
            return Err((
                Status::ERR_NOT_FOUND,
                format!("process {nspace}:{rank} is not registered"),
            ));
        };
        if let Some(c) = creds {
            if c.uid != reg.uid || c.gid != reg.gid {
                let reason = format!(
                    "peer credentials uid {} gid {} differ from the registered uid {} gid {}",
                    c.uid, c.gid, reg.uid, reg.gid
                );
                return Err((Status::ERR_NO_PERMISSIONS, reason));
            }
        }
        if secret.is_some_and(|s| !constant_time_eq(&s, &reg.proofs.secret)) {
            return Err((
                Status::ERR_INVALID_CRED,
                format!("wrong secret for {nspace}:{rank}"),
            ));
        }
        if claim == Claim::Uid && !reg.proofs.by_uid {
            let reason = format!(
                "{nspace}:{rank} was set up as a pmix-rs or PMI-1 client: its name is not \
                 claimed by uid alone (the OpenPMIx port), only with what its launcher gave it"
            );
            return Err((Status::ERR_NO_PERMISSIONS, reason));
        }
        if claim == Claim::Uid && reg.claimed.is_some_and(|c| c != Claim::Uid) {
            let reason = format!(
                "{nspace}:{rank} was claimed {} before: it is not claimed by uid alone now",
                reg.claimed.map_or(String::new(), |c| c.to_string())
            );
            return Err((Status::ERR_NO_PERMISSIONS, reason));
        }
        if let Some(inode) = socket.filter(|_| claim == Claim::Uid && reg.proofs.lineage) {
            // Whoever holds the socket must be the process started for the name, or one of
            // its descendants (a wrapper's child): the name stays free until that is known.
            let admit = match reg.pid {
                Some(pid) => Admit::Lineage { pid, inode },
                None => Admit::Pid,
            };
            let proving = Proving {
                proc: proc.clone(),
                ns,
                answers,
                inode,
            };
            self.proving.insert(conn, proving);
            return Ok(admit);
        }
        self.take(conn, proc, ns, claim, answers)?;
        Ok(Admit::Host)
    }

    /// `conn` takes the name `proc` (claimed as `claim`), unless it is connected already.
    fn take(
        &mut self,
        conn: ConnId,
        proc: &Proc,
        ns: NsId,
        claim: Claim,
        answers: GetAnswers,
    ) -> Result<(), Refusal> {
        let (nspace, rank) = (&proc.nspace, proc.rank);
        let Some(reg) = self.clients.get_mut(&(ns, rank)) else {
            return Err((
                Status::ERR_NOT_FOUND,
                format!("process {nspace}:{rank} is not registered"),
            ));
        };
        if reg.conn.is_some() {
            let how = reg.claimed.map_or(String::new(), |c| format!(" ({c})"));
            return Err((
                Status::ERR_EXISTS,
                format!("{nspace}:{rank} is already connected{how}"),
            ));
        }
        // A process that finalized may init again (PMIx_Init after PMIx_Finalize): it is
        // back, with what it committed before; what waited for it had failed at its finalize.
        if reg.finalized {
            tracing::debug!(conn, %nspace, %rank, "a finalized client connects again");
            self.gone.remove(&(ns, rank));
        }
        reg.conn = Some(conn);
        reg.claimed = Some(claim);
        reg.finalized = false;
        self.conns.insert(
            conn,
            Conn {
                proc: proc.clone(),
                ns,
                state: ConnState::Connecting,
                answers,
                has_jobs: HashSet::from([ns]),
                events: EventReg::default(),
                collected: HashMap::new(),
            },
        );
        Ok(())
    }

    /// The host refused the client of `conn`: its connection is forgotten.
    pub(super) fn refused(&mut self, conn: ConnId) -> Option<Proc> {
        let c = self.conns.remove(&conn)?;
        if let Some(reg) = self.clients.get_mut(&(c.ns, c.proc.rank)) {
            reg.conn = None;
        }
        Some(c.proc)
    }

    /// `conn` ended: its client is disconnected, and gone with the status whoever waits for
    /// it gets (`ERR_NOT_FOUND` after a finalize, else `ERR_PROC_TERM_WO_SYNC`).
    pub(super) fn closed(&mut self, conn: ConnId) -> Option<Closed> {
        self.proving.remove(&conn);
        let c = self.conns.remove(&conn)?;
        let key = (c.ns, c.proc.rank);
        let finalized = matches!(c.state, ConnState::Finalizing);
        if let Some(reg) = self.clients.get_mut(&key) {
            reg.conn = None;
            reg.finalized |= finalized;
        }
        let status = if finalized {
            Status::ERR_NOT_FOUND
        } else {
            Status::ERR_PROC_TERM_WO_SYNC
        };
        self.gone.insert(key, status);
        Some(Closed {
            proc: c.proc,
            ns: c.ns,
            finalized,
        })
    }

    /// A process of another node ended with `status`: false if it was known gone already.
    pub(super) fn ended_elsewhere(&mut self, key: (NsId, Rank), status: Status) -> bool {
        if self.gone.contains_key(&key) {
            return false;
        }
        self.gone.insert(key, status);
        true
    }

    /// A process gone was started again: it is no longer.
    pub(super) fn restarted(&mut self, key: (NsId, Rank)) {
        self.gone.remove(&key);
    }

    /// The processes gone, with the status whoever waits for them gets.
    pub(super) fn gone(&self) -> &HashMap<(NsId, Rank), Status> {
        &self.gone
    }

    pub(super) fn conn(&self, conn: ConnId) -> Option<&Conn> {
        self.conns.get(&conn)
    }

    pub(super) fn conn_mut(&mut self, conn: ConnId) -> Option<&mut Conn> {
        self.conns.get_mut(&conn)
    }

    /// The connections whose handshake the host accepted and that have not finalized.
    pub(super) fn active(&self) -> impl Iterator<Item = (ConnId, &Conn)> {
        self.conns
            .iter()
            .filter(|(_, c)| matches!(c.state, ConnState::Active))
            .map(|(k, c)| (*k, c))
    }

    /// The connections of namespace `ns`'s clients.
    /// The connections of process `proc` (several for a process that connected again).
    pub(super) fn conns_of_proc(&self, proc: &Proc) -> Vec<ConnId> {
        self.conns
            .iter()
            .filter(|(_, c)| c.proc == *proc)
            .map(|(k, _)| *k)
            .collect()
    }

    pub(super) fn conns_of(&self, ns: NsId) -> Vec<ConnId> {
        self.conns
            .iter()
            .filter(|(_, c)| c.ns == ns)
            .map(|(k, _)| *k)
            .collect()
    }

    /// True when no client is registered or connected.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.clients.is_empty() && self.conns.is_empty()
    }
}
