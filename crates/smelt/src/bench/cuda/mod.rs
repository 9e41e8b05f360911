//! The CUDA backend, behind the cargo feature `cuda` (the one `cfg` switch: `enabled.rs`
//! with cudarc, or `disabled.rs` with the same names: an uninhabited [`Cuda`] whose `new`
//! returns a clear error).
//!
//! bf16 inputs and outputs with fp32 accumulation through cuBLAS (`cublasGemmEx`, and
//! `cublasGemmStridedBatchedEx` for the per-head attention GEMMs); random inputs, never
//! zeros; warm-up launches; CUDA-event timing of a run of launches, median of several runs;
//! input buffers rotated so that their total exceeds the L2 cache; every CUDA call checked.
//! The ceiling is a large square GEMM. cudarc loads the driver and cuBLAS at run time, so
//! the crate builds without a CUDA toolkit; a machine without a driver gets an error, not a
//! panic (the libraries' presence is checked before any call).

pub mod libs;

#[cfg(feature = "cuda")]
mod enabled;
#[cfg(feature = "cuda")]
pub use enabled::{Cuda, probe};

#[cfg(not(feature = "cuda"))]
mod disabled;
#[cfg(not(feature = "cuda"))]
pub use disabled::{Cuda, probe};
