//! A scripted stand-in for the server: a thread with a Unix listener in a fresh temporary
//! directory, speaking pmix-wire frames. Shared by the tests and the benchmark.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code, unreachable_pub)]

use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{Receiver, Sender, unbounded};
use pmix_client::{Info, Key, Nspace, Proc, Rank, Status, Value};
use pmix_wire::{
    ClientMsg, Decoded, Event, FrameDecoder, Hello, JobData, PROTOCOL_VERSION, ProcRealm, Realm,
    Reply, ReplyBody, Request, ServerMsg, Welcome, decode_body, decode_hello, encode_frame,
};

/// How long any test waits for anything.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// The secret every mock expects, and its hex form for the environment.
pub const SECRET: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xff];
pub const SECRET_HEX: &str = "000102030405060708090a0b0c0d0eff";

/// What the mock does with one request.
pub enum Action {
    Reply(Reply),
    /// Never answer.
    Ignore,
    /// Close the connection without answering.
    Close,
    /// Send bytes that are not a valid message.
    Garbage,
    /// Send an event, then this reply.
    EventThen(Event, Reply),
    /// Send this reply, its encoded body altered by the function first.
    Edited(Reply, fn(&mut Vec<u8>)),
}

/// How the mock answers the hello.
pub enum Greeting {
    Accept(JobData),
    /// Accepted, the job image said to come as a memory file with the welcome: with this
    /// descriptor passed along (`SCM_RIGHTS`), or none.
    AcceptShared(JobData, Option<std::os::fd::OwnedFd>),
    AcceptVersion(u16, JobData),
    Refuse(Status, u16, String),
}

pub type Script = Box<dyn FnMut(&Request) -> Action + Send>;

/// The usual answers: success for commit, fence (no data), abort and finalize; not found for
/// get.
pub fn default_action(req: &Request) -> Action {
    match req {
        Request::Get { .. } => Action::Reply(Reply::status(Status::ERR_NOT_FOUND)),
        Request::Fence { .. } => Action::Reply(Reply {
            status: Status::SUCCESS,
            body: ReplyBody::Fence { data: vec![] },
        }),
        _ => Action::Reply(Reply::status(Status::SUCCESS)),
    }
}

pub struct Mock {
    dir: PathBuf,
    pub sock: PathBuf,
    pub nspace: String,
    pub rank: u32,
    /// Every request the client sent, in order.
    pub requests: Receiver<Request>,
    /// The hello the client sent.
    pub hellos: Receiver<Hello>,
    count: Arc<AtomicUsize>,
    /// The accepted connection, for [`Mock::push`] and [`Mock::hang_up`]; the serving
    /// thread writes through it too, so that frames never interleave.
    conn: Writer,
}

/// The mock's end of the connection, shared by the serving thread and the test.
type Writer = Arc<Mutex<Option<UnixStream>>>;

static SEQ: AtomicUsize = AtomicUsize::new(0);

