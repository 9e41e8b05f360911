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
//!   when configured ([`AttentionBias`]: `(heads + 2*kv_heads)*d` for Q, K, V, plus `H` for O);
//! * experts: `E * 3*H*f` (gate, up, down) per MoE layer;
//! * router: `H * E` (linear, no bias) per MoE layer;
//! * shared: `s * 3*H*f_s` per MoE layer, plus `H` for the sigmoid gate if configured;
//! * dense: `3*H*f_d` per dense layer;
//! * norms: `2*H` per layer (pre-attention and pre-FFN RMSNorm) plus `H` for the final norm,
//!   plus q/k norms if configured (`2*d` per layer for [`QkNorm::PerHead`],
//!   `(heads + kv_heads)*d` for [`QkNorm::Full`]);
//! * embeddings `vocab*H` and LM head `vocab*H` only when `[counting]` asks (a tied LM head
//!   is not counted twice).
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
//! **Compute-equivalent sparsity** (SMELT, Eq. 1): with `F0, N0` the training FLOPs and
//! parameters of the fully-activated control (same shapes, not looped, `E = k`, see
//! [`ModelSpec::control`]), `N_act_eq = (F / F0) * N0` and `S = 1 - N_act_eq / N`. A looped
//! model is measured against the control of its Baseline ([`cost_against`]).
//!
//! Reference: Wang et al., "SMELT: Scaling Laws for Compute-Matched MoE Looped
//! Transformers", arXiv 2609.01343, §2 and Appendix A.

mod attention;
mod compare;
mod per_budget;
mod types;

pub use attention::{MeanKeys, Shortcut};
pub use compare::{Comparison, compare};
pub use per_budget::{BudgetKind, PerBudget, Ratios, Residuals};
pub use types::{
    AttentionReport, Budgets, ControlReport, Conventions, Cost, FlopBreakdown, FlopReport,
    KvReport, ParamBreakdown, ParamReport, Sparsity,
};

use crate::error::Result;
use crate::spec::{AttentionBias, Counting, Model, ModelSpec, QkNorm, Workload};
use crate::units::{Bytes, Flops, KvElements, Params, product};

/// FLOPs per multiply-add.
pub const FLOPS_PER_MULTIPLY_ADD: u64 = 2;
/// Training FLOPs over forward FLOPs (forward + a backward of twice the forward).
pub const TRAINING_OVER_FORWARD: u64 = 3;

/// `(heads * head_dim, (heads + 2 * kv_heads) * head_dim)`, checked.
fn widths(model: &Model) -> Result<(u64, u64)> {
    let q = product(&[model.heads, model.head_dim], "the query width")?;
    let kv = product(&[2, model.kv_heads, model.head_dim], "the key/value width")?;
    Ok((q, crate::units::add(q, kv, "the q/k/v width")?))
}

/// Layer executions, checked.
fn executions(model: &Model) -> Result<u64> {
    let extra = model.looping.as_ref().map_or(Ok(0), |l| {
        product(&[l.repeats.saturating_sub(1), l.span], "layer executions")
    })?;
    crate::units::add(model.layers, extra, "layer executions")
}

fn qk_norm_params(model: &Model) -> Result<u64> {
    Ok(match model.qk_norm {
        QkNorm::None => 0,
        QkNorm::PerHead => product(&[2, model.head_dim], "params.norms")?,
        QkNorm::Full => product(
            &[
                crate::units::add(model.heads, model.kv_heads, "params.norms")?,
                model.head_dim,
            ],
            "params.norms",
        )?,
    })
}

fn bias_params(model: &Model, qkv_width: u64) -> Result<u64> {
    Ok(match model.attention_bias {
        AttentionBias::None => 0,
        AttentionBias::Qkv => qkv_width,
        AttentionBias::All => crate::units::add(qkv_width, model.hidden, "params.attention")?,
    })
}

/// `(MoE, dense)` physical layers.
fn layer_split(model: &Model) -> (u64, u64) {
    let dense = model.dense_layers();
    (model.layers - dense, dense)
}

/// `(MoE, dense)` layer executions, checked.
fn execution_split(model: &Model) -> Result<(u64, u64)> {
    let x = executions(model)?;
    let dense = model.dense_executions();
    Ok((x - dense, dense))
}

/// Parameters of one MoE layer's shared experts and gate.
fn shared_params_per_layer(model: &Model) -> Result<u64> {
    let moe = &model.moe;
    let experts = product(
        &[3, model.hidden, moe.shared_ffn, moe.shared_experts],
        "params.shared",
    )?;
    let gate = if moe.shared_gate { model.hidden } else { 0 };
    crate::units::add(experts, gate, "params.shared")
}

