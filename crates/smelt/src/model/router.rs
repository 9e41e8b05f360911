//! The router of a MoE layer ([`Router`]): how a Transformers class makes the chosen
//! experts' weights, which only the Transformers activation policies read.

use crate::names::named_enum;

named_enum! {
    /// The router of a MoE layer: how the chosen experts' weights are made from its logits.
    pub enum Router: "router" {
        /// A softmax over every expert, then the top-k probabilities as the weights, cast to
        /// the model's dtype (Transformers' `norm_topk_prob = false`: OLMoE, Qwen1.5/2-MoE).
        Softmax = "softmax",
        /// A softmax over every expert, then the top-k probabilities divided by their sum
        /// (`norm_topk_prob = true`: Qwen3-MoE), cast to the model's dtype.
        SoftmaxRenormalised = "softmax_renormalised",
        /// As `softmax_renormalised`, the weights kept in float32 (Mixtral's router).
        SoftmaxRenormalisedFp32 = "softmax_renormalised_fp32",
        /// The top-k of the float32 logits, then a softmax over those `k` alone, cast to
        /// the model's dtype (Granite-MoE's `GraniteMoeTopKRouter`). The weights equal
        /// `softmax_renormalised`'s; what a training step saves differs.
        TopkSoftmax = "topk_softmax",
        /// The top-k of the logits (the router bias added) in the model's dtype, then a
        /// softmax over those `k` alone in the model's dtype (gpt-oss's `GptOssTopKRouter`):
        /// as `topk_softmax`'s, the weights equal the renormalised top-k probabilities; no
        /// float32 copy is made.
        TopkSoftmaxDtype = "topk_softmax_dtype",
        /// A float32 sigmoid over every expert, the top-k chosen after adding the router
        /// bias (`e_score_correction_bias`), their sigmoids divided by their sum and kept
        /// in float32 (MiniMax-M2's `MiniMaxM2TopKRouter`).
        SigmoidRenormalisedFp32 = "sigmoid_renormalised_fp32",
        /// PhiMoE's SparseMixer as a training step runs it, without input jitter
        /// (`input_jitter_noise = 0`): two rounds, each masking the logits, sampling an
        /// expert, a softmax in the model's dtype and its maximum; always two experts.
        Sparsemixer = "sparsemixer",
    }
}

impl Router {
    /// The router of Transformers' `norm_topk_prob` (false when absent).
    pub fn of_norm_topk_prob(norm_topk_prob: Option<bool>) -> Self {
        if norm_topk_prob == Some(true) {
            Router::SoftmaxRenormalised
        } else {
            Router::Softmax
        }
    }

    /// Whether the top-k weights are divided by their sum (`norm_topk_prob`).
    pub fn renormalises(self) -> bool {
        matches!(
            self,
            Router::SoftmaxRenormalised
                | Router::SoftmaxRenormalisedFp32
                | Router::SigmoidRenormalisedFp32
        )
    }
}
