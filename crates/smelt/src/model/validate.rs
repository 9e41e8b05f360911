//! The rules a model file must follow, each error naming the field (a dotted path) and the
//! rule. Every size is bounded (the `MAX_*` constants) so that no count can silently wrap
//! and no loop runs over an absurd range.

use super::{
    AttentionBias, Blocks, ExpertActivation, FullAttention, Indexer, Mla, Model, ModelSpec, QkNorm,
    Recurrent, Workload,
};
use super::{
    MAX_CONTEXT, MAX_COUNT, MAX_EXPERTS, MAX_HISTOGRAM_TOKENS, MAX_REPEATS, MAX_VOCAB, MAX_WIDTH,
};
use crate::error::{Error, Result};

/// `Ok` when `ok`, else the field and the rule `rule()` describes.
pub(crate) fn ensure(ok: bool, field: &str, rule: impl FnOnce() -> String) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(field, rule()))
    }
}

/// A name shows in tables, comments and terminals: no control characters (a line break
/// would end a comment line; an escape sequence would reach the terminal).
pub(crate) fn check_name(field: &str, name: &str) -> Result<()> {
    ensure(!name.chars().any(char::is_control), field, || {
        format!(
            "must not contain control characters (line breaks, tabs, escapes); got {}",
            name.escape_debug()
        )
    })
}

pub(crate) fn positive(field: &str, value: u64, max: u64) -> Result<()> {
    if value == 0 {
        return Err(Error::invalid(field, "must be at least 1"));
    }
    at_most(field, value, max)
}

pub(super) fn at_most(field: &str, value: u64, max: u64) -> Result<()> {
    if value > max {
        return Err(Error::invalid(
            field,
            format!("must be at most {max} (got {value}): absurdly large"),
        ));
    }
    Ok(())
}

impl Model {
    /// Checks every rule on the architecture; the error names the field and the rule.
    pub fn validate(&self) -> Result<()> {
        positive("model.layers", self.layers, MAX_COUNT)?;
        positive("model.hidden", self.hidden, MAX_WIDTH)?;
        positive("model.heads", self.heads, MAX_COUNT)?;
        positive("model.kv_heads", self.kv_heads, MAX_COUNT)?;
        positive("model.head_dim", self.head_dim, MAX_WIDTH)?;
        ensure(
            self.heads.is_multiple_of(self.kv_heads),
            "model.kv_heads",
            || {
                format!(
                    "must divide model.heads ({}); got {}",
                    self.heads, self.kv_heads
                )
            },
        )?;
        at_most("model.vocab", self.vocab, MAX_VOCAB)?;
        self.validate_moe()?;
        if let Some(d) = &self.dense {
            positive("model.dense.ffn", d.ffn, MAX_WIDTH)?;
            layer_list("model.dense.layers", &d.layers, self.layers)?;
        }
        if let Some(w) = &self.window {
            positive("model.window.size", w.size, MAX_CONTEXT)?;
            layer_list("model.window.layers", &w.layers, self.layers)?;
        }
        if let Some(n) = &self.nope {
            layer_list("model.nope.layers", &n.layers, self.layers)?;
            ensure(self.mla.is_none(), "model.nope", || {
                "cannot be combined with [model.mla] (DeepSeek's latent attention always \
                 rotates its RoPE part; no family has both)"
                    .to_owned()
            })?;
        }
        if let Some(mla) = &self.mla {
            self.validate_mla(mla)?;
        }
        if let Some(r) = self.rope_dim {
            self.validate_rope_dim(r)?;
        }
        if let Some(ix) = &self.indexer {
            self.validate_indexer(ix)?;
        }
        self.validate_hybrid()?;
        if let Some(fa) = &self.full_attention {
            self.validate_full_attention(fa)?;
        }
        ensure(!(self.v_norm && self.mla.is_some()), "model.v_norm", || {
            "cannot be combined with [model.mla]: no family norms a latent attention's values"
                .to_owned()
        })?;
        let gemma = [
            (self.full_attention.is_some(), "model.full_attention"),
            (self.v_norm, "model.v_norm"),
            (self.post_norms, "model.post_norms"),
            (self.moe.branch_norms, "model.moe.branch_norms"),
            (self.moe.router_scale, "model.moe.router_scale"),
        ];
        if let Some((_, field)) = gemma.iter().find(|(on, _)| *on) {
            ensure(self.blocks.is_none(), field, || {
                "cannot be combined with [model.blocks]: no family has Gemma 4's pieces in \
                 one-block layers, and smelt does not count them together"
                    .to_owned()
            })?;
        }
        ensure(
            !(self.attention_gate && self.mla.is_some()),
            "model.attention_gate",
            || "cannot be combined with [model.mla]: no family gates a latent attention".to_owned(),
        )?;
        at_most("model.mtp_layers", self.mtp_layers, MAX_COUNT)?;
        ensure(
            self.mtp_layers == 0 || !(self.post_norms || self.moe.branch_norms),
            "model.mtp_layers",
            || {
                "cannot be combined with model.post_norms or model.moe.branch_norms: no family \
                 has both, and smelt does not say which norms an MTP module would have"
                    .to_owned()
            },
        )?;
        if let Some(l) = &self.looping {
            self.validate_loop(l)?;
        }
        Ok(())
    }
}

