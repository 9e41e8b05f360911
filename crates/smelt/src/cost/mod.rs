//! The analytic cost model: parameters, per-token FLOPs and KV cache of a (looped) MoE
//! decoder Transformer, and its compute-equivalent sparsity.
//!
//! # Conventions
//!
//! Every count is exact (integers, or an exact fraction for per-token FLOPs) and checked
//! for overflow. For a model with `L` physical layers, hidden size `H`, `heads` query heads
//! and `kv_heads` key/value heads of width `d`, `E` routed experts of SwiGLU width `f`
//! with `k` active, `s` shared experts of width `f_s`:
//!
//! **Layer executions.** A loop of `span` layers run `repeats` times gives
//! `X = L + (repeats - 1) * span` executions. FLOPs and KV cache are counted once per
//! *execution*; parameters once per *physical* layer.
//!
//! **Layer types.** A layer's FFN is the MoE, or, for the `D` layers `model.dense` lists, a
//! dense SwiGLU of width `f_d`. `L_m = L - D` physical layers and `X_m` executions are MoE;
//! `D` physical layers and `X_d = X - X_m` executions are dense (a dense layer inside the
//! loop counts once per visit).
//!
//! **Parameters** (non-embedding, per physical layer unless stated):
//! * attention: Q, K, V, O projections: `H*(heads + 2*kv_heads)*d + heads*d*H`, plus biases
//!   when configured ([`crate::model::AttentionBias`]: `(heads + 2*kv_heads)*d` for Q, K, V, plus `H` for O);
//! * experts: `E * 3*H*f` (gate, up, down) per MoE layer;
//! * router: `H * E` (linear, no bias) per MoE layer;
//! * shared: `s * 3*H*f_s` per MoE layer, plus `H` for the sigmoid gate if configured;
//! * dense: `3*H*f_d` per dense layer;
//! * norms: `2*H` per layer (pre-attention and pre-FFN RMSNorm) plus `H` for the final norm
//!   (twice that with `norm_bias`, LayerNorms with a bias), plus q/k norms if configured
//!   (`2*d` per layer for [`crate::model::QkNorm::PerHead`], `(heads + kv_heads)*d` for
//!   [`crate::model::QkNorm::Full`]);
//! * embeddings `vocab*H` and LM head `vocab*H` only when `[counting]` asks (a tied LM head
//!   is not counted twice), plus `vocab` for the head's bias with `lm_head_bias`.
//!
//! *Active* parameters are what one token touches in one pass over the physical layers:
//! the same, with `k` experts instead of `E` (router, shared experts, dense FFNs and norms
//! in full).
//!
//! **FLOPs per token**, forward, 2 FLOPs per multiply-add:
//! * projections, per execution: `2*H*(heads + 2*kv_heads)*d + 2*heads*d*H`;
//! * attention core (`QKᵀ` and `PV`), per execution: `4*heads*d*c̄`, with `c̄` the mean
//!   number of keys a query attends inside its document (see [`MeanKeys`]);
//! * per MoE execution: router `2*H*E`; routed experts `k * 2 * 3*H*f`; shared
//!   `s * 2 * 3*H*f_s`, plus `2*H` for the gate;
//! * per dense execution: `2 * 3*H*f_d`;
//! * the LM head, when counted: `2*H*vocab`, once per token (not per execution).
//!
//! Norms, biases, softmax, activations, the gate's sigmoid, routing top-k and residual adds
//! are not counted. Training FLOPs are `3 x` forward (the backward pass is twice the
//! forward).
//!
//! **KV cache per token**: `Σ over executions 2*kv_heads*d` elements (the second visit of a
//! looped layer keeps its own keys and values); bytes are elements times
//! `workload.kv_dtype_bytes`.
//!
//! **Beyond GQA** (see the README's conventions): multi-head latent attention replaces the
//! projections by the latent and up-projections and caches `kv_lora_rank + qk_rope_head_dim`
//! per execution; windowed layers attend fewer keys ([`MeanKeys::windowed`]) and hold at
//! most their window at the context ([`KvAtContext`]); sinks, router and expert biases are
//! parameters without counted FLOPs; MTP modules count only with `[counting] mtp`; a sparse
//! attention indexer adds its projections, `heads·(head_dim + 1)` multiply-adds per scored
//! query-key pair over the full `c̄`, and its cached key, and the core then attends
//! `min(t, topk)` keys ([`Keys::selected`]).
//!
//! **Compute-equivalent sparsity** (SMELT, Eq. 1): with `F0, N0` the training FLOPs and
//! parameters of the fully-activated control (same shapes, not looped, `E = k`, see
//! [`ModelSpec::control`]), `N_act_eq = (F / F0) * N0` and `S = 1 - N_act_eq / N`. A looped
//! model is measured against the control of its Baseline ([`cost_against`]).
//!
//! Reference: Wang et al., "SMELT: Scaling Laws for Compute-Matched MoE Looped
//! Transformers", arXiv 2609.01343, §2 and Appendix A.

