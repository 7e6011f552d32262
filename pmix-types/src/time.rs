//! [`Timeval`]: a time with microseconds, which values and usage samples hold.

use serde::{Deserialize, Serialize};

/// A time value with microseconds (`struct timeval`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Timeval {
    /// Seconds.
    pub sec: i64,
    /// Microseconds.
    pub usec: i64,
}
