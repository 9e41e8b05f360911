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