mod attention;
mod compare;
mod layer;
mod per_budget;
mod types;

pub use attention::{Keys, MeanKeys, Shortcut};
pub use compare::{Comparison, compare};
pub use per_budget::{BudgetKind, PerBudget, Ratios, Residuals};
pub use types::{
    AttentionReport, Budgets, ControlReport, Conventions, Cost, FlopBreakdown, FlopReport,
    KvAtContext, KvReport, ParamBreakdown, ParamReport, SelectedKeys, Sparsity, WindowedKeys,
};

use crate::error::{Error, Result};
use crate::model::{Counting, KvCount, Model, ModelSpec, Workload};
use crate::units::{Bytes, Flops, KvElements, Params, product};
use layer::LayerCost;

/// FLOPs per multiply-add.
pub const FLOPS_PER_MULTIPLY_ADD: u64 = 2;
/// Training FLOPs over forward FLOPs (forward + a backward of twice the forward).
pub const TRAINING_OVER_FORWARD: u64 = 3;

/// `(MoE, dense)` physical layers.
fn layer_split(model: &Model) -> (u64, u64) {
    let dense = model.dense_layers();
    (model.layers - dense, dense)
}

/// The embedding and LM-head matrices counted: `(embeddings, lm_head)`.
fn vocab_matrices(model: &Model, counting: &Counting) -> Result<(Params, Params)> {
    let matrix = Params(product(&[model.vocab, model.hidden], "params.embeddings")?);
    let embeddings = if counting.embeddings {
        matrix
    } else {
        Params::ZERO
    };
    let lm_head = if counting.lm_head && !(model.tie_embeddings && counting.embeddings) {
        matrix
    } else {
        Params::ZERO
    };
    let bias = Params(if counting.lm_head && model.lm_head_bias {
        model.vocab
    } else {
        0
    });
    Ok((embeddings, lm_head.checked_add(bias)?))
}

/// Parameters of the multi-token-prediction modules when counted: `(total, active)`.
fn mtp_params(model: &Model, layer: &LayerCost, counting: &Counting) -> Result<(Params, Params)> {
    if !counting.mtp || model.mtp_layers == 0 {
        return Ok((Params::ZERO, Params::ZERO));
    }
    let h = model.hidden;
    let (a, f) = (&layer.attention, &layer.moe);
    let (embeddings, lm_head) = vocab_matrices(model, counting)?;
    // The block (attention with its indexer, MoE, two norms), the projection of [norm(h); norm(embedding)]
    // (2H x H), three norms (enorm, hnorm, the head's norm) and the module's own embedding
    // and head, as the checkpoint stores them.
    let indexer = layer.indexer.map_or(0, |ix| ix.params);
    let common = Params::sum(&[
        Params(a.params),
        Params(a.norms),
        Params(indexer),
        Params(product(&[5, model.norm_params()], "params.mtp")?),
        Params(product(&[2, h, h], "params.mtp")?),
        Params(f.router),
        Params(f.shared),
        embeddings,
        lm_head,
    ])?;
    let total = common.checked_add(Params(f.experts))?;
    let active = common.checked_add(Params(f.active_experts))?;
    Ok((
        total.checked_mul(model.mtp_layers)?,
        active.checked_mul(model.mtp_layers)?,
    ))
}

/// Parameters of `model`: `(total, active)` breakdowns.
pub fn params(model: &Model, counting: &Counting) -> Result<(ParamBreakdown, ParamBreakdown)> {
    params_of(model, &LayerCost::of(model)?, counting)
}

