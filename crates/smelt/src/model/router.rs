//! The router of a MoE layer ([`Router`]): how a Transformers class makes the chosen
//! experts' weights, which only the Transformers activation policies read.

use serde::{Deserialize, Serialize};

use super::validate::{ensure, positive};
use super::{MAX_COUNT, Moe};
use crate::error::Result;
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
        /// DeepSeek-V2's greedy router (`DeepseekV2TopkRouter`, `topk_method = "greedy"`):
        /// float32 logits from float32 copies of its input and weight, a float32 softmax
        /// over every expert, the top-k probabilities as the weights, kept in float32 (not
        /// renormalised, times `routed_scaling_factor`).
        SoftmaxFp32 = "softmax_fp32",
        /// DeepSeek-V2's group-limited router (`topk_method = "group_limited_greedy"`): as
        /// `softmax_fp32`, the experts split into `[model.moe.router_groups]` groups, a
        /// group scored by its best probability, the top-k chosen among the best groups
        /// (the others masked to 0).
        SoftmaxGroupedFp32 = "softmax_grouped_fp32",
        /// DeepSeek-V3's router (`DeepseekV3TopkRouter`, `norm_topk_prob = false`): float32
        /// logits from float32 copies of its input and weight, a float32 sigmoid over every
        /// expert, the router bias (`e_score_correction_bias`) added for the choice, the
        /// experts split into `[model.moe.router_groups]` groups, a group scored by the sum
        /// of its two best biased scores, the top-k chosen among the best groups (the
        /// others masked to -inf); the weights are the chosen sigmoids, kept in float32
        /// (times `routed_scaling_factor`).
        SigmoidGroupedFp32 = "sigmoid_grouped_fp32",
        /// As `sigmoid_grouped_fp32`, the chosen sigmoids divided by their sum
        /// (`norm_topk_prob = true`: DeepSeek-V3, Kimi-K2).
        SigmoidGroupedRenormalisedFp32 = "sigmoid_grouped_renormalised_fp32",
        /// Llama-4's router (`Llama4Router`): the top-k logits scattered into a tensor of
        /// every expert (the others `-inf`), a float32 sigmoid over it, cast to the model's
        /// dtype: a weight for every expert, 0 for those not chosen, by which Llama-4's
        /// experts scale their input; they run every expert on every token.
        SigmoidTopkScatter = "sigmoid_topk_scatter",
    }
}

/// The expert groups of a group-limited router (DeepSeek's `n_group` and `topk_group`): the
/// `experts` are split into `groups` equal groups and a token's top-k experts are chosen
/// among its `topk_groups` best groups. Read only by the Transformers activation policies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterGroups {
    /// Groups of experts (`n_group`); must divide `model.moe.experts`.
    pub groups: u64,
    /// Groups each token's experts are chosen from (`topk_group`), at most `groups`.
    pub topk_groups: u64,
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
                | Router::SigmoidGroupedRenormalisedFp32
        )
    }

    /// Whether it chooses among groups of experts ([`RouterGroups`]).
    pub fn grouped(self) -> bool {
        matches!(
            self,
            Router::SoftmaxGroupedFp32
                | Router::SigmoidGroupedFp32
                | Router::SigmoidGroupedRenormalisedFp32
        )
    }

    /// Whether its logits are computed from float32 copies of its input and weight
    /// (DeepSeek's routers: in bfloat16 a training step keeps both copies).
    pub fn fp32_logits(self) -> bool {
        matches!(
            self,
            Router::SoftmaxFp32
                | Router::SoftmaxGroupedFp32
                | Router::SigmoidGroupedFp32
                | Router::SigmoidGroupedRenormalisedFp32
        )
    }
}

