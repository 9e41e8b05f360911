//! What a training stack's log says: per-token training FLOPs under the formulas launchers
//! use, beside smelt's exact count, and the model FLOP utilisation ([`mfu`]) each implies.
//!
//! A study trains two models smelt proves compute-matched and then reads throughput and MFU
//! from its launcher's logs. Those logs count FLOPs by their own closed forms, which
//! disagree with each other and with what executes. Each [`Convention`] here reproduces its
//! source's formula term by term (the source is pinned to a commit), so that a log's figure
//! can be read against the exact one.
//!
//! # Conventions
//!
//! Every formula is per token, training (forward and backward, 3 × forward, 2 FLOPs per
//! multiply-add), with these symbols: `L` the **physical** layers (`model.layers`), `H`
//! the hidden size, `h` the query heads, `d` the head size, `q = h·d`, `kv = kv_heads·d`,
//! `s` the training sequence length (the workload's `context`), `N` the active
//! non-embedding parameters as smelt counts them ([`crate::cost::params`]: attention,
//! router, `top_k` routed and every shared expert, dense FFNs, norms, biases, sinks and
//! indexer; no embedding, LM head or MTP module), `V` the vocabulary.
//!
//! | convention | per-token training FLOPs | source |
//! |---|---|---|
//! | `exact` | smelt's count ([`mod@crate::cost`]): every layer execution, causal document-masked attention at `c̄`, windows, router, indexer | this crate |
//! | `megatron` | `18·H·(ffn·L_dense + (top_k·expert_ffn + shared)·L_moe) + L·(6·(H·(q+2kv) + q·H) + 6·q·s) + 6·H·V₁₂₈`; hybrids below | Megatron-LM `num_floating_point_operations` |
//! | `torchtitan` | `6·(N + V·H) + 6·L_attn·h·(2d)·s` | torchtitan `get_moe_model_nparams_and_flops` |
//! | `6n` | `6·N` | Kaplan et al. 2020, `C ≈ 6N` |
//! | `6n-attn` | `6·N + 12·L·h·d·s` | PaLM, Appendix B: `6N + 12·L·H·Q·T` |
//!
//! * **`megatron`**: Megatron-LM, `megatron/training/training.py`,
//!   `num_floating_point_operations` → `transformer_flops` at commit
//!   `d98e8a64ddf34856e74b24714e3bedb2f5a39553`
//!   (<https://github.com/NVIDIA/Megatron-LM/blob/d98e8a64ddf34856e74b24714e3bedb2f5a39553/megatron/training/training.py>),
//!   with its default BSHD batch: `total_real_tokens = batch·s` and
//!   `seqlen_squared_sum = batch·s²`, so the core attention is `6·q·s` per layer and token
//!   (`·s²/2` for the causal mask, `·2` for `QKᵀ` and `PV`, `·2` per multiply-add, `·3`).
//!   A packed THD batch passes the sub-sequences' `Σ L_i²` instead, which for documents of
//!   length `T` is this count with `T` for `s` in the core term.
//!   SwiGLU (`ffn_expansion_factor = 3`; 2, so `12·H`, for the ungated relu2 MLP, as
//!   without `--swiglu`); `shared = shared_experts·shared_ffn`
//!   (`moe_shared_expert_intermediate_size`); `L_moe`, `L_dense` from the layer pattern
//!   (`moe_layer_freq`, smelt's `[model.dense]`). With MLA the projections are
//!   `6·(q_term + r·(H + h·(d_n + d_v) + 1) + H·d_r + h·d_v·H)`, `q_term = H·h·(d_n + d_r)`
//!   without a query latent and `r_q·(H + h·(d_n + d_r) + 1)` with one, and the core
//!   `3·h·(d_n + d_r + d_v)·s`. With MTP counted (`[counting] mtp`), its modules join the
//!   layers (MoE ones when the last layer is MoE), add `6·(3H + 2H²)` each and one more
//!   logit term. The logit term uses the vocabulary padded to a multiple of 128
//!   (`make_vocab_size_divisible_by`, one tensor-parallel rank).
//!
//!   *Gated DeltaNet layers* (Qwen3-Next, Qwen3.5) are its GPT model's linear-attention
//!   variant (`experimental_attention_variant = "gated_delta_net"`, `linear_attention_freq`
//!   the recurrent layers): each is charged `6·(H·(2·K + 2·V + 2·n_v) + c·(2·K + V) +
//!   4·n_v·d_v² + H·V)` (`K`, `V` the key and value widths, `n_v` value heads of `d_v`, `c`
//!   taps) instead of the attention's projections and core; the attention output gate
//!   (`attention_output_gate`) adds `q` to the query projection, `6·H·q`.
//!
//!   *One-block or Mamba-2 layers* (Nemotron-H) exist only in its hybrid model
//!   (`is_hybrid_model`: a `hybrid_layer_pattern`), counted by `hybrid_flops`: each layer is
//!   read as the symbols of its blocks (`M` Mamba-2, `G` Gated DeltaNet, `*` attention, `-`
//!   dense MLP, `E` MoE; a layer holding both blocks is its mixer's symbol then its
//!   FFN's), and per token `3·(n_* ·(4·H·(q + kv) + 2·q·s) + n_- ·2m·H·ffn +
//!   n_E·2m·H·(top_k·expert_ffn + shared) + n_M·(2·H·(2·d_in + 2·g·N + n_h) + 7·d_in·N +
//!   2·d_in·H) + n_G·2·(H·(2·K + 2·V + 2·n_v) + c·(2·K + V) + 4·n_v·d_v² + H·V) +
//!   2·H·V₁₂₈)`, `m` 3 with SwiGLU and 2 without, `d_in = 2·H` (`mamba_layer_flops`'s, not
//!   the mixer's `heads·head_dim`), `g` groups of state `N`, `n_h` heads. It has no output
//!   gate, router, shared gate or MTP norms. MTP modules of a model with recurrent layers
//!   are refused (`counting.mtp`): Megatron counts them as layers of its pattern, and which
//!   mixer they hold is not in the model.
//! * **`torchtitan`**: torchtitan, `torchtitan/models/utils.py`,
//!   `get_moe_model_nparams_and_flops` at commit `b5bcd76c66d0acb1a08b176d9639425bc55e0b2a`
//!   (<https://github.com/pytorch/torchtitan/blob/b5bcd76c66d0acb1a08b176d9639425bc55e0b2a/torchtitan/models/utils.py>):
//!   `6·nparams_for_matmul + 6·num_full_attn·n_heads·head_dims·seq_len`, where
//!   `nparams_for_matmul` is every parameter but the embedding, routed experts scaled by
//!   `top_k / num_experts` (the LM head is in it, tied or not), `num_full_attn` = `L_attn`
//!   the layers with an attention block (neither recurrent nor FFN-only: a hybrid's linear
//!   attention layers leave `attention = None`) and `head_dims` the sum of the query/key and
//!   value head widths (`2·d`
//!   for GQA as `qwen3/model.py` passes it, `d_n + d_r + d_v` for MLA as
//!   `deepseek_v3/model.py` does). The dense `get_dense_model_nparams_and_flops` is the
//!   same formula with every parameter active.
//! * **`6n`**: 6 FLOPs per parameter per token (Kaplan et al., "Scaling Laws for Neural
//!   Language Models", arXiv 2001.08361, §2.1), `N` active and non-embedding, no attention
//!   core.
//! * **`6n-attn`**: PaLM (Chowdhery et al., arXiv 2204.02311, Appendix B), `6N + 12·L·H·Q·T`
//!   with `H` heads of width `Q` and `T = s`; for MLA `12·Q` reads `6·(d_n + d_r + d_v)`.
//!   PaLM has no hybrid: its `L` is every layer, recurrent and FFN-only ones included
//!   ([`Feature::RecurrentAsAttention`], [`Feature::OneBlockLayers`]).
//!
//! The LM-head terms (`megatron`'s logits, `torchtitan`'s `V·H`) are counted when the
//! model's `[counting]` counts the head, as the exact count does, so that a ratio compares
//! the conventions' layers; a launcher's log always counts them.
//!
//! **Loops.** A launcher's formula takes `num_layers` from the config, which holds the
//! *physical* layers, and parameters, which a loop does not add: every convention here
//! counts each physical layer once, whatever the loop. A looped model executing `X > L`
//! layers is therefore reported as cheaper than it is by about `L / X` of its layer FLOPs,
//! and the log calls it cheaper than the Baseline it was matched to
//! ([`pair`]; `smelt match --conventions`).
//!
//! What each convention leaves out, beyond loops, is [`Convention::ignores`]; what it
//! counts that smelt does not: `torchtitan`, `6n` and `6n-attn` count every parameter at 6
//! FLOPs per token, norms and biases included, and `megatron` counts MLA's latent norms
//! (the `+ 1` terms) and the MTP modules' norms.

