//! Llama-4 under the Transformers activation policies: what its import states (the L2 q/k
//! norm, NoPE layers with their temperature, the `sigmoid_topk_scatter` router), terms of
//! the count asserted one by one, and the refusals of what its classes do not build
//! (python/tests/test_saved_tensors.py holds the counts to PyTorch's saved tensors).

use crate::hf_figures::load;
use smelt::hf::{self, Family};
use smelt::{ActivationPolicy, ModelSpec, QkNorm, Router, Window, WindowKind};

const STACKS: [ActivationPolicy; 2] = [
    ActivationPolicy::TransformersEager,
    ActivationPolicy::TransformersSdpa,
];

/// Scout's text decoder (48 layers, every fourth NoPE) at `context` tokens in `bytes`.
fn scout(policy: ActivationPolicy, context: u64, bytes: u64) -> ModelSpec {
    let mut spec = load("llama-4-scout-17b-16e.json");
    spec.workload.context = context;
    spec.workload.mean_doc_len = Some(context);
    spec.counting.activations = policy;
    spec.counting.activation_bytes = bytes;
    spec
}

/// The bytes per sequence `spec` keeps under its policy.
fn at_context(spec: &ModelSpec) -> f64 {
    let cost = smelt::cost(spec).unwrap();
    let p = (cost.activations.policies.iter())
        .find(|p| p.policy == spec.counting.activations)
        .unwrap();
    p.at_context.as_f64()
}

fn refusal(spec: &ModelSpec) -> String {
    smelt::cost(spec).unwrap_err().to_string()
}

#[test]
fn the_import_states_llama4s_pieces() {
    let spec = load("llama-4-scout-17b-16e.json");
    let m = &spec.model;
    assert_eq!(m.qk_norm, QkNorm::L2);
    assert_eq!(m.moe.router, Some(Router::SigmoidTopkScatter));
    let nope = m.nope.as_ref().unwrap();
    assert_eq!(nope.layers, (4..=48).step_by(4).collect::<Vec<_>>());
    assert!(nope.temperature);
    // Written back as Transformers reads them (a bool temperature, which it requires).
    let out = hf::export(&spec, Family::Llama4Text).unwrap();
    assert_eq!(out["use_qk_norm"], true);
    assert_eq!(out["attn_temperature_tuning"], true);
    let rope = out["no_rope_layers"].as_array().unwrap();
    assert_eq!(rope.len(), 48);
    assert!(
        rope.iter()
            .enumerate()
            .all(|(i, r)| r == u64::from((i + 1) % 4 != 0))
    );
    let back = hf::import(&out.to_string(), ModelSpec::default_workload()).unwrap();
    assert_eq!(back.model, spec.model);
}

/// Each of Llama-4's terms, asserted on its own: the temperature (4 bytes per token on each
/// of the 12 NoPE layers), the L2 q/k norm (`4q + 4a + 4kv + 4g` on each of the 36 RoPE
/// layers) and SDPA's mask in a chunked layer once the chunk is no longer than the sequence
/// (`b·T²` per sequence on each of the 36 chunked layers, and the keys and values copied to
/// every head: `2b·(q - kv)` per token).
#[test]
fn each_llama4_term_is_its_own() {
    let (t, a, g, d) = (8192u64, 40u64, 8u64, 128u64);
    let (q, kv) = (a * d, g * d);
    for policy in STACKS {
        for bytes in [2u64, 4] {
            let base = scout(policy, t - 1, bytes);
            let mut cold = base.clone();
            cold.model.nope.as_mut().unwrap().temperature = false;
            let tokens = (t - 1) as f64;
            assert_eq!(
                at_context(&base) - at_context(&cold),
                (12 * 4) as f64 * tokens
            );
            let mut plain = base.clone();
            plain.model.qk_norm = QkNorm::None;
            let l2 = 36 * 4 * (q + a + kv + g);
            assert_eq!(at_context(&base) - at_context(&plain), (l2 as f64) * tokens);
            // At T = 8191 the 8192-token chunk covers the sequence: no mask, as with a
            // longer chunk; at T = 8192 SDPA gets the mask, which a chunk of 8193 avoids.
            let mut wide = base.clone();
            wide.model.window.as_mut().unwrap().size = t + 1;
            assert_eq!(at_context(&wide), at_context(&base));
            let at = |spec: &ModelSpec| {
                let mut s = spec.clone();
                s.workload.context = t;
                s.workload.mean_doc_len = Some(t);
                at_context(&s)
            };
            let (masked, unmasked) = (at(&base), at(&wide));
            if policy == ActivationPolicy::TransformersEager {
                assert_eq!(masked, unmasked, "{bytes}");
            } else {
                let extra = 36 * (bytes * t * t + 2 * bytes * (q - kv) * t);
                assert_eq!(masked - unmasked, extra as f64, "{bytes}");
            }
        }
    }
}

