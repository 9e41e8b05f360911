//! The kernel plan of a model's layer stack: every GEMM one training step of its layers
//! issues, with its shape and how many times the stack issues it, so that its arithmetic
//! can be checked against the cost model and timed.
//!
//! For `T` tokens packed from documents, a layer of hidden size `H`, `heads` query heads
//! and `kv_heads` key/value heads of width `d`, `E` experts of width `f` (`k` active) and
//! shared experts of width `f_s`, the forward pass issues (`m x n x k` = output rows x
//! output columns x reduction, `batch` identical GEMMs):
//!
//! * projections: `T x heads·d x H` (Q), `T x kv_heads·d x H` (K and V), `T x H x heads·d` (O);
//! * attention core, per document of length `L` and per query head (`batch = heads`):
//!   dense: `L x L x d` (`QKᵀ`) and `L x d x L` (`PV`). Causal attention is executed
//!   exactly, not as a full square with half of it masked: the triangle of query-key pairs
//!   is split recursively into a square block (the second half of the queries against the
//!   first half of the keys, one GEMM) and two half-size triangles, down to triangles of
//!   [`TRIANGLE_ROWS`] rows, which run one GEMM per query row (`1 x i x d`). The pairs
//!   covered are exactly `L(L+1)/2`, so the plan's FLOPs equal the analytic count;
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
//! `d_nope + d_rope` and `PV` width `d_v`. A windowed layer (`[model.window]`) runs only the
//! pairs its window keeps: a chunked layer one causal triangle per chunk; a sliding one, per
//! block of `W` queries, the triangle of its own keys and the triangle of the previous
//! block's last `W - 1` keys (a last partial block of `r` queries: its triangle, an
//! `r x (W - r)` block and a triangle of `r - 1`), exactly `min(t, W)` keys for query `t`.
//!
//! A sparse attention indexer (`[model.indexer]`, `heads` of width `head_dim`, `topk`) adds
//! `T x heads·head_dim x r_q`, `T x head_dim x H` and `T x heads x H`, and per document the
//! scores of every pair attention would cover (`QKᵀ` of width `head_dim` per indexer head,
//! then a reduction over the heads); the core then runs on `min(t, topk)` keys for query
//! `t`, planned as a sliding window of `topk` (the same pairs; the gather of the selected
//! keys is not planned).
//!
//! The stack has up to four kinds of layer (MoE or dense, full or windowed): each kind is
//! planned once and its launch counts multiplied by its executions per forward pass (a
//! looped layer counts once per visit), so that each distinct kernel shape is timed once
//! and weighted by how often the stack runs it. The MTP modules, the embedding and the LM
//! head are outside the layer stack and not planned.
//!
//! Backward: every forward GEMM `C = A·B` (`m x n x k`) has a data-gradient GEMM
//! `dA = dC·Bᵀ` (`m x k x n`) and a weight-gradient GEMM `dB = Aᵀ·dC` (`k x n x m`) (for the
//! attention core both operands are activations; the second is still listed as
//! `backward_weight`). So the training step is exactly 3 x the forward, as the cost model
//! assumes. Norms, softmax, activations and routing are not GEMMs and are not in the plan.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::model::{Attention, Model, WindowKind};

/// Causal triangles of at most this many rows run one GEMM per query row.
pub const TRIANGLE_ROWS: u64 = 32;

/// What a kernel computes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Pass {
    /// Forward.
    Forward,
    /// Gradient with respect to the left operand.
    BackwardData,
    /// Gradient with respect to the right operand.
    BackwardWeight,
}

/// One GEMM shape, issued `count` times (each a batch of `batch` identical GEMMs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Kernel {
    /// Component.
    pub component: Component,
    /// Pass.
    pub pass: Pass,
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
    /// `2·m·n·k·batch·count`.
    pub fn flops(&self) -> u128 {
        2 * u128::from(self.m)
            * u128::from(self.n)
            * u128::from(self.k)
            * u128::from(self.batch)
            * u128::from(self.count)
    }
}

/// How tokens are assigned to routed experts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Routing {
    /// `T·k` assignments spread as evenly as possible.
    Balanced,
    /// Zipf-like: expert `e` (0-based) gets a share proportional to `1 / (e + 1)^s`, no
    /// expert more than `T` tokens.
    Skewed(f64),
}

impl std::str::FromStr for Routing {
    type Err = Error;

    /// `balanced`, or `skew=S` with `S` a non-negative number.
    fn from_str(s: &str) -> Result<Self> {
        let bad = |why: String| Error::invalid("routing", why);
        if s == "balanced" {
            return Ok(Routing::Balanced);
        }
        let Some(v) = s.strip_prefix("skew=") else {
            return Err(bad(format!("expected 'balanced' or 'skew=S' (got '{s}')")));
        };
        match v.parse::<f64>() {
            Ok(x) if x.is_finite() && x >= 0.0 => Ok(Routing::Skewed(x)),
            _ => Err(bad(format!(
                "the skew must be a non-negative number (got '{v}')"
            ))),
        }
    }
}

