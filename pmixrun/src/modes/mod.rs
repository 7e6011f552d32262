//! pmixrun's modes besides the multi-node ones (`multinode/`): each a `run` that `main.rs`
//! picks from the command line.

pub(crate) mod adopt;
pub(crate) mod nameserver;
pub(crate) mod single;
