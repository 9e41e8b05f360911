//! The solver with the predicted time weighed ([`smelt::budget::time`]): exactly brute
//! force's order over every lattice point, each predicted with the public predictor; weighed
//! 0, the match is the one without it; the budget file's refusals; the command line's
//! report.

use std::cmp::Ordering;
use std::path::Path;

use proptest::prelude::*;
use smelt::budget::{Budget, Mode, TimeBudget};
use smelt::plan::Routing;
use smelt::search;
use smelt::time::{
    AttentionData, Backend, Calibration, Card, DeviceRequest, ExpertLaunch, PredictOptions,
    Roofline, ShapeClass, Traffic, predict_model,
};
use smelt::{Error, Model};

use crate::common::{self, run, run_json, temp_file};
use crate::search::{arb_budget, brute_force, tie_key};

/// The devices the property test draws: a card (memory roof, fused attention, grouped
/// experts), a peak with no memory roof, a card with the bench's unfused tiles and
/// per-expert launches; the first card calibrated with an operand-traffic fit (the time
/// still monotone in the expert count, searched by branch and bound), and with efficiency
/// curves only, one of them falling and rising again (not monotone: every count predicted).
fn roofline(which: usize) -> Roofline {
    if which >= 3 {
        let mut roof = roofline(0);
        let curves = [
            (ShapeClass::Gemm, vec![[10.0, 0.2], [30.0, 0.8]]),
            (
                ShapeClass::Experts,
                vec![[8.0, 0.9], [14.0, 0.05], [24.0, 0.7]],
            ),
        ];
        let traffic = (which == 3).then(|| Traffic {
            seconds_per_flop: 1.0 / (0.7 * roof.device.peak_flops_per_second),
            seconds_per_byte: 1.0 / 3e12,
            shapes: 3,
            rms_relative_error: 0.05,
        });
        roof.calibration = Some(Calibration {
            source: "a test's calibration".to_owned(),
            backend: Backend::Cuda,
            device: roof.device.clone(),
            models: vec![],
            shapes: 3,
            curves: curves.into_iter().collect(),
            traffic,
        });
        return roof;
    }
    let request = match which {
        0 => DeviceRequest {
            card: Some(Card::H200Sxm),
            ..DeviceRequest::default()
        },
        1 => DeviceRequest {
            peak: Some(1e12),
            ..DeviceRequest::default()
        },
        _ => DeviceRequest {
            card: Some(Card::A100),
            attention: Some(AttentionData::Unfused),
            experts: Some(ExpertLaunch::PerExpert),
            ..DeviceRequest::default()
        },
    };
    request.roofline().unwrap().0
}

/// Every lattice point in the documented order with the time weighed: brute force's points
/// (`search.rs`), each looped model's time predicted by the public predictor, its weighted
/// `|r_T|` sorted into the score; in conservative mode, a model predicted slower than the
/// Baseline left out.
fn brute_force_timed(b: &Budget) -> Vec<(Model, Vec<f64>)> {
    let t = b.time().expect("a time budget");
    let seconds = |spec: &smelt::ModelSpec| {
        predict_model(spec, t.roofline(), t.options())
            .unwrap()
            .seconds_per_token
    };
    let base = seconds(b.baseline());
    let mut all = Vec::new();
    for (model, s, _) in brute_force(b) {
        let mut spec = b.baseline().clone();
        spec.model = model.clone();
        let r = seconds(&spec) / base - 1.0;
        if b.mode() == Mode::Conservative && r > 0.0 {
            continue;
        }
        let mut s = s.to_vec();
        s.push(t.weight() * r.abs());
        s.sort_by(|x, y| y.total_cmp(x));
        all.push((model, s));
    }
    let b0 = &b.baseline().model;
    all.sort_by(|x, y| {
        (x.1.iter().zip(&y.1))
            .map(|(p, q)| p.total_cmp(q))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
            .then_with(|| tie_key(&x.0, b0).cmp(&tie_key(&y.0, b0)))
    });
    all
}

