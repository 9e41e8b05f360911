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