/// Tokens per expert: `Σ = tokens·top_k`, each at most `tokens`.
pub fn assign(tokens: u64, experts: u64, top_k: u64, routing: Routing) -> Result<Vec<u64>> {
    let total = tokens * top_k;
    let e = experts as usize;
    match routing {
        Routing::Balanced => {
            let (base, extra) = (total / experts, total % experts);
            Ok((0..experts).map(|i| base + u64::from(i < extra)).collect())
        }
        Routing::Skewed(s) => {
            if !(s.is_finite() && s >= 0.0) {
                return Err(Error::invalid(
                    "routing",
                    format!("skew must be a non-negative number (got {s})"),
                ));
            }
            let w: Vec<f64> = (0..e).map(|i| 1.0 / ((i + 1) as f64).powf(s)).collect();
            let sum: f64 = w.iter().sum();
            let mut counts = vec![0u64; e];
            let mut left = total;
            // Fill greedily by weight with the cap, then hand out the rest in weight order.
            for (c, wi) in counts.iter_mut().zip(&w) {
                let want = ((total as f64) * wi / sum).floor() as u64;
                *c = want.min(tokens).min(left);
                left -= *c;
            }
            while left > 0 {
                let before = left;
                for c in counts.iter_mut() {
                    if left == 0 {
                        break;
                    }
                    if *c < tokens {
                        *c += 1;
                        left -= 1;
                    }
                }
                if left == before {
                    return Err(Error::invalid("routing", "cannot place every assignment"));
                }
            }
            Ok(counts)
        }
    }
}

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
}

impl Plan {
    /// Total FLOPs of the plan.
    pub fn flops(&self) -> u128 {
        self.kernels.iter().map(Kernel::flops).sum()
    }

    /// FLOPs of one component.
    pub fn component_flops(&self, c: Component) -> u128 {
        self.kernels
            .iter()
            .filter(|k| k.component == c)
            .map(Kernel::flops)
            .sum()
    }
}

/// What a block of query-key pairs computes.
#[derive(Debug, Clone, Copy)]
enum Core {
    /// Attention, per query head: `QKᵀ` of width `dk`, then `PV` of width `dv`.
    Attention { dk: u64, dv: u64, heads: u64 },
    /// An indexer's scores: per indexer head a `head_dim` dot product (`QKᵀ`), then the
    /// heads' weighted sum (a reduction over `heads` per pair).
    Index { head_dim: u64, heads: u64 },
}

struct Builder {
    kernels: std::collections::BTreeMap<(Component, Pass, u64, u64, u64, u64), u64>,
    /// What the pairs of the documents planned next compute.
    core: Core,
}

impl Builder {
    /// A forward GEMM and its two backward GEMMs.
    fn gemm(&mut self, c: Component, m: u64, n: u64, k: u64, batch: u64, count: u64) {
        if m == 0 || n == 0 || k == 0 || count == 0 {
            return;
        }
        for (pass, (mm, nn, kk)) in [
            (Pass::Forward, (m, n, k)),
            (Pass::BackwardData, (m, k, n)),
            (Pass::BackwardWeight, (k, n, m)),
        ] {
            *self
                .kernels
                .entry((c, pass, mm, nn, kk, batch))
                .or_insert(0) += count;
        }
    }

    /// Exact causal attention over a triangle of `rows` queries (see module docs).
    fn triangle(&mut self, rows: u64) {
        if rows == 0 {
            return;
        }
        if rows <= TRIANGLE_ROWS {
            for i in 1..=rows {
                self.block(1, i);
            }
            return;
        }
        let first = rows / 2;
        let second = rows - first;
        self.triangle(first);
        self.block(second, first);
        self.triangle(second);
    }

    /// A full block of `rows` queries against `keys` keys.
    fn block(&mut self, rows: u64, keys: u64) {
        match self.core {
            Core::Attention { dk, dv, heads } => {
                self.gemm(Component::AttentionCore, rows, keys, dk, heads, 1); // QKᵀ
                self.gemm(Component::AttentionCore, rows, dv, keys, heads, 1); // PV
            }
            Core::Index { head_dim, heads } => {
                self.gemm(Component::Indexer, rows, keys, head_dim, heads, 1);
                self.gemm(Component::Indexer, rows, keys, heads, 1, 1);
            }
        }
    }

