//! A step prediction as `smelt predict --global-batch` reports it: the step, the
//! throughput per GPU, the model TFLOP/s per GPU under Megatron-LM's FLOP convention, and
//! whether the layout fits the card's memory ([`crate::cost::training::training_memory`]).

use serde::Serialize;

use super::{Recompute, StepPrediction, StepRequest, predict_step};
use crate::cost::training::training_memory;
use crate::error::Result;
use crate::model::ModelSpec;

/// Whether the layout fits each GPU's memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum MemoryVerdict {
    /// The peak per GPU is within the card's memory.
    Fits {
        /// Peak bytes per GPU.
        peak_bytes: f64,
        /// The card's bytes.
        card_bytes: f64,
    },
    /// The peak per GPU exceeds the card's memory.
    DoesNotFit {
        /// Peak bytes per GPU.
        peak_bytes: f64,
        /// The card's bytes.
        card_bytes: f64,
    },
    /// Not checked, and why (the training-memory model's refusal, or no card size).
    NotChecked {
        /// Why.
        reason: String,
    },
}

/// `smelt predict` with a layout.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepReport {
    /// The model's name.
    pub model: String,
    /// The prediction.
    pub step: StepPrediction,
    /// Seconds per step.
    pub step_seconds: f64,
    /// Tokens per second per GPU.
    pub tokens_per_second_per_gpu: f64,
    /// Model TFLOP/s per GPU under Megatron-LM's `num_floating_point_operations`, when the
    /// convention counts this model.
    pub megatron_tflops_per_gpu: Option<f64>,
    /// Megatron TFLOP/s over the card's dense bf16 peak (an MFU under that convention).
    pub megatron_mfu: Option<f64>,
    /// Why the Megatron count is absent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub megatron_refused: Option<String>,
    /// The memory verdict.
    pub memory: MemoryVerdict,
}

/// Predicts `spec` under `req` and reports it; `megatron_flops_per_token` is the model's
/// training FLOPs per token under Megatron-LM's convention
/// (`launcher_flops::training_flops`), or why that convention does not count it.
pub fn step_report(
    spec: &ModelSpec,
    req: &StepRequest,
    megatron_flops_per_token: std::result::Result<f64, String>,
) -> Result<StepReport> {
    let step = predict_step(spec, req)?;
    let (megatron_tflops_per_gpu, megatron_refused) = match megatron_flops_per_token {
        Ok(f) => (Some(f * step.tokens_per_second_per_gpu / 1e12), None),
        Err(e) => (None, Some(e)),
    };
    let peak = req.card.spec().peak_flops_per_second;
    let memory = match (
        training_memory(&recomputing(spec, req.recompute), &req.training),
        req.card.spec().memory_capacity_bytes,
    ) {
        // A looped model's own uneven split is not the training-memory model's; a split
        // the layout gives (first/last stage layers) is.
        _ if (step.pipeline.as_ref()).is_some_and(|p| !p.even && p.loop_stage.is_some()) => {
            MemoryVerdict::NotChecked {
                reason: uneven(step.pipeline.as_ref().map_or(&[][..], |p| &p.stage_layers)),
            }
        }
        (Ok(m), Some(card_bytes)) => {
            let peak_bytes = m.peak.as_f64();
            if peak_bytes <= card_bytes {
                MemoryVerdict::Fits {
                    peak_bytes,
                    card_bytes,
                }
            } else {
                MemoryVerdict::DoesNotFit {
                    peak_bytes,
                    card_bytes,
                }
            }
        }
        (Err(e), _) => MemoryVerdict::NotChecked {
            reason: e.to_string(),
        },
        (_, None) => MemoryVerdict::NotChecked {
            reason: format!("the card table has no memory size for {}", req.card),
        },
    };
    Ok(StepReport {
        model: spec.name.clone().unwrap_or_else(|| "model".to_owned()),
        step_seconds: step.step_seconds,
        tokens_per_second_per_gpu: step.tokens_per_second_per_gpu,
        megatron_mfu: megatron_tflops_per_gpu.map(|t| t * 1e12 / peak),
        megatron_tflops_per_gpu,
        megatron_refused,
        memory,
        step,
    })
}

/// `spec` with its activations counted under the step's recomputation: under a Megatron
/// policy (the default), the same recomputation (selective: the norms and the experts'
/// activation, Megatron-Core's `layernorm` and `moe_act`); other policies as they are.
pub fn recomputing(spec: &ModelSpec, recompute: Recompute) -> ModelSpec {
    use crate::model::{ActivationPolicy as P, RecomputeModule as M, RecomputeModules};
    let mut spec = spec.clone();
    if spec.counting.activations.is_megatron() {
        spec.counting.activations = match recompute {
            Recompute::None => P::Megatron,
            Recompute::Selective => {
                spec.counting.recompute_modules = RecomputeModules::of(&[M::Layernorm, M::MoeAct]);
                P::MegatronSelective
            }
            Recompute::Full => P::MegatronFull,
        };
    }
    spec
}

/// Why the memory verdict is not given for a looped model's uneven pipeline split.
fn uneven(stage_layers: &[u64]) -> String {
    let split: Vec<String> = stage_layers.iter().map(u64::to_string).collect();
    format!(
        "the loop's pipeline split ({} physical layers per stage) is not the even split the \
         training-memory model assumes",
        split.join("/")
    )
}
