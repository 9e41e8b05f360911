//! The loop's wall-clock price: a looped model's training step (`smelt::time::step`),
//! `grid --predict CARD --global-batch N` (each cell's step ratio and its drivers) and
//! `gain --time-ratio` (the wall-clock gain beside the compute gain).

use smelt::study::StepBasis;
use smelt::time::Card;
use smelt::time::step::{Dispatcher, Framework, Recompute, StepPrediction, predict_step};
use smelt::{Loop, ModelSpec, Training};

use crate::common::{budget, run, run_json, temp_file};

fn spec(name: &str) -> ModelSpec {
    ModelSpec::from_toml_str(&std::fs::read_to_string(budget(name)).unwrap()).unwrap()
}

/// The 200M Baseline with its middle six layers run `repeats` times.
fn looped(repeats: u64) -> ModelSpec {
    let mut s = spec("base-200m-s95.toml");
    s.model.looping = Some(Loop {
        first: 4,
        span: 6,
        repeats,
        residual_scale: None,
    });
    s
}

fn layout(pp: u64, dp: u64, ep: u64, micro_batch: u64) -> Training {
    Training {
        pp,
        dp,
        ep,
        micro_batch,
        ..Training::default()
    }
}

fn step(s: &ModelSpec, t: Training, global_batch: u64) -> smelt::Result<StepPrediction> {
    let basis = StepBasis::new(
        Card::H100Sxm,
        (None, smelt::study::LayoutSource::Flags),
        global_batch,
        Recompute::Selective,
        Framework::MegatronCore,
        Dispatcher::AllToAll,
    )?;
    predict_step(s, &basis.request(s, t))
}

/// A loop that runs its block once is no loop: the same prediction as the unlooped model,
/// on every layout (one stage or several, the loop inside a stage or across).
#[test]
fn a_loop_run_once_predicts_as_the_unlooped_model() {
    let base = spec("base-200m-s95.toml");
    for (pp, dp, ep) in [(1, 8, 8), (2, 4, 4), (3, 2, 2), (4, 8, 8)] {
        let t = layout(pp, dp, ep, 2);
        let once = step(&looped(1), t, 64).unwrap();
        let plain = step(&base, t, 64).unwrap();
        assert_eq!(once.step_seconds, plain.step_seconds, "pp {pp}");
        assert_eq!(once.micro_batch, plain.micro_batch);
        assert!(once.pipeline.is_none());
    }
}

/// Two visits cost more than one, and three more than two: each visit runs its kernels,
/// its all-to-alls and its host launches again, while the shared weights' optimizer step
/// and data-parallel traffic stay those of one copy.
#[test]
fn each_visit_costs_its_kernels_and_all_to_alls_not_its_weights() {
    let t = layout(1, 8, 8, 4);
    let [one, two, three] = [1, 2, 3].map(|r| step(&looped(r), t, 256).unwrap());
    assert!(one.step_seconds < two.step_seconds && two.step_seconds < three.step_seconds);
    for (a, b) in [(&one, &two), (&two, &three)] {
        assert!(a.micro_batch.ep_comm < b.micro_batch.ep_comm);
        assert!(a.micro_batch.experts < b.micro_batch.experts);
        assert!(a.micro_batch.host < b.micro_batch.host);
        assert_eq!(a.optimizer, b.optimizer);
        assert_eq!(a.dp_comm, b.dp_comm);
    }
    // The all-to-all is per layer execution: 12, 18 and 24 executions.
    let per = |s: &StepPrediction, n: f64| s.micro_batch.ep_comm / n;
    assert!((per(&one, 12.0) / per(&three, 24.0) - 1.0).abs() < 1e-12);
    // One stage: the loop runs there, nothing is imbalanced.
    let p = two.pipeline.as_ref().unwrap();
    assert_eq!((p.stage_executions.clone(), p.imbalance), (vec![18], 0.0));
}

