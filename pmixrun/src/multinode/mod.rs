//! A run over many nodes: the root ([`root`]) starts a daemon ([`daemon`]) on every node
//! through the launch agent ([`bootstrap`], [`join`], [`guardian`]); they speak [`msg`] over a
//! pmix-tree, and share where every job's ranks are ([`placed`]).

pub(crate) mod bootstrap;
pub(crate) mod daemon;
pub(crate) mod guardian;
pub(crate) mod join;
pub(crate) mod msg;
pub(crate) mod placed;
pub(crate) mod root;
