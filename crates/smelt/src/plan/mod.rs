//! The kernel plan of a model's layer stack: every GEMM one training step of its layers
//! issues, with its shape and how many times the stack issues it, so that its arithmetic
//! can be checked against the cost model and timed. The benchmark ([`mod@crate::bench`])
//! times these kernels and the time model ([`crate::time`]) predicts them, so that a
//! measurement and a prediction line up kernel by kernel.
//!
//! For `T` tokens packed from documents, a layer of hidden size `H`, `heads` query heads
//! and `kv_heads` key/value heads of width `d`, `E` experts of width `f` (`k` active) and
//! shared experts of width `f_s`, the forward pass issues (`m x n x k` = output rows x
//! output columns x reduction, `batch` identical GEMMs):
//!
//! * projections: `T x heads·d x H` (Q), `T x kv_heads·d x H` (K and V), `T x H x heads·d` (O);
//! * attention core, per document of length `L` and per query head (`batch = heads`): a
//!   fused attention kernel's tiles, as FlashAttention runs causal attention. The queries
//!   and the keys are cut into blocks of [`TILE`] (128; the last block shorter) and every
//!   tile holding a pair the layer attends is computed whole: on and below the diagonal for
//!   causal attention, the diagonal's tiles included ([`tiles`]). Per `r x c` tile: forward
//!   `r x c x d` (`S = QKᵀ`), the online softmax of `S` ([`Op::Softmax`]) and `r x d_v x c`
//!   (`O += PV`); backward (FlashAttention 2) `S` recomputed ([`Pass::Recompute`]), the
//!   softmax's backward, `c x d_v x r` (`dV += Pᵀ·dO`), `r x c x d_v` (`dP = dO·Vᵀ`),
//!   `r x d x c` (`dQ += dS·K`) and `c x d x r` (`dK += dSᵀ·Q`). The model's FLOPs are the
//!   pairs attended, `L(L+1)/2` causal ([`pairs`]), 3 x the forward as everywhere; the
//!   kernels execute more: the masked half of the diagonal's tiles and the recomputed
//!   scores ([`Plan::pair_flops`] keeps both counts);
//! * router: `T x E x H`;
//! * routed experts: for expert `e` with `t_e` tokens assigned, `t_e x f x H` (gate),
//!   `t_e x f x H` (up), `t_e x H x f` (down); `Σ t_e = T·k` ([`Routing`]);
//! * shared experts: the same with all `T` tokens and width `f_s`, and, when gated, the gate
//!   `T x 1 x H`;
//! * in a dense layer (`[model.dense]`), the dense SwiGLU instead of the router and the
//!   experts: `T x f_d x H` (gate, up) and `T x H x f_d` (down).
//!
//! With multi-head latent attention (`[model.mla]`, ranks `r_q`, `r_kv`, per-head widths
//! `d_nope`, `d_rope`, `d_v`) the projections are `T x r_q x H` and `T x heads·(d_nope +
//! d_rope) x r_q` (or one `T x heads·(d_nope + d_rope) x H`), `T x (r_kv + d_rope) x H`,
//! `T x heads·(d_nope + d_v) x r_kv` and `T x H x heads·d_v`; the core's `QKᵀ` has width
//! `d_nope + d_rope` and `PV` width `d_v`. A windowed layer (`[model.window]`) computes the
//! tiles holding a pair its window keeps: a chunked layer's chunks are tiled as documents
//! of their own; a sliding window of `W` keeps, for the query block starting at `q`, the key
//! blocks from the one holding `q - W + 1` to the diagonal.
//!
//! A sparse attention indexer (`[model.indexer]`, `heads` of width `head_dim`, `topk`) adds
//! `T x heads·head_dim x r_q`, `T x head_dim x H` and `T x heads x H`, and per document the
//! scores of every pair attention would cover, in the same tiles (per tile `QKᵀ` of width
//! `head_dim` per indexer head, then a reduction over the heads, each with its two backward
//! GEMMs); the core then runs on `min(t, topk)` keys for query `t`, planned as a sliding
//! window of `topk` (the same pairs; the gather of the selected keys is not planned).
//!
//! The stack has up to four kinds of layer (MoE or dense, full or windowed): each kind is
//! planned once and its launch counts multiplied by its executions per forward pass (a
//! looped layer counts once per visit), so that each distinct kernel shape is timed once
//! and weighted by how often the stack runs it. The MTP modules, the embedding and the LM
//! head are outside the layer stack and not planned.
//!
//! Backward: every forward GEMM `C = A·B` (`m x n x k`) outside the attention core has a
//! data-gradient GEMM `dA = dC·Bᵀ` (`m x k x n`) and a weight-gradient GEMM `dB = Aᵀ·dC`
//! (`k x n x m`). So the model's training step is exactly 3 x the forward, as the cost
//! model assumes; the attention core's backward is the fused kernel's above. Norms,
//! activations and routing are not GEMMs and are not in the plan; the attention tiles'
//! softmax is ([`Op::Softmax`]), with no FLOPs counted for it.

