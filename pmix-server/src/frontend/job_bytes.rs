//! Job data encoded once and sent many times: every client of a namespace is handed the same
//! bytes, whichever wire it speaks.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;

use pmix_types::Nspace;
use pmix_wire::JobImage;

/// A job record kept with its encoding: keeping the record keeps its identity, which keys
/// the map, from being reused by another record.
type Encoded = (JobImage, Arc<[u8]>);

/// Encodings of job records, by the record (its [`JobImage::identity`]) and `K`, what else
/// the encoding depends on (a dialect, a storage module; `()` when nothing).
pub(crate) struct JobBytes<K> {
    encoded: HashMap<(usize, K), Encoded>,
}

impl<K: Eq + Hash> JobBytes<K> {
    pub(crate) fn new() -> Self {
        JobBytes {
            encoded: HashMap::new(),
        }
    }

    /// The bytes of `job` for `k`, made by `encode` on first need; None (logged) if they
    /// cannot be made.
    pub(crate) fn get_or_encode<E: std::fmt::Display>(
        &mut self,
        job: &JobImage,
        k: K,
        encode: impl FnOnce(&JobImage) -> Result<Vec<u8>, E>,
    ) -> Option<Arc<[u8]>> {
        let key = (job.identity(), k);
        if let Some((_, bytes)) = self.encoded.get(&key) {
            return Some(bytes.clone());
        }
        match encode(job) {
            Ok(bytes) => {
                let bytes: Arc<[u8]> = bytes.into();
                self.encoded.insert(key, (job.clone(), bytes.clone()));
                Some(bytes)
            }
            Err(e) => {
                tracing::error!(nspace = %job.nspace(), "cannot encode job data: {e}");
                None
            }
        }
    }

    /// Forgets the encodings of a namespace's records.
    pub(crate) fn forget(&mut self, nspace: &Nspace) {
        self.encoded.retain(|_, (job, _)| job.nspace() != nspace);
    }
}
