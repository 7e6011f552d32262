//! A collecting fence's data as libpmix clients on the `hash` store get it: one part per
//! process of a `GETNB` answer, encoded once for every client of the fence that speaks the
//! same dialect, and sent by reference (spliced into each connection's output, not copied).
//!
//! A client on the `hash` store gets no data with its fence answer; it asks for each peer it
//! wants afterwards. The first such answer carries every participant's data (a `GETNB` answer
//! may hold any number of processes and the client keeps them all), so its other gets stay
//! local. What a client must not be sent is data it holds already: its own (libpmix 5.0
//! compares a key it stores again with what it has, and fails on some types) and the
//! processes the answer names anyway.

use std::cell::{OnceCell, RefCell};
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;
use pmix_types::Proc;
use pmix_wire::ProcKvs;
use pmix_wire::openpmix::{Dialect, ProcKvals};

/// The parts, one after another in one buffer, and where each process's part lies.
#[derive(Debug)]
pub(crate) struct CollectedParts {
    bytes: Bytes,
    parts: Vec<(Proc, Range<usize>)>,
}

impl CollectedParts {
    /// Encodes `data` for `dialect`.
    pub(crate) fn encode(data: &[ProcKvs], dialect: Dialect) -> Result<Self, pmix_wire::Error> {
        let mut out = Vec::new();
        let mut parts = Vec::with_capacity(data.len());
        for pk in data {
            let start = out.len();
            ProcKvals::from(pk).encode_get_part(dialect, &mut out)?;
            parts.push((pk.proc.clone(), start..out.len()));
        }
        Ok(CollectedParts {
            bytes: Bytes::from(out),
            parts,
        })
    }

    /// The parts of every process `skip` does not name, as few shared slices as can be (one
    /// per run of consecutive parts), and their length in all.
    pub(crate) fn except(&self, skip: impl Fn(&Proc) -> bool) -> (Vec<Bytes>, usize) {
        let mut runs: Vec<Range<usize>> = Vec::new();
        for (proc, range) in &self.parts {
            if skip(proc) {
                continue;
            }
            match runs.last_mut() {
                Some(run) if run.end == range.start => run.end = range.end,
                _ => runs.push(range.clone()),
            }
        }
        let len = runs.iter().map(|r| r.len()).sum();
        (runs.into_iter().map(|r| self.bytes.slice(r)).collect(), len)
    }
}

/// What the libpmix clients of one fence answer share: whether its data is in the ds21
/// segments (stored by the first ds21 client's answer), and its parts, encoded at most once
/// per dialect however many `hash` clients it answers.
#[derive(Default)]
pub(crate) struct SharedCollected {
    pub(crate) in_ds21: OnceCell<bool>,
    encoded: RefCell<Vec<(Dialect, Arc<CollectedParts>)>>,
}

impl SharedCollected {
    /// The parts of `data` for `dialect`, encoded by the first client of that dialect to ask.
    pub(crate) fn parts(
        &self,
        data: &[ProcKvs],
        dialect: Dialect,
    ) -> Result<Arc<CollectedParts>, pmix_wire::Error> {
        if let Some((_, parts)) = self.encoded.borrow().iter().find(|(d, _)| *d == dialect) {
            return Ok(parts.clone());
        }
        let parts = Arc::new(CollectedParts::encode(data, dialect)?);
        self.encoded.borrow_mut().push((dialect, parts.clone()));
        Ok(parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmix_types::{Key, Nspace, Rank, Scope, Value};
    use pmix_wire::Kv;
    use pmix_wire::openpmix::Reply;

    fn data(n: u32) -> Vec<ProcKvs> {
        (0..n)
            .map(|r| ProcKvs {
                proc: Proc::new(Nspace::new("job").unwrap(), Rank(r)),
                kvs: vec![Kv {
                    scope: Scope::GLOBAL,
                    key: Key::new("ep").unwrap(),
                    value: Value::String(format!("endpoint-{r}")),
                }],
            })
            .collect()
    }

    /// The parts a client gets decode, after a status, as the `GETNB` answer holding exactly
    /// the processes not skipped, in order.
    #[test]
    fn the_parts_left_after_skipping_are_a_get_answer_of_the_rest() {
        let dialect = Dialect::default();
        let data = data(6);
        let parts = CollectedParts::encode(&data, dialect).unwrap();
        let (slices, len) = parts.except(|p| p.rank == Rank(0) || p.rank == Rank(3));
        assert_eq!(slices.len(), 2, "ranks 1-2 and 4-5 are two runs");
        let mut payload = Vec::new();
        Reply::Get {
            status: pmix_types::Status::SUCCESS,
            data: Vec::new(),
        }
        .encode(dialect, &mut payload)
        .unwrap();
        for s in &slices {
            payload.extend_from_slice(s);
        }
        assert_eq!(len, slices.iter().map(|s| s.len()).sum::<usize>());
        let got = Reply::decode(pmix_wire::openpmix::Cmd::GETNB, &payload, dialect).unwrap();
        let Reply::Get { data: got, .. } = got else {
            panic!("not a get answer: {got:?}")
        };
        let ranks: Vec<u32> = got.iter().map(|pk| pk.proc.rank.0).collect();
        assert_eq!(ranks, [1, 2, 4, 5]);
        assert_eq!(got[2].kvals[0].value, Value::String("endpoint-4".into()));
    }

    #[test]
    fn a_dialect_is_encoded_once() {
        let memo = SharedCollected::default();
        let data = data(3);
        let a = memo.parts(&data, Dialect::default()).unwrap();
        let b = memo.parts(&data, Dialect::default()).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
    }
}
