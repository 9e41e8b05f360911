//! Fits Chinchilla's form to Epoch AI's extraction of Hoffmann et al.'s Figure 4 with the
//! replication's protocol, and compares the result with the published fits.
//!
//! Run: `cargo run --release --example chinchilla`

use smelt::fit::{self, FitOptions, Form, Scale};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/chinchilla/svg_extracted_data.csv"
    );
    let points = fit::data::epoch_chinchilla(&std::fs::read_to_string(path)?, path)?;
    let opts = FitOptions::standard(Form::Chinchilla);
    let t = std::time::Instant::now();
    let f = fit::fit("chinchilla", &points, &opts)?;
    println!("{} points, {:?}", points.len(), t.elapsed());
    let scipy = FitOptions {
        lbfgs: fit::lbfgs::Options::default(),
        ..opts.clone()
    };
    let s = fit::fit("chinchilla (scipy stopping)", &points, &scipy)?;
    println!(
        "scipy-like stopping, summed: E {:.5} A {:.2} B {:.2} alpha {:.5} beta {:.5}",
        s.surface.E, s.surface.A, s.surface.K, s.surface.a, s.surface.c
    );
    println!("{}", smelt::report::to_json(&f)?);
    // The per-point losses averaged instead of summed, with scipy's default stopping rules:
    // the objective is 240x smaller, the rules fire early, and the fit lands elsewhere.
    let mean = FitOptions {
        scale: Scale::Mean,
        lbfgs: fit::lbfgs::Options::default(),
        ..opts.clone()
    };
    let m = fit::fit("chinchilla (mean)", &points, &mean)?;
    println!(
        "mean-scaled fit: E {:.4} A {:.1} B {:.1} alpha {:.4} beta {:.4} ({:?} after {} iterations, {} of {} L-BFGS runs at best)",
        m.surface.E,
        m.surface.A,
        m.surface.K,
        m.surface.a,
        m.surface.c,
        m.convergence.termination,
        m.convergence.iterations,
        m.convergence.polished_at_best,
        m.convergence.polished
    );
    // The published fits, scored with the same objective.
    let published = [
        ("Epoch refit", fit::data::CHINCHILLA_EPOCH_REFIT),
        ("Hoffmann 2022", fit::data::CHINCHILLA_HOFFMANN_2022),
        ("smelt", f.surface),
    ];
    for (name, s) in published {
        for scale in [Scale::Sum, Scale::Mean] {
            let mut g = [0.0; 6];
            let obj = fit::objective(
                &points,
                &fit::params_of(&s),
                &mut g,
                1e-3,
                scale,
                Form::Chinchilla,
            );
            let gmax = g.iter().fold(0.0f64, |m, v| m.max(v.abs()));
            println!(
                "{name:>14} {scale:?}: objective {obj:.6e}, max |gradient| {gmax:.3e}, rmse {:.5}",
                fit::rmse(&s, &points)
            );
        }
    }
    Ok(())
}
