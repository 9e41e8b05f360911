//! Lattice points, the looped model at a point, and the order candidates are ranked in.

use std::cmp::Ordering;

use serde::Serialize;

use crate::budget::{Budget, Score};
use crate::cost::{Budgets, Residuals};
use crate::model::{Knobs, Loop, Mixer, Model, Moe};

/// The knobs of one lattice point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    /// Hidden size.
    pub hidden: u64,
    /// Expert width.
    pub expert_ffn: u64,
    /// Query heads.
    pub heads: u64,
    /// Key/value heads.
    pub kv_heads: u64,
    /// Head width.
    pub head_dim: u64,
    /// Routed experts.
    pub experts: u64,
    /// The key/value latent rank of an MLA model (0 otherwise).
    pub kv_lora_rank: u64,
    /// An MLA model's per-head `(qk_nope_head_dim, v_head_dim)` (ignored otherwise).
    pub mla_widths: (u64, u64),
    /// A hybrid's recurrent mixer shape (`None`: the Baseline's; ignored without
    /// recurrent layers, whose positions are always the Baseline's).
    pub mixer: Option<Mixer>,
}

/// The looped model at one lattice point: the knobs given here (the recurrent mixer's shape
/// included), everything else (`top_k`, the recurrent layers' positions,
/// shared experts and their gate, dense layers, windowed layers, MLA's RoPE width and query
/// rank, vocabulary, q/k norm, attention biases and sinks, router and expert biases,
/// norm and LM-head biases, the indexer, MTP modules) from the Baseline, shared-expert and dense FFN widths scaled as
/// [`crate::budget::FfnRule::shared_width`] says.
pub fn looped_model(budget: &Budget, looping: Option<&Loop>, point: Point) -> Model {
    let base = &budget.baseline().model;
    let rule = budget.lattice().expert_ffn;
    let knobs = base.knobs();
    Model {
        layers: budget.layers(),
        hidden: point.hidden,
        heads: point.heads,
        kv_heads: point.kv_heads,
        head_dim: point.head_dim,
        moe: Moe {
            experts: point.experts,
            expert_ffn: point.expert_ffn,
            shared_ffn: rule.shared_width(base.moe.shared_ffn, base.hidden, point.hidden),
            ..base.moe.with_experts(point.experts)
        },
        looping: looping.cloned(),
        ..base.clone()
    }
    .with_knobs(Knobs {
        kv_lora_rank: point.kv_lora_rank,
        mla_widths: point.mla_widths,
        mixer: point.mixer,
        dense_ffn: rule.shared_width(knobs.dense_ffn, base.hidden, point.hidden),
    })
}

/// A lattice point with its budgets, residuals and score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    /// The looped model's architecture.
    pub model: Model,
    /// Its budgets.
    pub budgets: Budgets,
    /// Signed residuals against the Baseline.
    pub residuals: Residuals,
    /// Weighted |residuals|, largest first.
    pub score: Score,
    /// Its predicted time against the Baseline's (a budget with a time budget only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time: Option<TimeResidual>,
}

/// The predicted step time of a looped model against its Baseline's
/// ([`crate::budget::time`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TimeResidual {
    /// The Baseline's predicted seconds per token.
    pub baseline_seconds_per_token: f64,
    /// The looped model's predicted seconds per token.
    pub looped_seconds_per_token: f64,
    /// `looped / Baseline - 1`.
    pub residual: f64,
}

impl Candidate {
    /// The total order of the module docs: score, then closeness to the Baseline's shape
    /// `base`, then the final tie-breaks.
    pub fn cmp_rank(&self, other: &Self, base: &Model) -> Ordering {
        self.score
            .rank(&other.score)
            .then_with(|| rank_key(&self.model, base).cmp(&rank_key(&other.model, base)))
    }
}

/// The tie-break key of `m` (module docs): distance to the Baseline `b` knob by knob, then
/// larger `head_dim`, fewer `kv_heads`, fewer `heads`, larger `hidden`, fewer `experts`,
/// smaller `expert_ffn` (with MLA, the latent rank's distance comes first, then the
/// smaller rank last; with recurrent layers, the distances of their mixer's knobs
/// ([`mixer_knobs`]) come after the others, then the smaller knobs; with MLA, the value head
/// width's distance last, then the smaller width).
pub fn rank_key(m: &Model, b: &Model) -> impl Ord + use<> {
    use std::cmp::Reverse;
    let rank = |m: &Model| m.knobs().kv_lora_rank;
    (
        (
            rank(m).abs_diff(rank(b)),
            m.head_dim.abs_diff(b.head_dim),
            m.kv_heads.abs_diff(b.kv_heads),
            m.heads.abs_diff(b.heads),
            m.hidden.abs_diff(b.hidden),
            m.moe.experts.abs_diff(b.moe.experts),
            m.moe.expert_ffn.abs_diff(b.moe.expert_ffn),
            {
                let (x, y) = (mixer_knobs(m), mixer_knobs(b));
                std::array::from_fn::<u64, 4, _>(|i| x[i].abs_diff(y[i]))
            },
            v_head_dim(m).abs_diff(v_head_dim(b)),
        ),
        (
            Reverse(m.head_dim),
            m.kv_heads,
            m.heads,
            Reverse(m.hidden),
            m.moe.experts,
            m.moe.expert_ffn,
            rank(m),
            mixer_knobs(m),
            v_head_dim(m),
        ),
    )
}

/// An MLA model's value head width (0 otherwise): with `qk_nope_head_dim` (in `head_dim`)
/// the per-head widths a lattice pairs.
fn v_head_dim(m: &Model) -> u64 {
    m.knobs().mla_widths.1
}

/// The knobs of `m`'s recurrent mixer in tie-break order ([`Mixer::knobs`]): Gated
/// DeltaNet's `key_heads`, `value_heads`, `key_head_dim`, `value_head_dim`; Mamba-2's
/// `heads`, `head_dim`, `state` (then 0); zeros without recurrent layers.
pub fn mixer_knobs(m: &Model) -> [u64; 4] {
    m.knobs().mixer.map_or([0; 4], |x| x.knobs())
}
