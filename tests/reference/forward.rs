//! The reference forward pass itself: real matmuls that count their multiply-adds, the
//! parameters they allocate and the KV elements they store. It does not call the library's
//! counting code: it only reads the spec's fields.

use smelt::{Attention, AttentionBias, Counting, Model, ModelSpec, QkNorm};

/// Multiply-adds by component.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Macs {
    pub projections: u64,
    pub attention_core: u64,
    pub router: u64,
    pub experts: u64,
    pub shared: u64,
    pub dense: u64,
    pub lm_head: u64,
}

impl Macs {
    pub fn total(&self) -> u64 {
        self.projections
            + self.attention_core
            + self.router
            + self.experts
            + self.shared
            + self.dense
            + self.lm_head
    }
}

/// A deterministic pseudo-random source (SplitMix64) for weights and inputs in [-1, 1).
pub struct Rng(smelt::rng::SplitMix64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(smelt::rng::SplitMix64::new(seed))
    }

    pub fn next(&mut self) -> f64 {
        self.0.unit() * 2.0 - 1.0
    }

    pub fn tensor(&mut self, len: usize) -> Vec<f64> {
        (0..len).map(|_| self.next()).collect()
    }
}

/// `x (n x k) · w (k x m)`, counting each multiply-add in `counter`.
pub fn matmul(x: &[f64], w: &[f64], n: usize, k: usize, m: usize, counter: &mut u64) -> Vec<f64> {
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
pub fn rmsnorm(x: &[f64], g: &[f64], width: usize) -> Vec<f64> {
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

pub fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
}

pub struct Expert {
    pub gate: Vec<f64>,
    pub up: Vec<f64>,
    pub down: Vec<f64>,
}

impl Expert {
    pub fn new(rng: &mut Rng, h: usize, f: usize) -> Self {
        Self {
            gate: rng.tensor(h * f),
            up: rng.tensor(h * f),
            down: rng.tensor(f * h),
        }
    }

    pub fn params(&self) -> usize {
        self.gate.len() + self.up.len() + self.down.len()
    }

    /// SwiGLU of one token `x` (width `h`).
    pub fn forward(&self, x: &[f64], h: usize, f: usize, counter: &mut u64) -> Vec<f64> {
        let g = matmul(x, &self.gate, 1, h, f, counter);
        let u = matmul(x, &self.up, 1, h, f, counter);
        let a: Vec<f64> = g.iter().zip(&u).map(|(g, u)| silu(*g) * u).collect();
        matmul(&a, &self.down, 1, f, h, counter)
    }
}

pub struct Layer {
    pub attn_norm: Vec<f64>,
    pub wq: Vec<f64>,
    pub wk: Vec<f64>,
    pub wv: Vec<f64>,
    pub wo: Vec<f64>,
    /// Biases of Q, K, V, O (empty when the layer has none).
    pub bq: Vec<f64>,
    pub bk: Vec<f64>,
    pub bv: Vec<f64>,
    pub bo: Vec<f64>,
    pub q_norm: Vec<f64>,
    pub k_norm: Vec<f64>,
    pub ffn_norm: Vec<f64>,
    /// MoE layers: router, routed and shared experts, shared gate (all empty in a dense
    /// layer).
    pub router: Vec<f64>,
    pub experts: Vec<Expert>,
    pub shared: Vec<Expert>,
    pub shared_gate: Vec<f64>,
    /// Dense layers: the one SwiGLU FFN.
    pub dense: Option<Expert>,
}

impl Layer {
    /// Parameters every token touches in this layer, but for the FFN.
    pub fn attention_and_norms(&self) -> usize {
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
pub fn add_bias(x: &mut [f64], bias: &[f64]) {
    if bias.is_empty() {
        return;
    }
    for row in x.chunks_mut(bias.len()) {
        for (v, b) in row.iter_mut().zip(bias) {
            *v += b;
        }
    }
}

pub struct Reference {
    pub m: Model,
    pub attention: Attention,
    pub counting: Counting,
    pub layers: Vec<Layer>,
    pub final_norm: Vec<f64>,
    pub embedding: Vec<f64>,
    pub lm_head: Vec<f64>,
}

/// What one forward pass over a batch of documents counted.
pub struct Counted {
    pub macs: Macs,
    pub tokens: u64,
    pub kv_elements: u64,
    /// Parameters token 0 touched on the first visit of each physical layer.
    pub active_params: u64,
}

impl Reference {
    pub fn new(spec: &ModelSpec, rng: &mut Rng) -> Self {
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
    pub fn params(&self) -> u64 {
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
    pub fn schedule(&self) -> Vec<(usize, f64)> {
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
    pub fn forward(&self, docs: &[usize], rng: &mut Rng) -> Counted {
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
