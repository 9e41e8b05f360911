//! The CPU backend: f32 GEMMs with `matrixmultiply` (pure Rust, runtime-detected AVX/FMA
//! kernels, no BLAS to install), and the attention tiles' softmax as a loop, one thread.
//!
//! Inputs come from one pool of random values (never zero), filled once per run and at
//! least [`POOL_MIN_FLOATS`] long (larger than the caches), from which each launch takes its
//! operands at rotating offsets; outputs go to one scratch buffer. Each distinct kernel
//! shape is run once to warm up and once timed in each of `rounds` rounds, the rounds
//! interleaving the ceiling (a 1024³ GEMM) and every model, so that a drift in the
//! machine's speed hits them alike ([`super::measure`]); a shape's median is multiplied by
//! its launch count.

use std::time::Instant;

use super::TimingBackend;
use crate::error::{Error, Result};
use crate::plan::{Component, Kernel, Op, Pass, Plan};
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
    let (a, b, c) = k.operands();
    (a as usize, b as usize, c as usize)
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
        // Reserved, not allocated outright: a batch this machine cannot hold is refused
        // naming the flag, not aborted on a failed allocation.
        let (mut pool, mut out) = (Vec::new(), Vec::new());
        let refuse = |_| {
            Error::invalid(
                "tokens",
                format!(
                    "the CPU bench's operands take {:.1} GiB at this batch and this machine \
                     cannot allocate them; use fewer --tokens",
                    (len + c) as f64 * 4.0 / f64::from(1 << 30)
                ),
            )
        };
        pool.try_reserve_exact(len).map_err(refuse)?;
        out.try_reserve_exact(c).map_err(refuse)?;
        pool.extend((0..len).map(|_| rng.nonzero_unit()));
        out.resize(c, 0.0);
        Ok(Self { pool, out, call: 0 })
    }

    /// One launch of `k` on operands at the next offsets.
    fn launch(&mut self, k: &Kernel) {
        let (a_len, b_len, c_len) = floats(k);
        let room = self.pool.len() - a_len - b_len;
        let a0 = (self.call.wrapping_mul(a_len + b_len + 64)) % (room + 1);
        let b0 = a0 + a_len;
        self.call += 1;
        match k.op {
            Op::Gemm => self.gemm(k, a0, b0),
            Op::Softmax => {
                let (s, rest) = self.pool.split_at(b0);
                softmax(
                    k.pass,
                    k.n as usize,
                    &s[a0..a0 + a_len],
                    &rest[..b_len],
                    &mut self.out[..c_len],
                );
            }
        }
        std::hint::black_box(&self.out[0]);
    }

    /// One launch of the GEMM `k` with A at `a0` and B at `b0` in the pool.
    fn gemm(&mut self, k: &Kernel, a0: usize, b0: usize) {
        let (m, n, kk) = (k.m as usize, k.n as usize, k.k as usize);
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
    }

    /// One warm-up launch, then one timed.
    fn time(&mut self, k: &Kernel) -> f64 {
        self.launch(k);
        let t = Instant::now();
        self.launch(k);
        t.elapsed().as_secs_f64()
    }
}

/// A fused attention kernel's softmax over rows of `n` scores (module docs of
/// [`crate::plan::Op::Softmax`]): forward, the online softmax of `scores` into
/// `out` (each row's maximum, the exponentials, their sum, the scaling); backward, the
/// probabilities recomputed from the scores and a row's log-sum-exp (here its first
/// score) and the scores' gradient `P ∘ (dP − D)` from `grads` (`D` here the row's first
/// gradient).
fn softmax(pass: Pass, n: usize, scores: &[f32], grads: &[f32], out: &mut [f32]) {
    let rows = scores.chunks_exact(n).zip(grads.chunks_exact(n));
    for ((s, g), o) in rows.zip(out.chunks_exact_mut(n)) {
        if pass == Pass::Forward {
            let max = s.iter().copied().fold(f32::NEG_INFINITY, f32::max);
            let mut sum = 0.0;
            for (o, &x) in o.iter_mut().zip(s) {
                *o = (x - max).exp();
                sum += *o;
            }
            let scale = 1.0 / sum;
            o.iter_mut().for_each(|o| *o *= scale);
        } else {
            let (lse, d) = (s[0], g[0]);
            for ((o, &x), &dp) in o.iter_mut().zip(s).zip(g) {
                *o = (x - lse).exp() * (dp - d);
            }
        }
    }
}

/// The ceiling kernel: a 1024³ GEMM.
fn ceiling_kernel() -> Kernel {
    Kernel::gemm(Component::Projections, Pass::Forward, [1024, 1024, 1024], 1)
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
    fn estimate(&self, first: f64, rounds: usize) -> f64 {
        let rate = ceiling_kernel().flops() as f64 / first;
        let per_round: f64 = self
            .kernels
            .iter()
            .flatten()
            .map(|k| 2.0 * (k.flops() as f64 / k.count as f64 / (0.25 * rate) + 5e-6))
            .sum();
        rounds as f64 * (per_round + 2.0 * first)
    }

    /// The median of 9 timed `1 x 1 x 1` GEMM calls.
    fn time_floor(&mut self) -> Result<Option<f64>> {
        let tiny = Kernel::gemm(Component::Projections, Pass::Forward, [1, 1, 1], 1);
        let mut t: Vec<f64> = (0..9).map(|_| self.buffers.time(&tiny)).collect();
        t.sort_by(f64::total_cmp);
        Ok(Some(t[t.len() / 2]))
    }

    fn device(&self) -> String {
        format!(
            "CPU, 1 thread, f32 (matrixmultiply; {} cores available)",
            std::thread::available_parallelism().map_or(1, |n| n.get())
        )
    }
}
