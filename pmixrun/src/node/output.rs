//! Forwarding the processes' output: whole lines, never interleaved mid-line.
//!
//! One reader thread per pipe cuts what it reads into lines and sends them to one writer
//! thread, the only one writing the processes' output, so two processes' lines can follow each
//! other in any order but never mix. A line longer than [`MAX_LINE`] is passed on in pieces
//! (output without newlines must not grow a buffer without bound).

use std::io::{BufRead, BufReader, Read, Write};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender, TryRecvError};
use pmix_server::types::{IofChannel, Nspace, Proc, Rank};

use super::hints::Hints;

/// The longest piece of a line held before it is passed on.
pub(crate) const MAX_LINE: u64 = 64 * 1024;

/// Lines written per lock of stdout/stderr, so pmixrun's own messages are not held back long.
const BATCH: usize = 256;

/// Stack of the reader threads: they hold nothing big on it, and there are two per process.
pub(crate) const SMALL_STACK: usize = 128 * 1024;

/// How long output still in the pipes may take to arrive once every process has ended (a
/// process's own children may hold the pipes open forever).
pub(crate) const OUTPUT_DRAIN: Duration = Duration::from_secs(2);

/// Which of a process's outputs a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stream {
    /// Its stdout, forwarded to pmixrun's stdout.
    Stdout,
    /// Its stderr, forwarded to pmixrun's stderr.
    Stderr,
}

/// A line (with its newline, unless it is the last piece of output or a piece of an overlong
/// line) one process wrote.
#[derive(Debug)]
pub(crate) struct Line {
    /// Which job: 0 for the first, `n` for the `n`-th spawned one (namespace `<first>.<n>`).
    pub(crate) job: u32,
    pub(crate) rank: u32,
    pub(crate) stream: Stream,
    pub(crate) bytes: Vec<u8>,
    /// Multi-node, at the root: the daemon it came from (`None`: a process of this node).
    pub(crate) vertex: Option<pmix_tree::Vertex>,
}

/// Multi-node, at the root: where lines come from, and how their daemon learns they were
/// written (it sends no more than a window ahead: back-pressure up to the processes).
pub(crate) struct Remote {
    /// The node of each vertex, for `--tag-output`.
    pub(crate) nodes: Vec<String>,
    /// Called with a daemon's vertex and the bytes of its lines just written.
    pub(crate) ack: Box<dyn FnMut(pmix_tree::Vertex, u64) + Send>,
}

/// Starts a thread reading `pipe` line by line until end of file.
pub(crate) fn start_reader(
    job: u32,
    rank: u32,
    stream: Stream,
    pipe: impl Read + Send + 'static,
    lines: Sender<Line>,
) -> std::io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("out-{job}.{rank}"))
        .stack_size(SMALL_STACK)
        .spawn(move || {
            let mut reader = BufReader::with_capacity(16 * 1024, pipe);
            loop {
                let mut bytes = Vec::new();
                match (&mut reader).take(MAX_LINE).read_until(b'\n', &mut bytes) {
                    Ok(0) => break,
                    Ok(_) => {
                        let line = Line {
                            job,
                            rank,
                            stream,
                            bytes,
                            vertex: None,
                        };
                        if lines.send(line).is_err() {
                            break;
                        }
                    }
                    Err(e) => {
                        tracing::debug!(rank, ?stream, "reading output: {e}");
                        break;
                    }
                }
            }
        })
}

/// Where the writer also shows each line, besides pmixrun's stdout and stderr.
pub(crate) type Tap = Box<dyn FnMut(&Line) + Send>;

/// A [`Tap`] handing each line to `server` for the tools that pulled it
/// ([`Server::iof_deliver`](pmix_server::Server::iof_deliver); it costs nothing while no tool
/// pulls). `first` is the first job's namespace; the `n`-th spawned job's is `<first>.<n>`.
pub(crate) fn to_tools(server: std::sync::Arc<pmix_server::Server>, first: Nspace) -> Tap {
    Box::new(move |line: &Line| {
        let nspace = match line.job {
            0 => first.clone(),
            n => match Nspace::new(format!("{first}.{n}")) {
                Ok(ns) => ns,
                Err(_) => return,
            },
        };
        let channel = match line.stream {
            Stream::Stdout => IofChannel::STDOUT,
            Stream::Stderr => IofChannel::STDERR,
        };
        let source = Proc::new(nspace, Rank(line.rank));
        let _ = server.iof_deliver(&source, channel, &line.bytes);
    })
}

