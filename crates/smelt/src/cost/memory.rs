//! Activation memory: the bytes per token a training step saves for the backward pass, by
//! component, under a named execution policy ([`ActivationPolicy`]). This module counts the
//! **unfused** policies, `unfused-eager`, `unfused-flash`, `unfused-selective` and
//! `unfused-full` (`eager`, `flash`, `selective` and `full` below; those names read as
//! them): what each op needs when every op is its own autograd node, a lower bound for
//! such a step but not for fused kernels that recompute elementwise ops (Megatron-Core's,
//! [`super::megatron`]). The stacks' counts are [`super::megatron`] and
//! [`super::transformers`].
//!
//! Every count is per token and per **layer execution** (a looped layer visited twice saves
//! its activations twice, unless recomputed), summed over the executions, exact, in bytes:
//! elements × `[counting] activation_bytes` (2 by default: bf16), except the log-sum-exp a
//! fused attention kernel saves (fp32, 4 bytes) and an indexer's selected key indices
//! (int32, 4 bytes). A tensor several ops save (the normed input every projection reads) is
//! counted once. What an op saves is what its backward reads: a matmul saves its input (the
//! weights are parameters, not activations), a norm its input, a softmax its output, an
//! elementwise product both factors, SiLU its input; bias adds, residual adds, the loop's
//! residual scale, RoPE and the routing top-k save no activation. A norm's per-row
//! statistics (one fp32 per row), dropout (the models have none), the embedding's output,
//! the final norm, the LM head's logits and loss, and MTP modules are not counted: this is
//! the decoder layers' memory, which looping multiplies.
//!
//! Per execution of a layer with hidden size `H`, query heads `a` of width `d` (`q = a·d`),
//! `kv_heads·d = kv`, and the workload's mean document length per token `T̄`
//! ([`Keys::rows`]: `T` for `mean_doc_len`, `Σ n·T² / Σ n·T` for a histogram), in elements:
//!
//! | component | `eager` | `flash` | `selective` | `full` |
//! |---|---|---|---|---|
//! | layer input (the checkpoint) | – | – | – | `H` |
//! | norm inputs: both layer norms, q/k norms, MLA's latent norms | `2H (+ q + kv) (+ r_q + r)` | same | same | – |
//! | attention: normed input, MLA's normed latents, `q`, `k`, `v` at the core, its output | `H + 4q` (GQA: keys and values expanded to every head) | `H + 2q + 2kv` | as `flash` | – |
//! | scores | probabilities `a·(T̄ + sink)` | log-sum-exp `a` (fp32) | – | – |
//! | indexer (`[model.indexer]`) | – | selected indices `topk` (int32) | as `flash` | – |
//! | FFN input (its normed input) | `H` | same | same | – |
//! | router (MoE layers) | probabilities `E` + chosen weights `k` | same | same | – |
//! | routed experts (MoE layers) | `k·(H + 4F + H)`: the dispatched copy, SwiGLU's gate, up, SiLU and product, the output the weight multiplies (`k·(H + 7F + H)` with the clamped SwiGLU) | same | same | – |
//! | shared experts (MoE layers) | `n·4F_s`, and with a gate its sigmoid `1` and each output `n·H` | same | same | – |
//! | dense FFN (`[model.dense]` layers) | `4F` | same | same | – |
//!
//! * **eager** is a plain PyTorch/Transformers step with eager attention: each document is
//!   its own sequence and the layer materialises the masked square, so every query saves a
//!   row of `T` probabilities (`T + 1` with a sink's column), whatever the causal mask,
//!   window or indexer selection; grouped keys and values are expanded to every query head
//!   before the core (`repeat_kv`). The scores before the softmax are not saved (its
//!   backward reads its output). Under `eager` an indexer saves nothing: its scores only
//!   select keys (no gradient reaches it through the loss; DeepSeek trains it on a separate
//!   loss, not counted) and the selection enters as a mask.
//! * **flash**: attention is one fused kernel that saves `q`, `k`, `v` (grouped keys and
//!   values at `kv_heads` width), its output and one fp32 log-sum-exp per head and query;
//!   with an indexer the kernel also keeps the `topk` selected key indices per query (padded
//!   to `topk`, int32), as DeepSeek's sparse kernel does.
//! * **selective** (Megatron's selective recomputation, Korthikanti et al.): the attention
//!   core is recomputed in the backward pass from `q`, `k`, `v` (and the indices), which
//!   are kept, as is its output; nothing per key and no log-sum-exp.
//! * **full**: every layer execution is recomputed from its input, the one tensor kept (the
//!   transient memory of the one layer being recomputed is not counted).
//!
//! The clamped SwiGLU (`[model.moe] activation = "clamped_swiglu"`, gpt-oss's
//! `(clamp(up) + 1)·g·σ(α·g)` with `g = clamp(gate)`, as its reference and Transformers'
//! modelling code compose it from clamp, sigmoid and products) saves `7F` per routed copy
//! where SwiGLU saves `4F`: both clamps' inputs, `g`, `σ(α·g)`, `up + 1`, `g·σ(α·g)` and
//! the product the down projection reads.
//!
//! MLA's rows: the query latent (`r_q`, when the model has one) and the key/value latent
//! `r` each save a norm input and a normed copy; its queries and keys are
//! `a·(d_n + d_r)` wide, its values and output `a·d_v`. Windows change none of these counts:
//! `eager` materialises the masked square, the others save nothing per key. Sinks add one
//! column to each eager row.
//!
//! Check against Korthikanti et al., "Reducing Activation Recomputation in Large
//! Transformer Models", arXiv:2205.05198, §4: a GPT layer saves `s·b·h·(34 + 5·a·s/h)`
//! bytes in 16-bit with no recomputation, `34·s·b·h` with selective recomputation and
//! `2·s·b·h` with full. A layer of this module with `a` heads of width `h/a`, a dense SwiGLU
//! FFN of width `2h` (which saves what a GeLU MLP of width `4h` saves: `h + 8h` elements)
//! and a document of `s` tokens gives `32·h + 2·a·s` bytes per token under `eager`, `32·h`
//! under `selective` and `2·h` under `full`; the difference is exactly their dropout: two
//! 1-byte masks of `h` on the residual branches, and on the attention probabilities a
//! 1-byte mask and a 2-byte output of `a·s` each (a unit test checks all three).