/// A list of 1-based layers: not empty, strictly increasing, each a layer of the model.
fn layer_list(field: &str, list: &[u64], layers: u64) -> Result<()> {
    if list.is_empty() {
        let table = field.trim_end_matches(".layers");
        return Err(Error::invalid(
            field,
            format!("must list at least one 1-based layer (omit [{table}] for none)"),
        ));
    }
    for (i, &layer) in list.iter().enumerate() {
        if layer == 0 || layer > layers {
            return Err(Error::invalid(
                format!("{field}[{i}]"),
                format!(
                    "must be a 1-based layer between 1 and model.layers ({layers}); got {layer}"
                ),
            ));
        }
        if i > 0 && layer <= list[i - 1] {
            return Err(Error::invalid(
                format!("{field}[{i}]"),
                format!(
                    "must be strictly increasing; {layer} follows {}",
                    list[i - 1]
                ),
            ));
        }
    }
    Ok(())
}

impl Model {
    /// A partial RoPE's rotated width `r`: even, within a head, and not on MLA (whose RoPE
    /// width is its own).
    fn validate_loop(&self, l: &super::Loop) -> Result<()> {
        positive("model.loop.first", l.first, MAX_COUNT)?;
        positive("model.loop.span", l.span, MAX_COUNT)?;
        positive("model.loop.repeats", l.repeats, MAX_REPEATS)?;
        let last = l.first + l.span - 1;
        if last > self.layers {
            return Err(Error::invalid(
                "model.loop",
                format!(
                    "the loop (layers {}..={last}) reaches past the last layer ({})",
                    l.first, self.layers
                ),
            ));
        }
        if let Some(s) = l.residual_scale
            && !(s.is_finite() && s > 0.0)
        {
            return Err(Error::invalid(
                "model.loop.residual_scale",
                format!("must be a positive finite number (got {s})"),
            ));
        }
        Ok(())
    }

    fn validate_rope_dim(&self, r: u64) -> Result<()> {
        positive("model.rope_dim", r, MAX_WIDTH)?;
        ensure(
            r.is_multiple_of(2) && r <= self.head_dim && self.mla.is_none(),
            "model.rope_dim",
            || {
                format!(
                    "must be even, at most model.head_dim ({}) and without [model.mla]; got {r}",
                    self.head_dim
                )
            },
        )
    }

    fn validate_recurrent(&self, r: &Recurrent) -> Result<()> {
        layer_list("model.recurrent.layers", &r.layers, self.layers)?;
        ensure(
            (r.layers.len() as u64) < self.layers,
            "model.recurrent.layers",
            || {
                format!(
                    "must leave at least one attention layer (it lists all {} layers); smelt \
                     matches a KV cache, which a model without attention does not have",
                    self.layers
                )
            },
        )?;
        if let Some(w) = &self.window
            && let Some(l) = w.layers.iter().find(|l| r.layers.contains(l))
        {
            return Err(Error::invalid(
                "model.recurrent.layers",
                format!(
                    "layer {l} is also in model.window.layers: a recurrent layer has no window"
                ),
            ));
        }
        ensure(
            self.mla.is_none() && self.indexer.is_none(),
            "model.recurrent",
            || {
                "cannot be combined with [model.mla] or [model.indexer]: no family has both, \
                 and smelt does not count them together"
                    .to_owned()
            },
        )?;
        r.mixer.validate()
    }

