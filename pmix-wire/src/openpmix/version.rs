//! OpenPMIx release numbers, as peers state them: a client in its handshake, a server in the
//! `PMIX_VERSION` variable it gives the processes it starts.

use std::fmt;

/// An OpenPMIx release: major, minor and release numbers (`5.0.11`), compared in that order.
///
/// What follows the release number (`rc1`, `a2`, a build suffix) is not kept: the reference
/// reads each part with `strtoul` and ignores the rest, and so picks its compatibility paths by
/// the three numbers alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Version {
    /// The major number.
    pub major: u8,
    /// The minor number.
    pub minor: u8,
    /// The release number.
    pub release: u8,
}

impl Version {
    /// The release whose clients stopped ending their handshake with a stray zero byte.
    pub const V4_2_3: Version = Version::new(4, 2, 3);

    /// A version from its three numbers.
    pub const fn new(major: u8, minor: u8, release: u8) -> Version {
        Version {
            major,
            minor,
            release,
        }
    }

    /// Reads `major.minor.release` with anything after each number's digits ignored
    /// (`5.0.11rc1` is 5.0.11, `4.2` is 4.2.0). `None` when the major or minor number is
    /// missing or a number does not fit a byte, as nothing sensible can be picked by it.
    pub fn parse(s: &str) -> Option<Version> {
        let mut parts = s.trim().split('.');
        let mut number = |required: bool| -> Option<u8> {
            let Some(part) = parts.next() else {
                return (!required).then_some(0);
            };
            let digits = part.bytes().take_while(u8::is_ascii_digit).count();
            match part.get(..digits) {
                Some(d) if !d.is_empty() => d.parse().ok(),
                _ if required => None,
                _ => Some(0),
            }
        };
        let major = number(true)?;
        let minor = number(true)?;
        let release = number(false)?;
        Some(Version::new(major, minor, release))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.release)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_strings_parse_by_their_numbers() {
        assert_eq!(Version::parse("5.0.11rc1"), Some(Version::new(5, 0, 11)));
        assert_eq!(Version::parse("4.2.2"), Some(Version::new(4, 2, 2)));
        assert_eq!(Version::parse(" 4.2 "), Some(Version::new(4, 2, 0)));
        assert_eq!(Version::parse("6.1.0a1"), Some(Version::new(6, 1, 0)));
        assert_eq!(Version::parse("5.0.x"), Some(Version::new(5, 0, 0)));
        for bad in ["", "5", "x.1.2", "5..1", "300.1.1"] {
            assert_eq!(Version::parse(bad), None, "{bad:?}");
        }
        assert!(Version::new(4, 2, 2) < Version::V4_2_3);
        assert!(Version::new(5, 0, 0) > Version::new(4, 9, 99));
        assert_eq!(Version::new(5, 0, 11).to_string(), "5.0.11");
    }
}
