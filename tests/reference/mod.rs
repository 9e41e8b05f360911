//! An executable reference: a tiny forward pass of exactly the architecture the cost model
//! describes (real matmuls, RMSNorm or LayerNorm with biases, q/k norms, attention biases and sinks, GQA or
//! multi-head latent attention, document-masked causal or dense attention with sliding or
//! chunked windows on chosen layers, a sparse attention indexer that scores the keys and
//! keeps the top k for the core, top-k routing (with a router bias) to SwiGLU experts
//! (with biases), shared experts with or without a sigmoid gate, dense-FFN layers, the
//! loop executed as configured, an LM head, multi-token-prediction modules, Gated DeltaNet and
//! Mamba-2 mixers, one-block layers and ungated relu2 MLPs; Gemma 4's full-attention layers
//! of their own shape, with values from the key projection, its value norm, post norms, MoE
//! branch norms and router scales), which
//! *counts* every multiply-add it performs, every parameter it allocates and every KV-cache
//! element it stores. Property tests check the analytic counts against it, exactly.
//!
//! The reference does not call the library's counting code: it only reads the spec's fields.

mod delta;
mod forward;
mod layer;
mod mamba;
mod parts;
mod stack;

use proptest::prelude::*;
use smelt::{
    ActivationPolicy, Attention, AttentionBias, Blocks, Counting, Dense, ExpertActivation,
    FullAttention, GatedDeltaNet, Indexer, KvCount, Loop, Mamba2, Mixer, Model, ModelSpec, Moe,
    QkNorm, Recurrent, WindowKind, Workload,
};

use forward::Reference;
use parts::{Part, Rng};

/// The documents the reference runs for a workload: the histogram itself, or `repeat`
/// documents of the mean length.
fn documents(w: &Workload, repeat: usize) -> Vec<usize> {
    match (&w.mean_doc_len, &w.doc_lengths) {
        (Some(t), _) => vec![*t as usize; repeat],
        (None, Some(hist)) => hist
            .iter()
            .flat_map(|&[len, n]| std::iter::repeat_n(len as usize, n as usize))
            .collect(),
        (None, None) => unreachable!("validated workloads have one of the two"),
    }
}

