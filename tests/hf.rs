//! Hugging Face `config.json` import: smelt's counts against the officially published
//! figures of each supported family, and refusals of what the cost model cannot describe.
//! The configs and their sources are in tests/data/hf/ (see SOURCE.md there).

use smelt::ModelSpec;
use smelt::spec::hf;

fn load(name: &str) -> ModelSpec {
    ModelSpec::load(format!(
        "{}/tests/data/hf/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
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
    let mixtral = std::fs::read_to_string(format!(
        "{}/tests/data/hf/mixtral-8x7b-v0.1.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    refused(
        &mixtral.replace("\"sliding_window\": null", "\"sliding_window\": 4096"),
        &["sliding_window", "refuses"],
    );
    refused(
        r#"{"model_type": "deepseek_v3", "kv_lora_rank": 512, "hidden_size": 7168}"#,
        &["kv_lora_rank", "MLA"],
    );
    refused(
        r#"{"model_type": "qwen2_moe", "hidden_size": 2048}"#,
        &["qwen2_moe", "shared expert"],
    );
    refused(
        r#"{"model_type": "llama", "hidden_size": 4096}"#,
        &["'llama'", "supported"],
    );
    refused(
        &mixtral.replace("\"hidden_size\": 4096,", ""),
        &["hidden_size", "missing"],
    );
    let qwen3 = std::fs::read_to_string(format!(
        "{}/tests/data/hf/qwen3-30b-a3b.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    refused(
        &qwen3.replace("\"mlp_only_layers\": []", "\"mlp_only_layers\": [0, 1]"),
        &["mlp_only_layers", "dense layers"],
    );
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
    let cfg = format!(
        "{}/tests/data/hf/mixtral-8x7b-v0.1.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = assert_cmd::Command::cargo_bin("smelt")
        .unwrap()
        .args(["import", &cfg])
        .output()
        .unwrap();
    assert!(out.status.success());
    let toml_text = String::from_utf8(out.stdout).unwrap();
    let spec = ModelSpec::from_toml_str(toml_text.trim_start_matches(|c| c != '\n')).unwrap();
    assert_eq!(spec, load("mixtral-8x7b-v0.1.json"));
    let out = assert_cmd::Command::cargo_bin("smelt")
        .unwrap()
        .args(["cost", &cfg, "--format", "json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
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
    let out = assert_cmd::Command::cargo_bin("smelt")
        .unwrap()
        .args([
            "match",
            budget.to_str().unwrap(),
            "--format",
            "hf",
            "-o",
            config.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
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
    let e = hf::export(&report.looped, "qwen3_moe")
        .unwrap_err()
        .to_string();
    assert!(e.contains("q/k norm"), "{e}");
    let e = hf::export(&report.looped, "llama").unwrap_err().to_string();
    assert!(e.contains("'llama'"), "{e}");
}
