//! Which variant of the packing rules a peer speaks: its integer coder and its buffer type.

use pmix_types::DataType;

use crate::Error;

/// The integer coder of a connection, named by the `bfrops` module in the client's handshake.
///
/// Everything but integers is laid out the same way by both.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Codec {
    /// `v41` (and `v4`, identical on the wire): 16-, 32- and 64-bit integers, `size_t`, `int`
    /// and type tags as "flex128" varints (7 bits a byte, least significant first, signed
    /// types zig-zagged, a ninth byte holding the last 8 bits verbatim); `int` and `size_t`
    /// carry no inner type tag. OpenPMIx 4.x and later.
    #[default]
    V41,
    /// `v3` (and `v21`): fixed-width big-endian integers (2, 4 or 8 bytes), and `size_t`,
    /// `int`, `unsigned int` and `pid_t` preceded by a 2-byte type tag naming the width they
    /// were sent with. PMIx 2.1 to 3.x peers, such as Open MPI 4.x's embedded PMIx 3.2.
    V3,
}

impl Codec {
    /// Parses the `bfrops` module name of a handshake: `v41`, `v4`, `v3` or `v21`.
    ///
    /// `v20` (PMIx 2.0: value type tags packed as tagged `int`s) and `v12` are not supported.
    pub fn from_name(name: &str) -> Result<Codec, Error> {
        match name {
            "v41" | "v4" => Ok(Codec::V41),
            "v3" | "v21" => Ok(Codec::V3),
            other => Err(Error::Unsupported(format!("bfrops module {other:?}"))),
        }
    }

    /// The name this crate announces for the coder in a handshake (`v41` or `v3`).
    pub fn name(self) -> &'static str {
        match self {
            Codec::V41 => "v41",
            Codec::V3 => "v3",
        }
    }

    /// True when a peer using this coder can unpack values of type `ty`.
    ///
    /// The reference's `v3` module registers no type above `ENVAR` (46), so a `v3` peer fails
    /// to unpack a regex, job state, link state, locality, compressed byte object or namespace
    /// value; the encoder refuses those for `V3` rather than send bytes the peer cannot read.
    /// (`v21` peers do not know `IOF_CHANNEL` and `ENVAR` either; that is not checked.)
    pub fn knows(self, ty: DataType) -> bool {
        match self {
            Codec::V41 => true,
            Codec::V3 => ty.0 <= DataType::ENVAR.0,
        }
    }
}

/// Whether every top-level pack of a buffer carries type tags (`pmix_bfrop_buffer_type_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum BufferType {
    /// `PMIX_BFROP_BUFFER_NON_DESC`: a top-level pack is `[count][items]`. The default of
    /// release builds of OpenPMIx.
    #[default]
    NonDesc = 1,
    /// `PMIX_BFROP_BUFFER_FULLY_DESC`: `[INT32 tag][count][type tag][items]`. The default of
    /// debug builds.
    FullyDesc = 2,
}

impl BufferType {
    /// Parses the buffer-type byte of a handshake or of a packed `BUFFER`.
    pub fn from_u8(b: u8) -> Result<BufferType, Error> {
        match b {
            1 => Ok(BufferType::NonDesc),
            2 => Ok(BufferType::FullyDesc),
            other => Err(Error::Malformed(format!("buffer type {other}"))),
        }
    }

    /// The byte that stands for this buffer type on the wire.
    pub fn as_u8(self) -> u8 {
        self as u8
    }

    /// The buffer type a libpmix process takes from its environment's
    /// [`BUFFER_TYPE_VAR`] (set by its server at launch): fully described only when it says
    /// `PMIX_BFROP_BUFFER_FULLY_DESC`, anything else or nothing the release builds' default.
    pub fn from_env_value(value: Option<&str>) -> BufferType {
        match value {
            Some("PMIX_BFROP_BUFFER_FULLY_DESC") => BufferType::FullyDesc,
            _ => BufferType::NonDesc,
        }
    }
}

/// The environment variable by which an OpenPMIx server tells the processes it launches
/// their [`BufferType`] ([`BufferType::from_env_value`]).
pub const BUFFER_TYPE_VAR: &str = "PMIX_BFROP_BUFFER_TYPE";

/// How one connection packs its messages: fixed for the whole session by the client's
/// handshake; a server must answer in the client's dialect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Dialect {
    /// The integer coder.
    pub codec: Codec,
    /// The buffer type.
    pub buffer: BufferType,
}

impl Dialect {
    /// What OpenPMIx 4.2 release builds speak: `v41`, not fully described.
    pub const V41: Dialect = Dialect {
        codec: Codec::V41,
        buffer: BufferType::NonDesc,
    };

    /// A dialect from its parts.
    pub fn new(codec: Codec, buffer: BufferType) -> Dialect {
        Dialect { codec, buffer }
    }

    /// The dialect a handshake announces: its `bfrops` module name and buffer-type byte.
    pub fn from_handshake(bfrops: &str, buffer_type: u8) -> Result<Dialect, Error> {
        Ok(Dialect {
            codec: Codec::from_name(bfrops)?,
            buffer: BufferType::from_u8(buffer_type)?,
        })
    }

    /// True for fully-described buffers.
    pub fn fully_described(self) -> bool {
        self.buffer == BufferType::FullyDesc
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handshake_names_parse() {
        assert_eq!(Dialect::from_handshake("v41", 1).unwrap(), Dialect::V41);
        assert_eq!(
            Dialect::from_handshake("v4", 2).unwrap(),
            Dialect::new(Codec::V41, BufferType::FullyDesc)
        );
        assert_eq!(Codec::from_name("v21").unwrap(), Codec::V3);
        assert!(matches!(
            Codec::from_name("v20"),
            Err(Error::Unsupported(_))
        ));
        assert!(Dialect::from_handshake("v3", 3).is_err());
        assert!(Codec::V3.knows(DataType::ENVAR) && !Codec::V3.knows(DataType::REGEX));
    }
}
