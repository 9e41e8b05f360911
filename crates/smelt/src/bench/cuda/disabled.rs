//! Built without the `cuda` feature: every call says how to get the backend.

use crate::bench::plan::Plan;
use crate::bench::{Deadline, Measurement};
use crate::error::{Error, Result};
use crate::progress::Progress;

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
pub fn measure(
    _plans: &[&Plan],
    _repeats: usize,
    _deadline: &Deadline,
    _progress: &dyn Progress,
) -> Result<(Vec<Measurement>, Vec<f64>, String)> {
    Err(unavailable())
}
