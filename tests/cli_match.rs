//! `smelt match`, `smelt grid` and `smelt sweep` through the command line: contracts,
//! determinism, tolerance reporting, and clear errors for bad budget and grid files.

use crate::common;

use std::path::PathBuf;

use common::{SMALL_BUDGET as SMALL, budget, run, run_json};
use serde_json::Value;

fn file(text: &str) -> PathBuf {
    common::temp_file("toml", text)
}

/// Runs `smelt match` on a budget file with `text`: exit 1 and every needle on stderr.
fn error_of(text: &str, needles: &[&str]) {
    let path = file(text);
    let (code, stdout, stderr) = run(&["match", path.to_str().unwrap()]);
    assert_eq!(code, Some(1), "stdout {stdout} stderr {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for n in needles {
        assert!(stderr.contains(n), "expected {n:?} in: {stderr}");
    }
}

#[test]
fn match_json_contract_and_determinism() {
    let b = budget("match-200m-s95.toml");
    let (code, a, _) = run(&["match", &b, "--format", "json"]);
    assert_eq!(code, Some(0));
    let (_, again, _) = run(&["match", &b, "--format", "json"]);
    assert_eq!(a, again, "same input, same bytes");
    let v: Value = serde_json::from_str(&a).unwrap();
    for key in ["flops", "params", "kv"] {
        assert!(v["residuals"][key].is_number());
        assert!(v["ratios"][key].is_number());
    }
    assert_eq!(v["mode"], "two-sided");
    assert_eq!(v["looped"]["model"]["hidden"], 1056);
    assert_eq!(v["looped"]["model"]["moe"]["experts"], 288);
    assert_eq!(v["looped"]["model"]["loop"]["first"], 4);
    assert!(v["lattice"]["lattice_points"].as_u64().unwrap() > 1_000_000);
    assert_eq!(v["within_tolerance"], true);
    let (_, table1, _) = run(&["match", &b]);
    let (_, table2, _) = run(&["match", &b]);
    assert_eq!(table1, table2);
    assert!(
        table1.contains("+0.28%") && table1.contains("-2.50%"),
        "{table1}"
    );
}

#[test]
fn matched_model_file_is_valid_input_to_cost() {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("matched-200m.toml");
    let args = ["match", &budget("match-200m-s95.toml"), "--format", "model"];
    let (code, toml_text, _) = run(&args);
    assert_eq!(code, Some(0));
    // With -o the file goes to the file, not also to standard output; stderr says so.
    let (code, stdout, stderr) = run(&[&args[..], &["-o", out.to_str().unwrap()]].concat());
    assert_eq!(code, Some(0));
    assert!(stdout.is_empty(), "{stdout}");
    assert!(stderr.contains("wrote the matched model file"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), toml_text);
    let spec = smelt::ModelSpec::from_toml_str(&toml_text).unwrap();
    assert_eq!(spec.model.executions(), 18);
    let (code, json, _) = run(&[
        "cost",
        out.to_str().unwrap(),
        "--against",
        &budget("base-200m-s95.toml"),
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0));
    let v: Value = serde_json::from_str(&json).unwrap();
    assert!((v["residuals"]["flops"].as_f64().unwrap() - 0.002834).abs() < 1e-5);
}

#[test]
fn top_lists_distinct_configurations_in_order() {
    let (code, json, _) = run(&[
        "match",
        &budget("match-200m-s95.toml"),
        "--top",
        "4",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0));
    let v: Value = serde_json::from_str(&json).unwrap();
    let ranked = v["ranked"].as_array().unwrap();
    assert_eq!(ranked.len(), 4);
    assert_eq!(ranked[0]["model"], v["looped"]["model"]);
    for pair in ranked.windows(2) {
        assert_ne!(pair[0]["model"], pair[1]["model"]);
        assert!(pair[0]["score"][0].as_f64() <= pair[1]["score"][0].as_f64());
    }
    let (code, _, _) = run(&["match", &budget("match-200m-s95.toml"), "--top", "0"]);
    assert_eq!(code, Some(2));
}

#[test]
fn tolerance_failure_reports_the_best_and_exits_3() {
    let path = file(&format!("{SMALL}[tolerance]\nkv = 0.001\n"));
    let (code, stdout, _) = run(&["match", path.to_str().unwrap()]);
    assert_eq!(code, Some(3));
    assert!(
        stdout.contains("NOT MET") && stdout.contains("kv"),
        "{stdout}"
    );
    let (_, json, _) = run(&["match", path.to_str().unwrap(), "--format", "json"]);
    let v: Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["within_tolerance"], false);
    assert_eq!(v["broken"][0], "kv");
}

