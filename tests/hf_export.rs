//! Hugging Face configs as Baselines and as outputs: matching a config.json Baseline,
//! writing the match back in its family's style (`--format hf`), round trips through every
//! family, and what an export refuses.

use crate::common;
use crate::hf_figures::{config_text, load};
use smelt::hf::{self, Family};
use smelt::{ExpertActivation, ModelSpec};

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
    let (code, v, err) = common::hf_export(budget.to_str().unwrap(), &[]);
    assert_eq!(code, Some(0), "{err}");
    let v = v.unwrap();
    assert_eq!(v["model_type"], "mixtral");
    assert_eq!(v["smelt_loop_first_layer"], 9);
    assert_eq!(v["smelt_loop_span"], 16);
    assert_eq!(v["smelt_loop_repeats"], 2);
    assert_eq!(v["smelt_loop_residual_scale"], 0.5);
    let back = hf::import(&v.to_string(), ModelSpec::default_workload()).unwrap();
    let report = smelt::match_budget(&smelt::Budget::load(&budget).unwrap(), 1).unwrap();
    assert_eq!(back.model, report.looped.model);
    assert_eq!(back.model.executions(), 48);
    // A family whose conventions the model does not follow is refused.
    let e = hf::export(&report.looped, Family::Qwen3Moe)
        .unwrap_err()
        .to_string();
    assert!(e.contains("model.qk_norm"), "{e}");
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
    assert_eq!(report.within_tolerance, Some(true));
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
    let (code, v, err) = common::hf_export(&budget, &[]);
    assert_eq!(code, Some(0), "{err}");
    let v = v.unwrap();
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

/// MLA's per-head widths are lattice knobs too: DeepSeek-V3 with `qk_nope_head_dim` and
/// `v_head_dim` each in {96, 128} searches the four pairs (four times the lattice points)
/// and finds a match at least as good as with the Baseline's widths alone; a GQA Baseline
/// refuses them, naming the key.
#[test]
fn mla_head_widths_are_knobs() {
    let base = std::fs::read_to_string(crate::common::budget("match-deepseek-v3.toml")).unwrap();
    let dir = std::path::PathBuf::from(crate::common::budgets_dir());
    let with = format!("{base}\n[lattice]\nqk_nope_head_dim = [128, 96]\nv_head_dim = [96, 128]\n");
    let (b0, b1) = (
        smelt::Budget::from_toml_str(&base, &dir).unwrap(),
        smelt::Budget::from_toml_str(&with, &dir).unwrap(),
    );
    assert_eq!(
        b1.lattice().mla_widths,
        vec![(96, 96), (96, 128), (128, 96), (128, 128)]
    );
    assert_eq!(b1.lattice().head_dim, vec![160, 192]);
    let (m0, m1) = (
        smelt::match_budget(&b0, 1).unwrap(),
        smelt::match_budget(&b1, 1).unwrap(),
    );
    assert_eq!(m1.lattice.lattice_points, 4 * m0.lattice.lattice_points);
    let score = |m: &smelt::MatchReport| m.score[0];
    assert!(score(&m1) <= score(&m0), "{} > {}", score(&m1), score(&m0));
    let a = m1.looped.model.mla.as_ref().unwrap();
    assert!([96, 128].contains(&a.qk_nope_head_dim) && [96, 128].contains(&a.v_head_dim));
    assert_eq!(m1.looped.model.head_dim, a.qk_nope_head_dim + 64);
    let gqa = std::fs::read_to_string(crate::common::budget("match-200m-s95.toml")).unwrap() + "\n";
    let gqa = if gqa.contains("[lattice]") {
        gqa.replacen("[lattice]", "[lattice]\nv_head_dim = [64]", 1)
    } else {
        gqa + "[lattice]\nv_head_dim = [64]\n"
    };
    let e = smelt::Budget::from_toml_str(&gqa, &dir)
        .unwrap_err()
        .to_string();
    assert!(e.contains("lattice.v_head_dim") && e.contains("MLA"), "{e}");
    let bad = with.replace("v_head_dim = [96, 128]", "v_head_dim = [0]");
    let e = smelt::Budget::from_toml_str(&bad, &dir)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("lattice.v_head_dim") && e.contains("between 1"),
        "{e}"
    );
}

