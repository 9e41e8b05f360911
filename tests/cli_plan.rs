//! `smelt plan` (an IsoFLOP study's run matrix) and `smelt collect` (its results as
//! endpoints) through the command line.

use std::path::{Path, PathBuf};

use crate::common::{budget, run, run_json, temp_file};
use serde_json::Value;
use smelt::budget::GridSpec;

fn toy_grid() -> String {
    format!("{}/examples/study/grid.toml", env!("CARGO_MANIFEST_DIR"))
}

/// The exact per-token training FLOPs of every model of `grid` at `context`, from the cost
/// model (`smelt::cost`'s count), keyed `CELL-ARCH`.
fn costed(grid: &str, context: u64) -> Vec<(String, f64)> {
    let mut g = GridSpec::load(grid).unwrap();
    for c in &mut g.cells {
        let mut w = c.budget.baseline().workload.clone();
        w.context = context;
        c.budget = c.budget.clone().with_workload(w).unwrap();
    }
    let r = smelt::study::match_grid(&g).unwrap();
    let mut out = Vec::new();
    for c in &r.cells {
        let cell = format!("{}-{}", c.scale, c.sparsity_label);
        let b = smelt::cost(&c.baseline).unwrap();
        let l = smelt::compare(&c.baseline, &c.looped).unwrap();
        out.push((
            format!("{cell}-baseline"),
            b.flops_per_token.training.as_f64(),
        ));
        out.push((
            format!("{cell}-looped"),
            l.model.flops_per_token.training.as_f64(),
        ));
    }
    out
}

/// The command: every run on whole steps, its reached compute within half a step
/// of its level by the cost model's count (loops' second visits included), the 6N plan's
/// miss recomputed from 6N's own count.
#[test]
fn the_papers_grid_plans_every_run_within_half_a_step() {
    let grid = budget("smelt-grid.toml");
    let v = run_json(&[
        "plan",
        &grid,
        "--compute",
        "1e18,3e18,1e19",
        "--global-batch",
        "256",
        "--context",
        "4096",
        "--format",
        "json",
    ]);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 16 * 2 * 3);
    assert_eq!(v["tokens_per_step"], 256 * 4096);
    let costs = costed(&grid, 4096);
    let mut six_n_off = 0.0_f64;
    for r in runs {
        let id = r["id"].as_str().unwrap();
        let (c, f) = (
            r["compute"].as_f64().unwrap(),
            r["training_flops_per_token"].as_f64().unwrap(),
        );
        let model = r["model"].as_str().unwrap();
        let (_, want) = costs.iter().find(|(m, _)| m == model).unwrap();
        assert_eq!(f, *want, "{id}");
        let (tokens, steps) = (r["tokens"].as_u64().unwrap(), r["steps"].as_u64().unwrap());
        assert_eq!(tokens, steps * 256 * 4096, "{id}");
        let reached = r["compute_reached"].as_f64().unwrap();
        assert!(
            (reached - tokens as f64 * f).abs() <= 1e-9 * reached,
            "{id}"
        );
        let step = f * (256 * 4096) as f64;
        assert!(
            (reached - c).abs() <= 0.5 * step * (1.0 + 1e-9),
            "{id}: {reached} vs {c}"
        );
        assert!(
            ["1e18", "3e18", "1e19"].iter().any(|l| id.ends_with(l)),
            "{id}"
        );
        let six = &r["conventions"][0];
        assert_eq!(six["convention"], "6n");
        let six_f = six["training_flops_per_token"].as_f64().unwrap();
        let six_steps = (c / (six_f * (256 * 4096) as f64)).round();
        assert_eq!(six["steps"].as_f64().unwrap(), six_steps, "{id}");
        let off = six["reached_over_compute"].as_f64().unwrap();
        let want_off = six_steps * (256 * 4096) as f64 * f / c;
        assert!((off - want_off).abs() < 1e-9, "{id}");
        six_n_off = six_n_off.max((off - 1.0).abs());
    }
    // 6N misses the loops' second visits and the attention: far off, as the issue says.
    assert!(six_n_off > 0.3, "{six_n_off}");
    let looped = runs.iter().find(|r| r["arch"] == "looped").unwrap();
    let base = runs.iter().find(|r| r["arch"] == "baseline").unwrap();
    assert!(
        looped["conventions"][0]["reached_over_compute"]
            .as_f64()
            .unwrap()
            > base["conventions"][0]["reached_over_compute"]
                .as_f64()
                .unwrap()
    );
}

