//! The CPU backend: f32 GEMMs with `matrixmultiply` (pure Rust, runtime-detected AVX/FMA
//! kernels, no BLAS to install, already in our dependency tree through `good_lp`), one
//! thread.
//!
//! Each distinct kernel shape is run on random inputs (never zeros), once to warm up and
//! then timed, in each of `repeats` rounds that interleave the models benchmarked together;
//! its median time is multiplied by its launch count. Inputs rotate through enough buffer
//! sets to span 32 MiB, so that a small shape is not timed out of a warm cache only.

use std::time::Instant;

use super::{KernelTime, Measurement};
use crate::bench::plan::{Kernel, Plan};
use crate::error::Result;
use crate::progress::Progress;
use crate::rng::Lcg;

/// One timed launch of `k` (after one warm-up launch), on freshly allocated random inputs
/// rotated across 32 MiB of buffer sets.
fn time_once(k: &Kernel, rng: &mut Lcg) -> f64 {
    let (m, n, kk) = (k.m as usize, k.n as usize, k.k as usize);
    let batch = k.batch as usize;
    let set_bytes = 4 * batch * (m * kk + kk * n + m * n);
    let sets = (32usize << 20).div_ceil(set_bytes.max(1)).clamp(1, 8);
    let mut buffers: Vec<(Vec<f32>, Vec<f32>, Vec<f32>)> = (0..sets)
        .map(|_| {
            (
                (0..batch * m * kk).map(|_| rng.nonzero_unit()).collect(),
                (0..batch * kk * n).map(|_| rng.nonzero_unit()).collect(),
                vec![0.0; batch * m * n],
            )
        })
        .collect();
    let mut run = |i: usize| {
        let (a, b, c) = &mut buffers[i % sets];
        for j in 0..batch {
            // SAFETY: the slices hold batch * m*k, k*n and m*n elements, row-major with the
            // strides given, so every index `matrixmultiply` touches is in bounds.
            unsafe {
                matrixmultiply::sgemm(
                    m,
                    kk,
                    n,
                    1.0,
                    a.as_ptr().add(j * m * kk),
                    kk as isize,
                    1,
                    b.as_ptr().add(j * kk * n),
                    n as isize,
                    1,
                    0.0,
                    c.as_mut_ptr().add(j * m * n),
                    n as isize,
                    1,
                );
            }
        }
        std::hint::black_box(&c[0]);
    };
    run(0);
    let t = Instant::now();
    run(sets - 1 + usize::from(sets == 1));
    t.elapsed().as_secs_f64()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The ceiling kernel: a 1024³ GEMM.
fn ceiling_kernel() -> Kernel {
    Kernel {
        component: crate::bench::plan::Component::Projections,
        pass: crate::bench::plan::Pass::Forward,
        m: 1024,
        n: 1024,
        k: 1024,
        batch: 1,
        count: 1,
    }
}

/// Runs `plans` on the CPU, interleaved: each of `repeats` rounds times the ceiling GEMM
/// and then every kernel shape of every plan once, so that a drift in the machine's speed
/// affects all models alike; each shape keeps its median. Returns the measurements and
/// the ceiling in FLOP/s.
pub fn measure(
    plans: &[&Plan],
    repeats: usize,
    progress: &dyn Progress,
) -> Result<(Vec<Measurement>, f64)> {
    let mut seed = Lcg::new(0x5EED);
    let ceiling = ceiling_kernel();
    let mut ceiling_times = Vec::new();
    let mut times: Vec<Vec<Vec<f64>>> = plans
        .iter()
        .map(|p| vec![Vec::new(); p.kernels.len()])
        .collect();
    let shapes: usize = plans.iter().map(|p| p.kernels.len()).sum();
    progress.begin(
        &format!("timing {shapes} kernel shapes and the ceiling, {repeats} rounds"),
        (repeats.max(1) * (shapes + 1)) as u64,
    );
    for _ in 0..repeats.max(1) {
        ceiling_times.push(time_once(&ceiling, &mut seed));
        progress.advance(1);
        for (p, t) in plans.iter().zip(times.iter_mut()) {
            for (k, tk) in p.kernels.iter().zip(t.iter_mut()) {
                tk.push(time_once(k, &mut seed));
                progress.advance(1);
            }
        }
    }
    progress.end();
    let device = format!(
        "CPU, 1 thread, f32 (matrixmultiply; {} cores available)",
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    let measurements = plans
        .iter()
        .zip(times)
        .map(|(p, t)| Measurement {
            device: device.clone(),
            kernels: p
                .kernels
                .iter()
                .zip(t)
                .map(|(k, tk)| KernelTime {
                    kernel: *k,
                    seconds: median(tk) * k.count as f64,
                })
                .collect(),
        })
        .collect();
    Ok((measurements, ceiling.flops() as f64 / median(ceiling_times)))
}
