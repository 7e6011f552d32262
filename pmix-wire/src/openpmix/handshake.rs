//! The connection handshake: the client's first message and the server's raw answer.

use pmix_types::{Info, Nspace, Proc, Rank, Status};

use super::dialect::{BufferType, Codec, Dialect};
use super::frame::{self, HEADER_LEN, Header, MAX_HANDSHAKE_LEN};
use super::item::Size;
use super::macros::open_u8;
use super::pack::Packer;
use super::unpack::Unpacker;
use super::version::Version;
use crate::Error;

/// The OpenPMIx version this crate announces in handshakes it builds. A server compares the
/// client's version with 2.0 (older layout); a client takes `PMIX_VERSION` from its
/// environment as the server's version, where anything before 3.1.100 selects legacy paths.
pub const VERSION: &str = "4.2.2";

/// Bytes of a namespace field in a tool's handshake answer (`PMIX_MAX_NSLEN + 1`).
pub const NSPACE_FIELD_LEN: usize = pmix_types::MAX_NSLEN + 1;

open_u8! {
    /// What kind of process is connecting: the flag byte of the handshake
    /// (`pmix_rnd_flag_t`).
    pub struct PeerFlag;
    /// A client started by the server it connects to.
    SIMPLE_CLIENT = 0,
    /// A tool of a pre-4 release.
    LEGACY_TOOL = 1,
    /// A launcher of a pre-4 release.
    LEGACY_LAUNCHER = 2,
    /// A self-started tool that needs the server to assign it an identifier.
    TOOL_NEEDS_ID = 3,
    /// A tool given an identifier by its caller.
    TOOL_GIVEN_ID = 4,
    /// A tool started by a PMIx server, which named it.
    TOOL_CLIENT = 5,
    /// A self-started launcher that needs an identifier.
    LAUNCHER_NEEDS_ID = 6,
    /// A launcher given an identifier by its caller.
    LAUNCHER_GIVEN_ID = 7,
    /// A launcher started by a PMIx server.
    LAUNCHER_CLIENT = 8,
    /// A singleton client that has its own identifier.
    SINGLETON_CLIENT = 9,
}

/// Who the connecting process says it is; the fields that follow the flag byte.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Identity {
    /// Flag 0: a client the server launched: namespace and rank.
    Client(Proc),
    /// Flags 1, 2, 3 and 6: uid and gid only.
    Ids {
        /// The flag (one of the four above).
        flag: PeerFlag,
        /// Effective uid.
        uid: u32,
        /// Effective gid.
        gid: u32,
    },
    /// Flags 4, 5, 7, 8 and 9: uid, gid, then namespace and rank.
    IdsAndProc {
        /// The flag (one of the five above).
        flag: PeerFlag,
        /// Effective uid.
        uid: u32,
        /// Effective gid.
        gid: u32,
        /// The process's identifier.
        proc: Proc,
    },
}

impl Identity {
    /// The handshake's flag byte.
    pub fn flag(&self) -> PeerFlag {
        match self {
            Identity::Client(_) => PeerFlag::SIMPLE_CLIENT,
            Identity::Ids { flag, .. } | Identity::IdsAndProc { flag, .. } => *flag,
        }
    }

    /// The process identifier, when the handshake carries one.
    pub fn proc(&self) -> Option<&Proc> {
        match self {
            Identity::Client(p) | Identity::IdsAndProc { proc: p, .. } => Some(p),
            Identity::Ids { .. } => None,
        }
    }

    /// The uid and gid a tool states (a simple client's are in its credential).
    pub fn ids(&self) -> Option<(u32, u32)> {
        match *self {
            Identity::Client(_) => None,
            Identity::Ids { uid, gid, .. } | Identity::IdsAndProc { uid, gid, .. } => {
                Some((uid, gid))
            }
        }
    }
}

/// The `native` security module's credential over TCP: the effective uid and gid, each 4
/// bytes in the sender's host order (little-endian here).
pub fn native_credential(uid: u32, gid: u32) -> [u8; 8] {
    let mut c = [0; 8];
    c[..4].copy_from_slice(&uid.to_le_bytes());
    c[4..].copy_from_slice(&gid.to_le_bytes());
    c
}

/// The uid and gid of a `native` credential, if it has the 8 bytes of one. They are only
/// what the client claims: over TCP nothing checks them against the kernel.
pub fn native_credential_ids(cred: &[u8]) -> Option<(u32, u32)> {
    let (uid, gid) = cred.split_first_chunk::<4>()?;
    let gid: &[u8; 4] = gid.try_into().ok()?;
    Some((u32::from_le_bytes(*uid), u32::from_le_bytes(*gid)))
}

