//! The kernel plan is exact, the CPU backend executes it, and the CUDA backend fails
//! cleanly where it cannot run.

use crate::common;

use common::run;
use proptest::prelude::*;
use smelt::bench::{self, Backend, BenchOptions};
use smelt::plan::{self, Component, Routing};
use smelt::{Attention, AttentionBias, ModelSpec};

/// [`spec`] without a loop or shared experts, causal.
fn plain(shape: [u64; 8]) -> ModelSpec {
    spec(shape, None, (0, 0, false), Attention::Causal)
}

/// A model with Q/K/V biases, documents of 100 tokens, the loop `(first, span, repeats)`
/// and `(shared experts, width, gated)`.
fn spec(
    shape: [u64; 8],
    looping: Option<(u64, u64, u64)>,
    shared: (u64, u64, bool),
    attention: Attention,
) -> ModelSpec {
    let mut s = common::spec(shape, 100, attention);
    s.model.attention_bias = AttentionBias::Qkv;
    s.model.moe.shared_experts = shared.0;
    s.model.moe.shared_ffn = shared.1;
    s.model.moe.shared_gate = shared.2 && shared.0 > 0;
    s.model.looping = looping.and_then(|(f, sp, r)| common::looped(f, sp, r));
    s
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
        (dense_mask, dense_ffn) in (0u64..64, 1u64..=48),
        mla in proptest::option::of((0u64..=16, 1u64..=16, 0u64..=8, 0u64..=8, 1u64..=8)),
        window in proptest::option::of((any::<bool>(), 1u64..=80, 0u64..64)),
        indexer in proptest::option::of((1u64..=4, 1u64..=16, 1u64..=120)),
    ) {
        let top_k = 1 + ((experts - 1) as f64 * k_frac) as u64;
        let attention = if dense { Attention::Dense } else { Attention::Causal };
        let looping = (layers >= 2).then_some((1, layers - 1, repeats));
        let mut s = spec([layers, hidden, kv, g, d, experts, top_k, ffn], looping, shared, attention);
        // Any subset of the layers dense-FFN, looped or not.
        let dense_layers: Vec<u64> = (1..=layers).filter(|i| dense_mask >> (i - 1) & 1 == 1).collect();
        if !dense_layers.is_empty() {
            s.model.dense = Some(smelt::Dense { layers: dense_layers, ffn: dense_ffn });
        }
        // Multi-head latent attention, windowed layers (sliding or chunked), an indexer.
        if let Some(a) = mla {
            common::with_mla(&mut s.model, common::mla(a));
        }
        s.model.window = window.and_then(|w| common::window(layers, w));
        // A sparse attention indexer where one can be: a query latent, no window.
        if s.model.window.is_none() && s.model.mla.as_ref().is_some_and(|a| a.q_lora_rank > 0) {
            s.model.indexer = indexer.map(|(heads, head_dim, topk)| smelt::Indexer { heads, head_dim, topk });
        }
        let routing = skew.map_or(Routing::Balanced, Routing::Skewed);
        let p = plan::plan(&s.model, &docs, attention, routing).unwrap();
        let t: u64 = docs.iter().sum();
        prop_assert_eq!(p.tokens, t);
        let x = s.model.executions();
        prop_assert_eq!(p.executions, x);
        let analytic = bench::analytic_per_execution(&s, &docs).unwrap();
        let planned = smelt::Flops::ratio(p.flops(), u128::from(t) * u128::from(x)).unwrap();
        prop_assert_eq!(analytic, planned);
        // Per component over the whole stack, against the forward breakdown x 3.
        let mut w = s.workload.clone();
        w.mean_doc_len = None;
        let mut hist = std::collections::BTreeMap::new();
        for &l in &docs { *hist.entry(l).or_insert(0u64) += 1; }
        w.doc_lengths = Some(hist.into_iter().map(|(l, c)| [l, c]).collect());
        let b = smelt::cost::forward_flops(&s.model, &w, &s.counting).unwrap();
        for (c, f) in [
            (Component::Projections, b.projections),
            (Component::AttentionCore, b.attention_core),
            (Component::Router, b.router),
            (Component::Experts, b.experts),
            (Component::Shared, b.shared),
            (Component::Dense, b.dense),
            (Component::Indexer, b.indexer),
        ] {
            let want = f.checked_mul(3 * t).unwrap();
            let got = smelt::Flops::ratio(p.component_flops(c), 1).unwrap();
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
    let s = plain([1, 8, 1, 1, 4, 2, 1, 4]);
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

proptest! {
    /// The tiles a fused kernel computes are exactly those holding a pair the document
    /// attends (found by looking at every pair of every tile), the pairs are counted
    /// exactly, and the plan's executed FLOPs for the core are the tiles' GEMMs: forward
    /// `S = Q·Kᵀ` and `O = P·V`, backward `S` recomputed, `dV`, `dP`, `dQ`, `dK`.
    #[test]
    fn fused_attention_tiles_are_exactly_those_with_a_pair(
        len in 1u64..90,
        tile in 1u64..20,
        kind in 0u8..4,
        w in 1u64..40,
    ) {
        use smelt::WindowKind;
        let (attention, window) = match kind {
            0 => (Attention::Dense, None),
            1 => (Attention::Causal, None),
            2 => (Attention::Causal, Some((WindowKind::Chunked, w))),
            _ => (Attention::Causal, Some((WindowKind::Sliding, w))),
        };
        // Brute force: chunks are documents of their own; tiles of `tile` x `tile`.
        let spans: Vec<(u64, u64)> = match window {
            Some((WindowKind::Chunked, c)) => (0..len.div_ceil(c)).map(|i| (i * c, (i * c + c).min(len))).collect(),
            _ => vec![(0, len)],
        };
        let mut want = std::collections::BTreeMap::new();
        let mut pairs = 0u128;
        for (a, b) in spans {
            let n = b - a;
            for qb in 0..n.div_ceil(tile) {
                for kb in 0..n.div_ceil(tile) {
                    let (q0, q1) = (qb * tile, ((qb + 1) * tile).min(n));
                    let (k0, k1) = (kb * tile, ((kb + 1) * tile).min(n));
                    let mut any = false;
                    for q in q0..q1 {
                        for k in k0..k1 {
                            if plan::attends(a + q, a + k, attention, window) {
                                any = true;
                                pairs += 1;
                            }
                        }
                    }
                    if any {
                        *want.entry((q1 - q0, k1 - k0)).or_insert(0u64) += 1;
                    }
                }
            }
        }
        prop_assert_eq!(plan::tiles(len, attention, window, tile), want);
        prop_assert_eq!(plan::pairs(len, attention, window), pairs);
    }
}

/// The attention core's executed FLOPs are the 128 x 128 tiles' seven GEMMs per head
/// (two forward, five backward with the scores recomputed); the model's are the pairs'.
#[test]
fn the_core_executes_whole_tiles_and_recomputes_the_scores() {
    let s = plain([1, 8, 1, 1, 4, 2, 1, 4]);
    let (heads, d) = (1u128, 4u128);
    for len in [1u64, 127, 128, 129, 300, 1000] {
        let p = plan::plan(&s.model, &[len], Attention::Causal, Routing::Balanced).unwrap();
        let area: u128 = plan::tiles(len, Attention::Causal, None, plan::TILE)
            .iter()
            .map(|(&(r, c), &n)| u128::from(r * c * n))
            .sum();
        let executed = 2 * heads * area * (4 * d + 3 * d);
        assert_eq!(
            p.component_executed_flops(Component::AttentionCore),
            executed,
            "L = {len}"
        );
        let pairs = u128::from(len * (len + 1) / 2);
        assert_eq!(
            p.component_flops(Component::AttentionCore),
            3 * 2 * heads * pairs * 2 * d
        );
        let f = p.pair_flops[&Component::AttentionCore];
        assert_eq!(
            (f.model, f.executed),
            (3 * 2 * heads * pairs * 2 * d, executed)
        );
        // One kernel shape per GEMM and softmax of each tile shape, not one per query row
        // (`dV` and `dK` share a shape here: the keys' and values' widths are equal).
        let shapes = plan::tiles(len, Attention::Causal, None, plan::TILE).len();
        let core = p
            .kernels
            .iter()
            .filter(|k| k.component == Component::AttentionCore)
            .count();
        assert_eq!(core, 8 * shapes, "L = {len}");
    }
}

#[test]
fn cpu_backend_executes_the_plan_and_reports_ratios() {
    let base = plain([4, 64, 1, 2, 16, 8, 2, 32]);
    let looped = spec(
        [4, 48, 1, 2, 16, 12, 2, 24],
        Some((2, 2, 2)),
        (0, 0, false),
        Attention::Causal,
    );
    let opts = BenchOptions {
        tokens: 300,
        rounds: 1,
        ..BenchOptions::new(Backend::Cpu)
    };
    let r = bench::bench(&[&base, &looped], &opts).unwrap();
    assert_eq!(r.models.len(), 2);
    for m in &r.models {
        assert!(m.flops_exact, "{}", m.name);
        assert_eq!(m.tokens, 300);
        // The whole stack ran: per token and layer execution x tokens x executions.
        let plan_total = m.plan_flops_per_token * m.tokens as f64 * m.layer_executions as f64;
        // The attention tiles execute more than the pairs attended: whole tiles, and the
        // scores recomputed in the backward pass.
        assert!(m.executed_flops as f64 > plan_total);
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

/// With a GPU (a `cuda` build and a driver), the CUDA backend runs the plan exactly; without
/// one, the test says why it is skipped and checks that the backend refuses with that reason.
#[test]
fn cuda_backend_runs_where_a_gpu_is() {
    let s = plain([2, 64, 1, 2, 16, 8, 2, 32]);
    let opts = BenchOptions {
        tokens: 200,
        rounds: 1,
        ..BenchOptions::new(Backend::Cuda)
    };
    match bench::cuda::probe() {
        Ok(device) => {
            let r = bench::bench(&[&s], &opts).unwrap();
            assert!(r.device.contains(&device));
            assert!(r.models[0].flops_exact);
            assert!(r.ceiling_flops_per_second > 0.0);
        }
        Err(why) => {
            eprintln!("skipped: no GPU to run the CUDA backend on ({why})");
            let e = bench::bench(&[&s], &opts).unwrap_err().to_string();
            assert_eq!(e, why.to_string());
            assert!(e.starts_with("cuda backend: "), "{e}");
        }
    }
}

#[test]
fn cli_bench_of_a_budget_pair() {
    // A small Baseline: the wiring is under test, not the machine.
    let text = common::BASE_200M
        .replace("hidden = 1280", "hidden = 128")
        .replace("head_dim = 80", "head_dim = 8")
        .replace("expert_ffn = 432", "expert_ffn = 48")
        .replace("experts = 192", "experts = 32")
        .replace("layers = 12", "layers = 4")
        .replace("mean_doc_len = 991", "mean_doc_len = 100");
    let base = common::temp_file("toml", &text);
    let budget = common::temp_file(
        "toml",
        &format!(
            "baseline = {:?}\n[lattice]\nhidden = {{ step = 16 }}\nhead_dim = {{ values = [8, 16] }}\n",
            base.display()
        ),
    );
    let budget = &budget.display().to_string();
    let args = [
        "bench", "--budget", budget, "--tokens", "200", "--rounds", "1",
    ];
    let (code, out, err) = run(&args);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(out.matches("equal, exactly").count(), 2, "{out}");
    assert!(
        out.contains("measured time ratio") && out.contains("FLOP ratio"),
        "{out}"
    );
    let (code, json, _) = run(&[&args[..], &["--format", "json"]].concat());
    assert_eq!(code, Some(0));
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["models"].as_array().unwrap().len(), 2);
    assert_eq!(v["models"][0]["flops_exact"], true);
    assert!(v["time_ratio"].is_number() && v["flop_ratio"].is_number());
}

#[test]
fn cli_bench_errors() {
    let model = &common::budget("base-100m-s85.toml");
    let (code, _, err) = run(&["bench", model, "--routing", "lopsided"]);
    assert_eq!(code, Some(2), "a malformed flag value is a usage error");
    assert!(err.contains("--routing") && err.contains("skew=S"), "{err}");
    let (code, _, err) = run(&["bench", model, "--tokens", "0"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--tokens"), "{err}");
    let (code, _, err) = run(&["bench", model, "--backend", "cuda", "--tokens", "64"]);
    match bench::cuda::probe() {
        Ok(_) => assert_eq!(code, Some(0), "{err}"),
        Err(why) => {
            assert_eq!(code, Some(1));
            assert!(err.contains(&why.to_string()), "{err}");
        }
    }
    let (code, _, _) = run(&["bench"]);
    assert_eq!(code, Some(2));
}

/// A model with dense-FFN layers, looped and not, is planned layer by layer: the dense
/// layers' FFN GEMMs run once per dense execution, the MoE layers' once per MoE execution,
/// and the CPU backend executes exactly the planned FLOPs.
#[test]
fn dense_layers_are_planned_per_execution() {
    let mut s = spec(
        [4, 64, 1, 2, 16, 8, 2, 32],
        Some((2, 2, 3)),
        (1, 16, true),
        Attention::Causal,
    );
    // Layer 1 outside the loop, layer 3 inside it: 1 + 3 dense executions of 8.
    s.model.dense = Some(smelt::Dense {
        layers: vec![1, 3],
        ffn: 64,
    });
    assert_eq!(s.model.executions(), 8);
    assert_eq!(s.model.dense_executions(), 4);
    let p = plan::plan(&s.model, &[8, 8], Attention::Causal, Routing::Balanced).unwrap();
    // Forward, backward-data and backward-weight of up, gate and down: 3 x 3 x 2·t·ffn·h.
    let dense_want = 4 * 3 * 3 * 2 * 16 * 64 * 64;
    assert_eq!(p.component_flops(Component::Dense), dense_want);
    // Routing is planned only for the 4 MoE executions.
    assert_eq!(
        p.component_flops(Component::Router),
        4 * 3 * 2 * 16 * 8 * 64
    );
    let opts = BenchOptions {
        tokens: 16,
        rounds: 1,
        ..BenchOptions::new(Backend::Cpu)
    };
    s.workload.mean_doc_len = Some(8);
    let r = bench::bench(&[&s], &opts).unwrap();
    let m = &r.models[0];
    assert!(m.flops_exact);
    assert_eq!(m.executed_flops, p.executed_flops());
    assert!(m.components.iter().any(|c| c.component == Component::Dense));
}

/// A run that cannot finish inside its time budget is refused before it starts, naming the
/// budget; a non-positive budget is refused as a bad value.
#[test]
fn time_budget_refuses_a_run_that_cannot_fit() {
    let s = plain([2, 64, 1, 2, 16, 8, 2, 32]);
    let opts = BenchOptions {
        tokens: 200,
        rounds: 1,
        max_seconds: 1e-6,
        ..BenchOptions::new(Backend::Cpu)
    };
    let e = bench::bench(&[&s], &opts).unwrap_err().to_string();
    assert!(
        e.contains("max_seconds") || e.contains("--max-seconds"),
        "{e}"
    );
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let opts = BenchOptions {
            max_seconds: bad,
            ..opts
        };
        let e = bench::bench(&[&s], &opts).unwrap_err().to_string();
        assert!(e.contains("max_seconds"), "{bad}: {e}");
    }
    let opts = BenchOptions {
        peak: Some(0.0),
        ..BenchOptions::new(Backend::Cpu)
    };
    let e = bench::bench(&[&s], &opts).unwrap_err().to_string();
    assert!(e.contains("peak"), "{e}");
}

/// `grid --bench cpu` on a two-cell grid: every cell gets a measured time ratio, the summary
/// their largest and mean, the table a `T ratio` column and the device.
#[test]
fn cli_grid_bench_adds_a_time_ratio_per_cell() {
    let grid = common::two_cell_grid();
    let grid = &grid.display().to_string();
    let timing: Vec<&str> = ["--bench", "cpu"].into_iter().chain(quick()).collect();
    let v = common::run_json(&[&["grid", grid, "--format", "json"], &timing[..]].concat());
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    let mut ratios = Vec::new();
    for c in cells {
        let t = &c["time"];
        assert_eq!(t["backend"], "cpu");
        assert_eq!(t["tokens"], 128);
        let (b, l) = (
            t["baseline_seconds_per_token"].as_f64().unwrap(),
            t["looped_seconds_per_token"].as_f64().unwrap(),
        );
        assert!(b > 0.0 && l > 0.0);
        let r = t["ratio"].as_f64().unwrap();
        assert!((r - l / b).abs() < 1e-12 * r);
        ratios.push(r);
    }
    let s = &v["summary"]["time_ratio"];
    let max = ratios.iter().fold(0.0f64, |m, &r| m.max(r));
    assert_eq!(s["max_ratio"].as_f64().unwrap(), max);
    assert!((s["mean_ratio"].as_f64().unwrap() - (ratios[0] + ratios[1]) / 2.0).abs() < 1e-12);
    let (code, out, err) = run(&[&["grid", grid], &timing[..]].concat());
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("T ratio") && out.contains("on CPU"), "{out}");
    assert!(out.contains("largest time ratio"), "{out}");
    // Without --bench, nothing is timed and no column appears.
    let (code, out, _) = run(&["grid", grid, "--mean-doc-len", "64", "-q"]);
    assert_eq!(code, Some(0));
    assert!(!out.contains("T ratio"), "{out}");
    let v = common::run_json(&["grid", grid, "--format", "json", "-q"]);
    assert!(v["cells"][0].get("time").is_none() && v["summary"].get("time_ratio").is_none());
}

/// `grid --bench`: `--max-seconds` bounds the whole grid, and a cell that cannot be timed
/// is reported as failed with its reason while the others are still matched and written.
#[test]
fn a_grid_bench_reports_failed_cells_and_keeps_the_others() {
    let grid = common::two_cell_grid();
    let grid = &grid.display().to_string();
    // A budget no benchmark fits in: the first cell is refused by its estimate, the second
    // finds the grid's budget spent; both are said, and the matches are all there; with no
    // cell timed the run fails (exit 1) after printing them.
    let timing = [
        "--bench",
        "cpu",
        "--tokens",
        "128",
        "--max-seconds",
        "0.000001",
        "-q",
    ];
    let (code, json, err) = run(&[&["grid", grid, "--format", "json"], &timing[..]].concat());
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("--bench cpu: no cell was timed (2 of 2)"),
        "{err}"
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 2);
    for c in cells {
        assert!(c.get("time").is_none());
        assert!(c["looped"]["model"]["loop"].is_object());
        let why = c["time_failed"].as_str().unwrap();
        assert!(why.contains("max-seconds"), "{why}");
    }
    let s = &v["summary"]["time_ratio"];
    assert_eq!(s["failed_cells"], 2);
    assert!(s["max_ratio"].is_null() && s["mean_ratio"].is_null());
    let (code, out, err) = run(&[&["grid", grid], &timing[..]].concat());
    assert_eq!(code, Some(1), "{err}");
    assert!(
        out.contains("failed") && out.contains("2 not timed"),
        "{out}"
    );
}

/// `grid --bench cpu --shard K/N` times its share of the cells; `smelt merge` joins the
/// shards into the grid (each cell's time from its shard, the summary recomputed) and
/// refuses a missing, repeated or foreign shard.
#[test]
fn shards_of_a_grid_merge_into_the_grid() {
    let grid = common::two_cell_grid();
    let grid = &grid.display().to_string();
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let shard = |k: &str, tokens: &str| {
        let args = [
            "grid", grid, "--format", "json", "--bench", "cpu", "--shard", k,
        ];
        let timing = [
            "--mean-doc-len",
            "64",
            "--tokens",
            tokens,
            "--rounds",
            "1",
            "-q",
        ];
        let v = common::run_json(&[&args[..], &timing[..]].concat());
        let path = dir.join(format!(
            "shard-{}-{tokens}-{}.json",
            k.replace('/', "of"),
            std::process::id()
        ));
        std::fs::write(&path, v.to_string()).unwrap();
        (v, path.display().to_string())
    };
    let ((one, p1), (two, p2)) = (shard("1/2", "128"), shard("2/2", "128"));
    assert!(one["cells"][0]["time"].is_object() && one["cells"][1].get("time").is_none());
    assert!(two["cells"][1]["time"].is_object() && two["cells"][0].get("time").is_none());
    assert_eq!(one["shard"]["digest"], two["shard"]["digest"]);
    let merged = common::run_json(&["merge", &p2, &p1]);
    assert!(merged.get("shard").is_none());
    assert_eq!(merged["cells"][0]["time"], one["cells"][0]["time"]);
    assert_eq!(merged["cells"][1]["time"], two["cells"][1]["time"]);
    let ratios: Vec<f64> = (0..2)
        .map(|i| merged["cells"][i]["time"]["ratio"].as_f64().unwrap())
        .collect();
    let s = &merged["summary"]["time_ratio"];
    assert_eq!(s["max_ratio"].as_f64().unwrap(), ratios[0].max(ratios[1]));
    assert_eq!(merged["cells"][0]["looped"], one["cells"][0]["looped"]);
    // A shard missing, a shard twice, a shard of another benchmark setting: refused.
    let (code, _, err) = run(&["merge", &p1]);
    assert_eq!(code, Some(1));
    assert!(err.contains("shard 2/2: is missing"), "{err}");
    let (code, _, err) = run(&["merge", &p1, &p1]);
    assert_eq!(code, Some(1));
    assert!(err.contains("is given twice"), "{err}");
    let (_, other) = shard("2/2", "192");
    let (code, _, err) = run(&["merge", &p1, &other]);
    assert_eq!(code, Some(1));
    assert!(err.contains("another grid"), "{err}");
    // --shard needs --bench, and K/N in range.
    let (code, _, err) = run(&["grid", grid, "--shard", "1/2"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, _, err) = run(&["grid", grid, "--bench", "cpu", "--shard", "3/2"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("1 <= K <= N"), "{err}");
}

/// Shards of `grid --predict CARD --bench cpu --shard K/N` merge into the grid with the
/// predicted summary recomputed over the merged cells: the unsharded grid's, whatever a
/// shard's own summary says; a shard predicted on another card (or not at all) is refused.
#[test]
fn predicted_shards_merge_with_the_summary_recomputed() {
    let grid = common::two_cell_grid();
    let grid = grid.display().to_string();
    let grid = grid.as_str();
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let shard = |k: &str, card: Option<&str>, edit: bool| {
        let mut args: Vec<String> = [
            "grid", grid, "--format", "json", "--bench", "cpu", "--shard", k,
        ]
        .into_iter()
        .map(str::to_owned)
        .chain(quick().map(str::to_owned))
        .collect();
        if let Some(c) = card {
            args.extend(["--predict".to_owned(), c.to_owned()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut v = common::run_json(&args);
        if edit {
            // A summary no shard computed: the merge must not keep it.
            v["summary"]["predicted"]["max_ratio"] = serde_json::json!(99.0);
            v["summary"]["predicted"]["mean_ratio"] = serde_json::json!(99.0);
        }
        let path = dir.join(format!(
            "pshard-{}-{}-{edit}-{}.json",
            k.replace('/', "of"),
            card.unwrap_or("none"),
            std::process::id()
        ));
        std::fs::write(&path, v.to_string()).unwrap();
        path.display().to_string()
    };
    // The shards' workload (quick's documents of 64 tokens), unsharded and untimed.
    let whole = common::run_json(&[
        "grid",
        grid,
        "--format",
        "json",
        "--predict",
        "h200",
        "--mean-doc-len",
        "64",
    ]);
    let (p1, p2) = (
        shard("1/2", Some("h200"), true),
        shard("2/2", Some("h200"), true),
    );
    let merged = common::run_json(&["merge", &p1, &p2]);
    // The same figures, to within the unit in the last place a JSON float read back may
    // be off by (serde_json's parser without `float_roundtrip`).
    let near = |a: &serde_json::Value, b: &serde_json::Value| {
        let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
        (a - b).abs() <= 1e-14 * b.abs()
    };
    let (m, w) = (
        &merged["summary"]["predicted"],
        &whole["summary"]["predicted"],
    );
    assert_eq!(m["basis"], w["basis"]);
    for key in ["max_ratio", "mean_ratio"] {
        assert!(near(&m[key], &w[key]), "{key}: {m} against {w}");
    }
    for i in 0..2 {
        let (m, w) = (
            &merged["cells"][i]["predicted"],
            &whole["cells"][i]["predicted"],
        );
        assert!(near(&m["ratio"], &w["ratio"]), "{m} against {w}");
    }
    let ratios: Vec<f64> = (0..2)
        .map(|i| merged["cells"][i]["predicted"]["ratio"].as_f64().unwrap())
        .collect();
    let s = &merged["summary"]["predicted"];
    assert_eq!(s["max_ratio"].as_f64().unwrap(), ratios[0].max(ratios[1]));
    assert_eq!(
        s["mean_ratio"].as_f64().unwrap(),
        (ratios[0] + ratios[1]) / 2.0
    );
    // A shard on another card, or without --predict, is another run's.
    for other in [shard("2/2", Some("b200"), false), shard("2/2", None, false)] {
        let (code, _, err) = run(&["merge", &p1, &other]);
        assert_eq!(code, Some(1));
        assert!(err.contains("another grid"), "{err}");
    }
}

/// Short documents, a small batch, one round, no progress: a benchmark of a few seconds.
fn quick() -> impl Iterator<Item = &'static str> {
    "--mean-doc-len 64 --tokens 128 --rounds 1 -q".split(' ')
}

/// `match --bench cpu` adds the measured ratio to the report; `--max-seconds` too small
/// refuses before timing, naming the flag; `--peak` is reported with its share.
#[test]
fn cli_match_bench_and_the_timing_flags() {
    let budget = common::budget("match-200m-s95.toml");
    let timing: Vec<&str> = quick().collect();
    let args = [&["match", &budget, "--bench", "cpu"], &timing[..]].concat();
    let v = common::run_json(&[&args[..], &["--format", "json"]].concat());
    let t = &v["time"];
    assert_eq!(t["backend"], "cpu");
    assert!(t["ratio"].as_f64().unwrap() > 0.0, "{v}");
    let (code, out, err) = run(&args);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("measured time per token: looped / Baseline = "),
        "{out}"
    );

    let (code, _, err) = run(&[&args[..], &["--max-seconds", "0.000001"]].concat());
    assert_eq!(code, Some(1));
    assert!(err.contains("--max-seconds"), "{err}");
    let (code, _, err) = run(&[&args[..], &["--max-seconds", "soon"]].concat());
    assert_eq!(code, Some(2), "{err}");

    let model = common::budget("base-100m-s85.toml");
    let v = common::run_json(
        &[
            &["bench", &model, "--peak", "2", "--format", "json"],
            &timing[..],
        ]
        .concat(),
    );
    assert_eq!(v["peak_flops_per_second"].as_f64(), Some(2e12));
    assert_eq!(v["peak_source"], "--peak");
    let ceiling = v["ceiling_flops_per_second"].as_f64().unwrap();
    assert!((v["ceiling_of_peak"].as_f64().unwrap() - ceiling / 2e12).abs() < 1e-12);
    let (code, _, err) = run(&[&["bench", &model, "--peak", "0"], &timing[..]].concat());
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("peak"), "{err}");
}

/// A bench table starts with the workload its models were planned at, as every table does.
#[test]
fn bench_tables_say_their_workload() {
    let timing: Vec<&str> = quick().collect();
    let model = common::budget("base-100m-s85.toml");
    for context in ["4096", "1024"] {
        let args = [
            &["bench", &model, "--against", &model, "--context", context],
            &timing[..],
        ];
        let (code, out, err) = run(&args.concat());
        assert_eq!(code, Some(0), "{err}");
        let line = out.lines().nth(1).unwrap_or("");
        assert!(
            line.starts_with(&format!("workload: context {context}, ")),
            "{out}"
        );
    }
}