#[test]
fn conservative_never_exceeds_the_baseline() {
    let path = file(&SMALL.replace(
        "name = \"small\"",
        "name = \"small\"\nmode = \"conservative\"",
    ));
    let (code, json, _) = run(&["match", path.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, Some(0));
    let v: Value = serde_json::from_str(&json).unwrap();
    for key in ["flops", "params", "kv"] {
        assert!(v["residuals"][key].as_f64().unwrap() <= 0.0, "{key}");
    }
}

#[test]
fn grid_json_contract() {
    let (code, json, _) = run(&["grid", &budget("smelt-grid.toml"), "--format", "json"]);
    assert!(code == Some(0) || code == Some(3));
    let v: Value = serde_json::from_str(&json).unwrap();
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 16);
    assert_eq!(cells.iter().filter(|c| c["sparse"] == true).count(), 12);
    for c in cells {
        assert!(c["scale"].is_string());
        assert!(c["baseline"]["model"]["hidden"].is_number());
        assert!(c["looped"]["model"]["loop"]["repeats"] == 2);
        for key in ["flops", "params", "kv"] {
            assert!(c["ratios"][key].is_number());
        }
        assert!(c["sparsity"]["baseline"].is_number() && c["sparsity"]["looped"].is_number());
    }
    let max = &v["summary"]["max_abs_residual"];
    // The paper's lattice beats the paper's worst FLOPs and KV residuals (3.9%, 3.6%).
    assert!(max["flops"].as_f64().unwrap() < 0.039);
    assert!(max["kv"].as_f64().unwrap() < 0.036);
    let (_, again, _) = run(&["grid", &budget("smelt-grid.toml"), "--format", "json"]);
    assert_eq!(json, again);
}

/// A grid that sets no `[tolerance]` checks nothing, so nothing passes: `null` in the JSON
/// (per cell and in the summary), `not checked` in the table with a line saying why; with
/// a tolerance, each cell says yes or no and the summary counts the yeses.
#[test]
fn no_tolerance_is_not_a_pass() {
    let grid = budget("smelt-grid.toml");
    let v = run_json(&["grid", &grid, "--format", "json"]);
    let cells = v["cells"].as_array().unwrap();
    assert!(cells.iter().all(|c| c["within_tolerance"].is_null()));
    assert!(v["summary"]["within_tolerance"].is_null());
    let (code, table, _) = run(&["grid", &grid]);
    assert_eq!(code, Some(0));
    assert!(!table.contains(" yes "), "{table}");
    assert_eq!(table.matches("not checked").count(), 16 + 2, "{table}");
    assert!(
        table.contains("the grid file sets no [tolerance]"),
        "{table}"
    );

    let text = std::fs::read_to_string(&grid).unwrap();
    // Beside copies of its Baselines (the template is relative to the grid file).
    let tolerant = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("smelt-grid-tolerant.toml");
    std::fs::write(&tolerant, format!("{text}\n[tolerance]\nflops = 0.2\n")).unwrap();
    let copy = |name: &str| tolerant.with_file_name(name);
    for cell in ["100m", "200m", "600m", "1.6b"] {
        for s in ["s0", "s85", "s95", "s97"] {
            let name = format!("base-{cell}-{s}.toml");
            std::fs::copy(budget(&name), copy(&name)).unwrap();
        }
    }
    let v = run_json(&["grid", tolerant.to_str().unwrap(), "--format", "json"]);
    let cells = v["cells"].as_array().unwrap();
    assert!(cells.iter().all(|c| c["within_tolerance"] == true));
    assert_eq!(v["summary"]["within_tolerance"], 16);
}

