//! Bounded decoding of one MessagePack value: the nesting limit every decoder of this crate
//! keeps, and the structural check run before serde sees the bytes.

use serde::de::DeserializeOwned;

use crate::{Error, scan};

/// Deepest nesting of MessagePack arrays and maps that [`decode_body`] accepts.
///
/// Decoding recurses once per level, so a peer could otherwise overflow the stack with a few
/// hundred kilobytes of nested arrays. Every message is an array or map holding others: a
/// [`JobData`](crate::JobData) entry's value sits 12 levels down in a Connect reply (a job
/// image's values are decoded on their own, with 8 levels fewer allowed), and each nested `DataArray` or `Info` value adds 3 or 4, which leaves room for about
/// ten levels of info arrays inside info arrays, more than the standard's attributes use. At
/// this depth a decode needs well under 1 MiB of stack even in a debug build (tested).
pub const MAX_DEPTH: usize = 64;

/// Decodes a frame body as a message of type `T`; trailing bytes are an error.
///
/// Before serde sees the body it is walked once without recursion or allocation (see
/// [`MAX_DEPTH`]), so neither deep nesting nor a header announcing gigabytes inside a small
/// frame gets further: every length the decoder acts on is bounded by the bytes that remain.
pub fn decode_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, Error> {
    decode_with_depth(body, MAX_DEPTH)
}

/// [`decode_body`] for a value that sits `MAX_DEPTH - max_depth` levels down in a message.
pub(crate) fn decode_with_depth<T: DeserializeOwned>(
    body: &[u8],
    max_depth: usize,
) -> Result<T, Error> {
    let len = scan::value_len(body, max_depth).map_err(|e| Error::Malformed(e.to_string()))?;
    if len != body.len() {
        return Err(Error::Malformed(format!(
            "{} trailing bytes after the message",
            body.len() - len
        )));
    }
    let mut de = rmp_serde::Deserializer::from_read_ref(body);
    // The scan already bounded the nesting; this is a second guard in case the two ever count
    // differently (rmp-serde does not count enum maps, the scan counts every container).
    de.set_max_depth(max_depth + 2);
    T::deserialize(&mut de).map_err(|e| Error::Malformed(e.to_string()))
}