#[test]
fn llama4s_pieces_beside_what_its_classes_do_not_build_are_refused() {
    for policy in STACKS {
        let base = scout(policy, 4096, 2);
        assert!(smelt::cost(&base).is_ok());
        let mut other = base.clone();
        other.model.moe.router = Some(Router::SoftmaxRenormalised);
        let e = refusal(&other);
        assert!(
            e.starts_with("model.moe.router") && e.contains("Llama-4's pieces"),
            "{e}"
        );
        let mut sliding = base.clone();
        sliding.model.window.as_mut().unwrap().kind = WindowKind::Sliding;
        let e = refusal(&sliding);
        assert!(
            e.starts_with("model.window") && e.contains("Llama-4's pieces"),
            "{e}"
        );
        let mut per_head = base.clone();
        per_head.model.qk_norm = QkNorm::PerHead;
        let e = refusal(&per_head);
        assert!(e.starts_with("model.qk_norm"), "{e}");
        // Any one of the pieces makes the model Llama-4's: a Mixtral with NoPE layers and
        // Mixtral's router is refused, naming the router.
        let mut mixtral = load("mixtral-8x7b-v0.1.json");
        mixtral.counting.activations = policy;
        mixtral.model.nope = Some(smelt::Nope {
            layers: vec![4],
            temperature: false,
        });
        let e = refusal(&mixtral);
        assert!(e.starts_with("model.moe.router"), "{e}");
    }
}

#[test]
fn nope_layers_are_validated_and_exported_by_llama4_only() {
    let mut spec = load("mixtral-8x7b-v0.1.json");
    spec.model.nope = Some(smelt::Nope {
        layers: vec![40],
        temperature: true,
    });
    let e = smelt::cost(&spec).unwrap_err().to_string();
    assert!(e.starts_with("model.nope.layers[0]"), "{e}");
    spec.model.nope.as_mut().unwrap().layers = vec![4, 8];
    assert_eq!(hf::family_of(&spec), Family::Llama4Text);
    let e = hf::export(&spec, Family::Mixtral).unwrap_err().to_string();
    assert!(
        e.contains("[model.nope]") && e.contains("llama4_text"),
        "{e}"
    );
    // The L2 q/k norm is Llama-4's too.
    let mut l2 = load("mixtral-8x7b-v0.1.json");
    l2.model.qk_norm = QkNorm::L2;
    assert_eq!(hf::family_of(&l2), Family::Llama4Text);
    let e = hf::export(&l2, Family::Mixtral).unwrap_err().to_string();
    assert!(e.contains("qk_norm"), "{e}");
    // A chunked window with the L2 norm but no NoPE layer still exports as Llama-4.
    l2.model.window = Some(Window {
        kind: WindowKind::Chunked,
        size: 8192,
        layers: vec![1, 2],
    });
    assert_eq!(hf::family_of(&l2), Family::Llama4Text);
}

#[test]
fn megatron_refuses_the_l2_qk_norm() {
    let mut spec = scout(ActivationPolicy::Megatron, 4096, 2);
    spec.model.window = None;
    let cost = smelt::cost(&spec).unwrap();
    let refused = cost.activations.refused.unwrap_or_default();
    assert!(
        refused.starts_with("model.qk_norm") && refused.contains("L2"),
        "{refused}"
    );
}
