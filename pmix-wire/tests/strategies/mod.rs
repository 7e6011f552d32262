//! proptest strategies for the data model, every native-protocol message and the OpenPMIx
//! dialects.
//!
//! Trees are kept small (a few levels, a few items per list) so that ten thousand cases of a
//! whole message run in seconds in a debug build; breadth comes from the number of cases.

// Each test binary uses a different subset of these.
#![allow(dead_code)]

use pmix_types::{
    AllocDirective, Coord, CoordView, Cpuset, DataArray, DataRange, DataType, DeviceDistance,
    DeviceType, DiskStats, Endpoint, Envar, Geometry, Info, InfoFlags, IofChannel, JobState, Key,
    Kval, LinkState, Locality, NetStats, NodeStats, Nspace, Persistence, Proc, ProcInfo, ProcState,
    ProcStats, Rank, RegAttr, Scope, Status, TOPOLOGY_SUPPORT_LEN, Timeval, Topology, Value,
};
use pmix_wire::openpmix::{BufferType, Codec, Dialect};
use pmix_wire::{
    App, ClientMsg, Event, Hello, JobData, JobImage, Kv, MAGIC, PROTOCOL_VERSION, ProcKvs,
    ProcRealm, Published, Query, Realm, Reply, ReplyBody, Request, ServerMsg, Welcome, WelcomeJob,
};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::strategy::Union;

/// Short strings of any characters, control characters and NUL included.
pub(crate) fn any_string() -> impl Strategy<Value = String> {
    vec(any::<char>(), 0..10).prop_map(String::from_iter)
}

pub(crate) fn bytes() -> impl Strategy<Value = Vec<u8>> {
    vec(any::<u8>(), 0..12)
}

/// Names the way they usually look, with any non-NUL characters now and then, and at the
/// standard's maximum length. (Character vectors rather than regexes: regex generation
/// dominated the run time of the debug-build tests.)
fn name(min: usize, max_len: usize) -> impl Strategy<Value = String> {
    const ASCII: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789._-";
    prop_oneof![
        8 => vec(prop::sample::select(ASCII), min..10)
            .prop_map(|b| String::from_utf8(b).expect("ascii")),
        1 => (Just("pmix."), vec(prop::sample::select(ASCII), 0..8))
            .prop_map(|(p, b)| format!("{p}{}", String::from_utf8(b).expect("ascii"))),
        2 => vec(any::<char>().prop_filter("no NUL", |&c| c != '\0'), min..6)
            .prop_map(String::from_iter),
        1 => Just("x".repeat(max_len)),
    ]
}

pub(crate) fn nspace() -> impl Strategy<Value = Nspace> {
    name(0, pmix_types::MAX_NSLEN)
        .prop_map(|s| Nspace::new(s).expect("generated namespaces are valid"))
}

pub(crate) fn key() -> impl Strategy<Value = Key> {
    name(1, pmix_types::MAX_KEYLEN).prop_map(|s| Key::new(s).expect("generated keys are valid"))
}

pub(crate) fn rank() -> impl Strategy<Value = Rank> {
    prop_oneof![
        3 => (0u32..64).prop_map(Rank),
        1 => any::<u32>().prop_map(Rank),
        1 => prop::sample::select(vec![
            Rank::UNDEF,
            Rank::WILDCARD,
            Rank::LOCAL_NODE,
            Rank::INVALID,
            Rank::LOCAL_PEERS,
        ]),
    ]
}

pub(crate) fn proc_() -> impl Strategy<Value = Proc> {
    (nspace(), rank()).prop_map(|(n, r)| Proc::new(n, r))
}

pub(crate) fn status() -> impl Strategy<Value = Status> {
    prop_oneof![(-60i32..=0).prop_map(Status), any::<i32>().prop_map(Status)]
}

fn proc_info() -> impl Strategy<Value = ProcInfo> {
    (
        proc_(),
        any_string(),
        any_string(),
        any::<u32>(),
        any::<i32>(),
        any::<u8>(),
    )
        .prop_map(
            |(proc, hostname, executable_name, pid, exit_code, state)| ProcInfo {
                proc,
                hostname,
                executable_name,
                pid,
                exit_code,
                state: ProcState(state),
            },
        )
}