    /// The recurrent layers, one-block layers and the relu2 MLP.
    fn validate_hybrid(&self) -> Result<()> {
        if let Some(r) = &self.recurrent {
            self.validate_recurrent(r)?;
        }
        if let Some(b) = &self.blocks {
            self.validate_blocks(b)?;
        }
        ensure(
            !(self.moe.activation == ExpertActivation::Relu2 && self.moe.expert_bias),
            "model.moe.expert_bias",
            || {
                "cannot be combined with activation = \"relu2\": no family biases the \
                 ungated experts, and smelt does not count it"
                    .to_owned()
            },
        )
    }

    fn validate_blocks(&self, b: &Blocks) -> Result<()> {
        ensure(
            !(b.mixer_only.is_empty() && b.ffn_only.is_empty()),
            "model.blocks",
            || "must list layers in mixer_only or ffn_only (omit [model.blocks] for none)".into(),
        )?;
        if !b.mixer_only.is_empty() {
            layer_list("model.blocks.mixer_only", &b.mixer_only, self.layers)?;
        }
        if !b.ffn_only.is_empty() {
            layer_list("model.blocks.ffn_only", &b.ffn_only, self.layers)?;
        }
        let recurrent = self.recurrent.as_ref().map_or(&[][..], |r| &r.layers[..]);
        let dense = self.dense.as_ref().map_or(&[][..], |d| &d.layers[..]);
        let window = self.window.as_ref().map_or(&[][..], |w| &w.layers[..]);
        for (field, list, other, what) in [
            (
                "model.blocks.ffn_only",
                &b.ffn_only,
                &b.mixer_only[..],
                "model.blocks.mixer_only: a layer in both would hold neither block",
            ),
            (
                "model.blocks.ffn_only",
                &b.ffn_only,
                recurrent,
                "model.recurrent.layers: an FFN-only layer has no token mixer",
            ),
            (
                "model.blocks.ffn_only",
                &b.ffn_only,
                window,
                "model.window.layers: an FFN-only layer has no attention to window",
            ),
            (
                "model.blocks.mixer_only",
                &b.mixer_only,
                dense,
                "model.dense.layers: a mixer-only layer has no FFN",
            ),
        ] {
            if let Some(l) = list.iter().find(|l| other.contains(l)) {
                return Err(Error::invalid(
                    field,
                    format!("layer {l} is also in {what}"),
                ));
            }
        }
        ensure(self.attention_layers() > 0, "model.blocks.ffn_only", || {
            "must leave at least one attention layer (neither recurrent nor FFN-only): smelt \
             matches a KV cache, which a model without attention does not have"
                .to_owned()
        })?;
        ensure(self.moe_layers() > 0, "model.blocks.mixer_only", || {
            "must leave at least one MoE layer (neither dense nor mixer-only): smelt describes \
             MoE models"
                .to_owned()
        })?;
        ensure(
            self.mtp_layers == 0 && self.mla.is_none() && self.indexer.is_none(),
            "model.blocks",
            || {
                "cannot be combined with model.mtp_layers, [model.mla] or [model.indexer]: no \
                 family has both, and smelt does not count them together"
                    .to_owned()
            },
        )
    }

    fn validate_moe(&self) -> Result<()> {
        let moe = &self.moe;
        positive("model.moe.experts", moe.experts, MAX_EXPERTS)?;
        positive("model.moe.top_k", moe.top_k, MAX_COUNT)?;
        positive("model.moe.expert_ffn", moe.expert_ffn, MAX_WIDTH)?;
        if let Some(latent) = moe.latent {
            positive("model.moe.latent", latent, MAX_WIDTH)?;
        }
        ensure(moe.top_k <= moe.experts, "model.moe.top_k", || {
            format!(
                "must not exceed model.moe.experts ({}); got {}",
                moe.experts, moe.top_k
            )
        })?;
        ensure(
            moe.router != Some(super::Router::Sparsemixer) || moe.top_k == 2,
            "model.moe.top_k",
            || {
                format!(
                    "must be 2 with router = \"sparsemixer\": SparseMixer routes every token to \
                     two experts; got {}",
                    moe.top_k
                )
            },
        )?;
        at_most("model.moe.shared_experts", moe.shared_experts, MAX_COUNT)?;
        at_most("model.moe.shared_ffn", moe.shared_ffn, MAX_WIDTH)?;
        if (moe.shared_experts == 0) != (moe.shared_ffn == 0) {
            return Err(Error::invalid(
                "model.moe.shared_ffn",
                format!(
                    "must be positive exactly when model.moe.shared_experts is (shared_experts = {}, shared_ffn = {})",
                    moe.shared_experts, moe.shared_ffn
                ),
            ));
        }
        if moe.branch_norms && moe.shared_experts == 0 {
            return Err(Error::invalid(
                "model.moe.branch_norms",
                "norms the shared experts' branch beside the routed experts' (Gemma 4's MoE \
                 block), so model.moe.shared_experts must be at least 1",
            ));
        }
        super::router::check(moe)?;
        moe.check_jitter()?;
        if moe.shared_gate && moe.shared_experts == 0 {
            return Err(Error::invalid(
                "model.moe.shared_gate",
                "gates the shared experts, so model.moe.shared_experts must be at least 1",
            ));
        }
        Ok(())
    }