/// The rules of `moe`'s router: a group-limited router has its groups, in which its top-k
/// fit, and no other router has groups; DeepSeek-V3's router adds its bias.
pub(super) fn check(moe: &Moe) -> Result<()> {
    let grouped = moe.router.is_some_and(Router::grouped);
    let field = "model.moe.router_groups";
    let Some(g) = moe.router_groups else {
        return ensure(!grouped, field, || {
            format!(
                "is missing: router = \"{}\" chooses among groups of experts (DeepSeek's \
                 n_group and topk_group); set groups and topk_groups",
                moe.router.map(Router::as_str).unwrap_or_default()
            )
        });
    };
    ensure(grouped, field, || {
        "is only read with a group-limited router (model.moe.router = \"softmax_grouped_fp32\", \
         \"sigmoid_grouped_fp32\" or \"sigmoid_grouped_renormalised_fp32\"): set one or remove \
         the table"
            .to_owned()
    })?;
    positive("model.moe.router_groups.groups", g.groups, MAX_COUNT)?;
    positive(
        "model.moe.router_groups.topk_groups",
        g.topk_groups,
        MAX_COUNT,
    )?;
    ensure(
        moe.experts.is_multiple_of(g.groups),
        "model.moe.router_groups.groups",
        || {
            format!(
                "must divide model.moe.experts ({}); got {}",
                moe.experts, g.groups
            )
        },
    )?;
    ensure(
        g.topk_groups <= g.groups,
        "model.moe.router_groups.topk_groups",
        || {
            format!(
                "must not exceed groups ({}); got {}",
                g.groups, g.topk_groups
            )
        },
    )?;
    let per_group = moe.experts / g.groups;
    let sigmoid = moe.router != Some(Router::SoftmaxGroupedFp32);
    ensure(
        !sigmoid || per_group >= 2,
        "model.moe.router_groups.groups",
        || {
            format!(
                "leaves {per_group} expert per group: DeepSeek-V3's router scores a group by \
                 its two best experts, so each group needs at least 2"
            )
        },
    )?;
    ensure(
        moe.top_k <= g.topk_groups * per_group,
        "model.moe.top_k",
        || {
            format!(
                "must not exceed the experts of the topk_groups best groups ({} x {per_group}); \
                 got {}",
                g.topk_groups, moe.top_k
            )
        },
    )?;
    ensure(!sigmoid || moe.router_bias, "model.moe.router_bias", || {
        "must be true with a sigmoid group-limited router: DeepSeek-V3's router adds its \
         e_score_correction_bias to choose"
            .to_owned()
    })
}

impl Moe {
    /// A copy of `self` with `experts` routed experts (a lattice point's), its group-limited
    /// router kept only where its groups still fit them (the model's validation), else not
    /// stated.
    pub fn with_experts(&self, experts: u64) -> Moe {
        let mut moe = Moe {
            experts,
            ..self.clone()
        };
        if moe.router_groups.is_some() && check(&moe).is_err() {
            moe.router = None;
            moe.router_groups = None;
        }
        moe
    }
}

impl RouterGroups {
    /// Whether `router` over these groups fits `experts` routed experts, `top_k` chosen
    /// (the model's validation rules, with the router's bias): an import states a
    /// group-limited router only where it does.
    pub fn fit(self, router: Router, experts: u64, top_k: u64) -> bool {
        let moe = Moe {
            experts,
            top_k,
            expert_ffn: 1,
            latent: None,
            shared_experts: 0,
            shared_ffn: 0,
            shared_gate: false,
            router_bias: true,
            expert_bias: false,
            activation: super::ExpertActivation::Swiglu,
            router_scale: false,
            branch_norms: false,
            router: Some(router),
            router_groups: Some(self),
            jitter: None,
        };
        check(&moe).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moe(router: Router, groups: Option<(u64, u64)>) -> Moe {
        Moe {
            experts: 8,
            top_k: 2,
            expert_ffn: 16,
            latent: None,
            shared_experts: 0,
            shared_ffn: 0,
            shared_gate: false,
            router_bias: true,
            expert_bias: false,
            activation: super::super::ExpertActivation::Swiglu,
            router_scale: false,
            branch_norms: false,
            router: Some(router),
            router_groups: groups.map(|(groups, topk_groups)| RouterGroups {
                groups,
                topk_groups,
            }),
            jitter: None,
        }
    }

    fn error(m: &Moe) -> String {
        check(m).unwrap_err().to_string()
    }

    #[test]
    fn a_grouped_router_needs_groups_that_fit_its_experts() {
        let sigmoid = Router::SigmoidGroupedRenormalisedFp32;
        assert!(check(&moe(sigmoid, Some((4, 2)))).is_ok());
        assert!(error(&moe(sigmoid, None)).contains("model.moe.router_groups"));
        assert!(error(&moe(sigmoid, Some((3, 1)))).contains("must divide model.moe.experts (8)"));
        assert!(error(&moe(sigmoid, Some((4, 5)))).contains("must not exceed groups (4)"));
        // DeepSeek-V3's router scores a group by its two best experts.
        assert!(error(&moe(sigmoid, Some((8, 4)))).contains("at least 2"));
        assert!(check(&moe(Router::SoftmaxGroupedFp32, Some((8, 4)))).is_ok());
        let mut wide = moe(sigmoid, Some((4, 1)));
        wide.top_k = 3;
        assert!(error(&wide).contains("model.moe.top_k"));
        let mut unbiased = moe(sigmoid, Some((4, 2)));
        unbiased.router_bias = false;
        assert!(error(&unbiased).contains("model.moe.router_bias"));
        // Groups are read only with a grouped router.
        assert!(error(&moe(Router::SoftmaxFp32, Some((4, 2)))).contains("only read"));
    }

    #[test]
    fn a_lattice_point_keeps_the_router_only_where_its_groups_fit() {
        let m = moe(Router::SigmoidGroupedFp32, Some((4, 2)));
        assert_eq!(m.with_experts(16).router, Some(Router::SigmoidGroupedFp32));
        let other = m.with_experts(6);
        assert_eq!((other.router, other.router_groups), (None, None));
    }
}
