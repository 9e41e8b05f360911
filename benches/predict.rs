//! The step-time predictor validated on the CPU, without a GPU: calibrate the roofline from
//! one `bench` of the 200M Baseline (`budgets/base-200m-s95.toml`) alone, predict the CPU
//! time ratio of every cell of `budgets/smelt-grid.toml`, and compare each with the ratio
//! `grid --bench cpu` measures (the median of interleaved rounds and its 95% bootstrap
//! interval). Prints one row per cell and the mean and largest absolute error of the
//! predicted ratio over the 15 cells other than the calibration's own (200m s95, whose
//! Baseline the calibration measured; its looped model is still a prediction).
//!
//! The CPU is the device: its peak is the bench's measured ceiling, no memory roof (the
//! fitted efficiencies carry the memory effects of the machine they were measured on), the
//! launch overhead the bench's launch floor, attention and experts costed as the bench
//! launches them (unfused tiles, one GEMM per expert).
//!
//! Run: `cargo bench -p smelt-benches --bench predict`. `SMELT_PREDICT_ROUNDS` (default 5)
//! sets the rounds of every benchmark, `SMELT_PREDICT_TOKENS` (default 1024) the batch.
//! Timing decides nothing here but the figures printed: a shared machine's noise shows in
//! the intervals.