use serde::Serialize;

use super::Keys;
use crate::error::Result;
use crate::model::{
    ActivationPolicy, AttentionLayer, AttentionShape, Consumer, Counting, ExpertActivation, Ffn,
    LayerKind, Model, Moe, QkNorm, Stack, TokenMixer,
};
use crate::units::{ActivationBytes, product};

/// Bytes of an fp32 log-sum-exp and of an int32 key index.
const FOUR_BYTES: u64 = 4;

/// Saved bytes per token of a model's layer executions, by component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct ActivationBreakdown {
    /// Each execution's input (`full` only).
    pub layer_inputs: ActivationBytes,
    /// Inputs of the layer norms, the q/k norms and MLA's latent norms.
    pub norms: ActivationBytes,
    /// The attention block's normed input, MLA's normed latents, `q`, `k`, `v` and the
    /// core's output.
    pub attention: ActivationBytes,
    /// Attention probabilities (`eager`) or log-sum-exp (`flash`).
    pub scores: ActivationBytes,
    /// An indexer's selected key indices (`flash`, `selective`).
    pub indexer: ActivationBytes,
    /// The FFN's normed input.
    pub ffn_input: ActivationBytes,
    /// Router probabilities and the chosen experts' weights.
    pub router: ActivationBytes,
    /// Routed experts: dispatched copies, SwiGLU intermediates, outputs.
    pub experts: ActivationBytes,
    /// Shared experts (and their gate).
    pub shared: ActivationBytes,
    /// Dense FFNs of the layers that have no MoE.
    pub dense: ActivationBytes,
}

impl ActivationBreakdown {
    /// The checked exact sum of the components.
    pub fn total(&self) -> Result<ActivationBytes> {
        ActivationBytes::sum(&[
            self.layer_inputs,
            self.norms,
            self.attention,
            self.scores,
            self.indexer,
            self.ffn_input,
            self.router,
            self.experts,
            self.shared,
            self.dense,
        ])
    }
}

