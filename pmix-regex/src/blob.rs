//! The zlib `blob:` form.
//!
//! Layout: `blob:` NUL `component=zlib:` NUL `size=<N>:` NUL, then N bytes: the uncompressed
//! length as a little-endian `u32` followed by a zlib stream.

use std::io::Write;

use flate2::write::ZlibEncoder;
use flate2::{Compression, Decompress, FlushDecompress, Status};

use crate::error::{GenerateError, ParseError};
use crate::num;

const COMPONENT: &[u8] = b"component=";
const ZLIB: &[u8] = b"zlib";
const SIZE: &[u8] = b":\0size=";

/// Deflate cannot expand data by more than about 1032:1, so a stream of `n` bytes justifies at
/// most this many times `n` bytes of output buffer up front.
const MAX_DEFLATE_RATIO: usize = 1032;

/// Builds a `blob:` map of `text`.
pub(crate) fn compress(text: &[u8]) -> Result<Vec<u8>, GenerateError> {
    let len = u32::try_from(text.len()).map_err(|_| GenerateError::TooLarge { len: text.len() })?;
    let failed = |e: std::io::Error| GenerateError::Compress {
        reason: e.to_string(),
    };
    // Level 9, as the reference uses.
    let mut enc = ZlibEncoder::new(Vec::with_capacity(text.len() / 4 + 64), Compression::best());
    enc.write_all(text).map_err(failed)?;
    let stream = enc.finish().map_err(failed)?;
    let size = 4 + stream.len();
    let mut out = Vec::with_capacity(size + 40);
    out.extend_from_slice(crate::BLOB_PREFIX);
    out.extend_from_slice(COMPONENT);
    out.extend_from_slice(ZLIB);
    out.extend_from_slice(SIZE);
    num::push_dec(&mut out, size as u64);
    out.extend_from_slice(b":\0");
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&stream);
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
    let (len, stream) = match payload.split_first_chunk::<4>() {
        Some((len, stream)) => (u32::from_le_bytes(*len) as usize, stream),
        None => {
            return Err(ParseError::BadBlob {
                pos: i,
                reason: "payload shorter than its length field",
            });
        }
    };
    if len > max_bytes {
        return Err(ParseError::TooManyBytes {
            pos: i,
            limit: max_bytes,
        });
    }
    let stream_pos = i + 4;
    let corrupt = |reason: String| ParseError::Decompress {
        pos: stream_pos,
        reason,
    };
    let mut text: Vec<u8> = Vec::new();
    let mut dec = Decompress::new(true);
    loop {
        if text.len() == text.capacity() {
            if text.len() > len {
                return Err(corrupt(format!(
                    "decompresses to more than the {len} bytes the header declares"
                )));
            }
            // Room for one byte more than declared, so that an overlong stream is noticed; the
            // first allocation is also bounded by what the stream's size can justify.
            let want = (len + 1 - text.len())
                .min(stream.len().saturating_mul(MAX_DEFLATE_RATIO).max(64))
                .min(1 << 22);
            text.reserve_exact(want);
        }
        let (in_before, out_before) = (dec.total_in(), dec.total_out());
        let input = stream.get(in_before as usize..).unwrap_or_default();
        let status = dec
            .decompress_vec(input, &mut text, FlushDecompress::None)
            .map_err(|e| corrupt(e.to_string()))?;
        if status == Status::StreamEnd {
            break;
        }
        if dec.total_in() == in_before && dec.total_out() == out_before {
            return Err(corrupt("truncated zlib stream".to_owned()));
        }
    }
    if text.len() != len {
        return Err(corrupt(format!(
            "decompresses to {} bytes, the header declares {len}",
            text.len()
        )));
    }
    let consumed = dec.total_in() as usize;
    if consumed != stream.len() {
        return Err(ParseError::BadBlob {
            pos: stream_pos + consumed,
            reason: "bytes after the end of the zlib stream",
        });
    }
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
