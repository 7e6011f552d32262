//! The OpenPMIx handshake of the client: the I/O half of its OpenPMIx personality, what lets
//! a pmix-rs client run under a real OpenPMIx 4.2 server (Open MPI's `mpirun`, PRRTE, any
//! host on libpmix's server library).
//!
//! [`connect`] does the TCP handshake as a libpmix client of the `hash` storage module would
//! and asks for the job data (`REQ`), which `pmix_wire::openpmix::job` turns into the
//! [`JobData`] the store files. It leaves the [`Session`] (`core/openpmix/`, sans-IO) that
//! translates every request and answer from then on, inside the client's core.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use pmix_types::{Info, Proc, Rank, Status, Value, attr};
use pmix_wire::JobData;
use pmix_wire::openpmix::job::{Here, from_job_info};
use pmix_wire::openpmix::{
    ClientHandshake, Cmd, DEFAULT_MAX_MESSAGE, Incoming, MsgReader, Reply as OpenpmixReply,
    Request as OpenpmixRequest, ServerReply, encode_message_with, native_credential,
};

use crate::Error;
use crate::core::openpmix::{Context, Session};
use crate::env::{GDS_MODULE, OpenpmixServer};

/// How long the handshake and the job data may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(60);

/// What [`connect`] leaves: the socket, the session, the reader with whatever arrived after
/// the job data, and the job data.
pub(crate) struct Connected {
    pub(crate) stream: TcpStream,
    pub(crate) session: Session,
    pub(crate) reader: MsgReader,
    pub(crate) job: JobData,
}

/// What this process calls itself on the network, for "this node".
fn local_hostname(srv: &OpenpmixServer) -> Option<String> {
    srv.hostname.clone().or_else(|| {
        nix::unistd::gethostname()
            .ok()
            .map(|h| h.to_string_lossy().into_owned())
    })
}