/// The activation memory of a model under one policy.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct PolicyActivations {
    /// The policy.
    pub policy: ActivationPolicy,
    /// Bytes per token over every layer execution.
    pub per_token: ActivationBytes,
    /// `per_token` by component.
    pub breakdown: ActivationBreakdown,
    /// Bytes one sequence of the workload's `context` tokens keeps: `per_token·context`
    /// (a micro-batch of one sequence; shown as the nearest float when not whole).
    pub at_context: ActivationBytes,
}

/// The activation memory of a model under every policy, and which one its budget counts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ActivationReport {
    /// Bytes per saved element (`[counting] activation_bytes`).
    pub activation_bytes: u64,
    /// The policy the activations budget counts (`[counting] activations`).
    pub budget: ActivationPolicy,
    /// The modules it recomputes, when it is `megatron-selective` (`[counting]
    /// recompute_modules`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recompute_modules: Option<crate::model::RecomputeModules>,
    /// One entry per policy, in the order of the unfused counts (`unfused-eager`,
    /// `-flash`, `-selective`, `-full`), then the budget's policy when it is a stack's and
    /// counts the model (none when the activation memory refuses the model; the budget's
    /// alone for Gemma 4's pieces, which only the Transformers policies count).
    pub policies: Vec<PolicyActivations>,
    /// Why the activations budget is not counted for this model (recurrent layers, or a
    /// feature the budget's Megatron-Core policy refuses), if it is not: the budget is then 0
    /// and cannot be weighed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// Saved elements per token of one execution of one kind of layer, by dtype: the
/// activation dtype (`act`, with the eager rows' `a·T̄` apart, as it is a fraction) and
/// 4-byte (`wide`) elements.
#[derive(Debug, Clone, Copy, Default)]
struct PerExecution {
    act: u64,
    /// Heads whose eager row of `T̄` probabilities is saved.
    rows: u64,
    wide: u64,
}

impl PerExecution {
    fn act(n: u64) -> Self {
        Self {
            act: n,
            ..Self::default()
        }
    }

    /// Bytes per token over `times` executions, with `T̄ = rows`.
    fn bytes(self, keys: &Keys, b: u64, times: u64) -> Result<ActivationBytes> {
        const WHAT: &str = "activations";
        let fixed = crate::units::add(
            product(&[self.act, b], WHAT)?,
            product(&[self.wide, FOUR_BYTES], WHAT)?,
            WHAT,
        )?;
        let rows = u128::from(product(&[self.rows, b, times], WHAT)?)
            .checked_mul(keys.rows.pairs)
            .ok_or(crate::Error::Overflow { what: WHAT })?;
        ActivationBytes::ratio(rows, keys.rows.queries)?
            .checked_add(ActivationBytes::from_int(product(&[fixed, times], WHAT)?))
    }

    /// `self` over `times` executions, plus `acc`.
    fn add_times(self, times: u64, acc: Self) -> Result<Self> {
        const WHAT: &str = "activations";
        let f = |x: u64, y: u64| crate::units::add(product(&[x, times], WHAT)?, y, WHAT);
        Ok(Self {
            act: f(self.act, acc.act)?,
            rows: f(self.rows, acc.rows)?,
            wide: f(self.wide, acc.wide)?,
        })
    }
}

/// What one execution of the attention block `a` saves under `policy` (not `full`), on a
/// residual stream of width `h`: `(norm inputs, attention, scores, indexer)`.
fn attention_saves(
    h: u64,
    a: &AttentionLayer,
    policy: ActivationPolicy,
) -> Result<[PerExecution; 4]> {
    const WHAT: &str = "activations.attention";
    let eager = policy == ActivationPolicy::Eager;
    let heads = a.shape.heads();
    let (norms, attention) = match &a.shape {
        AttentionShape::Gqa {
            kv_heads, head_dim, ..
        } => {
            let q = product(&[heads, *head_dim], WHAT)?;
            let kv = product(&[*kv_heads, *head_dim], WHAT)?;
            let qk_norms = match a.qk_norm {
                QkNorm::None => 0,
                QkNorm::PerHead | QkNorm::Full | QkNorm::L2 => q + kv,
            };
            // k and v at the core: expanded to every head by eager's repeat_kv.
            let kv_core = if eager { q } else { kv };
            (qk_norms, h + q + 2 * kv_core + q)
        }
        AttentionShape::Mla { mla, .. } => {
            let qk = product(&[heads, mla.qk_nope_head_dim + mla.qk_rope_head_dim], WHAT)?;
            let v = product(&[heads, mla.v_head_dim], WHAT)?;
            let latents = mla.q_lora_rank + mla.kv_lora_rank;
            (latents, h + latents + 2 * qk + 2 * v)
        }
    };
    let scores = match policy {
        ActivationPolicy::Eager => PerExecution {
            act: if a.sinks { heads } else { 0 },
            rows: heads,
            wide: 0,
        },
        ActivationPolicy::Flash => PerExecution {
            wide: heads,
            ..PerExecution::default()
        },
        _ => PerExecution::default(),
    };
    let indexer = match (&a.indexer, policy) {
        (Some(ix), ActivationPolicy::Flash | ActivationPolicy::Selective) => PerExecution {
            wide: ix.topk,
            ..PerExecution::default()
        },
        _ => PerExecution::default(),
    };
    Ok([
        PerExecution::act(2 * h + norms),
        PerExecution::act(attention),
        scores,
        indexer,
    ])
}

