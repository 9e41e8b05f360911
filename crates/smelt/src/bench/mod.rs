//! Kernel microbenchmark: turns a model into the GEMMs one training step of its layer stack
//! issues ([`crate::plan`]), checks that their arithmetic equals the cost model's count exactly,
//! runs them on a backend (`cpu` everywhere, `cuda` behind the `cuda` feature) and
//! reports what each component costs in time, which arithmetic FLOPs hide: more experts
//! mean smaller GEMMs, and the loop re-executes layers serially. A backend gives the
//! [`TimingBackend`] primitives (time the ceiling, time one kernel shape, estimate a run);
//! the rounds, the deadline and the progress are one bookkeeping, [`measure`], tested on a
//! deterministic mock backend.
//!
//! Each distinct kernel shape of the stack is timed once and weighted by how often the stack
//! runs it (a model with dense and MoE layers has two kinds of layer; a looped layer counts
//! once per visit). Per-layer-execution figures are averages over the stack's executions —
//! exactly one layer's when all layers are alike — and the per-token time of the model is
//! the stack's time over the tokens. The embedding and LM head are outside the layers and
//! not benchmarked.
//!
//! The ceiling is a large square GEMM timed in every round (1024³ f32 on the CPU, 8192³
//! bf16 on a GPU); the best round counts, and the report gives the spread of the rounds, so
//! that a noisy machine shows as noise. A run has a time budget
//! ([`BenchOptions::max_seconds`]): after the first ceiling round the whole run is
//! estimated, and one that would not finish within the budget is refused before it starts;
//! one that overruns the budget anyway stops with an error rather than hang.

mod backend;
pub(crate) mod cpu;
#[doc(hidden)] // not public API: the tests probe for a device
pub mod cuda;
// The GEMMs' layouts, used by the CUDA backend alone.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(crate) mod gemm;
#[cfg(test)]
mod mock;
#[doc(hidden)] // not public API: the kernel benches time the pool
pub mod pool;
pub mod stats;
mod types;

/// Where the kernels run (the time model's device kinds: [`crate::time::Backend`]).
pub use crate::time::Backend;
pub use backend::{Deadline, Job, LAUNCH_BOUND_FACTOR, TimingBackend, Timings, measure};
pub use types::{BenchOptions, BenchReport, ComponentReport, KernelTime, LayerBench, Measurement};

use crate::cost::{TRAINING_OVER_FORWARD, forward_flops};
use crate::error::{Error, Result};
use crate::model::{ModelSpec, Workload};
use crate::plan::{self, Component, MAX_TOKENS, Plan};
use crate::progress::{Progress, Silent};
use crate::time::{Card, TimeRatio, check_peak};
use crate::units::Flops;

/// The most timed runs per kernel shape.
pub const MAX_ROUNDS: usize = 100;

/// "1 round", "3 rounds".
pub(crate) fn rounds(n: usize) -> String {
    if n == 1 {
        "1 round".to_owned()
    } else {
        format!("{n} rounds")
    }
}

/// Seconds in words, to three significant figures.
pub(crate) fn seconds(s: f64) -> String {
    if s >= 100.0 {
        format!("{s:.0} s")
    } else if s.abs() < 1e-3 && s != 0.0 {
        // Fixed digits would round a limit of 1e-300 s to "0.000000000 s".
        format!("{s:.2e} s")
    } else {
        let digits = (2 - s.abs().log10().floor() as i32).clamp(0, 9) as usize;
        format!("{s:.digits$} s")
    }
}

/// `max / min - 1` of positive values (0 for fewer than two).
fn spread(values: &[f64]) -> f64 {
    let (lo, hi) = values.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &v| {
        (lo.min(v), hi.max(v))
    });
    if values.len() < 2 || lo <= 0.0 {
        0.0
    } else {
        hi / lo - 1.0
    }
}

fn histogram(docs: &[u64]) -> Vec<[u64; 2]> {
    let mut m = std::collections::BTreeMap::new();
    for &d in docs {
        *m.entry(d).or_insert(0u64) += 1;
    }
    m.into_iter().map(|(l, c)| [l, c]).collect()
}

