//! The OpenPMIx job-data layout a pmix-rs server writes and the reading a pmix-rs client does
//! are each other's inverse: any job data, laid out, encoded in any dialect, decoded and read
//! back, is what was registered, up to the normalization [`expected`] spells out. Without this
//! the two sides could drift apart with each one's own tests still passing.

#![allow(clippy::unwrap_used)]

mod strategies;

use pmix_types::{DataType, Info, InfoFlags, Key, Nspace, Rank, Status, Value, attr};
use pmix_wire::openpmix::job::{
    Here, NO_SESSION, from_job_info, from_kvals, to_job_info, to_proc_kvals,
};
use pmix_wire::openpmix::{Cmd, Dialect, Reply};
use pmix_wire::{JobData, ProcRealm, Realm};
use proptest::collection::{btree_set, vec};
use proptest::prelude::*;
use strategies::dialect;

fn info(k: &str, v: impl Into<Value>) -> Info {
    Info::new(Key::new(k).unwrap(), v)
}

fn host(n: u8) -> String {
    format!("n{n}")
}

/// Values of the types job data carries, each of which the wire carries exactly.
fn value() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<u32>().prop_map(Value::Uint32),
        any::<u16>().prop_map(Value::Uint16),
        any::<u64>().prop_map(Value::Uint64),
        any::<bool>().prop_map(Value::Bool),
        "[a-z0-9,./]{0,12}".prop_map(Value::String),
        (0u32..64).prop_map(|r| Value::Rank(Rank(r))),
    ]
}

/// A node or process map, which the layout leaves out.
fn map() -> impl Strategy<Value = Info> {
    prop::sample::select(vec![attr::NODE_MAP, attr::PROC_MAP])
        .prop_map(|k| info(k, Value::Regex(b"raw:n0,n1\0".to_vec())))
}

/// Keys a host puts at one level: typical ones with values of the types the standard gives
/// them (kind 0 `uint32`, 1 `uint16`, 2 a string, 3 a rank; other types are
/// `integers_read_back_in_their_attributes_types`'), a user key of any value, and now and
/// then a map.
fn level(typical: &'static [(&'static str, u8)]) -> impl Strategy<Value = Vec<Info>> {
    let one = prop_oneof![
        4 => (prop::sample::select(typical.to_vec()), any::<u32>(), "[a-z0-9,]{1,8}").prop_map(
            |((k, kind), n, s)| match kind {
                0 => info(k, n),
                1 => info(k, n as u16),
                3 => info(k, Value::Rank(Rank(n))),
                _ => info(k, s),
            }
        ),
        2 => ("user\\.[a-z]{1,6}", value()).prop_map(|(k, v)| info(&k, v)),
        1 => map(),
    ];
    vec(one, 0..5)
}

const SESSION_KEYS: &[(&str, u8)] = &[
    (attr::UNIV_SIZE, 0),
    (attr::TMPDIR, 2),
    (attr::SESSION_ID, 0),
];
const JOB_KEYS: &[(&str, u8)] = &[
    (attr::JOB_SIZE, 0),
    (attr::MAX_PROCS, 0),
    (attr::NUM_NODES, 0),
    (attr::JOBID, 2),
    (attr::NSDIR, 2),
    (attr::NODE_LIST, 2),
];
const APP_KEYS: &[(&str, u8)] = &[(attr::APP_SIZE, 0), (attr::APPLDR, 3)];
const NODE_KEYS: &[(&str, u8)] = &[
    (attr::LOCAL_SIZE, 0),
    (attr::NODE_SIZE, 0),
    (attr::LOCAL_PEERS, 2),
    (attr::LOCALLDR, 3),
];
const PROC_KEYS: &[(&str, u8)] = &[
    (attr::LOCAL_RANK, 1),
    (attr::NODE_RANK, 1),
    (attr::APPNUM, 0),
];

/// Levels keyed by distinct ids; each entry sometimes names its own id (`id_key`), as a host
/// may.
fn realms(
    id_key: &'static str,
    typical: &'static [(&'static str, u8)],
) -> impl Strategy<Value = Vec<Realm>> {
    btree_set(0u32..8, 0..4).prop_flat_map(move |ids| {
        let n = ids.len();
        vec((any::<bool>(), level(typical)), n..=n).prop_map(move |levels| {
            ids.iter()
                .zip(levels)
                .map(|(&id, (named, mut infos))| {
                    if named {
                        infos.insert(0, info(id_key, id));
                    }
                    Realm { id, info: infos }
                })
                .collect()
        })
    })
}

