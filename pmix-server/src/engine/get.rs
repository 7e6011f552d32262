//! Gets: answered from the store when the process's data is here, parked until it commits
//! otherwise (its node asked by direct modex when it lives elsewhere), failed when it is gone
//! or its deadline passes; reserved keys of any process answered from job data.

use super::timers::{Timer, Timers};
use super::*;

/// Who is waiting for a process's data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Requester {
    Client { conn: ConnId, id: u32 },
    Host { token: u64 },
}

struct PendingGet {
    who: Requester,
    key: Option<Key>,
    deadline: Option<Instant>,
    timer: u64,
}

/// The Gets waiting until their target's data is here, and the targets asked of the host.
#[derive(Default)]
pub(super) struct Gets {
    parked: HashMap<(NsId, Rank), Vec<PendingGet>>,
    /// Direct-modex requests at the host, by target; requesters wait in `parked`.
    dmodex_inflight: HashSet<(NsId, Rank)>,
}

impl Gets {
    /// `who` waits for `target`'s data (and `key` in it), until `deadline` if any.
    pub(super) fn park(
        &mut self,
        target: (NsId, Rank),
        who: Requester,
        key: Option<Key>,
        deadline: Option<Instant>,
        timers: &mut Timers,
    ) {
        let timer = timers.new_id();
        if let Some(d) = deadline {
            timers.set(d, timer, Timer::Get { target, timer });
        }
        self.parked.entry(target).or_default().push(PendingGet {
            who,
            key,
            deadline,
            timer,
        });
    }

    /// Whether the host is to be asked for `target`'s data: not when it already was.
    pub(super) fn ask_host(&mut self, target: (NsId, Rank)) -> bool {
        self.dmodex_inflight.insert(target)
    }

    /// The host answered the direct modex for `target`.
    pub(super) fn host_answered(&mut self, target: (NsId, Rank)) {
        self.dmodex_inflight.remove(&target);
    }

    /// Everyone waiting for `target`, with the key each asked for; their deadlines cancelled.
    pub(super) fn take(
        &mut self,
        target: (NsId, Rank),
        timers: &mut Timers,
    ) -> Vec<(Requester, Option<Key>)> {
        let list = self.parked.remove(&target).unwrap_or_default();
        list.into_iter()
            .map(|g| {
                if let Some(d) = g.deadline {
                    timers.cancel(d, g.timer);
                }
                (g.who, g.key)
            })
            .collect()
    }

    /// The Get for `target` whose deadline `timer` passed, removed.
    pub(super) fn expire(&mut self, target: (NsId, Rank), timer: u64) -> Option<Requester> {
        let list = self.parked.get_mut(&target)?;
        let pos = list.iter().position(|g| g.timer == timer)?;
        let g = list.swap_remove(pos);
        if list.is_empty() {
            self.parked.remove(&target);
        }
        Some(g.who)
    }

    /// Drops the Gets of a connection that ended: nobody will read their answers.
    pub(super) fn forget_conn(&mut self, conn: ConnId) {
        for list in self.parked.values_mut() {
            list.retain(|g| !matches!(g.who, Requester::Client { conn: c2, .. } if c2 == conn));
        }
    }

    /// The targets of namespace `ns` that someone waits for.
    pub(super) fn targets_in(&self, ns: NsId) -> Vec<(NsId, Rank)> {
        self.parked
            .keys()
            .filter(|(n, _)| *n == ns)
            .copied()
            .collect()
    }

    /// True when no Get waits.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.parked.is_empty()
    }
}