/// [`params`] of `model`, whose layers are `layer`.
fn params_of(
    model: &Model,
    layer: &LayerCost,
    counting: &Counting,
) -> Result<(ParamBreakdown, ParamBreakdown)> {
    let (h, l) = (model.hidden, model.layers);
    let (moe_layers, dense_layers) = layer_split(model);
    let (a, f) = (&layer.attention, &layer.moe);
    let per_moe_layer = |x: u64| Params(x).checked_mul(moe_layers);
    let dense_ffn = model.dense.as_ref().map_or(0, |d| d.ffn);
    let norm = model.norm_params();
    let per_layer_norms = crate::units::add(
        product(&[2, norm], "params.norms")?,
        a.norms,
        "params.norms",
    )?;
    let (embeddings, lm_head) = vocab_matrices(model, counting)?;
    let (mtp, active_mtp) = mtp_params(model, layer, counting)?;
    let total = ParamBreakdown {
        attention: Params(a.params).checked_mul(l)?,
        experts: per_moe_layer(f.experts)?,
        router: per_moe_layer(f.router)?,
        shared: per_moe_layer(f.shared)?,
        dense: Params(product(&[3, h, dense_ffn, dense_layers], "params.dense")?),
        norms: Params(per_layer_norms)
            .checked_mul(l)?
            .checked_add(Params(norm))?,
        indexer: Params(layer.indexer.map_or(0, |ix| ix.params)).checked_mul(l)?,
        embeddings,
        lm_head,
        mtp,
    };
    let active = ParamBreakdown {
        experts: per_moe_layer(f.active_experts)?,
        mtp: active_mtp,
        ..total
    };
    Ok((total, active))
}

/// Forward FLOPs per token of `model` on `workload`, by component.
pub fn forward_flops(
    model: &Model,
    workload: &Workload,
    counting: &Counting,
) -> Result<FlopBreakdown> {
    forward_flops_with(model, &Keys::of(workload, model)?, counting)
}

/// [`forward_flops`] with the workload's keys per query already computed (for search).
pub fn forward_flops_with(
    model: &Model,
    keys: &Keys,
    counting: &Counting,
) -> Result<FlopBreakdown> {
    keys.check(model)?;
    forward_of(model, &LayerCost::of(model)?, keys, counting)
}

/// [`forward_flops_with`] of `model`, whose layers are `layer`, with keys checked against it.
fn forward_of(
    model: &Model,
    layer: &LayerCost,
    keys: &Keys,
    counting: &Counting,
) -> Result<FlopBreakdown> {
    let h = model.hidden;
    let (a, f, x) = (&layer.attention, &layer.moe, &layer.runs);
    let flops = |macs: u64, times: u64, what| {
        Ok::<_, crate::Error>(Flops::from_int(product(&[2, macs, times], what)?))
    };
    // With an indexer, every layer's core attends the selected keys and the indexer scores
    // the full ones: per execution, its projections and `score_width` per scored key.
    let (core, indexer_per) = match (layer.indexer, keys.selected) {
        (Some(ix), Some((_, selected))) => (
            selected.attention_flops(a.core_width)?,
            flops(ix.macs, 1, "flops.indexer")?
                .checked_add(keys.full.attention_flops(ix.score_width)?)?,
        ),
        _ => (keys.full.attention_flops(a.core_width)?, Flops::ZERO),
    };
    let mut attention_core = core.checked_mul(x.full)?;
    if let Some((_, _, w)) = keys.windowed {
        attention_core = attention_core
            .checked_add(w.attention_flops(a.core_width)?.checked_mul(x.windowed)?)?;
    }
    let dense_ffn = model.dense.as_ref().map_or(0, |d| d.ffn);
    let lm_head_macs = product(&[h, model.vocab], "flops.lm_head")?;
    let lm_head = if counting.lm_head {
        flops(lm_head_macs, 1, "flops.lm_head")?
    } else {
        Flops::ZERO
    };
    let mtp = if counting.mtp && model.mtp_layers > 0 {
        // Per module: the projection of [norm(h); norm(embedding)], one MoE layer with full
        // attention (and its indexer), and the head when it is counted.
        let macs = [a.macs, f.router_macs, f.expert_macs, f.shared_macs]
            .into_iter()
            .try_fold(product(&[2, h, h], "flops.mtp")?, |s, m| {
                crate::units::add(s, m, "flops.mtp")
            })?;
        let head = if counting.lm_head { lm_head_macs } else { 0 };
        flops(
            crate::units::add(macs, head, "flops.mtp")?,
            model.mtp_layers,
            "flops.mtp",
        )?
        .checked_add(core.checked_mul(model.mtp_layers)?)?
        .checked_add(indexer_per.checked_mul(model.mtp_layers)?)?
    } else {
        Flops::ZERO
    };
    Ok(FlopBreakdown {
        projections: flops(a.macs, x.total, "flops.projections")?,
        attention_core,
        router: flops(f.router_macs, x.moe, "flops.router")?,
        experts: flops(f.expert_macs, x.moe, "flops.experts")?,
        shared: flops(f.shared_macs, x.moe, "flops.shared")?,
        dense: flops(
            product(&[3, h, dense_ffn], "flops.dense")?,
            x.dense,
            "flops.dense",
        )?,
        lm_head,
        mtp,
        indexer: indexer_per.checked_mul(x.total)?,
    })
}

