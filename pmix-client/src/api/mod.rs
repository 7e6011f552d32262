//! The public API of a client, one file per call family, each an `impl Client` block (the
//! handle itself, init, put/commit/get/fence, abort, finalize and the request escape hatch in
//! `client.rs`):
//!
//! - `names.rs`: publish, lookup, unpublish;
//! - `dynamic.rs`: spawn, connect, disconnect, resolve_peers/nodes;
//! - `events.rs`: event handlers, notify;
//! - `control.rs`: query, log, job control;
//! - `groups.rs`: group construct and destruct; `group_membership.rs`: invite, join and leave
//!   over the invitation events; `group_info.rs`: a get qualified by a group's context id;
//! - `locality.rs`: relative locality; `stop_in_init.rs`: holding init for a debugger;
//!   `version.rs`: the library's name.
//!
//! A call builds a [`pmix_wire::Request`] and hands it to the connection (`conn/`), with a
//! completion; a blocking call is the non-blocking one plus a wait (`call.rs`). Adding a call
//! is a method in its family's file here, plus, for a new request, one arm where the core
//! translates or answers requests: `core/openpmix/` (the request as OpenPMIx sends it) and
//! `core/local/` (what a singleton answers). The native wire carries any request as it is.

pub(crate) mod client;
pub(crate) mod control;
pub(crate) mod dynamic;
pub(crate) mod events;
pub(crate) mod group_info;
pub(crate) mod group_membership;
pub(crate) mod groups;
pub(crate) mod locality;
pub(crate) mod names;
pub(crate) mod stop_in_init;
pub(crate) mod version;
