//! The reference's building blocks: counted matmuls, norms, experts, the MLA latents and a
//! sparse attention indexer, each allocating its own weights from the spec's fields.

use smelt::{ActivationPolicy, ExpertActivation, Model};

/// The components the cost model's activation memory reports, in its order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    LayerInputs,
    Norms,
    Attention,
    Scores,
    Indexer,
    FfnInput,
    Router,
    Experts,
    Shared,
    Dense,
}

const PARTS: usize = 10;

/// Every policy but `full`, which keeps only each execution's input.
pub const KEPT: &[ActivationPolicy] = &[
    ActivationPolicy::Eager,
    ActivationPolicy::Flash,
    ActivationPolicy::Selective,
];

/// Elements saved for the backward pass, by policy, component and width: `[.., 0]` in
/// the activation dtype, `[.., 1]` four bytes wide (fp32 log-sum-exp, int32 indices).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Saved([[[u64; 2]; PARTS]; 4]);

fn policy_index(p: ActivationPolicy) -> usize {
    ActivationPolicy::UNFUSED
        .iter()
        .position(|&q| q == p)
        .unwrap()
}

impl Saved {
    /// A tensor of `n` activation-dtype elements saved under each of `policies`.
    pub fn save(&mut self, part: Part, n: usize, policies: &[ActivationPolicy]) {
        for &p in policies {
            self.0[policy_index(p)][part as usize][0] += n as u64;
        }
    }

    /// A tensor of `n` four-byte elements saved under each of `policies`.
    pub fn save_wide(&mut self, part: Part, n: usize, policies: &[ActivationPolicy]) {
        for &p in policies {
            self.0[policy_index(p)][part as usize][1] += n as u64;
        }
    }

    /// Bytes `policy` saves in `part`, with `b`-byte activations.
    pub fn bytes(&self, policy: ActivationPolicy, part: Part, b: u64) -> u64 {
        let [act, wide] = self.0[policy_index(policy)][part as usize];
        act * b + wide * 4
    }
}

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
    pub mtp: u64,
    pub indexer: u64,
    /// LatentMoE's projections.
    pub latent: u64,
    /// Recurrent mixers' projections and convolution + delta rule.
    pub delta: super::delta::DeltaMacs,
    /// What the forward pass saved for the backward pass (not multiply-adds).
    pub saved: Saved,
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
            + self.mtp
            + self.indexer
            + self.latent
            + self.delta.projections
            + self.delta.core
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

/// A hidden-width norm: RMSNorm, or LayerNorm with a bias when the model has `norm_bias`.
pub struct Norm {
    pub g: Vec<f64>,
    /// Empty for RMSNorm.
    pub b: Vec<f64>,
}

impl Norm {
    pub fn new(m: &Model, rng: &mut Rng) -> Self {
        let h = m.hidden as usize;
        Norm {
            g: rng.tensor(h),
            b: rng.tensor(if m.norm_bias { h } else { 0 }),
        }
    }

    pub fn params(&self) -> usize {
        self.g.len() + self.b.len()
    }

    /// Each `width`-row of `x` normalised (not counted: norms cost no FLOPs).
    pub fn apply(&self, x: &[f64], width: usize) -> Vec<f64> {
        if self.b.is_empty() {
            return rmsnorm(x, &self.g, width);
        }
        let mut out = x.to_vec();
        for row in out.chunks_mut(width) {
            let mean = row.iter().sum::<f64>() / width as f64;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / width as f64;
            let inv = 1.0 / (var + 1e-6).sqrt();
            for ((v, g), b) in row.iter_mut().zip(&self.g).zip(&self.b) {
                *v = (*v - mean) * inv * g + b;
            }
        }
        out
    }
}

