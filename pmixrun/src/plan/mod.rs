//! The plan of a run, before any process exists: where its nodes and processes go
//! ([`placement`]), where each application context's ranks are ([`layout`]), what the server
//! is told about each job ([`job`]), binding and this node's topology, what a program expects
//! of its launcher ([`detect`], [`interpreter`] for a Python program, [`launcher_env`]) and what a spawn's debugger directives ask
//! ([`debug`]) and where its placement directives put it ([`spawn_placement`]).

pub(crate) mod binding;
pub(crate) mod debug;
pub(crate) mod detect;
pub(crate) mod interpreter;
pub(crate) mod job;
pub(crate) mod launcher_env;
pub(crate) mod layout;
pub(crate) mod placement;
pub(crate) mod spawn_placement;
pub(crate) mod topology;
