//! What the command line reads, refused with what to do instead: a file of the wrong kind
//! named as what it is, a Baseline path named as it was resolved, renamed flags naming
//! their new names, and Hugging Face configs whose keys are missing or contradict.

use crate::common;

use common::{budget, run};

/// Runs `smelt args`: exit 1 and `needle` on standard error.
fn fails_with(args: &[&str], needle: &str) {
    let (code, stdout, stderr) = run(args);
    assert_eq!(code, Some(1), "{args:?}: {stdout} {stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: expected {needle:?} in: {stderr}"
    );
}

/// A budget given to `cost` or `export`, a model file to `match` or `grid`, a grid to
/// `match` or `cost`, a budget to `grid`: each is named as what it is, by the key that shows
/// it, with the commands that read it, never a raw "unknown field".
#[test]
fn a_file_of_the_wrong_kind_is_named() {
    let (b, m, g) = (
        budget("match-200m-s95.toml"),
        budget("base-200m-s95.toml"),
        budget("smelt-grid.toml"),
    );
    let out = common::temp_file("d", "").with_extension("out");
    let as_budget = "baseline: belongs in a budget file (smelt match, sweep); a model file";
    let as_model = "model: belongs in a model file (smelt cost, export, bench, predict)";
    let as_grid = "belongs in a grid file (smelt grid)";
    for (args, needle) in [
        (vec!["cost", &b], as_budget),
        (vec!["export", &b, "-o", out.to_str().unwrap()], as_budget),
        (vec!["match", &m], as_model),
        (vec!["grid", &m], as_model),
        (vec!["match", &g], as_grid),
        (vec!["cost", &g], as_grid),
        (vec!["grid", &b], "baseline: belongs in a budget file"),
    ] {
        fails_with(&args, needle);
        let (_, _, err) = run(&args);
        assert!(!err.contains("unknown field"), "{err}");
    }
    assert!(!out.exists());
}

/// A budget copied away from its Baseline names the path it tried, absolute, and says that
/// the Baseline's path is taken relative to the budget file.
#[test]
fn a_missing_baseline_names_the_resolved_path() {
    let dir = common::temp_file("d", "").with_extension("copied");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(budget("match-200m-s95.toml"), dir.join("budget.toml")).unwrap();
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("smelt"))
        .args(["match", "budget.toml"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{err}");
    let tried = dir.join("base-200m-s95.toml");
    assert!(
        err.contains(&format!("cannot read model file '{}'", tried.display()))
            && err.contains("\"base-200m-s95.toml\" is taken relative to the folder of the file"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Timed rounds are `--rounds` in every timing command; `--repeats` there (which names a
/// loop's executions elsewhere) is a usage error naming `--rounds`. `sweep --repeats` is
/// still the loop's knob.
#[test]
fn timing_rounds_are_rounds_and_repeats_is_refused_there() {
    let (b, m, g) = (
        budget("match-200m-s95.toml"),
        budget("base-100m-s0.toml"),
        budget("smelt-grid.toml"),
    );
    for args in [
        vec!["bench", &m, "--repeats", "3"],
        vec!["match", &b, "--bench", "cpu", "--repeats", "3"],
        vec!["grid", &g, "--bench", "cpu", "--repeats", "3"],
    ] {
        let (code, stdout, err) = run(&args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(stdout.is_empty());
        assert!(
            err.contains("--repeats is now --rounds here") && err.contains("--rounds 3"),
            "{err}"
        );
    }
    let (code, _, err) = run(&["bench", &m, "--rounds", "0"]);
    assert_eq!(code, Some(2), "{err}");
    let (_, help, _) = run(&["bench", "--help"]);
    assert!(
        help.contains("--rounds <N>") && !help.contains("--repeats"),
        "{help}"
    );
}

/// A config missing a key its family needs names the family (every family's reader passes
/// through one place); a loop key of a looped model directory is named as its config.json
/// spells it (`loop_span`, not the internal `smelt_loop_span`).
#[test]
fn hf_errors_name_the_family_and_the_file_keys() {
    let mut glm: serde_json::Value =
        serde_json::from_str(&common::data_text("hf/glm-5.json")).unwrap();
    glm.as_object_mut().unwrap().remove("kv_lora_rank");
    let path = common::temp_file("json", &glm.to_string());
    fails_with(
        &["cost", path.to_str().unwrap()],
        "config.json: kv_lora_rank: missing: a glm_moe_dsa config gives it",
    );

    let dir = common::temp_file("d", "").with_extension("looped");
    let b = budget("match-qwen1.5-moe-a2.7b.toml");
    let (code, _, err) = run(&[
        "match",
        &b,
        "--format",
        "hf",
        "-o",
        dir.to_str().unwrap(),
        "-q",
    ]);
    assert!(matches!(code, Some(0) | Some(3)), "{err}");
    let config = dir.join("config.json");
    let written: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    for (value, needle) in [
        (
            serde_json::json!(0),
            "config.json: loop_span: must be at least 1",
        ),
        (
            serde_json::json!("x"),
            "config.json: loop_span: invalid type",
        ),
    ] {
        let mut c = written.clone();
        c["loop_span"] = value;
        std::fs::write(&config, c.to_string()).unwrap();
        fails_with(&["cost", dir.to_str().unwrap()], needle);
        let (_, _, err) = run(&["cost", dir.to_str().unwrap()]);
        assert!(!err.contains("smelt_loop"), "{err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The routed experts' count under two names Transformers' config class reads as one
/// (`n_routed_experts` and its alias `num_local_experts`, for Nemotron-H and GLM-5) is
/// refused when the two differ, naming both and the count Transformers builds; the alias
/// alone is the count; equal counts are one.
#[test]
fn two_names_for_the_expert_count_are_refused_when_they_differ() {
    for (file, count) in [
        ("hf/glm-5.json", 256),
        ("hf/nemotron-3-nano-30b-a3b.json", 128),
    ] {
        let config: serde_json::Value = serde_json::from_str(&common::data_text(file)).unwrap();
        let with = |f: &dyn Fn(&mut serde_json::Map<String, serde_json::Value>)| {
            let mut c = config.clone();
            f(c.as_object_mut().unwrap());
            common::temp_file("json", &c.to_string())
        };
        let both = with(&|c| {
            c.insert("num_local_experts".into(), 64.into());
        });
        fails_with(
            &["cost", both.to_str().unwrap()],
            &format!("n_routed_experts: is {count}, but num_local_experts is 64"),
        );
        let (_, _, err) = run(&["cost", both.to_str().unwrap()]);
        assert!(err.contains("config class builds 64 experts"), "{err}");
        let same = with(&|c| {
            c.insert("num_local_experts".into(), count.into());
        });
        let alias = with(&|c| {
            let n = c.remove("n_routed_experts").unwrap();
            c.insert("num_local_experts".into(), n);
        });
        for path in [same, alias] {
            let (code, text, err) = run(&["import", path.to_str().unwrap()]);
            assert_eq!(code, Some(0), "{err}");
            let v: toml::Value = toml::from_str(&text).unwrap();
            assert_eq!(
                v["model"]["moe"]["experts"].as_integer(),
                Some(count),
                "{file}"
            );
        }
    }
}
