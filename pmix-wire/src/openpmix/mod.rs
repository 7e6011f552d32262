//! The OpenPMIx 4.2 client/server wire format, sans-IO: what a pmix-rs server needs to host
//! processes linked to the C `libpmix` (Open MPI, python3-pmix, any libpmix program), and
//! what a pmix-rs client needs to talk to a real OpenPMIx server.
//!
//! This module knows bytes, not policy: which job data to send, when to answer a fence, and
//! what to do with a refused handshake are the front-end's. It shares the data model of
//! `pmix-types` ([`Value`](pmix_types::Value), [`Info`](pmix_types::Info),
//! [`Proc`], ...) and the [`App`](crate::App),
//! [`Query`](crate::Query) and [`Published`](crate::Published) structs of the native
//! protocol; nothing here depends on the native protocol's framing.
//!
//! # Layers
//!
//! * **Dialect** ([`Dialect`]): a connection's integer coder ([`Codec::V41`], flex128
//!   varints; [`Codec::V3`], fixed-width big-endian) and buffer type
//!   ([`BufferType::NonDesc`], [`BufferType::FullyDesc`]), both fixed by the client's
//!   handshake for the whole session.
//! * **Packing** ([`Packer`], [`Unpacker`], [`Item`]): top-level packs (`[count][items]`, with
//!   type tags when fully described) and the inner encoding of every type that maps onto a
//!   `pmix-types` value, plus [`Kval`], [`Size`], [`Time`], [`ByteObject`] and [`Buffer`].
//! * **Framing** ([`Header`], [`MsgReader`], [`encode_message`]): 16-byte headers,
//!   big-endian after the handshake, little-endian for the client's handshake message.
//! * **Handshake** ([`ClientHandshake`], [`ServerReply`], [`ToolReply`]) and the peers'
//!   release numbers ([`Version`]), by which some of its bytes differ.
//! * **Messages** ([`Request`], [`Reply`], [`Notification`], keyed by [`Cmd`]): the payloads
//!   of the commands, and building blocks for job data ([`JobInfo`], [`rank_blob`],
//!   [`info_array`]).
//! * **Job data** ([`job`]): a namespace's [`JobData`](crate::JobData) laid out as libpmix
//!   clients file it, and read back from that layout.
//!
//! # Example: a server reading a client
//!
//! ```
//! use pmix_wire::openpmix::{
//!     ClientHandshake, Dialect, Incoming, MsgReader, Nspace, Proc, ServerReply,
//!     native_credential,
//! };
//!
//! // What a libpmix client sends first.
//! let hello = ClientHandshake::simple_client(
//!     Proc::new(Nspace::new("job")?, 0),
//!     native_credential(1000, 1000).to_vec(),
//!     Dialect::V41,
//!     "hash",
//! );
//! let mut bytes = Vec::new();
//! hello.encode(&mut bytes)?;
//!
//! let mut reader = MsgReader::new(1 << 20);
//! reader.feed(&bytes);
//! let Some(Incoming::Handshake { body, .. }) = reader.next_message()? else { unreachable!() };
//! let hs = ClientHandshake::decode(body)?;
//! let dialect = hs.dialect()?; // every later message of this client is in its dialect
//! assert_eq!(dialect, Dialect::V41);
//!
//! let mut answer = Vec::new();
//! ServerReply::accepted(0).encode(&mut answer); // 8 raw bytes, no header
//! assert_eq!(answer, [0, 0, 0, 0, 0, 0, 0, 0]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What is refused
//!
//! Every data type of OpenPMIx 4.2 and 5.0 has a [`Value`](pmix_types::Value) variant and
//! decodes. Decoding fails with [`Error::Unsupported`](crate::Error::Unsupported) for a type
//! number no OpenPMIx release defines, for a type a `v3` peer cannot know, for the `v20` and
//! `v12` codecs and for PMIx 2.0 handshakes; encoding refuses a `POINTER`; with [`Error::Truncated`](crate::Error::Truncated) when the bytes
//! end inside an item; with [`Error::Malformed`](crate::Error::Malformed) for anything else
//! that is not what the reference writes. No input makes a decoder panic, allocate more than
//! the input justifies, or recurse more than [`MAX_NESTING`] levels.
//!
//! See `docs/OPENPMIX.md` for the wire format itself and the choices made here (float
//! precision, the zlib regex form, NULL strings).

mod cmd;
mod dialect;
mod flex;
mod frame;
mod handshake;
mod hardware;
mod iof;
mod item;
pub mod job;
mod macros;
mod msg;
mod pack;
pub mod rendezvous;
mod stats;
mod unpack;
mod value;
mod version;

pub use cmd::Cmd;
pub use dialect::{BUFFER_TYPE_VAR, BufferType, Codec, Dialect};
pub use frame::{
    DEFAULT_MAX_MESSAGE, HEADER_LEN, Header, Incoming, MAX_HANDSHAKE_LEN, MsgReader,
    PINDEX_HANDSHAKE, TAG_DYNAMIC, TAG_HANDSHAKE, TAG_HEARTBEAT, TAG_IOF, TAG_NOTIFY,
    encode_handshake_message, encode_message, encode_message_followed_by, encode_message_with,
};
pub use handshake::{
    ClientHandshake, Identity, NSPACE_FIELD_LEN, PeerFlag, ServerReply, ToolReply, VERSION,
    native_credential, native_credential_ids,
};
pub use iof::IofChunk;
pub use item::{BUFFER, Buffer, ByteObject, Item, Kval, Size, Time};
pub use msg::{
    CommitPart, JobInfo, MAP_BLOB, Notification, PROC_BLOB, ProcKvals, Reply, Request,
    decode_rank_blob, info_array, peek_cmd, proc_blob_kval, rank_blob,
};
pub use pack::Packer;
pub use unpack::{MAX_NESTING, Unpacker};
pub(crate) use value::POINTER_REFUSED;
pub use version::Version;

// The data model, for convenience.
pub use pmix_types::{Nspace, Proc, Rank};
