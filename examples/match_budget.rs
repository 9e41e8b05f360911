//! Matches a budget file with the library and prints the best configurations.
//!
//! Run: `cargo run --release --example match_budget -- budgets/match-200m-s95.toml`

use smelt::budget::Budget;
use smelt::search;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(|| {
        concat!(env!("CARGO_MANIFEST_DIR"), "/budgets/match-200m-s95.toml").to_owned()
    });
    let budget = Budget::load(&path)?;
    let solution = search::solve(&budget, 5)?;
    for c in &solution.ranked {
        let m = &c.model;
        println!(
            "H={} E={} f={} heads={} kv={} d={}  F {:+.3}%  N {:+.3}%  KV {:+.3}%",
            m.hidden,
            m.moe.experts,
            m.moe.expert_ffn,
            m.heads,
            m.kv_heads,
            m.head_dim,
            c.residuals.flops * 100.0,
            c.residuals.params * 100.0,
            c.residuals.kv * 100.0
        );
    }
    println!("{:?}", solution.stats);
    // The matched model as a model file.
    print!(
        "{}",
        search::model_spec(&budget, solution.best()).to_toml_string()?
    );
    Ok(())
}
