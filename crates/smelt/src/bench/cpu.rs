//! The CPU backend: f32 GEMMs with `matrixmultiply` (pure Rust, runtime-detected AVX/FMA
//! kernels, no BLAS to install), one thread.
//!
//! Inputs come from one pool of random values (never zero), filled once per run and at
//! least [`POOL_MIN_FLOATS`] long (larger than the caches), from which each launch takes its
//! operands at rotating offsets; outputs go to one scratch buffer. Each distinct kernel
//! shape is run once to warm up and once timed in each of `repeats` rounds, the rounds
//! interleaving the ceiling (a 1024³ GEMM) and every model, so that a drift in the
//! machine's speed hits them alike ([`super::measure`]); a shape's median is multiplied by
//! its launch count.

use std::time::Instant;

use super::TimingBackend;
use crate::bench::plan::{Component, Kernel, Pass, Plan};
use crate::error::{Error, Result};
use crate::rng::Lcg;

/// The pool's least length in floats (64 MiB).
pub const POOL_MIN_FLOATS: usize = 16 << 20;
/// The most floats one launch's operands may take (4 GiB).
pub const MAX_LAUNCH_FLOATS: usize = 1 << 30;

/// The pool, the scratch output and the rotation.
struct Buffers {
    pool: Vec<f32>,
    out: Vec<f32>,
    call: usize,
}

fn floats(k: &Kernel) -> (usize, usize, usize) {
    let b = k.batch as usize;
    let (m, n, kk) = (k.m as usize, k.n as usize, k.k as usize);
    (b * m * kk, b * kk * n, b * m * n)
}

impl Buffers {
    fn new(kernels: &[Kernel]) -> Result<Self> {
        let (mut ab, mut c) = (0usize, 0usize);
        for k in kernels {
            let (a, b, cc) = floats(k);
            if a + b + cc > MAX_LAUNCH_FLOATS {
                return Err(Error::invalid(
                    "tokens",
                    format!(
                        "one {}x{}x{} launch (x{}) needs {:.1} GiB, over the CPU backend's \
                         limit of {} GiB; use fewer --tokens",
                        k.m,
                        k.n,
                        k.k,
                        k.batch,
                        (a + b + cc) as f64 * 4.0 / f64::from(1 << 30),
                        (MAX_LAUNCH_FLOATS * 4) >> 30
                    ),
                ));
            }
            ab = ab.max(a + b);
            c = c.max(cc);
        }
        let mut rng = Lcg::new(0x5EED);
        let len = POOL_MIN_FLOATS.max(2 * ab);
        Ok(Self {
            pool: (0..len).map(|_| rng.nonzero_unit()).collect(),
            out: vec![0.0; c],
            call: 0,
        })
    }

    /// One launch of `k` on operands at the next offsets.
    fn launch(&mut self, k: &Kernel) {
        let (m, n, kk) = (k.m as usize, k.n as usize, k.k as usize);
        let (a_len, b_len, _) = floats(k);
        let room = self.pool.len() - a_len - b_len;
        let a0 = (self.call.wrapping_mul(a_len + b_len + 64)) % (room + 1);
        let b0 = a0 + a_len;
        self.call += 1;
        let (a, b, c) = (
            self.pool.as_ptr(),
            self.pool.as_ptr(),
            self.out.as_mut_ptr(),
        );
        for j in 0..k.batch as usize {
            // SAFETY: A spans `a0 .. a0 + batch·m·k` and B `b0 .. b0 + batch·k·n` of the pool
            // (`b0 + b_len <= pool.len()` by the choice of `room`), C `0 .. batch·m·n` of the
            // output (sized for the largest kernel); each GEMM `j` reads and writes inside its
            // own row-major block with the strides given.
            unsafe {
                matrixmultiply::sgemm(
                    m,
                    kk,
                    n,
                    1.0,
                    a.add(a0 + j * m * kk),
                    kk as isize,
                    1,
                    b.add(b0 + j * kk * n),
                    n as isize,
                    1,
                    0.0,
                    c.add(j * m * n),
                    n as isize,
                    1,
                );
            }
        }
        std::hint::black_box(&self.out[0]);
    }

    /// One warm-up launch, then one timed.
    fn time(&mut self, k: &Kernel) -> f64 {
        self.launch(k);
        let t = Instant::now();
        self.launch(k);
        t.elapsed().as_secs_f64()
    }
}

/// The ceiling kernel: a 1024³ GEMM.
fn ceiling_kernel() -> Kernel {
    Kernel {
        component: Component::Projections,
        pass: Pass::Forward,
        m: 1024,
        n: 1024,
        k: 1024,
        batch: 1,
        count: 1,
    }
}

/// The CPU backend, opened on a run's plans: their kernels and the buffers they need.
pub struct Cpu {
    kernels: Vec<Vec<Kernel>>,
    buffers: Buffers,
}

impl Cpu {
    /// Opens the backend on `plans`: an error if one launch would take more memory than
    /// [`MAX_LAUNCH_FLOATS`].
    pub fn new(plans: &[&Plan]) -> Result<Self> {
        let kernels: Vec<Vec<Kernel>> = plans.iter().map(|p| p.kernels.clone()).collect();
        let all: Vec<Kernel> = kernels
            .iter()
            .flatten()
            .copied()
            .chain([ceiling_kernel()])
            .collect();
        Ok(Self {
            buffers: Buffers::new(&all)?,
            kernels,
        })
    }
}

/// One warm-up launch and one timed per call, whether warm or not.
impl TimingBackend for Cpu {
    fn ceiling(&self) -> Kernel {
        ceiling_kernel()
    }

    fn time_ceiling(&mut self, _warm: bool) -> Result<f64> {
        Ok(self.buffers.time(&ceiling_kernel()))
    }

    fn time(&mut self, plan: usize, index: usize, _warm: bool) -> Result<f64> {
        let k = super::backend::shape(&self.kernels, plan, index)?;
        Ok(self.buffers.time(&k))
    }

    /// Each launch (warm-up and timed) at a quarter of the ceiling's first rate plus 5 µs,
    /// and two ceiling launches per round.
    fn estimate(&self, first: f64, repeats: usize) -> f64 {
        let rate = ceiling_kernel().flops() as f64 / first;
        let per_round: f64 = self
            .kernels
            .iter()
            .flatten()
            .map(|k| 2.0 * (k.flops() as f64 / k.count as f64 / (0.25 * rate) + 5e-6))
            .sum();
        repeats as f64 * (per_round + 2.0 * first)
    }

    fn device(&self) -> String {
        format!(
            "CPU, 1 thread, f32 (matrixmultiply; {} cores available)",
            std::thread::available_parallelism().map_or(1, |n| n.get())
        )
    }
}