pub(crate) fn arb_spec() -> impl Strategy<Value = (ModelSpec, usize)> {
    let shape = (
        1u64..=4, // layers
        1u64..=6, // hidden
        1u64..=2, // kv heads
        1u64..=3, // heads per kv head
        1u64..=3, // head_dim
        1u64..=5, // experts
        1u64..=3, // expert_ffn
        prop_oneof![Just((0u64, 0u64)), (1u64..=2, 1u64..=3)],
        prop_oneof![
            Just(QkNorm::None),
            Just(QkNorm::PerHead),
            Just(QkNorm::Full),
            Just(QkNorm::L2)
        ],
    );
    let extras = (
        any::<prop::sample::Index>(), // top_k
        proptest::option::of((
            any::<prop::sample::Index>(),
            any::<prop::sample::Index>(),
            1u64..=3,
        )),
        prop_oneof![Just(Attention::Causal), Just(Attention::Dense)],
        prop_oneof![
            (1u64..=6).prop_map(|t| (Some(t), None)),
            prop::collection::vec((1u64..=6, 1u64..=2).prop_map(|(l, n)| [l, n]), 1..=3)
                .prop_map(|h| (None, Some(h))),
        ],
        (any::<bool>(), any::<bool>(), any::<bool>(), 1u64..=5),
        1usize..=2,
    );
    let qwen = (
        prop_oneof![
            Just(AttentionBias::None),
            Just(AttentionBias::Qkv),
            Just(AttentionBias::All)
        ],
        any::<bool>(),                              // shared gate (when shared experts)
        proptest::option::of((0u64..16, 1u64..=3)), // dense layers (bit mask), dense ffn
        (0usize..4, prop::sample::select(vec![1u64, 2, 4, 8])), // the activations budget's policy, bytes per element
    );
    // The open MoE architectures: sinks, router and expert biases, LayerNorm and LM-head
    // biases (PhiMoE), windowed layers
    // (kind, size, bit mask), MLA (query rank, latent rank, nope, rope, value widths), MTP
    // modules (count, counted), the KV budget at the context, and gpt-oss's clamped SwiGLU.
    let newer = (
        (
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        ),
        proptest::option::of((any::<bool>(), 1u64..=4, 1u64..16)),
        proptest::option::of((0u64..=2, 1u64..=3, 0u64..=2, 0u64..=2, 1u64..=3)),
        (0u64..=2, any::<bool>(), any::<bool>(), any::<bool>()),
        // A sparse attention indexer (heads, head width, top k), kept when the model has a
        // query latent and no window.
        proptest::option::of((1u64..=2, 1u64..=3, 1u64..=4)),
    );
    (shape, extras, qwen, newer).prop_map(
        |(
            (layers, hidden, kv_heads, group, head_dim, experts, ffn, shared, qk_norm),
            (top_k, looping, attention, (mean, hist), (emb, lm, tie, vocab), repeat),
            (attention_bias, gate, dense, (policy, activation_bytes)),
            (
                (sinks, router_bias, expert_bias, norm_bias, lm_head_bias),
                window,
                mla,
                (mtp_layers, mtp, at_context, clamped),
                indexer,
            ),
        )| {
            let dense = dense.and_then(|(mask, ffn)| {
                let layers: Vec<u64> = (1..=layers)
                    .filter(|l| mask & (1 << (l - 1)) != 0)
                    .collect();
                (!layers.is_empty()).then_some(Dense { layers, ffn })
            });
            let window = window.and_then(|w| crate::common::window(layers, w));
            let looping = looping.map(|(first, span, repeats)| {
                let first = first.index(layers as usize) as u64 + 1;
                let span = span.index((layers - first + 1) as usize) as u64 + 1;
                Loop {
                    first,
                    span,
                    repeats,
                    residual_scale: None,
                }
            });
            let heads = kv_heads * group;
            let mla = mla.map(crate::common::mla);
            let indexer = indexer
                .filter(|_| window.is_none() && mla.as_ref().is_some_and(|a| a.q_lora_rank > 0))
                .map(|(heads, head_dim, topk)| Indexer {
                    heads,
                    head_dim,
                    topk,
                });
            let (kv_heads, head_dim, qk_norm, attention_bias) = match &mla {
                Some(a) => (
                    heads,
                    a.qk_nope_head_dim + a.qk_rope_head_dim,
                    QkNorm::None,
                    AttentionBias::None,
                ),
                None => (kv_heads, head_dim, qk_norm, attention_bias),
            };
            let spec = ModelSpec {
                name: None,
                model: Model {
                    layers,
                    hidden,
                    heads,
                    kv_heads,
                    head_dim,
                    vocab,
                    tie_embeddings: tie,
                    qk_norm,
                    attention_bias,
                    attention_sinks: sinks,
                    mla,
                    window,
                    nope: None,
                    indexer,
                    attention_gate: false,
                    recurrent: None,
                    full_attention: None,
                    v_norm: false,
                    post_norms: false,
                    blocks: None,
                    moe: Moe {
                        experts,
                        top_k: top_k.index(experts as usize) as u64 + 1,
                        expert_ffn: ffn,
                        latent: None,
                        shared_experts: shared.0,
                        shared_ffn: shared.1,
                        shared_gate: gate && shared.0 > 0,
                        router_bias,
                        expert_bias,
                        activation: if clamped {
                            ExpertActivation::ClampedSwiglu
                        } else {
                            ExpertActivation::Swiglu
                        },
                        router_scale: false,
                        branch_norms: false,
                        router: None,
                        router_groups: None,
                        jitter: None,
                    },
                    dense,
                    looping,
                    mtp_layers,
                    norm_bias,
                    lm_head_bias,
                    rope_dim: None,
                },
                workload: Workload {
                    context: 8,
                    mean_doc_len: mean,
                    doc_lengths: hist,
                    attention,
                    kv_dtype_bytes: 2,
                },
                counting: Counting {
                    recompute_modules: Default::default(),
                    embeddings: emb,
                    lm_head: lm,
                    mtp,
                    kv: if at_context {
                        KvCount::AtContext
                    } else {
                        KvCount::PerToken
                    },
                    activations: ActivationPolicy::UNFUSED[policy],
                    activation_bytes,
                },
                training: None,
            };
            (spec, repeat)
        },
    )
}