/// Starts the writer. It ends when every reader has ended (every sender is dropped), and then
/// sends on the returned channel, so that its end can be awaited with a deadline. Each line
/// also goes to `tap`, if given.
pub(crate) fn start_writer(
    tag: bool,
    lines: Receiver<Line>,
    mut remote: Option<Remote>,
    mut tap: Option<Tap>,
) -> std::io::Result<Receiver<()>> {
    let (done_tx, done_rx) = crossbeam_channel::bounded(1);
    std::thread::Builder::new()
        .name("output".into())
        .spawn(move || {
            let mut hints = Hints::default();
            while let Ok(first) = lines.recv() {
                let mut out = std::io::stdout().lock();
                let mut err = std::io::stderr().lock();
                let mut next = Some(first);
                let mut n = 0;
                let mut written: Vec<(pmix_tree::Vertex, u64)> = Vec::new();
                while let Some(line) = next.take() {
                    let w: &mut dyn Write = match line.stream {
                        Stream::Stdout => &mut out,
                        Stream::Stderr => &mut err,
                    };
                    let node = match (&remote, line.vertex) {
                        (Some(r), Some(v)) => r.nodes.get(v as usize).map(String::as_str),
                        _ => None,
                    };
                    // A closed stdout must not stop the draining, or the processes would block
                    // on full pipes; their output then has nowhere to go.
                    let _ = write_line(w, tag, node, &line);
                    hints.look(line.rank, line.stream == Stream::Stderr, &line.bytes, w);
                    if let Some(t) = &mut tap {
                        t(&line);
                    }
                    if let Some(v) = line.vertex {
                        match written.iter_mut().find(|(w, _)| *w == v) {
                            Some((_, b)) => *b += line.bytes.len() as u64,
                            None => written.push((v, line.bytes.len() as u64)),
                        }
                    }
                    n += 1;
                    if n < BATCH {
                        match lines.try_recv() {
                            Ok(l) => next = Some(l),
                            Err(TryRecvError::Empty | TryRecvError::Disconnected) => {}
                        }
                    }
                }
                let _ = out.flush();
                let _ = err.flush();
                drop((out, err));
                if let Some(r) = &mut remote {
                    for (v, bytes) in written {
                        (r.ack)(v, bytes);
                    }
                }
            }
            let _ = done_tx.send(());
        })?;
    Ok(done_rx)
}

/// Writes one line, tagged (with `--tag-output`) `[rank] ` for the first job's processes and
/// `[n:rank] ` for those of the `n`-th spawned job, with `@node` after the rank in a
/// multi-node run (`[rank@node] `).
fn write_line(
    w: &mut dyn Write,
    tag: bool,
    node: Option<&str>,
    line: &Line,
) -> std::io::Result<()> {
    let at = node.map(|n| format!("@{n}")).unwrap_or_default();
    match (tag, line.job) {
        (false, _) => {}
        (true, 0) => write!(w, "[{}{at}] ", line.rank)?,
        (true, job) => write!(w, "[{job}:{}{at}] ", line.rank)?,
    }
    w.write_all(&line.bytes)?;
    // Output that does not end in a newline would otherwise run into the next process's line.
    if line.bytes.last() != Some(&b'\n') && line.bytes.len() as u64 != MAX_LINE {
        w.write_all(b"\n")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(input: &[u8]) -> Vec<Vec<u8>> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let h = start_reader(
            0,
            0,
            Stream::Stdout,
            std::io::Cursor::new(input.to_vec()),
            tx,
        );
        let _ = h.map(JoinHandle::join);
        rx.iter().map(|l| l.bytes).collect()
    }

    #[test]
    fn pipes_are_cut_into_whole_lines() {
        assert_eq!(
            lines_of(b"a\nbc\n\nlast"),
            [&b"a\n"[..], b"bc\n", b"\n", b"last"]
        );
        assert!(lines_of(b"").is_empty());
    }

    #[test]
    fn overlong_lines_come_in_bounded_pieces() {
        let long = vec![b'x'; 150 * 1024];
        let pieces = lines_of(&long);
        assert_eq!(pieces.len(), 3);
        assert!(pieces.iter().all(|p| p.len() as u64 <= MAX_LINE));
        assert_eq!(pieces.concat(), long);
    }

    #[test]
    fn tags_and_missing_newlines() {
        let mut buf = Vec::new();
        let line = |job, b: &[u8]| Line {
            job,
            rank: 7,
            stream: Stream::Stdout,
            bytes: b.to_vec(),
            vertex: None,
        };
        for l in [line(0, b"one\n"), line(0, b"two"), line(2, b"spawned\n")] {
            write_line(&mut buf, true, None, &l).unwrap_or_else(|e| panic!("{e}"));
        }
        write_line(&mut buf, false, None, &line(1, b"three")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(buf, b"[7] one\n[7] two\n[2:7] spawned\nthree\n");
    }
}
