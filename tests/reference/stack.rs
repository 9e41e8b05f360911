//! The model resolved ([`Stack`]) against the model file it resolves, read here field by
//! field: every physical layer's description, its executions and their order; the cost
//! model's counts equal to its layers' costs ([`layer_cost`]) summed over the description;
//! the features read off the layers equal to those the model file's fields set.

use proptest::prelude::*;
use smelt::cost::{Keys, forward_flops, layer_cost, params};
use smelt::model::{AttentionShape, Feature, Ffn, Stack, TokenMixer};
use smelt::{Counting, ExpertActivation, Flops, Mixer, Model, ModelSpec, Params, WindowKind};

use super::{arb_spec, documents, gemma, hybrid, mamba_hybrid};

/// The features `m`'s fields set, in [`Feature::ALL`]'s order (read off the fields, as the
/// HF export's support check read them before the stack).
fn features_of_fields(m: &Model) -> Vec<Feature> {
    let act = m.moe.activation;
    let mixer = m.recurrent.as_ref().map(|r| r.mixer);
    let kind = m.window.as_ref().map(|w| w.kind);
    Feature::ALL
        .into_iter()
        .filter(|f| match f {
            Feature::Mla => m.mla.is_some(),
            Feature::Sliding => kind == Some(WindowKind::Sliding),
            Feature::Chunked => kind == Some(WindowKind::Chunked),
            Feature::Sinks => m.attention_sinks,
            Feature::RouterBias => m.moe.router_bias,
            Feature::ExpertBias => m.moe.expert_bias,
            Feature::ClampedSwiglu => act == ExpertActivation::ClampedSwiglu,
            Feature::Mtp => m.mtp_layers > 0,
            Feature::NormBias => m.norm_bias,
            Feature::LmHeadBias => m.lm_head_bias,
            Feature::Indexer => m.indexer.is_some(),
            Feature::Jitter => m.moe.jitter.is_some(),
            Feature::GatedDeltanet => matches!(mixer, Some(Mixer::GatedDeltanet(_))),
            Feature::Mamba2 => matches!(mixer, Some(Mixer::Mamba2(_))),
            Feature::AttentionGate => m.attention_gate,
            Feature::Blocks => m.blocks.is_some(),
            Feature::Relu2 => act == ExpertActivation::Relu2,
            Feature::FullAttention => m.full_attention.is_some(),
            Feature::VNorm => m.v_norm,
            Feature::PostNorms => m.post_norms,
            Feature::BranchNorms => m.moe.branch_norms,
            Feature::RouterScale => m.moe.router_scale,
            Feature::GeluTanh => act == ExpertActivation::GeluTanh,
            Feature::LatentExperts => m.moe.latent.is_some(),
        })
        .collect()
}

