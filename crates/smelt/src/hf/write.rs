//! Writing a spec back as a family's `config.json`, and choosing the family.

use serde_json::Value;

use super::family::object;
use super::{Common, Family};
use crate::error::{Error, Result};
use crate::model::{AttentionBias, Feature, Ffn, Layer, ModelSpec, QkNorm, Stack, TokenMixer};

/// The family whose conventions a spec follows: `gemma4_text` with any of Gemma 4's pieces
/// (full-attention layers of their own shape, the value norm, post norms, branch norms,
/// router scales, GeGLU), `nemotron_h` with Mamba-2 layers, one-block layers or the relu2
/// MLP, `qwen3_next` with Gated DeltaNet layers or
/// an attention output gate, `deepseek_v32` with an indexer,
/// `deepseek_v3` with MLA, `llama4_text` with chunked attention, NoPE layers, the L2 q/k
/// norm or the `sigmoid_topk_scatter` router, `phimoe` with norm or
/// LM-head biases, `gpt_oss` with sinks, expert biases, the clamped SwiGLU or sliding windows
/// on some layers,
/// `mixtral` with a window on every layer, `glm4_moe` with ungated shared experts or a
/// router bias, `qwen3_moe` with per-head q/k norm, `olmoe` with q/k norm over the whole
/// projection, `qwen2_moe` with a gated shared expert, Q/K/V biases or dense layers,
/// `mixtral` otherwise.
pub fn family_of(spec: &ModelSpec) -> Family {
    let m = &spec.model;
    // A model that does not resolve (invalid) is written as Mixtral, whose export refuses it.
    let Ok(stack) = Stack::of(m) else {
        return Family::Mixtral;
    };
    let f = stack.features();
    let any = |of: &[Feature]| of.iter().any(|x| f.contains(x));
    let ungated = m.moe.shared_experts > 0 && !m.moe.shared_gate;
    use Feature::*;
    if any(&[
        FullAttention,
        VNorm,
        PostNorms,
        BranchNorms,
        RouterScale,
        GeluTanh,
    ]) {
        return Family::Gemma4Text;
    }
    if any(&[Mamba2, Blocks, Relu2]) {
        return Family::NemotronH;
    }
    if any(&[GatedDeltanet, AttentionGate]) {
        return Family::Qwen3Next;
    }
    if any(&[Indexer]) {
        return Family::DeepseekV32;
    }
    if any(&[Mla]) {
        return Family::DeepseekV3;
    }
    let llama4_router = m.moe.router == Some(crate::model::Router::SigmoidTopkScatter);
    if any(&[Chunked]) || m.nope.is_some() || m.qk_norm == QkNorm::L2 || llama4_router {
        return Family::Llama4Text;
    }
    if any(&[NormBias, LmHeadBias]) {
        return Family::Phimoe;
    }
    let windowed =
        |l: &Layer| matches!(&l.mixer, Some(TokenMixer::Attention(a)) if a.window.is_some());
    let everywhere = stack.layers().all(windowed);
    let some = stack.layers().any(windowed);
    if any(&[Sinks, ExpertBias, ClampedSwiglu]) || (some && !everywhere) {
        return Family::GptOss;
    }
    if everywhere {
        return Family::Mixtral;
    }
    if ungated || any(&[RouterBias, Mtp]) {
        return Family::Glm4Moe;
    }
    let attention = stack.model_attention();
    let dense = stack
        .layers()
        .any(|l| matches!(l.ffn, Some(Ffn::Dense { .. })));
    let qkv = attention.is_some_and(|a| a.bias == AttentionBias::Qkv);
    match attention.map_or(QkNorm::None, |a| a.qk_norm) {
        QkNorm::PerHead => Family::Qwen3Moe,
        QkNorm::Full => Family::Olmoe,
        QkNorm::None if m.moe.shared_gate || qkv || dense => Family::Qwen2Moe,
        QkNorm::None => Family::Mixtral,
        // Only Llama-4's classes build it (chosen above, with its other features).
        QkNorm::L2 => Family::Llama4Text,
    }
}

/// The family of a `config.json` smelt reads (a `llama4` wrapper's is `llama4_text`), so a
/// match of it is written back in its own family; `None` for any other.
pub fn family_of_config(config: &Value) -> Option<Family> {
    let model_type = config.get("model_type").and_then(Value::as_str)?;
    Family::of_model_type(model_type).map(|(family, _)| family)
}

