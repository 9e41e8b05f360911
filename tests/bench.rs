//! The kernel plan is exact, the CPU backend executes it, and the CUDA backend fails
//! cleanly where it cannot run.

use proptest::prelude::*;
use smelt::bench::{self, Backend, BenchOptions, Component, Routing, plan};
use smelt::{Attention, Loop, Model, ModelSpec, Moe, Workload};

fn spec(
    shape: [u64; 8],
    looping: Option<(u64, u64, u64)>,
    shared: (u64, u64, bool),
    attention: Attention,
) -> ModelSpec {
    let [layers, hidden, kv, g, d, experts, top_k, ffn] = shape;
    ModelSpec {
        name: Some("m".into()),
        model: Model {
            layers,
            hidden,
            heads: kv * g,
            kv_heads: kv,
            head_dim: d,
            vocab: 0,
            tie_embeddings: false,
            qk_norm: Default::default(),
            attention_bias: smelt::AttentionBias::Qkv,
            moe: Moe {
                experts,
                top_k,
                expert_ffn: ffn,
                shared_experts: shared.0,
                shared_ffn: shared.1,
                shared_gate: shared.2 && shared.0 > 0,
            },
            dense: None,
            looping: looping.map(|(first, span, repeats)| Loop {
                first,
                span,
                repeats,
                residual_scale: None,
            }),
        },
        workload: Workload {
            context: 4096,
            mean_doc_len: Some(100),
            doc_lengths: None,
            attention,
            kv_dtype_bytes: 2,
        },
        counting: Default::default(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Σ 2·m·n·k over the plan equals the cost model's training FLOPs of one layer
    /// execution, exactly, in total and per component, for any documents and routing.
    #[test]
    fn plan_equals_the_cost_model(
        (layers, hidden, kv, g, d) in (1u64..=6, 1u64..=64, 1u64..=4, 1u64..=4, 1u64..=32),
        (experts, k_frac, ffn) in (1u64..=40, 0.0f64..1.0, 1u64..=64),
        shared in prop_oneof![Just((0u64, 0u64, false)), (1u64..=2, 1u64..=32, any::<bool>())],
        docs in prop::collection::vec(1u64..=300, 1..=6),
        dense in any::<bool>(),
        skew in prop_oneof![Just(None), (0.0f64..3.0).prop_map(Some)],
        repeats in 1u64..=3,
    ) {
        let top_k = 1 + ((experts - 1) as f64 * k_frac) as u64;
        let attention = if dense { Attention::Dense } else { Attention::Causal };
        let looping = (layers >= 2).then_some((1, layers - 1, repeats));
        let s = spec([layers, hidden, kv, g, d, experts, top_k, ffn], looping, shared, attention);
        let routing = skew.map_or(Routing::Balanced, Routing::Skewed);
        let p = plan::plan(&s.model, &docs, attention, routing).unwrap();
        let t: u64 = docs.iter().sum();
        prop_assert_eq!(p.tokens, t);
        let analytic = bench::analytic_per_execution(&s, &docs).unwrap();
        let planned = smelt::Flops::ratio(p.flops(), u128::from(t)).unwrap();
        prop_assert_eq!(analytic, planned);
        // Per component, against the forward breakdown x 3 / executions.
        let mut w = s.workload.clone();
        w.mean_doc_len = None;
        let mut hist = std::collections::BTreeMap::new();
        for &l in &docs { *hist.entry(l).or_insert(0u64) += 1; }
        w.doc_lengths = Some(hist.into_iter().map(|(l, c)| [l, c]).collect());
        let b = smelt::cost::forward_flops(&s.model, &w, &s.counting).unwrap();
        let x = s.model.executions();
        for (c, f) in [
            (Component::Projections, b.projections),
            (Component::AttentionCore, b.attention_core),
            (Component::Router, b.router),
            (Component::Experts, b.experts),
            (Component::Shared, b.shared),
        ] {
            let want = f.checked_mul(3 * t).unwrap();
            let got = smelt::Flops::ratio(p.component_flops(c) * u128::from(x), 1).unwrap();
            prop_assert_eq!(got, want, "{:?}", c);
        }
        // Routing places every assignment, no expert above the token count.
        let a = plan::assign(t, experts, top_k, routing).unwrap();
        prop_assert_eq!(a.iter().sum::<u64>(), t * top_k);
        prop_assert!(a.iter().all(|&x| x <= t));
    }
}

#[test]
fn causal_attention_is_a_triangle_not_a_square() {
    let s = spec(
        [1, 8, 1, 1, 4, 2, 1, 4],
        None,
        (0, 0, false),
        Attention::Causal,
    );
    for len in [1u64, 2, 31, 32, 33, 100, 991] {
        let p = plan::plan(&s.model, &[len], Attention::Causal, Routing::Balanced).unwrap();
        // QKᵀ and PV forward: 2 GEMMs x 2 FLOPs x d x L(L+1)/2 pairs; x3 for training.
        let want = 3 * 2 * 2 * 4 * u128::from(len * (len + 1) / 2);
        assert_eq!(
            p.component_flops(Component::AttentionCore),
            want,
            "L = {len}"
        );
    }
}

#[test]
fn cpu_backend_executes_the_plan_and_reports_ratios() {
    let base = spec(
        [4, 64, 1, 2, 16, 8, 2, 32],
        None,
        (0, 0, false),
        Attention::Causal,
    );
    let looped = spec(
        [4, 48, 1, 2, 16, 12, 2, 24],
        Some((2, 2, 2)),
        (0, 0, false),
        Attention::Causal,
    );
    let opts = BenchOptions {
        backend: Backend::Cpu,
        tokens: 300,
        routing: Routing::Balanced,
        repeats: 1,
    };
    let r = bench::bench(&[&base, &looped], &opts).unwrap();
    assert_eq!(r.models.len(), 2);
    for m in &r.models {
        assert!(m.flops_exact, "{}", m.name);
        assert_eq!(m.tokens, 300);
        let plan_total = m.plan_flops_per_token * m.tokens as f64;
        assert!((m.executed_flops as f64 / plan_total - 1.0).abs() < 1e-12);
        assert!(m.seconds_per_layer_execution > 0.0);
        let shares: f64 = m.components.iter().map(|c| c.time_share).sum();
        assert!((shares - 1.0).abs() < 1e-9);
    }
    assert_eq!(r.models[1].layer_executions, 6);
    let fr = r.flop_ratio.unwrap();
    let want = smelt::budgets(&looped).unwrap().flops.as_f64()
        / smelt::budgets(&base).unwrap().flops.as_f64();
    assert!((fr - want).abs() < 1e-12, "{fr} vs {want}");
    assert!(r.time_ratio.unwrap() > 0.0);
}

#[test]
fn cuda_backend_runs_or_fails_cleanly() {
    let s = spec(
        [2, 64, 1, 2, 16, 8, 2, 32],
        None,
        (0, 0, false),
        Attention::Causal,
    );
    let opts = BenchOptions {
        backend: Backend::Cuda,
        tokens: 200,
        routing: Routing::Balanced,
        repeats: 1,
    };
    match bench::bench(&[&s], &opts) {
        Ok(r) => assert!(r.models[0].flops_exact),
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.starts_with("cuda backend: "), "{msg}");
            assert!(
                msg.contains("--features cuda") || msg.contains("driver") || msg.contains("GPU"),
                "{msg}"
            );
        }
    }
}

