//! A PMI-2 client written straight on the wire, for what Slurm's libpmi2 never sends: run
//! under `pmixrun --pmi pmi2` by `tests/pmi2.rs`, with its standard input and output
//! redirected to the `PMI_FD` socket (`sh -c 'exec ... <&$PMI_FD >&$PMI_FD'`: no unsafe code
//! to adopt a descriptor), it reads `PMI_RANK` and plays the scenario of its first argument.
//!
//! - `thrid`: fullinit and requests carrying `thrid`, whose replies must echo it; a value
//!   holding `;;` and `=` put and read back; finalize.
//! - `wake` (2 ranks): rank 1 puts a key and, in the same write, waits for node attribute
//!   `late`; rank 0 gets rank 1's key (waiting until rank 1 put it, so rank 1's wait is
//!   registered by then: the server takes a connection's next frame as soon as the previous
//!   one is answered, before it reads other connections again), then puts `late`, which must
//!   wake rank 1's wait with its value. Both then fence, so that nothing rank 0 does after
//!   the put (its finalize) can be what ends the wait.
//! - `garbage`: after fullinit, a frame whose length field is not a number.
//! - `oversized`: after fullinit, a length field announcing more than 64 KiB.
//!
//! It prints `wire <scenario> rank=<r> <outcome>` lines on stderr and exits 0 when what it saw is
//! what the protocol says; on anything else it prints `FAILED: <what>` and exits 1. The frame
//! codec here is its own (not pmix-server's), so the two check each other.

use std::io::{Read, Stdin, Stdout, Write};
use std::process::ExitCode;

/// The connection: standard input and output.
struct UnixStream {
    r: Stdin,
    w: Stdout,
}

impl Read for UnixStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.r.read(buf)
    }
}

impl Write for UnixStream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.w.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.w.flush()
    }
}

type Res<T> = Result<T, String>;

fn encode(pairs: &[(&str, &str)]) -> Vec<u8> {
    let mut body = String::new();
    for (k, v) in pairs {
        body.push_str(k);
        body.push('=');
        body.push_str(&v.replace(';', ";;"));
        body.push(';');
    }
    let mut f = format!("{:<6}", body.len()).into_bytes();
    f.extend_from_slice(body.as_bytes());
    f
}

/// Reads one reply frame: its pairs, `;;` unescaped.
fn read_frame(s: &mut UnixStream) -> Res<Vec<(String, String)>> {
    let mut len = [0u8; 6];
    s.read_exact(&mut len)
        .map_err(|e| format!("reading a length: {e}"))?;
    let n: usize = String::from_utf8_lossy(&len)
        .trim()
        .parse()
        .map_err(|_| format!("a reply length {len:?}"))?;
    let mut body = vec![0u8; n];
    s.read_exact(&mut body)
        .map_err(|e| format!("reading a body: {e}"))?;
    let body = String::from_utf8(body).map_err(|_| "a reply not UTF-8".to_string())?;
    let mut pairs = Vec::new();
    let mut rest = body.as_str();
    while !rest.is_empty() {
        let eq = rest.find('=').ok_or("a pair without =")?;
        let key = rest[..eq].to_owned();
        rest = &rest[eq + 1..];
        let mut value = String::new();
        loop {
            let semi = rest.find(';').ok_or("a value without ;")?;
            value.push_str(&rest[..semi]);
            if rest[semi + 1..].starts_with(';') {
                value.push(';');
                rest = &rest[semi + 2..];
            } else {
                rest = &rest[semi + 1..];
                break;
            }
        }
        pairs.push((key, value));
    }
    Ok(pairs)
}

fn get<'a>(pairs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

fn ask(s: &mut UnixStream, pairs: &[(&str, &str)]) -> Res<Vec<(String, String)>> {
    s.write_all(&encode(pairs))
        .and_then(|()| s.flush())
        .map_err(|e| format!("writing: {e}"))?;
    read_frame(s)
}

fn expect(reply: &[(String, String)], key: &str, want: &str) -> Res<()> {
    match get(reply, key) {
        Some(v) if v == want => Ok(()),
        other => Err(format!("{key} is {other:?}, not {want:?}, in {reply:?}")),
    }
}

/// The PMI-1 init line asking for version 2, then fullinit.
fn start(s: &mut UnixStream, rank: &str) -> Res<()> {
    s.write_all(b"cmd=init pmi_version=2 pmi_subversion=0\n")
        .and_then(|()| s.flush())
        .map_err(|e| format!("writing init: {e}"))?;
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while b[0] != b'\n' {
        s.read_exact(&mut b)
            .map_err(|e| format!("reading init: {e}"))?;
        line.push(b[0]);
    }
    let line = String::from_utf8_lossy(&line);
    if !line.starts_with("cmd=response_to_init") || !line.contains("rc=0") {
        return Err(format!("init answered {line:?}"));
    }
    let r = ask(
        s,
        &[
            ("cmd", "fullinit"),
            ("thrid", "0xA1"),
            ("pmirank", rank),
            ("threaded", "TRUE"),
        ],
    )?;
    expect(&r, "cmd", "fullinit-response")?;
    expect(&r, "thrid", "0xA1")?;
    expect(&r, "rank", rank)?;
    expect(&r, "rc", "0")
}

