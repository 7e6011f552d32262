//! [`Info`]: a key/value pair with directive flags (`pmix_info_t`).

use serde::{Deserialize, Serialize};

use crate::macros::open_enum;
use crate::{Key, Value};

open_enum! {
    /// Directive flags of an info entry (`pmix_info_directives_t`), a bit set.
    pub struct InfoFlags(u32);
    /// No flags.
    NONE = 0,
    /// The receiver must honour this directive or fail the call.
    REQD = 0x1,
    /// Marks the end of an info array (a C-ABI artefact; carried for fidelity).
    ARRAY_END = 0x2,
    /// A required directive has been processed.
    REQD_PROCESSED = 0x4,
    /// This entry qualifies another one (e.g. which namespace a key refers to).
    QUALIFIER = 0x8,
    /// The entry is to be kept across operations.
    PERSISTENT = 0x10,
}

impl InfoFlags {
    /// True if every bit of `other` is set here.
    pub fn contains(self, other: InfoFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

impl core::ops::BitOr for InfoFlags {
    type Output = InfoFlags;
    fn bitor(self, rhs: InfoFlags) -> InfoFlags {
        InfoFlags(self.0 | rhs.0)
    }
}

/// A key, a value and directive flags: the unit of every directive list and of job data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Info {
    /// The key (an attribute name or a user key).
    pub key: Key,
    /// The value.
    pub value: Value,
    /// Directive flags.
    pub flags: InfoFlags,
}

impl Info {
    /// An info entry without flags.
    pub fn new(key: Key, value: impl Into<Value>) -> Self {
        Info {
            key,
            value: value.into(),
            flags: InfoFlags::NONE,
        }
    }

    /// An info entry for a key known to be valid, such as an attribute constant.
    ///
    /// # Panics
    /// If `key` is not a valid key; use [`Key::new`] for keys that come from input.
    #[allow(clippy::expect_used)]
    pub fn attr(key: &'static str, value: impl Into<Value>) -> Self {
        Info::new(
            Key::from_static(key).expect("attribute keys are valid"),
            value,
        )
    }

    /// Marks the entry as required.
    pub fn required(mut self) -> Self {
        self.flags = self.flags | InfoFlags::REQD;
        self
    }

    /// Marks the entry as a qualifier.
    pub fn qualifier(mut self) -> Self {
        self.flags = self.flags | InfoFlags::QUALIFIER;
        self
    }

    /// True when the entry is required.
    pub fn is_required(&self) -> bool {
        self.flags.contains(InfoFlags::REQD)
    }

    /// Reads a boolean directive the standard's way: a bool value, or no value at all
    /// ([`Value::Undef`]), which means `true`.
    pub fn flag(&self) -> Option<bool> {
        match self.value {
            Value::Undef => Some(true),
            ref v => v.as_bool(),
        }
    }
}

/// The `PMIX_TIMEOUT` directive among `info`, in seconds: `None` when it is absent, not an
/// integer, or 0 or less (no limit).
pub fn timeout_of(info: &[Info]) -> Option<core::time::Duration> {
    let secs = info
        .iter()
        .find(|i| i.key.as_str() == crate::attr::TIMEOUT)?
        .value
        .as_i64()?;
    (secs > 0).then(|| core::time::Duration::from_secs(secs.unsigned_abs()))
}
