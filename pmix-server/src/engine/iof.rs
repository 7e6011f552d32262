//! I/O forwarding to tools: `PMIx_IOF_pull`, `PMIx_IOF_deregister`, `PMIx_IOF_push`, and
//! [`Server::iof_deliver`](crate::Server::iof_deliver), by which the host hands the server a
//! process's output.
//!
//! A pull names processes (rank `WILDCARD` for a whole namespace) and channels; each chunk the
//! host delivers afterwards goes to every pull that matches its source and channel, formatted
//! as the pull asked (`IOF_TAG_OUTPUT`, `IOF_TIMESTAMP_OUTPUT`, `IOF_XML_OUTPUT`). Nothing is
//! cached: a tool sees the output delivered after its pull, none from before
//! (`IOF_CACHE_SIZE` is not supported). A pull ends with its deregistration, its tool's
//! finalize, or its connection. How much may wait for a tool that does not read is the
//! shell's business (it drops chunks beyond [`Limits::output_queue`](crate::Limits)).
//!
//! A push is handed to the host ([`Host::push_stdin`](crate::Host::push_stdin)), which
//! writes it to the targets' stdin; `IOF_COMPLETE` (or an empty push) closes it.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write as _;
use std::sync::Arc;

use pmix_types::IofChannel;
use pmix_types::{Info, Proc, Rank, Status, attr};
use pmix_wire::IofChunk;
use pmix_wire::{Reply, ReplyBody};

use super::host_ops::{HostCall, PendingHost};
use super::{ConnId, Engine, Output};

/// The pulls of one server, by the server's id for them.
#[derive(Default)]
pub(crate) struct Pulls {
    next: u64,
    pulls: BTreeMap<u64, Pull>,
}

struct Pull {
    conn: ConnId,
    /// The tool's own number for it, which its chunks carry.
    tag: u64,
    procs: Vec<Proc>,
    channels: IofChannel,
    format: Format,
}

/// How a pull wants its output dressed.
#[derive(Clone, Copy, Default, Debug, PartialEq)]
pub(crate) struct Format {
    /// `IOF_TAG_OUTPUT`: each line opens with `[nspace,rank]<channel>: `.
    tag: bool,
    /// `IOF_TIMESTAMP_OUTPUT`: each line opens with the seconds since the epoch it came at.
    timestamp: bool,
    /// `IOF_XML_OUTPUT`: each line is an XML element `<stdout rank="r">...</stdout>`.
    xml: bool,
}

impl Format {
    fn from_directives(directives: &[Info]) -> Format {
        let on = |key: &str| {
            directives
                .iter()
                .any(|i| i.key.as_str() == key && i.value.as_bool().unwrap_or(true))
        };
        Format {
            tag: on(attr::IOF_TAG_OUTPUT),
            timestamp: on(attr::IOF_TIMESTAMP_OUTPUT),
            xml: on(attr::IOF_XML_OUTPUT),
        }
    }

    /// `data` as this format wants it; the bytes themselves when it wants nothing.
    fn apply(self, source: &Proc, channel: IofChannel, data: &[u8], unix_secs: u64) -> Vec<u8> {
        if self == Format::default() {
            return data.to_vec();
        }
        let name = channel_name(channel);
        let mut out = Vec::with_capacity(data.len() + 64);
        for line in data.split_inclusive(|&b| b == b'\n') {
            let mut head = String::new();
            if self.timestamp {
                let _ = write!(head, "{unix_secs} ");
            }
            if self.tag {
                let _ = write!(head, "[{},{}]<{name}>: ", source.nspace, source.rank.0);
            }
            if self.xml {
                let _ = write!(head, "<{name} rank=\"{}\">", source.rank.0);
                out.extend_from_slice(head.as_bytes());
                let (body, nl) = match line.strip_suffix(b"\n") {
                    Some(b) => (b, true),
                    None => (line, false),
                };
                xml_escape(body, &mut out);
                out.extend_from_slice(format!("</{name}>").as_bytes());
                if nl {
                    out.push(b'\n');
                }
            } else {
                out.extend_from_slice(head.as_bytes());
                out.extend_from_slice(line);
            }
        }
        out
    }
}

fn channel_name(channel: IofChannel) -> &'static str {
    match channel {
        IofChannel::STDOUT => "stdout",
        IofChannel::STDERR => "stderr",
        IofChannel::STDDIAG => "stddiag",
        IofChannel::STDIN => "stdin",
        _ => "output",
    }
}

fn xml_escape(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        match b {
            b'<' => out.extend_from_slice(b"&lt;"),
            b'>' => out.extend_from_slice(b"&gt;"),
            b'&' => out.extend_from_slice(b"&amp;"),
            b'"' => out.extend_from_slice(b"&quot;"),
            _ => out.push(b),
        }
    }
}

/// Pulls one connection may hold at once: a tool needs one or two; each more copies every
/// chunk of output it covers once more into the server's queues.
pub(crate) const MAX_PULLS_PER_CONN: usize = 16;

/// Channels a pull may ask for: the outputs (stdin is pushed, not pulled).
const OUTPUTS: u16 = IofChannel::STDOUT.0 | IofChannel::STDERR.0 | IofChannel::STDDIAG.0;