/// What one execution of the MoE FFN `e` saves on a residual stream of width `h`:
/// `(router, routed experts, shared experts)`.
fn moe_saves(h: u64, e: &Moe) -> Result<[PerExecution; 3]> {
    const WHAT: &str = "activations.experts";
    // The gated activation's saved tensors per routed copy, in units of `expert_ffn`.
    let gated = match e.activation {
        ExpertActivation::Swiglu => 4,
        ExpertActivation::ClampedSwiglu => 7,
        // Refused before any count (the capability table): what their backward saves is
        // not modelled.
        ExpertActivation::GeluTanh => 4,
        ExpertActivation::Relu2 => 0,
    };
    let routed = product(
        &[e.top_k, 2 * h + product(&[gated, e.expert_ffn], WHAT)?],
        WHAT,
    )?;
    let mut shared = product(&[e.shared_experts, 4, e.shared_ffn], WHAT)?;
    if e.shared_gate {
        shared += 1 + product(&[e.shared_experts, h], WHAT)?;
    }
    Ok([e.experts + e.top_k, routed, shared].map(PerExecution::act))
}

/// The activation memory of `model` under `policy`, per token: each component's saves per
/// execution (module docs) times the executions of the layers that have it.
pub fn activations(
    model: &Model,
    keys: &Keys,
    counting: &Counting,
    policy: ActivationPolicy,
) -> Result<ActivationBreakdown> {
    let stack = Stack::of(model)?;
    keys.check(&stack)?;
    activations_of(&stack, keys, counting, policy)
}

/// [`activations`] of `stack`, with keys checked against it.
pub(super) fn activations_of(
    stack: &Stack,
    keys: &Keys,
    counting: &Counting,
    policy: ActivationPolicy,
) -> Result<ActivationBreakdown> {
    Consumer::Activations.check(stack)?;
    activations_over(stack.hidden(), stack.kinds(), keys, counting, policy)
}