/// `flops_per_token * tokens`, which must be a whole number of FLOPs.
fn total(f: smelt::Flops, tokens: u64) -> u64 {
    f.checked_mul(tokens)
        .unwrap()
        .as_integer()
        .expect("FLOPs over a whole batch are a whole number")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// Analytic counts equal the reference's own counts, exactly, component by component.
    #[test]
    fn analytic_counts_equal_counted_execution((spec, repeat) in arb_spec()) {
        spec.validate().unwrap();
        let mut rng = Rng::new(7);
        let reference = Reference::new(&spec, &mut rng);
        let docs = documents(&spec.workload, repeat);
        let counted = reference.forward(&docs, &mut rng);
        let cost = smelt::cost(&spec).unwrap();
        let t = counted.tokens;

        prop_assert_eq!(cost.params.total.0, reference.params());
        prop_assert_eq!(cost.params.active.0, counted.active_params);

        let b = cost.flops_per_token.forward_breakdown;
        let m = counted.macs;
        prop_assert_eq!(total(b.projections, t), 2 * m.projections);
        prop_assert_eq!(total(b.attention_core, t), 2 * m.attention_core);
        prop_assert_eq!(total(b.router, t), 2 * m.router);
        prop_assert_eq!(total(b.experts, t), 2 * m.experts);
        prop_assert_eq!(total(b.shared, t), 2 * m.shared);
        prop_assert_eq!(total(b.dense, t), 2 * m.dense);
        prop_assert_eq!(total(b.lm_head, t), 2 * m.lm_head);
        prop_assert_eq!(total(b.mtp, t), 2 * m.mtp);
        prop_assert_eq!(total(b.indexer, t), 2 * m.indexer);
        prop_assert_eq!(total(cost.flops_per_token.forward, t), 2 * m.total());
        prop_assert_eq!(total(cost.flops_per_token.training, t), 3 * 2 * m.total());

        prop_assert_eq!(cost.kv_cache_per_token.elements.0 * t, counted.kv_elements);
        // Held at the context: every full execution's entries for the whole context, a
        // windowed one's for at most its window.
        let ctx = spec.workload.context;
        let held: u64 = counted
            .executions
            .iter()
            .map(|&(per_token, window)| per_token * window.map_or(ctx, |w| w.min(ctx)))
            .sum();
        prop_assert_eq!(cost.kv_cache_per_token.at_context.elements.0, held);
        let budgets = smelt::budgets(&spec).unwrap();
        let want_kv = match spec.counting.kv {
            KvCount::PerToken => cost.kv_cache_per_token.elements,
            KvCount::AtContext => cost.kv_cache_per_token.at_context.elements,
        };
        prop_assert_eq!(budgets.kv, want_kv);
        prop_assert_eq!(cost.kv_cache_per_token.bytes.0, 2 * cost.kv_cache_per_token.elements.0);
        prop_assert_eq!(cost.layer_executions, reference.schedule().len() as u64);
        check_activations(&spec, &cost, &counted)?;
        prop_assert_eq!(budgets.activations, cost.budgets().activations);
    }

    /// Looping adds FLOPs and KV cache but never parameters.
    #[test]
    fn looping_adds_flops_and_kv_not_params((spec, _) in arb_spec()) {
        let mut flat = spec.clone();
        flat.model.looping = None;
        let (a, b) = (smelt::budgets(&spec).unwrap(), smelt::budgets(&flat).unwrap());
        prop_assert_eq!(a.params, b.params);
        let extra = spec.model.looping.as_ref().map_or(0, |l| (l.repeats - 1) * l.span);
        if extra > 0 {
            prop_assert!(a.flops > b.flops);
            prop_assert!(a.kv > b.kv);
        } else {
            prop_assert_eq!(a, b);
        }
    }

    /// Dense attention never costs less than causal, and costs the same only for
    /// one-token documents.
    #[test]
    fn dense_is_at_least_causal((spec, _) in arb_spec()) {
        let mut causal = spec.clone();
        causal.workload.attention = Attention::Causal;
        let mut dense = spec.clone();
        dense.workload.attention = Attention::Dense;
        let (c, d) = (smelt::budgets(&causal).unwrap(), smelt::budgets(&dense).unwrap());
        prop_assert!(d.flops >= c.flops);
        let all_single = match (&spec.workload.mean_doc_len, &spec.workload.doc_lengths) {
            (Some(t), _) => *t == 1,
            (_, Some(h)) => h.iter().all(|&[l, _]| l == 1),
            _ => unreachable!(),
        };
        prop_assert_eq!(d.flops == c.flops, all_single);
        prop_assert_eq!(d.params, c.params);
        prop_assert_eq!(d.kv, c.kv);
    }

    /// The histogram's exact c̄ is never below the mean-length shortcut (convexity, which
    /// chunked windows do not have), and equals it when all documents have one length.
    #[test]
    fn histogram_is_at_least_the_shortcut((spec, _) in arb_spec()) {
        let chunked = spec.model.window.as_ref().is_some_and(|w| w.kind == WindowKind::Chunked);
        let cost = smelt::cost(&spec).unwrap();
        if let Some(s) = &cost.attention.mean_length_shortcut {
            prop_assert!(chunked || s.relative_to_exact <= 1e-12);
            let hist = spec.workload.doc_lengths.as_ref().unwrap();
            if hist.iter().all(|&[l, _]| l == hist[0][0]) {
                prop_assert!(s.relative_to_exact.abs() < 1e-12);
            }
        }
    }
}

