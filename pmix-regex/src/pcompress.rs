//! OpenPMIx's compressed block (its `pcompress` zlib component): the uncompressed length as a
//! little-endian `u32`, then a zlib stream (level 9). The payload of a `blob:` map, and what
//! a `PMIX_COMPRESSED_STRING` or `PMIX_COMPRESSED_BYTE_OBJECT` value holds (a string's length
//! leaves out its NUL).

use std::io::Write;

use flate2::write::ZlibEncoder;
use flate2::{Compression, Decompress, FlushDecompress, Status};

/// Deflate cannot expand data by more than about 1032:1, so a stream of `n` bytes justifies at
/// most this many times `n` bytes of output buffer up front.
const MAX_DEFLATE_RATIO: usize = 1032;

/// Why a compressed block could not be decompressed.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecompressError {
    /// The block is shorter than its length field.
    #[error("a compressed block of {0} bytes, shorter than its length field")]
    Short(usize),
    /// The length the block declares is more than the caller allows.
    #[error("a compressed block declaring {declared} bytes, more than the limit of {limit}")]
    TooLarge {
        /// The declared length.
        declared: usize,
        /// The limit in force.
        limit: usize,
    },
    /// Bytes follow the end of the zlib stream.
    #[error("byte {0}: bytes after the end of the zlib stream")]
    Trailing(usize),
    /// The zlib stream is corrupt or truncated, or decompresses to a length other than the
    /// declared one.
    #[error("byte {pos}: {reason}")]
    Corrupt {
        /// Offset in the block of the zlib stream.
        pos: usize,
        /// What went wrong.
        reason: String,
    },
}

/// The compressed block of `bytes`; `None` when they are 4 GiB or more (the length field's
/// limit).
pub fn compress(bytes: &[u8]) -> Option<Vec<u8>> {
    let len = u32::try_from(bytes.len()).ok()?;
    let mut out = Vec::with_capacity(bytes.len() / 4 + 64);
    out.extend_from_slice(&len.to_le_bytes());
    // Level 9, as the reference uses; writing to a Vec cannot fail.
    let mut enc = ZlibEncoder::new(out, Compression::best());
    enc.write_all(bytes).ok()?;
    enc.finish().ok()
}

/// The bytes of a compressed block, refusing to produce more than `max_bytes`: the declared
/// length is checked against it first, and the output grows only as the stream justifies, so
/// a small block declaring a large length allocates little.
pub fn decompress(block: &[u8], max_bytes: usize) -> Result<Vec<u8>, DecompressError> {
    let Some((len, stream)) = block.split_first_chunk::<4>() else {
        return Err(DecompressError::Short(block.len()));
    };
    let len = u32::from_le_bytes(*len) as usize;
    if len > max_bytes {
        return Err(DecompressError::TooLarge {
            declared: len,
            limit: max_bytes,
        });
    }
    let corrupt = |reason: String| DecompressError::Corrupt { pos: 4, reason };
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
        return Err(DecompressError::Trailing(4 + consumed));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_round_trip_and_bad_ones_are_refused() {
        let text = "node".repeat(2000).into_bytes();
        let block = compress(&text).unwrap();
        assert_eq!(&block[..4], &8000u32.to_le_bytes());
        assert_eq!(decompress(&block, 8000).unwrap(), text);
        assert_eq!(
            decompress(&block, 7999),
            Err(DecompressError::TooLarge {
                declared: 8000,
                limit: 7999
            })
        );
        assert_eq!(decompress(&block[..3], 10), Err(DecompressError::Short(3)));
        assert!(decompress(&block[..block.len() - 1], 8000).is_err());
        let mut long = block.clone();
        long.push(0);
        assert!(decompress(&long, 8000).is_err());
        let mut lying = block;
        lying[..4].copy_from_slice(&7000u32.to_le_bytes());
        assert!(decompress(&lying, 8000).is_err());
    }
}