    fn validate_full_attention(&self, fa: &FullAttention) -> Result<()> {
        positive("model.full_attention.kv_heads", fa.kv_heads, MAX_COUNT)?;
        positive("model.full_attention.head_dim", fa.head_dim, MAX_WIDTH)?;
        ensure(
            self.heads.is_multiple_of(fa.kv_heads),
            "model.full_attention.kv_heads",
            || {
                format!(
                    "must divide model.heads ({}); got {}",
                    self.heads, fa.kv_heads
                )
            },
        )?;
        ensure(
            self.recurrent.is_none() && !self.attention_gate,
            "model.full_attention",
            || {
                "cannot be combined with [model.recurrent] or model.attention_gate: no family \
                 has both (Gemma 4 has per-layer attention shapes, the Gated DeltaNet hybrids \
                 gated attention), and smelt does not count them together"
                    .to_owned()
            },
        )?;
        ensure(
            self.mla.is_none() && self.indexer.is_none(),
            "model.full_attention",
            || {
                "cannot be combined with [model.mla] or [model.indexer]: it gives GQA shapes, \
                 which a latent attention does not have"
                    .to_owned()
            },
        )?;
        ensure(
            self.full_attention_layers() > 0,
            "model.full_attention",
            || {
                format!(
                    "describes the full-attention layers, and the model has none (model.window \
                 lists all {} layers); omit it",
                    self.layers
                )
            },
        )
    }

    fn validate_indexer(&self, ix: &Indexer) -> Result<()> {
        positive("model.indexer.heads", ix.heads, MAX_COUNT)?;
        positive("model.indexer.head_dim", ix.head_dim, MAX_WIDTH)?;
        positive("model.indexer.topk", ix.topk, MAX_CONTEXT)?;
        ensure(
            self.mla.as_ref().is_some_and(|a| a.q_lora_rank > 0),
            "model.indexer",
            || {
                "needs [model.mla] with q_lora_rank > 0: the indexer's queries are projected \
                 from the query latent"
                    .to_owned()
            },
        )?;
        ensure(self.window.is_none(), "model.indexer", || {
            "cannot be combined with [model.window]: no family has both, and smelt does not \
             define which keys a windowed layer's indexer would choose from"
                .to_owned()
        })
    }

    fn validate_mla(&self, mla: &Mla) -> Result<()> {
        at_most("model.mla.q_lora_rank", mla.q_lora_rank, MAX_WIDTH)?;
        positive("model.mla.kv_lora_rank", mla.kv_lora_rank, MAX_WIDTH)?;
        at_most(
            "model.mla.qk_nope_head_dim",
            mla.qk_nope_head_dim,
            MAX_WIDTH,
        )?;
        at_most(
            "model.mla.qk_rope_head_dim",
            mla.qk_rope_head_dim,
            MAX_WIDTH,
        )?;
        positive("model.mla.v_head_dim", mla.v_head_dim, MAX_WIDTH)?;
        let qk = mla.qk_nope_head_dim + mla.qk_rope_head_dim;
        ensure(self.head_dim == qk, "model.head_dim", || {
            format!(
                "with [model.mla], must be the query/key width of a head, \
                 qk_nope_head_dim + qk_rope_head_dim = {qk}; got {}",
                self.head_dim
            )
        })?;
        ensure(self.kv_heads == self.heads, "model.kv_heads", || {
            format!(
                "with [model.mla], must equal model.heads ({}): every head has its own keys \
                 and values, up-projected from the latent; got {}",
                self.heads, self.kv_heads
            )
        })?;
        ensure(
            self.attention_bias == AttentionBias::None,
            "model.attention_bias",
            || {
                "must be \"none\" with [model.mla] (DeepSeek's latent projections have no \
             biases; smelt does not model them)"
                    .to_owned()
            },
        )?;
        ensure(self.qk_norm == QkNorm::None, "model.qk_norm", || {
            "must be \"none\" with [model.mla] (its latents have their own RMSNorms, \
             counted with it)"
                .to_owned()
        })
    }
}

