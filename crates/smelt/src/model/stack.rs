//! The model as it executes: one description per layer, resolved once from a validated
//! [`Model`] by [`Stack::of`]. Every consumer — FLOPs, parameters and KV cache, activation
//! and training memory, the kernel plan, the launchers' FLOP formulas, the solver and the
//! Hugging Face writer — reads this description, not the model file's architecture fields
//! (`[model.window]`, `[model.recurrent]`, `[model.blocks]`, `[model.full_attention]`, ...),
//! so that a new architecture feature is its description here plus its cost.
//!
//! # Conventions
//!
//! * **Layers** are the model's physical layers, in order, 0-based in the code (layer `i`
//!   is the model file's 1-based layer `i + 1`). Each is a [`Layer`]: a token mixer
//!   ([`TokenMixer`]: attention or a recurrent mixer), an FFN ([`Ffn`]: the MoE or a dense
//!   FFN) and its hidden-width norms ([`Norms`]). A one-block layer (`[model.blocks]`) has
//!   no FFN (`mixer_only`) or no mixer (`ffn_only`): the missing block is `None`.
//! * **Attention** ([`AttentionLayer`]) carries the layer's own shape ([`AttentionShape`]):
//!   GQA with its query heads, key/value heads and head width — the model's, or, for the
//!   full-attention layers of a model with `[model.full_attention]` (Gemma 4), that table's
//!   key/value heads and head width ([`AttentionLayer::own_shape`]) — or MLA; its window
//!   (sliding or chunked, with its size; none for a full-attention layer); the sparse
//!   indexer; the output gate, sinks, projection biases, q/k norm and value norm.
//! * **FFN**: the MoE ([`Moe`], its routed and shared experts, router and their
//!   activation, biases, scales and branch norms) or a dense FFN of its width; both use the
//!   model's activation ([`ExpertActivation`]).
//! * **Norms** ([`Norms`]): the hidden-width norms of the layer (2, 4 with post norms, 1 in
//!   a one-block layer), RMSNorm or, with a bias, LayerNorm. The q/k and value norms are the
//!   attention's, the MoE's branch norms the MoE's, MLA's latent norms MLA's.
//! * **Executions**: a layer runs once per forward pass, `repeats` times inside the loop
//!   ([`Stack::visits`]); [`Stack::execution_order`] lists the executions in order, and
//!   [`Stack::executions`] counts them (`layers + (repeats − 1)·span`).
//! * **Kinds**: layers with equal descriptions form one [`LayerKind`], with its physical
//!   layers and its executions: what a count per physical layer (parameters) or per
//!   execution (FLOPs, KV cache, activations) multiplies by. Kinds are listed in the order
//!   of their first layer.
//! * **Outside the stack**: the embedding, the final norm and the LM head; the MTP modules
//!   ([`Stack::mtp`]) describe their block as a [`Layer`] (full attention, the last
//!   layer's FFN: dense after a dense last layer, else the MoE).
//! * What the description holds that a consumer does not handle is [`super::capability`]'s
//!   table, with its one refusal.

use serde::Serialize;

use super::capability::Feature;
use super::{
    AttentionBias, Counting, ExpertActivation, Indexer, Mixer, Mla, Model, Moe, QkNorm, WindowKind,
};
use crate::error::Result;

/// The model as it executes (module docs).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Stack {
    /// The residual stream's width.
    hidden: u64,
    /// The distinct layers, in the order of their first physical layer.
    kinds: Vec<LayerKind>,
    /// Each physical layer's lists, as a key of `kind_of` ([`Listed::from_key`]).
    layers: Vec<u8>,
    /// The kind (an index into `kinds`) of each key of `layers` (an index of `kinds`,
    /// which serialise).
    #[serde(skip)]
    kind_of: [u8; 64],
    /// The looped block, if any.
    looping: Option<LoopBlock>,
    /// Layer executions per forward pass.
    executions: u64,
    /// The MTP modules, if the model has any.
    mtp: Option<Mtp>,
    /// Whether the LM head has a bias (outside the stack; a feature of the model).
    lm_head_bias: bool,
    /// The model's MoE FFN, which its MoE layers run (a feature of the model's even where
    /// every layer is dense).
    moe: Moe,
}

