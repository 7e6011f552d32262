//! The messages into a vertex's loop: a host's calls ([`Call`], sent by the [`crate::Tree`]
//! handle), the callbacks that answer them ([`Done`]) and how the handle wakes the loop
//! ([`Wake`]). Kept apart from both so that the handle (`net.rs`) and the loop
//! (`tree_loop.rs`) depend on the loop's inbox, not on each other, as pmix-server's
//! `mailbox.rs` does for its shell.

use pmix_types::Status;

use crate::Vertex;
use crate::core::Outcome;
use crate::msg::{Dest, FenceKey};

/// A `done` callback, called exactly once: with the result, or with ERR_LOST_CONNECTION when
/// dropped uncalled (the tree stopped first, or the call never reached it).
pub(crate) struct Done(Option<Box<dyn FnOnce(Outcome) + Send>>);

impl Done {
    pub(crate) fn new(f: impl FnOnce(Outcome) + Send + 'static) -> Done {
        Done(Some(Box::new(f)))
    }

    pub(crate) fn call(mut self, result: Outcome) {
        if let Some(f) = self.0.take() {
            f(result)
        }
    }
}

impl Drop for Done {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f(Err(Status::ERR_LOST_CONNECTION))
        }
    }
}

/// How the handle wakes the vertex's loop.
pub(crate) type Wake = Box<dyn Fn() + Send + Sync>;

/// A host's call, on its way to the vertex's loop.
pub(crate) enum Call {
    Fence {
        key: FenceKey,
        vertices: Vec<Vertex>,
        data: Vec<u8>,
        done: Done,
    },
    Request {
        target: Vertex,
        payload: Vec<u8>,
        done: Done,
    },
    Respond {
        origin: Vertex,
        id: u64,
        answer: Outcome,
    },
    Send {
        dest: Dest,
        payload: Vec<u8>,
    },
    Shutdown,
}

impl Call {
    pub(crate) fn fence(
        key: FenceKey,
        vertices: Vec<Vertex>,
        data: Vec<u8>,
        done: impl FnOnce(Outcome) + Send + 'static,
    ) -> Call {
        Call::Fence {
            key,
            vertices,
            data,
            done: Done::new(done),
        }
    }

    pub(crate) fn request(
        target: Vertex,
        payload: Vec<u8>,
        done: impl FnOnce(Outcome) + Send + 'static,
    ) -> Call {
        Call::Request {
            target,
            payload,
            done: Done::new(done),
        }
    }
}
