//! The messages between two vertices of the tree, and their framing.
//!
//! Every message is one pmix-wire frame (a 4-byte big-endian length, then a MessagePack body)
//! holding one [`Msg`]. Decoding goes through [`pmix_wire::decode_body`], which walks the body
//! once without recursion before serde sees it: no input makes it panic, nest deeper than
//! [`pmix_wire::MAX_DEPTH`], or allocate more than the frame's size. What a decoded message
//! *means* (a vertex out of range, a loss reported for a vertex outside the sender's subtree)
//! is checked by [`crate::core`], which drops what does not fit.

use pmix_types::Status;
use serde::{Deserialize, Serialize};
use serde_bytes::ByteBuf;

use crate::Vertex;

/// Bytes of a handshake nonce.
pub const NONCE_LEN: usize = 32;

/// Largest frame accepted on a link before its handshake is over: a handshake message is a
/// few dozen bytes, so an unauthenticated peer cannot make a vertex buffer more than this.
pub const HANDSHAKE_MAX_FRAME: usize = 4 << 10;

/// Identifies one fence among all of a run: the participants (a canonical encoding the host
/// chooses, e.g. the sorted process list; hashed or not) and a sequence number the host
/// counts per participant set, so the same on every vertex.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FenceKey {
    /// The participants, in an encoding of the host's choosing.
    #[serde(with = "serde_bytes")]
    pub set: Vec<u8>,
    /// The how-many-th fence of this participant set this is.
    pub seq: u64,
}

/// Where a message goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Dest {
    /// One vertex (possibly this one: then delivered locally, in order).
    Vertex(Vertex),
    /// Every vertex but the sender.
    All,
}

/// One vertex's contribution to a fence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    /// The contributing vertex.
    pub vertex: Vertex,
    /// What it contributed.
    #[serde(with = "serde_bytes")]
    pub data: Vec<u8>,
}

/// A message on a link between a vertex and its parent or one of its children.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Msg {
    /// Child to parent, first: who the child is, and a fresh nonce for the parent's proof.
    Hello {
        /// The connecting vertex.
        vertex: Vertex,
        /// The child's nonce.
        nonce: ByteBuf,
    },
    /// Parent to child: the parent's nonce, and its proof over both nonces.
    Challenge {
        /// The parent's nonce.
        nonce: ByteBuf,
        /// HMAC-SHA256 of the secret over the parent's side of the exchange.
        proof: ByteBuf,
    },
    /// Child to parent: the child's proof over both nonces.
    Proof {
        /// HMAC-SHA256 of the secret over the child's side of the exchange.
        proof: ByteBuf,
    },
    /// Parent to child: the link is up.
    Welcome,
    /// Parent to child: the link is refused, and why.
    Refused {
        /// Why, for the child's log.
        reason: String,
    },
    /// Contributions to a fence, from a child's subtree, up.
    FenceUp {
        /// The fence.
        key: FenceKey,
        /// Every participating vertex, sorted (on the wire as runs of consecutive vertices).
        #[serde(with = "vertex_runs")]
        vertices: Vec<Vertex>,
        /// The contributions of the participants in the sender's subtree, in vertex order.
        parts: Vec<Part>,
    },
    /// The release of a fence, down: every participant's data in vertex order, or why not.
    FenceDown {
        /// The fence.
        key: FenceKey,
        /// The concatenated data, or the error.
        result: Result<ByteBuf, Status>,
    },
    /// A request, routed to `target`.
    Request {
        /// The vertex asking, where the answer goes.
        origin: Vertex,
        /// The vertex asked.
        target: Vertex,
        /// Chosen by `origin`, unique among its pending requests.
        id: u64,
        /// The question.
        payload: ByteBuf,
    },
    /// The answer to a request, routed back to its origin.
    Response {
        /// The vertex that asked.
        origin: Vertex,
        /// The request's id.
        id: u64,
        /// The answer.
        result: Result<ByteBuf, Status>,
    },
    /// A message from a host to another (or to every other).
    Message {
        /// The sending vertex.
        from: Vertex,
        /// Where it goes.
        dest: Dest,
        /// What it says.
        payload: ByteBuf,
    },
    /// The subtree rooted at `vertex` is lost: up to the root, which spreads it down.
    Lost {
        /// The root of the lost subtree.
        vertex: Vertex,
        /// What was seen.
        reason: String,
    },
    /// Nothing else was sent for a while: the link is alive.
    Heartbeat,
}

