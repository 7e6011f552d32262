//! The native handshake (hello, welcome), on the connection's socket before the reading
//! role and the core take over: the I/O side of the native personality, as
//! `crate::openpmix::connect` is of the OpenPMIx one.

use std::io::{self, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use pmix_types::Status;
use pmix_wire::{
    Decoded, FrameDecoder, FrameReader, Hello, JobData, JobImage, MAGIC, PROTOCOL_VERSION, Welcome,
    WelcomeJob, decode_body, encode_frame,
};

use crate::Error;
use crate::core::Input;
use crate::env::Rendezvous;

/// How long the handshake may take: a server that accepted the socket but never answers must
/// not hang init forever.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);

/// Bytes read from the socket at a time during the handshake.
const READ_CHUNK: usize = 64 << 10;

pub(crate) fn frame_io(path: &str) -> impl Fn(io::Error) -> Error + '_ {
    move |source| Error::Connect {
        path: path.to_owned(),
        source,
    }
}

/// Reads one whole frame body during the handshake, keeping whatever followed it.
fn read_frame(
    mut read: impl FnMut(&mut [u8]) -> io::Result<usize>,
    buf: &mut Vec<u8>,
    dec: &FrameDecoder,
    path: &str,
) -> Result<Vec<u8>, Error> {
    loop {
        if let Decoded::Frame { body, consumed } = dec.decode(buf)? {
            let body = body.to_vec();
            buf.drain(..consumed);
            return Ok(body);
        }
        let start = buf.len();
        buf.resize(start + READ_CHUNK, 0);
        let n = match read(&mut buf[start..]) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                buf.truncate(start);
                continue;
            }
            Err(e) => {
                buf.truncate(start);
                return Err(frame_io(path)(e));
            }
        };
        buf.truncate(start + n);
        if n == 0 {
            return Err(Error::Connect {
                path: path.to_owned(),
                source: io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "server closed the connection during the handshake",
                ),
            });
        }
    }
}

/// Where the welcome left the namespace's job data.
pub(crate) enum JobIn {
    /// Its image, inline or mapped.
    Image(JobImage),
    /// Job data in full (the OpenPMIx wire, a singleton).
    Data(JobData),
    /// The image file could not be mapped (why): ask the server for the image.
    Fetch(String),
}

/// The native handshake: hello, welcome. Returns the socket, what followed the welcome, and
/// the job data.
pub(crate) fn native_handshake(
    rv: &Rendezvous,
    socket: &std::path::Path,
    secret: &[u8; 16],
) -> Result<(UnixStream, Input, JobIn), Error> {
    let path = socket.display().to_string();
    let mut stream = UnixStream::connect(socket).map_err(frame_io(&path))?;
    stream
        .set_read_timeout(Some(HANDSHAKE_TIMEOUT))
        .map_err(frame_io(&path))?;

    let hello = Hello {
        magic: MAGIC.to_owned(),
        version: PROTOCOL_VERSION,
        nspace: rv.proc.nspace.clone(),
        rank: rv.proc.rank,
        secret: secret.to_vec(),
        pid: std::process::id(),
    };
    let mut out = Vec::with_capacity(256);
    encode_frame(&hello, &mut out)?;
    stream.write_all(&out).map_err(frame_io(&path))?;

    let dec = FrameDecoder::default();
    let mut inbuf = Vec::new();
    let mut fd = None;
    let body = read_frame(
        |buf| crate::job_file::recv_with_fd(&stream, buf, &mut fd),
        &mut inbuf,
        &dec,
        &path,
    )?;
    let welcome: Welcome = decode_body(&body)?;
    let job = match welcome {
        Welcome::Refused {
            status,
            version,
            reason,
        } => {
            if status == Status::ERR_NOT_SUPPORTED && version != PROTOCOL_VERSION {
                return Err(Error::VersionMismatch {
                    server: version,
                    client: PROTOCOL_VERSION,
                });
            }
            return Err(Error::Refused { status, reason });
        }
        Welcome::Accepted { version, job } => {
            if version != PROTOCOL_VERSION {
                return Err(Error::VersionMismatch {
                    server: version,
                    client: PROTOCOL_VERSION,
                });
            }
            job
        }
    };
    let job = match job {
        WelcomeJob::Inline(image) => JobIn::Image(image),
        WelcomeJob::Shared { len } => match fd {
            None => JobIn::Fetch("the welcome came without the job image file".into()),
            Some(fd) => match crate::job_file::map(fd, len) {
                Err(e) => JobIn::Fetch(format!("cannot map the job image file: {e}")),
                Ok(bytes) => JobIn::Image(JobImage::parse(bytes)?),
            },
        },
    };
    if let JobIn::Image(image) = &job {
        if *image.nspace() != rv.proc.nspace {
            return Err(Error::Protocol(format!(
                "welcome carries the job data of {:?}, not of our namespace {:?}",
                image.nspace(),
                rv.proc.nspace
            )));
        }
    }
    stream.set_read_timeout(None).map_err(frame_io(&path))?;

    let mut input = Input::native(FrameReader::new(dec));
    // Whatever followed the welcome in the same read.
    input.feed(&inbuf);
    Ok((stream, input, job))
}