/// Every variant of [`Value`] that holds no other value.
pub(crate) fn leaf_value() -> impl Strategy<Value = Value> {
    let arms: Vec<BoxedStrategy<Value>> = vec![
        Just(Value::Undef).boxed(),
        any::<bool>().prop_map(Value::Bool).boxed(),
        any::<u8>().prop_map(Value::Byte).boxed(),
        any_string().prop_map(Value::String).boxed(),
        any::<u64>().prop_map(Value::Size).boxed(),
        any::<u32>().prop_map(Value::Pid).boxed(),
        any::<i32>().prop_map(Value::Int).boxed(),
        any::<i8>().prop_map(Value::Int8).boxed(),
        any::<i16>().prop_map(Value::Int16).boxed(),
        any::<i32>().prop_map(Value::Int32).boxed(),
        any::<i64>().prop_map(Value::Int64).boxed(),
        any::<u32>().prop_map(Value::Uint).boxed(),
        any::<u8>().prop_map(Value::Uint8).boxed(),
        any::<u16>().prop_map(Value::Uint16).boxed(),
        any::<u32>().prop_map(Value::Uint32).boxed(),
        any::<u64>().prop_map(Value::Uint64).boxed(),
        // From bits, so NaNs with payloads, infinities and -0 all occur.
        any::<u32>()
            .prop_map(|b| Value::Float(f32::from_bits(b)))
            .boxed(),
        any::<u64>()
            .prop_map(|b| Value::Double(f64::from_bits(b)))
            .boxed(),
        (any::<i64>(), any::<i64>())
            .prop_map(|(sec, usec)| Value::Timeval(Timeval { sec, usec }))
            .boxed(),
        any::<i64>().prop_map(Value::Time).boxed(),
        status().prop_map(Value::Status).boxed(),
        rank().prop_map(Value::Rank).boxed(),
        proc_().prop_map(Value::Proc).boxed(),
        nspace().prop_map(Value::Nspace).boxed(),
        bytes().prop_map(Value::ByteObject).boxed(),
        any::<u8>()
            .prop_map(|v| Value::Persistence(Persistence(v)))
            .boxed(),
        any::<u8>().prop_map(|v| Value::Scope(Scope(v))).boxed(),
        any::<u8>()
            .prop_map(|v| Value::DataRange(DataRange(v)))
            .boxed(),
        any::<u32>()
            .prop_map(|v| Value::InfoDirectives(InfoFlags(v)))
            .boxed(),
        any::<u16>()
            .prop_map(|v| Value::DataType(DataType(v)))
            .boxed(),
        any::<u8>()
            .prop_map(|v| Value::ProcState(ProcState(v)))
            .boxed(),
        proc_info()
            .prop_map(|p| Value::ProcInfo(Box::new(p)))
            .boxed(),
        (any_string(), any_string(), any::<u8>())
            .prop_map(|(name, value, separator)| {
                Value::Envar(Envar {
                    name,
                    value,
                    separator,
                })
            })
            .boxed(),
        bytes().prop_map(Value::Regex).boxed(),
        bytes().prop_map(Value::CompressedString).boxed(),
        bytes().prop_map(Value::CompressedBytes).boxed(),
        any::<u8>()
            .prop_map(|v| Value::AllocDirective(AllocDirective(v)))
            .boxed(),
        any::<u16>()
            .prop_map(|v| Value::IofChannel(IofChannel(v)))
            .boxed(),
        any::<u8>()
            .prop_map(|v| Value::JobState(JobState(v)))
            .boxed(),
        any::<u8>()
            .prop_map(|v| Value::LinkState(LinkState(v)))
            .boxed(),
        any::<u16>()
            .prop_map(|v| Value::Locality(Locality(v)))
            .boxed(),
        (
            any_string(),
            any_string(),
            any::<u16>(),
            proptest::collection::vec(any_string(), 0..3),
        )
            .prop_map(|(name, key, ty, description)| {
                Value::RegAttr(Box::new(RegAttr {
                    name,
                    key,
                    ty: DataType(ty),
                    description,
                }))
            })
            .boxed(),
        Just(Value::NullString).boxed(),
    ];
    let mut arms = arms;
    arms.extend(structured_values());
    balanced_union(arms)
}

fn opt_string() -> impl Strategy<Value = Option<String>> {
    proptest::option::of(any_string())
}

