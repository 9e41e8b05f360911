//! Enums with names: a family, a format, a backend, a start grid. Strings are for people;
//! each such enum is declared once with `named_enum!`, which lists its values
//! ([`Named::ALL`]) and parses and prints them by name.

use crate::error::{Error, Result};

/// The name of a folder entry made of `labels` joined by `-`: ASCII letters, digits, `.`,
/// `_` and `-` kept, anything else `_` (so that a label never makes a path).
pub fn entry_name(labels: &[&str]) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .map(
                |c| match c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    true => c,
                    false => '_',
                },
            )
            .collect()
    };
    let joined: Vec<String> = labels.iter().map(|l| clean(l)).collect();
    let name = joined.join("-");
    match name.trim_matches('.').is_empty() {
        true => "model".to_owned(),
        false => name,
    }
}

/// A unit-only enum whose values have names.
pub trait Named: Copy + PartialEq + 'static {
    /// Every value, in documentation order.
    const ALL: &'static [Self];
    /// What a value names, for errors (e.g. `"format"`).
    const KIND: &'static str;

    /// The value's name.
    fn as_str(self) -> &'static str;

    /// Other names the value is read under (kept for files and flags written before it was
    /// renamed); never printed.
    fn aliases(self) -> &'static [&'static str] {
        &[]
    }

    /// Every name, comma-separated.
    fn names() -> String {
        Self::ALL
            .iter()
            .map(|v| v.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The value named `s`, or an error listing the names.
    fn parse_name(s: &str) -> Result<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|v| v.as_str() == s || v.aliases().contains(&s))
            .ok_or_else(|| {
                Error::invalid(
                    Self::KIND,
                    format!("'{s}' is not one smelt knows; one of {}", Self::names()),
                )
            })
    }
}

/// Declares a unit-only enum with a name per value: the enum (with the usual derives, and
/// serde using the names), [`Named`], `FromStr` and `Display`. A value may list other names
/// it is read under (`Value = "name" | "old-name"`), never printed.
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident: $kind:literal {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal $(| $alias:literal)* ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
        )]
        $vis enum $name {
            $( $(#[$vmeta])* #[serde(rename = $text $(, alias = $alias)*)] $variant ),+
        }

        impl $name {
            /// Every value, in documentation order.
            pub const ALL: &'static [Self] = &[$($name::$variant),+];

            /// The value's name.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text),+
                }
            }
        }

        impl $crate::names::Named for $name {
            const ALL: &'static [Self] = $name::ALL;
            const KIND: &'static str = $kind;

            fn as_str(self) -> &'static str {
                $name::as_str(self)
            }

            fn aliases(self) -> &'static [&'static str] {
                match self {
                    $($name::$variant => &[$($alias),*]),+
                }
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::error::Error;

            fn from_str(s: &str) -> $crate::error::Result<Self> {
                <$name as $crate::names::Named>::parse_name(s)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str($crate::names::Named::as_str(*self))
            }
        }
    };
}
pub(crate) use named_enum;
