//! One layer of the reference: its weights, allocated from the spec's fields, and its
//! forward pass over a batch of documents, counting multiply-adds as it goes.

use smelt::{Attention, AttentionBias, ExpertActivation, Model, QkNorm, WindowKind};

use smelt::ActivationPolicy::{Eager, Flash, Full, Selective};

use super::delta::DeltaNet;
use super::mamba::MambaMixer;
use super::parts::{
    Expert, Indexer, KEPT, Latent, Macs, Norm, Part, Rng, add_bias, matmul, rmsnorm,
};

pub struct Layer {
    /// The mixer's norm (none in an FFN-only layer).
    pub attn_norm: Option<Norm>,
    /// GQA projections (empty with MLA).
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
    pub latent: Option<Latent>,
    pub indexer: Option<Indexer>,
    /// One logit per head (empty without sinks).
    pub sinks: Vec<f64>,
    /// The attention output gate's projection (empty without `attention_gate`).
    pub wg: Vec<f64>,
    /// A recurrent layer's mixer, in place of the attention block.
    pub delta: Option<DeltaNet>,
    pub mamba: Option<MambaMixer>,
    /// The FFN's norm (none in a mixer-only layer).
    pub ffn_norm: Option<Norm>,
    /// MoE layers: router (and its bias), routed and shared experts, shared gate (all
    /// empty in a dense layer).
    pub router: Vec<f64>,
    pub router_bias: Vec<f64>,
    pub experts: Vec<Expert>,
    pub shared: Vec<Expert>,
    pub shared_gate: Vec<f64>,
    /// Dense layers: the one SwiGLU FFN.
    pub dense: Option<Expert>,
    /// This layer's attention shape: key/value heads, head width, and whether the values
    /// reuse the key projection (a full-attention layer's `[model.full_attention]`).
    pub kv_heads: usize,
    pub head_dim: usize,
    pub k_eq_v: bool,
    /// Post-attention and post-FFN norms (`post_norms`).
    pub post_norms: Vec<Norm>,
    /// The MoE block's branch norms (`branch_norms`): the shared branch's output, the
    /// routed branch's input and output.
    pub branch_norms: Vec<Norm>,
    /// The router's per-dimension and per-expert scales (`router_scale`).
    pub router_scale: Vec<f64>,
    pub expert_scale: Vec<f64>,
    /// LatentMoE's projections down to the experts' width and back up (empty without).
    pub latent_down: Vec<f64>,
    pub latent_up: Vec<f64>,
}

