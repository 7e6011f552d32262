//! The zlib `blob:` form.
//!
//! Layout: `blob:` NUL `component=zlib:` NUL `size=<N>:` NUL, then N bytes: the uncompressed
//! length as a little-endian `u32` followed by a zlib stream.

use crate::error::{GenerateError, ParseError};
use crate::num;
use crate::pcompress::DecompressError;

const COMPONENT: &[u8] = b"component=";
const ZLIB: &[u8] = b"zlib";
const SIZE: &[u8] = b":\0size=";

/// Builds a `blob:` map of `text`.
pub(crate) fn compress(text: &[u8]) -> Result<Vec<u8>, GenerateError> {
    let block =
        crate::pcompress::compress(text).ok_or(GenerateError::TooLarge { len: text.len() })?;
    let mut out = Vec::with_capacity(block.len() + 40);
    out.extend_from_slice(crate::BLOB_PREFIX);
    out.extend_from_slice(COMPONENT);
    out.extend_from_slice(ZLIB);
    out.extend_from_slice(SIZE);
    num::push_dec(&mut out, block.len() as u64);
    out.extend_from_slice(b":\0");
    out.extend_from_slice(&block);
    Ok(out)
}

/// Decompresses a `blob:` map (which must start with [`crate::BLOB_PREFIX`]) into its text,
/// refusing to produce more than `max_bytes`.
pub(crate) fn decompress(map: &[u8], max_bytes: usize) -> Result<String, ParseError> {
    let mut i = crate::BLOB_PREFIX.len();
    i = literal(map, i, COMPONENT, "\"component=\"")?;
    let name_end = map
        .get(i..)
        .and_then(|rest| rest.iter().position(|&c| c == b':' || c == 0))
        .map_or(map.len(), |p| i + p);
    let name = map.get(i..name_end).unwrap_or_default();
    if name != ZLIB {
        return Err(ParseError::UnsupportedCompression {
            pos: i,
            component: String::from_utf8_lossy(name).into_owned(),
        });
    }
    i = literal(map, name_end, SIZE, "\":\\0size=\"")?;
    let (size, j) = crate::num::number(map, i, 0, u64::from(u32::MAX))?;
    i = literal(map, j, b":\0", "\":\\0\" after the size")?;
    let payload = map.get(i..).unwrap_or_default();
    if payload.len() as u64 != size {
        return Err(ParseError::BadBlob {
            pos: j,
            reason: "declared size differs from the bytes present",
        });
    }
    let text = crate::pcompress::decompress(payload, max_bytes).map_err(|e| match e {
        DecompressError::Short(_) => ParseError::BadBlob {
            pos: i,
            reason: "payload shorter than its length field",
        },
        DecompressError::TooLarge { limit, .. } => ParseError::TooManyBytes { pos: i, limit },
        DecompressError::Trailing(pos) => ParseError::BadBlob {
            pos: i + pos,
            reason: "bytes after the end of the zlib stream",
        },
        DecompressError::Corrupt { pos, reason } => ParseError::Decompress {
            pos: i + pos,
            reason,
        },
    })?;
    String::from_utf8(text).map_err(|e| ParseError::InvalidUtf8 {
        pos: e.utf8_error().valid_up_to(),
    })
}

/// Checks that `want` appears at `i`; returns the index after it.
fn literal(map: &[u8], i: usize, want: &[u8], expected: &'static str) -> Result<usize, ParseError> {
    for (k, &w) in want.iter().enumerate() {
        match map.get(i + k) {
            Some(&c) if c == w => {}
            Some(&found) => {
                return Err(ParseError::Unexpected {
                    pos: i + k,
                    found,
                    expected,
                });
            }
            None => {
                return Err(ParseError::UnexpectedEnd {
                    pos: i + k,
                    expected,
                });
            }
        }
    }
    Ok(i + want.len())
}