/// `--format toml` wrote the matched model file once; `toml` is a report in TOML
/// elsewhere, so here it is refused as a usage error naming `--format model`: a script
/// written for the old meaning stops instead of reading another file.
#[test]
fn match_refuses_toml_and_names_the_model_format() {
    let b = budget("match-200m-s95.toml");
    let (code, out, err) = run(&["match", &b, "--format", "toml"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("--format model"), "{err}");
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("never-written.toml");
    let (code, _, err) = run(&["match", &b, "--format", "toml", "-o", out.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(!out.exists());
    // Where a report offers TOML, it is the JSON contract's structure.
    let cost = budget("base-200m-s95.toml");
    let (code, toml_text, _) = run(&["cost", &cost, "--format", "toml"]);
    assert_eq!(code, Some(0));
    let from_toml: toml::Value = toml::from_str(&toml_text).unwrap();
    let json = run_json(&["cost", &cost, "--format", "json"]);
    assert_eq!(
        from_toml["params"]["total"].as_integer(),
        json["params"]["total"].as_i64()
    );
}

#[test]
fn grid_other_formats() {
    let (_, csv, _) = run(&["grid", &budget("smelt-grid.toml"), "--format", "csv"]);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 17);
    assert!(lines[0].starts_with("scale,sparsity,sparse"));
    let grid = budget("smelt-grid.toml");
    let (_, md, _) = run(&["grid", &grid, "--format", "markdown", "--wide"]);
    assert!(md.contains("| 200m | s95 | true |"), "{md}");
    assert!(md.contains("max \\|residual\\|"));
    // Compact by default: one cell column, the ratios under their letters, no sparsities.
    let (_, md, _) = run(&["grid", &grid, "--format", "markdown"]);
    assert!(md.contains("| 200m s95 | 1280→1024 |"), "{md}");
    assert!(md.contains("max \\|residual\\|") && !md.contains("S looped"));
    let (_, table, _) = run(&["grid", &grid]);
    assert!(table.contains("cells where looped gets more"));
    // --wide changes the human formats only: CSV is the same bytes either way.
    let (_, wide_csv, _) = run(&["grid", &grid, "--format", "csv", "--wide"]);
    assert_eq!(wide_csv, csv);
}

#[test]
fn sweep_span_rematches_every_candidate() {
    let (code, json, _) = run(&[
        "sweep",
        &budget("match-200m-s95.toml"),
        "--span",
        "0..=12",
        "--format",
        "json",
    ]);
    assert_eq!(code.map(|c| c == 0 || c == 3), Some(true));
    let v: Value = serde_json::from_str(&json).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 13);
    // Span 0 is the Baseline itself, found exactly.
    assert_eq!(rows[0]["looped"]["model"], v["baseline"]["model"]);
    assert_eq!(rows[0]["ratios"]["flops"], 1.0);
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["layer_executions"], 12 + i as u64);
    }
    let column = |knob: &str, values: &str, pick: fn(&Value) -> u64| -> Vec<u64> {
        let b = budget("match-200m-s95.toml");
        let (_, json, _) = run(&["sweep", &b, knob, values, "--format", "json"]);
        let v: Value = serde_json::from_str(&json).unwrap();
        v["rows"].as_array().unwrap().iter().map(pick).collect()
    };
    let execs = column("--repeats", "1..=4", |r| {
        r["layer_executions"].as_u64().unwrap()
    });
    assert_eq!(execs, vec![12, 18, 24, 30]);
    let layers = column("--depth", "8,12,16", |r| {
        r["looped"]["model"]["layers"].as_u64().unwrap()
    });
    assert_eq!(layers, vec![8, 12, 16]);
}

#[test]
fn sweep_argument_errors() {
    let b = budget("match-200m-s95.toml");
    let (code, _, err) = run(&["sweep", &b, "--span", "a..=3"]);
    assert_eq!(code, Some(2), "a malformed flag value is a usage error");
    assert!(err.contains("--span") && err.contains("'a'"), "{err}");
    let (code, _, err) = run(&["sweep", &b, "--span", "0-12"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("'0-12'") && err.contains("as 0..=12"), "{err}");
    let (code, _, err) = run(&["sweep", &b, "--span", "20"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("span = 20") && err.contains("do not fit"),
        "{err}"
    );
    let (code, _, _) = run(&["sweep", &b]);
    assert_eq!(code, Some(2));
    let (code, _, _) = run(&["sweep", &b, "--span", "1", "--depth", "4"]);
    assert_eq!(code, Some(2));
}

#[test]
fn infeasible_and_empty_lattices() {
    error_of(
        &SMALL
            .replace(
                "name = \"small\"",
                "name = \"small\"\nmode = \"conservative\"",
            )
            .replace("min = 960, max = 1152", "min = 1280, max = 1280"),
        &["no feasible configuration", "conservative"],
    );
    error_of(
        &SMALL.replace(
            "head_dim = { step = 8, min = 64, max = 128 }",
            "head_dim = { values = [7] }\nheads = { tied = true }",
        ),
        &["no feasible configuration", "lattice is empty"],
    );
    error_of(
        &SMALL.replace(
            "experts = { step = 8, min = 8, max = 512 }",
            "experts = { step = 1, min = 1, max = 4 }",
        ),
        &["lattice.experts", "below the Baseline's top_k (8)"],
    );
}

#[test]
fn inline_baseline_matches_like_a_path() {
    let inline = SMALL.replace("baseline = \"@BUDGETS@/base-200m-s95.toml\"\n", "")
        + "[baseline]\nname = \"base-200m-s95\"\n[baseline.model]\nlayers = 12\nhidden = 1280\nheads = 16\nkv_heads = 2\nhead_dim = 80\n[baseline.model.moe]\nexperts = 192\ntop_k = 8\nexpert_ffn = 432\n[baseline.workload]\ncontext = 4096\nmean_doc_len = 991\n";
    let a = run(&["match", file(&inline).to_str().unwrap(), "--format", "json"]).1;
    let b = run(&["match", file(SMALL).to_str().unwrap(), "--format", "json"]).1;
    assert_eq!(a, b);
}
