//! An executable reference: a tiny forward pass of exactly the architecture the cost model
//! describes (real matmuls, RMSNorm, q/k norms, attention biases, GQA, document-masked
//! causal or dense attention, top-k routing to SwiGLU experts, shared experts with or
//! without a sigmoid gate, dense-FFN layers, the loop executed as configured, an LM head),
//! which *counts* every multiply-add it performs, every parameter it allocates and every
//! KV-cache element it stores. Property tests check the analytic counts against it, exactly.
//!
//! The reference does not call the library's counting code: it only reads the spec's fields.

use proptest::prelude::*;
use smelt::{
    Attention, AttentionBias, Counting, Dense, Loop, Model, ModelSpec, Moe, QkNorm, Workload,
};

/// Multiply-adds by component.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Macs {
    projections: u64,
    attention_core: u64,
    router: u64,
    experts: u64,
    shared: u64,
    dense: u64,
    lm_head: u64,
}

impl Macs {
    fn total(&self) -> u64 {
        self.projections
            + self.attention_core
            + self.router
            + self.experts
            + self.shared
            + self.dense
            + self.lm_head
    }
}

/// A deterministic pseudo-random source (SplitMix64) for weights and inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }

    fn tensor(&mut self, len: usize) -> Vec<f64> {
        (0..len).map(|_| self.next()).collect()
    }
}

/// `x (n x k) · w (k x m)`, counting each multiply-add in `counter`.
fn matmul(x: &[f64], w: &[f64], n: usize, k: usize, m: usize, counter: &mut u64) -> Vec<f64> {
    assert_eq!(x.len(), n * k);
    assert_eq!(w.len(), k * m);
    let mut out = vec![0.0; n * m];
    for i in 0..n {
        for j in 0..m {
            let mut acc = 0.0;
            for p in 0..k {
                acc += x[i * k + p] * w[p * m + j];
                *counter += 1;
            }
            out[i * m + j] = acc;
        }
    }
    out
}

/// RMSNorm of each `width`-row of `x` with weight `g` (not counted: norms cost no FLOPs).
fn rmsnorm(x: &[f64], g: &[f64], width: usize) -> Vec<f64> {
    let mut out = x.to_vec();
    for row in out.chunks_mut(width) {
        let ms = row.iter().map(|v| v * v).sum::<f64>() / width as f64;
        let inv = 1.0 / (ms + 1e-6).sqrt();
        for (v, w) in row.iter_mut().zip(g) {
            *v *= inv * w;
        }
    }
    out
}

fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

struct Expert {
    gate: Vec<f64>,
    up: Vec<f64>,
    down: Vec<f64>,
}

impl Expert {
    fn new(rng: &mut Rng, h: usize, f: usize) -> Self {
        Self {
            gate: rng.tensor(h * f),
            up: rng.tensor(h * f),
            down: rng.tensor(f * h),
        }
    }

    fn params(&self) -> usize {
        self.gate.len() + self.up.len() + self.down.len()
    }

    /// SwiGLU of one token `x` (width `h`).
    fn forward(&self, x: &[f64], h: usize, f: usize, counter: &mut u64) -> Vec<f64> {
        let g = matmul(x, &self.gate, 1, h, f, counter);
        let u = matmul(x, &self.up, 1, h, f, counter);
        let a: Vec<f64> = g.iter().zip(&u).map(|(g, u)| silu(*g) * u).collect();
        matmul(&a, &self.down, 1, f, h, counter)
    }
}

struct Layer {
    attn_norm: Vec<f64>,
    wq: Vec<f64>,
    wk: Vec<f64>,
    wv: Vec<f64>,
    wo: Vec<f64>,
    /// Biases of Q, K, V, O (empty when the layer has none).
    bq: Vec<f64>,
    bk: Vec<f64>,
    bv: Vec<f64>,
    bo: Vec<f64>,
    q_norm: Vec<f64>,
    k_norm: Vec<f64>,
    ffn_norm: Vec<f64>,
    /// MoE layers: router, routed and shared experts, shared gate (all empty in a dense
    /// layer).
    router: Vec<f64>,
    experts: Vec<Expert>,
    shared: Vec<Expert>,
    shared_gate: Vec<f64>,
    /// Dense layers: the one SwiGLU FFN.
    dense: Option<Expert>,
}