/// Floats that `%f` prints exactly (OpenPMIx sends floats as text; their loss is tested
/// apart).
fn exact_f32() -> impl Strategy<Value = f32> {
    (0u32..4096).prop_map(|b| b as f32 / 64.0)
}

fn timeval() -> impl Strategy<Value = Timeval> {
    (any::<i64>(), any::<i64>()).prop_map(|(sec, usec)| Timeval { sec, usec })
}

fn coord() -> impl Strategy<Value = Coord> {
    (any::<u8>(), vec(any::<u32>(), 0..4)).prop_map(|(v, coord)| Coord {
        view: CoordView(v),
        coord,
    })
}

fn disk_stats() -> impl Strategy<Value = DiskStats> {
    (opt_string(), [any::<u64>(); 11]).prop_map(|(disk, c)| DiskStats::from_counters(disk, c))
}

fn net_stats() -> impl Strategy<Value = NetStats> {
    (opt_string(), [any::<u64>(); 6])
        .prop_map(|(net_interface, c)| NetStats::from_counters(net_interface, c))
}

/// The structured types of `pmix_common.h` (hardware, fabric, statistics, storage, requests
/// as values), with floats `%f` carries exactly. `POINTER` is left out: no wire carries it.
fn structured_values() -> Vec<BoxedStrategy<Value>> {
    vec![
        coord().prop_map(|c| Value::Coord(Box::new(c))).boxed(),
        opt_string()
            .prop_map(|cpus| Value::Cpuset(Box::new(Cpuset { cpus })))
            .boxed(),
        (any::<u64>(), opt_string(), opt_string(), vec(coord(), 0..3))
            .prop_map(|(fabric, uuid, osname, coordinates)| {
                Value::Geometry(Box::new(Geometry {
                    fabric,
                    uuid,
                    osname,
                    coordinates,
                }))
            })
            .boxed(),
        (
            opt_string(),
            opt_string(),
            any::<u64>(),
            any::<u16>(),
            any::<u16>(),
        )
            .prop_map(|(uuid, osname, kind, mindist, maxdist)| {
                Value::DeviceDist(Box::new(DeviceDistance {
                    uuid,
                    osname,
                    kind: DeviceType(kind),
                    mindist,
                    maxdist,
                }))
            })
            .boxed(),
        (opt_string(), opt_string(), bytes())
            .prop_map(|(uuid, osname, address)| {
                Value::Endpoint(Box::new(Endpoint {
                    uuid,
                    osname,
                    address,
                }))
            })
            .boxed(),
        prop_oneof![
            Just(Topology::default()),
            (any_string(), vec(any::<u8>(), TOPOLOGY_SUPPORT_LEN)).prop_map(|(xml, support)| {
                Topology {
                    xml: Some(xml),
                    support,
                }
            }),
        ]
        .prop_map(|t| Value::Topology(Box::new(t)))
        .boxed(),
        any::<u64>()
            .prop_map(|t| Value::DevType(DeviceType(t)))
            .boxed(),
        (
            (
                opt_string(),
                proc_(),
                any::<u32>(),
                opt_string(),
                any::<u8>(),
            ),
            (timeval(), exact_f32(), any::<i32>(), any::<u16>()),
            (
                [exact_f32(), exact_f32(), exact_f32(), exact_f32()],
                any::<u16>(),
                timeval(),
            ),
        )
            .prop_map(
                |(
                    (node, proc, pid, cmd, state),
                    (time, percent_cpu, priority, num_threads),
                    ([pss, vsize, rss, peak_vsize], processor, sample_time),
                )| {
                    Value::ProcStats(Box::new(ProcStats {
                        node,
                        proc,
                        pid,
                        cmd,
                        state,
                        time,
                        percent_cpu,
                        priority,
                        num_threads,
                        pss,
                        vsize,
                        rss,
                        peak_vsize,
                        processor,
                        sample_time,
                    }))
                },
            )
            .boxed(),
        disk_stats()
            .prop_map(|d| Value::DiskStats(Box::new(d)))
            .boxed(),
        net_stats()
            .prop_map(|n| Value::NetStats(Box::new(n)))
            .boxed(),
        (
            opt_string(),
            proptest::array::uniform11(exact_f32()),
            timeval(),
            vec(disk_stats(), 0..2),
            vec(net_stats(), 0..2),
        )
            .prop_map(|(node, f, sample_time, diskstats, netstats)| {
                let mut stats = NodeStats {
                    node,
                    sample_time,
                    diskstats,
                    netstats,
                    ..NodeStats::default()
                };
                stats.set_loads(f);
                Value::NodeStats(Box::new(stats))
            })
            .boxed(),
        any::<u64>().prop_map(Value::StorageMedium).boxed(),
        any::<u64>().prop_map(Value::StorageAccess).boxed(),
        any::<u64>().prop_map(Value::StoragePersistence).boxed(),
        any::<u16>().prop_map(Value::StorageAccessType).boxed(),
        (any::<u8>(), bytes())
            .prop_map(|(kind, bytes)| Value::Buffer(Box::new(pmix_types::Buffer { kind, bytes })))
            .boxed(),
        bytes().prop_map(Value::DataBuffer).boxed(),
        (key(), any::<u32>())
            .prop_map(|(k, v)| Value::Kval(Box::new(Kval::new(k, Value::Uint32(v)))))
            .boxed(),
        (proc_(), key(), any_string())
            .prop_map(|(proc, key, s)| {
                Value::Pdata(Box::new(Published {
                    proc,
                    key,
                    value: Value::String(s),
                }))
            })
            .boxed(),
        (vec(key(), 0..3), vec((key(), any::<u32>()), 0..2))
            .prop_map(|(keys, q)| {
                let qualifiers = q
                    .into_iter()
                    .map(|(k, v)| Info::new(k, Value::Uint32(v)))
                    .collect();
                Value::Query(Box::new(Query { keys, qualifiers }))
            })
            .boxed(),
        (
            any_string(),
            vec(any_string(), 0..3),
            vec(any_string(), 0..2),
            any_string(),
            any::<u32>(),
            vec((key(), any::<u32>()), 0..2),
        )
            .prop_map(|(cmd, argv, env, cwd, maxprocs, info)| {
                let info = info
                    .into_iter()
                    .map(|(k, v)| Info::new(k, Value::Uint32(v)))
                    .collect();
                Value::App(Box::new(App {
                    cmd,
                    argv,
                    env,
                    cwd,
                    maxprocs,
                    info,
                }))
            })
            .boxed(),
    ]
}

