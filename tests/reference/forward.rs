//! The reference forward pass itself: real matmuls that count their multiply-adds, the
//! parameters they allocate and the KV elements they store. It does not call the library's
//! counting code: it only reads the spec's fields.

use smelt::{Attention, Counting, Model, ModelSpec};

use super::layer::{Layer, Run};
use super::parts::{Macs, Norm, Rng, add_bias, matmul};

/// A multi-token-prediction module: its own norms, projection, block, head norm, and its
/// own copies of the embedding and the LM head, as DeepSeek-V3's checkpoint stores them.
pub struct Mtp {
    pub enorm: Norm,
    pub hnorm: Norm,
    pub eh_proj: Vec<f64>,
    pub block: Layer,
    pub head_norm: Norm,
    pub embedding: Vec<f64>,
    pub lm_head: Vec<f64>,
    pub lm_head_bias: Vec<f64>,
}

impl Mtp {
    fn extra(&self) -> usize {
        [
            &self.eh_proj,
            &self.embedding,
            &self.lm_head,
            &self.lm_head_bias,
        ]
        .iter()
        .map(|v| v.len())
        .sum::<usize>()
            + self.enorm.params()
            + self.hnorm.params()
            + self.head_norm.params()
    }
}

pub struct Reference {
    pub m: Model,
    pub attention: Attention,
    /// The workload's context: the sequence the recurrent mixers run over.
    pub context: usize,
    pub counting: Counting,
    pub layers: Vec<Layer>,
    pub final_norm: Norm,
    pub embedding: Vec<f64>,
    pub lm_head: Vec<f64>,
    /// The head's bias (empty without `lm_head_bias` or an uncounted head).
    pub lm_head_bias: Vec<f64>,
    pub mtp: Vec<Mtp>,
}

/// What one forward pass over a batch of documents counted.
pub struct Counted {
    pub macs: Macs,
    pub tokens: u64,
    pub kv_elements: u64,
    /// Parameters token 0 touched on the first visit of each physical layer.
    pub active_params: u64,
    /// Per layer execution: KV elements cached per token, and the window if any.
    pub executions: Vec<(u64, Option<u64>)>,
    /// The recurrent state one sequence keeps, over the recurrent executions.
    pub state: u64,
}

/// The head's bias, when the model has one and the head is counted.
fn head_bias(m: &Model, counting: &Counting, rng: &mut Rng) -> Vec<f64> {
    rng.tensor(if counting.lm_head && m.lm_head_bias {
        m.vocab as usize
    } else {
        0
    })
}

/// The embedding and LM-head matrices counting asks for: `(embedding, lm_head)`.
fn vocab_matrices(m: &Model, counting: &Counting, rng: &mut Rng) -> (Vec<f64>, Vec<f64>) {
    let (h, vocab) = (m.hidden as usize, m.vocab as usize);
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
    (embedding, lm_head)
}

impl Reference {
    pub fn new(spec: &ModelSpec, rng: &mut Rng) -> Self {
        let m = spec.model.clone();
        let h = m.hidden as usize;
        let dense_layers: Vec<u64> = m.dense.as_ref().map_or(Vec::new(), |d| d.layers.clone());
        let recurrent: Vec<u64> = m
            .recurrent
            .as_ref()
            .map_or(Vec::new(), |r| r.layers.clone());
        let windowed: Vec<u64> = m.window.as_ref().map_or(Vec::new(), |w| w.layers.clone());
        let layers = (0..m.layers)
            .map(|li| {
                let l = li + 1;
                let (dense, recurrent) = (dense_layers.contains(&l), recurrent.contains(&l));
                let full = !recurrent && !windowed.contains(&l);
                let blocks = (!m.ffn_only().contains(&l), !m.mixer_only().contains(&l));
                Layer::new(&m, rng, dense, recurrent, full, blocks)
            })
            .collect();
        let counting = spec.counting;
        let (embedding, lm_head) = vocab_matrices(&m, &counting, rng);
        let last_dense = dense_layers.contains(&m.layers) && !m.mixer_only().contains(&m.layers);
        let mtp = if counting.mtp {
            (0..m.mtp_layers)
                .map(|_| {
                    let (embedding, lm_head) = vocab_matrices(&m, &counting, rng);
                    Mtp {
                        enorm: Norm::new(&m, rng),
                        hnorm: Norm::new(&m, rng),
                        eh_proj: rng.tensor(2 * h * h),
                        // The last layer's FFN: dense after a dense last layer.
                        block: Layer::new(&m, rng, last_dense, false, true, (true, true)),
                        head_norm: Norm::new(&m, rng),
                        embedding,
                        lm_head,
                        lm_head_bias: head_bias(&m, &counting, rng),
                    }
                })
                .collect()
        } else {
            Vec::new()
        };
        Self {
            final_norm: Norm::new(&m, rng),
            lm_head_bias: head_bias(&m, &counting, rng),
            attention: spec.workload.attention,
            context: spec.workload.context as usize,
            m,
            counting,
            layers,
            embedding,
            lm_head,
            mtp,
        }
    }