impl Layer {
    /// Parameters every token touches in this layer, but for the FFN.
    fn attention_and_norms(&self) -> usize {
        self.attn_norm.len()
            + self.wq.len()
            + self.wk.len()
            + self.wv.len()
            + self.wo.len()
            + self.bq.len()
            + self.bk.len()
            + self.bv.len()
            + self.bo.len()
            + self.q_norm.len()
            + self.k_norm.len()
            + self.ffn_norm.len()
    }
}

/// Adds `bias` to every row of `x` (width `bias.len()`); nothing when there is no bias.
fn add_bias(x: &mut [f64], bias: &[f64]) {
    if bias.is_empty() {
        return;
    }
    for row in x.chunks_mut(bias.len()) {
        for (v, b) in row.iter_mut().zip(bias) {
            *v += b;
        }
    }
}

struct Reference {
    m: Model,
    attention: Attention,
    counting: Counting,
    layers: Vec<Layer>,
    final_norm: Vec<f64>,
    embedding: Vec<f64>,
    lm_head: Vec<f64>,
}

/// What one forward pass over a batch of documents counted.
struct Counted {
    macs: Macs,
    tokens: u64,
    kv_elements: u64,
    /// Parameters token 0 touched on the first visit of each physical layer.
    active_params: u64,
}

impl Reference {
    fn new(spec: &ModelSpec, rng: &mut Rng) -> Self {
        let m = spec.model.clone();
        let (h, d) = (m.hidden as usize, m.head_dim as usize);
        let (q, kv) = (m.heads as usize * d, m.kv_heads as usize * d);
        let (f, fs) = (m.moe.expert_ffn as usize, m.moe.shared_ffn as usize);
        let (q_norm, k_norm) = match m.qk_norm {
            QkNorm::None => (0, 0),
            QkNorm::PerHead => (d, d),
            QkNorm::Full => (q, kv),
        };
        let (qkv_bias, o_bias) = match m.attention_bias {
            AttentionBias::None => (false, false),
            AttentionBias::Qkv => (true, false),
            AttentionBias::All => (true, true),
        };
        let dense_layers: Vec<u64> = m.dense.as_ref().map_or(Vec::new(), |d| d.layers.clone());
        let layers = (0..m.layers)
            .map(|li| {
                let dense = dense_layers.contains(&(li + 1));
                let moe = !dense;
                let width = |on: bool, n: usize| if on { n } else { 0 };
                Layer {
                    attn_norm: rng.tensor(h),
                    wq: rng.tensor(h * q),
                    wk: rng.tensor(h * kv),
                    wv: rng.tensor(h * kv),
                    wo: rng.tensor(q * h),
                    bq: rng.tensor(width(qkv_bias, q)),
                    bk: rng.tensor(width(qkv_bias, kv)),
                    bv: rng.tensor(width(qkv_bias, kv)),
                    bo: rng.tensor(width(o_bias, h)),
                    q_norm: rng.tensor(q_norm),
                    k_norm: rng.tensor(k_norm),
                    ffn_norm: rng.tensor(h),
                    router: rng.tensor(width(moe, h * m.moe.experts as usize)),
                    experts: (0..width(moe, m.moe.experts as usize))
                        .map(|_| Expert::new(rng, h, f))
                        .collect(),
                    shared: (0..width(moe, m.moe.shared_experts as usize))
                        .map(|_| Expert::new(rng, h, fs))
                        .collect(),
                    shared_gate: rng.tensor(width(moe && m.moe.shared_gate, h)),
                    dense: dense.then(|| {
                        Expert::new(rng, h, m.dense.as_ref().map_or(0, |d| d.ffn) as usize)
                    }),
                }
            })
            .collect();
        let vocab = m.vocab as usize;
        let counting = spec.counting;
        let embedding = if counting.embeddings {
            rng.tensor(vocab * h)
        } else {
            Vec::new()
        };
        let lm_head = if counting.lm_head && !(m.tie_embeddings && counting.embeddings) {
            rng.tensor(h * vocab)
        } else {
            Vec::new()
        };
        Self {
            final_norm: rng.tensor(h),
            attention: spec.workload.attention,
            m,
            counting,
            layers,
            embedding,
            lm_head,
        }
    }

    /// Every allocated parameter.
    fn params(&self) -> u64 {
        let layer: usize = self
            .layers
            .iter()
            .map(|l| {
                l.attention_and_norms()
                    + l.router.len()
                    + l.experts.iter().map(Expert::params).sum::<usize>()
                    + l.shared.iter().map(Expert::params).sum::<usize>()
                    + l.shared_gate.len()
                    + l.dense.as_ref().map_or(0, Expert::params)
            })
            .sum();
        (layer + self.final_norm.len() + self.embedding.len() + self.lm_head.len()) as u64
    }