/// [`activations`] of the layers of `kinds` (all of a model's, or one pipeline stage's) on
/// a residual stream of width `h`, each kind over its executions, with keys checked against
/// the model and its features checked ([`Consumer::Activations`]).
pub(super) fn activations_over(
    h: u64,
    kinds: &[LayerKind],
    keys: &Keys,
    counting: &Counting,
    policy: ActivationPolicy,
) -> Result<ActivationBreakdown> {
    if policy.is_stack() {
        return Err(crate::Error::invalid(
            "counting.activations",
            format!(
                "{policy} is not an unfused count (the stacks are counted by their own modules)"
            ),
        ));
    }
    let b = counting.activation_bytes;
    let zero = PerExecution::default();
    // Per component: the saves of every kind times its executions.
    let (mut norms, mut attention, mut scores, mut indexer) = (zero, zero, zero, zero);
    let (mut router, mut experts, mut shared, mut dense) = (zero, zero, zero, zero);
    let mut total = 0u64;
    for k in kinds {
        let x = k.executions;
        total = crate::units::add(total, x, "activations")?;
        if policy == ActivationPolicy::Full {
            continue;
        }
        if let Some(TokenMixer::Attention(a)) = &k.layer.mixer {
            let [n, at, sc, ix] = attention_saves(h, a, policy)?;
            norms = n.add_times(x, norms)?;
            attention = at.add_times(x, attention)?;
            scores = sc.add_times(x, scores)?;
            indexer = ix.add_times(x, indexer)?;
        }
        match &k.layer.ffn {
            Some(Ffn::Moe(e)) => {
                let [r, ex, sh] = moe_saves(h, e)?;
                router = r.add_times(x, router)?;
                experts = ex.add_times(x, experts)?;
                shared = sh.add_times(x, shared)?;
            }
            Some(Ffn::Dense { width, .. }) => {
                let saves = PerExecution::act(product(&[4, *width], "activations.dense")?);
                dense = saves.add_times(x, dense)?;
            }
            None => {}
        }
    }
    let at = |saves: PerExecution, times: u64| saves.bytes(keys, b, times);
    if policy == ActivationPolicy::Full {
        return Ok(ActivationBreakdown {
            layer_inputs: at(PerExecution::act(h), total)?,
            ..ActivationBreakdown::default()
        });
    }
    Ok(ActivationBreakdown {
        layer_inputs: ActivationBytes::ZERO,
        norms: at(norms, 1)?,
        attention: at(attention, 1)?,
        scores: at(scores, 1)?,
        indexer: at(indexer, 1)?,
        ffn_input: at(PerExecution::act(h), total)?,
        router: at(router, 1)?,
        experts: at(experts, 1)?,
        shared: at(shared, 1)?,
        dense: at(dense, 1)?,
    })
}

/// [`activations`] of `stack` under any policy: the unfused counts, or a stack's count
/// ([`super::transformers`] on sequences of `context` tokens, [`super::megatron`] on one
/// GPU).
pub(super) fn policy_activations(
    stack: &Stack,
    keys: &Keys,
    context: u64,
    counting: &Counting,
    policy: ActivationPolicy,
) -> Result<ActivationBreakdown> {
    if policy.is_megatron() {
        super::megatron::activations(
            stack,
            stack.kinds(),
            counting,
            policy,
            super::megatron::Split::ONE,
        )
    } else if policy.is_stack() {
        super::transformers::activations(stack, keys, context, counting, policy)
    } else {
        activations_of(stack, keys, counting, policy)
    }
}

/// Why `stack` has no activations budget under `counting`: a feature the activation memory
/// does not model for any policy, or one the budget's Megatron-Core policy refuses (the
/// Transformers policies, asked for by name, refuse when counted). `None` when counted.
pub fn uncounted(stack: &Stack, counting: &Counting) -> Option<crate::Error> {
    let policy = counting.activations;
    if let Err(e) = Consumer::Activations.check_policy(stack, policy) {
        return Some(e);
    }
    if policy.is_megatron() {
        let split = super::megatron::Split::ONE;
        return super::megatron::activations(stack, stack.kinds(), counting, policy, split).err();
    }
    None
}