/// A hybrid of `spec`: the layers in `mask` (but windowed ones) get a Gated DeltaNet mixer
/// of `(key heads, value heads per key head, key width, value width, taps)`, attention
/// layers an output gate when `gate`; the query latent and indexer dropped (no family has
/// both); the context set to the batch's tokens, so the mixer runs on one sequence of the
/// workload's context. `None` when no layer, or every layer, would be recurrent.
fn hybrid(
    mut spec: ModelSpec,
    docs: &[usize],
    mask: u64,
    (nk, group, dk, dv, taps): (u64, u64, u64, u64, u64),
    gate: bool,
) -> Option<ModelSpec> {
    let m = &mut spec.model;
    if m.mla.is_some() {
        m.mla = None;
        m.indexer = None;
        m.kv_heads = 1;
        m.head_dim = 2;
    }
    let windowed = m.window.as_ref().map_or(Vec::new(), |w| w.layers.clone());
    let layers: Vec<u64> = (1..=m.layers)
        .filter(|l| mask & (1 << (l - 1)) != 0 && !windowed.contains(l))
        .collect();
    if layers.is_empty() || layers.len() as u64 == m.layers {
        return None;
    }
    m.recurrent = Some(Recurrent {
        layers,
        mixer: Mixer::GatedDeltanet(GatedDeltaNet {
            key_heads: nk,
            value_heads: nk * group,
            key_head_dim: dk,
            value_head_dim: dv,
            conv_kernel: taps,
        }),
    });
    m.attention_gate = gate;
    spec.workload.context = docs.iter().sum::<usize>() as u64;
    spec.validate().unwrap();
    Some(spec)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Hybrids (Gated DeltaNet layers beside attention, looped or not): the analytic
    /// parameters, FLOPs by component, KV per token and the cache at the context (the
    /// recurrent state included) equal the reference's counts, exactly; the context spans
    /// one to three chunks of the delta rule.
    #[test]
    fn hybrid_counts_equal_counted_execution(
        (spec, repeat) in arb_spec(),
        mask in 1u64..16,
        shapes in (1u64..=2, 1u64..=2, 1u64..=3, 1u64..=3, 1u64..=4),
        gate in any::<bool>(),
        long in prop_oneof![Just(1usize), Just(70), Just(130)],
    ) {
        // Documents long enough, at times, to span more than one 64-token chunk.
        let mut docs = documents(&spec.workload, repeat);
        docs.push(long);
        let mut base = spec;
        base.workload.mean_doc_len = None;
        let mut hist: Vec<[u64; 2]> = docs.iter().map(|&d| [d as u64, 1]).collect();
        hist.sort();
        base.workload.doc_lengths = Some(hist);
        let spec = hybrid(base, &docs, mask, shapes, gate);
        prop_assume!(spec.is_some(), "no layer, or every layer, recurrent");
        let spec = spec.unwrap();
        let mut rng = Rng::new(11);
        let reference = Reference::new(&spec, &mut rng);
        let counted = reference.forward(&docs, &mut rng);
        let cost = smelt::cost(&spec).unwrap();
        let t = counted.tokens;
        prop_assert_eq!(t, spec.workload.context);
        prop_assert_eq!(cost.params.total.0, reference.params());
        prop_assert_eq!(cost.params.active.0, counted.active_params);
        let b = cost.flops_per_token.forward_breakdown;
        let m = counted.macs;
        prop_assert_eq!(total(b.projections, t), 2 * m.projections);
        prop_assert_eq!(total(b.attention_core, t), 2 * m.attention_core);
        prop_assert_eq!(total(b.recurrent_projections, t), 2 * m.delta.projections);
        prop_assert_eq!(total(b.recurrent_core, t), 2 * m.delta.core);
        prop_assert_eq!(total(b.experts, t), 2 * m.experts);
        prop_assert_eq!(total(cost.flops_per_token.forward, t), 2 * m.total());
        prop_assert_eq!(cost.kv_cache_per_token.elements.0 * t, counted.kv_elements);
        let ctx = spec.workload.context;
        let held: u64 = counted
            .executions
            .iter()
            .map(|&(per_token, window)| per_token * window.map_or(ctx, |w| w.min(ctx)))
            .sum();
        prop_assert_eq!(cost.kv_cache_per_token.at_context.elements.0, held + counted.state);
        let state = cost.kv_cache_per_token.recurrent_state.unwrap();
        prop_assert_eq!(state.elements.0, counted.state);
        // Activations are refused by name, never counted silently.
        prop_assert!(cost.activations.policies.is_empty());
        prop_assert!(cost.activations.refused.is_some());
    }
}