/// [`arb_budget`] with a time budget of weight `w` on one of the [`roofline`]s, at a batch
/// of a few documents or a few hundred tokens, and up to 48 expert counts (more than the
/// points next to step 4's breakpoints and ends, so that scoring only those would be
/// caught). Baselines the kernel plan does not plan are drawn again.
fn arb_timed(weights: Vec<f64>) -> impl Strategy<Value = Budget> {
    (
        arb_budget(),
        0usize..5,
        prop::sample::select(weights),
        prop::sample::select(vec![16u64, 64, 300]),
        12u64..=48,
    )
        .prop_filter_map(
            "a Baseline the kernel plan predicts",
            |(b, which, w, tokens, counts)| {
                let options = PredictOptions {
                    tokens,
                    routing: Routing::Balanced,
                };
                let mut lattice = b.lattice().clone();
                let e = lattice.experts;
                lattice.experts.max = e.min + e.step * (counts - 1);
                let t = TimeBudget::new(w, roofline(which), options).ok()?;
                b.with_lattice(lattice).ok()?.with_time(Some(t)).ok()
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(800))]

    /// With the time weighed, the solver's top 3 are exactly brute force's top 3, in
    /// order, with the same scores bit for bit: at small weights and at weights so large
    /// that the time decides nearly everything (the bound of the other budgets prunes
    /// little, the time's own bound the rest).
    #[test]
    fn solver_with_time_weighed_equals_brute_force(
        b in arb_timed(vec![0.25, 1.0, 2.0, 3.0, 8.0, 100.0, 1e6])
    ) {
        let brute = brute_force_timed(&b);
        match search::solve(&b, 3) {
            Ok(sol) => {
                prop_assert_eq!(sol.ranked.len(), brute.len().min(3));
                for (c, (m, s)) in sol.ranked.iter().zip(&brute) {
                    prop_assert!(
                        &c.model == m && c.score.components() == &s[..],
                        "solver {:?} {:?}\nbrute {:?} {:?}", c.model, c.score, m, s
                    );
                    let t = c.time.expect("a time residual");
                    prop_assert_eq!(
                        t.residual,
                        t.looped_seconds_per_token / t.baseline_seconds_per_token - 1.0
                    );
                    if b.mode() == Mode::Conservative {
                        prop_assert!(t.residual <= 0.0);
                    }
                }
                prop_assert!(sol.stats.predicted > 0);
                prop_assert_eq!(&sol, &search::solve(&b, 3).unwrap(), "deterministic");
            }
            Err(e) => {
                prop_assert!(brute.is_empty(), "solver failed ({e}) but brute force found {:?}", brute[0].0);
            }
        }
    }

    /// Weighed 0, the time is reported, not matched: the same configurations as without a
    /// time budget, their scores with one more component, 0, and each one's time predicted.
    #[test]
    fn time_weighed_zero_changes_no_match(b in arb_timed(vec![0.0])) {
        let plain = b.clone().with_time(None).unwrap();
        let (Ok(with), Ok(without)) = (search::solve(&b, 3), search::solve(&plain, 3)) else {
            prop_assert!(search::solve(&b, 3).is_err() && search::solve(&plain, 3).is_err());
            return Ok(());
        };
        prop_assert_eq!(with.ranked.len(), without.ranked.len());
        for (c, d) in with.ranked.iter().zip(&without.ranked) {
            prop_assert_eq!(&c.model, &d.model);
            prop_assert_eq!(&c.score.components()[..4], d.score.components());
            prop_assert_eq!(c.score.components()[4], 0.0);
            prop_assert!(c.time.is_some() && d.time.is_none());
        }
        prop_assert_eq!(with.stats.scored, without.stats.scored);
        // Only the finalists' times are predicted.
        let finalists = with.stats.predicted;
        prop_assert!(finalists >= with.ranked.len() as u64 && finalists <= 3, "{}", finalists);
    }
}

