//! The kernels of a plan: what each computes ([`Component`]), in which pass ([`Pass`]),
//! running what ([`Op`]), at which shape and how often ([`Kernel`]).

use serde::{Deserialize, Serialize};

/// What a kernel computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Component {
    /// Q, K, V, O projections.
    Projections,
    /// `QKᵀ` and `PV`.
    AttentionCore,
    /// Router.
    Router,
    /// Routed experts.
    Experts,
    /// Shared experts.
    Shared,
    /// Dense FFNs of the layers without MoE.
    Dense,
    /// A sparse attention indexer's projections and scores.
    Indexer,
}

impl Component {
    /// All components, in report order.
    pub const ALL: [Component; 7] = [
        Component::Projections,
        Component::AttentionCore,
        Component::Router,
        Component::Experts,
        Component::Shared,
        Component::Dense,
        Component::Indexer,
    ];

    /// Display name.
    pub fn as_str(self) -> &'static str {
        match self {
            Component::Projections => "projections",
            Component::AttentionCore => "attention core",
            Component::Router => "router",
            Component::Experts => "experts",
            Component::Shared => "shared experts",
            Component::Dense => "dense FFN",
            Component::Indexer => "indexer",
        }
    }
}

/// Which pass a kernel belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pass {
    /// Forward.
    Forward,
    /// Gradient with respect to the left operand.
    BackwardData,
    /// Gradient with respect to the right operand.
    BackwardWeight,
    /// A fused attention kernel's backward pass recomputing its forward's scores.
    Recompute,
}

/// What a kernel runs.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    /// A GEMM: `m x n` outputs, each a dot product of length `k`.
    #[default]
    Gemm,
    /// The softmax of a fused attention kernel over its `m x n` tiles of scores: forward,
    /// each row's maximum, exponentials and sum (the online softmax); backward
    /// ([`Pass::BackwardData`]), the probabilities recomputed from the saved log-sum-exp
    /// and the scores' gradient `P ∘ (dP − D)`. `k` is 0; no FLOPs are counted for it (as
    /// for every norm and activation, the cost model counts GEMMs only).
    Softmax,
}

/// One GEMM shape, issued `count` times (each a batch of `batch` identical GEMMs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Kernel {
    /// Component.
    pub component: Component,
    /// Pass.
    pub pass: Pass,
    /// What it runs.
    pub op: Op,
    /// Output rows.
    pub m: u64,
    /// Output columns.
    pub n: u64,
    /// Reduction length.
    pub k: u64,
    /// GEMMs per launch (strided-batched over heads).
    pub batch: u64,
    /// Launches.
    pub count: u64,
}

impl Kernel {
    /// A GEMM.
    pub fn gemm(component: Component, pass: Pass, [m, n, k]: [u64; 3], batch: u64) -> Self {
        Kernel {
            component,
            pass,
            op: Op::Gemm,
            m,
            n,
            k,
            batch,
            count: 1,
        }
    }

    /// Elements of its operands per launch: `(A, B, C)`, `batch·(m·k, k·n, m·n)` for a GEMM,
    /// `batch·m·n` each for a softmax (scores in, their gradient in, the result out).
    pub fn operands(&self) -> (u128, u128, u128) {
        let b = u128::from(self.batch);
        let (m, n, k) = (u128::from(self.m), u128::from(self.n), u128::from(self.k));
        // Saturating: a shape read from a file (a bench report) can be absurd; the
        // plan's own are far inside 128 bits.
        let mul = |x: u128, y: u128, z: u128| x.saturating_mul(y).saturating_mul(z);
        match self.op {
            Op::Gemm => (mul(b, m, k), mul(b, k, n), mul(b, m, n)),
            Op::Softmax => (mul(b, m, n), mul(b, m, n), mul(b, m, n)),
        }
    }

    /// FLOPs executed by all its launches: `2·m·n·k·batch·count` for a GEMM, 0 for a
    /// softmax.
    pub fn flops(&self) -> u128 {
        if self.op == Op::Softmax {
            return 0;
        }
        [self.m, self.n, self.k, self.batch, self.count]
            .into_iter()
            .fold(2u128, |f, x| f.saturating_mul(u128::from(x)))
    }
}
