//! Node and process maps: `generate_regex` / `generate_ppn` and their parsers.
//!
//! A host compresses the list of node names and the ranks on each node into strings
//! (`PMIX_NODE_MAP`, `PMIX_PROC_MAP`) for `register_nspace`; this crate builds and reads them,
//! compatible with the reference implementation's forms. No I/O, no other pmix crate.
