//! Issue 38's remaining items, and the cases of a hostile pass over predict, grid shards,
//! merge, gain and the exports that failed before: each refused with a message naming what
//! to change, never a panic, never a figure no measurement could give.

use serde_json::{Value, json};

use crate::common::{budget, data, run, run_json, temp_file};

/// A model file imported from `config` (under `tests/data/hf/`), with `edits` applied to its
/// text (each `(from, to)` replaced once, and required to be there).
fn imported(config: &str, edits: &[(&str, &str)]) -> String {
    let (code, mut text, err) = run(&["import", &data(&format!("hf/{config}"))]);
    assert_eq!(code, Some(0), "{err}");
    for (from, to) in edits {
        assert!(text.contains(from), "{from} not in {text}");
        text = text.replacen(from, to, 1);
    }
    temp_file("toml", &text).display().to_string()
}

/// A Mamba-2 count past 64 bits names the budget, what it counts and the mixer's fields to
/// reduce (it said "arithmetic overflow computing flops.recurrent" and nothing else); so does
/// a Gated DeltaNet one.
#[test]
fn a_recurrent_overflow_names_the_budget_and_the_fields_to_reduce() {
    let mamba = imported(
        "nemotron-3-nano-30b-a3b.json",
        &[
            (
                "heads = 64\nhead_dim = 64",
                "heads = 64\nhead_dim = 1048576",
            ),
            ("state = 128", "state = 1048576"),
        ],
    );
    let (code, out, err) = run(&["cost", &mamba]);
    assert_eq!(code, Some(1), "{err}");
    assert!(out.is_empty() && !err.contains("panicked"), "{err}");
    for part in [
        "model.recurrent.mixer.mamba2: the FLOP budget of flops.recurrent",
        "of the Mamba-2 layers overflows 64 bits",
        "reduce model.recurrent.mixer.mamba2's state, head_dim or heads",
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    let deltanet = imported(
        "qwen3-next-80b-a3b.json",
        &[
            ("key_head_dim = 128", "key_head_dim = 1048576"),
            ("value_head_dim = 128", "value_head_dim = 1048576"),
        ],
    );
    let (code, _, err) = run(&["cost", &deltanet]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("model.recurrent.mixer.gated_deltanet: the")
            && err.contains("of the Gated DeltaNet layers overflows 64 bits")
            && err.contains("reduce model.recurrent.mixer.gated_deltanet's"),
        "{err}"
    );
}

/// Two shards of a two-cell grid timed on the CPU (and predicted on an H200).
fn shards() -> [Value; 2] {
    let grid = crate::common::two_cell_grid();
    let grid = grid.display().to_string();
    ["1/2", "2/2"].map(|k| {
        run_json(&[
            "grid",
            &grid,
            "--format",
            "json",
            "--bench",
            "cpu",
            "--shard",
            k,
            "--predict",
            "h200",
            "--mean-doc-len",
            "64",
            "--tokens",
            "128",
            "--rounds",
            "1",
            "-q",
        ])
    })
}

/// `smelt merge` of `parts` written to files: exit code, output, error.
fn merge(parts: &[Value]) -> (Option<i32>, String, String) {
    let paths: Vec<String> = (parts.iter())
        .map(|p| temp_file("json", &p.to_string()).display().to_string())
        .collect();
    let mut args = vec!["merge"];
    args.extend(paths.iter().map(String::as_str));
    run(&args)
}

/// `merge` refuses a cell timed on another backend than its shards' summaries, a ratio its
/// own seconds contradict, a predicted ratio that is not its seconds' quotient, and a cell its
/// shard times with neither a time nor a failure (dropped from the summary before); a mean
/// of ratios whose sum overflows is still a number (it was `null`).
#[test]
fn merge_refuses_shards_no_benchmark_wrote() {
    let [one, two] = shards();
    let (code, _, err) = merge(&[one.clone(), two.clone()]);
    assert_eq!(code, Some(0), "{err}");
    let refused = |edit: &dyn Fn(&mut Value, &mut Value), want: &[&str]| {
        let (mut a, mut b) = (one.clone(), two.clone());
        edit(&mut a, &mut b);
        let (code, out, err) = merge(&[a, b]);
        assert_eq!(code, Some(1), "{want:?}: {out}");
        for w in want {
            assert!(err.contains(w), "{w}: {err}");
        }
    };
    refused(
        &|a, _| a["cells"][0]["time"]["backend"] = json!("cuda"),
        &["cells[0].time.backend: is cuda, but the shards' summaries say cpu"],
    );
    refused(
        &|a, _| {
            let t = &mut a["cells"][0]["time"];
            t["ratio"] = json!(1e308);
            t["interval"] = json!([1e307, 1.5e308]);
        },
        &["cells[0].time: ratio 1e308 contradicts its own seconds per token"],
    );
    refused(
        &|a, _| {
            a["cells"][0].as_object_mut().unwrap().remove("time");
        },
        &["shard 1/2: cells[0]: is timed by this shard but has neither a time nor a failure"],
    );
    refused(
        &|a, _| a["cells"][0]["time_failed"] = json!("out of time"),
        &["shard 1/2: cells[0]: has both a time and a failure"],
    );
    // The predicted cells are every shard's: edited alike in both.
    refused(
        &|a, b| {
            for s in [a, b] {
                s["cells"][1]["predicted"]["ratio"] = json!(1e308);
            }
        },
        &["cells[1].predicted.ratio: 1e308 is not looped_seconds_per_token / baseline"],
    );
    // Ratios near the largest float, each agreeing with its seconds: the mean is a number.
    let (mut a, mut b) = (one.clone(), two.clone());
    for (s, i) in [(&mut a, 0), (&mut b, 1)] {
        let t = &mut s["cells"][i]["time"];
        t["ratio"] = json!(1e308);
        t["interval"] = json!([1e308, 1e308]);
        t["noisy"] = json!(false);
        t["baseline_seconds_per_token"] = json!(1e-300);
        t["looped_seconds_per_token"] = json!(1e8);
    }
    let (code, out, err) = merge(&[a, b]);
    assert_eq!(code, Some(0), "{err}");
    let merged: Value = serde_json::from_str(&out).unwrap();
    let s = &merged["summary"]["time_ratio"];
    assert_eq!(s["mean_ratio"].as_f64(), Some(1e308), "{s}");
    assert_eq!(s["max_ratio"].as_f64(), Some(1e308), "{s}");
}

/// Endpoints of `reference` (compute exponent `a`) and of a paper-like target, as a CSV.
fn endpoints(a: f64) -> String {
    use smelt::fit::data;
    let (mut reference, target) = data::paper_like_surfaces();
    reference.a = a;
    let flops = data::SYNTHETIC_FLOPS;
    let s = [0.85, 0.95, 0.97];
    let tokens = data::SYNTHETIC_TOKENS;
    let base = data::synthetic(&reference, &flops, &s, &tokens, 0.002, 1);
    let smelt = data::synthetic(&target, &flops, &s, &tokens, 0.002, 2);
    let csv = data::to_csv(&[("baseline", &base), ("smelt", &smelt)]);
    temp_file("csv", &csv).display().to_string()
}

/// A reference fit whose compute exponent is negative has no compute-optimal frontier: its
/// frontier loss was `null` and `gain` printed gains of −10^20 %; it is refused, naming the
/// fit, the exponent and what to do, and `fit` warns.
#[test]
fn gain_refuses_a_fit_without_a_compute_optimal_frontier() {
    let csv = endpoints(-0.5);
    let gain = |reference: &str, target: &str| {
        run(&[
            "gain",
            &csv,
            "--reference",
            reference,
            "--target",
            target,
            "--starts",
            "small",
            "-q",
        ])
    };
    let (code, out, err) = gain("baseline", "smelt");
    assert_eq!(code, Some(1), "{out}");
    for part in [
        "reference: 'baseline': the fitted exponent",
        "a = -0.5",
        "no compute-optimal frontier",
        "loss_reference",
        "add runs nearer the compute-optimal frontier",
    ] {
        assert!(err.contains(part), "{part}: {err}");
    }
    let (code, _, err) = gain("smelt", "baseline");
    assert_eq!(code, Some(1));
    assert!(
        err.contains("target: 'baseline'") && err.contains("loss_target"),
        "{err}"
    );
    let (code, out, err) = run(&["fit", &csv, "--group", "arch", "--starts", "small", "-q"]);
    assert_eq!(code, Some(0), "{err}");
    let words = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("warning (baseline): the fitted exponent")
            && words.contains("a = -0.5")
            && !words.contains("warning (smelt)"),
        "{out}"
    );
    // The same surfaces with a positive exponent: a gain, every figure a number.
    let csv = endpoints(0.3703);
    let (code, out, err) = run(&[
        "gain",
        &csv,
        "--reference",
        "baseline",
        "--target",
        "smelt",
        "--starts",
        "small",
        "--format",
        "json",
        "-q",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    for row in v["rows"].as_array().unwrap() {
        for key in ["gain", "loss_reference", "loss_target"] {
            assert!(
                row[key].as_f64().is_some_and(f64::is_finite),
                "{key}: {row}"
            );
        }
    }
}

/// The router a model states is one its family's Transformers class builds, or the export
/// is refused, naming the families that build it; a stated router is written where the
/// family has the key (`norm_topk_prob`).
#[test]
fn an_export_refuses_a_router_its_family_does_not_build() {
    let out = temp_file("d", "").with_extension("router");
    let _ = std::fs::remove_dir_all(&out);
    let o = out.display().to_string();
    // Mixtral keeps its renormalised weights in float32: a plain softmax is another model.
    let mixtral = imported(
        "mixtral-8x7b-v0.1.json",
        &[(
            "router = \"softmax_renormalised_fp32\"",
            "router = \"softmax\"",
        )],
    );
    let (code, _, err) = run(&["export", &mixtral, "-o", &o]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("model.moe.router: is \"softmax\", but mixtral's Transformers class")
            && err.contains("builds router = \"softmax_renormalised_fp32\"")
            && err.contains(
                "export a family that builds it (qwen2_moe, qwen3_moe, olmoe, qwen3_next)"
            ),
        "{err}"
    );
    assert!(!out.exists(), "nothing written");
    // DeepSeek-V3's router is its group-limited sigmoid, not DeepSeek-V2's softmax.
    let deepseek = imported(
        "deepseek-v3.json",
        &[(
            "router = \"sigmoid_grouped_renormalised_fp32\"",
            "router = \"softmax_grouped_fp32\"",
        )],
    );
    let (code, _, err) = run(&["export", &deepseek, "-o", &o]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains(
            "model.moe.router: is \"softmax_grouped_fp32\", but deepseek_v3's Transformers \
             class (DeepseekV3ForCausalLM) builds router = "
        ) && err.contains("\"sigmoid_grouped_renormalised_fp32\"")
            && err.contains("export a family that builds it (deepseek_v2)")
            && err.contains("or remove the line"),
        "{err}"
    );
    // Qwen3-MoE builds both softmax routers, written as its norm_topk_prob.
    for (router, renorm) in [("softmax", false), ("softmax_renormalised", true)] {
        let qwen = imported(
            "qwen3-30b-a3b.json",
            &[(
                "router = \"softmax_renormalised\"",
                &format!("router = \"{router}\""),
            )],
        );
        let _ = std::fs::remove_dir_all(&out);
        let (code, _, err) = run(&["export", &qwen, "-o", &o]);
        assert_eq!(code, Some(0), "{err}");
        let config: Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("config.json")).unwrap())
                .unwrap();
        assert_eq!(config["norm_topk_prob"], json!(renorm));
    }
}

