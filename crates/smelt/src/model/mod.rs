//! Model files: the architecture, the workload it is costed at, and what is counted.
//!
//! A model file is TOML with unknown keys denied, so a typo fails loudly:
//!
//! ```toml
//! name = "base-200m-s95"            # optional
//! [model]
//! layers = 12
//! hidden = 1280
//! heads = 16
//! kv_heads = 2
//! head_dim = 80
//! [model.moe]
//! experts = 192
//! top_k = 8
//! expert_ffn = 432
//! # shared_experts = 1, shared_ffn = 5632, shared_gate = true   # optional
//! # [model.dense]                    # optional: layers with a dense FFN instead
//! # layers = [1]                     # 1-based
//! # ffn = 5632
//! [model.loop]                       # optional: absent means not looped
//! first = 4                          # 1-based first looped layer
//! span = 6
//! repeats = 2
//! [workload]
//! context = 4096
//! mean_doc_len = 991                 # or doc_lengths = [[length, count], ...]
//! attention = "causal"               # or "dense"
//! kv_dtype_bytes = 2
//! ```
//!
//! [`ModelSpec::from_toml_str`] parses and validates; [`ModelSpec::validate`] checks a spec
//! built in code. Validation names the field and the rule it breaks, and bounds every size
//! (see the `MAX_*` constants) so that no count can silently wrap.
//!
//! A validated [`Model`] is resolved once into the model as it executes ([`Stack`]: one
//! description per layer, in execution order), which every consumer reads instead of the
//! fields above; which consumer handles which architecture feature, and the one refusal of
//! what it does not, is [`capability`]. The widths a lattice searches in the model's own
//! parts are its [`Knobs`].

pub mod capability;
mod changes;
mod knobs;
mod mixer;
mod moe;
mod recompute;
mod rope;
mod router;
mod stack;
mod training;
pub(crate) mod validate;
mod workload;

pub use capability::{Consumer, Feature};
pub use changes::WorkloadChanges;
pub use knobs::Knobs;
pub(crate) use mixer::{Budget as MixerBudget, MixerWords, RecurrentBlock};
pub use mixer::{DELTA_RULE_CHUNK, GatedDeltaNet, Mamba2, Mixer, Recurrent};
pub use moe::{ExpertActivation, Jitter, Moe};
pub use recompute::{RecomputeModule, RecomputeModules};
pub use rope::{Nope, QkNorm};
pub use router::{Router, RouterGroups};
pub use stack::{
    AttentionLayer, AttentionShape, AttentionWindow, Ffn, Layer, LayerKind, LoopBlock, Mtp, Norms,
    Stack, Temperature, TokenMixer,
};
pub use training::{MAX_SPLIT_SEARCH, Split, Training};
pub use workload::{ActivationPolicy, Attention, Counting, KvCount, Workload};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::names::named_enum;
use crate::strict_toml::FileKind;

/// Largest accepted width (`hidden`, `head_dim`, `expert_ffn`, `shared_ffn`).
pub const MAX_WIDTH: u64 = 1 << 20;
/// Largest accepted count of layers, heads, shared experts or `top_k`.
pub const MAX_COUNT: u64 = 1 << 16;
/// Largest accepted number of routed experts per layer.
pub const MAX_EXPERTS: u64 = 1 << 20;
/// Largest accepted loop repeat count.
pub const MAX_REPEATS: u64 = 1 << 10;
/// Largest accepted vocabulary.
pub const MAX_VOCAB: u64 = 1 << 24;
/// Largest accepted context (and so document) length in tokens.
pub const MAX_CONTEXT: u64 = 1 << 24;
/// Largest accepted number of tokens described by a document-length histogram.
pub const MAX_HISTOGRAM_TOKENS: u64 = 1 << 50;

/// A model file: architecture, workload and counting options.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// Optional display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The architecture.
    pub model: Model,
    /// What the attention cost and KV cache are evaluated at.
    pub workload: Workload,
    /// What is counted beyond the non-embedding defaults.
    #[serde(default, skip_serializing_if = "Counting::is_default")]
    pub counting: Counting,
    /// A training recipe and parallel layout (`[training]`): the static and per-GPU
    /// training memory are reported only when it is given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub training: Option<Training>,
}