/// A spec as a `config.json` of `family`: exactly the keys that family reads, with the
/// loop, if any, in the extra keys `smelt_loop_first_layer` (1-based), `smelt_loop_span`,
/// `smelt_loop_repeats` and `smelt_loop_residual_scale`, so a launcher can build it and
/// [`super::import`] reads it back. `head_dim` is always written: a matched model's
/// `heads * head_dim` need not equal `hidden_size`, and Transformers' current attention
/// modules read `head_dim` from the config (older releases derived it as
/// `hidden_size / num_attention_heads`; build such a model with a release that reads it). A
/// model the family cannot express is refused with the reason.
pub fn export(spec: &ModelSpec, family: Family) -> Result<Value> {
    let out = config_of(spec, family)?;
    groups_run(&out, family)?;
    Ok(out)
}

/// [`export`] without the check of the expert groups (which [`export_like`] makes on the
/// config with the Baseline's keys).
fn config_of(spec: &ModelSpec, family: Family) -> Result<Value> {
    spec.validate()?;
    let m = &spec.model;
    if m.vocab == 0 {
        return Err(Error::invalid(
            "model.vocab",
            "is 0: the config would say vocab_size = 0 and a launcher could not build the \
             model; give the vocabulary (--vocab N on the command line, vocab= in Python)",
        ));
    }
    let mut out = object(Common::of(spec, family))?;
    let config = family.config();
    config.support().check(m, family)?;
    router_built(m, family)?;
    buildable(m, family)?;
    out.extend(config.write(m)?);
    if let Some(key) = config.jitter_key() {
        // Always written: a carried Baseline key or the class default must not say another.
        let jitter = m.moe.jitter.map_or(0.0, |j| j.0);
        out.insert(key.to_owned(), Value::from(jitter));
    }
    // A family that names the experts per token otherwise writes only its own key.
    let top_k = config.words().top_k;
    if top_k != super::family::TOP_K
        && let Some(v) = out.remove(super::family::TOP_K)
    {
        out.insert(top_k.to_owned(), v);
    }
    if family == Family::KimiK2 {
        // Transformers has no `kimi_k2` type: Kimi-K2's checkpoints name DeepSeek-V3's
        // classes (through their own remote code), and so does its export.
        out.insert(
            "model_type".to_owned(),
            Value::from(Family::DeepseekV3.as_str()),
        );
    }
    Ok(Value::Object(out))
}

/// Refuses a model whose stated router (`[model.moe] router`) `family`'s Transformers class
/// does not build ([`super::family::FamilyConfig::routers`]), naming the families that do.
fn router_built(m: &crate::model::Model, family: Family) -> Result<()> {
    let Some(router) = m.moe.router else {
        return Ok(());
    };
    let builds = family.config().routers();
    if builds.contains(&router) {
        return Ok(());
    }
    let names = |routers: &[crate::model::Router]| {
        routers
            .iter()
            .map(|r| format!("\"{r}\""))
            .collect::<Vec<_>>()
            .join(" or ")
    };
    let (theirs, set) = if builds.is_empty() {
        ("a router smelt does not describe".to_owned(), "")
    } else {
        (
            format!("router = {}", names(builds)),
            "set the router it builds, ",
        )
    };
    let others: Vec<&str> = (Family::ALL.iter())
        .filter(|f| f.config().routers().contains(&router))
        .map(|f| f.as_str())
        .collect();
    let elsewhere = if others.is_empty() {
        String::new()
    } else {
        format!("export a family that builds it ({}), ", others.join(", "))
    };
    Err(Error::invalid(
        "model.moe.router",
        format!(
            "is \"{router}\", but {family}'s Transformers class ({}) builds {theirs}: \
             {elsewhere}{set}or remove the line (the router changes only what a \
             Transformers training step saves)",
            family.architecture()
        ),
    ))
}

