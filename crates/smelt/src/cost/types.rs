//! What the cost model reports: the JSON contract of `smelt cost`.

use serde::Serialize;

use super::memory::ActivationReport;
use super::{BudgetKind, PerBudget, Residuals, Shortcut};
use crate::error::Result;
use crate::model::{Attention, KvCount, WindowKind, Workload};
use crate::units::{ActivationBytes, Bytes, Flops, KvElements, Params};

/// Parameters by component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct ParamBreakdown {
    /// Q, K, V, O projections.
    pub attention: Params,
    /// Routed experts (all of them, or the `top_k` a token uses for *active*).
    pub experts: Params,
    /// Router.
    pub router: Params,
    /// Shared experts (and their gate).
    pub shared: Params,
    /// Dense FFNs of the layers that have no MoE.
    pub dense: Params,
    /// RMSNorm weights (layer norms, final norm, q/k norms).
    pub norms: Params,
    /// Input embedding (0 unless counted).
    pub embeddings: Params,
    /// LM head (0 unless counted, and 0 when tied to counted embeddings).
    pub lm_head: Params,
    /// Multi-token-prediction modules (0 unless `[counting] mtp`).
    pub mtp: Params,
    /// Sparse attention indexers (0 without one), their key norms included.
    pub indexer: Params,
    /// Recurrent token mixers (0 without recurrent layers): every weight of theirs, the
    /// convolution, per-head `A_log` and `dt_bias` and the gated norm included.
    #[serde(skip_serializing_if = "is_zero_params")]
    pub recurrent: Params,
    /// LatentMoE's projections of each token to the experts' width and back
    /// (`model.moe.latent`; 0 without).
    #[serde(skip_serializing_if = "is_zero_params")]
    pub latent_projections: Params,
}

fn is_zero_params(p: &Params) -> bool {
    p.0 == 0
}

fn is_zero_flops(f: &Flops) -> bool {
    *f == Flops::ZERO
}

impl ParamBreakdown {
    /// The checked sum of the components.
    pub fn total(&self) -> Result<Params> {
        Params::sum(&[
            self.attention,
            self.experts,
            self.router,
            self.shared,
            self.dense,
            self.norms,
            self.embeddings,
            self.lm_head,
            self.mtp,
            self.indexer,
            self.recurrent,
            self.latent_projections,
        ])
    }
}

/// Forward FLOPs per token by component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct FlopBreakdown {
    /// Q, K, V, O projection GEMMs.
    pub projections: Flops,
    /// `QKᵀ` and `PV` inside documents.
    pub attention_core: Flops,
    /// Router GEMM.
    pub router: Flops,
    /// The `top_k` routed experts.
    pub experts: Flops,
    /// Shared experts (and their gate).
    pub shared: Flops,
    /// Dense FFNs of the layers that have no MoE.
    pub dense: Flops,
    /// LM head (0 unless counted).
    pub lm_head: Flops,
    /// Multi-token-prediction modules (0 unless `[counting] mtp`).
    pub mtp: Flops,
    /// Sparse attention indexers: their projections and the scores of every key (0 without
    /// one).
    pub indexer: Flops,
    /// Recurrent token mixers' projection GEMMs (0 without recurrent layers).
    #[serde(skip_serializing_if = "is_zero_flops")]
    pub recurrent_projections: Flops,
    /// Recurrent token mixers' convolution and chunked recurrence (Gated DeltaNet's delta
    /// rule, Mamba-2's SSD scan), as executed on the workload's `context`-token sequence.
    #[serde(skip_serializing_if = "is_zero_flops")]
    pub recurrent_core: Flops,
    /// LatentMoE's projections of each token to the experts' width and back (0 without a
    /// `model.moe.latent`).
    #[serde(skip_serializing_if = "is_zero_flops")]
    pub latent_projections: Flops,
}

impl FlopBreakdown {
    /// The checked exact sum of the components.
    pub fn total(&self) -> Result<Flops> {
        Flops::sum(&[
            self.projections,
            self.attention_core,
            self.router,
            self.experts,
            self.shared,
            self.dense,
            self.lm_head,
            self.mtp,
            self.indexer,
            self.recurrent_projections,
            self.recurrent_core,
            self.latent_projections,
        ])
    }
}

/// The three budgets a fair comparison matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Budgets {
    /// Training FLOPs per token.
    pub flops: Flops,
    /// Total parameters (non-embedding unless `[counting]` says otherwise).
    pub params: Params,
    /// KV-cache elements: per token, or held at the context (`[counting] kv`).
    pub kv: KvElements,
    /// Activation bytes per token under `[counting] activations`.
    pub activations: ActivationBytes,
}

impl Budgets {
    /// `self / baseline - 1`, budget by budget.
    pub fn residuals_against(&self, baseline: &Budgets) -> Residuals {
        Residuals::relative(self.to_f64(), baseline.to_f64())
    }