impl Layer {
    /// A layer of `m`: dense-FFN or MoE, with attention or (`recurrent`) the model's
    /// recurrent mixer; a `full` attention layer has `[model.full_attention]`'s shape when
    /// the model gives one; without its mixer (`!mixer`) or its FFN (`!ffn`) for a one-block
    /// layer.
    pub fn new(
        m: &Model,
        rng: &mut Rng,
        dense: bool,
        recurrent: bool,
        full: bool,
        (mixer, ffn): (bool, bool),
    ) -> Self {
        let h = m.hidden as usize;
        let (kvh, d, k_eq_v) = match &m.full_attention {
            Some(fa) if full => (fa.kv_heads as usize, fa.head_dim as usize, fa.k_eq_v),
            _ => (m.kv_heads as usize, m.head_dim as usize, false),
        };
        let heads = m.heads as usize;
        let (q, kv) = (heads * d, kvh * d);
        let (f, fs) = (m.moe.expert_ffn as usize, m.moe.shared_ffn as usize);
        let attends = !recurrent && mixer;
        let (q_norm, k_norm) = match m.qk_norm {
            _ if !attends => (0, 0),
            // Llama-4's L2 norm has no weight.
            QkNorm::None | QkNorm::L2 => (0, 0),
            QkNorm::PerHead => (d, d),
            QkNorm::Full => (q, kv),
        };
        let (qkv_bias, o_bias) = match m.attention_bias {
            AttentionBias::None => (false, false),
            AttentionBias::Qkv => (true, false),
            AttentionBias::All => (true, true),
        };
        let gqa = m.mla.is_none() && attends;
        let (qkv_bias, o_bias) = (qkv_bias && attends, o_bias && attends);
        let moe = !dense && ffn;
        let dense = dense && ffn;
        let recurrent = recurrent && mixer;
        let act = m.moe.activation;
        let plain = if act == ExpertActivation::Relu2 {
            act
        } else {
            ExpertActivation::Swiglu
        };
        let width = |on: bool, n: usize| if on { n } else { 0 };
        let latent = m.mla.as_ref().map(|a| {
            let (rq, r) = (a.q_lora_rank as usize, a.kv_lora_rank as usize);
            let (nope, rope, v) = (
                a.qk_nope_head_dim as usize,
                a.qk_rope_head_dim as usize,
                a.v_head_dim as usize,
            );
            let q_out = heads * (nope + rope);
            Latent {
                q_a: rng.tensor(h * rq),
                q_a_norm: rng.tensor(rq),
                q_b: rng.tensor(if rq > 0 { rq * q_out } else { h * q_out }),
                kv_a: rng.tensor(h * (r + rope)),
                kv_a_norm: rng.tensor(r),
                kv_b: rng.tensor(r * heads * (nope + v)),
                o: rng.tensor(heads * v * h),
            }
        });
        Layer {
            attn_norm: mixer.then(|| Norm::new(m, rng)),
            wq: rng.tensor(width(gqa, h * q)),
            wk: rng.tensor(width(gqa, h * kv)),
            wv: rng.tensor(width(gqa && !k_eq_v, h * kv)),
            wo: rng.tensor(width(gqa, q * h)),
            bq: rng.tensor(width(qkv_bias, q)),
            bk: rng.tensor(width(qkv_bias, kv)),
            bv: rng.tensor(width(qkv_bias && !k_eq_v, kv)),
            bo: rng.tensor(width(o_bias, h)),
            q_norm: rng.tensor(q_norm),
            k_norm: rng.tensor(k_norm),
            latent,
            indexer: Indexer::new(m, rng),
            sinks: rng.tensor(width(m.attention_sinks && attends, heads)),
            wg: rng.tensor(width(m.attention_gate && gqa, h * q)),
            delta: m
                .recurrent
                .as_ref()
                .filter(|_| recurrent)
                .and_then(|r| match &r.mixer {
                    smelt::Mixer::GatedDeltanet(g) => Some(DeltaNet::new(m, g, rng)),
                    smelt::Mixer::Mamba2(_) => None,
                }),
            mamba: m
                .recurrent
                .as_ref()
                .filter(|_| recurrent)
                .and_then(|r| match &r.mixer {
                    smelt::Mixer::Mamba2(x) => Some(MambaMixer::new(m, x, rng)),
                    smelt::Mixer::GatedDeltanet(_) => None,
                }),
            ffn_norm: ffn.then(|| Norm::new(m, rng)),
            router: rng.tensor(width(moe, h * m.moe.experts as usize)),
            router_bias: rng.tensor(width(moe && m.moe.router_bias, m.moe.experts as usize)),
            experts: (0..width(moe, m.moe.experts as usize))
                .map(|_| {
                    Expert::new(
                        rng,
                        m.moe.latent.map_or(h, |l| l as usize),
                        f,
                        m.moe.expert_bias,
                        act,
                    )
                })
                .collect(),
            shared: (0..width(moe, m.moe.shared_experts as usize))
                .map(|_| Expert::new(rng, h, fs, false, plain))
                .collect(),
            shared_gate: rng.tensor(width(moe && m.moe.shared_gate, h)),
            dense: dense.then(|| {
                Expert::new(
                    rng,
                    h,
                    m.dense.as_ref().map_or(0, |d| d.ffn) as usize,
                    false,
                    plain,
                )
            }),
            kv_heads: kvh,
            head_dim: d,
            k_eq_v,
            post_norms: (0..width(m.post_norms, 2))
                .map(|_| Norm::new(m, rng))
                .collect(),
            branch_norms: (0..width(moe && m.moe.branch_norms, 3))
                .map(|_| Norm::new(m, rng))
                .collect(),
            router_scale: rng.tensor(width(moe && m.moe.router_scale, h)),
            expert_scale: rng.tensor(width(moe && m.moe.router_scale, m.moe.experts as usize)),
            latent_down: rng.tensor(width(moe, h * m.moe.latent.unwrap_or(0) as usize)),
            latent_up: rng.tensor(width(moe, m.moe.latent.unwrap_or(0) as usize * h)),
        }
    }

