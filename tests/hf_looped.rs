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
    files.write(&dir, &[], Default::default()).unwrap();
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

/// The hybrid families (Qwen3-Next's and Qwen3.5's Gated DeltaNet layers, Nemotron-H's
/// Mamba-2 layers) and Gemma 4, looped over a span that holds a recurrent layer (or both of
/// Gemma 4's attention kinds): `smelt export` of the model file writes a model directory
/// whose `config.json` holds the family's config of the physical layers, and `smelt cost DIR`
/// reads it back as the looped model, recurrent state and KV cache per execution included.
/// A model file holds none of the config's other keys: the export says which take
/// Transformers' defaults. (That Transformers builds each directory as smelt costs it is
/// shown by python/tests: test_gated_deltanet.py, test_mamba2.py, test_gemma4.py.)
#[test]
fn hybrid_and_gemma4_loops_are_written_as_model_directories() {
    let cases = [
        ("qwen3-next-80b-a3b.json", "qwen3_next", 3, 2),
        ("qwen3.5-35b-a3b.json", "qwen3_5_moe_text", 3, 2),
        ("nemotron-3-nano-30b-a3b.json", "nemotron_h", 5, 3),
        ("gemma-4-26b-a4b.json", "gemma4_text", 5, 2),
    ];
    for (fixture, model_type, first, span) in cases {
        let mut spec = crate::hf_figures::load(fixture);
        spec.model.looping = Some(smelt::Loop {
            first,
            span,
            repeats: 2,
            residual_scale: Some(0.5),
        });
        let toml = crate::common::temp_file("toml", &spec.to_toml_string().unwrap());
        let dir = fresh_dir(model_type);
        let d = dir.display().to_string();
        // A model file names no family: Qwen3.5's is asked for (else qwen3_next's, whose
        // conventions the model follows too).
        let args = [
            "export",
            toml.to_str().unwrap(),
            "-o",
            &d,
            "--hf-family",
            model_type,
        ];
        let (code, _, err) = run(&args);
        assert_eq!(code, Some(0), "{fixture}: {err}");
        assert!(err.contains("looped model directory"), "{err}");
        let defaulted = match model_type {
            "nemotron_h" => "layer_norm_epsilon",
            "gemma4_text" => "final_logit_softcapping",
            _ => "rope_parameters",
        };
        assert!(
            err.contains("take Transformers' defaults") && err.contains(defaulted),
            "{err}"
        );
        let written: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap())
                .unwrap();
        assert_eq!(written["model_type"], MODEL_TYPE);
        assert_eq!(written["loop_first_layer"], first);
        let text = &written["text_config"];
        assert_eq!(text["model_type"], model_type, "{fixture}");
        assert_eq!(text["num_hidden_layers"], spec.model.layers, "{fixture}");
        // The loop holds a recurrent layer (Gemma 4: a sliding and a full layer).
        let types = text
            .get("layer_types")
            .or_else(|| text.get("layers_block_type"))
            .and_then(serde_json::Value::as_array)
            .unwrap();
        assert_eq!(types.len() as u64, spec.model.layers, "{fixture}");
        let looped = &types[first as usize - 1..(first + span) as usize - 1];
        let kinds = match model_type {
            "gemma4_text" => ["sliding_attention", "full_attention"],
            _ => ["linear_attention", "full_attention"],
        };
        for kind in kinds {
            assert!(looped.iter().any(|t| t == kind), "{fixture}: {looped:?}");
        }
        let back = smelt::ModelSpec::load(&dir).unwrap();
        assert_eq!(back.model, spec.model, "{fixture}");
        let want = serde_json::to_value(smelt::cost(&spec).unwrap()).unwrap();
        let got = run_json(&["cost", &d, "--format", "json"]);
        assert_eq!(
            got["layer_executions"],
            spec.model.executions(),
            "{fixture}"
        );
        for key in [
            "layer_executions",
            "params",
            "flops_per_token",
            "kv_cache_per_token",
        ] {
            assert_eq!(got[key], want[key], "{fixture}: {key}");
        }
        if model_type != "gemma4_text" {
            // A state per recurrent layer execution: the looped ones' twice.
            let state = &got["kv_cache_per_token"]["recurrent_state"];
            let recurrent = spec.model.recurrent.as_ref().unwrap();
            assert_eq!(
                state["executions"],
                recurrent.layers.len() as u64 + 1,
                "{fixture}"
            );
            assert_eq!(state["executions"], spec.model.recurrent_executions());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