mod counts;
mod mfu;

pub use counts::{
    ConventionCount, ConventionRefusal, CountsOrRefusals, LauncherFlops, LauncherPair, PairCount,
    counts_or_refusals, launcher_flops, pair,
};
pub use mfu::{Mfu, MfuRow, mfu};

use crate::cost::{budgets, params};
use crate::error::Result;
use crate::model::capability::refusal;
use crate::model::{
    Attention, AttentionLayer, AttentionShape, Consumer, Counting, Feature as Architecture, Ffn,
    Layer, Mixer, Model, ModelSpec, Stack, TokenMixer,
};
use crate::names::named_enum;
use crate::units::{Flops, add, product};

named_enum! {
    /// A way of counting per-token training FLOPs.
    pub enum Convention: "convention" {
        /// smelt's exact count, what the others are measured against.
        Exact = "exact",
        /// Megatron-LM's `num_floating_point_operations`.
        Megatron = "megatron",
        /// torchtitan's `get_moe_model_nparams_and_flops`.
        Torchtitan = "torchtitan",
        /// 6 × active non-embedding parameters.
        SixN = "6n",
        /// PaLM's `6N + 12·L·H·Q·T`.
        SixNAttn = "6n-attn",
    }
}

named_enum! {
    /// A feature of the model a convention does not see.
    pub enum Feature: "feature" {
        /// The loop: physical layers are counted once, not once per execution.
        Loops = "loops",
        /// The router's `H × experts` projection.
        Router = "router",
        /// Sliding and chunked windows: windowed layers counted as full ones.
        Windows = "windows",
        /// The document mask of packed sequences: every query attends the whole sequence.
        DocumentMask = "document mask",
        /// The causal mask: every query attends every key (the full square).
        CausalMask = "causal mask",
        /// The causal mask's diagonal: `s²/2` keys per sequence, not `s(s+1)/2`.
        CausalDiagonal = "causal diagonal",
        /// The attention core (`QKᵀ`, `PV`) altogether.
        AttentionCore = "attention core",
        /// A sparse attention indexer's scores (its projections count as parameters).
        IndexerScores = "indexer scores",
        /// The shared experts' sigmoid gate.
        SharedGate = "shared gate",
        /// Multi-token-prediction modules.
        Mtp = "mtp",
        /// The LM head.
        LmHead = "lm head",
        /// Recurrent (Gated DeltaNet, Mamba-2) layers' own work: their convolution and
        /// chunked scan are not counted, their projections only through `N`.
        RecurrentLayers = "recurrent layers",
        /// An attention term charged to every recurrent layer as if it were attention.
        RecurrentAsAttention = "attention on recurrent layers",
        /// Recurrent layers by a closed form of the launcher's own, not as the kernels run
        /// them: Megatron's Mamba-2 term takes the inner width as `2·hidden` whatever
        /// `heads·head_dim`, its scan as `7·d_in·state` per token and no convolution; its
        /// Gated DeltaNet term the delta rule as `4·n_v·d_v²` per token, not chunked.
        RecurrentClosedForm = "recurrent closed form",
        /// The attention output gate's projection, except through `N` (Megatron: in its
        /// hybrid model only; its GPT model counts it).
        AttentionGate = "attention gate",
        /// One-block layers (Nemotron-H's, `[model.blocks]`): an attention term charged to
        /// every FFN-only layer as if it held attention.
        OneBlockLayers = "one-block layers",
    }
}

