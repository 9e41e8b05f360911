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
    assert!(
        table.contains("baseline") && table.contains("at best"),
        "{table}"
    );
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

/// Near-degenerate data is fitted, but flagged: losses that barely vary (the power laws rest
/// on differences of 1e-7), and tokens almost proportional to size (the two laws can nearly
/// trade places). `fit` says so under its table and in its JSON; `gain` says so before its
/// rows, naming the fit its gains rest on; clean data carries no warning.
#[test]
fn near_degenerate_fits_are_flagged_and_gain_repeats_it() {
    let (truth, _) = data::paper_like_surfaces();
    let mut flat = data::synthetic(
        &truth,
        &data::SYNTHETIC_FLOPS,
        &[0.85, 0.95, 0.97],
        &data::SYNTHETIC_TOKENS,
        0.0,
        5,
    );
    flat.iter_mut()
        .for_each(|p| p.loss = 3.0 + 1e-7 * (p.loss - truth.E));
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let near: Vec<data::Endpoint> = (0..24)
        .map(|i| {
            rng = rng.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let f = 1e8 * 1.25f64.powi(i);
            let d = 20.0 * f * (1.0 + 0.004 * ((rng >> 11) as f64 / (1u64 << 53) as f64 - 0.5));
            data::Endpoint {
                f,
                s: 0.0,
                d,
                loss: truth.loss(f, 0.0, d),
                cell: format!("c{i}"),
            }
        })
        .collect();
    let (base, _) = data::paper_like_endpoints(&[0.85, 0.95, 0.97], 0.002);
    let csv = write(&data::to_csv(&[
        ("flat", &flat),
        ("near", &near),
        ("baseline", &base),
    ]));
    let (code, out, err) = run(&[
        "fit", &csv, "--group", "arch", "--starts", "small", "--format", "json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let warnings = |group: &str| -> Vec<String> {
        let f = v["fits"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["group"] == group)
            .unwrap();
        f.get("warnings").map_or(Vec::new(), |w| {
            w.as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_owned())
                .collect()
        })
    };
    assert!(
        warnings("baseline").is_empty(),
        "{:?}",
        warnings("baseline")
    );
    let flat_warnings = warnings("flat").join("\n");
    assert!(
        flat_warnings.contains("the losses vary by only"),
        "{flat_warnings}"
    );
    let near_warnings = warnings("near").join("\n");
    assert!(
        near_warnings.contains("log D is nearly an affine function of log F")
            && near_warnings.contains("A, a, K and c are poorly determined"),
        "{near_warnings}"
    );
    // Long lines wrap at the table's width: read the words.
    let words = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let (code, table, _) = run(&["fit", &csv, "--group", "arch", "--starts", "small"]);
    assert_eq!(code, Some(0));
    let table = words(&table);
    assert!(
        table.contains("warning (flat): the losses vary by only"),
        "{table}"
    );
    let (code, table, err) = run(&[
        "gain",
        &csv,
        "--reference",
        "baseline",
        "--target",
        "near",
        "--starts",
        "small",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let table = words(&table);
    assert!(
        table.contains("warning (near): log D is nearly an affine function of log F")
            && table.contains("the gains below rest on this fit"),
        "{table}"
    );
}
