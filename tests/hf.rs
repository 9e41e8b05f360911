//! Hugging Face `config.json` import: smelt's counts against the officially published
//! figures of each supported family, and refusals of what the cost model cannot describe.
//! The configs and their sources are in tests/data/hf/ (see SOURCE.md there).

use crate::common;

use common::{data, data_text, run_json};
use smelt::ModelSpec;
use smelt::hf::{self, Family};

fn load(name: &str) -> ModelSpec {
    ModelSpec::load(data(&format!("hf/{name}"))).unwrap()
}

/// The text of a config in tests/data/hf/.
fn config_text(name: &str) -> String {
    data_text(&format!("hf/{name}"))
}

fn billions(n: u64, decimals: usize) -> String {
    format!("{:.*}", decimals, n as f64 / 1e9)
}

/// Mixtral 8x7B: "46.7B total parameters", "12.9B parameters per token" (Mistral AI,
/// "Mixtral of experts", 2023; arXiv 2401.04088).
#[test]
fn mixtral_8x7b() {
    let c = smelt::cost(&load("mixtral-8x7b-v0.1.json")).unwrap();
    assert_eq!(billions(c.params.total.0, 1), "46.7");
    assert_eq!(billions(c.params.active.0, 1), "12.9");
    assert_eq!(c.params.total.0, 46_702_792_704);
}

fn truncated(n: u64) -> String {
    format!("{:.1}", (n as f64 / 1e8).floor() / 10.0)
}

/// Qwen3-30B-A3B model card: "30.5B in total and 3.3B activated", "Non-Embedding: 29.9B".
/// smelt counts 30.53B, 3.353B and 29.91B: the card truncates (3.353B is "3.3B"; rounding
/// would say 3.4B), so the figures are compared truncated to one decimal.
#[test]
fn qwen3_30b_a3b() {
    let spec = load("qwen3-30b-a3b.json");
    assert_eq!(spec.model.head_dim, 128);
    assert_eq!(spec.model.qk_norm, smelt::QkNorm::PerHead);
    let c = smelt::cost(&spec).unwrap();
    assert_eq!(truncated(c.params.total.0), "30.5");
    assert_eq!(truncated(c.params.active.0), "3.3");
    assert_eq!(c.params.active.0, 3_353_032_704);
    let b = c.params.breakdown;
    let non_embedding = c.params.total.0 - b.embeddings.0 - b.lm_head.0;
    assert_eq!(truncated(non_embedding), "29.9");
}

/// OLMoE-1B-7B (arXiv 2409.02060): 6.9B total, 1.3B active.
#[test]
fn olmoe_1b_7b() {
    let spec = load("olmoe-1b-7b-0924.json");
    assert_eq!(spec.model.qk_norm, smelt::QkNorm::Full);
    let c = smelt::cost(&spec).unwrap();
    assert_eq!(billions(c.params.total.0, 1), "6.9");
    assert_eq!(billions(c.params.active.0, 1), "1.3");
}

/// Qwen1.5-MoE-A2.7B (model card and the release post "Qwen1.5-MoE: Matching 7B Model
/// Performance with 1/3 Activated Parameters", 2024-03-28): "14.3B parameters in total and
/// 2.7B activated parameters during runtime"; the post: "only 2 billion non-embedding
/// parameters" activated. smelt counts 14.316B, 2.689B and 2.067B (Qwen truncates, as for
/// Qwen3). Every layer has Q/K/V biases and one shared expert of width 5632 (the post's "four
/// shared experts" of 1408: the same count) behind a sigmoid gate.
#[test]
fn qwen15_moe_a27b() {
    let spec = load("qwen1.5-moe-a2.7b.json");
    let m = &spec.model;
    assert_eq!(m.attention_bias, smelt::AttentionBias::Qkv);
    assert_eq!(
        (m.moe.shared_experts, m.moe.shared_ffn, m.moe.shared_gate),
        (1, 5632, true)
    );
    assert_eq!(m.dense, None);
    let c = smelt::cost(&spec).unwrap();
    assert_eq!(billions(c.params.total.0, 1), "14.3");
    assert_eq!(billions(c.params.active.0, 1), "2.7");
    let b = c.params.active_breakdown;
    let non_embedding = c.params.active.0 - b.embeddings.0 - b.lm_head.0;
    assert_eq!(truncated(non_embedding), "2.0");
    // By hand, per layer: attention 4·2048² + biases 3·2048; experts 60·3·2048·1408;
    // router 2048·60; shared 3·2048·5632 + gate 2048; norms 2·2048. Then the final norm and
    // untied embedding and LM head (151936 x 2048 each).
    let per_layer = 4 * 2048 * 2048
        + 3 * 2048
        + 60 * 3 * 2048 * 1408
        + 2048 * 60
        + 3 * 2048 * 5632
        + 2048
        + 2 * 2048;
    assert_eq!(c.params.total.0, 24 * per_layer + 2048 + 2 * 151_936 * 2048);
    assert_eq!(c.params.total.0, 14_315_784_192);
    assert_eq!(c.params.active.0, 2_689_173_504);
}