    /// Whether no budget of positive weight in `weights` exceeds `baseline`'s, compared
    /// exactly (a budget weighed 0 is reported, not matched, and bounds nothing).
    pub fn within(&self, baseline: &Budgets, weights: &PerBudget<f64>) -> bool {
        let matched = |kind: BudgetKind| weights[kind] > 0.0;
        (!matched(BudgetKind::Flops) || self.flops <= baseline.flops)
            && (!matched(BudgetKind::Params) || self.params <= baseline.params)
            && (!matched(BudgetKind::Kv) || self.kv <= baseline.kv)
            && (!matched(BudgetKind::Activations) || self.activations <= baseline.activations)
    }
}

/// Parameters: total and active, with breakdowns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ParamReport {
    /// All parameters counted.
    pub total: Params,
    /// Parameters one token touches.
    pub active: Params,
    /// `total` by component.
    pub breakdown: ParamBreakdown,
    /// `active` by component.
    pub active_breakdown: ParamBreakdown,
}

/// FLOPs per token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct FlopReport {
    /// Training FLOPs per token (`3 x forward`).
    pub training: Flops,
    /// Forward FLOPs per token.
    pub forward: Flops,
    /// `forward` by component.
    pub forward_breakdown: FlopBreakdown,
}

/// KV cache per token, and per sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct KvReport {
    /// Key plus value elements per token, over all layer executions (MLA: the latent and
    /// the RoPE key).
    pub elements: KvElements,
    /// `elements * kv_dtype_bytes`.
    pub bytes: Bytes,
    /// What one sequence of the workload's context holds at its end.
    pub at_context: KvAtContext,
    /// Which of the two the KV budget is (`[counting] kv`).
    pub budget: KvCount,
    /// With recurrent layers, the state one sequence holds whatever its length (included
    /// in [`KvAtContext::elements`], not in the per-token `elements`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recurrent_state: Option<RecurrentState>,
}

/// The state a sequence holds in the recurrent layers: a fixed size per layer execution,
/// not a cache that grows per token.
///
/// Gated DeltaNet: the convolution's last `conv_kernel` inputs per channel (`2K + V`
/// channels; Transformers' cache keeps `conv_kernel` of them, one more than the next
/// token needs) and the delta rule's `value_heads × key_head_dim × value_head_dim`
/// matrix. Mamba-2: the convolution's last `conv_kernel` inputs per channel
/// (`I + 2·groups·state`) and the SSM state `heads × head_dim × state`, which the `delta_*`
/// fields then hold. Bytes are at `kv_dtype_bytes`; Transformers' torch path keeps the
/// delta-rule matrix in fp32, and Nemotron-H's cache the SSM state
/// (`mamba_ssm_cache_dtype = "float32"`) (`bytes_fp32_delta`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct RecurrentState {
    /// The recurrent mixer's kind.
    pub kind: &'static str,
    /// Convolution state elements per layer execution.
    pub conv_per_execution: u64,
    /// The recurrence's own state elements per layer execution: the delta rule's matrix
    /// (Gated DeltaNet) or the SSM state (Mamba-2).
    pub delta_per_execution: u64,
    /// Recurrent layer executions per forward pass (a looped layer's visits each keep
    /// their own state).
    pub executions: u64,
    /// Elements per sequence over all of them.
    pub elements: KvElements,
    /// `elements * kv_dtype_bytes`.
    pub bytes: Bytes,
    /// The recurrence's part in fp32 (as Transformers keeps it), plus the convolution part
    /// at `kv_dtype_bytes`.
    pub bytes_fp32_delta: Bytes,
}

impl RecurrentState {
    /// What the recurrence's own state is called for this kind: `delta` (Gated DeltaNet)
    /// or `ssm` (Mamba-2).
    pub fn state_word(&self) -> &'static str {
        crate::model::Mixer::state_word_of(self.kind)
    }
}

/// The KV cache one sequence holds at the end of the workload's context: `context` entries
/// per full layer execution, `min(window, context)` per windowed one, plus the recurrent
/// layers' state ([`RecurrentState`]) when the model has any.
///
/// The convention for windows is the window's own: a sliding layer holds the `W` keys its
/// last query attends, a chunked layer a whole chunk of `C`. Transformers' sliding-window
/// cache keeps `W - 1` after a prefill (the incoming token's key completes the window), and
/// its chunked layers use that cache with the window set to the chunk (`C - 1`), so for a
/// model with windowed layers the count under that convention is given too
/// ([`KvAtContext::elements_cache`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct KvAtContext {
    /// The context, tokens.
    pub context: u64,
    /// Elements held.
    pub elements: KvElements,
    /// `elements * kv_dtype_bytes`.
    pub bytes: Bytes,
    /// Keys (and values) held per windowed layer execution, `min(window, context)`; `None`
    /// without windows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub held_per_windowed_layer: Option<u64>,
    /// Elements held under Transformers' cache convention, `W - 1` per sliding (`C - 1` per
    /// chunked) layer execution once the context reaches the window; `None` without windows
    /// or where it is the same count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elements_cache: Option<KvElements>,
}