use smelt::bench::{Backend, BenchOptions};
use smelt::progress::Silent;
use smelt::time::{AttentionData, Calibration, ExpertLaunch, PredictOptions, Roofline};
use smelt::{GridSpec, ModelSpec};
use smelt_benches::budget as path;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    // `cargo bench` passes `--bench`; a filter that is not this benchmark's name skips it.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    if args
        .iter()
        .any(|a| !a.starts_with('-') && !"predict".contains(a.as_str()))
    {
        return;
    }
    let rounds = env("SMELT_PREDICT_ROUNDS", 5) as usize;
    let tokens = env("SMELT_PREDICT_TOKENS", 1024);
    let opts = BenchOptions {
        tokens,
        rounds,
        max_seconds: 3600.0,
        ..BenchOptions::new(Backend::Cpu)
    };

    // 1. One bench of the 200M Baseline alone, through its JSON (what `smelt calibrate`
    //    reads).
    let base_path = path("base-200m-s95.toml");
    let base = ModelSpec::load(std::path::Path::new(&base_path)).expect("the 200M Baseline");
    let bench = smelt::bench::bench(&[&base], &opts).expect("bench of the 200M Baseline");
    let json = smelt::report::to_json(&bench).expect("bench JSON");
    let cal = Calibration::from_bench_json(&json, "bench of base-200m-s95.toml").expect("fit");
    println!(
        "calibration: {} shapes of {} on {}: ceiling {:.1} GFLOP/s, launch floor {:.3} µs",
        cal.shapes,
        cal.models.join(", "),
        cal.device.name,
        cal.device.peak_flops_per_second / 1e9,
        cal.device.launch_seconds * 1e6
    );
    for (class, curve) in &cal.curves {
        let points: Vec<String> = curve
            .iter()
            .map(|[x, e]| format!("2^{x:.1}: {e:.3}"))
            .collect();
        println!("  {class}: {}", points.join(", "));
    }
    match &cal.traffic {
        Some(t) => println!(
            "  GEMMs: arithmetic at {:.3} of the ceiling + operand traffic at {:.1} GB/s \
             ({} shapes, rms error {:.1}%)",
            t.peak_share(cal.device.peak_flops_per_second),
            t.bandwidth() / 1e9,
            t.shapes,
            100.0 * t.rms_relative_error
        ),
        None => println!("  GEMMs: no operand-traffic fit kept"),
    }
    // The same calibration without its traffic fit: efficiency curves only.
    let curves_only = Roofline {
        device: cal.device.clone(),
        calibration: Some(smelt::time::Calibration {
            traffic: None,
            ..cal.clone()
        }),
        attention: AttentionData::Unfused,
        experts: ExpertLaunch::PerExpert,
    };
    let roof = Roofline {
        device: cal.device.clone(),
        calibration: Some(cal),
        attention: AttentionData::Unfused,
        experts: ExpertLaunch::PerExpert,
    };

    // 2. The grid matched, predicted, then measured.
    let grid = GridSpec::load(std::path::Path::new(&path("smelt-grid.toml"))).expect("grid");
    let mut r = smelt::study::match_grid(&grid).expect("grid match");
    let popts = PredictOptions {
        tokens,
        routing: opts.routing,
    };
    smelt::study::predict_cells(&mut r, &curves_only, &popts).expect("predictions");
    let by_curves: Vec<f64> = (r.cells.iter())
        .map(|c| c.predicted.expect("predicted").ratio)
        .collect();
    smelt::study::predict_cells(&mut r, &roof, &popts).expect("predictions");
    let start = std::time::Instant::now();
    smelt::study::time_cells(&mut r, &opts, &Silent).expect("grid --bench cpu");
    println!(
        "grid --bench cpu: {} rounds per cell, {} tokens, {:.0} s",
        rounds,
        tokens,
        start.elapsed().as_secs_f64()
    );

    // 3. The comparison.
    println!(
        "{:<10} {:>7} {:>26} {:>8} {:>9} {:>8} {:>8} {:>7}",
        "cell",
        "F ratio",
        "measured T [95% interval]",
        "curves",
        "predicted",
        "|p - m|",
        "relative",
        "inside"
    );
    let mut errors = Vec::new();
    let mut curve_errors = Vec::new();
    for (c, by_curves) in r.cells.iter().zip(by_curves) {
        let name = format!("{} {}", c.scale, c.sparsity_label);
        let p = c.predicted.expect("predicted").ratio;
        let Some(t) = &c.time else {
            println!(
                "{name:<10} not timed: {}",
                c.time_failed.as_deref().unwrap_or("?")
            );
            continue;
        };
        let err = (p - t.ratio).abs();
        let inside = (t.interval[0]..=t.interval[1]).contains(&p);
        let own = c.scale == "200m" && c.sparsity_label == "s95";
        println!(
            "{name:<10} {:>7.4} {:>8.4} [{:.4}, {:.4}]{} {:>8.4} {:>9.4} {:>8.4} {:>7.2}% {:>7}{}",
            c.ratios.flops,
            t.ratio,
            t.interval[0],
            t.interval[1],
            if t.noisy { "*" } else { " " },
            by_curves,
            p,
            err,
            100.0 * err / t.ratio,
            if inside { "yes" } else { "no" },
            if own { "  (calibration's cell)" } else { "" }
        );
        if !own {
            errors.push((err, inside, t.noisy, err / t.ratio));
            curve_errors.push((by_curves - t.ratio).abs() / t.ratio);
        }
    }
    let n = errors.len();
    let mean = errors.iter().map(|e| e.0).sum::<f64>() / n as f64;
    let max = errors.iter().map(|e| e.0).fold(0.0, f64::max);
    let inside = errors.iter().filter(|e| e.1).count();
    let noisy = errors.iter().filter(|e| e.2).count();
    let rel_mean = errors.iter().map(|e| e.3).sum::<f64>() / n as f64;
    let rel_max = errors.iter().map(|e| e.3).fold(0.0, f64::max);
    println!(
        "over the {n} other cells: |predicted - measured ratio| mean {mean:.4}, largest {max:.4} \
         (relative: mean {:.2}%, largest {:.2}%); {inside} of {n} predictions inside the \
         measured interval; {noisy} noisy (*) cells",
        100.0 * rel_mean,
        100.0 * rel_max
    );
    println!(
        "the efficiency curves alone (column `curves`, no traffic fit): relative error mean \
         {:.2}%, largest {:.2}%",
        100.0 * curve_errors.iter().sum::<f64>() / n as f64,
        100.0 * curve_errors.iter().copied().fold(0.0, f64::max)
    );
}