/// What Transformers' own config classes refuse, refused here first with the reason.
fn buildable(m: &crate::model::Model, family: Family) -> Result<()> {
    // DeepseekV2Attention rotates with a complex64 table, the other MLA classes with cos
    // and sin: what a Transformers training step saves differs (`[model.mla] complex_rope`).
    if let Some(mla) = &m.mla
        && mla.complex_rope != (family == Family::DeepseekV2)
    {
        let rule = if mla.complex_rope {
            format!(
                "is true, but {family}'s Transformers class rotates with cos and sin (only \
                 deepseek_v2 builds the complex64 table): remove the line or export deepseek_v2"
            )
        } else {
            "is false, but deepseek_v2's Transformers class rotates with a complex64 table: \
             set complex_rope = true in [model.mla], or export deepseek_v3"
                .to_owned()
        };
        return Err(Error::invalid("model.mla.complex_rope", rule));
    }
    if let Some(r) = m.rope_dim.filter(|_| {
        !matches!(
            family,
            Family::MinimaxM2 | Family::Glm4Moe | Family::Qwen3Next | Family::Qwen3_5MoeText
        )
    }) {
        return Err(Error::invalid(
            "model.rope_dim",
            format!(
                "is {r}, but {family}'s Transformers class rotates the whole head in place \
                 (only minimax_m2, glm4_moe, qwen3_next and qwen3_5_moe_text build a partial \
                 RoPE): remove the line or export \
                 one of them"
            ),
        ));
    }
    if family == Family::DeepseekV2 && !m.hidden.is_multiple_of(m.heads) {
        return Err(Error::invalid(
            "model.heads",
            format!(
                "is {}, which does not divide hidden_size {}: Transformers' DeepseekV2Config \
                 refuses such a config (search only such shapes, or export another family \
                 with --hf-family)",
                m.heads, m.hidden
            ),
        ));
    }
    Ok(())
}

/// Keys a Baseline's config may hold in a type Transformers no longer accepts, with the
/// value it accepts: Llama-4's configs say `attn_temperature_tuning: 4`, which Transformers 5
/// requires to be a boolean (its modeling code only tests it for truth).
fn retyped(family: Family, key: &str, value: &Value) -> Value {
    match (family, key, value) {
        (Family::Llama4Text, "attn_temperature_tuning", Value::Number(n)) => {
            Value::Bool(n.as_f64() != Some(0.0))
        }
        _ => value.clone(),
    }
}

/// Keys of a Baseline's config that describe its checkpoint, not its architecture: a looped
/// model is trained anew, so they are never carried over.
/// (`auto_map` names remote code that the export does not carry: Kimi-K2's own files.)
const NOT_CARRIED: &[&str] = &["quantization_config", "_name_or_path", "auto_map"];

