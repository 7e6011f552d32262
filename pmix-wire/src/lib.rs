//! The native pmix-rs wire protocol, sans-IO.
//!
//! Frames are a 4-byte length prefix in network byte order followed by a MessagePack body
//! (serde + rmp-serde), so peers of different architectures interoperate. This crate owns the
//! framing, the message enums of every request and reply, and the handshake with version
//! negotiation. It never touches a socket: bytes in, messages out.
//!
//! Host authors want `pmix-server`; application authors `pmix-client`.
