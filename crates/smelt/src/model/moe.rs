//! The MoE FFN of a model file (`[model.moe]`) and its experts' activation.

use serde::{Deserialize, Serialize};

use super::{Router, RouterGroups, is_false, is_zero};
use crate::names::named_enum;

/// The MoE FFN: routed SwiGLU experts, `top_k` active, plus optional shared experts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Moe {
    /// Routed experts per layer.
    pub experts: u64,
    /// Routed experts each token uses.
    pub top_k: u64,
    /// SwiGLU width of one routed expert (3 matrices of `hidden x expert_ffn`, of
    /// `latent x expert_ffn` with a `latent` width).
    pub expert_ffn: u64,
    /// LatentMoE (Nemotron 3 Super's `moe_latent_size`): the routed experts work at this
    /// width instead of `hidden`. After the router has chosen on the hidden state, each token
    /// is projected down to `latent` once (`fc1_latent_proj`), dispatched to its experts at
    /// that width, and their weighted sum projected back up (`fc2_latent_proj`): `2 · hidden
    /// · latent` parameters per MoE layer and as many multiply-adds per token
    /// (`latent_projections` in the counts). The router and the shared experts stay at
    /// `hidden`. Absent: the experts work at `hidden`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latent: Option<u64>,
    /// Always-active shared experts per layer.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shared_experts: u64,
    /// SwiGLU width of one shared expert.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shared_ffn: u64,
    /// A sigmoid gate on the shared experts' output (Qwen1.5/2-MoE): one `hidden x 1`
    /// linear per layer, `hidden` parameters and `2 * hidden` FLOPs per token.
    #[serde(default, skip_serializing_if = "is_false")]
    pub shared_gate: bool,
    /// A bias per routed expert on the router (gpt-oss's router bias, DeepSeek-V3's
    /// `e_score_correction_bias`): `experts` parameters per MoE layer, no counted FLOPs.
    #[serde(default, skip_serializing_if = "is_false")]
    pub router_bias: bool,
    /// Biases in the routed experts (gpt-oss): `2 * expert_ffn + hidden` parameters per
    /// expert (gate and up, down), no counted FLOPs.
    #[serde(default, skip_serializing_if = "is_false")]
    pub expert_bias: bool,
    /// The routed experts' gated activation (`swiglu` unless set): it changes no counted
    /// FLOPs or parameters, only what a training step saves ([`crate::cost::memory`]).
    #[serde(default, skip_serializing_if = "ExpertActivation::is_swiglu")]
    pub activation: ExpertActivation,
    /// The router's learned scales (Gemma 4's `router.scale` and `per_expert_scale`): the
    /// router's input is RMS-normed without a scale, multiplied by `hidden` learned
    /// per-dimension scales, and each chosen expert's weight by its own learned scale:
    /// `hidden + experts` parameters per MoE layer, no counted FLOPs (elementwise).
    #[serde(default, skip_serializing_if = "is_false")]
    pub router_scale: bool,
    /// Norms of their own around the two branches of the MoE block (Gemma 4: the shared
    /// expert's output, the routed experts' input and output are RMS-normed,
    /// `post_feedforward_layernorm_1`, `pre_feedforward_layernorm_2`,
    /// `post_feedforward_layernorm_2`): `3·hidden` parameters per MoE layer, no counted
    /// FLOPs. Needs a shared expert.
    #[serde(default, skip_serializing_if = "is_false")]
    pub branch_norms: bool,
    /// How the router turns its logits into the chosen experts' weights, where the import
    /// knows it (`None`: not stated). It changes no counted FLOPs or parameters, only what
    /// a Transformers training step saves ([`crate::cost::transformers`]), which refuses a
    /// model that does not state it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router: Option<Router>,
    /// The expert groups of a group-limited router (`router = "softmax_grouped_fp32"`,
    /// `"sigmoid_grouped_fp32"` or `"sigmoid_grouped_renormalised_fp32"`, which need it;
    /// no other router takes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router_groups: Option<RouterGroups>,
    /// The amplitude `ε` of the training-time noise the MoE's input is multiplied by,
    /// uniform in `[1 − ε, 1 + ε]` per element (Mixtral's and MiniMax-M2's
    /// `router_jitter_noise`, PhiMoE's `input_jitter_noise`): no counted FLOPs or
    /// parameters; a Transformers training step saves each noise tensor it draws
    /// ([`crate::cost::transformers`]). Absent: no noise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<Jitter>,
}

/// A jitter amplitude ([`Moe::jitter`]): a finite number strictly between 0 and 1 (the
/// model's validation).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Jitter(pub f64);

// The validation keeps the amplitude finite, where equality is an equivalence.
impl Eq for Jitter {}

named_enum! {
    /// The gated activation of the routed experts, between their gate/up and down
    /// projections.
    #[derive(Default)]
    pub enum ExpertActivation: "expert activation" {
        /// `silu(gate) · up`.
        #[default]
        Swiglu = "swiglu",
        /// gpt-oss's clamped SwiGLU: `(clamp(up, ±limit) + 1) · g · σ(α·g)` with
        /// `g = clamp(gate, max = limit)` (`swiglu_limit` and `swiglu_alpha`, 7.0 and 1.702
        /// by default in Transformers' `GptOssConfig`).
        ClampedSwiglu = "clamped_swiglu",
        /// Gemma's GeGLU with the tanh approximation, `gelu_tanh(gate) · up`
        /// (`hidden_activation = "gelu_pytorch_tanh"`), in its routed experts and its
        /// shared (dense) MLP alike.
        GeluTanh = "gelu_tanh",
        /// Nemotron-H's MLP without a gate, `down(relu(up·x)²)`, in every FFN of the model
        /// (routed and shared experts and the dense FFN): two matrices of `hidden x ffn`,
        /// not three, so it changes the parameters and FLOPs.
        Relu2 = "relu2",
    }
}

impl Moe {
    /// The width the routed experts read and write: `latent`, else `hidden`.
    pub fn expert_width(&self, hidden: u64) -> u64 {
        self.latent.unwrap_or(hidden)
    }

    /// The rule of [`Moe::jitter`]: strictly between 0 and 1 (0 is written by leaving the
    /// field out; at 1 or more the noise can zero or flip the input).
    pub(super) fn check_jitter(&self) -> crate::error::Result<()> {
        match self.jitter {
            Some(Jitter(j)) if !(j > 0.0 && j < 1.0) => Err(crate::error::Error::invalid(
                "model.moe.jitter",
                format!(
                    "must be a number strictly between 0 and 1 (leave it out for no noise); \
                     got {j}"
                ),
            )),
            _ => Ok(()),
        }
    }
}

impl ExpertActivation {
    fn is_swiglu(&self) -> bool {
        *self == ExpertActivation::Swiglu
    }

    /// Matrices of `hidden x ffn` per FFN: 3 (gate, up, down), 2 without a gate.
    pub fn matrices(&self) -> u64 {
        match self {
            ExpertActivation::Relu2 => 2,
            ExpertActivation::Swiglu
            | ExpertActivation::ClampedSwiglu
            | ExpertActivation::GeluTanh => 3,
        }
    }
}
