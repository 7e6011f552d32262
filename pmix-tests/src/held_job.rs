//! A job under `pmixrun` (or PRRTE's `prterun`) held running while a test looks at it (a tool
//! attaches to it), with no sleep: each rank prints its rank and pid, then waits on a FIFO of its own, which the
//! test opens and closes to let it end.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use crossbeam_channel::{Receiver, unbounded};

use crate::{Output, Running};

/// A running `pmixrun -n N` whose ranks wait to be released.
pub struct HeldJob {
    /// The launcher's pid.
    pub pid: u32,
    /// Each rank's pid, by rank, as the rank itself printed it.
    pub rank_pids: Vec<u32>,
    dir: PathBuf,
    child: Option<Child>,
    /// pmixrun's stdout lines after those of the start.
    lines: Receiver<String>,
    rest: Receiver<String>,
}

/// The line each rank prints before it waits.
const HELD: &str = "held";

impl HeldJob {
    /// Starts `<launcher> <args> -n <n> sh -c ...` (`pmixrun`, `prterun`), each rank `sh`
    /// printing `held rank=R pid=P` and waiting; returns once every rank printed, failing
    /// the test if that has not happened by `end`.
    pub fn start(launcher: &Path, args: &[&str], n: u32, end: Instant) -> HeldJob {
        HeldJob::start_then(launcher, args, n, "> /dev/null", end)
    }

    /// As [`HeldJob::start`], but each rank, let go by [`HeldJob::feed`], writes what it was
    /// fed to its stdout, `bye rank=R` to its stderr and `fed rank=R` to its stdout, then
    /// waits again for [`HeldJob::release`] (after [`HeldJob::wait_fed`]): output made after a
    /// test (a tool) got ready for it, while the job still runs.
    pub fn start_echoing(launcher: &Path, args: &[&str], n: u32, end: Instant) -> HeldJob {
        let tail = "; echo \"bye rank=$PMIX_RANK\" >&2; echo \"fed rank=$PMIX_RANK\"; \
                    cat \"$0/rank.$PMIX_RANK\" > /dev/null";
        HeldJob::start_then(launcher, args, n, tail, end)
    }

    /// Starts the job; each rank's `cat` of its FIFO is followed by `after`.
    fn start_then(launcher: &Path, args: &[&str], n: u32, after: &str, end: Instant) -> HeldJob {
        let dir = std::env::temp_dir().join(format!(
            "pmixrs-held.{}.{}",
            std::process::id(),
            crate::held_job::unique()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        for r in 0..n {
            let fifo = dir.join(format!("rank.{r}"));
            nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))
                .unwrap_or_else(|e| panic!("mkfifo {}: {e}", fifo.display()));
        }
        let script =
            format!("echo \"{HELD} rank=$PMIX_RANK pid=$$\"; cat \"$0/rank.$PMIX_RANK\" {after}");
        let mut cmd = Command::new(launcher);
        cmd.args(args)
            .args(["-n", &n.to_string(), "sh", "-c", &script])
            .arg(&dir)
            .env_remove("PMIXRS_NAMESERVER")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", launcher.display()));
        let pid = child.id();
        let (lines, rest) = crate::stream_lines(child.stdout.take());
        let mut job = HeldJob {
            pid,
            rank_pids: vec![0; n as usize],
            dir,
            child: Some(child),
            lines: lines.clone(),
            rest,
        };
        let mut seen = 0;
        while seen < n {
            let Ok(line) = lines.recv_deadline(end) else {
                let out = job.finish_now();
                panic!("the {n} ranks did not all start in time (seen {seen}): {out:#?}");
            };
            let fields = crate::keyed_lines(&format!("{line}\n"), HELD);
            let Some(f) = fields.first() else { continue };
            let rank: usize = f
                .get("rank")
                .and_then(|r| r.parse().ok())
                .unwrap_or(usize::MAX);
            let rpid: u32 = f.get("pid").and_then(|p| p.parse().ok()).unwrap_or(0);
            if let Some(slot) = job.rank_pids.get_mut(rank) {
                *slot = rpid;
                seen += 1;
            }
        }
        job
    }