/// Across stages the loop sits on one of them, the split the one whose largest stage has
/// the fewest layer executions; the uneven stages cost an imbalance the prediction reports,
/// and the memory verdict (which assumes the even split) is not given.
#[test]
fn the_loop_sits_on_one_stage_and_the_imbalance_is_reported() {
    let two = looped(2);
    let s = step(&two, layout(2, 4, 4, 2), 64).unwrap();
    let p = s.pipeline.as_ref().unwrap();
    assert_eq!(p.stage_layers.iter().sum::<u64>(), 12);
    assert_eq!(p.stage_executions.iter().sum::<u64>(), 18);
    // Layers 4-9 looped: no split of 12 layers keeps them whole with fewer than 15
    // executions on a stage (layers 1-3 or 10-12 alone make the other 15).
    assert_eq!(*p.stage_executions.iter().max().unwrap(), 15);
    assert_eq!(p.stage_layers[p.loop_stage.unwrap() as usize - 1], 9);
    assert!(p.imbalance > 0.0 && !p.even);
    // The step is m times the slowest stage plus the rest of the stages once.
    let m = s.micro_batches as f64;
    let (max, sum) = (
        p.stage_seconds.iter().copied().fold(0.0, f64::max),
        p.stage_seconds.iter().sum::<f64>(),
    );
    let pipe = m * max + (sum - max);
    assert!((s.step_seconds - (pipe + s.optimizer + s.dp_comm)).abs() < 1e-12 * s.step_seconds);
    // Through the command line: the placement is said, the memory verdict withheld.
    let text = std::fs::read_to_string(budget("base-200m-s95.toml")).unwrap();
    let looped_file = temp_file(
        "toml",
        &format!("{text}\n[model.loop]\nfirst = 4\nspan = 6\nrepeats = 2\n"),
    );
    let args = |extra: &[&str]| {
        let mut a = vec![
            "predict",
            looped_file.to_str().unwrap(),
            "--card",
            "h100",
            "--global-batch",
            "64",
            "--dp",
            "4",
            "--ep",
            "4",
        ];
        a.extend_from_slice(extra);
        a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let (code, out, err) = run_strs(&args(&["--pp", "2"]));
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("loop on pipeline stage 1 of 2"), "{out}");
    assert!(
        out.contains("memory: not checked (the loop's pipeline split (9/3"),
        "{out}"
    );
    // More stages than the loop leaves units for, and interleaving, are refused by name.
    let (code, _, err) = run_strs(&args(&["--pp", "8"]));
    assert_eq!(code, Some(1));
    assert!(
        err.contains("training.pp") && err.contains("at most 7 stages"),
        "{err}"
    );
    let (code, _, err) = run_strs(&args(&["--pp", "2", "--vp", "2"]));
    assert_eq!(code, Some(1));
    assert!(err.contains("training.vp"), "{err}");
}

fn run_strs(args: &[String]) -> (Option<i32>, String, String) {
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&refs)
}

const GRID_FLAGS: [&str; 10] = [
    "--predict",
    "h100",
    "--global-batch",
    "256",
    "--ep",
    "8",
    "--dp",
    "8",
    "--micro-batch",
    "4",
];