/// A union of `arms`, equally likely, as a two-level tree.
///
/// proptest's `Union` prepares a lazy tree (a clone of the runner's state) for every arm before
/// the one it picks, which made a flat union of forty arms the slowest part of these tests.
fn balanced_union<T: std::fmt::Debug + 'static>(
    arms: Vec<BoxedStrategy<T>>,
) -> Union<BoxedStrategy<T>> {
    let n = arms.len();
    let group = n.isqrt().max(1);
    let mut groups = Vec::new();
    let mut arms = arms.into_iter();
    loop {
        let chunk: Vec<_> = arms.by_ref().take(group).collect();
        if chunk.is_empty() {
            break;
        }
        let weight = u32::try_from(chunk.len()).expect("few arms");
        groups.push((weight, Union::new(chunk).boxed()));
    }
    Union::new_weighted(groups)
}

fn info_with(value: impl Strategy<Value = Value>) -> impl Strategy<Value = Info> {
    (key(), value, any::<u32>()).prop_map(|(key, value, flags)| Info {
        key,
        value,
        flags: InfoFlags(flags),
    })
}

/// Any [`Value`], with `DataArray` and `Info` nesting up to three levels.
pub(crate) fn value() -> impl Strategy<Value = Value> {
    value_sized(3, 24, 4)
}

/// A [`Value`] as it travels inside a message: nesting up to two levels, smaller trees, since a
/// message holds many.
pub(crate) fn small_value() -> impl Strategy<Value = Value> {
    value_sized(2, 6, 3)
}

fn value_sized(depth: u32, size: u32, items: u32) -> impl Strategy<Value = Value> {
    leaf_value().prop_recursive(depth, size, items, move |inner| {
        prop_oneof![
            // Mixed elements, declared VALUE or (when they happen to agree) their common type.
            vec(inner.clone(), 0..items as usize).prop_map(|elems| {
                let ty = match elems.first() {
                    Some(v) if elems.iter().all(|w| w.data_type() == v.data_type()) => {
                        v.data_type()
                    }
                    _ => DataType::VALUE,
                };
                Value::from(DataArray::new(ty, elems).expect("element types checked"))
            }),
            // Empty arrays keep any declared type.
            any::<u16>().prop_map(|t| Value::from(
                DataArray::new(DataType(t), Vec::new()).expect("empty arrays are valid")
            )),
            vec(info_with(inner.clone()), 0..items as usize)
                .prop_map(|infos| Value::from(DataArray::from_infos(infos))),
            info_with(inner).prop_map(|i| Value::Info(Box::new(i))),
        ]
    })
}

