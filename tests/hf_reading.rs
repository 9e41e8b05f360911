//! How a Hugging Face `config.json` is read: the rules each family's Transformers code
//! applies (Qwen's dense layers, Llama-4's layer patterns, MiniMax's own keys), the refusals
//! of what the cost model cannot describe, and `smelt import` / `smelt cost` on a config.

use crate::common::{self, data, run_json};
use crate::hf_figures::{config_text, load};
use smelt::ModelSpec;
use smelt::hf::{self, Family};

/// Qwen's dense-layer rule: layer `i` (0-based) is MoE when it is not in `mlp_only_layers`
/// and `(i + 1) % decoder_sparse_step == 0`; the others get a dense SwiGLU of
/// `intermediate_size`. Swapping MoE layers for dense ones changes the count by exactly
/// their difference.
#[test]
fn qwen_dense_layers_follow_the_transformers_rule() {
    let text = config_text("qwen1.5-moe-a2.7b.json");
    let all_moe = hf::import(&text, ModelSpec::default_workload()).unwrap();
    let step2 = hf::import(
        &text.replace("\"decoder_sparse_step\": 1", "\"decoder_sparse_step\": 2"),
        ModelSpec::default_workload(),
    )
    .unwrap();
    let d = step2.model.dense.as_ref().unwrap();
    assert_eq!(d.layers, (0..12).map(|i| 2 * i + 1).collect::<Vec<u64>>());
    assert_eq!(d.ffn, 5632);
    let only = hf::import(
        &text.replace(
            "\"decoder_sparse_step\": 1,",
            "\"decoder_sparse_step\": 1, \"mlp_only_layers\": [0, 23],",
        ),
        ModelSpec::default_workload(),
    )
    .unwrap();
    assert_eq!(only.model.dense.as_ref().unwrap().layers, vec![1, 24]);
    let moe_layer: u64 = 60 * 3 * 2048 * 1408 + 2048 * 60 + 3 * 2048 * 5632 + 2048;
    let dense_layer: u64 = 3 * 2048 * 5632;
    let total = |s: &ModelSpec| smelt::cost(s).unwrap().params.total.0;
    assert_eq!(
        total(&all_moe) - total(&only),
        2 * (moe_layer - dense_layer)
    );
    assert_eq!(
        total(&all_moe) - total(&step2),
        12 * (moe_layer - dense_layer)
    );
    // Qwen3-MoE reads the same keys.
    let qwen3 = config_text("qwen3-30b-a3b.json");
    let q = hf::import(
        &qwen3.replace("\"mlp_only_layers\": []", "\"mlp_only_layers\": [0, 1]"),
        ModelSpec::default_workload(),
    )
    .unwrap();
    assert_eq!(
        q.model.dense,
        Some(smelt::Dense {
            layers: vec![1, 2],
            ffn: 6144
        })
    );
}

fn refused(json: &str, needles: &[&str]) {
    let e = hf::import(json, ModelSpec::default_workload())
        .unwrap_err()
        .to_string();
    for n in needles {
        assert!(e.contains(n), "expected {n:?} in: {e}");
    }
}

