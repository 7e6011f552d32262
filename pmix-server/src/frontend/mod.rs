//! The wire front-ends: each translates one wire personality into the engine's requests and
//! the engine's answers back into its wire.

pub(crate) mod openpmix;
pub(crate) mod pmi1;
