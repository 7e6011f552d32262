//! The requests waiting for their replies: ids, what their replies need, and whether the connection is
//! still there to answer them.

use hashbrown::HashMap;
use pmix_wire::Reply;

/// An outstanding request. Its completion is the driver's to keep: a closure is `Send` but
/// not `Sync`, and the core must be `Sync`, so that gets read its store in parallel.
pub(super) struct Waiter {
    /// The caller wants a collecting fence's data in the reply as sent
    /// ([`super::ClientCore::submit`] with `whole`), not only taken into the store.
    pub(super) whole: bool,
    /// Nothing will answer it: this is its reply, once its bytes are written.
    pub(super) once_written: Option<Reply>,
    /// The core sent it itself (what a singleton hands the server it gets, `local/`): its
    /// reply goes to no completion, a refusal is only worth a warning. What it is.
    pub(super) own: Option<&'static str>,
}

/// The pending-request table.
#[derive(Default)]
pub(super) struct Pending {
    next_id: u32,
    waiting: HashMap<u32, Waiter>,
    /// Set once the connection is gone; later requests fail at once.
    pub(super) closed: bool,
}

impl Pending {
    /// Files a request under a fresh id. Ids wrap; one still outstanding is skipped (the
    /// protocol forbids reusing them).
    pub(super) fn insert(&mut self, whole: bool) -> u32 {
        self.insert_waiter(Waiter {
            whole,
            once_written: None,
            own: None,
        })
    }

    /// Files a request the core sends itself (see [`Waiter::own`]).
    pub(super) fn insert_own(&mut self, what: &'static str) -> u32 {
        self.insert_waiter(Waiter {
            whole: false,
            once_written: None,
            own: Some(what),
        })
    }

    fn insert_waiter(&mut self, w: Waiter) -> u32 {
        let mut id = self.next_id;
        while self.waiting.contains_key(&id) {
            id = id.wrapping_add(1);
        }
        self.next_id = id.wrapping_add(1);
        self.waiting.insert(id, w);
        id
    }

    pub(super) fn get_mut(&mut self, id: u32) -> Option<&mut Waiter> {
        self.waiting.get_mut(&id)
    }

    pub(super) fn contains(&self, id: u32) -> bool {
        self.waiting.contains_key(&id)
    }

    pub(super) fn take(&mut self, id: u32) -> Option<Waiter> {
        self.waiting.remove(&id)
    }

    /// True when request `id` waits for a collecting fence's data as sent.
    pub(super) fn wants_whole(&self, id: u32) -> bool {
        self.waiting.get(&id).is_some_and(|w| w.whole)
    }

    pub(super) fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Takes every outstanding request out, by id.
    pub(super) fn drain(&mut self) -> impl Iterator<Item = u32> + '_ {
        self.waiting.drain().map(|(id, _)| id)
    }
}
