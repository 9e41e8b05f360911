//! `smelt fit` and `smelt gain` through the command line.

use crate::common;

use common::{data as data_file, run};
use serde_json::Value;
use smelt::fit::data;

fn write(text: &str) -> String {
    common::temp_file("csv", text).display().to_string()
}

/// `smelt gain` of smelt over the Baseline in `csv` with the small start grid, and `extra`.
fn gain(csv: &str, extra: &[&str]) -> (Option<i32>, String, String) {
    let mut args = vec![
        "gain",
        csv,
        "--reference",
        "baseline",
        "--target",
        "smelt",
        "--starts",
        "small",
    ];
    args.extend(extra);
    run(&args)
}

fn synthetic_csv() -> String {
    let (base, smelt) = data::paper_like_endpoints(&[0.85, 0.95, 0.97], 0.002);
    write(&data::to_csv(&[("baseline", &base), ("smelt", &smelt)]))
}

#[test]
fn committed_chinchilla_endpoints_match_the_raw_extraction() {
    let raw = std::fs::read_to_string(data_file("chinchilla/svg_extracted_data.csv")).unwrap();
    let points = data::epoch_chinchilla(&raw, "raw").unwrap();
    let committed = std::fs::read_to_string(data_file("chinchilla/endpoints.csv")).unwrap();
    assert_eq!(committed, data::to_csv(&[("chinchilla", &points)]));
}

#[test]
fn fit_json_contract_per_group() {
    let csv = synthetic_csv();
    let (code, out, err) = run(&[
        "fit", &csv, "--group", "arch", "--starts", "small", "--format", "json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let fits = v["fits"].as_array().unwrap();
    assert_eq!(fits.len(), 2);
    assert_eq!(fits[0]["group"], "baseline");
    assert_eq!(fits[1]["group"], "smelt");
    for f in fits {
        for key in ["E", "A", "a", "b", "K", "c", "rmse", "gamma"] {
            assert!(f[key].is_number(), "{key}");
        }
        assert_eq!(f["form"], "surface");
        assert_eq!(f["cells"], 12);
        assert!(f["rmse"].as_f64().unwrap() < 0.01);
    }
    let (_, again, _) = run(&[
        "fit", &csv, "--group", "arch", "--starts", "small", "--format", "json",
    ]);
    assert_eq!(out, again);
    let (code, table, _) = run(&["fit", &csv, "--group", "arch", "--starts", "small"]);
    assert_eq!(code, Some(0));
    assert!(table.contains("baseline") && table.contains("starts at best"));
}

#[test]
fn gain_table_with_bootstrap() {
    let csv = synthetic_csv();
    let args = ["--bootstrap", "40", "--seed", "9", "--format", "json"];
    let (code, out, err) = gain(&csv, &args);
    assert_eq!(code, Some(0), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 6);
    for r in rows {
        let g = r["gain"].as_f64().unwrap();
        assert!(g > 0.0 && g < 0.4, "{g}");
        assert!(r["gain_interval"]["lo"].as_f64().unwrap() <= g + 0.05);
    }
    assert_eq!(v["bootstrap"]["resamples"], 40);
    assert_eq!(gain(&csv, &args).1, out, "seeded: same bytes");
    let (_, table, _) = gain(&csv, &args[..args.len() - 2]);
    assert!(
        table.contains("CE gain") && table.contains("95%"),
        "{table}"
    );
}

#[test]
fn bad_endpoints_and_arguments() {
    let missing = write("F,S,loss\n1,0,2\n");
    let (code, _, err) = run(&["fit", &missing]);
    assert_eq!(code, Some(1));
    assert!(err.contains("missing column(s) D"), "{err}");
    let negative = write("F,S,D,loss\n1,0,2,0\n");
    let (code, _, err) = run(&["fit", &negative]);
    assert_eq!(code, Some(1));
    assert!(err.contains("row 2, column loss"), "{err}");
    let few = write("F,S,D,loss\n1e9,0.5,1e10,3\n2e9,0.5,1e10,2.9\n");
    let (code, _, err) = run(&["fit", &few]);
    assert_eq!(code, Some(1));
    assert!(err.contains("needs at least 7"), "{err}");
    let csv = synthetic_csv();
    let (code, _, err) = run(&["gain", &csv, "--reference", "base", "--target", "smelt"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("--reference 'base'") && err.contains("baseline, smelt"),
        "{err}"
    );
    let (code, _, err) = run(&["gain", &csv, "--reference", "smelt", "--target", "smelt"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("both name 'smelt'"), "{err}");
    let (code, _, err) = gain(&csv, &["--sparsity", "1.5"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("sparsity"), "{err}");
    let (code, _, _) = run(&[
        "gain",
        &csv,
        "--reference",
        "baseline",
        "--target",
        "smelt",
        "--compute",
        "x",
    ]);
    assert_eq!(code, Some(2));
}