/// `match-200m-s95-small.toml` with `extra` appended, read from `budgets/`.
fn small_with(extra: &str) -> smelt::Result<Budget> {
    let text = std::fs::read_to_string(common::budget("match-200m-s95-small.toml")).unwrap();
    Budget::from_toml_str(
        &format!("{text}\n{extra}"),
        Path::new(&common::budgets_dir()),
    )
}

/// The field and rule of an invalid-field error.
fn refusal(e: Error) -> (String, String) {
    match e {
        Error::InvalidSpec { field, rule } => (field, rule),
        other => panic!("not an invalid-field error: {other}"),
    }
}

#[test]
fn bad_time_budgets_are_refused_naming_the_field_and_rule() {
    let card = "[objective.time]\ncard = \"h200\"\n";
    for (extra, field, rule) in [
        (
            "[objective.weights]\ntime = 1.0\n".to_owned(),
            "objective.weights.time",
            "no [objective.time] names the device",
        ),
        (
            format!("[objective.weights]\ntime = -1.0\n{card}"),
            "objective.weights.time",
            "non-negative finite",
        ),
        (
            "[objective.weights]\ntime = -1.0\n".to_owned(),
            "objective.weights.time",
            "non-negative finite",
        ),
        (
            "[objective.time]\ncard = \"h300\"\n".to_owned(),
            "objective.time.card",
            "is no card of the table",
        ),
        (
            format!("{card}peak = 900.0\n"),
            "objective.time.peak",
            "a card or a peak, not both",
        ),
        (
            format!("{card}bandwidth = 0.0\n"),
            "objective.time.bandwidth",
            "positive finite",
        ),
        (
            format!("{card}launch_us = -1.0\n"),
            "objective.time.launch_us",
            "microseconds",
        ),
        (
            format!("{card}tokens = 0\n"),
            "objective.time.tokens",
            "between 1 and",
        ),
        (
            format!("{card}routing = \"skew=-1\"\n"),
            "objective.time.routing",
            "non-negative",
        ),
        (
            format!("{card}calibration = \"no-such-calibration.json\"\n"),
            "objective.time.calibration",
            "cannot read calibration",
        ),
        (
            format!("{card}calibration = \"base-200m-s95.toml\"\n"),
            "objective.time.calibration",
            "a calibration (smelt calibrate's file)",
        ),
        (
            "[objective.time]\nattention = \"fused\"\n".to_owned(),
            "objective.time.card",
            "give a card",
        ),
    ] {
        let e = small_with(&extra).expect_err(&extra);
        let (f, r) = refusal(e);
        assert_eq!(f, field, "{extra}: {r}");
        assert!(r.contains(rule), "{extra}: {r}");
    }
    // A typo in the table is a parse error naming the key.
    let e = small_with(&format!("{card}routng = \"balanced\"\n")).unwrap_err();
    assert!(e.to_string().contains("routng"), "{e}");
    // Given, the time budget is read as written; weighed 0 unless a weight is given.
    let b = small_with(&format!("{card}tokens = 4096\nrouting = \"skew=0.5\"\n")).unwrap();
    let t = b.time().unwrap();
    assert_eq!((t.weight(), t.options().tokens), (0.0, 4096));
    assert_eq!(t.roofline().device.name, "NVIDIA H200 SXM");
    assert!(small_with("").unwrap().time().is_none());
}