impl Feature {
    /// Whether only a hybrid (Gated DeltaNet or Mamba-2 layers, gated attention, one-block
    /// layers) has this feature: a report lists it only for such a model.
    pub fn hybrid_only(self) -> bool {
        matches!(
            self,
            Feature::RecurrentLayers
                | Feature::RecurrentAsAttention
                | Feature::RecurrentClosedForm
                | Feature::AttentionGate
                | Feature::OneBlockLayers
        )
    }

    /// Whether `spec` has this feature (so that ignoring it changes its count).
    pub fn present_in(self, spec: &ModelSpec) -> bool {
        Stack::of(&spec.model).is_ok_and(|stack| self.present_in_stack(spec, &stack))
    }

    /// [`Feature::present_in`] of `spec`, whose model's stack is `stack`.
    fn present_in_stack(self, spec: &ModelSpec, stack: &Stack) -> bool {
        let (m, w) = (&spec.model, &spec.workload);
        match self {
            Feature::Loops => stack.looping().is_some_and(|lp| lp.repeats > 1),
            Feature::Router => true,
            Feature::Windows => stack.window().is_some(),
            Feature::DocumentMask => {
                w.doc_lengths.is_some() || w.mean_doc_len.is_some_and(|t| t < w.context)
            }
            Feature::CausalMask | Feature::CausalDiagonal => w.attention == Attention::Causal,
            Feature::AttentionCore => true,
            Feature::IndexerScores => stack.indexer().is_some(),
            Feature::SharedGate => m.moe.shared_gate && m.moe.shared_experts > 0,
            Feature::Mtp => spec.counting.mtp && m.mtp_layers > 0,
            Feature::LmHead => spec.counting.lm_head && m.vocab > 0,
            Feature::RecurrentLayers
            | Feature::RecurrentAsAttention
            | Feature::RecurrentClosedForm => stack.recurrent().is_some(),
            Feature::AttentionGate => stack.has(Architecture::AttentionGate),
            Feature::OneBlockLayers => stack.layers().any(|l| l.mixer.is_none()),
        }
    }
}

