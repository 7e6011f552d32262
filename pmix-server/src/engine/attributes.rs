//! `QUERY_ATTRIBUTE_SUPPORT`: which attributes this server honours, by function, laid out as
//! OpenPMIx 4.2 and 5.0 lay them out for their clients.
//!
//! Each qualifier asks for one level: `SERVER_ATTRIBUTES` (a comma-separated list of function
//! names, `all`, or, as libpmix 5 sends it, `true` for all) and `SERVER_FUNCTIONS`. Each is
//! answered by one `QUERY_ATTRIBUTE_SUPPORT` info holding a data array of info: for the
//! attributes, one per function, keyed by the function's name, its value a data array of
//! `REGATTR` (name `PMIX_...`, key, type, description); for the functions, one keyed
//! `SERVER_FUNCTIONS` with their names comma-separated. No qualifier at all asks for both. The
//! client and tool levels are the client library's to answer (libpmix answers them without
//! asking its server), and the host level the host's: those qualifiers are left to the host.

use pmix_types::{DataArray, DataType, RegAttr};
use pmix_types::{Info, Key, Value, attr};
use pmix_wire::Query;

/// What a connection is served before any request: the handshake and the job data it brings.
pub(super) const CONNECTION: &str = "connection";

/// The PMIx functions a client or tool of this server can use, whatever the host, by what
/// serves them: the [`CONNECTION`], or a native request (named as its variant of
/// `pmix_wire::Request`, which every front-end translates into). A test fails while a variant
/// has no row, so a request added to the wire gets its functions listed here.
pub(super) const FUNCTIONS_BY_REQUEST: &[(&str, &[&str])] = &[
    (
        CONNECTION,
        &[
            "PMIx_Init",
            "PMIx_tool_init",
            // Answered from the job data the connection brings.
            "PMIx_Resolve_peers",
            "PMIx_Resolve_nodes",
        ],
    ),
    ("Commit", &["PMIx_Put", "PMIx_Commit"]),
    ("Fence", &["PMIx_Fence", "PMIx_Fence_nb"]),
    ("Get", &["PMIx_Get", "PMIx_Get_nb"]),
    ("Publish", &["PMIx_Publish", "PMIx_Publish_nb"]),
    ("Lookup", &["PMIx_Lookup", "PMIx_Lookup_nb"]),
    ("Unpublish", &["PMIx_Unpublish", "PMIx_Unpublish_nb"]),
    ("Spawn", &["PMIx_Spawn", "PMIx_Spawn_nb"]),
    ("Connect", &["PMIx_Connect", "PMIx_Connect_nb"]),
    ("Disconnect", &["PMIx_Disconnect", "PMIx_Disconnect_nb"]),
    ("Abort", &["PMIx_Abort"]),
    ("RegisterEvents", &["PMIx_Register_event_handler"]),
    ("DeregisterEvents", &["PMIx_Deregister_event_handler"]),
    (
        "Notify",
        &[
            "PMIx_Notify_event",
            // Invitations are events among the clients, which the engine reads on their way
            // (`group_membership.rs`).
            "PMIx_Group_invite",
            "PMIx_Group_invite_nb",
            "PMIx_Group_join",
            "PMIx_Group_join_nb",
        ],
    ),
    ("Query", &["PMIx_Query_info", "PMIx_Query_info_nb"]),
    ("Log", &["PMIx_Log", "PMIx_Log_nb"]),
    ("JobControl", &["PMIx_Job_control", "PMIx_Job_control_nb"]),
    (
        "GroupConstruct",
        &["PMIx_Group_construct", "PMIx_Group_construct_nb"],
    ),
    (
        "GroupDestruct",
        &["PMIx_Group_destruct", "PMIx_Group_destruct_nb"],
    ),
    ("Finalize", &["PMIx_Finalize", "PMIx_tool_finalize"]),
    ("GroupLeave", &["PMIx_Group_leave", "PMIx_Group_leave_nb"]),
    // Tools only.
    ("IofPull", &["PMIx_IOF_pull"]),
    ("IofDeregister", &["PMIx_IOF_deregister"]),
    ("IofPush", &["PMIx_IOF_push"]),
];

/// `SERVER_FUNCTIONS`: every function of [`FUNCTIONS_BY_REQUEST`], comma-separated.
pub(super) fn server_functions() -> String {
    let all: Vec<&str> = FUNCTIONS_BY_REQUEST
        .iter()
        .flat_map(|(_, fns)| fns.iter().copied())
        .collect();
    all.join(",")
}

