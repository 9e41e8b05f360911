//! The CUDA backend proper (feature `cuda`): cuBLAS bf16 GEMMs through cudarc.
//!
//! Inputs: one device pool of random bf16 values (never zero), filled once per run from the
//! host, laid out by [`crate::bench::pool`]; every kernel shape takes its operands as views
//! into it at rotating offsets, and writes one shared output buffer. Identical launches of a
//! shape are batched into `cublasGemmStridedBatchedEx` calls (documents × heads in the
//! attention core; the experts that received the same number of tokens — all of them, with
//! balanced routing — in the routed experts; the layers of the stack). With skewed routing
//! the experts take one call per distinct token count: `cublasGemmGroupedBatchedEx` would
//! run them as one launch, as a grouped-GEMM trainer does, but is not used yet (it has not
//! been run on a GPU in this project's tests). Each call is timed with CUDA events over a
//! run of at least [`MIN_RUN_SECONDS`], median of the rounds; the rounds interleave the
//! ceiling (an 8192³ GEMM) and every shape ([`crate::bench::measure`]); every call is
//! checked.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use cudarc::cublas::sys::cublasOperation_t;
use cudarc::cublas::{CudaBlas, Gemm, GemmConfig, StridedBatchedConfig};
use cudarc::driver::sys::CUevent_flags;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};
use half::bf16;

use super::libs;
use crate::bench::TimingBackend;
use crate::bench::pool::{Layout, Slot, layout};
use crate::error::{Error, Result};
use crate::plan::{Component, Kernel, Op as KernelOp, Pass, Plan};

/// Warm-up calls per shape in the first round.
const WARMUP: usize = 2;
/// A timed run lasts at least this long (calls are repeated within it).
const MIN_RUN_SECONDS: f64 = 2e-3;
/// The ceiling's edge.
const CEILING: u64 = 8192;

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
    library: String,
}

/// The cuBLAS found by [`super::libs`] and loaded by path (kept loaded for the process's
/// life), or `None` when the folders searched hold none; an error names the file that
/// failed to load.
fn load_cublas() -> Result<Option<String>> {
    static LOADED: OnceLock<std::result::Result<Option<String>, String>> = OnceLock::new();
    let loaded = LOADED.get_or_init(|| {
        let Some((cublas, lt)) = libs::find_cublas(&search_dirs()) else {
            return Ok(None);
        };
        for path in lt.iter().chain([&cublas]) {
            open_global(path)?;
        }
        Ok(Some(cublas.display().to_string()))
    });
    loaded.clone().map_err(|m| fail("loading cuBLAS", m))
}

fn search_dirs() -> Vec<std::path::PathBuf> {
    libs::search_dirs(Path::new("/"), &|v| std::env::var(v).ok())
}

/// Loads the library at `path` for the process's life, its symbols global, so that
/// cudarc's later load by name finds it.
fn open_global(path: &Path) -> std::result::Result<(), String> {
    let flags = libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_GLOBAL;
    // SAFETY: loading a shared library runs its initialisers, those of NVIDIA's cuBLAS or
    // NVRTC, which any program linking it runs; nothing is called through it here.
    let lib = unsafe { libloading::os::unix::Library::open(Some(path), flags) }
        .map_err(|e| format!("loading {}: {e}", path.display()))?;
    std::mem::forget(lib);
    Ok(())
}

/// The attention tiles' softmax kernels ([`SOFTMAX_SOURCE`]), compiled by NVRTC (found as
/// cuBLAS is, [`libs::NVRTC`]) and loaded on `ctx`: `(forward, backward)`.
fn softmax_kernels(ctx: &Arc<CudaContext>) -> Result<(CudaFunction, CudaFunction)> {
    let dirs = search_dirs();
    if let Some(path) = libs::find(&dirs, libs::NVRTC) {
        open_global(&path).map_err(|m| fail("loading NVRTC", m))?;
    }
    // SAFETY: this only tries to dlopen the library; nothing is called through it.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        let tried: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
        return Err(fail(
            "no NVRTC (the attention tiles' softmax is compiled by it)",
            format!(
                "{} was not found in [{}] nor by the system's loader; put its folder in {}",
                libs::NVRTC,
                tried.join(", "),
                libs::DIR_VAR
            ),
        ));
    }
    let ptx = cudarc::nvrtc::compile_ptx(SOFTMAX_SOURCE)
        .map_err(|e| fail("compiling the softmax kernel with NVRTC", e))?;
    let module = ctx
        .load_module(ptx)
        .map_err(|e| fail("loading the softmax kernel", e))?;
    let function = |name: &str| {
        module
            .load_function(name)
            .map_err(|e| fail(&format!("loading {name}"), e))
    };
    Ok((function("softmax_forward")?, function("softmax_backward")?))
}

