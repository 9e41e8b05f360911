//! JSON: the result structs serialised, pretty, with a trailing newline.

use serde::Serialize;

use crate::error::{Error, Result};

/// `value` as pretty JSON.
pub(crate) fn export<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    serde_json::to_string_pretty(value)
        .map(|s| s + "\n")
        .map_err(|e| Error::serialize("JSON", e))
}