mod kernel;
mod routing;

pub use kernel::{Component, Kernel, Op, Pass};
pub use routing::{Routing, assign};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::{
    Attention, AttentionLayer, AttentionShape, Consumer, Ffn, Model, Moe, Stack, TokenMixer,
    WindowKind,
};

/// The largest batch a plan is made for, in tokens.
pub const MAX_TOKENS: u64 = 1 << 20;

/// The kernels of one training step of the whole layer stack.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Plan {
    /// Tokens in the batch.
    pub tokens: u64,
    /// Document lengths, packed.
    pub documents: Vec<u64>,
    /// Layer executions per forward pass.
    pub executions: u64,
    /// Distinct kernels with their launch counts over the stack, sorted.
    pub kernels: Vec<Kernel>,
    /// The model's FLOPs of the query-key pairs attended (the attention core's and an
    /// indexer's scores), by component: what the cost model counts, exactly, where the
    /// tiles' kernels execute more (module docs).
    pub pair_flops: std::collections::BTreeMap<Component, PairFlops>,
}

impl Plan {
    /// The model's FLOPs of the plan: the GEMMs' FLOPs, with the pairs attended counted
    /// for the tiled components ([`Plan::pair_flops`]). Equal to the cost model's count.
    pub fn flops(&self) -> u128 {
        Component::ALL
            .iter()
            .map(|&c| self.component_flops(c))
            .sum()
    }

    /// The model's FLOPs of one component.
    pub fn component_flops(&self, c: Component) -> u128 {
        let executed = self.component_executed_flops(c);
        match self.pair_flops.get(&c) {
            Some(p) => executed - p.executed + p.model,
            None => executed,
        }
    }

    /// The FLOPs the plan's kernels execute: the model's, plus the masked pairs of the
    /// tiles the attention kernels compute whole and the scores a fused kernel's backward
    /// recomputes.
    pub fn executed_flops(&self) -> u128 {
        self.kernels.iter().map(Kernel::flops).sum()
    }

    /// The FLOPs one component's kernels execute.
    pub fn component_executed_flops(&self, c: Component) -> u128 {
        self.kernels
            .iter()
            .filter(|k| k.component == c)
            .map(Kernel::flops)
            .sum()
    }
}

/// The FLOPs of a component's query-key pairs: the model's (the pairs attended) and what
/// the tiles covering them execute.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PairFlops {
    /// The cost model's: the pairs attended, forward and backward (3 x the forward).
    pub model: u128,
    /// The tiles' kernels': whole tiles, the backward's recomputation included.
    pub executed: u128,
}

/// The query and key tile edge of a fused attention kernel (FlashAttention's 128).
pub const TILE: u64 = 128;