fn unique_dir() -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!(
        "pmixc-{}-{}-{nanos}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

impl Mock {
    /// A mock that accepts one client with `job` and answers with `script`.
    pub fn start(job: JobData, rank: u32, script: Script) -> Mock {
        Mock::start_with(Greeting::Accept(job), "job-A", rank, script)
    }

    pub fn start_with(greeting: Greeting, nspace: &str, rank: u32, mut script: Script) -> Mock {
        let dir = unique_dir();
        let sock = dir.join("s");
        let listener = UnixListener::bind(&sock).unwrap();
        let (req_tx, requests) = unbounded();
        let (hello_tx, hellos) = unbounded();
        let count = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&count);
        let conn: Writer = Arc::new(Mutex::new(None));
        let writer = Arc::clone(&conn);
        thread::spawn(move || {
            let Ok((stream, _)) = listener.accept() else {
                return;
            };
            *writer.lock().unwrap() = stream.try_clone().ok();
            serve(
                stream,
                &writer,
                greeting,
                &mut script,
                &req_tx,
                &hello_tx,
                &counter,
            );
            // Ending the conversation closes the connection: drop the last handle.
            drop(writer.lock().unwrap().take());
        });
        Mock {
            dir,
            sock,
            nspace: nspace.to_owned(),
            rank,
            requests,
            hellos,
            count,
            conn,
        }
    }

    /// Sends `msg` now, whatever the client is doing (an event with no request
    /// outstanding). Call it once the client is initialized.
    pub fn push(&self, msg: &ServerMsg) {
        let mut conn = self.conn.lock().unwrap();
        let stream = conn
            .as_mut()
            .expect("no client connected to the mock, or it hung up");
        assert!(send(stream, msg), "the client is gone");
    }

    /// Closes the connection as a dying server would.
    pub fn hang_up(&self) {
        if let Some(s) = self.conn.lock().unwrap().as_ref() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// The environment `setup_fork` would have made for the client.
    pub fn env(&self) -> impl Fn(&str) -> Option<String> + use<> {
        let uri = format!("unix:{}", self.sock.display());
        let ns = self.nspace.clone();
        let rank = self.rank.to_string();
        move |k| match k {
            "PMIXRS_SERVER_URI" => Some(uri.clone()),
            "PMIX_NAMESPACE" => Some(ns.clone()),
            "PMIX_RANK" => Some(rank.clone()),
            "PMIXRS_SECRET" => Some(SECRET_HEX.to_owned()),
            "PMIXRS_PROTOCOL" => Some(PROTOCOL_VERSION.to_string()),
            _ => None,
        }
    }

    /// Requests received so far.
    pub fn count(&self) -> usize {
        self.count.load(Ordering::SeqCst)
    }

    /// The next request, or a panic at the deadline.
    pub fn next_request(&self) -> Request {
        self.requests
            .recv_timeout(DEADLINE)
            .expect("the client sent no request before the deadline")
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn send(stream: &mut UnixStream, msg: &ServerMsg) -> bool {
    let mut out = Vec::new();
    encode_frame(msg, &mut out).unwrap();
    stream.write_all(&out).is_ok()
}

/// Writes `bytes`, passing `fd` with the first of them.
fn send_with_fd(stream: &UnixStream, bytes: &[u8], fd: Option<&std::os::fd::OwnedFd>) -> bool {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    use std::os::fd::AsRawFd;
    let fds: Vec<i32> = fd.iter().map(|f| f.as_raw_fd()).collect();
    let cmsg: Vec<ControlMessage<'_>> = if fds.is_empty() {
        vec![]
    } else {
        vec![ControlMessage::ScmRights(&fds)]
    };
    let mut sent = 0;
    while sent < bytes.len() {
        let iov = [std::io::IoSlice::new(&bytes[sent..])];
        let cmsg: &[ControlMessage<'_>] = if sent == 0 { &cmsg } else { &[] };
        match sendmsg::<()>(stream.as_raw_fd(), &iov, cmsg, MsgFlags::MSG_NOSIGNAL, None) {
            Ok(n) if n > 0 => sent += n,
            _ => return false,
        }
    }
    true
}

fn send_welcome(stream: &mut UnixStream, msg: &Welcome) -> bool {
    let mut out = Vec::new();
    encode_frame(msg, &mut out).unwrap();
    stream.write_all(&out).is_ok()
}

fn serve(
    mut stream: UnixStream,
    writer: &Writer,
    greeting: Greeting,
    script: &mut Script,
    req_tx: &Sender<Request>,
    hello_tx: &Sender<Hello>,
    count: &AtomicUsize,
) {
    let dec = FrameDecoder::default();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 65536];
    let mut greeted = false;
    let mut greeting = Some(greeting);
    loop {
        while let Ok(Decoded::Frame { body, consumed }) = dec.decode(&buf) {
            let body = body.to_vec();
            buf.drain(..consumed);
            if !greeted {
                greeted = true;
                let Ok(hello) = decode_hello(&body) else {
                    return;
                };
                let _ = hello_tx.send(hello);
                let welcome = match greeting.take().unwrap() {
                    Greeting::Accept(job) => Welcome::Accepted {
                        version: PROTOCOL_VERSION,
                        job: inline(&job),
                    },
                    Greeting::AcceptVersion(v, job) => Welcome::Accepted {
                        version: v,
                        job: inline(&job),
                    },
                    Greeting::AcceptShared(job, fd) => {
                        let len = pmix_wire::JobImage::from_job_data(&job)
                            .unwrap()
                            .bytes()
                            .len() as u64;
                        let welcome = Welcome::Accepted {
                            version: PROTOCOL_VERSION,
                            job: pmix_wire::WelcomeJob::Shared { len },
                        };
                        let mut out = Vec::new();
                        encode_frame(&welcome, &mut out).unwrap();
                        if !send_with_fd(&locked(writer), &out, fd.as_ref()) {
                            return;
                        }
                        continue;
                    }
                    Greeting::Refuse(status, version, reason) => {
                        send_welcome(
                            &mut locked(writer),
                            &Welcome::Refused {
                                status,
                                version,
                                reason,
                            },
                        );
                        return;
                    }
                };
                if !send_welcome(&mut locked(writer), &welcome) {
                    return;
                }
                continue;
            }
            let Ok(ClientMsg { id, req }) = decode_body::<ClientMsg>(&body) else {
                return;
            };
            count.fetch_add(1, Ordering::SeqCst);
            let finalize = matches!(req, Request::Finalize { .. });
            let action = script(&req);
            let _ = req_tx.send(req);
            let mut out = locked(writer);
            match action {
                Action::Reply(reply) => {
                    if !send(&mut out, &ServerMsg::Reply { id, reply }) {
                        return;
                    }
                }
                Action::Ignore => {}
                Action::Close => return,
                Action::Garbage => {
                    let _ = out.write_all(&[0, 0, 0, 3, 0xc1, 0xc1, 0xc1]);
                }
                Action::EventThen(ev, reply) => {
                    send(&mut out, &ServerMsg::Event(ev));
                    send(&mut out, &ServerMsg::Reply { id, reply });
                }
                Action::Edited(reply, edit) => {
                    let mut frame = Vec::new();
                    encode_frame(&ServerMsg::Reply { id, reply }, &mut frame).unwrap();
                    let mut body = frame.split_off(4);
                    edit(&mut body);
                    let len = u32::try_from(body.len()).unwrap();
                    let _ = out.write_all(&len.to_be_bytes());
                    let _ = out.write_all(&body);
                }
            }
            drop(out);
            if finalize {
                return;
            }
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// The serving thread's handle on the connection, under the lock that keeps its frames
/// whole when the test pushes some too.
struct Locked<'a>(std::sync::MutexGuard<'a, Option<UnixStream>>);

fn locked(writer: &Writer) -> Locked<'_> {
    Locked(writer.lock().unwrap())
}

impl std::ops::Deref for Locked<'_> {
    type Target = UnixStream;
    fn deref(&self) -> &UnixStream {
        self.0.as_ref().expect("set before serving")
    }
}

impl std::ops::DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut UnixStream {
        self.0.as_mut().expect("set before serving")
    }
}

pub fn key(s: &str) -> Key {
    Key::new(s).unwrap()
}

pub fn ns(s: &str) -> Nspace {
    Nspace::new(s).unwrap()
}

pub fn info(k: &str, v: impl Into<Value>) -> Info {
    Info::new(key(k), v)
}

/// A job of four ranks, two apps (ranks 0-1 app 0, 2-3 app 1) on two nodes (even ranks on
/// node 0 "n0", odd on node 1 "n1"); the key `pmix.test.level` is registered at every level
/// with the level's name as value (at the proc level only for rank 0), to check precedence.
pub fn job(nspace: &str) -> JobData {
    let lvl = "pmix.test.level";
    JobData {
        nspace: ns(nspace),
        session: vec![
            info("pmix.univ.size", 8u32),
            info(lvl, "session"),
            info("pmix.test.ssnonly", "ssn"),
        ],
        job: vec![
            info("pmix.job.size", 4u32),
            info(lvl, "job"),
            info("user.jobkey", "registered by host"),
        ],
        apps: (0..2)
            .map(|a| Realm {
                id: a,
                info: vec![info("pmix.app.size", 2u32), info(lvl, format!("app{a}"))],
            })
            .collect(),
        nodes: (0..2)
            .map(|n| Realm {
                id: n,
                info: vec![
                    info("pmix.hname", format!("n{n}")),
                    info("pmix.local.size", 2u32),
                    info(lvl, format!("node{n}")),
                    info("pmix.test.nodejob", format!("node{n}")),
                ],
            })
            .collect(),
        procs: (0..4u32)
            .map(|r| {
                let mut v = vec![
                    info("pmix.appnum", r / 2),
                    info("pmix.nodeid", r % 2),
                    info("pmix.local.rank", r / 2),
                ];
                if r == 0 {
                    v.push(info(lvl, "proc"));
                }
                ProcRealm {
                    rank: Rank(r),
                    info: v,
                }
            })
            .collect(),
    }
}

pub fn peer(nspace: &str, rank: u32) -> Proc {
    Proc::new(ns(nspace), rank)
}

/// Runs `f` on its own thread and fails the test if it does not finish by the deadline, so a
/// hang is a failure with a message rather than a stuck test run.
pub fn with_deadline<F: FnOnce() + Send + 'static>(f: F) {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let h = thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(()) => h.join().unwrap(),
        Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
            // The body panicked: re-raise its panic here.
            if let Err(p) = h.join() {
                std::panic::resume_unwind(p);
            }
        }
        Err(crossbeam_channel::RecvTimeoutError::Timeout) => {
            panic!("test did not finish within {DEADLINE:?}")
        }
    }
}

/// A welcome's job data, inline, as an image of `job`.
fn inline(job: &pmix_wire::JobData) -> pmix_wire::WelcomeJob {
    pmix_wire::WelcomeJob::Inline(pmix_wire::JobImage::from_job_data(job).unwrap())
}

/// The image of `job`, as a reply carries another namespace's job data.
pub fn image(job: &JobData) -> pmix_wire::JobImage {
    pmix_wire::JobImage::from_job_data(job).unwrap()
}