    /// Parameters every token touches in this layer, but for the FFN.
    pub fn attention_and_norms(&self) -> usize {
        [
            &self.wq,
            &self.wk,
            &self.wv,
            &self.wo,
            &self.bq,
            &self.bk,
            &self.bv,
            &self.bo,
            &self.q_norm,
            &self.k_norm,
            &self.sinks,
            &self.wg,
        ]
        .iter()
        .map(|v| v.len())
        .sum::<usize>()
            + self.attn_norm.as_ref().map_or(0, Norm::params)
            + self.ffn_norm.as_ref().map_or(0, Norm::params)
            + self.post_norms.iter().map(Norm::params).sum::<usize>()
            + self.branch_norms.iter().map(Norm::params).sum::<usize>()
            + self.latent.as_ref().map_or(0, Latent::params)
            + self.indexer.as_ref().map_or(0, Indexer::params)
            + self.delta.as_ref().map_or(0, DeltaNet::params)
            + self.mamba.as_ref().map_or(0, MambaMixer::params)
    }

    /// Every parameter of the layer.
    pub fn params(&self) -> usize {
        self.attention_and_norms()
            + self.router.len()
            + self.router_bias.len()
            + self.router_scale.len()
            + self.expert_scale.len()
            + self.experts.iter().map(Expert::params).sum::<usize>()
            + self.shared.iter().map(Expert::params).sum::<usize>()
            + self.shared_gate.len()
            + self.dense.as_ref().map_or(0, Expert::params)
            + self.latent_down.len()
            + self.latent_up.len()
    }
}

/// How one execution of a layer runs.
pub struct Run<'a> {
    pub m: &'a Model,
    pub docs: &'a [usize],
    pub attention: Attention,
    /// The window of this layer, if it is windowed.
    pub window: Option<(WindowKind, usize)>,
    /// The residual scale (the loop's).
    pub scale: f64,
    /// The sequence length the recurrent mixers run over (the workload's context).
    pub sequence: usize,
}

/// Per token and head: queries, keys and values (`[token][head][width]`), and the KV
/// elements this execution caches.
struct Qkv {
    q: Vec<Vec<Vec<f64>>>,
    k: Vec<Vec<Vec<f64>>>,
    v: Vec<Vec<Vec<f64>>>,
    cached: usize,
    /// The normed query latent (MLA with a query rank), which an indexer reads.
    cq: Option<Vec<f64>>,
    /// The attention output gate's pre-activations (tokens x q width), if gated.
    gate: Option<Vec<f64>>,
}

/// Elements of a `[token][head][width]` tensor.
fn elements(x: &[Vec<Vec<f64>>]) -> usize {
    x.iter().flatten().map(Vec::len).sum()
}

fn split(x: &[f64], t: usize, heads: usize, w: usize) -> Vec<Vec<Vec<f64>>> {
    (0..t)
        .map(|i| {
            (0..heads)
                .map(|hd| x[i * heads * w + hd * w..][..w].to_vec())
                .collect()
        })
        .collect()
}

