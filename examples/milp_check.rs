//! Solves a budget with the exact solver and with the MILP cross-check, side by side.
//!
//! Run: `cargo run --release --example milp_check -- budgets/match-200m-s95-small.toml`

use std::time::Instant;

use smelt::budget::Budget;
use smelt::search;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(|| {
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/budgets/match-200m-s95-small.toml"
        )
        .to_owned()
    });
    let budget = Budget::load(&path)?;
    let t = Instant::now();
    let exact = search::solve(&budget, 1)?;
    let t_exact = t.elapsed();
    let t = Instant::now();
    let milp = search::milp::solve(&budget)?;
    let t_milp = t.elapsed();
    println!(
        "exact: largest |r| = {:.6} in {:?} ({} lattice points, {} costed)",
        exact.best().score[0],
        t_exact,
        exact.stats.lattice_points,
        exact.stats.evaluated
    );
    println!("milp:  largest |r| = {:.6} in {:?}", milp.objective, t_milp);
    Ok(())
}
