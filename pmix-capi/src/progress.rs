//! The progress thread: where completion callbacks of the non-blocking functions run, as
//! libpmix runs them on its progress thread, never on the caller's thread and never inside
//! the client's reader (where a callback calling a blocking function would deadlock).

use std::sync::OnceLock;

use crossbeam_channel::Sender;

type Job = Box<dyn FnOnce() + Send>;

/// Runs `job` on the progress thread, in the order jobs are given. A panicking job is
/// caught; the thread goes on.
pub(crate) fn run_on_progress_thread(job: impl FnOnce() + Send + 'static) {
    static QUEUE: OnceLock<Sender<Job>> = OnceLock::new();
    let queue = QUEUE.get_or_init(|| {
        let (tx, rx) = crossbeam_channel::unbounded::<Job>();
        let spawned = std::thread::Builder::new()
            .name("pmix-progress".into())
            .spawn(move || {
                for job in rx {
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                }
            });
        if spawned.is_err() {
            // No thread: jobs are dropped with the receiver; there is nobody to run them.
            eprintln!("pmix-capi: no progress thread; non-blocking calls will not complete");
        }
        tx
    });
    let _ = queue.send(Box::new(job));
}