    /// The physical layer (0-based) of each execution, derived from the loop directly.
    fn schedule(&self) -> Vec<(usize, f64)> {
        let n = self.m.layers as usize;
        match &self.m.looping {
            None => (0..n).map(|l| (l, 1.0)).collect(),
            Some(lp) => {
                let (a, b) = (lp.first as usize - 1, (lp.first + lp.span) as usize - 1);
                let scale = lp.residual_scale();
                let mut s: Vec<(usize, f64)> = (0..a).map(|l| (l, 1.0)).collect();
                for _ in 0..lp.repeats {
                    s.extend((a..b).map(|l| (l, scale)));
                }
                s.extend((b..n).map(|l| (l, 1.0)));
                s
            }
        }
    }

    /// One forward pass over `docs` (document lengths, packed back to back).
    fn forward(&self, docs: &[usize], rng: &mut Rng) -> Counted {
        let m = &self.m;
        let (h, d) = (m.hidden as usize, m.head_dim as usize);
        let (heads, kvh) = (m.heads as usize, m.kv_heads as usize);
        let (q, kv) = (heads * d, kvh * d);
        let (e, k) = (m.moe.experts as usize, m.moe.top_k as usize);
        let (f, fs) = (m.moe.expert_ffn as usize, m.moe.shared_ffn as usize);
        let t: usize = docs.iter().sum();
        let causal = self.attention == Attention::Causal;
        let mut macs = Macs::default();
        let mut x = rng.tensor(t * h);
        let mut cache: Vec<Vec<f64>> = Vec::new();
        let mut active = 0usize;
        let mut visited = vec![false; m.layers as usize];

        for (li, scale) in self.schedule() {
            let layer = &self.layers[li];
            let first_visit = !visited[li];
            visited[li] = true;

            // Attention.
            let hn = rmsnorm(&x, &layer.attn_norm, h);
            let mut qm = matmul(&hn, &layer.wq, t, h, q, &mut macs.projections);
            let mut km = matmul(&hn, &layer.wk, t, h, kv, &mut macs.projections);
            let mut vm = matmul(&hn, &layer.wv, t, h, kv, &mut macs.projections);
            add_bias(&mut qm, &layer.bq);
            add_bias(&mut km, &layer.bk);
            add_bias(&mut vm, &layer.bv);
            match m.qk_norm {
                QkNorm::None => {}
                QkNorm::PerHead => {
                    qm = rmsnorm(&qm, &layer.q_norm, d);
                    km = rmsnorm(&km, &layer.k_norm, d);
                }
                QkNorm::Full => {
                    qm = rmsnorm(&qm, &layer.q_norm, q);
                    km = rmsnorm(&km, &layer.k_norm, kv);
                }
            }
            cache.push(km.clone());
            cache.push(vm.clone());
            let group = heads / kvh;
            let mut attn = vec![0.0; t * q];
            let mut start = 0;
            for &len in docs {
                for head in 0..heads {
                    let g = head / group;
                    for i in start..start + len {
                        let last = if causal { i } else { start + len - 1 };
                        let mut scores = Vec::new();
                        for j in start..=last {
                            let mut s = 0.0;
                            for p in 0..d {
                                s += qm[i * q + head * d + p] * km[j * kv + g * d + p];
                                macs.attention_core += 1;
                            }
                            scores.push(s / (d as f64).sqrt());
                        }
                        let max = scores.iter().cloned().fold(f64::MIN, f64::max);
                        let z: f64 = scores.iter().map(|s| (s - max).exp()).sum();
                        for (jj, j) in (start..=last).enumerate() {
                            let pj = (scores[jj] - max).exp() / z;
                            for p in 0..d {
                                attn[i * q + head * d + p] += pj * vm[j * kv + g * d + p];
                                macs.attention_core += 1;
                            }
                        }
                    }
                }
                start += len;
            }
            let mut o = matmul(&attn, &layer.wo, t, q, h, &mut macs.projections);
            add_bias(&mut o, &layer.bo);
            for (xv, ov) in x.iter_mut().zip(&o) {
                *xv += scale * ov;
            }

            let hn = rmsnorm(&x, &layer.ffn_norm, h);
            if let Some(dense) = &layer.dense {
                // Dense FFN.
                let fd = m.dense.as_ref().map_or(0, |d| d.ffn) as usize;
                for tok in 0..t {
                    let y = dense.forward(&hn[tok * h..(tok + 1) * h], h, fd, &mut macs.dense);
                    for (xv, yv) in x[tok * h..(tok + 1) * h].iter_mut().zip(&y) {
                        *xv += scale * yv;
                    }
                }
                if first_visit {
                    active += layer.attention_and_norms() + dense.params();
                }
                continue;
            }

            // MoE FFN.
            let logits = matmul(&hn, &layer.router, t, h, e, &mut macs.router);
            let mut ffn = vec![0.0; t * h];
            for tok in 0..t {
                let row = &logits[tok * e..(tok + 1) * e];
                let mut order: Vec<usize> = (0..e).collect();
                order.sort_by(|a, b| row[*b].total_cmp(&row[*a]).then(a.cmp(b)));
                let chosen = &order[..k];
                let max = row[chosen[0]];
                let z: f64 = chosen.iter().map(|&c| (row[c] - max).exp()).sum();
                let xt = &hn[tok * h..(tok + 1) * h];
                for &c in chosen {
                    let w = (row[c] - max).exp() / z;
                    let y = layer.experts[c].forward(xt, h, f, &mut macs.experts);
                    for (acc, yv) in ffn[tok * h..(tok + 1) * h].iter_mut().zip(&y) {
                        *acc += w * yv;
                    }
                }
                let gate = if layer.shared_gate.is_empty() {
                    1.0
                } else {
                    let g = matmul(xt, &layer.shared_gate, 1, h, 1, &mut macs.shared);
                    1.0 / (1.0 + (-g[0]).exp())
                };
                for s in &layer.shared {
                    let y = s.forward(xt, h, fs, &mut macs.shared);
                    for (acc, yv) in ffn[tok * h..(tok + 1) * h].iter_mut().zip(&y) {
                        *acc += gate * yv;
                    }
                }
                if tok == 0 && first_visit {
                    active += layer.attention_and_norms()
                        + layer.router.len()
                        + layer.shared_gate.len()
                        + chosen
                            .iter()
                            .map(|&c| layer.experts[c].params())
                            .sum::<usize>()
                        + layer.shared.iter().map(Expert::params).sum::<usize>();
                }
            }
            for (xv, fv) in x.iter_mut().zip(&ffn) {
                *xv += scale * fv;
            }
        }
        let xn = rmsnorm(&x, &self.final_norm, h);
        active += self.final_norm.len() + self.embedding.len();
        if self.counting.lm_head {
            let vocab = m.vocab as usize;
            let head = if self.lm_head.is_empty() {
                // Tied: the LM head is the (vocab x hidden) embedding used transposed.
                let mut w = vec![0.0; h * vocab];
                for r in 0..vocab {
                    for c in 0..h {
                        w[c * vocab + r] = self.embedding[r * h + c];
                    }
                }
                w
            } else {
                self.lm_head.clone()
            };
            let logits = matmul(&xn, &head, t, h, vocab, &mut macs.lm_head);
            assert!(logits.iter().all(|v| v.is_finite()));
            active += self.lm_head.len();
        }
        assert!(x.iter().all(|v| v.is_finite()));
        Counted {
            macs,
            tokens: t as u64,
            kv_elements: cache.iter().map(|c| c.len() as u64).sum(),
            active_params: active as u64,
        }
    }
}

