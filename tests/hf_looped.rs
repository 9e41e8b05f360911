//! Looped exports as Transformers model directories: what smelt writes for a looped match
//! reads back as the same model, loop included, from the directory or its `config.json`.
//! (That Transformers builds exactly this model is shown by python/tests/test_export_hf.py.)

use std::path::PathBuf;

use smelt::budget::Budget;
use smelt::hf::looped::{MODEL_TYPE, ModelDir};

use crate::common::{budget, run, run_json};

fn fresh_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("looped-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn a_looped_match_reads_back_from_its_directory() {
    let b = Budget::load(budget("match-qwen1.5-moe-a2.7b.toml")).unwrap();
    let report = smelt::match_budget(&b, 1).unwrap();
    let config = smelt::hf::export_match(b.baseline_config(), &report.looped, None, None).unwrap();
    let files = ModelDir::of(&config).unwrap();
    assert!(files.is_looped());
    let dir = fresh_dir("qwen");
    files.write(&dir, &[]).unwrap();
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    assert_eq!(written["model_type"], MODEL_TYPE);
    assert_eq!(written["text_config"]["model_type"], "qwen2_moe");
    // The loop is read back, and the counts are the looped model's, from the folder and
    // from its config.json alike.
    let back = smelt::ModelSpec::load(&dir).unwrap();
    assert_eq!(back.model.looping, report.looped.model.looping);
    let want = smelt::cost(&report.looped.clone()).unwrap();
    let want_json = serde_json::to_value(&want).unwrap();
    for path in [dir.clone(), dir.join("config.json")] {
        let path = path.display().to_string();
        let got = run_json(&[
            "cost",
            &path,
            "--context",
            &report.looped.workload.context.to_string(),
            "--format",
            "json",
        ]);
        assert_eq!(got["layer_executions"], want_json["layer_executions"]);
        assert_eq!(got["params"]["total"], want_json["params"]["total"]);
        assert_eq!(
            got["kv_cache_per_token"]["elements"],
            want_json["kv_cache_per_token"]["elements"]
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `smelt match --format hf` writes a looped match only as a directory: to standard output
/// or to `-o x.json` it is refused with the reason, and nothing is written.
#[test]
fn the_command_line_writes_the_directory_and_refuses_a_bare_config() {
    let qwen = budget("match-qwen1.5-moe-a2.7b.toml");
    let dir = fresh_dir("cli");
    let (code, out, err) = run(&["match", &qwen, "--format", "hf", "-q"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(out.is_empty());
    assert!(
        err.contains("never as a bare config.json") && err.contains("give -o DIR"),
        "{err}"
    );
    let json = dir.with_extension("json");
    let (code, _, err) = run(&[
        "match",
        &qwen,
        "--format",
        "hf",
        "-o",
        &json.display().to_string(),
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("give a directory"), "{err}");
    assert!(!json.exists());
    let (code, _, err) = run(&[
        "match",
        &qwen,
        "--format",
        "hf",
        "-o",
        &dir.display().to_string(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("trust_remote_code=True"), "{err}");
    let b = Budget::load(&qwen).unwrap();
    let report = smelt::match_budget(&b, 1).unwrap();
    let config = smelt::hf::export_match(b.baseline_config(), &report.looped, None, None).unwrap();
    for (name, contents) in ModelDir::of(&config).unwrap().files {
        assert_eq!(
            std::fs::read_to_string(dir.join(name)).unwrap(),
            contents,
            "{name}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `smelt grid --export DIR` writes one model directory per cell, named from its labels,
/// each reading back as that cell's looped model; `--export-format model` writes the model
/// files, the same models. (That Transformers builds each directory is shown by
/// python/tests/test_export_hf.py.)
#[test]
fn a_grid_exports_every_cell() {
    let grid = budget("smelt-grid.toml");
    let report = smelt::match_grid(&smelt::GridSpec::load(&grid).unwrap()).unwrap();
    let (hf_dir, model_dir) = (fresh_dir("grid-hf"), fresh_dir("grid-model"));
    for (dir, format) in [(&hf_dir, "hf"), (&model_dir, "model")] {
        let dir = dir.display().to_string();
        let args = ["grid", &grid, "--export", &dir, "--export-format", format];
        let (code, _, err) = run(&[&args[..], &["--vocab", "50304", "-q"]].concat());
        assert_eq!(code, Some(0), "{err}");
        assert!(err.contains("wrote 16 "), "{err}");
    }
    for cell in &report.cells {
        let name = smelt::export::entry_name(&[&cell.scale, &cell.sparsity_label]);
        let from_dir = smelt::ModelSpec::load(hf_dir.join(&name)).unwrap();
        let mut want = cell.looped.clone();
        want.model.vocab = 50304;
        want.counting = from_dir.counting;
        want.workload = from_dir.workload.clone();
        assert_eq!(from_dir.model.looping, want.model.looping, "{name}");
        let (got, want) = (smelt::cost(&from_dir).unwrap(), smelt::cost(&want).unwrap());
        assert_eq!(got.params.total, want.params.total, "{name}");
        assert_eq!(got.flops_per_token, want.flops_per_token, "{name}");
        let from_file = smelt::ModelSpec::load(model_dir.join(format!("{name}.toml"))).unwrap();
        assert_eq!(from_file, cell.looped, "{name}");
    }
    for dir in [hf_dir, model_dir] {
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// `smelt sweep --export DIR`: a value without a loop is its family's plain config.json, a
/// looped one a model directory; the export flags need `--export`; an export onto the budget
/// itself is refused.
#[test]
fn a_sweep_exports_every_value() {
    let b = budget("match-200m-s95.toml");
    let dir = fresh_dir("sweep");
    let d = dir.display().to_string();
    let (code, _, err) = run(&["sweep", &b, "--span", "0,4", "--export", &d, "--vocab", "7"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(!dir.join("span-0/modeling_smelt_looped.py").exists());
    assert!(dir.join("span-0/config.json").exists());
    assert!(dir.join("span-4/modeling_smelt_looped.py").exists());
    let looped = smelt::ModelSpec::load(dir.join("span-4")).unwrap();
    assert_eq!(looped.model.executions(), looped.model.layers + 4);
    let (code, _, err) = run(&["sweep", &b, "--span", "4", "--vocab", "7"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--export <DIR>"), "{err}");
    // An export that would land on the budget file it read is refused.
    let text = std::fs::read_to_string(&b).unwrap().replace(
        "baseline = \"base-200m-s95.toml\"",
        &format!("baseline = {:?}", budget("base-200m-s95.toml")),
    );
    let inputs = fresh_dir("sweep-inputs");
    std::fs::create_dir_all(&inputs).unwrap();
    let own = inputs.join("span-4.toml");
    std::fs::write(&own, &text).unwrap();
    let (i, o) = (inputs.display().to_string(), own.display().to_string());
    let args = [
        "sweep",
        &o,
        "--span",
        "2,4",
        "--export",
        &i,
        "--export-format",
        "model",
    ];
    let (code, _, err) = run(&args);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("it is an input of this run"), "{err}");
    assert_eq!(std::fs::read_to_string(&own).unwrap(), text);
    std::fs::remove_dir_all(&inputs).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