/// Appends `msg` as one frame to `out`.
pub fn encode(msg: &Msg, out: &mut Vec<u8>) -> Result<(), pmix_wire::Error> {
    pmix_wire::encode_frame(msg, out)
}

/// The participating vertices of a fence on the wire: runs of consecutive vertices, each as
/// (first, count), so that a job-wide fence of thousands of nodes costs a few bytes in every
/// message, not four per node. Any sequence round-trips exactly.
mod vertex_runs {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::Vertex;

    /// At most this many vertices once the runs are expanded: a few bytes from a peer never
    /// cost more than this much memory.
    pub(super) const MAX_VERTICES: u64 = 1 << 22;

    pub(super) fn serialize<S: Serializer>(vertices: &[Vertex], s: S) -> Result<S::Ok, S::Error> {
        let mut runs: Vec<(Vertex, u32)> = Vec::new();
        for &v in vertices {
            match runs.last_mut() {
                Some((first, n)) if u64::from(*first) + u64::from(*n) == u64::from(v) => *n += 1,
                _ => runs.push((v, 1)),
            }
        }
        runs.serialize(s)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Vertex>, D::Error> {
        let runs: Vec<(Vertex, u32)> = Vec::deserialize(d)?;
        let total: u64 = runs.iter().map(|(_, n)| u64::from(*n)).sum();
        if total > MAX_VERTICES {
            return Err(D::Error::custom(format!("{total} vertices in a fence")));
        }
        let mut vertices = Vec::with_capacity(total as usize);
        for (first, n) in runs {
            let end = u64::from(first) + u64::from(n);
            if end > u64::from(Vertex::MAX) + 1 {
                return Err(D::Error::custom("a run of vertices beyond the last"));
            }
            vertices.extend((u64::from(first)..end).filter_map(|v| Vertex::try_from(v).ok()));
        }
        Ok(vertices)
    }
}

/// Decodes one frame body (as [`pmix_wire::FrameReader`] hands them out).
pub fn decode(body: &[u8]) -> Result<Msg, pmix_wire::Error> {
    pmix_wire::decode_body(body)
}

/// What the `tree_decode` fuzz target checks, here so that the corpus replays on stable
/// through the same code: split `data` into frames (with a small maximum, so the size check
/// is reached too), decode each frame and `data` itself as a body, and re-encode what decoded:
/// it must decode to the same message. Panics on a violation. Not part of the API.
#[doc(hidden)]
pub fn fuzz_check(data: &[u8]) {
    let mut reader = pmix_wire::FrameReader::new(pmix_wire::FrameDecoder::new(1 << 12));
    // Fed in two pieces, so that a frame split across reads is exercised.
    let (a, b) = data.split_at(data.len() / 2);
    for piece in [a, b] {
        reader.extend(piece);
        while let Ok(Some(body)) = reader.next_frame() {
            round_trip(body);
        }
    }
    round_trip(data);
}

fn round_trip(body: &[u8]) {
    if let Ok(msg) = decode(body) {
        let mut out = Vec::new();
        if encode(&msg, &mut out).is_ok() {
            let again = decode(&out[pmix_wire::HEADER_LEN..]);
            assert_eq!(
                again.ok().as_ref(),
                Some(&msg),
                "round trip changed a message"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytes() -> impl Strategy<Value = ByteBuf> {
        proptest::collection::vec(any::<u8>(), 0..40).prop_map(ByteBuf::from)
    }

    fn result() -> impl Strategy<Value = Result<ByteBuf, Status>> {
        prop_oneof![
            bytes().prop_map(Ok),
            any::<i32>().prop_map(|s| Err(Status(s)))
        ]
    }

    fn key() -> impl Strategy<Value = FenceKey> {
        (proptest::collection::vec(any::<u8>(), 0..10), any::<u64>())
            .prop_map(|(set, seq)| FenceKey { set, seq })
    }

    fn msg() -> impl Strategy<Value = Msg> {
        prop_oneof![
            (any::<u32>(), bytes()).prop_map(|(vertex, nonce)| Msg::Hello { vertex, nonce }),
            (bytes(), bytes()).prop_map(|(nonce, proof)| Msg::Challenge { nonce, proof }),
            bytes().prop_map(|proof| Msg::Proof { proof }),
            Just(Msg::Welcome),
            ".{0,20}".prop_map(|reason| Msg::Refused { reason }),
            (
                key(),
                proptest::collection::vec(any::<u32>(), 0..10),
                proptest::collection::vec(
                    (any::<u32>(), proptest::collection::vec(any::<u8>(), 0..10))
                        .prop_map(|(vertex, data)| Part { vertex, data }),
                    0..5
                )
            )
                .prop_map(|(key, vertices, parts)| Msg::FenceUp {
                    key,
                    vertices,
                    parts
                }),
            (key(), result()).prop_map(|(key, result)| Msg::FenceDown { key, result }),
            (any::<u32>(), any::<u32>(), any::<u64>(), bytes()).prop_map(
                |(origin, target, id, payload)| Msg::Request {
                    origin,
                    target,
                    id,
                    payload
                }
            ),
            (any::<u32>(), any::<u64>(), result()).prop_map(|(origin, id, result)| Msg::Response {
                origin,
                id,
                result
            }),
            (
                any::<u32>(),
                prop_oneof![Just(Dest::All), any::<u32>().prop_map(Dest::Vertex)],
                bytes()
            )
                .prop_map(|(from, dest, payload)| Msg::Message {
                    from,
                    dest,
                    payload
                }),
            (any::<u32>(), ".{0,20}").prop_map(|(vertex, reason)| Msg::Lost { vertex, reason }),
            Just(Msg::Heartbeat),
        ]
    }

    #[test]
    fn a_job_wide_fence_names_its_vertices_in_a_few_bytes() {
        let up = |vertices: Vec<Vertex>| {
            let mut out = Vec::new();
            let m = Msg::FenceUp {
                key: FenceKey {
                    set: b"j".to_vec(),
                    seq: 1,
                },
                vertices,
                parts: Vec::new(),
            };
            encode(&m, &mut out).unwrap();
            (m, out)
        };
        let (_, small) = up((1..=16384).collect());
        assert!(small.len() < 40, "{} bytes", small.len());
        let (m, bytes) = up(vec![7, 3, 4, 5, 5, 9, u32::MAX]);
        assert_eq!(decode(&bytes[pmix_wire::HEADER_LEN..]).unwrap(), m);
        // Runs that would expand beyond the bound, or past the last vertex, are refused.
        #[derive(Debug, Deserialize)]
        struct Wire(#[serde(with = "vertex_runs")] Vec<Vertex>);
        let runs = |r: Vec<(u32, u32)>| rmp_serde::to_vec(&r).unwrap();
        let ok: Wire = rmp_serde::from_slice(&runs(vec![(2, 3), (9, 1)])).unwrap();
        assert_eq!(ok.0, [2, 3, 4, 9]);
        let too_many = runs(vec![(0, 1 << 21), (0, 1 << 21), (0, 1)]);
        assert!(rmp_serde::from_slice::<Wire>(&too_many).is_err());
        let past_the_end = runs(vec![(u32::MAX, 2)]);
        assert!(rmp_serde::from_slice::<Wire>(&past_the_end).is_err());
    }

    proptest! {
        #[test]
        fn every_message_round_trips(m in msg()) {
            let mut out = Vec::new();
            encode(&m, &mut out).unwrap();
            let mut reader = pmix_wire::FrameReader::new(pmix_wire::FrameDecoder::default());
            reader.extend(&out);
            let body = reader.next_frame().unwrap().unwrap();
            prop_assert_eq!(decode(body).unwrap(), m);
        }

        #[test]
        fn decoding_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            fuzz_check(&data);
        }

        #[test]
        fn a_cut_message_is_an_error(m in msg(), cut in 0usize..1000) {
            let mut out = Vec::new();
            encode(&m, &mut out).unwrap();
            let body = &out[pmix_wire::HEADER_LEN..];
            let cut = cut % body.len();
            prop_assert!(decode(&body[..cut]).is_err());
        }
    }
}