/// [`export`], carrying over every other key of the Baseline's own `config.json` (RoPE base,
/// norm epsilon, activation, token ids, dtype, router options, ...) when it is of the same
/// family (but the checkpoint's storage format, `quantization_config`), so the looped model
/// differs from its Baseline only where the match says. The
/// keys the family reads ([`Family::keys`]) always come from the matched model, except
/// `max_position_embeddings`, which keeps the Baseline's value when that is larger than the
/// context the match was costed at.
pub fn export_like(spec: &ModelSpec, family: Family, baseline: &Value) -> Result<Value> {
    let mut out = config_of(spec, family)?;
    // A wrapper's text decoder (Llama-4's) is the config to carry keys from.
    let model_type = |v: &Value| {
        v.get("model_type")
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let wrapper = family.wrapper();
    let (baseline, same_family) = match model_type(baseline) {
        t if wrapper.is_some() && t.as_deref() == wrapper => match baseline.get("text_config") {
            Some(text) => (text, true),
            None => (baseline, false),
        },
        t => (baseline, t.as_deref() == Some(family.as_str())),
    };
    let read = family.keys();
    if let (true, Some(base), Some(map)) = (same_family, baseline.as_object(), out.as_object_mut())
    {
        for (k, v) in base {
            if !read.contains(&k.as_str())
                && !map.contains_key(k)
                && !NOT_CARRIED.contains(&k.as_str())
            {
                map.insert(k.clone(), retyped(family, k, v));
            }
        }
        // Keep the Baseline's position capacity when it exceeds the matched context.
        let key = "max_position_embeddings";
        if let (Some(b), Some(c)) = (
            base.get(key).and_then(Value::as_u64),
            map.get(key).and_then(Value::as_u64),
        ) && b > c
        {
            map.insert(key.to_owned(), Value::from(b));
        }
    }
    // A carried `rope_parameters` that names the share of each head RoPE rotates would
    // win over GLM-4.5's exported top-level key and MiniMax-M2's `rotary_dim` (Transformers
    // reads it first, then a top-level `partial_rotary_factor`): they say the matched
    // model's.
    if let Some(map) = out.as_object_mut() {
        let int = |k: &str| map.get(k).and_then(Value::as_u64);
        let factor = match family {
            Family::Glm4Moe => map.get("partial_rotary_factor").cloned(),
            Family::MinimaxM2 => match (int("rotary_dim"), int("head_dim")) {
                (Some(r), Some(d)) if d > 0 => Some(Value::from(r as f64 / d as f64)),
                _ => None,
            },
            _ => None,
        };
        if let Some(f) = factor {
            if family == Family::MinimaxM2 && map.contains_key("partial_rotary_factor") {
                map.insert("partial_rotary_factor".to_owned(), f.clone());
            }
            if let Some(r) = map
                .get_mut("rope_parameters")
                .and_then(Value::as_object_mut)
                && r.contains_key("partial_rotary_factor")
            {
                r.insert("partial_rotary_factor".to_owned(), f);
            }
        }
    }
    groups_run(&out, family)?;
    Ok(out)
}

/// Refuses a config of a family with DeepSeek's group-limited router whose expert groups
/// (`n_group` and `topk_group`, as written or carried over from the Baseline, else the
/// config class's defaults) Transformers' router cannot run on the exported experts:
/// `n_group` must divide them, `topk_group` be at most `n_group`, the top-k fit in the
/// chosen groups, and a sigmoid router's groups hold two experts each (it scores a group by
/// its two best). Otherwise the class builds a model whose forward pass fails.
fn groups_run(config: &Value, family: Family) -> Result<()> {
    use crate::model::{Router, RouterGroups};
    let int = |k: &str| config.get(k).and_then(Value::as_u64);
    let (defaults, router) = match family {
        // DeepseekV3Config's (and DeepseekV32Config's) defaults; Kimi-K2 is built by
        // DeepSeek-V3's classes.
        Family::DeepseekV3 | Family::KimiK2 | Family::DeepseekV32 => {
            ((Some(8), Some(4)), Router::SigmoidGroupedRenormalisedFp32)
        }
        Family::Glm4Moe | Family::GlmMoeDsa => {
            ((Some(1), Some(1)), Router::SigmoidGroupedRenormalisedFp32)
        }
        Family::DeepseekV2
            if config.get("topk_method").and_then(Value::as_str)
                == Some("group_limited_greedy") =>
        {
            ((None, None), Router::SoftmaxGroupedFp32)
        }
        _ => return Ok(()),
    };
    let (Some(experts), Some(top_k)) = (int("n_routed_experts"), int("num_experts_per_tok")) else {
        return Ok(());
    };
    let (n, kg) = (
        int("n_group").or(defaults.0),
        int("topk_group").or(defaults.1),
    );
    let fits = match (n, kg) {
        (Some(groups), Some(topk_groups)) => RouterGroups {
            groups,
            topk_groups,
        }
        .fit(router, experts, top_k),
        _ => false,
    };
    if fits {
        return Ok(());
    }
    let shown = |v: Option<u64>| v.map_or_else(|| "none".to_owned(), |v| v.to_string());
    Err(Error::invalid(
        "model.moe.experts",
        format!(
            "is {experts} (top_k {top_k}), but {family}'s group-limited router would run with \
             n_group = {} and topk_group = {} (the Baseline's keys, else the config class's \
             defaults), which Transformers' router cannot run: n_group must divide the \
             experts, topk_group be at most n_group, the top-k fit in the topk_group groups \
             and (sigmoid routers) each group hold two experts. Search expert counts that \
             fit (a lattice.experts step that is a multiple of n_group) or state the groups \
             ([model.moe] router and [model.moe.router_groups])",
            shown(n),
            shown(kg)
        ),
    ))
}

/// A match's looped model as a config.json: in `family`, else the family of the Baseline's
/// config.json `base` (a budget's [`crate::budget::Budget::baseline_config`]) when smelt reads
/// it ([`family_of_config`]), else the family whose conventions the model follows
/// ([`family_of`]); with the Baseline config's other keys when there is one
/// ([`export_like`]). `vocab` supplies the vocabulary a Baseline without
/// one lacks; one that differs from the Baseline's is refused.
pub fn export_match(
    base: Option<&Value>,
    looped: &ModelSpec,
    family: Option<Family>,
    vocab: Option<u64>,
) -> Result<Value> {
    let family = family
        .or_else(|| base.and_then(family_of_config))
        .unwrap_or_else(|| family_of(looped));
    let mut looped = looped.clone();
    // A block run once with its residual updates unscaled is no loop: every layer once, as
    // the family's own config builds it (so a sweep's `repeats = 1` needs no model
    // directory).
    looped.model = looped.model.without_unit_loop();
    match (looped.model.vocab, vocab) {
        (0, Some(v)) => looped.model.vocab = v,
        (have, Some(v)) if have != v => {
            let rule = format!("is {v}, but the Baseline's vocabulary is {have}");
            return Err(Error::invalid("vocab", rule));
        }
        _ => {}
    }
    match base {
        Some(base) => export_like(&looped, family, base),
        None => export(&looped, family),
    }
}