impl Convention {
    /// The conventions of training stacks, without the exact count.
    pub const LAUNCHERS: [Convention; 4] = [
        Convention::Megatron,
        Convention::Torchtitan,
        Convention::SixN,
        Convention::SixNAttn,
    ];

    /// The features of a model this convention does not count (module docs).
    pub fn ignores(self) -> &'static [Feature] {
        use Feature::*;
        match self {
            Convention::Exact => &[],
            Convention::Megatron => &[
                Loops,
                Router,
                Windows,
                DocumentMask,
                CausalDiagonal,
                IndexerScores,
                SharedGate,
                RecurrentClosedForm,
                AttentionGate,
            ],
            Convention::Torchtitan => &[
                Loops,
                Windows,
                DocumentMask,
                CausalMask,
                IndexerScores,
                Mtp,
                RecurrentLayers,
            ],
            Convention::SixN => &[
                Loops,
                AttentionCore,
                IndexerScores,
                Mtp,
                LmHead,
                RecurrentLayers,
            ],
            Convention::SixNAttn => &[
                Loops,
                Windows,
                DocumentMask,
                CausalMask,
                IndexerScores,
                Mtp,
                LmHead,
                RecurrentLayers,
                RecurrentAsAttention,
                OneBlockLayers,
            ],
        }
    }

    /// What of [`Convention::ignores`] `spec`'s count under this convention misses: the
    /// features it has, less the attention gate under Megatron's GPT model, which counts
    /// it.
    pub fn ignored_in(self, spec: &ModelSpec) -> Vec<Feature> {
        self.ignores_for(spec)
            .into_iter()
            .filter(|f| f.present_in(spec))
            .collect()
    }

    /// [`Convention::ignores`] for `spec`'s path through the formula: Megatron's GPT model
    /// counts the attention gate.
    fn ignores_for(self, spec: &ModelSpec) -> Vec<Feature> {
        let hybrid = Stack::of(&spec.model).is_ok_and(|s| megatron_is_hybrid(&s));
        let gpt = self == Convention::Megatron && !hybrid;
        (self.ignores().iter().copied())
            .filter(|&f| !(gpt && f == Feature::AttentionGate))
            .collect()
    }

    /// Where the formula comes from, pinned.
    pub fn source(self) -> &'static str {
        match self {
            Convention::Exact => "smelt's cost model (docs/conventions.md)",
            Convention::Megatron => {
                "Megatron-LM d98e8a64ddf34856e74b24714e3bedb2f5a39553, \
                 megatron/training/training.py, num_floating_point_operations"
            }
            Convention::Torchtitan => {
                "torchtitan b5bcd76c66d0acb1a08b176d9639425bc55e0b2a, \
                 torchtitan/models/utils.py, get_moe_model_nparams_and_flops"
            }
            Convention::SixN => "Kaplan et al. 2020 (arXiv 2001.08361), C = 6N",
            Convention::SixNAttn => "PaLM (arXiv 2204.02311), Appendix B, 6N + 12LHQT",
        }
    }
}