/// Whether query `q` attends key `k` (0-based positions in one document).
pub fn attends(q: u64, k: u64, attention: Attention, window: Option<(WindowKind, u64)>) -> bool {
    match (attention, window) {
        (Attention::Dense, _) => true,
        (Attention::Causal, None) => k <= q,
        (Attention::Causal, Some((WindowKind::Chunked, c))) => k <= q && k / c == q / c,
        (Attention::Causal, Some((WindowKind::Sliding, w))) => k <= q && q - k < w,
    }
}

/// The query-key pairs one document of `len` tokens attends, exactly.
pub fn pairs(len: u64, attention: Attention, window: Option<(WindowKind, u64)>) -> u128 {
    let n = u128::from(len);
    let triangle = |n: u128| n * (n + 1) / 2;
    match (attention, window) {
        (Attention::Dense, _) => n * n,
        (Attention::Causal, None) => triangle(n),
        (Attention::Causal, Some((WindowKind::Chunked, c))) => {
            let c = u128::from(c);
            (n / c) * triangle(c) + triangle(n % c)
        }
        (Attention::Causal, Some((WindowKind::Sliding, w))) => {
            let w = u128::from(w);
            match n <= w {
                true => triangle(n),
                false => triangle(w) + (n - w) * w,
            }
        }
    }
}

/// The tiles a fused attention kernel computes for one document of `len` tokens, as
/// `(query rows, keys) -> count`: the document cut into blocks of `tile` queries and of
/// `tile` keys (the last of each shorter), and every tile holding at least one pair the
/// document attends ([`attends`]) computed whole, the diagonal's included. A chunked
/// layer's chunks are tiled as documents of their own (a variable-length kernel's
/// sequences).
pub fn tiles(
    len: u64,
    attention: Attention,
    window: Option<(WindowKind, u64)>,
    tile: u64,
) -> std::collections::BTreeMap<(u64, u64), u64> {
    let mut out = std::collections::BTreeMap::new();
    if let (Attention::Causal, Some((WindowKind::Chunked, c))) = (attention, window) {
        for (chunk, times) in [(c, len / c), (len % c, 1)] {
            for (shape, n) in tiles(chunk, attention, None, tile) {
                *out.entry(shape).or_insert(0) += n * times;
            }
        }
        out.retain(|_, n| *n > 0);
        return out;
    }
    let blocks = len.div_ceil(tile);
    let size = |i: u64| tile.min(len - i * tile);
    for i in 0..blocks {
        let (first_q, last_q) = (i * tile, i * tile + size(i) - 1);
        // Key blocks `lo..=hi`: those holding a key some query of the block attends.
        let (lo, hi) = match (attention, window) {
            (Attention::Dense, _) => (0, blocks - 1),
            (Attention::Causal, Some((WindowKind::Sliding, w))) => {
                ((first_q + 1).saturating_sub(w) / tile, last_q / tile)
            }
            _ => (0, last_q / tile),
        };
        // Every key block is full but the last (counted, not walked: a document of
        // millions of tokens has tens of thousands of blocks).
        let last = blocks - 1;
        let full = (hi - lo + 1) - u64::from(hi == last);
        if full > 0 {
            *out.entry((size(i), tile)).or_insert(0) += full;
        }
        if hi == last {
            *out.entry((size(i), size(last))).or_insert(0) += 1;
        }
    }
    out
}

/// What the tiles of query-key pairs compute.
#[derive(Debug, Clone, Copy)]
enum Core {
    /// Attention, per query head: `QKᵀ` of width `dk`, then `PV` of width `dv`.
    Attention { dk: u64, dv: u64, heads: u64 },
    /// An indexer's scores: per indexer head a `head_dim` dot product (`QKᵀ`), then the
    /// heads' weighted sum (a reduction over `heads` per pair).
    Index { head_dim: u64, heads: u64 },
}

type Shape = (Component, Pass, Op, u64, u64, u64, u64);

struct Builder {
    kernels: std::collections::BTreeMap<Shape, u64>,
    /// The FLOPs of the pairs planned so far, by component.
    pairs: std::collections::BTreeMap<Component, PairFlops>,
    /// What the pairs of the documents planned next compute.
    core: Core,
}