/// A decoder-only, pre-norm MoE Transformer: every layer is GQA attention followed by the
/// MoE FFN, or a dense SwiGLU FFN in the layers `dense` lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// Physical layers `L`.
    pub layers: u64,
    /// Hidden size `H` (the residual stream width).
    pub hidden: u64,
    /// Query heads.
    pub heads: u64,
    /// Key/value heads; must divide `heads` (GQA).
    pub kv_heads: u64,
    /// Width of one head. The query width `heads * head_dim` need not equal `hidden`.
    pub head_dim: u64,
    /// Vocabulary size; only used when `[counting]` counts embeddings or the LM head.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub vocab: u64,
    /// Whether the LM head shares the embedding matrix (counted once when both are counted).
    #[serde(default, skip_serializing_if = "is_false")]
    pub tie_embeddings: bool,
    /// RMSNorm on queries and keys: parameters only (norms cost no counted FLOPs).
    #[serde(default, skip_serializing_if = "QkNorm::is_none")]
    pub qk_norm: QkNorm,
    /// Biases on the attention projections: parameters only (bias adds cost no counted
    /// FLOPs).
    #[serde(default, skip_serializing_if = "AttentionBias::is_none")]
    pub attention_bias: AttentionBias,
    /// One learned logit per head added to every softmax (gpt-oss's attention sinks):
    /// `heads` parameters per layer, no counted FLOPs (the softmax is not counted).
    #[serde(default, skip_serializing_if = "is_false")]
    pub attention_sinks: bool,
    /// Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2) instead of GQA projections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mla: Option<Mla>,
    /// Layers whose queries attend a bounded window of keys (none when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<Window>,
    /// Layers without RoPE (Llama-4's `no_rope_layers`): read only by the Transformers
    /// activation policies ([`Nope`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nope: Option<Nope>,
    /// An output gate on the attention (Qwen3-Next, Qwen3.5): the query projection also
    /// produces a `heads·head_dim` gate, `sigmoid(gate)` multiplies the attention's output
    /// before `o_proj`: `hidden·heads·head_dim` parameters and as many multiply-adds per
    /// token (the sigmoid and the product are not counted).
    #[serde(default, skip_serializing_if = "is_false")]
    pub attention_gate: bool,
    /// Layers whose token mixer is a recurrent one (linear attention) instead of attention
    /// (none when absent): they hold a state per sequence, not a KV cache per token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recurrent: Option<Recurrent>,
    /// The full-attention layers' own key/value heads and head width (Gemma 4's
    /// `num_global_key_value_heads`, `global_head_dim`, `attention_k_eq_v`); absent, they
    /// have the model's. The full-attention layers are those neither windowed nor
    /// recurrent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub full_attention: Option<FullAttention>,
    /// An RMSNorm without a scale on the values (Gemma 4): no parameters and no counted
    /// FLOPs (norms are not counted); the activation memory, the training memory and the
    /// kernel plan do not describe it and refuse it by name ([`capability`]).
    #[serde(default, skip_serializing_if = "is_false")]
    pub v_norm: bool,
    /// RMSNorms on the attention's and the FFN's outputs before their residual adds
    /// (Gemma's `post_attention_layernorm`, `post_feedforward_layernorm`): two more
    /// hidden-width norms per layer, `2·hidden` parameters, no counted FLOPs.
    #[serde(default, skip_serializing_if = "is_false")]
    pub post_norms: bool,
    /// A sparse attention indexer on every layer (DeepSeek-V3.2, GLM-5): each query attends
    /// only the keys it selects (none when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub indexer: Option<Indexer>,
    /// Layers with a token mixer only or an FFN only (none when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocks: Option<Blocks>,
    /// The Mixture-of-Experts FFN of every layer not listed in `dense` (nor in
    /// `blocks.mixer_only`).
    pub moe: Moe,
    /// Layers whose FFN is one dense SwiGLU instead of the MoE (none when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense: Option<Dense>,
    /// The looped block, if any.
    #[serde(rename = "loop", default, skip_serializing_if = "Option::is_none")]
    pub looping: Option<Loop>,
    /// Multi-token-prediction modules (DeepSeek-V3's `num_nextn_predict_layers`), each a
    /// layer of full attention and the last layer's FFN (the MoE, or the dense FFN after a
    /// dense last layer): counted only when `[counting] mtp = true`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub mtp_layers: u64,
    /// LayerNorm with a bias instead of RMSNorm on every hidden-width norm (PhiMoE): the two
    /// per layer, the final one and an MTP module's three carry `2 * hidden` parameters
    /// instead of `hidden`; no counted FLOPs (norms are not counted). The q/k and latent
    /// norms are unaffected.
    #[serde(default, skip_serializing_if = "is_false")]
    pub norm_bias: bool,
    /// A bias on the LM head (PhiMoE's `lm_head_bias`): `vocab` parameters counted with the
    /// head whenever `[counting] lm_head` is on (a tied head shares its matrix, not its
    /// bias); no counted FLOPs.
    #[serde(default, skip_serializing_if = "is_false")]
    pub lm_head_bias: bool,
    /// RoPE that rotates the first `rope_dim` dimensions of each query and key head and
    /// concatenates the rest back (MiniMax-M2's `rotary_dim`, GLM-4.5's
    /// `partial_rotary_factor` times the head width; absent: the whole head,
    /// rotated in place). It changes no counted FLOPs, parameters or KV cache, only what a
    /// Transformers training step saves ([`crate::cost::transformers`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rope_dim: Option<u64>,
}

