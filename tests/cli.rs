//! `smelt cost` and `smelt import` through the command line: the JSON contract, every
//! format, determinism, and errors reaching the user (exit 1, the file and the field named,
//! never a panic). The validation rules themselves are tested in tests/validation.rs.

use crate::common;

use common::{BASE_200M as BASE, budget, data, run, run_json, temp_file};

#[test]
fn json_contract_has_the_documented_fields() {
    let v = run_json(&["cost", &budget("base-200m-s95.toml"), "--format", "json"]);
    let get = |path: &str| path.split('.').fold(&v, |v, k| &v[k]).clone();
    assert_eq!(get("params.total"), 3_869_277_440u64);
    assert_eq!(get("params.active"), 206_470_400u64);
    assert_eq!(get("flops_per_token.training"), 1_330_053_120u64);
    assert_eq!(get("flops_per_token.forward"), 443_351_040u64);
    assert_eq!(get("kv_cache_per_token.elements"), 3840);
    assert_eq!(get("kv_cache_per_token.bytes"), 7680);
    assert_eq!(get("layer_executions"), 12);
    assert!((get("sparsity.s").as_f64().unwrap() - 0.9467).abs() < 1e-4);
    for key in [
        "params.breakdown.attention",
        "params.breakdown.experts",
        "params.breakdown.router",
        "params.breakdown.shared",
        "params.breakdown.norms",
        "flops_per_token.forward_breakdown.projections",
        "flops_per_token.forward_breakdown.attention_core",
        "flops_per_token.forward_breakdown.router",
        "flops_per_token.forward_breakdown.experts",
        "flops_per_token.forward_breakdown.shared",
        "sparsity.control.flops_training",
        "sparsity.control.params",
        "sparsity.n_act_eq",
    ] {
        assert!(get(key).is_number(), "{key} missing");
    }
}

#[test]
fn every_format_is_deterministic() {
    for format in ["table", "json", "toml", "csv", "markdown"] {
        let args = [
            "cost",
            &budget("smelt-200m-s95.toml"),
            "--against",
            &budget("base-200m-s95.toml"),
            "--format",
            format,
        ];
        let (a, b) = (run(&args), run(&args));
        assert_eq!(a.0, Some(0), "{format}: {}", a.2);
        assert_eq!(a.1, b.1, "{format}");
        assert!(!a.1.is_empty());
    }
}

#[test]
fn against_reports_residuals_and_the_baseline_control() {
    let v = run_json(&[
        "cost",
        &budget("smelt-200m-s95.toml"),
        "--against",
        &budget("base-200m-s95.toml"),
        "--format",
        "json",
    ]);
    let r = &v["residuals"];
    assert!((r["flops"].as_f64().unwrap() - 0.029).abs() < 5e-4);
    assert!(r["kv"].as_f64().unwrap() < 0.0);
    assert_eq!(
        v["model"]["sparsity"]["control"]["params"],
        v["baseline"]["sparsity"]["control"]["params"]
    );
}

#[test]
fn table_csv_and_toml_show_the_main_figures() {
    let b = budget("base-200m-s95.toml");
    let (_, text, _) = run(&["cost", &b]);
    assert!(text.contains("1,330,053,120"), "{text}");
    assert!(text.contains("3,869,277,440"));
    assert!(text.contains("94.67%"));
    let (_, csv, _) = run(&["cost", &b, "--format", "csv"]);
    assert!(csv.starts_with("quantity,exact,approx\n"), "{csv}");
    assert!(csv.contains("params total,3869277440,"), "{csv}");
    let (_, toml_text, _) = run(&["cost", &b, "--format", "toml"]);
    let v: toml::Value = toml::from_str(&toml_text).unwrap();
    assert_eq!(v["params"]["total"].as_integer(), Some(3_869_277_440));
}

#[test]
fn histogram_reports_the_shortcut() {
    let text = BASE.replace("mean_doc_len = 991", "doc_lengths = [[100, 30], [4096, 2]]");
    let path = temp_file("toml", &text);
    let v = run_json(&["cost", path.to_str().unwrap(), "--format", "json"]);
    let s = &v["attention"]["mean_length_shortcut"];
    // 32 documents, 11192 tokens: mean length 349.75, shortcut c̄ = 175.375;
    // exact c̄ = (30*100*101/2 + 2*4096*4097/2) / 11192 = 1512.94...
    assert!((s["mean_doc_len"].as_f64().unwrap() - 349.75).abs() < 1e-9);
    assert!((s["mean_keys_per_query"].as_f64().unwrap() - 175.375).abs() < 1e-9);
    let exact = (30.0 * 5050.0 + 2.0 * 4096.0 * 4097.0 / 2.0) / 11192.0;
    assert!((v["attention"]["mean_keys_per_query"].as_f64().unwrap() - exact).abs() < 1e-9);
    assert!(s["relative_to_exact"].as_f64().unwrap() < -0.05);
}