#[test]
fn the_table_and_csv_show_the_runs() {
    let grid = toy_grid();
    let args = [
        "plan",
        &grid,
        "--compute",
        "1e11,3e11",
        "--global-batch",
        "16",
    ];
    let (code, out, err) = run(&args);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("IsoFLOP plan of toy-study: 16 runs (8 models x 2 compute levels)"));
    assert!(
        out.contains("s-s0-looped-3e11") && out.contains("6N plan / C"),
        "{out}"
    );
    let (code, csv, err) = run(&[&args[..], &["--format", "csv"]].concat());
    assert_eq!(code, Some(0), "{err}");
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 17);
    assert!(
        lines[0].starts_with("run,cell,arch,S,C,F/token,tokens,steps,C reached"),
        "{}",
        lines[0]
    );
    // Same input, same bytes.
    assert_eq!(run(&[&args[..], &["--format", "csv"]].concat()).1, csv);
}

#[test]
fn a_budget_plans_its_one_cell() {
    let v = run_json(&[
        "plan",
        &budget("match-200m-s95.toml"),
        "--compute",
        "1e19",
        "--global-batch",
        "64",
        "--format",
        "json",
    ]);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["arch"], "baseline");
    assert_eq!(runs[1]["arch"], "looped");
}

#[test]
fn bad_plans_are_refused_by_name() {
    let grid = toy_grid();
    let (code, _, err) = run(&[
        "plan",
        &grid,
        "--compute",
        "1e11,1e11",
        "--global-batch",
        "16",
    ]);
    assert_eq!(code, Some(1));
    assert!(err.contains("1e11 is given twice"), "{err}");
    let (code, _, err) = run(&["plan", &grid, "--compute", "1e6", "--global-batch", "16"]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("s-s0-baseline-1e6") && err.contains("half an optimizer step"),
        "{err}"
    );
    let (code, _, err) = run(&["plan", &grid, "--compute", "-1", "--global-batch", "16"]);
    assert_eq!(code, Some(2), "{err}");
    // The export's flags do nothing without --export: refused.
    let (code, _, err) = run(&[
        "plan",
        &grid,
        "--compute",
        "1e11",
        "--global-batch",
        "16",
        "--vocab",
        "256",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--export"), "{err}");
}

fn out_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("plan-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// The toy grid planned and exported: (the manifest's path, its runs).
fn exported(name: &str) -> (PathBuf, Vec<Value>) {
    let dir = out_dir(name);
    let d = dir.display().to_string();
    let (code, _, err) = run(&[
        "plan",
        &toy_grid(),
        "--compute",
        "1.2e10,2.4e10,4.8e10",
        "--global-batch",
        "16",
        "--export",
        &d,
        "-o",
        &format!("{d}.json"),
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("wrote 8 models") && err.contains("24 runs"),
        "{err}"
    );
    let manifest = dir.join("manifest.jsonl");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let runs: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The JSON written with -o holds the same runs, directories and digests set.
    let plan: Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{d}.json")).unwrap()).unwrap();
    assert_eq!(plan["runs"].as_array().unwrap(), &runs);
    (manifest, runs)
}

fn results_csv(runs: &[Value], edit: impl Fn(usize, &Value) -> Option<String>) -> String {
    let mut text = "id,tokens,loss\n".to_owned();
    for (i, r) in runs.iter().enumerate() {
        if let Some(line) = edit(i, r) {
            text.push_str(&line);
            text.push('\n');
        }
    }
    temp_file("csv", &text).display().to_string()
}

fn line(r: &Value, loss: f64) -> String {
    format!("{},{},{loss}", r["id"].as_str().unwrap(), r["tokens"])
}

#[test]
fn the_manifest_names_each_runs_model_and_batch() {
    let (manifest, runs) = exported("manifest");
    assert_eq!(runs.len(), 24);
    let dir = manifest.parent().unwrap();
    for r in &runs {
        let model = dir.join(r["directory"].as_str().unwrap());
        let config = std::fs::read(model.join("config.json")).unwrap();
        assert_eq!(
            r["config_sha256"].as_str().unwrap(),
            smelt::export::sha256_hex(&config)
        );
        assert_eq!(r["config_sha256"].as_str().unwrap().len(), 64);
        assert_eq!(
            (r["global_batch"].as_u64(), r["sequence_length"].as_u64()),
            (Some(16), Some(128))
        );
        let looped = model.join("modeling_smelt_looped.py").exists();
        assert_eq!(looped, r["arch"] == "looped", "{}", r["id"]);
    }
}

#[test]
fn collect_writes_the_endpoints_fit_reads_at_the_plans_compute() {
    let (manifest, runs) = exported("collect");
    let m = manifest.display().to_string();
    let results = results_csv(&runs, |i, r| Some(line(r, 5.0 - 0.01 * i as f64)));
    let (code, csv, err) = run(&["collect", &m, &results]);
    assert_eq!(code, Some(0), "{err}");
    let groups = smelt::fit::data::parse(&csv, "endpoints", Some("arch")).unwrap();
    assert_eq!(groups["baseline"].len(), 12);
    assert_eq!(groups["looped"].len(), 12);
    for (row, r) in csv.lines().skip(1).zip(&runs) {
        let row: Vec<&str> = row.split(',').collect();
        assert_eq!(row[0], r["id"].as_str().unwrap());
        // The compute spent, by the exact count, is the plan's.
        assert_eq!(
            row[6].parse::<f64>().unwrap(),
            r["compute_reached"].as_f64().unwrap()
        );
        let f =
            smelt::study::parse_flops(r["training_flops_per_token_exact"].as_str().unwrap(), "f")
                .unwrap();
        assert_eq!(row[3].parse::<f64>().unwrap(), f.as_f64());
    }
    // JSON lines give the same endpoints.
    let jsonl: String = runs
        .iter()
        .enumerate()
        .map(|(i, r)| {
            format!(
                "{{\"id\": {}, \"tokens\": {}, \"loss\": {}}}\n",
                r["id"],
                r["tokens"],
                5.0 - 0.01 * i as f64
            )
        })
        .collect();
    let (code, again, err) = run(&[
        "collect",
        &m,
        &temp_file("jsonl", &jsonl).display().to_string(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(again, csv);
    // The fit reads them.
    let out = temp_file("csv", &csv).display().to_string();
    let (code, _, err) = run(&["fit", &out, "--group", "arch", "--starts", "small"]);
    assert_eq!(code, Some(0), "{err}");
    let _ = std::fs::remove_dir_all(manifest.parent().unwrap());
}

#[test]
fn collect_refuses_a_result_that_is_not_the_run_planned() {
    let (manifest, runs) = exported("refuse");
    let m = manifest.display().to_string();
    let collect = |results: &str| run(&["collect", &m, results]);
    // A run missing: named, with the cells lacking runs.
    let (code, _, err) = collect(&results_csv(&runs, |i, r| (i != 3).then(|| line(r, 4.0))));
    assert_eq!(code, Some(1));
    let missing = runs[3]["id"].as_str().unwrap();
    assert!(
        err.contains(&format!("1 run(s) of the plan have no result: {missing}")),
        "{err}"
    );
    assert!(
        err.contains("cells lacking runs: s-s0 looped at 1.2e10"),
        "{err}"
    );
    // ... and with --partial, left out with a warning naming the cell.
    let partial = results_csv(&runs, |i, r| (i != 3).then(|| line(r, 4.0)));
    let (code, csv, err) = run(&["collect", &m, &partial, "--partial"]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(csv.lines().count(), 24);
    assert!(
        err.contains("cells lacking runs: s-s0 looped at 1.2e10"),
        "{err}"
    );
    // An unknown run.
    let (code, _, err) = collect(&results_csv(&runs, |i, r| {
        Some(match i {
            0 => format!("s-s0-baseline-9e99,{},4.0", r["tokens"]),
            _ => line(r, 4.0),
        })
    }));
    assert_eq!(code, Some(1));
    assert!(
        err.contains("run 's-s0-baseline-9e99' is not in the plan"),
        "{err}"
    );
    // Tokens that differ from the plan.
    let (code, _, err) = collect(&results_csv(&runs, |i, r| {
        Some(match i {
            5 => format!(
                "{},{},4.0",
                r["id"].as_str().unwrap(),
                r["tokens"].as_u64().unwrap() - 2048
            ),
            _ => line(r, 4.0),
        })
    }));
    assert_eq!(code, Some(1));
    let id = runs[5]["id"].as_str().unwrap();
    assert!(
        err.contains(&format!("run '{id}' trained")) && err.contains("the plan says"),
        "{err}"
    );
    // A run given twice.
    let (code, _, err) = collect(&results_csv(&runs, |i, r| {
        Some(match i {
            1 => format!("{}\n{}", line(r, 4.0), line(r, 4.0)),
            _ => line(r, 4.0),
        })
    }));
    assert_eq!(code, Some(1));
    assert!(
        err.contains(&format!(
            "run '{}' is given twice",
            runs[1]["id"].as_str().unwrap()
        )),
        "{err}"
    );
    // A model that differs from the plan's (its config.json's digest).
    let mut text = "id,tokens,loss,config_sha256\n".to_owned();
    for (i, r) in runs.iter().enumerate() {
        let sha = match i {
            7 => "0".repeat(64),
            _ => r["config_sha256"].as_str().unwrap().to_owned(),
        };
        text.push_str(&format!("{},{sha}\n", line(r, 4.0)));
    }
    let (code, _, err) = collect(&temp_file("csv", &text).display().to_string());
    assert_eq!(code, Some(1));
    let id = runs[7]["id"].as_str().unwrap();
    assert!(
        err.contains(&format!("run '{id}' trained a model whose config.json")),
        "{err}"
    );
    // A loss that is not a number, named by line and column.
    let (code, _, err) = collect(&results_csv(&runs, |i, r| {
        Some(match i {
            2 => format!("{},{},nope", r["id"].as_str().unwrap(), r["tokens"]),
            _ => line(r, 4.0),
        })
    }));
    assert_eq!(code, Some(1));
    assert!(
        err.contains("line 4: loss") && err.contains("'nope' is not a number"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(manifest.parent().unwrap());
}

#[test]
fn collect_names_a_manifest_edited_after_the_plan() {
    let (manifest, runs) = exported("edited");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let id = runs[0]["id"].as_str().unwrap();
    let tokens = runs[0]["tokens"].to_string();
    let edited = text.replacen(&format!("\"tokens\":{tokens}"), "\"tokens\":1", 1);
    let path = temp_file("jsonl", &edited);
    let results = results_csv(&runs, |_, r| Some(line(r, 4.0)));
    let (code, _, err) = run(&["collect", &path.display().to_string(), &results]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains(&format!("run '{id}'")) && err.contains("the manifest was edited"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(Path::new(&manifest).parent().unwrap());
}
