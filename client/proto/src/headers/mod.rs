//! Typed custom headers: the Java `CommandCustomHeader` classes, each flattened into a
//! command's ext fields (docs/protocol.md#typed-headers-and-ext-fields,
//! docs/protocol.md#requests).
//!
//! Every header is a plain struct implementing [`CommandHeader`]. Field names are Rust
//! snake_case; the ext key each one travels under is the Java field name, listed in the
//! header's [`HeaderKeys::KEYS`] table together with whether it is required.
//!
//! Mapping rules, shared by every header through [`HeaderField`]:
//!
//! * A required field (`String`, `i32`, `i64`, `bool`, an enum) that is absent decodes to
//!   [`HeaderError::Missing`] naming the Java key; a value that does not parse with Java's
//!   rules decodes to [`HeaderError::Invalid`].
//! * An `Option<_>` field is omitted on encode when `None` (Java omits null fields) and
//!   decodes to `None` when absent.
//! * Numbers are decimal text, booleans `true`/`false` (only a case-insensitive `true` reads
//!   as true,
//!   docs/protocol.md#java-boolean-parsing), enums their Java constant name.
//! * Unknown keys (auth keys such as `AccessKey`, the 5.x base keys a header does not name)
//!   are ignored on decode and left untouched on encode.
//!
//! Submodules group headers by who talks to whom: [`namesrv`] (broker and admin to name
//! server), [`send`] (producer to broker), [`consumer`] (pull, offsets, membership),
//! [`admin`] (admin tool to broker, broker to client), [`pop`] (5.x pop consumption),
//! [`controller`] (broker to the 5.x controller and back), and [`base`] (the 5.x keys every
//! request may carry).

use crate::error::HeaderError;
use crate::ext::{parse_bool, parse_i32, parse_i64, ExtFields};
use crate::pairs::push_display;

pub mod admin;
pub mod base;
pub mod consumer;
pub mod controller;
pub mod namesrv;
pub mod pop;
pub mod send;
pub mod stats;

pub use admin::*;
pub use base::*;
pub use consumer::*;
pub use controller::*;
pub use namesrv::*;
pub use pop::*;
pub use send::*;
pub use stats::*;

/// One value of a typed header: how it is read from and written to the ext fields.
///
/// Implemented for the Java types that appear in headers and for `Option` of each, which is
/// how a header says a field is nullable.
pub trait HeaderField: Sized {
    /// True when the field must be present (a non-`Option` type).
    const REQUIRED: bool;
    /// Reads the field stored under `key`.
    fn read(ext: &ExtFields, key: &'static str) -> Result<Self, HeaderError>;
    /// Writes the field under `key` (nothing for `None`).
    fn write(&self, ext: &mut ExtFields, key: &'static str);
}

/// A header value that is a single scalar: the building block of [`HeaderField`].
pub trait HeaderScalar: Sized {
    /// Parses the ext value of `key` with Java's rules.
    fn parse(key: &'static str, value: &str) -> Result<Self, HeaderError>;
    /// Appends the ext value text to `text` (straight into the ext fields' one string, see
    /// `ext`).
    fn render(&self, text: &mut String);
}

impl HeaderScalar for String {
    fn parse(_key: &'static str, value: &str) -> Result<String, HeaderError> {
        Ok(value.to_owned())
    }
    fn render(&self, text: &mut String) {
        text.push_str(self);
    }
}

impl HeaderScalar for i32 {
    fn parse(key: &'static str, value: &str) -> Result<i32, HeaderError> {
        parse_i32(key, value)
    }
    fn render(&self, text: &mut String) {
        push_display(text, self);
    }
}

impl HeaderScalar for i64 {
    fn parse(key: &'static str, value: &str) -> Result<i64, HeaderError> {
        parse_i64(key, value)
    }
    fn render(&self, text: &mut String) {
        push_display(text, self);
    }
}

impl HeaderScalar for bool {
    fn parse(_key: &'static str, value: &str) -> Result<bool, HeaderError> {
        Ok(parse_bool(value))
    }
    fn render(&self, text: &mut String) {
        push_display(text, self);
    }
}

impl<T: HeaderScalar> HeaderField for T {
    const REQUIRED: bool = true;
    fn read(ext: &ExtFields, key: &'static str) -> Result<T, HeaderError> {
        T::parse(key, ext.required_str(key)?)
    }
    fn write(&self, ext: &mut ExtFields, key: &'static str) {
        ext.insert_rendered(key, |text| self.render(text));
    }
}

impl<T: HeaderScalar> HeaderField for Option<T> {
    const REQUIRED: bool = false;
    fn read(ext: &ExtFields, key: &'static str) -> Result<Option<T>, HeaderError> {
        ext.get(key).map(|value| T::parse(key, value)).transpose()
    }
    fn write(&self, ext: &mut ExtFields, key: &'static str) {
        if let Some(value) = self {
            ext.insert_rendered(key, |text| value.render(text));
        }
    }
}

/// The wire keys of a typed header, for generic tests and diagnostics.
pub trait HeaderKeys {
    /// `(ext key, required)` for every field, in declaration order.
    const KEYS: &'static [(&'static str, bool)];
}

/// Declares a header struct whose fields map one-to-one onto ext keys.
///
/// ```text
/// command_header! {
///     /// docs
///     pub struct Name {
///         /// docs
///         field_name: Type => "javaKey",
///     }
/// }
/// ```
macro_rules! command_header {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$fmeta:meta])* $field:ident : $ty:ty => $key:literal ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq, Eq)]
        pub struct $name {
            $( $(#[$fmeta])* pub $field: $ty, )*
        }

        impl $crate::command::CommandHeader for $name {
            fn to_ext_fields(&self, ext: &mut $crate::ext::ExtFields) {
                let _ = &ext;
                $( $crate::headers::HeaderField::write(&self.$field, ext, $key); )*
            }

            fn from_ext_fields(
                ext: &$crate::ext::ExtFields,
            ) -> Result<$name, $crate::error::HeaderError> {
                let _ = ext;
                Ok($name {
                    $( $field: $crate::headers::HeaderField::read(ext, $key)?, )*
                })
            }
        }

        impl $crate::headers::HeaderKeys for $name {
            const KEYS: &'static [(&'static str, bool)] = &[
                $( ($key, <$ty as $crate::headers::HeaderField>::REQUIRED), )*
            ];
        }
    };
}

pub(crate) use command_header;

/// Declares a Java enum carried by name in a header, with lookup in both directions.
///
/// Decoding compares case-insensitively, as Java's `valueOf(value.toUpperCase())` does for
/// the header enums (docs/protocol.md#typed-headers-and-ext-fields).
macro_rules! header_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident => $text:literal ),+ $(,)?
        }
        default $default:ident
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $( $(#[$vmeta])* $variant, )+
        }

        impl $name {
            /// The Java constant name.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $( $name::$variant => $text, )+
                }
            }
        }

        impl Default for $name {
            fn default() -> $name {
                $name::$default
            }
        }

        impl $crate::headers::HeaderScalar for $name {
            fn parse(
                key: &'static str,
                value: &str,
            ) -> Result<$name, $crate::error::HeaderError> {
                $( if value.eq_ignore_ascii_case($text) { return Ok($name::$variant); } )+
                Err($crate::error::HeaderError::Invalid {
                    field: key,
                    value: value.to_owned(),
                    expected: concat!("a ", stringify!($name), " name"),
                })
            }
            fn render(&self, text: &mut String) {
                text.push_str(self.as_str());
            }
        }
    };
}

pub(crate) use header_enum;
