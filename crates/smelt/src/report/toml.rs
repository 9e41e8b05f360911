//! TOML: the result structs serialised.

use serde::Serialize;

use crate::error::{Error, Result};

/// `value` as TOML.
pub(crate) fn export<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    toml::to_string(value).map_err(|e| Error::serialize("TOML", e))
}