impl Engine {
    pub(super) fn get(
        &mut self,
        conn: ConnId,
        id: u32,
        target: &Proc,
        key: Option<Key>,
        info: &[Info],
        now: Instant,
    ) {
        if self.get_group_info(conn, id, target, key.as_ref(), info) {
            return;
        }
        let Some(ns) = self.ns_id(target.nspace.as_str()) else {
            return self.reply_status(conn, id, Status::ERR_NOT_FOUND);
        };
        let Some(nsinfo) = self.nspaces.get(&ns) else {
            return self.reply_status(conn, id, Status::ERR_NOT_FOUND);
        };
        if target.rank == Rank::UNDEF {
            if let Some(k) = &key {
                let job_level = nsinfo
                    .job
                    .image()
                    .job()
                    .iter()
                    .chain(nsinfo.job.image().session());
                if !job_level.clone().any(|i| i.key == *k) {
                    // A key posted by any process of the namespace: the first that stored it
                    // answers. Nothing is waited for: there is no process to wait for.
                    return match self.store.owner(ns, k.as_str()) {
                        Some(rank) => {
                            self.answer_get(Requester::Client { conn, id }, (ns, rank), Some(k))
                        }
                        None => self.reply_status(conn, id, Status::ERR_NOT_FOUND),
                    };
                }
            }
        }
        if !target.rank.is_valid() {
            // Job-level data: the client asks only for namespaces it lacks (RFC0009).
            let image = nsinfo.job.image();
            let found = key.as_ref().is_none_or(|k| {
                image
                    .job()
                    .iter()
                    .chain(image.session())
                    .any(|i| i.key == *k)
            });
            let job = image.clone();
            if let Some(c) = self.sessions.conn_mut(conn) {
                c.has_jobs.insert(ns);
            }
            let status = found_status(found);
            return self.reply(
                conn,
                id,
                Reply {
                    status,
                    body: ReplyBody::Get {
                        data: vec![],
                        jobs: vec![job],
                    },
                },
            );
        }
        if target.rank.0 >= nsinfo.size {
            return self.reply_status(conn, id, Status::ERR_NOT_FOUND);
        }
        // A reserved key of a process (its node, its local rank...) is job data, which this
        // server holds for every process of the job: never waited for, never asked of the
        // process's node (libpmix clients ask for those of processes on other nodes).
        if let Some(k) = key.as_ref().filter(|k| k.is_reserved()) {
            let own = nsinfo.job.image().proc_value(target.rank, k.as_str());
            if let Some(value) = own {
                let kv = Kv {
                    scope: Scope::GLOBAL,
                    key: k.clone(),
                    value,
                };
                let data = vec![ProcKvs {
                    proc: target.clone(),
                    kvs: vec![kv],
                }];
                let body = ReplyBody::Get {
                    data,
                    jobs: Vec::new(),
                };
                return self.reply(
                    conn,
                    id,
                    Reply {
                        status: Status::SUCCESS,
                        body,
                    },
                );
            }
        }
        let t = (ns, target.rank);
        let local = nsinfo.is_local(target.rank);
        if self.commits.has(&t) {
            return self.answer_get(Requester::Client { conn, id }, t, key.as_ref());
        }
        if let Some(&status) = self.sessions.gone().get(&t) {
            return self.reply_status(conn, id, status);
        }
        let immediate = info_flag(info, attr::IMMEDIATE);
        if immediate {
            return self.reply_status(conn, id, Status::ERR_NOT_FOUND);
        }
        let deadline = pmix_types::timeout_of(info).map(|d| now + d);
        let who = Requester::Client { conn, id };
        self.gets.park(t, who, key, deadline, &mut self.timers);
        if !local && self.gets.ask_host(t) {
            let proc = target.clone();
            self.host_call(
                PendingHost::Dmodex { target: t },
                HostCall::DirectModex {
                    proc,
                    info: info.to_vec(),
                },
            );
        }
    }