#[test]
fn what_the_cost_model_cannot_describe_is_refused() {
    let mixtral = config_text("mixtral-8x7b-v0.1.json");
    let v3 = config_text("deepseek-v3.json");
    refused(
        &v3.replace(
            "\"kv_lora_rank\": 512,",
            "\"kv_lora_rank\": 512, \"index_topk\": 2048,",
        ),
        &["index_topk", "sparse attention indexer", "refuses"],
    );
    refused(
        &v3.replace("\"deepseek_v3\"", "\"kimi_k2\"").replace(
            "\"kv_lora_rank\": 512,",
            "\"kv_lora_rank\": 512, \"index_topk\": 2048,",
        ),
        &["index_topk", "kimi_k2", "deepseek_v32 and glm_moe_dsa"],
    );
    let v32 = config_text("deepseek-v3.2-exp.json");
    refused(
        &v32.replacen('{', r#"{"mlp_layer_types": ["dense", "sparse"],"#, 1),
        &[
            "mlp_layer_types",
            "[1]",
            "[1, 2, 3] of 61 layers",
            "refuses",
        ],
    );
    let glm5 = config_text("glm-5.json");
    let with = |extra: &str| glm5.replacen('{', &format!("{{{extra},"), 1);
    refused(
        &with(r#""index_topk_freq": 2"#),
        &[
            "index_topk_freq",
            "layer 2 (0-based) is 'shared'",
            "refuses",
        ],
    );
    refused(
        &with(r#""index_topk_pattern": "FFS""#),
        &["index_topk_pattern", "each of the 78 layers; got 3"],
    );
    refused(
        &with(r#""moe_layer_freq": 2"#),
        &["moe_layer_freq", "does not read it", "refuses"],
    );
    refused(
        &with(r#""layer_types": ["full_attention"]"#),
        &["layer_types", "each of the 78 layers; got 1"],
    );
    refused(
        &with(r#""mlp_layer_types": ["dense", "sparse"]"#),
        &["mlp_layer_types", "each of the 78 layers; got 2"],
    );
    refused(
        &v3.replace("\"attention_bias\": false", "\"attention_bias\": true"),
        &["attention_bias", "latent projections"],
    );
    for (family, why) in [
        ("qwen3_5", "dense MLP on every layer"),
        ("qwen3_5_text", "no experts"),
        ("jamba", "read only from nemotron_h"),
        ("granitemoehybrid", "read only from nemotron_h"),
        ("minimax", "lightning (linear) attention"),
    ] {
        refused(
            &format!(r#"{{"model_type": "{family}", "hidden_size": 7168}}"#),
            &[family, why, "refuses"],
        );
    }
    let oss = config_text("gpt-oss-20b.json");
    refused(
        &oss.replacen("\"full_attention\"", "\"linear_attention\"", 1),
        &["layer_types[1]", "linear_attention"],
    );
    refused(
        &oss.replacen("\"full_attention\",", "", 1),
        &["layer_types", "each of the 24 layers; got 23"],
    );
    let qwen15 = config_text("qwen1.5-moe-a2.7b.json");
    refused(
        &qwen15.replace(
            "\"use_sliding_window\": false",
            "\"use_sliding_window\": true",
        ),
        &["sliding_window", "refuses"],
    );
    refused(
        &qwen15.replace("\"decoder_sparse_step\": 1", "\"decoder_sparse_step\": 0"),
        &["decoder_sparse_step", "at least 1"],
    );
    refused(
        &qwen15.replace(
            "\"decoder_sparse_step\": 1,",
            "\"decoder_sparse_step\": 1, \"mlp_only_layers\": [24],",
        ),
        &["mlp_only_layers[0]", "below num_hidden_layers (24)"],
    );
    refused(
        &qwen15.replace(
            "\"shared_expert_intermediate_size\": 5632,",
            "\"shared_expert_intermediate_size\": 0,",
        ),
        &["shared_expert_intermediate_size", "gated shared expert"],
    );
    refused(
        &qwen15.replace("\"shared_expert_intermediate_size\": 5632,", ""),
        &["shared_expert_intermediate_size", "missing"],
    );
    // The hybrids build the same gated shared expert, and are refused the same way, each
    // naming its family (not a key it does not read).
    for (file, family) in [
        ("qwen3-next-80b-a3b.json", "qwen3_next"),
        ("qwen3.5-35b-a3b.json", "qwen3_5_moe_text"),
    ] {
        let text = config_text(file);
        let zero = text.replace(
            "\"shared_expert_intermediate_size\": 512",
            "\"shared_expert_intermediate_size\": 0",
        );
        assert_ne!(zero, text, "{file}");
        refused(
            &zero,
            &[
                "config.json: shared_expert_intermediate_size",
                &format!("must be at least 1: {family} always has a gated shared expert"),
            ],
        );
    }
    refused(
        &qwen15.replace("\"num_experts\": 60", "\"num_experts\": 0"),
        &["num_experts", "at least 1"],
    );
    refused(
        r#"{"model_type": "llama", "hidden_size": 4096}"#,
        &["'llama'", "supported"],
    );
    refused(
        &mixtral.replace("\"hidden_size\": 4096,", ""),
        &["hidden_size", "missing"],
    );
    let qwen3 = config_text("qwen3-30b-a3b.json");
    refused(
        &qwen3
            .replace(
                "\"use_sliding_window\": false",
                "\"use_sliding_window\": true",
            )
            .replace("\"sliding_window\": null", "\"sliding_window\": 4096"),
        &["sliding_window"],
    );
    refused("{not json", &["config.json"]);
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
    // NoPE on every fourth layer (the same default); their queries scaled (attn_temperature_tuning = 4, truthy); the L2 q/k norm off (Maverick).
    let nope = spec.model.nope.as_ref().unwrap();
    assert_eq!(nope.layers, (4..=48).step_by(4).collect::<Vec<_>>());
    assert!(nope.temperature);
    assert_eq!(spec.model.qk_norm, smelt::QkNorm::None);
    assert_eq!(
        spec.model.moe.router,
        Some(smelt::Router::SigmoidTopkScatter)
    );
    // No chunk size and no layer_types: every layer full, as Transformers derives them.
    let unchunked = import(&text.replace(
        "\"attention_chunk_size\": 8192",
        "\"attention_chunk_size\": null",
    ))
    .unwrap();
    assert!(unchunked.model.window.is_none());
    assert_eq!(unchunked.model.nope, spec.model.nope);
    // No chunk size but chunked layers named: refused, naming the key.
    let mut named = v.clone();
    named["attention_chunk_size"] = serde_json::Value::Null;
    named["layer_types"] = serde_json::Value::from(vec!["chunked_attention"; 48]);
    let e = hf::import_value(&named, ModelSpec::default_workload())
        .unwrap_err()
        .to_string();
    assert!(e.contains("attention_chunk_size"), "{e}");
    // A temperature that is not a bool or a number is refused, naming the key.
    let e = import(&text.replace(
        "\"attn_temperature_tuning\": 4",
        "\"attn_temperature_tuning\": \"on\"",
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("attn_temperature_tuning"), "{e}");
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

#[test]
fn cli_import_and_cost_of_a_config() {
    let cfg = data("hf/mixtral-8x7b-v0.1.json");
    let (code, toml_text, err) = common::run(&["import", &cfg]);
    assert_eq!(code, Some(0), "{err}");
    let spec = ModelSpec::from_toml_str(toml_text.trim_start_matches(|c| c != '\n')).unwrap();
    assert_eq!(spec, load("mixtral-8x7b-v0.1.json"));
    let v = run_json(&["cost", &cfg, "--format", "json"]);
    assert_eq!(v["params"]["total"], 46_702_792_704u64);
}

/// The KV held at the context by a model with sliding layers, under both conventions:
/// smelt's `W` keys per sliding layer (what the last query attends) and Transformers' cache,
/// `W - 1` after a prefill; counted here from the config's own keys.
#[test]
fn held_kv_states_both_window_conventions() {
    let path = data("hf/gpt-oss-20b.json");
    let config: serde_json::Value = serde_json::from_str(&config_text("gpt-oss-20b.json")).unwrap();
    let n = |k: &str| config[k].as_u64().unwrap();
    let sliding = config["layer_types"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| *t == "sliding_attention")
        .count() as u64;
    let full = n("num_hidden_layers") - sliding;
    let (per, w, context) = (
        2 * n("num_key_value_heads") * n("head_dim"),
        n("sliding_window"),
        4096,
    );
    let json = run_json(&["cost", &path, "--format", "json"]);
    let at = &json["kv_cache_per_token"]["at_context"];
    assert_eq!(at["held_per_windowed_layer"], w);
    assert_eq!(at["elements"], per * (full * context + sliding * w));
    assert_eq!(
        at["elements_cache"],
        per * (full * context + sliding * (w - 1))
    );
    let table = common::run(&["cost", &path]).1;
    assert!(
        table.contains(&format!("{w} keys per windowed layer")),
        "{table}"
    );
    assert!(
        table.contains(&format!("{} keys per sliding layer after prefill", w - 1)),
        "{table}"
    );
}

/// The same for Llama-4's chunked layers: smelt holds a whole chunk of `C` per chunked layer
/// (what a chunk's last query attends), Transformers' cache (its sliding-window cache with
/// the window set to the chunk) `C - 1` after a prefill. Counted from the config's own keys:
/// a layer is chunked where `no_rope_layers` is 1.
#[test]
fn held_kv_states_both_chunk_conventions() {
    let path = data("hf/llama-4-scout-17b-16e.json");
    let config: serde_json::Value =
        serde_json::from_str(&config_text("llama-4-scout-17b-16e.json")).unwrap();
    let text = &config["text_config"];
    let n = |k: &str| text[k].as_u64().unwrap();
    let rope = text["no_rope_layers"].as_array().unwrap();
    let chunked = rope.iter().filter(|v| v.as_u64() == Some(1)).count() as u64;
    let full = n("num_hidden_layers") - chunked;
    let (per, chunk) = (
        2 * n("num_key_value_heads") * n("head_dim"),
        n("attention_chunk_size"),
    );
    let context = 3 * chunk + 5;
    let ctx = context.to_string();
    let json = run_json(&["cost", &path, "--context", &ctx, "--format", "json"]);
    let at = &json["kv_cache_per_token"]["at_context"];
    assert_eq!(at["held_per_windowed_layer"], chunk);
    assert_eq!(at["elements"], per * (full * context + chunked * chunk));
    assert_eq!(
        at["elements_cache"],
        per * (full * context + chunked * (chunk - 1))
    );
    let table = common::run(&["cost", &path, "--context", &ctx]).1;
    assert!(
        table.contains(&format!(
            "{} keys per chunked layer after prefill",
            chunk - 1
        )),
        "{table}"
    );
}

/// GLM-5's configs read as Transformers' `GlmMoeDsaConfig` builds them: the dense layers
/// from `mlp_layer_types` when given (whatever `first_k_dense_replace` says), else the first
/// `first_k_dense_replace`, 3 when absent, as is one shared expert.
#[test]
fn glm_moe_dsa_reads_its_layer_lists_and_defaults() {
    let glm5 = config_text("glm-5.json");
    let mut types = vec!["\"sparse\""; 78];
    types[1] = "\"dense\"";
    types[40] = "\"dense\"";
    let listed = glm5.replacen(
        '{',
        &format!("{{\"mlp_layer_types\": [{}],", types.join(", ")),
        1,
    );
    let spec = hf::import(&listed, ModelSpec::default_workload()).unwrap();
    assert_eq!(spec.model.dense.as_ref().unwrap().layers, vec![2, 41]);
    let bare = glm5
        .replace("\"first_k_dense_replace\": 3,", "")
        .replace("\"n_shared_experts\": 1,", "")
        .replace("\"q_lora_rank\": 2048,", "")
        .replace("\"intermediate_size\": 12288,", "");
    assert!(!bare.contains("first_k_dense_replace") && !bare.contains("q_lora_rank"));
    let spec = hf::import(&bare, ModelSpec::default_workload()).unwrap();
    assert_eq!(spec.model, load("glm-5.json").model);
    let mut types = vec!["\"sparse\""; 61];
    types[..3].fill("\"dense\"");
    let agreeing = config_text("deepseek-v3.2-exp.json").replacen(
        '{',
        &format!("{{\"mlp_layer_types\": [{}],", types.join(", ")),
        1,
    );
    let v32 = hf::import(&agreeing, ModelSpec::default_workload()).unwrap();
    assert_eq!(v32.model.dense.as_ref().unwrap().layers, vec![1, 2, 3]);
    let full = glm5.replacen('{', "{\"indexer_types\": [\"full\"],", 1);
    let e = hf::import(&full, ModelSpec::default_workload()).unwrap_err();
    assert!(
        e.to_string().contains("each of the 78 layers; got 1"),
        "{e}"
    );
}

/// A key a config leaves out is read as its Transformers config class's default (from
/// `transformers/models/<family>/configuration_*.py`, 5.24), so that the model costed is the
/// one Transformers builds from the file: leaving the key out imports exactly what giving
/// it that default does (python/tests/test_export_hf.py builds both in Transformers).
#[test]
fn a_key_left_out_takes_the_transformers_default() {
    let cases: &[(&str, &[(&str, u64)])] = &[
        ("mixtral-8x7b-v0.1.json", &[("num_key_value_heads", 8)]),
        ("qwen1.5-moe-a2.7b.json", &[("num_key_value_heads", 16)]),
        ("qwen3-30b-a3b.json", &[("num_key_value_heads", 4)]),
        (
            "deepseek-v2.json",
            &[("n_shared_experts", 2), ("q_lora_rank", 1536)],
        ),
        (
            "deepseek-v3.json",
            &[
                ("first_k_dense_replace", 3),
                ("n_shared_experts", 1),
                ("q_lora_rank", 1536),
            ],
        ),
        (
            "deepseek-v3.2-exp.json",
            &[
                ("first_k_dense_replace", 3),
                ("n_shared_experts", 1),
                ("q_lora_rank", 1536),
            ],
        ),
        (
            "glm-4.5.json",
            &[
                ("first_k_dense_replace", 1),
                ("n_shared_experts", 1),
                ("num_key_value_heads", 8),
            ],
        ),
        (
            "gpt-oss-120b.json",
            &[("num_key_value_heads", 8), ("head_dim", 64)],
        ),
        (
            "minimax-m2.json",
            &[("num_key_value_heads", 8), ("head_dim", 128)],
        ),
        ("phi-3.5-moe-instruct.json", &[("num_key_value_heads", 8)]),
    ];
    let import = |v: &serde_json::Value| {
        hf::import_value(v, ModelSpec::default_workload()).map_err(|e| e.to_string())
    };
    for (fixture, keys) in cases {
        let config: serde_json::Value = serde_json::from_str(&config_text(fixture)).unwrap();
        for (key, default) in *keys {
            let mut left_out = config.clone();
            left_out.as_object_mut().unwrap().remove(*key);
            let mut given = config.clone();
            given[*key] = serde_json::Value::from(*default);
            let (a, b) = (import(&left_out), import(&given));
            assert_eq!(
                a.as_ref().map(|s| &s.model),
                b.as_ref().map(|s| &s.model),
                "{fixture} without {key}"
            );
        }
    }
    // Qwen2-57B's 28 heads: Transformers' default of 16 key/value heads does not divide
    // them, and the config without the key is refused rather than costed with 28.
    let mut qwen: serde_json::Value =
        serde_json::from_str(&config_text("qwen2-57b-a14b.json")).unwrap();
    qwen.as_object_mut().unwrap().remove("num_key_value_heads");
    let e = import(&qwen).unwrap_err();
    assert!(e.contains("num_key_value_heads") && e.contains("16"), "{e}");
}

/// Qwen3-Next and Qwen3.5 read their layer pattern from `layer_types`, else from
/// `full_attention_interval` (4 when absent); a list that is not one entry per layer, or
/// that names another kind, is refused with the key.
#[test]
fn gated_deltanet_layers_are_read_from_the_layer_pattern() {
    let next = config_text("qwen3-next-80b-a3b.json");
    let w = ModelSpec::default_workload;
    let every = |n: u64| {
        hf::import(
            &next.replace(
                "\"full_attention_interval\": 4",
                &format!("\"full_attention_interval\": {n}"),
            ),
            w(),
        )
        .unwrap()
    };
    let two = every(2);
    let layers = &two.model.recurrent.as_ref().unwrap().layers;
    assert_eq!(layers.len(), 24);
    assert!(layers.iter().all(|l| l % 2 == 1));
    let types: Vec<String> = (1..=48)
        .map(|l| {
            if l <= 40 {
                "\"linear_attention\""
            } else {
                "\"full_attention\""
            }
            .to_owned()
        })
        .collect();
    let listed = hf::import(
        &next.replace(
            "\"full_attention_interval\": 4",
            &format!("\"layer_types\": [{}]", types.join(", ")),
        ),
        w(),
    )
    .unwrap();
    assert_eq!(
        listed.model.recurrent.as_ref().unwrap().layers,
        (1..=40).collect::<Vec<u64>>()
    );
    refused(
        &next.replace(
            "\"full_attention_interval\": 4",
            "\"layer_types\": [\"linear_attention\"]",
        ),
        &["layer_types", "48"],
    );
    refused(
        &next.replace(
            "\"full_attention_interval\": 4",
            &format!("\"layer_types\": [\"mamba\", {}]", types[1..].join(", ")),
        ),
        &["layer_types[0]", "mamba"],
    );
    refused(
        &next.replace(
            "\"linear_num_value_heads\": 32",
            "\"linear_num_value_heads\": 24",
        ),
        &["linear_num_value_heads", "multiple of"],
    );
    // Every layer linear leaves no KV cache to match.
    let all: Vec<&str> = vec!["\"linear_attention\""; 48];
    refused(
        &next.replace(
            "\"full_attention_interval\": 4",
            &format!("\"layer_types\": [{}]", all.join(", ")),
        ),
        &["layer_types", "at least one attention layer"],
    );
}

/// DeepSeek-V3.2's `layer_types` is never read by Transformers' modelling code (every layer is
/// indexed attention): the list as Transformers' config writes it reads, anything else is
/// refused rather than taken for windows.
#[test]
fn deepseek_v32_layer_types_say_indexed_attention_or_are_refused() {
    let v32 = config_text("deepseek-v3.2-exp.json");
    let list = |t: &str, n: usize| {
        let entries = vec![format!("\"{t}\""); n].join(", ");
        v32.replacen('{', &format!("{{\"layer_types\": [{entries}],"), 1)
    };
    let plain = hf::import(&v32, ModelSpec::default_workload()).unwrap();
    let listed = hf::import(
        &list("indexed_attention", 61),
        ModelSpec::default_workload(),
    )
    .unwrap();
    assert_eq!(plain.model, listed.model);
    refused(
        &list("sliding_attention", 61),
        &[
            "layer_types[0]",
            "sliding_attention",
            "does not read layer_types",
        ],
    );
    refused(
        &list("indexed_attention", 60),
        &["layer_types", "each of the 61 layers; got 60"],
    );
}

/// Gemma 4 (`gemma4_text`, and the `gemma4` wrapper's `text_config`): what its
/// Transformers code builds that the cost model does not describe is refused, naming the
/// key; the keys a config leaves out are read as `Gemma4TextConfig`'s defaults.
#[test]
fn gemma4_refuses_what_it_does_not_describe() {
    let gemma = config_text("gemma-4-26b-a4b.json");
    let text = |from: &str, to: &str| {
        assert!(gemma.contains(from), "{from}");
        gemma.replace(from, to)
    };
    refused(
        &text(
            "\"hidden_size_per_layer_input\": 0",
            "\"hidden_size_per_layer_input\": 256",
        ),
        &[
            "text_config.hidden_size_per_layer_input",
            "per-layer input embeddings",
            "refuses",
        ],
    );
    // Absent, it is the config class's 256: refused the same way.
    refused(
        &text("\"hidden_size_per_layer_input\": 0,", ""),
        &["hidden_size_per_layer_input", "256 when absent"],
    );
    refused(
        &text(
            "\"num_kv_shared_layers\": 0",
            "\"num_kv_shared_layers\": 10",
        ),
        &["text_config.num_kv_shared_layers", "refuses"],
    );
    refused(
        &text("\"enable_moe_block\": true", "\"enable_moe_block\": false"),
        &["text_config.enable_moe_block", "no experts", "refuses"],
    );
    refused(
        &text(
            "\"hidden_activation\": \"gelu_pytorch_tanh\"",
            "\"hidden_activation\": \"silu\"",
        ),
        &["text_config.hidden_activation", "'silu'"],
    );
    refused(
        &text(
            "\"attention_k_eq_v\": true,",
            "\"attention_k_eq_v\": true, \"use_bidirectional_attention\": \"all\",",
        ),
        &["use_bidirectional_attention", "refuses"],
    );
    refused(
        &text(
            "\"attention_k_eq_v\": true,",
            "\"attention_k_eq_v\": true, \"per_layer_config\": {},",
        ),
        &["text_config.per_layer_config", "refuses"],
    );
    refused(
        &text("\"top_k_experts\": 8,", ""),
        &["text_config.top_k_experts", "missing"],
    );
    refused(
        &text("\"top_k_experts\": 8,", "\"top_k_experts\": 200,"),
        &["text_config.top_k_experts", "num_experts (128)"],
    );
    refused(
        &text(
            "\"num_global_key_value_heads\": 2,",
            "\"num_global_key_value_heads\": 3,",
        ),
        &["text_config.num_global_key_value_heads", "must divide"],
    );
    refused(
        &text("\"num_experts\": 128,", ""),
        &["text_config.num_experts", "missing"],
    );
    refused(
        &text("\"sliding_window\": 1024", "\"sliding_window\": null"),
        &["sliding_window", "is null", "512 when the key is absent"],
    );
    // Transformers forces the last layer to full attention: a file that says otherwise.
    let types = r#""full_attention"
    ],"#;
    let last_sliding = gemma.replace(
        types,
        r#""sliding_attention"
    ],"#,
    );
    assert_ne!(last_sliding, gemma);
    refused(&last_sliding, &["text_config.layer_types[29]", "forces"]);
    refused(
        &text("\"sliding_attention\",", "\"chunked_attention\","),
        &["text_config.layer_types[0]", "chunked_attention"],
    );

    // The text decoder alone reads the same as the wrapper's text_config.
    let value: serde_json::Value = serde_json::from_str(&gemma).unwrap();
    let text_config = value["text_config"].to_string();
    let alone = hf::import(&text_config, ModelSpec::default_workload()).unwrap();
    let wrapped = hf::import(&gemma, ModelSpec::default_workload()).unwrap();
    assert_eq!(alone.model, wrapped.model);
    assert_eq!(
        wrapped.name.as_deref(),
        Some("Gemma4ForConditionalGeneration text decoder")
    );
    // Without layer_types, every sixth layer (and the last) is full, as the config class
    // derives them; without global_head_dim, 512.
    let mut derived = value["text_config"].clone();
    let map = derived.as_object_mut().unwrap();
    map.remove("layer_types");
    map.insert("num_hidden_layers".into(), 8.into());
    map.remove("global_head_dim");
    map.remove("tie_word_embeddings");
    let d = hf::import(&derived.to_string(), ModelSpec::default_workload()).unwrap();
    assert_eq!(
        d.model.window.as_ref().unwrap().layers,
        vec![1, 2, 3, 4, 5, 7]
    );
    assert_eq!(d.model.full_attention.as_ref().unwrap().head_dim, 512);
    // tie_word_embeddings defaults to true in Gemma4TextConfig.
    assert!(d.model.tie_embeddings);
    // Without attention_k_eq_v, the full layers keep num_key_value_heads (the class reads
    // num_global_key_value_heads only with it) and have a value projection.
    let map = derived.as_object_mut().unwrap();
    map.insert("attention_k_eq_v".into(), false.into());
    map.insert("global_head_dim".into(), 256.into());
    let plain = hf::import(&derived.to_string(), ModelSpec::default_workload()).unwrap();
    assert_eq!(plain.model.full_attention, None);
    assert_eq!(plain.model.kv_heads, 8);
}

/// Nemotron-H reads its layers from `layers_block_type` (or `layer_types`, legacy names
/// included), else from `hybrid_override_pattern`, one block per layer; what its code does
/// not build as smelt counts is refused with the key; the export writes the list back and
/// reads back as the same model.
#[test]
fn nemotron_h_layers_are_read_from_the_block_pattern() {
    let nano = config_text("nemotron-3-nano-30b-a3b.json");
    let pattern = "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME";
    let w = ModelSpec::default_workload;
    let base = hf::import(&nano, w()).unwrap();
    let names = |legacy: bool| -> Vec<String> {
        pattern
            .chars()
            .map(|c| {
                match (c, legacy) {
                    ('M', false) => "\"linear_attention\"",
                    ('M', true) => "\"mamba\"",
                    ('*', false) => "\"full_attention\"",
                    ('*', true) => "\"attention\"",
                    ('-', _) => "\"mlp\"",
                    _ => "\"moe\"",
                }
                .to_owned()
            })
            .collect()
    };
    for (key, legacy) in [("layers_block_type", false), ("layer_types", true)] {
        let listed = nano.replace(
            &format!("\"hybrid_override_pattern\": \"{pattern}\""),
            &format!("\"{key}\": [{}]", names(legacy).join(", ")),
        );
        assert_eq!(hf::import(&listed, w()).unwrap().model, base.model, "{key}");
    }
    // An MLP layer in place of the first MoE layer: a dense relu2 MLP of intermediate_size.
    let mlp = hf::import(&nano.replacen("MEMEM*", "M-MEM*", 1), w()).unwrap();
    assert_eq!(mlp.model.dense.as_ref().unwrap().layers, vec![2]);
    let (a, b) = (smelt::cost(&base).unwrap(), smelt::cost(&mlp).unwrap());
    let moe = 128 * 2 * 2688 * 1856 + 128 * 2688 + 2 * 2688 * 3712;
    assert_eq!(a.params.total.0 - b.params.total.0, moe - 2 * 2688 * 1856);
    // Without num_hidden_layers, the pattern's length, as NemotronHConfig derives it.
    let derived = hf::import(&nano.replace("\"num_hidden_layers\": 52,", ""), w()).unwrap();
    assert_ne!(nano.replace("\"num_hidden_layers\": 52,", ""), nano);
    assert_eq!(derived.model, base.model);
    // The legacy Mamba keys are read first, as NemotronHConfig reads them.
    let legacy = hf::import(
        &nano.replace("\"n_groups\": 8", "\"n_groups\": 8, \"mamba_n_groups\": 4"),
        w(),
    )
    .unwrap();
    match &legacy.model.recurrent.as_ref().unwrap().mixer {
        smelt::Mixer::Mamba2(x) => assert_eq!(x.groups, 4),
        other => panic!("{other:?}"),
    }
    refused(
        &nano.replace(
            pattern,
            "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEMX",
        ),
        &["hybrid_override_pattern", "character 51", "'X'"],
    );
    refused(
        &nano.replace(pattern, "MEM"),
        &["num_hidden_layers", "(3)", "52"],
    );
    refused(
        &nano
            .replace("\"num_hidden_layers\": 52", "\"num_hidden_layers\": 6")
            .replace(pattern, "M*M*M-"),
        &["hybrid_override_pattern", "no MoE"],
    );
    refused(
        &nano.replace("\"mlp_bias\": false", "\"mlp_bias\": true"),
        &["mlp_bias", "refuses"],
    );
    // The router is read as the published configs set it (one group, renormalised).
    for (from, to, key) in [
        ("\"n_group\": 1", "\"n_group\": 2", "n_group"),
        ("\"topk_group\": 1", "\"topk_group\": 2", "topk_group"),
        (
            "\"norm_topk_prob\": true",
            "\"norm_topk_prob\": false",
            "norm_topk_prob",
        ),
    ] {
        assert_ne!(nano.replace(from, to), nano, "{key}");
        refused(&nano.replace(from, to), &[key, "one group"]);
    }
    // LatentMoE (Nemotron 3 Super's moe_latent_size) is read: the routed experts at the
    // latent width, the projections down and up beside them; a width of 0 is refused in
    // the config's own words.
    let latent = hf::import(
        &nano.replace(
            "\"n_group\": 1",
            "\"n_group\": 1, \"moe_latent_size\": 1024",
        ),
        ModelSpec::default_workload(),
    )
    .unwrap();
    assert_eq!(latent.model.moe.latent, Some(1024));
    let (plain, with) = (
        smelt::cost(&hf::import(&nano, ModelSpec::default_workload()).unwrap()).unwrap(),
        smelt::cost(&latent).unwrap(),
    );
    let moe_layers = 23;
    assert_eq!(plain.params.breakdown.latent_projections.0, 0);
    assert_eq!(
        with.params.breakdown.latent_projections.0,
        moe_layers * 2 * 2688 * 1024
    );
    assert_eq!(
        with.params.breakdown.experts.0,
        moe_layers * 128 * 2 * 1024 * 1856
    );
    refused(
        &nano.replace("\"n_group\": 1", "\"n_group\": 1, \"moe_latent_size\": 0"),
        &["moe_latent_size", "must be"],
    );
    refused(
        &nano.replace(
            "\"tie_word_embeddings\": false",
            "\"tie_word_embeddings\": true",
        ),
        &["tie_word_embeddings", "never ties"],
    );
    refused(
        &nano.replace(
            "\"mlp_hidden_act\": \"relu2\"",
            "\"mlp_hidden_act\": \"silu\"",
        ),
        &["mlp_hidden_act", "silu"],
    );
    refused(
        &nano.replace("\"n_groups\": 8", "\"n_groups\": 5"),
        &["n_groups", "must divide mamba_num_heads (64)"],
    );
    // The export names every layer's block and reads back as the same model.
    let exported = hf::export(&base, Family::NemotronH).unwrap();
    let list = exported["layers_block_type"].as_array().unwrap();
    assert_eq!(list.len(), 52);
    assert_eq!(list[5], "full_attention");
    assert_eq!(hf::family_of(&base), Family::NemotronH);
    let back = hf::import_value(&exported, w()).unwrap();
    assert_eq!(back.model, base.model);
    // Other families cannot express Mamba-2 or one-block layers.
    let e = hf::export(&base, Family::Qwen3Next)
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot express"), "{e}");
}