/// A Nemotron-H-style hybrid of `spec`: layer `l` takes kind `kinds / 6^(l-1) % 6`, one of
/// Mamba-2 alone, attention alone, the MoE alone, a dense MLP alone, Mamba-2 with the MoE,
/// attention with the MoE; a Mamba-2 mixer of `(heads, head_dim, state, groups = heads or 1,
/// taps, chunk, conv bias, projection biases)`; every MLP ungated (relu2) when `relu2`.
/// Windows, the query latent, the indexer and MTP dropped (no family has them with these);
/// the context set to the batch's tokens. `None` without an attention or a MoE layer.
fn mamba_hybrid(
    mut spec: ModelSpec,
    docs: &[usize],
    kinds: u64,
    (heads, d, n, all_groups, taps, chunk, conv_bias, proj_bias): (
        u64,
        u64,
        u64,
        bool,
        u64,
        u64,
        bool,
        bool,
    ),
    relu2: bool,
) -> Option<ModelSpec> {
    let m = &mut spec.model;
    if m.mla.is_some() {
        m.mla = None;
        m.kv_heads = 1;
        m.head_dim = 2;
    }
    m.indexer = None;
    m.window = None;
    m.mtp_layers = 0;
    let kind = |l: u64| kinds / 6u64.pow(l as u32 - 1) % 6;
    let pick =
        |ks: &[u64]| -> Vec<u64> { (1..=m.layers).filter(|&l| ks.contains(&kind(l))).collect() };
    let (mamba, attention, moe) = (pick(&[0, 4]), pick(&[1, 5]), pick(&[2, 4, 5]));
    if attention.is_empty() || moe.is_empty() {
        return None;
    }
    let (mixer_only, ffn_only, dense) = (pick(&[0, 1]), pick(&[2, 3]), pick(&[3]));
    m.recurrent = (!mamba.is_empty()).then_some(Recurrent {
        layers: mamba,
        mixer: Mixer::Mamba2(Mamba2 {
            heads,
            head_dim: d,
            state: n,
            groups: if all_groups { heads } else { 1 },
            conv_kernel: taps,
            chunk,
            conv_bias,
            proj_bias,
        }),
    });
    m.blocks = (!(mixer_only.is_empty() && ffn_only.is_empty())).then_some(Blocks {
        mixer_only,
        ffn_only,
    });
    let ffn = m.dense.as_ref().map_or(2, |x| x.ffn);
    m.dense = (!dense.is_empty()).then_some(Dense { layers: dense, ffn });
    if relu2 {
        m.moe.activation = ExpertActivation::Relu2;
        m.moe.expert_bias = false;
    }
    spec.workload.context = docs.iter().sum::<usize>() as u64;
    spec.validate().unwrap();
    Some(spec)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Mamba-2 hybrids with one-block layers (Nemotron-H's structure), looped or not, relu2
    /// MLPs or not, LatentMoE or not (Nemotron 3 Super's): the analytic parameters, FLOPs by component (the SSD scan's
    /// contractions and the convolution as `recurrent_core`), KV per token and the cache at
    /// the context (the convolution and SSM state included) equal the reference's counts,
    /// exactly; the context spans one to several chunks.
    #[test]
    fn mamba_hybrid_counts_equal_counted_execution(
        (spec, repeat) in arb_spec(),
        kinds in 0u64..1296,
        shapes in (1u64..=4, 1u64..=3, 1u64..=3, any::<bool>(), 1u64..=4, 1u64..=5, any::<bool>(), any::<bool>()),
        relu2 in any::<bool>(),
        latent in prop::option::of(1u64..=3),
        long in prop_oneof![Just(1usize), Just(7), Just(13)],
    ) {
        let mut docs = documents(&spec.workload, repeat);
        docs.push(long);
        let mut base = spec;
        base.workload.mean_doc_len = None;
        let mut hist: Vec<[u64; 2]> = docs.iter().map(|&d| [d as u64, 1]).collect();
        hist.sort();
        base.workload.doc_lengths = Some(hist);
        let spec = mamba_hybrid(base, &docs, kinds, shapes, relu2);
        prop_assume!(spec.is_some(), "no attention or no MoE layer");
        let mut spec = spec.unwrap();
        spec.model.moe.latent = latent;
        spec.validate().unwrap();
        let mut rng = Rng::new(13);
        let reference = Reference::new(&spec, &mut rng);
        let counted = reference.forward(&docs, &mut rng);
        let cost = smelt::cost(&spec).unwrap();
        let t = counted.tokens;
        prop_assert_eq!(cost.params.total.0, reference.params());
        prop_assert_eq!(cost.params.active.0, counted.active_params);
        let b = cost.flops_per_token.forward_breakdown;
        let m = counted.macs;
        prop_assert_eq!(total(b.projections, t), 2 * m.projections);
        prop_assert_eq!(total(b.attention_core, t), 2 * m.attention_core);
        prop_assert_eq!(total(b.recurrent_projections, t), 2 * m.delta.projections);
        prop_assert_eq!(total(b.recurrent_core, t), 2 * m.delta.core);
        prop_assert_eq!(total(b.router, t), 2 * m.router);
        prop_assert_eq!(total(b.experts, t), 2 * m.experts);
        prop_assert_eq!(total(b.shared, t), 2 * m.shared);
        prop_assert_eq!(total(b.dense, t), 2 * m.dense);
        prop_assert_eq!(total(b.latent_projections, t), 2 * m.latent);
        prop_assert_eq!(latent.is_some(), m.latent > 0);
        prop_assert_eq!(total(cost.flops_per_token.forward, t), 2 * m.total());
        prop_assert_eq!(cost.kv_cache_per_token.elements.0 * t, counted.kv_elements);
        let ctx = spec.workload.context;
        let held: u64 = counted.executions.iter().map(|&(per_token, _)| per_token * ctx).sum();
        prop_assert_eq!(cost.kv_cache_per_token.at_context.elements.0, held + counted.state);
        prop_assert_eq!(
            cost.kv_cache_per_token.recurrent_state.map_or(0, |s| s.elements.0),
            counted.state
        );
        // Activations are refused by name, never counted silently.
        let m = &spec.model;
        if m.recurrent.is_some() || m.blocks.is_some() || relu2 || latent.is_some() {
            prop_assert!(cost.activations.policies.is_empty());
            prop_assert!(cost.activations.refused.is_some());
        }
    }
}

/// The SSD scan alone, hand-checked: one head of width 1, state 1, one group, one tap, a
/// chunk of 2 over 3 tokens (padded to 4, 2 chunks, 3 state slots): per chunk and head
/// `C²·N + C²·d + 2·C·N·d` = 4 + 4 + 4, twice, plus `Z²·N·d` = 9, and the convolution's
/// `T + w − 1` = 3 outputs of one tap over `1 + 2` channels: 24 + 9 + 9 = 42.
#[test]
fn mamba_scan_hand_checked_case() {
    let spec = ModelSpec::from_toml_str(
        r#"
        [model]
        layers = 2
        hidden = 1
        heads = 1
        kv_heads = 1
        head_dim = 1
        [model.recurrent]
        layers = [1]
        [model.recurrent.mixer.mamba2]
        heads = 1
        head_dim = 1
        state = 1
        groups = 1
        conv_kernel = 1
        chunk = 2
        [model.blocks]
        mixer_only = [1]
        [model.moe]
        experts = 1
        top_k = 1
        expert_ffn = 1
        [workload]
        context = 3
        mean_doc_len = 3
        "#,
    )
    .unwrap();
    let mut rng = Rng::new(1);
    let r = Reference::new(&spec, &mut rng);
    let c = r.forward(&[3], &mut rng);
    assert_eq!(c.macs.delta.core, 42);
    let cost = smelt::cost(&spec).unwrap();
    assert_eq!(
        total(cost.flops_per_token.forward_breakdown.recurrent_core, 3),
        2 * 42
    );
    // in_proj 1 x (1 + 3 + 1), out_proj 1 x 1, conv 3 x 1, A_log, D, dt_bias, the gated
    // norm 1; one norm in the mixer-only layer, two in the other, one final.
    assert_eq!(r.params(), cost.params.total.0);
    assert_eq!(cost.params.breakdown.recurrent.0, 5 + 1 + 3 + 3 + 1);
}

/// `bytes_per_token * tokens`, which must be a whole number of bytes.
fn bytes(a: smelt::ActivationBytes, tokens: u64) -> u64 {
    a.checked_mul(tokens)
        .unwrap()
        .as_integer()
        .expect("activation bytes over a whole batch are a whole number")
}

/// The activation memory under every policy equals what the reference saved, component by
/// component.
fn check_activations(
    spec: &ModelSpec,
    cost: &smelt::Cost,
    counted: &forward::Counted,
) -> Result<(), TestCaseError> {
    let (t, b) = (counted.tokens, spec.counting.activation_bytes);
    let saved = &counted.macs.saved;
    prop_assert_eq!(
        cost.activations.policies.len(),
        ActivationPolicy::UNFUSED.len()
    );
    for p in &cost.activations.policies {
        let a = &p.breakdown;
        for (part, value) in [
            (Part::LayerInputs, a.layer_inputs),
            (Part::Norms, a.norms),
            (Part::Attention, a.attention),
            (Part::Scores, a.scores),
            (Part::Indexer, a.indexer),
            (Part::FfnInput, a.ffn_input),
            (Part::Router, a.router),
            (Part::Experts, a.experts),
            (Part::Shared, a.shared),
            (Part::Dense, a.dense),
        ] {
            prop_assert_eq!(
                bytes(value, t),
                saved.bytes(p.policy, part, b),
                "{:?} {:?}",
                p.policy,
                part
            );
        }
        prop_assert_eq!(bytes(p.per_token, t), bytes(a.total().unwrap(), t));
    }
    Ok(())
}

/// A hand-checked case: one causal document of 3 tokens, one layer, width 1 everywhere.
#[test]
fn tiny_hand_checked_case() {
    let spec = ModelSpec::from_toml_str(
        r#"
        [model]
        layers = 1
        hidden = 1
        heads = 1
        kv_heads = 1
        head_dim = 1
        [model.moe]
        experts = 1
        top_k = 1
        expert_ffn = 1
        [workload]
        context = 3
        mean_doc_len = 3
        "#,
    )
    .unwrap();
    let mut rng = Rng::new(1);
    let r = Reference::new(&spec, &mut rng);
    let c = r.forward(&[3], &mut rng);
    // Per token: 4 projection MACs, 1 router MAC, 3 expert MACs; attention pairs 1+2+3 = 6,
    // each a QKᵀ and a PV multiply-add.
    assert_eq!(c.macs.projections, 12);
    assert_eq!(c.macs.attention_core, 12);
    assert_eq!(c.macs.router, 3);
    assert_eq!(c.macs.experts, 9);
    let cost = smelt::cost(&spec).unwrap();
    // 2 FLOPs x (4 + 1 + 3) + 4 x (3+1)/2 = 16 + 8 = 24 forward FLOPs per token.
    assert_eq!(cost.flops_per_token.forward.as_integer(), Some(24));
    assert_eq!(total(cost.flops_per_token.forward, 3), 2 * c.macs.total());
    // Params: 4 projections + 3 expert + 1 router + 2 norms + 1 final norm.
    assert_eq!(cost.params.total.0, 11);
    assert_eq!(r.params(), 11);
}

/// Gemma 4's pieces on `spec`: the full-attention layers' own shape (`kv_heads`, `head_dim`,
/// `k_eq_v`; `None` when the model has no full-attention layer), the value norm, post norms,
/// router scales and branch norms (with one shared expert of `shared_ffn` when it has none);
/// MLA, the indexer and MTP modules dropped (no family has both).
fn gemma(
    mut spec: ModelSpec,
    (kv, head_dim, k_eq_v): (u64, u64, bool),
    shared_ffn: u64,
) -> ModelSpec {
    let m = &mut spec.model;
    if m.mla.is_some() {
        m.mla = None;
        m.indexer = None;
        m.kv_heads = 1;
        m.head_dim = 2;
    }
    m.mtp_layers = 0;
    let windowed = m.window.as_ref().map_or(0, |w| w.layers.len() as u64);
    // Full-attention kv heads that divide the query heads.
    let kv = (1..=kv)
        .rev()
        .find(|k| m.heads.is_multiple_of(*k))
        .unwrap_or(1);
    m.full_attention = (windowed < m.layers).then_some(FullAttention {
        kv_heads: kv,
        head_dim,
        k_eq_v,
    });
    m.v_norm = true;
    m.post_norms = true;
    m.moe.router_scale = true;
    m.moe.branch_norms = true;
    if m.moe.shared_experts == 0 {
        m.moe.shared_experts = 1;
        m.moe.shared_ffn = shared_ffn;
        m.moe.shared_gate = false;
    }
    spec.validate().unwrap();
    spec
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Gemma 4's pieces (full-attention layers of their own head width and key/value heads,
    /// with and without a value projection; the value norm; post norms; branch norms;
    /// router scales), looped or not, windowed or not: the analytic parameters (total and
    /// active), FLOPs by component, KV per token and the cache held at the context equal
    /// the reference's counts, exactly; the activation memory is refused by name.
    #[test]
    fn gemma_pieces_count_as_executed(
        (spec, repeat) in arb_spec(),
        shape in (1u64..=3, 1u64..=4, any::<bool>()),
        shared_ffn in 1u64..=3,
    ) {
        let spec = gemma(spec, shape, shared_ffn);
        let mut rng = Rng::new(13);
        let reference = Reference::new(&spec, &mut rng);
        let docs = documents(&spec.workload, repeat);
        let counted = reference.forward(&docs, &mut rng);
        let cost = smelt::cost(&spec).unwrap();
        let t = counted.tokens;
        prop_assert_eq!(cost.params.total.0, reference.params());
        prop_assert_eq!(cost.params.active.0, counted.active_params);
        let b = cost.flops_per_token.forward_breakdown;
        let m = counted.macs;
        prop_assert_eq!(total(b.projections, t), 2 * m.projections);
        prop_assert_eq!(total(b.attention_core, t), 2 * m.attention_core);
        prop_assert_eq!(total(b.router, t), 2 * m.router);
        prop_assert_eq!(total(b.experts, t), 2 * m.experts);
        prop_assert_eq!(total(b.shared, t), 2 * m.shared);
        prop_assert_eq!(total(b.dense, t), 2 * m.dense);
        prop_assert_eq!(total(b.lm_head, t), 2 * m.lm_head);
        prop_assert_eq!(total(cost.flops_per_token.forward, t), 2 * m.total());
        prop_assert_eq!(cost.kv_cache_per_token.elements.0 * t, counted.kv_elements);
        let ctx = spec.workload.context;
        let held: u64 = counted
            .executions
            .iter()
            .map(|&(per_token, window)| per_token * window.map_or(ctx, |w| w.min(ctx)))
            .sum();
        prop_assert_eq!(cost.kv_cache_per_token.at_context.elements.0, held);
        prop_assert!(cost.activations.policies.is_empty());
        prop_assert!(cost.activations.refused.is_some());
    }
}