    /// The query-key pairs of one document of `len` tokens (module docs).
    fn document(&mut self, len: u64, attention: Attention, window: Option<(WindowKind, u64)>) {
        match (attention, window) {
            (Attention::Dense, _) => self.block(len, len),
            (Attention::Causal, None) => self.triangle(len),
            (Attention::Causal, Some((WindowKind::Chunked, c))) => {
                for _ in 0..len / c {
                    self.triangle(c);
                }
                self.triangle(len % c);
            }
            (Attention::Causal, Some((WindowKind::Sliding, w))) => {
                self.triangle(len.min(w));
                let rest = len.saturating_sub(w);
                for _ in 0..rest / w {
                    self.triangle(w);
                    self.triangle(w - 1);
                }
                let r = rest % w;
                if r > 0 {
                    self.triangle(r);
                    self.block(r, w - r);
                    self.triangle(r - 1);
                }
            }
        }
    }
}

impl Builder {
    /// The attention part of a layer.
    fn attention(
        &mut self,
        model: &Model,
        documents: &[u64],
        attention: Attention,
        window: Option<(WindowKind, u64)>,
        t: u64,
    ) {
        let h = model.hidden;
        let p = Component::Projections;
        let (dk, dv) = match &model.mla {
            None => {
                let d = model.head_dim;
                let (q, kv) = (model.heads * d, model.kv_heads * d);
                self.gemm(p, t, q, h, 1, 1);
                self.gemm(p, t, kv, h, 1, 2);
                self.gemm(p, t, h, q, 1, 1);
                (d, d)
            }
            Some(a) => {
                let qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
                let heads = model.heads;
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
        let window = match (&model.indexer, &model.mla) {
            (Some(ix), Some(a)) => {
                let c = Component::Indexer;
                self.gemm(c, t, ix.heads * ix.head_dim, a.q_lora_rank, 1, 1);
                self.gemm(c, t, ix.head_dim, h, 1, 1);
                self.gemm(c, t, ix.heads, h, 1, 1);
                self.core = Core::Index {
                    head_dim: ix.head_dim,
                    heads: ix.heads,
                };
                for &len in documents {
                    self.document(len, attention, None);
                }
                Some((WindowKind::Sliding, ix.topk))
            }
            _ => window,
        };
        self.core = Core::Attention {
            dk,
            dv,
            heads: model.heads,
        };
        for &len in documents {
            self.document(len, attention, window);
        }
    }

    /// The MoE part of a layer.
    fn moe(&mut self, model: &Model, t: u64, routing: Routing) -> Result<()> {
        let (h, moe) = (model.hidden, &model.moe);
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

    /// The kernels, each launch count multiplied by `times`.
    fn times(self, times: u64) -> Vec<Kernel> {
        self.kernels
            .into_iter()
            .map(|((component, pass, m, n, k, batch), count)| Kernel {
                component,
                pass,
                m,
                n,
                k,
                batch,
                count: count * times,
            })
            .collect()
    }
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
    if documents.is_empty() || documents.contains(&0) {
        return Err(Error::invalid(
            "documents",
            "need at least one document, each of at least one token",
        ));
    }
    let t: u64 = documents.iter().sum();
    let executions = model.checked_executions()?;
    // Executions of each kind of layer: (dense FFN, windowed attention).
    // Counted per physical layer (times its visits), not per execution: a long loop over
    // many layers costs no more than the layer count.
    let set = |layers: Option<&Vec<u64>>| -> std::collections::BTreeSet<u64> {
        layers.into_iter().flatten().copied().collect()
    };
    let dense_layers = set(model.dense.as_ref().map(|d| &d.layers));
    let windowed_layers = set(model.window.as_ref().map(|w| &w.layers));
    let mut kinds = std::collections::BTreeMap::new();
    for one_based in 1..=model.layers {
        let kind = (
            dense_layers.contains(&one_based),
            windowed_layers.contains(&one_based),
        );
        let n = kinds.entry(kind).or_insert(0u64);
        *n = n.saturating_add(model.visits(one_based));
    }
    let window = model.window.as_ref().map(|w| (w.kind, w.size));
    let mut all = std::collections::BTreeMap::new();
    for ((dense, windowed), times) in kinds {
        let mut b = Builder {
            kernels: Default::default(),
            core: Core::Attention {
                dk: 0,
                dv: 0,
                heads: 0,
            },
        };
        b.attention(model, documents, attention, window.filter(|_| windowed), t);
        match model.dense.as_ref().filter(|_| dense) {
            Some(d) => {
                b.gemm(Component::Dense, t, d.ffn, model.hidden, 1, 2);
                b.gemm(Component::Dense, t, model.hidden, d.ffn, 1, 1);
            }
            None => b.moe(model, t, routing)?,
        }
        for k in b.times(times) {
            *all.entry(Kernel { count: 0, ..k }).or_insert(0u64) += k.count;
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
