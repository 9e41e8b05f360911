//! `smelt predict`, `smelt calibrate` and `grid --predict`: the command line of the step-time
//! predictor (the roofline itself is tested where it lives, `crates/smelt/src/time/`).

use crate::common::{budget, run, run_json, temp_file};

#[test]
fn the_grid_predicts_every_cell_and_says_how() {
    let grid = budget("smelt-grid.toml");
    let j = run_json(&["grid", &grid, "--predict", "h200", "--format", "json"]);
    let cells = j["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 16);
    let mut ratios = Vec::new();
    for c in cells {
        let p = &c["predicted"];
        let (b, l, r) = (
            p["baseline_seconds_per_token"].as_f64().unwrap(),
            p["looped_seconds_per_token"].as_f64().unwrap(),
            p["ratio"].as_f64().unwrap(),
        );
        assert!(b > 0.0 && l > 0.0);
        assert!((r - l / b).abs() <= 1e-12 * r, "{p}");
        ratios.push(r);
    }
    let s = &j["summary"]["predicted"];
    assert_eq!(s["basis"]["calibrated"], false);
    assert_eq!(s["basis"]["device"]["name"], "NVIDIA H200 SXM");
    assert_eq!(s["basis"]["attention"], "fused");
    assert_eq!(s["basis"]["experts"], "grouped");
    let max = ratios.iter().copied().fold(0.0, f64::max);
    assert_eq!(s["max_ratio"].as_f64().unwrap(), max);
    // The table names the card and that the roofline is uncalibrated.
    let (code, out, err) = run(&["grid", &grid, "--predict", "h200-sxm"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("P ratio") && out.contains("uncalibrated roofline"),
        "{out}"
    );
    // The same grid without --predict has no trace of it.
    let plain = run_json(&["grid", &grid, "--format", "json"]);
    assert!(plain["cells"][0].get("predicted").is_none());
    assert!(plain["summary"].get("predicted").is_none());
    // CSV carries the column.
    let (_, csv, _) = run(&["grid", &grid, "--predict", "b200", "--format", "csv"]);
    assert!(csv.lines().next().unwrap().ends_with("P ratio"), "{csv}");
}

#[test]
fn a_pair_is_predicted_with_its_ratio() {
    let (looped, base) = (budget("smelt-200m-s95.toml"), budget("base-200m-s95.toml"));
    let j = run_json(&[
        "predict",
        &looped,
        "--against",
        &base,
        "--card",
        "mi300x",
        "--format",
        "json",
    ]);
    let m = j["models"].as_array().unwrap();
    let (b, l) = (
        m[0]["seconds_per_token"].as_f64().unwrap(),
        m[1]["seconds_per_token"].as_f64().unwrap(),
    );
    assert!((j["time_ratio"].as_f64().unwrap() - l / b).abs() < 1e-12);
    assert_eq!(j["basis"]["device"]["name"], "AMD Instinct MI300X");
    // A component's seconds are its bounds' sum, and the components sum to the model's.
    for model in m {
        let mut sum = 0.0;
        for c in model["components"].as_array().unwrap() {
            let b = &c["bounds"];
            let parts: f64 = ["compute", "memory", "launch"]
                .iter()
                .map(|k| b[k].as_f64().unwrap())
                .sum();
            assert!((parts - c["seconds"].as_f64().unwrap()).abs() < 1e-15);
            sum += parts;
        }
        assert!((sum - model["seconds"].as_f64().unwrap()).abs() < 1e-12);
    }
    // --peak and --bandwidth stand for a card the table lacks.
    let j = run_json(&[
        "predict",
        &base,
        "--peak",
        "500",
        "--bandwidth",
        "2",
        "--format",
        "json",
    ]);
    assert_eq!(j["basis"]["device"]["peak_flops_per_second"], 5e14);
    assert_eq!(j["basis"]["device"]["memory_bytes_per_second"], 2e12);
}

#[test]
fn bad_devices_are_refused() {
    let base = budget("base-200m-s95.toml");
    let (code, _, err) = run(&["predict", &base, "--card", "h20"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("no card of the table") && err.contains("h200-sxm"),
        "{err}"
    );
    let (code, _, err) = run(&["predict", &base]);
    assert_eq!(code, Some(1));
    assert!(err.contains("--card") && err.contains("--peak"), "{err}");
    let (code, _, err) = run(&["predict", &base, "--peak", "-3"]);
    assert_eq!(code, Some(2), "{err}");
    let (code, _, err) = run(&["predict", &base, "--card", "h200", "--peak", "900"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("not both"), "{err}");
    let (code, _, err) = run(&[
        "grid",
        &budget("smelt-grid.toml"),
        "--calibration",
        "x.json",
    ]);
    assert_eq!(code, Some(2), "{err}");
}

#[test]
fn a_calibration_comes_from_a_bench_and_says_so() {
    let base = budget("base-100m-s0.toml");
    let (code, bench, err) = run(&[
        "bench", &base, "--rounds", "1", "--tokens", "256", "--format", "json", "--quiet",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let b: serde_json::Value = serde_json::from_str(&bench).unwrap();
    // The bench report carries each shape's time: what the calibration fits.
    let kernels = b["models"][0]["kernels"].as_array().unwrap();
    assert_eq!(
        kernels.len() as u64,
        b["models"][0]["kernel_shapes"].as_u64().unwrap()
    );
    let bench_file = temp_file("json", &bench);
    let cal = bench_file.with_extension("cal.json");
    let (code, _, err) = run(&[
        "calibrate",
        bench_file.to_str().unwrap(),
        "-o",
        cal.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&cal).unwrap()).unwrap();
    assert_eq!(c["backend"], "cpu");
    for class in ["gemm", "experts", "tile", "softmax"] {
        assert!(
            c["curves"][class].as_array().is_some_and(|v| !v.is_empty()),
            "{c}"
        );
    }
    // On its own device: unfused tiles and one GEMM per expert, as the bench ran them.
    let j = run_json(&[
        "predict",
        &base,
        "--calibration",
        cal.to_str().unwrap(),
        "--tokens",
        "256",
        "--format",
        "json",
    ]);
    assert_eq!(j["basis"]["calibrated"], true);
    assert_eq!(j["basis"]["attention"], "unfused");
    assert_eq!(j["basis"]["experts"], "per-expert");
    assert!(j["basis"]["device"]["memory_bytes_per_second"].is_null());
    // The GEMMs' operand-traffic fit, when the calibration kept one (both constants
    // positive: a one-round bench may not), applies on its own device, and says so.
    // (Compared to 1e-12: serde_json's default float parsing may move a last digit.)
    let (applied, kept) = (&j["basis"]["traffic"], &c["traffic"]);
    assert_eq!(applied.is_null(), kept.is_null(), "{j}");
    if let Some(t) = kept.as_object() {
        for key in ["seconds_per_flop", "seconds_per_byte", "rms_relative_error"] {
            let (a, b) = (applied[key].as_f64().unwrap(), t[key].as_f64().unwrap());
            assert!((a - b).abs() <= 1e-12 * b.abs(), "{key}: {a} vs {b}");
        }
        assert_eq!(applied["shapes"], t["shapes"]);
        assert!(t["seconds_per_flop"].as_f64().unwrap() > 0.0);
        assert!(t["seconds_per_byte"].as_f64().unwrap() > 0.0);
    }
    let own = run_json(&[
        "predict",
        &base,
        "--calibration",
        cal.to_str().unwrap(),
        "--tokens",
        "256",
        "--format",
        "json",
    ]);
    assert_eq!(own, j, "same input, same output");
    // On a card, the calibration's efficiencies with the card's figures; the table says
    // where the efficiencies were measured.
    let (code, out, err) = run(&[
        "predict",
        &base,
        "--card",
        "h100-sxm",
        "--calibration",
        cal.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("calibrated by") && out.contains("measured on CPU"),
        "{out}"
    );
    // The measured device's operand traffic is not a card's.
    assert!(!out.contains("operand traffic"), "{out}");
    // A bench report without per-shape times is refused, naming the field.
    let mut old = b.clone();
    old["models"][0].as_object_mut().unwrap().remove("kernels");
    let old_file = temp_file("json", &old.to_string());
    let (code, _, err) = run(&["calibrate", old_file.to_str().unwrap(), "-o", "/tmp/x.json"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("kernels") && err.contains("rerun smelt bench"),
        "{err}"
    );
    // A file that is no calibration is refused by name.
    let (code, _, err) = run(&[
        "predict",
        &base,
        "--calibration",
        old_file.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1));
    assert!(err.contains("calibration"), "{err}");
}

#[test]
fn the_readme_table_is_what_the_grid_predicts() {
    let readme =
        std::fs::read_to_string(format!("{}/docs/guide.md", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let marker = "<!-- predict-h200: smelt grid budgets/smelt-grid.toml --predict h200";
    let table = readme
        .split(marker)
        .nth(1)
        .expect("the guide's predict table");
    let rows: Vec<&str> = (table.lines().skip(3))
        .take_while(|l| l.starts_with('|'))
        .collect();
    let j = run_json(&[
        "grid",
        &budget("smelt-grid.toml"),
        "--predict",
        "h200",
        "--format",
        "json",
    ]);
    let cells = j["cells"].as_array().unwrap();
    assert_eq!(rows.len(), cells.len());
    for (row, c) in rows.iter().zip(cells) {
        let p = &c["predicted"];
        let want = format!(
            "| {} {} | {:.4} | {:.3e} | {:.3e} | {:.4} |",
            c["scale"].as_str().unwrap(),
            c["sparsity_label"].as_str().unwrap(),
            c["ratios"]["flops"].as_f64().unwrap(),
            p["baseline_seconds_per_token"].as_f64().unwrap(),
            p["looped_seconds_per_token"].as_f64().unwrap(),
            p["ratio"].as_f64().unwrap(),
        );
        assert_eq!(*row, want);
    }
}
