//! Costs a Baseline and its looped variant with the library, as a launcher would.
//!
//! Run: `cargo run --example cost`

use smelt::{ModelSpec, compare};

fn main() -> Result<(), smelt::Error> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/budgets");
    let baseline = ModelSpec::load(format!("{dir}/base-200m-s95.toml"))?;
    let looped = ModelSpec::load(format!("{dir}/smelt-200m-s95.toml"))?;

    let cmp = compare(&baseline, &looped)?;
    println!(
        "{:>16} {:>16} {:>16} {:>9}",
        "", "baseline", "looped", "residual"
    );
    let rows = [
        (
            "FLOPs/token",
            cmp.baseline.flops_per_token.training.as_f64(),
            cmp.model.flops_per_token.training.as_f64(),
            cmp.residuals.flops,
        ),
        (
            "params",
            cmp.baseline.params.total.as_f64(),
            cmp.model.params.total.as_f64(),
            cmp.residuals.params,
        ),
        (
            "KV elems/token",
            cmp.baseline.kv_cache_per_token.elements.as_f64(),
            cmp.model.kv_cache_per_token.elements.as_f64(),
            cmp.residuals.kv,
        ),
    ];
    for (name, b, m, r) in rows {
        println!("{name:>16} {b:>16.4e} {m:>16.4e} {:>+8.2}%", r * 100.0);
    }
    // The matched model as a model file a launcher can store.
    print!("{}", looped.to_toml_string()?);
    Ok(())
}