/// Every cell predicted: finite ratios equal to the step seconds' ratio, drivers adding up
/// to `ratio − 1`, the summary their largest and mean; the table, Markdown and CSV.
#[test]
fn the_grid_predicts_each_cells_training_step() {
    let grid = budget("smelt-grid.toml");
    let mut args = vec!["grid", grid.as_str(), "--format", "json", "--quiet"];
    args.extend(GRID_FLAGS);
    let j = run_json(&args);
    let st = &j["step_time"];
    assert_eq!(st["basis"]["card"], "h100-sxm");
    assert_eq!(st["basis"]["layout_source"], "flags");
    assert_eq!(st["basis"]["training"]["ep"], 8);
    // The roofline's column is not computed beside it.
    assert!(j["cells"][0].get("predicted").is_none());
    let cells = st["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 16);
    let mut ratios = Vec::new();
    for c in cells {
        let secs = |who: &str| c[who]["step"]["step_seconds"].as_f64().unwrap();
        let r = c["ratio"].as_f64().unwrap();
        assert!(r.is_finite() && r > 0.0);
        assert!(
            (r - secs("looped") / secs("baseline")).abs() <= 1e-12 * r,
            "{c}"
        );
        let d = &c["drivers"];
        let sum: f64 = ["experts", "all_to_all", "host", "imbalance", "other"]
            .iter()
            .map(|k| d[k].as_f64().unwrap())
            .sum();
        assert!((sum - (r - 1.0)).abs() < 1e-9, "{d} vs {r}");
        assert!(c["flops_per_token"].as_f64().unwrap() > 0.0);
        assert!(c["flop_ratio"].as_f64().unwrap() > 0.0);
        ratios.push(r);
    }
    let max = ratios.iter().copied().fold(0.0, f64::max);
    assert_eq!(st["max_ratio"].as_f64().unwrap(), max);
    assert_eq!(st["predicted_cells"], 16);
    // The human formats: the grid, then the step table; CSV writes the step table.
    let mut args = vec!["grid", grid.as_str(), "--quiet"];
    args.extend(GRID_FLAGS);
    let (code, out, err) = run(&args);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("smelt-grid (two-sided mode") && out.contains("Training step on h100-sxm")
    );
    assert!(
        out.contains("largest step-time ratio") && !out.contains("P ratio"),
        "{out}"
    );
    args.extend(["--format", "csv"]);
    let (_, csv, _) = run(&args);
    let header = csv.lines().next().unwrap();
    assert!(
        header.starts_with("cell,Baseline step,looped step,ratio"),
        "{header}"
    );
    assert_eq!(csv.lines().count(), 17);
}

/// A cell whose looped model does not fit a GPU where its Baseline does is flagged, in the
/// JSON and under the table; the flag is read from the two memory verdicts the JSON carries.
#[test]
fn a_looped_model_that_loses_the_fit_is_flagged() {
    let grid = budget("smelt-grid.toml");
    let args = [
        "grid",
        &grid,
        "--predict",
        "h100",
        "--global-batch",
        "256",
        "--gpus",
        "16",
        "--ep",
        "8",
        "--micro-batch",
        "8",
        "--quiet",
    ];
    let j = run_json(&[&args[..], &["--format", "json"]].concat());
    let verdict =
        |m: &serde_json::Value| m["step"]["memory"]["verdict"].as_str().unwrap().to_owned();
    let mut flagged = Vec::new();
    for c in j["step_time"]["cells"].as_array().unwrap() {
        let loses = verdict(&c["baseline"]) == "fits" && verdict(&c["looped"]) == "does_not_fit";
        assert_eq!(
            c["looped_does_not_fit"].as_bool().unwrap_or(false),
            loses,
            "{c}"
        );
        if loses {
            flagged.push(format!(
                "{} {}",
                c["scale"].as_str().unwrap(),
                c["sparsity_label"].as_str().unwrap()
            ));
        }
    }
    assert!(
        !flagged.is_empty(),
        "no cell loses the fit at micro-batch 8"
    );
    let (code, text, err) = run(&args);
    assert_eq!(code, Some(0), "{err}");
    // The verdict counts the step's recomputation: with full recomputation every peak is
    // lower and no cell loses the fit.
    let full = run_json(&[&args[..], &["--format", "json", "--recompute", "full"]].concat());
    let peak =
        |c: &serde_json::Value, who: &str| c[who]["step"]["memory"]["peak_bytes"].as_f64().unwrap();
    let cells = |j: &serde_json::Value| j["step_time"]["cells"].as_array().unwrap().clone();
    for (c, f) in cells(&j).iter().zip(cells(&full)) {
        assert!(f.get("looped_does_not_fit").is_none(), "{f}");
        for who in ["baseline", "looped"] {
            assert!(peak(&f, who) < peak(c, who), "{who}: {f}");
        }
    }
    let line = format!(
        "the looped model does not fit where its Baseline does: {}",
        flagged.join(", ")
    );
    assert!(text.replace("\n  ", " ").contains(&line), "{text}");
}

