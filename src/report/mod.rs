//! Rendering results: a human table, or the result structs serialised as JSON or TOML.
//!
//! The result structs of the library derive `Serialize` and *are* the JSON (and TOML)
//! contract; the table writer is the only hand-written layout.

mod csv;
mod markdown;
pub mod plot;
mod table;
mod tabular;

use serde::Serialize;

pub use csv::csv;
pub use markdown::markdown;
pub use table::{comparison_table, cost_table, match_table, table};
pub use tabular::{Field, Tabular};

use crate::error::{Error, Result};

/// `value` as pretty JSON, with a trailing newline.
pub fn to_json<T: Serialize>(value: &T) -> Result<String> {
    serde_json::to_string_pretty(value)
        .map(|s| s + "\n")
        .map_err(|e| Error::Parse {
            message: format!("serialising JSON: {e}"),
        })
}

/// `value` as TOML.
pub fn to_toml<T: Serialize>(value: &T) -> Result<String> {
    toml::to_string(value).map_err(|e| Error::Parse {
        message: format!("serialising TOML: {e}"),
    })
}

/// `n` with thousands separators.
pub fn group_digits(n: u128) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `x` in short scientific notation, e.g. `1.330e9`.
pub fn short(x: f64) -> String {
    if x == 0.0 {
        return "0".to_owned();
    }
    format!("{x:.3e}")
}

/// A signed percentage with two decimals, e.g. `+2.91%`.
pub fn percent(x: f64) -> String {
    format!("{:+.2}%", x * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_are_grouped() {
        assert_eq!(group_digits(0), "0");
        assert_eq!(group_digits(999), "999");
        assert_eq!(group_digits(1000), "1,000");
        assert_eq!(group_digits(1_330_053_120), "1,330,053,120");
        assert_eq!(short(1_330_053_120.0), "1.330e9");
        assert_eq!(percent(0.029), "+2.90%");
    }
}
