//! A collecting fence's reply, seen without decoding its data.
//!
//! A fence over a whole job brings a client every participant's data, and a client usually
//! reads a few of those processes' keys, if any, long after the fence. Decoding all of it when
//! the reply arrives (a `Key` and a `Value` allocated per entry) made the first collecting
//! fence of 64 processes on one CPU cost several times what a barrier does. So a client can
//! instead [`peek_fence_reply`]: one pass over the frame that finds where each process's
//! entries lie, skipping over them (checking announced lengths and trailing bytes as
//! [`decode_body`](crate::decode_body) would, but not yet their nesting), and keeps them
//! encoded. [`decode_kvs`] decodes one process's entries when they are first wanted, with every
//! check `decode_body` makes, nesting included, at the depth they have in a whole reply.
//!
//! Only the canonical encoding is recognised (the one `ReplyBody::Fence` gets from this crate);
//! anything else, well-formed or not, is `None`, and the caller decodes the frame whole, which
//! then decides (and explains) whether it is valid. What `peek_fence_reply` accepts and the
//! full decoder refuses fails in [`decode_kvs`] or in `Nspace::new` of the process's namespace:
//! the fuzz target checks that both ways agree.

use std::ops::Range;

use pmix_types::{Rank, Status};

use crate::scan::{self, Head};
use crate::{Error, Kv, MAX_DEPTH};

/// How many containers hold a process's entries (`Vec<Kv>`) in a fence reply: the `ServerMsg`
/// map, the `Reply` fields, the reply's fields, the `ReplyBody` map, the `Fence` fields, the
/// data array and the `ProcKvs` fields. The entries' nesting is checked against what is left
/// of [`MAX_DEPTH`], so that a reply is refused lazily exactly when it would be refused whole.
const KVS_LEVEL: usize = 7;

/// The largest nesting allowed inside one process's entries, counting their array.
const KVS_DEPTH: usize = MAX_DEPTH - KVS_LEVEL;

/// A collecting fence's reply as [`peek_fence_reply`] found it.
#[derive(Debug, PartialEq, Eq)]
pub struct FenceReplyRef<'a> {
    /// The request id.
    pub id: u32,
    /// The reply's status.
    pub status: Status,
    /// The encoded `Vec<ProcKvs>`: the bytes [`PackedProc::kvs`] ranges point into.
    pub data: &'a [u8],
    /// Each process of `data`, in order.
    pub procs: Vec<PackedProc<'a>>,
}

/// One process of a fence reply's data, its entries still encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackedProc<'a> {
    /// Its namespace, as sent: UTF-8, not yet checked to be a valid `Nspace`.
    pub nspace: &'a str,
    /// Its rank.
    pub rank: Rank,
    /// Where its encoded `Vec<Kv>` lies in [`FenceReplyRef::data`]; [`decode_kvs`] decodes it.
    pub kvs: Range<usize>,
}

/// If `body` is a `ServerMsg::Reply` whose body is `ReplyBody::Fence`, in the encoding this
/// crate produces, its id, status and data with each process's entries located but not decoded.
///
/// `None` for any other message and for anything malformed: decode those with
/// [`decode_body`](crate::decode_body). In a `Some`, every range is one whole MessagePack value
/// whose announced lengths fit in the bytes; what is left unchecked is the nesting within those
/// values, whether they are `Kv`s, and whether the namespaces are valid names, which
/// [`decode_kvs`] and `Nspace::new` tell. The work is bounded by the body's length whatever
/// the bytes.
pub fn peek_fence_reply(body: &[u8]) -> Option<FenceReplyRef<'_>> {
    let mut h = Head::new(body);
    // ServerMsg::Reply { id, reply: Reply { status, body: ReplyBody::Fence { data } } }
    if h.map_len()? != 1 || h.str()? != b"Reply" || h.array_len()? != 2 {
        return None;
    }
    let id = u32::try_from(h.int()?).ok()?;
    if h.array_len()? != 2 {
        return None;
    }
    let status = Status(i32::try_from(h.int()?).ok()?);
    if h.map_len()? != 1 || h.str()? != b"Fence" || h.array_len()? != 1 {
        return None;
    }
    // The data is the last value of every container around it: it runs to the end.
    let data = h.rest();
    let procs = index(data)?;
    Some(FenceReplyRef {
        id,
        status,
        data,
        procs,
    })
}

/// Walks the data array of a fence reply: `[[[nspace, rank], [kv, ...]], ...]`, which must be
/// all of `data`.
///
/// One pass that only skips over each process's entries (bounded by the bytes that remain, and
/// without recursion, so hostile bytes cost no more than their length): their nesting is
/// checked when [`decode_kvs`] decodes them, against the same limit a whole decode would apply
/// there, and nothing else in the data can nest.
fn index(data: &[u8]) -> Option<Vec<PackedProc<'_>>> {
    let mut h = Head::new(data);
    let n = usize::try_from(h.array_len()?).ok()?;
    // Each process takes at least five bytes: a count the bytes cannot hold sizes nothing.
    if n > data.len() / 5 {
        return None;
    }
    let mut procs = Vec::with_capacity(n);
    for _ in 0..n {
        if h.array_len()? != 2 || h.array_len()? != 2 {
            return None;
        }
        let nspace = std::str::from_utf8(h.str()?).ok()?;
        let rank = Rank(u32::try_from(h.int()?).ok()?);
        let start = h.pos();
        let len = scan::skip_value(h.rest()).ok()?;
        h.skip(len)?;
        procs.push(PackedProc {
            nspace,
            rank,
            kvs: start..start + len,
        });
    }
    h.rest().is_empty().then_some(procs)
}

