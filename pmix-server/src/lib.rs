//! The PMIx server library: what a host (launcher, resource-manager daemon) embeds to serve the
//! processes it starts on one node.
//!
//! A host starts a [`Server`] with its [`Host`] callbacks, registers each job
//! ([`Server::register_nspace`]) and each local process ([`Server::register_client`]), and
//! starts the processes with the environment [`Server::setup_fork`] returns. The processes link
//! `pmix-client` (application authors want that crate instead). Whatever needs more than this
//! node (a fence spanning nodes, another node's data, publishing beyond the node, spawning)
//! reaches the host through [`Host`], which answers through a [`Completion`] from any thread.
//!
//! Inside, one event-loop thread owns a sans-IO engine (store, registry, collectives, pending
//! requests) and every connection; see `docs/ARCHITECTURE.md`. A host whose callbacks go out
//! on sockets of its own (a daemon's links to other nodes) can have the server's loop poll
//! them too ([`Host::loop_hook`], [`LoopHook`]), and answer without a hop between threads.

mod cleanup;
mod conn_watch;
mod engine;
mod error;
mod frontend;
mod hook;
mod host;
mod limits;
mod lineage;
mod mailbox;
mod memfd;
mod nameserver;
mod outbuf;
pub mod rendezvous;
mod server;
mod shell;
mod shell_io;
mod tcp_peer;
mod tool_files;

pub use engine::{GroupOp, NameService};
pub use error::Error;
pub use hook::{LoopContext, LoopHook, LoopWaker};
pub use host::{Completion, Host, NoHost, Outcome};
pub use limits::Limits;
/// The `mio` the server's event loop runs on, for a host's [`LoopHook`].
pub use mio;
pub use nameserver::{NameServer, NameServerClient};
pub use pmix_regex::{generate_ppn, generate_regex};
pub use pmix_types as types;
/// Types that appear in [`Host`] callbacks.
pub use pmix_wire::{App, Published, Query};
pub use server::{
    ClientOptions, ENV_PROTOCOL, ENV_SECRET, ENV_SERVER_URI, PmiFork, PmiTransport, Server,
    ServerOptions,
};