impl Builder {
    /// `count` launches of one kernel.
    fn launch(&mut self, k: Kernel, count: u64) {
        if k.m == 0 || k.n == 0 || (k.op == Op::Gemm && k.k == 0) || count == 0 {
            return;
        }
        let key = (k.component, k.pass, k.op, k.m, k.n, k.k, k.batch);
        *self.kernels.entry(key).or_insert(0) += count;
    }

    /// A forward GEMM and its two backward GEMMs.
    fn gemm(&mut self, c: Component, m: u64, n: u64, k: u64, batch: u64, count: u64) {
        for (pass, shape) in [
            (Pass::Forward, [m, n, k]),
            (Pass::BackwardData, [m, k, n]),
            (Pass::BackwardWeight, [k, n, m]),
        ] {
            self.launch(Kernel::gemm(c, pass, shape, batch), count);
        }
    }

    /// `count` tiles of `r` queries and `c` keys of a fused attention kernel, per query
    /// head: forward `S = Q·Kᵀ`, the online softmax, `O += P·V`; backward (FlashAttention
    /// 2) `S` recomputed, the softmax's backward, `dV += Pᵀ·dO`, `dP = dO·Vᵀ`,
    /// `dQ += dS·K`, `dK += dSᵀ·Q`.
    fn fused(&mut self, [r, c]: [u64; 2], [dk, dv]: [u64; 2], heads: u64, count: u64) {
        let a = Component::AttentionCore;
        let softmax = |pass| Kernel {
            op: Op::Softmax,
            ..Kernel::gemm(a, pass, [r, c, 0], heads)
        };
        for k in [
            Kernel::gemm(a, Pass::Forward, [r, c, dk], heads),
            softmax(Pass::Forward),
            Kernel::gemm(a, Pass::Forward, [r, dv, c], heads),
            Kernel::gemm(a, Pass::Recompute, [r, c, dk], heads),
            softmax(Pass::BackwardData),
            Kernel::gemm(a, Pass::BackwardWeight, [c, dv, r], heads),
            Kernel::gemm(a, Pass::BackwardData, [r, c, dv], heads),
            Kernel::gemm(a, Pass::BackwardData, [r, dk, c], heads),
            Kernel::gemm(a, Pass::BackwardWeight, [c, dk, r], heads),
        ] {
            self.launch(k, count);
        }
    }

    /// The pairs of `count` documents of `len` tokens (module docs): the model's FLOPs of
    /// the pairs attended, and the kernels of the tiles that cover them.
    fn document(
        &mut self,
        (len, count): (u64, u64),
        attention: Attention,
        window: Option<(WindowKind, u64)>,
    ) {
        let p = pairs(len, attention, window) * u128::from(count);
        let (component, per_pair) = match self.core {
            Core::Attention { dk, dv, heads } => {
                (Component::AttentionCore, 2 * u128::from((dk + dv) * heads))
            }
            Core::Index { head_dim, heads } => {
                (Component::Indexer, 2 * u128::from((head_dim + 1) * heads))
            }
        };
        let before: u128 = self.kernels_flops(component);
        for ((r, c), n) in tiles(len, attention, window, TILE) {
            match self.core {
                Core::Attention { dk, dv, heads } => self.fused([r, c], [dk, dv], heads, n * count),
                Core::Index { head_dim, heads } => {
                    self.gemm(Component::Indexer, r, c, head_dim, heads, n * count);
                    self.gemm(Component::Indexer, r, c, heads, 1, n * count);
                }
            }
        }
        let executed = self.kernels_flops(component) - before;
        let e = self.pairs.entry(component).or_default();
        e.model += 3 * per_pair * p;
        e.executed += executed;
    }

    fn kernels_flops(&self, c: Component) -> u128 {
        self.kernels
            .iter()
            .filter(|(key, _)| key.0 == c)
            .map(|(&(component, pass, op, m, n, k, batch), &count)| {
                Kernel {
                    component,
                    pass,
                    op,
                    m,
                    n,
                    k,
                    batch,
                    count,
                }
                .flops()
            })
            .sum()
    }
}

