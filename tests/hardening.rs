//! Issue 38's hostile inputs on predict, calibrate, bench, merge, import and the exports:
//! each refused with a message naming what to change, before any work where an output
//! would replace an input; never a panic.

use std::path::Path;

use crate::common::{budget, data, run, temp_file};

/// A change made to a file's JSON before it is read.
type Edit = fn(&mut serde_json::Value);

/// A fresh empty folder under the target directory.
fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = temp_file("d", "").with_extension(tag);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A model at every width and count limit: within each field's bound, its counts past 64
/// bits.
const TOO_LARGE: &str = r#"name = "too-large"
[model]
layers = 65536
hidden = 1048576
heads = 65536
kv_heads = 65536
head_dim = 1048576
[model.moe]
experts = 1048576
top_k = 65536
expert_ffn = 1048576
[workload]
context = 16777216
mean_doc_len = 16777216
attention = "causal"
kv_dtype_bytes = 2
"#;

#[test]
fn predict_refuses_a_model_too_large_to_count_as_cost_does() {
    let path = temp_file("toml", TOO_LARGE);
    let path = path.to_str().unwrap();
    let (code, _, cost_err) = run(&["cost", path]);
    assert_eq!(code, Some(1), "{cost_err}");
    for args in [
        vec!["predict", path, "--card", "h200"],
        vec!["predict", path, "--card", "h200", "--attention", "unfused"],
    ] {
        let (code, out, err) = run(&args);
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(out.is_empty() && !err.contains("panicked"), "{err}");
        assert!(
            err.contains("too large to count exactly in 64 bits"),
            "{err}"
        );
    }
}

