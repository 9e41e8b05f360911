//! The families of issue 14 (MLA, DeepSeek-style MoE, sliding and chunked windows, sinks,
//! biases, shared experts beside routed ones):
//! smelt's counts against the published figures, the shapes each config is read as, and
//! configs written back in each family's style. Sources in tests/data/hf/SOURCE.md.

use crate::common::data;
use smelt::hf::{self, Family};
use smelt::{ModelSpec, WindowKind};

pub(crate) fn load(name: &str) -> ModelSpec {
    ModelSpec::load(data(&format!("hf/{name}"))).unwrap()
}

/// Billions, rounded to `decimals`.
pub(crate) fn billions(n: u64, decimals: usize) -> String {
    format!("{:.*}", decimals, n as f64 / 1e9)
}

/// Active parameters without the input embedding (a lookup, not a matmul), as OpenAI and
/// DeepSeek count "active": the LM head is in.
pub(crate) fn active_without_embedding(c: &smelt::Cost) -> u64 {
    c.params.active.0 - c.params.active_breakdown.embeddings.0
}

/// DeepSeek-V3 (model card and technical report, arXiv 2412.19437): "671B total parameters
/// with 37B activated for each token"; "685B ... includes 671B of the Main Model weights and
/// 14B of the Multi-Token Prediction (MTP) Module weights". smelt: 671.03B, 36.63B active
/// (37B rounded); with `[counting] mtp = true`, 684.49B, the 685B of the card within its
/// rounding of the two parts (671 + 14).
#[test]
fn deepseek_v3() {
    let spec = load("deepseek-v3.json");
    let m = &spec.model;
    let mla = m.mla.as_ref().unwrap();
    assert_eq!(
        (
            mla.q_lora_rank,
            mla.kv_lora_rank,
            mla.qk_nope_head_dim,
            mla.qk_rope_head_dim,
            mla.v_head_dim
        ),
        (1536, 512, 128, 64, 128)
    );
    assert_eq!((m.heads, m.kv_heads, m.head_dim), (128, 128, 192));
    assert_eq!(m.dense.as_ref().unwrap().layers, vec![1, 2, 3]);
    assert_eq!(m.dense.as_ref().unwrap().ffn, 18432);
    assert_eq!(
        (m.moe.shared_experts, m.moe.shared_ffn, m.moe.shared_gate),
        (1, 2048, false)
    );
    assert!(m.moe.router_bias && !m.moe.expert_bias);
    assert_eq!(m.mtp_layers, 1);
    let c = smelt::cost(&spec).unwrap();
    // Hand count (SOURCE.md): 669,173,061,120 non-embedding weights, norms and router
    // biases (14,848 of them), and 2 x 926,679,040 for the embedding and the head.
    assert_eq!(c.params.total.0, 671_026_419_200);
    assert_eq!(billions(c.params.total.0, 0), "671");
    assert_eq!(billions(active_without_embedding(&c), 0), "37");
    // The cache: the 512-wide latent and the 64-wide RoPE key, per layer.
    assert_eq!(c.kv_cache_per_token.elements.0, 61 * (512 + 64));
    let mut with_mtp = spec.clone();
    with_mtp.counting.mtp = true;
    let t = smelt::cost(&with_mtp).unwrap();
    let mtp = t.params.breakdown.mtp.0;
    assert_eq!(t.params.total.0, c.params.total.0 + mtp);
    assert_eq!(billions(mtp, 0), "13");
    assert!(
        (t.params.total.0 as f64 / 685e9 - 1.0).abs() < 1e-3,
        "{}",
        t.params.total.0
    );
    assert!(t.flops_per_token.forward_breakdown.mtp.as_f64() > 0.0);
    assert_eq!(t.kv_cache_per_token.elements, c.kv_cache_per_token.elements);
}