    /// Answers one Get for a process whose data is here.
    pub(super) fn answer_get(
        &mut self,
        who: Requester,
        (ns, rank): (NsId, Rank),
        key: Option<&Key>,
    ) {
        match who {
            Requester::Host { token } => {
                let result = self.remote_blob((ns, rank));
                self.out.push_back(Output::Dmodex { token, result });
            }
            Requester::Client { conn, id } => {
                let Some(c) = self.sessions.conn(conn) else {
                    return;
                };
                let requester_rank = c.proc.rank;
                let requester_ns = c.ns;
                let ship_job = !c.has_jobs.contains(&ns);
                let Some(nsinfo) = self.nspaces.get(&ns) else {
                    return self.reply_status(conn, id, Status::ERR_NOT_FOUND);
                };
                let owner_local = nsinfo.is_local(rank);
                let is_self = requester_ns == ns && requester_rank == rank;
                let kvs = self
                    .store
                    .proc_kvs(ns, rank, |s| is_self || visible(s, owner_local));
                let found = key.is_none_or(|k| kvs.iter().any(|kv| kv.key == *k));
                let jobs = if ship_job {
                    vec![nsinfo.job.image().clone()]
                } else {
                    Vec::new()
                };
                let proc = Proc::new(nsinfo.name.clone(), rank);
                if ship_job {
                    if let Some(c) = self.sessions.conn_mut(conn) {
                        c.has_jobs.insert(ns);
                    }
                }
                let status = found_status(found);
                let body = ReplyBody::Get {
                    data: vec![ProcKvs { proc, kvs }],
                    jobs,
                };
                self.reply(conn, id, Reply { status, body });
            }
        }
    }

    /// The target committed: answer everyone waiting for it.
    pub(super) fn release_gets(&mut self, target: (NsId, Rank)) {
        for (who, key) in self.gets.take(target, &mut self.timers) {
            self.answer_get(who, target, key.as_ref());
        }
    }

    pub(super) fn fail_gets(&mut self, target: (NsId, Rank), status: Status) {
        for (who, _) in self.gets.take(target, &mut self.timers) {
            self.fail_requester(who, status);
        }
    }

    pub(super) fn fail_requester(&mut self, who: Requester, status: Status) {
        match who {
            Requester::Client { conn, id } => self.reply_status(conn, id, status),
            Requester::Host { token } => self.out.push_back(Output::Dmodex {
                token,
                result: Err(status),
            }),
        }
    }
    /// A host asks for the data of a local process on behalf of another node.
    pub(crate) fn dmodex_request(&mut self, proc: &Proc, token: u64) {
        let Some(ns) = self.ns_id(proc.nspace.as_str()) else {
            self.out.push_back(Output::Dmodex {
                token,
                result: Err(Status::ERR_NOT_FOUND),
            });
            return;
        };
        let target = (ns, proc.rank);
        if self.commits.has(&target) {
            let result = self.remote_blob(target);
            self.out.push_back(Output::Dmodex { token, result });
        } else {
            let who = Requester::Host { token };
            self.gets.park(target, who, None, None, &mut self.timers);
        }
    }

    /// The data of a local process that other nodes may see, encoded for the host.
    fn remote_blob(&self, (ns, rank): (NsId, Rank)) -> Result<Vec<u8>, Status> {
        let Some(name) = self.nspaces.get(&ns).map(|n| n.name.clone()) else {
            return Err(Status::ERR_NOT_FOUND);
        };
        let kvs = self.store.proc_kvs(ns, rank, |s| visible(s, false));
        let mut out = Vec::new();
        pmix_wire::encode_frame(
            &vec![ProcKvs {
                proc: Proc::new(name, rank),
                kvs,
            }],
            &mut out,
        )
        .map_err(|e| e.status())?;
        Ok(out)
    }

    /// The host answered a direct modex for `target`: its data is stored and its Gets
    /// released, or they fail.
    pub(super) fn dmodex_done(&mut self, target: (NsId, Rank), outcome: HostOutcome) {
        self.gets.host_answered(target);
        let result = match outcome {
            HostOutcome::Bytes(Ok(bytes)) => decode_blobs(&bytes),
            other => Err(status_of(&other)),
        };
        match result {
            Ok(blobs) => {
                self.store_remote(&blobs);
                if self.commits.has(&target) {
                    self.release_gets(target);
                } else {
                    self.fail_gets(target, Status::ERR_NOT_FOUND);
                }
            }
            Err(status) => self.fail_gets(target, status),
        }
    }
}

/// The status of a Get whose key was or was not among the data.
fn found_status(found: bool) -> Status {
    if found {
        Status::SUCCESS
    } else {
        Status::ERR_NOT_FOUND
    }
}
