//! Which namespaces are connected with each other (`PMIx_Connect` until `PMIx_Disconnect`):
//! a process's failure is told to the processes of the namespaces connected with its own.

use std::collections::HashSet;

use super::store::NsId;

/// Pairs of connected namespaces, both orders.
#[derive(Default)]
pub(crate) struct Connected {
    pairs: HashSet<(NsId, NsId)>,
}

impl Connected {
    /// Every two of `nss` are connected from now on.
    pub(crate) fn connect(&mut self, nss: &[NsId]) {
        for a in nss {
            for b in nss {
                if a != b {
                    self.pairs.insert((*a, *b));
                }
            }
        }
    }

    /// No two of `nss` are connected any more.
    pub(crate) fn disconnect(&mut self, nss: &[NsId]) {
        for a in nss {
            for b in nss {
                self.pairs.remove(&(*a, *b));
            }
        }
    }

    pub(crate) fn are(&self, a: NsId, b: NsId) -> bool {
        self.pairs.contains(&(a, b))
    }

    /// A namespace that is gone is connected with nothing.
    pub(crate) fn forget(&mut self, ns: NsId) {
        self.pairs.retain(|(a, b)| *a != ns && *b != ns);
    }
}

#[cfg(test)]
mod tests {
    use super::Connected;

    #[test]
    fn connections_are_mutual_and_end_with_a_disconnect_or_a_namespace() {
        let mut c = Connected::default();
        c.connect(&[1, 2, 3]);
        assert!(c.are(1, 2) && c.are(2, 1) && c.are(3, 1));
        assert!(!c.are(1, 1));
        c.disconnect(&[1, 2]);
        assert!(!c.are(1, 2) && !c.are(2, 1));
        assert!(c.are(1, 3));
        c.forget(3);
        assert!(!c.are(1, 3) && !c.are(3, 2));
    }
}