/// The CUDA source of the attention tiles' softmax (one warp per row).
const SOFTMAX_SOURCE: &str = include_str!("softmax.cu");

/// Warps (rows) per block of the softmax kernels.
const SOFTMAX_WARPS: u64 = 4;

/// `f`, with a panic inside cudarc (a library that loads but lacks a symbol it calls: it
/// panics on first use) turned into an error saying `what` failed. The panic's default
/// report is silenced while `f` runs.
fn no_panic<T>(what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    std::panic::set_hook(hook);
    r.unwrap_or_else(|p| {
        let why = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(fail(
            what,
            format!("the CUDA library failed ({why}): is it older than CUDA 13, or partial?"),
        ))
    })
}

fn init() -> Result<Gpu> {
    no_panic("opening the GPU", init_unguarded)
}

fn init_unguarded() -> Result<Gpu> {
    // SAFETY: these only try to dlopen the libraries; nothing is called through them.
    let driver = unsafe { cudarc::driver::sys::is_culib_present() };
    if !driver {
        return Err(fail(
            "no CUDA driver",
            "libcuda could not be loaded (is an NVIDIA driver installed?)",
        ));
    }
    let found = load_cublas()?;
    // SAFETY: as above.
    let cublas = unsafe { cudarc::cublas::sys::is_culib_present() };
    if !cublas {
        return Err(fail("no cuBLAS", libs::not_found(&search_dirs())));
    }
    let library =
        found.unwrap_or_else(|| format!("{} (found by the system's loader)", libs::CUBLAS));
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
        library,
    })
}

/// The name of GPU 0 when the driver, cuBLAS and a device are there; otherwise the error
/// saying which is missing.
pub fn probe() -> Result<String> {
    init().map(|gpu| gpu.name)
}

/// A run: the GPU, its pool and output buffer, and the count of calls made (for the
/// rotation).
struct Run {
    gpu: Gpu,
    /// The softmax kernels `(forward, backward)`, when a plan has attention tiles.
    softmax: Option<(CudaFunction, CudaFunction)>,
    pool: CudaSlice<bf16>,
    out: CudaSlice<bf16>,
    layout_pool: usize,
    calls: u64,
}

impl Run {
    fn new(gpu: Gpu, layout: &Layout) -> Result<Self> {
        let softmax = match layout
            .slots
            .iter()
            .flatten()
            .any(|s| s.kernel.op == KernelOp::Softmax)
        {
            true => Some(softmax_kernels(&gpu.ctx)?),
            false => None,
        };
        // The pool is filled once, on the host (in parallel), and copied once.
        let host: Vec<bf16> = crate::bench::pool::fill(layout.pool)
            .into_iter()
            .map(bf16::from_bits)
            .collect();
        let pool = gpu
            .stream
            .clone_htod(&host)
            .map_err(|e| fail("copying the input pool to the GPU", e))?;
        let out = gpu
            .stream
            .alloc_zeros::<bf16>(layout.out.max(1))
            .map_err(|e| fail("allocating the output buffer", e))?;
        Ok(Self {
            gpu,
            softmax,
            pool,
            out,
            layout_pool: layout.pool,
            calls: 0,
        })
    }

    /// One strided-batched launch of `slot`'s `group` launches, on the next operands, in
    /// the layout a trainer's GEMM of its pass has; a batch over
    /// [`gemm::MAX_BATCH`](crate::bench::gemm::MAX_BATCH) is issued as several calls.
    fn call(&mut self, slot: &Slot) -> Result<()> {
        use crate::bench::gemm::{self, Op};
        if slot.kernel.op == KernelOp::Softmax {
            return self.softmax(slot);
        }
        let k = &slot.kernel;
        let (m, n, kk) = (k.m as usize, k.n as usize, k.k as usize);
        let (a0, b0) = slot.offsets(self.calls, self.layout_pool);
        self.calls += 1;
        let l = gemm::layout(k);
        let op = |o: Op| match o {
            Op::N => cublasOperation_t::CUBLAS_OP_N,
            Op::T => cublasOperation_t::CUBLAS_OP_T,
        };
        let cfg = GemmConfig {
            transa: op(l.transa),
            transb: op(l.transb),
            m: m as i32,
            n: n as i32,
            k: kk as i32,
            alpha: bf16::ONE,
            lda: l.lda as i32,
            ldb: l.ldb as i32,
            beta: bf16::ZERO,
            ldc: l.ldc as i32,
        };
        let batch = slot.calls_batch();
        let (sa, sb, sc) = (m * kk, kk * n, m * n);
        for (first, count) in gemm::batch_chunks(batch) {
            let (first, count) = (first as usize, count as usize);
            let a = self.pool.slice(a0 + first * sa..a0 + (first + count) * sa);
            let b = self.pool.slice(b0 + first * sb..b0 + (first + count) * sb);
            let mut c = self.out.slice_mut(first * sc..(first + count) * sc);
            // SAFETY: the views hold count × m·k, k·n and m·n elements (the layout sized
            // the operands for the whole batch), column-major with the leading dimensions
            // and strides given, so cuBLAS stays inside them; the pool and output outlive
            // the call, which is on the views' stream.
            let r = unsafe {
                if count == 1 {
                    self.gpu.blas.gemm(cfg, &a, &b, &mut c)
                } else {
                    let cfg = StridedBatchedConfig {
                        gemm: cfg,
                        batch_size: count as i32,
                        stride_a: sa as i64,
                        stride_b: sb as i64,
                        stride_c: sc as i64,
                    };
                    self.gpu.blas.gemm_strided_batched(cfg, &a, &b, &mut c)
                }
            };
            r.map_err(|e| fail(&format!("cuBLAS GEMM {count} x {m}x{n}x{kk}"), e))?;
        }
        Ok(())
    }