/// Layers with one description: how many, and how often they run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LayerKind {
    /// The description.
    pub layer: Layer,
    /// Physical layers of this kind.
    pub physical: u64,
    /// Their executions per forward pass (a looped one counts each visit).
    pub executions: u64,
}

/// One layer as it executes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Layer {
    /// The token mixer (`None`: an FFN-only layer).
    pub mixer: Option<TokenMixer>,
    /// The FFN (`None`: a mixer-only layer).
    pub ffn: Option<Ffn>,
    /// The layer's hidden-width norms.
    pub norms: Norms,
}

/// A layer's token mixer.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenMixer {
    /// Attention, with a KV cache per token.
    Attention(AttentionLayer),
    /// A recurrent mixer (Gated DeltaNet, Mamba-2), with a state per sequence.
    Recurrent(Mixer),
}

/// A layer's attention block.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AttentionLayer {
    /// Its projections' and core's shape.
    pub shape: AttentionShape,
    /// Whether the shape is the layer's own (`[model.full_attention]`, Gemma 4's
    /// full-attention layers), not the model's `heads`, `kv_heads` and `head_dim`.
    pub own_shape: bool,
    /// The keys a query attends, when bounded (`None`: every earlier key of its document).
    pub window: Option<AttentionWindow>,
    /// A sparse attention indexer choosing the keys the core attends.
    pub indexer: Option<Indexer>,
    /// An output gate from the query projection.
    pub gate: bool,
    /// One learned logit per head in every softmax.
    pub sinks: bool,
    /// Biases on the projections.
    pub bias: AttentionBias,
    /// Norms of the queries and keys.
    pub qk_norm: QkNorm,
    /// A norm without a scale on the values.
    pub v_norm: bool,
    /// The head dimensions RoPE rotates, where it concatenates the rest back
    /// ([`Model::rope_dim`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rope_dim: Option<u64>,
    /// No RoPE in this layer ([`Model::nope`]), with or without the queries' temperature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nope: Option<Temperature>,
}

/// A NoPE layer's queries: scaled by a temperature of each position, or not
/// ([`crate::model::Nope::temperature`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Temperature {
    /// Whether the queries are scaled.
    pub scaled: bool,
}

/// The shape of an attention block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AttentionShape {
    /// Grouped-query attention.
    Gqa {
        /// Query heads.
        heads: u64,
        /// Key/value heads.
        kv_heads: u64,
        /// Width of a head (queries, keys and values).
        head_dim: u64,
        /// Whether the values are the key projection (no value projection).
        k_eq_v: bool,
    },
    /// Multi-head latent attention.
    Mla {
        /// Query heads (each with its own keys and values).
        heads: u64,
        /// Its ranks and per-head widths.
        mla: Mla,
    },
}

impl AttentionShape {
    /// Query heads.
    pub fn heads(&self) -> u64 {
        match self {
            AttentionShape::Gqa { heads, .. } | AttentionShape::Mla { heads, .. } => *heads,
        }
    }

    /// Per-head `(query/key, value)` widths: `(d, d)` for GQA, `(d_n + d_r, d_v)` for MLA.
    pub fn head_widths(&self) -> (u64, u64) {
        match self {
            AttentionShape::Gqa { head_dim, .. } => (*head_dim, *head_dim),
            AttentionShape::Mla { mla, .. } => (
                mla.qk_nope_head_dim.saturating_add(mla.qk_rope_head_dim),
                mla.v_head_dim,
            ),
        }
    }
}

/// The keys a windowed layer's query attends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct AttentionWindow {
    /// Sliding or chunked.
    pub kind: WindowKind,
    /// Its length in tokens.
    pub size: u64,
}

/// A layer's FFN.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ffn {
    /// The Mixture-of-Experts FFN.
    Moe(Moe),
    /// One dense FFN.
    Dense {
        /// Its width.
        width: u64,
        /// Its activation (the model's).
        activation: ExpertActivation,
    },
}

impl Ffn {
    /// The FFN's activation.
    pub fn activation(&self) -> ExpertActivation {
        match self {
            Ffn::Moe(m) => m.activation,
            Ffn::Dense { activation, .. } => *activation,
        }
    }
}