/// A single document of 2^24 tokens (the context's limit) has 2^17 key blocks; its tiles
/// are counted per query block, not walked pair by pair (the property test in `bench.rs`
/// checks the counts), so the prediction is made at all.
#[test]
fn predict_takes_a_document_at_the_context_limit() {
    let text = std::fs::read_to_string(budget("base-200m-s95.toml"))
        .unwrap()
        .replace("context = 4096", "context = 16777216")
        .replace("mean_doc_len = 991", "mean_doc_len = 16777216");
    let path = temp_file("toml", &text);
    let (code, out, err) = run(&["predict", path.to_str().unwrap(), "--card", "h200"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("16777216 tokens"), "{out}");
}

#[test]
fn import_reads_a_model_directorys_config_json() {
    let dir = temp_dir("import");
    std::fs::copy(data("hf/deepseek-v3.json"), dir.join("config.json")).unwrap();
    let (code, from_dir, err) = run(&["import", dir.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    let file = dir.join("config.json");
    let (code, from_file, err) = run(&["import", file.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(from_dir, from_file);
    // A folder without one is an error naming the file looked for.
    let empty = temp_dir("import-empty");
    let (code, _, err) = run(&["import", empty.to_str().unwrap()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("config.json"), "{err}");
}

/// An output that would replace an input is refused before the run's work: `export DIR -o
/// DIR` before the config is read, `match --format hf -o DIR` before the search (no
/// "solved in" note), `grid --export` and `sweep --export` before the cells are solved.
#[test]
fn an_output_over_an_input_is_refused_before_the_work() {
    let dir = temp_dir("export-self");
    let config = dir.join("config.json");
    std::fs::copy(data("hf/deepseek-v3.json"), &config).unwrap();
    let before = std::fs::read(&config).unwrap();
    let d = dir.to_str().unwrap();
    let (code, _, err) = run(&["export", d, "-o", d]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("an input of this run"), "{err}");
    assert_eq!(std::fs::read(&config).unwrap(), before);
    // A match whose Baseline is the config.json of the folder its export goes into.
    let dir = temp_dir("match-self");
    std::fs::copy(data("hf/gpt-oss-120b.json"), dir.join("config.json")).unwrap();
    let text = std::fs::read_to_string(budget("match-gpt-oss-120b.toml"))
        .unwrap()
        .replace("../tests/data/hf/gpt-oss-120b.json", "config.json");
    let b = dir.join("budget.toml");
    std::fs::write(&b, text).unwrap();
    let before = std::fs::read(dir.join("config.json")).unwrap();
    let (code, _, err) = run(&[
        "match",
        b.to_str().unwrap(),
        "--format",
        "hf",
        "-o",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("an input of this run"), "{err}");
    assert!(!err.contains("solved in"), "{err}");
    assert_eq!(std::fs::read(dir.join("config.json")).unwrap(), before);
    // A grid's folder (its budgets and Baselines) as its export folder in model format
    // (NAME.toml files).
    let dir = temp_dir("grid-self");
    for entry in std::fs::read_dir(crate::common::budgets_dir()).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
    }
    let grid = dir.join("smelt-grid.toml");
    let (code, out, err) = run(&[
        "grid",
        grid.to_str().unwrap(),
        "--export",
        dir.to_str().unwrap(),
        "--export-format",
        "model",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("--export") && err.contains("an input of this run"),
        "{err}"
    );
    assert!(!dir.join(".smelt-export").exists());
    // In hf format the same folder holds no input of a name the export writes: allowed.
    let writes = |f: &Path| smelt::export::may_write(smelt::export::ExportFormat::Hf, f);
    let inputs = [grid.clone()];
    assert!(smelt::io::refuse_inputs(&dir, &inputs, Some(&writes)).is_ok());
    let model = |f: &Path| smelt::export::may_write(smelt::export::ExportFormat::Model, f);
    assert!(smelt::io::refuse_inputs(&dir, &inputs, Some(&model)).is_err());
}

/// `smelt calibrate` refuses what it cannot fit (a kernel shape near 2^64, times that put a
/// kernel at 10^290 of the peak, no timed kernel, a device name with control characters)
/// with the field and the rule, and `predict` refuses a calibration file with absurd
/// constants by the same check, so a file calibrate writes is one predict reads.
#[test]
fn calibrations_with_absurd_constants_are_refused_where_written_and_read() {
    let (code, bench, err) = run(&[
        "bench",
        &budget("base-100m-s0.toml"),
        "--rounds",
        "1",
        "--tokens",
        "64",
        "--format",
        "json",
        "--quiet",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let bench: serde_json::Value = serde_json::from_str(&bench).unwrap();
    let cases: [(&str, Edit, &str); 4] = [
        (
            "a shape near 2^64",
            |b| b["models"][0]["kernels"][0]["kernel"]["m"] = u64::MAX.into(),
            "kernel.m: must be at most 1099511627776",
        ),
        (
            "times of 1e-300 s",
            |b| {
                for k in b["models"][0]["kernels"].as_array_mut().unwrap() {
                    k["seconds"] = 1e-300.into();
                }
            },
            "efficiencies (shares of the peak) between 1e-7 and 4",
        ),
        (
            "no timed kernel",
            |b| b["models"][0]["kernels"] = serde_json::json!([]),
            "times no kernel",
        ),
        (
            "a control character",
            |b| b["device"] = "gpu\u{1b}[2J".into(),
            "device.name: must not contain control characters (got \"gpu\\u{1b}[2J\")",
        ),
    ];
    for (what, edit, rule) in cases {
        let mut b = bench.clone();
        edit(&mut b);
        let file = temp_file("json", &b.to_string());
        let out = file.with_extension("cal.json");
        let (code, _, err) = run(&[
            "calibrate",
            file.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
        ]);
        assert_eq!(code, Some(1), "{what}: {err}");
        assert!(
            err.contains(rule) && !err.contains('\u{1b}'),
            "{what}: {err}"
        );
        assert!(!out.exists(), "{what}");
    }
    // What calibrate writes, predict reads.
    let file = temp_file("json", &bench.to_string());
    let cal = file.with_extension("cal.json");
    let (code, _, err) = run(&[
        "calibrate",
        file.to_str().unwrap(),
        "-o",
        cal.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let base = budget("base-100m-s0.toml");
    let (code, _, err) = run(&["predict", &base, "--calibration", cal.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    // A calibration file edited to absurd constants is refused by predict, naming the field.
    let good: serde_json::Value =
        serde_json::from_str(&crate::common::data_text("calibration-cpu.json")).unwrap();
    let cases: [(Edit, &str); 6] = [
        (|c| c["curves"]["gemm"][0][1] = 1e300.into(), "curves.gemm"),
        (|c| c["curves"]["gemm"][0][1] = 1e-300.into(), "curves.gemm"),
        (
            |c| c["traffic"]["seconds_per_byte"] = 1e300.into(),
            "traffic.seconds_per_byte",
        ),
        (
            |c| c["traffic"]["seconds_per_flop"] = 5e-324.into(),
            "traffic.seconds_per_flop",
        ),
        (|c| c["shapes"] = 0.into(), "shapes"),
        (|c| c["device"]["name"] = "a\u{7}".into(), "device.name"),
    ];
    for (edit, field) in cases {
        let mut c = good.clone();
        edit(&mut c);
        let file = temp_file("json", &c.to_string());
        let (code, out, err) = run(&["predict", &base, "--calibration", file.to_str().unwrap()]);
        assert_eq!(code, Some(1), "{field}: {err}");
        assert!(
            out.is_empty() && err.contains(&format!("{field}:")),
            "{err}"
        );
        assert!(!err.contains('\u{7}'), "{err}");
    }
}

/// A CPU bench whose operands the machine cannot allocate (here: an address space limited to
/// 1.5 GB) is refused naming --tokens, not aborted by a failed allocation.
#[cfg(unix)]
#[test]
fn a_bench_too_large_for_the_machine_is_refused_naming_the_flag() {
    let smelt = assert_cmd::cargo::cargo_bin("smelt");
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 1500000 && exec '{}' bench '{}' --rounds 1 --tokens 131072 --quiet",
            smelt.display(),
            budget("base-600m-s0.toml")
        ))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("tokens:") && err.contains("use fewer --tokens"),
        "{err}"
    );
}