/// The per-token training FLOPs of `spec` under `convention`.
pub fn training_flops(convention: Convention, spec: &ModelSpec) -> Result<Flops> {
    spec.validate()?;
    let m = &spec.model;
    let stack = Stack::of(m)?;
    if convention != Convention::Exact
        && let Some(f) = Consumer::LauncherFlops.unhandled(&stack.features())
    {
        return Err(refusal(
            Consumer::LauncherFlops,
            Some(convention.as_str()),
            f.field(),
            f.words(),
        ));
    }
    let s = spec.workload.context;
    let n = active_non_embedding(m)?;
    let six =
        |x: u64| Ok::<_, crate::Error>(Flops::from_int(product(&[6, x], "flops.convention")?));
    match convention {
        Convention::Exact => Ok(budgets(spec)?.flops),
        Convention::Megatron => megatron(m, &stack, &spec.counting, s),
        Convention::Torchtitan => {
            // `num_full_attn`: the layers whose config has an attention block.
            let head = lm_head_params(m, &spec.counting)?;
            let attention = stack.layers().filter(|l| attention_of(l).is_some()).count();
            six(add(n, head, "flops.torchtitan")?)?.checked_add(full_square(
                &stack,
                attention as u64,
                s,
            )?)
        }
        Convention::SixN => six(n),
        // PaLM's `L`: every layer.
        Convention::SixNAttn => six(n)?.checked_add(full_square(&stack, stack.physical(), s)?),
    }
}

/// `N`: active parameters without embedding, LM head or MTP modules.
fn active_non_embedding(m: &Model) -> Result<u64> {
    let none = Counting {
        embeddings: false,
        lm_head: false,
        mtp: false,
        ..Counting::default()
    };
    Ok(params(m, &none)?.1.total()?.0)
}

/// The LM head's parameters when `counting` counts the head (tied or not, as the head's
/// matmul runs either way).
fn lm_head_params(m: &Model, counting: &Counting) -> Result<u64> {
    if !counting.lm_head {
        return Ok(0);
    }
    let bias = if m.lm_head_bias { m.vocab } else { 0 };
    add(
        product(&[m.vocab, m.hidden], "params.lm_head")?,
        bias,
        "params.lm_head",
    )
}

/// The attention of `layer`, if its mixer is attention.
fn attention_of(layer: &Layer) -> Option<&AttentionLayer> {
    match &layer.mixer {
        Some(TokenMixer::Attention(a)) => Some(a),
        _ => None,
    }
}

/// The model's attention (one shape per model, [`Consumer::LauncherFlops`]).
fn model_attention(stack: &Stack) -> Result<&AttentionLayer> {
    stack.model_attention().ok_or(crate::Error::Internal {
        message: "a validated model with no attention layer".to_owned(),
    })
}

/// The non-causal attention core of `layers` layers: `6·layers·h·(qk + v)·s`, with `qk + v`
/// one head's query/key plus value width (`2·d`, or MLA's `d_n + d_r + d_v`).
fn full_square(stack: &Stack, layers: u64, s: u64) -> Result<Flops> {
    let a = model_attention(stack)?;
    let (qk, v) = a.shape.head_widths();
    Ok(Flops::from_int(product(
        &[
            6,
            layers,
            a.shape.heads(),
            add(qk, v, "flops.convention")?,
            s,
        ],
        "flops.convention",
    )?))
}

