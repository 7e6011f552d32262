//! `libpmix.so.2` from Rust: the PMIx Standard's client C API on top of `pmix-client`, so a
//! program built against OpenPMIx's headers (Debian's `libpmix-dev`) runs on pmix-rs's
//! client when `LD_LIBRARY_PATH` names a directory holding this library as `libpmix.so.2`.
//! The build makes `libpmix_capi.so` with that soname; `docs/CAPI.md` lists what is exported,
//! what answers `PMIX_ERR_NOT_SUPPORTED`, and how to use it.
//!
//! - `ctypes`: the Standard's C types, `#[repr(C)]`, checked against the C headers by
//!   `tests/layout.rs`.
//! - `convert`: the only module that reads, writes, allocates or frees C memory, between
//!   those types and `pmix_types`, every pointer and count checked.
//! - `exports`: the `PMIx_*` functions, each guarded against panics (`guard`) and calling
//!   the one session of the process (`state`): a client, or a tool (`session`); a tool lives
//!   on a thread of its own that also waits for what servers send it (`tool_session`), started
//!   as its directives say (`tool_start`). Non-blocking completions, event handlers and
//!   forwarded output run on a progress thread (`progress`).
//! - `pack`: the byte format of `PMIx_Data_pack`/`PMIx_Data_unpack` (OpenPMIx's, through
//!   pmix-wire's OpenPMIx codec).

pub mod ctypes;

#[allow(unsafe_code)]
mod convert;
#[allow(unsafe_code)]
pub mod exports;
mod guard;
mod pack;
mod progress;
mod session;
mod state;
mod tool_session;
mod tool_start;
