//! A process whose stdout a test reads line by line as it comes: to wait for a program to
//! say it is ready before the test goes on, with a deadline.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use crossbeam_channel::Receiver;

use crate::{Output, Running};

/// A process whose stdout is read line by line as it comes (and kept whole for the end).
pub struct Streamed {
    /// The process.
    pub child: Child,
    lines: Receiver<String>,
    rest: Receiver<String>,
}

impl Streamed {
    /// Starts `cmd` (its stdout piped), `what` naming it in failures.
    pub fn start(mut cmd: Command, what: &str) -> Streamed {
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
        let (lines, rest) = crate::stream_lines(child.stdout.take());
        Streamed { child, lines, rest }
    }

    /// Waits until `n` lines starting with `prefix` came, failing the test past `end`.
    pub fn wait_for(self, prefix: &str, n: usize, end: Instant, what: &str) -> Streamed {
        let mut seen = 0;
        while seen < n {
            match self.lines.recv_deadline(end) {
                Ok(l) if l.starts_with(prefix) => seen += 1,
                Ok(_) => {}
                Err(_) => {
                    let out = self.finish(Instant::now() + Duration::from_secs(10), what);
                    panic!("{what}: {seen} of {n} '{prefix}' lines came in time: {out:#?}");
                }
            }
        }
        self
    }

    /// The process's stdin (piped by the caller).
    pub fn stdin(&mut self) -> &mut std::process::ChildStdin {
        self.child.stdin.as_mut().expect("stdin piped")
    }

    /// Waits for the process's end, failing the test past `end`.
    pub fn finish(self, end: Instant, what: &str) -> Output {
        Running::with_stdout(self.child, self.rest).finish(end, what)
    }
}