pub(crate) fn info() -> impl Strategy<Value = Info> {
    info_with(small_value())
}

pub(crate) fn infos() -> impl Strategy<Value = Vec<Info>> {
    vec(info(), 0..3)
}

pub(crate) fn kv() -> impl Strategy<Value = Kv> {
    (any::<u8>(), key(), small_value()).prop_map(|(s, key, value)| Kv {
        scope: Scope(s),
        key,
        value,
    })
}

pub(crate) fn proc_kvs() -> impl Strategy<Value = ProcKvs> {
    (proc_(), vec(kv(), 0..3)).prop_map(|(proc, kvs)| ProcKvs { proc, kvs })
}

fn realm() -> impl Strategy<Value = Realm> {
    (any::<u32>(), infos()).prop_map(|(id, info)| Realm { id, info })
}

pub(crate) fn job_data() -> impl Strategy<Value = JobData> {
    (
        nspace(),
        infos(),
        infos(),
        vec(realm(), 0..2),
        vec(realm(), 0..2),
        vec(
            (rank(), infos()).prop_map(|(rank, info)| ProcRealm { rank, info }),
            0..3,
        ),
    )
        .prop_map(|(nspace, session, job, apps, nodes, procs)| JobData {
            nspace,
            session,
            job,
            apps,
            nodes,
            procs,
        })
}

fn app() -> impl Strategy<Value = App> {
    (
        any_string(),
        vec(any_string(), 0..3),
        vec(any_string(), 0..3),
        any_string(),
        any::<u32>(),
        infos(),
    )
        .prop_map(|(cmd, argv, env, cwd, maxprocs, info)| App {
            cmd,
            argv,
            env,
            cwd,
            maxprocs,
            info,
        })
}

pub(crate) fn event() -> impl Strategy<Value = Event> {
    (status(), proc_(), any::<u8>(), infos()).prop_map(|(code, source, range, info)| Event {
        code,
        source,
        range: DataRange(range),
        info,
    })
}

fn procs() -> impl Strategy<Value = Vec<Proc>> {
    vec(proc_(), 0..3)
}

fn keys() -> impl Strategy<Value = Vec<Key>> {
    vec(key(), 0..3)
}

fn statuses() -> impl Strategy<Value = Vec<Status>> {
    vec(status(), 0..3)
}

/// Every variant of [`Request`], equally often.
pub(crate) fn request() -> impl Strategy<Value = Request> {
    let arms: Vec<BoxedStrategy<Request>> = vec![
        vec(kv(), 0..4)
            .prop_map(|kvs| Request::Commit { kvs })
            .boxed(),
        (procs(), infos())
            .prop_map(|(procs, info)| Request::Fence { procs, info })
            .boxed(),
        (proc_(), proptest::option::of(key()), infos())
            .prop_map(|(proc, key, info)| Request::Get { proc, key, info })
            .boxed(),
        (infos(), infos())
            .prop_map(|(data, info)| Request::Publish { data, info })
            .boxed(),
        (keys(), infos())
            .prop_map(|(keys, info)| Request::Lookup { keys, info })
            .boxed(),
        (keys(), infos())
            .prop_map(|(keys, info)| Request::Unpublish { keys, info })
            .boxed(),
        (infos(), vec(app(), 0..2))
            .prop_map(|(job_info, apps)| Request::Spawn { job_info, apps })
            .boxed(),
        (procs(), infos())
            .prop_map(|(procs, info)| Request::Connect { procs, info })
            .boxed(),
        (procs(), infos())
            .prop_map(|(procs, info)| Request::Disconnect { procs, info })
            .boxed(),
        (status(), any_string(), procs())
            .prop_map(|(status, message, procs)| Request::Abort {
                status,
                message,
                procs,
            })
            .boxed(),
        (statuses(), infos())
            .prop_map(|(codes, info)| Request::RegisterEvents { codes, info })
            .boxed(),
        statuses()
            .prop_map(|codes| Request::DeregisterEvents { codes })
            .boxed(),
        event().prop_map(|event| Request::Notify { event }).boxed(),
        vec(
            (keys(), infos()).prop_map(|(keys, qualifiers)| Query { keys, qualifiers }),
            0..3,
        )
        .prop_map(|queries| Request::Query { queries })
        .boxed(),
        (infos(), infos())
            .prop_map(|(data, directives)| Request::Log { data, directives })
            .boxed(),
        (procs(), infos())
            .prop_map(|(targets, directives)| Request::JobControl {
                targets,
                directives,
            })
            .boxed(),
        ("[a-z:/]{0,12}", procs(), infos())
            .prop_map(|(grp, procs, info)| Request::GroupConstruct { grp, procs, info })
            .boxed(),
        ("[a-z:/]{0,12}", procs(), infos())
            .prop_map(|(grp, procs, info)| Request::GroupDestruct { grp, procs, info })
            .boxed(),
        infos().prop_map(|info| Request::Finalize { info }).boxed(),
        ("[a-z:/]{0,12}", infos())
            .prop_map(|(grp, info)| Request::GroupLeave { grp, info })
            .boxed(),
    ];
    balanced_union(arms)
}