/// A layer's hidden-width norms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Norms {
    /// How many: 2 (before the mixer and the FFN), 4 with post norms, 1 in a one-block
    /// layer.
    pub count: u64,
    /// Whether they carry a bias (LayerNorm instead of RMSNorm).
    pub bias: bool,
    /// Whether two of them norm the mixer's and the FFN's outputs (post norms).
    pub post: bool,
}

/// A contiguous block of physical layers executed `repeats` times.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct LoopBlock {
    /// Its first layer, 0-based.
    pub first: usize,
    /// Its layers.
    pub span: usize,
    /// Its executions.
    pub repeats: u64,
    /// The scale of each sub-layer's residual update inside it ([`super::Loop`]).
    pub residual_scale: f64,
}

/// The multi-token-prediction modules.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Mtp {
    /// How many.
    pub modules: u64,
    /// The block of each: full attention (with the model's indexer) and the last layer's FFN
    /// (the dense FFN after a dense last layer, else the MoE), two norms.
    pub layer: Layer,
}

/// What the layer lists of a model say of one physical layer.
#[derive(Debug, Clone, Copy, Default)]
struct Listed {
    dense: bool,
    windowed: bool,
    recurrent: bool,
    mixer_only: bool,
    ffn_only: bool,
    nope: bool,
}

impl Stack {
    /// The stack of a validated `model` (module docs); an error only if its executions
    /// overflow.
    pub fn of(model: &Model) -> Result<Self> {
        let executions = model.checked_executions()?;
        let looping = model.looping.as_ref().map(|l| LoopBlock {
            first: l.first.saturating_sub(1) as usize,
            span: l.span as usize,
            repeats: l.repeats,
            residual_scale: l.residual_scale(),
        });
        // Each layer's lists as a key below 64 ([`Listed`]); the layers of one key are
        // described once, and keys whose layers are described alike are one kind (the
        // search resolves a stack per candidate: this costs a pass over the keys and one
        // description per key).
        let layers = listed(model);
        let (lo, hi, extra) = looping.map_or((0, 0, 0), |l| {
            (l.first, l.first + l.span, l.repeats.saturating_sub(1))
        });
        let (mut physical, mut looped) = ([0u64; 64], [0u64; 64]);
        let mut order = Vec::with_capacity(4);
        for (i, &key) in layers.iter().enumerate() {
            let key = usize::from(key);
            if physical[key] == 0 {
                order.push(key);
            }
            physical[key] += 1;
            looped[key] += u64::from((lo..hi).contains(&i));
        }
        let mut kinds: Vec<LayerKind> = Vec::with_capacity(order.len());
        let mut kind_of = [0u8; 64];
        for key in order {
            let layer = describe(model, Listed::from_key(key));
            let runs = physical[key].saturating_add(looped[key].saturating_mul(extra));
            let k = match kinds.iter().position(|k| k.layer == layer) {
                Some(k) => {
                    kinds[k].physical += physical[key];
                    kinds[k].executions = kinds[k].executions.saturating_add(runs);
                    k
                }
                None => {
                    kinds.push(LayerKind {
                        layer,
                        physical: physical[key],
                        executions: runs,
                    });
                    kinds.len() - 1
                }
            };
            kind_of[key] = k as u8;
        }
        // An MTP module's FFN is the last layer's, as Megatron-Core builds it (its MTP block
        // takes the decoder's last layer spec): dense after a dense last layer, else the MoE.
        let last = layers.last().map(|&k| Listed::from_key(usize::from(k)));
        let mtp_ffn = match (last, &model.dense) {
            (Some(l), Some(d)) if l.dense && !l.mixer_only => Ffn::Dense {
                width: d.ffn,
                activation: model.moe.activation,
            },
            _ => Ffn::Moe(model.moe.clone()),
        };
        let mtp = (model.mtp_layers > 0).then(|| Mtp {
            modules: model.mtp_layers,
            layer: Layer {
                mixer: Some(TokenMixer::Attention(attention(model, false, false))),
                ffn: Some(mtp_ffn),
                norms: Norms {
                    count: 2,
                    bias: model.norm_bias,
                    post: false,
                },
            },
        });
        Ok(Self {
            hidden: model.hidden,
            kinds,
            layers,
            kind_of,
            looping,
            executions,
            mtp,
            lm_head_bias: model.lm_head_bias,
            moe: model.moe.clone(),
        })
    }