impl Workload {
    /// Checks every rule on the workload; the error names the field and the rule.
    pub fn validate(&self) -> Result<()> {
        positive("workload.context", self.context, MAX_CONTEXT)?;
        if !(1..=16).contains(&self.kv_dtype_bytes) {
            return Err(Error::invalid(
                "workload.kv_dtype_bytes",
                format!("must be between 1 and 16 (got {})", self.kv_dtype_bytes),
            ));
        }
        match (&self.mean_doc_len, &self.doc_lengths) {
            (Some(_), Some(_)) => Err(Error::invalid(
                "workload",
                "give either mean_doc_len or doc_lengths, not both",
            )),
            (None, None) => Err(Error::invalid(
                "workload",
                "give mean_doc_len (tokens) or doc_lengths ([[length, count], ...])",
            )),
            (Some(t), None) => {
                if *t == 0 {
                    return Err(Error::invalid(
                        "workload.mean_doc_len",
                        "must be at least 1",
                    ));
                }
                if *t > self.context {
                    return Err(Error::invalid(
                        "workload.mean_doc_len",
                        format!(
                            "must not exceed workload.context ({}); got {t}",
                            self.context
                        ),
                    ));
                }
                Ok(())
            }
            (None, Some(hist)) => {
                if hist.is_empty() {
                    return Err(Error::invalid(
                        "workload.doc_lengths",
                        "must list at least one [length, count] pair",
                    ));
                }
                let mut tokens: u64 = 0;
                for (i, &[len, count]) in hist.iter().enumerate() {
                    let field = format!("workload.doc_lengths[{i}]");
                    if len == 0 {
                        return Err(Error::invalid(field, "length must be at least 1"));
                    }
                    if len > self.context {
                        return Err(Error::invalid(
                            field,
                            format!("length {len} exceeds workload.context ({})", self.context),
                        ));
                    }
                    if count == 0 {
                        return Err(Error::invalid(field, "count must be at least 1"));
                    }
                    tokens = len
                        .checked_mul(count)
                        .and_then(|t| tokens.checked_add(t))
                        .filter(|&t| t <= MAX_HISTOGRAM_TOKENS)
                        .ok_or_else(|| {
                            Error::invalid(
                                "workload.doc_lengths",
                                format!(
                                    "describes more than {MAX_HISTOGRAM_TOKENS} tokens: absurdly large"
                                ),
                            )
                        })?;
                }
                Ok(())
            }
        }
    }
}

impl ModelSpec {
    /// Checks every rule on the spec.
    pub fn validate(&self) -> Result<()> {
        if let Some(name) = &self.name {
            check_name("name", name)?;
        }
        self.model.validate()?;
        self.workload.validate()?;
        if (self.counting.embeddings || self.counting.lm_head) && self.model.vocab == 0 {
            return Err(Error::invalid(
                "model.vocab",
                "must be positive when [counting] counts embeddings or the LM head",
            ));
        }
        if ![1, 2, 4, 8].contains(&self.counting.activation_bytes) {
            return Err(Error::invalid(
                "counting.activation_bytes",
                format!(
                    "must be 1, 2, 4 or 8: the bytes of one saved activation element (fp8, \
                     bf16 or fp16, fp32, fp64); got {}",
                    self.counting.activation_bytes
                ),
            ));
        }
        if !self.counting.recompute_modules.is_default()
            && self.counting.activations != super::ActivationPolicy::MegatronSelective
        {
            return Err(Error::invalid(
                "counting.recompute_modules",
                format!(
                    "is read by the megatron-selective policy only; the activations policy is {} \
                     (set activations = \"megatron-selective\", or leave the modules out)",
                    self.counting.activations
                ),
            ));
        }
        if self
            .counting
            .recompute_modules
            .has(super::RecomputeModule::MlaUpProj)
            && self.model.mla.is_none()
        {
            return Err(Error::invalid(
                "counting.recompute_modules",
                "mla_up_proj needs multi-head latent attention ([model.mla]); Megatron-Core \
                 refuses it otherwise",
            ));
        }
        if let Some(t) = &self.training {
            t.validate_for(&self.model)?;
            if self.counting.mtp && self.model.mtp_layers > 0 {
                return Err(Error::invalid(
                    "training",
                    "the training memory does not count MTP modules: set [counting] mtp = false",
                ));
            }
        }
        Ok(())
    }
}