/// Whether Megatron-LM builds `stack` as its hybrid model (`is_hybrid_model`: a
/// `hybrid_layer_pattern`), whose FLOPs are `hybrid_flops`: one-block layers and Mamba-2
/// mixers exist only there. Otherwise it is its GPT model (`transformer_flops`), Gated
/// DeltaNet layers its linear-attention variant.
fn megatron_is_hybrid(stack: &Stack) -> bool {
    stack.has(Architecture::Blocks) || stack.has(Architecture::Mamba2)
}

/// Megatron-LM's per-token count (module docs): `hybrid_flops` for its hybrid model,
/// `transformer_flops` otherwise, BSHD batches of `s` tokens.
fn megatron(m: &Model, stack: &Stack, counting: &Counting, s: u64) -> Result<Flops> {
    let mtp = if counting.mtp { m.mtp_layers } else { 0 };
    if mtp > 0 && stack.recurrent().is_some() {
        return Err(crate::Error::invalid(
            "counting.mtp",
            "the megatron formula counts MTP modules as layers of its layer pattern (a \
             hybrid_layer_pattern's part after '/', or linear_attention_freq over the MTP \
             layers too), and the model does not say which mixer its MTP modules have: \
             smelt does not guess (count without mtp)",
        ));
    }
    match megatron_is_hybrid(stack) {
        true => megatron_hybrid(m, stack, counting, s),
        false => megatron_gpt(m, stack, counting, mtp, s),
    }
}

/// Matrices of `hidden x ffn` per FFN of `stack` (3 with a gate, 2 without).
fn ffn_matrices(stack: &Stack) -> u64 {
    stack.activation().map_or(3, |a| a.matrices())
}

/// The width of `stack`'s dense FFNs (0 without any).
fn dense_width(stack: &Stack) -> u64 {
    stack
        .layers()
        .find_map(|l| match l.ffn {
            Some(Ffn::Dense { width, .. }) => Some(width),
            _ => None,
        })
        .unwrap_or(0)
}

/// Megatron-LM's `transformer_flops` per token (module docs).
fn megatron_gpt(m: &Model, stack: &Stack, counting: &Counting, mtp: u64, s: u64) -> Result<Flops> {
    const WHAT: &str = "flops.megatron";
    let (h, l) = (m.hidden, m.layers);
    let is_dense = |layer: &Layer| matches!(layer.ffn, Some(Ffn::Dense { .. }));
    let last_is_moe = !stack.layers().last().is_some_and(is_dense);
    let dense = stack.layers().filter(|l| is_dense(l)).count() as u64;
    let (moe_layers, dense_layers) = match last_is_moe {
        true => (add(l - dense, mtp, WHAT)?, dense),
        false => (l - dense, add(dense, mtp, WHAT)?),
    };
    let moe = &m.moe;
    let dense_ffn = dense_width(stack);
    let per_moe_layer = add(
        product(&[moe.top_k, moe.expert_ffn], WHAT)?,
        product(&[moe.shared_experts, moe.shared_ffn], WHAT)?,
        WHAT,
    )?;
    // 6 × (3 matrices with SwiGLU, 2 without: Megatron's `ffn_expansion_factor`).
    let mlp = product(
        &[
            6 * ffn_matrices(stack),
            h,
            add(
                product(&[dense_ffn, dense_layers], WHAT)?,
                product(&[per_moe_layer, moe_layers], WHAT)?,
                WHAT,
            )?,
        ],
        WHAT,
    )?;
    // Gated DeltaNet layers are its linear-attention variant: `linear_self_attn_term`
    // instead of the attention's projections and core.
    let linear_layers = (stack.layers())
        .filter(|l| matches!(l.mixer, Some(TokenMixer::Recurrent(_))))
        .count() as u64;
    let standard = add(l - linear_layers, mtp, WHAT)?;
    let (linear, core) = megatron_attention(h, model_attention(stack)?, s)?;
    let attention = add(
        product(&[add(linear, core, WHAT)?, standard], WHAT)?,
        product(
            &[6, megatron_gated_deltanet(h, stack)?, linear_layers],
            WHAT,
        )?,
        WHAT,
    )?;
    let mtp_extra = product(
        &[6, mtp, add(3 * h, product(&[2, h, h], WHAT)?, WHAT)?],
        WHAT,
    )?;
    let logits = match counting.lm_head {
        true => product(&[6, h, padded_vocab(m)?, mtp + 1], WHAT)?,
        false => 0,
    };
    let total = [attention, mtp_extra, logits]
        .into_iter()
        .try_fold(mlp, |acc, x| add(acc, x, WHAT))?;
    Ok(Flops::from_int(total))
}