impl Builder {
    /// The attention part of a layer, `a` on a residual stream of width `h`.
    fn attention(
        &mut self,
        h: u64,
        a: &AttentionLayer,
        documents: &[u64],
        attention: Attention,
        t: u64,
    ) {
        let p = Component::Projections;
        let heads = a.shape.heads();
        let window = a.window.map(|w| (w.kind, w.size));
        let (dk, dv) = match &a.shape {
            AttentionShape::Gqa {
                kv_heads, head_dim, ..
            } => {
                let d = *head_dim;
                let (q, kv) = (heads * d, kv_heads * d);
                self.gemm(p, t, q, h, 1, 1);
                self.gemm(p, t, kv, h, 1, 2);
                self.gemm(p, t, h, q, 1, 1);
                (d, d)
            }
            AttentionShape::Mla { mla: a, .. } => {
                let qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
                if a.q_lora_rank > 0 {
                    self.gemm(p, t, a.q_lora_rank, h, 1, 1);
                    self.gemm(p, t, heads * qk, a.q_lora_rank, 1, 1);
                } else {
                    self.gemm(p, t, heads * qk, h, 1, 1);
                }
                self.gemm(p, t, a.kv_lora_rank + a.qk_rope_head_dim, h, 1, 1);
                let up = heads * (a.qk_nope_head_dim + a.v_head_dim);
                self.gemm(p, t, up, a.kv_lora_rank, 1, 1);
                self.gemm(p, t, h, heads * a.v_head_dim, 1, 1);
                (qk, a.v_head_dim)
            }
        };
        // An indexer: its projections (from the query latent), then per document the
        // scores of every key a query may attend; the core then runs on the `topk` it
        // keeps, planned as a sliding window of `topk` (the same pairs per query; which
        // keys differs, and the gather of them is not planned).
        let window = match (&a.indexer, &a.shape) {
            (Some(ix), AttentionShape::Mla { mla: a, .. }) => {
                let c = Component::Indexer;
                self.gemm(c, t, ix.heads * ix.head_dim, a.q_lora_rank, 1, 1);
                self.gemm(c, t, ix.head_dim, h, 1, 1);
                self.gemm(c, t, ix.heads, h, 1, 1);
                self.core = Core::Index {
                    head_dim: ix.head_dim,
                    heads: ix.heads,
                };
                for doc in lengths(documents) {
                    self.document(doc, attention, None);
                }
                Some((WindowKind::Sliding, ix.topk))
            }
            _ => window,
        };
        self.core = Core::Attention { dk, dv, heads };
        for doc in lengths(documents) {
            self.document(doc, attention, window);
        }
    }

    /// The MoE part of a layer, `moe` on a residual stream of width `h`.
    fn moe(&mut self, h: u64, moe: &Moe, t: u64, routing: Routing) -> Result<()> {
        self.gemm(Component::Router, t, moe.experts, h, 1, 1);
        let mut by_size = std::collections::BTreeMap::new();
        for te in assign(t, moe.experts, moe.top_k, routing)? {
            *by_size.entry(te).or_insert(0u64) += 1;
        }
        for (te, experts) in by_size {
            self.gemm(Component::Experts, te, moe.expert_ffn, h, 1, 2 * experts);
            self.gemm(Component::Experts, te, h, moe.expert_ffn, 1, experts);
        }
        if moe.shared_experts > 0 {
            let (s, fs) = (moe.shared_experts, moe.shared_ffn);
            self.gemm(Component::Shared, t, fs, h, 1, 2 * s);
            self.gemm(Component::Shared, t, h, fs, 1, s);
            if moe.shared_gate {
                self.gemm(Component::Shared, t, 1, h, 1, 1);
            }
        }
        Ok(())
    }

