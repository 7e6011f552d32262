//! The open-newtype pattern used for every integer enumeration that crosses a wire.
//!
//! Unknown values must survive a round trip (a newer peer may send a code we do not know), so
//! these are newtypes over their integer with associated constants, not Rust enums. `Debug`
//! prints the standard's name when the value is known and the number otherwise.

/// Defines an open newtype over an integer with named constants.
///
/// The first name given for a number is its canonical name; later aliases of the same number
/// are constants too, but `name()` reports the canonical one.
macro_rules! open_enum {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident($int:ty);
        $(
            $(#[$cmeta:meta])*
            $cname:ident = $value:expr
        ),* $(,)?
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        #[derive(serde::Serialize, serde::Deserialize)]
        #[serde(transparent)]
        $vis struct $name(pub $int);

        #[allow(missing_docs)]
        impl $name {
            $(
                $(#[$cmeta])*
                pub const $cname: $name = $name($value);
            )*

            /// Every named constant, in declaration order (aliases included).
            pub const NAMED: &'static [($name, &'static str)] = &[
                $(($name($value), stringify!($cname)),)*
            ];

            /// The standard's name of this value (without the `PMIX_` prefix), if known.
            pub fn name(self) -> Option<&'static str> {
                Self::NAMED.iter().find(|(v, _)| *v == self).map(|(_, n)| *n)
            }

            /// Looks a value up by its name (without the `PMIX_` prefix).
            pub fn from_name(name: &str) -> Option<$name> {
                Self::NAMED.iter().find(|(_, n)| *n == name).map(|(v, _)| *v)
            }
        }

        impl core::fmt::Debug for $name {
            fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
                match self.name() {
                    Some(n) => write!(f, "{}", n),
                    None => write!(f, "{}({})", stringify!($name), self.0),
                }
            }
        }

        impl From<$int> for $name {
            fn from(v: $int) -> Self {
                $name(v)
            }
        }

        impl From<$name> for $int {
            fn from(v: $name) -> $int {
                v.0
            }
        }
    };
}

pub(crate) use open_enum;
