//! The Hugging Face families read since: MiniMax-M2, Llama-4 (Scout and Maverick), Granite
//! 3.0 MoE and Phi-3.5-MoE against their published figures, and the config rules each
//! family's Transformers code applies. Sources and hand counts in tests/data/hf/SOURCE.md.

use crate::hf_families::{active_without_embedding, billions, load};
use smelt::hf::{self, Family};
use smelt::{ModelSpec, WindowKind};

/// Granite 3.0 MoE (IBM model cards): granite-3.0-3b-a800m "3.3B" total, "800M" active;
/// granite-3.0-1b-a400m "1.3B" and "400M". smelt: 3,298,793,472 and 807.4M active without
/// the (tied) embedding; 1,334,628,352 and 378.3M. The active figures are compared at the
/// cards' precision (hundreds of millions).
#[test]
fn granite_moe() {
    for (name, total, exact, active) in [
        ("granite-3.0-3b-a800m.json", "3.3", 3_298_793_472, "0.8"),
        ("granite-3.0-1b-a400m.json", "1.3", 1_334_628_352, "0.4"),
    ] {
        let spec = load(name);
        let m = &spec.model;
        assert!(m.tie_embeddings && m.dense.is_none() && m.window.is_none());
        assert_eq!(m.heads * m.head_dim, m.hidden, "{name}");
        assert_eq!(m.moe.shared_experts, 0);
        let c = smelt::cost(&spec).unwrap();
        assert_eq!(c.params.total.0, exact, "{name}");
        assert_eq!(billions(c.params.total.0, 1), total, "{name}");
        assert_eq!(billions(active_without_embedding(&c), 1), active, "{name}");
    }
}

/// MiniMax-M2 (model card and Transformers' model page): "230 billion total parameters with
/// 10 billion active". smelt: 228,689,764,864 (the hand count in SOURCE.md; 2.3e11 at the
/// card's two digits) and 10.42B active without the embedding. The MTP modules the config
/// names are not built by Transformers' code and not counted.
#[test]
fn minimax_m2() {
    let spec = load("minimax-m2.json");
    let m = &spec.model;
    assert_eq!((m.heads, m.kv_heads, m.head_dim), (48, 8, 128));
    assert_eq!(m.qk_norm, smelt::QkNorm::Full);
    assert!(m.moe.router_bias && !m.moe.expert_bias);
    assert_eq!(
        (m.moe.experts, m.moe.top_k, m.moe.expert_ffn),
        (256, 8, 1536)
    );
    assert_eq!(m.mtp_layers, 0);
    let c = smelt::cost(&spec).unwrap();
    assert_eq!(c.params.total.0, 228_689_764_864);
    assert_eq!(format!("{:.1e}", c.params.total.0 as f64), "2.3e11");
    assert_eq!(billions(active_without_embedding(&c), 0), "10");
    // The q/k norms span the whole projections: (48 + 8) x 128 per layer.
    assert_eq!(
        c.params.breakdown.norms.0,
        62 * (2 * 3072 + 56 * 128) + 3072
    );
}

