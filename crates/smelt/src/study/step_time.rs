//! The loop's wall-clock price over a grid: each cell's Baseline and looped model predicted
//! by the training-step model ([`crate::time::step`]) under one parallel layout on one
//! card, their step times' ratio (the same global batch of the same context, so the ratio
//! of time per token), and what drives it.
//!
//! # The drivers
//!
//! Each model's step is split into parts that add up to it, on the mean pipeline stage
//! (a looped model's layer executions spread evenly; [`crate::time::step::looped`]), with
//! `m` micro-batches per step:
//!
//! * **experts**: `m ·` the routed experts' grouped GEMMs, whose efficiency falls with
//!   the rows each expert gets (`expert_efficiency`: the grouped curve's share at those
//!   rows over its best);
//! * **all-to-all**: `m ·` the EP dispatch and combine, one pair per MoE layer *execution*;
//! * **host**: `m ·` the host's time to issue a micro-batch beyond the GPU's (a micro-batch
//!   whose launches take longer than its kernels), per layer execution;
//! * **imbalance**: what a looped model's uneven pipeline stages add (its loop on one
//!   stage);
//! * **other**: the rest (the other GEMMs, attention, memory-bound kernels, recomputation,
//!   TP and PP communication, the bubble, the optimizer step, exposed data-parallel
//!   communication).
//!
//! A driver's entry is the looped model's part less the Baseline's, over the Baseline's
//! step: the entries add up to `ratio − 1` exactly.

use serde::Serialize;

use super::grid::GridReport;
use crate::error::{Error, Result};
use crate::launcher_flops::{Convention, training_flops};
use crate::model::{ModelSpec, Training};
use crate::time::Card;
use crate::time::kernels::SHIPPED;
use crate::time::step::report::{MemoryVerdict, StepReport, step_report};
use crate::time::step::{
    AttentionImpl, Dispatcher, Framework, Recompute, StepPrediction, StepRequest,
};
use crate::time::{System, SystemSpec};

/// Where the layout of a grid's step predictions comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LayoutSource {
    /// The command's flags.
    Flags,
    /// Each cell's Baseline's `[training]` (the grid file's).
    GridFile,
    /// Neither: the defaults (one GPU, micro-batch 1).
    Defaults,
}

/// What a grid's step predictions assume.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepBasis {
    /// The card.
    pub card: Card,
    /// Its system.
    pub system: SystemSpec,
    /// The layout of every cell (`None`: each cell's Baseline's `[training]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub training: Option<Training>,
    /// Where the layout comes from.
    pub layout_source: LayoutSource,
    /// Sequences per optimizer step.
    pub global_batch: u64,
    /// Recomputation.
    pub recompute: Recompute,
    /// Framework.
    pub framework: Framework,
    /// How the routed experts' tokens cross nodes.
    pub dispatcher: Dispatcher,
}

impl StepBasis {
    /// The basis on `card` with every cell under `training` (`None`: each cell's
    /// Baseline's `[training]`) from `source`; an error when the card has no system in the
    /// table.
    pub fn new(
        card: Card,
        (training, layout_source): (Option<Training>, LayoutSource),
        global_batch: u64,
        recompute: Recompute,
        framework: Framework,
        dispatcher: Dispatcher,
    ) -> Result<Self> {
        let system = System::of_card(card).ok_or_else(|| {
            Error::invalid(
                "card",
                format!(
                    "{card} has no system in the table (GPUs per NVLink domain, NVLink and \
                     network bandwidth); the step model needs one"
                ),
            )
        })?;
        Ok(Self {
            card,
            system: *system.spec(),
            layout_source,
            training,
            global_batch,
            recompute,
            framework,
            dispatcher,
        })
    }

    /// The request for `spec` under layout `training`: its attention fused, or unfused for
    /// a model with attention sinks under Megatron-Core (which runs them unfused).
    pub fn request(&self, spec: &ModelSpec, training: Training) -> StepRequest {
        let attention = if spec.model.attention_sinks && self.framework == Framework::MegatronCore {
            AttentionImpl::Unfused
        } else {
            AttentionImpl::Fused
        };
        StepRequest {
            card: self.card,
            system: self.system,
            training,
            global_batch: self.global_batch,
            recompute: self.recompute,
            framework: self.framework,
            attention,
            dispatcher: self.dispatcher,
        }
    }
}