    /// Every allocated parameter.
    pub fn params(&self) -> u64 {
        let layers: usize = self.layers.iter().map(Layer::params).sum();
        let mtp: usize = self.mtp.iter().map(|t| t.block.params() + t.extra()).sum();
        (layers
            + mtp
            + self.final_norm.params()
            + self.embedding.len()
            + self.lm_head.len()
            + self.lm_head_bias.len()) as u64
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

    /// The LM head as a `hidden x vocab` matrix: its own, or the (tied) embedding
    /// transposed.
    fn head<'a>(&self, own: &'a [f64], embedding: &[f64]) -> std::borrow::Cow<'a, [f64]> {
        if !own.is_empty() {
            return own.into();
        }
        let (h, vocab) = (self.m.hidden as usize, self.m.vocab as usize);
        let mut w = vec![0.0; h * vocab];
        for r in 0..vocab {
            for c in 0..h {
                w[c * vocab + r] = embedding[r * h + c];
            }
        }
        w.into()
    }

    /// One forward pass over `docs` (document lengths, packed back to back).
    pub fn forward(&self, docs: &[usize], rng: &mut Rng) -> Counted {
        let m = &self.m;
        let h = m.hidden as usize;
        let t: usize = docs.iter().sum();
        let mut macs = Macs::default();
        let mut x = rng.tensor(t * h);
        let mut cached = 0usize;
        let mut executions = Vec::new();
        let mut active = 0usize;
        let mut visited = vec![false; m.layers as usize];
        let window = m.window.as_ref();
        let mut state = 0;
        for (li, scale) in self.schedule() {
            let windowed = window.filter(|w| w.layers.contains(&(li as u64 + 1)));
            let run = Run {
                m,
                docs,
                attention: self.attention,
                window: windowed.map(|w| (w.kind, w.size as usize)),
                scale,
                sequence: self.context,
            };
            let layer = &self.layers[li];
            state += layer.delta.as_ref().map_or(0, |d| d.state() as u64)
                + layer.mamba.as_ref().map_or(0, |x| x.state() as u64);
            let (kv, touched) = self.layers[li].forward(&run, &mut x, &mut macs);
            cached += kv;
            executions.push(((kv / t) as u64, windowed.map(|w| w.size)));
            if !visited[li] {
                visited[li] = true;
                active += touched;
            }
        }
        let xn = self.final_norm.apply(&x, h);
        active += self.final_norm.params() + self.embedding.len();
        let vocab = m.vocab as usize;
        if self.counting.lm_head {
            let head = self.head(&self.lm_head, &self.embedding);
            let mut logits = matmul(&xn, &head, t, h, vocab, &mut macs.lm_head);
            add_bias(&mut logits, &self.lm_head_bias);
            assert!(logits.iter().all(|v| v.is_finite()));
            active += self.lm_head.len() + self.lm_head_bias.len();
        }
        // MTP modules, each predicting one token further: [norm(h); norm(embedding of the
        // next token)] projected to H, one MoE block with full attention, the head.
        let mut prev = x.clone();
        for module in &self.mtp {
            let mut inner = Macs::default();
            let e = rng.tensor(t * h);
            let (hn, en) = (module.hnorm.apply(&prev, h), module.enorm.apply(&e, h));
            let joined: Vec<f64> = (0..t)
                .flat_map(|i| hn[i * h..][..h].iter().chain(&en[i * h..][..h]).copied())
                .collect();
            let mut y = matmul(&joined, &module.eh_proj, t, 2 * h, h, &mut inner.mtp);
            let run = Run {
                m,
                docs,
                attention: self.attention,
                window: None,
                scale: 1.0,
                sequence: self.context,
            };
            let (_, touched) = module.block.forward(&run, &mut y, &mut inner);
            let yn = module.head_norm.apply(&y, h);
            if self.counting.lm_head {
                let head = self.head(&module.lm_head, &module.embedding);
                let mut logits = matmul(&yn, &head, t, h, vocab, &mut inner.mtp);
                add_bias(&mut logits, &module.lm_head_bias);
            }
            macs.mtp += inner.total();
            active += touched + module.extra();
            prev = y;
        }
        assert!(x.iter().all(|v| v.is_finite()));
        Counted {
            macs,
            tokens: t as u64,
            kv_elements: cached as u64,
            active_params: active as u64,
            executions,
            state,
        }
    }
}
