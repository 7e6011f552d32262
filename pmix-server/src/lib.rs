//! The PMIx server library: what a host (launcher, resource-manager daemon) embeds to serve the
//! processes it starts on one node.
//!
//! Application authors want `pmix-client` instead.