pub fn silu(x: f64) -> f64 {
    x / (1.0 + (-x).exp())
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

/// A SwiGLU FFN, with biases when it has them (gpt-oss's experts), or Nemotron-H's ungated
/// relu2 MLP (no gate).
pub struct Expert {
    pub gate: Vec<f64>,
    pub up: Vec<f64>,
    pub down: Vec<f64>,
    pub biases: Vec<Vec<f64>>,
    /// gpt-oss's clamped SwiGLU instead of SwiGLU.
    pub clamped: bool,
    /// `down(relu(up·x)²)`, without a gate.
    pub relu2: bool,
}

/// gpt-oss's clamp limit (`swiglu_limit`) and sigmoid scale.
const LIMIT: f64 = 7.0;
const ALPHA: f64 = 1.702;

impl Expert {
    pub fn new(rng: &mut Rng, h: usize, f: usize, bias: bool, act: ExpertActivation) -> Self {
        let relu2 = act == ExpertActivation::Relu2;
        Self {
            clamped: act == ExpertActivation::ClampedSwiglu,
            relu2,
            gate: rng.tensor(if relu2 { 0 } else { h * f }),
            up: rng.tensor(h * f),
            down: rng.tensor(f * h),
            biases: if bias {
                vec![rng.tensor(f), rng.tensor(f), rng.tensor(h)]
            } else {
                vec![Vec::new(); 3]
            },
        }
    }

    pub fn params(&self) -> usize {
        self.gate.len()
            + self.up.len()
            + self.down.len()
            + self.biases.iter().map(Vec::len).sum::<usize>()
    }

    /// SwiGLU of one token `x` (width `h`), recording in `saved` (as `part`) what its
    /// backward reads: SiLU's input `g`, the product's factors `silu(g)` and `u`, and the
    /// down projection's input (the input `x` is its caller's). The clamped SwiGLU,
    /// `(clamp(u) + 1)·c·σ(α·c)` with `c = clamp(g)`, composed as gpt-oss's modelling code
    /// does: each clamp saves its input (`g`, `u`), the product `c·σ` its factors, the
    /// outer product its factors `clamp(u) + 1` and `c·σ`, and the down projection its
    /// input.
    pub fn forward(
        &self,
        x: &[f64],
        (h, f): (usize, usize),
        counter: &mut u64,
        (saved, part): (&mut Saved, Part),
    ) -> Vec<f64> {
        if self.relu2 {
            let u = matmul(x, &self.up, 1, h, f, counter);
            let a: Vec<f64> = u.iter().map(|u| u.max(0.0).powi(2)).collect();
            return matmul(&a, &self.down, 1, f, h, counter);
        }
        let mut g = matmul(x, &self.gate, 1, h, f, counter);
        let mut u = matmul(x, &self.up, 1, h, f, counter);
        add_bias(&mut g, &self.biases[0]);
        add_bias(&mut u, &self.biases[1]);
        let a: Vec<f64> = if self.clamped {
            let c: Vec<f64> = g.iter().map(|g| g.min(LIMIT)).collect();
            let sig: Vec<f64> = c.iter().map(|c| 1.0 / (1.0 + (-ALPHA * c).exp())).collect();
            let glu: Vec<f64> = c.iter().zip(&sig).map(|(c, s)| c * s).collect();
            let u1: Vec<f64> = u.iter().map(|u| u.clamp(-LIMIT, LIMIT) + 1.0).collect();
            let a: Vec<f64> = u1.iter().zip(&glu).map(|(u, g)| u * g).collect();
            for t in [&g, &u, &c, &sig, &glu, &u1, &a] {
                saved.save(part, t.len(), KEPT);
            }
            a
        } else {
            let s: Vec<f64> = g.iter().map(|g| silu(*g)).collect();
            let a: Vec<f64> = s.iter().zip(&u).map(|(s, u)| s * u).collect();
            for t in [&g, &s, &u, &a] {
                saved.save(part, t.len(), KEPT);
            }
            a
        };
        let mut y = matmul(&a, &self.down, 1, f, h, counter);
        add_bias(&mut y, &self.biases[2]);
        y
    }
}

/// A sparse attention indexer's weights (DeepSeek-V3.2's names): `wq_b` from the query
/// latent, `wk`, the key's LayerNorm, `weights_proj`.
pub struct Indexer {
    pub wq_b: Vec<f64>,
    pub wk: Vec<f64>,
    pub k_norm: Norm,
    pub weights_proj: Vec<f64>,
}

impl Indexer {
    pub fn new(m: &Model, rng: &mut Rng) -> Option<Self> {
        let (ix, a) = (m.indexer.as_ref()?, m.mla.as_ref()?);
        let (h, nh, dh) = (m.hidden as usize, ix.heads as usize, ix.head_dim as usize);
        Some(Self {
            wq_b: rng.tensor(a.q_lora_rank as usize * nh * dh),
            wk: rng.tensor(h * dh),
            k_norm: Norm {
                g: rng.tensor(dh),
                b: rng.tensor(dh),
            },
            weights_proj: rng.tensor(h * nh),
        })
    }

    pub fn params(&self) -> usize {
        self.wq_b.len() + self.wk.len() + self.k_norm.params() + self.weights_proj.len()
    }

    /// For each query of the batch, the keys its attention core runs on: the `topk`
    /// best-scoring of those it may attend (`range(i)`), in order. Every scored pair
    /// costs `heads·(head_dim + 1)` multiply-adds (the per-head dot products, then their
    /// weighted sum); the key it caches is `head_dim` wide per token.
    pub fn select(
        &self,
        m: &Model,
        (cq, hn): (&[f64], &[f64]),
        range: impl Fn(usize) -> (usize, usize),
        macs: &mut Macs,
    ) -> Vec<Vec<usize>> {
        let (Some(ix), Some(a)) = (&m.indexer, &m.mla) else {
            unreachable!("an indexer is built only with both");
        };
        let t = hn.len() / m.hidden as usize;
        let (h, nh, dh, rq) = (
            m.hidden as usize,
            ix.heads as usize,
            ix.head_dim as usize,
            a.q_lora_rank as usize,
        );
        let q = matmul(cq, &self.wq_b, t, rq, nh * dh, &mut macs.indexer);
        let k = matmul(hn, &self.wk, t, h, dh, &mut macs.indexer);
        let k = self.k_norm.apply(&k, dh);
        let w = matmul(hn, &self.weights_proj, t, h, nh, &mut macs.indexer);
        (0..t)
            .map(|i| {
                let (first, last) = range(i);
                let mut scored: Vec<(f64, usize)> = (first..=last)
                    .map(|j| {
                        let mut score = 0.0;
                        for head in 0..nh {
                            let mut dot = 0.0;
                            for c in 0..dh {
                                dot += q[(i * nh + head) * dh + c] * k[j * dh + c];
                                macs.indexer += 1;
                            }
                            score += w[i * nh + head] * dot.max(0.0);
                            macs.indexer += 1;
                        }
                        (score, j)
                    })
                    .collect();
                scored.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
                scored.truncate(ix.topk as usize);
                let mut keys: Vec<usize> = scored.into_iter().map(|(_, j)| j).collect();
                keys.sort_unstable();
                keys
            })
            .collect()
    }
}

/// Multi-head latent attention's weights (DeepSeek's names).
pub struct Latent {
    pub q_a: Vec<f64>,
    pub q_a_norm: Vec<f64>,
    /// `q_b_proj`, or the plain query projection when there is no query latent.
    pub q_b: Vec<f64>,
    pub kv_a: Vec<f64>,
    pub kv_a_norm: Vec<f64>,
    pub kv_b: Vec<f64>,
    pub o: Vec<f64>,
}

impl Latent {
    pub fn params(&self) -> usize {
        [
            &self.q_a,
            &self.q_a_norm,
            &self.q_b,
            &self.kv_a,
            &self.kv_a_norm,
            &self.kv_b,
            &self.o,
        ]
        .iter()
        .map(|v| v.len())
        .sum()
    }
}