fn smelt(args: &[&str]) -> (Option<i32>, String, String) {
    let out = assert_cmd::Command::cargo_bin("smelt")
        .unwrap()
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn cli_bench_of_a_budget_pair() {
    let budget = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/budgets/match-200m-s95-small.toml"
    );
    let (code, out, err) = smelt(&[
        "bench",
        "--budget",
        budget,
        "--tokens",
        "200",
        "--repeats",
        "1",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.matches("equal, exactly").count(), 2, "{out}");
    assert!(
        out.contains("measured time ratio") && out.contains("FLOP ratio"),
        "{out}"
    );
    let (code, json, _) = smelt(&[
        "bench",
        "--budget",
        budget,
        "--tokens",
        "200",
        "--repeats",
        "1",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["models"].as_array().unwrap().len(), 2);
    assert_eq!(v["models"][0]["flops_exact"], true);
    assert!(v["time_ratio"].is_number() && v["flop_ratio"].is_number());
}

#[test]
fn cli_bench_errors() {
    let model = concat!(env!("CARGO_MANIFEST_DIR"), "/budgets/base-100m-s85.toml");
    let (code, _, err) = smelt(&["bench", model, "--routing", "lopsided"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("--routing"), "{err}");
    let (code, _, err) = smelt(&["bench", model, "--tokens", "0"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("--tokens"), "{err}");
    let (code, _, err) = smelt(&["bench", model, "--backend", "cuda", "--tokens", "64"]);
    if code != Some(0) {
        assert_eq!(code, Some(1));
        assert!(
            err.contains("cuda backend:") && !err.contains("panicked"),
            "{err}"
        );
    }
    let (code, _, _) = smelt(&["bench"]);
    assert_eq!(code, Some(2));
}

/// A model with dense-FFN layers is refused by the planner, with the field and the reason.
#[test]
fn dense_layers_are_refused_not_mis_planned() {
    let mut s = spec(
        [2, 64, 1, 2, 16, 8, 2, 32],
        None,
        (1, 16, true),
        Attention::Causal,
    );
    s.model.dense = Some(smelt::Dense {
        layers: vec![1],
        ffn: 64,
    });
    let e = plan::plan(&s.model, &[8], Attention::Causal, Routing::Balanced)
        .unwrap_err()
        .to_string();
    assert!(e.contains("model.dense") && e.contains("dense-FFN"), "{e}");
}
