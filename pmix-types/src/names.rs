//! Process identity: [`Rank`], [`Nspace`], [`Proc`], and the [`Key`] of a key/value pair.

use std::borrow::{Borrow, Cow};
use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::{Error, MAX_KEYLEN, MAX_NSLEN};

/// A process rank within a namespace (`pmix_rank_t`), with the standard's reserved values.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Rank(pub u32);

impl Rank {
    /// No rank given (`PMIX_RANK_UNDEF`).
    pub const UNDEF: Rank = Rank(0xFFFF_FFFF);
    /// Every rank of the namespace; also the rank under which job-level data is stored
    /// (`PMIX_RANK_WILDCARD`).
    pub const WILDCARD: Rank = Rank(0xFFFF_FFFE);
    /// The ranks of the namespace on the caller's node (`PMIX_RANK_LOCAL_NODE`).
    pub const LOCAL_NODE: Rank = Rank(0xFFFF_FFFD);
    /// An invalid rank (`PMIX_RANK_INVALID`).
    pub const INVALID: Rank = Rank(0xFFFF_FFFC);
    /// The caller's local peers (`PMIX_RANK_LOCAL_PEERS`).
    pub const LOCAL_PEERS: Rank = Rank(0xFFFF_FFFB);
    /// The largest value that names a real process (`PMIX_RANK_VALID`).
    pub const VALID: Rank = Rank(0xFFFF_FFCD);

    /// True when this names one real process rather than a reserved set.
    pub fn is_valid(self) -> bool {
        self.0 <= Self::VALID.0
    }
}

impl fmt::Debug for Rank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Rank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Rank::UNDEF => f.write_str("UNDEF"),
            Rank::WILDCARD => f.write_str("WILDCARD"),
            Rank::LOCAL_NODE => f.write_str("LOCAL_NODE"),
            Rank::INVALID => f.write_str("INVALID"),
            Rank::LOCAL_PEERS => f.write_str("LOCAL_PEERS"),
            Rank(r) => write!(f, "{r}"),
        }
    }
}

impl From<u32> for Rank {
    fn from(r: u32) -> Self {
        Rank(r)
    }
}

/// A namespace: the name of a job, at most [`MAX_NSLEN`] bytes, without NUL bytes.
///
/// Cheap to clone (shared), compared and hashed by content.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "Arc<str>")]
pub struct Nspace(Arc<str>);

impl Nspace {
    /// Checks and builds a namespace.
    pub fn new(s: impl AsRef<str>) -> Result<Self, Error> {
        let s = s.as_ref();
        check_name(s, MAX_NSLEN, false).map_err(|reason| Error::InvalidNspace {
            len: s.len(),
            reason,
        })?;
        Ok(Nspace(Arc::from(s)))
    }

    /// The namespace as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Nspace {
    type Error = Error;
    fn try_from(s: String) -> Result<Self, Error> {
        Nspace::new(s)
    }
}

impl TryFrom<&str> for Nspace {
    type Error = Error;
    fn try_from(s: &str) -> Result<Self, Error> {
        Nspace::new(s)
    }
}

impl From<Nspace> for Arc<str> {
    fn from(n: Nspace) -> Arc<str> {
        n.0
    }
}

impl Borrow<str> for Nspace {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Nspace {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Nspace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Nspace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The key of a key/value pair: 1 to [`MAX_KEYLEN`] bytes, without NUL bytes.
///
/// Keys starting with `pmix` are reserved for the standard's attributes (RFC0009); that rule is
/// enforced where user data enters (Put), not here, because attributes are keys too.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Key(Cow<'static, str>);

impl Key {
    /// Checks and builds a key.
    ///
    /// The name of an attribute of the standard is not copied: the key refers to the static
    /// name instead. Job data repeats the same few attribute keys for every rank of a job, so a
    /// job of a million processes would otherwise allocate ten million copies of them.
    pub fn new(s: impl AsRef<str>) -> Result<Self, Error> {
        let s = s.as_ref();
        check_name(s, MAX_KEYLEN, true).map_err(|reason| Error::InvalidKey {
            len: s.len(),
            reason,
        })?;
        if is_reserved_key(s) {
            if let Some(a) = crate::attr::lookup(s) {
                return Ok(Key(Cow::Borrowed(a.key)));
            }
        }
        Ok(Key(Cow::Owned(s.to_owned())))
    }

    /// Checks and builds a key from a static string, without copying it.
    pub fn from_static(s: &'static str) -> Result<Self, Error> {
        check_name(s, MAX_KEYLEN, true).map_err(|reason| Error::InvalidKey {
            len: s.len(),
            reason,
        })?;
        Ok(Key(Cow::Borrowed(s)))
    }