/// A peak's device is named after where the peak was given: a budget's
/// `[objective.time] peak` (not `smelt predict`'s flag), `--peak`, or a function's argument;
/// so is the error when no device is named.
#[test]
fn a_peak_is_named_where_it_was_given() {
    let b = small_with("[objective.time]\npeak = 900.0\nbandwidth = 4.8\n").unwrap();
    let d = &b.time().unwrap().roofline().device;
    assert_eq!(d.name, "a device of 900 TFLOP/s ([objective.time] peak)");
    assert_eq!(
        d.source,
        "[objective.time] peak, [objective.time] bandwidth"
    );
    let (field, rule) = refusal(small_with("[objective.time]\ntokens = 4096\n").unwrap_err());
    assert_eq!(field, "objective.time.card");
    assert!(
        rule.contains("([objective.time] card)") && !rule.contains("--"),
        "{rule}"
    );
    let text = std::fs::read_to_string(common::budget("match-200m-s95-time.toml")).unwrap();
    let path = temp_file(
        "toml",
        &text.replace("card = \"h200-sxm\"", "peak = 900.0").replace(
            "baseline = \"",
            &format!("baseline = \"{}/", common::budgets_dir()),
        ),
    );
    let (code, out, err) = run(&["match", path.to_str().unwrap()]);
    assert!(code == Some(0) || code == Some(3), "{err}");
    let words = out.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(
        words.contains("a device of 900 TFLOP/s ([objective.time] peak)"),
        "{out}"
    );
    assert!(!out.contains("--peak"), "{out}");
    let j = run_json(&[
        "predict",
        &common::budget("base-200m-s95.toml"),
        "--peak",
        "900",
        "--format",
        "json",
    ]);
    assert_eq!(
        j["basis"]["device"]["name"],
        "a device of 900 TFLOP/s (--peak)"
    );
    let request = DeviceRequest {
        peak: Some(9e14),
        ..DeviceRequest::default()
    };
    let name = request.roofline().unwrap().0.device.name;
    assert_eq!(name, "a device of 900 TFLOP/s (peak)");
    let e = DeviceRequest::default().roofline().unwrap_err().to_string();
    assert!(e.contains("give a card (card), a peak (peak)"), "{e}");
}

#[test]
fn what_cannot_carry_the_time_refuses_it() {
    // A hybrid's recurrent layers are not planned: its time cannot be predicted.
    let text = std::fs::read_to_string(common::budget("match-qwen3.5-style.toml")).unwrap();
    let e = Budget::from_toml_str(
        &format!("{text}\n[objective.time]\ncard = \"h200\"\n"),
        Path::new(&common::budgets_dir()),
    )
    .unwrap_err();
    let (field, rule) = refusal(e);
    assert_eq!(field, "objective.time");
    assert!(rule.contains("cannot be predicted"), "{rule}");
    // A grid, a sweep and the MILP cross-check refuse it, saying why.
    let grid = std::fs::read_to_string(common::budget("smelt-grid.toml")).unwrap();
    let e = smelt::GridSpec::from_toml_str(
        &format!("{grid}\n[objective.time]\ncard = \"h200\"\n"),
        Path::new(&common::budgets_dir()),
    )
    .unwrap_err();
    assert!(e.to_string().contains("grid --predict"), "{e}");
    let b = smelt::Budget::load(common::budget("match-200m-s95-time.toml")).unwrap();
    let e = search::milp::solve(&b).unwrap_err();
    assert!(
        e.to_string().contains("cannot express the predicted time"),
        "{e}"
    );
    let e = smelt::study::sweep(&b, smelt::study::Knob::Repeats, &[2]).unwrap_err();
    assert!(e.to_string().contains("objective.time"), "{e}");
}

