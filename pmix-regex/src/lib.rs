//! Node and process maps: `generate_regex` / `generate_ppn` and their parsers.
//!
//! A host compresses the list of node names and the ranks on each node into strings
//! (`PMIX_NODE_MAP`, `PMIX_PROC_MAP`) for `register_nspace`; this crate builds and reads them,
//! compatible with the reference implementation's forms. No I/O, no other pmix crate.
//!
//! # Forms
//!
//! A map is a byte string (a `PMIX_REGEX` value) in one of three forms, told apart by their
//! first bytes:
//!
//! | [`Form`] | Example | Who emits it |
//! |---|---|---|
//! | [`Form::Raw`] | `raw:node01,node02` / `raw:0,1;2,3` | OpenPMIx 4.2.8+ and 5.0.2+ by default |
//! | [`Form::Native`] | `pmix[node[2:1-2]]` / `pmix[0-1;2-3]` | OpenPMIx 4.2.0–4.2.7 and 5.0.0–5.0.1 by default |
//! | [`Form::Compressed`] | `blob:\0component=zlib:\0size=…` | OpenPMIx 5.0.10+ for text of 4096 bytes or more |
//!
//! A node map lists node names separated by `,`. A process map lists, for each node of the
//! node map and in the same order, that node's ranks (`a` or `a-b`, separated by `,`), nodes
//! separated by `;`.
//!
//! The parsers ([`parse_regex`], [`parse_ppn`]) read all three forms, and, like the reference,
//! a bare list without prefix. They preserve order and repetitions.
//!
//! # Why raw is the default
//!
//! [`generate_regex`] and [`generate_ppn`] emit [`Form::Raw`], with ranks listed one by one:
//!
//! * every OpenPMIx since 4.0 reads it, and it is what current OpenPMIx emits itself below
//!   4 KiB;
//! * it cannot lose data. The reference's native generator drops ranks when fed ranges
//!   (`0,1,2,3,4,5,6,7,8-15` becomes `pmix[0-8]`), was demoted below raw for misbehaving,
//!   and is deleted on OpenPMIx master, so a future OpenPMIx peer may not read `pmix[...]`;
//! * a blob is unreadable by OpenPMIx older than 5.0.10 (4.2.x and 5.0.0–5.0.9 mis-size it and
//!   read the single node name `blob:`).
//!
//! The cost is size: `raw:` is as long as the list. Use [`generate_regex_with`] /
//! [`generate_ppn_with`] with [`Form::Native`] for a compact map for peers that have the
//! native component (ours never loses ranks), or [`Form::Compressed`] when every peer is
//! OpenPMIx 5.0.10+ or pmix-rs. [`generate_regex_str`] and [`generate_ppn_str`] take the
//! reference's text input instead of lists and produce its output byte for byte.
//!
//! # Untrusted input
//!
//! Parsing never panics. A malformed map is a [`ParseError`] giving the byte position and the
//! reason. Ranges expand (`pmix[0-4000000000]` is four billion ranks), so expansion is checked
//! against [`ParseLimits`] before anything is allocated; a `blob:`'s declared length is checked
//! against the same limits and against what its compressed size can justify, and its
//! decompressed length must match the declaration exactly.
//!
//! # Slurm's hostlists
//!
//! The module [`hostlist`] reads and writes Slurm's own compact forms, which pmixrun meets
//! inside an allocation: hostlist expressions (`SLURM_JOB_NODELIST`, `node[01-04,7],login1`)
//! and `SLURM_TASKS_PER_NODE` (`2(x3),1`), under the same untrusted-input rules.
//!
//! # Example
//!
//! ```
//! use pmix_regex::{Form, generate_ppn, generate_regex_with, parse_ppn, parse_regex};
//!
//! let nodes: Vec<String> = (1..=4).map(|i| format!("nid{i:05}")).collect();
//! let ranks: Vec<Vec<u32>> = (0..4).map(|n| (n * 2..n * 2 + 2).collect()).collect();
//!
//! let node_map = generate_regex_with(&nodes, Form::Native)?;
//! assert_eq!(node_map, b"pmix[nid[5:1-4]]");
//! let proc_map = generate_ppn(&ranks)?;
//! assert_eq!(proc_map, b"raw:0,1;2,3;4,5;6,7");
//!
//! assert_eq!(parse_regex(&node_map)?, nodes);
//! assert_eq!(parse_ppn(&proc_map)?, ranks);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod blob;
mod error;
mod generate;
pub mod hostlist;
mod num;
mod parse;
pub mod pcompress;

pub use error::{GenerateError, ParseError};
pub use generate::{
    generate_ppn, generate_ppn_str, generate_ppn_with, generate_regex, generate_regex_str,
    generate_regex_with,
};
pub use parse::{
    ParseLimits, parse_ppn, parse_ppn_ranges, parse_ppn_with, parse_regex, parse_regex_with,
};

/// Prefix of the raw form.
pub const RAW_PREFIX: &str = "raw:";
/// Prefix of the native form (which also ends with `]`).
pub const NATIVE_PREFIX: &str = "pmix[";
/// Prefix of the compressed form.
pub const BLOB_PREFIX: &[u8] = b"blob:\0";
/// Input length from which OpenPMIx 5.0.10+ compresses (shorter input stays raw). Hosts that
/// want its behaviour choose [`Form::Compressed`] at or above this length.
pub const REFERENCE_COMPRESS_THRESHOLD: usize = 4096;
/// Largest zero-padding width the parser accepts in a `pmix[...]` term (a `u64` has at most
/// 20 digits; the generator never writes more than 19).
pub const MAX_WIDTH: usize = 64;

/// The form of a map.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Form {
    /// `raw:` followed by the list as text. The default: see the [crate docs](crate).
    #[default]
    Raw,
    /// The reference's compact `pmix[...]` form.
    Native,
    /// `blob:`: the list compressed with zlib. Readable by OpenPMIx 5.0.10+ only.
    Compressed,
}

impl Form {
    /// The form of `map`, judged by its prefix; `None` for a bare list.
    ///
    /// ```
    /// use pmix_regex::Form;
    ///
    /// assert_eq!(Form::of(b"raw:a,b"), Some(Form::Raw));
    /// assert_eq!(Form::of(b"pmix[a]"), Some(Form::Native));
    /// assert_eq!(Form::of(b"blob:\0component=zlib:\0size=4:\0"), Some(Form::Compressed));
    /// assert_eq!(Form::of(b"a,b"), None);
    /// ```
    pub fn of(map: &[u8]) -> Option<Form> {
        if map.starts_with(BLOB_PREFIX) {
            Some(Form::Compressed)
        } else if map.starts_with(RAW_PREFIX.as_bytes()) {
            Some(Form::Raw)
        } else if map.starts_with(NATIVE_PREFIX.as_bytes()) {
            Some(Form::Native)
        } else {
            None
        }
    }
}