    /// The residual stream's width.
    pub fn hidden(&self) -> u64 {
        self.hidden
    }

    /// Parameters of one hidden-width norm: `hidden`, twice that with a bias (LayerNorm).
    pub fn norm_params(&self) -> u64 {
        match self.kinds.first() {
            Some(k) if k.layer.norms.bias => self.hidden.saturating_mul(2),
            _ => self.hidden,
        }
    }

    /// The distinct layers with their physical layers and executions.
    pub fn kinds(&self) -> &[LayerKind] {
        &self.kinds
    }

    /// The kind of the layers with key `key` ([`Listed::from_key`]).
    fn kind_of(&self, key: u8) -> usize {
        usize::from(self.kind_of[usize::from(key) % 64])
    }

    /// The description of the layers with key `key`.
    fn kind_layer(&self, key: u8) -> &Layer {
        &self.kinds[self.kind_of(key)].layer
    }

    /// Physical layers.
    pub fn physical(&self) -> u64 {
        self.layers.len() as u64
    }

    /// Layer executions per forward pass.
    pub fn executions(&self) -> u64 {
        self.executions
    }

    /// Each physical layer, in order.
    pub fn layers(&self) -> impl DoubleEndedIterator<Item = &Layer> + ExactSizeIterator + '_ {
        self.layers.iter().map(|&k| self.kind_layer(k))
    }

    /// Physical layer `i` (0-based).
    pub fn layer(&self, i: usize) -> Option<&Layer> {
        self.layers.get(i).map(|&k| self.kind_layer(k))
    }

    /// The looped block, if any.
    pub fn looping(&self) -> Option<LoopBlock> {
        self.looping
    }

    /// How many times physical layer `i` (0-based) runs per forward pass.
    pub fn visits(&self, i: usize) -> u64 {
        match self.looping {
            Some(l) if i >= l.first && i < l.first.saturating_add(l.span) => l.repeats,
            _ => 1,
        }
    }

    /// The physical layers (0-based) in the order they execute.
    pub fn execution_order(&self) -> impl Iterator<Item = usize> + '_ {
        let n = self.layers.len();
        let (first, end, repeats) = match self.looping {
            Some(l) => (l.first, (l.first + l.span).min(n), l.repeats as usize),
            None => (n, n, 1),
        };
        (0..first)
            .chain((0..repeats).flat_map(move |_| first..end))
            .chain(end..n)
    }

    /// The kinds of the physical layers `first..=last` (1-based), with those layers'
    /// counts and executions only (a pipeline stage's), in the order of their first layer.
    pub fn kinds_within(&self, first: u64, last: u64) -> Vec<LayerKind> {
        let mut out: Vec<(usize, LayerKind)> = Vec::new();
        for i in first.saturating_sub(1)..last.min(self.physical()) {
            let (i, k) = (i as usize, self.kind_of(self.layers[i as usize]));
            let visits = self.visits(i);
            match out.iter_mut().find(|(j, _)| *j == k) {
                Some((_, kind)) => {
                    kind.physical += 1;
                    kind.executions = kind.executions.saturating_add(visits);
                }
                None => out.push((
                    k,
                    LayerKind {
                        layer: self.kinds[k].layer.clone(),
                        physical: 1,
                        executions: visits,
                    },
                )),
            }
        }
        out.into_iter().map(|(_, k)| k).collect()
    }

    /// The multi-token-prediction modules, if the model has any (counted only under
    /// `[counting] mtp`).
    pub fn mtp(&self) -> Option<&Mtp> {
        self.mtp.as_ref()
    }

    /// The attention blocks of the stack's kinds, with their kinds.
    pub fn attention(&self) -> impl Iterator<Item = (&AttentionLayer, &LayerKind)> + '_ {
        self.kinds.iter().filter_map(|k| match &k.layer.mixer {
            Some(TokenMixer::Attention(a)) => Some((a, k)),
            _ => None,
        })
    }

    /// The attention of the layers with the model's own shape (every attention layer but
    /// `[model.full_attention]`'s), or the first attention layer's when all have their own.
    pub fn model_attention(&self) -> Option<&AttentionLayer> {
        let mut all = self.attention().map(|(a, _)| a);
        let first = all.next()?;
        Some(if first.own_shape {
            all.find(|a| !a.own_shape).unwrap_or(first)
        } else {
            first
        })
    }

    /// The recurrent mixer of the stack's recurrent layers, if it has any.
    pub fn recurrent(&self) -> Option<Mixer> {
        self.kinds.iter().find_map(|k| match &k.layer.mixer {
            Some(TokenMixer::Recurrent(m)) => Some(*m),
            _ => None,
        })
    }

    /// The window of the stack's windowed layers, if it has any.
    pub fn window(&self) -> Option<AttentionWindow> {
        self.attention().find_map(|(a, _)| a.window)
    }

    /// The indexer of the stack's attention, if it has one.
    pub fn indexer(&self) -> Option<&Indexer> {
        self.attention().find_map(|(a, _)| a.indexer.as_ref())
    }

    /// The model's MoE FFN, which its MoE layers (and MTP modules) run.
    pub fn moe(&self) -> &Moe {
        &self.moe
    }

    /// The activation of the stack's FFNs (one per model), if it has any FFN.
    pub fn activation(&self) -> Option<ExpertActivation> {
        (self.layers()).find_map(|l| l.ffn.as_ref().map(Ffn::activation))
    }

    /// The attention layers whose shape is their own ([`AttentionLayer::own_shape`]): the
    /// search keeps their shape, whatever the knobs of the model's.
    pub fn own_shapes(&self) -> impl Iterator<Item = &AttentionLayer> + '_ {
        self.attention().map(|(a, _)| a).filter(|a| a.own_shape)
    }

    /// What a searched shape's query heads must be a multiple of: the key/value heads of
    /// every attention layer of its own shape (their least common multiple; 1 without).
    pub fn heads_multiple(&self) -> u64 {
        self.own_shapes().fold(1, |m, a| match a.shape {
            AttentionShape::Gqa { kv_heads, .. } if kv_heads > 0 => {
                let gcd = |(mut x, mut y): (u64, u64)| {
                    while y != 0 {
                        (x, y) = (y, x % y);
                    }
                    x
                };
                m / gcd((m, kv_heads)) * kv_heads
            }
            _ => m,
        })
    }

    /// Whether the KV cache holds a part the model's key width (or MLA's latent rank) does
    /// not scale: MLA's RoPE key, attention layers of their own shape, recurrent state.
    pub fn kv_beyond_key_width(&self) -> bool {
        let mla = (self.attention()).any(|(a, _)| matches!(a.shape, AttentionShape::Mla { .. }));
        mla || self.own_shapes().next().is_some() || self.recurrent().is_some()
    }

    /// Whether a count depends on the query heads apart from the query width: attention
    /// sinks (a logit per head), or layers of their own head width (their queries are
    /// `heads` of it).
    pub fn counts_per_head(&self) -> bool {
        (self.attention()).any(|(a, _)| a.sinks || a.own_shape)
    }

    /// The architecture features the stack holds, in [`Feature::ALL`]'s order
    /// ([`super::capability`]).
    pub fn features(&self) -> Vec<Feature> {
        Feature::ALL.into_iter().filter(|&f| self.has(f)).collect()
    }

    /// [`Stack::features`] as the counts see them under `counting`: without the MTP
    /// modules unless `[counting] mtp` counts them.
    pub fn features_under(&self, counting: &Counting) -> Vec<Feature> {
        let mut out = self.features();
        if !counting.mtp {
            out.retain(|&f| f != Feature::Mtp);
        }
        out
    }

    /// Whether the stack holds `feature`.
    pub fn has(&self, feature: Feature) -> bool {
        let mut layers =
            (self.kinds.iter().map(|k| &k.layer)).chain(self.mtp.as_ref().map(|m| &m.layer));
        match feature {
            Feature::Mtp => self.mtp.is_some(),
            Feature::LmHeadBias => self.lm_head_bias,
            // The MoE's own flags are the model's, whichever layers run it.
            Feature::RouterBias => self.moe.router_bias,
            Feature::ExpertBias => self.moe.expert_bias,
            Feature::BranchNorms => self.moe.branch_norms,
            Feature::RouterScale => self.moe.router_scale,
            Feature::Jitter => self.moe.jitter.is_some(),
            _ => layers.any(|l| feature.in_layer(l)),
        }
    }
}