/// The directives this server itself honours, by function, each with what it does here.
pub(super) const SERVER_ATTRIBUTES: &[(&str, &[(&str, &str)])] = &[
    (
        "PMIx_Fence",
        &[
            (
                attr::COLLECT_DATA,
                "every participant's data goes to every other at once",
            ),
            (
                attr::TIMEOUT,
                "seconds before the fence fails with PMIX_ERR_TIMEOUT",
            ),
        ],
    ),
    (
        "PMIx_Get",
        &[
            (
                attr::IMMEDIATE,
                "answer from what is here, never wait for the key",
            ),
            (attr::TIMEOUT, "seconds to wait for a key not put yet"),
            (attr::OPTIONAL, "a missing key is not waited for"),
        ],
    ),
    (
        "PMIx_Publish",
        &[
            (attr::RANGE, "who may look the data up"),
            (attr::PERSISTENCE, "how long the data stays"),
        ],
    ),
    (
        "PMIx_Lookup",
        &[
            (attr::RANGE, "whose publications to search"),
            (
                attr::WAIT,
                "wait for the keys (0: all of them) to be published",
            ),
            (attr::TIMEOUT, "seconds to wait"),
        ],
    ),
    (
        "PMIx_Query_info",
        &[
            (attr::NSPACE, "the namespace a query is about"),
            (
                attr::QUERY_REFRESH_CACHE,
                "ask the server, not the client's cache",
            ),
            (
                attr::PSET_NAME,
                "the process set QUERY_PSET_MEMBERSHIP is about",
            ),
        ],
    ),
    (
        "PMIx_Job_control",
        &[
            (attr::REGISTER_CLEANUP, "files removed when the job ends"),
            (
                attr::REGISTER_CLEANUP_DIR,
                "directories removed when the job ends",
            ),
            (
                attr::CLEANUP_RECURSIVE,
                "remove the directories' subdirectories too",
            ),
            (attr::CLEANUP_IGNORE, "paths kept"),
            (
                attr::CLEANUP_LEAVE_TOPDIR,
                "keep the registered directories themselves",
            ),
            (attr::CLEANUP_EMPTY, "remove only empty directories"),
        ],
    ),
];

/// One function's attributes as `REGATTR`s.
fn regattrs(attrs: &[(&str, &str)]) -> DataArray {
    let items = attrs
        .iter()
        .filter_map(|(key, what)| {
            let a = attr::lookup(key)?;
            Some(Value::RegAttr(Box::new(RegAttr {
                name: format!("PMIX_{}", a.name),
                key: a.key.to_owned(),
                ty: a.ty,
                description: vec![(*what).to_owned()],
            })))
        })
        .collect();
    DataArray::new(DataType::REGATTR, items).unwrap_or_else(|_| DataArray::from_infos([]))
}

/// The functions a `SERVER_ATTRIBUTES` qualifier names: `None` for all of them.
fn functions_asked(v: &Value) -> Option<Vec<&str>> {
    let list: Vec<&str> = v.as_str()?.split(',').map(str::trim).collect();
    (!list.contains(&"all")).then_some(list)
}

/// The attributes of the functions `asked` (all of them for `None`), one info per function.
fn server_attributes(asked: Option<&[&str]>) -> Vec<Info> {
    SERVER_ATTRIBUTES
        .iter()
        .filter(|(f, _)| asked.is_none_or(|a| a.contains(f)))
        .filter_map(|(f, attrs)| Some(Info::new(Key::new(f).ok()?, regattrs(attrs))))
        .collect()
}

/// The answers to `QUERY_ATTRIBUTE_SUPPORT` with the qualifiers of `q`: one info per level
/// answered; empty if none was this server's to answer.
pub(super) fn attribute_support(q: &Query) -> Vec<Info> {
    let support = |infos: Vec<Info>| {
        (!infos.is_empty())
            .then(|| Info::attr(attr::QUERY_ATTRIBUTE_SUPPORT, DataArray::from_infos(infos)))
    };
    let functions = || Info::attr(attr::SERVER_FUNCTIONS, server_functions());
    if q.qualifiers.is_empty() {
        let mut all = server_attributes(None);
        all.push(functions());
        return support(all).into_iter().collect();
    }
    q.qualifiers
        .iter()
        .filter_map(|i| match i.key.as_str() {
            attr::SERVER_ATTRIBUTES => {
                support(server_attributes(functions_asked(&i.value).as_deref()))
            }
            attr::SERVER_FUNCTIONS => support(vec![functions()]),
            _ => None,
        })
        .collect()
}