/// DeepSeek-V3.2-Exp (model card: the V3.1-Terminus architecture with DeepSeek Sparse
/// Attention; "685B" on its hub page, with the MTP module): V3's shapes plus the lightning
/// indexer on every layer, 13,959,424 parameters each (hand count in SOURCE.md). smelt:
/// 671,877,944,064 without MTP, 685.36B with it. The cache adds the indexer's 128-wide key
/// to MLA's 576 per layer; the core attends min(t, 2048) keys while the indexer scores all t.
#[test]
fn deepseek_v32() {
    let v3 = load("deepseek-v3.json");
    let spec = load("deepseek-v3.2-exp.json");
    let ix = spec.model.indexer.as_ref().unwrap();
    assert_eq!((ix.heads, ix.head_dim, ix.topk), (64, 128, 2048));
    let (c, c3) = (smelt::cost(&spec).unwrap(), smelt::cost(&v3).unwrap());
    let per_layer = 1536 * 64 * 128 + 7168 * 128 + 2 * 128 + 7168 * 64;
    assert_eq!(c.params.breakdown.indexer.0, 61 * per_layer);
    assert_eq!(c.params.total.0, c3.params.total.0 + 61 * per_layer);
    assert_eq!(c.params.total.0, 671_877_944_064);
    let mut with_mtp = spec.clone();
    with_mtp.counting.mtp = true;
    let t = smelt::cost(&with_mtp).unwrap();
    assert_eq!(billions(t.params.total.0, 0), "685");
    assert_eq!(c.kv_cache_per_token.elements.0, 61 * (512 + 64 + 128));
    // Short documents: every key is selected, the core is V3's.
    let b = c.flops_per_token.forward_breakdown;
    assert_eq!(
        b.attention_core,
        c3.flops_per_token.forward_breakdown.attention_core
    );
    // Documents of 32768 tokens: the core attends min(t, 2048) keys, the indexer scores
    // all t, 64 x (128 + 1) multiply-adds each.
    let long = |s: &ModelSpec| {
        let mut s = s.clone();
        s.workload.context = 32768;
        s.workload.mean_doc_len = Some(32768);
        smelt::cost(&s).unwrap()
    };
    let (l, l3) = (long(&spec), long(&v3));
    let (t_doc, k) = (32768.0f64, 2048.0f64);
    let selected = (k * (k + 1.0) / 2.0 + (t_doc - k) * k) / t_doc;
    let full = (t_doc + 1.0) / 2.0;
    let core = |c: &smelt::Cost| c.flops_per_token.forward_breakdown.attention_core.as_f64();
    assert!((core(&l) / core(&l3) - selected / full).abs() < 1e-12);
    let scores = 2.0 * 64.0 * 129.0 * full * 61.0;
    let projections = 2.0 * (per_layer - 256) as f64 * 61.0;
    let got = l.flops_per_token.forward_breakdown.indexer.as_f64();
    assert!((got / (scores + projections) - 1.0).abs() < 1e-12);
    assert_eq!(l.attention.selected.as_ref().unwrap().topk, 2048);
}

/// DeepSeek-V2 (arXiv 2405.04434): "236B total parameters, of which 21B are activated for
/// each token". smelt: 235.74B and 20.85B. No router bias (`group_limited_greedy`).
#[test]
fn deepseek_v2() {
    let spec = load("deepseek-v2.json");
    assert!(!spec.model.moe.router_bias);
    assert_eq!(spec.model.moe.shared_experts, 2);
    let c = smelt::cost(&spec).unwrap();
    assert_eq!(billions(c.params.total.0, 0), "236");
    assert_eq!(billions(active_without_embedding(&c), 0), "21");
}

/// Kimi-K2 (model card): "1 trillion total parameters", "32 billion activated parameters".
/// smelt: 1.026T and 31.69B (32.86B with the embedding). The 1.04T / 32.6B quoted in issue 14
/// are not what this config counts to; see SOURCE.md.
#[test]
fn kimi_k2() {
    let spec = load("kimi-k2-instruct.json");
    assert_eq!(spec.model.heads, 64);
    assert_eq!(spec.model.moe.experts, 384);
    assert_eq!(spec.model.dense.as_ref().unwrap().layers, vec![1]);
    let c = smelt::cost(&spec).unwrap();
    assert_eq!(format!("{:.0}", c.params.total.0 as f64 / 1e12), "1");
    assert_eq!(billions(active_without_embedding(&c), 0), "32");
}