/// The client's handshake message (`pmix_ptl_base_construct_message`).
///
/// Body layout: psec module name (NUL-terminated), credential length (u32 big-endian) and
/// credential, flag byte, [identity fields](Identity) (u32s big-endian, namespace
/// NUL-terminated), version, `bfrops` module name, buffer-type byte, `gds` module name, an
/// optional packed `SIZE n` + `n` `INFO`s (tools and singletons), and, from clients before
/// 4.2.3, a stray zero byte they count in the header's length and never write (see
/// [`ClientHandshake::stray_byte_for`]).
#[derive(Clone, Debug, PartialEq)]
pub struct ClientHandshake {
    /// The security module (`native`, `none`, `munge`).
    pub psec: String,
    /// Its credential (see [`native_credential`]).
    pub credential: Vec<u8>,
    /// Who is connecting.
    pub identity: Identity,
    /// The client's OpenPMIx version string (`4.2.2rc2`).
    pub version: String,
    /// The `bfrops` module name (`v41`, `v4`, `v3`, `v21`); see [`Codec::from_name`].
    pub bfrops: String,
    /// The buffer type the client packs with.
    pub buffer_type: BufferType,
    /// The `gds` module the client chose (`hash`, `ds21`, `ds12`).
    pub gds: String,
    /// Info a tool or singleton passes along (empty for clients).
    pub info: Vec<Info>,
    /// Whether the stray zero byte ends the body (from clients before 4.2.3).
    pub stray_byte: bool,
}

impl ClientHandshake {
    /// The handshake a launched client sends: `native` security, this crate's
    /// [`VERSION`], the dialect's codec name and buffer type, and the stray byte (which a
    /// client turns off for servers that do not want it, [`ClientHandshake::stray_byte_for`]).
    pub fn simple_client(
        proc: Proc,
        credential: Vec<u8>,
        dialect: Dialect,
        gds: impl Into<String>,
    ) -> Self {
        ClientHandshake {
            psec: "native".into(),
            credential,
            identity: Identity::Client(proc),
            version: VERSION.into(),
            bfrops: dialect.codec.name().into(),
            buffer_type: dialect.buffer,
            gds: gds.into(),
            info: Vec::new(),
            stray_byte: true,
        }
    }

    /// The handshake of a self-started tool asking the server for a name
    /// ([`PeerFlag::TOOL_NEEDS_ID`]), as libpmix's `PMIx_tool_init` sends it: `native`
    /// security with the credential of `uid` and `gid`, this crate's [`VERSION`], the
    /// dialect's codec, `hash`, no stray byte and no info (set [`ClientHandshake::info`] to
    /// pass `PROC_PID` and `CMD_LINE`, as libpmix does).
    pub fn tool_needs_id(uid: u32, gid: u32, dialect: Dialect) -> Self {
        ClientHandshake {
            psec: "native".into(),
            credential: native_credential(uid, gid).to_vec(),
            identity: Identity::Ids {
                flag: PeerFlag::TOOL_NEEDS_ID,
                uid,
                gid,
            },
            version: VERSION.into(),
            bfrops: dialect.codec.name().into(),
            buffer_type: dialect.buffer,
            gds: "hash".into(),
            info: Vec::new(),
            stray_byte: false,
        }
    }

    /// Whether a client's handshake to a server of version `server` (`PMIX_VERSION`) ends with
    /// the stray byte: yes for servers before 4.2.3, as a 4.2.2 client's does (those servers
    /// skip whatever follows a client's `gds` name), no for later or unknown ones. From 5.0.9
    /// on, a server reads what follows the `gds` name as packed info (a `SIZE` count, then the
    /// infos), fails on the lone zero byte and logs `PMIX_ERR_UNPACK_READ_PAST_END_OF_BUFFER`
    /// for every client that sends it; clients since 4.2.3 send none.
    pub fn stray_byte_for(server: Option<Version>) -> bool {
        server.is_some_and(|v| v < Version::V4_2_3)
    }

    /// The dialect the client will speak for the rest of the session.
    pub fn dialect(&self) -> Result<Dialect, Error> {
        Ok(Dialect::new(
            Codec::from_name(&self.bfrops)?,
            self.buffer_type,
        ))
    }