/// `smelt match` of a budget that weighs the time reports both models' predicted time and
/// its residual in every format; weighed 0 it is reported and the match is the plain one.
#[test]
fn a_match_with_the_time_weighed_reports_its_residual() {
    let budget = common::budget("match-200m-s95-time.toml");
    let j = run_json(&["match", &budget, "--format", "json", "--top", "3"]);
    let p = &j["predicted_time"];
    let (base, looped, r) = (
        p["baseline_seconds_per_token"].as_f64().unwrap(),
        p["looped_seconds_per_token"].as_f64().unwrap(),
        p["residual"].as_f64().unwrap(),
    );
    // (JSON's floats read back to within a unit in the last place.)
    let near = |a: f64, b: f64| (a - b).abs() <= 1e-12 * b.abs().max(1e-300);
    assert!(near(r, looped / base - 1.0), "{p}");
    assert!(near(p["ratio"].as_f64().unwrap(), looped / base), "{p}");
    assert_eq!(p["weight"], 1.0);
    assert_eq!(p["basis"]["device"]["name"], "NVIDIA H200 SXM");
    assert_eq!(p["basis"]["calibrated"], false);
    let score: Vec<f64> = (j["score"].as_array().unwrap().iter())
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert_eq!(score.len(), 5);
    assert!(score.iter().any(|&c| c == r.abs()), "{score:?} {r}");
    assert!(j["lattice"]["predicted"].as_u64().unwrap() > 0);
    let ranked = j["ranked"].as_array().unwrap();
    assert_eq!(ranked.len(), 3);
    assert_eq!(ranked[0]["time_residual"].as_f64().unwrap(), r);
    // The table and Markdown say it, with the card and what the prediction assumes.
    for format in ["table", "markdown"] {
        let (code, out, err) = run(&["match", &budget, "--format", format]);
        assert_eq!(code, Some(0), "{err}");
        assert!(out.contains("predicted time/token"), "{out}");
        assert!(out.contains("time budget (weight 1, matched)"), "{out}");
        assert!(
            out.contains("NVIDIA H200 SXM") && out.contains("uncalibrated"),
            "{out}"
        );
    }
    // The model file's first line carries the time's residual beside the budgets'.
    let (code, out, err) = run(&["match", &budget, "--format", "model"]);
    assert_eq!(code, Some(0), "{err}");
    let first = out.lines().next().unwrap_or_default();
    assert!(
        first.contains(&format!(
            "predicted time {:+.2}% on NVIDIA H200 SXM",
            100.0 * r
        )),
        "{first}"
    );
    // Weighed 0: reported, not matched, and the match is the plain small budget's.
    let text = std::fs::read_to_string(&budget)
        .unwrap()
        .replace("time = 1.0", "time = 0.0")
        .replace("\"base-200m-s95.toml\"", "\"@BUDGETS@/base-200m-s95.toml\"");
    let zero = temp_file("toml", &text);
    let z = run_json(&["match", zero.to_str().unwrap(), "--format", "json"]);
    let plain = run_json(&[
        "match",
        &common::budget("match-200m-s95-small.toml"),
        "--format",
        "json",
    ]);
    assert_eq!(z["looped"]["model"], plain["looped"]["model"]);
    assert_eq!(z["predicted_time"]["weight"], 0.0);
    assert!(plain.get("predicted_time").is_none());
    // The weighed optimum is no worse on the objective with the time than the plain one.
    let r0 = z["predicted_time"]["residual"].as_f64().unwrap().abs();
    let worst0 = z["score"][0].as_f64().unwrap().max(r0);
    assert!(score[0] <= worst0, "{score:?} against {worst0}");
    // The guide's figures ("Matching the time too").
    let pct = |v: &serde_json::Value| format!("{:+.2}%", v.as_f64().unwrap() * 100.0);
    let figures = [
        pct(&p["residual"]),
        pct(&j["residuals"]["flops"]),
        pct(&j["residuals"]["params"]),
        pct(&j["residuals"]["kv"]),
        format!("{:.3}", z["predicted_time"]["ratio"].as_f64().unwrap()),
        pct(&plain["residuals"]["flops"]),
        pct(&plain["residuals"]["params"]),
        pct(&plain["residuals"]["kv"]),
    ];
    let readme = [
        "+9.27%", "-10.07%", "-9.73%", "-10.00%", "1.190", "+0.28%", "+0.38%", "-2.50%",
    ];
    assert_eq!(figures, readme);
    assert_eq!(j["looped"]["model"]["hidden"], 1024);
    assert_eq!(j["looped"]["model"]["moe"]["experts"], 280);
    let (code, out, err) = run(&["match", zero.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("weight 0, reported, not matched"), "{out}");
}