/// Connects to the OpenPMIx server, says who we are and receives our job's data.
pub(crate) fn connect(me: &Proc, srv: &OpenpmixServer) -> Result<Connected, Error> {
    let io = |source: io::Error| Error::Connect {
        path: srv.uri.clone(),
        source,
    };
    // A pmix-rs server (its default namespace names it) serves every client with the store it
    // picked, so libpmix clients on ds21 and this client on hash share data there.
    let pmix_rs = srv.server.nspace.as_str().starts_with("rs-server-");
    if let Some(gds) = srv.gds.as_ref().filter(|_| !pmix_rs) {
        if gds.split(',').next().map(str::trim) != Some("hash") {
            tracing::warn!(
                "pmix-client: the OpenPMIx server offers {GDS_MODULE}={gds}: libpmix clients of \
                 this job will pick a shared-memory store, whose data this client cannot read \
                 (start the launcher with PMIX_MCA_gds=hash)"
            );
        }
    }
    tracing::debug!(
        "pmix-client: connecting to the OpenPMIx server {} at {} ({}, {:?})",
        srv.server,
        srv.addr,
        srv.var,
        srv.dialect
    );
    let mut stream = TcpStream::connect_timeout(&srv.addr, HANDSHAKE_TIMEOUT).map_err(io)?;
    stream.set_nodelay(true).map_err(io)?;
    stream
        .set_read_timeout(Some(HANDSHAKE_TIMEOUT))
        .map_err(io)?;

    let uid = nix::unistd::geteuid().as_raw();
    let gid = nix::unistd::getegid().as_raw();
    let mut hello = ClientHandshake::simple_client(
        me.clone(),
        native_credential(uid, gid).to_vec(),
        srv.dialect,
        "hash",
    );
    hello.bfrops = srv.bfrops.to_owned();
    hello.stray_byte = ClientHandshake::stray_byte_for(srv.version);
    let mut out = Vec::with_capacity(256);
    hello.encode(&mut out)?;
    stream.write_all(&out).map_err(io)?;

    // The answer has no header: a status, and on success our peer index.
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 4096];
    let (answer, used) = loop {
        if let Some(done) = ServerReply::decode(&buf)? {
            break done;
        }
        let n = read_some(&mut stream, &mut chunk).map_err(io)?;
        if n == 0 {
            return Err(Error::Connect {
                path: srv.uri.clone(),
                source: io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the OpenPMIx server closed the connection during the handshake: it does \
                     not know this process, or refused its credential (uid/gid), its codec or \
                     the hash storage module (start the launcher with PMIX_MCA_gds=hash)",
                ),
            });
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let (Status::SUCCESS, Some(index)) = (answer.status, answer.peer_index) else {
        return Err(Error::Refused {
            status: answer.status,
            reason: "the OpenPMIx server refused the handshake".into(),
        });
    };
    let pindex = i32::try_from(index)
        .map_err(|_| Error::Protocol(format!("peer index {index} out of range")))?;
    let mut reader = MsgReader::after_handshake(DEFAULT_MAX_MESSAGE);
    reader.feed(buf.get(used..).unwrap_or_default());

    // The job data.
    let env_host = local_hostname(srv);
    let mut session = Session::new(
        Context {
            me: me.clone(),
            dialect: srv.dialect,
            hostname: env_host.clone(),
        },
        uid,
        pindex,
    );
    let tag = session.fresh_tag();
    out.clear();
    encode_message_with(&mut out, pindex, tag, |o| {
        OpenpmixRequest::Req.encode(srv.dialect, o)
    })?;
    stream.write_all(&out).map_err(io)?;
    let info = loop {
        let mut got = None;
        while let Some(m) = reader.next_message()? {
            match m {
                Incoming::Message { header, payload } if header.tag == tag => {
                    got = Some(OpenpmixReply::decode(Cmd::REQ, payload, srv.dialect));
                    break;
                }
                other => tracing::debug!("pmix-client: before the job data, ignoring {other:?}"),
            }
        }
        if let Some(r) = got {
            match r {
                Ok(OpenpmixReply::JobInfo(info)) => break info,
                Ok(other) => {
                    return Err(Error::Protocol(format!(
                        "the server answered the job data request with {other:?}"
                    )));
                }
                Err(e) => {
                    return Err(Error::Protocol(format!(
                        "the server's job data does not decode: {e}"
                    )));
                }
            }
        }
        let n = read_some(&mut stream, &mut chunk).map_err(io)?;
        if n == 0 {
            return Err(Error::Connect {
                path: srv.uri.clone(),
                source: io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the OpenPMIx server closed the connection before sending the job data",
                ),
            });
        }
        reader.feed(&chunk[..n]);
    };
    if info.nspace != me.nspace {
        return Err(Error::Protocol(format!(
            "asked for the job data of {}, the server sent {}'s",
            me.nspace, info.nspace
        )));
    }
    stream.set_read_timeout(None).map_err(io)?;

    let here = Here {
        rank: Some(me.rank),
        hostname: env_host.as_deref(),
    };
    let job = from_job_info(info, srv.dialect, here)?;
    if let Some(h) = hostname_of(&job, me.rank) {
        session.set_hostname(h.to_owned());
    }
    Ok(Connected {
        stream,
        session,
        reader,
        job,
    })
}

/// The hostname a rank's job data names, if any: its own `HOSTNAME`, else its node's.
pub(crate) fn hostname_of(job: &JobData, rank: Rank) -> Option<&str> {
    fn find<'a>(infos: &'a [Info], key: &str) -> Option<&'a Value> {
        infos
            .iter()
            .find(|i| i.key.as_str() == key)
            .map(|i| &i.value)
    }
    let p = job.procs.iter().find(|p| p.rank == rank)?;
    if let Some(h) = find(&p.info, attr::HOSTNAME).and_then(Value::as_str) {
        return Some(h);
    }
    let node = find(&p.info, attr::NODEID).and_then(Value::as_u32)?;
    let n = job.nodes.iter().find(|n| n.id == node)?;
    find(&n.info, attr::HOSTNAME).and_then(Value::as_str)
}

fn read_some(stream: &mut TcpStream, chunk: &mut [u8]) -> io::Result<usize> {
    loop {
        match stream.read(chunk) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            r => return r,
        }
    }
}