/// Training FLOPs per token of one layer execution (an average over the stack) of `spec` on
/// exactly `docs`.
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
        b.dense,
        b.indexer,
    ])?;
    let per_exec = layers.checked_mul(TRAINING_OVER_FORWARD)?;
    Flops::ratio(
        per_exec.numer(),
        per_exec
            .denom()
            .checked_mul(u128::from(spec.model.checked_executions()?))
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
    let x = p.executions;
    let per_token = |flops: u128| Flops::ratio(flops, u128::from(p.tokens) * u128::from(x));
    let planned = per_token(p.flops())?;
    let executed: u128 = m.kernels.iter().map(|k| k.kernel.flops()).sum();
    let total_time: f64 = m.kernels.iter().map(|k| k.seconds).sum();
    let total_flops = p.flops();
    let components = Component::ALL
        .iter()
        .filter_map(|&c| {
            let flops = p.component_flops(c);
            let executed = p.component_executed_flops(c);
            let seconds: f64 = m
                .kernels
                .iter()
                .filter(|k| k.kernel.component == c)
                .map(|k| k.seconds)
                .sum();
            (flops > 0).then(|| {
                Ok(ComponentReport {
                    component: c,
                    flops: Flops::ratio(flops, u128::from(x))?,
                    executed_flops: Flops::ratio(executed, u128::from(x))?,
                    seconds: seconds / x as f64,
                    flops_per_second: executed as f64 / seconds,
                    of_ceiling: executed as f64 / seconds / ceiling,
                    time_share: seconds / total_time,
                    flop_share: flops as f64 / total_flops as f64,
                })
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let launches: u64 = p.kernels.iter().map(|k| k.count).sum();
    let bound = m.kernels.iter().filter(|k| k.launch_bound);
    Ok(LayerBench {
        name: spec.name.clone().unwrap_or_else(|| "model".to_owned()),
        layer_executions: x,
        tokens: p.tokens,
        documents: prep.docs.len(),
        kernel_shapes: p.kernels.len(),
        launches: (launches as f64 / x as f64).round() as u64,
        analytic_flops_per_token: prep.analytic.as_f64(),
        plan_flops_per_token: planned.as_f64(),
        flops_exact: prep.analytic == planned,
        executed_flops: executed,
        components,
        seconds_per_layer_execution: total_time / x as f64,
        seconds_per_token: total_time / p.tokens as f64,
        flops_per_token: planned.as_f64() * x as f64,
        rounds_spread: spread(&m.rounds),
        launch_bound_shapes: bound.clone().count(),
        launch_bound_time_share: bound.fold(0.0, |s, k| s + k.seconds) / total_time,
        kernels: m.kernels.clone(),
    })
}

/// Benchmarks `models` (the Baseline first) on one backend.
pub fn bench(models: &[&ModelSpec], opts: &BenchOptions) -> Result<BenchReport> {
    bench_with(models, opts, &Silent)
}

/// [`bench()`], reporting each kernel shape timed to `progress`.
pub fn bench_with(
    models: &[&ModelSpec],
    opts: &BenchOptions,
    progress: &dyn Progress,
) -> Result<BenchReport> {
    let deadline = || Deadline::new(opts.max_seconds, opts.backend.as_str());
    bench_on(models, opts, progress, deadline, |plans| {
        match opts.backend {
            Backend::Cpu => Ok(Box::new(cpu::Cpu::new(plans)?) as Box<dyn TimingBackend>),
            Backend::Cuda => Ok(Box::new(cuda::Cuda::new(plans)?)),
        }
    })
}

/// [`bench_with`] on the backend `open` opens on the plans, within the `deadline` made
/// once they are planned.
fn bench_on(
    models: &[&ModelSpec],
    opts: &BenchOptions,
    progress: &dyn Progress,
    deadline: impl FnOnce() -> Deadline,
    open: impl FnOnce(&[&Plan]) -> Result<Box<dyn TimingBackend>>,
) -> Result<BenchReport> {
    check_options(opts)?;
    let prepared = models
        .iter()
        .map(|s| prepare(s, opts))
        .collect::<Result<Vec<_>>>()?;
    let plans: Vec<&Plan> = prepared.iter().map(|p| &p.plan).collect();
    let job = Job {
        plans: &plans,
        rounds: opts.rounds,
        deadline: deadline(),
        progress,
    };
    let timings = measure(open(&plans)?.as_mut(), &job)?;
    report(models, &prepared, opts, timings)
}

/// An error unless the batch, the rounds, the time budget and the peak are in range.
fn check_options(opts: &BenchOptions) -> Result<()> {
    if !(1..=MAX_TOKENS).contains(&opts.tokens) {
        return Err(Error::invalid(
            "tokens",
            format!("must be between 1 and {MAX_TOKENS} (got {})", opts.tokens),
        ));
    }
    if !(1..=MAX_ROUNDS).contains(&opts.rounds) {
        return Err(Error::invalid(
            "rounds",
            format!("must be between 1 and {MAX_ROUNDS} (got {})", opts.rounds),
        ));
    }
    if !(opts.max_seconds.is_finite() && opts.max_seconds > 0.0) {
        return Err(Error::invalid(
            "max_seconds",
            format!(
                "must be a positive number of seconds (--max-seconds); got {}",
                opts.max_seconds
            ),
        ));
    }
    if let Some(p) = opts.peak {
        check_peak(p)?;
    }
    Ok(())
}

/// The report of `models`, planned as `prepared`, from what the backend measured.
fn report(
    models: &[&ModelSpec],
    prepared: &[Prepared],
    opts: &BenchOptions,
    timings: Timings,
) -> Result<BenchReport> {
    let Timings {
        measurements: measured,
        ceiling_rounds,
        device,
        library,
        launch_floor,
    } = timings;
    // The median round, as for every kernel shape: a best round would flatter the ceiling.
    let ceiling = stats::median(&ceiling_rounds);
    let out = models
        .iter()
        .zip(prepared)
        .zip(&measured)
        .map(|((s, p), m)| layer_bench(s, p, m, ceiling))
        .collect::<Result<Vec<_>>>()?;
    let ratio = |f: fn(&LayerBench) -> f64| (out.len() == 2).then(|| f(&out[1]) / f(&out[0]));
    let time_stats = (measured.len() == 2).then(|| {
        let scale = out[0].tokens as f64 / out[1].tokens as f64;
        stats::of_ratios(&stats::round_ratios(
            &measured[0].rounds,
            &measured[1].rounds,
            scale,
        ))
    });
    let (peak, source) = match (opts.peak, Card::of_device(&device).map(Card::spec)) {
        (Some(p), _) => (Some(p), Some("--peak".to_owned())),
        (None, Some(card)) if opts.backend == Backend::Cuda => (
            Some(card.peak_flops_per_second),
            Some(card.source.to_owned()),
        ),
        _ => (None, None),
    };
    Ok(BenchReport {
        backend: opts.backend,
        device,
        library,
        launch_floor_seconds: launch_floor,
        ceiling_flops_per_second: ceiling,
        ceiling_spread: spread(&ceiling_rounds),
        ceiling_rounds,
        peak_flops_per_second: peak,
        peak_source: source,
        ceiling_of_peak: peak.map(|p| ceiling / p).filter(|s| s.is_finite()),
        options: *opts,
        workloads: {
            let mut w: Vec<String> = models.iter().map(|m| m.workload.summary()).collect();
            w.dedup();
            w
        },
        time_ratio: time_stats.map(|t| t.median),
        time_ratio_stats: time_stats,
        flop_ratio: ratio(|b| b.flops_per_token),
        models: out,
    })
}

/// The measured time ratio of `looped` to `baseline` (`smelt match --bench`, a grid's
/// `--bench`).
pub fn time_ratio(
    baseline: &ModelSpec,
    looped: &ModelSpec,
    opts: &BenchOptions,
    progress: &dyn Progress,
) -> Result<TimeRatio> {
    let r = bench_with(&[baseline, looped], opts, progress)?;
    let (b, l) = (r.models[0].seconds_per_token, r.models[1].seconds_per_token);
    let Some(stats) = r.time_ratio_stats else {
        return Err(Error::Internal {
            message: "a benchmark of two models without a time ratio".into(),
        });
    };
    Ok(TimeRatio {
        ratio: stats.median,
        interval: stats.interval,
        rounds: stats.rounds,
        noisy: stats.noisy,
        backend: r.backend,
        device: r.device,
        tokens: r.models[0].tokens,
        baseline_seconds_per_token: b,
        looped_seconds_per_token: l,
    })
}