    /// One launch of the softmax kernel of `slot`'s pass over its `group` launches' rows,
    /// on the next operands.
    fn softmax(&mut self, slot: &Slot) -> Result<()> {
        let k = &slot.kernel;
        let Some((forward, backward)) = &self.softmax else {
            return Err(fail("a softmax kernel", "not loaded (internal error)"));
        };
        let (a0, b0) = slot.offsets(self.calls, self.layout_pool);
        self.calls += 1;
        let rows = slot.calls_batch() * k.m;
        let len = (rows * k.n) as usize;
        let (n, rows_i64) = (k.n as i32, rows as i64);
        let scores = self.pool.slice(a0..a0 + len);
        let grads = self.pool.slice(b0..b0 + len);
        let mut out = self.out.slice_mut(0..len);
        let blocks = rows.div_ceil(SOFTMAX_WARPS);
        let cfg = LaunchConfig {
            grid_dim: (
                u32::try_from(blocks).map_err(|_| fail("a softmax launch", "too many rows"))?,
                1,
                1,
            ),
            block_dim: (32 * SOFTMAX_WARPS as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        let forward_pass = k.pass == Pass::Forward;
        let mut launch = self.gpu.stream.launch_builder(match forward_pass {
            true => forward,
            false => backward,
        });
        launch.arg(&scores);
        if !forward_pass {
            launch.arg(&grads);
        }
        launch.arg(&mut out);
        launch.arg(&rows_i64);
        launch.arg(&n);
        // SAFETY: the kernel reads `rows·n` scores (and gradients) and writes `rows·n`
        // outputs, the lengths of the views given (the layout sized them for the slot's
        // group), with the argument types its source declares (two or three bf16 pointers,
        // an i64, an i32); one warp per row, blocks of `SOFTMAX_WARPS` warps.
        unsafe { launch.launch(cfg) }
            .map_err(|e| fail(&format!("softmax {} x {}", rows, k.n), e))?;
        Ok(())
    }

    /// Seconds per call over a run of `calls` calls, by CUDA events.
    fn timed(&mut self, slot: &Slot, calls: usize) -> Result<f64> {
        let flags = Some(CUevent_flags::CU_EVENT_DEFAULT);
        let ctx = self.gpu.ctx.clone();
        let event = || {
            ctx.new_event(flags)
                .map_err(|e| fail("creating an event", e))
        };
        let (start, end) = (event()?, event()?);
        start
            .record(&self.gpu.stream)
            .map_err(|e| fail("recording an event", e))?;
        for _ in 0..calls {
            self.call(slot)?;
        }
        end.record(&self.gpu.stream)
            .map_err(|e| fail("recording an event", e))?;
        let ms = start
            .elapsed_ms(&end)
            .map_err(|e| fail("reading an event", e))?;
        Ok(f64::from(ms) * 1e-3 / calls as f64)
    }

    /// [`Run::per_launch`], the first (cold) time of a shape guarded against a panic in
    /// cudarc ([`no_panic`]: every function the run calls is first called then); the warm
    /// rounds unguarded, so that nothing is added to what is timed.
    fn first_or_timed(&mut self, slot: &Slot, warm: bool) -> Result<f64> {
        match warm {
            true => self.per_launch(slot, true),
            false => no_panic("a first GEMM call", || self.per_launch(slot, false)),
        }
    }

    /// Seconds per launch of `slot` (calls repeated to fill [`MIN_RUN_SECONDS`]).
    fn per_launch(&mut self, slot: &Slot, warm: bool) -> Result<f64> {
        if !warm {
            for _ in 0..WARMUP {
                self.call(slot)?;
            }
        }
        let estimate = self.timed(slot, 1)?;
        let calls = ((MIN_RUN_SECONDS / estimate.max(1e-9)).ceil() as usize).clamp(1, 10_000);
        Ok(self.timed(slot, calls)? / slot.group as f64)
    }
}

/// The ceiling kernel: an 8192³ GEMM.
fn ceiling_kernel() -> Kernel {
    Kernel::gemm(
        Component::Projections,
        Pass::Forward,
        [CEILING, CEILING, CEILING],
        1,
    )
}

/// The CUDA backend, opened on a run's plans: GPU 0 with their pool laid out on it.
pub struct Cuda {
    run: Run,
    slots: Vec<Vec<Slot>>,
    ceiling: Slot,
    device: String,
}

impl Cuda {
    /// Lays out `plans` ([`crate::bench::pool::layout`]) and opens GPU 0 with their pool:
    /// an error if they do not fit, or without a driver, cuBLAS or a device.
    pub fn new(plans: &[&Plan]) -> Result<Self> {
        let layout = layout(plans, CEILING)?;
        let gpu = init()?;
        let device = format!("{} (GPU 0), bf16 cuBLAS, fp32 accumulation", gpu.name);
        let run = no_panic("preparing the GPU", || Run::new(gpu, &layout))?;
        let c = (CEILING * CEILING) as usize;
        Ok(Self {
            run,
            slots: layout.slots,
            ceiling: Slot {
                kernel: ceiling_kernel(),
                group: 1,
                a: c,
                b: c,
                c,
            },
            device,
        })
    }
}

/// CUDA-event timing of runs of calls (module docs).
impl TimingBackend for Cuda {
    fn ceiling(&self) -> Kernel {
        ceiling_kernel()
    }

    fn time_ceiling(&mut self, warm: bool) -> Result<f64> {
        let ceiling = self.ceiling;
        self.run.first_or_timed(&ceiling, warm)
    }

    fn time(&mut self, plan: usize, index: usize, warm: bool) -> Result<f64> {
        let slot = crate::bench::backend::shape(&self.slots, plan, index)?;
        self.run.first_or_timed(&slot, warm)
    }

    fn library(&self) -> Option<String> {
        Some(self.run.gpu.library.clone())
    }

    /// Each shape: warm-up, a probe and a run of at least 2 ms (`MIN_RUN_SECONDS`) per round,
    /// each call at a quarter of the ceiling's first rate plus 10 µs.
    fn estimate(&self, first: f64, rounds: usize) -> f64 {
        let rate = ceiling_kernel().flops() as f64 / first;
        self.slots
            .iter()
            .flatten()
            .map(|s| {
                let call = s.kernel.flops() as f64 / s.kernel.count as f64 * s.group as f64
                    / (0.25 * rate)
                    + 10e-6;
                (WARMUP + 1) as f64 * call + rounds as f64 * (call + MIN_RUN_SECONDS.max(call))
            })
            .sum()
    }

    /// A `1 x 1 x 1` GEMM's time per call, by events over a run of calls (median of 5).
    fn time_floor(&mut self) -> Result<Option<f64>> {
        let tiny = Slot {
            kernel: Kernel::gemm(Component::Projections, Pass::Forward, [1, 1, 1], 1),
            group: 1,
            a: 1,
            b: 1,
            c: 1,
        };
        let mut t = (0..5)
            .map(|_| self.run.per_launch(&tiny, false))
            .collect::<Result<Vec<f64>>>()?;
        t.sort_by(f64::total_cmp);
        Ok(Some(t[t.len() / 2]))
    }

    fn finish(&mut self) -> Result<()> {
        self.run
            .gpu
            .stream
            .synchronize()
            .map_err(|e| fail("synchronising", e))
    }

    fn device(&self) -> String {
        self.device.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The softmax source compiles with NVRTC where NVRTC is found (no GPU needed); without
    /// it the test says so. (`SMELT_CUDA_LIB_DIR` pointing at PyTorch's `nvidia/cu13/lib`
    /// finds it.)
    #[test]
    fn the_softmax_kernels_compile_with_nvrtc() {
        if let Some(path) = libs::find(&search_dirs(), libs::NVRTC) {
            open_global(&path).unwrap();
        }
        // SAFETY: this only tries to dlopen the library.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            eprintln!(
                "skipped: no {} to compile the softmax kernels with",
                libs::NVRTC
            );
            return;
        }
        let ptx = cudarc::nvrtc::compile_ptx(SOFTMAX_SOURCE).unwrap().to_src();
        for name in ["softmax_forward", "softmax_backward"] {
            assert!(ptx.contains(&format!(".entry {name}")), "{name}");
        }
    }
}