prop_compose! {
    /// Job data as a host registers it: a few nodes (most with a hostname), applications and
    /// ranks (each on a node, by id and often by name too), the levels in any order.
    fn job_data()(
        nspace in strategies::nspace(),
        session in level(SESSION_KEYS),
        job in level(JOB_KEYS),
        apps in realms(attr::APPNUM, APP_KEYS),
        nodes in realms(attr::NODEID, NODE_KEYS),
        hostnames in vec(prop::option::weighted(0.8, 0u8..4), 8),
        ranks in btree_set(0u32..16, 0..5),
        proc_levels in vec((level(PROC_KEYS), any::<u8>(), any::<bool>()), 5),
        shuffle in any::<u64>(),
    ) -> JobData {
        let nodes: Vec<Realm> = nodes
            .into_iter()
            .map(|mut node| {
                if let Some(h) = hostnames[node.id as usize] {
                    node.info.push(info(attr::HOSTNAME, host(h)));
                }
                node
            })
            .collect();
        let mut procs: Vec<ProcRealm> = ranks
            .into_iter()
            .zip(proc_levels)
            .map(|(r, (mut infos, on, named))| {
                if let Some(node) = nodes.get(usize::from(on) % nodes.len().max(1)) {
                    infos.push(info(attr::NODEID, node.id));
                    if let (true, Some(h)) = (named, hostnames[node.id as usize]) {
                        infos.push(info(attr::HOSTNAME, host(h)));
                    }
                }
                ProcRealm { rank: Rank(r), info: infos }
            })
            .collect();
        // The engine keeps ranks in order, but the layout must not rely on it.
        if shuffle % 2 == 1 {
            procs.reverse();
        }
        let mut apps = apps;
        if shuffle % 3 == 1 {
            apps.reverse();
        }
        JobData { nspace, session, job, apps, nodes, procs }
    }
}

/// Where the reader runs: a rank (of the job or not) and a node name (of the job or not).
fn here() -> impl Strategy<Value = (Option<Rank>, Option<String>)> {
    (
        prop::option::of((0u32..16).prop_map(Rank)),
        prop::option::of((0u8..4).prop_map(host)),
    )
}

fn as_here((rank, hostname): &(Option<Rank>, Option<String>)) -> Here<'_> {
    Here {
        rank: *rank,
        hostname: hostname.as_deref(),
    }
}

/// `reply` as the reader gets it, having crossed the wire as the answer to `cmd`.
fn through_the_wire(reply: Reply, cmd: Cmd, dialect: Dialect) -> Reply {
    let mut bytes = Vec::new();
    reply.encode(dialect, &mut bytes).unwrap();
    Reply::decode(cmd, &bytes, dialect).unwrap()
}

fn find<'a>(infos: &'a [Info], k: &str) -> Option<&'a Value> {
    infos.iter().find(|i| i.key.as_str() == k).map(|i| &i.value)
}

fn plain(infos: &[Info]) -> Vec<Info> {
    infos
        .iter()
        .filter(|i| !matches!(i.value, Value::Regex(_)))
        .map(|i| Info {
            flags: InfoFlags::default(),
            ..i.clone()
        })
        .collect()
}

fn with_id(id_key: &str, id: Value, infos: &[Info]) -> Vec<Info> {
    let mut out = Vec::with_capacity(infos.len() + 1);
    if find(infos, id_key).is_none() {
        out.push(Info::new(Key::new(id_key).unwrap(), id));
    }
    out.extend(plain(infos));
    out
}

fn sorted_realms(realms: &[Realm], id_key: &str) -> Vec<Realm> {
    let mut out: Vec<Realm> = realms
        .iter()
        .map(|r| Realm {
            id: r.id,
            info: with_id(id_key, Value::Uint32(r.id), &r.info),
        })
        .collect();
    out.sort_by_key(|r| r.id);
    out
}

