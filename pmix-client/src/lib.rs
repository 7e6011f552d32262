//! The PMIx client library: what an application process links to talk to the server that
//! launched it.
//!
//! Host authors want `pmix-server` instead.