/// The vocabulary padded to a multiple of 128 (`make_vocab_size_divisible_by`, one
/// tensor-parallel rank).
fn padded_vocab(m: &Model) -> Result<u64> {
    product(&[m.vocab.div_ceil(128), 128], "flops.megatron")
}

/// Megatron-LM's attention `a` per layer and token, on a residual stream of width `h`:
/// `(projections, core at s keys)`.
fn megatron_attention(h: u64, a: &AttentionLayer, s: u64) -> Result<(u64, u64)> {
    const WHAT: &str = "flops.megatron";
    let heads = a.shape.heads();
    match &a.shape {
        AttentionShape::Gqa {
            kv_heads, head_dim, ..
        } => {
            let q = product(&[heads, *head_dim], WHAT)?;
            let kv = product(&[*kv_heads, *head_dim], WHAT)?;
            // `gate_projection_size`: the output gate widens the query projection.
            let gate = if a.gate { q } else { 0 };
            let qkv = add(add(q, product(&[2, kv], WHAT)?, WHAT)?, gate, WHAT)?;
            let linear = product(&[6, h, add(qkv, q, WHAT)?], WHAT)?;
            Ok((linear, product(&[6, q, s], WHAT)?))
        }
        AttentionShape::Mla { mla: a, .. } => {
            let qk = a.qk_nope_head_dim + a.qk_rope_head_dim;
            let q_term = match a.q_lora_rank {
                0 => product(&[h, heads, qk], WHAT)?,
                r => product(&[r, h + product(&[heads, qk], WHAT)? + 1], WHAT)?,
            };
            let kv_up = product(&[heads, a.qk_nope_head_dim + a.v_head_dim], WHAT)?;
            let kv_term = product(&[a.kv_lora_rank, h + kv_up + 1], WHAT)?;
            let rope = product(&[h, a.qk_rope_head_dim], WHAT)?;
            let out = product(&[heads, a.v_head_dim, h], WHAT)?;
            let linear = product(&[6, q_term + kv_term + rope + out], WHAT)?;
            let core = product(&[3, heads, qk + a.v_head_dim, s], WHAT)?;
            Ok((linear, core))
        }
    }
}

/// Megatron-LM's forward multiply-adds per token of a Gated DeltaNet layer (`gdn_layer_flops`
/// over 2, the GPT path's `linear_self_attn_term` over 6) of `stack` on a residual stream
/// of width `h`: `H·(2·qk + 2·v + 2·n_v)` in, `c·(2·qk + v)` convolution, `4·n_v·d_v²` delta
/// rule, `H·v` out; 0 without one.
fn megatron_gated_deltanet(h: u64, stack: &Stack) -> Result<u64> {
    const WHAT: &str = "flops.megatron";
    let Some(Mixer::GatedDeltanet(g)) = stack.recurrent() else {
        return Ok(0);
    };
    let (qk, v, nv) = (g.key_width(), g.value_width(), g.value_heads);
    let in_proj = product(&[h, add(2 * qk, add(2 * v, 2 * nv, WHAT)?, WHAT)?], WHAT)?;
    let conv = product(&[g.conv_kernel, add(2 * qk, v, WHAT)?], WHAT)?;
    let rule = product(&[4, nv, g.value_head_dim, g.value_head_dim], WHAT)?;
    let out = product(&[h, v], WHAT)?;
    [conv, rule, out]
        .into_iter()
        .try_fold(in_proj, |acc, x| add(acc, x, WHAT))
}

