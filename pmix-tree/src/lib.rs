//! The daemon tree of a multi-node pmix-rs run.
//!
//! A run spanning several nodes is one root (the `pmixrun` the user typed, vertex 0) and one
//! daemon per node, vertices `1..size`, wired as a `radix`-ary heap over TCP (see
//! [`Topology`]). This crate carries everything between them and knows nothing of what the
//! messages mean beyond these four services:
//!
//! - **fences**: [`Tree::fence`] gathers one contribution per participating vertex up to the
//!   root and hands the concatenation back down to each of them (2·depth link delays), keyed
//!   by a [`FenceKey`] so that back-to-back fences of the same participants never mix;
//! - **requests**: [`Tree::request`] routes a payload to one vertex, whose host answers it with
//!   [`Tree::respond`]; the answer is routed back (direct modex, names, spawn);
//! - **messages**: [`Tree::send`] to one vertex or to every vertex (events, process states,
//!   output, launch orders), in per-link FIFO order, since every message takes the tree;
//! - **failures**: a link that closes, errs or stays silent past [`Config::dead_after`]
//!   (heartbeats every [`Config::heartbeat`]) loses the subtree behind it. Every pending fence
//!   and request involving a lost vertex fails with `ERR_LOST_CONNECTION` on every vertex (the
//!   loss is reported to the root, which tells everyone), and the host is told
//!   ([`Delivery::Lost`]). A daemon whose parent is lost is told [`Delivery::ParentLost`]: the
//!   lifeline, on which it kills its processes and exits. No tree repair.
//!
//! Structure: [`core`] is the sans-IO state machine (messages and time in; sends,
//! completions and deliveries out), tested in virtual time by [`sim`] over a simulated
//! network; [`msg`] the wire messages and their framing (pmix-wire's length-prefixed frames
//! with a size limit, no panic on any input, fuzzed); [`net`] and [`tree_loop`] the I/O
//! shell (the TCP links, the authenticated handshake, heartbeats, output queues), a mio loop
//! run on a thread of its own ([`Tree::start`]) or in the host's own mio loop
//! ([`Tree::embedded`], what a pmixrun daemon does: its PMIx server's loop drives the tree).
//!
//! Authentication: every link proves knowledge of the run's secret ([`Config::secret`]) in
//! both directions by HMAC-SHA256 over fresh nonces; the secret itself never crosses a link.

pub mod auth;
pub mod core;
mod mailbox;
pub mod msg;
pub mod net;
pub mod sim;
mod topology;
pub mod tree_loop;

pub use net::{Config, Delivery, Dest, Error, FenceKey, SECRET_LEN, Tree};
pub use topology::{Hop, Topology, Vertex};
pub use tree_loop::TreeLoop;