/// Multi-head latent attention (DeepSeek-V2): queries, keys and values are projected up
/// from low-rank latents, and only the key/value latent and one shared RoPE key are cached.
///
/// With `[model.mla]`, `model.kv_heads` equals `model.heads` and `model.head_dim` is the
/// query/key width of a head, `qk_nope_head_dim + qk_rope_head_dim`; `attention_bias` and
/// `qk_norm` stay off (the latents' own RMSNorms are counted here).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Mla {
    /// Rank of the query latent (`q_a_proj`, then `q_b_proj`); 0 for a plain query
    /// projection (DeepSeek-V2-Lite).
    #[serde(default)]
    pub q_lora_rank: u64,
    /// Rank of the key/value latent: what the KV cache holds per token and layer
    /// execution, besides the RoPE key.
    pub kv_lora_rank: u64,
    /// Per-head query/key width without RoPE.
    pub qk_nope_head_dim: u64,
    /// Per-head query/key width with RoPE (the key part is one, shared by the heads).
    pub qk_rope_head_dim: u64,
    /// Per-head value width.
    pub v_head_dim: u64,
    /// RoPE from one complex64 table (`freqs_cis`) rather than float `cos` and `sin`:
    /// DeepSeek-V2's Transformers class (`DeepseekV2Attention`). It changes no counted
    /// FLOPs or parameters, only what a Transformers training step saves
    /// ([`crate::cost::transformers`]); the import sets it for `deepseek_v2`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub complex_rope: bool,
}

/// A sparse attention indexer (DeepSeek-V3.2's lightning indexer, GLM-5's): on every layer,
/// `heads` small heads of width `head_dim` score every earlier key of the document, and the
/// attention core then runs on the `topk` best (all of them when there are fewer).
///
/// Its weights: `wq_b` from the query latent (`q_lora_rank x heads·head_dim`, so it needs
/// `[model.mla]` with `q_lora_rank > 0`), `wk` (`hidden x head_dim`), a LayerNorm on the key
/// (`2·head_dim`) and `weights_proj` (`hidden x heads`). Per query-key pair it costs
/// `heads·(head_dim + 1)` multiply-adds (the per-head dot products, then their weighted
/// sum). Its key, `head_dim` wide, is cached per token beside the latent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Indexer {
    /// Indexer heads (`index_n_heads`).
    pub heads: u64,
    /// Width of an indexer head and of the key it caches (`index_head_dim`).
    pub head_dim: u64,
    /// Keys each query attends (`index_topk`).
    pub topk: u64,
}

named_enum! {
    /// How a windowed layer bounds the keys a query attends.
    pub enum WindowKind: "window kind" {
        /// The last `size` keys of the document, the query's own included (Mistral,
        /// gpt-oss, Gemma).
        Sliding = "sliding",
        /// The keys of the query's own `size`-token chunk of the document, up to itself
        /// (Llama-4's chunked attention; chunks start at the document's first token).
        Chunked = "chunked",
    }
}

/// Layers with windowed attention; the others attend every earlier key of the document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Window {
    /// Sliding or chunked.
    pub kind: WindowKind,
    /// Window (or chunk) length in tokens.
    pub size: u64,
    /// 1-based indices of the windowed layers, strictly increasing.
    pub layers: Vec<u64>,
}