/// One model's step, split into the drivers' parts (module docs), seconds per step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StepParts {
    /// Routed experts' grouped GEMMs.
    pub experts: f64,
    /// EP all-to-all.
    pub all_to_all: f64,
    /// Host time beyond the GPU's.
    pub host: f64,
    /// Pipeline imbalance.
    pub imbalance: f64,
    /// The rest.
    pub other: f64,
    /// Rows per expert per grouped GEMM (0 without routed experts).
    pub rows_per_expert: f64,
    /// The grouped GEMMs' efficiency at those rows, over the best shape's (1 without
    /// routed experts).
    pub expert_efficiency: f64,
}

impl StepParts {
    /// The parts of `s`.
    pub fn of(s: &StepPrediction) -> Self {
        let mean = s.pipeline.as_ref().map_or(&s.micro_batch, |p| &p.balanced);
        let m = s.micro_batches as f64;
        let (experts, all_to_all) = (m * mean.experts, m * mean.ep_comm);
        let host = m * (mean.host - mean.gpu).max(0.0);
        let imbalance = s.pipeline.as_ref().map_or(0.0, |p| p.imbalance);
        let g = &SHIPPED.grouped;
        Self {
            experts,
            all_to_all,
            host,
            imbalance,
            other: s.step_seconds - experts - all_to_all - host - imbalance,
            rows_per_expert: s.rows_per_expert,
            expert_efficiency: if s.rows_per_expert > 0.0 {
                g.share(s.rows_per_expert) / g.max_share
            } else {
                1.0
            },
        }
    }
}

/// The drivers of a cell's ratio: each part's change over the Baseline's step (module
/// docs); they add up to `ratio − 1`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Drivers {
    /// Routed experts' grouped GEMMs.
    pub experts: f64,
    /// EP all-to-all.
    pub all_to_all: f64,
    /// Host time beyond the GPU's.
    pub host: f64,
    /// Pipeline imbalance.
    pub imbalance: f64,
    /// The rest.
    pub other: f64,
}

/// One model of a cell: its step, or why the step model refuses it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ModelStep {
    /// The layout it was predicted under.
    pub training: Training,
    /// The step report (`smelt predict --global-batch`'s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step: Option<StepReport>,
    /// The step's parts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parts: Option<StepParts>,
    /// Why it was not predicted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// A cell's predicted steps.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellStep {
    /// Scale label.
    pub scale: String,
    /// Sparsity label.
    pub sparsity_label: String,
    /// The Baseline's compute-equivalent sparsity.
    pub sparsity: f64,
    /// The Baseline's training FLOPs per token (the exact count).
    pub flops_per_token: f64,
    /// Looped / Baseline training FLOPs per token.
    pub flop_ratio: f64,
    /// The Baseline's step.
    pub baseline: ModelStep,
    /// The looped model's step.
    pub looped: ModelStep,
    /// Looped step seconds over the Baseline's (both predicted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    /// What drives the ratio (both predicted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drivers: Option<Drivers>,
    /// The looped model does not fit a GPU's memory where its Baseline does (present only
    /// then): the cell's time ratio is for a layout the looped model cannot train with.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub looped_does_not_fit: bool,
}

impl CellStep {
    /// Whether the looped model does not fit where the Baseline does.
    fn loses_the_fit(baseline: &ModelStep, looped: &ModelStep) -> bool {
        let verdict = |m: &ModelStep| m.step.as_ref().map(|s| s.memory.clone());
        matches!(verdict(baseline), Some(MemoryVerdict::Fits { .. }))
            && matches!(verdict(looped), Some(MemoryVerdict::DoesNotFit { .. }))
    }
}

/// The step-time predictions of a grid: `smelt grid --predict CARD --global-batch N`, the
/// `step_time` of its JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepGrid {
    /// What the predictions assume.
    pub basis: StepBasis,
    /// One entry per cell, in the grid's order.
    pub cells: Vec<CellStep>,
    /// Cells with both models predicted.
    pub predicted_cells: usize,
    /// The largest ratio over them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_ratio: Option<f64>,
    /// The mean ratio over them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_ratio: Option<f64>,
}