    /// The kernels, each launch count multiplied by `times`, and the pairs' FLOPs so
    /// multiplied.
    fn times(self, times: u64) -> (Vec<Kernel>, Vec<(Component, PairFlops)>) {
        let kernels = self
            .kernels
            .into_iter()
            .map(|((component, pass, op, m, n, k, batch), count)| Kernel {
                component,
                pass,
                op,
                m,
                n,
                k,
                batch,
                count: count * times,
            })
            .collect();
        let pairs = self
            .pairs
            .into_iter()
            .map(|(c, f)| {
                let t = u128::from(times);
                (
                    c,
                    PairFlops {
                        model: f.model * t,
                        executed: f.executed * t,
                    },
                )
            })
            .collect();
        (kernels, pairs)
    }
}

/// Document lengths with their counts.
fn lengths(documents: &[u64]) -> std::collections::BTreeMap<u64, u64> {
    let mut out = std::collections::BTreeMap::new();
    for &len in documents {
        *out.entry(len).or_insert(0) += 1;
    }
    out
}

/// The plan of the layer stack of `model` on `documents`, with `routing`: each kind of
/// layer planned once, its launches counted once per execution.
pub fn plan(
    model: &Model,
    documents: &[u64],
    attention: Attention,
    routing: Routing,
) -> Result<Plan> {
    model.validate()?;
    let stack = Stack::of(model)?;
    Consumer::KernelPlan.check(&stack)?;
    if documents.is_empty() || documents.contains(&0) {
        return Err(Error::invalid(
            "documents",
            "need at least one document, each of at least one token",
        ));
    }
    let t: u64 = documents.iter().sum();
    let executions = stack.executions();
    // Each kind of layer planned once, its launches times its executions.
    let mut all = std::collections::BTreeMap::new();
    let mut pair_flops = std::collections::BTreeMap::new();
    for kind in stack.kinds() {
        let times = kind.executions;
        let mut b = Builder {
            kernels: Default::default(),
            pairs: Default::default(),
            core: Core::Attention {
                dk: 0,
                dv: 0,
                heads: 0,
            },
        };
        let h = stack.hidden();
        if let Some(TokenMixer::Attention(a)) = &kind.layer.mixer {
            b.attention(h, a, documents, attention, t);
        }
        match &kind.layer.ffn {
            Some(Ffn::Dense { width, .. }) => {
                b.gemm(Component::Dense, t, *width, h, 1, 2);
                b.gemm(Component::Dense, t, h, *width, 1, 1);
            }
            Some(Ffn::Moe(moe)) => b.moe(h, moe, t, routing)?,
            None => {}
        }
        let (kernels, pairs) = b.times(times);
        for k in kernels {
            *all.entry(Kernel { count: 0, ..k }).or_insert(0u64) += k.count;
        }
        for (c, f) in pairs {
            let e: &mut PairFlops = pair_flops.entry(c).or_default();
            e.model += f.model;
            e.executed += f.executed;
        }
    }
    Ok(Plan {
        tokens: t,
        documents: documents.to_vec(),
        executions,
        kernels: all
            .into_iter()
            .map(|(k, count)| Kernel { count, ..k })
            .collect(),
        pair_flops,
    })
}

/// The documents a workload describes, for a batch of about `tokens` tokens: whole
/// documents of the mean length (at least one), or the histogram scaled to about `tokens`
/// (at least one document per entry, rounding counts to the nearest whole number).
pub fn documents(workload: &crate::model::Workload, tokens: u64) -> Result<Vec<u64>> {
    if tokens == 0 {
        return Err(Error::invalid("tokens", "must be at least 1"));
    }
    if let Some(t) = workload.mean_doc_len {
        let n = (tokens / t).max(1);
        return Ok(vec![t; n as usize]);
    }
    let hist = workload.doc_lengths.as_deref().unwrap_or_default();
    let total: f64 = hist.iter().map(|&[l, c]| (l * c) as f64).sum();
    let scale = tokens as f64 / total;
    let mut docs = Vec::new();
    for &[len, count] in hist {
        let n = ((count as f64 * scale).round() as u64).max(1);
        docs.extend(std::iter::repeat_n(len, n as usize));
    }
    Ok(docs)
}