/// Llama-4 Scout and Maverick (Meta's model cards): 109B total / 17B active (Scout, with its
/// vision encoder), 400B / 17B (Maverick). smelt counts the text decoder: Scout
/// 107,769,861,120, which with the vision encoder and projector of its vision_config
/// (871,932,416 by the hand count in SOURCE.md, not counted by smelt) is 108.64B, the card's
/// 109B; Maverick 400,711,848,960 (4.0e11 at the card's two digits). Active with the
/// embedding: 17.17B and 17.18B.
#[test]
fn llama4() {
    let scout = load("llama-4-scout-17b-16e.json");
    assert_eq!(
        scout.name.as_deref(),
        Some("Llama4ForConditionalGeneration text decoder")
    );
    let m = &scout.model;
    assert_eq!((m.heads, m.kv_heads, m.head_dim), (40, 8, 128));
    assert_eq!(m.qk_norm, smelt::QkNorm::None);
    assert!(m.dense.is_none());
    assert_eq!(
        (m.moe.shared_experts, m.moe.shared_ffn, m.moe.shared_gate),
        (1, 8192, false)
    );
    let w = m.window.as_ref().unwrap();
    assert_eq!((w.kind, w.size), (WindowKind::Chunked, 8192));
    // Chunked on the RoPE layers: all but every fourth.
    assert_eq!(
        w.layers,
        (1..=48).filter(|i| i % 4 != 0).collect::<Vec<_>>()
    );
    let c = smelt::cost(&scout).unwrap();
    assert_eq!(c.params.total.0, 107_769_861_120);
    let vision = 871_932_416;
    assert_eq!(billions(c.params.total.0 + vision, 0), "109");
    assert_eq!(billions(c.params.active.0, 0), "17");

    let maverick = load("llama-4-maverick-17b-128e-text.json");
    let m = &maverick.model;
    let dense = m.dense.as_ref().unwrap();
    // interleave_moe_layer_step = 2: 0-based layers 1, 3, ... are MoE.
    assert_eq!(dense.layers, (1..=48).step_by(2).collect::<Vec<_>>());
    assert_eq!(dense.ffn, 16384);
    assert_eq!(m.moe.experts, 128);
    let c = smelt::cost(&maverick).unwrap();
    assert_eq!(c.params.total.0, 400_711_848_960);
    assert_eq!(format!("{:.1e}", c.params.total.0 as f64), "4.0e11");
    assert_eq!(billions(c.params.active.0, 0), "17");
}

/// Phi-3.5-MoE (model card): "41.9B total parameters", "6.6B active parameters". smelt:
/// 41,873,153,344 (the hand count in SOURCE.md: LayerNorms with biases, Q/K/V/O and LM-head
/// biases) and 6.64B active with the embedding. Its sliding window of 131072 keys is on
/// every layer and bounds nothing at the default 4096-token context.
#[test]
fn phimoe() {
    let spec = load("phi-3.5-moe-instruct.json");
    let m = &spec.model;
    assert!(m.norm_bias && m.lm_head_bias);
    assert_eq!(m.attention_bias, smelt::AttentionBias::All);
    let w = m.window.as_ref().unwrap();
    assert_eq!((w.kind, w.size), (WindowKind::Sliding, 131072));
    assert_eq!(w.layers, (1..=32).collect::<Vec<_>>());
    let c = smelt::cost(&spec).unwrap();
    assert_eq!(c.params.total.0, 41_873_153_344);
    assert_eq!(billions(c.params.total.0, 1), "41.9");
    assert_eq!(billions(c.params.active.0, 1), "6.6");
    // LayerNorms: 2 x 4096 per norm, two per layer and the final one.
    assert_eq!(c.params.breakdown.norms.0, (2 * 32 + 1) * 2 * 4096);
    assert_eq!(c.params.breakdown.lm_head.0, 32064 * 4096 + 32064);
    // The window bounds nothing at the context: the same as full attention.
    let mut full = spec.clone();
    full.model.window = None;
    assert_eq!(
        smelt::budgets(&full).unwrap(),
        smelt::budgets(&spec).unwrap()
    );
    // Mixtral's mask is windowed the same way when its sliding_window is set.
    let text = crate::common::data_text("hf/mixtral-8x7b-v0.1.json")
        .replace("\"sliding_window\": null", "\"sliding_window\": 4096");
    let mixtral = hf::import(&text, ModelSpec::default_workload()).unwrap();
    let w = mixtral.model.window.unwrap();
    assert_eq!((w.size, w.layers.len()), (4096, 32));
    // A window on some layers only is not something either family builds.
    let mut some = spec.clone();
    some.model.window.as_mut().unwrap().layers = vec![1, 3];
    let e = hf::export(&some, Family::Phimoe).unwrap_err().to_string();
    assert!(e.contains("every layer"), "{e}");
    // Nor can other families express its norm biases.
    let mut plain = spec.clone();
    plain.model.attention_bias = smelt::AttentionBias::None;
    let e = hf::export(&plain, Family::Mixtral).unwrap_err().to_string();
    assert!(e.contains("model.norm_bias"), "{e}");
}

