//! A singleton's own name service: what it publishes, it alone can look up (no other process
//! shares its server, because it has none). Ranges are not told apart, since every range a
//! singleton can name holds only itself; `FIRST_READ` persistence and `WAIT` are kept, since a
//! singleton's other threads can publish what one of them waits for.
//!
//! Sans-IO: the responder (`mod.rs`) completes what the calls return. When the singleton starts a private
//! server (a spawn), every entry is published there again, in order, with its directives.

use hashbrown::HashSet;
use pmix_types::{Info, Key, Persistence, Proc, Status, Value, attr};
use pmix_wire::Published;

/// One publish call still in force: its data as left by unpublishes and first reads, and the
/// directives it came with.
struct Entry {
    data: Vec<Info>,
    info: Vec<Info>,
    first_read: bool,
}

/// What a lookup's directives ask of the wait: how many keys must be found (all of them for
/// `WAIT` given as `true` or 0), or `None` for an answer now.
pub(crate) fn wait_for(info: &[Info], nkeys: usize) -> Result<Option<usize>, Status> {
    let mut wait = None;
    for i in info.iter().filter(|i| i.key.as_str() == attr::WAIT) {
        wait = match &i.value {
            Value::Bool(true) => Some(nkeys),
            Value::Bool(false) => None,
            v => {
                let n = v
                    .as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or(Status::ERR_BAD_PARAM)?;
                Some(if n == 0 { nkeys } else { n.min(nkeys) })
            }
        };
    }
    Ok(wait)
}

/// The singleton's published names, in publish order.
#[derive(Default)]
pub(crate) struct Names {
    entries: Vec<Entry>,
}

impl Names {
    fn find(&self, key: &str) -> Option<(usize, usize)> {
        self.entries.iter().enumerate().find_map(|(e, entry)| {
            let i = entry.data.iter().position(|d| d.key.as_str() == key)?;
            Some((e, i))
        })
    }

    /// `PMIx_Publish`: refused whole (`ERR_DUPLICATE_KEY`) if a key is already published.
    pub(crate) fn publish(&mut self, data: Vec<Info>, info: Vec<Info>) -> Status {
        {
            let mut seen = HashSet::with_capacity(data.len());
            for d in &data {
                if !seen.insert(d.key.as_str()) || self.find(d.key.as_str()).is_some() {
                    return Status::ERR_DUPLICATE_KEY;
                }
            }
        }
        let first_read = info.iter().any(|i| {
            i.key.as_str() == attr::PERSISTENCE
                && match &i.value {
                    Value::Persistence(p) => *p == Persistence::FIRST_READ,
                    v => v.as_u64() == Some(u64::from(Persistence::FIRST_READ.0)),
                }
        });
        self.entries.push(Entry {
            data,
            info,
            first_read,
        });
        Status::SUCCESS
    }

    /// `PMIx_Lookup` of `keys` by `me`: what is found (a `FIRST_READ` value is taken), unless
    /// fewer than `need` keys are, when nothing is taken and `None` returned (to wait).
    pub(crate) fn lookup(
        &mut self,
        me: &Proc,
        keys: &[Key],
        need: usize,
    ) -> Option<Vec<Published>> {
        let found: Vec<(usize, usize)> =
            keys.iter().filter_map(|k| self.find(k.as_str())).collect();
        if found.len() < need {
            return None;
        }
        let out = found
            .iter()
            .map(|&(e, i)| {
                let d = &self.entries[e].data[i];
                Published {
                    proc: me.clone(),
                    key: d.key.clone(),
                    value: d.value.clone(),
                }
            })
            .collect();
        let taken: Vec<Key> = found
            .iter()
            .filter(|&&(e, _)| self.entries[e].first_read)
            .map(|&(e, i)| self.entries[e].data[i].key.clone())
            .collect();
        for k in &taken {
            self.remove(k.as_str());
        }
        Some(out)
    }

    fn remove(&mut self, key: &str) -> bool {
        let Some((e, i)) = self.find(key) else {
            return false;
        };
        self.entries[e].data.remove(i);
        if self.entries[e].data.is_empty() {
            self.entries.remove(e);
        }
        true
    }

    /// `PMIx_Unpublish`: every key must be published (`ERR_NOT_FOUND` otherwise, nothing
    /// removed); no keys removes everything, and fails only when there was nothing.
    pub(crate) fn unpublish(&mut self, keys: &[Key]) -> Status {
        if keys.is_empty() {
            let had = !self.entries.is_empty();
            self.entries.clear();
            return if had {
                Status::SUCCESS
            } else {
                Status::ERR_NOT_FOUND
            };
        }
        if keys.iter().any(|k| self.find(k.as_str()).is_none()) {
            return Status::ERR_NOT_FOUND;
        }
        for k in keys {
            self.remove(k.as_str());
        }
        Status::SUCCESS
    }

    /// Every publish still in force, data and directives, to publish again elsewhere.
    pub(crate) fn take_all(&mut self) -> Vec<(Vec<Info>, Vec<Info>)> {
        std::mem::take(&mut self.entries)
            .into_iter()
            .map(|e| (e.data, e.info))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pmix_types::{Nspace, Rank};

    fn key(k: &str) -> Key {
        Key::new(k).unwrap()
    }

    #[test]
    fn publish_lookup_unpublish_as_the_name_service_does() {
        let me = Proc::new(Nspace::new("singleton.h.1").unwrap(), Rank(0));
        let mut n = Names::default();
        assert_eq!(
            n.publish(vec![Info::new(key("a"), 1u32)], vec![]),
            Status::SUCCESS
        );
        // A duplicate refuses the whole call.
        let dup = vec![Info::new(key("b"), 2u32), Info::new(key("a"), 3u32)];
        assert_eq!(n.publish(dup, vec![]), Status::ERR_DUPLICATE_KEY);
        assert_eq!(n.lookup(&me, &[key("b")], 1), None);
        let got = n.lookup(&me, &[key("a"), key("b")], 0).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].value, Value::Uint32(1));
        assert_eq!(got[0].proc, me);
        // First read takes it.
        let once = vec![Info::attr(attr::PERSISTENCE, Persistence::FIRST_READ)];
        assert_eq!(
            n.publish(vec![Info::new(key("c"), 4u32)], once),
            Status::SUCCESS
        );
        assert_eq!(n.lookup(&me, &[key("c")], 1).unwrap().len(), 1);
        assert_eq!(n.lookup(&me, &[key("c")], 1), None);
        assert_eq!(n.unpublish(&[key("a"), key("zz")]), Status::ERR_NOT_FOUND);
        assert_eq!(n.unpublish(&[key("a")]), Status::SUCCESS);
        assert_eq!(n.unpublish(&[]), Status::ERR_NOT_FOUND);
    }

    #[test]
    fn wait_counts_keys() {
        let w = |v: Value| wait_for(&[Info::attr(attr::WAIT, v)], 3);
        assert_eq!(w(Value::Bool(true)), Ok(Some(3)));
        assert_eq!(w(Value::Bool(false)), Ok(None));
        assert_eq!(w(Value::Uint32(0)), Ok(Some(3)));
        assert_eq!(w(Value::Int32(2)), Ok(Some(2)));
        assert_eq!(w(Value::Int32(9)), Ok(Some(3)));
        assert_eq!(w(Value::from("x")), Err(Status::ERR_BAD_PARAM));
        assert_eq!(wait_for(&[], 3), Ok(None));
    }
}