    /// The key as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// True for keys in the namespace the standard reserves for its attributes (`pmix*`).
    pub fn is_reserved(&self) -> bool {
        is_reserved_key(&self.0)
    }
}

/// True for key strings in the namespace the standard reserves for its attributes: every key
/// that begins with `pmix` (RFC0009).
pub fn is_reserved_key(s: &str) -> bool {
    s.starts_with("pmix")
}

impl TryFrom<String> for Key {
    type Error = Error;
    /// Like [`Key::new`], keeping the string's allocation for a key that is not an attribute.
    fn try_from(s: String) -> Result<Self, Error> {
        if is_reserved_key(&s) {
            return Key::new(s);
        }
        check_name(&s, MAX_KEYLEN, true).map_err(|reason| Error::InvalidKey {
            len: s.len(),
            reason,
        })?;
        Ok(Key(Cow::Owned(s)))
    }
}

impl TryFrom<&str> for Key {
    type Error = Error;
    fn try_from(s: &str) -> Result<Self, Error> {
        Key::new(s)
    }
}

impl From<Key> for String {
    fn from(k: Key) -> String {
        k.0.into_owned()
    }
}

impl Borrow<str> for Key {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Key {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn check_name(s: &str, max: usize, nonempty: bool) -> Result<(), &'static str> {
    if nonempty && s.is_empty() {
        return Err("must not be empty");
    }
    if s.len() > max {
        return Err("too long");
    }
    if s.as_bytes().contains(&0) {
        return Err("contains a NUL byte");
    }
    Ok(())
}

/// A process: namespace plus rank (`pmix_proc_t`).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Proc {
    /// The job the process belongs to.
    pub nspace: Nspace,
    /// Its rank in that job, or a reserved rank naming a set of processes.
    pub rank: Rank,
}

impl Proc {
    /// Builds a process identifier.
    pub fn new(nspace: Nspace, rank: impl Into<Rank>) -> Self {
        Proc {
            nspace,
            rank: rank.into(),
        }
    }
}

impl fmt::Debug for Proc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Proc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.nspace, self.rank)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_keys_are_not_copied_and_compare_like_copies() {
        use crate::attr;
        let parsed = Key::new(String::from(attr::JOB_SIZE)).unwrap();
        assert!(matches!(parsed.0, Cow::Borrowed(_)));
        let from_string = Key::try_from(String::from(attr::HOSTNAME)).unwrap();
        assert!(matches!(from_string.0, Cow::Borrowed(_)));
        let owned = Key(Cow::Owned(attr::JOB_SIZE.to_owned()));
        assert_eq!(parsed, owned);
        let state = std::hash::RandomState::new();
        assert_eq!(
            std::hash::BuildHasher::hash_one(&state, &parsed),
            std::hash::BuildHasher::hash_one(&state, &owned)
        );
        assert_eq!(parsed.cmp(&owned), std::cmp::Ordering::Equal);
        assert_eq!(parsed.as_str(), attr::JOB_SIZE);
        assert_eq!(String::from(parsed), attr::JOB_SIZE);
        // Unknown `pmix` keys and user keys are kept as given.
        let unknown = Key::new("pmix.not.an.attribute").unwrap();
        assert!(matches!(unknown.0, Cow::Owned(_)));
        let user = Key::try_from(String::from("my-key")).unwrap();
        assert_eq!(user.as_str(), "my-key");
    }

    #[test]
    fn static_and_string_keys_are_checked_alike() {
        assert!(Key::from_static("").is_err());
        assert!(Key::try_from(String::new()).is_err());
        assert!(Key::try_from(String::from("a\0b")).is_err());
        assert!(Key::try_from("k".repeat(MAX_KEYLEN + 1)).is_err());
        assert!(Key::from_static("pmix.job.size").is_ok());
    }

    #[test]
    fn nspace_length_is_checked() {
        assert!(Nspace::new("a".repeat(MAX_NSLEN)).is_ok());
        let e = Nspace::new("a".repeat(MAX_NSLEN + 1)).unwrap_err();
        assert_eq!(
            e,
            Error::InvalidNspace {
                len: 256,
                reason: "too long"
            }
        );
        assert!(Nspace::new("a\0b").is_err());
    }

    #[test]
    fn key_length_is_checked() {
        assert!(Key::new("k".repeat(MAX_KEYLEN)).is_ok());
        assert!(Key::new("k".repeat(MAX_KEYLEN + 1)).is_err());
        assert!(Key::new("").is_err());
        assert!(Key::new("pmix.rank").unwrap().is_reserved());
        assert!(!Key::new("my.pmix").unwrap().is_reserved());
    }

    #[test]
    fn reserved_ranks_have_standard_values() {
        assert_eq!(Rank::UNDEF.0, u32::MAX);
        assert_eq!(Rank::WILDCARD.0, u32::MAX - 1);
        assert_eq!(Rank::LOCAL_NODE.0, u32::MAX - 2);
        assert_eq!(Rank::INVALID.0, u32::MAX - 3);
        assert_eq!(Rank::LOCAL_PEERS.0, u32::MAX - 4);
        assert!(Rank(0).is_valid() && !Rank::WILDCARD.is_valid());
    }
}