impl Layer {
    fn qkv(&self, run: &Run, hn: &[f64], macs: &mut Macs) -> Qkv {
        let m = run.m;
        let t: usize = run.docs.iter().sum();
        let (h, d, heads, kvh) = (
            m.hidden as usize,
            self.head_dim,
            m.heads as usize,
            self.kv_heads,
        );
        if let (Some(l), Some(a)) = (&self.latent, &m.mla) {
            let (rq, r) = (a.q_lora_rank as usize, a.kv_lora_rank as usize);
            let (nope, rope, dv) = (
                a.qk_nope_head_dim as usize,
                a.qk_rope_head_dim as usize,
                a.v_head_dim as usize,
            );
            let q_out = heads * (nope + rope);
            let (q, cq) = if rq > 0 {
                let c = matmul(hn, &l.q_a, t, h, rq, &mut macs.projections);
                macs.saved.save(Part::Norms, c.len(), KEPT);
                let c = rmsnorm(&c, &l.q_a_norm, rq);
                macs.saved.save(Part::Attention, c.len(), KEPT);
                (
                    matmul(&c, &l.q_b, t, rq, q_out, &mut macs.projections),
                    Some(c),
                )
            } else {
                (matmul(hn, &l.q_b, t, h, q_out, &mut macs.projections), None)
            };
            let ckv = matmul(hn, &l.kv_a, t, h, r + rope, &mut macs.projections);
            let mut c = Vec::with_capacity(t * r);
            let mut k_rope = Vec::with_capacity(t * rope);
            for row in ckv.chunks(r + rope) {
                c.extend_from_slice(&row[..r]);
                k_rope.extend_from_slice(&row[r..]);
            }
            macs.saved.save(Part::Norms, c.len(), KEPT);
            let c = rmsnorm(&c, &l.kv_a_norm, r);
            macs.saved.save(Part::Attention, c.len(), KEPT);
            let kv = matmul(
                &c,
                &l.kv_b,
                t,
                r,
                heads * (nope + dv),
                &mut macs.projections,
            );
            let kv = split(&kv, t, heads, nope + dv);
            let k: Vec<Vec<Vec<f64>>> = (0..t)
                .map(|i| {
                    (0..heads)
                        .map(|hd| {
                            let mut key = kv[i][hd][..nope].to_vec();
                            key.extend_from_slice(&k_rope[i * rope..][..rope]);
                            key
                        })
                        .collect()
                })
                .collect();
            let v: Vec<Vec<Vec<f64>>> = (0..t)
                .map(|i| (0..heads).map(|hd| kv[i][hd][nope..].to_vec()).collect())
                .collect();
            // The core saves q, k and v (every head has its own keys and values).
            macs.saved.save(Part::Attention, q.len(), KEPT);
            macs.saved
                .save(Part::Attention, elements(&k) + elements(&v), KEPT);
            return Qkv {
                q: split(&q, t, heads, nope + rope),
                k,
                v,
                // The latent and the RoPE key are what MLA caches.
                cached: t * (r + rope),
                cq,
                gate: None,
            };
        }
        let (q, kv) = (heads * d, kvh * d);
        let mut qm = matmul(hn, &self.wq, t, h, q, &mut macs.projections);
        let mut km = matmul(hn, &self.wk, t, h, kv, &mut macs.projections);
        // With k_eq_v the values are the key projection (before its norm).
        let mut vm = if self.k_eq_v {
            km.clone()
        } else {
            matmul(hn, &self.wv, t, h, kv, &mut macs.projections)
        };
        let gate =
            (!self.wg.is_empty()).then(|| matmul(hn, &self.wg, t, h, q, &mut macs.projections));
        add_bias(&mut qm, &self.bq);
        add_bias(&mut km, &self.bk);
        add_bias(&mut vm, &self.bv);
        if m.qk_norm != QkNorm::None {
            macs.saved.save(Part::Norms, qm.len() + km.len(), KEPT);
        }
        match m.qk_norm {
            QkNorm::None => {}
            QkNorm::PerHead => {
                qm = rmsnorm(&qm, &self.q_norm, d);
                km = rmsnorm(&km, &self.k_norm, d);
            }
            QkNorm::Full => {
                qm = rmsnorm(&qm, &self.q_norm, q);
                km = rmsnorm(&km, &self.k_norm, kv);
            }
            QkNorm::L2 => {
                // Per head, without a scale: no parameters.
                qm = rmsnorm(&qm, &vec![1.0; d], d);
                km = rmsnorm(&km, &vec![1.0; d], d);
            }
        }
        if m.v_norm {
            // An RMSNorm without a scale: no parameters.
            vm = rmsnorm(&vm, &vec![1.0; d], d);
        }
        let group = heads / kvh;
        let (ks, vs) = (split(&km, t, kvh, d), split(&vm, t, kvh, d));
        let expand = |x: Vec<Vec<Vec<f64>>>| -> Vec<Vec<Vec<f64>>> {
            x.into_iter()
                .map(|per| (0..heads).map(|hd| per[hd / group].clone()).collect())
                .collect()
        };
        let (k, v) = (expand(ks), expand(vs));
        // The core saves q, and k and v: grouped (a fused kernel, or recomputed from them),
        // or expanded to every query head (eager's repeat_kv).
        macs.saved.save(Part::Attention, qm.len(), KEPT);
        macs.saved
            .save(Part::Attention, km.len() + vm.len(), &[Flash, Selective]);
        macs.saved
            .save(Part::Attention, elements(&k) + elements(&v), &[Eager]);
        Qkv {
            q: split(&qm, t, heads, d),
            k,
            v,
            cached: 2 * t * kv,
            cq: None,
            gate,
        }
    }

