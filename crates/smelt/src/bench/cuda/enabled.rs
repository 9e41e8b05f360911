//! The CUDA backend proper (feature `cuda`): cuBLAS bf16 GEMMs through cudarc.

use std::sync::Arc;

use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, StridedBatchedConfig};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};
use half::bf16;

use crate::bench::plan::{Component, Kernel, Pass, Plan};
use crate::bench::{KernelTime, Measurement};
use crate::error::{Error, Result};
use crate::progress::Progress;
use crate::rng::Lcg;

/// Bytes the rotating input buffers of one kernel shape span at least (about 2x the L2 of
/// an H100/H200).
const ROTATION_BYTES: usize = 128 << 20;
/// Most bytes the buffers of one kernel shape may take.
const MAX_BUFFER_BYTES: usize = 8 << 30;
/// Warm-up launches per shape.
const WARMUP: usize = 3;
/// A timed run lasts at least this long (launches are repeated within it).
const MIN_RUN_SECONDS: f64 = 2e-3;

fn fail(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Backend {
        backend: "cuda",
        message: format!("{what}: {e}").into(),
    }
}

struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    blas: CudaBlas,
    name: String,
}

fn init() -> Result<Gpu> {
    // SAFETY: these only try to dlopen the libraries; nothing is called through them.
    let driver = unsafe { cudarc::driver::sys::is_culib_present() };
    if !driver {
        return Err(fail(
            "no CUDA driver",
            "libcuda could not be loaded (is an NVIDIA driver installed?)",
        ));
    }
    // SAFETY: as above.
    let cublas = unsafe { cudarc::cublas::sys::is_culib_present() };
    if !cublas {
        return Err(fail("no cuBLAS", "libcublas could not be loaded"));
    }
    let count = CudaContext::device_count().map_err(|e| fail("counting devices", e))?;
    if count < 1 {
        return Err(fail("no GPU", "the driver reports no CUDA device"));
    }
    let ctx = CudaContext::new(0).map_err(|e| fail("creating a context on GPU 0", e))?;
    let name = ctx.name().map_err(|e| fail("reading the device name", e))?;
    let stream = ctx.default_stream();
    let blas = CudaBlas::new(stream.clone()).map_err(|e| fail("creating a cuBLAS handle", e))?;
    Ok(Gpu {
        ctx,
        stream,
        blas,
        name,
    })
}

fn random(len: usize, rng: &mut Lcg) -> Vec<bf16> {
    (0..len)
        .map(|_| bf16::from_f32(rng.nonzero_unit()))
        .collect()
}

struct Buffers {
    a: CudaSlice<bf16>,
    b: CudaSlice<bf16>,
    c: CudaSlice<bf16>,
}