/// Each family's config written back from the imported model reads back as the same model.
#[test]
fn configs_round_trip_through_their_families() {
    for (name, family) in [
        ("deepseek-v3.json", Family::DeepseekV3),
        ("deepseek-v2.json", Family::DeepseekV2),
        ("kimi-k2-instruct.json", Family::KimiK2),
        ("gpt-oss-120b.json", Family::GptOss),
        ("glm-4.5-air.json", Family::Glm4Moe),
        ("minimax-m2.json", Family::MinimaxM2),
        ("llama-4-scout-17b-16e.json", Family::Llama4Text),
        ("llama-4-maverick-17b-128e-text.json", Family::Llama4Text),
        ("granite-3.0-3b-a800m.json", Family::GraniteMoe),
        ("phi-3.5-moe-instruct.json", Family::Phimoe),
        ("deepseek-v3.2-exp.json", Family::DeepseekV32),
        ("glm-5.json", Family::GlmMoeDsa),
    ] {
        let spec = load(name);
        if matches!(
            family,
            Family::MinimaxM2 | Family::GraniteMoe | Family::GlmMoeDsa
        ) {
            // Their shapes are also another family's; family_of picks that one.
            let out = hf::export(&spec, family).unwrap();
            let back = hf::import(&out.to_string(), spec.workload.clone()).unwrap();
            assert_eq!(back.model, spec.model, "{name}");
            continue;
        }
        assert_eq!(
            hf::family_of(&spec),
            if family == Family::KimiK2 || family == Family::DeepseekV2 {
                Family::DeepseekV3
            } else {
                family
            }
        );
        let out = hf::export(&spec, family).unwrap();
        assert!(
            out.get("head_dim").is_none() || spec.model.mla.is_none(),
            "{name}"
        );
        let back = hf::import(&out.to_string(), spec.workload.clone()).unwrap();
        assert_eq!(back.model, spec.model, "{name}");
    }
}

/// What a family cannot build is refused on export, naming the family and the feature.
#[test]
fn exports_refuse_what_a_family_cannot_build() {
    let v3 = load("deepseek-v3.json");
    let e = hf::export(&v3, Family::GptOss).unwrap_err().to_string();
    assert!(e.contains("gpt_oss") && e.contains("shared experts"), "{e}");
    let e = hf::export(&v3, Family::Mixtral).unwrap_err().to_string();
    assert!(e.contains("mixtral"), "{e}");
    let mut odd = v3.clone();
    odd.model.dense.as_mut().unwrap().layers = vec![1, 3];
    let e = hf::export(&odd, Family::DeepseekV3)
        .unwrap_err()
        .to_string();
    assert!(e.contains("first_k_dense_replace"), "{e}");
    let mut wide = v3.clone();
    wide.model.moe.shared_ffn = 3000;
    let e = hf::export(&wide, Family::DeepseekV3)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("n_shared_experts x moe_intermediate_size"),
        "{e}"
    );
    let v32 = load("deepseek-v3.2-exp.json");
    let e = hf::export(&v32, Family::DeepseekV3)
        .unwrap_err()
        .to_string();
    assert!(e.contains("[model.indexer]"), "{e}");
    let e = hf::export(&v3, Family::DeepseekV32)
        .unwrap_err()
        .to_string();
    assert!(e.contains("always has a sparse attention indexer"), "{e}");
    let oss = load("gpt-oss-20b.json");
    let e = hf::export(&oss, Family::DeepseekV3)
        .unwrap_err()
        .to_string();
    assert!(e.contains("deepseek_v3"), "{e}");
    // gpt-oss's experts always clamp their SwiGLU (imported as such), and no other
    // family's do.
    assert_eq!(oss.model.moe.activation, ExpertActivation::ClampedSwiglu);
    let mut plain = oss.clone();
    plain.model.moe.activation = ExpertActivation::Swiglu;
    let e = hf::export(&plain, Family::GptOss).unwrap_err().to_string();
    assert!(e.contains("gpt_oss") && e.contains("clamped_swiglu"), "{e}");
    let mut clamped = load("mixtral-8x7b-v0.1.json");
    clamped.model.moe.activation = ExpertActivation::ClampedSwiglu;
    let e = hf::export(&clamped, Family::Mixtral)
        .unwrap_err()
        .to_string();
    assert!(e.contains("mixtral") && e.contains("clamped_swiglu"), "{e}");
}