    /// The keys query `i` (document-relative position `p`, document from `start`, `len`
    /// tokens) attends: `first..=last`.
    fn key_range(run: &Run, start: usize, len: usize, p: usize) -> (usize, usize) {
        let i = start + p;
        match (run.attention, run.window) {
            (Attention::Dense, _) => (start, start + len - 1),
            (Attention::Causal, None) => (start, i),
            (Attention::Causal, Some((WindowKind::Sliding, w))) => {
                ((i + 1).saturating_sub(w).max(start), i)
            }
            (Attention::Causal, Some((WindowKind::Chunked, c))) => (start + p / c * c, i),
        }
    }

    /// One execution of the layer on `x` (tokens x hidden); returns the KV elements it
    /// caches and the parameters token 0 touched.
    pub fn forward(&self, run: &Run, x: &mut [f64], macs: &mut Macs) -> (usize, usize) {
        let m = run.m;
        let t: usize = run.docs.iter().sum();
        let h = m.hidden as usize;
        let heads = m.heads as usize;
        // Full recomputation keeps this input; the others keep what each op saves.
        macs.saved.save(Part::LayerInputs, x.len(), &[Full]);
        let Some(attn_norm) = &self.attn_norm else {
            return (0, self.ffn(run, x, macs));
        };
        macs.saved.save(Part::Norms, x.len(), KEPT);
        let hn = attn_norm.apply(x, h);
        if let Some(mb) = &self.mamba {
            let y = mb.forward(h, &hn, run.sequence, &mut macs.delta);
            for (xv, yv) in x.iter_mut().zip(&y) {
                *xv += run.scale * yv;
            }
            return (0, self.ffn(run, x, macs));
        }
        if let Some(d) = &self.delta {
            let y = d.forward(h, &hn, run.sequence, &mut macs.delta);
            for (xv, yv) in x.iter_mut().zip(&y) {
                *xv += run.scale * yv;
            }
            return (0, self.ffn(run, x, macs));
        }
        macs.saved.save(Part::Attention, hn.len(), KEPT);
        let qkv = self.qkv(run, &hn, macs);
        let dk = qkv.q[0][0].len();
        let dv = qkv.v[0][0].len();
        // Each token's document start, length and position in it.
        let mut position = Vec::with_capacity(t);
        let mut s0 = 0;
        for &len in run.docs {
            position.extend((0..len).map(|p| (s0, len, p)));
            s0 += len;
        }
        let range = |i: usize| {
            let (start, len, p) = position[i];
            Self::key_range(run, start, len, p)
        };
        // An indexer scores every key the query may attend and keeps its top k. (Under the
        // dense convention the core still counts the whole square, whatever the selection.)
        let selected = self.indexer.as_ref().map(|ix| {
            let cq = qkv
                .cq
                .as_deref()
                .expect("an indexer reads the query latent");
            ix.select(m, (cq, &hn), range, macs)
        });
        let indexed = m.indexer.as_ref().map_or(0, |ix| ix.head_dim as usize);
        let mut attn = vec![0.0; t * heads * dv];
        let mut start = 0;
        for &len in run.docs {
            for head in 0..heads {
                for p in 0..len {
                    let i = start + p;
                    let (first, last) = range(i);
                    let keys: Vec<usize> = match (&selected, run.attention) {
                        (Some(sel), Attention::Causal) => sel[i].clone(),
                        _ => (first..=last).collect(),
                    };
                    let mut scores = Vec::new();
                    for &j in &keys {
                        let mut s = 0.0;
                        for c in 0..dk {
                            s += qkv.q[i][head][c] * qkv.k[j][head][c];
                            macs.attention_core += 1;
                        }
                        scores.push(s / (dk as f64).sqrt());
                    }
                    let sink = self.sinks.get(head).copied();
                    // Eager materialises the query's whole row of its document (the
                    // masked keys included), and a sink's column; a fused kernel saves
                    // one log-sum-exp; with an indexer it keeps the padded top-k indices.
                    macs.saved
                        .save(Part::Scores, len + usize::from(sink.is_some()), &[Eager]);
                    macs.saved.save_wide(Part::Scores, 1, &[Flash]);
                    let max = scores.iter().copied().chain(sink).fold(f64::MIN, f64::max);
                    let z: f64 = scores
                        .iter()
                        .chain(sink.as_ref())
                        .map(|s| (s - max).exp())
                        .sum();
                    for (jj, &j) in keys.iter().enumerate() {
                        let pj = (scores[jj] - max).exp() / z;
                        for c in 0..dv {
                            attn[(i * heads + head) * dv + c] += pj * qkv.v[j][head][c];
                            macs.attention_core += 1;
                        }
                    }
                }
            }
            start += len;
        }
        if let Some(ix) = &m.indexer {
            macs.saved
                .save_wide(Part::Indexer, t * ix.topk as usize, &[Flash, Selective]);
        }
        if let Some(gate) = &qkv.gate {
            for (a, g) in attn.iter_mut().zip(gate) {
                *a *= 1.0 / (1.0 + (-g).exp());
            }
        }
        macs.saved.save(Part::Attention, attn.len(), KEPT);
        let wo = self.latent.as_ref().map_or(&self.wo, |l| &l.o);
        let mut o = matmul(&attn, wo, t, heads * dv, h, &mut macs.projections);
        add_bias(&mut o, &self.bo);
        if let Some(post) = self.post_norms.first() {
            o = post.apply(&o, h);
        }
        for (xv, ov) in x.iter_mut().zip(&o) {
            *xv += run.scale * ov;
        }
        (qkv.cached + t * indexed, self.ffn(run, x, macs))
    }