/// Decodes one process's entries, as [`PackedProc::kvs`] locates them in a fence reply.
///
/// Checked as [`decode_body`](crate::decode_body) checks a body, with the nesting the entries
/// have left in a whole reply.
pub fn decode_kvs(kvs: &[u8]) -> Result<Vec<Kv>, Error> {
    crate::decode::decode_with_depth(kvs, KVS_DEPTH)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::{ProcKvs, Reply, ReplyBody, ServerMsg, decode_body};
    use pmix_types::{Key, Nspace, Proc, Scope, Value};

    fn body(msg: &ServerMsg) -> Vec<u8> {
        rmp_serde::to_vec(msg).unwrap()
    }

    fn fence(id: u32, status: Status, data: Vec<ProcKvs>) -> ServerMsg {
        ServerMsg::Reply {
            id,
            reply: Reply {
                status,
                body: ReplyBody::Fence { data },
            },
        }
    }

    fn kv(k: &str, v: Value) -> Kv {
        Kv {
            scope: Scope::GLOBAL,
            key: Key::new(k).unwrap(),
            value: v,
        }
    }

    #[test]
    fn a_fence_reply_is_located_and_decodes_as_a_whole_one() {
        let ns = Nspace::new("job-1").unwrap();
        let data = vec![
            ProcKvs {
                proc: Proc::new(ns.clone(), 0),
                kvs: vec![kv("a", Value::Uint32(7)), kv("b", Value::from("x"))],
            },
            ProcKvs {
                proc: Proc::new(ns.clone(), 70_000),
                kvs: vec![],
            },
        ];
        for (id, status) in [(0, Status::SUCCESS), (u32::MAX, Status(-1_000_000))] {
            let b = body(&fence(id, status, data.clone()));
            let f = peek_fence_reply(&b).unwrap();
            assert_eq!((f.id, f.status), (id, status));
            assert_eq!(f.procs.len(), 2);
            for (p, want) in f.procs.iter().zip(&data) {
                assert_eq!(p.nspace, want.proc.nspace.as_str());
                assert_eq!(p.rank, want.proc.rank);
                assert_eq!(decode_kvs(&f.data[p.kvs.clone()]).unwrap(), want.kvs);
            }
        }
    }

    #[test]
    fn other_messages_are_not_fence_replies() {
        let get = ServerMsg::Reply {
            id: 1,
            reply: Reply {
                status: Status::SUCCESS,
                body: ReplyBody::Get {
                    data: vec![],
                    jobs: vec![],
                },
            },
        };
        assert_eq!(peek_fence_reply(&body(&get)), None);
        let none = ServerMsg::Reply {
            id: 1,
            reply: Reply::status(Status::SUCCESS),
        };
        assert_eq!(peek_fence_reply(&body(&none)), None);
        assert_eq!(peek_fence_reply(&[]), None);
        let b = body(&fence(3, Status::SUCCESS, vec![]));
        assert_eq!(peek_fence_reply(&b).unwrap().procs, vec![]);
        // Trailing bytes, a cut, an array announcing more processes than there are bytes.
        let mut long = b.clone();
        long.push(0);
        assert_eq!(peek_fence_reply(&long), None);
        assert_eq!(peek_fence_reply(&b[..b.len() - 1]), None);
        let mut huge = b[..b.len() - 1].to_vec();
        huge.extend_from_slice(&[0xdd, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(peek_fence_reply(&huge), None);
    }

    #[test]
    fn entries_nest_exactly_as_deep_as_in_a_whole_reply() {
        // Wrap a value in data arrays until the whole reply is refused for its depth.
        let reply_with = |v: &Value| {
            body(&fence(
                1,
                Status::SUCCESS,
                vec![ProcKvs {
                    proc: Proc::new(Nspace::new("n").unwrap(), 0),
                    kvs: vec![kv("k", v.clone())],
                }],
            ))
        };
        let mut v = Value::Uint8(1);
        let mut deepest_ok = None;
        loop {
            let b = reply_with(&v);
            match decode_body::<ServerMsg>(&b) {
                Ok(_) => deepest_ok = Some((b, v.clone())),
                Err(e) => {
                    assert!(e.to_string().contains("deeper"), "{e}");
                    // Found out when the entries are decoded.
                    let f = peek_fence_reply(&b).unwrap();
                    let e = decode_kvs(&f.data[f.procs[0].kvs.clone()]).unwrap_err();
                    assert!(e.to_string().contains("deeper"), "{e}");
                    break;
                }
            }
            v = Value::from(pmix_types::DataArray::from_infos([pmix_types::Info::new(
                Key::new("k").unwrap(),
                v,
            )]));
        }
        let (b, v) = deepest_ok.unwrap();
        let f = peek_fence_reply(&b).unwrap();
        let kvs = decode_kvs(&f.data[f.procs[0].kvs.clone()]).unwrap();
        assert_eq!(kvs, vec![kv("k", v)]);
    }
}
