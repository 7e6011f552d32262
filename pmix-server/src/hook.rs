//! [`LoopHook`]: a host's own I/O run in the server's event loop, on the loop's thread.
//!
//! A host whose callbacks go out on its own network (a daemon's links to other daemons) would
//! otherwise run a second event loop on a second thread, and every callback and every answer
//! would cross between the two threads: a wake-up and a context switch each way. With a hook,
//! the host's sockets are polled by the server's own `mio::Poll`: a callback writes to the
//! host's socket directly, and the answer read from it completes the callback on the same
//! thread, in the same turn of the loop.

use std::io;
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

/// The first token of a hook's range: far above the connections' (slots below 2^32) and
/// below the listeners' and the waker's (counted down from `usize::MAX`).
const FIRST_TOKEN: usize = 1 << 62;

/// How many tokens a hook gets.
const TOKENS: usize = 1 << 60;

/// The tokens of the loop that are its hook's.
pub(crate) fn hook_tokens() -> Range<usize> {
    FIRST_TOKEN..FIRST_TOKEN + TOKENS
}

/// Wakes the server's event loop from any thread: the loop then calls [`LoopHook::turn`]
/// (after settling what else there is). For a hook's own channel from other threads.
#[derive(Clone)]
pub struct LoopWaker(pub(crate) Arc<mio::Waker>);

impl LoopWaker {
    /// Wakes the loop (a failure is logged: the loop is gone or the system is out of
    /// resources).
    pub fn wake(&self) {
        if let Err(e) = self.0.wake() {
            tracing::error!("cannot wake the server's event loop: {e}");
        }
    }
}

impl std::fmt::Debug for LoopWaker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopWaker").finish_non_exhaustive()
    }
}

/// What the server lends its host's [`LoopHook`] when the loop starts.
#[derive(Debug)]
#[non_exhaustive]
pub struct LoopContext {
    /// The loop's registry (a clone of it): register the hook's sources here, under tokens
    /// from [`LoopContext::tokens`] only.
    pub registry: mio::Registry,
    /// The hook's tokens (a range of 2^60): the loop hands the events of these, and only
    /// these, to [`LoopHook::event`].
    pub tokens: Range<usize>,
    /// Wakes the loop from another thread.
    pub waker: LoopWaker,
}

/// A host's own I/O, polled by the server's event loop on its thread (see
/// [`crate::Host::loop_hook`]).
///
/// The loop calls [`LoopHook::start`] once before it polls, [`LoopHook::event`] for every
/// event on the hook's tokens, [`LoopHook::turn`] at the end of every turn (after every poll,
/// once the server settled what the poll brought), and [`LoopHook::stop`] when the server
/// shuts down. The host's callbacks run on the same thread, between these calls: a callback
/// may act on the hook's state directly (queue a message on its socket), and a
/// [`crate::Completion`] completed from `event` or `turn` is taken in the same turn, without
/// waking the loop again. None of these may block: the server's clients wait meanwhile.
///
/// The hook's sources are registered with the `mio` the server uses: this crate's
/// [`crate::mio`] re-export.
pub trait LoopHook {
    /// Registers the hook's sources (with `cx.registry`, under `cx.tokens`). Called on the
    /// thread calling [`crate::Server::init`], before the loop starts; an error fails the
    /// init.
    fn start(&mut self, cx: LoopContext) -> io::Result<()>;

    /// An event on one of the hook's tokens.
    fn event(&mut self, event: &mio::event::Event);

    /// The end of a turn of the loop: the hook writes what it queued during the turn, looks
    /// at its timers, and says when the loop must turn again at the latest (`None`: only for
    /// an event or a wake-up).
    fn turn(&mut self) -> Option<Instant>;

    /// The server is shutting down: the last call the hook gets.
    fn stop(&mut self);
}