/// Every variant of [`ReplyBody`], equally often.
pub(crate) fn reply_body() -> impl Strategy<Value = ReplyBody> {
    let arms: Vec<BoxedStrategy<ReplyBody>> = vec![
        Just(ReplyBody::None).boxed(),
        vec(proc_kvs(), 0..3)
            .prop_map(|data| ReplyBody::Fence { data })
            .boxed(),
        (vec(proc_kvs(), 0..2), vec(job_data(), 0..2))
            .prop_map(|(data, jobs)| ReplyBody::Get {
                data,
                jobs: jobs
                    .iter()
                    .map(|j| JobImage::from_job_data(j).unwrap())
                    .collect(),
            })
            .boxed(),
        vec(
            (proc_(), key(), small_value()).prop_map(|(proc, key, value)| Published {
                proc,
                key,
                value,
            }),
            0..3,
        )
        .prop_map(|found| ReplyBody::Lookup { found })
        .boxed(),
        nspace()
            .prop_map(|nspace| ReplyBody::Spawn { nspace })
            .boxed(),
        (vec(job_data(), 0..2), vec(proc_kvs(), 0..2))
            .prop_map(|(jobs, data)| ReplyBody::Connect { jobs, data })
            .boxed(),
        infos()
            .prop_map(|results| ReplyBody::Query { results })
            .boxed(),
        (procs(), proptest::option::of(any::<u64>()))
            .prop_map(|(members, context_id)| ReplyBody::Group {
                members,
                context_id,
            })
            .boxed(),
    ];
    Union::new(arms)
}

pub(crate) fn client_msg() -> impl Strategy<Value = ClientMsg> {
    (any::<u32>(), request()).prop_map(|(id, req)| ClientMsg { id, req })
}

pub(crate) fn server_msg() -> impl Strategy<Value = ServerMsg> {
    prop_oneof![
        4 => (any::<u32>(), status(), reply_body()).prop_map(|(id, status, body)| {
            ServerMsg::Reply {
                id,
                reply: Reply { status, body },
            }
        }),
        1 => event().prop_map(ServerMsg::Event),
    ]
}

/// A collecting fence's reply with its data, as a client reads it most.
#[allow(dead_code)] // not every test binary that includes this module uses it
pub(crate) fn fence_reply() -> impl Strategy<Value = ServerMsg> {
    (any::<u32>(), status(), vec(proc_kvs(), 0..5)).prop_map(|(id, status, data)| {
        ServerMsg::Reply {
            id,
            reply: Reply {
                status,
                body: ReplyBody::Fence { data },
            },
        }
    })
}

/// A handshake of this protocol version (the only kind `decode_hello` accepts).
pub(crate) fn hello() -> impl Strategy<Value = Hello> {
    (nspace(), rank(), vec(any::<u8>(), 0..40), any::<u32>()).prop_map(
        |(nspace, rank, secret, pid)| Hello {
            magic: MAGIC.to_owned(),
            version: PROTOCOL_VERSION,
            nspace,
            rank,
            secret,
            pid,
        },
    )
}