/// The shipped budgets: DeepSeek-V3 and gpt-oss-120b matched with SMELT's recipe on the
/// default lattice within 3% on every budget (the optimum of the lattice: the solver's
/// search is checked against brute force on MLA and windowed lattices in tests/search.rs),
/// the looped model keeps the Baseline's layer pattern, and its config reads back as it.
#[test]
fn shipped_budgets_match_within_three_percent() {
    for (file, family) in [
        ("match-deepseek-v3.toml", Family::DeepseekV3),
        ("match-gpt-oss-120b.toml", Family::GptOss),
    ] {
        let budget = smelt::Budget::load(crate::common::budget(file)).unwrap();
        let m = smelt::match_budget(&budget, 1).unwrap();
        assert_eq!(m.within_tolerance, Some(true), "{file}: {:?}", m.residuals);
        for r in [m.residuals.flops, m.residuals.params, m.residuals.kv] {
            assert!(r.abs() <= 0.03, "{file}: {:?}", m.residuals);
        }
        let (base, looped) = (&m.baseline.model, &m.looped.model);
        assert_eq!(looped.executions(), base.layers + base.layers / 2);
        assert_eq!(
            looped.dense.as_ref().map(|d| d.layers.clone()),
            base.dense.as_ref().map(|d| d.layers.clone())
        );
        assert_eq!(looped.window, base.window);
        assert_eq!(looped.mla.is_some(), base.mla.is_some());
        assert_eq!(hf::family_of(&m.looped), family);
        let config = hf::export(&m.looped, family).unwrap();
        let back = hf::import(&config.to_string(), m.looped.workload.clone()).unwrap();
        assert_eq!(&back.model, looped, "{file}");
    }
}

/// What Transformers' own config classes would refuse is fixed or refused with the reason:
/// Kimi-K2 is written as `deepseek_v3` (Transformers has no `kimi_k2`) without the remote
/// code its `auto_map` names, Llama-4's `attn_temperature_tuning: 4` is written as the
/// boolean Transformers 5 requires, and a DeepSeek-V2 whose heads do not divide its hidden
/// size (which `DeepseekV2Config` rejects) is refused.
#[test]
fn exports_are_what_transformers_builds() {
    let mut kimi_raw: serde_json::Value =
        serde_json::from_str(&config_text("kimi-k2-instruct.json")).unwrap();
    // Kimi-K2's config on the Hub names its own remote code.
    kimi_raw["auto_map"] =
        serde_json::json!({"AutoConfig": "configuration_deepseek.DeepseekV3Config"});
    let kimi = load("kimi-k2-instruct.json");
    let out = hf::export_like(&kimi, Family::KimiK2, &kimi_raw).unwrap();
    assert_eq!(out["model_type"], "deepseek_v3");
    assert_eq!(out["architectures"][0], "DeepseekV3ForCausalLM");
    assert!(out.get("auto_map").is_none());

    let llama_raw: serde_json::Value =
        serde_json::from_str(&config_text("llama-4-maverick-17b-128e-text.json")).unwrap();
    assert_eq!(llama_raw["attn_temperature_tuning"], 4);
    let llama = load("llama-4-maverick-17b-128e-text.json");
    let out = hf::export_like(&llama, Family::Llama4Text, &llama_raw).unwrap();
    assert_eq!(out["attn_temperature_tuning"], true);

    let mut v2 = load("deepseek-v2.json");
    assert_eq!(v2.model.hidden % v2.model.heads, 0);
    v2.model.heads = 211;
    v2.model.kv_heads = 211;
    let e = hf::export(&v2, Family::DeepseekV2).unwrap_err().to_string();
    assert!(e.contains("DeepseekV2Config"), "{e}");
    assert!(e.starts_with("model.heads: is 211"), "{e}");
}