/// After an error frame, the server closes the connection: the next read sees its end.
fn closed_after_error(s: &mut UnixStream) -> Res<String> {
    let r = read_frame(s)?;
    expect(&r, "cmd", "error")?;
    let why = get(&r, "errmsg").unwrap_or_default().to_owned();
    let mut rest = Vec::new();
    s.read_to_end(&mut rest)
        .map_err(|e| format!("reading to the end: {e}"))?;
    if !rest.is_empty() {
        return Err(format!("{} bytes after the error", rest.len()));
    }
    Ok(why)
}

fn run(scenario: &str) -> Res<String> {
    let rank = std::env::var("PMI_RANK").map_err(|_| "no PMI_RANK")?;
    let mut s = UnixStream {
        r: std::io::stdin(),
        w: std::io::stdout(),
    };
    start(&mut s, &rank)?;
    match scenario {
        "thrid" => {
            let r = ask(&mut s, &[("cmd", "job-getid"), ("thrid", "t;2")])?;
            expect(&r, "thrid", "t;2")?;
            let value = format!("a;;b=c;{rank};");
            let key = format!("wire-{rank}");
            let r = ask(
                &mut s,
                &[
                    ("cmd", "kvs-put"),
                    ("thrid", "0x3"),
                    ("key", &key),
                    ("value", &value),
                ],
            )?;
            expect(&r, "thrid", "0x3")?;
            expect(&r, "rc", "0")?;
            let r = ask(&mut s, &[("cmd", "kvs-fence")])?;
            expect(&r, "rc", "0")?;
            let r = ask(
                &mut s,
                &[
                    ("cmd", "kvs-get"),
                    ("thrid", "x"),
                    ("srcid", &rank),
                    ("key", &key),
                ],
            )?;
            expect(&r, "thrid", "x")?;
            expect(&r, "value", &value)?;
            let r = ask(&mut s, &[("cmd", "finalize")])?;
            expect(&r, "cmd", "finalize-response")?;
            Ok("echoed".into())
        }
        "wake" if rank == "1" => {
            let mut both = encode(&[("cmd", "kvs-put"), ("key", "ready"), ("value", "1")]);
            both.extend(encode(&[
                ("cmd", "info-getnodeattr"),
                ("key", "late"),
                ("wait", "TRUE"),
            ]));
            s.write_all(&both)
                .and_then(|()| s.flush())
                .map_err(|e| format!("writing: {e}"))?;
            expect(&read_frame(&mut s)?, "cmd", "kvs-put-response")?;
            let r = read_frame(&mut s)?;
            expect(&r, "cmd", "info-getnodeattr-response")?;
            expect(&r, "value", "v;late")?;
            expect(&r, "rc", "0")?;
            expect(&ask(&mut s, &[("cmd", "kvs-fence")])?, "rc", "0")?;
            expect(&ask(&mut s, &[("cmd", "finalize")])?, "rc", "0")?;
            Ok("woken".into())
        }
        "wake" => {
            let r = ask(&mut s, &[("cmd", "job-getid")])?;
            let job = get(&r, "jobid").ok_or("no jobid")?.to_owned();
            let r = ask(
                &mut s,
                &[
                    ("cmd", "kvs-get"),
                    ("jobid", &job),
                    ("srcid", "1"),
                    ("key", "ready"),
                ],
            )?;
            expect(&r, "value", "1")?;
            let r = ask(
                &mut s,
                &[
                    ("cmd", "info-putnodeattr"),
                    ("key", "late"),
                    ("value", "v;late"),
                ],
            )?;
            expect(&r, "rc", "0")?;
            expect(&ask(&mut s, &[("cmd", "kvs-fence")])?, "rc", "0")?;
            expect(&ask(&mut s, &[("cmd", "finalize")])?, "rc", "0")?;
            Ok("put".into())
        }
        "garbage" => {
            s.write_all(b"zz?!  cmd=kvs-fence;")
                .and_then(|()| s.flush())
                .map_err(|e| format!("writing: {e}"))?;
            closed_after_error(&mut s)
        }
        "oversized" => {
            s.write_all(b"999999cmd=kvs-put;key=k;value=")
                .and_then(|()| s.flush())
                .map_err(|e| format!("writing: {e}"))?;
            closed_after_error(&mut s)
        }
        other => Err(format!("unknown scenario {other}")),
    }
}

fn main() -> ExitCode {
    let scenario = std::env::args().nth(1).unwrap_or_default();
    let rank = std::env::var("PMI_RANK").unwrap_or_default();
    match run(&scenario) {
        Ok(outcome) => {
            eprintln!("wire {scenario} rank={rank} {}", outcome.replace(' ', "_"));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}