/// The documents the reference runs for a workload: the histogram itself, or `repeat`
/// documents of the mean length.
fn documents(w: &Workload, repeat: usize) -> Vec<usize> {
    match (&w.mean_doc_len, &w.doc_lengths) {
        (Some(t), _) => vec![*t as usize; repeat],
        (None, Some(hist)) => hist
            .iter()
            .flat_map(|&[len, n]| std::iter::repeat_n(len as usize, n as usize))
            .collect(),
        (None, None) => unreachable!("validated workloads have one of the two"),
    }
}

fn arb_spec() -> impl Strategy<Value = (ModelSpec, usize)> {
    let shape = (
        1u64..=4, // layers
        1u64..=6, // hidden
        1u64..=2, // kv heads
        1u64..=3, // heads per kv head
        1u64..=3, // head_dim
        1u64..=5, // experts
        1u64..=3, // expert_ffn
        prop_oneof![Just((0u64, 0u64)), (1u64..=2, 1u64..=3)],
        prop_oneof![
            Just(QkNorm::None),
            Just(QkNorm::PerHead),
            Just(QkNorm::Full)
        ],
    );
    let extras = (
        any::<prop::sample::Index>(), // top_k
        proptest::option::of((
            any::<prop::sample::Index>(),
            any::<prop::sample::Index>(),
            1u64..=3,
        )),
        prop_oneof![Just(Attention::Causal), Just(Attention::Dense)],
        prop_oneof![
            (1u64..=6).prop_map(|t| (Some(t), None)),
            prop::collection::vec((1u64..=6, 1u64..=2).prop_map(|(l, n)| [l, n]), 1..=3)
                .prop_map(|h| (None, Some(h))),
        ],
        (any::<bool>(), any::<bool>(), any::<bool>(), 1u64..=5),
        1usize..=2,
    );
    let qwen = (
        prop_oneof![
            Just(AttentionBias::None),
            Just(AttentionBias::Qkv),
            Just(AttentionBias::All)
        ],
        any::<bool>(),                              // shared gate (when shared experts)
        proptest::option::of((0u64..16, 1u64..=3)), // dense layers (bit mask), dense ffn
    );
    (shape, extras, qwen).prop_map(
        |(
            (layers, hidden, kv_heads, group, head_dim, experts, ffn, shared, qk_norm),
            (top_k, looping, attention, (mean, hist), (emb, lm, tie, vocab), repeat),
            (attention_bias, gate, dense),
        )| {
            let dense = dense.and_then(|(mask, ffn)| {
                let layers: Vec<u64> = (1..=layers)
                    .filter(|l| mask & (1 << (l - 1)) != 0)
                    .collect();
                (!layers.is_empty()).then_some(Dense { layers, ffn })
            });
            let looping = looping.map(|(first, span, repeats)| {
                let first = first.index(layers as usize) as u64 + 1;
                let span = span.index((layers - first + 1) as usize) as u64 + 1;
                Loop {
                    first,
                    span,
                    repeats,
                    residual_scale: None,
                }
            });
            let spec = ModelSpec {
                name: None,
                model: Model {
                    layers,
                    hidden,
                    heads: kv_heads * group,
                    kv_heads,
                    head_dim,
                    vocab,
                    tie_embeddings: tie,
                    qk_norm,
                    attention_bias,
                    moe: Moe {
                        experts,
                        top_k: top_k.index(experts as usize) as u64 + 1,
                        expert_ffn: ffn,
                        shared_experts: shared.0,
                        shared_ffn: shared.1,
                        shared_gate: gate && shared.0 > 0,
                    },
                    dense,
                    looping,
                },
                workload: Workload {
                    context: 8,
                    mean_doc_len: mean,
                    doc_lengths: hist,
                    attention,
                    kv_dtype_bytes: 2,
                },
                counting: Counting {
                    embeddings: emb,
                    lm_head: lm,
                },
            };
            (spec, repeat)
        },
    )
}

