//! Macros the OpenPMIx codec defines its types with.

/// Defines an open newtype over `u8` with named constants whose `Debug` prints the name.
macro_rules! open_u8 {
    (
        $(#[$meta:meta])*
        pub struct $name:ident;
        $( $(#[$cmeta:meta])* $cname:ident = $value:expr ),* $(,)?
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(pub u8);

        impl $name {
            $( $(#[$cmeta])* pub const $cname: $name = $name($value); )*

            /// Every named value.
            pub const NAMED: &'static [($name, &'static str)] =
                &[$(($name($value), stringify!($cname)),)*];

            /// The reference's name of this value (without prefix), if known.
            pub fn name(self) -> Option<&'static str> {
                Self::NAMED.iter().find(|(v, _)| *v == self).map(|(_, n)| *n)
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "{}({})", stringify!($name), self.0),
                }
            }
        }
    };
}
pub(crate) use open_u8;