    /// Decodes a handshake body (what follows the little-endian header).
    ///
    /// A 2.0 client (whose body ends after the version) and unknown flags are
    /// [`Error::Unsupported`]; the info blob is decoded only when the `bfrops` module is one
    /// of this crate's codecs.
    pub fn decode(body: &[u8]) -> Result<Self, Error> {
        if body.len() > MAX_HANDSHAKE_LEN {
            return Err(Error::FrameTooLarge {
                len: body.len(),
                max: MAX_HANDSHAKE_LEN,
            });
        }
        let mut r = Raw { buf: body, pos: 0 };
        let psec = r.string()?;
        let cred_len = r.u32()? as usize;
        let credential = r.take(cred_len)?.to_vec();
        let flag = PeerFlag(r.u8()?);
        let identity = match flag.0 {
            0 => Identity::Client(r.proc()?),
            1 | 2 | 3 | 6 => Identity::Ids {
                flag,
                uid: r.u32()?,
                gid: r.u32()?,
            },
            4 | 5 | 7 | 8 | 9 => Identity::IdsAndProc {
                flag,
                uid: r.u32()?,
                gid: r.u32()?,
                proc: r.proc()?,
            },
            _ => return Err(Error::Unsupported(format!("handshake flag {flag:?}"))),
        };
        let version = r.string()?;
        if is_v20(&version) {
            return Err(Error::Unsupported(format!(
                "handshake of a PMIx {version} client"
            )));
        }
        let bfrops = r.string()?;
        let buffer_type = BufferType::from_u8(r.u8()?)?;
        let gds = r.string()?;
        let rest = r.buf.get(r.pos..).unwrap_or_default();
        let (info, stray_byte) = match rest {
            [] => (Vec::new(), false),
            [0] => (Vec::new(), true),
            blob => {
                let dialect = Dialect::new(Codec::from_name(&bfrops)?, buffer_type);
                let mut u = Unpacker::new(blob, dialect);
                let n = u.unpack_one::<Size>()?.0;
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                let info = if n == 0 {
                    u.unpack_announced::<Info>(0)?
                } else {
                    u.unpack_exact::<Info>(n)?
                };
                match u.rest() {
                    [] => (info, false),
                    [0] => (info, true),
                    _ => return Err(u.malformed("bytes after the handshake's info")),
                }
            }
        };
        Ok(ClientHandshake {
            psec,
            credential,
            identity,
            version,
            bfrops,
            buffer_type,
            gds,
            info,
            stray_byte,
        })
    }

    /// The body (without header).
    pub fn encode_body(&self) -> Result<Vec<u8>, Error> {
        let mut out = Vec::new();
        put_cstr(&mut out, &self.psec)?;
        let cred_len = u32::try_from(self.credential.len())
            .map_err(|_| Error::Encode("credential too long".into()))?;
        out.extend_from_slice(&cred_len.to_be_bytes());
        out.extend_from_slice(&self.credential);
        let flag = self.identity.flag();
        out.push(flag.0);
        match &self.identity {
            Identity::Client(p) => put_proc(&mut out, p)?,
            Identity::Ids { uid, gid, .. } if matches!(flag.0, 1 | 2 | 3 | 6) => {
                out.extend_from_slice(&uid.to_be_bytes());
                out.extend_from_slice(&gid.to_be_bytes());
            }
            Identity::IdsAndProc { uid, gid, proc, .. } if matches!(flag.0, 4 | 5 | 7 | 8 | 9) => {
                out.extend_from_slice(&uid.to_be_bytes());
                out.extend_from_slice(&gid.to_be_bytes());
                put_proc(&mut out, proc)?;
            }
            _ => {
                return Err(Error::Encode(format!(
                    "flag {flag:?} does not go with these identity fields"
                )));
            }
        }
        put_cstr(&mut out, &self.version)?;
        put_cstr(&mut out, &self.bfrops)?;
        out.push(self.buffer_type.as_u8());
        put_cstr(&mut out, &self.gds)?;
        if !self.info.is_empty() {
            let mut p = Packer::new(&mut out, self.dialect()?);
            p.pack_one(&Size(self.info.len() as u64))?;
            p.pack(&self.info)?;
        }
        if self.stray_byte {
            out.push(0);
        }
        if out.len() > MAX_HANDSHAKE_LEN {
            return Err(Error::FrameTooLarge {
                len: out.len(),
                max: MAX_HANDSHAKE_LEN,
            });
        }
        Ok(out)
    }

    /// Appends the whole handshake message (little-endian header, then the body) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        frame::encode_handshake_message(out, &self.encode_body()?)
    }

    /// Decodes a whole handshake message at the start of `buf`: the handshake and the bytes
    /// it used, or `None` when more bytes are needed.
    pub fn decode_message(buf: &[u8]) -> Result<Option<(Self, usize)>, Error> {
        let Some(head) = buf.first_chunk::<HEADER_LEN>() else {
            return Ok(None);
        };
        let len = Header::decode_handshake(head).nbytes as usize;
        if len > MAX_HANDSHAKE_LEN {
            return Err(Error::FrameTooLarge {
                len,
                max: MAX_HANDSHAKE_LEN,
            });
        }
        match buf.get(HEADER_LEN..HEADER_LEN + len) {
            Some(body) => Ok(Some((Self::decode(body)?, HEADER_LEN + len))),
            None => Ok(None),
        }
    }
}