/// `flops_per_token * tokens`, which must be a whole number of FLOPs.
fn total(f: smelt::Flops, tokens: u64) -> u64 {
    f.checked_mul(tokens)
        .unwrap()
        .as_integer()
        .expect("FLOPs over a whole batch are a whole number")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Analytic counts equal the reference's own counts, exactly, component by component.
    #[test]
    fn analytic_counts_equal_counted_execution((spec, repeat) in arb_spec()) {
        spec.validate().unwrap();
        let mut rng = Rng(7);
        let reference = Reference::new(&spec, &mut rng);
        let docs = documents(&spec.workload, repeat);
        let counted = reference.forward(&docs, &mut rng);
        let cost = smelt::cost(&spec).unwrap();
        let t = counted.tokens;

        prop_assert_eq!(cost.params.total.0, reference.params());
        prop_assert_eq!(cost.params.active.0, counted.active_params);

        let b = cost.flops_per_token.forward_breakdown;
        let m = counted.macs;
        prop_assert_eq!(total(b.projections, t), 2 * m.projections);
        prop_assert_eq!(total(b.attention_core, t), 2 * m.attention_core);
        prop_assert_eq!(total(b.router, t), 2 * m.router);
        prop_assert_eq!(total(b.experts, t), 2 * m.experts);
        prop_assert_eq!(total(b.shared, t), 2 * m.shared);
        prop_assert_eq!(total(b.dense, t), 2 * m.dense);
        prop_assert_eq!(total(b.lm_head, t), 2 * m.lm_head);
        prop_assert_eq!(total(cost.flops_per_token.forward, t), 2 * m.total());
        prop_assert_eq!(total(cost.flops_per_token.training, t), 3 * 2 * m.total());

        prop_assert_eq!(cost.kv_cache_per_token.elements.0 * t, counted.kv_elements);
        prop_assert_eq!(cost.kv_cache_per_token.bytes.0, 2 * cost.kv_cache_per_token.elements.0);
        prop_assert_eq!(cost.layer_executions, reference.schedule().len() as u64);
    }

    /// Looping adds FLOPs and KV cache but never parameters.
    #[test]
    fn looping_adds_flops_and_kv_not_params((spec, _) in arb_spec()) {
        let mut flat = spec.clone();
        flat.model.looping = None;
        let (a, b) = (smelt::budgets(&spec).unwrap(), smelt::budgets(&flat).unwrap());
        prop_assert_eq!(a.params, b.params);
        let extra = spec.model.looping.as_ref().map_or(0, |l| (l.repeats - 1) * l.span);
        if extra > 0 {
            prop_assert!(a.flops > b.flops);
            prop_assert!(a.kv > b.kv);
        } else {
            prop_assert_eq!(a, b);
        }
    }

    /// Dense attention never costs less than causal, and costs the same only for
    /// one-token documents.
    #[test]
    fn dense_is_at_least_causal((spec, _) in arb_spec()) {
        let mut causal = spec.clone();
        causal.workload.attention = Attention::Causal;
        let mut dense = spec.clone();
        dense.workload.attention = Attention::Dense;
        let (c, d) = (smelt::budgets(&causal).unwrap(), smelt::budgets(&dense).unwrap());
        prop_assert!(d.flops >= c.flops);
        let all_single = match (&spec.workload.mean_doc_len, &spec.workload.doc_lengths) {
            (Some(t), _) => *t == 1,
            (_, Some(h)) => h.iter().all(|&[l, _]| l == 1),
            _ => unreachable!(),
        };
        prop_assert_eq!(d.flops == c.flops, all_single);
        prop_assert_eq!(d.params, c.params);
        prop_assert_eq!(d.kv, c.kv);
    }

    /// The histogram's exact c̄ is never below the mean-length shortcut (convexity), and
    /// equals it when all documents have one length.
    #[test]
    fn histogram_is_at_least_the_shortcut((spec, _) in arb_spec()) {
        let cost = smelt::cost(&spec).unwrap();
        if let Some(s) = &cost.attention.mean_length_shortcut {
            prop_assert!(s.relative_to_exact <= 1e-12);
            let hist = spec.workload.doc_lengths.as_ref().unwrap();
            if hist.iter().all(|&[l, _]| l == hist[0][0]) {
                prop_assert!(s.relative_to_exact.abs() < 1e-12);
            }
        }
    }
}