/// The fully-activated control a sparsity is measured against.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ControlReport {
    /// Where the control comes from.
    pub of: String,
    /// `F0`: its training FLOPs per token.
    pub flops_training: Flops,
    /// `N0`: its parameters.
    pub params: Params,
}

/// Compute-equivalent sparsity (SMELT Eq. 1).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sparsity {
    /// `S = 1 - N_act_eq / N`.
    pub s: f64,
    /// `N_act_eq = (F / F0) * N0`.
    pub n_act_eq: f64,
    /// The control (`F0`, `N0`).
    pub control: ControlReport,
}

/// The conventions a report was computed under, so that a number never travels without
/// its definition.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Conventions {
    /// FLOPs per multiply-add (2).
    pub flops_per_multiply_add: u64,
    /// Training over forward FLOPs (3).
    pub training_over_forward: u64,
    /// Causal or dense attention inside documents.
    pub attention: Attention,
    /// `"mean_doc_len"` (the shortcut) or `"doc_lengths"` (exact histogram).
    pub attention_keys_from: &'static str,
    /// Whether embeddings are in the parameter count.
    pub embeddings_counted: bool,
    /// Whether the LM head is in the parameter and FLOP counts.
    pub lm_head_counted: bool,
    /// Bytes per KV element.
    pub kv_dtype_bytes: u64,
    /// Whether the multi-token-prediction modules are in the parameter and FLOP counts.
    pub mtp_counted: bool,
    /// What the KV budget counts: `per_token` or `at_context`.
    pub kv_budget: KvCount,
    /// The workload everything per token was evaluated at.
    pub workload: Workload,
}

/// Mean keys per query, and what the mean-length shortcut would have said.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttentionReport {
    /// `c̄`, the mean keys a query attends.
    pub mean_keys_per_query: f64,
    /// `c̄` as an exact fraction `"num/den"` (or an integer).
    pub mean_keys_exact: String,
    /// The windowed layers' `c̄`, when the model has any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub windowed: Option<WindowedKeys>,
    /// With a sparse attention indexer, the keys a query attends (the indexer scores
    /// `mean_keys_per_query`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selected: Option<SelectedKeys>,
    /// With a histogram: the cost at the mean document length, for comparison (counted
    /// exactly; absent if that count does not fit in 128 bits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_length_shortcut: Option<Shortcut>,
}

/// The mean keys a query attends when an indexer selects its `topk` best.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SelectedKeys {
    /// Keys selected per query (fewer when fewer precede it).
    pub topk: u64,
    /// `c̄` of the attention core.
    pub mean_keys_per_query: f64,
    /// As an exact fraction.
    pub mean_keys_exact: String,
}

/// The mean keys a query of a windowed layer attends.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowedKeys {
    /// Sliding or chunked.
    pub kind: WindowKind,
    /// Window (chunk) length.
    pub size: u64,
    /// `c̄` of the windowed layers.
    pub mean_keys_per_query: f64,
    /// As an exact fraction.
    pub mean_keys_exact: String,
}

/// The cost of one model: the JSON contract of `smelt cost --format json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Cost {
    /// The model's name, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// How everything below was counted.
    pub conventions: Conventions,
    /// Physical layers.
    pub physical_layers: u64,
    /// Layer executions per forward pass.
    pub layer_executions: u64,
    /// Parameters.
    pub params: ParamReport,
    /// FLOPs per token.
    pub flops_per_token: FlopReport,
    /// KV cache per token.
    pub kv_cache_per_token: KvReport,
    /// Activations a training step saves for the backward pass, under every policy.
    pub activations: ActivationReport,
    /// Attention keys per query.
    pub attention: AttentionReport,
    /// Compute-equivalent sparsity.
    pub sparsity: Sparsity,
    /// Static and per-GPU training memory (only with `[training]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub training: Option<super::TrainingMemory>,
    /// Whether the layout fits a card (only when one is asked for: `smelt cost --card`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fit: Option<super::fit::FitReport>,
}

impl Cost {
    /// The three budgets of this cost.
    pub fn budgets(&self) -> Budgets {
        Budgets {
            flops: self.flops_per_token.training,
            params: self.params.total,
            kv: match self.kv_cache_per_token.budget {
                KvCount::PerToken => self.kv_cache_per_token.elements,
                KvCount::AtContext => self.kv_cache_per_token.at_context.elements,
            },
            activations: self
                .activations
                .policies
                .iter()
                .find(|p| p.policy == self.activations.budget)
                .map_or(ActivationBytes::ZERO, |p| p.per_token),
        }
    }
}
