//! I/O forwarding on the OpenPMIx wire: the layouts of the three requests (`IOF_PULL`,
//! `IOF_PUSH`, `IOF_DEREG`, encoded and decoded as [`Request`](super::Request) variants with
//! the other requests) and of the pull's reply, and [`IofChunk`], the output a server pushes
//! to a tool that pulled it on tag [`TAG_IOF`](super::TAG_IOF).
//!
//! Layouts, as libpmix 4.2 and 5.0 write them (`src/common/pmix_iof.c`):
//!
//! - `IOF_PULL`: `SIZE` nprocs, `PROC`s, `SIZE` ndirs, `INFO`s if ndirs > 0,
//!   `IOF_CHANNEL` channels, `SIZE` the tool's own id for the pull. Answered `STATUS`, then on
//!   success `SIZE` the server's id for it (what `IOF_DEREG` names).
//! - `IOF_DEREG`: `SIZE` ndirs, `INFO`s if ndirs > 0, `SIZE` the server's id. Answered
//!   `STATUS`.
//! - `IOF_PUSH`: `SIZE` ntargets, `PROC`s if ntargets > 0, `SIZE` ndirs, `INFO`s if
//!   ndirs > 0, then a `BYTE_OBJECT` of data unless there is none (a push that only carries
//!   directives, such as `IOF_COMPLETE`). Answered `STATUS`.
//! - A chunk (tag 2, no command): `PROC` source, `IOF_CHANNEL`, `SIZE` the tool's own id of
//!   the pull, `SIZE` ninfo, `INFO`s if ninfo > 0, `BYTE_OBJECT` data.

use pmix_types::{Info, IofChannel, Proc};

use super::dialect::Dialect;
use super::item::{ByteObject, Size, counted, put_counted};
use super::pack::atomically;
use super::unpack::Unpacker;
use crate::Error;

/// Output of one process on its way to a tool that pulled it.
#[derive(Clone, Debug, PartialEq)]
pub struct IofChunk {
    /// The process that wrote it.
    pub source: Proc,
    /// Which of its outputs (`STDOUT`, `STDERR`, `STDDIAG`).
    pub channel: IofChannel,
    /// The tool's own id of the pull it answers (the last `SIZE` of its `IOF_PULL`).
    pub local_id: u64,
    /// Attributes of the chunk (none from pmix-rs servers).
    pub info: Vec<Info>,
    /// The bytes.
    pub data: Vec<u8>,
}

impl IofChunk {
    /// Appends the payload (sent on tag 2) to `out`. On error `out` is left as it was.
    pub fn encode(&self, dialect: Dialect, out: &mut Vec<u8>) -> Result<(), Error> {
        atomically(out, dialect, |p| {
            p.pack_one(&self.source)?;
            p.pack_one(&self.channel)?;
            p.pack_one(&Size(self.local_id))?;
            put_counted(p, &self.info, false)?;
            p.pack_one(&ByteObject(self.data.clone()))
        })
    }

    /// Decodes a chunk's payload.
    pub fn decode(payload: &[u8], dialect: Dialect) -> Result<Self, Error> {
        let mut u = Unpacker::new(payload, dialect);
        let source = u.unpack_one::<Proc>()?;
        let channel = u.unpack_one::<IofChannel>()?;
        let local_id = u.unpack_one::<Size>()?.0;
        let info = counted(&mut u)?;
        let data = u.unpack_one::<ByteObject>()?.0;
        u.finish()?;
        Ok(IofChunk {
            source,
            channel,
            local_id,
            info,
            data,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Cmd, Reply, Request};
    use super::*;
    use pmix_types::{Nspace, Rank, Value};

    fn proc(rank: u32) -> Proc {
        Proc::new(
            Nspace::new("job").unwrap_or_else(|e| panic!("{e}")),
            Rank(rank),
        )
    }

    fn round_trip(req: Request, dialect: Dialect) {
        let mut bytes = Vec::new();
        req.encode(dialect, &mut bytes)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(Request::decode(&bytes, dialect).ok(), Some(req));
    }

    #[test]
    fn requests_round_trip_in_both_dialects() {
        for dialect in [
            Dialect::V41,
            Dialect::new(super::super::Codec::V3, super::super::BufferType::FullyDesc),
        ] {
            round_trip(
                Request::IofPull {
                    procs: vec![proc(0), proc(Rank::WILDCARD.0)],
                    directives: vec![Info::attr("pmix.iof.tag", Value::Bool(true))],
                    channels: IofChannel(IofChannel::STDOUT.0 | IofChannel::STDERR.0),
                    local_id: 3,
                },
                dialect,
            );
            round_trip(
                Request::IofPush {
                    targets: vec![proc(1)],
                    directives: vec![],
                    data: Some(b"input\n".to_vec()),
                },
                dialect,
            );
            round_trip(
                Request::IofPush {
                    targets: vec![],
                    directives: vec![Info::attr("pmix.iof.cmp", Value::Bool(true))],
                    data: None,
                },
                dialect,
            );
            round_trip(
                Request::IofDeregister {
                    directives: vec![],
                    refid: 7,
                },
                dialect,
            );
        }
    }

    #[test]
    fn pull_reply_carries_the_id_on_success_only() {
        let d = Dialect::V41;
        for reply in [
            Reply::IofPull {
                status: pmix_types::Status::SUCCESS,
                refid: Some(9),
            },
            Reply::IofPull {
                status: pmix_types::Status::ERR_NOT_SUPPORTED,
                refid: None,
            },
        ] {
            let mut bytes = Vec::new();
            reply
                .encode(d, &mut bytes)
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(Reply::decode(Cmd::IOF_PULL, &bytes, d).ok(), Some(reply));
        }
    }

    #[test]
    fn chunks_round_trip_and_truncation_is_an_error() {
        let chunk = IofChunk {
            source: proc(2),
            channel: IofChannel::STDERR,
            local_id: 1,
            info: vec![],
            data: b"hello from 2\n".to_vec(),
        };
        let mut bytes = Vec::new();
        chunk
            .encode(Dialect::V41, &mut bytes)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(IofChunk::decode(&bytes, Dialect::V41).ok(), Some(chunk));
        for n in 0..bytes.len() {
            assert!(IofChunk::decode(&bytes[..n], Dialect::V41).is_err());
        }
    }
}