/// A hand-checked case: one causal document of 3 tokens, one layer, width 1 everywhere.
#[test]
fn tiny_hand_checked_case() {
    let spec = ModelSpec::from_toml_str(
        r#"
        [model]
        layers = 1
        hidden = 1
        heads = 1
        kv_heads = 1
        head_dim = 1
        [model.moe]
        experts = 1
        top_k = 1
        expert_ffn = 1
        [workload]
        context = 3
        mean_doc_len = 3
        "#,
    )
    .unwrap();
    let mut rng = Rng(1);
    let r = Reference::new(&spec, &mut rng);
    let c = r.forward(&[3], &mut rng);
    // Per token: 4 projection MACs, 1 router MAC, 3 expert MACs; attention pairs 1+2+3 = 6,
    // each a QKᵀ and a PV multiply-add.
    assert_eq!(c.macs.projections, 12);
    assert_eq!(c.macs.attention_core, 12);
    assert_eq!(c.macs.router, 3);
    assert_eq!(c.macs.experts, 9);
    let cost = smelt::cost(&spec).unwrap();
    // 2 FLOPs x (4 + 1 + 3) + 4 x (3+1)/2 = 16 + 8 = 24 forward FLOPs per token.
    assert_eq!(cost.flops_per_token.forward.as_integer(), Some(24));
    assert_eq!(total(cost.flops_per_token.forward, 3), 2 * c.macs.total());
    // Params: 4 projections + 3 expert + 1 router + 2 norms + 1 final norm.
    assert_eq!(cost.params.total.0, 11);
    assert_eq!(r.params(), 11);
}