/// gpt-oss (OpenAI model card, 2025-08-05, Table 1): gpt-oss-120b 116.83B total, 5.13B
/// active; gpt-oss-20b 20.91B total, 3.61B active ("active" with the unembedding, without the
/// embedding). smelt agrees to every published digit.
#[test]
fn gpt_oss() {
    for (name, layers, total, active) in [
        ("gpt-oss-120b.json", 36, "116.83", "5.13"),
        ("gpt-oss-20b.json", 24, "20.91", "3.61"),
    ] {
        let spec = load(name);
        let m = &spec.model;
        assert_eq!((m.heads, m.kv_heads, m.head_dim), (64, 8, 64));
        assert_eq!(m.attention_bias, smelt::AttentionBias::All);
        assert!(m.attention_sinks && m.moe.router_bias && m.moe.expert_bias);
        let w = m.window.as_ref().unwrap();
        assert_eq!((w.kind, w.size), (WindowKind::Sliding, 128));
        assert_eq!(w.layers, (1..=layers).step_by(2).collect::<Vec<_>>());
        let c = smelt::cost(&spec).unwrap();
        assert_eq!(billions(c.params.total.0, 2), total, "{name}");
        assert_eq!(billions(active_without_embedding(&c), 2), active, "{name}");
        // A sliding layer attends at most 128 keys: with documents of 991 tokens, the mean
        // is (128·129/2 + 863·128) / 991.
        let windowed = c.attention.windowed.as_ref().unwrap();
        let want = (128.0 * 129.0 / 2.0 + 863.0 * 128.0) / 991.0;
        assert!((windowed.mean_keys_per_query - want).abs() < 1e-9);
        // Held at a context of 4096: full layers 4096 entries, sliding ones 128.
        let per = 2 * 8 * 64;
        let half = layers / 2;
        assert_eq!(
            c.kv_cache_per_token.at_context.elements.0,
            per * (half * 4096 + half * 128)
        );
    }
}

/// GLM-4.5-Air (Z.ai, GLM-4.5 report): "106B total parameters and 12B active". smelt: 106.85B
/// and 12.80B (with the head, without the embedding): the figures are compared truncated, as
/// for Qwen. Its MTP layer is not counted by default.
#[test]
fn glm_45_air() {
    let spec = load("glm-4.5-air.json");
    let m = &spec.model;
    assert_eq!(m.attention_bias, smelt::AttentionBias::Qkv);
    assert_eq!((m.moe.shared_experts, m.moe.shared_gate), (1, false));
    assert_eq!(m.dense.as_ref().unwrap().layers, vec![1]);
    assert_eq!(m.mtp_layers, 1);
    let c = smelt::cost(&spec).unwrap();
    let truncated = |n: u64| (n as f64 / 1e9).floor();
    assert_eq!(truncated(c.params.total.0), 106.0);
    assert_eq!(truncated(active_without_embedding(&c)), 12.0);
}

/// GLM-4.5 (Z.ai, GLM-4.5 report): "355B total parameters and 32B active". smelt: 352.80B
/// without the MTP layer and 358.34B with it (its own embedding and head, as the checkpoint
/// stores them); the card's 355B lies between and is reproduced by neither convention (see
/// SOURCE.md). Active: 32.86B with the head, without the embedding, the card's 32B
/// truncated, as for GLM-4.5-Air.
#[test]
fn glm_45() {
    let spec = load("glm-4.5.json");
    let m = &spec.model;
    assert_eq!(
        (m.heads, m.kv_heads, m.head_dim, m.layers),
        (96, 8, 128, 92)
    );
    assert_eq!(m.qk_norm, smelt::QkNorm::PerHead);
    assert_eq!(m.dense.as_ref().unwrap().layers, vec![1, 2, 3]);
    let c = smelt::cost(&spec).unwrap();
    assert_eq!(billions(c.params.total.0, 2), "352.80");
    assert_eq!((active_without_embedding(&c) as f64 / 1e9).floor(), 32.0);
    let mut with_mtp = spec.clone();
    with_mtp.counting.mtp = true;
    let t = smelt::cost(&with_mtp).unwrap();
    assert_eq!(billions(t.params.total.0, 2), "358.34");
    assert!(c.params.total.0 < 355_000_000_000 && t.params.total.0 > 355_000_000_000);
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
    ] {
        let spec = load(name);
        if matches!(family, Family::MinimaxM2 | Family::GraniteMoe) {
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
        assert!(m.within_tolerance, "{file}: {:?}", m.residuals);
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