/// Llama-4's config rules, refused or read as Transformers reads them.
#[test]
fn llama4_configs_are_read_as_transformers_reads_them() {
    let text = crate::common::data_text("hf/llama-4-maverick-17b-128e-text.json");
    let import = |t: &str| hf::import(t, ModelSpec::default_workload());
    // Without layer_types or no_rope_layers: a NoPE (full) layer every fourth.
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut plain = v.clone();
    plain.as_object_mut().unwrap().remove("no_rope_layers");
    let spec = hf::import_value(&plain, ModelSpec::default_workload()).unwrap();
    let w = spec.model.window.unwrap();
    assert_eq!(
        w.layers,
        (1..=48).filter(|i| i % 4 != 0).collect::<Vec<_>>()
    );
    // No chunk size but chunked layers: refused, naming the key.
    let e = import(&text.replace(
        "\"attention_chunk_size\": 8192",
        "\"attention_chunk_size\": null",
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("attention_chunk_size"), "{e}");
    let e = import(&text.replace(
        "\"interleave_moe_layer_step\": 2",
        "\"interleave_moe_layer_step\": 0",
    ))
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("interleave_moe_layer_step") && e.contains("at least 1"),
        "{e}"
    );
    let mut typed = v.clone();
    let mut types = vec![serde_json::json!("full_attention"); 48];
    types[5] = serde_json::json!("sliding_attention");
    typed["layer_types"] = serde_json::Value::from(types);
    let e = hf::import_value(&typed, ModelSpec::default_workload())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("layer_types[5]") && e.contains("sliding_attention"),
        "{e}"
    );
    // A wrapper without its text decoder.
    let e = import(r#"{"model_type": "llama4", "vision_config": {}}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("text_config"), "{e}");
    // A wrapper's errors name the key inside text_config.
    let scout = crate::common::data_text("hf/llama-4-scout-17b-16e.json");
    let e = import(&scout.replace("\"num_local_experts\": 16", "\"num_local_experts\": 0"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("text_config.num_local_experts"), "{e}");
    // Its shared expert is always as wide as a routed one.
    let mut spec = load("llama-4-scout-17b-16e.json");
    spec.model.moe.expert_ffn = 4096;
    let e = hf::export(&spec, Family::Llama4Text)
        .unwrap_err()
        .to_string();
    assert!(e.contains("exactly one shared expert"), "{e}");
}

/// MiniMax's own keys must describe the model Transformers' code builds.
#[test]
fn minimax_keys_that_disagree_with_the_code_are_refused() {
    let text = crate::common::data_text("hf/minimax-m2.json");
    for (from, to, needle) in [
        (
            "\"use_qk_norm\": true",
            "\"use_qk_norm\": false",
            "use_qk_norm",
        ),
        (
            "\"qk_norm_type\": \"per_layer\"",
            "\"qk_norm_type\": \"per_head\"",
            "per_head",
        ),
        (
            "\"use_routing_bias\": true",
            "\"use_routing_bias\": false",
            "use_routing_bias",
        ),
        (
            "\"shared_intermediate_size\": 0",
            "\"shared_intermediate_size\": 512",
            "shared expert",
        ),
        (
            "\"attn_type_list\": [\n    1,",
            "\"attn_type_list\": [\n    0,",
            "attn_type_list[0]",
        ),
    ] {
        assert!(text.contains(from), "{from}");
        let e = hf::import(&text.replace(from, to), ModelSpec::default_workload())
            .unwrap_err()
            .to_string();
        assert!(e.contains(needle) && e.contains("refuses"), "{e}");
    }
}
