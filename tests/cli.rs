//! The command line: outputs, the JSON contract, determinism, and a clear error (never a
//! panic) for every kind of bad input.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use assert_cmd::Command;

const BASE: &str = r#"
name = "t"
[model]
layers = 12
hidden = 1280
heads = 16
kv_heads = 2
head_dim = 80
[model.moe]
experts = 192
top_k = 8
expert_ffn = 432
[workload]
context = 4096
mean_doc_len = 991
"#;

fn budget(name: &str) -> String {
    format!("{}/budgets/{name}.toml", env!("CARGO_MANIFEST_DIR"))
}

/// Writes `text` to a fresh file under the target directory and returns its path.
fn file(text: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let path = dir.join(format!(
        "cli-{}-{}.toml",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::write(&path, text).unwrap();
    path
}

fn smelt() -> Command {
    Command::cargo_bin("smelt").unwrap()
}

/// Runs `smelt cost` on `text` and returns stderr, asserting exit code 1 and no panic.
fn cost_error(text: &str) -> String {
    let out = smelt().arg("cost").arg(file(text)).output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.stdout.is_empty());
    stderr
}

fn assert_error(text: &str, needles: &[&str]) {
    let err = cost_error(text);
    for n in needles {
        assert!(err.contains(n), "expected {n:?} in: {err}");
    }
}

#[test]
fn json_contract_has_the_documented_fields() {
    let out = smelt()
        .args(["cost", &budget("base-200m-s95"), "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
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
fn outputs_are_deterministic_in_every_format() {
    for format in ["table", "json", "toml"] {
        let run = || {
            smelt()
                .args([
                    "cost",
                    &budget("smelt-200m-s95"),
                    "--against",
                    &budget("base-200m-s95"),
                    "--format",
                    format,
                ])
                .output()
                .unwrap()
        };
        let (a, b) = (run(), run());
        assert!(a.status.success());
        assert_eq!(a.stdout, b.stdout, "{format}");
        assert!(!a.stdout.is_empty());
    }
}

#[test]
fn against_reports_residuals_and_the_baseline_control() {
    let out = smelt()
        .args([
            "cost",
            &budget("smelt-200m-s95"),
            "--against",
            &budget("base-200m-s95"),
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = &v["residuals"];
    assert!((r["flops"].as_f64().unwrap() - 0.029).abs() < 5e-4);
    assert!(r["kv"].as_f64().unwrap() < 0.0);
    assert_eq!(
        v["model"]["sparsity"]["control"]["params"],
        v["baseline"]["sparsity"]["control"]["params"]
    );
}

#[test]
fn table_shows_the_main_figures() {
    let out = smelt()
        .args(["cost", &budget("base-200m-s95")])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("1,330,053,120"), "{text}");
    assert!(text.contains("3,869,277,440"));
    assert!(text.contains("94.67%"));
}

#[test]
fn toml_output_parses_back() {
    let out = smelt()
        .args(["cost", &budget("base-200m-s95"), "--format", "toml"])
        .output()
        .unwrap();
    let v: toml::Value = toml::from_str(std::str::from_utf8(&out.stdout).unwrap()).unwrap();
    assert_eq!(v["params"]["total"].as_integer(), Some(3_869_277_440));
}

#[test]
fn histogram_reports_the_shortcut() {
    let text = BASE.replace("mean_doc_len = 991", "doc_lengths = [[100, 30], [4096, 2]]");
    let out = smelt()
        .args(["cost", file(&text).to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let s = &v["attention"]["mean_length_shortcut"];
    // 32 documents, 11192 tokens: mean length 349.75, shortcut c̄ = 175.375;
    // exact c̄ = (30*100*101/2 + 2*4096*4097/2) / 11192 = 1512.94...
    assert!((s["mean_doc_len"].as_f64().unwrap() - 349.75).abs() < 1e-9);
    assert!((s["mean_keys_per_query"].as_f64().unwrap() - 175.375).abs() < 1e-9);
    let exact = (30.0 * 5050.0 + 2.0 * 4096.0 * 4097.0 / 2.0) / 11192.0;
    assert!((v["attention"]["mean_keys_per_query"].as_f64().unwrap() - exact).abs() < 1e-9);
    assert!(s["relative_to_exact"].as_f64().unwrap() < -0.05);
}

#[test]
fn missing_field() {
    assert_error(
        &BASE.replace("hidden = 1280\n", ""),
        &["missing field", "hidden"],
    );
}

#[test]
fn unknown_field() {
    assert_error(
        &BASE.replace("hidden = 1280", "hidden = 1280\nhiden = 3"),
        &["unknown field", "hiden"],
    );
}

#[test]
fn zero_size() {
    assert_error(
        &BASE.replace("hidden = 1280", "hidden = 0"),
        &["model.hidden", "must be at least 1"],
    );
    assert_error(
        &BASE.replace("experts = 192", "experts = 0"),
        &["model.moe.experts", "at least 1"],
    );
}

#[test]
fn negative_size() {
    assert_error(
        &BASE.replace("head_dim = 80", "head_dim = -80"),
        &["head_dim", "-80"],
    );
}

#[test]
fn wrong_type() {
    assert_error(
        &BASE.replace("layers = 12", "layers = \"twelve\""),
        &["layers"],
    );
}

#[test]
fn kv_heads_must_divide_heads() {
    assert_error(
        &BASE.replace("kv_heads = 2", "kv_heads = 3"),
        &["model.kv_heads", "must divide model.heads (16)"],
    );
}

#[test]
fn top_k_must_not_exceed_experts() {
    assert_error(
        &BASE.replace("experts = 192", "experts = 4"),
        &["model.moe.top_k", "must not exceed model.moe.experts (4)"],
    );
}

#[test]
fn loop_must_fit_the_depth() {
    let text = BASE.replace(
        "[workload]",
        "[model.loop]\nfirst = 10\nspan = 6\nrepeats = 2\n[workload]",
    );
    assert_error(&text, &["model.loop", "reaches past the last layer (12)"]);
    let text = BASE.replace(
        "[workload]",
        "[model.loop]\nfirst = 4\nspan = 6\nrepeats = 0\n[workload]",
    );
    assert_error(&text, &["model.loop.repeats", "at least 1"]);
}

#[test]
fn mean_doc_len_must_fit_the_context() {
    assert_error(
        &BASE.replace("mean_doc_len = 991", "mean_doc_len = 5000"),
        &[
            "workload.mean_doc_len",
            "must not exceed workload.context (4096)",
        ],
    );
}

#[test]
fn malformed_histograms() {
    let hist = |h: &str| BASE.replace("mean_doc_len = 991", &format!("doc_lengths = {h}"));
    assert_error(&hist("[[100]]"), &["doc_lengths"]);
    assert_error(&hist("[]"), &["workload.doc_lengths", "at least one"]);
    assert_error(
        &hist("[[0, 3]]"),
        &["workload.doc_lengths[0]", "length must be at least 1"],
    );
    assert_error(
        &hist("[[10, 3], [5000, 1]]"),
        &["workload.doc_lengths[1]", "exceeds workload.context (4096)"],
    );
    assert_error(&hist("[[10, 0]]"), &["workload.doc_lengths[0]", "count"]);
    assert_error(&hist("[[10, -1]]"), &["doc_lengths"]);
    assert_error(
        &hist("[[4096, 1000000000000000]]"),
        &["workload.doc_lengths", "absurdly large"],
    );
}

#[test]
fn workload_needs_exactly_one_length_source() {
    assert_error(
        &BASE.replace("mean_doc_len = 991\n", ""),
        &["workload", "mean_doc_len"],
    );
    assert_error(
        &BASE.replace(
            "mean_doc_len = 991",
            "mean_doc_len = 991\ndoc_lengths = [[10, 1]]",
        ),
        &["workload", "not both"],
    );
}

#[test]
fn absurdly_large_sizes() {
    assert_error(
        &BASE.replace("hidden = 1280", "hidden = 1000000000000"),
        &["model.hidden", "must be at most 1048576"],
    );
    assert_error(
        &BASE.replace("layers = 12", "layers = 99999999999999999999999"),
        &["layers"],
    );
}

#[test]
fn counts_that_overflow_are_errors() {
    let text = BASE
        .replace("hidden = 1280", "hidden = 1048576")
        .replace("expert_ffn = 432", "expert_ffn = 1048576")
        .replace("experts = 192", "experts = 1048576");
    assert_error(&text, &["arithmetic overflow"]);
}

#[test]
fn shared_experts_need_a_width() {
    assert_error(
        &BASE.replace("expert_ffn = 432", "expert_ffn = 432\nshared_experts = 1"),
        &["model.moe.shared_ffn"],
    );
}

#[test]
fn counting_the_lm_head_needs_a_vocab() {
    assert_error(
        &format!("{BASE}[counting]\nlm_head = true\n"),
        &["model.vocab", "must be positive"],
    );
}

#[test]
fn unreadable_file_and_bad_arguments() {
    let out = smelt()
        .args(["cost", "/nonexistent/model.toml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("/nonexistent/model.toml"), "{err}");
    let out = smelt()
        .args(["cost", &budget("base-200m-s95"), "--format", "yaml"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn dense_layers_must_be_real_increasing_layers() {
    let with =
        |dense: &str| BASE.replace("[workload]", &format!("[model.dense]\n{dense}\n[workload]"));
    assert_error(
        &with("layers = [0]\nffn = 64"),
        &["model.dense.layers[0]", "1-based", "got 0"],
    );
    assert_error(
        &with("layers = [13]\nffn = 64"),
        &["model.dense.layers[0]", "model.layers (12)", "got 13"],
    );
    assert_error(
        &with("layers = [3, 3]\nffn = 64"),
        &["model.dense.layers[1]", "strictly increasing"],
    );
    assert_error(
        &with("layers = []\nffn = 64"),
        &["model.dense.layers", "at least one"],
    );
    assert_error(
        &with("layers = [1]\nffn = 0"),
        &["model.dense.ffn", "at least 1"],
    );
    assert_error(&with("layers = [1]"), &["ffn"]);
}

#[test]
fn shared_gate_needs_shared_experts_and_biases_are_named() {
    assert_error(
        &BASE.replace("expert_ffn = 432", "expert_ffn = 432\nshared_gate = true"),
        &["model.moe.shared_gate", "shared_experts"],
    );
    assert_error(
        &BASE.replace("head_dim = 80", "head_dim = 80\nattention_bias = \"qk\""),
        &["attention_bias", "qkv"],
    );
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
    let path = file(&text);
    let out = smelt().arg("cost").arg(&path).output().unwrap();
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("dense FFN"), "{table}");
    let out = smelt()
        .arg("cost")
        .arg(&path)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
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
    let cfg = format!(
        "{}/tests/data/hf/qwen1.5-moe-a2.7b.json",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = smelt()
        .args(["cost", &cfg, "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["params"]["total"], 14_315_784_192u64);
    assert_eq!(v["params"]["active"], 2_689_173_504u64);
}

/// The README's annotated model file is a valid model file (every key it documents exists).
#[test]
fn readme_model_file_example_parses() {
    let readme =
        std::fs::read_to_string(format!("{}/README.md", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let section = &readme[readme.find("## Model files").unwrap()..];
    let start = section.find("```toml\n").unwrap() + "```toml\n".len();
    let text = &section[start..start + section[start..].find("```").unwrap()];
    let spec = smelt::ModelSpec::from_toml_str(text).unwrap();
    assert_eq!(spec.model.dense.as_ref().unwrap().layers, vec![1]);
    assert!(smelt::cost(&spec).is_ok());
}