/// One model's step under `training`, or why it is refused.
fn model_step(spec: &ModelSpec, basis: &StepBasis, training: Training) -> ModelStep {
    let megatron = training_flops(Convention::Megatron, spec)
        .map(|f| f.as_f64())
        .map_err(|e| e.to_string());
    match step_report(spec, &basis.request(spec, training), megatron) {
        Ok(r) => ModelStep {
            training,
            parts: Some(StepParts::of(&r.step)),
            step: Some(r),
            refused: None,
        },
        Err(e) => ModelStep {
            training,
            step: None,
            parts: None,
            refused: Some(e.to_string()),
        },
    }
}

/// An error when a layout gives a pipeline split: a grid's looped models place their own.
fn refuse_given_split(layouts: &[Training]) -> Result<()> {
    if let Some(t) =
        (layouts.iter()).find(|t| t.first_stage_layers.is_some() || t.last_stage_layers.is_some())
    {
        let field = if t.first_stage_layers.is_some() {
            "training.first_stage_layers"
        } else {
            "training.last_stage_layers"
        };
        return Err(Error::invalid(
            field,
            "a grid's step predictions take no given pipeline split: each cell's looped model \
             places its own (the whole loop on one stage), so no cell would have a ratio; \
             predict one model with that split with smelt predict --global-batch",
        ));
    }
    Ok(())
}

/// Predicts every cell of `report` under `basis`: the flags' layout, or (without one) each
/// cell's Baseline's `[training]`, which every cell must then have.
pub fn predict_steps(report: &GridReport, basis: &StepBasis) -> Result<StepGrid> {
    let layouts = (report.cells.iter())
        .map(|c| match (basis.training, c.baseline.training) {
            (Some(t), None) => Ok(t),
            (None, Some(t)) => Ok(t),
            (Some(_), Some(_)) => Err(Error::invalid(
                "training",
                format!(
                    "cell {} {}: the layout is given twice, by the grid file's [training] and \
                     by {}; give it once",
                    c.scale,
                    c.sparsity_label,
                    match basis.layout_source {
                        LayoutSource::Defaults => "the defaults",
                        _ => "the flags",
                    }
                ),
            )),
            (None, None) => Err(Error::invalid(
                "training",
                format!(
                    "cell {} {}: no layout: give the grid file a [training] table or the \
                     layout flags (--tp, --ep, --pp, --dp or --gpus, --micro-batch, ...)",
                    c.scale, c.sparsity_label
                ),
            )),
        })
        .collect::<Result<Vec<Training>>>()?;
    refuse_given_split(&layouts)?;
    let cells = crate::par::map(
        &report.cells.iter().zip(layouts).collect::<Vec<_>>(),
        |(c, t)| -> Result<CellStep> {
            let flops_per_token = crate::cost::cost(&c.baseline)?.budgets().flops.as_f64();
            let baseline = model_step(&c.baseline, basis, *t);
            let looped = model_step(&c.looped, basis, *t);
            let (ratio, drivers) = match (&baseline, &looped) {
                (
                    ModelStep {
                        step: Some(b),
                        parts: Some(bp),
                        ..
                    },
                    ModelStep {
                        step: Some(l),
                        parts: Some(lp),
                        ..
                    },
                ) => {
                    let base = b.step_seconds;
                    let d = |x: f64, y: f64| (y - x) / base;
                    let drivers = Drivers {
                        experts: d(bp.experts, lp.experts),
                        all_to_all: d(bp.all_to_all, lp.all_to_all),
                        host: d(bp.host, lp.host),
                        imbalance: d(bp.imbalance, lp.imbalance),
                        other: d(bp.other, lp.other),
                    };
                    (Some(l.step_seconds / base), Some(drivers))
                }
                _ => (None, None),
            };
            Ok(CellStep {
                scale: c.scale.clone(),
                sparsity_label: c.sparsity_label.clone(),
                sparsity: c.sparsity.baseline,
                flops_per_token,
                flop_ratio: c.ratios.flops,
                looped_does_not_fit: CellStep::loses_the_fit(&baseline, &looped),
                baseline,
                looped,
                ratio,
                drivers,
            })
        },
    )
    .into_iter()
    .collect::<Result<Vec<CellStep>>>()?;
    let ratios: Vec<f64> = cells.iter().filter_map(|c| c.ratio).collect();
    let n = ratios.len();
    Ok(StepGrid {
        basis: basis.clone(),
        predicted_cells: n,
        max_ratio: ratios.iter().copied().reduce(f64::max),
        mean_ratio: (n > 0).then(|| ratios.iter().sum::<f64>() / n as f64),
        cells,
    })
}
