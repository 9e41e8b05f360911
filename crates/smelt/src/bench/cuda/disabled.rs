//! Built without the `cuda` feature: every call says how to get the backend.

use crate::bench::{Job, Timings};
use crate::error::{Error, Result};

fn unavailable() -> Error {
    Error::Backend {
        backend: "cuda",
        message: "this smelt was built without CUDA support; rebuild with \
                 `cargo build --release --features cuda` (no CUDA toolkit needed to build; \
                 a driver is needed to run)"
            .into(),
    }
}

/// Whether a GPU can be used: never, in this build.
pub fn probe() -> Result<String> {
    Err(unavailable())
}

/// Always an error: no CUDA support in this build.
pub fn measure(_: &Job) -> Result<Timings> {
    Err(unavailable())
}