impl Pulls {
    /// Tool connection `conn` pulls `channels` of `procs` (its number for the pull: `tag`):
    /// the pull's id, or why not.
    fn add(
        &mut self,
        conn: ConnId,
        procs: Vec<Proc>,
        channels: IofChannel,
        directives: &[Info],
        tag: u64,
    ) -> Result<u64, Status> {
        if procs.is_empty() {
            return Err(Status::ERR_BAD_PARAM);
        }
        // `ALL` (0xff) asks for every output; stdin alone cannot be pulled.
        let channels = IofChannel(channels.0 & OUTPUTS);
        if channels.0 == 0 {
            return Err(Status::ERR_NOT_SUPPORTED);
        }
        let held = self.pulls.values().filter(|p| p.conn == conn).count();
        if held >= MAX_PULLS_PER_CONN {
            tracing::warn!(conn, held, "refusing a pull: the tool holds too many");
            return Err(Status::ERR_OUT_OF_RESOURCE);
        }
        let pull_id = self.next;
        self.next += 1;
        self.pulls.insert(
            pull_id,
            Pull {
                conn,
                tag,
                procs,
                channels,
                format: Format::from_directives(directives),
            },
        );
        tracing::debug!(conn, pull_id, "a tool pulls output");
        Ok(pull_id)
    }

    /// `conn` ends its pull `pull_id` (only its own).
    fn remove(&mut self, conn: ConnId, pull_id: u64) -> Status {
        match self.pulls.get(&pull_id) {
            Some(p) if p.conn == conn => {
                self.pulls.remove(&pull_id);
                Status::SUCCESS
            }
            _ => Status::ERR_NOT_FOUND,
        }
    }

    /// Output of `source`: a chunk for every pull that wants it.
    fn deliver(
        &self,
        source: &Proc,
        channel: IofChannel,
        data: &[u8],
        unix_secs: u64,
        out: &mut VecDeque<Output>,
    ) {
        for pull in self.pulls.values() {
            let wanted = pull.channels.0 & channel.0 != 0
                && pull.procs.iter().any(|p| {
                    p.nspace == source.nspace && (p.rank == Rank::WILDCARD || p.rank == source.rank)
                });
            if !wanted {
                continue;
            }
            let chunk = IofChunk {
                tag: pull.tag,
                source: source.clone(),
                channel,
                info: Vec::new(),
                data: pull.format.apply(source, channel, data, unix_secs),
            };
            out.push_back(Output::Iof {
                conn: pull.conn,
                chunk: Arc::new(chunk),
            });
        }
    }

    /// A tool finalized or went away: its pulls end.
    fn forget(&mut self, conn: ConnId) {
        self.pulls.retain(|_, p| p.conn != conn);
    }
}

impl Engine {
    /// A tool's `PMIx_IOF_pull`.
    pub(super) fn iof_pull(
        &mut self,
        conn: ConnId,
        id: u32,
        procs: Vec<Proc>,
        channels: IofChannel,
        directives: &[Info],
        tag: u64,
    ) {
        match self.pulls.add(conn, procs, channels, directives, tag) {
            Ok(pull_id) => self.reply(
                conn,
                id,
                Reply {
                    status: Status::SUCCESS,
                    body: ReplyBody::IofPull { id: pull_id },
                },
            ),
            Err(status) => self.reply_status(conn, id, status),
        }
    }

    /// A tool's `PMIx_IOF_deregister`: only its own pulls.
    pub(super) fn iof_deregister(&mut self, conn: ConnId, id: u32, pull_id: u64) {
        let status = self.pulls.remove(conn, pull_id);
        self.reply_status(conn, id, status);
    }

    /// A tool's `PMIx_IOF_push`: for the host to write to the targets' stdin.
    pub(super) fn iof_push(
        &mut self,
        conn: ConnId,
        id: u32,
        source: Proc,
        targets: Vec<Proc>,
        directives: Vec<Info>,
        data: Option<Vec<u8>>,
    ) {
        self.host_call(
            PendingHost::Status { conn, id },
            HostCall::PushStdin {
                source,
                targets,
                directives,
                data,
            },
        );
    }

    /// Output of `source` the host delivered: to every pull that wants it.
    pub(crate) fn iof_deliver(
        &mut self,
        source: &Proc,
        channel: IofChannel,
        data: &[u8],
        unix_secs: u64,
    ) {
        self.pulls
            .deliver(source, channel, data, unix_secs, &mut self.out);
    }

    /// How many pulls are registered.
    pub(crate) fn pull_count(&self) -> usize {
        self.pulls.pulls.len()
    }

    /// A tool finalized or went away: its pulls end.
    pub(super) fn iof_forget(&mut self, conn: ConnId) {
        self.pulls.forget(conn);
    }
}

#[cfg(test)]
mod tests {
    use pmix_types::{Info, IofChannel, Nspace, Proc, Rank, attr};

    use super::Format;

    fn proc(rank: u32) -> Proc {
        Proc::new(
            Nspace::new("job").unwrap_or_else(|e| panic!("{e}")),
            Rank(rank),
        )
    }

    #[test]
    fn formats_dress_every_line() {
        let p = proc(3);
        let tag = Format {
            tag: true,
            ..Format::default()
        };
        assert_eq!(
            tag.apply(&p, IofChannel::STDOUT, b"a\nb\n", 0),
            b"[job,3]<stdout>: a\n[job,3]<stdout>: b\n"
        );
        let ts = Format {
            timestamp: true,
            ..Format::default()
        };
        assert_eq!(ts.apply(&p, IofChannel::STDERR, b"x", 17), b"17 x");
        let xml = Format {
            xml: true,
            ..Format::default()
        };
        assert_eq!(
            xml.apply(&p, IofChannel::STDERR, b"<&>\n", 0),
            b"<stderr rank=\"3\">&lt;&amp;&gt;</stderr>\n"
        );
        assert_eq!(
            Format::default().apply(&p, IofChannel::STDOUT, b"raw", 0),
            b"raw"
        );
    }

    #[test]
    fn directives_choose_the_format() {
        let f = Format::from_directives(&[
            Info::attr(attr::IOF_TAG_OUTPUT, true),
            Info::attr(attr::IOF_XML_OUTPUT, false),
        ]);
        assert!(f.tag && !f.xml && !f.timestamp);
    }
}