/// The activation report of `model` on a workload of `context` tokens: every unfused
/// policy, and the budget's policy when it is a stack's; for a model holding a feature the
/// activation memory does not model, or one the budget's Megatron-Core policy refuses, the
/// reason ([`ActivationReport::refused`]: the budget is then not counted), with the
/// unfused counts.
pub fn activation_report(
    model: &Model,
    keys: &Keys,
    context: u64,
    counting: &Counting,
) -> Result<ActivationReport> {
    let stack = Stack::of(model)?;
    if let Err(e) = Consumer::Activations.check_policy(&stack, counting.activations) {
        return Ok(ActivationReport {
            activation_bytes: counting.activation_bytes,
            budget: counting.activations,
            recompute_modules: None,
            policies: Vec::new(),
            refused: Some(e.to_string()),
        });
    }
    keys.check(&stack)?;
    let refused = uncounted(&stack, counting).map(|e| e.to_string());
    let stacks = [counting.activations]
        .into_iter()
        .filter(|p| p.is_stack() && refused.is_none());
    // Gemma 4's pieces: counted by the Transformers policies only, not by the unfused
    // counts ([`crate::model::capability::TRANSFORMERS_ONLY`]).
    let unfused = Consumer::Activations.check(&stack).is_ok();
    let policies = (ActivationPolicy::UNFUSED.iter().copied())
        .filter(|_| unfused)
        .chain(stacks)
        .map(|policy| {
            let breakdown = policy_activations(&stack, keys, context, counting, policy)?;
            let per_token = breakdown.total()?;
            Ok(PolicyActivations {
                policy,
                per_token,
                breakdown,
                at_context: per_token.checked_mul(context)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(ActivationReport {
        activation_bytes: counting.activation_bytes,
        budget: counting.activations,
        recompute_modules: (counting.activations == ActivationPolicy::MegatronSelective)
            .then_some(counting.recompute_modules),
        policies,
        refused,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ModelSpec, Workload};

    /// A GPT layer as Korthikanti et al. count it: `a` heads of width `h/a` (multi-head),
    /// a dense FFN, one document of `s` tokens, 16-bit activations.
    fn gpt(h: u64, a: u64, s: u64) -> (Model, Keys, Counting) {
        let spec = ModelSpec::from_toml_str(&format!(
            r#"
            [model]
            layers = 1
            hidden = {h}
            heads = {a}
            kv_heads = {a}
            head_dim = {d}
            [model.moe]
            experts = 1
            top_k = 1
            expert_ffn = 1
            [model.dense]
            layers = [1]
            ffn = {f}
            [workload]
            context = {s}
            mean_doc_len = {s}
            "#,
            d = h / a,
            f = 2 * h,
        ))
        .unwrap();
        let keys = Keys::of(&spec.workload, &spec.model).unwrap();
        (spec.model, keys, spec.counting)
    }

    /// `s·b·h·(34 + 5·a·s/h)` bytes per layer (selective: `34·s·b·h`, full: `2·s·b·h`)
    /// of Korthikanti et al., per token (`b = 1`, one sequence of `s` tokens): this
    /// module's count plus their dropout (two 1-byte masks of `h` on the residual branches;
    /// a 1-byte mask and a 2-byte output of `a·s` on the probabilities).
    #[test]
    fn reproduces_korthikanti_for_a_gpt_layer() {
        for (h, a, s) in [(64, 4, 128), (1024, 16, 2048), (12288, 96, 2048), (6, 3, 5)] {
            let (m, keys, counting) = gpt(h, a, s);
            let bytes = |p| {
                activations(&m, &keys, &counting, p)
                    .unwrap()
                    .total()
                    .unwrap()
                    .as_integer()
                    .unwrap()
            };
            let residual_masks = 2 * h;
            let probability_dropout = a * s + 2 * a * s;
            assert_eq!(
                bytes(ActivationPolicy::Eager) + residual_masks + probability_dropout,
                34 * h + 5 * a * s,
                "h={h} a={a} s={s}"
            );
            assert_eq!(bytes(ActivationPolicy::Selective) + residual_masks, 34 * h);
            assert_eq!(bytes(ActivationPolicy::Full), 2 * h);
            // flash keeps selective's tensors and one fp32 log-sum-exp per head.
            assert_eq!(
                bytes(ActivationPolicy::Flash),
                bytes(ActivationPolicy::Selective) + 4 * a
            );
        }
    }

    /// A histogram workload's eager rows are the token-weighted mean length, exactly.
    #[test]
    fn eager_rows_are_token_weighted() {
        let (m, _, counting) = gpt(4, 2, 3);
        let w = Workload {
            context: 8,
            mean_doc_len: None,
            doc_lengths: Some(vec![[1, 1], [3, 1]]),
            attention: crate::model::Attention::Causal,
            kv_dtype_bytes: 2,
        };
        let keys = Keys::of(&w, &m).unwrap();
        let eager = activations(&m, &keys, &counting, ActivationPolicy::Eager).unwrap();
        // (1·1 + 3·3) / 4 = 5/2 probabilities per head, 2 heads, 2 bytes.
        assert_eq!(eager.scores, ActivationBytes::ratio(10, 1).unwrap());
        let w2 = Workload {
            doc_lengths: Some(vec![[1, 1], [2, 1]]),
            ..w
        };
        let keys = Keys::of(&w2, &m).unwrap();
        let eager = activations(&m, &keys, &counting, ActivationPolicy::Eager).unwrap();
        // (1 + 4) / 3 per head: 2·2·5/3 = 20/3 bytes.
        assert_eq!(eager.scores, ActivationBytes::ratio(20, 3).unwrap());
    }
}