/// Version strings the reference reads as 2.0 (major 2, minor 0).
fn is_v20(version: &str) -> bool {
    let mut parts = version.split('.');
    let num =
        |p: Option<&str>| p.map(|s| s.bytes().take_while(u8::is_ascii_digit).collect::<Vec<_>>());
    num(parts.next()).as_deref() == Some(b"2") && num(parts.next()).as_deref() == Some(b"0")
}

fn put_cstr(out: &mut Vec<u8>, s: &str) -> Result<(), Error> {
    if s.as_bytes().contains(&0) {
        return Err(Error::Encode(format!("{s:?} holds a NUL byte")));
    }
    out.extend_from_slice(s.as_bytes());
    out.push(0);
    Ok(())
}

fn put_proc(out: &mut Vec<u8>, p: &Proc) -> Result<(), Error> {
    put_cstr(out, p.nspace.as_str())?;
    out.extend_from_slice(&p.rank.0.to_be_bytes());
    Ok(())
}

/// A reader of the handshake's C layout (NUL-terminated strings, big-endian u32s).
struct Raw<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Raw<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        let at = self.pos;
        let b = self
            .pos
            .checked_add(n)
            .and_then(|end| self.buf.get(at..end))
            .ok_or(Error::Truncated { at })?;
        self.pos += n;
        Ok(b)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let at = self.pos;
        let b = self
            .buf
            .get(at..)
            .and_then(|r| r.first_chunk::<N>())
            .ok_or(Error::Truncated { at })?;
        self.pos += N;
        Ok(*b)
    }

    fn u8(&mut self) -> Result<u8, Error> {
        self.array::<1>().map(|[b]| b)
    }

    fn u32(&mut self) -> Result<u32, Error> {
        self.array().map(u32::from_be_bytes)
    }

    fn string(&mut self) -> Result<String, Error> {
        let at = self.pos;
        let rest = self.buf.get(at..).unwrap_or_default();
        let end = rest
            .iter()
            .position(|&b| b == 0)
            .ok_or(Error::Truncated { at })?;
        let s = rest.get(..end).unwrap_or_default();
        self.pos += s.len() + 1;
        Ok(String::from_utf8_lossy(s).into_owned())
    }

    fn proc(&mut self) -> Result<Proc, Error> {
        let at = self.pos;
        let nspace = Nspace::new(self.string()?)
            .map_err(|e| Error::Malformed(format!("{e} (at byte {at})")))?;
        Ok(Proc::new(nspace, Rank(self.u32()?)))
    }
}

/// The server's answer to a simple client (flag 0): a big-endian status, and when it is
/// success, the big-endian index of the client's slot, which the client puts in the header of
/// every later message.
///
/// The reference server answers only success: on any refusal it closes the connection
/// without a word. A status of [`Status::ERR_READY_FOR_HANDSHAKE`] would start a security
/// module's own exchange (munge-style), which this crate does not implement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ServerReply {
    /// The outcome.
    pub status: Status,
    /// The client's index, present with a success status.
    pub peer_index: Option<u32>,
}

impl ServerReply {
    /// Acceptance, with the client's index.
    pub fn accepted(peer_index: u32) -> Self {
        ServerReply {
            status: Status::SUCCESS,
            peer_index: Some(peer_index),
        }
    }

    /// A refusal: the status alone (then close the connection).
    pub fn refused(status: Status) -> Self {
        ServerReply {
            status,
            peer_index: None,
        }
    }

    /// Appends the answer (4 or 8 bytes, no header) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.status.0.to_be_bytes());
        if let Some(i) = self.peer_index {
            out.extend_from_slice(&i.to_be_bytes());
        }
    }

    /// Reads the answer at the start of `buf`: the reply and the bytes it used, or `None`
    /// when more bytes are needed. The index is read only after a success status.
    pub fn decode(buf: &[u8]) -> Result<Option<(Self, usize)>, Error> {
        let Some(s) = buf.first_chunk::<4>() else {
            return Ok(None);
        };
        let status = Status(i32::from_be_bytes(*s));
        if status != Status::SUCCESS {
            return Ok(Some((ServerReply::refused(status), 4)));
        }
        match buf.get(4..).and_then(|r| r.first_chunk::<4>()) {
            Some(i) => Ok(Some((ServerReply::accepted(u32::from_be_bytes(*i)), 8))),
            None => Ok(None),
        }
    }
}