/// Gemma 4 26B-A4B read, exported as `gemma4_text` (exactly keys the family reads) and read
/// back: the same model and budgets; looped, it is written as a model directory that reads
/// back with its loop. A Gemma 4 export that Transformers would build otherwise is refused,
/// and so is a match of a Gemma 4 Baseline (module docs of `hf/gemma4.rs`, the guide).
#[test]
fn gemma4_round_trips_and_refuses_what_it_cannot_build() {
    let spec = load("gemma-4-26b-a4b.json");
    assert_eq!(hf::family_of(&spec), Family::Gemma4Text);
    let config = hf::export(&spec, Family::Gemma4Text).unwrap();
    let read = Family::Gemma4Text.keys();
    let map = config.as_object().unwrap();
    for k in map.keys() {
        assert!(
            read.contains(&k.as_str()),
            "exports {k}, which it does not read"
        );
    }
    assert!(map.get("num_experts_per_tok").is_none());
    assert_eq!(config["top_k_experts"], 8);
    assert_eq!(config["num_global_key_value_heads"], 2);
    assert_eq!(config["global_head_dim"], 512);
    assert_eq!(config["attention_k_eq_v"], true);
    assert_eq!(config["hidden_size_per_layer_input"], 0);
    assert_eq!(config["intermediate_size"], 2112);
    let back = hf::import(&config.to_string(), spec.workload.clone()).unwrap();
    assert_eq!(back.model, spec.model);
    assert_eq!(
        smelt::budgets(&back).unwrap(),
        smelt::budgets(&spec).unwrap()
    );
    // A model file round trip keeps every new key.
    let toml = spec.to_toml_string().unwrap();
    for key in [
        "[model.full_attention]",
        "k_eq_v = true",
        "v_norm = true",
        "post_norms = true",
        "router_scale = true",
        "branch_norms = true",
        "activation = \"gelu_tanh\"",
    ] {
        assert!(toml.contains(key), "{key} in\n{toml}");
    }
    assert_eq!(ModelSpec::from_toml_str(&toml).unwrap(), spec);

    let refused = |s: &ModelSpec, needles: &[&str]| {
        let e = hf::export(s, Family::Gemma4Text).unwrap_err().to_string();
        for n in needles {
            assert!(e.contains(n), "expected {n:?} in: {e}");
        }
    };
    let mut looped = spec.clone();
    looped.model.looping = Some(smelt::Loop {
        residual_scale: Some(0.5),
        ..crate::common::looped(2, 4, 2).unwrap()
    });
    let config = hf::export(&looped, Family::Gemma4Text).unwrap();
    assert_eq!(config["smelt_loop_span"], 4);
    let dir = hf::looped::ModelDir::of(&config).unwrap();
    assert!(dir.is_looped());
    let written: serde_json::Value = serde_json::from_str(&dir.files[0].1).unwrap();
    assert_eq!(written["model_type"], hf::looped::MODEL_TYPE);
    // The family's config holds the physical layers, its layer_types one entry each.
    assert_eq!(written["text_config"]["model_type"], "gemma4_text");
    assert_eq!(written["text_config"]["layer_types"], config["layer_types"]);
    assert_eq!(written["text_config"]["num_hidden_layers"], 30);
    let back = hf::import(&dir.files[0].1, spec.workload.clone()).unwrap();
    assert_eq!(back.model, looped.model);
    assert_eq!(back.model.executions(), 34);
    let mut last = spec.clone();
    last.model.window.as_mut().unwrap().layers.push(30);
    refused(&last, &["model.window.layers", "last layer"]);
    let mut own_kv = spec.clone();
    own_kv.model.full_attention.as_mut().unwrap().k_eq_v = false;
    refused(
        &own_kv,
        &["model.full_attention.kv_heads", "attention_k_eq_v"],
    );
    let mut two = spec.clone();
    two.model.moe.shared_experts = 2;
    refused(&two, &["exactly one ungated shared expert"]);
    let mut no_post = spec.clone();
    no_post.model.post_norms = false;
    refused(&no_post, &["model.post_norms"]);
    // No other family builds Gemma 4's pieces.
    let e = hf::export(&spec, Family::GptOss).unwrap_err().to_string();
    assert!(e.contains("gpt_oss"), "{e}");
    // The launcher conventions have one attention shape per model: each is refused, by
    // the field, and the exact count alone counts.
    let l = smelt::launcher_flops::launcher_flops(&spec).unwrap();
    assert_eq!(l.counts.len(), 1);
    assert_eq!(l.refused.len(), 4);
    for r in &l.refused {
        assert!(r.reason.contains("model.full_attention"), "{}", r.reason);
    }

    // A Gemma 4 Baseline is matched: the looped model keeps the full-attention layers'
    // shape, its query heads a multiple of their key/value heads, and is written as a
    // looped model directory that reads back with the same budgets.
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let budget = dir.join("gemma-budget.toml");
    std::fs::write(
        &budget,
        format!(
            r#"
baseline = "{}/tests/data/hf/gemma-4-26b-a4b.json"
[recipe]
span = "half"
repeats = 2
[lattice]
hidden = {{ step = 128, min = 2048, max = 2816 }}
experts = {{ step = 8, min = 64, max = 256 }}
expert_ffn = {{ ratio = "baseline", multiple = 64 }}
head_dim = {{ values = [256] }}
heads = {{ tied = true }}
kv_heads = {{ min = 1, max = 8 }}
gqa = {{ min = 1, max = 16 }}
"#,
            env!("CARGO_MANIFEST_DIR")
        ),
    )
    .unwrap();
    let b = smelt::Budget::load(&budget).unwrap();
    let report = smelt::match_budget(&b, 1).unwrap();
    let looped = &report.looped.model;
    let full = spec.model.full_attention.as_ref().unwrap();
    assert_eq!(looped.full_attention.as_ref(), Some(full));
    assert!(
        looped.heads.is_multiple_of(full.kv_heads),
        "{}",
        looped.heads
    );
    assert!(looped.looping.is_some());
    let out = dir.join("gemma-looped");
    let _ = std::fs::remove_dir_all(&out);
    let (code, _, err) = common::run(&[
        "match",
        budget.to_str().unwrap(),
        "--format",
        "hf",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(matches!(code, Some(0) | Some(3)), "{err}");
    let text = std::fs::read_to_string(out.join("config.json")).unwrap();
    let back = hf::import(&text, report.looped.workload.clone()).unwrap();
    assert_eq!(&back.model, looped);
}

/// `smelt export MODEL -o DIR`: a config.json smelt reads (Gemma 4's wrapper, Nemotron-H) is
/// written back as its family's config.json with its other keys carried (Gemma's logit
/// soft-capping), reading back as the same model; a looped model file as a model directory;
/// a family that cannot hold the model refused, writing nothing.
#[test]
fn export_writes_one_model_without_matching() {
    let dir = common::temp_file("d", "").with_extension("export");
    for name in ["gemma-4-26b-a4b.json", "nemotron-3-nano-30b-a3b.json"] {
        let out = dir.join(name.trim_end_matches(".json"));
        let input = common::data(&format!("hf/{name}"));
        let (code, stdout, err) = common::run(&["export", &input, "-o", out.to_str().unwrap()]);
        assert_eq!(code, Some(0), "{name}: {err}");
        assert!(
            stdout.is_empty() && err.contains("wrote config.json"),
            "{err}"
        );
        let written = std::fs::read_to_string(out.join("config.json")).unwrap();
        let back = hf::import(&written, ModelSpec::default_workload()).unwrap();
        assert_eq!(back.model, load(name).model, "{name}");
        if name.starts_with("gemma") {
            let v: serde_json::Value = serde_json::from_str(&written).unwrap();
            assert_eq!(v["model_type"], "gemma4_text");
            assert_eq!(v["final_logit_softcapping"], 30.0);
        }
    }
    let looped = dir.join("looped");
    let (code, _, err) = common::run(&[
        "export",
        &common::budget("smelt-200m-s95.toml"),
        "-o",
        looped.to_str().unwrap(),
        "--vocab",
        "1000",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("looped model directory"), "{err}");
    assert!(looped.join("modeling_smelt_looped.py").exists());
    // A loop run once, its residuals unscaled, is no loop: the family's plain config.
    let once = std::fs::read_to_string(common::budget("smelt-200m-s95.toml"))
        .unwrap()
        .replace("repeats = 2\nresidual_scale = 0.5", "repeats = 1");
    let once_file = common::temp_file("toml", &once);
    let plain = dir.join("once");
    let (code, _, err) = common::run(&[
        "export",
        once_file.to_str().unwrap(),
        "-o",
        plain.to_str().unwrap(),
        "--vocab",
        "1000",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("wrote config.json"), "{err}");
    assert!(!plain.join("modeling_smelt_looped.py").exists());
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(plain.join("config.json")).unwrap()).unwrap();
    assert_ne!(v["model_type"], "smelt_looped", "{v}");
    let refused = dir.join("refused");
    let (code, _, err) = common::run(&[
        "export",
        &common::data("hf/nemotron-3-nano-30b-a3b.json"),
        "-o",
        refused.to_str().unwrap(),
        "--hf-family",
        "mixtral",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("mixtral"), "{err}");
    assert!(!refused.exists(), "a refusal writes nothing");
}

/// `rope_dim` (a RoPE that rotates part of each head and concatenates the rest) is
/// MiniMax-M2's: exported as its `rotary_dim`, refused for a family that rotates whole heads.
#[test]
fn partial_rope_exports_as_its_key() {
    let mut spec = load("minimax-m2.json");
    let out = hf::export(&spec, Family::MinimaxM2).unwrap();
    assert_eq!(out["rotary_dim"], 64);
    spec.model.rope_dim = Some(32);
    let out = hf::export(&spec, Family::MinimaxM2).unwrap();
    let back = hf::import(&out.to_string(), spec.workload.clone()).unwrap();
    assert_eq!(back.model.rope_dim, Some(32));
    let mut mixtral = load("mixtral-8x7b-v0.1.json");
    mixtral.model.rope_dim = Some(64);
    let err = hf::export(&mixtral, Family::Mixtral)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("model.rope_dim") && err.contains("minimax_m2"),
        "{err}"
    );
    spec.model.rope_dim = Some(3);
    let err = spec.model.validate().unwrap_err().to_string();
    assert!(
        err.contains("model.rope_dim") && err.contains("must be even"),
        "{err}"
    );
}

/// The MoE's input noise (`[model.moe] jitter`) is read from the key each family's class
/// draws it by (Mixtral's and MiniMax-M2's `router_jitter_noise`, PhiMoE's
/// `input_jitter_noise`; absent or 0: none), with the router still stated, and always
/// written back, so a carried Baseline key cannot say another; everything else the import
/// reads is the same. A bad value names the key; a family whose class draws none refuses
/// it at export.
#[test]
fn input_noise_is_read_and_written_as_each_familys_key() {
    for (file, family, key, router) in [
        (
            "mixtral-8x7b-v0.1.json",
            Family::Mixtral,
            "router_jitter_noise",
            smelt::Router::SoftmaxRenormalisedFp32,
        ),
        (
            "minimax-m2.json",
            Family::MinimaxM2,
            "router_jitter_noise",
            smelt::Router::SigmoidRenormalisedFp32,
        ),
        (
            "phi-3.5-moe-instruct.json",
            Family::Phimoe,
            "input_jitter_noise",
            smelt::Router::Sparsemixer,
        ),
    ] {
        let mut config: serde_json::Value = serde_json::from_str(&config_text(file)).unwrap();
        config.as_object_mut().unwrap().remove(key);
        let quiet = hf::import(&config.to_string(), ModelSpec::default_workload()).unwrap();
        assert_eq!(quiet.model.moe.router, Some(router), "{file}");
        assert_eq!(quiet.model.moe.jitter, None, "{file}");
        assert_eq!(hf::export(&quiet, family).unwrap()[key], 0.0, "{file}");
        config[key] = serde_json::json!(0.0);
        let zero = hf::import(&config.to_string(), ModelSpec::default_workload()).unwrap();
        assert_eq!(zero.model, quiet.model, "{file}");
        config[key] = serde_json::json!(0.01);
        let noisy = hf::import(&config.to_string(), ModelSpec::default_workload()).unwrap();
        assert_eq!(
            noisy.model.moe.jitter,
            Some(smelt::model::Jitter(0.01)),
            "{file}"
        );
        let mut same = noisy.model.clone();
        same.moe.jitter = None;
        assert_eq!(same, quiet.model, "{file}");
        let out = hf::export(&noisy, family).unwrap();
        assert_eq!(out[key], 0.01, "{file}");
        let back = hf::import(&out.to_string(), ModelSpec::default_workload()).unwrap();
        assert_eq!(back.model.moe.jitter, noisy.model.moe.jitter, "{file}");
        // Carried from a noisy Baseline, the key says the matched model's (none).
        let out = hf::export_like(&quiet, family, &config).unwrap();
        assert_eq!(out[key], 0.0, "{file}");
        for bad in [
            serde_json::json!(1.5),
            serde_json::json!(-0.1),
            serde_json::json!("0.01"),
        ] {
            config[key] = bad.clone();
            let err = hf::import(&config.to_string(), ModelSpec::default_workload())
                .unwrap_err()
                .to_string();
            assert!(
                err.starts_with(&format!("config.json: {key}")),
                "{file} {bad}: {err}"
            );
        }
    }
    let mut qwen = load("qwen3-30b-a3b.json");
    qwen.model.moe.jitter = Some(smelt::model::Jitter(0.01));
    let err = hf::export(&qwen, Family::Qwen3Moe).unwrap_err().to_string();
    assert!(err.contains("model.moe.jitter"), "{err}");
    qwen.model.moe.jitter = Some(smelt::model::Jitter(1.0));
    let err = qwen.model.validate().unwrap_err().to_string();
    assert!(
        err.starts_with("model.moe.jitter") && err.contains("strictly between 0 and 1"),
        "{err}"
    );
}

/// DeepSeek's group-limited router runs only on experts its groups fit: an export whose
/// expert count the groups (the Baseline's `n_group`, else the class default, 8 for
/// DeepSeek-V3) do not divide is refused instead of written as a model whose forward pass
/// fails in Transformers; one they divide is written.
#[test]
fn an_export_refuses_experts_its_router_groups_cannot_run() {
    let mut spec = load("deepseek-v3.json");
    spec.model.moe.router = None;
    spec.model.moe.router_groups = None;
    spec.model.moe.experts = 100;
    let err = hf::export(&spec, Family::DeepseekV3)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("model.moe.experts: is 100") && err.contains("n_group = 8 and topk_group = 4"),
        "{err}"
    );
    let baseline: serde_json::Value =
        serde_json::from_str(&config_text("deepseek-v3.json")).unwrap();
    assert!(hf::export_like(&spec, Family::DeepseekV3, &baseline).is_err());
    spec.model.moe.experts = 96;
    let out = hf::export_like(&spec, Family::DeepseekV3, &baseline).unwrap();
    assert_eq!(out["n_routed_experts"], 96);
    assert_eq!(out["n_group"], 8);
}

/// GLM-4.5's partial RoPE: Transformers reads `rope_parameters.partial_rotary_factor` before
/// the top-level key, so the import does too, and an export that carries the Baseline's
/// `rope_parameters` writes the matched model's share there as well.
#[test]
fn glm_partial_rope_is_read_where_transformers_reads_it() {
    let mut config: serde_json::Value =
        serde_json::from_str(&config_text("glm-4.5-air.json")).unwrap();
    let head_dim = config["head_dim"].as_u64().unwrap();
    config["rope_parameters"] = serde_json::json!({"rope_type": "default", "rope_theta": 1e6, "partial_rotary_factor": 0.25});
    let spec = hf::import(&config.to_string(), ModelSpec::default_workload()).unwrap();
    assert_eq!(spec.model.rope_dim, Some(head_dim / 4));
    let mut looped = spec.clone();
    looped.model.rope_dim = Some(head_dim / 2);
    let out = hf::export_like(&looped, Family::Glm4Moe, &config).unwrap();
    assert_eq!(out["partial_rotary_factor"], 0.5);
    assert_eq!(out["rope_parameters"]["partial_rotary_factor"], 0.5);
    let back = hf::import(&out.to_string(), ModelSpec::default_workload()).unwrap();
    assert_eq!(back.model.rope_dim, Some(head_dim / 2));
}

/// DeepSeek-V2's attention rotates with a complex64 table (`[model.mla] complex_rope`, which
/// its import sets), the other MLA classes with cos and sin: an export into a class that
/// rotates otherwise than the model says is refused, naming the field.
#[test]
fn an_export_refuses_a_rope_table_its_class_does_not_build() {
    let v2 = load("deepseek-v2.json");
    assert!(v2.model.mla.as_ref().unwrap().complex_rope);
    assert!(hf::export(&v2, Family::DeepseekV2).is_ok());
    // Otherwise as DeepSeek-V3's class builds it (a router bias, no stated router).
    let mut v2 = v2;
    v2.model.moe.router_bias = true;
    (v2.model.moe.router, v2.model.moe.router_groups) = (None, None);
    let err = hf::export(&v2, Family::DeepseekV3).unwrap_err().to_string();
    assert!(
        err.contains("model.mla.complex_rope: is true") && err.contains("export deepseek_v2"),
        "{err}"
    );
    let mut v3 = load("deepseek-v3.json");
    v3.model.moe.router_bias = false;
    v3.model.mtp_layers = 0;
    (v3.model.moe.router, v3.model.moe.router_groups) = (None, None);
    let err = hf::export(&v3, Family::DeepseekV2).unwrap_err().to_string();
    assert!(err.contains("model.mla.complex_rope: is false"), "{err}");
}

/// MiniMax-M2's partial RoPE: Transformers reads `rope_parameters.partial_rotary_factor`,
/// then a top-level `partial_rotary_factor`, before `rotary_dim`, which smelt reads; a
/// config where they disagree is refused, naming the key, and an export that carries the
/// Baseline's factor writes the matched model's share there.
#[test]
fn minimax_partial_rope_factor_agrees_with_rotary_dim() {
    let mut config: serde_json::Value =
        serde_json::from_str(&config_text("minimax-m2.json")).unwrap();
    config["partial_rotary_factor"] = serde_json::json!(0.25);
    let err = hf::import(&config.to_string(), ModelSpec::default_workload())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("config.json: partial_rotary_factor") && err.contains("rotary_dim says 64"),
        "{err}"
    );
    config["partial_rotary_factor"] = serde_json::json!(0.5);
    config["rope_parameters"] = serde_json::json!({"rope_type": "default", "rope_theta": 5e6, "partial_rotary_factor": 0.75});
    let err = hf::import(&config.to_string(), ModelSpec::default_workload())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("config.json: rope_parameters.partial_rotary_factor"),
        "{err}"
    );
    config["rope_parameters"]["partial_rotary_factor"] = serde_json::json!(0.5);
    let mut spec = hf::import(&config.to_string(), ModelSpec::default_workload()).unwrap();
    assert_eq!(spec.model.rope_dim, Some(64));
    spec.model.rope_dim = Some(32);
    let out = hf::export_like(&spec, Family::MinimaxM2, &config).unwrap();
    assert_eq!(out["rotary_dim"], 32);
    assert_eq!(out["partial_rotary_factor"], 0.25);
    assert_eq!(out["rope_parameters"]["partial_rotary_factor"], 0.25);
    let back = hf::import(&out.to_string(), ModelSpec::default_workload()).unwrap();
    assert_eq!(back.model.rope_dim, Some(32));
}