    /// The FFN half; returns the parameters token 0 touched in the whole layer.
    fn ffn(&self, run: &Run, x: &mut [f64], macs: &mut Macs) -> usize {
        let m = run.m;
        let t: usize = run.docs.iter().sum();
        let h = m.hidden as usize;
        let Some(ffn_norm) = &self.ffn_norm else {
            return self.attention_and_norms();
        };
        macs.saved.save(Part::Norms, x.len(), KEPT);
        let hn = ffn_norm.apply(x, h);
        macs.saved.save(Part::FfnInput, hn.len(), KEPT);
        if let Some(dense) = &self.dense {
            let fd = m.dense.as_ref().map_or(0, |d| d.ffn) as usize;
            for tok in 0..t {
                let y = dense.forward(
                    &hn[tok * h..(tok + 1) * h],
                    (h, fd),
                    &mut macs.dense,
                    (&mut macs.saved, Part::Dense),
                );
                let y = match self.post_norms.get(1) {
                    Some(post) => post.apply(&y, h),
                    None => y,
                };
                for (xv, yv) in x[tok * h..(tok + 1) * h].iter_mut().zip(&y) {
                    *xv += run.scale * yv;
                }
            }
            return self.attention_and_norms() + dense.params();
        }
        let (e, k) = (m.moe.experts as usize, m.moe.top_k as usize);
        let (f, fs) = (m.moe.expert_ffn as usize, m.moe.shared_ffn as usize);
        // With router scales (Gemma 4), the router reads the layer's input normed without
        // a scale, times its per-dimension scale; with branch norms the routed experts read
        // the input under their own norm.
        let router_in = if self.router_scale.is_empty() {
            hn.clone()
        } else {
            rmsnorm(x, &self.router_scale, h)
        };
        let routed_in = match self.branch_norms.get(1) {
            Some(pre) => pre.apply(x, h),
            None => hn.clone(),
        };
        let mut logits = matmul(&router_in, &self.router, t, h, e, &mut macs.router);
        add_bias(&mut logits, &self.router_bias);
        let mut ffn = vec![0.0; t * h];
        let mut shared_out = vec![0.0; t * h];
        let mut active = 0;
        for tok in 0..t {
            let row = &logits[tok * e..(tok + 1) * e];
            let mut order: Vec<usize> = (0..e).collect();
            order.sort_by(|a, b| row[*b].total_cmp(&row[*a]).then(a.cmp(b)));
            let chosen = &order[..k];
            // The probabilities over every expert (the softmax saves them), then the
            // chosen ones renormalised: the weights their outputs are multiplied by.
            let max = row[order[0]];
            let probs: Vec<f64> = row.iter().map(|l| (l - max).exp()).collect();
            let z: f64 = chosen.iter().map(|&c| probs[c]).sum();
            let weights: Vec<f64> = chosen
                .iter()
                .map(|&c| probs[c] / z * self.expert_scale.get(c).copied().unwrap_or(1.0))
                .collect();
            macs.saved.save(Part::Router, probs.len(), KEPT);
            macs.saved.save(Part::Router, weights.len(), KEPT);
            let xt = &hn[tok * h..(tok + 1) * h];
            // With LatentMoE the token is projected down once, its experts work at the
            // latent width, and their weighted sum is projected back up.
            let xr = &routed_in[tok * h..(tok + 1) * h];
            let lw = m.moe.latent.map_or(h, |l| l as usize);
            let xr = if self.latent_down.is_empty() {
                xr.to_vec()
            } else {
                matmul(xr, &self.latent_down, 1, h, lw, &mut macs.latent)
            };
            let mut routed = vec![0.0; lw];
            for (&c, &w) in chosen.iter().zip(&weights) {
                // The token's copy dispatched to the expert, and its output.
                let copy = xr.clone();
                macs.saved.save(Part::Experts, copy.len(), KEPT);
                let y = self.experts[c].forward(
                    &copy,
                    (lw, f),
                    &mut macs.experts,
                    (&mut macs.saved, Part::Experts),
                );
                macs.saved.save(Part::Experts, y.len(), KEPT);
                for (acc, yv) in routed.iter_mut().zip(&y) {
                    *acc += w * yv;
                }
            }
            if !self.latent_up.is_empty() {
                routed = matmul(&routed, &self.latent_up, 1, lw, h, &mut macs.latent);
            }
            for (acc, r) in ffn[tok * h..(tok + 1) * h].iter_mut().zip(&routed) {
                *acc += r;
            }
            let gate = if self.shared_gate.is_empty() {
                1.0
            } else {
                let g = matmul(xt, &self.shared_gate, 1, h, 1, &mut macs.shared);
                macs.saved.save(Part::Shared, 1, KEPT);
                1.0 / (1.0 + (-g[0]).exp())
            };
            for s in &self.shared {
                let y = s.forward(
                    xt,
                    (h, fs),
                    &mut macs.shared,
                    (&mut macs.saved, Part::Shared),
                );
                if !self.shared_gate.is_empty() {
                    macs.saved.save(Part::Shared, y.len(), KEPT);
                }
                for (acc, yv) in shared_out[tok * h..(tok + 1) * h].iter_mut().zip(&y) {
                    *acc += gate * yv;
                }
            }
            if tok == 0 {
                active = self.attention_and_norms()
                    + self.router.len()
                    + self.router_bias.len()
                    + self.router_scale.len()
                    + self.expert_scale.len()
                    + self.shared_gate.len()
                    + chosen
                        .iter()
                        .map(|&c| self.experts[c].params())
                        .sum::<usize>()
                    + self.shared.iter().map(Expert::params).sum::<usize>()
                    + self.latent_down.len()
                    + self.latent_up.len();
            }
        }
        // Branch norms: the shared branch's output and the routed one's, each normed; the
        // post-FFN norm on their sum.
        if let [post_shared, _, post_routed] = &self.branch_norms[..] {
            shared_out = post_shared.apply(&shared_out, h);
            ffn = post_routed.apply(&ffn, h);
        }
        for (acc, s) in ffn.iter_mut().zip(&shared_out) {
            *acc += s;
        }
        if let Some(post) = self.post_norms.get(1) {
            ffn = post.apply(&ffn, h);
        }
        for (xv, fv) in x.iter_mut().zip(&ffn) {
            *xv += run.scale * fv;
        }
        active
    }
}