pub(crate) fn welcome() -> impl Strategy<Value = Welcome> {
    prop_oneof![
        (any::<u16>(), job_data()).prop_map(|(version, job)| Welcome::Accepted {
            version,
            job: WelcomeJob::Inline(JobImage::from_job_data(&job).unwrap()),
        }),
        (any::<u16>(), any::<u64>()).prop_map(|(version, len)| Welcome::Accepted {
            version,
            job: WelcomeJob::Shared { len },
        }),
        (status(), any::<u16>(), any_string()).prop_map(|(status, version, reason)| {
            Welcome::Refused {
                status,
                version,
                reason,
            }
        }),
    ]
}

// ---- the name-server protocol -------------------------------------------------------------

fn ns_caller() -> impl Strategy<Value = pmix_wire::NsCaller> {
    (proc_(), any::<u32>(), any::<u32>()).prop_map(|(proc, uid, gid)| pmix_wire::NsCaller {
        proc,
        uid,
        gid,
    })
}

/// Every variant of [`pmix_wire::NsRequest`], equally often.
pub(crate) fn ns_request() -> impl Strategy<Value = pmix_wire::NsRequest> {
    use pmix_wire::NsRequest;
    let arms: Vec<BoxedStrategy<NsRequest>> = vec![
        (ns_caller(), infos(), infos())
            .prop_map(|(caller, data, info)| NsRequest::Publish { caller, data, info })
            .boxed(),
        (ns_caller(), keys(), infos())
            .prop_map(|(caller, keys, info)| NsRequest::Lookup { caller, keys, info })
            .boxed(),
        (ns_caller(), keys(), infos())
            .prop_map(|(caller, keys, info)| NsRequest::Unpublish { caller, keys, info })
            .boxed(),
        nspace()
            .prop_map(|nspace| NsRequest::NspaceStarted { nspace })
            .boxed(),
        nspace()
            .prop_map(|nspace| NsRequest::NspaceEnded { nspace })
            .boxed(),
        proc_()
            .prop_map(|proc| NsRequest::ProcEnded { proc })
            .boxed(),
        (vec(proc_(), 0..4), infos(), vec(any::<u8>(), 0..32))
            .prop_map(|(procs, info, data)| NsRequest::Connect { procs, info, data })
            .boxed(),
        (vec(proc_(), 0..4), infos(), vec(any::<u8>(), 0..32))
            .prop_map(|(procs, info, data)| NsRequest::Fence { procs, info, data })
            .boxed(),
        (vec(proc_(), 0..4), infos())
            .prop_map(|(procs, info)| NsRequest::Disconnect { procs, info })
            .boxed(),
    ];
    Union::new(arms)
}

pub(crate) fn ns_msg() -> impl Strategy<Value = pmix_wire::NsMsg> {
    (any::<u32>(), ns_request()).prop_map(|(id, req)| pmix_wire::NsMsg { id, req })
}

pub(crate) fn ns_reply() -> impl Strategy<Value = pmix_wire::NsReply> {
    let published = (proc_(), key(), small_value()).prop_map(|(proc, key, value)| Published {
        proc,
        key,
        value,
    });
    (
        any::<u32>(),
        status(),
        vec(published, 0..3),
        vec(any::<u8>(), 0..32),
    )
        .prop_map(|(id, status, found, data)| pmix_wire::NsReply {
            id,
            status,
            found,
            data,
        })
}

pub(crate) fn ns_hello() -> impl Strategy<Value = pmix_wire::NsHello> {
    (any_string(), any::<u16>(), any_string()).prop_map(|(magic, version, host)| {
        pmix_wire::NsHello {
            magic,
            version,
            host,
        }
    })
}

/// Every OpenPMIx dialect the codec speaks.
pub(crate) const DIALECTS: [Dialect; 4] = [
    Dialect::V41,
    Dialect {
        codec: Codec::V41,
        buffer: BufferType::FullyDesc,
    },
    Dialect {
        codec: Codec::V3,
        buffer: BufferType::NonDesc,
    },
    Dialect {
        codec: Codec::V3,
        buffer: BufferType::FullyDesc,
    },
];

pub(crate) fn dialect() -> impl Strategy<Value = Dialect> {
    prop::sample::select(DIALECTS.to_vec())
}