/// DeepSeek-V3 at its published pipeline split (PP16 over 61 layers: 4 on the first stage,
/// 1 on the last, Megatron's `decoder_first/last_pipeline_num_layers`): the step runs those
/// stages, within the 216-250 TFLOP/s/GPU published for it on H100, with a memory verdict
/// on the same split; a looped model's split is the step model's own and is not taken.
#[test]
fn an_uneven_pipeline_split_is_predicted_and_its_memory_checked() {
    let ds = crate::common::data("hf/deepseek-v3.json");
    let j = run_json(&[
        "predict",
        &ds,
        "--card",
        "h100",
        "--context",
        "4096",
        "--global-batch",
        "8192",
        "--micro-batch",
        "1",
        "--tp",
        "2",
        "--pp",
        "16",
        "--first-stage-layers",
        "4",
        "--last-stage-layers",
        "1",
        "--ep",
        "64",
        "--gpus",
        "1024",
        "--recompute",
        "selective",
        "--format",
        "json",
    ]);
    let layers: Vec<u64> = (j["step"]["pipeline"]["stage_layers"].as_array().unwrap())
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(layers, [vec![4; 15], vec![1]].concat());
    assert!(j["step"]["pipeline"].get("loop_stage").is_none(), "{j}");
    // Within 10% of the published 216-250, its MTP module (a layer and a second LM head on
    // the last stage) timed and counted.
    assert_eq!(j["step"]["mtp_modules"], 1, "{j}");
    let tf = j["megatron_tflops_per_gpu"].as_f64().unwrap();
    assert!((0.9 * 216.0..=1.1 * 250.0).contains(&tf), "{tf}");
    assert!(
        ["fits", "does_not_fit"].contains(&j["memory"]["verdict"].as_str().unwrap()),
        "{j}"
    );
    // The 15 four-layer stages are slower than the mean stage (61 / 16 layers): the
    // imbalance is reported, and the step is slower than the same layout evenly averaged.
    assert!(j["step"]["pipeline"]["imbalance"].as_f64().unwrap() > 0.0);
    // The first stage holds three dense layers and one MoE layer: fewer all-to-alls and
    // grouped GEMMs than a stage of four MoE layers, so it is faster, and a four-MoE-layer
    // stage is the bottleneck.
    let seconds = &j["step"]["pipeline"]["stage_seconds"];
    let (first, second) = (seconds[0].as_f64().unwrap(), seconds[1].as_f64().unwrap());
    assert!(first < second, "{seconds}");
    assert_eq!(j["step"]["pipeline"]["bottleneck"], 2, "{j}");
    let (code, _, err) = run(&[
        "predict",
        &budget("smelt-200m-s95.toml"),
        "--card",
        "h100",
        "--global-batch",
        "64",
        "--pp",
        "2",
        "--first-stage-layers",
        "4",
    ]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("training.first_stage_layers: a looped model's pipeline split"),
        "{err}"
    );
}

/// What `predict` says it did: the MTP modules it timed (Megatron-Core) or not (FSDP2), a
/// pipeline split no launcher builds as such, the settings as their flags spell them.
#[test]
fn predict_says_what_it_timed() {
    let ds = crate::common::data("hf/deepseek-v3.json");
    let args = |pp: &'static str, framework: &'static str| {
        vec![
            "predict".to_owned(),
            ds.clone(),
            "--card".into(),
            "h100".into(),
            "--context".into(),
            "4096".into(),
            "--global-batch".into(),
            "8192".into(),
            "--micro-batch".into(),
            "1".into(),
            "--pp".into(),
            pp.into(),
            "--ep".into(),
            "64".into(),
            "--gpus".into(),
            "1024".into(),
            "--dispatcher".into(),
            "deepep".into(),
            "--framework".into(),
            framework.into(),
        ]
    };
    let (code, out, err) = run_strs(&args("16", "megatron-core"));
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("MTP modules: 1 timed on the stage with the LM head"),
        "{out}"
    );
    assert!(
        out.contains("pp 16 · vp 1 does not divide the 61 layers"),
        "{out}"
    );
    assert!(
        out.contains("framework megatron-core") && out.contains("dispatcher deepep"),
        "{out}"
    );
    assert!(!out.contains("ZeRO 3 gathers"), "{out}");
    // It names the split that builds (fifteen stages of 4, the last of 1), and that split is
    // timed stage by stage.
    let words = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("rerun with --last-stage-layers 1 to time the split that builds"),
        "{out}"
    );
    let mut split = args("16", "megatron-core");
    split.extend(["--last-stage-layers".into(), "1".into()]);
    let (code, out, err) = run_strs(&split);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.contains("pipeline split as the layout gives it"),
        "{out}"
    );
    assert!(!out.contains("does not divide"), "{out}");
    let mut json = args("16", "megatron-core");
    json.extend(["--format".into(), "json".into()]);
    let (_, out, _) = run_strs(&json);
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(j["step"]["mean_stage_layers"].as_f64(), Some(61.0 / 16.0));
    assert_eq!(j["step"]["request"]["dispatcher"], "deepep");
    // Under FSDP2 no MTP module runs; one stage holds any number of layers.
    let (_, out, err) = run_strs(&args("1", "fsdp2"));
    assert!(
        out.contains("MTP modules: the model's 1 not timed"),
        "{out}{err}"
    );
    assert!(!out.contains("does not divide"), "{out}");
    // FSDP2 copies parameters and gradients on the compute stream; Megatron-Core does not.
    assert!(out.contains("FSDP2 parameter and gradient copies"), "{out}");
    let (_, out, _) = run_strs(&args("1", "megatron-core"));
    assert!(!out.contains("FSDP2 parameter"), "{out}");
}