/// The full-attention layers' own attention shape (Gemma 4): `kv_heads` key/value heads of
/// width `head_dim`, and queries of `model.heads` heads of that width. With `k_eq_v` the
/// layer has no value projection: its values are its keys' projection (before the key
/// norm and RoPE), `hidden·kv_heads·head_dim` fewer parameters and as many fewer
/// multiply-adds per token; its cache still holds keys and values (they differ after their
/// norms), `2·kv_heads·head_dim` elements per token and execution.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FullAttention {
    /// Key/value heads of the full-attention layers; must divide `model.heads`.
    pub kv_heads: u64,
    /// Width of one head of the full-attention layers (queries, keys and values).
    pub head_dim: u64,
    /// Whether the values reuse the key projection (no `v_proj`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub k_eq_v: bool,
}

/// Layers that hold one block instead of a token mixer and an FFN (Nemotron-H, whose every
/// layer is one norm and one of a Mamba-2 mixer, attention, an MLP or a MoE): each listed
/// layer has one norm, not two.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Blocks {
    /// 1-based layers with a token mixer (attention, or the recurrent mixer when
    /// `[model.recurrent]` lists them) and no FFN, strictly increasing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mixer_only: Vec<u64>,
    /// 1-based layers with an FFN (the MoE, or the dense FFN when `[model.dense]` lists
    /// them) and no token mixer, strictly increasing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ffn_only: Vec<u64>,
}

/// Layers whose FFN is a dense SwiGLU of width `ffn` (3 matrices of `hidden x ffn`), with no
/// router, routed or shared experts: Qwen's `mlp_only_layers` and `decoder_sparse_step`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dense {
    /// 1-based indices of the dense layers, strictly increasing.
    pub layers: Vec<u64>,
    /// SwiGLU width of the dense FFN.
    pub ffn: u64,
}

/// A contiguous block of `span` layers starting at 1-based layer `first`, executed
/// `repeats` times back-to-back with shared weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Loop {
    /// 1-based index of the first looped layer.
    pub first: u64,
    /// Number of looped layers.
    pub span: u64,
    /// Executions of the block (1 = not looped).
    pub repeats: u64,
    /// Scale of each sub-layer residual update inside the block. No cost effect; part of
    /// the configuration a launcher builds. Default `1 / repeats` (SMELT's choice).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub residual_scale: Option<f64>,
}

impl Loop {
    /// The residual scale in force: the explicit one, or `1 / repeats`.
    pub fn residual_scale(&self) -> f64 {
        self.residual_scale
            .unwrap_or_else(|| 1.0 / self.repeats.max(1) as f64)
    }

    /// Extra layer executions the loop adds: `(repeats - 1) * span`, checked.
    pub fn extra_executions(&self) -> Result<u64> {
        crate::units::product(
            &[self.repeats.saturating_sub(1), self.span],
            "layer executions",
        )
    }
}

/// Biases on the attention projections, as some families use them. A bias add costs no
/// counted FLOPs; its parameters are counted with the attention.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttentionBias {
    /// No biases.
    #[default]
    None,
    /// Biases on the Q, K and V projections, not O (Qwen1.5/2):
    /// `(heads + 2 * kv_heads) * head_dim` parameters per layer.
    Qkv,
    /// Biases on Q, K, V and O (`attention_bias = true` in Qwen3-MoE and OLMoE):
    /// `(heads + 2 * kv_heads) * head_dim + hidden` parameters per layer.
    All,
}

impl AttentionBias {
    fn is_none(&self) -> bool {
        *self == AttentionBias::None
    }

    /// [`AttentionBias::All`] when `on`, else none (a family's `attention_bias = true`).
    pub fn all_if(on: bool) -> Self {
        if on {
            AttentionBias::All
        } else {
            AttentionBias::None
        }
    }
}

pub(crate) fn is_zero(v: &u64) -> bool {
    *v == 0
}

pub(crate) fn is_false(v: &bool) -> bool {
    !*v
}

impl Model {
    /// The model without its loop when the loop runs its block once with its residual
    /// updates unscaled (no loop at all: every layer once); otherwise the model.
    pub fn without_unit_loop(mut self) -> Self {
        if (self.looping.as_ref()).is_some_and(|l| l.repeats == 1 && l.residual_scale() == 1.0) {
            self.looping = None;
        }
        self
    }