/// What a reader gets back from `job`, "the same information" made precise:
///
/// - maps (`PMIX_REGEX` values) are gone from every level, and no entry keeps its flags;
/// - the session level opens with `SESSION_ID` (`NO_SESSION` when the host gave none), each
///   node with its `NODEID` and each application with its `APPNUM` when the host did not
///   name them;
/// - nodes, applications and ranks come in id order;
/// - the job level is the host's, then `NODE_LIST` (the hostnames in node id order) when the
///   host gave none and some node has a hostname, then each key of the reader's node (the
///   node its rank's `NODEID` names, else the first with its hostname) the job level lacks;
/// - (values come in the standard's types here: a reserved key's integer of another type is
///   `integers_read_back_in_their_attributes_types`' subject);
/// - a rank whose `HOSTNAME` is a node's has that node's `NODEID`, and, lacking `LOCAL_RANK`,
///   its place in its node's `LOCAL_PEERS` (by `HOSTNAME`, else by `NODEID`);
/// - when the data holds `JOB_SIZE` ranks and each has an `APPNUM`: each application has
///   `APPNUM`, `APP_SIZE` and `APPLDR` (added when missing), and the job `JOB_NUM_APPS`.
///
/// Everything else (values, the order of keys within a level, repeated keys) is kept.
fn expected(job: &JobData, here: Here<'_>) -> JobData {
    let session = with_id(attr::SESSION_ID, Value::Uint32(NO_SESSION), &job.session);
    let nodes = sorted_realms(&job.nodes, attr::NODEID);
    let apps = sorted_realms(&job.apps, attr::APPNUM);
    let mut procs: Vec<ProcRealm> = job
        .procs
        .iter()
        .map(|p| ProcRealm {
            rank: p.rank,
            info: plain(&p.info),
        })
        .collect();
    procs.sort_by_key(|p| p.rank);
    let mut apps = apps;
    let mut top = plain(&job.job);
    for p in &mut procs {
        let host = find(&p.info, attr::HOSTNAME)
            .and_then(Value::as_str)
            .map(str::to_owned);
        let by_host = host.and_then(|h| {
            nodes
                .iter()
                .find(|n| find(&n.info, attr::HOSTNAME).and_then(Value::as_str) == Some(&h))
        });
        let node = if let Some(n) = by_host {
            match p.info.iter_mut().find(|i| i.key.as_str() == attr::NODEID) {
                Some(i) => i.value = Value::Uint32(n.id),
                None => p.info.push(info(attr::NODEID, n.id)),
            }
            Some(n)
        } else {
            let id = find(&p.info, attr::NODEID).and_then(Value::as_u32);
            nodes.iter().find(|n| Some(n.id) == id)
        };
        if let Some(n) = node
            && find(&p.info, attr::LOCAL_RANK).is_none()
            && let Some(peers) = find(&n.info, attr::LOCAL_PEERS).and_then(Value::as_str)
            && let Some(i) = peers
                .split(',')
                .position(|r| r.trim().parse::<u32>().ok() == Some(p.rank.0))
            && let Ok(i) = u16::try_from(i)
        {
            p.info.push(info(attr::LOCAL_RANK, Value::Uint16(i)));
        }
    }
    let appnums: Option<Vec<(Rank, u32)>> = procs
        .iter()
        .map(|p| Some((p.rank, find(&p.info, attr::APPNUM)?.as_u32()?)))
        .collect();
    let size = find(&top, attr::JOB_SIZE).and_then(Value::as_u32);
    if let Some(appnums) = appnums
        && size.is_some_and(|n| n as usize == procs.len())
    {
        let mut ids: Vec<u32> = appnums.iter().map(|(_, a)| *a).collect();
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            let members: Vec<Rank> = appnums
                .iter()
                .filter(|(_, a)| *a == id)
                .map(|(r, _)| *r)
                .collect();
            let derived = [
                info(attr::APPNUM, Value::Uint32(id)),
                info(attr::APP_SIZE, Value::Uint32(members.len() as u32)),
                info(attr::APPLDR, Value::Rank(members[0])),
            ];
            let at = match apps.iter().position(|a| a.id == id) {
                Some(at) => at,
                None => {
                    apps.push(Realm {
                        id,
                        info: Vec::new(),
                    });
                    apps.len() - 1
                }
            };
            for d in derived {
                if find(&apps[at].info, d.key.as_str()).is_none() {
                    apps[at].info.push(d);
                }
            }
        }
        apps.sort_by_key(|a| a.id);
        if find(&top, attr::JOB_NUM_APPS).is_none() {
            top.push(info(attr::JOB_NUM_APPS, Value::Uint32(apps.len() as u32)));
        }
    }

    if find(&job.job, attr::NODE_LIST).is_none() {
        let names: Vec<&str> = nodes
            .iter()
            .filter_map(|n| find(&n.info, attr::HOSTNAME)?.as_str())
            .collect();
        if !names.is_empty() {
            top.push(info(attr::NODE_LIST, names.join(",")));
        }
    }
    let by_rank = here
        .rank
        .and_then(|r| procs.iter().find(|p| p.rank == r))
        .and_then(|p| find(&p.info, attr::NODEID)?.as_u32())
        .and_then(|id| nodes.iter().find(|n| n.id == id));
    let by_name = || {
        let h = here.hostname?;
        nodes
            .iter()
            .find(|n| find(&n.info, attr::HOSTNAME).and_then(Value::as_str) == Some(h))
    };
    if let Some(node) = by_rank.or_else(by_name) {
        for i in &node.info {
            if find(&top, i.key.as_str()).is_none() {
                top.push(i.clone());
            }
        }
    }
    JobData {
        nspace: job.nspace.clone(),
        session,
        job: top,
        apps,
        nodes,
        procs,
    }
}