impl Listed {
    /// The lists a key of [`listed`] names (bits: dense, windowed, recurrent, mixer-only,
    /// FFN-only, NoPE).
    fn from_key(key: usize) -> Self {
        let on = |bit: usize| key >> bit & 1 == 1;
        Self {
            dense: on(0),
            windowed: on(1),
            recurrent: on(2),
            mixer_only: on(3),
            ffn_only: on(4),
            nope: on(5),
        }
    }
}

/// What `m`'s layer lists say of each physical layer, as [`Listed::from_key`]'s keys.
fn listed(m: &Model) -> Vec<u8> {
    let mut out = vec![0u8; m.layers as usize];
    let lists = [
        m.dense.as_ref().map(|d| &d.layers),
        m.window.as_ref().map(|w| &w.layers),
        m.recurrent.as_ref().map(|r| &r.layers),
        m.blocks.as_ref().map(|b| &b.mixer_only),
        m.blocks.as_ref().map(|b| &b.ffn_only),
        m.nope.as_ref().map(|n| &n.layers),
    ];
    for (bit, list) in lists.into_iter().enumerate() {
        for &l in list.into_iter().flatten() {
            if let Some(x) = out.get_mut((l as usize).wrapping_sub(1)) {
                *x |= 1 << bit;
            }
        }
    }
    out
}