    /// Layer executions per forward pass: `layers + (repeats - 1) * span`, checked (the
    /// count the cost model multiplies by).
    pub fn checked_executions(&self) -> Result<u64> {
        let extra = self
            .looping
            .as_ref()
            .map_or(Ok(0), Loop::extra_executions)?;
        crate::units::add(self.layers, extra, "layer executions")
    }

    /// [`Model::checked_executions`] where no error can be returned (a report's row): the
    /// same count for a validated model, whose sizes are bounded, and `u64::MAX` for one
    /// whose count overflows.
    pub fn executions(&self) -> u64 {
        self.checked_executions().unwrap_or(u64::MAX)
    }

    /// Parameters of one hidden-width norm: `hidden`, twice that with a bias.
    pub fn norm_params(&self) -> u64 {
        if self.norm_bias {
            self.hidden.saturating_mul(2)
        } else {
            self.hidden
        }
    }

    /// Physical layers with a recurrent token mixer.
    pub fn recurrent_layers(&self) -> u64 {
        self.recurrent.as_ref().map_or(0, |r| r.layers.len() as u64)
    }

    /// The 1-based layers with no FFN (`blocks.mixer_only`).
    pub fn mixer_only(&self) -> &[u64] {
        self.blocks.as_ref().map_or(&[][..], |b| &b.mixer_only[..])
    }

    /// The 1-based layers with no token mixer (`blocks.ffn_only`).
    pub fn ffn_only(&self) -> &[u64] {
        self.blocks.as_ref().map_or(&[][..], |b| &b.ffn_only[..])
    }

    /// Physical layers with an attention block: neither recurrent nor FFN-only.
    pub fn attention_layers(&self) -> u64 {
        self.layers - self.recurrent_layers() - self.ffn_only().len() as u64
    }

    /// Physical layers with the MoE FFN: neither dense nor mixer-only.
    pub fn moe_layers(&self) -> u64 {
        self.layers - self.dense_layers() - self.mixer_only().len() as u64
    }

    /// Executions of recurrent layers per forward pass (a looped one counts each visit).
    pub fn recurrent_executions(&self) -> u64 {
        self.recurrent
            .as_ref()
            .map_or(0, |r| self.executions_of(&r.layers))
    }

    /// Physical layers with a windowed attention.
    pub fn windowed_layers(&self) -> u64 {
        self.window.as_ref().map_or(0, |w| w.layers.len() as u64)
    }

    /// Physical layers with full attention: neither windowed nor recurrent (validated
    /// disjoint, so this does not wrap for a validated model).
    pub fn full_attention_layers(&self) -> u64 {
        self.layers
            .saturating_sub(self.windowed_layers())
            .saturating_sub(self.recurrent_layers())
    }

    /// Physical layers with a dense FFN.
    pub fn dense_layers(&self) -> u64 {
        self.dense.as_ref().map_or(0, |d| d.layers.len() as u64)
    }

    /// Executions of dense layers per forward pass (a looped dense layer counts each visit).
    pub fn dense_executions(&self) -> u64 {
        self.dense
            .as_ref()
            .map_or(0, |d| self.executions_of(&d.layers))
    }

    /// How many times the 1-based `layer` runs in one forward pass: `repeats` inside the
    /// loop, once outside it.
    pub fn visits(&self, layer: u64) -> u64 {
        match &self.looping {
            Some(l) if layer >= l.first && layer < l.first.saturating_add(l.span) => l.repeats,
            _ => 1,
        }
    }

    /// The executions of the listed 1-based layers (each listed once) in one forward pass,
    /// counted per layer, not per execution, so it takes time in the list's length only
    /// (saturating, as [`Model::executions`]).
    pub fn executions_of(&self, layers: &[u64]) -> u64 {
        layers
            .iter()
            .fold(0u64, |n, &l| n.saturating_add(self.visits(l)))
    }

    /// Query width `heads * head_dim`.
    pub fn q_width(&self) -> u64 {
        self.heads.saturating_mul(self.head_dim)
    }

    /// Key (= value) width `kv_heads * head_dim`.
    pub fn kv_width(&self) -> u64 {
        self.kv_heads.saturating_mul(self.head_dim)
    }

    /// The order in which physical layers (0-based) execute in one forward pass.
    pub fn execution_order(&self) -> Vec<u64> {
        let mut order = Vec::new();
        match &self.looping {
            None => order.extend(0..self.layers),
            Some(l) => {
                let start = l.first - 1;
                let end = start + l.span;
                order.extend(0..start);
                for _ in 0..l.repeats {
                    order.extend(start..end);
                }
                order.extend(end..self.layers);
            }
        }
        order
    }
}

