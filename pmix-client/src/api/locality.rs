//! How close two processes are (`PMIx_Get_relative_locality`), from their locality strings.

use pmix_types::Locality;

use crate::{Client, Error};

impl Client {
    /// How close the processes of locality strings `a` and `b` are (`PMIx_Get_relative_locality`):
    /// `Locality::SHARE_NODE` plus a `SHARE_*` bit for each kind of object (package, NUMA node,
    /// L3/L2/L1 cache, core, hardware thread) they share. The strings are the
    /// `PMIX_LOCALITY_STRING` values of two processes of this node (`self.get(peer,
    /// attr::LOCALITY_STRING, &[])`), such as `SK0:L30:L20:L10:CR0:HT0:NM0`, with or without
    /// the `hwloc:` prefix. Answered here, without the server; `Error::BadParam` if a string is
    /// not a locality string.
    pub fn relative_locality(&self, a: &str, b: &str) -> Result<Locality, Error> {
        pmix_types::locality::relative_locality(a, b)
            .ok_or_else(|| Error::BadParam(format!("not a pair of locality strings: {a:?}, {b:?}")))
    }
}