/// KV-cache elements per token: the attention block's per execution, over all executions.
fn kv_elements(layer: &LayerCost) -> Result<KvElements> {
    Ok(KvElements(product(
        &[layer.attention.kv, layer.runs.total],
        "kv_cache.elements",
    )?))
}

/// KV-cache elements one sequence of `context` tokens holds at its end: `context` entries
/// per full layer execution, at most the window per windowed one.
fn kv_at_context(model: &Model, layer: &LayerCost, context: u64) -> Result<KvElements> {
    let per = layer.attention.kv;
    let held = model.window.as_ref().map_or(0, |w| w.size.min(context));
    let full = product(&[per, layer.runs.full, context], "kv_cache.at_context")?;
    let windowed = product(&[per, layer.runs.windowed, held], "kv_cache.at_context")?;
    Ok(KvElements(crate::units::add(
        full,
        windowed,
        "kv_cache.at_context",
    )?))
}

/// KV cache of `model` on `workload`: per token, and held by one sequence at the context.
pub fn kv_cache(model: &Model, workload: &Workload, counting: &Counting) -> Result<KvReport> {
    kv_report(model, &LayerCost::of(model)?, workload, counting)
}

/// [`kv_cache`] of `model`, whose layers are `layer`.
fn kv_report(
    model: &Model,
    layer: &LayerCost,
    workload: &Workload,
    counting: &Counting,
) -> Result<KvReport> {
    let bytes = |e: KvElements| {
        Ok::<_, crate::Error>(Bytes(product(
            &[e.0, workload.kv_dtype_bytes],
            "kv_cache.bytes",
        )?))
    };
    let elements = kv_elements(layer)?;
    let at_context = kv_at_context(model, layer, workload.context)?;
    Ok(KvReport {
        elements,
        bytes: bytes(elements)?,
        at_context: KvAtContext {
            context: workload.context,
            elements: at_context,
            bytes: bytes(at_context)?,
        },
        budget: counting.kv,
    })
}

/// The KV budget `counting` asks for.
fn kv_budget(
    model: &Model,
    layer: &LayerCost,
    context: u64,
    counting: &Counting,
) -> Result<KvElements> {
    match counting.kv {
        KvCount::PerToken => kv_elements(layer),
        KvCount::AtContext => kv_at_context(model, layer, context),
    }
}

/// The three budgets of a validated spec, without the report around them.
pub fn budgets(spec: &ModelSpec) -> Result<Budgets> {
    budgets_with(
        &spec.model,
        &Keys::of(&spec.workload, &spec.model)?,
        spec.workload.context,
        &spec.counting,
    )
}

/// [`budgets`] of a model with the workload's keys per query already computed (for
/// search); `context` is the workload's, for a KV budget counted at the context.
pub fn budgets_with(
    model: &Model,
    keys: &Keys,
    context: u64,
    counting: &Counting,
) -> Result<Budgets> {
    keys.check(model)?;
    let layer = LayerCost::of(model)?;
    let (total, _) = params_of(model, &layer, counting)?;
    let forward = forward_of(model, &layer, keys, counting)?.total()?;
    Ok(Budgets {
        flops: forward.checked_mul(TRAINING_OVER_FORWARD)?,
        params: total.total()?,
        kv: kv_budget(model, &layer, context, counting)?,
    })
}