/// Megatron-LM's `hybrid_flops` per token: every physical layer read as the symbols of its
/// blocks in a `hybrid_layer_pattern` (`M` Mamba-2, `G` Gated DeltaNet, `*` attention, `-`
/// dense MLP, `E` MoE; a layer holding both blocks is its mixer's symbol then its FFN's),
/// each symbol charged its `*_layer_flops`, times 3 (module docs).
fn megatron_hybrid(m: &Model, stack: &Stack, counting: &Counting, s: u64) -> Result<Flops> {
    const WHAT: &str = "flops.megatron";
    let h = m.hidden;
    let (mut attn, mut mamba, mut gdn, mut mlp, mut moe) = (0u64, 0u64, 0u64, 0u64, 0u64);
    for layer in stack.layers() {
        match &layer.mixer {
            Some(TokenMixer::Recurrent(Mixer::Mamba2(_))) => mamba += 1,
            Some(TokenMixer::Recurrent(Mixer::GatedDeltanet(_))) => gdn += 1,
            Some(TokenMixer::Attention(_)) => attn += 1,
            None => {}
        }
        match &layer.ffn {
            Some(Ffn::Dense { .. }) => mlp += 1,
            Some(Ffn::Moe(_)) => moe += 1,
            None => {}
        }
    }
    let a = model_attention(stack)?;
    if matches!(a.shape, AttentionShape::Mla { .. }) {
        // Refused by validation with one-block or recurrent layers; `hybrid_flops` has no
        // term for an MLA (`+`) layer.
        return Err(crate::Error::invalid(
            "model.mla",
            "Megatron-LM's hybrid_flops has no term for latent-attention layers",
        ));
    }
    // `attn_layer_flops`: 4·t·H·p·(H + H·g/n) + 2·Σs²·H·p with H·p = q, H·p·g/n = kv.
    let (qk, _) = a.shape.head_widths();
    let q = a.shape.heads().saturating_mul(qk);
    let kv = match a.shape {
        AttentionShape::Gqa {
            kv_heads, head_dim, ..
        } => kv_heads.saturating_mul(head_dim),
        AttentionShape::Mla { .. } => q,
    };
    let attn_layer = add(
        product(&[4, h, add(q, kv, WHAT)?], WHAT)?,
        product(&[2, s, q], WHAT)?,
        WHAT,
    )?;
    // `mlp_layer_flops` and `moe_layer_flops`: 4·(3/2 with SwiGLU)·H·ffn = 2·matrices·H·ffn.
    let matrices = ffn_matrices(stack);
    let mlp_layer = product(&[2, matrices, h, dense_width(stack)], WHAT)?;
    let moe_layer = product(
        &[
            2,
            matrices,
            h,
            add(
                product(&[m.moe.top_k, m.moe.expert_ffn], WHAT)?,
                product(&[m.moe.shared_experts, m.moe.shared_ffn], WHAT)?,
                WHAT,
            )?,
        ],
        WHAT,
    )?;
    // `mamba_layer_flops`: d_in = 2·H whatever the mixer's own width, in_proj
    // 2·H·(2·d_in + 2·groups·state + heads), scan 7·d_in·state, out_proj 2·d_in·H.
    let mamba_layer = match stack.recurrent() {
        Some(Mixer::Mamba2(x)) => {
            let d_in = product(&[2, h], WHAT)?;
            let in_width = [product(&[2, x.groups, x.state], WHAT)?, x.heads]
                .into_iter()
                .try_fold(product(&[2, d_in], WHAT)?, |acc, y| add(acc, y, WHAT))?;
            [
                product(&[7, d_in, x.state], WHAT)?,
                product(&[2, d_in, h], WHAT)?,
            ]
            .into_iter()
            .try_fold(product(&[2, h, in_width], WHAT)?, |acc, y| {
                add(acc, y, WHAT)
            })?
        }
        _ => 0,
    };
    let gdn_layer = product(&[2, megatron_gated_deltanet(h, stack)?], WHAT)?;
    let logits = match counting.lm_head {
        true => product(&[2, h, padded_vocab(m)?], WHAT)?,
        false => 0,
    };
    let forward = [
        product(&[attn, attn_layer], WHAT)?,
        product(&[mlp, mlp_layer], WHAT)?,
        product(&[mamba, mamba_layer], WHAT)?,
        product(&[moe, moe_layer], WHAT)?,
        product(&[gdn, gdn_layer], WHAT)?,
    ]
    .into_iter()
    .try_fold(logits, |acc, x| add(acc, x, WHAT))?;
    Ok(Flops::from_int(product(&[3, forward], WHAT)?))
}