/// An invalid file reaches the user as exit 1 with the file, the field and the rule named
/// on standard error, nothing on standard output, and no panic.
#[test]
fn errors_reach_the_user() {
    let path = temp_file("toml", &BASE.replace("kv_heads = 2", "kv_heads = 3"));
    let (code, out, err) = run(&["cost", path.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(out.is_empty());
    assert!(!err.contains("panicked"), "{err}");
    for needle in [
        "smelt: error: model file",
        path.to_str().unwrap(),
        "model.kv_heads: must divide model.heads (16); got 3",
    ] {
        assert!(err.contains(needle), "expected {needle:?} in: {err}");
    }
    let (code, _, err) = run(&["cost", "/nonexistent/model.toml"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("/nonexistent/model.toml"), "{err}");
    let (code, _, err) = run(&["cost", &budget("base-200m-s95.toml"), "--format", "yaml"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("markdown"), "the formats are listed: {err}");
}

/// A model with dense layers, a gated shared expert and Q/K/V biases: the table shows the
/// dense FFN and the JSON carries every component.
#[test]
fn qwen_style_model_costs_every_component() {
    let text = BASE
        .replace("head_dim = 80", "head_dim = 80\nattention_bias = \"qkv\"")
        .replace(
            "expert_ffn = 432",
            "expert_ffn = 432\nshared_experts = 1\nshared_ffn = 1280\nshared_gate = true",
        )
        .replace(
            "[workload]",
            "[model.dense]\nlayers = [1, 12]\nffn = 3456\n[workload]",
        );
    let path = temp_file("toml", &text);
    let (code, table, _) = run(&["cost", path.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    assert!(table.contains("dense FFN"), "{table}");
    let v = run_json(&["cost", path.to_str().unwrap(), "--format", "json"]);
    let b = &v["params"]["breakdown"];
    // 10 MoE layers, 2 dense; biases (16 + 2*2) * 80 per layer; gate 1280 per MoE layer.
    assert_eq!(b["dense"], 2 * 3 * 1280 * 3456u64);
    assert_eq!(b["shared"], 10 * (3 * 1280 * 1280 + 1280u64));
    assert_eq!(b["experts"], 10 * 192 * 3 * 1280 * 432u64);
    assert_eq!(
        b["attention"],
        12 * (1280 * (16 + 4) * 80 + 16 * 80 * 1280 + (16 + 4) * 80u64)
    );
    let f = &v["flops_per_token"]["forward_breakdown"];
    assert_eq!(f["dense"], 2 * 2 * 3 * 1280 * 3456u64);
    assert_eq!(f["router"], 10 * 2 * 1280 * 192u64);
}

#[test]
fn a_qwen15_moe_config_costs_directly() {
    let cfg = data("hf/qwen1.5-moe-a2.7b.json");
    let v = run_json(&["cost", &cfg, "--format", "json"]);
    assert_eq!(v["params"]["total"], 14_315_784_192u64);
    assert_eq!(v["params"]["active"], 2_689_173_504u64);
}

/// The guide's annotated model file is a valid model file (every key it documents exists).
#[test]
fn guide_model_file_example_parses() {
    let guide =
        std::fs::read_to_string(format!("{}/docs/guide.md", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let section = &guide[guide.find("## Model files").unwrap()..];
    let section = &section[..section[3..].find("\n## ").unwrap()];
    let blocks: Vec<&str> = section
        .split("```toml\n")
        .skip(1)
        .map(|b| &b[..b.find("```").unwrap()])
        .collect();
    assert_eq!(blocks.len(), 2);
    let spec = smelt::ModelSpec::from_toml_str(blocks[0]).unwrap();
    assert_eq!(spec.model.dense.as_ref().unwrap().layers, vec![1]);
    assert!(spec.model.window.is_some());
    assert!(smelt::cost(&spec).is_ok());
    let mla = smelt::ModelSpec::from_toml_str(blocks[1]).unwrap();
    assert_eq!(mla.model.mla.as_ref().unwrap().kv_lora_rank, 256);
    let c = smelt::cost(&mla).unwrap();
    assert_eq!(c.kv_cache_per_token.elements.0, 12 * (256 + 32));
    assert!(c.params.breakdown.mtp.0 > 0);
}

/// Two models whose tables have different rows (only one has recurrent layers, only the
/// other counts activations) are compared row by row under the same labels: a row one side
/// lacks shows `-` there, and a budget one side does not count has no residual.
#[test]
fn against_lines_up_rows_one_model_lacks() {
    let nano = data("hf/nemotron-3-nano-30b-a3b.json");
    let mixtral = data("hf/mixtral-8x7b-v0.1.json");
    let (code, text, err) = run(&["cost", &nano, "--against", &mixtral, "--format", "csv"]);
    assert_eq!(code, Some(0), "{err}");
    let row = |label: &str| -> Vec<String> {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("{label},")))
            .unwrap_or_else(|| panic!("no row {label:?} in {text}"));
        line.split(',').map(str::to_owned).collect()
    };
    // Mixtral has no recurrent state: its side of that row is "-".
    assert_eq!(row("  of which recurrent state")[1], "-");
    assert!(row("  of which recurrent state")[2].parse::<u64>().is_ok());
    // The rows after it keep their own figures (they were shifted by one before).
    let keys = row("mean keys per query");
    assert_eq!(keys[1], keys[2], "{keys:?}");
    // Nemotron-H's activations are not counted: no residual on that budget.
    let act = row("activations/token (bytes)");
    assert_eq!(act[2], "not counted");
    assert_eq!(act[3], "", "{act:?}");
}