/// A loop run once matches the Baseline's shapes: the step ratio is 1, every driver 0.
#[test]
fn a_cell_whose_loop_runs_once_has_ratio_one() {
    let grid = temp_file(
        "toml",
        r#"
name = "once"
[[cells]]
scale = "200m"
sparsity = "s95"
baseline = "@BUDGETS@/base-200m-s95.toml"
[recipe]
span = "half"
repeats = 1
[lattice]
hidden = { step = 32 }
experts = { step = 8 }
head_dim = { step = 8, min = 32, max = 256 }
kv_heads = { min = 1, max = 16 }
gqa = { min = 1, max = 16 }
q_width = { min = 0.75, max = 1.25 }
[training]
ep = 8
dp = 8
micro_batch = 2
"#,
    );
    let j = run_json(&[
        "grid",
        grid.to_str().unwrap(),
        "--predict",
        "b200",
        "--global-batch",
        "64",
        "--format",
        "json",
        "--quiet",
    ]);
    let st = &j["step_time"];
    // No layout flag: the grid file's [training].
    assert_eq!(st["basis"]["layout_source"], "grid_file");
    assert_eq!(st["cells"][0]["baseline"]["training"]["micro_batch"], 2);
    assert_eq!(st["cells"][0]["ratio"].as_f64(), Some(1.0));
    for k in ["experts", "all_to_all", "host", "imbalance", "other"] {
        assert_eq!(st["cells"][0]["drivers"][k].as_f64(), Some(0.0), "{k}");
    }
    // The layout given twice is refused.
    let (code, _, err) = run(&[
        "grid",
        grid.to_str().unwrap(),
        "--predict",
        "b200",
        "--global-batch",
        "64",
        "--ep",
        "8",
    ]);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("[training]") && err.contains("not both"),
        "{err}"
    );
}