/// Integers of the widths hosts use (Slurm hands `APPNUM` as an `int`).
fn integer() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<u8>().prop_map(Value::Uint8),
        any::<u16>().prop_map(Value::Uint16),
        any::<u32>().prop_map(Value::Uint32),
        any::<u64>().prop_map(Value::Uint64),
        any::<u64>().prop_map(Value::Size),
        any::<i32>().prop_map(Value::Int32),
        any::<i64>().prop_map(Value::Int64),
        (0u32..64).prop_map(|r| Value::Rank(Rank(r))),
    ]
}

/// The largest number a value of the integer type `ty` holds.
fn largest(ty: DataType) -> u64 {
    match ty {
        DataType::UINT8 => u8::MAX.into(),
        DataType::UINT16 => u16::MAX.into(),
        DataType::UINT32 | DataType::PROC_RANK => u32::MAX.into(),
        _ => u64::MAX,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// A standard key whose integer came as another type than the standard's reads back in
    /// the standard's type with the same number, when the number fits in it; otherwise, and
    /// for a value already of that type, as it was sent.
    #[test]
    fn integers_read_back_in_their_attributes_types(
        nspace in strategies::nspace(),
        key in prop::sample::select(vec![
            attr::JOB_SIZE, attr::UNIV_SIZE, attr::LOCAL_RANK, attr::APPLDR, attr::MAX_PROCS,
        ]),
        sent in integer(),
        dialect in dialect(),
    ) {
        let job = JobData {
            nspace,
            session: Vec::new(),
            job: vec![info(key, sent.clone())],
            apps: Vec::new(),
            nodes: Vec::new(),
            procs: Vec::new(),
        };
        let reply = Reply::JobInfo(to_job_info(&job, dialect).unwrap());
        let Reply::JobInfo(info) = through_the_wire(reply, Cmd::REQ, dialect) else {
            panic!("not job data");
        };
        let here = Here { rank: None, hostname: None };
        let back = from_job_info(info, dialect, here).unwrap();
        let back = find(&back.job, key).unwrap().clone();
        let ty = attr::lookup(key).unwrap().ty;
        match sent.as_u64().filter(|n| *n <= largest(ty)) {
            Some(n) => {
                prop_assert_eq!(back.data_type(), ty);
                prop_assert_eq!(back.as_u64(), Some(n));
            }
            None => prop_assert_eq!(back, sent),
        }
    }

    /// The answer to `REQ` (and each job of a `CONNECTNB` answer).
    #[test]
    fn job_info_reads_back_as_registered(
        job in job_data(),
        dialect in dialect(),
        here in here(),
    ) {
        let here = as_here(&here);
        let sent = Reply::JobInfo(to_job_info(&job, dialect).unwrap());
        let Reply::JobInfo(info) = through_the_wire(sent, Cmd::REQ, dialect) else {
            panic!("not job data");
        };
        let back = from_job_info(info, dialect, here).unwrap();
        prop_assert_eq!(back, expected(&job, here));
    }

    /// Another namespace's job data in a `GETNB` answer: the rank `WILDCARD` entry reads back
    /// as the job without its ranks (so "this node" is known by name only), and each rank's
    /// entry holds that rank's keys.
    #[test]
    fn get_answer_reads_back_as_registered(
        job in job_data(),
        dialect in dialect(),
        here in here(),
    ) {
        let here = as_here(&here);
        let sent = Reply::Get { status: Status::SUCCESS, data: to_proc_kvals(&job) };
        let Reply::Get { data, .. } = through_the_wire(sent, Cmd::GETNB, dialect) else {
            panic!("not a get answer");
        };
        let mut data = data.into_iter();
        let wild = data.next().unwrap();
        prop_assert_eq!(&wild.proc.nspace, &job.nspace);
        prop_assert_eq!(wild.proc.rank, Rank::WILDCARD);
        let back = from_kvals(wild.proc.nspace, wild.kvals, dialect, here).unwrap();
        let without_ranks = JobData { procs: Vec::new(), ..job.clone() };
        prop_assert_eq!(back, expected(&without_ranks, here));

        let ranks: Vec<(Nspace, Rank, Vec<Info>)> = data
            .map(|pk| {
                let info = pk.kvals.into_iter().map(|kv| Info::new(kv.key, kv.value)).collect();
                (pk.proc.nspace, pk.proc.rank, info)
            })
            .collect();
        let want: Vec<(Nspace, Rank, Vec<Info>)> = job
            .procs
            .iter()
            .map(|p| (job.nspace.clone(), p.rank, plain(&p.info)))
            .collect();
        prop_assert_eq!(ranks, want);
    }
}
