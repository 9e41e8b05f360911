//! The published figures the reconstructed Baseline family and the SMELT example must
//! reproduce (SMELT, arXiv 2609.01343, Sec. 2 and 4).

use smelt::{ModelSpec, compare, cost};

fn budget(name: &str) -> ModelSpec {
    let path = format!("{}/budgets/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    ModelSpec::load(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn within(value: f64, target: f64, rel: f64) -> bool {
    (value / target - 1.0).abs() <= rel
}

#[test]
fn base_200m_s95_flops_and_params() {
    let c = cost(&budget("base-200m-s95")).unwrap();
    let f = c.flops_per_token.training.as_f64();
    let n = c.params.total.as_f64();
    assert!(within(f, 1.330e9, 1e-3), "F = {f}");
    assert!(within(n, 3.869e9, 1e-3), "N = {n}");
    // Exact values, so that a change in any convention shows up here first.
    assert_eq!(c.flops_per_token.training.as_integer(), Some(1_330_053_120));
    assert_eq!(c.params.total.0, 3_869_277_440);
    assert_eq!(c.kv_cache_per_token.elements.0, 12 * 2 * 2 * 80);
}

#[test]
fn base_1_6b_s97_params() {
    let n = cost(&budget("base-1.6b-s97"))
        .unwrap()
        .params
        .total
        .as_f64();
    assert_eq!(format!("{:.2}", n / 1e9), "53.89", "N = {n}");
}

#[test]
fn sparsity_at_200m() {
    for (cell, s) in [("s0", 0.0), ("s85", 84.5), ("s95", 94.7), ("s97", 96.9)] {
        let got = cost(&budget(&format!("base-200m-{cell}")))
            .unwrap()
            .sparsity
            .s
            * 100.0;
        assert!(
            (got - s).abs() <= 0.1,
            "200M/{cell}: S = {got:.3}%, want {s}%"
        );
    }
}

#[test]
fn active_params_near_published_per_scale() {
    // Published active parameters per scale; the reconstruction's best cell is within 1%.
    for (scale, active) in [
        ("100m", 0.100e9),
        ("200m", 0.207e9),
        ("600m", 0.665e9),
        ("1.6b", 1.632e9),
    ] {
        let best = ["s0", "s85", "s95", "s97"]
            .iter()
            .map(|cell| {
                let a = cost(&budget(&format!("base-{scale}-{cell}")))
                    .unwrap()
                    .params
                    .active
                    .as_f64();
                (a / active - 1.0).abs()
            })
            .fold(f64::INFINITY, f64::min);
        assert!(
            best <= 0.01,
            "{scale}: closest active count is {best:.4} off"
        );
    }
}

#[test]
fn every_budget_file_is_valid_and_named_after_its_file() {
    let dir = format!("{}/budgets", env!("CARGO_MANIFEST_DIR"));
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_str().unwrap().to_owned();
        if !(stem.starts_with("base-") || stem.starts_with("smelt-2")) {
            continue;
        }
        let spec = ModelSpec::load(&path).unwrap();
        assert_eq!(spec.name.as_deref(), Some(stem.as_str()));
        n += 1;
    }
    assert_eq!(n, 17, "16 Baseline cells and the SMELT example");
}

#[test]
fn smelt_200m_example_matches_the_paper() {
    let cmp = compare(&budget("base-200m-s95"), &budget("smelt-200m-s95")).unwrap();
    let r = cmp.residuals;
    // Paper: 1.37e9 FLOPs (+2.9%), 3.89e9 params (+0.4%), KV within 4%.
    assert_eq!(
        format!("{:.2}", cmp.model.flops_per_token.training.as_f64() / 1e9),
        "1.37"
    );
    assert_eq!(
        format!("{:.2}", cmp.model.params.total.as_f64() / 1e9),
        "3.89"
    );
    assert_eq!(format!("{:.1}", r.flops * 100.0), "2.9");
    assert!((0.0035..0.005).contains(&r.params), "params {}", r.params);
    assert!(r.kv.abs() < 0.04, "kv {}", r.kv);
    assert_eq!(cmp.model.layer_executions, 18);
}