/// For a histogram workload, what the mean-length shortcut says: the exact count of
/// `spec`'s model (whose layers are `layer`) with `keys` taken at the histogram's mean
/// document length ([`Keys::at_mean_length`]), against the exact training FLOPs `exact`.
/// `None` for a `mean_doc_len` workload, and when the count at that fractional length does
/// not fit in 128 bits (its denominators are products of the document and token counts).
fn shortcut(
    spec: &ModelSpec,
    layer: &LayerCost,
    keys: &Keys,
    exact: Flops,
) -> Result<Option<Shortcut>> {
    let at_mean = keys.at_mean_length(&spec.workload).and_then(|at| {
        at.map(|(mean, short)| {
            let forward = forward_of(&spec.model, layer, &short, &spec.counting)?.total()?;
            Ok((mean, short, forward.checked_mul(TRAINING_OVER_FORWARD)?))
        })
        .transpose()
    });
    let (mean, short, training) = match at_mean {
        Ok(Some(at)) => at,
        Ok(None) | Err(Error::Overflow { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let training = training.as_f64();
    Ok(Some(Shortcut {
        mean_doc_len: mean,
        mean_keys_per_query: short.full.as_f64(),
        training_flops: training,
        relative_to_exact: crate::units::relative(training, exact.as_f64()),
    }))
}

/// The cost of `spec`, with sparsity measured against its own fully-activated control.
pub fn cost(spec: &ModelSpec) -> Result<Cost> {
    cost_against(spec, spec)
}

/// The cost of `spec`, with sparsity measured against the fully-activated control of
/// `baseline` (how a looped model is measured against its Baseline's scale).
pub fn cost_against(spec: &ModelSpec, baseline: &ModelSpec) -> Result<Cost> {
    spec.validate()?;
    baseline.validate()?;
    let layer = LayerCost::of(&spec.model)?;
    let keys = Keys::of(&spec.workload, &spec.model)?;
    let (breakdown, active_breakdown) = params_of(&spec.model, &layer, &spec.counting)?;
    let forward_breakdown = forward_of(&spec.model, &layer, &keys, &spec.counting)?;
    let forward = forward_breakdown.total()?;
    let training = forward.checked_mul(TRAINING_OVER_FORWARD)?;
    let total = breakdown.total()?;

    let control = baseline.control();
    let control_budgets = budgets(&control)?;
    let n_act_eq =
        training.as_f64() / control_budgets.flops.as_f64() * control_budgets.params.as_f64();
    let shortcut = shortcut(spec, &layer, &keys, training)?;

    Ok(Cost {
        name: spec.name.clone(),
        conventions: Conventions {
            flops_per_multiply_add: FLOPS_PER_MULTIPLY_ADD,
            training_over_forward: TRAINING_OVER_FORWARD,
            attention: spec.workload.attention,
            attention_keys_from: if spec.workload.doc_lengths.is_some() {
                "doc_lengths"
            } else {
                "mean_doc_len"
            },
            embeddings_counted: spec.counting.embeddings,
            lm_head_counted: spec.counting.lm_head,
            kv_dtype_bytes: spec.workload.kv_dtype_bytes,
            mtp_counted: spec.counting.mtp,
            kv_budget: spec.counting.kv,
            workload: spec.workload.clone(),
        },
        physical_layers: spec.model.layers,
        layer_executions: layer.runs.total,
        params: ParamReport {
            total,
            active: active_breakdown.total()?,
            breakdown,
            active_breakdown,
        },
        flops_per_token: FlopReport {
            training,
            forward,
            forward_breakdown,
        },
        kv_cache_per_token: kv_report(&spec.model, &layer, &spec.workload, &spec.counting)?,
        attention: AttentionReport {
            mean_keys_per_query: keys.full.as_f64(),
            mean_keys_exact: keys.full.to_string(),
            windowed: keys.windowed.map(|(kind, size, w)| WindowedKeys {
                kind,
                size,
                mean_keys_per_query: w.as_f64(),
                mean_keys_exact: w.to_string(),
            }),
            selected: keys.selected.map(|(topk, s)| SelectedKeys {
                topk,
                mean_keys_per_query: s.as_f64(),
                mean_keys_exact: s.to_string(),
            }),
            mean_length_shortcut: shortcut,
        },
        sparsity: Sparsity {
            s: 1.0 - n_act_eq / total.as_f64(),
            n_act_eq,
            control: ControlReport {
                of: baseline
                    .name
                    .clone()
                    .unwrap_or_else(|| "the model".to_owned()),
                flops_training: control_budgets.flops,
                params: control_budgets.params,
            },
        },
    })
}