impl Gpu {
    /// Times one launch of `batch` GEMMs of `m x n x k` (median seconds per launch).
    fn time(
        &self,
        m: usize,
        n: usize,
        k: usize,
        batch: usize,
        repeats: usize,
        seed: &mut Lcg,
    ) -> Result<f64> {
        let elems = batch * (m * k + k * n + m * n);
        let set_bytes = 2 * elems;
        if set_bytes > MAX_BUFFER_BYTES {
            return Err(fail(
                "kernel too large",
                format!("{batch} x {m}x{n}x{k} needs {set_bytes} bytes; use fewer --tokens"),
            ));
        }
        let sets = ROTATION_BYTES
            .div_ceil(set_bytes.max(1))
            .clamp(1, (MAX_BUFFER_BYTES / set_bytes.max(1)).clamp(1, 64));
        let mut bufs = Vec::with_capacity(sets);
        for _ in 0..sets {
            let a = self
                .stream
                .clone_htod(&random(batch * m * k, seed))
                .map_err(|e| fail("copying inputs", e))?;
            let b = self
                .stream
                .clone_htod(&random(batch * k * n, seed))
                .map_err(|e| fail("copying inputs", e))?;
            let c = self
                .stream
                .alloc_zeros::<bf16>(batch * m * n)
                .map_err(|e| fail("allocating outputs", e))?;
            bufs.push(Buffers { a, b, c });
        }
        let cfg = GemmConfig {
            transa: cublasOperation_t::CUBLAS_OP_N,
            transb: cublasOperation_t::CUBLAS_OP_N,
            m: m as i32,
            n: n as i32,
            k: k as i32,
            alpha: bf16::ONE,
            lda: m as i32,
            ldb: k as i32,
            beta: bf16::ZERO,
            ldc: m as i32,
        };
        let launch = |bufs: &mut Vec<Buffers>, i: usize| -> Result<()> {
            let set = &mut bufs[i % sets];
            // SAFETY: the buffers hold batch * (m*k, k*n, m*n) elements, column-major with
            // the leading dimensions and strides given, so cuBLAS stays in bounds.
            let r = unsafe {
                if batch == 1 {
                    self.blas.gemm(cfg, &set.a, &set.b, &mut set.c)
                } else {
                    self.blas.gemm_strided_batched(
                        StridedBatchedConfig {
                            gemm: cfg,
                            batch_size: batch as i32,
                            stride_a: (m * k) as i64,
                            stride_b: (k * n) as i64,
                            stride_c: (m * n) as i64,
                        },
                        &set.a,
                        &set.b,
                        &mut set.c,
                    )
                }
            };
            r.map_err(|e| fail(&format!("cuBLAS GEMM {batch} x {m}x{n}x{k}"), e))
        };
        let timed = |bufs: &mut Vec<Buffers>, launches: usize, offset: usize| -> Result<f64> {
            let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
            let start = self
                .ctx
                .new_event(flags)
                .map_err(|e| fail("creating an event", e))?;
            let end = self
                .ctx
                .new_event(flags)
                .map_err(|e| fail("creating an event", e))?;
            start
                .record(&self.stream)
                .map_err(|e| fail("recording an event", e))?;
            for i in 0..launches {
                launch(bufs, offset + i)?;
            }
            end.record(&self.stream)
                .map_err(|e| fail("recording an event", e))?;
            let ms = start
                .elapsed_ms(&end)
                .map_err(|e| fail("reading an event", e))?;
            Ok(f64::from(ms) * 1e-3 / launches as f64)
        };
        for i in 0..WARMUP {
            launch(&mut bufs, i)?;
        }
        let estimate = timed(&mut bufs, sets.max(1), 0)?;
        let launches = ((MIN_RUN_SECONDS / estimate.max(1e-9)).ceil() as usize).clamp(1, 10_000);
        let mut times = Vec::with_capacity(repeats);
        for r in 0..repeats.max(1) {
            times.push(timed(&mut bufs, launches, r * launches)?);
        }
        self.stream
            .synchronize()
            .map_err(|e| fail("synchronising", e))?;
        times.sort_by(f64::total_cmp);
        Ok(times[times.len() / 2])
    }
}

/// The name of GPU 0 when the driver, cuBLAS and a device are there; otherwise the error
/// saying which is missing.
pub fn probe() -> Result<String> {
    init().map(|gpu| gpu.name)
}

/// Runs `plans` on GPU 0, one after the other, after timing the ceiling (a 8192³ bf16
/// GEMM). Launches of one shape are batched into one strided-batched call (documents x
/// heads) when they fit in memory; otherwise one launch is timed and multiplied by the count.
pub fn measure(
    plans: &[&Plan],
    repeats: usize,
    progress: &dyn Progress,
) -> Result<(Vec<Measurement>, f64)> {
    let gpu = init()?;
    let mut seed = Lcg::new(0x5EED);
    let ceiling_kernel = Kernel {
        component: Component::Projections,
        pass: Pass::Forward,
        m: 8192,
        n: 8192,
        k: 8192,
        batch: 1,
        count: 1,
    };
    let ceiling =
        ceiling_kernel.flops() as f64 / gpu.time(8192, 8192, 8192, 1, repeats, &mut seed)?;
    let mut out = Vec::with_capacity(plans.len());
    let shapes: usize = plans.iter().map(|p| p.kernels.len()).sum();
    progress.begin(&format!("timing {shapes} kernel shapes"), shapes as u64);
    for plan in plans {
        let mut kernels = Vec::with_capacity(plan.kernels.len());
        for k in &plan.kernels {
            let (m, n, kk) = (k.m as usize, k.n as usize, k.k as usize);
            let batched = (k.batch * k.count) as usize;
            let fits = 2 * batched * (m * kk + kk * n + m * n) <= MAX_BUFFER_BYTES / 4;
            let seconds = if fits {
                gpu.time(m, n, kk, batched, repeats, &mut seed)?
            } else {
                gpu.time(m, n, kk, k.batch as usize, repeats, &mut seed)? * k.count as f64
            };
            kernels.push(KernelTime {
                kernel: *k,
                seconds,
            });
            progress.advance(1);
        }
        out.push(Measurement {
            device: format!("{} (GPU 0), bf16 cuBLAS, fp32 accumulation", gpu.name),
            kernels,
        });
    }
    progress.end();
    Ok((out, ceiling))
}