    /// pmixrun's private rendezvous directory (`$TMPDIR/pmixrs.<pid>.<random>`): its socket
    /// and the files by which tools find it.
    pub fn rendezvous_dir(&self) -> PathBuf {
        let prefix = format!("pmixrs.{}.", self.pid);
        std::fs::read_dir(std::env::temp_dir())
            .expect("reading the temporary directory")
            .flatten()
            .find(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .map(|e| e.path())
            .unwrap_or_else(|| panic!("pmixrun {} has no rendezvous directory", self.pid))
    }

    /// Lets every rank end and waits for the launcher until `end`.
    pub fn release(mut self, end: Instant) -> Output {
        self.feed(|_| String::new(), end);
        self.wait(end)
    }

    /// Waits until every rank of a [`HeldJob::start_echoing`] job said `fed` (and so waits
    /// again), failing the test past `end`.
    pub fn wait_fed(&mut self, end: Instant) {
        let mut seen = 0;
        while seen < self.rank_pids.len() {
            match self.lines.recv_deadline(end) {
                Ok(l) if l.starts_with("fed rank=") => seen += 1,
                Ok(_) => {}
                Err(_) => {
                    let out = self.finish_now();
                    panic!("the ranks did not all echo what they were fed in time: {out:#?}");
                }
            }
        }
    }

    /// Opens each rank's FIFO and writes `text(rank)` into it, which lets the rank go on from
    /// its wait; fails the test if a rank has not opened its FIFO by `end`.
    pub fn feed(&mut self, text: impl Fn(usize) -> String, end: Instant) {
        use std::io::Write;
        let n = self.rank_pids.len();
        let fifos: Vec<PathBuf> = (0..n).map(|r| self.dir.join(format!("rank.{r}"))).collect();
        let texts: Vec<String> = (0..n).map(text).collect();
        let (done_tx, done) = unbounded();
        let opening = fifos.clone();
        std::thread::spawn(move || {
            // Blocks until the rank has the FIFO open; closing it ends the rank's `cat`.
            for (f, t) in opening.iter().zip(&texts) {
                if let Ok(mut w) = std::fs::OpenOptions::new().write(true).open(f) {
                    let _ = w.write_all(t.as_bytes());
                }
            }
            let _ = done_tx.send(());
        });
        if done.recv_deadline(end).is_err() {
            // A rank gone before it opened its FIFO: open the read ends ourselves so that the
            // thread above is let go, then fail.
            for f in &fifos {
                use std::os::unix::fs::OpenOptionsExt;
                let _ = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(nix::libc::O_NONBLOCK)
                    .open(f);
            }
            let out = self.finish_now();
            panic!("the held ranks could not be let go: {out:#?}");
        }
    }

    /// Waits until `end` for the launcher to end by itself (its ranks ended otherwise than by
    /// a release: killed, say).
    pub fn wait_for_end(mut self, end: Instant) -> Output {
        self.wait(end)
    }

    fn wait(&mut self, end: Instant) -> Output {
        let child = self.child.take().expect("pmixrun is waited for once");
        let (_, rest) = unbounded();
        let rest = std::mem::replace(&mut self.rest, rest);
        Running::with_stdout(child, rest).finish(end, "the held job")
    }

    /// Ends the launcher and its job now (SIGTERM, passed on to the ranks).
    fn finish_now(&mut self) -> Output {
        if let Some(c) = &self.child {
            let pid = nix::unistd::Pid::from_raw(i32::try_from(c.id()).unwrap_or(0));
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        }
        self.wait(Instant::now() + std::time::Duration::from_secs(10))
    }
}

impl Drop for HeldJob {
    fn drop(&mut self) {
        if self.child.is_some() {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.finish_now()));
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A number of this test process's own, for directory names.
fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}
