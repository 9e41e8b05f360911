//! Built without the `cuda` feature: every call says how to get the backend.

use crate::bench::TimingBackend;
use crate::error::{Error, Result};
use crate::plan::{Kernel, Plan};

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

/// The CUDA backend, which this build cannot open: no value of it exists.
pub enum Cuda {}

impl Cuda {
    /// Always an error: no CUDA support in this build.
    pub fn new(_: &[&Plan]) -> Result<Self> {
        Err(unavailable())
    }
}

impl TimingBackend for Cuda {
    fn ceiling(&self) -> Kernel {
        match *self {}
    }

    fn time_ceiling(&mut self, _: bool) -> Result<f64> {
        match *self {}
    }

    fn time(&mut self, _: usize, _: usize, _: bool) -> Result<f64> {
        match *self {}
    }

    fn estimate(&self, _: f64, _: usize) -> f64 {
        match *self {}
    }

    fn device(&self) -> String {
        match *self {}
    }
}
