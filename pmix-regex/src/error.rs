//! Error types of the generators and parsers.

/// Why a node map or process map could not be read.
///
/// Every variant carries `pos`, a byte offset. It counts from the start of the map as given,
/// except for errors found inside the decompressed text of a `blob:` map, where it counts from
/// the start of that decompressed text (the compressed bytes have no meaningful text offsets).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// The text is not valid UTF-8; `pos` is the first byte of the invalid sequence.
    #[error("byte {pos}: invalid UTF-8")]
    InvalidUtf8 {
        /// Offset of the first invalid byte.
        pos: usize,
    },
    /// A byte the grammar does not allow here (for example a letter inside a rank list, a NUL
    /// inside text, or a `]` that closes nothing).
    #[error("byte {pos}: unexpected {found:?}, expected {expected}")]
    Unexpected {
        /// Offset of the offending byte.
        pos: usize,
        /// The offending byte.
        found: u8,
        /// What the grammar allows at this position.
        expected: &'static str,
    },
    /// The map ended before the construct that was being read was complete.
    #[error("byte {pos}: unexpected end of input, expected {expected}")]
    UnexpectedEnd {
        /// Offset of the end of the input.
        pos: usize,
        /// What the grammar needed next.
        expected: &'static str,
    },
    /// An empty node name or an empty per-node rank list (for example `a,,b` or `0;;1`).
    ///
    /// The reference drops such fields silently, which shifts every later node's ranks to the
    /// wrong node, so they are refused instead.
    #[error("byte {pos}: empty {what}")]
    Empty {
        /// Offset where the missing item should start.
        pos: usize,
        /// `"node name"` or `"rank list"`.
        what: &'static str,
    },
    /// A number does not fit: ranks are `u32`, the numeric part of a node name is `u64`,
    /// sizes are `usize`.
    #[error("byte {pos}: number too large (maximum {max})")]
    NumberTooLarge {
        /// Offset of the number's first digit.
        pos: usize,
        /// Largest value accepted here.
        max: u64,
    },
    /// A range `a-b` with `a > b`.
    #[error("byte {pos}: descending range {start}-{end}")]
    DescendingRange {
        /// Offset of the range's first digit.
        pos: usize,
        /// First value of the range.
        start: u64,
        /// Last value of the range.
        end: u64,
    },
    /// The zero-padding width of a `pmix[...]` term exceeds [`MAX_WIDTH`](crate::MAX_WIDTH).
    #[error("byte {pos}: padding width {width} exceeds {}", crate::MAX_WIDTH)]
    WidthTooLarge {
        /// Offset of the width's first digit.
        pos: usize,
        /// The width found.
        width: u64,
    },
    /// Expanding the map would produce more node names or ranks than
    /// [`ParseLimits::max_items`](crate::ParseLimits::max_items).
    #[error("byte {pos}: more than {limit} items")]
    TooManyItems {
        /// Offset of the construct whose expansion crossed the limit.
        pos: usize,
        /// The limit in force.
        limit: usize,
    },
    /// Expanding or decompressing the map would produce more bytes than
    /// [`ParseLimits::max_bytes`](crate::ParseLimits::max_bytes).
    #[error("byte {pos}: more than {limit} bytes")]
    TooManyBytes {
        /// Offset of the construct whose expansion crossed the limit.
        pos: usize,
        /// The limit in force.
        limit: usize,
    },
    /// The header of a `blob:` map is malformed or its declared size does not match the bytes
    /// present.
    #[error("byte {pos}: bad blob: {reason}")]
    BadBlob {
        /// Offset of the problem in the map.
        pos: usize,
        /// What is wrong.
        reason: &'static str,
    },
    /// A `blob:` map names a compression component other than `zlib`.
    #[error("byte {pos}: unsupported compression component {component:?}")]
    UnsupportedCompression {
        /// Offset of the component name.
        pos: usize,
        /// The component named (lossily decoded).
        component: String,
    },
    /// The zlib stream of a `blob:` map is corrupt, or decompresses to a length other than the
    /// one its header declares.
    #[error("byte {pos}: decompression failed: {reason}")]
    Decompress {
        /// Offset of the zlib stream in the map.
        pos: usize,
        /// What went wrong.
        reason: String,
    },
}

/// Why a node map or process map could not be generated.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GenerateError {
    /// Node `index` has an empty name; no form can carry it (the reference drops empty fields).
    #[error("node {index}: empty name")]
    EmptyName {
        /// Position of the node in the list.
        index: usize,
    },
    /// Node `index` has a name containing a byte no form can carry: `,` (the list separator)
    /// or NUL (the maps travel as C strings).
    #[error("node {index}: byte {pos} of the name is {byte:?}, which a map cannot carry")]
    InvalidName {
        /// Position of the node in the list.
        index: usize,
        /// Offset of the byte in the name.
        pos: usize,
        /// The byte.
        byte: u8,
    },
    /// Node `index` has no ranks; the reference would drop the empty field and shift every
    /// later node's ranks.
    #[error("node {index}: empty rank list")]
    EmptyNode {
        /// Position of the node in the list.
        index: usize,
    },
    /// The text given to [`generate_regex_str`](crate::generate_regex_str) or
    /// [`generate_ppn_str`](crate::generate_ppn_str) is malformed; the error's `pos` is an
    /// offset into that text.
    #[error("invalid input: {0}")]
    InvalidInput(#[from] ParseError),
    /// The text is too long for a `blob:` map, whose length field is 32 bits.
    #[error("{len} bytes is too long to compress (maximum {})", u32::MAX)]
    TooLarge {
        /// Length of the text.
        len: usize,
    },
    /// zlib reported a failure while compressing (not expected with an in-memory buffer).
    #[error("compression failed: {reason}")]
    Compress {
        /// zlib's message.
        reason: String,
    },
}