/// The server's answer to a tool, launcher or singleton (flags other than 0): a status; after
/// success, the identifier assigned to a peer that needed one, the server's own identifier
/// (namespaces in 256-byte NUL-padded fields, ranks as big-endian u32s), and the status of
/// the credential check.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ToolReply {
    /// The outcome of the connection request; nothing follows a failure.
    pub status: Status,
    /// The identifier given to a peer that asked for one (flags 3 and 6).
    pub assigned: Option<Proc>,
    /// The server's identifier.
    pub server: Option<Proc>,
    /// The outcome of the credential check.
    pub security: Status,
}

impl ToolReply {
    /// Appends the answer to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), Error> {
        out.extend_from_slice(&self.status.0.to_be_bytes());
        if self.status != Status::SUCCESS {
            return Ok(());
        }
        let server = self
            .server
            .as_ref()
            .ok_or_else(|| Error::Encode("a successful tool reply names the server".into()))?;
        for p in self.assigned.iter().chain([server]) {
            let mut field = [0u8; NSPACE_FIELD_LEN];
            let ns = p.nspace.as_str().as_bytes();
            field[..ns.len()].copy_from_slice(ns);
            out.extend_from_slice(&field);
            out.extend_from_slice(&p.rank.0.to_be_bytes());
        }
        out.extend_from_slice(&self.security.0.to_be_bytes());
        Ok(())
    }

    /// Reads the answer at the start of `buf` for a peer that did (`needs_id`) or did not ask
    /// for an identifier: the reply and the bytes it used, or `None` when more are needed.
    pub fn decode(buf: &[u8], needs_id: bool) -> Result<Option<(Self, usize)>, Error> {
        let Some(s) = buf.first_chunk::<4>() else {
            return Ok(None);
        };
        let status = Status(i32::from_be_bytes(*s));
        if status != Status::SUCCESS {
            let reply = ToolReply {
                status,
                assigned: None,
                server: None,
                security: status,
            };
            return Ok(Some((reply, 4)));
        }
        let procs = if needs_id { 2 } else { 1 };
        let total = 4 + procs * (NSPACE_FIELD_LEN + 4) + 4;
        if buf.len() < total {
            return Ok(None);
        }
        let mut pos = 4;
        let mut read_proc = || -> Result<Proc, Error> {
            let field = buf.get(pos..pos + NSPACE_FIELD_LEN).unwrap_or_default();
            let name = field.split(|&b| b == 0).next().unwrap_or_default();
            let nspace = Nspace::new(String::from_utf8_lossy(name))
                .map_err(|e| Error::Malformed(format!("{e} (at byte {pos})")))?;
            let rank = buf
                .get(pos + NSPACE_FIELD_LEN..)
                .and_then(|r| r.first_chunk::<4>())
                .map(|r| u32::from_be_bytes(*r))
                .ok_or(Error::Truncated { at: pos })?;
            pos += NSPACE_FIELD_LEN + 4;
            Ok(Proc::new(nspace, Rank(rank)))
        };
        let assigned = if needs_id { Some(read_proc()?) } else { None };
        let server = Some(read_proc()?);
        let security = buf
            .get(total - 4..total)
            .and_then(|r| r.first_chunk::<4>())
            .map(|r| Status(i32::from_be_bytes(*r)))
            .ok_or(Error::Truncated { at: total - 4 })?;
        Ok(Some((
            ToolReply {
                status,
                assigned,
                server,
                security,
            },
            total,
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_servers_before_4_2_3_get_the_stray_byte() {
        let stray = |v: &str| ClientHandshake::stray_byte_for(Version::parse(v));
        assert!(stray("4.2.2") && stray("3.2.5") && stray("4.1.0"));
        assert!(!stray("4.2.3") && !stray("5.0.11rc1") && !stray("6.0.0"));
        assert!(!ClientHandshake::stray_byte_for(None));

        // Without it the body ends with the gds name's NUL, and reads back the same.
        let proc = Proc::new(pmix_types::Nspace::new("job").unwrap(), 3);
        let mut hs = ClientHandshake::simple_client(proc, vec![1; 8], Dialect::V41, "hash");
        hs.stray_byte = false;
        let body = hs.encode_body().unwrap();
        assert!(body.ends_with(b"hash\0"));
        assert_eq!(ClientHandshake::decode(&body).unwrap(), hs);
        hs.stray_byte = true;
        assert!(hs.encode_body().unwrap().ends_with(b"hash\0\0"));
    }
}
