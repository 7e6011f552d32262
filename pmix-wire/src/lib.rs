//! The native pmix-rs wire protocol, sans-IO.
//!
//! Frames are a 4-byte length prefix in network byte order followed by a MessagePack body
//! (serde + rmp-serde), so peers of different architectures interoperate. This crate owns the
//! framing, the message enums of every request and reply, and the handshake with version
//! negotiation. It never touches a socket: bytes in, messages out.
//!
//! [`openpmix`] is a second, independent wire format: OpenPMIx 4.2's, for hosting processes
//! linked to the C `libpmix` and for talking to OpenPMIx servers.
//!
//! Host authors want `pmix-server`; application authors `pmix-client`.

mod decode;
mod error;
mod frame;
#[doc(hidden)]
pub mod fuzzing;
mod job_data;
pub mod job_image;
pub mod msg;
pub mod names;
pub mod openpmix;
pub mod packed;
mod scan;
pub mod tool;

pub use decode::{MAX_DEPTH, decode_body};
pub use error::Error;
pub use frame::{
    DEFAULT_MAX_FRAME, Decoded, FrameDecoder, FrameReader, HEADER_LEN, READ_ROOM, SharedReply,
    TakenFrame, decode_frame_lists, decode_hello, encode_frame, encode_welcome,
};
pub use job_data::{JobData, ProcRealm, Realm};
pub use job_image::{JobImage, JobSpec, NodeMap};
pub use msg::{
    App, ClientMsg, ConnectPart, Event, Hello, IofChunk, Kv, MAGIC, PROTOCOL_VERSION, ProcKvs,
    Published, Query, Reply, ReplyBody, Request, ServerMsg, Welcome, WelcomeJob,
};
pub use names::{
    NS_MAGIC, NS_PROTOCOL_VERSION, NsCaller, NsHello, NsMsg, NsReply, NsRequest, NsWelcome,
};
pub use packed::{FenceReplyRef, PackedProc, decode_kvs, peek_fence_reply};
pub use tool::{TOOL_MAGIC, ToolHello, ToolWelcome, decode_tool_hello};
