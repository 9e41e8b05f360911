//! Where results go: `-o` in every format, flags that would be ignored refused, nothing
//! written over an input or a file smelt did not write (without `--force`), and exports
//! written all or nothing.

use crate::common;

use std::path::{Path, PathBuf};

use common::{budget, run};

/// A fresh, empty folder under the target directory.
fn fresh_dir(tag: &str) -> PathBuf {
    let dir = common::temp_file("d", "");
    std::fs::remove_file(&dir).unwrap();
    let dir = dir.with_extension(tag);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `match -o FILE` writes what standard output would have held, in every format (it wrote
/// only the model file and the Hugging Face export before, and nothing for the reports).
#[test]
fn match_output_is_written_in_every_format() {
    let b = budget("match-200m-s95.toml");
    let dir = fresh_dir("match-o");
    for format in ["table", "json", "markdown", "model"] {
        let (code, printed, _) = run(&["match", &b, "--format", format]);
        assert_eq!(code, Some(0), "{format}");
        let out = dir.join(format!("result.{format}"));
        let (code, stdout, stderr) = run(&["match", &b, "--format", format, "-o", s(&out)]);
        assert_eq!(code, Some(0), "{format}: {stderr}");
        assert!(stdout.is_empty(), "{format}: {stdout}");
        assert!(stderr.contains("smelt: wrote the"), "{format}: {stderr}");
        let written = std::fs::read_to_string(&out).unwrap();
        assert_eq!(written, printed, "{format}");
    }
    let out = dir.join("launcher.csv");
    let args = ["match", &b, "--format", "csv", "--conventions"];
    let (_, printed, _) = run(&args);
    let (code, _, _) = run(&[&args[..], &["-o", s(&out)]].concat());
    assert_eq!(code, Some(0));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), printed);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--vocab` and `--hf-family` act only on the Hugging Face export: without `--format hf`
/// they are a usage error naming what they need, as `grid` and `sweep` refuse them without
/// `--export`.
#[test]
fn match_refuses_hf_flags_without_the_hf_format() {
    let b = budget("match-200m-s95.toml");
    for (flag, value) in [("--vocab", "32000"), ("--hf-family", "qwen3_moe")] {
        for format in ["table", "json", "model"] {
            let (code, stdout, stderr) = run(&["match", &b, "--format", format, flag, value]);
            assert_eq!(code, Some(2), "{flag} {format}: {stderr}");
            assert!(stdout.is_empty());
            assert!(
                stderr.contains("required arguments were not provided")
                    && stderr.contains("--format hf")
                    && stderr.contains(flag),
                "{stderr}"
            );
        }
    }
    let (code, _, stderr) = run(&["grid", &budget("smelt-grid.toml"), "--vocab", "5"]);
    assert_eq!(code, Some(2));
    assert!(
        stderr.contains("required arguments were not provided"),
        "{stderr}"
    );
}

/// `grid --bench cuda` where no cell can be timed (a build without the CUDA backend, or a
/// machine without its libraries) prints the grid with each cell's reason and exits 1: a
/// job script must not succeed without the timings it asked for.
#[test]
fn grid_bench_that_times_no_cell_fails() {
    let grid = budget("smelt-grid.toml");
    let (code, stdout, stderr) = run(&["grid", &grid, "--bench", "cuda", "--format", "json"]);
    if code == Some(0) {
        println!("skipped: this machine timed the grid on CUDA, so no cell failed");
        return;
    }
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("smelt: error: --bench cuda: no cell was timed (16 of 16); cell 100m s0:"),
        "{stderr}"
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["summary"]["time_ratio"]["failed_cells"], 16);
    assert!(v["cells"][0]["time_failed"].is_string());
}

/// An export never replaces the file it read (`smelt export DIR -o DIR`), nor, without
/// `--overwrite`, a file smelt did not write: a model directory's own `config.json` beside
/// its weights is named and kept, by `export`, `match --format hf` and `grid --export`
/// alike; smelt's own earlier export is replaced, and one edited since is the user's.
#[test]
fn exports_keep_inputs_and_files_smelt_did_not_write() {
    let dir = fresh_dir("keep");
    let model = dir.join("model");
    std::fs::create_dir_all(&model).unwrap();
    let config = common::data_text("hf/qwen3.5-35b-a3b.json");
    std::fs::write(model.join("config.json"), &config).unwrap();
    std::fs::write(model.join("model.safetensors"), "weights").unwrap();
    for overwrite in [&[][..], &["--overwrite"][..]] {
        let args = [&["export", s(&model), "-o", s(&model)][..], overwrite].concat();
        let (code, _, err) = run(&args);
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains("config.json: refusing to write: it is an input of this run"),
            "{err}"
        );
    }
    let (base, b) = (budget("base-200m-s95.toml"), budget("match-200m-s95.toml"));
    let hf = ["--format", "hf", "--vocab", "32000"];
    let refusals = [
        vec!["export", &base, "--vocab", "32000", "-o", s(&model)],
        [&["match", &b][..], &hf[..], &["-o", s(&model)][..]].concat(),
    ];
    for args in &refusals {
        let (code, _, err) = run(args);
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains("model/config.json: refusing to replace a file smelt did not write")
                && err.contains("--overwrite"),
            "{err}"
        );
        assert_eq!(
            std::fs::read_to_string(model.join("config.json")).unwrap(),
            config
        );
    }
    let (code, _, err) = run(&[&refusals[0][..], &["--overwrite"][..]].concat());
    assert_eq!(code, Some(0), "{err}");
    assert_ne!(
        std::fs::read_to_string(model.join("config.json")).unwrap(),
        config
    );
    assert_eq!(
        std::fs::read_to_string(model.join("model.safetensors")).unwrap(),
        "weights"
    );

    let grid = budget("smelt-grid.toml");
    let out = dir.join("grid");
    let export = ["grid", &grid, "--export", s(&out), "--vocab", "32000"];
    let (code, _, err) = run(&export);
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = run(&export);
    assert_eq!(code, Some(0), "smelt's own files are replaced: {err}");
    let cell = out.join("600m-s97/config.json");
    std::fs::write(&cell, "{\"edited\": true}").unwrap();
    let (code, _, err) = run(&export);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("600m-s97/config.json: refusing to replace"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&cell).unwrap(),
        "{\"edited\": true}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A budget's `[objective.time]` calibration is an input: `-o` onto it is refused, through
/// a link too, and so is `grid --plot` onto `--calibration`'s file and an export into the
/// folder where the calibration is the `config.json` (even with `--overwrite`).
#[test]
fn the_calibration_a_budget_reads_is_an_input() {
    let dir = fresh_dir("cal");
    let cal = common::data_text("calibration-cpu.json");
    std::fs::write(dir.join("cal.json"), &cal).unwrap();
    std::os::unix::fs::symlink("cal.json", dir.join("link.json")).unwrap();
    let folder = dir.join("folder");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("config.json"), &cal).unwrap();
    let small = common::SMALL_BUDGET.replace("@BUDGETS@", &common::budgets_dir());
    let budget_at = |calibration: &str| {
        let path = dir.join(format!("b-{}.toml", calibration.replace('/', "-")));
        let text = format!("{small}\n[objective.time]\ncalibration = \"{calibration}\"\n");
        std::fs::write(&path, text).unwrap();
        path
    };
    let b = budget_at("cal.json");
    for target in ["cal.json", "link.json"] {
        let out = dir.join(target);
        let (code, _, err) = run(&["match", s(&b), "--format", "json", "-o", s(&out)]);
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains("refusing to write: it is an input of this run"),
            "{err}"
        );
    }
    let b = budget_at("folder/config.json");
    let hf = [
        "match",
        s(&b),
        "--format",
        "hf",
        "--vocab",
        "32000",
        "-o",
        s(&folder),
    ];
    for overwrite in [&[][..], &["--overwrite"][..]] {
        let (code, _, err) = run(&[&hf[..], overwrite].concat());
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains("config.json: refusing to write: it is an input"),
            "{err}"
        );
    }
    let grid = budget("smelt-grid.toml");
    let plot = dir.join("cal.json");
    let args = [
        "grid",
        &grid,
        "--predict",
        "h200",
        "--calibration",
        s(&plot),
        "--plot",
        s(&plot),
    ];
    let (code, _, err) = run(&args);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("it is an input of this run"), "{err}");
    assert_eq!(std::fs::read_to_string(dir.join("cal.json")).unwrap(), cal);
    assert_eq!(
        std::fs::read_to_string(folder.join("config.json")).unwrap(),
        cal
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An export that cannot be written whole writes nothing: a grid whose last cell's folder
/// is taken by a file leaves no other cell behind, and a looped model directory whose
/// third file cannot be written leaves no `config.json` naming code that is missing.
#[test]
fn exports_are_written_all_or_nothing() {
    let dir = fresh_dir("whole");
    let out = dir.join("grid");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("1.6b-s97"), "a file where the last cell goes").unwrap();
    let grid = budget("smelt-grid.toml");
    let (code, _, err) = run(&["grid", &grid, "--export", s(&out), "--vocab", "32000"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("1.6b-s97: is not a directory"), "{err}");
    let left: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, ["1.6b-s97"], "no cell written");

    let looped = dir.join("looped");
    std::fs::create_dir_all(looped.join("modeling_smelt_looped.py")).unwrap();
    let b = budget("match-200m-s95.toml");
    let args = [
        "match",
        &b,
        "--format",
        "hf",
        "--vocab",
        "32000",
        "-o",
        s(&looped),
    ];
    let (code, _, err) = run(&args);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("modeling_smelt_looped.py: refusing to write: is a directory"),
        "{err}"
    );
    assert!(
        !looped.join("config.json").exists(),
        "no config.json without its code"
    );
    let names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        names
            .iter()
            .all(|n| !n.to_string_lossy().contains("smelt-stage")),
        "{names:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `smelt export DIR` exports the config.json in DIR in its own family (a Qwen3.5 model
/// directory was written as qwen3_next), a looped directory in the family it holds, and a
/// model file in the family whose conventions it follows, saying that `--hf-family` names
/// another (a Qwen3.5 model file is qwen3_next unless told).
#[test]
fn export_writes_the_family_it_read() {
    let dir = fresh_dir("family");
    let model = dir.join("qwen3.5");
    std::fs::create_dir_all(&model).unwrap();
    std::fs::write(
        model.join("config.json"),
        common::data_text("hf/qwen3.5-35b-a3b.json"),
    )
    .unwrap();
    let model_type = |out: &Path| -> String {
        let text = std::fs::read_to_string(out.join("config.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let v = v.get("text_config").unwrap_or(&v).clone();
        v["model_type"].as_str().unwrap().to_owned()
    };
    let out = dir.join("from-dir");
    let (code, _, err) = run(&["export", s(&model), "-o", s(&out)]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(model_type(&out), "qwen3_5_moe_text");

    let file = dir.join("qwen3.5.toml");
    let config = model.join("config.json");
    let (code, _, err) = run(&["import", s(&config), "-o", s(&file)]);
    assert_eq!(code, Some(0), "{err}");
    let out = dir.join("from-file");
    let (code, _, err) = run(&["export", s(&file), "-o", s(&out)]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(model_type(&out), "qwen3_next");
    assert!(
        err.contains("written as qwen3_next") && err.contains("qwen3_5_moe_text for a Qwen3.5"),
        "{err}"
    );
    let out = dir.join("named");
    let args = [
        "export",
        s(&file),
        "-o",
        s(&out),
        "--hf-family",
        "qwen3_5_moe_text",
    ];
    let (code, _, err) = run(&args);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(model_type(&out), "qwen3_5_moe_text");

    let looped = dir.join("looped");
    let b = budget("match-qwen1.5-moe-a2.7b.toml");
    let (code, _, err) = run(&["match", &b, "--format", "hf", "-o", s(&looped)]);
    assert!(matches!(code, Some(0) | Some(3)), "{err}");
    let out = dir.join("from-looped");
    let (code, _, err) = run(&["export", s(&looped), "-o", s(&out)]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(model_type(&out), "qwen2_moe");
    assert!(out.join("modeling_smelt_looped.py").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}