/// Flags that do nothing in the mode given are refused, naming what to do; a model the
/// step model refuses is reported in its cell, not as a failure of the grid.
#[test]
fn grid_step_flags_that_do_nothing_are_refused() {
    let grid = budget("smelt-grid.toml");
    let g = grid.as_str();
    for (args, want) in [
        (vec!["grid", g, "--global-batch", "64"], "give --predict"),
        (vec!["grid", g, "--tp", "2"], "--global-batch"),
        (
            vec![
                "grid",
                g,
                "--predict",
                "h100",
                "--global-batch",
                "64",
                "--calibration",
                "cal.json",
            ],
            "--calibration is the layer-stack roofline's",
        ),
        (
            vec![
                "grid",
                g,
                "--predict",
                "h100",
                "--global-batch",
                "64",
                "--conventions",
                "--format",
                "csv",
            ],
            "--conventions would print nothing",
        ),
        (
            vec!["grid", g, "--predict", "mi300x", "--global-batch", "64"],
            "no system",
        ),
    ] {
        let (code, _, err) = run(&args);
        assert_ne!(code, Some(0), "{args:?}");
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // tp 2 does not divide the looped models' odd head counts: those cells say why.
    let j = run_json(&[
        "grid",
        g,
        "--predict",
        "h100",
        "--global-batch",
        "64",
        "--tp",
        "2",
        "--ep",
        "2",
        "--format",
        "json",
        "--quiet",
    ]);
    let cells = j["step_time"]["cells"].as_array().unwrap();
    let refused: Vec<_> = cells.iter().filter(|c| c["ratio"].is_null()).collect();
    assert!(!refused.is_empty());
    for c in refused {
        assert!(
            c["looped"]["refused"]
                .as_str()
                .unwrap()
                .contains("training.tp"),
            "{c}"
        );
        assert!(c.get("drivers").is_none());
    }
}

/// `gain --time-ratio`: `1 − (1 − g) · r` per row, from a number or a grid's step_time; bad
/// ratios and files without step_time are refused.
#[test]
fn gain_reports_the_wall_clock_gain() {
    let (b, s) = smelt::fit::data::paper_like_endpoints(&[0.85, 0.95, 0.97], 0.002);
    let csv = temp_file(
        "csv",
        &smelt::fit::data::to_csv(&[("baseline", &b), ("smelt", &s)]),
    );
    let csv = csv.to_str().unwrap();
    let gain = |extra: &[&str]| {
        let mut a = vec![
            "gain",
            csv,
            "--reference",
            "baseline",
            "--target",
            "smelt",
            "--starts",
            "small",
            "--quiet",
        ];
        a.extend_from_slice(extra);
        run(&a)
    };
    let (code, out, err) = gain(&["--time-ratio", "1.25", "--format", "json"]);
    assert_eq!(code, Some(0), "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    for (row, w) in j["rows"]
        .as_array()
        .unwrap()
        .iter()
        .zip(j["wall_clock"]["rows"].as_array().unwrap())
    {
        let g = row["gain"].as_f64().unwrap();
        assert_eq!(w["compute_gain"].as_f64(), Some(g));
        let want = 1.0 - (1.0 - g) * 1.25;
        assert!((w["wall_clock_gain"].as_f64().unwrap() - want).abs() < 1e-15);
    }
    // From a grid's JSON: each row names its cell, whose step ratio over FLOP ratio it takes.
    let grid = budget("smelt-grid.toml");
    let mut args = vec!["grid", grid.as_str(), "--format", "json", "--quiet"];
    args.extend(GRID_FLAGS);
    let (_, grid_json, _) = run(&args);
    let gj: serde_json::Value = serde_json::from_str(&grid_json).unwrap();
    let file = temp_file("json", &grid_json);
    let (code, out, err) = gain(&["--time-ratio", file.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, Some(0), "{err}");
    let j: serde_json::Value = serde_json::from_str(&out).unwrap();
    for w in j["wall_clock"]["rows"].as_array().unwrap() {
        let cell = w["cell"].as_str().unwrap();
        let c = (gj["step_time"]["cells"].as_array().unwrap().iter())
            .find(|c| {
                format!(
                    "{} {}",
                    c["scale"].as_str().unwrap(),
                    c["sparsity_label"].as_str().unwrap()
                ) == cell
            })
            .unwrap();
        let r = c["ratio"].as_f64().unwrap() / c["flop_ratio"].as_f64().unwrap();
        let got = w["time_per_flop_ratio"].as_f64().unwrap();
        assert!((got - r).abs() < 1e-12 * r, "{got} vs {r}");
    }
    let (code, out, _) = gain(&["--time-ratio", file.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("of the time") && out.contains("wall-clock gain"),
        "{out}"
    );
    // Refused: a ratio that is not positive, a file without step_time, neither.
    for (bad, want) in [
        ("0", "positive finite"),
        ("-1.5", "positive finite"),
        ("nan", "positive finite"),
        (budget("smelt-grid.toml").as_str(), "not JSON"),
        ("/no/such/file", "neither a number nor a readable file"),
    ] {
        let (code, _, err) = gain(&[&format!("--time-ratio={bad}")]);
        assert_eq!(code, Some(1), "{bad}");
        assert!(err.contains(want), "{bad}: {err}");
    }
    let plain = temp_file(
        "json",
        &run(&["grid", &grid, "--format", "json", "--quiet"]).1,
    );
    let (code, _, err) = gain(&["--time-ratio", plain.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(err.contains("no step_time"), "{err}");
}

/// A fit whose loss does not fall with F has no compute-optimal loss: its gain is refused.
#[test]
fn gain_refuses_a_fit_without_a_compute_optimal_loss() {
    let (truth, other) = smelt::fit::data::paper_like_surfaces();
    let rising = smelt::fit::Surface {
        a: -0.3,
        A: 1e-3,
        ..truth
    };
    let f = [6e8, 1.2e9, 2.4e9, 4.8e9, 9.6e9];
    let d = [2.5e9, 1e10, 4e10, 1.6e11];
    let b = smelt::fit::data::synthetic(&rising, &f, &[0.85, 0.95, 0.97], &d, 0.0, 1);
    let s = smelt::fit::data::synthetic(&other, &f, &[0.85, 0.95, 0.97], &d, 0.0, 2);
    let csv = temp_file(
        "csv",
        &smelt::fit::data::to_csv(&[("baseline", &b), ("smelt", &s)]),
    );
    let (code, _, err) = run(&[
        "gain",
        csv.to_str().unwrap(),
        "--reference",
        "baseline",
        "--target",
        "smelt",
        "--starts",
        "small",
        "--quiet",
    ]);
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("reference") && err.contains("compute-optimal frontier"),
        "{err}"
    );
}

/// The layout of the README's and the guide's tables.
const DOC_LAYOUT: [&str; 8] = [
    "--global-batch",
    "256",
    "--gpus",
    "16",
    "--ep",
    "8",
    "--micro-batch",
    "4",
];

fn doc_grid(card: &str) -> serde_json::Value {
    let grid = budget("smelt-grid.toml");
    let mut args = vec!["grid", grid.as_str(), "--predict", card, "--format", "json"];
    args.extend(DOC_LAYOUT);
    args.push("--quiet");
    run_json(&args)
}

/// The rows of the Markdown table after `marker` in `file` (relative to the package root).
fn doc_rows(file: &str, marker: &str) -> Vec<String> {
    let text = std::fs::read_to_string(format!("{}/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let table = text
        .split(marker)
        .nth(1)
        .unwrap_or_else(|| panic!("{file}: {marker}"));
    (table.lines().skip(3))
        .take_while(|l| l.starts_with('|'))
        .map(str::to_owned)
        .collect()
}

/// The README's per-cell ratios on H100 and B200 (`*` host-bound, `†` does not fit) and the
/// guide's drivers are what the grid predicts under the layout they state.
#[test]
fn the_docs_step_tables_are_what_the_grid_predicts() {
    let (h, b) = (doc_grid("h100"), doc_grid("b200"));
    let cells = |j: &serde_json::Value| j["step_time"]["cells"].as_array().unwrap().clone();
    let (hc, bc, grid) = (cells(&h), cells(&b), h["cells"].as_array().unwrap().clone());
    let mark = |c: &serde_json::Value| {
        let mut s = format!("{:.4}", c["ratio"].as_f64().unwrap());
        if c["looped"]["step"]["step"]["host_bound"] == true {
            s.push('*');
        }
        let fits = |w: &str| c[w]["step"]["memory"]["verdict"] == "fits";
        if !(fits("baseline") && fits("looped")) {
            s.push('†');
        }
        s
    };
    let name = |c: &serde_json::Value| {
        format!(
            "{} {}",
            c["scale"].as_str().unwrap(),
            c["sparsity_label"].as_str().unwrap()
        )
    };
    let readme = doc_rows("README.md", "<!-- step-ratios: smelt grid");
    assert_eq!(readme.len(), 16);
    let pct = |x: &serde_json::Value| format!("{:+.1}%", x.as_f64().unwrap() * 100.0);
    let guide = doc_rows("docs/guide.md", "<!-- step-drivers: smelt grid");
    assert_eq!(guide.len(), 16);
    for i in 0..16 {
        let f = grid[i]["ratios"]["flops"].as_f64().unwrap();
        let want = format!(
            "| {} | {f:.4} | {} | {} |",
            name(&hc[i]),
            mark(&hc[i]),
            mark(&bc[i])
        );
        assert_eq!(readme[i], want);
        let (c, d) = (&hc[i], &hc[i]["drivers"]);
        let secs = |w: &str| c[w]["step"]["step_seconds"].as_f64().unwrap();
        let want = format!(
            "| {} | {f:.4} | {:.3} | {:.3} | {:.4} | {} | {} | {} | {} | {:.4} | {} |",
            name(c),
            secs("baseline"),
            secs("looped"),
            c["ratio"].as_f64().unwrap(),
            pct(&d["experts"]),
            pct(&d["all_to_all"]),
            pct(&d["host"]),
            pct(&d["other"]),
            bc[i]["ratio"].as_f64().unwrap(),
            pct(&bc[i]["drivers"]["host"]),
        );
        assert_eq!(guide[i], want);
        // No pipeline in this layout: nothing is imbalanced.
        assert_eq!(d["imbalance"].as_f64(), Some(0.0));
    }
}

/// The README's wall-clock table is what `gain --time-ratio` prints on the synthetic
/// endpoints (`examples/synthetic_endpoints.rs`) and the H100 grid.
#[test]
fn the_readme_wall_clock_gain_is_what_gain_prints() {
    let (b, s) = smelt::fit::data::paper_like_endpoints(&[0.85, 0.95, 0.97], 0.002);
    let csv = temp_file(
        "csv",
        &smelt::fit::data::to_csv(&[("baseline", &b), ("smelt", &s)]),
    );
    let grid = temp_file("json", &doc_grid("h100").to_string());
    let out = crate::common::smelt()
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("COLUMNS")
        .args([
            "gain",
            csv.to_str().unwrap(),
            "--reference",
            "baseline",
            "--target",
            "smelt",
        ])
        .args(["--time-ratio", grid.to_str().unwrap(), "--quiet"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let out = String::from_utf8(out.stdout).unwrap();
    let readme =
        std::fs::read_to_string(format!("{}/README.md", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let block = readme
        .split("--time-ratio h100.json\n```\n\n```text\n")
        .nth(1)
        .and_then(|b| b.split("\n```").next())
        .expect("the README's wall-clock block");
    assert!(block.lines().count() >= 9, "{block}");
    assert!(out.contains(block), "the README's block is not in:\n{out}");
}

/// FSDP2's copies on a looped model's stages: under ZeRO 3 every visit of a layer gathers
/// again, so a stage copies per layer execution; below it once per step, per physical
/// layer.
#[test]
fn fsdp2_copies_follow_executions_at_zero_3_and_layers_below() {
    let model = crate::common::budget("smelt-200m-s95.toml");
    let ratio = |zero: &str| {
        let v = crate::common::run_json(&[
            "predict",
            &model,
            "--card",
            "h100",
            "--global-batch",
            "64",
            "--pp",
            "2",
            "--gpus",
            "2",
            "--framework",
            "fsdp2",
            "--zero",
            zero,
            "--format",
            "json",
        ]);
        let p = &v["step"]["pipeline"];
        assert_eq!(p["stage_layers"], serde_json::json!([9, 3]));
        assert_eq!(p["stage_executions"], serde_json::json!([15, 3]));
        let stage = v["step"]["micro_batch"]["fsdp_copies"].as_f64().unwrap();
        let mean = p["balanced"]["fsdp_copies"].as_f64().unwrap();
        stage / mean
    };
    // The mean stage runs 18 / 2 = 9 executions (ZeRO 3) or holds 12 / 2 = 6 layers.
    assert!((ratio("3") - 15.0 / 9.0).abs() < 1e-12);
    assert!((ratio("1") - 9.0 / 6.0).abs() < 1e-12);
}
