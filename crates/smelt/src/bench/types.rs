//! What a benchmark reports: the JSON contract of `smelt bench`.

use serde::Serialize;

use super::Backend;
use crate::plan::{Component, Kernel, Plan, Routing};
use crate::units::Flops;

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
    pub rounds: usize,
    /// The longest a run may take, in seconds: a plan estimated to need more is refused
    /// before it starts, and a run that passes it stops with an error.
    pub max_seconds: f64,
    /// The device's dense peak in FLOP/s, for the ceiling's share of it (`None`: from the
    /// table of known GPUs, if the device is in it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak: Option<f64>,
}

impl BenchOptions {
    /// The defaults of `backend`: its default batch, balanced routing, 3 rounds, 10 minutes.
    pub fn new(backend: Backend) -> Self {
        Self {
            backend,
            tokens: backend.default_tokens(),
            routing: Routing::Balanced,
            rounds: 3,
            max_seconds: 600.0,
            peak: None,
        }
    }
}

/// A kernel shape and its total time (median launch time x launches).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct KernelTime {
    /// The kernel.
    pub kernel: Kernel,
    /// Seconds for all its launches.
    pub seconds: f64,
    /// Whether its time per launch is under [`LAUNCH_BOUND_FACTOR`] x the backend's launch
    /// floor: a time set by launching, not by arithmetic or memory (never where the
    /// backend measures no floor).
    ///
    /// [`LAUNCH_BOUND_FACTOR`]: crate::bench::LAUNCH_BOUND_FACTOR
    pub launch_bound: bool,
}

/// What a backend measured for a plan.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Measurement {
    /// The device, in words.
    pub device: String,
    /// Per kernel shape.
    pub kernels: Vec<KernelTime>,
    /// The whole plan's seconds in each round (its kernels' times that round), for the
    /// spread.
    pub rounds: Vec<f64>,
}

impl Measurement {
    /// The measurement of `plan` on `device` from each kernel shape's seconds per launch in
    /// each of `rounds` rounds (`times[kernel][round]`): per shape the median round times
    /// its launches, and per round the whole plan's time.
    pub(crate) fn of(
        plan: &Plan,
        times: Vec<Vec<f64>>,
        rounds: usize,
        (device, floor): (&str, Option<f64>),
    ) -> Self {
        let rounds = (0..rounds)
            .map(|r| {
                plan.kernels
                    .iter()
                    .zip(&times)
                    .map(|(k, tk)| tk[r] * k.count as f64)
                    .sum()
            })
            .collect();
        let median = |mut v: Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        Measurement {
            device: device.to_owned(),
            kernels: plan
                .kernels
                .iter()
                .zip(times)
                .map(|(k, tk)| {
                    let per_launch = median(tk);
                    KernelTime {
                        kernel: *k,
                        seconds: per_launch * k.count as f64,
                        launch_bound: floor.is_some_and(|f| {
                            per_launch < crate::bench::backend::LAUNCH_BOUND_FACTOR * f
                        }),
                    }
                })
                .collect(),
            rounds,
        }
    }
}

/// One component's share of an (average) layer execution.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ComponentReport {
    /// Component.
    pub component: Component,
    /// FLOPs in the batch (training step) per layer execution: exact, an average over the
    /// stack when it has dense and MoE layers.
    pub flops: Flops,
    /// FLOPs its kernels execute per layer execution: `flops`, except for the attention
    /// core and an indexer's scores, whose tiles are computed whole and whose fused
    /// backward recomputes the scores ([`crate::plan::PairFlops`]).
    pub executed_flops: Flops,
    /// Seconds per layer execution.
    pub seconds: f64,
    /// Achieved FLOP/s: the FLOPs its kernels execute over their time.
    pub flops_per_second: f64,
    /// Achieved rate over the backend's ceiling.
    pub of_ceiling: f64,
    /// Share of the layer execution's time.
    pub time_share: f64,
    /// Share of its FLOPs.
    pub flop_share: f64,
}

/// One model's benchmark.
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
    /// Distinct kernel shapes (over the whole stack).
    pub kernel_shapes: usize,
    /// Kernel launches per layer execution (an average over the stack, rounded).
    pub launches: u64,
    /// Training FLOPs per token of one layer execution (an average over the stack) from the
    /// cost model, at the benchmarked documents.
    pub analytic_flops_per_token: f64,
    /// The plan's model FLOPs ([`crate::plan::Plan::flops`]: its GEMMs', the pairs
    /// attended for the attention core), per token and layer execution.
    pub plan_flops_per_token: f64,
    /// Whether the two agree exactly (compared as exact fractions).
    pub flops_exact: bool,
    /// Σ 2·m·n·k over the kernels the backend timed, times their launch counts (the whole
    /// stack).
    pub executed_flops: u128,
    /// Per component.
    pub components: Vec<ComponentReport>,
    /// Seconds for one layer execution of the batch (an average over the stack).
    pub seconds_per_layer_execution: f64,
    /// Seconds per token for all layer executions of the model.
    pub seconds_per_token: f64,
    /// Training FLOPs per token for all layer executions.
    pub flops_per_token: f64,
    /// How much the plan's time varied between rounds: `max / min - 1`.
    pub rounds_spread: f64,
    /// Kernel shapes whose time is launch-bound ([`KernelTime::launch_bound`]).
    pub launch_bound_shapes: usize,
    /// Their share of the plan's time.
    pub launch_bound_time_share: f64,
    /// Every kernel shape of the plan with its measured time (all its launches): what
    /// `smelt calibrate` fits a roofline's efficiencies to ([`crate::time::Calibration`]).
    pub kernels: Vec<KernelTime>,
}

/// A benchmark of one model, or of a model against its Baseline: `smelt bench --format json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchReport {
    /// Backend.
    pub backend: Backend,
    /// Device.
    pub device: String,
    /// The kernel library loaded (the CUDA backend's cuBLAS: its path, or that the
    /// system's loader found it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub library: Option<String>,
    /// Seconds per launch of a `1 x 1 x 1` GEMM: the floor a launch-bound shape is judged
    /// by ([`KernelTime::launch_bound`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub launch_floor_seconds: Option<f64>,
    /// FLOP/s of the backend's ceiling GEMM: the median of its rounds.
    pub ceiling_flops_per_second: f64,
    /// The ceiling's FLOP/s in each round.
    pub ceiling_rounds: Vec<f64>,
    /// How much the ceiling varied between rounds: `max / min - 1`.
    pub ceiling_spread: f64,
    /// The device's dense peak (bf16 on a GPU), if known or given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_flops_per_second: Option<f64>,
    /// Where the peak comes from (a datasheet, or `--peak`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peak_source: Option<String>,
    /// The ceiling as a share of the peak.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ceiling_of_peak: Option<f64>,
    /// Settings.
    pub options: BenchOptions,
    /// The workload the models were planned at, in words ([`crate::Workload::summary`]),
    /// one per model when they differ.
    pub workloads: Vec<String>,
    /// The models: the Baseline first when there are two.
    pub models: Vec<LayerBench>,
    /// Measured seconds per token, second model over first: the median over the rounds
    /// of each round's ratio ([`super::stats`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_ratio: Option<f64>,
    /// The time ratio's interval and rounds ([`super::stats`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_ratio_stats: Option<super::stats::RatioStats>,
    /// Training FLOPs per token, second model over first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flop_ratio: Option<f64>,
}