/// The description of a layer of `m` its lists describe as `l`.
fn describe(m: &Model, l: Listed) -> Layer {
    let mixer = match (l.ffn_only, l.recurrent, &m.recurrent) {
        (true, _, _) => None,
        (false, true, Some(r)) => Some(TokenMixer::Recurrent(r.mixer)),
        _ => Some(TokenMixer::Attention(attention(m, l.windowed, l.nope))),
    };
    let ffn = match (l.mixer_only, l.dense, &m.dense) {
        (true, _, _) => None,
        (false, true, Some(d)) => Some(Ffn::Dense {
            width: d.ffn,
            activation: m.moe.activation,
        }),
        _ => Some(Ffn::Moe(m.moe.clone())),
    };
    let one_block = l.mixer_only || l.ffn_only;
    Layer {
        mixer,
        ffn,
        norms: Norms {
            count: match (one_block, m.post_norms) {
                (true, _) => 1,
                (false, true) => 4,
                (false, false) => 2,
            },
            bias: m.norm_bias,
            post: m.post_norms && !one_block,
        },
    }
}

/// The attention of a layer of `m`: windowed, or full (with `[model.full_attention]`'s
/// shape when the model gives one); without RoPE (`nope`), without Llama-4's L2 q/k norm.
fn attention(m: &Model, windowed: bool, nope: bool) -> AttentionLayer {
    let own = m.full_attention.as_ref().filter(|_| !windowed);
    let shape = match (&m.mla, own) {
        (Some(a), _) => AttentionShape::Mla {
            heads: m.heads,
            mla: a.clone(),
        },
        (None, Some(fa)) => AttentionShape::Gqa {
            heads: m.heads,
            kv_heads: fa.kv_heads,
            head_dim: fa.head_dim,
            k_eq_v: fa.k_eq_v,
        },
        (None, None) => AttentionShape::Gqa {
            heads: m.heads,
            kv_heads: m.kv_heads,
            head_dim: m.head_dim,
            k_eq_v: false,
        },
    };
    AttentionLayer {
        shape,
        own_shape: own.is_some(),
        window: m
            .window
            .as_ref()
            .filter(|_| windowed)
            .map(|w| AttentionWindow {
                kind: w.kind,
                size: w.size,
            }),
        indexer: m.indexer.clone(),
        gate: m.attention_gate,
        sinks: m.attention_sinks,
        bias: m.attention_bias,
        qk_norm: match m.qk_norm {
            QkNorm::L2 if nope => QkNorm::None,
            other => other,
        },
        v_norm: m.v_norm,
        rope_dim: m.rope_dim,
        nope: nope.then(|| Temperature {
            scaled: m.nope.as_ref().is_some_and(|n| n.temperature),
        }),
    }
}