/// Parameters of `model`: `(total, active)` breakdowns.
pub fn params(model: &Model, counting: &Counting) -> Result<(ParamBreakdown, ParamBreakdown)> {
    let (h, l, moe) = (model.hidden, model.layers, &model.moe);
    let (moe_layers, dense_layers) = layer_split(model);
    let (q_width, qkv_width) = widths(model)?;
    let bias = bias_params(model, qkv_width)?;
    let per_layer_attention = product(&[h, qkv_width], "params.attention")?
        .checked_add(product(&[q_width, h], "params.attention")?)
        .and_then(|p| p.checked_add(bias))
        .ok_or(crate::Error::Overflow {
            what: "params.attention",
        })?;
    let attention = Params(per_layer_attention).checked_mul(l)?;
    let expert = product(&[3, h, moe.expert_ffn], "params.experts")?;
    let experts = Params(product(
        &[expert, moe.experts, moe_layers],
        "params.experts",
    )?);
    let active_experts = Params(product(&[expert, moe.top_k, moe_layers], "params.experts")?);
    let router = Params(product(&[h, moe.experts, moe_layers], "params.router")?);
    let shared = Params(product(
        &[shared_params_per_layer(model)?, moe_layers],
        "params.shared",
    )?);
    let dense_ffn = model.dense.as_ref().map_or(0, |d| d.ffn);
    let dense = Params(product(&[3, h, dense_ffn, dense_layers], "params.dense")?);
    let per_layer_norms = product(&[2, h], "params.norms")?
        .checked_add(qk_norm_params(model)?)
        .ok_or(crate::Error::Overflow {
            what: "params.norms",
        })?;
    let norms = Params(per_layer_norms)
        .checked_mul(l)?
        .checked_add(Params(h))?;
    let vocab_matrix = Params(product(&[model.vocab, h], "params.embeddings")?);
    let embeddings = if counting.embeddings {
        vocab_matrix
    } else {
        Params::ZERO
    };
    let lm_head = if counting.lm_head && !(model.tie_embeddings && counting.embeddings) {
        vocab_matrix
    } else {
        Params::ZERO
    };
    let total = ParamBreakdown {
        attention,
        experts,
        router,
        shared,
        dense,
        norms,
        embeddings,
        lm_head,
    };
    let active = ParamBreakdown {
        experts: active_experts,
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
    forward_flops_with(model, MeanKeys::of(workload)?, counting)
}

/// [`forward_flops`] with the workload's keys per query already computed (for search).
pub fn forward_flops_with(
    model: &Model,
    keys: MeanKeys,
    counting: &Counting,
) -> Result<FlopBreakdown> {
    let (h, moe) = (model.hidden, &model.moe);
    let x = executions(model)?;
    let (x_moe, x_dense) = execution_split(model)?;
    let (q_width, qkv_width) = widths(model)?;
    let projections = Flops::from_int(product(&[2, h, qkv_width], "flops.projections")?)
        .checked_add(Flops::from_int(product(
            &[2, q_width, h],
            "flops.projections",
        )?))?
        .checked_mul(x)?;
    let attention_core = keys.attention_flops(q_width)?.checked_mul(x)?;
    let router = Flops::from_int(product(&[2, h, moe.experts, x_moe], "flops.router")?);
    let experts = Flops::from_int(product(
        &[moe.top_k, 2, 3, h, moe.expert_ffn, x_moe],
        "flops.experts",
    )?);
    let shared_experts = product(
        &[moe.shared_experts, 2, 3, h, moe.shared_ffn],
        "flops.shared",
    )?;
    let gate = if moe.shared_gate {
        product(&[2, h], "flops.shared")?
    } else {
        0
    };
    let shared = Flops::from_int(product(
        &[
            crate::units::add(shared_experts, gate, "flops.shared")?,
            x_moe,
        ],
        "flops.shared",
    )?);
    let dense_ffn = model.dense.as_ref().map_or(0, |d| d.ffn);
    let dense = Flops::from_int(product(&[2, 3, h, dense_ffn, x_dense], "flops.dense")?);
    let lm_head = if counting.lm_head {
        Flops::from_int(product(&[2, h, model.vocab], "flops.lm_head")?)
    } else {
        Flops::ZERO
    };
    Ok(FlopBreakdown {
        projections,
        attention_core,
        router,
        experts,
        shared,
        dense,
        lm_head,
    })
}

/// KV-cache elements per token: `2 * kv_heads * head_dim` per layer execution.
fn kv_elements(model: &Model) -> Result<KvElements> {
    Ok(KvElements(product(
        &[2, model.kv_heads, model.head_dim, executions(model)?],
        "kv_cache.elements",
    )?))
}

/// KV cache per token of `model` on `workload`.
pub fn kv_cache(model: &Model, workload: &Workload) -> Result<KvReport> {
    let elements = kv_elements(model)?;
    let bytes = Bytes(product(
        &[elements.0, workload.kv_dtype_bytes],
        "kv_cache.bytes",
    )?);
    Ok(KvReport { elements, bytes })
}

/// The three budgets of a validated spec, without the report around them.
pub fn budgets(spec: &ModelSpec) -> Result<Budgets> {
    budgets_with(&spec.model, MeanKeys::of(&spec.workload)?, &spec.counting)
}

/// [`budgets`] of a model with the workload's keys per query already computed (for search).
pub fn budgets_with(model: &Model, keys: MeanKeys, counting: &Counting) -> Result<Budgets> {
    let (total, _) = params(model, counting)?;
    let forward = forward_flops_with(model, keys, counting)?.total()?;
    Ok(Budgets {
        flops: forward.checked_mul(TRAINING_OVER_FORWARD)?,
        params: total.total()?,
        kv: kv_elements(model)?,
    })
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
    let (breakdown, active_breakdown) = params(&spec.model, &spec.counting)?;
    let forward_breakdown = forward_flops(&spec.model, &spec.workload, &spec.counting)?;
    let forward = forward_breakdown.total()?;
    let training = forward.checked_mul(TRAINING_OVER_FORWARD)?;
    let total = breakdown.total()?;

    let control = baseline.control();
    let control_budgets = budgets(&control)?;
    let n_act_eq =
        training.as_f64() / control_budgets.flops.as_f64() * control_budgets.params.as_f64();
    let keys = MeanKeys::of(&spec.workload)?;
    let shortcut = keys.shortcut(spec, training)?;

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
            workload: spec.workload.clone(),
        },
        physical_layers: spec.model.layers,
        layer_executions: executions(&spec.model)?,
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
        kv_cache_per_token: kv_cache(&spec.model, &spec.workload)?,
        attention: AttentionReport {
            mean_keys_per_query: keys.as_f64(),
            mean_keys_exact: keys.to_string(),
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