/// The parallel flags of `predict --global-batch` multiplied unchecked (a panic: "attempt to
/// multiply with overflow"); each degree is bounded, and a layout whose product is too large
/// for the GPUs given is refused naming `gpus`.
#[test]
fn predict_refuses_parallel_degrees_past_their_bound() {
    let model = budget("base-200m-s95.toml");
    let step = [
        "predict",
        model.as_str(),
        "--card",
        "h200",
        "--global-batch",
        "8",
    ];
    let (code, _, err) = run(&[
        &step[..],
        &["--tp", "4294967296", "--pp", "4294967296", "--gpus", "8"],
    ]
    .concat());
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--tp") && err.contains("1..=1048576"), "{err}");
    let big = "1048576";
    let (code, _, err) = run(&[
        &step[..],
        &[
            "--tp", big, "--pp", big, "--cp", big, "--dp", big, "--gpus", "8",
        ],
    ]
    .concat());
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("gpus: must equal tp · pp · cp · dp (1208925819614629174706176); got 8"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let (code, _, err) = run(&[&step[..4], &["--global-batch", "1099511627776"]].concat());
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("1..=4294967296"), "{err}");
}

/// Numbers out of range on the device and timing flags are refused by their own rule, where
/// they were taken for flags (`-1`), turned into `inf` before the check ("got inf"), or let
/// through to fail every cell after the search (`--max-seconds nan`).
#[test]
fn device_and_timing_numbers_are_refused_by_their_rule() {
    let model = budget("base-200m-s95.toml");
    let cases: [(&[&str], &str); 6] = [
        (
            &["--card", "h200", "--launch-us", "-1"],
            "'-1' is not a number of microseconds",
        ),
        (&["--peak", "1e308", "--bandwidth", "3"], "got 1e308"),
        (&["--peak", "-5", "--bandwidth", "3"], "got -5"),
        (
            &["--card", "h200", "--bandwidth", "1e300"],
            "TB/s (1 MB/s to 1 EB/s); got 1e300",
        ),
        (&["--card", "h200", "--bandwidth", "-1"], "got -1"),
        (&["--peak", "100", "--bandwidth", "1e-300"], "got 1e-300"),
    ];
    for (flags, want) in cases {
        let (code, _, err) = run(&[&["predict", model.as_str()][..], flags].concat());
        assert_eq!(code, Some(2), "{flags:?}: {err}");
        assert!(
            err.contains(want) && !err.contains("got inf"),
            "{flags:?}: {err}"
        );
    }
    let grid = budget("smelt-grid.toml");
    for (value, want) in [
        ("nan", "'nan' is not a positive number of seconds"),
        ("-1", "'-1' is not a positive number of seconds"),
        ("inf", "'inf' is not a positive number of seconds"),
    ] {
        let (code, out, err) = run(&["grid", &grid, "--bench", "cpu", "--max-seconds", value]);
        assert_eq!(code, Some(2), "{value}: {err}");
        assert!(out.is_empty() && err.contains(want), "{value}: {err}");
    }
}

/// With the time weighed 3 on the 1-million-point 200M lattice the match ran past 15 minutes
/// (every routable expert count predicted); it predicts a few hundred models now. The count,
/// not the time, is checked: it is what the branch and bound keeps small.
#[test]
fn a_time_weighted_match_predicts_few_models() {
    let text = std::fs::read_to_string(budget("match-200m-s95.toml")).unwrap();
    let text = text.replace(
        "baseline = \"base-200m-s95.toml\"",
        &format!("baseline = \"{}\"", budget("base-200m-s95.toml")),
    ) + "\n[objective.weights]\ntime = 3.0\n\n[objective.time]\ncard = \"h200-sxm\"\n";
    let path = temp_file("toml", &text);
    // The time weighed this much breaks the other tolerances (exit 3): the JSON is written.
    let (code, out, err) = run(&["match", path.to_str().unwrap(), "--format", "json", "-q"]);
    assert_eq!(code, Some(3), "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    let lattice = &v["lattice"];
    assert!(
        lattice["lattice_points"].as_u64().unwrap() > 1_000_000,
        "{lattice}"
    );
    assert!(lattice["predicted"].as_u64().unwrap() < 10_000, "{lattice}");
}