impl ModelSpec {
    /// Parses and validates a model file's text.
    pub fn from_toml_str(text: &str) -> Result<Self> {
        let spec: ModelSpec = crate::strict_toml::from_toml(text)
            .map_err(|e| FileKind::Model.foreign_in(text, false).unwrap_or(e))?;
        spec.validate()?;
        Ok(spec)
    }

    /// Parses and validates a model spec given as JSON (the model file's structure).
    pub fn from_json_str(text: &str) -> Result<Self> {
        let spec: ModelSpec = crate::strict_toml::from_json(text)
            .map_err(|e| FileKind::Model.foreign_in(text, true).unwrap_or(e))?;
        spec.validate()?;
        Ok(spec)
    }

    /// The workload an imported `config.json` is costed at unless told otherwise: 4096-token
    /// packed sequences, causal attention at a mean document length of 991 tokens, bf16 KV.
    pub fn default_workload() -> Workload {
        Workload {
            context: 4096,
            mean_doc_len: Some(991),
            doc_lengths: None,
            attention: Attention::Causal,
            kv_dtype_bytes: 2,
        }
    }

    /// The spec as a model file (TOML), which [`ModelSpec::from_toml_str`] reads back.
    pub fn to_toml_string(&self) -> Result<String> {
        toml::to_string(self).map_err(|e| Error::serialize("the model file", e))
    }

    /// The fully-activated control (SMELT, Eq. 1): same shapes, not looped, `experts = top_k`.
    pub fn control(&self) -> ModelSpec {
        let mut c = self.clone();
        c.name = Some(format!(
            "control of {}",
            self.name.as_deref().unwrap_or("model")
        ));
        c.model.looping = None;
        c.model.moe.experts = c.model.moe.top_k;
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small model with every optional section.
    const SMALL: &str = r#"
name = "small"
[model]
layers = 4
hidden = 64
heads = 4
kv_heads = 1
head_dim = 16
qk_norm = "per_head"
[model.moe]
experts = 8
top_k = 2
expert_ffn = 32
shared_experts = 1
shared_ffn = 32
shared_gate = true
[model.dense]
layers = [1]
ffn = 128
[model.loop]
first = 2
span = 2
repeats = 2
[workload]
context = 256
doc_lengths = [[100, 2], [56, 1]]
attention = "dense"
"#;

    #[test]
    fn parses_and_round_trips() {
        let spec = ModelSpec::from_toml_str(SMALL).unwrap();
        assert_eq!(spec.workload.attention, Attention::Dense);
        assert_eq!(spec.workload.kv_dtype_bytes, 2);
        let text = spec.to_toml_string().unwrap();
        assert_eq!(ModelSpec::from_toml_str(&text).unwrap(), spec);
    }

    #[test]
    fn execution_order_repeats_the_block() {
        let mut spec = ModelSpec::from_toml_str(SMALL).unwrap();
        spec.model.layers = 5;
        spec.model.looping = Some(Loop {
            first: 2,
            span: 2,
            repeats: 3,
            residual_scale: None,
        });
        assert_eq!(
            spec.model.execution_order(),
            vec![0, 1, 2, 1, 2, 1, 2, 3, 4]
        );
        assert_eq!(spec.model.executions(), 9);
    }

    /// The executions of a set of layers counted per layer equal those counted along the
    /// execution order, for every loop placement and every subset of a 6-layer model.
    #[test]
    fn executions_of_layers_count_the_order() {
        let mut spec = ModelSpec::from_toml_str(SMALL).unwrap();
        spec.model.layers = 6;
        for (first, span, repeats) in [(1, 6, 4), (2, 2, 3), (3, 4, 2), (6, 1, 5), (1, 1, 1)] {
            spec.model.looping = Some(Loop {
                first,
                span,
                repeats,
                residual_scale: None,
            });
            let order = spec.model.execution_order();
            for mask in 0u32..64 {
                let layers: Vec<u64> = (1..=6).filter(|l| mask & (1 << (l - 1)) != 0).collect();
                let counted = order.iter().filter(|&&l| layers.contains(&(l + 1))).count();
                assert_eq!(spec.model.executions_of(&layers), counted as u64);
            }
        }
    }
}
