//! Kernel microbenchmark: turns a model into the GEMMs one training step of one layer
//! execution issues ([`plan`]), checks that their arithmetic equals the cost model's count
//! exactly, runs them on a backend ([`cpu`] everywhere, [`cuda`] behind the `cuda` feature)
//! and reports what each component costs in time, which arithmetic FLOPs hide: more experts
//! mean smaller GEMMs, and the loop re-executes layers serially.
//!
//! Every layer of a model has the same shapes, so one layer execution is benchmarked and
//! the per-token time of the model is `executions x time / tokens`. The embedding and LM
//! head are outside the layers and not benchmarked.

pub mod cpu;
pub mod cuda;
pub mod plan;

use serde::Serialize;

pub use plan::{Component, Kernel, Pass, Plan, Routing};

use crate::cost::{TRAINING_OVER_FORWARD, forward_flops};
use crate::error::{Error, Result};
use crate::names::named_enum;
use crate::progress::{Progress, Silent};
use crate::spec::{ModelSpec, Workload};
use crate::units::Flops;

named_enum! {
    /// Where the kernels run.
    pub enum Backend: "backend" {
        /// f32 on one CPU thread.
        Cpu = "cpu",
        /// bf16 cuBLAS on the first GPU (needs the `cuda` feature and a driver).
        Cuda = "cuda",
    }
}

impl Backend {
    /// The default batch: 1024 tokens on the CPU, 16384 on a GPU.
    pub fn default_tokens(self) -> u64 {
        match self {
            Backend::Cpu => 1024,
            Backend::Cuda => 16384,
        }
    }
}

/// Benchmark settings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BenchOptions {
    /// Backend.
    pub backend: Backend,
    /// Tokens per batch (rounded to whole documents).
    pub tokens: u64,
    /// Expert assignment.
    pub routing: Routing,
    /// Timed runs per kernel shape (the median is kept).
    pub repeats: usize,
}

/// A kernel shape and its total time (median launch time x launches).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct KernelTime {
    /// The kernel.
    pub kernel: Kernel,
    /// Seconds for all its launches.
    pub seconds: f64,
}

/// What a backend measured for a plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measurement {
    /// The device, in words.
    pub device: String,
    /// Per kernel shape.
    pub kernels: Vec<KernelTime>,
}

/// One component's share of a layer execution.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ComponentReport {
    /// Component.
    pub component: Component,
    /// FLOPs in the batch (training step, one layer execution).
    pub flops: u128,
    /// Seconds.
    pub seconds: f64,
    /// Achieved FLOP/s.
    pub flops_per_second: f64,
    /// Achieved rate over the backend's ceiling.
    pub of_ceiling: f64,
    /// Share of the layer execution's time.
    pub time_share: f64,
    /// Share of its FLOPs.
    pub flop_share: f64,
}

/// One model's layer benchmark.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerBench {
    /// The model's name.
    pub name: String,
    /// Layer executions per forward pass.
    pub layer_executions: u64,
    /// Tokens in the batch.
    pub tokens: u64,
    /// Documents in the batch.
    pub documents: usize,
    /// Distinct kernel shapes.
    pub kernel_shapes: usize,
    /// Kernel launches.
    pub launches: u64,
    /// Training FLOPs per token of one layer execution from the cost model, at the
    /// benchmarked documents.
    pub analytic_flops_per_token: f64,
    /// Σ 2·m·n·k over the plan, per token.
    pub plan_flops_per_token: f64,
    /// Whether the two agree exactly (compared as exact fractions).
    pub flops_exact: bool,
    /// Σ 2·m·n·k over the kernels the backend timed, times their launch counts.
    pub executed_flops: u128,
    /// Per component.
    pub components: Vec<ComponentReport>,
    /// Seconds for one layer execution of the batch.
    pub seconds_per_layer_execution: f64,
    /// Seconds per token for all layer executions of the model.
    pub seconds_per_token: f64,
    /// Training FLOPs per token for all layer executions.
    pub flops_per_token: f64,
}

/// A benchmark of one model, or of a model against its Baseline: `smelt bench --format json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchReport {
    /// Backend.
    pub backend: Backend,
    /// Device.
    pub device: String,
    /// FLOP/s of the backend's ceiling GEMM.
    pub ceiling_flops_per_second: f64,
    /// Settings.
    pub options: BenchOptions,
    /// The models: the Baseline first when there are two.
    pub models: Vec<LayerBench>,
    /// Measured seconds per token, second model over first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_ratio: Option<f64>,
    /// Training FLOPs per token, second model over first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flop_ratio: Option<f64>,
}

fn histogram(docs: &[u64]) -> Vec<[u64; 2]> {
    let mut m = std::collections::BTreeMap::new();
    for &d in docs {
        *m.entry(d).or_insert(0u64) += 1;
    }
    m.into_iter().map(|(l, c)| [l, c]).collect()
}

