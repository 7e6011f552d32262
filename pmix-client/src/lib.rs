//! The PMIx client library: what an application process links to talk to the PMIx server
//! that launched it: a pmix-rs server, or a real OpenPMIx 4.2 one (Open MPI's `mpirun`, PRRTE,
//! any host on libpmix's server library), whose own wire protocol it then speaks.
//!
//! [`Client::init`] connects to the server named in the environment the launcher prepared,
//! receives the job's data, and from then on a process can [`put`](Client::put) values,
//! [`commit`](Client::commit) them, synchronise with [`fence`](Client::fence) and read other
//! processes' values with [`get`](Client::get). Job-level data and data collected by fences
//! are kept in a local store and served on the caller's thread, so most gets never leave the
//! process. A process can also [`publish`](Client::publish) data under a key for any process
//! in a range to [`lookup`](Client::lookup) by the key alone, without knowing the publisher
//! (MPI's name publishing), and [`unpublish`](Client::unpublish) it again. The contract with
//! the server is `docs/PROTOCOL.md`; what changes under an OpenPMIx server (every datum travels
//! over the socket, fences bring no data, the server must hand out the `hash` storage module)
//! is in `docs/OPENPMIX.md`, "The client side".
//!
//! Jobs are not fixed: a process can [`spawn`](Client::spawn) a new job from application
//! contexts ([`app`], [`App`]), [`connect`](Client::connect) with the processes of other jobs
//! (after which their job data and committed data are read locally, like its own) and
//! [`disconnect`](Client::disconnect) again, and find where a job runs with
//! [`resolve_peers`](Client::resolve_peers) and [`resolve_nodes`](Client::resolve_nodes).
//! [`register_event_handler`](Client::register_event_handler) runs a closure for every event
//! of the codes it names as the event arrives (another process's
//! [`notify_event`](Client::notify_event), a process of the job or of a connected job ending
//! without finalize, the connection to the server being lost, the launcher's lifecycle events),
//! in the standard's order as the registration's `EVENT_HDLR_*` attributes place it.
//! [`query`](Client::query), [`log`](Client::log) and [`job_control`](Client::job_control)
//! ask the server and its host: what the server knows (namespaces, process tables), a line
//! for the launcher's output, a signal for other processes or cleanups at the job's end.
//!
//! A process started with no server in its environment is a *singleton*, a job of one process
//! answered in the process (data, fences and names with itself; `ERR_UNREACH` for what needs
//! others), which starts a private `pmixrun` when it spawns; see [`Client::init`].
//!
//! [`version`] names the library (`PMIx_Get_version`).
//!
//! A process that no server launched (a debugger, a job monitor) uses [`tool::Tool`] instead:
//! it attaches to running servers, found by pid, namespace, URI or as the system server, and
//! queries them (`docs/TOOLS.md`).
//!
//! Host authors (launchers, resource managers) want `pmix-server` instead.
//!
//! # How it works
//!
//! - **Threads.** Requests are written on the caller's thread under a mutex. Reading replies
//!   is a role: a blocking call whose reply is outstanding takes it when it is free and reads
//!   on its own thread until its reply has come, so a blocking round trip costs no hand-off
//!   between threads in the client; otherwise each client's reader thread reads, woken when a
//!   non-blocking call is made. Completions run on whichever thread is reading (so a
//!   blocking call made inside one fails with [`Error::WouldDeadlock`] rather than waiting for
//!   itself); a panicking callback is caught. While an event handler is registered the reader
//!   thread reads all the time, so that events are handled when they arrive; handlers run
//!   there, in registration order.
//! - **Failure.** When the connection dies every outstanding request completes with
//!   [`Error::LostConnection`], handlers registered for `ERR_LOST_CONNECTION` are told, and
//!   later requests fail at once; nothing the server sends can panic the client. Timeouts
//!   are the server's to enforce (`TIMEOUT` is passed through); a blocking call given
//!   `TIMEOUT` also gives up on its own one second after it, a call without one waits as
//!   long as the connection lives.
//! - **Store.** One hash map keyed by (namespace, level, realm id, key) holds job data of
//!   every namespace heard of (session, job, app, node and proc levels), this process's puts
//!   and the data fences, gets and connects brought in. A lookup is one probe per level with
//!   a borrowed key (no allocation); namespaces are interned. A job-level or cached get costs
//!   well under a microsecond on the caller's thread (`benches/get.rs`).
//!
//! ```no_run
//! use pmix_client::{Client, Proc, Rank, Scope};
//!
//! # fn main() -> Result<(), pmix_client::Error> {
//! let client = Client::init()?;
//! client.put(Scope::GLOBAL, "my.addr", "10.0.0.1:4000")?;
//! client.commit()?;
//! client.fence(&[], &[])?;
//! let me = client.proc().clone();
//! let size = client.get(&Proc::new(me.nspace.clone(), Rank::WILDCARD), "pmix.job.size", &[])?;
//! println!("{me} of {size:?}");
//! client.finalize()
//! # }
//! ```

mod api;
mod call;
mod conn;
mod core;
mod decompress;
mod env;
mod error;
mod event_order;
mod event_registry;
mod fence_data;
mod handshake;
mod job_file;
mod openpmix;
mod singleton;
mod store;
pub mod tool;
mod trust;

pub use api::client::Client;
pub use api::dynamic::{AppExt, app};
pub use api::events::HandlerId;
pub use api::group_membership::GroupOpt;
pub use api::groups::Group;
pub use api::names::Pdata;
pub use api::version::version;
pub use decompress::MAX_DECOMPRESSED_STRING;
pub use error::Error;

/// The PMIx data model, re-exported so applications need only this crate.
pub use pmix_types as types;
pub use pmix_types::{
    App, DataArray, DataRange, DataType, Event, Info, InfoFlags, IofChannel, Key, Nspace, Proc,
    Published, Query, Rank, Scope, Status, Value, attr,
};
pub use pmix_wire::{IofChunk, Reply, ReplyBody, Request};