/// Qwen2-57B-A14B (model card; Qwen2 Technical Report, arXiv 2407.10671, Table 1): 57B
/// total, 14B activated. smelt counts 57.41B and 14.25B.
#[test]
fn qwen2_57b_a14b() {
    let spec = load("qwen2-57b-a14b.json");
    assert_eq!(spec.model.kv_heads, 4);
    let c = smelt::cost(&spec).unwrap();
    assert_eq!(billions(c.params.total.0, 0), "57");
    assert_eq!(billions(c.params.active.0, 0), "14");
    assert_eq!(c.params.total.0, 57_408_658_944);
    assert_eq!(c.params.active.0, 14_249_270_784);
}

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
        &v3.replace("\"deepseek_v3\"", "\"glm_moe_dsa\"").replace(
            "\"kv_lora_rank\": 512,",
            "\"kv_lora_rank\": 512, \"index_topk\": 2048,",
        ),
        &["index_topk", "glm_moe_dsa", "not read yet"],
    );
    refused(
        &v3.replace("\"attention_bias\": false", "\"attention_bias\": true"),
        &["attention_bias", "latent projections"],
    );
    for (family, why) in [
        ("qwen3_next", "recurrent state"),
        ("nemotron_h", "Mamba"),
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

/// A Baseline given as a config.json, matched, exported as a config.json in its family's
/// style with the loop in `smelt_loop_*` keys, and imported back: the same model.
#[test]
fn match_a_hf_baseline_and_export_it_back() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let budget = dir.join("hf-budget.toml");
    std::fs::write(
        &budget,
        format!(
            r#"
name = "looped-mixtral"
baseline = "{}/tests/data/hf/mixtral-8x7b-v0.1.json"
[recipe]
span = "half"
repeats = 2
[lattice]
hidden = {{ step = 128, min = 2560, max = 4096 }}
experts = {{ step = 1, min = 2, max = 32 }}
expert_ffn = {{ ratio = "baseline", multiple = 128 }}
head_dim = {{ values = [128] }}
heads = {{ tied = true }}
kv_heads = {{ min = 1, max = 8 }}
gqa = {{ min = 1, max = 32 }}
"#,
            env!("CARGO_MANIFEST_DIR")
        ),
    )
    .unwrap();
    let config = dir.join("looped-mixtral.json");
    let (code, out, err) = common::run(&[
        "match",
        budget.to_str().unwrap(),
        "--format",
        "hf",
        "-o",
        config.to_str().unwrap(),
    ]);
    assert_eq!((code, out.as_str()), (Some(0), ""), "{err}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(v["model_type"], "mixtral");
    assert_eq!(v["smelt_loop_first_layer"], 9);
    assert_eq!(v["smelt_loop_span"], 16);
    assert_eq!(v["smelt_loop_repeats"], 2);
    assert_eq!(v["smelt_loop_residual_scale"], 0.5);
    let back = ModelSpec::load(&config).unwrap();
    let report = smelt::match_budget(&smelt::Budget::load(&budget).unwrap(), 1).unwrap();
    assert_eq!(back.model, report.looped.model);
    assert_eq!(back.model.executions(), 48);
    // A family whose conventions the model does not follow is refused.
    let e = hf::export(&report.looped, Family::Qwen3Moe)
        .unwrap_err()
        .to_string();
    assert!(e.contains("q/k norm"), "{e}");
    let e = "llama".parse::<Family>().unwrap_err().to_string();
    assert!(e.contains("'llama'"), "{e}");
}

/// A Qwen1.5-MoE Baseline matched (`budgets/match-qwen1.5-moe-a2.7b.toml`) and exported as
/// `qwen2_moe`: within 1% on all three budgets; the shared expert, its gate and the Q/K/V
/// biases carry over (the shared width scaled with the hidden size); the Baseline's other
/// keys (RoPE base, norm epsilon, ...) are carried over, the shape keys are the match's; the
/// config reads back as the same model.
#[test]
fn match_a_qwen2_moe_baseline_and_export_it_back() {
    let budget = common::budget("match-qwen1.5-moe-a2.7b.toml");
    let report = smelt::match_budget(&smelt::Budget::load(&budget).unwrap(), 1).unwrap();
    assert!(report.within_tolerance);
    let r = report.residuals;
    assert!(r.flops.abs() < 0.01 && r.params.abs() < 0.01 && r.kv.abs() < 0.01);
    let m = &report.looped.model;
    assert_eq!(m.attention_bias, smelt::AttentionBias::Qkv);
    assert!(m.moe.shared_gate);
    // Shared width tied to hidden as in the Baseline (5632 / 2048), to a multiple of 64.
    assert_eq!(
        m.moe.shared_ffn,
        (m.hidden * 5632 * 2 + 2048 * 64) / (2 * 2048 * 64) * 64
    );
    assert_eq!(hf::family_of(&report.looped), Family::Qwen2Moe);
    let v = run_json(&["match", &budget, "--format", "hf"]);
    assert_eq!(v["model_type"], "qwen2_moe");
    assert_eq!(v["qkv_bias"], true);
    assert_eq!(v["head_dim"], m.head_dim);
    assert_eq!(v["shared_expert_intermediate_size"], m.moe.shared_ffn);
    assert_eq!(v["smelt_loop_repeats"], 2);
    assert_eq!(v["rope_theta"], 1_000_000.0);
    assert_eq!(v["rms_norm_eps"], 1e-6);
    assert_eq!(v["norm_topk_prob"], false);
    assert!(v.get("sliding_window").is_none() && v.get("intermediate_size").is_none());
    let back = hf::import(&v.to_string(), ModelSpec::default_workload()).unwrap();
    assert_eq!(&back.model, m);
    // The other families cannot express a gated shared expert or Q/K/V biases.
    for family in [Family::Mixtral, Family::Olmoe, Family::Qwen3Moe] {
        assert!(hf::export(&report.looped, family).is_err(), "{family}");
    }
}

/// A looped model keeps its Baseline's dense layers at their positions, so a depth that
/// drops one is refused, naming the layer.
#[test]
fn a_depth_without_the_baselines_dense_layer_is_refused() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let text = config_text("qwen1.5-moe-a2.7b.json").replace(
        "\"decoder_sparse_step\": 1,",
        "\"decoder_sparse_step\": 1, \"mlp_only_layers\": [23],",
    );
    let config = dir.join("qwen-dense-last.json");
    std::fs::write(&config, text).unwrap();
    let budget = format!(
        r#"
baseline = "{}"
[recipe]
span = 4
layers = 20
[lattice]
hidden = {{ step = 128, min = 1536, max = 2048 }}
experts = {{ step = 4, min = 8, max = 96 }}
expert_ffn = {{ ratio = "baseline", multiple = 64 }}
head_dim = {{ values = [128] }}
heads = {{ tied = true }}
"#,
        config.display()
    );
    let e = smelt::Budget::from_toml_str(&budget, &dir)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("recipe.layers") && e.contains("dense layer 24"),
        "{e}"
    );
}