/// Training FLOPs per token of one layer execution of `spec` on exactly `docs`.
pub fn analytic_per_execution(spec: &ModelSpec, docs: &[u64]) -> Result<Flops> {
    let workload = Workload {
        mean_doc_len: None,
        doc_lengths: Some(histogram(docs)),
        ..spec.workload.clone()
    };
    let b = forward_flops(&spec.model, &workload, &spec.counting)?;
    let layers = crate::units::Flops::sum(&[
        b.projections,
        b.attention_core,
        b.router,
        b.experts,
        b.shared,
    ])?;
    let per_exec = layers.checked_mul(TRAINING_OVER_FORWARD)?;
    Flops::ratio(
        per_exec.numer(),
        per_exec
            .denom()
            .checked_mul(u128::from(spec.model.executions()))
            .ok_or(Error::Overflow {
                what: "a FLOP count",
            })?,
    )
}

/// A model's plan and what the report needs about it.
struct Prepared {
    plan: Plan,
    docs: Vec<u64>,
    analytic: Flops,
}

fn prepare(spec: &ModelSpec, opts: &BenchOptions) -> Result<Prepared> {
    spec.validate()?;
    let docs = plan::documents(&spec.workload, opts.tokens)?;
    let p = plan::plan(&spec.model, &docs, spec.workload.attention, opts.routing)?;
    let analytic = analytic_per_execution(spec, &docs)?;
    Ok(Prepared {
        plan: p,
        docs,
        analytic,
    })
}

fn layer_bench(
    spec: &ModelSpec,
    prep: &Prepared,
    m: &Measurement,
    ceiling: f64,
) -> Result<LayerBench> {
    let p = &prep.plan;
    let planned = Flops::ratio(p.flops(), u128::from(p.tokens))?;
    let executed: u128 = m.kernels.iter().map(|k| k.kernel.flops()).sum();
    let total_time: f64 = m.kernels.iter().map(|k| k.seconds).sum();
    let total_flops = p.flops();
    let components = Component::ALL
        .iter()
        .filter_map(|&c| {
            let flops = p.component_flops(c);
            let seconds: f64 = m
                .kernels
                .iter()
                .filter(|k| k.kernel.component == c)
                .map(|k| k.seconds)
                .sum();
            (flops > 0).then(|| ComponentReport {
                component: c,
                flops,
                seconds,
                flops_per_second: flops as f64 / seconds,
                of_ceiling: flops as f64 / seconds / ceiling,
                time_share: seconds / total_time,
                flop_share: flops as f64 / total_flops as f64,
            })
        })
        .collect();
    let x = spec.model.executions();
    Ok(LayerBench {
        name: spec.name.clone().unwrap_or_else(|| "model".to_owned()),
        layer_executions: x,
        tokens: p.tokens,
        documents: prep.docs.len(),
        kernel_shapes: p.kernels.len(),
        launches: p.kernels.iter().map(|k| k.count).sum(),
        analytic_flops_per_token: prep.analytic.as_f64(),
        plan_flops_per_token: planned.as_f64(),
        flops_exact: prep.analytic == planned,
        executed_flops: executed,
        components,
        seconds_per_layer_execution: total_time,
        seconds_per_token: total_time * x as f64 / p.tokens as f64,
        flops_per_token: planned.as_f64() * x as f64,
    })
}

/// The largest batch a benchmark takes, in tokens.
pub const MAX_TOKENS: u64 = 1 << 20;
/// The most timed runs per kernel shape.
pub const MAX_REPEATS: usize = 100;

/// Benchmarks `models` (the Baseline first) on one backend.
pub fn bench(models: &[&ModelSpec], opts: &BenchOptions) -> Result<BenchReport> {
    bench_with(models, opts, &Silent)
}

/// [`bench`], reporting each kernel shape timed to `progress`.
pub fn bench_with(
    models: &[&ModelSpec],
    opts: &BenchOptions,
    progress: &dyn Progress,
) -> Result<BenchReport> {
    if !(1..=MAX_TOKENS).contains(&opts.tokens) {
        return Err(Error::invalid(
            "tokens",
            format!("must be between 1 and {MAX_TOKENS} (got {})", opts.tokens),
        ));
    }
    if !(1..=MAX_REPEATS).contains(&opts.repeats) {
        return Err(Error::invalid(
            "repeats",
            format!("must be between 1 and {MAX_REPEATS} (got {})", opts.repeats),
        ));
    }
    let prepared = models
        .iter()
        .map(|s| prepare(s, opts))
        .collect::<Result<Vec<_>>>()?;
    let plans: Vec<&Plan> = prepared.iter().map(|p| &p.plan).collect();
    let (measured, ceiling) = match opts.backend {
        Backend::Cpu => cpu::measure(&plans, opts.repeats, progress)?,
        Backend::Cuda => cuda::measure(&plans, opts.repeats, progress)?,
    };
    let device = measured
        .first()
        .map(|m| m.device.clone())
        .unwrap_or_default();
    let out = models
        .iter()
        .zip(&prepared)
        .zip(&measured)
        .map(|((s, p), m)| layer_bench(s, p, m, ceiling))
        .collect::<Result<Vec<_>>>()?;
    let ratio = |f: fn(&LayerBench) -> f64| (out.len() == 2).then(|| f(&out[1]) / f(&out[0]));
    Ok(BenchReport {
        backend: opts.backend,
        device,
        ceiling_flops_per_second: ceiling,
        options: *opts,
        time_ratio: ratio(|b| b.seconds_per_token),
        flop_ratio: ratio(|b| b.flops_per_token),
        models: out,
    })
}