/// Checks `spec`'s stack layer by layer against its fields, and its counts summed over it.
fn check(spec: &ModelSpec) -> Result<(), TestCaseError> {
    let m = &spec.model;
    let stack = Stack::of(m).unwrap();
    // Executions: each layer's visits, their sum, their order.
    prop_assert_eq!(stack.physical(), m.layers);
    prop_assert_eq!(stack.executions(), m.executions());
    let kinds = stack.kinds();
    prop_assert_eq!(kinds.iter().map(|k| k.physical).sum::<u64>(), m.layers);
    prop_assert_eq!(
        kinds.iter().map(|k| k.executions).sum::<u64>(),
        m.executions()
    );
    let order: Vec<u64> = stack.execution_order().map(|i| i as u64).collect();
    prop_assert_eq!(&order, &m.execution_order());
    for k in kinds {
        let runs: u64 = (0..stack.physical() as usize)
            .filter(|&i| stack.layer(i) == Some(&k.layer))
            .map(|i| stack.visits(i))
            .sum();
        prop_assert_eq!(runs, k.executions);
    }
    // Each layer as the model file's lists say.
    let listed = |list: Option<&Vec<u64>>, l: u64| list.is_some_and(|v| v.contains(&l));
    for (i, layer) in stack.layers().enumerate() {
        let l = i as u64 + 1;
        prop_assert_eq!(stack.visits(i), m.visits(l));
        let blocks = m.blocks.as_ref();
        let (mixer_only, ffn_only) = (
            listed(blocks.map(|b| &b.mixer_only), l),
            listed(blocks.map(|b| &b.ffn_only), l),
        );
        let recurrent = listed(m.recurrent.as_ref().map(|r| &r.layers), l);
        let windowed = listed(m.window.as_ref().map(|w| &w.layers), l);
        match &layer.mixer {
            None => prop_assert!(ffn_only),
            Some(TokenMixer::Recurrent(x)) => {
                prop_assert!(recurrent && !ffn_only);
                prop_assert_eq!(Some(*x), m.recurrent.as_ref().map(|r| r.mixer));
            }
            Some(TokenMixer::Attention(a)) => {
                prop_assert!(!recurrent && !ffn_only);
                prop_assert_eq!(a.window.is_some(), windowed);
                prop_assert_eq!(
                    a.window.map(|w| (w.kind, w.size)),
                    m.window
                        .as_ref()
                        .filter(|_| windowed)
                        .map(|w| (w.kind, w.size))
                );
                let own = m.full_attention.as_ref().filter(|_| !windowed);
                prop_assert_eq!(a.own_shape, own.is_some());
                let want = match (&m.mla, own) {
                    (Some(mla), _) => AttentionShape::Mla {
                        heads: m.heads,
                        mla: mla.clone(),
                    },
                    (None, Some(f)) => AttentionShape::Gqa {
                        heads: m.heads,
                        kv_heads: f.kv_heads,
                        head_dim: f.head_dim,
                        k_eq_v: f.k_eq_v,
                    },
                    (None, None) => AttentionShape::Gqa {
                        heads: m.heads,
                        kv_heads: m.kv_heads,
                        head_dim: m.head_dim,
                        k_eq_v: false,
                    },
                };
                prop_assert_eq!(&a.shape, &want);
                prop_assert_eq!(&a.indexer, &m.indexer);
                prop_assert_eq!(
                    (a.gate, a.sinks, a.bias, a.qk_norm, a.v_norm),
                    (
                        m.attention_gate,
                        m.attention_sinks,
                        m.attention_bias,
                        m.qk_norm,
                        m.v_norm
                    )
                );
            }
        }
        let dense = listed(m.dense.as_ref().map(|d| &d.layers), l);
        match &layer.ffn {
            None => prop_assert!(mixer_only),
            Some(Ffn::Dense { width, activation }) => {
                prop_assert!(dense && !mixer_only);
                prop_assert_eq!(Some(*width), m.dense.as_ref().map(|d| d.ffn));
                prop_assert_eq!(*activation, m.moe.activation);
            }
            Some(Ffn::Moe(e)) => prop_assert!(!dense && !mixer_only && e == &m.moe),
        }
        let one_block = mixer_only || ffn_only;
        let count = if one_block {
            1
        } else if m.post_norms {
            4
        } else {
            2
        };
        prop_assert_eq!(layer.norms.count, count);
        prop_assert_eq!(
            (layer.norms.bias, layer.norms.post),
            (m.norm_bias, m.post_norms && !one_block)
        );
    }
    prop_assert_eq!(stack.features(), features_of_fields(m));
    // The counts: each layer's cost, over the physical layers (parameters) or the
    // executions in order (FLOPs), is the model's, its final norm, vocabulary matrices,
    // LM head and MTP modules aside.
    let keys = Keys::of(&spec.workload, m).unwrap();
    let layers = Counting {
        embeddings: false,
        lm_head: false,
        mtp: false,
        ..spec.counting
    };
    let (mut p, mut f) = (Params::ZERO, Flops::ZERO);
    for layer in stack.layers() {
        p = p
            .checked_add(
                layer_cost(m.hidden, layer, &keys)
                    .unwrap()
                    .0
                    .total()
                    .unwrap(),
            )
            .unwrap();
    }
    for i in stack.execution_order() {
        let one = layer_cost(m.hidden, stack.layer(i).unwrap(), &keys)
            .unwrap()
            .1;
        f = f.checked_add(one.total().unwrap()).unwrap();
    }
    let final_norm = if m.norm_bias { 2 * m.hidden } else { m.hidden };
    prop_assert_eq!(
        p.0 + final_norm,
        params(m, &layers).unwrap().0.total().unwrap().0
    );
    let forward = forward_flops(m, &spec.workload, &layers).unwrap();
    prop_assert_eq!(f, forward.total().unwrap());
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Every architecture the reference runs, looped or not: plain and MLA models with
    /// windows, indexers, dense layers and MTP modules; Gated DeltaNet hybrids; Mamba-2
    /// hybrids with one-block layers and relu2; Gemma 4's pieces.
    #[test]
    fn the_stack_describes_every_layer_execution(
        (spec, repeat) in arb_spec(),
        which in 0usize..4,
        mask in 1u64..16,
        gdn in (1u64..=2, 1u64..=2, 1u64..=3, 1u64..=3, 1u64..=4),
        kinds in 0u64..1296,
        mamba in (1u64..=4, 1u64..=3, 1u64..=3, any::<bool>(), 1u64..=4, 1u64..=5, any::<bool>(), any::<bool>()),
        (flag, shape, shared_ffn) in (any::<bool>(), (1u64..=3, 1u64..=4, any::<bool>()), 1u64..=3),
    ) {
        let docs = documents(&spec.workload, repeat);
        // A model with no such hybrid (every layer, or none, recurrent) is checked as it is.
        let plain = spec.clone();
        let spec = match which {
            0 => None,
            1 => hybrid(spec, &docs, mask, gdn, flag),
            2 => mamba_hybrid(spec, &docs, kinds, mamba, flag),
            _ => Some(gemma(spec, shape, shared_ffn)),
        };
        check(&spec.unwrap_or(plain))?;
    }
}
